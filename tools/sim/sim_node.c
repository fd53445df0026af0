/* sim_node.c - ws-sim's nodes as peers: request pipelines, the server's
 * queue and upload slots, and a chunk's arrival.
 *
 * The choice of chunk is p2pd's own (swarm/pick_rank.h) inside a scan
 * that re-states peer_picker_fill (picker.c): from a random chunk, at most
 * PEER_PICK_SCAN_MAX chunks, endgame when no chunk is MISSING; a neighbour
 * gets requests while it has fewer than --pipeline-depth
 * (PEER_PIPELINE_DEPTH; one once --reqs-max neighbours are ready and
 * chunks come slowly, as peer_picker_depth, unless --fixed-depth; one
 * deep, a chunk arriving from it counts) and the node fewer than
 * --reqs-max (PEER_REQS_MAX) over all neighbours. A
 * request holds its slot until its CHUNK header (neighbor_conn.c: the
 * download then holds the chunk, not the request) or its REJECT; the
 * first header of a chunk wins, the node CANCELs its other requests for
 * it, and tells its neighbours HAVE "p" (download.c: served on as it
 * arrives).
 *
 * The server side re-states upload.c: a queue of PEER_SERVE_QUEUE_MAX per
 * neighbour; with nothing streaming to it, the first held chunk (else the
 * first request); beside that, one held chunk while none is streaming and
 * chunks still arriving here beside it, WS_MUX_MAX at most; --uploads-max
 * (PEER_UPLOADS_MAX) slots per node of which the last --uploads-spare
 * (PEER_UPLOADS_SPARE) go only to a neighbour holding none, and a REJECT
 * busy (retry after PEER_BUSY_RETRY_MS) when every slot is taken. A chunk
 * still arriving here is served as it arrives (sim_net.c paces it) if it
 * comes from S3, or, with --forward (the default), from a neighbour.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "swarm/pick_rank.h"
#include "wire_conn.h"

/* ---- the picker ------------------------------------------------------ */

typedef struct {
  uint32_t g;
  peer_pick_rank_t rank;
} sim_pick_t;

static int req_index(const sim_conn_t *c, uint32_t g) {
  for (uint32_t i = 0; i < c->nreqs; i++)
    if (c->reqs[i] == g)
      return (int)i;
  return -1;
}

bool sim_conn_live(const sim_conn_t *c, uint32_t g) {
  if (!((c->live_bits >> (g & 63u)) & 1u))
    return false;
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
                          .pending_here = req_index(c, g) >= 0};
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
                           .live = c->nlive > 0 && sim_conn_live(c, g),
                           .tier = s->chunk_tier[g]};
  if (!peer_pick_may_beat(&rank, found ? &best->rank : NULL))
    return;
  rank.avail = n->avail[g];
  if (!peer_pick_beats(&rank, found ? &best->rank : NULL))
    return;
  best->g = g;
  best->rank = rank;
}

/* Chunks c's server said HAVE "p" for, hashed into 256 bits (a chunk
 * whose bit is clear is not among them): the scan below asks of each of
 * thousands of candidates whether it is one of up to PEER_LIVE_MAX. */
static void live_filter(const sim_conn_t *c, uint64_t f[4]) {
  f[0] = f[1] = f[2] = f[3] = 0;
  for (uint32_t i = 0; i < c->nlive; i++)
    f[(c->live[i] >> 6) & 3u] |= (uint64_t)1 << (c->live[i] & 63u);
}

/* pick_consider for g MISSING (so a fresh request: peer_pick_kind says
 * PEER_PICK_FRESH whatever else is true of it). */
static void pick_fresh(sim_t *s, const sim_conn_t *c, const uint64_t lf[4],
                       uint32_t g, sim_pick_t *best) {
  bool found = best->g != SIM_NONE;
  bool live = (lf[(g >> 6) & 3u] >> (g & 63u)) & 1u;
  peer_pick_rank_t rank = {.dup = PEER_PICK_FRESH,
                           .live = live && sim_conn_live(c, g),
                           .tier = s->chunk_tier[g]};
  if (!peer_pick_may_beat(&rank, found ? &best->rank : NULL))
    return;
  rank.avail = s->nodes[c->client].avail[g];
  if (!peer_pick_beats(&rank, found ? &best->rank : NULL))
    return;
  best->g = g;
  best->rank = rank;
}

