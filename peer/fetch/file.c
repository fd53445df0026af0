/* file.c - files being assembled, shared across releases by sha256 (see
 * file.h for the state diagram), and the events of the fetch layer.
 *
 * Owns: the file table (hash on sha256), each file's chunk states and
 * waiters, the scheduler's queues (sched.h), the listener list, and the
 * worker jobs that open, finish and close the store's partial handles.
 * Borrows the context (store, worker queue, counters, running).
 * Thread: loop thread; *_work functions run on libuv workers and touch
 * only their job struct and the store handle.
 */
#include "fetch/file.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "fetch/sched.h"
#include "ws_log.h"

struct peer_files_s {
  peer_ctx_t *ctx;
  uint32_t count;
  peer_sched_t sched;
  peer_fetch_listener_t *listeners; /* in registration order */
  peer_origin_gate_fn gate;         /* swarm mode; NULL standalone */
  void *gate_arg;
  peer_file_t *buckets[PEER_FILE_HASH_BUCKETS];
};

typedef struct {
  peer_file_t *file;
  ws_store_file_t *pf; /* open: result */
  int status;
} file_job_t;

static void file_finish_start(peer_file_t *file);
static void file_maybe_close(peer_file_t *file);

const char *peer_file_state_name(peer_file_state_t s) {
  static const char *const names[PEER_FILE_STATE_LAST] = {
      "opening", "fetching", "finishing", "complete", "failed", "closing"};
  return s < PEER_FILE_STATE_LAST ? names[s] : "?";
}

static void file_set_state(peer_file_t *file, peer_file_state_t to) {
  static const uint8_t legal[PEER_FILE_STATE_LAST][PEER_FILE_STATE_LAST] = {
      [PEER_FILE_OPENING] = {[PEER_FILE_FETCHING] = 1,
                             [PEER_FILE_FINISHING] = 1,
                             [PEER_FILE_COMPLETE] = 1,
                             [PEER_FILE_FAILED] = 1},
      [PEER_FILE_FETCHING] = {[PEER_FILE_FINISHING] = 1,
                              [PEER_FILE_FAILED] = 1,
                              [PEER_FILE_CLOSING] = 1},
      [PEER_FILE_FINISHING] = {[PEER_FILE_FETCHING] = 1,
                               [PEER_FILE_COMPLETE] = 1,
                               [PEER_FILE_FAILED] = 1},
      [PEER_FILE_COMPLETE] = {[PEER_FILE_CLOSING] = 1},
      [PEER_FILE_FAILED] = {[PEER_FILE_CLOSING] = 1},
  };
  assert(legal[file->state][to]);
  WS_LOGD("file %s: %s -> %s", file->mf.name, peer_file_state_name(file->state),
          peer_file_state_name(to));
  file->state = to;
}

int peer_files_new(peer_ctx_t *ctx, peer_files_t **out) {
  peer_files_t *t = calloc(1, sizeof(*t));
  if (t == NULL)
    return -ENOMEM;
  t->ctx = ctx;
  *out = t;
  return 0;
}

void peer_files_free(peer_files_t *t) {
  if (t == NULL)
    return;
  assert(t->count == 0);
  free(t);
}

uint32_t peer_files_count(const peer_files_t *t) {
  return t->count;
}

static uint32_t file_bucket(const ws_hash_t *h) {
  uint32_t v;
  memcpy(&v, h->b, sizeof(v));
  return v % PEER_FILE_HASH_BUCKETS;
}

peer_file_t *peer_file_find(peer_files_t *t, const ws_hash_t *sha256) {
  for (peer_file_t *f = t->buckets[file_bucket(sha256)]; f != NULL;
       f = f->hnext) {
    if (ws_hash_eq(&f->mf.sha256, sha256))
      return f;
  }
  return NULL;
}

