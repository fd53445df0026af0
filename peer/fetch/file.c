/* file.c - files being assembled, shared across releases by sha256, and
 * the chunk scheduler (see file.h for the state diagram).
 *
 * Owns: the file table (hash on sha256), each file's chunk states, the
 * three scheduler queues, and the worker jobs that open, finish and close
 * the store's partial handles. Thread: loop thread; *_work functions run
 * on libuv workers and touch only their job struct and the store handle.
 */
#include "fetch/file.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/bufpool.h"
#include "fetch/origin.h"
#include "core/tunables.h"
#include "release/release.h"
#include "swarm/swarm.h"
#include "ws_log.h"

struct peer_files_s {
  peer_daemon_t *d;
  uint32_t count;
  peer_file_t *qhead[PEER_TIER_LAST];
  peer_file_t *qtail[PEER_TIER_LAST];
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

int peer_files_new(peer_daemon_t *d, peer_files_t **out) {
  peer_files_t *t = calloc(1, sizeof(*t));
  if (t == NULL)
    return -ENOMEM;
  t->d = d;
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

peer_file_t *peer_file_find(peer_daemon_t *d, const ws_hash_t *sha256) {
  for (peer_file_t *f = d->files->buckets[file_bucket(sha256)]; f != NULL;
       f = f->hnext) {
    if (ws_hash_eq(&f->mf.sha256, sha256))
      return f;
  }
  return NULL;
}

static void file_table_remove(peer_file_t *file) {
  peer_files_t *t = file->d->files;
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

/* ---- scheduler queues --------------------------------------------------- */

static void sched_push(peer_file_t *file, int tier, int at_head) {
  peer_files_t *t = file->d->files;
  if (file->inq[tier])
    return;
  file->inq[tier] = 1;
  file->qnext[tier] = file->qprev[tier] = NULL;
  if (t->qhead[tier] == NULL) {
    t->qhead[tier] = t->qtail[tier] = file;
  } else if (at_head) {
    file->qnext[tier] = t->qhead[tier];
    t->qhead[tier]->qprev[tier] = file;
    t->qhead[tier] = file;
  } else {
    file->qprev[tier] = t->qtail[tier];
    t->qtail[tier]->qnext[tier] = file;
    t->qtail[tier] = file;
  }
}

static void sched_pop(peer_file_t *file, int tier) {
  peer_files_t *t = file->d->files;
  if (!file->inq[tier])
    return;
  if (file->qprev[tier] != NULL)
    file->qprev[tier]->qnext[tier] = file->qnext[tier];
  else
    t->qhead[tier] = file->qnext[tier];
  if (file->qnext[tier] != NULL)
    file->qnext[tier]->qprev[tier] = file->qprev[tier];
  else
    t->qtail[tier] = file->qprev[tier];
  file->qnext[tier] = file->qprev[tier] = NULL;
  file->inq[tier] = 0;
}

static void sched_unqueue(peer_file_t *file) {
  for (int tier = 0; tier < PEER_TIER_LAST; tier++)
    sched_pop(file, tier);
}

/* Queues a FETCHING file: small files in their own tier; bigger ones get
 * their first chunk early and the rest after every first chunk. */
static void sched_enqueue(peer_file_t *file) {
  if (file->mf.nchunks == 1) {
    sched_push(file, PEER_TIER_SMALL, 0);
    return;
  }
  if (file->chunk_state[0] == PEER_CHUNK_MISSING)
    sched_push(file, PEER_TIER_FIRST, 0);
  file->cursor = 0;
  sched_push(file, PEER_TIER_REST, 0);
}

int peer_sched_next(peer_daemon_t *d, peer_source_t src, peer_file_t **out,
                    uint32_t *j_out) {
  peer_files_t *t = d->files;
  /* Standalone: the origin may fetch any chunk. In swarm mode it gets only
   * chunks the tracker leased to this node (or, with the tracker gone,
   * chunks no neighbour has); peers are fed by the swarm's picker. */
  if (d->swarm != NULL) {
    if (src != PEER_SRC_ORIGIN)
      return 0;
    return peer_swarm_origin_next(d->swarm, out, j_out);
  }
  for (int tier = 0; tier < PEER_TIER_LAST; tier++) {
    while (t->qhead[tier] != NULL) {
      peer_file_t *f = t->qhead[tier];
      if (f->state != PEER_FILE_FETCHING) {
        sched_pop(f, tier);
        continue;
      }
      uint32_t j = UINT32_MAX;
      if (tier != PEER_TIER_REST) {
        if (f->chunk_state[0] == PEER_CHUNK_MISSING)
          j = 0;
        else
          sched_pop(f, tier);
      } else {
        for (uint32_t k = f->cursor; k < f->mf.nchunks; k++) {
          if (f->chunk_state[k] == PEER_CHUNK_MISSING) {
            j = k;
            break;
          }
        }
        if (j == UINT32_MAX)
          sched_pop(f, tier);
        else
          f->cursor = j + 1;
      }
      if (j == UINT32_MAX)
        continue;
      if (tier != PEER_TIER_REST)
        sched_pop(f, tier);
      f->chunk_state[j] = PEER_CHUNK_INFLIGHT;
      f->chunks_inflight++;
      peer_file_ref(f);
      *out = f;
      *j_out = j;
      return 1;
    }
  }
  return 0;
}

void peer_file_chunk_take(peer_file_t *file, uint32_t j) {
  assert(file->state == PEER_FILE_FETCHING &&
         file->chunk_state[j] == PEER_CHUNK_MISSING);
  file->chunk_state[j] = PEER_CHUNK_INFLIGHT;
  file->chunks_inflight++;
  peer_file_ref(file);
}

void peer_files_kick(peer_daemon_t *d) {
  peer_origin_kick(d->origin);
  if (d->swarm != NULL)
    peer_swarm_kick(d->swarm);
}

/* A chunk is MISSING again: fetch it soon. */
static void sched_requeue(peer_file_t *file, uint32_t j) {
  if (file->mf.nchunks == 1) {
    sched_push(file, PEER_TIER_SMALL, 1);
    return;
  }
  if (!file->inq[PEER_TIER_REST] || j < file->cursor)
    file->cursor = file->inq[PEER_TIER_REST] ? j : 0;
  sched_pop(file, PEER_TIER_REST);
  sched_push(file, PEER_TIER_REST, 1);
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

/* Hands the file's outcome to every release waiting on it. The list is
 * taken first: a release may finish (and detach) inside the call. */
static void file_notify(peer_file_t *file) {
  peer_release_t **w = file->waiters;
  uint32_t n = file->nwaiters;
  file->waiters = NULL;
  file->nwaiters = file->capwaiters = 0;
  int err = file->state == PEER_FILE_COMPLETE ? 0 : file->err;
  peer_file_ref(file);
  for (uint32_t i = 0; i < n; i++)
    peer_release_file_done(w[i], file, err, file->errmsg);
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
  peer_daemon_t *d = file->d;
  sched_unqueue(file);
  file_set_state(file, PEER_FILE_CLOSING);
  file_table_remove(file);
  if (file->pf != NULL) {
    file_job_t *job = calloc(1, sizeof(*job));
    if (job != NULL) {
      job->file = file;
      peer_file_ref(file);
      if (peer_daemon_queue(d, file_close_work, file_close_after, job) == 0)
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
  snprintf(file->errmsg, sizeof(file->errmsg), "%s: %s", file->mf.name,
           msg != NULL && *msg != '\0' ? msg : ws_strerror(err));
  if (err != WS_ECANCELED)
    WS_LOGE("file %s: failed: %s", file->mf.name, file->errmsg);
  file_set_state(file, PEER_FILE_FAILED);
  /* A release that lists this file later gets a fresh object. */
  file_table_remove(file);
  sched_unqueue(file);
  peer_origin_cancel_file(file->d->origin, file);
  file_notify(file);
  file_maybe_close(file);
}

static void file_complete(peer_file_t *file) {
  file_set_state(file, PEER_FILE_COMPLETE);
  file->chunks_done = file->mf.nchunks;
  file->bytes_done = file->mf.size;
  WS_LOGD("file %s: complete", file->mf.name);
  /* Before the releases hear of it (they may let go of the file). */
  if (file->d->swarm != NULL)
    peer_swarm_file_complete(file->d->swarm, file);
  file_notify(file);
  file_maybe_close(file);
}

/* ---- open --------------------------------------------------------------- */

static void file_open_work(void *arg) {
  file_job_t *job = arg;
  peer_file_t *file = job->file;
  job->status =
      ws_store_file_open(file->d->store, &file->mf, file->chunk_size, &job->pf);
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
    peer_file_fail(file, rc, "opening partial");
  } else if (ws_store_file_complete(file->pf)) {
    file_complete(file);
  } else if (file->d->state != PEER_DAEMON_RUNNING) {
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
    sched_enqueue(file);
    peer_files_kick(file->d);
  }
  peer_file_unref(file); /* the job's */
}

int peer_file_create(peer_daemon_t *d, const ws_manifest_t *m,
                     const ws_mfile_t *f, const char *bucket, const char *key,
                     peer_file_t **out) {
  int rc = -ENOMEM;
  peer_file_t *file = calloc(1, sizeof(*file));
  file_job_t *job = calloc(1, sizeof(*job));
  if (file == NULL || job == NULL)
    goto free_all;
  file->d = d;
  file->mf = *f;
  file->mf.name = strdup(f->name);
  file->mf.chunks = NULL;
  file->chunk_size = m->chunk_size;
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
  rc = peer_daemon_queue(d, file_open_work, file_open_after, job);
  if (rc != 0)
    goto free_all;
  uint32_t b = file_bucket(&file->mf.sha256);
  file->hnext = d->files->buckets[b];
  d->files->buckets[b] = file;
  d->files->count++;
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

int peer_file_attach(peer_file_t *file, peer_release_t *rel) {
  for (uint32_t i = 0; i < file->nwaiters; i++) {
    if (file->waiters[i] == rel)
      return 0;
  }
  if (file->state == PEER_FILE_COMPLETE)
    return 0;
  if (file->nwaiters == file->capwaiters) {
    uint32_t cap = file->capwaiters ? file->capwaiters * 2 : 4;
    peer_release_t **w = realloc(file->waiters, sizeof(*w) * cap);
    if (w == NULL)
      return -ENOMEM;
    file->waiters = w;
    file->capwaiters = cap;
  }
  file->waiters[file->nwaiters++] = rel;
  return 1;
}

void peer_file_detach(peer_file_t *file, peer_release_t *rel) {
  for (uint32_t i = 0; i < file->nwaiters; i++) {
    if (file->waiters[i] == rel) {
      file->waiters[i] = file->waiters[--file->nwaiters];
      break;
    }
  }
  /* OPENING and FINISHING re-check when their job returns. */
  if (file->nwaiters == 0 && file->state == PEER_FILE_FETCHING &&
      file->d->state == PEER_DAEMON_RUNNING)
    peer_file_fail(file, WS_ECANCELED, "no release needs it");
}

/* ---- chunks and finish ------------------------------------------------- */

uint32_t peer_file_chunk_len(const peer_file_t *file, uint32_t j) {
  uint64_t off = (uint64_t)j * file->chunk_size;
  uint64_t left = file->mf.size - off;
  return left < file->chunk_size ? (uint32_t)left : file->chunk_size;
}

void peer_file_chunk_done(peer_file_t *file, uint32_t j, peer_source_t src,
                          int status, const char *errmsg) {
  peer_daemon_t *d = file->d;
  assert(j < file->mf.nchunks && file->chunk_state[j] == PEER_CHUNK_INFLIGHT);
  file->chunks_inflight--;
  int fetching =
      file->state == PEER_FILE_FETCHING && d->state == PEER_DAEMON_RUNNING;
  if (status == 0) {
    uint32_t len = peer_file_chunk_len(file, j);
    file->chunk_state[j] = PEER_CHUNK_DONE;
    file->chunks_done++;
    file->bytes_done += len;
    if (src == PEER_SRC_ORIGIN)
      file->bytes_from_s3 += len;
    else
      file->bytes_from_peers += len;
    d->metrics.chunks_verified++;
    if (d->swarm != NULL)
      peer_swarm_chunk_done(d->swarm, file, j, src);
    if (fetching && file->chunks_done == file->mf.nchunks)
      file_finish_start(file);
  } else {
    file->chunk_state[j] = PEER_CHUNK_MISSING;
    if (status == WS_EDIGEST) {
      d->metrics.chunks_failed++;
      file->chunk_tries[j]++;
      WS_LOGW("file %s: chunk %u failed its hash (try %u)", file->mf.name, j,
              file->chunk_tries[j]);
      if (fetching && file->chunk_tries[j] > PEER_CHUNK_RETRIES_MAX) {
        char msg[160];
        snprintf(msg, sizeof(msg), "chunk %u failed its hash %u times", j,
                 file->chunk_tries[j]);
        peer_file_fail(file, WS_EDIGEST, msg);
      } else if (fetching) {
        sched_requeue(file, j);
      }
    } else if (status == WS_ECANCELED) {
      if (fetching)
        sched_requeue(file, j);
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
             file->d->state == PEER_DAEMON_RUNNING && file->nwaiters > 0) {
    /* Whole-file mode: some chunk was bad and nothing said which. The store
     * discarded the partial; fetch every chunk again. */
    file->digest_retries++;
    file->d->metrics.files_refetched++;
    WS_LOGW("file %s: whole-file sha256 mismatch; refetching it",
            file->mf.name);
    memset(file->chunk_state, PEER_CHUNK_MISSING, file->mf.nchunks);
    file->chunks_done = 0;
    file->bytes_done = 0;
    file_set_state(file, PEER_FILE_FETCHING);
    sched_enqueue(file);
    peer_files_kick(file->d);
  } else if (file->d->state != PEER_DAEMON_RUNNING) {
    /* Stopping: the bitmap keeps the chunks; finish again after restart. */
    file_set_state(file, PEER_FILE_FETCHING);
  } else {
    peer_file_fail(file, rc,
                   rc == WS_EDIGEST ? "whole-file sha256 mismatch"
                                    : "finishing");
  }
  peer_file_unref(file); /* the job's */
}

static void file_finish_start(peer_file_t *file) {
  sched_unqueue(file);
  file_set_state(file, PEER_FILE_FINISHING);
  file_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL) {
    peer_file_fail(file, -ENOMEM, "finishing");
    return;
  }
  job->file = file;
  peer_file_ref(file);
  int rc = peer_daemon_queue(file->d, file_finish_work, file_finish_after, job);
  if (rc != 0) {
    free(job);
    peer_file_unref(file);
    peer_file_fail(file, rc, "finishing");
  }
}

void peer_files_close_all(peer_daemon_t *d) {
  peer_files_t *t = d->files;
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
