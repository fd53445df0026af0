/* release.c - the release job's state machine (diagram in release.h):
 * the daemon's release list and references, resolve (manifest from a
 * neighbour or S3, parsed on a worker), begin, fetch, finish, fail, and
 * startup/shutdown.
 *
 * Owns: the daemon's release list, each release's manifest and file list,
 * its manifest GET, and the worker jobs that parse, begin, publish and
 * abort. Job records (<cache>/p2pd-jobs/sha256-<hex>.json, see job.c) make
 * a restart resume what was being fetched. Counters, JSON and parked
 * requests are in release_view.c; the entry points that start a job in
 * release_prefetch.c. Thread: loop thread; *_work functions run on workers
 * and touch only their job struct.
 */
#include "release/release-int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch/file.h"
#include "release/job_record.h"
#include "fetch/origin.h"
#include "core/tunables.h"
#include "fetch/s3_small.h"
#include "swarm/swarm.h"
#include "ws_log.h"

typedef struct {
  peer_release_t *rel;
  int status;
  ws_manifest_t *m; /* parse: result */
  char errbuf[256];
  char *root; /* record jobs: cache root (owned) */
} rel_job_t;

const char *peer_release_state_name(peer_release_state_t s) {
  static const char *const names[PEER_REL_STATE_LAST] = {
      "resolving", "resolving", "fetching", "finishing", "ready", "failed"};
  return s < PEER_REL_STATE_LAST ? names[s] : "?";
}

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
  WS_LOGD("release %s: %s -> %s",
          rel->digest_known ? rel->digest_str : rel->uri, internal[rel->state],
          internal[to]);
  if (!peer_rel_terminal(rel->state) && peer_rel_terminal(to))
    rel->d->active_releases--;
  else if (peer_rel_terminal(rel->state) && !peer_rel_terminal(to))
    rel->d->active_releases++;
  rel->state = to;
}

/* ---- list and references ----------------------------------------------- */

static void rel_unref(peer_release_t *rel) {
  assert(rel->refs > 0);
  if (--rel->refs > 0)
    return;
  assert(rel->removed && rel->waiters == NULL && rel->mreq == NULL);
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

peer_release_t *peer_rel_new(peer_daemon_t *d, peer_release_state_t state) {
  peer_release_t *rel = calloc(1, sizeof(*rel));
  if (rel == NULL)
    return NULL;
  rel->d = d;
  rel->state = state;
  rel->refs = 1; /* the list's */
  rel->started_unix_ms = peer_daemon_now_unix_ms();
  rel->t0_ns = uv_hrtime();
  if (!peer_rel_terminal(state))
    d->active_releases++;
  rel->next = d->releases;
  d->releases = rel;
  return rel;
}

void peer_release_remove(peer_release_t *rel) {
  peer_daemon_t *d = rel->d;
  if (rel->removed)
    return;
  peer_release_t **pp = &d->releases;
  while (*pp != NULL && *pp != rel)
    pp = &(*pp)->next;
  if (*pp == rel)
    *pp = rel->next;
  rel->removed = 1;
  if (d->swarm != NULL)
    peer_swarm_rel_gone(d->swarm, rel);
  if (!peer_rel_terminal(rel->state))
    d->active_releases--;
  rel_unref(rel);
}

peer_release_t *peer_release_find(peer_daemon_t *d, const ws_hash_t *digest) {
  for (peer_release_t *r = d->releases; r != NULL; r = r->next) {
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
  free(job->root);
  free(job);
  rel_unref(rel);
}

/* Queues job or, when that fails, runs after() at once with the error. */
static void rel_job_queue(rel_job_t *job, peer_work_fn work,
                          peer_after_fn after) {
  int rc = peer_daemon_queue(job->rel->d, work, after, job);
  if (rc != 0)
    after(job, rc);
}

/* ---- finish: publish ---------------------------------------------------- */

static void rel_snapshot(peer_release_t *rel) {
  peer_rel_progress_t p;
  peer_rel_progress(rel, &p);
  rel->bytes_done = p.bytes_done;
  rel->chunks_done = p.chunks_done;
  rel->bytes_from_s3 = p.from_s3;
  rel->bytes_from_peers = p.from_peers;
  rel->finished_unix_ms = peer_daemon_now_unix_ms();
  rel->t1_ns = uv_hrtime();
}

/* Lets go of the files (they may close) and of the manifest. */
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
  ws_store_t *st = rel->d->store;
  job->status = ws_store_release_publish(st, rel->m, rel->mbytes, rel->mlen);
  if (job->status == 0)
    peer_job_record_remove(ws_store_root(st), &rel->digest);
}

static void rel_publish_after(void *arg, int status) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  int rc = status != 0 ? status : job->status;
  if (rc != 0) {
    peer_rel_fail(rel, rc, "publishing the release");
  } else {
    rel_snapshot(rel);
    rel->bytes_done = rel->bytes_total;
    rel->chunks_done = rel->chunks_total;
    /* The swarm keeps the manifest to serve the release as a seed. */
    if (rel->d->swarm != NULL)
      peer_swarm_rel_ready(rel->d->swarm, rel);
    rel_release_files(rel);
    ws_manifest_free(rel->m);
    rel->m = NULL;
    free(rel->mbytes);
    rel->mbytes = NULL;
    peer_rel_set_state(rel, PEER_REL_READY);
    double secs = (double)(rel->t1_ns - rel->t0_ns) / 1e9;
    WS_LOGI("release %s: ready, %llu bytes (%llu from S3, %llu from peers) "
            "in %.2f s (%.1f MiB/s)",
            rel->digest_str, (unsigned long long)rel->bytes_total,
            (unsigned long long)rel->bytes_from_s3,
            (unsigned long long)rel->bytes_from_peers, secs,
            secs > 0 ? (double)rel->bytes_total / secs / 1048576.0 : 0.0);
    peer_rel_answer(rel);
  }
  rel_job_free(job);
}

