/* manifest_hash.c - parallel file + chunk SHA-256 for building and verifying
 * manifests. Runs on threads it starts and joins itself (blocking call).
 *
 * Every byte needs two hashes: the whole-file sha256 (inherently sequential)
 * and its chunk's sha256. The schedule reads each byte once when a thread is
 * alone and spreads work when threads are idle:
 *
 *   - a "file pass" reads a file front to back in 1 MiB blocks, feeding the
 *     file hash, and claims chunks from the front (front++) so it feeds the
 *     chunk hash from the same buffer: one read, two hashes;
 *   - a thread with no file pass left to start helps a running pass by
 *     claiming that file's chunks from the back (back--), hashing each with
 *     its own pread; the pass then only file-hashes those bytes (they come
 *     from the page cache the helper just filled or will fill).
 *
 * Passes start largest file first. On 2 cores and one 1 GiB file, one thread
 * does the file hash and the other all chunk hashes: both cores busy, wall
 * time ~ one SHA-256 pass. With many files each thread runs its own passes
 * reading once. front/back of every job are guarded by one mutex, taken once
 * per chunk (>= 1 MiB of hashing), so contention is negligible.
 *
 * Memory: one 1 MiB buffer and two hash contexts per thread.
 */
#include "manifest-int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HASH_BLOCK_BYTES (1u << 20) /* pread size */
#define HASH_THREADS_MAX 64u

typedef struct {
  pthread_mutex_t mu;
  ws_mhash_job_t *jobs;
  uint32_t njobs;
  uint32_t *order;         /* job indices, largest first */
  uint32_t next_pass;      /* next order[] entry to start */
  ws_mhash_job_t **active; /* per thread: job whose pass it runs, or NULL */
  unsigned nthreads;
  uint32_t chunk_size;
  int err; /* first error; everyone stops */
  char *errbuf;
  size_t errlen;
} heng_t;

typedef struct {
  heng_t *eng;
  unsigned slot;
  uint8_t *buf;
  ws_sha256_t *fctx;
  ws_sha256_t *cctx;
} hworker_t;

static void eng_fail(heng_t *eng, int err, const char *path, const char *what) {
  pthread_mutex_lock(&eng->mu);
  if (eng->err == 0) {
    eng->err = err;
    ws_manifest_fail(eng->errbuf, eng->errlen, err, "%s: %s", path, what);
  }
  pthread_mutex_unlock(&eng->mu);
}

static int open_regular(heng_t *eng, const ws_mhash_job_t *job) {
  struct stat st;
  int fd = open(job->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = -errno;
    eng_fail(eng, err, job->path, strerror(-err));
    return err;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    eng_fail(eng, WS_EPATH, job->path, "not a regular file");
    return WS_EPATH;
  }
  if ((uint64_t)st.st_size != job->size) {
    close(fd);
    eng_fail(eng, WS_EDIGEST, job->path, "size differs from the manifest");
    return WS_EDIGEST;
  }
  return fd;
}

/* Reads [off, off+len) in blocks into both contexts (cctx may be NULL). */
static int hash_range(hworker_t *w, int fd, uint64_t off, uint64_t len,
                      ws_sha256_t *fctx, ws_sha256_t *cctx) {
  while (len > 0) {
    size_t want = len < HASH_BLOCK_BYTES ? (size_t)len : HASH_BLOCK_BYTES;
    ssize_t n = pread(fd, w->buf, want, (off_t)off);
    int err;
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    if (n == 0)
      return WS_ETRUNCATED;
    if (fctx != NULL && (err = ws_sha256_update(fctx, w->buf, (size_t)n)) != 0)
      return err;
    if (cctx != NULL && (err = ws_sha256_update(cctx, w->buf, (size_t)n)) != 0)
      return err;
    off += (uint64_t)n;
    len -= (uint64_t)n;
  }
  return 0;
}

static uint64_t seg_len(const heng_t *eng, const ws_mhash_job_t *job,
                        uint64_t j) {
  uint64_t off = j * eng->chunk_size;
  return job->size - off < eng->chunk_size ? job->size - off : eng->chunk_size;
}

static void run_pass(hworker_t *w, ws_mhash_job_t *job) {
  heng_t *eng = w->eng;
  uint64_t nseg = (job->size + eng->chunk_size - 1) / eng->chunk_size;
  struct stat st;
  int fd, err;

  if ((fd = open_regular(eng, job)) < 0)
    return;
  if ((err = ws_sha256_init(w->fctx)) != 0)
    goto fail;
  for (uint64_t j = 0; j < nseg; j++) {
    int own = 0;
    pthread_mutex_lock(&eng->mu);
    if (eng->err != 0) {
      pthread_mutex_unlock(&eng->mu);
      goto out;
    }
    if (j < job->nchunks && job->front == j && job->front < job->back) {
      job->front++;
      own = 1;
    }
    pthread_mutex_unlock(&eng->mu);
    if (own && (err = ws_sha256_init(w->cctx)) != 0)
      goto fail;
    err = hash_range(w, fd, j * eng->chunk_size, seg_len(eng, job, j), w->fctx,
                     own ? w->cctx : NULL);
    if (err != 0)
      goto fail;
    if (own && (err = ws_sha256_final(w->cctx, &job->chunks[j])) != 0)
      goto fail;
  }
  if ((err = ws_sha256_final(w->fctx, &job->sha256)) != 0)
    goto fail;
  /* A file that grew or shrank while we read it is not what we hashed. */
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != job->size) {
    eng_fail(eng, WS_EDIGEST, job->path, "changed while being hashed");
    goto out;
  }
  goto out;
