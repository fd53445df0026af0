/* test_tracker_link.c - the tracker link (tracker_link.c) against a fake
 * tracker built from wire_conn in this process (one uv loop, 127.0.0.1,
 * ephemeral port). The fake tracker records every frame it gets and answers
 * ANNOUNCE with a reply carrying peers, a lease and a wanted release; the
 * scripted steps drive the client's API from the callbacks. Asserts run after
 * the loop stops; every test ends with uv_loop_close == 0.
 */
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/tracker_link.h"
#include "wire_fixture.h"

#define MAX_ANN 16
#define TF_JITTER_IV_MS 200u /* mode 5: the interval its replies give */
#define TF_JITTER_ANNS 13u   /* mode 5: announces before the close */
#define TF_SOON_IV_MS 60000u /* mode 6: the interval its replies give */

typedef struct {
  uint8_t event, role;
  bool want;
  uint32_t total;
  uint16_t port;
  char zone[WS_ZONE_MAX + 1];
  char uri[64];
  bool has_bits;
  uint8_t bits[4];
  uint32_t n_list;
  uint32_t list[4];
  unsigned conn_no; /* which fake-tracker connection it came on */
} ann_rec_t;

typedef struct {
  wf_loop_t w;
  wire_conn_cfg_t tcfg;
  wire_conn_t *srv;
  unsigned conns, srv_closed;
  int srv_status;
  int mode; /* 1: announce flow, 2: reconnect */
  peer_tracker_link_t *tc;
  peer_tracker_link_cfg_t ccfg;
  uint8_t dig_a[32], dig_b[32];
  /* fake tracker saw */
  unsigned nann;
  ann_rec_t ann[MAX_ANN];
  unsigned nhave;
  uint32_t have_chunk;
  char have_from[WS_NODE_ID_MAX + 1]; /* the HAVE's "f" */
  unsigned nrel;
  uint32_t rel_chunk;
  unsigned nbye;
  /* client callbacks saw */
  unsigned npeers_cb;
  uint32_t n_peers;
  char peer1_host[WS_HOST_MAX + 1];
  unsigned nleases_cb;
  uint32_t lease_chunks[2];
  uint32_t lease_ttl;
  unsigned nwanted_cb;
  bool wanted_ok;
  unsigned links_up, links_down;
  uv_timer_t t;
  bool t_open;
  unsigned t_step;
  bool done;
  peer_tracker_link_stats_t refused_st;
  /* mode 5: when the last reply went out, and each reply-to-announce gap */
  uint64_t reply_ms;
  unsigned ngaps;
  uint64_t gaps[MAX_ANN];
} tf_t;

/* ---- fake tracker ---------------------------------------------------------
 */

static void tf_reply(tf_t *tf, const ws_announce_t *a) {
  ws_peer_info_t peers[2];
  uint32_t lease_chunks[2] = {7, 8};
  ws_lease_t lease;
  ws_wanted_t wanted;
  ws_msg_t r;

  memset(&r, 0, sizeof(r));
  memset(peers, 0, sizeof(peers));
  memset(&lease, 0, sizeof(lease));
  memset(&wanted, 0, sizeof(wanted));
  r.type = WS_MSG_ANNOUNCE_REPLY;
  memcpy(r.u.announce_reply.digest, a->digest, 32);
  r.u.announce_reply.interval_ms = tf->mode == 5   ? TF_JITTER_IV_MS
                                   : tf->mode == 6 ? TF_SOON_IV_MS
                                                   : 150;
  memcpy(peers[0].node_id, "n1", 3);
  memcpy(peers[0].host, "10.1.0.1", 9);
  peers[0].port = 7001;
  memcpy(peers[1].node_id, "n2", 3);
  memcpy(peers[1].host, "10.1.0.2", 9);
  peers[1].port = 7002;
  r.u.announce_reply.peers = peers;
  r.u.announce_reply.n_peers = 2;
  memcpy(lease.digest, a->digest, 32);
  lease.chunks = lease_chunks;
  lease.n_chunks = 2;
  lease.ttl_ms = 9000;
  r.u.announce_reply.leases = &lease;
  r.u.announce_reply.n_leases = a->event == WS_ANN_STARTED ? 1 : 0;
  r.u.announce_reply.streams = 1;
  memcpy(wanted.digest, tf->dig_b, 32);
  wanted.uri = "s3://bucket/m/sha256-b/manifest.json";
  r.u.announce_reply.wanted = &wanted;
  r.u.announce_reply.n_wanted = 1;
  assert_int_equal(wire_conn_send(tf->srv, &r), 0);
}

