/* release.c - release jobs (state diagram in release.h) and the requests
 * parked on them.
 *
 * Owns: the daemon's release list, each release's manifest and file list,
 * its parked requests (prefetch replies, waits with their timers), its
 * manifest GET, and the worker jobs that parse, begin, publish and abort.
 * Job records (<cache>/p2pd-jobs/sha256-<hex>.json, see job.c) make a
 * restart resume what was being fetched. Thread: loop thread; *_work
 * functions run on workers and touch only their job struct.
 */
#include "release.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file.h"
#include "job.h"
#include "origin.h"
#include "peer_config.h"
#include "swarm.h"
#include "ws_log.h"

typedef enum { WAIT_PREFETCH, WAIT_READY } wait_kind_t;

struct peer_waiter_s {
  peer_waiter_t *next;
  peer_release_t *rel;
  ws_httpd_req_t *req; /* NULL once answered */
  wait_kind_t kind;
  uv_timer_t timer; /* freed in its close callback */
};

typedef struct {
  peer_release_t *rel;
  int status;
  ws_manifest_t *m; /* parse: result */
  char errbuf[256];
  char *root; /* record jobs: cache root (owned) */
} rel_job_t;

static void rel_answer(peer_release_t *rel);
static void rel_fail(peer_release_t *rel, int err, const char *msg);
static void rel_resolve_start(peer_release_t *rel);

const char *peer_release_state_name(peer_release_state_t s) {
  static const char *const names[PEER_REL_STATE_LAST] = {
      "resolving", "resolving", "fetching", "finishing", "ready", "failed"};
  return s < PEER_REL_STATE_LAST ? names[s] : "?";
}

static int rel_terminal(peer_release_state_t s) {
  return s == PEER_REL_READY || s == PEER_REL_FAILED;
}

static void rel_set_state(peer_release_t *rel, peer_release_state_t to) {
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
  if (!rel_terminal(rel->state) && rel_terminal(to))
    rel->d->active_releases--;
  else if (rel_terminal(rel->state) && !rel_terminal(to))
    rel->d->active_releases++;
  rel->state = to;
}

static const char *rel_name(const peer_release_t *rel) {
  return rel->digest_known ? rel->digest_str : rel->uri;
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

static peer_release_t *rel_new(peer_daemon_t *d, peer_release_state_t state) {
  peer_release_t *rel = calloc(1, sizeof(*rel));
  if (rel == NULL)
    return NULL;
  rel->d = d;
  rel->state = state;
  rel->refs = 1; /* the list's */
  rel->started_unix_ms = peer_daemon_now_unix_ms();
  rel->t0_ns = uv_hrtime();
  if (!rel_terminal(state))
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
  if (!rel_terminal(rel->state))
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

static void rel_set_digest(peer_release_t *rel, const ws_hash_t *digest) {
  rel->digest = *digest;
  rel->digest_known = 1;
  ws_digest_to_str(digest, rel->digest_str);
}

/* ---- counters and JSON ------------------------------------------------- */

typedef struct {
  uint64_t bytes_done, chunks_done, from_s3, from_peers;
} rel_progress_t;

static void rel_progress(const peer_release_t *rel, rel_progress_t *p) {
  memset(p, 0, sizeof(*p));
  if (rel->files == NULL || rel_terminal(rel->state)) {
    p->bytes_done = rel->bytes_done;
    p->chunks_done = rel->chunks_done;
    p->from_s3 = rel->bytes_from_s3;
    p->from_peers = rel->bytes_from_peers;
    return;
  }
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    const peer_file_t *f = rel->files[k];
    if (f == NULL)
      continue;
    if (f->state == PEER_FILE_COMPLETE || f->state == PEER_FILE_CLOSING) {
      p->bytes_done += f->mf.size;
      p->chunks_done += f->mf.nchunks;
    } else {
      p->bytes_done += f->bytes_done;
      p->chunks_done += f->chunks_done;
    }
    p->from_s3 += f->bytes_from_s3;
    p->from_peers += f->bytes_from_peers;
  }
}

static cJSON *rel_time_json(uint64_t unix_ms) {
  if (unix_ms == 0)
    return cJSON_CreateNull();
  time_t t = (time_t)(unix_ms / 1000);
  struct tm tm;
  char buf[64];
  gmtime_r(&t, &tm);
  snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, (unsigned)(unix_ms % 1000));
  return cJSON_CreateString(buf);
}

