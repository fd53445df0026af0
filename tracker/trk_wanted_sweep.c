/* trk_wanted_sweep.c - removes wanted entries that are expired or done
 * everywhere (trk_wanted_sweep.h). Called once per sweep tick; a done
 * check stops at the first selected node that lacks the release, so an
 * entry still in progress costs little. Loop thread only.
 */
#include "trk_wanted_sweep.h"

#include "trk_target.h"

/* 1 when every connected node e selects is a member of s with every chunk,
 * and there is at least one. */
static int done_everywhere(trk_tracker_t *t, const trk_wanted_entry_t *e,
                           trk_swarm_t *s) {
  const trk_peers_t *peers = trk_tracker_peers(t);
  uint32_t cursor = 0, complete = 0;
  trk_peer_t *p;
  while ((p = trk_peers_next(peers, &cursor)) != NULL) {
    if (!trk_target_selects(e, p))
      continue;
    const trk_member_t *m = trk_swarm_member_of(s, p);
    if (m == NULL || trk_member_have_count(m) < trk_swarm_total_chunks(s))
      return 0;
    complete++;
  }
  return complete > 0;
}

uint32_t trk_wanted_sweep(trk_tracker_t *t, uint64_t now_ms) {
  trk_wanted_t *w = trk_tracker_wanted(t);
  uint32_t removed = trk_wanted_expire(w, now_ms);
  for (uint32_t i = 0; i < trk_wanted_count(w);) {
    const trk_wanted_entry_t *e = trk_wanted_at(w, i);
    trk_swarm_t *s =
        e->has_digest ? trk_tracker_swarm_find(t, &e->digest) : NULL;
    if (s != NULL && done_everywhere(t, e, s)) {
      ws_hash_t d = e->digest;
      (void)trk_wanted_remove_done(w, &d); /* e is gone after this */
      removed++;
    } else {
      i++;
    }
  }
  return removed;
}
