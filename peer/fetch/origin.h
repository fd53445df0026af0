/* origin.h - the S3 chunk fetcher.
 *
 * Keeps up to max_inflight ranged GETs in flight, each for one chunk the
 * scheduler (peer_sched_next with PEER_SRC_ORIGIN) handed out. Body bytes
 * are copied into buffers of the bounded pool and written to the chunk's
 * offset in the partial file with uv_fs_write; when no buffer is free the
 * transfer is paused (WS_S3_DATA_PAUSE) and resumed when a write returns
 * one. When a chunk's bytes are all written, a worker hashes it back (page
 * cache), compares it with the manifest's chunk hash and commits it to the
 * bitmap; the result goes to peer_file_chunk_done().
 *
 * Transfer states: RECEIVING (S3 request live) -> DRAINING (request done,
 * writes outstanding) -> VERIFYING (worker job) -> freed; an error or a
 * cancel skips VERIFYING. A RECEIVING transfer whose rest should arrive
 * within about one GET's time to first byte is "ending": the swarm then
 * starts a spare lease, so the next body follows this one without a gap.
 *
 * Thread: loop thread (hash + commit on workers).
 */
#ifndef PEER_ORIGIN_H
#define PEER_ORIGIN_H

#include "daemon.h"
#include "fetch/file.h"

/* Creates the fetcher on d (its s3 client and buffer pool). */
int peer_origin_new(peer_daemon_t *d, unsigned max_inflight,
                    peer_origin_t **out) WS_MUST_USE;
/* Starts transfers while slots are free and the scheduler has chunks. */
void peer_origin_kick(peer_origin_t *o);
/* Cancels the transfers of one file (it failed or nobody needs it). */
void peer_origin_cancel_file(peer_origin_t *o, peer_file_t *file);
/* Cancels every transfer and starts no new one. */
void peer_origin_stop(peer_origin_t *o);
/* 1 if chunk j of file is being fetched and not yet in its last stretch
 * (see peer_config.h, PEER_ORIGIN_LEAD_MAX_MS). */
int peer_origin_streaming(const peer_origin_t *o, const peer_file_t *file,
                          uint32_t j);
/* 1 while chunk j of file is being fetched and nothing has failed yet;
 * *written: its bytes in the partial file so far, in order from its start
 * (written, not yet verified). 0 when no transfer has it. */
int peer_origin_live(const peer_origin_t *o, const peer_file_t *file,
                     uint32_t j, uint64_t *written);
/* The chunks being fetched now (as peer_origin_live says 1), at most max:
 * their files (borrowed) and indexes. Returns how many. */
unsigned peer_origin_list(const peer_origin_t *o, peer_file_t **files,
                          uint32_t *js, unsigned max);
/* Transfers not yet finished (including their writes and hash jobs). */
unsigned peer_origin_inflight(const peer_origin_t *o);
/* Frees the fetcher; no transfer may be left. NULL is fine. */
void peer_origin_free(peer_origin_t *o);

#endif