/* Whether nothing after best in the scan can beat it: a fresh chunk this
 * neighbour holds (not one still arriving there), offered by no other
 * neighbour (peer_pick_may_beat: nothing is rarer), and no chunk of a
 * better tier left to lack. */
static bool pick_final(const sim_node_t *n, const sim_pick_t *best) {
  if (best->g == SIM_NONE || best->rank.dup != PEER_PICK_FRESH ||
      best->rank.live != 0 || best->rank.avail > 1)
    return false;
  for (int t = 0; t < best->rank.tier; t++)
    if (n->lacking[t] > 0)
      return false;
  return true;
}

/* peer_picker_fill's scan: from a random chunk, PEER_PICK_SCAN_MAX at
 * most, over what c's server has and we lack (a word at a time).
 *
 * While any chunk is MISSING no endgame duplicate can be picked
 * (pick_consider needs none MISSING), so the scan then looks only at the
 * MISSING chunks (n->missing), in the same order and over the same span:
 * the others would be passed over anyway. At 1,000 nodes and 8,373
 * chunks this scan was over half of a run, thousands of candidates a
 * request; it stops once pick_final says nothing left can win. */
static uint32_t pick(sim_t *s, const sim_conn_t *c) {
  const sim_node_t *n = &s->nodes[c->client];
  uint32_t total = s->chunks;
  uint32_t scan = total < PEER_PICK_SCAN_MAX ? total : PEER_PICK_SCAN_MAX;
  uint32_t g = (uint32_t)(sim_rand(s) % total), cnt = 0;
  sim_pick_t best = {.g = SIM_NONE};
  int endgame = -1;
  bool fresh = n->nmissing > 0;
  uint64_t lf[4];
  if (fresh)
    live_filter(c, lf);
  while (cnt < scan) {
    uint32_t w = g >> 6, off = g & 63u;
    uint64_t lack = fresh ? n->missing[w] : ~n->have[w];
    uint64_t bits = (c->view[w] & lack) >> off;
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
    if (!sim_tree_may_ask(s, c->client, c->server, g)) {
      g = g + 1u < total ? g + 1u : 0;
      continue;
    }
    if (!fresh) {
      pick_consider(s, c, g, &best, &endgame);
    } else {
      pick_fresh(s, c, lf, g, &best);
      if (pick_final(n, &best))
        break;
    }
    g = g + 1u < total ? g + 1u : 0;
  }
  return best.g;
}

void sim_node_fill_conn(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[c->client];
  const sim_policy_t *pol = &s->cfg.pol;
  if (!c->up || !n->joined || n->done || s->now < c->busy_until)
    return;
  uint32_t depth = sim_conn_depth(s, c);
  while (c->nreqs < depth && n->nreqs < pol->reqs_max) {
    uint32_t g = pick(s, c);
    if (g == SIM_NONE)
      return;
    c->reqs[c->nreqs] = g;
    c->req_sent[c->nreqs] = s->now;
    c->nreqs++;
    n->nreqs++;
    n->nreq[g]++;
    if (n->state[g] == SIM_MISSING) {
      sim_chunk_state(n, g, SIM_INFLIGHT);
      n->nmissing--;
    }
    sim_ev_push(s, sim_frame_at(s, c->rev), EV_REQ, cid, g, 0);
  }
}

/* peer_picker_fill_all: from a random neighbour on, so the request slots
 * left go round. */
void sim_node_fill(sim_t *s, uint32_t node) {
  sim_node_t *n = &s->nodes[node];
  if (n->nconn == 0 || !n->joined || n->done)
    return;
  uint32_t start = (uint32_t)(sim_rand(s) % n->nconn), cnt = n->nconn;
  for (uint32_t k = 0; k < cnt && k < n->nconn; k++)
    sim_node_fill_conn(s, n->conns[(start + k) % n->nconn]);
}

