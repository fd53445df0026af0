/* msg.c - the message type table and the generic encode/decode/free that
 * dispatch to the family codecs (msg_ctl.c, msg_trk.c, msg_peer.c).
 *
 * Encoding writes the 16-byte header, packs the body after it and then
 * patches body_len, so a frame is built in one pass into the caller's bounded
 * buffer. Decoding never hands unscanned bytes to msgpack-c. Pure, any
 * thread.
 */
#include <string.h>

#include "proto-int.h"

typedef enum { FAM_CTL, FAM_TRK, FAM_PEER, FAM_LAST } family_t;

typedef struct {
  uint8_t type;
  const char *name;
  family_t family;
  bool payload;
} type_info_t;

static const type_info_t type_table[] = {
    {WS_MSG_HELLO, "HELLO", FAM_CTL, false},
    {WS_MSG_AUTH, "AUTH", FAM_CTL, false},
    {WS_MSG_ERROR, "ERROR", FAM_CTL, false},
    {WS_MSG_GOODBYE, "GOODBYE", FAM_CTL, false},
    {WS_MSG_ANNOUNCE, "ANNOUNCE", FAM_TRK, false},
    {WS_MSG_ANNOUNCE_REPLY, "ANNOUNCE_REPLY", FAM_TRK, false},
    {WS_MSG_LEASE_RENEW, "LEASE_RENEW", FAM_TRK, false},
    {WS_MSG_LEASE_RELEASE, "LEASE_RELEASE", FAM_TRK, false},
    {WS_MSG_HAVE, "HAVE", FAM_PEER, false},
    {WS_MSG_BITFIELD, "BITFIELD", FAM_PEER, false},
    {WS_MSG_REQUEST, "REQUEST", FAM_PEER, false},
    {WS_MSG_CANCEL, "CANCEL", FAM_PEER, false},
    {WS_MSG_CHUNK, "CHUNK", FAM_PEER, true},
    {WS_MSG_REJECT, "REJECT", FAM_PEER, false},
    {WS_MSG_MANIFEST_REQ, "MANIFEST_REQ", FAM_PEER, false},
    {WS_MSG_MANIFEST, "MANIFEST", FAM_PEER, true},
};

static const type_info_t *type_find(uint8_t type) {
  for (size_t i = 0; i < sizeof(type_table) / sizeof(type_table[0]); i++)
    if (type_table[i].type == type)
      return &type_table[i];
  return NULL;
}

bool ws_msg_type_known(uint8_t type) {
  return type_find(type) != NULL;
}

const char *ws_msg_type_name(uint8_t type) {
  const type_info_t *ti = type_find(type);
  return ti ? ti->name : "UNKNOWN";
}

bool ws_msg_type_has_payload(uint8_t type) {
  const type_info_t *ti = type_find(type);
  return ti != NULL && ti->payload;
}

static uint32_t msg_payload_len(const ws_msg_t *m) {
  if (m->type == WS_MSG_CHUNK)
    return m->u.chunk.len;
  if (m->type == WS_MSG_MANIFEST)
    return m->u.manifest.len;
  return 0;
}

int ws_msg_encode(const ws_msg_t *m, ws_pbuf_t *out) {
  const type_info_t *ti = type_find(m->type);
  size_t start = out->len;
  uint8_t hdr[WS_FRAME_HDR_LEN] = {'W', 'S', WS_PROTO_VERSION, m->type};
  uint32_t payload = msg_payload_len(m);
  size_t body_len;
  msgpack_packer pk;
  int rc;

  if (ti == NULL)
    return WS_EUSAGE;
  if (ti->payload && (payload == 0 || payload > WS_MAX_PAYLOAD))
    return WS_EUSAGE;
  ws_be32_put(hdr + 12, payload);
  rc = ws_pbuf_append(out, hdr, sizeof(hdr));
  if (rc < 0)
    return rc;
  ws_pk_init(&pk, out);
  switch (ti->family) {
  case FAM_CTL:
    rc = ws_ctl_encode(m, &pk);
    break;
  case FAM_TRK:
    rc = ws_trk_encode(m, &pk);
    break;
  default:
    rc = ws_peer_encode(m, &pk);
    break;
  }
  if (rc == -1) /* the packer's write callback hit out->max */
    rc = WS_ELIMIT;
  if (rc < 0)
    goto fail_truncate;
  body_len = out->len - start - WS_FRAME_HDR_LEN;
  if (body_len > WS_MAX_BODY) {
    rc = WS_ELIMIT;
    goto fail_truncate;
  }
  ws_be32_put(out->data + start + 8, (uint32_t)body_len);
  return 0;

fail_truncate:
  out->len = start;
  return rc;
}

int ws_msg_decode(const ws_frame_t *f, ws_msg_t *out) {
  const type_info_t *ti = type_find(f->type);
  msgpack_unpacked up;
  size_t off = 0;
  ws_msg_t tmp;
  int rc;

  if (ti == NULL)
    return WS_EPROTO;
  /* Bodies are always a map: first byte fixmap, map16 or map32. */
  if (f->body_len == 0 || !((f->body[0] & 0xf0) == 0x80 || f->body[0] == 0xde ||
                            f->body[0] == 0xdf))
    return WS_EBADMSG;
  rc = ws_msgpack_scan(f->body, f->body_len);
  if (rc < 0)
    return rc == WS_ELIMIT ? rc : WS_EBADMSG;
  memset(&tmp, 0, sizeof(tmp));
  tmp.type = f->type;
  msgpack_unpacked_init(&up);
  if (msgpack_unpack_next(&up, (const char *)f->body, f->body_len, &off) !=
          MSGPACK_UNPACK_SUCCESS ||
      off != f->body_len || up.data.type != MSGPACK_OBJECT_MAP) {
    rc = WS_EBADMSG;
    goto cleanup_unpacked;
  }
  switch (ti->family) {
  case FAM_CTL:
    rc = ws_ctl_decode(f->type, &up.data, &tmp);
    break;
  case FAM_TRK:
    rc = ws_trk_decode(f->type, &up.data, &tmp);
    break;
  default:
    rc = ws_peer_decode(f->type, &up.data, f->payload_len, &tmp);
    break;
  }
  if (rc < 0) {
    ws_msg_free(&tmp);
    goto cleanup_unpacked;
  }
  *out = tmp;

cleanup_unpacked:
  msgpack_unpacked_destroy(&up);
  return rc;
}

void ws_msg_free(ws_msg_t *m) {
  const type_info_t *ti;

  if (m == NULL)
    return;
  ti = type_find(m->type);
  if (ti == NULL)
    return;
  if (ti->family == FAM_TRK)
    ws_trk_free(m);
  else if (ti->family == FAM_PEER)
    ws_peer_free(m);
}
