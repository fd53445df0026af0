/* trk_swarms.c - the tracker's swarm table and its ended swarms
 * (trk_swarms.h). Loop thread only.
 */
#include "trk_swarms.h"

#include "ws_err.h"

trk_swarm_t *trk_swarms_find_key(const trk_swarms_t *tab,
                                 const ws_hash_t *digest,
                                 uint32_t total_chunks) {
  for (uint32_t i = 0; i < tab->n; i++)
    if (ws_hash_eq(trk_swarm_digest(tab->at[i]), digest) &&
        trk_swarm_total_chunks(tab->at[i]) == total_chunks)
      return tab->at[i];
  return NULL;
}

trk_swarm_t *trk_swarms_find(const trk_swarms_t *tab, const ws_hash_t *digest) {
  trk_swarm_t *best = NULL;
  for (uint32_t i = 0; i < tab->n; i++)
    if (ws_hash_eq(trk_swarm_digest(tab->at[i]), digest) &&
        (best == NULL ||
         trk_swarm_member_count(tab->at[i]) > trk_swarm_member_count(best)))
      best = tab->at[i];
  return best;
}

int trk_swarms_add(trk_swarms_t *tab, trk_swarm_t *s) {
  if (tab->n >= TRK_MAX_SWARMS)
    return WS_ELIMIT;
  tab->ended_ms[tab->n] = 0;
  tab->at[tab->n++] = s;
  return 0;
}

static void swarms_drop_at(trk_swarms_t *tab, uint32_t i) {
  trk_swarm_t *s = tab->at[i];
  tab->n--;
  tab->at[i] = tab->at[tab->n];
  tab->ended_ms[i] = tab->ended_ms[tab->n];
  trk_swarm_free(s);
}

void trk_swarms_drop(trk_swarms_t *tab, trk_swarm_t *s) {
  for (uint32_t i = 0; i < tab->n; i++) {
    if (tab->at[i] == s) {
      swarms_drop_at(tab, i);
      return;
    }
  }
}

/* When swarm i ended, for ordering: one the sweep has not noted yet ended
 * after every noted one. */
static uint64_t swarms_ended_key(const trk_swarms_t *tab, uint32_t i) {
  return tab->ended_ms[i] != 0 ? tab->ended_ms[i] : UINT64_MAX;
}

int trk_swarms_drop_oldest_ended(trk_swarms_t *tab) {
  uint32_t oldest = UINT32_MAX;
  for (uint32_t i = 0; i < tab->n; i++)
    if (trk_swarm_member_count(tab->at[i]) == 0 &&
        (oldest == UINT32_MAX ||
         swarms_ended_key(tab, i) < swarms_ended_key(tab, oldest)))
      oldest = i;
  if (oldest == UINT32_MAX)
    return 0;
  swarms_drop_at(tab, oldest);
  return 1;
}

void trk_swarms_sweep(trk_swarms_t *tab, uint64_t now_ms) {
  for (uint32_t i = 0; i < tab->n;) {
    if (trk_swarm_member_count(tab->at[i]) != 0) {
      tab->ended_ms[i] = 0;
      i++;
    } else if (tab->ended_ms[i] == 0) {
      tab->ended_ms[i] = now_ms != 0 ? now_ms : 1;
      i++;
    } else if (now_ms - tab->ended_ms[i] >= TRK_SWARM_ENDED_MS) {
      swarms_drop_at(tab, i); /* the last one moved to i: look again */
    } else {
      i++;
    }
  }
}

int trk_swarms_ended(const trk_swarms_t *tab, const trk_swarm_t *s,
                     uint64_t now_ms, uint64_t *since_ms) {
  if (trk_swarm_member_count(s) != 0)
    return 0;
  *since_ms = now_ms;
  for (uint32_t i = 0; i < tab->n; i++)
    if (tab->at[i] == s && tab->ended_ms[i] != 0)
      *since_ms = tab->ended_ms[i];
  return 1;
}

void trk_swarms_free_all(trk_swarms_t *tab) {
  for (uint32_t i = 0; i < tab->n; i++)
    trk_swarm_free(tab->at[i]);
  tab->n = 0;
}
