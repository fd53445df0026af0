/* picker.c - which chunk to fetch from whom (picker.h): neighbours'
 * request pipelines, rarest first, endgame duplicates, and the origin gate.
 *
 * Owns: its random state. Thread: loop thread.
 */
#include <assert.h>
#include <string.h>

#include "swarm/origin_share.h"
#include "swarm/pick_rank.h"
#include "swarm/picker.h"
#include "ws_log.h"

void peer_picker_init(peer_picker_t *p, peer_ctx_t *ctx, peer_neighbors_t *nbrs,
                      peer_swarm_rels_t *rels, peer_origin_t *origin,
                      const peer_tracker_state_t *tracker) {
  memset(p, 0, sizeof(*p));
  p->ctx = ctx;
  p->nbrs = nbrs;
  p->rels = rels;
  p->origin = origin;
  p->tracker = tracker;
  p->rng = uv_hrtime() | 1u;
  p->self_key = peer_share_key(ctx->cfg->node_id);
}

static uint64_t picker_rand(peer_picker_t *p) {
  return peer_pick_rand(&p->rng); /* tie-breaks only, not security */
}

static uint32_t picker_avail(peer_picker_t *p, const peer_swarm_rel_t *rel,
                             uint32_t g) {
  return peer_neighbors_holding(p->nbrs, rel->digest.b, rel->total, g);
}

static int picker_tier(const peer_file_t *f, uint32_t j) {
  if (f->mf.nchunks == 1)
    return PEER_TIER_SMALL;
  return j == 0 ? PEER_TIER_FIRST : PEER_TIER_REST;
}

/* Chunks of rel's release neither done nor in flight. */
static uint64_t picker_missing(const peer_swarm_rel_t *rel) {
  uint64_t miss = 0;
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    const peer_file_t *f = rel->files != NULL ? rel->files[k] : NULL;
    if (f != NULL)
      miss += peer_file_chunks_missing(f);
  }
  return miss;
}

typedef struct {
  peer_swarm_rel_t *rel;
  peer_file_t *file;
  uint32_t g, j;
  peer_pick_rank_t rank;
} pick_t;

/* How chunk j of f may be asked of n: 0 fresh (MISSING), 1 an endgame
 * duplicate, -1 not at all (pick_rank.h decides). *endgame caches whether
 * rel is in its endgame (-1: not computed yet). */
static int picker_kind(const peer_neighbor_t *n, const peer_swarm_rel_t *rel,
                       const peer_file_t *f, uint32_t j, const pick_t *best,
                       int *endgame) {
  peer_pick_chunk_t c = {
      .missing = f->chunk_state[j] == PEER_CHUNK_MISSING,
      .inflight = f->chunk_state[j] == PEER_CHUNK_INFLIGHT,
      .nreq = f->nreq[j],
      .rx_busy = f->rx_busy[j] != 0,
  };
  /* Asked only when it could matter: it walks n's requests. */
  if (!c.missing && c.inflight && c.nreq > 0 && c.nreq < PEER_ENDGAME_DUP_MAX &&
      !c.rx_busy)
    c.pending_here = peer_request_pending(n, f, j);
  peer_pick_kind_t k =
      peer_pick_kind(&c, best->rel != NULL && best->rank.dup == 0);
  if (k != PEER_PICK_ENDGAME)
    return (int)k;
  if (*endgame < 0)
    *endgame = picker_missing(rel) == 0;
  return *endgame ? 1 : -1;
}

/* Considers global chunk g (chunk j of f) of rel for best. */
static void picker_consider(peer_picker_t *p, const peer_neighbor_rel_t *r,
                            peer_swarm_rel_t *rel, peer_file_t *f, uint32_t g,
                            uint32_t j, int dup, pick_t *best) {
  peer_pick_rank_t rank = {
      .dup = dup,
      .live = r->nlive > 0 && peer_neighbor_rel_live(r, g),
      .tier = picker_tier(f, j),
  };
  const peer_pick_rank_t *cur = best->rel != NULL ? &best->rank : NULL;
  if (!peer_pick_may_beat(&rank, cur))
    return;
  rank.avail = picker_avail(p, rel, g);
  if (!peer_pick_beats(&rank, cur))
    return;
  *best = (pick_t){.rel = rel, .file = f, .g = g, .j = j, .rank = rank};
}

/* The stripes (bit s, of rel->ntree) whose chunks may be asked of n: with
 * stripe trees (docs/tracker.md) a stripe's chunks come from our parent in
 * it while that parent is a ready neighbour that feeds it; from anyone
 * where we are the root, once PEER_TREE_GRACE_MS after the trees came the
 * parent is not a neighbour (gone, or never reached), or while it has
 * offered none of the stripe's chunks we lack for PEER_TREE_GRACE_MS (a
 * parent that lags, or a keyed one that stays and says nothing: its
 * children asked nobody else, tests/hostile/test_tree_parent.py). Without
 * trees, every chunk. */
