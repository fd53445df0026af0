/* test_frame.c - frame headers and the streaming reader: arbitrary splits,
 * payload streaming without buffering, limits, sticky errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"

static const uint8_t D[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

/* Builds HAVE, CHUNK(+payload), GOODBYE into one byte stream. */
static size_t build_stream(ws_pbuf_t *b, uint8_t *payload, uint32_t plen) {
  ws_msg_t m;

  ws_pbuf_init(b, 1 << 20);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memcpy(m.u.have.digest, D, 32);
  m.u.have.chunk = 7;
  assert_int_equal(ws_msg_encode(&m, b), 0);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memcpy(m.u.chunk.digest, D, 32);
  m.u.chunk.chunk = 9;
  m.u.chunk.req_id = 77;
  m.u.chunk.len = plen;
  assert_int_equal(ws_msg_encode(&m, b), 0);
  for (uint32_t i = 0; i < plen; i++)
    payload[i] = (uint8_t)(i * 31 + 5);
  assert_int_equal(ws_pbuf_append(b, payload, plen), 0);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_GOODBYE;
  m.u.goodbye.reason = WS_BYE_IDLE;
  assert_int_equal(ws_msg_encode(&m, b), 0);
  return b->len;
}

typedef struct {
  int frames;
  uint8_t types[8];
  uint8_t payload[4096];
  size_t payload_got;
  int last_seen;
} sink_t;

static void sink_feed(ws_frame_reader_t *r, sink_t *s, const uint8_t *p,
                      size_t len) {
  while (len > 0) {
    ws_frame_ev_t ev;
    size_t used;
    assert_int_equal(ws_frame_reader_feed(r, p, len, &used, &ev), 0);
    assert_true(used <= len);
    p += used;
    len -= used;
    if (ev.kind == WS_FRAME_EV_FRAME) {
      ws_msg_t m;
      assert_true(s->frames < 8);
      s->types[s->frames++] = ev.frame.type;
      assert_int_equal(ws_msg_decode(&ev.frame, &m), 0);
      if (m.type == WS_MSG_CHUNK) {
        assert_int_equal(m.u.chunk.chunk, 9);
        assert_int_equal(m.u.chunk.req_id, 77);
      }
      ws_msg_free(&m);
    } else if (ev.kind == WS_FRAME_EV_PAYLOAD) {
      assert_int_equal(ev.payload_off, s->payload_got);
      assert_true(ev.len > 0);
      memcpy(s->payload + s->payload_got, ev.data, ev.len);
      s->payload_got += ev.len;
      s->last_seen += ev.payload_last;
    } else {
      /* NONE only once the whole input is consumed. */
      assert_int_equal(len, 0);
    }
  }
}

static void check_sink(const sink_t *s, const uint8_t *payload, uint32_t plen) {
  assert_int_equal(s->frames, 3);
  assert_int_equal(s->types[0], WS_MSG_HAVE);
  assert_int_equal(s->types[1], WS_MSG_CHUNK);
  assert_int_equal(s->types[2], WS_MSG_GOODBYE);
  assert_int_equal(s->payload_got, plen);
  assert_int_equal(s->last_seen, 1);
  assert_memory_equal(s->payload, payload, plen);
}

static void test_split_every_point(void **state) {
  uint8_t payload[1000];
  ws_pbuf_t b;
  size_t n = build_stream(&b, payload, sizeof(payload));

  /* Every two-piece split, and byte-at-a-time. */
  for (size_t cut = 0; cut <= n; cut++) {
    ws_frame_reader_t *r = ws_frame_reader_new(WS_MAX_BODY, WS_MAX_PAYLOAD);
    sink_t s;
    memset(&s, 0, sizeof(s));
    sink_feed(r, &s, b.data, cut);
    sink_feed(r, &s, b.data + cut, n - cut);
    check_sink(&s, payload, sizeof(payload));
    assert_true(ws_frame_reader_idle(r));
    ws_frame_reader_free(r);
  }
  ws_frame_reader_t *r = ws_frame_reader_new(WS_MAX_BODY, WS_MAX_PAYLOAD);
  sink_t s;
  memset(&s, 0, sizeof(s));
  for (size_t i = 0; i < n; i++)
    sink_feed(r, &s, b.data + i, 1);
  check_sink(&s, payload, sizeof(payload));
  ws_frame_reader_free(r);
  ws_pbuf_free(&b);
}

