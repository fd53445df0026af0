/* test_wire.c - wire_conn on a real uv loop over 127.0.0.1: both ends of
 * every connection run in this process on one loop (client = initiator,
 * server = responder accepted from the fixture's listener). Callbacks only
 * record; cmocka asserts run after the loop has stopped, and every test
 * ends with uv_loop_close == 0.
 */
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire_fixture.h"

#define CHUNK_BYTES (5u * 1024u * 1024u)
#define PIECE_BYTES 300000u /* deliberately not a power of two */
#define PIECES_IN_FLIGHT 4
#define CAP_FRAMES 3000u

typedef struct fx_s fx_t;
typedef struct side_s side_t;

struct side_s {
  fx_t *fx;
  wire_conn_t *c;
  bool ready, closed;
  int status;
  wire_peer_t peer;
  wire_conn_stats_t st; /* at close */
  unsigned nframes;
  uint8_t last_type;
  unsigned nhave;
  uint32_t next_have; /* HAVE chunks must arrive in order */
  bool have_order_ok;
  unsigned ndrain;
  uint64_t closed_at;
  /* payload receive */
  uint8_t *rx;
  size_t rx_len;
  bool rx_last, rx_contig, have_after_payload;
  unsigned pieces;
  void (*ready_hook)(side_t *s);
  void (*frame_hook)(side_t *s, const ws_msg_t *m);
  void (*payload_hook)(side_t *s, size_t len, bool last);
  void (*drain_hook)(side_t *s);
};

struct fx_s {
  wf_loop_t w;
  wire_conn_cfg_t ccfg, scfg;
  side_t cli, srv;
  bool accept_raw; /* accept into raw_tcp and never answer */
  uv_tcp_t raw_tcp;
  bool raw_open, raw_closing;
  uv_timer_t t; /* test timer */
  bool t_open;
  uint64_t started;
  /* streaming (server side) */
  uint8_t *tx;
  size_t tx_off;
  unsigned tx_inflight, tx_done, tx_done_ok, tx_done_after_close;
  /* send-cap (server side) */
  uint32_t cap_sent;
  unsigned cap_refusals;
  unsigned paused_seen; /* frames seen by the client while paused */
  int close_rc;
};

/* ---- generic callbacks ------------------------------------------------- */

static void raw_on_close(uv_handle_t *h);

static void fx_maybe_done(fx_t *fx) {
  bool srv_done = fx->srv.closed || (fx->srv.c == NULL && !fx->raw_open);

  if (fx->cli.closed && fx->raw_open && !fx->raw_closing) {
    fx->raw_closing = true;
    uv_close((uv_handle_t *)&fx->raw_tcp, raw_on_close);
  }
  if (fx->cli.closed && srv_done) {
    wf_listen_close(&fx->w);
    if (fx->t_open) {
      fx->t_open = false;
      uv_close((uv_handle_t *)&fx->t, NULL);
    }
  }
}

static void cb_ready(wire_conn_t *c, const wire_peer_t *peer) {
  side_t *s = wire_conn_user(c);

  s->ready = true;
  s->peer = *peer;
  if (s->ready_hook != NULL)
    s->ready_hook(s);
}

static void cb_frame(wire_conn_t *c, const ws_msg_t *m) {
  side_t *s = wire_conn_user(c);

  s->nframes++;
  s->last_type = m->type;
  if (m->type == WS_MSG_HAVE) {
    if (m->u.have.chunk != s->next_have)
      s->have_order_ok = false;
    s->next_have++;
    s->nhave++;
    if (s->nhave == 1)
      s->have_after_payload = s->rx_last;
  }
  if (s->frame_hook != NULL)
    s->frame_hook(s, m);
}

static void cb_payload(wire_conn_t *c, const uint8_t *data, size_t len,
                       uint64_t off, bool last) {
  side_t *s = wire_conn_user(c);

  if (off != s->rx_len || s->rx_len + len > CHUNK_BYTES || s->rx_last)
    s->rx_contig = false;
  else
    memcpy(s->rx + s->rx_len, data, len);
  s->rx_len += len;
  s->rx_last = last;
  s->pieces++;
  if (s->payload_hook != NULL)
    s->payload_hook(s, len, last);
}

static void cb_drain(wire_conn_t *c) {
  side_t *s = wire_conn_user(c);

  s->ndrain++;
  if (s->drain_hook != NULL)
    s->drain_hook(s);
}

