/* metrics.c - GET /metrics in the Prometheus text format, and the
 * read-only --metrics listener that serves it (metrics.h).
 *
 * Every series is weightswarm_p2pd_*. A reply borrows the context
 * (counters and histograms, S3 client, pool, store), the swarm and the
 * release table; the listener owns its ws_httpd server. The ledger's
 * totals are read on a worker (ws_cache_stats may wait for the ledger
 * mutex while an eviction deletes files); everything else is loop state.
 * Per-release series carry model and digest labels for at most
 * PEER_METRICS_RELEASES_MAX releases (active ones first, then the newest);
 * the others are summed under model="other", digest="other", so a node
 * that saw thousands of releases still exports a bounded page. Model names
 * come from manifests: they are reduced to [A-Za-z0-9._:/-] and cut at
 * PEER_METRICS_LABEL_MAX bytes before they become label values.
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
#include "core/tunables.h"
#include "ws_log.h"

#ifndef WS_VERSION
#define WS_VERSION "unknown"
#endif

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
    {"weightswarm_p2pd_chunks_verified_total",
     "Chunks whose hash matched and were committed.", "counter",
     offsetof(peer_counters_t, chunks_verified)},
    {"weightswarm_p2pd_chunks_failed_total",
     "Chunks whose hash did not match (refetched).", "counter",
     offsetof(peer_counters_t, chunks_failed)},
    {"weightswarm_p2pd_files_refetched_total",
     "Whole-file digest mismatches refetched.", "counter",
     offsetof(peer_counters_t, files_refetched)},
    {"weightswarm_p2pd_peer_rx_bytes_total", "Chunk bytes received from peers.",
     "counter", offsetof(peer_counters_t, peer_rx_bytes)},
    {"weightswarm_p2pd_peer_tx_bytes_total", "Chunk bytes sent to peers.",
     "counter", offsetof(peer_counters_t, peer_tx_bytes)},
    {"weightswarm_p2pd_peer_tx_sendfile_bytes_total",
     "Of the chunk bytes sent to peers, those sent with sendfile (clear "
     "payloads, no copy through user memory).",
     "counter", offsetof(peer_counters_t, peer_tx_sendfile_bytes)},
    {"weightswarm_p2pd_peers_banned_total",
     "Peers banned (a chunk they sent failed its hash, or a manifest they "
     "sent was not the release).",
     "counter", offsetof(peer_counters_t, peers_banned)},
    {"weightswarm_p2pd_peer_auth_failures_total",
     "Neighbour connections closed because a frame or a sealed payload "
     "failed authentication after the handshake (altered on the path; "
     "nobody is banned).",
     "counter", offsetof(peer_counters_t, peer_auth_failures)},
    {"weightswarm_p2pd_peer_chunks_total",
     "Chunks received from peers and verified.", "counter",
     offsetof(peer_counters_t, chunks_from_peers)},
    {"weightswarm_p2pd_peer_chunks_served_total",
     "Chunks uploaded to peers completely.", "counter",
     offsetof(peer_counters_t, chunks_served)},
    {"weightswarm_p2pd_peer_chunks_served_live_total",
     "Of those, uploads that began while the chunk was still arriving, from "
     "S3 or a neighbour (sent as it arrived).",
     "counter", offsetof(peer_counters_t, served_live)},
    {"weightswarm_p2pd_peer_chunks_discarded_total",
     "Chunk payloads dropped (not asked for, canceled, lost an endgame "
     "race).",
     "counter", offsetof(peer_counters_t, chunks_discarded)},
    {"weightswarm_p2pd_peer_discarded_bytes_total",
     "Payload bytes of those dropped payloads: upload capacity the swarm "
     "spent for nothing.",
     "counter", offsetof(peer_counters_t, rx_discarded_bytes)},
    {"weightswarm_p2pd_peer_receive_errors_total",
     "Chunk receives that failed on this side (no buffer, write error) and "
     "closed the neighbour.",
     "counter", offsetof(peer_counters_t, rx_errors)},
    {"weightswarm_p2pd_peer_requests_rejected_total",
     "Chunk or manifest requests we refused (busy, not held).", "counter",
     offsetof(peer_counters_t, requests_rejected)},
    {"weightswarm_p2pd_peer_deadlines_missed_total",
     "Misses by peers: a chunk past its progress deadline, or requests "
     "left unanswered; the chunks were asked elsewhere.",
     "counter", offsetof(peer_counters_t, peer_deadline_misses)},
    {"weightswarm_p2pd_peers_dropped_slow_total",
     "Peers closed for missing progress deadlines, or for a chunk stalled "
     "in the middle of a payload in its file's endgame.",
     "counter", offsetof(peer_counters_t, peers_dropped_slow)},
    {"weightswarm_p2pd_chunks_cut_stalled_total",
     "Chunks from peers cut in their file's endgame: no byte for 1.5 s "
     "while another peer held them; they were asked elsewhere.",
     "counter", offsetof(peer_counters_t, chunks_cut_stalled)},
    {"weightswarm_p2pd_peers_evicted_total",
     "Idle peers closed to make room for a new connection.", "counter",
     offsetof(peer_counters_t, peers_evicted)},
    {"weightswarm_p2pd_peer_connections_refused_total",
     "Neighbour connections refused in their handshake: too many "
     "handshakes under way, every slot taken by a neighbour that is not "
     "idle, or a duplicate of a connection kept.",
     "counter", offsetof(peer_counters_t, peers_refused)},
    {"weightswarm_p2pd_peer_upload_stalls_total",
     "Peers closed because they held upload slots and read nothing.", "counter",
     offsetof(peer_counters_t, upload_stalls)},
    {"weightswarm_p2pd_http_deadline_closed_total",
     "HTTP clients closed with 408: request headers or body not complete "
     "in time (API and --metrics).",
     "counter", offsetof(peer_counters_t, http.deadline_closed)},
    {"weightswarm_p2pd_http_evicted_total",
     "HTTP connections closed to make room for a new one (the one reading "
     "longest).",
     "counter", offsetof(peer_counters_t, http.evicted)},
    {"weightswarm_p2pd_http_refused_total",
     "HTTP connections refused with 503: every slot busy.", "counter",
     offsetof(peer_counters_t, http.refused)},
    {"weightswarm_p2pd_http_unauthorized_total",
     "HTTP requests answered 401: no or wrong bearer token (--http).",
     "counter", offsetof(peer_counters_t, http.unauthorized)},
    {"weightswarm_p2pd_manifests_from_peers_total",
     "Release manifests received from peers.", "counter",
     offsetof(peer_counters_t, manifests_from_peers)},
    {"weightswarm_p2pd_release_stalls_total",
     "Times a fetching release went --stall-timeout without a byte from any "
     "source.",
     "counter", offsetof(peer_counters_t, releases_stalled)},
    {"weightswarm_p2pd_nodes_known",
     "Other nodes the trackers named, kept to swap with while they are down.",
     "gauge", offsetof(peer_counters_t, nodes_known)},
};

/* One histogram's samples (HELP and TYPE are the caller's): cumulative
 * buckets, +Inf, sum and count. label is "" or `name="value"`. */
