/* wire_conn_io.c - the byte paths of a wire_conn: reading and delivering
 * frames (handshake frames consumed here, authenticated frames decoded and
 * handed to on_frame, payload pieces to on_payload), and the send queue.
 * Part of the ws_wire library. Loop thread only.
 *
 * Reading: a WIRE_READ_BUF_BYTES buffer, held by a connection only while it
 * has input not yet delivered. uv_read runs only while the buffer is fully
 * delivered, the connection is in HANDSHAKE or OPEN and the user has not
 * paused; bytes left when the user pauses stay in rbuf[rpos, rlen) and are
 * delivered after resume. Once everything read is delivered the buffer goes
 * back (a partial frame is already in the frame reader), so an idle
 * connection holds none: a tracker with 10,000 nodes would otherwise keep
 * 10,000 buffers and touched pages of each. The thread keeps one spare so
 * a busy loop does not allocate per read, freed with its last connection.
 * Payload pieces point into rbuf (never copied); the frame reader buffers
 * at most one header + body + MAC within the limits in force (pre-auth:
 * 4 KiB body, no payload).
 *
 * Handshake (docs/protocol.md section 4): both send HELLO at once; the
 * initiator sends AUTH on the responder's HELLO; the responder checks it and
 * only then sends its AUTH and is OPEN; the initiator is OPEN when the
 * responder's AUTH checks. Anything but HELLO/AUTH/ERROR/GOODBYE before that
 * closes the connection, so a side without the key gets one HELLO and
 * nothing else.
 *
 * Sending: every item is handed to uv_write at once (libuv keeps them in
 * order) except frames sent while an outbound payload is open: those are
 * sealed in call order and held until the payload's last byte is queued;
 * and except while the file queue holds items (wire_conn_file.c: from a
 * payload piece sent from a file until the queue is empty again, every
 * write goes through it, on a worker, in order).
 *
 * Sealed payloads (both HELLOs v >= 2, docs/protocol.md section 4): each
 * piece the caller gives is encrypted when it is written, in stream order
 * (wire_item_seal): into a buffer of its own (the caller's buffer may be
 * going to several neighbours at once), or in place when the caller allows
 * it; the tag rides after the last piece, in the same write. Inbound
 * pieces are decrypted in place in
 * rbuf before on_payload sees them, and the payload's last call (len 0,
 * last set) comes only once its tag has checked; a tag that fails closes
 * the connection with WS_EAUTH, so nothing altered on the path is ever
 * handed over as complete.
 * sendq_bytes counts everything queued and not yet written; frames are
 * refused past sendq_max_bytes, raw payload pieces never (their memory is
 * the caller's). File pieces (wire_conn_send_file) hold no memory at all
 * and count towards neither bound (io_held_bytes): the caller sizes them
 * to the connection's rate, and a fast connection's large pieces must not
 * lock its frames out.
 */
#include "wire_conn-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

/* A frame never exceeds header + WS_MAX_BODY + MAC; the encoder enforces the
 * body limit itself, so the pbuf cap only has to leave room for it. */
#define WIRE_FRAME_MAX (WS_FRAME_HDR_LEN + WS_MAX_BODY + WS_FRAME_MAC_LEN)

/* ---- send queue -------------------------------------------------------- */

static void item_free(wire_item_t *it) {
  ws_pbuf_free(&it->pb);
  free(it->sealed);
  free(it);
}

/* Queued bytes that hold memory (frames, raw pieces): what sendq_max_bytes
 * and sendq_low_bytes bound. */
static size_t io_held_bytes(const wire_conn_t *c) {
  return c->st.sendq_bytes - c->st.sendq_file_bytes;
}

static void io_check_goodbye_done(wire_conn_t *c) {
  if (c->state == WC_GOODBYE && c->bye_queued && c->writes_inflight == 0 &&
      c->held_head == NULL && c->payload_left == 0 && c->fq_head == NULL &&
      !c->fq_job)
    wire_conn_close(c, 0);
}

