/* daemon.h - p2pd's process object and what its parts share.
 *
 * peer_daemon_t owns the loop and everything on it: the chunk store, the S3
 * client, the local API server, the origin fetcher, the buffer pool, the
 * release and file tables, signals, and the lifecycle:
 *
 *   STARTING --store open--> RUNNING --SIGTERM--> STOPPING --> STOPPED
 *   STARTING --SIGTERM/open failure--> STOPPING
 *
 * STARTING: the API already answers /healthz (503 elsewhere) while a worker
 * opens the cache. RUNNING: /readyz 200, READY=1 sent to systemd. STOPPING:
 * the API is closed, S3 transfers are canceled (their chunks stay missing in
 * the partial's bitmap, so a restart refetches only those), worker jobs are
 * waited for, file handles and the store are closed on a worker. STOPPED:
 * every handle is closed and the loop returns.
 *
 * Thread: the loop thread, except the peer_work_fn bodies given to
 * peer_daemon_queue(), which run on libuv worker threads.
 */
#ifndef PEER_DAEMON_H
#define PEER_DAEMON_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "store.h"
#include "ws_err.h"
#include "ws_httpd.h"
#include "s3.h"

typedef struct peer_daemon_s peer_daemon_t;
typedef struct peer_release_s peer_release_t;
typedef struct peer_file_s peer_file_t;
typedef struct peer_files_s peer_files_t;
typedef struct peer_origin_s peer_origin_t;
typedef struct peer_bufpool_s peer_bufpool_t;
typedef struct peer_swarm_s peer_swarm_t;

typedef enum {
  PEER_DAEMON_STARTING,
  PEER_DAEMON_RUNNING,
  PEER_DAEMON_STOPPING,
  PEER_DAEMON_STOPPED,
  PEER_DAEMON_STATE_LAST
} peer_daemon_state_t;

/* Counters exported by /metrics that no library keeps for us. */
typedef struct {
  uint64_t chunks_verified;   /* chunks hashed OK and committed */
  uint64_t chunks_failed;     /* chunks whose hash did not match */
  uint64_t files_refetched;   /* whole-file digest failures refetched */
  uint64_t s3_bytes_chunks;   /* chunk bytes received from S3 */
  uint64_t peer_rx_bytes;     /* swarm mode: chunk payload bytes received */
  uint64_t peer_tx_bytes;     /* swarm mode: chunk payload bytes sent */
  uint64_t peers_banned;      /* senders of a chunk that failed its hash */
  uint64_t chunks_from_peers; /* chunks verified that came from peers */
  uint64_t chunks_discarded;  /* payloads not asked for (or lost races) */
  uint64_t rx_errors;         /* receives that failed here and closed a link */
  uint64_t chunks_served;     /* chunk uploads completed */
  uint64_t served_live;       /* of those, begun before we held the chunk */
  uint64_t requests_rejected; /* REJECTs we sent */
  uint64_t manifests_from_peers;
} peer_metrics_t;

struct peer_daemon_s {
  uv_loop_t loop;
  const peer_settings_t *cfg; /* borrowed from main() */
  peer_daemon_state_t state;
  ws_store_t *store; /* NULL until opened */
  ws_s3_t *s3;
  ws_httpd_t *api;
  peer_bufpool_t *pool;
  peer_origin_t *origin;
  peer_files_t *files;
  peer_swarm_t *swarm;      /* NULL when standalone (no --listen/--tracker) */
  peer_release_t *releases; /* list, newest first */
  unsigned active_releases; /* not READY/FAILED */
  uv_signal_t sig_term;
  uv_signal_t sig_int;
  uv_timer_t stop_timer; /* steps through STOPPING; runs only then */
  unsigned jobs;         /* worker jobs queued or running */
  int stop_step;         /* progress through STOPPING */
  int exit_code;
  peer_metrics_t metrics;
  uint64_t started_unix_ms;
};

/* Sets d up from cfg (borrowed; must outlive d): loop, signals, buffer
 * pool, S3 client, API listeners. Returns 0 or a negative error (logged). */
int peer_daemon_init(peer_daemon_t *d, const peer_settings_t *cfg) WS_MUST_USE;
/* Opens the store on a worker, runs the loop until STOPPED, frees what
 * init made. Returns the process exit status. */
int peer_daemon_run(peer_daemon_t *d);
/* Starts STOPPING (idempotent). exit_code is kept if the first. */
void peer_daemon_stop(peer_daemon_t *d, int exit_code);
/* 1 when the cache is open and requests may use the store. */
int peer_daemon_is_running(const peer_daemon_t *d);

/* Worker jobs: work runs on a libuv worker thread (blocking allowed);
 * after runs on the loop with status 0 or UV_ECANCELED. Jobs are counted
 * so that STOPPING waits for them. arg is borrowed by both. */
typedef void (*peer_work_fn)(void *arg);
typedef void (*peer_after_fn)(void *arg, int status);
int peer_daemon_queue(peer_daemon_t *d, peer_work_fn work, peer_after_fn after,
                      void *arg) WS_MUST_USE;

/* Wall clock in milliseconds since the epoch (for started_at). */
uint64_t peer_daemon_now_unix_ms(void);

/* api.c: registers the local API routes on srv. */
int peer_api_routes(peer_daemon_t *d, ws_httpd_t *srv) WS_MUST_USE;
/* api.c: pins (pin 1) or unpins rel on a worker and answers req (takes
 * it) as POST .../pin does. */
void peer_api_pin(peer_daemon_t *d, ws_httpd_req_t *req, peer_release_t *rel,
                  int pin);
/* seed.c: POST /api/v1/seed; takes req. */
void peer_seed_handle(peer_daemon_t *d, ws_httpd_req_t *req);
/* api.c: HTTP status for an error of a release or request. */
int peer_api_status_for(int err);

/* metrics.c: answers GET /metrics (reads the ledger on a worker). Takes
 * req. */
void peer_metrics_reply(peer_daemon_t *d, ws_httpd_req_t *req);

#endif
