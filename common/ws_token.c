/* ws_token.c - reads and checks an API token file (ws_token.h). Main
 * thread, start-up only (blocking read).
 */
#include "ws_token.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

int ws_token_load(const char *path, char *out, size_t cap, const char **why) {
  /* One byte more than the longest valid file, to tell "too long". */
  char buf[WS_TOKEN_MAX + 3];
  size_t len = 0;
  int rc = 0, fd;

  *why = NULL;
  if (cap < WS_TOKEN_MAX + 1)
    return WS_EUSAGE;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  while (len < sizeof(buf)) {
    ssize_t n = read(fd, buf + len, sizeof(buf) - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      rc = -errno;
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  if (rc == 0 && len > 0 && buf[len - 1] == '\n')
    len--;
  if (rc == 0 && len > 0 && buf[len - 1] == '\r')
    len--;
  if (rc == 0 && len < WS_TOKEN_MIN) {
    *why = "token shorter than 16 bytes";
    rc = WS_EKEY;
  } else if (rc == 0 && len > WS_TOKEN_MAX) {
    *why = "token longer than 256 bytes";
    rc = WS_EKEY;
  }
  for (size_t i = 0; rc == 0 && i < len; i++) {
    if (buf[i] < 0x21 || buf[i] > 0x7e) {
      *why = "token has spaces, control or non-ASCII bytes (one line of "
             "visible ASCII expected)";
      rc = WS_EKEY;
    }
  }
  if (rc == 0) {
    memcpy(out, buf, len);
    out[len] = '\0';
  }
  sodium_memzero(buf, sizeof(buf));
  return rc;
}
