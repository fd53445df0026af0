/* trk_stats.c - the dashboard's per-release numbers (see trk_stats.h).
 *
 * Owns each swarm's history (struct trk_shist_s: a ring of
 * TRK_STATS_SAMPLES samples and the departed members) and the trk_mstats_t
 * inside each member, with its ring when it has one. Sample k of the swarm
 * and of each member share ring slot k % TRK_STATS_SAMPLES; a member's
 * slots before its first_seq are not its own. Loop thread only.
 */
#include "trk_swarm-int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N TRK_STATS_SAMPLES

typedef struct {
  char node_id[TRK_NODE_ID_MAX + 1];
  char zone[TRK_ZONE_MAX + 1];
  uint8_t fetcher, reported;
  double progress;
  uint64_t s3_bytes, peer_bytes;
  uint64_t start_ms, done_ms, left_ms, err_ms;
  char err[TRK_STATS_ERR_MAX + 1];
} gone_t;

struct trk_shist_s {
  uint64_t seq; /* samples taken */
  uint64_t start_ms;
  uint64_t size_bytes;
  uint32_t pending;  /* chunks gained by all members since the last sample */
  uint64_t clock_ms; /* time of the last event (join, touch, sample) */
  uint64_t t_ms[N];
  uint32_t gained[N];
  uint16_t done[N], fetching[N], stuck[N];
  gone_t gone[TRK_STATS_GONE_MAX]; /* oldest first */
  uint32_t ngone;
  uint64_t evicted_s3, evicted_peers; /* of records pushed out of gone[] */
  uint32_t rings;                     /* members holding a ring */
};

static const char *const k_state_name[TRK_NODE_STATE_LAST] = {
    "fetching", "stuck", "done", "seeding", "left"};

const char *trk_stats_state_name(trk_node_state_t st) {
  return st < TRK_NODE_STATE_LAST ? k_state_name[st] : "?";
}

int trk_stats_swarm_init(trk_swarm_t *s) {
  s->hist = calloc(1, sizeof(*s->hist));
  if (s->hist == NULL)
    return -ENOMEM;
  s->hist->start_ms = s->created_ms;
  return 0;
}

void trk_stats_swarm_free(trk_swarm_t *s) {
  free(s->hist);
  s->hist = NULL;
}

void trk_stats_set_start(trk_swarm_t *s, uint64_t start_ms) {
  if (start_ms < s->hist->start_ms)
    s->hist->start_ms = start_ms;
}

static double secs(uint64_t now_ms, uint64_t then_ms) {
  return now_ms > then_ms ? (double)(now_ms - then_ms) / 1000.0 : 0.0;
}

static double chunk_bytes(const trk_swarm_t *s) {
  return s->hist->size_bytes == 0
             ? 0.0
             : (double)s->hist->size_bytes / (double)s->total;
}

/* --- membership -------------------------------------------------------- */

void trk_stats_member_join(trk_swarm_t *s, trk_member_t *m, uint64_t now_ms) {
  struct trk_shist_s *h = s->hist;
  trk_mstats_t *st = &m->st;
  memset(st, 0, sizeof(*st));
  h->clock_ms = now_ms;
  st->first_seq = h->seq;
  st->progress_ms = now_ms;
  for (uint32_t i = 0; i < h->ngone; i++) {
    gone_t *g = &h->gone[i];
    if (strcmp(g->node_id, m->peer->node_id) != 0)
      continue;
    /* Back again (a reconnect): its record continues; a reporting node
     * reports its totals again, so the departed copy is dropped. */
    st->fetcher = g->fetcher;
    st->done_ms = g->done_ms;
    st->err_ms = g->err_ms;
    memcpy(st->err, g->err, sizeof(st->err));
    memmove(g, g + 1, (size_t)(h->ngone - i - 1u) * sizeof(*g));
    h->ngone--;
    return;
  }
}

static void node_bytes(const trk_swarm_t *s, const trk_member_t *m,
                       uint64_t *s3, uint64_t *peers) {
  if (m->st.reported) {
    *s3 = m->st.s3_bytes;
    *peers = m->st.peer_bytes;
    return;
  }
  /* Derived: a chunk it completed while holding its S3 lease came from
   * S3, any other chunk it gained from a neighbour. */
  double cb = chunk_bytes(s);
  uint32_t gained =
      m->have_count > m->st.base_have ? m->have_count - m->st.base_have : 0;
  uint64_t from_s3 = m->origin_chunks < gained ? m->origin_chunks : gained;
  *s3 = (uint64_t)((double)from_s3 * cb);
  *peers = (uint64_t)((double)(gained - from_s3) * cb);
}

