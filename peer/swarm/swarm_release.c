/* swarm_release.c - the swarm release records (swarm_release.h): the
 * table, each record's state, our have-bitfield and what it means to
 * neighbours and tracker (BITFIELD, HAVE, HAVE "p"), the origin leases,
 * and where an upload finds a chunk's bytes. The manifest asked from
 * neighbours while RESOLVING is in swarm_manifest.c.
 *
 * Owns: the records, their bitfields, READY records' manifests.
 * Borrows: a FETCHING record's manifest and files.
 * Thread: loop thread; swarm_rel_seed_load's read-back on a worker.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/download.h"
#include "swarm/swarm_release.h"
#include "ws_log.h"

/* The node's uplink is bulk (proto/wire_uplink.h) while no release here
 * is RESOLVING or FETCHING: then it sends no HAVE, REQUEST or manifest
 * request anyone waits for, only what it serves. */
static void rels_uplink_update(peer_swarm_rels_t *t) {
  bool fetching = false;
  for (peer_swarm_rel_t *r = t->head; r != NULL && !fetching; r = r->next)
    fetching = r->state != PEER_SWARM_REL_READY;
  if (t->nbrs != NULL && t->nbrs->uplink.bulk == fetching) {
    WS_LOGD("uplink: %s",
            fetching ? "fetching (frames urgent)" : "serving only (bulk)");
    wire_uplink_set_bulk(&t->nbrs->uplink, !fetching);
  }
}

static const char *rel_state_name(peer_swarm_rel_state_t st) {
  static const char *const names[PEER_SWARM_REL_STATE_LAST] = {
      "resolving", "fetching", "ready"};
  return st < PEER_SWARM_REL_STATE_LAST ? names[st] : "?";
}

void swarm_rel_set_state(peer_swarm_rel_t *rel, peer_swarm_rel_state_t to) {
  static const uint8_t
      legal[PEER_SWARM_REL_STATE_LAST][PEER_SWARM_REL_STATE_LAST] = {
          [PEER_SWARM_REL_RESOLVING] =
              {[PEER_SWARM_REL_FETCHING] = 1, [PEER_SWARM_REL_READY] = 1},
          [PEER_SWARM_REL_FETCHING] = {[PEER_SWARM_REL_READY] = 1},
      };
  assert(legal[rel->state][to]);
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&rel->digest, ds);
  WS_LOGD("swarm %s: %s -> %s", ds, rel_state_name(rel->state),
          rel_state_name(to));
  rel->state = to;
  rels_uplink_update(rel->t);
}

void swarm_rel_tracker_rc(const char *what, int rc) {
  if (rc != 0)
    WS_LOGD("tracker %s: %s", what, ws_strerror(rc));
}

peer_swarm_rel_t *swarm_rel_find(peer_swarm_rels_t *t, const uint8_t *digest) {
  for (peer_swarm_rel_t *r = t->head; r != NULL; r = r->next) {
    if (memcmp(r->digest.b, digest, WS_PROTO_DIGEST_LEN) == 0)
      return r;
  }
  return NULL;
}

void swarm_rel_set_tree(peer_swarm_rel_t *rel,
                        const char (*tree)[WS_NODE_ID_MAX + 1], uint32_t n,
                        uint64_t now_ms) {
  if (rel == NULL)
    return;
  n = n < WS_MAX_TREE ? n : WS_MAX_TREE;
  if (n != rel->ntree) {
    char ds[WS_DIGEST_STR_LEN + 1];
    ws_digest_to_str(&rel->digest, ds);
    WS_LOGI("release %s: %u stripe trees", ds, n);
  }
  if (n != 0 && rel->ntree == 0)
    rel->tree_ms = now_ms; /* parents get PEER_TREE_GRACE_MS to connect */
  for (uint32_t i = 0; i < n; i++) {
    /* A new parent gets PEER_TREE_GRACE_MS to offer its stripe. */
    if (i >= rel->ntree || strcmp(rel->tree[i], tree[i]) != 0)
      rel->tree_fed_ms[i] = now_ms;
    memcpy(rel->tree[i], tree[i], sizeof(rel->tree[i]));
  }
  rel->ntree = n;
}

