/* inbound.c - the one inbound-chunk machine (see inbound.h for the states
 * and the two back-pressure modes).
 *
 * Owns: the buffers it fills (cur), the one it keeps for the next piece
 * (spare), the chunk writer with the buffers queued on it, and the verify
 * job. Borrows the context's pool and worker queue, and the file.
 * Thread: loop thread; inbound_verify_work runs on a worker and touches
 * only the chunk writer and the store handle (open while the chunk is
 * INFLIGHT).
 */
#include "fetch/inbound.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "fetch/chunk_writer.h"

typedef enum {
  INBOUND_RECEIVING,
  INBOUND_DRAINING,
  INBOUND_VERIFYING,
  INBOUND_STATE_LAST
} inbound_state_t;

struct peer_inbound_s {
  peer_ctx_t *ctx;
  peer_file_t *file; /* borrowed: the owner holds a reference */
  uint32_t j;
  uint32_t len;
  uint64_t off; /* chunk's first byte in the file */
  inbound_state_t state;
  peer_inbound_ops_t ops;
  uint64_t received; /* bytes taken */
  uint64_t written;  /* bytes in the partial file, in order from off */
  peer_buf_t *cur;   /* filling; written when full, at the chunk's end, or
                        once it waited (inbound_copy) */
  uint64_t cur_off;  /* file offset of cur->data[0] */
  uint64_t cur_ms;   /* loop time of cur's first byte */
  peer_buf_t *spare; /* RESERVE: kept for the next piece */
  unsigned writes;   /* buffers on the chunk writer */
  int status;        /* first error */
  char errmsg[256];
  peer_bufwait_t wait;
  peer_chunk_writer_t cw; /* ordered, hashed writes of the chunk */
};

static void inbound_maybe_finish(peer_inbound_t *in);
static void inbound_written(void *arg, peer_buf_t *buf, int status);
static void inbound_wake(peer_bufwait_t *w);

static void inbound_set_state(peer_inbound_t *in, inbound_state_t to) {
  static const uint8_t legal[INBOUND_STATE_LAST][INBOUND_STATE_LAST] = {
      [INBOUND_RECEIVING] = {[INBOUND_DRAINING] = 1},
      [INBOUND_DRAINING] = {[INBOUND_VERIFYING] = 1},
  };
  assert(legal[in->state][to]);
  in->state = to;
}

int peer_inbound_new(peer_ctx_t *ctx, peer_file_t *file, uint32_t j,
                     const peer_inbound_ops_t *ops, peer_inbound_t **out) {
  peer_inbound_t *in = calloc(1, sizeof(*in));
  if (in == NULL)
    return -ENOMEM;
  in->ctx = ctx;
  in->file = file;
  in->j = j;
  in->off = (uint64_t)j * file->chunk_size;
  in->len = peer_file_chunk_len(file, j);
  in->ops = *ops;
  in->state = INBOUND_RECEIVING;
  in->wait.cb = inbound_wake;
  int rc = peer_chunk_writer_init(&in->cw, ctx, file, j, inbound_written, in);
  if (rc != 0) {
    free(in);
    return rc;
  }
  *out = in;
  return 0;
}

/* Gives back what the inbound still holds and frees it. */
static void inbound_release(peer_inbound_t *in) {
  peer_bufpool_t *pool = in->ctx->pool;
  peer_bufpool_unwait(pool, &in->wait);
  if (in->cur != NULL)
    peer_bufpool_put(pool, in->cur);
  if (in->spare != NULL)
    peer_bufpool_put(pool, in->spare);
  in->cur = in->spare = NULL;
  peer_chunk_writer_cleanup(&in->cw);
  free(in);
}

void peer_inbound_free(peer_inbound_t *in) {
  if (in == NULL)
    return;
  assert(in->state == INBOUND_RECEIVING && in->writes == 0);
  inbound_release(in);
}

/* Records the first error; later ones are dropped. */
static int inbound_set_error(peer_inbound_t *in, int err, const char *msg) {
  if (in->status != 0)
    return 0;
  in->status = err;
  snprintf(in->errmsg, sizeof(in->errmsg), "%s",
           msg != NULL ? msg : ws_strerror(err));
  return 1;
}

void peer_inbound_fail(peer_inbound_t *in, int status, const char *msg) {
  if (inbound_set_error(in, status, msg) && in->state == INBOUND_RECEIVING &&
      in->ops.failed != NULL)
    in->ops.failed(in->ops.arg, status);
}

/* ---- writes ------------------------------------------------------------- */

/* Fails the chunk with a write error, saying which chunk and why (the file
 * adds its name): "writing chunk 3: no space left on the cache's disk". */
