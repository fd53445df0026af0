/* origin.c - the S3 chunk fetcher (see origin.h for the data path and the
 * transfer states).
 *
 * Owns: the transfers (one per chunk in flight), their write requests and
 * their verify jobs. Borrows the daemon's S3 client and buffer pool.
 * Thread: loop thread; xfer_verify_work runs on a worker and touches only
 * the transfer and the store handle (which stays open while the file holds
 * a chunk INFLIGHT).
 */
#include "fetch/origin.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/bufpool.h"
#include "fetch/chunk_writer.h"
#include "core/tunables.h"
#include "swarm/swarm.h"
#include "ws_log.h"

typedef enum {
  XFER_RECEIVING,
  XFER_DRAINING,
  XFER_VERIFYING,
  XFER_STATE_LAST
} xfer_state_t;

typedef struct xfer_s xfer_t;
struct xfer_s {
  peer_origin_t *o;
  xfer_t *prev, *next;
  xfer_state_t state;
  peer_file_t *file; /* reference held */
  uint32_t j;
  uint64_t off; /* chunk's first byte in the file (and the object) */
  uint32_t len;
  uint64_t received; /* body bytes accepted */
  uint64_t written;  /* bytes in the partial file, in order from off */
  uint64_t start_ms; /* GET queued */
  uint64_t first_ms; /* first body byte (when got_first) */
  bool got_first;
  bool ending;      /* last stretch or done: a spare lease may start */
  ws_s3_req_t *req; /* NULL once done */
  peer_buf_t *cur;  /* filling; written when full or at the chunk's end */
  uint64_t cur_off; /* file offset of cur->data[0] */
  unsigned writes;  /* uv_fs_write in flight */
  int status;       /* first error */
  char errmsg[256];
  peer_bufwait_t wait;
  peer_chunkw_t cw; /* ordered, hashed writes of the chunk */
};

struct peer_origin_s {
  peer_daemon_t *d;
  unsigned max_inflight;
  unsigned inflight;
  uint64_t lead_ms; /* moving average of GET -> first byte; 0: none yet */
  int stopped;
  xfer_t *head;
};

static void xfer_maybe_finish(xfer_t *x);

static void xfer_set_state(xfer_t *x, xfer_state_t to) {
  static const uint8_t legal[XFER_STATE_LAST][XFER_STATE_LAST] = {
      [XFER_RECEIVING] = {[XFER_DRAINING] = 1},
      [XFER_DRAINING] = {[XFER_VERIFYING] = 1},
  };
  assert(legal[x->state][to]);
  x->state = to;
}

int peer_origin_new(peer_daemon_t *d, unsigned max_inflight,
                    peer_origin_t **out) {
  peer_origin_t *o = calloc(1, sizeof(*o));
  if (o == NULL)
    return -ENOMEM;
  o->d = d;
  o->max_inflight = max_inflight;
  *out = o;
  return 0;
}

void peer_origin_free(peer_origin_t *o) {
  if (o == NULL)
    return;
  assert(o->inflight == 0);
  free(o);
}

unsigned peer_origin_inflight(const peer_origin_t *o) {
  return o->inflight;
}

static void xfer_fail(xfer_t *x, int err, const char *msg) {
  if (x->status != 0)
    return;
  x->status = err;
  snprintf(x->errmsg, sizeof(x->errmsg), "%s", msg ? msg : ws_strerror(err));
  if (x->req != NULL)
    ws_s3_req_cancel(x->req);
}

/* ---- writes ------------------------------------------------------------- */

static void xfer_written(void *arg, peer_buf_t *buf, int status) {
  xfer_t *x = arg;
  peer_bufpool_t *pool = x->o->d->pool;
  if (status != 0)
    xfer_fail(x, status, "writing partial file");
  x->writes--;
  if (status == 0 && x->status == 0) {
    x->written += buf->len;
    /* Neighbours streaming this chunk as it arrives may send more. */
    if (x->o->d->swarm != NULL)
      peer_swarm_chunk_progress(x->o->d->swarm, x->file, x->j);
  }
  /* x may be freed here; put() then resumes a paused transfer (which may
   * deliver data at once), so it comes last. */
  xfer_maybe_finish(x);
  peer_bufpool_put(pool, buf);
}

