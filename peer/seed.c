/* seed.c - serve a release this node already has on disk: import a local
 * directory (a warm node's weights) into the cache without downloading
 * anything, pin it, and serve it (seed.h). The manifest is an absolute
 * path to manifest.json or a release URI s3://…/ (then only manifest.json
 * is read from S3). POST /api/v1/seed {"digest"} (pin a READY release) is
 * the API's pin; api.c parses the request and answers it.
 *
 * Import job states: MANIFEST (S3 GET of manifest.json, URI case only) ->
 * IMPORT (worker: read + parse the manifest file, verify and copy every
 * file into blobs/ in one hashing pass, publish, pin) -> DONE (loop: the
 * release joins the table as READY, pinned, and the caller hears it). Any
 * error ends the job with an error to the caller; nothing partial becomes
 * visible.
 *
 * Owns: each import job. Borrows the context (store, S3, worker queue) and
 * the release table.
 * Thread: loop thread; seed_import_work runs on a worker.
 */
#include "seed.h"

#include "core/tunables.h"
#include "fetch/s3_small.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manifest.h"
#include "ws_log.h"

typedef struct {
  peer_ctx_t *ctx;
  peer_releases_t *releases;
  peer_seed_done_fn done;
  void *arg;
  char *dir;
  char *mpath;  /* manifest file, or NULL when mbytes came from S3 */
  char *mbytes; /* manifest bytes (owned) */
  size_t mlen;
  ws_manifest_t *m;
  int err;
  char errmsg[512];
} seed_job_t;

static void seed_job_free(seed_job_t *j) {
  free(j->dir);
  free(j->mpath);
  free(j->mbytes);
  ws_manifest_free(j->m);
  free(j);
}

static void seed_fail(seed_job_t *j, int err, const char *msg) {
  WS_LOGW("seed %s: %s", j->dir, msg);
  j->done(j->arg, err, msg, NULL);
  seed_job_free(j);
}

/* [worker] The manifest (from the file unless S3 gave it), the import, the
 * pin. */
static void seed_import_work(void *arg) {
  seed_job_t *j = arg;
  ws_store_t *st = j->ctx->store;
  char why[256] = "";
  int fd = -1;

  if (j->mbytes == NULL) {
    struct stat sb;
    /* O_NONBLOCK: a FIFO with no writer (not a manifest) must not hold
     * this worker for ever; fstat then refuses it. */
    fd = open(j->mpath, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &sb) != 0) {
      j->err = -errno;
      snprintf(j->errmsg, sizeof(j->errmsg), "%s: %s", j->mpath,
               ws_strerror(j->err));
      goto out;
    }
    if (!S_ISREG(sb.st_mode) ||
        (uint64_t)sb.st_size > PEER_MANIFEST_MAX_BYTES) {
      j->err = WS_EMANIFEST;
      snprintf(j->errmsg, sizeof(j->errmsg),
               "%s: not a regular file of at most %u bytes", j->mpath,
               (unsigned)PEER_MANIFEST_MAX_BYTES);
      goto out;
    }
    j->mlen = (size_t)sb.st_size;
    j->mbytes = malloc(j->mlen + 1);
    if (j->mbytes == NULL) {
      j->err = -ENOMEM;
      goto out;
    }
    for (size_t got = 0; got < j->mlen;) {
      ssize_t n = pread(fd, j->mbytes + got, j->mlen - got, (off_t)got);
      if (n <= 0) {
        j->err = n < 0 ? -errno : WS_ETRUNCATED;
        snprintf(j->errmsg, sizeof(j->errmsg), "%s: %s", j->mpath,
                 ws_strerror(j->err));
        goto out;
      }
      got += (size_t)n;
    }
    j->mbytes[j->mlen] = '\0';
  }
  j->err = ws_manifest_parse(j->mbytes, j->mlen, NULL, &j->m, why, sizeof(why));
  if (j->err != 0) {
    snprintf(j->errmsg, sizeof(j->errmsg), "manifest: %s", why);
    goto out;
  }
  j->err = ws_store_release_import(st, j->m, j->mbytes, j->mlen, j->dir, why,
                                   sizeof(why));
  if (j->err != 0) {
    snprintf(j->errmsg, sizeof(j->errmsg), "%s does not match the manifest: %s",
             j->dir, why);
    goto out;
  }
  j->err = ws_cache_pin(ws_store_cache(st), &j->m->digest, 1);
  if (j->err != 0)
    snprintf(j->errmsg, sizeof(j->errmsg), "pin: %s", ws_strerror(j->err));
