/* test_cache.c - ledger and eviction rules: LRU over unpinned releases,
 * newest two per model kept, pins, shared blobs, files of a release being
 * assembled, capacity refusal, ledger rebuilt from disk, and a crash in the
 * middle of an eviction. Single-threaded test process (children forked). */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_fixture.h"

#define FSIZE 10000

typedef struct {
  uint8_t *data[2];
  fx_file_t f[2];
  ws_manifest_t *m;
  char *bytes;
  size_t len;
} rel_t;

/* A release of model with two files: one unique (seed), one given by
 * shared_seed (0 = none, one file only). */
static void rel_make(rel_t *r, const char *model, const char *version,
                     uint32_t seed, uint32_t shared_seed) {
  size_t n = shared_seed ? 2 : 1;
  memset(r, 0, sizeof(*r));
  r->data[0] = fx_pattern(FSIZE, seed);
  r->f[0] = (fx_file_t){"weights.bin", r->data[0], FSIZE};
  if (shared_seed) {
    r->data[1] = fx_pattern(FSIZE, shared_seed);
    r->f[1] = (fx_file_t){"shared/tokenizer.json", r->data[1], FSIZE};
  }
  fx_manifest(model, version, r->f, n, 0, &r->m, &r->bytes, &r->len);
}

static void rel_free(rel_t *r) {
  free(r->data[0]);
  free(r->data[1]);
  ws_manifest_free(r->m);
  free(r->bytes);
}

static void rel_put(ws_store_t *st, rel_t *r) {
  assert_int_equal(fx_fetch_release(st, r->m, r->bytes, r->len,
                                    (const uint8_t *const *)r->data, NULL),
                   0);
}

static int published(ws_store_t *st, const rel_t *r) {
  char path[PATH_MAX];
  struct stat sb;
  assert_int_equal(ws_store_release_path(st, &r->m->digest, path, sizeof(path)),
                   0);
  return lstat(path, &sb) == 0;
}

static uint64_t used(ws_store_t *st) {
  ws_cache_stats_t s;
  ws_cache_stats(ws_store_cache(st), &s);
  return s.used;
}

typedef struct {
  char *root;
  ws_store_t *st;
  rel_t r[6];
} fx_t;

/* m: v1..v4 (v1 and v3 share a file), n: v1; all published in order. */
static int setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  fx->root = fx_tmpdir();
  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  rel_make(&fx->r[0], "m", "v1", 1, 100);
  rel_make(&fx->r[1], "m", "v2", 2, 0);
  rel_make(&fx->r[2], "m", "v3", 3, 100);
  rel_make(&fx->r[3], "m", "v4", 4, 0);
  rel_make(&fx->r[4], "n", "v1", 5, 0);
  for (int i = 0; i < 5; i++)
    rel_put(fx->st, &fx->r[i]);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fx_t *fx = *state;
  ws_store_close(fx->st);
  for (int i = 0; i < 6; i++)
    if (fx->r[i].m != NULL)
      rel_free(&fx->r[i]);
  fx_rmrf(fx->root);
  free(fx->root);
  free(fx);
  return 0;
}

static void test_list_and_kept(void **state) {
  fx_t *fx = *state;
  ws_cache_release_info_t *v;
  size_t n;
  assert_int_equal(ws_cache_list(ws_store_cache(fx->st), &v, &n), 0);
  assert_int_equal(n, 5);
  /* Publish order, newest last. */
  for (size_t i = 0; i < n; i++)
    assert_true(ws_hash_eq(&v[i].digest, &fx->r[i].m->digest));
  assert_string_equal(v[0].model, "m");
  assert_string_equal(v[0].version, "v1");
  assert_int_equal(v[0].kept, 0);
  assert_int_equal(v[1].kept, 0);
  assert_int_equal(v[2].kept, 1);
  assert_int_equal(v[3].kept, 1);
  assert_int_equal(v[4].kept, 1);
  assert_int_equal(v[0].bytes, 2 * FSIZE);
  assert_int_equal(v[0].unique_bytes, FSIZE); /* shares one file with v3 */
  free(v);
}

