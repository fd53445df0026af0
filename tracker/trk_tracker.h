/* trk_tracker.h - the tracker's whole soft state and the operations the
 * network layer calls: connect, announce, have, renew, release,
 * disconnect, tick, prefetch.
 *
 * Owns the peer registry, every swarm (created on the first announce of a
 * digest, freed when its last member leaves) and the wanted set. Nothing
 * here does I/O or reads a clock: trk_server.c / trk_http.c decode the
 * wire and pass now_ms. A tracker restart starts from empty state; peers
 * reconnect and re-announce their have-sets, so swarms, availability and
 * (after one TTL at most) leases are rebuilt within one announce interval.
 *
 * Loop thread only.
 */
#ifndef TRK_TRACKER_H
#define TRK_TRACKER_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "trk_config.h"
#include "trk_peer.h"
#include "trk_stats.h"
#include "trk_swarm.h"
#include "trk_wanted.h"
#include "ws_err.h"

typedef struct trk_tracker_s trk_tracker_t;

/* One announce for one release. Pointers are borrowed for the call. */
typedef struct {
  ws_hash_t digest;
  const char *uri;       /* optional: the release URI the peer resolved */
  uint32_t total_chunks; /* 1..TRK_MAX_CHUNKS, must match the swarm; 0:
                            manifest not known yet (no join, peers only) */
  trk_role_t role;
  const uint8_t *bitfield; /* optional full have-set, MSB-first wire form */
  size_t bitfield_len;     /* ceil(total_chunks / 8) when bitfield != NULL */
  const uint32_t *have;    /* optional have deltas, applied after bitfield */
  uint32_t nhave;          /* at most total_chunks */
  uint32_t want_leases;    /* origin fetches the peer runs at once; 0: none */
  uint32_t max_peers;      /* peers wanted in the reply; 0: none */
  int leave;               /* the peer stops sharing this release */
  trk_report_t report;     /* optional progress report (dashboard) */
  /* optional: chunks the peer is stalled on (trk_lease_grant_stuck), at
   * most TRK_STUCK_MAX, each < total_chunks */
  const uint32_t *stuck;
  uint32_t nstuck;
  /* optional: chunks the peer wants read from the origin first
   * (trk_lease_prefer), at most TRK_STUCK_MAX, each < total_chunks */
  const uint32_t *first;
  uint32_t nfirst;
} trk_announce_t;

/* What the network layer sends back. Pointers borrow tracker state and
 * stay valid until the next call that changes the tracker. */
typedef struct {
  uint32_t npeers;
  const trk_peer_t *peers[TRK_REPLY_PEERS_MAX];
  /* Every origin lease the peer holds in this swarm now (old and new);
   * the peer drops in-flight fetches not listed here. */
  uint32_t nleases;
  trk_lease_t leases[TRK_LEASES_PER_PEER_MAX];
  uint32_t ngranted; /* how many of leases[] are new in this reply */
  /* Of those, how many to fetch at full rate at once (trk_lease_cap); the
   * rest are spares, started as a fetch ends. 0 when it holds none. */
  uint32_t streams;
  /* Wanted releases this peer has not joined. */
  uint32_t nwanted;
  const trk_wanted_entry_t *wanted[TRK_MAX_WANTED];
  /* When to announce again; 0 in a reply that answers no ANNOUNCE (a
   * HAVE's or a lease update's lease list, a pushed one): the peer keeps
   * the time the last announce reply gave it. Those replies came every
   * few hundred ms to a node holding leases, and each used to set its
   * next announce 5 s away, so it never announced while it fetched and
   * learnt no new peers and no stripe trees until it was done. */
  uint32_t interval_ms;
  /* The member's parent in each stripe tree (trk_tree.c), NULL in the
   * stripe it is the root of; ntree 0: no trees. */
  uint32_t ntree;
  const trk_peer_t *tree[TRK_TREE_MAX];
} trk_reply_t;

