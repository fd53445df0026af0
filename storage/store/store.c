/* store.c - the chunk store object: open/close (with the startup scan in
 * store_scan.c), blob access for serving, and the crash-injection hook.
 * Threads as documented in store.h: open/close/blob_* are worker-only.
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

/* Written once by tests before threads start; read on every crash point. */
static void (*store_crash_hook)(const char *point);

void ws_store_set_crash_hook(void (*hook)(const char *point)) {
  store_crash_hook = hook;
}

void store_crash_point(const char *point) {
  if (store_crash_hook != NULL)
    store_crash_hook(point);
}

int ws_store_open(const char *cache_dir, uint64_t capacity_bytes,
                  ws_store_t **out) {
  ws_store_t *st;
  size_t n = strlen(cache_dir);
  int err;
  while (n > 1 && cache_dir[n - 1] == '/')
    n--;
  if (n == 0 || n > STORE_ROOT_MAX)
    return WS_EUSAGE;
  st = calloc(1, sizeof(*st));
  if (st == NULL)
    return -ENOMEM;
  pthread_mutex_init(&st->open_mu, NULL);
  st->root = strndup(cache_dir, n);
  if (st->root == NULL) {
    err = -ENOMEM;
    goto fail;
  }
  if ((err = cache_new(st->root, capacity_bytes, &st->cache)) != 0)
    goto fail;
  if ((err = store_scan(st)) != 0)
    goto fail;
  *out = st;
  return 0;

fail:
  ws_store_close(st);
  return err;
}

void ws_store_close(ws_store_t *st) {
  if (st == NULL)
    return;
  cache_free(st->cache);
  pthread_mutex_destroy(&st->open_mu);
  free(st->root);
  free(st);
}

ws_cache_t *ws_store_cache(ws_store_t *st) {
  return st->cache;
}

const char *ws_store_root(const ws_store_t *st) {
  return st->root;
}

int ws_store_release_path(const ws_store_t *st, const ws_hash_t *digest,
                          char *buf, size_t buflen) {
  return store_path_release(st->root, digest, buf, buflen);
}

int ws_store_blob_path(const ws_store_t *st, const ws_hash_t *sha256, char *buf,
                       size_t buflen) {
  return store_path_blob(st->root, sha256, buf, buflen);
}

int ws_store_has_blob(ws_store_t *st, const ws_hash_t *sha256) {
  char path[PATH_MAX];
  struct stat sb;
  if (store_path_blob(st->root, sha256, path, sizeof(path)) != 0)
    return 0;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int ws_store_blob_open(ws_store_t *st, const ws_hash_t *sha256, int *fd,
                       uint64_t *size) {
  char path[PATH_MAX];
  struct stat sb;
  int f, err;
  if ((err = store_path_blob(st->root, sha256, path, sizeof(path))) != 0)
    return err;
  f = open(path, O_RDONLY | O_CLOEXEC);
  if (f < 0)
    return errno == ENOENT ? WS_ENOTFOUND : -errno;
  if (fstat(f, &sb) != 0) {
    err = -errno;
    close(f);
    return err;
  }
  *fd = f;
  *size = (uint64_t)sb.st_size;
  return 0;
}

int ws_store_blob_verify(ws_store_t *st, const ws_hash_t *sha256) {
  ws_hash_t h;
  uint64_t size;
  int fd, err;
  if ((err = ws_store_blob_open(st, sha256, &fd, &size)) != 0)
    return err;
  err = ws_sha256_fd(fd, 0, size, &h);
  close(fd);
  if (err != 0)
    return err;
  return ws_hash_eq(&h, sha256) ? 0 : WS_EDIGEST;
}
