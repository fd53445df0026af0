/* test_curl_uv.c - the curl<->libuv glue (storage/s3/curl_uv.c) on a real
 * uv loop, against a small HTTP/1.1 server that runs on the same loop
 * (127.0.0.1, an ephemeral port). The server's routes:
 *
 *   /body/N        200 with N pattern bytes; the connection stays open
 *   /body/N/close  the same with "Connection: close", then the server closes
 *   /half/N        headers announcing N bytes, the first N/2 of them, silence
 *   /stall         reads the request and never answers
 *
 * Byte i of every body is pat(i), and the client checks each byte it is
 * handed against it, so a lost, repeated or reordered piece fails the test.
 * Callbacks only record; cmocka asserts run after the loop has stopped, and
 * every test ends with uv_loop_close == 0 (no handle, poll or timer left).
 */
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "curl_uv.h"

#define MAX_XF 8
#define GUARD_MS 10000
#define REQ_MAX 4096

typedef struct fx_s fx_t;

/* One client transfer: the easy handle, what it received, how it ended. */
typedef struct {
  ws_curl_uv_xfer_t x; /* x.data = this */
  fx_t *fx;
  int added;      /* handed to the glue, not yet done or removed */
  uint64_t want;  /* body bytes the server will send */
  uint64_t got;   /* body bytes accepted by on_write */
  int64_t bad_at; /* first byte that differs from pat(), or -1 */
  unsigned done_calls;
  CURLcode result;
  long http;
  uint64_t t_add, t_done; /* uv_hrtime, ns */
  /* pausing: pause on odd write calls while pauses < pause_max */
  unsigned pause_max, writes, pauses, resumes;
  int paused;
  uint64_t got_at_pause;
  int moved_while_paused; /* data delivered while paused: a bug */
} xf_t;

typedef struct srv_conn_s {
  uv_tcp_t tcp;
  fx_t *fx;
  struct srv_conn_s *next;
  char buf[REQ_MAX];
  size_t len;
  int closing;
} srv_conn_t;

typedef struct {
  uv_write_t req;
  srv_conn_t *c;
  int close_after;
  uv_buf_t buf;
} srv_write_t;

struct fx_s {
  uv_loop_t loop;
  ws_curl_uv_t *cu;
  int cu_closed;
  /* server */
  uv_tcp_t lsn;
  int lsn_open;
  uint16_t port;
  srv_conn_t *conns;
  unsigned accepted, requests, peer_closed;
  /* timers: the guard (fails the test) and one for the test's own use */
  uv_timer_t guard, t;
  int guard_fired;
  /* client */
  xf_t xf[MAX_XF];
  unsigned ndone, want_done; /* want_done: finish once ndone reaches it */
  int finishing;
  unsigned rounds;     /* readd_in_done */
  int all_ok;          /* readd_in_done: every round's body was right */
  int add_rc;          /* ws_curl_uv_add's answer where a test records it */
  int closed_in_cb;    /* cu_closed seen inside the done that closed it */
  unsigned active_max; /* ws_curl_uv_active() right after adding */
  unsigned active_after_remove;
  void (*done_hook)(xf_t *x);
  void (*write_hook)(xf_t *x);
  void (*peer_closed_hook)(fx_t *fx);
};

static uint8_t pat(uint64_t i) {
  return (uint8_t)((i * 0x9E3779B97F4A7C15ull) >> 56);
}

/* ---- server ------------------------------------------------------------ */

static void srv_conn_closed(uv_handle_t *h) {
  srv_conn_t *c = h->data;
  for (srv_conn_t **pp = &c->fx->conns; *pp; pp = &(*pp)->next) {
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  }
  free(c);
}

static void srv_conn_close(srv_conn_t *c) {
  if (c->closing)
    return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->tcp, srv_conn_closed);
}

static void srv_written(uv_write_t *req, int status) {
  srv_write_t *w = (srv_write_t *)req;
  (void)status;
  if (w->close_after)
    srv_conn_close(w->c);
  free(w->buf.base);
  free(w);
}

/* Sends headers announcing total bytes and the first send of them. */
static void srv_send(srv_conn_t *c, uint64_t total, uint64_t send,
                     int close_after) {
  char hdr[256];
  int n = snprintf(hdr, sizeof(hdr),
                   "HTTP/1.1 200 OK\r\nContent-Length: %" PRIu64 "\r\n%s\r\n",
                   total, close_after ? "Connection: close\r\n" : "");
  srv_write_t *w = calloc(1, sizeof(*w));
  char *p = malloc((size_t)n + send);
  assert_non_null(w);
  assert_non_null(p);
  memcpy(p, hdr, (size_t)n);
  for (uint64_t i = 0; i < send; i++)
    p[(size_t)n + i] = (char)pat(i);
  w->c = c;
  w->close_after = close_after;
  w->buf = uv_buf_init(p, (unsigned)((size_t)n + send));
  assert_int_equal(
      uv_write(&w->req, (uv_stream_t *)&c->tcp, &w->buf, 1, srv_written), 0);
}