static void test_split_random(void **state) {
  uint8_t payload[3000];
  ws_pbuf_t b;
  size_t n = build_stream(&b, payload, sizeof(payload));
  unsigned seed = 12345;

  for (int iter = 0; iter < 200; iter++) {
    ws_frame_reader_t *r = ws_frame_reader_new(WS_MAX_BODY, WS_MAX_PAYLOAD);
    sink_t s;
    size_t pos = 0;
    memset(&s, 0, sizeof(s));
    while (pos < n) {
      seed = seed * 1103515245u + 12345u;
      size_t k = 1 + (seed >> 16) % 97;
      if (k > n - pos)
        k = n - pos;
      sink_feed(r, &s, b.data + pos, k);
      pos += k;
    }
    check_sink(&s, payload, sizeof(payload));
    ws_frame_reader_free(r);
  }
  ws_pbuf_free(&b);
}

static void hdr(uint8_t *h, uint8_t type, uint32_t body, uint32_t payload) {
  memset(h, 0, WS_FRAME_HDR_LEN);
  h[0] = 'W';
  h[1] = 'S';
  h[2] = WS_PROTO_VERSION;
  h[3] = type;
  h[8] = (uint8_t)(body >> 24);
  h[9] = (uint8_t)(body >> 16);
  h[10] = (uint8_t)(body >> 8);
  h[11] = (uint8_t)body;
  h[12] = (uint8_t)(payload >> 24);
  h[13] = (uint8_t)(payload >> 16);
  h[14] = (uint8_t)(payload >> 8);
  h[15] = (uint8_t)payload;
}

static int feed_hdr(uint32_t max_body, uint32_t max_payload, const uint8_t *h) {
  ws_frame_reader_t *r = ws_frame_reader_new(max_body, max_payload);
  ws_frame_ev_t ev;
  size_t used;
  int rc = ws_frame_reader_feed(r, h, WS_FRAME_HDR_LEN, &used, &ev);
  if (rc < 0) { /* sticky */
    assert_int_equal(ws_frame_reader_feed(r, h, 1, &used, &ev), rc);
    assert_int_equal(used, 0);
  }
  ws_frame_reader_free(r);
  return rc;
}

static void test_limits(void **state) {
  uint8_t h[WS_FRAME_HDR_LEN];

  hdr(h, WS_MSG_HELLO, WS_MAX_BODY_PREAUTH, 0);
  assert_int_equal(feed_hdr(WS_MAX_BODY_PREAUTH, 0, h), 0);
  hdr(h, WS_MSG_HELLO, WS_MAX_BODY_PREAUTH + 1, 0);
  assert_int_equal(feed_hdr(WS_MAX_BODY_PREAUTH, 0, h), WS_ELIMIT);
  /* A 4 GiB body declaration is refused before any allocation. */
  hdr(h, WS_MSG_ANNOUNCE, 0xffffffffu, 0);
  assert_int_equal(feed_hdr(WS_MAX_BODY, WS_MAX_PAYLOAD, h), WS_ELIMIT);
  /* Payload: none allowed before auth; 64 MiB max after. */
  hdr(h, WS_MSG_CHUNK, 10, 1);
  assert_int_equal(feed_hdr(WS_MAX_BODY_PREAUTH, 0, h), WS_ELIMIT);
  hdr(h, WS_MSG_CHUNK, 10, WS_MAX_PAYLOAD);
  assert_int_equal(feed_hdr(WS_MAX_BODY, WS_MAX_PAYLOAD, h), 0);
  hdr(h, WS_MSG_CHUNK, 10, WS_MAX_PAYLOAD + 1);
  assert_int_equal(feed_hdr(WS_MAX_BODY, WS_MAX_PAYLOAD, h), WS_ELIMIT);
  /* Limits above the protocol maxima are clamped. */
  hdr(h, WS_MSG_CHUNK, WS_MAX_BODY + 1, 0);
  assert_int_equal(feed_hdr(UINT32_MAX, UINT32_MAX, h), WS_ELIMIT);
  /* Payload on a type that cannot carry one. */
  hdr(h, WS_MSG_HAVE, 10, 5);
  assert_int_equal(feed_hdr(WS_MAX_BODY, WS_MAX_PAYLOAD, h), WS_EPROTO);
  /* Unknown types may carry a payload (a newer peer's family). */
  hdr(h, 200, 10, 5);
  assert_int_equal(feed_hdr(WS_MAX_BODY, WS_MAX_PAYLOAD, h), 0);
  hdr(h, WS_MSG_HAVE, 1, 0);
  h[0] = 'X';
  assert_int_equal(feed_hdr(WS_MAX_BODY, WS_MAX_PAYLOAD, h), WS_EPROTO);
  hdr(h, WS_MSG_HAVE, 1, 0);
  h[2] = 2;
  assert_int_equal(feed_hdr(WS_MAX_BODY, WS_MAX_PAYLOAD, h), WS_EVERSION);
}