static void rel_finish_start(peer_release_t *rel) {
  peer_rel_set_state(rel, PEER_REL_FINISHING);
  rel_job_t *job = rel_job_new(rel);
  if (job == NULL) {
    peer_rel_fail(rel, -ENOMEM, "publishing the release");
    return;
  }
  rel_job_queue(job, rel_publish_work, rel_publish_after);
}

void peer_release_file_done(peer_release_t *rel, peer_file_t *file, int err,
                            const char *msg) {
  if (rel->d->state != PEER_DAEMON_RUNNING || rel->state != PEER_REL_FETCHING)
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
  ws_store_release_abort(rel->d->store, &rel->digest);
  peer_job_record_remove(ws_store_root(rel->d->store), &rel->digest);
}

static void rel_abort_after(void *arg, int status) {
  rel_job_free(arg);
}

void peer_rel_fail(peer_release_t *rel, int err, const char *msg) {
  peer_daemon_t *d = rel->d;
  if (peer_rel_terminal(rel->state))
    return;
  int began = rel->state >= PEER_REL_FETCHING;
  rel->err = err;
  snprintf(rel->errmsg, sizeof(rel->errmsg), "%s",
           msg != NULL && *msg != '\0' ? msg : ws_strerror(err));
  rel_snapshot(rel);
  if (d->swarm != NULL)
    peer_swarm_rel_gone(d->swarm, rel);
  if (rel->mpeer_waiting) {
    /* The swarm forgot its ask with the record: drop its reference (the
     * list still holds one, so rel lives on). */
    rel->mpeer_waiting = 0;
    rel->refs--;
  }
  rel_release_files(rel);
  peer_rel_set_state(rel, PEER_REL_FAILED);
  if (d->state == PEER_DAEMON_RUNNING) {
    WS_LOGE("release %s: failed: %s (%s)", peer_rel_name(rel), rel->errmsg,
            ws_errname(err));
    if (began) {
      /* The job record goes too: a failure is final until asked again. */
      rel_job_t *job = rel_job_new(rel);
      if (job != NULL)
        rel_job_queue(job, rel_abort_work, rel_abort_after);
    }
  }
  peer_rel_answer(rel);
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

static void rel_fetch_start(peer_release_t *rel) {
  peer_daemon_t *d = rel->d;
  const ws_manifest_t *m = rel->m;
  int rc = 0;
  rel->files = calloc(m->nfiles + 1u, sizeof(*rel->files));
  if (rel->files == NULL) {
    peer_rel_fail(rel, -ENOMEM, "listing files");
    return;
  }
  peer_rel_set_state(rel, PEER_REL_FETCHING);
  rel->files_pending = 0;
  for (uint32_t k = 0; k < m->nfiles; k++) {
    const ws_mfile_t *mf = &m->files[k];
    peer_file_t *f = peer_file_find(d, &mf->sha256);
    if (f == NULL) {
      /* A release known only by digest (swarm) has no S3 location: its
       * files come from neighbours only. */
      char *key = NULL;
      rc = rel->prefix != NULL ? rel_key(rel, mf->name, &key) : 0;
      if (rc == 0)
        rc = peer_file_create(d, m, mf, rel->bucket, key, &f);
      free(key);
      if (rc != 0)
        break;
    } else if (!f->need_whole && !peer_file_same_chunks(f, m, mf)) {
      WS_LOGI("release %s: %s is shared with another release under a "
              "different chunk list; it will be hashed whole",
              rel->digest_str, mf->name);
      f->need_whole = 1;
    }
    peer_file_ref(f);
    rel->files[k] = f;
    rc = peer_file_attach(f, rel);
    if (rc < 0)
      break;
    if (rc == 1)
      rel->files_pending++;
    rc = 0;
  }
  if (rc != 0) {
    peer_rel_fail(rel, rc, "setting up files");
    return;
  }
  WS_LOGI("release %s: fetching %u files, %llu bytes (%u to assemble)",
          rel->digest_str, m->nfiles, (unsigned long long)m->total_size,
          rel->files_pending);
  if (d->swarm != NULL)
    peer_swarm_rel_fetching(d->swarm, rel);
  peer_rel_answer(rel);
  if (rel->files_pending == 0)
    rel_finish_start(rel);
  else
    peer_files_kick(d);
}

/* ---- begin -------------------------------------------------------------- */

static void rel_begin_work(void *arg) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  ws_store_t *st = rel->d->store;
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
  if (rc != 0)
    peer_rel_fail(rel, rc,
                  rc == WS_ENOSPACE || rc == -ENOSPC
                      ? "not enough cache space for the release"
                      : "reserving space");
  else if (rel->d->state == PEER_DAEMON_RUNNING)
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

/* The manifest is parsed: check its digest, join an existing release with
 * that digest (legacy URIs) or reserve space. */
static void rel_parse_after(void *arg, int status) {
  rel_job_t *job = arg;
  peer_release_t *rel = job->rel;
  peer_daemon_t *d = rel->d;
  int rc = status != 0 ? status : job->status;
  char msg[512];
  if (d->state != PEER_DAEMON_RUNNING) {
    peer_rel_fail(rel, WS_ECANCELED, "daemon stopping");
    goto done;
  }
  if (rel->mpeer[0] != '\0' &&
      (rc != 0 || !ws_hash_eq(&rel->digest, &job->m->digest))) {
    /* A neighbour sent bytes that are not the release: ban it, then the
     * manifest comes from S3 (or the release fails without a URI). */
    snprintf(msg, sizeof(msg), "manifest of %s from a neighbour: %s",
             rel->digest_str,
             rc != 0 ? ws_strerror(rc) : "hashes to another digest");
    if (d->swarm != NULL)
      peer_swarm_ban_node(d->swarm, rel->mpeer, msg);
    rel->mpeer[0] = '\0';
    if (rel->uri == NULL) {
      peer_rel_fail(rel, WS_EDIGEST, msg);
    } else {
      rel->mpeer_tried = 1;
      peer_rel_resolve_start(rel);
    }
    goto done;
  }
  if (rc != 0) {
    if (rel->uri != NULL)
      snprintf(msg, sizeof(msg), "s3://%s/%smanifest.json: %s: %s", rel->bucket,
               rel->prefix, ws_errname(rc), job->errbuf);
    else
      snprintf(msg, sizeof(msg), "manifest: %s: %s", ws_errname(rc),
               job->errbuf);
    peer_rel_fail(rel, rc == -ENOMEM ? rc : WS_EMANIFEST, msg);
    goto done;
  }
  ws_manifest_t *m = job->m;
  char got[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&m->digest, got);
  if ((rel->digest_known && !ws_hash_eq(&rel->digest, &m->digest)) ||
      (rel->expect_known && !ws_hash_eq(&rel->expect, &m->digest))) {
    char want[WS_DIGEST_STR_LEN + 1];
    ws_digest_to_str(rel->digest_known ? &rel->digest : &rel->expect, want);
    snprintf(msg, sizeof(msg),
             "s3://%s/%smanifest.json hashes to %s, expected %s", rel->bucket,
             rel->prefix, got, want);
    peer_rel_fail(rel, WS_EDIGEST, msg);
    goto done;
  }
  if (!rel->digest_known) {
    WS_LOGI("release %s: legacy URI resolved; digest pinned to %s", rel->uri,
            got);
    peer_release_t *other = peer_release_find(d, &m->digest);
    if (other != NULL && other->state != PEER_REL_FAILED) {
      peer_rel_waiters_move(rel, other);
      rel->state = PEER_REL_FAILED; /* silently gone: merged into other */
      d->active_releases--;
      peer_release_remove(rel);
      goto done;
    }
    if (other != NULL)
      peer_release_remove(other);
    peer_rel_set_digest(rel, &m->digest);
  }
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
  rel_job_t *bj = rel_job_new(rel);
  if (bj == NULL) {
    peer_rel_fail(rel, -ENOMEM, "reserving space");
    goto done;
  }
  rel_job_queue(bj, rel_begin_work, rel_begin_after);
done:
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
    rel_job_t *job = rel_job_new(rel);
    if (job == NULL)
      peer_rel_fail(rel, -ENOMEM, "parsing manifest");
    else
      rel_job_queue(job, rel_parse_work, rel_parse_after);
  }
  rel_unref(rel); /* the request's */
}

