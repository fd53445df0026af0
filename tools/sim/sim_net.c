/* sim_net.c - ws-sim's flows and their rates.
 *
 * A flow is one chunk on its way from a sender (a node, or the origin) to
 * a receiver; it crosses the sender's uplink and the receiver's downlink
 * (the origin's downlink is never used, a node's links are full duplex).
 * Rates are the max-min fair allocation over all links (progressive
 * filling: the link with the smallest fair share fixes its flows at that
 * share, which leaves the others more), what TCP flows sharing bottlenecks
 * approach. A flow serving a chunk still arriving from S3 ("live") cannot
 * pass the bytes that arrived: once it has caught up it is capped at the
 * S3 flow's rate of the previous allocation.
 *
 * Rates are recomputed when flows start or end (quantum 0), or at most
 * once per quantum: a new flow then waits for the next recompute, and a
 * finished one's share is handed out only then (docs/scale.md, limits).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (q == NULL) {
    fprintf(stderr, "ws-sim: out of memory (flows)\n");
    exit(1);
  }
  return q;
}

uint32_t sim_flow_start(sim_t *s, uint32_t src, uint32_t dst, uint32_t kind,
                        uint32_t chunk, uint32_t conn, uint32_t live_of) {
  uint32_t id;
  if (s->nfree > 0) {
    id = s->flow_free[--s->nfree];
  } else {
    if (s->nflows == s->flows_cap) {
      s->flows_cap = s->flows_cap ? s->flows_cap * 2u : 1024u;
      s->flows = xrealloc(s->flows, s->flows_cap * sizeof(*s->flows));
      s->flow_free = xrealloc(s->flow_free, s->flows_cap * sizeof(uint32_t));
    }
    id = s->nflows++;
  }
  sim_flow_t *f = &s->flows[id];
  uint32_t version = f->version + 1u;
  *f = (sim_flow_t){.src = src,
                    .dst = dst,
                    .kind = kind,
                    .chunk = chunk,
                    .conn = conn,
                    .live_of = live_of,
                    .size = s->chunk_len[chunk],
                    .left = s->chunk_len[chunk],
                    .t_ref = s->now,
                    .version = version,
                    .active = true};
  s->active_flows++;
  sim_rates_dirty(s);
  return id;
}

double sim_flow_done_bytes(const sim_t *s, const sim_flow_t *f) {
  double left = f->left - f->rate * (s->now - f->t_ref);
  return f->size - (left > 0 ? left : 0);
}

void sim_flow_end(sim_t *s, uint32_t id) {
  sim_flow_t *f = &s->flows[id];
  f->active = false;
  f->version++;
  s->active_flows--;
  s->flow_free[s->nfree++] = id;
  sim_rates_dirty(s);
}

void sim_rates_dirty(sim_t *s) {
  s->rates_dirty = true;
  if (s->rates_scheduled)
    return;
  double t = s->now;
  if (s->cfg.quantum_s > 0 && s->rates_at + s->cfg.quantum_s > t)
    t = s->rates_at + s->cfg.quantum_s;
  s->rates_scheduled = true;
  sim_ev_push(s, t, EV_RATES, 0, 0, 0);
}

/* ---- progressive filling ------------------------------------------------ */

typedef struct {
  double key;
  uint32_t link, ver;
} heap_ent_t;

typedef struct {
  uint32_t nlinks, npseudo;
  double *rem;
  uint32_t *cnt, *ver, *off, *list;
  uint32_t (*of)[3]; /* per flow: its links (pseudo link or SIM_NONE) */
  heap_ent_t *heap;
  uint32_t nheap;
} fill_t;

static fill_t F;

static void heap_push(fill_t *w, double key, uint32_t link) {
  heap_ent_t e = {key, link, w->ver[link]};
  uint32_t i = w->nheap++;
  while (i > 0 && w->heap[(i - 1u) / 2u].key > e.key) {
    w->heap[i] = w->heap[(i - 1u) / 2u];
    i = (i - 1u) / 2u;
  }
  w->heap[i] = e;
}

static heap_ent_t heap_pop(fill_t *w) {
  heap_ent_t top = w->heap[0], last = w->heap[--w->nheap];
  uint32_t i = 0;
  for (;;) {
    uint32_t l = 2u * i + 1u, m = i;
    double k = last.key;
    if (l < w->nheap && w->heap[l].key < k) {
      m = l;
      k = w->heap[l].key;
    }
    if (l + 1u < w->nheap && w->heap[l + 1u].key < k)
      m = l + 1u;
    if (m == i)
      break;
    w->heap[i] = w->heap[m];
    i = m;
  }
  if (w->nheap > 0)
    w->heap[i] = last;
  return top;
}

/* The cap of a live flow now, or -1 for none. */
static double live_cap(sim_t *s, const sim_flow_t *f) {
  const sim_node_t *srv = &s->nodes[f->src];
  if (f->kind != SIM_FLOW_PEER || srv->state[f->chunk] == SIM_DONE)
    return -1;
  uint32_t o = srv->origin_flow[f->chunk];
  if (o == SIM_NONE)
    return 0; /* its S3 GET has not brought a byte yet */
  const sim_flow_t *of = &s->flows[o];
  if (f->left > 0 &&
      sim_flow_done_bytes(s, f) + 1.0 < sim_flow_done_bytes(s, of))
    return -1; /* behind: free to go faster */
  return of->rate;
}

