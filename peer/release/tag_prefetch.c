/* tag_prefetch.c - prefetch by tag and the by-name/refs links of the cache
 * (tag_prefetch.h).
 *
 * Owns: one peer_tag_op_t per tagged prefetch while its tag is read (freed
 * when the S3 request completes), and one tag_link_t per release waiting
 * to be READY to get its links (freed after the worker wrote them). The tag
 * object is hostile: s3_tag.c caps and parses it.
 * Thread: loop thread; links_work on a worker.
 */
#include "release/tag_prefetch.h"
#include "release/release-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "s3_tag.h"
#include "tag.h"
#include "ws_log.h"

struct peer_tag_op_s {
  peer_ctx_t *ctx;
  peer_releases_t *t;
  peer_tag_done_fn done;
  void *arg;
  ws_s3_req_t *req;
  int cancelled;
  char *model_uri, *tag, *model, *bucket, *prefix;
};

typedef struct {
  peer_ctx_t *ctx;
  char *root, *model, *tag;
  char digest[WS_DIGEST_STR_LEN + 1];
  int err;
} tag_link_t;

static void link_free(tag_link_t *l) {
  free(l->root);
  free(l->model);
  free(l->tag);
  free(l);
}

/* [worker] <root>/<dir>/<model>/<tag> -> ../../releases/<digest>. */
static int link_one(const tag_link_t *l, const char *dir) {
  char path[4096], tmp[4200], target[128];
  snprintf(path, sizeof(path), "%s/%s", l->root, dir);
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return -errno;
  snprintf(path, sizeof(path), "%s/%s/%s", l->root, dir, l->model);
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return -errno;
  snprintf(path, sizeof(path), "%s/%s/%s/%s", l->root, dir, l->model, l->tag);
  snprintf(tmp, sizeof(tmp), "%s/%s/%s/.tmp-%s", l->root, dir, l->model,
           l->tag);
  snprintf(target, sizeof(target), "../../releases/%s", l->digest);
  (void)unlink(tmp);
  if (symlink(target, tmp) != 0)
    return -errno;
  if (rename(tmp, path) != 0) {
    int e = -errno;
    (void)unlink(tmp);
    return e;
  }
  return 0;
}

static void links_work(void *arg) {
  tag_link_t *l = arg;
  l->err = link_one(l, "by-name");
  if (l->err == 0)
    l->err = link_one(l, "refs");
}

static void links_after(void *arg, int status) {
  tag_link_t *l = arg;
  if (status == 0 && l->err != 0)
    WS_LOGW("release %s: links for %s:%s: %s", l->digest, l->model, l->tag,
            ws_strerror(l->err));
  else if (status == 0)
    WS_LOGI("release %s: by-name/%s/%s", l->digest, l->model, l->tag);
  link_free(l);
}

static void links_queue(tag_link_t *l) {
  if (peer_ctx_queue(l->ctx, links_work, links_after, l) != 0)
    link_free(l);
}

static void on_ready(void *arg, peer_release_t *rel, int err) {
  tag_link_t *l = arg;
  if (err == 0 && peer_release_state(rel) == PEER_REL_READY) {
    peer_rel_hf_view(rel, l->tag); /* --hf-cache: refs/<tag>, on a worker */
    if (l->root != NULL && l->model != NULL)
      links_queue(l);
    else
      link_free(l);
  } else {
    link_free(l);
  }
}

/* Links rel under model/tag once it is READY (when the cache and the model
 * name allow), and names it refs/<tag> in the Hugging Face view (when
 * --hf-cache is set). Best effort (logged). */
static void links_when_ready(peer_tag_op_t *op, peer_release_t *rel) {
  tag_link_t *l = calloc(1, sizeof(*l));
  if (l == NULL)
    goto fail;
  l->ctx = op->ctx;
  if (op->ctx->store != NULL && op->model != NULL &&
      ((l->root = strdup(ws_store_root(op->ctx->store))) == NULL ||
       (l->model = strdup(op->model)) == NULL))
    goto fail;
  l->tag = strdup(op->tag);
  if (!l->tag || !peer_release_digest_str(rel))
    goto fail;
  snprintf(l->digest, sizeof(l->digest), "%s", peer_release_digest_str(rel));
  if (peer_release_settled(rel, PEER_REL_WATCH_READY)) {
    on_ready(l, rel, 0);
    return;
  }
  peer_release_watch_t *w;
  if (peer_release_watch(rel, PEER_REL_WATCH_READY, 0, on_ready, l, &w) == 0)
    return;
fail:
  if (l)
    link_free(l);
}

static void op_free(peer_tag_op_t *op) {
  free(op->model_uri);
  free(op->tag);
  free(op->model);
  free(op->bucket);
  free(op->prefix);
  free(op);
}

static void on_tag(void *arg, int status, const ws_hash_t *digest,
                   const char *etag, const char *errmsg) {
  peer_tag_op_t *op = arg;
  (void)etag;
  op->req = NULL;
  if (op->cancelled) {
    op_free(op);
    return;
  }
  peer_release_t *rel = NULL;
  const char *why = errmsg;
  char uri[4400], d[WS_DIGEST_STR_LEN + 1];
  if (status == 0) {
    ws_digest_to_str(digest, d);
    snprintf(uri, sizeof(uri), "%s%s/", op->model_uri, d);
    WS_LOGI("tag %s:%s names %s", op->model_uri, op->tag, d);
    status = peer_release_prefetch(op->t, uri, digest, &rel, &why);
  } else if (status == WS_ES3NOKEY) {
    why = "no such tag";
  }
  if (status == 0)
    links_when_ready(op, rel);
  op->done(op->arg, status, rel, why ? why : "");
  if (rel)
    peer_release_unref(rel);
  op_free(op);
}

/* The last component of the model prefix ("a/b/MODEL/"), or NULL. */
static char *model_of(const char *prefix) {
  size_t n = strlen(prefix);
  if (n < 2)
    return NULL;
  size_t s = n - 1;
  while (s > 0 && prefix[s - 1] != '/')
    s--;
  char *m = strndup(prefix + s, n - 1 - s);
  if (m && !ws_tag_name_ok(m)) {
    free(m);
    m = NULL;
  }
  return m;
}

int peer_tag_prefetch(peer_ctx_t *ctx, peer_releases_t *t,
                      const char *tagged_uri, peer_tag_done_fn done, void *arg,
                      peer_tag_op_t **out) {
  peer_tag_op_t *op = calloc(1, sizeof(*op));
  if (op == NULL)
    return -ENOMEM;
  op->ctx = ctx;
  op->t = t;
  op->done = done;
  op->arg = arg;
  int rc = ws_tag_uri_split(tagged_uri, &op->model_uri, &op->tag);
  if (rc != 1) {
    op_free(op);
    return rc == 0 ? WS_EUSAGE : rc;
  }
  ws_s3_uri_t u;
  if ((rc = ws_s3_uri_parse(op->model_uri, &u)) != 0) {
    op_free(op);
    return WS_EUSAGE;
  }
  op->bucket = u.bucket;
  op->prefix = u.key;
  op->model = model_of(op->prefix);
  op->req = ws_s3_tag_get(ctx->s3, op->bucket, op->prefix, op->tag, on_tag, op);
  if (op->req == NULL) {
    op_free(op);
    return -ENOMEM;
  }
  *out = op;
  return 0;
}

void peer_tag_cancel(peer_tag_op_t *op) {
  op->cancelled = 1;
  if (op->req)
    ws_s3_req_cancel(op->req);
}
