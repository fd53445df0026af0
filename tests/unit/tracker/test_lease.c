/* test_lease.c - origin leases: exclusivity, spreading, expiry, re-grant,
 * holder loss, revocation, never leasing held chunks, cap scaling. Every
 * step of the simulations re-checks all swarm invariants (fx_check).
 */
#include "trk_fixture.h"

#define ALL TRK_LEASES_PER_PEER_MAX

static uint32_t grant(fx_t *fx, uint32_t i, uint64_t now, uint32_t *out) {
  uint32_t tmp[ALL];
  return trk_lease_grant(fx->s, fx->m[i], ALL, now, out ? out : tmp, ALL);
}

static void test_cap_scales_with_downloaders(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx, 1, 100, NULL);
  /* A lone downloader runs the whole target (parallel ranged GETs), and a
   * spare. */
  assert_int_equal(trk_lease_cap(fx.s), TRK_ORIGIN_INFLIGHT_TARGET);
  assert_int_equal(grant(&fx, 0, 0, NULL),
                   TRK_ORIGIN_INFLIGHT_TARGET + TRK_LEASE_SPARE);
  fx_free(&fx);

  fx_init(&fx, 4, 100, NULL);
  assert_int_equal(trk_lease_cap(fx.s), 2);
  /* Each may hold a spare besides its share: 3 leases, 2 at full rate. */
  assert_int_equal(trk_lease_limit(fx.s), 2 + TRK_LEASE_SPARE);
  assert_int_equal(grant(&fx, 0, 0, NULL), 2 + TRK_LEASE_SPARE);
  fx_free(&fx);

  /* From the target to twice it: one each and a spare. */
  fx_init(&fx, TRK_ORIGIN_INFLIGHT_TARGET, 100, NULL);
  assert_int_equal(trk_lease_cap(fx.s), 1);
  assert_int_equal(trk_lease_limit(fx.s), 1 + TRK_LEASE_SPARE);
  fx_free(&fx);
  /* Twice the target or more: one each, no spare. */
  fx_init(&fx, TRK_LEASE_SHARED_FACTOR * TRK_ORIGIN_INFLIGHT_TARGET, 100, NULL);
  assert_int_equal(trk_lease_cap(fx.s), 1);
  assert_int_equal(trk_lease_limit(fx.s), 1);
  fx_free(&fx);
  fx_init(&fx, 40, 100, NULL);
  assert_int_equal(trk_lease_cap(fx.s), TRK_LEASES_PER_PEER_MIN);
  assert_int_equal(trk_lease_limit(fx.s), 1);
  fx_free(&fx);
}

/* --origin-inflight: fewer than twice the target share it (and hold a
 * spare each); twice as many or more hold the target in all, one each. */
static void test_origin_target_caps_inflight(void **state) {
  (void)state;
  fx_t fx;
  uint32_t total = 0;
  fx_init(&fx, 8, 100, NULL);
  trk_swarm_set_origin_target(fx.s, 4);
  assert_int_equal(trk_lease_cap(fx.s), 1);
  for (uint32_t i = 0; i < 8; i++)
    total += grant(&fx, i, 0, NULL);
  assert_int_equal(total, 4);
  assert_int_equal(fx.s->leased, 4);
  for (uint32_t i = 0; i < 8; i++)
    assert_int_equal(fx.m[i]->nleases, i < 4 ? 1 : 0);
  fx_check(fx.s);
  fx_free(&fx);
  fx_init(&fx, 2, 100, NULL);
  trk_swarm_set_origin_target(fx.s, 4);
  assert_int_equal(trk_lease_cap(fx.s), 2);
  assert_int_equal(grant(&fx, 0, 0, NULL) + grant(&fx, 1, 0, NULL),
                   4 + 2 * TRK_LEASE_SPARE);
  trk_swarm_set_origin_target(fx.s, 0); /* default policy again */
  assert_int_equal(trk_lease_cap(fx.s), (TRK_ORIGIN_INFLIGHT_TARGET + 1) / 2);
  fx_check(fx.s);
  fx_free(&fx);
}

/* 24 downloaders (more than the target): the swarm never holds more than
 * the target, one lease per member, and the member that just delivered a
 * chunk (the first to ask again) waits while the grants go round, so the
 * S3 reads spread evenly. Before: every downloader held one lease and a
 * spare, 48 GETs sharing the origin's link. */
