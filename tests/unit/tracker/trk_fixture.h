/* trk_fixture.h - helpers shared by the tracker unit tests: digests, peers,
 * swarms with N members, and a full invariant check of a swarm's lease
 * state (white-box: includes trk_swarm-int.h). Header-only, test code.
 */
#ifndef TRK_FIXTURE_H
#define TRK_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "trk_swarm-int.h"
#include "trk_tracker.h"

#define FX_MAX 64

static inline ws_hash_t fx_digest(uint8_t seed) {
  ws_hash_t h;
  for (size_t i = 0; i < sizeof(h.b); i++)
    h.b[i] = (uint8_t)(seed * 31u + i);
  return h;
}

typedef struct {
  trk_peers_t *reg;
  trk_swarm_t *s;
  uint32_t n;
  trk_peer_t *peer[FX_MAX];
  trk_member_t *m[FX_MAX];
} fx_t;

/* A registry with n peers "node-<i>" (zone from zones[i] or ""), all
 * joined to one swarm of total chunks as leechers. */
/* The lease mechanics tests (expiry, renew, release, revoke) were written
 * for 8 leases per peer with 2 downloaders: they pin the origin target that
 * gives it, independent of the default policy (tested on its own). */
#define FX_MECH_TARGET 16u

static inline void fx_init(fx_t *fx, uint32_t n, uint32_t total,
                           const char *const *zones) {
  memset(fx, 0, sizeof(*fx));
  assert_true(n <= FX_MAX);
  fx->reg = trk_peers_new(0);
  assert_non_null(fx->reg);
  ws_hash_t d = fx_digest(1);
  fx->s = trk_swarm_new(&d, total, 0);
  assert_non_null(fx->s);
  fx->n = n;
  for (uint32_t i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof(id), "node-%u", i);
    trk_peer_info_t info = {.node_id = id,
                            .addr = "10.0.0.1",
                            .port = (uint16_t)(7000 + i),
                            .zone = zones != NULL ? zones[i] : ""};
    assert_int_equal(trk_peers_add(fx->reg, &info, 0, &fx->peer[i]), 0);
    assert_int_equal(
        trk_swarm_join(fx->s, fx->peer[i], TRK_ROLE_LEECH, 0, &fx->m[i]), 0);
  }
}

static inline void fx_free(fx_t *fx) {
  trk_swarm_free(fx->s);
  trk_peers_free(fx->reg);
}

/* Checks every invariant of trk_swarm-int.h from scratch. */
static inline void fx_check(const trk_swarm_t *s) {
  uint32_t need = 0, held = 0, leased = 0, complete = 0, down = 0;
  uint32_t suspect = 0;
  for (uint32_t c = 0; c < s->total; c++) {
    uint32_t a = 0, holders = 0;
    for (uint32_t i = 0; i < s->nmembers; i++) {
      const trk_member_t *m = s->members[i];
      /* avail counts the claims of counted (believed) members only. */
      a += (uint32_t)(m->counted && trk_bits_get(m->have, c));
      for (uint32_t k = 0; k < m->nleases; k++)
        if (m->leases[k].chunk == c) {
          holders++;
          assert_ptr_equal(s->holder[c], m);
          assert_false(trk_bits_get(m->have, c)); /* leases what it lacks */
        }
    }
    assert_int_equal(a, s->avail[c]);
    assert_true(holders <= 1); /* exclusivity */
    if (holders == 0)
      assert_null(s->holder[c]);
    /* A held chunk is leased only when suspect (trk_lease_grant_stuck);
     * suspect chunks are held and never vouched. */
    if (a > 0 && !trk_bits_get(s->suspect, c))
      assert_null(s->holder[c]);
    if (trk_bits_get(s->suspect, c)) {
      assert_true(a > 0);
      assert_false(trk_bits_get(s->vouched, c));
      suspect++;
    }
    int nb = a == 0 && s->holder[c] == NULL;
    assert_int_equal(nb, trk_bits_get(s->need, c));
    if (nb)
      assert_true(c >= s->need_lo);
    need += (uint32_t)nb;
    held += a > 0;
    leased += s->holder[c] != NULL;
  }
  uint32_t uncounted = 0;
  for (uint32_t i = 0; i < s->nmembers; i++) {
    const trk_member_t *m = s->members[i];
    uncounted += !m->counted;
    assert_int_equal(m->idx, i);
    complete += m->have_count == s->total;
    down += m->role == TRK_ROLE_LEECH && m->have_count < s->total;
    assert_true(m->nleases <= TRK_LEASES_PER_PEER_MAX);
  }
  /* The deadline list: exactly the leased chunks, earliest first. */
  uint32_t listed = 0, prev = TRK_LEASE_NIL;
  uint64_t last = 0;
  for (uint32_t c = s->lhead; c != TRK_LEASE_NIL; c = s->lnext[c]) {
    const trk_member_t *h = s->holder[c];
    assert_non_null(h);
    assert_int_equal(s->lprev[c], prev);
    uint64_t dl = UINT64_MAX;
    for (uint32_t k = 0; k < h->nleases; k++)
      if (h->leases[k].chunk == c)
        dl = h->leases[k].expires_ms;
    assert_true(dl != UINT64_MAX && dl >= last);
    last = dl;
    prev = c;
    listed++;
    assert_true(listed <= s->total);
  }
  assert_int_equal(s->ltail, prev);
  assert_int_equal(listed, s->leased);
  assert_int_equal(uncounted, s->uncounted);
  assert_int_equal(need, s->need_count);
  assert_int_equal(suspect, s->suspect_count);
  assert_int_equal(held, s->held_chunks);
  assert_int_equal(leased, s->leased);
  assert_int_equal(complete, s->complete);
  assert_int_equal(down, s->downloaders);
}

#endif
