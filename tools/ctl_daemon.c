/* ctl_daemon.c - p2pctl subcommands that talk to the local p2pd over its
 * unix-socket API (ctl_http.h):
 *
 *   prefetch URI|DIGEST [--digest D] [--wait] [--timeout S] [--json]
 *   wait DIGEST|s3://B/P/MODEL/:TAG [--timeout S] [--json]
 *        [--hold NAME [--hold-ttl D]]
 *                                          exit 0 only once it is ready
 *   status [DIGEST] [--json]
 *   ls [--json]
 *   pin DIGEST | unpin DIGEST | evict DIGEST
 *   verify DIGEST [--json]                 re-hash the cached files
 *   seed DIGEST | DIR --manifest FILE|URI   serve a release this node has
 *
 * Progress goes to stderr: a redrawn bar when stderr is a terminal, a plain
 * line every few seconds otherwise (logs of init containers). Exit codes:
 * tools/ctl.h. Single-threaded, blocking (no loop).
 */
#include "ctl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl_http.h"
#include "digest.h"
#include "ws_args.h"
#include "ws_err.h"

#define CTL_API "/api/v1"
#define CTL_REQ_TIMEOUT_MS 30000L
/* Each wait round trip; progress is redrawn between rounds. */
#define CTL_POLL_MS 1000L
/* Plain progress lines when stderr is not a terminal. */
#define CTL_PLAIN_EVERY_MS 5000L
#define CTL_RETRY_CONNECT_MS 1000L
/* --retry-for default: long enough for p2pd to start on a node that just
 * joined (image pull, cache scan), short enough that a node without p2pd
 * fails visibly. Backoff between attempts doubles up to the cap. */
#define CTL_RETRY_FOR_DEFAULT_MS 120000u
#define CTL_RETRY_FIRST_MS 250L
#define CTL_RETRY_MAX_MS 2000L

typedef struct {
  const char *pos;
  int has_pos;
  const char *digest;
  const char *manifest; /* seed: path or s3:// URI */
  int wait;
  int json;
  double timeout_s;      /* < 0: none */
  uint64_t retry_for_ms; /* keep retrying while p2pd is unreachable */
  const char *hold;      /* wait --hold NAME (ctl_hold.c) */
  uint64_t hold_ttl_ms;
} dargs_t;

/* The options of the daemon commands; each command takes a subset. */
static const ws_arg_t o_digest = {
    "digest",   NULL, "sha256-HEX",
    WS_ARG_STR, 0,    "the release's expected digest (checked)"};
static const ws_arg_t o_wait = {
    "wait",      NULL, NULL,
    WS_ARG_BOOL, 0,    "wait until the release is ready (progress on stderr)"};
static const ws_arg_t o_timeout = {
    "timeout",  NULL,
    "DURATION", WS_ARG_DURATION,
    0,          "give up waiting after this long, exit 5 (default: no limit)"};
static const ws_arg_t o_retry = {
    "retry-for",
    "P2PCTL_RETRY_FOR",
    "DURATION",
    WS_ARG_DURATION,
    0,
    "retry while p2pd is not reachable yet (socket missing or refusing), "
    "with backoff, for this long (default 120s; 0 = fail at once)"};
static const ws_arg_t o_json = {"json",      NULL, NULL,
                                WS_ARG_BOOL, 0,    "print the reply as JSON"};
static const ws_arg_t o_hold = {
    "hold", NULL,
    "NAME", WS_ARG_STR,
    0,      "once ready, take the named hold (never evicted while held)"};
static const ws_arg_t o_hold_ttl = {
    "hold-ttl",      NULL, "DURATION",
    WS_ARG_DURATION, 0,    "the hold lapses unless renewed (default: never)"};
static const ws_arg_t o_manifest = {
    "manifest", NULL, "FILE|s3://BUCKET/P/",
    WS_ARG_STR, 0,    "manifest of DIR (seed a local copy)"};

/* Parses a daemon command's options (rows) into *a. Returns 0, or -1 with
 * *ex the exit code (0 after --help, CTL_EXIT_USAGE on a bad line). */
