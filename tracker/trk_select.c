/* trk_select.c - which peers an announce reply carries.
 *
 * Rank (highest first): same zone as the asker (only when the asker has a
 * zone), then useful (below) and holding 1/TRK_RICH_SHARE_DIV of the
 * release (a node joining a swarm long under way finds the holders first,
 * not the other new joiners), then named by fewer than TRK_NAMED_FULL
 * replies so far, then "useful": the candidate holds a chunk the asker
 * lacks. Each reply's picks are counted: at a cluster-wide start every
 * joiner's reply could name only the members already joined, so the first
 * joiners were dialed by nearly everyone (slots full, later dials refused)
 * and the last by nobody: in 24- and 48-node runs the nodes left with 5-10
 * neighbours finished last (docs/benchmarks.md, session 18). The count
 * comes before usefulness: the first joiners are also the first to hold
 * something (the release's small files come whole from S3 within a
 * fraction of a second), and while being useful outranked the count, every
 * later joiner was still named them, dialed them and was refused
 * (docs/tracker.md "Peer selection"). A lease alone does not make a member
 * useful: at a cluster-wide start the lease holders were the only useful
 * members, every joiner dialed the same few, filled their slots and was
 * refused, and at the end every node dialed the holder of the last lease
 * until its own transfers were crowded out (docs/tracker.md "Peer
 * selection"). Equal ranks are then ordered by a random draw so announces
 * spread load over all holders instead of herding onto the first ones.
 * Only members with a listen port are returned. Cost is bounded: at most
 * TRK_SELECT_SCAN_MAX members are examined (a random window of the member
 * array), each in O(bitfield words + leases). The best `max` are kept in a
 * bounded heap (its root the worst kept) rather than sorting every
 * candidate; the scan reads the swarm's dense member view (peer, keyed
 * zone hash, port, whether it holds anything that counts), and only a
 * candidate that could still enter and could be useful is looked at
 * further (the usefulness test, the one read of the member): the same
 * draws, the same picks in the same order as a full sort. Loop thread
 * only.
 */
#include "trk_swarm-int.h"

#include "ws_rand.h"

#define RANK_ZONE 4u
#define RANK_RICH 2u /* useful, and holds 1/TRK_RICH_SHARE_DIV of it */
#define RANK_USEFUL 1u

typedef struct {
  uint32_t idx; /* in members[] and mview[] */
  uint32_t rank;
  uint32_t named;
  uint32_t tie;
} cand_t;

uint64_t trk_select_rand(uint64_t *state) {
  return ws_xorshift64(state);
}

/* Claims that do not count now (trk_swarm_weigh) make nobody useful: such
 * a member is still listed, after the useful ones, so that an honest
 * holder nobody fetched from yet can be reached and confirmed. Called only
 * for a candidate whose view says it holds something that counts. */
static int useful(const trk_swarm_t *s, const trk_member_t *c,
                  const trk_member_t *asker) {
  if (asker == NULL)
    return 1;
  for (uint32_t w = 0; w < s->nwords; w++)
    if (c->have[w] & ~asker->have[w])
      return 1;
  return 0;
}

/* x ranks before y: same zone where y is not, then useful and rich where
 * y is not, then named fewer than TRK_NAMED_FULL times where y was not,
 * then useful where y is not, then the lower draw. */
static int cand_before(const cand_t *x, const cand_t *y) {
  uint32_t xr = x->rank & (RANK_ZONE | RANK_RICH),
           yr = y->rank & (RANK_ZONE | RANK_RICH);
  if (xr != yr)
    return xr > yr;
  int xf = x->named >= TRK_NAMED_FULL, yf = y->named >= TRK_NAMED_FULL;
  if (xf != yf)
    return yf;
  if (x->rank != y->rank)
    return x->rank > y->rank;
  return x->tie < y->tie;
}

/* Restores the heap below i; the root is the candidate ranked last. */
static void heap_down(cand_t *h, uint32_t n, uint32_t i) {
  for (;;) {
    uint32_t l = 2u * i + 1u, r = l + 1u, w = i;
    if (l < n && cand_before(&h[w], &h[l]))
      w = l;
    if (r < n && cand_before(&h[w], &h[r]))
      w = r;
    if (w == i)
      return;
    cand_t t = h[i];
    h[i] = h[w];
    h[w] = t;
    i = w;
  }
}

static void heap_up(cand_t *h, uint32_t i) {
  while (i > 0) {
    uint32_t p = (i - 1u) / 2u;
    if (!cand_before(&h[p], &h[i]))
      return;
    cand_t t = h[i];
    h[i] = h[p];
    h[p] = t;
    i = p;
  }
}

uint32_t trk_select_peers(trk_swarm_t *s, const trk_peer_t *who,
                          const trk_member_t *asker, uint32_t max,
                          uint64_t *rng, const trk_peer_t **out) {
  cand_t heap[TRK_REPLY_PEERS_MAX];
  uint32_t n = 0;
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
  /* An asker holding every chunk finds nobody useful. */
  int asker_full = asker != NULL && asker->have_count == s->total;
  for (uint32_t k = 0, i = start; k < scan;
       k++, i = i + 1u == s->nmembers ? 0 : i + 1u) {
    const trk_mview_t *v = &s->mview[i];
    if ((asker != NULL && i == asker->idx && s->members[i] == asker) ||
        v->peer == who || v->port == 0)
      continue;
    /* Zones compare by keyed hash (trk_peer.h): no read of the peer. */
    int zone_maybe = zone[0] != '\0' && v->zone_hash == who->zone_hash;
    uint32_t zrank = zone_maybe ? RANK_ZONE : 0u;
    int maybe_useful = v->holds && !asker_full;
    uint32_t urank = v->rich ? RANK_RICH | RANK_USEFUL : RANK_USEFUL;
    cand_t x = {.rank = maybe_useful ? zrank | urank : zrank,
                .named = v->named};
    x.tie = (uint32_t)(trk_select_rand(rng) >> 32);
    /* Full: c enters only if it ranks before the last one kept; x is the
     * best it could rank, checked before reading the member itself. */
    if (n == max && !cand_before(&x, &heap[0]))
      continue;
    x.idx = i;
    if (maybe_useful && !useful(s, s->members[i], asker))
      x.rank = zrank;
    if (n < max) {
      heap[n] = x;
      heap_up(heap, n++);
    } else if (cand_before(&x, &heap[0])) {
      heap[0] = x;
      heap_down(heap, n, 0);
    }
  }
  /* Best first: pop the last-ranked into the back. */
  for (uint32_t left = n; left > 1; left--) {
    cand_t t = heap[0];
    heap[0] = heap[left - 1u];
    heap[left - 1u] = t;
    heap_down(heap, left - 1u, 0);
  }
  for (uint32_t i = 0; i < n; i++) {
    trk_mview_t *v = &s->mview[heap[i].idx];
    out[i] = v->peer;
    v->named++;
  }
  return n;
}
