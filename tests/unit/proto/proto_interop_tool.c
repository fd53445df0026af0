/* proto_interop_tool.c - lets test_interop.py check our wire format against
 * an independent implementation (python3-msgpack, hashlib/hmac).
 *
 *   proto_interop_tool encode FILE   one frame of every type (+payloads)
 *   proto_interop_tool decode FILE   read a frame stream in 7-byte pieces,
 *                                    print one canonical line per message
 *   proto_interop_tool hs-kat        fixed-key handshake, print hex values
 *
 * Exit 0 on success, 1 on any error (printed as "ERROR <name>").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static void hex(const char *key, const uint8_t *p, size_t n) {
  printf(" %s=", key);
  for (size_t i = 0; i < n; i++)
    printf("%02x", p[i]);
}

static void hexraw(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    printf("%02x", p[i]);
}

static void u32list(const char *key, const uint32_t *v, uint32_t n) {
  printf(" %s=", key);
  for (uint32_t i = 0; i < n; i++)
    printf("%s%u", i ? "," : "", v[i]);
}

static void print_msg(const ws_msg_t *m) {
  printf("%s", ws_msg_type_name(m->type));
  switch (m->type) {
  case WS_MSG_HELLO:
    printf(" v=%u", m->u.hello.version);
    hex("n", m->u.hello.nonce, 32);
    printf(" id=%s port=%u role=%u zone=%s", m->u.hello.node_id,
           m->u.hello.port, m->u.hello.role, m->u.hello.zone);
    break;
  case WS_MSG_AUTH:
    hex("mac", m->u.auth.mac, 32);
    break;
  case WS_MSG_ERROR:
    printf(" code=%d msg=%s", m->u.error.code, m->u.error.msg);
    break;
  case WS_MSG_GOODBYE:
    printf(" r=%u", m->u.goodbye.reason);
    break;
  case WS_MSG_ANNOUNCE: {
    const ws_announce_t *a = &m->u.announce;
    hex("d", a->digest, 32);
    printf(" tot=%u ev=%u role=%u want=%d port=%u zone=%s", a->total_chunks,
           a->event, a->role, a->want, a->port, a->zone);
    if (a->have_bits)
      hex("have", a->have_bits, ws_bitfield_nbytes(a->total_chunks));
    if (a->have_list)
      u32list("hd", a->have_list, a->n_have_list);
    if (a->uri)
      printf(" uri=%s", a->uri);
    break;
  }
  case WS_MSG_ANNOUNCE_REPLY: {
    const ws_announce_reply_t *r = &m->u.announce_reply;
    hex("d", r->digest, 32);
    printf(" iv=%u", r->interval_ms);
    for (uint32_t i = 0; i < r->n_peers; i++)
      printf(" peer=%s@%s:%u/%s", r->peers[i].node_id, r->peers[i].host,
             r->peers[i].port, r->peers[i].zone);
    for (uint32_t i = 0; i < r->n_leases; i++) {
      hex("lease", r->leases[i].digest, 32);
      u32list("c", r->leases[i].chunks, r->leases[i].n_chunks);
      printf(" ttl=%u", r->leases[i].ttl_ms);
    }
    for (uint32_t i = 0; i < r->n_wanted; i++) {
      hex("wanted", r->wanted[i].digest, 32);
      printf(" uri=%s", r->wanted[i].uri ? r->wanted[i].uri : "-");
    }
    break;
  }
  case WS_MSG_LEASE_RENEW:
  case WS_MSG_LEASE_RELEASE:
    hex("d", m->u.lease.digest, 32);
    u32list("c", m->u.lease.chunks, m->u.lease.n_chunks);
    u32list("done", m->u.lease.done, m->u.lease.n_done);
    break;
  case WS_MSG_HAVE:
    hex("d", m->u.have.digest, 32);
    printf(" c=%u", m->u.have.chunk);
    if (m->u.have.live)
      printf(" p=1");
    break;
  case WS_MSG_BITFIELD:
    hex("d", m->u.bitfield.digest, 32);
    printf(" tot=%u", m->u.bitfield.total_chunks);
    hex("bits", m->u.bitfield.bits,
        ws_bitfield_nbytes(m->u.bitfield.total_chunks));
    if (m->u.bitfield.live)
      printf(" live=1");
    if (m->u.bitfield.mux)
      printf(" mux=1");
    break;
  case WS_MSG_REQUEST:
  case WS_MSG_CANCEL:
    hex("d", m->u.request.digest, 32);
    printf(" c=%u id=%u", m->u.request.chunk, m->u.request.req_id);
    break;
  case WS_MSG_CHUNK:
    hex("d", m->u.chunk.digest, 32);
    printf(" c=%u id=%u len=%u", m->u.chunk.chunk, m->u.chunk.req_id,
           m->u.chunk.len);
    if (m->u.chunk.piece)
      printf(" o=%u", m->u.chunk.off);
    break;
  case WS_MSG_REJECT:
    hex("d", m->u.reject.digest, 32);
    printf(" c=%u id=%u r=%u ra=%u", m->u.reject.chunk, m->u.reject.req_id,
           m->u.reject.reason, m->u.reject.retry_after_ms);
    break;
  case WS_MSG_MANIFEST_REQ:
    hex("d", m->u.manifest_req.digest, 32);
    break;
  case WS_MSG_MANIFEST:
    hex("d", m->u.manifest.digest, 32);
    printf(" len=%u", m->u.manifest.len);
    break;
  default:
    break;
  }
  printf("\n");
}

static int cmd_decode(const char *path) {
  FILE *f = fopen(path, "rb");
  ws_frame_reader_t *r = ws_frame_reader_new(WS_MAX_BODY, WS_MAX_PAYLOAD);
  uint8_t buf[7];
  size_t n;
  int rc = 0;

  if (f == NULL || r == NULL) {
    rc = WS_EUSAGE;
    goto cleanup;
  }
  while (rc == 0 && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
    const uint8_t *p = buf;
    while (rc == 0 && n > 0) {
      ws_frame_ev_t ev;
      size_t used;
      ws_msg_t m;
      rc = ws_frame_reader_feed(r, p, n, &used, &ev);
      p += used;
      n -= used;
      if (rc < 0 || ev.kind == WS_FRAME_EV_NONE)
        continue;
      if (ev.kind == WS_FRAME_EV_PAYLOAD) {
        /* Pieces follow the 7-byte reads; print them as one value. */
        if (ev.payload_off == 0)
          printf(" payload=");
        hexraw(ev.data, ev.len);
        printf("%s", ev.payload_last ? "\n" : "");
        continue;
      }
      if (!ws_msg_type_known(ev.frame.type)) {
        printf("SKIP type=%u payload=%u\n", ev.frame.type,
               ev.frame.payload_len);
        continue;
      }
      rc = ws_msg_decode(&ev.frame, &m);
      if (rc == 0) {
        print_msg(&m);
        ws_msg_free(&m);
      }
    }
  }
  if (rc == 0 && !ws_frame_reader_idle(r))
    rc = WS_ETRUNCATED;