static int dargs_parse(const char *prog, const char *synopsis,
                       const char *about, const ws_arg_t *rows, size_t nrows,
                       int argc, char **argv, dargs_t *a, int *ex) {
  const char *v[8] = {0};
  ws_args_spec_t spec = {prog, synopsis, about, rows, nrows, NULL};
  size_t npos = 0;
  memset(a, 0, sizeof(*a));
  a->timeout_s = -1;
  a->retry_for_ms = CTL_RETRY_FOR_DEFAULT_MS;
  int rc = ws_args_parse(&spec, argc, argv, v, &a->pos, 1, &npos);
  if (rc == WS_ARGS_HELP || rc == WS_ARGS_VERSION) {
    if (rc == WS_ARGS_HELP)
      ws_args_usage(&spec, stdout);
    else
      ws_args_print_version("p2pctl");
    *ex = CTL_EXIT_OK;
    return -1;
  }
  *ex = CTL_EXIT_USAGE;
  if (rc != 0)
    return -1;
  ws_args_env(&spec, v);
  if (ws_args_check(&spec, v) != 0)
    return -1;
  a->has_pos = npos == 1;
  for (size_t i = 0; i < nrows; i++) {
    const char *n = rows[i].name;
    uint64_t ms = 0;
    if (v[i] == NULL)
      continue;
    if (strcmp(n, "digest") == 0)
      a->digest = v[i];
    else if (strcmp(n, "manifest") == 0)
      a->manifest = v[i];
    else if (strcmp(n, "wait") == 0)
      a->wait = ws_parse_bool(v[i]) == 1;
    else if (strcmp(n, "hold") == 0)
      a->hold = v[i];
    else if (strcmp(n, "hold-ttl") == 0 && ws_parse_duration_ms(v[i], &ms) == 0)
      a->hold_ttl_ms = ms;
    else if (strcmp(n, "json") == 0)
      a->json = ws_parse_bool(v[i]) == 1;
    else if (strcmp(n, "timeout") == 0 && ws_parse_duration_ms(v[i], &ms) == 0)
      a->timeout_s = (double)ms / 1000.0;
    else if (strcmp(n, "retry-for") == 0 &&
             ws_parse_duration_ms(v[i], &ms) == 0)
      a->retry_for_ms = ms;
  }
  return 0;
}

/* A usage error after parsing: the usage line on stderr, exit 2. */
static int ctl_usage(const char *cmd, const char *text) {
  fprintf(stderr, "usage: p2pctl %s %s (see p2pctl %s --help)\n", cmd, text,
          cmd);
  return CTL_EXIT_USAGE;
}

static uint64_t ctl_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void ctl_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static double jnum(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : "-";
}

