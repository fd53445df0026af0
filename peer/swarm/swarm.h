/* swarm.h - p2pd's swarm mode: the peer listener, the neighbours, the
 * tracker link, and what the release layer and the daemon call.
 *
 * peer_swarm_t exists when --listen or --tracker is given. It owns
 *   - a TCP listener whose connections are authenticated with the cluster
 *     key (wire_conn_accept); nothing is sent to a peer before its AUTH
 *     checks;
 *   - the neighbour set (neighbor.h), bounded by --max-neighbors, each with
 *     its have-bitfields, its chunk requests in flight and its upload queue;
 *   - one swarm release record per release it fetches or seeds
 *     (swarm_release.h): digest, manifest, our verified have-bitfield
 *     (global chunk indexes), the origin leases the tracker granted us;
 *   - the tracker link (tracker_link.h), the ban list and the rate limits.
 *
 * It listens to the fetch layer (a peer_fetch_listener_t on the files
 * table: verified chunks become HAVE, chunks the origin begins become HAVE
 * "p", progress moves live uploads on, changes refill the request
 * pipelines) and gates the origin: in swarm mode the S3 fetcher takes only
 * the chunks the tracker leased to us (picker.h). Upward, it tells the
 * release layer through the hooks given at creation and the manifest
 * callbacks.
 *
 * Swarm lifecycle: RUNNING --peer_swarm_stop--> STOPPING --everything
 * closed--> STOPPED (peer_swarm_busy() 0; then peer_swarm_free).
 *
 * Thread: loop thread; hashing, blob opens and the seed manifest read-back
 * run on workers.
 */
#ifndef PEER_SWARM_H
#define PEER_SWARM_H

#include <stddef.h>
#include <stdint.h>

#include "core/ctx.h"
#include "fetch/file.h"
#include "fetch/origin.h"
#include "manifest.h"

typedef struct peer_swarm_s peer_swarm_t;

typedef struct {
  void *arg;
  /* The tracker's wanted set names a release (uri NULL: digest only). The
   * release layer decides whether to start it (already known, failed
   * recently, ...). Called only while ctx->running. May be NULL. */
  void (*want)(void *arg, const char *uri, const ws_hash_t *digest);
  /* A FETCHING release had no byte from any source, S3 included, for
   * --stall-fail (swarm_stall.c): the release layer fails it with err and
   * msg (borrowed for the call). May be NULL. */
  void (*stalled_out)(void *arg, const ws_hash_t *digest, int err,
                      const char *msg);
} peer_swarm_hooks_t;

/* Creates the swarm from ctx->cfg: binds the listener (--listen) and
 * starts the tracker link (--tracker); registers itself as a listener of
 * files and sets the origin gate. ctx, files and origin are borrowed for
 * its whole life; hooks is copied. Errors are logged; the daemon refuses
 * to start on them. *out is set even on error (stop and free it). */
int peer_swarm_new(peer_ctx_t *ctx, peer_files_t *files, peer_origin_t *origin,
                   const peer_swarm_hooks_t *hooks,
                   peer_swarm_t **out) WS_MUST_USE;
/* Daemon STOPPING: closes the listener, says GOODBYE to neighbours, closes
 * the tracker link, answers pending manifest asks (NULL). Uploads and
 * received chunks being verified finish or are canceled. Idempotent. */
void peer_swarm_stop(peer_swarm_t *s);
/* 1 while anything of the swarm is still open or in flight. */
int peer_swarm_busy(const peer_swarm_t *s);
/* Frees a stopped swarm (peer_swarm_busy() == 0). NULL is fine. */
void peer_swarm_free(peer_swarm_t *s);

/* ---- releases (the release layer) -------------------------------------- */

/* The manifest from neighbours: bytes (taken, NUL-terminated) and the
 * sender's node id and address (borrowed for the call), or bytes NULL: no
 * neighbour could give it (or the swarm is stopping). */
typedef void (*peer_swarm_manifest_fn)(void *arg, char *bytes, size_t len,
                                       const char *node_id, const char *host);
/* A RESOLVING release (digest known, uri NULL when it has none) wants its
 * manifest from neighbours. 0: a neighbour that announced the digest is
 * asked, now or once one does; cb(arg, ...) runs once with the answer
 * (NULL after PEER_MANIFEST_PEER_TRY_MS without a holder when uri is set,
 * at once when the tracker knows none; after PEER_MANIFEST_WAIT_MS without
 * uri). WS_ECANCELED (stopping), WS_EBUSY (the digest is FETCHING or READY
 * here already), -ENOMEM: cb is not called. */
int peer_swarm_manifest_fetch(peer_swarm_t *s, const ws_hash_t *digest,
                              const char *uri, peer_swarm_manifest_fn cb,
                              void *arg) WS_MUST_USE;
/* A manifest a neighbour sent did not hash to the digest or did not parse:
 * the sender (node id and address as given to the manifest callback) is
 * banned. */
void peer_swarm_ban_node(peer_swarm_t *s, const char *node_id, const char *host,
                         const char *why);
/* The release is FETCHING: its chunks are shared and fetched from
 * neighbours. uri (may be NULL, copied by the tracker link), m, mbytes and
 * files (nfiles == m->nfiles, entries may be NULL) are borrowed until
 * peer_swarm_rel_ready or peer_swarm_rel_gone. */
void peer_swarm_rel_fetching(peer_swarm_t *s, const ws_hash_t *digest,
                             const char *uri, const ws_manifest_t *m,
                             const char *mbytes, size_t mlen,
                             peer_file_t *const *files, uint32_t nfiles);
/* READY: the swarm takes m and mbytes (owned from now on, freed here when
 * not kept) and seeds the release. */
void peer_swarm_rel_ready(peer_swarm_t *s, const ws_hash_t *digest,
                          ws_manifest_t *m, char *mbytes, size_t mlen);
/* Failed or removed: the record of digest (any state) is freed, the
 * release untracked; a pending manifest callback is dropped uncalled. */
void peer_swarm_rel_gone(peer_swarm_t *s, const ws_hash_t *digest);
/* Became READY without FETCHING (seed import): the manifest is read back
 * from the cache on a worker and the release seeded. No-op when the digest
 * has a record already. */
void peer_swarm_seed_ready(peer_swarm_t *s, const ws_hash_t *digest);
/* The daemon is running (its cache is open): the trackers are asked for
 * the wanted set now (peer_trackers_presence_now). */
void peer_swarm_running(peer_swarm_t *s);
/* Published at startup: takes m and bytes. */
void peer_swarm_add_ready(peer_swarm_t *s, ws_manifest_t *m, char *bytes,
                          size_t len);

/* ---- status ------------------------------------------------------------- */

typedef struct {
  uint32_t neighbors; /* ready */
  uint32_t releases;  /* swarm records */
  uint32_t uploads;   /* chunks being served now */
  uint32_t bans;
  int tracker_up;
  uint32_t stalled; /* FETCHING releases stalled now (swarm_stall.c) */
} peer_swarm_stats_t;
void peer_swarm_stats(const peer_swarm_t *s, peer_swarm_stats_t *out);
/* Milliseconds the FETCHING release digest has been stalled (no byte from
 * any source for --stall-timeout); 0 when it is not, or not known. */
uint64_t peer_swarm_rel_stalled(peer_swarm_t *s, const ws_hash_t *digest);

#endif