static cJSON *rel_str_json(const char *s) {
  return s != NULL ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static int rel_path(const peer_release_t *rel, char *buf, size_t len) {
  if (!rel->digest_known || rel->d->store == NULL)
    return WS_ENOTFOUND;
  return ws_store_release_path(rel->d->store, &rel->digest, buf, len);
}

cJSON *peer_release_json(const peer_release_t *rel) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  char path[4096];
  rel_progress_t p;
  rel_progress(rel, &p);
  int has_path = rel_path(rel, path, sizeof(path)) == 0;
  cJSON_AddItemToObject(
      o, "digest", rel_str_json(rel->digest_known ? rel->digest_str : NULL));
  cJSON_AddStringToObject(o, "state", peer_release_state_name(rel->state));
  cJSON_AddItemToObject(o, "model", rel_str_json(rel->model));
  cJSON_AddItemToObject(o, "version", rel_str_json(rel->version));
  cJSON_AddItemToObject(o, "uri", rel_str_json(rel->uri));
  cJSON_AddItemToObject(o, "path", rel_str_json(has_path ? path : NULL));
  cJSON_AddNumberToObject(o, "files", rel->nfiles);
  cJSON_AddNumberToObject(o, "bytes_total", (double)rel->bytes_total);
  cJSON_AddNumberToObject(o, "bytes_done", (double)p.bytes_done);
  cJSON_AddNumberToObject(o, "bytes_from_s3", (double)p.from_s3);
  cJSON_AddNumberToObject(o, "bytes_from_peers", (double)p.from_peers);
  cJSON_AddNumberToObject(o, "chunks_total", (double)rel->chunks_total);
  cJSON_AddNumberToObject(o, "chunks_done", (double)p.chunks_done);
  cJSON_AddBoolToObject(o, "pinned", rel->pinned);
  if (rel->state == PEER_REL_FAILED) {
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    if (e != NULL) {
      cJSON_AddStringToObject(e, "code", ws_errname(rel->err));
      cJSON_AddStringToObject(e, "message", rel->errmsg);
    }
  }
  cJSON_AddItemToObject(o, "started_at", rel_time_json(rel->started_unix_ms));
  cJSON_AddItemToObject(
      o, "finished_at",
      rel_time_json(rel_terminal(rel->state) ? rel->finished_unix_ms : 0));
  uint64_t end = rel_terminal(rel->state) ? rel->t1_ns : uv_hrtime();
  cJSON_AddNumberToObject(o, "elapsed_s",
                          end > rel->t0_ns ? (double)(end - rel->t0_ns) / 1e9
                                           : 0.0);
  return o;
}

/* ---- parked requests --------------------------------------------------- */

static void waiter_timer_closed(uv_handle_t *h) {
  free(h->data);
}

/* Takes w out of its release and gives req back (status 0: drop). */
static void waiter_finish(peer_waiter_t *w, int status, cJSON *json, int err,
                          const char *msg) {
  peer_release_t *rel = w->rel;
  peer_waiter_t **pp = &rel->waiters;
  while (*pp != NULL && *pp != w)
    pp = &(*pp)->next;
  assert(*pp == w);
  *pp = w->next;
  rel->nwaiters--;
  ws_httpd_req_t *req = w->req;
  w->req = NULL;
  uv_timer_stop(&w->timer);
  uv_close((uv_handle_t *)&w->timer, waiter_timer_closed);
  if (status == 0)
    ws_httpd_req_drop(req);
  else if (json != NULL)
    ws_httpd_reply_json(req, status, json);
  else
    ws_httpd_reply_error(req, status, err, msg);
}