static void file_table_remove(peer_file_t *file) {
  peer_files_t *t = file->t;
  if (!file->intable)
    return;
  file->intable = 0;
  peer_file_t **pp = &t->buckets[file_bucket(&file->mf.sha256)];
  while (*pp != NULL && *pp != file)
    pp = &(*pp)->hnext;
  assert(*pp == file);
  *pp = file->hnext;
  file->hnext = NULL;
  t->count--;
}

/* ---- events ------------------------------------------------------------ */

void peer_files_listen(peer_files_t *t, peer_fetch_listener_t *l) {
  peer_fetch_listener_t **pp = &t->listeners;
  while (*pp != NULL)
    pp = &(*pp)->next;
  l->next = NULL;
  *pp = l;
}

void peer_files_unlisten(peer_files_t *t, peer_fetch_listener_t *l) {
  for (peer_fetch_listener_t **pp = &t->listeners; *pp != NULL;
       pp = &(*pp)->next) {
    if (*pp == l) {
      *pp = l->next;
      l->next = NULL;
      return;
    }
  }
}

void peer_files_set_origin_gate(peer_files_t *t, peer_origin_gate_fn fn,
                                void *arg) {
  t->gate = fn;
  t->gate_arg = arg;
}

/* The list is walked with the next pointer read first: a listener may
 * unregister itself from its callback. */
#define FILES_EMIT(t, cb, ...)                                                 \
  do {                                                                         \
    for (peer_fetch_listener_t *l_ = (t)->listeners, *n_; l_ != NULL;          \
         l_ = n_) {                                                            \
      n_ = l_->next;                                                           \
      if (l_->cb != NULL)                                                      \
        l_->cb(l_->arg, __VA_ARGS__);                                          \
    }                                                                          \
  } while (0)

void peer_files_kick(peer_files_t *t) {
  for (peer_fetch_listener_t *l = t->listeners, *next; l != NULL; l = next) {
    next = l->next;
    if (l->kick != NULL)
      l->kick(l->arg);
  }
}

void peer_file_chunk_live(peer_file_t *file, uint32_t j) {
  FILES_EMIT(file->t, chunk_live, file, j);
}

void peer_file_chunk_progress(peer_file_t *file, uint32_t j) {
  FILES_EMIT(file->t, chunk_progress, file, j);
}

/* ---- scheduling ---------------------------------------------------------- */

int peer_sched_next(peer_files_t *t, peer_source_t src, peer_file_t **out,
                    uint32_t *j_out) {
  /* Standalone: the origin may fetch any chunk. In swarm mode it gets only
   * what the gate hands out (the tracker's leases, or with the tracker
   * gone, chunks no neighbour has); peers are fed by the swarm's picker. */
  if (t->gate != NULL) {
    if (src != PEER_SRC_ORIGIN)
      return 0;
    return t->gate(t->gate_arg, out, j_out);
  }
  peer_file_t *f;
  uint32_t j;
  if (!peer_sched_pick(&t->sched, &f, &j))
    return 0;
  f->chunk_state[j] = PEER_CHUNK_INFLIGHT;
  f->chunks_inflight++;
  peer_file_ref(f);
  *out = f;
  *j_out = j;
  return 1;
}

void peer_file_chunk_take(peer_file_t *file, uint32_t j) {
  assert(file->state == PEER_FILE_FETCHING &&
         file->chunk_state[j] == PEER_CHUNK_MISSING);
  file->chunk_state[j] = PEER_CHUNK_INFLIGHT;
  file->chunks_inflight++;
  peer_file_ref(file);
}

/* ---- lifecycle ---------------------------------------------------------- */

void peer_file_ref(peer_file_t *file) {
  file->refs++;
}

void peer_file_unref(peer_file_t *file) {
  assert(file->refs > 0);
  if (--file->refs > 0)
    return;
  assert(file->state == PEER_FILE_CLOSING && file->pf == NULL);
  free(file->mf.name);
  free(file->mf.chunks);
  free(file->bucket);
  free(file->key);
  free(file->etag);
  free(file->chunk_state);
  free(file->chunk_tries);
  free(file->nreq);
  free(file->rx_busy);
  free(file->waiters);
  free(file);
}