static void tf_record(tf_t *tf, const ws_announce_t *a) {
  ann_rec_t *rec;
  uint32_t i;

  assert_true(tf->nann < MAX_ANN);
  rec = &tf->ann[tf->nann++];
  rec->event = a->event;
  rec->role = a->role;
  rec->want = a->want;
  rec->total = a->total_chunks;
  rec->port = a->port;
  memcpy(rec->zone, a->zone, sizeof(rec->zone));
  if (a->uri != NULL)
    memcpy(rec->uri, a->uri, strnlen(a->uri, sizeof(rec->uri) - 1));
  rec->has_bits = a->have_bits != NULL;
  if (rec->has_bits)
    memcpy(rec->bits, a->have_bits, ws_bitfield_nbytes(a->total_chunks));
  rec->n_list = a->n_have_list;
  for (i = 0; i < a->n_have_list && i < 4; i++)
    rec->list[i] = a->have_list[i];
  rec->conn_no = tf->conns;
}

/* Mode 3: a full tracker. Every connection is turned away right after the
 * handshake, as p2p-tracker does at its --max-peers: ERROR naming no
 * release, then GOODBYE. */
static void tf_on_ready(wire_conn_t *c, const wire_peer_t *peer) {
  tf_t *tf = wire_conn_user(c);
  ws_msg_t m;

  (void)peer;
  if (tf->mode != 3)
    return;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ERROR;
  m.u.error.code = WS_ELIMIT;
  snprintf(m.u.error.msg, sizeof(m.u.error.msg),
           "tracker full: 1 of 1 peers connected (--max-peers)");
  assert_int_equal(wire_conn_send(c, &m), 0);
  wire_conn_goodbye(c, WS_BYE_SHUTDOWN);
}

/* Mode 1 script: ann#1 (started) -> reply; the client's on_leases marks
 * chunk 7 held (HAVE); ann#2 (update, delta [7]) -> reply; the client's
 * on_peers for it releases lease chunk 8 and calls done; ann#3 (completed)
 * -> the client is closed (reply 3 is never delivered). */
static void tf_mode1(tf_t *tf) {
  if (tf->nann == 3) {
    peer_tracker_link_close(tf->tc);
    tf->done = true;
  }
}

/* Mode 2 script: ann#1 -> kill the tracker (connection and listener). The
 * test timer brings the listener back; ann#2 arrives on connection 2. */
static void tf_mode2(tf_t *tf) {
  if (tf->nann == 1) {
    wire_conn_close(tf->srv, WS_ECANCELED);
    wf_listen_close(&tf->w);
  } else if (tf->nann == 2) {
    peer_tracker_link_close(tf->tc);
    tf->done = true;
  }
}

/* Mode 4 script, a tracker from before "iv 0": ann#1 -> reply (150 ms);
 * the client's HAVE -> a reply that answers no announce but carries a
 * 60-s interval; ann#2 must still come 150 ms after reply 1 -> close. */
static void tf_mode4(tf_t *tf) {
  if (tf->nann == 2) {
    peer_tracker_link_close(tf->tc);
    tf->done = true;
  }
}

/* Modes 5 and 6: the time from the last reply to this announce (answered
 * at once) is kept. */
static void tf_gap(tf_t *tf) {
  uint64_t now = uv_now(&tf->w.loop);

  if (tf->nann > 1)
    tf->gaps[tf->ngaps++] = now - tf->reply_ms;
  tf->reply_ms = now;
}

static void t_close(uv_timer_t *t) {
  tf_t *tf = t->data;

  peer_tracker_link_close(tf->tc);
  tf->done = true;
}

