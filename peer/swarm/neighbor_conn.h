/* neighbor_conn.h - a neighbour's connection (neighbor_conn.c): dialing
 * and accepting, the handshake's outcome (ourselves, banned, duplicate,
 * over the cap), the close, and the dispatch of what a neighbour sends:
 * announcements to its entries (neighbor.c) and the records
 * (swarm_release.h), requests to the upload queue (upload.h), chunk bytes
 * to downloads (download.h), manifests to the record that asked, and
 * refills of the request pipeline (picker.h).
 *
 * It sits above every other file of the swarm except swarm.c: it calls
 * down into them and nothing calls back into it but wire_conn, the timer
 * and a download's wake callback.
 *
 * Thread: loop thread.
 */
#ifndef PEER_SWARM_NEIGHBOR_CONN_H
#define PEER_SWARM_NEIGHBOR_CONN_H

#include <stdint.h>
#include <uv.h>

#include "swarm/download.h"
#include "swarm/neighbor.h"
#include "swarm/picker.h"
#include "swarm/swarm_release.h"
#include "swarm/upload.h"

/* Sets the empty set up: our handshake from ctx->cfg (cluster key, node
 * id, zone; the listen port is set once bound), the download rate, and the
 * modules what neighbours send goes to (all borrowed for its whole life). */
void peer_neighbors_init(peer_neighbors_t *set, peer_ctx_t *ctx,
                         peer_bans_t *bans, peer_swarm_rels_t *rels,
                         peer_picker_t *picker, peer_uploads_t *uploads,
                         peer_downloads_t *downloads);
/* Wipes the cluster key copy (the set is empty). */
void peer_neighbors_cleanup(peer_neighbors_t *set);
/* Connects to host:port (node id expected, may be ""). 0 or an error. */
int peer_neighbor_connect(peer_neighbors_t *set, const char *host,
                          uint16_t port, const char *expect) WS_MUST_USE;
/* Accepts one connection from the listener. */
int peer_neighbor_accept(peer_neighbors_t *set,
                         uv_stream_t *server) WS_MUST_USE;
/* Stopping: GOODBYE to every neighbour (a handshake in progress is cut). */
void peer_neighbors_stop(peer_neighbors_t *set);

#endif