/* Sets up links and their flows; returns the number of links. */
static uint32_t fill_links(sim_t *s, fill_t *w) {
  uint32_t n = s->n, base = 2u * n + 1u, npseudo = 0;
  w->of = xrealloc(w->of, (size_t)s->nflows * sizeof(*w->of));
  double *caps = xrealloc(NULL, (size_t)s->nflows * sizeof(double));
  for (uint32_t i = 0; i < s->nflows; i++) {
    sim_flow_t *f = &s->flows[i];
    if (!f->active)
      continue;
    caps[i] = live_cap(s, f);
    w->of[i][0] = f->src;
    w->of[i][1] = n + 1u + f->dst;
    w->of[i][2] = caps[i] >= 0 ? base + npseudo++ : SIM_NONE;
  }
  uint32_t nl = base + npseudo;
  w->nlinks = nl;
  w->npseudo = npseudo;
  w->rem = xrealloc(w->rem, nl * sizeof(double));
  w->cnt = xrealloc(w->cnt, nl * sizeof(uint32_t));
  w->ver = xrealloc(w->ver, nl * sizeof(uint32_t));
  w->off = xrealloc(w->off, (nl + 1u) * sizeof(uint32_t));
  w->list = xrealloc(w->list, (size_t)s->nflows * 3u * sizeof(uint32_t));
  w->heap = xrealloc(w->heap, ((size_t)s->nflows * 3u + nl) * sizeof(*w->heap));
  for (uint32_t l = 0; l < nl; l++) {
    w->cnt[l] = 0;
    w->ver[l] = 0;
    w->rem[l] = s->cfg.goodput * (l < n    ? s->cfg.up_Bps
                                  : l == n ? s->cfg.origin_Bps
                                           : s->cfg.down_Bps);
  }
  for (uint32_t i = 0; i < s->nflows; i++) {
    if (!s->flows[i].active)
      continue;
    for (int k = 0; k < 3; k++)
      if (w->of[i][k] != SIM_NONE)
        w->cnt[w->of[i][k]]++;
    if (w->of[i][2] != SIM_NONE)
      w->rem[w->of[i][2]] = caps[i];
  }
  free(caps);
  w->off[0] = 0;
  for (uint32_t l = 0; l < nl; l++)
    w->off[l + 1u] = w->off[l] + w->cnt[l];
  uint32_t *pos = xrealloc(NULL, nl * sizeof(uint32_t));
  for (uint32_t l = 0; l < nl; l++)
    pos[l] = w->off[l];
  for (uint32_t i = 0; i < s->nflows; i++) {
    if (!s->flows[i].active)
      continue;
    for (int k = 0; k < 3; k++)
      if (w->of[i][k] != SIM_NONE)
        w->list[pos[w->of[i][k]]++] = i;
  }
  free(pos);
  return nl;
}

static void fill_rates(sim_t *s, fill_t *w) {
  uint32_t nl = fill_links(s, w);
  w->nheap = 0;
  for (uint32_t i = 0; i < s->nflows; i++)
    s->flows[i].rate = -1; /* not fixed yet */
  for (uint32_t l = 0; l < nl; l++)
    if (w->cnt[l] > 0)
      heap_push(w, w->rem[l] / w->cnt[l], l);
  while (w->nheap > 0) {
    heap_ent_t e = heap_pop(w);
    uint32_t l = e.link;
    if (e.ver != w->ver[l] || w->cnt[l] == 0)
      continue;
    double share = e.key > 0 ? e.key : 0;
    for (uint32_t k = w->off[l]; k < w->off[l + 1u]; k++) {
      sim_flow_t *f = &s->flows[w->list[k]];
      if (f->rate >= 0)
        continue;
      f->rate = share;
      for (int j = 0; j < 3; j++) {
        uint32_t o = w->of[w->list[k]][j];
        if (o == SIM_NONE || o == l)
          continue;
        w->rem[o] -= share;
        w->cnt[o]--;
        w->ver[o]++;
        if (w->cnt[o] > 0)
          heap_push(w, w->rem[o] / w->cnt[o], o);
      }
    }
    w->cnt[l] = 0;
  }
}

/* What happens to a flow before the next recompute, in time order. */
enum { FEV_END, FEV_KICK, FEV_CATCH };

static void fev_add(sim_t *s, double t, uint32_t flow, uint32_t what) {
  if (s->nfev == s->fev_cap) {
    s->fev_cap = s->fev_cap ? s->fev_cap * 2u : 1024u;
    s->fev = xrealloc(s->fev, s->fev_cap * sizeof(*s->fev));
  }
  s->fev[s->nfev++] = (sim_fev_t){
      .t = t, .flow = flow, .version = s->flows[flow].version, .what = what};
}

