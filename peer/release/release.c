/* release.c - the release table and each release's state machine (diagram
 * in release.h): the list and references, resolve (manifest from a
 * neighbour or S3, parsed on a worker), begin, fetch, finish, fail.
 *
 * Owns: the table's list, each release's manifest and file list, its
 * manifest GET, and the worker jobs that parse, begin, publish and abort.
 * Job records (<cache>/p2pd-jobs/sha256-<hex>.json, job_record.h) make a
 * restart resume what was being fetched. The entry points that start a
 * job or add a release are in prefetch.c, the watches in watch.c, counters and
 * JSON in view.c. Borrows the context, the files table and the swarm. Thread:
 * loop thread; *_work functions run on workers and touch only their job struct
 * and the release's manifest, digest and URI, which the loop does not change
 * while a job runs.
 */
#include "release/release-int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "fetch/s3_small.h"
#include "release/job_record.h"
#include "ws_log.h"

typedef struct {
  peer_release_t *rel;
  int status;
  ws_manifest_t *m; /* parse: result */
  char errbuf[256];
} rel_job_t;

void peer_rel_set_state(peer_release_t *rel, peer_release_state_t to) {
  static const uint8_t legal[PEER_REL_STATE_LAST][PEER_REL_STATE_LAST] = {
      [PEER_REL_RESOLVING] = {[PEER_REL_BEGINNING] = 1, [PEER_REL_FAILED] = 1},
      [PEER_REL_BEGINNING] = {[PEER_REL_FETCHING] = 1, [PEER_REL_FAILED] = 1},
      [PEER_REL_FETCHING] = {[PEER_REL_FINISHING] = 1, [PEER_REL_FAILED] = 1},
      [PEER_REL_FINISHING] = {[PEER_REL_READY] = 1, [PEER_REL_FAILED] = 1},
      [PEER_REL_FAILED] = {[PEER_REL_RESOLVING] = 1},
  };
  static const char *const internal[PEER_REL_STATE_LAST] = {
      "RESOLVING", "BEGINNING", "FETCHING", "FINISHING", "READY", "FAILED"};
  assert(legal[rel->state][to]);
  WS_LOGD("release %s: %s -> %s", peer_rel_name(rel), internal[rel->state],
          internal[to]);
  if (!peer_rel_terminal(rel->state) && peer_rel_terminal(to)) {
    rel->t->active--;
    /* metrics: prefetch to ready (t1_ns is set by the snapshot before) */
    peer_counters_t *c = &rel->t->ctx->counters;
    ws_hist_observe(
        to == PEER_REL_READY ? &c->release_ready_s : &c->release_failed_s,
        rel->t1_ns > rel->t0_ns ? (double)(rel->t1_ns - rel->t0_ns) / 1e9
                                : 0.0);
  } else if (peer_rel_terminal(rel->state) && !peer_rel_terminal(to))
    rel->t->active++;
  rel->state = to;
}

/* ---- table, list and references ----------------------------------------- */

int peer_releases_new(peer_ctx_t *ctx, peer_files_t *files, peer_swarm_t *swarm,
                      peer_releases_t **out) {
  peer_releases_t *t = calloc(1, sizeof(*t));
  if (t == NULL)
    return -ENOMEM;
  t->ctx = ctx;
  t->files = files;
  t->swarm = swarm;
  *out = t;
  return 0;
}

unsigned peer_releases_active(const peer_releases_t *t) {
  return t->active;
}

peer_release_t *peer_releases_first(const peer_releases_t *t) {
  return t->head;
}

peer_release_t *peer_release_next(const peer_release_t *rel) {
  return rel->next;
}

void peer_rel_ref(peer_release_t *rel) {
  rel->refs++;
}

void peer_release_unref(peer_release_t *rel) {
  assert(rel->refs > 0);
  if (--rel->refs > 0)
    return;
  assert(rel->removed && rel->watches == NULL && rel->mreq == NULL);
  if (rel->files != NULL) {
    for (uint32_t k = 0; k < rel->nfiles; k++) {
      if (rel->files[k] != NULL)
        peer_file_unref(rel->files[k]);
    }
  }
  free(rel->files);
  ws_manifest_free(rel->m);
  free(rel->mbytes);
  free(rel->uri);
  free(rel->bucket);
  free(rel->prefix);
  free(rel->model);
  free(rel->version);
  free(rel);
}

