/* test_bufpool.c - the bounded buffer pool (core/bufpool.c): lending and
 * taking back, the peak, the FIFO of parked waiters (wake order, unwait,
 * kick, a waiter that parks again), and one round trip through a real
 * loop where buffers come back from worker jobs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/bufpool.h"
#include "core/workq.h"

typedef struct {
  peer_bufwait_t w; /* first: the callback casts back */
  int id;
  int *order;
  int *n;
  peer_bufpool_t *p;
  peer_buf_t *got; /* take a buffer when woken */
  int take;
} waiter_t;

static void waiter_cb(peer_bufwait_t *w) {
  waiter_t *x = (waiter_t *)w;
  x->order[(*x->n)++] = x->id;
  if (x->take)
    x->got = peer_bufpool_get(x->p);
}

static void waiter_init(waiter_t *x, peer_bufpool_t *p, int id, int *order,
                        int *n, int take) {
  memset(x, 0, sizeof(*x));
  x->w.cb = waiter_cb;
  x->id = id;
  x->order = order;
  x->n = n;
  x->p = p;
  x->take = take;
}

static void test_get_put_counts(void **state) {
  (void)state;
  peer_bufpool_t *p;
  peer_buf_t *b[4];
  assert_int_equal(peer_bufpool_new(1024, 4, &p), 0);
  assert_int_equal(peer_bufpool_available(p), 4);
  assert_int_equal(peer_bufpool_buf_bytes(p), 1024);
  for (int i = 0; i < 4; i++) {
    b[i] = peer_bufpool_get(p);
    assert_non_null(b[i]);
    assert_int_equal(b[i]->len, 0);
    assert_int_equal(b[i]->cap, 1024);
    memset(b[i]->data, i, 1024); /* each buffer is its own memory */
  }
  for (int i = 0; i < 4; i++)
    assert_int_equal((uint8_t)b[i]->data[1023], i);
  assert_int_equal(peer_bufpool_available(p), 0);
  assert_null(peer_bufpool_get(p));
  for (int i = 0; i < 4; i++)
    peer_bufpool_put(p, b[i]);
  assert_int_equal(peer_bufpool_available(p), 4);
  peer_bufpool_free(p);
}

static void test_bad_sizes_refused(void **state) {
  (void)state;
  peer_bufpool_t *p = NULL;
  assert_int_equal(peer_bufpool_new(0, 4, &p), WS_EUSAGE);
  assert_int_equal(peer_bufpool_new(1024, 0, &p), WS_EUSAGE);
  assert_null(p);
  peer_bufpool_free(NULL);
}

static void test_peak(void **state) {
  (void)state;
  peer_bufpool_t *p;
  assert_int_equal(peer_bufpool_new(64, 5, &p), 0);
  assert_int_equal(peer_bufpool_peak(p), 0);
  peer_buf_t *a = peer_bufpool_get(p), *b = peer_bufpool_get(p);
  peer_buf_t *c = peer_bufpool_get(p);
  peer_bufpool_put(p, b);
  peer_bufpool_put(p, c);
  b = peer_bufpool_get(p);
  assert_int_equal(peer_bufpool_peak(p), 3);
  peer_bufpool_put(p, a);
  peer_bufpool_put(p, b);
  assert_int_equal(peer_bufpool_peak(p), 3);
  assert_int_equal(peer_bufpool_available(p), 5);
  peer_bufpool_free(p);
}

static void test_wake_order_fifo(void **state) {
  (void)state;
  peer_bufpool_t *p;
  waiter_t w[3];
  int order[8], n = 0;
  assert_int_equal(peer_bufpool_new(64, 1, &p), 0);
  peer_buf_t *b = peer_bufpool_get(p);
  for (int i = 0; i < 3; i++) {
    waiter_init(&w[i], p, i + 1, order, &n, 1);
    peer_bufpool_wait(p, &w[i].w);
  }
  /* Parking twice does not queue twice. */
  peer_bufpool_wait(p, &w[0].w);
  for (int i = 0; i < 3; i++) {
    peer_bufpool_put(p, b); /* wakes the oldest, which takes it */
    assert_int_equal(n, i + 1);
    assert_int_equal(order[i], i + 1);
    assert_ptr_equal(w[i].got, b);
    assert_false(w[i].w.queued);
  }
  peer_bufpool_put(p, b); /* nobody parked */
  assert_int_equal(n, 3);
  assert_int_equal(peer_bufpool_available(p), 1);
  peer_bufpool_free(p);
}

static void test_unwait_removes(void **state) {
  (void)state;
  peer_bufpool_t *p;
  waiter_t w[3];
  int order[8], n = 0;
  assert_int_equal(peer_bufpool_new(64, 1, &p), 0);
  peer_buf_t *b = peer_bufpool_get(p);
  for (int i = 0; i < 3; i++) {
    waiter_init(&w[i], p, i + 1, order, &n, 0);
    peer_bufpool_wait(p, &w[i].w);
  }
  peer_bufpool_unwait(p, &w[1].w); /* the middle one */
  assert_false(w[1].w.queued);
  peer_bufpool_unwait(p, &w[1].w); /* not parked: no-op */
  peer_bufpool_unwait(p, &w[2].w); /* the tail */
  peer_bufpool_put(p, b);
  assert_int_equal(n, 1);
  assert_int_equal(order[0], 1);
  /* The tail was unlinked: a new waiter is the only one now. */
  b = peer_bufpool_get(p);
  peer_bufpool_wait(p, &w[2].w);
  peer_bufpool_put(p, b);
  assert_int_equal(n, 2);
  assert_int_equal(order[1], 3);
  peer_bufpool_free(p);
}

