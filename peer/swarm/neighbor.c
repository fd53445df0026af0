/* nbr.c - one neighbour: an authenticated wire_conn to another p2pd, the
 * have-bitfields it announced, the chunk requests we have out to it, and
 * the dispatch of what it sends (its requests go to serve.c, chunk bytes
 * to recv.c, manifests to swarm.c).
 *
 *   CONNECTING --both AUTHs checked--> READY --goodbye/close--> CLOSING
 *   CONNECTING --handshake failed/banned/duplicate--> CLOSING
 *   CLOSING --wire_conn on_close--> timer closed --> freed
 *
 * Nothing reaches a neighbour before its handshake proved the cluster key
 * (wire_conn sends only HELLO/AUTH until then), so a client without the key
 * learns no digest, no chunk and no peer.
 *
 * Caps: PEER_NBR_RELEASES_MAX bitfields (each at most WS_MAX_TOTAL_CHUNKS
 * bits, checked by the decoder), PEER_PIPELINE_DEPTH requests out,
 * PEER_SERVE_QUEUE_MAX requests queued from it, manifests only when asked
 * and only up to PEER_MANIFEST_MAX_BYTES.
 *
 * Owns: the wire_conn (until its on_close), the timer, the bitfields, the
 * request slots (each holding a file reference), the manifest buffer.
 * Thread: loop thread.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/swarm-int.h"
#include "ws_log.h"

static const char *nbr_state_name(peer_nbr_state_t st) {
  static const char *const names[PEER_NBR_STATE_LAST] = {"connecting", "ready",
                                                         "closing"};
  return st < PEER_NBR_STATE_LAST ? names[st] : "?";
}

static void nbr_set_state(peer_nbr_t *n, peer_nbr_state_t to) {
  static const uint8_t legal[PEER_NBR_STATE_LAST][PEER_NBR_STATE_LAST] = {
      [PEER_NBR_CONNECTING] = {[PEER_NBR_READY] = 1, [PEER_NBR_CLOSING] = 1},
      [PEER_NBR_READY] = {[PEER_NBR_CLOSING] = 1},
  };
  assert(legal[n->state][to]);
  WS_LOGD("nbr#%llu %s: %s -> %s", (unsigned long long)n->id, n->node_id,
          nbr_state_name(n->state), nbr_state_name(to));
  if (n->state == PEER_NBR_READY)
    n->s->nready--;
  if (n->state == PEER_NBR_CONNECTING && !n->initiator)
    n->s->npreauth_in--;
  if (to == PEER_NBR_READY)
    n->s->nready++;
  n->state = to;
}

/* ---- small helpers ------------------------------------------------------ */

peer_nbr_rel_t *peer_nbr_rel_find(peer_nbr_t *n, const uint8_t *digest) {
  for (uint32_t i = 0; i < n->nrels; i++) {
    if (memcmp(n->rels[i].digest, digest, WS_PROTO_DIGEST_LEN) == 0)
      return &n->rels[i];
  }
  return NULL;
}

static peer_nbr_rel_t *nbr_rel_get(peer_nbr_t *n, const uint8_t *digest) {
  peer_nbr_rel_t *r = peer_nbr_rel_find(n, digest);
  if (r != NULL || n->nrels == PEER_NBR_RELEASES_MAX)
    return r;
  r = &n->rels[n->nrels++];
  memset(r, 0, sizeof(*r));
  memcpy(r->digest, digest, WS_PROTO_DIGEST_LEN);
  return r;
}

int peer_nbr_has(peer_nbr_t *n, const peer_srel_t *srel, uint32_t g) {
  peer_nbr_rel_t *r = peer_nbr_rel_find(n, srel->digest.b);
  return r != NULL && r->have.nbits == srel->total &&
         ws_bitfield_test(&r->have, g);
}

int peer_nbr_rel_live(const peer_nbr_rel_t *r, uint32_t g) {
  for (uint32_t i = 0; i < r->nlive; i++) {
    if (r->live[i] == g)
      return 1;
  }
  return 0;
}

/* Forgets g as arriving at r (a plain HAVE, a refusal). */
static void nbr_live_forget(peer_nbr_rel_t *r, uint32_t g) {
  for (uint32_t i = 0; i < r->nlive; i++) {
    if (r->live[i] == g) {
      r->live[i] = r->live[--r->nlive];
      r->live_next = r->nlive;
      return;
    }
  }
}

