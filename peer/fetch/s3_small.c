/* s3_small.c - GET of a small S3 object into one malloc'd buffer, capped at
 * creation (manifest.json for release jobs and seed imports).
 *
 * Owns: the request's buffer until done, which takes it.
 * Thread: loop thread (the S3 client's callbacks).
 */
#include "fetch/s3_small.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  peer_s3_small_cb done;
  void *arg;
  size_t max;
  char *buf;
  size_t len, cap;
} s3_small_t;

static int s3_small_data(ws_s3_req_t *req, uint64_t offset, const void *buf,
                         size_t len, void *arg) {
  s3_small_t *g = arg;
  (void)req;
  (void)offset;
  if (len > g->max - g->len)
    return WS_ELIMIT;
  if (g->len + len + 1 > g->cap) {
    /* 64 KiB first, then doubling: a manifest is one or two reallocs. */
    size_t cap = g->cap ? g->cap : 64 * 1024;
    char *p;
    while (cap < g->len + len + 1)
      cap *= 2;
    if ((p = realloc(g->buf, cap)) == NULL)
      return -ENOMEM;
    g->buf = p;
    g->cap = cap;
  }
  memcpy(g->buf + g->len, buf, len);
  g->len += len;
  g->buf[g->len] = '\0';
  return WS_S3_DATA_OK;
}

static void s3_small_done(ws_s3_req_t *req, int status, void *arg) {
  s3_small_t g = *(s3_small_t *)arg;
  free(arg);
  if (status != 0) {
    free(g.buf);
    g.buf = NULL;
    g.len = 0;
  }
  g.done(g.arg, status, g.buf, g.len, ws_s3_req_errmsg(req));
}

ws_s3_req_t *peer_s3_get_small(peer_ctx_t *ctx, const char *bucket,
                               const char *key, size_t max_bytes,
                               peer_s3_small_cb done, void *arg) {
  s3_small_t *g = calloc(1, sizeof(*g));
  if (g == NULL)
    return NULL;
  g->done = done;
  g->arg = arg;
  g->max = max_bytes;
  ws_s3_req_t *req =
      ws_s3_get(ctx->s3, bucket, key, NULL, s3_small_data, s3_small_done, g);
  if (req == NULL)
    free(g);
  return req;
}