static void test_lru_evicts_oldest_access_keeps_newest_two(void **state) {
  fx_t *fx = *state;
  ws_cache_t *c = ws_store_cache(fx->st);
  ws_cache_stats_t s;
  /* v1 was used recently, so v2 is the least recently used candidate. */
  assert_int_equal(ws_cache_touch(c, &fx->r[0].m->digest), 0);
  ws_cache_set_capacity(c, used(fx->st) - 1);
  assert_int_equal(ws_cache_evict_for(c, 0), 0);
  assert_false(published(fx->st, &fx->r[1]));
  assert_true(published(fx->st, &fx->r[0]));
  assert_int_equal(ws_store_has_blob(fx->st, &fx->r[1].m->files[0].sha256), 0);
  /* Asking for everything: only v1 more can go; v3, v4 (newest two of m)
   * and n/v1 stay, so the request fails. */
  assert_int_equal(ws_cache_evict_for(c, 1u << 30), WS_ENOSPACE);
  assert_false(published(fx->st, &fx->r[0]));
  for (int i = 2; i < 5; i++)
    assert_true(published(fx->st, &fx->r[i]));
  /* v1's unique blob is gone, the one it shares with v3 is not. */
  assert_int_equal(ws_store_has_blob(fx->st, &fx->r[0].m->files[0].sha256), 0);
  assert_int_equal(ws_store_has_blob(fx->st, &fx->r[0].m->files[1].sha256), 1);
  ws_cache_stats(c, &s);
  assert_int_equal(s.evicted_releases, 2);
  assert_int_equal(s.nblobs, 4);
  assert_int_equal(fx_check_visible(fx->root, NULL, NULL), 0);
}

static void test_pins(void **state) {
  fx_t *fx = *state;
  ws_cache_t *c = ws_store_cache(fx->st);
  assert_int_equal(ws_cache_pin(c, &fx->r[0].m->digest, 1), 0);
  assert_int_equal(ws_cache_pin(c, &fx->r[1].m->digest, 1), 0);
  ws_cache_set_capacity(c, 1);
  assert_int_equal(ws_cache_evict_for(c, 0), WS_ENOSPACE);
  for (int i = 0; i < 5; i++)
    assert_true(published(fx->st, &fx->r[i]));
  assert_int_equal(ws_cache_evict(c, &fx->r[0].m->digest, 0), WS_EBUSY);
  assert_int_equal(ws_cache_evict(c, &fx->r[0].m->digest, 1), 0);
  assert_false(published(fx->st, &fx->r[0]));
  assert_int_equal(ws_cache_evict(c, &fx->r[0].m->digest, 1), WS_ENOTFOUND);
  /* Unpinned, v2 becomes evictable. */
  assert_int_equal(ws_cache_pin(c, &fx->r[1].m->digest, 0), 0);
  assert_int_equal(ws_cache_evict_for(c, 0), WS_ENOSPACE);
  assert_false(published(fx->st, &fx->r[1]));
  /* Explicit eviction may take one of the newest two. */
  assert_int_equal(ws_cache_evict(c, &fx->r[3].m->digest, 0), 0);
  assert_int_equal(fx_check_visible(fx->root, NULL, NULL), 0);
}

static void test_assembling_files_protected(void **state) {
  fx_t *fx = *state;
  ws_cache_t *c = ws_store_cache(fx->st);
  rel_t *nr = &fx->r[5];
  uint32_t written = 0;
  ws_cache_release_info_t *v;
  size_t n;
  /* m/v5 shares v2's only file. The capacity makes begin evict v1 (the
   * LRU) and then v2, whose blob must stay because v5 needs it: v2 frees
   * only its manifest. 66 = bitmap header (64) + two bitmaps of one byte
   * for v5's new file. */
  rel_make(nr, "m", "v5", 6, 2);
  ws_cache_set_capacity(c, used(fx->st) + 66 - fx->r[0].len - fx->r[1].len);
  assert_int_equal(ws_store_release_begin(fx->st, nr->m), 0);
  assert_false(published(fx->st, &fx->r[0]));
  assert_false(published(fx->st, &fx->r[1]));
  assert_int_equal(ws_store_has_blob(fx->st, &nr->m->files[1].sha256), 1);
  assert_int_equal(ws_cache_list(c, &v, &n), 0);
  assert_int_equal(v[n - 1].assembling, 1);
  assert_int_equal(v[n - 1].kept, 0);
  free(v);
  /* Not even an explicit eviction may take a release being assembled. */
  assert_int_equal(ws_cache_evict(c, &nr->m->digest, 1), WS_EBUSY);
  for (uint32_t i = 0; i < 2; i++)
    assert_int_equal(fx_fetch_file(fx->st, nr->m, i, nr->data[i], &written), 0);
  assert_int_equal(written, 1);
  assert_int_equal(ws_store_release_publish(fx->st, nr->m, nr->bytes, nr->len),
                   0);
  /* v5 published: m's newest two are now v4, v5; v3 becomes evictable. */
  ws_cache_set_capacity(c, 1);
  assert_int_equal(ws_cache_evict_for(c, 0), WS_ENOSPACE);
  assert_false(published(fx->st, &fx->r[2]));
  assert_true(published(fx->st, &fx->r[3]));
  assert_true(published(fx->st, nr));
  assert_int_equal(fx_check_visible(fx->root, NULL, NULL), 0);
}

