/* neighbor_conn.c - a neighbour's connection (neighbor_conn.h): dial,
 * accept, handshake outcome, close, and the dispatch of what it sends.
 *
 * Payloads: a CHUNK header we asked for starts a download (download.h) and
 * the payload's bytes go to it; the first sender of a chunk wins and the
 * endgame duplicates are canceled. A chunk may come in pieces ("o"), up to
 * WS_MUX_MAX interleaved, each piece its own payload. No payload byte is
 * read before a buffer is there for it: the pool may be empty while chunks
 * of other neighbours are being written, and reading pauses until the
 * download's wake. A MANIFEST is taken only when we asked this neighbour,
 * up to PEER_MANIFEST_MAX_BYTES.
 *
 * Owns: the neighbours (freed after their timer closed), the manifest
 * buffer being filled. Thread: loop thread.
 */
#include <assert.h>
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/neighbor_conn.h"
#include "swarm/origin_share.h"
#include "ws_log.h"

/* ---- frames ------------------------------------------------------------- */

static void conn_on_bitfield(peer_neighbor_t *n, const ws_bitfield_msg_t *b) {
  peer_neighbors_t *set = n->set;
  peer_swarm_rel_t *rel = swarm_rel_find(set->rels, b->digest);
  if (rel != NULL && rel->total != 0 && rel->total != b->total_chunks) {
    WS_LOGW("nbr#%llu %s: BITFIELD with %u chunks, the manifest has %u",
            (unsigned long long)n->id, n->node_id, b->total_chunks, rel->total);
    return;
  }
  peer_neighbor_rel_t *r = peer_neighbor_rel_get(n, b->digest);
  if (r == NULL)
    return; /* over the cap: this neighbour is not a source for it */
  if (peer_neighbor_rel_set(n, r, b) != 0)
    return;
  r->active_ms = uv_now(set->ctx->loop);
  if (rel != NULL && rel->state != PEER_SWARM_REL_RESOLVING) {
    bool sent = r->sent_ours;
    swarm_rel_send_bitfield(rel, n);
    if (sent) /* else swarm_rel_send_bitfield did it */
      swarm_rel_live_haves(rel, n);
  }
  /* A RESOLVING record may ask it for the manifest now. */
  rel = swarm_rel_find(set->rels, b->digest);
  if (rel != NULL)
    swarm_rel_manifest_try(rel, uv_now(set->ctx->loop));
  peer_picker_fill(set->picker, n);
}

static void conn_on_have(peer_neighbor_t *n, const ws_have_t *h) {
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, h->digest);
  if (r == NULL || r->have.nbits == 0 || h->chunk >= r->have.nbits)
    return;
  peer_neighbor_rel_have(r, h);
  r->active_ms = uv_now(n->set->ctx->loop);
  swarm_rel_tree_offer(swarm_rel_find(n->set->rels, h->digest), n->node_id,
                       h->chunk, r->active_ms);
  if (n->nreqs < PEER_PIPELINE_DEPTH)
    peer_picker_fill(n->set->picker, n);
}

static void conn_on_reject(peer_neighbor_t *n, const ws_reject_t *rj) {
  peer_neighbors_t *set = n->set;
  peer_pieces_t *pc = peer_pieces_find(n, rj->digest, rj->chunk, rj->req_id);
  if (pc != NULL) {
    /* It could not finish sending a chunk in pieces: its origin fetch of it
     * failed, or reading it did. */
    peer_neighbor_hide(n, rj->digest, rj->chunk);
    peer_pieces_end(n, pc, WS_ECANCELED);
    peer_picker_fill_all(set->picker);
    return;
  }
  int i = peer_request_find(n, rj->digest, rj->chunk, rj->req_id);
  if (i < 0)
    return;
  static const char *const why[WS_REJECT_LAST] = {
      [WS_REJECT_NOT_HAVE] = "not held",
      [WS_REJECT_BUSY] = "busy",
      [WS_REJECT_BAD] = "bad request",
      [WS_REJECT_UNKNOWN] = "release unknown"};
  WS_LOGD("nbr#%llu %s: chunk %u refused: %s", (unsigned long long)n->id,
          n->node_id, rj->chunk,
          rj->reason < WS_REJECT_LAST ? why[rj->reason] : "?");
  if (rj->reason == WS_REJECT_BUSY) {
    uint32_t ra = rj->retry_after_ms ? rj->retry_after_ms : PEER_BUSY_RETRY_MS;
    if (ra > PEER_REQUEST_TIMEOUT_MS)
      ra = PEER_REQUEST_TIMEOUT_MS;
    n->busy_until_ms = uv_now(set->ctx->loop) + ra;
  } else {
    /* Not held (or unknown): not from this neighbour for now. */
    peer_neighbor_hide(n, rj->digest, rj->chunk);
  }
  peer_request_drop(n, (uint32_t)i, WS_EBUSY);
  peer_picker_fill_all(set->picker); /* other holders may take it */
}

