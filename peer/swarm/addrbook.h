/* addrbook.h - the swarm's address book: other nodes the trackers named
 * (the presence reply's "nodes", docs/protocol.md), whatever releases they
 * share, and the dialing of them while a tracker is down.
 *
 * While the trackers are up a node connects only to the holders a tracker
 * lists for its releases. When the tracker of a release that is resolving
 * or fetching is down, nobody lists holders and nobody grants origin
 * leases; the book's nodes are dialed then (peer_addrbook_tick, on the
 * swarm's tick), so nodes fetching the same release find each other by
 * their BITFIELDs and share the S3 reads (origin_share.h, picker.h).
 *
 * Bounds: PEER_ADDRBOOK_MAX entries (when full, the one heard of longest
 * ago is replaced); at most PEER_ADDRBOOK_DIAL_MAX dials per tick, never
 * past --max-neighbors, never to a known, banned or portless node, each
 * entry again only after PEER_ADDRBOOK_REDIAL_MS. The entries come from the
 * protocol decoder, which checked their lengths.
 *
 * Owns: its table (embedded in the swarm). Borrows (for its whole life):
 * the context, the neighbours, the bans, the records and the picker.
 * Thread: loop thread.
 */
#ifndef PEER_SWARM_ADDRBOOK_H
#define PEER_SWARM_ADDRBOOK_H

#include <stdint.h>

#include "core/ctx.h"
#include "core/tunables.h"
#include "proto.h"
#include "swarm/bans.h"
#include "swarm/neighbor.h"
#include "swarm/picker.h"
#include "swarm/swarm_release.h"

typedef struct {
  char node_id[WS_NODE_ID_MAX + 1];
  char host[WS_HOST_MAX + 1];
  uint16_t port;
  uint64_t seen_ms;      /* last named by a tracker */
  uint64_t next_dial_ms; /* not dialed again before */
} peer_addr_t;

typedef struct {
  peer_ctx_t *ctx;
  peer_neighbors_t *nbrs;
  const peer_bans_t *bans;
  peer_swarm_rels_t *rels;
  const peer_picker_t *picker;
  peer_addr_t e[PEER_ADDRBOOK_MAX];
  uint32_t n;
} peer_addrbook_t;

/* Sets the empty book up with its collaborators. */
void peer_addrbook_init(peer_addrbook_t *b, peer_ctx_t *ctx,
                        peer_neighbors_t *nbrs, const peer_bans_t *bans,
                        peer_swarm_rels_t *rels, const peer_picker_t *picker);
/* Adds or refreshes the nodes a tracker named (ourselves and nodes without
 * a port are skipped). */
void peer_addrbook_learn(peer_addrbook_t *b, const ws_peer_info_t *nodes,
                         uint32_t n, uint64_t now_ms);
/* The swarm's tick: dials book entries (see above) while the tracker of a
 * resolving or fetching release is down. Returns the dials begun. */
uint32_t peer_addrbook_tick(peer_addrbook_t *b, uint64_t now_ms);

#endif
