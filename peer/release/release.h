/* release.h - the release table and its jobs: resolve the manifest,
 * reserve space, fetch every file, publish.
 *
 *   RESOLVING  manifest.json from a neighbour (swarm mode) or S3, hashed and
 *              parsed on a worker, digest checked (URI's or the expected one)
 *   BEGINNING  ws_store_release_begin on a worker (space reserved, ENOSPC
 *              reported here), job record written for restarts
 *   FETCHING   files attached (shared by sha256) and fetched chunk by chunk
 *   FINISHING  ws_store_release_publish on a worker
 *   READY      releases/sha256-<digest>/ is there (terminal)
 *   FAILED     error kept (terminal; a new prefetch retries: -> RESOLVING)
 *
 * The table knows nothing of HTTP: starting a job returns an error code (and
 * a short reason) or the release, and a caller that wants to hear when the
 * release settles registers a watch (peer_release_watch). A RESOLVED watch
 * settles once the release has left BEGINNING or failed, a READY watch once
 * it is READY or FAILED, or at its timeout.
 *
 * The table is made with its collaborators: the context (loop, store, S3,
 * worker queue), the files table, and the swarm (NULL when standalone).
 *
 * Thread: loop thread; the bodies of the worker jobs are marked.
 */
#ifndef PEER_RELEASE_H
#define PEER_RELEASE_H

#include <stdint.h>

#include "core/ctx.h"
#include "fetch/file.h"
#include "manifest.h"
#include "swarm/swarm.h"
#include "ws_err.h"

struct cJSON;

typedef struct peer_releases_s peer_releases_t;
typedef struct peer_release_s peer_release_t;
typedef struct peer_release_watch_s peer_release_watch_t;

typedef enum {
  PEER_REL_RESOLVING,
  PEER_REL_BEGINNING,
  PEER_REL_FETCHING,
  PEER_REL_FINISHING,
  PEER_REL_READY,
  PEER_REL_FAILED,
  PEER_REL_STATE_LAST
} peer_release_state_t;

/* ---- the table ---------------------------------------------------------- */

/* Creates an empty table. ctx and files are borrowed for its whole life;
 * swarm may be NULL (standalone). *out is new (peer_releases_free). */
int peer_releases_new(peer_ctx_t *ctx, peer_files_t *files, peer_swarm_t *swarm,
                      peer_releases_t **out) WS_MUST_USE;
/* Shutdown begins: cancels manifest GETs and settles every watch with
 * WS_ECANCELED. */
void peer_releases_stop(peer_releases_t *t);
/* Frees every release and the table (no worker job may be left). NULL is
 * fine. */
void peer_releases_free(peer_releases_t *t);
/* Releases not READY/FAILED. */
unsigned peer_releases_active(const peer_releases_t *t);
/* The list, newest first: the first release (or NULL) and the next one. */
peer_release_t *peer_releases_first(const peer_releases_t *t);
peer_release_t *peer_release_next(const peer_release_t *rel);
/* The release with this digest, or NULL. Borrowed. */
peer_release_t *peer_release_find(const peer_releases_t *t,
                                  const ws_hash_t *digest);

/* ---- starting jobs ------------------------------------------------------ */

/* POST prefetch: uri may be NULL (then expect must be given), expect may be
 * NULL. Creates, restarts (FAILED) or joins the job. Returns 0 with *out a
 * new reference to the release (drop it with peer_release_unref; the release
 * may already be FAILED), or refuses with an error and *why (static text):
 *   WS_EUSAGE     uri is not s3://bucket/prefix/
 *   WS_EDIGEST    expect differs from the URI's sha256-<hex>
 *   WS_ENOTFOUND  digest unknown and no uri, or a failed release has none
 *   WS_EBUSY      PEER_ACTIVE_RELEASES_MAX releases are active
 *   other         -ENOMEM and the like (*why NULL). */
int peer_release_prefetch(peer_releases_t *t, const char *uri,
                          const ws_hash_t *expect, peer_release_t **out,
                          const char **why) WS_MUST_USE;
/* The swarm's want hook (peer_swarm_hooks_t): the tracker's wanted set names
 * a release (uri NULL: known by digest only). A release already known is
 * left alone unless FAILED at least PEER_MANIFEST_WAIT_MS ago; then it is
 * prefetched by URI, or by digest (manifest from neighbours). */
void peer_releases_want(peer_releases_t *t, const char *uri,
                        const ws_hash_t *digest);
/* The swarm's stalled_out hook (peer_swarm_hooks_t): the FETCHING release
 * digest had no byte from any source for --stall-fail; it fails with err
 * and msg (docs/operations.md, "Liveness contract"). */
void peer_releases_stalled_out(peer_releases_t *t, const ws_hash_t *digest,
                               int err, const char *msg);
/* Restarts a job from its record after a restart (job_record.h). */
void peer_releases_resume(peer_releases_t *t, const char *uri,
                          const ws_hash_t *digest);
/* Adds a release found published in the cache at startup (READY). m is
 * borrowed (counts copied). */
int peer_releases_add_ready(peer_releases_t *t, const ws_manifest_t *m,
                            int pinned, uint64_t published_unix_ms) WS_MUST_USE;
