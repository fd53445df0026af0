/* neighbor_deadline.c - what a neighbour owes us and how long it may take
 * (neighbor.h): the chunks arriving from it (whole or in pieces) and their
 * progress deadlines, its unanswered requests, and the neighbour slots
 * (idle neighbours make room for newcomers).
 *
 * A chunk's deadline runs from its CHUNK header (PEER_CHUNK_GRACE_MS in
 * tunables.h): a floor rate, or, when another neighbour holds the chunk
 * too, a multiple of the typical time a chunk takes; time during which we
 * held the neighbour's reads does not count. A chunk in pieces past it is
 * canceled and asked elsewhere; one whose payload is being read cannot be
 * cut short on the wire, so the neighbour is closed. A neighbour that
 * misses is benched; PEER_NBR_MISSES_MAX misses without a chunk between
 * them close it.
 *
 * Owns: nothing beyond the neighbours' fields. Thread: loop thread.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "swarm/download.h"
#include "swarm/neighbor.h"
#include "ws_log.h"

/* ---- chunks in pieces --------------------------------------------------- */

/* The chunk (g, req_id) of digest arriving in pieces, or NULL. */
peer_pieces_t *peer_pieces_find(peer_neighbor_t *n, const uint8_t *digest,
                                uint32_t g, uint32_t req_id) {
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    peer_pieces_t *pc = &n->pcs[i];
    if (pc->open && pc->g == g && pc->req_id == req_id &&
        memcmp(pc->digest, digest, WS_PROTO_DIGEST_LEN) == 0)
      return pc;
  }
  return NULL;
}

peer_pieces_t *peer_pieces_free(peer_neighbor_t *n) {
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    if (!n->pcs[i].open)
      return &n->pcs[i];
  }
  return NULL;
}

/* Ends a chunk arriving in pieces (status < 0: given up, the chunk goes
 * back to be fetched again). */
void peer_pieces_end(peer_neighbor_t *n, peer_pieces_t *pc, int status) {
  peer_download_t *dl = pc->dl;
  pc->dl = NULL;
  pc->open = false;
  if (n->pc == pc) {
    n->pc = NULL;
    n->dl = NULL;
  }
  peer_download_end(dl, status);
}

/* ---- progress deadlines (PEER_CHUNK_GRACE_MS in tunables.h) ------------ */

/* Milliseconds chunk pc has been arriving from n, time we held n's reads
 * not counted. */
static uint64_t nd_rx_elapsed(const peer_neighbor_t *n, const peer_pieces_t *pc,
                              uint64_t now_ms) {
  uint64_t held = peer_neighbor_paused(n, now_ms) - pc->paused0_ms;
  uint64_t el = now_ms - pc->start_ms;
  return el > held ? el - held : 0;
}

/* How long chunk pc may take from n: the floor rate, or, when another
 * neighbour holds it, a multiple of the typical time. */
static uint64_t nd_rx_deadline(const peer_neighbor_t *n,
                               const peer_pieces_t *pc) {
  uint64_t len = pc->len;
  uint64_t d = PEER_CHUNK_GRACE_MS + len * 1000u / PEER_CHUNK_FLOOR_BPS;
  uint64_t typ = n->set->rx_bps;
  if (typ > 0 && peer_neighbors_other_holds(n->set, n, pc->digest, pc->g)) {
    uint64_t rel =
        PEER_CHUNK_GRACE_MS + PEER_CHUNK_SLOW_FACTOR * len * 1000u / typ;
    if (rel < d)
      d = rel;
  }
  return d;
}

/* Chunk pc came whole from n: its rate joins the typical one, and n has
 * delivered (its misses are forgiven). */
void peer_rx_sample(peer_neighbor_t *n, const peer_pieces_t *pc) {
  peer_neighbors_t *set = n->set;
  n->misses = 0;
  if (pc->late)
    return; /* its pace was its source's, not n's */
  uint64_t el = nd_rx_elapsed(n, pc, uv_now(set->ctx->loop));
  uint64_t bps = (uint64_t)pc->len * 1000u / (el > 0 ? el : 1);
  if (set->rx_bps == 0)
    set->rx_bps = bps;
  else
    set->rx_bps = set->rx_bps - set->rx_bps / PEER_CHUNK_RATE_EWMA +
                  bps / PEER_CHUNK_RATE_EWMA;
}