out:
  if (fd >= 0)
    close(fd);
}

static void seed_import_after(void *arg, int status) {
  seed_job_t *j = arg;
  peer_release_t *rel;
  char path[4096];

  if (status != 0 && j->err == 0) {
    j->err = status;
    snprintf(j->errmsg, sizeof(j->errmsg), "import: %s", ws_strerror(status));
  }
  if (j->err != 0) {
    seed_fail(j, j->err, j->errmsg);
    return;
  }
  int rc = peer_releases_seeded(j->releases, j->m, &rel);
  if (rc != 0) {
    seed_fail(j, rc, "cannot register the release");
    return;
  }
  if (ws_store_release_path(j->ctx->store, &j->m->digest, path, sizeof(path)) ==
      0)
    WS_LOGI("seed %s: imported %s (%u files, %llu bytes) from %s", path,
            peer_release_digest_str(rel), j->m->nfiles,
            (unsigned long long)j->m->total_size, j->dir);
  j->done(j->arg, 0, NULL, rel);
  seed_job_free(j);
}

static void seed_start_import(seed_job_t *j) {
  int rc = peer_ctx_queue(j->ctx, seed_import_work, seed_import_after, j);
  if (rc != 0)
    seed_fail(j, rc, "cannot queue the import");
}

/* ---- manifest.json from S3 (URI case) ----------------------------------- */

static void seed_on_manifest(void *arg, int status, char *bytes, size_t len,
                             const char *errmsg) {
  seed_job_t *j = arg;
  if (status != 0) {
    seed_fail(j, status, errmsg);
    return;
  }
  if (bytes == NULL) {
    seed_fail(j, WS_EMANIFEST, "manifest.json is empty");
    return;
  }
  j->mbytes = bytes;
  j->mlen = len;
  seed_start_import(j);
}

static int seed_fetch_manifest(seed_job_t *j, const char *uri) {
  ws_s3_uri_t u;
  char *key;
  size_t n;
  int rc = ws_s3_uri_parse(uri, &u);
  if (rc != 0)
    return rc;
  n = strlen(u.key);
  key = malloc(n + sizeof("/manifest.json"));
  if (key == NULL) {
    ws_s3_uri_free(&u);
    return -ENOMEM;
  }
  memcpy(key, u.key, n);
  if (n > 0 && key[n - 1] != '/')
    key[n++] = '/';
  memcpy(key + n, "manifest.json", sizeof("manifest.json"));
  rc = peer_s3_get_small(j->ctx, u.bucket, key, PEER_MANIFEST_MAX_BYTES,
                         seed_on_manifest, j) != NULL
           ? 0
           : -ENOMEM;
  free(key);
  ws_s3_uri_free(&u);
  return rc;
}

/* ---- the entry point ----------------------------------------------------- */

int peer_seed_import(peer_ctx_t *ctx, peer_releases_t *releases,
                     const char *dir, const char *manifest,
                     peer_seed_done_fn done, void *arg) {
  seed_job_t *j = calloc(1, sizeof(*j));
  if (j == NULL || (j->dir = strdup(dir)) == NULL) {
    free(j);
    return -ENOMEM;
  }
  j->ctx = ctx;
  j->releases = releases;
  j->done = done;
  j->arg = arg;
  if (strncmp(manifest, "s3://", 5) == 0) {
    int rc = seed_fetch_manifest(j, manifest);
    if (rc != 0)
      seed_fail(j, rc, "manifest URI: want s3://bucket/prefix/");
    return 0;
  }
  if (manifest[0] != '/' || (j->mpath = strdup(manifest)) == NULL) {
    seed_fail(j, WS_EUSAGE, "manifest: want an absolute path or s3:// URI");
    return 0;
  }
  seed_start_import(j);
  return 0;
}
