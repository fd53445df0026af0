/* trackers.h - p2pd's trackers: one tracker link (tracker_link.h) to each
 * tracker of --tracker A,B,..., and which of them each release is
 * announced to.
 *
 * Releases are sharded by digest with rendezvous hashing (highest random
 * weight): every tracker address gets the score of a hash of (digest,
 * "host:port") and a release belongs to the tracker with the highest
 * score. Every node with the same list (in any order) computes the same
 * owner, so all of a release's announces, HAVEs and lease messages meet
 * at one tracker, and that tracker alone grants its origin leases: every
 * chunk still leaves S3 about once. Adding or losing one tracker moves
 * only the releases it owned.
 *
 * A node keeps a link to every tracker. Each link announces the presence
 * digest (all zero), so the wanted set is the union of every tracker's;
 * peers, leases and wanted entries are taken from whichever link brings
 * them (a link only reports releases tracked on it).
 *
 * Failover: when the link of a release's tracker has been down for
 * PEER_TRACKERS_MOVE_MS, the release moves to the next tracker in its
 * rendezvous order whose link has been up for PEER_TRACKERS_MOVE_MS: the
 * full have-bitfield is announced there, and the leases of the old one are
 * gone (they died with the link). When a tracker ranked higher than the
 * release's current one has been up for PEER_TRACKERS_MOVE_MS, the release
 * moves back to it (the current one gets STOPPED, which frees its leases
 * there). With every link down nothing moves: the origin gate falls back
 * to S3 after PEER_TRACKER_FALLBACK_MS of the release's link being down,
 * as with one tracker. With one tracker this is exactly one link.
 *
 * Thread: the loop thread that created it; every call and callback runs
 * there. Ownership: arguments are borrowed for the call and copied.
 */
#ifndef PEER_SWARM_TRACKERS_H
#define PEER_SWARM_TRACKERS_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "swarm/tracker_link.h"

#define PEER_TRACKERS_MAX 8u        /* addresses in --tracker */
#define PEER_TRACKERS_MOVE_MS 2000u /* grace before a release moves */
#define PEER_TRACKERS_CHECK_MS 250u /* how often moves are checked */
#define PEER_TRACKERS_ADDR_MAX (WS_HOST_MAX + 8)

typedef struct peer_trackers_s peer_trackers_t;

typedef struct {
  /* As peer_tracker_link_cbs_t, from any link. */
  void (*on_peers)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                   const ws_peer_info_t *peers, uint32_t n,
                   const char (*tree)[WS_NODE_ID_MAX + 1], uint32_t ntree);
  void (*on_leases)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                    const uint32_t *chunks, uint32_t n, uint32_t ttl_ms,
                    uint32_t streams);
  void (*on_wanted)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                    const char *uri);
  void (*on_nodes)(void *arg, const ws_peer_info_t *nodes, uint32_t n);
  /* Link to tracker addr ("host:port") up or down; ups: links up now. */
  void (*on_link)(void *arg, const char *addr, bool up, int status,
                  unsigned ups);
  /* The leases of digest are void: its tracker's link went down, or the
   * release moved to another tracker. */
  void (*on_leases_lost)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN]);
  /* As peer_tracker_link_cbs_t's on_report (optional). */
  void (*on_report)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                    ws_announce_t *a);
  void *arg;
} peer_trackers_cbs_t;

/* ---- rendezvous hashing (pure) ------------------------------------------- */

/* Splits "A,B,..." (spaces around entries allowed) into cfgs[0..*n), each
 * a copy of base with host and port set (peer_tracker_link_cfg_addr).
 * WS_EUSAGE: empty entry, bad address, the same address twice, or more
 * than max entries. */
int peer_trackers_parse(const char *list, const peer_tracker_link_cfg_t *base,
                        peer_tracker_link_cfg_t *cfgs, unsigned max,
                        unsigned *n) WS_MUST_USE;
/* The canonical "host:port" of a link config (what is hashed), in out. */
void peer_trackers_addr(const peer_tracker_link_cfg_t *cfg,
                        char out[PEER_TRACKERS_ADDR_MAX + 1]);
