/* s3_creds_proc.c - the credential_process source: runs the command a
 * profile names and parses its JSON (Version 1) output.
 *
 * The command is run as the AWS CLI runs it: "/bin/sh -c <command>", with
 * the process's environment, stdin from /dev/null, in its own process group.
 * Nothing is ever substituted into the command: it is the operator's own
 * text from the config file. stdout is capped at S3_PROC_OUT_MAX and stderr
 * at S3_PROC_ERR_MAX (the rest is read and dropped); the whole run is capped
 * at timeout_ms, after which the process group is killed. A non-zero exit,
 * a signal, too much output, a timeout or malformed JSON is an error whose
 * message names the command's first word and quotes its stderr's first line.
 *
 * Thread: blocks (fork, poll, waitpid): a libuv worker or a tool before its
 * loop runs, never a loop thread.
 */
#include "s3-int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int spawn_sh(const char *cmd, int out_w, int err_w, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t none, def;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc)
    return -rc;
  if ((rc = posix_spawnattr_init(&at))) {
    posix_spawn_file_actions_destroy(&fa);
    return -rc;
  }
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGCHLD);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  rc = rc ? rc : posix_spawn_file_actions_adddup2(&fa, out_w, 1);
  rc = rc ? rc : posix_spawn_file_actions_adddup2(&fa, err_w, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
  rc = rc ? rc : posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
  rc = rc ? rc : posix_spawnattr_setpgroup(&at, 0);
  rc = rc ? rc : posix_spawnattr_setsigmask(&at, &none);
  rc = rc ? rc : posix_spawnattr_setsigdefault(&at, &def);
  rc = rc ? rc
          : posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
                                              POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF);
  char *argv[] = {"sh", "-c", (char *)cmd, NULL};
  if (rc == 0)
    rc = posix_spawn(pid, "/bin/sh", &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  return -rc;
}

/* Reads both pipes until EOF on both or the deadline. 0, WS_ETIMEOUT or
 * WS_ELIMIT (stdout over its cap). */
static int drain(int fds[2], s3_buf_t *out, s3_buf_t *err, uint64_t deadline) {
  char tmp[4096];
  int open_n = 2;
  while (open_n > 0) {
    uint64_t now = mono_ms();
    if (now >= deadline)
      return WS_ETIMEOUT;
    struct pollfd pf[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    int n = poll(pf, 2, (int)(deadline - now));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    for (int i = 0; i < 2; i++) {
      if (fds[i] < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t r = read(fds[i], tmp, sizeof(tmp));
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0) {
        close(fds[i]);
        fds[i] = -1;
        open_n--;
        continue;
      }
      if (i == 0 && s3_buf_add(out, tmp, (size_t)r))
        return WS_ELIMIT;
      if (i == 1) { /* keep the start of stderr, drop the rest */
        size_t room = err->max - err->len;
        if (s3_buf_add(err, tmp, (size_t)r < room ? (size_t)r : room))
          continue; /* out of memory: the message loses its detail */
      }
    }
  }
  return 0;
}

static void first_line(const s3_buf_t *b, char *buf, size_t len) {
  size_t n = b->p ? strcspn(b->p, "\r\n") : 0;
  if (n >= len)
    n = len - 1;
  for (size_t i = 0; i < n; i++) /* printable only: it goes into logs */
    buf[i] = (b->p[i] >= 0x20 && b->p[i] < 0x7f) ? b->p[i] : '?';
  buf[n] = '\0';
}

/* Runs cmd; on success *out holds its stdout (new, NUL-terminated). */
static int run(const char *cmd, unsigned timeout_ms, s3_buf_t *out, char *err,
               size_t errlen) {
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  s3_buf_t eb = {.max = S3_PROC_ERR_MAX};
  pid_t pid = -1;
  int rc;
  if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
    rc = -errno;
    snprintf(err, errlen, "cannot create a pipe: %s", strerror(-rc));
    goto out_close;
  }
  if ((rc = spawn_sh(cmd, po[1], pe[1], &pid))) {
    snprintf(err, errlen, "cannot run /bin/sh: %s", strerror(-rc));
    goto out_close;
  }
  close(po[1]);
  close(pe[1]);
  po[1] = pe[1] = -1;
  int fds[2] = {po[0], pe[0]};
  po[0] = pe[0] = -1;
  rc = drain(fds, out, &eb, mono_ms() + timeout_ms);
  for (int i = 0; i < 2; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  if (rc)
    kill(-pid, SIGKILL); /* the whole group: sh and what it started */
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
    ;
  char line[160];
  first_line(&eb, line, sizeof(line));
  if (rc == WS_ETIMEOUT)
    snprintf(err, errlen, "timed out after %u ms", timeout_ms);
  else if (rc == WS_ELIMIT)
    snprintf(err, errlen, "printed more than %u bytes", S3_PROC_OUT_MAX);
  else if (rc)
    snprintf(err, errlen, "reading its output: %s", strerror(-rc));
  else if (WIFSIGNALED(ws))
    rc = WS_ECREDS, snprintf(err, errlen, "killed by signal %d%s%s",
                             WTERMSIG(ws), *line ? ": " : "", line);
  else if (WEXITSTATUS(ws) != 0)
    rc = WS_ECREDS, snprintf(err, errlen, "exited with status %d%s%s",
                             WEXITSTATUS(ws), *line ? ": " : "", line);
out_close:
  for (int i = 0; i < 2; i++) {
    if (po[i] >= 0)
      close(po[i]);
    if (pe[i] >= 0)
      close(pe[i]);
  }
  s3_buf_free(&eb);
  return rc;
}

int s3_creds_parse_process(const char *text, size_t len, s3_creds_t *out) {
  static const s3_json_keys_t k = {S3_PROC_OUT_MAX, "SessionToken", 1};
  return s3_creds_parse_json_keys(text, len, &k, out);
}

int s3_creds_process(const char *cmd, unsigned timeout_ms, s3_creds_t *out,
                     char *err, size_t errlen) {
  s3_buf_t b = {.max = S3_PROC_OUT_MAX};
  char why[256] = "";
  int rc = run(cmd, timeout_ms, &b, why, sizeof(why));
  if (rc == 0) {
    rc = s3_creds_parse_process(b.p ? b.p : "", b.len, out);
    if (rc)
      snprintf(why, sizeof(why),
               "printed no valid Version 1 credentials JSON (%s)",
               ws_strerror(rc));
  }
  if (rc == 0 && out->expires_ms &&
      out->expires_ms < (int64_t)s3_now_ms() + 60 * 1000) {
    snprintf(why, sizeof(why), "returned credentials that expire within 60 s");
    s3_creds_clear(out);
    rc = WS_ECREDS;
  }
  if (rc) {
    size_t w = strcspn(cmd, " \t");
    snprintf(err, errlen, "credential_process '%.*s': %s",
             (int)(w < 128 ? w : 128), cmd, why);
  }
  if (b.p)
    memset(b.p, 0, b.len);
  s3_buf_free(&b);
  return rc ? WS_ECREDS : 0;
}
