/* test_store.c - chunk store: write/verify/finish/publish, resume after a
 * close, whole-file mode, dedupe, capacity refusal, the streaming commit
 * path, and a simulated crash (forked child _exit()s) at every occurrence
 * of every crash point. Single-threaded test process (children forked). */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_fixture.h"

typedef struct {
  char *root;
  fx_file_t f[4];
  uint8_t *data[4];
  size_t nf;
  ws_manifest_t *m;
  char *bytes;
  size_t len;
} rel_t;

static void rel_make(rel_t *r, const char *root, int whole) {
  static const char *const names[] = {"a.safetensors", "sub/dir/b.bin",
                                      "config.json", "empty.txt"};
  static const size_t sizes[] = {3 * FX_CS + 12345, 2 * FX_CS, 777, 0};
  memset(r, 0, sizeof(*r));
  r->root = strdup(root);
  r->nf = 4;
  for (size_t i = 0; i < r->nf; i++) {
    r->data[i] = fx_pattern(sizes[i], (uint32_t)i + 1);
    r->f[i].name = names[i];
    r->f[i].data = r->data[i];
    r->f[i].size = sizes[i];
  }
  fx_manifest("org/model", "v1", r->f, r->nf, whole, &r->m, &r->bytes, &r->len);
}

static void rel_free(rel_t *r) {
  for (size_t i = 0; i < r->nf; i++)
    free(r->data[i]);
  ws_manifest_free(r->m);
  free(r->bytes);
  free(r->root);
}

static uint32_t total_chunks(const ws_manifest_t *m) {
  uint32_t t = 0;
  for (uint32_t i = 0; i < m->nfiles; i++)
    t += m->files[i].nchunks;
  return t;
}

static void test_publish_roundtrip(void **state) {
  char *root = fx_tmpdir(), path[PATH_MAX], link[PATH_MAX];
  ws_store_t *st;
  rel_t r;
  struct stat sb;
  char *back;
  size_t blen;
  int nb, nr;
  ssize_t n;
  ws_cache_stats_t cs;
  (void)state;
  rel_make(&r, root, 0);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(fx_fetch_release(st, r.m, r.bytes, r.len,
                                    (const uint8_t *const *)r.data, NULL),
                   0);
  assert_int_equal(fx_check_visible(root, &nb, &nr), 0);
  assert_int_equal(nb, 4);
  assert_int_equal(nr, 1);
  /* Blobs are read-only; release entries are relative symlinks. */
  assert_int_equal(
      ws_store_blob_path(st, &r.m->files[0].sha256, path, sizeof(path)), 0);
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0444);
  assert_int_equal(ws_store_release_path(st, &r.m->digest, path, sizeof(path)),
                   0);
  strncat(path, "/sub/dir/b.bin", sizeof(path) - strlen(path) - 1);
  n = readlink(path, link, sizeof(link) - 1);
  assert_true(n > 0);
  link[n] = '\0';
  assert_true(strncmp(link, "../../../../blobs/sha256/", 25) == 0);
  assert_int_equal(ws_store_release_lookup(st, &r.m->digest, &back, &blen), 0);
  assert_int_equal(blen, r.len);
  assert_memory_equal(back, r.bytes, blen);
  free(back);
  assert_int_equal(ws_store_blob_verify(st, &r.m->files[1].sha256), 0);
  ws_cache_stats(ws_store_cache(st), &cs);
  assert_int_equal(cs.partial_bytes, 0);
  assert_int_equal(cs.blob_bytes, r.m->total_size);
  assert_int_equal(cs.used, r.m->total_size + r.len);
  /* Publishing again is a no-op. */
  assert_int_equal(ws_store_release_publish(st, r.m, r.bytes, r.len), 0);
  /* Wrong manifest bytes are refused. */
  assert_int_equal(ws_store_release_publish(st, r.m, r.bytes, r.len - 1),
                   WS_EDIGEST);
  ws_store_close(st);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

