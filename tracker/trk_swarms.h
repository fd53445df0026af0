/* trk_swarms.h - the tracker's swarm table: every swarm it lists, in a
 * dense array of at most TRK_MAX_SWARMS (swap-remove).
 *
 * A swarm whose last member has left is *ended*: it stays listed, with
 * its departed members' rows and their errors (the dashboard's and
 * /api/v1/swarms'), for TRK_SWARM_ENDED_MS, so that an operator still sees
 * why a release failed on every node after every node has left. An ended
 * swarm is a record only: nobody joins it (a node announcing its release
 * gets a new swarm in its place), and a new swarm that finds the table
 * full, or the tracker at its memory cap, takes the place of the ended
 * swarm that ended first.
 *
 * Owns the swarms. Pure logic, loop thread only.
 */
#ifndef TRK_SWARMS_H
#define TRK_SWARMS_H

#include <stdint.h>

#include "trk_config.h"
#include "trk_swarm.h"

typedef struct {
  trk_swarm_t *at[TRK_MAX_SWARMS];
  /* When each one's last member left, as first seen by trk_swarms_sweep
   * (0: it has members, or the sweep has not seen it empty yet). */
  uint64_t ended_ms[TRK_MAX_SWARMS];
  uint32_t n;
} trk_swarms_t;

/* The swarm of (digest, total_chunks), ended or not, or NULL. */
trk_swarm_t *trk_swarms_find_key(const trk_swarms_t *tab,
                                 const ws_hash_t *digest,
                                 uint32_t total_chunks);
/* Of the swarms of digest (one per chunk count), the one with the most
 * members, or NULL. */
trk_swarm_t *trk_swarms_find(const trk_swarms_t *tab, const ws_hash_t *digest);
/* Lists s (owned from now on); WS_ELIMIT when the table is full. */
int trk_swarms_add(trk_swarms_t *tab, trk_swarm_t *s);
/* Unlists and frees s. */
void trk_swarms_drop(trk_swarms_t *tab, trk_swarm_t *s);
/* Frees the ended swarm that ended first: 1, or 0 when none has ended. */
int trk_swarms_drop_oldest_ended(trk_swarms_t *tab);
/* Notes when swarms lost their last member and frees those ended
 * TRK_SWARM_ENDED_MS ago or more. */
void trk_swarms_sweep(trk_swarms_t *tab, uint64_t now_ms);
/* Whether listed swarm s has ended, and since when (*since_ms; now_ms
 * when the sweep has not noted it yet). */
int trk_swarms_ended(const trk_swarms_t *tab, const trk_swarm_t *s,
                     uint64_t now_ms, uint64_t *since_ms);
/* Frees every swarm. */
void trk_swarms_free_all(trk_swarms_t *tab);

#endif
