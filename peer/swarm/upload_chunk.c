/* upload_chunk.c - one chunk going to one neighbour (upload_chunk.h).
 *
 * A chunk we hold goes in pieces of up to PEER_SERVE_PIECE_BYTES, or
 * PEER_SERVE_FILE_PIECE_BYTES while the node fetches nothing (sized to the
 * connection's rate, up_piece_max), with
 * wire_conn_send_file, PEER_SERVE_FILE_PIECES queued at once, from the
 * upload's own descriptor: one worker job of the connection writes what is
 * queued (proto/wire_conn_file.c), with sendfile when the connection's
 * payloads go in clear (either side offered protocol version 1:
 * --plaintext-payloads; counted in peer_tx_sendfile_bytes), else read and
 * encrypted on that worker. The upload holds no buffer, and the loop thread
 * neither reads nor encrypts its bytes.
 *
 * A chunk still arriving ("live", below), and every chunk under the
 * --test-corrupt-serve fault hook, is read in pieces sized the same way,
 * up to PEER_SERVE_PIECE_BYTES, with uv_fs_read into PEER_SERVE_BUFS
 * buffers of that size of its own and
 * handed to wire_conn_send_raw_inplace (a sealed payload is encrypted in
 * that buffer); a buffer is read again only when the socket took it, so an
 * upload never holds more than its buffers however slow the link. The
 * upload rate limit delays the next read (or piece).
 *
 * A chunk we are receiving, from S3 or from a neighbour, is served as it
 * arrives ("live", to a neighbour whose BITFIELD said "live", after our
 * HAVE with "p"): the upload reads only bytes already written to the
 * partial, sends each as a CHUNK piece (body key "o", its offset in the
 * chunk) and waits for more (peer_upload_live_progress). Between pieces
 * the connection carries other frames (a payload holds back every frame
 * behind it until it ends). The last byte goes out only once our own hash
 * check passed, so a complete chunk from us always verifies; if the fetch
 * fails, the upload ends with a REJECT not held for it. The requester
 * checks the chunk's hash either way.
 *
 * A neighbour that closes detaches (up->n = NULL); the upload then only
 * drains its reads and closes its fd.
 *
 * Owns: the upload objects, their buffers and fds. Thread: loop thread;
 * the blob open runs on a worker.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swarm/upload_chunk.h"
#include "ws_log.h"

typedef enum { UP_OPENING, UP_STREAMING, UP_CLOSING, UP_STATE_LAST } up_state_t;

typedef struct {
  uv_fs_t fs;
  peer_upload_t *up;
  char *data;
  uint32_t len;
  uint32_t pos; /* offset in the chunk */
  int busy;     /* being read, waiting its turn, or being sent */
  int filled;   /* read done, not yet handed to the socket */
} up_buf_t;

struct peer_upload_s {
  peer_uploads_t *u;
  peer_neighbor_t *n; /* weak; NULL once the neighbour is gone */
  up_state_t state;
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t g, req_id;
  uint64_t seq;      /* "upload #seq" in the debug log */
  ws_hash_t sha256;  /* blob to open */
  peer_file_t *file; /* live: reference held; else NULL */
  uint32_t j;        /* live: chunk in file */
  bool live;         /* not verified here yet: send what has arrived */
  bool pieces;       /* every buffer goes as a CHUNK piece (live or mux) */
  bool was_live;     /* started live (counted as served live) */
  bool rejected;     /* pieces: our REJECT ended it */
  bool from_file;    /* pieces go with wire_conn_send_file, no buffers */
  bool clear;        /* the connection's payloads go in clear */
  int fd;
  uint64_t off; /* chunk's first byte in the file */
  uint32_t len;
  uint32_t read_pos; /* bytes whose read was issued */
  uint32_t send_pos; /* bytes handed to the socket (in order) */
  uint32_t sent;     /* bytes the socket took */
  unsigned reads, raws;
  /* Sizes of the file pieces queued (raws of them, oldest at qhead): they
   * complete in order. */
  uint32_t qlen[PEER_SERVE_FILE_PIECES];
  unsigned qhead;
  int header_sent;
  int status;
  int open_status;
  up_buf_t bufs[PEER_SERVE_BUFS];
  uv_fs_t close_fs;
};