static void test_chunk_rejects(void **state) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  ws_store_file_t *pf;
  rel_t r;
  (void)state;
  rel_make(&r, root, 0);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(ws_store_release_begin(st, r.m), 0);
  assert_int_equal(ws_store_file_open(st, &r.m->files[0], FX_CS, &pf), 0);
  /* Chunk 1's bytes offered as chunk 0: hash mismatch, nothing marked. */
  assert_int_equal(ws_store_chunk_write(pf, 0, r.data[0] + FX_CS, FX_CS),
                   WS_EDIGEST);
  assert_int_equal(ws_store_file_has_chunk(pf, 0), 0);
  assert_int_equal(ws_store_chunk_write(pf, 3, r.data[0] + 3 * FX_CS, 100),
                   WS_EUSAGE);
  assert_int_equal(ws_store_chunk_write(pf, 4, r.data[0], 1), WS_EUSAGE);
  assert_int_equal(ws_store_file_finish(pf), WS_EBUSY);
  assert_int_equal(ws_store_file_chunk_len(pf, 3), 12345);
  ws_store_file_close(pf);
  /* Not every file is a blob yet. */
  assert_int_equal(ws_store_release_publish(st, r.m, r.bytes, r.len),
                   WS_ENOTFOUND);
  ws_store_close(st);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

