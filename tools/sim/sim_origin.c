/* sim_origin.c - ws-sim's tracker calls and S3 fetches.
 *
 * The tracker is the real one: trk_tracker_t from tracker/ (the daemon's
 * static library), called as trk_server_msg.c calls it, with the announce
 * built by trk_announce_from_wire from the wire form p2pd sends: a HAVE
 * names the neighbour that sent the chunk ("f", trk_tracker_served before
 * trk_tracker_have, as on_have does), and after each sweep the leases of
 * swarms whose claims stopped counting are pushed (trk_tracker_regrant,
 * as trk_server_push_leases). Its replies (peers to dial, leases,
 * streams, the next interval) drive each node.
 *
 * The S3 side re-states the origin gate (peer_picker_origin_next,
 * picker.c) and origin.c's spare: a node fetches its leased chunks that no
 * neighbour has, at most the reply's "streams" of them at full rate, and
 * starts one more when a fetch's rest should arrive within 1.5 x the time
 * a GET takes to its first byte. A fetch tells the neighbours at once
 * (HAVE "p"), so they can ask for the chunk while it arrives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "swarm/tracker_link.h"
#include "trk_wire.h"

static uint64_t now_ms(const sim_t *s) {
  return (uint64_t)(s->now * 1000.0);
}

static uint32_t node_of(const trk_peer_t *p) {
  return (uint32_t)strtoul(p->node_id + 1, NULL, 10);
}

int sim_trk_init(sim_t *s) {
  s->trk = trk_tracker_new(s->n + 16u, s->cfg.seed, 0);
  if (s->trk == NULL)
    return -1;
  if (s->cfg.origin_inflight > 0) /* as p2p-tracker --origin-inflight */
    trk_tracker_set_origin_inflight(s->trk, s->cfg.origin_inflight);
  trk_tracker_set_tree(s->trk, s->cfg.stripes);
  for (uint32_t i = 0; i < s->n; i++) {
    char id[24], addr[32];
    snprintf(id, sizeof(id), "n%u", i);
    snprintf(addr, sizeof(addr), "10.%u.%u.%u", (i >> 16) & 255u,
             (i >> 8) & 255u, i & 255u);
    trk_peer_info_t info = {.node_id = id, .addr = addr, .port = 7600};
    trk_peer_id_t replaced;
    if (trk_tracker_connect(s->trk, &info, 0, &s->nodes[i].tid, &replaced) != 0)
      return -1;
  }
  return 0;
}

static void apply_leases(sim_t *s, uint32_t node, const trk_reply_t *r) {
  sim_node_t *n = &s->nodes[node];
  n->nleases = r->nleases;
  for (uint32_t i = 0; i < r->nleases; i++)
    n->leases[i] = r->leases[i].chunk;
  n->streams = r->streams;
  sim_ev_push(s, s->now + s->cfg.rtt_s / 2, EV_ORIGIN_KICK, node, 0, 0);
}

/* Stuck chunks for the announce: after --stall-timeout without a byte. */
static uint32_t stuck_list(sim_t *s, uint32_t node, uint32_t *out) {
  const sim_node_t *n = &s->nodes[node];
  uint32_t k = 0;
  if (!n->joined || n->done ||
      s->now - n->last_rx_s < PEER_STALL_TIMEOUT_S_DEFAULT)
    return 0;
  for (uint32_t g = 0; g < s->chunks && k < PEER_STALL_REPORT_MAX; g++)
    if (n->state[g] == SIM_MISSING)
      out[k++] = g;
  return k;
}

/* Chunks to read first for the announce (swarm_release.c): those of the
 * single-chunk files the node lacks. */
static uint32_t first_list(sim_t *s, uint32_t node, uint32_t *out) {
  const sim_node_t *n = &s->nodes[node];
  uint32_t k = 0;
  if (!n->joined || n->done)
    return 0;
  for (uint32_t g = 0; g < s->chunks && k < PEER_FIRST_REPORT_MAX; g++)
    if (s->chunk_tier[g] == PEER_TIER_SMALL && n->state[g] != SIM_DONE)
      out[k++] = g;
  return k;
}

