/* s3_tag.c - GET of a release tag object and its parsing (s3_tag.h). The
 * body is hostile: capped at WS_TAG_BODY_MAX while it streams in, then
 * parsed exactly (ws_tag_body_parse). Thread: the S3 client's loop.
 */
#include "s3_tag.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  ws_s3_tag_cb cb;
  void *arg;
  size_t len;
  char buf[WS_TAG_BODY_MAX];
} s3_tag_get_t;

static int tag_data(ws_s3_req_t *req, uint64_t offset, const void *buf,
                    size_t len, void *arg) {
  s3_tag_get_t *g = arg;
  (void)req;
  (void)offset;
  if (len > sizeof(g->buf) - g->len)
    return WS_ELIMIT;
  memcpy(g->buf + g->len, buf, len);
  g->len += len;
  return WS_S3_DATA_OK;
}

static void tag_done(ws_s3_req_t *req, int status, void *arg) {
  s3_tag_get_t *g = arg;
  ws_hash_t d;
  const char *msg = ws_s3_req_errmsg(req);
  if (status == 0 && ws_tag_body_parse(g->buf, g->len, &d) != 0) {
    status = WS_EBADMSG;
    msg = "the tag object is not sha256-<hex>";
  } else if (status == WS_ELIMIT) {
    msg = "the tag object is too large";
  }
  g->cb(g->arg, status, status == 0 ? &d : NULL,
        status == 0 ? ws_s3_req_etag(req) : NULL, msg ? msg : "");
  free(g);
}

ws_s3_req_t *ws_s3_tag_get(ws_s3_t *s3, const char *bucket, const char *prefix,
                           const char *tag, ws_s3_tag_cb cb, void *arg) {
  if (!ws_tag_name_ok(tag))
    return NULL;
  char *key = ws_tag_key(prefix, tag);
  s3_tag_get_t *g = calloc(1, sizeof(*g));
  ws_s3_req_t *req = NULL;
  if (key && g) {
    g->cb = cb;
    g->arg = arg;
    req = ws_s3_get(s3, bucket, key, NULL, tag_data, tag_done, g);
  }
  if (!req)
    free(g);
  free(key);
  return req;
}