static void waiter_gone(ws_httpd_req_t *req, void *arg) {
  waiter_finish(arg, 0, NULL, 0, NULL);
}

static void waiter_timeout(uv_timer_t *t) {
  peer_waiter_t *w = t->data;
  waiter_finish(w, 504, NULL, WS_ETIMEOUT,
                "release not ready before timeout_ms");
}

static void waiter_add(peer_release_t *rel, ws_httpd_req_t *req,
                       wait_kind_t kind, uint64_t timeout_ms) {
  if (rel->nwaiters >= PEER_WAITERS_PER_RELEASE_MAX) {
    ws_httpd_reply_error(req, 503, WS_ELIMIT, "too many requests waiting");
    return;
  }
  peer_waiter_t *w = calloc(1, sizeof(*w));
  if (w == NULL) {
    ws_httpd_reply_error(req, 503, -ENOMEM, NULL);
    return;
  }
  w->rel = rel;
  w->req = req;
  w->kind = kind;
  uv_timer_init(&rel->d->loop, &w->timer);
  w->timer.data = w;
  if (timeout_ms > 0)
    uv_timer_start(&w->timer, waiter_timeout, timeout_ms, 0);
  w->next = rel->waiters;
  rel->waiters = w;
  rel->nwaiters++;
  ws_httpd_req_on_gone(req, waiter_gone, w);
}

static cJSON *rel_prefetch_json(const peer_release_t *rel) {
  cJSON *o = cJSON_CreateObject();
  char path[4096];
  if (o == NULL)
    return NULL;
  cJSON_AddItemToObject(
      o, "digest", rel_str_json(rel->digest_known ? rel->digest_str : NULL));
  cJSON_AddStringToObject(o, "state", peer_release_state_name(rel->state));
  cJSON_AddItemToObject(
      o, "path",
      rel_str_json(rel_path(rel, path, sizeof(path)) == 0 ? path : NULL));
  return o;
}

/* Answers every parked request the current state settles. */
static void rel_answer(peer_release_t *rel) {
  peer_waiter_t *w = rel->waiters;
  while (w != NULL) {
    peer_waiter_t *next = w->next;
    if (rel->state == PEER_REL_FAILED) {
      if (w->kind == WAIT_PREFETCH)
        waiter_finish(w, peer_api_status_for(rel->err), NULL, rel->err,
                      rel->errmsg);
      else
        waiter_finish(w, 409, peer_release_json(rel), 0, NULL);
    } else if (rel->state == PEER_REL_READY) {
      waiter_finish(w, 200,
                    w->kind == WAIT_PREFETCH ? rel_prefetch_json(rel)
                                             : peer_release_json(rel),
                    0, NULL);
    } else if (w->kind == WAIT_PREFETCH && rel->state >= PEER_REL_FETCHING) {
      waiter_finish(w, 200, rel_prefetch_json(rel), 0, NULL);
    }
    w = next;
  }
}

/* Moves rel's parked requests to other (a legacy URI resolved to a digest
 * that other already has). */
static void rel_move_waiters(peer_release_t *rel, peer_release_t *other) {
  while (rel->waiters != NULL) {
    peer_waiter_t *w = rel->waiters;
    rel->waiters = w->next;
    rel->nwaiters--;
    w->rel = other;
    w->next = other->waiters;
    other->waiters = w;
    other->nwaiters++;
  }
  rel_answer(other);
}

