/* store_scan.c - rebuilds the ledger at open by scanning the cache (the disk
 * is the truth; state/ only adds pins and times) and removes leftovers of
 * interrupted operations: temp files, hidden temp/trash release dirs,
 * partials whose blob already exists, bitmaps without data, releases whose
 * manifest or blobs are missing. A published release is served as soon as
 * the store is open, so each of its blobs must be vouched for by a note
 * this store wrote (store_blob.c), or is hashed here; a release with a blob
 * that does not hash to its name is removed (fetched again when asked).
 * Worker thread, before the store is shared.
 */
#include "store-int.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_log.h"

/* 1 if s[0..n) is exactly want lowercase hex digits. */
static int is_hexn(const char *s, size_t n, size_t want) {
  if (n != want)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

static int is_hex64(const char *s, size_t n) {
  return is_hexn(s, n, WS_SHA256_HEX_LEN);
}

static int scan_blob_dir(ws_cache_t *c, const char *dir, const char *ab) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int err = 0;
  if (d == NULL)
    return -errno;
  while ((e = readdir(d)) != NULL) {
    char path[PATH_MAX];
    struct stat sb;
    ws_hash_t h;
    if (!is_hex64(e->d_name, strlen(e->d_name)) ||
        memcmp(e->d_name, ab, 2) != 0)
      continue;
    if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
        (int)sizeof(path))
      continue;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
      continue;
    if (ws_hash_from_hex(e->d_name, WS_SHA256_HEX_LEN, &h) != 0)
      continue;
    if ((err = cache_set_add(&c->blobs, &h, (uint64_t)sb.st_size)) != 0)
      break;
  }
  closedir(d);
  return err;
}

static int scan_blobs(ws_cache_t *c) {
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *e;
  int err = 0;
  snprintf(dir, sizeof(dir), "%s/blobs/sha256", c->root);
  if ((d = opendir(dir)) == NULL)
    return -errno;
  while ((e = readdir(d)) != NULL && err == 0) {
    char sub[PATH_MAX];
    if (!is_hexn(e->d_name, strlen(e->d_name), 2))
      continue;
    if (snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) >= (int)sizeof(sub))
      continue;
    err = scan_blob_dir(c, sub, e->d_name);
  }
  closedir(d);
  return err;
}

static int scan_partials(ws_cache_t *c) {
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *e;
  int err = 0;
  snprintf(dir, sizeof(dir), "%s/partial", c->root);
  if ((d = opendir(dir)) == NULL)
    return -errno;
  while ((e = readdir(d)) != NULL && err == 0) {
    char path[PATH_MAX], other[PATH_MAX];
    size_t n = strlen(e->d_name);
    struct stat sb, bsb;
    ws_hash_t h;
    if (e->d_name[0] == '.')
      continue;
    if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
        (int)sizeof(path))
      continue;
    if (n != WS_SHA256_HEX_LEN + 5 || !is_hex64(e->d_name, WS_SHA256_HEX_LEN) ||
        ws_hash_from_hex(e->d_name, WS_SHA256_HEX_LEN, &h) != 0) {
      (void)unlink(path); /* *.tmp of an interrupted bitmap write */
      continue;
    }
    if (strcmp(e->d_name + WS_SHA256_HEX_LEN, ".bits") == 0) {
      store_path_partial(c->root, &h, "data", other, sizeof(other));
      if (stat(other, &sb) != 0 || cache_set_find(&c->blobs, &h) != NULL)
        (void)unlink(path);
      continue;
    }
    if (strcmp(e->d_name + WS_SHA256_HEX_LEN, ".data") != 0) {
      (void)unlink(path);
      continue;
    }
    if (cache_set_find(&c->blobs, &h) != NULL) {
      /* Finished: the blob was linked but the partial not yet dropped. */
      store_path_partial(c->root, &h, "bits", other, sizeof(other));
      (void)unlink(other);
      (void)unlink(path);
      continue;
    }
    if (stat(path, &sb) != 0)
      continue;
    store_path_partial(c->root, &h, "bits", other, sizeof(other));
    if (stat(other, &bsb) != 0)
      bsb.st_size = 0;
    err = cache_set_add(&c->partials, &h,
                        (uint64_t)sb.st_size + (uint64_t)bsb.st_size);
  }
  closedir(d);
  return err;
}

/* 1 if the release directory's entry for f is the symlink publish made. */
static int link_ok(const char *dir, const ws_mfile_t *f) {
  char path[PATH_MAX], want[PATH_MAX], got[PATH_MAX];
  ssize_t n;
  if (snprintf(path, sizeof(path), "%s/%s", dir, f->name) >=
          (int)sizeof(path) ||
      store_release_link_target(f, want, sizeof(want)) != 0)
    return 0;
  n = readlink(path, got, sizeof(got) - 1);
  if (n < 0)
    return 0;
  got[n] = '\0';
  return strcmp(got, want) == 0;
}

/* Loads one published release; a release that does not check out (bytes do
 * not hash to its name, unparsable, a file that is not the link publish
 * made, a blob missing or not hashing to its name) is removed so that it is
 * fetched again rather than served wrong. */
