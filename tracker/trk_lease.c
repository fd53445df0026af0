/* trk_lease.c - origin leases: grant, renew, release, expire.
 *
 * A lease is the tracker's grant to one member to fetch one chunk from S3.
 * Each lease lives in two places kept in step: the swarm's holder[chunk]
 * and a slot of the holder's leases[] (at most TRK_LEASES_PER_PEER_MAX).
 * State of a chunk, as far as the origin is concerned:
 *
 *     NEED --grant--> LEASED --have by holder--> HELD (completed)
 *      ^                |  \--have by another--> HELD (revoked)
 *      |                |
 *      +--expire/release/holder leaves--+
 *     HELD --last holder leaves--> NEED (counted as origin_refetch on grant)
 *
 * Grants take the lowest-index NEED chunks, so concurrent downloaders get
 * disjoint, adjacent runs and can start swapping at once; each member is
 * topped up to trk_lease_limit() (its share, trk_lease_cap(), plus a spare
 * it starts as a fetch ends) on every announce and HAVE, so fast members
 * come back for more and a slow one holds only a few.
 *
 * A claimed chunk nobody delivers (a holder nobody can reach, or one that
 * never serves) is not in the need set, so nothing above would lease it:
 * a downloader stalled on it names it in its announce ("st") and
 * trk_lease_grant_stuck leases it to that downloader all the same, one
 * lease per chunk.
 *
 * A claim counts only while its member is believed (trk_swarm_weigh): a
 * chunk only unbelieved members claim is in the need set like one nobody
 * claims, and granted to a downloader that lacks it.
 *
 * With stripe trees (trk_tree.c) each stripe's chunks go to its root only,
 * one lease at full rate and a spare, with no turn; a chunk whose lease
 * ended unfinished, or of a stripe whose root does not fetch, to anyone.
 *
 * Expiry: leased chunks are kept in deadline order (trk_swarm-int.h), so
 * trk_lease_expire, which runs on every announce, costs O(1) when nothing
 * is due and O(1) per lease it ends, whatever the swarm's size. Loop
 * thread only.
 */
#include "trk_swarm-int.h"

#include <assert.h>
#include <stdbool.h>

/* Downloaders the lease share counts (joining ones too, see
 * TRK_JOINING_MS), and the swarm's target. */
static uint32_t lease_members(const trk_swarm_t *s) {
  uint32_t n = s->downloaders + s->joining;
  return n == 0 ? 1u : n;
}

static uint32_t lease_target(const trk_swarm_t *s) {
  return s->origin_target != 0 ? s->origin_target : TRK_ORIGIN_INFLIGHT_TARGET;
}

/* At least TRK_LEASE_SHARED_FACTOR times as many downloaders as the
 * target: the swarm holds the target in all, one each, in turn
 * (trk_config.h). */
static bool lease_shared(const trk_swarm_t *s) {
  return lease_members(s) >= TRK_LEASE_SHARED_FACTOR * lease_target(s);
}

uint32_t trk_lease_cap(const trk_swarm_t *s) {
  if (trk_tree_stripes(s) != 0)
    return 1u; /* each root fetches its stripe in order */
  uint32_t n = lease_members(s), target = lease_target(s);
  uint32_t per = (target + n - 1u) / n;
  if (per < TRK_LEASES_PER_PEER_MIN)
    per = TRK_LEASES_PER_PEER_MIN;
  if (per > TRK_LEASES_PER_PEER_MAX)
    per = TRK_LEASES_PER_PEER_MAX;
  return per;
}

uint32_t trk_lease_limit(const trk_swarm_t *s) {
  if (lease_shared(s) && trk_tree_stripes(s) == 0)
    return 1u; /* no spare: it would keep a lease from another member */
  uint32_t n = trk_lease_cap(s) + TRK_LEASE_SPARE;
  return n < TRK_LEASES_PER_PEER_MAX ? n : TRK_LEASES_PER_PEER_MAX;
}

/* Leases the swarm may hold at once. */
static uint32_t lease_swarm_max(const trk_swarm_t *s) {
  return lease_shared(s) && trk_tree_stripes(s) == 0 ? lease_target(s)
                                                     : TRK_ORIGIN_INFLIGHT_MAX;
}

