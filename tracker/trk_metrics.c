/* trk_metrics.c - p2p-tracker's Prometheus text and its --metrics listener
 * (trk_metrics.h).
 *
 * The text is built fresh from live state on each request in a bounded
 * growable buffer (TRK_TEXT_MAX_BYTES); nothing is cached. Every series is
 * weightswarm_tracker_*. The listener owns its ws_httpd server; the tracker
 * and the peer server are borrowed. Model label values come from release
 * URIs (remote input): reduced to [A-Za-z0-9._:/-], cut at
 * TRK_METRICS_LABEL_MAX bytes. Loop thread only.
 */
#include "trk_metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trk_config.h"
#include "ws_log.h"

const char *trk_refusal_name(trk_refusal_t r) {
  static const char *const names[TRK_REFUSE_LAST] = {
      [TRK_REFUSE_NONE] = "none",
      [TRK_REFUSE_PEERS] = "max_peers",
      [TRK_REFUSE_MEMORY] = "max_memory",
      [TRK_REFUSE_MEMBERS] = "max_members",
      [TRK_REFUSE_RELEASES_PER_NODE] = "max_releases_per_node",
      [TRK_REFUSE_SWARMS] = "max_releases",
      [TRK_REFUSE_NODE_BOUND] = "node_id_bound",
      [TRK_REFUSE_PER_ADDR] = "max_nodes_per_addr",
      [TRK_REFUSE_CONNS] = "handshakes",
  };
  return r < TRK_REFUSE_LAST ? names[r] : "?";
}

#ifndef WS_VERSION
#define WS_VERSION "unknown"
#endif

#define PROM_CTYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct {
  char *p;
  size_t len;
  size_t cap;
  int err; /* first error; later appends are no-ops */
} text_t;