/* Why a connect or announce was refused with WS_ELIMIT (a cap). */
typedef enum {
  TRK_REFUSE_NONE,
  TRK_REFUSE_PEERS,             /* --max-peers */
  TRK_REFUSE_MEMORY,            /* --max-memory */
  TRK_REFUSE_MEMBERS,           /* --max-members of the release */
  TRK_REFUSE_RELEASES_PER_NODE, /* --max-releases-per-node */
  TRK_REFUSE_SWARMS,            /* TRK_MAX_SWARMS releases tracked */
  TRK_REFUSE_NODE_BOUND,        /* node id connected from another address */
  TRK_REFUSE_PER_ADDR,          /* --max-nodes-per-addr from one address */
  TRK_REFUSE_CONNS,             /* handshakes at once (trk_server.c) */
  TRK_REFUSE_LAST
} trk_refusal_t;

typedef struct {
  uint32_t peers;
  uint32_t peers_max;
  uint32_t members_max;  /* per release */
  uint64_t memory_bytes; /* state_bytes plus the peers' (--max-memory) */
  uint64_t memory_max;
  uint32_t swarms;       /* listed, ended ones included */
  uint32_t swarms_ended; /* listed with no member left (trk_swarms.h) */
  uint32_t wanted;
  uint64_t state_bytes; /* have-bitfields and member records */
  uint64_t announces;
  uint64_t announces_limited;
  uint64_t announces_rejected; /* bad input or caps */
  uint64_t haves;
  uint64_t leases_expired;   /* by trk_tracker_tick and announce sweeps */
  uint64_t nodes_failed;     /* members that left a release with an error */
  uint64_t manifest_readers; /* joiners told to read a manifest from S3 */
  uint64_t peers_replaced;   /* same node id reconnected */
  uint64_t refused[TRK_REFUSE_LAST]; /* refusals at each cap */
  uint64_t started_ms;
  uint64_t hold_until_ms; /* a restart's hold on origin leases; 0: none */
} trk_tracker_stats_t;

/* Returns a new empty tracker (max_peers 0 = TRK_MAX_PEERS; seed drives
 * the tie-break shuffle), or NULL on allocation failure. */
trk_tracker_t *trk_tracker_new(uint32_t max_peers, uint64_t seed,
                               uint64_t now_ms);
void trk_tracker_free(trk_tracker_t *t); /* accepts NULL */

/* Members one release takes (--max-members; 0: TRK_MAX_MEMBERS), for
 * every swarm now and later. */
void trk_tracker_set_max_members(trk_tracker_t *t, uint32_t n);
/* Bytes of state the tracker may hold (--max-memory; 0: the default
 * TRK_MAX_STATE_BYTES): swarms, memberships and TRK_PEER_CONN_BYTES plus
 * the records of each peer. Past it, connects and joins are refused. */
void trk_tracker_set_max_memory(trk_tracker_t *t, uint64_t bytes);
/* The cap behind the last WS_ELIMIT refusal of a connect or announce. */
trk_refusal_t trk_tracker_refusal(const trk_tracker_t *t);
/* "max_peers", "max_memory", ...: the metric label of a refusal. */
const char *trk_refusal_name(trk_refusal_t r);

/* Registers an authenticated connection. A peer already registered with
 * the same node id from the same address (a restarted daemon whose old
 * connection is not yet seen dead) is disconnected first and its id
 * written to *replaced (0 if none) so the caller can close that
 * connection; from another address the new one is refused (the id is
 * bound to its address while connected). WS_ELIMIT at the peer cap, the
 * memory cap, that binding or TRK_MAX_NODES_PER_ADDR (trk_tracker_refusal
 * says which), WS_EUSAGE for bad info. A peer that says it rejoins
 * (info->rejoin) within TRK_RESTART_HOLD_MS of the tracker's start starts
 * the restart's hold, if none is on, until that long after the start
 * (trk_tracker_hold_leases). */
int trk_tracker_connect(trk_tracker_t *t, const trk_peer_info_t *info,
                        uint64_t now_ms, trk_peer_id_t *out,
                        trk_peer_id_t *replaced) WS_MUST_USE;