static const char *ctl_size(double b, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    u++;
  }
  snprintf(buf, len, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

static void ctl_print_json(const cJSON *j) {
  char *s = cJSON_Print(j);
  if (s != NULL) {
    puts(s);
    free(s);
  }
}

/* A digest argument: "sha256-<64 hex>". */
static int ctl_digest_ok(const char *s) {
  ws_hash_t h;
  return s != NULL && ws_digest_from_str(s, &h) == 0;
}

/* One request; prints transport/HTTP errors; returns an exit code and, on
 * CTL_EXIT_OK, *reply (new). */
static int ctl_call(const char *method, const char *path, const cJSON *body,
                    long timeout_ms, long *status, cJSON **reply) {
  *reply = NULL;
  int rc =
      ctl_http_request(NULL, method, path, body, timeout_ms, status, reply);
  if (rc != 0)
    return ctl_http_exit(rc);
  return CTL_EXIT_OK;
}

/* ctl_call, tried again with backoff while p2pd cannot be reached (socket
 * missing, connection refused: the request never arrived, so a POST is
 * safe to repeat), for up to retry_for_ms. An init container on a node
 * that just joined starts before p2pd does. */
static int ctl_call_retry(const char *method, const char *path,
                          const cJSON *body, long timeout_ms,
                          uint64_t retry_for_ms, long *status, cJSON **reply) {
  uint64_t until = ctl_now_ms() + retry_for_ms;
  long backoff = CTL_RETRY_FIRST_MS;
  for (int tries = 1;; tries++) {
    *reply = NULL;
    int rc =
        ctl_http_request(NULL, method, path, body, timeout_ms, status, reply);
    if (rc == 0)
      return CTL_EXIT_OK;
    if (rc != -ECONNREFUSED || ctl_now_ms() + (uint64_t)backoff > until) {
      if (tries > 1)
        fprintf(stderr, "p2pctl: gave up after %d attempts (--retry-for)\n",
                tries);
      return ctl_http_exit(rc);
    }
    if (tries == 1)
      fprintf(stderr, "p2pctl: retrying for up to %.0f s (--retry-for)\n",
              (double)retry_for_ms / 1000.0);
    ctl_sleep_ms(backoff);
    backoff = backoff * 2 > CTL_RETRY_MAX_MS ? CTL_RETRY_MAX_MS : backoff * 2;
  }
}

/* ---- progress ----------------------------------------------------------- */

typedef struct {
  int tty;
  uint64_t t0_ms;
  uint64_t last_plain_ms;
  int drawn;
} progress_t;

static void progress_show(progress_t *p, const cJSON *r) {
  double total = jnum(r, "bytes_total"), done = jnum(r, "bytes_done");
  double el = jnum(r, "elapsed_s");
  double frac = total > 0 ? done / total : 0;
  char a[32], b[32], c[32];
  ctl_size(done, a, sizeof(a));
  ctl_size(total, b, sizeof(b));
  ctl_size(el > 0 ? done / el : 0, c, sizeof(c));
  if (p->tty) {
    char bar[31];
    int n = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
      bar[i] = i < n ? '#' : '-';
    bar[30] = '\0';
    fprintf(stderr, "\r%-9s [%s] %5.1f%% %s / %s  %s/s   ", jstr(r, "state"),
            bar, frac * 100, a, b, c);
    p->drawn = 1;
  } else {
    uint64_t now = ctl_now_ms();
    if (p->last_plain_ms != 0 && now - p->last_plain_ms < CTL_PLAIN_EVERY_MS)
      return;
    p->last_plain_ms = now;
    fprintf(stderr, "%s %s %.1f%% %s/%s %s/s\n", jstr(r, "digest"),
            jstr(r, "state"), frac * 100, a, b, c);
  }
  fflush(stderr);
}

static void progress_end(progress_t *p) {
  if (p->tty && p->drawn)
    fputc('\n', stderr);
}

/* Waits for digest to be ready: exit 0 ready, FAIL failed, TIMEOUT, or a
 * transport/HTTP exit code. Prints R (JSON) or the path at the end. With
 * show, draws progress between rounds. Retries while p2pd is not reachable
 * or not ready yet (init containers start before it). */
static int ctl_wait_ready(const char *digest, double timeout_s,
                          uint64_t retry_for_ms, int show, int json) {
  progress_t p = {.tty = isatty(2), .t0_ms = ctl_now_ms()};
  uint64_t last_ok = p.t0_ms; /* last answer from p2pd */
  uint64_t deadline =
      timeout_s >= 0 ? p.t0_ms + (uint64_t)(timeout_s * 1000) : UINT64_MAX;
  char path[256];
  for (;;) {
    uint64_t now = ctl_now_ms();
    long left = now >= deadline ? 0
                : deadline - now > (uint64_t)CTL_POLL_MS
                    ? CTL_POLL_MS
                    : (long)(deadline - now);
    if (!show && deadline != UINT64_MAX)
      left = (long)(deadline - now); /* one long wait */
    else if (!show)
      left = 24L * 3600 * 1000;
    snprintf(path, sizeof(path), CTL_API "/releases/%s/wait?timeout_ms=%ld",
             digest, left);
    long status = 0;
    cJSON *r = NULL;
    int rc = ctl_http_request(NULL, "GET", path, NULL, 0, &status, &r);
    if (rc == 0)
      last_ok = ctl_now_ms();
    if (rc != 0 || status == 503) {
      cJSON_Delete(r);
      if (ctl_now_ms() + CTL_RETRY_CONNECT_MS >= deadline ||
          (rc != 0 && ctl_now_ms() >= last_ok + retry_for_ms)) {
        progress_end(&p);
        return rc != 0 ? ctl_http_exit(rc) : CTL_EXIT_DAEMON;
      }
      ctl_sleep_ms(CTL_RETRY_CONNECT_MS);
      continue;
    }
    if (status == 200 || status == 409) {
      if (show)
        progress_show(&p, r);
      progress_end(&p);
      if (json) {
        ctl_print_json(r);
      } else if (status == 200) {
        puts(jstr(r, "path"));
      } else {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
        fprintf(stderr, "p2pctl: release %s failed: %s (%s)\n", digest,
                jstr(e, "message"), jstr(e, "code"));
      }
      int ex = status == 200 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
      const char *code =
          jstr(cJSON_GetObjectItemCaseSensitive(r, "error"), "code");
      if (status == 409 && strncmp(code, "WS_ES3", 6) == 0)
        ex = CTL_EXIT_ORIGIN;
      cJSON_Delete(r);
      return ex;
    }
    if (status != 504) {
      progress_end(&p);
      int ex = ctl_http_reply_exit(status, r);
      cJSON_Delete(r);
      return ex;
    }
    cJSON_Delete(r);
    if (ctl_now_ms() >= deadline) {
      progress_end(&p);
      fprintf(stderr, "p2pctl: release %s not ready after %.0f s\n", digest,
              timeout_s);
      return CTL_EXIT_TIMEOUT;
    }
    if (show) {
      snprintf(path, sizeof(path), CTL_API "/releases/%s", digest);
      if (ctl_http_request(NULL, "GET", path, NULL, CTL_REQ_TIMEOUT_MS, &status,
                           &r) == 0 &&
          status == 200)
        progress_show(&p, r);
      cJSON_Delete(r);
    }
  }
}

/* ---- commands ----------------------------------------------------------- */

int ctl_prefetch_main(int argc, char **argv) {
  static const char u[] = "s3://BUCKET/PREFIX/MODEL/[sha256-HEX/]|sha256-HEX "
                          "[options]";
  const ws_arg_t rows[] = {o_digest, o_wait, o_timeout, o_retry,
                           o_json,   o_hold, o_hold_ttl};
  dargs_t a;
  int ex;
  if (dargs_parse("p2pctl prefetch", u,
                  "Asks the local p2pd to fetch a release into its cache; "
                  "with --wait, exits 0 once it is ready and prints its path "
                  "(and with --hold, takes the named hold on it).",
                  rows, 7, argc, argv, &a, &ex) != 0)
    return ex;
  if (!a.has_pos || (a.hold != NULL && !a.wait))
    return ctl_usage("prefetch", u);
  cJSON *body = cJSON_CreateObject();
  if (body == NULL)
    return CTL_EXIT_FAIL;
  if (strncmp(a.pos, "s3://", 5) == 0) {
    cJSON_AddStringToObject(body, "uri", a.pos);
    if (a.digest != NULL)
      cJSON_AddStringToObject(body, "digest", a.digest);
  } else if (ctl_digest_ok(a.pos)) {
    cJSON_AddStringToObject(body, "digest", a.pos);
  } else {
    cJSON_Delete(body);
    fprintf(stderr,
            "p2pctl prefetch: '%s' is neither s3://... nor "
            "sha256-<hex>\n",
            a.pos);
    return CTL_EXIT_USAGE;
  }
  long status = 0;
  cJSON *r = NULL;
  ex = ctl_call_retry("POST", CTL_API "/prefetch", body, CTL_REQ_TIMEOUT_MS * 4,
                      a.retry_for_ms, &status, &r);
  cJSON_Delete(body);
  if (ex == CTL_EXIT_OK && status != 200)
    ex = ctl_http_reply_exit(status, r);
  if (ex != CTL_EXIT_OK) {
    cJSON_Delete(r);
    return ex;
  }
  char digest[WS_DIGEST_STR_LEN + 1];
  snprintf(digest, sizeof(digest), "%s", jstr(r, "digest"));
  if (!a.wait) {
    if (a.json)
      ctl_print_json(r);
    else
      printf("%s %s %s\n", digest, jstr(r, "state"), jstr(r, "path"));
    cJSON_Delete(r);
    return CTL_EXIT_OK;
  }
  cJSON_Delete(r);
  ex = ctl_wait_ready(digest, a.timeout_s, a.retry_for_ms, 1, a.json);
  /* The digest p2pd resolved (a tag included): the release in use. */
  if (ex == CTL_EXIT_OK && a.hold != NULL)
    ex = ctl_hold_take(digest, a.hold, a.hold_ttl_ms, 0, 0);
  return ex;
}

int ctl_wait_main(int argc, char **argv) {
  const ws_arg_t rows[] = {o_timeout, o_retry, o_json, o_hold, o_hold_ttl};
  dargs_t a;
  int ex;
  char d[WS_DIGEST_STR_LEN + 1];
  if (dargs_parse("p2pctl wait", "sha256-HEX|s3://B/P/MODEL/:TAG [options]",
                  "Waits until the release is ready in the local cache: exit "
                  "0 and its path, 1 failed, 5 timed out (for init "
                  "containers). A tag is resolved once (S3), then waited on "
                  "by digest.",
                  rows, 5, argc, argv, &a, &ex) != 0)
    return ex;
  if (a.pos != NULL && strstr(a.pos, "/:") != NULL) { /* once, then digest */
    if ((ex = ctl_tag_resolve("p2pctl wait", a.pos, d)) != CTL_EXIT_OK)
      return ex;
    a.pos = d;
  }
  if (!ctl_digest_ok(a.pos))
    return ctl_usage("wait", "sha256-HEX|s3://B/P/MODEL/:TAG [options]");
  ex = ctl_wait_ready(a.pos, a.timeout_s, a.retry_for_ms, 0, a.json);
  if (ex == CTL_EXIT_OK && a.hold != NULL) /* in use from now: kept */
    ex = ctl_hold_take(a.pos, a.hold, a.hold_ttl_ms, 0, 0);
  return ex;
}

static void ctl_ls_row(const cJSON *r) {
  char sz[32];
  const char *d = jstr(r, "digest");
  double total = jnum(r, "bytes_total");
  const cJSON *pin = cJSON_GetObjectItemCaseSensitive(r, "pinned");
  int held = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "holds"));
  printf("%-20.20s %-9s %10s %5.1f%% %-6s %s %s\n", d, jstr(r, "state"),
         ctl_size(total, sz, sizeof(sz)),
         total > 0 ? jnum(r, "bytes_done") * 100 / total : 100.0,
         cJSON_IsTrue(pin) ? "pinned"
         : held > 0        ? "held"
                           : "-",
         jstr(r, "model"), jstr(r, "version"));
}

