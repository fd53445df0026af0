/* store_release.c - releases in the chunk store: reserving space for one
 * being assembled, publishing its snapshot directory, reading it back.
 * Worker threads only.
 *
 * Publish ordering: the snapshot is built under releases/.tmp-sha256-<hex>/
 * (manifest.json fsynced, one relative symlink per file, every directory
 * fsynced) and renamed to releases/sha256-<hex>; the rename is the commit.
 * A crash before it leaves a hidden temp dir the startup scan deletes.
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

static uint64_t file_partial_bytes(const ws_mfile_t *f, uint32_t chunk_size) {
  uint64_t n = (f->size + chunk_size - 1) / chunk_size;
  return f->size + STORE_BITS_FILE_BYTES(n);
}

static uint32_t manifest_chunk_size(const ws_manifest_t *m) {
  return m->chunk_size ? m->chunk_size : WS_CHUNK_SIZE_LEGACY;
}

/* Undoes the partials this begin call reserved (mine[i] set). */
static void begin_undo(ws_store_t *st, const ws_manifest_t *m,
                       const uint8_t *mine) {
  ws_cache_t *c = st->cache;
  cache_rel_t *r;
  pthread_mutex_lock(&c->mu);
  for (uint32_t i = 0; i < m->nfiles; i++) {
    char path[PATH_MAX];
    if (!mine[i])
      continue;
    cache_set_remove(&c->partials, &m->files[i].sha256);
    if (store_path_partial(st->root, &m->files[i].sha256, "bits", path,
                           sizeof(path)) == 0)
      (void)unlink(path);
    if (store_path_partial(st->root, &m->files[i].sha256, "data", path,
                           sizeof(path)) == 0)
      (void)unlink(path);
  }
  if ((r = cache_rel_find_locked(c, &m->digest)) != NULL && r->assembling)
    cache_rel_remove_locked(c, r);
  pthread_mutex_unlock(&c->mu);
}

int ws_store_release_begin(ws_store_t *st, const ws_manifest_t *m) {
  ws_cache_t *c = st->cache;
  uint32_t cs = manifest_chunk_size(m);
  cache_rel_t *r;
  uint8_t *mine;
  uint64_t need = 0;
  int err = 0;

  mine = calloc(m->nfiles ? m->nfiles : 1, 1);
  if (mine == NULL)
    return -ENOMEM;
  pthread_mutex_lock(&c->mu);
  if ((r = cache_rel_find_locked(c, &m->digest)) != NULL) {
    pthread_mutex_unlock(&c->mu);
    goto cleanup; /* published, or already being assembled */
  }
  if ((err = cache_rel_add_locked(c, m, &r)) != 0) {
    pthread_mutex_unlock(&c->mu);
    goto cleanup;
  }
  r->assembling = 1;
  /* Files neither stored nor in progress, each counted once. */
  for (uint32_t i = 0; i < m->nfiles; i++) {
    const ws_hash_t *h = &m->files[i].sha256;
    int dup = 0;
    for (uint32_t k = 0; k < i && !dup; k++)
      dup = mine[k] && ws_hash_eq(&m->files[k].sha256, h);
    if (dup || cache_set_find(&c->blobs, h) != NULL ||
        cache_set_find(&c->partials, h) != NULL)
      continue;
    mine[i] = 1;
    need += file_partial_bytes(&m->files[i], cs);
  }
  /* The new release is already marked assembling, so eviction cannot take
   * a blob it shares with an older release. */
  err = cache_evict_for_locked(c, need);
  for (uint32_t i = 0; i < m->nfiles && err == 0; i++)
    if (mine[i])
      err = cache_set_add(&c->partials, &m->files[i].sha256,
                          file_partial_bytes(&m->files[i], cs));
  pthread_mutex_unlock(&c->mu);
  /* Preallocate outside the ledger lock: fallocate of a big file can take
   * a while, and the bytes are already reserved above. */
  for (uint32_t i = 0; i < m->nfiles && err == 0; i++) {
    ws_store_file_t *pf;
    if (!mine[i])
      continue;
    if ((err = ws_store_file_open(st, &m->files[i], cs, &pf)) == 0)
      ws_store_file_close(pf);
  }
  if (err != 0)
    begin_undo(st, m, mine);
cleanup:
  free(mine);
  return err;
}

