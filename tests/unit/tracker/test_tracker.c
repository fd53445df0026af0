/* test_tracker.c - the tracker facade end to end without a network:
 * connect/announce/have/renew/release/disconnect, replies (peers, leases,
 * wanted), caps (swarms, announce rate, chunk count), reconnect
 * replacement, prefetch semantics, restart rebuild, JSON and metrics.
 */
#include "trk_fixture.h"
#include "trk_json.h"
#include "trk_metrics.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#define URI_OF(hex) "s3://m/llama/sha256-" hex "/"
#define HEX "aa23456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static trk_peer_id_t conn(trk_tracker_t *t, const char *id, const char *zone,
                          uint16_t port) {
  trk_peer_info_t in = {
      .node_id = id, .addr = "10.0.0.9", .port = port, .zone = zone};
  trk_peer_id_t pid = 0, old = 77;
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), 0);
  assert_int_equal(old, 0);
  return pid;
}

/* Peers "p0".."p<n-1>", listening on ports 1000 + i. */
static void conn_n(trk_tracker_t *t, trk_peer_id_t *p, int n) {
  for (int i = 0; i < n; i++) {
    char id[8];
    snprintf(id, sizeof(id), "p%d", i);
    p[i] = conn(t, id, "", (uint16_t)(1000 + i));
  }
}

static trk_announce_t ann(const ws_hash_t *d, uint32_t total) {
  trk_announce_t a = {.digest = *d,
                      .total_chunks = total,
                      .role = TRK_ROLE_LEECH,
                      .want_leases = TRK_LEASES_PER_PEER_MAX,
                      .max_peers = TRK_REPLY_PEERS_DEFAULT};
  return a;
}

static void test_announce_flow(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d;
  /* 8 leases per peer with 2 downloaders, as the flow below counts. */
  trk_tracker_set_origin_inflight(t, 16);
  assert_int_equal(ws_hash_from_hex(HEX, 64, &d), 0);
  trk_peer_id_t a = conn(t, "a", "z1", 1000);
  trk_peer_id_t b = conn(t, "b", "z1", 1001);
  trk_announce_t an = ann(&d, 64);
  an.uri = URI_OF(HEX);
  assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  assert_int_equal(r.npeers, 0); /* alone */
  assert_int_equal(r.nleases, TRK_LEASES_PER_PEER_MAX);
  assert_int_equal(r.ngranted, TRK_LEASES_PER_PEER_MAX);
  assert_int_equal(r.interval_ms, TRK_ANNOUNCE_INTERVAL_MS);
  assert_int_equal(trk_tracker_swarm_count(t), 1);
  assert_string_equal(trk_swarm_uri(trk_tracker_swarm_at(t, 0)), URI_OF(HEX));
  assert_int_equal(trk_tracker_announce(t, b, &an, 0, &r), 0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "a");
  assert_int_equal(r.nleases, TRK_LEASES_PER_PEER_MAX); /* 2 downloaders */
  for (uint32_t k = 0; k < r.nleases; k++)
    assert_true(r.leases[k].chunk >= TRK_LEASES_PER_PEER_MAX);
  /* A reports a chunk: the lease completes and refills. */
  uint32_t c0 = 0;
  assert_int_equal(trk_tracker_have(t, a, &d, &c0, 1, 10, &r), 0);
  assert_int_equal(r.nleases, TRK_LEASES_PER_PEER_MAX);
  assert_int_equal(r.ngranted, 1);
  /* It answers no announce: the peer keeps its announce time. */
  assert_int_equal(r.interval_ms, 0);
  assert_int_equal(trk_tracker_have(t, a, &d, &c0, 1, 10, NULL), 0);
  uint32_t oob = 64;
  assert_int_equal(trk_tracker_have(t, a, &d, &oob, 1, 10, NULL), WS_EBADMSG);
  /* Renew/release of leases held, not held, unknown swarm. */
  ws_hash_t other = fx_digest(5);
  assert_int_equal(trk_tracker_renew(t, a, &d, 1, 20), 0);
  assert_int_equal(trk_tracker_renew(t, a, &d, 0, 20), WS_ENOTFOUND);
  assert_int_equal(trk_tracker_renew(t, a, &other, 1, 20), WS_ENOTFOUND);
  assert_int_equal(trk_tracker_release(t, a, &d, 1, 20), 0);
  assert_int_equal(trk_tracker_release(t, a, &d, 1, 20), WS_ENOTFOUND);
  assert_int_equal(trk_tracker_release(t, 12345, &d, 1, 20), WS_ENOTFOUND);
  /* Chunk count must match the swarm. */
  trk_announce_t bad = ann(&d, 65);
  assert_int_equal(trk_tracker_announce(t, b, &bad, 0, &r), WS_EPROTO);
  bad = ann(&d, TRK_MAX_CHUNKS + 1);
  assert_int_equal(trk_tracker_announce(t, b, &bad, 0, &r), WS_ELIMIT);
  bad = ann(&d, 64);
  bad.nhave = 65;
  uint32_t many[65] = {0};
  bad.have = many;
  assert_int_equal(trk_tracker_announce(t, b, &bad, 0, &r), WS_EBADMSG);
  /* Leases expire through tick. */
  assert_true(trk_tracker_tick(t, 20 + TRK_LEASE_TTL_MS) > 0);
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_true(st.leases_expired > 0);
  assert_int_equal(st.announces_rejected, 3);
  assert_int_equal(st.haves, 2);
  /* Leaving the last member ends the swarm: listed, ended, until the sweep
   * TRK_SWARM_ENDED_MS later frees it. */
  trk_tracker_disconnect(t, a);
  assert_int_equal(trk_tracker_swarm_count(t), 1);
  uint64_t since = 0;
  assert_false(
      trk_tracker_swarm_ended(t, trk_tracker_swarm_at(t, 0), 0, &since));
  trk_announce_t lv = ann(&d, 64);
  lv.leave = 1;
  assert_int_equal(trk_tracker_announce(t, b, &lv, 0, &r), 0);
  assert_int_equal(trk_tracker_swarm_count(t), 1);
  assert_true(
      trk_tracker_swarm_ended(t, trk_tracker_swarm_at(t, 0), 70000, &since));
  (void)trk_tracker_tick(t, 70000);
  (void)trk_tracker_tick(t, 70000 + TRK_SWARM_ENDED_MS - 1);
  assert_true(
      trk_tracker_swarm_ended(t, trk_tracker_swarm_at(t, 0), 80000, &since));
  assert_int_equal(since, 70000);
  (void)trk_tracker_tick(t, 70000 + TRK_SWARM_ENDED_MS);
  assert_int_equal(trk_tracker_swarm_count(t), 0);
  trk_tracker_disconnect(t, a); /* stale id: no-op */
  trk_tracker_free(t);
}

