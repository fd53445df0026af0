/* trk_swarm.h - one release's swarm: members, availability, origin leases.
 *
 * A swarm is keyed by the release digest and its chunk count (the
 * tracker's table). Each member (a peer that wants or holds the release)
 * has a have-bitfield; the swarm keeps per-chunk availability (how many
 * members whose claims count hold the chunk: trk_swarm_weigh) and the
 * origin lease table: which member, if any, is
 * fetching a chunk from S3. The lease invariants (docs/tracker.md):
 *
 *   - a chunk has at most one lease holder at a time;
 *   - a chunk is leasable only while no member holds it and no one holds
 *     a lease on it ("need" set), so while any holder remains it is never
 *     fetched from the origin again;
 *   - a member holds at most trk_lease_limit() leases (its share
 *     trk_lease_cap() plus TRK_LEASE_SPARE, at most
 *     TRK_LEASES_PER_PEER_MAX; 1 in a swarm with at least twice its
 *     target of downloaders, which then holds the target in all and grants in
 *     turn), so origin fetches spread over all downloading members and a
 *     slow member cannot hoard chunks;
 *   - a chunk a member gave back goes to another downloader first;
 *   - a lease ends when its holder reports the chunk (completed), gives it
 *     back (released), another member reports the chunk (revoked), its TTL
 *     passes without renew (expired), or its holder leaves (released).
 *
 * Functions implemented in trk_swarm.c (membership, haves), trk_lease.c
 * (leases) and trk_select.c (peer selection). Pure logic, loop thread only;
 * time comes in as now_ms.
 */
#ifndef TRK_SWARM_H
#define TRK_SWARM_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "trk_config.h"
#include "trk_peer.h"
#include "ws_err.h"

typedef struct trk_swarm_s trk_swarm_t;
typedef struct trk_member_s trk_member_t;

typedef enum {
  TRK_ROLE_LEECH, /* wants the release; may get origin leases */
  TRK_ROLE_SEED,  /* serves what it has; never gets leases */
  TRK_ROLE_LAST
} trk_role_t;

typedef struct {
  uint32_t chunk;
  uint64_t expires_ms;
} trk_lease_t;

typedef struct {
  uint32_t total_chunks;
  uint32_t members;
  uint32_t complete;       /* members holding every chunk */
  uint32_t downloaders;    /* leech members still missing chunks */
  uint32_t chunks_held;    /* chunks at least one member holds */
  uint32_t chunks_leased;  /* chunks under an origin lease now */
  uint32_t chunks_need;    /* chunks nobody holds and nobody fetches */
  uint64_t leases_granted; /* counters since the swarm was created */
  uint64_t leases_completed;
  uint64_t leases_expired;
  uint64_t leases_released;
  uint64_t leases_revoked; /* someone else reported the chunk first */
  uint64_t origin_refetch; /* grants of a chunk that was held before */
  uint32_t chunks_suspect; /* claimed, but reported stuck by a downloader */
  uint64_t leases_suspect; /* grants of suspect chunks */
  uint32_t members_unconfirmed; /* members whose claims count for nothing */
  uint64_t claims_distrusted;   /* times a member's claims stopped counting */
  uint64_t claims_confirmed;    /* confirmations accepted (HAVE "f") */
  uint64_t created_ms;
} trk_swarm_stats_t;

typedef struct {
  const trk_peer_t *peer; /* borrowed */
  trk_role_t role;
  uint32_t have_count;
  uint32_t nleases;
  uint64_t joined_ms;
  uint64_t origin_chunks; /* leases this member completed */
  int counted;            /* its claims count as holders now */
  uint64_t confirmed_ms;  /* last confirmation (0: never) */
} trk_member_info_t;

/* --- swarm (trk_swarm.c) ---------------------------------------------- */

/* Returns a new empty swarm for digest with total_chunks chunks
 * (1..TRK_MAX_CHUNKS), or NULL for a bad count or on allocation failure. */
trk_swarm_t *trk_swarm_new(const ws_hash_t *digest, uint32_t total_chunks,
                           uint64_t now_ms);
/* Frees the swarm; every member leaves first (their peers' join records
 * are dropped). Accepts NULL. */
void trk_swarm_free(trk_swarm_t *s);