/* Mode 5 script: every announce is answered (TF_JITTER_IV_MS); after
 * TF_JITTER_ANNS announces the client is closed. Mode 6: every announce is
 * answered with a 60-s interval (the client asks for the next one soon,
 * cl_on_peers), and 4.5 s after the third announce the client is closed. */
static void tf_mode_gaps(tf_t *tf) {
  tf_gap(tf);
  if (tf->mode == 5 && tf->nann == TF_JITTER_ANNS)
    t_close(&tf->t);
  if (tf->mode == 6 && tf->nann == 1 + WS_ANNOUNCE_SOON_MAX)
    assert_int_equal(uv_timer_start(&tf->t, t_close, 4500, 0), 0);
}

static void tf_push_long_interval(tf_t *tf) {
  ws_msg_t r;

  memset(&r, 0, sizeof(r));
  r.type = WS_MSG_ANNOUNCE_REPLY;
  memcpy(r.u.announce_reply.digest, tf->dig_a, 32);
  r.u.announce_reply.interval_ms = 60000;
  assert_int_equal(wire_conn_send(tf->srv, &r), 0);
}

static void tf_on_frame(wire_conn_t *c, const ws_msg_t *m) {
  tf_t *tf = wire_conn_user(c);

  switch (m->type) {
  case WS_MSG_ANNOUNCE:
    if (tf->mode == 3)
      break; /* turned away: its GOODBYE is on the way */
    tf_record(tf, &m->u.announce);
    if (tf->nann == 1 || tf->mode == 1 || tf->mode == 5 || tf->mode == 6)
      tf_reply(tf, &m->u.announce);
    if (tf->mode == 1)
      tf_mode1(tf);
    else if (tf->mode == 5 || tf->mode == 6)
      tf_mode_gaps(tf);
    else if (tf->mode == 4)
      tf_mode4(tf);
    else
      tf_mode2(tf);
    break;
  case WS_MSG_HAVE:
    if (tf->mode == 4)
      tf_push_long_interval(tf);
    tf->nhave++;
    tf->have_chunk = m->u.have.chunk;
    snprintf(tf->have_from, sizeof(tf->have_from), "%s", m->u.have.from);
    break;
  case WS_MSG_LEASE_RELEASE:
    tf->nrel++;
    assert_int_equal(m->u.lease.n_chunks, 1);
    tf->rel_chunk = m->u.lease.chunks[0];
    break;
  case WS_MSG_GOODBYE:
    tf->nbye++;
    break;
  default:
    break;
  }
}

static void tf_on_close(wire_conn_t *c, int status) {
  tf_t *tf = wire_conn_user(c);

  tf->srv_closed++;
  tf->srv_status = status;
  tf->srv = NULL;
  if (tf->done) {
    wf_listen_close(&tf->w);
    if (tf->t_open) {
      tf->t_open = false;
      uv_close((uv_handle_t *)&tf->t, NULL);
    }
  }
}

static const wire_conn_cbs_t k_tf_cbs = {
    .on_ready = tf_on_ready,
    .on_frame = tf_on_frame,
    .on_close = tf_on_close,
};

static void tf_on_conn(wf_loop_t *w, uv_stream_t *server) {
  tf_t *tf = w->arg;

  assert_null(tf->srv);
  tf->conns++;
  assert_int_equal(wire_conn_accept(server, &tf->tcfg, &k_tf_cbs, tf, &tf->srv),
                   0);
}

/* ---- client callbacks ------------------------------------------------------
 */

static void cl_on_peers(void *arg, const uint8_t digest[32],
                        const ws_peer_info_t *peers, uint32_t n,
                        const char (*tree)[WS_NODE_ID_MAX + 1],
                        uint32_t ntree) {
  tf_t *tf = arg;
  (void)tree;
  (void)ntree;

  assert_memory_equal(digest, tf->dig_a, 32);
  tf->npeers_cb++;
  tf->n_peers = n;
  if (n > 1)
    memcpy(tf->peer1_host, peers[1].host, sizeof(tf->peer1_host));
  if (tf->mode == 6) /* short of neighbours, as swarm.c says after dialing */
    assert_int_equal(peer_tracker_link_soon(tf->tc, digest), 0);
  if (tf->mode == 1 && tf->npeers_cb == 2) {
    uint32_t eight = 8;

    assert_int_equal(
        peer_tracker_link_lease_release(tf->tc, tf->dig_a, &eight, 1, NULL, 0),
        0);
    assert_int_equal(peer_tracker_link_done(tf->tc, tf->dig_a), 0);
  }
}

