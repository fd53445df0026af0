/* srel.c - the swarm's record of each release it fetches or seeds (state
 * diagram in swarm.h): our verified have-bitfield, the origin leases the
 * tracker granted, the manifest (asked from neighbours while RESOLVING,
 * kept to seed once READY), and the hooks by which releases and files
 * report progress (HAVE to neighbours and tracker).
 *
 * Chunk numbering on the wire is per release: global chunk g of a release
 * is chunk g - first_chunk of the manifest file holding it. Files are
 * shared between releases by sha256, so one verified chunk may be HAVE in
 * several releases.
 *
 * Owns: the records, their bitfields, and READY records' manifests.
 * Borrows: a FETCHING record's release, manifest and files.
 * Thread: loop thread.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/swarm-int.h" /* first: see its note on ws_manifest_t */
#include "fetch/origin.h"
#include "ws_log.h"

static const char *srel_state_name(peer_srel_state_t st) {
  static const char *const names[PEER_SREL_STATE_LAST] = {"resolving",
                                                          "fetching", "ready"};
  return st < PEER_SREL_STATE_LAST ? names[st] : "?";
}

static void srel_set_state(peer_srel_t *srel, peer_srel_state_t to) {
  static const uint8_t legal[PEER_SREL_STATE_LAST][PEER_SREL_STATE_LAST] = {
      [PEER_SREL_RESOLVING] = {[PEER_SREL_FETCHING] = 1, [PEER_SREL_READY] = 1},
      [PEER_SREL_FETCHING] = {[PEER_SREL_READY] = 1},
  };
  assert(legal[srel->state][to]);
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&srel->digest, ds);
  WS_LOGD("swarm %s: %s -> %s", ds, srel_state_name(srel->state),
          srel_state_name(to));
  srel->state = to;
}

/* Tracker calls whose failure changes nothing here (no link: the next
 * connection re-announces the full state) are logged at debug level. */
static void srel_trk_rc(const peer_srel_t *srel, const char *what, int rc) {
  if (rc != 0)
    WS_LOGD("tracker %s: %s", what, ws_strerror(rc));
}

peer_srel_t *peer_srel_find(peer_swarm_t *s, const uint8_t *digest) {
  for (peer_srel_t *r = s->srels; r != NULL; r = r->next) {
    if (memcmp(r->digest.b, digest, WS_PROTO_DIGEST_LEN) == 0)
      return r;
  }
  return NULL;
}

static peer_srel_t *srel_new(peer_swarm_t *s, const ws_hash_t *digest,
                             peer_srel_state_t state) {
  peer_srel_t *srel = calloc(1, sizeof(*srel));
  if (srel == NULL)
    return NULL;
  srel->s = s;
  srel->digest = *digest;
  srel->state = state;
  srel->next = s->srels;
  s->srels = srel;
  s->nsrels++;
  return srel;
}

void peer_srel_free(peer_srel_t *srel) {
  peer_swarm_t *s = srel->s;
  peer_srel_t **pp = &s->srels;
  while (*pp != NULL && *pp != srel)
    pp = &(*pp)->next;
  assert(*pp == srel);
  *pp = srel->next;
  s->nsrels--;
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next)
    peer_nbr_forget_srel(n, srel);
  if (s->tc != NULL)
    srel_trk_rc(srel, "untrack", trk_client_untrack(s->tc, srel->digest.b));
  ws_bitfield_free(&srel->have);
  if (srel->state == PEER_SREL_READY) {
    ws_manifest_free(srel->m);
    free(srel->mbytes);
  }
  free(srel);
}

/* Sizes the have-bitfield for m. 0 or an error (release not shared). */
static int srel_set_manifest(peer_srel_t *srel, ws_manifest_t *m, char *bytes,
                             size_t len) {
  if (m->total_chunks == 0 || m->total_chunks > WS_MAX_TOTAL_CHUNKS)
    return WS_ELIMIT;
  if (srel->have.nbits != m->total_chunks) {
    ws_bitfield_free(&srel->have);
    int rc = ws_bitfield_init(&srel->have, (uint32_t)m->total_chunks);
    if (rc != 0)
      return rc;
  }
  srel->m = m;
  srel->mbytes = bytes;
  srel->mlen = len;
  srel->total = (uint32_t)m->total_chunks;
  return 0;
}

