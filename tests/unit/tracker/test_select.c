/* test_select.c - peer selection for announce replies: same zone first,
 * then the members named fewer than TRK_NAMED_FULL times so far, then
 * holders of chunks the asker lacks (a lease alone does not count), bound
 * respected, self and non-serving peers excluded, ties randomized.
 */
#include "trk_fixture.h"

#include <stdlib.h>

static int in(const trk_peer_t *p, const fx_t *fx, const uint32_t *set,
              uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (fx->peer[set[i]] == p)
      return 1;
  return 0;
}

/* m0 asks (zone a, holds 0-7). Zone a: m1 (0-3, useless), m2, m3 (empty),
 * m8 (useful but port 0), m9 (useful: chunk 30). Zone b: m4 (chunk 10),
 * m5 (holds nothing but leases chunk 8, which m0 lacks: not useful, or
 * every joiner of a cluster-wide start would dial the few lease holders),
 * m6 (0-7, useless),
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
  trk_swarm_member_refresh(fx->s, fx->m[8]);
}

/* Forgets how often each member was named, so that a loop of selections
 * checks the other clauses alone. */
static void named_reset(fx_t *fx) {
  for (uint32_t i = 0; i < fx->s->nmembers; i++)
    fx->s->mview[i].named = 0;
}

static void test_zone_then_useful(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  static const uint32_t zone_only[] = {1, 2, 3};
  static const uint32_t useful_other[] = {4};
  static const uint32_t rest[] = {5, 6, 7};
  setup(&fx);
  for (uint64_t seed = 1; seed < 40; seed++) {
    uint64_t rng = seed;
    uint32_t n = trk_select_peers(fx.s, fx.peer[0], fx.m[0], 32, &rng, out);
    assert_int_equal(n, 8); /* 10 minus self minus port 0 */
    assert_ptr_equal(out[0], fx.peer[9]);
    for (uint32_t i = 1; i < 4; i++)
      assert_true(in(out[i], &fx, zone_only, 3));
    assert_true(in(out[4], &fx, useful_other, 1));
    for (uint32_t i = 5; i < 8; i++)
      assert_true(in(out[i], &fx, rest, 3));
  }
  fx_free(&fx);
}

static void test_no_zone_useful_first(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  static const uint32_t useful[] = {4, 9};
  setup(&fx);
  fx.peer[0]->zone[0] = '\0';
  uint64_t rng = 5;
  for (uint64_t seed = 1; seed < 40; seed++) {
    rng = seed;
    named_reset(&fx);
    assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 2, &rng, out),
                     2);
    for (uint32_t i = 0; i < 2; i++)
      assert_true(in(out[i], &fx, useful, 2));
  }
  /* Not joined yet (no manifest): anyone holding anything is useful; the
   * lease holder m5 is not. */
  trk_peer_info_t info = {.node_id = "newcomer", .port = 9};
  trk_peer_t *np;
  static const uint32_t holders[] = {0, 1, 4, 6, 9};
  assert_int_equal(trk_peers_add(fx.reg, &info, 0, &np), 0);
  for (uint64_t seed = 1; seed < 40; seed++) {
    rng = seed;
    named_reset(&fx);
    assert_int_equal(trk_select_peers(fx.s, np, NULL, 5, &rng, out), 5);
    for (uint32_t i = 0; i < 5; i++)
      assert_true(in(out[i], &fx, holders, 5));
  }
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
  for (uint32_t i = 1; i < 50; i++) {
    fx.peer[i]->port = 0;
    trk_swarm_member_refresh(fx.s, fx.m[i]);
  }
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

/* A cluster-wide start: nobody holds anything yet, each joiner asks for
 * one peer. A member named TRK_NAMED_FULL times comes after the others,
 * so 8 x TRK_NAMED_FULL replies name each of eight members exactly that
 * often; by a random draw alone (the rule before session 18) some member
 * is named more than that while another is named less, and the last
 * joiners of a start were dialed by nobody. */
static void test_named_least_first(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  uint32_t hits[9] = {0};
  fx_init(&fx, 9, 16, NULL);
  uint64_t rng = 77;
  for (uint32_t round = 0; round < 8u * TRK_NAMED_FULL; round++) {
    assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                     1);
    for (uint32_t i = 1; i < 9; i++)
      hits[i] += out[0] == fx.peer[i];
  }
  for (uint32_t i = 1; i < 9; i++)
    assert_int_equal(hits[i], TRK_NAMED_FULL);
  /* Among members named as often, holding a chunk the asker lacks comes
   * first. */
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[3], 5), 0);
  for (int round = 0; round < 3; round++) {
    assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                     1);
    assert_ptr_equal(out[0], fx.peer[3]);
  }
  fx_free(&fx);
}

/* A cluster-wide start as the bench saw it (session 39): the first joiner
 * soon holds something (the release's small files), so it is useful to
 * every later joiner. Once TRK_NAMED_FULL replies named it, a member that
 * holds nothing but was named less comes first: before, usefulness
 * outranked the count, every joiner was still named the first ones, their
 * slots were full and refused the dials, and the last joiners were left
 * with few neighbours. Within the same count the useful one still comes
 * first. */