static void test_many_downloaders_hold_the_target_in_turn(void **state) {
  (void)state;
  fx_t fx;
  enum { N = 24, CHUNKS = 480 };
  uint32_t out[ALL];
  static uint32_t fetched[CHUNKS];
  memset(fetched, 0, sizeof(fetched));
  fx_init(&fx, N, CHUNKS, NULL);
  uint32_t total = 0;
  for (uint32_t i = 0; i < N; i++)
    total += grant(&fx, i, 0, NULL);
  assert_int_equal(total, TRK_ORIGIN_INFLIGHT_TARGET);
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal(fx.m[i]->nleases, i < TRK_ORIGIN_INFLIGHT_TARGET);
  /* Member 0 delivers its chunk and asks first: its turn was taken. */
  uint32_t c0 = fx.m[0]->leases[0].chunk;
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], c0), 0);
  fetched[c0]++;
  assert_int_equal(grant(&fx, 0, 0, NULL), 0);
  /* The next in line gets it. */
  assert_int_equal(grant(&fx, TRK_ORIGIN_INFLIGHT_TARGET, 0, out), 1);
  fx_check(fx.s);
  /* Run to the end, the members that just delivered asking first. */
  for (uint32_t round = 0; fx.s->need_count > 0 || fx.s->leased > 0; round++) {
    assert_true(round < 100000);
    for (uint32_t k = 0; k < N; k++) {
      uint32_t i = (round + k) % N;
      trk_member_t *m = fx.m[i];
      if (m->nleases > 0 && (round + i) % 3 == 0) {
        uint32_t c = m->leases[0].chunk;
        fetched[c]++;
        assert_int_equal(trk_swarm_add_have(fx.s, m, c), 0);
        grant(&fx, i, 0, NULL);
      }
    }
    for (uint32_t k = 0; k < N; k++)
      grant(&fx, (round + k) % N, 0, NULL);
    assert_true(fx.s->leased <= TRK_ORIGIN_INFLIGHT_TARGET);
    for (uint32_t i = 0; i < N; i++)
      assert_true(fx.m[i]->nleases <= 1);
    fx_check(fx.s);
  }
  for (uint32_t c = 0; c < CHUNKS; c++)
    assert_int_equal(fetched[c], 1); /* each chunk from the origin once */
  for (uint32_t i = 0; i < N; i++) {
    assert_true(fx.m[i]->origin_chunks >= CHUNKS / N / 2);
    assert_true(fx.m[i]->origin_chunks <= CHUNKS / N * 2);
  }
  fx_free(&fx);
}

static void test_want_limits_and_seeds(void **state) {
  (void)state;
  fx_t fx;
  uint32_t out[ALL];
  fx_init(&fx, 2, 100, NULL);
  assert_int_equal(trk_lease_grant(fx.s, fx.m[0], 1, 0, out, ALL), 1);
  assert_int_equal(trk_lease_grant(fx.s, fx.m[0], 1, 0, out, ALL), 0);
  assert_int_equal(trk_lease_grant(fx.s, fx.m[0], 0, 0, out, ALL), 0);
  /* A seed never fetches from the origin; becoming one drops leases. */
  trk_swarm_set_role(fx.s, fx.m[0], TRK_ROLE_SEED);
  assert_int_equal(fx.m[0]->nleases, 0);
  assert_int_equal(grant(&fx, 0, 0, NULL), 0);
  fx_check(fx.s);
  /* max_out bounds the output even below the cap. */
  assert_int_equal(trk_lease_grant(fx.s, fx.m[1], ALL, 0, out, 1), 1);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_disjoint_first_round(void **state) {
  (void)state;
  fx_t fx;
  uint8_t seen[64] = {0};
  fx_init(&fx, 8, 64, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  for (uint32_t i = 0; i < 8; i++) {
    uint32_t out[ALL];
    uint32_t n = grant(&fx, i, 0, out);
    assert_int_equal(n, 2 + TRK_LEASE_SPARE);
    for (uint32_t k = 0; k < n; k++) {
      assert_int_equal(seen[out[k]], 0);
      seen[out[k]] = 1;
      assert_ptr_equal(trk_swarm_lease_holder(fx.s, out[k]), fx.m[i]);
    }
    fx_check(fx.s);
  }
  /* Lowest chunks first: the 24 leases are exactly chunks 0..23. */
  for (uint32_t c = 0; c < 64; c++)
    assert_int_equal(seen[c], c < 8 * (2 + TRK_LEASE_SPARE));
  fx_free(&fx);
}

static void test_no_lease_for_held_chunks(void **state) {
  (void)state;
  fx_t fx;
  uint8_t bits[4] = {0xFF, 0x0F, 0x00, 0x01}; /* chunks 0-7, 12-15, 31 */
  fx_init(&fx, 3, 32, NULL);
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[0], bits, sizeof(bits)), 0);
  assert_int_equal(trk_member_have_count(fx.m[0]), 13);
  assert_true(trk_member_has(fx.m[0], 12) && !trk_member_has(fx.m[0], 11));
  assert_true(trk_member_has(fx.m[0], 31));
  fx_check(fx.s);
  for (uint64_t now = 0; now < 10; now++) {
    for (uint32_t i = 0; i < 3; i++) {
      uint32_t out[ALL];
      uint32_t n = grant(&fx, i, now, out);
      for (uint32_t k = 0; k < n; k++) {
        assert_int_equal(trk_swarm_avail(fx.s, out[k]), 0);
        assert_false(trk_member_has(fx.m[i], out[k]));
        assert_int_equal(trk_swarm_add_have(fx.s, fx.m[i], out[k]), 0);
      }
      fx_check(fx.s);
    }
  }
  /* 19 chunks were missing; each was fetched exactly once. */
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.leases_granted, 19);
  assert_int_equal(st.leases_completed, 19);
  assert_int_equal(st.chunks_need, 0);
  /* Bad bitfield lengths and indexes are refused. */
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[1], bits, 3), WS_EBADMSG);
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[1], 32), WS_EBADMSG);
  fx_free(&fx);
}