void swarm_rel_tree_offer(peer_swarm_rel_t *rel, const char *node_id,
                          uint32_t chunk, uint64_t now_ms) {
  if (rel == NULL || rel->ntree == 0 || chunk >= rel->have.nbits ||
      ws_bitfield_test(&rel->have, chunk))
    return;
  uint32_t s = chunk % rel->ntree;
  if (strcmp(rel->tree[s], node_id) == 0)
    rel->tree_fed_ms[s] = now_ms;
}

peer_swarm_rel_t *swarm_rel_new(peer_swarm_rels_t *t, const ws_hash_t *digest) {
  peer_swarm_rel_t *rel = calloc(1, sizeof(*rel));
  if (rel == NULL)
    return NULL;
  rel->t = t;
  rel->digest = *digest;
  rel->state = PEER_SWARM_REL_RESOLVING;
  rel->next = t->head;
  t->head = rel;
  t->count++;
  rels_uplink_update(t);
  return rel;
}

void swarm_rel_free(peer_swarm_rel_t *rel) {
  peer_swarm_rels_t *t = rel->t;
  peer_swarm_rel_t **pp = &t->head;
  /* First: the stop announce asks for rel's report (a failed file's
   * error), so rel must still be found. */
  if (t->tl != NULL)
    swarm_rel_tracker_rc("untrack",
                         peer_trackers_untrack(t->tl, rel->digest.b));
  while (*pp != NULL && *pp != rel)
    pp = &(*pp)->next;
  assert(*pp == rel);
  *pp = rel->next;
  t->count--;
  rels_uplink_update(t);
  for (peer_neighbor_t *n = t->nbrs->head; n != NULL; n = n->next)
    peer_requests_forget_rel(n, rel);
  ws_bitfield_free(&rel->have);
  free(rel->uri);
  if (rel->state == PEER_SWARM_REL_READY) {
    ws_manifest_free(rel->m);
    free(rel->mbytes);
  }
  free(rel);
}

peer_file_t *swarm_rel_file_of(const peer_swarm_rel_t *rel, uint32_t g,
                               uint32_t *j) {
  uint32_t k;
  if (rel->files == NULL || rel->m == NULL ||
      ws_manifest_locate(rel->m, g, &k, j) != 0 || k >= rel->nfiles)
    return NULL;
  return rel->files[k];
}

/* Sizes the have-bitfield for m. 0 or an error (release not shared). */
static int rel_set_manifest(peer_swarm_rel_t *rel, ws_manifest_t *m,
                            char *bytes, size_t len) {
  if (m->total_chunks == 0 || m->total_chunks > WS_MAX_TOTAL_CHUNKS)
    return WS_ELIMIT;
  if (rel->have.nbits != m->total_chunks) {
    ws_bitfield_free(&rel->have);
    int rc = ws_bitfield_init(&rel->have, (uint32_t)m->total_chunks);
    if (rc != 0)
      return rc;
  }
  rel->m = m;
  rel->mbytes = bytes;
  rel->mlen = len;
  rel->total = (uint32_t)m->total_chunks;
  return 0;
}

/* ---- BITFIELD ----------------------------------------------------------- */

void swarm_rel_send_bitfield(peer_swarm_rel_t *rel, peer_neighbor_t *n) {
  if (n->state != PEER_NEIGHBOR_READY || rel->total == 0)
    return;
  peer_neighbor_rel_t *r = peer_neighbor_rel_get(n, rel->digest.b);
  if (r != NULL && r->sent_ours)
    return;
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_BITFIELD;
  memcpy(m.u.bitfield.digest, rel->digest.b, WS_PROTO_DIGEST_LEN);
  m.u.bitfield.total_chunks = rel->total;
  m.u.bitfield.bits = rel->have.bits;
  m.u.bitfield.live = true; /* we take HAVE "p" and CHUNK pieces, */
  m.u.bitfield.mux = true;  /* of WS_MUX_MAX chunks at once */
  if (peer_neighbor_send(n, &m) == 0 && r != NULL) {
    r->sent_ours = true;
    swarm_rel_live_haves(rel, n);
  }
}

