/* test_msg.c - every message family round-trips; unknown keys are ignored,
 * missing keys rejected; caps enforced; the pre-scanner refuses declared
 * counts the bytes cannot back; bitfield helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <msgpack.h>

#include "proto.h"

static void digest_fill(uint8_t *d, uint8_t seed) {
  for (int i = 0; i < 32; i++)
    d[i] = (uint8_t)(seed + i);
}

/* Encodes m, parses the frame back, decodes into out. */
static int roundtrip(const ws_msg_t *m, ws_msg_t *out) {
  ws_pbuf_t b;
  ws_frame_t f;
  size_t used;
  int rc;

  ws_pbuf_init(&b, 4u << 20);
  rc = ws_msg_encode(m, &b);
  if (rc == 0)
    rc = ws_frame_parse(b.data, b.len, WS_MAX_BODY, WS_MAX_PAYLOAD, &f, &used);
  if (rc == 0) {
    assert_int_equal(used, b.len);
    assert_int_equal(f.type, m->type);
    rc = ws_msg_decode(&f, out);
  }
  ws_pbuf_free(&b);
  return rc;
}

static void test_ctl(void **state) {
  ws_msg_t m, o;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HELLO;
  m.u.hello.version = 1;
  digest_fill(m.u.hello.nonce, 9);
  memcpy(m.u.hello.node_id, "gpu-node-17", 12);
  memcpy(m.u.hello.zone, "us-east-1a", 11);
  m.u.hello.port = 7070;
  m.u.hello.role = WS_ROLE_TRACKER;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(&o.u.hello, &m.u.hello, sizeof(m.u.hello));
  assert_false(o.u.hello.rejoin);
  /* "rj" goes only when true, and comes back. */
  ws_pbuf_t b0, b1;
  ws_pbuf_init(&b0, 4u << 20);
  ws_pbuf_init(&b1, 4u << 20);
  assert_int_equal(ws_msg_encode(&m, &b0), 0);
  m.u.hello.rejoin = true;
  assert_int_equal(ws_msg_encode(&m, &b1), 0);
  assert_int_equal(b1.len, b0.len + 4); /* fixstr "rj" + true */
  ws_pbuf_free(&b0);
  ws_pbuf_free(&b1);
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_true(o.u.hello.rejoin);
  assert_memory_equal(&o.u.hello, &m.u.hello, sizeof(m.u.hello));

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_AUTH;
  digest_fill(m.u.auth.mac, 200);
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(o.u.auth.mac, m.u.auth.mac, 32);

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ERROR;
  m.u.error.code = WS_EBANNED;
  memcpy(m.u.error.msg, "banned: bad chunk 12", 21);
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_int_equal(o.u.error.code, WS_EBANNED);
  assert_string_equal(o.u.error.msg, "banned: bad chunk 12");

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_GOODBYE;
  m.u.goodbye.reason = WS_BYE_SHUTDOWN + 3;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_int_equal(o.u.goodbye.reason, 3);

  /* Encoder refuses invalid fields. */
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HELLO; /* empty node id */
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
  m.type = 99;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
}

/* An optional chunk list of m, an ANNOUNCE of 9 chunks (list, n: its
 * fields in m; the decoded copy's are at the same offsets). */
static void check_chunk_list(ws_msg_t *m, uint32_t **list, uint32_t *n) {
  ws_msg_t o;
  size_t list_off = (size_t)((char *)list - (char *)&m->u.announce);
  size_t n_off = (size_t)((char *)n - (char *)&m->u.announce);
  uint32_t c[3] = {0, 3, 7};
  *list = c;
  *n = 3;
  assert_int_equal(roundtrip(m, &o), 0);
  uint32_t *got = *(uint32_t **)((char *)&o.u.announce + list_off);
  assert_int_equal(*(uint32_t *)((char *)&o.u.announce + n_off), 3);
  assert_memory_equal(got, c, sizeof(c));
  ws_msg_free(&o);
  c[2] = 9; /* not a chunk of the release */
  assert_int_equal(roundtrip(m, &o), WS_EUSAGE);
  *n = WS_MAX_LEASE_CHUNKS + 1u;
  assert_int_equal(roundtrip(m, &o), WS_EUSAGE);
  *list = NULL;
  *n = 0;
  assert_int_equal(roundtrip(m, &o), 0);
  assert_null(*(uint32_t **)((char *)&o.u.announce + list_off));
  ws_msg_free(&o);
}

