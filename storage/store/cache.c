/* cache.c - the cache's byte ledger: sorted sets of blobs and partials, the
 * release table (published and assembling), stats, listing, pins and access
 * times. One mutex (c->mu) guards all of it; see cache.h for threads.
 * Eviction lives in cache_evict.c, state files in cache_state.c, holds and
 * activation in cache_hold.c.
 */
#include "cache-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t cache_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cache_new(const char *root, uint64_t capacity, ws_cache_t **out) {
  ws_cache_t *c = calloc(1, sizeof(*c));
  if (c == NULL)
    return -ENOMEM;
  c->root = strdup(root);
  if (c->root == NULL) {
    free(c);
    return -ENOMEM;
  }
  pthread_mutex_init(&c->mu, NULL);
  c->capacity = capacity;
  *out = c;
  return 0;
}

static void rel_free(cache_rel_t *r) {
  if (r == NULL)
    return;
  free(r->files);
  free(r);
}

void cache_free(ws_cache_t *c) {
  if (c == NULL)
    return;
  for (size_t i = 0; i < c->nrels; i++)
    rel_free(c->rels[i]);
  free(c->rels);
  free(c->blobs.v);
  free(c->partials.v);
  pthread_mutex_destroy(&c->mu);
  free(c->root);
  free(c);
}

/* ---- sorted hash sets --------------------------------------------------- */

static size_t set_lower_bound(const cache_set_t *s, const ws_hash_t *h) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (memcmp(s->v[mid].h.b, h->b, WS_SHA256_LEN) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

cache_item_t *cache_set_find(const cache_set_t *s, const ws_hash_t *h) {
  size_t i = set_lower_bound(s, h);
  if (i < s->n && ws_hash_eq(&s->v[i].h, h))
    return &s->v[i];
  return NULL;
}

int cache_set_add(cache_set_t *s, const ws_hash_t *h, uint64_t bytes) {
  size_t i = set_lower_bound(s, h);
  if (i < s->n && ws_hash_eq(&s->v[i].h, h)) {
    s->v[i].bytes = bytes;
    return 0;
  }
  if (s->n == s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 64;
    cache_item_t *nv = realloc(s->v, ncap * sizeof(*nv));
    if (nv == NULL)
      return -ENOMEM;
    s->v = nv;
    s->cap = ncap;
  }
  memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof(*s->v));
  s->v[i].h = *h;
  s->v[i].bytes = bytes;
  s->n++;
  return 0;
}

void cache_set_remove(cache_set_t *s, const ws_hash_t *h) {
  size_t i = set_lower_bound(s, h);
  if (i >= s->n || !ws_hash_eq(&s->v[i].h, h))
    return;
  memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
  s->n--;
}

static uint64_t set_bytes(const cache_set_t *s) {
  uint64_t t = 0;
  for (size_t i = 0; i < s->n; i++)
    t += s->v[i].bytes;
  return t;
}

static uint64_t meta_bytes_locked(const ws_cache_t *c) {
  uint64_t t = 0;
  for (size_t i = 0; i < c->nrels; i++)
    t += c->rels[i]->meta_bytes;
  return t;
}

uint64_t cache_used_locked(const ws_cache_t *c) {
  return set_bytes(&c->blobs) + set_bytes(&c->partials) + meta_bytes_locked(c);
}

/* ---- releases ----------------------------------------------------------- */

cache_rel_t *cache_rel_find_locked(ws_cache_t *c, const ws_hash_t *digest) {
  for (size_t i = 0; i < c->nrels; i++)
    if (ws_hash_eq(&c->rels[i]->digest, digest))
      return c->rels[i];
  return NULL;
}

static void name_copy(char *dst, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n >= WS_CACHE_MODEL_MAX)
    n = WS_CACHE_MODEL_MAX - 1;
  if (n)
    memcpy(dst, src, n);
  dst[n] = '\0';
}