void wire_io_item_written(wire_conn_t *c, wire_item_t *it, int status) {
  c->st.sendq_bytes -= it->len;
  if (it->file)
    c->st.sendq_file_bytes -= it->len;
  if (status == 0) {
    c->st.bytes_out += it->len;
    c->last_io_ms = uv_now(c->loop);
    wire_rate_written(c, it->len);
  }
  if (it->raw != NULL || it->file)
    it->done(c, it->arg, status); /* may close c; c stays allocated */
  item_free(it);
}

void wire_io_after_writes(wire_conn_t *c) {
  if (c->state == WC_OPEN && c->drain_wanted &&
      io_held_bytes(c) <= c->cfg.sendq_low_bytes) {
    c->drain_wanted = false;
    if (c->cbs.on_drain != NULL)
      c->cbs.on_drain(c);
  }
  io_check_goodbye_done(c);
}

static void io_on_write(uv_write_t *req, int status) {
  wire_item_t *it = req->data;
  wire_conn_t *c = it->c;

  c->writes_inflight--;
  wire_io_item_written(c, it, status);
  if (status < 0) {
    wire_conn_close(c, status);
    return;
  }
  wire_file_kick(c); /* a file piece may wait for libuv's queue to empty */
  wire_io_after_writes(c);
}

/* Hands it to uv_write, or to the file queue while that holds items (it
 * must not overtake them). The cipher steps it owes are done here, in
 * stream order; a piece and the tag after it go in one write. On failure
 * it is freed (frames) or left to the caller (raw) and the error
 * returned. */
static int io_write(wire_conn_t *c, wire_item_t *it) {
  uv_buf_t b[2];
  unsigned nb = 1;
  int rc;

  if (wire_file_queue_busy(c)) {
    wire_file_enqueue(c, it);
    return 0;
  }
  rc = wire_item_seal(c, it);
  if (rc == 0) {
    b[0] =
        uv_buf_init((char *)(uintptr_t)wire_item_bytes(it), (unsigned)it->dlen);
    if (it->len > it->dlen)
      b[nb++] = uv_buf_init((char *)it->tag, WS_PAYLOAD_TAG_LEN);
    it->req.data = it;
    rc = uv_write(&it->req, (uv_stream_t *)&c->tcp, b, nb, io_on_write);
  }
  if (rc < 0) {
    c->st.sendq_bytes -= it->len;
    if (it->raw == NULL)
      item_free(it);
    return rc;
  }
  c->writes_inflight++;
  return 0;
}

/* Queues a complete frame item: now, or behind the open payload. */
static int io_enqueue_frame(wire_conn_t *c, wire_item_t *it) {
  it->len = it->dlen = it->pb.len;
  c->st.sendq_bytes += it->len;
  c->st.frames_out++;
  if (io_held_bytes(c) > c->cfg.sendq_low_bytes)
    c->drain_wanted = true;
  if (c->payload_left > 0) {
    if (c->held_tail != NULL)
      c->held_tail->next = it;
    else
      c->held_head = it;
    c->held_tail = it;
    return 0;
  }
  return io_write(c, it);
}

static wire_item_t *io_item_new(wire_conn_t *c) {
  wire_item_t *it = calloc(1, sizeof(*it));

  if (it == NULL)
    return NULL;
  it->c = c;
  ws_pbuf_init(&it->pb, WIRE_FRAME_MAX);
  return it;
}

/* Encodes (and, once authenticated, seals) m into a new item. */
static int io_frame_build(wire_conn_t *c, const ws_msg_t *m, bool seal,
                          wire_item_t **out) {
  wire_item_t *it = io_item_new(c);
  int rc;

  if (it == NULL)
    return -ENOMEM;
  rc = ws_msg_encode(m, &it->pb);
  if (rc == WS_ELIMIT)
    rc = WS_EUSAGE; /* too big to ever send; not a full queue */
  if (rc == 0 && seal)
    rc = ws_frame_seal(&c->sess, &it->pb, 0);
  if (rc < 0) {
    item_free(it);
    return rc;
  }
  *out = it;
  return 0;
}