peer_release_t *peer_rel_new(peer_releases_t *t, peer_release_state_t state) {
  peer_release_t *rel = calloc(1, sizeof(*rel));
  if (rel == NULL)
    return NULL;
  rel->t = t;
  rel->state = state;
  rel->refs = 1; /* the list's */
  rel->started_unix_ms = peer_now_unix_ms();
  rel->t0_ns = uv_hrtime();
  if (!peer_rel_terminal(state))
    t->active++;
  rel->next = t->head;
  t->head = rel;
  return rel;
}

/* The swarm stops sharing rel's digest (its record is this release's:
 * digests are unique in the table). */
static void rel_swarm_gone(peer_release_t *rel) {
  if (rel->t->swarm != NULL && rel->digest_known)
    peer_swarm_rel_gone(rel->t->swarm, &rel->digest);
}

void peer_release_remove(peer_release_t *rel) {
  peer_releases_t *t = rel->t;
  if (rel->removed)
    return;
  peer_release_t **pp = &t->head;
  while (*pp != NULL && *pp != rel)
    pp = &(*pp)->next;
  if (*pp == rel)
    *pp = rel->next;
  rel->removed = 1;
  rel_swarm_gone(rel);
  if (!peer_rel_terminal(rel->state))
    t->active--;
  peer_release_unref(rel);
}

peer_release_t *peer_release_find(const peer_releases_t *t,
                                  const ws_hash_t *digest) {
  for (peer_release_t *r = t->head; r != NULL; r = r->next) {
    if (r->digest_known && ws_hash_eq(&r->digest, digest))
      return r;
  }
  return NULL;
}

void peer_rel_set_digest(peer_release_t *rel, const ws_hash_t *digest) {
  rel->digest = *digest;
  rel->digest_known = 1;
  ws_digest_to_str(digest, rel->digest_str);
}

void peer_rel_restart(peer_release_t *rel) {
  peer_rel_set_state(rel, PEER_REL_RESOLVING);
  /* A release that failed after its manifest was parsed still holds it;
   * the new attempt reads and parses the manifest again. */
  ws_manifest_free(rel->m);
  rel->m = NULL;
  rel->err = 0;
  rel->errmsg[0] = '\0';
  rel->started_unix_ms = peer_now_unix_ms();
  rel->finished_unix_ms = 0;
  rel->t0_ns = uv_hrtime();
}

/* ---- worker jobs -------------------------------------------------------- */

static rel_job_t *rel_job_new(peer_release_t *rel) {
  rel_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL)
    return NULL;
  job->rel = rel;
  rel->refs++;
  return job;
}

static void rel_job_free(rel_job_t *job) {
  peer_release_t *rel = job->rel;
  ws_manifest_free(job->m);
  free(job);
  peer_release_unref(rel);
}

/* Queues job or, when that fails, runs after() at once with the error. */
static void rel_job_queue(rel_job_t *job, peer_work_fn work,
                          peer_after_fn after) {
  int rc = peer_ctx_queue(job->rel->t->ctx, work, after, job);
  if (rc != 0)
    after(job, rc);
}

/* A new job for rel queued, or rel failed with what (no memory). */
static void rel_job_start(peer_release_t *rel, peer_work_fn work,
                          peer_after_fn after, const char *what) {
  rel_job_t *job = rel_job_new(rel);
  if (job == NULL)
    peer_rel_fail(rel, -ENOMEM, what);
  else
    rel_job_queue(job, work, after);
}

/* ---- finish: publish ---------------------------------------------------- */

static void rel_snapshot(peer_release_t *rel) {
  peer_rel_progress_t p;
  peer_rel_progress(rel, &p);
  rel->bytes_done = p.bytes_done;
  rel->chunks_done = p.chunks_done;
  rel->bytes_from_s3 = p.from_s3;
  rel->bytes_from_peers = p.from_peers;
  rel->bytes_shared = p.shared;
  rel->finished_unix_ms = peer_now_unix_ms();
  rel->t1_ns = uv_hrtime();
}

/* Lets go of the files (they may close). */
static void rel_release_files(peer_release_t *rel) {
  if (rel->files == NULL)
    return;
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    if (rel->files[k] != NULL) {
      peer_file_detach(rel->files[k], rel);
      peer_file_unref(rel->files[k]);
    }
  }
  free(rel->files);
  rel->files = NULL;
}

static void rel_publish_work(void *arg) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  ws_store_t *st = rel->t->ctx->store;
  job->status = ws_store_release_publish(st, rel->m, rel->mbytes, rel->mlen);
  if (job->status == 0)
    peer_job_record_remove(ws_store_root(st), &rel->digest);
}

