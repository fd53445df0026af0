/* serve.c - what we upload to neighbours: verified chunks (from a blob or
 * from the partial, only chunks whose hash checked), chunks still arriving
 * from S3, and manifests.
 *
 * Each neighbour has a queue of at most PEER_SERVE_QUEUE_MAX requests and
 * one upload streaming at a time (wire_conn carries one payload at a time);
 * uploads over all neighbours are capped at PEER_UPLOADS_MAX, beyond which
 * requests get REJECT busy with a retry time. To a neighbour whose BITFIELD
 * said "mux", every chunk goes as CHUNK pieces, and up to WS_MUX_MAX
 * uploads stream at once, their pieces interleaved: at most one of a chunk
 * we hold (they go one after the other, each at the link's pace) and the
 * rest of chunks still arriving from S3, so a chunk that started arriving
 * while another was being sent moves on as its bytes come, not once the
 * other is done. An upload reads its chunk in
 * PEER_SERVE_PIECE_BYTES pieces with uv_fs_read into PEER_SERVE_BUFS
 * buffers of its own and hands each to wire_conn_send_raw; a buffer is read
 * again only when the socket took it, so an upload never holds more than
 * its buffers however slow the link. The upload rate limit delays the next
 * read. (wire_conn has no sendfile path; the pieces are read into user
 * memory from the page cache.)
 *
 * A chunk we are fetching from S3 is served as it arrives ("live", to a
 * neighbour whose BITFIELD said "live", after our HAVE with "p"): the
 * upload reads only bytes already written to the partial, sends each as a
 * CHUNK piece (body key "o", its offset in the chunk) and waits for more
 * (peer_serve_live_progress). Between pieces the connection carries other
 * frames (a payload holds back every frame behind it until it ends). The
 * last byte goes out only once our own hash check passed, so a complete
 * chunk from us always verifies; if the fetch fails, the upload ends with a
 * REJECT not held for it. The requester checks the chunk's hash either way.
 *
 * Upload states:
 *   OPENING (blob open on a worker) --> STREAMING --all sent/failed-->
 *   CLOSING (fd closing with uv_fs_close) --> freed
 * A neighbour that closes detaches (up->n = NULL); the upload then only
 * drains its reads and closes its fd.
 *
 * Owns: the upload objects, their buffers and fds, manifest copies being
 * sent. Thread: loop thread; the blob open runs on a worker.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "swarm/swarm-int.h"
#include "fetch/origin.h"
#include "ws_log.h"

typedef enum { UP_OPENING, UP_STREAMING, UP_CLOSING, UP_STATE_LAST } up_state_t;

typedef struct {
  uv_fs_t fs;
  peer_up_t *up;
  char *data;
  uint32_t len;
  uint32_t pos; /* offset in the chunk */
  int busy;     /* being read, waiting its turn, or being sent */
  int filled;   /* read done, not yet handed to the socket */
} up_buf_t;

struct peer_up_s {
  peer_swarm_t *s;
  peer_nbr_t *n; /* weak; NULL once the neighbour is gone */
  up_state_t state;
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t g, req_id;
  ws_hash_t sha256;  /* blob to open */
  peer_file_t *file; /* live: reference held; else NULL */
  uint32_t j;        /* live: chunk in file */
  bool live;         /* not verified here yet: send what has arrived */
  bool pieces;       /* every buffer goes as a CHUNK piece (live or mux) */
  bool was_live;     /* started live (counted as served live) */
  bool rejected;     /* pieces: our REJECT ended it */
  int fd;
  uint64_t off; /* chunk's first byte in the file */
  uint32_t len;
  uint32_t read_pos; /* bytes whose read was issued */
  uint32_t send_pos; /* bytes handed to the socket (in order) */
  uint32_t sent;     /* bytes the socket took */
  unsigned reads, raws;
  int header_sent;
  int status;
  int open_status;
  up_buf_t bufs[PEER_SERVE_BUFS];
  uv_fs_t close_fs;
};

static void up_pump(peer_up_t *up);