static void up_pump(peer_upload_t *up);

/* The most bytes of the next piece to up's neighbour: about
 * PEER_SERVE_PIECE_MS at the rate its connection drains, the least while
 * that is not known yet, and no more than a buffer holds unless the piece
 * goes from the file while the node fetches nothing (tunables.h). */
static uint32_t up_piece_max(const peer_upload_t *up) {
  uint64_t r = up->n != NULL ? wire_conn_send_rate(up->n->c) : 0;
  bool bulk = up->n != NULL && up->n->set->uplink.bulk;
  uint32_t most = up->from_file && bulk ? PEER_SERVE_FILE_PIECE_BYTES
                                        : PEER_SERVE_PIECE_BYTES;
  return (uint32_t)wire_rate_bytes(r, PEER_SERVE_PIECE_MS, PEER_SERVE_PIECE_MIN,
                                   most) &
         ~4095u; /* whole pages (the bounds are) */
}

static void upload_unlink(peer_neighbor_t *n, peer_upload_t *up) {
  for (uint32_t i = 0; i < n->nups; i++) {
    if (n->ups[i] != up)
      continue;
    memmove(&n->ups[i], &n->ups[i + 1], (n->nups - i - 1) * sizeof(n->ups[0]));
    n->nups--;
    return;
  }
}

/* An upload may end (and leave n->ups) inside up_pump. */
void peer_upload_chunk_pump(peer_neighbor_t *n, const peer_file_t *file,
                            uint32_t j) {
  uint32_t i = 0;
  while (i < n->nups) {
    peer_upload_t *up = n->ups[i];
    if (file == NULL || (up->live && up->file == file && up->j == j))
      up_pump(up);
    if (i < n->nups && n->ups[i] == up)
      i++;
  }
}

static void up_set_state(peer_upload_t *up, up_state_t to) {
  static const uint8_t legal[UP_STATE_LAST][UP_STATE_LAST] = {
      [UP_OPENING] = {[UP_STREAMING] = 1, [UP_CLOSING] = 1},
      [UP_STREAMING] = {[UP_CLOSING] = 1},
  };
  assert(legal[up->state][to]);
  up->state = to;
}

void peer_upload_reject(peer_uploads_t *u, peer_neighbor_t *n,
                        const uint8_t *digest, uint32_t chunk, uint32_t req_id,
                        ws_reject_reason_t why) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_REJECT;
  memcpy(m.u.reject.digest, digest, WS_PROTO_DIGEST_LEN);
  m.u.reject.chunk = chunk;
  m.u.reject.req_id = req_id;
  m.u.reject.reason = why;
  m.u.reject.retry_after_ms = why == WS_REJECT_BUSY ? PEER_BUSY_RETRY_MS : 0;
  u->ctx->counters.requests_rejected++;
  (void)peer_neighbor_send(n, &m);
}

/* ---- upload lifecycle --------------------------------------------------- */

static void up_free(peer_upload_t *up) {
  for (unsigned i = 0; i < PEER_SERVE_BUFS; i++)
    free(up->bufs[i].data);
  if (up->file != NULL)
    peer_file_unref(up->file);
  assert(up->u->alive > 0);
  up->u->alive--;
  free(up);
}

static void up_close_cb(uv_fs_t *fs) {
  peer_upload_t *up = fs->data;
  uv_fs_req_cleanup(fs);
  up_free(up);
}

/* Ends the upload once nothing of it is in flight: the neighbour may start
 * its next one, the fd closes asynchronously. */
