/* main.c - p2p-tracker: flags, wiring, signals. Everything else lives in
 * tracker_lib (trk_*.c) so tests link the same code.
 *
 *   p2p-tracker --listen HOST:PORT --http HOST:PORT [--cluster-key FILE]
 *               [--state FILE] [--log-level error|warn|info|debug]
 *               [--origin-inflight N] [--stripes N] [--metrics HOST:PORT]
 *               [--max-releases-per-node N] [--wanted-ttl DURATION]
 *               [--api-token-file FILE [--api-token-reads]] [--insecure]
 *               [--max-peers N] [--max-members N] [--max-memory SIZE]
 *               [--max-nodes-per-addr N]
 *
 * Without --insecure both the cluster key and the API token are required
 * (docs/security.md); --insecure lets either be missing, loudly.
 *
 * Options are the k_opts table (common/ws_args.h), each with its env
 * fallback (P2P_TRACKER_*, P2P_CLUSTER_KEY_FILE, P2P_LOG_LEVEL).
 * SIGTERM/SIGINT: GOODBYE to every peer, close listeners, flush the state file,
 * exit 0 once the loop is empty. Exit codes: 0 clean, 1 runtime error, 2 usage.
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "trk_http.h"
#include "trk_metrics.h"
#include "trk_notify.h"
#include "trk_server.h"
#include "trk_state.h"
#include "trk_tracker.h"
#include "ws_args.h"
#include "ws_log.h"
#include "ws_token.h"

#define KEY_FILE_MAX 4096

typedef struct {
  const char *listen;
  const char *http;
  const char *key_file;
  const char *state_file;
  const char *log_level;
  const char *origin_inflight;
  const char *stripes;
  const char *max_releases;
  const char *wanted_ttl;
  ws_log_level_t level;    /* parsed log_level */
  uint32_t origin_n;       /* parsed origin_inflight */
  uint32_t stripes_n;      /* parsed stripes */
  uint32_t max_releases_n; /* parsed max_releases */
  uint64_t wanted_ttl_ms;  /* parsed wanted_ttl */
  const char *metrics;     /* --metrics HOST:PORT: read-only /metrics, /healthz,
                             /readyz on TCP; NULL = off */
  const char *token_file;  /* --api-token-file: POST/DELETE need the token */
  int token_reads;         /* --api-token-reads: GETs too */
  int insecure;            /* --insecure: key and token may be missing */
  const char *token;       /* loaded from token_file by main; NULL = none */
  const char *max_peers;   /* capacity (docs/tracker.md "Capacity") */
  const char *max_members;
  const char *max_memory;
  const char *max_per_addr;
  uint32_t max_peers_n;
  uint32_t max_members_n;
  uint64_t max_memory_n;
  uint32_t max_per_addr_n;
} opts_t;

typedef struct {
  uv_loop_t *loop;
  trk_tracker_t *t;
  trk_server_t *srv;
  trk_http_t *http;
  trk_metrics_http_t *metrics; /* --metrics listener, NULL when off */
  ws_httpd_stats_t http_tally; /* both HTTP servers' defence counts */
  trk_state_t *state;
  uv_signal_t sigterm;
  uv_signal_t sigint;
  uv_timer_t state_timer; /* saves removals the tracker made by itself */
  bool stopping;
} app_t;

enum {
  OPT_LISTEN,
  OPT_HTTP,
  OPT_CLUSTER_KEY,
  OPT_STATE,
  OPT_LOG_LEVEL,
  OPT_ORIGIN_INFLIGHT,
  OPT_STRIPES,
  OPT_METRICS,
  OPT_MAX_RELEASES,
  OPT_WANTED_TTL,
  OPT_API_TOKEN_FILE,
  OPT_API_TOKEN_READS,
  OPT_INSECURE,
  OPT_MAX_PEERS,
  OPT_MAX_MEMBERS,
  OPT_MAX_MEMORY,
  OPT_MAX_PER_ADDR,
  OPT_LAST
};