void peer_rx_start(peer_neighbor_t *n, peer_pieces_t *pc) {
  pc->start_ms = pc->first_ms = pc->byte_ms = uv_now(n->set->ctx->loop);
  pc->paused0_ms = pc->byte_paused_ms = peer_neighbor_paused(n, pc->start_ms);
  pc->late = false;
}

void peer_rx_got(peer_neighbor_t *n, peer_pieces_t *pc, uint32_t len) {
  pc->got += len;
  pc->byte_ms = uv_now(n->set->ctx->loop);
  pc->byte_paused_ms = peer_neighbor_paused(n, pc->byte_ms);
}

/* 1 when chunk pc should be cut for want of bytes: its file is in its
 * endgame, nothing of it came from n for PEER_CHUNK_ENDGAME_STALL_MS (time
 * we held n's reads not counted), and another neighbour holds it whole. */
static int nd_rx_stalled(const peer_neighbor_t *n, const peer_pieces_t *pc,
                         uint64_t now_ms) {
  const peer_download_t *dl = pc == &n->whole ? n->dl : pc->dl;
  uint64_t held = peer_neighbor_paused(n, now_ms) - pc->byte_paused_ms;
  uint64_t quiet = now_ms - pc->byte_ms;
  if (dl == NULL || quiet <= held || quiet - held < PEER_CHUNK_ENDGAME_STALL_MS)
    return 0;
  return peer_download_endgame(dl) &&
         peer_neighbors_other_holds(n->set, n, pc->digest, pc->g);
}

/* n cannot be left to finish what it sends (a payload cannot be cut short
 * on the wire): it is closed now, and every chunk it had goes elsewhere. */
static void nd_drop_slow(peer_neighbor_t *n, const char *why) {
  n->set->ctx->counters.peers_dropped_slow++;
  WS_LOGW("nbr#%llu %s: %s; closing, its chunks are asked elsewhere",
          (unsigned long long)n->id, n->node_id, why);
  if (n->in == PEER_NEIGHBOR_IN_CHUNK && n->pc == NULL && n->dl != NULL) {
    peer_download_t *dl = n->dl;
    n->dl = NULL;
    n->whole.open = false;
    peer_download_end(dl, WS_ETIMEOUT);
  }
  n->in = PEER_NEIGHBOR_IN_DISCARD;
  peer_neighbor_set_state(n, PEER_NEIGHBOR_CLOSING);
  wire_conn_close(n->c, WS_ETIMEOUT);
}

/* Chunk pc (n->whole or one in pieces) past its deadline at now_ms? A
 * chunk in pieces between pieces is canceled and asked elsewhere; one
 * whose payload is being read closes n. 1 when n was closed. */