static void test_manifest_unknown_announce(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(1);
  trk_peer_id_t a = conn(t, "a", "", 1);
  trk_peer_id_t b = conn(t, "b", "", 2);
  trk_announce_t an = ann(&d, 10);
  an.role = TRK_ROLE_SEED;
  uint8_t all[2] = {0xFF, 0xC0};
  an.bitfield = all;
  an.bitfield_len = 2;
  assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  assert_int_equal(r.nleases, 0); /* seeds never lease */
  /* b has only the digest: it learns who holds the release, no join. */
  trk_announce_t q = ann(&d, 0);
  assert_int_equal(trk_tracker_announce(t, b, &q, 0, &r), 0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "a");
  assert_int_equal(r.nleases, 0);
  assert_int_equal(trk_swarm_member_count(trk_tracker_swarm_find(t, &d)), 1);
  ws_hash_t unknown = fx_digest(2);
  q = ann(&unknown, 0);
  assert_int_equal(trk_tracker_announce(t, b, &q, 0, &r), 0);
  assert_int_equal(r.npeers, 0);
  assert_int_equal(trk_tracker_swarm_count(t), 1);
  trk_tracker_free(t);
}

/* A cluster-wide start: four peers ask for the release's holders while they
 * read its manifest; the first to join gets its share of the origin
 * target, not all of it. Once the others fail to join in time, it may hold
 * the whole target. */
static void test_joining_peers_share_leases(void **state) {
  (void)state;
  /* The target's share of four and of two (rounded up). */
  enum {
    QUARTER = (TRK_ORIGIN_INFLIGHT_TARGET + 3) / 4,
    HALF = (TRK_ORIGIN_INFLIGHT_TARGET + 1) / 2
  };
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(3);
  trk_peer_id_t p[4];
  conn_n(t, p, 4);
  for (int i = 0; i < 4; i++) {
    trk_announce_t q = ann(&d, 0);
    assert_int_equal(trk_tracker_announce(t, p[i], &q, 0, &r), 0);
    assert_int_equal(r.nleases, 0);
  }
  trk_announce_t an = ann(&d, 64);
  assert_int_equal(trk_tracker_announce(t, p[0], &an, 10, &r), 0);
  assert_int_equal(r.streams, QUARTER);
  assert_int_equal(r.nleases, QUARTER + TRK_LEASE_SPARE);
  /* The second joins: three still count (itself no longer). */
  assert_int_equal(trk_tracker_announce(t, p[1], &an, 20, &r), 0);
  assert_int_equal(r.streams, QUARTER);
  /* The other two never join: after TRK_JOINING_MS the two members split
   * the target. */
  uint32_t c = r.leases[0].chunk;
  assert_int_equal(
      trk_tracker_have(t, p[1], &d, &c, 1, 20 + TRK_JOINING_MS, &r), 0);
  assert_int_equal(r.streams, HALF);
  assert_int_equal(r.nleases, HALF + TRK_LEASE_SPARE);
  trk_tracker_free(t);
}

/* A cluster-wide start of a release nobody holds yet: the first joiner
 * reads the manifest from S3; each later one is named it (first) and the
 * other joiners, and gets the manifest from a neighbour. A joiner that
 * does not serve (port 0) is named nobody's source; once the reader's
 * note runs out (it never joined), the next joiner reads. */