static void serve_unlink(peer_nbr_t *n, peer_up_t *up) {
  for (uint32_t i = 0; i < n->nups; i++) {
    if (n->ups[i] != up)
      continue;
    memmove(&n->ups[i], &n->ups[i + 1], (n->nups - i - 1) * sizeof(n->ups[0]));
    n->nups--;
    return;
  }
}

/* Pumps n's uploads whose chunk is (file, j), or all when file is NULL. An
 * upload may end (and leave n->ups) inside up_pump. */
static void serve_pump(peer_nbr_t *n, const peer_file_t *file, uint32_t j) {
  uint32_t i = 0;
  while (i < n->nups) {
    peer_up_t *up = n->ups[i];
    if (file == NULL || (up->live && up->file == file && up->j == j))
      up_pump(up);
    if (i < n->nups && n->ups[i] == up)
      i++;
  }
}

static void up_set_state(peer_up_t *up, up_state_t to) {
  static const uint8_t legal[UP_STATE_LAST][UP_STATE_LAST] = {
      [UP_OPENING] = {[UP_STREAMING] = 1, [UP_CLOSING] = 1},
      [UP_STREAMING] = {[UP_CLOSING] = 1},
  };
  assert(legal[up->state][to]);
  up->state = to;
}

static void serve_reject(peer_nbr_t *n, const uint8_t *digest, uint32_t chunk,
                         uint32_t req_id, ws_reject_reason_t why) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_REJECT;
  memcpy(m.u.reject.digest, digest, WS_PROTO_DIGEST_LEN);
  m.u.reject.chunk = chunk;
  m.u.reject.req_id = req_id;
  m.u.reject.reason = why;
  m.u.reject.retry_after_ms = why == WS_REJECT_BUSY ? PEER_BUSY_RETRY_MS : 0;
  n->s->d->metrics.requests_rejected++;
  (void)peer_nbr_send(n, &m);
}

/* ---- upload lifecycle --------------------------------------------------- */

static void up_free(peer_up_t *up) {
  for (unsigned i = 0; i < PEER_SERVE_BUFS; i++)
    free(up->bufs[i].data);
  if (up->file != NULL)
    peer_file_unref(up->file);
  assert(up->s->up_alive > 0);
  up->s->up_alive--;
  free(up);
}

static void up_close_cb(uv_fs_t *fs) {
  peer_up_t *up = fs->data;
  uv_fs_req_cleanup(fs);
  up_free(up);
}

/* Ends the upload once nothing of it is in flight: the neighbour may start
 * its next one, the fd closes asynchronously. */
static void up_maybe_end(peer_up_t *up) {
  /* OPENING: the open job is out; up_open_after decides. */
  if (up->state != UP_STREAMING || up->reads > 0 || up->raws > 0)
    return;
  if (up->state == UP_STREAMING && up->status == 0 && up->n != NULL &&
      up->sent < up->len)
    return;
  peer_swarm_t *s = up->s;
  peer_nbr_t *n = up->n;
  up_set_state(up, UP_CLOSING);
  assert(s->uploads > 0);
  s->uploads--;
  if (up->status == 0 && up->sent == up->len) {
    s->d->metrics.chunks_served++;
    s->d->metrics.served_live += up->was_live;
  }
  if (n != NULL) {
    serve_unlink(n, up);
    up->n = NULL;
  }
  up->close_fs.data = up;
  if (up->fd < 0 ||
      uv_fs_close(&s->d->loop, &up->close_fs, up->fd, up_close_cb) != 0)
    up_free(up);
  if (n != NULL)
    peer_serve_next(n);
}

static void up_fail(peer_up_t *up, int err) {
  if (up->status == 0)
    up->status = err;
  /* Pieces: no payload is left open between them; a REJECT ends it (not
   * after a CANCEL: the requester has forgotten it). */
  if (up->pieces) {
    if (!up->rejected && up->n != NULL && err != WS_ECANCELED)
      serve_reject(up->n, up->digest, up->g, up->req_id, WS_REJECT_NOT_HAVE);
    up->rejected = true;
    return;
  }
  /* A payload that was announced cannot be cut short: the connection goes
   * (its other transfers are retried elsewhere). */
  if (up->header_sent && up->n != NULL && up->sent < up->len)
    peer_nbr_close(up->n, WS_BYE_PROTOCOL);
}

