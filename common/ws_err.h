/* ws_err.h - one error space for the whole project.
 *
 * Functions return 0 on success and a negative int on failure: either -errno
 * (as libuv's UV_E* are) or one of the WS_E* codes below, which sit far below
 * any errno value. ws_strerror() turns either kind into text. Any thread.
 */
#ifndef WS_ERR_H
#define WS_ERR_H

#include <stddef.h>

#define WS_ERR_MAP(XX)                                                         \
  XX(PROTO, "protocol violation")                                              \
  XX(LIMIT, "a declared size or count exceeds its limit")                      \
  XX(TRUNCATED, "input ended early")                                           \
  XX(BADMSG, "malformed message")                                              \
  XX(AUTH, "authentication failed")                                            \
  XX(VERSION, "unsupported protocol version")                                  \
  XX(JSON, "malformed JSON")                                                   \
  XX(MANIFEST, "invalid manifest")                                             \
  XX(PATH, "unsafe or invalid path in manifest")                               \
  XX(DUPNAME, "duplicate file name in manifest")                               \
  XX(CHUNKSIZE, "chunk_size must be a power of two in 1..64 MiB")              \
  XX(CHUNKCOUNT, "chunk count does not match file size")                       \
  XX(HEX, "bad hex digest")                                                    \
  XX(DIGEST, "digest mismatch")                                                \
  XX(SIG, "signature does not verify")                                         \
  XX(KEY, "bad key")                                                           \
  XX(CORRUPT, "stored state is corrupt")                                       \
  XX(NOTFOUND, "not found")                                                    \
  XX(EXISTS, "already exists")                                                 \
  XX(BUSY, "busy")                                                             \
  XX(NOSPACE, "cache capacity exhausted")                                      \
  XX(S3, "S3 request failed")                                                  \
  XX(S3AUTH, "S3 rejected the credentials")                                    \
  XX(S3NOKEY, "S3 object does not exist")                                      \
  XX(CREDS, "no AWS credentials found")                                        \
  XX(HTTP, "HTTP error")                                                       \
  XX(CANCELED, "canceled")                                                     \
  XX(TIMEOUT, "timed out")                                                     \
  XX(BANNED, "peer banned")                                                    \
  XX(INJECTED, "injected fault (test build)")                                  \
  XX(USAGE, "invalid argument")                                                \
  XX(NOSPC, "no space left on the cache's disk")                               \
  XX(IO, "I/O error on the cache's disk")

enum {
  WS_E__FIRST = -20000,
#define WS_ERR_ENUM(name, text) WS_E##name,
  WS_ERR_MAP(WS_ERR_ENUM)
#undef WS_ERR_ENUM
      WS_E__LAST
};

#define WS_MUST_USE __attribute__((warn_unused_result))

/* Text for err (negative errno or WS_E*); never NULL, static storage. */
const char *ws_strerror(int err);
/* Short symbolic name ("WS_EMANIFEST", "ENOENT") for logs and JSON. */
const char *ws_errname(int err);
/* A local disk error as the project names it: -ENOSPC and -EDQUOT become
 * WS_ENOSPC, -EIO WS_EIO; anything else is returned as is. Such an error is
 * the node's own (its cache cannot take the bytes), never a source's: it
 * fails the release instead of trying another source. */
int ws_err_disk(int err);
/* 1 for WS_ENOSPC and WS_EIO (see ws_err_disk). */
int ws_err_is_disk(int err);
/* For an error message snprintf() wrote into buf (cap bytes, cap >= 4)
 * and returned len for: when the text was cut, it ends with "..." so a
 * reader sees so, and no UTF-8 sequence is left half. */
void ws_msg_mark_cut(char *buf, size_t cap, int len);

#endif
