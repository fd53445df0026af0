/* s3_small.h - GET of a small S3 object (a manifest) into one buffer.
 * Thread: loop thread.
 */
#ifndef PEER_FETCH_S3_SMALL_H
#define PEER_FETCH_S3_SMALL_H

#include <stddef.h>

#include "core/ctx.h"
#include "s3.h"

/* Completion: status 0 with bytes (taken: malloc'd, NUL-terminated, len
 * bytes before the NUL) or bytes NULL when the object is empty; or a
 * negative status (WS_ELIMIT past max_bytes) with bytes NULL. errmsg is the
 * request's message ("" when none), borrowed for the call. */
typedef void (*peer_s3_small_cb)(void *arg, int status, char *bytes, size_t len,
                                 const char *errmsg);

/* GETs s3://bucket/key (strings copied) into memory, at most max_bytes,
 * with the context's S3 client. Returns the request (borrowed; valid until
 * done runs, may be passed to ws_s3_req_cancel) or NULL on -ENOMEM, in
 * which case done is not called. */
ws_s3_req_t *peer_s3_get_small(peer_ctx_t *ctx, const char *bucket,
                               const char *key, size_t max_bytes,
                               peer_s3_small_cb done, void *arg);

#endif
