/* wire_fixture.c - see wire_fixture.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire_fixture.h"

static void wf_on_conn(uv_stream_t *s, int status) {
  wf_loop_t *w = s->data;

  assert_int_equal(status, 0);
  w->on_conn(w, s);
}

static void wf_listen(wf_loop_t *w, uint16_t port) {
  struct sockaddr_in a;
  struct sockaddr_storage ss;
  int len = sizeof(ss);

  assert_int_equal(uv_tcp_init(&w->loop, &w->lsn), 0);
  w->lsn.data = w;
  w->lsn_open = true;
  assert_int_equal(uv_ip4_addr("127.0.0.1", port, &a), 0);
  assert_int_equal(uv_tcp_bind(&w->lsn, (struct sockaddr *)&a, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&w->lsn, 16, wf_on_conn), 0);
  assert_int_equal(uv_tcp_getsockname(&w->lsn, (struct sockaddr *)&ss, &len),
                   0);
  w->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void wf_init(wf_loop_t *w, wf_conn_cb on_conn, void *arg) {
  memset(w, 0, sizeof(*w));
  w->on_conn = on_conn;
  w->arg = arg;
  assert_int_equal(uv_loop_init(&w->loop), 0);
  assert_int_equal(uv_timer_init(&w->loop, &w->guard), 0);
  w->guard.data = w;
  wf_listen(w, 0);
}

void wf_relisten(wf_loop_t *w) {
  uint16_t port = w->port;

  assert_false(w->lsn_open);
  wf_listen(w, port);
  assert_int_equal(w->port, port);
}

void wf_listen_close(wf_loop_t *w) {
  if (!w->lsn_open)
    return;
  w->lsn_open = false;
  uv_close((uv_handle_t *)&w->lsn, NULL);
}

static void wf_on_guard(uv_timer_t *t) {
  wf_loop_t *w = t->data;

  w->guard_fired = true;
  uv_stop(&w->loop);
}

void wf_run(wf_loop_t *w, uint64_t guard_ms) {
  uv_timer_start(&w->guard, wf_on_guard, guard_ms, 0);
  uv_unref((uv_handle_t *)&w->guard);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  uv_timer_stop(&w->guard);
  assert_false(w->guard_fired);
}

void wf_finish(wf_loop_t *w) {
  wf_listen_close(w);
  uv_close((uv_handle_t *)&w->guard, NULL);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&w->loop), 0);
}

void wf_cfg(wire_conn_cfg_t *cfg, const char *node, const char *zone,
            uint8_t keyfill) {
  wire_conn_cfg_init(cfg);
  snprintf(cfg->node_id, sizeof(cfg->node_id), "%s", node);
  snprintf(cfg->zone, sizeof(cfg->zone), "%s", zone);
  memset(cfg->key, keyfill, sizeof(cfg->key));
}

void wf_accept(uv_stream_t *server, bool clear, const wire_conn_cbs_t *cbs,
               void *user, wire_conn_t **out) {
  wire_conn_cfg_t cfg;

  wf_cfg(&cfg, "srv", "", 7);
  if (clear)
    cfg.hello_version = 1;
  assert_int_equal(wire_conn_accept(server, &cfg, cbs, user, out), 0);
}

int wf_raw_connect(uint16_t port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);

  if (fd < 0)
    return -1;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int wf_raw_send(int fd, const ws_pbuf_t *b) {
  return send(fd, b->data, b->len, MSG_NOSIGNAL) == (ssize_t)b->len ? 0 : -1;
}

int wf_raw_recv_frame(int fd, ws_frame_reader_t *rd, ws_frame_t *f) {
  uint8_t c;
  size_t used;
  ws_frame_ev_t ev;

  for (;;) {
    if (recv(fd, &c, 1, 0) != 1)
      return -1;
    if (ws_frame_reader_feed(rd, &c, 1, &used, &ev) < 0)
      return -1;
    if (ev.kind == WS_FRAME_EV_FRAME) {
      *f = ev.frame;
      return 0;
    }
  }
}

int wf_raw_handshake(int fd, ws_frame_reader_t *rd, ws_hs_t *hs,
                     const ws_pbuf_t *hello, ws_session_t *sess) {
  ws_hello_t h;
  ws_frame_t f;
  ws_pbuf_t b;
  int rc = -1;

  ws_pbuf_init(&b, 1u << 16);
  if (wf_raw_send(fd, hello) < 0 || wf_raw_recv_frame(fd, rd, &f) < 0 ||
      ws_hs_hello_recv(hs, &f, &h) < 0)
    goto out;
  if (ws_hs_auth_encode(hs, &b) < 0 || wf_raw_send(fd, &b) < 0)
    goto out;
  if (wf_raw_recv_frame(fd, rd, &f) < 0 || ws_hs_auth_recv(hs, &f) < 0 ||
      ws_hs_session(hs, sess) < 0)
    goto out;
  rc = 0;
out:
  ws_pbuf_free(&b);
  return rc;
}