static void test_announce(void **state) {
  ws_msg_t m, o;
  uint8_t bits[2] = {0xa5, 0x80};
  uint32_t list[3] = {0, 5, 8};

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ANNOUNCE;
  digest_fill(m.u.announce.digest, 1);
  m.u.announce.total_chunks = 9;
  m.u.announce.event = WS_ANN_STARTED;
  m.u.announce.role = WS_SWARM_SEED;
  m.u.announce.want = true;
  m.u.announce.port = 6881;
  memcpy(m.u.announce.zone, "z1", 3);
  m.u.announce.have_bits = bits;
  m.u.announce.uri = "s3://bucket/models/llama/sha256-ab/manifest.json";
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(o.u.announce.digest, m.u.announce.digest, 32);
  assert_int_equal(o.u.announce.total_chunks, 9);
  assert_int_equal(o.u.announce.event, WS_ANN_STARTED);
  assert_int_equal(o.u.announce.role, WS_SWARM_SEED);
  assert_true(o.u.announce.want);
  assert_int_equal(o.u.announce.port, 6881);
  assert_string_equal(o.u.announce.zone, "z1");
  assert_memory_equal(o.u.announce.have_bits, bits, 2);
  assert_null(o.u.announce.have_list);
  assert_string_equal(o.u.announce.uri, m.u.announce.uri);
  ws_msg_free(&o);

  m.u.announce.have_bits = NULL;
  m.u.announce.have_list = list;
  m.u.announce.n_have_list = 3;
  m.u.announce.uri = NULL;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_int_equal(o.u.announce.n_have_list, 3);
  assert_memory_equal(o.u.announce.have_list, list, sizeof(list));
  assert_null(o.u.announce.uri);
  ws_msg_free(&o);

  /* Spare bits set, indexes out of range, both forms: refused. */
  bits[1] = 0x81;
  m.u.announce.have_list = NULL;
  m.u.announce.have_bits = bits;
  assert_int_equal(roundtrip(&m, &o), WS_EBADMSG);
  bits[1] = 0x80;
  m.u.announce.have_list = list;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
  m.u.announce.have_bits = NULL;
  list[2] = 9;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);

  /* Stuck chunks ("st") and chunks to read first ("pf"): round-trip;
   * absent when none; bounded; each a chunk of the release. */
  m.u.announce.have_list = NULL;
  m.u.announce.n_have_list = 0;
  check_chunk_list(&m, &m.u.announce.stuck, &m.u.announce.n_stuck);
  check_chunk_list(&m, &m.u.announce.first, &m.u.announce.n_first);
}