/* Hands the file's outcome to everyone waiting for it. The list is taken
 * first: a waiter may finish (and detach) inside the call. */
static void file_notify(peer_file_t *file) {
  peer_file_waiter_t *w = file->waiters;
  uint32_t n = file->nwaiters;
  file->waiters = NULL;
  file->nwaiters = file->capwaiters = 0;
  int err = file->state == PEER_FILE_COMPLETE ? 0 : file->err;
  peer_file_ref(file);
  for (uint32_t i = 0; i < n; i++)
    w[i].done(w[i].arg, file, err, file->errmsg);
  free(w);
  peer_file_unref(file);
}

static void file_close_work(void *arg) {
  file_job_t *job = arg;
  ws_store_file_close(job->file->pf);
}

static void file_close_after(void *arg, int status) {
  file_job_t *job = arg;
  peer_file_t *file = job->file;
  file->pf = NULL;
  free(job);
  peer_file_unref(file); /* the job's */
}

/* Moves a file to CLOSING: out of the table, table reference dropped,
 * handle closed on a worker (the job holds a reference until then). */
static void file_close_start(peer_file_t *file) {
  peer_sched_remove(&file->t->sched, file);
  file_set_state(file, PEER_FILE_CLOSING);
  file_table_remove(file);
  if (file->pf != NULL) {
    file_job_t *job = calloc(1, sizeof(*job));
    if (job != NULL) {
      job->file = file;
      peer_file_ref(file);
      if (peer_ctx_queue(file->ctx, file_close_work, file_close_after, job) ==
          0)
        goto unref_table;
      peer_file_unref(file);
      free(job);
    }
    /* No memory for the job: leak the handle rather than block the loop;
     * the partial stays valid on disk. */
    WS_LOGE("file %s: cannot queue close; handle leaked", file->mf.name);
    file->pf = NULL;
  }
unref_table:
  peer_file_unref(file);
}

static void file_maybe_close(peer_file_t *file) {
  if ((file->state == PEER_FILE_COMPLETE || file->state == PEER_FILE_FAILED) &&
      file->chunks_inflight == 0)
    file_close_start(file);
}

void peer_file_fail(peer_file_t *file, int err, const char *msg) {
  if (file->state != PEER_FILE_OPENING && file->state != PEER_FILE_FETCHING &&
      file->state != PEER_FILE_FINISHING)
    return;
  file->err = err;
  ws_msg_mark_cut(
      file->errmsg, sizeof(file->errmsg),
      snprintf(file->errmsg, sizeof(file->errmsg), "%s: %s", file->mf.name,
               msg != NULL && *msg != '\0' ? msg : ws_strerror(err)));
  if (err != WS_ECANCELED)
    WS_LOGE("file failed: %s", file->errmsg); /* names it */
  file_set_state(file, PEER_FILE_FAILED);
  /* A release that lists this file later gets a fresh object. */
  file_table_remove(file);
  peer_sched_remove(&file->t->sched, file);
  /* Sources stop working on it (the origin cancels its transfers). */
  FILES_EMIT(file->t, file_failed, file);
  file_notify(file);
  file_maybe_close(file);
}

static void file_complete(peer_file_t *file) {
  file_set_state(file, PEER_FILE_COMPLETE);
  file->chunks_done = file->mf.nchunks;
  file->bytes_done = file->mf.size;
  WS_LOGD("file %s: complete", file->mf.name);
  /* Before the waiters hear of it (they may let go of the file). */
  FILES_EMIT(file->t, file_complete, file);
  file_notify(file);
  file_maybe_close(file);
}

/* ---- open --------------------------------------------------------------- */