static int ctl_list(int json) {
  long status = 0;
  cJSON *r = NULL;
  int ex = ctl_call("GET", CTL_API "/releases", NULL, CTL_REQ_TIMEOUT_MS,
                    &status, &r);
  if (ex == CTL_EXIT_OK && status != 200)
    ex = ctl_http_reply_exit(status, r);
  if (ex == CTL_EXIT_OK) {
    if (json) {
      ctl_print_json(r);
    } else {
      printf("%-20s %-9s %10s %6s %-6s %s\n", "DIGEST", "STATE", "SIZE", "DONE",
             "PIN", "MODEL VERSION");
      const cJSON *arr = cJSON_GetObjectItemCaseSensitive(r, "releases");
      const cJSON *it;
      cJSON_ArrayForEach(it, arr) ctl_ls_row(it);
    }
  }
  cJSON_Delete(r);
  return ex;
}

int ctl_ls_main(int argc, char **argv) {
  dargs_t a;
  int ex;
  if (dargs_parse("p2pctl ls", "[--json]",
                  "Lists the releases in the local cache.", &o_json, 1, argc,
                  argv, &a, &ex) != 0)
    return ex;
  if (a.has_pos)
    return ctl_usage("ls", "[--json]");
  return ctl_list(a.json);
}

int ctl_status_main(int argc, char **argv) {
  dargs_t a;
  int ex;
  if (dargs_parse("p2pctl status", "[sha256-HEX] [--json]",
                  "One release's state and progress (all releases without "
                  "DIGEST).",
                  &o_json, 1, argc, argv, &a, &ex) != 0)
    return ex;
  if (a.has_pos && !ctl_digest_ok(a.pos))
    return ctl_usage("status", "[sha256-HEX] [--json]");
  if (!a.has_pos)
    return ctl_list(a.json);
  char path[256];
  snprintf(path, sizeof(path), CTL_API "/releases/%s", a.pos);
  long status = 0;
  cJSON *r = NULL;
  ex = ctl_call("GET", path, NULL, CTL_REQ_TIMEOUT_MS, &status, &r);
  if (ex == CTL_EXIT_OK && status != 200)
    ex = ctl_http_reply_exit(status, r);
  if (ex == CTL_EXIT_OK && a.json) {
    ctl_print_json(r);
  } else if (ex == CTL_EXIT_OK) {
    char b1[32], b2[32], b3[32];
    printf("digest:   %s\nstate:    %s\nmodel:    %s %s\nuri:      %s\n"
           "path:     %s\nfiles:    %.0f\nprogress: %s / %s (%.0f/%.0f "
           "chunks)\nfrom S3:  %s\npinned:   %s\nelapsed:  %.1f s\n",
           jstr(r, "digest"), jstr(r, "state"), jstr(r, "model"),
           jstr(r, "version"), jstr(r, "uri"), jstr(r, "path"),
           jnum(r, "files"), ctl_size(jnum(r, "bytes_done"), b1, sizeof(b1)),
           ctl_size(jnum(r, "bytes_total"), b2, sizeof(b2)),
           jnum(r, "chunks_done"), jnum(r, "chunks_total"),
           ctl_size(jnum(r, "bytes_from_s3"), b3, sizeof(b3)),
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "pinned")) ? "yes"
                                                                       : "no",
           jnum(r, "elapsed_s"));
    const cJSON *h;
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(r, "holds")) {
      if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(h, "expires_in_s")))
        printf("hold:     %s (expires in %.0f s)\n", jstr(h, "name"),
               jnum(h, "expires_in_s"));
      else
        printf("hold:     %s\n", jstr(h, "name"));
    }
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    if (e != NULL)
      printf("error:    %s (%s)\n", jstr(e, "message"), jstr(e, "code"));
  }
  cJSON_Delete(r);
  return ex;
}