/* No payload byte is read before a buffer is there for it. */
static void conn_reserve(peer_neighbor_t *n) {
  if (peer_download_reserve(n->dl) == PEER_INBOUND_PAUSE)
    peer_neighbor_read_pause_pool(n);
}

/* A later piece of a chunk arriving in pieces: in order, within it. Pieces
 * of other chunks may come between (at most WS_MUX_MAX open at once). */
static void conn_on_piece(peer_neighbor_t *n, const ws_chunk_t *ch) {
  peer_pieces_t *pc = peer_pieces_find(n, ch->digest, ch->chunk, ch->req_id);
  n->in = PEER_NEIGHBOR_IN_DISCARD;
  if (pc == NULL) {
    /* A chunk given up on (timed out, canceled). */
    n->set->ctx->counters.chunks_discarded++;
    return;
  }
  if (ch->off != pc->got || ch->len > pc->len - pc->got) {
    WS_LOGW("nbr#%llu %s: CHUNK %u piece at %u+%u, expected one at %u of %u",
            (unsigned long long)n->id, n->node_id, ch->chunk, ch->off, ch->len,
            pc->got, pc->len);
    peer_neighbor_close(n, WS_BYE_PROTOCOL);
    return;
  }
  pc->last_ms = uv_now(n->set->ctx->loop);
  n->pc = pc;
  n->dl = pc->dl;
  n->in = PEER_NEIGHBOR_IN_CHUNK;
  conn_reserve(n);
}

/* The first CHUNK header of request i: its length is the chunk's (or, in
 * pieces, within it) and a slot for pieces is free. *pc: that slot when
 * more pieces follow. 0, or an error (the connection closed). */
static int conn_chunk_check(peer_neighbor_t *n, int i, const ws_chunk_t *ch,
                            peer_pieces_t **pc) {
  peer_request_t *r = &n->reqs[i];
  uint32_t clen = peer_file_chunk_len(r->file, r->j);
  const char *bad = NULL;
  *pc = NULL;
  if (ch->piece ? ch->len > clen : ch->len != clen)
    bad = "length";
  else if (ch->piece && ch->len < clen && (*pc = peer_pieces_free(n)) == NULL)
    bad = "pieces";
  if (bad == NULL)
    return 0;
  if (bad[0] == 'l')
    WS_LOGW("nbr#%llu %s: CHUNK %u of %u bytes, expected %u",
            (unsigned long long)n->id, n->node_id, ch->chunk, ch->len, clen);
  else
    WS_LOGW("nbr#%llu %s: CHUNK %u: more than %u chunks in pieces at once",
            (unsigned long long)n->id, n->node_id, ch->chunk, WS_MUX_MAX);
  peer_request_drop(n, (uint32_t)i, WS_EPROTO);
  peer_neighbor_close(n, WS_BYE_PROTOCOL);
  return WS_EPROTO;
}

