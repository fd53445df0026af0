/* trk_hold.h - the restart hold: after a restart that restored the wanted
 * set from the state file, the releases wanted then get no origin lease
 * until their holders have had time to reconnect (TRK_RESTART_HOLD_MS,
 * docs/tracker.md "Restart").
 *
 * Owns a copy of those releases' digests. Pure logic, loop thread only.
 */
#ifndef TRK_HOLD_H
#define TRK_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "digest.h"
#include "trk_wanted.h"

typedef struct {
  uint64_t until_ms; /* 0: no hold */
  ws_hash_t *digests;
  uint32_t n;
} trk_hold_t;

/* Holds the releases of w (those with a digest) until until_ms, replacing
 * any hold before. 0 or -ENOMEM (then nothing is held). */
int trk_hold_set(trk_hold_t *h, const trk_wanted_t *w, uint64_t until_ms);
/* 1 while the release with digest d is held at now_ms. */
bool trk_hold_applies(const trk_hold_t *h, const ws_hash_t *d, uint64_t now_ms);
/* 1 once, at the first call at or after the hold's end (it is then
 * cleared): the held swarms are to be topped up. */
bool trk_hold_ended(trk_hold_t *h, uint64_t now_ms);
void trk_hold_free(trk_hold_t *h);

#endif /* TRK_HOLD_H */
