/* sim_nbr.c - ws-sim's neighbours: dials and slots, what each neighbour
 * announced (views, chunks arriving there, chunks hidden after a refusal),
 * and p2pd's swarm tick (progress deadlines, request timeouts, slots lent
 * given back).
 *
 * Slots re-state neighbor.c and neighbor_conn.c: a node dials the peers a
 * tracker reply names while it has dialed fewer than --max-neighbors /
 * --dial-share (PEER_NBR_DIAL_SHARE) and has room (fewer connections than
 * --max-neighbors, or fewer than that plus PEER_NBR_SPARE with a
 * neighbour idle PEER_NBR_IDLE_MS), or while it has dialed fewer than
 * PEER_NBR_DIALED_MIN. When the handshake is done (2 RTT), each side with
 * every slot taken closes its idlest neighbour if one is idle, else lends
 * a spare slot, else refuses (the dialer keeps it anyway while it has
 * dialed fewer than PEER_NBR_DIALED_MIN). The tick closes idle neighbours
 * while more than --max-neighbors are up.
 *
 * Deadlines re-state neighbor_deadline.c: a chunk from a neighbour must be
 * whole by PEER_CHUNK_GRACE_MS + len / PEER_CHUNK_FLOOR_BPS from its
 * header, or, when another neighbour has it too, by PEER_CHUNK_GRACE_MS +
 * PEER_CHUNK_SLOW_FACTOR x len / typical; while the neighbour still says
 * HAVE "p" for it (up to PEER_CHUNK_LIVE_WAIT_MS) the clock waits. A miss
 * benches the neighbour (PEER_NBR_BENCH_MS); a chunk whose bytes are
 * moving cannot be cut short (its piece is being read): the neighbour is
 * closed; one that waits between pieces is canceled and hidden, and
 * PEER_NBR_MISSES_MAX misses close the neighbour. A request with no header
 * after PEER_REQUEST_TIMEOUT_MS is canceled and counts as a miss.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static double ms(uint32_t v) {
  return v / 1000.0;
}

/* ---- views ------------------------------------------------------------- */

/* c->live_bits afresh from c->live[] (after an entry left it). */
static void live_bits_redo(sim_conn_t *c) {
  c->live_bits = 0;
  for (uint32_t i = 0; i < c->nlive; i++)
    c->live_bits |= (uint64_t)1 << (c->live[i] & 63u);
}

static void live_forget(sim_conn_t *c, uint32_t g) {
  if (!((c->live_bits >> (g & 63u)) & 1u))
    return; /* not listed */
  for (uint32_t i = 0; i < c->nlive; i++) {
    if (c->live[i] == g) {
      c->live[i] = c->live[--c->nlive];
      c->live_next = c->nlive;
      live_bits_redo(c);
      return;
    }
  }
}

void sim_view_learn(sim_t *s, sim_conn_t *c, uint32_t g, bool live) {
  if (!sim_bit(c->view, g)) {
    sim_bit_set(c->view, g);
    s->nodes[c->client].avail[g]++;
  }
  if (!live) {
    live_forget(c, g);
  } else if (!sim_conn_live(c, g)) {
    /* A ring: the oldest is forgotten (still listed, like any). */
    bool full = c->nlive == PEER_LIVE_MAX;
    c->live[c->live_next] = g;
    if (c->nlive < PEER_LIVE_MAX)
      c->nlive++;
    c->live_next = c->nlive < PEER_LIVE_MAX
                       ? c->nlive
                       : (c->live_next + 1) % PEER_LIVE_MAX;
    if (full)
      live_bits_redo(c); /* the oldest's bit may go */
    else
      c->live_bits |= (uint64_t)1 << (g & 63u);
  }
}

void sim_view_hide(sim_t *s, sim_conn_t *c, uint32_t g) {
  if (c->view == NULL || !sim_bit(c->view, g))
    return;
  sim_bit_clear(c->view, g);
  s->nodes[c->client].avail[g]--;
  if (sim_conn_live(c, g)) {
    live_forget(c, g);
    return;
  }
  if (c->nhidden < PEER_REJECT_HIDE_MAX) {
    c->hidden[c->nhidden] = g;
    c->hidden_until[c->nhidden] = s->now + ms(PEER_REJECT_HIDE_MS);
    c->nhidden++;
  }
}

static void view_unhide(sim_t *s, sim_conn_t *c) {
  for (uint32_t h = 0; h < c->nhidden;) {
    if (c->hidden_until[h] > s->now) {
      h++;
      continue;
    }
    uint32_t g = c->hidden[h];
    if (!sim_bit(c->view, g)) {
      sim_bit_set(c->view, g);
      s->nodes[c->client].avail[g]++;
    }
    c->nhidden--;
    c->hidden[h] = c->hidden[c->nhidden];
    c->hidden_until[h] = c->hidden_until[c->nhidden];
  }
}

