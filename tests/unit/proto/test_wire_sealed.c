/* test_wire_sealed.c - sealed payloads on a real wire_conn. A raw peer (a
 * blocking socket on its own thread, speaking the protocol with proto/
 * directly) connects to a wire_conn server and sends one CHUNK: sealed and
 * intact, sealed with one ciphertext bit flipped (as someone on the path
 * would), in clear on a sealed session, or in clear after a version 1
 * HELLO. The server must hand over exactly the plaintext, and "last" only
 * once the tag has checked; a bad tag closes with WS_EAUTH. In the other
 * direction the raw peer checks that what the server sends is not the
 * plaintext and opens with the payload key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <sodium.h>

#include "wire_fixture.h"

#define PAYLOAD_BYTES 70000u /* more than one read buffer */
#define PIECE_BYTES 9000u

typedef enum {
  SEND_SEALED,   /* v2, sealed, intact */
  SEND_FLIPPED,  /* v2, sealed, one ciphertext bit flipped */
  SEND_CLEAR,    /* v2 session, payload in clear */
  SEND_V1_CLEAR, /* v1 HELLO, payload in clear (allowed) */
  SERVER_PLAIN,  /* the server offers 1 (--plaintext-payloads): clear */
  RECV_SEALED    /* the server sends; the raw peer opens */
} mode_t_;

typedef struct {
  wf_loop_t w;
  wire_conn_cfg_t scfg;
  wire_conn_t *srv;
  mode_t_ mode;
  uint8_t plain[PAYLOAD_BYTES];
  uint8_t got[PAYLOAD_BYTES];
  uint8_t scratch[PAYLOAD_BYTES]; /* in-place pieces are sealed here */
  size_t got_len;
  unsigned lasts, pieces_after_last;
  bool contiguous;
  int status;
  bool closed;
  /* raw side */
  int raw_rc;
  bool raw_saw_sealed_flag, raw_ct_differs, raw_opened;
} fx_t;

/* ---- the server (wire_conn) -------------------------------------------- */

static void srv_ready(wire_conn_t *c, const wire_peer_t *p) {
  fx_t *fx = wire_conn_user(c);
  ws_msg_t m;

  (void)p;
  if (fx->mode != RECV_SEALED)
    return;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memset(m.u.chunk.digest, 0xcd, 32);
  m.u.chunk.chunk = 3;
  m.u.chunk.len = PAYLOAD_BYTES;
  assert_int_equal(wire_conn_send(c, &m), 0);
}

static void raw_done(wire_conn_t *c, void *arg, int status) {
  (void)c;
  (void)arg;
  (void)status;
}

static void srv_frame(wire_conn_t *c, const ws_msg_t *m) {
  fx_t *fx = wire_conn_user(c);

  /* RECV_SEALED: the raw peer asks with a HAVE once it is ready to read.
   * Pieces alternate between a copy (send_raw) and in place
   * (send_raw_inplace, on a scratch copy); the last one is in place, so
   * its tag goes in a buffer of its own, in the same write. */
  if (fx->mode == RECV_SEALED && m->type == WS_MSG_HAVE) {
    unsigned i = 0;
    memcpy(fx->scratch, fx->plain, PAYLOAD_BYTES);
    for (size_t off = 0; off < PAYLOAD_BYTES; off += PIECE_BYTES, i++) {
      size_t n =
          PAYLOAD_BYTES - off < PIECE_BYTES ? PAYLOAD_BYTES - off : PIECE_BYTES;
      if (i % 2 == 0)
        assert_int_equal(
            wire_conn_send_raw(c, fx->plain + off, n, raw_done, NULL), 0);
      else
        assert_int_equal(
            wire_conn_send_raw_inplace(c, fx->scratch + off, n, raw_done, NULL),
            0);
    }
    assert_int_equal(i % 2, 0); /* the last piece (i - 1) went in place */
    /* In place means in place: the scratch piece is ciphertext now. */
    assert_memory_not_equal(fx->plain + PIECE_BYTES, fx->scratch + PIECE_BYTES,
                            PIECE_BYTES);
  }
}

