/* trk_json_dash.c - the dashboard's JSON (see trk_json_dash.h).
 *
 * Builds from trk_stats.h views on each request; nothing cached. Times in
 * the history are seconds relative to now (the tracker's clock is
 * monotonic; the page adds its own wall clock). Unknown values are null,
 * never NaN. Loop thread only.
 */
#include "trk_json_dash.h"

#include <errno.h>
#include <stdlib.h>

#include "trk_stats.h"

/* A number, or null when v < 0 (not known / not reached yet). */
static int add_opt(cJSON *o, const char *k, double v) {
  return v < 0.0 ? cJSON_AddNullToObject(o, k) != NULL
                 : cJSON_AddNumberToObject(o, k, v) != NULL;
}

int trk_json_dash_summary(cJSON *o, const trk_swarm_t *s, uint64_t now_ms) {
  trk_swarm_summary_t d;
  trk_stats_summary(s, now_ms, &d);
  cJSON *j = cJSON_AddObjectToObject(o, "dash");
  if (j == NULL ||
      !cJSON_AddNumberToObject(j, "size_bytes", (double)d.size_bytes) ||
      !cJSON_AddNumberToObject(j, "chunk_bytes", d.chunk_bytes) ||
      !cJSON_AddStringToObject(j, "rate_unit",
                               d.size_bytes > 0 ? "B/s" : "chunks/s") ||
      !cJSON_AddNumberToObject(j, "s3_bytes", (double)d.s3_bytes) ||
      !cJSON_AddNumberToObject(j, "peer_bytes", (double)d.peer_bytes) ||
      !add_opt(j, "s3_ratio", d.s3_ratio) ||
      !cJSON_AddNumberToObject(j, "done", d.done) ||
      !cJSON_AddNumberToObject(j, "fetching", d.fetching) ||
      !cJSON_AddNumberToObject(j, "stuck", d.stuck) ||
      !cJSON_AddNumberToObject(j, "seeding", d.seeds) ||
      !cJSON_AddNumberToObject(j, "left", d.left) ||
      !cJSON_AddNumberToObject(j, "fetchers", d.fetchers) ||
      !cJSON_AddNumberToObject(j, "rate_bps", d.rate_bps) ||
      !add_opt(j, "p50_s", d.p50_s) || !add_opt(j, "p99_s", d.p99_s) ||
      !cJSON_AddNumberToObject(j, "elapsed_s", d.elapsed_s) ||
      !cJSON_AddNumberToObject(j, "stuck_after_s", TRK_STATS_STUCK_MS / 1000.0))
    return -ENOMEM;
  return 0;
}

/* Stragglers first: stuck, then fetching and departed-before-done by
 * progress, then seeds, then done nodes slowest first. */
typedef struct {
  uint32_t row;
  int rank;
  double progress;
  double done_s;
} order_t;

static int rank_of(const trk_node_view_t *v) {
  switch (v->state) {
  case TRK_NODE_STUCK:
    return 0;
  case TRK_NODE_FETCHING:
    return 1;
  case TRK_NODE_LEFT:
    return v->progress < 1.0 ? 2 : 5;
  case TRK_NODE_SEED:
    return 3;
  default:
    return 4;
  }
}

static int cmp_order(const void *a, const void *b) {
  const order_t *x = a, *y = b;
  if (x->rank != y->rank)
    return x->rank - y->rank;
  if (x->progress != y->progress)
    return x->progress < y->progress ? -1 : 1;
  if (x->done_s != y->done_s)
    return x->done_s > y->done_s ? -1 : 1;
  return x->row < y->row ? -1 : x->row > y->row;
}

static int node_json(cJSON *arr, const trk_node_view_t *v) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return -ENOMEM;
  cJSON_AddItemToArray(arr, o);
  if (!cJSON_AddStringToObject(o, "node_id", v->node_id) ||
      !cJSON_AddStringToObject(o, "zone", v->zone) ||
      !cJSON_AddStringToObject(o, "state", trk_stats_state_name(v->state)) ||
      !cJSON_AddNumberToObject(o, "progress", v->progress) ||
      !cJSON_AddNumberToObject(o, "rate_bps", v->rate_bps) ||
      !cJSON_AddNumberToObject(o, "s3_bytes", (double)v->s3_bytes) ||
      !cJSON_AddNumberToObject(o, "peer_bytes", (double)v->peer_bytes) ||
      !cJSON_AddStringToObject(o, "bytes_from",
                               v->reported ? "report" : "leases") ||
      !cJSON_AddNumberToObject(o, "idle_s", v->idle_s) ||
      !add_opt(o, "done_s", v->done_s) ||
      !cJSON_AddStringToObject(o, "last_error", v->err) ||
      !cJSON_AddNumberToObject(o, "last_error_age_s", v->err_age_s))
    return -ENOMEM;
  return 0;
}

