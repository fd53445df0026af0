/* s3_stall.c - the stall deadline of one S3 attempt (docs/s3.md "Stall
 * deadline"): a GET or HEAD attempt that receives nothing, headers or
 * body, for its deadline is cut and tried again on a new connection,
 * resuming where it stopped. A connection stuck in TCP's retransmission
 * backoff, or a request the server sits on, otherwise held the GET for the
 * low-speed window (20 s); in a swarm every node may be waiting for that
 * one chunk (docs/benchmarks.md, session 18).
 *
 * Thread: the loop thread (curl's callbacks run in curl_multi calls).
 */
#include <stdio.h>

#include "s3-int.h"

/* GET and HEAD only (an upload's answer comes after its body), doubling
 * with each attempt in a row that was cut having received nothing, up to
 * the low-speed window (which still catches a trickle). */
static unsigned deadline_ms(const ws_s3_req_t *r) {
  const ws_s3_config_t *c = &r->s3->cfg;
  if (c->stall_timeout_ms == 0 || (r->op != S3_OP_GET && r->op != S3_OP_HEAD))
    return 0;
  uint64_t ms = (uint64_t)c->stall_timeout_ms
                << (r->stalls < 16 ? r->stalls : 16);
  uint64_t cap = (uint64_t)c->low_speed_time_s * 1000u;
  if (cap > 0 && ms > cap)
    ms = cap;
  return (unsigned)ms;
}

void s3_stall_begin(ws_s3_req_t *r) {
  r->rx_ms = s3_now_ms();
  r->rx_seen = 0;
  r->stall_ms = deadline_ms(r);
  r->stalled = 0;
}

int s3_stall_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                      curl_off_t ultotal, curl_off_t ulnow) {
  ws_s3_req_t *r = ud;
  (void)dltotal, (void)ultotal, (void)ulnow;
  uint64_t now = s3_now_ms();
  if (r->paused || (uint64_t)dlnow != r->rx_seen) {
    r->rx_seen = (uint64_t)dlnow;
    r->rx_ms = now;
    return 0;
  }
  if (r->stall_ms == 0 || now < r->rx_ms + r->stall_ms)
    return 0;
  r->stalled = 1;
  return 1; /* CURLE_ABORTED_BY_CALLBACK */
}

void s3_stall_cut(ws_s3_req_t *r, char *why, size_t whylen) {
  snprintf(why, whylen, "nothing received for %u ms", r->stall_ms);
  r->s3->stats.stalls++;
  r->fresh = 1;
  if (r->got > 0) { /* it moved: a fresh budget, the short deadline */
    r->stalls = 0;
    r->attempts = 0;
    r->first_ms = s3_now_ms();
  } else {
    r->stalls++;
  }
}