int cache_rel_add_locked(ws_cache_t *c, const ws_manifest_t *m,
                         cache_rel_t **out) {
  cache_rel_t *r;
  if (c->nrels == c->caprels) {
    size_t ncap = c->caprels ? c->caprels * 2 : 16;
    cache_rel_t **nv = realloc(c->rels, ncap * sizeof(*nv));
    if (nv == NULL)
      return -ENOMEM;
    c->rels = nv;
    c->caprels = ncap;
  }
  r = calloc(1, sizeof(*r));
  if (r == NULL)
    return -ENOMEM;
  r->files = calloc(m->nfiles ? m->nfiles : 1, sizeof(*r->files));
  if (r->files == NULL) {
    free(r);
    return -ENOMEM;
  }
  /* Identical files inside one release are stored (and counted) once. */
  for (uint32_t i = 0; i < m->nfiles; i++) {
    int dup = 0;
    for (uint32_t k = 0; k < r->nfiles && !dup; k++)
      dup = ws_hash_eq(&r->files[k].h, &m->files[i].sha256);
    if (dup)
      continue;
    r->files[r->nfiles].h = m->files[i].sha256;
    r->files[r->nfiles].bytes = m->files[i].size;
    r->nfiles++;
  }
  r->digest = m->digest;
  name_copy(r->model, m->model);
  name_copy(r->version, m->version);
  c->rels[c->nrels++] = r;
  *out = r;
  return 0;
}

void cache_rel_remove_locked(ws_cache_t *c, cache_rel_t *r) {
  for (size_t i = 0; i < c->nrels; i++) {
    if (c->rels[i] != r)
      continue;
    c->rels[i] = c->rels[--c->nrels];
    rel_free(r);
    return;
  }
}

static int rel_lists(const cache_rel_t *r, const ws_hash_t *h) {
  for (uint32_t k = 0; k < r->nfiles; k++)
    if (ws_hash_eq(&r->files[k].h, h))
      return 1;
  return 0;
}

int cache_file_referenced_locked(const ws_cache_t *c, const ws_hash_t *h,
                                 const cache_rel_t *skip) {
  for (size_t i = 0; i < c->nrels; i++) {
    const cache_rel_t *r = c->rels[i];
    if (r == skip)
      continue;
    if (rel_lists(r, h))
      return 1;
  }
  return 0;
}

/* ---- public ------------------------------------------------------------- */

void ws_cache_stats(ws_cache_t *c, ws_cache_stats_t *out) {
  ws_cache_stats_t s;
  memset(&s, 0, sizeof(s));
  pthread_mutex_lock(&c->mu);
  s.capacity = c->capacity;
  s.blob_bytes = set_bytes(&c->blobs);
  s.partial_bytes = set_bytes(&c->partials);
  s.meta_bytes = meta_bytes_locked(c);
  s.used = s.blob_bytes + s.partial_bytes + s.meta_bytes;
  s.nblobs = (uint32_t)c->blobs.n;
  s.npartials = (uint32_t)c->partials.n;
  s.nreleases = (uint32_t)c->nrels;
  s.evicted_releases = c->evicted_releases;
  s.evicted_bytes = c->evicted_bytes;
  s.blobs_hashed = c->blobs_hashed;
  s.blobs_discarded = c->blobs_discarded;
  s.chunks_rehashed = c->chunks_rehashed;
  s.chunks_dropped = c->chunks_dropped;
  s.evict_in_use = c->evict_in_use;
  pthread_mutex_unlock(&c->mu);
  *out = s;
}

void ws_cache_set_capacity(ws_cache_t *c, uint64_t capacity) {
  pthread_mutex_lock(&c->mu);
  c->capacity = capacity;
  pthread_mutex_unlock(&c->mu);
}

uint64_t cache_rel_current_ns(const cache_rel_t *r) {
  return r->activated_ns > r->published_ns ? r->activated_ns : r->published_ns;
}