static void up_raw_done(wire_conn_t *c, void *arg, int status) {
  up_buf_t *b = arg;
  peer_up_t *up = b->up;
  up->raws--;
  b->busy = 0;
  if (status == 0) {
    up->sent += b->len;
    up->s->d->metrics.peer_tx_bytes += b->len;
  } else {
    up_fail(up, status);
  }
  up_pump(up);
}

static void up_read_cb(uv_fs_t *fs) {
  up_buf_t *b = fs->data;
  peer_up_t *up = b->up;
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
  if (up->s->d->cfg->test_corrupt_serve && b->pos == 0)
    b->data[0] ^= 0x5a;
#endif
  b->filled = 1;
  up_pump(up);
}

/* The CHUNK frame for len bytes from off: the whole chunk, or one piece of
 * it (pieces). peer_nbr_send's result. */
static int up_send_header(peer_up_t *up, uint32_t off, uint32_t len) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memcpy(m.u.chunk.digest, up->digest, WS_PROTO_DIGEST_LEN);
  m.u.chunk.chunk = up->g;
  m.u.chunk.req_id = up->req_id;
  m.u.chunk.len = len;
  m.u.chunk.piece = up->pieces;
  m.u.chunk.off = off;
  return peer_nbr_send(up->n, &m);
}

/* Hands filled buffers to the socket in chunk order (reads may complete
 * out of order). */
static void up_send_filled(peer_up_t *up) {
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
        return; /* on_drain -> peer_serve_next -> here */
      if (rc != 0) {
        up_fail(up, rc);
        return;
      }
    }
    b->filled = 0;
    int rc = wire_conn_send_raw(up->n->c, b->data, b->len, up_raw_done, b);
    if (rc != 0) {
      b->busy = 0;
      up_fail(up, rc);
      return;
    }
    up->raws++;
    up->send_pos += b->len;
    uint64_t ms = peer_rate_charge(&up->s->up_rate, b->len);
    if (ms > 0)
      peer_nbr_timer_arm(up->n, ms);
  }
}

/* A live upload: how far it may read. 0 with *limit set, or WS_ENOTFOUND
 * when the fetch failed (the chunk is neither held nor arriving). */
static int up_live_limit(peer_up_t *up, uint32_t *limit) {
  peer_srel_t *srel = peer_srel_find(up->s, up->digest);
  uint64_t written;
  if (srel != NULL && srel->state != PEER_SREL_RESOLVING &&
      up->g < srel->total && ws_bitfield_test(&srel->have, up->g)) {
    up->live = false; /* verified: the rest may go */
    *limit = up->len;
    return 0;
  }
  if (!peer_origin_live(up->s->d->origin, up->file, up->j, &written))
    return WS_ENOTFOUND;
  /* Never the last byte before our own hash check passed. */
  *limit = written < up->len ? (uint32_t)written : up->len - 1;
  return 0;
}

/* Sends the header, then keeps every free buffer reading the next piece
 * (unless the upload rate says wait). */
