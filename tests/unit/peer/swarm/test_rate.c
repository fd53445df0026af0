/* test_rate.c - the swarm's token bucket (swarm/rate.c) on a real libuv
 * loop: an unlimited bucket never waits, a fresh bucket lets its burst
 * through and then asks for the time its debt takes to repay, the wait it
 * names is enough (a uv timer of that length finds the bucket out of debt)
 * and not much more, the burst has a floor of one read buffer, and an idle
 * bucket does not save up more than its burst.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <uv.h>

#include "core/tunables.h"
#include "swarm/rate.h"

#define RATE (1024u * 1024u) /* bytes per second */

static void test_unlimited(void **state) {
  (void)state;
  peer_rate_t r;
  peer_rate_init(&r, 0);
  for (int i = 0; i < 100; i++)
    assert_int_equal(peer_rate_charge(&r, 1u << 30), 0);
  assert_int_equal(peer_rate_wait_ms(&r), 0);
}

static void test_burst_then_debt(void **state) {
  (void)state;
  peer_rate_t r;
  peer_rate_init(&r, RATE);
  uint64_t burst = (uint64_t)RATE * PEER_RATE_BURST_MS / 1000u;
  /* The burst goes through at once. */
  assert_int_equal(peer_rate_charge(&r, burst - 1024), 0);
  /* Half a second of debt beyond it: about 500 ms to wait. */
  uint64_t ms = peer_rate_charge(&r, 1024 + RATE / 2);
  assert_true(ms >= 480 && ms <= 501);
  assert_true(peer_rate_wait_ms(&r) > 0);
}

typedef struct {
  peer_rate_t r;
  uint64_t waited_ms;
  uint64_t left_ms; /* what the bucket said when the timer fired */
} wait_t;

static void wait_fired(uv_timer_t *t) {
  wait_t *w = t->data;
  w->left_ms = peer_rate_wait_ms(&w->r);
  uv_close((uv_handle_t *)t, NULL);
}

static void test_wait_is_enough(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_timer_t t;
  wait_t w;
  assert_int_equal(uv_loop_init(&loop), 0);
  peer_rate_init(&w.r, RATE);
  uint64_t burst = (uint64_t)RATE * PEER_RATE_BURST_MS / 1000u;
  uint64_t ms = peer_rate_charge(&w.r, burst + RATE / 10); /* 100 ms debt */
  assert_true(ms >= 90 && ms <= 101);
  uv_update_time(&loop);
  uint64_t t0 = uv_now(&loop);
  assert_int_equal(uv_timer_init(&loop, &t), 0);
  t.data = &w;
  w.left_ms = 12345;
  assert_int_equal(uv_timer_start(&t, wait_fired, ms, 0), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  w.waited_ms = uv_now(&loop) - t0;
  assert_int_equal(w.left_ms, 0); /* out of debt when the wait ended */
  assert_true(w.waited_ms >= ms);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_burst_floor(void **state) {
  (void)state;
  peer_rate_t r;
  peer_rate_init(&r, 1000); /* 250 bytes of burst by rate alone */
  /* One read buffer (64 KiB) still goes through without a wait. */
  assert_int_equal(peer_rate_charge(&r, 64u * 1024u), 0);
  /* The next byte is in debt: a wait of about a millisecond per byte. */
  uint64_t ms = peer_rate_charge(&r, 100);
  assert_true(ms >= 99 && ms <= 102);
}

static void idle_fired(uv_timer_t *t) {
  uv_close((uv_handle_t *)t, NULL);
}

static void test_idle_caps_at_burst(void **state) {
  (void)state;
  uv_loop_t loop;
  uv_timer_t t;
  peer_rate_t r;
  assert_int_equal(uv_loop_init(&loop), 0);
  peer_rate_init(&r, RATE);
  uint64_t burst = (uint64_t)RATE * PEER_RATE_BURST_MS / 1000u;
  /* Idle for longer than the burst lasts: no more than the burst saved. */
  assert_int_equal(uv_timer_init(&loop, &t), 0);
  assert_int_equal(uv_timer_start(&t, idle_fired, PEER_RATE_BURST_MS * 2, 0),
                   0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  uint64_t ms = peer_rate_charge(&r, burst + RATE / 5); /* 200 ms over */
  assert_true(ms >= 190 && ms <= 201);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unlimited),
      cmocka_unit_test(test_burst_then_debt),
      cmocka_unit_test(test_wait_is_enough),
      cmocka_unit_test(test_burst_floor),
      cmocka_unit_test(test_idle_caps_at_burst),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