/* Number of published releases of r's model made current after r. */
static int newer_of_model(const ws_cache_t *c, const cache_rel_t *r) {
  uint64_t rt = cache_rel_current_ns(r);
  int n = 0;
  for (size_t i = 0; i < c->nrels; i++) {
    const cache_rel_t *o = c->rels[i];
    if (o == r || o->assembling || strcmp(o->model, r->model) != 0)
      continue;
    uint64_t ot = cache_rel_current_ns(o);
    if (ot > rt ||
        (ot == rt && memcmp(o->digest.b, r->digest.b, WS_SHA256_LEN) > 0))
      n++;
  }
  return n;
}

int cache_rel_kept_locked(const ws_cache_t *c, const cache_rel_t *r) {
  return !r->assembling && newer_of_model(c, r) < WS_CACHE_KEEP_PER_MODEL;
}

static void info_fill(const ws_cache_t *c, const cache_rel_t *r,
                      ws_cache_release_info_t *o) {
  memset(o, 0, sizeof(*o));
  o->digest = r->digest;
  memcpy(o->model, r->model, sizeof(o->model));
  memcpy(o->version, r->version, sizeof(o->version));
  for (uint32_t k = 0; k < r->nfiles; k++) {
    o->bytes += r->files[k].bytes;
    if (!cache_file_referenced_locked(c, &r->files[k].h, r))
      o->unique_bytes += r->files[k].bytes;
  }
  o->published_ns = r->published_ns;
  o->accessed_ns = r->accessed_ns;
  o->pinned = r->pinned;
  o->assembling = r->assembling;
  o->kept = cache_rel_kept_locked(c, r);
  o->current_ns = cache_rel_current_ns(r);
  o->nholds = cache_rel_holds_live(r, cache_now_ns(), o->holds);
}

static int info_cmp(const void *a, const void *b) {
  const ws_cache_release_info_t *x = a, *y = b;
  if (x->assembling != y->assembling)
    return x->assembling - y->assembling;
  if (x->published_ns != y->published_ns)
    return x->published_ns < y->published_ns ? -1 : 1;
  return memcmp(x->digest.b, y->digest.b, WS_SHA256_LEN);
}

int ws_cache_list(ws_cache_t *c, ws_cache_release_info_t **out, size_t *n) {
  ws_cache_release_info_t *v;
  size_t cnt;
  pthread_mutex_lock(&c->mu);
  cnt = c->nrels;
  v = calloc(cnt ? cnt : 1, sizeof(*v));
  if (v == NULL) {
    pthread_mutex_unlock(&c->mu);
    return -ENOMEM;
  }
  for (size_t i = 0; i < cnt; i++)
    info_fill(c, c->rels[i], &v[i]);
  pthread_mutex_unlock(&c->mu);
  qsort(v, cnt, sizeof(*v), info_cmp);
  *out = v;
  *n = cnt;
  return 0;
}

int ws_cache_pin(ws_cache_t *c, const ws_hash_t *digest, int pinned) {
  cache_rel_t *r;
  int err = 0;
  pthread_mutex_lock(&c->mu);
  r = cache_rel_find_locked(c, digest);
  if (r == NULL || r->assembling) {
    err = WS_ENOTFOUND;
    goto out;
  }
  r->pinned = pinned ? 1 : 0;
  err = cache_state_save(c, r, 1);
out:
  pthread_mutex_unlock(&c->mu);
  return err;
}

int ws_cache_touch(ws_cache_t *c, const ws_hash_t *digest) {
  cache_rel_t *r;
  int err = 0;
  pthread_mutex_lock(&c->mu);
  r = cache_rel_find_locked(c, digest);
  if (r == NULL || r->assembling) {
    err = WS_ENOTFOUND;
    goto out;
  }
  r->accessed_ns = cache_now_ns();
  err = cache_state_save(c, r, 0);
out:
  pthread_mutex_unlock(&c->mu);
  return err;
}