static void conn_on_chunk(peer_neighbor_t *n, const ws_chunk_t *ch) {
  peer_neighbors_t *set = n->set;
  if (ch->piece && ch->off != 0) {
    conn_on_piece(n, ch);
    return;
  }
  n->in = PEER_NEIGHBOR_IN_DISCARD;
  int i = peer_request_find(n, ch->digest, ch->chunk, ch->req_id);
  if (i < 0) {
    set->ctx->counters.chunks_discarded++; /* canceled, timed out, unasked */
    return;
  }
  peer_pieces_t *pc;
  if (conn_chunk_check(n, i, ch, &pc) != 0)
    return;
  peer_file_t *file = n->reqs[i].file;
  uint32_t j = n->reqs[i].j;
  if (file->state != PEER_FILE_FETCHING || file->pf == NULL ||
      file->rx_busy[j] || file->chunk_state[j] != PEER_CHUNK_INFLIGHT) {
    set->ctx->counters.chunks_discarded++;
    peer_request_drop(n, (uint32_t)i, WS_ECANCELED);
    return;
  }
  peer_download_t *dl =
      peer_download_new(set->downloads, file, j, n->node_id, n->host, n->port,
                        peer_neighbor_read_resume, n);
  /* rx_busy keeps it INFLIGHT; without a download it goes back. */
  peer_request_drop(n, (uint32_t)i, 0);
  if (dl == NULL)
    return;
  /* The first sender wins; the endgame duplicates are canceled. */
  peer_requests_cancel_others(set, n, file, j);
  n->dl = dl;
  n->pc = pc;
  n->in = PEER_NEIGHBOR_IN_CHUNK;
  if (pc != NULL) {
    /* The rest follows in more pieces (sent as it arrives at the sender,
     * or between pieces of other chunks). */
    pc->open = true;
    memcpy(pc->digest, ch->digest, WS_PROTO_DIGEST_LEN);
    pc->g = ch->chunk;
    pc->req_id = ch->req_id;
    pc->got = 0;
    pc->len = peer_file_chunk_len(file, j);
    pc->last_ms = uv_now(set->ctx->loop);
    pc->dl = dl;
    peer_rx_start(n, pc);
  } else {
    /* Whole: its progress deadline runs from now (peer_neighbor_tick). */
    peer_pieces_t *w = &n->whole;
    w->open = true;
    memcpy(w->digest, ch->digest, WS_PROTO_DIGEST_LEN);
    w->g = ch->chunk;
    w->req_id = ch->req_id;
    w->got = 0;
    w->len = ch->len;
    w->dl = NULL;
    peer_rx_start(n, w);
  }
  conn_reserve(n);
}

static void conn_on_manifest(peer_neighbor_t *n, const ws_manifest_msg_t *mm) {
  peer_swarm_rel_t *rel = swarm_rel_find(n->set->rels, mm->digest);
  n->in = PEER_NEIGHBOR_IN_DISCARD;
  if (rel == NULL || rel->masked != n || mm->len > PEER_MANIFEST_MAX_BYTES) {
    n->set->ctx->counters.chunks_discarded++;
    return;
  }
  n->mbuf = malloc((size_t)mm->len + 1);
  if (n->mbuf == NULL)
    return;
  n->mlen = mm->len;
  n->mgot = 0;
  memcpy(n->mdigest.b, mm->digest, WS_PROTO_DIGEST_LEN);
  n->in = PEER_NEIGHBOR_IN_MANIFEST;
}

/* A REJECT of our manifest ask (chunk UINT32_MAX): ask another. */
static void conn_on_manifest_reject(peer_neighbor_t *n, const ws_reject_t *rj) {
  peer_swarm_rel_t *rel = swarm_rel_find(n->set->rels, rj->digest);
  if (rel != NULL && rel->masked == n)
    swarm_rel_manifest_got(n->set->rels, n, &rel->digest, NULL, 0);
}

