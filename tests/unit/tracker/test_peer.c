/* test_peer.c - peer registry: ids and generations, the peer cap, input
 * validation, announce token bucket, swarms-per-peer cap, join slots.
 */
#include "trk_fixture.h"

#include "../heap_bytes.h"

static trk_peer_info_t info_of(const char *id) {
  trk_peer_info_t i = {
      .node_id = id, .addr = "10.1.2.3", .port = 7777, .zone = "eu-west-1a"};
  return i;
}

static void test_add_get_remove_generations(void **state) {
  (void)state;
  trk_peers_t *reg = trk_peers_new(2);
  trk_peer_t *a, *b, *c;
  trk_peer_info_t ia = info_of("a"), ib = info_of("b"), ic = info_of("c");
  assert_int_equal(trk_peers_add(reg, &ia, 5, &a), 0);
  assert_int_not_equal(a->id, 0);
  assert_string_equal(a->zone, "eu-west-1a");
  assert_int_equal(a->port, 7777);
  assert_int_equal(a->connected_ms, 5);
  assert_ptr_equal(trk_peers_get(reg, a->id), a);
  assert_ptr_equal(trk_peers_find_node(reg, "a"), a);
  assert_null(trk_peers_find_node(reg, "zz"));
  trk_peer_id_t old = a->id;
  trk_peers_remove(reg, old);
  assert_null(trk_peers_get(reg, old));
  /* The slot is reused under a new id; the stale id finds nothing. */
  assert_int_equal(trk_peers_add(reg, &ib, 6, &b), 0);
  assert_int_not_equal(b->id, old);
  assert_null(trk_peers_get(reg, old));
  assert_null(trk_peers_get(reg, 0));
  assert_null(trk_peers_get(reg, 0xFFFFFFFFu));
  assert_int_equal(trk_peers_count(reg), 1);
  trk_peers_remove(reg, old); /* unknown id: no-op */
  assert_int_equal(trk_peers_count(reg), 1);
  /* Iteration sees exactly the live peers. */
  assert_int_equal(trk_peers_add(reg, &ic, 7, &c), 0);
  uint32_t cur = 0, n = 0;
  trk_peer_t *p;
  while ((p = trk_peers_next(reg, &cur)) != NULL) {
    assert_true(p == b || p == c);
    n++;
  }
  assert_int_equal(n, 2);
  trk_peers_free(reg);
}

static void test_peer_cap(void **state) {
  (void)state;
  trk_peers_t *reg = trk_peers_new(3);
  trk_peer_t *p;
  char id[16];
  for (int i = 0; i < 3; i++) {
    snprintf(id, sizeof(id), "n%d", i);
    trk_peer_info_t in = info_of(id);
    assert_int_equal(trk_peers_add(reg, &in, 0, &p), 0);
  }
  trk_peer_info_t in = info_of("n3");
  p = NULL;
  assert_int_equal(trk_peers_add(reg, &in, 0, &p), WS_ELIMIT);
  assert_null(p); /* out-param untouched on error */
  assert_int_equal(trk_peers_count(reg), 3);
  assert_int_equal(trk_peers_max(reg), 3);
  trk_peers_free(reg);
  trk_peers_free(NULL);
}

static void test_validation(void **state) {
  (void)state;
  trk_peers_t *reg = trk_peers_new(8);
  trk_peer_t *p;
  char longid[TRK_NODE_ID_MAX + 2];
  memset(longid, 'x', sizeof(longid) - 1);
  longid[sizeof(longid) - 1] = '\0';
  const char *bad_ids[] = {"", "has space", "quo\"te", "tab\t", longid, NULL};
  for (int i = 0; i < 5; i++) {
    trk_peer_info_t in = info_of(bad_ids[i]);
    assert_int_equal(trk_peers_add(reg, &in, 0, &p), WS_EUSAGE);
  }
  trk_peer_info_t in = info_of(NULL);
  assert_int_equal(trk_peers_add(reg, &in, 0, &p), WS_EUSAGE);
  in = info_of("ok");
  in.zone = "bad zone";
  assert_int_equal(trk_peers_add(reg, &in, 0, &p), WS_EUSAGE);
  in.zone = NULL;
  in.addr = "10.0.0.1;rm";
  assert_int_equal(trk_peers_add(reg, &in, 0, &p), WS_EUSAGE);
  in.addr = "fe80::1%eth0";
  assert_int_equal(trk_peers_add(reg, &in, 0, &p), 0);
  assert_string_equal(p->zone, "");
  /* Update keeps node id, changes address; rejects a different id. */
  trk_peer_info_t up = info_of("ok");
  up.port = 1234;
  assert_int_equal(trk_peer_update(p, &up), 0);
  assert_int_equal(p->port, 1234);
  up = info_of("other");
  assert_int_equal(trk_peer_update(p, &up), WS_EUSAGE);
  up = info_of("ok");
  up.zone = "a b";
  assert_int_equal(trk_peer_update(p, &up), WS_EUSAGE);
  assert_int_equal(p->port, 1234); /* unchanged on error */
  assert_int_equal(trk_peers_count(reg), 1);
  trk_peers_free(reg);
}