uint32_t sim_trk_announce(sim_t *s, uint32_t node, bool join) {
  sim_node_t *n = &s->nodes[node];
  uint32_t stuck[PEER_STALL_REPORT_MAX], first[PEER_FIRST_REPORT_MAX];
  ws_announce_t a;
  memset(&a, 0, sizeof(a));
  memcpy(a.digest, s->digest.b, sizeof(a.digest));
  a.total_chunks = join || n->joined ? s->chunks : 0;
  a.event = n->done ? WS_ANN_COMPLETED : WS_ANN_UPDATE;
  a.role = n->done ? WS_SWARM_SEED : WS_SWARM_LEECH;
  a.want = !n->done;
  a.stuck = stuck;
  a.n_stuck = stuck_list(s, node, stuck);
  if (s->cfg.pol.first) {
    a.first = first;
    a.n_first = first_list(s, node, first);
  }
  trk_announce_t ta;
  trk_reply_t r;
  trk_announce_from_wire(&a, &ta);
  if (trk_tracker_announce(s->trk, n->tid, &ta, now_ms(s), &r) != 0)
    return 0; /* refused (rate limit): the next one */
  if (join)
    n->joined = true;
  if (r.npeers > 0 || r.ntree > 0) {
    if (r.ntree > 0 && n->ntree == 0)
      n->tree_s = s->now;
    for (uint32_t i = 0; i < r.ntree; i++) {
      uint32_t p = r.tree[i] ? node_of(r.tree[i]) : SIM_NONE;
      if (i >= n->ntree || n->tparent[i] != p)
        n->tree_fed_s[i] = s->now; /* swarm_rel_set_tree */
      n->tparent[i] = p;
    }
    n->ntree = r.ntree;
  }
  /* swarm_on_peers: dial while the dial share and the slots allow. */
  for (uint32_t i = 0; i < r.npeers && sim_room_dial(s, node); i++)
    sim_node_dial(s, node, node_of(r.peers[i]));
  if (n->joined && !n->done)
    apply_leases(s, node, &r);
  uint32_t iv = r.interval_ms;
  if (iv < PEER_TRACKER_LINK_INTERVAL_MIN_MS)
    iv = PEER_TRACKER_LINK_INTERVAL_MIN_MS;
  if (iv > PEER_TRACKER_LINK_INTERVAL_MAX_MS)
    iv = PEER_TRACKER_LINK_INTERVAL_MAX_MS;
  return iv;
}

void sim_trk_have(sim_t *s, uint32_t node, uint32_t chunk, uint32_t from) {
  trk_reply_t r;
  sim_node_t *n = &s->nodes[node];
  if (from != SIM_NONE) {
    /* "f": the neighbour that sent it served it (before the have). */
    char id[24];
    snprintf(id, sizeof(id), "n%u", from);
    s->confirms +=
        trk_tracker_served(s->trk, n->tid, &s->digest, id, now_ms(s)) == 1;
  }
  if (trk_tracker_have(s->trk, n->tid, &s->digest, &chunk, 1, now_ms(s), &r) ==
          0 &&
      r.ngranted > 0 && !n->done)
    apply_leases(s, node, &r); /* on_have replies only when it granted */
}

void sim_trk_tick(sim_t *s) {
  uint64_t now = now_ms(s);
  (void)trk_tracker_tick(s->trk, now);
  if (!trk_tracker_regrant_pending(s->trk, 0))
    return;
  for (uint32_t i = 0; i < s->n; i++) {
    ws_hash_t d;
    trk_reply_t r;
    if (trk_tracker_regrant(s->trk, s->nodes[i].tid, 0, now, &d, &r) > 0 &&
        s->nodes[i].joined && !s->nodes[i].done) {
      s->regrants++;
      apply_leases(s, i, &r);
    }
  }
  (void)trk_tracker_regrant_pending(s->trk, 1);
}

