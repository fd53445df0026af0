/* frame.c - frame headers and the streaming frame reader.
 *
 * The reader owns one buffer holding the current frame's header, body and
 * MAC (grown per frame up to the limits in force, so a peer that never sends
 * big frames never costs more than a few KiB). Payload bytes are never
 * copied: PAYLOAD events point into the caller's input so a chunk can be
 * hashed and written as it arrives. Pure; a reader belongs to the thread
 * that feeds it (the connection's loop thread).
 *
 *   HEADER --16 bytes, limits ok--> BODY --body+mac--> [FRAME event]
 *     ^                                                   |
 *     +------- payload_len == 0 ---------------------------+
 *     +------- last PAYLOAD event <-- PAYLOAD <-- payload_len > 0
 *     +------- TAG event <-- TAG <-- (sealed payload, after its last piece)
 *   any state --error--> DEAD (sticky)
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"

#define READER_SMALL_BUF 4096 /* kept between frames; bigger is released */

typedef enum {
  RD_HEADER,
  RD_BODY,
  RD_PAYLOAD,
  RD_TAG,
  RD_DEAD,
  RD_LAST
} rd_state_t;

struct ws_frame_reader_s {
  rd_state_t state;
  uint32_t max_body;
  uint32_t max_payload;
  uint8_t *buf; /* header + body + mac of the current frame */
  size_t cap;
  size_t have; /* bytes of buf filled */
  size_t need; /* bytes of buf this frame needs */
  ws_frame_t cur;
  uint32_t payload_done;
  uint8_t tag[WS_PAYLOAD_TAG_LEN]; /* a sealed payload's tag */
  size_t tag_have;
  int err;
};

int ws_frame_hdr_parse(const uint8_t *hdr, uint32_t max_body,
                       uint32_t max_payload, ws_frame_t *f) {
  ws_frame_t t;

  if (hdr[0] != 'W' || hdr[1] != 'S')
    return WS_EPROTO;
  if (hdr[2] != WS_PROTO_VERSION)
    return WS_EVERSION;
  memset(&t, 0, sizeof(t));
  t.version = hdr[2];
  t.type = hdr[3];
  t.flags = hdr[4];
  t.body_len = ws_be32_get(hdr + 8);
  t.payload_len = ws_be32_get(hdr + 12);
  t.hdr = hdr;
  if (t.body_len > max_body || t.payload_len > max_payload)
    return WS_ELIMIT;
  /* Known types say exactly who carries a payload; unknown (newer) types
   * may, so that an older peer can skip them. */
  if (t.payload_len > 0 && ws_msg_type_known(t.type) &&
      !ws_msg_type_has_payload(t.type))
    return WS_EPROTO;
  *f = t;
  return 0;
}

static size_t frame_need(const ws_frame_t *f) {
  return WS_FRAME_HDR_LEN + (size_t)f->body_len +
         ((f->flags & WS_FRAME_F_MAC) ? WS_FRAME_MAC_LEN : 0);
}

static void frame_point(ws_frame_t *f, const uint8_t *base) {
  f->hdr = base;
  f->body = base + WS_FRAME_HDR_LEN;
  f->mac = (f->flags & WS_FRAME_F_MAC) ? base + WS_FRAME_HDR_LEN + f->body_len
                                       : NULL;
}

int ws_frame_parse(const uint8_t *buf, size_t len, uint32_t max_body,
                   uint32_t max_payload, ws_frame_t *f, size_t *used) {
  ws_frame_t t;
  size_t need;
  int rc;

  if (len < WS_FRAME_HDR_LEN)
    return WS_ETRUNCATED;
  rc = ws_frame_hdr_parse(buf, max_body, max_payload, &t);
  if (rc < 0)
    return rc;
  need = frame_need(&t);
  if (len < need)
    return WS_ETRUNCATED;
  frame_point(&t, buf);
  *f = t;
  *used = need;
  return 0;
}

static uint32_t clamp(uint32_t v, uint32_t max) {
  return v > max ? max : v;
}

ws_frame_reader_t *ws_frame_reader_new(uint32_t max_body,
                                       uint32_t max_payload) {
  ws_frame_reader_t *r = calloc(1, sizeof(*r));

  if (r == NULL)
    return NULL;
  r->buf = malloc(READER_SMALL_BUF);
  if (r->buf == NULL) {
    free(r);
    return NULL;
  }
  r->cap = READER_SMALL_BUF;
  r->state = RD_HEADER;
  r->need = WS_FRAME_HDR_LEN;
  ws_frame_reader_set_limits(r, max_body, max_payload);
  return r;
}

