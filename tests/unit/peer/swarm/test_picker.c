/* test_picker.c - which chunk is asked of whom (swarm/picker.c) on a real
 * loop: the release's files open in a real store, the release FETCHING in
 * the real swarm table, and neighbours that are authenticated wire_conn
 * pairs over loopback TCP, so every REQUEST the picker sends crosses a real
 * connection and is checked at the far end too.
 *
 * Neighbours: small files and first chunks first (before rarity), rarest
 * first within a tier whatever chunk the scan starts at, nothing asked that
 * no neighbour holds, endgame duplicates only once every chunk is in flight
 * and at most PEER_ENDGAME_DUP_MAX per chunk. Origin gate: only leased
 * chunks no neighbour holds while the tracker is up, expired leases
 * dropped, and any chunk no neighbour holds once the tracker has been
 * unreachable for PEER_TRACKER_FALLBACK_MS (or none is configured). The
 * announce names the single-chunk files we lack, to be read first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "core/tunables.h"
#include "swarm/origin_share.h"
#include "swarm_fixture.h"

/* a: 4 chunks (a0 first, a1-a3 rest), b: 2 (b0 first, b1 rest), c: one
 * small chunk. 7 chunks in all. */
static const ffx_spec_t spec[] = {
    {"a.bin", 4 * FFX_CS, 1}, {"b.bin", 2 * FFX_CS, 2}, {"c.bin", 1000, 3}};

static uint32_t G(sfx_t *s, const char *name, uint32_t j) {
  return sfx_global(s, name, j);
}

static void hold_all(sfx_t *s, sfx_nbr_t *nb) {
  uint32_t all[16];
  for (uint32_t g = 0; g < s->rel->total; g++)
    all[g] = g;
  sfx_holds(nb, all, s->rel->total);
}

/* Neighbour "n<i>" on port 7001 + i, holding every chunk. */
static sfx_nbr_t *holder(sfx_t *s, uint32_t i) {
  char name[8];
  snprintf(name, sizeof(name), "n%u", i);
  sfx_nbr_t *nb = sfx_neighbor(s, name, (uint16_t)(7001 + i));
  hold_all(s, nb);
  return nb;
}

/* The far end got, as its last n frames, REQUESTs for want[0..n) in order
 * (after sfx_wait_requests). */
static void assert_wire_requests(const sfx_nbr_t *nb, const uint32_t *want,
                                 uint32_t n) {
  uint32_t k = 0;
  for (unsigned i = 0; i < nb->nseen; i++) {
    if (nb->seen[i].type != WS_MSG_REQUEST)
      continue;
    assert_true(k < n);
    assert_int_equal(nb->seen[i].chunk, want[k]);
    assert_int_equal(nb->seen[i].req_id, nb->n.reqs[k].req_id);
    k++;
  }
  assert_int_equal(k, n);
}

static void test_small_and_first_chunks_first(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  sfx_nbr_t *z = sfx_neighbor(s, "nbrZ", 7002);
  hold_all(s, a);
  hold_all(s, z); /* every chunk one holder more: the order stays */
  for (uint64_t seed = 1; seed <= 8; seed++) {
    s->picker.rng = seed * 0x9e3779b97f4a7c15ull; /* scan from elsewhere */
    /* a's pipeline takes the first picks, z's the next ones. */
    uint32_t g[2 * PEER_PIPELINE_DEPTH];
    bool dup[2 * PEER_PIPELINE_DEPTH];
    peer_picker_fill(&s->picker, &a->n);
    assert_int_equal(sfx_requests(a, g, dup), PEER_PIPELINE_DEPTH);
    peer_picker_fill(&s->picker, &z->n);
    assert_int_equal(
        sfx_requests(z, g + PEER_PIPELINE_DEPTH, dup + PEER_PIPELINE_DEPTH),
        PEER_PIPELINE_DEPTH);
    /* The small file, then both first chunks (equally rare: any order). */
    assert_int_equal(g[0], G(s, "c.bin", 0));
    assert_true((g[1] == G(s, "a.bin", 0) && g[2] == G(s, "b.bin", 0)) ||
                (g[1] == G(s, "b.bin", 0) && g[2] == G(s, "a.bin", 0)));
    for (uint32_t i = 0; i < 2 * PEER_PIPELINE_DEPTH; i++)
      assert_false(dup[i]);
    peer_file_t *c = sfx_file(s, "c.bin", NULL);
    assert_int_equal(c->chunk_state[0], PEER_CHUNK_INFLIGHT);
    assert_int_equal(c->nreq[0], 1);
    if (seed == 1) {
      sfx_wait_requests(a, PEER_PIPELINE_DEPTH);
      assert_wire_requests(a, g, PEER_PIPELINE_DEPTH);
    }
    sfx_drop_all(a);
    sfx_drop_all(z);
    assert_int_equal(c->chunk_state[0], PEER_CHUNK_MISSING);
    assert_int_equal(c->nreq[0], 0);
  }
  sfx_teardown(s);
}