void wire_io_drop_held(wire_conn_t *c) {
  wire_item_t *it = c->held_head, *next;

  for (; it != NULL; it = next) {
    next = it->next;
    c->st.sendq_bytes -= it->len;
    item_free(it);
  }
  c->held_head = c->held_tail = NULL;
}

static int io_flush_held(wire_conn_t *c) {
  wire_item_t *it;
  int rc;

  while ((it = c->held_head) != NULL) {
    c->held_head = it->next;
    if (c->held_head == NULL)
      c->held_tail = NULL;
    it->next = NULL;
    rc = io_write(c, it);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* The direction's AEAD context, made at its first sealed payload: a
 * connection that never carries one (every tracker link) costs none. The
 * key is wiped from the session once the context holds it. */
static int io_aead(wire_conn_t *c, bool tx) {
  ws_payload_aead_t **a = tx ? &c->tx_aead : &c->rx_aead;
  uint8_t *key = tx ? c->sess.tx_pkey : c->sess.rx_pkey;

  if (*a != NULL)
    return 0;
  *a = ws_payload_aead_new(key, tx);
  if (*a == NULL)
    return -ENOMEM;
  sodium_memzero(key, 32);
  return 0;
}

int wire_conn_send(wire_conn_t *c, const ws_msg_t *msg) {
  wire_item_t *it;
  bool payload;
  int rc;

  if (c->state != WC_OPEN)
    return -ENOTCONN;
  if (msg->type == WS_MSG_HELLO || msg->type == WS_MSG_AUTH)
    return WS_EUSAGE;
  payload = ws_msg_type_has_payload(msg->type);
  if (payload && c->payload_left > 0)
    return WS_EBUSY;
  rc = io_frame_build(c, msg, false, &it);
  if (rc < 0)
    return rc;
  uint64_t plen = !payload                    ? 0
                  : msg->type == WS_MSG_CHUNK ? msg->u.chunk.len
                                              : msg->u.manifest.len;
  bool sealed = plen > 0 && c->sess.sealed;
  if (sealed)
    it->pb.data[4] |= WS_FRAME_F_SEALED;
  /* Cap check before sealing: a refused frame must not use a sequence
   * number. A frame always fits into an empty queue. */
  if (io_held_bytes(c) > 0 && io_held_bytes(c) + it->pb.len + WS_FRAME_MAC_LEN >
                                  c->cfg.sendq_max_bytes) {
    item_free(it);
    c->drain_wanted = true;
    return WS_ELIMIT;
  }
  uint64_t seq = c->sess.tx_seq;
  rc = ws_frame_seal(&c->sess, &it->pb, 0);
  if (rc == 0 && sealed)
    rc = io_aead(c, true);
  /* The payload's cipher starts when this frame is written (in stream
   * order: the file queue's worker may still be sealing the last one). */
  it->aead_begin = sealed;
  it->aead_seq = seq;
  if (rc < 0) {
    item_free(it);
    if (sealed)
      wire_conn_close(c, rc); /* the sequence number is spent */
    return rc;
  }
  rc = io_enqueue_frame(c, it);
  if (rc < 0) {
    wire_conn_close(c, rc);
    return rc;
  }
  /* Only after the header itself is queued, or it would be held back
   * behind its own payload. */
  if (payload)
    c->payload_left = plen;
  return 0;
}

static int io_send_raw(wire_conn_t *c, const void *buf, uint8_t *inplace,
                       size_t len, wire_conn_raw_cb done, void *arg) {
  wire_item_t *it;
  int rc;

  if (c->state != WC_OPEN && c->state != WC_GOODBYE)
    return -ENOTCONN;
  if (buf == NULL || done == NULL || len == 0 || len > c->payload_left ||
      len > UINT32_MAX)
    return WS_EUSAGE;
  it = calloc(1, sizeof(*it));
  if (it == NULL)
    return -ENOMEM;
  it->c = c;
  it->raw = buf;
  it->dlen = it->len = len;
  it->done = done;
  it->arg = arg;
  if (c->sess.sealed) { /* a payload is open (len <= payload_left) */
    it->seal = true;
    it->inplace = inplace; /* else a copy: buf may go to others too */
    it->last = len == c->payload_left;
    it->len += it->last ? WS_PAYLOAD_TAG_LEN : 0;
  }
  c->st.sendq_bytes += it->len;
  if (io_held_bytes(c) > c->cfg.sendq_low_bytes)
    c->drain_wanted = true;
  rc = io_write(c, it);
  if (rc < 0) {
    free(it->sealed);
    free(it); /* the buffer stays the caller's; no done callback */
    wire_conn_close(c, rc);
    return rc;
  }
  c->payload_left -= len;
  if (c->payload_left == 0)
    wire_io_payload_done(c);
  return 0;
}

void wire_io_payload_done(wire_conn_t *c) {
  int rc = io_flush_held(c);

  if (rc < 0)
    wire_conn_close(c, rc); /* the last piece is queued: done still runs */
}

int wire_conn_send_raw(wire_conn_t *c, const void *buf, size_t len,
                       wire_conn_raw_cb done, void *arg) {
  return io_send_raw(c, buf, NULL, len, done, arg);
}

int wire_conn_send_raw_inplace(wire_conn_t *c, void *buf, size_t len,
                               wire_conn_raw_cb done, void *arg) {
  return io_send_raw(c, buf, buf, len, done, arg);
}

int wire_io_send_goodbye(wire_conn_t *c, uint32_t reason) {
  wire_item_t *it;
  ws_msg_t m;
  int rc;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_GOODBYE;
  m.u.goodbye.reason = reason;
  rc = io_frame_build(c, &m, true, &it);
  if (rc < 0)
    return rc;
  rc = io_enqueue_frame(c, it);
  if (rc < 0)
    return rc;
  c->bye_queued = true;
  io_check_goodbye_done(c);
  return 0;
}

/* ---- handshake ---------------------------------------------------------- */

static int io_send_hs_frame(wire_conn_t *c, bool hello) {
  wire_item_t *it = io_item_new(c);
  ws_hello_t h;
  int rc;

  if (it == NULL)
    return -ENOMEM;
  if (hello) {
    memset(&h, 0, sizeof(h));
    memcpy(h.node_id, c->cfg.node_id, sizeof(h.node_id));
    memcpy(h.zone, c->cfg.zone, sizeof(h.zone));
    memcpy(h.labels, c->cfg.labels, sizeof(h.labels));
    h.rejoin = c->cfg.rejoin;
    h.port = c->cfg.listen_port;
    h.role = c->cfg.role;
    h.version = c->cfg.hello_version;
    rc = ws_hs_hello_encode(&c->hs, &h, &it->pb);
  } else {
    rc = ws_hs_auth_encode(&c->hs, &it->pb);
  }
  if (rc < 0) {
    item_free(it);
    return rc;
  }
  return io_enqueue_frame(c, it);
}

int wire_io_handshake_start(wire_conn_t *c) {
  int rc = ws_hs_init(&c->hs, c->cfg.key, c->initiator);

  if (rc < 0)
    return rc;
  rc = io_send_hs_frame(c, true);
  if (rc < 0)
    return rc;
  wire_io_update_reading(c);
  return c->state == WC_CLOSING ? c->status : 0;
}

/* Both AUTHs checked: session keys, post-auth limits, OPEN, on_ready. */
static int io_handshake_done(wire_conn_t *c) {
  int rc = ws_hs_session(&c->hs, &c->sess);

  if (rc < 0)
    return rc;
  ws_frame_reader_set_limits(c->rd, c->cfg.max_body, c->cfg.max_payload);
  wire_conn_set_state(c, WC_OPEN);
  c->last_io_ms = uv_now(c->loop);
  wire_conn_idle_arm(c);
  c->cbs.on_ready(c, &c->peer);
  return 0;
}

static int io_handshake_frame(wire_conn_t *c, const ws_frame_t *f) {
  ws_hello_t h;
  ws_msg_t m;
  int rc;

  switch (f->type) {
  case WS_MSG_HELLO:
    rc = ws_hs_hello_recv(&c->hs, f, &h);
    if (rc < 0)
      return rc;
    memcpy(c->peer.node_id, h.node_id, sizeof(c->peer.node_id));
    memcpy(c->peer.zone, h.zone, sizeof(c->peer.zone));
    memcpy(c->peer.labels, h.labels, sizeof(c->peer.labels));
    c->peer.rejoin = h.rejoin;
    c->peer.listen_port = h.port;
    c->peer.role = h.role;
    return c->initiator ? io_send_hs_frame(c, false) : 0;
  case WS_MSG_AUTH:
    rc = ws_hs_auth_recv(&c->hs, f);
    if (rc < 0)
      return rc;
    if (!c->initiator) {
      rc = io_send_hs_frame(c, false);
      if (rc < 0)
        return rc;
    }
    return ws_hs_done(&c->hs) ? io_handshake_done(c) : WS_EPROTO;
  case WS_MSG_ERROR:
    /* Unauthenticated: only the code is used, as the close status. */
    rc = ws_msg_decode(f, &m);
    if (rc < 0)
      return rc;
    rc = m.u.error.code < 0 ? m.u.error.code : WS_EPROTO;
    ws_msg_free(&m);
    return rc;
  case WS_MSG_GOODBYE:
    return WS_ECANCELED;
  default:
    return WS_EPROTO;
  }
}

/* ---- reading ------------------------------------------------------------ */

/* This thread's connections and its spare read buffer (loop thread only,
 * but a process may run loops on several threads). */
static _Thread_local unsigned t_conns;
static _Thread_local uint8_t *t_spare;

void wire_io_conn_added(void) {
  t_conns++;
}

void wire_io_conn_freed(wire_conn_t *c) {
  c->rpos = c->rlen = 0;
  wire_io_rbuf_release(c);
  if (--t_conns == 0) {
    free(t_spare);
    t_spare = NULL;
  }
}

void wire_io_rbuf_release(wire_conn_t *c) {
  if (c->rbuf == NULL || c->rpos != c->rlen)
    return;
  if (t_spare == NULL)
    t_spare = c->rbuf;
  else
    free(c->rbuf);
  c->rbuf = NULL;
  c->rpos = c->rlen = 0;
}

static void io_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  wire_conn_t *c = h->data;

  (void)hint;
  if (c->rbuf == NULL) {
    c->rbuf = t_spare != NULL ? t_spare : malloc(WIRE_READ_BUF_BYTES);
    t_spare = NULL;
  }
  /* No buffer: libuv reports UV_ENOBUFS, which closes the connection. */
  *buf = c->rbuf == NULL
             ? uv_buf_init(NULL, 0)
             : uv_buf_init((char *)c->rbuf + c->rlen,
                           (unsigned)(WIRE_READ_BUF_BYTES - c->rlen));
}

static void io_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  wire_conn_t *c = s->data;

  (void)buf;
  if (nread == 0 || c->state == WC_CLOSING) {
    wire_io_rbuf_release(c);
    return;
  }
  if (nread < 0) {
    wire_io_rbuf_release(c);
    /* A responder that rejects our AUTH hangs up without a word. */
    if (c->state == WC_HANDSHAKE && c->hs.auth_sent && !c->hs.auth_recvd &&
        (nread == UV_EOF || nread == UV_ECONNRESET))
      wire_conn_close(c, WS_EAUTH);
    else
      wire_conn_close(c, (int)nread);
    return;
  }
  c->rlen += (size_t)nread;
  c->st.bytes_in += (uint64_t)nread;
  c->last_io_ms = uv_now(c->loop);
  wire_io_process(c);
}

