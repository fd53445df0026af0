/* test_trust.c - what the store trusts of what it finds on its own disk
 * (docs/cache.md "Cache trust"): a blob without a note of this store is
 * hashed before use (kept when right, removed when not), a file put at a
 * blob's name while the file is fetched loses to the verified one, the
 * startup scan hashes the blobs of published releases no note vouches for,
 * resumed chunks are re-hashed unless the data file is unchanged since the
 * bits were written, and a release in use (a shared flock on its
 * manifest.json) is never evicted. Single-threaded test process. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_fixture.h"

#define SIZE (3 * FX_CS + 4321)

typedef struct {
  char *root;
  uint8_t *data[2];
  fx_file_t f[2];
  ws_manifest_t *m;
  char *bytes;
  size_t len;
  ws_store_t *st;
} fx_t;

static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->root = fx_tmpdir();
  fx->data[0] = fx_pattern(SIZE, 21);
  fx->data[1] = fx_pattern(FX_CS, 22);
  fx->f[0] = (fx_file_t){"w.bin", fx->data[0], SIZE};
  fx->f[1] = (fx_file_t){"sub/x.bin", fx->data[1], FX_CS};
  fx_manifest("trust", "v1", fx->f, 2, 0, &fx->m, &fx->bytes, &fx->len);
  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  ws_store_close(fx->st);
  fx_rmrf(fx->root);
  free(fx->root);
  free(fx->data[0]);
  free(fx->data[1]);
  ws_manifest_free(fx->m);
  free(fx->bytes);
  free(fx);
  return 0;
}

static ws_cache_stats_t stats(ws_store_t *st) {
  ws_cache_stats_t s;
  ws_cache_stats(ws_store_cache(st), &s);
  return s;
}

/* Writes data (n bytes) at blobs/sha256/<ab>/<hex of file i>, replacing
 * whatever is there (a new inode). */
static void plant(fx_t *fx, uint32_t i, const uint8_t *data, size_t n) {
  char path[PATH_MAX], tmp[PATH_MAX + 8], dir[PATH_MAX];
  int fd;
  assert_int_equal(
      ws_store_blob_path(fx->st, &fx->m->files[i].sha256, path, sizeof(path)),
      0);
  snprintf(dir, sizeof(dir), "%s", path);
  *strrchr(dir, '/') = '\0';
  mkdir(dir, 0755);
  snprintf(tmp, sizeof(tmp), "%s.plant", path);
  assert_true((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0444)) >= 0);
  assert_int_equal(write(fd, data, n), (ssize_t)n);
  close(fd);
  assert_int_equal(rename(tmp, path), 0);
}

static uint8_t *flipped(const uint8_t *data, size_t n) {
  uint8_t *bad = malloc(n);
  memcpy(bad, data, n);
  bad[n / 2] ^= 0x5a;
  return bad;
}

/* Planted while p2pd runs, before any release asks: a wrong file is
 * hashed, removed and fetched; a right one is hashed once and kept. */