static void rel_ready(peer_release_t *rel) {
  rel_snapshot(rel);
  rel->bytes_done = rel->bytes_total;
  rel->chunks_done = rel->chunks_total;
  if (rel->t->swarm != NULL) {
    /* The swarm keeps the manifest to serve the release as a seed. */
    peer_swarm_rel_ready(rel->t->swarm, &rel->digest, rel->m, rel->mbytes,
                         rel->mlen);
  } else {
    ws_manifest_free(rel->m);
    free(rel->mbytes);
  }
  rel->m = NULL;
  rel->mbytes = NULL;
  rel_release_files(rel);
  peer_rel_set_state(rel, PEER_REL_READY);
  peer_rel_hf_view(rel, NULL); /* --hf-cache: on a worker */
  double secs = (double)(rel->t1_ns - rel->t0_ns) / 1e9;
  WS_LOGI("release %s: ready, %llu bytes (%llu from S3, %llu from peers) "
          "in %.2f s (%.1f MiB/s)",
          rel->digest_str, (unsigned long long)rel->bytes_total,
          (unsigned long long)rel->bytes_from_s3,
          (unsigned long long)rel->bytes_from_peers, secs,
          secs > 0 ? (double)rel->bytes_total / secs / 1048576.0 : 0.0);
  peer_rel_watches_settle(rel);
}

static void rel_publish_after(void *arg, int status) {
  rel_job_t *job = arg;
  int rc = status != 0 ? status : job->status;
  if (rc != 0)
    peer_rel_fail(job->rel, rc, "publishing the release");
  else
    rel_ready(job->rel);
  rel_job_free(job);
}

static void rel_finish_start(peer_release_t *rel) {
  peer_rel_set_state(rel, PEER_REL_FINISHING);
  rel_job_start(rel, rel_publish_work, rel_publish_after,
                "publishing the release");
}

/* A file rel waits for completed (err 0) or failed. */
static void rel_file_done(void *arg, peer_file_t *file, int err,
                          const char *msg) {
  peer_release_t *rel = arg;
  (void)file;
  if (!rel->t->ctx->running || rel->state != PEER_REL_FETCHING)
    return;
  if (err != 0) {
    peer_rel_fail(rel, err, msg);
    return;
  }
  assert(rel->files_pending > 0);
  if (--rel->files_pending == 0)
    rel_finish_start(rel);
}

/* ---- failure ------------------------------------------------------------ */

static void rel_abort_work(void *arg) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  ws_store_t *st = rel->t->ctx->store;
  /* The disk is full or failing: give back what the release holds there
   * (partials and blobs no other release lists). */
  if (ws_err_is_disk(rel->err))
    ws_store_release_discard(st, &rel->digest);
  else
    ws_store_release_abort(st, &rel->digest);
  peer_job_record_remove(ws_store_root(st), &rel->digest);
}

static void rel_abort_after(void *arg, int status) {
  (void)status;
  rel_job_free(arg);
}

void peer_rel_fail(peer_release_t *rel, int err, const char *msg) {
  if (peer_rel_terminal(rel->state))
    return;
  int began = rel->state >= PEER_REL_FETCHING;
  rel->err = err;
  snprintf(rel->errmsg, sizeof(rel->errmsg), "%s",
           msg != NULL && *msg != '\0' ? msg : ws_strerror(err));
  rel_snapshot(rel);
  rel_swarm_gone(rel);
  if (rel->mpeer_waiting) {
    /* The swarm dropped its ask with the record: drop its reference (the
     * list still holds one, so rel lives on). */
    rel->mpeer_waiting = 0;
    rel->refs--;
  }
  rel_release_files(rel);
  peer_rel_set_state(rel, PEER_REL_FAILED);
  if (rel->t->ctx->running) {
    WS_LOGE("release %s: failed: %s (%s)", peer_rel_name(rel), rel->errmsg,
            ws_errname(err));
    if (began) {
      /* The job record goes too: a failure is final until asked again. */
      rel_job_t *job = rel_job_new(rel);
      if (job != NULL)
        rel_job_queue(job, rel_abort_work, rel_abort_after);
    }
  }
  peer_rel_watches_settle(rel);
  if (!rel->digest_known)
    peer_release_remove(rel); /* a legacy URI that never resolved */
}

/* ---- fetch -------------------------------------------------------------- */

