/* test_args.c - common/ws_args: Kubernetes sizes (every accepted suffix and
 * the refused look-alikes), durations, booleans, and the table parser
 * (--name V, --name=V, switches, positionals, --, help/version, unknown
 * options, environment fallback, type checks, hidden rows kept out of the
 * help text). Main thread, no loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_args.h"

static void size_ok(const char *s, uint64_t want) {
  uint64_t v = 0;
  if (ws_parse_size(s, &v) != 0)
    fail_msg("'%s' refused", s);
  if (v != want)
    fail_msg("'%s' = %llu, want %llu", s, (unsigned long long)v,
             (unsigned long long)want);
}

static void size_bad(const char *s) {
  uint64_t v = 12345;
  if (ws_parse_size(s, &v) != WS_EUSAGE)
    fail_msg("'%s' accepted as %llu", s != NULL ? s : "(null)",
             (unsigned long long)v);
  assert_int_equal(v, 12345); /* untouched on refusal */
}

static void test_size_accepted(void **state) {
  (void)state;
  size_ok("0", 0);
  size_ok("1", 1);
  size_ok("4194304", 4194304);
  size_ok("18446744073709551615", UINT64_MAX);
  size_ok("1K", 1000);
  size_ok("1k", 1000);
  size_ok("1M", 1000000);
  size_ok("800G", 800000000000ull);
  size_ok("2T", 2000000000000ull);
  size_ok("3P", 3000000000000000ull);
  size_ok("1Ki", 1024);
  size_ok("4Mi", 4ull << 20);
  size_ok("800Gi", 800ull << 30);
  size_ok("2Ti", 2ull << 40);
  size_ok("3Pi", 3ull << 50);
  size_ok("16383Pi", 16383ull << 50);
  size_ok("18446744073709551K", 18446744073709551000ull);
}