static void test_announce_reply(void **state) {
  ws_msg_t m, o;
  ws_peer_info_t peers[2];
  uint32_t c0[2] = {3, 4}, c1[1] = {100000};
  ws_lease_t leases[2];
  ws_wanted_t wanted[2];

  memset(&m, 0, sizeof(m));
  memset(peers, 0, sizeof(peers));
  memset(leases, 0, sizeof(leases));
  memset(wanted, 0, sizeof(wanted));
  m.type = WS_MSG_ANNOUNCE_REPLY;
  digest_fill(m.u.announce_reply.digest, 3);
  m.u.announce_reply.interval_ms = 15000;
  memcpy(peers[0].node_id, "a", 2);
  memcpy(peers[0].host, "10.0.0.1", 9);
  peers[0].port = 1;
  memcpy(peers[0].zone, "z", 2);
  memcpy(peers[1].node_id, "b", 2);
  memcpy(peers[1].host, "fd00::2", 8);
  peers[1].port = 65535;
  digest_fill(leases[0].digest, 4);
  leases[0].chunks = c0;
  leases[0].n_chunks = 2;
  leases[0].ttl_ms = 30000;
  digest_fill(leases[1].digest, 5);
  leases[1].chunks = c1;
  leases[1].n_chunks = 1;
  digest_fill(wanted[0].digest, 6);
  wanted[0].uri = "s3://b/p/m/sha256-x/manifest.json";
  digest_fill(wanted[1].digest, 7);
  m.u.announce_reply.peers = peers;
  m.u.announce_reply.n_peers = 2;
  m.u.announce_reply.leases = leases;
  m.u.announce_reply.n_leases = 2;
  m.u.announce_reply.wanted = wanted;
  m.u.announce_reply.n_wanted = 2;
  m.u.announce_reply.streams = 2;
  assert_int_equal(roundtrip(&m, &o), 0);
  ws_announce_reply_t *r = &o.u.announce_reply;
  assert_int_equal(r->interval_ms, 15000);
  assert_int_equal(r->streams, 2);
  assert_int_equal(r->n_peers, 2);
  assert_memory_equal(r->peers, peers, sizeof(peers));
  assert_int_equal(r->n_leases, 2);
  assert_memory_equal(r->leases[0].digest, leases[0].digest, 32);
  assert_int_equal(r->leases[0].n_chunks, 2);
  assert_memory_equal(r->leases[0].chunks, c0, sizeof(c0));
  assert_int_equal(r->leases[0].ttl_ms, 30000);
  assert_int_equal(r->leases[1].chunks[0], 100000);
  assert_int_equal(r->n_wanted, 2);
  assert_string_equal(r->wanted[0].uri, wanted[0].uri);
  assert_null(r->wanted[1].uri);
  assert_memory_equal(r->wanted[1].digest, wanted[1].digest, 32);
  assert_int_equal(r->n_nodes, 0); /* absent: none */
  assert_null(r->nodes);
  ws_msg_free(&o);

  /* The optional sample of other nodes (presence reply). */
  m.u.announce_reply.nodes = peers;
  m.u.announce_reply.n_nodes = 2;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_int_equal(o.u.announce_reply.n_nodes, 2);
  assert_memory_equal(o.u.announce_reply.nodes, peers, sizeof(peers));
  assert_int_equal(o.u.announce_reply.n_peers, 2);
  ws_msg_free(&o);
  m.u.announce_reply.n_nodes = WS_MAX_NODES + 1; /* over the cap */
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
  m.u.announce_reply.nodes = NULL;
  m.u.announce_reply.n_nodes = 0;

  /* The optional stripe trees: a parent per stripe, "" for the root. */
  char tree[3][WS_NODE_ID_MAX + 1] = {"a", "", "b"};
  assert_null(o.u.announce_reply.tree); /* absent: none (freed above) */
  m.u.announce_reply.tree = tree;
  m.u.announce_reply.n_tree = 3;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_int_equal(o.u.announce_reply.n_tree, 3);
  assert_string_equal(o.u.announce_reply.tree[0], "a");
  assert_string_equal(o.u.announce_reply.tree[1], "");
  assert_string_equal(o.u.announce_reply.tree[2], "b");
  ws_msg_free(&o);
  m.u.announce_reply.n_tree = WS_MAX_TREE + 1; /* over the cap */
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
  m.u.announce_reply.tree = NULL;
  m.u.announce_reply.n_tree = 0;

  /* Empty reply. */
  memset(&m.u.announce_reply.peers, 0,
         sizeof(m.u.announce_reply) - offsetof(ws_announce_reply_t, peers));
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_int_equal(o.u.announce_reply.n_peers, 0);
  assert_null(o.u.announce_reply.peers);
  assert_int_equal(o.u.announce_reply.streams, 0); /* absent: all at once */
  ws_msg_free(&o);

  /* More streams than a reply can hold leases is not a count. */
  m.u.announce_reply.streams = WS_MAX_LEASES + 1;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
  m.u.announce_reply.streams = 0;

  /* Over the caps the encoder refuses. */
  m.u.announce_reply.n_peers = WS_MAX_PEERS + 1;
  m.u.announce_reply.peers = peers;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
}