static uint32_t picker_tree_mask(const peer_picker_t *p,
                                 const peer_neighbor_t *n,
                                 const peer_swarm_rel_t *rel) {
  uint32_t mask = 0;
  uint64_t now = uv_now(p->ctx->loop);
  bool late = now - rel->tree_ms >= PEER_TREE_GRACE_MS;
  for (uint32_t s = 0; s < rel->ntree; s++) {
    const char *parent = rel->tree[s];
    bool ready = false;
    if (parent[0] == '\0' || strcmp(parent, n->node_id) == 0 ||
        now - rel->tree_fed_ms[s] >= PEER_TREE_GRACE_MS) {
      mask |= 1u << s;
      continue;
    }
    for (const peer_neighbor_t *o = p->nbrs->head; o != NULL && !ready;
         o = o->next)
      ready =
          o->state == PEER_NEIGHBOR_READY && strcmp(o->node_id, parent) == 0;
    if (!ready && late)
      mask |= 1u << s;
  }
  return mask;
}

/* Scans rel for n's best candidate, improving *best. */
static void picker_scan(peer_picker_t *p, peer_neighbor_t *n,
                        peer_swarm_rel_t *rel, const peer_neighbor_rel_t *r,
                        pick_t *best) {
  const ws_bitfield_t *theirs = &r->have;
  const ws_manifest_t *m = rel->m;
  uint32_t total = rel->total;
  if (rel->files == NULL || m == NULL || total == 0)
    return;
  int endgame = -1; /* computed on the first duplicate candidate */
  uint32_t scan = total < PEER_PICK_SCAN_MAX ? total : PEER_PICK_SCAN_MAX;
  uint32_t tree = rel->ntree, mask = tree ? picker_tree_mask(p, n, rel) : 0;
  if (tree != 0 && mask == 0)
    return; /* nothing of rel from n now */
  uint32_t g = (uint32_t)(picker_rand(p) % total);
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
    if (!ws_bitfield_test(theirs, g) || ws_bitfield_test(&rel->have, g) ||
        (tree != 0 && !((mask >> (g % tree)) & 1u)))
      continue;
    peer_file_t *f = rel->files[k];
    if (f == NULL || f->state != PEER_FILE_FETCHING)
      continue;
    j = g - (uint32_t)m->files[k].first_chunk;
    int dup = picker_kind(n, rel, f, j, best, &endgame);
    if (dup >= 0)
      picker_consider(p, r, rel, f, g, j, dup, best);
  }
}

/* The release we fetch that a neighbour's entry r is about, once its
 * BITFIELD came (of the same size as ours), or NULL. */
static peer_swarm_rel_t *picker_fetching(const peer_picker_t *p,
                                         const peer_neighbor_rel_t *r) {
  if (r->have.nbits == 0)
    return NULL;
  peer_swarm_rel_t *rel = swarm_rel_find(p->rels, r->digest);
  return rel != NULL && rel->state == PEER_SWARM_REL_FETCHING &&
                 rel->total == r->have.nbits
             ? rel
             : NULL;
}

/* 1 when n sent its BITFIELD of a release we fetch. */
static bool picker_shares(const peer_picker_t *p, const peer_neighbor_t *n) {
  for (uint32_t i = 0; i < n->nrels; i++)
    if (picker_fetching(p, &n->rels[i]) != NULL)
      return true;
  return false;
}

uint32_t peer_picker_depth(const peer_picker_t *p) {
  const peer_neighbors_t *set = p->nbrs;
  if (set->nready < PEER_REQS_MAX || set->rx_bps == 0)
    return PEER_PIPELINE_DEPTH;
  /* The largest chunk of the releases we fetch. */
  uint64_t chunk = 0;
  for (const peer_swarm_rel_t *rel = p->rels->head; rel != NULL;
       rel = rel->next)
    if (rel->state == PEER_SWARM_REL_FETCHING && rel->m != NULL &&
        rel->m->chunk_size > chunk)
      chunk = rel->m->chunk_size;
  if (chunk * 1000u / set->rx_bps < PEER_DEPTH_ONE_CHUNK_MS)
    return PEER_PIPELINE_DEPTH;
  /* Only neighbours in a swarm of ours can take a request. Last, as the
   * dearest test: it stops at the PEER_REQS_MAX-th such neighbour. */
  uint32_t sharing = 0;
  for (const peer_neighbor_t *n = set->head;
       n != NULL && sharing < PEER_REQS_MAX; n = n->next)
    sharing += n->state == PEER_NEIGHBOR_READY && picker_shares(p, n);
  return sharing < PEER_REQS_MAX ? PEER_PIPELINE_DEPTH : 1u;
}