static void cb_close(wire_conn_t *c, int status) {
  side_t *s = wire_conn_user(c);

  s->closed = true;
  s->status = status;
  s->closed_at = uv_now(&s->fx->w.loop);
  wire_conn_stats(c, &s->st);
  s->c = NULL;
  fx_maybe_done(s->fx);
}

static const wire_conn_cbs_t k_cbs = {
    .on_ready = cb_ready,
    .on_frame = cb_frame,
    .on_payload = cb_payload,
    .on_drain = cb_drain,
    .on_close = cb_close,
};

static void raw_on_close(uv_handle_t *h) {
  fx_t *fx = h->data;

  fx->raw_open = false;
  fx_maybe_done(fx);
}

static void fx_on_conn(wf_loop_t *w, uv_stream_t *server) {
  fx_t *fx = w->arg;

  if (fx->accept_raw) {
    assert_int_equal(uv_tcp_init(&w->loop, &fx->raw_tcp), 0);
    fx->raw_tcp.data = fx;
    fx->raw_open = true;
    assert_int_equal(uv_accept(server, (uv_stream_t *)&fx->raw_tcp), 0);
    return;
  }
  assert_null(fx->srv.c);
  assert_int_equal(
      wire_conn_accept(server, &fx->scfg, &k_cbs, &fx->srv, &fx->srv.c), 0);
}

static void side_init(fx_t *fx, side_t *s) {
  memset(s, 0, sizeof(*s));
  s->fx = fx;
  s->have_order_ok = true;
  s->rx_contig = true;
}

static fx_t *fx_new(void) {
  fx_t *fx = calloc(1, sizeof(*fx));

  assert_non_null(fx);
  wf_init(&fx->w, fx_on_conn, fx);
  wf_cfg(&fx->ccfg, "node-client", "zone-a", 0x11);
  wf_cfg(&fx->scfg, "node-server", "zone-b", 0x11);
  fx->ccfg.listen_port = 7001;
  fx->scfg.listen_port = 7002;
  fx->scfg.role = WS_ROLE_TRACKER;
  side_init(fx, &fx->cli);
  side_init(fx, &fx->srv);
  assert_int_equal(uv_timer_init(&fx->w.loop, &fx->t), 0);
  fx->t.data = fx;
  fx->t_open = true;
  fx->started = uv_now(&fx->w.loop);
  return fx;
}

static void fx_connect(fx_t *fx, const char *host) {
  assert_int_equal(wire_conn_connect(&fx->w.loop, host, fx->w.port, &fx->ccfg,
                                     &k_cbs, &fx->cli, &fx->cli.c),
                   0);
}

static void fx_free(fx_t *fx) {
  if (fx->raw_open) {
    uv_close((uv_handle_t *)&fx->raw_tcp, NULL);
    fx->raw_open = false;
  }
  if (fx->t_open) {
    uv_close((uv_handle_t *)&fx->t, NULL);
    fx->t_open = false;
  }
  wf_finish(&fx->w);
  free(fx->cli.rx);
  free(fx->tx);
  free(fx);
}

static void send_have(side_t *s, uint32_t chunk, int expect) {
  ws_msg_t m;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memset(m.u.have.digest, 0xab, sizeof(m.u.have.digest));
  m.u.have.chunk = chunk;
  assert_int_equal(wire_conn_send(s->c, &m), expect);
}

static void hook_goodbye(side_t *s) {
  wire_conn_goodbye(s->c, WS_BYE_SHUTDOWN);
}

/* ---- handshake --------------------------------------------------------- */

