/* picker.c - which chunk to fetch from whom.
 *
 * Peers: peer_picker_fill() tops a neighbour's pipeline up to
 * PEER_PIPELINE_DEPTH requests. Candidates are chunks the neighbour holds
 * and we miss, in the releases we are fetching; the best is the one with
 * the lowest (tier, availability): single-chunk files first, then every
 * file's first chunk (the safetensors header), then the rest, and within a
 * tier the chunk the fewest neighbours hold (rarest first), so copies
 * spread through the swarm instead of everyone fetching the same chunk.
 * The scan starts at a random chunk and examines at most PEER_PICK_SCAN_MAX
 * chunks per release, so a pick costs the same for any release size and
 * equal candidates are spread at random.
 *
 * Endgame: when no chunk of a release is MISSING any more (all requested
 * or being written), a neighbour with free slots duplicates requests that
 * are still waiting for their first byte (at most PEER_ENDGAME_DUP_MAX per
 * chunk); the first CHUNK header wins and the others are canceled (nbr.c).
 *
 * Origin: peer_swarm_origin_next() hands the S3 fetcher the chunks the
 * tracker leased to us, except those a neighbour already has, at most the
 * tracker's "streams" of them at full rate (a spare starts as one of those
 * nears its end, origin.c); if the tracker has been unreachable for
 * PEER_TRACKER_FALLBACK_MS (or none is configured) any chunk no neighbour
 * has.
 *
 * No state of its own; loop thread.
 */
#include <assert.h>
#include <string.h>

#include "swarm/swarm-int.h" /* first: see its note on ws_manifest_t */
#include "fetch/origin.h"
#include "ws_log.h"

static uint64_t picker_rand(peer_swarm_t *s) {
  /* xorshift64: tie-breaks only, not security. */
  uint64_t x = s->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  s->rng = x;
  return x;
}

uint32_t peer_picker_avail(peer_swarm_t *s, const peer_srel_t *srel,
                           uint32_t g) {
  uint32_t a = 0;
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    if (n->state == PEER_NBR_READY && peer_nbr_has(n, srel, g))
      a++;
  }
  return a;
}

static int picker_tier(const peer_file_t *f, uint32_t j) {
  if (f->mf.nchunks == 1)
    return PEER_TIER_SMALL;
  return j == 0 ? PEER_TIER_FIRST : PEER_TIER_REST;
}

/* Chunks of srel's release neither done nor in flight. */
static uint64_t picker_missing(const peer_srel_t *srel) {
  const peer_release_t *rel = srel->rel;
  uint64_t miss = 0;
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    const peer_file_t *f = rel->files != NULL ? rel->files[k] : NULL;
    if (f == NULL || f->state != PEER_FILE_FETCHING)
      continue;
    miss += f->mf.nchunks - f->chunks_done - f->chunks_inflight;
  }
  return miss;
}

static int picker_requested(const peer_nbr_t *n, const peer_file_t *f,
                            uint32_t j) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used && n->reqs[i].file == f && n->reqs[i].j == j)
      return 1;
  }
  return 0;
}

typedef struct {
  peer_srel_t *srel;
  peer_file_t *file;
  uint32_t g, j;
  int dup;
  int live; /* still arriving there from origin */
  int tier;
  uint32_t avail;
} pick_t;