/* Events of f before horizon: its end, a live flow catching up with its
 * S3 flow, an S3 flow nearing its end (a spare lease may start then,
 * origin.c). */
static void flow_events(sim_t *s, uint32_t id, double horizon) {
  sim_flow_t *f = &s->flows[id];
  if (f->left <= 0) {
    /* A live upload that waits for its S3 flow's last byte. */
    if (f->kind == SIM_FLOW_ORIGIN ||
        s->nodes[f->src].state[f->chunk] == SIM_DONE)
      fev_add(s, s->now, id, FEV_END);
    return;
  }
  if (f->rate <= 0)
    return;
  double t_end = s->now + f->left / f->rate;
  if (t_end <= horizon)
    fev_add(s, t_end, id, FEV_END);
  if (f->kind == SIM_FLOW_ORIGIN) {
    double lead = s->nodes[f->dst].lead_s;
    double t_ending = t_end - 1.5 * lead;
    if (t_ending > s->now && t_ending <= horizon)
      fev_add(s, t_ending, id, FEV_KICK);
    return;
  }
  const sim_node_t *srv = &s->nodes[f->src];
  uint32_t o =
      srv->state[f->chunk] == SIM_DONE ? SIM_NONE : srv->origin_flow[f->chunk];
  if (o == SIM_NONE || s->flows[o].rate >= f->rate)
    return;
  double gap = sim_flow_done_bytes(s, &s->flows[o]) - sim_flow_done_bytes(s, f);
  double t_catch = s->now + gap / (f->rate - s->flows[o].rate);
  if (gap > 1.0 && t_catch < t_end && t_catch <= horizon)
    fev_add(s, t_catch, id, FEV_CATCH);
}

static int fev_cmp(const void *a, const void *b) {
  const sim_fev_t *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return (x->flow > y->flow) - (x->flow < y->flow);
}

/* A flow's bytes are all sent. */
static void flow_ended(sim_t *s, uint32_t id) {
  sim_flow_t *f = &s->flows[id];
  if (f->kind == SIM_FLOW_ORIGIN) {
    sim_on_origin_end(s, id);
    return;
  }
  if (s->nodes[f->src].state[f->chunk] != SIM_DONE) {
    /* A live upload that caught up: its last byte waits for the S3 one
     * (the recompute after that flow ends finishes it). */
    f->left = 0;
    f->rate = 0;
    f->version++;
    return;
  }
  sim_on_upload_end(s, id);
}

void sim_flow_events(sim_t *s, uint32_t gen) {
  if (gen != s->fev_gen)
    return; /* rates changed since */
  while (s->fev_pos < s->nfev && s->fev[s->fev_pos].t <= s->now) {
    sim_fev_t e = s->fev[s->fev_pos++];
    sim_flow_t *f = &s->flows[e.flow];
    if (!f->active || f->version != e.version)
      continue;
    if (e.what == FEV_END)
      flow_ended(s, e.flow);
    else if (e.what == FEV_KICK)
      sim_origin_kick(s, f->dst);
    else
      sim_rates_dirty(s);
  }
  if (s->fev_pos < s->nfev)
    sim_ev_push(s, s->fev[s->fev_pos].t, EV_FLOW, gen, 0, 0);
}

void sim_net_free(sim_t *s) {
  free(s->flows);
  free(s->flow_free);
  free(s->fev);
  free(F.rem);
  free(F.cnt);
  free(F.ver);
  free(F.off);
  free(F.list);
  free(F.of);
  free(F.heap);
  memset(&F, 0, sizeof(F));
}

void sim_rates(sim_t *s) {
  s->rates_scheduled = false;
  s->rates_dirty = false;
  s->rates_at = s->now;
  s->recomputes++;
  for (uint32_t i = 0; i < s->nflows; i++) {
    sim_flow_t *f = &s->flows[i];
    if (!f->active)
      continue;
    f->left -= f->rate * (s->now - f->t_ref);
    if (f->left < 0)
      f->left = 0;
    f->t_ref = s->now;
  }
  fill_rates(s, &F);
  /* A caught-up live flow was capped at its S3 flow's previous rate; once
   * more with the rate that flow has now. */
  if (F.npseudo > 0)
    fill_rates(s, &F);
  double horizon = s->cfg.quantum_s > 0 ? s->now + s->cfg.quantum_s : INFINITY;
  s->nfev = s->fev_pos = 0;
  s->fev_gen++;
  for (uint32_t i = 0; i < s->nflows; i++) {
    sim_flow_t *f = &s->flows[i];
    if (!f->active)
      continue;
    if (f->rate < 0)
      f->rate = 0;
    f->version++;
    flow_events(s, i, horizon);
  }
  if (s->nfev > 1)
    qsort(s->fev, s->nfev, sizeof(*s->fev), fev_cmp);
  if (s->nfev > 0)
    sim_ev_push(s, s->fev[0].t, EV_FLOW, s->fev_gen, 0, 0);
  if (s->cfg.quantum_s > 0 && s->active_flows > 0) {
    s->rates_scheduled = true;
    sim_ev_push(s, horizon, EV_RATES, 0, 0, 0);
  }
}
