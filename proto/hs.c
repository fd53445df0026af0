/* hs.c - the handshake (HELLO/AUTH with the cluster key) and per-frame MACs.
 *
 * Keys: auth_key = crypto_kdf(cluster, id 1, ctx "wswarm01"), sess_key =
 * crypto_kdf(cluster, id 2, ctx "wswarm01"). Transcript: H_i and H_r are
 * BLAKE2b-256 of the initiator's and responder's whole HELLO frames (header
 * + body), so both nonces and everything each side claimed are bound.
 *   AUTH mac (initiator) = HMAC-SHA512-256(auth_key, "ws-auth-i" || H_i || H_r)
 *   AUTH mac (responder) = HMAC-SHA512-256(auth_key, "ws-auth-r" || H_i || H_r)
 *   key i->r = BLAKE2b-256(key=sess_key, "ws-i2r" || H_i || H_r), r->i alike.
 *   payload key i->r = BLAKE2b-256(key=sess_key, "ws-pi2r" || H_i || H_r),
 *   r->i alike; used only when both HELLOs say v >= 2 (sealed payloads).
 * Frame MAC = HMAC-SHA512-256(dir key, seq BE64 || header || body).
 * A side without the cluster key sees only HELLOs: the responder verifies
 * the initiator's AUTH before sending its own, and nothing else is accepted
 * before ws_hs_done. Pure; libsodium only; one thread per ws_hs_t.
 *
 *   INIT -hello sent/recvd-> HELLOS -auth sent+recvd-> DONE (ws_hs_done)
 */
#include <errno.h>
#include <string.h>

#include <sodium.h>

#include "proto-int.h"

#define HS_KDF_CTX "wswarm01"
#define HS_LABEL_I "ws-auth-i"
#define HS_LABEL_R "ws-auth-r"
#define HS_SESS_I2R "ws-i2r"
#define HS_SESS_R2I "ws-r2i"
#define HS_PAYLOAD_I2R "ws-pi2r"
#define HS_PAYLOAD_R2I "ws-pr2i"

int ws_hs_init_nonce(ws_hs_t *hs, const uint8_t key[WS_CLUSTER_KEY_LEN],
                     bool initiator, const uint8_t nonce[WS_HS_NONCE_LEN]) {
  if (sodium_init() < 0)
    return -ENOMEM;
  memset(hs, 0, sizeof(*hs));
  if (crypto_kdf_derive_from_key(hs->auth_key, sizeof(hs->auth_key), 1,
                                 HS_KDF_CTX, key) != 0 ||
      crypto_kdf_derive_from_key(hs->sess_key, sizeof(hs->sess_key), 2,
                                 HS_KDF_CTX, key) != 0)
    return WS_EKEY;
  memcpy(hs->my_nonce, nonce, WS_HS_NONCE_LEN);
  hs->initiator = initiator;
  return 0;
}

int ws_hs_init(ws_hs_t *hs, const uint8_t key[WS_CLUSTER_KEY_LEN],
               bool initiator) {
  uint8_t nonce[WS_HS_NONCE_LEN];

  if (sodium_init() < 0)
    return -ENOMEM;
  randombytes_buf(nonce, sizeof(nonce));
  return ws_hs_init_nonce(hs, key, initiator, nonce);
}

static void hs_hash_frame(const ws_frame_t *f, uint8_t out[32]) {
  crypto_generichash_state st;

  crypto_generichash_init(&st, NULL, 0, 32);
  crypto_generichash_update(&st, f->hdr, WS_FRAME_HDR_LEN);
  crypto_generichash_update(&st, f->body, f->body_len);
  crypto_generichash_final(&st, out, 32);
}

int ws_hs_hello_encode(ws_hs_t *hs, const ws_hello_t *info, ws_pbuf_t *out) {
  ws_msg_t m;
  ws_frame_t f;
  size_t off = out->len, used;
  int rc;

  if (hs->hello_sent)
    return WS_EPROTO;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HELLO;
  m.u.hello = *info;
  if (m.u.hello.version < WS_PROTO_VERSION ||
      m.u.hello.version > WS_HELLO_VERSION)
    m.u.hello.version = WS_HELLO_VERSION;
  memcpy(m.u.hello.nonce, hs->my_nonce, WS_HS_NONCE_LEN);
  rc = ws_msg_encode(&m, out);
  if (rc < 0)
    return rc;
  rc = ws_frame_parse(out->data + off, out->len - off, WS_MAX_BODY_PREAUTH, 0,
                      &f, &used);
  if (rc < 0) {
    out->len = off; /* a HELLO too big for a peer to accept */
    return rc;
  }
  hs_hash_frame(&f, hs->my_hello_hash);
  hs->my_version = m.u.hello.version;
  hs->hello_sent = true;
  return 0;
}

