/* test_dialq.c - the dial queue (swarm/dialq.c) on a real loop, with the
 * neighbours it dials made real authenticated wire_conn pairs over
 * loopback TCP (swarm_fixture.c):
 *
 * - the tracker's order is kept, the latest list first; ourselves and
 *   portless nodes are skipped; a full queue drops the one named longest
 *   ago; a candidate not named within PEER_DIALQ_TTL_MS is dropped;
 * - a run dials while the node has room to dial (its dial share), never a
 *   known or banned node;
 * - a dial refused in its handshake is replaced at the next run (the
 *   swarm's tick) by the next candidate, without waiting for the next
 *   PEERS; the refusing node is dialed again only after
 *   PEER_DIALQ_REDIAL_MS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/tunables.h"
#include "swarm/dialq.h"
#include "swarm_fixture.h"

static const ffx_spec_t spec[] = {{"a.bin", 4 * FFX_CS, 1}};

typedef struct {
  sfx_t *s;
  char dialed[16][WS_NODE_ID_MAX + 1];
  uint32_t n;
} dials_t;

/* The swarm's dial, with the handshake done at once: a fixture neighbour
 * this node dialed. */
static int test_dial(void *arg, const char *host, uint16_t port,
                     const char *node_id) {
  dials_t *d = arg;
  (void)port;
  assert_string_equal(host, "127.0.0.1");
  assert_true(d->n < 16);
  snprintf(d->dialed[d->n++], WS_NODE_ID_MAX + 1, "%s", node_id);
  sfx_nbr_t *nb = sfx_neighbor(d->s, node_id, 0);
  nb->n.initiator = true;
  return 0;
}

static void cands(ws_peer_info_t *p, const char *const *names, uint32_t n) {
  memset(p, 0, n * sizeof(*p));
  for (uint32_t i = 0; i < n; i++) {
    snprintf(p[i].node_id, sizeof(p[i].node_id), "%s", names[i]);
    snprintf(p[i].host, sizeof(p[i].host), "127.0.0.1");
    p[i].port = (uint16_t)(7100 + i);
  }
}

static sfx_nbr_t *nbr_named(sfx_t *s, const char *name) {
  for (unsigned i = 0; i < s->nnbrs; i++) {
    if (strcmp(s->nbrs[i].n.node_id, name) == 0)
      return &s->nbrs[i];
  }
  fail_msg("no neighbour %s", name);
  return NULL;
}

static void test_order_bounds_expiry(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 1);
  dials_t d = {.s = s};
  peer_dialq_t q;
  peer_dialq_init(&q, &s->fx.ctx, &s->set, &s->bans, test_dial, &d);
  ws_peer_info_t p[4];
  static const char *const l1[] = {"x", "us", "y"};
  cands(p, l1, 3);
  p[2].port = 0; /* portless y */
  peer_dialq_offer(&q, p, 3, 1000);
  assert_int_equal(q.n, 1);
  assert_string_equal(q.e[0].node_id, "x");
  static const char *const l2[] = {"z", "x"};
  cands(p, l2, 2);
  p[1].port = 7100; /* x at the port it had */
  peer_dialq_offer(&q, p, 2, 2000);
  assert_int_equal(q.n, 2);
  assert_string_equal(q.e[0].node_id, "z");
  assert_string_equal(q.e[1].node_id, "x");
  /* Full: the one named longest ago goes. */
  ws_peer_info_t many[PEER_DIALQ_MAX];
  memset(many, 0, sizeof(many));
  for (uint32_t i = 0; i < PEER_DIALQ_MAX - 1; i++) {
    snprintf(many[i].node_id, sizeof(many[i].node_id), "m%u", i);
    snprintf(many[i].host, sizeof(many[i].host), "127.0.0.1");
    many[i].port = (uint16_t)(8000 + i);
  }
  peer_dialq_offer(&q, many, PEER_DIALQ_MAX - 1, 3000);
  assert_int_equal(q.n, PEER_DIALQ_MAX);
  assert_string_equal(q.e[0].node_id, "m0");
  assert_string_equal(q.e[PEER_DIALQ_MAX - 1].node_id, "z");
  /* x, named at 2000, is gone; z, named with it, expires first. */
  peer_dialq_offer(&q, p + 1, 1, 3000 + PEER_DIALQ_TTL_MS);
  assert_int_equal(q.n, PEER_DIALQ_MAX);
  assert_string_equal(q.e[0].node_id, "x");
  peer_dialq_offer(&q, p + 1, 1, 3001 + PEER_DIALQ_TTL_MS);
  assert_int_equal(q.n, 1);
  assert_int_equal(d.n, 0); /* offering dials nothing */
  sfx_teardown(s);
}

static void test_refused_dial_replaced(void **state) {
  (void)state;
  sfx_t *s = sfx_setup(spec, 1);
  dials_t d = {.s = s};
  peer_dialq_t q;
  /* Room to dial PEER_NBR_DIALED_MIN of the slots. */
  s->fx.cfg.max_neighbors = PEER_NBR_DIAL_SHARE * PEER_NBR_DIALED_MIN;
  peer_dialq_init(&q, &s->fx.ctx, &s->set, &s->bans, test_dial, &d);
  static const char *const names[] = {"c0", "c1", "c2", "c3", "c4", "c5"};
  ws_peer_info_t p[6];
  cands(p, names, 6);
  uint64_t now = uv_now(&s->fx.loop);
  peer_dialq_offer(&q, p, 6, now);
  assert_int_equal(peer_dialq_run(&q, now), PEER_NBR_DIALED_MIN);
  assert_int_equal(d.n, PEER_NBR_DIALED_MIN);
  for (uint32_t i = 0; i < PEER_NBR_DIALED_MIN; i++)
    assert_string_equal(d.dialed[i], names[i]);
  /* No room: nothing more. */
  assert_int_equal(peer_dialq_run(&q, now + 1), 0);
  /* c1 refuses in its handshake (gone from the set, as on close): the
   * next run dials the next candidate, not c1 again. */
  sfx_nbr_t *c1 = nbr_named(s, "c1");
  c1->n.state = PEER_NEIGHBOR_CLOSING;
  snprintf(c1->n.node_id, sizeof(c1->n.node_id), "gone");
  snprintf(c1->n.expect, sizeof(c1->n.expect), "gone");
  assert_int_equal(peer_dialq_run(&q, now + 2), 1);
  assert_string_equal(d.dialed[PEER_NBR_DIALED_MIN], "c4");
  /* c4 refuses too; c5 is banned: c1 waits for PEER_DIALQ_REDIAL_MS. */
  sfx_nbr_t *c4 = nbr_named(s, "c4");
  c4->n.state = PEER_NEIGHBOR_CLOSING;
  snprintf(c4->n.node_id, sizeof(c4->n.node_id), "gone4");
  snprintf(c4->n.expect, sizeof(c4->n.expect), "gone4");
  assert_int_equal(peer_bans_add(&s->bans, now, "c5", "127.0.0.1", 7105), 0);
  assert_int_equal(peer_dialq_run(&q, now + 3), 0);
  assert_int_equal(peer_dialq_run(&q, now + PEER_DIALQ_REDIAL_MS + 1), 1);
  assert_string_equal(d.dialed[PEER_NBR_DIALED_MIN + 1], "c1");
  sfx_teardown(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_bounds_expiry),
      cmocka_unit_test(test_refused_dial_replaced),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
