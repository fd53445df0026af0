/* store_blob.c - which blob may serve which manifest file, and the notes
 * that say so.
 *
 * A file is visible under blobs/sha256/ only once this store verified it,
 * but the directory is a plain directory: a file found there may have been
 * put there by something else (a copy from another node, a restored
 * backup, a tool, an attacker with write access to it), or replaced in
 * place. So every blob this store makes carries a note,
 * blobs/notes/<ab>/<hex>, written after the blob was verified and bound to
 * the blob's identity (inode, size, mtime, ctime: a file put in its place
 * or written to no longer matches) and to how it was verified: hashed
 * whole (the note vouches for the file sha256 itself) or chunk by chunk
 * against one chunk list (the note holds that list's root: the content is
 * exactly what those chunks say, not necessarily what the file sha256
 * says, and blobs are shared by every release naming the same sha256).
 * A blob without a matching note, or vouched for by another chunk list, is
 * hashed whole before it is used; a mismatch removes it (logged, counted)
 * and the file is fetched again. Worker threads.
 */
#include "store-int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_log.h"

#define CHUNK_ROOT_LABEL "weightswarm chunk list v1"
#define NOTE_MAGIC "WSNOTE02"
/* "WSNOTE02 <64 hex> ino size mtime_ns ctime_ns\n": the numbers are u64. */
#define NOTE_MAX (8 + 1 + WS_SHA256_HEX_LEN + 4 * 21 + 2)

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