static int scan_release(ws_store_t *st, const char *path, const char *hex) {
  ws_cache_t *c = st->cache;
  char mpath[PATH_MAX];
  char *buf = NULL;
  size_t len;
  ws_manifest_t *m = NULL;
  ws_hash_t digest, h;
  cache_rel_t *r;
  struct stat sb;
  int err = 0, ok = 0;
  if (ws_hash_from_hex(hex, strlen(hex), &digest) != 0)
    return store_fs_rm_rf(path);
  if (snprintf(mpath, sizeof(mpath), "%s/manifest.json", path) >=
      (int)sizeof(mpath))
    return -ENAMETOOLONG;
  if (store_fs_read_all(mpath, 64u << 20, &buf, &len) == 0 &&
      ws_sha256(buf, len, &h) == 0 && ws_hash_eq(&h, &digest) &&
      ws_manifest_parse(buf, len, NULL, &m, NULL, 0) == 0) {
    ok = 1;
    for (uint32_t i = 0; i < m->nfiles && ok; i++) {
      ok = link_ok(path, &m->files[i]);
      if (!ok)
        break;
      pthread_mutex_lock(&c->mu);
      ok = cache_set_find(&c->blobs, &m->files[i].sha256) != NULL;
      pthread_mutex_unlock(&c->mu);
      /* Takes c->mu itself (counters, ledger). */
      if (ok && (ok = store_blob_usable(st, &m->files[i], m->chunk_size)) < 0) {
        err = ok;
        goto cleanup;
      }
    }
  }
  if (!ok) {
    err = store_fs_rm_rf(path);
    goto cleanup;
  }
  pthread_mutex_lock(&c->mu);
  if ((err = cache_rel_add_locked(c, m, &r)) != 0) {
    pthread_mutex_unlock(&c->mu);
    goto cleanup;
  }
  r->meta_bytes = len;
  if (stat(mpath, &sb) == 0)
    r->published_ns = (uint64_t)sb.st_mtim.tv_sec * 1000000000u +
                      (uint64_t)sb.st_mtim.tv_nsec;
  cache_state_load(c, r);
  if (r->accessed_ns == 0)
    r->accessed_ns = r->published_ns;
  pthread_mutex_unlock(&c->mu);
cleanup:
  ws_manifest_free(m);
  free(buf);
  return err;
}

static int scan_releases(ws_store_t *st) {
  ws_cache_t *c = st->cache;
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *e;
  int err = 0;
  snprintf(dir, sizeof(dir), "%s/releases", c->root);
  if ((d = opendir(dir)) == NULL)
    return -errno;
  while ((e = readdir(d)) != NULL && err == 0) {
    char path[PATH_MAX];
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
        (int)sizeof(path))
      continue;
    if (strncmp(e->d_name, ".tmp-", 5) == 0 ||
        strncmp(e->d_name, ".trash-", 7) == 0)
      err = store_fs_rm_rf(path);
    else if (strncmp(e->d_name, "sha256-", 7) == 0)
      err = scan_release(st, path, e->d_name + 7);
  }
  closedir(d);
  return err;
}

/* State files of releases that are gone are dropped. */
static void scan_state(ws_cache_t *c) {
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof(dir), "%s/state", c->root);
  if ((d = opendir(dir)) == NULL)
    return;
  while ((e = readdir(d)) != NULL) {
    char path[PATH_MAX];
    ws_hash_t h;
    size_t n = strlen(e->d_name);
    if (e->d_name[0] == '.')
      continue;
    if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
        (int)sizeof(path))
      continue;
    if (n == 7 + WS_SHA256_HEX_LEN + 5 &&
        strncmp(e->d_name, "sha256-", 7) == 0 &&
        strcmp(e->d_name + 7 + WS_SHA256_HEX_LEN, ".json") == 0 &&
        ws_hash_from_hex(e->d_name + 7, WS_SHA256_HEX_LEN, &h) == 0 &&
        cache_rel_find_locked(c, &h) != NULL)
      continue;
    (void)unlink(path);
  }
  closedir(d);
}

int store_scan(ws_store_t *st) {
  static const char *const dirs[] = {"blobs/sha256", "releases", "partial",
                                     "state"};
  ws_cache_t *c = st->cache;
  char path[PATH_MAX];
  uint64_t hashed, discarded;
  int err = 0;
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", st->root, dirs[i]);
    if ((err = store_fs_mkdirs(path)) != 0)
      return err;
  }
  /* Notes of an older version (chunk-list roots bound to nothing): every
   * blob without a note of this version is hashed before use instead. */
  snprintf(path, sizeof(path), "%s/blobs/chunklist", st->root);
  if ((err = store_fs_rm_rf(path)) != 0)
    return err;
  pthread_mutex_lock(&c->mu);
  err = scan_blobs(c);
  if (err == 0)
    err = scan_partials(c);
  pthread_mutex_unlock(&c->mu);
  /* Without the ledger lock held: checking a release's blobs may hash them
   * (store_blob_usable takes the lock for what it changes). Nothing else
   * uses the store yet. */
  if (err == 0 && (err = scan_releases(st)) == 0) {
    pthread_mutex_lock(&c->mu);
    scan_state(c);
    pthread_mutex_unlock(&c->mu);
  }
  pthread_mutex_lock(&c->mu);
  hashed = c->blobs_hashed;
  discarded = c->blobs_discarded;
  pthread_mutex_unlock(&c->mu);
  if (hashed > 0)
    WS_LOGI("cache: hashed %llu blob(s) of published releases that no note "
            "of this cache vouched for (first start after an upgrade, or "
            "files put there); %llu did not match and were removed",
            (unsigned long long)hashed, (unsigned long long)discarded);
  return err;
}
