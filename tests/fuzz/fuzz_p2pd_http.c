/* fuzz_p2pd_http.c - fuzz target for p2pd's local API: every route of
 * peer/api.c and peer/api_hold.c (healthz, readyz, metrics, prefetch by
 * URI, digest and tag, seed, list, release status, wait, pin, unpin,
 * verify, evict, holds) and what they call (release table, worker jobs,
 * cache pins and holds, the S3 client), behind the common ws_httpd parser,
 * router and bearer-token check.
 *
 * A real daemon, made once as main.c makes it (peer_config_load with
 * flags, peer_daemon_init, peer_daemon_start) in a temporary directory:
 * standalone (no swarm), --http on 127.0.0.1:0 with --api-token-file
 * (token FUZZ_TOKEN; GETs open, as by default), the unix socket --api. Its
 * loop is kept across inputs and the harness runs it. The first input
 * byte picks the way in: bit 0 clear, the TCP listener (token checked);
 * set, the unix socket (no token, as p2pctl). The rest is sent as is on
 * one connection: connect, write, shut down the write side, read the
 * reply to EOF, close; bounded by a timer.
 *
 * S3: the daemon's client is replaced before the loop first runs by one
 * whose endpoint is a loopback port bound but not listening (connections
 * are refused at once) with one attempt per request, and static
 * credentials from the environment: every manifest GET, tag lookup or
 * seed manifest from S3 an input starts fails in milliseconds without
 * network (the daemon's client would retry for up to 30 s).
 *
 * Baseline state, restored after every input so that an input's outcome
 * does not depend on the ones before it: release A (seeded from a local
 * directory, READY, pinned), release B (seeded, READY, unpinned), release
 * C (a prefetch whose manifest GET failed: FAILED), no holds, nothing
 * else. After each input the loop runs until no worker job, transfer or
 * release job is left (a deadline; abort() past it: something that never
 * ends), then every other release is dropped, a missing A or B is seeded
 * again, pins and holds are put back and a missing C prefetched again,
 * all through the API on the unix socket. The digests of A and B are
 * fixed (the files and created_at are), so seeds can name them
 * (gen_p2pd_http_corpus.py).
 *
 * Not fuzzed here: swarm mode (a prefetch by digest alone waits for the
 * tracker), --api-token-reads, and the --metrics listener (its own server,
 * same handler as /metrics here).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "config.h"
#include "core/tunables.h"
#include "daemon.h"
#include "manifest.h"
#include "ws_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_TOKEN "fuzz-token-0123456789abcdef"
/* The seeded releases' digests (files and created_at below are fixed). */
#define DIGEST_A                                                               \
  "sha256-f112094c346b58ca889b5214917bab302ddeff4d431701879e41d713e10cb91e"
#define DIGEST_B                                                               \
  "sha256-f6ca427bdf62fd9cfdccd6c0b5441dd657ba2e0f268b3d192aa36d0c623b811a"
/* The failed one: a prefetch of this digest from a URI S3 refuses. */
#define DIGEST_C                                                               \
  "sha256-cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define URI_C "s3://fuzz-bucket/models/c/"

#define FUZZ_TIMEOUT_MS 5000u     /* one request */
#define SETTLE_DEADLINE_MS 30000u /* jobs an input started */

static char tmp[64];
static char sock_path[128], dir_a[128], dir_b[128], man_a[128], man_b[128];
static peer_settings_t cfg;
static peer_daemon_t d;
static int s3_sink = -1; /* bound, never listening: S3 connects are refused */
static int tcp_port;
static int ready;

/* ---- one connection ------------------------------------------------------ */

typedef struct {
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } s;
  uv_connect_t conn;
  uv_write_t w;
  uv_shutdown_t sd;
  uv_timer_t timer;
  uv_buf_t buf;
  int written;   /* the input is in the socket */
  int shut;      /* the write side is shut down */
  int closed;    /* handles closed: stream and timer */
  size_t got;    /* bytes of the reply kept in head */
  char head[64]; /* the reply's start: the status line */
  char rbuf[16384];
} client_t;