void peer_release_wait(peer_release_t *rel, ws_httpd_req_t *req,
                       uint64_t timeout_ms) {
  if (rel->state == PEER_REL_READY)
    ws_httpd_reply_json(req, 200, peer_release_json(rel));
  else if (rel->state == PEER_REL_FAILED)
    ws_httpd_reply_json(req, 409, peer_release_json(rel));
  else
    waiter_add(rel, req, WAIT_READY, timeout_ms);
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
  rel_progress_t p;
  rel_progress(rel, &p);
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
    rel_fail(rel, rc, "publishing the release");
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
    rel_set_state(rel, PEER_REL_READY);
    double secs = (double)(rel->t1_ns - rel->t0_ns) / 1e9;
    WS_LOGI("release %s: ready, %llu bytes (%llu from S3, %llu from peers) "
            "in %.2f s (%.1f MiB/s)",
            rel->digest_str, (unsigned long long)rel->bytes_total,
            (unsigned long long)rel->bytes_from_s3,
            (unsigned long long)rel->bytes_from_peers, secs,
            secs > 0 ? (double)rel->bytes_total / secs / 1048576.0 : 0.0);
    rel_answer(rel);
  }
  rel_job_free(job);
}

static void rel_finish_start(peer_release_t *rel) {
  rel_set_state(rel, PEER_REL_FINISHING);
  rel_job_t *job = rel_job_new(rel);
  if (job == NULL) {
    rel_fail(rel, -ENOMEM, "publishing the release");
    return;
  }
  rel_job_queue(job, rel_publish_work, rel_publish_after);
}

void peer_release_file_done(peer_release_t *rel, peer_file_t *file, int err,
                            const char *msg) {
  if (rel->d->state != PEER_DAEMON_RUNNING || rel->state != PEER_REL_FETCHING)
    return;
  if (err != 0) {
    rel_fail(rel, err, msg);
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

static void rel_fail(peer_release_t *rel, int err, const char *msg) {
  peer_daemon_t *d = rel->d;
  if (rel_terminal(rel->state))
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
  rel_set_state(rel, PEER_REL_FAILED);
  if (d->state == PEER_DAEMON_RUNNING) {
    WS_LOGE("release %s: failed: %s (%s)", rel_name(rel), rel->errmsg,
            ws_errname(err));
    if (began) {
      /* The job record goes too: a failure is final until asked again. */
      rel_job_t *job = rel_job_new(rel);
      if (job != NULL)
        rel_job_queue(job, rel_abort_work, rel_abort_after);
    }
  }
  rel_answer(rel);
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
    rel_fail(rel, -ENOMEM, "listing files");
    return;
  }
  rel_set_state(rel, PEER_REL_FETCHING);
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
    rel_fail(rel, rc, "setting up files");
    return;
  }
  WS_LOGI("release %s: fetching %u files, %llu bytes (%u to assemble)",
          rel->digest_str, m->nfiles, (unsigned long long)m->total_size,
          rel->files_pending);
  if (d->swarm != NULL)
    peer_swarm_rel_fetching(d->swarm, rel);
  rel_answer(rel);
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
    rel_fail(rel, rc,
             rc == WS_ENOSPACE || rc == -ENOSPC
                 ? "not enough cache space for the release"
                 : "reserving space");
  else if (rel->d->state == PEER_DAEMON_RUNNING)
    rel_fetch_start(rel);
  else
    rel_fail(rel, WS_ECANCELED, "daemon stopping");
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
    rel_fail(rel, WS_ECANCELED, "daemon stopping");
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
      rel_fail(rel, WS_EDIGEST, msg);
    } else {
      rel->mpeer_tried = 1;
      rel_resolve_start(rel);
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
    rel_fail(rel, rc == -ENOMEM ? rc : WS_EMANIFEST, msg);
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
    rel_fail(rel, WS_EDIGEST, msg);
    goto done;
  }
  if (!rel->digest_known) {
    WS_LOGI("release %s: legacy URI resolved; digest pinned to %s", rel->uri,
            got);
    peer_release_t *other = peer_release_find(d, &m->digest);
    if (other != NULL && other->state != PEER_REL_FAILED) {
      rel_move_waiters(rel, other);
      rel->state = PEER_REL_FAILED; /* silently gone: merged into other */
      d->active_releases--;
      peer_release_remove(rel);
      goto done;
    }
    if (other != NULL)
      peer_release_remove(other);
    rel_set_digest(rel, &m->digest);
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
  rel_set_state(rel, PEER_REL_BEGINNING);
  rel_job_t *bj = rel_job_new(rel);
  if (bj == NULL) {
    rel_fail(rel, -ENOMEM, "reserving space");
    goto done;
  }
  rel_job_queue(bj, rel_begin_work, rel_begin_after);
done:
  rel_job_free(job);
}

