/* test_origin_share.c - the rendezvous choice of a chunk's S3 reader while
 * the tracker is down (swarm/origin_share.c): every node of a set agrees on
 * exactly one winner per chunk, the chunks spread evenly, a node leaving
 * moves only the chunks it won, a node alone wins every chunk, and another
 * release is spread differently.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "swarm/origin_share.h"

#define NODES 6u
#define CHUNKS 6000u

static void keys_make(uint64_t *keys, uint32_t n) {
  char id[32];
  for (uint32_t i = 0; i < n; i++) {
    snprintf(id, sizeof(id), "node-%u", i);
    keys[i] = peer_share_key(id);
  }
}

/* The winner of g among keys[0..n) as node i sees it: i's own call with
 * the others. -1 when i does not win. */
static int wins(const uint8_t *d, uint32_t g, const uint64_t *keys, uint32_t n,
                uint32_t i) {
  uint64_t others[NODES];
  uint32_t k = 0;
  for (uint32_t o = 0; o < n; o++) {
    if (o != i)
      others[k++] = keys[o];
  }
  return peer_share_mine(d, g, keys[i], others, k);
}

static void test_one_winner_even_spread(void **state) {
  (void)state;
  uint8_t d[WS_PROTO_DIGEST_LEN];
  memset(d, 0xA5, sizeof(d));
  uint64_t keys[NODES];
  uint32_t per[NODES] = {0};
  keys_make(keys, NODES);
  for (uint32_t g = 0; g < CHUNKS; g++) {
    uint32_t nw = 0;
    for (uint32_t i = 0; i < NODES; i++) {
      if (wins(d, g, keys, NODES, i)) {
        nw++;
        per[i]++;
      }
    }
    assert_int_equal(nw, 1);
  }
  for (uint32_t i = 0; i < NODES; i++) /* 1000 each on average */
    assert_true(per[i] > 850 && per[i] < 1150);
}

static void test_leaving_moves_only_its_chunks(void **state) {
  (void)state;
  uint8_t d[WS_PROTO_DIGEST_LEN];
  memset(d, 0x3C, sizeof(d));
  uint64_t keys[NODES];
  keys_make(keys, NODES);
  for (uint32_t g = 0; g < CHUNKS; g++) {
    /* Node NODES-1 leaves: a chunk another node won stays with it. */
    for (uint32_t i = 0; i + 1 < NODES; i++) {
      if (wins(d, g, keys, NODES, i))
        assert_true(wins(d, g, keys, NODES - 1, i));
    }
  }
}

static void test_alone_wins_all(void **state) {
  (void)state;
  uint8_t d[WS_PROTO_DIGEST_LEN] = {1, 2, 3};
  uint64_t self = peer_share_key("alone");
  for (uint32_t g = 0; g < 100; g++)
    assert_true(peer_share_mine(d, g, self, NULL, 0));
  /* Deterministic: the same inputs, the same score. */
  assert_true(peer_share_score(d, 7, self) == peer_share_score(d, 7, self));
  assert_true(peer_share_key("a") != peer_share_key("b"));
}

static void test_releases_spread_differently(void **state) {
  (void)state;
  uint8_t d1[WS_PROTO_DIGEST_LEN], d2[WS_PROTO_DIGEST_LEN];
  memset(d1, 0x11, sizeof(d1));
  memset(d2, 0x22, sizeof(d2));
  uint64_t keys[NODES];
  keys_make(keys, NODES);
  uint32_t same = 0;
  for (uint32_t g = 0; g < CHUNKS; g++)
    same +=
        (uint32_t)(wins(d1, g, keys, NODES, 0) == wins(d2, g, keys, NODES, 0));
  assert_true(same < CHUNKS); /* not one fixed assignment for all */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_winner_even_spread),
      cmocka_unit_test(test_leaving_moves_only_its_chunks),
      cmocka_unit_test(test_alone_wins_all),
      cmocka_unit_test(test_releases_spread_differently),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
