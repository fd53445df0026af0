/* store_file.c - one in-progress file: partial/<hex>.data (preallocated,
 * chunks pwritten at their offsets) and partial/<hex>.bits (bitmap journal:
 * 64-byte header, then two bitmaps of one bit per chunk). Worker threads;
 * several may write different chunks of one handle at once (pf->mu guards
 * the bitmap).
 *
 * Two bitmaps make a crash harmless without an fdatasync per chunk (which,
 * with the journal commit each one forces on a preallocated file, cost a
 * third of the cold-fetch throughput):
 *  - "recent": a chunk's bit is written here (no sync) as soon as it is
 *    verified. It survives the process dying (kill -9: it is in the page
 *    cache), not necessarily the machine.
 *  - "durable": at a checkpoint (every STORE_CHECKPOINT_BYTES of verified
 *    chunks, and on close) the data is fdatasync'ed, then the bits verified
 *    so far are written here, with the data file's inode and ctime as they
 *    are then, and fdatasync'ed. A durable bit never claims bytes that are
 *    not on disk.
 * On open (chunk-list mode), durable bits are trusted only when the data
 * file still has the inode and ctime recorded with them: nothing wrote to
 * it since (this process, another one, or a file put in its place). Any
 * other set bit (a recent bit without its durable one, or every bit when
 * the file changed after the record, as after kill -9 mid-fetch) is
 * trusted only once its chunk on disk hashes to the manifest's chunk hash;
 * whole-file mode trusts them: the whole-file hash at finish stands behind
 * them. So after kill -9 nothing verified is fetched again (it is
 * re-hashed), and after a power loss at most one checkpoint's worth is
 * fetched again. The file only becomes visible (blobs/) once it is
 * verified, fsynced and made read-only; the rename is the commit point, and
 * the blob's note (store_blob.c) is written right after, bound to the
 * inode this handle verified. Verified means: every chunk matched the
 * manifest's chunk list (the caller hashed each one as it arrived), or,
 * without a chunk list or when asked to, the whole file's sha256 matched.
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

struct ws_store_file_s {
  ws_store_t *st;      /* borrowed */
  const ws_mfile_t *f; /* borrowed */
  uint32_t chunk_size;
  uint32_t nchunks;
  int data_fd; /* -1 when complete */
  int bits_fd;
  pthread_mutex_t mu;  /* guards bits, durable, ndone, pending, complete */
  pthread_mutex_t wmu; /* one ws_store_file_pwrite at a time */
  pthread_mutex_t cmu; /* one checkpoint at a time (not under mu) */
  pthread_mutex_t bmu; /* one recent-bit write at a time (taken before mu) */
  uint8_t *bits;       /* nchunks bits: verified (recent or durable) */
  uint8_t *durable;    /* nchunks bits: on disk as durable */
  uint8_t *snap;       /* checkpoint's copy of bits */
  uint64_t pending;    /* verified chunk bytes not yet durable */
  uint32_t ndone;
  int dirty; /* data written since its identity was last recorded */
  /* The partial's directory entries were fsynced (first checkpoint). */
  int dir_durable;
  int complete;
  int whole;      /* hash the whole file at finish */
  ws_hash_t root; /* chunk-list root (zero in whole-file mode) */
};

static size_t bits_bytes(uint32_t nchunks) {
  return ((size_t)nchunks + 7) / 8;
}

