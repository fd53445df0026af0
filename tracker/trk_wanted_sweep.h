/* trk_wanted_sweep.h - the wanted set's removals that need the whole
 * tracker: entries past their TTL, and entries done everywhere (every
 * connected node the entry selects holds the release complete, and at
 * least one does). The rules are in trk_wanted.h and docs/operations.md.
 *
 * Loop thread only.
 */
#ifndef TRK_WANTED_SWEEP_H
#define TRK_WANTED_SWEEP_H

#include <stdint.h>

#include "trk_tracker.h"

/* Removes expired and done entries; returns how many. */
uint32_t trk_wanted_sweep(trk_tracker_t *t, uint64_t now_ms);

#endif