static void metrics_hist(metrics_out_t *o, const char *name, const char *label,
                         const ws_hist_t *h) {
  const char *sep = label[0] != '\0' ? "," : "";
  for (unsigned i = 0; i < WS_HIST_BOUNDS; i++)
    metrics_put(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, label, sep,
                ws_hist_bound(i), (unsigned long long)ws_hist_cumulative(h, i));
  metrics_put(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label, sep,
              (unsigned long long)h->count);
  if (label[0] != '\0') {
    metrics_put(o, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, label, h->sum,
                name, label, (unsigned long long)h->count);
  } else {
    metrics_put(o, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name,
                (unsigned long long)h->count);
  }
}

static void metrics_head(metrics_out_t *o, const char *name, const char *type,
                         const char *help) {
  metrics_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metrics_histograms(const peer_counters_t *c,
                               const ws_s3_stats_t *s3, metrics_out_t *o) {
  static const char *const s3_name =
      "weightswarm_p2pd_s3_request_duration_seconds";
  static const char *const chunk_name =
      "weightswarm_p2pd_chunk_fetch_duration_seconds";
  static const char *const rel_name =
      "weightswarm_p2pd_prefetch_duration_seconds";
  metrics_head(o, s3_name, "histogram",
               "S3 requests from submit to completion (retries and body "
               "included).");
  metrics_hist(o, s3_name, "", &s3->latency);
  metrics_head(o, chunk_name, "histogram",
               "Chunks from being taken to verified, by source (origin = S3, "
               "peer = a neighbour).");
  metrics_hist(o, chunk_name, "source=\"origin\"", &c->chunk_origin_s);
  metrics_hist(o, chunk_name, "source=\"peer\"", &c->chunk_peer_s);
  metrics_head(o, rel_name, "histogram",
               "Releases from prefetch to their end state (ready or failed).");
  metrics_hist(o, rel_name, "state=\"ready\"", &c->release_ready_s);
  metrics_hist(o, rel_name, "state=\"failed\"", &c->release_failed_s);
}

/* ---- per-release series, bounded -------------------------------------- */

typedef struct {
  char model[PEER_METRICS_LABEL_MAX + 1];
  char digest[WS_DIGEST_STR_LEN + 1];
  peer_release_counts_t n;
  int ready;
} metrics_rel_t;

/* A model name from a manifest as a label value: safe characters only. */
static void metrics_label(char *dst, const char *src) {
  size_t k = 0;
  for (const char *p = src != NULL ? src : ""; *p != '\0'; p++) {
    char ch = *p;
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
             (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-' ||
             ch == ':' || ch == '/';
    if (k == PEER_METRICS_LABEL_MAX)
      break;
    dst[k++] = ok ? ch : '_';
  }
  if (k == 0)
    dst[k++] = '_'; /* model unknown yet (resolving) */
  dst[k] = '\0';
}

static void metrics_rel_add(metrics_rel_t *r, const peer_release_t *rel) {
  peer_release_counts_t n;
  peer_release_counts(rel, &n);
  r->n.bytes_total += n.bytes_total;
  r->n.bytes_done += n.bytes_done;
  r->n.from_s3 += n.from_s3;
  r->n.from_peers += n.from_peers;
  r->ready += peer_release_state(rel) == PEER_REL_READY;
  if (r->model[0] == '\0')
    metrics_label(r->model, n.model);
}

/* Fills rows[] (active releases first, then the newest others) and other
 * (the rest, summed); returns the number of rows. */
static size_t metrics_rel_pick(peer_releases_t *t, metrics_rel_t *rows,
                               metrics_rel_t *other, int *have_other) {
  size_t n = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (peer_release_t *r = peer_releases_first(t); r != NULL;
         r = peer_release_next(r)) {
      peer_release_state_t s = peer_release_state(r);
      int active = s != PEER_REL_READY && s != PEER_REL_FAILED;
      if (active != (pass == 0))
        continue;
      const char *ds = peer_release_digest_str(r);
      if (ds != NULL && n < PEER_METRICS_RELEASES_MAX) {
        memset(&rows[n], 0, sizeof(rows[n]));
        snprintf(rows[n].digest, sizeof(rows[n].digest), "%s", ds);
        metrics_rel_add(&rows[n++], r);
      } else {
        metrics_rel_add(other, r);
        *have_other = 1;
      }
    }
  }
  snprintf(other->model, sizeof(other->model), "other");
  snprintf(other->digest, sizeof(other->digest), "other");
  return n;
}

static void metrics_rel_family(metrics_out_t *o, const char *name,
                               const char *help, const metrics_rel_t *rows,
                               size_t n, size_t field) {
  metrics_head(o, name, "gauge", help);
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    if (field == SIZE_MAX)
      v = (uint64_t)rows[i].ready;
    else
      memcpy(&v, (const char *)&rows[i].n + field, sizeof(v));
    metrics_put(o, "%s{model=\"%s\",digest=\"%s\"} %llu\n", name, rows[i].model,
                rows[i].digest, (unsigned long long)v);
  }
}