static const ws_arg_t k_opts[OPT_LAST] = {
    [OPT_LISTEN] = {"listen", "P2P_TRACKER_LISTEN", "HOST:PORT", WS_ARG_STR, 0,
                    "peer protocol listener (required)"},
    [OPT_HTTP] = {"http", "P2P_TRACKER_HTTP", "HOST:PORT", WS_ARG_STR, 0,
                  "dashboard, JSON API and /metrics (required)"},
    [OPT_CLUSTER_KEY] = {"cluster-key", "P2P_CLUSTER_KEY_FILE", "FILE",
                         WS_ARG_STR, 0, "file with the 64-hex cluster key"},
    [OPT_STATE] = {"state", "P2P_TRACKER_STATE", "FILE", WS_ARG_STR, 0,
                   "keeps the wanted releases across restarts"},
    [OPT_LOG_LEVEL] = {"log-level", "P2P_LOG_LEVEL", "LEVEL", WS_ARG_STR, 0,
                       "error|warn|info|debug (default info)"},
    [OPT_ORIGIN_INFLIGHT] = {"origin-inflight", "P2P_TRACKER_ORIGIN_INFLIGHT",
                             "N", WS_ARG_UINT, 0,
                             "S3 fetches per release the leases aim for"},
    [OPT_STRIPES] = {"stripes", "P2P_TRACKER_STRIPES", "N", WS_ARG_UINT, 0,
                     "stripe trees per release, 0 for none (default 0)"},
    [OPT_METRICS] = {"metrics", "P2P_TRACKER_METRICS", "HOST:PORT", WS_ARG_STR,
                     0, "read-only /metrics, /healthz, /readyz on TCP"},
    [OPT_MAX_RELEASES] = {"max-releases-per-node",
                          "P2P_TRACKER_MAX_RELEASES_PER_NODE", "N", WS_ARG_UINT,
                          0, "releases one node may join (default 64)"},
    [OPT_WANTED_TTL] = {"wanted-ttl", "P2P_TRACKER_WANTED_TTL", "DURATION",
                        WS_ARG_DURATION, 0,
                        "a wanted release leaves after this (default 24h)"},
    [OPT_API_TOKEN_FILE] = {"api-token-file", "P2P_TRACKER_API_TOKEN_FILE",
                            "FILE", WS_ARG_STR, 0,
                            "bearer token POST/DELETE on --http must send "
                            "(required unless --insecure)"},
    [OPT_API_TOKEN_READS] = {"api-token-reads", "P2P_TRACKER_API_TOKEN_READS",
                             NULL, WS_ARG_BOOL, 0,
                             "GETs on --http need the token too (not "
                             "/healthz, /readyz)"},
    [OPT_INSECURE] = {"insecure", "P2P_INSECURE", NULL, WS_ARG_BOOL, 0,
                      "development only: run without --cluster-key (all-zero "
                      "key) and without --api-token-file (open API)"},
    [OPT_MAX_PEERS] = {"max-peers", "P2P_TRACKER_MAX_PEERS", "N", WS_ARG_UINT,
                       0, "nodes connected at once (default 16384)"},
    [OPT_MAX_MEMBERS] = {"max-members", "P2P_TRACKER_MAX_MEMBERS", "N",
                         WS_ARG_UINT, 0,
                         "nodes in one release (default: --max-peers)"},
    [OPT_MAX_MEMORY] = {"max-memory", "P2P_TRACKER_MAX_MEMORY", "SIZE",
                        WS_ARG_SIZE, 0,
                        "state and peer memory cap (default 512Mi)"},
    [OPT_MAX_PER_ADDR] = {"max-nodes-per-addr",
                          "P2P_TRACKER_MAX_NODES_PER_ADDR", "N", WS_ARG_UINT, 0,
                          "node ids connected from one address, loopback "
                          "exempt (default 8; raise behind a NAT)"},
};

static const ws_args_spec_t k_spec = {
    .prog = "p2p-tracker",
    .synopsis = "--listen HOST:PORT --http HOST:PORT [options]",
    .about = "weightswarm tracker: introduces peers to each other and hands "
             "out S3 leases so each chunk leaves S3 about once.",
    .args = k_opts,
    .nargs = OPT_LAST,
    .footer = "precedence: option > environment > default",
};