static void test_handshake_ok(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  fx->cli.ready_hook = hook_goodbye; /* ready -> GOODBYE -> close(0) */
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_true(fx->cli.ready);
  assert_true(fx->srv.ready);
  assert_string_equal(fx->cli.peer.node_id, "node-server");
  assert_string_equal(fx->cli.peer.zone, "zone-b");
  assert_int_equal(fx->cli.peer.listen_port, 7002);
  assert_int_equal(fx->cli.peer.role, WS_ROLE_TRACKER);
  assert_int_equal(fx->cli.peer.addr_port, fx->w.port);
  assert_string_equal(fx->cli.peer.addr, "127.0.0.1");
  assert_string_equal(fx->srv.peer.node_id, "node-client");
  assert_string_equal(fx->srv.peer.zone, "zone-a");
  assert_int_equal(fx->srv.peer.listen_port, 7001);
  assert_int_equal(fx->srv.peer.role, WS_ROLE_PEER);
  assert_string_equal(fx->srv.peer.addr, "127.0.0.1");
  assert_int_equal(fx->cli.status, 0);
  assert_int_equal(fx->srv.status, UV_EOF);
  assert_int_equal(fx->srv.nframes, 1); /* the GOODBYE */
  assert_int_equal(fx->srv.last_type, WS_MSG_GOODBYE);
  assert_int_equal(fx->cli.st.frames_in, 2);  /* HELLO, AUTH */
  assert_int_equal(fx->cli.st.frames_out, 3); /* HELLO, AUTH, GOODBYE */
  assert_int_equal(fx->cli.st.bytes_out, fx->srv.st.bytes_in);
  assert_int_equal(fx->srv.st.bytes_out, fx->cli.st.bytes_in);
  assert_int_equal(fx->cli.st.sendq_bytes, 0);
  fx_free(fx);
}

/* "localhost" goes through uv_getaddrinfo. */
static void test_connect_by_name(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  fx->cli.ready_hook = hook_goodbye;
  fx_connect(fx, "localhost");
  wf_run(&fx->w, 5000);
  assert_true(fx->cli.ready);
  assert_true(fx->srv.ready);
  assert_int_equal(fx->cli.status, 0);
  fx_free(fx);
}

static void wrong_key(bool keyless_client) {
  fx_t *fx = fx_new();
  side_t *keyless = keyless_client ? &fx->cli : &fx->srv;
  side_t *keyed = keyless_client ? &fx->srv : &fx->cli;

  if (keyless_client)
    memset(fx->ccfg.key, 0x22, sizeof(fx->ccfg.key));
  else
    memset(fx->scfg.key, 0x22, sizeof(fx->scfg.key));
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_false(fx->cli.ready);
  assert_false(fx->srv.ready);
  assert_int_equal(fx->cli.status, WS_EAUTH);
  assert_int_equal(fx->srv.status, WS_EAUTH);
  assert_int_equal(keyless->nframes, 0);
  /* The keyless side saw the other's HELLO and nothing after it; with a
   * keyless responder the initiator's AUTH (which reveals nothing) is the
   * only other frame it gets. */
  assert_int_equal(keyless->st.frames_in, keyless_client ? 1 : 2);
  assert_int_equal(keyed->st.frames_in, keyless_client ? 2 : 1);
  fx_free(fx);
}

static void test_wrong_key_client(void **state) {
  (void)state;
  wrong_key(true);
}

static void test_wrong_key_server(void **state) {
  (void)state;
  wrong_key(false);
}

static void test_handshake_timeout(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  fx->accept_raw = true;
  fx->ccfg.handshake_timeout_ms = 200;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_false(fx->cli.ready);
  assert_int_equal(fx->cli.status, WS_ETIMEOUT);
  assert_true(fx->cli.closed_at - fx->started >= 190);
  assert_int_equal(fx->cli.st.frames_out, 1); /* our HELLO */
  assert_int_equal(fx->cli.st.frames_in, 0);
  fx_free(fx);
}

static void test_connect_refused(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  wf_listen_close(&fx->w); /* nothing listens on the port any more */
  uv_run(&fx->w.loop, UV_RUN_NOWAIT);
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_false(fx->cli.ready);
  assert_int_equal(fx->cli.status, UV_ECONNREFUSED);
  fx_free(fx);
}

static void test_bad_args(void **state) {
  fx_t *fx = fx_new();
  wire_conn_t *c = NULL;
  wire_conn_cfg_t cfg = fx->ccfg;

  (void)state;
  cfg.node_id[0] = '\0';
  assert_int_equal(wire_conn_connect(&fx->w.loop, "127.0.0.1", fx->w.port, &cfg,
                                     &k_cbs, NULL, &c),
                   WS_EUSAGE);
  assert_int_equal(wire_conn_connect(&fx->w.loop, "127.0.0.1", 0, &fx->ccfg,
                                     &k_cbs, NULL, &c),
                   WS_EUSAGE);
  assert_null(c);
  fx->cli.closed = true; /* no connection in this test */
  fx_maybe_done(fx);
  fx_free(fx);
}

/* ---- frames both ways --------------------------------------------------- */