static void test_rate_limit(void **state) {
  (void)state;
  trk_peers_t *reg = trk_peers_new(1);
  trk_peer_t *p;
  trk_peer_info_t in = info_of("r");
  assert_int_equal(trk_peers_add(reg, &in, 1000, &p), 0);
  for (uint32_t i = 0; i < TRK_ANNOUNCE_BURST; i++)
    assert_int_equal(trk_peer_rate_take(p, 1000), 0);
  assert_int_equal(trk_peer_rate_take(p, 1000), WS_EBUSY);
  assert_int_equal(p->rate_limited, 1);
  /* One token per 1000 / TRK_ANNOUNCE_PER_S ms. */
  uint64_t step = 1000 / TRK_ANNOUNCE_PER_S;
  assert_int_equal(trk_peer_rate_take(p, 1000 + step - 1), WS_EBUSY);
  assert_int_equal(trk_peer_rate_take(p, 1000 + step), 0);
  assert_int_equal(trk_peer_rate_take(p, 1000 + step), WS_EBUSY);
  /* A long silence refills to the burst, not beyond (and no overflow). */
  uint64_t later = UINT64_MAX / 2;
  for (uint32_t i = 0; i < TRK_ANNOUNCE_BURST; i++)
    assert_int_equal(trk_peer_rate_take(p, later), 0);
  assert_int_equal(trk_peer_rate_take(p, later), WS_EBUSY);
  /* A clock that goes backwards refills nothing. */
  assert_int_equal(trk_peer_rate_take(p, 5), WS_EBUSY);
  assert_int_equal(p->announces, TRK_ANNOUNCE_BURST * 2u + 1u);
  trk_peers_free(reg);
}

static void test_swarms_per_peer_cap(void **state) {
  (void)state;
  trk_peers_t *reg = trk_peers_new(1);
  trk_peer_t *p;
  trk_swarm_t *s[TRK_MAX_SWARMS_PER_PEER + 1];
  trk_member_t *m;
  trk_peer_info_t in = info_of("many");
  assert_int_equal(trk_peers_add(reg, &in, 0, &p), 0);
  for (uint32_t i = 0; i <= TRK_MAX_SWARMS_PER_PEER; i++) {
    ws_hash_t d = fx_digest((uint8_t)i);
    s[i] = trk_swarm_new(&d, 10, 0);
    assert_non_null(s[i]);
  }
  for (uint32_t i = 0; i < TRK_MAX_SWARMS_PER_PEER; i++)
    assert_int_equal(trk_swarm_join(s[i], p, TRK_ROLE_LEECH, 0, &m), 0);
  assert_int_equal(trk_swarm_join(s[0], p, TRK_ROLE_LEECH, 0, &m), WS_EEXISTS);
  assert_int_equal(
      trk_swarm_join(s[TRK_MAX_SWARMS_PER_PEER], p, TRK_ROLE_LEECH, 0, &m),
      WS_ELIMIT);
  assert_int_equal(p->njoined, TRK_MAX_SWARMS_PER_PEER);
  assert_int_equal(trk_swarm_member_count(s[TRK_MAX_SWARMS_PER_PEER]), 0);
  /* Leaving one frees a place. */
  trk_swarm_leave(s[3], trk_swarm_member_of(s[3], p));
  assert_null(trk_swarm_member_of(s[3], p));
  assert_int_equal(
      trk_swarm_join(s[TRK_MAX_SWARMS_PER_PEER], p, TRK_ROLE_SEED, 0, &m), 0);
  assert_int_equal(trk_member_role(m), TRK_ROLE_SEED);
  for (uint32_t i = 0; i <= TRK_MAX_SWARMS_PER_PEER; i++)
    trk_swarm_free(s[i]);
  assert_int_equal(p->njoined, 0); /* freeing swarms drops join records */
  trk_peers_free(reg);
}

/* A peer's join slots grow as it joins (most nodes join a few releases):
 * a peer that joined nothing holds well under the 64 slots of the cap,
 * and growing up to the cap keeps every join record right. */
