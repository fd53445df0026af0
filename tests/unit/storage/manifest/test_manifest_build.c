/* test_manifest_build.c - ws_manifest_build / ws_manifest_verify_dir on real
 * temporary directories: hashes checked against one-shot SHA-256 of the
 * same bytes, thread counts give identical output, tampering and unsafe
 * symlinks are caught. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "manifest.h"

#define MIB (1u << 20)

typedef struct {
  char dir[64];
  uint8_t *big; /* contents of big.bin */
  size_t big_len;
} fixture_t;

static void put(const char *dir, const char *name, const void *p, size_t n) {
  char path[256];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static void sub(const char *dir, const char *name) {
  char path[256];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  assert_int_equal(mkdir(path, 0755), 0);
}

static int setup(void **state) {
  fixture_t *fx = calloc(1, sizeof(*fx));
  uint32_t x = 0x12345678;
  assert_non_null(fx);
  snprintf(fx->dir, sizeof(fx->dir), "/tmp/ws-build-XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  fx->big_len = 3 * MIB + 12345; /* 4 chunks, the last one short */
  fx->big = malloc(fx->big_len);
  assert_non_null(fx->big);
  for (size_t i = 0; i < fx->big_len; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    fx->big[i] = (uint8_t)x;
  }
  put(fx->dir, "big.bin", fx->big, fx->big_len);
  put(fx->dir, "exact.bin", fx->big, MIB);
  put(fx->dir, "empty", "", 0);
  sub(fx->dir, "tok");
  sub(fx->dir, "tok/deep");
  put(fx->dir, "tok/deep/vocab.txt", "hello\n", 6);
  put(fx->dir, "tok/a.json", "{}", 2);
  put(fx->dir, "manifest.json", "ignored", 7);
  *state = fx;
  return 0;
}

static void rm_tree(const char *dir) {
  static const char *names[] = {
      "big.bin",    "exact.bin",     "empty", "tok/deep/vocab.txt",
      "tok/a.json", "manifest.json", "link",  "out",
      "loop",       "fifo",
  };
  char path[256];
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    unlink(path);
  }
  snprintf(path, sizeof(path), "%s/tok/deep", dir);
  rmdir(path);
  snprintf(path, sizeof(path), "%s/tok", dir);
  rmdir(path);
  rmdir(dir);
}

static int teardown(void **state) {
  fixture_t *fx = *state;
  rm_tree(fx->dir);
  free(fx->big);
  free(fx);
  return 0;
}

static ws_manifest_t *build(const fixture_t *fx, unsigned threads, int want) {
  ws_manifest_build_opts_t o = {.chunk_size = MIB,
                                .model = "m",
                                .version = "v",
                                .created_at = "2025-01-01T00:00:00Z",
                                .nthreads = threads};
  ws_manifest_t *m = NULL;
  char err[256] = "";
  int rc = ws_manifest_build(fx->dir, &o, &m, err, sizeof(err));
  if (rc != want)
    fail_msg("build: got %s (%s), want %s", ws_errname(rc), err,
             ws_errname(want));
  return m;
}

static void test_build_hashes(void **state) {
  fixture_t *fx = *state;
  ws_manifest_t *m = build(fx, 1, 0);
  static const char *order[] = {"big.bin", "empty", "exact.bin", "tok/a.json",
                                "tok/deep/vocab.txt"};
  const ws_mfile_t *big;
  ws_hash_t h;

  assert_int_equal(m->nfiles, 5);
  for (uint32_t i = 0; i < m->nfiles; i++)
    assert_string_equal(m->files[i].name, order[i]);
  big = &m->files[0];
  assert_int_equal(big->size, fx->big_len);
  assert_int_equal(big->nchunks, 4);
  assert_int_equal(ws_sha256(fx->big, fx->big_len, &h), 0);
  assert_true(ws_hash_eq(&h, &big->sha256));
  for (uint32_t j = 0; j < 4; j++) {
    size_t off = (size_t)j * MIB;
    assert_int_equal(
        ws_sha256(fx->big + off, ws_mfile_chunk_len(m, big, j), &h), 0);
    assert_true(ws_hash_eq(&h, &big->chunks[j]));
  }
  assert_int_equal(m->files[1].nchunks, 0);
  assert_int_equal(ws_sha256("", 0, &h), 0);
  assert_true(ws_hash_eq(&h, &m->files[1].sha256));
  assert_int_equal(ws_sha256(fx->big, MIB, &h), 0);
  assert_true(ws_hash_eq(&h, &m->files[2].sha256));
  assert_true(ws_hash_eq(&h, &m->files[2].chunks[0]));
  assert_int_equal(m->total_chunks, 4 + 1 + 1 + 1);
  assert_int_equal(ws_manifest_verify_dir(m, fx->dir, 2, NULL, 0), 0);
  ws_manifest_free(m);
}

static void test_threads_agree(void **state) {
  fixture_t *fx = *state;
  ws_manifest_t *m1 = build(fx, 1, 0), *m2 = build(fx, 3, 0),
                *m3 = build(fx, 8, 0), *mp = NULL;
  char *t1, *t2, *t3;
  size_t l1, l2, l3;
  ws_hash_t d;

  assert_int_equal(ws_manifest_serialize(m1, &t1, &l1), 0);
  assert_int_equal(ws_manifest_serialize(m2, &t2, &l2), 0);
  assert_int_equal(ws_manifest_serialize(m3, &t3, &l3), 0);
  assert_int_equal(l1, l2);
  assert_int_equal(l1, l3);
  assert_memory_equal(t1, t2, l1);
  assert_memory_equal(t1, t3, l1);
  /* the digest the builder reports is that of the serialized bytes */
  assert_int_equal(ws_sha256(t1, l1, &d), 0);
  assert_true(ws_hash_eq(&d, &m1->digest));
  assert_int_equal(ws_manifest_parse(t1, l1, NULL, &mp, NULL, 0), 0);
  assert_true(ws_hash_eq(&d, &mp->digest));
  assert_int_equal(ws_manifest_verify_dir(mp, fx->dir, 0, NULL, 0), 0);
  free(t1);
  free(t2);
  free(t3);
  ws_manifest_free(m1);
  ws_manifest_free(m2);
  ws_manifest_free(m3);
  ws_manifest_free(mp);
}

static void test_verify_detects(void **state) {
  fixture_t *fx = *state;
  ws_manifest_t *m = build(fx, 2, 0);
  char path[256], err[256];
  int fd;
  uint8_t b;

  snprintf(path, sizeof(path), "%s/big.bin", fx->dir);
  fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  b = fx->big[2 * MIB + 7] ^ 0x40;
  assert_int_equal(pwrite(fd, &b, 1, 2 * MIB + 7), 1);
  assert_int_equal(ws_manifest_verify_dir(m, fx->dir, 2, err, sizeof(err)),
                   WS_EDIGEST);
  assert_non_null(strstr(err, "big.bin"));
  /* restore, then truncate */
  assert_int_equal(pwrite(fd, &fx->big[2 * MIB + 7], 1, 2 * MIB + 7), 1);
  assert_int_equal(ws_manifest_verify_dir(m, fx->dir, 2, NULL, 0), 0);
  assert_int_equal(ftruncate(fd, (off_t)fx->big_len - 1), 0);
  assert_int_equal(ws_manifest_verify_dir(m, fx->dir, 2, err, sizeof(err)),
                   WS_EDIGEST);
  assert_non_null(strstr(err, "size"));
  assert_int_equal(
      pwrite(fd, &fx->big[fx->big_len - 1], 1, (off_t)fx->big_len - 1), 1);
  close(fd);
  assert_int_equal(ws_manifest_verify_dir(m, fx->dir, 2, NULL, 0), 0);

  /* a chunk hash that disagrees while the file hash matches */
  m->files[0].chunks[3].b[0] ^= 1;
  assert_int_equal(ws_manifest_verify_dir(m, fx->dir, 2, err, sizeof(err)),
                   WS_EDIGEST);
  assert_non_null(strstr(err, "chunk 3"));
  m->files[0].chunks[3].b[0] ^= 1;

  snprintf(path, sizeof(path), "%s/tok/a.json", fx->dir);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(ws_manifest_verify_dir(m, fx->dir, 2, err, sizeof(err)),
                   -ENOENT);
  put(fx->dir, "tok/a.json", "{}", 2);
  ws_manifest_free(m);
}

static void test_symlinks(void **state) {
  fixture_t *fx = *state;
  char path[256];
  ws_manifest_t *m;

  /* inside the tree, to a regular file: taken under the link's name */
  snprintf(path, sizeof(path), "%s/link", fx->dir);
  assert_int_equal(symlink("tok/a.json", path), 0);
  m = build(fx, 2, 0);
  assert_int_equal(m->nfiles, 6);
  assert_string_equal(m->files[3].name, "link");
  assert_int_equal(m->files[3].size, 2);
  ws_manifest_free(m);
  unlink(path);

  snprintf(path, sizeof(path), "%s/out", fx->dir);
  assert_int_equal(symlink("../../../../etc/passwd", path), 0);
  assert_null(build(fx, 2, WS_EPATH));
  unlink(path);
  assert_int_equal(symlink("/nonexistent-ws", path), 0);
  assert_null(build(fx, 2, WS_EPATH));
  unlink(path);

  snprintf(path, sizeof(path), "%s/loop", fx->dir);
  assert_int_equal(symlink("tok", path), 0); /* a directory: refused */
  assert_null(build(fx, 2, WS_EPATH));
  unlink(path);

  snprintf(path, sizeof(path), "%s/fifo", fx->dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_null(build(fx, 2, WS_EPATH));
  unlink(path);
}

static void test_build_errors(void **state) {
  fixture_t *fx = *state;
  ws_manifest_build_opts_t o = {.chunk_size = 3 * MIB};
  ws_manifest_limits_t lim;
  ws_manifest_t *m = NULL;
  char err[256], empty[] = "/tmp/ws-empty-XXXXXX";

  assert_int_equal(ws_manifest_build(fx->dir, &o, &m, err, sizeof(err)),
                   WS_ECHUNKSIZE);
  o.chunk_size = MIB;
  ws_manifest_limits_default(&lim);
  lim.max_files = 3;
  o.lim = &lim;
  assert_int_equal(ws_manifest_build(fx->dir, &o, &m, err, sizeof(err)),
                   WS_ELIMIT);
  lim.max_files = 100;
  lim.max_file_size = MIB;
  assert_int_equal(ws_manifest_build(fx->dir, &o, &m, err, sizeof(err)),
                   WS_ELIMIT);
  assert_non_null(strstr(err, "big.bin"));
  o.lim = NULL;
  assert_non_null(mkdtemp(empty));
  assert_int_equal(ws_manifest_build(empty, &o, &m, err, sizeof(err)),
                   WS_EMANIFEST);
  rmdir(empty);
  assert_int_equal(
      ws_manifest_build("/nonexistent-ws", &o, &m, err, sizeof(err)), -ENOENT);
  assert_null(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_build_hashes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threads_agree, setup, teardown),
      cmocka_unit_test_setup_teardown(test_verify_detects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_symlinks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_build_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
