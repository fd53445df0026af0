/* trk_json.h - read-only views of tracker state for HTTP: JSON documents
 * (cJSON). The Prometheus text is trk_metrics.h.
 *
 * Every function returns a new malloc'd NUL-terminated buffer the caller
 * frees. Output size is bounded by the tracker's caps (swarms, members per
 * swarm, wanted entries). Loop thread only (reads live state).
 */
#ifndef TRK_JSON_H
#define TRK_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "trk_tracker.h"

/* GET /api/v1/swarms: tracker summary, every swarm's counters and
 * progress, the wanted set. Returns NULL on allocation failure. */
char *trk_json_swarms(const trk_tracker_t *t, uint64_t now_ms);
/* GET /api/v1/swarms/<digest>: one swarm with its members. *out is
 * written only on success. WS_ENOTFOUND, -ENOMEM. */
int trk_json_swarm(const trk_tracker_t *t, const ws_hash_t *digest,
                   uint64_t now_ms, char **out) WS_MUST_USE;

#endif
