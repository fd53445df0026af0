/* s3_tag.h - reading a release tag from S3: GET of
 * <prefix>tags/<tag> (tag.h), at most WS_TAG_BODY_MAX bytes, parsed into
 * the digest it names, with the object's ETag (the compare-and-swap token
 * for moving it, ws_s3_put_if).
 *
 * Thread: the S3 client's loop, like s3.h.
 */
#ifndef WS_S3_TAG_H
#define WS_S3_TAG_H

#include "digest.h"
#include "s3.h"
#include "tag.h"

/* Completion, once, on the loop. status 0: digest and etag (quotes
 * stripped; may be NULL if S3 sent none) are set; WS_ES3NOKEY: no such tag;
 * WS_EBADMSG: the object is not "sha256-<hex>\n"; WS_ELIMIT: it is larger
 * than WS_TAG_BODY_MAX; else an S3 error. Everything passed is borrowed for
 * the call; errmsg is "" when there is nothing to add. */
typedef void (*ws_s3_tag_cb)(void *arg, int status, const ws_hash_t *digest,
                             const char *etag, const char *errmsg);

/* Reads tag `tag` of the model at s3://bucket/prefix (prefix ends in "/").
 * Returns the request (borrowed; may be cancelled until cb runs) or NULL
 * (invalid tag name, or -ENOMEM), in which case cb is never called. */
ws_s3_req_t *ws_s3_tag_get(ws_s3_t *s3, const char *bucket, const char *prefix,
                           const char *tag, ws_s3_tag_cb cb, void *arg);

#endif
