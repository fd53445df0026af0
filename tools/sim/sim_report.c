/* sim_report.c - what ws-sim says about a run: samples of the links and
 * request slots while it runs, and the report at its end (docs/scale.md,
 * "Output").
 *
 * Every --sample-ms the rates of all flows are summed per node. A node
 * still fetching counts its downlink's use (payload rate over goodput x
 * line rate), its uplink's, its inbound transfers and how many of them are
 * paced by their sender's own source (a chunk still arriving there), its
 * request slots held and how many of those wait for a chunk still
 * arriving at the neighbour asked, and whether it could ask for anything
 * at all: "starved" when no neighbour offers a chunk it lacks that nobody
 * fetches for it, "capped" when some is offered but no request may go
 * (every slot held, or the neighbours offering it at their depth or
 * benched). Uplinks are also averaged over every node, done or not.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

/* A row of --series: t, downlink use of the nodes fetching, uplink use of
 * all, nodes fetching, and of those fetching: starved, every request slot
 * held, slots waiting for an upload slot there, downlink in paced flows. */
#define SIM_SERIES_COLS 8u

static void *xcalloc(size_t n, size_t sz) {
  void *p = calloc(n ? n : 1, sz);
  if (p == NULL) {
    fprintf(stderr, "ws-sim: out of memory (report)\n");
    exit(1);
  }
  return p;
}

/* Whether any ready neighbour of node offers a MISSING chunk (*any), and
 * whether one that offers one could be asked now (returned). */
static bool askable(const sim_t *s, uint32_t node, bool *any) {
  const sim_node_t *n = &s->nodes[node];
  bool can = false;
  *any = false;
  for (uint32_t k = 0; k < n->nconn && !can; k++) {
    const sim_conn_t *c = &s->conns[n->conns[k]];
    if (!c->up)
      continue;
    bool offers = false;
    for (uint32_t w = 0; w < s->words && !offers; w++) {
      uint64_t bits = c->view[w] & ~n->have[w];
      while (bits && !offers) {
        uint32_t g = w * 64u + (uint32_t)__builtin_ctzll(bits);
        bits &= bits - 1u;
        offers = n->state[g] == SIM_MISSING;
      }
    }
    if (!offers)
      continue;
    *any = true;
    can = n->nreqs < s->cfg.pol.reqs_max && c->nreqs < s->cfg.pol.depth &&
          s->now >= c->busy_until;
  }
  return can;
}

/* Where a request for g on c waits (sim_diag_t's rq_*: 0 wire, 1 its
 * sender's first buffer, 2 behind a held chunk, 3 upload slots, 4 mux,
 * 5 else). */
static int req_where(const sim_t *s, const sim_conn_t *c, uint32_t g) {
  const sim_node_t *srv = &s->nodes[c->server];
  bool held_busy = false;
  for (uint32_t i = 0; i < c->nups; i++) {
    const sim_flow_t *f = &s->flows[c->ups[i]];
    if (f->chunk == g)
      return f->unheaded ? 1 : 0;
    held_busy |= srv->state[f->chunk] == SIM_DONE;
  }
  bool queued = false;
  for (uint32_t k = 0; k < c->sq_len && !queued; k++)
    queued = c->sq[k] == g;
  if (!queued)
    return 0;
  if (c->nups == WS_MUX_MAX)
    return 4;
  uint32_t cap = c->nups == 0
                     ? s->cfg.pol.uploads_max
                     : s->cfg.pol.uploads_max - s->cfg.pol.uploads_spare;
  if (srv->uploads >= cap)
    return 3;
  if (srv->state[g] == SIM_DONE && held_busy)
    return 2;
  return 5;
}

/* One sample's rates, summed per node. */
typedef struct {
  double *in, *out, *paced, *by; /* by: 3 per node, SIM_BNECK_* */
  uint32_t *nin, *npaced, *opaced;
} sim_rates_t;

static void rates_sum(const sim_t *s, sim_rates_t *r) {
  uint32_t n = s->n;
  r->in = xcalloc(n, sizeof(double));
  r->out = xcalloc(n, sizeof(double));
  r->paced = xcalloc(n, sizeof(double));
  r->by = xcalloc(3u * (size_t)n, sizeof(double));
  r->nin = xcalloc(n, sizeof(uint32_t));
  r->npaced = xcalloc(n, sizeof(uint32_t));
  r->opaced = xcalloc(n, sizeof(uint32_t));
  for (uint32_t i = 0; i < s->nflows; i++) {
    const sim_flow_t *f = &s->flows[i];
    if (!f->alive || f->sent)
      continue;
    r->in[f->dst] += f->rate;
    r->by[3u * f->dst + f->bneck] += f->rate;
    r->nin[f->dst]++;
    if (f->src < n)
      r->out[f->src] += f->rate;
    if (f->kind == SIM_FLOW_PEER && f->paced) {
      r->paced[f->dst] += f->rate;
      r->npaced[f->dst]++;
      r->opaced[f->src]++;
    }
  }
}

