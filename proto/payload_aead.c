/* payload_aead.c - sealed CHUNK/MANIFEST payloads: streaming AES-256-GCM
 * through OpenSSL EVP (AES-NI and carry-less multiply where the CPU has
 * them). docs/protocol.md section 4 is the normative description; proto.h
 * has the contract.
 *
 * Why AES-256-GCM and OpenSSL: payloads stream (a 1 MiB chunk arrives and
 * is forwarded piece by piece), which needs an AEAD with incremental
 * update; libsodium's AEADs are one-shot. On this project's reference
 * machine OpenSSL's AES-256-GCM runs at 4.3 GB/s, its ChaCha20-Poly1305 at
 * 4.0 GB/s (docs/benchmarks.md, "Payload encryption").
 *
 * The key schedule is set once per object; each payload only sets its IV
 * (4 zero bytes || BE64 frame sequence number), feeds the frame header as
 * AAD, then the bytes. Pure computation, no I/O; one thread per object.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "proto-int.h"

#define AEAD_IV_LEN 12

struct ws_payload_aead_s {
  EVP_CIPHER_CTX *ctx;
  bool encrypt;
  bool open; /* between begin and final */
};

ws_payload_aead_t *ws_payload_aead_new(const uint8_t key[32], bool encrypt) {
  ws_payload_aead_t *a = calloc(1, sizeof(*a));
  int ok;

  if (a == NULL)
    return NULL;
  a->encrypt = encrypt;
  a->ctx = EVP_CIPHER_CTX_new();
  if (a->ctx == NULL) {
    free(a);
    return NULL;
  }
  ok = encrypt ? EVP_EncryptInit_ex(a->ctx, EVP_aes_256_gcm(), NULL, key, NULL)
               : EVP_DecryptInit_ex(a->ctx, EVP_aes_256_gcm(), NULL, key, NULL);
  if (ok != 1 || EVP_CIPHER_CTX_ctrl(a->ctx, EVP_CTRL_GCM_SET_IVLEN,
                                     AEAD_IV_LEN, NULL) != 1) {
    ws_payload_aead_free(a);
    return NULL;
  }
  return a;
}

void ws_payload_aead_free(ws_payload_aead_t *a) {
  if (a == NULL)
    return;
  EVP_CIPHER_CTX_free(a->ctx); /* cleans the key schedule */
  free(a);
}

int ws_payload_aead_begin(ws_payload_aead_t *a, uint64_t seq,
                          const uint8_t *hdr) {
  uint8_t iv[AEAD_IV_LEN] = {0};
  int outl = 0, ok;

  for (int i = 0; i < 8; i++)
    iv[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
  ok = a->encrypt ? EVP_EncryptInit_ex(a->ctx, NULL, NULL, NULL, iv)
                  : EVP_DecryptInit_ex(a->ctx, NULL, NULL, NULL, iv);
  if (ok == 1)
    ok = a->encrypt
             ? EVP_EncryptUpdate(a->ctx, NULL, &outl, hdr, WS_FRAME_HDR_LEN)
             : EVP_DecryptUpdate(a->ctx, NULL, &outl, hdr, WS_FRAME_HDR_LEN);
  a->open = ok == 1;
  return ok == 1 ? 0 : WS_EAUTH;
}

int ws_payload_aead_update(ws_payload_aead_t *a, const uint8_t *in,
                           uint8_t *out, size_t len) {
  if (!a->open)
    return WS_EUSAGE;
  /* EVP takes int lengths; pieces are bounded by read buffers and chunk
   * pieces, but stay correct for any size. */
  while (len > 0) {
    int n = len > (size_t)(1 << 30) ? (1 << 30) : (int)len, outl = 0;
    int ok = a->encrypt ? EVP_EncryptUpdate(a->ctx, out, &outl, in, n)
                        : EVP_DecryptUpdate(a->ctx, out, &outl, in, n);
    if (ok != 1 || outl != n) {
      a->open = false;
      return WS_EAUTH;
    }
    in += n;
    out += n;
    len -= (size_t)n;
  }
  return 0;
}

int ws_payload_aead_final(ws_payload_aead_t *a,
                          uint8_t tag[WS_PAYLOAD_TAG_LEN]) {
  uint8_t none[16];
  int outl = 0, ok;

  if (!a->open)
    return WS_EUSAGE;
  a->open = false;
  if (a->encrypt) {
    ok = EVP_EncryptFinal_ex(a->ctx, none, &outl) == 1 &&
         EVP_CIPHER_CTX_ctrl(a->ctx, EVP_CTRL_GCM_GET_TAG, WS_PAYLOAD_TAG_LEN,
                             tag) == 1;
    return ok ? 0 : WS_EAUTH;
  }
  /* OpenSSL compares the tag in constant time inside DecryptFinal. */
  ok = EVP_CIPHER_CTX_ctrl(a->ctx, EVP_CTRL_GCM_SET_TAG, WS_PAYLOAD_TAG_LEN,
                           tag) == 1 &&
       EVP_DecryptFinal_ex(a->ctx, none, &outl) == 1;
  return ok ? 0 : WS_EAUTH;
}