static void test_cold_start_one_reads_the_manifest(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(4);
  trk_peer_id_t p[4];
  conn_n(t, p, 4);
  trk_peer_id_t quiet = conn(t, "quiet", "", 0);
  trk_announce_t q = ann(&d, 0);
  assert_int_equal(trk_tracker_announce(t, quiet, &q, 0, &r), 0);
  assert_int_equal(r.npeers, 0); /* serves nobody: reads, but not for all */
  assert_int_equal(trk_tracker_announce(t, p[0], &q, 1, &r), 0);
  assert_int_equal(r.npeers, 0); /* the reader */
  assert_int_equal(trk_tracker_announce(t, p[0], &q, 2, &r), 0);
  assert_int_equal(r.npeers, 0); /* still it, announcing again */
  assert_int_equal(trk_tracker_announce(t, p[1], &q, 3, &r), 0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "p0");
  assert_int_equal(trk_tracker_announce(t, p[2], &q, 4, &r), 0);
  assert_int_equal(r.npeers, 2);
  assert_string_equal(r.peers[0]->node_id, "p0");
  assert_string_equal(r.peers[1]->node_id, "p1");
  q.max_peers = 1; /* the reader first, always */
  assert_int_equal(trk_tracker_announce(t, p[3], &q, 5, &r), 0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "p0");
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_int_equal(st.manifest_readers, 1);
  /* p0 never joined: TRK_JOINING_MS after its last announce the next
   * joiner reads. */
  q.max_peers = TRK_REPLY_PEERS_DEFAULT;
  assert_int_equal(trk_tracker_announce(t, p[1], &q, 2 + TRK_JOINING_MS, &r),
                   0);
  assert_int_equal(r.npeers, 0);
  trk_tracker_stats(t, &st);
  assert_int_equal(st.manifest_readers, 2);
  /* Once a member holds it, joiners are named the members, as before. */
  trk_announce_t an = ann(&d, 8);
  assert_int_equal(trk_tracker_announce(t, p[1], &an, 3 + TRK_JOINING_MS, &r),
                   0);
  assert_int_equal(trk_tracker_announce(t, p[2], &q, 4 + TRK_JOINING_MS, &r),
                   0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "p1");
  trk_tracker_free(t);
}

static void test_rate_and_unknown_peer(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(1);
  trk_peer_id_t a = conn(t, "a", "", 1);
  trk_announce_t an = ann(&d, 8);
  for (uint32_t i = 0; i < TRK_ANNOUNCE_BURST; i++)
    assert_int_equal(trk_tracker_announce(t, a, &an, 100, &r), 0);
  assert_int_equal(trk_tracker_announce(t, a, &an, 100, &r), WS_EBUSY);
  assert_int_equal(r.nleases, 0);
  assert_int_equal(trk_tracker_announce(t, a, &an, 100 + 1000, &r), 0);
  assert_int_equal(trk_tracker_announce(t, 999, &an, 100, &r), WS_ENOTFOUND);
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_int_equal(st.announces_limited, 1);
  assert_int_equal(st.announces, TRK_ANNOUNCE_BURST + 1u);
  trk_tracker_free(t);
}

static void test_caps(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(3, 1, 0);
  trk_reply_t r;
  trk_peer_id_t ids[3];
  char name[16];
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof(name), "p%d", i);
    ids[i] = conn(t, name, "", 1);
  }
  trk_peer_info_t in = {.node_id = "p3", .port = 1};
  trk_peer_id_t x;
  assert_int_equal(trk_tracker_connect(t, &in, 0, &x, NULL), WS_ELIMIT);
  /* Swarms per peer. */
  uint32_t k;
  for (k = 0; k < TRK_MAX_SWARMS_PER_PEER; k++) {
    ws_hash_t d = fx_digest((uint8_t)k);
    trk_announce_t an = ann(&d, 4);
    assert_int_equal(trk_tracker_announce(t, ids[0], &an, k * 1000, &r), 0);
  }
  ws_hash_t d = fx_digest(200);
  trk_announce_t an = ann(&d, 4);
  assert_int_equal(trk_tracker_announce(t, ids[0], &an, k * 1000, &r),
                   WS_ELIMIT);
  assert_int_equal(trk_tracker_swarm_count(t), TRK_MAX_SWARMS_PER_PEER);
  /* Disconnect ends every swarm the peer was alone in; the sweep frees
   * them TRK_SWARM_ENDED_MS later. */
  trk_tracker_disconnect(t, ids[0]);
  assert_int_equal(trk_tracker_swarm_count(t), TRK_MAX_SWARMS_PER_PEER);
  (void)trk_tracker_tick(t, 100000);
  (void)trk_tracker_tick(t, 100000 + TRK_SWARM_ENDED_MS);
  assert_int_equal(trk_tracker_swarm_count(t), 0);
  assert_int_equal(trk_peers_count(trk_tracker_peers(t)), 2);
  trk_tracker_free(t);
}

static void test_swarm_cap(void **state) {
  (void)state;
  uint32_t npeers = TRK_MAX_SWARMS / TRK_MAX_SWARMS_PER_PEER + 1;
  trk_tracker_t *t = trk_tracker_new(npeers, 1, 0);
  trk_reply_t r;
  uint32_t made = 0;
  char name[16];
  for (uint32_t p = 0; p < npeers; p++) {
    snprintf(name, sizeof(name), "p%u", p);
    trk_peer_id_t id = conn(t, name, "", 1);
    for (uint32_t k = 0; k < TRK_MAX_SWARMS_PER_PEER; k++) {
      ws_hash_t d;
      memset(&d, 0, sizeof(d));
      memcpy(d.b, &made, sizeof(made));
      trk_announce_t an = ann(&d, 2);
      int rc = trk_tracker_announce(t, id, &an, (uint64_t)k * 1000, &r);
      if (made < TRK_MAX_SWARMS) {
        assert_int_equal(rc, 0);
        made++;
      } else {
        assert_int_equal(rc, WS_ELIMIT);
      }
    }
  }
  assert_int_equal(trk_tracker_swarm_count(t), TRK_MAX_SWARMS);
  trk_tracker_free(t);
}

