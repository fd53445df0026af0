/* sched.c - the chunk scheduler's three queues (see sched.h).
 *
 * Owns: the queue heads and tails; the links live in each peer_file_t
 * (qnext, qprev, inq, cursor) and belong to this file.
 * Thread: loop thread.
 */
#include "fetch/sched.h"

#include <stddef.h>

static void sched_push(peer_sched_t *s, peer_file_t *file, int tier,
                       int at_head) {
  if (file->inq[tier])
    return;
  file->inq[tier] = 1;
  file->qnext[tier] = file->qprev[tier] = NULL;
  if (s->qhead[tier] == NULL) {
    s->qhead[tier] = s->qtail[tier] = file;
  } else if (at_head) {
    file->qnext[tier] = s->qhead[tier];
    s->qhead[tier]->qprev[tier] = file;
    s->qhead[tier] = file;
  } else {
    file->qprev[tier] = s->qtail[tier];
    s->qtail[tier]->qnext[tier] = file;
    s->qtail[tier] = file;
  }
}

static void sched_pop(peer_sched_t *s, peer_file_t *file, int tier) {
  if (!file->inq[tier])
    return;
  if (file->qprev[tier] != NULL)
    file->qprev[tier]->qnext[tier] = file->qnext[tier];
  else
    s->qhead[tier] = file->qnext[tier];
  if (file->qnext[tier] != NULL)
    file->qnext[tier]->qprev[tier] = file->qprev[tier];
  else
    s->qtail[tier] = file->qprev[tier];
  file->qnext[tier] = file->qprev[tier] = NULL;
  file->inq[tier] = 0;
}

void peer_sched_remove(peer_sched_t *s, peer_file_t *file) {
  for (int tier = 0; tier < PEER_TIER_LAST; tier++)
    sched_pop(s, file, tier);
}

/* Small files in their own tier; bigger ones get their first chunk early
 * and the rest after every first chunk. */
void peer_sched_add(peer_sched_t *s, peer_file_t *file) {
  if (file->mf.nchunks == 1) {
    sched_push(s, file, PEER_TIER_SMALL, 0);
    return;
  }
  if (file->chunk_state[0] == PEER_CHUNK_MISSING)
    sched_push(s, file, PEER_TIER_FIRST, 0);
  file->cursor = 0;
  sched_push(s, file, PEER_TIER_REST, 0);
}

void peer_sched_requeue(peer_sched_t *s, peer_file_t *file, uint32_t j) {
  if (file->mf.nchunks == 1) {
    sched_push(s, file, PEER_TIER_SMALL, 1);
    return;
  }
  if (!file->inq[PEER_TIER_REST] || j < file->cursor)
    file->cursor = file->inq[PEER_TIER_REST] ? j : 0;
  sched_pop(s, file, PEER_TIER_REST);
  sched_push(s, file, PEER_TIER_REST, 1);
}

/* The chunk tier offers from f, or UINT32_MAX (f then leaves the tier).
 * The first-chunk and small tiers offer chunk 0 once; the rest tier walks
 * from the cursor. */
static uint32_t sched_offer(peer_sched_t *s, peer_file_t *f, int tier) {
  if (tier != PEER_TIER_REST) {
    sched_pop(s, f, tier);
    return f->chunk_state[0] == PEER_CHUNK_MISSING ? 0 : UINT32_MAX;
  }
  for (uint32_t k = f->cursor; k < f->mf.nchunks; k++) {
    if (f->chunk_state[k] == PEER_CHUNK_MISSING) {
      f->cursor = k + 1;
      return k;
    }
  }
  sched_pop(s, f, tier);
  return UINT32_MAX;
}

int peer_sched_pick(peer_sched_t *s, peer_file_t **file, uint32_t *j) {
  for (int tier = 0; tier < PEER_TIER_LAST; tier++) {
    while (s->qhead[tier] != NULL) {
      peer_file_t *f = s->qhead[tier];
      if (f->state != PEER_FILE_FETCHING) {
        sched_pop(s, f, tier);
        continue;
      }
      uint32_t k = sched_offer(s, f, tier);
      if (k == UINT32_MAX)
        continue;
      *file = f;
      *j = k;
      return 1;
    }
  }
  return 0;
}
