/* cache.h - the node cache's byte ledger, pins and eviction policy.
 *
 * The ledger counts the cache's own files (blobs, partials with their
 * bitmaps, release manifests) against a configured capacity; it is not a
 * view of the whole filesystem. It is rebuilt by the store's startup scan;
 * state/sha256-<hex>.json files only add pins, access and publish times.
 *
 * Eviction (ws_cache_evict_for) frees bytes in this order:
 *   1. orphans: blobs and partials that no release (published or being
 *      assembled) references;
 *   2. published releases, least recently accessed first, skipping pinned
 *      ones, held ones (a hold that has not expired, below), ones in use
 *      (a process holds a shared flock(2) on their manifest.json) and the
 *      current and previous release of each model, so a rollback costs a
 *      restart, not a download. A model's releases are ranked by when each was
 * last made current: published (became ready), or claimed again by a local
 *      prefetch or wait (ws_cache_activate) while already published.
 * Evicting a release removes releases/sha256-<digest>/ first (renamed away,
 * then deleted), then the blobs no remaining release references. A blob a
 * release being assembled needs is never deleted.
 *
 * Threads: one mutex guards the ledger. Functions that delete files or write
 * state files are [worker]; they hold the mutex while they do (so a
 * concurrent reservation sees a consistent ledger). [any] functions only read
 * or update memory; they may wait for the mutex while an eviction runs, so a
 * loop thread should prefer calling them from a worker too.
 */
#ifndef WS_CACHE_H
#define WS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "ws_err.h"

typedef struct ws_cache_s ws_cache_t;

#define WS_CACHE_MODEL_MAX 256 /* bytes kept of a model/version name */
#define WS_CACHE_KEEP_PER_MODEL 2
#define WS_CACHE_HOLDS_MAX 16     /* holds per release */
#define WS_CACHE_HOLD_NAME_MAX 64 /* bytes of a hold name, with the NUL */

/* A named hold: "a server uses this release". expires_ns is the time (ns
 * since the epoch) the hold lapses unless renewed; 0 = until released. */
typedef struct {
  char name[WS_CACHE_HOLD_NAME_MAX];
  uint64_t expires_ns;
} ws_cache_hold_t;

typedef struct {
  ws_hash_t digest;
  char model[WS_CACHE_MODEL_MAX];   /* "" if the manifest has none */
  char version[WS_CACHE_MODEL_MAX]; /* "" if the manifest has none */
  uint64_t bytes;        /* file bytes of the release (each blob once) */
  uint64_t unique_bytes; /* bytes only this release references */
  uint64_t published_ns; /* 0 while assembling */
  uint64_t accessed_ns;
  int pinned;
  int assembling;
  int kept;            /* 1 if the current or previous release of its model */
  uint64_t current_ns; /* last made current: max(published, activated) */
  uint32_t nholds;     /* holds that have not expired */
  ws_cache_hold_t holds[WS_CACHE_HOLDS_MAX];
} ws_cache_release_info_t;

typedef struct {
  uint64_t capacity; /* 0 = unlimited */
  uint64_t used;     /* all ledger bytes */
  uint64_t blob_bytes;
  uint64_t partial_bytes;
  uint64_t meta_bytes; /* manifests of published releases */
  uint32_t nblobs;
  uint32_t npartials;
  uint32_t nreleases;
  uint64_t evicted_releases; /* since open */
  uint64_t evicted_bytes;
  /* Cache trust, since open: blobs hashed whole before use because no
   * note of this store vouched for them as they are; of those, the ones
   * that did not hash to their name (removed, fetched again); chunks of
   * resumed partials re-hashed because nothing this store wrote proved
   * them, and of those the ones that were bad (fetched again). */
  uint64_t blobs_hashed;
  uint64_t blobs_discarded;
  uint64_t chunks_rehashed;
  uint64_t chunks_dropped;
  /* Releases automatic eviction passed over because they were in use
   * (a process held the lock on their manifest.json), since open. */
  uint64_t evict_in_use;
} ws_cache_stats_t;

/* [any] Ledger totals. */
void ws_cache_stats(ws_cache_t *c, ws_cache_stats_t *out);
/* [any] Changes the capacity (0 = unlimited); takes effect at the next
 * reservation or ws_cache_evict_for. */
void ws_cache_set_capacity(ws_cache_t *c, uint64_t capacity);

/* [any] Snapshot of all releases, published and assembling. *out is a new
 * array of *n entries (free with free()); sorted by publish order, newest
 * last, assembling ones at the end. */
int ws_cache_list(ws_cache_t *c, ws_cache_release_info_t **out,
                  size_t *n) WS_MUST_USE;

/* [worker] Pins/unpins a published release (persisted in state/). Pinned
 * releases are never evicted automatically. WS_ENOTFOUND if unknown. */
int ws_cache_pin(ws_cache_t *c, const ws_hash_t *digest,
                 int pinned) WS_MUST_USE;
/* [worker] Records an access now (LRU order; persisted without fsync, since
 * a lost access time only changes eviction order). */
int ws_cache_touch(ws_cache_t *c, const ws_hash_t *digest) WS_MUST_USE;

/* [worker] A local consumer claimed the published release again (prefetch
 * or wait): it becomes the current release of its model. Persisted without
 * fsync (a lost claim only changes which two releases are kept).
 * WS_ENOTFOUND if unknown or not published. */
int ws_cache_activate(ws_cache_t *c, const ws_hash_t *digest) WS_MUST_USE;

/* [any] 1 if name is a valid hold name: 1..63 bytes of [A-Za-z0-9._:@-],
 * not starting with '.'. */
int ws_cache_hold_name_ok(const char *name);
/* [worker] Takes or renews the hold name on a published release; ttl_ms 0:
 * until released. Persisted with fsync in state/ (survives a restart; an
 * expired hold is dropped). *out (may be NULL) gets the hold. WS_ENOTFOUND
 * if the release is unknown or not published, WS_EUSAGE for a bad name,
 * WS_ELIMIT when WS_CACHE_HOLDS_MAX live holds exist. */
int ws_cache_hold(ws_cache_t *c, const ws_hash_t *digest, const char *name,
                  uint64_t ttl_ms, ws_cache_hold_t *out) WS_MUST_USE;
/* [worker] Releases the hold name. WS_ENOTFOUND if the release or a live
 * hold of that name is unknown. */
int ws_cache_unhold(ws_cache_t *c, const ws_hash_t *digest,
                    const char *name) WS_MUST_USE;

/* [worker] Evicts by the rules above until used + need <= capacity.
 * Returns 0 when that holds (also when capacity is unlimited), WS_ENOSPACE
 * when it cannot be reached (what could be evicted was). */
int ws_cache_evict_for(ws_cache_t *c, uint64_t need) WS_MUST_USE;
/* [worker] Evicts one published release now. Refuses a pinned or held one
 * (WS_EBUSY) unless force; refuses one being assembled or in use (a shared
 * flock on its manifest.json), even forced (WS_EBUSY). Explicit
 * eviction may remove the current or previous release of a model. Blobs still
 * referenced by other releases stay. */
int ws_cache_evict(ws_cache_t *c, const ws_hash_t *digest,
                   int force) WS_MUST_USE;

#endif