static int rel_key(const peer_release_t *rel, const char *name, char **out) {
  size_t a = strlen(rel->prefix), b = strlen(name);
  char *k = malloc(a + b + 1);
  if (k == NULL)
    return -ENOMEM;
  memcpy(k, rel->prefix, a);
  memcpy(k + a, name, b + 1);
  *out = k;
  return 0;
}

/* The shared file for mf (found or created), referenced and waited for. */
static int rel_file_setup(peer_release_t *rel, uint32_t k) {
  const ws_manifest_t *m = rel->m;
  const ws_mfile_t *mf = &m->files[k];
  peer_file_t *f = peer_file_find(rel->t->files, &mf->sha256);
  int rc;
  if (f == NULL) {
    /* A release known only by digest (swarm) has no S3 location: its
     * files come from neighbours only. */
    char *key = NULL;
    rc = rel->prefix != NULL ? rel_key(rel, mf->name, &key) : 0;
    if (rc == 0)
      rc = peer_file_create(rel->t->files, m, mf, rel->bucket, key, &f);
    free(key);
    if (rc != 0)
      return rc;
  } else if (!f->need_whole && !peer_file_same_chunks(f, m, mf)) {
    WS_LOGI("release %s: %s is shared with another release under a "
            "different chunk list; it will be hashed whole",
            rel->digest_str, mf->name);
    f->need_whole = 1;
  }
  peer_file_ref(f);
  rel->files[k] = f;
  rc = peer_file_attach(f, rel_file_done, rel);
  if (rc < 0)
    return rc;
  if (rc == 1)
    rel->files_pending++;
  return 0;
}

static void rel_fetch_start(peer_release_t *rel) {
  peer_releases_t *t = rel->t;
  const ws_manifest_t *m = rel->m;
  int rc = 0;
  rel->files = calloc(m->nfiles + 1u, sizeof(*rel->files));
  if (rel->files == NULL) {
    peer_rel_fail(rel, -ENOMEM, "listing files");
    return;
  }
  peer_rel_set_state(rel, PEER_REL_FETCHING);
  rel->files_pending = 0;
  for (uint32_t k = 0; k < m->nfiles && rc == 0; k++)
    rc = rel_file_setup(rel, k);
  if (rc != 0) {
    peer_rel_fail(rel, rc, "setting up files");
    return;
  }
  WS_LOGI("release %s: fetching %u files, %llu bytes (%u to assemble)",
          rel->digest_str, m->nfiles, (unsigned long long)m->total_size,
          rel->files_pending);
  if (t->swarm != NULL)
    peer_swarm_rel_fetching(t->swarm, &rel->digest, rel->uri, rel->m,
                            rel->mbytes, rel->mlen, rel->files, rel->nfiles);
  peer_rel_watches_settle(rel);
  if (rel->files_pending == 0)
    rel_finish_start(rel);
  else
    peer_files_kick(t->files);
}

/* ---- begin -------------------------------------------------------------- */

static void rel_begin_work(void *arg) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  ws_store_t *st = rel->t->ctx->store;
  job->status = ws_store_release_begin(st, rel->m);
  if (job->status == 0 && rel->uri != NULL) {
    int rc = peer_job_record_write(ws_store_root(st), &rel->digest, rel->uri);
    if (rc != 0)
      WS_LOGW("release %s: no job record (%s); a restart will not resume it",
              rel->digest_str, ws_strerror(rc));
  }
}

static void rel_begin_after(void *arg, int status) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  int rc = status != 0 ? status : job->status;
  /* The reservation may have evicted releases, even when it failed. */
  peer_releases_hf_prune(rel->t);
  rc = ws_err_disk(rc);
  if (rc != 0)
    peer_rel_fail(rel, rc,
                  rc == WS_ENOSPACE || rc == WS_ENOSPC
                      ? "not enough cache space for the release"
                      : "reserving space");
  else if (rel->t->ctx->running)
    rel_fetch_start(rel);
  else
    peer_rel_fail(rel, WS_ECANCELED, "daemon stopping");
  rel_job_free(job);
}

/* ---- resolve ------------------------------------------------------------ */

static void rel_parse_work(void *arg) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  job->status = ws_manifest_parse(rel->mbytes, rel->mlen, NULL, &job->m,
                                  job->errbuf, sizeof(job->errbuf));
}

/* A neighbour sent bytes that are not the release (rc: the parse's
 * result): ban it, then the manifest comes from S3 (or the release fails
 * without a URI). */