/* Whether m had one of the swarm's last few grants and should leave the
 * next to another downloader (TRK_LEASE_ROTATE). */
static bool lease_turn_taken(const trk_swarm_t *s, const trk_member_t *m) {
  uint32_t n = lease_members(s), target = lease_target(s);
  if (!lease_shared(s) || m->lease_seq == 0 || trk_tree_stripes(s) != 0)
    return false;
  uint32_t window =
      n - target < TRK_LEASE_ROTATE ? n - target : TRK_LEASE_ROTATE;
  return s->lease_seq - m->lease_seq < window;
}

/* ---- deadline order ---------------------------------------------------- */

static uint64_t deadline_of(const trk_swarm_t *s, uint32_t c) {
  const trk_member_t *h = s->holder[c];
  for (uint32_t i = 0; i < h->nleases; i++)
    if (h->leases[i].chunk == c)
      return h->leases[i].expires_ms;
  assert(0 && "a listed chunk is leased");
  return 0;
}

static void order_unlink(trk_swarm_t *s, uint32_t c) {
  uint32_t p = s->lprev[c], n = s->lnext[c];
  if (p != TRK_LEASE_NIL)
    s->lnext[p] = n;
  else
    s->lhead = n;
  if (n != TRK_LEASE_NIL)
    s->lprev[n] = p;
  else
    s->ltail = p;
}

/* Inserts leased chunk c (not listed) by its deadline. Deadlines only grow
 * with the loop's clock, so this is the tail; the walk back keeps the
 * order for callers that pass an earlier now_ms (tests). */
static void order_insert(trk_swarm_t *s, uint32_t c, uint64_t deadline) {
  uint32_t after = s->ltail;
  while (after != TRK_LEASE_NIL && deadline_of(s, after) > deadline)
    after = s->lprev[after];
  s->lprev[c] = after;
  s->lnext[c] = after != TRK_LEASE_NIL ? s->lnext[after] : s->lhead;
  if (after != TRK_LEASE_NIL)
    s->lnext[after] = c;
  else
    s->lhead = c;
  if (s->lnext[c] != TRK_LEASE_NIL)
    s->lprev[s->lnext[c]] = c;
  else
    s->ltail = c;
}

/* ---- leases -------------------------------------------------------------- */

void trk_lease_end_slot(trk_swarm_t *s, trk_member_t *holder, uint32_t slot,
                        trk_lease_end_t why) {
  assert(slot < holder->nleases);
  uint32_t c = holder->leases[slot].chunk;
  assert(s->holder[c] == holder);
  order_unlink(s, c);
  holder->leases[slot] = holder->leases[holder->nleases - 1u];
  holder->nleases--;
  s->holder[c] = NULL;
  s->leased--;
  if (why == TRK_LEASE_END_RELEASED || why == TRK_LEASE_END_EXPIRED)
    trk_tree_loosen(s, c); /* its root failed it: anyone's now */
  switch (why) {
  case TRK_LEASE_END_COMPLETED:
    s->n_completed++;
    trk_suspect_clear(s, c); /* delivered: the stuck ones ask its holder */
    trk_bits_set(s->vouched, c);
    break;
  case TRK_LEASE_END_REVOKED:
    s->n_revoked++;
    trk_suspect_clear(s, c);
    break;
  case TRK_LEASE_END_RELEASED:
    s->n_released++;
    break;
  case TRK_LEASE_END_EXPIRED:
  case TRK_LEASE_END_LAST:
    s->n_expired++;
    break;
  }
  if (s->avail[c] == 0) {
    trk_bits_set(s->need, c);
    s->need_count++;
    if (c < s->need_lo)
      s->need_lo = c;
  }
}

/* True if m gave chunk back within TRK_LEASE_AVOID_MS. */
static int avoided(const trk_member_t *m, uint32_t chunk, uint64_t now_ms) {
  for (uint32_t i = 0; i < TRK_LEASE_AVOID_SLOTS; i++)
    if (m->avoid[i].chunk == chunk && m->avoid[i].until_ms > now_ms)
      return 1;
  return 0;
}

static int slot_of(const trk_member_t *m, uint32_t chunk) {
  for (uint32_t i = 0; i < m->nleases; i++)
    if (m->leases[i].chunk == chunk)
      return (int)i;
  return -1;
}

