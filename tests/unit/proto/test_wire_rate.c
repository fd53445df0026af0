/* test_wire_rate.c - the send rate a wire_conn measures and the unsent
 * bytes it lets the kernel hold (wire_conn_rate.c), between two real
 * wire_conns on one loop. The server sends payloads from a file in 64 KiB
 * pieces, each payload's pieces queued at once; the client reads them
 * either as fast as they come (8 payloads), or one read of a small
 * receive buffer every 20 ms (about 1-2 MB/s, one payload). When the last
 * piece went, the server's rate must be what the client allowed and the
 * socket's TCP_NOTSENT_LOWAT about 20 ms of it: for the slow client well
 * under the 128 KiB a fast connection keeps, so that a frame queued behind
 * a payload waits for little of it; on a bulk uplink (wire_uplink.h) a
 * fast connection keeps about 20 ms of its rate, up to 4 MiB.
 *
 * With an uplink (wire_uplink.h) the server's socket is paced: the one
 * backlogged connection gets the uplink's whole rate as its
 * SO_MAX_PACING_RATE, the fast client then gets no more than about that,
 * and the connection no longer counts once freed. Several share a
 * quarter more than the rate (wire_uplink.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire_conn-int.h"
#include "wire_fixture.h"

#define FILE_BYTES (8u * 1024u * 1024u)
#define PIECE (64u * 1024u)
/* The slow client takes 2 MiB of the file (~1.5 s); the fast one all of
 * it 8 times, one payload each (64 MiB), so that its bytes make
 * samples (WIRE_RATE_SAMPLE_BYTES each). */
#define ROUNDS_FAST 8u
#define TICK_MS 20u
#define TICK_BYTES 1u /* pause after the first piece a tick */
#define SLOW_RCVBUF (16 * 1024)
#define SLOW_BYTES (2u * 1024u * 1024u)

typedef struct {
  wf_loop_t w;
  bool slow;
  int fd;
  uint64_t total; /* payload bytes */
  uint32_t plen;  /* bytes of each payload */
  unsigned npieces, rounds, payloads;
  wire_conn_t *srv, *cli;
  unsigned done_ok;
  bool sampled;
  uint64_t rate;          /* server's wire_conn_send_rate at the end */
  uint32_t limit;         /* its stats' unsent_limit then */
  int lowat;              /* the socket's TCP_NOTSENT_LOWAT then */
  wire_uplink_t *uplink;  /* the server's, or NULL */
  unsigned long pacing;   /* its socket's SO_MAX_PACING_RATE a quarter in */
  uint32_t backlogged;    /* the uplink's count then */
  uint64_t got, tick_got; /* client */
  bool cli_closed;
  int cli_status;
  uv_timer_t tick;
} fx_t;

static void send_payload(fx_t *fx, wire_conn_t *c);

static void piece_done(wire_conn_t *c, void *arg, int status) {
  fx_t *fx = arg;
  uv_os_fd_t fd;
  socklen_t len = sizeof(fx->lowat);
  wire_conn_stats_t st;

  if (status != 0)
    return;
  fx->done_ok++;
  if (!fx->sampled && fx->done_ok == fx->npieces) {
    fx->sampled = true;
    fx->rate = wire_conn_send_rate(c);
    wire_conn_stats(c, &st);
    fx->limit = st.unsent_limit;
    assert_int_equal(uv_fileno((uv_handle_t *)&c->tcp, &fd), 0);
    assert_int_equal(
        getsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &fx->lowat, &len), 0);
  }
  /* A quarter in, with more queued: the uplink's count and the pace. */
  if (fx->done_ok == fx->npieces / 4u) {
    socklen_t plen = sizeof(fx->pacing);
    assert_int_equal(uv_fileno((uv_handle_t *)&c->tcp, &fd), 0);
    assert_int_equal(
        getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &fx->pacing, &plen), 0);
    if (fx->uplink != NULL)
      fx->backlogged = fx->uplink->backlogged;
  }
  if (fx->done_ok == fx->npieces)
    wire_conn_goodbye(c, WS_BYE_SHUTDOWN);
  else if (fx->done_ok % (fx->plen / PIECE) == 0)
    send_payload(fx, c); /* the next one once this one went */
}

/* One payload: the file, in PIECE pieces, all queued at once. */
static void send_payload(fx_t *fx, wire_conn_t *c) {
  ws_msg_t m;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memset(m.u.chunk.digest, 0x22, 32);
  m.u.chunk.chunk = fx->payloads++;
  m.u.chunk.len = fx->plen;
  assert_int_equal(wire_conn_send(c, &m), 0);
  for (uint32_t off = 0; off < fx->plen; off += PIECE)
    assert_int_equal(wire_conn_send_file(c, fx->fd, off, PIECE, piece_done, fx),
                     0);
}