static void conn_on_frame(wire_conn_t *c, const ws_msg_t *m) {
  peer_neighbor_t *n = wire_conn_user(c);
  peer_neighbors_t *set = n->set;
  if (n->state != PEER_NEIGHBOR_READY)
    return;
  switch (m->type) {
  case WS_MSG_BITFIELD:
    conn_on_bitfield(n, &m->u.bitfield);
    break;
  case WS_MSG_HAVE:
    conn_on_have(n, &m->u.have);
    break;
  case WS_MSG_REQUEST:
  case WS_MSG_MANIFEST_REQ:
    peer_upload_request(set->uploads, n, m->type, &m->u.request);
    break;
  case WS_MSG_CANCEL:
    peer_upload_cancel(set->uploads, n, &m->u.request);
    break;
  case WS_MSG_REJECT:
    if (m->u.reject.chunk == UINT32_MAX)
      conn_on_manifest_reject(n, &m->u.reject);
    else
      conn_on_reject(n, &m->u.reject);
    break;
  case WS_MSG_CHUNK:
    conn_on_chunk(n, &m->u.chunk);
    break;
  case WS_MSG_MANIFEST:
    conn_on_manifest(n, &m->u.manifest);
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

/* ---- payloads ----------------------------------------------------------- */

/* The download failed: the link goes (its other transfers are retried
 * elsewhere). */
static void conn_chunk_failed(peer_neighbor_t *n, int rc) {
  n->set->ctx->counters.rx_errors++;
  WS_LOGW("nbr#%llu %s: receiving a chunk: %s; closing",
          (unsigned long long)n->id, n->node_id, ws_strerror(rc));
  if (n->pc != NULL)
    peer_pieces_end(n, n->pc, rc);
  else
    peer_download_end(n->dl, rc);
  n->whole.open = false;
  n->dl = NULL;
  n->in = PEER_NEIGHBOR_IN_DISCARD;
  peer_neighbor_close(n, WS_BYE_PROTOCOL);
}

/* The payload (or this piece of it) ended. */
static void conn_chunk_payload_end(peer_neighbor_t *n) {
  peer_pieces_t *pc = n->pc;
  peer_download_t *dl = n->dl;
  n->in = PEER_NEIGHBOR_IN_NONE;
  n->dl = NULL;
  n->pc = NULL;
  if (pc != NULL && pc->got < pc->len)
    return; /* pc->dl waits for the next piece */
  if (pc != NULL) {
    peer_rx_sample(n, pc);
    pc->open = false;
    pc->dl = NULL;
  } else if (n->whole.open) {
    peer_rx_sample(n, &n->whole);
    n->whole.open = false;
  }
  peer_download_end(dl, 0);
  peer_picker_fill(n->set->picker, n);
}

static void conn_payload_chunk(peer_neighbor_t *n, const uint8_t *data,
                               size_t len, bool last) {
  peer_neighbors_t *set = n->set;
  set->ctx->counters.peer_rx_bytes += len;
  int rc = peer_download_data(n->dl, data, len);
  if (rc < 0) {
    conn_chunk_failed(n, rc);
    return;
  }
  if (rc == PEER_INBOUND_PAUSE && !last)
    peer_neighbor_read_pause_pool(n);
  uint64_t ms = peer_rate_charge(&set->down_rate, len);
  if (ms > 0 && !n->read_paused_rate) {
    n->read_paused_rate = true;
    peer_neighbor_pause_note(n);
    wire_conn_read_pause(n->c);
    peer_neighbor_timer_arm(n, ms);
  }
  n->useful_ms = uv_now(set->ctx->loop);
  peer_rx_got(n, n->pc != NULL ? n->pc : &n->whole, (uint32_t)len);
  if (last)
    conn_chunk_payload_end(n);
}

static void conn_payload_manifest(peer_neighbor_t *n, const uint8_t *data,
                                  size_t len, uint64_t off, bool last) {
  if (off + len > n->mlen) {
    peer_neighbor_close(n, WS_BYE_PROTOCOL);
    return;
  }
  memcpy(n->mbuf + off, data, len);
  n->mgot += (uint32_t)len;
  n->useful_ms = uv_now(n->set->ctx->loop);
  if (last) {
    char *b = n->mbuf;
    n->mbuf = NULL;
    n->in = PEER_NEIGHBOR_IN_NONE;
    b[n->mlen] = '\0';
    swarm_rel_manifest_got(n->set->rels, n, &n->mdigest, b, n->mlen);
  }
}

static void conn_on_payload(wire_conn_t *c, const uint8_t *data, size_t len,
                            uint64_t off, bool last) {
  peer_neighbor_t *n = wire_conn_user(c);
  switch (n->in) {
  case PEER_NEIGHBOR_IN_CHUNK:
    conn_payload_chunk(n, data, len, last);
    return;
  case PEER_NEIGHBOR_IN_MANIFEST:
    conn_payload_manifest(n, data, len, off, last);
    return;
  default:
    n->set->ctx->counters.rx_discarded_bytes += len;
    if (last)
      n->in = PEER_NEIGHBOR_IN_NONE;
    return;
  }
}

/* ---- lifecycle ---------------------------------------------------------- */

/* Two connections between the same pair (both dialed): both sides keep the
 * one dialed by the smaller node id. */
static int conn_keep_new(const peer_neighbors_t *set, const peer_neighbor_t *n,
                         const peer_neighbor_t *old) {
  if (n->initiator == old->initiator)
    return 0;
  int mine_smaller = strcmp(set->ctx->cfg->node_id, n->node_id) < 0;
  return n->initiator ? mine_smaller : !mine_smaller;
}

/* Closes n at the end of its handshake (bye: GOODBYE reason; -1: at once). */
static void conn_refuse(peer_neighbor_t *n, int bye) {
  peer_neighbor_set_state(n, PEER_NEIGHBOR_CLOSING);
  if (bye < 0)
    wire_conn_close(n->c, 0);
  else
    wire_conn_goodbye(n->c, (ws_bye_reason_t)bye);
}

/* Refused for want of room, or as a duplicate (why: for the log), said
 * in a GOODBYE. */
static void conn_refuse_room(peer_neighbor_t *n, const char *why) {
  n->set->ctx->counters.peers_refused++;
  WS_LOGD("nbr#%llu %s at %s: refused: %s", (unsigned long long)n->id,
          n->node_id, n->host, why);
  conn_refuse(n, WS_BYE_SHUTDOWN);
}

static void conn_on_ready(wire_conn_t *c, const wire_peer_t *p) {
  peer_neighbor_t *n = wire_conn_user(c);
  peer_neighbors_t *set = n->set;
  const peer_settings_t *cfg = set->ctx->cfg;
  snprintf(n->node_id, sizeof(n->node_id), "%s", p->node_id);
  snprintf(n->host, sizeof(n->host), "%s", p->addr);
  n->port = p->listen_port;
  n->share_key = peer_share_key(n->node_id);
  if (strcmp(n->node_id, cfg->node_id) == 0 || set->stopping) {
    conn_refuse(n, -1);
    return;
  }
  if (p->role != WS_ROLE_PEER ||
      peer_bans_check(set->bans, uv_now(set->ctx->loop), n->node_id, n->host,
                      n->port)) {
    conn_refuse(n, WS_BYE_BANNED);
    return;
  }
  peer_neighbor_t *old = peer_neighbors_find_ready(set, n->node_id, n->host, n);
  if (old != NULL) {
    if (!conn_keep_new(set, n, old)) {
      conn_refuse_room(n, "a duplicate of the connection kept");
      return;
    }
    peer_neighbor_close(old, WS_BYE_SHUTDOWN);
  }
  uint64_t now = uv_now(set->ctx->loop);
  if (set->nready >= cfg->max_neighbors &&
      !peer_neighbors_make_room(set, now) &&
      !(n->initiator && peer_neighbors_dialed(set, n) < PEER_NBR_DIALED_MIN)) {
    conn_refuse_room(n, "every slot taken, none idle");
    return;
  }
  peer_neighbor_set_state(n, PEER_NEIGHBOR_READY);
  n->useful_ms = n->tx_ms = now;
  WS_LOGI("nbr#%llu %s: connected (%s:%u, %s)", (unsigned long long)n->id,
          n->node_id, n->host, n->port, n->initiator ? "dialed" : "accepted");
  swarm_rels_announce_to(set->rels, n);
  peer_picker_fill(set->picker, n);
}

static void conn_on_drain(wire_conn_t *c) {
  peer_neighbor_t *n = wire_conn_user(c);
  if (!n->want_drain)
    return;
  n->want_drain = false;
  peer_upload_next(n->set->uploads, n);
  peer_picker_fill(n->set->picker, n);
}

static void conn_timer_cb(uv_timer_t *t) {
  peer_neighbor_t *n = t->data;
  if (n->state != PEER_NEIGHBOR_READY)
    return;
  if (n->read_paused_rate) {
    uint64_t ms = peer_rate_wait_ms(&n->set->down_rate);
    if (ms > 0) {
      peer_neighbor_timer_arm(n, ms);
    } else {
      n->read_paused_rate = false;
      peer_neighbor_pause_note(n);
      if (!n->read_paused_pool)
        wire_conn_read_resume(n->c);
    }
  }
  peer_upload_next(n->set->uploads, n);
}

static void conn_timer_closed(uv_handle_t *h) {
  free(h->data);
}

/* What n was receiving or asking for ends with the connection. */
static void conn_drop_transfers(peer_neighbor_t *n) {
  n->whole.open = false;
  if (n->dl != NULL && n->pc == NULL) {
    peer_download_t *dl = n->dl;
    n->dl = NULL;
    peer_download_end(dl, WS_ECANCELED);
  }
  for (uint32_t i = 0; i < WS_MUX_MAX; i++) {
    if (n->pcs[i].open)
      peer_pieces_end(n, &n->pcs[i], WS_ECANCELED);
  }
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used)
      peer_request_drop(n, i, WS_ECANCELED);
  }
  peer_upload_detach(n->set->uploads, n);
  free(n->mbuf);
  n->mbuf = NULL;
  for (uint32_t i = 0; i < n->nrels; i++)
    ws_bitfield_free(&n->rels[i].have);
  n->nrels = 0;
}