static void srv_payload(wire_conn_t *c, const uint8_t *data, size_t len,
                        uint64_t off, bool last) {
  fx_t *fx = wire_conn_user(c);

  if (fx->lasts > 0)
    fx->pieces_after_last++;
  if (off != fx->got_len || fx->got_len + len > sizeof(fx->got))
    fx->contiguous = false;
  else
    memcpy(fx->got + fx->got_len, data, len);
  fx->got_len += len;
  fx->lasts += last;
}

static void srv_close(wire_conn_t *c, int status) {
  fx_t *fx = wire_conn_user(c);

  fx->status = status;
  fx->closed = true;
  wf_listen_close(&fx->w);
}

static const wire_conn_cbs_t srv_cbs = {
    .on_ready = srv_ready,
    .on_frame = srv_frame,
    .on_payload = srv_payload,
    .on_close = srv_close,
};

static void on_conn(wf_loop_t *w, uv_stream_t *server) {
  fx_t *fx = w->arg;

  assert_int_equal(wire_conn_accept(server, &fx->scfg, &srv_cbs, fx, &fx->srv),
                   0);
}

/* ---- the raw peer ------------------------------------------------------- */

static int recv_all(int fd, uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r <= 0)
      return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Our HELLO: through ws_hs (version 2), or hand-made with "v" = 1 and its
 * transcript hash set as ws_hs_hello_encode would. */
static int raw_hello(fx_t *fx, ws_hs_t *hs, ws_pbuf_t *b) {
  ws_hello_t h;
  ws_msg_t m;

  memset(&h, 0, sizeof(h));
  memcpy(h.node_id, "raw", 4);
  if (fx->mode != SEND_V1_CLEAR)
    return ws_hs_hello_encode(hs, &h, b);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HELLO;
  m.u.hello = h;
  m.u.hello.version = 1;
  memcpy(m.u.hello.nonce, hs->my_nonce, WS_HS_NONCE_LEN);
  if (ws_msg_encode(&m, b) < 0)
    return -1;
  crypto_generichash(hs->my_hello_hash, 32, b->data, b->len, NULL, 0);
  hs->my_version = 1;
  hs->hello_sent = true;
  return 0;
}

static int raw_send_chunk(fx_t *fx, int fd, ws_session_t *sess) {
  bool seal = fx->mode == SEND_SEALED || fx->mode == SEND_FLIPPED;
  ws_payload_aead_t *a = seal ? ws_payload_aead_new(sess->tx_pkey, true) : 0;
  uint8_t *ct = malloc(PAYLOAD_BYTES + WS_PAYLOAD_TAG_LEN);
  uint64_t seq = sess->tx_seq;
  ws_pbuf_t b;
  ws_msg_t m;
  int rc = -1;

  ws_pbuf_init(&b, 1u << 16);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memset(m.u.chunk.digest, 0xab, 32);
  m.u.chunk.chunk = 7;
  m.u.chunk.len = PAYLOAD_BYTES;
  if (ct == NULL || (seal && a == NULL) || ws_msg_encode(&m, &b) < 0)
    goto out;
  if (seal)
    b.data[4] |= WS_FRAME_F_SEALED;
  if (ws_frame_seal(sess, &b, 0) < 0)
    goto out;
  memcpy(ct, fx->plain, PAYLOAD_BYTES);
  if (seal && (ws_payload_aead_begin(a, seq, b.data) < 0 ||
               ws_payload_aead_update(a, ct, ct, PAYLOAD_BYTES) < 0 ||
               ws_payload_aead_final(a, ct + PAYLOAD_BYTES) < 0))
    goto out;
  if (fx->mode == SEND_FLIPPED)
    ct[PAYLOAD_BYTES / 2] ^= 0x10;
  if (wf_raw_send(fd, &b) < 0)
    goto out;
  size_t total = PAYLOAD_BYTES + (seal ? WS_PAYLOAD_TAG_LEN : 0);
  for (size_t off = 0; off < total; off += PIECE_BYTES) {
    size_t n = total - off < PIECE_BYTES ? total - off : PIECE_BYTES;
    if (send(fd, ct + off, n, MSG_NOSIGNAL) != (ssize_t)n)
      goto out;
  }
  rc = 0;
out:
  ws_payload_aead_free(a);
  free(ct);
  ws_pbuf_free(&b);
  return rc;
}