static void metrics_releases(peer_releases_t *t, metrics_out_t *o) {
  metrics_rel_t rows[PEER_METRICS_RELEASES_MAX + 1];
  metrics_rel_t other;
  int have_other = 0;
  memset(&other, 0, sizeof(other));
  size_t n = metrics_rel_pick(t, rows, &other, &have_other);
  if (have_other)
    rows[n++] = other;
  metrics_rel_family(o, "weightswarm_p2pd_release_size_bytes",
                     "Bytes in the release's files.", rows, n,
                     offsetof(peer_release_counts_t, bytes_total));
  metrics_rel_family(o, "weightswarm_p2pd_release_done_bytes",
                     "Bytes of the release verified in the cache.", rows, n,
                     offsetof(peer_release_counts_t, bytes_done));
  metrics_rel_family(o, "weightswarm_p2pd_release_s3_bytes",
                     "Bytes of the release this node fetched from S3.", rows, n,
                     offsetof(peer_release_counts_t, from_s3));
  metrics_rel_family(o, "weightswarm_p2pd_release_peer_bytes",
                     "Bytes of the release this node got from peers.", rows, n,
                     offsetof(peer_release_counts_t, from_peers));
  metrics_rel_family(o, "weightswarm_p2pd_release_ready",
                     "1 when the release is ready (for model other: how many "
                     "are).",
                     rows, n, SIZE_MAX);
}