static void up_maybe_end(peer_upload_t *up) {
  /* OPENING: the open job is out; up_open_after decides. */
  if (up->state != UP_STREAMING || up->reads > 0 || up->raws > 0)
    return;
  if (up->state == UP_STREAMING && up->status == 0 && up->n != NULL &&
      up->sent < up->len)
    return;
  peer_uploads_t *u = up->u;
  peer_neighbor_t *n = up->n;
  up_set_state(up, UP_CLOSING);
  assert(u->uploads > 0);
  u->uploads--;
  WS_LOGD("upload #%llu: ended, %u of %u bytes sent",
          (unsigned long long)up->seq, up->sent, up->len);
  if (up->status == 0 && up->sent == up->len) {
    u->ctx->counters.chunks_served++;
    u->ctx->counters.served_live += up->was_live;
  }
  if (n != NULL) {
    upload_unlink(n, up);
    up->n = NULL;
  }
  up->close_fs.data = up;
  if (up->fd < 0 ||
      uv_fs_close(u->ctx->loop, &up->close_fs, up->fd, up_close_cb) != 0)
    up_free(up);
  if (n != NULL) {
    n->just_served = true; /* its slot may be another's (upload.c) */
    u->next(u, n);         /* the queue moves on */
  }
}

static void up_fail(peer_upload_t *up, int err) {
  if (up->status == 0)
    up->status = err;
  /* Pieces: no payload is left open between them; a REJECT ends it (not
   * after a CANCEL: the requester has forgotten it). */
  if (up->pieces) {
    if (!up->rejected && up->n != NULL && err != WS_ECANCELED)
      peer_upload_reject(up->u, up->n, up->digest, up->g, up->req_id,
                         WS_REJECT_NOT_HAVE);
    up->rejected = true;
    return;
  }
  /* A payload that was announced cannot be cut short: the connection goes
   * (its other transfers are retried elsewhere). */
  if (up->header_sent && up->n != NULL && up->sent < up->len)
    peer_neighbor_close(up->n, WS_BYE_PROTOCOL);
}

static void up_raw_done(wire_conn_t *c, void *arg, int status) {
  up_buf_t *b = arg;
  peer_upload_t *up = b->up;
  up->raws--;
  b->busy = 0;
  if (status == 0) {
    up->sent += b->len;
    up->u->ctx->counters.peer_tx_bytes += b->len;
    if (up->n != NULL)
      up->n->useful_ms = uv_now(up->u->ctx->loop);
  } else {
    up_fail(up, status);
  }
  up_pump(up);
}

static void up_read_cb(uv_fs_t *fs) {
  up_buf_t *b = fs->data;
  peer_upload_t *up = b->up;
  ssize_t r = fs->result;
  uv_fs_req_cleanup(fs);
  up->reads--;
  if (r != (ssize_t)b->len) {
    b->busy = 0;
    up_fail(up, r < 0 ? (int)r : -EIO);
    up_pump(up);
    return;
  }
  if (up->n == NULL || up->status != 0) {
    b->busy = 0;
    up_pump(up);
    return;
  }
#ifdef WS_FAULT_INJECT
  /* --test-corrupt-serve: every chunk we serve fails its hash. */
  if (up->u->ctx->cfg->test_corrupt_serve && b->pos == 0)
    b->data[0] ^= 0x5a;
#endif
  b->filled = 1;
  up_pump(up);
}

/* The CHUNK frame for len bytes from off: the whole chunk, or one piece of
 * it (pieces). peer_nbr_send's result. */
static int up_send_header(peer_upload_t *up, uint32_t off, uint32_t len) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memcpy(m.u.chunk.digest, up->digest, WS_PROTO_DIGEST_LEN);
  m.u.chunk.chunk = up->g;
  m.u.chunk.req_id = up->req_id;
  m.u.chunk.len = len;
  m.u.chunk.piece = up->pieces;
  m.u.chunk.off = off;
  return peer_neighbor_send(up->n, &m);
}

/* Hands filled buffers to the socket in chunk order (reads may complete
 * out of order). */
