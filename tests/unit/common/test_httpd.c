/* test_httpd.c - ws_httpd on a real uv loop. The server listens on a unix
 * socket and a TCP port on the main (loop) thread; a client thread speaks
 * raw HTTP over blocking sockets, records what it saw, and wakes the loop
 * when done. cmocka asserts run on the main thread only, after the client
 * thread is joined and the loop has closed clean.
 */
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "httpd_client.h"
#include "ws_httpd.h"

typedef struct fx_s fx_t;
typedef void (*fx_client_fn)(fx_t *fx, hc_t *c, hc_resp_t *r);

struct fx_s {
  uv_loop_t loop;
  ws_httpd_t *srv;
  ws_httpd_config_t cfg;
  char dir[64];
  char sock[128];
  int port;
  uv_async_t done;      /* client -> loop: finished */
  uv_async_t close_now; /* client -> loop: close the server now */
  bool srv_closing;
  uv_thread_t thr;
  fx_client_fn client;
  char fail[256]; /* first client-side failure */
  /* Loop-thread results, read after join (or atomically while running). */
  int srv_closed;
  int async_fired;
  int async_was_gone;
  int gone_calls; /* __atomic */
  int stream_limit_rc;
  int handled;            /* __atomic */
  ws_httpd_stats_t stats; /* the server's, as it closed */
};

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      if (fx->fail[0] == '\0')                                                 \
        snprintf(fx->fail, sizeof(fx->fail), "%s:%d: %s", __FILE__, __LINE__,  \
                 #cond);                                                       \
      return;                                                                  \
    }                                                                          \
  } while (0)

/* ---- handlers (loop thread) ------------------------------------------- */

static void h_hello(ws_httpd_req_t *req, void *arg) {
  fx_t *fx = arg;
  __atomic_add_fetch(&fx->handled, 1, __ATOMIC_SEQ_CST);
  ws_httpd_reply(req, 200, "text/plain", "hello", 5);
}

static void h_echo(ws_httpd_req_t *req, void *arg) {
  cJSON *in = NULL, *out;
  (void)arg;
  if (ws_httpd_req_json(req, &in) < 0) {
    ws_httpd_reply_error(req, 400, WS_EJSON, NULL);
    return;
  }
  out = cJSON_CreateObject();
  cJSON_AddItemToObject(out, "got", in);
  cJSON_AddStringToObject(out, "ctype",
                          ws_httpd_req_header(req, "content-type")
                              ? ws_httpd_req_header(req, "content-type")
                              : "");
  ws_httpd_reply_json(req, 200, out);
}

static void h_items(ws_httpd_req_t *req, void *arg) {
  char name[32], body[128];
  int n;
  int small = ws_httpd_req_query_get(req, "name", name, 3);
  int missing = ws_httpd_req_query_get(req, "nope", body, sizeof(body));
  (void)arg;
  n = ws_httpd_req_query_get(req, "name", name, sizeof(name));
  snprintf(body, sizeof(body), "%s|%s|%d|%s|%s", ws_httpd_req_path_rest(req),
           n >= 0 ? name : "ERR", n, small == WS_ELIMIT ? "limit" : "?",
           missing == WS_ENOTFOUND ? "notfound" : "?");
  ws_httpd_reply(req, 200, "text/plain", body, strlen(body));
}

typedef struct {
  uv_timer_t timer;
  ws_httpd_req_t *req;
  fx_t *fx;
} async_op_t;

static void async_op_closed(uv_handle_t *h) {
  free(h->data);
}

static void async_op_fire(uv_timer_t *t) {
  async_op_t *op = t->data;
  op->fx->async_fired++;
  op->fx->async_was_gone = ws_httpd_req_is_gone(op->req);
  ws_httpd_reply(op->req, 200, "text/plain", "late", 4);
  op->req = NULL;
  uv_close((uv_handle_t *)&op->timer, async_op_closed);
}

static void async_op_gone(ws_httpd_req_t *req, void *arg) {
  async_op_t *op = arg;
  uv_timer_stop(&op->timer);
  ws_httpd_req_drop(req);
  op->req = NULL;
  uv_close((uv_handle_t *)&op->timer, async_op_closed);
  __atomic_add_fetch(&op->fx->gone_calls, 1, __ATOMIC_SEQ_CST);
}