static void test_unvouched_blob_hashed_before_use(void **state) {
  fx_t *fx = *state;
  uint8_t *bad = flipped(fx->data[0], SIZE);
  ws_store_file_t *pf;
  plant(fx, 0, bad, SIZE);
  plant(fx, 1, fx->data[1], FX_CS);
  assert_int_equal(ws_store_release_begin(fx->st, fx->m), 0);
  assert_int_equal(stats(fx->st).blobs_discarded, 1);
  assert_int_equal(stats(fx->st).blobs_hashed, 2);
  assert_int_equal(ws_store_has_blob(fx->st, &fx->m->files[0].sha256), 0);
  assert_int_equal(ws_store_file_open(fx->st, &fx->m->files[1], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_complete(pf), 1);
  ws_store_file_close(pf);
  /* Vouched for now: not hashed again. */
  assert_int_equal(stats(fx->st).blobs_hashed, 2);
  assert_int_equal(fx_fetch_release(fx->st, fx->m, fx->bytes, fx->len,
                                    (const uint8_t *const *)fx->data, NULL),
                   0);
  assert_int_equal(fx_check_visible(fx->root, NULL, NULL), 0);
  free(bad);
}

/* A wrong file put at the blob's name while the file is being fetched:
 * the verified file takes the name, and publish uses it. */
static void test_planted_during_fetch_loses(void **state) {
  fx_t *fx = *state;
  uint8_t *bad = flipped(fx->data[0], SIZE);
  ws_store_file_t *pf;
  assert_int_equal(ws_store_release_begin(fx->st, fx->m), 0);
  assert_int_equal(ws_store_file_open(fx->st, &fx->m->files[0], FX_CS, &pf), 0);
  for (uint32_t j = 0; j < ws_store_file_nchunks(pf); j++)
    assert_int_equal(ws_store_chunk_write(
                         pf, j, fx->data[0] + ws_store_file_chunk_offset(pf, j),
                         ws_store_file_chunk_len(pf, j)),
                     0);
  plant(fx, 0, bad, SIZE);
  assert_int_equal(ws_store_file_finish(pf), 0);
  ws_store_file_close(pf);
  assert_int_equal(ws_store_blob_verify(fx->st, &fx->m->files[0].sha256), 0);
  assert_int_equal(fx_fetch_release(fx->st, fx->m, fx->bytes, fx->len,
                                    (const uint8_t *const *)fx->data, NULL),
                   0);
  assert_int_equal(fx_check_visible(fx->root, NULL, NULL), 0);
  /* Its note made the publish take it as it is. */
  assert_int_equal(stats(fx->st).blobs_hashed, 0);
  free(bad);
}

/* A published release whose blob was replaced while the store was closed
 * is not served: the scan hashes it and removes the release. A blob whose
 * note is merely missing but whose bytes are right keeps its release. */
static void test_scan_hashes_unvouched(void **state) {
  fx_t *fx = *state;
  char note[PATH_MAX];
  uint8_t *bad = flipped(fx->data[0], SIZE);
  int nb, nr;
  assert_int_equal(fx_fetch_release(fx->st, fx->m, fx->bytes, fx->len,
                                    (const uint8_t *const *)fx->data, NULL),
                   0);
  ws_store_close(fx->st);
  fx->st = NULL;
  /* The note of file 1 goes: right bytes, nothing vouches for them. */
  ws_hash_t *h = &fx->m->files[1].sha256;
  char hex[WS_SHA256_HEX_LEN + 1];
  ws_hash_to_hex(h, hex);
  snprintf(note, sizeof(note), "%s/blobs/notes/%.2s/%s", fx->root, hex, hex);
  assert_int_equal(unlink(note), 0);
  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  assert_int_equal(stats(fx->st).blobs_hashed, 1);
  assert_int_equal(stats(fx->st).nreleases, 1);
  ws_store_close(fx->st);
  /* Now file 0 is replaced by a wrong file of the same size. */
  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  assert_int_equal(stats(fx->st).blobs_hashed, 0);
  plant(fx, 0, bad, SIZE);
  ws_store_close(fx->st);
  assert_int_not_equal(fx_check_visible(fx->root, NULL, NULL), 0);
  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  assert_int_equal(stats(fx->st).blobs_discarded, 1);
  assert_int_equal(stats(fx->st).nreleases, 0);
  assert_int_equal(fx_check_visible(fx->root, &nb, &nr), 0);
  assert_int_equal(nr, 0);
  free(bad);
}

/* A release directory is trusted only as this store made it: a link
 * pointing elsewhere removes the release at the scan, and a directory put
 * at a release's name while running is replaced at publish. */
static void test_release_dir_as_published(void **state) {
  fx_t *fx = *state;
  char dir[PATH_MAX], link[PATH_MAX + 16], evil[PATH_MAX + 16];
  int nr, fd;
  assert_int_equal(
      ws_store_release_path(fx->st, &fx->m->digest, dir, sizeof(dir)), 0);
  /* Planted while running: a directory whose w.bin is another file. */
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(evil, sizeof(evil), "%s/w.bin", dir);
  assert_true((fd = open(evil, O_WRONLY | O_CREAT, 0644)) >= 0);
  close(fd);
  assert_int_equal(fx_fetch_release(fx->st, fx->m, fx->bytes, fx->len,
                                    (const uint8_t *const *)fx->data, NULL),
                   0);
  assert_int_equal(fx_check_visible(fx->root, NULL, &nr), 0);
  assert_int_equal(nr, 1);
  ws_store_close(fx->st);
  /* While stopped, w.bin is made to point at another blob. */
  snprintf(link, sizeof(link), "%s/w.bin", dir);
  assert_int_equal(unlink(link), 0);
  assert_int_equal(symlink("../../blobs/sha256/00/x", link), 0);
  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  assert_int_equal(stats(fx->st).nreleases, 0);
  assert_int_not_equal(access(dir, F_OK), 0);
}

/* Writes chunks 0 and 2 of file 0 and closes (durable, identity recorded).
 * Returns the data file's path in path. */
static void partial_two_chunks(fx_t *fx, char *path, size_t len) {
  ws_store_file_t *pf;
  char hex[WS_SHA256_HEX_LEN + 1];
  assert_int_equal(ws_store_release_begin(fx->st, fx->m), 0);
  assert_int_equal(ws_store_file_open(fx->st, &fx->m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_chunk_write(pf, 0, fx->data[0], FX_CS), 0);
  assert_int_equal(ws_store_chunk_write(pf, 2, fx->data[0] + 2 * FX_CS, FX_CS),
                   0);
  ws_store_file_close(pf);
  ws_hash_to_hex(&fx->m->files[0].sha256, hex);
  snprintf(path, len, "%s/partial/%s.data", fx->root, hex);
}

/* Durable chunks of an unchanged data file are trusted without a hash; a
 * data file written to after the bits were recorded has every chunk
 * re-hashed, and the bad one is fetched again (also after the next close:
 * the bit is gone from the disk too). */
static void test_resume_rehashes_changed_partial(void **state) {
  fx_t *fx = *state;
  ws_store_file_t *pf;
  char path[PATH_MAX];
  uint32_t written = 0;
  int fd;
  partial_two_chunks(fx, path, sizeof(path));
  assert_int_equal(ws_store_file_open(fx->st, &fx->m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_done_count(pf), 2);
  ws_store_file_close(pf);
  assert_int_equal(stats(fx->st).chunks_rehashed, 0);

  /* Someone writes into chunk 0 in place (same inode). */
  assert_true((fd = open(path, O_WRONLY)) >= 0);
  assert_int_equal(pwrite(fd, "evil", 4, 100), 4);
  close(fd);
  for (int round = 0; round < 2; round++) {
    assert_int_equal(ws_store_file_open(fx->st, &fx->m->files[0], FX_CS, &pf),
                     0);
    assert_int_equal(ws_store_file_has_chunk(pf, 0), 0);
    assert_int_equal(ws_store_file_has_chunk(pf, 2), 1);
    ws_store_file_close(pf);
  }
  assert_int_equal(stats(fx->st).chunks_dropped, 1);
  assert_int_equal(stats(fx->st).chunks_rehashed, 2);
  assert_int_equal(fx_fetch_file(fx->st, fx->m, 0, fx->data[0], &written), 0);
  assert_int_equal(written, 3); /* chunks 0, 1 and 3 */
  assert_int_equal(ws_store_blob_verify(fx->st, &fx->m->files[0].sha256), 0);
}

/* A data file replaced by another file (new inode) with the same bytes in
 * the durable chunks but wrong elsewhere: chunks are re-hashed, the good
 * ones kept. */
static void test_resume_replaced_partial(void **state) {
  fx_t *fx = *state;
  ws_store_file_t *pf;
  char path[PATH_MAX], tmp[PATH_MAX + 8];
  uint8_t *bad = flipped(fx->data[0], SIZE);
  int fd;
  partial_two_chunks(fx, path, sizeof(path));
  memcpy(bad, fx->data[0], FX_CS); /* chunk 0 right, chunk 2 wrong */
  snprintf(tmp, sizeof(tmp), "%s.new", path);
  assert_true((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0);
  assert_int_equal(write(fd, bad, SIZE), SIZE);
  close(fd);
  bad[2 * FX_CS + 7] ^= 1;
  assert_true((fd = open(tmp, O_WRONLY)) >= 0);
  assert_int_equal(pwrite(fd, bad + 2 * FX_CS, FX_CS, 2 * FX_CS), FX_CS);
  close(fd);
  assert_int_equal(rename(tmp, path), 0);
  assert_int_equal(ws_store_file_open(fx->st, &fx->m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_file_has_chunk(pf, 0), 1);
  assert_int_equal(ws_store_file_has_chunk(pf, 2), 0);
  ws_store_file_close(pf);
  free(bad);
}

/* Publishes version v of model "trust" (one file from seed); *m new. */
static void other_release(fx_t *fx, const char *v, uint32_t seed,
                          ws_manifest_t **m) {
  uint8_t *d = fx_pattern(FX_CS, seed);
  fx_file_t f = {"w.bin", d, FX_CS};
  char *bytes;
  size_t len;
  fx_manifest("trust", v, &f, 1, 0, m, &bytes, &len);
  assert_int_equal(fx_fetch_release(fx->st, *m, bytes, len,
                                    (const uint8_t *const *)&d, NULL),
                   0);
  free(bytes);
  free(d);
}

/* In use: a shared flock on manifest.json keeps a release from eviction,
 * explicit (even forced) and automatic; once it is let go, it goes. */
static void test_in_use_never_evicted(void **state) {
  fx_t *fx = *state;
  ws_cache_t *c = ws_store_cache(fx->st);
  ws_manifest_t *m2, *m3;
  char dir[PATH_MAX], mpath[PATH_MAX + 16];
  int fd;
  assert_int_equal(fx_fetch_release(fx->st, fx->m, fx->bytes, fx->len,
                                    (const uint8_t *const *)fx->data, NULL),
                   0);
  /* v2 and v3 make v1 neither current nor previous: evictable. */
  other_release(fx, "v2", 31, &m2);
  other_release(fx, "v3", 32, &m3);
  assert_int_equal(
      ws_store_release_path(fx->st, &fx->m->digest, dir, sizeof(dir)), 0);
  snprintf(mpath, sizeof(mpath), "%s/manifest.json", dir);
  assert_true((fd = open(mpath, O_RDONLY)) >= 0);
  assert_int_equal(flock(fd, LOCK_SH), 0);
  assert_int_equal(ws_cache_evict(c, &fx->m->digest, 1), WS_EBUSY);
  ws_cache_set_capacity(c, 1);
  assert_int_equal(ws_cache_evict_for(c, 0), WS_ENOSPACE);
  assert_int_equal(stats(fx->st).evict_in_use, 1);
  assert_int_equal(access(mpath, F_OK), 0);
  assert_int_equal(fx_check_visible(fx->root, NULL, NULL), 0);
  close(fd); /* the server is gone */
  assert_int_equal(ws_cache_evict_for(c, 0), WS_ENOSPACE); /* v2, v3 kept */
  assert_int_not_equal(access(mpath, F_OK), 0);
  assert_int_equal(stats(fx->st).nreleases, 2);
  ws_manifest_free(m2);
  ws_manifest_free(m3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unvouched_blob_hashed_before_use,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_planted_during_fetch_loses, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_scan_hashes_unvouched, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_release_dir_as_published, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_resume_rehashes_changed_partial,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_resume_replaced_partial, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_in_use_never_evicted, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