static void rates_free(sim_rates_t *r) {
  free(r->in);
  free(r->out);
  free(r->paced);
  free(r->by);
  free(r->nin);
  free(r->npaced);
  free(r->opaced);
}

/* Adds node i (fetching) to the sums; row: this sample's sums for
 * --series (columns 1 and 4..7). */
static void sample_node(sim_t *s, const sim_rates_t *r, uint32_t i,
                        double *row) {
  const sim_node_t *x = &s->nodes[i];
  sim_diag_t *d = &s->diag;
  double down_cap = s->cfg.goodput * s->cfg.down_Bps;
  double up_cap = s->cfg.goodput * s->cfg.up_Bps;
  double rmax = s->cfg.pol.reqs_max, rq[6] = {0};
  uint32_t live = 0;
  for (uint32_t k = 0; k < x->nconn; k++) {
    const sim_conn_t *c = &s->conns[x->conns[k]];
    for (uint32_t q = 0; q < c->nreqs; q++) {
      live += s->nodes[c->server].state[c->reqs[q]] != SIM_DONE;
      rq[req_where(s, c, c->reqs[q])]++;
    }
  }
  bool any, can = askable(s, i, &any);
  d->n++;
  d->down += r->in[i] / down_cap;
  d->up += r->out[i] / up_cap;
  d->in_flows += r->nin[i];
  d->in_paced += r->npaced[i];
  d->paced_rate += r->paced[i] / down_cap;
  d->reqs += x->nreqs / rmax;
  d->reqs_full += x->nreqs >= rmax;
  d->reqs_queued_live += live / rmax;
  d->rq_wire += rq[0] / rmax;
  d->rq_unheaded += rq[1] / rmax;
  d->rq_behind += rq[2] / rmax;
  d->rq_slots += rq[3] / rmax;
  d->rq_mux += rq[4] / rmax;
  d->rq_other += rq[5] / rmax;
  for (uint32_t b = 0; b < 3; b++)
    d->in_by[b] += r->by[3u * i + b] / down_cap;
  d->starved += !any;
  d->nothing_free += any && !can;
  d->nbrs += x->nready;
  d->uploads += x->uploads;
  d->ups_paced += r->opaced[i];
  d->ups_slots_full +=
      x->uploads >= s->cfg.pol.uploads_max - s->cfg.pol.uploads_spare;
  row[1] += r->in[i] / down_cap;
  row[4] += !any;
  row[5] += x->nreqs >= rmax;
  row[6] += rq[3] / rmax;
  row[7] += r->paced[i] / down_cap;
}

static void series_add(sim_t *s, const double *row) {
  if (s->nseries == s->series_cap) {
    s->series_cap = s->series_cap ? s->series_cap * 2u : 256u;
    s->series =
        realloc(s->series, s->series_cap * SIM_SERIES_COLS * sizeof(double));
    if (s->series == NULL) {
      fprintf(stderr, "ws-sim: out of memory (series)\n");
      exit(1);
    }
  }
  memcpy(&s->series[SIM_SERIES_COLS * s->nseries++], row,
         SIM_SERIES_COLS * sizeof(double));
}

/* --progress: how far a long run is (it prints nothing else until it
 * ends); CPU time, not wall, since it runs niced beside other work. */
static void progress(const sim_t *s) {
  double held = 0;
  for (uint32_t i = 0; i < s->n; i++)
    held += s->nodes[i].nhave;
  fprintf(stderr,
          "ws-sim: t %.1f s, %u of %u nodes done, %.1f %% held, %llu "
          "events, %.0f s CPU\n",
          s->now, s->done_nodes, s->n,
          100.0 * held / ((double)s->n * s->chunks),
          (unsigned long long)s->events, (double)clock() / CLOCKS_PER_SEC);
  fflush(stderr);
}