static void cl_on_leases(void *arg, const uint8_t digest[32],
                         const uint32_t *chunks, uint32_t n, uint32_t ttl,
                         uint32_t streams) {
  tf_t *tf = arg;

  assert_memory_equal(digest, tf->dig_a, 32);
  assert_int_equal(n, 2);
  assert_int_equal(streams, 1);
  tf->nleases_cb++;
  tf->lease_chunks[0] = chunks[0];
  tf->lease_chunks[1] = chunks[1];
  tf->lease_ttl = ttl;
  if (tf->mode == 1 || tf->mode == 4) {
    /* "fetched" chunk 7 (from neighbour nbr-1: the HAVE names it) */
    assert_int_equal(
        peer_tracker_link_have_from(tf->tc, digest, chunks[0], "nbr-1"), 0);
    assert_int_equal(peer_tracker_link_have(tf->tc, digest, chunks[0]), 0);
  }
}

static void cl_on_wanted(void *arg, const uint8_t digest[32], const char *uri) {
  tf_t *tf = arg;

  tf->nwanted_cb++;
  tf->wanted_ok = memcmp(digest, tf->dig_b, 32) == 0 && uri != NULL &&
                  strcmp(uri, "s3://bucket/m/sha256-b/manifest.json") == 0;
}

static void cl_on_link(void *arg, bool up, int status) {
  tf_t *tf = arg;

  (void)status;
  if (up)
    tf->links_up++;
  else
    tf->links_down++;
}

static const peer_tracker_link_cbs_t k_cl_cbs = {
    .on_peers = cl_on_peers,
    .on_leases = cl_on_leases,
    .on_wanted = cl_on_wanted,
    .on_link = cl_on_link,
};

static tf_t *tf_new(int mode) {
  tf_t *tf = calloc(1, sizeof(*tf));
  peer_tracker_link_cbs_t cbs = k_cl_cbs;
  char addr[32];

  assert_non_null(tf);
  tf->mode = mode;
  memset(tf->dig_a, 0xa1, 32);
  memset(tf->dig_b, 0xb2, 32);
  wf_init(&tf->w, tf_on_conn, tf);
  wf_cfg(&tf->tcfg, "tracker-1", "", 0x33);
  tf->tcfg.role = WS_ROLE_TRACKER;
  peer_tracker_link_cfg_init(&tf->ccfg);
  snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)tf->w.port);
  assert_int_equal(peer_tracker_link_cfg_addr(&tf->ccfg, addr), 0);
  memset(tf->ccfg.key, 0x33, sizeof(tf->ccfg.key));
  snprintf(tf->ccfg.node_id, sizeof(tf->ccfg.node_id), "peer-7");
  snprintf(tf->ccfg.zone, sizeof(tf->ccfg.zone), "z1");
  tf->ccfg.listen_port = 7100;
  tf->ccfg.backoff_min_ms = 20;
  tf->ccfg.backoff_max_ms = mode == 3 ? 640 : 80;
  assert_int_equal(uv_timer_init(&tf->w.loop, &tf->t), 0);
  tf->t.data = tf;
  tf->t_open = true;
  cbs.arg = tf;
  assert_int_equal(peer_tracker_link_new(&tf->w.loop, &tf->ccfg, &cbs, &tf->tc),
                   0);
  return tf;
}

static void tf_free(tf_t *tf) {
  if (tf->t_open)
    uv_close((uv_handle_t *)&tf->t, NULL);
  wf_finish(&tf->w);
  free(tf);
}

static void track_a(tf_t *tf, uint32_t total, const uint32_t *held,
                    unsigned n) {
  ws_bitfield_t bf;
  unsigned i;

  assert_int_equal(ws_bitfield_init(&bf, total), 0);
  for (i = 0; i < n; i++)
    ws_bitfield_set(&bf, held[i]);
  assert_int_equal(peer_tracker_link_track(
                       tf->tc, tf->dig_a, total, &bf,
                       "s3://bucket/m/sha256-a/manifest.json", WS_SWARM_LEECH),
                   0);
  ws_bitfield_free(&bf);
}