static void test_ledger_rebuilt_on_open(void **state) {
  fx_t *fx = *state;
  ws_cache_t *c = ws_store_cache(fx->st);
  ws_cache_stats_t before, after;
  ws_cache_release_info_t *v;
  size_t n;
  rel_t *nr = &fx->r[5];
  ws_store_file_t *pf;
  assert_int_equal(ws_cache_pin(c, &fx->r[0].m->digest, 1), 0);
  /* An interrupted download: one partial with one chunk done. */
  rel_make(nr, "m", "v9", 9, 0);
  assert_int_equal(ws_store_release_begin(fx->st, nr->m), 0);
  assert_int_equal(ws_store_file_open(fx->st, &nr->m->files[0], FX_CS, &pf), 0);
  assert_int_equal(ws_store_chunk_write(pf, 0, nr->data[0], FSIZE), 0);
  ws_store_file_close(pf);
  ws_cache_stats(c, &before);
  ws_store_close(fx->st);

  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  c = ws_store_cache(fx->st);
  ws_cache_stats(c, &after);
  assert_int_equal(after.used, before.used);
  assert_int_equal(after.nblobs, before.nblobs);
  assert_int_equal(after.npartials, 1);
  assert_int_equal(after.nreleases, 5);
  assert_int_equal(ws_cache_list(c, &v, &n), 0);
  assert_int_equal(n, 5);
  assert_int_equal(v[0].pinned, 1);
  assert_true(ws_hash_eq(&v[0].digest, &fx->r[0].m->digest));
  assert_true(ws_hash_eq(&v[4].digest, &fx->r[4].m->digest));
  free(v);
  /* The orphan partial (its release is no longer assembling) goes first. */
  ws_cache_set_capacity(c, after.used - 1);
  assert_int_equal(ws_cache_evict_for(c, 0), 0);
  ws_cache_stats(c, &after);
  assert_int_equal(after.npartials, 0);
  assert_int_equal(after.nreleases, 5);
}

static void evict_crash_hook(const char *point) {
  if (strcmp(point, "evict-release-gone") == 0)
    _exit(77);
}

static void test_crash_mid_eviction(void **state) {
  fx_t *fx = *state;
  ws_cache_stats_t s;
  int status, nr;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    ws_store_set_crash_hook(evict_crash_hook);
    _exit(ws_cache_evict(ws_store_cache(fx->st), &fx->r[1].m->digest, 0) == 0
              ? 0
              : 1);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 77);
  assert_int_equal(fx_check_visible(fx->root, NULL, &nr), 0);
  assert_int_equal(nr, 4);
  ws_store_close(fx->st);
  assert_int_equal(ws_store_open(fx->root, 0, &fx->st), 0);
  ws_cache_stats(ws_store_cache(fx->st), &s);
  assert_int_equal(s.nreleases, 4);
  /* v2's blob is now an orphan and the first thing eviction takes. */
  ws_cache_set_capacity(ws_store_cache(fx->st), s.used - 1);
  assert_int_equal(ws_cache_evict_for(ws_store_cache(fx->st), 0), 0);
  assert_int_equal(ws_store_has_blob(fx->st, &fx->r[1].m->files[0].sha256), 0);
  ws_cache_stats(ws_store_cache(fx->st), &s);
  assert_int_equal(s.nreleases, 4);
  assert_int_equal(fx_check_visible(fx->root, NULL, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_list_and_kept, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_lru_evicts_oldest_access_keeps_newest_two, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pins, setup, teardown),
      cmocka_unit_test_setup_teardown(test_assembling_files_protected, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_ledger_rebuilt_on_open, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_crash_mid_eviction, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
