/* tag_prefetch.h - prefetch by tag: s3://BUCKET/PREFIX/MODEL/:TAG is resolved
 * once (GET of MODEL/tags/TAG with the context's S3 client, on the loop), then
 * the release it names is prefetched by URI and digest like any other; from
 * then on everything is by digest. When that release is READY the cache
 * gets two links, written on a worker, each by symlink + rename (atomic):
 *
 *   <cache>/by-name/<MODEL>/<TAG> -> ../../releases/sha256-<hex>
 *   <cache>/refs/<MODEL>/<TAG>    -> ../../releases/sha256-<hex>
 *
 * so a server can be given a stable path. MODEL is the last component of
 * the model prefix (it must be a valid tag-like name, else no links).
 * With p2pd --hf-cache, the Hugging Face view of the release also gets
 * refs/<TAG> naming its revision (hf_view.c), besides refs/main.
 *
 * Thread: loop thread; the link writing on a worker.
 */
#ifndef PEER_RELEASE_TAG_PREFETCH_H
#define PEER_RELEASE_TAG_PREFETCH_H

#include "core/ctx.h"
#include "release/release.h"

typedef struct peer_tag_op_s peer_tag_op_t;

/* Runs once: status 0 with rel (borrowed for the call) the release the
 * tag named, prefetch started or joined; else the error and a reason
 * (borrowed): WS_ES3NOKEY no such tag, WS_EBADMSG a tag object that is not
 * a digest, WS_ECANCELED p2pd stopping, an S3 error, or
 * peer_release_prefetch's refusals. */
typedef void (*peer_tag_done_fn)(void *arg, int status, peer_release_t *rel,
                                 const char *why);

/* Starts resolving tagged_uri. 0 with *out (borrowed until done runs or
 * peer_tag_cancel), WS_EUSAGE when it is not a valid tagged URI, -ENOMEM.
 * ctx and t are borrowed for the operation's life. */
int peer_tag_prefetch(peer_ctx_t *ctx, peer_releases_t *t,
                      const char *tagged_uri, peer_tag_done_fn done, void *arg,
                      peer_tag_op_t **out) WS_MUST_USE;
/* Forgets the operation: done never runs (the S3 request is cancelled). */
void peer_tag_cancel(peer_tag_op_t *op);

#endif
