/* trk_http.h - p2p-tracker's HTTP side, on ws_httpd (common/):
 *
 *   GET    /                          live dashboard (self-contained page)
 *   GET    /healthz                   "ok"
 *   GET    /metrics                   Prometheus text
 *   GET    /api/v1/swarms             all swarms + wanted set (JSON)
 *   GET    /api/v1/swarms/<digest>    one swarm with its peers (JSON)
 *   GET    /api/v1/prefetch           the wanted set (JSON)
 *   POST   /api/v1/prefetch           {"uri": "s3://.../sha256-<hex>/"},
 *                                     {"uri": "s3://B/P/MODEL/:TAG"} (the
 *                                     tag resolved once, trk_tag.h) or
 *                                     {"digest": "sha256-<hex>"} (known)
 *   DELETE /api/v1/prefetch/<digest>  forget a wanted release
 *
 * With an API token (trk_http_set_token) POST and DELETE, and optionally
 * the GETs, need "Authorization: Bearer <token>"; /healthz never does.
 * Reads live tracker state on the loop thread; answers every request at
 * once, except a tagged prefetch, answered when S3 has named the digest.
 * Loop thread only.
 */
#ifndef TRK_HTTP_H
#define TRK_HTTP_H

#include <uv.h>

#include "trk_server.h"
#include "trk_tracker.h"
#include "ws_httpd.h"
#include "ws_err.h"

typedef struct trk_http_s trk_http_t;
/* The wanted set changed (a prefetch was added or removed). */
typedef void (*trk_http_wanted_cb)(void *arg);
typedef void (*trk_http_close_cb)(void *arg);

/* Creates the HTTP front end over t (borrowed) and, for its connection
 * metrics, srv (borrowed, may be NULL); its slow-client and token counts
 * are also added to tally (borrowed, may be NULL; shared with the
 * --metrics listener, shown by /metrics). 0 and *out (new; ends with
 * trk_http_close), -ENOMEM or a ws_httpd error. */
int trk_http_new(uv_loop_t *loop, trk_tracker_t *t, trk_server_t *srv,
                 ws_httpd_stats_t *tally, trk_http_t **out) WS_MUST_USE;
/* Requires "Authorization: Bearer <token>" (copied) on POST and DELETE,
 * and with reads nonzero on GET too; /healthz stays open (probes). Missing
 * or wrong: 401 (docs/api.md). token NULL: open API. 0, -ENOMEM. */
int trk_http_set_token(trk_http_t *h, const char *token, int reads) WS_MUST_USE;
/* Listens on "HOST:PORT" (see ws_httpd_listen_tcp). */
int trk_http_listen(trk_http_t *h, const char *host_port,
                    int *bound_port) WS_MUST_USE;
/* Registers the callback run after each change of the wanted set. */
void trk_http_on_wanted(trk_http_t *h, trk_http_wanted_cb cb, void *arg);
/* Closes listeners and connections, then calls cb (may be NULL) and frees
 * h. Call at most once. */
void trk_http_close(trk_http_t *h, trk_http_close_cb cb, void *arg);

#endif