/* The client of r takes its server's HAVE (conn_on_have). */
static void have_one(sim_t *s, uint32_t r, uint32_t g, bool live) {
  sim_conn_t *c = &s->conns[r];
  sim_node_t *n = &s->nodes[c->client];
  sim_view_learn(s, c, g, live);
  if (n->ntree > 0 && c->server == n->tparent[g % n->ntree] &&
      !sim_bit(n->have, g))
    n->tree_fed_s[g % n->ntree] = s->now; /* swarm_rel_tree_offer */
  if (c->nreqs < s->cfg.pol.depth)
    sim_node_fill_conn(s, r);
}

/* node's HAVE reaches its neighbours half an RTT after it was sent; where
 * payload is queued before it (frame_queue), later, one by one. */
void sim_on_have(sim_t *s, uint32_t node, uint32_t g, bool live) {
  sim_node_t *n = &s->nodes[node];
  for (uint32_t k = 0; k < n->nconn; k++) {
    uint32_t r = sim_conn_rev(n->conns[k]);
    sim_conn_t *c = &s->conns[r];
    if (!c->up)
      continue;
    if (s->cfg.frame_queue) {
      double at = s->now + sim_frame_queue_s(s, c);
      if (at < c->fifo_s)
        at = c->fifo_s;
      c->fifo_s = at;
      if (at > s->now) {
        sim_ev_push(s, at, EV_HAVE1, r, g, live);
        continue;
      }
    }
    have_one(s, r, g, live);
  }
}

void sim_on_have1(sim_t *s, uint32_t r, uint32_t g, bool live) {
  if (s->conns[r].up)
    have_one(s, r, g, live);
}

/* ---- connections ----------------------------------------------------------
 */

static uint32_t conn_new(sim_t *s, uint32_t client, uint32_t server) {
  if (s->nconns == s->conns_cap) {
    s->conns_cap = s->conns_cap ? s->conns_cap * 2u : 1024u;
    s->conns = realloc(s->conns, s->conns_cap * sizeof(*s->conns));
    if (s->conns == NULL) {
      fprintf(stderr, "ws-sim: out of memory (connections)\n");
      exit(1);
    }
  }
  uint32_t id = s->nconns++;
  sim_conn_t *c = &s->conns[id];
  memset(c, 0, sizeof(*c));
  c->client = client;
  c->server = server;
  c->view = calloc(s->words, sizeof(uint64_t));
  sim_node_t *n = &s->nodes[client];
  if (n->nconn == n->conns_cap) {
    n->conns_cap = n->conns_cap ? n->conns_cap * 2u : 16u;
    n->conns = realloc(n->conns, n->conns_cap * sizeof(uint32_t));
  }
  if (c->view == NULL || n->conns == NULL) {
    fprintf(stderr, "ws-sim: out of memory (connections)\n");
    exit(1);
  }
  n->conns[n->nconn++] = id;
  return id;
}

/* Whether node's neighbour across c (c: node is its client) is idle for
 * node (peer_neighbor_idle): nothing arriving from it, nothing sent to it
 * or queued for it, no byte either way for PEER_NBR_IDLE_MS. */
static bool conn_idle(const sim_t *s, const sim_conn_t *c) {
  const sim_conn_t *r = &s->conns[c->rev];
  double last = c->useful_s > r->useful_s ? c->useful_s : r->useful_s;
  return c->up && c->nups == 0 && r->nups == 0 && r->sq_len == 0 &&
         s->now - last >= ms(PEER_NBR_IDLE_MS);
}

/* node's idlest neighbour (peer_neighbors_idlest), as the conn where node
 * is the client, or SIM_NONE. */
static uint32_t idlest(const sim_t *s, uint32_t node) {
  const sim_node_t *n = &s->nodes[node];
  uint32_t best = SIM_NONE;
  double oldest = 0;
  for (uint32_t k = 0; k < n->nconn; k++) {
    const sim_conn_t *c = &s->conns[n->conns[k]];
    const sim_conn_t *r = &s->conns[c->rev];
    double last = c->useful_s > r->useful_s ? c->useful_s : r->useful_s;
    if (conn_idle(s, c) && (best == SIM_NONE || last < oldest)) {
      best = n->conns[k];
      oldest = last;
    }
  }
  return best;
}