static int parse_numbers(opts_t *o);

/* 0, or the exit code (0 after --help/--version, 2 on a usage error). */
static int parse_opts(int argc, char **argv, opts_t *o, int *exit_code) {
  const char *v[OPT_LAST] = {0};
  size_t npos = 0;
  memset(o, 0, sizeof(*o));
  int rc = ws_args_parse(&k_spec, argc, argv, v, NULL, 0, &npos);
  if (rc == WS_ARGS_HELP || rc == WS_ARGS_VERSION) {
    if (rc == WS_ARGS_HELP)
      ws_args_usage(&k_spec, stdout);
    else
      ws_args_print_version("p2p-tracker");
    *exit_code = 0;
    return 1;
  }
  *exit_code = 2;
  if (rc != 0)
    return 1;
  ws_args_env(&k_spec, v);
  if (ws_args_check(&k_spec, v) != 0)
    return 1;
  if (v[OPT_LISTEN] == NULL || v[OPT_HTTP] == NULL) {
    fprintf(stderr, "p2p-tracker: --listen and --http are required "
                    "(see p2p-tracker --help)\n");
    return 1;
  }
  o->listen = v[OPT_LISTEN];
  o->http = v[OPT_HTTP];
  o->key_file = v[OPT_CLUSTER_KEY];
  o->state_file = v[OPT_STATE];
  o->log_level = v[OPT_LOG_LEVEL];
  o->origin_inflight = v[OPT_ORIGIN_INFLIGHT];
  o->stripes = v[OPT_STRIPES];
  o->metrics = v[OPT_METRICS];
  o->max_releases = v[OPT_MAX_RELEASES];
  o->wanted_ttl = v[OPT_WANTED_TTL];
  o->token_file = v[OPT_API_TOKEN_FILE];
  o->token_reads =
      v[OPT_API_TOKEN_READS] != NULL && ws_parse_bool(v[OPT_API_TOKEN_READS]);
  o->insecure = v[OPT_INSECURE] != NULL && ws_parse_bool(v[OPT_INSECURE]);
  if (o->token_reads && o->token_file == NULL) {
    fprintf(stderr, "p2p-tracker: --api-token-reads needs --api-token-file\n");
    return 1;
  }
  o->max_peers = v[OPT_MAX_PEERS];
  o->max_members = v[OPT_MAX_MEMBERS];
  o->max_memory = v[OPT_MAX_MEMORY];
  o->max_per_addr = v[OPT_MAX_PER_ADDR];
  return parse_numbers(o);
}

