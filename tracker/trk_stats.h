/* trk_stats.h - what the dashboard shows per release: progress and rate
 * of each member over time, bytes from S3 vs neighbours, stuck members,
 * completion times, last errors, members that left.
 *
 * Everything is derived from what the tracker already sees (have-sets
 * from announces and HAVEs, origin leases) plus the optional progress
 * report of ANNOUNCE (sz, s3, pb, err; docs/protocol.md). Memory is fixed
 * per release (a ring of TRK_STATS_SAMPLES samples for the whole swarm and
 * TRK_STATS_GONE_MAX departed members) and bounded per member: a member's
 * own ring of chunk counts exists only while one of its last
 * TRK_STATS_SAMPLES samples gained a chunk. Seeds, complete members and
 * members that have not gained a chunk in the window hold none, and read
 * as zero gains, which is what the ring would hold. The tracker's budget
 * keeps room for a ring per member (trk_swarm_member_bytes), so it holds
 * when every member fetches at once. The definitions (stuck, rate, time to
 * p50/p99, derived bytes) are in docs/tracker.md, "Dashboard".
 *
 * Implemented in trk_stats.c on the swarm's internals; pure logic, loop
 * thread only, time comes in as now_ms.
 */
#ifndef TRK_STATS_H
#define TRK_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "trk_config.h"
#include "trk_swarm.h"

/* Per-member record, embedded in the member (trk_swarm-int.h). */
typedef struct {
  uint8_t seen;         /* its first have-set was taken as the baseline */
  uint8_t fetcher;      /* it was a leech missing chunks at some point */
  uint8_t reported;     /* it sent the ANNOUNCE progress report */
  uint32_t base_have;   /* chunks it held when it joined */
  uint32_t last_have;   /* at the last touch */
  uint32_t pending;     /* chunks gained since the last sample */
  uint64_t first_seq;   /* the swarm's sample count when it joined */
  uint64_t progress_ms; /* last time its have-set grew (join time first) */
  uint64_t done_ms;     /* when it completed after fetching; 0 not yet */
  uint64_t s3_bytes;    /* reported */
  uint64_t peer_bytes;  /* reported */
  uint64_t err_ms;
  uint64_t gain_seq; /* the swarm's sample number of its last gain */
  char err[TRK_STATS_ERR_MAX + 1];
  /* Chunks gained per sample (ring of TRK_STATS_SAMPLES), allocated at
   * its first gain and freed once no sample in the ring holds one; NULL:
   * every sample in the window is 0. */
  uint16_t *gained;
} trk_mstats_t;

/* What one announce reported (all optional: 0 / NULL not sent). */
typedef struct {
  uint64_t size_bytes;
  uint64_t s3_bytes;
  uint64_t peer_bytes;
  const char *err;
} trk_report_t;

typedef enum {
  TRK_NODE_FETCHING,
  TRK_NODE_STUCK, /* no new chunk for TRK_STATS_STUCK_MS */
  TRK_NODE_DONE,  /* holds every chunk */
  TRK_NODE_SEED,  /* a seed that does not hold every chunk */
  TRK_NODE_LEFT,  /* departed (remembered, not a member) */
  TRK_NODE_STATE_LAST
} trk_node_state_t;

/* One row of the per-node table. Strings are borrowed from the tracker
 * until its next change. */
typedef struct {
  const char *node_id;
  const char *zone;
  trk_node_state_t state;
  double progress;   /* 0..1 */
  double rate_bps;   /* over the last TRK_STATS_RATE_SAMPLES samples */
  uint64_t s3_bytes; /* reported, or derived from completed leases */
  uint64_t peer_bytes;
  int reported;    /* bytes are the node's own report */
  double idle_s;   /* since its have-set last grew */
  double done_s;   /* start to done; < 0 not done */
  const char *err; /* "" none */
  double err_age_s;
} trk_node_view_t;

typedef struct {
  uint64_t size_bytes; /* release bytes (reported), 0 unknown */
  double chunk_bytes;  /* mean chunk size (size / chunks), 0 unknown */
  uint64_t s3_bytes;   /* members and departed members */
  uint64_t peer_bytes;
  double s3_ratio; /* s3_bytes / size_bytes; < 0 unknown */
  uint32_t done, fetching, stuck, seeds, left;
  uint32_t fetchers;   /* nodes that fetched (p50/p99 population) */
  double rate_bps;     /* all members, last TRK_STATS_RATE_SAMPLES */
  double p50_s, p99_s; /* start to done; < 0 not reached yet */
  double elapsed_s;    /* since the start (prefetch or first join) */
  uint64_t start_ms;
} trk_swarm_summary_t;

/* --- hooks of the swarm and tracker ---------------------------------- */

/* Allocates s's history; 0 or -ENOMEM (trk_swarm_new). */
int trk_stats_swarm_init(trk_swarm_t *s);
void trk_stats_swarm_free(trk_swarm_t *s);
/* m joined s: a departed record of the same node is taken back. */
void trk_stats_member_join(trk_swarm_t *s, trk_member_t *m, uint64_t now_ms);
/* m is leaving s: remembered as departed (at the time of the swarm's last
 * event: trk_swarm_leave takes no clock). */
void trk_stats_member_leave(trk_swarm_t *s, trk_member_t *m);
/* After m's have-set may have changed (announce, HAVE). */
void trk_stats_touch(trk_swarm_t *s, trk_member_t *m, uint64_t now_ms);
/* The announce's progress report. */
void trk_stats_report(trk_swarm_t *s, trk_member_t *m, const trk_report_t *r,
                      uint64_t now_ms);
/* A tracker-side error of m (e.g. an expired lease): printf-style. */
void trk_stats_error(trk_member_t *m, uint64_t now_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Takes one history sample of s (every tick). */
void trk_stats_sample(trk_swarm_t *s, uint64_t now_ms);
/* Sets the start of the release's clock (the prefetch) if earlier. */
void trk_stats_set_start(trk_swarm_t *s, uint64_t start_ms);

/* Bytes of one swarm's history (trk_swarm_fixed_bytes counts them). */
size_t trk_stats_swarm_bytes(void);
/* Bytes of one member's ring (trk_swarm_member_bytes reserves them). */
size_t trk_stats_member_ring_bytes(void);
/* Members of s that hold a ring now. */
uint32_t trk_stats_rings(const trk_swarm_t *s);

/* --- queries (JSON) --------------------------------------------------- */

void trk_stats_summary(const trk_swarm_t *s, uint64_t now_ms,
                       trk_swarm_summary_t *out);
/* Rows: members first (0 .. member_count - 1), then departed members. */
uint32_t trk_stats_node_count(const trk_swarm_t *s);
void trk_stats_node(const trk_swarm_t *s, uint32_t i, uint64_t now_ms,
                    trk_node_view_t *out);
const char *trk_stats_state_name(trk_node_state_t st);
/* History: n samples, oldest first (i = 0 .. n - 1). */
uint32_t trk_stats_hist_count(const trk_swarm_t *s);
uint64_t trk_stats_hist_time(const trk_swarm_t *s, uint32_t i);
/* All members' rate in sample i (bytes/s, or chunks/s when the size is
 * unknown), and member row's (< 0 when it was not a member then). */
double trk_stats_hist_rate(const trk_swarm_t *s, uint32_t i);
double trk_stats_hist_node_rate(const trk_swarm_t *s, uint32_t member,
                                uint32_t i);
void trk_stats_hist_states(const trk_swarm_t *s, uint32_t i, uint32_t *done,
                           uint32_t *fetching, uint32_t *stuck);

#endif
