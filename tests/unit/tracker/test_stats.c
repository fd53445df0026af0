/* test_stats.c - the dashboard's per-member history (trk_stats.c): what
 * it costs per member and that what it reports is what a ring of
 * TRK_STATS_SAMPLES chunk counts per member would report. Memory is read
 * as the heap in use (heap_bytes.h), so these hold for any layout.
 */
#include "trk_fixture.h"

#include "../heap_bytes.h"

#include <stdlib.h>

#define TOTAL 1024u
#define RING_BYTES (TRK_STATS_SAMPLES * sizeof(uint16_t))

typedef struct {
  trk_peers_t *reg;
  trk_swarm_t *s;
  uint32_t n;
  trk_peer_t **p;
  trk_member_t **m;
  uint64_t now;
} st_fx_t;

static void st_init(st_fx_t *fx, uint32_t n) {
  memset(fx, 0, sizeof(*fx));
  fx->reg = trk_peers_new(n);
  ws_hash_t d = fx_digest(3);
  fx->s = trk_swarm_new(&d, TOTAL, 0);
  fx->p = calloc(n, sizeof(*fx->p));
  fx->m = calloc(n, sizeof(*fx->m));
  assert_true(fx->reg != NULL && fx->s != NULL && fx->p != NULL &&
              fx->m != NULL);
  fx->n = n;
  for (uint32_t i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof(id), "node-%u", i);
    trk_peer_info_t info = {.node_id = id, .addr = "10.0.0.1", .port = 7000};
    assert_int_equal(trk_peers_add(fx->reg, &info, 0, &fx->p[i]), 0);
  }
}

static void st_free(st_fx_t *fx) {
  trk_swarm_free(fx->s);
  trk_peers_free(fx->reg);
  free(fx->p);
  free(fx->m);
}

/* Member i joins with the first `have` chunks, as an announce does. */
static void st_join(st_fx_t *fx, uint32_t i, trk_role_t role, uint32_t have) {
  uint8_t bits[TOTAL / 8u];
  memset(bits, 0, sizeof(bits));
  for (uint32_t c = 0; c < have; c++)
    bits[c / 8u] |= (uint8_t)(0x80u >> (c % 8u));
  assert_int_equal(trk_swarm_join(fx->s, fx->p[i], role, fx->now, &fx->m[i]),
                   0);
  assert_int_equal(trk_swarm_set_have(fx->s, fx->m[i], bits, sizeof(bits)), 0);
  trk_stats_touch(fx->s, fx->m[i], fx->now);
}

static void st_sample(st_fx_t *fx, uint32_t times) {
  for (uint32_t k = 0; k < times; k++) {
    fx->now += TRK_SWEEP_INTERVAL_MS;
    trk_stats_sample(fx->s, fx->now);
  }
}

/* Seeds and complete members never gain a chunk: a full window of samples
 * later they hold their record and have-bits, and no history ring. */
static void test_seeds_hold_no_ring(void **state) {
  (void)state;
  enum { NSEEDS = 256 };
  st_fx_t fx;
  st_init(&fx, NSEEDS);
  size_t before = heap_bytes();
  for (uint32_t i = 0; i < NSEEDS; i++)
    st_join(&fx, i, i % 2u == 0 ? TRK_ROLE_SEED : TRK_ROLE_LEECH, TOTAL);
  st_sample(&fx, TRK_STATS_SAMPLES + 10u);
  size_t per_member = (heap_bytes() - before) / NSEEDS;
  assert_true(per_member < RING_BYTES);
  assert_int_equal(trk_stats_rings(fx.s), 0);
  /* Their rows read as no gain in every sample since they joined. */
  uint32_t n = trk_stats_hist_count(fx.s);
  assert_int_equal(n, TRK_STATS_SAMPLES);
  for (uint32_t i = 0; i < n; i++)
    assert_true(trk_stats_hist_node_rate(fx.s, 7, i) == 0.0);
  /* The budget still keeps room for a ring per member: any of them may
   * start fetching (a seed that loses chunks, a new downloader). */
  assert_true(trk_swarm_member_bytes(fx.s) >= RING_BYTES + TOTAL / 8u);
  st_free(&fx);
}

/* A downloader gets a ring at its first gain, keeps it while a gain is in
 * the window, and gives it back once none is; the rates it reports are the
 * ring's throughout. */