int peer_nbr_send(peer_nbr_t *n, const ws_msg_t *m) {
  if (n->state != PEER_NBR_READY || n->c == NULL || !wire_conn_is_open(n->c))
    return -ENOTCONN;
  int rc = wire_conn_send(n->c, m);
  if (rc == WS_ELIMIT) {
    n->want_drain = true;
  } else if (rc != 0) {
    WS_LOGW("nbr#%llu %s: send %s: %s", (unsigned long long)n->id, n->node_id,
            ws_msg_type_name(m->type), ws_strerror(rc));
    peer_nbr_close(n, WS_BYE_PROTOCOL);
  }
  return rc;
}

void peer_nbr_send_bitfield(peer_nbr_t *n, peer_srel_t *srel) {
  if (n->state != PEER_NBR_READY || srel->total == 0)
    return;
  peer_nbr_rel_t *r = nbr_rel_get(n, srel->digest.b);
  if (r != NULL && r->sent_ours)
    return;
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_BITFIELD;
  memcpy(m.u.bitfield.digest, srel->digest.b, WS_PROTO_DIGEST_LEN);
  m.u.bitfield.total_chunks = srel->total;
  m.u.bitfield.bits = srel->have.bits;
  m.u.bitfield.live = true; /* we take HAVE "p" and CHUNK pieces, */
  m.u.bitfield.mux = true;  /* of WS_MUX_MAX chunks at once */
  if (peer_nbr_send(n, &m) == 0 && r != NULL) {
    r->sent_ours = true;
    peer_srel_live_haves(srel, n);
  }
}

void peer_nbr_close(peer_nbr_t *n, ws_bye_reason_t reason) {
  if (n->state == PEER_NBR_CLOSING || n->c == NULL)
    return;
  nbr_set_state(n, PEER_NBR_CLOSING);
  wire_conn_goodbye(n->c, reason);
}

static void nbr_timer_cb(uv_timer_t *t) {
  peer_nbr_t *n = t->data;
  if (n->state != PEER_NBR_READY)
    return;
  if (n->read_paused_rate) {
    uint64_t ms = peer_rate_wait_ms(&n->s->down_rate);
    if (ms > 0) {
      peer_nbr_timer_arm(n, ms);
    } else {
      n->read_paused_rate = false;
      if (!n->read_paused_pool)
        wire_conn_read_resume(n->c);
    }
  }
  peer_serve_next(n);
}

void peer_nbr_timer_arm(peer_nbr_t *n, uint64_t ms) {
  if (n->state == PEER_NBR_CLOSING)
    return;
  if (uv_is_active((uv_handle_t *)&n->timer) &&
      uv_timer_get_due_in(&n->timer) <= ms)
    return;
  uv_timer_start(&n->timer, nbr_timer_cb, ms, 0);
}

void peer_nbr_rx_resume(peer_nbr_t *n) {
  n->read_paused_pool = false;
  if (n->state == PEER_NBR_READY && !n->read_paused_rate)
    wire_conn_read_resume(n->c);
}

/* ---- requests ----------------------------------------------------------- */

/* Gives chunk j of file back when no request or receiver holds it. */
static void nbr_chunk_release(peer_file_t *file, uint32_t j) {
  if (file->nreq[j] == 0 && !file->rx_busy[j] &&
      file->chunk_state[j] == PEER_CHUNK_INFLIGHT)
    peer_file_chunk_done(file, j, PEER_SRC_PEER, WS_ECANCELED, NULL);
}

void peer_nbr_req_drop(peer_nbr_t *n, uint32_t i, int status) {
  peer_req_t *r = &n->reqs[i];
  assert(r->used);
  peer_file_t *file = r->file;
  uint32_t j = r->j;
  r->used = false;
  r->file = NULL;
  n->nreqs--;
  assert(file->nreq[j] > 0);
  file->nreq[j]--;
  if (status != 0)
    WS_LOGD("nbr#%llu %s: request for chunk %u dropped: %s",
            (unsigned long long)n->id, n->node_id, r->g, ws_strerror(status));
  nbr_chunk_release(file, j);
  peer_file_unref(file);
}

/* CANCEL for request (g, req_id) of digest; best effort: if it does not
 * go, whatever still arrives for it is discarded. */
static void nbr_send_cancel(peer_nbr_t *n, const uint8_t *digest, uint32_t g,
                            uint32_t req_id) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CANCEL;
  memcpy(m.u.request.digest, digest, WS_PROTO_DIGEST_LEN);
  m.u.request.chunk = g;
  m.u.request.req_id = req_id;
  (void)peer_nbr_send(n, &m);
}