/* pin, unpin, evict, verify: one request on /releases/<digest>[/action]. */
static int ctl_action(int argc, char **argv, const char *cmd,
                      const char *method, const char *action,
                      const char *about) {
  char prog[32];
  dargs_t a;
  int ex;
  snprintf(prog, sizeof(prog), "p2pctl %s", cmd);
  if (dargs_parse(prog, "sha256-HEX [--json]", about, &o_json, 1, argc, argv,
                  &a, &ex) != 0)
    return ex;
  if (!ctl_digest_ok(a.pos))
    return ctl_usage(cmd, "sha256-HEX [--json]");
  char path[256];
  snprintf(path, sizeof(path), CTL_API "/releases/%s%s%s", a.pos,
           *action ? "/" : "", action);
  long status = 0;
  cJSON *r = NULL;
  /* verify re-hashes whole releases: no time limit. */
  ex = ctl_call(method, path, NULL,
                strcmp(cmd, "verify") == 0 ? 0 : CTL_REQ_TIMEOUT_MS, &status,
                &r);
  if (ex == CTL_EXIT_OK && status != 200)
    ex = ctl_http_reply_exit(status, r);
  if (ex != CTL_EXIT_OK) {
    cJSON_Delete(r);
    return ex;
  }
  if (strcmp(cmd, "verify") == 0) {
    int ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok"));
    if (a.json) {
      ctl_print_json(r);
    } else {
      const cJSON *it;
      cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(r, "files")) {
        int fok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "ok"));
        printf("%-7s %s\n", fok ? "ok" : "DAMAGED", jstr(it, "name"));
      }
    }
    if (!ok)
      fprintf(stderr, "p2pctl: release %s has damaged files\n", a.pos);
    ex = ok ? CTL_EXIT_OK : CTL_EXIT_FAIL;
  } else if (a.json) {
    ctl_print_json(r);
  } else {
    printf("%s %s\n", a.pos,
           strcmp(cmd, "evict") == 0 ? "evicted"
           : cmd[0] == 'p'           ? "pinned"
                                     : "unpinned");
  }
  cJSON_Delete(r);
  return ex;
}

