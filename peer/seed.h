/* seed.h - importing a local directory (a warm node's weights) into the
 * cache as a pinned READY release, without downloading anything (POST
 * /api/v1/seed with "dir" and "manifest"; api.c answers the request).
 * Thread: loop thread.
 */
#ifndef PEER_SEED_H
#define PEER_SEED_H

#include "core/ctx.h"
#include "release/release.h"
#include "ws_err.h"

/* The import ended: err 0 and rel (borrowed for the call) READY and pinned
 * in the table, or an error and msg (borrowed) saying why. */
typedef void (*peer_seed_done_fn)(void *arg, int err, const char *msg,
                                  peer_release_t *rel);

/* Imports dir (absolute) with the manifest at manifest (an absolute path,
 * or a release URI s3://bucket/prefix/ whose manifest.json is read from
 * S3). Returns 0 when done will run once (maybe before this returns, for
 * a manifest argument that is refused at once), or -ENOMEM when nothing
 * started (done does not run). */
int peer_seed_import(peer_ctx_t *ctx, peer_releases_t *releases,
                     const char *dir, const char *manifest,
                     peer_seed_done_fn done, void *arg) WS_MUST_USE;

#endif