static void srel_announce_all(peer_srel_t *srel) {
  for (peer_nbr_t *n = srel->s->nbrs; n != NULL; n = n->next)
    peer_nbr_send_bitfield(n, srel);
}

/* ---- HAVE --------------------------------------------------------------- */

static void srel_have(peer_srel_t *srel, uint32_t g) {
  peer_swarm_t *s = srel->s;
  if (g >= srel->total || ws_bitfield_test(&srel->have, g))
    return;
  ws_bitfield_set(&srel->have, g);
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memcpy(m.u.have.digest, srel->digest.b, WS_PROTO_DIGEST_LEN);
  m.u.have.chunk = g;
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    peer_nbr_rel_t *r = peer_nbr_rel_find(n, srel->digest.b);
    if (n->state == PEER_NBR_READY && r != NULL && r->sent_ours)
      (void)peer_nbr_send(n, &m); /* a full queue drops one HAVE */
  }
  if (s->tc != NULL)
    srel_trk_rc(srel, "have", trk_client_have(s->tc, srel->digest.b, g));
  for (uint32_t i = 0; i < srel->nleases; i++) {
    if (srel->leases[i].chunk == g) {
      srel->leases[i] = srel->leases[--srel->nleases];
      break;
    }
  }
}

/* Calls fn for each FETCHING record listing file, with the file's first
 * global chunk there. */
static void srel_each_with_file(peer_swarm_t *s, const peer_file_t *file,
                                void (*fn)(peer_srel_t *, uint32_t, void *),
                                void *arg) {
  for (peer_srel_t *srel = s->srels; srel != NULL; srel = srel->next) {
    const peer_release_t *rel = srel->rel;
    if (srel->state != PEER_SREL_FETCHING || rel->files == NULL)
      continue;
    for (uint32_t k = 0; k < rel->nfiles; k++) {
      if (rel->files[k] == file)
        fn(srel, (uint32_t)srel->m->files[k].first_chunk, arg);
    }
  }
}

static void srel_have_one(peer_srel_t *srel, uint32_t first, void *arg) {
  srel_have(srel, first + *(const uint32_t *)arg);
}

static void srel_have_file(peer_srel_t *srel, uint32_t first, void *arg) {
  const peer_file_t *file = arg;
  for (uint32_t j = 0; j < file->mf.nchunks; j++)
    srel_have(srel, first + j);
}

void peer_swarm_chunk_done(peer_swarm_t *s, peer_file_t *file, uint32_t j,
                           peer_source_t src) {
  /* Whole-file manifests: a chunk is only trusted once the file is. */
  if (file->mf.chunks == NULL)
    return;
  srel_each_with_file(s, file, srel_have_one, &j);
}

/* HAVE "p" for global chunk g to n, when n takes them and lacks g. */
static void srel_send_live(peer_srel_t *srel, peer_nbr_t *n, uint32_t g) {
  peer_nbr_rel_t *r = peer_nbr_rel_find(n, srel->digest.b);
  if (n->state != PEER_NBR_READY || r == NULL || !r->sent_ours || !r->live_ok ||
      g >= srel->total || ws_bitfield_test(&srel->have, g) ||
      (g < r->have.nbits && ws_bitfield_test(&r->have, g)))
    return;
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memcpy(m.u.have.digest, srel->digest.b, WS_PROTO_DIGEST_LEN);
  m.u.have.chunk = g;
  m.u.have.live = true;
  (void)peer_nbr_send(n, &m); /* a full queue drops one HAVE */
}

