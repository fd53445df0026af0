/* release_prefetch.c - the ways a release job starts: POST prefetch (by
 * URI and/or digest), the swarm's wanted set (digest only), and resumes
 * from job records after a restart.
 *
 * Owns: nothing long-lived; a new release goes on the daemon's list
 * (release.c) and the request is parked on it (release_view.c).
 * Thread: loop thread.
 */
#include "release/release-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "ws_log.h"

/* Splits s3://bucket/prefix[/manifest.json] into bucket and a prefix that
 * ends in '/'; *has_digest when the last component is sha256-<hex>. */
static int rel_parse_uri(const char *uri, char **bucket, char **prefix,
                         int *has_digest, ws_hash_t *digest) {
  ws_s3_uri_t u;
  int rc = ws_s3_uri_parse(uri, &u);
  if (rc != 0)
    return rc;
  size_t n = strlen(u.key);
  const char *mj = "manifest.json";
  size_t ml = strlen(mj);
  if (n >= ml && strcmp(u.key + n - ml, mj) == 0 &&
      (n == ml || u.key[n - ml - 1] == '/'))
    n -= ml;
  while (n > 0 && u.key[n - 1] == '/')
    n--;
  char *p = malloc(n + 2);
  if (p == NULL) {
    ws_s3_uri_free(&u);
    return -ENOMEM;
  }
  memcpy(p, u.key, n);
  p[n] = '/';
  p[n + 1] = '\0';
  if (n == 0)
    p[0] = '\0';
  /* Last component. */
  size_t s = n;
  while (s > 0 && p[s - 1] != '/')
    s--;
  *has_digest = 0;
  char comp[WS_DIGEST_STR_LEN + 1];
  if (n - s == WS_DIGEST_STR_LEN) {
    memcpy(comp, p + s, WS_DIGEST_STR_LEN);
    comp[WS_DIGEST_STR_LEN] = '\0';
    if (ws_digest_from_str(comp, digest) == 0)
      *has_digest = 1;
  }
  *bucket = u.bucket;
  u.bucket = NULL;
  *prefix = p;
  ws_s3_uri_free(&u);
  return 0;
}

/* (Re)starts rel from uri: RESOLVING. */
static int rel_start(peer_release_t *rel, char *bucket, char *prefix,
                     const char *uri) {
  char *u = strdup(uri);
  if (u == NULL)
    return -ENOMEM;
  free(rel->uri);
  free(rel->bucket);
  free(rel->prefix);
  rel->uri = u;
  rel->bucket = bucket;
  rel->prefix = prefix;
  rel->mpeer_tried = 0;
  if (rel->state == PEER_REL_FAILED) {
    peer_rel_set_state(rel, PEER_REL_RESOLVING);
    rel->err = 0;
    rel->errmsg[0] = '\0';
    rel->started_unix_ms = peer_daemon_now_unix_ms();
    rel->finished_unix_ms = 0;
    rel->t0_ns = uv_hrtime();
  }
  WS_LOGI("release %s: prefetch from %s", peer_rel_name(rel), uri);
  peer_rel_resolve_start(rel);
  return 0;
}