/* The chunk is MISSING again when nothing fetches it any more
 * (peer_request_chunk_release). */
static void chunk_release(sim_node_t *n, uint32_t g) {
  if (n->nreq[g] == 0 && !n->rx_busy[g] && n->in_flow[g] == SIM_NONE &&
      n->state[g] == SIM_INFLIGHT) {
    sim_chunk_state(n, g, SIM_MISSING);
    n->nmissing++;
  }
}

bool sim_req_drop(sim_t *s, uint32_t cid, uint32_t g, bool cancel) {
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[c->client];
  int i = req_index(c, g);
  if (i < 0)
    return false;
  c->nreqs--;
  c->reqs[i] = c->reqs[c->nreqs];
  c->req_sent[i] = c->req_sent[c->nreqs];
  n->nreqs--;
  n->nreq[g]--;
  chunk_release(n, g);
  if (cancel)
    sim_ev_push(s, sim_frame_at(s, c->rev), EV_CANCEL, cid, g, 0);
  return true;
}

/* The node's other requests for g go (CANCEL): its bytes come elsewhere
 * (peer_requests_cancel_others). */
static void req_cancel_others(sim_t *s, uint32_t node, uint32_t g,
                              uint32_t keep) {
  sim_node_t *n = &s->nodes[node];
  for (uint32_t k = 0; k < n->nconn && n->nreq[g] > 0; k++)
    if (n->conns[k] != keep)
      (void)sim_req_drop(s, n->conns[k], g, true);
}

/* ---- the server side --------------------------------------------------- */

static bool srv_held(const sim_t *s, const sim_conn_t *c, uint32_t g) {
  return s->nodes[c->server].state[g] == SIM_DONE;
}

/* peer_upload_can: held, or arriving here now (from S3; from a neighbour
 * too with --forward). */
static bool srv_can(const sim_t *s, const sim_conn_t *c, uint32_t g) {
  const sim_node_t *srv = &s->nodes[c->server];
  uint32_t o = srv->in_flow[g];
  if (srv->state[g] == SIM_DONE || o == SIM_PENDING)
    return true;
  if (o == SIM_NONE)
    return false;
  return s->cfg.pol.forward || s->flows[o].kind == SIM_FLOW_ORIGIN;
}

/* upload_queue_choose (upload.c), every neighbour speaking "mux". */
static int queue_choose(const sim_t *s, const sim_conn_t *c) {
  int first_live = -1;
  bool held_busy = false;
  if (c->nups == WS_MUX_MAX)
    return -1;
  for (uint32_t i = 0; i < c->nups; i++)
    held_busy |= srv_held(s, c, s->flows[c->ups[i]].chunk);
  for (uint32_t k = 0; k < c->sq_len; k++) {
    bool held = srv_held(s, c, c->sq[k]);
    if (c->nups == 0) {
      if (held)
        return (int)k;
      continue;
    }
    if (held) {
      if (!held_busy)
        return (int)k;
    } else if (first_live < 0) {
      first_live = (int)k;
    }
  }
  return c->nups == 0 ? 0 : first_live;
}

static unsigned upload_cap(const sim_t *s, const sim_conn_t *c) {
  const sim_policy_t *pol = &s->cfg.pol;
  return c->nups == 0 ? pol->uploads_max
                      : pol->uploads_max - pol->uploads_spare;
}

static void reject(sim_t *s, uint32_t cid, uint32_t g, bool busy) {
  s->rejects += busy;
  s->not_held += !busy;
  sim_ev_push(s, sim_frame_at(s, cid), EV_REJECT, cid, g, busy);
}

