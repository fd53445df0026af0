/* test_upload_line.c - who gets our next free upload slot
 * (swarm/upload_line.c), on neighbour records linked as the set links
 * them:
 *
 * - with nobody in the line any neighbour may take a free slot; with one,
 *   only its head;
 * - neighbours join in order, PEER_UPLOAD_LINE_MAX at most, once each;
 *   leaving keeps the others' order;
 * - a seat is kept for each neighbour refused before (waiting, last
 *   refused within PEER_SLOT_HOLD_MS, not in the line yet), and that
 *   neighbour gets it; the seat is free again once the hold lapses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "swarm/upload_line.h"

#define NN (PEER_UPLOAD_LINE_MAX + 2)

typedef struct {
  peer_neighbors_t set;
  peer_neighbor_t n[NN];
} lfx_t;

static void lfx_init(lfx_t *f) {
  memset(f, 0, sizeof(*f));
  for (int i = 0; i < NN; i++) {
    f->n[i].set = &f->set;
    f->n[i].state = PEER_NEIGHBOR_READY;
    f->n[i].next = i + 1 < NN ? &f->n[i + 1] : NULL;
    f->n[i].prev = i > 0 ? &f->n[i - 1] : NULL;
  }
  f->set.head = &f->n[0];
  f->set.count = f->set.nready = NN;
}

static void test_turn_is_the_heads(void **state) {
  (void)state;
  lfx_t f;
  peer_upload_line_t l = {0};
  lfx_init(&f);
  uint64_t now = 100000;
  assert_null(peer_upload_line_head(&l));
  assert_true(peer_upload_line_turn(&l, &f.n[0]));
  assert_true(peer_upload_line_turn(&l, &f.n[1]));
  assert_int_equal(peer_upload_line_join(&l, &f.n[1], now), 1);
  assert_ptr_equal(peer_upload_line_head(&l), &f.n[1]);
  assert_true(peer_upload_line_turn(&l, &f.n[1]));
  assert_false(peer_upload_line_turn(&l, &f.n[0]));
  peer_upload_line_leave(&l, &f.n[1]);
  assert_false(f.n[1].in_line);
  assert_null(peer_upload_line_head(&l));
  assert_true(peer_upload_line_turn(&l, &f.n[0]));
}

static void test_order_bound_and_leave(void **state) {
  (void)state;
  lfx_t f;
  peer_upload_line_t l = {0};
  lfx_init(&f);
  uint64_t now = 100000;
  for (uint32_t i = 0; i < PEER_UPLOAD_LINE_MAX; i++)
    assert_int_equal(peer_upload_line_join(&l, &f.n[i], now), 1);
  /* Once each: joining again changes nothing. */
  assert_int_equal(peer_upload_line_join(&l, &f.n[1], now), 1);
  assert_int_equal(l.len, PEER_UPLOAD_LINE_MAX);
  /* Full: the next gets no seat. */
  assert_int_equal(peer_upload_line_join(&l, &f.n[NN - 1], now), 0);
  assert_false(f.n[NN - 1].in_line);
  /* One from the middle leaves: the order of the others holds. */
  peer_upload_line_leave(&l, &f.n[1]);
  assert_int_equal(l.len, PEER_UPLOAD_LINE_MAX - 1);
  assert_ptr_equal(l.q[0], &f.n[0]);
  assert_ptr_equal(l.q[1], &f.n[2]);
  /* Leaving when not in it changes nothing. */
  peer_upload_line_leave(&l, &f.n[1]);
  assert_int_equal(l.len, PEER_UPLOAD_LINE_MAX - 1);
  /* The head leaves: the next is the head. */
  peer_upload_line_leave(&l, &f.n[0]);
  assert_ptr_equal(peer_upload_line_head(&l), &f.n[2]);
  assert_int_equal(peer_upload_line_join(&l, &f.n[NN - 1], now), 1);
  assert_ptr_equal(l.q[l.len - 1], &f.n[NN - 1]);
}

static void test_seat_kept_for_the_refused(void **state) {
  (void)state;
  lfx_t f;
  peer_upload_line_t l = {0};
  lfx_init(&f);
  uint64_t now = 100000;
  /* Every seat but one taken. */
  for (uint32_t i = 0; i + 1 < PEER_UPLOAD_LINE_MAX; i++)
    assert_int_equal(peer_upload_line_join(&l, &f.n[i], now), 1);
  peer_neighbor_t *x = &f.n[NN - 2], *y = &f.n[NN - 1];
  /* x was refused before (the line was full): the last seat is x's. */
  peer_neighbor_slot_wait(x, now - 100);
  assert_int_equal(peer_upload_line_join(&l, y, now), 0);
  assert_int_equal(peer_upload_line_join(&l, x, now), 1);
  assert_int_equal(l.len, PEER_UPLOAD_LINE_MAX);
  /* Held for PEER_SLOT_HOLD_MS from the last refusal, no longer. */
  peer_upload_line_leave(&l, x);
  peer_upload_line_leave(&l, &f.n[0]);
  assert_int_equal(peer_upload_line_join(&l, y, now), 1); /* two seats free */
  peer_upload_line_leave(&l, y);
  assert_int_equal(peer_upload_line_join(&l, &f.n[0], now), 1);
  assert_int_equal(peer_upload_line_join(&l, y, now), 0);
  assert_int_equal(
      peer_upload_line_join(&l, y, now - 100 + PEER_SLOT_HOLD_MS + 1), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_turn_is_the_heads),
      cmocka_unit_test(test_order_bound_and_leave),
      cmocka_unit_test(test_seat_kept_for_the_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
