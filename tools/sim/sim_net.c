/* sim_net.c - ws-sim's flows and their rates.
 *
 * A flow is one chunk on its way from a sender (a node, or the origin) to
 * a receiver; it crosses the sender's uplink and the receiver's downlink
 * (the origin's downlink is never used, a node's links are full duplex).
 * Rates are the max-min fair allocation over all links (progressive
 * filling: the link with the smallest fair share fixes its flows at that
 * share, which leaves the others more), what TCP flows sharing bottlenecks
 * approach.
 *
 * A flow serving a chunk still arriving at its sender ("live", from S3 or
 * from a neighbour) cannot pass the bytes its sender may forward: those
 * are written in buffers of --forward-piece-kib (PEER_BUF_BYTES; inbound.c
 * tells uploads of each buffer once written), so the model lets it send up
 * to one buffer less than its sender received (all of it once the
 * sender's last byte is in). Once it has caught up it is capped at its
 * sender's incoming rate; in a chain (S3 -> A -> B -> C) each cap is the
 * previous pass's rate of the flow upstream, and the allocation is redone
 * until no cap moves (SIM_FILL_PASSES at most).
 *
 * With --rto-per-mib a flow meets TCP retransmission timeouts at random
 * (a Poisson process over the bytes it carries): each stops it for
 * --rto-ms, as a lost segment at the tail of a window stops a real one
 * until its sender's timer fires, and its share of the links goes to the
 * others meanwhile. A loss that fast retransmit repairs is not modelled.
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
#include "swarm/pick_rank.h"

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (q == NULL) {
    fprintf(stderr, "ws-sim: out of memory (flows)\n");
    exit(1);
  }
  return q;
}

/* Bytes a flow carries until its next retransmission timeout. */
static double stall_gap(sim_t *s) {
  if (s->cfg.rto_per_mib <= 0)
    return INFINITY;
  double u = (double)(peer_pick_rand(&s->loss_rng) >> 11) * 0x1p-53;
  return -log1p(-u) * 1048576.0 / s->cfg.rto_per_mib;
}

uint32_t sim_flow_start(sim_t *s, uint32_t src, uint32_t dst, uint32_t kind,
                        uint32_t chunk, uint32_t conn) {
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
    s->flows[id].version = 0;
  }
  sim_flow_t *f = &s->flows[id];
  uint32_t version = f->version + 1u;
  *f = (sim_flow_t){.src = src,
                    .dst = dst,
                    .kind = kind,
                    .chunk = chunk,
                    .conn = conn,
                    .size = s->chunk_len[chunk],
                    .left = s->chunk_len[chunk],
                    .t_ref = s->now,
                    .go_at = s->now,
                    .stall_at = stall_gap(s),
                    .version = version,
                    .serial = ++s->flow_serial,
                    .alive = true};
  s->active_flows++;
  sim_rates_dirty(s);
  return id;
}

double sim_flow_done_bytes(const sim_t *s, const sim_flow_t *f) {
  if (f->sent)
    return f->size;
  double left = f->left - f->rate * (s->now - f->t_ref);
  return f->size - (left > 0 ? left : 0);
}

/* Chunks arriving at the client on c: their header came, they are not all
 * sent (peer_neighbor_arriving). */
static uint32_t conn_arriving(const sim_t *s, const sim_conn_t *c) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < c->nups; i++) {
    const sim_flow_t *f = &s->flows[c->ups[i]];
    k += f->accepted && !f->discard;
  }
  return k;
}

uint32_t sim_conn_depth(const sim_t *s, const sim_conn_t *c) {
  const sim_node_t *n = &s->nodes[c->client];
  const sim_policy_t *pol = &s->cfg.pol;
  /* peer_picker_depth: one deep once reqs_max neighbours are ready and
   * chunks come slowly. */
  if (!pol->depth_spread || n->nready < pol->reqs_max || n->rx_Bps <= 0 ||
      (double)s->cfg.chunk_bytes / n->rx_Bps < PEER_DEPTH_ONE_CHUNK_MS / 1e3)
    return pol->depth;
  /* One deep, a chunk arriving from the server counts as a request to it
   * (peer_picker_fill). */
  return conn_arriving(s, c) > 0 ? 0u : 1u;
}

