/* trk_joining.c - peers about to join a release (trk_joining.h).
 *
 * Pure logic over a fixed table. Thread: the tracker's loop.
 */
#include "trk_joining.h"

void trk_joining_prune(trk_joining_set_t *js, const ws_hash_t *d,
                       trk_peer_id_t peer, uint64_t now_ms) {
  for (uint32_t i = 0; i < js->n;) {
    const trk_joining_t *j = &js->at[i];
    if (j->until_ms <= now_ms || (j->peer == peer && ws_hash_eq(&j->digest, d)))
      js->at[i] = js->at[--js->n];
    else
      i++;
  }
}

void trk_joining_note(trk_joining_set_t *js, const ws_hash_t *d,
                      trk_peer_id_t peer, uint64_t now_ms, bool reads) {
  trk_joining_prune(js, d, peer, now_ms);
  if (js->n == TRK_JOINING_MAX)
    return; /* only a lease split and a manifest spread less even */
  js->at[js->n] = (trk_joining_t){.digest = *d,
                                  .peer = peer,
                                  .until_ms = now_ms + TRK_JOINING_MS,
                                  .reads = reads};
  js->n++;
}

uint32_t trk_joining_count(const trk_joining_set_t *js, const ws_hash_t *d,
                           uint64_t now_ms) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < js->n; i++)
    n += js->at[i].until_ms > now_ms && ws_hash_eq(&js->at[i].digest, d);
  return n;
}

trk_joining_answer_t trk_joining_name(trk_joining_set_t *js,
                                      const trk_peers_t *peers,
                                      const ws_hash_t *d, const trk_peer_t *p,
                                      uint32_t max, bool only_reader,
                                      uint64_t now_ms, const trk_peer_t **out,
                                      uint32_t *nout) {
  const trk_peer_t *reader = NULL;
  *nout = 0;
  if (max > TRK_REPLY_PEERS_MAX)
    max = TRK_REPLY_PEERS_MAX;
  for (uint32_t i = 0; i < js->n && reader == NULL; i++) {
    const trk_joining_t *j = &js->at[i];
    if (!j->reads || j->until_ms <= now_ms || !ws_hash_eq(&j->digest, d))
      continue;
    if (j->peer == p->id)
      return TRK_JOINING_READ; /* it announced again while it reads */
    reader = trk_peers_get(peers, j->peer);
  }
  if (p->port == 0)
    return TRK_JOINING_ALONE;
  if (reader == NULL)
    return TRK_JOINING_READ_NEW;
  if (max == 0)
    return TRK_JOINING_ALONE;
  out[(*nout)++] = reader;
  if (only_reader)
    return TRK_JOINING_NAMED;
  uint32_t n = js->n, k = js->next < n ? js->next : 0;
  for (uint32_t c = 0; c < n && *nout < max; c++, k = k + 1 == n ? 0 : k + 1) {
    const trk_joining_t *j = &js->at[k];
    const trk_peer_t *o;
    if (j->reads || j->peer == p->id || j->until_ms <= now_ms ||
        !ws_hash_eq(&j->digest, d) ||
        (o = trk_peers_get(peers, j->peer)) == NULL || o->port == 0)
      continue;
    out[(*nout)++] = o;
  }
  js->next = k;
  return TRK_JOINING_NAMED;
}
