/* pick_rank.c - the picker's decision on one candidate chunk (pick_rank.h).
 *
 * Pure functions. Thread: any.
 */
#include "swarm/pick_rank.h"

#include <stddef.h>

#include "core/tunables.h"
#include "ws_rand.h"

peer_pick_kind_t peer_pick_kind(const peer_pick_chunk_t *c, bool best_fresh) {
  if (c->missing)
    return PEER_PICK_FRESH;
  if (!c->inflight || c->nreq == 0 || c->nreq >= PEER_ENDGAME_DUP_MAX ||
      c->rx_busy || c->pending_here)
    return PEER_PICK_NOT;
  if (best_fresh)
    return PEER_PICK_NOT; /* a fresh chunk always beats a duplicate */
  return PEER_PICK_ENDGAME;
}

bool peer_pick_may_beat(const peer_pick_rank_t *cand,
                        const peer_pick_rank_t *best) {
  if (best == NULL)
    return true;
  if (cand->dup > best->dup ||
      (cand->dup == best->dup && cand->live > best->live))
    return false;
  bool same = cand->dup == best->dup && cand->live == best->live;
  if (same && cand->tier > best->tier)
    return false;
  if (same && cand->tier == best->tier && best->avail <= 1)
    return false; /* nothing is rarer than only this neighbour */
  return true;
}

bool peer_pick_beats(const peer_pick_rank_t *cand,
                     const peer_pick_rank_t *best) {
  if (best == NULL)
    return true;
  if (cand->dup != best->dup)
    return cand->dup < best->dup;
  if (cand->live != best->live)
    return cand->live < best->live;
  if (cand->tier != best->tier)
    return cand->tier < best->tier;
  return cand->avail < best->avail;
}

uint64_t peer_pick_rand(uint64_t *state) {
  return ws_xorshift64(state);
}