static int rel_mdata(ws_s3_req_t *req, uint64_t offset, const void *buf,
                     size_t len, void *arg) {
  peer_release_t *rel = arg;
  if (rel->mlen + len > PEER_MANIFEST_MAX_BYTES)
    return WS_ELIMIT;
  if (rel->mlen + len + 1 > rel->mcap) {
    size_t cap = rel->mcap ? rel->mcap : 64 * 1024;
    while (cap < rel->mlen + len + 1)
      cap *= 2;
    char *p = realloc(rel->mbytes, cap);
    if (p == NULL)
      return -ENOMEM;
    rel->mbytes = p;
    rel->mcap = cap;
  }
  memcpy(rel->mbytes + rel->mlen, buf, len);
  rel->mlen += len;
  rel->mbytes[rel->mlen] = '\0';
  return WS_S3_DATA_OK;
}

static void rel_mdone(ws_s3_req_t *req, int status, void *arg) {
  peer_release_t *rel = arg;
  rel->mreq = NULL;
  if (status != 0) {
    char msg[512];
    if (status == WS_ELIMIT)
      snprintf(msg, sizeof(msg), "manifest.json is larger than %u bytes",
               PEER_MANIFEST_MAX_BYTES);
    else
      snprintf(msg, sizeof(msg), "GET s3://%s/%smanifest.json: %s", rel->bucket,
               rel->prefix,
               *ws_s3_req_errmsg(req) ? ws_s3_req_errmsg(req)
                                      : ws_strerror(status));
    rel_fail(rel, status, msg);
  } else if (rel->mbytes == NULL) {
    rel_fail(rel, WS_EMANIFEST, "manifest.json is empty");
  } else {
    rel_job_t *job = rel_job_new(rel);
    if (job == NULL)
      rel_fail(rel, -ENOMEM, "parsing manifest");
    else
      rel_job_queue(job, rel_parse_work, rel_parse_after);
  }
  rel_unref(rel); /* the request's */
}

static void rel_resolve_start(peer_release_t *rel) {
  char *key = NULL;
  free(rel->mbytes);
  rel->mbytes = NULL;
  rel->mlen = rel->mcap = 0;
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
    rel_fail(rel, WS_ENOTFOUND, "no neighbour has the manifest");
    return;
  }
  int rc = rel_key(rel, "manifest.json", &key);
  if (rc == 0) {
    rel->refs++;
    rel->mreq = ws_s3_get(rel->d->s3, rel->bucket, key, NULL, rel_mdata,
                          rel_mdone, rel);
    if (rel->mreq == NULL) {
      rel->refs--;
      rc = -ENOMEM;
    }
  }
  free(key);
  if (rc != 0)
    rel_fail(rel, rc, "starting the manifest GET");
}