static void nbr_req_cancel(peer_nbr_t *n, uint32_t i) {
  peer_req_t *r = &n->reqs[i];
  nbr_send_cancel(n, r->srel->digest.b, r->g, r->req_id);
  peer_nbr_req_drop(n, i, WS_ECANCELED);
}

void peer_nbr_cancel_others(peer_swarm_t *s, peer_nbr_t *keep,
                            peer_file_t *file, uint32_t j) {
  for (peer_nbr_t *n = s->nbrs; n != NULL && file->nreq[j] > 0; n = n->next) {
    if (n == keep)
      continue;
    for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
      if (n->reqs[i].used && n->reqs[i].file == file && n->reqs[i].j == j)
        nbr_req_cancel(n, i);
    }
  }
}

void peer_nbr_forget_srel(peer_nbr_t *n, peer_srel_t *srel) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used && n->reqs[i].srel == srel)
      nbr_req_cancel(n, i);
  }
}

/* Chunks it refused a while ago count as its again (the caller kicks). */
static void nbr_unhide(peer_nbr_t *n, uint64_t now_ms) {
  for (uint32_t k = 0; k < n->nrels; k++) {
    peer_nbr_rel_t *r = &n->rels[k];
    for (uint32_t h = 0; h < r->nhidden;) {
      if (r->hidden[h].until_ms > now_ms) {
        h++;
        continue;
      }
      if (r->hidden[h].chunk < r->have.nbits)
        ws_bitfield_set(&r->have, r->hidden[h].chunk);
      r->hidden[h] = r->hidden[--r->nhidden];
    }
  }
}

/* Ends a chunk arriving in pieces (status < 0: given up, the chunk goes
 * back to be fetched again). */
static void nbr_pieces_end(peer_nbr_t *n, peer_pieces_t *pc, int status) {
  peer_rx_t *rx = pc->rx;
  pc->rx = NULL;
  pc->open = false;
  if (n->pc == pc) {
    n->pc = NULL;
    n->rx = NULL;
  }
  peer_rx_end(rx, status);
}

/* Refused chunks stay hidden for a while (see nbr_on_reject); one it only
 * said was arriving is forgotten (its fetch failed; the next holder says
 * so). */
static void nbr_hide(peer_nbr_t *n, const uint8_t *digest, uint32_t g) {
  peer_nbr_rel_t *r = peer_nbr_rel_find(n, digest);
  if (r == NULL || g >= r->have.nbits || !ws_bitfield_test(&r->have, g))
    return;
  ws_bitfield_clear(&r->have, g);
  if (peer_nbr_rel_live(r, g)) {
    nbr_live_forget(r, g);
    return;
  }
  if (r->nhidden < PEER_REJECT_HIDE_MAX) {
    r->hidden[r->nhidden].chunk = g;
    r->hidden[r->nhidden].until_ms =
        uv_now(&n->s->d->loop) + PEER_REJECT_HIDE_MS;
    r->nhidden++;
  }
}

void peer_nbr_tick(peer_nbr_t *n, uint64_t now_ms) {
  nbr_unhide(n, now_ms);
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    peer_pieces_t *pc = &n->pcs[i];
    if (!pc->open || (n->in == PEER_NBR_IN_CHUNK && n->pc == pc) ||
        now_ms - pc->last_ms <= PEER_REQUEST_TIMEOUT_MS)
      continue;
    /* Its origin fetch stalled: ask elsewhere; later pieces are dropped. */
    WS_LOGW("nbr#%llu %s: chunk %u: no piece in %u ms; asking elsewhere",
            (unsigned long long)n->id, n->node_id, pc->g,
            PEER_REQUEST_TIMEOUT_MS);
    nbr_send_cancel(n, pc->digest, pc->g, pc->req_id);
    nbr_hide(n, pc->digest, pc->g);
    nbr_pieces_end(n, pc, -ETIMEDOUT);
  }
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used &&
        now_ms - n->reqs[i].sent_ms > PEER_REQUEST_TIMEOUT_MS) {
      WS_LOGW("nbr#%llu %s: chunk %u not sent in %u ms; asking elsewhere",
              (unsigned long long)n->id, n->node_id, n->reqs[i].g,
              PEER_REQUEST_TIMEOUT_MS);
      nbr_req_cancel(n, i);
    }
  }
}

