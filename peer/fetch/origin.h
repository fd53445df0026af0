/* origin.h - the S3 chunk fetcher.
 *
 * Keeps up to max_inflight ranged GETs in flight, each for one chunk the
 * scheduler (peer_sched_next with PEER_SRC_ORIGIN) handed out. Each body
 * goes through the inbound-chunk machine (inbound.h): copied into buffers
 * of the bounded pool, written in order to the chunk's offset in the
 * partial file and hashed while being written; when no buffer is free the
 * transfer is paused (WS_S3_DATA_PAUSE) and resumed when a write returns
 * one. Once every byte is written, a worker compares the digest with the
 * manifest's chunk hash and commits the chunk; the result goes to
 * peer_file_chunk_done(PEER_SRC_ORIGIN, ...).
 *
 * A transfer whose rest should arrive within about one GET's time to first
 * byte is "ending": the swarm's origin gate then hands out a spare lease,
 * so the next body follows this one without a gap.
 *
 * The fetcher registers itself as a listener on the files table: kick
 * starts transfers, file_failed cancels the file's transfers.
 *
 * Thread: loop thread (writes, hash and commit on workers).
 */
#ifndef PEER_FETCH_ORIGIN_H
#define PEER_FETCH_ORIGIN_H

#include "core/ctx.h"
#include "fetch/file.h"

typedef struct peer_origin_s peer_origin_t;

/* Creates the fetcher on ctx (its S3 client, buffer pool and worker queue)
 * for the files of files, and registers it as a listener there. */
int peer_origin_new(peer_ctx_t *ctx, peer_files_t *files, unsigned max_inflight,
                    peer_origin_t **out) WS_MUST_USE;
/* Starts transfers while slots are free, the context is running and the
 * scheduler has chunks. NULL is fine. */
void peer_origin_kick(peer_origin_t *o);
/* Cancels the transfers of one file (it failed or nobody needs it). */
void peer_origin_cancel_file(peer_origin_t *o, peer_file_t *file);
/* Cancels every transfer and starts no new one. */
void peer_origin_stop(peer_origin_t *o);
/* 1 if chunk j of file is being fetched and not yet in its last stretch
 * (see tunables.h, PEER_ORIGIN_LEAD_MAX_MS). */
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
/* Unregisters and frees the fetcher; no transfer may be left. NULL is
 * fine. The files table must still be there. */
void peer_origin_free(peer_origin_t *o);

#endif
