/* store_import.c - puts files a node already has (a warm node's weights
 * directory) into the cache without downloading anything: the path behind
 * `p2pctl seed DIR --manifest ...`.
 *
 * One pass per file: read the source in blocks, hash the whole file and
 * each chunk as the bytes go by, write them to partial/<hex>.import, and
 * only when every hash matches the manifest fsync, chmod 0444, rename into
 * blobs/ and write the blob's note (store_blob.c). A source that differs in
 * one byte leaves nothing behind but a temp file the next startup scan
 * removes. The source is never modified or moved.
 *
 * Thread: [worker] only (blocking reads, writes, hashing).
 */
#include "store-int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMPORT_BLOCK_BYTES (1u << 20)

typedef struct {
  ws_sha256_t *file;
  ws_sha256_t *chunk;
  uint8_t *buf;
} import_ctx_t;

static void import_ctx_free(import_ctx_t *x) {
  ws_sha256_free(x->file);
  ws_sha256_free(x->chunk);
  free(x->buf);
}

/* Copies src to dst (both open) while checking f's hashes; 0 or WS_EDIGEST
 * (content differs), WS_ETRUNCATED (source shrank), -errno. */
static int import_copy(import_ctx_t *x, const ws_mfile_t *f,
                       uint32_t chunk_size, int src, int dst) {
  uint64_t off = 0, chunk_left = 0;
  uint32_t j = 0;
  ws_hash_t h;
  int err;

  while (off < f->size) {
    uint64_t want = f->size - off;
    ssize_t n;
    if (want > IMPORT_BLOCK_BYTES)
      want = IMPORT_BLOCK_BYTES;
    if (f->chunks != NULL && chunk_left == 0) {
      chunk_left = f->size - off < chunk_size ? f->size - off : chunk_size;
      if ((err = ws_sha256_init(x->chunk)) != 0)
        return err;
    }
    if (f->chunks != NULL && want > chunk_left)
      want = chunk_left; /* never straddle a chunk boundary */
    n = pread(src, x->buf, (size_t)want, (off_t)off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    if (n == 0)
      return WS_ETRUNCATED;
    if ((err = ws_sha256_update(x->file, x->buf, (size_t)n)) != 0 ||
        (f->chunks != NULL &&
         (err = ws_sha256_update(x->chunk, x->buf, (size_t)n)) != 0) ||
        (err = store_fs_pwrite_all(dst, x->buf, (size_t)n, off)) != 0)
      return err;
    off += (uint64_t)n;
    if (f->chunks != NULL) {
      chunk_left -= (uint64_t)n;
      if (chunk_left == 0) {
        if ((err = ws_sha256_final(x->chunk, &h)) != 0)
          return err;
        if (!ws_hash_eq(&h, &f->chunks[j++]))
          return WS_EDIGEST;
      }
    }
  }
  if ((err = ws_sha256_final(x->file, &h)) != 0)
    return err;
  return ws_hash_eq(&h, &f->sha256) ? 0 : WS_EDIGEST;
}

/* The blob of f is in place: a partial preallocated for it (by
 * release_begin, or an earlier interrupted fetch) is now redundant, so drop
 * it and its ledger bytes, and count the blob. */
static int import_ledger(ws_store_t *st, const ws_mfile_t *f) {
  char path[PATH_MAX];
  int err;
  if (store_path_partial(st->root, &f->sha256, "data", path, sizeof(path)) == 0)
    (void)unlink(path);
  if (store_path_partial(st->root, &f->sha256, "bits", path, sizeof(path)) == 0)
    (void)unlink(path);
  pthread_mutex_lock(&st->cache->mu);
  cache_set_remove(&st->cache->partials, &f->sha256);
  err = cache_set_find(&st->cache->blobs, &f->sha256) != NULL
            ? 0
            : cache_set_add(&st->cache->blobs, &f->sha256, f->size);
  pthread_mutex_unlock(&st->cache->mu);
  return err;
}

int ws_store_file_import(ws_store_t *st, const ws_mfile_t *f,
                         uint32_t chunk_size, const char *src_path) {
  char tmp[PATH_MAX], blob[PATH_MAX];
  import_ctx_t x = {0};
  struct stat sb;
  int src = -1, dst = -1, err;

  if (chunk_size == 0)
    chunk_size = WS_CHUNK_SIZE_LEGACY;
  if ((err = store_path_blob(st->root, &f->sha256, blob, sizeof(blob))) != 0 ||
      (err = store_path_partial(st->root, &f->sha256, "import", tmp,
                                sizeof(tmp))) != 0)
    return err;
  if ((err = store_blob_usable(st, f, chunk_size)) != 0)
    return err < 0 ? err : 0;
  if ((src = open(src_path, O_RDONLY | O_CLOEXEC)) < 0)
    return -errno;
  if (fstat(src, &sb) != 0) {
    err = -errno;
    goto out;
  }
  if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != f->size) {
    err = WS_EDIGEST; /* not the file the manifest names */
    goto out;
  }
  x.file = ws_sha256_new();
  x.chunk = ws_sha256_new();
  x.buf = malloc(IMPORT_BLOCK_BYTES);
  if (x.file == NULL || x.chunk == NULL || x.buf == NULL) {
    err = -ENOMEM;
    goto out;
  }
  if ((err = store_fs_mkdirs_parent(tmp)) != 0)
    goto out;
  dst = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (dst < 0) {
    err = -errno;
    goto out;
  }
  if (f->size > 0 && posix_fallocate(dst, 0, (off_t)f->size) != 0) {
    err = -ENOSPC;
    goto out_unlink;
  }
  if ((err = import_copy(&x, f, chunk_size, src, dst)) != 0)
    goto out_unlink;
  if ((err = store_fs_sync(dst, 0)) != 0)
    goto out_unlink;
  if (fchmod(dst, 0444) != 0) {
    err = -errno;
    goto out_unlink;
  }
  if ((err = store_fs_mkdirs_parent(blob)) != 0)
    goto out_unlink;
  /* As at the end of a fetch (store_file.c): over whatever file of unknown
   * origin is at the name, then the note bound to the inode hashed here. */
  store_blob_note_drop(st, &f->sha256);
  if (rename(tmp, blob) != 0) {
    err = -errno;
    goto out_unlink;
  }
  if ((err = store_fs_fsync_parent(blob)) != 0)
    goto out;
  if (fstat(dst, &sb) != 0) {
    err = -errno;
    goto out;
  }
  if ((err = store_blob_note_write(st, &f->sha256, NULL, &sb)) != 0)
    goto out;
  err = import_ledger(st, f);
  goto out;
out_unlink:
  (void)unlink(tmp);
out:
  if (dst >= 0)
    close(dst);
  close(src);
  import_ctx_free(&x);
  return err;
}

int ws_store_release_import(ws_store_t *st, const ws_manifest_t *m,
                            const char *manifest_bytes, size_t len,
                            const char *dir, char *errbuf, size_t errlen) {
  char path[PATH_MAX];
  int err;

  if ((err = ws_store_release_begin(st, m)) != 0)
    return err;
  for (uint32_t i = 0; i < m->nfiles; i++) {
    const ws_mfile_t *f = &m->files[i];
    if (snprintf(path, sizeof(path), "%s/%s", dir, f->name) >=
        (int)sizeof(path)) {
      err = -ENAMETOOLONG;
    } else {
      err = ws_store_file_import(st, f, m->chunk_size, path);
    }
    if (err != 0) {
      if (errbuf != NULL)
        snprintf(errbuf, errlen, "%s: %s", f->name, ws_strerror(err));
      ws_store_release_abort(st, &m->digest);
      return err;
    }
  }
  if ((err = ws_store_release_publish(st, m, manifest_bytes, len)) != 0) {
    if (errbuf != NULL)
      snprintf(errbuf, errlen, "publish: %s", ws_strerror(err));
    ws_store_release_abort(st, &m->digest);
  }
  return err;
}