static void test_lease_and_peer(void **state) {
  ws_msg_t m, o;
  uint32_t c[3] = {1, 2, 3}, d[1] = {0};
  uint8_t bits[3] = {0xff, 0x00, 0xc0};

  for (int t = 0; t < 2; t++) {
    memset(&m, 0, sizeof(m));
    m.type = t ? WS_MSG_LEASE_RELEASE : WS_MSG_LEASE_RENEW;
    digest_fill(m.u.lease.digest, 8);
    m.u.lease.chunks = c;
    m.u.lease.n_chunks = 3;
    m.u.lease.done = d;
    m.u.lease.n_done = 1;
    assert_int_equal(roundtrip(&m, &o), 0);
    assert_int_equal(o.type, m.type);
    assert_int_equal(o.u.lease.n_chunks, 3);
    assert_memory_equal(o.u.lease.chunks, c, sizeof(c));
    assert_int_equal(o.u.lease.n_done, 1);
    assert_int_equal(o.u.lease.done[0], 0);
    ws_msg_free(&o);
  }

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  digest_fill(m.u.have.digest, 9);
  m.u.have.chunk = 4000000000u;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(&o.u.have, &m.u.have, sizeof(m.u.have));
  /* "p": a chunk still coming from origin; absent means false. */
  m.u.have.live = true;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_true(o.u.have.live);
  assert_int_equal(o.u.have.chunk, 4000000000u);
  assert_string_equal(o.u.have.from, ""); /* absent: from S3 / unknown */
  /* "f": the neighbour the chunk came from (to a tracker). */
  m.u.have.live = false;
  snprintf(m.u.have.from, sizeof(m.u.have.from), "node-7");
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_string_equal(o.u.have.from, "node-7");
  assert_false(o.u.have.live);

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_BITFIELD;
  digest_fill(m.u.bitfield.digest, 10);
  m.u.bitfield.total_chunks = 18;
  m.u.bitfield.bits = bits;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_int_equal(o.u.bitfield.total_chunks, 18);
  assert_memory_equal(o.u.bitfield.bits, bits, 3);
  assert_false(o.u.bitfield.live);
  ws_msg_free(&o);
  assert_false(o.u.bitfield.mux);
  m.u.bitfield.live = true;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_true(o.u.bitfield.live);
  assert_false(o.u.bitfield.mux);
  ws_msg_free(&o);
  m.u.bitfield.mux = true;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_true(o.u.bitfield.live);
  assert_true(o.u.bitfield.mux);
  ws_msg_free(&o);

  for (int t = 0; t < 2; t++) {
    memset(&m, 0, sizeof(m));
    m.type = t ? WS_MSG_CANCEL : WS_MSG_REQUEST;
    digest_fill(m.u.request.digest, 11);
    m.u.request.chunk = 12;
    m.u.request.req_id = 0xdeadbeef;
    assert_int_equal(roundtrip(&m, &o), 0);
    assert_memory_equal(&o.u.request, &m.u.request, sizeof(m.u.request));
  }

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  digest_fill(m.u.chunk.digest, 12);
  m.u.chunk.chunk = 3;
  m.u.chunk.req_id = 8;
  m.u.chunk.len = 16u << 20;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(&o.u.chunk, &m.u.chunk, sizeof(m.u.chunk));
  /* A piece ("o"), also at offset 0; an offset past any chunk is refused. */
  m.u.chunk.piece = true;
  m.u.chunk.off = 0;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_true(o.u.chunk.piece);
  assert_int_equal(o.u.chunk.off, 0);
  m.u.chunk.off = (16u << 20) - 1;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_true(o.u.chunk.piece);
  assert_int_equal(o.u.chunk.off, (16u << 20) - 1);
  m.u.chunk.off = WS_MAX_PAYLOAD;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
  m.u.chunk.piece = false;
  m.u.chunk.off = 0;
  m.u.chunk.len = 0;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);
  m.u.chunk.len = WS_MAX_PAYLOAD + 1;
  assert_int_equal(roundtrip(&m, &o), WS_EUSAGE);

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_REJECT;
  digest_fill(m.u.reject.digest, 13);
  m.u.reject.chunk = 1;
  m.u.reject.req_id = 2;
  m.u.reject.reason = WS_REJECT_BUSY;
  m.u.reject.retry_after_ms = 250;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(&o.u.reject, &m.u.reject, sizeof(m.u.reject));

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_MANIFEST_REQ;
  digest_fill(m.u.manifest_req.digest, 14);
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(o.u.manifest_req.digest, m.u.manifest_req.digest, 32);

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_MANIFEST;
  digest_fill(m.u.manifest.digest, 15);
  m.u.manifest.len = 1234;
  assert_int_equal(roundtrip(&m, &o), 0);
  assert_memory_equal(&o.u.manifest, &m.u.manifest, sizeof(m.u.manifest));
}