cleanup:
  if (rc < 0)
    printf("ERROR %s\n", ws_errname(rc));
  ws_frame_reader_free(r);
  if (f)
    fclose(f);
  return rc < 0 ? 1 : 0;
}

static void dg(uint8_t *d, uint8_t seed) {
  for (int i = 0; i < 32; i++)
    d[i] = (uint8_t)(seed ^ i);
}

static int cmd_encode(const char *path) {
  static uint32_t list[] = {1, 2, 300, 70000};
  static uint8_t have[2] = {0xf0, 0x80};
  ws_peer_info_t peer = {"node-b", "10.1.2.3", 6881, "zb"};
  ws_lease_t lease = {{0}, list, 4, 30000};
  ws_wanted_t wanted = {{0}, "s3://bkt/m/sha256-00/manifest.json"};
  static const uint8_t payload[] = "0123456789";
  ws_pbuf_t b;
  ws_msg_t m;
  FILE *f;
  int rc = 0;

  ws_pbuf_init(&b, 1 << 20);
  dg(lease.digest, 0x30);
  dg(wanted.digest, 0x40);
  for (uint8_t t = 1; t < WS_MSG_LAST && rc == 0; t++) {
    if (!ws_msg_type_known(t))
      continue;
    memset(&m, 0, sizeof(m));
    m.type = t;
    switch (t) {
    case WS_MSG_HELLO:
      m.u.hello.version = 1;
      dg(m.u.hello.nonce, 0x11);
      memcpy(m.u.hello.node_id, "node-a", 7);
      m.u.hello.port = 7070;
      memcpy(m.u.hello.zone, "za", 3);
      break;
    case WS_MSG_AUTH:
      dg(m.u.auth.mac, 0x22);
      break;
    case WS_MSG_ERROR:
      m.u.error.code = -20001;
      memcpy(m.u.error.msg, "bad", 4);
      break;
    case WS_MSG_GOODBYE:
      m.u.goodbye.reason = WS_BYE_SHUTDOWN;
      break;
    case WS_MSG_ANNOUNCE:
      dg(m.u.announce.digest, 0x50);
      m.u.announce.total_chunks = 9;
      m.u.announce.want = true;
      m.u.announce.port = 7070;
      m.u.announce.have_bits = have;
      m.u.announce.uri = "s3://bkt/m/sha256-50/manifest.json";
      break;
    case WS_MSG_ANNOUNCE_REPLY:
      dg(m.u.announce_reply.digest, 0x50);
      m.u.announce_reply.interval_ms = 15000;
      m.u.announce_reply.peers = &peer;
      m.u.announce_reply.n_peers = 1;
      m.u.announce_reply.leases = &lease;
      m.u.announce_reply.n_leases = 1;
      m.u.announce_reply.wanted = &wanted;
      m.u.announce_reply.n_wanted = 1;
      break;
    case WS_MSG_LEASE_RENEW:
    case WS_MSG_LEASE_RELEASE:
      dg(m.u.lease.digest, 0x60);
      m.u.lease.chunks = list;
      m.u.lease.n_chunks = 2;
      m.u.lease.done = list + 2;
      m.u.lease.n_done = 2;
      break;
    case WS_MSG_HAVE:
      dg(m.u.have.digest, 0x70);
      m.u.have.chunk = 65536;
      break;
    case WS_MSG_BITFIELD:
      dg(m.u.bitfield.digest, 0x70);
      m.u.bitfield.total_chunks = 9;
      m.u.bitfield.bits = have;
      break;
    case WS_MSG_REQUEST:
    case WS_MSG_CANCEL:
      dg(m.u.request.digest, 0x70);
      m.u.request.chunk = 3;
      m.u.request.req_id = 4000000000u;
      break;
    case WS_MSG_CHUNK:
      dg(m.u.chunk.digest, 0x70);
      m.u.chunk.chunk = 3;
      m.u.chunk.req_id = 5;
      m.u.chunk.len = sizeof(payload) - 1;
      break;
    case WS_MSG_REJECT:
      dg(m.u.reject.digest, 0x70);
      m.u.reject.chunk = 3;
      m.u.reject.req_id = 6;
      m.u.reject.reason = WS_REJECT_BUSY;
      m.u.reject.retry_after_ms = 500;
      break;
    case WS_MSG_MANIFEST_REQ:
      dg(m.u.manifest_req.digest, 0x80);
      break;
    case WS_MSG_MANIFEST:
      dg(m.u.manifest.digest, 0x80);
      m.u.manifest.len = sizeof(payload) - 1;
      break;
    default:
      break;
    }
    rc = ws_msg_encode(&m, &b);
    if (rc == 0 && ws_msg_type_has_payload(t))
      rc = ws_pbuf_append(&b, payload, sizeof(payload) - 1);
  }
  if (rc == 0) {
    f = fopen(path, "wb");
    if (f == NULL || fwrite(b.data, 1, b.len, f) != b.len)
      rc = WS_EUSAGE;
    if (f != NULL && fclose(f) != 0)
      rc = WS_EUSAGE;
  }
  if (rc < 0)
    printf("ERROR %s\n", ws_errname(rc));
  ws_pbuf_free(&b);
  return rc < 0 ? 1 : 0;
}

