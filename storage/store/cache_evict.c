/* cache_evict.c - eviction policy and the deletions it performs (rules in
 * cache.h). Runs with c->mu held, on a worker thread: deleting a release
 * while the ledger is locked keeps a concurrent reservation from counting
 * bytes that are about to vanish or from resurrecting a blob being removed.
 *
 * Crash ordering when evicting a release: the release directory is renamed
 * to a hidden trash name (so it disappears atomically), then deleted, then
 * the blobs nobody references any more are unlinked. A crash in between
 * leaves only orphans, which the next eviction or startup scan removes.
 *
 * In use: a process that serves a release holds a shared flock(2) on its
 * releases/sha256-<hex>/manifest.json (`flock -s FILE server ...`, or the
 * server itself). Eviction takes an exclusive one without waiting and
 * holds it until the directory is gone: while a shared one is held the
 * release is in use and is not evicted, automatically or on request (even
 * forced: a lock is a live process, a hold or pin may be stale). A lock
 * asked for while an eviction runs is granted once the release is gone,
 * so a server checks it still exists after taking it.
 */
#include "store-int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "ws_log.h"

static void blob_remove_locked(ws_cache_t *c, const ws_hash_t *h) {
  cache_item_t *it = cache_set_find(&c->blobs, h);
  if (it == NULL)
    return;
  c->evicted_bytes += it->bytes;
  cache_blob_drop_locked(c, h);
}

void cache_blob_drop_locked(ws_cache_t *c, const ws_hash_t *h) {
  char path[PATH_MAX];
  if (cache_set_find(&c->blobs, h) == NULL)
    return;
  cache_set_remove(&c->blobs, h);
  if (store_path_blob(c->root, h, path, sizeof(path)) == 0)
    (void)unlink(path);
  if (store_path_note(c->root, h, path, sizeof(path)) == 0)
    (void)unlink(path);
}

static void partial_remove_locked(ws_cache_t *c, const ws_hash_t *h) {
  cache_item_t *it = cache_set_find(&c->partials, h);
  if (it == NULL)
    return;
  c->evicted_bytes += it->bytes;
  cache_partial_drop_locked(c, h);
}

void cache_partial_drop_locked(ws_cache_t *c, const ws_hash_t *h) {
  char path[PATH_MAX];
  if (cache_set_find(&c->partials, h) == NULL)
    return;
  cache_set_remove(&c->partials, h);
  /* The bitmap goes first: a bitmap without its data file is discarded at
   * startup, while data without a bitmap is simply refetched. */
  if (store_path_partial(c->root, h, "bits", path, sizeof(path)) == 0)
    (void)unlink(path);
  if (store_path_partial(c->root, h, "data", path, sizeof(path)) == 0)
    (void)unlink(path);
}

/* Takes the release's lock for eviction: 0 with *fd (-1 when there is no
 * manifest to lock; close it once the directory is gone), WS_EBUSY when a
 * process holds a shared lock on it (in use). */