/* GET /async?ms=N[&gone=1]: answers "late" after N ms. */
static void h_async(ws_httpd_req_t *req, void *arg) {
  fx_t *fx = arg;
  char v[16];
  long ms = 50;
  async_op_t *op = calloc(1, sizeof(*op));

  if (op == NULL) {
    ws_httpd_reply_error(req, 500, -ENOMEM, NULL);
    return;
  }
  if (ws_httpd_req_query_get(req, "ms", v, sizeof(v)) > 0)
    ms = strtol(v, NULL, 10);
  op->req = req;
  op->fx = fx;
  uv_timer_init(&fx->loop, &op->timer);
  op->timer.data = op;
  if (ws_httpd_req_query_get(req, "gone", v, sizeof(v)) >= 0)
    ws_httpd_req_on_gone(req, async_op_gone, op);
  uv_timer_start(&op->timer, async_op_fire, (uint64_t)ms, 0);
}

static void h_stream(ws_httpd_req_t *req, void *arg) {
  fx_t *fx = arg;
  static char big[4096];
  int rc = ws_httpd_stream_begin(req, 200, "text/plain");

  if (rc == 0)
    rc = ws_httpd_stream_write(req, "line 1\n", 7);
  if (rc == 0)
    rc = ws_httpd_stream_write(req, "line 2\n", 7);
  if (rc == 0)
    fx->stream_limit_rc = ws_httpd_stream_write(req, big, sizeof(big));
  if (rc == 0)
    rc = ws_httpd_stream_write(req, "line 3\n", 7);
  (void)rc;
  ws_httpd_stream_end(req);
}

static void h_hdr(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  if (ws_httpd_req_add_header(req, "X-Test", "yes") != 0 ||
      ws_httpd_req_add_header(req, "Bad\r\nName", "x") != WS_EUSAGE) {
    ws_httpd_reply_error(req, 500, WS_EUSAGE, "add_header");
    return;
  }
  ws_httpd_reply(req, 204, NULL, NULL, 0);
}

/* ---- fixture ---------------------------------------------------------- */

static void fx_srv_closed(ws_httpd_t *srv, void *arg) {
  fx_t *fx = arg;
  ws_httpd_get_stats(srv, &fx->stats);
  fx->srv_closed++;
}

static void fx_close_server(fx_t *fx) {
  if (fx->srv_closing)
    return;
  fx->srv_closing = true;
  ws_httpd_close(fx->srv, fx_srv_closed, fx);
}

static void fx_on_close_now(uv_async_t *a) {
  fx_close_server(a->data);
}

static void fx_on_done(uv_async_t *a) {
  fx_t *fx = a->data;
  fx_close_server(fx);
  uv_close((uv_handle_t *)&fx->done, NULL);
  uv_close((uv_handle_t *)&fx->close_now, NULL);
}

static void fx_thread(void *arg) {
  fx_t *fx = arg;
  hc_t *c = calloc(1, sizeof(*c));
  hc_resp_t *r = calloc(1, sizeof(*r));

  c->fd = -1;
  if (c != NULL && r != NULL)
    fx->client(fx, c, r);
  else
    snprintf(fx->fail, sizeof(fx->fail), "out of memory");
  if (c != NULL)
    hc_close(c);
  free(c);
  free(r);
  uv_async_send(&fx->done);
}

static fx_t *fx_new(const ws_httpd_config_t *cfg) {
  fx_t *fx = calloc(1, sizeof(*fx));
  struct stat st;

  assert_non_null(fx);
  snprintf(fx->dir, sizeof(fx->dir), "/tmp/ws-httpd-XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  snprintf(fx->sock, sizeof(fx->sock), "%s/api.sock", fx->dir);
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  if (cfg != NULL)
    fx->cfg = *cfg;
  fx->cfg.name = "test";
  assert_int_equal(ws_httpd_new(&fx->loop, &fx->cfg, &fx->srv), 0);
  assert_int_equal(ws_httpd_listen_unix(fx->srv, fx->sock, 0660), 0);
  assert_int_equal(stat(fx->sock, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0660);
  assert_int_equal(ws_httpd_listen_tcp(fx->srv, "127.0.0.1:0", &fx->port), 0);
  assert_true(fx->port > 0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/hello",
                                  WS_HTTPD_MATCH_EXACT, h_hello, fx),
                   0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/hello",
                                  WS_HTTPD_MATCH_EXACT, h_hello, fx),
                   WS_EEXISTS);
  assert_int_equal(ws_httpd_route(fx->srv, "POST", "/echo",
                                  WS_HTTPD_MATCH_EXACT, h_echo, fx),
                   0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/items/",
                                  WS_HTTPD_MATCH_PREFIX, h_items, fx),
                   0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/async",
                                  WS_HTTPD_MATCH_EXACT, h_async, fx),
                   0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/stream",
                                  WS_HTTPD_MATCH_EXACT, h_stream, fx),
                   0);
  assert_int_equal(
      ws_httpd_route(fx->srv, "GET", "/hdr", WS_HTTPD_MATCH_EXACT, h_hdr, fx),
      0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "nopath",
                                  WS_HTTPD_MATCH_EXACT, h_hello, fx),
                   WS_EUSAGE);
  return fx;
}

