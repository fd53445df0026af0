/* trk_peer.h - the tracker's registry of connected peers.
 *
 * A peer is one authenticated tracker connection: its node id, the address
 * and port it serves chunks on, an optional zone label, the swarms it has
 * joined (at most the registry's releases-per-node cap, --max-releases-per-
 * node) and a token bucket that limits its
 * announce rate. Peer ids pack a slot and a generation so a stale id from a
 * closed connection never finds the slot's next occupant. Soft state: the
 * registry is rebuilt from reconnecting peers after a tracker restart.
 *
 * Pure logic, loop thread only; time comes in as now_ms so tests control it.
 */
#ifndef TRK_PEER_H
#define TRK_PEER_H

#include <stdint.h>

#include "trk_config.h"
#include "ws_err.h"
#include "ws_labels.h"

typedef uint32_t trk_peer_id_t; /* 0 is never a valid id */

struct trk_swarm_s;
struct trk_member_s;

/* What a peer says about itself; strings are borrowed for the call. */
typedef struct {
  const char *node_id; /* required: 1..TRK_NODE_ID_MAX printable chars */
  const char *addr;    /* listen host (IP literal or name); NULL or "" ok */
  uint16_t port;       /* listen port; 0 = does not serve */
  const char *zone;    /* optional zone label [A-Za-z0-9._:/-] */
  const char *labels;  /* canonical "k=v,..." (ws_labels.h); NULL: keep */
  bool rejoin;         /* it lost its link to a tracker here (HELLO "rj") */
} trk_peer_info_t;

/* One joined swarm: the swarm and this peer's membership record in it. */
typedef struct {
  struct trk_swarm_s *swarm;
  struct trk_member_s *member;
} trk_peer_join_t;

/* Fields are read-only outside trk_peer.c and trk_tracker.c. */
typedef struct trk_peer_s {
  trk_peer_id_t id;
  char node_id[TRK_NODE_ID_MAX + 1];
  char addr[TRK_ADDR_MAX + 1]; /* the connection's remote address */
  uint64_t addr_hash;          /* keyed hash of addr (per-address count) */
  char zone[TRK_ZONE_MAX + 1];
  /* Keyed 64-bit hash of zone (SipHash, a key per process): peer
   * selection compares zones by it without reading the text. */
  uint64_t zone_hash;
  char labels[WS_LABELS_MAX + 1]; /* from HELLO; "" when none */
  uint16_t port;
  uint64_t connected_ms;
  uint64_t last_announce_ms;
  uint64_t tokens_milli; /* token bucket, in thousandths of an announce */
  uint64_t tokens_ms;    /* time of the last refill */
  uint64_t announces;    /* accepted announces */
  uint64_t rate_limited; /* announces refused by the bucket */
  uint32_t njoined;
  uint32_t max_joined; /* the registry's cap when the peer was added */
  /* joined_cap slots, grown on demand up to max_joined (most nodes join a
   * few releases: 64 slots each would be 1 KiB a peer, mostly unused). */
  uint32_t joined_cap;
  trk_peer_join_t *joined;
} trk_peer_t;

typedef struct trk_peers_s trk_peers_t;

/* Returns a new empty registry holding at most max_peers (0 = TRK_MAX_PEERS;
 * never more than TRK_MAX_PEERS_MAX), or NULL on allocation failure. */
trk_peers_t *trk_peers_new(uint32_t max_peers);
/* Frees the registry and every peer in it; accepts NULL. Callers first
 * detach peers from their swarms (trk_tracker does). */
void trk_peers_free(trk_peers_t *reg);

/* Adds a peer. Copies info. On success *out borrows the new peer (valid
 * until trk_peers_remove). WS_ELIMIT when full, WS_EUSAGE for bad info,
 * -ENOMEM. */
int trk_peers_add(trk_peers_t *reg, const trk_peer_info_t *info,
                  uint64_t now_ms, trk_peer_t **out) WS_MUST_USE;
/* Removes and frees the peer with this id; no-op for an unknown id. The
 * peer must have no joined swarms left. */