static void upload_start(sim_t *s, uint32_t cid, uint32_t g) {
  sim_conn_t *c = &s->conns[cid];
  if (!srv_can(s, c, g)) {
    reject(s, cid, g, false); /* its fetch failed meanwhile */
    return;
  }
  bool held = srv_held(s, c, g);
  uint32_t f = sim_flow_start(s, c->server, c->client, SIM_FLOW_PEER, g, cid);
  s->flows[f].was_live = !held;
  s->flows[f].src_held = held;
  c = &s->conns[cid];
  c->ups[c->nups++] = f;
  c->useful_s = s->conns[c->rev].useful_s = s->now;
  s->nodes[c->server].uploads++;
  /* Its CHUNK header goes with its first piece: at once when held here,
   * else once a buffer of it is written here (upload_chunk.c reads only
   * what was written); sim_rates sends it then. */
  s->flows[f].unheaded = true;
  if (held)
    sim_upload_header(s, f);
}

void sim_upload_header(sim_t *s, uint32_t flow) {
  double at = sim_frame_at(s, s->flows[flow].conn); /* behind the others */
  sim_flow_t *f = &s->flows[flow];
  f->unheaded = false;
  f->header_at = at;
  /* Its bytes follow its header out of the connection's queue. */
  f->go_at = at - sim_half_rtt(s);
  if (f->go_at > s->now)
    sim_rates_dirty(s);
  sim_ev_push4(s, at, EV_HEADER, f->conn, f->chunk, flow, f->serial);
}

double sim_frame_queue_s(const sim_t *s, const sim_conn_t *c) {
  double bytes = 0, rate = 0;
  for (uint32_t i = 0; i < c->nups; i++)
    rate += s->flows[c->ups[i]].rate;
  /* Pieces follow the connection's rate (PEER_SERVE_PIECE_MS), the
   * model taking its flows' rates for p2pd's. A node that is done (its
   * uplink bulk) sends held chunks in larger pieces, holds more unsent. */
  bool bulk = s->nodes[c->server].done;
  double piece =
      (double)wire_rate_bytes((uint64_t)rate, PEER_SERVE_PIECE_MS,
                              PEER_SERVE_PIECE_MIN, PEER_SERVE_PIECE_BYTES);
  double file_piece = (double)wire_rate_bytes(
      (uint64_t)rate, PEER_SERVE_PIECE_MS, PEER_SERVE_PIECE_MIN,
      bulk ? PEER_SERVE_FILE_PIECE_BYTES : PEER_SERVE_PIECE_BYTES);
  for (uint32_t i = 0; i < c->nups; i++) {
    const sim_flow_t *f = &s->flows[c->ups[i]];
    if (f->unheaded)
      continue; /* nothing of it read yet */
    /* At most PEER_SERVE_BUFS (_FILE_PIECES) pieces read, not sent. */
    double q = sim_flow_may_send(s, f);
    double bufs = (double)PEER_SERVE_BUFS * (f->was_live ? piece : file_piece);
    bytes += q < bufs ? q : bufs;
  }
  /* And the kernel's unsent bytes before them (TCP_NOTSENT_LOWAT). */
  if (bytes > 0)
    bytes += (double)wire_rate_bytes(
        (uint64_t)rate, WIRE_UNSENT_MS, WIRE_NOTSENT_MIN_BYTES,
        bulk ? WIRE_NOTSENT_BULK_BYTES : WIRE_NOTSENT_LOWAT_BYTES);
  return bytes > 0 && rate > 0 ? bytes / rate : 0;
}

double sim_frame_at(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  double at = s->now + sim_half_rtt(s);
  if (!s->cfg.frame_queue)
    return at;
  at += sim_frame_queue_s(s, c);
  if (at < c->fifo_s)
    at = c->fifo_s; /* one connection: frames arrive in order */
  c->fifo_s = at;
  return at;
}

/* --upload-line, an experiment p2pd does not run (docs/scale.md, session
 * 17): a neighbour with no upload that finds every slot taken waits, its
 * requests kept, for the next slot to free, up to line_max of them; then
 * REJECT busy. */
static bool line_has(const sim_node_t *srv, uint32_t cid) {
  for (uint32_t k = 0; k < srv->line_len; k++) {
    if (srv->line[k] == cid)
      return true;
  }
  return false;
}