static void test_tier_beats_rarity(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  sfx_nbr_t *b = sfx_neighbor(s, "nbrB", 7002);
  hold_all(s, a);
  /* b holds the small file and the first chunks: those are twice as
   * common as the rest, and still come first. */
  uint32_t firsts[] = {G(s, "c.bin", 0), G(s, "a.bin", 0), G(s, "b.bin", 0)};
  sfx_holds(b, firsts, 3);
  _Static_assert(PEER_PIPELINE_DEPTH == 2, "the picks below are a's two");
  peer_picker_fill(&s->picker, &a->n);
  uint32_t g[PEER_PIPELINE_DEPTH];
  assert_int_equal(sfx_requests(a, g, NULL), 2);
  assert_int_equal(g[0], firsts[0]);
  assert_true(g[1] == firsts[1] || g[1] == firsts[2]);
  uint32_t last = g[1] == firsts[1] ? firsts[2] : firsts[1];
  /* b gets the first chunk left; then it holds only chunks in flight
   * while others are MISSING: no endgame, so nothing more is asked of b. */
  peer_picker_fill(&s->picker, &b->n);
  assert_int_equal(sfx_requests(b, g, NULL), 1);
  assert_int_equal(g[0], last);
  sfx_wait_requests(a, 2);
  sfx_wait_requests(b, 1);
  sfx_settle(s);
  assert_int_equal(b->nrequests, 1);
  sfx_teardown(s);
}

static void test_rarest_first(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  sfx_nbr_t *b = sfx_neighbor(s, "nbrB", 7002);
  sfx_nbr_t *c = sfx_neighbor(s, "nbrC", 7003);
  /* Rest-tier chunks only. Held by: b1 a only (1), a3 a and b (2), a1 and
   * a2 all three (3). */
  uint32_t a1 = G(s, "a.bin", 1), a2 = G(s, "a.bin", 2);
  uint32_t a3 = G(s, "a.bin", 3), b1 = G(s, "b.bin", 1);
  uint32_t at_a[] = {a1, a2, a3, b1}, at_b[] = {a1, a2, a3}, at_c[] = {a1, a2};
  sfx_holds(a, at_a, 4);
  sfx_holds(b, at_b, 3);
  sfx_holds(c, at_c, 2);
  for (uint64_t seed = 1; seed <= 16; seed++) {
    s->picker.rng = seed * 0x9e3779b97f4a7c15ull;
    peer_picker_fill(&s->picker, &a->n);
    uint32_t g[PEER_PIPELINE_DEPTH];
    _Static_assert(PEER_PIPELINE_DEPTH == 2, "the picks below are a's two");
    assert_int_equal(sfx_requests(a, g, NULL), 2);
    assert_int_equal(g[0], b1); /* held by one */
    assert_int_equal(g[1], a3); /* by two; a1 and a2 by three */
    if (seed == 1) {
      sfx_wait_requests(a, 2);
      assert_wire_requests(a, g, 2);
    }
    sfx_drop_all(a);
  }
  sfx_teardown(s);
}

static void test_nothing_nobody_has(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  sfx_nbr_t *b = sfx_neighbor(s, "nbrB", 7002);
  sfx_holds(a, NULL, 0); /* a BITFIELD with nothing in it */
  /* b sent no BITFIELD at all. */
  peer_picker_fill_all(&s->picker);
  assert_int_equal(a->n.nreqs, 0);
  assert_int_equal(b->n.nreqs, 0);
  /* One HAVE: exactly that chunk is asked for, once. */
  uint32_t a2 = G(s, "a.bin", 2);
  sfx_have(a, a2);
  peer_picker_fill_all(&s->picker);
  uint32_t g[PEER_PIPELINE_DEPTH];
  assert_int_equal(sfx_requests(a, g, NULL), 1);
  assert_int_equal(g[0], a2);
  assert_int_equal(b->n.nreqs, 0);
  sfx_wait_requests(a, 1);
  sfx_settle(s);
  assert_int_equal(a->nrequests, 1);
  assert_int_equal(b->nrequests, 0);
  /* Both neighbours got our BITFIELD when they became ready. */
  assert_int_equal(a->nbitfields, 1);
  assert_int_equal(b->nbitfields, 1);
  sfx_teardown(s);
}

