/* swarm.h - p2pd's swarm mode: the peer listener, the neighbours, the
 * tracker link, and the hooks the rest of the daemon calls.
 *
 * peer_swarm_t exists when --listen or --tracker is given. It owns
 *   - a TCP listener whose connections are authenticated with the cluster
 *     key (wire_conn_accept); nothing is sent to a peer before its AUTH
 *     checks;
 *   - the neighbour set (nbr.c), bounded by --max-neighbors, each with its
 *     have-bitfields, its chunk requests in flight and its upload queue;
 *   - one swarm record per release it fetches or seeds ("srel"): digest,
 *     manifest, our verified have-bitfield (global chunk indexes), the
 *     origin leases the tracker granted us;
 *   - the tracker client (trk_client.h), the ban list and the rate limits.
 *
 * Release records:
 *
 *   RESOLVING --manifest parsed--> FETCHING --published--> READY
 *   RESOLVING/FETCHING --release failed or removed--> (freed)
 *   READY --release evicted--> (freed)
 *
 * RESOLVING: the release knows only its digest; neighbours that announced
 * it are asked for the manifest. FETCHING: the manifest and the files
 * belong to the release (borrowed); chunks come from neighbours (picker.c)
 * and, for leased chunks, from S3 (origin.c via peer_sched_next). READY:
 * the record owns the manifest and serves the blobs.
 *
 * Swarm lifecycle: RUNNING --peer_swarm_stop--> STOPPING --everything
 * closed--> STOPPED (peer_swarm_busy() 0; then peer_swarm_free).
 *
 * Thread: loop thread; hashing and blob opens run on workers.
 */
#ifndef PEER_SWARM_H
#define PEER_SWARM_H

#include <stdint.h>

#include "daemon.h"
#include "fetch/file.h"
#include "manifest.h"

/* Creates the swarm of d from d->cfg: binds the listener (--listen) and
 * starts the tracker client (--tracker). Errors are logged; the daemon
 * refuses to start on them. *out is new (peer_swarm_free). */
int peer_swarm_new(peer_daemon_t *d, peer_swarm_t **out) WS_MUST_USE;
/* Daemon STOPPING: closes the listener, says GOODBYE to neighbours, closes
 * the tracker link. Uploads and received chunks being verified finish or
 * are canceled. Idempotent. */
void peer_swarm_stop(peer_swarm_t *s);
/* 1 while anything of the swarm is still open or in flight. */
int peer_swarm_busy(const peer_swarm_t *s);
/* Frees a stopped swarm (peer_swarm_busy() == 0). NULL is fine. */
void peer_swarm_free(peer_swarm_t *s);

/* ---- releases (release.c, daemon.c) ------------------------------------ */

/* rel (RESOLVING, digest known) wants its manifest from neighbours. Returns
 * 0 when a neighbour was asked or will be once one announces the digest
 * (the bytes come back with peer_release_manifest_from_peer), WS_ENOTFOUND
 * when rel has a URI and no neighbour is known to hold the manifest now
 * (fetch it from S3). */
int peer_swarm_manifest_fetch(peer_swarm_t *s, peer_release_t *rel) WS_MUST_USE;
/* A manifest a neighbour sent did not hash to the digest or did not parse:
 * the sender (node id as given to peer_release_manifest_from_peer) is
 * banned. */
void peer_swarm_ban_node(peer_swarm_t *s, const char *node_id, const char *why);
/* rel is FETCHING (rel->m and its files set): announce and swap. */
void peer_swarm_rel_fetching(peer_swarm_t *s, peer_release_t *rel);
/* rel is READY: the record takes rel->m and rel->mbytes (set to NULL). */
void peer_swarm_rel_ready(peer_swarm_t *s, peer_release_t *rel);
/* rel failed or was removed: stop sharing it (untracked, record freed). */
void peer_swarm_rel_gone(peer_swarm_t *s, peer_release_t *rel);
/* rel became READY without passing through FETCHING (seed import): its
 * manifest is read back from the cache on a worker and it is seeded. No-op
 * when standalone (d->swarm NULL) or already seeded. */
void peer_swarm_release_ready(peer_daemon_t *d, peer_release_t *rel);
/* A release found published in the cache at startup: takes m and bytes. */
void peer_swarm_add_ready(peer_swarm_t *s, ws_manifest_t *m, char *bytes,
                          size_t len);

/* ---- chunks (file.c) ---------------------------------------------------- */

/* Origin side of peer_sched_next in swarm mode: a leased chunk no
 * neighbour has, or any chunk no neighbour has once the tracker has been
 * unreachable for PEER_TRACKER_FALLBACK_MS. Same contract. */
int peer_swarm_origin_next(peer_swarm_t *s, peer_file_t **file, uint32_t *j);
/* Chunk j of file was verified and committed (from src): HAVE to
 * neighbours and tracker when the manifest has chunk hashes. */
void peer_swarm_chunk_done(peer_swarm_t *s, peer_file_t *file, uint32_t j,
                           peer_source_t src);
/* The origin started fetching chunk j of file: neighbours that lack it hear
 * a HAVE with "p" (they may ask for it now and get it as it arrives). */
void peer_swarm_chunk_live(peer_swarm_t *s, peer_file_t *file, uint32_t j);
/* More of chunk j of file is written, or its origin fetch ended (verified
 * or failed): uploads streaming it as it arrives move on. */
void peer_swarm_chunk_progress(peer_swarm_t *s, peer_file_t *file, uint32_t j);
/* file is a verified blob: whole-file manifests announce its chunks now. */
void peer_swarm_file_complete(peer_swarm_t *s, peer_file_t *file);
/* Chunks or neighbours changed: refill request pipelines. */
void peer_swarm_kick(peer_swarm_t *s);

/* ---- status ------------------------------------------------------------- */

typedef struct {
  uint32_t neighbors; /* ready */
  uint32_t releases;  /* swarm records */
  uint32_t uploads;   /* chunks being served now */
  uint32_t bans;
  int tracker_up;
} peer_swarm_stats_t;
void peer_swarm_stats(const peer_swarm_t *s, peer_swarm_stats_t *out);

#endif