static uint64_t ts_ns(const struct timespec *ts) {
  return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

void store_ident_of(const struct stat *sb, store_ident_t *id) {
  id->ino = (uint64_t)sb->st_ino;
  id->size = (uint64_t)sb->st_size;
  id->mtime_ns = ts_ns(&sb->st_mtim);
  id->ctime_ns = ts_ns(&sb->st_ctim);
}

int store_ident_eq(const store_ident_t *a, const store_ident_t *b) {
  return a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
         a->ctime_ns == b->ctime_ns;
}

/* Reads a note: 0 with *root and *id, WS_ENOTFOUND when there is none,
 * WS_ECORRUPT when it does not parse (a note of an older version too). */
static int note_read(ws_store_t *st, const ws_hash_t *h, ws_hash_t *root,
                     store_ident_t *id) {
  char path[PATH_MAX], hex[WS_SHA256_HEX_LEN + 1], *txt = NULL;
  uint64_t v[4] = {0, 0, 0, 0};
  size_t n;
  int err = 0, used = 0;
  if ((err = store_path_note(st->root, h, path, sizeof(path))) != 0)
    return err;
  if ((err = store_fs_read_all(path, NOTE_MAX, &txt, &n)) != 0)
    return err == WS_ELIMIT ? WS_ECORRUPT : err;
  if ((err = 0, sscanf(txt,
                       NOTE_MAGIC " %64[0-9a-f] %" SCNu64 " %" SCNu64
                                  " %" SCNu64 " %" SCNu64 "\n%n",
                       hex, &v[0], &v[1], &v[2], &v[3], &used)) != 5 ||
      (size_t)used != n || ws_hash_from_hex(hex, WS_SHA256_HEX_LEN, root) != 0)
    err = WS_ECORRUPT;
  free(txt);
  id->ino = v[0];
  id->size = v[1];
  id->mtime_ns = v[2];
  id->ctime_ns = v[3];
  return err;
}

int store_blob_note_write(ws_store_t *st, const ws_hash_t *h,
                          const ws_hash_t *root, const struct stat *sb) {
  char path[PATH_MAX], hex[WS_SHA256_HEX_LEN + 1], txt[NOTE_MAX + 1];
  store_ident_t id;
  ws_hash_t zero;
  int err, n;
  if ((err = store_path_note(st->root, h, path, sizeof(path))) != 0 ||
      (err = store_fs_mkdirs_parent(path)) != 0)
    return err;
  memset(&zero, 0, sizeof(zero));
  ws_hash_to_hex(root != NULL ? root : &zero, hex);
  store_ident_of(sb, &id);
  n = snprintf(txt, sizeof(txt),
               NOTE_MAGIC " %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                          "\n",
               hex, id.ino, id.size, id.mtime_ns, id.ctime_ns);
  if (n < 0 || (size_t)n >= sizeof(txt))
    return -EOVERFLOW;
  return store_fs_write_atomic(path, txt, (size_t)n, 1);
}

void store_blob_note_drop(ws_store_t *st, const ws_hash_t *h) {
  char path[PATH_MAX];
  if (store_path_note(st->root, h, path, sizeof(path)) == 0)
    (void)unlink(path);
}

/* 1 if the note of the blob whose stat is sb vouches for f under the chunk
 * list root mine: bound to this very file, and either hashed whole or
 * verified against the same chunk list. */
static int note_vouches(ws_store_t *st, const ws_mfile_t *f,
                        const ws_hash_t *mine, const struct stat *sb) {
  store_ident_t want, got;
  ws_hash_t root, zero;
  if (note_read(st, &f->sha256, &root, &want) != 0)
    return 0;
  store_ident_of(sb, &got);
  if (!store_ident_eq(&want, &got) || got.size != f->size)
    return 0;
  memset(&zero, 0, sizeof(zero));
  return ws_hash_eq(&root, &zero) ||
         (f->chunks != NULL && ws_hash_eq(&root, mine));
}

static void count(ws_store_t *st, uint64_t *counter) {
  pthread_mutex_lock(&st->cache->mu);
  (*counter)++;
  pthread_mutex_unlock(&st->cache->mu);
}

/* Hashes the blob at path whole. 1 when it is f's content, unchanged while
 * it was read (a whole-file note is written for it), 0 when not, <0 error. */
static int blob_hash_whole(ws_store_t *st, const ws_mfile_t *f,
                           const char *path) {
  struct stat before, after;
  store_ident_t a, b;
  ws_hash_t got;
  int fd, err;
  if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
    return errno == ENOENT ? 0 : (errno == ELOOP ? 0 : -errno);
  if (fstat(fd, &before) != 0) {
    err = -errno;
    goto out;
  }
  count(st, &st->cache->blobs_hashed);
  if (!S_ISREG(before.st_mode) || (uint64_t)before.st_size != f->size) {
    err = 0;
    goto out;
  }
  if ((err = ws_sha256_fd(fd, 0, f->size, &got)) != 0)
    goto out;
  if (fstat(fd, &after) != 0) {
    err = -errno;
    goto out;
  }
  store_ident_of(&before, &a);
  store_ident_of(&after, &b);
  /* Written to while it was read: what was hashed proves nothing. */
  err = store_ident_eq(&a, &b) && ws_hash_eq(&got, &f->sha256);
  if (err == 1) {
    int werr = store_blob_note_write(st, &f->sha256, NULL, &after);
    if (werr != 0)
      err = werr;
  }
out:
  close(fd);
  return err;
}

int store_blob_usable(ws_store_t *st, const ws_mfile_t *f,
                      uint32_t chunk_size) {
  char path[PATH_MAX], hex[WS_SHA256_HEX_LEN + 1];
  ws_hash_t mine;
  struct stat sb;
  int err;
  if ((err = store_path_blob(st->root, &f->sha256, path, sizeof(path))) != 0)
    return err;
  if (lstat(path, &sb) != 0)
    return errno == ENOENT ? 0 : -errno;
  if ((err = store_chunk_root(f, chunk_size, &mine)) != 0)
    return err;
  if (S_ISREG(sb.st_mode) && note_vouches(st, f, &mine, &sb))
    return 1;
  /* Unknown origin, changed since its note, or vouched for by another
   * chunk list: hash it whole. */
  if (!S_ISREG(sb.st_mode))
    count(st, &st->cache->blobs_hashed); /* a link or a directory: not ours */
  else if ((err = blob_hash_whole(st, f, path)) < 0)
    return err;
  pthread_mutex_lock(&st->cache->mu);
  if (err == 1) {
    /* Found on disk while running (the ledger did not know it): count it. */
    if (cache_set_find(&st->cache->blobs, &f->sha256) == NULL)
      err = cache_set_add(&st->cache->blobs, &f->sha256, f->size) == 0
                ? 1
                : -ENOMEM;
  } else {
    st->cache->blobs_discarded++;
    cache_set_remove(&st->cache->blobs, &f->sha256);
  }
  pthread_mutex_unlock(&st->cache->mu);
  if (err != 0)
    return err;
  ws_hash_to_hex(&f->sha256, hex);
  WS_LOGW("blob %s does not hash to its name (a file this cache did not "
          "verify, or changed since); removing it, the file is fetched again",
          hex);
  (void)unlink(path);
  store_blob_note_drop(st, &f->sha256);
  return 0;
}
