/* prefetch.c - the ways a release enters the table: POST prefetch (by URI
 * and/or digest), the swarm's want hook (the tracker's wanted set), resumes
 * from job records after a restart, releases found published in the cache
 * at startup, and seed imports.
 *
 * Owns: nothing long-lived; a new release goes on the table's list
 * (release.c). Refusals are error codes with a short reason; the caller
 * (the API) turns them into replies. Thread: loop thread.
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

/* (Re)starts rel from uri: RESOLVING. Takes bucket and prefix when it
 * returns 0. */
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
  if (rel->state == PEER_REL_FAILED)
    peer_rel_restart(rel);
  WS_LOGI("release %s: prefetch from %s", peer_rel_name(rel), uri);
  peer_rel_resolve_start(rel);
  return 0;
}

/* Hands the caller a reference to rel when it wants one (out not NULL). */
static int rel_give(peer_release_t *rel, peer_release_t **out) {
  if (out != NULL) {
    peer_rel_ref(rel);
    *out = rel;
  }
  return 0;
}

/* The release of a legacy URI (no digest in it) still resolving. */
static peer_release_t *rel_find_legacy(const peer_releases_t *t,
                                       const char *uri) {
  peer_release_t *rel = NULL;
  for (peer_release_t *r = t->head; r != NULL; r = r->next) {
    if (!r->digest_known && r->uri != NULL && strcmp(r->uri, uri) == 0)
      rel = r;
  }
  return rel;
}

/* Creates rel (when NULL) or restarts it (FAILED) from uri. Takes bucket
 * and prefix. */
static int rel_launch(peer_releases_t *t, peer_release_t *rel, const char *uri,
                      const ws_hash_t *digest, const ws_hash_t *expect,
                      char *bucket, char *prefix, peer_release_t **out) {
  if (rel == NULL) {
    rel = peer_rel_new(t, PEER_REL_RESOLVING);
    if (rel == NULL) {
      free(bucket);
      free(prefix);
      return -ENOMEM;
    }
    /* The URI's digest or, for a legacy URI, the expected one: either way
     * the manifest read must hash to it. */
    if (digest != NULL)
      peer_rel_set_digest(rel, digest);
  }
  if (expect != NULL) {
    rel->expect = *expect;
    rel->expect_known = 1;
  }
  /* The caller's reference first: a legacy URI that fails at once leaves
   * the list, and the caller still reads how it failed. */
  rel_give(rel, out);
  /* uri may be rel->uri, which rel_start replaces. */
  char *uri_copy = strdup(uri);
  int rc =
      uri_copy != NULL ? rel_start(rel, bucket, prefix, uri_copy) : -ENOMEM;
  free(uri_copy);
  if (rc != 0) {
    free(bucket);
    free(prefix);
    peer_rel_fail(rel, rc, "prefetch");
  }
  return 0;
}

static void rel_prefetch_digest(peer_releases_t *t, const ws_hash_t *digest);

static int rel_prefetch(peer_releases_t *t, const char *uri,
                        const ws_hash_t *expect, peer_release_t **out,
                        const char **why) {
  char *bucket = NULL, *prefix = NULL;
  int has_digest = 0, rc = 0;
  ws_hash_t digest;
  *why = NULL;
  if (out != NULL)
    *out = NULL;
  if (uri != NULL) {
    if (rel_parse_uri(uri, &bucket, &prefix, &has_digest, &digest) != 0) {
      *why = "uri must be s3://bucket/prefix/";
      return WS_EUSAGE;
    }
    if (has_digest && expect != NULL && !ws_hash_eq(&digest, expect)) {
      *why = "digest differs from the URI's sha256-<hex>";
      rc = WS_EDIGEST;
      goto free_uri;
    }
  }
  if (!has_digest && expect != NULL) {
    digest = *expect;
    has_digest = 1;
  }
  peer_release_t *rel =
      has_digest ? peer_release_find(t, &digest) : rel_find_legacy(t, uri);
  if (rel == NULL && uri == NULL && t->swarm != NULL) {
    /* Swarm mode: neighbours holding the release send its manifest. */
    rel_prefetch_digest(t, &digest);
    rel = peer_release_find(t, &digest);
    if (rel == NULL) {
      *why = "too many releases being fetched";
      return WS_EBUSY;
    }
    return rel_give(rel, out);
  }
  if (rel == NULL && uri == NULL) {
    *why = "unknown digest; give the release's uri";
    return WS_ENOTFOUND;
  }
  if (rel != NULL && rel->state != PEER_REL_FAILED) {
    rc = rel_give(rel, out); /* coalesce with the job already there */
    goto free_uri;
  }
  if (rel != NULL && uri == NULL) {
    if (rel->uri == NULL) {
      *why = "failed release has no uri; give it";
      return WS_ENOTFOUND;
    }
    rc = rel_parse_uri(rel->uri, &bucket, &prefix, &has_digest, &digest);
    if (rc != 0)
      return rc;
    uri = rel->uri;
  }
  if (t->active >= PEER_ACTIVE_RELEASES_MAX) {
    *why = "too many releases being fetched";
    rc = WS_EBUSY;
    goto free_uri;
  }
  return rel_launch(t, rel, uri, has_digest ? &digest : NULL, expect, bucket,
                    prefix, out);
free_uri:
  free(bucket);
  free(prefix);
  return rc;
}