/* Forgets the peer: it leaves every swarm, its leases become leasable at
 * once. No-op for an unknown id. */
void trk_tracker_disconnect(trk_tracker_t *t, trk_peer_id_t id);
/* Updates the peer's listen address / zone (announce header fields). */
int trk_tracker_peer_update(trk_tracker_t *t, trk_peer_id_t id,
                            const trk_peer_info_t *info) WS_MUST_USE;

/* Handles one announce: joins/creates the swarm (keyed by digest and
 * chunk count: an announce with another count for the same digest is a
 * swarm of its own, so a wrong count squats nothing), applies the have-set and
 * deltas, tops up origin leases, selects peers, lists wanted releases.
 * Costs one token of the peer's announce bucket (WS_EBUSY when empty).
 * Errors: WS_ENOTFOUND unknown peer, WS_EPROTO chunk count differs from
 * the one this peer joined the release with, WS_ELIMIT a cap (swarms, members,
 * swarms per peer, memory), WS_EBADMSG bad bitfield/delta, WS_EUSAGE bad
 * uri/role. On error *reply is zeroed; state changes already applied (e.g. a
 * valid bitfield) stay. */
int trk_tracker_announce(trk_tracker_t *t, trk_peer_id_t id,
                         const trk_announce_t *a, uint64_t now_ms,
                         trk_reply_t *reply) WS_MUST_USE;
/* Light update between announces: the peer now holds chunks[0..n).
 * No token (work is bounded by the release's chunk count). Leases are
 * topped up to the want_leases of the peer's last announce; reply (may be
 * NULL) gets the lease list only. WS_ENOTFOUND if the peer is not in the
 * swarm, WS_EBADMSG for a bad index (earlier ones stay applied). */
int trk_tracker_have(trk_tracker_t *t, trk_peer_id_t id,
                     const ws_hash_t *digest, const uint32_t *chunks,
                     uint32_t n, uint64_t now_ms,
                     trk_reply_t *reply) WS_MUST_USE;
/* The peer verified a chunk of digest that the node from_node sent it
 * (HAVE "f"): if from_node is another member of the peer's swarm at
 * another address (or both are on loopback), its claims are confirmed
 * (trk_swarm_confirm). 1 confirmed, 0 not (unknown, self, same address). */
int trk_tracker_served(trk_tracker_t *t, trk_peer_id_t id,
                       const ws_hash_t *digest, const char *from_node,
                       uint64_t now_ms);
/* Lease renew / release for one chunk; WS_ENOTFOUND if the peer, swarm or
 * lease is unknown (the peer should stop fetching that chunk). */
int trk_tracker_renew(trk_tracker_t *t, trk_peer_id_t id,
                      const ws_hash_t *digest, uint32_t chunk,
                      uint64_t now_ms) WS_MUST_USE;
int trk_tracker_release(trk_tracker_t *t, trk_peer_id_t id,
                        const ws_hash_t *digest, uint32_t chunk,
                        uint64_t now_ms) WS_MUST_USE;
/* Periodic work (every TRK_SWEEP_INTERVAL_MS): expires leases and weighs
 * claims (trk_swarm_weigh) in all swarms. Returns how many leases
 * expired. */
uint32_t trk_tracker_tick(trk_tracker_t *t, uint64_t now_ms);
/* After a tick: the leases peer id may take now in swarms where claims
 * stopped counting (a top-up, as trk_tracker_have with no chunks), for
 * its joined release i (0 <= i < its joins). 1 with *digest and *r set
 * when some were granted, 0 if none, WS_ENOTFOUND past its joins. */
int trk_tracker_regrant(trk_tracker_t *t, trk_peer_id_t id, uint32_t i,
                        uint64_t now_ms, ws_hash_t *digest, trk_reply_t *r);
/* 1 if the last tick left swarms to top up (trk_tracker_regrant); clears
 * the marks when clear != 0. */
