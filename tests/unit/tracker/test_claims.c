/* test_claims.c - the weighing of have-claims (docs/tracker.md "Weighing
 * have-claims"): a claim nobody confirms stops counting after the grace and
 * its chunks are leased; a confirmation from another address counts it
 * again; a lease completion extends belief once per new chunk; and the
 * tracker's side: HAVE "f" from the same or another address, swarms keyed
 * by (digest, chunk count), node ids bound to their address, the
 * per-address cap, the lease top-up after a sweep, memory accounting.
 */
#include "trk_fixture.h"
#include "trk_metrics.h"

#include <stdlib.h>

#define G TRK_CLAIM_GRACE_MS
#define W TRK_CLAIM_CONFIRM_MS

static const uint8_t k_full[2] = {0xFF, 0xFF};

/* ---- the swarm's rule ------------------------------------------------- */

/* node-0 claims every chunk and never serves; node-1 downloads. */
static void test_unconfirmed_claims_stop_counting(void **state) {
  (void)state;
  fx_t fx;
  uint32_t got[TRK_LEASES_PER_PEER_MAX];
  fx_init(&fx, 2, 16, NULL);
  trk_swarm_set_now(fx.s, 0);
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[0], k_full, 2), 0);
  fx_check(fx.s);
  /* Believed at first: a holder is there, nothing is leased. */
  trk_swarm_weigh(fx.s, 0);
  assert_int_equal(trk_lease_grant(fx.s, fx.m[1], 8, 0, got, 8), 0);
  trk_swarm_weigh(fx.s, G - 1);
  assert_true(trk_member_counted(fx.m[0]));
  assert_int_equal(trk_swarm_regrant(fx.s, 1), 0);
  assert_int_equal(trk_lease_grant(fx.s, fx.m[1], 8, G - 1, got, 8), 0);
  /* The grace is over without a confirmation: its chunks need the origin. */
  trk_swarm_weigh(fx.s, G);
  assert_false(trk_member_counted(fx.m[0]));
  fx_check(fx.s);
  assert_int_equal(trk_swarm_avail(fx.s, 0), 0);
  assert_int_equal(trk_swarm_regrant(fx.s, 1), 1);
  assert_int_equal(trk_swarm_regrant(fx.s, 1), 0); /* taken */
  uint32_t n = trk_lease_grant(fx.s, fx.m[1], 8, G, got, 8);
  assert_true(n > 0);
  assert_int_equal(got[0], 0);
  fx_check(fx.s);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.members_unconfirmed, 1);
  assert_int_equal(st.claims_distrusted, 1);
  /* The liar itself is never leased its own (unbelieved) chunks. */
  fx_free(&fx);
}

/* A confirmed holder keeps counting: a downloader got a verified chunk from
 * it; leases taken while it did not count end (revoked). */
static void test_confirmed_claims_count(void **state) {
  (void)state;
  fx_t fx;
  uint32_t got[TRK_LEASES_PER_PEER_MAX];
  fx_init(&fx, 2, 16, NULL);
  trk_swarm_set_now(fx.s, 0);
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[0], k_full, 2), 0);
  trk_swarm_weigh(fx.s, 0);
  trk_swarm_confirm(fx.s, fx.m[0], G - 1000);
  trk_swarm_weigh(fx.s, G);
  assert_true(trk_member_counted(fx.m[0])); /* confirmed within the grace */
  trk_swarm_weigh(fx.s, G - 1000 + W - 1);
  assert_true(trk_member_counted(fx.m[0]));
  assert_int_equal(trk_lease_grant(fx.s, fx.m[1], 8, G, got, 8), 0);
  /* No confirmation for W: it stops counting, its chunks are leased. */
  trk_swarm_weigh(fx.s, G - 1000 + W);
  assert_false(trk_member_counted(fx.m[0]));
  assert_true(trk_lease_grant(fx.s, fx.m[1], 8, G + W, got, 8) > 0);
  assert_non_null(trk_swarm_lease_holder(fx.s, got[0]));
  fx_check(fx.s);
  /* Confirmed again (it served after all): it counts, the leases on its
   * chunks end, nothing is fetched from the origin twice. */
  trk_swarm_confirm(fx.s, fx.m[0], G + W + 1);
  assert_true(trk_member_counted(fx.m[0]));
  assert_null(trk_swarm_lease_holder(fx.s, got[0]));
  assert_int_equal(fx.m[1]->nleases, 0);
  fx_check(fx.s);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.claims_confirmed, 2);
  assert_int_equal(st.members_unconfirmed, 0);
  fx_free(&fx);
}