static void srel_live_one(peer_srel_t *srel, uint32_t first, void *arg) {
  for (peer_nbr_t *n = srel->s->nbrs; n != NULL; n = n->next)
    srel_send_live(srel, n, first + *(const uint32_t *)arg);
}

void peer_srel_live_haves(peer_srel_t *srel, peer_nbr_t *n) {
  peer_file_t *files[PEER_ORIGIN_LIST_MAX];
  uint32_t js[PEER_ORIGIN_LIST_MAX];
  if (srel->state != PEER_SREL_FETCHING || srel->rel->files == NULL)
    return;
  unsigned k =
      peer_origin_list(srel->s->d->origin, files, js, PEER_ORIGIN_LIST_MAX);
  for (unsigned i = 0; i < k; i++) {
    for (uint32_t f = 0; f < srel->rel->nfiles; f++) {
      if (srel->rel->files[f] == files[i] && files[i]->mf.chunks != NULL)
        srel_send_live(srel, n,
                       (uint32_t)srel->m->files[f].first_chunk + js[i]);
    }
  }
}

void peer_swarm_chunk_live(peer_swarm_t *s, peer_file_t *file, uint32_t j) {
  /* Whole-file manifests: nothing is served before the file verified. */
  if (file->mf.chunks == NULL || s->stopping)
    return;
  srel_each_with_file(s, file, srel_live_one, &j);
}

void peer_swarm_chunk_progress(peer_swarm_t *s, peer_file_t *file, uint32_t j) {
  peer_serve_live_progress(s, file, j);
}

void peer_swarm_file_complete(peer_swarm_t *s, peer_file_t *file) {
  srel_each_with_file(s, file, srel_have_file, file);
}

/* ---- releases ----------------------------------------------------------- */

void peer_swarm_rel_fetching(peer_swarm_t *s, peer_release_t *rel) {
  char *mbytes = rel->mbytes;
  peer_srel_t *srel = peer_srel_find(s, rel->digest.b);
  if (srel != NULL && srel->state != PEER_SREL_RESOLVING)
    return; /* READY already: the cache had it */
  if (srel == NULL)
    srel = srel_new(s, &rel->digest, PEER_SREL_RESOLVING);
  if (srel == NULL || srel_set_manifest(srel, rel->m, mbytes, rel->mlen) != 0) {
    WS_LOGW("release %s: not shared with the swarm (%s); S3 only",
            rel->digest_str, srel == NULL ? "out of memory" : "chunk count");
    if (srel != NULL)
      peer_srel_free(srel);
    return;
  }
  srel->rel = rel;
  srel->mdone = true;
  srel->masked = NULL;
  srel_set_state(srel, PEER_SREL_FETCHING);
  /* Files complete already (shared with a release in the cache). */
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    peer_file_t *f = rel->files[k];
    if (f != NULL &&
        (f->state == PEER_FILE_COMPLETE || f->state == PEER_FILE_CLOSING)) {
      for (uint32_t j = 0; j < f->mf.nchunks; j++)
        ws_bitfield_set(&srel->have,
                        (uint32_t)rel->m->files[k].first_chunk + j);
    }
  }
  if (s->tc != NULL &&
      trk_client_track(s->tc, srel->digest.b, srel->total, &srel->have,
                       rel->uri, WS_SWARM_LEECH) != 0)
    WS_LOGW("release %s: tracker does not take it (too many releases)",
            rel->digest_str);
  srel_announce_all(srel);
  peer_swarm_kick(s);
}

