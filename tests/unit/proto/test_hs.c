/* test_hs.c - handshake between two in-memory sides, wrong keys, ordering
 * rules, and frame seal/open against forgery, replay and reordering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"

static const uint8_t KEY[32] = {0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9};

static void frame_of(const ws_pbuf_t *b, size_t off, ws_frame_t *f) {
  size_t used;
  assert_int_equal(ws_frame_parse(b->data + off, b->len - off, WS_MAX_BODY,
                                  WS_MAX_PAYLOAD, f, &used),
                   0);
  assert_int_equal(off + used, b->len);
}

static void hello_info(ws_hello_t *h, const char *id) {
  memset(h, 0, sizeof(*h));
  memcpy(h->node_id, id, strlen(id) + 1);
  memcpy(h->zone, "z", 2);
  h->port = 7000;
}

/* Runs HELLO/HELLO/AUTH(i)/AUTH(r). Returns the first error, 0 if done. */
static int handshake(ws_hs_t *i, ws_hs_t *r, ws_session_t *si,
                     ws_session_t *sr) {
  ws_pbuf_t bi, br;
  ws_frame_t f;
  ws_hello_t hi, hr, got;
  int rc;

  ws_pbuf_init(&bi, 65536);
  ws_pbuf_init(&br, 65536);
  hello_info(&hi, "init");
  hello_info(&hr, "resp");
  assert_int_equal(ws_hs_hello_encode(i, &hi, &bi), 0);
  assert_int_equal(ws_hs_hello_encode(r, &hr, &br), 0);
  frame_of(&bi, 0, &f);
  assert_int_equal(ws_hs_hello_recv(r, &f, &got), 0);
  assert_string_equal(got.node_id, "init");
  assert_memory_equal(got.nonce, i->my_nonce, 32);
  frame_of(&br, 0, &f);
  assert_int_equal(ws_hs_hello_recv(i, &f, &got), 0);
  assert_string_equal(got.node_id, "resp");
  /* Responder may not prove the key before the initiator did. */
  assert_int_equal(ws_hs_auth_encode(r, &br), WS_EPROTO);
  size_t off = bi.len;
  assert_int_equal(ws_hs_auth_encode(i, &bi), 0);
  frame_of(&bi, off, &f);
  rc = ws_hs_auth_recv(r, &f);
  if (rc < 0)
    goto done;
  off = br.len;
  assert_int_equal(ws_hs_auth_encode(r, &br), 0);
  frame_of(&br, off, &f);
  rc = ws_hs_auth_recv(i, &f);
  if (rc < 0)
    goto done;
  assert_true(ws_hs_done(i));
  assert_true(ws_hs_done(r));
  assert_int_equal(ws_hs_session(i, si), 0);
  assert_int_equal(ws_hs_session(r, sr), 0);
done:
  ws_pbuf_free(&bi);
  ws_pbuf_free(&br);
  return rc;
}

static void test_handshake_ok(void **state) {
  ws_hs_t i, r;
  ws_session_t si, sr;

  assert_int_equal(ws_hs_init(&i, KEY, true), 0);
  assert_int_equal(ws_hs_init(&r, KEY, false), 0);
  assert_int_equal(handshake(&i, &r, &si, &sr), 0);
  assert_memory_equal(si.tx_key, sr.rx_key, 32);
  assert_memory_equal(si.rx_key, sr.tx_key, 32);
  assert_memory_not_equal(si.tx_key, si.rx_key, 32);
  ws_session_wipe(&si);
  ws_session_wipe(&sr);
}

static void test_handshake_wrong_key(void **state) {
  uint8_t other[32];
  ws_hs_t i, r;
  ws_session_t si, sr;

  memcpy(other, KEY, 32);
  other[31] ^= 1;
  assert_int_equal(ws_hs_init(&i, other, true), 0);
  assert_int_equal(ws_hs_init(&r, KEY, false), 0);
  assert_int_equal(handshake(&i, &r, &si, &sr), WS_EAUTH);
  assert_false(ws_hs_done(&r));
  assert_false(r.auth_sent); /* the keyless side got no proof back */
  assert_int_equal(ws_hs_session(&r, &sr), WS_EPROTO);
  ws_hs_wipe(&i);
  ws_hs_wipe(&r);
}