/* e: 3 chunks. */
static const ffx_spec_t spec_e[] = {{"e.bin", 3 * FFX_CS, 9}};

static void test_endgame_fresh_then_duplicates(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec_e, 1);
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  sfx_nbr_t *b = sfx_neighbor(s, "nbrB", 7002);
  peer_file_t *e = sfx_file(s, "e.bin", NULL);
  uint32_t two[] = {0, 1};
  sfx_holds(a, two, 2);
  sfx_holds(b, two, 2);
  peer_picker_fill(&s->picker, &a->n);
  uint32_t g[PEER_PIPELINE_DEPTH];
  bool dup[PEER_PIPELINE_DEPTH];
  assert_int_equal(sfx_requests(a, g, dup), 2);
  /* Chunk 2 is MISSING (nobody has it): not the endgame yet, b gets no
   * duplicate. */
  peer_picker_fill(&s->picker, &b->n);
  assert_int_equal(b->n.nreqs, 0);
  /* b has chunk 2 now: the fresh chunk first, then, every chunk being in
   * flight, a duplicate of one of a's two. */
  _Static_assert(PEER_PIPELINE_DEPTH == 2, "b's picks below are two");
  sfx_have(b, 2);
  peer_picker_fill(&s->picker, &b->n);
  assert_int_equal(sfx_requests(b, g, dup), 2);
  assert_int_equal(g[0], 2);
  assert_false(dup[0]);
  assert_true(dup[1]);
  assert_true(g[1] == 0 || g[1] == 1);
  uint32_t twice = g[1];
  assert_int_equal(e->nreq[twice], 2);
  assert_int_equal(e->nreq[1 - twice], 1);
  assert_int_equal(e->nreq[2], 1);
  sfx_wait_requests(b, 2);
  assert_wire_requests(b, g, 2);
  /* A duplicate given up keeps the chunk in flight for the other. */
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (b->n.reqs[i].used && b->n.reqs[i].g == twice)
      peer_request_drop(&b->n, i, WS_ECANCELED);
  }
  assert_int_equal(e->nreq[twice], 1);
  assert_int_equal(e->chunk_state[twice], PEER_CHUNK_INFLIGHT);
  sfx_teardown(s);
}

static void test_endgame_duplicate_cap(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec_e, 1);
  /* Enough neighbours holding every chunk to ask each chunk twice, and
   * one more. */
  enum {
    NB = (3 * PEER_ENDGAME_DUP_MAX + PEER_PIPELINE_DEPTH - 1) /
             PEER_PIPELINE_DEPTH +
         1
  };
  sfx_nbr_t *nb[NB];
  for (int i = 0; i < NB; i++)
    nb[i] = holder(s, (uint32_t)i);
  peer_file_t *e = sfx_file(s, "e.bin", NULL);
  uint32_t g[PEER_PIPELINE_DEPTH], asked = 0, fresh = 0;
  bool dup[PEER_PIPELINE_DEPTH];
  for (int i = 0; i < NB - 1; i++) {
    peer_picker_fill(&s->picker, &nb[i]->n);
    uint32_t n = sfx_requests(nb[i], g, dup);
    for (uint32_t k = 0; k < n; k++)
      fresh += dup[k] ? 0u : 1u;
    asked += n;
  }
  /* Each chunk once fresh, then duplicated up to two requests per chunk
   * (PEER_ENDGAME_DUP_MAX): the last neighbour gets nothing. */
  assert_int_equal(fresh, 3);
  assert_int_equal(asked, 3 * PEER_ENDGAME_DUP_MAX);
  peer_picker_fill(&s->picker, &nb[NB - 1]->n);
  assert_int_equal(nb[NB - 1]->n.nreqs, 0);
  for (uint32_t j = 0; j < 3; j++)
    assert_int_equal(e->nreq[j], PEER_ENDGAME_DUP_MAX);
  sfx_wait_requests(nb[NB - 2], nb[NB - 2]->n.nreqs);
  sfx_settle(s);
  assert_int_equal(nb[NB - 1]->nrequests, 0);
  sfx_teardown(s);
}

/* ---- origin gate --------------------------------------------------------- */

typedef struct {
  peer_file_t *f;
  uint32_t j;
} got_t;

/* What the origin fetcher gets: the files table's scheduler, which asks
 * the gate in swarm mode. 1 with the chunk taken, or 0. */
