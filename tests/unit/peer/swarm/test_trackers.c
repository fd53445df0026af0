/* test_trackers.c - more than one tracker (swarm/trackers.c): the
 * --tracker list parses (spaces, IPv6, and refuses empty entries,
 * duplicates and too many), the rendezvous choice of a release's tracker
 * is stable (same answer every time and whatever the order of the list),
 * spreads releases evenly, and when the owner is gone the release goes to
 * the next in its order while releases of the other trackers stay put;
 * the move rules (grace for a blip, back to the owner once it is up for
 * the grace), and the links on a real loop against ports where no tracker
 * listens: a release is tracked on its first choice and its link counts
 * as down for the origin's fallback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <sodium.h>
#include <uv.h>

#include "swarm/trackers.h"

#define GRACE PEER_TRACKERS_MOVE_MS

static void base_cfg(peer_tracker_link_cfg_t *c) {
  peer_tracker_link_cfg_init(c);
  snprintf(c->node_id, sizeof(c->node_id), "%s", "unit");
}

static void test_parse(void **state) {
  (void)state;
  peer_tracker_link_cfg_t base, c[PEER_TRACKERS_MAX];
  char addr[PEER_TRACKERS_ADDR_MAX + 1];
  unsigned n = 99;
  base_cfg(&base);
  assert_int_equal(
      peer_trackers_parse("10.0.0.1:7000", &base, c, PEER_TRACKERS_MAX, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(c[0].host, "10.0.0.1");
  assert_int_equal(c[0].port, 7000);
  assert_string_equal(c[0].node_id, "unit"); /* the rest is base's */
  assert_int_equal(peer_trackers_parse(" trk-0.svc:7000 ,[::1]:7001", &base, c,
                                       PEER_TRACKERS_MAX, &n),
                   0);
  assert_int_equal(n, 2);
  assert_string_equal(c[0].host, "trk-0.svc");
  assert_string_equal(c[1].host, "::1");
  peer_trackers_addr(&c[1], addr);
  assert_string_equal(addr, "[::1]:7001");
  static const char *const bad[] = {
      "",
      "a:1,,b:2",
      "a:1,",
      ",a:1",
      "a:1,a:1",
      "a:1, a:1",
      "a:1,b",
      "a:0",
      "a:1,b:70000",
      "a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (peer_trackers_parse(bad[i], &base, c, PEER_TRACKERS_MAX, &n) !=
        WS_EUSAGE)
      fail_msg("accepted \"%s\"", bad[i]);
  }
}

static void digest_of(unsigned i, uint8_t d[32]) {
  uint8_t in[4] = {(uint8_t)i, (uint8_t)(i >> 8), (uint8_t)(i >> 16), 7};
  crypto_generichash(d, 32, in, sizeof(in), NULL, 0);
}

static const char *const k_addrs[] = {"10.0.0.1:7000", "10.0.0.2:7000",
                                      "10.0.0.3:7000", "10.0.0.4:7000"};

static void test_rank_stable(void **state) {
  (void)state;
  const char *rev[4] = {k_addrs[3], k_addrs[2], k_addrs[1], k_addrs[0]};
  for (unsigned i = 0; i < 200; i++) {
    uint8_t d[32], a[4], b[4], r[4];
    digest_of(i, d);
    peer_trackers_rank(k_addrs, 4, d, a);
    peer_trackers_rank(k_addrs, 4, d, b);
    assert_memory_equal(a, b, sizeof(a));
    /* Another node with the list in another order: the same trackers in
     * the same order. */
    peer_trackers_rank(rev, 4, d, r);
    for (unsigned k = 0; k < 4; k++)
      assert_string_equal(k_addrs[a[k]], rev[r[k]]);
    /* A permutation, highest score first. */
    for (unsigned k = 1; k < 4; k++)
      assert_true(peer_trackers_score(k_addrs[a[k - 1]], d) >=
                  peer_trackers_score(k_addrs[a[k]], d));
  }
}

