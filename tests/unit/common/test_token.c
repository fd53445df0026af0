/* test_token.c - common/ws_token: what an API token file may hold (one line
 * of 16..256 visible ASCII bytes, one trailing newline or CRLF dropped) and
 * the reasons given for what it may not. Main thread, no loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ws_token.h"

static char g_path[64];

/* Writes len bytes of content to a fresh file and loads it. */
static int load(const char *content, size_t len, char *out, const char **why) {
  FILE *f;
  snprintf(g_path, sizeof(g_path), "/tmp/ws-token-XXXXXX");
  int fd = mkstemp(g_path);
  assert_true(fd >= 0);
  f = fdopen(fd, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(content, 1, len, f), len);
  fclose(f);
  int rc = ws_token_load(g_path, out, WS_TOKEN_MAX + 1, why);
  unlink(g_path);
  return rc;
}

static int load_str(const char *content, char *out, const char **why) {
  return load(content, strlen(content), out, why);
}

static void test_good(void **state) {
  char out[WS_TOKEN_MAX + 1], big[WS_TOKEN_MAX + 2];
  const char *why = NULL;
  (void)state;
  assert_int_equal(load_str("0123456789abcdef\n", out, &why), 0);
  assert_string_equal(out, "0123456789abcdef");
  assert_int_equal(load_str("0123456789abcdef\r\n", out, &why), 0);
  assert_string_equal(out, "0123456789abcdef");
  assert_int_equal(load_str("A-._~+/=!0123456789", out, &why), 0);
  assert_string_equal(out, "A-._~+/=!0123456789");
  memset(big, 'x', WS_TOKEN_MAX);
  big[WS_TOKEN_MAX] = '\n';
  big[WS_TOKEN_MAX + 1] = '\0';
  assert_int_equal(load_str(big, out, &why), 0);
  assert_int_equal(strlen(out), WS_TOKEN_MAX);
}

static void test_bad(void **state) {
  char out[WS_TOKEN_MAX + 1], big[WS_TOKEN_MAX + 2];
  const char *why = NULL;
  (void)state;
  assert_int_equal(load_str("0123456789abcde\n", out, &why), WS_EKEY);
  assert_non_null(strstr(why, "shorter"));
  assert_int_equal(load_str("", out, &why), WS_EKEY);
  memset(big, 'x', WS_TOKEN_MAX + 1);
  big[WS_TOKEN_MAX + 1] = '\0';
  assert_int_equal(load_str(big, out, &why), WS_EKEY);
  assert_non_null(strstr(why, "longer"));
  assert_int_equal(load_str("0123456789 abcdef\n", out, &why), WS_EKEY);
  assert_non_null(strstr(why, "spaces"));
  /* Only one newline is dropped: a second line is not a token. */
  assert_int_equal(load_str("0123456789abcdef\n\n", out, &why), WS_EKEY);
  assert_int_equal(load_str("0123456789abcdef\nsecond-line-here", out, &why),
                   WS_EKEY);
  assert_int_equal(load("0123456789ab\0cdef", 17, out, &why), WS_EKEY);
  assert_int_equal(load_str("0123456789abcdef\xc3\xa9", out, &why), WS_EKEY);
  why = NULL;
  assert_int_equal(
      ws_token_load("/nonexistent/ws-token", out, sizeof(out), &why), -ENOENT);
  assert_null(why);
  assert_int_equal(ws_token_load("/nonexistent/ws-token", out, 8, &why),
                   WS_EUSAGE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good),
      cmocka_unit_test(test_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