static bool line_join(const sim_t *s, sim_node_t *srv, uint32_t cid) {
  if (line_has(srv, cid))
    return true;
  if (srv->line_len >= s->cfg.pol.line_max)
    return false;
  srv->line[srv->line_len++] = cid;
  return true;
}

void sim_node_line_leave(sim_t *s, uint32_t cid) {
  sim_node_t *srv = &s->nodes[s->conns[cid].server];
  for (uint32_t k = 0; k < srv->line_len; k++) {
    if (srv->line[k] != cid)
      continue;
    memmove(srv->line + k, srv->line + k + 1,
            (srv->line_len - k - 1u) * sizeof(uint32_t));
    srv->line_len--;
    return;
  }
}

/* upload_queue_run (upload.c). */
static void queue_run(sim_t *s, uint32_t cid) {
  sim_conn_t *c = &s->conns[cid];
  int k;
  while (c->up && c->sq_len > 0 && (k = queue_choose(s, c)) >= 0) {
    sim_node_t *srv = &s->nodes[c->server];
    bool room = srv->uploads < upload_cap(s, c) &&
                (srv->line_len == 0 || srv->line[0] == cid);
    if (!room && (c->nups > 0 || line_join(s, srv, cid)))
      break; /* the next to end makes room, in the line's turn */
    uint32_t g = c->sq[k];
    memmove(c->sq + k, c->sq + k + 1,
            (c->sq_len - (uint32_t)k - 1u) * sizeof(uint32_t));
    c->sq_len--;
    if (room) {
      sim_node_line_leave(s, cid);
      upload_start(s, cid, g);
    } else {
      reject(s, cid, g, true); /* every slot taken, no seat: refused */
    }
    c = &s->conns[cid];
  }
  if (c->sq_len == 0 || !c->up)
    sim_node_line_leave(s, cid);
}

/* A slot of node is free: the line's head's. */
static void line_run(sim_t *s, uint32_t node) {
  sim_node_t *srv = &s->nodes[node];
  while (srv->line_len > 0 && srv->uploads < s->cfg.pol.uploads_max) {
    uint32_t h = srv->line[0];
    queue_run(s, h);
    srv = &s->nodes[node];
    if (srv->line_len > 0 && srv->line[0] == h)
      sim_node_line_leave(s, h); /* it cannot take it now */
  }
}

void sim_on_req(sim_t *s, uint32_t cid, uint32_t g) {
  sim_conn_t *c = &s->conns[cid];
  if (!c->up)
    return;
  if (!srv_can(s, c, g)) {
    reject(s, cid, g, false);
    return;
  }
  if (c->sq_len == PEER_SERVE_QUEUE_MAX) {
    reject(s, cid, g, true);
    return;
  }
  c->sq[c->sq_len++] = g;
  queue_run(s, cid);
}

void sim_on_cancel(sim_t *s, uint32_t cid, uint32_t g) {
  sim_conn_t *c = &s->conns[cid];
  if (!c->up)
    return;
  for (uint32_t k = 0; k < c->sq_len; k++) {
    if (c->sq[k] != g)
      continue;
    memmove(c->sq + k, c->sq + k + 1, (c->sq_len - k - 1u) * sizeof(uint32_t));
    c->sq_len--;
    if (c->sq_len == 0)
      sim_node_line_leave(s, cid);
    return;
  }
  for (uint32_t i = 0; i < c->nups; i++) {
    if (s->flows[c->ups[i]].chunk == g) {
      sim_download_fail(s, c->ups[i], SIM_FAIL_CANCELED);
      return;
    }
  }
}

void sim_on_reject(sim_t *s, uint32_t cid, uint32_t g, bool busy) {
  sim_conn_t *c = &s->conns[cid];
  if (!c->up || !sim_req_drop(s, cid, g, false))
    return;
  if (busy) {
    double until = s->now + PEER_BUSY_RETRY_MS / 1000.0;
    if (c->busy_until < until)
      c->busy_until = until;
  } else {
    sim_view_hide(s, c, g); /* not from this neighbour for now */
  }
  sim_node_fill(s, c->client); /* other holders may take it */
}

