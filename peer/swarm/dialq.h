/* dialq.h - the dial queue: the holders the trackers named last, and the
 * dialing of them while this node has dial slots free.
 *
 * A tracker names up to TRK_REPLY_PEERS_MAX holders per release on every
 * announce (PEERS); a node dials only its share of them (neighbor.h,
 * peer_neighbors_room_dial). At a cluster-wide start many of those dials
 * are refused: the other side is full, has too many handshakes under way,
 * or keeps the connection it dialed itself. Without a queue the slot of a
 * refused dial stayed empty until the next announce (5 s); one node of 48
 * kept 3 of its 8 dials and finished last. The queue keeps the candidates
 * the trackers named and, on every PEERS and every swarm tick, dials the
 * next ones while the node has room to dial: a refused dial is replaced
 * within a tick by another holder the tracker chose.
 *
 * Bounds: PEER_DIALQ_MAX candidates (the latest named first; when full the
 * one named longest ago goes); a candidate not named again within
 * PEER_DIALQ_TTL_MS is dropped; each is dialed again only after
 * PEER_DIALQ_REDIAL_MS; never ourselves, a known, banned or portless node,
 * never past the room to dial. The entries come from the protocol decoder,
 * which checked their lengths.
 *
 * Owns: its table (embedded in the swarm). Borrows (for its whole life):
 * the context, the neighbours, the bans and the dial function. Thread:
 * loop thread.
 */
#ifndef PEER_SWARM_DIALQ_H
#define PEER_SWARM_DIALQ_H

#include <stdint.h>

#include "core/ctx.h"
#include "core/tunables.h"
#include "proto.h"
#include "swarm/bans.h"
#include "swarm/neighbor.h"

typedef struct {
  char node_id[WS_NODE_ID_MAX + 1];
  char host[WS_HOST_MAX + 1];
  uint16_t port;
  uint64_t named_ms;     /* last named by a tracker */
  uint64_t next_dial_ms; /* not dialed again before */
} peer_dial_cand_t;

/* Begins a connection to node_id at host:port (the swarm's is
 * peer_neighbor_connect); 0 or an error. */
typedef int (*peer_dial_fn)(void *arg, const char *host, uint16_t port,
                            const char *node_id);

typedef struct {
  peer_ctx_t *ctx;
  peer_neighbors_t *nbrs;
  const peer_bans_t *bans;
  peer_dial_fn dial;
  void *dial_arg;
  peer_dial_cand_t e[PEER_DIALQ_MAX]; /* the latest named first */
  uint32_t n;
} peer_dialq_t;

/* Sets the empty queue up with its collaborators. */
void peer_dialq_init(peer_dialq_t *q, peer_ctx_t *ctx, peer_neighbors_t *nbrs,
                     const peer_bans_t *bans, peer_dial_fn dial,
                     void *dial_arg);
/* A tracker named these holders (in its order of preference): they go to
 * the front, keeping their redial times. Ourselves and portless nodes are
 * skipped. */
void peer_dialq_offer(peer_dialq_t *q, const ws_peer_info_t *peers, uint32_t n,
                      uint64_t now_ms);
/* Dials candidates in order while the node has room to dial (see above).
 * Returns the dials begun. */
uint32_t peer_dialq_run(peer_dialq_t *q, uint64_t now_ms);

#endif
