/* trk_hold.c - the restart hold (trk_hold.h).
 *
 * Pure logic over a copied digest list. Thread: the tracker's loop.
 */
#include "trk_hold.h"

#include <errno.h>
#include <stdlib.h>

int trk_hold_set(trk_hold_t *h, const trk_wanted_t *w, uint64_t until_ms) {
  uint32_t n = trk_wanted_count(w);
  ws_hash_t *d = n > 0 ? calloc(n, sizeof(*d)) : NULL;
  trk_hold_free(h);
  if (n > 0 && d == NULL)
    return -ENOMEM;
  h->digests = d;
  for (uint32_t i = 0; i < n; i++) {
    const trk_wanted_entry_t *e = trk_wanted_at(w, i);
    if (e->has_digest)
      h->digests[h->n++] = e->digest;
  }
  h->until_ms = h->n > 0 ? until_ms : 0;
  return 0;
}

bool trk_hold_applies(const trk_hold_t *h, const ws_hash_t *d,
                      uint64_t now_ms) {
  if (now_ms >= h->until_ms)
    return false;
  for (uint32_t i = 0; i < h->n; i++) {
    if (ws_hash_eq(&h->digests[i], d))
      return true;
  }
  return false;
}

bool trk_hold_ended(trk_hold_t *h, uint64_t now_ms) {
  if (h->until_ms == 0 || now_ms < h->until_ms)
    return false;
  trk_hold_free(h);
  return true;
}

void trk_hold_free(trk_hold_t *h) {
  free(h->digests);
  h->digests = NULL;
  h->n = 0;
  h->until_ms = 0;
}
