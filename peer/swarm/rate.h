/* rate.h - token buckets for the swarm's upload and download limits
 * (--upload-rate, --download-rate).
 *
 * Bytes are charged after they moved (a payload piece that arrived cannot
 * be refused), so a bucket may go into debt; the caller then pauses that
 * stream (reads paused, next upload read delayed) for the time the debt
 * takes to repay. The burst is PEER_RATE_BURST_MS of rate, at least one
 * read buffer, so a limited link never bursts far above its rate.
 *
 * No state machine: a bucket is a number, owned by whoever embeds it.
 * Thread: the loop thread of its user (the clock is uv_hrtime).
 */
#ifndef PEER_SWARM_RATE_H
#define PEER_SWARM_RATE_H

#include <stdint.h>

typedef struct {
  uint64_t rate; /* bytes per second; 0 = unlimited */
  double tokens; /* may go negative: bytes are charged after the fact */
  double burst;
  uint64_t last_ns;
} peer_rate_t;

/* A full bucket of bytes_per_s (0: unlimited, never waits). */
void peer_rate_init(peer_rate_t *r, uint64_t bytes_per_s);
/* Charges n bytes; returns 0 when the bucket is not in debt, else the
 * milliseconds until it is out of debt (the caller waits that long). */
uint64_t peer_rate_charge(peer_rate_t *r, uint64_t n);
/* Milliseconds until the bucket is out of debt (0 = now). */
uint64_t peer_rate_wait_ms(peer_rate_t *r);

#endif