void peer_picker_fill(peer_picker_t *p, peer_neighbor_t *n) {
  if (n->state != PEER_NEIGHBOR_READY || p->stopping || !p->ctx->running ||
      uv_now(p->ctx->loop) < n->busy_until_ms)
    return;
  uint32_t depth = peer_picker_depth(p);
  uint32_t asked = depth == 1 ? peer_neighbor_arriving(n) : 0;
  while (n->nreqs + asked < depth && p->nbrs->nreqs < PEER_REQS_MAX &&
         n->state == PEER_NEIGHBOR_READY) {
    pick_t best;
    memset(&best, 0, sizeof(best));
    for (uint32_t i = 0; i < n->nrels; i++) {
      peer_neighbor_rel_t *r = &n->rels[i];
      peer_swarm_rel_t *rel = picker_fetching(p, r);
      if (rel != NULL)
        picker_scan(p, n, rel, r, &best);
    }
    if (best.rel == NULL ||
        peer_request_send(n, best.rel, best.rel->digest.b, best.file, best.g,
                          best.j, best.rank.dup != 0) != 0)
      return;
  }
}

void peer_picker_fill_all(peer_picker_t *p) {
  if (p->stopping || p->nbrs->count == 0)
    return;
  /* From a random neighbour on: the request slots left go round. */
  uint32_t start = (uint32_t)(picker_rand(p) % p->nbrs->count), i = 0;
  peer_neighbor_t *first = p->nbrs->head;
  while (first != NULL && i++ < start)
    first = first->next;
  for (peer_neighbor_t *n = first; n != NULL; n = n->next)
    peer_picker_fill(p, n);
  for (peer_neighbor_t *n = p->nbrs->head; n != first; n = n->next)
    peer_picker_fill(p, n);
}

/* ---- origin ------------------------------------------------------------- */

/* The file and chunk of global chunk g of rel when it may be fetched now:
 * FETCHING file, chunk MISSING, and, if claims count, no neighbour holding
 * it. Claims stop counting once rel has stalled (swarm_stall.c): a
 * neighbour that lists a chunk and never serves it must not keep the
 * tracker's lease, or S3 last, from fetching it. */
static peer_file_t *picker_origin_ok(peer_picker_t *p, peer_swarm_rel_t *rel,
                                     uint32_t g, uint32_t *j,
                                     bool trust_claims) {
  if (g >= rel->total || ws_bitfield_test(&rel->have, g))
    return NULL;
  peer_file_t *f = swarm_rel_file_of(rel, g, j);
  if (f == NULL || f->state != PEER_FILE_FETCHING || f->bucket == NULL ||
      f->chunk_state[*j] != PEER_CHUNK_MISSING)
    return NULL;
  if (trust_claims && picker_avail(p, rel, g) > 0)
    return NULL; /* a neighbour has it: the picker asks it */
  return f;
}

/* Leases of rel the origin is fetching at full rate (not ending). */
static uint32_t picker_origin_streams(peer_picker_t *p, peer_swarm_rel_t *rel) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < rel->nleases; i++) {
    uint32_t j;
    peer_file_t *f = swarm_rel_file_of(rel, rel->leases[i].chunk, &j);
    if (f != NULL)
      n += (uint32_t)peer_origin_streaming(p->origin, f, j);
  }
  return n;
}

/* A leased chunk of rel the origin may fetch now, or NULL; drops leases
 * that expired or whose chunk we hold. */
static peer_file_t *picker_origin_leased(peer_picker_t *p,
                                         peer_swarm_rel_t *rel, uint64_t now,
                                         uint32_t *j) {
  for (uint32_t i = 0; i < rel->nleases;) {
    peer_lease_t *l = &rel->leases[i];
    if (l->expires_ms <= now || ws_bitfield_test(&rel->have, l->chunk)) {
      rel->leases[i] = rel->leases[--rel->nleases];
      continue;
    }
    peer_file_t *f = picker_origin_ok(p, rel, l->chunk, j, !rel->stall_seen);
    i++;
    if (f != NULL)
      return f;
  }
  return NULL;
}

bool peer_picker_tracker_down(const peer_picker_t *p,
                              const peer_swarm_rel_t *rel, uint64_t now,
                              uint64_t *since_ms) {
  const peer_tracker_state_t *t = p->tracker;
  uint64_t since = t->down_ms;
  bool down = !t->up;
  (void)now;
  if (!t->configured)
    return false;
  if (t->trackers != NULL)
    down = peer_trackers_down_since(t->trackers, rel->digest.b, &since) != 0;
  if (since_ms != NULL)
    *since_ms = since;
  return down;
}

/* Whether the origin may fetch chunks of rel that nobody leased to us: no
 * tracker configured, or rel's tracker down for PEER_TRACKER_FALLBACK_MS;
 * *from_ms: since when it may (loop time). */