static void conn_on_close(wire_conn_t *c, int status) {
  peer_neighbor_t *n = wire_conn_user(c);
  peer_neighbors_t *set = n->set;
  if (n->state != PEER_NEIGHBOR_CLOSING)
    peer_neighbor_set_state(n, PEER_NEIGHBOR_CLOSING);
  n->c = NULL;
  if (status == WS_EAUTH && n->node_id[0] != '\0') {
    /* After the handshake only a frame's MAC or a sealed payload's tag
     * fails this way: the bytes were altered between the sender and us.
     * Nobody is banned (the path cannot be told from the sender); its
     * transfers go elsewhere. */
    set->ctx->counters.peer_auth_failures++;
    WS_LOGW("nbr#%llu %s at %s: a frame or payload failed authentication "
            "(altered on the path?); closed, nobody banned",
            (unsigned long long)n->id, n->node_id, n->host);
  } else if (status != 0 && status != UV_EOF && n->node_id[0] != '\0')
    WS_LOGI("nbr#%llu %s: closed: %s", (unsigned long long)n->id, n->node_id,
            ws_strerror(status));
  else if (status == WS_EAUTH)
    /* The other end hung up after our AUTH: a wrong key, or (at a swarm's
     * start, most often) no room there: slots or handshakes full, or a
     * duplicate of a connection it keeps. */
    WS_LOGW("nbr#%llu %s: handshake ended by the other side (wrong cluster "
            "key, or no room there)",
            (unsigned long long)n->id, n->host);
  conn_drop_transfers(n);
  if (n->prev != NULL)
    n->prev->next = n->next;
  else
    set->head = n->next;
  if (n->next != NULL)
    n->next->prev = n->prev;
  set->count--;
  swarm_rels_neighbor_gone(set->rels, n);
  uv_timer_stop(&n->timer);
  uv_close((uv_handle_t *)&n->timer, conn_timer_closed);
  peer_picker_fill_all(set->picker); /* its chunks go to other holders */
}

