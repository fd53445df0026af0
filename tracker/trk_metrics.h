/* trk_metrics.h - p2p-tracker's Prometheus text (weightswarm_tracker_*) and
 * the read-only listener of --metrics HOST:PORT, which serves only
 * GET /metrics, /healthz and /readyz (other paths 404, other methods 405),
 * so a cluster can scrape the tracker without reaching its API.
 *
 * Per-swarm series carry model and digest labels for at most
 * TRK_METRICS_SWARMS_MAX swarms (those with downloaders first); the rest
 * are summed under model="other", digest="other". Loop thread only (reads
 * live state).
 */
#ifndef TRK_METRICS_H
#define TRK_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "trk_server.h"
#include "trk_tracker.h"
#include "ws_err.h"
#include "ws_httpd.h"

#define TRK_TEXT_MAX_BYTES (8u << 20)

/* GET /metrics: Prometheus text format 0.0.4 over t and, for its
 * connection counters, srv and http (the HTTP servers' defence counts;
 * each may be NULL). *out (new, NUL-terminated) and *len are written only
 * on success; -ENOMEM or WS_ELIMIT. */
int trk_metrics_text(const trk_tracker_t *t, const trk_server_t *srv,
                     const ws_httpd_stats_t *http, uint64_t now_ms, char **out,
                     size_t *len) WS_MUST_USE;
/* Answers req (taken) with that text, or 500. */
void trk_metrics_reply(ws_httpd_req_t *req, const trk_tracker_t *t,
                       const trk_server_t *srv, const ws_httpd_stats_t *http,
                       uint64_t now_ms);

typedef struct trk_metrics_http_s trk_metrics_http_t;
typedef void (*trk_metrics_close_cb)(void *arg);

/* Starts the --metrics listener on host_port over t, srv and tally
 * (borrowed; they outlive it; srv and tally may be NULL; its own defence
 * counts are added to tally). 0 and *out (new; ends with
 * trk_metrics_http_close), -ENOMEM, WS_EUSAGE (bad address) or a -errno
 * from bind/listen (then nothing is left to close). *bound_port (may be
 * NULL) gets the port. */
int trk_metrics_http_new(uv_loop_t *loop, const trk_tracker_t *t,
                         const trk_server_t *srv, ws_httpd_stats_t *tally,
                         const char *host_port, int *bound_port,
                         trk_metrics_http_t **out) WS_MUST_USE;
/* Closes the listener and its connections, then calls cb (may be NULL) and
 * frees m. Call at most once. */
void trk_metrics_http_close(trk_metrics_http_t *m, trk_metrics_close_cb cb,
                            void *arg);

#endif
