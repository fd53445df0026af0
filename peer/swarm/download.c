/* recv.c - one chunk arriving from a neighbour: payload pieces are copied
 * into buffers of the daemon's bounded pool and written at the chunk's
 * offset in the partial file (uv_fs_write); when the last byte is on disk
 * a worker hashes the chunk range back (page cache) against the manifest's
 * chunk hash and commits it to the bitmap. A match goes to
 * peer_file_chunk_done(PEER_SRC_PEER, 0); a mismatch bans the sender and
 * gives the chunk back (WS_EDIGEST). Whole-file manifests (no chunk
 * hashes) commit unchecked: the file's sha256 decides at the end.
 *
 *   RECEIVING --payload ended--> DRAINING --writes done--> VERIFYING --> freed
 *   RECEIVING --connection lost--> DRAINING --writes done--> freed (canceled)
 *
 * Back-pressure: a piece is always taken whole (wire_conn hands it out
 * once), so rx keeps room for the next one (<= WIRE_READ_BUF_BYTES): when
 * the current buffer has less room and the pool has no spare, it parks on
 * the pool and the neighbour pauses its reads until a buffer comes back.
 *
 * Owns: its buffers while filled or written, its write requests, its verify
 * job. Holds a file reference and the chunk INFLIGHT (rx_busy) until it
 * reports. Borrows the neighbour weakly (cleared by peer_rx_end).
 * Thread: loop thread; rx_verify_work on a worker (file handle + rx only).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/bufpool.h"
#include "fetch/chunk_writer.h"
#include "swarm/swarm-int.h"
#include "ws_log.h"

typedef enum {
  RX_RECEIVING,
  RX_DRAINING,
  RX_VERIFYING,
  RX_STATE_LAST
} rx_state_t;

struct peer_rx_s {
  peer_swarm_t *s;
  peer_nbr_t *n; /* weak; NULL after peer_rx_end */
  rx_state_t state;
  peer_file_t *file; /* reference held */
  uint32_t j;
  uint64_t off; /* chunk's first byte in the file */
  uint32_t len;
  uint32_t received;
  peer_buf_t *cur;   /* filling */
  uint64_t cur_off;  /* file offset of cur->data[0] */
  peer_buf_t *spare; /* reserved for the next piece */
  unsigned writes;
  int status;
  char node_id[WS_NODE_ID_MAX + 1]; /* for the ban */
  char host[64];
  uint16_t port;
  peer_bufwait_t wait;
  peer_chunkw_t cw; /* ordered, hashed writes of the chunk */
};

static void rx_maybe_finish(peer_rx_t *rx);
static void rx_written(void *arg, peer_buf_t *buf, int status);

static void rx_set_state(peer_rx_t *rx, rx_state_t to) {
  static const uint8_t legal[RX_STATE_LAST][RX_STATE_LAST] = {
      [RX_RECEIVING] = {[RX_DRAINING] = 1},
      [RX_DRAINING] = {[RX_VERIFYING] = 1},
  };
  assert(legal[rx->state][to]);
  rx->state = to;
}

unsigned peer_rx_count(const peer_swarm_t *s) {
  return s->rx_alive;
}

static void rx_wake(peer_bufwait_t *w) {
  peer_rx_t *rx = (peer_rx_t *)((char *)w - offsetof(peer_rx_t, wait));
  peer_bufpool_t *pool = rx->s->d->pool;
  if (rx->state != RX_RECEIVING || rx->n == NULL)
    return;
  if (rx->spare == NULL)
    rx->spare = peer_bufpool_get(pool);
  if (rx->spare == NULL) {
    peer_bufpool_wait(pool, &rx->wait);
    return;
  }
  peer_nbr_rx_resume(rx->n);
}

peer_rx_t *peer_rx_new(peer_swarm_t *s, peer_nbr_t *n, peer_file_t *file,
                       uint32_t j) {
  peer_rx_t *rx = calloc(1, sizeof(*rx));
  if (rx == NULL)
    return NULL;
  rx->s = s;
  rx->n = n;
  rx->file = file;
  peer_file_ref(file);
  rx->j = j;
  rx->off = (uint64_t)j * file->chunk_size;
  rx->len = peer_file_chunk_len(file, j);
  rx->state = RX_RECEIVING;
  rx->wait.cb = rx_wake;
  snprintf(rx->node_id, sizeof(rx->node_id), "%s", n->node_id);
  snprintf(rx->host, sizeof(rx->host), "%s", n->host);
  rx->port = n->port;
  if (peer_chunkw_init(&rx->cw, s->d, file, j, rx_written, rx) != 0) {
    peer_file_unref(file);
    free(rx);
    return NULL;
  }
  s->rx_alive++;
  return rx;
}

/* ---- writes ------------------------------------------------------------- */

static void rx_fail(peer_rx_t *rx, int err) {
  if (rx->status == 0)
    rx->status = err;
}

static void rx_written(void *arg, peer_buf_t *buf, int status) {
  peer_rx_t *rx = arg;
  peer_bufpool_t *pool = rx->s->d->pool;
  if (status != 0)
    rx_fail(rx, status);
  rx->writes--;
  rx_maybe_finish(rx); /* may free rx */
  peer_bufpool_put(pool, buf);
}

static void rx_flush(peer_rx_t *rx) {
  peer_bufpool_t *pool = rx->s->d->pool;
  peer_buf_t *buf = rx->cur;
  rx->cur = NULL;
  if (buf == NULL)
    return;
  if (buf->len == 0 || rx->status != 0) {
    peer_bufpool_put(pool, buf);
    return;
  }
  int rc = peer_chunkw_write(&rx->cw, buf, rx->cur_off);
  if (rc != 0) {
    rx_fail(rx, rc);
    peer_bufpool_put(pool, buf);
    return;
  }
  rx->writes++;
}