static int nbr_req_find(peer_nbr_t *n, const uint8_t *digest, uint32_t g,
                        uint32_t req_id) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    peer_req_t *r = &n->reqs[i];
    if (r->used && r->g == g && r->req_id == req_id &&
        memcmp(r->srel->digest.b, digest, WS_PROTO_DIGEST_LEN) == 0)
      return (int)i;
  }
  return -1;
}

/* ---- frames ------------------------------------------------------------- */

static void nbr_on_bitfield(peer_nbr_t *n, const ws_bitfield_msg_t *b) {
  peer_srel_t *srel = peer_srel_find(n->s, b->digest);
  if (srel != NULL && srel->total != 0 && srel->total != b->total_chunks) {
    WS_LOGW("nbr#%llu %s: BITFIELD with %u chunks, the manifest has %u",
            (unsigned long long)n->id, n->node_id, b->total_chunks,
            srel->total);
    return;
  }
  peer_nbr_rel_t *r = nbr_rel_get(n, b->digest);
  if (r == NULL)
    return; /* over the cap: this neighbour is not a source for it */
  ws_bitfield_t bf;
  if (ws_bitfield_from_bytes(&bf, b->total_chunks, b->bits,
                             ws_bitfield_nbytes(b->total_chunks)) != 0) {
    peer_nbr_close(n, WS_BYE_PROTOCOL);
    return;
  }
  ws_bitfield_free(&r->have);
  r->have = bf;
  r->live_ok = b->live;
  r->mux_ok = b->live && b->mux;
  r->nlive = r->live_next = 0;
  r->nhidden = 0; /* its new word on every chunk */
  if (srel != NULL && srel->state != PEER_SREL_RESOLVING) {
    bool sent = r->sent_ours;
    peer_nbr_send_bitfield(n, srel);
    if (sent) /* else peer_nbr_send_bitfield did it */
      peer_srel_live_haves(srel, n);
  }
  peer_swarm_nbr_announced(n->s, n, b->digest);
  peer_picker_fill(n);
}

static void nbr_on_have(peer_nbr_t *n, const ws_have_t *h) {
  peer_nbr_rel_t *r = peer_nbr_rel_find(n, h->digest);
  if (r == NULL || r->have.nbits == 0 || h->chunk >= r->have.nbits)
    return;
  ws_bitfield_set(&r->have, h->chunk);
  if (!h->live) {
    nbr_live_forget(r, h->chunk);
  } else if (!peer_nbr_rel_live(r, h->chunk)) {
    r->live[r->live_next] = h->chunk;
    if (r->nlive < PEER_LIVE_MAX)
      r->nlive++;
    r->live_next = r->nlive < PEER_LIVE_MAX
                       ? r->nlive
                       : (r->live_next + 1) % PEER_LIVE_MAX;
  }
  if (n->nreqs < PEER_PIPELINE_DEPTH)
    peer_picker_fill(n);
}

/* The chunk (c, id) of digest arriving in pieces, or NULL. */
static peer_pieces_t *nbr_pieces_find(peer_nbr_t *n, const uint8_t *digest,
                                      uint32_t g, uint32_t req_id) {
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    peer_pieces_t *pc = &n->pcs[i];
    if (pc->open && pc->g == g && pc->req_id == req_id &&
        memcmp(pc->digest, digest, WS_PROTO_DIGEST_LEN) == 0)
      return pc;
  }
  return NULL;
}

static peer_pieces_t *nbr_pieces_free(peer_nbr_t *n) {
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    if (!n->pcs[i].open)
      return &n->pcs[i];
  }
  return NULL;
}

static void nbr_on_reject(peer_nbr_t *n, const ws_reject_t *rj) {
  peer_pieces_t *pc = nbr_pieces_find(n, rj->digest, rj->chunk, rj->req_id);
  if (pc != NULL) {
    /* It could not finish sending a chunk in pieces: its origin fetch of it
     * failed, or reading it did. */
    nbr_hide(n, rj->digest, rj->chunk);
    nbr_pieces_end(n, pc, WS_ECANCELED);
    peer_swarm_kick(n->s);
    return;
  }
  int i = nbr_req_find(n, rj->digest, rj->chunk, rj->req_id);
  if (i < 0)
    return;
  if (rj->reason == WS_REJECT_BUSY) {
    uint32_t ra = rj->retry_after_ms ? rj->retry_after_ms : PEER_BUSY_RETRY_MS;
    if (ra > PEER_REQUEST_TIMEOUT_MS)
      ra = PEER_REQUEST_TIMEOUT_MS;
    n->busy_until_ms = uv_now(&n->s->d->loop) + ra;
  } else {
    /* Not held (or unknown): not from this neighbour for now. */
    nbr_hide(n, rj->digest, rj->chunk);
  }
  peer_nbr_req_drop(n, (uint32_t)i, WS_EBUSY);
  peer_swarm_kick(n->s); /* other holders may take it */
}