static void rel_parse_bad_peer(peer_release_t *rel, int rc) {
  char msg[512];
  snprintf(msg, sizeof(msg), "manifest of %s from a neighbour: %s",
           rel->digest_str,
           rc != 0 ? ws_strerror(rc) : "hashes to another digest");
  if (rel->t->swarm != NULL)
    peer_swarm_ban_node(rel->t->swarm, rel->mpeer, rel->mpeer_host, msg);
  rel->mpeer[0] = '\0';
  if (rel->uri == NULL) {
    peer_rel_fail(rel, WS_EDIGEST, msg);
  } else {
    rel->mpeer_tried = 1;
    peer_rel_resolve_start(rel);
  }
}

/* The manifest did not parse (rc) or is not the release asked for: fails
 * rel and returns 1, else 0. */
static int rel_parse_check(peer_release_t *rel, rel_job_t *job, int rc) {
  char msg[512];
  if (rc != 0) {
    if (rel->uri != NULL)
      snprintf(msg, sizeof(msg), "s3://%s/%smanifest.json: %s: %s", rel->bucket,
               rel->prefix, ws_errname(rc), job->errbuf);
    else
      snprintf(msg, sizeof(msg), "manifest: %s: %s", ws_errname(rc),
               job->errbuf);
    peer_rel_fail(rel, rc == -ENOMEM ? rc : WS_EMANIFEST, msg);
    return 1;
  }
  const ws_manifest_t *m = job->m;
  if ((rel->digest_known && !ws_hash_eq(&rel->digest, &m->digest)) ||
      (rel->expect_known && !ws_hash_eq(&rel->expect, &m->digest))) {
    char got[WS_DIGEST_STR_LEN + 1], want[WS_DIGEST_STR_LEN + 1];
    ws_digest_to_str(&m->digest, got);
    ws_digest_to_str(rel->digest_known ? &rel->digest : &rel->expect, want);
    snprintf(msg, sizeof(msg),
             "s3://%s/%smanifest.json hashes to %s, expected %s", rel->bucket,
             rel->prefix, got, want);
    peer_rel_fail(rel, WS_EDIGEST, msg);
    return 1;
  }
  return 0;
}

/* A legacy URI resolved to m's digest: join the release already there
 * (returns 1: rel is gone, merged into it) or take the digest (0). */
static int rel_pin_digest(peer_release_t *rel, const ws_manifest_t *m) {
  peer_releases_t *t = rel->t;
  char got[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&m->digest, got);
  WS_LOGI("release %s: legacy URI resolved; digest pinned to %s", rel->uri,
          got);
  peer_release_t *other = peer_release_find(t, &m->digest);
  if (other != NULL && other->state != PEER_REL_FAILED) {
    peer_rel_watches_move(rel, other);
    rel->state = PEER_REL_FAILED; /* silently gone: merged into other */
    t->active--;
    peer_release_remove(rel);
    return 1;
  }
  if (other != NULL)
    peer_release_remove(other);
  peer_rel_set_digest(rel, &m->digest);
  return 0;
}

/* The manifest is parsed: check its digest, join an existing release with
 * that digest (legacy URIs) or reserve space. */
static void rel_parse_after(void *arg, int status) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  int rc = status != 0 ? status : job->status;
  if (!rel->t->ctx->running) {
    peer_rel_fail(rel, WS_ECANCELED, "daemon stopping");
  } else if (rel->mpeer[0] != '\0' &&
             (rc != 0 || !ws_hash_eq(&rel->digest, &job->m->digest))) {
    rel_parse_bad_peer(rel, rc);
  } else if (!rel_parse_check(rel, job, rc) &&
             (rel->digest_known || !rel_pin_digest(rel, job->m))) {
    ws_manifest_t *m = job->m;
    rel->m = m;
    job->m = NULL;
    rel->nfiles = m->nfiles;
    rel->bytes_total = m->total_size;
    rel->chunks_total = m->total_chunks;
    free(rel->model);
    free(rel->version);
    rel->model = m->model != NULL ? strdup(m->model) : NULL;
    rel->version = m->version != NULL ? strdup(m->version) : NULL;
    peer_rel_set_state(rel, PEER_REL_BEGINNING);
    rel_job_start(rel, rel_begin_work, rel_begin_after, "reserving space");
  }
  rel_job_free(job);
}

