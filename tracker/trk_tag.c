/* trk_tag.c - tag resolution for the tracker's prefetch (trk_tag.h).
 *
 * Owns: the tracker's S3 client (made on first use, closed by
 * trk_tags_close) and one trk_tag_op_t per tag being read (freed when its
 * GET completes, cancelled or not). The tag object is hostile: s3_tag.c caps
 * and parses it, and the release URI built from it is checked by the wanted
 * set like any other. Thread: loop thread only.
 */
#include "trk_tag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"
#include "s3_tag.h"
#include "tag.h"
#include "ws_log.h"

struct trk_tags_s {
  uv_loop_t *loop;
  ws_s3_t *s3; /* NULL until the first tag */
  trk_tags_close_cb close_cb;
  void *close_arg;
};

struct trk_tag_op_s {
  trk_tag_done_fn done;
  void *arg;
  ws_s3_req_t *req;
  int cancelled;
  char *model_uri, *tag;
  ws_s3_uri_t u;
};

int trk_tags_new(uv_loop_t *loop, trk_tags_t **out) {
  trk_tags_t *tg = calloc(1, sizeof(*tg));
  if (tg == NULL)
    return -ENOMEM;
  tg->loop = loop;
  *out = tg;
  return 0;
}

/* The client, from the environment, like p2pd's (reads no file here: the
 * profile is read by the client on a worker when it first needs it). */
static int tags_s3(trk_tags_t *tg) {
  ws_s3_config_t cfg;
  if (tg->s3 != NULL)
    return 0;
  ws_s3_config_default(&cfg);
  ws_s3_config_from_env(&cfg);
  int rc = ws_s3_new(tg->loop, &cfg, &tg->s3);
  if (rc != 0)
    WS_LOGE("s3: bad configuration (endpoint '%s'): %s",
            cfg.endpoint != NULL ? cfg.endpoint : "(aws)", ws_strerror(rc));
  return rc;
}

static void op_free(trk_tag_op_t *op) {
  free(op->model_uri);
  free(op->tag);
  ws_s3_uri_free(&op->u);
  free(op);
}

static void on_tag(void *arg, int status, const ws_hash_t *digest,
                   const char *etag, const char *errmsg) {
  trk_tag_op_t *op = arg;
  char uri[8192], d[WS_DIGEST_STR_LEN + 1];
  const char *why = errmsg;
  (void)etag;
  op->req = NULL;
  if (op->cancelled) {
    op_free(op);
    return;
  }
  if (status == 0) {
    ws_digest_to_str(digest, d);
    if (snprintf(uri, sizeof(uri), "%s%s/", op->model_uri, d) >=
        (int)sizeof(uri))
      status = WS_EUSAGE;
    else
      WS_LOGI("tag %s:%s names %s", op->model_uri, op->tag, d);
  } else if (status == WS_ES3NOKEY) {
    why = "no such tag";
  }
  op->done(op->arg, status, status == 0 ? digest : NULL,
           status == 0 ? uri : NULL, why != NULL ? why : "");
  op_free(op);
}

int trk_tags_resolve(trk_tags_t *tg, const char *tagged_uri,
                     trk_tag_done_fn done, void *arg, trk_tag_op_t **out) {
  trk_tag_op_t *op = calloc(1, sizeof(*op));
  int rc;
  if (op == NULL)
    return -ENOMEM;
  op->done = done;
  op->arg = arg;
  rc = ws_tag_uri_split(tagged_uri, &op->model_uri, &op->tag);
  if (rc == 1)
    rc = ws_s3_uri_parse(op->model_uri, &op->u) == 0 ? 0 : WS_EUSAGE;
  else if (rc == 0)
    rc = WS_EUSAGE;
  if (rc == 0)
    rc = tags_s3(tg);
  if (rc == 0) {
    op->req =
        ws_s3_tag_get(tg->s3, op->u.bucket, op->u.key, op->tag, on_tag, op);
    rc = op->req != NULL ? 0 : -ENOMEM;
  }
  if (rc != 0) {
    op_free(op);
    return rc;
  }
  *out = op;
  return 0;
}

void trk_tag_cancel(trk_tag_op_t *op) {
  op->cancelled = 1;
  if (op->req != NULL)
    ws_s3_req_cancel(op->req);
}

static void tags_closed(void *arg) {
  trk_tags_t *tg = arg;
  if (tg->close_cb != NULL)
    tg->close_cb(tg->close_arg);
  free(tg);
}

void trk_tags_close(trk_tags_t *tg, trk_tags_close_cb cb, void *arg) {
  tg->close_cb = cb;
  tg->close_arg = arg;
  if (tg->s3 != NULL)
    ws_s3_close(tg->s3, tags_closed, tg);
  else
    tags_closed(tg);
}
