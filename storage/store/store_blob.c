/* store_blob.c - which blob may serve which manifest file.
 *
 * A file whose every chunk was hashed on arrival against the manifest's
 * chunk list is not hashed again as a whole (that second pass cost as much
 * CPU as the first). Its content is then exactly what the chunk list says,
 * but not necessarily what the file sha256 says, and blobs are named by
 * the file sha256 and shared across releases. So such a blob carries a note,
 * blobs/chunklist/<ab>/<hex>, holding the root of the chunk list that
 * vouched for it; the note is written (durably) before the blob appears,
 * and a release whose chunk list has another root hashes the blob whole
 * before using it. Worker threads.
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

#include "ws_log.h"

#define CHUNK_ROOT_LABEL "weightswarm chunk list v1"

int store_chunk_root(const ws_mfile_t *f, uint32_t chunk_size, ws_hash_t *out) {
  uint8_t le[12];
  int err;
  memset(out, 0, sizeof(*out));
  if (f->chunks == NULL)
    return 0;
  ws_sha256_t *ctx = ws_sha256_new();
  if (ctx == NULL)
    return -ENOMEM;
  for (int i = 0; i < 4; i++)
    le[i] = (uint8_t)(chunk_size >> (8 * i));
  for (int i = 0; i < 8; i++)
    le[4 + i] = (uint8_t)(f->size >> (8 * i));
  if ((err = ws_sha256_init(ctx)) == 0 &&
      (err = ws_sha256_update(ctx, CHUNK_ROOT_LABEL,
                              sizeof(CHUNK_ROOT_LABEL))) == 0 &&
      (err = ws_sha256_update(ctx, le, sizeof(le))) == 0 &&
      (err = ws_sha256_update(ctx, f->chunks,
                              sizeof(ws_hash_t) * (size_t)f->nchunks)) == 0)
    err = ws_sha256_final(ctx, out);
  ws_sha256_free(ctx);
  return err;
}

/* Reads a note: 0 and *root, WS_ENOTFOUND when there is none. A note that
 * does not parse reads as a root nothing matches. */
static int note_read(ws_store_t *st, const ws_hash_t *h, ws_hash_t *root) {
  char path[PATH_MAX], *txt = NULL;
  size_t n;
  int err;
  if ((err = store_path_chunklist(st->root, h, path, sizeof(path))) != 0)
    return err;
  if ((err = store_fs_read_all(path, 2 * WS_SHA256_HEX_LEN, &txt, &n)) != 0)
    return err;
  if (n < WS_SHA256_HEX_LEN ||
      ws_hash_from_hex(txt, WS_SHA256_HEX_LEN, root) != 0)
    memset(root, 0xff, sizeof(*root));
  free(txt);
  return 0;
}

int store_blob_note_write(ws_store_t *st, const ws_hash_t *h,
                          const ws_hash_t *root) {
  char path[PATH_MAX], hex[WS_SHA256_HEX_LEN + 2];
  int err;
  if ((err = store_path_chunklist(st->root, h, path, sizeof(path))) != 0 ||
      (err = store_fs_mkdirs_parent(path)) != 0)
    return err;
  ws_hash_to_hex(root, hex);
  hex[WS_SHA256_HEX_LEN] = '\n';
  return store_fs_write_atomic(path, hex, WS_SHA256_HEX_LEN + 1, 1);
}

void store_blob_note_drop(ws_store_t *st, const ws_hash_t *h) {
  char path[PATH_MAX];
  if (store_path_chunklist(st->root, h, path, sizeof(path)) == 0)
    (void)unlink(path);
}

int store_blob_usable(ws_store_t *st, const ws_mfile_t *f,
                      uint32_t chunk_size) {
  char path[PATH_MAX], hex[WS_SHA256_HEX_LEN + 1];
  ws_hash_t note, mine, got;
  struct stat sb;
  int err, fd;
  if ((err = store_path_blob(st->root, &f->sha256, path, sizeof(path))) != 0)
    return err;
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
    return 0;
  err = note_read(st, &f->sha256, &note);
  if (err == WS_ENOTFOUND)
    return 1; /* hashed whole when it was made */
  if (err != 0)
    return err;
  if ((err = store_chunk_root(f, chunk_size, &mine)) != 0)
    return err;
  if (f->chunks != NULL && ws_hash_eq(&note, &mine))
    return 1;
  /* Another chunk list (or whole-file mode) wants it: hash it whole. */
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return errno == ENOENT ? 0 : -errno;
  err = (uint64_t)sb.st_size == f->size ? ws_sha256_fd(fd, 0, f->size, &got)
                                        : WS_EDIGEST;
  close(fd);
  if (err == 0 && ws_hash_eq(&got, &f->sha256)) {
    store_blob_note_drop(st, &f->sha256);
    return 1;
  }
  if (err != 0 && err != WS_EDIGEST)
    return err;
  ws_hash_to_hex(&f->sha256, hex);
  WS_LOGW("blob %s does not hash to its name (planted by a manifest whose "
          "chunk list disagrees with its file sha256); removing it",
          hex);
  pthread_mutex_lock(&st->cache->mu);
  cache_set_remove(&st->cache->blobs, &f->sha256);
  pthread_mutex_unlock(&st->cache->mu);
  (void)unlink(path);
  store_blob_note_drop(st, &f->sha256);
  return 0;
}
