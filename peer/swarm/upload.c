/* upload.c - the upload queue of each neighbour and the manifests we send
 * (upload.h); one chunk's upload is upload_chunk.c.
 *
 * The queue starts, with nothing streaming, the first manifest or held
 * chunk; beside uploads to a "mux" neighbour, a held chunk when none of
 * them is one, else a chunk arriving from S3. A manifest goes alone. When
 * every upload slot over all neighbours is taken, the whole queue is
 * refused (REJECT busy) rather than held while its senders could ask
 * someone idle.
 *
 * Owns: the manifest copies being sent. Thread: loop thread.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/upload.h"
#include "swarm/upload_chunk.h"
#include "ws_log.h"

void peer_uploads_init(peer_uploads_t *u, peer_ctx_t *ctx,
                       peer_swarm_rels_t *rels, peer_origin_t *origin) {
  memset(u, 0, sizeof(*u));
  u->ctx = ctx;
  u->rels = rels;
  u->origin = origin;
  u->next = peer_upload_next;
  peer_rate_init(&u->up_rate, ctx->cfg->upload_rate);
}

/* ---- manifests ---------------------------------------------------------- */

/* A manifest copy on its way: the record may go (READY -> evicted) while
 * the socket sends. */
typedef struct {
  peer_uploads_t *u;
  char bytes[];
} upload_mani_t;

static void upload_mani_done(wire_conn_t *c, void *arg, int status) {
  peer_neighbor_t *n = wire_conn_user(c);
  upload_mani_t *mc = arg;
  peer_uploads_t *u = mc->u;
  free(mc);
  u->mani_sends--;
  n->mani_open = false;
  if (status == 0)
    n->useful_ms = uv_now(u->ctx->loop);
  peer_upload_next(u, n);
}

static void upload_manifest(peer_uploads_t *u, peer_neighbor_t *n,
                            const ws_request_t *r) {
  peer_swarm_rel_t *rel = swarm_rel_find(u->rels, r->digest);
  if (rel == NULL || rel->mbytes == NULL || rel->mlen == 0 ||
      rel->mlen > WS_MAX_PAYLOAD) {
    peer_upload_reject(u, n, r->digest, UINT32_MAX, 0, WS_REJECT_UNKNOWN);
    return;
  }
  if (u->mani_sends >= PEER_MANIFEST_SENDS_MAX) {
    peer_upload_reject(u, n, r->digest, UINT32_MAX, 0, WS_REJECT_BUSY);
    return;
  }
  upload_mani_t *mc = malloc(sizeof(*mc) + rel->mlen);
  if (mc == NULL) {
    peer_upload_reject(u, n, r->digest, UINT32_MAX, 0, WS_REJECT_BUSY);
    return;
  }
  mc->u = u;
  memcpy(mc->bytes, rel->mbytes, rel->mlen);
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_MANIFEST;
  memcpy(m.u.manifest.digest, r->digest, WS_PROTO_DIGEST_LEN);
  m.u.manifest.len = (uint32_t)rel->mlen;
  if (peer_neighbor_send(n, &m) != 0) {
    free(mc);
    return;
  }
  if (wire_conn_send_raw(n->c, mc->bytes, rel->mlen, upload_mani_done, mc) !=
      0) {
    free(mc);
    peer_neighbor_close(n, WS_BYE_PROTOCOL);
    return;
  }
  u->mani_sends++;
  n->mani_open = true;
}

/* ---- queue -------------------------------------------------------------- */

/* A REQUEST we cannot serve: the reason, or -1 when it may be queued. */
static int upload_refusal(peer_uploads_t *u, peer_neighbor_t *n,
                          const ws_request_t *r) {
  peer_swarm_rel_t *rel = swarm_rel_find(u->rels, r->digest);
  if (rel == NULL || rel->state == PEER_SWARM_REL_RESOLVING)
    return WS_REJECT_UNKNOWN;
  if (r->chunk >= rel->total)
    return WS_REJECT_BAD;
  if (!peer_upload_can(n, rel, r->chunk))
    return WS_REJECT_NOT_HAVE;
  return -1;
}

void peer_upload_request(peer_uploads_t *u, peer_neighbor_t *n, uint8_t type,
                         const ws_request_t *r) {
  if (u->stopping)
    return;
  if (type == WS_MSG_REQUEST) {
    int why = upload_refusal(u, n, r);
    if (why >= 0) {
      peer_upload_reject(u, n, r->digest, r->chunk, r->req_id,
                         (ws_reject_reason_t)why);
      return;
    }
  }
  if (n->sq_len == PEER_SERVE_QUEUE_MAX) {
    WS_LOGD("nbr#%llu %s: request refused busy: its queue is full (%u, %u "
            "uploads to it)",
            (unsigned long long)n->id, n->node_id, n->sq_len, n->nups);
    peer_upload_reject(u, n, r->digest,
                       type == WS_MSG_REQUEST ? r->chunk : UINT32_MAX,
                       r->req_id, WS_REJECT_BUSY);
    return;
  }
  peer_upload_req_t *q =
      &n->sq[(n->sq_head + n->sq_len) % PEER_SERVE_QUEUE_MAX];
  q->type = type;
  q->r = *r;
  n->sq_len++;
  peer_upload_next(u, n);
}