static void srv_route(srv_conn_t *c, const char *path) {
  unsigned long long n = 0;
  char tail[16] = "";
  c->fx->requests++;
  if (sscanf(path, "/body/%llu%15s", &n, tail) >= 1)
    srv_send(c, n, n, strcmp(tail, "/close") == 0);
  else if (sscanf(path, "/half/%llu", &n) == 1)
    srv_send(c, n, n / 2, 0);
  /* /stall and anything else: no answer */
}

/* Answers every complete request in the buffer, in order. */
static void srv_serve(srv_conn_t *c) {
  char *end;
  while (!c->closing && (end = memmem(c->buf, c->len, "\r\n\r\n", 4))) {
    size_t used = (size_t)(end - c->buf) + 4;
    char path[256] = "";
    if (sscanf(c->buf, "GET %255s HTTP/1.1", path) == 1)
      srv_route(c, path);
    else
      srv_conn_close(c);
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
  }
}

static void srv_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  srv_conn_t *c = h->data;
  (void)hint;
  *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - c->len));
}

static void srv_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  srv_conn_t *c = s->data;
  (void)buf;
  if (n < 0) { /* EOF or reset: the client closed its end */
    fx_t *fx = c->fx;
    fx->peer_closed++;
    srv_conn_close(c);
    if (fx->peer_closed_hook)
      fx->peer_closed_hook(fx);
    return;
  }
  c->len += (size_t)n;
  if (c->len == sizeof(c->buf))
    srv_conn_close(c); /* a request this long is not one of ours */
  else
    srv_serve(c);
}

static void srv_accept(uv_stream_t *lsn, int status) {
  fx_t *fx = lsn->data;
  assert_int_equal(status, 0);
  srv_conn_t *c = calloc(1, sizeof(*c));
  assert_non_null(c);
  c->fx = fx;
  assert_int_equal(uv_tcp_init(&fx->loop, &c->tcp), 0);
  c->tcp.data = c;
  c->next = fx->conns;
  fx->conns = c;
  assert_int_equal(uv_accept(lsn, (uv_stream_t *)&c->tcp), 0);
  fx->accepted++;
  assert_int_equal(uv_read_start((uv_stream_t *)&c->tcp, srv_alloc, srv_read),
                   0);
}

/* ---- fixture ----------------------------------------------------------- */

static void on_cu_closed(void *arg) {
  fx_t *fx = arg;
  fx->cu_closed++;
}

/* Closes the glue (after taking back any transfer still added), the server
 * and the timers; the loop then runs dry. Safe to call more than once. */
static void fx_finish(fx_t *fx) {
  if (fx->finishing)
    return;
  fx->finishing = 1;
  for (unsigned i = 0; i < MAX_XF; i++) {
    if (fx->xf[i].added) {
      ws_curl_uv_remove(fx->cu, &fx->xf[i].x);
      fx->xf[i].added = 0;
    }
  }
  ws_curl_uv_close(fx->cu, on_cu_closed, fx);
  if (fx->lsn_open) {
    fx->lsn_open = 0;
    uv_close((uv_handle_t *)&fx->lsn, NULL);
  }
  for (srv_conn_t *c = fx->conns; c; c = c->next)
    srv_conn_close(c);
  uv_close((uv_handle_t *)&fx->guard, NULL);
  uv_close((uv_handle_t *)&fx->t, NULL);
}

static void on_guard(uv_timer_t *t) {
  fx_t *fx = t->data;
  fx->guard_fired = 1;
  fx_finish(fx);
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *arg) {
  xf_t *x = arg;
  size_t len = size * nmemb;
  x->writes++;
  if (x->paused)
    x->moved_while_paused = 1;
  if (x->pauses < x->pause_max && x->writes % 2 == 1) {
    x->paused = 1;
    x->pauses++;
    x->got_at_pause = x->got;
    if (x->fx->write_hook)
      x->fx->write_hook(x);
    return CURL_WRITEFUNC_PAUSE; /* the same bytes come again on resume */
  }
  for (size_t i = 0; i < len; i++) {
    if (x->bad_at < 0 && (uint8_t)p[i] != pat(x->got + i))
      x->bad_at = (int64_t)(x->got + i);
  }
  x->got += len;
  if (x->fx->write_hook)
    x->fx->write_hook(x);
  return len;
}