/* ---- prefetch ----------------------------------------------------------- */

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
    rel_set_state(rel, PEER_REL_RESOLVING);
    rel->err = 0;
    rel->errmsg[0] = '\0';
    rel->started_unix_ms = peer_daemon_now_unix_ms();
    rel->finished_unix_ms = 0;
    rel->t0_ns = uv_hrtime();
  }
  WS_LOGI("release %s: prefetch from %s", rel_name(rel), uri);
  rel_resolve_start(rel);
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
      waiter_add(rel, req, WAIT_PREFETCH, 0);
      rel_answer(rel);
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
      waiter_add(rel, req, WAIT_PREFETCH, 0);
      rel_answer(rel);
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
    rel = rel_new(d, PEER_REL_RESOLVING);
    if (rel == NULL) {
      rc = -ENOMEM;
      goto fail;
    }
    /* The URI's digest or, for a legacy URI, the expected one: either way
     * the manifest read must hash to it. */
    if (has_digest)
      rel_set_digest(rel, &digest);
  }
  if (expect != NULL) {
    rel->expect = *expect;
    rel->expect_known = 1;
  }
  if (req != NULL)
    waiter_add(rel, req, WAIT_PREFETCH, 0);
  /* rel_start takes bucket and prefix. */
  char *uri_copy = strdup(uri);
  if (uri_copy == NULL) {
    rel_fail(rel, -ENOMEM, "prefetch");
    goto free_uri;
  }
  rc = rel_start(rel, bucket, prefix, uri_copy);
  free(uri_copy);
  if (rc != 0) {
    rel_fail(rel, rc, "prefetch");
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
    rel = rel_new(d, PEER_REL_RESOLVING);
    if (rel == NULL)
      return;
    rel_set_digest(rel, digest);
  } else {
    rel_set_state(rel, PEER_REL_RESOLVING);
    rel->err = 0;
    rel->errmsg[0] = '\0';
    rel->started_unix_ms = peer_daemon_now_unix_ms();
    rel->finished_unix_ms = 0;
    rel->t0_ns = uv_hrtime();
  }
  rel->mpeer_tried = 0;
  WS_LOGI("release %s: prefetch by digest (manifest from neighbours)",
          rel->digest_str);
  rel_resolve_start(rel);
}

void peer_release_manifest_peer(peer_release_t *rel, char *bytes, size_t len,
                                const char *node_id) {
  assert(rel->mpeer_waiting);
  rel->mpeer_waiting = 0;
  if (rel->state != PEER_REL_RESOLVING || rel->removed ||
      rel->d->state != PEER_DAEMON_RUNNING) {
    free(bytes);
  } else if (bytes == NULL) {
    rel_resolve_start(rel); /* mpeer_tried: S3, or fail without a URI */
  } else {
    free(rel->mbytes);
    rel->mbytes = bytes;
    rel->mlen = len;
    rel->mcap = len + 1;
    snprintf(rel->mpeer, sizeof(rel->mpeer), "%s", node_id);
    WS_LOGI("release %s: manifest (%zu bytes) from neighbour %s",
            rel->digest_str, len, node_id);
    rel_job_t *job = rel_job_new(rel);
    if (job == NULL)
      rel_fail(rel, -ENOMEM, "parsing manifest");
    else
      rel_job_queue(job, rel_parse_work, rel_parse_after);
  }
  rel_unref(rel); /* the swarm's ask */
}

void peer_release_resume(peer_daemon_t *d, const char *uri,
                         const ws_hash_t *digest) {
  WS_LOGI("resuming prefetch of %s", uri);
  rel_prefetch(d, uri, digest, NULL);
}

/* ---- startup, shutdown -------------------------------------------------- */

int peer_release_add_ready(peer_daemon_t *d, const ws_manifest_t *m, int pinned,
                           uint64_t published_unix_ms) {
  peer_release_t *rel = rel_new(d, PEER_REL_READY);
  if (rel == NULL)
    return -ENOMEM;
  rel_set_digest(rel, &m->digest);
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
    while (rel->waiters != NULL)
      waiter_finish(rel->waiters, 503, NULL, WS_ECANCELED, "p2pd stopping");
  }
}

void peer_releases_free(peer_daemon_t *d) {
  while (d->releases != NULL) {
    peer_release_t *rel = d->releases;
    assert(rel->waiters == NULL && rel->mreq == NULL && rel->refs == 1);
    peer_release_remove(rel);
  }
}