void peer_upload_cancel(peer_uploads_t *u, peer_neighbor_t *n,
                        const ws_request_t *r) {
  (void)u;
  if (peer_upload_chunk_cancel(n, r))
    return;
  for (uint32_t k = 0; k < n->sq_len; k++) {
    peer_upload_req_t *q = &n->sq[(n->sq_head + k) % PEER_SERVE_QUEUE_MAX];
    if (q->type == WS_MSG_REQUEST && q->r.chunk == r->chunk &&
        q->r.req_id == r->req_id &&
        memcmp(q->r.digest, r->digest, WS_PROTO_DIGEST_LEN) == 0) {
      /* Close the gap: shift the later entries down by one. */
      for (uint32_t m = k; m + 1 < n->sq_len; m++)
        n->sq[(n->sq_head + m) % PEER_SERVE_QUEUE_MAX] =
            n->sq[(n->sq_head + m + 1) % PEER_SERVE_QUEUE_MAX];
      n->sq_len--;
      return;
    }
  }
}

/* 1 when request q is a chunk we hold (it goes at full speed; a chunk
 * still arriving from S3 goes at the origin's pace). */
static bool upload_held(peer_uploads_t *u, const peer_upload_req_t *q) {
  peer_swarm_rel_t *rel = swarm_rel_find(u->rels, q->r.digest);
  return q->type == WS_MSG_REQUEST && rel != NULL &&
         rel->state != PEER_SWARM_REL_RESOLVING && q->r.chunk < rel->total &&
         ws_bitfield_test(&rel->have, q->r.chunk);
}

/* The queued request to start now, or -1. With nothing streaming: the first
 * manifest or held chunk, else the first request (it would hold the others
 * back). Beside uploads to a "mux" neighbour: a held chunk when none of
 * them is one, else a chunk arriving from S3, unless a manifest is queued
 * before it. */
static int upload_queue_choose(peer_uploads_t *u, peer_neighbor_t *n) {
  int first_live = -1;
  bool held_busy = false;
  if (n->nups == WS_MUX_MAX)
    return -1;
  for (uint32_t i = 0; i < n->nups; i++)
    held_busy |= !peer_upload_is_live(n->ups[i]);
  for (uint32_t k = 0; k < n->sq_len; k++) {
    const peer_upload_req_t *q =
        &n->sq[(n->sq_head + k) % PEER_SERVE_QUEUE_MAX];
    if (n->nups == 0) {
      if (q->type == WS_MSG_MANIFEST_REQ || upload_held(u, q))
        return (int)k;
      continue;
    }
    if (q->type == WS_MSG_MANIFEST_REQ)
      return -1; /* it goes alone, next: no more uploads before it */
    if (!peer_upload_mux(n, q->r.digest))
      continue;
    if (upload_held(u, q)) {
      if (!held_busy)
        return (int)k;
    } else if (first_live < 0) {
      first_live = (int)k;
    }
  }
  return n->nups == 0 ? 0 : first_live;
}

/* Takes entry k out of n's queue. */
static peer_upload_req_t upload_queue_take(peer_neighbor_t *n, uint32_t k) {
  peer_upload_req_t q = n->sq[(n->sq_head + k) % PEER_SERVE_QUEUE_MAX];
  for (uint32_t m = k; m > 0; m--)
    n->sq[(n->sq_head + m) % PEER_SERVE_QUEUE_MAX] =
        n->sq[(n->sq_head + m - 1) % PEER_SERVE_QUEUE_MAX];
  n->sq_head = (n->sq_head + 1) % PEER_SERVE_QUEUE_MAX;
  n->sq_len--;
  return q;
}

/* Upload slots n may fill: all of them for its first upload, all but
 * PEER_UPLOADS_SPARE for more, so that a few neighbours (say four "mux"
 * ones with four uploads each) cannot take every slot. */
static unsigned upload_cap(const peer_neighbor_t *n) {
  return n->nups == 0 ? PEER_UPLOADS_MAX
                      : PEER_UPLOADS_MAX - PEER_UPLOADS_SPARE;
}

