/* ws_log.c - see ws_log.h. */
#include "ws_log.h"
#include "ws_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static ws_log_level_t log_level = WS_LOG_INFO;
static const char *log_prog = "weightswarm";
static const char *const level_names[WS_LOG_LAST] = {"error", "warn", "info",
                                                     "debug"};

void ws_log_set_level(ws_log_level_t level) {
  log_level = level;
}
ws_log_level_t ws_log_get_level(void) {
  return log_level;
}
void ws_log_set_prog(const char *prog) {
  log_prog = prog;
}

int ws_log_parse_level(const char *s, ws_log_level_t *out) {
  for (int i = 0; i < WS_LOG_LAST; i++) {
    if (strcmp(s, level_names[i]) == 0) {
      *out = (ws_log_level_t)i;
      return 0;
    }
  }
  return WS_EUSAGE;
}

void ws_log(ws_log_level_t level, const char *fmt, ...) {
  char line[1024], msg[1024];
  struct timespec ts;
  struct tm tm;
  size_t n;
  int r;
  va_list ap;

  if (level > log_level || level >= WS_LOG_LAST)
    return;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
  r = snprintf(line + n, sizeof(line) - n,
               ".%03ldZ %s %s: ", ts.tv_nsec / 1000000, log_prog,
               level_names[level]);
  if (r > 0)
    n += (size_t)r;
  if (n > sizeof(line) - 1)
    n = sizeof(line) - 1;
  va_start(ap, fmt);
  r = vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  /* One event, one line: control bytes in what was formatted (a URI or
   * path from a request may hold CR/LF and forge lines) are written as
   * \xNN. Truncated to the line, the newline always kept. */
  for (const unsigned char *p = (const unsigned char *)msg; r > 0 && *p != 0;
       p++) {
    if (*p >= 0x20 && *p != 0x7f) {
      if (n >= sizeof(line) - 1)
        break;
      line[n++] = (char)*p;
    } else {
      if (sizeof(line) - 1 - n < 5) /* 4 bytes and snprintf's NUL */
        break;
      n += (size_t)snprintf(line + n, 5, "\\x%02x", *p);
    }
  }
  line[n++] = '\n';
  (void)!write(STDERR_FILENO, line, n);
}