static void test_resume_trusts_marked_chunks(void **state) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  ws_store_file_t *pf;
  uint32_t written = 0;
  rel_t r;
  (void)state;
  rel_make(&r, root, 0);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(ws_store_release_begin(st, r.m), 0);
  assert_int_equal(ws_store_file_open(st, &r.m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_chunk_write(pf, 0, r.data[0], FX_CS), 0);
  assert_int_equal(ws_store_chunk_write(pf, 2, r.data[0] + 2 * FX_CS, FX_CS),
                   0);
  ws_store_file_close(pf);
  ws_store_close(st);

  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(ws_store_file_open(st, &r.m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_done_count(pf), 2);
  assert_int_equal(ws_store_file_has_chunk(pf, 0), 1);
  assert_int_equal(ws_store_file_has_chunk(pf, 1), 0);
  assert_int_equal(ws_store_file_has_chunk(pf, 2), 1);
  ws_store_file_close(pf);
  assert_int_equal(fx_fetch_file(st, r.m, 0, r.data[0], &written), 0);
  assert_int_equal(written, 2);
  assert_int_equal(ws_store_has_blob(st, &r.m->files[0].sha256), 1);
  ws_store_close(st);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

/* Chunks committed since the last checkpoint carry only a "recent" bit.
 * After the process dies (here: _exit with no close) they are trusted once
 * they hash right; one whose bytes did not reach the disk (a power loss,
 * simulated by overwriting it) is fetched again. Checkpointed chunks are
 * trusted as they are. */
static void test_recent_bits_rehashed(void **state) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  ws_store_file_t *pf;
  char path[4096], hex[WS_SHA256_HEX_LEN + 1];
  int status, fd;
  rel_t r;
  pid_t pid;
  (void)state;
  rel_make(&r, root, 0);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(ws_store_release_begin(st, r.m), 0);
  ws_store_close(st);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (ws_store_open(root, 0, &st) != 0 ||
        ws_store_file_open(st, &r.m->files[0], FX_CS, &pf) != 0 ||
        ws_store_chunk_write(pf, 0, r.data[0], FX_CS) != 0 ||
        ws_store_file_checkpoint(pf) != 0 ||
        ws_store_chunk_write(pf, 1, r.data[0] + FX_CS, FX_CS) != 0 ||
        ws_store_chunk_write(pf, 2, r.data[0] + 2 * FX_CS, FX_CS) != 0)
      _exit(1);
    _exit(0); /* no close, no checkpoint: chunks 1 and 2 are only recent */
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);

  /* Chunk 2's bytes "lost": zeros where the data was. */
  ws_hash_to_hex(&r.m->files[0].sha256, hex);
  snprintf(path, sizeof(path), "%s/partial/%s.data", root, hex);
  assert_true((fd = open(path, O_WRONLY)) >= 0);
  uint8_t *zero = calloc(1, FX_CS);
  assert_int_equal(pwrite(fd, zero, FX_CS, 2 * (off_t)FX_CS), FX_CS);
  close(fd);
  free(zero);

  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(ws_store_file_open(st, &r.m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_has_chunk(pf, 0), 1); /* durable */
  assert_int_equal(ws_store_file_has_chunk(pf, 1), 1); /* recent, hashes */
  assert_int_equal(ws_store_file_has_chunk(pf, 2), 0); /* recent, lost */
  assert_int_equal(ws_store_file_done_count(pf), 2);
  ws_store_file_close(pf);
  assert_int_equal(fx_fetch_release(st, r.m, r.bytes, r.len,
                                    (const uint8_t *const *)r.data, NULL),
                   0);
  ws_store_close(st);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

static void test_whole_file_mismatch_discards(void **state) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  ws_store_file_t *pf;
  uint8_t *bad;
  rel_t r;
  (void)state;
  rel_make(&r, root, 1);
  assert_true(r.m->whole_file);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(ws_store_release_begin(st, r.m), 0);
  bad = malloc(r.f[1].size);
  memcpy(bad, r.data[1], r.f[1].size);
  bad[FX_CS + 5] ^= 1; /* a lying peer's chunk 1 */
  assert_int_equal(fx_fetch_file(st, r.m, 1, bad, NULL), WS_EDIGEST);
  assert_int_equal(ws_store_has_blob(st, &r.m->files[1].sha256), 0);
  assert_int_equal(ws_store_file_open(st, &r.m->files[1], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_done_count(pf), 0);
  ws_store_file_close(pf);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  assert_int_equal(fx_fetch_release(st, r.m, r.bytes, r.len,
                                    (const uint8_t *const *)r.data, NULL),
                   0);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  free(bad);
  ws_store_close(st);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

/* A manifest whose chunk list describes Y while its sha256 names X plants Y
 * under X's name (chunks verify, no whole-file pass). A release that names
 * X honestly must not use that blob: it is hashed, found out, removed and
 * fetched again. */
static void test_planted_blob_not_trusted(void **state) {
  char *root = fx_tmpdir();
  size_t n = 3 * FX_CS;
  uint8_t *x = fx_pattern(n, 11), *y = fx_pattern(n, 12);
  fx_file_t fgood = {"w.bin", x, n}, fliar = {"w.bin", y, n};
  ws_manifest_t *good, *ysrc, *liar;
  char *gbytes, *lbytes, hx[WS_SHA256_HEX_LEN + 1], hy[WS_SHA256_HEX_LEN + 1];
  char err[128], *p;
  size_t glen, llen;
  ws_store_t *st;
  ws_store_file_t *pf;
  (void)state;
  fx_manifest("m", "good", &fgood, 1, 0, &good, &gbytes, &glen);
  fx_manifest("m", "liar", &fliar, 1, 0, &ysrc, &lbytes, &llen);
  ws_hash_to_hex(&good->files[0].sha256, hx);
  ws_hash_to_hex(&ysrc->files[0].sha256, hy);
  assert_non_null(p = strstr(lbytes, hy));
  memcpy(p, hx, WS_SHA256_HEX_LEN);
  assert_int_equal(
      ws_manifest_parse(lbytes, llen, NULL, &liar, err, sizeof(err)), 0);
  assert_int_equal(ws_store_open(root, 0, &st), 0);

  assert_int_equal(fx_fetch_file(st, liar, 0, y, NULL), 0);
  assert_int_equal(ws_store_has_blob(st, &good->files[0].sha256), 1);
  assert_int_not_equal(fx_check_visible(root, NULL, NULL), 0); /* planted */
  /* The same chunk list again: the note vouches, nothing to fetch. */
  assert_int_equal(ws_store_file_open(st, &liar->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_complete(pf), 1);
  ws_store_file_close(pf);

  /* The honest release: the planted blob is found out and removed. */
  assert_int_equal(ws_store_file_open(st, &good->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_complete(pf), 0);
  assert_int_equal(ws_store_file_done_count(pf), 0);
  ws_store_file_close(pf);
  assert_int_equal(ws_store_has_blob(st, &good->files[0].sha256), 0);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  assert_int_equal(fx_fetch_file(st, good, 0, x, NULL), 0);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  assert_int_equal(ws_store_file_open(st, &good->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_complete(pf), 1);
  ws_store_file_close(pf);
  /* And the liar's chunk list no longer matches the note: hashed whole,
   * it is X, so the liar gets X (its own sha256) and the note goes. */
  assert_int_equal(ws_store_file_open(st, &liar->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_complete(pf), 1);
  ws_store_file_close(pf);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);

  ws_store_close(st);
  fx_rmrf(root);
  ws_manifest_free(good);
  ws_manifest_free(ysrc);
  ws_manifest_free(liar);
  free(gbytes);
  free(lbytes);
  free(x);
  free(y);
  free(root);
}

static void test_streaming_commit(void **state) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  ws_store_file_t *pf;
  rel_t r;
  (void)state;
  rel_make(&r, root, 0);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(ws_store_file_open(st, &r.m->files[1], FX_CS, &pf), 0);
  for (uint32_t j = 0; j < 2; j++) {
    assert_int_equal(pwrite(ws_store_file_fd(pf), r.data[1] + j * FX_CS, FX_CS,
                            (off_t)(j * FX_CS)),
                     FX_CS);
    assert_int_equal(ws_store_chunk_commit(pf, j), 0);
  }
  /* A served chunk is read through a descriptor of its own. */
  int dfd = ws_store_file_dup_fd(pf);
  assert_true(dfd >= 0);
  assert_true(dfd != ws_store_file_fd(pf));
  char *back = malloc(FX_CS);
  assert_non_null(back);
  assert_int_equal(pread(dfd, back, FX_CS, FX_CS), FX_CS);
  assert_memory_equal(back, r.data[1] + FX_CS, FX_CS);
  assert_int_equal(ws_store_file_finish(pf), 0);
  assert_int_equal(ws_store_file_complete(pf), 1);
  assert_int_equal(ws_store_file_fd(pf), -1);
  /* Published: the blob has it now. The old descriptor still reads. */
  assert_int_equal(ws_store_file_dup_fd(pf), WS_ENOTFOUND);
  assert_int_equal(pread(dfd, back, FX_CS, 0), FX_CS);
  assert_memory_equal(back, r.data[1], FX_CS);
  free(back);
  close(dfd);
  ws_store_file_close(pf);
  assert_int_equal(ws_store_has_blob(st, &r.m->files[1].sha256), 1);
  ws_store_close(st);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

static void test_identical_files_stored_once(void **state) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  rel_t r;
  fx_file_t f2[2];
  ws_manifest_t *m2;
  char *b2;
  size_t l2;
  uint32_t written = 0;
  int nb, nr;
  const uint8_t *d2[2];
  (void)state;
  rel_make(&r, root, 0);
  /* Release 2 shares a.safetensors (renamed) and adds one new file. */
  f2[0] = r.f[0];
  f2[0].name = "model/a.safetensors";
  f2[1] = r.f[2];
  f2[1].name = "tokenizer.json";
  f2[1].data = r.data[1];
  f2[1].size = 1000;
  d2[0] = r.data[0];
  d2[1] = r.data[1];
  fx_manifest("org/model", "v2", f2, 2, 0, &m2, &b2, &l2);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(fx_fetch_release(st, r.m, r.bytes, r.len,
                                    (const uint8_t *const *)r.data, NULL),
                   0);
  assert_int_equal(fx_fetch_release(st, m2, b2, l2, d2, &written), 0);
  assert_int_equal(written, 1); /* only the new 1000-byte file */
  assert_int_equal(fx_check_visible(root, &nb, &nr), 0);
  assert_int_equal(nb, 5);
  assert_int_equal(nr, 2);
  ws_store_close(st);
  ws_manifest_free(m2);
  free(b2);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

static void test_capacity_refused_up_front(void **state) {
  char *root = fx_tmpdir(), path[PATH_MAX];
  ws_store_t *st;
  ws_cache_stats_t cs;
  ws_cache_release_info_t *list;
  size_t n;
  rel_t r;
  (void)state;
  rel_make(&r, root, 0);
  assert_int_equal(ws_store_open(root, r.m->total_size / 2, &st), 0);
  assert_int_equal(ws_store_release_begin(st, r.m), WS_ENOSPACE);
  ws_cache_stats(ws_store_cache(st), &cs);
  assert_int_equal(cs.used, 0);
  assert_int_equal(ws_cache_list(ws_store_cache(st), &list, &n), 0);
  assert_int_equal(n, 0);
  free(list);
  /* No partial was created. */
  snprintf(path, sizeof(path), "%s/partial", root);
  assert_int_equal(rmdir(path), 0); /* empty */
  ws_store_close(st);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

/* ---- syncs -------------------------------------------------------------- */

static int syncs_seen;

static void sync_hook(const char *point) {
  if (strcmp(point, "sync") == 0)
    syncs_seen++;
}

/* A release's begin creates every file's partial without one sync: an
 * empty partial claims nothing, and with the four fsyncs a file each used
 * to cost, 48 nodes beginning a release at once on one disk began fetching
 * 0.05-0.47 s after the reservation began, 0.004-0.27 s without them
 * (docs/benchmarks.md, session 40). A handle's first checkpoint
 * syncs the data, the bits and the directory; the fetch then syncs its
 * checkpoints, the blobs and the release. */
static void test_begin_syncs_nothing(void **state) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  ws_store_file_t *pf;
  rel_t r;
  (void)state;
  rel_make(&r, root, 0);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  syncs_seen = 0;
  ws_store_set_crash_hook(sync_hook);
  assert_int_equal(ws_store_release_begin(st, r.m), 0);
  assert_int_equal(syncs_seen, 0);
  assert_int_equal(ws_store_file_open(st, &r.m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_chunk_write(pf, 1, r.data[0] + FX_CS, FX_CS), 0);
  ws_store_file_close(pf);      /* checkpoints */
  assert_true(syncs_seen >= 3); /* data, bits, then the directory */
  int before = syncs_seen;
  assert_int_equal(fx_fetch_release(st, r.m, r.bytes, r.len,
                                    (const uint8_t *const *)r.data, NULL),
                   0);
  assert_true(syncs_seen > before);
  ws_store_set_crash_hook(NULL);
  ws_store_close(st);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

/* ---- crash injection ---------------------------------------------------- */

static const char *crash_point;
static int crash_at, crash_seen, crash_bits, crash_pipe = -1;

static void crash_hook(const char *point) {
  if (strcmp(point, "chunk-bit") == 0)
    crash_bits++;
  if (strcmp(point, crash_point) != 0 || ++crash_seen != crash_at)
    return;
  if (write(crash_pipe, &crash_bits, sizeof(crash_bits)) < 0)
    _exit(2);
  _exit(77);
}

static void crash_once(const char *point, int at) {
  char *root = fx_tmpdir();
  ws_store_t *st;
  int fds[2], status, bits = -1, nb, nr;
  uint32_t written = 0;
  rel_t r;
  pid_t pid;
  rel_make(&r, root, 0);
  assert_int_equal(pipe(fds), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    crash_point = point;
    crash_at = at;
    crash_pipe = fds[1];
    ws_store_set_crash_hook(crash_hook);
    if (ws_store_open(root, 0, &st) != 0 ||
        fx_fetch_release(st, r.m, r.bytes, r.len,
                         (const uint8_t *const *)r.data, NULL) != 0)
      _exit(1);
    _exit(0);
  }
  close(fds[1]);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) != 77)
    fail_msg("%s#%d: child exited %d, no crash", point, at,
             WEXITSTATUS(status));
  assert_int_equal(read(fds[0], &bits, sizeof(bits)), sizeof(bits));
  close(fds[0]);

  /* Nothing visible may differ from the manifest, before or after the
   * restart scan. */
  if (fx_check_visible(root, NULL, NULL) != 0)
    fail_msg("%s#%d: bad visible file after crash", point, at);
  assert_int_equal(ws_store_open(root, 0, &st), 0);
  assert_int_equal(fx_check_visible(root, NULL, NULL), 0);
  assert_int_equal(fx_fetch_release(st, r.m, r.bytes, r.len,
                                    (const uint8_t *const *)r.data, &written),
                   0);
  /* Resume refetches exactly the chunks without a durable bit: at most the
   * one in flight, never a committed one. */
  if (written != total_chunks(r.m) - (uint32_t)bits)
    fail_msg("%s#%d: resume wrote %u chunks, %d were committed of %u", point,
             at, written, bits, total_chunks(r.m));
  assert_int_equal(fx_check_visible(root, &nb, &nr), 0);
  assert_int_equal(nb, 4);
  assert_int_equal(nr, 1);
  ws_store_close(st);
  fx_rmrf(root);
  rel_free(&r);
  free(root);
}

static void test_crash_every_step(void **state) {
  static const struct {
    const char *point;
    int count;
  } pts[] = {
      {"chunk-pwrite", 7},         {"chunk-bit", 7},
      {"finish-verified", 4},      {"finish-before-rename", 4},
      {"finish-after-rename", 4},  {"finish-noted", 4},
      {"publish-mid", 1},          {"publish-before-rename", 1},
      {"publish-after-rename", 1},
  };
  (void)state;
  for (size_t i = 0; i < sizeof(pts) / sizeof(pts[0]); i++)
    for (int at = 1; at <= pts[i].count; at++)
      crash_once(pts[i].point, at);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_publish_roundtrip),
      cmocka_unit_test(test_chunk_rejects),
      cmocka_unit_test(test_resume_trusts_marked_chunks),
      cmocka_unit_test(test_recent_bits_rehashed),
      cmocka_unit_test(test_whole_file_mismatch_discards),
      cmocka_unit_test(test_planted_blob_not_trusted),
      cmocka_unit_test(test_streaming_commit),
      cmocka_unit_test(test_identical_files_stored_once),
      cmocka_unit_test(test_capacity_refused_up_front),
      cmocka_unit_test(test_begin_syncs_nothing),
      cmocka_unit_test(test_crash_every_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