static void up_pump(peer_up_t *up) {
  peer_nbr_t *n = up->n;
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
      return; /* on_drain -> peer_serve_next -> here */
    if (rc != 0) {
      up_fail(up, rc);
      up_maybe_end(up);
      return;
    }
    up->header_sent = 1;
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
    uint64_t ms = peer_rate_wait_ms(&up->s->up_rate);
    if (ms > 0) {
      peer_nbr_timer_arm(n, ms);
      break;
    }
    uint32_t k = limit - up->read_pos;
    if (k > PEER_SERVE_PIECE_BYTES)
      k = PEER_SERVE_PIECE_BYTES;
    b->up = up;
    b->len = k;
    b->pos = up->read_pos;
    b->fs.data = b;
    uv_buf_t ub = uv_buf_init(b->data, k);
    int rc = uv_fs_read(&up->s->d->loop, &b->fs, up->fd, &ub, 1,
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
  peer_up_t *up = arg;
  uint64_t size = 0;
  up->open_status =
      ws_store_blob_open(up->s->d->store, &up->sha256, &up->fd, &size);
  if (up->open_status == 0 && up->off + up->len > size)
    up->open_status = WS_ETRUNCATED;
}

static void up_open_after(void *arg, int status) {
  peer_up_t *up = arg;
  int rc = status != 0 ? status : up->open_status;
  if (rc != 0) {
    if (up->n != NULL)
      serve_reject(up->n, up->digest, up->g, up->req_id, WS_REJECT_NOT_HAVE);
    up->status = rc;
  }
  up_set_state(up, UP_STREAMING);
  up_pump(up);
}

/* 1 when n takes the chunks of release digest in interleaved pieces. */
static bool serve_mux(peer_nbr_t *n, const uint8_t *digest) {
  peer_nbr_rel_t *r = peer_nbr_rel_find(n, digest);
  return r != NULL && r->mux_ok;
}

/* 1 when we hold chunk g of srel, or are fetching it from S3 now and n
 * takes chunks in pieces. */
static int serve_can(peer_nbr_t *n, peer_srel_t *srel, uint32_t g) {
  peer_nbr_rel_t *r = peer_nbr_rel_find(n, srel->digest.b);
  peer_file_t *f;
  uint32_t j, len;
  uint64_t off;
  return ws_bitfield_test(&srel->have, g) ||
         (r != NULL && r->live_ok &&
          peer_srel_chunk_live(srel, g, &f, &j, NULL, &off, &len) == 0);
}

static void serve_start_chunk(peer_nbr_t *n, const ws_request_t *r) {
  peer_swarm_t *s = n->s;
  peer_srel_t *srel = peer_srel_find(s, r->digest);
  if (srel == NULL || srel->state == PEER_SREL_RESOLVING ||
      r->chunk >= srel->total || !serve_can(n, srel, r->chunk)) {
    serve_reject(n, r->digest, r->chunk, r->req_id, WS_REJECT_NOT_HAVE);
    return;
  }
  peer_up_t *up = calloc(1, sizeof(*up));
  if (up == NULL) {
    serve_reject(n, r->digest, r->chunk, r->req_id, WS_REJECT_BUSY);
    return;
  }
  up->s = s;
  up->fd = -1;
  memcpy(up->digest, r->digest, WS_PROTO_DIGEST_LEN);
  up->g = r->chunk;
  up->req_id = r->req_id;
  for (unsigned i = 0; i < PEER_SERVE_BUFS; i++) {
    up->bufs[i].data = malloc(PEER_SERVE_PIECE_BYTES);
    if (up->bufs[i].data == NULL) {
      s->up_alive++;
      up_free(up);
      serve_reject(n, r->digest, r->chunk, r->req_id, WS_REJECT_BUSY);
      return;
    }
  }
  int rc;
  if (ws_bitfield_test(&srel->have, r->chunk)) {
    rc = peer_srel_chunk_source(srel, r->chunk, &up->sha256, &up->fd, &up->off,
                                &up->len);
  } else {
    rc = peer_srel_chunk_live(srel, r->chunk, &up->file, &up->j, &up->fd,
                              &up->off, &up->len);
    up->live = up->was_live = up->pieces = rc == 0;
  }
  if (serve_mux(n, r->digest))
    up->pieces = true;
  s->up_alive++;
  if (rc < 0) {
    up_free(up);
    serve_reject(n, r->digest, r->chunk, r->req_id, WS_REJECT_NOT_HAVE);
    return;
  }
  up->n = n;
  assert(n->nups < WS_MUX_MAX);
  n->ups[n->nups++] = up;
  s->uploads++;
  up->state = UP_OPENING;
  if (rc == 0) {
    up_set_state(up, UP_STREAMING);
    up_pump(up);
    return;
  }
  rc = peer_daemon_queue(s->d, up_open_work, up_open_after, up);
  if (rc != 0)
    up_open_after(up, rc);
}

/* ---- manifests ---------------------------------------------------------- */

static void serve_mani_done(wire_conn_t *c, void *arg, int status) {
  peer_nbr_t *n = wire_conn_user(c);
  free(arg);
  n->s->mani_sends--;
  n->mani_open = false;
  peer_serve_next(n);
}

static void serve_manifest(peer_nbr_t *n, const ws_request_t *r) {
  peer_swarm_t *s = n->s;
  peer_srel_t *srel = peer_srel_find(s, r->digest);
  if (srel == NULL || srel->mbytes == NULL || srel->mlen == 0 ||
      srel->mlen > WS_MAX_PAYLOAD) {
    serve_reject(n, r->digest, UINT32_MAX, 0, WS_REJECT_UNKNOWN);
    return;
  }
  if (s->mani_sends >= PEER_MANIFEST_SENDS_MAX) {
    serve_reject(n, r->digest, UINT32_MAX, 0, WS_REJECT_BUSY);
    return;
  }
  /* A copy: the record may go (READY -> evicted) while the socket sends. */
  char *copy = malloc(srel->mlen);
  if (copy == NULL) {
    serve_reject(n, r->digest, UINT32_MAX, 0, WS_REJECT_BUSY);
    return;
  }
  memcpy(copy, srel->mbytes, srel->mlen);
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_MANIFEST;
  memcpy(m.u.manifest.digest, r->digest, WS_PROTO_DIGEST_LEN);
  m.u.manifest.len = (uint32_t)srel->mlen;
  if (peer_nbr_send(n, &m) != 0) {
    free(copy);
    return;
  }
  if (wire_conn_send_raw(n->c, copy, srel->mlen, serve_mani_done, copy) != 0) {
    free(copy);
    peer_nbr_close(n, WS_BYE_PROTOCOL);
    return;
  }
  s->mani_sends++;
  n->mani_open = true;
}

/* ---- queue -------------------------------------------------------------- */

void peer_serve_request(peer_nbr_t *n, uint8_t type, const ws_request_t *r) {
  peer_swarm_t *s = n->s;
  if (s->stopping)
    return;
  if (type == WS_MSG_REQUEST) {
    peer_srel_t *srel = peer_srel_find(s, r->digest);
    if (srel == NULL || srel->state == PEER_SREL_RESOLVING) {
      serve_reject(n, r->digest, r->chunk, r->req_id, WS_REJECT_UNKNOWN);
      return;
    }
    if (r->chunk >= srel->total) {
      serve_reject(n, r->digest, r->chunk, r->req_id, WS_REJECT_BAD);
      return;
    }
    if (!serve_can(n, srel, r->chunk)) {
      serve_reject(n, r->digest, r->chunk, r->req_id, WS_REJECT_NOT_HAVE);
      return;
    }
  }
  if (n->sq_len == PEER_SERVE_QUEUE_MAX) {
    serve_reject(n, r->digest, type == WS_MSG_REQUEST ? r->chunk : UINT32_MAX,
                 r->req_id, WS_REJECT_BUSY);
    return;
  }
  peer_serve_req_t *q = &n->sq[(n->sq_head + n->sq_len) % PEER_SERVE_QUEUE_MAX];
  q->type = type;
  q->r = *r;
  n->sq_len++;
  peer_serve_next(n);
}

void peer_serve_cancel(peer_nbr_t *n, const ws_request_t *r) {
  for (uint32_t i = 0; i < n->nups; i++) {
    peer_up_t *up = n->ups[i];
    if (up->pieces && up->g == r->chunk && up->req_id == r->req_id &&
        memcmp(up->digest, r->digest, WS_PROTO_DIGEST_LEN) == 0) {
      up_fail(up, WS_ECANCELED); /* the requester gave up on it */
      up_pump(up);
      return;
    }
  }
  for (uint32_t k = 0; k < n->sq_len; k++) {
    peer_serve_req_t *q = &n->sq[(n->sq_head + k) % PEER_SERVE_QUEUE_MAX];
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
static bool serve_held(peer_nbr_t *n, const peer_serve_req_t *q) {
  peer_srel_t *srel = peer_srel_find(n->s, q->r.digest);
  return q->type == WS_MSG_REQUEST && srel != NULL &&
         srel->state != PEER_SREL_RESOLVING && q->r.chunk < srel->total &&
         ws_bitfield_test(&srel->have, q->r.chunk);
}

/* The queued request to start now, or -1. With nothing streaming: the first
 * manifest or held chunk, else the first request (it would hold the others
 * back). Beside uploads to a "mux" neighbour: a held chunk when none of
 * them is one, else a chunk arriving from S3, unless a manifest is queued
 * before it. */
static int serve_queue_choose(peer_nbr_t *n) {
  int first_live = -1;
  bool held_busy = false;
  if (n->nups == WS_MUX_MAX)
    return -1;
  for (uint32_t i = 0; i < n->nups; i++)
    held_busy |= !n->ups[i]->live;
  for (uint32_t k = 0; k < n->sq_len; k++) {
    const peer_serve_req_t *q = &n->sq[(n->sq_head + k) % PEER_SERVE_QUEUE_MAX];
    if (n->nups == 0) {
      if (q->type == WS_MSG_MANIFEST_REQ || serve_held(n, q))
        return (int)k;
      continue;
    }
    if (q->type == WS_MSG_MANIFEST_REQ)
      return -1; /* it goes alone, next: no more uploads before it */
    if (!serve_mux(n, q->r.digest))
      continue;
    if (serve_held(n, q)) {
      if (!held_busy)
        return (int)k;
    } else if (first_live < 0) {
      first_live = (int)k;
    }
  }
  return n->nups == 0 ? 0 : first_live;
}

/* Takes entry k out of n's queue. */
static peer_serve_req_t serve_queue_take(peer_nbr_t *n, uint32_t k) {
  peer_serve_req_t q = n->sq[(n->sq_head + k) % PEER_SERVE_QUEUE_MAX];
  for (uint32_t m = k; m > 0; m--)
    n->sq[(n->sq_head + m) % PEER_SERVE_QUEUE_MAX] =
        n->sq[(n->sq_head + m - 1) % PEER_SERVE_QUEUE_MAX];
  n->sq_head = (n->sq_head + 1) % PEER_SERVE_QUEUE_MAX;
  n->sq_len--;
  return q;
}

void peer_serve_next(peer_nbr_t *n) {
  peer_swarm_t *s = n->s;
  /* An upload that ends inside calls back here: loop instead. */
  if (n->serving) {
    n->serve_again = true;
    return;
  }
  n->serving = true;
  do {
    n->serve_again = false;
    if (n->state != PEER_NBR_READY || n->mani_open)
      break;
    serve_pump(n, NULL, 0);
    int k;
    while (n->sq_len > 0 && !n->mani_open && n->state == PEER_NBR_READY &&
           (k = serve_queue_choose(n)) >= 0) {
      if (n->sq[(n->sq_head + (uint32_t)k) % PEER_SERVE_QUEUE_MAX].type ==
              WS_MSG_REQUEST &&
          s->uploads >= PEER_UPLOADS_MAX && n->nups > 0)
        break; /* the next to end makes room */
      peer_serve_req_t q = serve_queue_take(n, (uint32_t)k);
      if (q.type == WS_MSG_MANIFEST_REQ)
        serve_manifest(n, &q.r);
      else if (s->uploads < PEER_UPLOADS_MAX)
        serve_start_chunk(n, &q.r);
      else
        /* Every upload slot is taken: refuse the whole queue rather than
         * hold requests whose senders could ask someone idle. */
        serve_reject(n, q.r.digest, q.r.chunk, q.r.req_id, WS_REJECT_BUSY);
    }
  } while (n->serve_again);
  n->serving = false;
}

void peer_serve_detach(peer_nbr_t *n) {
  n->sq_len = 0;
  while (n->nups > 0) {
    peer_up_t *up = n->ups[--n->nups];
    up->n = NULL;
    if (up->status == 0)
      up->status = WS_ECANCELED;
    if (up->state == UP_STREAMING)
      up_maybe_end(up);
  }
}

void peer_serve_live_progress(peer_swarm_t *s, peer_file_t *file, uint32_t j) {
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next)
    serve_pump(n, file, j);
}