static int nd_rx_check(peer_neighbor_t *n, peer_pieces_t *pc, uint64_t now_ms) {
  const peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, pc->digest);
  if (pc != &n->whole && r != NULL && peer_neighbor_rel_live(r, pc->g) &&
      now_ms - pc->first_ms <= PEER_CHUNK_LIVE_WAIT_MS) {
    /* Still arriving at n (its HAVE "p", no plain HAVE yet): n forwards it
     * at its own source's pace, which is not n's to answer for. The
     * deadline runs from when n holds it, or from PEER_CHUNK_LIVE_WAIT_MS
     * on (a neighbour that says "p" and never HAVE cannot hold a request
     * for ever); a sequence with no piece for PEER_REQUEST_TIMEOUT_MS
     * still ends (peer_neighbor_tick). */
    pc->start_ms = now_ms;
    pc->paused0_ms = peer_neighbor_paused(n, now_ms);
    pc->late = true;
    return 0;
  }
  uint64_t el = nd_rx_elapsed(n, pc, now_ms), d = nd_rx_deadline(n, pc);
  char why[160];
  int drop = 0;
  if (el > d) {
    snprintf(why, sizeof(why),
             "chunk %u: %u of %u bytes in %llu ms (deadline %llu ms)", pc->g,
             pc->got, pc->len, (unsigned long long)el, (unsigned long long)d);
    drop = peer_neighbor_missed(n, now_ms);
  } else if (nd_rx_stalled(n, pc, now_ms)) {
    /* Not a miss: a stall this short may be the network's. */
    n->set->ctx->counters.chunks_cut_stalled++;
    snprintf(why, sizeof(why),
             "chunk %u: %u of %u bytes, none for %llu ms in its file's "
             "endgame, another neighbour holds it",
             pc->g, pc->got, pc->len,
             (unsigned long long)(now_ms - pc->byte_ms));
  } else {
    return 0;
  }
  if (pc == &n->whole || (n->in == PEER_NEIGHBOR_IN_CHUNK && n->pc == pc)) {
    nd_drop_slow(n, why);
    return 1;
  }
  WS_LOGW("nbr#%llu %s: %s; asking elsewhere", (unsigned long long)n->id,
          n->node_id, why);
  peer_request_send_cancel(n, pc->digest, pc->g, pc->req_id);
  peer_neighbor_hide(n, pc->digest, pc->g);
  peer_pieces_end(n, pc, -ETIMEDOUT);
  if (drop) {
    nd_drop_slow(n, "missed its deadlines again");
    return 1;
  }
  return 0;
}

void peer_neighbor_tick(peer_neighbor_t *n, uint64_t now_ms) {
  peer_neighbor_unhide(n, now_ms);
  if (n->whole.open && nd_rx_check(n, &n->whole, now_ms))
    return;
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    peer_pieces_t *pc = &n->pcs[i];
    if (!pc->open)
      continue;
    if (nd_rx_check(n, pc, now_ms))
      return;
    if (!pc->open || (n->in == PEER_NEIGHBOR_IN_CHUNK && n->pc == pc) ||
        now_ms - pc->last_ms <= PEER_REQUEST_TIMEOUT_MS)
      continue;
    /* Its origin fetch stalled: ask elsewhere; later pieces are dropped. */
    WS_LOGW("nbr#%llu %s: chunk %u: no piece in %u ms; asking elsewhere",
            (unsigned long long)n->id, n->node_id, pc->g,
            PEER_REQUEST_TIMEOUT_MS);
    peer_request_send_cancel(n, pc->digest, pc->g, pc->req_id);
    peer_neighbor_hide(n, pc->digest, pc->g);
    peer_pieces_end(n, pc, -ETIMEDOUT);
  }
  /* Requests with no answer at all count as a miss too (one a tick: the
   * pipeline's requests time out together). */
  if (peer_requests_timeouts(n, now_ms) > 0 && peer_neighbor_missed(n, now_ms))
    nd_drop_slow(n, "answered no request in time, again");
}

/* n goes so that a newcomer gets its slot. */
static void nd_evict(peer_neighbor_t *n, uint64_t now_ms) {
  n->set->ctx->counters.peers_evicted++;
  WS_LOGI("nbr#%llu %s: idle for %llu ms; closing to make room",
          (unsigned long long)n->id, n->node_id,
          (unsigned long long)(now_ms - n->useful_ms));
  peer_neighbor_close(n, WS_BYE_IDLE);
}

void peer_neighbors_trim(peer_neighbors_t *set, uint64_t now_ms) {
  peer_neighbor_t *v;
  while (set->nready > set->ctx->cfg->max_neighbors &&
         (v = peer_neighbors_idlest(set, now_ms)) != NULL)
    nd_evict(v, now_ms);
}

/* The slots are full: the idlest neighbour makes room if idle long enough,
 * else a spare slot is lent for a while. 0 when neither. */
int peer_neighbors_make_room(peer_neighbors_t *set, uint64_t now_ms) {
  peer_neighbor_t *v = peer_neighbors_idlest(set, now_ms);
  if (v != NULL) {
    nd_evict(v, now_ms);
    return 1;
  }
  return set->nready < set->ctx->cfg->max_neighbors + PEER_NBR_SPARE;
}