static void srv_ready(wire_conn_t *c, const wire_peer_t *p) {
  fx_t *fx = wire_conn_user(c);

  (void)p;
  assert_int_equal(wire_conn_send_rate(c), 0); /* nothing measured yet */
  send_payload(fx, c);
}

static void srv_frame(wire_conn_t *c, const ws_msg_t *m) {
  (void)c;
  (void)m;
}

static void srv_close(wire_conn_t *c, int status) {
  fx_t *fx = wire_conn_user(c);

  (void)status;
  wf_listen_close(&fx->w);
}

static const wire_conn_cbs_t srv_cbs = {
    .on_ready = srv_ready,
    .on_frame = srv_frame,
    .on_close = srv_close,
};

/* The slow client reads TICK_BYTES a tick, then pauses until the next. */
static void cli_tick(uv_timer_t *t) {
  fx_t *fx = t->data;

  fx->tick_got = 0;
  wire_conn_read_resume(fx->cli);
}

static void cli_frame(wire_conn_t *c, const ws_msg_t *m) {
  if (m->type == WS_MSG_GOODBYE)
    wire_conn_close(c, 0);
}

static void cli_payload(wire_conn_t *c, const uint8_t *data, size_t len,
                        uint64_t off, bool last) {
  fx_t *fx = wire_conn_user(c);

  (void)data;
  (void)off;
  (void)last;
  fx->got += len;
  fx->tick_got += len;
  if (fx->slow && fx->tick_got >= TICK_BYTES)
    wire_conn_read_pause(c);
}

static void cli_close(wire_conn_t *c, int status) {
  fx_t *fx = wire_conn_user(c);

  fx->cli_status = status;
  fx->cli_closed = true;
  uv_close((uv_handle_t *)&fx->tick, NULL);
}

/* The slow client's socket takes little at a time (its receive buffer
 * small), so that each tick reads little. */
static void cli_ready(wire_conn_t *c, const wire_peer_t *p) {
  fx_t *fx = wire_conn_user(c);
  uv_os_fd_t fd;
  int v = SLOW_RCVBUF;

  (void)p;
  if (!fx->slow)
    return;
  assert_int_equal(uv_fileno((uv_handle_t *)&c->tcp, &fd), 0);
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
}

static const wire_conn_cbs_t cli_cbs = {
    .on_ready = cli_ready,
    .on_frame = cli_frame,
    .on_payload = cli_payload,
    .on_close = cli_close,
};

static void on_conn(wf_loop_t *w, uv_stream_t *server) {
  fx_t *fx = w->arg;
  wire_conn_cfg_t cfg;

  wf_cfg(&cfg, "srv", "", 7);
  cfg.hello_version = 1; /* clear: sendfile */
  cfg.uplink = fx->uplink;
  assert_int_equal(wire_conn_accept(server, &cfg, &srv_cbs, fx, &fx->srv), 0);
}

static void fx_run(fx_t *fx, bool slow, wire_uplink_t *uplink,
                   unsigned rounds) {
  char path[] = "/tmp/ws-test-wire-rate-XXXXXX";
  wire_conn_cfg_t cfg;
  uint8_t *data = calloc(1, FILE_BYTES);

  memset(fx, 0, sizeof(*fx));
  fx->slow = slow;
  fx->uplink = uplink;
  fx->rounds = slow ? 1u : rounds;
  fx->plen = slow ? SLOW_BYTES : FILE_BYTES;
  fx->total = (uint64_t)fx->plen * fx->rounds;
  fx->npieces = (unsigned)(fx->total / PIECE);
  assert_non_null(data);
  fx->fd = mkstemp(path);
  assert_true(fx->fd >= 0);
  unlink(path);
  assert_int_equal(write(fx->fd, data, FILE_BYTES), (ssize_t)FILE_BYTES);
  free(data);
  wf_init(&fx->w, on_conn, fx);
  assert_int_equal(uv_timer_init(&fx->w.loop, &fx->tick), 0);
  fx->tick.data = fx;
  if (slow)
    uv_timer_start(&fx->tick, cli_tick, TICK_MS, TICK_MS);
  wf_cfg(&cfg, "cli", "", 7);
  assert_int_equal(wire_conn_connect(&fx->w.loop, "127.0.0.1", fx->w.port, &cfg,
                                     &cli_cbs, fx, &fx->cli),
                   0);
  wf_run(&fx->w, 30000);
  wf_finish(&fx->w);
  close(fx->fd);
  assert_true(fx->cli_closed);
  assert_int_equal(fx->cli_status, 0);
  assert_int_equal(fx->got, fx->total);
  assert_true(fx->sampled);
  print_message("rate %llu B/s, unsent limit %u, socket %d\n",
                (unsigned long long)fx->rate, fx->limit, fx->lowat);
}

