/* workq.c - counted jobs on libuv's worker threads (see workq.h).
 *
 * Owns one small record per job, freed before its after-callback runs.
 */
#include "core/workq.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

typedef struct {
  uv_work_t w;
  peer_workq_t *q;
  peer_work_fn work;
  peer_after_fn after;
  void *arg;
} workq_job_t;

void peer_workq_init(peer_workq_t *q, uv_loop_t *loop) {
  q->loop = loop;
  q->jobs = 0;
}

static void workq_job_work(uv_work_t *w) {
  workq_job_t *j = w->data;
  j->work(j->arg);
}

static void workq_job_after(uv_work_t *w, int status) {
  workq_job_t *j = w->data;
  peer_workq_t *q = j->q;
  peer_after_fn after = j->after;
  void *arg = j->arg;
  free(j);
  assert(q->jobs > 0);
  q->jobs--;
  after(arg, status);
}

int peer_workq_queue(peer_workq_t *q, peer_work_fn work, peer_after_fn after,
                     void *arg) {
  workq_job_t *j = calloc(1, sizeof(*j));
  if (j == NULL)
    return -ENOMEM;
  j->q = q;
  j->work = work;
  j->after = after;
  j->arg = arg;
  j->w.data = j;
  int rc = uv_queue_work(q->loop, &j->w, workq_job_work, workq_job_after);
  if (rc != 0) {
    free(j);
    return rc;
  }
  q->jobs++;
  return 0;
}

unsigned peer_workq_pending(const peer_workq_t *q) {
  return q->jobs;
}
