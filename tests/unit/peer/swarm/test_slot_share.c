/* test_slot_share.c - the upload slots neighbours reading from S3 may hold
 * (swarm/slot_share.c, also linked by tools/sim), pure: their share of the
 * slots by their share of the ready neighbours, rounded down, at least
 * one, and every slot when all (or no one counted) read from S3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "swarm/slot_share.h"

static void test_share(void **state) {
  (void)state;
  /* 48 nodes, 16 neighbours, two of them reading from S3: one slot. */
  assert_int_equal(peer_slot_share_s3(6, 2, 16), 1);
  assert_int_equal(peer_slot_share_s3(6, 1, 16), 1); /* at least one */
  /* 24 nodes: about four of sixteen. */
  assert_int_equal(peer_slot_share_s3(6, 4, 16), 1);
  assert_int_equal(peer_slot_share_s3(6, 6, 16), 2);
  assert_int_equal(peer_slot_share_s3(6, 8, 16), 3);
  /* Small swarms, where most read from S3: nearly every slot. */
  assert_int_equal(peer_slot_share_s3(6, 6, 7), 5);
  assert_int_equal(peer_slot_share_s3(6, 3, 3), 6);
  assert_int_equal(peer_slot_share_s3(6, 5, 3), 6); /* counted apart */
  assert_int_equal(peer_slot_share_s3(6, 0, 0), 6);
  /* No overflow with large counts. */
  assert_int_equal(peer_slot_share_s3(4000000000u, 3, 4), 3000000000u);
}

static void test_monotonic(void **state) {
  (void)state;
  /* More readers never get fewer slots; never more than all of them. */
  for (unsigned slots = 1; slots <= 8; slots++)
    for (unsigned ready = 1; ready <= 40; ready++) {
      unsigned prev = 0;
      for (unsigned s3 = 0; s3 <= ready; s3++) {
        unsigned v = peer_slot_share_s3(slots, s3, ready);
        assert_true(v >= 1 && v <= slots);
        assert_true(v >= prev);
        prev = v;
      }
      assert_int_equal(prev, slots);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_share),
      cmocka_unit_test(test_monotonic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