/* A woken waiter that took nothing leaves a buffer free; kick wakes as
 * many of the others as buffers are free. */
static void test_kick_wakes_up_to_available(void **state) {
  (void)state;
  peer_bufpool_t *p;
  waiter_t w[4];
  int order[8], n = 0;
  assert_int_equal(peer_bufpool_new(64, 2, &p), 0);
  peer_buf_t *a = peer_bufpool_get(p), *b = peer_bufpool_get(p);
  for (int i = 0; i < 4; i++) {
    waiter_init(&w[i], p, i + 1, order, &n, 0);
    peer_bufpool_wait(p, &w[i].w);
  }
  peer_bufpool_kick(p); /* nothing free: nobody woken */
  assert_int_equal(n, 0);
  peer_bufpool_put(p, a); /* wakes 1, which takes nothing */
  peer_bufpool_put(p, b); /* wakes 2, which takes nothing */
  assert_int_equal(n, 2);
  peer_bufpool_kick(p); /* two free: wakes 3 and 4 */
  assert_int_equal(n, 4);
  assert_int_equal(order[2], 3);
  assert_int_equal(order[3], 4);
  peer_bufpool_kick(p); /* nobody left */
  assert_int_equal(n, 4);
  peer_bufpool_free(p);
}

typedef struct {
  peer_bufwait_t w;
  peer_bufpool_t *p;
  int wakes;
} repark_t;

static void repark_cb(peer_bufwait_t *w) {
  repark_t *r = (repark_t *)w;
  r->wakes++;
  if (r->wakes == 1)
    peer_bufpool_wait(r->p, w); /* not yet: park again */
}

static void test_waiter_parks_again(void **state) {
  (void)state;
  peer_bufpool_t *p;
  repark_t r = {.w.cb = repark_cb};
  assert_int_equal(peer_bufpool_new(64, 1, &p), 0);
  r.p = p;
  peer_buf_t *b = peer_bufpool_get(p);
  peer_bufpool_wait(p, &r.w);
  peer_bufpool_put(p, b);
  assert_int_equal(r.wakes, 1);
  assert_true(r.w.queued);
  b = peer_bufpool_get(p);
  peer_bufpool_put(p, b);
  assert_int_equal(r.wakes, 2);
  assert_false(r.w.queued);
  peer_bufpool_free(p);
}

/* On a loop: three consumers share two buffers; each fills its buffer on
 * a worker and gives it back on the loop, which wakes the parked one. */
typedef struct {
  peer_bufwait_t w;
  peer_bufpool_t *p;
  peer_workq_t *q;
  peer_buf_t *b;
  int id, done;
} consumer_t;

static void consumer_work(void *arg) {
  consumer_t *c = arg;
  memset(c->b->data, c->id, c->b->cap);
  c->b->len = c->b->cap;
}

static void consumer_after(void *arg, int status) {
  consumer_t *c = arg;
  assert_int_equal(status, 0);
  assert_int_equal((uint8_t)c->b->data[0], c->id);
  peer_buf_t *b = c->b;
  c->b = NULL;
  c->done = 1;
  peer_bufpool_put(c->p, b);
}

static void consumer_start(consumer_t *c) {
  c->b = peer_bufpool_get(c->p);
  if (c->b == NULL) {
    peer_bufpool_wait(c->p, &c->w);
    return;
  }
  assert_int_equal(peer_workq_queue(c->q, consumer_work, consumer_after, c), 0);
}

static void consumer_wake(peer_bufwait_t *w) {
  consumer_start((consumer_t *)w);
}

static void test_loop_round_trip(void **state) {
  (void)state;
  uv_loop_t loop;
  peer_workq_t q;
  peer_bufpool_t *p;
  consumer_t c[3];
  assert_int_equal(uv_loop_init(&loop), 0);
  peer_workq_init(&q, &loop);
  assert_int_equal(peer_bufpool_new(4096, 2, &p), 0);
  for (int i = 0; i < 3; i++) {
    memset(&c[i], 0, sizeof(c[i]));
    c[i].w.cb = consumer_wake;
    c[i].p = p;
    c[i].q = &q;
    c[i].id = i + 1;
    consumer_start(&c[i]);
  }
  assert_true(c[2].w.queued);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  for (int i = 0; i < 3; i++)
    assert_int_equal(c[i].done, 1);
  assert_int_equal(peer_bufpool_available(p), 2);
  assert_int_equal(peer_bufpool_peak(p), 2);
  assert_int_equal(peer_workq_pending(&q), 0);
  peer_bufpool_free(p);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_put_counts),
      cmocka_unit_test(test_bad_sizes_refused),
      cmocka_unit_test(test_peak),
      cmocka_unit_test(test_wake_order_fifo),
      cmocka_unit_test(test_unwait_removes),
      cmocka_unit_test(test_kick_wakes_up_to_available),
      cmocka_unit_test(test_waiter_parks_again),
      cmocka_unit_test(test_loop_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