static void srv_reply_announce(side_t *s, const ws_msg_t *m) {
  ws_peer_info_t peers[2];
  uint32_t lease_chunks[3] = {4, 5, 6};
  ws_lease_t lease;
  ws_msg_t r;

  if (m->type != WS_MSG_ANNOUNCE)
    return;
  assert_int_equal(m->u.announce.total_chunks, 10);
  assert_int_equal(m->u.announce.n_have_list, 2);
  assert_int_equal(m->u.announce.have_list[1], 9);
  assert_string_equal(m->u.announce.uri, "s3://b/m/manifest.json");
  memset(&r, 0, sizeof(r));
  memset(peers, 0, sizeof(peers));
  memset(&lease, 0, sizeof(lease));
  r.type = WS_MSG_ANNOUNCE_REPLY;
  memcpy(r.u.announce_reply.digest, m->u.announce.digest, WS_PROTO_DIGEST_LEN);
  r.u.announce_reply.interval_ms = 1234;
  memcpy(peers[0].node_id, "p0", 3);
  memcpy(peers[0].host, "10.0.0.1", 9);
  peers[0].port = 1;
  memcpy(peers[1].node_id, "p1", 3);
  memcpy(peers[1].host, "10.0.0.2", 9);
  peers[1].port = 2;
  r.u.announce_reply.peers = peers;
  r.u.announce_reply.n_peers = 2;
  memcpy(lease.digest, m->u.announce.digest, WS_PROTO_DIGEST_LEN);
  lease.chunks = lease_chunks;
  lease.n_chunks = 3;
  lease.ttl_ms = 30000;
  r.u.announce_reply.leases = &lease;
  r.u.announce_reply.n_leases = 1;
  assert_int_equal(wire_conn_send(s->c, &r), 0);
}

static void cli_check_reply(side_t *s, const ws_msg_t *m) {
  if (m->type != WS_MSG_ANNOUNCE_REPLY)
    return;
  assert_int_equal(m->u.announce_reply.interval_ms, 1234);
  assert_int_equal(m->u.announce_reply.n_peers, 2);
  assert_string_equal(m->u.announce_reply.peers[1].host, "10.0.0.2");
  assert_int_equal(m->u.announce_reply.n_leases, 1);
  assert_int_equal(m->u.announce_reply.leases[0].chunks[2], 6);
  wire_conn_close(s->c, 0);
  wire_conn_close(s->c, WS_EPROTO); /* no-op: the first status wins */
}

static void cli_send_announce(side_t *s) {
  uint32_t hd[2] = {3, 9};
  ws_msg_t m;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ANNOUNCE;
  memset(m.u.announce.digest, 0x5a, WS_PROTO_DIGEST_LEN);
  m.u.announce.total_chunks = 10;
  m.u.announce.have_list = hd;
  m.u.announce.n_have_list = 2;
  m.u.announce.uri = "s3://b/m/manifest.json";
  assert_int_equal(wire_conn_send(s->c, &m), 0);
  /* Handshake types cannot be sent by the user. */
  m.type = WS_MSG_HELLO;
  assert_int_equal(wire_conn_send(s->c, &m), WS_EUSAGE);
}

static void test_frames_both_ways(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  fx->cli.ready_hook = cli_send_announce;
  fx->srv.frame_hook = srv_reply_announce;
  fx->cli.frame_hook = cli_check_reply;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_int_equal(fx->srv.nframes, 1);
  assert_int_equal(fx->cli.nframes, 1);
  assert_int_equal(fx->cli.last_type, WS_MSG_ANNOUNCE_REPLY);
  assert_int_equal(fx->cli.status, 0);
  assert_int_equal(fx->srv.status, UV_EOF);
  fx_free(fx);
}

/* ---- 5 MiB chunk streamed in pieces -------------------------------------- */

static void srv_pump(fx_t *fx);

static void srv_piece_done(wire_conn_t *c, void *arg, int status) {
  fx_t *fx = arg;

  (void)c;
  fx->tx_inflight--;
  fx->tx_done++;
  if (status == 0)
    fx->tx_done_ok++;
  if (fx->srv.closed)
    fx->tx_done_after_close++;
  if (status == 0)
    srv_pump(fx);
}

static void srv_pump(fx_t *fx) {
  while (fx->tx_inflight < PIECES_IN_FLIGHT && fx->tx_off < CHUNK_BYTES &&
         fx->srv.c != NULL && wire_conn_is_open(fx->srv.c)) {
    size_t n = CHUNK_BYTES - fx->tx_off;

    if (n > PIECE_BYTES)
      n = PIECE_BYTES;
    assert_int_equal(wire_conn_send_raw(fx->srv.c, fx->tx + fx->tx_off, n,
                                        srv_piece_done, fx),
                     0);
    fx->tx_off += n;
    fx->tx_inflight++;
  }
}