/* Removes flow f from c's uploads; the server's slot is free. */
static void ups_remove(sim_t *s, sim_conn_t *c, uint32_t f) {
  for (uint32_t i = 0; i < c->nups; i++) {
    if (c->ups[i] != f)
      continue;
    c->ups[i] = c->ups[--c->nups];
    s->nodes[c->server].uploads--;
    return;
  }
}

void sim_on_upload_end(sim_t *s, uint32_t flow) {
  sim_flow_t *f = &s->flows[flow];
  uint32_t cid = f->conn;
  sim_conn_t *c = &s->conns[cid];
  ups_remove(s, c, flow);
  c->useful_s = s->conns[c->rev].useful_s = s->now;
  s->served++;
  s->served_live += f->was_live;
  s->nodes[f->src].tx_bytes += f->size;
  s->nodes[f->dst].rx_bytes += f->size;
  sim_flow_sent(s, flow);
  /* Its last byte, never before its header (one connection's order). */
  double at = s->now + sim_half_rtt(s);
  sim_ev_push(s, at > f->header_at ? at : f->header_at, EV_CHUNK, flow,
              f->serial, 0);
  line_run(s, f->src);
  queue_run(s, cid);
}

/* ---- the client side ----------------------------------------------------- */

void sim_on_header(sim_t *s, uint32_t cid, uint32_t g, uint32_t flow,
                   uint32_t serial) {
  sim_conn_t *c = &s->conns[cid];
  sim_flow_t *f = &s->flows[flow];
  if (!c->up || !f->alive || f->serial != serial)
    return; /* gone meanwhile (canceled at the sender, closed) */
  sim_node_t *n = &s->nodes[c->client];
  if (req_index(c, g) < 0) {
    s->discarded++; /* canceled, timed out: our CANCEL ends it there */
    f->discard = true;
    return;
  }
  if (n->rx_busy[g] || n->state[g] == SIM_DONE) {
    /* Another sender's bytes won: these are read and dropped (no CANCEL
     * is sent for it, neighbor_conn.c). */
    s->discarded++;
    f->discard = true;
    (void)sim_req_drop(s, cid, g, false);
    return;
  }
  n->rx_busy[g] = 1; /* keeps it INFLIGHT without the request */
  n->in_flow[g] = flow;
  f->accepted = true;
  f->rx_start = f->rx_first = s->now;
  n->last_rx_s = s->now;
  (void)sim_req_drop(s, cid, g, false);
  req_cancel_others(s, c->client, g, cid);
  if (s->cfg.pol.forward) /* served on as it arrives */
    sim_ev_push(s, s->now + sim_half_rtt(s), EV_HAVE, c->client, g, 1);
}

/* Whether node serves chunk g to someone as it arrives. */
static bool serving_live(const sim_t *s, uint32_t node, uint32_t g) {
  const sim_node_t *n = &s->nodes[node];
  for (uint32_t k = 0; k < n->nconn; k++) {
    const sim_conn_t *r = &s->conns[sim_conn_rev(n->conns[k])];
    for (uint32_t i = 0; i < r->nups; i++)
      if (s->flows[r->ups[i]].chunk == g)
        return true;
  }
  return false;
}

void sim_on_chunk(sim_t *s, uint32_t flow, uint32_t serial) {
  sim_flow_t *f = &s->flows[flow];
  if (!f->alive || f->serial != serial)
    return;
  uint32_t cid = f->conn, g = f->chunk, from = f->src;
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[c->client];
  s->peer_bytes += (uint64_t)f->size;
  if (!f->accepted || f->discard || n->in_flow[g] != flow) {
    s->dup_bytes += (uint64_t)f->size;
    sim_flow_end(s, flow);
    return;
  }
  n->rx_busy[g] = 0;
  n->in_flow[g] = SIM_NONE;
  n->last_rx_s = s->now;
  c->misses = 0; /* it delivered (peer_rx_sample) */
  if (!f->late) {
    /* Its rate joins the typical one (weight 1/PEER_CHUNK_RATE_EWMA). */
    double el = s->now - f->rx_start;
    double bps = f->size / (el > 1e-6 ? el : 1e-6);
    n->rx_Bps = n->rx_Bps == 0 ? bps
                               : n->rx_Bps - n->rx_Bps / PEER_CHUNK_RATE_EWMA +
                                     bps / PEER_CHUNK_RATE_EWMA;
  }
  uint32_t client = c->client;
  sim_flow_end(s, flow);
  /* May dial (a node done announces as a seed): c may move. */
  sim_node_got(s, client, g, from);
  sim_node_fill_conn(s, cid); /* the payload ended */
  sim_node_fill(s, client);   /* the download was reported */
}

