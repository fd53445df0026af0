/* sim_node.c - ws-sim's nodes as peers: connections, HAVEs, request
 * pipelines, upload slots and queues.
 *
 * The choice of chunk is p2pd's own (swarm/pick_rank.h) inside a scan
 * that re-states peer_picker_fill (picker.c): from a random chunk, at most
 * PEER_PICK_SCAN_MAX chunks, up to PEER_PIPELINE_DEPTH requests per
 * neighbour, endgame when no chunk is MISSING. The server side re-states
 * upload.c: a queue of PEER_SERVE_QUEUE_MAX per neighbour, one held chunk
 * at a time per neighbour with chunks still arriving from S3 beside it (at
 * most WS_MUX_MAX uploads), PEER_UPLOADS_MAX slots per node of which the
 * last PEER_UPLOADS_SPARE go only to a neighbour holding none, and a
 * REJECT busy (retry after PEER_BUSY_RETRY_MS) when every slot is taken.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "sim.h"
#include "swarm/pick_rank.h"

static double half_rtt(const sim_t *s) {
  return s->cfg.rtt_s / 2;
}

/* ---- connections ---------------------------------------------------- */

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
  if (c->view == NULL) {
    fprintf(stderr, "ws-sim: out of memory (views)\n");
    exit(1);
  }
  sim_node_t *n = &s->nodes[client];
  n->conns[n->nconn++] = id;
  return id;
}

/* Whether the connection of c (both directions) is idle: nothing asked
 * or sent either way for PEER_NBR_IDLE_MS. */
static bool conn_idle(const sim_t *s, const sim_conn_t *c) {
  const sim_conn_t *r = &s->conns[c->rev];
  double last = c->active_s > r->active_s ? c->active_s : r->active_s;
  return c->up && c->nreqs == 0 && r->nreqs == 0 && c->nups == 0 &&
         r->nups == 0 && c->sq_len == 0 && r->sq_len == 0 &&
         s->now - last >= PEER_NBR_IDLE_MS / 1000.0;
}

static void conn_drop_dir(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[c->client];
  for (uint32_t w = 0; w < s->words; w++) {
    uint64_t bits = c->view[w];
    while (bits) {
      n->avail[w * 64u + (uint32_t)__builtin_ctzll(bits)]--;
      bits &= bits - 1u;
    }
  }
  free(c->view);
  c->view = NULL;
  c->up = false;
  c->closed = true;
  for (uint32_t k = 0; k < n->nconn; k++)
    if (n->conns[k] == cid) {
      n->conns[k] = n->conns[--n->nconn];
      break;
    }
}

/* A node whose neighbour slots are taken makes room for a new connection
 * by closing the neighbour idle longest, if one is idle (swarm.c: slots,
 * PEER_NBR_IDLE_MS). */
static bool make_room(sim_t *s, uint32_t node) {
  sim_node_t *n = &s->nodes[node];
  uint32_t best = SIM_NONE;
  double oldest = 0;
  for (uint32_t k = 0; k < n->nconn; k++) {
    const sim_conn_t *c = &s->conns[n->conns[k]];
    const sim_conn_t *r = &s->conns[c->rev];
    double last = c->active_s > r->active_s ? c->active_s : r->active_s;
    if (conn_idle(s, c) && (best == SIM_NONE || last < oldest)) {
      best = n->conns[k];
      oldest = last;
    }
  }
  if (best == SIM_NONE)
    return false;
  uint32_t rev = s->conns[best].rev;
  conn_drop_dir(s, best);
  conn_drop_dir(s, rev);
  s->replaced++;
  return true;
}

void sim_node_dial(sim_t *s, uint32_t from, uint32_t to) {
  sim_node_t *a = &s->nodes[from], *b = &s->nodes[to];
  if (from == to || a->nconn >= PEER_MAX_NEIGHBORS_DEFAULT)
    return;
  for (uint32_t k = 0; k < a->nconn; k++)
    if (s->conns[a->conns[k]].server == to)
      return;
  /* The acceptor: an idle neighbour's slot, else a spare one. */
  if (b->nconn >= PEER_MAX_NEIGHBORS_DEFAULT && !make_room(s, to) &&
      b->nconn >= SIM_CONN_MAX)
    return;
  uint32_t c1 = conn_new(s, from, to);
  uint32_t c2 = conn_new(s, to, from);
  s->conns[c1].rev = c2;
  s->conns[c2].rev = c1;
  /* TCP's handshake, then HELLO and AUTH both ways. */
  sim_ev_push(s, s->now + 2 * s->cfg.rtt_s, EV_CONN_UP, c1, 0, 0);
}