static void text_add(text_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void text_add(text_t *b, const char *fmt, ...) {
  va_list ap;
  if (b->err != 0)
    return;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->err = WS_EUSAGE;
      return;
    }
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap * 2u;
    while (cap - b->len <= (size_t)n)
      cap *= 2u;
    if (cap > TRK_TEXT_MAX_BYTES) {
      b->err = WS_ELIMIT;
      return;
    }
    char *np = realloc(b->p, cap);
    if (np == NULL) {
      b->err = -ENOMEM;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
}

static void metric_head(text_t *b, const char *name, const char *type,
                        const char *help) {
  text_add(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_one(text_t *b, const char *name, const char *type,
                       const char *help, double v) {
  metric_head(b, name, type, help);
  text_add(b, "%s %.17g\n", name, v);
}

static double age_s(uint64_t now_ms, uint64_t then_ms) {
  return now_ms > then_ms ? (double)(now_ms - then_ms) / 1000.0 : 0.0;
}

/* ---- per-swarm series, bounded ------------------------------------------ */

/* Per-swarm series: one HELP/TYPE, one sample per row (the exposition
 * format wants all samples of a metric together). */
typedef enum {
  SM_MEMBERS,
  SM_COMPLETE,
  SM_DOWNLOADERS,
  SM_CHUNKS_TOTAL,
  SM_CHUNKS_HELD,
  SM_CHUNKS_LEASED,
  SM_CHUNKS_NEED,
  SM_GRANTED,
  SM_COMPLETED,
  SM_EXPIRED,
  SM_RELEASED,
  SM_REVOKED,
  SM_REFETCH,
  SM_UNCONFIRMED,
  SM_DISTRUSTED,
  SM_CONFIRMED,
  SM_LAST
} swarm_metric_t;

static const struct {
  const char *name;
  const char *type;
  const char *help;
} swarm_metrics[SM_LAST] = {
    {"weightswarm_tracker_swarm_members", "gauge", "Peers in the swarm."},
    {"weightswarm_tracker_swarm_complete", "gauge",
     "Members holding every chunk."},
    {"weightswarm_tracker_swarm_downloaders", "gauge",
     "Leechers still missing data."},
    {"weightswarm_tracker_swarm_chunks", "gauge", "Chunks in the release."},
    {"weightswarm_tracker_swarm_chunks_held", "gauge",
     "Chunks some member holds."},
    {"weightswarm_tracker_swarm_chunks_leased", "gauge",
     "Chunks being fetched from the origin under a lease."},
    {"weightswarm_tracker_swarm_chunks_need", "gauge",
     "Chunks nobody holds and nobody fetches."},
    {"weightswarm_tracker_swarm_leases_granted_total", "counter",
     "Leases granted."},
    {"weightswarm_tracker_swarm_leases_completed_total", "counter",
     "Leases ended by the holder reporting the chunk."},
    {"weightswarm_tracker_swarm_leases_expired_total", "counter",
     "Leases ended by TTL without renew."},
    {"weightswarm_tracker_swarm_leases_released_total", "counter",
     "Leases given back or dropped with their holder."},
    {"weightswarm_tracker_swarm_leases_revoked_total", "counter",
     "Leases ended because another peer reported the chunk."},
    {"weightswarm_tracker_swarm_origin_refetch_total", "counter",
     "Leases for chunks that some peer had held before."},
    {"weightswarm_tracker_swarm_members_unconfirmed", "gauge",
     "Members whose have-claims count for nothing now (unconfirmed)."},
    {"weightswarm_tracker_swarm_claims_distrusted_total", "counter",
     "Times a member's have-claims stopped counting for lack of "
     "confirmation."},
    {"weightswarm_tracker_swarm_claims_confirmed_total", "counter",
     "Confirmations of a member's claims (HAVE \"f\" from another "
     "address)."},
};

typedef struct {
  char model[TRK_METRICS_LABEL_MAX + 1];
  char digest[WS_DIGEST_STR_LEN + 1];
  double v[SM_LAST];
} swarm_row_t;

static void swarm_values(const trk_swarm_stats_t *st, double *v) {
  v[SM_MEMBERS] = st->members;
  v[SM_COMPLETE] = st->complete;
  v[SM_DOWNLOADERS] = st->downloaders;
  v[SM_CHUNKS_TOTAL] = st->total_chunks;
  v[SM_CHUNKS_HELD] = st->chunks_held;
  v[SM_CHUNKS_LEASED] = st->chunks_leased;
  v[SM_CHUNKS_NEED] = st->chunks_need;
  v[SM_GRANTED] = (double)st->leases_granted;
  v[SM_COMPLETED] = (double)st->leases_completed;
  v[SM_EXPIRED] = (double)st->leases_expired;
  v[SM_RELEASED] = (double)st->leases_released;
  v[SM_REVOKED] = (double)st->leases_revoked;
  v[SM_REFETCH] = (double)st->origin_refetch;
  v[SM_UNCONFIRMED] = st->members_unconfirmed;
  v[SM_DISTRUSTED] = (double)st->claims_distrusted;
  v[SM_CONFIRMED] = (double)st->claims_confirmed;
}

/* The model of a release URI s3://bucket/.../MODEL/sha256-<hex>/: the
 * segment before the digest, as a safe label value ("unknown" if none). */
static void uri_model(const char *uri, char *dst) {
  const char *d = uri != NULL ? strstr(uri, "/sha256-") : NULL;
  const char *start = d;
  size_t k = 0;
  while (start != NULL && start > uri && start[-1] != '/')
    start--;
  for (const char *p = start; p != NULL && p < d; p++) {
    char ch = *p;
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
             (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-' ||
             ch == ':';
    if (k == TRK_METRICS_LABEL_MAX)
      break;
    dst[k++] = ok ? ch : '_';
  }
  if (k == 0)
    k = (size_t)snprintf(dst, TRK_METRICS_LABEL_MAX + 1, "unknown");
  dst[k] = '\0';
}

/* rows[] gets the swarms with downloaders first, then the others, up to
 * TRK_METRICS_SWARMS_MAX; the rest are summed in one "other" row, and so
 * is a swarm of a digest that has a larger one (announces that disagree on
 * the chunk count): one series per digest label. Returns the number of
 * rows. */
static size_t swarm_rows(const trk_tracker_t *t, swarm_row_t *rows) {
  uint32_t ns = trk_tracker_swarm_count(t);
  size_t n = 0;
  swarm_row_t *other = &rows[TRK_METRICS_SWARMS_MAX];
  int have_other = 0;
  memset(other, 0, sizeof(*other));
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < ns; i++) {
      const trk_swarm_t *s = trk_tracker_swarm_at(t, i);
      trk_swarm_stats_t st;
      double v[SM_LAST];
      trk_swarm_stats(s, &st);
      if ((st.downloaders > 0) != (pass == 0))
        continue;
      swarm_values(&st, v);
      if (n < TRK_METRICS_SWARMS_MAX &&
          trk_tracker_swarm_find(t, trk_swarm_digest(s)) == s) {
        uri_model(trk_swarm_uri(s), rows[n].model);
        snprintf(rows[n].digest, sizeof(rows[n].digest), "%s",
                 trk_swarm_digest_str(s));
        memcpy(rows[n++].v, v, sizeof(v));
        continue;
      }
      for (int m = 0; m < SM_LAST; m++)
        other->v[m] += v[m];
      have_other = 1;
    }
  }
  if (!have_other)
    return n;
  snprintf(other->model, sizeof(other->model), "other");
  snprintf(other->digest, sizeof(other->digest), "other");
  if (n < TRK_METRICS_SWARMS_MAX)
    rows[n] = *other; /* below the cap: a smaller swarm of a digest */
  return n + 1;
}

static int swarm_text(const trk_tracker_t *t, text_t *b) {
  swarm_row_t *rows = calloc(TRK_METRICS_SWARMS_MAX + 1u, sizeof(*rows));
  if (rows == NULL)
    return -ENOMEM;
  size_t n = swarm_rows(t, rows);
  for (int m = 0; m < SM_LAST; m++) {
    metric_head(b, swarm_metrics[m].name, swarm_metrics[m].type,
                swarm_metrics[m].help);
    for (size_t i = 0; i < n; i++)
      text_add(b, "%s{model=\"%s\",digest=\"%s\"} %.17g\n",
               swarm_metrics[m].name, rows[i].model, rows[i].digest,
               rows[i].v[m]);
  }
  free(rows);
  return 0;
}

/* ---- the page ------------------------------------------------------------ */

static void tracker_text(const trk_tracker_t *t, uint64_t now_ms, text_t *b) {
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  metric_head(b, "weightswarm_tracker_build_info", "gauge",
              "Always 1; the version is a label.");
  text_add(b, "weightswarm_tracker_build_info{version=\"%s\"} 1\n", WS_VERSION);
  metric_one(b, "weightswarm_tracker_peers", "gauge", "Connected peers.",
             st.peers);
  metric_one(b, "weightswarm_tracker_peers_max", "gauge",
             "Peer cap (--max-peers).", st.peers_max);
  metric_one(b, "weightswarm_tracker_members_max", "gauge",
             "Members one release takes (--max-members).", st.members_max);
  metric_one(b, "weightswarm_tracker_memory_bytes", "gauge",
             "Bytes counted against --max-memory: swarm state and peers.",
             (double)st.memory_bytes);
  metric_one(b, "weightswarm_tracker_memory_max_bytes", "gauge",
             "Memory cap (--max-memory).", (double)st.memory_max);
  metric_head(b, "weightswarm_tracker_refusals_total", "counter",
              "Nodes or announces refused at a cap, by cap.");
  for (int r = TRK_REFUSE_PEERS; r < TRK_REFUSE_CONNS; r++)
    text_add(b, "weightswarm_tracker_refusals_total{reason=\"%s\"} %.17g\n",
             trk_refusal_name((trk_refusal_t)r), (double)st.refused[r]);
  metric_one(b, "weightswarm_tracker_swarms", "gauge",
             "Releases listed, those ended included.", st.swarms);
  metric_one(b, "weightswarm_tracker_swarms_ended", "gauge",
             "Releases listed whose last node has left (kept a while).",
             st.swarms_ended);
  metric_one(b, "weightswarm_tracker_wanted", "gauge",
             "Releases in the cluster-wide wanted set.", st.wanted);
  metric_one(b, "weightswarm_tracker_state_bytes", "gauge",
             "Bytes of per-member swarm state.", (double)st.state_bytes);
  metric_one(b, "weightswarm_tracker_announces_total", "counter",
             "Announces accepted.", (double)st.announces);
  metric_one(b, "weightswarm_tracker_announces_limited_total", "counter",
             "Announces refused by the per-peer rate limit.",
             (double)st.announces_limited);
  metric_one(b, "weightswarm_tracker_announces_rejected_total", "counter",
             "Announces refused for bad input or caps.",
             (double)st.announces_rejected);
  metric_one(b, "weightswarm_tracker_haves_total", "counter",
             "Chunk completions reported.", (double)st.haves);
  metric_one(b, "weightswarm_tracker_leases_expired_total", "counter",
             "Origin leases expired (all swarms).", (double)st.leases_expired);
  metric_one(b, "weightswarm_tracker_manifest_readers_total", "counter",
             "Joiners of a release nobody held yet told to read its manifest "
             "from S3; the joiners after them are named them instead.",
             (double)st.manifest_readers);
  metric_one(b, "weightswarm_tracker_nodes_failed_total", "counter",
             "Nodes that left a release saying it failed there.",
             (double)st.nodes_failed);
  metric_one(b, "weightswarm_tracker_peers_replaced_total", "counter",
             "Connections replaced by a reconnect of the same node.",
             (double)st.peers_replaced);
  metric_one(b, "weightswarm_tracker_uptime_seconds", "gauge",
             "Seconds since the tracker started.",
             age_s(now_ms, st.started_ms));
  metric_one(b, "weightswarm_tracker_restart_hold_seconds", "gauge",
             "Seconds left of a restart's hold on S3 leases (0: none).",
             trk_tracker_hold_left_s(&st, now_ms));
}

/* The peer listener's own counters. */
static void server_text(const trk_server_t *srv, text_t *b) {
  trk_server_stats_t st;
  trk_server_stats(srv, &st);
  metric_one(b, "weightswarm_tracker_conns", "gauge", "Open peer connections.",
             st.conns);
  metric_one(b, "weightswarm_tracker_conns_handshaking", "gauge",
             "Connections not yet authenticated.", st.preauth);
  metric_one(b, "weightswarm_tracker_conns_accepted_total", "counter",
             "Connections accepted.", (double)st.accepted);
  metric_one(b, "weightswarm_tracker_conns_rejected_total", "counter",
             "Connections refused at a cap.", (double)st.rejected);
  metric_one(b, "weightswarm_tracker_auth_failures_total", "counter",
             "Failed handshakes or MACs.", (double)st.auth_failed);
  metric_one(b, "weightswarm_tracker_confirms_ignored_total", "counter",
             "HAVE \"f\" naming no member of the release at another "
             "address.",
             (double)st.confirms_ignored);
  metric_one(b, "weightswarm_tracker_leases_pushed_total", "counter",
             "Lease lists pushed after have-claims stopped counting.",
             (double)st.leases_pushed);
  metric_one(b, "weightswarm_tracker_protocol_errors_total", "counter",
             "Connections closed for protocol errors.",
             (double)st.protocol_errors);
  metric_one(b, "weightswarm_tracker_frames_in_total", "counter",
             "Frames received.", (double)st.frames_in);
  metric_one(b, "weightswarm_tracker_frames_out_total", "counter",
             "Frames sent.", (double)st.frames_out);
}

/* The HTTP servers' defences (common/ws_httpd.h). */
static void http_text(const ws_httpd_stats_t *st, text_t *b) {
  metric_one(b, "weightswarm_tracker_http_deadline_closed_total", "counter",
             "HTTP clients closed with 408: headers or body not complete in "
             "time.",
             (double)st->deadline_closed);
  metric_one(b, "weightswarm_tracker_http_evicted_total", "counter",
             "HTTP connections closed to make room for a new one.",
             (double)st->evicted);
  metric_one(b, "weightswarm_tracker_http_refused_total", "counter",
             "HTTP connections refused with 503: every slot busy.",
             (double)st->refused);
  metric_one(b, "weightswarm_tracker_http_unauthorized_total", "counter",
             "HTTP requests answered 401: no or wrong bearer token.",
             (double)st->unauthorized);
}

int trk_metrics_text(const trk_tracker_t *t, const trk_server_t *srv,
                     const ws_httpd_stats_t *http, uint64_t now_ms, char **out,
                     size_t *len) {
  text_t b = {.cap = 4096};
  b.p = malloc(b.cap);
  if (b.p == NULL)
    return -ENOMEM;
  b.p[0] = '\0';
  tracker_text(t, now_ms, &b);
  int rc = swarm_text(t, &b);
  if (rc == 0 && srv != NULL)
    server_text(srv, &b);
  if (rc == 0 && http != NULL)
    http_text(http, &b);
  if (rc == 0)
    rc = b.err;
  if (rc != 0) {
    free(b.p);
    return rc;
  }
  *out = b.p;
  *len = b.len;
  return 0;
}

void trk_metrics_reply(ws_httpd_req_t *req, const trk_tracker_t *t,
                       const trk_server_t *srv, const ws_httpd_stats_t *http,
                       uint64_t now_ms) {
  char *text = NULL;
  size_t len = 0;
  int rc = trk_metrics_text(t, srv, http, now_ms, &text, &len);
  if (rc < 0) {
    ws_httpd_reply_error(req, 500, rc, NULL);
    return;
  }
  ws_httpd_reply(req, 200, PROM_CTYPE, text, len);
  free(text);
}

/* ---- the --metrics listener --------------------------------------------- */

struct trk_metrics_http_s {
  uv_loop_t *loop;
  const trk_tracker_t *t;
  const trk_server_t *srv;
  ws_httpd_stats_t *tally;
  ws_httpd_t *httpd;
  trk_metrics_close_cb close_cb;
  void *close_arg;
};

static void l_metrics(ws_httpd_req_t *req, void *arg) {
  trk_metrics_http_t *m = arg;
  trk_metrics_reply(req, m->t, m->srv, m->tally, uv_now(m->loop));
}

/* The tracker is ready once its listeners are up: this one is the last
 * to start, so both probes answer 200 while it runs. */
static void l_ok(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  ws_httpd_reply(req, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

static void l_freed(ws_httpd_t *srv, void *arg) {
  trk_metrics_http_t *m = arg;
  (void)srv;
  if (m->close_cb != NULL)
    m->close_cb(m->close_arg);
  free(m);
}

int trk_metrics_http_new(uv_loop_t *loop, const trk_tracker_t *t,
                         const trk_server_t *srv, ws_httpd_stats_t *tally,
                         const char *host_port, int *bound_port,
                         trk_metrics_http_t **out) {
  static const struct {
    const char *path;
    ws_httpd_handler_cb cb;
  } routes[] = {{"/metrics", l_metrics}, {"/healthz", l_ok}, {"/readyz", l_ok}};
  ws_httpd_config_t cfg = {.max_body_bytes = TRK_METRICS_BODY_MAX,
                           .max_conns = TRK_METRICS_MAX_CONNS,
                           .name = "metrics",
                           .tally = tally};
  trk_metrics_http_t *m = calloc(1, sizeof(*m));
  if (m == NULL)
    return -ENOMEM;
  m->loop = loop;
  m->t = t;
  m->srv = srv;
  m->tally = tally;
  int rc = ws_httpd_new(loop, &cfg, &m->httpd);
  if (rc < 0) {
    free(m);
    return rc;
  }
  for (size_t i = 0; rc == 0 && i < sizeof(routes) / sizeof(routes[0]); i++)
    rc = ws_httpd_route(m->httpd, "GET", routes[i].path, WS_HTTPD_MATCH_EXACT,
                        routes[i].cb, m);
  if (rc == 0)
    rc = ws_httpd_listen_tcp(m->httpd, host_port, bound_port);
  if (rc < 0) {
    /* ws_httpd frees itself once its handles are closed; then so does m. */
    ws_httpd_close(m->httpd, l_freed, m);
    return rc;
  }
  *out = m;
  return 0;
}

void trk_metrics_http_close(trk_metrics_http_t *m, trk_metrics_close_cb cb,
                            void *arg) {
  m->close_cb = cb;
  m->close_arg = arg;
  ws_httpd_close(m->httpd, l_freed, m);
}