static void file_open_work(void *arg) {
  file_job_t *job = arg;
  peer_file_t *file = job->file;
  job->status = ws_store_file_open(file->ctx->store, &file->mf,
                                   file->chunk_size, &job->pf);
  if (job->status != 0 || ws_store_file_complete(job->pf))
    return;
  /* The chunk state array is not touched by the loop while OPENING. */
  for (uint32_t j = 0; j < file->mf.nchunks; j++) {
    if (ws_store_file_has_chunk(job->pf, j)) {
      file->chunk_state[j] = PEER_CHUNK_DONE;
      file->chunks_done++;
      file->bytes_done += ws_store_file_chunk_len(job->pf, j);
    }
  }
}

static void file_open_after(void *arg, int status) {
  file_job_t *job = arg;
  peer_file_t *file = job->file;
  int rc = status != 0 ? status : job->status;
  file->pf = job->pf;
  free(job);
  if (rc != 0) {
    peer_file_fail(file, ws_err_disk(rc), "opening partial");
  } else if (ws_store_file_complete(file->pf)) {
    file->bytes_cached = file->mf.size;
    file_complete(file);
  } else if (!file->ctx->running) {
    /* Stopping: leave it for peer_files_close_all. */
    file_set_state(file, PEER_FILE_FETCHING);
  } else if (file->nwaiters == 0) {
    file_set_state(file, PEER_FILE_FETCHING);
    peer_file_fail(file, WS_ECANCELED, "no release needs it");
  } else if (file->chunks_done == file->mf.nchunks) {
    file_finish_start(file);
  } else {
    if (file->chunks_done > 0)
      WS_LOGI("file %s: resuming, %u/%u chunks already verified", file->mf.name,
              file->chunks_done, file->mf.nchunks);
    file_set_state(file, PEER_FILE_FETCHING);
    peer_sched_add(&file->t->sched, file);
    peer_files_kick(file->t);
  }
  peer_file_unref(file); /* the job's */
}

int peer_file_create(peer_files_t *t, const ws_manifest_t *m,
                     const ws_mfile_t *f, const char *bucket, const char *key,
                     peer_file_t **out) {
  int rc = -ENOMEM;
  peer_file_t *file = calloc(1, sizeof(*file));
  file_job_t *job = calloc(1, sizeof(*job));
  if (file == NULL || job == NULL)
    goto free_all;
  file->t = t;
  file->ctx = t->ctx;
  file->mf = *f;
  file->mf.name = strdup(f->name);
  file->mf.chunks = NULL;
  file->chunk_size = m->chunk_size;
  file->owner = m->digest;
  file->bucket = bucket != NULL ? strdup(bucket) : NULL;
  file->key = key != NULL ? strdup(key) : NULL;
  file->chunk_state = calloc(f->nchunks + 1u, 1);
  file->chunk_tries = calloc(f->nchunks + 1u, 1);
  file->nreq = calloc(f->nchunks + 1u, 1);
  file->rx_busy = calloc(f->nchunks + 1u, 1);
  if (file->mf.name == NULL || (bucket != NULL && file->bucket == NULL) ||
      (key != NULL && file->key == NULL) || file->chunk_state == NULL ||
      file->chunk_tries == NULL || file->nreq == NULL || file->rx_busy == NULL)
    goto free_all;
  if (f->chunks != NULL) {
    file->mf.chunks = malloc(sizeof(ws_hash_t) * (f->nchunks + 1u));
    if (file->mf.chunks == NULL)
      goto free_all;
    memcpy(file->mf.chunks, f->chunks, sizeof(ws_hash_t) * f->nchunks);
  }
  file->state = PEER_FILE_OPENING;
  file->refs = 2; /* table + open job */
  job->file = file;
  rc = peer_ctx_queue(t->ctx, file_open_work, file_open_after, job);
  if (rc != 0)
    goto free_all;
  uint32_t b = file_bucket(&file->mf.sha256);
  file->hnext = t->buckets[b];
  t->buckets[b] = file;
  t->count++;
  file->intable = 1;
  *out = file;
  return 0;
free_all:
  if (file != NULL) {
    free(file->mf.name);
    free(file->mf.chunks);
    free(file->bucket);
    free(file->key);
    free(file->chunk_state);
    free(file->chunk_tries);
    free(file->nreq);
    free(file->rx_busy);
  }
  free(file);
  free(job);
  return rc;
}