static void live_add(sim_conn_t *c, uint32_t g) {
  if (c->nlive == PEER_LIVE_MAX) {
    memmove(c->live, c->live + 1, (PEER_LIVE_MAX - 1u) * sizeof(uint32_t));
    c->nlive--; /* the oldest is forgotten (still held, like any) */
  }
  c->live[c->nlive++] = g;
}

static bool live_drop(sim_conn_t *c, uint32_t g) {
  for (uint32_t i = 0; i < c->nlive; i++)
    if (c->live[i] == g) {
      c->live[i] = c->live[--c->nlive];
      return true;
    }
  return false;
}

/* The client of c learns that c's server has (or fetches) chunk g. */
static void view_learn(sim_t *s, sim_conn_t *c, uint32_t g, bool live) {
  if (!sim_bit(c->view, g)) {
    sim_bit_set(c->view, g);
    s->nodes[c->client].avail[g]++;
    if (live)
      live_add(c, g);
  } else if (!live) {
    live_drop(c, g);
  }
}

/* BITFIELD (and HAVE "p" for the S3 fetches) of c's server, at once. */
static void conn_bitfield(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  const sim_node_t *srv = &s->nodes[c->server];
  if (c->closed)
    return;
  c->up = true;
  c->active_s = s->now;
  for (uint32_t w = 0; w < s->words; w++) {
    uint64_t bits = srv->have[w];
    while (bits) {
      uint32_t g = w * 64u + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1u;
      view_learn(s, c, g, false);
    }
  }
  for (uint32_t i = 0; i < srv->nfetch; i++)
    view_learn(s, c, srv->fetch[i].chunk, true);
}

void sim_on_conn_up(sim_t *s, uint32_t c1) {
  uint32_t c2 = s->conns[c1].rev;
  if (s->conns[c1].closed)
    return;
  conn_bitfield(s, c1);
  conn_bitfield(s, c2);
  sim_node_fill_conn(s, c1);
  sim_node_fill_conn(s, c2);
}

void sim_on_have(sim_t *s, uint32_t node, uint32_t chunk, bool live) {
  sim_node_t *n = &s->nodes[node];
  for (uint32_t k = 0; k < n->nconn; k++) {
    uint32_t r = s->conns[n->conns[k]].rev;
    sim_conn_t *c = &s->conns[r];
    if (!c->up)
      continue;
    view_learn(s, c, chunk, live);
    if (s->nodes[c->client].state[chunk] != SIM_DONE)
      sim_node_fill_conn(s, r);
  }
}

/* ---- the picker ------------------------------------------------------ */

typedef struct {
  uint32_t g;
  peer_pick_rank_t rank;
} sim_pick_t;

static bool req_pending(const sim_conn_t *c, uint32_t g) {
  for (uint32_t i = 0; i < c->nreqs; i++)
    if (c->reqs[i] == g)
      return true;
  return false;
}

static bool is_live(const sim_conn_t *c, uint32_t g) {
  for (uint32_t i = 0; i < c->nlive; i++)
    if (c->live[i] == g)
      return true;
  return false;
}

/* picker_kind + picker_consider (picker.c) for chunk g offered on c. */
static void pick_consider(sim_t *s, const sim_conn_t *c, uint32_t g,
                          sim_pick_t *best, int *endgame) {
  const sim_node_t *n = &s->nodes[c->client];
  peer_pick_chunk_t ch = {.missing = n->state[g] == SIM_MISSING,
                          .inflight = n->state[g] == SIM_INFLIGHT,
                          .nreq = n->nreq[g],
                          .rx_busy = n->rx_busy[g] != 0,
                          .pending_here = req_pending(c, g)};
  bool found = best->g != SIM_NONE;
  peer_pick_kind_t k = peer_pick_kind(&ch, found && best->rank.dup == 0);
  if (k == PEER_PICK_NOT)
    return;
  if (k == PEER_PICK_ENDGAME) {
    if (*endgame < 0)
      *endgame = n->nmissing == 0;
    if (!*endgame)
      return;
  }
  peer_pick_rank_t rank = {.dup = (int)k,
                           .live = c->nlive > 0 && is_live(c, g),
                           .tier = s->chunk_tier[g]};
  if (!peer_pick_may_beat(&rank, found ? &best->rank : NULL))
    return;
  rank.avail = n->avail[g];
  if (!peer_pick_beats(&rank, found ? &best->rank : NULL))
    return;
  best->g = g;
  best->rank = rank;
}