static void test_rank_spreads(void **state) {
  (void)state;
  const unsigned N = 3000;
  for (unsigned n = 2; n <= 4; n++) {
    unsigned owned[4] = {0};
    for (unsigned i = 0; i < N; i++) {
      uint8_t d[32], o[4];
      digest_of(i, d);
      peer_trackers_rank(k_addrs, n, d, o);
      owned[o[0]]++;
    }
    for (unsigned k = 0; k < n; k++) {
      unsigned even = N / n;
      if (owned[k] < even * 85 / 100 || owned[k] > even * 115 / 100)
        fail_msg("%u trackers: tracker %u owns %u of %u", n, k, owned[k], N);
    }
  }
}

/* Without its owner the release goes to its second choice; releases owned
 * by the others keep their owner (only the lost tracker's releases move). */
static void test_next_when_one_is_gone(void **state) {
  (void)state;
  for (unsigned i = 0; i < 500; i++) {
    uint8_t d[32], all[4], rest[3];
    digest_of(i, d);
    peer_trackers_rank(k_addrs, 4, d, all);
    for (unsigned gone = 0; gone < 4; gone++) {
      const char *left[3];
      unsigned m = 0;
      for (unsigned k = 0; k < 4; k++) {
        if (k != gone)
          left[m++] = k_addrs[k];
      }
      peer_trackers_rank(left, 3, d, rest);
      const char *want = all[0] == gone ? k_addrs[all[1]] : k_addrs[all[0]];
      assert_string_equal(left[rest[0]], want);
    }
  }
}

static void test_choose(void **state) {
  (void)state;
  const uint8_t order[3] = {2, 0, 1}; /* owner 2, then 0, then 1 */
  peer_trackers_link_state_t l[3];
  uint64_t now = 100000;
  /* Start: every link still connecting: the owner. */
  for (unsigned i = 0; i < 3; i++)
    l[i] = (peer_trackers_link_state_t){.up = false, .since_ms = now - 10};
  assert_int_equal(peer_trackers_choose(order, 3, l, -1, now, GRACE), 2);
  /* All up: the owner, for a new release and an old one. */
  for (unsigned i = 0; i < 3; i++)
    l[i] = (peer_trackers_link_state_t){.up = true, .since_ms = now - GRACE};
  assert_int_equal(peer_trackers_choose(order, 3, l, -1, now, GRACE), 2);
  assert_int_equal(peer_trackers_choose(order, 3, l, 2, now, GRACE), 2);
  /* The owner's link drops: kept during the grace (a blip) ... */
  l[2] = (peer_trackers_link_state_t){.up = false, .since_ms = now - 100};
  assert_int_equal(peer_trackers_choose(order, 3, l, 2, now, GRACE), 2);
  /* ... then the next in its order; a new release goes there at once. */
  l[2].since_ms = now - GRACE;
  assert_int_equal(peer_trackers_choose(order, 3, l, 2, now, GRACE), 0);
  assert_int_equal(peer_trackers_choose(order, 3, l, -1, now, GRACE), 0);
  /* The second is gone too: the third. */
  l[0] = (peer_trackers_link_state_t){.up = false, .since_ms = now - GRACE};
  assert_int_equal(peer_trackers_choose(order, 3, l, 0, now, GRACE), 1);
  /* The owner is back, but only just: stays on the third; once the owner
   * has been up for the grace, back to it. */
  l[2] = (peer_trackers_link_state_t){.up = true, .since_ms = now - 100};
  assert_int_equal(peer_trackers_choose(order, 3, l, 1, now, GRACE), 1);
  l[2].since_ms = now - GRACE;
  assert_int_equal(peer_trackers_choose(order, 3, l, 1, now, GRACE), 2);
  /* Every link down: nothing moves (the origin's fallback acts). */
  for (unsigned i = 0; i < 3; i++)
    l[i] = (peer_trackers_link_state_t){.up = false, .since_ms = 0};
  assert_int_equal(peer_trackers_choose(order, 3, l, 0, now, GRACE), 0);
  assert_int_equal(peer_trackers_choose(order, 3, l, -1, now, GRACE), 2);
  /* One tracker: always it. */
  const uint8_t one[1] = {0};
  assert_int_equal(peer_trackers_choose(one, 1, l, 0, now, GRACE), 0);
  assert_int_equal(peer_trackers_choose(one, 1, l, -1, now, GRACE), 0);
}

