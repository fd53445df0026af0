/* origin.c - the S3 chunk fetcher (see origin.h for the data path).
 *
 * Owns: the transfers (one per chunk in flight), each with its S3 request
 * and its inbound-chunk machine (inbound.h: buffers, ordered hashed writes,
 * verify and commit). Borrows the context's S3 client and the files table,
 * where it is registered as a listener (kick, file_failed).
 * Thread: loop thread (the writes and the verify run on workers inside the
 * inbound machine).
 */
#include "fetch/origin.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "fetch/inbound.h"
#include "ws_log.h"

/* One chunk being fetched. Its bytes and outcome live in the inbound
 * machine; the transfer holds the file reference the scheduler gave, the
 * request and the timing that decides when it is "ending". */
typedef struct xfer_s xfer_t;
struct xfer_s {
  peer_origin_t *o;
  xfer_t *prev, *next;
  peer_file_t *file; /* reference held */
  uint32_t j;
  uint64_t off; /* chunk's first byte in the file (and the object) */
  uint32_t len;
  uint64_t start_ms; /* GET queued */
  uint64_t first_ms; /* first body byte (when got_first) */
  bool got_first;
  bool ending;      /* last stretch or done: a spare lease may start */
  ws_s3_req_t *req; /* NULL once done */
  peer_inbound_t *in;
};

struct peer_origin_s {
  peer_ctx_t *ctx;
  peer_files_t *files;
  peer_fetch_listener_t listener;
  unsigned max_inflight;
  unsigned inflight;
  uint64_t lead_ms; /* moving average of GET -> first byte; 0: none yet */
  int stopped;
  xfer_t *head;
};

static void origin_on_kick(void *arg) {
  peer_origin_kick(arg);
}

static void origin_on_file_failed(void *arg, peer_file_t *file) {
  peer_origin_cancel_file(arg, file);
}

int peer_origin_new(peer_ctx_t *ctx, peer_files_t *files, unsigned max_inflight,
                    peer_origin_t **out) {
  peer_origin_t *o = calloc(1, sizeof(*o));
  if (o == NULL)
    return -ENOMEM;
  o->ctx = ctx;
  o->files = files;
  o->max_inflight = max_inflight;
  o->listener.arg = o;
  o->listener.kick = origin_on_kick;
  o->listener.file_failed = origin_on_file_failed;
  peer_files_listen(files, &o->listener);
  *out = o;
  return 0;
}

void peer_origin_free(peer_origin_t *o) {
  if (o == NULL)
    return;
  assert(o->inflight == 0);
  peer_files_unlisten(o->files, &o->listener);
  free(o);
}

unsigned peer_origin_inflight(const peer_origin_t *o) {
  return o->inflight;
}

/* ---- overlap ------------------------------------------------------------ */

/* Marks x ending (the tracker's spare lease may start) once the rest of
 * its body should take no longer than a new GET takes to bring its first
 * byte: by the rate so far, remaining <= 1.5 x lead. The next fetch's first
 * byte then arrives about when this one's last does, and the origin's link
 * has no gap between them. */
static void xfer_note_progress(xfer_t *x) {
  peer_origin_t *o = x->o;
  uint64_t now = uv_now(o->ctx->loop);
  uint64_t received = peer_inbound_received(x->in);
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
  if (elapsed < PEER_ORIGIN_RATE_MIN_MS || received == 0)
    return;
  uint64_t left = x->len - received;
  /* left / (received / elapsed) <= 1.5 lead, without dividing. */
  if (left * elapsed * 2 <= 3 * o->lead_ms * received) {
    x->ending = true;
    peer_origin_kick(o);
  }
}

int peer_origin_live(const peer_origin_t *o, const peer_file_t *file,
                     uint32_t j, uint64_t *written) {
  for (const xfer_t *x = o->head; x != NULL; x = x->next) {
    if (x->file == file && x->j == j) {
      *written = peer_inbound_written(x->in);
      return peer_inbound_status(x->in) == 0;
    }
  }
  return 0;
}