/* Frame with a hand-packed body. */
static int decode_raw(uint8_t type, const uint8_t *body, uint32_t n,
                      uint32_t payload, ws_msg_t *out) {
  uint8_t hdr[WS_FRAME_HDR_LEN] = {'W', 'S', WS_PROTO_VERSION, type};
  ws_frame_t f;

  hdr[8] = (uint8_t)(n >> 24);
  hdr[9] = (uint8_t)(n >> 16);
  hdr[10] = (uint8_t)(n >> 8);
  hdr[11] = (uint8_t)n;
  hdr[12] = (uint8_t)(payload >> 24);
  hdr[13] = (uint8_t)(payload >> 16);
  hdr[14] = (uint8_t)(payload >> 8);
  hdr[15] = (uint8_t)payload;
  assert_int_equal(ws_frame_hdr_parse(hdr, WS_MAX_BODY, WS_MAX_PAYLOAD, &f), 0);
  f.body = body;
  return ws_msg_decode(&f, out);
}

static void pk_key(msgpack_packer *pk, const char *k) {
  msgpack_pack_str(pk, strlen(k));
  msgpack_pack_str_body(pk, k, strlen(k));
}

/* An ANNOUNCE_REPLY whose array under key holds n elements, each packed
 * by el, after the required keys; returns what the decoder says. */
static int reply_raw(const char *key, uint32_t n,
                     void (*el)(msgpack_packer *pk)) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint8_t d[32];
  ws_msg_t o;
  digest_fill(d, 21);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  pk_key(&pk, "d");
  msgpack_pack_bin(&pk, 32);
  msgpack_pack_bin_body(&pk, d, 32);
  pk_key(&pk, "iv");
  msgpack_pack_uint32(&pk, 1000);
  pk_key(&pk, key);
  msgpack_pack_array(&pk, n);
  for (uint32_t i = 0; i < n; i++)
    el(&pk);
  int rc = decode_raw(WS_MSG_ANNOUNCE_REPLY, (uint8_t *)sb.data,
                      (uint32_t)sb.size, 0, &o);
  if (rc == 0)
    ws_msg_free(&o);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

static void el_id(msgpack_packer *pk) {
  pk_key(pk, "node-1");
}
static void el_int(msgpack_packer *pk) {
  msgpack_pack_int(pk, 7);
}
static void el_long(msgpack_packer *pk) {
  char id[WS_NODE_ID_MAX + 1];
  memset(id, 'x', sizeof(id));
  msgpack_pack_str(pk, sizeof(id));
  msgpack_pack_str_body(pk, id, sizeof(id));
}
static void el_nul(msgpack_packer *pk) {
  msgpack_pack_str(pk, 3);
  msgpack_pack_str_body(pk, "a\0b", 3);
}

/* "tree" from a hostile tracker: only node ids (strings of at most
 * WS_NODE_ID_MAX bytes, no NUL) are taken. */
static void test_reply_tree_checked(void **state) {
  (void)state;
  assert_int_equal(reply_raw("tree", 1, el_id), 0);
  assert_int_equal(reply_raw("tree", 1, el_int), WS_EBADMSG);
  assert_int_equal(reply_raw("tree", 1, el_long), WS_EBADMSG);
  assert_int_equal(reply_raw("tree", 1, el_nul), WS_EBADMSG);
  assert_int_equal(reply_raw("tree", WS_MAX_TREE + 1, el_id), WS_ELIMIT);
}

