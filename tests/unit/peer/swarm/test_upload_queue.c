/* test_upload_queue.c - how upload.c hands out upload slots, on a real
 * loop with real neighbours (swarm_fixture.c) and a stand-in for the
 * chunk uploads themselves (fake_upload_chunk.c: an upload streams until
 * the test ends it):
 *
 * - with every slot taken a request is refused busy at once and its
 *   sender marked as waiting (not idle);
 * - a slot that frees goes to whoever asks next: none is kept from a
 *   neighbour we upload nothing to;
 * - the neighbour whose upload just ended leaves the freed slot to one
 *   refused;
 * - a neighbour already uploaded to gets at most PEER_UPLOADS_MAX -
 *   PEER_UPLOADS_SPARE slots, the rest go to one with none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "fake_upload_chunk.h"
#include "swarm/upload.h"
#include "swarm_fixture.h"

static const ffx_spec_t spec[] = {{"a.bin", 8 * FFX_CS, 1}};

typedef struct {
  sfx_t *s;
  peer_uploads_t u;
  sfx_nbr_t *nb[SFX_NBRS_MAX];
  uint32_t req_id;
} ufx_t;

/* nbrs neighbours; we hold the first `held` chunks, the rest arrive. */
static void ufx_setup(ufx_t *f, unsigned nbrs, uint32_t held) {
  static const char *const names[SFX_NBRS_MAX] = {"a", "b", "c", "d", "e",
                                                  "f", "g", "h", "i", "j"};
  memset(f, 0, sizeof(*f));
  memset(&fake_upload_log, 0, sizeof(fake_upload_log));
  f->s = sfx_setup(spec, 1);
  for (uint32_t g = 0; g < held && g < f->s->rel->total; g++)
    ws_bitfield_set(&f->s->rel->have, g);
  peer_uploads_init(&f->u, &f->s->fx.ctx, &f->s->rels, f->s->origin);
  f->s->set.uploads = &f->u;
  for (unsigned i = 0; i < nbrs; i++)
    f->nb[i] = sfx_neighbor(f->s, names[i], 0);
}

static void ufx_teardown(ufx_t *f) {
  for (unsigned i = 0; i < SFX_NBRS_MAX; i++) {
    if (f->nb[i] != NULL)
      peer_upload_detach(&f->u, &f->nb[i]->n);
  }
  sfx_teardown(f->s);
}

/* A REQUEST for chunk g from neighbour i. */
static void ask(ufx_t *f, unsigned i, uint32_t g) {
  ws_request_t r;
  memset(&r, 0, sizeof(r));
  memcpy(r.digest, f->s->rel->digest.b, WS_PROTO_DIGEST_LEN);
  r.chunk = g;
  r.req_id = ++f->req_id;
  peer_upload_request(&f->u, &f->nb[i]->n, WS_MSG_REQUEST, &r);
}

/* Fails on the rule of session 15 (a free slot kept for the neighbour
 * refused first until it asked again): there the slot that freed stayed
 * idle and the next request was refused too. */
static void test_free_slot_goes_to_whoever_asks(void **state) {
  (void)state;
  ufx_t f;
  ufx_setup(&f, PEER_UPLOADS_MAX + 2, 8);
  for (unsigned i = 0; i < PEER_UPLOADS_MAX; i++)
    ask(&f, i, i);
  assert_int_equal(f.u.uploads, PEER_UPLOADS_MAX);
  assert_int_equal(fake_upload_log.rejects, 0);
  /* Every slot taken: e is refused busy at once and waits. */
  peer_neighbor_t *e = &f.nb[PEER_UPLOADS_MAX]->n;
  peer_neighbor_t *x = &f.nb[PEER_UPLOADS_MAX + 1]->n;
  ask(&f, PEER_UPLOADS_MAX, 6);
  assert_int_equal(fake_upload_log.rejects, 1);
  assert_ptr_equal(fake_upload_log.last_reject_to, e);
  assert_int_equal(fake_upload_log.last_reject_why, WS_REJECT_BUSY);
  assert_int_equal(e->sq_len, 0);
  assert_true(e->waiting);
  /* A slot frees; e is off asking others. x asks: it gets it. */
  fake_upload_end(&f.u, &f.nb[0]->n);
  assert_int_equal(f.u.uploads, PEER_UPLOADS_MAX - 1);
  ask(&f, PEER_UPLOADS_MAX + 1, 7);
  assert_int_equal(fake_upload_log.rejects, 1);
  assert_int_equal(x->nups, 1);
  assert_int_equal(f.u.uploads, PEER_UPLOADS_MAX);
  /* e back while every slot is taken: refused again. */
  ask(&f, PEER_UPLOADS_MAX, 6);
  assert_int_equal(fake_upload_log.rejects, 2);
  /* Its turn comes with the next free slot; then it waits no more. */
  fake_upload_end(&f.u, &f.nb[1]->n);
  ask(&f, PEER_UPLOADS_MAX, 6);
  assert_int_equal(e->nups, 1);
  assert_false(e->waiting);
  ufx_teardown(&f);
}