static void inbound_write_failed(peer_inbound_t *in, int status) {
  char msg[128];
  snprintf(msg, sizeof(msg), "writing chunk %u: %s", in->j,
           ws_strerror(status));
  peer_inbound_fail(in, status, msg);
}

static void inbound_written(void *arg, peer_buf_t *buf, int status) {
  peer_inbound_t *in = arg;
  peer_bufpool_t *pool = in->ctx->pool;
  if (status != 0)
    inbound_write_failed(in, status);
  in->writes--;
  if (status == 0 && in->status == 0) {
    in->written += buf->len;
    /* Uploads streaming this chunk as it arrives may send more. */
    if (in->ops.progress != NULL)
      in->ops.progress(in->ops.arg, in->written);
  }
  /* in may be freed here; put() then wakes a parked producer (which may
   * deliver data at once), so it comes last. */
  inbound_maybe_finish(in);
  peer_bufpool_put(pool, buf);
}

/* Hands cur to the chunk writer; the buffer comes back in
 * inbound_written. */
static void inbound_flush(peer_inbound_t *in) {
  peer_bufpool_t *pool = in->ctx->pool;
  peer_buf_t *buf = in->cur;
  in->cur = NULL;
  if (buf == NULL)
    return;
  if (buf->len == 0 || in->status != 0) {
    peer_bufpool_put(pool, buf);
    return;
  }
  int rc = peer_chunk_writer_write(&in->cw, buf, in->cur_off);
  if (rc != 0) {
    inbound_write_failed(in, rc);
    peer_bufpool_put(pool, buf);
    return;
  }
  in->writes++;
}

/* ---- taking bytes ------------------------------------------------------- */

static void inbound_wake(peer_bufwait_t *w) {
  peer_inbound_t *in =
      (peer_inbound_t *)((char *)w - offsetof(peer_inbound_t, wait));
  peer_bufpool_t *pool = in->ctx->pool;
  if (in->state != INBOUND_RECEIVING)
    return;
  if (in->ops.mode == PEER_INBOUND_RESERVE) {
    if (in->spare == NULL)
      in->spare = peer_bufpool_get(pool);
    if (in->spare == NULL) {
      peer_bufpool_wait(pool, &in->wait);
      return;
    }
  }
  in->ops.wake(in->ops.arg);
}

/* The next buffer: the reserved spare, else one from the pool. */
static peer_buf_t *inbound_next_buf(peer_inbound_t *in) {
  peer_buf_t *b = in->spare;
  in->spare = NULL;
  if (b == NULL)
    b = peer_bufpool_get(in->ctx->pool);
  return b;
}

/* ALL_OR_NONE: 1 when the pool has the buffers len bytes need beyond the
 * room left in cur; else parks and returns 0. */
static int inbound_room_for(peer_inbound_t *in, size_t len) {
  peer_bufpool_t *pool = in->ctx->pool;
  size_t room = in->cur != NULL ? in->cur->cap - in->cur->len : 0;
  size_t bufsz = peer_bufpool_buf_bytes(pool);
  size_t need = len > room ? (len - room + bufsz - 1) / bufsz : 0;
  if (need <= peer_bufpool_available(pool))
    return 1;
  peer_bufpool_wait(pool, &in->wait);
  return 0;
}

/* Whether cur goes to the writer before it is full: it has waited
 * PEER_BUF_FORWARD_MS and holds PEER_BUF_FORWARD_MIN_BYTES, so a slow
 * transfer's bytes become servable onwards (progress) within about that
 * time, while a fast one still fills whole buffers. */
static bool inbound_cur_waited(const peer_inbound_t *in) {
  return in->cur->len >= PEER_BUF_FORWARD_MIN_BYTES &&
         uv_now(in->ctx->loop) - in->cur_ms >= PEER_BUF_FORWARD_MS;
}

/* Copies len bytes into buffers, handing each full one (and the chunk's
 * last, and one that waited) to the writer. 0, or WS_ELIMIT when no buffer
 * is there. */
static int inbound_copy(peer_inbound_t *in, const char *p, size_t len) {
  while (len > 0) {
    if (in->cur == NULL) {
      in->cur = inbound_next_buf(in);
      if (in->cur == NULL) {
        /* The room promise was broken (pieces larger than `room`): give
         * up on this chunk rather than buffer without bound. */
        peer_inbound_fail(in, WS_ELIMIT, "no buffer for the piece");
        return WS_ELIMIT;
      }
      in->cur_off = in->off + in->received;
      in->cur_ms = uv_now(in->ctx->loop);
    }
    size_t n = in->cur->cap - in->cur->len;
    if (n > len)
      n = len;
    memcpy(in->cur->data + in->cur->len, p, n);
    in->cur->len += n;
    in->received += n;
    p += n;
    len -= n;
    if (in->cur->len == in->cur->cap || in->received == in->len ||
        inbound_cur_waited(in))
      inbound_flush(in);
  }
  return 0;
}

