/* sim_ev.c - ws-sim's event queue: a binary heap ordered by time, then by
 * the order of scheduling (so equal times run first in, first out, and a
 * run is the same for the same seed). */
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"
#include "swarm/pick_rank.h"

static bool ev_before(const sim_ev_t *a, const sim_ev_t *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void sim_ev_push(sim_t *s, double t, uint32_t type, uint32_t a, uint32_t b,
                 uint32_t c) {
  sim_ev_push4(s, t, type, a, b, c, 0);
}

void sim_ev_push4(sim_t *s, double t, uint32_t type, uint32_t a, uint32_t b,
                  uint32_t c, uint32_t d) {
  if (s->nev == s->ev_cap) {
    uint32_t cap = s->ev_cap ? s->ev_cap * 2u : 1024u;
    sim_ev_t *ev = realloc(s->ev, (size_t)cap * sizeof(*ev));
    if (ev == NULL) {
      fprintf(stderr, "ws-sim: out of memory (events)\n");
      exit(1);
    }
    s->ev = ev;
    s->ev_cap = cap;
  }
  sim_ev_t e = {.t = t < s->now ? s->now : t,
                .seq = s->ev_seq++,
                .type = type,
                .a = a,
                .b = b,
                .c = c,
                .d = d};
  uint32_t i = s->nev++;
  while (i > 0) {
    uint32_t p = (i - 1u) / 2u;
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
    uint32_t l = 2u * i + 1u, r = l + 1u, m = i;
    const sim_ev_t *best = &last;
    if (l < s->nev && ev_before(&s->ev[l], best)) {
      m = l;
      best = &s->ev[l];
    }
    if (r < s->nev && ev_before(&s->ev[r], best))
      m = r;
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