/* The rendezvous weight of tracker addr for a release digest. */
uint64_t peer_trackers_score(const char *addr, const uint8_t digest[32]);
/* order[0..n) = indexes of addrs[0..n) by descending score for digest
 * (ties by address), so order[0] owns the release and order[1] takes it
 * while order[0] is away. */
void peer_trackers_rank(const char *const *addrs, unsigned n,
                        const uint8_t digest[32], uint8_t *order);

typedef struct {
  bool up;           /* handshake done, link open */
  uint64_t since_ms; /* when it came up or went down (or was created) */
} peer_trackers_link_state_t;
/* Which link a release should be on now (see the header comment): order
 * from peer_trackers_rank, links' states, cur its link now (-1: none yet).
 * A link ranked above cur takes it once up for grace_ms; cur keeps it while
 * up or down for less than grace_ms; else the first link in order up for
 * grace_ms; else cur (order[0] when none). */
unsigned peer_trackers_choose(const uint8_t *order, unsigned n,
                              const peer_trackers_link_state_t *links, int cur,
                              uint64_t now_ms, uint32_t grace_ms);

/* ---- the links ----------------------------------------------------------- */

/* Returns-new in *out and starts one link per cfgs[i] (n >= 1, at most
 * PEER_TRACKERS_MAX; cfgs from peer_trackers_parse); each announces the
 * presence digest. WS_EUSAGE, -ENOMEM (nothing started). */
int peer_trackers_new(uv_loop_t *loop, const peer_tracker_link_cfg_t *cfgs,
                      unsigned n, const peer_trackers_cbs_t *cbs,
                      peer_trackers_t **out) WS_MUST_USE;

/* As the peer_tracker_link_* calls of the same names, on the link of the
 * release's tracker (the presence digest: on every link). */
int peer_trackers_track(peer_trackers_t *tr, const uint8_t digest[32],
                        uint32_t total_chunks, const ws_bitfield_t *have,
                        const char *uri, ws_swarm_role_t role) WS_MUST_USE;
int peer_trackers_have(peer_trackers_t *tr, const uint8_t digest[32],
                       uint32_t chunk) WS_MUST_USE;
/* peer_trackers_have naming the neighbour it came from (NULL: S3). */
int peer_trackers_have_from(peer_trackers_t *tr, const uint8_t digest[32],
                            uint32_t chunk, const char *from) WS_MUST_USE;
/* peer_tracker_link_soon on the link that announces digest. */
int peer_trackers_soon(peer_trackers_t *tr, const uint8_t digest[32]);
int peer_trackers_done(peer_trackers_t *tr,
                       const uint8_t digest[32]) WS_MUST_USE;
int peer_trackers_untrack(peer_trackers_t *tr,
                          const uint8_t digest[32]) WS_MUST_USE;
int peer_trackers_lease_renew(peer_trackers_t *tr, const uint8_t digest[32],
                              const uint32_t *chunks, uint32_t n,
                              const uint32_t *done,
                              uint32_t n_done) WS_MUST_USE;
int peer_trackers_lease_release(peer_trackers_t *tr, const uint8_t digest[32],
                                const uint32_t *chunks, uint32_t n,
                                const uint32_t *done,
                                uint32_t n_done) WS_MUST_USE;

/* Announces the presence digest on every link now: the daemon's cache has
 * just opened and wanted releases heard before were dropped (a daemon
 * takes no work until then), so the wanted set is asked for again at once
 * rather than at the next interval. */
void peer_trackers_presence_now(peer_trackers_t *tr);
/* 1 with *since_ms (when it went down) while the link of digest's tracker
 * is down, or (since the first refusal) while that tracker refuses digest
 * for want of room (peer_tracker_link_refused_since); 0 otherwise. An
 * untracked digest: its first choice. */
int peer_trackers_down_since(const peer_trackers_t *tr,
                             const uint8_t digest[32], uint64_t *since_ms);
/* Links up now; n of them in all. */
unsigned peer_trackers_up(const peer_trackers_t *tr, unsigned *n);
/* The address digest is announced to now (NULL when untracked). */
const char *peer_trackers_owner(const peer_trackers_t *tr,
                                const uint8_t digest[32]);

/* Closes every link (GOODBYE where connected); no callback runs after
 * this call; freed once the timer has closed. Accepts NULL. */
void peer_trackers_close(peer_trackers_t *tr);

#endif