static int origin_next(sfx_t *s, got_t *got) {
  return peer_sched_next(s->fx.files, PEER_SRC_ORIGIN, &got->f, &got->j);
}

static void origin_give_back(got_t *got) {
  peer_file_chunk_done(got->f, got->j, PEER_SRC_ORIGIN, WS_ECANCELED, "test");
  peer_file_unref(got->f);
}

static sfx_t *gate_setup(sfx_nbr_t **a) {
  sfx_t *s = sfx_setup(spec, 3);
  peer_files_set_origin_gate(s->fx.files, peer_picker_origin_next, &s->picker);
  *a = sfx_neighbor(s, "nbrA", 7001);
  return s;
}

static void test_origin_only_leased_unheld(void **state) {
  (void)state;
  sfx_nbr_t *a;
  sfx_t *s = gate_setup(&a);
  got_t got;
  /* Tracker up, nothing leased: the origin fetches nothing. */
  assert_int_equal(origin_next(s, &got), 0);
  uint32_t a1 = G(s, "a.bin", 1), a2 = G(s, "a.bin", 2);
  uint32_t leased[] = {a1, a2};
  swarm_rel_leases_add(s->rel, leased, 2, 60000);
  sfx_holds(a, &a1, 1); /* a neighbour has a1: the picker asks it */
  assert_int_equal(origin_next(s, &got), 1);
  assert_ptr_equal(got.f, sfx_file(s, "a.bin", NULL));
  assert_int_equal(got.j, 2);
  assert_int_equal(got.f->chunk_state[2], PEER_CHUNK_INFLIGHT);
  /* a2 is in flight, a1 held by a, the rest unleased: nothing more. */
  got_t other;
  assert_int_equal(origin_next(s, &other), 0);
  /* With a gate, other sources get nothing from the scheduler. */
  assert_int_equal(
      peer_sched_next(s->fx.files, PEER_SRC_PEER, &other.f, &other.j), 0);
  origin_give_back(&got);
  /* Given back (failed fetch): leased and unheld, so handed out again. */
  assert_int_equal(origin_next(s, &got), 1);
  assert_int_equal(got.j, 2);
  origin_give_back(&got);
  sfx_teardown(s);
}

static void test_origin_expired_lease_dropped(void **state) {
  (void)state;
  sfx_nbr_t *a;
  sfx_t *s = gate_setup(&a);
  uint32_t a3 = G(s, "a.bin", 3), b1 = G(s, "b.bin", 1);
  uint32_t l1[] = {a3};
  uint32_t l2[] = {b1};
  swarm_rel_leases_add(s->rel, l1, 1, 1);
  swarm_rel_leases_add(s->rel, l2, 1, 60000);
  assert_int_equal(s->rel->nleases, 2);
  uv_sleep(5);
  uv_update_time(&s->fx.loop);
  got_t got;
  assert_int_equal(origin_next(s, &got), 1);
  assert_ptr_equal(got.f, sfx_file(s, "b.bin", NULL));
  assert_int_equal(got.j, 1);
  assert_int_equal(s->rel->nleases, 1); /* a3's lease is gone */
  assert_int_equal(s->rel->leases[0].chunk, b1);
  got_t none;
  assert_int_equal(origin_next(s, &none), 0);
  origin_give_back(&got);
  sfx_teardown(s);
}

static void test_origin_fallback_after_tracker_down(void **state) {
  (void)state;
  sfx_nbr_t *a;
  sfx_t *s = gate_setup(&a);
  /* a holds every chunk but b1. */
  uint32_t b1 = G(s, "b.bin", 1), held[16], n = 0;
  for (uint32_t g = 0; g < s->rel->total; g++) {
    if (g != b1)
      held[n++] = g;
  }
  sfx_holds(a, held, n);
  uint64_t now = uv_now(&s->fx.loop);
  assert_true(now > PEER_TRACKER_FALLBACK_MS);
  got_t got;
  /* Down, but not for long enough: still nothing unleased. */
  s->tracker.up = false;
  s->tracker.down_ms = now - PEER_TRACKER_FALLBACK_MS + 1;
  assert_int_equal(origin_next(s, &got), 0);
  /* Down for PEER_TRACKER_FALLBACK_MS, but the release just began and a
   * neighbour is there: the grace lets the neighbours announce it first. */
  s->tracker.down_ms = now - PEER_TRACKER_FALLBACK_MS;
  assert_int_equal(origin_next(s, &got), 0);
  /* After the grace: any chunk no neighbour has (a said nothing of the
   * release for PEER_SHARE_STALL_MS, so it shares none of the reads). */
  s->rel->fetching_ms = now - PEER_SHARE_GRACE_MS;
  assert_int_equal(origin_next(s, &got), 1);
  assert_ptr_equal(got.f, sfx_file(s, "b.bin", NULL));
  assert_int_equal(got.j, 1);
  got_t none;
  assert_int_equal(origin_next(s, &none), 0); /* the rest a has */
  origin_give_back(&got);
  /* Back up: nothing unleased again. */
  s->tracker.up = true;
  assert_int_equal(origin_next(s, &none), 0);
  /* No tracker configured at all: as after the fallback. */
  s->tracker.configured = false;
  assert_int_equal(origin_next(s, &got), 1);
  assert_int_equal(got.j, 1);
  origin_give_back(&got);
  sfx_teardown(s);
}