/* Runs client on its own thread until it finishes, closes everything and
 * checks the loop closes clean. fx stays for the caller's checks. */
static void fx_run(fx_t *fx, fx_client_fn client) {
  fx->client = client;
  assert_int_equal(uv_async_init(&fx->loop, &fx->done, fx_on_done), 0);
  assert_int_equal(uv_async_init(&fx->loop, &fx->close_now, fx_on_close_now),
                   0);
  fx->done.data = fx;
  fx->close_now.data = fx;
  assert_int_equal(uv_thread_create(&fx->thr, fx_thread, fx), 0);
  assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_thread_join(&fx->thr), 0);
  if (fx->fail[0] != '\0')
    fail_msg("client: %s", fx->fail);
  assert_int_equal(fx->srv_closed, 1);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  /* libuv unlinks the socket file when the listener closes. */
  assert_int_equal(access(fx->sock, F_OK), -1);
  assert_int_equal(rmdir(fx->dir), 0);
}

static void fx_run_free(fx_t *fx, fx_client_fn client) {
  fx_run(fx, client);
  free(fx);
}

static int wait_atomic(int *p, int want, int timeout_ms) {
  for (int t = 0; t < timeout_ms; t += 5) {
    if (__atomic_load_n(p, __ATOMIC_SEQ_CST) >= want)
      return 0;
    hc_sleep_ms(5);
  }
  return -1;
}

/* ---- clients (client thread) ------------------------------------------ */

static void c_get_unix(fx_t *fx, hc_t *c, hc_resp_t *r) {
  char v[64];
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(strcmp(r->body, "hello") == 0);
  CHECK(hc_header(r, "Content-Type", v, sizeof(v)) == 0);
  CHECK(strcmp(v, "text/plain") == 0);
  CHECK(hc_header(r, "Connection", v, sizeof(v)) == 0);
  CHECK(strcmp(v, "keep-alive") == 0);
}

static void test_get_unix(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_get_unix);
}

static void c_post_json_tcp(fx_t *fx, hc_t *c, hc_resp_t *r) {
  static const char body[] = "{\"model\":\"llama\",\"n\":3}";
  char req[256];
  cJSON *j, *got;
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  snprintf(req, sizeof(req),
           "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: "
           "application/json\r\nContent-Length: %zu\r\n\r\n%s",
           sizeof(body) - 1, body);
  CHECK(hc_send_str(c, req) == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  j = cJSON_Parse(r->body);
  CHECK(j != NULL);
  got = cJSON_GetObjectItem(j, "got");
  CHECK(got != NULL && cJSON_GetObjectItem(got, "n") != NULL &&
        cJSON_GetObjectItem(got, "n")->valueint == 3);
  CHECK(strcmp(cJSON_GetObjectItem(j, "ctype")->valuestring,
               "application/json") == 0);
  cJSON_Delete(j);
  /* Malformed JSON: the handler's error reply, connection kept. */
  CHECK(hc_send_str(c, "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\n{x}") ==
        0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 400);
  CHECK(strstr(r->body, "\"code\":\"WS_EJSON\"") != NULL);
  /* Expect: 100-continue gets an interim 100 before the body is sent. */
  CHECK(hc_send_str(c, "POST /echo HTTP/1.1\r\nContent-Length: 2\r\n"
                       "Expect: 100-continue\r\n\r\n") == 0);
  CHECK(hc_read_head(c, r) == 0);
  CHECK(r->status == 100);
  CHECK(hc_send_str(c, "[]") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
}

static void test_post_json_tcp(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_post_json_tcp);
}

static void c_bytewise(fx_t *fx, hc_t *c, hc_resp_t *r) {
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_slowly(c, "POST /echo HTTP/1.1\r\nHost: x\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n"
                          "5\r\n[1,2,\r\n2\r\n3]\r\n0\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(strstr(r->body, "[1,2,3]") != NULL);
}

static void test_bytewise(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_bytewise);
}

static void c_headers_too_large(fx_t *fx, hc_t *c, hc_resp_t *r) {
  char *big = malloc(20 * 1024);
  char v[32];
  CHECK(big != NULL);
  memset(big, 'a', 20 * 1024 - 1);
  big[20 * 1024 - 1] = '\0';
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\nX-Big: ") == 0);
  (void)hc_send_str(c, big); /* the server may cut us off midway */
  free(big);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 431);
  CHECK(strstr(r->body, "\"code\":\"WS_ELIMIT\"") != NULL);
  CHECK(hc_header(r, "Connection", v, sizeof(v)) == 0);
  CHECK(strcmp(v, "close") == 0);
  CHECK(hc_wait_eof(c, 3000) == 0);
}