/* No payload byte is read before a buffer is there for it: the pool may
 * be empty while chunks of other neighbours are being written. */
static void nbr_rx_reserve(peer_nbr_t *n) {
  if (peer_rx_reserve(n->rx) == 1) {
    n->read_paused_pool = true;
    wire_conn_read_pause(n->c);
  }
}

/* A later piece of a chunk arriving in pieces: in order, within it. Pieces
 * of other chunks may come between (at most WS_MUX_MAX open at once). */
static void nbr_on_piece(peer_nbr_t *n, const ws_chunk_t *ch) {
  peer_pieces_t *pc = nbr_pieces_find(n, ch->digest, ch->chunk, ch->req_id);
  n->in = PEER_NBR_IN_DISCARD;
  if (pc == NULL) {
    /* A chunk given up on (timed out, canceled). */
    n->s->d->metrics.chunks_discarded++;
    return;
  }
  if (ch->off != pc->got || ch->len > pc->len - pc->got) {
    WS_LOGW("nbr#%llu %s: CHUNK %u piece at %u+%u, expected one at %u of %u",
            (unsigned long long)n->id, n->node_id, ch->chunk, ch->off, ch->len,
            pc->got, pc->len);
    peer_nbr_close(n, WS_BYE_PROTOCOL);
    return;
  }
  pc->last_ms = uv_now(&n->s->d->loop);
  n->pc = pc;
  n->rx = pc->rx;
  n->in = PEER_NBR_IN_CHUNK;
  nbr_rx_reserve(n);
}

static void nbr_on_chunk(peer_nbr_t *n, const ws_chunk_t *ch) {
  peer_swarm_t *s = n->s;
  if (ch->piece && ch->off != 0) {
    nbr_on_piece(n, ch);
    return;
  }
  n->in = PEER_NBR_IN_DISCARD;
  int i = nbr_req_find(n, ch->digest, ch->chunk, ch->req_id);
  if (i < 0) {
    s->d->metrics.chunks_discarded++; /* canceled, timed out or unasked */
    return;
  }
  peer_req_t *r = &n->reqs[i];
  peer_file_t *file = r->file;
  uint32_t j = r->j;
  uint32_t clen = peer_file_chunk_len(file, j);
  if (ch->piece ? ch->len > clen : ch->len != clen) {
    WS_LOGW("nbr#%llu %s: CHUNK %u of %u bytes, expected %u",
            (unsigned long long)n->id, n->node_id, ch->chunk, ch->len, clen);
    peer_nbr_req_drop(n, (uint32_t)i, WS_EPROTO);
    peer_nbr_close(n, WS_BYE_PROTOCOL);
    return;
  }
  peer_pieces_t *pc = NULL;
  if (ch->piece && ch->len < clen && (pc = nbr_pieces_free(n)) == NULL) {
    WS_LOGW("nbr#%llu %s: CHUNK %u: more than %u chunks in pieces at once",
            (unsigned long long)n->id, n->node_id, ch->chunk, WS_MUX_MAX);
    peer_nbr_req_drop(n, (uint32_t)i, WS_EPROTO);
    peer_nbr_close(n, WS_BYE_PROTOCOL);
    return;
  }
  if (file->state != PEER_FILE_FETCHING || file->pf == NULL ||
      file->rx_busy[j] || file->chunk_state[j] != PEER_CHUNK_INFLIGHT) {
    s->d->metrics.chunks_discarded++;
    peer_nbr_req_drop(n, (uint32_t)i, WS_ECANCELED);
    return;
  }
  file->rx_busy[j] = 1;
  peer_rx_t *rx = peer_rx_new(s, n, file, j);
  peer_nbr_req_drop(n, (uint32_t)i, 0); /* rx_busy keeps it INFLIGHT */
  if (rx == NULL) {
    file->rx_busy[j] = 0;
    nbr_chunk_release(file, j);
    return;
  }
  /* The first sender wins; the endgame duplicates are canceled. */
  peer_nbr_cancel_others(s, n, file, j);
  n->rx = rx;
  n->pc = pc;
  n->in = PEER_NBR_IN_CHUNK;
  if (pc != NULL) {
    /* The rest follows in more pieces (sent as it arrives at the sender,
     * or between pieces of other chunks). */
    pc->open = true;
    memcpy(pc->digest, ch->digest, WS_PROTO_DIGEST_LEN);
    pc->g = ch->chunk;
    pc->req_id = ch->req_id;
    pc->got = 0;
    pc->len = clen;
    pc->last_ms = uv_now(&s->d->loop);
    pc->rx = rx;
  }
  nbr_rx_reserve(n);
}