void peer_swarm_rel_ready(peer_swarm_t *s, peer_release_t *rel) {
  peer_srel_t *srel = peer_srel_find(s, rel->digest.b);
  if (srel == NULL) {
    srel = srel_new(s, &rel->digest, PEER_SREL_RESOLVING);
    if (srel == NULL)
      return;
  } else if (srel->state == PEER_SREL_READY) {
    return;
  }
  if (srel_set_manifest(srel, rel->m, rel->mbytes, rel->mlen) != 0) {
    peer_srel_free(srel);
    return;
  }
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next)
    peer_nbr_forget_srel(n, srel);
  rel->m = NULL; /* taken */
  rel->mbytes = NULL;
  srel->rel = NULL;
  srel->nleases = 0;
  srel_set_state(srel, PEER_SREL_READY);
  for (uint32_t g = 0; g < srel->total; g++)
    srel_have(srel, g); /* whatever the neighbours have not heard yet */
  if (s->tc != NULL)
    srel_trk_rc(srel, "done", trk_client_done(s->tc, srel->digest.b));
  srel_announce_all(srel);
}

void peer_swarm_rel_gone(peer_swarm_t *s, peer_release_t *rel) {
  if (!rel->digest_known)
    return;
  peer_srel_t *srel = peer_srel_find(s, rel->digest.b);
  if (srel == NULL)
    return;
  /* A record that is this release's, or the seed record of it. */
  if (srel->rel == rel ||
      (srel->state == PEER_SREL_READY && rel->state == PEER_REL_READY))
    peer_srel_free(srel);
}

void peer_swarm_add_ready(peer_swarm_t *s, ws_manifest_t *m, char *bytes,
                          size_t len) {
  peer_srel_t *srel = NULL;
  if (peer_srel_find(s, m->digest.b) != NULL)
    goto free_m; /* listed twice: keep the first */
  srel = srel_new(s, &m->digest, PEER_SREL_RESOLVING);
  if (srel == NULL)
    goto free_m;
  if (srel_set_manifest(srel, m, bytes, len) != 0) {
    peer_srel_free(srel);
    goto free_m;
  }
  srel_set_state(srel, PEER_SREL_READY);
  for (uint32_t g = 0; g < srel->total; g++)
    ws_bitfield_set(&srel->have, g);
  if (s->tc != NULL)
    srel_trk_rc(srel, "track",
                trk_client_track(s->tc, srel->digest.b, srel->total,
                                 &srel->have, NULL, WS_SWARM_SEED));
  srel_announce_all(srel);
  return;
free_m:
  ws_manifest_free(m);
  free(bytes);
}

typedef struct {
  peer_daemon_t *d;
  ws_hash_t digest;
  char *bytes;
  size_t len;
  ws_manifest_t *m;
  int status;
} srel_load_t;

/* [worker] */
static void srel_load_work(void *arg) {
  srel_load_t *job = arg;
  job->status = ws_store_release_lookup(job->d->store, &job->digest,
                                        &job->bytes, &job->len);
  if (job->status == 0)
    job->status =
        ws_manifest_parse(job->bytes, job->len, NULL, &job->m, NULL, 0);
}

static void srel_load_after(void *arg, int status) {
  srel_load_t *job = arg;
  peer_swarm_t *s = job->d->swarm;
  int rc = status != 0 ? status : job->status;
  if (rc == 0 && s != NULL && !s->stopping) {
    peer_swarm_add_ready(s, job->m, job->bytes, job->len); /* takes both */
  } else {
    if (rc != 0)
      WS_LOGW("seed: cannot read the manifest back: %s", ws_strerror(rc));
    ws_manifest_free(job->m);
    free(job->bytes);
  }
  free(job);
}

void peer_swarm_release_ready(peer_daemon_t *d, peer_release_t *rel) {
  if (d->swarm == NULL || !rel->digest_known || rel->state != PEER_REL_READY ||
      peer_srel_find(d->swarm, rel->digest.b) != NULL)
    return;
  srel_load_t *job = calloc(1, sizeof(*job));
  if (job == NULL)
    return;
  job->d = d;
  job->digest = rel->digest;
  if (peer_daemon_queue(d, srel_load_work, srel_load_after, job) != 0)
    free(job);
}

/* ---- manifests from neighbours ----------------------------------------- */

static void srel_manifest_answer(peer_srel_t *srel, char *bytes, size_t len,
                                 const char *node_id) {
  peer_release_t *rel = srel->rel;
  srel->mdone = true;
  srel->masked = NULL;
  peer_release_manifest_peer(rel, bytes, len, node_id);
}