static void test_headers_too_large(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_headers_too_large);
}

static void c_body_too_large(fx_t *fx, hc_t *c, hc_resp_t *r) {
  char chunk[600];
  /* Declared length over the cap: refused before any body byte. */
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "POST /echo HTTP/1.1\r\nContent-Length: 2000\r\n\r\n") ==
        0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 413);
  CHECK(hc_wait_eof(c, 3000) == 0);
  hc_close(c);
  /* Chunked body growing past the cap. */
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "POST /echo HTTP/1.1\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n") == 0);
  memset(chunk, 'x', sizeof(chunk));
  for (int i = 0; i < 3; i++) {
    if (hc_send_str(c, "258\r\n") < 0 || hc_send(c, chunk, 600) < 0 ||
        hc_send_str(c, "\r\n") < 0)
      break;
  }
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 413);
}

static void test_body_too_large(void **state) {
  ws_httpd_config_t cfg = {.max_body_bytes = 1000};
  (void)state;
  fx_run_free(fx_new(&cfg), c_body_too_large);
}

static void c_malformed(fx_t *fx, hc_t *c, hc_resp_t *r) {
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GARBAGE\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 400);
  CHECK(strstr(r->body, "\"code\":\"WS_EBADMSG\"") != NULL);
  CHECK(hc_wait_eof(c, 3000) == 0);
  hc_close(c);
  /* Not origin-form. */
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GET http://h/hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 400);
  hc_close(c);
  /* Bad Content-Length. */
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "POST /echo HTTP/1.1\r\nContent-Length: x\r\n\r\n") ==
        0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 400);
}

static void test_malformed(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_malformed);
}