int ws_hs_hello_recv(ws_hs_t *hs, const ws_frame_t *f, ws_hello_t *out) {
  ws_msg_t m;
  uint8_t h[32];
  int rc;

  if (hs->hello_recvd || f->type != WS_MSG_HELLO || f->mac != NULL)
    return WS_EPROTO;
  rc = ws_msg_decode(f, &m);
  if (rc < 0)
    return rc;
  /* "v" is the highest version the peer speaks; both use the lower of the
   * two. Version 1 peers (payloads in clear) are still accepted: the HELLOs
   * are bound into both AUTHs, so nobody on the path can lower it. */
  if (m.u.hello.version < WS_PROTO_VERSION)
    return WS_EVERSION;
  hs_hash_frame(f, h);
  /* Our own HELLO reflected back would let a keyless relay pair us with
   * ourselves. */
  if (hs->hello_sent && sodium_memcmp(h, hs->my_hello_hash, 32) == 0)
    return WS_EAUTH;
  if (sodium_memcmp(m.u.hello.nonce, hs->my_nonce, WS_HS_NONCE_LEN) == 0)
    return WS_EAUTH;
  memcpy(hs->peer_hello_hash, h, 32);
  hs->peer_version = m.u.hello.version;
  hs->hello_recvd = true;
  *out = m.u.hello;
  return 0;
}

/* mac over label || H_i || H_r with the handshake's auth key. */
static void hs_auth_mac(const ws_hs_t *hs, bool initiator_side,
                        uint8_t mac[WS_FRAME_MAC_LEN]) {
  crypto_auth_hmacsha512256_state st;
  const char *label = initiator_side ? HS_LABEL_I : HS_LABEL_R;
  const uint8_t *hi = hs->initiator ? hs->my_hello_hash : hs->peer_hello_hash;
  const uint8_t *hr = hs->initiator ? hs->peer_hello_hash : hs->my_hello_hash;

  crypto_auth_hmacsha512256_init(&st, hs->auth_key, sizeof(hs->auth_key));
  crypto_auth_hmacsha512256_update(&st, (const uint8_t *)label, strlen(label));
  crypto_auth_hmacsha512256_update(&st, hi, 32);
  crypto_auth_hmacsha512256_update(&st, hr, 32);
  crypto_auth_hmacsha512256_final(&st, mac);
  sodium_memzero(&st, sizeof(st));
}

int ws_hs_auth_encode(ws_hs_t *hs, ws_pbuf_t *out) {
  ws_msg_t m;

  if (!hs->hello_sent || !hs->hello_recvd || hs->auth_sent)
    return WS_EPROTO;
  if (!hs->initiator && !hs->auth_recvd)
    return WS_EPROTO; /* responder proves the key only to a prover */
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_AUTH;
  hs_auth_mac(hs, hs->initiator, m.u.auth.mac);
  int rc = ws_msg_encode(&m, out);
  if (rc == 0)
    hs->auth_sent = true;
  return rc;
}

int ws_hs_auth_recv(ws_hs_t *hs, const ws_frame_t *f) {
  uint8_t want[WS_FRAME_MAC_LEN];
  ws_msg_t m;
  int rc;

  if (!hs->hello_sent || !hs->hello_recvd || hs->auth_recvd ||
      f->type != WS_MSG_AUTH || f->mac != NULL)
    return WS_EPROTO;
  if (hs->initiator && !hs->auth_sent)
    return WS_EPROTO;
  rc = ws_msg_decode(f, &m);
  if (rc < 0)
    return rc;
  hs_auth_mac(hs, !hs->initiator, want);
  rc = crypto_verify_32(want, m.u.auth.mac) == 0 ? 0 : WS_EAUTH;
  sodium_memzero(want, sizeof(want));
  if (rc == 0)
    hs->auth_recvd = true;
  return rc;
}

bool ws_hs_done(const ws_hs_t *hs) {
  return hs->hello_sent && hs->hello_recvd && hs->auth_sent && hs->auth_recvd;
}

