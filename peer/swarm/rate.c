/* rate.c - token buckets (rate.h): refilled from uv_hrtime at every use.
 * Owns nothing. Thread: its user's loop thread.
 */
#include <uv.h>

#include "core/tunables.h"
#include "swarm/rate.h"

void peer_rate_init(peer_rate_t *r, uint64_t bytes_per_s) {
  r->rate = bytes_per_s;
  r->burst = (double)bytes_per_s * PEER_RATE_BURST_MS / 1000.0;
  if (r->burst < 64.0 * 1024.0)
    r->burst = 64.0 * 1024.0; /* at least one read buffer */
  r->tokens = r->burst;
  r->last_ns = uv_hrtime();
}

static void rate_refill(peer_rate_t *r) {
  uint64_t now = uv_hrtime();
  double add = (double)(now - r->last_ns) * (double)r->rate / 1e9;
  r->last_ns = now;
  r->tokens += add;
  if (r->tokens > r->burst)
    r->tokens = r->burst;
}

uint64_t peer_rate_wait_ms(peer_rate_t *r) {
  if (r->rate == 0)
    return 0;
  rate_refill(r);
  if (r->tokens >= 0)
    return 0;
  return (uint64_t)(-r->tokens * 1000.0 / (double)r->rate) + 1;
}

uint64_t peer_rate_charge(peer_rate_t *r, uint64_t n) {
  if (r->rate == 0)
    return 0;
  rate_refill(r);
  r->tokens -= (double)n;
  return peer_rate_wait_ms(r);
}