static void c_routes(fx_t *fx, hc_t *c, hc_resp_t *r) {
  char v[32];
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /nope HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 404);
  CHECK(strstr(r->body, "\"code\":\"WS_ENOTFOUND\"") != NULL);
  CHECK(hc_send_str(c, "DELETE /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 405);
  CHECK(hc_send_str(c, "GET /items/abc?x=1&name=a%20b+c HTTP/1.1\r\n\r\n") ==
        0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(strcmp(r->body, "abc|a b c|5|limit|notfound") == 0);
  CHECK(hc_send_str(c, "GET /items/?name=%zz HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(strncmp(r->body, "|ERR|", 5) == 0); /* bad %xx escape */
  CHECK(hc_send_str(c, "GET /hdr HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 204);
  CHECK(r->body_len == 0);
  CHECK(hc_header(r, "X-Test", v, sizeof(v)) == 0 && strcmp(v, "yes") == 0);
}

static void test_routes(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_routes);
}

static void c_keepalive(fx_t *fx, hc_t *c, hc_resp_t *r) {
  char v[32];
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  /* Two requests in one write: answered one after the other, in order. */
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n"
                       "GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 404);
  CHECK(hc_header(r, "Connection", v, sizeof(v)) == 0);
  CHECK(strcmp(v, "close") == 0);
  CHECK(hc_wait_eof(c, 3000) == 0);
  CHECK(__atomic_load_n(&fx->handled, __ATOMIC_SEQ_CST) == 3);
  hc_close(c);
  /* HTTP/1.0 without keep-alive is closed after the answer. */
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.0\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(hc_wait_eof(c, 3000) == 0);
}

static void test_keepalive(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_keepalive);
}

static void c_async(fx_t *fx, hc_t *c, hc_resp_t *r) {
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /async?ms=100 HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(strcmp(r->body, "late") == 0);
  /* Same connection is usable afterwards. */
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
}

static void test_async(void **state) {
  fx_t *fx = fx_new(NULL);
  (void)state;
  fx_run(fx, c_async);
  assert_int_equal(fx->async_fired, 1);
  assert_int_equal(fx->async_was_gone, 0);
  free(fx);
}

/* Client leaves before the async reply; the handler was told (on_gone). */
static void c_async_gone_cb(fx_t *fx, hc_t *c, hc_resp_t *r) {
  (void)r;
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /async?ms=5000&gone=1 HTTP/1.1\r\n\r\n") == 0);
  hc_sleep_ms(50);
  hc_close(c);
  CHECK(wait_atomic(&fx->gone_calls, 1, 3000) == 0);
}

static void test_async_gone_cb(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_async_gone_cb);
}

/* Client leaves; handler has no on_gone and answers late into the void. */
static void c_async_gone_late(fx_t *fx, hc_t *c, hc_resp_t *r) {
  (void)r;
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GET /async?ms=300 HTTP/1.1\r\n\r\n") == 0);
  hc_sleep_ms(50);
  hc_close(c);
  hc_sleep_ms(600); /* the timer fires while the server is still open */
}

static void test_async_gone_late(void **state) {
  fx_t *fx = fx_new(NULL);
  (void)state;
  fx->async_was_gone = -1;
  fx_run(fx, c_async_gone_late);
  assert_int_equal(fx->async_fired, 1);
  assert_int_equal(fx->async_was_gone, 1);
  free(fx);
}

/* Server closes while a handler holds a request: on_gone, client EOF. */
static void c_close_while_held(fx_t *fx, hc_t *c, hc_resp_t *r) {
  (void)r;
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /async?ms=5000&gone=1 HTTP/1.1\r\n\r\n") == 0);
  hc_sleep_ms(50);
  uv_async_send(&fx->close_now);
  CHECK(hc_wait_eof(c, 3000) == 0);
  CHECK(wait_atomic(&fx->gone_calls, 1, 3000) == 0);
}

static void test_close_while_held(void **state) {
  (void)state;
  fx_run_free(fx_new(NULL), c_close_while_held);
}

static void c_idle_timeout(fx_t *fx, hc_t *c, hc_resp_t *r) {
  uint64_t t0 = uv_hrtime();
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_wait_eof(c, 3000) == 0);
  CHECK(uv_hrtime() - t0 >= 100 * 1000000ull);
  hc_close(c);
  /* Half a request: 408. */
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\nHost: x\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 408);
  CHECK(strstr(r->body, "WS_ETIMEOUT") != NULL);
  CHECK(hc_wait_eof(c, 3000) == 0);
  hc_close(c);
  /* Idle after a keep-alive answer: closed quietly. */
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(hc_wait_eof(c, 3000) == 0);
}

static void test_idle_timeout(void **state) {
  ws_httpd_config_t cfg = {.idle_timeout_ms = 150};
  (void)state;
  fx_run_free(fx_new(&cfg), c_idle_timeout);
}

/* max_conns 1. A connection whose request a handler holds is busy: a new
 * one is refused. An idle keep-alive connection is not: the new one takes
 * its place. */
static void c_conn_cap(fx_t *fx, hc_t *c, hc_resp_t *r) {
  hc_t *c2 = calloc(1, sizeof(*c2));
  CHECK(c2 != NULL);
  c2->fd = -1;
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GET /async?ms=600 HTTP/1.1\r\n\r\n") == 0);
  hc_sleep_ms(150); /* dispatched: the handler holds it */
  if (hc_connect_unix(c2, fx->sock) == 0) {
    int rc = hc_read_response(c2, r);
    hc_close(c2);
    if (rc != 0 || r->status != 503)
      fprintf(stderr, "# rc=%d status=%d\n", rc, r->status);
    if (rc != 0 || r->status != 503 || strstr(r->body, "WS_EBUSY") == NULL) {
      free(c2);
      CHECK(!"over the cap, all busy: 503 WS_EBUSY");
    }
  }
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(strcmp(r->body, "late") == 0);
  /* c is idle now: a newcomer closes it and is served. */
  if (hc_connect_unix(c2, fx->sock) != 0 ||
      hc_send_str(c2, "GET /hello HTTP/1.1\r\n\r\n") != 0 ||
      hc_read_response(c2, r) != 0 || r->status != 200) {
    hc_close(c2);
    free(c2);
    CHECK(!"newcomer served after evicting the idle connection");
  }
  hc_close(c2);
  free(c2);
  CHECK(hc_wait_eof(c, 3000) == 0);
}

static void test_conn_cap(void **state) {
  ws_httpd_config_t cfg = {.max_conns = 1};
  fx_t *fx = fx_new(&cfg);
  (void)state;
  fx_run(fx, c_conn_cap);
  assert_int_equal(fx->stats.refused, 1);
  assert_int_equal(fx->stats.evicted, 1);
  free(fx);
}

/* A slow-loris client: one header byte now and then. Each byte is progress
 * for the idle timer (5 s), but the headers' deadline (300 ms from accept)
 * holds: 408 long before the idle timeout could fire. */
static void c_header_deadline(fx_t *fx, hc_t *c, hc_resp_t *r) {
  static const char req[] = "GET /hello HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaa"
                            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  uint64_t t0 = uv_hrtime();
  bool closed = false;
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  for (size_t i = 0; i < sizeof(req) - 1 && !closed; i++) {
    closed = hc_send(c, req + i, 1) != 0;
    hc_sleep_ms(40);
    closed = closed || uv_hrtime() - t0 > 4000 * 1000000ull;
  }
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 408);
  CHECK(strstr(r->body, "headers not received in time") != NULL);
  CHECK(uv_hrtime() - t0 < 3000 * 1000000ull);
  CHECK(hc_wait_eof(c, 3000) == 0);
  hc_close(c);
  /* A body trickled in likewise: its own deadline (300 ms). */
  t0 = uv_hrtime();
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "POST /echo HTTP/1.1\r\nContent-Type: application/json"
                       "\r\nContent-Length: 100\r\n\r\n") == 0);
  closed = false;
  for (int i = 0; i < 100 && !closed; i++) {
    closed = hc_send(c, " ", 1) != 0;
    hc_sleep_ms(40);
    closed = closed || uv_hrtime() - t0 > 4000 * 1000000ull;
  }
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 408);
  CHECK(strstr(r->body, "body not received in time") != NULL);
  CHECK(uv_hrtime() - t0 < 3000 * 1000000ull);
  hc_close(c);
  /* A keep-alive connection: the deadline counts from the next request's
   * first byte, not from the end of the last reply. */
  CHECK(hc_connect_tcp(c, fx->port) == 0);
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  hc_sleep_ms(500); /* idle, longer than the header deadline */
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
}