/* With nobody else downloading there is nothing to weigh: a seed alone, or
 * with only complete members, is believed however long nobody confirms. */
static void test_no_downloader_no_trial(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx, 2, 16, NULL);
  trk_swarm_set_now(fx.s, 0);
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[0], k_full, 2), 0);
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[1], k_full, 2), 0);
  for (uint64_t now = 0; now <= 10u * W; now += 1000u)
    trk_swarm_weigh(fx.s, now);
  assert_true(trk_member_counted(fx.m[0]));
  assert_true(trk_member_counted(fx.m[1]));
  fx_check(fx.s);
  fx_free(&fx);
}

/* A downloader's chunk from an origin lease is believed for a grace from
 * the completion (the others need a moment to fetch it from it); claiming
 * a chunk again after dropping it earns nothing. */
static void test_lease_completion_extends_once(void **state) {
  (void)state;
  fx_t fx;
  uint32_t got[TRK_LEASES_PER_PEER_MAX];
  fx_init(&fx, 2, 16, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  assert_true(trk_lease_grant(fx.s, fx.m[0], 8, 0, got, 8) > 0);
  assert_true(trk_lease_grant(fx.s, fx.m[1], 8, 0, got, 8) > 0);
  uint32_t c0 = fx.m[0]->leases[0].chunk;
  uint32_t c1 = fx.m[0]->leases[1].chunk;
  trk_swarm_set_now(fx.s, 100);
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], c0), 0);
  trk_swarm_weigh(fx.s, 1000); /* its trial starts: believed to 1000 + G */
  trk_swarm_set_now(fx.s, 900 + G);
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], c1), 0);
  trk_swarm_weigh(fx.s, 1000 + G);
  assert_true(trk_member_counted(fx.m[0])); /* extended to 900 + 2G */
  trk_swarm_weigh(fx.s, 900 + 2u * G);
  assert_false(trk_member_counted(fx.m[0]));
  fx_check(fx.s);
  /* Dropped and claimed again: no new chunk, no new belief. */
  static const uint8_t none[2] = {0, 0};
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[0], none, 2), 0);
  trk_swarm_set_now(fx.s, 1000 + 2u * G);
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], c0), 0);
  assert_false(trk_member_counted(fx.m[0]));
  fx_check(fx.s);
  fx_free(&fx);
}

/* Peer selection ranks a member whose claims do not count after the
 * useful ones (still listed: an honest holder can be reached and
 * confirmed). */
static void test_selection_ranks_unbelieved_last(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[4];
  uint64_t rng = 7;
  fx_init(&fx, 3, 16, NULL);
  trk_swarm_set_now(fx.s, 0);
  static const uint8_t half[2] = {0xFF, 0x00};
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[0], k_full, 2), 0);
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[1], half, 2), 0);
  trk_swarm_weigh(fx.s, 0);
  trk_swarm_confirm(fx.s, fx.m[1], G - 1);
  trk_swarm_weigh(fx.s, G);
  assert_false(trk_member_counted(fx.m[0]));
  assert_true(trk_member_counted(fx.m[1]));
  for (int i = 0; i < 20; i++) {
    assert_int_equal(trk_select_peers(fx.s, fx.peer[2], fx.m[2], 4, &rng, out),
                     2);
    assert_ptr_equal(out[0], fx.peer[1]);
    assert_ptr_equal(out[1], fx.peer[0]);
  }
  fx_free(&fx);
}

/* ---- the tracker's side ----------------------------------------------- */

static trk_peer_id_t conn_at(trk_tracker_t *t, const char *id,
                             const char *addr) {
  trk_peer_info_t in = {.node_id = id, .addr = addr, .port = 7000};
  trk_peer_id_t pid = 0, old = 0;
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), 0);
  return pid;
}

static trk_announce_t ann(const ws_hash_t *d, uint32_t total, trk_role_t role,
                          const uint8_t *bits) {
  trk_announce_t a = {.digest = *d,
                      .total_chunks = total,
                      .role = role,
                      .bitfield = bits,
                      .bitfield_len = bits != NULL ? (total + 7u) / 8u : 0,
                      .want_leases = role == TRK_ROLE_LEECH ? 8u : 0u,
                      .max_peers = TRK_REPLY_PEERS_DEFAULT};
  return a;
}

