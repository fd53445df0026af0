/* fuzz_frame.c - fuzz target for the frame reader, the msgpack pre-scan and
 * every message decoder, plus the handshake and MAC check entry points.
 *
 * The input is a byte stream as a peer would send it. It is read twice, in
 * one piece and in 1..7-byte pieces, and both runs must agree on the frames,
 * payload bytes and final error: splitting must never change the outcome.
 * Built as a corpus-replay binary (replay.c) and, with -Dfuzz=true under
 * clang, as a libFuzzer binary.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
  unsigned frames;
  unsigned decoded;
  unsigned auth_ok; /* handshake/MAC checks that passed: never expected */
  uint64_t payload;
  int rc;
} outcome_t;

static void on_frame(const ws_frame_t *f, outcome_t *o) {
  static const uint8_t key[WS_CLUSTER_KEY_LEN] = {1};
  ws_msg_t m;

  o->frames++;
  if (ws_msg_type_known(f->type) && ws_msg_decode(f, &m) == 0) {
    o->decoded++;
    ws_msg_free(&m);
  }
  if (f->type == WS_MSG_HELLO || f->type == WS_MSG_AUTH) {
    ws_hs_t hs;
    ws_hello_t h;
    if (ws_hs_init(&hs, key, false) == 0) {
      hs.hello_sent = true; /* exercise AUTH checking too */
      if (ws_hs_hello_recv(&hs, f, &h) != 0 && f->type == WS_MSG_AUTH) {
        hs.hello_recvd = true;
        o->auth_ok += ws_hs_auth_recv(&hs, f) == 0;
      }
      ws_hs_wipe(&hs);
    }
  }
  if (f->mac != NULL) {
    ws_session_t s;
    memset(&s, 0, sizeof(s));
    o->auth_ok += ws_frame_open(&s, f) == 0;
  }
}

static outcome_t run(const uint8_t *data, size_t size, size_t step_seed) {
  ws_frame_reader_t *r = ws_frame_reader_new(WS_MAX_BODY, WS_MAX_PAYLOAD);
  outcome_t o = {0, 0, 0, 0, 0};
  size_t pos = 0;

  if (r == NULL)
    abort();
  while (pos < size && o.rc == 0) {
    size_t n = step_seed ? 1 + (pos * 7 + step_seed) % 7 : size - pos;
    if (n > size - pos)
      n = size - pos;
    const uint8_t *p = data + pos;
    pos += n;
    while (n > 0 && o.rc == 0) {
      ws_frame_ev_t ev;
      size_t used;
      o.rc = ws_frame_reader_feed(r, p, n, &used, &ev);
      if (used > n)
        abort();
      p += used;
      n -= used;
      if (ev.kind == WS_FRAME_EV_FRAME)
        on_frame(&ev.frame, &o);
      else if (ev.kind == WS_FRAME_EV_PAYLOAD)
        o.payload += ev.len;
    }
  }
  ws_frame_reader_free(r);
  return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  outcome_t whole = run(data, size, 0);
  outcome_t split = run(data, size, size % 5 + 1);

  if (whole.frames != split.frames || whole.decoded != split.decoded ||
      whole.payload != split.payload || whole.rc != split.rc ||
      whole.auth_ok != split.auth_ok)
    abort();
  /* The scanner alone on raw bytes must never read out of bounds, and
   * accepts only if msgpack-c agrees the bytes hold exactly one object. */
  if (ws_msgpack_scan(data, size) == 0 && size > 0) {
    msgpack_unpacked up;
    size_t off = 0;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)data, size, &off) !=
            MSGPACK_UNPACK_SUCCESS ||
        off != size)
      abort();
    msgpack_unpacked_destroy(&up);
  }
  return 0;
}