static void test_join_slots_grow_on_demand(void **state) {
  (void)state;
  enum { NPEERS = 256 };
  trk_peers_t *reg = trk_peers_new(NPEERS);
  trk_peer_t *p[NPEERS];
  char id[16];
  assert_non_null(reg);
  size_t before = heap_bytes();
  for (int i = 0; i < NPEERS; i++) {
    snprintf(id, sizeof(id), "n%d", i);
    trk_peer_info_t in = info_of(id);
    assert_int_equal(trk_peers_add(reg, &in, 0, &p[i]), 0);
  }
  size_t per_peer = (heap_bytes() - before) / NPEERS;
  assert_true(per_peer < sizeof(trk_peer_t) + TRK_MAX_SWARMS_PER_PEER *
                                                  sizeof(trk_peer_join_t) / 2);
  trk_swarm_t *s[TRK_MAX_SWARMS_PER_PEER];
  trk_member_t *m[TRK_MAX_SWARMS_PER_PEER], *other;
  for (uint32_t i = 0; i < TRK_MAX_SWARMS_PER_PEER; i++) {
    ws_hash_t d = fx_digest((uint8_t)i);
    s[i] = trk_swarm_new(&d, 10, 0);
    assert_non_null(s[i]);
    assert_int_equal(trk_swarm_join(s[i], p[0], TRK_ROLE_LEECH, 0, &m[i]), 0);
    assert_int_equal(trk_swarm_join(s[i], p[1], TRK_ROLE_SEED, 0, &other), 0);
  }
  assert_int_equal(p[0]->njoined, TRK_MAX_SWARMS_PER_PEER);
  for (uint32_t i = 0; i < TRK_MAX_SWARMS_PER_PEER; i++) {
    assert_ptr_equal(trk_swarm_member_of(s[i], p[0]), m[i]);
    assert_ptr_equal(trk_member_peer(trk_swarm_member_of(s[i], p[1])), p[1]);
  }
  for (uint32_t i = 0; i < TRK_MAX_SWARMS_PER_PEER; i++)
    trk_swarm_free(s[i]);
  assert_int_equal(p[0]->njoined, 0);
  trk_peers_free(reg);
}

static void test_swarm_new_bounds(void **state) {
  (void)state;
  ws_hash_t d = fx_digest(9);
  assert_null(trk_swarm_new(&d, 0, 0));
  assert_null(trk_swarm_new(&d, TRK_MAX_CHUNKS + 1u, 0));
  assert_null(trk_swarm_new(NULL, 5, 0));
  trk_swarm_t *s = trk_swarm_new(&d, 5, 0);
  assert_non_null(s);
  assert_int_equal(trk_swarm_set_uri(s, "s3://b/m/x\n"), WS_EUSAGE);
  assert_int_equal(trk_swarm_set_uri(s, "s3://b/m/x/"), 0);
  assert_string_equal(trk_swarm_uri(s), "s3://b/m/x/");
  char digest[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&d, digest);
  assert_string_equal(trk_swarm_digest_str(s), digest);
  trk_swarm_free(s);
  trk_swarm_free(NULL);
}

/* 20,000 peers in and out in random order: the node id index finds every
 * live peer and no removed one, ids stay unique, iteration stops at the
 * slots in use and sees every peer once. */
static void test_index_many_peers(void **state) {
  (void)state;
  enum { N = 20000 };
  trk_peers_t *reg = trk_peers_new(N);
  assert_non_null(reg);
  static trk_peer_id_t ids[N];
  char id[32];
  uint64_t r = 99;
  uint32_t live = 0;
  for (int round = 0; round < 3; round++) {
    for (uint32_t i = 0; i < N; i++) {
      if (ids[i] != 0)
        continue;
      snprintf(id, sizeof(id), "host-%05u.example", i);
      trk_peer_info_t in = info_of(id);
      trk_peer_t *p;
      assert_int_equal(trk_peers_add(reg, &in, 0, &p), 0);
      ids[i] = p->id;
      live++;
    }
    assert_int_equal(trk_peers_count(reg), live);
    assert_true(trk_peers_slots(reg) <= N);
    for (uint32_t i = 0; i < N; i++) {
      if (trk_select_rand(&r) % 3 != 0)
        continue;
      trk_peers_remove(reg, ids[i]);
      ids[i] = 0;
      live--;
    }
    for (uint32_t i = 0; i < N; i++) {
      snprintf(id, sizeof(id), "host-%05u.example", i);
      trk_peer_t *p = trk_peers_find_node(reg, id);
      if (ids[i] == 0) {
        assert_null(p);
      } else {
        assert_non_null(p);
        assert_int_equal(p->id, ids[i]);
      }
    }
    uint32_t cur = 0, n = 0;
    while (trk_peers_next(reg, &cur) != NULL)
      n++;
    assert_int_equal(n, live);
    assert_true(cur <= trk_peers_slots(reg));
  }
  trk_peers_free(reg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_get_remove_generations),
      cmocka_unit_test(test_peer_cap),
      cmocka_unit_test(test_validation),
      cmocka_unit_test(test_rate_limit),
      cmocka_unit_test(test_swarms_per_peer_cap),
      cmocka_unit_test(test_join_slots_grow_on_demand),
      cmocka_unit_test(test_swarm_new_bounds),
      cmocka_unit_test(test_index_many_peers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
