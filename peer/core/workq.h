/* workq.h - jobs for libuv's worker threads, counted.
 *
 * Everything that may block (disk I/O, hashing, fdatasync) runs as a job:
 * work runs on a worker thread, after on the loop thread with status 0 or
 * UV_ECANCELED. The queue counts the jobs queued or running so that the
 * daemon's shutdown can wait for them. arg is borrowed by both calls.
 *
 * Thread: loop thread (the work bodies on workers).
 */
#ifndef PEER_CORE_WORKQ_H
#define PEER_CORE_WORKQ_H

#include <uv.h>

#include "ws_err.h"

typedef void (*peer_work_fn)(void *arg);
typedef void (*peer_after_fn)(void *arg, int status);

typedef struct {
  uv_loop_t *loop;
  unsigned jobs; /* queued or running */
} peer_workq_t;

void peer_workq_init(peer_workq_t *q, uv_loop_t *loop);
/* Queues one job. 0, -ENOMEM or a libuv error (then nothing runs). */
int peer_workq_queue(peer_workq_t *q, peer_work_fn work, peer_after_fn after,
                     void *arg) WS_MUST_USE;
/* Jobs queued or running. */
unsigned peer_workq_pending(const peer_workq_t *q);

#endif