/* Queues cur for writing; the buffer travels with the write request. */
static void xfer_flush(xfer_t *x) {
  peer_buf_t *buf = x->cur;
  x->cur = NULL;
  if (buf == NULL)
    return;
  if (buf->len == 0 || x->status != 0) {
    peer_bufpool_put(x->o->d->pool, buf);
    return;
  }
  int rc = peer_chunkw_write(&x->cw, buf, x->cur_off);
  if (rc != 0) {
    xfer_fail(x, rc, "writing partial file");
    peer_bufpool_put(x->o->d->pool, buf);
    return;
  }
  x->writes++;
}

/* ---- overlap ------------------------------------------------------------ */

/* Marks x ending (the tracker's spare lease may start) once the rest of
 * its body should take no longer than a new GET takes to bring its first
 * byte: by the rate so far, remaining <= 1.5 x lead. The next fetch's first
 * byte then arrives about when this one's last does, and the origin's link
 * has no gap between them. */
static void xfer_note_progress(xfer_t *x) {
  peer_origin_t *o = x->o;
  uint64_t now = uv_now(&o->d->loop);
  if (x->ending)
    return;
  if (!x->got_first) {
    x->got_first = true;
    x->first_ms = now;
    uint64_t ttfb = now - x->start_ms;
    o->lead_ms = o->lead_ms == 0 ? ttfb : (3 * o->lead_ms + ttfb) / 4;
    if (o->lead_ms > PEER_ORIGIN_LEAD_MAX_MS)
      o->lead_ms = PEER_ORIGIN_LEAD_MAX_MS;
    return;
  }
  uint64_t elapsed = now - x->first_ms;
  if (elapsed < PEER_ORIGIN_RATE_MIN_MS || x->received == 0)
    return;
  uint64_t left = x->len - x->received;
  /* left / (received / elapsed) <= 1.5 lead, without dividing. */
  if (left * elapsed * 2 <= 3 * o->lead_ms * x->received) {
    x->ending = true;
    peer_origin_kick(o);
  }
}

int peer_origin_live(const peer_origin_t *o, const peer_file_t *file,
                     uint32_t j, uint64_t *written) {
  for (const xfer_t *x = o->head; x != NULL; x = x->next) {
    if (x->file == file && x->j == j) {
      *written = x->written;
      return x->status == 0;
    }
  }
  return 0;
}

unsigned peer_origin_list(const peer_origin_t *o, peer_file_t **files,
                          uint32_t *js, unsigned max) {
  unsigned n = 0;
  for (const xfer_t *x = o->head; x != NULL && n < max; x = x->next) {
    if (x->status == 0) {
      files[n] = x->file;
      js[n++] = x->j;
    }
  }
  return n;
}

int peer_origin_streaming(const peer_origin_t *o, const peer_file_t *file,
                          uint32_t j) {
  for (const xfer_t *x = o->head; x != NULL; x = x->next) {
    if (x->file == file && x->j == j)
      return x->state == XFER_RECEIVING && !x->ending;
  }
  return 0;
}

/* ---- S3 callbacks ------------------------------------------------------ */

static void xfer_wake(peer_bufwait_t *w) {
  xfer_t *x = (xfer_t *)((char *)w - offsetof(xfer_t, wait));
  if (x->req != NULL)
    ws_s3_req_resume(x->req);
}