void sim_trk_renew(sim_t *s, uint32_t node) {
  sim_node_t *n = &s->nodes[node];
  for (uint32_t i = 0; i < n->nleases; i++) {
    /* WS_ENOTFOUND: someone else has it now; the next reply says so. */
    int rc =
        trk_tracker_renew(s->trk, n->tid, &s->digest, n->leases[i], now_ms(s));
    (void)rc;
  }
}

/* A fetch whose rest should arrive within 1.5 x the time to first byte
 * (origin.c's "ending": the spare lease may start). */
static bool fetch_ending(const sim_t *s, const sim_node_t *n,
                         const sim_fetch_t *x) {
  if (x->flow == SIM_NONE)
    return false;
  const sim_flow_t *f = &s->flows[x->flow];
  double left = f->size - sim_flow_done_bytes(s, f);
  return f->rate > 0 && left <= 1.5 * n->lead_s * f->rate;
}

/* picker_origin_leased: a leased chunk we may fetch now, or SIM_NONE. */
static uint32_t leased_next(const sim_t *s, const sim_node_t *n) {
  for (uint32_t i = 0; i < n->nleases; i++) {
    uint32_t g = n->leases[i];
    if (n->state[g] == SIM_MISSING && n->avail[g] == 0)
      return g;
  }
  return SIM_NONE;
}

void sim_origin_kick(sim_t *s, uint32_t node) {
  sim_node_t *n = &s->nodes[node];
  if (!n->joined || n->done)
    return;
  while (n->nfetch < PEER_S3_CONCURRENCY_DEFAULT) {
    uint32_t streaming = 0;
    for (uint32_t i = 0; i < n->nfetch; i++)
      streaming += !fetch_ending(s, n, &n->fetch[i]);
    if (n->streams != 0 && streaming >= n->streams)
      return; /* the spare waits until a fetch is about to end */
    uint32_t g = leased_next(s, n);
    if (g == SIM_NONE)
      return;
    sim_chunk_state(n, g, SIM_INFLIGHT);
    n->nmissing--;
    n->in_flow[g] = SIM_PENDING;
    n->fetch[n->nfetch++] = (sim_fetch_t){g, SIM_NONE};
    s->origin_gets++;
    if (s->fetches_of[g]++ == 0)
      s->spread_at[SIM_SPREAD_COLS * g] = s->now;
    sim_ev_push(s, s->now + s->cfg.rtt_s / 2, EV_HAVE, node, g, 1);
    sim_ev_push(s, s->now + s->cfg.ttfb_s, EV_ORIGIN_BODY, node, g, 0);
  }
}

void sim_on_origin_body(sim_t *s, uint32_t node, uint32_t g) {
  sim_node_t *n = &s->nodes[node];
  n->lead_s =
      n->lead_s == 0 ? s->cfg.ttfb_s : (3 * n->lead_s + s->cfg.ttfb_s) / 4;
  uint32_t f = sim_flow_start(s, s->n, node, SIM_FLOW_ORIGIN, g, SIM_NONE);
  n->in_flow[g] = f;
  n->last_rx_s = s->now;
  for (uint32_t i = 0; i < n->nfetch; i++)
    if (n->fetch[i].chunk == g)
      n->fetch[i].flow = f;
}

void sim_on_origin_end(sim_t *s, uint32_t flow) {
  sim_flow_t f = s->flows[flow];
  sim_flow_end(s, flow);
  sim_node_t *n = &s->nodes[f.dst];
  n->in_flow[f.chunk] = SIM_NONE;
  n->s3_bytes += (uint64_t)f.size;
  n->rx_bytes += f.size;
  if (s->s3_bytes + (uint64_t)f.size >= s->total_bytes && s->origin_done_s == 0)
    s->origin_done_s = s->now;
  n->last_rx_s = s->now;
  s->s3_bytes += (uint64_t)f.size;
  for (uint32_t i = 0; i < n->nfetch; i++)
    if (n->fetch[i].chunk == f.chunk) {
      n->fetch[i] = n->fetch[--n->nfetch];
      break;
    }
  sim_node_got(s, f.dst, f.chunk, SIM_NONE);
  sim_origin_kick(s, f.dst);
}
