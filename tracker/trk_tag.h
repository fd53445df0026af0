/* trk_tag.h - release tags on the tracker: POST /api/v1/prefetch with
 * {"uri": "s3://B/P/MODEL/:TAG"} is resolved here, once, by a GET of the tag
 * object s3://B/P/MODEL/tags/TAG (storage/manifest/tag.h, s3_tag.h); the
 * wanted set then only ever holds the digest and its release URI
 * s3://B/P/MODEL/sha256-<hex>/.
 *
 * The S3 client is created from the environment (AWS_* variables, the AWS
 * config file, like p2pd) when the first tag is resolved, so a tracker that
 * never sees a tag never needs S3 access. Nothing here blocks: credentials
 * are resolved by the client on a worker, the GET runs on the loop.
 *
 * Thread: loop thread only.
 */
#ifndef TRK_TAG_H
#define TRK_TAG_H

#include <uv.h>

#include "digest.h"
#include "ws_err.h"

typedef struct trk_tags_s trk_tags_t;
typedef struct trk_tag_op_s trk_tag_op_t;

/* Runs once. status 0: digest and release_uri ("s3://B/P/MODEL/sha256-<hex>/")
 * are set (borrowed for the call); else WS_ES3NOKEY (no such tag),
 * WS_EBADMSG or WS_ELIMIT (the tag object is not "sha256-<hex>\n"),
 * WS_ECANCELED (tracker stopping) or an S3 error; why (borrowed) says more. */
typedef void (*trk_tag_done_fn)(void *arg, int status, const ws_hash_t *digest,
                                const char *release_uri, const char *why);
typedef void (*trk_tags_close_cb)(void *arg);

/* A resolver on loop (borrowed; must outlive it). 0 or -ENOMEM. */
int trk_tags_new(uv_loop_t *loop, trk_tags_t **out) WS_MUST_USE;
/* Starts resolving tagged_uri. 0 with *out (borrowed until done runs or
 * trk_tag_cancel); WS_EUSAGE when it is not s3://B/P/MODEL/:TAG with a valid
 * tag; an S3 configuration error (the client could not be created);
 * -ENOMEM. done is not called on error. */
int trk_tags_resolve(trk_tags_t *tg, const char *tagged_uri,
                     trk_tag_done_fn done, void *arg,
                     trk_tag_op_t **out) WS_MUST_USE;
/* Forgets the operation: done never runs (the S3 request is cancelled). */
void trk_tag_cancel(trk_tag_op_t *op);
/* Closes the S3 client if one was made (pending operations end with
 * WS_ECANCELED), then calls cb (may be NULL) and frees tg. */
void trk_tags_close(trk_tags_t *tg, trk_tags_close_cb cb, void *arg);

#endif
