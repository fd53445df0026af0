/* main.c - p2p-tracker: flags, wiring, signals. Everything else lives in
 * tracker_lib (trk_*.c) so tests link the same code.
 *
 *   p2p-tracker --listen HOST:PORT --http HOST:PORT [--cluster-key FILE]
 *               [--state FILE] [--log-level error|warn|info|debug]
 *
 * Env fallbacks: P2P_TRACKER_LISTEN, P2P_TRACKER_HTTP, P2P_CLUSTER_KEY_FILE,
 * P2P_TRACKER_STATE, P2P_LOG_LEVEL. SIGTERM/SIGINT: GOODBYE to every peer,
 * close listeners, flush the state file, exit 0 once the loop is empty.
 * Exit codes: 0 clean, 1 runtime error, 2 usage.
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "trk_http.h"
#include "trk_server.h"
#include "trk_state.h"
#include "trk_tracker.h"
#include "ws_log.h"

#define KEY_FILE_MAX 4096

typedef struct {
  const char *listen;
  const char *http;
  const char *key_file;
  const char *state_file;
  const char *log_level;
  const char *origin_inflight;
} opts_t;

typedef struct {
  uv_loop_t *loop;
  trk_tracker_t *t;
  trk_server_t *srv;
  trk_http_t *http;
  trk_state_t *state;
  uv_signal_t sigterm;
  uv_signal_t sigint;
  bool stopping;
} app_t;

static void usage(FILE *to) {
  fputs("usage: p2p-tracker --listen HOST:PORT --http HOST:PORT\n"
        "                   [--cluster-key FILE] [--state FILE]\n"
        "                   [--origin-inflight N]\n"
        "                   [--log-level error|warn|info|debug]\n",
        to);
}

static const char *env_or(const char *v, const char *env) {
  return v != NULL ? v : getenv(env);
}

static int parse_opts(int argc, char **argv, opts_t *o) {
  static const struct option longs[] = {
      {"listen", required_argument, NULL, 'l'},
      {"http", required_argument, NULL, 'H'},
      {"cluster-key", required_argument, NULL, 'k'},
      {"state", required_argument, NULL, 's'},
      {"log-level", required_argument, NULL, 'v'},
      {"origin-inflight", required_argument, NULL, 'o'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int ch;
  memset(o, 0, sizeof(*o));
  while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
    switch (ch) {
    case 'l':
      o->listen = optarg;
      break;
    case 'H':
      o->http = optarg;
      break;
    case 'k':
      o->key_file = optarg;
      break;
    case 's':
      o->state_file = optarg;
      break;
    case 'v':
      o->log_level = optarg;
      break;
    case 'o':
      o->origin_inflight = optarg;
      break;
    case 'h':
      usage(stdout);
      exit(0);
    default:
      return WS_EUSAGE;
    }
  }
  if (optind != argc)
    return WS_EUSAGE;
  o->listen = env_or(o->listen, "P2P_TRACKER_LISTEN");
  o->http = env_or(o->http, "P2P_TRACKER_HTTP");
  o->key_file = env_or(o->key_file, "P2P_CLUSTER_KEY_FILE");
  o->state_file = env_or(o->state_file, "P2P_TRACKER_STATE");
  o->log_level = env_or(o->log_level, "P2P_LOG_LEVEL");
  o->origin_inflight =
      env_or(o->origin_inflight, "P2P_TRACKER_ORIGIN_INFLIGHT");
  if (o->listen == NULL || o->http == NULL)
    return WS_EUSAGE;
  return 0;
}

/* Reads 64 hex characters (surrounding whitespace allowed) from path.
 * Start-up only: a synchronous read before the loop runs. */
static int key_load(const char *path, uint8_t key[32]) {
  char buf[KEY_FILE_MAX + 1];
  ws_hash_t h;
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return WS_EKEY;
  size_t n = fread(buf, 1, KEY_FILE_MAX, f);
  fclose(f);
  buf[n] = '\0';
  char *p = buf;
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
    p++;
  size_t len = strlen(p);
  while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\n' ||
                     p[len - 1] == '\r' || p[len - 1] == '\t'))
    len--;
  int rc = ws_hash_from_hex(p, len, &h);
  memset(buf, 0, sizeof(buf));
  if (rc < 0)
    return WS_EKEY;
  memcpy(key, h.b, 32);
  memset(&h, 0, sizeof(h));
  return 0;
}

static void on_http_closed(void *arg) {
  app_t *a = arg;
  a->http = NULL;
}

static void on_server_closed(trk_server_t *srv, void *arg) {
  app_t *a = arg;
  (void)srv;
  a->srv = NULL;
}

static void on_state_closed(void *arg) {
  app_t *a = arg;
  a->state = NULL;
}

static void stop(app_t *a) {
  if (a->stopping)
    return;
  a->stopping = true;
  uv_close((uv_handle_t *)&a->sigterm, NULL);
  uv_close((uv_handle_t *)&a->sigint, NULL);
  if (a->http != NULL)
    trk_http_close(a->http, on_http_closed, a);
  if (a->srv != NULL)
    trk_server_close(a->srv, on_server_closed, a);
  if (a->state != NULL)
    trk_state_close(a->state, on_state_closed, a);
}