/* Tracker down, neighbour a fetching the same release and active: the
 * origin gets exactly the chunks we win by rendezvous hashing, none of a's
 * until a falls silent (PEER_SHARE_STALL_MS) or goes. */
static void test_origin_shared_with_neighbour(void **state) {
  (void)state;
  sfx_nbr_t *a;
  sfx_t *s = gate_setup(&a);
  sfx_holds(a, NULL, 0); /* fetching it, holds nothing yet */
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(&a->n, s->rel->digest.b);
  uint64_t now = uv_now(&s->fx.loop);
  /* Its BITFIELD came long ago, before everyone waited out the tracker:
   * the silence counts from when the fallback began, so a still shares. */
  r->active_ms = now - PEER_TRACKER_FALLBACK_MS - 1;
  a->n.share_key = peer_share_key("nbrA");
  s->tracker.up = false;
  s->tracker.down_ms = now - PEER_TRACKER_FALLBACK_MS;
  s->rel->fetching_ms = now - PEER_SHARE_GRACE_MS;
  uint32_t total = s->rel->total, mine = 0, got_n = 0;
  got_t got[64];
  assert_true(total <= 64);
  for (uint32_t g = 0; g < total; g++)
    mine += (uint32_t)peer_share_mine(s->rel->digest.b, g, s->picker.self_key,
                                      &a->n.share_key, 1);
  assert_true(mine > 0 && mine < total); /* both read some */
  while (got_n < total && origin_next(s, &got[got_n]) == 1) {
    uint32_t j;
    uint32_t g = 0;
    for (; g < total; g++) {
      if (swarm_rel_file_of(s->rel, g, &j) == got[got_n].f && j == got[got_n].j)
        break;
    }
    assert_true(g < total);
    assert_true(peer_share_mine(s->rel->digest.b, g, s->picker.self_key,
                                &a->n.share_key, 1));
    got_n++;
  }
  assert_int_equal(got_n, mine);
  /* a silent for longer than PEER_SHARE_STALL_MS since the fallback
   * began: its chunks are ours. */
  s->tracker.down_ms = now - PEER_TRACKER_FALLBACK_MS - PEER_SHARE_STALL_MS - 1;
  s->rel->fetching_ms = now - PEER_SHARE_STALL_MS - 1;
  got_t more;
  assert_int_equal(origin_next(s, &more), 1);
  origin_give_back(&more);
  for (uint32_t i = 0; i < got_n; i++)
    origin_give_back(&got[i]);
  sfx_teardown(s);
}

/* No tracker configured (a standalone node, or neighbours given with
 * --peer): nobody is waiting out a tracker, so there is no sharing of S3
 * reads and no grace. A neighbour fetching the release and active right
 * now does not hold back any chunk: the origin gets every chunk no
 * neighbour has, at once. */
static void test_origin_no_tracker_reads_all_unheld(void **state) {
  (void)state;
  sfx_nbr_t *a;
  sfx_t *s = gate_setup(&a);
  sfx_holds(a, NULL, 0);
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(&a->n, s->rel->digest.b);
  uint64_t now = uv_now(&s->fx.loop);
  r->active_ms = now;
  a->n.share_key = peer_share_key("nbrA");
  s->tracker.configured = false;
  s->rel->fetching_ms = now; /* just began */
  uint32_t total = s->rel->total, got_n = 0;
  got_t got[64];
  assert_true(total <= 64);
  while (got_n < total && origin_next(s, &got[got_n]) == 1)
    got_n++;
  assert_int_equal(got_n, total);
  for (uint32_t i = 0; i < got_n; i++)
    origin_give_back(&got[i]);
  sfx_teardown(s);
}

/* Requests in flight over all neighbours stop at PEER_REQS_MAX, though
 * each neighbour could take PEER_PIPELINE_DEPTH: six neighbours holding
 * twelve chunks get eight requests between them, not twelve or more. */
