/* inbound.h - one chunk arriving from any source: the one inbound-chunk
 * machine shared by the S3 origin fetcher (origin.c) and neighbour
 * downloads (swarm/download.c).
 *
 * The owner feeds the chunk's bytes in order with peer_inbound_data. They
 * are copied into buffers of the context's bounded pool; every full buffer
 * (and the last, partial one, and one that has waited PEER_BUF_FORWARD_MS
 * holding PEER_BUF_FORWARD_MIN_BYTES) goes to the chunk writer
 * (chunk_writer.h),
 * which writes the buffers in order at the chunk's offset in the partial
 * file and hashes each while writing it (no byte is read back from disk or
 * the page cache). Once the owner has ended the input and every write has
 * returned, a worker compares the digest with the manifest's chunk hash and
 * commits the chunk; then done() runs once with the outcome. Manifests
 * without chunk hashes (whole-file mode) commit unchecked: the file's
 * sha256 decides at the end.
 *
 *   RECEIVING --end(0), all bytes--> DRAINING --writes back--> VERIFYING
 *   RECEIVING --end, after an error--> DRAINING --writes back--> done(error)
 *   VERIFYING --worker--> done(0 | WS_EDIGEST | store error)
 *
 * The inbound frees itself right before done() runs; the owner reports to
 * the file from there (origin: peer_file_chunk_done(PEER_SRC_ORIGIN, ...);
 * download: ban the sender on WS_EDIGEST, and so on).
 *
 * Back-pressure, one of two modes chosen at creation:
 *
 *   PEER_INBOUND_ALL_OR_NONE: a piece is taken whole or not at all. When the
 *   pool lacks the buffers for it, peer_inbound_data takes nothing and
 *   returns PEER_INBOUND_PAUSE; wake() runs when a buffer comes back and the
 *   owner offers the piece again (an S3 body: the curl transfer pauses).
 *
 *   PEER_INBOUND_RESERVE: a piece is always taken whole (a wire connection
 *   hands it out once), so after each piece the inbound keeps room for the
 *   next one of up to `room` bytes (a spare buffer). When it cannot,
 *   peer_inbound_data (or peer_inbound_reserve) returns PEER_INBOUND_PAUSE
 *   after taking the piece; wake() runs once the spare is reserved and the
 *   owner resumes reading.
 *
 * Owns: its buffers while they are filled or written, its writes and its
 * verify job. Borrows ctx and file: the owner holds a file reference and
 * keeps chunk j INFLIGHT until done() has run.
 *
 * Thread: loop thread (the writes and the verify run on workers and touch
 * only the chunk writer and the store handle).
 */
#ifndef PEER_FETCH_INBOUND_H
#define PEER_FETCH_INBOUND_H

#include <stddef.h>
#include <stdint.h>

#include "core/ctx.h"
#include "fetch/file.h"

typedef struct peer_inbound_s peer_inbound_t;

typedef enum {
  PEER_INBOUND_ALL_OR_NONE, /* take a piece whole or not at all */
  PEER_INBOUND_RESERVE      /* take every piece, keep room for the next */
} peer_inbound_mode_t;

/* peer_inbound_data / peer_inbound_reserve: the producer must pause until
 * wake() (see the modes above). */
#define PEER_INBOUND_PAUSE 1

typedef struct {
  peer_inbound_mode_t mode;
  size_t room; /* RESERVE: the largest piece the producer hands over */
  void *arg;   /* first argument of every callback */
  /* A buffer is there after PEER_INBOUND_PAUSE: resume the producer. Runs
   * only while the input has not ended. */
  void (*wake)(void *arg);
  /* More of the chunk is in the partial file: written bytes, in order from
   * the chunk's start (written, not yet verified). May be NULL. */
  void (*progress)(void *arg, uint64_t written);
  /* The chunk failed while the input may still be coming (a write failed,
   * or peer_inbound_fail): stop the producer, e.g. cancel the request. Runs
   * at most once, never inside done(). May be NULL. */
  void (*failed)(void *arg, int status);
  /* Once, the outcome, after the inbound is freed: 0 (verified and
   * committed), WS_EDIGEST (nothing committed), or the first error (the
   * status given to end or fail, WS_ETRUNCATED when the input ended early,
   * WS_ECANCELED when the partial was closed, a write or store error;
   * the local disk's errors come as WS_ENOSPC or WS_EIO, see
   * ws_err_disk).
   * errmsg is never NULL ("" when there is nothing to add), borrowed for the
   * call. */
  void (*done)(void *arg, int status, const char *errmsg);
} peer_inbound_ops_t;

/* Starts receiving chunk j of file (INFLIGHT, held by the owner). ops is
 * copied. 0 or -ENOMEM (*out untouched, no callback). */
int peer_inbound_new(peer_ctx_t *ctx, peer_file_t *file, uint32_t j,
                     const peer_inbound_ops_t *ops,
                     peer_inbound_t **out) WS_MUST_USE;
/* Frees an inbound that was given no data and not ended (its producer
 * could not start). done() is not called. */
void peer_inbound_free(peer_inbound_t *in);

/* Takes the next len bytes of the chunk (they follow the previous piece).
 * Returns 0 (taken), PEER_INBOUND_PAUSE (see the modes) or a negative
 * error: the inbound has failed (WS_EPROTO: more bytes than the chunk has;
 * WS_ELIMIT: RESERVE mode and no buffer, a piece larger than `room`; or the
 * first error so far); the owner ends it. done() never runs in here. */
int peer_inbound_data(peer_inbound_t *in, const void *data,
                      size_t len) WS_MUST_USE;
/* RESERVE mode: makes sure a buffer is there for the first piece: 0, or
 * PEER_INBOUND_PAUSE (wake() follows once one is reserved). 0 in the other
 * mode. */
int peer_inbound_reserve(peer_inbound_t *in);
/* Fails the chunk now (status < 0, msg may be NULL); the first error wins.
 * failed() runs if this is the first. The owner still ends the input. */
void peer_inbound_fail(peer_inbound_t *in, int status, const char *msg);
/* The input ended: status 0 (every byte should be there; else the chunk
 * fails with WS_ETRUNCATED) or an error. msg (may be NULL) says why, for
 * either. The first error of the inbound wins. The inbound finishes on its
 * own and done() may run before this returns; in must not be used after. */
void peer_inbound_end(peer_inbound_t *in, int status, const char *msg);

/* Bytes taken so far. */
uint64_t peer_inbound_received(const peer_inbound_t *in);
/* Bytes in the partial file so far, in order from the chunk's start. */
uint64_t peer_inbound_written(const peer_inbound_t *in);
/* The chunk's length. */
uint32_t peer_inbound_len(const peer_inbound_t *in);
/* The first error, 0 while all is well. */
int peer_inbound_status(const peer_inbound_t *in);
/* 1 until the input ended (peer_inbound_end). */
int peer_inbound_receiving(const peer_inbound_t *in);

#endif