/* ---- the page ------------------------------------------------------------ */

static void metrics_swarm(peer_swarm_t *swarm, metrics_out_t *o) {
  peer_swarm_stats_t ss;
  peer_swarm_stats(swarm, &ss);
  metrics_counter(o, "weightswarm_p2pd_peer_neighbors", "Neighbours connected.",
                  "gauge", ss.neighbors);
  metrics_counter(o, "weightswarm_p2pd_peer_uploads",
                  "Chunk uploads in progress.", "gauge", ss.uploads);
  metrics_counter(o, "weightswarm_p2pd_peer_bans", "Bans in force.", "gauge",
                  ss.bans);
  metrics_counter(o, "weightswarm_p2pd_tracker_up",
                  "1 while the tracker link is up.", "gauge",
                  (uint64_t)ss.tracker_up);
  metrics_counter(o, "weightswarm_p2pd_releases_stalled",
                  "Releases with no byte from any source for --stall-timeout "
                  "now.",
                  "gauge", ss.stalled);
}

static void metrics_s3(const ws_s3_stats_t *s3, metrics_out_t *o) {
  metrics_counter(o, "weightswarm_p2pd_s3_bytes_total",
                  "Body bytes received from S3.", "counter", s3->bytes_rx);
  metrics_counter(o, "weightswarm_p2pd_s3_requests_total",
                  "HTTP requests sent to S3, retries included.", "counter",
                  s3->requests);
  metrics_counter(o, "weightswarm_p2pd_s3_retries_total",
                  "S3 requests that were retries.", "counter", s3->retries);
  metrics_counter(o, "weightswarm_p2pd_s3_stalls_total",
                  "S3 GET or HEAD attempts cut after receiving nothing for the "
                  "stall deadline, then retried.",
                  "counter", s3->stalls);
  metrics_counter(o, "weightswarm_p2pd_s3_failures_total",
                  "S3 requests that failed after retries.", "counter",
                  s3->failures);
  metrics_counter(o, "weightswarm_p2pd_s3_inflight", "S3 transfers in flight.",
                  "gauge", s3->in_flight);
}

