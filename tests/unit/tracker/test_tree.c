/* test_tree.c - stripe trees (trk_tree.c): the shape (a chain of one
 * member per block in each stripe, the block's others its leaves), a
 * stripe's leases to its root only (a loose chunk, or a stripe whose root
 * does not fetch, to anyone), the wait while a new swarm forms, and the
 * reply that lists the parents first. Every lease step re-checks the
 * swarm's invariants (fx_check).
 */
#include "trk_fixture.h"

#define ALL TRK_LEASES_PER_PEER_MAX

static void fx_tree(fx_t *fx, uint32_t n, uint32_t total, uint32_t k) {
  fx_init(fx, n, total, NULL);
  trk_swarm_set_tree(fx->s, k);
  for (uint32_t i = 0; i < n; i++)
    trk_member_set_want(fx->m[i], ALL);
}

static uint32_t grant(fx_t *fx, uint32_t i, uint64_t now, uint32_t *out) {
  uint32_t n = trk_lease_grant(fx->s, fx->m[i], ALL, now, out, ALL);
  fx_check(fx->s);
  return n;
}

static void test_shape(void **state) {
  (void)state;
  fx_t fx;
  fx_tree(&fx, 7, 64, 4);
  assert_int_equal(trk_tree_stripes(fx.s), 0); /* 7 < 2 x 4: none */
  assert_null(trk_tree_parent(fx.s, fx.m[5], 1));
  fx_free(&fx);

  fx_tree(&fx, 10, 64, 4);
  assert_int_equal(trk_tree_stripes(fx.s), 4);
  const trk_member_t *M[10];
  for (uint32_t i = 0; i < 10; i++)
    M[i] = fx.m[i];
  for (uint32_t st = 0; st < 4; st++)
    assert_null(trk_tree_parent(fx.s, M[st], st));        /* the roots */
  assert_ptr_equal(trk_tree_parent(fx.s, M[5], 1), M[1]); /* the chain */
  assert_ptr_equal(trk_tree_parent(fx.s, M[9], 1), M[5]);
  assert_ptr_equal(trk_tree_parent(fx.s, M[6], 1), M[5]); /* block mates */
  assert_ptr_equal(trk_tree_parent(fx.s, M[0], 1), M[1]);
  assert_ptr_equal(trk_tree_parent(fx.s, M[8], 2), M[6]); /* no member 10 */
  /* Every stripe reaches every member from its root, each member sends to
   * at most 2k - 1 children in all (k when the blocks are full). */
  uint32_t children[10] = {0};
  for (uint32_t st = 0; st < 4; st++) {
    for (uint32_t i = 0; i < 10; i++) {
      const trk_member_t *p = M[i];
      uint32_t hops = 0;
      while ((p = trk_tree_parent(fx.s, p, st)) != NULL && hops < 10)
        hops++;
      assert_true(hops < 10);
      p = trk_tree_parent(fx.s, M[i], st);
      if (p != NULL)
        children[p->idx]++;
    }
  }
  for (uint32_t i = 0; i < 10; i++)
    assert_true(children[i] <= 2 * 4 - 1);
  assert_int_equal(children[1], 4); /* 5 and 0, 2, 3 */
  fx_free(&fx);
}

static void test_leases_to_roots(void **state) {
  (void)state;
  fx_t fx;
  uint32_t out[ALL];
  fx_tree(&fx, 8, 64, 4);
  assert_int_equal(trk_lease_cap(fx.s), 1);
  assert_int_equal(grant(&fx, 5, 0, out), 0); /* not a root */
  assert_int_equal(grant(&fx, 1, 0, out), 1 + TRK_LEASE_SPARE);
  assert_int_equal(out[0], 1); /* its stripe, in order */
  assert_int_equal(out[1], 5);
  /* Its root gave chunk 1 back: anyone may fetch it now. */
  assert_int_equal(trk_lease_release(fx.s, fx.m[1], 1, 0), 0);
  fx_check(fx.s);
  assert_int_equal(grant(&fx, 5, 0, out), 1);
  assert_int_equal(out[0], 1);
  /* A root that does not fetch from S3 leaves its stripe to anyone. */
  trk_member_set_want(fx.m[2], 0);
  assert_int_equal(grant(&fx, 6, 0, out), 1 + TRK_LEASE_SPARE);
  assert_int_equal(out[0] % 4, 2);
  assert_int_equal(out[1] % 4, 2);
  /* Off again: the usual leases, in turn. */
  trk_swarm_set_tree(fx.s, 0);
  assert_int_equal(trk_tree_stripes(fx.s), 0);
  assert_true(grant(&fx, 7, 0, out) > 0);
  fx_free(&fx);
}

static void test_new_swarm_waits_for_its_trees(void **state) {
  (void)state;
  fx_t fx;
  uint32_t out[ALL];
  fx_tree(&fx, 3, 64, 4); /* created at 0, too few members for trees */
  assert_int_equal(grant(&fx, 0, TRK_TREE_FORM_MS - 1, out), 0);
  assert_true(grant(&fx, 0, TRK_TREE_FORM_MS, out) > 0); /* the usual */
  fx_free(&fx);
}

static void test_reply_lists_parents_first(void **state) {
  (void)state;
  fx_t fx;
  const trk_peer_t *tree[TRK_TREE_MAX], *peers[TRK_REPLY_PEERS_MAX];
  fx_tree(&fx, 8, 64, 4);
  peers[0] = fx.peer[0];
  peers[1] = fx.peer[5]; /* a parent of member 6 already selected */
  uint32_t np = 2, iv = 5000;
  fx.s->now_ms = 0;
  assert_int_equal(trk_tree_reply(fx.s, fx.m[6], tree, peers, &np, &iv), 4);
  assert_ptr_equal(tree[0], fx.peer[4]);
  assert_ptr_equal(tree[1], fx.peer[5]);
  assert_ptr_equal(tree[2], fx.peer[2]); /* its chain's previous */
  assert_ptr_equal(tree[3], fx.peer[7]);
  assert_int_equal(np, 5); /* 4, 5, 2, 7, then 0 */
  assert_ptr_equal(peers[0], fx.peer[4]);
  assert_ptr_equal(peers[4], fx.peer[0]);
  assert_int_equal(iv, TRK_TREE_INTERVAL_MS); /* a young swarm */
  iv = 5000;
  fx.s->now_ms = TRK_TREE_SETTLE_MS;
  (void)trk_tree_reply(fx.s, fx.m[6], tree, peers, &np, &iv);
  assert_int_equal(iv, 5000);
  fx_free(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shape),
      cmocka_unit_test(test_leases_to_roots),
      cmocka_unit_test(test_new_swarm_waits_for_its_trees),
      cmocka_unit_test(test_reply_lists_parents_first),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
