/* fuzz_trk_http.c - fuzz target for the tracker's HTTP request handling:
 * the common server's parser and router (common/ws_httpd*.c, http_parser)
 * and every trk_http.c route (dashboard, vendor files, healthz, metrics,
 * swarms JSON, prefetch add/list/delete with cJSON bodies and selectors).
 *
 * ws_httpd reads only from sockets, so the input is sent as is over a TCP
 * connection to a trk_http listening on 127.0.0.1:0, on one libuv loop
 * that lives across inputs: connect, write the bytes, shut down the write
 * side, read the reply to EOF, close. The loop runs until the client is
 * closed and the server has dropped the connection, bounded by a timer.
 * The tracker holds one swarm (so /api/v1/swarms/<digest> finds it); the
 * wanted set is emptied after each input so state does not carry over.
 * Inputs containing "/:" are skipped: a tagged prefetch URI starts the S3
 * client (worker threads, network), which is not what is fuzzed here.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "trk_http.h"
#include "trk_tracker.h"
#include "ws_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_TIMEOUT_MS 2000u

static uv_loop_t loop;
static trk_tracker_t *tracker;
static trk_http_t *http;
static int port;

typedef struct {
  uv_tcp_t tcp;
  uv_connect_t conn;
  uv_write_t w;
  uv_shutdown_t sd;
  uv_timer_t timer;
  uv_buf_t buf;
  int closed; /* handles closed: tcp and timer */
  char rbuf[16384];
} client_t;

static void on_closed(uv_handle_t *h) {
  client_t *c = h->data;
  c->closed++;
}

static void client_close(client_t *c) {
  if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
  }
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  client_t *c = h->data;
  (void)hint;
  *b = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  (void)b;
  if (n < 0)
    client_close(s->data);
}

static void on_shutdown(uv_shutdown_t *r, int status) {
  (void)r, (void)status;
}

static void on_write(uv_write_t *w, int status) {
  (void)w, (void)status;
}

static void on_connect(uv_connect_t *r, int status) {
  client_t *c = r->data;
  if (status < 0) {
    client_close(c);
    return;
  }
  if ((c->buf.len > 0 &&
       uv_write(&c->w, (uv_stream_t *)&c->tcp, &c->buf, 1, on_write) < 0) ||
      uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, on_shutdown) < 0 ||
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
    client_close(c);
}

static void on_timeout(uv_timer_t *t) {
  client_close(t->data);
}

static void setup(void) {
  trk_peer_info_t info = {
      .node_id = "node-a", .addr = "10.0.0.1", .port = 7000, .zone = "z"};
  static const uint8_t bits[2] = {0xf0, 0x00};
  trk_peer_id_t id, replaced;
  trk_announce_t a;
  trk_reply_t r;

  ws_log_set_level(WS_LOG_ERROR);
  if (uv_loop_init(&loop) != 0 ||
      (tracker = trk_tracker_new(16, 1, uv_now(&loop))) == NULL ||
      trk_tracker_connect(tracker, &info, uv_now(&loop), &id, &replaced) != 0)
    abort();
  memset(&a, 0, sizeof(a));
  memset(a.digest.b, 0xab, sizeof(a.digest.b)); /* sha256-abab... */
  a.total_chunks = 12;
  a.bitfield = bits;
  a.bitfield_len = sizeof(bits);
  a.want_leases = 2;
  a.max_peers = 4;
  if (trk_tracker_announce(tracker, id, &a, uv_now(&loop), &r) != 0 ||
      trk_http_new(&loop, tracker, NULL, NULL, &http) != 0 ||
      trk_http_listen(http, "127.0.0.1:0", &port) != 0)
    abort();
}

/* Empties the wanted set a POST may have filled. */
static void reset_wanted(void) {
  trk_wanted_t *w = trk_tracker_wanted(tracker);
  while (trk_wanted_count(w) > 0) {
    const trk_wanted_entry_t *e = trk_wanted_at(w, 0);
    char key[TRK_URI_MAX + 1];
    snprintf(key, sizeof(key), "%s", e->has_digest ? e->digest_str : e->uri);
    if (trk_wanted_remove(w, key) != 0)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static client_t c;
  struct sockaddr_in sa;

  if (memmem(data, size, "/:", 2) != NULL)
    return 0;
  if (http == NULL)
    setup();
  memset(&c, 0, sizeof(c));
  c.buf = uv_buf_init((char *)data, (unsigned)size);
  c.tcp.data = c.conn.data = c.timer.data = &c;
  if (uv_ip4_addr("127.0.0.1", port, &sa) != 0 ||
      uv_tcp_init(&loop, &c.tcp) != 0 || uv_timer_init(&loop, &c.timer) != 0 ||
      uv_timer_start(&c.timer, on_timeout, FUZZ_TIMEOUT_MS, 0) != 0)
    abort();
  if (uv_tcp_connect(&c.conn, &c.tcp, (const struct sockaddr *)&sa,
                     on_connect) != 0)
    client_close(&c);
  while (c.closed < 2)
    uv_run(&loop, UV_RUN_ONCE);
  /* Let the server see the close and free its side of the connection. */
  for (int i = 0; i < 4; i++)
    uv_run(&loop, UV_RUN_NOWAIT);
  reset_wanted();
  return 0;
}
