/* cache-int.h - ledger internals shared by cache*.c and store*.c only.
 *
 * Every *_locked function must be called with c->mu held. The store takes the
 * mutex around a reservation so that a check-then-reserve is atomic.
 */
#ifndef WS_CACHE_INT_H
#define WS_CACHE_INT_H

#include <pthread.h>

#include "cache.h"
#include "manifest.h"

typedef struct {
  ws_hash_t h;
  uint64_t bytes;
} cache_item_t;

typedef struct {
  cache_item_t *v; /* sorted by hash */
  size_t n, cap;
} cache_set_t;

typedef struct {
  ws_hash_t digest;
  char model[WS_CACHE_MODEL_MAX];
  char version[WS_CACHE_MODEL_MAX];
  uint64_t published_ns; /* 0 while assembling */
  uint64_t accessed_ns;
  uint64_t activated_ns; /* last local claim while published; 0: none */
  uint64_t meta_bytes;   /* manifest.json size once published */
  int pinned;
  int assembling;
  uint64_t busy_pass; /* in use at eviction pass busy_pass: skip it */
  ws_cache_hold_t holds[WS_CACHE_HOLDS_MAX]; /* may include expired ones */
  uint32_t nholds;
  cache_item_t *files; /* unique files: sha256 + size */
  uint32_t nfiles;
} cache_rel_t;

struct ws_cache_s {
  pthread_mutex_t mu;
  char *root; /* owned */
  uint64_t capacity;
  cache_set_t blobs;
  cache_set_t partials; /* bytes = data + bitmap file */
  cache_rel_t **rels;   /* owned entries */
  size_t nrels, caprels;
  uint64_t evicted_releases;
  uint64_t evicted_bytes;
  /* Cache trust (store_blob.c, store_file.c): blobs hashed whole before
   * use (no note of this store bound to them, or another chunk list's),
   * of those the ones that did not hash to their name (removed), and
   * chunks of a resumed partial re-hashed / found bad (fetched again). */
  uint64_t blobs_hashed;
  uint64_t blobs_discarded;
  uint64_t chunks_rehashed;
  uint64_t chunks_dropped;
  /* Automatic evictions that skipped a release in use (cache_evict.c). */
  uint64_t evict_in_use;
  uint64_t evict_pass; /* numbers eviction passes (cache_rel_t.busy_pass) */
};

/* Returns a new ledger for root (copied); free with cache_free. */
int cache_new(const char *root, uint64_t capacity, ws_cache_t **out);
void cache_free(ws_cache_t *c);

uint64_t cache_used_locked(const ws_cache_t *c);
uint64_t cache_now_ns(void);

/* Sorted hash sets. _add replaces bytes of an existing entry. */
cache_item_t *cache_set_find(const cache_set_t *s, const ws_hash_t *h);
int cache_set_add(cache_set_t *s, const ws_hash_t *h, uint64_t bytes);
void cache_set_remove(cache_set_t *s, const ws_hash_t *h);

/* Releases. _add copies what it needs from m (unique files, names). */
cache_rel_t *cache_rel_find_locked(ws_cache_t *c, const ws_hash_t *digest);
int cache_rel_add_locked(ws_cache_t *c, const ws_manifest_t *m,
                         cache_rel_t **out);
void cache_rel_remove_locked(ws_cache_t *c, cache_rel_t *r);
/* 1 if any release other than skip (published or being assembled) lists
 * file h. */
int cache_file_referenced_locked(const ws_cache_t *c, const ws_hash_t *h,
                                 const cache_rel_t *skip);

/* 1 if r is published and the current or previous release of its model
 * (ranked by cache_rel_current_ns). */
int cache_rel_kept_locked(const ws_cache_t *c, const cache_rel_t *r);
/* When r was last made current: max(published_ns, activated_ns). */
uint64_t cache_rel_current_ns(const cache_rel_t *r);

/* Holds (cache_hold.c). _held: r has a hold not expired at now_ns. _live
 * copies the holds not expired at now_ns into out (WS_CACHE_HOLDS_MAX
 * entries) and returns their count. */
int cache_rel_held_locked(const cache_rel_t *r, uint64_t now_ns);
uint32_t cache_rel_holds_live(const cache_rel_t *r, uint64_t now_ns,
                              ws_cache_hold_t *out);

int cache_evict_for_locked(ws_cache_t *c, uint64_t need);
/* Removes a blob (with its chunk-list note) or a partial (bitmap first,
 * then data) from the ledger and the disk; not counted as an eviction.
 * No-op when absent. */
void cache_blob_drop_locked(ws_cache_t *c, const ws_hash_t *h);
void cache_partial_drop_locked(ws_cache_t *c, const ws_hash_t *h);

/* state/sha256-<hex>.json: pinned, published_ns, accessed_ns,
 * activated_ns, holds. Load leaves
 * fields untouched when the file is absent or unreadable. */
void cache_state_load(ws_cache_t *c, cache_rel_t *r);
int cache_state_save(ws_cache_t *c, const cache_rel_t *r, int durable);
void cache_state_remove(ws_cache_t *c, const ws_hash_t *digest);

#endif