static void test_header_deadline(void **state) {
  ws_httpd_config_t cfg = {.idle_timeout_ms = 5000,
                           .header_timeout_ms = 300,
                           .body_timeout_ms = 300};
  fx_t *fx = fx_new(&cfg);
  (void)state;
  fx_run(fx, c_header_deadline);
  assert_int_equal(fx->stats.deadline_closed, 2);
  free(fx);
}

/* Slow clients fill the server (4 slots) with unfinished requests; a probe
 * still gets in: the longest reader is closed to make room, on TCP and on
 * the unix socket alike. */
static void c_evict(fx_t *fx, hc_t *c, hc_resp_t *r) {
  hc_t *slow = calloc(7, sizeof(*slow)); /* 4 slow clients, then 3 probes */
  hc_t *probe = slow + 4;
  int ok = slow != NULL;
  (void)c;
  for (int i = 0; ok && i < 7; i++)
    slow[i].fd = -1;
  for (int i = 0; ok && i < 4; i++) {
    ok = hc_connect_tcp(&slow[i], fx->port) == 0 &&
         hc_send_str(&slow[i], "GET /hello HTTP/1.1\r\nX-A: b") == 0;
    hc_sleep_ms(20); /* distinct read_since times: slow[0] is the oldest */
  }
  /* Each probe stays open (keep-alive, idle after its answer, but younger
   * than the slow clients): the next probe closes the next slow one. */
  for (int i = 0; ok && i < 3; i++) {
    ok = (i == 1 ? hc_connect_unix(&probe[i], fx->sock)
                 : hc_connect_tcp(&probe[i], fx->port)) == 0 &&
         hc_send_str(&probe[i], "GET /hello HTTP/1.1\r\n\r\n") == 0 &&
         hc_read_response(&probe[i], r) == 0 && r->status == 200;
    hc_sleep_ms(20);
  }
  /* The three oldest slow clients were closed for the probes. */
  for (int i = 0; ok && i < 3; i++)
    ok = hc_wait_eof(&slow[i], 2000) == 0;
  if (ok)
    ok = hc_wait_eof(&slow[3], 100) == -1; /* the youngest is still open */
  for (int i = 0; slow != NULL && i < 7; i++)
    hc_close(&slow[i]);
  free(slow);
  CHECK(ok);
}

static void test_evict(void **state) {
  ws_httpd_config_t cfg = {
      .max_conns = 4, .max_conns_per_addr = 4, .header_timeout_ms = 20000};
  fx_t *fx = fx_new(&cfg);
  (void)state;
  fx_run(fx, c_evict);
  assert_int_equal(fx->stats.evicted, 3);
  assert_int_equal(fx->stats.refused, 0);
  free(fx);
}

/* Two connections from 127.0.0.1, both busy (held by the handler): a third
 * from that address is refused, one from 127.0.0.2 is served. */