/* peer_picker_fill's scan: from a random chunk, PEER_PICK_SCAN_MAX at
 * most, over what c's server has and we lack (a word at a time). */
static uint32_t pick(sim_t *s, const sim_conn_t *c) {
  const sim_node_t *n = &s->nodes[c->client];
  uint32_t total = s->chunks;
  uint32_t scan = total < PEER_PICK_SCAN_MAX ? total : PEER_PICK_SCAN_MAX;
  uint32_t g = (uint32_t)(sim_rand(s) % total), cnt = 0;
  sim_pick_t best = {.g = SIM_NONE};
  int endgame = -1;
  while (cnt < scan) {
    uint32_t w = g >> 6, off = g & 63u;
    uint64_t bits = (c->view[w] & ~n->have[w]) >> off;
    if (bits == 0) {
      uint32_t next = (w + 1u) * 64u;
      cnt += (next < total ? next : total) - g;
      g = next < total ? next : 0;
      continue;
    }
    uint32_t step = (uint32_t)__builtin_ctzll(bits);
    if (cnt + step >= scan)
      break;
    cnt += step + 1u;
    g += step;
    pick_consider(s, c, g, &best, &endgame);
    g = g + 1u < total ? g + 1u : 0;
  }
  return best.g;
}

void sim_node_fill_conn(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[c->client];
  if (!c->up || !n->joined || n->done || s->now < c->busy_until)
    return;
  while (c->nreqs < PEER_PIPELINE_DEPTH) {
    uint32_t g = pick(s, c);
    if (g == SIM_NONE)
      return;
    c->reqs[c->nreqs++] = g;
    c->active_s = s->now;
    n->nreq[g]++;
    if (n->state[g] == SIM_MISSING) {
      n->state[g] = SIM_INFLIGHT;
      n->nmissing--;
    }
    sim_ev_push(s, s->now + half_rtt(s), EV_REQ, cid, g, 0);
  }
}

void sim_node_fill(sim_t *s, uint32_t node) {
  sim_node_t *n = &s->nodes[node];
  for (uint32_t k = 0; k < n->nconn; k++)
    if (s->conns[n->conns[k]].nreqs < PEER_PIPELINE_DEPTH)
      sim_node_fill_conn(s, n->conns[k]);
}

/* Drops request g from c (answered, refused or canceled); the chunk is
 * MISSING again when nothing else fetches it. */
static bool req_drop(sim_t *s, sim_conn_t *c, uint32_t g) {
  sim_node_t *n = &s->nodes[c->client];
  for (uint32_t i = 0; i < c->nreqs; i++) {
    if (c->reqs[i] != g)
      continue;
    c->reqs[i] = c->reqs[--c->nreqs];
    n->nreq[g]--;
    if (n->nreq[g] == 0 && !n->rx_busy[g] && n->state[g] == SIM_INFLIGHT) {
      n->state[g] = SIM_MISSING;
      n->nmissing++;
    }
    return true;
  }
  return false;
}

/* The node's other requests for g go (CANCEL): its bytes come elsewhere. */
static void req_cancel_others(sim_t *s, uint32_t node, uint32_t g,
                              uint32_t keep) {
  sim_node_t *n = &s->nodes[node];
  for (uint32_t k = 0; k < n->nconn; k++)
    if (n->conns[k] != keep && req_drop(s, &s->conns[n->conns[k]], g))
      sim_node_fill_conn(s, n->conns[k]);
}

/* ---- the server side --------------------------------------------------- */

static bool srv_held(const sim_t *s, const sim_conn_t *c, uint32_t g) {
  return s->nodes[c->server].state[g] == SIM_DONE;
}

/* upload_queue_choose (upload.c), every neighbour speaking "mux". */
static int queue_choose(const sim_t *s, const sim_conn_t *c) {
  int first_live = -1;
  if (c->nups == WS_MUX_MAX)
    return -1;
  for (uint32_t k = 0; k < c->sq_len; k++) {
    bool held = srv_held(s, c, c->sq[k]);
    if (c->nups == 0) {
      if (held)
        return (int)k;
      continue;
    }
    if (held) {
      if (c->nheld == 0)
        return (int)k;
    } else if (first_live < 0) {
      first_live = (int)k;
    }
  }
  return c->nups == 0 ? 0 : first_live;
}