static void on_done(ws_curl_uv_xfer_t *cx, CURLcode result) {
  xf_t *x = cx->data;
  fx_t *fx = x->fx;
  x->added = 0;
  x->done_calls++;
  x->result = result;
  x->t_done = uv_hrtime();
  curl_easy_getinfo(cx->easy, CURLINFO_RESPONSE_CODE, &x->http);
  fx->ndone++;
  if (fx->done_hook)
    fx->done_hook(x);
  if (fx->want_done && fx->ndone == fx->want_done)
    fx_finish(fx);
}

static void fx_init(fx_t *fx) {
  memset(fx, 0, sizeof(*fx));
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  assert_int_equal(ws_curl_uv_new(&fx->loop, &fx->cu), 0);
  assert_int_equal(uv_tcp_init(&fx->loop, &fx->lsn), 0);
  fx->lsn.data = fx;
  struct sockaddr_in sa;
  assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &sa), 0);
  assert_int_equal(uv_tcp_bind(&fx->lsn, (struct sockaddr *)&sa, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&fx->lsn, 64, srv_accept), 0);
  int len = sizeof(sa);
  assert_int_equal(uv_tcp_getsockname(&fx->lsn, (struct sockaddr *)&sa, &len),
                   0);
  fx->port = ntohs(sa.sin_port);
  fx->lsn_open = 1;
  uv_timer_init(&fx->loop, &fx->guard);
  uv_timer_init(&fx->loop, &fx->t);
  fx->guard.data = fx->t.data = fx;
  uv_timer_start(&fx->guard, on_guard, GUARD_MS, 0);
  for (unsigned i = 0; i < MAX_XF; i++) {
    xf_t *x = &fx->xf[i];
    x->fx = fx;
    x->bad_at = -1;
    x->x.data = x;
    x->x.done = on_done;
  }
}

/* A GET of path on the fixture's server (or on port, when not 0). */
static void xf_prepare(xf_t *x, const char *path, uint64_t want,
                       long timeout_ms, uint16_t port) {
  char url[160];
  snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port ? port : x->fx->port,
           path);
  if (!x->x.easy)
    x->x.easy = curl_easy_init();
  CURL *e = x->x.easy;
  assert_non_null(e);
  x->want = want;
  x->got = 0;
  x->bad_at = -1;
  assert_int_equal(curl_easy_setopt(e, CURLOPT_URL, url), CURLE_OK);
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms ? timeout_ms : 8000L);
}

static void xf_add(xf_t *x) {
  x->t_add = uv_hrtime();
  assert_int_equal(ws_curl_uv_add(x->fx->cu, &x->x), 0);
  x->added = 1;
}

/* Runs the loop dry, then checks that nothing was left behind. */
static void fx_run(fx_t *fx) {
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  for (unsigned i = 0; i < MAX_XF; i++) {
    if (fx->xf[i].x.easy)
      curl_easy_cleanup(fx->xf[i].x.easy);
    fx->xf[i].x.easy = NULL;
  }
  assert_false(fx->guard_fired);
  assert_int_equal(fx->cu_closed, 1);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
}

/* A finished transfer that got all its body, right. */
static void assert_body_ok(const xf_t *x) {
  assert_int_equal(x->done_calls, 1);
  assert_int_equal(x->result, CURLE_OK);
  assert_int_equal(x->http, 200);
  assert_int_equal(x->bad_at, -1);
  assert_int_equal(x->got, x->want);
}

/* ---- tests ------------------------------------------------------------- */

static void test_get_body(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.want_done = 1;
  xf_prepare(&fx.xf[0], "/body/100000", 100000, 0, 0);
  xf_add(&fx.xf[0]);
  assert_int_equal(ws_curl_uv_active(fx.cu), 1);
  fx_run(&fx);
  assert_body_ok(&fx.xf[0]);
  assert_int_equal(fx.requests, 1);
}

static void test_concurrent(void **state) {
  (void)state;
  static const uint64_t sizes[MAX_XF] = {
      0, 1, 1000, 16384, 65537, 300000, 1u << 20, (3u << 20) + 5};
  fx_t fx;
  fx_init(&fx);
  fx.want_done = MAX_XF;
  for (unsigned i = 0; i < MAX_XF; i++) {
    char path[64];
    snprintf(path, sizeof(path), "/body/%" PRIu64, sizes[i]);
    xf_prepare(&fx.xf[i], path, sizes[i], 0, 0);
    xf_add(&fx.xf[i]);
  }
  fx.active_max = ws_curl_uv_active(fx.cu);
  fx_run(&fx);
  assert_int_equal(fx.active_max, MAX_XF);
  for (unsigned i = 0; i < MAX_XF; i++)
    assert_body_ok(&fx.xf[i]);
  /* all at once: one connection each, none waited for another's */
  assert_int_equal(fx.accepted, MAX_XF);
  assert_int_equal(fx.requests, MAX_XF);
}