/* The numeric options: 0, or 1 after a usage message. */
static int parse_numbers(opts_t *o) {
  if (o->log_level != NULL && ws_log_parse_level(o->log_level, &o->level)) {
    fprintf(stderr,
            "p2p-tracker: --log-level '%s': want "
            "error|warn|info|debug\n",
            o->log_level);
    return 1;
  }
  uint64_t n = 0;
  if (o->origin_inflight != NULL &&
      ws_parse_uint(o->origin_inflight, 1, TRK_ORIGIN_INFLIGHT_MAX, &n)) {
    fprintf(stderr, "p2p-tracker: --origin-inflight '%s': want 1..%u\n",
            o->origin_inflight, (unsigned)TRK_ORIGIN_INFLIGHT_MAX);
    return 1;
  }
  o->origin_n = (uint32_t)n;
  n = TRK_TREE_STRIPES_DEFAULT;
  if (o->stripes != NULL && ws_parse_uint(o->stripes, 0, TRK_TREE_MAX, &n)) {
    fprintf(stderr, "p2p-tracker: --stripes '%s': want 0..%u\n", o->stripes,
            (unsigned)TRK_TREE_MAX);
    return 1;
  }
  o->stripes_n = (uint32_t)n;
  n = TRK_MAX_SWARMS_PER_PEER;
  if (o->max_releases != NULL &&
      ws_parse_uint(o->max_releases, 1, TRK_MAX_SWARMS_PER_PEER_MAX, &n)) {
    fprintf(stderr, "p2p-tracker: --max-releases-per-node '%s': want 1..%u\n",
            o->max_releases, (unsigned)TRK_MAX_SWARMS_PER_PEER_MAX);
    return 1;
  }
  o->max_releases_n = (uint32_t)n;
  n = TRK_MAX_PEERS;
  if (o->max_peers != NULL &&
      ws_parse_uint(o->max_peers, 1, TRK_MAX_PEERS_MAX, &n)) {
    fprintf(stderr, "p2p-tracker: --max-peers '%s': want 1..%u\n", o->max_peers,
            (unsigned)TRK_MAX_PEERS_MAX);
    return 1;
  }
  o->max_peers_n = (uint32_t)n;
  n = o->max_peers_n;
  if (o->max_members != NULL &&
      ws_parse_uint(o->max_members, 1, TRK_MAX_MEMBERS_MAX, &n)) {
    fprintf(stderr, "p2p-tracker: --max-members '%s': want 1..%u\n",
            o->max_members, (unsigned)TRK_MAX_MEMBERS_MAX);
    return 1;
  }
  o->max_members_n = (uint32_t)n;
  o->max_memory_n = TRK_MAX_STATE_BYTES;
  if (o->max_memory != NULL &&
      (ws_parse_size(o->max_memory, &o->max_memory_n) ||
       o->max_memory_n < TRK_MAX_STATE_BYTES_MIN ||
       o->max_memory_n > TRK_MAX_STATE_BYTES_MAX)) {
    fprintf(stderr,
            "p2p-tracker: --max-memory '%s': want a size from 1Mi to 1Ti "
            "(e.g. 512Mi)\n",
            o->max_memory);
    return 1;
  }
  n = TRK_MAX_NODES_PER_ADDR;
  if (o->max_per_addr != NULL &&
      ws_parse_uint(o->max_per_addr, 1, TRK_MAX_NODES_PER_ADDR_MAX, &n)) {
    fprintf(stderr, "p2p-tracker: --max-nodes-per-addr '%s': want 1..%u\n",
            o->max_per_addr, (unsigned)TRK_MAX_NODES_PER_ADDR_MAX);
    return 1;
  }
  o->max_per_addr_n = (uint32_t)n;
  o->wanted_ttl_ms = TRK_WANTED_TTL_MS;
  if (o->wanted_ttl != NULL &&
      (ws_parse_duration_ms(o->wanted_ttl, &o->wanted_ttl_ms) ||
       o->wanted_ttl_ms == 0 || o->wanted_ttl_ms > TRK_WANTED_TTL_MAX_MS)) {
    fprintf(stderr,
            "p2p-tracker: --wanted-ttl '%s': want a duration "
            "from 1ms to 365d (e.g. 24h)\n",
            o->wanted_ttl);
    return 1;
  }
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

/* The cluster key and the API token: both required unless --insecure,
 * which then says loudly what is open. 0, or 1 after an error message. */
static int secrets_load(opts_t *o, uint8_t key[32], char *token) {
  const char *why = NULL;
  if (o->key_file != NULL && key_load(o->key_file, key) < 0) {
    WS_LOGE("--cluster-key %s: expected 64 hex characters", o->key_file);
    return 1;
  }
  if (o->token_file != NULL) {
    int rc = ws_token_load(o->token_file, token, WS_TOKEN_MAX + 1, &why);
    if (rc < 0) {
      WS_LOGE("--api-token-file %s: %s", o->token_file,
              why != NULL ? why : ws_strerror(rc));
      return 1;
    }
    o->token = token;
  }
  if (!o->insecure && (o->key_file == NULL || o->token_file == NULL)) {
    WS_LOGE("refusing to start without %s: give %s, or --insecure for a "
            "development run (docs/security.md)",
            o->key_file == NULL ? "a cluster key" : "an API token",
            o->key_file == NULL ? "--cluster-key FILE"
                                : "--api-token-file FILE");
    return 1;
  }
  if (o->key_file == NULL)
    WS_LOGW("INSECURE: no --cluster-key: using the all-zero development "
            "key; anyone who can reach --listen can join, announce and take "
            "leases");
  if (o->token_file == NULL)
    WS_LOGW("INSECURE: no --api-token-file: anyone who can reach --http can "
            "add and remove wanted releases");
  return 0;
}

/* Every peer is a socket: raises the soft open-file limit to the hard
 * one (start-up only) and warns when even that is short of --max-peers
 * (plus handshakes, listeners and a margin), since past it accept fails
 * and the HTTP API stops answering too. */
static void raise_nofile(uint32_t max_peers) {
  struct rlimit rl;
  rlim_t want = (rlim_t)max_peers + TRK_MAX_PREAUTH_CONNS + TRK_HTTP_MAX_CONNS +
                TRK_METRICS_MAX_CONNS + 64u;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    WS_LOGW("getrlimit(RLIMIT_NOFILE) failed: open-file limit unknown");
    return;
  }
  rlim_t was = rl.rlim_cur;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
      rl.rlim_cur = was;
  }
  WS_LOGI("open-file limit %llu (was %llu, hard %llu)",
          (unsigned long long)rl.rlim_cur, (unsigned long long)was,
          (unsigned long long)rl.rlim_max);
  if (rl.rlim_cur < want)
    WS_LOGW("open-file limit %llu is below the %llu that --max-peers %u "
            "needs: raise LimitNOFILE= (systemd) or ulimit -n, or lower "
            "--max-peers",
            (unsigned long long)rl.rlim_cur, (unsigned long long)want,
            max_peers);
}

