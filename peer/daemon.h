/* daemon.h - p2pd's process object: it makes every part, wires them
 * together and runs the lifecycle.
 *
 * peer_daemon_t owns the loop and everything on it: the context handed to
 * every module (core/ctx.h: settings, store, S3 client, buffer pool,
 * worker queue, counters), the files table, the origin fetcher, the swarm
 * (swarm mode), the release table, the local API, signals, and the
 * lifecycle:
 *
 *   STARTING --store open--> RUNNING --SIGTERM--> STOPPING --> STOPPED
 *   STARTING --SIGTERM/open failure--> STOPPING
 *
 * STARTING: the API already answers /healthz (503 elsewhere) while a worker
 * opens the cache. RUNNING: ctx.running is 1, /readyz 200, READY=1 sent to
 * systemd. STOPPING: the API is closed, S3 transfers are canceled (their
 * chunks stay missing in the partial's bitmap, so a restart refetches only
 * those), worker jobs are waited for, file handles and the store are
 * closed on a worker. STOPPED: every handle is closed and the loop returns.
 *
 * Thread: the loop thread (the cache is opened and closed on workers).
 */
#ifndef PEER_DAEMON_H
#define PEER_DAEMON_H

#include <stdint.h>
#include <uv.h>

#include "api.h"
#include "core/ctx.h"
#include "metrics.h"
#include "fetch/file.h"
#include "fetch/origin.h"
#include "release/release.h"
#include "swarm/swarm.h"
#include "ws_err.h"

typedef enum {
  PEER_DAEMON_STARTING,
  PEER_DAEMON_RUNNING,
  PEER_DAEMON_STOPPING,
  PEER_DAEMON_STOPPED,
  PEER_DAEMON_STATE_LAST
} peer_daemon_state_t;

typedef struct peer_daemon_s {
  uv_loop_t loop;
  const peer_settings_t *cfg; /* borrowed from main() */
  peer_daemon_state_t state;
  peer_ctx_t ctx; /* store NULL until opened; running while RUNNING */
  peer_files_t *files;
  peer_origin_t *origin;
  peer_swarm_t *swarm; /* NULL when standalone (no --listen/--tracker) */
  peer_swarm_hooks_t swarm_hooks;
  peer_releases_t *releases;
  peer_api_t *api;
  int api_open;            /* the API server is listening or closing */
  peer_metrics_t *metrics; /* --metrics listener, NULL when off */
  int metrics_open;        /* it is listening or closing */
  uv_signal_t sig_term;
  uv_signal_t sig_int;
  uv_timer_t stop_timer; /* steps through STOPPING; runs only then */
  int stop_step;         /* progress through STOPPING */
  int exit_code;
  uint64_t started_unix_ms;
} peer_daemon_t;

/* Sets d up from cfg (borrowed; must outlive d): loop, signals, buffer
 * pool, S3 client, files, origin, swarm, releases, API listeners. Returns
 * 0 or a negative error (logged). */
int peer_daemon_init(peer_daemon_t *d, const peer_settings_t *cfg) WS_MUST_USE;
/* Opens the store on a worker (peer_daemon_start), runs the loop until
 * STOPPED, frees what init made. Returns the process exit status. */
int peer_daemon_run(peer_daemon_t *d);
/* Only the first step of run: queues the cache open, after which the
 * daemon becomes RUNNING as the loop turns. For a caller that runs the
 * loop itself, a step at a time (tests/fuzz/fuzz_p2pd_http.c); such a
 * caller never gets run's frees. */
void peer_daemon_start(peer_daemon_t *d);
/* Starts STOPPING (idempotent). exit_code is kept if the first. */
void peer_daemon_stop(peer_daemon_t *d, int exit_code);

#endif