/* Fixed key 00..1f, nonces 0x11.. / 0x22..: prints every derived value so
 * an independent implementation can recompute them. */
static int cmd_hs_kat(void) {
  uint8_t key[32], ni[32], nr[32];
  ws_hs_t i, r;
  ws_session_t si, sr;
  ws_pbuf_t bi, br;
  ws_hello_t hi, hr, got;
  ws_frame_t f;
  ws_msg_t m;
  size_t used, off;
  int rc;

  for (int k = 0; k < 32; k++) {
    key[k] = (uint8_t)k;
    ni[k] = 0x11;
    nr[k] = 0x22;
  }
  memset(&hi, 0, sizeof(hi));
  memset(&hr, 0, sizeof(hr));
  memcpy(hi.node_id, "init", 5);
  memcpy(hr.node_id, "resp", 5);
  hi.port = 1000;
  hr.port = 2000;
  ws_pbuf_init(&bi, 1 << 16);
  ws_pbuf_init(&br, 1 << 16);
  if ((rc = ws_hs_init_nonce(&i, key, true, ni)) < 0 ||
      (rc = ws_hs_init_nonce(&r, key, false, nr)) < 0 ||
      (rc = ws_hs_hello_encode(&i, &hi, &bi)) < 0 ||
      (rc = ws_hs_hello_encode(&r, &hr, &br)) < 0)
    goto cleanup;
  printf("hello_i=");
  hexraw(bi.data, bi.len);
  printf("\nhello_r=");
  hexraw(br.data, br.len);
  printf("\n");
  if ((rc = ws_frame_parse(bi.data, bi.len, WS_MAX_BODY, 0, &f, &used)) < 0 ||
      (rc = ws_hs_hello_recv(&r, &f, &got)) < 0 ||
      (rc = ws_frame_parse(br.data, br.len, WS_MAX_BODY, 0, &f, &used)) < 0 ||
      (rc = ws_hs_hello_recv(&i, &f, &got)) < 0)
    goto cleanup;
  off = bi.len;
  if ((rc = ws_hs_auth_encode(&i, &bi)) < 0 ||
      (rc = ws_frame_parse(bi.data + off, bi.len - off, WS_MAX_BODY, 0, &f,
                           &used)) < 0 ||
      (rc = ws_hs_auth_recv(&r, &f)) < 0 || (rc = ws_msg_decode(&f, &m)) < 0)
    goto cleanup;
  printf("auth_i=");
  hexraw(m.u.auth.mac, 32);
  off = br.len;
  if ((rc = ws_hs_auth_encode(&r, &br)) < 0 ||
      (rc = ws_frame_parse(br.data + off, br.len - off, WS_MAX_BODY, 0, &f,
                           &used)) < 0 ||
      (rc = ws_hs_auth_recv(&i, &f)) < 0 || (rc = ws_msg_decode(&f, &m)) < 0)
    goto cleanup;
  printf("\nauth_r=");
  hexraw(m.u.auth.mac, 32);
  if ((rc = ws_hs_session(&i, &si)) < 0 || (rc = ws_hs_session(&r, &sr)) < 0)
    goto cleanup;
  printf("\nkey_i2r=");
  hexraw(si.tx_key, 32);
  printf("\nkey_r2i=");
  hexraw(si.rx_key, 32);
  /* Seal a GOODBYE twice (sequence 0 and 1) from the initiator. */
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_GOODBYE;
  for (int s = 0; s < 2; s++) {
    ws_pbuf_reset(&bi);
    if ((rc = ws_msg_encode(&m, &bi)) < 0 ||
        (rc = ws_frame_seal(&si, &bi, 0)) < 0 ||
        (rc = ws_frame_parse(bi.data, bi.len, WS_MAX_BODY, 0, &f, &used)) < 0 ||
        (rc = ws_frame_open(&sr, &f)) < 0)
      goto cleanup;
    printf("\nsealed%d=", s);
    hexraw(bi.data, bi.len);
  }
  /* A sealed CHUNK (sequence 2): frame, then the payload encrypted in two
   * pieces, then the tag; the responder decrypts it in one. */
  {
    static const char text[] = "weights, in two pieces";
    uint8_t ct[sizeof(text) - 1], pt[sizeof(text) - 1], tag[16];
    ws_payload_aead_t *e = ws_payload_aead_new(si.tx_pkey, true);
    ws_payload_aead_t *d = ws_payload_aead_new(sr.rx_pkey, false);
    uint64_t seq = si.tx_seq;

    memset(&m, 0, sizeof(m));
    m.type = WS_MSG_CHUNK;
    memset(m.u.chunk.digest, 0xab, 32);
    m.u.chunk.chunk = 7;
    m.u.chunk.len = sizeof(ct);
    ws_pbuf_reset(&bi);
    rc = e == NULL || d == NULL ? -ENOMEM : 0;
    if (rc == 0 && (rc = ws_msg_encode(&m, &bi)) == 0) {
      bi.data[4] |= WS_FRAME_F_SEALED;
      rc = ws_frame_seal(&si, &bi, 0);
    }
    if (rc == 0)
      rc = ws_payload_aead_begin(e, seq, bi.data);
    if (rc == 0)
      rc = ws_payload_aead_update(e, (const uint8_t *)text, ct, 5);
    if (rc == 0)
      rc = ws_payload_aead_update(e, (const uint8_t *)text + 5, ct + 5,
                                  sizeof(ct) - 5);
    if (rc == 0)
      rc = ws_payload_aead_final(e, tag);
    if (rc == 0 &&
        (rc = ws_frame_parse(bi.data, bi.len, WS_MAX_BODY, WS_MAX_PAYLOAD, &f,
                             &used)) == 0 &&
        (rc = ws_frame_open(&sr, &f)) == 0 &&
        (rc = ws_payload_aead_begin(d, sr.rx_seq - 1, f.hdr)) == 0 &&
        (rc = ws_payload_aead_update(d, ct, pt, sizeof(ct))) == 0 &&
        (rc = ws_payload_aead_final(d, tag)) == 0 &&
        memcmp(pt, text, sizeof(pt)) != 0)
      rc = WS_EAUTH;
    if (rc == 0) {
      printf("\nsealed_chunk=");
      hexraw(bi.data, bi.len);
      hexraw(ct, sizeof(ct));
      hexraw(tag, sizeof(tag));
      /* One flipped bit fails the tag. */
      ct[3] ^= 1;
      if ((rc = ws_payload_aead_begin(d, seq, f.hdr)) == 0 &&
          (rc = ws_payload_aead_update(d, ct, pt, sizeof(ct))) == 0)
        rc = ws_payload_aead_final(d, tag) == WS_EAUTH ? 0 : WS_EPROTO;
    }
    ws_payload_aead_free(e);
    ws_payload_aead_free(d);
    if (rc < 0)
      goto cleanup;
  }
  printf("\n");
cleanup:
  if (rc < 0)
    printf("ERROR %s\n", ws_errname(rc));
  ws_pbuf_free(&bi);
  ws_pbuf_free(&br);
  return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "encode") == 0)
    return cmd_encode(argv[2]);
  if (argc == 3 && strcmp(argv[1], "decode") == 0)
    return cmd_decode(argv[2]);
  if (argc == 2 && strcmp(argv[1], "hs-kat") == 0)
    return cmd_hs_kat();
  fprintf(stderr, "usage: %s encode FILE | decode FILE | hs-kat\n", argv[0]);
  return 2;
}