static void rel_announce_all(peer_swarm_rel_t *rel) {
  for (peer_neighbor_t *n = rel->t->nbrs->head; n != NULL; n = n->next)
    swarm_rel_send_bitfield(rel, n);
}

void swarm_rels_announce_to(peer_swarm_rels_t *t, peer_neighbor_t *n) {
  for (peer_swarm_rel_t *r = t->head; r != NULL; r = r->next) {
    if (r->state != PEER_SWARM_REL_RESOLVING)
      swarm_rel_send_bitfield(r, n);
  }
}

/* ---- HAVE --------------------------------------------------------------- */

static void rel_have(peer_swarm_rel_t *rel, uint32_t g) {
  peer_swarm_rels_t *t = rel->t;
  if (g >= rel->total || ws_bitfield_test(&rel->have, g))
    return;
  ws_bitfield_set(&rel->have, g);
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memcpy(m.u.have.digest, rel->digest.b, WS_PROTO_DIGEST_LEN);
  m.u.have.chunk = g;
  for (peer_neighbor_t *n = t->nbrs->head; n != NULL; n = n->next) {
    peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, rel->digest.b);
    if (n->state == PEER_NEIGHBOR_READY && r != NULL && r->sent_ours)
      (void)peer_neighbor_send(n, &m); /* a full queue drops one HAVE */
  }
  if (t->tl != NULL)
    swarm_rel_tracker_rc(
        "have", peer_trackers_have_from(t->tl, rel->digest.b, g, t->from));
  for (uint32_t i = 0; i < rel->nleases; i++) {
    if (rel->leases[i].chunk == g) {
      rel->leases[i] = rel->leases[--rel->nleases];
      break;
    }
  }
}

/* Calls fn for each FETCHING record listing file, with the file's first
 * global chunk there. */
static void rels_each_with_file(peer_swarm_rels_t *t, const peer_file_t *file,
                                void (*fn)(peer_swarm_rel_t *, uint32_t,
                                           void *),
                                void *arg) {
  for (peer_swarm_rel_t *rel = t->head; rel != NULL; rel = rel->next) {
    if (rel->state != PEER_SWARM_REL_FETCHING || rel->files == NULL)
      continue;
    for (uint32_t k = 0; k < rel->nfiles; k++) {
      if (rel->files[k] == file)
        fn(rel, (uint32_t)rel->m->files[k].first_chunk, arg);
    }
  }
}

static void rel_have_one(peer_swarm_rel_t *rel, uint32_t first, void *arg) {
  rel_have(rel, first + *(const uint32_t *)arg);
}

static void rel_have_file(peer_swarm_rel_t *rel, uint32_t first, void *arg) {
  const peer_file_t *file = arg;
  for (uint32_t j = 0; j < file->mf.nchunks; j++)
    rel_have(rel, first + j);
}

void swarm_rels_chunk_done(peer_swarm_rels_t *t, peer_file_t *file,
                           uint32_t j) {
  /* Whole-file manifests: a chunk is only trusted once the file is. */
  if (file->mf.chunks == NULL)
    return;
  rels_each_with_file(t, file, rel_have_one, &j);
}

void swarm_rels_chunk_done_from(peer_swarm_rels_t *t, peer_file_t *file,
                                uint32_t j, const char *from) {
  t->from = from;
  swarm_rels_chunk_done(t, file, j);
  t->from = NULL;
}

/* HAVE "p" for global chunk g to n, when n takes them and lacks g. */
static void rel_send_live(peer_swarm_rel_t *rel, peer_neighbor_t *n,
                          uint32_t g) {
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, rel->digest.b);
  if (n->state != PEER_NEIGHBOR_READY || r == NULL || !r->sent_ours ||
      !r->live_ok || g >= rel->total || ws_bitfield_test(&rel->have, g) ||
      (g < r->have.nbits && ws_bitfield_test(&r->have, g)))
    return;
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memcpy(m.u.have.digest, rel->digest.b, WS_PROTO_DIGEST_LEN);
  m.u.have.chunk = g;
  m.u.have.live = true;
  (void)peer_neighbor_send(n, &m); /* a full queue drops one HAVE */
}