static void test_named_full_before_useful(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  fx_init(&fx, 3, 16, NULL);
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[1], 5), 0);
  uint64_t rng = 99;
  for (uint32_t round = 0; round < TRK_NAMED_FULL; round++) {
    assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                     1);
    assert_ptr_equal(out[0], fx.peer[1]); /* useful, not full yet */
  }
  for (uint32_t round = 0; round < TRK_NAMED_FULL; round++) {
    assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                     1);
    assert_ptr_equal(out[0], fx.peer[2]); /* named less, holds nothing */
  }
  /* Both full now: usefulness decides again. */
  assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                   1);
  assert_ptr_equal(out[0], fx.peer[1]);
  fx_free(&fx);
}

/* A node joining a swarm long under way: every holder has been named
 * TRK_NAMED_FULL times, and other new joiners, holding nothing, have not.
 * A holder of a real share of the release (TRK_RICH_SHARE_DIV) still comes
 * first; a member holding only a few chunks does not outrank the count
 * (the case above). */
static void test_rich_before_count(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *out[TRK_REPLY_PEERS_MAX];
  fx_init(&fx, 3, 16, NULL);
  for (uint32_t c = 0; c < 16u / TRK_RICH_SHARE_DIV; c++)
    assert_int_equal(trk_swarm_add_have(fx.s, fx.m[1], c), 0);
  fx.s->mview[fx.m[1]->idx].named = 10u * TRK_NAMED_FULL;
  uint64_t rng = 7;
  for (uint32_t round = 0; round < 2u * TRK_NAMED_FULL; round++) {
    assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                     1);
    assert_ptr_equal(out[0], fx.peer[1]);
  }
  /* Once the asker holds all m[1] has, m[1] is of no use to it. */
  for (uint32_t c = 0; c < 16u / TRK_RICH_SHARE_DIV; c++)
    assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], c), 0);
  assert_int_equal(trk_select_peers(fx.s, fx.peer[0], fx.m[0], 1, &rng, out),
                   1);
  assert_ptr_equal(out[0], fx.peer[2]);
  fx_free(&fx);
}

/* ---- the bounded heap against the full sort it replaced ------------------ */

typedef struct {
  const trk_member_t *m;
  uint32_t rank;
  uint32_t named;
  uint32_t tie;
} ref_cand_t;

static int ref_cmp(const void *a, const void *b) {
  const ref_cand_t *x = a, *y = b;
  if ((x->rank & 6u) != (y->rank & 6u))
    return (x->rank & 6u) > (y->rank & 6u) ? -1 : 1;
  int xf = x->named >= TRK_NAMED_FULL, yf = y->named >= TRK_NAMED_FULL;
  if (xf != yf)
    return xf ? 1 : -1;
  if (x->rank != y->rank)
    return x->rank > y->rank ? -1 : 1;
  if (x->tie != y->tie)
    return x->tie < y->tie ? -1 : 1;
  return 0;
}

static int ref_useful(const trk_swarm_t *s, const trk_member_t *c,
                      const trk_member_t *asker) {
  if (!trk_member_counted(c))
    return 0;
  if (asker == NULL)
    return c->have_count > 0;
  for (uint32_t k = 0; k < s->total; k++)
    if (!trk_bits_get(asker->have, k) && trk_bits_get(c->have, k))
      return 1;
  return 0;
}

/* The selection as it was before the heap: rank every candidate of the
 * window, sort them all, return the first max. */
static uint32_t ref_select(const trk_swarm_t *s, const trk_peer_t *who,
                           const trk_member_t *asker, uint32_t max,
                           uint64_t *rng, const trk_peer_t **out) {
  static ref_cand_t cand[TRK_SELECT_SCAN_MAX];
  uint32_t ncand = 0;
  if (max > TRK_REPLY_PEERS_MAX)
    max = TRK_REPLY_PEERS_MAX;
  if (max == 0 || s->nmembers == 0)
    return 0;
  uint32_t scan =
      s->nmembers < TRK_SELECT_SCAN_MAX ? s->nmembers : TRK_SELECT_SCAN_MAX;
  uint32_t start = (uint32_t)(trk_select_rand(rng) % s->nmembers);
  for (uint32_t k = 0; k < scan; k++) {
    const trk_member_t *c = s->members[(start + k) % s->nmembers];
    if (c == asker || c->peer == who || c->peer->port == 0)
      continue;
    uint32_t rank = 0;
    if (who->zone[0] != '\0' && strcmp(who->zone, c->peer->zone) == 0)
      rank |= 4u;
    if (ref_useful(s, c, asker))
      rank |=
          (uint64_t)c->have_count * TRK_RICH_SHARE_DIV >= s->total ? 3u : 1u;
    cand[ncand].m = c;
    cand[ncand].rank = rank;
    cand[ncand].named = s->mview[c->idx].named;
    cand[ncand].tie = (uint32_t)(trk_select_rand(rng) >> 32);
    ncand++;
  }
  qsort(cand, ncand, sizeof(cand[0]), ref_cmp);
  uint32_t n = ncand < max ? ncand : max;
  for (uint32_t i = 0; i < n; i++)
    out[i] = cand[i].m->peer;
  return n;
}

