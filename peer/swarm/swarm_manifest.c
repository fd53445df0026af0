/* swarm_manifest.c - a RESOLVING record's manifest, asked from neighbours
 * (swarm_release.h): one neighbour that announced the digest is asked at a
 * time (MANIFEST_REQ); one that refuses, drops or stays silent for
 * PEER_MANIFEST_ASK_MS is not asked again and the next is; without any,
 * the asker gets NULL after PEER_MANIFEST_PEER_TRY_MS (it has a URI: S3
 * next) or PEER_MANIFEST_WAIT_MS (digest only), or at once when the tracker
 * knows no holder. The answer goes to the asker's callback once; the bytes
 * are checked against the digest by the asker, which bans the sender
 * through peer_swarm_ban_node when they do not match.
 *
 * Owns: nothing beyond the records' ask state. Thread: loop thread.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/swarm_release.h"
#include "ws_log.h"

/* The asker's answer, once. May free rel (the asker may give the release
 * up, which frees the record). */
static void manifest_answer(peer_swarm_rel_t *rel, char *bytes, size_t len,
                            const char *node_id, const char *host) {
  peer_swarm_manifest_fn cb = rel->mcb;
  void *arg = rel->marg;
  rel->mdone = true;
  rel->masked = NULL;
  rel->mcb = NULL;
  if (cb != NULL)
    cb(arg, bytes, len, node_id, host);
  else
    free(bytes);
}

/* The neighbour asked has not answered in time: not asked again. Returns 1
 * while its answer may still come (asked lately, or arriving). */
static int manifest_asked_waits(peer_swarm_rel_t *rel, uint64_t now_ms) {
  peer_neighbor_t *a = rel->masked;
  if (now_ms - rel->mask_ms < PEER_MANIFEST_ASK_MS ||
      a->in == PEER_NEIGHBOR_IN_MANIFEST)
    return 1;
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&rel->digest, ds);
  WS_LOGW("release %s: nbr#%llu %s sent no manifest in %u ms; not asking "
          "it again",
          ds, (unsigned long long)a->id, a->node_id, PEER_MANIFEST_ASK_MS);
  peer_neighbor_rel_t *ar = peer_neighbor_rel_find(a, rel->digest.b);
  if (ar != NULL)
    ar->mani_refused = true;
  rel->masked = NULL;
  return 0;
}

void swarm_rel_manifest_try(peer_swarm_rel_t *rel, uint64_t now_ms) {
  peer_swarm_rels_t *t = rel->t;
  if (rel->state != PEER_SWARM_REL_RESOLVING || rel->mdone)
    return;
  if (rel->masked != NULL && manifest_asked_waits(rel, now_ms))
    return;
  for (peer_neighbor_t *n = t->nbrs->head; n != NULL; n = n->next) {
    peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, rel->digest.b);
    if (n->state != PEER_NEIGHBOR_READY || r == NULL || r->have.nbits == 0 ||
        r->mani_refused)
      continue;
    ws_msg_t m;
    memset(&m, 0, sizeof(m));
    m.type = WS_MSG_MANIFEST_REQ;
    memcpy(m.u.manifest_req.digest, rel->digest.b, WS_PROTO_DIGEST_LEN);
    if (peer_neighbor_send(n, &m) != 0)
      continue;
    rel->masked = n;
    rel->mask_ms = now_ms;
    return;
  }
  uint64_t wait =
      rel->has_uri ? PEER_MANIFEST_PEER_TRY_MS : PEER_MANIFEST_WAIT_MS;
  if (now_ms - rel->mwait_since_ms >= wait)
    manifest_answer(rel, NULL, 0, NULL, NULL);
}

uint64_t swarm_rel_manifest_due(const peer_swarm_rel_t *rel, uint64_t now_ms) {
  /* A neighbour asked: its answer, its loss or the tick goes on. */
  if (rel->state != PEER_SWARM_REL_RESOLVING || rel->mdone ||
      rel->mcb == NULL || rel->masked != NULL)
    return UINT64_MAX;
  uint64_t wait =
      rel->has_uri ? PEER_MANIFEST_PEER_TRY_MS : PEER_MANIFEST_WAIT_MS;
  uint64_t waited = now_ms - rel->mwait_since_ms;
  return waited >= wait ? 0 : wait - waited;
}