void trk_lease_end_chunk(trk_swarm_t *s, uint32_t chunk, trk_lease_end_t why) {
  trk_member_t *h = s->holder[chunk];
  if (h == NULL)
    return;
  int slot = slot_of(h, chunk);
  assert(slot >= 0);
  trk_lease_end_slot(s, h, (uint32_t)slot, why);
}

/* Leases chunk c, which nobody leases and m lacks, to m (room checked by
 * the caller). */
static void lease_add(trk_swarm_t *s, trk_member_t *m, uint32_t c,
                      uint64_t now_ms) {
  assert(!trk_bits_get(m->have, c) && s->holder[c] == NULL &&
         m->nleases < TRK_LEASES_PER_PEER_MAX);
  s->holder[c] = m;
  s->leased++;
  s->n_granted++;
  if (trk_bits_get(s->ever, c))
    s->n_refetch++;
  m->leases[m->nleases].chunk = c;
  m->leases[m->nleases].expires_ms = now_ms + TRK_LEASE_TTL_MS;
  m->nleases++;
  order_insert(s, c, now_ms + TRK_LEASE_TTL_MS);
}

/* Moves need chunk c to a lease of m (room checked by the caller). */
static void lease_take(trk_swarm_t *s, trk_member_t *m, uint32_t c,
                       uint64_t now_ms) {
  /* need => avail == 0 => m cannot hold c. */
  assert(trk_bits_get(s->need, c));
  trk_bits_clear(s->need, c);
  s->need_count--;
  lease_add(s, m, c, now_ms);
}

void trk_lease_prefer(trk_swarm_t *s, const uint32_t *chunks, uint32_t n) {
  for (uint32_t i = 0; chunks != NULL && i < n && i < TRK_STUCK_MAX; i++) {
    if (chunks[i] < s->total && !trk_bits_get(s->first, chunks[i])) {
      trk_bits_set(s->first, chunks[i]);
      s->nfirst++;
    }
  }
}

/* Whether m may take chunk c of the need set now (lease_grant's rule). */
static bool grantable(const trk_swarm_t *s, const trk_member_t *m, uint32_t c,
                      uint64_t now_ms) {
  /* m's own claim that does not count (trk_swarm_weigh), or one m just
   * gave back: another downloader should take it. */
  return !trk_bits_get(m->have, c) &&
         !(s->downloaders > 1 && avoided(m, c, now_ms)) &&
         trk_tree_may_lease(s, m, c);
}

uint32_t trk_lease_grant(trk_swarm_t *s, trk_member_t *m, uint32_t want,
                         uint64_t now_ms, uint32_t *granted, uint32_t max_out) {
  uint32_t n = 0;
  s->now_ms = now_ms;
  if (!trk_member_is_downloader(s, m))
    return 0;
  uint32_t limit = trk_lease_limit(s), swarm_max = lease_swarm_max(s);
  if (want < limit)
    limit = want;
  if (lease_turn_taken(s, m) || trk_tree_leases_none(s, m))
    return 0; /* the next member's HAVE or announce takes it */
  /* First what a member asked to have read first, then in index order. */
  for (uint32_t w = 0; s->nfirst > 0 && w < s->nwords; w++) {
    uint64_t bits = s->first[w] & s->need[w];
    while (bits != 0 && m->nleases < limit && n < max_out &&
           s->leased < swarm_max) {
      uint32_t c = w * 64u + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1u;
      if (!grantable(s, m, c, now_ms))
        continue;
      lease_take(s, m, c, now_ms);
      m->lease_seq = ++s->lease_seq;
      granted[n++] = c;
    }
  }
  uint32_t from = s->need_lo;
  int skipped = 0;
  while (m->nleases < limit && n < max_out && s->need_count > 0 &&
         s->leased < swarm_max) {
    uint32_t c = trk_bits_next(s->need, s->total, from);
    if (c == s->total)
      break; /* only chunks m just gave back are left */
    if (!skipped)
      s->need_lo = c; /* nothing below c needs the origin */
    from = c + 1u;
    if (!grantable(s, m, c, now_ms)) {
      skipped = 1;
      continue;
    }
    lease_take(s, m, c, now_ms);
    m->lease_seq = ++s->lease_seq;
    granted[n++] = c;
  }
  return n;
}

