/* metrics.c - GET /metrics in the Prometheus text format (metrics.h).
 *
 * Owns nothing long-lived; borrows the context (counters, S3 client, pool,
 * store), the swarm and the release table. The ledger's totals are read on
 * a worker (ws_cache_stats may wait for the ledger mutex while an eviction
 * deletes files); everything else is loop state.
 * Thread: loop thread; metrics_work on a worker.
 */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#include "core/bufpool.h"

typedef struct {
  peer_ctx_t *ctx;
  peer_swarm_t *swarm; /* NULL when standalone */
  peer_releases_t *releases;
  ws_httpd_req_t *req;
  ws_cache_stats_t cs;
  int have_cs;
} metrics_job_t;

typedef struct {
  char *buf;
  size_t len, cap;
  int oom;
} metrics_out_t;

static void metrics_put(metrics_out_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void metrics_put(metrics_out_t *o, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    /* The first call has no buffer yet: vsnprintf(NULL, 0) only counts. */
    int n = vsnprintf(o->buf != NULL ? o->buf + o->len : NULL, o->cap - o->len,
                      fmt, ap);
    va_end(ap);
    if (n < 0) {
      o->oom = 1;
      return;
    }
    if ((size_t)n < o->cap - o->len) {
      o->len += (size_t)n;
      return;
    }
    size_t cap = (o->cap + (size_t)n + 1) * 2;
    char *p = realloc(o->buf, cap);
    if (p == NULL) {
      o->oom = 1;
      return;
    }
    o->buf = p;
    o->cap = cap;
  }
}

static void metrics_counter(metrics_out_t *o, const char *name,
                            const char *help, const char *type, uint64_t v) {
  metrics_put(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name,
              type, name, (unsigned long long)v);
}

/* The context's counters, in the order /metrics lists them. */
static const struct {
  const char *name, *help, *type;
  size_t off; /* of the uint64_t in peer_counters_t */
} metrics_ctx_counters[] = {
    {"ws_p2pd_chunks_verified_total",
     "Chunks whose hash matched and were committed.", "counter",
     offsetof(peer_counters_t, chunks_verified)},
    {"ws_p2pd_chunks_failed_total",
     "Chunks whose hash did not match (refetched).", "counter",
     offsetof(peer_counters_t, chunks_failed)},
    {"ws_p2pd_files_refetched_total", "Whole-file digest mismatches refetched.",
     "counter", offsetof(peer_counters_t, files_refetched)},
    {"ws_p2pd_peer_rx_bytes_total", "Chunk bytes received from peers.",
     "counter", offsetof(peer_counters_t, peer_rx_bytes)},
    {"ws_p2pd_peer_tx_bytes_total", "Chunk bytes sent to peers.", "counter",
     offsetof(peer_counters_t, peer_tx_bytes)},
    {"ws_p2pd_peers_banned_total",
     "Peers banned (a chunk they sent failed its hash, or a manifest they "
     "sent was not the release).",
     "counter", offsetof(peer_counters_t, peers_banned)},
    {"ws_p2pd_peer_chunks_total", "Chunks received from peers and verified.",
     "counter", offsetof(peer_counters_t, chunks_from_peers)},
    {"ws_p2pd_peer_chunks_served_total", "Chunks uploaded to peers completely.",
     "counter", offsetof(peer_counters_t, chunks_served)},
    {"ws_p2pd_peer_chunks_served_live_total",
     "Of those, uploads that began while the chunk was still arriving from "
     "S3 (sent as it arrived).",
     "counter", offsetof(peer_counters_t, served_live)},
    {"ws_p2pd_peer_chunks_discarded_total",
     "Chunk payloads dropped (not asked for, canceled, lost an endgame "
     "race).",
     "counter", offsetof(peer_counters_t, chunks_discarded)},
    {"ws_p2pd_peer_receive_errors_total",
     "Chunk receives that failed on this side (no buffer, write error) and "
     "closed the neighbour.",
     "counter", offsetof(peer_counters_t, rx_errors)},
    {"ws_p2pd_peer_requests_rejected_total",
     "Chunk or manifest requests we refused (busy, not held).", "counter",
     offsetof(peer_counters_t, requests_rejected)},
    {"ws_p2pd_manifests_from_peers_total",
     "Release manifests received from peers.", "counter",
     offsetof(peer_counters_t, manifests_from_peers)},
};