void trk_peers_remove(trk_peers_t *reg, trk_peer_id_t id);
/* Borrowed pointer to the peer with this id, or NULL. */
trk_peer_t *trk_peers_get(const trk_peers_t *reg, trk_peer_id_t id);
/* Peers connected from addr now (trk_peers_max_per_addr). */
uint32_t trk_peers_addr_count(const trk_peers_t *reg, const char *addr);
/* 1 for a loopback address (127.0.0.0/8, ::1, ::ffff:127.x): the
 * tracker's own host. */
int trk_peer_addr_loopback(const char *addr);
/* Borrowed pointer to the peer with this node id, or NULL. */
trk_peer_t *trk_peers_find_node(const trk_peers_t *reg, const char *node_id);
uint32_t trk_peers_count(const trk_peers_t *reg);
uint32_t trk_peers_max(const trk_peers_t *reg);
/* Slots an iteration visits: every peer is in a slot below this. */
uint32_t trk_peers_slots(const trk_peers_t *reg);
/* Releases a peer added from now on may join: 1..TRK_MAX_SWARMS_PER_PEER_MAX
 * (else WS_EUSAGE); TRK_MAX_SWARMS_PER_PEER until set. */
int trk_peers_set_max_joined(trk_peers_t *reg, uint32_t n) WS_MUST_USE;
uint32_t trk_peers_max_joined(const trk_peers_t *reg);
/* Node ids one remote address may hold at once, loopback exempt (the
 * tracker's connect checks it): 1..TRK_MAX_NODES_PER_ADDR_MAX (else
 * WS_EUSAGE), --max-nodes-per-addr; TRK_MAX_NODES_PER_ADDR until set.
 * Lowering it drops nobody connected. */
int trk_peers_set_max_per_addr(trk_peers_t *reg, uint32_t n) WS_MUST_USE;
uint32_t trk_peers_max_per_addr(const trk_peers_t *reg);
/* Iteration: start with *cursor = 0; returns the next peer or NULL at the
 * end. Adding or removing peers during iteration is not allowed. */
trk_peer_t *trk_peers_next(const trk_peers_t *reg, uint32_t *cursor);

/* Replaces addr, port and zone (node_id must match: WS_EUSAGE otherwise).
 * On error the peer is unchanged. A registered peer is updated through
 * trk_peers_update, which keeps the per-address count. */
int trk_peer_update(trk_peer_t *peer, const trk_peer_info_t *info) WS_MUST_USE;
int trk_peers_update(trk_peers_t *reg, trk_peer_t *peer,
                     const trk_peer_info_t *info) WS_MUST_USE;

/* Takes one announce token: 0, or WS_EBUSY when the bucket is empty
 * (counted in peer->rate_limited). Bucket: TRK_ANNOUNCE_BURST deep,
 * refilled at TRK_ANNOUNCE_PER_S. */
int trk_peer_rate_take(trk_peer_t *peer, uint64_t now_ms) WS_MUST_USE;

/* Records that the peer joined swarm with membership member (both
 * borrowed). WS_ELIMIT past peer->max_joined, WS_EEXISTS if already
 * joined, -ENOMEM when the join slots could not grow. Moves the join
 * records: a trk_peer_join_t pointer is valid until the next add or del. */
int trk_peer_join_add(trk_peer_t *peer, struct trk_swarm_s *swarm,
                      struct trk_member_s *member) WS_MUST_USE;
/* The join record for swarm, or NULL. */
trk_peer_join_t *trk_peer_join_find(trk_peer_t *peer,
                                    const struct trk_swarm_s *swarm);
/* Forgets the join record for swarm; no-op if absent. */
void trk_peer_join_del(trk_peer_t *peer, const struct trk_swarm_s *swarm);

/* Validates a zone label / node id / host text (the rules above). */
int trk_peer_zone_valid(const char *zone);
int trk_peer_node_id_valid(const char *node_id);
int trk_peer_addr_valid(const char *addr);

#endif