static void test_unknown_and_missing_keys(void **state) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  uint8_t d[32];
  ws_msg_t o;

  digest_fill(d, 20);
  /* HAVE with extra keys of every kind, in a different order. */
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 5);
  pk_key(&pk, "future");
  msgpack_pack_array(&pk, 2);
  msgpack_pack_nil(&pk);
  msgpack_pack_double(&pk, 1.5);
  pk_key(&pk, "c");
  msgpack_pack_uint64(&pk, 77);
  msgpack_pack_int(&pk, -5); /* non-string key */
  msgpack_pack_true(&pk);
  pk_key(&pk, "d");
  msgpack_pack_bin(&pk, 32);
  msgpack_pack_bin_body(&pk, d, 32);
  pk_key(&pk, "x");
  msgpack_pack_map(&pk, 1);
  pk_key(&pk, "y");
  msgpack_pack_str(&pk, 2);
  msgpack_pack_str_body(&pk, "zz", 2);
  assert_int_equal(
      decode_raw(WS_MSG_HAVE, (uint8_t *)sb.data, (uint32_t)sb.size, 0, &o), 0);
  assert_int_equal(o.u.have.chunk, 77);
  assert_memory_equal(o.u.have.digest, d, 32);
  msgpack_sbuffer_destroy(&sb);

  /* Missing "c": WS_EBADMSG. Wrong type for "d": WS_EBADMSG. */
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 1);
  pk_key(&pk, "d");
  msgpack_pack_bin(&pk, 32);
  msgpack_pack_bin_body(&pk, d, 32);
  assert_int_equal(
      decode_raw(WS_MSG_HAVE, (uint8_t *)sb.data, (uint32_t)sb.size, 0, &o),
      WS_EBADMSG);
  msgpack_sbuffer_destroy(&sb);
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  pk_key(&pk, "d");
  msgpack_pack_str(&pk, 32);
  msgpack_pack_str_body(&pk, d, 32);
  pk_key(&pk, "c");
  msgpack_pack_uint32(&pk, 1);
  assert_int_equal(
      decode_raw(WS_MSG_HAVE, (uint8_t *)sb.data, (uint32_t)sb.size, 0, &o),
      WS_EBADMSG);
  msgpack_sbuffer_destroy(&sb);

  /* Unknown type. */
  static const uint8_t empty_map[] = {0x80};
  assert_false(ws_msg_type_known(200));
  assert_int_equal(decode_raw(200, empty_map, 1, 0, &o), WS_EPROTO);
  /* Not a map, trailing bytes. */
  static const uint8_t arr[] = {0x90};
  assert_int_equal(decode_raw(WS_MSG_GOODBYE, arr, 1, 0, &o), WS_EBADMSG);
  static const uint8_t trail[] = {0x80, 0xc0};
  assert_int_equal(decode_raw(WS_MSG_GOODBYE, trail, 2, 0, &o), WS_EBADMSG);
  assert_int_equal(decode_raw(WS_MSG_GOODBYE, empty_map, 1, 0, &o), 0);
  /* CHUNK without a payload. */
  assert_int_equal(decode_raw(WS_MSG_CHUNK, empty_map, 1, 0, &o), WS_EBADMSG);
}

static void el_nil(msgpack_packer *pk) {
  msgpack_pack_nil(pk);
}

static void test_array_caps(void **state) {
  (void)state;
  assert_int_equal(reply_raw("peers", WS_MAX_PEERS + 1, el_nil), WS_ELIMIT);
}