/* RECV_SEALED: ask with a HAVE, read the CHUNK frame, its payload and tag
 * off the socket, check what the wire carried and open it. */
static int raw_recv_chunk(fx_t *fx, int fd, ws_session_t *sess,
                          ws_frame_reader_t *rd) {
  uint8_t *ct = malloc(PAYLOAD_BYTES + WS_PAYLOAD_TAG_LEN);
  ws_payload_aead_t *a = ws_payload_aead_new(sess->rx_pkey, false);
  ws_frame_t f;
  ws_pbuf_t b;
  ws_msg_t m;
  uint8_t hdr[WS_FRAME_HDR_LEN];
  int rc = -1;

  ws_pbuf_init(&b, 1u << 16);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  if (ct == NULL || a == NULL || ws_msg_encode(&m, &b) < 0 ||
      ws_frame_seal(sess, &b, 0) < 0 || wf_raw_send(fd, &b) < 0)
    goto out;
  /* The frame through the reader; its payload and tag read by hand. */
  ws_frame_reader_set_limits(rd, WS_MAX_BODY, WS_MAX_PAYLOAD);
  if (wf_raw_recv_frame(fd, rd, &f) < 0 || f.type != WS_MSG_CHUNK ||
      ws_frame_open(sess, &f) < 0)
    goto out;
  memcpy(hdr, f.hdr, sizeof(hdr));
  fx->raw_saw_sealed_flag = (f.flags & WS_FRAME_F_SEALED) != 0;
  if (recv_all(fd, ct, PAYLOAD_BYTES + WS_PAYLOAD_TAG_LEN) < 0)
    goto out;
  fx->raw_ct_differs = memcmp(ct, fx->plain, PAYLOAD_BYTES) != 0;
  fx->raw_opened = ws_payload_aead_begin(a, sess->rx_seq - 1, hdr) == 0 &&
                   ws_payload_aead_update(a, ct, ct, PAYLOAD_BYTES) == 0 &&
                   ws_payload_aead_final(a, ct + PAYLOAD_BYTES) == 0 &&
                   memcmp(ct, fx->plain, PAYLOAD_BYTES) == 0;
  rc = 0;
out:
  ws_payload_aead_free(a);
  free(ct);
  ws_pbuf_free(&b);
  return rc;
}

static int raw_script(fx_t *fx, int fd) {
  ws_frame_reader_t *rd = ws_frame_reader_new(WS_MAX_BODY_PREAUTH, 0);
  ws_hs_t hs;
  ws_session_t sess;
  ws_pbuf_t b;
  int rc = -1;

  ws_pbuf_init(&b, 1u << 16);
  if (rd == NULL || ws_hs_init(&hs, fx->scfg.key, true) < 0 ||
      raw_hello(fx, &hs, &b) < 0 ||
      wf_raw_handshake(fd, rd, &hs, &b, &sess) < 0)
    goto out;
  /* Either side offering 1 makes the session clear. */
  if ((fx->mode == SEND_V1_CLEAR || fx->mode == SERVER_PLAIN) == sess.sealed)
    goto out;
  rc = fx->mode == RECV_SEALED ? raw_recv_chunk(fx, fd, &sess, rd)
                               : raw_send_chunk(fx, fd, &sess);
  shutdown(fd, SHUT_WR);
  {
    uint8_t sink[4096];
    while (recv(fd, sink, sizeof(sink), 0) > 0)
      ;
  }
out:
  ws_pbuf_free(&b);
  ws_frame_reader_free(rd);
  return rc;
}