static int release_lock(ws_cache_t *c, const ws_hash_t *digest, int *fd) {
  char dir[PATH_MAX], path[PATH_MAX];
  int err;
  *fd = -1;
  if ((err = store_path_release(c->root, digest, dir, sizeof(dir))) != 0)
    return err;
  if (snprintf(path, sizeof(path), "%s/manifest.json", dir) >=
      (int)sizeof(path))
    return -ENAMETOOLONG;
  if ((*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
    return errno == ENOENT ? 0 : -errno;
  while (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR)
      continue;
    err = errno == EWOULDBLOCK ? WS_EBUSY : -errno;
    close(*fd);
    *fd = -1;
    return err;
  }
  return 0;
}

static int release_dir_remove(ws_cache_t *c, const ws_hash_t *digest) {
  char path[PATH_MAX], trash[PATH_MAX], hex[WS_SHA256_HEX_LEN + 1];
  int err, n;
  if ((err = store_path_release(c->root, digest, path, sizeof(path))) != 0)
    return err;
  ws_hash_to_hex(digest, hex);
  n = snprintf(trash, sizeof(trash), "%s/releases/.trash-sha256-%s", c->root,
               hex);
  if (n < 0 || (size_t)n >= sizeof(trash))
    return -ENAMETOOLONG;
  (void)store_fs_rm_rf(trash);
  if (rename(path, trash) != 0) {
    if (errno != ENOENT)
      return -errno;
  } else if ((err = store_fs_fsync_parent(trash)) != 0) {
    return err;
  }
  store_crash_point("evict-release-gone");
  return store_fs_rm_rf(trash);
}

static int release_evict_locked(ws_cache_t *c, cache_rel_t *r) {
  cache_item_t *files;
  uint32_t nfiles;
  int err, lock;
  if ((err = release_lock(c, &r->digest, &lock)) != 0)
    return err;
  err = release_dir_remove(c, &r->digest);
  if (lock >= 0)
    close(lock);
  if (err != 0)
    return err;
  cache_state_remove(c, &r->digest);
  c->evicted_bytes += r->meta_bytes;
  c->evicted_releases++;
  /* Take the file list before the release entry goes away. */
  files = r->files;
  nfiles = r->nfiles;
  r->files = NULL;
  r->nfiles = 0;
  cache_rel_remove_locked(c, r);
  for (uint32_t k = 0; k < nfiles; k++)
    if (!cache_file_referenced_locked(c, &files[k].h, NULL))
      blob_remove_locked(c, &files[k].h);
  free(files);
  return 0;
}

/* Removes one orphan blob or partial; 1 if one was removed. */
static int orphan_remove_one_locked(ws_cache_t *c) {
  for (size_t i = 0; i < c->blobs.n; i++) {
    ws_hash_t h = c->blobs.v[i].h;
    if (!cache_file_referenced_locked(c, &h, NULL)) {
      blob_remove_locked(c, &h);
      return 1;
    }
  }
  for (size_t i = 0; i < c->partials.n; i++) {
    ws_hash_t h = c->partials.v[i].h;
    if (!cache_file_referenced_locked(c, &h, NULL)) {
      partial_remove_locked(c, &h);
      return 1;
    }
  }
  return 0;
}

/* Least recently accessed evictable release, or NULL. */
static cache_rel_t *victim_pick_locked(ws_cache_t *c) {
  cache_rel_t *best = NULL;
  uint64_t now = cache_now_ns();
  for (size_t i = 0; i < c->nrels; i++) {
    cache_rel_t *r = c->rels[i];
    if (r->assembling || r->pinned || cache_rel_held_locked(r, now) ||
        r->busy_pass == c->evict_pass || cache_rel_kept_locked(c, r))
      continue;
    if (best == NULL || r->accessed_ns < best->accessed_ns ||
        (r->accessed_ns == best->accessed_ns &&
         r->published_ns < best->published_ns))
      best = r;
  }
  return best;
}

int cache_evict_for_locked(ws_cache_t *c, uint64_t need) {
  int err;
  if (c->capacity == 0)
    return 0;
  c->evict_pass++; /* releases found in use are skipped in this pass only */
  while (cache_used_locked(c) + need > c->capacity) {
    cache_rel_t *r;
    if (orphan_remove_one_locked(c))
      continue;
    r = victim_pick_locked(c);
    if (r == NULL)
      return WS_ENOSPACE;
    if ((err = release_evict_locked(c, r)) == WS_EBUSY) {
      char hex[WS_SHA256_HEX_LEN + 1];
      ws_hash_to_hex(&r->digest, hex);
      WS_LOGI("cache: release sha256-%s is in use (a process holds the lock "
              "on its manifest.json); not evicted",
              hex);
      r->busy_pass = c->evict_pass;
      c->evict_in_use++;
      continue;
    }
    if (err != 0)
      return err;
  }
  return 0;
}

int ws_cache_evict_for(ws_cache_t *c, uint64_t need) {
  int err;
  pthread_mutex_lock(&c->mu);
  err = cache_evict_for_locked(c, need);
  pthread_mutex_unlock(&c->mu);
  return err;
}

int ws_cache_evict(ws_cache_t *c, const ws_hash_t *digest, int force) {
  cache_rel_t *r;
  int err;
  pthread_mutex_lock(&c->mu);
  r = cache_rel_find_locked(c, digest);
  if (r == NULL) {
    err = WS_ENOTFOUND;
    goto out;
  }
  if (r->assembling ||
      (!force && (r->pinned || cache_rel_held_locked(r, cache_now_ns())))) {
    err = WS_EBUSY;
    goto out;
  }
  err = release_evict_locked(c, r); /* WS_EBUSY when in use, even forced */
out:
  pthread_mutex_unlock(&c->mu);
  return err;
}
