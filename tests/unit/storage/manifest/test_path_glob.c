/* test_path_glob.c - the --include / --exclude matcher (path_glob.c) case
 * by case, then the selection rules ws_manifest_build applies with it
 * (exclude wins over include, an excluded directory is not entered, names
 * starting with '.' are never taken) on a real temporary directory. Each
 * case states the expected answer, so a matcher that is too loose or too
 * strict fails it. */
#include <ftw.h>
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

typedef struct {
  const char *pat, *rel;
  int is_dir, want;
} glob_case_t;

static void check(const glob_case_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int got = ws_path_glob_match(c[i].pat, c[i].rel, c[i].is_dir);
    if (got != c[i].want)
      fail_msg("'%s' vs '%s'%s: got %d, want %d", c[i].pat, c[i].rel,
               c[i].is_dir ? " (dir)" : "", got, c[i].want);
  }
}

/* No '/': the last component, at any depth. */
static void test_name_patterns(void **state) {
  static const glob_case_t c[] = {
      {"*.pth", "consolidated.pth", 0, 1},
      {"*.pth", "original/consolidated.00.pth", 0, 1},
      {"*.pth", "a/b/c/x.pth", 0, 1},
      {"*.pth", "x.pth.bak", 0, 0},
      {"*.pth", "pth", 0, 0},
      {"original", "original", 1, 1},
      {"original", "sub/original", 1, 1},
      {"original", "original/params.json", 0, 0}, /* last component only */
      {"model-0000?-of-00002.safetensors", "model-00001-of-00002.safetensors",
       0, 1},
      {"[ab].bin", "b.bin", 0, 1},
      {"[ab].bin", "c.bin", 0, 0},
  };
  (void)state;
  check(c, sizeof(c) / sizeof(c[0]));
}

/* With '/': anchored, whole path, '*' never crosses '/'. */
static void test_path_patterns(void **state) {
  static const glob_case_t c[] = {
      {"original/*.pth", "original/consolidated.00.pth", 0, 1},
      {"original/*.pth", "sub/original/consolidated.00.pth", 0, 0},
      {"original/*.pth", "original/deep/x.pth", 0, 0},
      {"/config.json", "config.json", 0, 1},
      {"/config.json", "sub/config.json", 0, 0},
      {"a/*", "a/b", 0, 1},
      {"a/*", "a/b/c", 0, 0},
      {"a/b", "a", 1, 0},
  };
  (void)state;
  check(c, sizeof(c) / sizeof(c[0]));
}

/* "**": zero or more whole components. */
static void test_double_star(void **state) {
  static const glob_case_t c[] = {
      {"**/*.pth", "x.pth", 0, 1},
      {"**/*.pth", "a/x.pth", 0, 1},
      {"**/*.pth", "a/b/c/x.pth", 0, 1},
      {"**/*.pth", "a/b/x.bin", 0, 0},
      {"original/**", "original/a/b.pth", 0, 1},
      {"original/**/x.pth", "original/x.pth", 0, 1},
      {"original/**/x.pth", "original/a/b/x.pth", 0, 1},
      {"original/**/x.pth", "other/a/x.pth", 0, 0},
      {"a/**/b/*.bin", "a/q/b/z.bin", 0, 1},
      {"a/**/b/*.bin", "a/q/c/z.bin", 0, 0},
  };
  (void)state;
  check(c, sizeof(c) / sizeof(c[0]));
}

/* A trailing '/' matches directories only; empty patterns match nothing. */
static void test_dir_only(void **state) {
  static const glob_case_t c[] = {
      {"original/", "original", 1, 1},
      {"original/", "original", 0, 0},
      {"original/", "sub/original", 1, 1},
      {"a/original/", "a/original", 1, 1},
      {"a/original/", "a/original", 0, 0},
      {"/", "x", 1, 0},
      {"", "x", 0, 0},
  };
  (void)state;
  check(c, sizeof(c) / sizeof(c[0]));
}

/* ---- selection by ws_manifest_build ---------------------------------------
 */

static char tmp_dir[64];

static void put(const char *name) {
  char path[256];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
  const char *slash = strrchr(name, '/');
  if (slash != NULL) { /* one level of directory is enough here */
    char d[256];
    snprintf(d, sizeof(d), "%s/%.*s", tmp_dir, (int)(slash - name), name);
    (void)mkdir(d, 0755);
  }
  f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fputs(name, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
}

/* The manifest's names joined by ' ', in the manifest's (sorted) order. */
static void build_names(const char *const *inc, unsigned ninc,
                        const char *const *exc, unsigned nexc, char *out,
                        size_t len) {
  ws_manifest_build_opts_t o = {0};
  ws_manifest_t *m = NULL;
  char err[256] = "";
  size_t off = 0;
  o.nthreads = 1;
  o.include = inc;
  o.ninclude = ninc;
  o.exclude = exc;
  o.nexclude = nexc;
  if (ws_manifest_build(tmp_dir, &o, &m, err, sizeof(err)) != 0)
    fail_msg("build: %s", err);
  out[0] = '\0';
  for (uint32_t i = 0; i < m->nfiles; i++)
    off += (size_t)snprintf(out + off, len - off, "%s%s", i ? " " : "",
                            m->files[i].name);
  ws_manifest_free(m);
}

static int sel_setup(void **state) {
  (void)state;
  snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/ws-glob-XXXXXX");
  assert_non_null(mkdtemp(tmp_dir));
  put("config.json");
  put("model.safetensors");
  put(".gitattributes");
  put(".cache/meta.json");
  put("original/params.json");
  put("original/consolidated.pth");
  put("sub/.hidden.bin");
  put("sub/w.safetensors");
  return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static int sel_teardown(void **state) {
  (void)state;
  return nftw(tmp_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void test_select(void **state) {
  char got[512];
  static const char *const inc_st[] = {"*.safetensors", "*.json"};
  static const char *const exc_orig[] = {"original/"};
  static const char *const exc_json[] = {"config.json"};
  static const char *const inc_hidden[] = {".gitattributes", "**/.*",
                                           "config.json"};
  (void)state;
  /* Defaults: every name starting with '.' is left out, at any depth. */
  build_names(NULL, 0, NULL, 0, got, sizeof(got));
  assert_string_equal(got, "config.json model.safetensors "
                           "original/consolidated.pth original/params.json "
                           "sub/w.safetensors");
  /* An excluded directory is not entered. */
  build_names(NULL, 0, exc_orig, 1, got, sizeof(got));
  assert_string_equal(got, "config.json model.safetensors sub/w.safetensors");
  /* Includes keep only the files matching one, at any depth. */
  build_names(inc_st, 2, exc_orig, 1, got, sizeof(got));
  assert_string_equal(got, "config.json model.safetensors sub/w.safetensors");
  /* Exclude wins over include. */
  build_names(inc_st, 2, exc_json, 1, got, sizeof(got));
  assert_string_equal(got, "model.safetensors original/params.json "
                           "sub/w.safetensors");
  /* Hidden names stay out even when an include names them. */
  build_names(inc_hidden, 3, NULL, 0, got, sizeof(got));
  assert_string_equal(got, "config.json");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_name_patterns),
      cmocka_unit_test(test_path_patterns),
      cmocka_unit_test(test_double_star),
      cmocka_unit_test(test_dir_only),
      cmocka_unit_test_setup_teardown(test_select, sel_setup, sel_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
