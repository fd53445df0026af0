/* store.h - the node cache's chunk store.
 *
 * Owns everything under <cache>/: partial files and their chunk bitmaps,
 * verified blobs, published release snapshots, and (through cache.h) the byte
 * ledger and eviction. See docs/cache.md for the on-disk layout and the
 * crash-safety ordering.
 *
 * Life of a file: ws_store_release_begin() reserves space for every file of a
 * release (capacity check against the ledger, eviction, posix_fallocate) so
 * that ENOSPC is reported before the first byte is fetched. Each file is then
 * opened as a partial (ws_store_file_open), chunks are written at their
 * offsets and committed to a bitmap journal (data durable before its bit),
 * and ws_store_file_finish() verifies the whole-file sha256, fsyncs, makes the
 * file read-only and renames it into blobs/sha256/<ab>/<hex>. When every file
 * is a blob, ws_store_release_publish() lays out releases/sha256-<digest>/.
 *
 * Threads: every function that touches the disk or hashes is BLOCKING and
 * must run on a libuv worker thread (uv_queue_work) or in a tool, never on a
 * loop thread. Those are marked [worker]. Functions marked [any] are cheap,
 * take at most a short mutex, and may be called from the loop thread.
 * A ws_store_t is shared by all threads (the ledger has one mutex). A
 * ws_store_file_t may be used by several worker threads at once for DIFFERENT
 * chunks: pwrite at distinct offsets is safe and bitmap updates are under a
 * per-file mutex. ws_store_file_finish/close must not race other calls on the
 * same handle. Keep at most ONE open handle per file sha256 in the process
 * (two releases sharing a file share the handle): two handles on one
 * partial would each rewrite bitmap bytes the other set.
 * Call ws_store_release_begin before opening a release's files, also after a
 * restart: partials that no assembling release covers are evictable.
 */
#ifndef WS_STORE_H
#define WS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "digest.h"
#include "manifest.h"
#include "ws_err.h"

typedef struct ws_store_s ws_store_t;
typedef struct ws_store_file_s ws_store_file_t;

/* [worker] Opens (creating if needed) the cache at cache_dir with a ledger
 * capacity of capacity_bytes (0 = unlimited). Rebuilds the ledger by scanning
 * blobs/, releases/ and partial/ (the scan is the truth; state/ only adds
 * pins and access times) and removes leftovers of interrupted operations.
 * Borrows cache_dir (copied). *out is new; free with ws_store_close. */
int ws_store_open(const char *cache_dir, uint64_t capacity_bytes,
                  ws_store_t **out) WS_MUST_USE;
/* [worker] Frees the store; NULL is fine. Open file handles must be closed
 * first. */
void ws_store_close(ws_store_t *st);
/* [any] The store's ledger (borrowed; lives as long as st). */
ws_cache_t *ws_store_cache(ws_store_t *st);
/* [any] Root directory (borrowed). */
const char *ws_store_root(const ws_store_t *st);

/* ---- releases ----------------------------------------------------------- */

/* [worker] Registers m (borrowed, must outlive the matching publish/abort
 * call) as being assembled: its files are protected from eviction, the bytes
 * still missing are reserved in the ledger (evicting by the rules of cache.h
 * if needed; WS_ENOSPACE when capacity cannot fit them even then) and every
 * missing file gets a preallocated partial (-ENOSPC from the filesystem is
 * returned here, before any download). Idempotent for a digest already
 * being assembled; returns 0 at once if the release is already published. */
int ws_store_release_begin(ws_store_t *st, const ws_manifest_t *m) WS_MUST_USE;
/* [worker] Drops the "assembling" mark of a release that will not be
 * finished now. Partials and blobs stay (they resume later) but become
 * evictable. No-op if unknown. */
void ws_store_release_abort(ws_store_t *st, const ws_hash_t *digest);
/* [worker] Like ws_store_release_abort, and also removes the partials and
 * blobs of the release's files that no other release lists (published or
 * being assembled): for a release that failed because the disk is full or
 * failing, so that its space is given back at once. No-op if unknown or
 * not being assembled. */
