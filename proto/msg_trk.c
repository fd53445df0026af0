/* msg_trk.c - codecs for the tracker family: ANNOUNCE, ANNOUNCE_REPLY,
 * LEASE_RENEW and LEASE_RELEASE. Every array is capped (WS_MAX_PEERS,
 * WS_MAX_LEASES, WS_MAX_LEASE_CHUNKS, WS_MAX_WANTED, WS_MAX_CHUNK_LIST,
 * WS_MAX_TOTAL_CHUNKS) before anything is allocated. Pure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"

/* ---- ANNOUNCE ---- */

static int announce_encode(const ws_announce_t *a, msgpack_packer *pk) {
  uint32_t n = 7;
  int rc;

  if (a->total_chunks > WS_MAX_TOTAL_CHUNKS || a->event >= WS_ANN_LAST ||
      a->role >= WS_SWARM_LAST || !ws_str_ok(a->zone, WS_ZONE_MAX) ||
      (a->have_bits != NULL && a->have_list != NULL) ||
      (a->have_bits != NULL && a->total_chunks == 0) ||
      a->n_have_list > WS_MAX_CHUNK_LIST ||
      (a->uri != NULL && !ws_str_ok(a->uri, WS_URI_MAX)) ||
      a->n_stuck > WS_MAX_LEASE_CHUNKS ||
      (a->n_stuck > 0 && a->stuck == NULL) ||
      a->n_first > WS_MAX_LEASE_CHUNKS || (a->n_first > 0 && a->first == NULL))
    return WS_EUSAGE;
  for (uint32_t i = 0; a->have_list && i < a->n_have_list; i++)
    if (a->total_chunks != 0 && a->have_list[i] >= a->total_chunks)
      return WS_EUSAGE;
  for (uint32_t i = 0; i < a->n_stuck; i++)
    if (a->stuck[i] >= a->total_chunks)
      return WS_EUSAGE;
  for (uint32_t i = 0; i < a->n_first; i++)
    if (a->first[i] >= a->total_chunks)
      return WS_EUSAGE;
  if (!ws_str_ok(a->err, WS_ERRMSG_MAX))
    return WS_EUSAGE;
  n += (a->have_bits != NULL) + (a->have_list != NULL) + (a->uri != NULL);
  n += (a->size_bytes != 0) + (a->s3_bytes != 0) + (a->peer_bytes != 0) +
       (a->err[0] != '\0') + (a->n_stuck > 0) + (a->n_first > 0);
  rc = msgpack_pack_map(pk, n) |
       ws_pk_kv_bin(pk, "d", a->digest, WS_PROTO_DIGEST_LEN) |
       ws_pk_kv_uint(pk, "tot", a->total_chunks) |
       ws_pk_kv_uint(pk, "ev", a->event) | ws_pk_kv_uint(pk, "role", a->role) |
       ws_pk_kv_bool(pk, "want", a->want) | ws_pk_kv_uint(pk, "port", a->port) |
       ws_pk_kv_str(pk, "zone", a->zone);
  if (a->have_bits != NULL)
    rc |= ws_pk_kv_bin(pk, "have", a->have_bits,
                       ws_bitfield_nbytes(a->total_chunks));
  if (a->have_list != NULL)
    rc |= ws_pk_kv_u32list(pk, "hd", a->have_list, a->n_have_list);
  if (a->uri != NULL)
    rc |= ws_pk_kv_str(pk, "uri", a->uri);
  /* The optional progress report: absent when zero, so an announce without
   * one is byte-identical to before. */
  if (a->size_bytes != 0)
    rc |= ws_pk_kv_uint(pk, "sz", a->size_bytes);
  if (a->s3_bytes != 0)
    rc |= ws_pk_kv_uint(pk, "s3", a->s3_bytes);
  if (a->peer_bytes != 0)
    rc |= ws_pk_kv_uint(pk, "pb", a->peer_bytes);
  if (a->err[0] != '\0')
    rc |= ws_pk_kv_str(pk, "err", a->err);
  if (a->n_stuck > 0)
    rc |= ws_pk_kv_u32list(pk, "st", a->stuck, a->n_stuck);
  if (a->n_first > 0)
    rc |= ws_pk_kv_u32list(pk, "pf", a->first, a->n_first);
  return rc;
}

