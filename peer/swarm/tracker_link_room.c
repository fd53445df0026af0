/* tracker_link_room.c - what a tracker link announces when the tracker has
 * room for only some of its releases (the rules are in tracker_link.h).
 *
 * A tracker caps the releases one node may join (p2p-tracker
 * --max-releases-per-node). Without these rules a node that held that many
 * seeds could never fetch another release through the tracker, and the
 * release the tracker refused would wait for it for ever. Loop thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "swarm/tracker_link-int.h"
#include "ws_log.h"

/* Releases being fetched (or not joined yet) come first, the oldest
 * first; then seeds, the most recent first. */
static int rank_cmp(const void *a, const void *b) {
  const tc_rel_t *x = *(const tc_rel_t *const *)a;
  const tc_rel_t *y = *(const tc_rel_t *const *)b;
  bool xs = x->role == WS_SWARM_SEED, ys = y->role == WS_SWARM_SEED;

  if (xs != ys)
    return xs ? 1 : -1;
  if (x->seq == y->seq)
    return 0;
  return (x->seq < y->seq) == !xs ? -1 : 1;
}

void tc_room_order(const peer_tracker_link_t *tc, tc_rel_t **ord) {
  memcpy(ord, tc->rels, tc->nrels * sizeof(*ord));
  qsort(ord, tc->nrels, sizeof(*ord), rank_cmp);
}

void tc_rel_restart(tc_rel_t *r) {
  r->full = true;
  r->n_delta = 0;
  if (r->event == WS_ANN_UPDATE)
    r->event = WS_ANN_STARTED;
}

static tc_rel_t *rel_find(const peer_tracker_link_t *tc, const uint8_t *d) {
  for (uint32_t i = 0; i < tc->nrels; i++)
    if (memcmp(tc->rels[i]->digest, d, WS_PROTO_DIGEST_LEN) == 0)
      return tc->rels[i];
  return NULL;
}

static void short_hex(const uint8_t *d, char out[17]) {
  static const char hex[] = "0123456789abcdef";
  for (unsigned i = 0; i < 8; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15u];
  }
  out[16] = '\0';
}

/* The oldest seed the tracker holds for us, or NULL. */
static tc_rel_t *oldest_seed(const peer_tracker_link_t *tc) {
  tc_rel_t *best = NULL;
  for (uint32_t i = 0; i < tc->nrels; i++) {
    tc_rel_t *r = tc->rels[i];
    if (r->role == WS_SWARM_SEED && r->total > 0 && !r->parked &&
        r->refused_ms == 0 && (best == NULL || r->seq < best->seq))
      best = r;
  }
  return best;
}

/* Stops announcing seed r to the tracker: STOPPED there, kept here. */
static void park(peer_tracker_link_t *tc, tc_rel_t *r, bool stop) {
  if (stop) {
    r->event = WS_ANN_STOPPED;
    (void)tc_send_announce(tc, r); /* a full queue: its leases expire */
  }
  r->event = WS_ANN_STARTED;
  r->parked = true;
  r->due_now = false;
  tc_rel_restart(r);
}

void tc_room_refused(peer_tracker_link_t *tc, const uint8_t *digest) {
  tc_rel_t *r = rel_find(tc, digest);
  uint64_t now = uv_now(tc->loop);
  char ds[17], vs[17];

  if (r == NULL || r->total == 0)
    return; /* untracked since, or not joining anything */
  short_hex(digest, ds);
  if (r->role == WS_SWARM_SEED) {
    if (!r->parked)
      WS_LOGI("tracker link %s:%u: no room for seed sha256-%s...: not "
              "announced there (still served to neighbours)",
              tc->cfg.host, (unsigned)tc->cfg.port, ds);
    park(tc, r, false);
    return;
  }
  tc_rel_t *victim = r->dropped ? NULL : oldest_seed(tc);
  tc_rel_restart(r);
  if (victim != NULL) {
    short_hex(victim->digest, vs);
    WS_LOGI("tracker link %s:%u: no room for sha256-%s...: stopped "
            "announcing seed sha256-%s... to make room",
            tc->cfg.host, (unsigned)tc->cfg.port, ds, vs);
    park(tc, victim, true);
    r->dropped = true;
    r->due_now = true;
    tc_flush(tc);
    return;
  }
  if (r->refused_ms == 0) {
    r->refused_ms = now;
    WS_LOGW("tracker link %s:%u: tracker has no room for sha256-%s... "
            "(WS_ELIMIT) and no seed of ours to give up: fetching it "
            "without the tracker, asking again with backoff",
            tc->cfg.host, (unsigned)tc->cfg.port, ds);
  }
  r->retry_ms =
      r->retry_ms == 0 ? PEER_TRACKER_LINK_REFUSED_RETRY_MS : r->retry_ms * 2u;
  if (r->retry_ms > PEER_TRACKER_LINK_REFUSED_RETRY_MAX_MS)
    r->retry_ms = PEER_TRACKER_LINK_REFUSED_RETRY_MAX_MS;
  r->dropped = false; /* the next try may make room again */
  r->due_now = false;
  r->next_ms = now + r->retry_ms;
  tc_schedule(tc);
}

void tc_room_accepted(tc_rel_t *r) {
  r->refused_ms = 0;
  r->retry_ms = 0;
  r->dropped = false;
  r->parked = false;
}

void tc_room_freed(peer_tracker_link_t *tc) {
  tc_rel_t *best = NULL;
  for (uint32_t i = 0; i < tc->nrels; i++) {
    tc_rel_t *r = tc->rels[i];
    if (r->parked && (best == NULL || r->seq > best->seq))
      best = r;
  }
  if (best == NULL)
    return;
  best->parked = false;
  best->due_now = true;
  tc_rel_restart(best);
  tc_flush(tc);
}

int peer_tracker_link_refused_since(const peer_tracker_link_t *tc,
                                    const uint8_t digest[32],
                                    uint64_t *since_ms) {
  const tc_rel_t *r = rel_find(tc, digest);

  if (r == NULL || r->refused_ms == 0 || r->role == WS_SWARM_SEED)
    return 0;
  *since_ms = r->refused_ms;
  return 1;
}