/* Scans srel for n's best candidate, improving *best. */
static void picker_scan(peer_nbr_t *n, peer_srel_t *srel,
                        const peer_nbr_rel_t *r, pick_t *best) {
  const ws_bitfield_t *theirs = &r->have;
  peer_swarm_t *s = n->s;
  const ws_manifest_t *m = srel->m;
  const peer_release_t *rel = srel->rel;
  uint32_t total = srel->total;
  if (rel == NULL || rel->files == NULL || m == NULL || total == 0)
    return;
  int endgame = -1; /* computed on the first duplicate candidate */
  uint32_t scan = total < PEER_PICK_SCAN_MAX ? total : PEER_PICK_SCAN_MAX;
  uint32_t g = (uint32_t)(picker_rand(s) % total);
  uint32_t k, j;
  if (ws_manifest_locate(m, g, &k, &j) != 0)
    return;
  for (uint32_t cnt = 0; cnt < scan; cnt++) {
    if (cnt > 0) {
      g++;
      if (g == total) {
        g = 0;
        k = 0;
      }
      while (k < m->nfiles &&
             g >= m->files[k].first_chunk + m->files[k].nchunks)
        k++;
      if (k == m->nfiles)
        break;
    }
    if (!ws_bitfield_test(theirs, g) || ws_bitfield_test(&srel->have, g))
      continue;
    peer_file_t *f = rel->files[k];
    if (f == NULL || f->state != PEER_FILE_FETCHING)
      continue;
    j = g - (uint32_t)m->files[k].first_chunk;
    int dup;
    if (f->chunk_state[j] == PEER_CHUNK_MISSING) {
      dup = 0;
    } else if (f->chunk_state[j] == PEER_CHUNK_INFLIGHT && f->nreq[j] > 0 &&
               f->nreq[j] < PEER_ENDGAME_DUP_MAX && !f->rx_busy[j] &&
               !picker_requested(n, f, j)) {
      if (best->srel != NULL && !best->dup)
        continue; /* a fresh chunk always beats a duplicate */
      if (endgame < 0)
        endgame = picker_missing(srel) == 0;
      if (!endgame)
        continue;
      dup = 1;
    } else {
      continue;
    }
    int tier = picker_tier(f, j);
    int live = r->nlive > 0 && peer_nbr_rel_live(r, g);
    if (best->srel != NULL) {
      if (dup > best->dup || (dup == best->dup && live > best->live))
        continue;
      int same = dup == best->dup && live == best->live;
      if (same && tier > best->tier)
        continue;
      if (same && tier == best->tier && best->avail <= 1)
        continue; /* nothing is rarer than only this neighbour */
    }
    uint32_t avail = peer_picker_avail(s, srel, g);
    if (best->srel != NULL && dup == best->dup && live == best->live &&
        tier == best->tier && avail >= best->avail)
      continue;
    *best = (pick_t){.srel = srel,
                     .file = f,
                     .g = g,
                     .j = j,
                     .dup = dup,
                     .live = live,
                     .tier = tier,
                     .avail = avail};
  }
}

static int picker_request(peer_nbr_t *n, const pick_t *p) {
  uint32_t slot = 0;
  while (slot < PEER_PIPELINE_DEPTH && n->reqs[slot].used)
    slot++;
  assert(slot < PEER_PIPELINE_DEPTH);
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_REQUEST;
  memcpy(m.u.request.digest, p->srel->digest.b, WS_PROTO_DIGEST_LEN);
  m.u.request.chunk = p->g;
  m.u.request.req_id = ++n->next_req_id;
  if (peer_nbr_send(n, &m) != 0)
    return -1;
  if (p->dup)
    peer_file_ref(p->file);
  else
    peer_file_chunk_take(p->file, p->j);
  p->file->nreq[p->j]++;
  peer_req_t *r = &n->reqs[slot];
  *r = (peer_req_t){.used = true,
                    .dup = p->dup != 0,
                    .srel = p->srel,
                    .file = p->file,
                    .g = p->g,
                    .j = p->j,
                    .req_id = m.u.request.req_id,
                    .sent_ms = uv_now(&n->s->d->loop)};
  n->nreqs++;
  return 0;
}