/* The manifest GET's completion: bytes (taken) go to a parse job. */
static void rel_mdone(void *arg, int status, char *bytes, size_t len,
                      const char *errmsg) {
  peer_release_t *rel = arg;
  rel->mreq = NULL;
  if (status != 0) {
    char msg[512];
    if (status == WS_ELIMIT)
      snprintf(msg, sizeof(msg), "manifest.json is larger than %u bytes",
               PEER_MANIFEST_MAX_BYTES);
    else
      snprintf(msg, sizeof(msg), "GET s3://%s/%smanifest.json: %s", rel->bucket,
               rel->prefix, *errmsg ? errmsg : ws_strerror(status));
    peer_rel_fail(rel, status, msg);
  } else if (bytes == NULL) {
    peer_rel_fail(rel, WS_EMANIFEST, "manifest.json is empty");
  } else {
    free(rel->mbytes);
    rel->mbytes = bytes;
    rel->mlen = len;
    rel_job_start(rel, rel_parse_work, rel_parse_after, "parsing manifest");
  }
  peer_release_unref(rel); /* the request's */
}

/* The swarm's answer to peer_swarm_manifest_fetch: the manifest bytes
 * (taken; NUL-terminated) from node_id, or bytes NULL when no neighbour
 * could give them (then S3 if the release has a URI, else it fails). */
static void rel_manifest_peer(void *arg, char *bytes, size_t len,
                              const char *node_id, const char *host) {
  peer_release_t *rel = arg;
  assert(rel->mpeer_waiting);
  rel->mpeer_waiting = 0;
  if (rel->state != PEER_REL_RESOLVING || rel->removed ||
      !rel->t->ctx->running) {
    free(bytes);
  } else if (bytes == NULL) {
    peer_rel_resolve_start(rel); /* mpeer_tried: S3, or fail without a URI */
  } else {
    free(rel->mbytes);
    rel->mbytes = bytes;
    rel->mlen = len;
    snprintf(rel->mpeer, sizeof(rel->mpeer), "%s", node_id);
    snprintf(rel->mpeer_host, sizeof(rel->mpeer_host), "%s", host);
    WS_LOGI("release %s: manifest (%zu bytes) from neighbour %s",
            rel->digest_str, len, node_id);
    rel_job_start(rel, rel_parse_work, rel_parse_after, "parsing manifest");
  }
  peer_release_unref(rel); /* the swarm's ask */
}

/* Swarm mode, digest known, not tried yet: asks the neighbours. Returns 1
 * when the answer will come through rel_manifest_peer. */
static int rel_ask_swarm(peer_release_t *rel) {
  peer_swarm_t *sw = rel->t->swarm;
  if (sw == NULL || !rel->digest_known || rel->mpeer_tried)
    return 0;
  rel->mpeer_tried = 1;
  rel->mpeer_waiting = 1;
  rel->refs++; /* the swarm's ask */
  if (peer_swarm_manifest_fetch(sw, &rel->digest, rel->uri, rel_manifest_peer,
                                rel) == 0)
    return 1;
  rel->mpeer_waiting = 0;
  rel->refs--;
  return 0;
}

void peer_rel_resolve_start(peer_release_t *rel) {
  char *key = NULL;
  free(rel->mbytes);
  rel->mbytes = NULL;
  rel->mlen = 0;
  rel->mpeer[0] = '\0';
  /* Swarm mode: a neighbour holding the release sends the manifest (zero
   * S3 requests for a seeded release); S3 only when none does. */
  if (rel_ask_swarm(rel))
    return;
  if (rel->uri == NULL) {
    peer_rel_fail(rel, WS_ENOTFOUND, "no neighbour has the manifest");
    return;
  }
  int rc = rel_key(rel, "manifest.json", &key);
  if (rc == 0) {
    rel->refs++;
    rel->mreq = peer_s3_get_small(rel->t->ctx, rel->bucket, key,
                                  PEER_MANIFEST_MAX_BYTES, rel_mdone, rel);
    if (rel->mreq == NULL) {
      rel->refs--;
      rc = -ENOMEM;
    }
  }
  free(key);
  if (rc != 0)
    peer_rel_fail(rel, rc, "starting the manifest GET");
}

/* ---- shutdown ----------------------------------------------------------- */

void peer_releases_stop(peer_releases_t *t) {
  for (peer_release_t *rel = t->head; rel != NULL; rel = rel->next) {
    if (rel->mreq != NULL)
      ws_s3_req_cancel(rel->mreq);
    peer_rel_watches_cancel(rel);
  }
}

void peer_releases_free(peer_releases_t *t) {
  if (t == NULL)
    return;
  while (t->head != NULL) {
    peer_release_t *rel = t->head;
    assert(rel->watches == NULL && rel->mreq == NULL && rel->refs == 1);
    peer_release_remove(rel);
  }
  free(t);
}