static void test_reconnect_replaces(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(1);
  trk_peer_id_t a = conn(t, "node", "", 1);
  trk_announce_t an = ann(&d, 16);
  assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  /* Alone: the whole target and a spare. */
  assert_int_equal(r.nleases, TRK_ORIGIN_INFLIGHT_TARGET + TRK_LEASE_SPARE);
  /* The same node id from another address is refused: the id is bound
   * to its address while connected, the first one stays. */
  trk_peer_info_t in = {.node_id = "node", .addr = "10.0.0.66", .port = 2};
  trk_peer_id_t a2, old = 77;
  assert_int_equal(trk_tracker_connect(t, &in, 5, &a2, &old), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_NODE_BOUND);
  assert_non_null(trk_peers_get(trk_tracker_peers(t), a));
  assert_int_equal(trk_tracker_swarm_count(t), 1);
  /* From its own address: a restarted daemon, the new one replaces it. */
  in.addr = "10.0.0.9";
  assert_int_equal(trk_tracker_connect(t, &in, 5, &a2, &old), 0);
  assert_int_equal(old, a);
  assert_int_not_equal(a2, a);
  assert_null(trk_peers_get(trk_tracker_peers(t), a));
  /* The old connection's leases went with it (its swarm ended): the new
   * one gets them, in a new swarm in the ended one's place. */
  uint64_t since;
  assert_true(
      trk_tracker_swarm_ended(t, trk_tracker_swarm_at(t, 0), 5, &since));
  assert_int_equal(trk_tracker_announce(t, a2, &an, 5, &r), 0);
  assert_int_equal(trk_tracker_swarm_count(t), 1);
  assert_false(
      trk_tracker_swarm_ended(t, trk_tracker_swarm_at(t, 0), 5, &since));
  assert_int_equal(r.leases[0].chunk, 0);
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_int_equal(st.peers_replaced, 1);
  trk_tracker_free(t);
}

static void test_prefetch_and_wanted_in_replies(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d, d2 = fx_digest(8);
  assert_int_equal(ws_hash_from_hex(HEX, 64, &d), 0);
  /* A digest nobody knows cannot be prefetched by digest alone. */
  assert_int_equal(trk_tracker_prefetch(t, &d2, NULL, 0), WS_ENOTFOUND);
  assert_int_equal(trk_tracker_prefetch(t, NULL, URI_OF(HEX), 0), 0);
  assert_int_equal(trk_tracker_prefetch(t, &d, NULL, 0), 1);
  trk_peer_id_t a = conn(t, "a", "", 1);
  trk_peer_id_t b = conn(t, "b", "", 2);
  /* Every peer's reply lists it until the peer joins that release. */
  trk_announce_t an = ann(&d2, 4);
  an.uri = "s3://m/other/sha256-x/";
  assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  assert_int_equal(r.nwanted, 1);
  assert_string_equal(r.wanted[0]->uri, URI_OF(HEX));
  an = ann(&d, 4);
  assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  assert_int_equal(r.nwanted, 0);
  an = ann(&d2, 4);
  assert_int_equal(trk_tracker_announce(t, b, &an, 0, &r), 0);
  assert_int_equal(r.nwanted, 1);
  /* Prefetch by digest of a known swarm takes the swarm's URI. */
  assert_int_equal(trk_tracker_prefetch(t, &d2, NULL, 0), 0);
  assert_string_equal(trk_wanted_find(trk_tracker_wanted(t), &d2)->uri,
                      "s3://m/other/sha256-x/");
  /* A wanted digest without URI learns it from an announce. */
  ws_hash_t d3 = fx_digest(9);
  trk_peer_id_t c = conn(t, "c", "", 3);
  an = ann(&d3, 4);
  assert_int_equal(trk_tracker_announce(t, c, &an, 0, &r), 0);
  assert_int_equal(trk_tracker_prefetch(t, &d3, NULL, 0), 0);
  assert_string_equal(trk_wanted_find(trk_tracker_wanted(t), &d3)->uri, "");
  an.uri = "s3://m/third/";
  assert_int_equal(trk_tracker_announce(t, c, &an, 1000, &r), 0);
  assert_string_equal(trk_wanted_find(trk_tracker_wanted(t), &d3)->uri,
                      "s3://m/third/");
  an.uri = "http://bad";
  assert_int_equal(trk_tracker_announce(t, c, &an, 2000, &r), WS_EUSAGE);
  trk_tracker_free(t);
}

/* Restart: a fresh tracker learns everything back from re-announces. */
static void test_restart_rebuilds(void **state) {
  (void)state;
  ws_hash_t d = fx_digest(4);
  trk_reply_t r;
  uint8_t half[2] = {0xFF, 0x00}, other[2] = {0x00, 0xF0};
  for (int round = 0; round < 2; round++) {
    trk_tracker_t *t = trk_tracker_new(0, (uint64_t)round + 1, 0);
    trk_peer_id_t a = conn(t, "a", "", 1);
    trk_peer_id_t b = conn(t, "b", "", 2);
    trk_announce_t an = ann(&d, 16);
    an.bitfield = half;
    an.bitfield_len = 2;
    assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
    an.bitfield = other;
    assert_int_equal(trk_tracker_announce(t, b, &an, 0, &r), 0);
    trk_swarm_stats_t st;
    trk_swarm_stats(trk_tracker_swarm_find(t, &d), &st);
    assert_int_equal(st.chunks_held, 12);
    /* Only the 4 chunks nobody has are leased, whatever happened before. */
    assert_int_equal(st.chunks_leased + st.chunks_need, 4);
    for (uint32_t k = 0; k < r.nleases; k++)
      assert_true(r.leases[k].chunk >= 12);
    trk_tracker_free(t);
  }
}