void swarm_rel_manifest_no_holders(peer_swarm_rel_t *rel) {
  /* The tracker knows nobody in this release's swarm: no neighbour will
   * have its manifest, so waiting out PEER_MANIFEST_PEER_TRY_MS only delays
   * a cluster-wide cold start. */
  if (rel->state == PEER_SWARM_REL_RESOLVING && !rel->mdone &&
      rel->masked == NULL && rel->mcb != NULL && rel->has_uri)
    manifest_answer(rel, NULL, 0, NULL, NULL);
}

int swarm_rel_manifest_fetch(peer_swarm_rels_t *t, const ws_hash_t *digest,
                             const char *uri, peer_swarm_manifest_fn cb,
                             void *arg) {
  if (t->stopping)
    return WS_ECANCELED;
  peer_swarm_rel_t *rel = swarm_rel_find(t, digest->b);
  if (rel != NULL && rel->state != PEER_SWARM_REL_RESOLVING)
    return WS_EBUSY; /* cannot happen: a known release is not resolving */
  if (rel == NULL) {
    rel = swarm_rel_new(t, digest);
    if (rel == NULL)
      return -ENOMEM;
  }
  rel->has_uri = uri != NULL;
  rel->mcb = cb;
  rel->marg = arg;
  rel->mdone = false;
  rel->masked = NULL;
  rel->mwait_since_ms = uv_now(t->ctx->loop);
  /* Announce the digest without a chunk count: the tracker answers with
   * peers that have it. */
  if (t->tl != NULL)
    swarm_rel_tracker_rc("track",
                         peer_trackers_track(t->tl, rel->digest.b, 0, NULL, uri,
                                             WS_SWARM_LEECH));
  swarm_rel_manifest_try(rel, rel->mwait_since_ms);
  return 0;
}

void swarm_rel_manifest_got(peer_swarm_rels_t *t, peer_neighbor_t *n,
                            const ws_hash_t *digest, char *bytes, size_t len) {
  peer_swarm_rel_t *rel = swarm_rel_find(t, digest->b);
  if (rel == NULL || rel->state != PEER_SWARM_REL_RESOLVING || rel->mdone ||
      rel->masked != n) {
    free(bytes);
    return;
  }
  rel->masked = NULL;
  if (bytes == NULL) {
    peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, digest->b);
    if (r != NULL)
      r->mani_refused = true;
    swarm_rel_manifest_try(rel, uv_now(t->ctx->loop));
    if (t->mwait_changed != NULL)
      t->mwait_changed(t->mwait_arg);
    return;
  }
  t->ctx->counters.manifests_from_peers++;
  manifest_answer(rel, bytes, len, n->node_id, n->host);
}

void swarm_rels_neighbor_gone(peer_swarm_rels_t *t, peer_neighbor_t *n) {
  uint64_t now = uv_now(t->ctx->loop);
  for (peer_swarm_rel_t *rel = t->head, *next; rel != NULL; rel = next) {
    next = rel->next;
    if (rel->masked == n) {
      rel->masked = NULL;
      swarm_rel_manifest_try(rel, now); /* may free rel */
    }
  }
  if (t->mwait_changed != NULL)
    t->mwait_changed(t->mwait_arg);
}

void swarm_rels_stop(peer_swarm_rels_t *t) {
  t->stopping = true;
  /* Releases waiting for a manifest from neighbours get their answer. */
  for (peer_swarm_rel_t *rel = t->head, *next; rel != NULL; rel = next) {
    next = rel->next;
    if (rel->state == PEER_SWARM_REL_RESOLVING && !rel->mdone)
      manifest_answer(rel, NULL, 0, NULL, NULL);
  }
}