static void rel_live_one(peer_swarm_rel_t *rel, uint32_t first, void *arg) {
  for (peer_neighbor_t *n = rel->t->nbrs->head; n != NULL; n = n->next)
    rel_send_live(rel, n, first + *(const uint32_t *)arg);
}

void swarm_rel_live_haves(peer_swarm_rel_t *rel, peer_neighbor_t *n) {
  peer_file_t *files[PEER_ORIGIN_LIST_MAX];
  uint32_t js[PEER_ORIGIN_LIST_MAX];
  if (rel->state != PEER_SWARM_REL_FETCHING || rel->files == NULL)
    return;
  unsigned k =
      peer_origin_list(rel->t->origin, files, js, PEER_ORIGIN_LIST_MAX);
  for (unsigned i = 0; i < k; i++) {
    for (uint32_t f = 0; f < rel->nfiles; f++) {
      if (rel->files[f] == files[i] && files[i]->mf.chunks != NULL)
        rel_send_live(rel, n, (uint32_t)rel->m->files[f].first_chunk + js[i]);
    }
  }
}

void swarm_rels_chunk_live(peer_swarm_rels_t *t, peer_file_t *file,
                           uint32_t j) {
  /* Whole-file manifests: nothing is served before the file verified. */
  if (file->mf.chunks == NULL || t->stopping)
    return;
  rels_each_with_file(t, file, rel_live_one, &j);
}

void swarm_rels_file_complete(peer_swarm_rels_t *t, peer_file_t *file) {
  rels_each_with_file(t, file, rel_have_file, file);
}

/* ---- the release's progress --------------------------------------------- */

int swarm_rel_fetching(peer_swarm_rels_t *t, const ws_hash_t *digest,
                       const char *uri, const ws_manifest_t *m,
                       const char *mbytes, size_t mlen,
                       peer_file_t *const *files, uint32_t nfiles) {
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(digest, ds);
  peer_swarm_rel_t *rel = swarm_rel_find(t, digest->b);
  if (rel != NULL && rel->state != PEER_SWARM_REL_RESOLVING)
    return 0; /* READY already: the cache had it */
  if (rel == NULL)
    rel = swarm_rel_new(t, digest);
  /* Borrowed while FETCHING: the record never frees or changes them. */
  if (rel == NULL ||
      rel_set_manifest(rel, (ws_manifest_t *)m, (char *)mbytes, mlen) != 0) {
    WS_LOGW("release %s: not shared with the swarm (%s); S3 only", ds,
            rel == NULL ? "out of memory" : "chunk count");
    if (rel != NULL)
      swarm_rel_free(rel);
    return 0;
  }
  rel->files = files;
  rel->nfiles = nfiles;
  rel->has_uri = uri != NULL;
  free(rel->uri); /* a stall re-announces with it (swarm_stall.c) */
  rel->uri = uri != NULL ? strdup(uri) : NULL;
  rel->mdone = true;
  rel->masked = NULL;
  rel->mcb = NULL;
  swarm_rel_set_state(rel, PEER_SWARM_REL_FETCHING);
  rel->fetching_ms = uv_now(t->ctx->loop);
  /* Files complete already (shared with a release in the cache). */
  for (uint32_t k = 0; k < nfiles; k++) {
    peer_file_t *f = files[k];
    if (f != NULL &&
        (f->state == PEER_FILE_COMPLETE || f->state == PEER_FILE_CLOSING)) {
      for (uint32_t j = 0; j < f->mf.nchunks; j++)
        ws_bitfield_set(&rel->have, (uint32_t)m->files[k].first_chunk + j);
    }
  }
  if (t->tl != NULL &&
      peer_trackers_track(t->tl, rel->digest.b, rel->total, &rel->have, uri,
                          WS_SWARM_LEECH) != 0)
    WS_LOGW("release %s: tracker does not take it (too many releases)", ds);
  rel_announce_all(rel);
  return 1;
}