/* One neighbour "mux" with chunks arriving: beside its held chunk it takes
 * slots up to PEER_UPLOADS_MAX - PEER_UPLOADS_SPARE, its next request
 * waits in its queue, and the spare ones go to neighbours with none. */
static void test_spare_slot_for_one_with_none(void **state) {
  (void)state;
  ufx_t f;
  const unsigned last = 1 + PEER_UPLOADS_SPARE;
  ufx_setup(&f, last + 1, 2); /* chunks 0, 1 held; 2.. arriving */
  fake_upload_log.mux = true;
  peer_neighbor_t *a = &f.nb[0]->n;
  ask(&f, 0, 0);
  for (uint32_t g = 2; g < 2 + PEER_UPLOADS_MAX; g++)
    ask(&f, 0, g);
  assert_int_equal(a->nups, PEER_UPLOADS_MAX - PEER_UPLOADS_SPARE);
  assert_int_equal(a->sq_len, 1 + PEER_UPLOADS_SPARE);
  assert_int_equal(fake_upload_log.rejects, 0);
  /* Each spare slot goes to a neighbour holding none. */
  for (unsigned i = 1; i < last; i++) {
    ask(&f, i, 1);
    assert_int_equal(f.nb[i]->n.nups, 1);
  }
  assert_int_equal(f.u.uploads, PEER_UPLOADS_MAX);
  /* Now every slot is taken: the next is refused. */
  ask(&f, last, 1);
  assert_int_equal(fake_upload_log.rejects, 1);
  assert_ptr_equal(fake_upload_log.last_reject_to, &f.nb[last]->n);
  ufx_teardown(&f);
}

/* The neighbour whose upload just ended keeps the freed slot for its next
 * queued chunk while its turn lasts (PEER_UPLOAD_TURN_MS), even with
 * another one refused: the stream on its connection goes on (before
 * session 23 its queue was refused after every chunk). Once its turn is
 * over it leaves the slot to the refused one: before session 17 its queue
 * ran first and took the slot straight back, and the refused one could
 * wait for ever. Fails without the turn, and without the yield, in
 * upload.c. */
static void test_just_served_leave_the_slot_to_the_refused(void **state) {
  (void)state;
  ufx_t f;
  ufx_setup(&f, PEER_UPLOADS_MAX + 1, 8);
  peer_neighbor_t *a = &f.nb[0]->n, *e = &f.nb[PEER_UPLOADS_MAX]->n;
  for (unsigned i = 0; i < PEER_UPLOADS_MAX; i++)
    ask(&f, i, i);
  /* Nobody refused: a's next takes the slot its last upload freed. */
  ask(&f, 0, 5);
  assert_int_equal(a->sq_len, 1);
  fake_upload_end(&f.u, a);
  assert_int_equal(a->nups, 1);
  assert_int_equal(a->sq_len, 0);
  assert_int_equal(fake_upload_log.rejects, 0);
  /* e refused: within a's turn, a's next still takes the slot. */
  ask(&f, 0, 7);
  ask(&f, PEER_UPLOADS_MAX, 6);
  assert_int_equal(fake_upload_log.rejects, 1);
  assert_ptr_equal(fake_upload_log.last_reject_to, e);
  fake_upload_end(&f.u, a);
  assert_int_equal(a->nups, 1);
  assert_int_equal(a->sq_len, 0);
  assert_int_equal(fake_upload_log.rejects, 1);
  /* Its turn over: when a's upload ends, its next is refused busy and
   * the slot stays free for e. */
  ask(&f, 0, 4);
  ask(&f, PEER_UPLOADS_MAX, 6);
  assert_int_equal(fake_upload_log.rejects, 2);
  a->turn_ms = uv_now(a->set->ctx->loop) - PEER_UPLOAD_TURN_MS;
  fake_upload_end(&f.u, a);
  assert_int_equal(a->nups, 0);
  assert_int_equal(a->sq_len, 0);
  assert_int_equal(fake_upload_log.rejects, 3);
  assert_ptr_equal(fake_upload_log.last_reject_to, a);
  assert_int_equal(f.u.uploads, PEER_UPLOADS_MAX - 1);
  ask(&f, PEER_UPLOADS_MAX, 6);
  assert_int_equal(e->nups, 1);
  assert_false(e->waiting);
  ufx_teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_free_slot_goes_to_whoever_asks),
      cmocka_unit_test(test_spare_slot_for_one_with_none),
      cmocka_unit_test(test_just_served_leave_the_slot_to_the_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
