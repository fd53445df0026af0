/* ctl_tag.c - release tags in S3: `p2pctl tag s3://B/P/MODEL/ TAG DIGEST`
 * moves (or creates) a tag, `p2pctl resolve s3://B/P/MODEL/:TAG` prints the
 * digest a tag names, ctl_tag_resolve() is that read for `p2pctl wait
 * s3://B/P/MODEL/:TAG`, and ctl_tag_move() is the tag step of `p2pctl
 * publish --tag`.
 *
 * A move is a compare-and-swap on the tag object (tag.h): read it (its
 * ETag, or its absence), check that the release's manifest.json exists, then
 * PUT with If-Match: <ETag> (If-None-Match: * when creating). Of two movers
 * that read the same ETag exactly one PUT succeeds; the other gets 412 and
 * fails with a message naming what the tag names now. Nothing is retried
 * across a lost race: the loser decides again.
 *
 * Thread: main thread, one uv loop with the S3 client (a blocking tool).
 */
#include "ctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "digest.h"
#include "s3.h"
#include "s3_tag.h"
#include "tag.h"
#include "ws_args.h"
#include "ws_err.h"

typedef struct {
  uv_loop_t *loop;
  ws_s3_t *s3;
  const char *prog;
  int status;
  long http;
  int found;
  ws_hash_t digest;
  char etag[260];
  char msg[512];
} tag_op_t;

static void on_tag(void *arg, int status, const ws_hash_t *digest,
                   const char *etag, const char *errmsg) {
  tag_op_t *op = arg;
  op->status = status;
  op->found = status == 0;
  if (status == 0) {
    op->digest = *digest;
    snprintf(op->etag, sizeof(op->etag), "%s", etag ? etag : "");
  }
  snprintf(op->msg, sizeof(op->msg), "%s", errmsg);
}

static void on_req(ws_s3_req_t *req, int status, void *arg) {
  tag_op_t *op = arg;
  op->status = status;
  op->http = ws_s3_req_http_status(req);
  snprintf(op->msg, sizeof(op->msg), "%s", ws_s3_req_errmsg(req));
}

static int exit_for(int status) {
  return status == WS_ES3NOKEY ? CTL_EXIT_NOTFOUND : CTL_EXIT_ORIGIN;
}

/* Reads the tag into op (op->found 0 when absent). 0 or an exit code. */
static int tag_read(tag_op_t *op, const char *bucket, const char *prefix,
                    const char *tag) {
  op->found = 0;
  op->etag[0] = '\0';
  if (!ws_s3_tag_get(op->s3, bucket, prefix, tag, on_tag, op))
    return CTL_EXIT_FAIL;
  uv_run(op->loop, UV_RUN_DEFAULT);
  if (op->status == 0 || op->status == WS_ES3NOKEY)
    return 0;
  fprintf(stderr, "%s: tag %s of s3://%s/%s: %s (%s)\n", op->prog, tag, bucket,
          prefix, op->msg, ws_errname(op->status));
  return op->status == WS_EBADMSG ? CTL_EXIT_FAIL : CTL_EXIT_ORIGIN;
}

