/* scan.c - the msgpack pre-scanner. msgpack-c sizes its zone allocations
 * from the counts an object declares (msgpack-c issue #1013: five bytes can
 * ask for ~96 GB), so nothing from the network reaches msgpack_unpack_next
 * until this walk has proved, with no allocation at all, that every declared
 * length and count fits in the bytes actually present, that nesting is
 * shallow and that the object count is bounded. Pure, any thread.
 *
 * Invariant kept while walking: the sum of elements still owed by all open
 * containers never exceeds the bytes left (every element needs >= 1 byte).
 */
#include "proto-int.h"

typedef struct {
  const uint8_t *p;
  size_t len;
  size_t pos;
} scan_t;

static int scan_be(scan_t *s, unsigned width, uint64_t *out) {
  uint64_t v = 0;

  if (s->len - s->pos < width)
    return WS_ETRUNCATED;
  for (unsigned i = 0; i < width; i++)
    v = (v << 8) | s->p[s->pos + i];
  s->pos += width;
  *out = v;
  return 0;
}

static int scan_skip(scan_t *s, uint64_t n) {
  if (n > s->len - s->pos)
    return WS_ETRUNCATED;
  s->pos += (size_t)n;
  return 0;
}

/* Reads one object header. Containers report their element count in
 * *elems (maps count keys and values); everything else is skipped whole. */
static int scan_one(scan_t *s, uint64_t *elems) {
  uint8_t c;
  uint64_t n = 0;
  int rc;

  *elems = 0;
  if (s->pos >= s->len)
    return WS_ETRUNCATED;
  c = s->p[s->pos++];
  if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
    return 0; /* fixint, negative fixint, nil, bools */
  if (c >= 0x80 && c <= 0x8f) {
    *elems = 2u * (c & 0x0fu);
    return 0;
  }
  if (c >= 0x90 && c <= 0x9f) {
    *elems = c & 0x0fu;
    return 0;
  }
  if (c >= 0xa0 && c <= 0xbf)
    return scan_skip(s, c & 0x1fu);
  switch (c) {
  case 0xc4: /* bin 8/16/32 */
  case 0xc5:
  case 0xc6:
    rc = scan_be(s, 1u << (c - 0xc4), &n);
    return rc < 0 ? rc : scan_skip(s, n);
  case 0xd9: /* str 8/16/32 */
  case 0xda:
  case 0xdb:
    rc = scan_be(s, 1u << (c - 0xd9), &n);
    return rc < 0 ? rc : scan_skip(s, n);
  case 0xc7: /* ext 8/16/32: length, type byte, data */
  case 0xc8:
  case 0xc9:
    rc = scan_be(s, 1u << (c - 0xc7), &n);
    return rc < 0 ? rc : scan_skip(s, n + 1);
  case 0xca:
    return scan_skip(s, 4);
  case 0xcb:
    return scan_skip(s, 8);
  case 0xcc: /* uint 8..64 */
  case 0xcd:
  case 0xce:
  case 0xcf:
    return scan_skip(s, 1u << (c - 0xcc));
  case 0xd0: /* int 8..64 */
  case 0xd1:
  case 0xd2:
  case 0xd3:
    return scan_skip(s, 1u << (c - 0xd0));
  case 0xd4: /* fixext 1..16: type byte + data */
  case 0xd5:
  case 0xd6:
  case 0xd7:
  case 0xd8:
    return scan_skip(s, 1 + (1u << (c - 0xd4)));
  case 0xdc:
  case 0xdd:
    rc = scan_be(s, c == 0xdc ? 2 : 4, &n);
    *elems = n;
    return rc;
  case 0xde:
  case 0xdf:
    rc = scan_be(s, c == 0xde ? 2 : 4, &n);
    *elems = 2 * n;
    return rc;
  default: /* 0xc1 is never used */
    return WS_EBADMSG;
  }
}

int ws_msgpack_scan(const uint8_t *buf, size_t len) {
  scan_t s = {buf, len, 0};
  uint64_t owed[WS_MAX_DEPTH + 1]; /* elements left per open container */
  uint64_t total_owed = 1;         /* sum of owed[] */
  unsigned depth = 1;
  uint64_t objects = 0;

  owed[0] = 1; /* the root object */
  while (depth > 0) {
    uint64_t elems;
    int rc;

    if (owed[depth - 1] == 0) {
      depth--;
      continue;
    }
    owed[depth - 1]--;
    total_owed--;
    if (++objects > WS_MAX_OBJECTS)
      return WS_ELIMIT;
    rc = scan_one(&s, &elems);
    if (rc < 0)
      return rc;
    if (elems == 0)
      continue;
    if (depth >= WS_MAX_DEPTH)
      return WS_ELIMIT;
    if (elems > s.len - s.pos || total_owed + elems > s.len - s.pos)
      return WS_ETRUNCATED;
    owed[depth++] = elems;
    total_owed += elems;
  }
  return s.pos == len ? 0 : WS_EBADMSG;
}