/* One direction goes: its requests, queue, transfers and view. */
static void conn_drop_dir(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[c->client];
  bool was_up = c->up;
  c->up = false; /* no queue_run, no more requests on it */
  c->closed = true;
  while (c->nreqs > 0)
    (void)sim_req_drop(s, cid, c->reqs[c->nreqs - 1u], false);
  c->sq_len = 0;
  sim_node_line_leave(s, cid);
  while (c->nups > 0)
    sim_download_fail(s, c->ups[c->nups - 1u], SIM_FAIL_CLOSED);
  if (was_up) {
    for (uint32_t w = 0; w < s->words; w++) {
      uint64_t bits = c->view[w];
      while (bits) {
        n->avail[w * 64u + (uint32_t)__builtin_ctzll(bits)]--;
        bits &= bits - 1u;
      }
    }
    n->nready--;
  }
  free(c->view);
  c->view = NULL;
  n->ndialed -= c->dialed;
  for (uint32_t k = 0; k < n->nconn; k++)
    if (n->conns[k] == cid) {
      n->conns[k] = n->conns[--n->nconn];
      break;
    }
}

/* The pair of c goes (both directions); both nodes ask elsewhere. */
static void conn_close(sim_t *s, uint32_t cid) {
  uint32_t rev = s->conns[cid].rev;
  uint32_t a = s->conns[cid].client, b = s->conns[cid].server;
  if (s->conns[cid].closed)
    return;
  conn_drop_dir(s, cid);
  conn_drop_dir(s, rev);
  sim_node_fill(s, a);
  sim_node_fill(s, b);
}

/* peer_neighbors_room: a slot, or a spare one while a neighbour idles. */
static bool room(const sim_t *s, uint32_t node) {
  const sim_node_t *n = &s->nodes[node];
  uint32_t max = s->cfg.pol.max_nbrs;
  if (n->nconn < max)
    return true;
  return n->nconn < max + PEER_NBR_SPARE && idlest(s, node) != SIM_NONE;
}

bool sim_room_dial(sim_t *s, uint32_t node) {
  sim_node_t *n = &s->nodes[node];
  uint32_t share = s->cfg.pol.max_nbrs / s->cfg.pol.dial_share;
  if (n->ndialed < PEER_NBR_DIALED_MIN)
    return true;
  if (n->ndialed < share)
    return room(s, node);
  if (n->nconn >= s->cfg.pol.max_nbrs || !s->cfg.pol.fill_dial) {
    n->short_since = -1;
    return false;
  }
  if (n->short_since < 0)
    n->short_since = s->now;
  return s->now - n->short_since >= PEER_NBR_INBOUND_WAIT_MS / 1e3;
}

void sim_node_dial(sim_t *s, uint32_t from, uint32_t to) {
  const sim_node_t *a = &s->nodes[from];
  if (from == to)
    return;
  for (uint32_t k = 0; k < a->nconn; k++)
    if (s->conns[a->conns[k]].server == to)
      return; /* known (peer_neighbors_knows) */
  /* Made in pairs only, ids 2k and 2k + 1 (sim_conn_rev). */
  uint32_t c1 = conn_new(s, from, to);
  uint32_t c2 = conn_new(s, to, from);
  assert(c2 == sim_conn_rev(c1) && c1 == sim_conn_rev(c2));
  s->conns[c1].rev = c2;
  s->conns[c2].rev = c1;
  s->conns[c1].dialed = true;
  s->nodes[from].ndialed++;
  s->dials++;
  /* TCP's handshake, then HELLO and AUTH both ways. */
  sim_ev_push(s, s->now + 2 * s->cfg.rtt_s, EV_CONN_UP, c1, 0, 0);
}

/* conn_on_ready's slot check for node: true when it keeps the new
 * connection (making room if it must). */
static bool ready_ok(sim_t *s, uint32_t node, bool dialer) {
  sim_node_t *n = &s->nodes[node];
  if (n->nready < s->cfg.pol.max_nbrs)
    return true;
  uint32_t v = idlest(s, node);
  if (v != SIM_NONE) {
    conn_close(s, v); /* idle: it makes room */
    s->replaced++;
    return true;
  }
  if (n->nready < s->cfg.pol.max_nbrs + PEER_NBR_SPARE)
    return true; /* a spare slot, for a while */
  return dialer && n->ndialed - 1u < PEER_NBR_DIALED_MIN;
}

/* BITFIELD (and HAVE "p" for the S3 fetches) of c's server. */
static void conn_bitfield(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  const sim_node_t *srv = &s->nodes[c->server];
  c->up = true;
  c->useful_s = s->now;
  s->nodes[c->client].nready++;
  for (uint32_t w = 0; w < s->words; w++) {
    uint64_t bits = srv->have[w];
    while (bits) {
      uint32_t g = w * 64u + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1u;
      sim_view_learn(s, c, g, false);
    }
  }
  for (uint32_t i = 0; i < srv->nfetch; i++)
    sim_view_learn(s, c, srv->fetch[i].chunk, true);
}