/* One read of a 16 KiB receive buffer (the kernel doubles it) per 20 ms
 * is at most ~1.6 MB/s; timers on a busy machine run late, so the bounds
 * are wide. The kernel then holds about 20 ms of it unsent (at most
 * ~32 KiB), well under the 128 KiB of a fast connection. */
static void test_slow_reader_lowers_unsent(void **state) {
  fx_t *fx = *state;

  fx_run(fx, true, NULL, 1);
  assert_true(fx->rate > 100u * 1000u);
  assert_true(fx->rate < 3u * 1000u * 1000u);
  assert_true(fx->limit >= WIRE_NOTSENT_MIN_BYTES);
  assert_true(fx->limit <= 64u * 1024u);
  assert_int_equal(fx->lowat, (int)fx->limit); /* the socket has it */
}

/* Read as fast as it comes (loopback): hundreds of MB/s, the most. */
static void test_fast_reader_keeps_the_most(void **state) {
  fx_t *fx = *state;

  fx_run(fx, false, NULL, ROUNDS_FAST);
  assert_true(fx->rate > 20u * 1000u * 1000u);
  assert_int_equal(fx->limit, WIRE_NOTSENT_LOWAT_BYTES);
  assert_int_equal(fx->lowat, (int)WIRE_NOTSENT_LOWAT_BYTES);
}

/* On a bulk uplink (a node whose frames wait on no one) the same reader
 * lets the kernel hold about 20 ms of the rate up to
 * WIRE_NOTSENT_BULK_BYTES (the limit moves only by a quarter or more):
 * above 20 MB/s that is over 400 KB, past the 128 KiB of the rest. */
static void test_bulk_uplink_holds_more(void **state) {
  fx_t *fx = *state;
  wire_uplink_t up;

  wire_uplink_init(&up, 0); /* not paced */
  wire_uplink_set_bulk(&up, true);
  fx_run(fx, false, &up, ROUNDS_FAST);
  assert_true(fx->rate > 20u * 1000u * 1000u);
  uint64_t want =
      wire_rate_bytes(fx->rate, WIRE_UNSENT_MS, WIRE_NOTSENT_MIN_BYTES,
                      WIRE_NOTSENT_BULK_BYTES);
  assert_true((uint64_t)fx->limit * 4u >= want * 3u);
  assert_true((uint64_t)fx->limit * 3u <= want * 4u);
  assert_true(fx->limit > WIRE_NOTSENT_LOWAT_BYTES);
  assert_int_equal(fx->lowat, (int)fx->limit);
}

/* 16 MiB through an uplink of PACED_RATE: about a second, at no more than
 * about that rate (unpaced, loopback gives hundreds of MB/s: the test
 * above). */
#define PACED_RATE (16u * 1000u * 1000u)
static void test_uplink_paces_the_socket(void **state) {
  fx_t *fx = *state;
  wire_uplink_t up;

  wire_uplink_init(&up, PACED_RATE);
  fx_run(fx, false, &up, 2);
  assert_int_equal(fx->backlogged, 1);
  assert_int_equal(fx->pacing, PACED_RATE);
  assert_true(fx->rate > PACED_RATE / 4u);
  assert_true(fx->rate < PACED_RATE * 3u / 2u);
  assert_int_equal(up.backlogged, 0); /* the connection was freed */
}

/* The share: the whole rate for one (or none), a quarter more than the
 * rate divided among several (never more than the rate); nothing without
 * a rate. */
static void test_uplink_share(void **state) {
  wire_uplink_t up;

  (void)state;
  wire_uplink_init(&up, 0);
  up.backlogged = 3;
  assert_int_equal(wire_uplink_share(&up), 0);
  wire_uplink_init(&up, 12000000u);
  assert_int_equal(wire_uplink_share(&up), 12000000u);
  up.backlogged = 1;
  assert_int_equal(wire_uplink_share(&up), 12000000u);
  up.backlogged = 2;
  assert_int_equal(wire_uplink_share(&up), 7500000u);
  up.backlogged = 5;
  assert_int_equal(wire_uplink_share(&up), 3000000u);
}

int main(void) {
  static fx_t fx;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_prestate(test_slow_reader_lowers_unsent, &fx),
      cmocka_unit_test_prestate(test_fast_reader_keeps_the_most, &fx),
      cmocka_unit_test_prestate(test_bulk_uplink_holds_more, &fx),
      cmocka_unit_test_prestate(test_uplink_paces_the_socket, &fx),
      cmocka_unit_test(test_uplink_share),
  };

  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
