/* trk_swarm-int.h - swarm internals shared by trk_swarm.c, trk_lease.c and
 * trk_select.c only. Loop thread only.
 *
 * Per chunk c the swarm keeps:
 *   avail[c]  members whose have-bit c is set;
 *   holder[c] the member leasing c, or NULL;
 *   need bit  set exactly when avail[c] == 0 and holder[c] == NULL;
 *   ever bit  set once any member has held c (origin refetch accounting);
 *   suspect   set while c is claimed (avail > 0) but a downloader reported
 *             it stuck: leasable to a reporter though held (trk_lease.c);
 *   vouched   set when a lease on c completed (a member we lease to has
 *             it), until any holder of c leaves: never suspect meanwhile.
 * avail counts the claims of counted members only: a member whose claims
 * are not believed now (trk_swarm_weigh, docs/tracker.md "Weighing
 * have-claims") keeps its have-bits but adds nothing to avail, so a chunk
 * only it claims is in the need set and leased again.
 * need_lo is a lower bound on the first set need bit, so grants scan from
 * there instead of from chunk 0.
 *
 * Leased chunks are also on a list ordered by deadline (lnext/lprev by
 * chunk, TRK_LEASE_NIL at the ends, lhead the earliest): every lease lives
 * TRK_LEASE_TTL_MS from its grant or last renew, so a grant or renew goes
 * to the tail, and expiry looks at the head only instead of walking every
 * member (trk_lease.c).
 */
#ifndef TRK_SWARM_INT_H
#define TRK_SWARM_INT_H

#include <stdbool.h>

#include "trk_bits.h"
#include "trk_stats.h"
#include "trk_swarm.h"

struct trk_member_s {
  trk_peer_t *peer; /* borrowed; the peer outlives its memberships */
  uint32_t idx;     /* position in swarm->members */
  trk_role_t role;
  uint32_t have_count;
  uint32_t nleases;
  uint32_t want_leases; /* the member's own origin concurrency */
  uint64_t lease_seq;   /* swarm's lease_seq at its last grant (0: none) */
  trk_lease_t leases[TRK_LEASES_PER_PEER_MAX];
  struct {
    uint32_t chunk;
    uint64_t until_ms;            /* 0: empty slot */
  } avoid[TRK_LEASE_AVOID_SLOTS]; /* chunks it recently gave back */
  uint32_t avoid_next;
  uint64_t joined_ms;
  uint64_t origin_chunks;
  /* Weighing of its claims (trk_swarm_weigh): counted says its have-bits
   * are in avail; believed_ms is when its claims stop being believed
   * unless confirmed again (0: not on trial, nobody else downloads). */
  bool counted;
  uint64_t believed_ms;
  uint64_t confirmed_ms; /* last confirmation from another address */
  uint32_t peak_have;    /* most chunks it ever claimed */
  trk_mstats_t st;       /* the dashboard's numbers (trk_stats.c) */
  uint64_t have[];       /* TRK_BITS_WORDS(total_chunks) words */
};

/* What peer selection reads of member i, in a dense array in step with
 * members[] (trk_select.c scans hundreds per announce: one cache line per
 * four members instead of a member and a peer record each). */
typedef struct {
  const trk_peer_t *peer;
  uint64_t zone_hash; /* peer->zone_hash */
  uint16_t port;      /* peer->port; 0: serves nothing */
  /* have_count > 0 && counted: it may hold a chunk someone lacks. Most
   * scanned members of a big swarm hold nothing that counts (new, or
   * their claims not confirmed yet); reading this instead of the member
   * spared a cache miss per candidate (docs/benchmarks.md "Tracker
   * capacity", session 28). */
  bool holds;
  /* holds && have_count >= total / TRK_RICH_SHARE_DIV (trk_select.c). */
  bool rich;
  uint32_t named; /* replies that named it (trk_select.c) */
} trk_mview_t;

struct trk_swarm_s {
  ws_hash_t digest;
  /* Origin fetches to aim for in this swarm; 0: TRK_ORIGIN_INFLIGHT_TARGET
   * (trk_lease_cap). */
  uint32_t origin_target;
  uint64_t lease_seq; /* grants so far (rotation, trk_lease.c) */
  char digest_str[WS_DIGEST_STR_LEN + 1];
  char uri[TRK_URI_MAX + 1];
  uint32_t total;
  uint32_t nwords;
  uint32_t *avail;
  trk_member_t **holder;
  uint64_t *need;
  uint64_t *first; /* a member asked for it to be read first (trk_lease.c) */
  uint32_t nfirst; /* bits set in first */
  uint64_t *ever;
  uint64_t *suspect;
  uint64_t *vouched;
  uint64_t *loose; /* leasable to anyone, tree or not (trk_tree.c) */
  uint32_t nloose; /* bits set in loose */
  uint32_t tree_k; /* stripes asked for (trk_tree.c); 0: no trees */
  uint32_t suspect_count;
  uint32_t need_count;
  uint32_t need_lo;
  uint32_t held_chunks; /* chunks with avail > 0 */
  uint32_t leased;
  uint32_t complete;
  uint32_t downloaders;
  uint32_t joining; /* peers about to join (trk_swarm_set_joining) */
  uint32_t max_members;
  uint32_t *lnext; /* deadline order of leased chunks, per chunk */
  uint32_t *lprev;
  uint32_t lhead, ltail;
  trk_member_t **members;
  trk_mview_t *mview; /* members_cap entries */
  uint32_t nmembers;
  uint32_t members_cap;
  uint64_t created_ms;
  uint64_t n_granted;
  uint64_t n_completed;
  uint64_t n_expired;
  uint64_t n_released;
  uint64_t n_revoked;
  uint64_t n_refetch;
  uint64_t n_suspect;    /* grants of suspect chunks */
  uint32_t uncounted;    /* members whose claims are not believed now */
  uint64_t n_distrusted; /* times a member's claims stopped counting */
  uint64_t n_confirms;   /* confirmations accepted (HAVE "f") */
  uint64_t now_ms;       /* time of the last call that brought one */
  bool regrant; /* claims stopped counting: downloaders may lease more */
  struct trk_shist_s *hist; /* the dashboard's history (trk_stats.c) */
};

#define TRK_LEASE_NIL UINT32_MAX

typedef enum {
  TRK_LEASE_END_COMPLETED,
  TRK_LEASE_END_REVOKED,
  TRK_LEASE_END_RELEASED,
  TRK_LEASE_END_EXPIRED,
  TRK_LEASE_END_LAST
} trk_lease_end_t;

/* Ends holder's lease in slot `slot` (trk_lease.c). If nobody holds the
 * chunk, it goes back to the need set. */
void trk_lease_end_slot(trk_swarm_t *s, trk_member_t *holder, uint32_t slot,
                        trk_lease_end_t why);
/* Ends the lease on chunk, whoever holds it; no-op if none (trk_lease.c). */
void trk_lease_end_chunk(trk_swarm_t *s, uint32_t chunk, trk_lease_end_t why);

/* Clears chunk c's suspect mark, if set. */
static inline void trk_suspect_clear(trk_swarm_t *s, uint32_t c) {
  if (trk_bits_get(s->suspect, c)) {
    trk_bits_clear(s->suspect, c);
    s->suspect_count--;
  }
}

static inline int trk_member_is_downloader(const trk_swarm_t *s,
                                           const trk_member_t *m) {
  return m->role == TRK_ROLE_LEECH && m->have_count < s->total;
}

#endif