static const ffx_spec_t spec_m[] = {{"m.bin", 12 * FFX_CS, 5}};

#define CAP_NBRS 6u

static void test_requests_capped_over_all_neighbours(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec_m, 1);
  sfx_nbr_t *nb[CAP_NBRS];
  for (uint32_t i = 0; i < CAP_NBRS; i++)
    nb[i] = holder(s, i);
  assert_true(CAP_NBRS * PEER_PIPELINE_DEPTH > PEER_REQS_MAX);
  peer_picker_fill_all(&s->picker);
  uint32_t total = 0;
  for (uint32_t i = 0; i < CAP_NBRS; i++) {
    assert_true(nb[i]->n.nreqs <= PEER_PIPELINE_DEPTH);
    total += nb[i]->n.nreqs;
  }
  assert_int_equal(total, PEER_REQS_MAX);
  assert_int_equal(s->set.nreqs, PEER_REQS_MAX);
  /* One answered: one more goes out. */
  sfx_drop_all(nb[0]);
  peer_picker_fill_all(&s->picker);
  assert_int_equal(s->set.nreqs, PEER_REQS_MAX);
  sfx_teardown(s);
}

/* With PEER_REQS_MAX neighbours ready or more and chunks that take
 * PEER_DEPTH_ONE_CHUNK_MS or more at the typical rate, each pipeline holds
 * one request, so the requests go to that many neighbours; with fewer
 * neighbours, no rate measured yet, or fast chunks, two each. Fails with
 * a fixed depth (every pipeline two deep). */
static void test_one_deep_among_many(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec_m, 1);
  /* A chunk in twice the threshold, and in a tenth of it. */
  const uint64_t slow =
      (uint64_t)FFX_CS * 1000u / (2 * PEER_DEPTH_ONE_CHUNK_MS);
  const uint64_t fast =
      (uint64_t)FFX_CS * 1000u * 10u / PEER_DEPTH_ONE_CHUNK_MS;
  sfx_nbr_t *nb[PEER_REQS_MAX];
  for (uint32_t i = 0; i < PEER_REQS_MAX; i++) {
    nb[i] = holder(s, i);
    assert_int_equal(s->set.nready, i + 1);
    bool many = i + 1 == PEER_REQS_MAX;
    s->set.rx_bps = 0; /* nothing came whole yet: two */
    assert_int_equal(peer_picker_depth(&s->picker), PEER_PIPELINE_DEPTH);
    s->set.rx_bps = fast;
    assert_int_equal(peer_picker_depth(&s->picker), PEER_PIPELINE_DEPTH);
    s->set.rx_bps = slow;
    uint32_t want = many ? 1u : PEER_PIPELINE_DEPTH;
    assert_int_equal(peer_picker_depth(&s->picker), want);
    /* The one just ready gets a full pipeline at that depth. */
    peer_picker_fill(&s->picker, &nb[i]->n);
    assert_int_equal(nb[i]->n.nreqs, want);
    sfx_drop_all(nb[i]);
  }
  /* All of them at once: one request each, all the requests there are. */
  peer_picker_fill_all(&s->picker);
  for (uint32_t i = 0; i < PEER_REQS_MAX; i++)
    assert_int_equal(nb[i]->n.nreqs, 1);
  assert_int_equal(s->set.nreqs, PEER_REQS_MAX);
  sfx_teardown(s);
}

/* One deep, a neighbour whose chunk is arriving here counts as asked: a
 * request to it would wait in its queue behind that chunk while another
 * holder could start it now. It is asked again once the chunk is whole;
 * two deep, it is asked as before. Fails when an arriving chunk does not
 * count. */