/* An optional list of chunks (stuck "st", to read first "pf"): only with
 * a chunk count to check them against. */
static int announce_chunks(const msgpack_object *map, const char *key,
                           uint32_t total, uint32_t **out, uint32_t *n) {
  if (ws_mp_find(map, key) != NULL && total == 0)
    return WS_EBADMSG;
  return ws_mp_u32list(map, key, false, WS_MAX_LEASE_CHUNKS, total, out, n);
}

static int announce_decode(const msgpack_object *map, ws_announce_t *a) {
  uint32_t ev = 0, role = 0, port = 0;
  const uint8_t *bits = NULL;
  size_t nbits = 0;
  ws_bitfield_t bf;
  int rc;

  if ((rc = ws_mp_binfix(map, "d", true, a->digest, WS_PROTO_DIGEST_LEN)) < 0 ||
      (rc = ws_mp_u32(map, "tot", true, WS_MAX_TOTAL_CHUNKS,
                      &a->total_chunks)) < 0 ||
      (rc = ws_mp_u32(map, "ev", false, WS_ANN_LAST - 1, &ev)) < 0 ||
      (rc = ws_mp_u32(map, "role", true, WS_SWARM_LAST - 1, &role)) < 0 ||
      (rc = ws_mp_bool(map, "want", true, &a->want)) < 0 ||
      (rc = ws_mp_u32(map, "port", false, UINT16_MAX, &port)) < 0 ||
      (rc = ws_mp_strbuf(map, "zone", false, a->zone, WS_ZONE_MAX)) < 0 ||
      (rc = ws_mp_bin(map, "have", false, &bits, &nbits)) < 0)
    return rc;
  a->event = (uint8_t)ev;
  a->role = (uint8_t)role;
  a->port = (uint16_t)port;
  if (bits != NULL) {
    if (a->total_chunks == 0)
      return WS_EBADMSG;
    rc = ws_bitfield_from_bytes(&bf, a->total_chunks, bits, nbits);
    if (rc < 0)
      return rc;
    a->have_bits = bf.bits;
  }
  rc = ws_mp_u32list(map, "hd", false, WS_MAX_CHUNK_LIST, a->total_chunks,
                     &a->have_list, &a->n_have_list);
  if (rc < 0)
    return rc;
  if (ws_mp_find(map, "hd") != NULL && a->have_bits != NULL)
    return WS_EBADMSG; /* one form or the other, never both */
  if ((rc = ws_mp_u64(map, "sz", false, &a->size_bytes)) < 0 ||
      (rc = ws_mp_u64(map, "s3", false, &a->s3_bytes)) < 0 ||
      (rc = ws_mp_u64(map, "pb", false, &a->peer_bytes)) < 0 ||
      (rc = ws_mp_strbuf(map, "err", false, a->err, WS_ERRMSG_MAX)) < 0)
    return rc;
  if ((rc = announce_chunks(map, "st", a->total_chunks, &a->stuck,
                            &a->n_stuck)) < 0 ||
      (rc = announce_chunks(map, "pf", a->total_chunks, &a->first,
                            &a->n_first)) < 0)
    return rc;
  return ws_mp_strdup(map, "uri", false, WS_URI_MAX, &a->uri);
}

/* ---- ANNOUNCE_REPLY ---- */

/* key and an array of n peer entries ("peers", "nodes"); nonzero on a bad
 * entry or a pack error. */
static int reply_peers_encode(msgpack_packer *pk, const char *key,
                              const ws_peer_info_t *ps, uint32_t n) {
  int rc = ws_pk_key(pk, key) | msgpack_pack_array(pk, n);
  for (uint32_t i = 0; i < n; i++) {
    const ws_peer_info_t *p = &ps[i];
    if (!ws_str_ok(p->node_id, WS_NODE_ID_MAX) || p->node_id[0] == '\0' ||
        !ws_str_ok(p->host, WS_HOST_MAX) || p->host[0] == '\0' ||
        !ws_str_ok(p->zone, WS_ZONE_MAX))
      return WS_EUSAGE;
    rc |= msgpack_pack_map(pk, 4) | ws_pk_kv_str(pk, "id", p->node_id) |
          ws_pk_kv_str(pk, "host", p->host) |
          ws_pk_kv_uint(pk, "port", p->port) |
          ws_pk_kv_str(pk, "zone", p->zone);
  }
  return rc;
}