/* m was imported into the cache and pinned (seed): the release is added
 * READY unless known, marked pinned, and, when READY, seeded by the swarm.
 * *out is borrowed. */
int peer_releases_seeded(peer_releases_t *t, const ws_manifest_t *m,
                         peer_release_t **out) WS_MUST_USE;
/* Drops a READY or FAILED release from the table (after eviction). */
void peer_release_remove(peer_release_t *rel);
/* With --hf-cache, queues a pass on a worker that takes the releases the
 * cache no longer has out of the Hugging Face view (hf_prune.c): call it
 * after an eviction. Loop thread. */
void peer_releases_hf_prune(peer_releases_t *t);
/* Drops a reference given by peer_release_prefetch. */
void peer_release_unref(peer_release_t *rel);

/* ---- watching a release settle ------------------------------------------ */

typedef enum {
  PEER_REL_WATCH_RESOLVED, /* left BEGINNING (FETCHING or later) or FAILED */
  PEER_REL_WATCH_READY,    /* READY or FAILED */
  PEER_REL_WATCH_LAST
} peer_release_watch_kind_t;

/* Runs once. err 0: the release settled as the kind says (read its state:
 * FAILED or not); WS_ETIMEOUT: timeout_ms passed first; WS_ECANCELED: the
 * table is stopping. rel is borrowed for the call (it may differ from the
 * release watched: a legacy URI that resolved to a digest another release
 * already had hands its watches to that one). The watch is gone after the
 * call. */
typedef void (*peer_release_watch_fn)(void *arg, peer_release_t *rel, int err);

/* 1 when kind is settled now (a watch would not wait). */
int peer_release_settled(const peer_release_t *rel,
                         peer_release_watch_kind_t kind);
/* Registers cb for rel (not settled yet); timeout_ms 0: none. 0 with *out
 * (borrowed until cb runs or peer_release_unwatch), WS_ELIMIT when
 * PEER_WAITERS_PER_RELEASE_MAX watches wait on rel, or -ENOMEM. */
int peer_release_watch(peer_release_t *rel, peer_release_watch_kind_t kind,
                       uint64_t timeout_ms, peer_release_watch_fn cb, void *arg,
                       peer_release_watch_t **out) WS_MUST_USE;
/* Cancels a watch whose cb has not run; cb never runs. */
void peer_release_unwatch(peer_release_watch_t *w);

/* ---- holds and claims (hold.c) ------------------------------------------ */

/* Runs once when a hold change settles: err 0, or the cache's error
 * (WS_ENOTFOUND: no such hold or release gone, WS_ELIMIT: too many holds).
 * rel is borrowed for the call. */
typedef void (*peer_release_hold_fn)(void *arg, peer_release_t *rel, int err);
/* Takes or renews (remove 0) or releases (remove 1) the hold name on a
 * READY release, on a worker; ttl_ms 0: until released. cb runs later on
 * the loop. Refuses at once: WS_EUSAGE (bad name, ws_cache_hold_name_ok),
 * WS_EBUSY (not READY), -ENOMEM. */
int peer_release_hold(peer_release_t *rel, const char *name, uint64_t ttl_ms,
                      int remove, peer_release_hold_fn cb,
                      void *arg) WS_MUST_USE;
/* A local prefetch or wait asked for rel: when READY, it becomes the
 * current release of its model (ws_cache_activate, on a worker; failures
 * are logged). Not READY: nothing (publishing makes it current). */
void peer_release_claim(peer_release_t *rel);
/* Replaces rel's copy of its holds (startup: from ws_cache_list). */
void peer_release_holds_set(peer_release_t *rel, const ws_cache_hold_t *holds,
                            uint32_t n);
/* Holds of rel that have not expired. */
uint32_t peer_release_holds_live(const peer_release_t *rel);

/* ---- what a release shows (view.c) -------------------------------------- */

peer_release_state_t peer_release_state(const peer_release_t *rel);
/* The state as the API names it ("resolving" for RESOLVING and BEGINNING). */
const char *peer_release_state_name(peer_release_state_t s);
/* NULL while a legacy URI resolves (digest not known yet). */
const ws_hash_t *peer_release_digest(const peer_release_t *rel);
const char *peer_release_digest_str(const peer_release_t *rel);
/* When FAILED: the error and its message (borrowed); else 0 and "". */
int peer_release_error(const peer_release_t *rel, const char **msg);
int peer_release_pinned(const peer_release_t *rel);
void peer_release_set_pinned(peer_release_t *rel, int pinned);
/* The release's directory in the cache (published or being assembled).
 * 0, WS_ENOTFOUND (digest unknown or no store) or the store's error. */
int peer_release_path(const peer_release_t *rel, char *buf,
                      size_t len) WS_MUST_USE;
/* What /metrics shows of a release: its model (borrowed; NULL when not
 * known yet) and byte counters, live or final. */
typedef struct {
  const char *model;
  uint64_t bytes_total, bytes_done, from_s3, from_peers;
} peer_release_counts_t;
void peer_release_counts(const peer_release_t *rel, peer_release_counts_t *out);
/* R as documented in docs/operations.md. New object. */
struct cJSON *peer_release_json(const peer_release_t *rel);

#endif