void sim_sample(sim_t *s) {
  sim_rates_t r;
  if (s->cfg.progress)
    progress(s);
  double row[SIM_SERIES_COLS] = {s->now};
  double up_cap = s->cfg.goodput * s->cfg.up_Bps;
  rates_sum(s, &r);
  for (uint32_t i = 0; i < s->n; i++) {
    s->diag.up_all_n++;
    s->diag.up_all += r.out[i] / up_cap;
    row[2] += r.out[i] / up_cap / s->n;
    if (s->nodes[i].joined && !s->nodes[i].done) {
      row[3]++;
      sample_node(s, &r, i, row);
    }
  }
  rates_free(&r);
  if (!s->cfg.series)
    return;
  double fe = row[3] > 0 ? row[3] : 1;
  row[1] /= fe;
  for (uint32_t k = 4; k < SIM_SERIES_COLS; k++)
    row[k] /= fe;
  series_add(s, row);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(const double *v, uint32_t n, double p) {
  double r = p / 100.0 * (n - 1);
  uint32_t i = (uint32_t)r;
  return i + 1 < n ? v[i] + (v[i + 1] - v[i]) * (r - i) : v[n - 1];
}

static double per(double x, double n) {
  return n > 0 ? x / n : 0;
}

/* What the report prints, computed once. */
typedef struct {
  double F, t_min, t_all, p50, p90, p99, first, down_run;
  bool complete;
  uint32_t maxget;
  /* From a chunk's first GET to its first holder, half the nodes, all of
   * them (medians over the chunks), and to all at p90. */
  double spread[4];
  trk_swarm_stats_t st;
  double v[14], w[11]; /* util: the samples' means (see json_util) */
} sim_rep_t;

static void rep_spread(const sim_t *s, sim_rep_t *r) {
  /* Holders each mark of spread_at needs (sim_node_got). */
  const uint32_t need[SIM_SPREAD_COLS] = {0, 1, (s->n + 1u) / 2u, s->n};
  double *d = xcalloc(s->chunks, sizeof(double));
  for (int k = 1; k < SIM_SPREAD_COLS; k++) {
    uint32_t n = 0;
    for (uint32_t g = 0; g < s->chunks; g++) {
      const double *at = &s->spread_at[SIM_SPREAD_COLS * g];
      if (s->holders[g] >= need[k])
        d[n++] = at[k] - at[0];
    }
    qsort(d, n, sizeof(double), cmp_double);
    r->spread[k - 1] = n > 0 ? pct(d, n, 50) : -1.0;
    if (k == SIM_SPREAD_COLS - 1)
      r->spread[3] = n > 0 ? pct(d, n, 90) : -1.0;
  }
  free(d);
}

static void rep_compute(const sim_t *s, sim_rep_t *r) {
  const sim_cfg_t *c = &s->cfg;
  const sim_diag_t *d = &s->diag;
  double N = s->n, *t = xcalloc(s->n, sizeof(double));
  memset(r, 0, sizeof(*r));
  r->F = (double)s->total_bytes;
  r->t_min = fmax(fmax(r->F / c->origin_Bps, r->F / c->down_Bps),
                  N * r->F / (c->origin_Bps + N * c->up_Bps));
  for (uint32_t i = 0; i < s->n; i++)
    t[i] = s->nodes[i].done ? s->nodes[i].done_s : NAN;
  for (uint32_t g = 0; g < s->chunks; g++)
    if (s->fetches_of[g] > r->maxget)
      r->maxget = s->fetches_of[g];
  qsort(t, s->n, sizeof(double), cmp_double);
  r->complete = s->done_nodes == s->n;
  r->t_all = r->complete ? t[s->n - 1] : -1.0;
  r->p50 = r->complete ? pct(t, s->n, 50) : -1.0;
  r->p90 = r->complete ? pct(t, s->n, 90) : -1.0;
  r->p99 = r->complete ? pct(t, s->n, 99) : -1.0;
  r->first = r->complete ? t[0] : -1.0;
  free(t);
  rep_spread(s, r);
  if (trk_tracker_swarm_count(s->trk) > 0)
    trk_swarm_stats(trk_tracker_swarm_at(s->trk, 0), &r->st);
  /* Each node's mean downlink use over its own fetch (bytes in, wasted
   * ones too, over goodput x rate x its time). */
  for (uint32_t i = 0; r->complete && i < s->n; i++) {
    const sim_node_t *x = &s->nodes[i];
    r->down_run +=
        x->rx_bytes /
        (c->goodput * c->down_Bps * fmax(x->done_s - x->start_s, 1e-9)) / N;
  }
  const double v[] = {per(d->down, d->n),
                      per(d->up, d->n),
                      per(d->up_all, d->up_all_n),
                      per(d->in_flows, d->n),
                      per(d->in_paced, d->n),
                      per(d->paced_rate, d->n),
                      per(d->reqs, d->n),
                      per(d->reqs_full, d->n),
                      per(d->reqs_queued_live, d->n),
                      per(d->starved, d->n),
                      per(d->nothing_free, d->n),
                      per(d->nbrs, d->n),
                      per(d->uploads, d->n),
                      r->down_run};
  const double w[] = {per(d->rq_wire, d->n),       per(d->rq_unheaded, d->n),
                      per(d->rq_behind, d->n),     per(d->rq_slots, d->n),
                      per(d->rq_mux, d->n),        per(d->rq_other, d->n),
                      per(d->in_by[0], d->n),      per(d->in_by[1], d->n),
                      per(d->in_by[2], d->n),      per(d->ups_paced, d->n),
                      per(d->ups_slots_full, d->n)};
  memcpy(r->v, v, sizeof(v));
  memcpy(r->w, w, sizeof(w));
}

static const char *tf(bool b) {
  return b ? "true" : "false";
}

static void json_head(const sim_t *s, const sim_rep_t *r) {
  const sim_cfg_t *c = &s->cfg;
  const sim_policy_t *p = &c->pol;
  printf("{\"nodes\": %u, \"bytes\": %.0f, \"chunks\": %u, \"chunk_bytes\": "
         "%llu, \"up_mbit\": %g, \"down_mbit\": %g, \"origin_mbit\": %g, "
         "\"rtt_us\": %g, \"ttfb_ms\": %g, \"goodput\": %g, "
         "\"quantum_us\": %g, \"rto_per_mib\": %g, \"rto_ms\": %g, ",
         s->n, r->F, s->chunks, (unsigned long long)c->chunk_bytes,
         c->up_Bps * 8 / 1e6, c->down_Bps * 8 / 1e6, c->origin_Bps * 8 / 1e6,
         c->rtt_s * 1e6, c->ttfb_s * 1e3, c->goodput, c->quantum_s * 1e6,
         c->rto_per_mib, c->rto_s * 1e3);
  printf("\"policy\": {\"reqs_max\": %u, \"pipeline_depth\": %u, "
         "\"uploads_max\": %u, \"uploads_spare\": %u, \"upload_line\": %u, "
         "\"max_neighbors\": %u, "
         "\"dial_share\": %u, \"forward_piece_kib\": %g, \"forward_ms\": %g, "
         "\"forward\": %s, "
         "\"deadlines\": %s, \"first\": %s, \"fill_dial\": %s, "
         "\"depth_spread\": %s}, "
         "\"frame_queue\": %s, "
         "\"origin_inflight\": %u, \"stripes\": %u, ",
         p->reqs_max, p->depth, p->uploads_max, p->uploads_spare, p->line_max,
         p->max_nbrs, p->dial_share, p->piece_bytes / 1024, p->forward_s * 1e3,
         tf(p->forward), tf(p->deadlines), tf(p->first), tf(p->fill_dial),
         tf(p->depth_spread), tf(c->frame_queue), c->origin_inflight,
         c->stripes);
  printf("\"complete\": %s, \"verified_nodes\": %u, \"t_all_s\": %.4f, "
         "\"t_min_s\": %.4f, \"ratio\": %.4f, \"t_p50_s\": %.4f, "
         "\"t_p90_s\": %.4f, \"t_p99_s\": %.4f, \"t_first_s\": %.4f, ",
         tf(r->complete), s->verified_nodes, r->t_all, r->t_min,
         r->complete ? r->t_all / r->t_min : -1.0, r->p50, r->p90, r->p99,
         r->first);
  printf("\"spread_s\": {\"first\": %.4f, \"half\": %.4f, \"all\": %.4f, "
         "\"all_p90\": %.4f}, ",
         r->spread[0], r->spread[1], r->spread[2], r->spread[3]);
}

static void json_counts(const sim_t *s, const sim_rep_t *r) {
  printf("\"s3_bytes\": %llu, \"s3_ratio\": %.4f, \"s3_gets\": %llu, "
         "\"s3_gets_per_chunk_max\": %u, \"leases_granted\": %llu, "
         "\"leases_expired\": %llu, \"claims_confirmed\": %llu, "
         "\"leases_pushed\": %llu, ",
         (unsigned long long)s->s3_bytes, (double)s->s3_bytes / r->F,
         (unsigned long long)s->origin_gets, r->maxget,
         (unsigned long long)r->st.leases_granted,
         (unsigned long long)r->st.leases_expired,
         (unsigned long long)s->confirms, (unsigned long long)s->regrants);
  printf("\"peer_bytes\": %llu, \"dup_bytes\": %llu, \"wasted_bytes\": "
         "%.0f, \"chunks_served\": %llu, \"chunks_served_live\": %llu, "
         "\"headers_discarded\": %llu, \"rejects\": %llu, "
         "\"rejects_not_held\": %llu, \"deadline_misses\": %llu, "
         "\"neighbours_dropped_slow\": %llu, \"request_timeouts\": %llu, "
         "\"dials\": %llu, \"connections_refused\": %llu, "
         "\"neighbours_replaced\": %llu, \"rto_stalls\": %llu, "
         "\"origin_done_s\": %.4f, ",
         (unsigned long long)s->peer_bytes, (unsigned long long)s->dup_bytes,
         s->wasted_bytes, (unsigned long long)s->served,
         (unsigned long long)s->served_live, (unsigned long long)s->discarded,
         (unsigned long long)s->rejects, (unsigned long long)s->not_held,
         (unsigned long long)s->deadline_misses,
         (unsigned long long)s->dropped_slow,
         (unsigned long long)s->req_timeouts, (unsigned long long)s->dials,
         (unsigned long long)s->conns_refused, (unsigned long long)s->replaced,
         (unsigned long long)s->rto_stalls, s->origin_done_s);
}

static void json_util(const sim_rep_t *r) {
  const double *v = r->v, *w = r->w;
  printf("\"util\": {\"down\": %.4f, \"up\": %.4f, \"up_all\": %.4f, "
         "\"in_flows\": %.3f, \"in_paced\": %.3f, \"down_paced\": %.4f, "
         "\"reqs_held\": %.4f, \"reqs_full\": %.4f, \"reqs_arriving\": %.4f, "
         "\"starved\": %.4f, \"capped\": %.4f, \"neighbours\": %.3f, "
         "\"uploads\": %.3f, \"down_run\": %.4f, ",
         v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
         v[11], v[12], v[13]);
  printf("\"reqs_wire\": %.4f, \"reqs_first_buffer\": %.4f, "
         "\"reqs_behind_held\": %.4f, \"reqs_upload_slots\": %.4f, "
         "\"reqs_mux\": %.4f, \"reqs_other\": %.4f, "
         "\"down_by_sender_up\": %.4f, \"down_by_own_down\": %.4f, "
         "\"down_by_source\": %.4f, \"uploads_paced\": %.3f, "
         "\"uploads_at_cap\": %.4f}, ",
         w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10]);
}