static void test_one_deep_not_behind_an_arriving_chunk(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec_m, 1);
  s->set.rx_bps = (uint64_t)FFX_CS * 1000u / (2 * PEER_DEPTH_ONE_CHUNK_MS);
  sfx_nbr_t *nb[PEER_REQS_MAX];
  for (uint32_t i = 0; i < PEER_REQS_MAX; i++)
    nb[i] = holder(s, i);
  assert_int_equal(peer_picker_depth(&s->picker), 1u);
  nb[0]->n.whole.open = true;  /* a whole payload arriving from it */
  nb[1]->n.pcs[0].open = true; /* a chunk arriving from it in pieces */
  peer_picker_fill_all(&s->picker);
  assert_int_equal(nb[0]->n.nreqs, 0);
  assert_int_equal(nb[1]->n.nreqs, 0);
  for (uint32_t i = 2; i < PEER_REQS_MAX; i++)
    assert_int_equal(nb[i]->n.nreqs, 1);
  assert_int_equal(s->set.nreqs, PEER_REQS_MAX - 2);
  /* Its chunk is whole: it is asked. */
  nb[0]->n.whole.open = false;
  peer_picker_fill(&s->picker, &nb[0]->n);
  assert_int_equal(nb[0]->n.nreqs, 1);
  /* Two deep (no rate measured yet), a chunk arriving counts for nothing. */
  s->set.rx_bps = 0;
  assert_int_equal(peer_picker_depth(&s->picker), PEER_PIPELINE_DEPTH);
  sfx_drop_all(nb[2]);
  peer_picker_fill(&s->picker, &nb[1]->n);
  assert_int_equal(nb[1]->n.nreqs, PEER_PIPELINE_DEPTH);
  nb[1]->n.pcs[0].open = false;
  sfx_teardown(s);
}

/* Only neighbours in our release's swarm count towards the PEER_REQS_MAX
 * that makes pipelines one deep: with fewer of them, two requests each
 * still fill the downlink, whatever else is connected (neighbours that
 * swap other releases, or have not sent their BITFIELD yet). Fails when
 * every ready neighbour counts. */
static void test_one_deep_counts_only_our_swarm(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec_m, 1);
  s->set.rx_bps = (uint64_t)FFX_CS * 1000u / (2 * PEER_DEPTH_ONE_CHUNK_MS);
  for (uint32_t i = 0; i + 1 < PEER_REQS_MAX; i++)
    holder(s, i);
  sfx_nbr_t *other[2];
  for (uint32_t i = 0; i < 2; i++) {
    char name[8];
    snprintf(name, sizeof(name), "o%u", i);
    other[i] = sfx_neighbor(s, name, (uint16_t)(7101 + i));
  }
  assert_true(s->set.nready >= PEER_REQS_MAX);
  assert_int_equal(peer_picker_depth(&s->picker), PEER_PIPELINE_DEPTH);
  /* One of them joins our swarm: eight in it, one request each. */
  hold_all(s, other[0]);
  assert_int_equal(peer_picker_depth(&s->picker), 1u);
  sfx_teardown(s);
}

/* The announce asks the tracker to have the single-chunk files we lack
 * read from S3 first ("pf"): c.bin's chunk while we lack it, nothing once
 * we hold it; never a's or b's first chunk. Fails without
 * rel_first_report (swarm_release.c). */
static void test_announce_names_small_files_first(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  ws_announce_t a;
  memset(&a, 0, sizeof(a));
  a.total_chunks = s->rel->total;
  swarm_rels_report(&s->rels, s->rel->digest.b, &a);
  assert_int_equal(a.n_first, 1);
  assert_int_equal(a.first[0], G(s, "c.bin", 0));
  ws_bitfield_set(&s->rel->have, G(s, "c.bin", 0));
  memset(&a, 0, sizeof(a));
  a.total_chunks = s->rel->total;
  swarm_rels_report(&s->rels, s->rel->digest.b, &a);
  assert_int_equal(a.n_first, 0);
  assert_null(a.first);
  sfx_teardown(s);
}

/* A failed file's error as the tracker gets it: "file " and the file's
 * own message, which names the file (it named it twice before). */
static void test_report_names_failed_file_once(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  peer_file_t *f = sfx_file(s, "b.bin", NULL);
  peer_file_chunk_take(f, 0); /* a transfer in flight keeps it FAILED */
  peer_file_fail(f, WS_EDIGEST, "chunk 1: sha256 mismatch");
  assert_int_equal(f->state, PEER_FILE_FAILED);
  assert_ptr_equal(s->rel->files[1], f);
  ws_announce_t a;
  memset(&a, 0, sizeof(a));
  swarm_rels_report(&s->rels, s->rel->digest.b, &a);
  assert_string_equal(a.err, "file b.bin: chunk 1: sha256 mismatch");
  peer_file_chunk_done(f, 0, PEER_SRC_PEER, WS_ECANCELED, NULL);
  peer_file_unref(f); /* the transfer ends: the file may close */
  sfx_teardown(s);
}

/* A failed file that no transfer holds closes at once (CLOSING); the
 * tracker still hears its error, and a cancel is no error to show. */