static void on_resume(uv_timer_t *t) {
  xf_t *x = t->data;
  if (x->got != x->got_at_pause)
    x->moved_while_paused = 1;
  x->paused = 0;
  x->resumes++;
  curl_easy_pause(x->x.easy, CURLPAUSE_CONT);
}

static uint64_t g_resume_ms;

/* Paused from on_write: resume from the loop after g_resume_ms. */
static void resume_later(xf_t *x) {
  if (!x->paused || uv_is_active((uv_handle_t *)&x->fx->t))
    return;
  x->fx->t.data = x;
  uv_timer_start(&x->fx->t, on_resume, g_resume_ms, 0);
}

static void test_pause_resume(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.want_done = 1;
  fx.write_hook = resume_later;
  g_resume_ms = 150;
  xf_t *x = &fx.xf[0];
  xf_prepare(x, "/body/262144", 262144, 0, 0);
  x->pause_max = 1;
  xf_add(x);
  fx_run(&fx);
  assert_body_ok(x);
  assert_int_equal(x->pauses, 1);
  assert_int_equal(x->resumes, 1);
  assert_false(x->moved_while_paused);
  /* the transfer stood still for the whole pause */
  assert_true(x->t_done - x->t_add >= 140u * 1000000u);
}

static void test_pause_resume_many(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.want_done = 1;
  fx.write_hook = resume_later;
  g_resume_ms = 0;
  xf_t *x = &fx.xf[0];
  xf_prepare(x, "/body/2000003", 2000003, 0, 0);
  x->pause_max = 1000;
  xf_add(x);
  fx_run(&fx);
  assert_body_ok(x);
  assert_true(x->pauses >= 8);
  assert_int_equal(x->resumes, x->pauses);
  assert_false(x->moved_while_paused);
}

/* remove_mid_transfer: once 64 KiB arrived, take the transfer back from a
 * timer (not from inside curl), then start another on the same glue. */
static void on_remove_timer(uv_timer_t *t) {
  fx_t *fx = t->data;
  ws_curl_uv_remove(fx->cu, &fx->xf[0].x);
  fx->xf[0].added = 0;
  fx->active_after_remove = ws_curl_uv_active(fx->cu);
  xf_prepare(&fx->xf[1], "/body/5000", 5000, 0, 0);
  xf_add(&fx->xf[1]);
}

static void remove_at_64k(xf_t *x) {
  fx_t *fx = x->fx;
  if (x == &fx->xf[0] && x->got >= 65536 &&
      !uv_is_active((uv_handle_t *)&fx->t) && fx->xf[0].added) {
    fx->t.data = fx;
    uv_timer_start(&fx->t, on_remove_timer, 0, 0);
  }
}

static void remove_maybe_finish(fx_t *fx) {
  if (fx->peer_closed >= 1 && fx->xf[1].done_calls == 1)
    fx_finish(fx);
}

static void remove_done(xf_t *x) {
  remove_maybe_finish(x->fx);
}

static void test_remove_mid_transfer(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.write_hook = remove_at_64k;
  fx.done_hook = remove_done;
  fx.peer_closed_hook = remove_maybe_finish;
  xf_prepare(&fx.xf[0], "/half/4000000", 4000000, 0, 0);
  xf_add(&fx.xf[0]);
  fx_run(&fx);
  const xf_t *x = &fx.xf[0];
  assert_int_equal(x->done_calls, 0); /* removed: never reported */
  assert_true(x->got >= 65536 && x->got <= 2000000);
  assert_int_equal(x->bad_at, -1);
  assert_int_equal(fx.active_after_remove, 0);
  /* the removed transfer's socket was closed: the server saw its end */
  assert_int_equal(fx.peer_closed, 1);
  assert_body_ok(&fx.xf[1]);
  assert_int_equal(fx.accepted, 2);
}

static uint16_t closed_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  socklen_t len = sizeof(sa);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  close(fd); /* bound, never listened: connecting is refused */
  return ntohs(sa.sin_port);
}

static void test_connect_refused(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.want_done = 1;
  xf_prepare(&fx.xf[0], "/body/10", 10, 0, closed_port());
  xf_add(&fx.xf[0]);
  fx_run(&fx);
  const xf_t *x = &fx.xf[0];
  assert_int_equal(x->done_calls, 1);
  assert_int_equal(x->result, CURLE_COULDNT_CONNECT);
  assert_int_equal(x->http, 0);
  assert_int_equal(x->got, 0);
  assert_int_equal(fx.accepted, 0);
}