static void json_lists(const sim_t *s) {
  if (s->cfg.series) {
    printf("\"series\": [");
    for (uint32_t i = 0; i < s->nseries; i++) {
      const double *q = &s->series[SIM_SERIES_COLS * i];
      printf("%s[%.3f, %.4f, %.4f, %.0f, %.4f, %.4f, %.4f, %.4f]",
             i ? ", " : "", q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]);
    }
    printf("], ");
  }
  if (s->cfg.hosts) {
    printf("\"t_hosts_s\": [");
    for (uint32_t i = 0; i < s->n; i++)
      printf("%s%.3f", i ? ", " : "",
             s->nodes[i].done ? s->nodes[i].done_s : -1.0);
    printf("], ");
  }
}

static void text_head(const sim_t *s, const sim_rep_t *r) {
  const sim_cfg_t *c = &s->cfg;
  const sim_policy_t *p = &c->pol;
  printf("nodes %u, %.0f bytes in %u chunks of %llu\n"
         "links: up %g, down %g, origin %g Mbit/s; rtt %g us, ttfb %g ms, "
         "goodput %g, quantum %g us; %g retransmission timeouts per MiB "
         "of %g ms\n",
         s->n, r->F, s->chunks, (unsigned long long)c->chunk_bytes,
         c->up_Bps * 8 / 1e6, c->down_Bps * 8 / 1e6, c->origin_Bps * 8 / 1e6,
         c->rtt_s * 1e6, c->ttfb_s * 1e3, c->goodput, c->quantum_s * 1e6,
         c->rto_per_mib, c->rto_s * 1e3);
  printf("policy: reqs %u, depth %u%s, uploads %u (spare %u, line %u), "
         "neighbours %u (dial 1/%u), forward %s in %g KiB (%g ms), deadlines "
         "%s; "
         "frames behind payload %s\n",
         p->reqs_max, p->depth,
         p->depth_spread ? " (1 with reqs ready, slow chunks)" : "",
         p->uploads_max, p->uploads_spare, p->line_max, p->max_nbrs,
         p->dial_share, p->forward ? "on" : "off", p->piece_bytes / 1024,
         p->forward_s * 1e3, p->deadlines ? "on" : "off",
         c->frame_queue ? "on" : "off");
  printf("complete %s, %u nodes verified: T_all %.4f s, T_min %.4f s, "
         "ratio %.4f\n"
         "finish p50 %.4f s, p90 %.4f s, p99 %.4f s, first %.4f s; origin "
         "done at %.4f s\n",
         tf(r->complete), s->verified_nodes, r->t_all, r->t_min,
         r->complete ? r->t_all / r->t_min : -1.0, r->p50, r->p90, r->p99,
         r->first, s->origin_done_s);
  printf("a chunk from its first S3 GET (median): first holder %.2f s, half "
         "the nodes %.2f s, all %.2f s (p90 %.2f s)\n",
         r->spread[0], r->spread[1], r->spread[2], r->spread[3]);
}