static void test_report_keeps_closed_file_error(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  peer_file_t *f = sfx_file(s, "b.bin", NULL);
  peer_file_fail(f, WS_EDIGEST, "chunk 1: sha256 mismatch");
  assert_int_equal(f->state, PEER_FILE_CLOSING);
  ws_announce_t a;
  memset(&a, 0, sizeof(a));
  swarm_rels_report(&s->rels, s->rel->digest.b, &a);
  assert_string_equal(a.err, "file b.bin: chunk 1: sha256 mismatch");
  sfx_teardown(s);
  s = sfx_setup(spec, 3);
  peer_file_fail(sfx_file(s, "c.bin", NULL), WS_ECANCELED, "daemon stopping");
  memset(&a, 0, sizeof(a));
  swarm_rels_report(&s->rels, s->rel->digest.b, &a);
  assert_string_equal(a.err, "");
  sfx_teardown(s);
}

/* Stripe trees (docs/tracker.md "Stripe trees"): a stripe's chunks are
 * asked of our parent in it, and of nobody else while that parent is a
 * ready neighbour. */
static void test_tree_stripe_from_its_parent(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  sfx_nbr_t *b = sfx_neighbor(s, "nbrB", 7002);
  hold_all(s, a);
  hold_all(s, b);
  char tree[2][WS_NODE_ID_MAX + 1] = {"nbrA", "nbrB"};
  swarm_rel_set_tree(s->rel, (const char(*)[WS_NODE_ID_MAX + 1]) tree, 2,
                     uv_now(&s->fx.loop));
  uint32_t g[PEER_PIPELINE_DEPTH];
  peer_picker_fill(&s->picker, &a->n);
  uint32_t n = sfx_requests(a, g, NULL);
  /* chunks 0, 2, 4, 6 are stripe 0's */
  assert_int_equal(n, PEER_PIPELINE_DEPTH);
  for (uint32_t i = 0; i < n; i++)
    assert_int_equal(g[i] % 2, 0);
  peer_picker_fill(&s->picker, &b->n);
  n = sfx_requests(b, g, NULL);
  assert_int_equal(n, PEER_PIPELINE_DEPTH); /* 1, 3, 5: stripe 1's */
  for (uint32_t i = 0; i < n; i++)
    assert_int_equal(g[i] % 2, 1);
  sfx_teardown(s);
}

/* A parent that is not a neighbour (never reached, or gone): nothing of
 * its stripe for PEER_TREE_GRACE_MS after the trees came, then anyone's. */
static void test_tree_parent_absent_then_anyone(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 3);
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  hold_all(s, a);
  char tree[2][WS_NODE_ID_MAX + 1] = {"nbrC", "nbrC"};
  uint64_t now = uv_now(&s->fx.loop);
  swarm_rel_set_tree(s->rel, (const char(*)[WS_NODE_ID_MAX + 1]) tree, 2, now);
  uint32_t g[PEER_PIPELINE_DEPTH];
  peer_picker_fill(&s->picker, &a->n);
  assert_int_equal(sfx_requests(a, g, NULL), 0);
  s->rel->tree_ms = now - PEER_TREE_GRACE_MS; /* the grace is over */
  peer_picker_fill(&s->picker, &a->n);
  assert_int_equal(sfx_requests(a, g, NULL), PEER_PIPELINE_DEPTH);
  /* No trees any more (a reply without them): every chunk again. */
  swarm_rel_set_tree(s->rel, NULL, 0, now);
  assert_int_equal(s->rel->ntree, 0);
  sfx_teardown(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_and_first_chunks_first),
      cmocka_unit_test(test_announce_names_small_files_first),
      cmocka_unit_test(test_tier_beats_rarity),
      cmocka_unit_test(test_rarest_first),
      cmocka_unit_test(test_nothing_nobody_has),
      cmocka_unit_test(test_endgame_fresh_then_duplicates),
      cmocka_unit_test(test_endgame_duplicate_cap),
      cmocka_unit_test(test_origin_only_leased_unheld),
      cmocka_unit_test(test_origin_expired_lease_dropped),
      cmocka_unit_test(test_origin_fallback_after_tracker_down),
      cmocka_unit_test(test_origin_shared_with_neighbour),
      cmocka_unit_test(test_origin_no_tracker_reads_all_unheld),
      cmocka_unit_test(test_requests_capped_over_all_neighbours),
      cmocka_unit_test(test_one_deep_among_many),
      cmocka_unit_test(test_one_deep_counts_only_our_swarm),
      cmocka_unit_test(test_one_deep_not_behind_an_arriving_chunk),
      cmocka_unit_test(test_report_names_failed_file_once),
      cmocka_unit_test(test_report_keeps_closed_file_error),
      cmocka_unit_test(test_tree_stripe_from_its_parent),
      cmocka_unit_test(test_tree_parent_absent_then_anyone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
