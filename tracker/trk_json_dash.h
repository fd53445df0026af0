/* trk_json_dash.h - the dashboard's parts of the swarm JSON documents
 * (trk_stats.h numbers as cJSON): a swarm's "dash" summary, its per-node
 * table (stragglers first) and its history for the charts. Loop thread
 * only; each returns 0 or -ENOMEM (what was added stays in o).
 */
#ifndef TRK_JSON_DASH_H
#define TRK_JSON_DASH_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "trk_swarm.h"

/* Adds "dash": {size_bytes, s3_bytes, s3_ratio, done, fetching, stuck,
 * rate_bps, p50_s, p99_s, ...} to o. */
int trk_json_dash_summary(cJSON *o, const trk_swarm_t *s, uint64_t now_ms);
/* Adds "nodes" (every member and departed member, stragglers first) and
 * "history" (the sample ring, the aggregate rate and at most
 * TRK_STATS_CHART_NODES per-node rate series) to o. */
int trk_json_dash_detail(cJSON *o, const trk_swarm_t *s, uint64_t now_ms);

#endif