fail:
  eng_fail(eng, err, job->path, ws_strerror(err));
out:
  close(fd);
}

static void run_chunk(hworker_t *w, ws_mhash_job_t *job, uint32_t j) {
  int fd, err;
  if ((fd = open_regular(w->eng, job)) < 0)
    return;
  if ((err = ws_sha256_init(w->cctx)) != 0 ||
      (err = hash_range(w, fd, (uint64_t)j * w->eng->chunk_size,
                        seg_len(w->eng, job, j), NULL, w->cctx)) != 0 ||
      (err = ws_sha256_final(w->cctx, &job->chunks[j])) != 0)
    eng_fail(w->eng, err, job->path, ws_strerror(err));
  close(fd);
}

static void *worker_main(void *arg) {
  hworker_t *w = arg;
  heng_t *eng = w->eng;

  for (;;) {
    ws_mhash_job_t *job = NULL, *help = NULL;
    uint32_t j = 0, best = 0;

    pthread_mutex_lock(&eng->mu);
    eng->active[w->slot] = NULL;
    if (eng->err != 0) {
      pthread_mutex_unlock(&eng->mu);
      break;
    }
    if (eng->next_pass < eng->njobs) {
      job = &eng->jobs[eng->order[eng->next_pass++]];
      eng->active[w->slot] = job;
    } else {
      /* Help the running pass with the most unclaimed chunks. */
      for (unsigned s = 0; s < eng->nthreads; s++) {
        ws_mhash_job_t *a = eng->active[s];
        if (a != NULL && a->back > a->front && a->back - a->front > best) {
          best = a->back - a->front;
          help = a;
        }
      }
      if (help != NULL)
        j = --help->back;
    }
    pthread_mutex_unlock(&eng->mu);
    if (job != NULL)
      run_pass(w, job);
    else if (help != NULL)
      run_chunk(w, help, j);
    else
      break;
  }
  return NULL;
}

static int size_desc(const void *a, const void *b, void *arg) {
  const ws_mhash_job_t *jobs = arg;
  uint64_t sa = jobs[*(const uint32_t *)a].size;
  uint64_t sb = jobs[*(const uint32_t *)b].size;
  if (sa != sb)
    return sa > sb ? -1 : 1;
  return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

int ws_manifest_hash_jobs(ws_mhash_job_t *jobs, uint32_t n, uint32_t chunk_size,
                          unsigned nthreads, char *errbuf, size_t errlen) {
  heng_t eng = {.jobs = jobs,
                .njobs = n,
                .chunk_size = chunk_size,
                .errbuf = errbuf,
                .errlen = errlen};
  hworker_t *ws = NULL;
  pthread_t *tids = NULL;
  unsigned nstarted = 0;
  int err = 0;

  if (chunk_size == 0)
    return WS_ECHUNKSIZE;
  if (nthreads == 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = c > 0 ? (unsigned)c : 1;
  }
  if (nthreads > HASH_THREADS_MAX)
    nthreads = HASH_THREADS_MAX;
  if (pthread_mutex_init(&eng.mu, NULL) != 0)
    return -ENOMEM;
  eng.order = malloc(((size_t)n + 1) * sizeof(*eng.order));
  eng.nthreads = nthreads;
  eng.active = calloc(nthreads, sizeof(*eng.active));
  ws = calloc(nthreads, sizeof(*ws));
  tids = calloc(nthreads, sizeof(*tids));
  if (eng.order == NULL || eng.active == NULL || ws == NULL || tids == NULL) {
    err = -ENOMEM;
    goto cleanup;
  }
  for (uint32_t i = 0; i < n; i++) {
    eng.order[i] = i;
    jobs[i].front = 0;
    jobs[i].back = jobs[i].nchunks;
  }
  qsort_r(eng.order, n, sizeof(*eng.order), size_desc, jobs);
  for (unsigned t = 0; t < nthreads; t++) {
    ws[t].eng = &eng;
    ws[t].slot = t;
    ws[t].buf = malloc(HASH_BLOCK_BYTES);
    ws[t].fctx = ws_sha256_new();
    ws[t].cctx = ws_sha256_new();
    if (ws[t].buf == NULL || ws[t].fctx == NULL || ws[t].cctx == NULL) {
      err = -ENOMEM;
      goto cleanup;
    }
  }
  /* Thread 0 is this thread; the others are started here. */
  for (unsigned t = 1; t < nthreads; t++) {
    if (pthread_create(&tids[t], NULL, worker_main, &ws[t]) != 0)
      break; /* fewer helpers still finish the work */
    nstarted = t;
  }
  worker_main(&ws[0]);
  for (unsigned t = 1; t <= nstarted; t++)
    pthread_join(tids[t], NULL);
  err = eng.err;
cleanup:
  for (unsigned t = 0; ws != NULL && t < nthreads; t++) {
    free(ws[t].buf);
    ws_sha256_free(ws[t].fctx);
    ws_sha256_free(ws[t].cctx);
  }
  free(ws);
  free(tids);
  free(eng.active);
  free(eng.order);
  pthread_mutex_destroy(&eng.mu);
  return err;
}
