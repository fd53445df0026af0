/* ws_hist.h - a fixed-bucket histogram of durations in seconds, for the
 * daemons' Prometheus histograms (S3 request latency, chunk fetch time,
 * prefetch to ready).
 *
 * Every histogram uses the same upper bounds (WS_HIST_BOUNDS, from 1 ms to
 * one hour), so a zero-initialised ws_hist_t is ready to use and the
 * exposition code needs no per-histogram table. Plain counters: the owner
 * observes and reads from one thread (the daemons' loop thread).
 */
#ifndef WS_HIST_H
#define WS_HIST_H

#include <stdint.h>

#define WS_HIST_BOUNDS 20u

typedef struct {
  uint64_t counts[WS_HIST_BOUNDS + 1u]; /* per bucket; the last is +Inf */
  uint64_t count;
  double sum; /* seconds */
} ws_hist_t;

/* The upper bound of bucket i (< WS_HIST_BOUNDS), in seconds. */
double ws_hist_bound(unsigned i);
/* Adds one observation of secs (negative values count as 0). */
void ws_hist_observe(ws_hist_t *h, double secs);
/* Observations <= ws_hist_bound(i) (cumulative, as Prometheus wants);
 * i == WS_HIST_BOUNDS gives the total count. */
uint64_t ws_hist_cumulative(const ws_hist_t *h, unsigned i);

#endif