int peer_file_same_chunks(const peer_file_t *file, const ws_manifest_t *m,
                          const ws_mfile_t *mf) {
  if (file->mf.size != mf->size || file->chunk_size != m->chunk_size ||
      file->mf.nchunks != mf->nchunks ||
      (file->mf.chunks == NULL) != (mf->chunks == NULL))
    return 0;
  return mf->chunks == NULL ||
         memcmp(file->mf.chunks, mf->chunks,
                sizeof(ws_hash_t) * (size_t)mf->nchunks) == 0;
}

int peer_file_attach(peer_file_t *file, peer_file_done_fn done, void *arg) {
  for (uint32_t i = 0; i < file->nwaiters; i++) {
    if (file->waiters[i].arg == arg)
      return 0;
  }
  if (file->state == PEER_FILE_COMPLETE)
    return 0;
  if (file->nwaiters == file->capwaiters) {
    uint32_t cap = file->capwaiters ? file->capwaiters * 2 : 4;
    peer_file_waiter_t *w = realloc(file->waiters, sizeof(*w) * cap);
    if (w == NULL)
      return -ENOMEM;
    file->waiters = w;
    file->capwaiters = cap;
  }
  file->waiters[file->nwaiters].done = done;
  file->waiters[file->nwaiters++].arg = arg;
  return 1;
}

void peer_file_detach(peer_file_t *file, void *arg) {
  for (uint32_t i = 0; i < file->nwaiters; i++) {
    if (file->waiters[i].arg == arg) {
      file->waiters[i] = file->waiters[--file->nwaiters];
      break;
    }
  }
  /* OPENING and FINISHING re-check when their job returns. */
  if (file->nwaiters == 0 && file->state == PEER_FILE_FETCHING &&
      file->ctx->running)
    peer_file_fail(file, WS_ECANCELED, "no release needs it");
}

/* ---- chunks and finish ------------------------------------------------- */

int peer_file_counts_for(const peer_file_t *file, const ws_hash_t *digest) {
  return ws_hash_eq(&file->owner, digest);
}

uint32_t peer_file_chunk_len(const peer_file_t *file, uint32_t j) {
  uint64_t off = (uint64_t)j * file->chunk_size;
  uint64_t left = file->mf.size - off;
  return left < file->chunk_size ? (uint32_t)left : file->chunk_size;
}

uint32_t peer_file_chunks_missing(const peer_file_t *file) {
  if (file->state != PEER_FILE_FETCHING)
    return 0;
  return file->mf.nchunks - file->chunks_done - file->chunks_inflight;
}