static int xfer_data(ws_s3_req_t *req, uint64_t offset, const void *data,
                     size_t len, void *arg) {
  xfer_t *x = arg;
  peer_bufpool_t *pool = x->o->d->pool;
  const char *p = data;
  if (x->status != 0)
    return x->status;
  if (offset != x->off + x->received || len > x->len - x->received) {
    xfer_fail(x, WS_ES3, "S3 body does not match the range asked");
    return WS_ES3;
  }
  if (x->file->etag == NULL) {
    const char *etag = ws_s3_req_etag(req);
    if (etag != NULL)
      x->file->etag = strdup(etag);
  }
  /* Accept all of data or none of it (the callback contract): count the
   * buffers it needs beyond the room in cur and pause if the pool lacks
   * them. */
  size_t room = x->cur != NULL ? x->cur->cap - x->cur->len : 0;
  size_t bufsz = peer_bufpool_buf_bytes(pool);
  size_t need = len > room ? (len - room + bufsz - 1) / bufsz : 0;
  if (need > peer_bufpool_available(pool)) {
    peer_bufpool_wait(pool, &x->wait);
    return WS_S3_DATA_PAUSE;
  }
  while (len > 0) {
    if (x->cur == NULL) {
      x->cur = peer_bufpool_get(pool);
      assert(x->cur != NULL);
      x->cur_off = x->off + x->received;
    }
    size_t n = x->cur->cap - x->cur->len;
    if (n > len)
      n = len;
    memcpy(x->cur->data + x->cur->len, p, n);
    x->cur->len += n;
    x->received += n;
    p += n;
    len -= n;
    if (x->cur->len == x->cur->cap || x->received == x->len)
      xfer_flush(x);
  }
  xfer_note_progress(x);
  return WS_S3_DATA_OK;
}

static void xfer_done(ws_s3_req_t *req, int status, void *arg) {
  xfer_t *x = arg;
  peer_bufpool_t *pool = x->o->d->pool;
  x->req = NULL;
  WS_LOGD("origin: %s chunk %u: body in %llu ms, first byte after %llu ms",
          x->file->mf.name, x->j,
          (unsigned long long)(uv_now(&x->o->d->loop) - x->start_ms),
          (unsigned long long)(x->got_first ? x->first_ms - x->start_ms : 0));
  peer_bufpool_unwait(x->o->d->pool, &x->wait);
  if (status != 0 && x->status == 0) {
    x->status = status;
    snprintf(x->errmsg, sizeof(x->errmsg), "%s", ws_s3_req_errmsg(req));
  }
  if (x->status == 0 && x->received != x->len)
    xfer_fail(x, WS_ETRUNCATED, "S3 body ended early");
  xfer_flush(x);
  xfer_set_state(x, XFER_DRAINING);
  if (!x->ending) {
    x->ending = true;
    peer_origin_kick(x->o);
  }
  xfer_maybe_finish(x);
  /* A transfer woken for a buffer may end without taking it: pass the
   * wake-up on so no parked transfer waits for a buffer that is free. */
  peer_bufpool_kick(pool);
}

/* ---- verify and complete ----------------------------------------------- */

static void xfer_complete(xfer_t *x, int status, int kick) {
  peer_origin_t *o = x->o;
  if (x->prev != NULL)
    x->prev->next = x->next;
  else
    o->head = x->next;
  if (x->next != NULL)
    x->next->prev = x->prev;
  o->inflight--;
  if (status == 0)
    o->d->metrics.s3_bytes_chunks += x->len;
  peer_file_t *file = x->file;
  uint32_t j = x->j;
  peer_chunkw_cleanup(&x->cw);
  peer_file_chunk_done(file, j, PEER_SRC_ORIGIN, status, x->errmsg);
  free(x);
  /* Uploads of the chunk as it arrived: the rest now, or they fail (x is
   * gone, so a retry is a new transfer). */
  if (o->d->swarm != NULL)
    peer_swarm_chunk_progress(o->d->swarm, file, j);
  peer_file_unref(file);
  if (kick)
    peer_origin_kick(o);
}