void ws_store_release_abort(ws_store_t *st, const ws_hash_t *digest) {
  ws_cache_t *c = st->cache;
  cache_rel_t *r;
  pthread_mutex_lock(&c->mu);
  if ((r = cache_rel_find_locked(c, digest)) != NULL && r->assembling)
    cache_rel_remove_locked(c, r);
  pthread_mutex_unlock(&c->mu);
}

void ws_store_release_discard(ws_store_t *st, const ws_hash_t *digest) {
  ws_cache_t *c = st->cache;
  cache_rel_t *r;
  pthread_mutex_lock(&c->mu);
  if ((r = cache_rel_find_locked(c, digest)) != NULL && r->assembling) {
    for (uint32_t i = 0; i < r->nfiles; i++) {
      const ws_hash_t *h = &r->files[i].h;
      if (cache_file_referenced_locked(c, h, r))
        continue;
      /* Handles still open on a partial keep writing to the unlinked
       * inode; its blocks are freed when the last one closes. */
      cache_partial_drop_locked(c, h);
      cache_blob_drop_locked(c, h);
    }
    cache_rel_remove_locked(c, r);
  }
  pthread_mutex_unlock(&c->mu);
}

static int manifest_write(const char *dir, const char *bytes, size_t len) {
  char path[PATH_MAX];
  int fd, err;
  if (snprintf(path, sizeof(path), "%s/manifest.json", dir) >=
      (int)sizeof(path))
    return -ENAMETOOLONG;
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0)
    return -errno;
  err = store_fs_pwrite_all(fd, bytes, len, 0);
  if (err == 0)
    err = store_fs_sync(fd, 0);
  close(fd);
  return err;
}

int store_release_link_target(const ws_mfile_t *f, char *target, size_t len) {
  char hex[WS_SHA256_HEX_LEN + 1];
  size_t depth = 2, off = 0;
  int n;
  for (const char *p = f->name; *p; p++)
    depth += (*p == '/');
  if (depth * 3 + 80 >= len)
    return -ENAMETOOLONG;
  for (size_t i = 0; i < depth; i++, off += 3)
    memcpy(target + off, "../", 3);
  ws_hash_to_hex(&f->sha256, hex);
  n = snprintf(target + off, len - off, "blobs/sha256/%.2s/%s", hex, hex);
  return n < 0 || (size_t)n >= len - off ? -ENAMETOOLONG : 0;
}

/* Symlink for file f inside the snapshot dir (store_release_link_target). */
static int file_link(const char *dir, const ws_mfile_t *f, char *last_parent,
                     size_t lplen) {
  char path[PATH_MAX], target[PATH_MAX];
  const char *slash;
  int err, n;
  if ((err = store_release_link_target(f, target, sizeof(target))) != 0)
    return err;
  n = snprintf(path, sizeof(path), "%s/%s", dir, f->name);
  if (n < 0 || (size_t)n >= sizeof(path))
    return -ENAMETOOLONG;
  if ((err = store_fs_mkdirs_parent(path)) != 0)
    return err;
  if (symlink(target, path) != 0)
    return -errno;
  /* Files are usually listed directory by directory: fsync each parent once
   * per run of files rather than once per file. */
  slash = strrchr(path, '/');
  n = (int)(slash - path);
  if ((size_t)n < lplen &&
      (strncmp(last_parent, path, (size_t)n) != 0 || last_parent[n] != '\0')) {
    if (last_parent[0] != '\0' && (err = store_fs_fsync_path(last_parent)) != 0)
      return err;
    memcpy(last_parent, path, (size_t)n);
    last_parent[n] = '\0';
  }
  return 0;
}

static int release_mark_published(ws_store_t *st, const ws_manifest_t *m,
                                  size_t len) {
  ws_cache_t *c = st->cache;
  cache_rel_t *r;
  int err = 0;
  pthread_mutex_lock(&c->mu);
  r = cache_rel_find_locked(c, &m->digest);
  if (r == NULL && (err = cache_rel_add_locked(c, m, &r)) != 0)
    goto out;
  if (r->assembling || r->published_ns == 0) {
    r->assembling = 0;
    r->published_ns = r->accessed_ns = cache_now_ns();
    r->meta_bytes = len;
    err = cache_state_save(c, r, 1);
  }
out:
  pthread_mutex_unlock(&c->mu);
  return err;
}