static const wire_conn_cbs_t conn_cbs = {
    .on_ready = conn_on_ready,
    .on_frame = conn_on_frame,
    .on_payload = conn_on_payload,
    .on_drain = conn_on_drain,
    .on_close = conn_on_close,
};

static peer_neighbor_t *conn_new(peer_neighbors_t *set, int initiator) {
  peer_neighbor_t *n = calloc(1, sizeof(*n));
  if (n == NULL)
    return NULL;
  n->set = set;
  n->id = ++set->next_id;
  n->initiator = initiator;
  n->state = PEER_NEIGHBOR_CONNECTING;
  uv_timer_init(set->ctx->loop, &n->timer);
  n->timer.data = n;
  return n;
}

static void conn_link(peer_neighbors_t *set, peer_neighbor_t *n) {
  n->next = set->head;
  if (set->head != NULL)
    set->head->prev = n;
  set->head = n;
  set->count++;
  if (!n->initiator)
    set->npreauth_in++;
}

int peer_neighbor_connect(peer_neighbors_t *set, const char *host,
                          uint16_t port, const char *expect) {
  peer_neighbor_t *n = conn_new(set, 1);
  if (n == NULL)
    return -ENOMEM;
  snprintf(n->expect, sizeof(n->expect), "%s", expect);
  snprintf(n->host, sizeof(n->host), "%s", host);
  n->port = port;
  int rc = wire_conn_connect(set->ctx->loop, host, port, &set->wcfg, &conn_cbs,
                             n, &n->c);
  if (rc != 0) {
    uv_close((uv_handle_t *)&n->timer, conn_timer_closed);
    return rc;
  }
  conn_link(set, n);
  return 0;
}