/* Swarms of 1..600 members (past TRK_SELECT_SCAN_MAX) with random zones,
 * have-sets, leases and ports, some members' claims not counted (their
 * trial ran out), some confirmed again, some emptied: every selection, for
 * every bound, equals the full sort's, pick for pick and in order, with
 * the same draws. The selection reads whether a member holds something
 * that counts from its view, not from the member: every change of
 * have_count or counted must reach the view. */
static void test_heap_matches_full_sort(void **state) {
  (void)state;
  static const char *const zones[3] = {"", "a", "b"};
  uint64_t r = 12345;
  for (uint32_t round = 0; round < 12; round++) {
    uint32_t n = 1u + (uint32_t)(trk_select_rand(&r) % 600u);
    if (round == 0)
      n = 600;
    uint32_t total = 1u + (uint32_t)(trk_select_rand(&r) % 200u);
    trk_peers_t *reg = trk_peers_new(0);
    assert_non_null(reg);
    ws_hash_t d = fx_digest(7);
    trk_swarm_t *s = trk_swarm_new(&d, total, 0);
    assert_non_null(s);
    trk_peer_t **peers = calloc(n, sizeof(*peers));
    trk_member_t **ms = calloc(n, sizeof(*ms));
    assert_non_null(peers);
    assert_non_null(ms);
    for (uint32_t i = 0; i < n; i++) {
      char id[32];
      snprintf(id, sizeof(id), "node-%u", i);
      trk_peer_info_t info = {
          .node_id = id,
          .addr = "10.0.0.1",
          .port = trk_select_rand(&r) % 10u == 0 ? 0 : (uint16_t)(7000 + i),
          .zone = zones[trk_select_rand(&r) % 3u]};
      assert_int_equal(trk_peers_add(reg, &info, 0, &peers[i]), 0);
      assert_int_equal(trk_swarm_join(s, peers[i], TRK_ROLE_LEECH, 0, &ms[i]),
                       0);
      uint32_t kind = (uint32_t)(trk_select_rand(&r) % 4u);
      for (uint32_t c = 0; c < total; c++) {
        uint32_t x = (uint32_t)(trk_select_rand(&r) % 100u);
        if ((kind == 1 && x < 50) || (kind == 2 && x < 95) || kind == 3)
          assert_int_equal(trk_swarm_add_have(s, ms[i], c), 0);
      }
    }
    uint32_t got[TRK_LEASES_PER_PEER_MAX];
    for (uint32_t i = 0; i < n; i += 7)
      (void)trk_lease_grant(s, ms[i], 2, 0, got, 2);
    /* Odd rounds: every claim's trial starts and runs out (nobody
     * confirmed them), then a third are confirmed and a fifth emptied. */
    if (round % 2u == 1u) {
      trk_swarm_weigh(s, 1);
      trk_swarm_weigh(s, 2u + TRK_CLAIM_GRACE_MS);
      uint8_t *none = calloc(((size_t)total + 7u) / 8u, 1);
      assert_non_null(none);
      for (uint32_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)(trk_select_rand(&r) % 15u);
        if (x % 3u == 0)
          trk_swarm_confirm(s, ms[i], 3u + TRK_CLAIM_GRACE_MS);
        if (x % 5u == 0)
          assert_int_equal(
              trk_swarm_set_have(s, ms[i], none, ((size_t)total + 7u) / 8u), 0);
      }
      free(none);
    }
    for (uint32_t q = 0; q < 40; q++) {
      uint32_t who = (uint32_t)(trk_select_rand(&r) % n);
      uint32_t max =
          (uint32_t)(trk_select_rand(&r) % (TRK_REPLY_PEERS_MAX + 2));
      const trk_member_t *asker = q % 5 == 0 ? NULL : ms[who];
      uint64_t seed = trk_select_rand(&r) | 1u;
      uint64_t r1 = seed, r2 = seed;
      const trk_peer_t *o1[TRK_REPLY_PEERS_MAX], *o2[TRK_REPLY_PEERS_MAX];
      /* The reference first: the selection counts its picks. */
      uint32_t n2 = ref_select(s, peers[who], asker, max, &r2, o2);
      uint32_t n1 = trk_select_peers(s, peers[who], asker, max, &r1, o1);
      assert_int_equal(n1, n2);
      assert_true(r1 == r2); /* the same draws */
      for (uint32_t i = 0; i < n1; i++)
        assert_ptr_equal(o1[i], o2[i]);
    }
    trk_swarm_free(s);
    trk_peers_free(reg);
    free(peers);
    free(ms);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zone_then_useful),
      cmocka_unit_test(test_no_zone_useful_first),
      cmocka_unit_test(test_bound_and_exclusions),
      cmocka_unit_test(test_ties_randomized),
      cmocka_unit_test(test_named_least_first),
      cmocka_unit_test(test_named_full_before_useful),
      cmocka_unit_test(test_rich_before_count),
      cmocka_unit_test(test_heap_matches_full_sort),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
