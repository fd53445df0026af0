/* trk_select.c - which peers an announce reply carries.
 *
 * Rank (highest first): same zone as the asker (only when the asker has a
 * zone), then "useful": the candidate holds a chunk the asker lacks or
 * leases one from the origin (it will hold it soon). Equal ranks are
 * ordered by a random draw so announces spread load over all holders
 * instead of herding onto the first ones. Only members with a listen port
 * are returned. Cost is bounded: at most TRK_SELECT_SCAN_MAX members are
 * examined (a random window of the member array), each in
 * O(bitfield words + leases). Loop thread only.
 */
#include "trk_swarm-int.h"

#include <stdlib.h>
#include <string.h>

#define RANK_ZONE 2u
#define RANK_USEFUL 1u

typedef struct {
  const trk_member_t *m;
  uint32_t rank;
  uint32_t tie;
} cand_t;

uint64_t trk_select_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

static int useful(const trk_swarm_t *s, const trk_member_t *c,
                  const trk_member_t *asker) {
  if (asker == NULL)
    return c->have_count > 0 || c->nleases > 0;
  if (asker->have_count == s->total)
    return 0;
  for (uint32_t i = 0; i < c->nleases; i++)
    if (!trk_bits_get(asker->have, c->leases[i].chunk))
      return 1;
  if (c->have_count == 0)
    return 0;
  for (uint32_t w = 0; w < s->nwords; w++)
    if (c->have[w] & ~asker->have[w])
      return 1;
  return 0;
}

static int cand_cmp(const void *a, const void *b) {
  const cand_t *x = a;
  const cand_t *y = b;
  if (x->rank != y->rank)
    return x->rank > y->rank ? -1 : 1;
  if (x->tie != y->tie)
    return x->tie < y->tie ? -1 : 1;
  return 0;
}

uint32_t trk_select_peers(const trk_swarm_t *s, const trk_peer_t *who,
                          const trk_member_t *asker, uint32_t max,
                          uint64_t *rng, const trk_peer_t **out) {
  cand_t cand[TRK_SELECT_SCAN_MAX];
  uint32_t ncand = 0;
  if (max > TRK_REPLY_PEERS_MAX)
    max = TRK_REPLY_PEERS_MAX;
  if (max == 0 || s->nmembers == 0)
    return 0;
  if (*rng == 0)
    *rng = 0x9E3779B97F4A7C15ull; /* xorshift must not start at 0 */
  uint32_t scan =
      s->nmembers < TRK_SELECT_SCAN_MAX ? s->nmembers : TRK_SELECT_SCAN_MAX;
  uint32_t start = (uint32_t)(trk_select_rand(rng) % s->nmembers);
  const char *zone = who->zone;
  for (uint32_t k = 0; k < scan; k++) {
    const trk_member_t *c = s->members[(start + k) % s->nmembers];
    if (c == asker || c->peer == who || c->peer->port == 0)
      continue;
    uint32_t rank = 0;
    if (zone[0] != '\0' && strcmp(zone, c->peer->zone) == 0)
      rank |= RANK_ZONE;
    if (useful(s, c, asker))
      rank |= RANK_USEFUL;
    cand[ncand].m = c;
    cand[ncand].rank = rank;
    cand[ncand].tie = (uint32_t)(trk_select_rand(rng) >> 32);
    ncand++;
  }
  qsort(cand, ncand, sizeof(cand[0]), cand_cmp);
  uint32_t n = ncand < max ? ncand : max;
  for (uint32_t i = 0; i < n; i++)
    out[i] = cand[i].m->peer;
  return n;
}