static int history_json(cJSON *o, const trk_swarm_t *s, uint64_t now_ms,
                        const order_t *ord, uint32_t nrows) {
  uint32_t n = trk_stats_hist_count(s);
  cJSON *h = cJSON_AddObjectToObject(o, "history");
  cJSON *t, *rate, *done, *fetching, *stuck, *nodes;
  if (h == NULL || (t = cJSON_AddArrayToObject(h, "t_s")) == NULL ||
      (rate = cJSON_AddArrayToObject(h, "rate")) == NULL ||
      (done = cJSON_AddArrayToObject(h, "done")) == NULL ||
      (fetching = cJSON_AddArrayToObject(h, "fetching")) == NULL ||
      (stuck = cJSON_AddArrayToObject(h, "stuck")) == NULL ||
      (nodes = cJSON_AddArrayToObject(h, "nodes")) == NULL)
    return -ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t d, f, k;
    uint64_t ti = trk_stats_hist_time(s, i);
    trk_stats_hist_states(s, i, &d, &f, &k);
    double rel = ti <= now_ms ? -(double)(now_ms - ti) / 1000.0 : 0.0;
    cJSON_AddItemToArray(t, cJSON_CreateNumber(rel));
    cJSON_AddItemToArray(rate, cJSON_CreateNumber(trk_stats_hist_rate(s, i)));
    cJSON_AddItemToArray(done, cJSON_CreateNumber(d));
    cJSON_AddItemToArray(fetching, cJSON_CreateNumber(f));
    cJSON_AddItemToArray(stuck, cJSON_CreateNumber(k));
  }
  uint32_t shown = 0;
  for (uint32_t r = 0; r < nrows && shown < TRK_STATS_CHART_NODES; r++) {
    if (ord[r].row >= trk_swarm_member_count(s))
      continue; /* departed: no series */
    trk_member_info_t mi;
    trk_swarm_member_info(s, ord[r].row, &mi);
    cJSON *no = cJSON_CreateObject(), *arr;
    if (no == NULL)
      return -ENOMEM;
    cJSON_AddItemToArray(nodes, no);
    if (!cJSON_AddStringToObject(no, "node_id", mi.peer->node_id) ||
        (arr = cJSON_AddArrayToObject(no, "rate")) == NULL)
      return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
      double v = trk_stats_hist_node_rate(s, ord[r].row, i);
      cJSON_AddItemToArray(arr, v < 0.0 ? cJSON_CreateNull()
                                        : cJSON_CreateNumber(v));
    }
    shown++;
  }
  return 0;
}

int trk_json_dash_detail(cJSON *o, const trk_swarm_t *s, uint64_t now_ms) {
  uint32_t n = trk_stats_node_count(s);
  int rc = -ENOMEM;
  order_t *ord = calloc(n + 1u, sizeof(*ord));
  cJSON *arr = cJSON_AddArrayToObject(o, "nodes");
  if (ord == NULL || arr == NULL)
    goto done;
  for (uint32_t i = 0; i < n; i++) {
    trk_node_view_t v;
    trk_stats_node(s, i, now_ms, &v);
    ord[i] = (order_t){.row = i,
                       .rank = rank_of(&v),
                       .progress = v.progress,
                       .done_s = v.done_s};
  }
  qsort(ord, n, sizeof(*ord), cmp_order);
  for (uint32_t i = 0; i < n; i++) {
    trk_node_view_t v;
    trk_stats_node(s, ord[i].row, now_ms, &v);
    if (node_json(arr, &v) < 0)
      goto done;
  }
  rc = history_json(o, s, now_ms, ord, n);

done:
  free(ord);
  return rc;
}
