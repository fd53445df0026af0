/* test_job_record.c - job records (release/job_record.c) in a temp cache
 * directory: write then read back, overwrite, remove (also of a record
 * that is not there), an empty or missing directory, and a damaged record
 * that is skipped while the others are read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tunables.h"
#include "release/job_record.h"

typedef struct {
  char root[256];
} fx_t;

static int fx_setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  const char *tmp = getenv("TMPDIR");
  snprintf(fx->root, sizeof(fx->root), "%s/ws-jobrec-XXXXXX",
           tmp != NULL ? tmp : "/tmp");
  assert_non_null(mkdtemp(fx->root));
  *state = fx;
  return 0;
}

static void fx_rm_dir(const char *dir) {
  DIR *dh = opendir(dir);
  struct dirent *de;
  char path[600];
  if (dh == NULL)
    return;
  while ((de = readdir(dh)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    unlink(path);
  }
  closedir(dh);
  rmdir(dir);
}

static int fx_teardown(void **state) {
  fx_t *fx = *state;
  char jobs[512];
  snprintf(jobs, sizeof(jobs), "%s/%s", fx->root, PEER_JOBS_DIR);
  fx_rm_dir(jobs);
  fx_rm_dir(fx->root);
  free(fx);
  return 0;
}

static void digest_of(uint8_t seed, ws_hash_t *h) {
  for (size_t i = 0; i < sizeof(h->b); i++)
    h->b[i] = (uint8_t)(seed + i);
}

static void test_write_read(void **state) {
  fx_t *fx = *state;
  ws_hash_t a, b;
  peer_job_record_t *recs = NULL;
  size_t n = 0;
  digest_of(1, &a);
  digest_of(2, &b);
  assert_int_equal(peer_job_record_write(fx->root, &a, "s3://b/x/"), 0);
  assert_int_equal(peer_job_record_write(fx->root, &b, "s3://b/y/"), 0);
  assert_int_equal(peer_job_records_read(fx->root, &recs, &n), 0);
  assert_int_equal(n, 2);
  for (size_t i = 0; i < n; i++) {
    int is_a = ws_hash_eq(&recs[i].digest, &a);
    assert_true(is_a || ws_hash_eq(&recs[i].digest, &b));
    assert_string_equal(recs[i].uri, is_a ? "s3://b/x/" : "s3://b/y/");
  }
  peer_job_records_free(recs, n);
}

static void test_overwrite(void **state) {
  fx_t *fx = *state;
  ws_hash_t a;
  peer_job_record_t *recs = NULL;
  size_t n = 0;
  digest_of(3, &a);
  assert_int_equal(peer_job_record_write(fx->root, &a, "s3://b/old/"), 0);
  assert_int_equal(peer_job_record_write(fx->root, &a, "s3://b/new/"), 0);
  assert_int_equal(peer_job_records_read(fx->root, &recs, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(recs[0].uri, "s3://b/new/");
  peer_job_records_free(recs, n);
}

static void test_remove(void **state) {
  fx_t *fx = *state;
  ws_hash_t a, b;
  peer_job_record_t *recs = NULL;
  size_t n = 0;
  digest_of(4, &a);
  digest_of(5, &b);
  assert_int_equal(peer_job_record_write(fx->root, &a, "s3://b/a/"), 0);
  assert_int_equal(peer_job_record_write(fx->root, &b, "s3://b/b/"), 0);
  peer_job_record_remove(fx->root, &a);
  peer_job_record_remove(fx->root, &a); /* not there: fine */
  assert_int_equal(peer_job_records_read(fx->root, &recs, &n), 0);
  assert_int_equal(n, 1);
  assert_true(ws_hash_eq(&recs[0].digest, &b));
  peer_job_records_free(recs, n);
}

static void test_no_dir(void **state) {
  fx_t *fx = *state;
  peer_job_record_t *recs = (peer_job_record_t *)1;
  size_t n = 7;
  assert_int_equal(peer_job_records_read(fx->root, &recs, &n), 0);
  assert_null(recs);
  assert_int_equal(n, 0);
}

static void test_damaged_skipped(void **state) {
  fx_t *fx = *state;
  ws_hash_t a;
  char path[600];
  peer_job_record_t *recs = NULL;
  size_t n = 0;
  digest_of(6, &a);
  assert_int_equal(peer_job_record_write(fx->root, &a, "s3://b/ok/"), 0);
  snprintf(path, sizeof(path), "%s/%s/junk.json", fx->root, PEER_JOBS_DIR);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"uri\": 3", f);
  fclose(f);
  snprintf(path, sizeof(path), "%s/%s/ignored.tmp", fx->root, PEER_JOBS_DIR);
  f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(peer_job_records_read(fx->root, &recs, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(recs[0].uri, "s3://b/ok/");
  peer_job_records_free(recs, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_write_read, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_overwrite, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_remove, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_no_dir, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_damaged_skipped, fx_setup,
                                      fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