void peer_srel_manifest_try(peer_srel_t *srel, uint64_t now_ms) {
  peer_swarm_t *s = srel->s;
  if (srel->state != PEER_SREL_RESOLVING || srel->mdone)
    return;
  if (srel->masked != NULL) {
    peer_nbr_t *a = srel->masked;
    if (now_ms - srel->mask_ms < PEER_MANIFEST_ASK_MS ||
        a->in == PEER_NBR_IN_MANIFEST)
      return; /* asked lately, or its answer is arriving */
    WS_LOGW("release %s: nbr#%llu %s sent no manifest in %u ms; not asking "
            "it again",
            srel->rel->digest_str, (unsigned long long)a->id, a->node_id,
            PEER_MANIFEST_ASK_MS);
    peer_nbr_rel_t *ar = peer_nbr_rel_find(a, srel->digest.b);
    if (ar != NULL)
      ar->mani_refused = true;
    srel->masked = NULL;
  }
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    peer_nbr_rel_t *r = peer_nbr_rel_find(n, srel->digest.b);
    if (n->state != PEER_NBR_READY || r == NULL || r->have.nbits == 0 ||
        r->mani_refused)
      continue;
    ws_msg_t m;
    memset(&m, 0, sizeof(m));
    m.type = WS_MSG_MANIFEST_REQ;
    memcpy(m.u.manifest_req.digest, srel->digest.b, WS_PROTO_DIGEST_LEN);
    if (peer_nbr_send(n, &m) != 0)
      continue;
    srel->masked = n;
    srel->mask_ms = now_ms;
    return;
  }
  uint64_t wait = srel->rel->uri != NULL ? PEER_MANIFEST_PEER_TRY_MS
                                         : PEER_MANIFEST_WAIT_MS;
  if (now_ms - srel->mwait_since_ms >= wait)
    srel_manifest_answer(srel, NULL, 0, NULL);
}

void peer_srel_manifest_no_holders(peer_srel_t *srel) {
  /* The tracker knows nobody in this release's swarm: no neighbour will
   * have its manifest, so waiting out PEER_MANIFEST_PEER_TRY_MS only delays
   * a cluster-wide cold start. */
  if (srel->state == PEER_SREL_RESOLVING && !srel->mdone &&
      srel->masked == NULL && srel->rel != NULL && srel->rel->uri != NULL)
    srel_manifest_answer(srel, NULL, 0, NULL);
}

int peer_swarm_manifest_fetch(peer_swarm_t *s, peer_release_t *rel) {
  if (s->stopping)
    return WS_ECANCELED;
  peer_srel_t *srel = peer_srel_find(s, rel->digest.b);
  if (srel != NULL && srel->state != PEER_SREL_RESOLVING)
    return WS_EBUSY; /* cannot happen: a known release is not resolving */
  if (srel == NULL) {
    srel = srel_new(s, &rel->digest, PEER_SREL_RESOLVING);
    if (srel == NULL)
      return -ENOMEM;
  }
  srel->rel = rel;
  srel->mdone = false;
  srel->masked = NULL;
  srel->mwait_since_ms = uv_now(&s->d->loop);
  /* Announce the digest without a chunk count: the tracker answers with
   * peers that have it. */
  if (s->tc != NULL)
    srel_trk_rc(srel, "track",
                trk_client_track(s->tc, srel->digest.b, 0, NULL, rel->uri,
                                 WS_SWARM_LEECH));
  peer_srel_manifest_try(srel, srel->mwait_since_ms);
  /* The wait for a neighbour ends on the tick: make it come in time. */
  if (rel->uri != NULL)
    peer_swarm_tick_soon(s, PEER_MANIFEST_PEER_TRY_MS);
  return 0;
}