int trk_tracker_regrant_pending(trk_tracker_t *t, int clear);

/* The autoscaler hook. digest and/or uri (see trk_wanted_add). A digest
 * alone must name a swarm the tracker knows (its URI is filled in from the
 * swarm) or WS_ENOTFOUND. Returns 0 new, 1 already wanted, or an error. */
int trk_tracker_prefetch(trk_tracker_t *t, const ws_hash_t *digest,
                         const char *uri, uint64_t now_ms) WS_MUST_USE;
/* Sets the selector of the wanted release digest (sel NULL: every node)
 * and chooses nodes under its cap (trk_target.h). 1 when the set of nodes
 * it is for may have grown (push the wanted set), 0 unchanged,
 * WS_ENOTFOUND, -ENOMEM. */
int trk_tracker_prefetch_select(trk_tracker_t *t, const ws_hash_t *digest,
                                const trk_selector_t *sel) WS_MUST_USE;

/* Read access for JSON, metrics and the server. */
/* Concurrent origin (S3) fetches to aim for per swarm, shared among its
 * downloading peers (at least one each); 0 restores the default policy
 * (TRK_ORIGIN_INFLIGHT_TARGET, at least TRK_LEASES_PER_PEER_MIN each).
 * Fewer fetches in flight finish each chunk sooner, so peers can swap it
 * sooner: set it low when the origin link, not S3, is the limit. */
void trk_tracker_set_origin_inflight(trk_tracker_t *t, uint32_t n);
/* Stripe trees of K stripes in every swarm (trk_tree.c, docs/tracker.md
 * "Stripe trees"), at most TRK_TREE_MAX; 0 turns them off. */
void trk_tracker_set_tree(trk_tracker_t *t, uint32_t k);
/* After a restart (TRK_RESTART_HOLD_MS): until until_ms no origin lease
 * is granted, while the holders reconnect; replies still name the members
 * that announced. The first trk_tracker_tick after it marks every swarm
 * for a top-up (leases pushed). */
void trk_tracker_hold_leases(trk_tracker_t *t, uint64_t until_ms);
/* When the hold ends (0: none on). */
uint64_t trk_tracker_hold_until(const trk_tracker_t *t);
/* The wanted releases peer id has not joined, as a reply with nothing else
 * (no peers, no leases, interval 0): what the server pushes to every peer
 * when the wanted set grows, so a POSTed prefetch starts at once rather
 * than at each peer's next announce. r->nwanted is 0 when there is none. */
void trk_tracker_wanted_reply(trk_tracker_t *t, trk_peer_id_t id,
                              trk_reply_t *r);
trk_peers_t *trk_tracker_peers(const trk_tracker_t *t);
trk_wanted_t *trk_tracker_wanted(const trk_tracker_t *t);
uint32_t trk_tracker_swarm_count(const trk_tracker_t *t);
trk_swarm_t *trk_tracker_swarm_at(const trk_tracker_t *t, uint32_t i);
/* Whether listed swarm s has ended (its last member left; it stays listed
 * for TRK_SWARM_ENDED_MS, trk_swarms.h), and since when (*since_ms). */
int trk_tracker_swarm_ended(const trk_tracker_t *t, const trk_swarm_t *s,
                            uint64_t now_ms, uint64_t *since_ms);
/* The swarm of digest with the most members (several when announces
 * disagree on the chunk count), or NULL. */
trk_swarm_t *trk_tracker_swarm_find(const trk_tracker_t *t,
                                    const ws_hash_t *digest);
void trk_tracker_stats(const trk_tracker_t *t, trk_tracker_stats_t *out);
/* Seconds left at now_ms of the restart's hold in st (0: none), as the
 * API and /metrics show it. */
static inline double trk_tracker_hold_left_s(const trk_tracker_stats_t *st,
                                             uint64_t now_ms) {
  return st->hold_until_ms > now_ms
             ? (double)(st->hold_until_ms - now_ms) / 1000.0
             : 0.0;
}

#endif