/* ---- tests ------------------------------------------------------------------
 */

static void test_announce_flow(void **state) {
  tf_t *tf = tf_new(1);
  const uint32_t held[2] = {0, 5};
  peer_tracker_link_stats_t st;

  (void)state;
  track_a(tf, 20, held, 2); /* before the link is up: sent on ready */
  assert_int_equal(peer_tracker_link_have(tf->tc, tf->dig_b, 1), WS_ENOTFOUND);
  assert_int_equal(peer_tracker_link_have(tf->tc, tf->dig_a, 20), WS_EUSAGE);
  assert_int_equal(
      peer_tracker_link_lease_renew(tf->tc, tf->dig_a, held, 1, NULL, 0),
      -ENOTCONN);
  peer_tracker_link_stats(tf->tc, &st);
  assert_false(st.up);
  wf_run(&tf->w, 10000);

  assert_int_equal(tf->nann, 3);
  /* ann#1: full state */
  assert_int_equal(tf->ann[0].event, WS_ANN_STARTED);
  assert_int_equal(tf->ann[0].total, 20);
  assert_int_equal(tf->ann[0].role, WS_SWARM_LEECH);
  assert_true(tf->ann[0].want);
  assert_int_equal(tf->ann[0].port, 7100);
  assert_string_equal(tf->ann[0].zone, "z1");
  assert_string_equal(tf->ann[0].uri, "s3://bucket/m/sha256-a/manifest.json");
  assert_true(tf->ann[0].has_bits);
  assert_int_equal(tf->ann[0].bits[0], 0x84); /* chunks 0 and 5 */
  assert_int_equal(tf->ann[0].bits[1], 0);
  assert_int_equal(tf->ann[0].n_list, 0);
  /* ann#2 after the reply's 150 ms interval: delta only */
  assert_int_equal(tf->ann[1].event, WS_ANN_UPDATE);
  assert_false(tf->ann[1].has_bits);
  assert_int_equal(tf->ann[1].n_list, 1);
  assert_int_equal(tf->ann[1].list[0], 7);
  /* ann#3 at once on done */
  assert_int_equal(tf->ann[2].event, WS_ANN_COMPLETED);
  assert_int_equal(tf->ann[2].role, WS_SWARM_SEED);
  assert_false(tf->ann[2].want);
  /* HAVE sent immediately, once; lease released; goodbye on close */
  assert_int_equal(tf->nhave, 1);
  assert_int_equal(tf->have_chunk, 7);
  assert_string_equal(tf->have_from, "nbr-1");
  assert_int_equal(tf->nrel, 1);
  assert_int_equal(tf->rel_chunk, 8);
  assert_int_equal(tf->nbye, 1);
  assert_int_equal(tf->srv_status, UV_EOF);
  /* the client got the reply contents */
  /* replies 1 and 2; the third crosses the client's close */
  assert_int_equal(tf->npeers_cb, 2);
  assert_int_equal(tf->n_peers, 2);
  assert_string_equal(tf->peer1_host, "10.1.0.2");
  assert_int_equal(tf->nleases_cb, 1);
  assert_int_equal(tf->lease_chunks[0], 7);
  assert_int_equal(tf->lease_chunks[1], 8);
  assert_int_equal(tf->lease_ttl, 9000);
  assert_int_equal(tf->nwanted_cb, 2);
  assert_true(tf->wanted_ok);
  assert_int_equal(tf->links_up, 1);
  assert_int_equal(tf->conns, 1);
  tf_free(tf);
}

/* A reply that answers no announce does not push the next one back. */
static void test_other_reply_keeps_the_announce_time(void **state) {
  tf_t *tf = tf_new(4);
  const uint32_t held[1] = {0};

  (void)state;
  track_a(tf, 20, held, 1);
  wf_run(&tf->w, 10000);
  assert_int_equal(tf->nhave, 1); /* the 60-s reply went out */
  assert_int_equal(tf->nann, 2);  /* ann#2 came anyway, well before */
  assert_int_equal(tf->ann[1].event, WS_ANN_UPDATE);
  assert_int_equal(tf->npeers_cb, 2); /* the client read both replies */
  tf_free(tf);
}