void sim_on_conn_up(sim_t *s, uint32_t c1) {
  uint32_t c2 = s->conns[c1].rev;
  uint32_t dialer = s->conns[c1].client, acceptor = s->conns[c1].server;
  if (s->conns[c1].closed)
    return;
  if (!ready_ok(s, acceptor, false) || !ready_ok(s, dialer, true)) {
    s->conns_refused++;
    conn_drop_dir(s, c1);
    conn_drop_dir(s, c2);
    return;
  }
  conn_bitfield(s, c1);
  conn_bitfield(s, c2);
  sim_node_fill_conn(s, c1);
  sim_node_fill_conn(s, c2);
}

/* ---- the tick -------------------------------------------------------------
 */

/* How long chunk f may take from its sender (nd_rx_deadline). */
static double rx_deadline(const sim_t *s, const sim_conn_t *c,
                          const sim_flow_t *f) {
  const sim_node_t *n = &s->nodes[c->client];
  double d = ms(PEER_CHUNK_GRACE_MS) + f->size / PEER_CHUNK_FLOOR_BPS;
  uint32_t others = n->avail[f->chunk] - (uint32_t)sim_bit(c->view, f->chunk);
  if (n->rx_Bps > 0 && others > 0) {
    double rel =
        ms(PEER_CHUNK_GRACE_MS) + PEER_CHUNK_SLOW_FACTOR * f->size / n->rx_Bps;
    if (rel < d)
      d = rel;
  }
  return d;
}

/* A miss of c's server (peer_neighbor_missed): benched; true when it has
 * missed too often and goes. */
static bool missed(sim_t *s, sim_conn_t *c) {
  double until = s->now + ms(PEER_NBR_BENCH_MS);
  s->deadline_misses++;
  if (c->busy_until < until)
    c->busy_until = until;
  return ++c->misses >= PEER_NBR_MISSES_MAX;
}

/* peer_neighbor_tick for the neighbour across c (node is its client):
 * false when it was closed. */
static bool conn_tick(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  view_unhide(s, c);
  if (!s->cfg.pol.deadlines)
    return true;
  for (uint32_t i = 0; i < c->nups; i++) {
    uint32_t fid = c->ups[i];
    sim_flow_t *f = &s->flows[fid];
    if (!f->accepted || f->discard || f->sent)
      continue;
    if (sim_conn_live(c, f->chunk) &&
        s->now - f->rx_first <= ms(PEER_CHUNK_LIVE_WAIT_MS)) {
      /* Still arriving there: paced by its source, not its fault. */
      f->rx_start = s->now;
      f->late = true;
      continue;
    }
    if (s->now - f->rx_start <= rx_deadline(s, c, f))
      continue;
    bool drop = missed(s, c);
    if (f->rate > 0 || drop) {
      /* Its piece is being read (or it missed again): closed. */
      s->dropped_slow++;
      conn_close(s, cid);
      return false;
    }
    /* Between pieces: canceled, asked elsewhere. */
    uint32_t g = f->chunk;
    sim_ev_push(s, sim_frame_at(s, c->rev), EV_CANCEL, cid, g, 0);
    sim_view_hide(s, c, g);
    sim_download_fail(s, fid, SIM_FAIL_CANCELED);
    c = &s->conns[cid];
    i = (uint32_t)-1; /* c->ups changed: from the start */
  }
  uint32_t late = 0;
  for (uint32_t i = 0; i < c->nreqs;) {
    if (s->now - c->req_sent[i] > ms(PEER_REQUEST_TIMEOUT_MS)) {
      s->req_timeouts++;
      late++;
      (void)sim_req_drop(s, cid, c->reqs[i], true);
      continue;
    }
    i++;
  }
  if (late > 0 && missed(s, c)) {
    s->dropped_slow++;
    conn_close(s, cid);
    return false;
  }
  return true;
}

void sim_on_tick(sim_t *s, uint32_t node) {
  sim_node_t *n = &s->nodes[node];
  for (uint32_t k = 0; k < n->nconn;) {
    uint32_t cid = n->conns[k];
    if (!s->conns[cid].up || conn_tick(s, cid))
      k++;
    /* else closed: n->conns[k] is another one now */
  }
  /* Spare slots lent are given back (peer_neighbors_trim). */
  uint32_t v;
  while (n->nready > s->cfg.pol.max_nbrs && (v = idlest(s, node)) != SIM_NONE) {
    conn_close(s, v);
    s->replaced++;
  }
  sim_node_fill(s, node); /* busy neighbours askable again */
  sim_origin_kick(s, node);
}