const ws_hash_t *trk_swarm_digest(const trk_swarm_t *s);
/* "sha256-<hex>", static storage inside s. */
const char *trk_swarm_digest_str(const trk_swarm_t *s);
uint32_t trk_swarm_total_chunks(const trk_swarm_t *s);
uint32_t trk_swarm_member_count(const trk_swarm_t *s);
/* Release URI peers reported (borrowed, "" if none). */
const char *trk_swarm_uri(const trk_swarm_t *s);
/* Copies uri (at most TRK_URI_MAX bytes, no control chars) or WS_EUSAGE. */
int trk_swarm_set_uri(trk_swarm_t *s, const char *uri) WS_MUST_USE;
/* Bytes one member may cost (for the tracker's memory budget): its record
 * and room for its dashboard ring, which it holds only while it gains
 * chunks (trk_stats.h). */
size_t trk_swarm_member_bytes(const trk_swarm_t *s);
/* Bytes a swarm costs besides its per-chunk arrays and its members: its
 * record, the dashboard history and the first members[] room. */
size_t trk_swarm_fixed_bytes(void);

/* Members the swarm takes (--max-members): 1..TRK_MAX_MEMBERS_MAX, 0 or
 * out of range: TRK_MAX_MEMBERS (the default of a new swarm). Members
 * already in stay. */
void trk_swarm_set_max_members(trk_swarm_t *s, uint32_t n);
uint32_t trk_swarm_max_members(const trk_swarm_t *s);

/* Adds peer as a member (borrows peer; records the join on the peer).
 * *out borrows the member until trk_swarm_leave. WS_ELIMIT when the swarm
 * has its max_members or the peer its releases-per-node cap, WS_EEXISTS if
 * already a member, -ENOMEM. */
int trk_swarm_join(trk_swarm_t *s, trk_peer_t *peer, trk_role_t role,
                   uint64_t now_ms, trk_member_t **out) WS_MUST_USE;
/* Removes the member: frees its leases (they become leasable again),
 * drops its chunks from availability, forgets the join on its peer, frees
 * m. */
void trk_swarm_leave(trk_swarm_t *s, trk_member_t *m);
/* m's peer changed its port or zone: peer selection sees it now. */
void trk_swarm_member_refresh(trk_swarm_t *s, const trk_member_t *m);
/* The member record of peer in s, or NULL. */
trk_member_t *trk_swarm_member_of(trk_swarm_t *s, trk_peer_t *peer);

/* Replaces m's have-set with an MSB-first wire bitfield of exactly
 * ceil(total_chunks / 8) bytes (WS_EBADMSG otherwise). Leases on chunks m
 * now holds end (completed if m held them, revoked otherwise). */
int trk_swarm_set_have(trk_swarm_t *s, trk_member_t *m, const uint8_t *bits,
                       size_t nbytes) WS_MUST_USE;
/* m reports one more chunk. 0 (also for a chunk already held), or
 * WS_EBADMSG for an index out of range. */
int trk_swarm_add_have(trk_swarm_t *s, trk_member_t *m,
                       uint32_t chunk) WS_MUST_USE;
void trk_swarm_set_role(trk_swarm_t *s, trk_member_t *m, trk_role_t role);

/* --- weighing of have-claims (trk_swarm.c; docs/tracker.md) ---------- */

/* Weighs every member's claims at now_ms (the tracker's sweep): with no
 * other member downloading, a member is believed and off trial; else its
 * trial starts (believed for TRK_CLAIM_GRACE_MS) once it claims a chunk,
 * and when its belief runs out its claims stop counting in avail, so the
 * chunks only it claims enter the need set (leasable). */
void trk_swarm_weigh(trk_swarm_t *s, uint64_t now_ms);
/* Another member, at another address, verified a chunk m sent it: m is
 * believed for TRK_CLAIM_CONFIRM_MS more and its claims count again. */
void trk_swarm_confirm(trk_swarm_t *s, trk_member_t *m, uint64_t now_ms);
/* Time for what follows (a completed lease extends belief from it). */
void trk_swarm_set_now(trk_swarm_t *s, uint64_t now_ms);
/* 1 if m's claims count as holders now. */
int trk_member_counted(const trk_member_t *m);
/* 1 if claims stopped counting since the mark was last cleared (clear !=
 * 0 clears it) and so chunks became leasable: downloaders should be
 * topped up. */
int trk_swarm_regrant(trk_swarm_t *s, int clear);
/* Marks s for a top-up (trk_swarm_regrant), as a claim that stopped
 * counting does. */
void trk_swarm_mark_regrant(trk_swarm_t *s);