static int tick_closed;

static void on_tick(uv_timer_t *t) {
  (void)t;
}

static void on_tick_closed(uv_handle_t *h) {
  (void)h;
  tick_closed = 1;
}

/* Nothing the daemon started is still going: no worker job, S3 request,
 * transfer or release job. */
static int quiet(void) {
  ws_s3_stats_t st;
  ws_s3_stats_get(d.ctx.s3, &st);
  return peer_workq_pending(&d.ctx.workq) == 0 && st.in_flight == 0 &&
         st.queued == 0 && peer_origin_inflight(d.origin) == 0 &&
         peer_releases_active(d.releases) == 0;
}

static void on_closed(uv_handle_t *h) {
  client_t *c = h->data;
  c->closed++;
}

static void client_close(client_t *c) {
  if (!uv_is_closing((uv_handle_t *)&c->s)) {
    uv_close((uv_handle_t *)&c->s, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
  }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  client_t *c = h->data;
  (void)hint;
  *b = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  client_t *c = s->data;
  if (n < 0) {
    client_close(c);
    return;
  }
  size_t keep = sizeof(c->head) - 1 - c->got;
  if ((size_t)n < keep)
    keep = (size_t)n;
  memcpy(c->head + c->got, b->base, keep);
  c->got += keep;
}

static void on_shutdown(uv_shutdown_t *r, int status) {
  (void)r, (void)status;
}

static void on_write(uv_write_t *w, int status) {
  client_t *c = w->data;
  if (status < 0)
    client_close(c);
  else
    c->written = 1;
}

static void on_connect(uv_connect_t *r, int status) {
  client_t *c = r->data;
  uv_stream_t *s = (uv_stream_t *)&c->s;
  if (status < 0 || uv_read_start(s, on_alloc, on_read) < 0) {
    client_close(c);
    return;
  }
  if (c->buf.len == 0)
    c->written = 1;
  else if (uv_write(&c->w, s, &c->buf, 1, on_write) < 0)
    client_close(c);
}

static void on_timeout(uv_timer_t *t) {
  client_close(t->data);
}

/* Sends len bytes on a new connection (unix socket or TCP) and reads what
 * comes back. The write side is shut down (the server then ends the
 * connection once its reply is out) only when the daemon has been quiet
 * for a few loop turns after the bytes went out: a handler that answers
 * later (worker job, S3, a release settling) gets to answer, and a second
 * request in the same bytes gets its turn. Returns the HTTP status of the
 * first reply, or 0 when there was none. */
static int client_run(int on_unix, const char *data, size_t len) {
  static client_t c;
  static uv_timer_t tick;
  struct sockaddr_in sa;
  int rc = 0, calm = 0;

  memset(&c, 0, sizeof(c));
  c.buf = uv_buf_init((char *)data, (unsigned)len);
  c.conn.data = c.w.data = c.timer.data = &c;
  if (uv_timer_init(&d.loop, &c.timer) != 0 ||
      uv_timer_start(&c.timer, on_timeout, FUZZ_TIMEOUT_MS, 0) != 0 ||
      uv_timer_init(&d.loop, &tick) != 0 ||
      uv_timer_start(&tick, on_tick, 1, 1) != 0)
    abort();
  if (on_unix) {
    if (uv_pipe_init(&d.loop, &c.s.pipe, 0) != 0)
      abort();
    uv_pipe_connect(&c.conn, &c.s.pipe, sock_path, on_connect);
  } else {
    if (uv_ip4_addr("127.0.0.1", tcp_port, &sa) != 0 ||
        uv_tcp_init(&d.loop, &c.s.tcp) != 0)
      abort();
    rc = uv_tcp_connect(&c.conn, &c.s.tcp, (const struct sockaddr *)&sa,
                        on_connect);
  }
  c.s.tcp.data = &c;
  if (rc != 0)
    client_close(&c);
  while (c.closed < 2) {
    uv_run(&d.loop, UV_RUN_ONCE);
    calm = c.written && quiet() ? calm + 1 : 0;
    if (calm >= 3 && !c.shut && !uv_is_closing((uv_handle_t *)&c.s)) {
      c.shut = 1;
      if (uv_shutdown(&c.sd, (uv_stream_t *)&c.s, on_shutdown) < 0)
        client_close(&c);
    }
  }
  /* Let the server see the close and free its side of the connection. */
  for (int i = 0; i < 4; i++)
    uv_run(&d.loop, UV_RUN_NOWAIT);
  tick_closed = 0;
  uv_close((uv_handle_t *)&tick, on_tick_closed);
  while (!tick_closed)
    uv_run(&d.loop, UV_RUN_NOWAIT);
  if (c.got >= 12 && memcmp(c.head, "HTTP/1.1 ", 9) == 0)
    return (int)strtol(c.head + 9, NULL, 10);
  return 0;
}

/* A request of the harness (unix socket). Returns the HTTP status. */
static int api(const char *method, const char *path, const char *body) {
  char req[2048];
  int n = snprintf(req, sizeof(req),
                   "%s %s HTTP/1.1\r\nHost: p2pd\r\nContent-Type: "
                   "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                   method, path, body != NULL ? strlen(body) : 0u,
                   body != NULL ? body : "");
  if (n < 0 || (size_t)n >= sizeof(req))
    abort();
  return client_run(1, req, (size_t)n);
}

static void api_ok(const char *method, const char *path, const char *body) {
  int st = api(method, path, body);
  if (st != 200) {
    fprintf(stderr, "fuzz_p2pd_http: baseline %s %s: HTTP %d\n", method, path,
            st);
    abort();
  }
}

/* ---- waiting for what an input started ----------------------------------- */

/* Runs the loop until the daemon is quiet (and RUNNING, at setup). */
static void settle(void) {
  static uv_timer_t tick;
  uint64_t until;

  uv_update_time(&d.loop);
  until = uv_now(&d.loop) + SETTLE_DEADLINE_MS;
  if (uv_timer_init(&d.loop, &tick) != 0 ||
      uv_timer_start(&tick, on_tick, 2, 2) != 0)
    abort();
  while (!quiet() || d.state == PEER_DAEMON_STARTING) {
    if (uv_now(&d.loop) > until) {
      fprintf(stderr,
              "fuzz_p2pd_http: not settled after %u ms: %u jobs, %u "
              "transfers, %u releases active\n",
              SETTLE_DEADLINE_MS, peer_workq_pending(&d.ctx.workq),
              peer_origin_inflight(d.origin), peer_releases_active(d.releases));
      abort();
    }
    uv_run(&d.loop, UV_RUN_ONCE);
  }
  tick_closed = 0;
  uv_close((uv_handle_t *)&tick, on_tick_closed);
  while (!tick_closed)
    uv_run(&d.loop, UV_RUN_NOWAIT);
}

/* ---- the baseline ------------------------------------------------------- */

static peer_release_t *find(const char *ds) {
  ws_hash_t h;
  if (ws_digest_from_str(ds, &h) != 0)
    abort();
  return peer_release_find(d.releases, &h);
}

/* Releases every hold of rel, named as the API shows them. */
static void drop_holds(const char *ds) {
  cJSON *o = peer_release_json(find(ds));
  const cJSON *h, *holds = cJSON_GetObjectItemCaseSensitive(o, "holds");
  char path[256];
  char *names[32];
  int n = 0;
  cJSON_ArrayForEach(h, holds) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(h, "name");
    if (cJSON_IsString(name) && n < 32)
      names[n++] = strdup(name->valuestring);
  }
  cJSON_Delete(o);
  for (int i = 0; i < n; i++) {
    if (names[i] == NULL)
      abort();
    snprintf(path, sizeof(path), "/api/v1/releases/%s/holds/%s", ds, names[i]);
    /* 404: it expired meanwhile. */
    if (api("DELETE", path, NULL) / 100 != 2 &&
        peer_release_holds_live(find(ds)) > 0)
      abort();
    free(names[i]);
  }
}