static void srv_start_chunk(side_t *s) {
  fx_t *fx = s->fx;
  ws_msg_t m;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memset(m.u.chunk.digest, 0x77, WS_PROTO_DIGEST_LEN);
  m.u.chunk.chunk = 3;
  m.u.chunk.req_id = 42;
  m.u.chunk.len = CHUNK_BYTES;
  assert_int_equal(wire_conn_send(s->c, &m), 0);
  assert_int_equal(wire_conn_payload_left(s->c), CHUNK_BYTES);
  /* A second payload cannot start, and raw bytes cannot overrun. */
  assert_int_equal(wire_conn_send(s->c, &m), WS_EBUSY);
  assert_int_equal(
      wire_conn_send_raw(s->c, fx->tx, CHUNK_BYTES + 1, srv_piece_done, fx),
      WS_EUSAGE);
  /* A control frame sent now is held until the payload is complete. */
  send_have(s, 0, 0);
  srv_pump(fx);
}

static void cli_check_chunk_hdr(side_t *s, const ws_msg_t *m) {
  if (m->type == WS_MSG_CHUNK) {
    assert_int_equal(m->u.chunk.len, CHUNK_BYTES);
    assert_int_equal(m->u.chunk.req_id, 42);
    assert_int_equal(s->rx_len, 0);
  } else if (m->type == WS_MSG_HAVE) {
    wire_conn_goodbye(s->c, WS_BYE_SHUTDOWN);
  }
}

static fx_t *fx_new_chunk(void) {
  fx_t *fx = fx_new();
  size_t i;

  fx->tx = malloc(CHUNK_BYTES);
  fx->cli.rx = malloc(CHUNK_BYTES);
  assert_non_null(fx->tx);
  assert_non_null(fx->cli.rx);
  for (i = 0; i < CHUNK_BYTES; i++)
    fx->tx[i] = (uint8_t)(i * 2654435761u >> 13);
  return fx;
}

static void test_chunk_5mib(void **state) {
  fx_t *fx = fx_new_chunk();

  (void)state;
  fx->srv.ready_hook = srv_start_chunk;
  fx->cli.frame_hook = cli_check_chunk_hdr;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 20000);
  assert_true(fx->cli.rx_contig);
  assert_true(fx->cli.rx_last);
  assert_int_equal(fx->cli.rx_len, CHUNK_BYTES);
  assert_memory_equal(fx->cli.rx, fx->tx, CHUNK_BYTES);
  assert_true(fx->cli.pieces > 1);
  assert_int_equal(fx->cli.nhave, 1);
  assert_true(fx->cli.have_after_payload);
  assert_int_equal(fx->tx_done, fx->tx_done_ok);
  assert_int_equal(fx->tx_done, (CHUNK_BYTES + PIECE_BYTES - 1) / PIECE_BYTES);
  assert_int_equal(fx->cli.status, 0);
  assert_int_equal(fx->srv.status, UV_EOF);
  assert_true(fx->srv.st.bytes_out > CHUNK_BYTES);
  fx_free(fx);
}

/* Closing from inside on_payload mid-chunk: every raw buffer still gets its
 * done callback, before the server's on_close. */
static void cli_close_mid_payload(side_t *s, size_t len, bool last) {
  (void)len;
  (void)last;
  if (s->rx_len >= CHUNK_BYTES / 2)
    wire_conn_close(s->c, WS_ECANCELED);
}

static void test_close_in_payload(void **state) {
  fx_t *fx = fx_new_chunk();

  (void)state;
  fx->srv.ready_hook = srv_start_chunk;
  fx->cli.payload_hook = cli_close_mid_payload;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 20000);
  assert_int_equal(fx->cli.status, WS_ECANCELED);
  assert_false(fx->cli.rx_last);
  assert_true(fx->srv.status < 0);
  assert_int_equal(fx->tx_inflight, 0);
  assert_int_equal(fx->tx_done_after_close, 0);
  assert_true(fx->tx_done > 0);
  fx_free(fx);
}

static void srv_close_on_ready(side_t *s) {
  wire_conn_close(s->c, WS_EBANNED);
  /* Sends after close are refused. */
  send_have(s, 0, -ENOTCONN);
}