/* A restarted tracker (its --state file existed) leases nothing for
 * TRK_RESTART_HOLD_MS: until the holders announce again it would lease
 * every chunk to the first node that asks, which then reads from S3 what
 * the others hold (chaos seed 4301 read releases 2-3 times). Holders that
 * announce meanwhile are named; after the hold the tick tops every swarm
 * up with what nobody has. */
static void test_restart_holds_leases(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 1000);
  trk_reply_t r;
  ws_hash_t d, d2 = fx_digest(9), got;
  uint8_t half[2] = {0xFF, 0x00};
  assert_int_equal(ws_hash_from_hex(HEX, 64, &d), 0);
  trk_tracker_hold_leases(t, 1000 + TRK_RESTART_HOLD_MS);
  trk_peer_id_t fresh = conn(t, "fresh", "", 1);
  trk_announce_t an = ann(&d, 16), a2 = ann(&d2, 4);
  assert_int_equal(trk_tracker_announce(t, fresh, &an, 1100, &r), 0);
  assert_int_equal(r.nleases, 0); /* its holders may be reconnecting */
  assert_int_equal(trk_tracker_announce(t, fresh, &a2, 1100, &r), 0);
  assert_int_equal(r.nleases, 0);
  /* A holder of half of d comes back within the hold: named to fresh,
   * and still nothing is leased. */
  trk_peer_id_t holder = conn(t, "holder", "", 2);
  trk_announce_t ah = ann(&d, 16);
  ah.bitfield = half;
  ah.bitfield_len = 2;
  assert_int_equal(trk_tracker_announce(t, holder, &ah, 3000, &r), 0);
  assert_int_equal(trk_tracker_announce(t, fresh, &an, 3100, &r), 0);
  assert_int_equal(r.nleases, 0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "holder");
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_int_equal(st.hold_until_ms, 1000 + TRK_RESTART_HOLD_MS);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(trk_metrics_text(t, NULL, NULL, 3000, &text, &len), 0);
  assert_non_null(strstr(text, "weightswarm_tracker_restart_hold_seconds 8\n"));
  free(text);
  text = trk_json_swarms(t, 3000); /* the API says it too */
  cJSON *j = cJSON_Parse(text);
  assert_non_null(j);
  assert_true(cJSON_GetObjectItem(j, "restart_hold_s")->valuedouble == 8.0);
  cJSON_Delete(j);
  free(text);
  /* The hold is over: the tick marks the swarms, and fresh is pushed what
   * nobody has: chunks 8-15 of d, and d2. */
  (void)trk_tracker_tick(t, 999 + TRK_RESTART_HOLD_MS);
  assert_int_equal(trk_tracker_regrant_pending(t, 0), 0);
  (void)trk_tracker_tick(t, 1000 + TRK_RESTART_HOLD_MS);
  assert_int_equal(trk_tracker_regrant_pending(t, 0), 1);
  uint32_t pushed_d = 0, pushed_d2 = 0;
  for (uint32_t i = 0; i < 2; i++) {
    if (trk_tracker_regrant(t, fresh, i, 1000 + TRK_RESTART_HOLD_MS, &got,
                            &r) != 1)
      continue;
    for (uint32_t k = 0; k < r.nleases && ws_hash_eq(&got, &d); k++)
      assert_true(r.leases[k].chunk >= 8);
    *(ws_hash_eq(&got, &d) ? &pushed_d : &pushed_d2) += r.nleases;
  }
  assert_true(pushed_d > 0);
  assert_true(pushed_d2 > 0);
  trk_tracker_stats(t, &st);
  assert_int_equal(st.hold_until_ms, 0);
  trk_tracker_free(t);
}

/* A tracker without --state: a node that says it rejoins (HELLO "rj": it
 * lost its link to a tracker here) within TRK_RESTART_HOLD_MS of the start
 * makes it a restart, held until that long after the start. A node that
 * joins fresh, or rejoins after that window, starts no hold. */
static void test_rejoin_starts_hold(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 1000);
  trk_peer_id_t fresh, back, late, old;
  trk_reply_t r;
  ws_hash_t d;
  assert_int_equal(ws_hash_from_hex(HEX, 64, &d), 0);
  trk_peer_info_t in = {.node_id = "fresh", .addr = "10.0.0.9"};
  assert_int_equal(trk_tracker_connect(t, &in, 1500, &fresh, &old), 0);
  assert_int_equal(trk_tracker_hold_until(t), 0);
  in.node_id = "back";
  in.rejoin = true;
  assert_int_equal(trk_tracker_connect(t, &in, 3000, &back, &old), 0);
  assert_int_equal(trk_tracker_hold_until(t), 1000 + TRK_RESTART_HOLD_MS);
  trk_announce_t an = ann(&d, 16);
  assert_int_equal(trk_tracker_announce(t, fresh, &an, 3100, &r), 0);
  assert_int_equal(r.nleases, 0); /* its holders may be reconnecting */
  (void)trk_tracker_tick(t, 1000 + TRK_RESTART_HOLD_MS);
  assert_int_equal(trk_tracker_hold_until(t), 0);
  in.node_id = "late"; /* its link dropped on its own: no restart here */
  assert_int_equal(
      trk_tracker_connect(t, &in, 1000 + TRK_RESTART_HOLD_MS, &late, &old), 0);
  assert_int_equal(trk_tracker_hold_until(t), 0);
  assert_int_equal(
      trk_tracker_announce(t, late, &an, 1001 + TRK_RESTART_HOLD_MS, &r), 0);
  assert_true(r.nleases > 0);
  trk_tracker_free(t);
}

