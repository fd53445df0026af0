/* test_log.c - common/ws_log: one event is one line on stderr, whatever
 * the message holds (a URI or path from a request may carry CR, LF or
 * escape bytes: written as \xNN), and a message too long for the line is
 * cut with its newline kept. Main thread, no loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ws_err.h"
#include "ws_log.h"

static char g_out[4096];

/* What one WS_LOGW("%s", msg) writes to stderr (a temporary file). */
static const char *logged(const char *msg) {
  char path[] = "/tmp/ws-log-XXXXXX";
  int fd = mkstemp(path);
  int saved = dup(STDERR_FILENO);
  assert_true(fd >= 0 && saved >= 0);
  unlink(path);
  assert_true(dup2(fd, STDERR_FILENO) >= 0);
  WS_LOGW("uri %s: failed", msg);
  assert_true(dup2(saved, STDERR_FILENO) >= 0);
  close(saved);
  ssize_t n = pread(fd, g_out, sizeof(g_out) - 1, 0);
  close(fd);
  assert_true(n > 0);
  g_out[n] = '\0';
  return g_out;
}

static size_t count(const char *s, char c) {
  size_t k = 0;
  for (; *s != '\0'; s++)
    k += *s == c;
  return k;
}

static void test_plain(void **state) {
  (void)state;
  const char *out = logged("s3://bucket/m/");
  assert_non_null(strstr(out, " warn: uri s3://bucket/m/: failed\n"));
  assert_int_equal(count(out, '\n'), 1);
}

/* A request's CR LF cannot start a forged line. */
static void test_control_bytes(void **state) {
  (void)state;
  const char *out = logged("s3://b/x\r\n2026-01-01T00:00:00.000Z p2pd error: "
                           "forged\x1b[31m\x7f\t");
  assert_int_equal(count(out, '\n'), 1);
  assert_int_equal(out[strlen(out) - 1], '\n');
  assert_null(strchr(out, '\r'));
  assert_null(strchr(out, '\x1b'));
  assert_null(strchr(out, '\t'));
  assert_non_null(strstr(out, "s3://b/x\\x0d\\x0a2026-01-01T00:00:00.000Z p2pd "
                              "error: forged\\x1b[31m\\x7f\\x09: failed\n"));
}

/* Too long: cut, one line, the newline kept; escapes are not split. */
static void test_long(void **state) {
  (void)state;
  char big[3000];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  const char *out = logged(big);
  assert_int_equal(count(out, '\n'), 1);
  assert_int_equal(strlen(out), 1024);
  for (size_t i = 0; i < sizeof(big) - 1; i++)
    big[i] = i % 2 == 0 ? 'a' : '\n';
  out = logged(big);
  assert_int_equal(count(out, '\n'), 1);
  assert_true(strlen(out) <= 1024);
  assert_int_equal(out[strlen(out) - 1], '\n');
  const char *bs = strrchr(out, '\\');
  assert_non_null(bs);
  assert_memory_equal(bs, "\\x0a", 4);
  assert_true(bs + 4 <= out + strlen(out) - 1);
}

/* An error message cut by snprintf says so, and keeps whole UTF-8. */
static void test_msg_mark_cut(void **state) {
  (void)state;
  char b[8];
  /* volatile: the compiler must not see the cuts coming (it would warn) */
  const char *volatile fits = "abc", *volatile longer = "abcdefghij";
  /* the cut falls inside the two-byte e-acute */
  const char *volatile utf8 = "abc\xc3\xa9"
                              "fghij";
  ws_msg_mark_cut(b, sizeof(b), snprintf(b, sizeof(b), "%s", fits));
  assert_string_equal(b, "abc");
  ws_msg_mark_cut(b, sizeof(b), snprintf(b, sizeof(b), "%s", longer));
  assert_string_equal(b, "abcd...");
  ws_msg_mark_cut(b, sizeof(b), snprintf(b, sizeof(b), "%s", utf8));
  assert_string_equal(b, "abc...");
  ws_msg_mark_cut(b, sizeof(b), -1); /* an snprintf error: left alone */
  assert_string_equal(b, "abc...");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain),
      cmocka_unit_test(test_control_bytes),
      cmocka_unit_test(test_long),
      cmocka_unit_test(test_msg_mark_cut),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