static void test_ring_follows_gains(void **state) {
  (void)state;
  st_fx_t fx;
  st_init(&fx, 2);
  st_join(&fx, 0, TRK_ROLE_LEECH, 10);
  st_join(&fx, 1, TRK_ROLE_SEED, TOTAL);
  st_sample(&fx, 5);
  size_t idle = heap_bytes();
  st_sample(&fx, 5); /* no gain: nothing allocated */
  assert_true(heap_bytes() < idle + RING_BYTES / 2u);
  uint32_t row = fx.m[0]->idx;

  for (uint32_t c = 10; c < 13; c++)
    assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], c), 0);
  trk_stats_touch(fx.s, fx.m[0], fx.now + 1);
  st_sample(&fx, 1);
  assert_true(heap_bytes() >= idle + RING_BYTES);
  assert_int_equal(trk_stats_rings(fx.s), 1);
  uint32_t n = trk_stats_hist_count(fx.s);
  /* 3 chunks in one 1 s sample; the size is unknown: chunks/s. */
  assert_true(trk_stats_hist_node_rate(fx.s, row, n - 1u) == 3.0);
  assert_true(trk_stats_hist_node_rate(fx.s, row, n - 2u) == 0.0);
  assert_true(trk_stats_hist_rate(fx.s, n - 1u) == 3.0);

  /* The gain stays in the window for TRK_STATS_SAMPLES samples in all. */
  st_sample(&fx, TRK_STATS_SAMPLES - 1u);
  n = trk_stats_hist_count(fx.s);
  assert_int_equal(n, TRK_STATS_SAMPLES);
  assert_true(trk_stats_hist_node_rate(fx.s, row, 0) == 3.0);
  for (uint32_t i = 1; i < n; i++)
    assert_true(trk_stats_hist_node_rate(fx.s, row, i) == 0.0);
  assert_true(heap_bytes() >= idle + RING_BYTES);

  /* One more: the gain left the window, and so did the ring. */
  st_sample(&fx, 1);
  for (uint32_t i = 0; i < n; i++)
    assert_true(trk_stats_hist_node_rate(fx.s, row, i) == 0.0);
  assert_true(heap_bytes() < idle + RING_BYTES / 2u);
  assert_int_equal(trk_stats_rings(fx.s), 0);

  /* Gaining again brings one back, with the earlier samples at 0. */
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[0], 13), 0);
  trk_stats_touch(fx.s, fx.m[0], fx.now + 1);
  st_sample(&fx, 2);
  assert_true(heap_bytes() >= idle + RING_BYTES);
  assert_true(trk_stats_hist_node_rate(fx.s, row, n - 2u) == 1.0);
  assert_true(trk_stats_hist_node_rate(fx.s, row, n - 1u) == 0.0);
  assert_true(trk_stats_hist_node_rate(fx.s, row, 0) == 0.0);
  /* Leaving frees it (ASan and the heap count both see a leak if not). */
  trk_swarm_leave(fx.s, fx.m[0]);
  assert_true(heap_bytes() < idle + RING_BYTES / 2u);
  assert_int_equal(trk_stats_rings(fx.s), 0);
  st_free(&fx);
}

/* A member that joined during the window has no rate before it joined
 * (null in the chart), with or without a ring. */
static void test_rows_before_join(void **state) {
  (void)state;
  st_fx_t fx;
  st_init(&fx, 2);
  st_join(&fx, 0, TRK_ROLE_SEED, TOTAL);
  st_sample(&fx, 4);
  st_join(&fx, 1, TRK_ROLE_LEECH, 0);
  st_sample(&fx, 1);
  assert_int_equal(trk_swarm_add_have(fx.s, fx.m[1], 0), 0);
  trk_stats_touch(fx.s, fx.m[1], fx.now + 1);
  st_sample(&fx, 1);
  uint32_t row = fx.m[1]->idx;
  assert_int_equal(trk_stats_hist_count(fx.s), 6);
  for (uint32_t i = 0; i < 4; i++)
    assert_true(trk_stats_hist_node_rate(fx.s, row, i) < 0.0);
  assert_true(trk_stats_hist_node_rate(fx.s, row, 4) == 0.0);
  assert_true(trk_stats_hist_node_rate(fx.s, row, 5) == 1.0);
  st_free(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seeds_hold_no_ring),
      cmocka_unit_test(test_ring_follows_gains),
      cmocka_unit_test(test_rows_before_join),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