static void raw_thread(void *arg) {
  fx_t *fx = arg;
  int fd = wf_raw_connect(fx->w.port);

  fx->raw_rc = fd < 0 ? -1 : raw_script(fx, fd);
  if (fd >= 0)
    close(fd);
}

static fx_t *run(mode_t_ mode) {
  fx_t *fx = calloc(1, sizeof(*fx));
  uv_thread_t thr;

  assert_non_null(fx);
  fx->mode = mode;
  fx->contiguous = true;
  for (size_t i = 0; i < PAYLOAD_BYTES; i++)
    fx->plain[i] = (uint8_t)(i * 7u + (i >> 8));
  wf_init(&fx->w, on_conn, fx);
  wf_cfg(&fx->scfg, "srv", "", 0x5a);
  if (mode == SERVER_PLAIN)
    fx->scfg.hello_version = 1;
  assert_int_equal(uv_thread_create(&thr, raw_thread, fx), 0);
  wf_run(&fx->w, 10000);
  assert_int_equal(uv_thread_join(&thr), 0);
  assert_false(fx->w.guard_fired);
  assert_true(fx->closed);
  wf_finish(&fx->w);
  return fx;
}

static void test_sealed_intact(void **state) {
  fx_t *fx = run(SEND_SEALED);

  (void)state;
  assert_int_equal(fx->raw_rc, 0);
  assert_true(fx->contiguous);
  assert_int_equal(fx->got_len, PAYLOAD_BYTES);
  assert_memory_equal(fx->got, fx->plain, PAYLOAD_BYTES);
  assert_int_equal(fx->lasts, 1);
  assert_int_equal(fx->pieces_after_last, 0);
  assert_int_equal(fx->status, UV_EOF);
  free(fx);
}

static void test_flipped_bit_fails_the_tag(void **state) {
  fx_t *fx = run(SEND_FLIPPED);

  (void)state;
  assert_int_equal(fx->lasts, 0); /* never handed over as complete */
  assert_int_equal(fx->status, WS_EAUTH);
  free(fx);
}

static void test_clear_payload_in_sealed_session_refused(void **state) {
  fx_t *fx = run(SEND_CLEAR);

  (void)state;
  assert_int_equal(fx->got_len, 0);
  assert_int_equal(fx->status, WS_EPROTO);
  free(fx);
}

static void test_version1_peer_gets_clear_payloads(void **state) {
  fx_t *fx = run(SEND_V1_CLEAR);

  (void)state;
  assert_int_equal(fx->raw_rc, 0);
  assert_int_equal(fx->got_len, PAYLOAD_BYTES);
  assert_memory_equal(fx->got, fx->plain, PAYLOAD_BYTES);
  assert_int_equal(fx->lasts, 1);
  assert_int_equal(fx->status, UV_EOF);
  free(fx);
}

static void test_server_offering_version1_takes_clear(void **state) {
  fx_t *fx = run(SERVER_PLAIN);

  (void)state;
  assert_int_equal(fx->raw_rc, 0);
  assert_int_equal(fx->got_len, PAYLOAD_BYTES);
  assert_memory_equal(fx->got, fx->plain, PAYLOAD_BYTES);
  assert_int_equal(fx->lasts, 1);
  assert_int_equal(fx->status, UV_EOF);
  free(fx);
}

static void test_server_seals_what_it_sends(void **state) {
  fx_t *fx = run(RECV_SEALED);

  (void)state;
  assert_int_equal(fx->raw_rc, 0);
  assert_true(fx->raw_saw_sealed_flag);
  assert_true(fx->raw_ct_differs);
  assert_true(fx->raw_opened);
  free(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sealed_intact),
      cmocka_unit_test(test_flipped_bit_fails_the_tag),
      cmocka_unit_test(test_clear_payload_in_sealed_session_refused),
      cmocka_unit_test(test_version1_peer_gets_clear_payloads),
      cmocka_unit_test(test_server_offering_version1_takes_clear),
      cmocka_unit_test(test_server_seals_what_it_sends),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
