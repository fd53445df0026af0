/* upload_chunk.h - one chunk going to one neighbour (upload_chunk.c): the
 * upload object that upload.c's queue starts.
 *
 *   OPENING (blob open on a worker) --> STREAMING --all sent/failed-->
 *   CLOSING (fd closing with uv_fs_close) --> freed
 *
 * When an upload ends, n's queue moves on through u->next (set by
 * upload.c): the return path is that callback, not a call back into
 * upload.c. Thread: loop thread; the blob open runs on a worker.
 */
#ifndef PEER_SWARM_UPLOAD_CHUNK_H
#define PEER_SWARM_UPLOAD_CHUNK_H

#include <stdbool.h>
#include <stdint.h>

#include "swarm/upload.h"

/* REJECT to n (chunk UINT32_MAX: a manifest ask); counted. */
void peer_upload_reject(peer_uploads_t *u, peer_neighbor_t *n,
                        const uint8_t *digest, uint32_t chunk, uint32_t req_id,
                        ws_reject_reason_t why);
/* 1 when n takes the chunks of release digest in interleaved pieces. */
bool peer_upload_mux(peer_neighbor_t *n, const uint8_t *digest);
/* 1 when we hold chunk g of rel, or are fetching it from S3 now and n
 * takes chunks in pieces. */
int peer_upload_can(peer_neighbor_t *n, peer_swarm_rel_t *rel, uint32_t g);
/* 1 when up sends a chunk not verified here yet (arriving from S3). */
bool peer_upload_is_live(const peer_upload_t *up);
/* Starts uploading the chunk of request r to n (n has room), or REJECTs. */
void peer_upload_chunk_start(peer_uploads_t *u, peer_neighbor_t *n,
                             const ws_request_t *r);
/* Pumps n's uploads whose chunk is (file, j), or all when file is NULL. */
void peer_upload_chunk_pump(peer_neighbor_t *n, const peer_file_t *file,
                            uint32_t j);
/* CANCEL r from n of an upload in pieces: it ends. 1 when there was one. */
int peer_upload_chunk_cancel(peer_neighbor_t *n, const ws_request_t *r);
/* n is closing: its uploads finish without it. */
void peer_upload_chunk_detach(peer_neighbor_t *n);

#endif