void wire_io_update_reading(wire_conn_t *c) {
  bool want = (c->state == WC_HANDSHAKE || c->state == WC_OPEN) && !c->paused &&
              c->rpos == c->rlen;
  int rc;

  if (want == c->reading)
    return;
  if (want) {
    rc = uv_read_start((uv_stream_t *)&c->tcp, io_alloc, io_on_read);
    if (rc < 0) {
      wire_conn_close(c, rc);
      return;
    }
  } else {
    uv_read_stop((uv_stream_t *)&c->tcp);
  }
  c->reading = want;
}

/* One authenticated frame. */
static int io_open_frame(wire_conn_t *c, const ws_frame_t *f) {
  ws_msg_t m;
  int rc = ws_frame_open(&c->sess, f);

  if (rc < 0)
    return rc;
  c->rx_payload_user = false;
  bool sealed = f->payload_len > 0 && (f->flags & WS_FRAME_F_SEALED) != 0;
  if (!ws_msg_type_known(f->type))
    return 0; /* newer peer: skip body and payload (and tag) */
  /* A sealed session carries no payload in clear, and the other not one
   * sealed: neither side may choose otherwise per frame. */
  if (f->payload_len > 0 && sealed != c->sess.sealed)
    return WS_EPROTO;
  if (f->type == WS_MSG_HELLO || f->type == WS_MSG_AUTH)
    return WS_EPROTO;
  rc = ws_msg_decode(f, &m);
  if (rc < 0)
    return rc;
  c->rx_payload_user = f->payload_len > 0 && c->cbs.on_payload != NULL;
  c->rx_payload_len = f->payload_len;
  if (c->rx_payload_user && sealed) {
    rc = io_aead(c, false);
    if (rc == 0)
      rc = ws_payload_aead_begin(c->rx_aead, c->sess.rx_seq - 1, f->hdr);
    if (rc < 0) {
      ws_msg_free(&m);
      return rc;
    }
  }
  c->cbs.on_frame(c, &m);
  ws_msg_free(&m);
  return 0;
}

