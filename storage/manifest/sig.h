/* sig.h - detached Ed25519 signatures over manifest bytes (libsodium).
 *
 * A release may carry manifest.json.sig next to manifest.json: exactly the
 * 64 raw bytes of crypto_sign_detached over the exact manifest.json bytes
 * (no hex, no newline). Key files hold hex text:
 *   secret key file: the 32-byte Ed25519 seed as 64 hex chars (mode 0600);
 *   public key: 32 bytes as 64 hex chars (a file or a command-line value).
 * Trailing whitespace after the hex is ignored; anything else is WS_EKEY.
 *
 * Thread: any. Secret keys live in ws_sig_secret_t; wipe with
 * ws_sig_secret_wipe when done.
 */
#ifndef WS_SIG_H
#define WS_SIG_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#define WS_SIG_LEN 64
#define WS_SIG_SEED_LEN 32
#define WS_SIG_PUB_LEN 32
#define WS_SIG_KEY_HEX_LEN 64
#define WS_SIG_KEYFILE_MAX 256 /* bytes read from a key file */

typedef struct {
  uint8_t b[WS_SIG_PUB_LEN];
} ws_sig_pub_t;

typedef struct {
  uint8_t b[64]; /* libsodium secret key: seed || public key */
} ws_sig_secret_t;

typedef struct {
  uint8_t b[WS_SIG_LEN];
} ws_sig_t;

/* New random key pair. 0 or WS_ECORRUPT if libsodium cannot start. */
int ws_sig_keypair(ws_sig_pub_t *pk, ws_sig_secret_t *sk) WS_MUST_USE;
/* Key pair from a 32-byte seed (deterministic). */
int ws_sig_from_seed(const uint8_t seed[WS_SIG_SEED_LEN], ws_sig_pub_t *pk,
                     ws_sig_secret_t *sk) WS_MUST_USE;
/* The seed of sk (its first 32 bytes). */
void ws_sig_seed(const ws_sig_secret_t *sk, uint8_t seed[WS_SIG_SEED_LEN]);
void ws_sig_secret_wipe(ws_sig_secret_t *sk);

/* Detached signature of msg[0..len) (borrowed) into *sig. */
int ws_sig_sign(const void *msg, size_t len, const ws_sig_secret_t *sk,
                ws_sig_t *sig) WS_MUST_USE;
/* 0 if sig is a valid signature of msg by pk, WS_ESIG otherwise. */
int ws_sig_verify(const void *msg, size_t len, const ws_sig_t *sig,
                  const ws_sig_pub_t *pk) WS_MUST_USE;

/* Parses exactly 64 hex chars (then only whitespace) into 32 bytes. */
int ws_sig_hex32_parse(const char *s, size_t len, uint8_t out[32]) WS_MUST_USE;
/* hex must hold 65 bytes. */
void ws_sig_hex32_format(const uint8_t in[32], char *hex);

/* Reads a secret key file (seed hex). 0, WS_EKEY, or -errno. */
int ws_sig_secret_load(const char *path, ws_sig_secret_t *sk,
                       ws_sig_pub_t *pk) WS_MUST_USE;
/* Writes sk's seed as hex + newline to a new file, mode 0600; fails with
 * -EEXIST rather than overwrite a key. */
int ws_sig_secret_save(const char *path, const ws_sig_secret_t *sk) WS_MUST_USE;
/* arg is either 64 hex chars or the path of a file holding them. */
int ws_sig_pub_load(const char *arg, ws_sig_pub_t *pk) WS_MUST_USE;

#endif