static void nbr_on_manifest(peer_nbr_t *n, const ws_manifest_msg_t *mm) {
  peer_srel_t *srel = peer_srel_find(n->s, mm->digest);
  n->in = PEER_NBR_IN_DISCARD;
  if (srel == NULL || srel->masked != n || mm->len > PEER_MANIFEST_MAX_BYTES) {
    n->s->d->metrics.chunks_discarded++;
    return;
  }
  n->mbuf = malloc((size_t)mm->len + 1);
  if (n->mbuf == NULL)
    return;
  n->mlen = mm->len;
  n->mgot = 0;
  memcpy(n->mdigest.b, mm->digest, WS_PROTO_DIGEST_LEN);
  n->in = PEER_NBR_IN_MANIFEST;
}

static void nbr_on_frame(wire_conn_t *c, const ws_msg_t *m) {
  peer_nbr_t *n = wire_conn_user(c);
  if (n->state != PEER_NBR_READY)
    return;
  switch (m->type) {
  case WS_MSG_BITFIELD:
    nbr_on_bitfield(n, &m->u.bitfield);
    break;
  case WS_MSG_HAVE:
    nbr_on_have(n, &m->u.have);
    break;
  case WS_MSG_REQUEST:
  case WS_MSG_MANIFEST_REQ:
    peer_serve_request(n, m->type, &m->u.request);
    break;
  case WS_MSG_CANCEL:
    peer_serve_cancel(n, &m->u.request);
    break;
  case WS_MSG_REJECT:
    /* A refused manifest ask (chunk UINT32_MAX, serve.c): ask another. */
    if (m->u.reject.chunk == UINT32_MAX) {
      peer_srel_t *srel = peer_srel_find(n->s, m->u.reject.digest);
      if (srel != NULL && srel->masked == n)
        peer_swarm_manifest_got(n->s, n, &srel->digest, NULL, 0);
      break;
    }
    nbr_on_reject(n, &m->u.reject);
    break;
  case WS_MSG_CHUNK:
    nbr_on_chunk(n, &m->u.chunk);
    break;
  case WS_MSG_MANIFEST:
    nbr_on_manifest(n, &m->u.manifest);
    break;
  case WS_MSG_GOODBYE:
    WS_LOGD("nbr#%llu %s: goodbye (%u)", (unsigned long long)n->id, n->node_id,
            m->u.goodbye.reason);
    wire_conn_close(c, 0);
    break;
  case WS_MSG_ERROR:
    WS_LOGW("nbr#%llu %s: error %d: %s", (unsigned long long)n->id, n->node_id,
            m->u.error.code, m->u.error.msg);
    break;
  default:
    break; /* tracker messages: not for us */
  }
}