static cJSON *parse(const char *s) {
  cJSON *j = cJSON_Parse(s);
  assert_non_null(j);
  return j;
}

static void test_json_and_metrics(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 1000);
  trk_reply_t r;
  ws_hash_t d;
  assert_int_equal(ws_hash_from_hex(HEX, 64, &d), 0);
  trk_peer_id_t a = conn(t, "a", "z", 1);
  conn(t, "idle", "", 0);
  trk_announce_t an = ann(&d, 10);
  an.uri = URI_OF(HEX);
  assert_int_equal(trk_tracker_announce(t, a, &an, 1000, &r), 0);
  uint32_t c = r.leases[0].chunk;
  assert_int_equal(trk_tracker_have(t, a, &d, &c, 1, 1500, NULL), 0);
  assert_int_equal(trk_tracker_prefetch(t, &d, NULL, 1500), 0);

  char *s = trk_json_swarms(t, 3000);
  assert_non_null(s);
  cJSON *j = parse(s);
  free(s);
  assert_int_equal(cJSON_GetObjectItem(j, "peers")->valueint, 2);
  assert_int_equal(cJSON_GetObjectItem(j, "uptime_s")->valuedouble, 2.0);
  cJSON *sw = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "swarms"), 0);
  assert_string_equal(cJSON_GetObjectItem(sw, "digest")->valuestring,
                      "sha256-" HEX);
  assert_int_equal(cJSON_GetObjectItem(sw, "chunks_held")->valueint, 1);
  assert_true(cJSON_GetObjectItem(sw, "progress")->valuedouble > 0.09);
  cJSON *ls = cJSON_GetObjectItem(sw, "leases");
  assert_int_equal(cJSON_GetObjectItem(ls, "completed")->valueint, 1);
  cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "wanted"), 0);
  assert_string_equal(cJSON_GetObjectItem(w, "uri")->valuestring, URI_OF(HEX));
  cJSON_Delete(j);

  char *one = NULL;
  assert_int_equal(trk_json_swarm(t, &d, 3000, &one), 0);
  j = parse(one);
  free(one);
  cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "peers"), 0);
  assert_string_equal(cJSON_GetObjectItem(p0, "node_id")->valuestring, "a");
  assert_string_equal(cJSON_GetObjectItem(p0, "zone")->valuestring, "z");
  assert_int_equal(cJSON_GetObjectItem(p0, "origin_chunks")->valueint, 1);
  cJSON_Delete(j);
  ws_hash_t none = fx_digest(1);
  one = NULL;
  assert_int_equal(trk_json_swarm(t, &none, 0, &one), WS_ENOTFOUND);
  assert_null(one);

  char *m = NULL;
  size_t len = 0;
  assert_int_equal(trk_metrics_text(t, NULL, NULL, 3000, &m, &len), 0);
  assert_int_equal(strlen(m), len);
  assert_non_null(strstr(m, "\nweightswarm_tracker_peers 2\n"));
  assert_non_null(
      strstr(m, "# TYPE weightswarm_tracker_announces_total counter\n"));
  assert_non_null(strstr(m, "weightswarm_tracker_swarm_chunks_held{model="
                            "\"llama\",digest=\"sha256-" HEX "\"} 1\n"));
  assert_non_null(
      strstr(m, "weightswarm_tracker_swarm_leases_completed_total{"));
  assert_non_null(strstr(m, "weightswarm_tracker_build_info{version=\""));
  free(m);
  trk_tracker_free(t);
}