/* [worker] Checks the digest of what was written and commits the chunk. */
static void xfer_verify_work(void *arg) {
  xfer_t *x = arg;
  x->status = peer_chunkw_verify_commit(&x->cw);
}

static void xfer_verify_after(void *arg, int status) {
  xfer_t *x = arg;
  if (status != 0)
    x->status = status;
  if (x->status != 0 && x->status != WS_EDIGEST)
    snprintf(x->errmsg, sizeof(x->errmsg), "committing chunk %u: %s", x->j,
             ws_strerror(x->status));
  xfer_complete(x, x->status, 1);
}

static void xfer_maybe_finish(xfer_t *x) {
  if (x->state != XFER_DRAINING || x->writes > 0)
    return;
  if (x->status != 0) {
    xfer_complete(x, x->status, 1);
    return;
  }
  xfer_set_state(x, XFER_VERIFYING);
  int rc = peer_daemon_queue(x->o->d, xfer_verify_work, xfer_verify_after, x);
  if (rc != 0) {
    snprintf(x->errmsg, sizeof(x->errmsg), "queueing verify");
    xfer_complete(x, rc, 1);
  }
}

/* ---- scheduling -------------------------------------------------------- */

static int xfer_start(peer_origin_t *o, peer_file_t *file, uint32_t j) {
  xfer_t *x = calloc(1, sizeof(*x));
  if (x == NULL)
    return -ENOMEM;
  x->o = o;
  x->file = file;
  x->j = j;
  x->off = (uint64_t)j * file->chunk_size;
  x->len = peer_file_chunk_len(file, j);
  x->wait.cb = xfer_wake;
  x->state = XFER_RECEIVING;
  x->start_ms = uv_now(&o->d->loop);
  int rc = peer_chunkw_init(&x->cw, o->d, file, j, xfer_written, x);
  ws_s3_range_t range = {
      .offset = x->off, .len = x->len, .if_match = file->etag};
  x->next = o->head;
  if (o->head != NULL)
    o->head->prev = x;
  o->head = x;
  o->inflight++;
  if (rc == 0)
    x->req = ws_s3_get(o->d->s3, file->bucket, file->key, &range, xfer_data,
                       xfer_done, x);
  if (x->req == NULL) {
    /* Nothing will be called back: finish it here, outside any callback
     * of the transfer. */
    x->state = XFER_DRAINING;
    x->status = -ENOMEM;
    snprintf(x->errmsg, sizeof(x->errmsg), "starting S3 GET");
    xfer_complete(x, -ENOMEM, 0);
    return -ENOMEM;
  }
  WS_LOGD("origin: GET %s chunk %u (%u bytes)", file->mf.name, j, x->len);
  if (o->d->swarm != NULL)
    peer_swarm_chunk_live(o->d->swarm, file, j);
  return 0;
}

void peer_origin_kick(peer_origin_t *o) {
  if (o == NULL)
    return;
  while (!o->stopped && o->inflight < o->max_inflight &&
         o->d->state == PEER_DAEMON_RUNNING) {
    peer_file_t *file;
    uint32_t j;
    if (!peer_sched_next(o->d, PEER_SRC_ORIGIN, &file, &j))
      break;
    if (xfer_start(o, file, j) != 0)
      break;
  }
}

void peer_origin_cancel_file(peer_origin_t *o, peer_file_t *file) {
  if (o == NULL)
    return;
  for (xfer_t *x = o->head; x != NULL; x = x->next) {
    if (x->file == file && x->req != NULL)
      xfer_fail(x, WS_ECANCELED, "canceled");
  }
}

void peer_origin_stop(peer_origin_t *o) {
  if (o == NULL)
    return;
  o->stopped = 1;
  for (xfer_t *x = o->head; x != NULL; x = x->next) {
    if (x->req != NULL)
      xfer_fail(x, WS_ECANCELED, "daemon stopping");
  }
}