static void nbr_on_payload(wire_conn_t *c, const uint8_t *data, size_t len,
                           uint64_t off, bool last) {
  peer_nbr_t *n = wire_conn_user(c);
  peer_swarm_t *s = n->s;
  switch (n->in) {
  case PEER_NBR_IN_CHUNK: {
    s->d->metrics.peer_rx_bytes += len;
    int rc = peer_rx_data(n->rx, data, len);
    if (rc < 0) {
      s->d->metrics.rx_errors++;
      WS_LOGW("nbr#%llu %s: receiving a chunk: %s; closing",
              (unsigned long long)n->id, n->node_id, ws_strerror(rc));
      if (n->pc != NULL)
        nbr_pieces_end(n, n->pc, rc);
      else
        peer_rx_end(n->rx, rc);
      n->rx = NULL;
      n->in = PEER_NBR_IN_DISCARD;
      peer_nbr_close(n, WS_BYE_PROTOCOL);
      return;
    }
    if (rc == 1 && !last) {
      n->read_paused_pool = true;
      wire_conn_read_pause(c);
    }
    uint64_t ms = peer_rate_charge(&s->down_rate, len);
    if (ms > 0 && !n->read_paused_rate) {
      n->read_paused_rate = true;
      wire_conn_read_pause(c);
      peer_nbr_timer_arm(n, ms);
    }
    peer_pieces_t *pc = n->pc;
    if (pc != NULL)
      pc->got += (uint32_t)len;
    if (last && pc != NULL && pc->got < pc->len) {
      /* pc->rx waits for the next piece */
      n->in = PEER_NBR_IN_NONE;
      n->rx = NULL;
      n->pc = NULL;
    } else if (last) {
      peer_rx_t *rx = n->rx;
      n->rx = NULL;
      n->pc = NULL;
      if (pc != NULL) {
        pc->open = false;
        pc->rx = NULL;
      }
      n->in = PEER_NBR_IN_NONE;
      peer_rx_end(rx, 0);
      peer_picker_fill(n);
    }
    return;
  }
  case PEER_NBR_IN_MANIFEST:
    if (off + len > n->mlen) {
      peer_nbr_close(n, WS_BYE_PROTOCOL);
      return;
    }
    memcpy(n->mbuf + off, data, len);
    n->mgot += (uint32_t)len;
    if (last) {
      char *b = n->mbuf;
      n->mbuf = NULL;
      n->in = PEER_NBR_IN_NONE;
      b[n->mlen] = '\0';
      peer_swarm_manifest_got(s, n, &n->mdigest, b, n->mlen);
    }
    return;
  default:
    if (last)
      n->in = PEER_NBR_IN_NONE;
    return;
  }
}

/* ---- lifecycle ---------------------------------------------------------- */

static peer_nbr_t *nbr_find_ready(peer_swarm_t *s, const char *node_id,
                                  const peer_nbr_t *except) {
  for (peer_nbr_t *o = s->nbrs; o != NULL; o = o->next) {
    if (o != except && o->state == PEER_NBR_READY &&
        strcmp(o->node_id, node_id) == 0)
      return o;
  }
  return NULL;
}

/* Two connections between the same pair (both dialed): both sides keep the
 * one dialed by the smaller node id. */
static int nbr_keep_new(const peer_swarm_t *s, const peer_nbr_t *n,
                        const peer_nbr_t *old) {
  if (n->initiator == old->initiator)
    return 0;
  int mine_smaller = strcmp(s->d->cfg->node_id, n->node_id) < 0;
  return n->initiator ? mine_smaller : !mine_smaller;
}

static void nbr_on_ready(wire_conn_t *c, const wire_peer_t *p) {
  peer_nbr_t *n = wire_conn_user(c);
  peer_swarm_t *s = n->s;
  snprintf(n->node_id, sizeof(n->node_id), "%s", p->node_id);
  snprintf(n->host, sizeof(n->host), "%s", p->addr);
  n->port = p->listen_port;
  if (strcmp(n->node_id, s->d->cfg->node_id) == 0 || s->stopping) {
    nbr_set_state(n, PEER_NBR_CLOSING);
    wire_conn_close(c, 0);
    return;
  }
  if (p->role != WS_ROLE_PEER ||
      peer_swarm_banned(s, n->node_id, n->host, n->port)) {
    nbr_set_state(n, PEER_NBR_CLOSING);
    wire_conn_goodbye(c, WS_BYE_BANNED);
    return;
  }
  peer_nbr_t *old = nbr_find_ready(s, n->node_id, n);
  if (old != NULL) {
    if (!nbr_keep_new(s, n, old)) {
      nbr_set_state(n, PEER_NBR_CLOSING);
      wire_conn_goodbye(c, WS_BYE_SHUTDOWN);
      return;
    }
    peer_nbr_close(old, WS_BYE_SHUTDOWN);
  }
  if (s->nready >= s->d->cfg->max_neighbors) {
    nbr_set_state(n, PEER_NBR_CLOSING);
    wire_conn_goodbye(c, WS_BYE_SHUTDOWN);
    return;
  }
  nbr_set_state(n, PEER_NBR_READY);
  WS_LOGI("nbr#%llu %s: connected (%s:%u, %s)", (unsigned long long)n->id,
          n->node_id, n->host, n->port, n->initiator ? "dialed" : "accepted");
  for (peer_srel_t *r = s->srels; r != NULL; r = r->next) {
    if (r->state != PEER_SREL_RESOLVING)
      peer_nbr_send_bitfield(n, r);
  }
  peer_swarm_nbr_ready(s, n);
}

static void nbr_on_drain(wire_conn_t *c) {
  peer_nbr_t *n = wire_conn_user(c);
  if (!n->want_drain)
    return;
  n->want_drain = false;
  peer_serve_next(n);
  peer_picker_fill(n);
}

