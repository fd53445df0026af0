/* test_ctl_http.c - p2pctl's HTTP client (tools/ctl_http.c) against a real
 * ws_httpd on a unix socket. The server runs on the main thread's uv loop;
 * the blocking client calls run on a second thread and record results that
 * the main thread asserts after joining it.
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
#include <unistd.h>
#include <uv.h>

#include "../../../tools/ctl.h"
#include "../../../tools/ctl_http.h"
#include "ws_httpd.h"

typedef struct fx_s fx_t;
typedef void (*fx_client_fn)(fx_t *fx);

struct fx_s {
  uv_loop_t loop;
  ws_httpd_t *srv;
  char dir[64];
  char sock[128];
  uv_async_t done;
  uv_thread_t thr;
  fx_client_fn client;
  char fail[256];
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

static void h_status(ws_httpd_req_t *req, void *arg) {
  cJSON *j = cJSON_CreateObject();
  (void)arg;
  cJSON_AddBoolToObject(j, "ok", 1);
  ws_httpd_reply_json(req, 200, j);
}

static void h_echo(ws_httpd_req_t *req, void *arg) {
  cJSON *in = NULL;
  (void)arg;
  if (ws_httpd_req_json(req, &in) < 0) {
    ws_httpd_reply_error(req, 400, WS_EUSAGE, "body must be JSON");
    return;
  }
  ws_httpd_reply_json(req, 201, in);
}

static void h_s3fail(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  ws_httpd_reply_error(req, 502, WS_ES3AUTH, NULL);
}

static void h_text(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  ws_httpd_reply(req, 200, "text/plain", "not json", 8);
}

static void hang_gone(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  ws_httpd_req_drop(req);
}

/* Never answered; the client gives up, the conn closes, we drop it. */
static void h_hang(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  ws_httpd_req_on_gone(req, hang_gone, NULL);
}

static void h_stream(ws_httpd_req_t *req, void *arg) {
  static const char *const k_lines[] = {"one\n", "two\r\n", "thr",
                                        "ee\n",  "",        "last"};
  (void)arg;
  if (ws_httpd_stream_begin(req, 200, "text/plain") == 0) {
    for (size_t i = 0; i < sizeof(k_lines) / sizeof(k_lines[0]); i++) {
      if (ws_httpd_stream_write(req, k_lines[i], strlen(k_lines[i])) < 0)
        break;
    }
  }
  ws_httpd_stream_end(req);
}

/* ---- fixture ---------------------------------------------------------- */

static void fx_on_done(uv_async_t *a) {
  fx_t *fx = a->data;
  ws_httpd_close(fx->srv, NULL, NULL);
  uv_close((uv_handle_t *)&fx->done, NULL);
}

static void fx_thread(void *arg) {
  fx_t *fx = arg;
  fx->client(fx);
  uv_async_send(&fx->done);
}

static void fx_run(fx_client_fn client) {
  fx_t *fx = calloc(1, sizeof(*fx));

  assert_non_null(fx);
  snprintf(fx->dir, sizeof(fx->dir), "/tmp/ws-ctlhttp-XXXXXX");
  assert_non_null(mkdtemp(fx->dir));
  snprintf(fx->sock, sizeof(fx->sock), "%s/p2pd.sock", fx->dir);
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  assert_int_equal(ws_httpd_new(&fx->loop, NULL, &fx->srv), 0);
  assert_int_equal(ws_httpd_listen_unix(fx->srv, fx->sock, 0660), 0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/api/v1/status",
                                  WS_HTTPD_MATCH_EXACT, h_status, fx),
                   0);
  assert_int_equal(ws_httpd_route(fx->srv, "POST", "/api/v1/echo",
                                  WS_HTTPD_MATCH_EXACT, h_echo, fx),
                   0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/s3fail",
                                  WS_HTTPD_MATCH_EXACT, h_s3fail, fx),
                   0);
  assert_int_equal(
      ws_httpd_route(fx->srv, "GET", "/text", WS_HTTPD_MATCH_EXACT, h_text, fx),
      0);
  assert_int_equal(
      ws_httpd_route(fx->srv, "GET", "/hang", WS_HTTPD_MATCH_EXACT, h_hang, fx),
      0);
  assert_int_equal(ws_httpd_route(fx->srv, "GET", "/stream",
                                  WS_HTTPD_MATCH_EXACT, h_stream, fx),
                   0);
  fx->client = client;
  assert_int_equal(uv_async_init(&fx->loop, &fx->done, fx_on_done), 0);
  fx->done.data = fx;
  assert_int_equal(uv_thread_create(&fx->thr, fx_thread, fx), 0);
  assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_thread_join(&fx->thr), 0);
  if (fx->fail[0] != '\0')
    fail_msg("client: %s", fx->fail);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  assert_int_equal(rmdir(fx->dir), 0);
  free(fx);
}

/* ---- clients (client thread) ------------------------------------------ */

static void c_json(fx_t *fx) {
  long status = 0;
  cJSON *reply = NULL, *body;
  int rc;

  rc = ctl_http_request(fx->sock, "GET", "/api/v1/status", NULL, 5000, &status,
                        &reply);
  CHECK(rc == 0);
  CHECK(status == 200);
  CHECK(cJSON_IsTrue(cJSON_GetObjectItem(reply, "ok")));
  CHECK(ctl_http_reply_exit(status, reply) == CTL_EXIT_OK);
  cJSON_Delete(reply);
  reply = NULL;

  body = cJSON_CreateObject();
  cJSON_AddStringToObject(body, "uri", "s3://b/m/sha256-ab");
  rc = ctl_http_request(fx->sock, "POST", "/api/v1/echo", body, 5000, &status,
                        &reply);
  cJSON_Delete(body);
  CHECK(rc == 0);
  CHECK(status == 201);
  CHECK(cJSON_IsString(cJSON_GetObjectItem(reply, "uri")));
  CHECK(strcmp(cJSON_GetObjectItem(reply, "uri")->valuestring,
               "s3://b/m/sha256-ab") == 0);
  cJSON_Delete(reply);
}