static void rel_prefetch(peer_daemon_t *d, const char *uri,
                         const ws_hash_t *expect, ws_httpd_req_t *req) {
  char *bucket = NULL, *prefix = NULL;
  int has_digest = 0;
  ws_hash_t digest;
  peer_release_t *rel = NULL;
  int rc;
  if (uri != NULL) {
    rc = rel_parse_uri(uri, &bucket, &prefix, &has_digest, &digest);
    if (rc != 0) {
      if (req != NULL)
        ws_httpd_reply_error(req, 400, WS_EUSAGE,
                             "uri must be s3://bucket/prefix/");
      return;
    }
    if (has_digest && expect != NULL && !ws_hash_eq(&digest, expect)) {
      if (req != NULL)
        ws_httpd_reply_error(req, 422, WS_EDIGEST,
                             "digest differs from the URI's sha256-<hex>");
      goto free_uri;
    }
  }
  if (!has_digest && expect != NULL) {
    digest = *expect;
    has_digest = 1;
  }
  if (has_digest) {
    rel = peer_release_find(d, &digest);
  } else {
    for (peer_release_t *r = d->releases; r != NULL; r = r->next) {
      if (!r->digest_known && r->uri != NULL && strcmp(r->uri, uri) == 0)
        rel = r;
    }
  }
  if (rel == NULL && uri == NULL && d->swarm != NULL) {
    /* Swarm mode: neighbours holding the release send its manifest. */
    peer_release_prefetch_digest(d, &digest);
    rel = peer_release_find(d, &digest);
    if (rel == NULL) {
      if (req != NULL)
        ws_httpd_reply_error(req, 503, WS_EBUSY,
                             "too many releases being fetched");
      return;
    }
    if (req != NULL) {
      peer_rel_waiter_add(rel, req, PEER_REL_WAIT_PREFETCH, 0);
      peer_rel_answer(rel);
    }
    return;
  }
  if (rel == NULL && uri == NULL) {
    if (req != NULL)
      ws_httpd_reply_error(req, 404, WS_ENOTFOUND,
                           "unknown digest; give the release's uri");
    return;
  }
  if (rel != NULL && rel->state != PEER_REL_FAILED) {
    /* Coalesce with the job already there. */
    if (req != NULL) {
      peer_rel_waiter_add(rel, req, PEER_REL_WAIT_PREFETCH, 0);
      peer_rel_answer(rel);
    }
    goto free_uri;
  }
  if (rel != NULL && uri == NULL) {
    if (rel->uri == NULL) {
      if (req != NULL)
        ws_httpd_reply_error(req, 404, WS_ENOTFOUND,
                             "failed release has no uri; give it");
      return;
    }
    rc = rel_parse_uri(rel->uri, &bucket, &prefix, &has_digest, &digest);
    if (rc != 0)
      goto fail;
    uri = rel->uri;
  }
  if (d->active_releases >= PEER_ACTIVE_RELEASES_MAX) {
    if (req != NULL)
      ws_httpd_reply_error(req, 503, WS_EBUSY,
                           "too many releases being fetched");
    goto free_uri;
  }
  if (rel == NULL) {
    rel = peer_rel_new(d, PEER_REL_RESOLVING);
    if (rel == NULL) {
      rc = -ENOMEM;
      goto fail;
    }
    /* The URI's digest or, for a legacy URI, the expected one: either way
     * the manifest read must hash to it. */
    if (has_digest)
      peer_rel_set_digest(rel, &digest);
  }
  if (expect != NULL) {
    rel->expect = *expect;
    rel->expect_known = 1;
  }
  if (req != NULL)
    peer_rel_waiter_add(rel, req, PEER_REL_WAIT_PREFETCH, 0);
  /* rel_start takes bucket and prefix. */
  char *uri_copy = strdup(uri);
  if (uri_copy == NULL) {
    peer_rel_fail(rel, -ENOMEM, "prefetch");
    goto free_uri;
  }
  rc = rel_start(rel, bucket, prefix, uri_copy);
  free(uri_copy);
  if (rc != 0) {
    peer_rel_fail(rel, rc, "prefetch");
    goto free_uri;
  }
  return;
fail:
  if (req != NULL)
    ws_httpd_reply_error(req, 500, rc, NULL);
free_uri:
  free(bucket);
  free(prefix);
}

void peer_release_prefetch(peer_daemon_t *d, const char *uri,
                           const ws_hash_t *expect, ws_httpd_req_t *req) {
  rel_prefetch(d, uri, expect, req);
}

void peer_release_prefetch_digest(peer_daemon_t *d, const ws_hash_t *digest) {
  peer_release_t *rel = peer_release_find(d, digest);
  if (d->swarm == NULL || (rel != NULL && rel->state != PEER_REL_FAILED))
    return;
  if (rel != NULL && rel->uri != NULL) {
    rel_prefetch(d, rel->uri, digest, NULL);
    return;
  }
  if (d->active_releases >= PEER_ACTIVE_RELEASES_MAX)
    return;
  if (rel == NULL) {
    rel = peer_rel_new(d, PEER_REL_RESOLVING);
    if (rel == NULL)
      return;
    peer_rel_set_digest(rel, digest);
  } else {
    peer_rel_set_state(rel, PEER_REL_RESOLVING);
    rel->err = 0;
    rel->errmsg[0] = '\0';
    rel->started_unix_ms = peer_daemon_now_unix_ms();
    rel->finished_unix_ms = 0;
    rel->t0_ns = uv_hrtime();
  }
  rel->mpeer_tried = 0;
  WS_LOGI("release %s: prefetch by digest (manifest from neighbours)",
          rel->digest_str);
  peer_rel_resolve_start(rel);
}

void peer_release_resume(peer_daemon_t *d, const char *uri,
                         const ws_hash_t *digest) {
  WS_LOGI("resuming prefetch of %s", uri);
  rel_prefetch(d, uri, digest, NULL);
}