static void nbr_timer_closed(uv_handle_t *h) {
  free(h->data);
}

static void nbr_on_close(wire_conn_t *c, int status) {
  peer_nbr_t *n = wire_conn_user(c);
  peer_swarm_t *s = n->s;
  if (n->state != PEER_NBR_CLOSING)
    nbr_set_state(n, PEER_NBR_CLOSING);
  n->c = NULL;
  if (status != 0 && status != UV_EOF && n->node_id[0] != '\0')
    WS_LOGI("nbr#%llu %s: closed: %s", (unsigned long long)n->id, n->node_id,
            ws_strerror(status));
  else if (status == WS_EAUTH)
    WS_LOGW("nbr#%llu %s: handshake failed (wrong cluster key?)",
            (unsigned long long)n->id, n->host);
  if (n->rx != NULL && n->pc == NULL) {
    peer_rx_t *rx = n->rx;
    n->rx = NULL;
    peer_rx_end(rx, WS_ECANCELED);
  }
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    if (n->pcs[i].open)
      nbr_pieces_end(n, &n->pcs[i], WS_ECANCELED);
  }
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used)
      peer_nbr_req_drop(n, i, WS_ECANCELED);
  }
  peer_serve_detach(n);
  free(n->mbuf);
  n->mbuf = NULL;
  for (uint32_t i = 0; i < n->nrels; i++)
    ws_bitfield_free(&n->rels[i].have);
  n->nrels = 0;
  if (n->prev != NULL)
    n->prev->next = n->next;
  else
    s->nbrs = n->next;
  if (n->next != NULL)
    n->next->prev = n->prev;
  s->nnbrs--;
  peer_swarm_nbr_gone(s, n);
  uv_timer_stop(&n->timer);
  uv_close((uv_handle_t *)&n->timer, nbr_timer_closed);
  peer_swarm_kick(s); /* its chunks go to other holders */
}

static const wire_conn_cbs_t nbr_cbs = {
    .on_ready = nbr_on_ready,
    .on_frame = nbr_on_frame,
    .on_payload = nbr_on_payload,
    .on_drain = nbr_on_drain,
    .on_close = nbr_on_close,
};

static peer_nbr_t *nbr_new(peer_swarm_t *s, int initiator) {
  peer_nbr_t *n = calloc(1, sizeof(*n));
  if (n == NULL)
    return NULL;
  n->s = s;
  n->id = ++s->next_nbr_id;
  n->initiator = initiator;
  n->state = PEER_NBR_CONNECTING;
  uv_timer_init(&s->d->loop, &n->timer);
  n->timer.data = n;
  return n;
}

static void nbr_link(peer_swarm_t *s, peer_nbr_t *n) {
  n->next = s->nbrs;
  if (s->nbrs != NULL)
    s->nbrs->prev = n;
  s->nbrs = n;
  s->nnbrs++;
  if (!n->initiator)
    s->npreauth_in++;
}

int peer_nbr_connect(peer_swarm_t *s, const char *host, uint16_t port,
                     const char *expect) {
  peer_nbr_t *n = nbr_new(s, 1);
  if (n == NULL)
    return -ENOMEM;
  snprintf(n->expect, sizeof(n->expect), "%s", expect);
  snprintf(n->host, sizeof(n->host), "%s", host);
  n->port = port;
  int rc =
      wire_conn_connect(&s->d->loop, host, port, &s->wcfg, &nbr_cbs, n, &n->c);
  if (rc != 0) {
    uv_close((uv_handle_t *)&n->timer, nbr_timer_closed);
    return rc;
  }
  nbr_link(s, n);
  return 0;
}

int peer_nbr_accept(peer_swarm_t *s, uv_stream_t *server) {
  peer_nbr_t *n = nbr_new(s, 0);
  if (n == NULL)
    return -ENOMEM;
  int rc = wire_conn_accept(server, &s->wcfg, &nbr_cbs, n, &n->c);
  if (rc != 0) {
    uv_close((uv_handle_t *)&n->timer, nbr_timer_closed);
    return rc;
  }
  nbr_link(s, n);
  if (s->stopping || s->npreauth_in > PEER_PREAUTH_MAX ||
      s->nnbrs > s->d->cfg->max_neighbors + PEER_PREAUTH_MAX) {
    nbr_set_state(n, PEER_NBR_CLOSING);
    wire_conn_close(n->c, WS_ELIMIT);
  }
  return 0;
}
