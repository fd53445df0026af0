/* digest.h - SHA-256 (OpenSSL EVP) and the hex forms used everywhere.
 *
 * A digest string is "sha256-<64 lowercase hex>". Hashing is CPU work: call
 * these from worker threads (uv_queue_work) or tools, never from a loop
 * thread. All functions are thread-safe; a ws_sha256_t belongs to one thread
 * at a time.
 */
#ifndef WS_DIGEST_H
#define WS_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#define WS_SHA256_LEN 32
#define WS_SHA256_HEX_LEN 64
#define WS_DIGEST_PREFIX "sha256-"
#define WS_DIGEST_STR_LEN (7 + WS_SHA256_HEX_LEN) /* without NUL */

typedef struct {
  uint8_t b[WS_SHA256_LEN];
} ws_hash_t;

typedef struct ws_sha256_s ws_sha256_t;

/* Returns a new context (NULL on allocation failure); free with _free. */
ws_sha256_t *ws_sha256_new(void);
void ws_sha256_free(ws_sha256_t *ctx);
/* Restarts the context; returns 0 or WS_ECORRUPT if OpenSSL fails. */
int ws_sha256_init(ws_sha256_t *ctx) WS_MUST_USE;
int ws_sha256_update(ws_sha256_t *ctx, const void *data,
                     size_t len) WS_MUST_USE;
int ws_sha256_final(ws_sha256_t *ctx, ws_hash_t *out) WS_MUST_USE;

/* One-shot hash of a buffer. */
int ws_sha256(const void *data, size_t len, ws_hash_t *out) WS_MUST_USE;
/* Hashes len bytes of fd from offset with pread (worker thread only).
 * Fails with WS_ETRUNCATED if the file is shorter. */
int ws_sha256_fd(int fd, uint64_t offset, uint64_t len,
                 ws_hash_t *out) WS_MUST_USE;

/* hex must hold WS_SHA256_HEX_LEN + 1 bytes; writes lowercase hex + NUL. */
void ws_hash_to_hex(const ws_hash_t *h, char *hex);
/* Parses exactly 64 hex chars (either case); WS_EHEX otherwise. */
int ws_hash_from_hex(const char *hex, size_t len, ws_hash_t *out) WS_MUST_USE;
/* s must hold WS_DIGEST_STR_LEN + 1 bytes: "sha256-<hex>". */
void ws_digest_to_str(const ws_hash_t *h, char *s);
/* Parses "sha256-<hex>" (NUL-terminated); WS_EHEX otherwise. */
int ws_digest_from_str(const char *s, ws_hash_t *out) WS_MUST_USE;
int ws_hash_eq(const ws_hash_t *a, const ws_hash_t *b);

#endif