/* Starts what n's queue allows now. */
static void upload_queue_run(peer_uploads_t *u, peer_neighbor_t *n) {
  int k;
  uint64_t now = uv_now(u->ctx->loop);
  /* An upload to n just ended: its next queued chunk takes the freed slot,
   * so the stream on that connection goes on, until n has had its turn
   * (PEER_UPLOAD_TURN_MS); then, if another neighbour was refused a slot,
   * the slot is not n's to take straight back (its queue runs first, so a
   * refused neighbour could wait for ever). */
  bool goes_on = n->just_served;
  bool yield = goes_on && now - n->turn_ms >= PEER_UPLOAD_TURN_MS &&
               peer_neighbors_slot_waiter(n, now);
  n->just_served = false;
  while (n->sq_len > 0 && !n->mani_open && n->state == PEER_NEIGHBOR_READY &&
         (k = upload_queue_choose(u, n)) >= 0) {
    bool room = u->uploads < upload_cap(n) && !yield;
    if (n->sq[(n->sq_head + (uint32_t)k) % PEER_SERVE_QUEUE_MAX].type ==
            WS_MSG_REQUEST &&
        !room && n->nups > 0)
      break; /* the next to end makes room */
    peer_upload_req_t q = upload_queue_take(n, (uint32_t)k);
    if (q.type == WS_MSG_MANIFEST_REQ) {
      upload_manifest(u, n, &q.r);
    } else if (room) {
      if (n->nups == 0)
        n->tx_ms = now; /* its write clock starts */
      if (n->nups == 0 && !goes_on)
        n->turn_ms = now; /* a new turn: nothing went out to it just now */
      n->waiting = false;
      peer_upload_chunk_start(u, n, &q.r);
    } else {
      /* Every upload slot is taken, or n's upload just ended and the
       * slot is left to a neighbour refused before: refuse the whole queue
       * rather than hold requests whose senders could ask someone idle;
       * slots that do not drain are now taken back sooner
       * (peer_upload_tick). Nobody else is refused a free slot (session
       * 15 kept it for the one refused first, which had gone to ask
       * others, and the slot sat idle while everyone else was refused:
       * docs/benchmarks.md, session 17). */
      u->contended_ms = now;
      WS_LOGD("nbr#%llu %s: chunk %u refused busy: %s (%u of %u slots)",
              (unsigned long long)n->id, n->node_id, q.r.chunk,
              yield ? "its upload just ended, another waits"
                    : "every upload slot taken",
              u->uploads, upload_cap(n));
      peer_neighbor_slot_wait(n, now);
      peer_upload_reject(u, n, q.r.digest, q.r.chunk, q.r.req_id,
                         WS_REJECT_BUSY);
    }
  }
}

int peer_upload_tick(peer_uploads_t *u, peer_neighbor_t *n, uint64_t now_ms) {
  wire_conn_stats_t st;
  if (n->state != PEER_NEIGHBOR_READY || n->c == NULL)
    return 0;
  wire_conn_stats(n->c, &st);
  if ((n->nups == 0 && !n->mani_open) || st.sendq_bytes == 0 ||
      st.bytes_out != n->tx_bytes) {
    /* Nothing held, nothing waiting for it to read, or it read. */
    n->tx_bytes = st.bytes_out;
    n->tx_ms = now_ms;
    return 0;
  }
  uint64_t limit = now_ms - u->contended_ms <= PEER_UPLOAD_STALL_BUSY_MS
                       ? PEER_UPLOAD_STALL_BUSY_MS
                       : PEER_UPLOAD_STALL_MS;
  if (now_ms - n->tx_ms <= limit)
    return 0;
  u->ctx->counters.upload_stalls++;
  WS_LOGW("nbr#%llu %s: read nothing of %zu bytes in %llu ms while holding "
          "%u upload slot(s); closing",
          (unsigned long long)n->id, n->node_id, st.sendq_bytes,
          (unsigned long long)(now_ms - n->tx_ms), n->nups);
  peer_neighbor_set_state(n, PEER_NEIGHBOR_CLOSING);
  wire_conn_close(n->c, WS_ETIMEOUT);
  return 1;
}

void peer_upload_next(peer_uploads_t *u, peer_neighbor_t *n) {
  /* An upload that ends inside calls back here: loop instead. */
  if (n->serving) {
    n->serve_again = true;
    return;
  }
  n->serving = true;
  do {
    n->serve_again = false;
    if (n->state != PEER_NEIGHBOR_READY || n->mani_open)
      break;
    peer_upload_chunk_pump(n, NULL, 0);
    upload_queue_run(u, n);
  } while (n->serve_again);
  n->serving = false;
}

void peer_upload_detach(peer_uploads_t *u, peer_neighbor_t *n) {
  (void)u;
  n->sq_len = 0;
  peer_upload_chunk_detach(n);
}

void peer_upload_live_progress(peer_uploads_t *u, peer_neighbors_t *nbrs,
                               peer_file_t *file, uint32_t j) {
  (void)u;
  for (peer_neighbor_t *n = nbrs->head; n != NULL; n = n->next)
    peer_upload_chunk_pump(n, file, j);
}