static void test_close_in_ready(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  fx->srv.ready_hook = srv_close_on_ready;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_true(fx->srv.ready);
  assert_int_equal(fx->srv.status, WS_EBANNED);
  assert_true(fx->cli.status == UV_EOF || fx->cli.status == WS_EAUTH ||
              fx->cli.status == UV_ECONNRESET);
  assert_int_equal(fx->cli.nframes, 0);
  fx_free(fx);
}

/* ---- send queue cap and drain ------------------------------------------- */

static void srv_fill(side_t *s) {
  fx_t *fx = s->fx;
  ws_msg_t m;
  int rc;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memset(m.u.have.digest, 0xab, sizeof(m.u.have.digest));
  while (fx->cap_sent < CAP_FRAMES) {
    m.u.have.chunk = fx->cap_sent;
    rc = wire_conn_send(s->c, &m);
    if (rc == WS_ELIMIT) {
      fx->cap_refusals++;
      return; /* on_drain continues */
    }
    assert_int_equal(rc, 0);
    fx->cap_sent++;
  }
}

static void cli_count_cap(side_t *s, const ws_msg_t *m) {
  (void)m;
  if (s->nhave == CAP_FRAMES)
    wire_conn_goodbye(s->c, WS_BYE_SHUTDOWN);
}

static void test_sendq_cap(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  fx->scfg.sendq_max_bytes = 8192;
  fx->scfg.sendq_low_bytes = 2048;
  fx->srv.ready_hook = srv_fill;
  fx->srv.drain_hook = srv_fill;
  fx->cli.frame_hook = cli_count_cap;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 10000);
  assert_true(fx->cap_refusals > 1);
  assert_true(fx->srv.ndrain >= fx->cap_refusals);
  assert_int_equal(fx->cli.nhave, CAP_FRAMES);
  assert_true(fx->cli.have_order_ok); /* no gaps: refused frames not lost */
  assert_int_equal(fx->cli.status, 0);
  fx_free(fx);
}

/* ---- read pause / resume, idle timeout ------------------------------------
 */

static void srv_send_ten(side_t *s) {
  uint32_t i;

  for (i = 0; i < 10; i++)
    send_have(s, i, 0);
}

static void t_resume(uv_timer_t *t) {
  fx_t *fx = t->data;

  fx->paused_seen = fx->cli.nhave;
  wire_conn_read_resume(fx->cli.c);
}

static void cli_pause_first(side_t *s, const ws_msg_t *m) {
  (void)m;
  if (s->nhave == 1) {
    wire_conn_read_pause(s->c);
    wire_conn_read_pause(s->c); /* idempotent */
    uv_timer_start(&s->fx->t, t_resume, 150, 0);
  } else if (s->nhave == 10) {
    wire_conn_goodbye(s->c, WS_BYE_SHUTDOWN);
  }
}

static void test_pause_resume(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  /* Shorter than the pause: the idle check must not run while paused. */
  fx->ccfg.idle_timeout_ms = 60;
  fx->srv.ready_hook = srv_send_ten;
  fx->cli.frame_hook = cli_pause_first;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_int_equal(fx->paused_seen, 1);
  assert_int_equal(fx->cli.nhave, 10);
  assert_true(fx->cli.have_order_ok);
  assert_int_equal(fx->cli.status, 0);
  assert_true(fx->cli.closed_at - fx->started >= 140);
  fx_free(fx);
}

static void test_idle_timeout(void **state) {
  fx_t *fx = fx_new();

  (void)state;
  fx->scfg.idle_timeout_ms = 150;
  fx_connect(fx, "127.0.0.1");
  wf_run(&fx->w, 5000);
  assert_true(fx->srv.ready);
  assert_int_equal(fx->srv.status, WS_ETIMEOUT);
  assert_int_equal(fx->cli.status, UV_EOF);
  assert_true(fx->srv.closed_at - fx->started >= 140);
  fx_free(fx);
}

/* ---- unknown types: a raw peer (blocking socket, own thread) speaks the
 * protocol with proto/ directly and sends a sealed frame of an unknown type
 * with a payload, then a HAVE: only the HAVE is delivered. ---------------- */

typedef struct {
  uint16_t port;
  uint8_t key[WS_CLUSTER_KEY_LEN];
  int rc; /* 0 when the raw side completed its script */
} raw_peer_t;