static void metrics_cache(const ws_cache_stats_t *cs, metrics_out_t *o) {
  metrics_counter(o, "weightswarm_p2pd_cache_used_bytes",
                  "Bytes the cache ledger counts.", "gauge", cs->used);
  metrics_counter(o, "weightswarm_p2pd_cache_capacity_bytes",
                  "Configured cache capacity (0 = unlimited).", "gauge",
                  cs->capacity);
  metrics_counter(o, "weightswarm_p2pd_cache_evicted_bytes_total",
                  "Bytes evicted since start.", "counter", cs->evicted_bytes);
  metrics_counter(o, "weightswarm_p2pd_cache_blobs_hashed_total",
                  "Blobs hashed whole before use: no note of this cache "
                  "vouched for them as they are.",
                  "counter", cs->blobs_hashed);
  metrics_counter(o, "weightswarm_p2pd_cache_blobs_discarded_total",
                  "Blobs found not hashing to their name; removed and "
                  "fetched again.",
                  "counter", cs->blobs_discarded);
  metrics_counter(o, "weightswarm_p2pd_cache_chunks_rehashed_total",
                  "Chunks of resumed partials re-hashed (nothing this cache "
                  "wrote proved them).",
                  "counter", cs->chunks_rehashed);
  metrics_counter(o, "weightswarm_p2pd_cache_chunks_dropped_total",
                  "Of those, chunks that did not hash right; fetched again.",
                  "counter", cs->chunks_dropped);
  metrics_counter(o, "weightswarm_p2pd_cache_evictions_in_use_total",
                  "Times eviction passed over a release in use (a process "
                  "held the lock on its manifest.json).",
                  "counter", cs->evict_in_use);
}