static unsigned g_lost;
static void on_lost(void *arg, const uint8_t *digest) {
  (void)arg;
  (void)digest;
  g_lost++;
}

static void stop_loop(uv_timer_t *t) {
  uv_stop(t->loop);
}

/* Real links on a real loop, to loopback ports nobody listens on. */
static void test_links_without_trackers(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  int ports[2];
  uv_tcp_t t[2];
  for (unsigned i = 0; i < 2; i++) {
    struct sockaddr_in sa;
    int len = sizeof(sa);
    uv_ip4_addr("127.0.0.1", 0, &sa);
    assert_int_equal(uv_tcp_init(&loop, &t[i]), 0);
    assert_int_equal(uv_tcp_bind(&t[i], (struct sockaddr *)&sa, 0), 0);
    assert_int_equal(uv_tcp_getsockname(&t[i], (struct sockaddr *)&sa, &len),
                     0);
    ports[i] = ntohs(sa.sin_port);
  }
  for (unsigned i = 0; i < 2; i++)
    uv_close((uv_handle_t *)&t[i], NULL); /* closed: connects are refused */
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  char list[64];
  snprintf(list, sizeof(list), "127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1]);
  peer_tracker_link_cfg_t base, c[PEER_TRACKERS_MAX];
  unsigned n;
  base_cfg(&base);
  assert_int_equal(peer_trackers_parse(list, &base, c, PEER_TRACKERS_MAX, &n),
                   0);
  peer_trackers_cbs_t cbs = {.on_leases_lost = on_lost};
  peer_trackers_t *tr = NULL;
  assert_int_equal(peer_trackers_new(&loop, c, n, &cbs, &tr), 0);
  uint8_t d[32], order[2];
  char a0[PEER_TRACKERS_ADDR_MAX + 1], a1[PEER_TRACKERS_ADDR_MAX + 1];
  peer_trackers_addr(&c[0], a0);
  peer_trackers_addr(&c[1], a1);
  const char *addrs[2] = {a0, a1};
  digest_of(42, d);
  peer_trackers_rank(addrs, 2, d, order);
  assert_int_equal(peer_trackers_track(tr, d, 0, NULL, NULL, WS_SWARM_LEECH),
                   0);
  assert_string_equal(peer_trackers_owner(tr, d), addrs[order[0]]);
  uint64_t since = 0;
  assert_int_equal(peer_trackers_down_since(tr, d, &since), 1);
  unsigned total = 0;
  assert_int_equal(peer_trackers_up(tr, &total), 0);
  assert_int_equal(total, 2);
  /* Leases and HAVEs of an unknown release are refused, not sent. */
  uint8_t other[32];
  digest_of(43, other);
  assert_int_equal(peer_trackers_have(tr, other, 0), WS_ENOTFOUND);
  assert_int_equal(peer_trackers_lease_renew(tr, other, NULL, 0, NULL, 0),
                   WS_ENOTFOUND);
  /* Nothing is up anywhere: the release stays on its first choice. */
  uv_timer_t wait;
  uv_timer_init(&loop, &wait);
  uv_timer_start(&wait, stop_loop, GRACE + 500, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_string_equal(peer_trackers_owner(tr, d), addrs[order[0]]);
  assert_int_equal(peer_trackers_untrack(tr, d), 0);
  assert_null(peer_trackers_owner(tr, d));
  assert_int_equal(g_lost, 0); /* never up, so no leases lost */
  peer_trackers_close(tr);
  uv_close((uv_handle_t *)&wait, NULL);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  if (sodium_init() < 0)
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_rank_stable),
      cmocka_unit_test(test_rank_spreads),
      cmocka_unit_test(test_next_when_one_is_gone),
      cmocka_unit_test(test_choose),
      cmocka_unit_test(test_links_without_trackers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