static void metrics_render(const metrics_job_t *job, const ws_cache_stats_t *cs,
                           metrics_out_t *o) {
  const peer_counters_t *c = &job->ctx->counters;
  ws_s3_stats_t s3;
  ws_s3_stats_get(job->ctx->s3, &s3);
  metrics_counter(o, "ws_p2pd_s3_bytes_total", "Body bytes received from S3.",
                  "counter", s3.bytes_rx);
  metrics_counter(o, "ws_p2pd_s3_requests_total",
                  "HTTP requests sent to S3, retries included.", "counter",
                  s3.requests);
  metrics_counter(o, "ws_p2pd_s3_retries_total",
                  "S3 requests that were retries.", "counter", s3.retries);
  metrics_counter(o, "ws_p2pd_s3_failures_total",
                  "S3 requests that failed after retries.", "counter",
                  s3.failures);
  metrics_counter(o, "ws_p2pd_s3_inflight", "S3 transfers in flight.", "gauge",
                  s3.in_flight);
  for (size_t i = 0;
       i < sizeof(metrics_ctx_counters) / sizeof(metrics_ctx_counters[0]);
       i++) {
    uint64_t v;
    memcpy(&v, (const char *)c + metrics_ctx_counters[i].off, sizeof(v));
    metrics_counter(o, metrics_ctx_counters[i].name,
                    metrics_ctx_counters[i].help, metrics_ctx_counters[i].type,
                    v);
  }
  if (job->swarm != NULL) {
    peer_swarm_stats_t ss;
    peer_swarm_stats(job->swarm, &ss);
    metrics_counter(o, "ws_p2pd_peer_neighbors", "Neighbours connected.",
                    "gauge", ss.neighbors);
    metrics_counter(o, "ws_p2pd_peer_uploads", "Chunk uploads in progress.",
                    "gauge", ss.uploads);
    metrics_counter(o, "ws_p2pd_peer_bans", "Bans in force.", "gauge", ss.bans);
    metrics_counter(o, "ws_p2pd_tracker_up", "1 while the tracker link is up.",
                    "gauge", (uint64_t)ss.tracker_up);
  }
  metrics_counter(o, "ws_p2pd_buffers_peak",
                  "Most origin buffers lent at once.", "gauge",
                  peer_bufpool_peak(job->ctx->pool));
  if (cs != NULL) {
    metrics_counter(o, "ws_p2pd_cache_used_bytes",
                    "Bytes the cache ledger counts.", "gauge", cs->used);
    metrics_counter(o, "ws_p2pd_cache_capacity_bytes",
                    "Configured cache capacity (0 = unlimited).", "gauge",
                    cs->capacity);
    metrics_counter(o, "ws_p2pd_cache_evicted_bytes_total",
                    "Bytes evicted since start.", "counter", cs->evicted_bytes);
  }
  uint64_t by_state[PEER_REL_STATE_LAST] = {0};
  for (peer_release_t *r = peer_releases_first(job->releases); r != NULL;
       r = peer_release_next(r))
    by_state[peer_release_state(r)]++;
  /* RESOLVING and BEGINNING are both "resolving" in the API. */
  by_state[PEER_REL_RESOLVING] += by_state[PEER_REL_BEGINNING];
  metrics_put(o, "# HELP ws_p2pd_releases Releases known, by state.\n"
                 "# TYPE ws_p2pd_releases gauge\n");
  for (int s = 0; s < PEER_REL_STATE_LAST; s++) {
    if (s == PEER_REL_BEGINNING)
      continue;
    metrics_put(o, "ws_p2pd_releases{state=\"%s\"} %llu\n",
                peer_release_state_name((peer_release_state_t)s),
                (unsigned long long)by_state[s]);
  }
}

static void metrics_work(void *arg) {
  metrics_job_t *job = arg;
  if (job->ctx->store != NULL) {
    ws_cache_stats(ws_store_cache(job->ctx->store), &job->cs);
    job->have_cs = 1;
  }
}

static void metrics_after(void *arg, int status) {
  metrics_job_t *job = arg;
  metrics_out_t o = {0};
  metrics_render(job, job->have_cs && status == 0 ? &job->cs : NULL, &o);
  if (o.oom)
    ws_httpd_reply_error(job->req, 500, -ENOMEM, NULL);
  else
    ws_httpd_reply(job->req, 200, "text/plain; version=0.0.4", o.buf, o.len);
  free(o.buf);
  free(job);
}

void peer_metrics_reply(peer_ctx_t *ctx, peer_swarm_t *swarm,
                        peer_releases_t *releases, ws_httpd_req_t *req) {
  metrics_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL) {
    ws_httpd_reply_error(req, 503, -ENOMEM, NULL);
    return;
  }
  job->ctx = ctx;
  job->swarm = swarm;
  job->releases = releases;
  job->req = req;
  if (ctx->store == NULL || !ctx->running ||
      peer_ctx_queue(ctx, metrics_work, metrics_after, job) != 0)
    metrics_after(job, 0);
}
