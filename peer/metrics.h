/* metrics.h - GET /metrics in the Prometheus text format (weightswarm_p2pd_*:
 * the context's counters and histograms, the S3 client's and the swarm's
 * stats, the buffer pool, the cache ledger, the releases by state and, for
 * a bounded number of releases, per model and digest), and the read-only
 * listener of --metrics HOST:PORT that serves only GET /metrics, /healthz
 * and /readyz (the same answers as the API's; everything else is 404).
 * Thread: loop thread (the ledger is read on a worker).
 */
#ifndef PEER_METRICS_H
#define PEER_METRICS_H

#include "core/ctx.h"
#include "release/release.h"
#include "swarm/swarm.h"
#include "ws_httpd.h"

typedef struct peer_metrics_s peer_metrics_t;

/* Answers req (taken). swarm may be NULL. */
void peer_metrics_reply(peer_ctx_t *ctx, peer_swarm_t *swarm,
                        peer_releases_t *releases, ws_httpd_req_t *req);

/* Starts the listener on host_port (borrowed) over ctx, releases and swarm
 * (borrowed for its life; swarm may be NULL). *out is set unless -ENOMEM,
 * also on failure (close and free it as usual); errors are logged and returned:
 * WS_EUSAGE for a bad address, a -errno from bind/listen, -ENOMEM. */
int peer_metrics_new(peer_ctx_t *ctx, peer_releases_t *releases,
                     peer_swarm_t *swarm, const char *host_port,
                     peer_metrics_t **out) WS_MUST_USE;
/* Stops listening and closes the connections; closed(arg) runs once all
 * are gone (at once when nothing was open). */
void peer_metrics_close(peer_metrics_t *m, void (*closed)(void *arg),
                        void *arg);
/* Frees m after peer_metrics_close's callback. NULL is fine. */
void peer_metrics_free(peer_metrics_t *m);

#endif
