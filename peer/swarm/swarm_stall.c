/* swarm_stall.c - liveness of the FETCHING releases (docs/operations.md,
 * "Liveness contract").
 *
 * A release's progress is the bytes that reached it from any source: the
 * verified chunks of its files, the bytes of its chunks the origin is
 * writing now and those arriving in pieces from neighbours. With chunks
 * missing and none of that moving for --stall-timeout, the release is
 * stalled, which is acted on in order:
 *   1. another source: the next announce names the stuck chunks ("st") and
 *      the tracker leases them to us though some member claims them (a
 *      holder nobody can reach, or one that never serves); other stalled
 *      nodes then get them from us. Until READY, later announces name the
 *      missing chunks no neighbour lists, so the rest comes without
 *      another full stall;
 *   2. S3 last: stalled for twice the stall time, the origin fetches
 *      whatever no neighbour has (picker.c picker_fallback), until a
 *      neighbour delivers again;
 *   3. no byte from anyone, S3 included, for --stall-fail: the release
 *      fails with WS_ETIMEOUT (the caller, swarm.c, tells the release
 *      layer).
 * Each stall is logged when it begins and ends and counted (metrics.c).
 *
 * Thread: loop thread. Owns nothing beyond the record's fields.
 */
#include <stdio.h>
#include <string.h>

#include "swarm/swarm_release.h"
#include "ws_log.h"

static uint64_t stall_ms(const peer_swarm_rel_t *rel) {
  unsigned s = rel->t->ctx->cfg->stall_timeout_s;
  return (uint64_t)(s != 0 ? s : PEER_STALL_TIMEOUT_S_DEFAULT) * 1000u;
}

static uint64_t stall_fail_ms(const peer_swarm_rel_t *rel) {
  unsigned s = rel->t->ctx->cfg->stall_fail_s;
  return (uint64_t)(s != 0 ? s : PEER_STALL_FAIL_S_DEFAULT) * 1000u;
}

/* Bytes arriving now for chunks of rel: from the origin and in pieces from
 * neighbours (a chunk is counted by its verified bytes once done). */
static uint64_t rel_bytes_arriving(const peer_swarm_rel_t *rel) {
  peer_file_t *files[PEER_ORIGIN_LIST_MAX];
  uint32_t js[PEER_ORIGIN_LIST_MAX];
  uint64_t n = 0, written;
  unsigned k =
      peer_origin_list(rel->t->origin, files, js, PEER_ORIGIN_LIST_MAX);
  for (unsigned i = 0; i < k; i++) {
    for (uint32_t f = 0; f < rel->nfiles; f++) {
      if (rel->files[f] == files[i] &&
          peer_origin_live(rel->t->origin, files[i], js[i], &written))
        n += written;
    }
  }
  for (peer_neighbor_t *nb = rel->t->nbrs->head; nb != NULL; nb = nb->next) {
    for (unsigned i = 0; i < WS_MUX_MAX; i++) {
      const peer_pieces_t *pc = &nb->pcs[i];
      if (pc->open &&
          memcmp(pc->digest, rel->digest.b, WS_PROTO_DIGEST_LEN) == 0)
        n += pc->got;
    }
  }
  return n;
}

/* Sums rel's files: verified bytes (all, and from neighbours) and whether
 * a chunk is still to fetch (a file FETCHING or OPENING). */
static bool rel_bytes(const peer_swarm_rel_t *rel, uint64_t *all,
                      uint64_t *peer) {
  bool waiting = false;
  *all = 0;
  *peer = 0;
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    const peer_file_t *f = rel->files[k];
    if (f == NULL)
      continue;
    *all += f->bytes_from_s3 + f->bytes_from_peers;
    *peer += f->bytes_from_peers;
    if ((f->state == PEER_FILE_FETCHING || f->state == PEER_FILE_OPENING) &&
        f->chunks_done < f->mf.nchunks)
      waiting = true;
  }
  return waiting;
}

static void stall_begin(peer_swarm_rel_t *rel, uint64_t now, const char *ds) {
  peer_swarm_rels_t *t = rel->t;
  uint32_t missing = rel->total - ws_bitfield_count(&rel->have);
  rel->stalled_ms = now;
  rel->stall_seen = true;
  t->ctx->counters.releases_stalled++;
  WS_LOGW("release %s: stalled: no byte from neighbours or S3 for %llu s, "
          "%u of %u chunks missing; asking the tracker for another source "
          "(S3 itself after %llu s more, failing after %llu s)",
          ds, (unsigned long long)(stall_ms(rel) / 1000u), missing, rel->total,
          (unsigned long long)(stall_ms(rel) / 1000u),
          (unsigned long long)(stall_fail_ms(rel) / 1000u));
  /* Announce now (full state, with the stuck chunks): the interval would
   * leave up to PEER_TRACKER_LINK_INTERVAL_MS of the S3-last wait unused. */
  if (t->tl != NULL)
    swarm_rel_tracker_rc(
        "track", peer_trackers_track(t->tl, rel->digest.b, rel->total,
                                     &rel->have, rel->uri, WS_SWARM_LEECH));
}