static void c_per_addr(fx_t *fx, hc_t *c, hc_resp_t *r) {
  hc_t *held = calloc(2, sizeof(*held));
  int ok = held != NULL;
  for (int i = 0; ok && i < 2; i++) {
    held[i].fd = -1;
    ok = hc_connect_tcp_from(&held[i], fx->port, "127.0.0.1") == 0 &&
         hc_send_str(&held[i], "GET /async?ms=700 HTTP/1.1\r\n\r\n") == 0;
  }
  hc_sleep_ms(150);
  ok = ok && hc_connect_tcp_from(c, fx->port, "127.0.0.1") == 0 &&
       hc_read_response(c, r) == 0 && r->status == 503 &&
       strstr(r->body, "too many connections") != NULL;
  hc_close(c);
  ok = ok && hc_connect_tcp_from(c, fx->port, "127.0.0.2") == 0 &&
       hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0 &&
       hc_read_response(c, r) == 0 && r->status == 200;
  for (int i = 0; ok && i < 2; i++)
    ok = hc_read_response(&held[i], r) == 0 && r->status == 200;
  for (int i = 0; held != NULL && i < 2; i++)
    hc_close(&held[i]);
  free(held);
  CHECK(ok);
}

static void test_per_addr(void **state) {
  ws_httpd_config_t cfg = {.max_conns = 8, .max_conns_per_addr = 2};
  fx_t *fx = fx_new(&cfg);
  (void)state;
  fx_run(fx, c_per_addr);
  assert_int_equal(fx->stats.refused, 1);
  assert_int_equal(fx->stats.evicted, 0);
  free(fx);
}

/* One exchange on a fresh connection; returns the status (0 if none). */
static int c_ask(fx_t *fx, hc_t *c, hc_resp_t *r, bool tcp, const char *req) {
  int st = 0;
  if ((tcp ? hc_connect_tcp(c, fx->port) : hc_connect_unix(c, fx->sock)) == 0 &&
      hc_send_str(c, req) == 0 && hc_read_response(c, r) == 0)
    st = r->status;
  hc_close(c);
  return st;
}

#define POST_ECHO(auth)                                                        \
  "POST /echo HTTP/1.1\r\nContent-Type: application/json\r\n" auth             \
  "Content-Length: 2\r\n\r\n{}"

static void c_auth(fx_t *fx, hc_t *c, hc_resp_t *r) {
  char v[128];
  /* Writes on TCP need the token. */
  CHECK(c_ask(fx, c, r, true, POST_ECHO("")) == 401);
  CHECK(strstr(r->body, "WS_EAUTH") != NULL);
  CHECK(hc_header(r, "WWW-Authenticate", v, sizeof(v)) == 0);
  CHECK(strncmp(v, "Bearer", 6) == 0);
  CHECK(c_ask(fx, c, r, true,
              POST_ECHO("Authorization: Bearer wrong-token-0123456\r\n")) ==
        401);
  CHECK(c_ask(fx, c, r, true,
              POST_ECHO("Authorization: Bearer s3cret-token-01234\r\n")) ==
        401); /* a prefix of the real one */
  CHECK(c_ask(fx, c, r, true,
              POST_ECHO(
                  "Authorization: Basic czNjcmV0LXRva2VuLTAxMjM0NQ==\r\n")) ==
        401);
  CHECK(c_ask(fx, c, r, true,
              POST_ECHO("Authorization: bearer  s3cret-token-012345\r\n")) ==
        200);
  /* Before its body: a 1 MiB body announced is not waited for. */
  CHECK(c_ask(fx, c, r, true,
              "POST /echo HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n") == 401);
  /* The unix socket is trusted. */
  CHECK(c_ask(fx, c, r, false, POST_ECHO("")) == 200);
  /* Reads are closed too (reads = 1), except the open paths. */
  CHECK(c_ask(fx, c, r, true, "GET /items/a HTTP/1.1\r\n\r\n") == 401);
  CHECK(c_ask(fx, c, r, true, "GET /nowhere HTTP/1.1\r\n\r\n") == 401);
  CHECK(c_ask(fx, c, r, true, "GET /hello HTTP/1.1\r\n\r\n") == 200);
  CHECK(c_ask(fx, c, r, true,
              "GET /items/a HTTP/1.1\r\nAuthorization: Bearer "
              "s3cret-token-012345\r\n\r\n") == 200);
}

static void test_auth(void **state) {
  static const char *const open_paths[] = {"/hello", NULL};
  ws_httpd_auth_t auth = {
      .token = "s3cret-token-012345", .reads = 1, .open_paths = open_paths};
  fx_t *fx = fx_new(NULL);
  (void)state;
  assert_int_equal(ws_httpd_set_auth(fx->srv, &auth), 0);
  fx_run(fx, c_auth);
  assert_int_equal(fx->stats.unauthorized, 7);
  free(fx);
}

/* Without reads, GET is open and the token still guards writes. */
static void c_auth_writes(fx_t *fx, hc_t *c, hc_resp_t *r) {
  CHECK(c_ask(fx, c, r, true, "GET /items/a HTTP/1.1\r\n\r\n") == 200);
  CHECK(c_ask(fx, c, r, true, POST_ECHO("")) == 401);
}