void peer_swarm_manifest_got(peer_swarm_t *s, peer_nbr_t *n,
                             const ws_hash_t *digest, char *bytes, size_t len) {
  peer_srel_t *srel = peer_srel_find(s, digest->b);
  if (srel == NULL || srel->state != PEER_SREL_RESOLVING || srel->mdone ||
      srel->masked != n) {
    free(bytes);
    return;
  }
  srel->masked = NULL;
  if (bytes == NULL) {
    peer_nbr_rel_t *r = peer_nbr_rel_find(n, digest->b);
    if (r != NULL)
      r->mani_refused = true;
    peer_srel_manifest_try(srel, uv_now(&s->d->loop));
    return;
  }
  s->d->metrics.manifests_from_peers++;
  srel_manifest_answer(srel, bytes, len, n->node_id);
}

/* ---- leases ------------------------------------------------------------- */

void peer_srel_leases_add(peer_srel_t *srel, const uint32_t *chunks, uint32_t n,
                          uint32_t ttl_ms) {
  uint64_t exp = uv_now(&srel->s->d->loop) + ttl_ms;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t g = chunks[i];
    if (g >= srel->total || ws_bitfield_test(&srel->have, g))
      continue;
    uint32_t k = 0;
    while (k < srel->nleases && srel->leases[k].chunk != g)
      k++;
    if (k == srel->nleases) {
      if (srel->nleases == PEER_LEASES_MAX)
        continue;
      srel->nleases++;
    }
    srel->leases[k].chunk = g;
    srel->leases[k].expires_ms = exp;
  }
}

void peer_srel_leases_renew(peer_srel_t *srel) {
  uint32_t chunks[PEER_LEASES_MAX];
  uint32_t n = 0;
  if (srel->s->tc == NULL || srel->state != PEER_SREL_FETCHING)
    return;
  for (uint32_t i = 0; i < srel->nleases; i++) {
    if (!ws_bitfield_test(&srel->have, srel->leases[i].chunk))
      chunks[n++] = srel->leases[i].chunk;
  }
  if (n > 0)
    srel_trk_rc(srel, "lease_renew",
                trk_client_lease_renew(srel->s->tc, srel->digest.b, chunks, n,
                                       NULL, 0));
}

/* ---- serving source ------------------------------------------------------ */

int peer_srel_chunk_live(peer_srel_t *srel, uint32_t g, peer_file_t **file,
                         uint32_t *jout, int *fd, uint64_t *off,
                         uint32_t *len) {
  uint32_t k, j;
  uint64_t written;
  if (srel->state != PEER_SREL_FETCHING || srel->rel->files == NULL ||
      ws_manifest_locate(srel->m, g, &k, &j) != 0)
    return WS_ENOTFOUND;
  peer_file_t *f = srel->rel->files[k];
  if (f == NULL || f->state != PEER_FILE_FETCHING || f->pf == NULL ||
      f->mf.chunks == NULL || f->chunk_state[j] != PEER_CHUNK_INFLIGHT ||
      !peer_origin_live(srel->s->d->origin, f, j, &written))
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
  *off = (uint64_t)j * srel->m->chunk_size;
  *len = ws_mfile_chunk_len(srel->m, &srel->m->files[k], j);
  return 0;
}

int peer_srel_chunk_source(peer_srel_t *srel, uint32_t g, ws_hash_t *sha256,
                           int *fd, uint64_t *off, uint32_t *len) {
  uint32_t k, j;
  const ws_manifest_t *m = srel->m;
  if (srel->state == PEER_SREL_RESOLVING || m == NULL ||
      ws_manifest_locate(m, g, &k, &j) != 0)
    return WS_ENOTFOUND;
  const ws_mfile_t *mf = &m->files[k];
  *off = (uint64_t)j * m->chunk_size;
  *len = ws_mfile_chunk_len(m, mf, j);
  if (srel->state == PEER_SREL_READY) {
    *sha256 = mf->sha256;
    return 1;
  }
  peer_file_t *f = srel->rel->files != NULL ? srel->rel->files[k] : NULL;
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