/* Announces do not keep step: each comes a random time of up to
 * WS_ANNOUNCE_JITTER_PCT % before the reply's interval is over, never
 * later. With the interval taken as is, every gap was the
 * interval or longer (timers fire late, never early), and ten thousand
 * nodes that a tracker's stall had put in step announced together every
 * interval from then on. */
static void test_announces_do_not_keep_step(void **state) {
  tf_t *tf = tf_new(5);
  const uint32_t held[1] = {0};
  uint64_t lo =
      TF_JITTER_IV_MS - TF_JITTER_IV_MS * WS_ANNOUNCE_JITTER_PCT / 100;
  unsigned early = 0, i;

  (void)state;
  track_a(tf, 20, held, 1);
  wf_run(&tf->w, 20000);
  assert_int_equal(tf->nann, TF_JITTER_ANNS);
  assert_int_equal(tf->ngaps, TF_JITTER_ANNS - 1);
  for (i = 0; i < tf->ngaps; i++) {
    assert_true(tf->gaps[i] + 1 >= lo); /* 1: uv_now's rounding */
    if (tf->gaps[i] + 5 < TF_JITTER_IV_MS)
      early++;
  }
  /* Each gap is under the interval by more than 5 ms with chance 5/6;
   * with none of twelve so, the test fails once in 2e9 runs. */
  assert_true(early > 0);
  tf_free(tf);
}

/* Short of neighbours: the next announce comes WS_ANNOUNCE_SOON_MS
 * after the reply, then twice that, not a whole interval later; then the
 * interval again (nothing more within 4.5 s). Without it a node that
 * joined among the first of a cluster-wide start, which the tracker could
 * name only the members joined before it, waited the whole interval for
 * more (docs/benchmarks.md, session 30). */
static void test_short_of_peers_asks_again_soon(void **state) {
  tf_t *tf = tf_new(6);
  const uint32_t held[1] = {0};

  (void)state;
  assert_int_equal(peer_tracker_link_soon(tf->tc, tf->dig_b), WS_ENOTFOUND);
  track_a(tf, 20, held, 1);
  wf_run(&tf->w, 20000);
  assert_true(tf->done);
  assert_int_equal(tf->nann, 1 + WS_ANNOUNCE_SOON_MAX);
  assert_int_equal(tf->ngaps, WS_ANNOUNCE_SOON_MAX);
  for (unsigned i = 0; i < tf->ngaps; i++) {
    uint64_t want = (uint64_t)WS_ANNOUNCE_SOON_MS << i;
    assert_true(tf->gaps[i] + 1 >= want);   /* 1: uv_now's rounding */
    assert_true(tf->gaps[i] < want + 5000); /* well before the 51-60 s */
  }
  tf_free(tf);
}

/* While the tracker is gone: a chunk is gained, reconnects are refused.
 * Then the tracker comes back on the same port. */
static void t_step(uv_timer_t *t) {
  tf_t *tf = t->data;

  if (tf->t_step == 0) {
    assert_int_equal(tf->links_down, 1);
    assert_int_equal(peer_tracker_link_have(tf->tc, tf->dig_a, 3), 0);
    tf->t_step = 1;
    uv_timer_start(&tf->t, t_step, 150, 0);
  } else {
    wf_relisten(&tf->w);
    tf->t_step = 2;
  }
}