static void test_auth_writes(void **state) {
  ws_httpd_auth_t auth = {.token = "another-token-abcdef"};
  fx_t *fx = fx_new(NULL);
  (void)state;
  assert_int_equal(ws_httpd_set_auth(fx->srv, &auth), 0);
  fx_run(fx, c_auth_writes);
  free(fx);
}

static void c_stream(fx_t *fx, hc_t *c, hc_resp_t *r) {
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /stream HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(r->chunked);
  CHECK(strcmp(r->body, "line 1\nline 2\nline 3\n") == 0);
  /* keep-alive after a chunked stream */
  CHECK(hc_send_str(c, "GET /hello HTTP/1.1\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  hc_close(c);
  /* HTTP/1.0: no chunking, body to EOF */
  CHECK(hc_connect_unix(c, fx->sock) == 0);
  CHECK(hc_send_str(c, "GET /stream HTTP/1.0\r\n\r\n") == 0);
  CHECK(hc_read_response(c, r) == 0);
  CHECK(r->status == 200);
  CHECK(!r->chunked);
  CHECK(strcmp(r->body, "line 1\nline 2\nline 3\n") == 0);
}

static void test_stream(void **state) {
  ws_httpd_config_t cfg = {.max_write_queue_bytes = 1024};
  fx_t *fx = fx_new(&cfg);
  (void)state;
  fx_run(fx, c_stream);
  assert_int_equal(fx->stream_limit_rc, WS_ELIMIT);
  free(fx);
}

/* ---- setup-only tests (no client) ------------------------------------- */

static void test_listen_errors(void **state) {
  uv_loop_t loop;
  ws_httpd_t *srv;
  char dir[] = "/tmp/ws-httpd-XXXXXX", path[128];
  struct sockaddr_un sa;
  int fd, port;
  FILE *f;
  (void)state;

  assert_non_null(mkdtemp(dir));
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(ws_httpd_new(&loop, NULL, &srv), 0);
  /* A regular file is not ours to remove. */
  snprintf(path, sizeof(path), "%s/file", dir);
  f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  assert_int_equal(ws_httpd_listen_unix(srv, path, 0660), -EEXIST);
  assert_int_equal(unlink(path), 0);
  /* A stale socket left behind is replaced. */
  snprintf(path, sizeof(path), "%s/stale.sock", dir);
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(fd);
  assert_int_equal(ws_httpd_listen_unix(srv, path, 0600), 0);
  /* A live socket (ours, now) is not taken over. */
  assert_int_equal(ws_httpd_listen_unix(srv, path, 0600), -EADDRINUSE);
  assert_int_equal(ws_httpd_listen_tcp(srv, "bogus", NULL), WS_EUSAGE);
  assert_int_equal(ws_httpd_listen_tcp(srv, "127.0.0.1:99999", NULL),
                   WS_EUSAGE);
  assert_int_equal(ws_httpd_listen_tcp(srv, "localhost:0", &port), 0);
  assert_int_equal(ws_httpd_listen_tcp(srv, "[::1:0", NULL), WS_EUSAGE);
  assert_int_equal(ws_httpd_listen_tcp(srv, ":x", NULL), WS_EUSAGE);
  ws_httpd_close(srv, NULL, NULL);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  assert_int_equal(rmdir(dir), 0);
}

static void test_status_text(void **state) {
  (void)state;
  assert_string_equal(ws_httpd_status_text(404), "Not Found");
  assert_string_equal(ws_httpd_status_text(431),
                      "Request Header Fields Too Large");
  assert_string_equal(ws_httpd_status_text(799), "Unknown");
}

int main(void) {
  /* As in p2pd and p2p-tracker: libuv writes to sockets with write(2), so
   * a peer that hangs up mid-reply must not kill the process. */
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_text),
      cmocka_unit_test(test_listen_errors),
      cmocka_unit_test(test_get_unix),
      cmocka_unit_test(test_post_json_tcp),
      cmocka_unit_test(test_bytewise),
      cmocka_unit_test(test_headers_too_large),
      cmocka_unit_test(test_body_too_large),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_routes),
      cmocka_unit_test(test_keepalive),
      cmocka_unit_test(test_async),
      cmocka_unit_test(test_async_gone_cb),
      cmocka_unit_test(test_async_gone_late),
      cmocka_unit_test(test_close_while_held),
      cmocka_unit_test(test_idle_timeout),
      cmocka_unit_test(test_conn_cap),
      cmocka_unit_test(test_header_deadline),
      cmocka_unit_test(test_evict),
      cmocka_unit_test(test_per_addr),
      cmocka_unit_test(test_auth),
      cmocka_unit_test(test_auth_writes),
      cmocka_unit_test(test_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
