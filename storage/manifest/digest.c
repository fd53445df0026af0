/* digest.c - SHA-256 through OpenSSL EVP, hex and digest strings.
 * Thread-safe; see digest.h for which thread may call what. */
#include "digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ws_sha256_s {
  EVP_MD_CTX *md;
};

ws_sha256_t *ws_sha256_new(void) {
  ws_sha256_t *ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL)
    return NULL;
  ctx->md = EVP_MD_CTX_new();
  if (ctx->md == NULL || EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL) != 1) {
    ws_sha256_free(ctx);
    return NULL;
  }
  return ctx;
}

void ws_sha256_free(ws_sha256_t *ctx) {
  if (ctx == NULL)
    return;
  EVP_MD_CTX_free(ctx->md);
  free(ctx);
}

int ws_sha256_init(ws_sha256_t *ctx) {
  return EVP_DigestInit_ex(ctx->md, EVP_sha256(), NULL) == 1 ? 0 : WS_ECORRUPT;
}

int ws_sha256_update(ws_sha256_t *ctx, const void *data, size_t len) {
  return EVP_DigestUpdate(ctx->md, data, len) == 1 ? 0 : WS_ECORRUPT;
}

int ws_sha256_final(ws_sha256_t *ctx, ws_hash_t *out) {
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx->md, out->b, &n) != 1 || n != WS_SHA256_LEN)
    return WS_ECORRUPT;
  return 0;
}

int ws_sha256(const void *data, size_t len, ws_hash_t *out) {
  unsigned int n = 0;
  if (EVP_Digest(data, len, out->b, &n, EVP_sha256(), NULL) != 1 ||
      n != WS_SHA256_LEN)
    return WS_ECORRUPT;
  return 0;
}

int ws_sha256_fd(int fd, uint64_t offset, uint64_t len, ws_hash_t *out) {
  enum { BUF_BYTES = 256 * 1024 }; /* big enough to amortize syscalls */
  ws_sha256_t *ctx;
  uint8_t *buf;
  int err = 0;

  ctx = ws_sha256_new();
  buf = malloc(BUF_BYTES);
  if (ctx == NULL || buf == NULL) {
    err = -ENOMEM;
    goto out;
  }
  while (len > 0) {
    size_t want = len < BUF_BYTES ? (size_t)len : BUF_BYTES;
    ssize_t n = pread(fd, buf, want, (off_t)offset);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = -errno;
      goto out;
    }
    if (n == 0) {
      err = WS_ETRUNCATED;
      goto out;
    }
    if ((err = ws_sha256_update(ctx, buf, (size_t)n)) != 0)
      goto out;
    offset += (uint64_t)n;
    len -= (uint64_t)n;
  }
  err = ws_sha256_final(ctx, out);
out:
  free(buf);
  ws_sha256_free(ctx);
  return err;
}

void ws_hash_to_hex(const ws_hash_t *h, char *hex) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < WS_SHA256_LEN; i++) {
    hex[2 * i] = digits[h->b[i] >> 4];
    hex[2 * i + 1] = digits[h->b[i] & 15];
  }
  hex[WS_SHA256_HEX_LEN] = '\0';
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int ws_hash_from_hex(const char *hex, size_t len, ws_hash_t *out) {
  ws_hash_t h;
  if (len != WS_SHA256_HEX_LEN)
    return WS_EHEX;
  for (int i = 0; i < WS_SHA256_LEN; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return WS_EHEX;
    h.b[i] = (uint8_t)(hi << 4 | lo);
  }
  *out = h;
  return 0;
}

void ws_digest_to_str(const ws_hash_t *h, char *s) {
  memcpy(s, WS_DIGEST_PREFIX, 7);
  ws_hash_to_hex(h, s + 7);
}

int ws_digest_from_str(const char *s, ws_hash_t *out) {
  if (strncmp(s, WS_DIGEST_PREFIX, 7) != 0)
    return WS_EHEX;
  return ws_hash_from_hex(s + 7, strlen(s + 7), out);
}

int ws_hash_eq(const ws_hash_t *a, const ws_hash_t *b) {
  return memcmp(a->b, b->b, WS_SHA256_LEN) == 0;
}