static void test_json(void **state) {
  (void)state;
  fx_run(c_json);
}

static void c_errors(fx_t *fx) {
  long status = 0;
  cJSON *reply = NULL;
  int rc;

  rc = ctl_http_request(fx->sock, "GET", "/nope", NULL, 5000, &status, &reply);
  CHECK(rc == 0);
  CHECK(status == 404);
  CHECK(ctl_http_reply_exit(status, reply) == CTL_EXIT_NOTFOUND);
  cJSON_Delete(reply);
  rc =
      ctl_http_request(fx->sock, "GET", "/s3fail", NULL, 5000, &status, &reply);
  CHECK(rc == 0 && status == 502);
  CHECK(ctl_http_reply_exit(status, reply) == CTL_EXIT_ORIGIN);
  cJSON_Delete(reply);
  rc = ctl_http_request(fx->sock, "POST", "/api/v1/echo", NULL, 5000, &status,
                        &reply);
  CHECK(rc == 0 && status == 400);
  CHECK(ctl_http_reply_exit(status, reply) == CTL_EXIT_USAGE);
  cJSON_Delete(reply);
  reply = NULL;
  rc = ctl_http_request(fx->sock, "GET", "/text", NULL, 5000, &status, &reply);
  CHECK(rc == WS_EJSON);
  CHECK(reply == NULL);
  CHECK(ctl_http_exit(rc) == CTL_EXIT_DAEMON);
  /* No answer in time. */
  rc = ctl_http_request(fx->sock, "GET", "/hang", NULL, 300, &status, &reply);
  CHECK(rc == WS_ETIMEOUT);
  CHECK(ctl_http_exit(rc) == CTL_EXIT_TIMEOUT);
}

static void test_errors(void **state) {
  (void)state;
  fx_run(c_errors);
}

typedef struct {
  char got[256];
  int lines;
  int stop_after;
} lines_t;

static int on_line(const char *line, size_t len, void *arg) {
  lines_t *l = arg;
  size_t used = strlen(l->got);
  if (strlen(line) != len)
    return 1;
  snprintf(l->got + used, sizeof(l->got) - used, "[%s]", line);
  l->lines++;
  return l->stop_after != 0 && l->lines >= l->stop_after;
}

static void c_stream(fx_t *fx) {
  lines_t l = {.got = ""};
  cJSON *err = NULL;
  long status = 0;
  int rc;

  rc = ctl_http_stream(fx->sock, "GET", "/stream", NULL, 5000, &status, on_line,
                       &l, &err);
  CHECK(rc == 0);
  CHECK(status == 200);
  CHECK(strcmp(l.got, "[one][two][three][last]") == 0);
  CHECK(err == NULL);
  /* The callback stops the transfer. */
  memset(&l, 0, sizeof(l));
  l.stop_after = 2;
  rc = ctl_http_stream(fx->sock, "GET", "/stream", NULL, 5000, &status, on_line,
                       &l, &err);
  CHECK(rc == WS_ECANCELED);
  CHECK(l.lines == 2);
  /* An error reply is parsed, not passed as lines. */
  memset(&l, 0, sizeof(l));
  rc = ctl_http_stream(fx->sock, "GET", "/nope", NULL, 5000, &status, on_line,
                       &l, &err);
  CHECK(rc == 0);
  CHECK(status == 404);
  CHECK(l.lines == 0);
  CHECK(err != NULL && cJSON_GetObjectItem(err, "error") != NULL);
  cJSON_Delete(err);
}

static void test_stream(void **state) {
  (void)state;
  fx_run(c_stream);
}

/* ---- no server -------------------------------------------------------- */

static void test_daemon_down(void **state) {
  long status = 0;
  cJSON *reply = NULL;
  char dir[] = "/tmp/ws-ctlhttp-XXXXXX", path[128];
  int rc;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/absent.sock", dir);
  rc = ctl_http_request(path, "GET", "/api/v1/status", NULL, 1000, &status,
                        &reply);
  assert_int_equal(rc, -ECONNREFUSED);
  assert_null(reply);
  assert_int_equal(ctl_http_exit(rc), CTL_EXIT_DAEMON);
  assert_int_equal(
      ctl_http_request(path, "GET", "no-slash", NULL, 1000, &status, &reply),
      WS_EUSAGE);
  assert_int_equal(rmdir(dir), 0);
}

static void test_socket_choice(void **state) {
  (void)state;
  ctl_api_socket = NULL;
  assert_int_equal(unsetenv("P2P_API"), 0);
  assert_string_equal(ctl_http_socket(), CTL_HTTP_DEFAULT_SOCKET);
  assert_int_equal(setenv("P2P_API", "/tmp/env.sock", 1), 0);
  assert_string_equal(ctl_http_socket(), "/tmp/env.sock");
  ctl_api_socket = "/tmp/flag.sock";
  assert_string_equal(ctl_http_socket(), "/tmp/flag.sock");
  ctl_api_socket = NULL;
  assert_int_equal(unsetenv("P2P_API"), 0);
}

int main(void) {
  /* As in p2pd and p2p-tracker: libuv writes to sockets with write(2), so
   * a peer that hangs up mid-reply must not kill the process. */
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_socket_choice), cmocka_unit_test(test_daemon_down),
      cmocka_unit_test(test_json),          cmocka_unit_test(test_errors),
      cmocka_unit_test(test_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