static void test_hello_checks(void **state) {
  uint8_t nonce[32] = {7};
  ws_hs_t a, b;
  ws_pbuf_t buf;
  ws_frame_t f;
  ws_hello_t h, got;

  /* Reflection: a HELLO carrying our own nonce is refused. */
  assert_int_equal(ws_hs_init_nonce(&a, KEY, true, nonce), 0);
  assert_int_equal(ws_hs_init_nonce(&b, KEY, false, nonce), 0);
  ws_pbuf_init(&buf, 4096);
  hello_info(&h, "x");
  assert_int_equal(ws_hs_hello_encode(&b, &h, &buf), 0);
  frame_of(&buf, 0, &f);
  assert_int_equal(ws_hs_hello_recv(&a, &f, &got), WS_EAUTH);
  /* A second HELLO, and AUTH before HELLOs, are protocol errors. */
  assert_int_equal(ws_hs_hello_encode(&b, &h, &buf), WS_EPROTO);
  assert_int_equal(ws_hs_auth_encode(&a, &buf), WS_EPROTO);
  /* Version 0 is refused; a newer version is accepted (we speak 1). */
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HELLO;
  m.u.hello = h;
  m.u.hello.nonce[0] = 99;
  for (uint32_t v = 0; v < 3; v++) {
    ws_hs_t c;
    assert_int_equal(ws_hs_init(&c, KEY, false), 0);
    m.u.hello.version = v;
    ws_pbuf_reset(&buf);
    assert_int_equal(ws_msg_encode(&m, &buf), 0);
    frame_of(&buf, 0, &f);
    assert_int_equal(ws_hs_hello_recv(&c, &f, &got), v == 0 ? WS_EVERSION : 0);
  }
  ws_pbuf_free(&buf);
}

static void test_seal_open(void **state) {
  ws_hs_t i, r;
  ws_session_t si, sr;
  ws_pbuf_t b;
  ws_frame_t f1, f2;
  ws_msg_t m;
  size_t off2;

  assert_int_equal(ws_hs_init(&i, KEY, true), 0);
  assert_int_equal(ws_hs_init(&r, KEY, false), 0);
  assert_int_equal(handshake(&i, &r, &si, &sr), 0);

  ws_pbuf_init(&b, 65536);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  m.u.have.chunk = 5;
  assert_int_equal(ws_msg_encode(&m, &b), 0);
  assert_int_equal(ws_frame_seal(&si, &b, 0), 0);
  assert_int_equal(ws_frame_seal(&si, &b, 0), WS_EUSAGE); /* sealed */
  off2 = b.len;
  m.u.have.chunk = 6;
  assert_int_equal(ws_msg_encode(&m, &b), 0);
  assert_int_equal(ws_frame_seal(&si, &b, off2), 0);
  assert_int_equal(si.tx_seq, 2);
  frame_of(&b, off2, &f2);
  size_t used;
  assert_int_equal(
      ws_frame_parse(b.data, b.len, WS_MAX_BODY, WS_MAX_PAYLOAD, &f1, &used),
      0);
  assert_non_null(f1.mac);

  /* Out of order: frame 2 first fails (sequence bound into the MAC). */
  assert_int_equal(ws_frame_open(&sr, &f2), WS_EAUTH);
  assert_int_equal(sr.rx_seq, 0);
  assert_int_equal(ws_frame_open(&sr, &f1), 0);
  /* Replay of frame 1 fails. */
  assert_int_equal(ws_frame_open(&sr, &f1), WS_EAUTH);
  /* Tampered body fails, the genuine one then passes. */
  b.data[off2 + WS_FRAME_HDR_LEN + 3] ^= 1;
  assert_int_equal(ws_frame_open(&sr, &f2), WS_EAUTH);
  b.data[off2 + WS_FRAME_HDR_LEN + 3] ^= 1;
  assert_int_equal(ws_frame_open(&sr, &f2), 0);
  /* Wrong direction key: the initiator cannot open its own frames. */
  assert_int_equal(ws_frame_open(&si, &f1), WS_EAUTH);
  /* Unsealed frame refused. */
  ws_pbuf_reset(&b);
  assert_int_equal(ws_msg_encode(&m, &b), 0);
  frame_of(&b, 0, &f1);
  assert_int_equal(ws_frame_open(&sr, &f1), WS_EAUTH);
  ws_pbuf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handshake_ok),
      cmocka_unit_test(test_handshake_wrong_key),
      cmocka_unit_test(test_hello_checks),
      cmocka_unit_test(test_seal_open),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