void sim_download_fail(sim_t *s, uint32_t flow, sim_fail_t why) {
  sim_flow_t *f = &s->flows[flow];
  if (!f->alive)
    return;
  uint32_t cid = f->conn, g = f->chunk, client = f->dst;
  sim_conn_t *c = &s->conns[cid];
  sim_node_t *n = &s->nodes[client];
  double done = sim_flow_done_bytes(s, f);
  s->wasted_bytes += done;
  n->rx_bytes += done;
  s->nodes[f->src].tx_bytes += done;
  ups_remove(s, c, flow);
  bool mine = f->accepted && !f->discard && n->in_flow[g] == flow;
  sim_flow_end(s, flow);
  if (!mine) {
    if (why == SIM_FAIL_SOURCE && !f->accepted)
      reject(s, cid, g, false); /* before its header: a REJECT not held */
  } else {
    n->rx_busy[g] = 0;
    n->in_flow[g] = SIM_NONE;
    chunk_release(n, g);
    if (why == SIM_FAIL_SOURCE)
      sim_view_hide(s, c, g); /* the REJECT of a chunk in pieces */
    /* Uploads of it as it arrived here fail too (up_live_limit). */
    for (uint32_t k = 0; k < n->nconn; k++) {
      sim_conn_t *r = &s->conns[sim_conn_rev(n->conns[k])];
      for (uint32_t i = 0; i < r->nups; i++) {
        uint32_t up = r->ups[i];
        if (s->flows[up].chunk == g) {
          sim_download_fail(s, up, SIM_FAIL_SOURCE);
          break;
        }
      }
    }
  }
  line_run(s, s->conns[cid].server);
  if (s->conns[cid].up)
    queue_run(s, cid);
  if (mine && why == SIM_FAIL_SOURCE)
    sim_node_fill(s, client);
}

void sim_node_got(sim_t *s, uint32_t node, uint32_t g, uint32_t from) {
  sim_node_t *n = &s->nodes[node];
  if (!sim_bit(n->have, g)) {
    uint32_t h = ++s->holders[g];
    double *at = &s->spread_at[SIM_SPREAD_COLS * g];
    if (h == 1)
      at[1] = s->now;
    if (h == (s->n + 1u) / 2u)
      at[2] = s->now;
    if (h == s->n)
      at[3] = s->now;
  }
  if (n->state[g] == SIM_MISSING)
    n->nmissing--;
  sim_chunk_state(n, g, SIM_DONE);
  if (!sim_bit(n->have, g))
    n->lacking[s->chunk_tier[g]]--;
  sim_bit_set(n->have, g);
  n->nhave++;
  for (uint32_t i = 0; i < n->nleases; i++)
    if (n->leases[i] == g) {
      n->leases[i] = n->leases[--n->nleases];
      break;
    }
  req_cancel_others(s, node, g, SIM_NONE);
  if (serving_live(s, node, g))
    sim_rates_dirty(s); /* what it serves as it arrived may all go now */
  sim_ev_push(s, s->now + sim_half_rtt(s), EV_HAVE, node, g, 0);
  sim_ev_push(s, s->now + sim_half_rtt(s), EV_TRK_HAVE, node, g,
              from == SIM_NONE ? 0 : from + 1u);
  if (n->nhave == s->chunks) {
    n->done = true;
    n->done_s = s->now;
    s->done_nodes++;
    sim_trk_announce(s, node, false); /* completed: a seed now */
  }
}