void trk_swarm_stats(const trk_swarm_t *s, trk_swarm_stats_t *out);
/* Member i (0 <= i < member_count) in join order modulo removals. */
void trk_swarm_member_info(const trk_swarm_t *s, uint32_t i,
                           trk_member_info_t *out);
/* Counted members holding chunk (trk_swarm_weigh). */
uint32_t trk_swarm_avail(const trk_swarm_t *s, uint32_t chunk);
/* The member leasing chunk now, or NULL. */
const trk_member_t *trk_swarm_lease_holder(const trk_swarm_t *s,
                                           uint32_t chunk);

/* chunk must be < the swarm's total_chunks. */
int trk_member_has(const trk_member_t *m, uint32_t chunk);
uint32_t trk_member_have_count(const trk_member_t *m);
trk_peer_t *trk_member_peer(const trk_member_t *m);
trk_role_t trk_member_role(const trk_member_t *m);
/* Origin fetches the member runs at once (from its last announce). */
uint32_t trk_member_want(const trk_member_t *m);
void trk_member_set_want(trk_member_t *m, uint32_t want);

/* --- stripe trees (trk_tree.c) ----------------------------------------- */

/* Stripes to aim for in s (0: no trees); see trk_tracker_set_tree. */
void trk_swarm_set_tree(trk_swarm_t *s, uint32_t stripes);
/* Stripes in effect now: the set number (at least 2) once the swarm has
 * twice as many members, else 0 (no trees). */
uint32_t trk_tree_stripes(const trk_swarm_t *s);
/* m's parent in stripe st's tree; NULL for its root or with no trees. */
const trk_member_t *trk_tree_parent(const trk_swarm_t *s, const trk_member_t *m,
                                    uint32_t st);
/* Whether chunk c may be leased to m: no trees, m the root of c's stripe,
 * c loose, or that root not fetching from the origin. */
bool trk_tree_may_lease(const trk_swarm_t *s, const trk_member_t *m,
                        uint32_t c);
/* c's lease ended unfinished: anyone may lease it from now on. */
void trk_tree_loosen(trk_swarm_t *s, uint32_t c);
/* Whether trees leave m no chunk to lease now (a cheap test before a
 * grant's scan of the need set). */
bool trk_tree_leases_none(const trk_swarm_t *s, const trk_member_t *m);
/* m's parent in each stripe into tree[TRK_TREE_MAX] (NULL: m is its
 * root), the parents moved first among peers[0..*npeers) (at most
 * TRK_REPLY_PEERS_MAX), and a short *interval_ms while a swarm with trees
 * is young; returns the number of stripes. */
uint32_t trk_tree_reply(const trk_swarm_t *s, const trk_member_t *m,
                        const trk_peer_t **tree, const trk_peer_t **peers,
                        uint32_t *npeers, uint32_t *interval_ms);

/* --- origin leases (trk_lease.c) -------------------------------------- */

/* Origin fetches to aim for in s (0: the default policy); see
 * trk_tracker_set_origin_inflight. */
void trk_swarm_set_origin_target(trk_swarm_t *s, uint32_t n);
/* Peers about to join s as downloaders (reading its manifest); the lease
 * cap divides the origin target among them and the downloaders. */
void trk_swarm_set_joining(trk_swarm_t *s, uint32_t n);
/* Leases one member runs at full rate: the swarm's origin target
 * (TRK_ORIGIN_INFLIGHT_TARGET, or trk_tracker_set_origin_inflight's)
 * divided by the number of downloaders (plus peers about to join), clamped
 * to [TRK_LEASES_PER_PEER_MIN, _MAX]. */
uint32_t trk_lease_cap(const trk_swarm_t *s);
/* Leases one member may hold: trk_lease_cap() to run at full rate plus
 * TRK_LEASE_SPARE to start as one of them ends, at most
 * TRK_LEASES_PER_PEER_MAX; 1 when the swarm has at least
 * TRK_LEASE_SHARED_FACTOR times as many downloaders as its target (then the
 * swarm holds the target in all, and grants go round: trk_config.h,
 * TRK_LEASE_ROTATE). */
uint32_t trk_lease_limit(const trk_swarm_t *s);
/* Tops m up to min(trk_lease_limit(), want) leases on chunks nobody holds or
 * fetches: those a member asked to have read first (trk_lease_prefer),
 * then the rest, each lowest index first. Writes the newly granted chunk
 * indices to granted (room for max_out) and returns how many. Seeds, complete
 * members, want == 0 and a member that had one of the swarm's last few grants
 * (TRK_LEASE_ROTATE, when the swarm holds its target in all) get none. */