int peer_inbound_data(peer_inbound_t *in, const void *data, size_t len) {
  assert(in->state == INBOUND_RECEIVING);
  if (in->status != 0)
    return in->status;
  if (len > in->len - in->received) {
    peer_inbound_fail(in, WS_EPROTO, "more bytes than the chunk has");
    return WS_EPROTO;
  }
  if (in->ops.mode == PEER_INBOUND_ALL_OR_NONE) {
    if (!inbound_room_for(in, len))
      return PEER_INBOUND_PAUSE;
    return inbound_copy(in, data, len);
  }
  int rc = inbound_copy(in, data, len);
  if (rc != 0 || in->received == in->len)
    return rc;
  /* Room for the next piece: what cur has left, else a spare. */
  size_t room = in->cur != NULL ? in->cur->cap - in->cur->len : 0;
  if (room >= in->ops.room || in->spare != NULL)
    return 0;
  return peer_inbound_reserve(in);
}

int peer_inbound_reserve(peer_inbound_t *in) {
  peer_bufpool_t *pool = in->ctx->pool;
  if (in->ops.mode != PEER_INBOUND_RESERVE)
    return 0;
  if (in->spare == NULL)
    in->spare = peer_bufpool_get(pool);
  if (in->spare != NULL)
    return 0;
  peer_bufpool_wait(pool, &in->wait);
  return PEER_INBOUND_PAUSE;
}

/* ---- verify and report -------------------------------------------------- */

/* Frees in, then tells the owner (done may free what in borrowed). */
static void inbound_finish(peer_inbound_t *in) {
  char msg[sizeof(in->errmsg)];
  void (*done)(void *, int, const char *) = in->ops.done;
  void *arg = in->ops.arg;
  int status = in->status;
  memcpy(msg, in->errmsg, sizeof(msg));
  inbound_release(in);
  done(arg, status, msg);
}

/* [worker] Checks the digest of what was written and commits the chunk. */
static void inbound_verify_work(void *arg) {
  peer_inbound_t *in = arg;
  in->status = peer_chunk_writer_verify(&in->cw);
}

static void inbound_verify_after(void *arg, int status) {
  peer_inbound_t *in = arg;
  if (status != 0)
    in->status = status;
  if (in->status != 0 && in->status != WS_EDIGEST)
    snprintf(in->errmsg, sizeof(in->errmsg), "committing chunk %u: %s", in->j,
             ws_strerror(in->status));
  inbound_finish(in);
}

static void inbound_maybe_finish(peer_inbound_t *in) {
  if (in->state != INBOUND_DRAINING || in->writes > 0)
    return;
  if (in->status == 0 && in->file->pf == NULL)
    inbound_set_error(in, WS_ECANCELED, "partial file closed");
  if (in->status != 0) {
    inbound_finish(in);
    return;
  }
  inbound_set_state(in, INBOUND_VERIFYING);
  int rc =
      peer_ctx_queue(in->ctx, inbound_verify_work, inbound_verify_after, in);
  if (rc != 0) {
    inbound_set_error(in, rc, "queueing verify");
    inbound_finish(in);
  }
}

void peer_inbound_end(peer_inbound_t *in, int status, const char *msg) {
  peer_bufpool_t *pool = in->ctx->pool;
  if (status != 0)
    inbound_set_error(in, status, msg);
  else if (in->received != in->len)
    inbound_set_error(in, WS_ETRUNCATED, msg != NULL ? msg : "ended early");
  peer_bufpool_unwait(pool, &in->wait);
  inbound_flush(in);
  inbound_set_state(in, INBOUND_DRAINING);
  inbound_maybe_finish(in); /* may free in */
  /* A producer woken for a buffer may end without taking it: pass the
   * wake-up on so no parked producer waits for a buffer that is free. */
  peer_bufpool_kick(pool);
}

/* ---- accessors ---------------------------------------------------------- */

uint64_t peer_inbound_received(const peer_inbound_t *in) {
  return in->received;
}

uint64_t peer_inbound_written(const peer_inbound_t *in) {
  return in->written;
}

uint32_t peer_inbound_len(const peer_inbound_t *in) {
  return in->len;
}

int peer_inbound_status(const peer_inbound_t *in) {
  return in->status;
}

int peer_inbound_receiving(const peer_inbound_t *in) {
  return in->state == INBOUND_RECEIVING;
}