static void hs_sess_key(const ws_hs_t *hs, const char *label, uint8_t out[32]) {
  crypto_generichash_state st;
  const uint8_t *hi = hs->initiator ? hs->my_hello_hash : hs->peer_hello_hash;
  const uint8_t *hr = hs->initiator ? hs->peer_hello_hash : hs->my_hello_hash;

  crypto_generichash_init(&st, hs->sess_key, sizeof(hs->sess_key), 32);
  crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
  crypto_generichash_update(&st, hi, 32);
  crypto_generichash_update(&st, hr, 32);
  crypto_generichash_final(&st, out, 32);
}

int ws_hs_session(ws_hs_t *hs, ws_session_t *out) {
  ws_session_t s;

  if (!ws_hs_done(hs))
    return WS_EPROTO;
  memset(&s, 0, sizeof(s));
  hs_sess_key(hs, hs->initiator ? HS_SESS_I2R : HS_SESS_R2I, s.tx_key);
  hs_sess_key(hs, hs->initiator ? HS_SESS_R2I : HS_SESS_I2R, s.rx_key);
  s.sealed = hs->peer_version >= WS_HELLO_VERSION_SEALED &&
             hs->my_version >= WS_HELLO_VERSION_SEALED;
  if (s.sealed) {
    hs_sess_key(hs, hs->initiator ? HS_PAYLOAD_I2R : HS_PAYLOAD_R2I, s.tx_pkey);
    hs_sess_key(hs, hs->initiator ? HS_PAYLOAD_R2I : HS_PAYLOAD_I2R, s.rx_pkey);
  }
  *out = s;
  sodium_memzero(&s, sizeof(s));
  sodium_memzero(hs->auth_key, sizeof(hs->auth_key));
  sodium_memzero(hs->sess_key, sizeof(hs->sess_key));
  return 0;
}

void ws_hs_wipe(ws_hs_t *hs) {
  sodium_memzero(hs, sizeof(*hs));
}

static void frame_mac(const uint8_t key[32], uint64_t seq, const uint8_t *hdr,
                      const uint8_t *body, uint32_t body_len,
                      uint8_t mac[WS_FRAME_MAC_LEN]) {
  crypto_auth_hmacsha512256_state st;
  uint8_t seqb[8];

  for (int i = 0; i < 8; i++)
    seqb[i] = (uint8_t)(seq >> (56 - 8 * i));
  crypto_auth_hmacsha512256_init(&st, key, 32);
  crypto_auth_hmacsha512256_update(&st, seqb, sizeof(seqb));
  crypto_auth_hmacsha512256_update(&st, hdr, WS_FRAME_HDR_LEN);
  crypto_auth_hmacsha512256_update(&st, body, body_len);
  crypto_auth_hmacsha512256_final(&st, mac);
  sodium_memzero(&st, sizeof(st));
}

int ws_frame_seal(ws_session_t *s, ws_pbuf_t *out, size_t off) {
  uint8_t mac[WS_FRAME_MAC_LEN];
  uint8_t *hdr;
  uint32_t body_len;
  int rc;

  if (off > out->len || out->len - off < WS_FRAME_HDR_LEN)
    return WS_EUSAGE;
  hdr = out->data + off;
  body_len = ws_be32_get(hdr + 8);
  if (out->len - off - WS_FRAME_HDR_LEN != body_len ||
      (hdr[4] & WS_FRAME_F_MAC) != 0)
    return WS_EUSAGE;
  hdr[4] |= WS_FRAME_F_MAC;
  frame_mac(s->tx_key, s->tx_seq, hdr, hdr + WS_FRAME_HDR_LEN, body_len, mac);
  rc = ws_pbuf_append(out, mac, sizeof(mac));
  if (rc < 0) {
    out->data[off + 4] &= (uint8_t)~WS_FRAME_F_MAC;
    return rc;
  }
  s->tx_seq++;
  return 0;
}

int ws_frame_open(ws_session_t *s, const ws_frame_t *f) {
  uint8_t mac[WS_FRAME_MAC_LEN];
  int ok;

  if (f->mac == NULL || (f->flags & WS_FRAME_F_MAC) == 0)
    return WS_EAUTH;
  frame_mac(s->rx_key, s->rx_seq, f->hdr, f->body, f->body_len, mac);
  ok = crypto_verify_32(mac, f->mac) == 0;
  sodium_memzero(mac, sizeof(mac));
  if (!ok)
    return WS_EAUTH;
  s->rx_seq++;
  return 0;
}

void ws_session_wipe(ws_session_t *s) {
  sodium_memzero(s, sizeof(*s));
}