static void up_send_filled(peer_upload_t *up) {
  for (;;) {
    up_buf_t *b = NULL;
    for (unsigned i = 0; i < PEER_SERVE_BUFS; i++) {
      if (up->bufs[i].filled && up->bufs[i].pos == up->send_pos)
        b = &up->bufs[i];
    }
    if (b == NULL || up->n == NULL || up->status != 0)
      return;
    if (up->pieces) {
      int rc = up_send_header(up, b->pos, b->len);
      if (rc == WS_ELIMIT)
        return; /* on_drain -> peer_upload_next -> here */
      if (rc != 0) {
        up_fail(up, rc);
        return;
      }
    }
    b->filled = 0;
    /* The buffer is this upload's own: sealed in place, no copy. */
    int rc =
        wire_conn_send_raw_inplace(up->n->c, b->data, b->len, up_raw_done, b);
    if (rc != 0) {
      b->busy = 0;
      up_fail(up, rc);
      return;
    }
    up->raws++;
    up->send_pos += b->len;
    uint64_t ms = peer_rate_charge(&up->u->up_rate, b->len);
    if (ms > 0)
      peer_neighbor_timer_arm(up->n, ms);
  }
}

static void up_file_done(wire_conn_t *c, void *arg, int status) {
  peer_upload_t *up = arg;
  assert(up->raws > 0);
  uint32_t k = up->qlen[up->qhead]; /* pieces complete in order */
  (void)c;
  up->qhead = (up->qhead + 1u) % PEER_SERVE_FILE_PIECES;
  up->raws--;
  if (status == 0) {
    up->sent += k;
    up->u->ctx->counters.peer_tx_bytes += k;
    if (up->clear)
      up->u->ctx->counters.peer_tx_sendfile_bytes += k;
    if (up->n != NULL)
      up->n->useful_ms = uv_now(up->u->ctx->loop);
  } else {
    up_fail(up, status);
  }
  up_pump(up);
}

/* A held chunk to a clear connection: queues its next pieces (header and
 * file range each) while fewer than PEER_SERVE_FILE_PIECES are queued. */
static void up_send_file(peer_upload_t *up) {
  while (up->send_pos < up->len && up->raws < PEER_SERVE_FILE_PIECES &&
         up->n != NULL && up->status == 0) {
    uint64_t ms = peer_rate_wait_ms(&up->u->up_rate);
    if (ms > 0) {
      peer_neighbor_timer_arm(up->n, ms);
      return;
    }
    uint32_t k = up->len - up->send_pos, most = up_piece_max(up);
    if (k > most)
      k = most;
    int rc = up->pieces ? up_send_header(up, up->send_pos, k) : 0;
    if (rc == WS_ELIMIT)
      return; /* on_drain -> peer_upload_next -> here */
    if (rc == 0)
      rc = wire_conn_send_file(up->n->c, up->fd, up->off + up->send_pos, k,
                               up_file_done, up);
    if (rc != 0) {
      up_fail(up, rc);
      return;
    }
    up->qlen[(up->qhead + up->raws) % PEER_SERVE_FILE_PIECES] = k;
    up->raws++;
    up->send_pos += k;
    up->read_pos = up->send_pos;
    ms = peer_rate_charge(&up->u->up_rate, k);
    if (ms > 0)
      peer_neighbor_timer_arm(up->n, ms);
  }
}

/* A live upload: how far it may read. 0 with *limit set, or WS_ENOTFOUND
 * when the fetch failed (the chunk is neither held nor arriving). */
static int up_live_limit(peer_upload_t *up, uint32_t *limit) {
  peer_swarm_rel_t *rel = swarm_rel_find(up->u->rels, up->digest);
  uint64_t written;
  if (rel != NULL && rel->state != PEER_SWARM_REL_RESOLVING &&
      up->g < rel->total && ws_bitfield_test(&rel->have, up->g)) {
    up->live = false; /* verified: the rest may go */
    *limit = up->len;
    return 0;
  }
  if (rel == NULL || !swarm_rel_arriving(rel, up->file, up->j, &written))
    return WS_ENOTFOUND;
  /* Never the last byte before our own hash check passed. */
  *limit = written < up->len ? (uint32_t)written : up->len - 1;
  return 0;
}

/* Sends the header, then keeps every free buffer reading the next piece
 * (unless the upload rate says wait). */