static void seed(const char *dir, const char *man) {
  char body[512];
  snprintf(body, sizeof(body), "{\"dir\":\"%s\",\"manifest\":\"%s\"}", dir,
           man);
  api_ok("POST", "/api/v1/seed", body);
}

static void set_pinned(const char *ds, int pinned) {
  char path[256];
  if (peer_release_pinned(find(ds)) == pinned)
    return;
  snprintf(path, sizeof(path), "/api/v1/releases/%s/%s", ds,
           pinned ? "pin" : "unpin");
  api_ok("POST", path, NULL);
}

static void baseline(void) {
  settle();
  /* Everything an input added goes (settled: READY or FAILED). */
  for (peer_release_t *r = peer_releases_first(d.releases), *next; r != NULL;
       r = next) {
    const char *ds = peer_release_digest_str(r);
    next = peer_release_next(r);
    if (ds != NULL && (strcmp(ds, DIGEST_A) == 0 || strcmp(ds, DIGEST_B) == 0 ||
                       strcmp(ds, DIGEST_C) == 0))
      continue;
    if (peer_release_state(r) != PEER_REL_READY &&
        peer_release_state(r) != PEER_REL_FAILED)
      abort();
    peer_release_remove(r);
  }
  if (find(DIGEST_A) == NULL)
    seed(dir_a, man_a);
  if (find(DIGEST_B) == NULL)
    seed(dir_b, man_b);
  set_pinned(DIGEST_A, 1);
  set_pinned(DIGEST_B, 0);
  drop_holds(DIGEST_A);
  drop_holds(DIGEST_B);
  if (find(DIGEST_C) == NULL) {
    /* Answered once it failed: 502 (S3 refused). */
    api("POST", "/api/v1/prefetch",
        "{\"uri\":\"" URI_C "\",\"digest\":\"" DIGEST_C "\"}");
    settle();
  }
  peer_release_t *a = find(DIGEST_A), *b = find(DIGEST_B), *c = find(DIGEST_C);
  if (a == NULL || b == NULL || c == NULL ||
      peer_release_state(a) != PEER_REL_READY ||
      peer_release_state(b) != PEER_REL_READY ||
      peer_release_state(c) != PEER_REL_FAILED)
    abort();
}