static void test_size_refused(void **state) {
  (void)state;
  static const char *const bad[] = {"",
                                    "-1",
                                    " 1",
                                    "1 ",
                                    "+1",
                                    "800GB",
                                    "800gb",
                                    "800g",
                                    "800GiB",
                                    "800Gb",
                                    "1.5G",
                                    "1.5",
                                    "1e3",
                                    "G",
                                    "Gi",
                                    "800ki",
                                    "800KiB",
                                    "800B",
                                    "800E",
                                    "800Ei",
                                    "800iG",
                                    "0x10",
                                    "800 G",
                                    "800G ",
                                    "800Gii",
                                    "16384Pi",
                                    "18446744073709552K",
                                    "18446744073709551616",
                                    "99999999999999999999999"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    size_bad(bad[i]);
  size_bad(NULL);
}

static void test_duration(void **state) {
  (void)state;
  uint64_t ms = 0;
  assert_int_equal(ws_parse_duration_ms("120", &ms), 0);
  assert_int_equal(ms, 120000);
  assert_int_equal(ws_parse_duration_ms("0.5", &ms), 0);
  assert_int_equal(ms, 500);
  assert_int_equal(ws_parse_duration_ms("250ms", &ms), 0);
  assert_int_equal(ms, 250);
  assert_int_equal(ws_parse_duration_ms("120s", &ms), 0);
  assert_int_equal(ms, 120000);
  assert_int_equal(ws_parse_duration_ms("2m", &ms), 0);
  assert_int_equal(ms, 120000);
  assert_int_equal(ws_parse_duration_ms("1h", &ms), 0);
  assert_int_equal(ms, 3600000);
  assert_int_equal(ws_parse_duration_ms("0", &ms), 0);
  assert_int_equal(ms, 0);
  static const char *const bad[] = {"",    "-1",   "s",   "1d", "1.5s",
                                    "2 m", "1sec", "abc", "1e3"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (ws_parse_duration_ms(bad[i], &ms) != WS_EUSAGE)
      fail_msg("duration '%s' accepted", bad[i]);
  }
}

static void test_bool_uint(void **state) {
  (void)state;
  uint64_t v = 0;
  assert_int_equal(ws_parse_bool("1"), 1);
  assert_int_equal(ws_parse_bool("true"), 1);
  assert_int_equal(ws_parse_bool("0"), 0);
  assert_int_equal(ws_parse_bool("no"), 0);
  assert_int_equal(ws_parse_bool("maybe"), -1);
  assert_int_equal(ws_parse_uint("16", 1, 256, &v), 0);
  assert_int_equal(v, 16);
  assert_int_equal(ws_parse_uint("0", 1, 256, &v), WS_EUSAGE);
  assert_int_equal(ws_parse_uint("257", 1, 256, &v), WS_EUSAGE);
  assert_int_equal(ws_parse_uint("16K", 1, 1u << 20, &v), WS_EUSAGE);
}

enum { A_CACHE, A_JSON, A_CAP, A_SECRET, A_TIMEOUT, A_LAST };
static const ws_arg_t k_rows[A_LAST] = {
    [A_CACHE] = {"cache", "WS_TEST_ARGS_CACHE", "DIR", WS_ARG_STR, 0,
                 "cache dir"},
    [A_JSON] = {"json", NULL, NULL, WS_ARG_BOOL, 0, "json out"},
    [A_CAP] = {"capacity", "WS_TEST_ARGS_CAP", "SIZE", WS_ARG_SIZE, 0,
               "capacity"},
    [A_SECRET] = {"test-secret", NULL, NULL, WS_ARG_BOOL, WS_ARG_HIDDEN,
                  "never shown"},
    [A_TIMEOUT] = {"timeout", NULL, "DURATION", WS_ARG_DURATION, 0, "t"},
};
static const ws_args_spec_t k_spec = {"prog", "[options] ARG", "About.",
                                      k_rows, A_LAST,          "Footer."};

/* Runs the parser on a NULL-terminated word list (argv[0] added). */
static int run(const char **vals, const char **pos, size_t *npos, ...) {
  char *argv[16] = {"prog"};
  int argc = 1;
  va_list ap;
  va_start(ap, npos);
  for (char *w; (w = va_arg(ap, char *)) != NULL && argc < 15;)
    argv[argc++] = w;
  va_end(ap);
  memset(vals, 0, sizeof(const char *) * A_LAST);
  return ws_args_parse(&k_spec, argc, argv, vals, pos, 2, npos);
}

static void test_parse(void **state) {
  (void)state;
  const char *v[A_LAST], *pos[2];
  size_t npos;
  assert_int_equal(run(v, pos, &npos, "--cache", "/c", "a", "--json",
                       "--capacity=800Gi", "b", NULL),
                   0);
  assert_string_equal(v[A_CACHE], "/c");
  assert_string_equal(v[A_JSON], "1");
  assert_string_equal(v[A_CAP], "800Gi");
  assert_int_equal(npos, 2);
  assert_string_equal(pos[0], "a");
  assert_string_equal(pos[1], "b");
  assert_int_equal(ws_args_check(&k_spec, v), 0);
  /* "--" ends the options; a third positional is refused. */
  assert_int_equal(run(v, pos, &npos, "--", "--json", NULL), 0);
  assert_null(v[A_JSON]);
  assert_string_equal(pos[0], "--json");
  assert_int_equal(run(v, pos, &npos, "a", "b", "c", NULL), WS_EUSAGE);
  assert_int_equal(run(v, pos, &npos, "--nope", NULL), WS_EUSAGE);
  assert_int_equal(run(v, pos, &npos, "-x", NULL), WS_EUSAGE);
  assert_int_equal(run(v, pos, &npos, "--cache", NULL), WS_EUSAGE);
  assert_int_equal(run(v, pos, &npos, "a", "--help", NULL), WS_ARGS_HELP);
  assert_int_equal(run(v, pos, &npos, "-h", NULL), WS_ARGS_HELP);
  assert_int_equal(run(v, pos, &npos, "--version", NULL), WS_ARGS_VERSION);
  /* Hidden rows still parse. */
  assert_int_equal(run(v, pos, &npos, "--test-secret", NULL), 0);
  assert_string_equal(v[A_SECRET], "1");
  /* Type checks name the accepted forms. */
  assert_int_equal(run(v, pos, &npos, "--capacity", "800GB", NULL), 0);
  assert_int_equal(ws_args_check(&k_spec, v), WS_EUSAGE);
  assert_int_equal(run(v, pos, &npos, "--timeout", "soon", NULL), 0);
  assert_int_equal(ws_args_check(&k_spec, v), WS_EUSAGE);
  assert_int_equal(run(v, pos, &npos, "--json=maybe", NULL), 0);
  assert_int_equal(ws_args_check(&k_spec, v), WS_EUSAGE);
}

static void test_env(void **state) {
  (void)state;
  const char *v[A_LAST], *pos[2];
  size_t npos;
  setenv("WS_TEST_ARGS_CACHE", "/from-env", 1);
  setenv("WS_TEST_ARGS_CAP", "", 1); /* empty: not set */
  assert_int_equal(run(v, pos, &npos, NULL), 0);
  ws_args_env(&k_spec, v);
  assert_string_equal(v[A_CACHE], "/from-env");
  assert_null(v[A_CAP]);
  assert_int_equal(run(v, pos, &npos, "--cache", "/flag", NULL), 0);
  ws_args_env(&k_spec, v);
  assert_string_equal(v[A_CACHE], "/flag"); /* the flag wins */
  unsetenv("WS_TEST_ARGS_CACHE");
  unsetenv("WS_TEST_ARGS_CAP");
}

static void test_usage(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  ws_args_usage(&k_spec, f);
  fclose(f);
  assert_non_null(strstr(buf, "usage: prog [options] ARG"));
  assert_non_null(strstr(buf, "--cache DIR"));
  assert_non_null(strstr(buf, "(env WS_TEST_ARGS_CACHE)"));
  assert_non_null(strstr(buf, "--capacity SIZE"));
  assert_non_null(strstr(buf, "--version"));
  assert_non_null(strstr(buf, "Footer."));
  assert_null(strstr(buf, "test-secret"));
  assert_null(strstr(buf, "never shown"));
  free(buf);
  assert_string_equal(ws_version(), WS_VERSION);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_accepted), cmocka_unit_test(test_size_refused),
      cmocka_unit_test(test_duration),      cmocka_unit_test(test_bool_uint),
      cmocka_unit_test(test_parse),         cmocka_unit_test(test_env),
      cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