static void up_pump(peer_upload_t *up) {
  peer_neighbor_t *n = up->n;
  uint32_t limit = up->len;
  if (up->state == UP_OPENING)
    return;
  if (up->state == UP_STREAMING && n != NULL && up->status == 0 && up->live &&
      up_live_limit(up, &limit) != 0)
    up_fail(up, WS_ENOTFOUND); /* REJECT: its fetch failed */
  if (up->state != UP_STREAMING || n == NULL || up->status != 0) {
    /* Buffers read but never sent are free again. */
    for (unsigned i = 0; i < PEER_SERVE_BUFS; i++) {
      if (up->bufs[i].filled)
        up->bufs[i].filled = up->bufs[i].busy = 0;
    }
    up_maybe_end(up);
    return;
  }
  if (!up->header_sent && !up->pieces) {
    int rc = up_send_header(up, 0, up->len);
    if (rc == WS_ELIMIT)
      return; /* on_drain -> peer_upload_next -> here */
    if (rc != 0) {
      up_fail(up, rc);
      up_maybe_end(up);
      return;
    }
    up->header_sent = 1;
  }
  if (up->from_file) {
    up_send_file(up);
    if (up->status != 0 || up->n == NULL)
      up_pump(up); /* ends it once nothing is in flight */
    else
      up_maybe_end(up);
    return;
  }
  up_send_filled(up);
  if (up->status != 0 || up->n == NULL) {
    up_pump(up);
    return;
  }
  for (unsigned i = 0; i < PEER_SERVE_BUFS && up->read_pos < limit; i++) {
    up_buf_t *b = &up->bufs[i];
    if (b->busy)
      continue;
    uint64_t ms = peer_rate_wait_ms(&up->u->up_rate);
    if (ms > 0) {
      peer_neighbor_timer_arm(n, ms);
      break;
    }
    uint32_t k = limit - up->read_pos, most = up_piece_max(up);
    if (k > most)
      k = most;
    b->up = up;
    b->len = k;
    b->pos = up->read_pos;
    b->fs.data = b;
    uv_buf_t ub = uv_buf_init(b->data, k);
    int rc = uv_fs_read(up->u->ctx->loop, &b->fs, up->fd, &ub, 1,
                        (int64_t)(up->off + b->pos), up_read_cb);
    if (rc != 0) {
      up_fail(up, rc);
      break;
    }
    b->busy = 1;
    up->reads++;
    up->read_pos += k;
  }
  up_maybe_end(up);
}

/* [worker] */
static void up_open_work(void *arg) {
  peer_upload_t *up = arg;
  uint64_t size = 0;
  up->open_status =
      ws_store_blob_open(up->u->ctx->store, &up->sha256, &up->fd, &size);
  if (up->open_status == 0 && up->off + up->len > size)
    up->open_status = WS_ETRUNCATED;
}

static void up_open_after(void *arg, int status) {
  peer_upload_t *up = arg;
  int rc = status != 0 ? status : up->open_status;
  if (rc != 0) {
    if (up->n != NULL)
      peer_upload_reject(up->u, up->n, up->digest, up->g, up->req_id,
                         WS_REJECT_NOT_HAVE);
    up->status = rc;
  }
  up_set_state(up, UP_STREAMING);
  up_pump(up);
}

bool peer_upload_mux(peer_neighbor_t *n, const uint8_t *digest) {
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, digest);
  return r != NULL && r->mux_ok;
}

int peer_upload_can(peer_neighbor_t *n, peer_swarm_rel_t *rel, uint32_t g) {
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, rel->digest.b);
  peer_file_t *f;
  uint32_t j, len;
  uint64_t off;
  return ws_bitfield_test(&rel->have, g) ||
         (r != NULL && r->live_ok &&
          swarm_rel_chunk_live(rel, g, &f, &j, NULL, &off, &len) == 0);
}

