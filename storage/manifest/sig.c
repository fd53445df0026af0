/* sig.c - Ed25519 detached manifest signatures and key files (libsodium).
 * Thread: any; sodium_init() is idempotent and thread-safe. */
#include "sig.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int sig_init(void) {
  return sodium_init() < 0 ? WS_ECORRUPT : 0;
}

int ws_sig_keypair(ws_sig_pub_t *pk, ws_sig_secret_t *sk) {
  int err;
  if ((err = sig_init()) != 0)
    return err;
  return crypto_sign_keypair(pk->b, sk->b) == 0 ? 0 : WS_ECORRUPT;
}

int ws_sig_from_seed(const uint8_t seed[WS_SIG_SEED_LEN], ws_sig_pub_t *pk,
                     ws_sig_secret_t *sk) {
  int err;
  if ((err = sig_init()) != 0)
    return err;
  return crypto_sign_seed_keypair(pk->b, sk->b, seed) == 0 ? 0 : WS_ECORRUPT;
}

void ws_sig_seed(const ws_sig_secret_t *sk, uint8_t seed[WS_SIG_SEED_LEN]) {
  memcpy(seed, sk->b, WS_SIG_SEED_LEN);
}

void ws_sig_secret_wipe(ws_sig_secret_t *sk) {
  sodium_memzero(sk, sizeof(*sk));
}

int ws_sig_sign(const void *msg, size_t len, const ws_sig_secret_t *sk,
                ws_sig_t *sig) {
  int err;
  if ((err = sig_init()) != 0)
    return err;
  return crypto_sign_detached(sig->b, NULL, msg, len, sk->b) == 0 ? 0
                                                                  : WS_ECORRUPT;
}

int ws_sig_verify(const void *msg, size_t len, const ws_sig_t *sig,
                  const ws_sig_pub_t *pk) {
  if (sig_init() != 0)
    return WS_ESIG;
  return crypto_sign_verify_detached(sig->b, msg, len, pk->b) == 0 ? 0
                                                                   : WS_ESIG;
}

int ws_sig_hex32_parse(const char *s, size_t len, uint8_t out[32]) {
  uint8_t tmp[32];
  size_t bin_len = 0;
  const char *end = NULL;

  while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r' ||
                     s[len - 1] == ' ' || s[len - 1] == '\t'))
    len--;
  if (len != WS_SIG_KEY_HEX_LEN)
    return WS_EKEY;
  if (sodium_hex2bin(tmp, sizeof(tmp), s, len, NULL, &bin_len, &end) != 0 ||
      bin_len != sizeof(tmp) || end != s + len) {
    sodium_memzero(tmp, sizeof(tmp));
    return WS_EKEY;
  }
  memcpy(out, tmp, sizeof(tmp));
  sodium_memzero(tmp, sizeof(tmp));
  return 0;
}

void ws_sig_hex32_format(const uint8_t in[32], char *hex) {
  sodium_bin2hex(hex, WS_SIG_KEY_HEX_LEN + 1, in, 32);
}

/* Reads at most WS_SIG_KEYFILE_MAX bytes of a small text file into buf. */
static int read_small(const char *path, char *buf, size_t *len) {
  size_t n = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  for (;;) {
    ssize_t r = read(fd, buf + n, WS_SIG_KEYFILE_MAX - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int err = -errno;
      close(fd);
      return err;
    }
    if (r == 0)
      break;
    n += (size_t)r;
    if (n == WS_SIG_KEYFILE_MAX) {
      close(fd);
      return WS_EKEY; /* a key file is 64 hex chars, not this much */
    }
  }
  close(fd);
  *len = n;
  return 0;
}

int ws_sig_secret_load(const char *path, ws_sig_secret_t *sk,
                       ws_sig_pub_t *pk) {
  char buf[WS_SIG_KEYFILE_MAX];
  uint8_t seed[WS_SIG_SEED_LEN];
  size_t len = 0;
  int err;

  if ((err = read_small(path, buf, &len)) != 0)
    goto cleanup;
  if ((err = ws_sig_hex32_parse(buf, len, seed)) != 0)
    goto cleanup;
  err = ws_sig_from_seed(seed, pk, sk);
cleanup:
  sodium_memzero(buf, sizeof(buf));
  sodium_memzero(seed, sizeof(seed));
  return err;
}

int ws_sig_secret_save(const char *path, const ws_sig_secret_t *sk) {
  char hex[WS_SIG_KEY_HEX_LEN + 2];
  size_t off = 0;
  int fd, err = 0;

  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return -errno;
  ws_sig_hex32_format(sk->b, hex);
  hex[WS_SIG_KEY_HEX_LEN] = '\n';
  while (off < sizeof(hex) - 1) {
    ssize_t w = write(fd, hex + off, sizeof(hex) - 1 - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0) {
      err = -errno;
      goto cleanup;
    }
    off += (size_t)w;
  }
  if (fsync(fd) != 0)
    err = -errno;
cleanup:
  sodium_memzero(hex, sizeof(hex));
  if (close(fd) != 0 && err == 0)
    err = -errno;
  if (err != 0)
    unlink(path);
  return err;
}

int ws_sig_pub_load(const char *arg, ws_sig_pub_t *pk) {
  char buf[WS_SIG_KEYFILE_MAX];
  size_t len = 0;
  int err;

  if (ws_sig_hex32_parse(arg, strlen(arg), pk->b) == 0)
    return 0;
  if ((err = read_small(arg, buf, &len)) != 0)
    return err == -ENOENT ? WS_EKEY : err;
  return ws_sig_hex32_parse(buf, len, pk->b);
}