void peer_picker_fill(peer_nbr_t *n) {
  peer_swarm_t *s = n->s;
  if (n->state != PEER_NBR_READY || s->stopping ||
      s->d->state != PEER_DAEMON_RUNNING ||
      uv_now(&s->d->loop) < n->busy_until_ms)
    return;
  while (n->nreqs < PEER_PIPELINE_DEPTH && n->state == PEER_NBR_READY) {
    pick_t best;
    memset(&best, 0, sizeof(best));
    for (uint32_t i = 0; i < n->nrels; i++) {
      peer_nbr_rel_t *r = &n->rels[i];
      if (r->have.nbits == 0)
        continue;
      peer_srel_t *srel = peer_srel_find(s, r->digest);
      if (srel == NULL || srel->state != PEER_SREL_FETCHING ||
          srel->total != r->have.nbits)
        continue;
      picker_scan(n, srel, r, &best);
    }
    if (best.srel == NULL || picker_request(n, &best) != 0)
      return;
  }
}

/* ---- origin ------------------------------------------------------------- */

/* The file and chunk of global chunk g of srel when it may be fetched now:
 * FETCHING file, chunk MISSING, no neighbour holding it. */
static peer_file_t *picker_origin_ok(peer_swarm_t *s, peer_srel_t *srel,
                                     uint32_t g, uint32_t *j) {
  uint32_t k;
  if (g >= srel->total || ws_bitfield_test(&srel->have, g) ||
      ws_manifest_locate(srel->m, g, &k, j) != 0)
    return NULL;
  peer_file_t *f = srel->rel->files != NULL ? srel->rel->files[k] : NULL;
  if (f == NULL || f->state != PEER_FILE_FETCHING || f->bucket == NULL ||
      f->chunk_state[*j] != PEER_CHUNK_MISSING)
    return NULL;
  if (peer_picker_avail(s, srel, g) > 0)
    return NULL; /* a neighbour has it: the picker asks it */
  return f;
}

/* Leases of srel the origin is fetching at full rate (not ending). */
static uint32_t picker_origin_streams(peer_swarm_t *s, peer_srel_t *srel) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < srel->nleases; i++) {
    uint32_t k, j;
    if (ws_manifest_locate(srel->m, srel->leases[i].chunk, &k, &j) != 0 ||
        srel->rel->files == NULL || srel->rel->files[k] == NULL)
      continue;
    n += (uint32_t)peer_origin_streaming(s->d->origin, srel->rel->files[k], j);
  }
  return n;
}

int peer_swarm_origin_next(peer_swarm_t *s, peer_file_t **out, uint32_t *jout) {
  if (s->stopping)
    return 0;
  uint64_t now = uv_now(&s->d->loop);
  for (peer_srel_t *srel = s->srels; srel != NULL; srel = srel->next) {
    if (srel->state != PEER_SREL_FETCHING)
      continue;
    /* The tracker's spare lease waits until a fetch is about to end. */
    if (srel->streams != 0 && picker_origin_streams(s, srel) >= srel->streams)
      continue;
    for (uint32_t i = 0; i < srel->nleases;) {
      peer_lease_t *l = &srel->leases[i];
      if (l->expires_ms <= now || ws_bitfield_test(&srel->have, l->chunk)) {
        srel->leases[i] = srel->leases[--srel->nleases];
        continue;
      }
      uint32_t j;
      peer_file_t *f = picker_origin_ok(s, srel, l->chunk, &j);
      i++;
      if (f == NULL)
        continue;
      peer_file_chunk_take(f, j);
      *out = f;
      *jout = j;
      return 1;
    }
  }
  int fallback =
      s->tc == NULL ||
      (!s->tracker_up && now - s->tracker_down_ms >= PEER_TRACKER_FALLBACK_MS);
  if (!fallback)
    return 0;
  for (peer_srel_t *srel = s->srels; srel != NULL; srel = srel->next) {
    if (srel->state != PEER_SREL_FETCHING)
      continue;
    for (uint32_t g = 0; g < srel->total; g++) {
      uint32_t j;
      peer_file_t *f = picker_origin_ok(s, srel, g, &j);
      if (f == NULL)
        continue;
      peer_file_chunk_take(f, j);
      *out = f;
      *jout = j;
      return 1;
    }
  }
  return 0;
}