uint32_t trk_lease_grant_stuck(trk_swarm_t *s, trk_member_t *m,
                               const uint32_t *stuck, uint32_t n,
                               uint64_t now_ms, uint32_t *granted,
                               uint32_t max_out) {
  uint32_t k = 0;
  if (!trk_member_is_downloader(s, m) || n > TRK_STUCK_MAX)
    return 0;
  uint32_t limit = trk_lease_limit(s);
  if (m->want_leases < limit)
    limit = m->want_leases;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t c = stuck[i];
    /* A chunk nobody claims is in the need set: trk_lease_grant's. One
     * a lease delivered is with a member that fetches: m gets it there. */
    if (c >= s->total || s->avail[c] == 0 || trk_bits_get(m->have, c) ||
        trk_bits_get(s->vouched, c))
      continue;
    if (!trk_bits_get(s->suspect, c)) {
      trk_bits_set(s->suspect, c);
      s->suspect_count++;
    }
    if (s->holder[c] != NULL || m->nleases >= limit || k >= max_out ||
        s->leased >= TRK_ORIGIN_INFLIGHT_MAX)
      continue; /* being fetched (single flight), or no room: next time */
    lease_add(s, m, c, now_ms);
    s->n_suspect++;
    granted[k++] = c;
  }
  return k;
}

int trk_lease_renew(trk_swarm_t *s, trk_member_t *m, uint32_t chunk,
                    uint64_t now_ms) {
  int slot = slot_of(m, chunk);
  if (slot >= 0) {
    order_unlink(s, chunk);
    m->leases[slot].expires_ms = now_ms + TRK_LEASE_TTL_MS;
    order_insert(s, chunk, now_ms + TRK_LEASE_TTL_MS);
    return 0;
  }
  /* Not m's lease. If nobody else holds or fetches the chunk (a lease from
   * before a tracker restart, or one that just expired while bytes were
   * still arriving), m keeps it: the fetch in flight is the cheapest. */
  if (chunk < s->total && trk_bits_get(s->need, chunk) &&
      !trk_bits_get(m->have, chunk) && trk_member_is_downloader(s, m) &&
      m->nleases < TRK_LEASES_PER_PEER_MAX &&
      s->leased < TRK_ORIGIN_INFLIGHT_MAX) {
    lease_take(s, m, chunk, now_ms);
    return 0;
  }
  return WS_ENOTFOUND;
}

int trk_lease_release(trk_swarm_t *s, trk_member_t *m, uint32_t chunk,
                      uint64_t now_ms) {
  int slot = slot_of(m, chunk);
  if (slot < 0)
    return WS_ENOTFOUND;
  trk_lease_end_slot(s, m, (uint32_t)slot, TRK_LEASE_END_RELEASED);
  /* The holder failed or gave up on this chunk: for a while, offer it to
   * other downloaders first (ring of the last few releases). */
  m->avoid[m->avoid_next].chunk = chunk;
  m->avoid[m->avoid_next].until_ms = now_ms + TRK_LEASE_AVOID_MS;
  m->avoid_next = (m->avoid_next + 1u) % TRK_LEASE_AVOID_SLOTS;
  return 0;
}

uint32_t trk_lease_expire(trk_swarm_t *s, uint64_t now_ms) {
  uint32_t n = 0;
  while (s->lhead != TRK_LEASE_NIL) {
    uint32_t c = s->lhead;
    trk_member_t *m = s->holder[c];
    int slot = slot_of(m, c);
    assert(slot >= 0);
    if (m->leases[slot].expires_ms > now_ms)
      break; /* the earliest deadline: nothing else is due */
    trk_stats_error(m, now_ms,
                    "S3 lease on chunk %u expired: no renew for %u s", c,
                    TRK_LEASE_TTL_MS / 1000u);
    trk_lease_end_slot(s, m, (uint32_t)slot, TRK_LEASE_END_EXPIRED);
    n++;
  }
  return n;
}

uint32_t trk_lease_list(const trk_member_t *m, trk_lease_t *out, uint32_t max) {
  uint32_t n = m->nleases < max ? m->nleases : max;
  for (uint32_t i = 0; i < n; i++)
    out[i] = m->leases[i];
  return n;
}
