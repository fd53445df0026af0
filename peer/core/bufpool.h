/* bufpool.h - a bounded pool of fixed-size byte buffers: the memory that
 * chunks in flight use stays bounded whatever the release size or the
 * number of transfers.
 *
 * All buffers are allocated at creation; get() never allocates. A consumer
 * that finds the pool empty parks a peer_bufwait_t and stops its producer
 * (pauses the S3 transfer or the neighbour's reads); put() wakes the
 * oldest parked waiter.
 *
 * Owns: every buffer and the FIFO of parked waiters (the waiter structs
 * are the consumers').
 * Thread: loop thread only.
 */
#ifndef PEER_BUFPOOL_H
#define PEER_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

typedef struct peer_bufpool_s peer_bufpool_t;

typedef struct peer_buf_s {
  struct peer_buf_s *next_free; /* pool's free list; NULL while lent */
  size_t len;                   /* bytes filled by the borrower */
  size_t cap;                   /* capacity (the pool's buffer size) */
  char *data;
  struct peer_buf_s *next; /* the borrower's queue (chunk_writer.c) */
  uint64_t off;            /* the borrower's file offset (chunk_writer.c) */
} peer_buf_t;

typedef struct peer_bufwait_s peer_bufwait_t;
/* A buffer came back; the waiter was removed from the queue before this
 * runs and may call peer_bufpool_get or park itself again. */
typedef void (*peer_bufwait_cb)(peer_bufwait_t *w);
struct peer_bufwait_s {
  peer_bufwait_t *next;
  peer_bufwait_cb cb;
  int queued;
};

/* Creates a pool of count buffers of buf_bytes each. *out is new. */
int peer_bufpool_new(size_t buf_bytes, unsigned count,
                     peer_bufpool_t **out) WS_MUST_USE;
/* Frees the pool; every buffer must be back. NULL is fine. */
void peer_bufpool_free(peer_bufpool_t *p);

/* Lends a buffer (len 0) or returns NULL when none is free. */
peer_buf_t *peer_bufpool_get(peer_bufpool_t *p);
/* Takes b back and wakes the oldest waiter, if any. */
void peer_bufpool_put(peer_bufpool_t *p, peer_buf_t *b);
unsigned peer_bufpool_available(const peer_bufpool_t *p);
size_t peer_bufpool_buf_bytes(const peer_bufpool_t *p);
/* Most buffers ever lent at once (for tests and metrics). */
unsigned peer_bufpool_peak(const peer_bufpool_t *p);

/* Parks w (with w->cb set) until a buffer comes back; no-op if parked. */
void peer_bufpool_wait(peer_bufpool_t *p, peer_bufwait_t *w);
/* Wakes up to as many waiters as buffers are free (after a woken
 * consumer went away without taking its buffer). */
void peer_bufpool_kick(peer_bufpool_t *p);
/* Unparks w if parked. */
void peer_bufpool_unwait(peer_bufpool_t *p, peer_bufwait_t *w);

#endif