int peer_release_prefetch(peer_releases_t *t, const char *uri,
                          const ws_hash_t *expect, peer_release_t **out,
                          const char **why) {
  int rc = rel_prefetch(t, uri, expect, out, why);
  /* A READY release asked for again (a rollback): the Hugging Face view's
   * refs/main names it again. */
  if (rc == 0 && out != NULL && *out != NULL && (*out)->state == PEER_REL_READY)
    peer_rel_hf_view(*out, NULL);
  return rc;
}

/* Swarm mode: fetch the release known only by its digest (the tracker's
 * wanted set without a URI, or POST prefetch {"digest"} for a release the
 * table does not know): the manifest comes from neighbours. */
static void rel_prefetch_digest(peer_releases_t *t, const ws_hash_t *digest) {
  peer_release_t *rel = peer_release_find(t, digest);
  const char *why;
  if (t->swarm == NULL || (rel != NULL && rel->state != PEER_REL_FAILED))
    return;
  if (rel != NULL && rel->uri != NULL) {
    rel_prefetch(t, rel->uri, digest, NULL, &why);
    return;
  }
  if (t->active >= PEER_ACTIVE_RELEASES_MAX)
    return;
  if (rel == NULL) {
    rel = peer_rel_new(t, PEER_REL_RESOLVING);
    if (rel == NULL)
      return;
    peer_rel_set_digest(rel, digest);
  } else {
    peer_rel_restart(rel);
  }
  rel->mpeer_tried = 0;
  WS_LOGI("release %s: prefetch by digest (manifest from neighbours)",
          rel->digest_str);
  peer_rel_resolve_start(rel);
}

void peer_releases_stalled_out(peer_releases_t *t, const ws_hash_t *digest,
                               int err, const char *msg) {
  peer_release_t *rel = peer_release_find(t, digest);
  if (rel != NULL && rel->state == PEER_REL_FETCHING)
    peer_rel_fail(rel, err, msg); /* the prefetch job ends with it */
}

void peer_releases_want(peer_releases_t *t, const char *uri,
                        const ws_hash_t *digest) {
  const char *why;
  if (!t->ctx->running)
    return;
  peer_release_t *rel = peer_release_find(t, digest);
  if (rel != NULL && rel->state == PEER_REL_READY) {
    /* Wanted while READY (a rollback the tracker sends before this node
     * joined the release's swarm): current again, as a local prefetch
     * makes it, and the Hugging Face view's refs/main names it again; not
     * at every announce. */
    uint64_t now = peer_now_unix_ms();
    if (now - rel->wanted_unix_ms >= PEER_MANIFEST_WAIT_MS) {
      rel->wanted_unix_ms = now;
      peer_release_claim(rel);
      peer_rel_hf_view(rel, NULL);
    }
    return;
  }
  if (rel != NULL && rel->state != PEER_REL_FAILED)
    return;
  /* A failed release is retried, but not at every announce. */
  if (rel != NULL &&
      peer_now_unix_ms() - rel->finished_unix_ms < PEER_MANIFEST_WAIT_MS)
    return;
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(digest, ds);
  WS_LOGI("tracker: cluster wants %s%s%s", ds, uri != NULL ? " from " : "",
          uri != NULL ? uri : "");
  if (uri != NULL)
    rel_prefetch(t, uri, digest, NULL, &why);
  else
    rel_prefetch_digest(t, digest);
}

void peer_releases_resume(peer_releases_t *t, const char *uri,
                          const ws_hash_t *digest) {
  const char *why;
  WS_LOGI("resuming prefetch of %s", uri);
  rel_prefetch(t, uri, digest, NULL, &why);
}

/* ---- releases that arrive READY ------------------------------------------ */

int peer_releases_add_ready(peer_releases_t *t, const ws_manifest_t *m,
                            int pinned, uint64_t published_unix_ms) {
  peer_release_t *rel = peer_rel_new(t, PEER_REL_READY);
  if (rel == NULL)
    return -ENOMEM;
  peer_rel_set_digest(rel, &m->digest);
  rel->model = m->model != NULL ? strdup(m->model) : NULL;
  rel->version = m->version != NULL ? strdup(m->version) : NULL;
  rel->nfiles = m->nfiles;
  rel->bytes_total = rel->bytes_done = m->total_size;
  rel->chunks_total = rel->chunks_done = m->total_chunks;
  rel->pinned = pinned;
  rel->started_unix_ms = rel->finished_unix_ms = published_unix_ms;
  rel->t1_ns = rel->t0_ns;
  return 0;
}

int peer_releases_seeded(peer_releases_t *t, const ws_manifest_t *m,
                         peer_release_t **out) {
  peer_release_t *rel = peer_release_find(t, &m->digest);
  if (rel == NULL) {
    int rc = peer_releases_add_ready(t, m, 1, peer_now_unix_ms());
    if (rc != 0)
      return rc;
    rel = peer_release_find(t, &m->digest);
  }
  rel->pinned = 1;
  /* Became READY without FETCHING: the swarm reads the manifest back from
   * the cache and seeds it. */
  if (t->swarm != NULL && rel->state == PEER_REL_READY)
    peer_swarm_seed_ready(t->swarm, &rel->digest);
  peer_rel_hf_view(rel, NULL);
  *out = rel;
  return 0;
}