/* A full-bitfield liar: the downloader gets no lease at first, and its
 * leases come with the sweep after the grace (trk_tracker_regrant, what
 * the server pushes), not at its next announce. */
static void test_tracker_regrant_after_grace(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(3), got_d;
  trk_peer_id_t liar = conn_at(t, "liar", "10.0.0.66");
  trk_peer_id_t dl = conn_at(t, "dl", "10.0.0.1");
  trk_announce_t a = ann(&d, 16, TRK_ROLE_SEED, k_full);
  assert_int_equal(trk_tracker_announce(t, liar, &a, 0, &r), 0);
  a = ann(&d, 16, TRK_ROLE_LEECH, NULL);
  assert_int_equal(trk_tracker_announce(t, dl, &a, 0, &r), 0);
  assert_int_equal(r.nleases, 0);
  (void)trk_tracker_tick(t, 1000);
  assert_int_equal(trk_tracker_regrant_pending(t, 0), 0);
  assert_int_equal(trk_tracker_regrant(t, dl, 0, 1000, &got_d, &r), 0);
  (void)trk_tracker_tick(t, 1000 + G);
  assert_int_equal(trk_tracker_regrant_pending(t, 0), 1);
  assert_int_equal(trk_tracker_regrant(t, liar, 0, 1000 + G, &got_d, &r), 0);
  assert_int_equal(trk_tracker_regrant(t, dl, 0, 1000 + G, &got_d, &r), 1);
  assert_true(ws_hash_eq(&got_d, &d));
  assert_true(r.nleases > 0 && r.ngranted == r.nleases);
  assert_int_equal(r.interval_ms, 0); /* pushed: no announce answered */
  assert_int_equal(trk_tracker_regrant(t, dl, 1, 1000 + G, &got_d, &r),
                   WS_ENOTFOUND);
  assert_int_equal(trk_tracker_regrant_pending(t, 1), 1);
  assert_int_equal(trk_tracker_regrant_pending(t, 0), 0);
  fx_check(trk_tracker_swarm_at(t, 0));
  trk_tracker_free(t);
}

/* HAVE "f": from another member at another address it confirms; from the
 * same (non-loopback) address, from itself, or naming a stranger it does
 * not; on loopback any other member counts. */
static void test_tracker_served_addresses(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(4);
  trk_peer_id_t seed = conn_at(t, "seed", "10.0.0.5");
  trk_peer_id_t twin = conn_at(t, "twin", "10.0.0.5");
  trk_peer_id_t other = conn_at(t, "other", "10.0.0.6");
  trk_peer_id_t lo1 = conn_at(t, "lo1", "127.0.0.1");
  trk_peer_id_t lo2 = conn_at(t, "lo2", "127.0.0.1");
  trk_announce_t a = ann(&d, 16, TRK_ROLE_SEED, k_full);
  assert_int_equal(trk_tracker_announce(t, seed, &a, 0, &r), 0);
  assert_int_equal(trk_tracker_announce(t, lo1, &a, 0, &r), 0);
  a = ann(&d, 16, TRK_ROLE_LEECH, NULL);
  assert_int_equal(trk_tracker_announce(t, twin, &a, 0, &r), 0);
  assert_int_equal(trk_tracker_announce(t, other, &a, 0, &r), 0);
  assert_int_equal(trk_tracker_announce(t, lo2, &a, 0, &r), 0);
  assert_int_equal(trk_tracker_served(t, twin, &d, "seed", 10), 0);
  assert_int_equal(trk_tracker_served(t, seed, &d, "seed", 10), 0);
  assert_int_equal(trk_tracker_served(t, other, &d, "nobody", 10), 0);
  ws_hash_t d2 = fx_digest(5);
  assert_int_equal(trk_tracker_served(t, other, &d2, "seed", 10), 0);
  assert_int_equal(trk_tracker_served(t, other, &d, "seed", 10), 1);
  assert_int_equal(trk_tracker_served(t, lo2, &d, "lo1", 10), 1);
  trk_swarm_stats_t st;
  trk_swarm_stats(trk_tracker_swarm_find(t, &d), &st);
  assert_int_equal(st.claims_confirmed, 2);
  trk_tracker_free(t);
}