static int reply_encode(const ws_announce_reply_t *r, msgpack_packer *pk) {
  int rc;

  if (r->n_peers > WS_MAX_PEERS || r->n_leases > WS_MAX_LEASES ||
      r->n_wanted > WS_MAX_WANTED || (r->n_peers && !r->peers) ||
      (r->n_leases && !r->leases) || (r->n_wanted && !r->wanted))
    return WS_EUSAGE;
  if (r->streams > WS_MAX_LEASES)
    return WS_EUSAGE;
  if (r->n_nodes > WS_MAX_NODES || (r->n_nodes && !r->nodes) ||
      r->n_tree > WS_MAX_TREE || (r->n_tree && !r->tree))
    return WS_EUSAGE;
  rc = msgpack_pack_map(pk, 5 + (r->streams != 0) + (r->n_nodes != 0) +
                                (r->n_tree != 0)) |
       ws_pk_kv_bin(pk, "d", r->digest, WS_PROTO_DIGEST_LEN) |
       ws_pk_kv_uint(pk, "iv", r->interval_ms) |
       reply_peers_encode(pk, "peers", r->peers, r->n_peers);
  rc |= ws_pk_key(pk, "leases") | msgpack_pack_array(pk, r->n_leases);
  for (uint32_t i = 0; i < r->n_leases; i++) {
    const ws_lease_t *l = &r->leases[i];
    if (l->n_chunks == 0 || l->n_chunks > WS_MAX_LEASE_CHUNKS ||
        l->chunks == NULL)
      return WS_EUSAGE;
    rc |= msgpack_pack_map(pk, 3) |
          ws_pk_kv_bin(pk, "d", l->digest, WS_PROTO_DIGEST_LEN) |
          ws_pk_kv_u32list(pk, "c", l->chunks, l->n_chunks) |
          ws_pk_kv_uint(pk, "ttl", l->ttl_ms);
  }
  rc |= ws_pk_key(pk, "wanted") | msgpack_pack_array(pk, r->n_wanted);
  for (uint32_t i = 0; i < r->n_wanted; i++) {
    const ws_wanted_t *w = &r->wanted[i];
    if (w->uri != NULL && !ws_str_ok(w->uri, WS_URI_MAX))
      return WS_EUSAGE;
    rc |= msgpack_pack_map(pk, w->uri ? 2 : 1) |
          ws_pk_kv_bin(pk, "d", w->digest, WS_PROTO_DIGEST_LEN);
    if (w->uri != NULL)
      rc |= ws_pk_kv_str(pk, "uri", w->uri);
  }
  if (r->streams != 0)
    rc |= ws_pk_kv_uint(pk, "streams", r->streams);
  /* Absent when empty: a reply without nodes is byte-identical to before. */
  if (r->n_nodes != 0)
    rc |= reply_peers_encode(pk, "nodes", r->nodes, r->n_nodes);
  if (r->n_tree != 0)
    rc |= ws_pk_key(pk, "tree") | msgpack_pack_array(pk, r->n_tree);
  for (uint32_t i = 0; i < r->n_tree; i++) {
    if (!ws_str_ok(r->tree[i], WS_NODE_ID_MAX))
      return WS_EUSAGE;
    rc |= ws_pk_str(pk, r->tree[i]);
  }
  return rc;
}

/* Returns the array under key (absent = empty), capped at max. */
static int reply_array(const msgpack_object *map, const char *key, uint32_t max,
                       const msgpack_object **arr, uint32_t *n) {
  const msgpack_object *o = ws_mp_find(map, key);

  *arr = NULL;
  *n = 0;
  if (o == NULL)
    return 0;
  if (o->type != MSGPACK_OBJECT_ARRAY)
    return WS_EBADMSG;
  if (o->via.array.size > max)
    return WS_ELIMIT;
  *arr = o->via.array.ptr;
  *n = o->via.array.size;
  return 0;
}

/* The np peer entries at pa into *out (allocated; *n counts the ones
 * filled, so ws_trk_free frees a partial list). */