/* The next buffer: the reserved spare, else one from the pool. */
static peer_buf_t *rx_next_buf(peer_rx_t *rx) {
  peer_buf_t *b = rx->spare;
  rx->spare = NULL;
  if (b == NULL)
    b = peer_bufpool_get(rx->s->d->pool);
  return b;
}

int peer_rx_data(peer_rx_t *rx, const uint8_t *p, size_t len) {
  peer_bufpool_t *pool = rx->s->d->pool;
  if (rx->status != 0)
    return rx->status;
  if (len > rx->len - rx->received) {
    rx_fail(rx, WS_EPROTO);
    return WS_EPROTO;
  }
  while (len > 0) {
    if (rx->cur == NULL) {
      rx->cur = rx_next_buf(rx);
      if (rx->cur == NULL) {
        /* The room promise was broken (pieces larger than the wire's read
         * buffer): give up on this chunk rather than buffer without bound. */
        rx_fail(rx, WS_ELIMIT);
        return WS_ELIMIT;
      }
      rx->cur_off = rx->off + rx->received;
    }
    size_t k = rx->cur->cap - rx->cur->len;
    if (k > len)
      k = len;
    memcpy(rx->cur->data + rx->cur->len, p, k);
    rx->cur->len += k;
    rx->received += (uint32_t)k;
    p += k;
    len -= k;
    if (rx->cur->len == rx->cur->cap || rx->received == rx->len)
      rx_flush(rx);
  }
  if (rx->received == rx->len)
    return 0;
  /* Room for the next piece: what cur has left, else a spare. */
  size_t room = rx->cur != NULL ? rx->cur->cap - rx->cur->len : 0;
  if (room >= WIRE_READ_BUF_BYTES || rx->spare != NULL)
    return 0;
  rx->spare = peer_bufpool_get(pool);
  if (rx->spare != NULL)
    return 0;
  peer_bufpool_wait(pool, &rx->wait);
  return 1;
}

int peer_rx_reserve(peer_rx_t *rx) {
  peer_bufpool_t *pool = rx->s->d->pool;
  if (rx->spare == NULL)
    rx->spare = peer_bufpool_get(pool);
  if (rx->spare != NULL)
    return 0;
  peer_bufpool_wait(pool, &rx->wait);
  return 1;
}

/* ---- verify and report -------------------------------------------------- */

static void rx_free(peer_rx_t *rx) {
  peer_swarm_t *s = rx->s;
  peer_file_t *file = rx->file;
  int status = rx->status;
  uint32_t j = rx->j;
  peer_bufpool_unwait(s->d->pool, &rx->wait);
  if (rx->spare != NULL)
    peer_bufpool_put(s->d->pool, rx->spare);
  if (status == WS_EDIGEST) {
    peer_swarm_ban(s, rx->node_id, rx->host, rx->port,
                   "sent a chunk that failed its hash");
  }
  file->rx_busy[j] = 0;
  if (status == 0)
    s->d->metrics.chunks_from_peers++;
  assert(s->rx_alive > 0);
  s->rx_alive--;
  peer_chunkw_cleanup(&rx->cw);
  free(rx);
  /* WS_EDIGEST is counted by the file (retries); anything else from the
   * network side just gives the chunk back. */
  peer_file_chunk_done(
      file, j, PEER_SRC_PEER,
      status == 0 || status == WS_EDIGEST ? status : WS_ECANCELED, NULL);
  peer_file_unref(file);
  peer_swarm_kick(s);
}

/* [worker] */
static void rx_verify_work(void *arg) {
  peer_rx_t *rx = arg;
  rx->status = peer_chunkw_verify_commit(&rx->cw);
}

static void rx_verify_after(void *arg, int status) {
  peer_rx_t *rx = arg;
  if (status != 0 && rx->status == 0)
    rx->status = status;
  if (rx->status != 0 && rx->status != WS_EDIGEST)
    WS_LOGW("chunk %u of %s from %s: %s", rx->j, rx->file->mf.name, rx->node_id,
            ws_strerror(rx->status));
  rx_free(rx);
}

static void rx_maybe_finish(peer_rx_t *rx) {
  if (rx->state != RX_DRAINING || rx->writes > 0)
    return;
  if (rx->status != 0 || rx->received != rx->len || rx->file->pf == NULL) {
    if (rx->status == 0)
      rx->status = WS_ECANCELED;
    rx_free(rx);
    return;
  }
  rx_set_state(rx, RX_VERIFYING);
  int rc = peer_daemon_queue(rx->s->d, rx_verify_work, rx_verify_after, rx);
  if (rc != 0) {
    rx->status = rc;
    rx_free(rx);
  }
}

void peer_rx_end(peer_rx_t *rx, int status) {
  peer_bufpool_t *pool = rx->s->d->pool;
  rx->n = NULL;
  if (status != 0)
    rx_fail(rx, status);
  else if (rx->received != rx->len)
    rx_fail(rx, WS_ETRUNCATED);
  peer_bufpool_unwait(pool, &rx->wait);
  rx_flush(rx);
  rx_set_state(rx, RX_DRAINING);
  rx_maybe_finish(rx); /* may free rx */
  /* A parked neighbour may be waiting for the buffer this one had. */
  peer_bufpool_kick(pool);
}