static void on_http_closed(void *arg) {
  app_t *a = arg;
  a->http = NULL;
}

static void on_metrics_closed(void *arg) {
  app_t *a = arg;
  a->metrics = NULL;
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
  trk_notify("STOPPING=1"); /* systemd Type=notify */
  uv_close((uv_handle_t *)&a->sigterm, NULL);
  uv_close((uv_handle_t *)&a->sigint, NULL);
  uv_close((uv_handle_t *)&a->state_timer, NULL);
  if (a->http != NULL)
    trk_http_close(a->http, on_http_closed, a);
  if (a->metrics != NULL)
    trk_metrics_http_close(a->metrics, on_metrics_closed, a);
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

/* The tracker removes wanted entries by itself (superseded,
 * expired: docs/operations.md); the state file follows. */
static void on_state_timer(uv_timer_t *h) {
  app_t *a = h->data;
  if (a->state != NULL)
    trk_state_sync(a->state);
}

/* The read-only --metrics listener, last: once it answers, the others do. */
static int start_metrics(app_t *a, const opts_t *o) {
  int port = 0;
  if (o->metrics == NULL)
    return 0;
  int rc = trk_metrics_http_new(a->loop, a->t, a->srv, &a->http_tally,
                                o->metrics, &port, &a->metrics);
  if (rc < 0)
    WS_LOGE("--metrics %s: %s", o->metrics, ws_strerror(rc));
  else
    WS_LOGI("metrics on %s (port %d): /metrics /healthz /readyz", o->metrics,
            port);
  return rc;
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
  rc = trk_http_new(a->loop, a->t, a->srv, &a->http_tally, &a->http);
  if (rc < 0)
    return rc;
  trk_http_on_wanted(a->http, on_wanted, a);
  if (o->token != NULL &&
      (rc = trk_http_set_token(a->http, o->token, o->token_reads)) < 0)
    return rc;
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
  if ((rc = start_metrics(a, o)) < 0)
    return rc;
  if (a->state != NULL &&
      (rc = uv_timer_start(&a->state_timer, on_state_timer,
                           TRK_SWEEP_INTERVAL_MS, TRK_SWEEP_INTERVAL_MS)) < 0)
    return rc;
  if ((rc = uv_signal_start(&a->sigterm, on_signal, SIGTERM)) < 0 ||
      (rc = uv_signal_start(&a->sigint, on_signal, SIGINT)) < 0)
    return rc;
  return 0;
}

/* --state: the wanted set as it was. A state file that exists says this
 * is a restart: no origin lease for TRK_RESTART_HOLD_MS while the nodes
 * reconnect. 0, or -1 said in the log. */
static int state_restore(app_t *a, const char *path) {
  uint32_t n = 0;
  bool restart = access(path, F_OK) == 0;
  int rc = trk_state_load(path, trk_tracker_wanted(a->t), uv_now(a->loop), &n);
  if (rc < 0) {
    WS_LOGE("--state %s: %s", path, ws_strerror(rc));
    return -1;
  }
  WS_LOGI("state %s: %u wanted releases restored", path, n);
  if (restart) {
    trk_tracker_hold_leases(a->t, uv_now(a->loop) + TRK_RESTART_HOLD_MS);
    WS_LOGI("a restart: no S3 lease for %u ms while the nodes reconnect",
            TRK_RESTART_HOLD_MS);
  }
  return 0;
}

int main(int argc, char **argv) {
  opts_t o;
  app_t a;
  uint8_t key[32] = {0};
  char token[WS_TOKEN_MAX + 1] = {0};
  int rc;
  memset(&a, 0, sizeof(a));
  ws_log_set_prog("p2p-tracker");
  if (parse_opts(argc, argv, &o, &rc) != 0)
    return rc;
  if (o.log_level != NULL)
    ws_log_set_level(o.level); /* checked by parse_opts */
  if (secrets_load(&o, key, token) != 0)
    return 2;
  signal(SIGPIPE, SIG_IGN);
  raise_nofile(o.max_peers_n);
  a.loop = uv_default_loop();
  a.t = trk_tracker_new(o.max_peers_n, uv_hrtime() ^ ((uint64_t)getpid() << 32),
                        uv_now(a.loop));
  if (a.t == NULL) {
    WS_LOGE("out of memory");
    return 1;
  }
  trk_tracker_set_max_members(a.t, o.max_members_n);
  trk_tracker_set_max_memory(a.t, o.max_memory_n);
  if (o.origin_inflight != NULL) /* checked by parse_opts */
    trk_tracker_set_origin_inflight(a.t, o.origin_n);
  trk_tracker_set_tree(a.t, o.stripes_n);
  /* Checked by parse_opts; no peer is connected yet. */
  if (trk_peers_set_max_joined(trk_tracker_peers(a.t), o.max_releases_n) < 0 ||
      trk_peers_set_max_per_addr(trk_tracker_peers(a.t), o.max_per_addr_n) < 0)
    return 2;
  trk_wanted_set_ttl(trk_tracker_wanted(a.t), o.wanted_ttl_ms);
  if (o.state_file != NULL && state_restore(&a, o.state_file) != 0) {
    trk_tracker_free(a.t);
    return 1;
  }
  /* Signal handles first, so stop() can always close them. */
  a.sigterm.data = &a;
  a.sigint.data = &a;
  a.state_timer.data = &a;
  if (uv_signal_init(a.loop, &a.sigterm) < 0 ||
      uv_signal_init(a.loop, &a.sigint) < 0 ||
      uv_timer_init(a.loop, &a.state_timer) < 0) {
    WS_LOGE("cannot set up signal handling");
    return 1;
  }
  rc = start(&a, &o, key);
  memset(key, 0, sizeof(key));
  memset(token, 0, sizeof(token));
  if (rc < 0) {
    WS_LOGE("start: %s", ws_strerror(rc));
    stop(&a); /* closes whatever was opened; the loop then drains */
  } else {
    /* Both listeners accept: tell systemd (Type=notify). */
    trk_notify("READY=1\nSTATUS=listening");
  }
  uv_run(a.loop, UV_RUN_DEFAULT);
  trk_tracker_free(a.t);
  int lc = uv_loop_close(a.loop);
  if (lc != 0)
    WS_LOGW("loop closed with handles open: %s", uv_strerror(lc));
  return rc < 0 ? 1 : 0;
}