static void text_counts(const sim_t *s, const sim_rep_t *r) {
  printf("S3 %llu bytes (%.4f x F) in %llu GETs, at most %u per chunk; "
         "leases granted %llu, expired %llu, pushed %llu; claims "
         "confirmed %llu\n",
         (unsigned long long)s->s3_bytes, (double)s->s3_bytes / r->F,
         (unsigned long long)s->origin_gets, r->maxget,
         (unsigned long long)r->st.leases_granted,
         (unsigned long long)r->st.leases_expired,
         (unsigned long long)s->regrants, (unsigned long long)s->confirms);
  printf(
      "peer bytes %llu, duplicates %llu, wasted %.0f; served %llu (%llu "
      "live); busy rejects %llu, not held %llu; deadline misses %llu, "
      "dropped slow %llu, request timeouts %llu\n"
      "dials %llu, refused %llu, idle neighbours replaced %llu; "
      "retransmission timeouts %llu\n",
      (unsigned long long)s->peer_bytes, (unsigned long long)s->dup_bytes,
      s->wasted_bytes, (unsigned long long)s->served,
      (unsigned long long)s->served_live, (unsigned long long)s->rejects,
      (unsigned long long)s->not_held, (unsigned long long)s->deadline_misses,
      (unsigned long long)s->dropped_slow, (unsigned long long)s->req_timeouts,
      (unsigned long long)s->dials, (unsigned long long)s->conns_refused,
      (unsigned long long)s->replaced, (unsigned long long)s->rto_stalls);
}