static int raw_script(raw_peer_t *rp, int fd) {
  ws_frame_reader_t *rd = ws_frame_reader_new(WS_MAX_BODY_PREAUTH, 0);
  ws_hs_t hs;
  ws_session_t sess;
  ws_hello_t h;
  ws_pbuf_t b;
  ws_msg_t m;
  static const uint8_t unk_hdr[WS_FRAME_HDR_LEN] = {
      'W', 'S', 1, 200, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5};
  uint8_t body = 0x80; /* {} */
  int rc = -1;

  ws_pbuf_init(&b, 1u << 16);
  if (rd == NULL || ws_hs_init(&hs, rp->key, true) < 0)
    goto out;
  memset(&h, 0, sizeof(h));
  memcpy(h.node_id, "raw", 4);
  if (ws_hs_hello_encode(&hs, &h, &b) < 0 ||
      wf_raw_handshake(fd, rd, &hs, &b, &sess) < 0)
    goto out;
  ws_pbuf_reset(&b);
  if (ws_pbuf_append(&b, unk_hdr, sizeof(unk_hdr)) < 0 ||
      ws_pbuf_append(&b, &body, 1) < 0 || ws_frame_seal(&sess, &b, 0) < 0 ||
      ws_pbuf_append(&b, "12345", 5) < 0)
    goto out;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  m.u.have.chunk = 0;
  {
    size_t off = b.len;
    if (ws_msg_encode(&m, &b) < 0 || ws_frame_seal(&sess, &b, off) < 0)
      goto out;
  }
  if (wf_raw_send(fd, &b) < 0)
    goto out;
  /* Wait for the server's GOODBYE-less close (it closes after the HAVE). */
  {
    uint8_t sink[256];
    while (recv(fd, sink, sizeof(sink), 0) > 0)
      ;
  }
  rc = 0;
out:
  ws_pbuf_free(&b);
  ws_frame_reader_free(rd);
  return rc;
}

static void raw_thread(void *arg) {
  raw_peer_t *rp = arg;
  int fd = wf_raw_connect(rp->port);

  rp->rc = fd < 0 ? -1 : raw_script(rp, fd);
  if (fd >= 0)
    close(fd);
}

static void srv_close_on_have(side_t *s, const ws_msg_t *m) {
  if (m->type == WS_MSG_HAVE)
    wire_conn_close(s->c, 0);
}

static void test_unknown_type_skipped(void **state) {
  fx_t *fx = fx_new();
  raw_peer_t rp;
  uv_thread_t thr;

  (void)state;
  memset(&rp, 0, sizeof(rp));
  rp.port = fx->w.port;
  memcpy(rp.key, fx->scfg.key, sizeof(rp.key));
  fx->srv.frame_hook = srv_close_on_have;
  fx->cli.closed = true; /* the client is the raw thread */
  assert_int_equal(uv_thread_create(&thr, raw_thread, &rp), 0);
  wf_run(&fx->w, 5000);
  assert_int_equal(uv_thread_join(&thr), 0);
  assert_int_equal(rp.rc, 0);
  assert_true(fx->srv.ready);
  assert_string_equal(fx->srv.peer.node_id, "raw");
  assert_int_equal(fx->srv.nframes, 1); /* the HAVE only */
  assert_int_equal(fx->srv.nhave, 1);
  assert_int_equal(fx->srv.pieces, 0);       /* unknown payload not delivered */
  assert_int_equal(fx->srv.st.frames_in, 4); /* HELLO AUTH unknown HAVE */
  assert_int_equal(fx->srv.status, 0);
  fx_free(fx);
}

int main(void) {
  /* As in p2pd and p2p-tracker: libuv writes to sockets with write(2), so
   * a peer that hangs up mid-reply must not kill the process. */
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handshake_ok),
      cmocka_unit_test(test_connect_by_name),
      cmocka_unit_test(test_wrong_key_client),
      cmocka_unit_test(test_wrong_key_server),
      cmocka_unit_test(test_handshake_timeout),
      cmocka_unit_test(test_connect_refused),
      cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_frames_both_ways),
      cmocka_unit_test(test_chunk_5mib),
      cmocka_unit_test(test_close_in_payload),
      cmocka_unit_test(test_close_in_ready),
      cmocka_unit_test(test_sendq_cap),
      cmocka_unit_test(test_pause_resume),
      cmocka_unit_test(test_idle_timeout),
      cmocka_unit_test(test_unknown_type_skipped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