static int reply_peers_decode(const msgpack_object *pa, uint32_t np,
                              ws_peer_info_t **out, uint32_t *n) {
  int rc;
  if (np > 0 && (*out = calloc(np, sizeof(**out))) == NULL)
    return -ENOMEM;
  for (; *n < np; (*n)++) {
    const msgpack_object *e = &pa[*n];
    ws_peer_info_t *p = &(*out)[*n];
    uint32_t port = 0;
    if (e->type != MSGPACK_OBJECT_MAP)
      return WS_EBADMSG;
    if ((rc = ws_mp_strbuf(e, "id", true, p->node_id, WS_NODE_ID_MAX)) < 0 ||
        (rc = ws_mp_strbuf(e, "host", true, p->host, WS_HOST_MAX)) < 0 ||
        (rc = ws_mp_u32(e, "port", true, UINT16_MAX, &port)) < 0 ||
        (rc = ws_mp_strbuf(e, "zone", false, p->zone, WS_ZONE_MAX)) < 0)
      return rc;
    if (p->node_id[0] == '\0' || p->host[0] == '\0')
      return WS_EBADMSG;
    p->port = (uint16_t)port;
  }
  return 0;
}

/* "tree": a node id per stripe, "" where this node is the root. */
static int reply_tree_decode(const msgpack_object *map,
                             ws_announce_reply_t *r) {
  const msgpack_object *ta;
  uint32_t nt;
  int rc = reply_array(map, "tree", WS_MAX_TREE, &ta, &nt);
  if (rc < 0 || nt == 0)
    return rc;
  if ((r->tree = calloc(nt, sizeof(*r->tree))) == NULL)
    return -ENOMEM;
  for (; r->n_tree < nt; r->n_tree++) {
    const msgpack_object *e = &ta[r->n_tree];
    if (e->type != MSGPACK_OBJECT_STR || e->via.str.size > WS_NODE_ID_MAX ||
        memchr(e->via.str.ptr, '\0', e->via.str.size) != NULL)
      return WS_EBADMSG;
    memcpy(r->tree[r->n_tree], e->via.str.ptr, e->via.str.size);
    r->tree[r->n_tree][e->via.str.size] = '\0';
  }
  return 0;
}

static int reply_decode(const msgpack_object *map, ws_announce_reply_t *r) {
  const msgpack_object *pa, *la, *wa;
  uint32_t np, nl, nw;
  int rc;

  if ((rc = ws_mp_binfix(map, "d", true, r->digest, WS_PROTO_DIGEST_LEN)) < 0 ||
      (rc = ws_mp_u32(map, "iv", true, UINT32_MAX, &r->interval_ms)) < 0 ||
      (rc = reply_array(map, "peers", WS_MAX_PEERS, &pa, &np)) < 0 ||
      (rc = reply_array(map, "leases", WS_MAX_LEASES, &la, &nl)) < 0 ||
      (rc = reply_array(map, "wanted", WS_MAX_WANTED, &wa, &nw)) < 0 ||
      (rc = ws_mp_u32(map, "streams", false, WS_MAX_LEASES, &r->streams)) < 0)
    return rc;
  if ((rc = reply_peers_decode(pa, np, &r->peers, &r->n_peers)) < 0 ||
      (rc = reply_array(map, "nodes", WS_MAX_NODES, &pa, &np)) < 0 ||
      (rc = reply_peers_decode(pa, np, &r->nodes, &r->n_nodes)) < 0 ||
      (rc = reply_tree_decode(map, r)) < 0)
    return rc;
  if (nl > 0 && (r->leases = calloc(nl, sizeof(*r->leases))) == NULL)
    return -ENOMEM;
  for (; r->n_leases < nl; r->n_leases++) {
    const msgpack_object *e = &la[r->n_leases];
    ws_lease_t *l = &r->leases[r->n_leases];
    if (e->type != MSGPACK_OBJECT_MAP)
      return WS_EBADMSG;
    if ((rc = ws_mp_binfix(e, "d", true, l->digest, WS_PROTO_DIGEST_LEN)) < 0 ||
        (rc = ws_mp_u32(e, "ttl", true, UINT32_MAX, &l->ttl_ms)) < 0 ||
        (rc = ws_mp_u32list(e, "c", true, WS_MAX_LEASE_CHUNKS, 0, &l->chunks,
                            &l->n_chunks)) < 0)
      return rc;
    if (l->n_chunks == 0)
      return WS_EBADMSG;
  }
  if (nw > 0 && (r->wanted = calloc(nw, sizeof(*r->wanted))) == NULL)
    return -ENOMEM;
  for (; r->n_wanted < nw; r->n_wanted++) {
    const msgpack_object *e = &wa[r->n_wanted];
    ws_wanted_t *w = &r->wanted[r->n_wanted];
    if (e->type != MSGPACK_OBJECT_MAP)
      return WS_EBADMSG;
    if ((rc = ws_mp_binfix(e, "d", true, w->digest, WS_PROTO_DIGEST_LEN)) < 0 ||
        (rc = ws_mp_strdup(e, "uri", false, WS_URI_MAX, &w->uri)) < 0)
      return rc;
  }
  return 0;
}