/* ---- setup --------------------------------------------------------------- */

static void write_file(const char *path, const char *bytes, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, bytes, len) != (ssize_t)len || close(fd) != 0)
    abort();
}

/* dir with two small files, and its manifest at man; checks the digest. */
static void make_release(const char *dir, const char *man, const char *model,
                         const char *want) {
  char path[256], ds[WS_DIGEST_STR_LEN + 1], err[256] = "";
  char *bytes = NULL;
  size_t len = 0;
  ws_manifest_t *m = NULL;
  ws_manifest_build_opts_t o = {.chunk_size = 0,
                                .model = model,
                                .version = "1",
                                .created_at = "2026-01-01T00:00:00Z",
                                .nthreads = 1};
  if (mkdir(dir, 0700) != 0)
    abort();
  snprintf(path, sizeof(path), "%s/config.json", dir);
  write_file(path, "{\"model\":\"fuzz\"}\n", 17);
  snprintf(path, sizeof(path), "%s/weights.bin", dir);
  write_file(path, model, strlen(model));
  if (ws_manifest_build(dir, &o, &m, err, sizeof(err)) != 0 ||
      ws_manifest_serialize(m, &bytes, &len) != 0) {
    fprintf(stderr, "fuzz_p2pd_http: manifest of %s: %s\n", dir, err);
    abort();
  }
  write_file(man, bytes, len);
  ws_digest_to_str(&m->digest, ds);
  if (strcmp(ds, want) != 0) {
    fprintf(stderr, "fuzz_p2pd_http: %s has digest %s, not %s\n", dir, ds,
            want);
    abort();
  }
  free(bytes);
  ws_manifest_free(m);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
                  struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void cleanup(void) {
  nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void find_tcp(uv_handle_t *h, void *arg) {
  struct sockaddr_in sa;
  int len = sizeof(sa);
  (void)arg;
  if (h->type == UV_TCP &&
      uv_tcp_getsockname((uv_tcp_t *)h, (struct sockaddr *)&sa, &len) == 0 &&
      sa.sin_family == AF_INET)
    tcp_port = ntohs(sa.sin_port);
}

static void s3_closed(void *arg) {
  *(int *)arg = 1;
}

/* The daemon's S3 client becomes one that fails at once: one attempt,
 * a refused loopback endpoint. Modules read ctx.s3 when they use it. */
static void replace_s3(void) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t salen = sizeof(sa);
  char endpoint[64];
  ws_s3_config_t s3c;
  int done = 0;

  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  s3_sink = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s3_sink < 0 || bind(s3_sink, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
      getsockname(s3_sink, (struct sockaddr *)&sa, &salen) != 0)
    abort();
  snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d",
           ntohs(sa.sin_port));
  ws_s3_close(d.ctx.s3, s3_closed, &done);
  while (!done)
    uv_run(&d.loop, UV_RUN_ONCE);
  ws_s3_config_default(&s3c);
  ws_s3_config_from_env(&s3c);
  s3c.endpoint = endpoint;
  s3c.region = "us-east-1";
  s3c.addressing = WS_S3_ADDR_PATH;
  s3c.max_concurrency = cfg.s3_concurrency + PEER_S3_CONTROL_SLOTS;
  s3c.max_attempts = 1;
  s3c.retry_window_ms = 0;
  s3c.connect_timeout_ms = 1000;
  if (ws_s3_new(&d.loop, &s3c, &d.ctx.s3) != 0)
    abort();
}