static void text_util(const sim_rep_t *r) {
  const double *v = r->v, *w = r->w;
  printf("while fetching (mean of samples): downlink %.3f, uplink %.3f "
         "(all nodes %.3f); inbound transfers %.2f, paced by their "
         "sender's source %.2f (%.3f of the downlink); request slots held "
         "%.3f (all held %.3f, for chunks still arriving there %.3f); "
         "starved %.3f, capped %.3f; neighbours %.2f, uploads %.2f; "
         "downlink over each node's fetch %.3f\n",
         v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
         v[11], v[12], v[13]);
  printf("request slots wait: on the wire %.3f, for the sender's first "
         "buffer %.3f, behind a held chunk there %.3f, for an upload slot "
         "there %.3f, behind its mux cap %.3f, else %.3f; downlink in flows "
         "fixed by the sender's uplink %.3f, by its own downlink %.3f, by "
         "the sender's source %.3f; its uploads paced %.2f, at the cap "
         "(uploads-max less spare) %.3f\n",
         w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10]);
}

void sim_report(sim_t *s, double wall_s) {
  sim_rep_t r;
  rep_compute(s, &r);
  if (s->cfg.json) {
    json_head(s, &r);
    json_counts(s, &r);
    json_util(&r);
    json_lists(s);
    printf("\"events\": %llu, \"rate_recomputes\": %llu, \"wall_s\": %.2f}\n",
           (unsigned long long)s->events, (unsigned long long)s->recomputes,
           wall_s);
    return;
  }
  text_head(s, &r);
  text_counts(s, &r);
  text_util(&r);
  printf("%llu events, %llu rate recomputes, %.2f s wall\n",
         (unsigned long long)s->events, (unsigned long long)s->recomputes,
         wall_s);
}