/* A swarm is keyed by (digest, chunk count): a first announce with a bogus
 * count squats nothing, the real count joins its own swarm and gets its
 * leases; a node cannot be in both. */
static void test_tracker_swarm_keyed_by_count(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  ws_hash_t d = fx_digest(6);
  static const uint8_t one[1] = {0x80};
  trk_peer_id_t squat = conn_at(t, "squat", "10.0.0.66");
  trk_peer_id_t a = conn_at(t, "a", "10.0.0.1");
  trk_peer_id_t b = conn_at(t, "b", "10.0.0.2");
  trk_announce_t an = ann(&d, 1, TRK_ROLE_SEED, one);
  assert_int_equal(trk_tracker_announce(t, squat, &an, 0, &r), 0);
  an = ann(&d, 16, TRK_ROLE_LEECH, NULL);
  assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  assert_true(r.nleases > 0);
  assert_int_equal(trk_tracker_announce(t, b, &an, 0, &r), 0);
  assert_int_equal(r.npeers, 1);
  assert_string_equal(r.peers[0]->node_id, "a"); /* not the squatter */
  assert_int_equal(trk_tracker_swarm_count(t), 2);
  const trk_swarm_t *s = trk_tracker_swarm_find(t, &d);
  assert_int_equal(trk_swarm_total_chunks(s), 16);
  assert_int_equal(trk_swarm_member_count(s), 2);
  /* HAVE / renew find the node's own swarm of the digest. */
  uint32_t c = r.leases[0].chunk;
  assert_int_equal(trk_tracker_have(t, b, &d, &c, 1, 10, NULL), 0);
  assert_int_equal(trk_swarm_avail(s, c), 1);
  /* One count per node and digest: the squatter cannot also join 16. */
  assert_int_equal(trk_tracker_announce(t, squat, &an, 1000, &r), WS_EPROTO);
  assert_int_equal(trk_swarm_member_count(s), 2);
  /* Metrics: one series per digest label (the larger swarm); the other
   * is summed into "other". */
  char *m = NULL, dig[WS_DIGEST_STR_LEN + 1], want[256];
  size_t len = 0;
  ws_digest_to_str(&d, dig);
  assert_int_equal(trk_metrics_text(t, NULL, NULL, 2000, &m, &len), 0);
  snprintf(want, sizeof(want), "weightswarm_tracker_swarm_members{model=");
  uint32_t rows = 0;
  for (const char *p = strstr(m, want); p != NULL; p = strstr(p + 1, want))
    rows++;
  assert_int_equal(rows, 2);
  snprintf(want, sizeof(want), "digest=\"%s\"} 2\n", dig);
  assert_non_null(strstr(m, want));
  assert_non_null(strstr(m, "weightswarm_tracker_swarm_members{model="
                            "\"other\",digest=\"other\"} 1\n"));
  free(m);
  trk_tracker_free(t);
}

/* At most TRK_MAX_NODES_PER_ADDR node ids from one address (loopback
 * exempt); a node id is bound to its address while connected. */
static void test_tracker_per_address(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_peer_id_t ids[TRK_MAX_NODES_PER_ADDR];
  char id[32];
  for (uint32_t i = 0; i < TRK_MAX_NODES_PER_ADDR; i++) {
    snprintf(id, sizeof(id), "n%u", i);
    ids[i] = conn_at(t, id, "10.9.9.9");
  }
  trk_peer_info_t in = {.node_id = "one-more", .addr = "10.9.9.9"};
  trk_peer_id_t pid, old;
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_PER_ADDR);
  /* A reconnect of one of them replaces itself: not one more. */
  in.node_id = "n0";
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), 0);
  assert_int_equal(old, ids[0]);
  /* One leaves: room for another. */
  trk_tracker_disconnect(t, ids[1]);
  in.node_id = "one-more";
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), 0);
  /* n2 from elsewhere is refused and n2 stays. */
  in.node_id = "n2";
  in.addr = "10.9.9.10";
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_NODE_BOUND);
  assert_non_null(trk_peers_get(trk_tracker_peers(t), ids[2]));
  assert_int_equal(trk_peers_addr_count(trk_tracker_peers(t), "10.9.9.9"),
                   TRK_MAX_NODES_PER_ADDR);
  /* Loopback: the tracker's own host, no cap. */
  for (uint32_t i = 0; i < 2u * TRK_MAX_NODES_PER_ADDR; i++) {
    snprintf(id, sizeof(id), "lo%u", i);
    (void)conn_at(t, id, "127.0.0.1");
  }
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  assert_int_equal(st.refused[TRK_REFUSE_PER_ADDR], 1);
  assert_int_equal(st.refused[TRK_REFUSE_NODE_BOUND], 1);
  assert_string_equal(trk_refusal_name(TRK_REFUSE_PER_ADDR),
                      "max_nodes_per_addr");
  trk_tracker_free(t);
}