void peer_upload_chunk_start(peer_uploads_t *u, peer_neighbor_t *n,
                             const ws_request_t *r) {
  peer_swarm_rel_t *rel = swarm_rel_find(u->rels, r->digest);
  if (rel == NULL || rel->state == PEER_SWARM_REL_RESOLVING ||
      r->chunk >= rel->total || !peer_upload_can(n, rel, r->chunk)) {
    peer_upload_reject(u, n, r->digest, r->chunk, r->req_id,
                       WS_REJECT_NOT_HAVE);
    return;
  }
  peer_upload_t *up = calloc(1, sizeof(*up));
  if (up == NULL) {
    peer_upload_reject(u, n, r->digest, r->chunk, r->req_id, WS_REJECT_BUSY);
    return;
  }
  up->u = u;
  up->fd = -1;
  memcpy(up->digest, r->digest, WS_PROTO_DIGEST_LEN);
  up->g = r->chunk;
  up->req_id = r->req_id;
  bool corrupt = false; /* the fault hook alters a buffer */
#ifdef WS_FAULT_INJECT
  corrupt = u->ctx->cfg->test_corrupt_serve != 0;
#endif
  up->from_file = ws_bitfield_test(&rel->have, r->chunk) && !corrupt;
  up->clear = wire_conn_payload_clear(n->c);
  for (unsigned i = 0; i < PEER_SERVE_BUFS && !up->from_file; i++) {
    up->bufs[i].data = malloc(PEER_SERVE_PIECE_BYTES);
    if (up->bufs[i].data == NULL) {
      u->alive++;
      up_free(up);
      peer_upload_reject(u, n, r->digest, r->chunk, r->req_id, WS_REJECT_BUSY);
      return;
    }
  }
  int rc;
  if (ws_bitfield_test(&rel->have, r->chunk)) {
    rc = swarm_rel_chunk_source(rel, r->chunk, &up->sha256, &up->fd, &up->off,
                                &up->len);
  } else {
    rc = swarm_rel_chunk_live(rel, r->chunk, &up->file, &up->j, &up->fd,
                              &up->off, &up->len);
    up->live = up->was_live = up->pieces = rc == 0;
  }
  if (peer_upload_mux(n, r->digest))
    up->pieces = true;
  u->alive++;
  if (rc < 0) {
    up_free(up);
    peer_upload_reject(u, n, r->digest, r->chunk, r->req_id,
                       WS_REJECT_NOT_HAVE);
    return;
  }
  up->n = n;
  assert(n->nups < WS_MUX_MAX);
  n->ups[n->nups++] = up;
  u->uploads++;
  up->seq = ++u->started;
  /* tools/swarm_lag.py reads these two lines (uploads under way). */
  WS_LOGD("upload #%llu: chunk %u to nbr#%llu %s (%s)",
          (unsigned long long)up->seq, up->g, (unsigned long long)n->id,
          n->node_id, up->live ? "arriving here" : "held");
  up->state = UP_OPENING;
  if (rc == 0) {
    up_set_state(up, UP_STREAMING);
    up_pump(up);
    return;
  }
  rc = peer_ctx_queue(u->ctx, up_open_work, up_open_after, up);
  if (rc != 0)
    up_open_after(up, rc);
}

bool peer_upload_is_live(const peer_upload_t *up) {
  return up->live;
}

int peer_upload_chunk_cancel(peer_neighbor_t *n, const ws_request_t *r) {
  for (uint32_t i = 0; i < n->nups; i++) {
    peer_upload_t *up = n->ups[i];
    if (up->pieces && up->g == r->chunk && up->req_id == r->req_id &&
        memcmp(up->digest, r->digest, WS_PROTO_DIGEST_LEN) == 0) {
      up_fail(up, WS_ECANCELED); /* the requester gave up on it */
      up_pump(up);
      return 1;
    }
  }
  return 0;
}

void peer_upload_chunk_detach(peer_neighbor_t *n) {
  while (n->nups > 0) {
    peer_upload_t *up = n->ups[--n->nups];
    up->n = NULL;
    if (up->status == 0)
      up->status = WS_ECANCELED;
    if (up->state == UP_STREAMING)
      up_maybe_end(up);
  }
}
