/* api.h - p2pd's local HTTP/JSON API (routes in docs/operations.md, the
 * conventions in docs/api.md): the one place where the daemon's error
 * codes become HTTP statuses and JSON bodies.
 *
 * The API owns its HTTP server (the unix socket --api and, with --http, a
 * TCP listener) and borrows the context, the release table and the swarm.
 * Thread: loop thread.
 */
#ifndef PEER_API_H
#define PEER_API_H

#include "core/ctx.h"
#include "release/release.h"
#include "swarm/swarm.h"
#include "ws_err.h"

typedef struct peer_api_s peer_api_t;

/* Creates the server on ctx->loop, registers the routes and listens where
 * ctx->cfg says (the socket's directory is made if missing). swarm may be
 * NULL. Errors are logged. *out is new (peer_api_free). */
int peer_api_new(peer_ctx_t *ctx, peer_releases_t *releases,
                 peer_swarm_t *swarm, peer_api_t **out) WS_MUST_USE;
/* Shutdown: requests get 503 "p2pd is stopping" from now on; the server
 * closes its listeners and connections, then closed(arg) runs. */
void peer_api_close(peer_api_t *api, void (*closed)(void *arg), void *arg);
/* Frees the API (after closed ran, or when it never listened). NULL is
 * fine. */
void peer_api_free(peer_api_t *api);

/* HTTP status for an error of a release or request. */
int peer_api_status_for(int err);

struct ws_httpd_req_s;
/* POST or DELETE /api/v1/releases/<digest>/holds/<name> for rel (found);
 * name borrowed for the call. Answers req now or once the cache has the
 * change (api_hold.c). */
void peer_api_hold(struct ws_httpd_req_s *req, peer_release_t *rel,
                   const char *name);

#endif
