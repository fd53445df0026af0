/* msg_ctl.c - codecs for the connection-control family: HELLO, AUTH, ERROR,
 * GOODBYE. These are the only messages accepted before authentication, so
 * they are small and fixed-size in memory (no allocation on decode). Pure.
 */
#include <string.h>

#include "proto-int.h"
#include "ws_labels.h"

static int hello_encode(const ws_hello_t *h, msgpack_packer *pk) {
  if (!ws_str_ok(h->node_id, WS_NODE_ID_MAX) || h->node_id[0] == '\0' ||
      !ws_str_ok(h->zone, WS_ZONE_MAX) || h->role >= WS_ROLE_LAST)
    return WS_EUSAGE;
  if (!ws_labels_valid(h->labels))
    return WS_EUSAGE;
  bool lb = h->labels[0] != '\0';
  return msgpack_pack_map(pk, 6u + lb + h->rejoin) |
         ws_pk_kv_uint(pk, "v", h->version) |
         ws_pk_kv_bin(pk, "n", h->nonce, WS_HS_NONCE_LEN) |
         ws_pk_kv_str(pk, "id", h->node_id) |
         ws_pk_kv_uint(pk, "port", h->port) |
         ws_pk_kv_uint(pk, "role", h->role) |
         ws_pk_kv_str(pk, "zone", h->zone) |
         (lb ? ws_pk_kv_str(pk, "lb", h->labels) : 0) |
         (h->rejoin ? ws_pk_kv_bool(pk, "rj", true) : 0);
}

static int hello_decode(const msgpack_object *map, ws_hello_t *h) {
  uint32_t port = 0, role = 0;
  int rc;

  h->labels[0] = '\0';
  h->rejoin = false;

  if ((rc = ws_mp_u32(map, "v", true, UINT32_MAX, &h->version)) < 0 ||
      (rc = ws_mp_binfix(map, "n", true, h->nonce, WS_HS_NONCE_LEN)) < 0 ||
      (rc = ws_mp_strbuf(map, "id", true, h->node_id, WS_NODE_ID_MAX)) < 0 ||
      (rc = ws_mp_u32(map, "port", false, UINT16_MAX, &port)) < 0 ||
      (rc = ws_mp_u32(map, "role", true, WS_ROLE_LAST - 1, &role)) < 0 ||
      (rc = ws_mp_strbuf(map, "zone", false, h->zone, WS_ZONE_MAX)) < 0 ||
      (rc = ws_mp_strbuf(map, "lb", false, h->labels, WS_LABELS_MAX)) < 0 ||
      (rc = ws_mp_bool(map, "rj", false, &h->rejoin)) < 0)
    return rc;
  if (h->node_id[0] == '\0' || !ws_labels_valid(h->labels))
    return WS_EBADMSG;
  h->port = (uint16_t)port;
  h->role = (uint8_t)role;
  return 0;
}

int ws_ctl_encode(const ws_msg_t *m, msgpack_packer *pk) {
  switch (m->type) {
  case WS_MSG_HELLO:
    return hello_encode(&m->u.hello, pk);
  case WS_MSG_AUTH:
    return msgpack_pack_map(pk, 1) |
           ws_pk_kv_bin(pk, "mac", m->u.auth.mac, WS_FRAME_MAC_LEN);
  case WS_MSG_ERROR:
    if (!ws_str_ok(m->u.error.msg, WS_ERRMSG_MAX))
      return WS_EUSAGE;
    return msgpack_pack_map(pk, m->u.error.has_digest ? 3 : 2) |
           ws_pk_kv_int(pk, "code", m->u.error.code) |
           ws_pk_kv_str(pk, "msg", m->u.error.msg) |
           (m->u.error.has_digest
                ? ws_pk_kv_bin(pk, "d", m->u.error.digest, WS_PROTO_DIGEST_LEN)
                : 0);
  case WS_MSG_GOODBYE:
    return msgpack_pack_map(pk, 1) |
           ws_pk_kv_uint(pk, "r", m->u.goodbye.reason);
  default:
    return WS_EUSAGE;
  }
}

int ws_ctl_decode(uint8_t type, const msgpack_object *map, ws_msg_t *m) {
  switch (type) {
  case WS_MSG_HELLO:
    return hello_decode(map, &m->u.hello);
  case WS_MSG_AUTH:
    return ws_mp_binfix(map, "mac", true, m->u.auth.mac, WS_FRAME_MAC_LEN);
  case WS_MSG_ERROR: {
    int rc = ws_mp_i32(map, "code", true, &m->u.error.code);
    if (rc < 0)
      return rc;
    /* Peers truncate long messages themselves; ours is informational. */
    rc = ws_mp_strbuf(map, "msg", false, m->u.error.msg, WS_ERRMSG_MAX);
    if (rc < 0)
      return rc;
    m->u.error.has_digest = ws_mp_find(map, "d") != NULL;
    return ws_mp_binfix(map, "d", false, m->u.error.digest,
                        WS_PROTO_DIGEST_LEN);
  }
  case WS_MSG_GOODBYE:
    return ws_mp_u32(map, "r", false, UINT32_MAX, &m->u.goodbye.reason);
  default:
    return WS_EPROTO;
  }
}