void ws_store_release_discard(ws_store_t *st, const ws_hash_t *digest);
/* [worker] Publishes releases/sha256-<digest>/ with manifest.json (the exact
 * bytes, borrowed; their sha256 must equal m->digest, else WS_EDIGEST) and
 * one relative symlink per file into blobs/. Every file must already be a
 * blob (WS_ENOTFOUND otherwise). The directory is built under a hidden temp
 * name and renamed into place, so it appears complete or not at all.
 * Returns 0 if already published. Clears the "assembling" mark. */
int ws_store_release_publish(ws_store_t *st, const ws_manifest_t *m,
                             const char *manifest_bytes,
                             size_t len) WS_MUST_USE;
/* [any] Writes "<root>/releases/sha256-<hex>" to buf (no disk access).
 * -ENAMETOOLONG if buf is too small. */
int ws_store_release_path(const ws_store_t *st, const ws_hash_t *digest,
                          char *buf, size_t buflen) WS_MUST_USE;
/* [worker] Reads a published release's manifest.json. *out is new malloc'd
 * (NUL-terminated, length in *len). WS_ENOTFOUND if not published;
 * WS_EDIGEST if the bytes no longer hash to digest. Marks it accessed. */
int ws_store_release_lookup(ws_store_t *st, const ws_hash_t *digest, char **out,
                            size_t *len) WS_MUST_USE;

/* ---- blobs -------------------------------------------------------------- */

/* [any] Writes "<root>/blobs/sha256/<ab>/<hex>" to buf. */
int ws_store_blob_path(const ws_store_t *st, const ws_hash_t *sha256, char *buf,
                       size_t buflen) WS_MUST_USE;
/* [worker] 1 if a file exists at the blob's name, 0 if not (it is checked
 * against its note before any release uses it: docs/cache.md "Cache
 * trust"). */
int ws_store_has_blob(ws_store_t *st, const ws_hash_t *sha256);
/* [worker] Opens a blob read-only for serving (sendfile/pread). *fd is new
 * (caller closes), *size its length. WS_ENOTFOUND if absent. */
int ws_store_blob_open(ws_store_t *st, const ws_hash_t *sha256, int *fd,
                       uint64_t *size) WS_MUST_USE;
/* [worker] Re-hashes a blob; 0 if intact, WS_EDIGEST if not. */
int ws_store_blob_verify(ws_store_t *st, const ws_hash_t *sha256) WS_MUST_USE;

/* ---- partial files ------------------------------------------------------ */

/* [worker] Opens the partial for file f (borrowed; must outlive the handle)
 * sliced in chunk_size chunks, creating it (preallocated) if absent and
 * reading its bitmap journal if present: chunks marked done are trusted as
 * docs/cache.md says (durable ones while the data file is unchanged since,
 * others once they hash right); the others must be (re)fetched. If a blob
 * usable for f already exists (vouched for by its note, or hashed whole
 * now; one that does not hash to its name is removed) the handle is
 * complete (ws_store_file_complete() == 1) and holds no partial.
 * *out is new; free with ws_store_file_close. */
int ws_store_file_open(ws_store_t *st, const ws_mfile_t *f, uint32_t chunk_size,
                       ws_store_file_t **out) WS_MUST_USE;
/* [worker] Closes the handle; the partial stays for a later resume. */
void ws_store_file_close(ws_store_file_t *pf);

/* [any] Geometry and progress (short per-file mutex). */
uint32_t ws_store_file_nchunks(const ws_store_file_t *pf);
uint32_t ws_store_file_chunk_len(const ws_store_file_t *pf, uint32_t j);
uint64_t ws_store_file_chunk_offset(const ws_store_file_t *pf, uint32_t j);
int ws_store_file_has_chunk(ws_store_file_t *pf, uint32_t j);
uint32_t ws_store_file_done_count(ws_store_file_t *pf);
/* 1 once the file is a verified blob. */
int ws_store_file_complete(ws_store_file_t *pf);

/* [worker] 0 if sha256(data[0..len)) == *expect, else WS_EDIGEST. */
int ws_store_chunk_check(const void *data, size_t len,
                         const ws_hash_t *expect) WS_MUST_USE;
/* [worker] Verifies chunk j (when the manifest has chunk hashes; WS_EDIGEST
 * otherwise, nothing written), pwrites it at its offset, makes it durable and
 * then marks it done. len must be the chunk's length (WS_EUSAGE). Writing a
 * chunk already done is a no-op returning 0. */