static void le32_put(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t le32_get(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static void ledger_partial_set(ws_store_file_t *pf) {
  ws_cache_t *c = pf->st->cache;
  pthread_mutex_lock(&c->mu);
  (void)cache_set_add(&c->partials, &pf->f->sha256,
                      pf->f->size + STORE_BITS_FILE_BYTES(pf->nchunks));
  pthread_mutex_unlock(&c->mu);
}

static void le64_put(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le64_get(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* The data file's inode and ctime as the bitmap header stores them. */
static int data_ident(ws_store_file_t *pf, uint8_t out[16]) {
  struct stat sb;
  store_ident_t id;
  if (fstat(pf->data_fd, &sb) != 0)
    return -errno;
  store_ident_of(&sb, &id);
  le64_put(out, id.ino);
  le64_put(out + 8, id.ctime_ns);
  return 0;
}

/* Writes a fresh all-zero bitmap file (tmp + rename, not synced: see
 * partial_load) for the data file open as pf->data_fd. */
static int bits_create(ws_store_file_t *pf, const char *bits_path) {
  size_t n = (size_t)STORE_BITS_FILE_BYTES(pf->nchunks);
  uint8_t *buf = calloc(1, n);
  int err;
  if (buf == NULL)
    return -ENOMEM;
  memcpy(buf, STORE_BITS_MAGIC, 8);
  le32_put(buf + 8, pf->nchunks);
  le32_put(buf + 12, pf->chunk_size);
  memcpy(buf + 16, pf->root.b, sizeof(pf->root.b));
  if ((err = data_ident(pf, buf + STORE_BITS_IDENT_OFF)) == 0)
    err = store_fs_write_atomic(bits_path, buf, n, 0);
  free(buf);
  return err;
}

static int bit_get(const uint8_t *bits, uint32_t j) {
  return (bits[j / 8] >> (j % 8)) & 1;
}

/* Chunk j of the data file hashes to the manifest's chunk hash. */
static int chunk_on_disk_ok(ws_store_file_t *pf, uint32_t j) {
  ws_hash_t h;
  uint64_t off = (uint64_t)j * pf->chunk_size;
  return ws_sha256_fd(pf->data_fd, off, ws_store_file_chunk_len(pf, j), &h) ==
             0 &&
         ws_hash_eq(&h, &pf->f->chunks[j]);
}

/* Reads the bitmaps; 0 if they are valid for this file's geometry and chunk
 * list. What they claim is trusted as the top of this file says (data_fd
 * must be open); chunks that fail their hash are dropped from both bitmaps
 * on disk too, before anything records the data file's identity again. */
static int bits_load(ws_store_file_t *pf, int fd) {
  uint8_t hdr[STORE_BITS_HDR], now[16];
  struct stat sb;
  size_t nb = bits_bytes(pf->nchunks);
  uint64_t rehashed = 0, dropped = 0, drop_durable = 0;
  int err, proven;
  if (fstat(fd, &sb) != 0)
    return -errno;
  if ((uint64_t)sb.st_size != STORE_BITS_FILE_BYTES(pf->nchunks))
    return WS_ECORRUPT;
  if ((err = store_fs_pread_all(fd, hdr, sizeof(hdr), 0)) != 0)
    return err;
  if (memcmp(hdr, STORE_BITS_MAGIC, 8) != 0 ||
      le32_get(hdr + 8) != pf->nchunks ||
      le32_get(hdr + 12) != pf->chunk_size ||
      memcmp(hdr + 16, pf->root.b, sizeof(pf->root.b)) != 0)
    return WS_ECORRUPT;
  if ((err = data_ident(pf, now)) != 0)
    return err;
  proven = le64_get(hdr + STORE_BITS_IDENT_OFF) == le64_get(now) &&
           le64_get(hdr + STORE_BITS_IDENT_OFF + 8) == le64_get(now + 8);
  if ((err = store_fs_pread_all(fd, pf->durable, nb, STORE_BITS_HDR)) != 0 ||
      (err = store_fs_pread_all(fd, pf->snap, nb, STORE_BITS_HDR + nb)) != 0)
    return err;
  /* Bits past nchunks in the last byte are never set by us. */
  if (pf->nchunks % 8) {
    pf->durable[nb - 1] &= (uint8_t)((1u << (pf->nchunks % 8)) - 1);
    pf->snap[nb - 1] &= (uint8_t)((1u << (pf->nchunks % 8)) - 1);
  }
  memset(pf->bits, 0, nb);
  pf->ndone = 0;
  pf->pending = 0;
  for (uint32_t j = 0; j < pf->nchunks; j++) {
    int durable = bit_get(pf->durable, j);
    if (!durable && !bit_get(pf->snap, j))
      continue;
    if (pf->f->chunks != NULL && (!durable || !proven)) {
      rehashed++;
      if (!chunk_on_disk_ok(pf, j)) {
        /* Lost with the machine, or written by someone else: fetch it. */
        dropped++;
        if (durable) {
          pf->durable[j / 8] &= (uint8_t) ~(1u << (j % 8));
          drop_durable++;
        }
        continue;
      }
    }
    pf->bits[j / 8] |= (uint8_t)(1u << (j % 8));
    if (!durable)
      pf->pending += ws_store_file_chunk_len(pf, j);
    pf->ndone++;
  }
  /* Re-hashed chunks are proved for now: the next checkpoint records the
   * data file's identity with them. */
  pf->dirty = !proven;
  if (rehashed > 0) {
    ws_cache_t *c = pf->st->cache;
    pthread_mutex_lock(&c->mu);
    c->chunks_rehashed += rehashed;
    c->chunks_dropped += dropped;
    pthread_mutex_unlock(&c->mu);
  }
  if (drop_durable > 0) {
    char hex[WS_SHA256_HEX_LEN + 1];
    ws_hash_to_hex(&pf->f->sha256, hex);
    WS_LOGW("partial %s: %llu chunk(s) marked durable do not hash right "
            "(the data file changed); fetching them again",
            hex, (unsigned long long)drop_durable);
    if ((err = store_fs_pwrite_all(fd, pf->durable, nb, STORE_BITS_HDR)) != 0 ||
        (err = store_fs_pwrite_all(fd, pf->bits, nb, STORE_BITS_HDR + nb)) != 0)
      return err;
    return store_fs_sync(fd, 1);
  }
  return 0;
}

/* Opens the partial's data and bitmap, resuming when both are consistent and
 * starting over (every chunk to fetch) otherwise. */
static int partial_load(ws_store_file_t *pf) {
  char dpath[PATH_MAX], bpath[PATH_MAX];
  struct stat sb;
  int err, r;
  const ws_hash_t *h = &pf->f->sha256;
  if ((err = store_path_partial(pf->st->root, h, "data", dpath,
                                sizeof(dpath))) != 0 ||
      (err = store_path_partial(pf->st->root, h, "bits", bpath,
                                sizeof(bpath))) != 0)
    return err;
  pf->data_fd = open(dpath, O_RDWR | O_CLOEXEC);
  pf->bits_fd = open(bpath, O_RDWR | O_CLOEXEC);
  if (pf->data_fd >= 0 && pf->bits_fd >= 0 && fstat(pf->data_fd, &sb) == 0 &&
      (uint64_t)sb.st_size == pf->f->size && bits_load(pf, pf->bits_fd) == 0)
    return 0;

  /* Start over. The bitmap goes first so that no stale bit can ever describe
   * the new data file. */
  if (pf->bits_fd >= 0)
    close(pf->bits_fd);
  pf->bits_fd = -1;
  if (unlink(bpath) != 0 && errno != ENOENT)
    return -errno;
  memset(pf->bits, 0, bits_bytes(pf->nchunks));
  memset(pf->durable, 0, bits_bytes(pf->nchunks));
  pf->ndone = 0;
  pf->pending = 0;
  pf->dirty = 0; /* bits_create records the identity */
  if (pf->data_fd < 0)
    pf->data_fd = open(dpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (pf->data_fd < 0)
    return -errno;
  if (ftruncate(pf->data_fd, (off_t)pf->f->size) != 0)
    return -errno;
  /* Reserve the blocks now: ENOSPC here, before any download, not halfway. */
  if (pf->f->size > 0 &&
      (r = posix_fallocate(pf->data_fd, 0, (off_t)pf->f->size)) != 0)
    return -r;
  /* Nothing here is synced. An empty partial claims nothing, so losing it
   * to a power cut costs nothing: a missing, short or torn data or bitmap
   * file starts over on the next open (above), and a bitmap that survives
   * is all zero. The first checkpoint makes the data, the bits and then
   * the directory entries durable. A release's begin creates every file's
   * partial; with the four fsyncs each used to cost here, 48 nodes
   * starting one release at once on one disk began fetching 0.05-0.47 s
   * later (docs/benchmarks.md, session 40). */
  if ((err = bits_create(pf, bpath)) != 0)
    return err;
  pf->bits_fd = open(bpath, O_RDWR | O_CLOEXEC);
  return pf->bits_fd < 0 ? -errno : 0;
}

int ws_store_file_open(ws_store_t *st, const ws_mfile_t *f, uint32_t chunk_size,
                       ws_store_file_t **out) {
  ws_store_file_t *pf;
  uint64_t n;
  int err;
  if (chunk_size == 0)
    return WS_EUSAGE;
  n = (f->size + chunk_size - 1) / chunk_size;
  if (n > UINT32_MAX || (f->chunks != NULL && n != f->nchunks))
    return WS_ECHUNKCOUNT;
  pf = calloc(1, sizeof(*pf));
  if (pf == NULL)
    return -ENOMEM;
  pf->st = st;
  pf->f = f;
  pf->chunk_size = chunk_size;
  pf->nchunks = (uint32_t)n;
  pf->data_fd = pf->bits_fd = -1;
  pthread_mutex_init(&pf->mu, NULL);
  pthread_mutex_init(&pf->wmu, NULL);
  pthread_mutex_init(&pf->cmu, NULL);
  pthread_mutex_init(&pf->bmu, NULL);
  pf->bits = calloc(1, bits_bytes(pf->nchunks) + 1);
  pf->durable = calloc(1, bits_bytes(pf->nchunks) + 1);
  pf->snap = calloc(1, bits_bytes(pf->nchunks) + 1);
  if (pf->bits == NULL || pf->durable == NULL || pf->snap == NULL) {
    err = -ENOMEM;
    goto fail;
  }
  pf->whole = f->chunks == NULL;
  if ((err = store_chunk_root(f, chunk_size, &pf->root)) != 0)
    goto fail;
  if ((err = store_blob_usable(st, f, chunk_size)) < 0)
    goto fail;
  if (err == 1) {
    /* A partial reserved before the blob turned out usable (found on disk
     * while running) is not needed. */
    pthread_mutex_lock(&st->cache->mu);
    cache_partial_drop_locked(st->cache, &f->sha256);
    pthread_mutex_unlock(&st->cache->mu);
    pf->complete = 1;
    pf->ndone = pf->nchunks;
    memset(pf->bits, 0xff, bits_bytes(pf->nchunks));
    *out = pf;
    return 0;
  }
  pthread_mutex_lock(&st->open_mu);
  err = partial_load(pf);
  pthread_mutex_unlock(&st->open_mu);
  if (err != 0)
    goto fail;
  ledger_partial_set(pf);
  *out = pf;
  return 0;

fail:
  ws_store_file_close(pf);
  return err;
}

void ws_store_file_close(ws_store_file_t *pf) {
  if (pf == NULL)
    return;
  /* Best effort: what this misses, the next open re-hashes. */
  if (pf->data_fd >= 0 && pf->bits_fd >= 0 && ws_store_file_checkpoint(pf) != 0)
    pf->pending = 0;
  if (pf->data_fd >= 0)
    close(pf->data_fd);
  if (pf->bits_fd >= 0)
    close(pf->bits_fd);
  pthread_mutex_destroy(&pf->mu);
  pthread_mutex_destroy(&pf->wmu);
  pthread_mutex_destroy(&pf->cmu);
  pthread_mutex_destroy(&pf->bmu);
  free(pf->bits);
  free(pf->durable);
  free(pf->snap);
  free(pf);
}

uint32_t ws_store_file_nchunks(const ws_store_file_t *pf) {
  return pf->nchunks;
}

uint64_t ws_store_file_chunk_offset(const ws_store_file_t *pf, uint32_t j) {
  return (uint64_t)j * pf->chunk_size;
}

uint32_t ws_store_file_chunk_len(const ws_store_file_t *pf, uint32_t j) {
  uint64_t off = (uint64_t)j * pf->chunk_size;
  if (j >= pf->nchunks)
    return 0;
  return (uint32_t)(pf->f->size - off < pf->chunk_size ? pf->f->size - off
                                                       : pf->chunk_size);
}

int ws_store_file_has_chunk(ws_store_file_t *pf, uint32_t j) {
  int r;
  if (j >= pf->nchunks)
    return 0;
  pthread_mutex_lock(&pf->mu);
  r = (pf->bits[j / 8] >> (j % 8)) & 1;
  pthread_mutex_unlock(&pf->mu);
  return r;
}

uint32_t ws_store_file_done_count(ws_store_file_t *pf) {
  uint32_t n;
  pthread_mutex_lock(&pf->mu);
  n = pf->ndone;
  pthread_mutex_unlock(&pf->mu);
  return n;
}

int ws_store_file_complete(ws_store_file_t *pf) {
  int r;
  pthread_mutex_lock(&pf->mu);
  r = pf->complete;
  pthread_mutex_unlock(&pf->mu);
  return r;
}

int ws_store_file_pwrite(ws_store_file_t *pf, const void *data, size_t len,
                         uint64_t off) {
  if (pf->data_fd < 0)
    return -EBADF;
  if (off > pf->f->size || len > pf->f->size - off)
    return WS_EUSAGE;
  pthread_mutex_lock(&pf->wmu);
  pthread_mutex_lock(&pf->mu);
  pf->dirty = 1;
  pthread_mutex_unlock(&pf->mu);
  int err = store_fs_pwrite_all(pf->data_fd, data, len, off);
  pthread_mutex_unlock(&pf->wmu);
  return err;
}

void ws_store_file_need_whole(ws_store_file_t *pf) {
  pthread_mutex_lock(&pf->mu);
  pf->whole = 1;
  pthread_mutex_unlock(&pf->mu);
}

int ws_store_file_fd(const ws_store_file_t *pf) {
  return pf->data_fd;
}

int ws_store_file_dup_fd(ws_store_file_t *pf) {
  int fd;
  /* Under mu: ws_store_file_finish closes data_fd (after the blob is
   * linked) on a worker. */
  pthread_mutex_lock(&pf->mu);
  if (pf->complete || pf->data_fd < 0)
    fd = WS_ENOTFOUND;
  else if ((fd = fcntl(pf->data_fd, F_DUPFD_CLOEXEC, 0)) < 0)
    fd = -errno;
  pthread_mutex_unlock(&pf->mu);
  return fd;
}

int ws_store_chunk_check(const void *data, size_t len,
                         const ws_hash_t *expect) {
  ws_hash_t h;
  int err = ws_sha256(data, len, &h);
  if (err != 0)
    return err;
  return ws_hash_eq(&h, expect) ? 0 : WS_EDIGEST;
}

int ws_store_file_checkpoint(ws_store_file_t *pf) {
  size_t nb = bits_bytes(pf->nchunks);
  uint8_t ident[16];
  uint64_t pend;
  int err = 0, dirty;
  pthread_mutex_lock(&pf->cmu);
  pthread_mutex_lock(&pf->mu);
  pend = pf->pending;
  dirty = pf->dirty;
  /* Cleared before the identity is read: a write after this sets it
   * again, so the next checkpoint records the identity that write made. */
  pf->dirty = 0;
  memcpy(pf->snap, pf->bits, nb);
  pthread_mutex_unlock(&pf->mu);
  if ((pend == 0 && !dirty) || pf->data_fd < 0 || pf->bits_fd < 0)
    goto out;
  /* Every chunk in snap was written before its bit was set. */
  if ((err = store_fs_sync(pf->data_fd, 1)) != 0)
    goto out;
  store_crash_point("checkpoint-datasync");
  /* The identity after every durable chunk's write: a later write by
   * anyone changes the ctime, and the next open re-hashes. */
  if ((err = data_ident(pf, ident)) != 0 ||
      (err = store_fs_pwrite_all(pf->bits_fd, ident, sizeof(ident),
                                 STORE_BITS_IDENT_OFF)) != 0 ||
      (err = store_fs_pwrite_all(pf->bits_fd, pf->snap, nb, STORE_BITS_HDR)) !=
          0)
    goto out;
  if ((err = store_fs_sync(pf->bits_fd, 1)) != 0)
    goto out;
  store_crash_point("checkpoint-bits");
  /* The entries of a partial created unsynced (partial_load), once per
   * handle: until now a power cut could lose the files, and the fetch
   * started over. */
  if (!pf->dir_durable) {
    char bpath[PATH_MAX];
    if ((err = store_path_partial(pf->st->root, &pf->f->sha256, "bits", bpath,
                                  sizeof(bpath))) != 0 ||
        (err = store_fs_fsync_parent(bpath)) != 0)
      goto out;
    pf->dir_durable = 1;
  }
  pthread_mutex_lock(&pf->mu);
  memcpy(pf->durable, pf->snap, nb);
  pf->pending -= pend;
  pthread_mutex_unlock(&pf->mu);
out:
  if (err != 0) {
    pthread_mutex_lock(&pf->mu);
    pf->dirty = 1;
    pthread_mutex_unlock(&pf->mu);
  }
  pthread_mutex_unlock(&pf->cmu);
  return err;
}

int ws_store_chunk_commit(ws_store_file_t *pf, uint32_t j) {
  uint8_t byte;
  int err = 0, checkpoint;
  if (j >= pf->nchunks || ws_store_file_complete(pf))
    return j >= pf->nchunks ? WS_EUSAGE : 0;
  pthread_mutex_lock(&pf->bmu);
  pthread_mutex_lock(&pf->mu);
  if (bit_get(pf->bits, j)) {
    pthread_mutex_unlock(&pf->mu);
    pthread_mutex_unlock(&pf->bmu);
    return 0;
  }
  byte = pf->bits[j / 8] | (uint8_t)(1u << (j % 8));
  pthread_mutex_unlock(&pf->mu);
  /* The recent bit: no sync (see the top of this file). Written outside
   * mu, which the loop thread takes (ws_store_file_dup_fd and the state
   * queries); bmu keeps this read-modify-write of the byte whole, as only
   * commits change bits while the file is open. */
  err = store_fs_pwrite_all(pf->bits_fd, &byte, 1,
                            STORE_BITS_HDR + bits_bytes(pf->nchunks) + j / 8);
  pthread_mutex_lock(&pf->mu);
  if (err == 0) {
    pf->bits[j / 8] |= (uint8_t)(1u << (j % 8));
    pf->ndone++;
    pf->pending += ws_store_file_chunk_len(pf, j);
  }
  checkpoint = pf->pending >= STORE_CHECKPOINT_BYTES;
  pthread_mutex_unlock(&pf->mu);
  pthread_mutex_unlock(&pf->bmu);
  if (err != 0)
    return err;
  store_crash_point("chunk-bit");
  /* Start writing the chunk back now (no wait): otherwise a whole
   * checkpoint's worth of dirty pages (and at the end of a file, all of
   * them since the last one) waits for the fdatasync or fsync that makes
   * it durable, which then holds up that chunk's announce or the file's
   * publication. A failure here only means the later sync does the work. */
  (void)sync_file_range(pf->data_fd, (off64_t)ws_store_file_chunk_offset(pf, j),
                        (off64_t)ws_store_file_chunk_len(pf, j),
                        SYNC_FILE_RANGE_WRITE);
  return checkpoint ? ws_store_file_checkpoint(pf) : 0;
}

int ws_store_chunk_write(ws_store_file_t *pf, uint32_t j, const void *data,
                         size_t len) {
  int err;
  if (j >= pf->nchunks || len != ws_store_file_chunk_len(pf, j))
    return WS_EUSAGE;
  if (ws_store_file_has_chunk(pf, j))
    return 0;
  if (pf->f->chunks != NULL &&
      (err = ws_store_chunk_check(data, len, &pf->f->chunks[j])) != 0)
    return err;
  if ((err = ws_store_file_pwrite(pf, data, len,
                                  ws_store_file_chunk_offset(pf, j))) != 0)
    return err;
  store_crash_point("chunk-pwrite");
  return ws_store_chunk_commit(pf, j);
}

static int finish_discard(ws_store_file_t *pf) {
  int err;
  pthread_mutex_lock(&pf->mu);
  close(pf->bits_fd);
  close(pf->data_fd);
  pf->bits_fd = pf->data_fd = -1;
  /* Force the start-over path by invalidating the bitmap. */
  err = partial_load(pf);
  pthread_mutex_unlock(&pf->mu);
  return err;
}

int ws_store_file_finish(ws_store_file_t *pf) {
  char dpath[PATH_MAX], bpath[PATH_MAX], blob[PATH_MAX];
  struct stat sb;
  ws_hash_t h;
  ws_cache_t *c = pf->st->cache;
  int err;
  if (ws_store_file_complete(pf))
    return 0;
  if (ws_store_file_done_count(pf) != pf->nchunks)
    return WS_EBUSY;
  if ((err = store_path_partial(pf->st->root, &pf->f->sha256, "data", dpath,
                                sizeof(dpath))) != 0 ||
      (err = store_path_partial(pf->st->root, &pf->f->sha256, "bits", bpath,
                                sizeof(bpath))) != 0 ||
      (err = store_path_blob(pf->st->root, &pf->f->sha256, blob,
                             sizeof(blob))) != 0)
    return err;
  if (pf->whole) {
    if ((err = ws_sha256_fd(pf->data_fd, 0, pf->f->size, &h)) != 0)
      return err;
    if (!ws_hash_eq(&h, &pf->f->sha256)) {
      (void)unlink(bpath);
      err = finish_discard(pf);
      return err != 0 ? err : WS_EDIGEST;
    }
  }
  store_crash_point("finish-verified");
  if ((err = store_fs_sync(pf->data_fd, 0)) != 0)
    return err;
  if (fchmod(pf->data_fd, 0444) != 0)
    return -errno;
  if ((err = store_fs_mkdirs_parent(blob)) != 0)
    return err;
  /* A stale note (of a blob removed, or of a file put here) must not
   * vouch for what lands at the name before this file's own note. */
  store_blob_note_drop(pf->st, &pf->f->sha256);
  store_crash_point("finish-before-rename");
  /* Over whatever is at the name: only a blob no note vouches for can be
   * there (one that is vouched for makes the open complete), so it is a
   * file of unknown origin, placed while this one was fetched. The
   * verified file wins; a reader of the old one keeps its inode. */
  if (rename(dpath, blob) != 0)
    return -errno;
  store_crash_point("finish-after-rename");
  if ((err = store_fs_fsync_parent(blob)) != 0)
    return err;
  /* The note binds the inode verified here (fstat of this handle, not of
   * the name: a file renamed over it meanwhile gets no note). A crash
   * before it leaves a blob without a note: hashed before its next use. */
  if (fstat(pf->data_fd, &sb) != 0)
    return -errno;
  if ((err = store_blob_note_write(pf->st, &pf->f->sha256,
                                   pf->whole ? NULL : &pf->root, &sb)) != 0)
    return err;
  store_crash_point("finish-noted");
  (void)unlink(bpath);

  pthread_mutex_lock(&pf->mu);
  close(pf->data_fd);
  close(pf->bits_fd);
  pf->data_fd = pf->bits_fd = -1;
  pf->complete = 1;
  pthread_mutex_unlock(&pf->mu);

  pthread_mutex_lock(&c->mu);
  cache_set_remove(&c->partials, &pf->f->sha256);
  err = cache_set_add(&c->blobs, &pf->f->sha256, pf->f->size);
  pthread_mutex_unlock(&c->mu);
  return err;
}