/* A member claims every chunk and never delivers: nothing is in the need
 * set, so only the stalled downloaders' reports get chunks leased, each
 * once; a completed lease vouches for the chunk until a holder leaves. */
/* Chunks a member asked to have read first go before the rest, lowest
 * first among them; then index order. Fails without trk_lease_prefer's
 * pass (the origin read in index order, the small files that sort after
 * the shards last). Out-of-range asks are ignored. */
static void test_first_chunks_leased_first(void **state) {
  (void)state;
  fx_t fx;
  uint32_t a[ALL];
  fx_init(&fx, 1, 100, NULL);
  uint32_t first[4] = {98, 40, 99, 100000};
  trk_lease_prefer(fx.s, first, 4);
  uint32_t n = grant(&fx, 0, 0, a);
  assert_int_equal(n, TRK_ORIGIN_INFLIGHT_TARGET + TRK_LEASE_SPARE);
  assert_int_equal(a[0], 40);
  assert_int_equal(a[1], 98);
  assert_int_equal(a[2], 99);
  for (uint32_t i = 3; i < n; i++)
    assert_int_equal(a[i], i - 3); /* then from the lowest */
  fx_check(fx.s);
  /* Held or leased ones are not leased again. */
  trk_lease_prefer(fx.s, first, 3);
  uint32_t tmp[ALL];
  assert_int_equal(trk_lease_grant(fx.s, fx.m[0], ALL, 0, tmp, ALL), 0);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_stuck_chunks_leased_though_held(void **state) {
  (void)state;
  fx_t fx;
  uint8_t all[2] = {0xFF, 0xFF};
  uint32_t stuck[16], a[ALL], b[ALL], c[ALL];
  fx_init(&fx, 4, 16, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  assert_int_equal(trk_swarm_set_have(fx.s, fx.m[0], all, sizeof(all)), 0);
  for (uint32_t i = 0; i < 16; i++)
    stuck[i] = i;
  for (uint32_t i = 1; i < 4; i++) {
    trk_member_set_want(fx.m[i], ALL);
    assert_int_equal(grant(&fx, i, 0, NULL), 0); /* held: no need */
  }
  /* The liar itself, and a seed, get nothing; bad indexes are skipped. */
  assert_int_equal(trk_lease_grant_stuck(fx.s, fx.m[0], stuck, 16, 0, a, ALL),
                   0);
  uint32_t bad[2] = {16, UINT32_MAX};
  assert_int_equal(trk_lease_grant_stuck(fx.s, fx.m[1], bad, 2, 0, a, ALL), 0);
  /* Reporters share the chunks, one lease each (cap 16/3 + spare). */
  uint32_t na = trk_lease_grant_stuck(fx.s, fx.m[1], stuck, 16, 0, a, ALL);
  uint32_t nb = trk_lease_grant_stuck(fx.s, fx.m[2], stuck, 16, 0, b, ALL);
  uint32_t nc = trk_lease_grant_stuck(fx.s, fx.m[3], stuck, 16, 0, c, ALL);
  fx_check(fx.s);
  assert_int_equal(na, trk_lease_limit(fx.s));
  assert_int_equal(na + nb + nc, 16);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.chunks_suspect, 16);
  assert_int_equal(st.leases_suspect, 16);
  assert_int_equal(st.chunks_need, 0);
  /* m1 delivers its first chunk: no longer suspect, and vouched: a new
   * report of it (m2 before it heard the HAVE) gets no second lease. */
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[1], a[0]), 0);
  fx_check(fx.s);
  assert_null(trk_swarm_lease_holder(fx.s, a[0]));
  assert_int_equal(
      trk_lease_grant_stuck(fx.s, fx.m[2], &a[0], 1, 0, b + nb, ALL - nb), 0);
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.chunks_suspect, 15);
  assert_int_equal(st.leases_completed, 1);
  /* m2's leases expire: its chunks stay suspect and go to the next
   * reporter (m3 has room once its own are delivered). */
  for (uint32_t k = 0; k < nc; k++)
    assert_int_equal(trk_swarm_add_have(fx.s, fx.m[3], c[k]), 0);
  assert_int_equal(trk_lease_expire(fx.s, 60000), na - 1u + nb);
  fx_check(fx.s);
  uint32_t n3 = trk_lease_grant_stuck(fx.s, fx.m[3], b, nb, 60000, c, ALL);
  assert_int_equal(n3, nb);
  fx_check(fx.s);
  /* The deliverer leaves: its chunk is no longer vouched for. */
  trk_swarm_leave(fx.s, fx.m[1]);
  fx.m[1] = NULL;
  fx_check(fx.s);
  assert_int_equal(
      trk_lease_grant_stuck(fx.s, fx.m[2], &a[0], 1, 60000, b, ALL), 1);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_done_chunks_never_released_again(void **state) {
  (void)state;
  fx_t fx;
  fx_init(&fx, 4, 40, NULL);
  uint64_t now = 0;
  while (fx.s->need_count > 0 || fx.s->leased > 0) {
    for (uint32_t i = 0; i < 4; i++) {
      uint32_t out[ALL];
      uint32_t n = grant(&fx, i, now, out);
      for (uint32_t k = 0; k < n; k++)
        assert_int_equal(trk_swarm_add_have(fx.s, fx.m[i], out[k]), 0);
    }
    fx_check(fx.s);
    now += 100;
    assert_true(now < 100000);
  }
  /* Every chunk is held somewhere: nobody, old or new, gets a lease. */
  trk_peer_t *late;
  trk_member_t *lm;
  trk_peer_info_t info = {.node_id = "late", .port = 1};
  assert_int_equal(trk_peers_add(fx.reg, &info, now, &late), 0);
  assert_int_equal(trk_swarm_join(fx.s, late, TRK_ROLE_LEECH, now, &lm), 0);
  uint32_t out[ALL];
  assert_int_equal(trk_lease_grant(fx.s, lm, ALL, now, out, ALL), 0);
  for (uint32_t i = 0; i < 4; i++)
    assert_int_equal(grant(&fx, i, now, NULL), 0);
  assert_int_equal(trk_lease_expire(fx.s, now + 10 * TRK_LEASE_TTL_MS), 0);
  assert_int_equal(trk_lease_grant(fx.s, lm, ALL, now, out, ALL), 0);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.leases_granted, 40);
  assert_int_equal(st.origin_refetch, 0);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_expiry_and_regrant(void **state) {
  (void)state;
  fx_t fx;
  uint32_t a[ALL], b[ALL];
  fx_init(&fx, 2, 8, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  /* Two downloaders: cap 8 each, 8 chunks: A takes all of them. */
  assert_int_equal(grant(&fx, 0, 1000, a), 8);
  assert_int_equal(grant(&fx, 1, 1000, b), 0);
  assert_int_equal(trk_lease_expire(fx.s, 1000 + TRK_LEASE_TTL_MS - 1), 0);
  /* A renews chunk 3 only, halfway through the TTL. */
  assert_int_equal(trk_lease_renew(fx.s, fx.m[0], 3, 8000), 0);
  assert_int_equal(trk_lease_expire(fx.s, 1000 + TRK_LEASE_TTL_MS), 7);
  fx_check(fx.s);
  assert_int_equal(fx.m[0]->nleases, 1);
  /* The stalled chunks go to B, lowest first, and never chunk 3. */
  uint32_t n = grant(&fx, 1, 16000, b);
  assert_int_equal(n, 7);
  for (uint32_t k = 0; k < n; k++)
    assert_int_not_equal(b[k], 3);
  assert_int_equal(trk_lease_renew(fx.s, fx.m[0], 0, 16000), WS_ENOTFOUND);
  assert_int_equal(trk_lease_expire(fx.s, 8000 + TRK_LEASE_TTL_MS - 1), 0);
  assert_int_equal(trk_lease_expire(fx.s, 8000 + TRK_LEASE_TTL_MS), 1);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.leases_expired, 8);
  assert_int_equal(st.leases_granted, 15);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_renew_adopts_unleased_chunk(void **state) {
  (void)state;
  fx_t fx;
  uint32_t a[ALL], b[ALL];
  fx_init(&fx, 2, 16, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  assert_int_equal(grant(&fx, 0, 0, a), 8);
  assert_int_equal(trk_lease_expire(fx.s, TRK_LEASE_TTL_MS), 8);
  /* A's fetch of 3 was slow but alive: its late renew takes it back. */
  assert_int_equal(trk_lease_renew(fx.s, fx.m[0], 3, TRK_LEASE_TTL_MS + 1), 0);
  assert_ptr_equal(trk_swarm_lease_holder(fx.s, 3), fx.m[0]);
  fx_check(fx.s);
  uint32_t n = grant(&fx, 1, TRK_LEASE_TTL_MS + 1, b);
  assert_int_equal(n, 8);
  for (uint32_t k = 0; k < n; k++)
    assert_int_not_equal(b[k], 3);
  /* Leased or held by someone else, or out of range: refused. */
  assert_int_equal(trk_lease_renew(fx.s, fx.m[1], 3, 1), WS_ENOTFOUND);
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[1], 9), 0);
  assert_int_equal(trk_lease_renew(fx.s, fx.m[0], 9, 1), WS_ENOTFOUND);
  assert_int_equal(trk_lease_renew(fx.s, fx.m[0], 16, 1), WS_ENOTFOUND);
  /* A seed never adopts. */
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], 3, 2), 0);
  trk_swarm_set_role(fx.s, fx.m[0], TRK_ROLE_SEED);
  assert_int_equal(trk_lease_renew(fx.s, fx.m[0], 3, 2), WS_ENOTFOUND);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_release_and_holder_leave(void **state) {
  (void)state;
  fx_t fx;
  uint32_t a[ALL];
  fx_init(&fx, 3, 30, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  /* 3 downloaders: cap 6, and a spare */
  assert_int_equal(grant(&fx, 0, 0, a), 6 + TRK_LEASE_SPARE);
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], a[0], 0), 0);
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], a[0], 0), WS_ENOTFOUND);
  assert_int_equal(trk_lease_release(fx.s, fx.m[1], a[1], 0), WS_ENOTFOUND);
  fx_check(fx.s);
  /* A also completed chunk 20 (it had it from elsewhere). */
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], 20), 0);
  /* A disconnects: its 6 leases are leasable at once, chunk 20 too. */
  trk_peer_t *pa = fx.peer[0];
  trk_swarm_leave(fx.s, fx.m[0]);
  fx.m[0] = NULL;
  assert_int_equal(pa->njoined, 0);
  fx_check(fx.s);
  assert_int_equal(fx.s->need_count, 30);
  uint32_t b[ALL];
  uint32_t n = grant(&fx, 1, 0, b);
  assert_int_equal(n, TRK_LEASES_PER_PEER_MAX); /* 2 downloaders now */
  assert_int_equal(b[0], 0);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.leases_released, 6 + TRK_LEASE_SPARE);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_released_chunk_goes_elsewhere(void **state) {
  (void)state;
  fx_t fx;
  uint32_t a[ALL], out[ALL];
  fx_init(&fx, 2, 32, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  assert_int_equal(grant(&fx, 0, 0, a), 8);
  /* A's fetch of chunk 2 failed: it is not handed straight back to A. */
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], 2, 100), 0);
  assert_int_equal(grant(&fx, 0, 100, out), 1);
  assert_int_equal(out[0], 8);
  fx_check(fx.s);
  /* B, the other downloader, gets it first. */
  assert_int_equal(grant(&fx, 1, 100, out), 8);
  assert_int_equal(out[0], 2);
  assert_int_equal(out[1], 9);
  /* Both gave chunks back: A skips 2 and 8 (its own), takes 16. */
  assert_int_equal(trk_lease_release(fx.s, fx.m[1], 2, 200), 0);
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], 8, 200), 0);
  assert_int_equal(grant(&fx, 0, 200, out), 1);
  assert_int_equal(out[0], 16);
  fx_check(fx.s);
  /* After TRK_LEASE_AVOID_MS the releaser may have chunk 2 again. */
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], 16, 100), 0);
  assert_int_equal(grant(&fx, 0, 100 + TRK_LEASE_AVOID_MS - 1, out), 1);
  assert_int_equal(out[0], 17);
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], 17, 150), 0);
  assert_int_equal(grant(&fx, 0, 100 + TRK_LEASE_AVOID_MS, out), 1);
  assert_int_equal(out[0], 2);
  fx_check(fx.s);
  fx_free(&fx);
  /* A lone downloader gets its own released chunk back at once. */
  fx_init(&fx, 1, 4, NULL);
  assert_int_equal(grant(&fx, 0, 0, a), 4);
  assert_int_equal(trk_lease_release(fx.s, fx.m[0], 1, 10), 0);
  assert_int_equal(grant(&fx, 0, 10, out), 1);
  assert_int_equal(out[0], 1);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_revoke_when_other_delivers(void **state) {
  (void)state;
  fx_t fx;
  uint32_t a[ALL];
  fx_init(&fx, 2, 16, NULL);
  trk_swarm_set_origin_target(fx.s, FX_MECH_TARGET);
  assert_int_equal(grant(&fx, 0, 0, a), 8);
  /* B got chunk a[2] some other way (S3 fallback): A's lease is moot. */
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[1], a[2]), 0);
  assert_null(trk_swarm_lease_holder(fx.s, a[2]));
  assert_int_equal(trk_lease_renew(fx.s, fx.m[0], a[2], 1), WS_ENOTFOUND);
  assert_int_equal(fx.m[0]->nleases, 7);
  /* A's freed slot refills with a chunk still needed, never a[2]. */
  uint32_t out[ALL];
  assert_int_equal(grant(&fx, 0, 1, out), 1);
  assert_int_not_equal(out[0], a[2]);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.leases_revoked, 1);
  fx_check(fx.s);
  fx_free(&fx);
}