int swarm_rel_stall_check(peer_swarm_rel_t *rel, uint64_t now, char *why,
                          size_t len) {
  uint64_t all, peer;
  char ds[WS_DIGEST_STR_LEN + 1];
  if (rel->state != PEER_SWARM_REL_FETCHING || rel->files == NULL)
    return 0;
  bool waiting = rel_bytes(rel, &all, &peer);
  all += rel_bytes_arriving(rel);
  if (peer != rel->prog_peer)
    rel->stall_s3 = false; /* neighbours deliver again: S3 waits */
  rel->prog_peer = peer;
  ws_digest_to_str(&rel->digest, ds);
  if (rel->prog_ms == 0 || all != rel->prog_bytes || !waiting) {
    if (rel->stalled_ms != 0)
      WS_LOGI("release %s: progressing again after %llu s stalled", ds,
              (unsigned long long)((now - rel->stalled_ms) / 1000u));
    rel->prog_ms = now;
    rel->prog_bytes = all;
    rel->stalled_ms = 0;
    return 0;
  }
  uint64_t idle = now - rel->prog_ms;
  if (rel->stalled_ms == 0 && idle >= stall_ms(rel))
    stall_begin(rel, now, ds);
  if (rel->stalled_ms != 0 && !rel->stall_s3 && idle >= 2u * stall_ms(rel)) {
    rel->stall_s3 = true;
    WS_LOGW("release %s: still stalled after %llu s: reading its missing "
            "chunks from S3",
            ds, (unsigned long long)(idle / 1000u));
  }
  if (idle < stall_fail_ms(rel))
    return 0;
  snprintf(why, len,
           "stalled: no byte from neighbours, the tracker's leases or S3 for "
           "%llu s (--stall-fail); %u of %u chunks missing",
           (unsigned long long)(idle / 1000u),
           rel->total - ws_bitfield_count(&rel->have), rel->total);
  return 1;
}

bool swarm_rel_stall_fallback(const peer_swarm_rel_t *rel, uint64_t now) {
  (void)now;
  return rel->state == PEER_SWARM_REL_FETCHING && rel->stall_s3;
}

uint64_t swarm_rel_stalled_for(const peer_swarm_rel_t *rel, uint64_t now) {
  if (rel->state != PEER_SWARM_REL_FETCHING || rel->stalled_ms == 0)
    return 0;
  return now > rel->stalled_ms ? now - rel->stalled_ms : 1u;
}

/* Whether a ready neighbour says it has chunk g of rel. */
static bool rel_neighbour_has(const peer_swarm_rel_t *rel, uint32_t g) {
  for (peer_neighbor_t *nb = rel->t->nbrs->head; nb != NULL; nb = nb->next) {
    const peer_neighbor_rel_t *r = peer_neighbor_rel_find(nb, rel->digest.b);
    if (nb->state == PEER_NEIGHBOR_READY && r != NULL &&
        r->have.nbits == rel->total && ws_bitfield_test(&r->have, g))
      return true;
  }
  return false;
}

void swarm_rel_stall_report(peer_swarm_rel_t *rel, ws_announce_t *a) {
  uint32_t n = 0, seen = 0;
  if (rel->state != PEER_SWARM_REL_FETCHING || !rel->stall_seen ||
      a->total_chunks != rel->total)
    return;
  /* Stalled now: every missing chunk (a neighbour that lists one may be
   * the one that never serves). Once it moves again, until READY: only
   * those no neighbour lists, which only a member we cannot reach claims
   * (the tracker grants on HAVE only chunks nobody claims). */
  bool all = rel->stalled_ms != 0;
  for (uint32_t g = ws_bitfield_next_clear(&rel->have, 0);
       g < rel->total && n < PEER_STALL_REPORT_MAX && seen < PEER_PICK_SCAN_MAX;
       g = ws_bitfield_next_clear(&rel->have, g + 1u), seen++) {
    uint32_t i = 0;
    while (i < rel->nleases && rel->leases[i].chunk != g)
      i++;
    if (i == rel->nleases && (all || !rel_neighbour_has(rel, g)))
      rel->stuck[n++] = g; /* not ours already (being fetched) */
  }
  a->stuck = n > 0 ? rel->stuck : NULL;
  a->n_stuck = n;
}