static void test_reconnect(void **state) {
  tf_t *tf = tf_new(2);
  peer_tracker_link_stats_t st;

  (void)state;
  track_a(tf, 8, NULL, 0);
  /* The fake tracker dies on the first announce; step the script once the
   * link is down. */
  uv_timer_start(&tf->t, t_step, 100, 0);
  wf_run(&tf->w, 10000);
  assert_int_equal(tf->t_step, 2);
  assert_int_equal(tf->nann, 2);
  assert_int_equal(tf->conns, 2);
  assert_int_equal(tf->ann[0].conn_no, 1);
  assert_true(tf->ann[0].has_bits);
  assert_int_equal(tf->ann[0].bits[0], 0);
  /* the new connection gets the full state again, with the chunk gained
   * while the tracker was down */
  assert_int_equal(tf->ann[1].conn_no, 2);
  assert_int_equal(tf->ann[1].event, WS_ANN_STARTED);
  assert_true(tf->ann[1].has_bits);
  assert_int_equal(tf->ann[1].bits[0], 0x10); /* chunk 3 */
  assert_int_equal(tf->ann[1].n_list, 0);
  /* Up once: the second connection closes before the tracker answers
   * (a link is up when the tracker answered, not at the handshake). */
  assert_int_equal(tf->links_up, 1);
  assert_int_equal(tf->links_down, 1);
  assert_int_equal(tf->nhave, 0); /* it was down: no HAVE frame */
  tf_free(tf);
  (void)st;
}

static void refused_stop(uv_timer_t *t) {
  tf_t *tf = t->data;

  peer_tracker_link_stats(tf->tc, &tf->refused_st);
  peer_tracker_link_close(tf->tc);
  tf->done = true;
  wf_listen_close(&tf->w);
  tf->t_open = false;
  uv_close((uv_handle_t *)&tf->t, NULL);
}

/* A tracker that turns the node away after each handshake: the link never
 * counts as up (the daemon falls back as if the tracker were down), and
 * the reconnect delay keeps doubling (20, 40, ... 640 ms) instead of being
 * reset by each handshake (which reconnected every 10-20 ms here). */
static void test_refused_backs_off(void **state) {
  tf_t *tf = tf_new(3);

  (void)state;
  track_a(tf, 8, NULL, 0);
  uv_timer_start(&tf->t, refused_stop, 1200, 0);
  wf_run(&tf->w, 10000);
  assert_int_equal(tf->links_up, 0);
  assert_int_equal(tf->links_down, 0);
  assert_false(tf->refused_st.up);
  assert_true(tf->refused_st.refusals >= 3);
  /* Each wait is half to all of the current delay (jitter), the delay
   * doubling from 20 to 640 ms: waits of at least 10, 20, 40, 80, 160, 320,
   * 320 ms put the eighth connect at 950 ms and the ninth past 1.2 s, so
   * eight connects at most; with a reset at each handshake it was over
   * fifty. */
  assert_true(tf->conns >= 3 && tf->conns <= 8);
  assert_true(tf->refused_st.backoff_ms >= 160);
  assert_true(tf->refused_st.refusals <= tf->conns);
  assert_int_equal(tf->nann, 0);
  tf_free(tf);
}

static void test_cfg_addr(void **state) {
  peer_tracker_link_cfg_t cfg;

  (void)state;
  peer_tracker_link_cfg_init(&cfg);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "tracker.ns.svc:7000"), 0);
  assert_string_equal(cfg.host, "tracker.ns.svc");
  assert_int_equal(cfg.port, 7000);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "[::1]:9"), 0);
  assert_string_equal(cfg.host, "::1");
  assert_int_equal(cfg.port, 9);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "h:0"), WS_EUSAGE);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "h:70000"), WS_EUSAGE);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "h:7x"), WS_EUSAGE);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "h"), WS_EUSAGE);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, ":7"), WS_EUSAGE);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "::1:7"), WS_EUSAGE);
  assert_int_equal(peer_tracker_link_cfg_addr(&cfg, "[::1]7"), WS_EUSAGE);
  assert_int_equal(cfg.port, 9); /* untouched on failure */
}

int main(void) {
  /* As in p2pd and p2p-tracker: libuv writes to sockets with write(2), so
   * a peer that hangs up mid-reply must not kill the process. */
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_announce_flow),
      cmocka_unit_test(test_other_reply_keeps_the_announce_time),
      cmocka_unit_test(test_announces_do_not_keep_step),
      cmocka_unit_test(test_short_of_peers_asks_again_soon),
      cmocka_unit_test(test_reconnect),
      cmocka_unit_test(test_refused_backs_off),
      cmocka_unit_test(test_cfg_addr),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