/* A piece of the inbound payload: decrypted in place (ev->data is in our
 * own rbuf) when sealed; a sealed payload's last piece is not "last" yet. */
static int io_payload_piece(wire_conn_t *c, const ws_frame_ev_t *ev) {
  if (c->sess.sealed) {
    uint8_t *p = c->rbuf + (ev->data - c->rbuf);
    int rc = ws_payload_aead_update(c->rx_aead, p, p, ev->len);

    if (rc < 0)
      return rc;
    c->cbs.on_payload(c, p, ev->len, ev->payload_off, false);
    return 0;
  }
  c->cbs.on_payload(c, ev->data, ev->len, ev->payload_off, ev->payload_last);
  return 0;
}

/* The tag after a sealed payload: the payload is complete only if it
 * checks. */
static int io_payload_tag(wire_conn_t *c, const ws_frame_ev_t *ev) {
  static const uint8_t none[1];
  uint8_t tag[WS_PAYLOAD_TAG_LEN];

  memcpy(tag, ev->data, sizeof(tag));
  if (ws_payload_aead_final(c->rx_aead, tag) < 0)
    return WS_EAUTH;
  c->cbs.on_payload(c, none, 0, c->rx_payload_len, true);
  return 0;
}

static bool io_delivering(const wire_conn_t *c) {
  return (c->state == WC_HANDSHAKE || c->state == WC_OPEN) && !c->paused;
}