static void test_refetch_after_all_holders_leave(void **state) {
  (void)state;
  fx_t fx;
  uint32_t a[ALL];
  fx_init(&fx, 2, 4, NULL);
  assert_int_equal(grant(&fx, 0, 0, a), 4);
  for (uint32_t k = 0; k < 4; k++)
    assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], a[k]), 0);
  assert_int_equal(grant(&fx, 1, 0, NULL), 0);
  /* The only holder leaves: liveness needs the origin again. */
  trk_swarm_leave(fx.s, fx.m[0]);
  fx.m[0] = NULL;
  assert_int_equal(grant(&fx, 1, 0, NULL), 4);
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.origin_refetch, 4);
  fx_check(fx.s);
  fx_free(&fx);
}

/* Random operations; invariants after each. */
static void test_exclusivity_random_ops(void **state) {
  (void)state;
  fx_t fx;
  uint64_t rng = 12345;
  fx_init(&fx, 6, 97, NULL);
  uint64_t now = 0;
  for (int step = 0; step < 4000; step++) {
    uint32_t i = (uint32_t)(trk_select_rand(&rng) % 6);
    uint32_t op = (uint32_t)(trk_select_rand(&rng) % 8);
    uint32_t c = (uint32_t)(trk_select_rand(&rng) % 97);
    now += trk_select_rand(&rng) % 2000;
    if (fx.m[i] == NULL) {
      assert_int_equal(
          trk_swarm_join(fx.s, fx.peer[i], TRK_ROLE_LEECH, now, &fx.m[i]), 0);
      continue;
    }
    trk_member_t *m = fx.m[i];
    switch (op) {
    case 0:
    case 1:
      grant(&fx, i, now, NULL);
      break;
    case 2:
      if (m->nleases > 0)
        assert_int_equal(
            trk_swarm_add_have(fx.s, m, m->leases[c % m->nleases].chunk), 0);
      break;
    case 3:
      assert_int_equal(trk_swarm_add_have(fx.s, m, c), 0);
      break;
    case 4:
      if (c % 2 == 0 && m->nleases > 0) {
        assert_int_equal(
            trk_lease_release(fx.s, m, m->leases[c % m->nleases].chunk, now),
            0);
      } else {
        /* Renew any chunk: own lease, adoption, or refusal. */
        int rc = trk_lease_renew(fx.s, m, c, now);
        assert_true(rc == 0 || rc == WS_ENOTFOUND);
        if (rc == 0)
          assert_ptr_equal(trk_swarm_lease_holder(fx.s, c), m);
      }
      break;
    case 5:
      trk_lease_expire(fx.s, now);
      break;
    case 6: {
      uint8_t bits[13];
      for (size_t k = 0; k < sizeof(bits); k++)
        bits[k] =
            (uint8_t)trk_select_rand(&rng) & (uint8_t)trk_select_rand(&rng);
      bits[12] &= 0x80; /* 97 bits: one valid bit in the last byte */
      assert_int_equal(trk_swarm_set_have(fx.s, m, bits, sizeof(bits)), 0);
      break;
    }
    default:
      if (c % 4 == 0) {
        trk_swarm_leave(fx.s, m);
        fx.m[i] = NULL;
      } else {
        trk_swarm_set_role(fx.s, m, c % 2 ? TRK_ROLE_SEED : TRK_ROLE_LEECH);
      }
      break;
    }
    fx_check(fx.s);
  }
  fx_free(&fx);
}