void sim_flow_sent(sim_t *s, uint32_t id) {
  sim_flow_t *f = &s->flows[id];
  f->left = 0;
  f->rate = 0;
  f->sent = true;
  f->paced = false;
  f->version++;
  s->active_flows--;
  sim_rates_dirty(s);
}

void sim_flow_end(sim_t *s, uint32_t id) {
  sim_flow_t *f = &s->flows[id];
  if (!f->alive)
    return;
  if (!f->sent) {
    s->active_flows--;
    sim_rates_dirty(s);
  }
  f->alive = false;
  f->version++;
  s->flow_free[s->nfree++] = id;
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

/* What live_source says of a flow during one recompute: nothing it reads
 * changes while the rates are filled (every live flow's bytes were brought
 * to now first), except the rate of the flow bringing its sender the
 * chunk, so that is read afresh (src). Looking a sender's chunk state up
 * again on every pass was most of a recompute's cache misses. */
typedef struct {
  double avail, src_done;
  uint32_t src; /* the flow bringing its sender the chunk, or SIM_NONE */
  bool live;    /* live_source's answer */
  uint8_t cap;  /* CAP_*: what live_cap answers, short of the rate */
} live_memo_t;

enum { CAP_NONE, CAP_ZERO, CAP_SRC };

/* The recompute's working set, over the live flows only (alive, not yet
 * sent), densely in flow order: a flow's index j here is its rank among
 * them, ids[j] its flow, so every loop (and each link's list of flows)
 * runs in the order it would over all flows. */
typedef struct {
  uint32_t m, cap_m; /* live flows; the per-flow arrays' room */
  uint32_t *ids;
  uint32_t (*of)[3]; /* per flow: its links (pseudo link or SIM_NONE) */
  double *caps;      /* per flow: its cap, or -1 */
  double *rate;      /* per flow: its rate in the fill (-1: not fixed) */
  uint8_t *bneck;    /* per flow: SIM_BNECK_* it was fixed by, or 255 */
  live_memo_t *memo;
  uint32_t nlinks, npseudo, cap_l;
  double *rem;
  uint32_t *cnt, *ver, *off, *pos, *list;
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

/* The piece a flow's bytes become servable onwards in at its receiver. */
static double flow_piece(const sim_t *s, const sim_flow_t *f) {
  return f->piece > 0 ? f->piece : s->cfg.pol.piece_bytes;
}

/* The bytes a flow arriving at `rate` becomes servable onwards in
 * (inbound.c: a buffer is written when full, or once it has waited
 * PEER_BUF_FORWARD_MS holding PEER_BUF_FORWARD_MIN_BYTES). */
static double sim_piece_bytes(const sim_t *s, double rate) {
  const sim_policy_t *p = &s->cfg.pol;
  double piece = rate * p->forward_s;
  if (piece < PEER_BUF_FORWARD_MIN_BYTES)
    piece = PEER_BUF_FORWARD_MIN_BYTES;
  return p->forward_s <= 0 || piece > p->piece_bytes ? p->piece_bytes : piece;
}

/* What the sender of peer flow f has of its chunk: *avail bytes it may
 * forward now, *src_rate the rate they grow at, *src_done the bytes it
 * received. false: it holds the chunk (nothing limits f). */
static bool live_source(const sim_t *s, const sim_flow_t *f, double *avail,
                        double *src_rate, double *src_done) {
  const sim_node_t *srv = &s->nodes[f->src];
  if (f->kind != SIM_FLOW_PEER || f->src_held ||
      srv->state[f->chunk] == SIM_DONE)
    return false;
  uint32_t o = srv->in_flow[f->chunk];
  *avail = *src_rate = *src_done = 0;
  if (o == SIM_NONE || o == SIM_PENDING)
    return true; /* its first byte has not come (or its fetch failed) */
  const sim_flow_t *of = &s->flows[o];
  double sd = sim_flow_done_bytes(s, of);
  *src_done = sd;
  if (of->sent || sd >= f->size) {
    *avail = f->size; /* all in; the last byte waits for the hash check */
    return true;
  }
  double a = sd - flow_piece(s, of);
  *avail = a > 0 ? a : 0;
  *src_rate = of->rate;
  return true;
}

double sim_flow_may_send(const sim_t *s, const sim_flow_t *f) {
  double avail, rate, sd;
  if (!f->alive || f->sent)
    return 0;
  double done = sim_flow_done_bytes(s, f);
  if (!live_source(s, f, &avail, &rate, &sd))
    avail = f->size;
  return avail > done ? avail - done : 0;
}

/* live_source of f (live) for the recompute, and what its cap will be
 * (live_cap: its sender's incoming rate, 0 while nothing may go, or none)
 * short of that rate. */
static void memo_fill(const sim_t *s, sim_flow_t *f, live_memo_t *m) {
  double rate;
  m->src = SIM_NONE;
  m->live = live_source(s, f, &m->avail, &rate, &m->src_done);
  if (!m->live && f->kind == SIM_FLOW_PEER)
    f->src_held = true; /* not looked up again */
  if (m->live && m->avail < f->size && m->src_done < f->size) {
    uint32_t o = s->nodes[f->src].in_flow[f->chunk];
    if (o != SIM_NONE && o != SIM_PENDING && !s->flows[o].sent)
      m->src = o; /* its rate is the cap's, whatever the pass made it */
  }
  if (f->go_at > s->now)
    m->cap = CAP_ZERO; /* behind the payload queued before its header */
  else if (!m->live || m->avail >= f->size)
    m->cap = CAP_NONE;
  else if (sim_flow_done_bytes(s, f) + 1.0 < m->avail)
    m->cap = CAP_NONE; /* behind: free to go faster */
  else
    m->cap = m->avail > 0 ? CAP_SRC : CAP_ZERO;
}

static double memo_src_rate(const sim_t *s, const live_memo_t *m) {
  return m->src == SIM_NONE ? 0 : s->flows[m->src].rate;
}

/* The cap of a flow now (its sender's incoming rate, 0 while nothing may
 * go), or -1 for none. */
static double memo_cap(const sim_t *s, const live_memo_t *m) {
  if (m->cap == CAP_NONE)
    return -1;
  return m->cap == CAP_ZERO ? 0 : memo_src_rate(s, m);
}

/* Room for n elements in array p (the fill's arrays only grow). */
#define FILL_ROOM(p, n) ((p) = xrealloc((p), (size_t)(n) * sizeof(*(p))))

static void fill_grow(fill_t *w, uint32_t m, uint32_t nl) {
  if (m > w->cap_m) {
    w->cap_m = m > 2u * w->cap_m ? m : 2u * w->cap_m;
    FILL_ROOM(w->ids, w->cap_m);
    FILL_ROOM(w->of, w->cap_m);
    FILL_ROOM(w->caps, w->cap_m);
    FILL_ROOM(w->rate, w->cap_m);
    FILL_ROOM(w->bneck, w->cap_m);
    FILL_ROOM(w->memo, w->cap_m);
    FILL_ROOM(w->list, 3u * (size_t)w->cap_m);
  }
  if (nl > w->cap_l) {
    w->cap_l = nl > 2u * w->cap_l ? nl : 2u * w->cap_l;
    FILL_ROOM(w->rem, w->cap_l);
    FILL_ROOM(w->cnt, w->cap_l);
    FILL_ROOM(w->ver, w->cap_l);
    FILL_ROOM(w->off, w->cap_l + 1u);
    FILL_ROOM(w->pos, w->cap_l);
  }
  /* Each fixed flow pushes its other two links at most. */
  FILL_ROOM(w->heap, (size_t)w->cap_m * 3u + w->cap_l);
}

/* Sets up links and their flows from caps[] (< 0: none); of[j][0..1]
 * (sender's uplink, receiver's downlink) are set already. Returns the
 * number of links. */
static uint32_t fill_links(sim_t *s, fill_t *w) {
  uint32_t n = s->n, base = 2u * n + 1u, npseudo = 0;
  for (uint32_t j = 0; j < w->m; j++)
    w->of[j][2] = w->caps[j] >= 0 ? base + npseudo++ : SIM_NONE;
  uint32_t nl = base + npseudo;
  w->nlinks = nl;
  w->npseudo = npseudo;
  fill_grow(w, w->m, nl);
  for (uint32_t l = 0; l < nl; l++) {
    w->cnt[l] = 0;
    w->ver[l] = 0;
    w->rem[l] = s->cfg.goodput * (l < n    ? s->cfg.up_Bps
                                  : l == n ? s->cfg.origin_Bps
                                           : s->cfg.down_Bps);
  }
  for (uint32_t j = 0; j < w->m; j++) {
    for (int k = 0; k < 3; k++)
      if (w->of[j][k] != SIM_NONE)
        w->cnt[w->of[j][k]]++;
    if (w->of[j][2] != SIM_NONE)
      w->rem[w->of[j][2]] = w->caps[j];
  }
  w->off[0] = 0;
  for (uint32_t l = 0; l < nl; l++)
    w->off[l + 1u] = w->off[l] + w->cnt[l];
  for (uint32_t l = 0; l < nl; l++)
    w->pos[l] = w->off[l];
  for (uint32_t j = 0; j < w->m; j++)
    for (int k = 0; k < 3; k++)
      if (w->of[j][k] != SIM_NONE)
        w->list[w->pos[w->of[j][k]]++] = j;
  return nl;
}

static void fill_rates(sim_t *s, fill_t *w) {
  uint32_t nl = fill_links(s, w);
  w->nheap = 0;
  for (uint32_t j = 0; j < w->m; j++) {
    w->rate[j] = -1; /* not fixed yet */
    w->bneck[j] = 255;
  }
  for (uint32_t l = 0; l < nl; l++)
    if (w->cnt[l] > 0)
      heap_push(w, w->rem[l] / w->cnt[l], l);
  /* Once every flow is fixed what is left in the heap is stale (a link
   * with flows to fix has a current entry): not popped one by one. */
  uint32_t unfixed = w->m;
  while (w->nheap > 0 && unfixed > 0) {
    heap_ent_t e = heap_pop(w);
    uint32_t l = e.link;
    if (e.ver != w->ver[l] || w->cnt[l] == 0)
      continue;
    double share = e.key > 0 ? e.key : 0;
    uint8_t bneck = l < s->n || l == s->n ? SIM_BNECK_UP
                    : l <= 2u * s->n      ? SIM_BNECK_DOWN
                                          : SIM_BNECK_SOURCE;
    for (uint32_t k = w->off[l]; k < w->off[l + 1u]; k++) {
      uint32_t j = w->list[k];
      if (w->rate[j] >= 0)
        continue;
      w->rate[j] = share;
      w->bneck[j] = bneck;
      unfixed--;
      for (int i = 0; i < 3; i++) {
        uint32_t o = w->of[j][i];
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
  for (uint32_t j = 0; j < w->m; j++) {
    sim_flow_t *f = &s->flows[w->ids[j]];
    f->rate = w->rate[j] < 0 ? 0 : w->rate[j];
    if (w->bneck[j] != 255)
      f->bneck = w->bneck[j];
  }
}

/* What happens to a flow before the next recompute, in time order. */
enum { FEV_END, FEV_KICK, FEV_CATCH, FEV_STALL };

static void fev_add(sim_t *s, double t, uint32_t flow, uint32_t what) {
  if (s->nfev == s->fev_cap) {
    s->fev_cap = s->fev_cap ? s->fev_cap * 2u : 1024u;
    s->fev = xrealloc(s->fev, s->fev_cap * sizeof(*s->fev));
  }
  s->fev[s->nfev++] = (sim_fev_t){
      .t = t, .flow = flow, .version = s->flows[flow].version, .what = what};
}

/* Events of f before horizon: its end; an S3 flow nearing its end (a
 * spare lease may start then, origin.c); a live flow catching up with
 * what its sender may forward, or its sender's first buffer filling. */
static void flow_events(sim_t *s, uint32_t id, const live_memo_t *m,
                        double horizon) {
  sim_flow_t *f = &s->flows[id];
  if (f->left <= 0) {
    /* A live upload that waits for its sender's last byte. */
    if (f->kind == SIM_FLOW_ORIGIN || !m->live)
      fev_add(s, s->now, id, FEV_END);
    return;
  }
  double t_end = f->rate > 0 ? s->now + f->left / f->rate : INFINITY;
  if (t_end <= horizon)
    fev_add(s, t_end, id, FEV_END);
  if (f->rate > 0 && f->stall_at < f->size) {
    double t = s->now + (f->stall_at - (f->size - f->left)) / f->rate;
    if (t < t_end && t <= horizon)
      fev_add(s, t > s->now ? t : s->now, id, FEV_STALL);
  }
  if (f->kind == SIM_FLOW_ORIGIN && f->go_at > s->now) {
    if (f->go_at <= horizon)
      fev_add(s, f->go_at, id, FEV_CATCH); /* its timeout ends */
    return;
  }
  if (f->kind == SIM_FLOW_ORIGIN) {
    double lead = s->nodes[f->dst].lead_s;
    double t_ending = t_end - 1.5 * lead;
    if (t_ending > s->now && t_ending <= horizon)
      fev_add(s, t_ending, id, FEV_KICK);
    return;
  }
  if (f->go_at > s->now) {
    if (f->go_at <= horizon)
      fev_add(s, f->go_at, id, FEV_CATCH); /* its header leaves */
    return;
  }
  double avail = m->avail, src_rate = memo_src_rate(s, m), sd = m->src_done;
  if (!m->live || avail >= f->size)
    return;
  double t = INFINITY;
  if (avail <= 0 && src_rate > 0) {
    double piece = flow_piece(s, &s->flows[m->src]);
    /* Its sender's first buffer is written (a byte past it, so that
     * the recompute then sees it). */
    t = s->now + (piece - sd + 1.0) / src_rate;
  } else if (f->rate > src_rate) {
    double gap = avail - sim_flow_done_bytes(s, f);
    if (gap > 1.0)
      t = s->now + gap / (f->rate - src_rate);
  }
  if (t < t_end && t <= horizon)
    fev_add(s, t, id, FEV_CATCH);
}

static int fev_cmp(const void *a, const void *b) {
  const sim_fev_t *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return (x->flow > y->flow) - (x->flow < y->flow);
}

/* A retransmission timeout: f stops for --rto-ms, then goes on. */
static void flow_stall(sim_t *s, uint32_t id) {
  sim_flow_t *f = &s->flows[id];
  f->go_at = s->now + s->cfg.rto_s;
  f->stall_at = sim_flow_done_bytes(s, f) + stall_gap(s);
  s->rto_stalls++;
  sim_rates_dirty(s);
}

/* A flow's bytes are all sent. */
static void flow_ended(sim_t *s, uint32_t id) {
  sim_flow_t *f = &s->flows[id];
  if (f->kind == SIM_FLOW_ORIGIN) {
    sim_on_origin_end(s, id);
    return;
  }
  if (s->nodes[f->src].state[f->chunk] != SIM_DONE) {
    /* A live upload that caught up: its last byte waits for the sender's
     * (the recompute after the sender holds the chunk finishes it). */
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
    if (!f->alive || f->sent || f->version != e.version)
      continue;
    if (e.what == FEV_END)
      flow_ended(s, e.flow);
    else if (e.what == FEV_KICK)
      sim_origin_kick(s, f->dst);
    else if (e.what == FEV_STALL)
      flow_stall(s, e.flow);
    else
      sim_rates_dirty(s);
  }
  if (gen == s->fev_gen && s->fev_pos < s->nfev)
    sim_ev_push(s, s->fev[s->fev_pos].t, EV_FLOW, gen, 0, 0);
}

void sim_net_free(sim_t *s) {
  free(s->flows);
  free(s->flow_free);
  free(s->fev);
  free(F.ids);
  free(F.of);
  free(F.caps);
  free(F.rate);
  free(F.bneck);
  free(F.memo);
  free(F.rem);
  free(F.cnt);
  free(F.ver);
  free(F.off);
  free(F.pos);
  free(F.list);
  free(F.heap);
  memset(&F, 0, sizeof(F));
}

/* Allocations redone while a cap moved by more than this share. */
#define SIM_FILL_PASSES 3
#define SIM_CAP_SLACK 1e-3

void sim_rates(sim_t *s) {
  fill_t *w = &F;
  s->rates_scheduled = false;
  s->rates_dirty = false;
  s->rates_at = s->now;
  s->recomputes++;
  fill_grow(w, s->nflows, 0);
  w->m = 0;
  for (uint32_t i = 0; i < s->nflows; i++) {
    sim_flow_t *f = &s->flows[i];
    if (!f->alive || f->sent) {
      f->rate = 0; /* what every fill leaves on them */
      continue;
    }
    f->left -= f->rate * (s->now - f->t_ref);
    if (f->left < 0)
      f->left = 0;
    f->t_ref = s->now;
    w->ids[w->m++] = i;
  }
  uint32_t ncap = 0;
  for (uint32_t j = 0; j < w->m; j++) {
    sim_flow_t *f = &s->flows[w->ids[j]];
    w->of[j][0] = f->src;
    w->of[j][1] = s->n + 1u + f->dst;
    memo_fill(s, f, &w->memo[j]);
    w->caps[j] = memo_cap(s, &w->memo[j]);
    ncap += w->caps[j] >= 0;
  }
  fill_rates(s, w);
  /* A capped flow took its sender's rate of the allocation before; again
   * with the rates this one gave, while they move. */
  for (int pass = 1; pass < SIM_FILL_PASSES && ncap > 0; pass++) {
    bool moved = false;
    for (uint32_t j = 0; j < w->m; j++) {
      double c = memo_cap(s, &w->memo[j]), *cap = &w->caps[j];
      if ((c < 0) != (*cap < 0) ||
          (c >= 0 && fabs(c - *cap) > SIM_CAP_SLACK * (*cap + 1.0)))
        moved = true;
      *cap = c;
    }
    if (!moved)
      break;
    fill_rates(s, w);
  }
  /* A flow's piece follows its first rate, and stays (what its receiver
   * may forward never shrinks). */
  for (uint32_t j = 0; j < w->m; j++) {
    sim_flow_t *f = &s->flows[w->ids[j]];
    if (f->piece == 0 && f->rate > 0)
      f->piece = sim_piece_bytes(s, f->rate);
  }
  /* A live upload whose sender has a buffer written sends its first
   * piece, and with it the header its requester waits for. */
  for (uint32_t j = 0; j < w->m; j++) {
    const live_memo_t *m = &w->memo[j];
    if (s->flows[w->ids[j]].unheaded && (!m->live || m->avail > 0))
      sim_upload_header(s, w->ids[j]);
  }
  double horizon = s->cfg.quantum_s > 0 ? s->now + s->cfg.quantum_s : INFINITY;
  s->nfev = s->fev_pos = 0;
  s->fev_gen++;
  for (uint32_t j = 0; j < w->m; j++) {
    sim_flow_t *f = &s->flows[w->ids[j]];
    f->paced = w->caps[j] >= 0 && f->rate >= w->caps[j] - 1.0;
    f->version++;
    flow_events(s, w->ids[j], &w->memo[j], horizon);
  }
  if (s->nfev > 1)
    qsort(s->fev, s->nfev, sizeof(*s->fev), fev_cmp);
  if (s->nfev > 0)
    sim_ev_push(s, s->fev[0].t, EV_FLOW, s->fev_gen, 0, 0);
  if (s->cfg.quantum_s > 0 && s->active_flows > 0 && !s->rates_scheduled) {
    s->rates_scheduled = true;
    sim_ev_push(s, horizon, EV_RATES, 0, 0, 0);
  }
}
