/* sim_ev.c - ws-sim's event queue: a heap ordered by time, then by the
 * order of scheduling (so equal times run first in, first out, and a run
 * is the same for the same seed: no two events tie, so any heap pops them
 * in the same order). Four children a node: a pop walks half the levels
 * of a binary heap, and the queue (millions of events at 10,000 nodes)
 * is far larger than the caches, so each level is a miss. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "swarm/pick_rank.h"

#define SIM_EV_ARITY 4u

_Static_assert(EV_RATES < 256, "an event's type fits below its order");

/* Event k lives EV_PAD slots into a 64-byte aligned block, so that the
 * four children of any event (4k + 1 .. 4k + 4: 128 bytes from slot
 * 4k + 4) fill two cache lines instead of straddling three. */
#define EV_PAD 3u
_Static_assert(sizeof(sim_ev_t) == 32, "four events in two cache lines");

static void ev_grow(sim_t *s) {
  uint32_t cap = s->ev_cap ? s->ev_cap * 2u : 1024u;
  size_t bytes = ((size_t)cap + EV_PAD) * sizeof(sim_ev_t);
  sim_ev_t *mem = aligned_alloc(64, (bytes + 63u) & ~(size_t)63u);
  if (mem == NULL) {
    fprintf(stderr, "ws-sim: out of memory (events)\n");
    exit(1);
  }
  if (s->nev > 0)
    memcpy(mem + EV_PAD, s->ev, (size_t)s->nev * sizeof(sim_ev_t));
  sim_ev_free(s);
  s->ev = mem + EV_PAD;
  s->ev_cap = cap;
}

void sim_ev_free(sim_t *s) {
  if (s->ev != NULL)
    free(s->ev - EV_PAD);
  s->ev = NULL;
}

static bool ev_before(const sim_ev_t *a, const sim_ev_t *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void sim_ev_push(sim_t *s, double t, uint32_t type, uint32_t a, uint32_t b,
                 uint32_t c) {
  sim_ev_push4(s, t, type, a, b, c, 0);
}

void sim_ev_push4(sim_t *s, double t, uint32_t type, uint32_t a, uint32_t b,
                  uint32_t c, uint32_t d) {
  if (s->nev == s->ev_cap)
    ev_grow(s);
  sim_ev_t e = {.t = t < s->now ? s->now : t,
                .seq = s->ev_seq++ << 8 | type,
                .a = a,
                .b = b,
                .c = c,
                .d = d};
  uint32_t i = s->nev++;
  while (i > 0) {
    uint32_t p = (i - 1u) / SIM_EV_ARITY;
    if (!ev_before(&e, &s->ev[p]))
      break;
    s->ev[i] = s->ev[p];
    i = p;
  }
  s->ev[i] = e;
}

bool sim_ev_pop(sim_t *s, sim_ev_t *out) {
  if (s->nev == 0)
    return false;
  *out = s->ev[0];
  sim_ev_t last = s->ev[--s->nev];
  uint32_t i = 0;
  for (;;) {
    uint32_t l = SIM_EV_ARITY * i + 1u, m = i;
    uint32_t end = l + SIM_EV_ARITY < s->nev ? l + SIM_EV_ARITY : s->nev;
    const sim_ev_t *best = &last;
    for (uint32_t k = l; k < end; k++) {
      if (ev_before(&s->ev[k], best)) {
        m = k;
        best = &s->ev[k];
      }
    }
    if (m == i)
      break;
    s->ev[i] = s->ev[m];
    i = m;
  }
  if (s->nev > 0)
    s->ev[i] = last;
  return true;
}

uint64_t sim_rand(sim_t *s) {
  return peer_pick_rand(&s->rng); /* the picker's own generator */
}