/* A swarm round: every peer tops up its leases, completes some of them
 * (speed[i]: one completion every speed[i] rounds, 0 = stalled), and copies
 * one chunk a neighbour holds (a swap). Returns when all peers are done. */
static uint32_t simulate(fx_t *fx, const uint32_t *speed, uint32_t *fetched) {
  uint64_t rng = 99;
  uint64_t now = 0;
  uint32_t rounds = 0;
  uint32_t total = fx->s->total;
  for (;;) {
    uint32_t done = 0;
    for (uint32_t i = 0; i < fx->n; i++) {
      trk_member_t *m = fx->m[i];
      if (m->have_count == total) {
        done++;
        continue;
      }
      grant(fx, i, now, NULL);
      /* Caps only grow here (peers finish), so this holds strictly. */
      assert_true(m->nleases <= trk_lease_limit(fx->s));
      if (speed[i] != 0 && rounds % speed[i] == 0 && m->nleases > 0) {
        uint32_t c = m->leases[0].chunk;
        fetched[c]++;
        assert_int_equal(trk_swarm_add_have(fx->s, m, c), 0);
      }
      /* Swap: one chunk from a random neighbour that has one we lack. */
      uint32_t j = (uint32_t)(trk_select_rand(&rng) % fx->n);
      const trk_member_t *o = fx->m[j];
      for (uint32_t c = 0; c < total; c++) {
        if (trk_member_has(o, c) && !trk_member_has(m, c)) {
          assert_int_equal(trk_swarm_add_have(fx->s, m, c), 0);
          break;
        }
      }
      /* Holders renew while making progress. */
      for (uint32_t k = 0; k < m->nleases; k++)
        if (speed[i] != 0)
          assert_int_equal(trk_lease_renew(fx->s, m, m->leases[k].chunk, now),
                           0);
    }
    fx_check(fx->s);
    if (done == fx->n)
      return rounds;
    now += 1000;
    trk_lease_expire(fx->s, now);
    rounds++;
    assert_true(rounds < 100000);
  }
}

