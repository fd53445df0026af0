/* store-int.h - chunk store internals shared by store*.c and cache*.c only:
 * the store struct, path builders, filesystem helpers and the crash hook.
 * Filesystem helpers block: worker threads only.
 */
#ifndef WS_STORE_INT_H
#define WS_STORE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cache-int.h"
#include "store.h"

/* Root paths longer than this are refused so that every derived path
 * (root + "/releases/sha256-<hex>/" + a manifest name) fits in PATH_MAX. */
#define STORE_ROOT_MAX 2048
#define STORE_BITS_MAGIC "WSBITS04"
/* The bitmap file: a header (magic[8], u32 nchunks, u32 chunk_size (LE),
 * chunk-list root[32]: a bitmap resumes only for the same chunk list, see
 * store_chunk_root; then u64 inode and u64 ctime (ns) of the data file
 * when the durable bitmap was last written: STORE_BITS_IDENT_OFF), then two
 * bitmaps of one bit per chunk: "durable" and "recent" (see store_file.c). */
#define STORE_BITS_IDENT_OFF 48
#define STORE_BITS_HDR 64
#define STORE_BITS_FILE_BYTES(nchunks)                                         \
  (STORE_BITS_HDR + 2 * (((uint64_t)(nchunks) + 7) / 8))
/* Verified chunk bytes of one file between two durability checkpoints
 * (one fdatasync of the data, then of the bitmap). */
#define STORE_CHECKPOINT_BYTES (64u << 20)

struct ws_store_s {
  char *root; /* owned */
  ws_cache_t *cache;
  /* Held while a partial is opened or created (partial_load): a release's
   * begin reserves a shared file in the ledger before its partial exists on
   * disk, so another release's open of that file could otherwise race the
   * creation (both "start over", one loses the bitmap rename: ENOENT). */
  pthread_mutex_t open_mu;
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
/* blobs/notes/<ab>/<hex>: the note this store wrote on a blob it verified
 * (see store_blob.c). */
int store_path_note(const char *root, const ws_hash_t *h, char *buf,
                    size_t len);

/* What a note binds of a file: a file put in its place has another inode,
 * and a write changes mtime and ctime (ctime cannot be set back). */
typedef struct {
  uint64_t ino, size, mtime_ns, ctime_ns;
} store_ident_t;
void store_ident_of(const struct stat *sb, store_ident_t *id);
int store_ident_eq(const store_ident_t *a, const store_ident_t *b);

/* The root of f's chunk list at chunk_size: sha256 over a label, the chunk
 * size, the file size and every chunk digest in order. All zero when f has
 * no chunk hashes (whole-file mode). */
int store_chunk_root(const ws_mfile_t *f, uint32_t chunk_size,
                     ws_hash_t *out) WS_MUST_USE;
/* [worker] Whether the blob named by f->sha256 may serve f.
 *
 * Usable at once when its note (written by this store after verifying it)
 * is bound to the file as it is now and says it was hashed whole or
 * verified against f's chunk list. Anything else (no note, a note of
 * another file or chunk list, a file changed since) is hashed whole now: a
 * match gets a whole-file note (and a place in the ledger), a mismatch is
 * removed (logged, counted in blobs_discarded) so that f fetches its own.
 * 1 usable, 0 absent or removed, <0 error. Takes c->mu briefly. */
int store_blob_usable(ws_store_t *st, const ws_mfile_t *f, uint32_t chunk_size);
/* [worker] Writes (durably) the note on a blob this store just verified:
 * root is the chunk-list root it was verified against, NULL when it was
 * hashed whole; sb is the blob's stat as it now sits in blobs/. */
int store_blob_note_write(ws_store_t *st, const ws_hash_t *h,
                          const ws_hash_t *root,
                          const struct stat *sb) WS_MUST_USE;
void store_blob_note_drop(ws_store_t *st, const ws_hash_t *h);

/* The symlink target of file f inside releases/sha256-<hex>/: "../" once
 * per directory in its name plus two (out of sha256-<hex>/ and releases/),
 * then blobs/sha256/<ab>/<hex>. 0 or -ENAMETOOLONG. */
int store_release_link_target(const ws_mfile_t *f, char *target, size_t len);

/* Filesystem helpers (negative errno on failure). */
int store_fs_mkdirs(const char *path);
/* mkdir -p of the directory part of path. */
int store_fs_mkdirs_parent(const char *path);
/* fsync (data_only: fdatasync) of fd, every sync the store does: each
 * passes store_crash_point("sync") first, so that tests can count them. */
int store_fs_sync(int fd, int data_only);
int store_fs_fsync_path(const char *path);
int store_fs_fsync_parent(const char *path);
int store_fs_rm_rf(const char *path);
int store_fs_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
int store_fs_pread_all(int fd, void *buf, size_t len, uint64_t off);
/* Writes path via path.tmp + rename; durable: fsync file and directory. */
int store_fs_write_atomic(const char *path, const void *data, size_t len,
                          int durable);
/* Reads a whole file of at most max bytes; *out new, NUL-terminated. */
int store_fs_read_all(const char *path, size_t max, char **out, size_t *len);

/* Rebuilds the ledger from disk (store_scan.c). */
int store_scan(ws_store_t *st);

#endif
