/* test_select.c - peer selection for announce replies: same zone first,
 * then holders (or lease holders) of chunks the asker lacks, bound
 * respected, self and non-serving peers excluded, ties randomized.
 */
#include "trk_fixture.h"

static int in(const trk_peer_t *p, const fx_t *fx, const uint32_t *set,
              uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (fx->peer[set[i]] == p)
      return 1;
  return 0;
}

/* m0 asks (zone a, holds 0-7). Zone a: m1 (0-3, useless), m2, m3 (empty),
 * m8 (useful but port 0), m9 (useful: chunk 30). Zone b: m4 (chunk 10),
 * m5 (holds nothing but leases chunk 8, which m0 lacks), m6 (0-7, useless),
 * m7 (empty). */
static void setup(fx_t *fx) {
  static const char *const zones[10] = {"a", "a", "a", "a", "b",
                                        "b", "b", "b", "a", "a"};
  fx_init(fx, 10, 64, zones);
  for (uint32_t c = 0; c < 8; c++) {
    assert_int_equal(trk_swarm_add_have(fx->s, fx->m[0], c), 0);
    assert_int_equal(trk_swarm_add_have(fx->s, fx->m[6], c), 0);
  }
  for (uint32_t c = 0; c < 4; c++)
    assert_int_equal(trk_swarm_add_have(fx->s, fx->m[1], c), 0);
  assert_int_equal(trk_swarm_add_have(fx->s, fx->m[4], 10), 0);
  assert_int_equal(trk_swarm_add_have(fx->s, fx->m[8], 11), 0);
  assert_int_equal(trk_swarm_add_have(fx->s, fx->m[9], 30), 0);
  uint32_t got[TRK_LEASES_PER_PEER_MAX];
  assert_int_equal(trk_lease_grant(fx->s, fx->m[5], 1, 0, got, 1), 1);
  assert_false(trk_member_has(fx->m[0], got[0]));
  fx->peer[8]->port = 0;
}

static void test_zone_then_useful(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  static const uint32_t zone_only[] = {1, 2, 3};
  static const uint32_t useful_other[] = {4, 5};
  static const uint32_t rest[] = {6, 7};
  setup(&fx);
  for (uint64_t seed = 1; seed < 40; seed++) {
    uint64_t rng = seed;
    uint32_t n = trk_select_peers(fx.s, fx.peer[0], fx.m[0], 32, &rng, out);
    assert_int_equal(n, 8); /* 10 minus self minus port 0 */
    assert_ptr_equal(out[0], fx.peer[9]);
    for (uint32_t i = 1; i < 4; i++)
      assert_true(in(out[i], &fx, zone_only, 3));
    for (uint32_t i = 4; i < 6; i++)
      assert_true(in(out[i], &fx, useful_other, 2));
    for (uint32_t i = 6; i < 8; i++)
      assert_true(in(out[i], &fx, rest, 2));
  }
  fx_free(&fx);
}

static void test_no_zone_useful_first(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  static const uint32_t useful[] = {4, 5, 9};
  setup(&fx);
  fx.peer[0]->zone[0] = '\0';
  uint64_t rng = 5;
  assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 3, &rng, out),
                   3);
  for (uint32_t i = 0; i < 3; i++)
    assert_true(in(out[i], &fx, useful, 3));
  /* Not joined yet (no manifest): anyone holding or leasing is useful. */
  trk_peer_info_t info = {.node_id = "newcomer", .port = 9};
  trk_peer_t *np;
  static const uint32_t holders[] = {0, 1, 4, 5, 6, 9};
  assert_int_equal(trk_peers_add(fx.reg, &info, 0, &np), 0);
  assert_int_equal(trk_select_peers(fx.s, np, NULL, 6, &rng, out), 6);
  for (uint32_t i = 0; i < 6; i++)
    assert_true(in(out[i], &fx, holders, 6));
  fx_free(&fx);
}

static void test_bound_and_exclusions(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  fx_init(&fx, 50, 16, NULL);
  uint64_t rng = 3;
  assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 5, &rng, out),
                   5);
  assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 0, &rng, out),
                   0);
  /* Asking for more than the reply cap gets the cap. */
  uint32_t n = trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1000, &rng, out);
  assert_int_equal(n, TRK_REPLY_PEERS_MAX);
  for (uint32_t i = 0; i < n; i++) {
    assert_ptr_not_equal(out[i], fx.peer[0]);
    for (uint32_t k = 0; k < i; k++)
      assert_ptr_not_equal(out[i], out[k]); /* no duplicates */
  }
  /* Nobody else serves: empty reply. */
  for (uint32_t i = 1; i < 50; i++)
    fx.peer[i]->port = 0;
  assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 5, &rng, out),
                   0);
  fx_free(&fx);
}

static void test_ties_randomized(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  uint32_t hits[30] = {0};
  fx_init(&fx, 30, 16, NULL);
  uint64_t rng = 77;
  for (int round = 0; round < 600; round++) {
    assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                     1);
    for (uint32_t i = 1; i < 30; i++)
      if (out[0] == fx.peer[i])
        hits[i]++;
  }
  /* 600 draws over 29 equal candidates: every one is picked at least
   * once and none dominates (expected 20.7 each). */
  for (uint32_t i = 1; i < 30; i++) {
    assert_true(hits[i] > 0);
    assert_true(hits[i] < 80);
  }
  fx_free(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zone_then_useful),
      cmocka_unit_test(test_no_zone_useful_first),
      cmocka_unit_test(test_bound_and_exclusions),
      cmocka_unit_test(test_ties_randomized),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
