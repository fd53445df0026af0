/* metrics.h - GET /metrics in the Prometheus text format: the context's
 * counters, the S3 client's and the swarm's stats, the buffer pool, the
 * cache ledger and the releases by state.
 * Thread: loop thread (the ledger is read on a worker).
 */
#ifndef PEER_METRICS_H
#define PEER_METRICS_H

#include "core/ctx.h"
#include "release/release.h"
#include "swarm/swarm.h"
#include "ws_httpd.h"

/* Answers req (taken). swarm may be NULL. */
void peer_metrics_reply(peer_ctx_t *ctx, peer_swarm_t *swarm,
                        peer_releases_t *releases, ws_httpd_req_t *req);

#endif
