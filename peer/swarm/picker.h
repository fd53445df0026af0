/* picker.h - which chunk to fetch from whom: the request pipelines of the
 * neighbours, and the origin gate that decides which chunks the S3
 * fetcher may take in swarm mode.
 *
 * Peers: peer_picker_fill() tops a neighbour's pipeline up to
 * peer_picker_depth() requests (PEER_PIPELINE_DEPTH, or one when a node
 * has as many neighbours as it may have requests out and chunks come
 * slowly). Candidates are chunks the neighbour holds and we miss, in the
 * releases we are fetching; the best is the one with the lowest (tier,
 * availability): single-chunk files first, then every file's first chunk
 * (the safetensors header), then the rest, and within a tier the chunk
 * the fewest neighbours hold (rarest first), so copies spread through the
 * swarm instead of everyone fetching the same chunk. A chunk the
 * neighbour is still fetching from S3 itself (HAVE "p") comes after the
 * ones it holds. The scan starts at a random chunk and examines at most
 * PEER_PICK_SCAN_MAX chunks per release, so a pick costs the same for any
 * release size and equal candidates are spread at random.
 *
 * Endgame: when no chunk of a release is MISSING any more (all requested
 * or being written), a neighbour with free slots duplicates requests that
 * are still waiting for their first byte (at most PEER_ENDGAME_DUP_MAX per
 * chunk); the first CHUNK header wins and the others are canceled.
 *
 * Origin gate (peer_picker_origin_next, set on the files table): the
 * chunks the tracker leased to us, except those a neighbour already has,
 * at most the tracker's "streams" of them at full rate (a spare starts as
 * one of those nears its end, origin.c); if the release's tracker has
 * been unreachable for PEER_TRACKER_FALLBACK_MS (its link down and no other
 * tracker to move to, trackers.h; or none is configured) the chunks no
 * neighbour has that we win by rendezvous hashing (origin_share.h) over
 * ourselves and the neighbours that fetch or hold the release and spoke of
 * it within PEER_SHARE_STALL_MS: the nodes that find each other while the
 * tracker is down (addrbook.h) read each chunk from S3 about once. The
 * others come from their winner once it says HAVE "p"; a winner that goes
 * or falls silent leaves the set and its chunks fall to the next. For
 * PEER_SHARE_GRACE_MS after the release began fetching (other nodes known)
 * nothing is read, so the neighbours can announce it first. Alone, a node
 * wins every chunk.
 *
 * Owns: its random state only. Borrows: the context, the neighbours, the
 * records, the origin and the tracker state (all the swarm's).
 * Thread: loop thread.
 */
#ifndef PEER_SWARM_PICKER_H
#define PEER_SWARM_PICKER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ctx.h"
#include "fetch/file.h"
#include "fetch/origin.h"
#include "swarm/neighbor.h"
#include "swarm/swarm_release.h"

/* What the picker needs to know of the tracker links (kept by the swarm). */
typedef struct {
  bool configured;  /* --tracker given and the links not closed */
  bool up;          /* some link connected now */
  uint64_t down_ms; /* loop time the last link went down (or the start) */
  /* The links, when the fallback is judged per release by the link of its
   * tracker (trackers.h); NULL: by up and down_ms above. */
  const peer_trackers_t *trackers;
} peer_tracker_state_t;

typedef struct peer_picker_s {
  peer_ctx_t *ctx;
  peer_neighbors_t *nbrs;
  peer_swarm_rels_t *rels;
  peer_origin_t *origin;
  const peer_tracker_state_t *tracker;
  uint64_t rng;      /* tie-breaks (xorshift64), never 0 */
  uint64_t self_key; /* our rendezvous key (origin_share.h) */
  bool stopping;
} peer_picker_t;

/* Sets p up with its collaborators (borrowed for its whole life). */
void peer_picker_init(peer_picker_t *p, peer_ctx_t *ctx, peer_neighbors_t *nbrs,
                      peer_swarm_rels_t *rels, peer_origin_t *origin,
                      const peer_tracker_state_t *tracker);
/* Requests each neighbour's pipeline may hold now: one while at least
 * PEER_REQS_MAX ready neighbours have sent the BITFIELD of a release we
 * fetch (others cannot take a request) and a whole chunk of the releases we
 * fetch (the largest) takes PEER_DEPTH_ONE_CHUNK_MS or more at the
 * typical rate chunks come (peer_neighbors_t.rx_bps), so that the
 * requests go to as many neighbours as there are requests; else
 * PEER_PIPELINE_DEPTH, so that few neighbours still fill the downlink and
 * fast chunks keep the depth the model found right at 25 Gbit/s
 * (core/tunables.h says why). */
uint32_t peer_picker_depth(const peer_picker_t *p);
/* Fills n's request pipeline (see above). One deep, a chunk arriving from
 * n counts as a request to it: the next would wait in n's queue behind
 * that chunk, its chunk asked of nobody else meanwhile (core/tunables.h,
 * PEER_PIPELINE_DEPTH, says why); it is asked once that chunk is whole. */
void peer_picker_fill(peer_picker_t *p, peer_neighbor_t *n);
/* Chunks or neighbours changed: refills every pipeline. */
void peer_picker_fill_all(peer_picker_t *p);
/* The origin gate (peer_origin_gate_fn, arg the picker): 1 with *file (a
 * new reference) and *j taken INFLIGHT, or 0 when the origin may fetch
 * nothing now. */
int peer_picker_origin_next(void *p, peer_file_t **file, uint32_t *j);
/* true while a tracker is configured and rel's is down (*since_ms, may be
 * NULL: since when); false with no tracker at all. */
bool peer_picker_tracker_down(const peer_picker_t *p,
                              const peer_swarm_rel_t *rel, uint64_t now,
                              uint64_t *since_ms);

#endif