void swarm_rel_ready(peer_swarm_rels_t *t, const ws_hash_t *digest,
                     ws_manifest_t *m, char *mbytes, size_t mlen) {
  peer_swarm_rel_t *rel = swarm_rel_find(t, digest->b);
  if (rel == NULL)
    rel = swarm_rel_new(t, digest);
  if (rel == NULL || rel->state == PEER_SWARM_REL_READY)
    goto free_m;
  if (rel_set_manifest(rel, m, mbytes, mlen) != 0) {
    swarm_rel_free(rel);
    goto free_m;
  }
  for (peer_neighbor_t *n = t->nbrs->head; n != NULL; n = n->next)
    peer_requests_forget_rel(n, rel);
  for (uint32_t k = 0; k < rel->nfiles; k++) { /* the tracker's report */
    /* A shared file's bytes count for the release that fetched it. */
    if (rel->files[k] != NULL &&
        peer_file_counts_for(rel->files[k], &rel->digest)) {
      rel->rep_s3 += rel->files[k]->bytes_from_s3;
      rel->rep_peers += rel->files[k]->bytes_from_peers;
    }
  }
  rel->files = NULL;
  rel->nfiles = 0;
  rel->mcb = NULL;
  rel->nleases = 0;
  swarm_rel_set_state(rel, PEER_SWARM_REL_READY);
  for (uint32_t g = 0; g < rel->total; g++)
    rel_have(rel, g); /* whatever the neighbours have not heard yet */
  if (t->tl != NULL)
    swarm_rel_tracker_rc("done", peer_trackers_done(t->tl, rel->digest.b));
  rel_announce_all(rel);
  return;
free_m:
  ws_manifest_free(m);
  free(mbytes);
}

void swarm_rel_gone(peer_swarm_rels_t *t, const ws_hash_t *digest) {
  peer_swarm_rel_t *rel = swarm_rel_find(t, digest->b);
  if (rel != NULL)
    swarm_rel_free(rel);
}

void swarm_rel_add_ready(peer_swarm_rels_t *t, ws_manifest_t *m, char *bytes,
                         size_t len) {
  peer_swarm_rel_t *rel = NULL;
  if (swarm_rel_find(t, m->digest.b) != NULL)
    goto free_m; /* listed twice: keep the first */
  rel = swarm_rel_new(t, &m->digest);
  if (rel == NULL)
    goto free_m;
  if (rel_set_manifest(rel, m, bytes, len) != 0) {
    swarm_rel_free(rel);
    goto free_m;
  }
  swarm_rel_set_state(rel, PEER_SWARM_REL_READY);
  for (uint32_t g = 0; g < rel->total; g++)
    ws_bitfield_set(&rel->have, g);
  if (t->tl != NULL)
    swarm_rel_tracker_rc("track",
                         peer_trackers_track(t->tl, rel->digest.b, rel->total,
                                             &rel->have, NULL, WS_SWARM_SEED));
  rel_announce_all(rel);
  return;
free_m:
  ws_manifest_free(m);
  free(bytes);
}

typedef struct {
  peer_swarm_rels_t *t;
  ws_hash_t digest;
  char *bytes;
  size_t len;
  ws_manifest_t *m;
  int status;
} rel_load_t;

/* [worker] */
static void rel_load_work(void *arg) {
  rel_load_t *job = arg;
  job->status = ws_store_release_lookup(job->t->ctx->store, &job->digest,
                                        &job->bytes, &job->len);
  if (job->status == 0)
    job->status =
        ws_manifest_parse(job->bytes, job->len, NULL, &job->m, NULL, 0);
}

static void rel_load_after(void *arg, int status) {
  rel_load_t *job = arg;
  peer_swarm_rels_t *t = job->t;
  int rc = status != 0 ? status : job->status;
  if (rc == 0 && !t->stopping) {
    swarm_rel_add_ready(t, job->m, job->bytes, job->len); /* takes both */
  } else {
    if (rc != 0)
      WS_LOGW("seed: cannot read the manifest back: %s", ws_strerror(rc));
    ws_manifest_free(job->m);
    free(job->bytes);
  }
  free(job);
}

