/* test_hist.c - common/ws_hist: observations land in the first bucket whose
 * upper bound is >= the value (a value equal to a bound counts in it, as
 * Prometheus's le means), past the last bound only in +Inf, negative and
 * NaN values count as 0; cumulative counts, count and sum. Main thread.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "ws_hist.h"

static void test_bounds_ascend(void **state) {
  (void)state;
  for (unsigned i = 1; i < WS_HIST_BOUNDS; i++)
    assert_true(ws_hist_bound(i) > ws_hist_bound(i - 1));
  assert_true(ws_hist_bound(0) == 0.001);
  assert_true(ws_hist_bound(WS_HIST_BOUNDS - 1) == 3600.0);
}

static void test_observe_buckets(void **state) {
  (void)state;
  ws_hist_t h;
  memset(&h, 0, sizeof(h));
  ws_hist_observe(&h, 0.001); /* == first bound: first bucket */
  ws_hist_observe(&h, 0.3);   /* in (0.25, 0.5] */
  ws_hist_observe(&h, 5000);  /* past the last bound */
  ws_hist_observe(&h, -1);    /* counts as 0 */
  ws_hist_observe(&h, NAN);   /* counts as 0 */
  assert_int_equal(h.count, 5);
  assert_true(h.sum > 5000.301 - 1e-9 && h.sum < 5000.301 + 1e-9);
  assert_int_equal(ws_hist_cumulative(&h, 0), 3);
  unsigned i05 = 8; /* bound 0.5 */
  assert_true(ws_hist_bound(i05) == 0.5);
  assert_int_equal(ws_hist_cumulative(&h, i05 - 1), 3);
  assert_int_equal(ws_hist_cumulative(&h, i05), 4);
  assert_int_equal(ws_hist_cumulative(&h, WS_HIST_BOUNDS - 1), 4);
  assert_int_equal(ws_hist_cumulative(&h, WS_HIST_BOUNDS), 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bounds_ascend),
      cmocka_unit_test(test_observe_buckets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