static void metrics_render(const metrics_job_t *job, const ws_cache_stats_t *cs,
                           metrics_out_t *o) {
  const peer_counters_t *c = &job->ctx->counters;
  ws_s3_stats_t s3;
  ws_s3_stats_get(job->ctx->s3, &s3);
  metrics_head(o, "weightswarm_p2pd_build_info", "gauge",
               "Always 1; the version is a label.");
  metrics_put(o, "weightswarm_p2pd_build_info{version=\"%s\"} 1\n", WS_VERSION);
  metrics_counter(o, "weightswarm_p2pd_up", "1 while the cache is open.",
                  "gauge", (uint64_t)(job->ctx->running != 0));
  metrics_s3(&s3, o);
  for (size_t i = 0;
       i < sizeof(metrics_ctx_counters) / sizeof(metrics_ctx_counters[0]);
       i++) {
    uint64_t v;
    memcpy(&v, (const char *)c + metrics_ctx_counters[i].off, sizeof(v));
    metrics_counter(o, metrics_ctx_counters[i].name,
                    metrics_ctx_counters[i].help, metrics_ctx_counters[i].type,
                    v);
  }
  metrics_histograms(c, &s3, o);
  if (job->swarm != NULL)
    metrics_swarm(job->swarm, o);
  metrics_counter(o, "weightswarm_p2pd_buffers_peak",
                  "Most origin buffers lent at once.", "gauge",
                  peer_bufpool_peak(job->ctx->pool));
  if (cs != NULL)
    metrics_cache(cs, o);
  uint64_t by_state[PEER_REL_STATE_LAST] = {0};
  for (peer_release_t *r = peer_releases_first(job->releases); r != NULL;
       r = peer_release_next(r))
    by_state[peer_release_state(r)]++;
  /* RESOLVING and BEGINNING are both "resolving" in the API. */
  by_state[PEER_REL_RESOLVING] += by_state[PEER_REL_BEGINNING];
  metrics_head(o, "weightswarm_p2pd_releases", "gauge",
               "Releases known, by state.");
  for (int s = 0; s < PEER_REL_STATE_LAST; s++) {
    if (s == PEER_REL_BEGINNING)
      continue;
    metrics_put(o, "weightswarm_p2pd_releases{state=\"%s\"} %llu\n",
                peer_release_state_name((peer_release_state_t)s),
                (unsigned long long)by_state[s]);
  }
  metrics_releases(job->releases, o);
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
    ws_httpd_reply(job->req, 200, "text/plain; version=0.0.4; charset=utf-8",
                   o.buf, o.len);
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

/* ---- the --metrics listener --------------------------------------------- */

struct peer_metrics_s {
  peer_ctx_t *ctx;
  peer_swarm_t *swarm;
  peer_releases_t *releases;
  ws_httpd_t *srv; /* NULL once closed */
  void (*closed)(void *arg);
  void *closed_arg;
};

static void listener_metrics(ws_httpd_req_t *req, void *arg) {
  peer_metrics_t *m = arg;
  peer_metrics_reply(m->ctx, m->swarm, m->releases, req);
}

/* The same answers as the API's /healthz and /readyz. */
static void listener_healthz(ws_httpd_req_t *req, void *arg) {
  ws_httpd_reply(req, 200, "text/plain", "ok\n", 3);
}

static void listener_readyz(ws_httpd_req_t *req, void *arg) {
  peer_metrics_t *m = arg;
  if (m->ctx->running)
    ws_httpd_reply(req, 200, "text/plain", "ready\n", 6);
  else
    ws_httpd_reply(req, 503, "text/plain", "not ready\n", 10);
}

static int listener_start(peer_metrics_t *m, const char *host_port) {
  static const struct {
    const char *path;
    ws_httpd_handler_cb cb;
  } routes[] = {{"/metrics", listener_metrics},
                {"/healthz", listener_healthz},
                {"/readyz", listener_readyz}};
  ws_httpd_config_t hc = {
      .max_body_bytes = PEER_METRICS_MAX_BODY_BYTES,
      .max_conns = PEER_METRICS_MAX_CONNS,
      .idle_timeout_ms = PEER_METRICS_IDLE_TIMEOUT_MS,
      .name = "metrics",
      .tally = &m->ctx->counters.http,
  };
  int port = 0;
  int rc = ws_httpd_new(m->ctx->loop, &hc, &m->srv);
  for (size_t i = 0; rc == 0 && i < sizeof(routes) / sizeof(routes[0]); i++)
    rc = ws_httpd_route(m->srv, "GET", routes[i].path, WS_HTTPD_MATCH_EXACT,
                        routes[i].cb, m);
  if (rc == 0)
    rc = ws_httpd_listen_tcp(m->srv, host_port, &port);
  if (rc != 0)
    WS_LOGE("--metrics %s: %s", host_port, ws_strerror(rc));
  else
    WS_LOGI("metrics: listening on %s (port %d): /metrics /healthz /readyz",
            host_port, port);
  return rc;
}

int peer_metrics_new(peer_ctx_t *ctx, peer_releases_t *releases,
                     peer_swarm_t *swarm, const char *host_port,
                     peer_metrics_t **out) {
  peer_metrics_t *m = calloc(1, sizeof(*m));
  if (m == NULL)
    return -ENOMEM;
  m->ctx = ctx;
  m->swarm = swarm;
  m->releases = releases;
  *out = m;
  return listener_start(m, host_port);
}

static void listener_closed(ws_httpd_t *srv, void *arg) {
  peer_metrics_t *m = arg;
  m->srv = NULL;
  if (m->closed != NULL)
    m->closed(m->closed_arg);
}

void peer_metrics_close(peer_metrics_t *m, void (*closed)(void *arg),
                        void *arg) {
  m->closed = closed;
  m->closed_arg = arg;
  if (m->srv != NULL)
    ws_httpd_close(m->srv, listener_closed, m);
  else if (closed != NULL)
    closed(arg);
}

void peer_metrics_free(peer_metrics_t *m) {
  free(m);
}