int ws_store_chunk_write(ws_store_file_t *pf, uint32_t j, const void *data,
                         size_t len) WS_MUST_USE;
/* [any] Data fd of the partial (borrowed, -1 when complete), for serving
 * chunks already committed. Writers use ws_store_file_pwrite. */
int ws_store_file_fd(const ws_store_file_t *pf);
/* [any] A new descriptor (close-on-exec) of the partial's data, for serving
 * committed chunks while other threads write or finish the file; the caller
 * closes it. WS_ENOTFOUND once the file is complete: its blob is published
 * (serve from there). */
int ws_store_file_dup_fd(ws_store_file_t *pf) WS_MUST_USE;
/* [worker] Writes len bytes at off into the partial (all of them; EINTR
 * and short writes handled). Writers of one file take turns in user space:
 * the kernel's inode lock, contended by several threads, spins (and on a
 * VM burned more CPU than the copies). Bytes become a chunk only through
 * ws_store_chunk_commit. */
int ws_store_file_pwrite(ws_store_file_t *pf, const void *data, size_t len,
                         uint64_t off) WS_MUST_USE;
/* Makes ws_store_file_finish hash the whole file even though the manifest
 * has a chunk list (another release shares the partial with a different
 * chunk list). */
void ws_store_file_need_whole(ws_store_file_t *pf);
/* [worker] Commits chunk j, written and verified by the caller: its bit
 * survives the process dying at once, and a power loss after the next
 * checkpoint (taken here every STORE_CHECKPOINT_BYTES, on close, or by
 * ws_store_file_checkpoint). */
int ws_store_chunk_commit(ws_store_file_t *pf, uint32_t j) WS_MUST_USE;
/* [worker] Makes every committed chunk durable: fdatasync of the data, then
 * of the bitmap. */
int ws_store_file_checkpoint(ws_store_file_t *pf) WS_MUST_USE;
/* [worker] All chunks done: verifies the file (with a chunk list: its
 * chunks were verified as they were committed, and a note of the list goes
 * next to the blob; without one, or after ws_store_file_need_whole: the
 * whole-file sha256), fsyncs, chmod 0444 and renames into blobs/, then
 * drops the bitmap. On a whole-file digest mismatch
 * the partial is discarded (a fresh one is created, all chunks to fetch
 * again) and WS_EDIGEST is returned. WS_EBUSY if chunks are missing.
 * Returns 0 if already complete. */
int ws_store_file_finish(ws_store_file_t *pf) WS_MUST_USE;

/* ---- importing files a node already has ---------------------------------- */
/* [worker] Copies src_path (a regular file, never modified) into blobs/ as
 * the verified blob of f, hashing the whole file and every chunk in the
 * same pass; the blob appears only if every hash matches (WS_EDIGEST
 * otherwise, including a size mismatch). A redundant partial for the file
 * is dropped. No other handle may have this file open for fetching.
 * Returns 0 at once if a usable blob exists. */
int ws_store_file_import(ws_store_t *st, const ws_mfile_t *f,
                         uint32_t chunk_size, const char *src_path) WS_MUST_USE;
/* [worker] Imports every file of m from dir/<name> and publishes the
 * release (manifest_bytes borrowed; must hash to m->digest). On failure the
 * release is aborted (nothing published) and errbuf names the file. */
int ws_store_release_import(ws_store_t *st, const ws_manifest_t *m,
                            const char *manifest_bytes, size_t len,
                            const char *dir, char *errbuf,
                            size_t errlen) WS_MUST_USE;

/* ---- testing ------------------------------------------------------------ */

/* Process-wide hook called at every crash-relevant step with a point name:
 * "chunk-pwrite", "chunk-datasync", "chunk-bit", "finish-verified",
 * "finish-before-rename", "finish-after-rename", "finish-noted",
 * "publish-mid",
 * "publish-before-rename", "publish-after-rename", "evict-release-gone".
 * Tests _exit() there to simulate a crash. NULL disables. Set it before
 * other threads use the store. */
void ws_store_set_crash_hook(void (*hook)(const char *point));

#endif
