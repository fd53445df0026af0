/* ws_hist.c - fixed-bucket duration histograms (ws_hist.h).
 * Thread: the owner's (no locking).
 */
#include "ws_hist.h"

/* Seconds: S3 requests and chunk fetches take milliseconds to seconds, a
 * release minutes; one set covers all three. */
static const double k_bounds[WS_HIST_BOUNDS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,  1,
    2.5,   5,      10,    30,   60,    120,  300, 600,  1800, 3600};

double ws_hist_bound(unsigned i) {
  return i < WS_HIST_BOUNDS ? k_bounds[i] : 0.0;
}

void ws_hist_observe(ws_hist_t *h, double secs) {
  unsigned i = 0;
  if (!(secs > 0.0)) /* also NaN */
    secs = 0.0;
  while (i < WS_HIST_BOUNDS && secs > k_bounds[i])
    i++;
  h->counts[i]++;
  h->count++;
  h->sum += secs;
}

uint64_t ws_hist_cumulative(const ws_hist_t *h, unsigned i) {
  uint64_t n = 0;
  for (unsigned k = 0; k <= i && k <= WS_HIST_BOUNDS; k++)
    n += h->counts[k];
  return n;
}