/* The caps come from configuration, and each refusal says which cap. */
static void test_configured_caps(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(3, 1, 0);
  trk_reply_t r;
  trk_tracker_stats_t st;
  ws_hash_t d = fx_digest(4);
  trk_peer_id_t a = conn(t, "a", "", 7000);
  trk_peer_id_t b = conn(t, "b", "", 7001);
  trk_peer_id_t c = conn(t, "c", "", 7002);
  trk_peer_info_t in = {.node_id = "d", .addr = "10.0.0.9", .port = 7003};
  trk_peer_id_t id = 0;
  assert_int_equal(trk_tracker_connect(t, &in, 0, &id, NULL), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_PEERS);
  assert_string_equal(trk_refusal_name(TRK_REFUSE_PEERS), "max_peers");
  /* Two members per release. */
  trk_tracker_set_max_members(t, 2);
  trk_announce_t an = ann(&d, 16);
  assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  assert_int_equal(trk_tracker_announce(t, b, &an, 0, &r), 0);
  assert_int_equal(trk_tracker_announce(t, c, &an, 0, &r), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_MEMBERS);
  trk_tracker_set_max_members(t, 3);
  assert_int_equal(trk_tracker_announce(t, c, &an, 0, &r), 0);
  /* Memory: what is held now and not a byte more. */
  trk_tracker_stats(t, &st);
  assert_int_equal(st.refused[TRK_REFUSE_PEERS], 1);
  assert_int_equal(st.refused[TRK_REFUSE_MEMBERS], 1);
  assert_int_equal(st.members_max, 3);
  assert_true(st.memory_bytes > st.state_bytes + 3u * TRK_PEER_CONN_BYTES);
  trk_tracker_disconnect(t, c);
  trk_tracker_stats(t, &st);
  uint64_t m0 = st.memory_bytes;
  in.node_id = "e";
  assert_int_equal(trk_tracker_connect(t, &in, 0, &id, NULL), 0);
  trk_tracker_stats(t, &st);
  uint64_t pb = st.memory_bytes - m0; /* what one peer costs */
  assert_true(pb >= TRK_PEER_CONN_BYTES);
  trk_tracker_disconnect(t, id);
  trk_tracker_set_max_memory(t, m0 + pb - 1u);
  assert_int_equal(trk_tracker_connect(t, &in, 0, &id, NULL), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_MEMORY);
  trk_tracker_set_max_memory(t, m0 + pb);
  assert_int_equal(trk_tracker_connect(t, &in, 0, &id, NULL), 0);
  /* Room for the peer, none for its membership. */
  assert_int_equal(trk_tracker_announce(t, id, &an, 0, &r), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_MEMORY);
  trk_tracker_stats(t, &st);
  assert_int_equal(st.refused[TRK_REFUSE_MEMORY], 2);
  assert_int_equal(st.memory_max, m0 + pb);
  assert_int_equal(st.memory_bytes, m0 + pb);
  trk_tracker_free(t);
}

/* Selection reads a per-swarm view of each member's port and zone: a
 * peer's announce that changes them (trk_tracker_peer_update) shows at
 * once in every release it joined. */
static void test_peer_update_reaches_selection(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(5);
  trk_peer_id_t a = conn(t, "a", "z1", 7000);
  trk_peer_id_t b = conn(t, "b", "z2", 0); /* serves nothing yet */
  trk_announce_t an = ann(&d, 16);
  assert_int_equal(trk_tracker_announce(t, b, &an, 0, &r), 0);
  assert_int_equal(trk_tracker_announce(t, a, &an, 1000, &r), 0);
  assert_int_equal(r.npeers, 0);
  trk_peer_info_t in = {
      .node_id = "b", .addr = "10.0.0.9", .port = 7001, .zone = "z1"};
  assert_int_equal(trk_tracker_peer_update(t, b, &in), 0);
  assert_int_equal(trk_tracker_announce(t, a, &an, 2000, &r), 0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "b");
  in.port = 0;
  assert_int_equal(trk_tracker_peer_update(t, b, &in), 0);
  assert_int_equal(trk_tracker_announce(t, a, &an, 3000, &r), 0);
  assert_int_equal(r.npeers, 0);
  trk_tracker_free(t);
}

/* Node id at port, connected and announced as a leech of (d, total). */
static trk_peer_id_t joined(trk_tracker_t *t, const char *id, uint16_t port,
                            const ws_hash_t *d, uint32_t total,
                            uint64_t now_ms) {
  trk_reply_t r;
  trk_peer_id_t p = conn(t, id, "", port);
  trk_announce_t an = ann(d, total);
  assert_int_equal(trk_tracker_announce(t, p, &an, now_ms, &r), 0);
  return p;
}

/* p leaves (d, total) by a STOPPED announce reporting err (NULL: none). */
static void left(trk_tracker_t *t, trk_peer_id_t p, const ws_hash_t *d,
                 uint32_t total, const char *err, uint64_t now_ms) {
  trk_reply_t r;
  trk_announce_t lv = ann(d, total);
  lv.leave = 1;
  lv.report.err = err;
  assert_int_equal(trk_tracker_announce(t, p, &lv, now_ms, &r), 0);
}

/* A node that stops on a failure says why in its last announce: the
 * swarm's departed row keeps the error (before, a leave's report was
 * dropped, and only a member still in the swarm could show one). */
static void test_leave_keeps_reported_error(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  ws_hash_t d = fx_digest(4);
  trk_peer_id_t a = joined(t, "a", 1, &d, 8, 0);
  trk_peer_id_t b = joined(t, "b", 2, &d, 8, 0);
  left(t, b, &d, 8, "file b.bin: chunk 1: sha256 mismatch", 10);
  trk_swarm_t *s = trk_tracker_swarm_find(t, &d);
  assert_non_null(s);
  uint32_t n = trk_stats_node_count(s), found = 0;
  for (uint32_t i = 0; i < n; i++) {
    trk_node_view_t v;
    trk_stats_node(s, i, 20, &v);
    if (strcmp(v.node_id, "b") == 0) {
      assert_string_equal(v.err, "file b.bin: chunk 1: sha256 mismatch");
      found++;
    }
  }
  assert_int_equal(found, 1);
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_int_equal(st.nodes_failed, 1);
  left(t, a, &d, 8, NULL, 30); /* a plain leave is no failure */
  trk_tracker_stats(t, &st);
  assert_int_equal(st.nodes_failed, 1);
  trk_tracker_free(t);
}

/* Digest k of many (fx_digest has 256), none equal to an fx_digest. */
static ws_hash_t many_digest(uint32_t k) {
  ws_hash_t h = fx_digest((uint8_t)k);
  h.b[0] ^= (uint8_t)(0x80u | (k >> 8));
  return h;
}

