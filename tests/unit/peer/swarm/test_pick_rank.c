/* test_pick_rank.c - the picker's decision on one candidate chunk
 * (swarm/pick_rank.c), pure: which chunks may be asked (fresh, endgame
 * duplicate, not at all), and the order of candidates, fresh before
 * duplicate, held before live, small file before first chunk before the
 * rest, then rarest first, the first found keeping a tie; and that the
 * early answer before the availability is counted never skips a chunk
 * that would have won.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/tunables.h"
#include "fetch/file.h"
#include "swarm/pick_rank.h"

static void test_kind(void **state) {
  (void)state;
  peer_pick_chunk_t c = {.missing = true};
  assert_int_equal(peer_pick_kind(&c, false), PEER_PICK_FRESH);
  assert_int_equal(peer_pick_kind(&c, true), PEER_PICK_FRESH);
  /* In flight with one request out, bytes not flowing, not asked here:
   * a duplicate, unless a fresh candidate is known. */
  c = (peer_pick_chunk_t){.inflight = true, .nreq = 1};
  assert_int_equal(peer_pick_kind(&c, false), PEER_PICK_ENDGAME);
  assert_int_equal(peer_pick_kind(&c, true), PEER_PICK_NOT);
  c.nreq = PEER_ENDGAME_DUP_MAX;
  assert_int_equal(peer_pick_kind(&c, false), PEER_PICK_NOT);
  c = (peer_pick_chunk_t){.inflight = true, .nreq = 0}; /* origin has it */
  assert_int_equal(peer_pick_kind(&c, false), PEER_PICK_NOT);
  c = (peer_pick_chunk_t){.inflight = true, .nreq = 1, .rx_busy = true};
  assert_int_equal(peer_pick_kind(&c, false), PEER_PICK_NOT);
  c = (peer_pick_chunk_t){.inflight = true, .nreq = 1, .pending_here = true};
  assert_int_equal(peer_pick_kind(&c, false), PEER_PICK_NOT);
  c = (peer_pick_chunk_t){.nreq = 1}; /* done (neither missing nor out) */
  assert_int_equal(peer_pick_kind(&c, false), PEER_PICK_NOT);
}

static void test_order(void **state) {
  (void)state;
  peer_pick_rank_t best = {
      .dup = 0, .live = 0, .tier = PEER_TIER_REST, .avail = 5};
  peer_pick_rank_t c;
  assert_true(peer_pick_beats(&best, NULL));
  assert_true(peer_pick_may_beat(&best, NULL));
  c = (peer_pick_rank_t){1, 0, PEER_TIER_SMALL, 1}; /* a duplicate */
  assert_false(peer_pick_may_beat(&c, &best));
  assert_false(peer_pick_beats(&c, &best));
  c = (peer_pick_rank_t){0, 1, PEER_TIER_SMALL, 1}; /* live */
  assert_false(peer_pick_may_beat(&c, &best));
  c = (peer_pick_rank_t){0, 0, PEER_TIER_FIRST, 9}; /* a better tier */
  assert_true(peer_pick_may_beat(&c, &best));
  assert_true(peer_pick_beats(&c, &best));
  c = (peer_pick_rank_t){0, 0, PEER_TIER_REST, 4}; /* rarer */
  assert_true(peer_pick_may_beat(&c, &best));
  assert_true(peer_pick_beats(&c, &best));
  c.avail = 5; /* a tie keeps the first found */
  assert_false(peer_pick_beats(&c, &best));
  best.avail = 1; /* nothing is rarer than one holder: not even counted */
  c.avail = 0;
  assert_false(peer_pick_may_beat(&c, &best));
  /* A live chunk still beats a duplicate. */
  best = (peer_pick_rank_t){1, 0, PEER_TIER_SMALL, 1};
  c = (peer_pick_rank_t){0, 1, PEER_TIER_REST, 7};
  assert_true(peer_pick_may_beat(&c, &best));
  assert_true(peer_pick_beats(&c, &best));
}

/* Over every pair of ranks with availability >= 1 (a candidate is held
 * by at least the neighbour offering it): when may_beat says no, beats
 * says no too, so skipping the count never loses a winner. */
static void test_may_beat_is_safe(void **state) {
  (void)state;
  unsigned pairs = 0;
  for (int d1 = 0; d1 < 2; d1++)
    for (int l1 = 0; l1 < 2; l1++)
      for (int t1 = 0; t1 < PEER_TIER_LAST; t1++)
        for (uint32_t a1 = 1; a1 < 4; a1++)
          for (int d2 = 0; d2 < 2; d2++)
            for (int l2 = 0; l2 < 2; l2++)
              for (int t2 = 0; t2 < PEER_TIER_LAST; t2++)
                for (uint32_t a2 = 1; a2 < 4; a2++) {
                  peer_pick_rank_t best = {d1, l1, t1, a1};
                  peer_pick_rank_t c = {d2, l2, t2, a2};
                  if (!peer_pick_may_beat(&c, &best))
                    assert_false(peer_pick_beats(&c, &best));
                  /* A strict order: never both ways. */
                  assert_false(peer_pick_beats(&c, &best) &&
                               peer_pick_beats(&best, &c));
                  pairs++;
                }
  assert_int_equal(pairs, 36u * 36u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kind),
      cmocka_unit_test(test_order),
      cmocka_unit_test(test_may_beat_is_safe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