int peer_neighbor_accept(peer_neighbors_t *set, uv_stream_t *server) {
  peer_neighbor_t *n = conn_new(set, 0);
  if (n == NULL)
    return -ENOMEM;
  int rc = wire_conn_accept(server, &set->wcfg, &conn_cbs, n, &n->c);
  if (rc != 0) {
    uv_close((uv_handle_t *)&n->timer, conn_timer_closed);
    return rc;
  }
  conn_link(set, n);
  if (set->stopping || set->npreauth_in > PEER_PREAUTH_MAX ||
      set->count > set->ctx->cfg->max_neighbors + PEER_PREAUTH_MAX) {
    if (!set->stopping) {
      set->ctx->counters.peers_refused++;
      WS_LOGD("nbr#%llu: refused: %u handshakes under way, %u connections",
              (unsigned long long)n->id, set->npreauth_in, set->count);
    }
    peer_neighbor_set_state(n, PEER_NEIGHBOR_CLOSING);
    wire_conn_close(n->c, WS_ELIMIT);
  }
  return 0;
}

void peer_neighbors_init(peer_neighbors_t *set, peer_ctx_t *ctx,
                         peer_bans_t *bans, peer_swarm_rels_t *rels,
                         peer_picker_t *picker, peer_uploads_t *uploads,
                         peer_downloads_t *downloads) {
  const peer_settings_t *cfg = ctx->cfg;
  memset(set, 0, sizeof(*set));
  set->ctx = ctx;
  set->bans = bans;
  set->rels = rels;
  set->picker = picker;
  set->uploads = uploads;
  set->downloads = downloads;
  set->on_timer = conn_timer_cb;
  peer_rate_init(&set->down_rate, cfg->download_rate);
  wire_uplink_init(&set->uplink, cfg->upload_rate);
  wire_conn_cfg_init(&set->wcfg);
  set->wcfg.uplink = &set->uplink;
  memcpy(set->wcfg.key, cfg->cluster_key, sizeof(set->wcfg.key));
  snprintf(set->wcfg.node_id, sizeof(set->wcfg.node_id), "%s", cfg->node_id);
  snprintf(set->wcfg.zone, sizeof(set->wcfg.zone), "%s",
           cfg->zone != NULL ? cfg->zone : "");
  set->wcfg.role = WS_ROLE_PEER;
  /* Version 1 in our HELLO: both sides then leave payloads in clear. */
  if (cfg->plaintext_payloads)
    set->wcfg.hello_version = 1;
}

void peer_neighbors_cleanup(peer_neighbors_t *set) {
  sodium_memzero(set->wcfg.key, sizeof(set->wcfg.key));
}

void peer_neighbors_stop(peer_neighbors_t *set) {
  set->stopping = true;
  for (peer_neighbor_t *n = set->head; n != NULL; n = n->next) {
    if (n->state == PEER_NEIGHBOR_CONNECTING && n->c != NULL)
      wire_conn_close(n->c, WS_ECANCELED);
    else
      peer_neighbor_close(n, WS_BYE_SHUTDOWN);
  }
}