/* msgpack-c issue #1013 shapes: declared counts far beyond the bytes. */
static void test_scan_hostile(void **state) {
  static const uint8_t big_array[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
  static const uint8_t big_map[] = {0xdf, 0x7f, 0xff, 0xff, 0xff};
  static const uint8_t big_str[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'};
  static const uint8_t big_bin[] = {0xc6, 0x00, 0x10, 0x00, 0x00, 0};
  static const uint8_t big_ext[] = {0xc9, 0xff, 0xff, 0xff, 0xff, 1};
  static const uint8_t nested_arrays[] = {0x91, 0xdd, 0xff, 0xff, 0xff, 0xff};
  static const uint8_t bad_byte[] = {0xc1};
  static const uint8_t ok[] = {0x82, 0xa1, 'a',  0x01, 0xa1, 'b',
                               0x92, 0xc0, 0xcb, 0,    0,    0,
                               0,    0,    0,    0,    0};
  uint8_t deep[WS_MAX_DEPTH + 1];
  ws_msg_t o;

  assert_int_equal(ws_msgpack_scan(big_array, sizeof(big_array)),
                   WS_ETRUNCATED);
  assert_int_equal(ws_msgpack_scan(big_map, sizeof(big_map)), WS_ETRUNCATED);
  assert_int_equal(ws_msgpack_scan(big_str, sizeof(big_str)), WS_ETRUNCATED);
  assert_int_equal(ws_msgpack_scan(big_bin, sizeof(big_bin)), WS_ETRUNCATED);
  assert_int_equal(ws_msgpack_scan(big_ext, sizeof(big_ext)), WS_ETRUNCATED);
  assert_int_equal(ws_msgpack_scan(nested_arrays, sizeof(nested_arrays)),
                   WS_ETRUNCATED);
  assert_int_equal(ws_msgpack_scan(bad_byte, 1), WS_EBADMSG);
  assert_int_equal(ws_msgpack_scan(ok, sizeof(ok)), 0);
  assert_int_equal(ws_msgpack_scan(ok, sizeof(ok) - 1), WS_ETRUNCATED);
  memset(deep, 0x91, sizeof(deep));
  deep[WS_MAX_DEPTH] = 0xc0;
  assert_int_equal(ws_msgpack_scan(deep, WS_MAX_DEPTH), WS_ELIMIT);
  deep[WS_MAX_DEPTH - 1] = 0xc0; /* exactly WS_MAX_DEPTH levels */
  assert_int_equal(ws_msgpack_scan(deep, WS_MAX_DEPTH), 0);
  /* Sibling containers whose sum exceeds the bytes. */
  static const uint8_t siblings[] = {0x92, 0x93, 0xc0, 0xc0};
  assert_int_equal(ws_msgpack_scan(siblings, sizeof(siblings)), WS_ETRUNCATED);
  /* The 5-byte frame body reaches decode and fails without allocation. */
  static const uint8_t five[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
  assert_int_equal(decode_raw(WS_MSG_HAVE, five, 5, 0, &o), WS_EBADMSG);
  /* Object count cap. */
  size_t n = WS_MAX_OBJECTS + 8;
  uint8_t *many = malloc(n);
  assert_non_null(many);
  many[0] = 0xdd;
  uint32_t cnt = (uint32_t)(n - 5);
  many[1] = (uint8_t)(cnt >> 24);
  many[2] = (uint8_t)(cnt >> 16);
  many[3] = (uint8_t)(cnt >> 8);
  many[4] = (uint8_t)cnt;
  memset(many + 5, 0xc0, n - 5);
  assert_int_equal(ws_msgpack_scan(many, n), WS_ELIMIT);
  free(many);
}

static void test_bitfield(void **state) {
  ws_bitfield_t bf, bf2;
  uint8_t bytes[2] = {0x80, 0x40};

  assert_int_equal(ws_bitfield_init(&bf, 0), WS_ELIMIT);
  assert_int_equal(ws_bitfield_init(&bf, WS_MAX_TOTAL_CHUNKS + 1), WS_ELIMIT);
  assert_int_equal(ws_bitfield_init(&bf, 13), 0);
  assert_int_equal(ws_bitfield_nbytes(13), 2);
  assert_int_equal(ws_bitfield_count(&bf), 0);
  assert_int_equal(ws_bitfield_next_set(&bf, 0), 13);
  ws_bitfield_set(&bf, 0);
  ws_bitfield_set(&bf, 9);
  ws_bitfield_set(&bf, 13); /* out of range: ignored */
  assert_true(ws_bitfield_test(&bf, 0));
  assert_true(ws_bitfield_test(&bf, 9));
  assert_false(ws_bitfield_test(&bf, 8));
  assert_false(ws_bitfield_test(&bf, 13));
  assert_memory_equal(bf.bits, bytes, 2);
  assert_int_equal(ws_bitfield_count(&bf), 2);
  assert_int_equal(ws_bitfield_next_set(&bf, 1), 9);
  assert_int_equal(ws_bitfield_next_clear(&bf, 0), 1);
  for (uint32_t i = 0; i < 13; i++)
    ws_bitfield_set(&bf, i);
  assert_true(ws_bitfield_full(&bf));
  assert_int_equal(ws_bitfield_next_clear(&bf, 0), 13);
  ws_bitfield_clear(&bf, 12);
  assert_false(ws_bitfield_full(&bf));
  assert_int_equal(ws_bitfield_next_clear(&bf, 0), 12);

  assert_int_equal(ws_bitfield_from_bytes(&bf2, 13, bytes, 2), 0);
  assert_int_equal(ws_bitfield_count(&bf2), 2);
  ws_bitfield_free(&bf2);
  bytes[1] = 0x41; /* spare bit */
  assert_int_equal(ws_bitfield_from_bytes(&bf2, 13, bytes, 2), WS_EBADMSG);
  assert_int_equal(ws_bitfield_from_bytes(&bf2, 13, bytes, 1), WS_EBADMSG);
  ws_bitfield_free(&bf);
  ws_bitfield_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ctl),
      cmocka_unit_test(test_announce),
      cmocka_unit_test(test_announce_reply),
      cmocka_unit_test(test_lease_and_peer),
      cmocka_unit_test(test_unknown_and_missing_keys),
      cmocka_unit_test(test_reply_tree_checked),
      cmocka_unit_test(test_array_caps),
      cmocka_unit_test(test_scan_hostile),
      cmocka_unit_test(test_bitfield),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