void swarm_rel_seed_load(peer_swarm_rels_t *t, const ws_hash_t *digest) {
  if (swarm_rel_find(t, digest->b) != NULL)
    return;
  rel_load_t *job = calloc(1, sizeof(*job));
  if (job == NULL)
    return;
  job->t = t;
  job->digest = *digest;
  if (peer_ctx_queue(t->ctx, rel_load_work, rel_load_after, job) != 0)
    free(job);
}

/* ---- leases ------------------------------------------------------------- */

void swarm_rel_leases_add(peer_swarm_rel_t *rel, const uint32_t *chunks,
                          uint32_t n, uint32_t ttl_ms) {
  uint64_t exp = uv_now(rel->t->ctx->loop) + ttl_ms;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t g = chunks[i];
    if (g >= rel->total || ws_bitfield_test(&rel->have, g))
      continue;
    uint32_t k = 0;
    while (k < rel->nleases && rel->leases[k].chunk != g)
      k++;
    if (k == rel->nleases) {
      if (rel->nleases == PEER_LEASES_MAX)
        continue;
      rel->nleases++;
    }
    rel->leases[k].chunk = g;
    rel->leases[k].expires_ms = exp;
  }
}

void swarm_rel_leases_renew(peer_swarm_rel_t *rel) {
  uint32_t chunks[PEER_LEASES_MAX];
  uint32_t n = 0;
  if (rel->t->tl == NULL || rel->state != PEER_SWARM_REL_FETCHING)
    return;
  for (uint32_t i = 0; i < rel->nleases; i++) {
    if (!ws_bitfield_test(&rel->have, rel->leases[i].chunk))
      chunks[n++] = rel->leases[i].chunk;
  }
  if (n > 0)
    swarm_rel_tracker_rc("lease_renew",
                         peer_trackers_lease_renew(rel->t->tl, rel->digest.b,
                                                   chunks, n, NULL, 0));
}

/* ---- what we can upload -------------------------------------------------- */

int swarm_rel_arriving(const peer_swarm_rel_t *rel, const peer_file_t *file,
                       uint32_t j, uint64_t *written) {
  const peer_downloads_t *dls = rel->t->nbrs->downloads;
  return peer_origin_live(rel->t->origin, file, j, written) ||
         (dls != NULL && peer_downloads_live(dls, file, j, written));
}

int swarm_rel_chunk_live(peer_swarm_rel_t *rel, uint32_t g, peer_file_t **file,
                         uint32_t *jout, int *fd, uint64_t *off,
                         uint32_t *len) {
  uint32_t k, j;
  uint64_t written;
  if (rel->state != PEER_SWARM_REL_FETCHING || rel->files == NULL ||
      ws_manifest_locate(rel->m, g, &k, &j) != 0)
    return WS_ENOTFOUND;
  peer_file_t *f = rel->files[k];
  if (f == NULL || f->state != PEER_FILE_FETCHING || f->pf == NULL ||
      f->mf.chunks == NULL || f->chunk_state[j] != PEER_CHUNK_INFLIGHT ||
      !swarm_rel_arriving(rel, f, j, &written))
    return WS_ENOTFOUND;
  if (fd == NULL)
    return 0; /* asked only whether */
  int nfd = ws_store_file_dup_fd(f->pf);
  if (nfd < 0)
    return nfd;
  peer_file_ref(f);
  *file = f;
  *jout = j;
  *fd = nfd;
  *off = (uint64_t)j * rel->m->chunk_size;
  *len = ws_mfile_chunk_len(rel->m, &rel->m->files[k], j);
  return 0;
}