unsigned peer_origin_list(const peer_origin_t *o, peer_file_t **files,
                          uint32_t *js, unsigned max) {
  unsigned n = 0;
  for (const xfer_t *x = o->head; x != NULL && n < max; x = x->next) {
    if (peer_inbound_status(x->in) == 0) {
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
      return peer_inbound_receiving(x->in) && !x->ending;
  }
  return 0;
}

/* ---- the inbound machine's callbacks ------------------------------------ */

static void xfer_wake(void *arg) {
  xfer_t *x = arg;
  if (x->req != NULL)
    ws_s3_req_resume(x->req);
}

/* Neighbours streaming this chunk as it arrives may send more. */
static void xfer_progress(void *arg, uint64_t written) {
  xfer_t *x = arg;
  (void)written;
  peer_file_chunk_progress(x->file, x->j);
}

/* A write failed or the transfer was canceled: stop the body. */
static void xfer_failed(void *arg, int status) {
  xfer_t *x = arg;
  (void)status;
  if (x->req != NULL)
    ws_s3_req_cancel(x->req);
}

static void xfer_unlink(xfer_t *x) {
  peer_origin_t *o = x->o;
  if (x->prev != NULL)
    x->prev->next = x->next;
  else
    o->head = x->next;
  if (x->next != NULL)
    x->next->prev = x->prev;
  o->inflight--;
}

/* Reports the chunk and frees x. Uploads of the chunk as it arrived get
 * the rest now, or fail (x is gone, so a retry is a new transfer). */
static void xfer_report(xfer_t *x, int status, const char *errmsg) {
  peer_file_t *file = x->file;
  uint32_t j = x->j;
  xfer_unlink(x);
  free(x);
  peer_file_chunk_done(file, j, PEER_SRC_ORIGIN, status, errmsg);
  peer_file_chunk_progress(file, j);
  peer_file_unref(file);
}

/* The inbound machine is done (and freed): verified and committed, or
 * failed. */
static void xfer_done(void *arg, int status, const char *errmsg) {
  xfer_t *x = arg;
  peer_origin_t *o = x->o;
  if (status == 0) {
    o->ctx->counters.s3_bytes_chunks += x->len;
    ws_hist_observe(&o->ctx->counters.chunk_origin_s,
                    (double)(uv_now(o->ctx->loop) - x->start_ms) / 1e3);
  }
  xfer_report(x, status, errmsg);
  peer_origin_kick(o);
}

/* ---- S3 callbacks ------------------------------------------------------ */

static int xfer_s3_data(ws_s3_req_t *req, uint64_t offset, const void *data,
                        size_t len, void *arg) {
  xfer_t *x = arg;
  int status = peer_inbound_status(x->in);
  uint64_t received = peer_inbound_received(x->in);
  if (status != 0)
    return status;
  if (offset != x->off + received || len > x->len - received) {
    peer_inbound_fail(x->in, WS_ES3, "S3 body does not match the range asked");
    return WS_ES3;
  }
  if (x->file->etag == NULL) {
    const char *etag = ws_s3_req_etag(req);
    if (etag != NULL)
      x->file->etag = strdup(etag);
  }
  /* Accept all of data or none of it (the callback contract): the inbound
   * machine takes nothing and parks when the pool lacks the buffers. */
  int rc = peer_inbound_data(x->in, data, len);
  if (rc == PEER_INBOUND_PAUSE)
    return WS_S3_DATA_PAUSE;
  if (rc != 0)
    return rc;
  xfer_note_progress(x);
  return WS_S3_DATA_OK;
}

static void xfer_s3_done(ws_s3_req_t *req, int status, void *arg) {
  xfer_t *x = arg;
  x->req = NULL;
  WS_LOGD("origin: %s chunk %u: body in %llu ms, first byte after %llu ms",
          x->file->mf.name, x->j,
          (unsigned long long)(uv_now(x->o->ctx->loop) - x->start_ms),
          (unsigned long long)(x->got_first ? x->first_ms - x->start_ms : 0));
  const char *msg = ws_s3_req_errmsg(req);
  if (status != 0)
    peer_inbound_fail(x->in, status, msg);
  else if (peer_inbound_received(x->in) != x->len)
    peer_inbound_fail(x->in, status = WS_ETRUNCATED,
                      msg = "S3 body ended early");
  if (!x->ending) {
    x->ending = true;
    peer_origin_kick(x->o);
  }
  peer_inbound_end(x->in, status, msg); /* may free x */
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
  x->start_ms = uv_now(o->ctx->loop);
  const peer_inbound_ops_t ops = {.mode = PEER_INBOUND_ALL_OR_NONE,
                                  .arg = x,
                                  .wake = xfer_wake,
                                  .progress = xfer_progress,
                                  .failed = xfer_failed,
                                  .done = xfer_done};
  int rc = peer_inbound_new(o->ctx, file, j, &ops, &x->in);
  ws_s3_range_t range = {
      .offset = x->off, .len = x->len, .if_match = file->etag};
  x->next = o->head;
  if (o->head != NULL)
    o->head->prev = x;
  o->head = x;
  o->inflight++;
  if (rc == 0)
    x->req = ws_s3_get(o->ctx->s3, file->bucket, file->key, &range,
                       xfer_s3_data, xfer_s3_done, x);
  if (x->req == NULL) {
    /* Nothing will be called back: report it here, outside any callback
     * of the transfer, and without kicking (the caller's loop stops). */
    if (rc == 0)
      peer_inbound_free(x->in);
    xfer_report(x, -ENOMEM, "starting S3 GET");
    return -ENOMEM;
  }
  WS_LOGD("origin: GET %s chunk %u (%u bytes)", file->mf.name, j, x->len);
  peer_file_chunk_live(file, j);
  return 0;
}

void peer_origin_kick(peer_origin_t *o) {
  if (o == NULL)
    return;
  while (!o->stopped && o->inflight < o->max_inflight && o->ctx->running) {
    peer_file_t *file;
    uint32_t j;
    if (!peer_sched_next(o->files, PEER_SRC_ORIGIN, &file, &j))
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
      peer_inbound_fail(x->in, WS_ECANCELED, "canceled");
  }
}

void peer_origin_stop(peer_origin_t *o) {
  if (o == NULL)
    return;
  o->stopped = 1;
  for (xfer_t *x = o->head; x != NULL; x = x->next) {
    if (x->req != NULL)
      peer_inbound_fail(x->in, WS_ECANCELED, "daemon stopping");
  }
}