static void ring_free(struct trk_shist_s *h, trk_mstats_t *st) {
  if (st->gained == NULL)
    return;
  free(st->gained);
  st->gained = NULL;
  h->rings--;
}

size_t trk_stats_swarm_bytes(void) {
  return sizeof(struct trk_shist_s);
}

size_t trk_stats_member_ring_bytes(void) {
  return N * sizeof(uint16_t);
}

uint32_t trk_stats_rings(const trk_swarm_t *s) {
  return s->hist->rings;
}

void trk_stats_member_leave(trk_swarm_t *s, trk_member_t *m) {
  struct trk_shist_s *h = s->hist;
  uint64_t now_ms = h->clock_ms;
  ring_free(h, &m->st);
  if (h->ngone == TRK_STATS_GONE_MAX) {
    h->evicted_s3 += h->gone[0].s3_bytes;
    h->evicted_peers += h->gone[0].peer_bytes;
    memmove(&h->gone[0], &h->gone[1], (h->ngone - 1u) * sizeof(gone_t));
    h->ngone--;
  }
  gone_t *g = &h->gone[h->ngone++];
  memset(g, 0, sizeof(*g));
  snprintf(g->node_id, sizeof(g->node_id), "%s", m->peer->node_id);
  snprintf(g->zone, sizeof(g->zone), "%s", m->peer->zone);
  g->fetcher = m->st.fetcher;
  g->reported = m->st.reported;
  g->progress = (double)m->have_count / (double)s->total;
  node_bytes(s, m, &g->s3_bytes, &g->peer_bytes);
  g->start_ms = m->joined_ms;
  g->done_ms = m->st.done_ms;
  g->left_ms = now_ms;
  g->err_ms = m->st.err_ms;
  memcpy(g->err, m->st.err, sizeof(g->err));
}

/* --- updates ------------------------------------------------------------ */

void trk_stats_touch(trk_swarm_t *s, trk_member_t *m, uint64_t now_ms) {
  trk_mstats_t *st = &m->st;
  uint32_t have = m->have_count;
  int missing = m->role == TRK_ROLE_LEECH && have < s->total;
  s->hist->clock_ms = now_ms;
  if (!st->seen) {
    /* The first have-set is what it brought, not progress. */
    st->seen = 1;
    st->base_have = st->last_have = have;
    st->fetcher = st->fetcher || missing;
    return;
  }
  if (have > st->last_have) {
    uint32_t d = have - st->last_have;
    st->pending += d;
    s->hist->pending += d;
    st->progress_ms = now_ms;
  }
  st->last_have = have;
  if (missing)
    st->fetcher = 1;
  if (st->fetcher && have == s->total && st->done_ms == 0)
    st->done_ms = now_ms;
}

void trk_stats_report(trk_swarm_t *s, trk_member_t *m, const trk_report_t *r,
                      uint64_t now_ms) {
  trk_mstats_t *st = &m->st;
  if (r->size_bytes != 0 && r->size_bytes > s->hist->size_bytes)
    s->hist->size_bytes = r->size_bytes;
  if (r->size_bytes != 0 || r->s3_bytes != 0 || r->peer_bytes != 0) {
    st->reported = 1;
    /* Totals only grow; a smaller one is an older announce. */
    if (r->s3_bytes > st->s3_bytes)
      st->s3_bytes = r->s3_bytes;
    if (r->peer_bytes > st->peer_bytes)
      st->peer_bytes = r->peer_bytes;
  }
  if (r->err != NULL && r->err[0] != '\0' && strcmp(r->err, st->err) != 0)
    trk_stats_error(m, now_ms, "%s", r->err);
}

void trk_stats_error(trk_member_t *m, uint64_t now_ms, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->st.err, sizeof(m->st.err), fmt, ap);
  va_end(ap);
  /* Stored text goes out in JSON: no control characters. */
  for (char *p = m->st.err; *p != '\0'; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7F)
      *p = ' ';
  m->st.err_ms = now_ms;
}

static trk_node_state_t member_state(const trk_swarm_t *s,
                                     const trk_member_t *m, uint64_t now_ms) {
  if (m->have_count == s->total)
    return TRK_NODE_DONE;
  if (m->role == TRK_ROLE_SEED)
    return TRK_NODE_SEED;
  return now_ms - m->st.progress_ms >= TRK_STATS_STUCK_MS &&
                 now_ms > m->st.progress_ms
             ? TRK_NODE_STUCK
             : TRK_NODE_FETCHING;
}