void peer_file_chunk_done(peer_file_t *file, uint32_t j, peer_source_t src,
                          int status, const char *errmsg) {
  peer_counters_t *counters = &file->ctx->counters;
  assert(j < file->mf.nchunks && file->chunk_state[j] == PEER_CHUNK_INFLIGHT);
  file->chunks_inflight--;
  int fetching = file->state == PEER_FILE_FETCHING && file->ctx->running;
  if (status == 0) {
    uint32_t len = peer_file_chunk_len(file, j);
    file->chunk_state[j] = PEER_CHUNK_DONE;
    file->chunks_done++;
    file->bytes_done += len;
    if (src == PEER_SRC_ORIGIN)
      file->bytes_from_s3 += len;
    else
      file->bytes_from_peers += len;
    counters->chunks_verified++;
    FILES_EMIT(file->t, chunk_done, file, j, src);
    if (fetching && file->chunks_done == file->mf.nchunks)
      file_finish_start(file);
  } else {
    file->chunk_state[j] = PEER_CHUNK_MISSING;
    if (status == WS_EDIGEST) {
      counters->chunks_failed++;
      file->chunk_tries[j]++;
      WS_LOGW("file %s: chunk %u failed its hash (try %u)", file->mf.name, j,
              file->chunk_tries[j]);
      if (fetching && file->chunk_tries[j] > PEER_CHUNK_RETRIES_MAX) {
        char msg[160];
        snprintf(msg, sizeof(msg), "chunk %u failed its hash %u times", j,
                 file->chunk_tries[j]);
        peer_file_fail(file, WS_EDIGEST, msg);
      } else if (fetching) {
        peer_sched_requeue(&file->t->sched, file, j);
      }
    } else if (status == WS_ECANCELED) {
      if (fetching)
        peer_sched_requeue(&file->t->sched, file, j);
    } else if (fetching) {
      peer_file_fail(file, status, errmsg);
    }
  }
  file_maybe_close(file);
}

static void file_finish_work(void *arg) {
  file_job_t *job = arg;
  if (job->file->need_whole)
    ws_store_file_need_whole(job->file->pf);
  job->status = ws_store_file_finish(job->file->pf);
}

static void file_finish_after(void *arg, int status) {
  file_job_t *job = arg;
  peer_file_t *file = job->file;
  int rc = status != 0 ? status : job->status;
  free(job);
  if (rc == 0) {
    file_complete(file);
  } else if (rc == WS_EDIGEST && file->mf.chunks == NULL &&
             file->digest_retries < PEER_FILE_DIGEST_RETRIES_MAX &&
             file->ctx->running && file->nwaiters > 0) {
    /* Whole-file mode: some chunk was bad and nothing said which. The store
     * discarded the partial; fetch every chunk again. */
    file->digest_retries++;
    file->ctx->counters.files_refetched++;
    WS_LOGW("file %s: whole-file sha256 mismatch; refetching it",
            file->mf.name);
    memset(file->chunk_state, PEER_CHUNK_MISSING, file->mf.nchunks);
    file->chunks_done = 0;
    file->bytes_done = 0;
    file_set_state(file, PEER_FILE_FETCHING);
    peer_sched_add(&file->t->sched, file);
    peer_files_kick(file->t);
  } else if (!file->ctx->running) {
    /* Stopping: the bitmap keeps the chunks; finish again after restart. */
    file_set_state(file, PEER_FILE_FETCHING);
  } else {
    peer_file_fail(file, ws_err_disk(rc),
                   rc == WS_EDIGEST ? "whole-file sha256 mismatch"
                                    : "finishing");
  }
  peer_file_unref(file); /* the job's */
}

static void file_finish_start(peer_file_t *file) {
  peer_sched_remove(&file->t->sched, file);
  file_set_state(file, PEER_FILE_FINISHING);
  file_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL) {
    peer_file_fail(file, -ENOMEM, "finishing");
    return;
  }
  job->file = file;
  peer_file_ref(file);
  int rc = peer_ctx_queue(file->ctx, file_finish_work, file_finish_after, job);
  if (rc != 0) {
    free(job);
    peer_file_unref(file);
    peer_file_fail(file, rc, "finishing");
  }
}

void peer_files_close_all(peer_files_t *t) {
  for (uint32_t b = 0; b < PEER_FILE_HASH_BUCKETS; b++) {
    while (t->buckets[b] != NULL) {
      peer_file_t *f = t->buckets[b];
      /* Jobs and transfers are drained before this runs. */
      assert(f->chunks_inflight == 0 && f->state != PEER_FILE_OPENING &&
             f->state != PEER_FILE_FINISHING);
      if (f->state == PEER_FILE_FETCHING || f->state == PEER_FILE_COMPLETE ||
          f->state == PEER_FILE_FAILED)
        file_close_start(f);
    }
  }
}