static void setup(void) {
  char cache[128], token[128], http[] = "127.0.0.1:0", level[] = "error";
  char threads[16];

  signal(SIGPIPE, SIG_IGN);
  snprintf(threads, sizeof(threads), "%d", PEER_THREADPOOL_SIZE);
  setenv("UV_THREADPOOL_SIZE", threads, 1);
  /* Static credentials: no credential file or metadata endpoint is read. */
  setenv("AWS_ACCESS_KEY_ID", "fuzz", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "fuzz-secret", 1);
  setenv("AWS_CONFIG_FILE", "/dev/null", 1);
  setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
  setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  snprintf(tmp, sizeof(tmp), "%s", "/tmp/fuzz-p2pd-XXXXXX");
  if (mkdtemp(tmp) == NULL)
    abort();
  atexit(cleanup);
  snprintf(cache, sizeof(cache), "%s/cache", tmp);
  snprintf(sock_path, sizeof(sock_path), "%s/api.sock", tmp);
  snprintf(token, sizeof(token), "%s/token", tmp);
  snprintf(dir_a, sizeof(dir_a), "%s/a", tmp);
  snprintf(dir_b, sizeof(dir_b), "%s/b", tmp);
  snprintf(man_a, sizeof(man_a), "%s/a.json", tmp);
  snprintf(man_b, sizeof(man_b), "%s/b.json", tmp);
  write_file(token, FUZZ_TOKEN "\n", sizeof(FUZZ_TOKEN));
  make_release(dir_a, man_a, "fuzz/a", DIGEST_A);
  make_release(dir_b, man_b, "fuzz/b", DIGEST_B);

  char *argv[] = {"p2pd",    "--cache",     cache, "--api",
                  sock_path, "--http",      http,  "--api-token-file",
                  token,     "--log-level", level, NULL};
  if (peer_config_load(&cfg, (int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) !=
      0)
    abort();
  ws_log_set_level(cfg.log_level);
  if (peer_daemon_init(&d, &cfg) != 0)
    abort();
  replace_s3();
  uv_walk(&d.loop, find_tcp, NULL);
  if (tcp_port == 0)
    abort();
  peer_daemon_start(&d);
  settle();
  if (d.state != PEER_DAEMON_RUNNING)
    abort();
  ready = 1;
  baseline();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ready)
    setup();
  if (size == 0)
    return 0;
  client_run(data[0] & 1, (const char *)data + 1, size - 1);
  baseline();
  return 0;
}
