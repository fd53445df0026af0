/* upload.h - what we upload to neighbours: verified chunks (from a blob or
 * from the partial, only chunks whose hash checked), chunks still arriving
 * from S3 ("live"), and manifests.
 *
 * Each neighbour has a queue of at most PEER_SERVE_QUEUE_MAX requests and
 * one upload streaming at a time (wire_conn carries one payload at a time);
 * uploads over all neighbours are capped at PEER_UPLOADS_MAX, beyond which
 * requests get REJECT busy with a retry time; the last PEER_UPLOADS_SPARE
 * go only to a neighbour with none, and a neighbour that holds slots and
 * does not read is closed (peer_upload_tick). To a neighbour whose BITFIELD
 * said "mux", every chunk goes as CHUNK pieces, and up to WS_MUX_MAX
 * uploads stream at once, their pieces interleaved: at most one of a chunk
 * we hold and the rest of chunks still arriving from S3.
 *
 * Files: upload.c (the queues, manifests) starts uploads of upload_chunk.c
 * (one chunk to one neighbour), which returns through u->next.
 *
 * Owns: the upload objects, their buffers and fds, manifest copies being
 * sent, the upload rate bucket. Borrows: the context, the records (what we
 * hold), the origin (how much of a live chunk is written).
 * Thread: loop thread; the blob open runs on a worker.
 */
#ifndef PEER_SWARM_UPLOAD_H
#define PEER_SWARM_UPLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ctx.h"
#include "fetch/file.h"
#include "fetch/origin.h"
#include "swarm/neighbor.h"
#include "swarm/rate.h"
#include "swarm/swarm_release.h"

typedef struct peer_upload_s peer_upload_t;

typedef struct peer_uploads_s {
  peer_ctx_t *ctx;
  peer_swarm_rels_t *rels; /* borrowed */
  peer_origin_t *origin;   /* borrowed */
  peer_rate_t up_rate;     /* --upload-rate, over all neighbours */
  unsigned uploads;        /* chunk uploads streaming */
  unsigned mani_sends;     /* manifests being sent */
  unsigned alive;          /* upload objects not yet freed (shutdown) */
  uint64_t started;        /* chunk uploads begun (their debug-log number) */
  uint64_t contended_ms;   /* a request was last refused for want of a slot */
  bool stopping;
  /* An upload of n ended: its queue moves on (upload_chunk.c calls it;
   * peer_upload_next). */
  void (*next)(struct peer_uploads_s *u, peer_neighbor_t *n);
} peer_uploads_t;

/* Sets u up with its collaborators (borrowed for its whole life) and the
 * upload rate from ctx->cfg. */
void peer_uploads_init(peer_uploads_t *u, peer_ctx_t *ctx,
                       peer_swarm_rels_t *rels, peer_origin_t *origin);

/* A REQUEST or MANIFEST_REQ from n: queue it or REJECT it. */
void peer_upload_request(peer_uploads_t *u, peer_neighbor_t *n, uint8_t type,
                         const ws_request_t *r);
/* CANCEL from n: drop the queued request or end the upload in pieces. */
void peer_upload_cancel(peer_uploads_t *u, peer_neighbor_t *n,
                        const ws_request_t *r);
/* Starts n's next uploads when it has room (after one ended, on drain,
 * after a rate wait). */
void peer_upload_next(peer_uploads_t *u, peer_neighbor_t *n);
/* Write-progress deadline of n's uploads: n holds upload slots and its
 * socket took no byte for PEER_UPLOAD_STALL_MS (PEER_UPLOAD_STALL_BUSY_MS
 * while others were refused a slot): n is closed, 1. */
int peer_upload_tick(peer_uploads_t *u, peer_neighbor_t *n, uint64_t now_ms);
/* n is closing: its queue is dropped, its uploads finish without it. */
void peer_upload_detach(peer_uploads_t *u, peer_neighbor_t *n);
/* More of chunk j of file arrived from origin, or its fetch ended: the
 * uploads sending it as it arrives send more, finish or fail. */
void peer_upload_live_progress(peer_uploads_t *u, peer_neighbors_t *nbrs,
                               peer_file_t *file, uint32_t j);

#endif