void ws_frame_reader_free(ws_frame_reader_t *r) {
  if (r == NULL)
    return;
  free(r->buf);
  free(r);
}

void ws_frame_reader_set_limits(ws_frame_reader_t *r, uint32_t max_body,
                                uint32_t max_payload) {
  r->max_body = clamp(max_body, WS_MAX_BODY);
  r->max_payload = clamp(max_payload, WS_MAX_PAYLOAD);
}

bool ws_frame_reader_idle(const ws_frame_reader_t *r) {
  return r->state == RD_HEADER && r->have == 0;
}

static int reader_fail(ws_frame_reader_t *r, int err) {
  r->state = RD_DEAD;
  r->err = err;
  return err;
}

/* Sizes buf for this frame. Grows to exactly what the frame needs (bounded
 * by the limits checked in the header) and drops back to the small buffer
 * once a large frame is done. */
static int reader_reserve(ws_frame_reader_t *r, size_t need) {
  size_t want = need < READER_SMALL_BUF ? READER_SMALL_BUF : need;
  uint8_t *nb;

  if (want == r->cap)
    return 0;
  if (want < r->cap && r->cap == READER_SMALL_BUF)
    return 0;
  nb = realloc(r->buf, want);
  if (nb == NULL)
    return -ENOMEM;
  r->buf = nb;
  r->cap = want;
  return 0;
}

static size_t reader_fill(ws_frame_reader_t *r, const uint8_t *data,
                          size_t len) {
  size_t n = r->need - r->have;

  if (n > len)
    n = len;
  memcpy(r->buf + r->have, data, n);
  r->have += n;
  return n;
}

int ws_frame_reader_feed(ws_frame_reader_t *r, const uint8_t *data, size_t len,
                         size_t *used, ws_frame_ev_t *ev) {
  size_t pos = 0;
  int rc;

  memset(ev, 0, sizeof(*ev));
  *used = 0;
  if (r->state == RD_DEAD)
    return r->err;
  if (r->state == RD_HEADER) {
    pos += reader_fill(r, data, len);
    *used = pos;
    if (r->have < WS_FRAME_HDR_LEN)
      return 0;
    rc = ws_frame_hdr_parse(r->buf, r->max_body, r->max_payload, &r->cur);
    if (rc < 0)
      return reader_fail(r, rc);
    r->need = frame_need(&r->cur);
    rc = reader_reserve(r, r->need);
    if (rc < 0)
      return reader_fail(r, rc);
    r->state = RD_BODY;
  }
  if (r->state == RD_TAG) {
    size_t n = WS_PAYLOAD_TAG_LEN - r->tag_have;

    if (n > len)
      n = len;
    memcpy(r->tag + r->tag_have, data, n);
    r->tag_have += n;
    *used = n;
    if (r->tag_have == WS_PAYLOAD_TAG_LEN) {
      ev->kind = WS_FRAME_EV_TAG;
      ev->data = r->tag;
      ev->len = WS_PAYLOAD_TAG_LEN;
      r->state = RD_HEADER;
    }
    return 0;
  }
  if (r->state == RD_BODY) {
    pos += reader_fill(r, data + pos, len - pos);
    *used = pos;
    if (r->have < r->need)
      return 0;
    frame_point(&r->cur, r->buf);
    ev->kind = WS_FRAME_EV_FRAME;
    ev->frame = r->cur;
    r->payload_done = 0;
    r->have = 0;
    r->need = WS_FRAME_HDR_LEN;
    r->state = r->cur.payload_len > 0 ? RD_PAYLOAD : RD_HEADER;
    return 0;
  }
  /* RD_PAYLOAD */
  if (pos < len) {
    size_t n = r->cur.payload_len - r->payload_done;

    if (n > len - pos)
      n = len - pos;
    ev->kind = WS_FRAME_EV_PAYLOAD;
    ev->data = data + pos;
    ev->len = n;
    ev->payload_off = r->payload_done;
    r->payload_done += (uint32_t)n;
    ev->payload_last = r->payload_done == r->cur.payload_len;
    if (ev->payload_last) {
      r->state = (r->cur.flags & WS_FRAME_F_SEALED) ? RD_TAG : RD_HEADER;
      r->tag_have = 0;
    }
    pos += n;
  }
  *used = pos;
  return 0;
}
