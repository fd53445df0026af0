/* download.h - one chunk arriving from a neighbour, fed into the fetch
 * layer's inbound-chunk machine (fetch/inbound.h, the same one the S3
 * origin uses): payload pieces are copied into pool buffers, written in
 * order at the chunk's offset in the partial file and hashed while being
 * written; once the payload ended and every write returned, a worker checks
 * the manifest's chunk hash and commits the chunk.
 *
 * Outcome, reported to the file as peer_file_chunk_done(PEER_SRC_PEER):
 * verified -> 0; hash mismatch -> the sender is banned and the chunk goes
 * back (WS_EDIGEST, counted by the file); a local disk error (WS_ENOSPC,
 * WS_EIO) -> as is: the file fails, and with it the releases that wait for
 * it (the sender is not to blame); anything else from the network side
 * (connection lost, short payload) -> WS_ECANCELED, the chunk is fetched
 * again. Whole-file manifests (no chunk hashes) commit
 * unchecked: the file's sha256 decides at the end.
 *
 * Back-pressure: a piece is always taken whole (wire_conn hands it out
 * once), so a download keeps room for the next one (<= WIRE_READ_BUF_BYTES);
 * when the pool has no spare, the neighbour pauses its reads and the
 * download's wake callback resumes them once a buffer is reserved.
 *
 * Served on as it arrives: while a download's bytes come in, the chunk is
 * "arriving" here like a chunk being fetched from S3 (peer_downloads_live):
 * its start tells the neighbours (HAVE "p") and each written piece may go
 * on at once to neighbours that asked for it (upload_chunk.c), so a chunk
 * crosses every hop of the swarm a piece behind the previous hop instead
 * of a whole chunk behind.
 *
 * Owns: the inbound while it runs. Holds a file reference and keeps the
 * chunk INFLIGHT (rx_busy) until it reports. Borrows the neighbour weakly
 * through its wake callback, dropped at peer_download_end.
 * Thread: loop thread (writes and verify on workers, inside the inbound).
 */
#ifndef PEER_SWARM_DOWNLOAD_H
#define PEER_SWARM_DOWNLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "core/ctx.h"
#include "fetch/file.h"
#include "fetch/inbound.h"
#include "proto.h"

typedef struct peer_download_s peer_download_t;

/* What every download shares: the context, the count of live ones, and
 * what their outcome means upstream (set by the swarm at creation). */
typedef struct peer_downloads_s {
  peer_ctx_t *ctx;
  unsigned alive;               /* downloads not yet reported (for shutdown) */
  struct peer_download_s *head; /* those not yet reported */
  void *arg;
  /* The sender of a chunk that failed its hash: ban it. */
  void (*ban)(void *arg, const char *node_id, const char *host, uint16_t port,
              const char *why);
  /* A download reported (its chunk is DONE or back to be fetched): the
   * pipelines may start more work. */
  void (*reported)(void *arg);
  /* While a verified chunk is reported to its file: the node id of the
   * neighbour it came from (the chunk_done listeners read it); else NULL. */
  const char *sender;
} peer_downloads_t;

/* Starts receiving chunk j of file (INFLIGHT, taken by a request of the
 * sender) from node_id at host:port; marks it rx_busy and takes a file
 * reference. wake(wake_arg) resumes the sender's reads after a pause.
 * NULL when out of memory (nothing taken). */
peer_download_t *peer_download_new(peer_downloads_t *dls, peer_file_t *file,
                                   uint32_t j, const char *node_id,
                                   const char *host, uint16_t port,
                                   void (*wake)(void *), void *wake_arg);
/* 1 when chunk j of file is arriving from a neighbour now with no error so
 * far, *written its bytes in the partial file (in order from the chunk's
 * start, not yet verified); else 0. */
int peer_downloads_live(const peer_downloads_t *dls, const peer_file_t *file,
                        uint32_t j, uint64_t *written);
/* Reserves the buffer the payload's first piece goes into: 0, or
 * PEER_INBOUND_PAUSE (the sender pauses reading until wake). */
int peer_download_reserve(peer_download_t *dl);
/* Takes a payload piece (all of it): 0, PEER_INBOUND_PAUSE (pause reading
 * until wake: no room for the next piece), or an error (the download
 * failed; the connection should close, and the download still be ended).
 * After a local disk error pieces are dropped and 0 returned: the link is
 * fine. */
int peer_download_data(peer_download_t *dl, const uint8_t *p,
                       size_t len) WS_MUST_USE;
/* 1 when dl's file is in its endgame (fetching, every chunk it lacks in
 * flight). */
int peer_download_endgame(const peer_download_t *dl);
/* The payload ended (status 0) or the connection dropped (status < 0): the
 * download finishes on its own (writes, verify, report) and forgets its
 * sender; dl must not be used after. */
void peer_download_end(peer_download_t *dl, int status);

#endif
