/* store-int.h - chunk store internals shared by store*.c and cache*.c only:
 * the store struct, path builders, filesystem helpers and the crash hook.
 * Filesystem helpers block: worker threads only.
 */
#ifndef WS_STORE_INT_H
#define WS_STORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "cache-int.h"
#include "store.h"

/* Root paths longer than this are refused so that every derived path
 * (root + "/releases/sha256-<hex>/" + a manifest name) fits in PATH_MAX. */
#define STORE_ROOT_MAX 2048
#define STORE_BITS_MAGIC "WSBITS01"
#define STORE_BITS_HDR 16 /* magic[8], u32 nchunks, u32 chunk_size (LE) */

struct ws_store_s {
  char *root; /* owned */
  ws_cache_t *cache;
};

/* Calls the test hook, if any, with the step just completed. */
void store_crash_point(const char *point);

/* Path builders: 0 or -ENAMETOOLONG. */
int store_path_blob(const char *root, const ws_hash_t *h, char *buf,
                    size_t len);
int store_path_partial(const char *root, const ws_hash_t *h, const char *ext,
                       char *buf, size_t len);
int store_path_release(const char *root, const ws_hash_t *digest, char *buf,
                       size_t len);

/* Filesystem helpers (negative errno on failure). */
int store_fs_mkdirs(const char *path);
/* mkdir -p of the directory part of path. */
int store_fs_mkdirs_parent(const char *path);
int store_fs_fsync_path(const char *path);
int store_fs_fsync_parent(const char *path);
int store_fs_rm_rf(const char *path);
int store_fs_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
int store_fs_pread_all(int fd, void *buf, size_t len, uint64_t off);
/* Writes path via path.tmp + rename; durable: fsync file and directory. */
int store_fs_write_atomic(const char *path, const void *data, size_t len,
                          int durable);
/* Renames from to to without ever replacing an existing to (a blob may be
 * mmapped by readers): if to exists, from is dropped instead. */
int store_fs_link_noreplace(const char *from, const char *to);
/* Reads a whole file of at most max bytes; *out new, NUL-terminated. */
int store_fs_read_all(const char *path, size_t max, char **out, size_t *len);

/* Rebuilds the ledger from disk (store_scan.c). */
int store_scan(ws_store_t *st);

#endif
