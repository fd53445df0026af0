/* pick_rank.h - the picker's decision on one candidate chunk, pure.
 *
 * peer_picker_fill (picker.c) scans the chunks a neighbour offers and asks
 * two questions of each; they live here, apart from the neighbour and file
 * records, so that tools/sim (the swarm simulator, docs/scale.md) makes
 * the very same choices as p2pd:
 *
 *   - peer_pick_kind: may the chunk be asked of this neighbour at all, as
 *     a fresh request (MISSING) or as an endgame duplicate of a request in
 *     flight (at most PEER_ENDGAME_DUP_MAX per chunk, none once its bytes
 *     are arriving, none to a neighbour already asked, never while a fresh
 *     candidate is known, and only in the release's endgame);
 *   - peer_pick_may_beat / peer_pick_beats: the order of candidates, the
 *     lowest (dup, live, tier, avail) first: fresh before duplicate, held
 *     by the neighbour before still arriving there from origin (HAVE "p"),
 *     single-chunk files, then first chunks, then the rest, and within that
 *     the chunk the fewest neighbours hold (rarest first). may_beat answers
 *     before the availability is counted (counting walks the neighbours),
 *     beats once it is;
 *   - peer_pick_rand: the random numbers of the scan's start and of which
 *     neighbour is filled first (xorshift64), one definition for both.
 *
 * No state. Thread: any.
 */
#ifndef PEER_SWARM_PICK_RANK_H
#define PEER_SWARM_PICK_RANK_H

#include <stdbool.h>
#include <stdint.h>

/* A candidate's rank; lower is better in every field. */
typedef struct {
  int dup;        /* 1: an endgame duplicate of a request in flight */
  int live;       /* 1: still arriving at the neighbour from origin */
  int tier;       /* PEER_TIER_* (fetch/file.h) */
  uint32_t avail; /* neighbours holding it (may_beat ignores it) */
} peer_pick_rank_t;

/* What the picker knows of one chunk we lack, for one neighbour. */
typedef struct {
  bool missing;      /* MISSING: nobody fetches it for us */
  bool inflight;     /* INFLIGHT (a peer request or the origin has it) */
  uint32_t nreq;     /* peer requests out for it */
  bool rx_busy;      /* a peer's bytes for it are arriving */
  bool pending_here; /* already asked of this neighbour */
} peer_pick_chunk_t;

/* How the chunk may be asked of the neighbour. */
typedef enum {
  PEER_PICK_NOT = -1,    /* not at all */
  PEER_PICK_FRESH = 0,   /* a fresh request */
  PEER_PICK_ENDGAME = 1, /* a duplicate, if the release is in its endgame
                            (the caller knows: it counts MISSING chunks
                            only when it must) */
} peer_pick_kind_t;

/* c's kind; best_fresh: a fresh candidate was found already (a fresh
 * chunk always beats a duplicate). */
peer_pick_kind_t peer_pick_kind(const peer_pick_chunk_t *c, bool best_fresh);

/* Whether cand, its avail not counted yet, can beat best (NULL: no
 * candidate yet, so it can). false: skip it without counting. */
bool peer_pick_may_beat(const peer_pick_rank_t *cand,
                        const peer_pick_rank_t *best);
/* Whether cand, avail counted, beats best (NULL: it does): the lower
 * (dup, live, tier, avail); a tie keeps best, the first found. */
bool peer_pick_beats(const peer_pick_rank_t *cand,
                     const peer_pick_rank_t *best);

/* The next of *state's xorshift64 sequence (*state != 0 stays != 0):
 * tie-breaks and scan starts, not security. */
uint64_t peer_pick_rand(uint64_t *state);

#endif
