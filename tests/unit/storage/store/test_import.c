/* test_import.c - importing a directory a node already has into the cache
 * (the store side of `p2pctl seed DIR --manifest ...`). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_fixture.h"

typedef struct {
  char *cache;
  char *src;
  uint8_t *a, *b;
  ws_manifest_t *m;
  char *bytes;
  size_t len;
} fx_t;

static void write_file(const char *dir, const char *name, const uint8_t *d,
                       size_t n) {
  char path[PATH_MAX];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(d, 1, n, f), n);
  fclose(f);
}

static int setup(void **state) {
  fx_t *x = calloc(1, sizeof(*x));
  x->cache = fx_tmpdir();
  x->src = fx_tmpdir();
  x->a = fx_pattern(3 * FX_CS + 17, 1);
  x->b = fx_pattern(1000, 2);
  fx_file_t files[] = {{"config.json", x->b, 1000},
                       {"model.safetensors", x->a, 3 * FX_CS + 17}};
  fx_manifest("m", "v1", files, 2, 0, &x->m, &x->bytes, &x->len);
  write_file(x->src, "config.json", x->b, 1000);
  write_file(x->src, "model.safetensors", x->a, 3 * FX_CS + 17);
  *state = x;
  return 0;
}

static int teardown(void **state) {
  fx_t *x = *state;
  fx_rmrf(x->cache);
  fx_rmrf(x->src);
  free(x->cache);
  free(x->src);
  free(x->a);
  free(x->b);
  free(x->bytes);
  ws_manifest_free(x->m);
  free(x);
  return 0;
}

static void test_import_publishes_verified_release(void **state) {
  fx_t *x = *state;
  ws_store_t *st;
  ws_cache_stats_t cs;
  char path[PATH_MAX], err[256];
  int nblobs = 0, nrel = 0;

  assert_int_equal(ws_store_open(x->cache, 0, &st), 0);
  assert_int_equal(ws_store_release_import(st, x->m, x->bytes, x->len, x->src,
                                           err, sizeof(err)),
                   0);
  assert_int_equal(fx_check_visible(x->cache, &nblobs, &nrel), 0);
  assert_int_equal(nblobs, 2);
  assert_int_equal(nrel, 1);
  ws_cache_stats(ws_store_cache(st), &cs);
  assert_int_equal(cs.npartials, 0); /* preallocated partials dropped */
  assert_int_equal(cs.blob_bytes, 3 * FX_CS + 17 + 1000);
  /* The source is untouched and the release reads through its symlinks. */
  snprintf(path, sizeof(path), "%s/model.safetensors", x->src);
  assert_int_equal(access(path, F_OK), 0);
  assert_int_equal(ws_store_release_path(st, &x->m->digest, path, sizeof(path)),
                   0);
  strncat(path, "/config.json", sizeof(path) - strlen(path) - 1);
  assert_int_equal(access(path, R_OK), 0);
  /* Importing again is a no-op. */
  assert_int_equal(ws_store_release_import(st, x->m, x->bytes, x->len, x->src,
                                           err, sizeof(err)),
                   0);
  ws_store_close(st);
}

static void test_import_rejects_one_flipped_byte(void **state) {
  fx_t *x = *state;
  ws_store_t *st;
  char err[256];
  int nblobs = 0, nrel = 0;

  x->a[2 * FX_CS + 5] ^= 0x20; /* third chunk differs from the manifest */
  write_file(x->src, "model.safetensors", x->a, 3 * FX_CS + 17);
  assert_int_equal(ws_store_open(x->cache, 0, &st), 0);
  assert_int_equal(ws_store_release_import(st, x->m, x->bytes, x->len, x->src,
                                           err, sizeof(err)),
                   WS_EDIGEST);
  assert_non_null(strstr(err, "model.safetensors"));
  assert_int_equal(fx_check_visible(x->cache, &nblobs, &nrel), 0);
  assert_int_equal(nrel, 0);
  assert_int_equal(nblobs, 1); /* config.json is fine and may stay */
  ws_store_close(st);
}

static void test_import_rejects_wrong_size_and_missing(void **state) {
  fx_t *x = *state;
  ws_store_t *st;
  char err[256], path[PATH_MAX];

  write_file(x->src, "model.safetensors", x->a, 3 * FX_CS); /* short */
  assert_int_equal(ws_store_open(x->cache, 0, &st), 0);
  assert_int_equal(ws_store_release_import(st, x->m, x->bytes, x->len, x->src,
                                           err, sizeof(err)),
                   WS_EDIGEST);
  snprintf(path, sizeof(path), "%s/model.safetensors", x->src);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(ws_store_release_import(st, x->m, x->bytes, x->len, x->src,
                                           err, sizeof(err)),
                   -ENOENT);
  assert_int_equal(fx_check_visible(x->cache, NULL, NULL), 0);
  ws_store_close(st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_import_publishes_verified_release,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_import_rejects_one_flipped_byte,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_import_rejects_wrong_size_and_missing, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