static unsigned upload_cap(const sim_conn_t *c) {
  return c->nups == 0 ? PEER_UPLOADS_MAX
                      : PEER_UPLOADS_MAX - PEER_UPLOADS_SPARE;
}

static void upload_start(sim_t *s, uint32_t cid, uint32_t g) {
  sim_conn_t *c = &s->conns[cid];
  bool held = srv_held(s, c, g);
  sim_flow_start(s, c->server, c->client, SIM_FLOW_PEER, g, cid,
                 held ? SIM_NONE : 0);
  c = &s->conns[cid];
  c->active_s = s->now;
  c->nups++;
  c->nheld += held;
  s->nodes[c->server].uploads++;
  /* Its CHUNK header: the first wins, the client cancels the rest. */
  s->nodes[c->client].rx_busy[g] = 1;
  s->nodes[c->client].last_rx_s = s->now;
  req_cancel_others(s, c->client, g, cid);
}

static void reject(sim_t *s, uint32_t cid, uint32_t g) {
  s->rejects++;
  sim_ev_push(s, s->now + half_rtt(s), EV_REJECT, cid, g, 0);
}

/* upload_queue_run (upload.c). */
static void queue_run(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  int k;
  while (c->sq_len > 0 && (k = queue_choose(s, c)) >= 0) {
    const sim_node_t *srv = &s->nodes[c->server];
    if (srv->uploads >= upload_cap(c) && c->nups > 0)
      break; /* the next to end makes room */
    uint32_t g = c->sq[k];
    memmove(c->sq + k, c->sq + k + 1,
            (c->sq_len - (uint32_t)k - 1u) * sizeof(uint32_t));
    c->sq_len--;
    if (!req_pending(c, g))
      continue; /* canceled on its way */
    if (srv->uploads < upload_cap(c))
      upload_start(s, cid, g);
    else
      reject(s, cid, g);
    c = &s->conns[cid];
  }
}

void sim_on_req(sim_t *s, uint32_t cid, uint32_t g) {
  sim_conn_t *c = &s->conns[cid];
  if (!req_pending(c, g))
    return; /* canceled before it arrived */
  if (c->sq_len == PEER_SERVE_QUEUE_MAX) {
    reject(s, cid, g);
    return;
  }
  c->sq[c->sq_len++] = g;
  queue_run(s, cid);
}

void sim_on_reject(sim_t *s, uint32_t cid, uint32_t g) {
  sim_conn_t *c = &s->conns[cid];
  if (!req_drop(s, c, g))
    return;
  c->busy_until = s->now + PEER_BUSY_RETRY_MS / 1000.0;
  sim_ev_push(s, c->busy_until, EV_FILL, c->client, 0, 0);
  sim_node_fill(s, c->client); /* the chunk may be asked elsewhere */
}

void sim_on_upload_end(sim_t *s, uint32_t flow) {
  sim_flow_t f = s->flows[flow];
  sim_flow_end(s, flow);
  sim_conn_t *c = &s->conns[f.conn];
  c->nups--;
  c->nheld -= f.live_of == SIM_NONE;
  s->nodes[c->server].uploads--;
  s->peer_bytes += (uint64_t)f.size;
  sim_ev_push(s, s->now + half_rtt(s), EV_CHUNK, f.conn, f.chunk, 0);
  queue_run(s, f.conn);
}

void sim_on_chunk(sim_t *s, uint32_t cid, uint32_t g) {
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[c->client];
  c->active_s = s->now;
  n->rx_busy[g] = 0;
  n->last_rx_s = s->now;
  req_drop(s, c, g);
  if (n->state[g] == SIM_DONE)
    s->dup_bytes += s->chunk_len[g];
  else
    sim_node_got(s, c->client, g);
  sim_node_fill(s, c->client);
}

void sim_node_got(sim_t *s, uint32_t node, uint32_t g) {
  sim_node_t *n = &s->nodes[node];
  if (n->state[g] == SIM_MISSING)
    n->nmissing--;
  n->state[g] = SIM_DONE;
  sim_bit_set(n->have, g);
  n->nhave++;
  if (n->nhave == s->chunks) {
    n->done = true;
    n->done_s = s->now;
    s->done_nodes++;
  }
  req_cancel_others(s, node, g, SIM_NONE);
  sim_ev_push(s, s->now + half_rtt(s), EV_HAVE, node, g, 0);
  sim_ev_push(s, s->now + half_rtt(s), EV_TRK_HAVE, node, g, 0);
}