static void test_set_limits_and_parse(void **state) {
  ws_pbuf_t b;
  ws_msg_t m;
  ws_frame_t f;
  size_t used;

  ws_pbuf_init(&b, 1 << 16);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_MANIFEST;
  m.u.manifest.len = 5000;
  assert_int_equal(ws_msg_encode(&m, &b), 0);
  assert_int_equal(
      ws_frame_parse(b.data, b.len - 1, WS_MAX_BODY, WS_MAX_PAYLOAD, &f, &used),
      WS_ETRUNCATED);
  assert_int_equal(
      ws_frame_parse(b.data, b.len, WS_MAX_BODY, WS_MAX_PAYLOAD, &f, &used), 0);
  assert_int_equal(used, b.len);
  assert_int_equal(f.payload_len, 5000);
  assert_null(f.mac);

  ws_frame_reader_t *r = ws_frame_reader_new(WS_MAX_BODY_PREAUTH, 0);
  ws_frame_ev_t ev;
  assert_int_equal(ws_frame_reader_feed(r, b.data, b.len, &used, &ev),
                   WS_ELIMIT);
  ws_frame_reader_free(r);
  r = ws_frame_reader_new(WS_MAX_BODY_PREAUTH, 0);
  ws_frame_reader_set_limits(r, WS_MAX_BODY, WS_MAX_PAYLOAD);
  assert_int_equal(ws_frame_reader_feed(r, b.data, b.len, &used, &ev), 0);
  assert_int_equal(ev.kind, WS_FRAME_EV_FRAME);
  assert_false(ws_frame_reader_idle(r)); /* payload pending */
  ws_frame_reader_free(r);
  ws_pbuf_free(&b);
}

static void test_pbuf_bounded(void **state) {
  ws_pbuf_t b;
  uint8_t x[100] = {0};
  ws_msg_t m;

  ws_pbuf_init(&b, 150);
  assert_int_equal(ws_pbuf_append(&b, x, 100), 0);
  assert_int_equal(ws_pbuf_append(&b, x, 51), WS_ELIMIT);
  assert_int_equal(ws_pbuf_append(&b, x, 50), 0);
  assert_int_equal(b.len, 150);
  /* An encode that does not fit leaves the buffer as it was. */
  ws_pbuf_reset(&b);
  assert_int_equal(ws_pbuf_append(&b, x, 100), 0);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  assert_int_equal(ws_msg_encode(&m, &b), WS_ELIMIT);
  assert_int_equal(b.len, 100);
  ws_pbuf_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_every_point),
      cmocka_unit_test(test_split_random),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_set_limits_and_parse),
      cmocka_unit_test(test_pbuf_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