/* PUT body to key under the precondition; 0 or a status (op->http set). */
static int tag_put(tag_op_t *op, const char *bucket, const char *key,
                   const ws_hash_t *digest) {
  char body[WS_DIGEST_STR_LEN + 2];
  size_t len = ws_tag_body_format(digest, body);
  int fd = memfd_create("ws-tag", MFD_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = write(fd, body, len) == (ssize_t)len ? 0 : -EIO;
  ws_hash_t h;
  char hex[WS_SHA256_HEX_LEN + 1];
  if (rc == 0 && (rc = ws_sha256(body, len, &h)) == 0) {
    ws_hash_to_hex(&h, hex);
    ws_s3_body_t b = {fd, 0, len, hex};
    ws_s3_cond_t c = {op->found ? op->etag : NULL, !op->found};
    if (ws_s3_put_if(op->s3, bucket, key, &b, &c, on_req, op)) {
      uv_run(op->loop, UV_RUN_DEFAULT);
      rc = op->status;
    } else {
      rc = -ENOMEM;
    }
  }
  close(fd);
  return rc;
}

/* HEAD of the release's manifest.json: a tag never names a release that is
 * not (completely) published. 0 or an exit code. */
static int release_check(tag_op_t *op, const char *bucket, const char *prefix,
                         const ws_hash_t *digest) {
  char d[WS_DIGEST_STR_LEN + 1], key[4096];
  ws_digest_to_str(digest, d);
  snprintf(key, sizeof(key), "%s%s/manifest.json", prefix, d);
  if (!ws_s3_head(op->s3, bucket, key, on_req, op))
    return CTL_EXIT_FAIL;
  uv_run(op->loop, UV_RUN_DEFAULT);
  if (op->status == 0)
    return 0;
  if (op->status == WS_ES3NOKEY)
    fprintf(stderr, "%s: no release s3://%s/%s (manifest.json missing)\n",
            op->prog, bucket, key);
  else
    fprintf(stderr, "%s: s3://%s/%s: %s (%s)\n", op->prog, bucket, key, op->msg,
            ws_errname(op->status));
  return exit_for(op->status);
}

int ctl_tag_move(uv_loop_t *loop, ws_s3_t *s3, const char *prog,
                 const char *bucket, const char *prefix, const char *tag,
                 const ws_hash_t *digest, const ws_hash_t *expect,
                 uint64_t pause_ms) {
  tag_op_t op = {.loop = loop, .s3 = s3, .prog = prog};
  char now[WS_DIGEST_STR_LEN + 1], want[WS_DIGEST_STR_LEN + 1];
  int ex;
  ws_digest_to_str(digest, want);
  if ((ex = release_check(&op, bucket, prefix, digest)) ||
      (ex = tag_read(&op, bucket, prefix, tag)))
    return ex;
  if (op.found)
    ws_digest_to_str(&op.digest, now);
  if (expect && (!op.found || !ws_hash_eq(&op.digest, expect))) {
    fprintf(stderr, "%s: tag %s names %s, not the expected one: unchanged\n",
            prog, tag, op.found ? now : "nothing");
    return CTL_EXIT_FAIL;
  }
  if (pause_ms) /* test hook: widen the race between read and write */
    usleep((useconds_t)(pause_ms * 1000));
  char *key = ws_tag_key(prefix, tag);
  int rc = key ? tag_put(&op, bucket, key, digest) : -ENOMEM;
  free(key);
  if (rc == 0) {
    fprintf(stderr, "tag %s: %s -> %s\n", tag, op.found ? now : "(new)", want);
    return CTL_EXIT_OK;
  }
  if (rc == WS_ES3 && (op.http == 412 || op.http == 409)) {
    /* Lost the race: say what won (one more read, best effort). */
    tag_op_t again = {.loop = loop, .s3 = s3, .prog = prog};
    int re = tag_read(&again, bucket, prefix, tag);
    if (re == 0 && again.found)
      ws_digest_to_str(&again.digest, now);
    fprintf(stderr,
            "%s: tag %s was moved by someone else meanwhile (now %s): not "
            "moved to %s (HTTP %ld, precondition failed)\n",
            prog, tag, re == 0 && again.found ? now : "unknown", want, op.http);
    return CTL_EXIT_FAIL;
  }
  fprintf(stderr, "%s: moving tag %s: %s (%s)\n", prog, tag,
          op.msg[0] ? op.msg : ws_strerror(rc), ws_errname(rc));
  return exit_for(rc);
}

/* ---- the commands -------------------------------------------------------- */

typedef struct {
  uv_loop_t loop;
  ws_s3_t *s3;
} tag_client_t;

static int client_open(tag_client_t *c, const char *prog) {
  if (uv_loop_init(&c->loop) != 0)
    return -1;
  ws_s3_config_t cfg;
  ws_s3_config_default(&cfg);
  ws_s3_config_from_env(&cfg);
  int rc = ws_s3_new(&c->loop, &cfg, &c->s3);
  if (rc == 0)
    return 0;
  fprintf(stderr, "%s: S3 configuration: %s\n", prog, ws_strerror(rc));
  (void)uv_loop_close(&c->loop);
  return -1;
}

static void client_close(tag_client_t *c) {
  ws_s3_close(c->s3, NULL, NULL);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  (void)uv_loop_close(&c->loop);
}

/* s3://B/P/MODEL[/] into bucket and a prefix ending in "/". 0 or -1. */
static int model_parse(const char *uri, ws_s3_uri_t *u, char **prefix) {
  if (ws_s3_uri_parse(uri, u) != 0)
    return -1;
  size_t n = strlen(u->key);
  if (n == 0) {
    ws_s3_uri_free(u);
    return -1;
  }
  *prefix = malloc(n + 2);
  if (!*prefix) {
    ws_s3_uri_free(u);
    return -1;
  }
  memcpy(*prefix, u->key, n + 1);
  if (u->key[n - 1] != '/')
    memcpy(*prefix + n, "/", 2);
  return 0;
}

enum { TO_EXPECT, TO_PAUSE, TO_LAST };

static const ws_arg_t k_tag_opts[TO_LAST] = {
    [TO_EXPECT] = {"expect", NULL, "DIGEST", WS_ARG_STR, 0,
                   "move only if the tag names DIGEST now"},
    [TO_PAUSE] = {"pause-before-put", NULL, "MS", WS_ARG_UINT, WS_ARG_HIDDEN,
                  "test: sleep between reading and writing the tag"},
};

static const ws_args_spec_t k_tag_spec = {
    .prog = "p2pctl tag",
    .synopsis = "s3://BUCKET/PREFIX/MODEL/ TAG DIGEST [--expect DIGEST]",
    .about = "Points TAG of the model at the published release DIGEST "
             "(promotion, rollback): s3://BUCKET/PREFIX/MODEL/tags/TAG holds "
             "\"sha256-<hex>\\n\". The move is a compare-and-swap (If-Match on "
             "the tag's ETag): if another mover wins meanwhile, nothing "
             "changes and the exit code is 1.",
    .args = k_tag_opts,
    .nargs = TO_LAST,
};

int ctl_tag_main(int argc, char **argv) {
  const char *v[TO_LAST] = {0}, *pos[3];
  size_t npos = 0;
  int rc = ws_args_parse(&k_tag_spec, argc, argv, v, pos, 3, &npos);
  if (rc == WS_ARGS_HELP || rc == WS_ARGS_VERSION) {
    ws_args_usage(&k_tag_spec, stdout);
    return CTL_EXIT_OK;
  }
  if (rc != 0 || ws_args_check(&k_tag_spec, v) != 0)
    return CTL_EXIT_USAGE;
  ws_hash_t d, e;
  uint64_t pause = 0;
  if (npos != 3 || !ws_tag_name_ok(pos[1]) ||
      ws_digest_from_str(pos[2], &d) != 0 ||
      (v[TO_EXPECT] && ws_digest_from_str(v[TO_EXPECT], &e) != 0) ||
      (v[TO_PAUSE] && ws_parse_uint(v[TO_PAUSE], 0, 600000, &pause) != 0)) {
    fprintf(stderr,
            "usage: p2pctl tag %s\n  TAG: 1..%d of [A-Za-z0-9._-], first a "
            "letter or digit; DIGEST: sha256-<64 hex>\n",
            k_tag_spec.synopsis, WS_TAG_MAX);
    return CTL_EXIT_USAGE;
  }
  ws_s3_uri_t u;
  char *prefix;
  if (model_parse(pos[0], &u, &prefix) != 0) {
    fprintf(stderr, "p2pctl tag: not an s3://BUCKET/PREFIX/MODEL/ URI: %s\n",
            pos[0]);
    return CTL_EXIT_USAGE;
  }
  tag_client_t c;
  int ex = CTL_EXIT_FAIL;
  if (client_open(&c, "p2pctl tag") == 0) {
    ex = ctl_tag_move(&c.loop, c.s3, "p2pctl tag", u.bucket, prefix, pos[1], &d,
                      v[TO_EXPECT] ? &e : NULL, pause);
    client_close(&c);
  }
  free(prefix);
  ws_s3_uri_free(&u);
  return ex;
}

static const ws_args_spec_t k_resolve_spec = {
    .prog = "p2pctl resolve",
    .synopsis = "s3://BUCKET/PREFIX/MODEL/:TAG",
    .about = "Prints the digest (sha256-<hex>) TAG names, read from S3 "
             "(s3://BUCKET/PREFIX/MODEL/tags/TAG). Exit 4 when there is no "
             "such tag.",
    .args = NULL,
    .nargs = 0,
};

int ctl_tag_resolve(const char *prog, const char *tagged_uri,
                    char out[WS_DIGEST_STR_LEN + 1]) {
  char *model = NULL, *tag = NULL;
  if (ws_tag_uri_split(tagged_uri, &model, &tag) != 1) {
    fprintf(stderr, "%s: not s3://BUCKET/PREFIX/MODEL/:TAG: %s\n", prog,
            tagged_uri);
    return CTL_EXIT_USAGE;
  }
  ws_s3_uri_t u;
  char *prefix = NULL;
  int ex = CTL_EXIT_USAGE;
  if (model_parse(model, &u, &prefix) != 0)
    goto out;
  tag_client_t c;
  ex = CTL_EXIT_FAIL;
  if (client_open(&c, prog) == 0) {
    tag_op_t op = {.loop = &c.loop, .s3 = c.s3, .prog = prog};
    ex = tag_read(&op, u.bucket, prefix, tag);
    if (ex == 0 && !op.found) {
      fprintf(stderr, "%s: no tag %s in %s\n", prog, tag, model);
      ex = CTL_EXIT_NOTFOUND;
    } else if (ex == 0) {
      ws_digest_to_str(&op.digest, out);
    }
    client_close(&c);
  }
  free(prefix);
  ws_s3_uri_free(&u);
out:
  free(model);
  free(tag);
  return ex;
}

int ctl_resolve_main(int argc, char **argv) {
  const char *pos[1];
  size_t npos = 0;
  int rc = ws_args_parse(&k_resolve_spec, argc, argv, NULL, pos, 1, &npos);
  if (rc == WS_ARGS_HELP || rc == WS_ARGS_VERSION) {
    ws_args_usage(&k_resolve_spec, stdout);
    return CTL_EXIT_OK;
  }
  char d[WS_DIGEST_STR_LEN + 1];
  if (rc != 0 || npos != 1) {
    fprintf(stderr, "usage: p2pctl resolve %s\n", k_resolve_spec.synopsis);
    return CTL_EXIT_USAGE;
  }
  int ex = ctl_tag_resolve("p2pctl resolve", pos[0], d);
  if (ex == CTL_EXIT_USAGE)
    fprintf(stderr, "usage: p2pctl resolve %s\n", k_resolve_spec.synopsis);
  else if (ex == CTL_EXIT_OK)
    puts(d);
  return ex;
}