int swarm_rel_chunk_source(peer_swarm_rel_t *rel, uint32_t g, ws_hash_t *sha256,
                           int *fd, uint64_t *off, uint32_t *len) {
  uint32_t k, j;
  const ws_manifest_t *m = rel->m;
  if (rel->state == PEER_SWARM_REL_RESOLVING || m == NULL ||
      ws_manifest_locate(m, g, &k, &j) != 0)
    return WS_ENOTFOUND;
  const ws_mfile_t *mf = &m->files[k];
  *off = (uint64_t)j * m->chunk_size;
  *len = ws_mfile_chunk_len(m, mf, j);
  if (rel->state == PEER_SWARM_REL_READY) {
    *sha256 = mf->sha256;
    return 1;
  }
  peer_file_t *f = rel->files != NULL ? rel->files[k] : NULL;
  if (f == NULL)
    return WS_ENOTFOUND;
  if (f->state == PEER_FILE_COMPLETE || f->state == PEER_FILE_CLOSING) {
    *sha256 = mf->sha256;
    return 1;
  }
  /* Only a chunk whose hash checked: never bytes still being written, and
   * nothing of a whole-file manifest before the file verified. */
  if ((f->state != PEER_FILE_FETCHING && f->state != PEER_FILE_FINISHING) ||
      f->pf == NULL || f->mf.chunks == NULL ||
      f->chunk_state[j] != PEER_CHUNK_DONE)
    return WS_ENOTFOUND;
  /* The file handle may close (file complete) while the upload reads: the
   * upload reads its own descriptor. dup is no disk I/O. The file may also
   * have been published since its state was read here (finishing runs on
   * a worker): then its blob has the chunk. */
  int nfd = ws_store_file_dup_fd(f->pf);
  if (nfd == WS_ENOTFOUND) {
    *sha256 = mf->sha256;
    return 1;
  }
  if (nfd < 0)
    return nfd;
  *fd = nfd;
  return 0;
}

/* ANNOUNCE "pf": the chunk of each single-chunk file we lack, for the
 * tracker to have read from S3 before the rest; our scheduler asks for
 * them first (fetch/file.h tiers), and read last they held every node up
 * at the end. (The first chunks of the large files too measured 3-4 %
 * slower at 48 nodes: docs/benchmarks.md, session 17.) */
static void rel_first_report(peer_swarm_rel_t *rel, ws_announce_t *a) {
  uint32_t n = 0;
  if (rel->state != PEER_SWARM_REL_FETCHING || a->total_chunks != rel->total)
    return;
  for (uint32_t k = 0; k < rel->m->nfiles && n < PEER_FIRST_REPORT_MAX; k++) {
    const ws_mfile_t *mf = &rel->m->files[k];
    if (mf->nchunks == 1 && mf->first_chunk < rel->total &&
        !ws_bitfield_test(&rel->have, (uint32_t)mf->first_chunk))
      rel->first[n++] = (uint32_t)mf->first_chunk;
  }
  a->first = n > 0 ? rel->first : NULL;
  a->n_first = n;
}

void swarm_rels_report(peer_swarm_rels_t *t, const uint8_t *digest,
                       ws_announce_t *a) {
  peer_swarm_rel_t *rel = swarm_rel_find(t, digest);
  if (rel == NULL || rel->m == NULL)
    return;
  swarm_rel_stall_report(rel, a);
  rel_first_report(rel, a);
  a->size_bytes = rel->m->total_size;
  a->s3_bytes = rel->rep_s3;
  a->peer_bytes = rel->rep_peers;
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    const peer_file_t *f = rel->files[k];
    if (f == NULL)
      continue;
    if (peer_file_counts_for(f, &rel->digest)) {
      a->s3_bytes += f->bytes_from_s3;
      a->peer_bytes += f->bytes_from_peers;
    }
    /* A failed file no transfer holds is CLOSING already; its error
     * stays. A cancel (daemon stopping) is no failure to show. */
    bool failed = f->state == PEER_FILE_FAILED ||
                  (f->state == PEER_FILE_CLOSING && f->err != 0);
    if (failed && f->err != WS_ECANCELED && a->err[0] == '\0') {
      /* The file's message starts with its name (peer_file_fail). A name
       * of up to 255 bytes and its error do not always fit: the message is
       * cut at the end, and says so. */
      int len = f->errmsg[0] != '\0'
                    ? snprintf(a->err, sizeof(a->err), "file %s", f->errmsg)
                    : snprintf(a->err, sizeof(a->err), "file %s: %s",
                               f->mf.name, ws_strerror(f->err));
      ws_msg_mark_cut(a->err, sizeof(a->err), len);
    }
  }
}
