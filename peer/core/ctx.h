/* ctx.h - the small context every module of p2pd is given at creation:
 * the loop, the settings, the store, the S3 client, the buffer pool, the
 * worker queue and the counters that /metrics exports.
 *
 * The daemon (daemon.c) owns the context and everything it points to;
 * modules borrow it for their whole life and reach nothing else of the
 * daemon. store is NULL until the cache is open; running is 1 between the
 * store opening and the start of shutdown (no new work starts after).
 *
 * Thread: loop thread.
 */
#ifndef PEER_CORE_CTX_H
#define PEER_CORE_CTX_H

#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "core/bufpool.h"
#include "core/settings.h"
#include "core/workq.h"
#include "s3.h"
#include "store.h"
#include "ws_hist.h"
#include "ws_httpd.h"

/* Counters exported by /metrics that no library keeps for us. */
typedef struct {
  uint64_t chunks_verified; /* chunks hashed OK and committed */
  uint64_t chunks_failed;   /* chunks whose hash did not match */
  uint64_t files_refetched; /* whole-file digest failures refetched */
  uint64_t s3_bytes_chunks; /* chunk bytes received from S3 */
  uint64_t peer_rx_bytes;   /* swarm mode: chunk payload bytes received */
  uint64_t peer_tx_bytes;   /* swarm mode: chunk payload bytes sent */
  uint64_t peer_tx_sendfile_bytes; /* of those, sent with sendfile(2) */
  uint64_t peers_banned;           /* senders of a chunk that failed its hash */
  uint64_t peer_auth_failures;     /* frames/payloads failing auth after HS */
  uint64_t chunks_from_peers;      /* chunks verified that came from peers */
  uint64_t chunks_discarded;       /* payloads not asked for (or lost races) */
  uint64_t rx_discarded_bytes;     /* their bytes, read and thrown away */
  uint64_t rx_errors;         /* receives that failed here and closed a link */
  uint64_t chunks_served;     /* chunk uploads completed */
  uint64_t served_live;       /* of those, begun before we held the chunk */
  uint64_t requests_rejected; /* REJECTs we sent */
  uint64_t peer_deadline_misses; /* chunks/requests past their deadline */
  uint64_t peers_dropped_slow;   /* neighbours closed for missing them */
  uint64_t chunks_cut_stalled;   /* endgame chunks cut: no byte for a while */
  uint64_t peers_evicted;        /* idle neighbours closed for a newcomer */
  uint64_t peers_refused; /* connections refused: no room, or a duplicate */
  uint64_t upload_stalls; /* neighbours closed: uploads not read */
  uint64_t manifests_from_peers;
  uint64_t releases_stalled; /* stalls begun (swarm/swarm_stall.c) */
  uint64_t nodes_known;      /* gauge: the swarm's address book (addrbook.h) */
  /* Histograms (seconds): a chunk from being taken to verified, by source
   * (origin.c, swarm/download.c); a release from prefetch to READY or
   * FAILED (release.c). */
  ws_hist_t chunk_origin_s;
  ws_hist_t chunk_peer_s;
  ws_hist_t release_ready_s;
  ws_hist_t release_failed_s;
  /* The HTTP servers' defences against slow and anonymous clients, over
   * the API (socket, --http) and --metrics (ws_httpd_config_t tally). */
  ws_httpd_stats_t http;
} peer_counters_t;

typedef struct peer_ctx_s {
  uv_loop_t *loop;
  const peer_settings_t *cfg;
  ws_store_t *store; /* NULL until the cache is open */
  ws_s3_t *s3;
  peer_bufpool_t *pool;
  peer_workq_t workq;
  peer_counters_t counters;
  int running; /* store open and not stopping */
} peer_ctx_t;

/* Queues a worker job on the context's counted queue (workq.h). */
static inline int peer_ctx_queue(peer_ctx_t *ctx, peer_work_fn work,
                                 peer_after_fn after, void *arg) {
  return peer_workq_queue(&ctx->workq, work, after, arg);
}

/* Wall clock in milliseconds since the epoch (started_at, published_at). */
static inline uint64_t peer_now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#endif