static bool picker_fallback(const peer_picker_t *p, const peer_swarm_rel_t *rel,
                            uint64_t now, uint64_t *from_ms) {
  uint64_t since = 0;
  *from_ms = rel->fetching_ms;
  if (!p->tracker->configured || swarm_rel_stall_fallback(rel, now))
    return true; /* no tracker; or stalled for long (swarm_stall.c) */
  if (!peer_picker_tracker_down(p, rel, now, &since) ||
      now - since < PEER_TRACKER_FALLBACK_MS)
    return false;
  if (since + PEER_TRACKER_FALLBACK_MS > *from_ms)
    *from_ms = since + PEER_TRACKER_FALLBACK_MS;
  return true;
}

/* The keys of the neighbours that share rel's S3 reads with us (they fetch
 * or hold it and said something about it within PEER_SHARE_STALL_MS, or
 * the fallback began less than that ago: while everyone waited out the
 * tracker, nobody had anything to say) into keys[0..max); returns how
 * many, or -1 while rel is in its grace (just began fetching, other nodes
 * known: they may not have found it yet). */
static int picker_share_set(const peer_picker_t *p, const peer_swarm_rel_t *rel,
                            uint64_t now, uint64_t from_ms, uint64_t *keys,
                            uint32_t max) {
  uint32_t n = 0;
  if ((p->ctx->counters.nodes_known > 0 || p->nbrs->nready > 0) &&
      now - rel->fetching_ms < PEER_SHARE_GRACE_MS)
    return -1;
  for (peer_neighbor_t *nb = p->nbrs->head; nb != NULL && n < max;
       nb = nb->next) {
    const peer_neighbor_rel_t *r;
    if (nb->state != PEER_NEIGHBOR_READY ||
        (r = peer_neighbor_rel_find(nb, rel->digest.b)) == NULL ||
        r->have.nbits != rel->total ||
        now - (r->active_ms > from_ms ? r->active_ms : from_ms) >
            PEER_SHARE_STALL_MS)
      continue;
    keys[n++] = nb->share_key;
  }
  return (int)n;
}

/* A chunk of rel the origin may fetch with its tracker down: one no
 * neighbour has whose rendezvous winner (origin_share.h) is us. With no
 * tracker configured, or stalled for twice the stall time (S3 last), any
 * chunk no neighbour has, or (S3 last) any we lack: neighbours that list
 * chunks have delivered nothing for that long. */
static peer_file_t *picker_origin_shared(peer_picker_t *p,
                                         peer_swarm_rel_t *rel, uint64_t now,
                                         uint64_t from_ms, uint32_t *j) {
  uint64_t keys[PEER_MAX_NEIGHBORS_MAX];
  bool s3_last = swarm_rel_stall_fallback(rel, now);
  int nk = s3_last || !p->tracker->configured
               ? 0
               : picker_share_set(p, rel, now, from_ms, keys,
                                  PEER_MAX_NEIGHBORS_MAX);
  if (nk < 0)
    return NULL;
  for (uint32_t g = 0; g < rel->total; g++) {
    if (ws_bitfield_test(&rel->have, g))
      continue;
    if (nk > 0 &&
        !peer_share_mine(rel->digest.b, g, p->self_key, keys, (uint32_t)nk))
      continue; /* its winner reads it; taken over if the winner goes */
    peer_file_t *f = picker_origin_ok(p, rel, g, j, !s3_last);
    if (f != NULL)
      return f;
  }
  return NULL;
}

int peer_picker_origin_next(void *arg, peer_file_t **out, uint32_t *jout) {
  peer_picker_t *p = arg;
  if (p->stopping)
    return 0;
  uint64_t now = uv_now(p->ctx->loop);
  peer_file_t *f = NULL;
  uint32_t j;
  for (peer_swarm_rel_t *rel = p->rels->head; rel != NULL && f == NULL;
       rel = rel->next) {
    if (rel->state != PEER_SWARM_REL_FETCHING)
      continue;
    /* The tracker's spare lease waits until a fetch is about to end. */
    if (rel->streams != 0 && picker_origin_streams(p, rel) >= rel->streams)
      continue;
    f = picker_origin_leased(p, rel, now, &j);
  }
  for (peer_swarm_rel_t *rel = p->rels->head; rel != NULL && f == NULL;
       rel = rel->next) {
    uint64_t from_ms;
    if (rel->state != PEER_SWARM_REL_FETCHING ||
        !picker_fallback(p, rel, now, &from_ms))
      continue;
    f = picker_origin_shared(p, rel, now, from_ms, &j);
  }
  if (f == NULL)
    return 0;
  peer_file_chunk_take(f, j);
  *out = f;
  *jout = j;
  return 1;
}