/* --max-nodes-per-addr: nodes behind one NAT address need more than the
 * default; out-of-range values are refused. */
static void test_tracker_per_address_configured(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  char id[32];
  trk_peers_t *reg = trk_tracker_peers(t);
  assert_int_equal(trk_peers_max_per_addr(reg), TRK_MAX_NODES_PER_ADDR);
  assert_int_equal(trk_peers_set_max_per_addr(reg, 0), WS_EUSAGE);
  assert_int_equal(
      trk_peers_set_max_per_addr(reg, TRK_MAX_NODES_PER_ADDR_MAX + 1u),
      WS_EUSAGE);
  assert_int_equal(trk_peers_set_max_per_addr(reg, 3u * TRK_MAX_NODES_PER_ADDR),
                   0);
  for (uint32_t i = 0; i < 3u * TRK_MAX_NODES_PER_ADDR; i++) {
    snprintf(id, sizeof(id), "nat%u", i);
    (void)conn_at(t, id, "192.0.2.1");
  }
  trk_peer_info_t in = {.node_id = "one-more", .addr = "192.0.2.1"};
  trk_peer_id_t pid, old;
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), WS_ELIMIT);
  assert_int_equal(trk_tracker_refusal(t), TRK_REFUSE_PER_ADDR);
  /* Lowered below what is connected: nobody is dropped, nobody new comes. */
  assert_int_equal(trk_peers_set_max_per_addr(reg, 2), 0);
  assert_int_equal(trk_peers_addr_count(reg, "192.0.2.1"),
                   3u * TRK_MAX_NODES_PER_ADDR);
  in.addr = "192.0.2.2";
  for (uint32_t i = 0; i < 2; i++) {
    snprintf(id, sizeof(id), "other%u", i);
    (void)conn_at(t, id, "192.0.2.2");
  }
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), WS_ELIMIT);
  assert_int_equal(trk_peers_set_max_per_addr(reg, 3), 0);
  assert_int_equal(trk_tracker_connect(t, &in, 0, &pid, &old), 0);
  trk_tracker_free(t);
}

/* The memory count covers each swarm's record and history, not only its
 * per-chunk arrays. */
static void test_memory_counts_swarm_records(void **state) {
  (void)state;
  trk_tracker_t *t = trk_tracker_new(0, 1, 0);
  trk_reply_t r;
  trk_tracker_stats_t st;
  trk_peer_id_t a = conn_at(t, "a", "10.0.0.1");
  trk_tracker_stats(t, &st);
  uint64_t before = st.state_bytes;
  for (uint8_t i = 0; i < 4; i++) {
    ws_hash_t d = fx_digest((uint8_t)(10 + i));
    trk_announce_t an = ann(&d, 1, TRK_ROLE_LEECH, NULL);
    assert_int_equal(trk_tracker_announce(t, a, &an, 0, &r), 0);
  }
  trk_tracker_stats(t, &st);
  assert_true(st.state_bytes - before >=
              4u * (trk_swarm_fixed_bytes() + sizeof(trk_swarm_t)) / 2u);
  assert_true(trk_swarm_fixed_bytes() >
              sizeof(trk_swarm_t) + trk_stats_swarm_bytes() - 1u);
  trk_tracker_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unconfirmed_claims_stop_counting),
      cmocka_unit_test(test_confirmed_claims_count),
      cmocka_unit_test(test_no_downloader_no_trial),
      cmocka_unit_test(test_lease_completion_extends_once),
      cmocka_unit_test(test_selection_ranks_unbelieved_last),
      cmocka_unit_test(test_tracker_regrant_after_grace),
      cmocka_unit_test(test_tracker_served_addresses),
      cmocka_unit_test(test_tracker_swarm_keyed_by_count),
      cmocka_unit_test(test_tracker_per_address),
      cmocka_unit_test(test_tracker_per_address_configured),
      cmocka_unit_test(test_memory_counts_swarm_records),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
