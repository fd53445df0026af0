/* test_workq.c - the counted worker queue (core/workq.c) on a real loop:
 * work runs on a worker thread and after on the loop, the count follows
 * the jobs, a job queued from an after-callback is counted, many jobs run
 * once each, and jobs held behind a busy worker wait,
 * counted, and run in order. (The queue hands out no request to cancel:
 * UV_ECANCELED reaches after only from libuv itself.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/workq.h"

typedef struct {
  peer_workq_t *q;
  uv_thread_t loop_thread;
  int worked;
  int after;
  int status;
  int on_loop_thread; /* work ran on the loop's thread (must not) */
  unsigned pending_in_after;
  int requeue; /* after: queue one more job */
  int *order;
  int *n;
  int id;
} job_t;

static void job_work(void *arg) {
  job_t *j = arg;
  uv_thread_t self = uv_thread_self();
  j->on_loop_thread = uv_thread_equal(&self, &j->loop_thread);
  j->worked++;
}

static void job_after(void *arg, int status) {
  job_t *j = arg;
  j->after++;
  j->status = status;
  j->pending_in_after = peer_workq_pending(j->q);
  if (j->order != NULL)
    j->order[(*j->n)++] = j->id;
  if (j->requeue) {
    j->requeue = 0;
    assert_int_equal(peer_workq_queue(j->q, job_work, job_after, j), 0);
  }
}

static void test_counts_and_threads(void **state) {
  (void)state;
  uv_loop_t loop;
  peer_workq_t q;
  job_t jobs[6];
  assert_int_equal(uv_loop_init(&loop), 0);
  peer_workq_init(&q, &loop);
  assert_int_equal(peer_workq_pending(&q), 0);
  for (int i = 0; i < 6; i++) {
    memset(&jobs[i], 0, sizeof(jobs[i]));
    jobs[i].q = &q;
    jobs[i].loop_thread = uv_thread_self();
    assert_int_equal(peer_workq_queue(&q, job_work, job_after, &jobs[i]), 0);
    assert_int_equal(peer_workq_pending(&q), (unsigned)i + 1);
  }
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(peer_workq_pending(&q), 0);
  unsigned seen[7] = {0};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(jobs[i].worked, 1);
    assert_int_equal(jobs[i].after, 1);
    assert_int_equal(jobs[i].status, 0);
    assert_false(jobs[i].on_loop_thread);
    /* The job is no longer counted when its after runs. */
    assert_true(jobs[i].pending_in_after < 6);
    seen[jobs[i].pending_in_after]++;
  }
  for (int i = 0; i < 6; i++)
    assert_int_equal(seen[i], 1); /* 5, 4, ... 0 left, once each */
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_requeue_from_after(void **state) {
  (void)state;
  uv_loop_t loop;
  peer_workq_t q;
  job_t j;
  assert_int_equal(uv_loop_init(&loop), 0);
  peer_workq_init(&q, &loop);
  memset(&j, 0, sizeof(j));
  j.q = &q;
  j.loop_thread = uv_thread_self();
  j.requeue = 1;
  assert_int_equal(peer_workq_queue(&q, job_work, job_after, &j), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(j.worked, 2);
  assert_int_equal(j.after, 2);
  assert_int_equal(peer_workq_pending(&q), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* Many jobs at once: each runs once, its after sees its own arg, and the
 * count goes back to zero. */
static void test_many_jobs_each_once(void **state) {
  (void)state;
  enum { N = 200 };
  uv_loop_t loop;
  peer_workq_t q;
  job_t *jobs = calloc(N, sizeof(*jobs));
  assert_non_null(jobs);
  assert_int_equal(uv_loop_init(&loop), 0);
  peer_workq_init(&q, &loop);
  for (int i = 0; i < N; i++) {
    jobs[i].q = &q;
    jobs[i].loop_thread = uv_thread_self();
    assert_int_equal(peer_workq_queue(&q, job_work, job_after, &jobs[i]), 0);
  }
  assert_int_equal(peer_workq_pending(&q), N);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(jobs[i].worked, 1);
    assert_int_equal(jobs[i].after, 1);
  }
  assert_int_equal(peer_workq_pending(&q), 0);
  free(jobs);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- a busy worker ----------------------------------------------------- */

static uv_sem_t blocker_sem;
static void blocker_work(void *arg) {
  (void)arg;
  uv_sem_wait(&blocker_sem);
}

/* Jobs queued while the only worker thread is busy wait, counted, and run
 * in the order queued once it is free. */
static void test_jobs_wait_behind_busy_worker(void **state) {
  (void)state;
  uv_loop_t loop;
  peer_workq_t q;
  job_t blocker, j[3];
  int order[8], n = 0;
  assert_int_equal(uv_loop_init(&loop), 0);
  peer_workq_init(&q, &loop);
  assert_int_equal(uv_sem_init(&blocker_sem, 0), 0);
  memset(&blocker, 0, sizeof(blocker));
  blocker.q = &q;
  assert_int_equal(peer_workq_queue(&q, blocker_work, job_after, &blocker), 0);
  for (int i = 0; i < 3; i++) {
    memset(&j[i], 0, sizeof(j[i]));
    j[i].q = &q;
    j[i].loop_thread = uv_thread_self();
    j[i].order = order;
    j[i].n = &n;
    j[i].id = i + 1;
    assert_int_equal(peer_workq_queue(&q, job_work, job_after, &j[i]), 0);
  }
  assert_int_equal(peer_workq_pending(&q), 4);
  uv_sem_post(&blocker_sem);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  /* One worker thread: the jobs ran in the order queued. */
  assert_int_equal(n, 3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(order[i], i + 1);
  assert_int_equal(peer_workq_pending(&q), 0);
  uv_sem_destroy(&blocker_sem);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  setenv("UV_THREADPOOL_SIZE", "1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counts_and_threads),
      cmocka_unit_test(test_requeue_from_after),
      cmocka_unit_test(test_many_jobs_each_once),
      cmocka_unit_test(test_jobs_wait_behind_busy_worker),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