/* ---- LEASE_RENEW / LEASE_RELEASE ---- */

static int lease_encode(const ws_lease_upd_t *l, msgpack_packer *pk) {
  if (l->n_chunks > WS_MAX_CHUNK_LIST || l->n_done > WS_MAX_CHUNK_LIST ||
      (l->n_chunks && !l->chunks) || (l->n_done && !l->done))
    return WS_EUSAGE;
  return msgpack_pack_map(pk, 3) |
         ws_pk_kv_bin(pk, "d", l->digest, WS_PROTO_DIGEST_LEN) |
         ws_pk_kv_u32list(pk, "c", l->chunks, l->n_chunks) |
         ws_pk_kv_u32list(pk, "done", l->done, l->n_done);
}

static int lease_decode(const msgpack_object *map, ws_lease_upd_t *l) {
  int rc;

  if ((rc = ws_mp_binfix(map, "d", true, l->digest, WS_PROTO_DIGEST_LEN)) < 0 ||
      (rc = ws_mp_u32list(map, "c", false, WS_MAX_CHUNK_LIST, 0, &l->chunks,
                          &l->n_chunks)) < 0 ||
      (rc = ws_mp_u32list(map, "done", false, WS_MAX_CHUNK_LIST, 0, &l->done,
                          &l->n_done)) < 0)
    return rc;
  return 0;
}

int ws_trk_encode(const ws_msg_t *m, msgpack_packer *pk) {
  switch (m->type) {
  case WS_MSG_ANNOUNCE:
    return announce_encode(&m->u.announce, pk);
  case WS_MSG_ANNOUNCE_REPLY:
    return reply_encode(&m->u.announce_reply, pk);
  case WS_MSG_LEASE_RENEW:
  case WS_MSG_LEASE_RELEASE:
    return lease_encode(&m->u.lease, pk);
  default:
    return WS_EUSAGE;
  }
}

int ws_trk_decode(uint8_t type, const msgpack_object *map, ws_msg_t *m) {
  switch (type) {
  case WS_MSG_ANNOUNCE:
    return announce_decode(map, &m->u.announce);
  case WS_MSG_ANNOUNCE_REPLY:
    return reply_decode(map, &m->u.announce_reply);
  case WS_MSG_LEASE_RENEW:
  case WS_MSG_LEASE_RELEASE:
    return lease_decode(map, &m->u.lease);
  default:
    return WS_EPROTO;
  }
}

void ws_trk_free(ws_msg_t *m) {
  switch (m->type) {
  case WS_MSG_ANNOUNCE:
    free(m->u.announce.have_bits);
    free(m->u.announce.have_list);
    free(m->u.announce.uri);
    free(m->u.announce.stuck);
    free(m->u.announce.first);
    break;
  case WS_MSG_ANNOUNCE_REPLY: {
    ws_announce_reply_t *r = &m->u.announce_reply;
    free(r->peers);
    free(r->nodes);
    free(r->tree);
    for (uint32_t i = 0; r->leases && i < r->n_leases; i++)
      free(r->leases[i].chunks);
    free(r->leases);
    for (uint32_t i = 0; r->wanted && i < r->n_wanted; i++)
      free(r->wanted[i].uri);
    free(r->wanted);
    break;
  }
  case WS_MSG_LEASE_RENEW:
  case WS_MSG_LEASE_RELEASE:
    free(m->u.lease.chunks);
    free(m->u.lease.done);
    break;
  default:
    break;
  }
  memset(&m->u, 0, sizeof(m->u));
}