void wire_io_process(wire_conn_t *c) {
  ws_frame_ev_t ev;
  size_t used;
  int rc;

  if (c->in_process)
    return;
  c->in_process = true;
  while (c->rpos < c->rlen && io_delivering(c)) {
    rc = ws_frame_reader_feed(c->rd, c->rbuf + c->rpos, c->rlen - c->rpos,
                              &used, &ev);
    c->rpos += used;
    if (rc == 0 && ev.kind == WS_FRAME_EV_FRAME) {
      c->st.frames_in++;
      rc = c->state == WC_HANDSHAKE ? io_handshake_frame(c, &ev.frame)
                                    : io_open_frame(c, &ev.frame);
    } else if (rc == 0 && ev.kind == WS_FRAME_EV_PAYLOAD &&
               c->rx_payload_user) {
      rc = io_payload_piece(c, &ev);
    } else if (rc == 0 && ev.kind == WS_FRAME_EV_TAG && c->rx_payload_user &&
               c->sess.sealed) {
      rc = io_payload_tag(c, &ev);
    }
    if (rc < 0) {
      wire_conn_close(c, rc);
      break;
    }
  }
  wire_io_rbuf_release(c); /* when everything read is delivered */
  c->in_process = false;
  if (c->state != WC_CLOSING)
    wire_io_update_reading(c);
}