uint32_t trk_lease_grant(trk_swarm_t *s, trk_member_t *m, uint32_t want,
                         uint64_t now_ms, uint32_t *granted, uint32_t max_out);

/* A member asks for chunks[0..n) (each < total, n <= TRK_STUCK_MAX; others
 * are ignored) to be read from the origin before the rest (p2pd: its
 * single-chunk files, which its scheduler asks for first). Without it the
 * origin read the release in index order, and the small files that sort after
 * the shards (model.safetensors.index.json, tokenizer.json) came from S3 last,
 * every node waited for them at the end: at 48 nodes all finished in the same
 * second, up to 29 s after S3 had sent its last byte (docs/benchmarks.md,
 * session 17). The mark stays for the swarm's life. */
void trk_lease_prefer(trk_swarm_t *s, const uint32_t *chunks, uint32_t n);

/* Chunks one announce may report stuck (the wire's WS_MAX_LEASE_CHUNKS). */
#define TRK_STUCK_MAX 256u
/* m waited past its stall time on stuck[0..n) with no byte from anyone:
 * each chunk that some member claims (so not in the need set) but m lacks
 * is marked suspect, and one whom nobody leases is leased to m all the
 * same, within m's limit as for trk_lease_grant, lowest index of the list
 * first. One lease per chunk keeps S3 single-flight: the other stuck
 * members get the chunk from m. The mark goes when a lease on the chunk
 * completes or is revoked, or when nobody claims it any more; a chunk
 * whose lease completed is not marked again until one of its holders
 * leaves. Returns the chunks granted, written to granted (room for
 * max_out). */
uint32_t trk_lease_grant_stuck(trk_swarm_t *s, trk_member_t *m,
                               const uint32_t *stuck, uint32_t n,
                               uint64_t now_ms, uint32_t *granted,
                               uint32_t max_out);
/* Extends m's lease on chunk to now + TRK_LEASE_TTL_MS. A chunk m does not
 * lease but that is in the need set (nobody holds or fetches it: a lease
 * granted before a tracker restart, or one that expired moments ago) is
 * adopted as m's lease if m has room (TRK_LEASES_PER_PEER_MAX). Otherwise
 * WS_ENOTFOUND: someone else has or fetches it, m should stop. */
int trk_lease_renew(trk_swarm_t *s, trk_member_t *m, uint32_t chunk,
                    uint64_t now_ms) WS_MUST_USE;
/* m gives the lease back (fetch failed or cancelled); the chunk becomes
 * leasable at once, but for TRK_LEASE_AVOID_MS it goes to m again only if
 * m is the sole downloader. WS_ENOTFOUND if m does not hold it. */
int trk_lease_release(trk_swarm_t *s, trk_member_t *m, uint32_t chunk,
                      uint64_t now_ms) WS_MUST_USE;
/* Ends every lease whose deadline is <= now_ms; returns how many. */
uint32_t trk_lease_expire(trk_swarm_t *s, uint64_t now_ms);
/* Copies m's current leases (at most max) to out; returns how many. */
uint32_t trk_lease_list(const trk_member_t *m, trk_lease_t *out, uint32_t max);

/* --- peer selection (trk_select.c) ------------------------------------ */

/* Picks at most max (<= TRK_REPLY_PEERS_MAX) members other than who, each
 * with a listen port: same non-empty zone as who first; within that,
 * members holding a chunk asker lacks and 1/TRK_RICH_SHARE_DIV of the
 * release; then those named by fewer than TRK_NAMED_FULL replies so far
 * (each pick counts); then members holding a chunk asker lacks; ties in
 * random order from *rng (xorshift state). asker is who's membership, or
 * NULL when who has not joined (it knows no chunk count yet: it lacks
 * everything). Examines
 * at most TRK_SELECT_SCAN_MAX members from a random start. Writes borrowed
 * peer pointers to out; returns the count. */
uint32_t trk_select_peers(trk_swarm_t *s, const trk_peer_t *who,
                          const trk_member_t *asker, uint32_t max,
                          uint64_t *rng, const trk_peer_t **out);
/* xorshift64 step used for tie-breaks; *state must be non-zero. */
uint64_t trk_select_rand(uint64_t *state);

#endif