void peer_rel_resolve_start(peer_release_t *rel) {
  char *key = NULL;
  free(rel->mbytes);
  rel->mbytes = NULL;
  rel->mlen = 0;
  rel->mpeer[0] = '\0';
  /* Swarm mode: a neighbour holding the release sends the manifest (zero
   * S3 requests for a seeded release); S3 only when none does. */
  peer_swarm_t *sw = rel->d->swarm;
  if (sw != NULL && rel->digest_known && !rel->mpeer_tried) {
    rel->mpeer_tried = 1;
    rel->mpeer_waiting = 1;
    rel->refs++; /* the swarm's ask */
    if (peer_swarm_manifest_fetch(sw, rel) == 0)
      return;
    rel->mpeer_waiting = 0;
    rel->refs--;
  }
  if (rel->uri == NULL) {
    peer_rel_fail(rel, WS_ENOTFOUND, "no neighbour has the manifest");
    return;
  }
  int rc = rel_key(rel, "manifest.json", &key);
  if (rc == 0) {
    rel->refs++;
    rel->mreq = peer_s3_get_small(rel->d, rel->bucket, key,
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

void peer_release_manifest_peer(peer_release_t *rel, char *bytes, size_t len,
                                const char *node_id) {
  assert(rel->mpeer_waiting);
  rel->mpeer_waiting = 0;
  if (rel->state != PEER_REL_RESOLVING || rel->removed ||
      rel->d->state != PEER_DAEMON_RUNNING) {
    free(bytes);
  } else if (bytes == NULL) {
    peer_rel_resolve_start(rel); /* mpeer_tried: S3, or fail without a URI */
  } else {
    free(rel->mbytes);
    rel->mbytes = bytes;
    rel->mlen = len;
    snprintf(rel->mpeer, sizeof(rel->mpeer), "%s", node_id);
    WS_LOGI("release %s: manifest (%zu bytes) from neighbour %s",
            rel->digest_str, len, node_id);
    rel_job_t *job = rel_job_new(rel);
    if (job == NULL)
      peer_rel_fail(rel, -ENOMEM, "parsing manifest");
    else
      rel_job_queue(job, rel_parse_work, rel_parse_after);
  }
  rel_unref(rel); /* the swarm's ask */
}

/* ---- startup, shutdown -------------------------------------------------- */

int peer_release_add_ready(peer_daemon_t *d, const ws_manifest_t *m, int pinned,
                           uint64_t published_unix_ms) {
  peer_release_t *rel = peer_rel_new(d, PEER_REL_READY);
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

void peer_releases_stop(peer_daemon_t *d) {
  for (peer_release_t *rel = d->releases; rel != NULL; rel = rel->next) {
    if (rel->mreq != NULL)
      ws_s3_req_cancel(rel->mreq);
    peer_rel_waiters_cancel(rel);
  }
}

void peer_releases_free(peer_daemon_t *d) {
  while (d->releases != NULL) {
    peer_release_t *rel = d->releases;
    assert(rel->waiters == NULL && rel->mreq == NULL && rel->refs == 1);
    peer_release_remove(rel);
  }
}