/* 1 when the ledger has the release published (not being assembled). */
static int release_published(ws_store_t *st, const ws_hash_t *digest) {
  cache_rel_t *r;
  int yes;
  pthread_mutex_lock(&st->cache->mu);
  r = cache_rel_find_locked(st->cache, digest);
  yes = r != NULL && !r->assembling;
  pthread_mutex_unlock(&st->cache->mu);
  return yes;
}

int ws_store_release_publish(ws_store_t *st, const ws_manifest_t *m,
                             const char *manifest_bytes, size_t len) {
  char final[PATH_MAX], tmp[PATH_MAX], parent[PATH_MAX] = "";
  char hex[WS_SHA256_HEX_LEN + 1];
  struct stat sb;
  ws_hash_t h;
  int err, n;

  if ((err = ws_sha256(manifest_bytes, len, &h)) != 0)
    return err;
  if (!ws_hash_eq(&h, &m->digest))
    return WS_EDIGEST;
  if ((err = store_path_release(st->root, &m->digest, final, sizeof(final))))
    return err;
  if (lstat(final, &sb) == 0) {
    if (release_published(st, &m->digest))
      return release_mark_published(st, m, len);
    /* Not published by this store (the ledger says so since the startup
     * scan checked what was there): a directory of unknown origin. */
    ws_hash_to_hex(&m->digest, hex);
    WS_LOGW("release sha256-%s: a directory this cache did not publish is "
            "at its name; replacing it",
            hex);
    if ((err = store_fs_rm_rf(final)) != 0)
      return err;
  }
  /* The last gate: every blob exists and may serve this manifest's chunk
   * list (a blob vouched for by another list is hashed whole here). */
  for (uint32_t i = 0; i < m->nfiles; i++) {
    if ((err = store_blob_usable(st, &m->files[i], m->chunk_size)) < 0)
      return err;
    if (err == 0)
      return WS_ENOTFOUND;
  }
  ws_hash_to_hex(&m->digest, hex);
  n = snprintf(tmp, sizeof(tmp), "%s/releases/.tmp-sha256-%s", st->root, hex);
  if (n < 0 || (size_t)n >= sizeof(tmp))
    return -ENAMETOOLONG;
  if ((err = store_fs_rm_rf(tmp)) != 0)
    return err;
  if (mkdir(tmp, 0755) != 0)
    return -errno;
  if ((err = manifest_write(tmp, manifest_bytes, len)) != 0)
    goto fail;
  for (uint32_t i = 0; i < m->nfiles; i++) {
    if ((err = file_link(tmp, &m->files[i], parent, sizeof(parent))) != 0)
      goto fail;
    if (i == 0)
      store_crash_point("publish-mid");
  }
  if ((parent[0] != '\0' && (err = store_fs_fsync_path(parent)) != 0) ||
      (err = store_fs_fsync_path(tmp)) != 0)
    goto fail;
  store_crash_point("publish-before-rename");
  if (rename(tmp, final) != 0) {
    err = -errno;
    if (err != -EEXIST && err != -ENOTEMPTY)
      goto fail;
    (void)store_fs_rm_rf(tmp); /* a concurrent publish won */
  }
  if ((err = store_fs_fsync_parent(final)) != 0)
    return err;
  store_crash_point("publish-after-rename");
  return release_mark_published(st, m, len);

fail:
  (void)store_fs_rm_rf(tmp);
  return err;
}

int ws_store_release_lookup(ws_store_t *st, const ws_hash_t *digest, char **out,
                            size_t *len) {
  char path[PATH_MAX];
  char *buf;
  size_t n;
  ws_hash_t h;
  int err;
  if ((err = store_path_release(st->root, digest, path, sizeof(path))) != 0)
    return err;
  if (strlen(path) + sizeof("/manifest.json") > sizeof(path))
    return -ENAMETOOLONG;
  memcpy(path + strlen(path), "/manifest.json", sizeof("/manifest.json"));
  if ((err = store_fs_read_all(path, 64u << 20, &buf, &n)) != 0)
    return err;
  if ((err = ws_sha256(buf, n, &h)) != 0 || !ws_hash_eq(&h, digest)) {
    free(buf);
    return err != 0 ? err : WS_EDIGEST;
  }
  /* A lost access time only changes eviction order; not worth failing the
   * lookup over. */
  err = ws_cache_touch(st->cache, digest);
  (void)err;
  *out = buf;
  *len = n;
  return 0;
}
