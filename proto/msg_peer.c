/* msg_peer.c - codecs for the peer family: HAVE, BITFIELD, REQUEST, CANCEL,
 * CHUNK, REJECT, MANIFEST_REQ, MANIFEST. CHUNK and MANIFEST bodies describe
 * the raw payload that follows the frame; its length is the header's
 * payload_len and is never repeated in the body. Pure.
 */
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"

static int pk_digest(msgpack_packer *pk, const uint8_t *d) {
  return ws_pk_kv_bin(pk, "d", d, WS_PROTO_DIGEST_LEN);
}

static int mp_digest(const msgpack_object *map, uint8_t *d) {
  return ws_mp_binfix(map, "d", true, d, WS_PROTO_DIGEST_LEN);
}

int ws_peer_encode(const ws_msg_t *m, msgpack_packer *pk) {
  switch (m->type) {
  case WS_MSG_HAVE:
    /* "p" and "f" only when set: a plain HAVE is the same bytes as
     * before them. */
    return msgpack_pack_map(pk, 2u + (m->u.have.live ? 1u : 0u) +
                                    (m->u.have.from[0] != '\0' ? 1u : 0u)) |
           pk_digest(pk, m->u.have.digest) |
           ws_pk_kv_uint(pk, "c", m->u.have.chunk) |
           (m->u.have.live ? ws_pk_kv_bool(pk, "p", true) : 0) |
           (m->u.have.from[0] != '\0' ? ws_pk_kv_str(pk, "f", m->u.have.from)
                                      : 0);
  case WS_MSG_BITFIELD: {
    const ws_bitfield_msg_t *b = &m->u.bitfield;
    if (b->total_chunks == 0 || b->total_chunks > WS_MAX_TOTAL_CHUNKS ||
        b->bits == NULL)
      return WS_EUSAGE;
    /* "live" and "mux" only when set: a peer that predates them sends the
     * same bytes. */
    return msgpack_pack_map(pk, 3u + b->live + b->mux) |
           pk_digest(pk, b->digest) |
           ws_pk_kv_uint(pk, "tot", b->total_chunks) |
           ws_pk_kv_bin(pk, "bits", b->bits,
                        ws_bitfield_nbytes(b->total_chunks)) |
           (b->live ? ws_pk_kv_bool(pk, "live", true) : 0) |
           (b->mux ? ws_pk_kv_bool(pk, "mux", true) : 0);
  }
  case WS_MSG_REQUEST:
  case WS_MSG_CANCEL:
    return msgpack_pack_map(pk, 3) | pk_digest(pk, m->u.request.digest) |
           ws_pk_kv_uint(pk, "c", m->u.request.chunk) |
           ws_pk_kv_uint(pk, "id", m->u.request.req_id);
  case WS_MSG_CHUNK:
    if (m->u.chunk.piece && m->u.chunk.off >= WS_MAX_PAYLOAD)
      return WS_EUSAGE;
    return msgpack_pack_map(pk, m->u.chunk.piece ? 4 : 3) |
           pk_digest(pk, m->u.chunk.digest) |
           ws_pk_kv_uint(pk, "c", m->u.chunk.chunk) |
           ws_pk_kv_uint(pk, "id", m->u.chunk.req_id) |
           (m->u.chunk.piece ? ws_pk_kv_uint(pk, "o", m->u.chunk.off) : 0);
  case WS_MSG_REJECT:
    return msgpack_pack_map(pk, 5) | pk_digest(pk, m->u.reject.digest) |
           ws_pk_kv_uint(pk, "c", m->u.reject.chunk) |
           ws_pk_kv_uint(pk, "id", m->u.reject.req_id) |
           ws_pk_kv_uint(pk, "r", m->u.reject.reason) |
           ws_pk_kv_uint(pk, "ra", m->u.reject.retry_after_ms);
  case WS_MSG_MANIFEST_REQ:
    return msgpack_pack_map(pk, 1) | pk_digest(pk, m->u.manifest_req.digest);
  case WS_MSG_MANIFEST:
    return msgpack_pack_map(pk, 1) | pk_digest(pk, m->u.manifest.digest);
  default:
    return WS_EUSAGE;
  }
}