/* A swarm whose last member leaves (here failing) stays listed, ended,
 * with that member's row and error; a node that announces its release
 * again gets a new swarm in its place; a full table makes room by
 * freeing the swarm that ended first. */
static void test_ended_swarm_stays_listed(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(4);
  left(t, joined(t, "b", 2, &d, 8, 0), &d, 8, "disk full", 10);
  trk_swarm_t *s = trk_tracker_swarm_find(t, &d);
  assert_non_null(s);
  assert_int_equal(trk_swarm_member_count(s), 0);
  assert_int_equal(trk_stats_node_count(s), 1);
  trk_node_view_t v;
  trk_stats_node(s, 0, 20, &v);
  assert_string_equal(v.node_id, "b");
  assert_string_equal(v.err, "disk full");
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_int_equal(st.swarms, 1);
  assert_int_equal(st.swarms_ended, 1);
  (void)trk_tracker_tick(t, 20);
  char *js = trk_json_swarms(t, 5020);
  assert_non_null(js);
  assert_non_null(strstr(js, "\"ended_s\":5"));
  free(js);
  /* Announced again: a new swarm, without the ended one's rows. */
  trk_peer_id_t c = joined(t, "c", 3, &d, 8, 30);
  assert_int_equal(trk_tracker_swarm_count(t), 1);
  s = trk_tracker_swarm_find(t, &d);
  assert_int_equal(trk_swarm_member_count(s), 1);
  assert_int_equal(trk_stats_node_count(s), 1);
  trk_stats_node(s, 0, 30, &v);
  assert_string_equal(v.node_id, "c");
  trk_tracker_stats(t, &st);
  assert_int_equal(st.swarms_ended, 0);
  trk_tracker_disconnect(t, c);
  (void)trk_tracker_tick(t, 40); /* d's swarm ended at 40 */
  /* Every other place taken: the last new swarm takes d's. */
  trk_peer_id_t p[4];
  char name[8];
  for (uint32_t i = 0; i < 4; i++) {
    snprintf(name, sizeof(name), "p%u", i);
    p[i] = conn(t, name, "", (uint16_t)(10 + i));
    for (uint32_t k = 0; k < TRK_MAX_SWARMS_PER_PEER; k++) {
      ws_hash_t dk = many_digest(i * TRK_MAX_SWARMS_PER_PEER + k);
      trk_announce_t ak = ann(&dk, 8);
      assert_int_equal(
          trk_tracker_announce(t, p[i], &ak, 100000 + k * 1000, &r), 0);
    }
  }
  assert_int_equal(4u * TRK_MAX_SWARMS_PER_PEER, TRK_MAX_SWARMS);
  assert_int_equal(trk_tracker_swarm_count(t), TRK_MAX_SWARMS);
  assert_null(trk_tracker_swarm_find(t, &d));
  /* Full of live swarms: refused, as before. */
  trk_peer_id_t e = conn(t, "e", "", 20);
  ws_hash_t de = many_digest(1000);
  trk_announce_t ae = ann(&de, 8);
  assert_int_equal(trk_tracker_announce(t, e, &ae, 200000, &r), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_SWARMS);
  /* p0's swarms end first, then p1's: one of p0's makes room. */
  trk_tracker_disconnect(t, p[0]);
  (void)trk_tracker_tick(t, 210000);
  trk_tracker_disconnect(t, p[1]);
  (void)trk_tracker_tick(t, 220000);
  assert_int_equal(trk_tracker_announce(t, e, &ae, 230000, &r), 0);
  assert_int_equal(trk_tracker_swarm_count(t), TRK_MAX_SWARMS);
  uint32_t ended0 = 0, ended1 = 0;
  for (uint32_t k = 0; k < TRK_MAX_SWARMS_PER_PEER; k++) {
    ws_hash_t d0 = many_digest(k),
              d1 = many_digest(TRK_MAX_SWARMS_PER_PEER + k);
    ended0 += trk_tracker_swarm_find(t, &d0) != NULL;
    ended1 += trk_tracker_swarm_find(t, &d1) != NULL;
  }
  assert_int_equal(ended0, TRK_MAX_SWARMS_PER_PEER - 1);
  assert_int_equal(ended1, TRK_MAX_SWARMS_PER_PEER);
  trk_tracker_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_announce_flow),
      cmocka_unit_test(test_manifest_unknown_announce),
      cmocka_unit_test(test_joining_peers_share_leases),
      cmocka_unit_test(test_cold_start_one_reads_the_manifest),
      cmocka_unit_test(test_configured_caps),
      cmocka_unit_test(test_peer_update_reaches_selection),
      cmocka_unit_test(test_rate_and_unknown_peer),
      cmocka_unit_test(test_caps),
      cmocka_unit_test(test_swarm_cap),
      cmocka_unit_test(test_reconnect_replaces),
      cmocka_unit_test(test_prefetch_and_wanted_in_replies),
      cmocka_unit_test(test_restart_rebuilds),
      cmocka_unit_test(test_restart_holds_leases),
      cmocka_unit_test(test_rejoin_starts_hold),
      cmocka_unit_test(test_json_and_metrics),
      cmocka_unit_test(test_leave_keeps_reported_error),
      cmocka_unit_test(test_ended_swarm_stays_listed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