int ctl_pin_main(int argc, char **argv) {
  return ctl_action(argc, argv, "pin", "POST", "pin",
                    "Keeps the release in the cache (never evicted).");
}

int ctl_unpin_main(int argc, char **argv) {
  return ctl_action(argc, argv, "unpin", "POST", "unpin",
                    "Lets the release be evicted again.");
}

int ctl_evict_main(int argc, char **argv) {
  return ctl_action(argc, argv, "evict", "DELETE", "",
                    "Removes the release from the cache now.");
}

int ctl_verify_main(int argc, char **argv) {
  return ctl_action(argc, argv, "verify", "POST", "verify",
                    "Re-hashes the cached files; exit 1 if any is damaged.");
}

/* seed DIGEST | seed DIR --manifest FILE|URI: serve a release this node
 * has. DIR and FILE are made absolute here: p2pd reads them itself. */
int ctl_seed_main(int argc, char **argv) {
  static const char usage_text[] =
      "sha256-HEX | DIR --manifest FILE|s3://BUCKET/PREFIX/ [--json]";
  char dir[PATH_MAX], mpath[PATH_MAX];
  dargs_t a;
  cJSON *body, *r = NULL;
  long status = 0;
  int ex;

  const ws_arg_t rows[] = {o_manifest, o_json};
  if (dargs_parse("p2pctl seed", usage_text,
                  "Serves a release this node has to its peers: one in the "
                  "cache (DIGEST) or a local copy (DIR --manifest).",
                  rows, 2, argc, argv, &a, &ex) != 0)
    return ex;
  if (!a.has_pos)
    return ctl_usage("seed", usage_text);
  body = cJSON_CreateObject();
  if (body == NULL)
    return CTL_EXIT_FAIL;
  if (a.manifest == NULL) {
    if (!ctl_digest_ok(a.pos)) {
      cJSON_Delete(body);
      return ctl_usage("seed", usage_text);
    }
    cJSON_AddStringToObject(body, "digest", a.pos);
  } else {
    if (realpath(a.pos, dir) == NULL) {
      fprintf(stderr, "p2pctl seed: %s: %s\n", a.pos, strerror(errno));
      cJSON_Delete(body);
      return CTL_EXIT_FAIL;
    }
    if (strncmp(a.manifest, "s3://", 5) != 0 &&
        realpath(a.manifest, mpath) == NULL) {
      fprintf(stderr, "p2pctl seed: %s: %s\n", a.manifest, strerror(errno));
      cJSON_Delete(body);
      return CTL_EXIT_FAIL;
    }
    cJSON_AddStringToObject(body, "dir", dir);
    cJSON_AddStringToObject(body, "manifest",
                            strncmp(a.manifest, "s3://", 5) == 0 ? a.manifest
                                                                 : mpath);
  }
  /* An import hashes the whole directory: no time limit. */
  ex = ctl_call("POST", CTL_API "/seed", body, 0, &status, &r);
  cJSON_Delete(body);
  if (ex == CTL_EXIT_OK && status != 200)
    ex = ctl_http_reply_exit(status, r);
  if (ex == CTL_EXIT_OK) {
    if (a.json)
      ctl_print_json(r);
    else
      printf("%s seeding\n%s\n", jstr(r, "digest"), jstr(r, "path"));
  }
  cJSON_Delete(r);
  return ex;
}