static int bitfield_decode(const msgpack_object *map, ws_bitfield_msg_t *b) {
  const uint8_t *bits = NULL;
  size_t n = 0;
  ws_bitfield_t bf;
  int rc;

  if ((rc = mp_digest(map, b->digest)) < 0 ||
      (rc = ws_mp_u32(map, "tot", true, WS_MAX_TOTAL_CHUNKS,
                      &b->total_chunks)) < 0 ||
      (rc = ws_mp_bin(map, "bits", true, &bits, &n)) < 0 ||
      (rc = ws_mp_bool(map, "live", false, &b->live)) < 0 ||
      (rc = ws_mp_bool(map, "mux", false, &b->mux)) < 0)
    return rc;
  if (b->total_chunks == 0)
    return WS_EBADMSG;
  rc = ws_bitfield_from_bytes(&bf, b->total_chunks, bits, n);
  if (rc < 0)
    return rc;
  b->bits = bf.bits;
  return 0;
}

static int request_decode(const msgpack_object *map, ws_request_t *r) {
  int rc;

  if ((rc = mp_digest(map, r->digest)) < 0 ||
      (rc = ws_mp_u32(map, "c", true, UINT32_MAX, &r->chunk)) < 0 ||
      (rc = ws_mp_u32(map, "id", false, UINT32_MAX, &r->req_id)) < 0)
    return rc;
  return 0;
}

int ws_peer_decode(uint8_t type, const msgpack_object *map,
                   uint32_t payload_len, ws_msg_t *m) {
  int rc;

  switch (type) {
  case WS_MSG_HAVE:
    if ((rc = mp_digest(map, m->u.have.digest)) < 0 ||
        (rc = ws_mp_u32(map, "c", true, UINT32_MAX, &m->u.have.chunk)) < 0 ||
        (rc = ws_mp_strbuf(map, "f", false, m->u.have.from, WS_NODE_ID_MAX)) <
            0)
      return rc;
    return ws_mp_bool(map, "p", false, &m->u.have.live);
  case WS_MSG_BITFIELD:
    return bitfield_decode(map, &m->u.bitfield);
  case WS_MSG_REQUEST:
  case WS_MSG_CANCEL:
    return request_decode(map, &m->u.request);
  case WS_MSG_CHUNK:
    if (payload_len == 0)
      return WS_EBADMSG;
    if ((rc = mp_digest(map, m->u.chunk.digest)) < 0 ||
        (rc = ws_mp_u32(map, "c", true, UINT32_MAX, &m->u.chunk.chunk)) < 0 ||
        (rc = ws_mp_u32(map, "id", false, UINT32_MAX, &m->u.chunk.req_id)) <
            0 ||
        (rc = ws_mp_u32(map, "o", false, WS_MAX_PAYLOAD - 1, &m->u.chunk.off)) <
            0)
      return rc;
    m->u.chunk.piece = ws_mp_find(map, "o") != NULL;
    m->u.chunk.len = payload_len;
    return 0;
  case WS_MSG_REJECT:
    if ((rc = mp_digest(map, m->u.reject.digest)) < 0 ||
        (rc = ws_mp_u32(map, "c", true, UINT32_MAX, &m->u.reject.chunk)) < 0 ||
        (rc = ws_mp_u32(map, "id", false, UINT32_MAX, &m->u.reject.req_id)) <
            0 ||
        (rc = ws_mp_u32(map, "r", true, UINT32_MAX, &m->u.reject.reason)) < 0 ||
        (rc = ws_mp_u32(map, "ra", false, UINT32_MAX,
                        &m->u.reject.retry_after_ms)) < 0)
      return rc;
    return 0;
  case WS_MSG_MANIFEST_REQ:
    return mp_digest(map, m->u.manifest_req.digest);
  case WS_MSG_MANIFEST:
    if (payload_len == 0)
      return WS_EBADMSG;
    m->u.manifest.len = payload_len;
    return mp_digest(map, m->u.manifest.digest);
  default:
    return WS_EPROTO;
  }
}

void ws_peer_free(ws_msg_t *m) {
  if (m->type == WS_MSG_BITFIELD) {
    free(m->u.bitfield.bits);
    m->u.bitfield.bits = NULL;
  }
}
