/* cache_hold.c - named holds on published releases ("a server uses this
 * release": never evicted while a hold has not expired) and activation (a
 * local claim makes a release its model's current one, which decides the
 * current and previous releases retention keeps). Both are persisted in
 * the release's state file (cache_state.c). Holds are kept in a small
 * fixed array per release; expired ones are dropped when the array is
 * rewritten.
 *
 * Thread: [worker] for what writes state files, [any] for the rest; c->mu
 * guards everything (see cache.h).
 */
#include "store-int.h"

#include <string.h>

int ws_cache_hold_name_ok(const char *name) {
  size_t n = name != NULL ? strlen(name) : 0;
  if (n == 0 || n >= WS_CACHE_HOLD_NAME_MAX || name[0] == '.')
    return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = name[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || strchr("._:@-", ch) != NULL))
      return 0;
  }
  return 1;
}

static int hold_live(const ws_cache_hold_t *h, uint64_t now_ns) {
  return h->expires_ns == 0 || h->expires_ns > now_ns;
}

int cache_rel_held_locked(const cache_rel_t *r, uint64_t now_ns) {
  for (uint32_t i = 0; i < r->nholds; i++)
    if (hold_live(&r->holds[i], now_ns))
      return 1;
  return 0;
}

uint32_t cache_rel_holds_live(const cache_rel_t *r, uint64_t now_ns,
                              ws_cache_hold_t *out) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->nholds; i++)
    if (hold_live(&r->holds[i], now_ns))
      out[n++] = r->holds[i];
  return n;
}

/* Drops expired holds from r's array. */
static void holds_prune(cache_rel_t *r, uint64_t now_ns) {
  r->nholds = cache_rel_holds_live(r, now_ns, r->holds);
}

static cache_rel_t *published_find_locked(ws_cache_t *c,
                                          const ws_hash_t *digest) {
  cache_rel_t *r = cache_rel_find_locked(c, digest);
  return r != NULL && !r->assembling ? r : NULL;
}

int ws_cache_hold(ws_cache_t *c, const ws_hash_t *digest, const char *name,
                  uint64_t ttl_ms, ws_cache_hold_t *out) {
  uint64_t now = cache_now_ns();
  ws_cache_hold_t *h = NULL;
  cache_rel_t *r;
  int err;
  if (!ws_cache_hold_name_ok(name))
    return WS_EUSAGE;
  pthread_mutex_lock(&c->mu);
  if ((r = published_find_locked(c, digest)) == NULL) {
    err = WS_ENOTFOUND;
    goto out;
  }
  holds_prune(r, now);
  for (uint32_t i = 0; i < r->nholds && h == NULL; i++)
    if (strcmp(r->holds[i].name, name) == 0)
      h = &r->holds[i];
  if (h == NULL) {
    if (r->nholds == WS_CACHE_HOLDS_MAX) {
      err = WS_ELIMIT;
      goto out;
    }
    h = &r->holds[r->nholds++];
    memset(h, 0, sizeof(*h));
    memcpy(h->name, name, strlen(name) + 1); /* checked: fits */
  }
  h->expires_ns = ttl_ms == 0 ? 0 : now + ttl_ms * 1000000u;
  if (out != NULL)
    *out = *h;
  err = cache_state_save(c, r, 1);
out:
  pthread_mutex_unlock(&c->mu);
  return err;
}

int ws_cache_unhold(ws_cache_t *c, const ws_hash_t *digest, const char *name) {
  uint64_t now = cache_now_ns();
  cache_rel_t *r;
  int err = WS_ENOTFOUND;
  pthread_mutex_lock(&c->mu);
  if ((r = published_find_locked(c, digest)) == NULL)
    goto out;
  holds_prune(r, now);
  for (uint32_t i = 0; i < r->nholds; i++) {
    if (strcmp(r->holds[i].name, name) != 0)
      continue;
    r->holds[i] = r->holds[--r->nholds];
    err = cache_state_save(c, r, 1);
    break;
  }
out:
  pthread_mutex_unlock(&c->mu);
  return err;
}

int ws_cache_activate(ws_cache_t *c, const ws_hash_t *digest) {
  cache_rel_t *r;
  int err = WS_ENOTFOUND;
  pthread_mutex_lock(&c->mu);
  if ((r = published_find_locked(c, digest)) != NULL) {
    r->activated_ns = cache_now_ns();
    err = cache_state_save(c, r, 0);
  }
  pthread_mutex_unlock(&c->mu);
  return err;
}