static void test_spread_equal_peers(void **state) {
  (void)state;
  fx_t fx;
  uint32_t speed[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  static uint32_t fetched[800];
  memset(fetched, 0, sizeof(fetched));
  fx_init(&fx, 8, 800, NULL);
  simulate(&fx, speed, fetched);
  for (uint32_t c = 0; c < 800; c++)
    assert_int_equal(fetched[c], 1); /* origin sends each chunk once */
  for (uint32_t i = 0; i < 8; i++) {
    /* Equal speeds: each peer fetched its 1/8 share from the origin. */
    assert_true(fx.m[i]->origin_chunks >= 100 - 2);
    assert_true(fx.m[i]->origin_chunks <= 100 + 2);
  }
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_int_equal(st.leases_granted, 800);
  assert_int_equal(st.origin_refetch, 0);
  assert_int_equal(st.complete, 8);
  fx_free(&fx);
}

static void test_spread_slow_and_stalled_peers(void **state) {
  (void)state;
  fx_t fx;
  /* Peer 7 is 4x slower, peer 6 stalls for good (stops renewing). */
  uint32_t speed[8] = {1, 1, 1, 1, 1, 1, 0, 4};
  static uint32_t fetched[400];
  memset(fetched, 0, sizeof(fetched));
  fx_init(&fx, 8, 400, NULL);
  uint32_t rounds = 0;
  uint64_t now = 0;
  /* Run until the six healthy peers have everything (peer 6 never
   * completes a lease; its chunks expire and are re-granted). */
  for (;;) {
    for (uint32_t i = 0; i < 8; i++) {
      trk_member_t *m = fx.m[i];
      grant(&fx, i, now, NULL);
      assert_true(m->nleases <= trk_lease_limit(fx.s));
      if (speed[i] != 0 && rounds % speed[i] == 0 && m->nleases > 0) {
        uint32_t c = m->leases[0].chunk;
        fetched[c]++;
        assert_int_equal(trk_swarm_add_have(fx.s, m, c), 0);
      }
      for (uint32_t k = 0; speed[i] != 0 && k < m->nleases; k++)
        assert_int_equal(trk_lease_renew(fx.s, m, m->leases[k].chunk, now), 0);
    }
    fx_check(fx.s);
    if (fx.s->need_count == 0 && fx.s->leased == 0)
      break;
    if (fx.s->need_count == 0 && fx.s->leased == fx.m[6]->nleases)
      /* Only the staller's leases are left: let them expire. */
      now += TRK_LEASE_TTL_MS;
    now += 1000;
    trk_lease_expire(fx.s, now);
    rounds++;
    assert_true(rounds < 10000);
  }
  for (uint32_t c = 0; c < 400; c++)
    assert_int_equal(fetched[c], 1);
  assert_int_equal(fx.m[6]->origin_chunks, 0);
  /* The slow peer got fewer chunks than any fast one, never more than its
   * cap at a time (checked above), and fast peers shared the rest evenly. */
  for (uint32_t i = 0; i < 6; i++) {
    assert_true(fx.m[7]->origin_chunks < fx.m[i]->origin_chunks);
    assert_true(fx.m[i]->origin_chunks >= 400 / 7 - 4);
  }
  trk_swarm_stats_t st;
  trk_swarm_stats(fx.s, &st);
  assert_true(st.leases_expired >= 2);
  assert_int_equal(st.origin_refetch, 0);
  fx_free(&fx);
}

/* Leases that end by deadline: random grants, renews, releases, haves and
 * leaves with a clock that sometimes steps back (the list then inserts in
 * order): every expire ends exactly the leases whose deadline passed, as a
 * walk over every member counts them, and no other. */
static void test_expiry_matches_full_walk(void **state) {
  (void)state;
  fx_t fx;
  uint64_t rng = 777;
  fx_init(&fx, 12, 300, NULL);
  trk_swarm_set_origin_target(fx.s, 64);
  uint64_t now = 100000;
  for (int step = 0; step < 6000; step++) {
    uint32_t i = (uint32_t)(trk_select_rand(&rng) % 12);
    uint32_t op = (uint32_t)(trk_select_rand(&rng) % 10);
    uint32_t c = (uint32_t)(trk_select_rand(&rng) % 300);
    uint64_t t = now;
    if (trk_select_rand(&rng) % 8 == 0)
      t = now - trk_select_rand(&rng) % 3000; /* a call from the past */
    else
      now = t = now + trk_select_rand(&rng) % 700;
    if (fx.m[i] == NULL) {
      assert_int_equal(
          trk_swarm_join(fx.s, fx.peer[i], TRK_ROLE_LEECH, t, &fx.m[i]), 0);
      continue;
    }
    trk_member_t *m = fx.m[i];
    if (op <= 2) {
      grant(&fx, i, t, NULL);
    } else if (op <= 4 && m->nleases > 0) {
      uint32_t k = (uint32_t)(trk_select_rand(&rng) % m->nleases);
      assert_int_equal(trk_lease_renew(fx.s, m, m->leases[k].chunk, t), 0);
    } else if (op == 5 && m->nleases > 0) {
      assert_int_equal(trk_lease_release(fx.s, m, m->leases[0].chunk, t), 0);
    } else if (op == 6) {
      assert_int_equal(trk_swarm_add_have(fx.s, m, c), 0);
    } else if (op == 7 && trk_select_rand(&rng) % 20 == 0) {
      trk_swarm_leave(fx.s, m);
      fx.m[i] = NULL;
    } else {
      uint32_t due = 0;
      for (uint32_t k = 0; k < 12; k++)
        for (uint32_t j = 0; fx.m[k] != NULL && j < fx.m[k]->nleases; j++)
          due += fx.m[k]->leases[j].expires_ms <= t;
      assert_int_equal(trk_lease_expire(fx.s, t), due);
      for (uint32_t k = 0; k < 12; k++)
        for (uint32_t j = 0; fx.m[k] != NULL && j < fx.m[k]->nleases; j++)
          assert_true(fx.m[k]->leases[j].expires_ms > t);
    }
    fx_check(fx.s);
  }
  fx_free(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cap_scales_with_downloaders),
      cmocka_unit_test(test_origin_target_caps_inflight),
      cmocka_unit_test(test_many_downloaders_hold_the_target_in_turn),
      cmocka_unit_test(test_want_limits_and_seeds),
      cmocka_unit_test(test_disjoint_first_round),
      cmocka_unit_test(test_no_lease_for_held_chunks),
      cmocka_unit_test(test_first_chunks_leased_first),
      cmocka_unit_test(test_stuck_chunks_leased_though_held),
      cmocka_unit_test(test_done_chunks_never_released_again),
      cmocka_unit_test(test_expiry_and_regrant),
      cmocka_unit_test(test_renew_adopts_unleased_chunk),
      cmocka_unit_test(test_release_and_holder_leave),
      cmocka_unit_test(test_released_chunk_goes_elsewhere),
      cmocka_unit_test(test_revoke_when_other_delivers),
      cmocka_unit_test(test_refetch_after_all_holders_leave),
      cmocka_unit_test(test_exclusivity_random_ops),
      cmocka_unit_test(test_spread_equal_peers),
      cmocka_unit_test(test_spread_slow_and_stalled_peers),
      cmocka_unit_test(test_expiry_matches_full_walk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