static void test_timeout_no_answer(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.want_done = 1;
  xf_prepare(&fx.xf[0], "/stall", 0, 200, 0);
  xf_add(&fx.xf[0]);
  fx_run(&fx);
  const xf_t *x = &fx.xf[0];
  assert_int_equal(x->done_calls, 1);
  assert_int_equal(x->result, CURLE_OPERATION_TIMEDOUT);
  assert_int_equal(fx.requests, 1); /* the request did reach the server */
  uint64_t ms = (x->t_done - x->t_add) / 1000000u;
  assert_true(ms >= 190 && ms < 3000);
}

static void test_timeout_mid_body(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.want_done = 1;
  xf_prepare(&fx.xf[0], "/half/400000", 400000, 300, 0);
  xf_add(&fx.xf[0]);
  fx_run(&fx);
  const xf_t *x = &fx.xf[0];
  assert_int_equal(x->done_calls, 1);
  assert_int_equal(x->result, CURLE_OPERATION_TIMEDOUT);
  assert_int_equal(x->http, 200);
  assert_int_equal(x->got, 200000); /* every byte that was sent, right */
  assert_int_equal(x->bad_at, -1);
  uint64_t ms = (x->t_done - x->t_add) / 1000000u;
  assert_true(ms >= 290 && ms < 3000);
}

/* close_in_done: the owner closes the glue from its done callback. */
static void close_in_done(xf_t *x) {
  fx_t *fx = x->fx;
  fx_finish(fx);
  fx->closed_in_cb = fx->cu_closed; /* deferred: still 0 here */
  xf_prepare(&fx->xf[1], "/body/1", 1, 0, 0);
  fx->add_rc = ws_curl_uv_add(fx->cu, &fx->xf[1].x);
}

static void test_close_in_done(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.done_hook = close_in_done;
  xf_prepare(&fx.xf[0], "/body/1000", 1000, 0, 0);
  xf_add(&fx.xf[0]);
  fx_run(&fx);
  assert_body_ok(&fx.xf[0]);
  assert_int_equal(fx.closed_in_cb, 0);
  assert_int_equal(fx.add_rc, WS_ECANCELED);
  assert_int_equal(fx.xf[1].done_calls, 0);
  assert_int_equal(fx.requests, 1);
}

/* readd_in_done: 20 GETs in a row on one easy handle, each added again
 * from the previous one's done; odd rounds ask the server to close. */
#define ROUNDS 20u

static void readd_next(xf_t *x) {
  char path[64];
  uint64_t n = 1000u * x->fx->rounds + 1;
  snprintf(path, sizeof(path), "/body/%" PRIu64 "%s", n,
           x->fx->rounds % 2 ? "/close" : "");
  xf_prepare(x, path, n, 0, 0);
  x->fx->add_rc = ws_curl_uv_add(x->fx->cu, &x->x);
  x->added = x->fx->add_rc == 0;
}

static void readd_in_done(xf_t *x) {
  fx_t *fx = x->fx;
  if (x->result != CURLE_OK || x->http != 200 || x->bad_at != -1 ||
      x->got != x->want)
    fx->all_ok = 0;
  if (++fx->rounds == ROUNDS || fx->add_rc != 0)
    fx_finish(fx);
  else
    readd_next(x);
}

static void test_readd_in_done(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx);
  fx.all_ok = 1;
  fx.done_hook = readd_in_done;
  readd_next(&fx.xf[0]);
  fx_run(&fx);
  assert_int_equal(fx.add_rc, 0);
  assert_int_equal(fx.rounds, ROUNDS);
  assert_int_equal(fx.xf[0].done_calls, ROUNDS);
  assert_true(fx.all_ok);
  assert_int_equal(fx.requests, ROUNDS);
  /* kept-alive connections were reused, closed ones replaced */
  assert_true(fx.accepted >= ROUNDS / 2 && fx.accepted < ROUNDS);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_body),
      cmocka_unit_test(test_concurrent),
      cmocka_unit_test(test_pause_resume),
      cmocka_unit_test(test_pause_resume_many),
      cmocka_unit_test(test_remove_mid_transfer),
      cmocka_unit_test(test_connect_refused),
      cmocka_unit_test(test_timeout_no_answer),
      cmocka_unit_test(test_timeout_mid_body),
      cmocka_unit_test(test_close_in_done),
      cmocka_unit_test(test_readd_in_done),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