void trk_stats_sample(trk_swarm_t *s, uint64_t now_ms) {
  struct trk_shist_s *h = s->hist;
  uint32_t k = (uint32_t)(h->seq % N);
  uint32_t cnt[TRK_NODE_STATE_LAST] = {0};
  h->clock_ms = now_ms;
  for (uint32_t i = 0; i < s->nmembers; i++) {
    trk_mstats_t *st = &s->members[i]->st;
    cnt[member_state(s, s->members[i], now_ms)]++;
    if (st->gained == NULL) {
      if (st->pending == 0)
        continue; /* no ring: this sample reads as 0, as it is */
      st->gained = calloc(N, sizeof(*st->gained));
      if (st->gained == NULL)
        continue; /* its gains wait in pending for the next sample */
      h->rings++;
    }
    st->gained[k] =
        st->pending > UINT16_MAX ? UINT16_MAX : (uint16_t)st->pending;
    if (st->pending > 0)
      st->gain_seq = h->seq;
    else if (h->seq - st->gain_seq >= N)
      ring_free(h, st); /* no gain in the window (samples seq - N + 1..) */
    st->pending = 0;
  }
  h->t_ms[k] = now_ms;
  h->gained[k] = h->pending;
  h->pending = 0;
  h->done[k] = (uint16_t)cnt[TRK_NODE_DONE];
  h->fetching[k] = (uint16_t)cnt[TRK_NODE_FETCHING];
  h->stuck[k] = (uint16_t)cnt[TRK_NODE_STUCK];
  h->seq++;
}

/* --- history ------------------------------------------------------------ */

uint32_t trk_stats_hist_count(const trk_swarm_t *s) {
  return s->hist->seq < N ? (uint32_t)s->hist->seq : N;
}

/* Ring slot and absolute sample number of history row i. */
static uint32_t slot(const trk_swarm_t *s, uint32_t i, uint64_t *abs) {
  uint64_t a = s->hist->seq - trk_stats_hist_count(s) + i;
  if (abs != NULL)
    *abs = a;
  return (uint32_t)(a % N);
}

uint64_t trk_stats_hist_time(const trk_swarm_t *s, uint32_t i) {
  return s->hist->t_ms[slot(s, i, NULL)];
}

/* Seconds sample i spans (since the one before it). */
static double span_s(const trk_swarm_t *s, uint32_t i) {
  uint64_t t = trk_stats_hist_time(s, i);
  uint64_t t0 =
      i > 0 ? trk_stats_hist_time(s, i - 1u) : t - TRK_SWEEP_INTERVAL_MS;
  return t > t0 ? (double)(t - t0) / 1000.0 : 1.0;
}

static double unit_bytes(const trk_swarm_t *s) {
  double cb = chunk_bytes(s);
  return cb > 0.0 ? cb : 1.0; /* chunks/s when the size is unknown */
}

double trk_stats_hist_rate(const trk_swarm_t *s, uint32_t i) {
  return (double)s->hist->gained[slot(s, i, NULL)] * unit_bytes(s) /
         span_s(s, i);
}

double trk_stats_hist_node_rate(const trk_swarm_t *s, uint32_t member,
                                uint32_t i) {
  uint64_t abs;
  uint32_t k = slot(s, i, &abs);
  const trk_member_t *m = s->members[member];
  if (abs < m->st.first_seq)
    return -1.0;
  if (m->st.gained == NULL)
    return 0.0;
  return (double)m->st.gained[k] * unit_bytes(s) / span_s(s, i);
}

void trk_stats_hist_states(const trk_swarm_t *s, uint32_t i, uint32_t *done,
                           uint32_t *fetching, uint32_t *stuck) {
  uint32_t k = slot(s, i, NULL);
  *done = s->hist->done[k];
  *fetching = s->hist->fetching[k];
  *stuck = s->hist->stuck[k];
}

/* Mean rate of member (or of all, member < 0) over the last samples. */
static double recent_rate(const trk_swarm_t *s, int64_t member) {
  uint32_t n = trk_stats_hist_count(s);
  uint32_t k = n < TRK_STATS_RATE_SAMPLES ? n : TRK_STATS_RATE_SAMPLES;
  double bytes = 0.0, span = 0.0;
  for (uint32_t i = n - k; i < n; i++) {
    double r = member < 0 ? trk_stats_hist_rate(s, i)
                          : trk_stats_hist_node_rate(s, (uint32_t)member, i);
    if (r < 0.0)
      continue;
    bytes += r * span_s(s, i);
    span += span_s(s, i);
  }
  return span > 0.0 ? bytes / span : 0.0;
}

/* --- queries ------------------------------------------------------------ */

uint32_t trk_stats_node_count(const trk_swarm_t *s) {
  return s->nmembers + s->hist->ngone;
}