static void on_signal(uv_signal_t *h, int signum) {
  app_t *a = h->data;
  WS_LOGI("signal %d: shutting down", signum);
  stop(a);
}

static void on_wanted(void *arg) {
  app_t *a = arg;
  if (a->srv != NULL)
    trk_server_push_wanted(a->srv);
  if (a->state != NULL)
    trk_state_save(a->state);
}

static int start(app_t *a, const opts_t *o, const uint8_t key[32]) {
  int port = 0;
  int rc = trk_server_new(a->loop, a->t, key, &a->srv);
  if (rc < 0)
    return rc;
  rc = trk_server_listen(a->srv, o->listen, &port);
  if (rc < 0) {
    WS_LOGE("--listen %s: %s", o->listen, ws_strerror(rc));
    return rc;
  }
  WS_LOGI("peer protocol on %s (port %d)", o->listen, port);
  rc = trk_http_new(a->loop, a->t, a->srv, &a->http);
  if (rc < 0)
    return rc;
  trk_http_on_wanted(a->http, on_wanted, a);
  rc = trk_http_listen(a->http, o->http, &port);
  if (rc < 0) {
    WS_LOGE("--http %s: %s", o->http, ws_strerror(rc));
    return rc;
  }
  WS_LOGI("http on %s (port %d): dashboard /, api /api/v1, /metrics", o->http,
          port);
  if (o->state_file != NULL) {
    a->state = trk_state_new(a->loop, o->state_file, trk_tracker_wanted(a->t));
    if (a->state == NULL)
      return -ENOMEM;
  }
  if ((rc = uv_signal_start(&a->sigterm, on_signal, SIGTERM)) < 0 ||
      (rc = uv_signal_start(&a->sigint, on_signal, SIGINT)) < 0)
    return rc;
  return 0;
}

int main(int argc, char **argv) {
  opts_t o;
  app_t a;
  uint8_t key[32] = {0};
  ws_log_level_t lvl;
  int rc;
  memset(&a, 0, sizeof(a));
  ws_log_set_prog("p2p-tracker");
  if (parse_opts(argc, argv, &o) < 0) {
    usage(stderr);
    return 2;
  }
  if (o.log_level != NULL) {
    if (ws_log_parse_level(o.log_level, &lvl) < 0) {
      usage(stderr);
      return 2;
    }
    ws_log_set_level(lvl);
  }
  if (o.key_file != NULL) {
    if (key_load(o.key_file, key) < 0) {
      WS_LOGE("--cluster-key %s: expected 64 hex characters", o.key_file);
      return 2;
    }
  } else {
    WS_LOGW("no --cluster-key: using the all-zero development key; anyone "
            "who can reach the port can join");
  }
  signal(SIGPIPE, SIG_IGN);
  a.loop = uv_default_loop();
  a.t = trk_tracker_new(0, uv_hrtime() ^ ((uint64_t)getpid() << 32),
                        uv_now(a.loop));
  if (a.t == NULL) {
    WS_LOGE("out of memory");
    return 1;
  }
  if (o.origin_inflight != NULL) {
    char *end = NULL;
    unsigned long n = strtoul(o.origin_inflight, &end, 10);
    if (end == o.origin_inflight || *end != '\0' || n < 1 ||
        n > TRK_ORIGIN_INFLIGHT_MAX) {
      WS_LOGE("--origin-inflight %s: want 1..%u", o.origin_inflight,
              (unsigned)TRK_ORIGIN_INFLIGHT_MAX);
      trk_tracker_free(a.t);
      return 2;
    }
    trk_tracker_set_origin_inflight(a.t, (uint32_t)n);
  }
  if (o.state_file != NULL) {
    uint32_t n = 0;
    rc = trk_state_load(o.state_file, trk_tracker_wanted(a.t), uv_now(a.loop),
                        &n);
    if (rc < 0) {
      WS_LOGE("--state %s: %s", o.state_file, ws_strerror(rc));
      trk_tracker_free(a.t);
      return 1;
    }
    WS_LOGI("state %s: %u wanted releases restored", o.state_file, n);
  }
  /* Signal handles first, so stop() can always close them. */
  a.sigterm.data = &a;
  a.sigint.data = &a;
  if (uv_signal_init(a.loop, &a.sigterm) < 0 ||
      uv_signal_init(a.loop, &a.sigint) < 0) {
    WS_LOGE("cannot set up signal handling");
    return 1;
  }
  rc = start(&a, &o, key);
  memset(key, 0, sizeof(key));
  if (rc < 0) {
    WS_LOGE("start: %s", ws_strerror(rc));
    stop(&a); /* closes whatever was opened; the loop then drains */
  }
  uv_run(a.loop, UV_RUN_DEFAULT);
  trk_tracker_free(a.t);
  int lc = uv_loop_close(a.loop);
  if (lc != 0)
    WS_LOGW("loop closed with handles open: %s", uv_strerror(lc));
  return rc < 0 ? 1 : 0;
}