static double done_after(const trk_swarm_t *s, uint64_t joined_ms,
                         uint64_t done_ms) {
  uint64_t from = joined_ms > s->hist->start_ms ? joined_ms : s->hist->start_ms;
  return done_ms == 0 ? -1.0 : secs(done_ms, from);
}

static void gone_view(const trk_swarm_t *s, const gone_t *g, uint64_t now_ms,
                      trk_node_view_t *v) {
  v->node_id = g->node_id;
  v->zone = g->zone;
  v->state = TRK_NODE_LEFT;
  v->progress = g->progress;
  v->s3_bytes = g->s3_bytes;
  v->peer_bytes = g->peer_bytes;
  v->reported = g->reported;
  v->idle_s = secs(now_ms, g->left_ms);
  v->done_s = done_after(s, g->start_ms, g->done_ms);
  v->err = g->err;
  v->err_age_s = g->err[0] != '\0' ? secs(now_ms, g->err_ms) : 0.0;
}

void trk_stats_node(const trk_swarm_t *s, uint32_t i, uint64_t now_ms,
                    trk_node_view_t *v) {
  memset(v, 0, sizeof(*v));
  if (i >= s->nmembers) {
    gone_view(s, &s->hist->gone[i - s->nmembers], now_ms, v);
    return;
  }
  const trk_member_t *m = s->members[i];
  v->node_id = m->peer->node_id;
  v->zone = m->peer->zone;
  v->state = member_state(s, m, now_ms);
  v->progress = (double)m->have_count / (double)s->total;
  v->rate_bps = recent_rate(s, i);
  node_bytes(s, m, &v->s3_bytes, &v->peer_bytes);
  v->reported = m->st.reported;
  v->idle_s = secs(now_ms, m->st.progress_ms);
  v->done_s = done_after(s, m->joined_ms, m->st.done_ms);
  v->err = m->st.err;
  v->err_age_s = m->st.err[0] != '\0' ? secs(now_ms, m->st.err_ms) : 0.0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p of the fetchers' start-to-done times; a node
 * not done yet counts as infinitely late (-1: not reached yet). */
static double percentile(const double *sorted, uint32_t n, double p) {
  if (n == 0)
    return -1.0;
  uint32_t r = (uint32_t)ceil(p * (double)n);
  if (r < 1)
    r = 1;
  return isinf(sorted[r - 1u]) ? -1.0 : sorted[r - 1u];
}

static void summary_times(const trk_swarm_t *s, uint64_t now_ms,
                          trk_swarm_summary_t *o) {
  double *d = malloc((s->nmembers + s->hist->ngone + 1u) * sizeof(*d));
  uint32_t n = 0;
  o->p50_s = o->p99_s = -1.0;
  if (d == NULL)
    return;
  for (uint32_t i = 0; i < trk_stats_node_count(s); i++) {
    int fetcher = i < s->nmembers ? s->members[i]->st.fetcher
                                  : s->hist->gone[i - s->nmembers].fetcher;
    if (!fetcher)
      continue;
    trk_node_view_t v;
    trk_stats_node(s, i, now_ms, &v);
    d[n++] = v.done_s >= 0.0 ? v.done_s : INFINITY;
  }
  qsort(d, n, sizeof(*d), cmp_double);
  o->fetchers = n;
  o->p50_s = percentile(d, n, 0.50);
  o->p99_s = percentile(d, n, 0.99);
  free(d);
}

void trk_stats_summary(const trk_swarm_t *s, uint64_t now_ms,
                       trk_swarm_summary_t *o) {
  const struct trk_shist_s *h = s->hist;
  memset(o, 0, sizeof(*o));
  o->size_bytes = h->size_bytes;
  o->chunk_bytes = chunk_bytes(s);
  o->s3_bytes = h->evicted_s3;
  o->peer_bytes = h->evicted_peers;
  for (uint32_t i = 0; i < trk_stats_node_count(s); i++) {
    trk_node_view_t v;
    trk_stats_node(s, i, now_ms, &v);
    o->s3_bytes += v.s3_bytes;
    o->peer_bytes += v.peer_bytes;
    uint32_t *c[TRK_NODE_STATE_LAST] = {&o->fetching, &o->stuck, &o->done,
                                        &o->seeds, &o->left};
    (*c[v.state])++;
  }
  o->s3_ratio =
      h->size_bytes > 0 ? (double)o->s3_bytes / (double)h->size_bytes : -1.0;
  o->rate_bps = recent_rate(s, -1);
  o->start_ms = h->start_ms;
  o->elapsed_s = secs(now_ms, h->start_ms);
  summary_times(s, now_ms, o);
}
