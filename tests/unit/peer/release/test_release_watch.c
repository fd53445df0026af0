/* test_release_watch.c - the release table standalone (no swarm, no
 * store) on a real libuv loop: watches settle on the state changes they
 * name, time out on the loop's timer, are canceled by unwatch and by the
 * table's stop, follow a legacy URI merged into another release, and are
 * bounded per release; prefetch refuses bad requests with a code and a
 * reason, and joins a release already there; releases found in the cache
 * and seed imports join READY (a seed import of a known release only pins
 * it). Every test ends with uv_loop_close == 0 (the watches' timers are
 * closed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "release/release-int.h"

typedef struct {
  uv_loop_t loop;
  peer_settings_t cfg;
  peer_ctx_t ctx;
  peer_releases_t *t;
} fx_t;

typedef struct {
  int calls;
  int err;
  peer_release_t *rel;
  peer_release_state_t state;
} seen_t;

static void on_settle(void *arg, peer_release_t *rel, int err) {
  seen_t *s = arg;
  s->calls++;
  s->err = err;
  s->rel = rel;
  s->state = peer_release_state(rel);
}

static int fx_setup(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  fx->ctx.loop = &fx->loop;
  fx->ctx.cfg = &fx->cfg;
  peer_workq_init(&fx->ctx.workq, &fx->loop);
  assert_int_equal(peer_releases_new(&fx->ctx, NULL, NULL, &fx->t), 0);
  *state = fx;
  return 0;
}

static int fx_teardown(void **state) {
  fx_t *fx = *state;
  /* Terminal releases only: the table frees them. */
  for (peer_release_t *r = fx->t->head, *next; r != NULL; r = next) {
    next = r->next; /* a legacy URI's release leaves the list on failure */
    if (!peer_rel_terminal(r->state))
      peer_rel_fail(r, WS_ECANCELED, "test over");
  }
  peer_releases_free(fx->t);
  assert_int_equal(uv_run(&fx->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
  free(fx);
  return 0;
}

static peer_release_t *rel_with_digest(fx_t *fx, uint8_t seed) {
  ws_hash_t h;
  memset(h.b, seed, sizeof(h.b));
  peer_release_t *rel = peer_rel_new(fx->t, PEER_REL_RESOLVING);
  assert_non_null(rel);
  peer_rel_set_digest(rel, &h);
  return rel;
}

static void test_resolved_settles_at_fetching(void **state) {
  fx_t *fx = *state;
  seen_t s = {0};
  peer_release_watch_t *w;
  peer_release_t *rel = rel_with_digest(fx, 1);
  assert_false(peer_release_settled(rel, PEER_REL_WATCH_RESOLVED));
  assert_int_equal(
      peer_release_watch(rel, PEER_REL_WATCH_RESOLVED, 0, on_settle, &s, &w),
      0);
  peer_rel_set_state(rel, PEER_REL_BEGINNING);
  peer_rel_watches_settle(rel);
  assert_int_equal(s.calls, 0);
  peer_rel_set_state(rel, PEER_REL_FETCHING);
  peer_rel_watches_settle(rel);
  assert_int_equal(s.calls, 1);
  assert_int_equal(s.err, 0);
  assert_ptr_equal(s.rel, rel);
  assert_int_equal(s.state, PEER_REL_FETCHING);
  assert_true(peer_release_settled(rel, PEER_REL_WATCH_RESOLVED));
  assert_false(peer_release_settled(rel, PEER_REL_WATCH_READY));
  assert_int_equal(peer_releases_active(fx->t), 1);
}

static void test_ready_settles_on_failure(void **state) {
  fx_t *fx = *state;
  seen_t s = {0};
  const char *msg;
  peer_release_watch_t *w;
  peer_release_t *rel = rel_with_digest(fx, 2);
  assert_int_equal(
      peer_release_watch(rel, PEER_REL_WATCH_READY, 0, on_settle, &s, &w), 0);
  peer_rel_set_state(rel, PEER_REL_BEGINNING);
  peer_rel_set_state(rel, PEER_REL_FETCHING);
  peer_rel_watches_settle(rel);
  assert_int_equal(s.calls, 0);
  peer_rel_fail(rel, WS_EDIGEST, "bad chunk");
  assert_int_equal(s.calls, 1);
  assert_int_equal(s.err, 0);
  assert_int_equal(s.state, PEER_REL_FAILED);
  assert_int_equal(peer_release_error(rel, &msg), WS_EDIGEST);
  assert_string_equal(msg, "bad chunk");
  assert_int_equal(peer_releases_active(fx->t), 0);
}

static void test_timeout(void **state) {
  fx_t *fx = *state;
  seen_t s = {0};
  peer_release_watch_t *w;
  peer_release_t *rel = rel_with_digest(fx, 3);
  uint64_t t0 = uv_now(&fx->loop);
  assert_int_equal(
      peer_release_watch(rel, PEER_REL_WATCH_READY, 30, on_settle, &s, &w), 0);
  uv_run(&fx->loop, UV_RUN_DEFAULT); /* the timer, then its close */
  assert_int_equal(s.calls, 1);
  assert_int_equal(s.err, WS_ETIMEOUT);
  assert_int_equal(s.state, PEER_REL_RESOLVING);
  assert_true(uv_now(&fx->loop) - t0 >= 30);
  assert_null(rel->watches);
  assert_int_equal(rel->nwatches, 0);
}

static void test_unwatch(void **state) {
  fx_t *fx = *state;
  seen_t s = {0};
  peer_release_watch_t *w;
  peer_release_t *rel = rel_with_digest(fx, 4);
  assert_int_equal(
      peer_release_watch(rel, PEER_REL_WATCH_READY, 10, on_settle, &s, &w), 0);
  peer_release_unwatch(w);
  uv_run(&fx->loop, UV_RUN_DEFAULT);
  peer_rel_fail(rel, WS_ECANCELED, NULL);
  assert_int_equal(s.calls, 0);
}

static void test_stop_cancels(void **state) {
  fx_t *fx = *state;
  seen_t a = {0}, b = {0};
  peer_release_watch_t *w;
  peer_release_t *r1 = rel_with_digest(fx, 5);
  peer_release_t *r2 = rel_with_digest(fx, 6);
  assert_int_equal(
      peer_release_watch(r1, PEER_REL_WATCH_RESOLVED, 0, on_settle, &a, &w), 0);
  assert_int_equal(
      peer_release_watch(r2, PEER_REL_WATCH_READY, 60000, on_settle, &b, &w),
      0);
  peer_releases_stop(fx->t);
  assert_int_equal(a.calls, 1);
  assert_int_equal(a.err, WS_ECANCELED);
  assert_int_equal(b.calls, 1);
  assert_int_equal(b.err, WS_ECANCELED);
  uv_run(&fx->loop, UV_RUN_DEFAULT); /* no timer left running */
}

static void test_move_to_other(void **state) {
  fx_t *fx = *state;
  seen_t s = {0}, r = {0};
  peer_release_watch_t *w;
  peer_release_t *legacy = peer_rel_new(fx->t, PEER_REL_RESOLVING);
  peer_release_t *other = rel_with_digest(fx, 7);
  peer_rel_set_state(other, PEER_REL_BEGINNING);
  peer_rel_set_state(other, PEER_REL_FETCHING);
  assert_int_equal(
      peer_release_watch(legacy, PEER_REL_WATCH_RESOLVED, 0, on_settle, &s, &w),
      0);
  assert_int_equal(
      peer_release_watch(legacy, PEER_REL_WATCH_READY, 0, on_settle, &r, &w),
      0);
  peer_rel_watches_move(legacy, other);
  assert_int_equal(s.calls, 1);
  assert_ptr_equal(s.rel, other);
  assert_int_equal(r.calls, 0);
  assert_int_equal(other->nwatches, 1);
  assert_int_equal(legacy->nwatches, 0);
  peer_rel_fail(legacy, WS_ECANCELED, "merged"); /* digest unknown: removed */
  assert_null(peer_release_next(other));
  peer_rel_fail(other, WS_EMANIFEST, NULL);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.state, PEER_REL_FAILED);
}

static void test_watch_limit(void **state) {
  fx_t *fx = *state;
  seen_t s = {0};
  peer_release_watch_t *w;
  peer_release_t *rel = rel_with_digest(fx, 8);
  for (unsigned i = 0; i < PEER_WAITERS_PER_RELEASE_MAX; i++)
    assert_int_equal(
        peer_release_watch(rel, PEER_REL_WATCH_READY, 0, on_settle, &s, &w), 0);
  assert_int_equal(
      peer_release_watch(rel, PEER_REL_WATCH_READY, 0, on_settle, &s, &w),
      WS_ELIMIT);
  peer_rel_fail(rel, WS_ECANCELED, NULL);
  assert_int_equal(s.calls, PEER_WAITERS_PER_RELEASE_MAX);
}

static void test_prefetch_refusals(void **state) {
  fx_t *fx = *state;
  peer_release_t *rel = (peer_release_t *)1;
  const char *why = NULL;
  ws_hash_t h, other;
  memset(h.b, 9, sizeof(h.b));
  memset(other.b, 10, sizeof(other.b));
  assert_int_equal(peer_release_prefetch(fx->t, "http://x/", NULL, &rel, &why),
                   WS_EUSAGE);
  assert_string_equal(why, "uri must be s3://bucket/prefix/");
  assert_null(rel);
  char uri[128], ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&h, ds);
  snprintf(uri, sizeof(uri), "s3://bucket/models/%s/", ds);
  assert_int_equal(peer_release_prefetch(fx->t, uri, &other, &rel, &why),
                   WS_EDIGEST);
  assert_non_null(why);
  assert_int_equal(peer_release_prefetch(fx->t, NULL, &h, &rel, &why),
                   WS_ENOTFOUND);
  assert_string_equal(why, "unknown digest; give the release's uri");
  fx->t->active = PEER_ACTIVE_RELEASES_MAX;
  assert_int_equal(peer_release_prefetch(fx->t, uri, NULL, &rel, &why),
                   WS_EBUSY);
  assert_string_equal(why, "too many releases being fetched");
  fx->t->active = 0;
  assert_null(fx->t->head); /* nothing was started */
}

static void test_prefetch_joins(void **state) {
  fx_t *fx = *state;
  peer_release_t *got = NULL;
  const char *why = NULL;
  peer_release_t *rel = rel_with_digest(fx, 11);
  char uri[128];
  snprintf(uri, sizeof(uri), "s3://bucket/m/%s", rel->digest_str);
  unsigned refs = rel->refs;
  assert_int_equal(peer_release_prefetch(fx->t, uri, NULL, &got, &why), 0);
  assert_ptr_equal(got, rel);
  assert_int_equal(rel->refs, refs + 1);
  peer_release_unref(got);
  assert_int_equal(peer_release_prefetch(fx->t, NULL, &rel->digest, &got, &why),
                   0);
  assert_ptr_equal(got, rel);
  peer_release_unref(got);
  assert_int_equal(rel->refs, refs);
}

static void test_failed_without_uri(void **state) {
  fx_t *fx = *state;
  peer_release_t *got = NULL;
  const char *why = NULL;
  peer_release_t *rel = rel_with_digest(fx, 12);
  peer_rel_fail(rel, WS_EMANIFEST, NULL);
  assert_int_equal(peer_release_prefetch(fx->t, NULL, &rel->digest, &got, &why),
                   WS_ENOTFOUND);
  assert_string_equal(why, "failed release has no uri; give it");
  assert_null(got);
}

static void test_want_ignored_when_not_running(void **state) {
  fx_t *fx = *state;
  ws_hash_t h;
  memset(h.b, 13, sizeof(h.b));
  fx->ctx.running = 0;
  peer_releases_want(fx->t, "s3://bucket/x/", &h);
  assert_null(peer_releases_first(fx->t));
}

static void test_ready_and_seeded(void **state) {
  fx_t *fx = *state;
  ws_manifest_t m;
  peer_release_t *rel = NULL;
  memset(&m, 0, sizeof(m));
  memset(m.digest.b, 14, sizeof(m.digest.b));
  m.nfiles = 2;
  m.total_size = 1000;
  m.total_chunks = 3;
  assert_int_equal(peer_releases_add_ready(fx->t, &m, 0, 1234), 0);
  rel = peer_release_find(fx->t, &m.digest);
  assert_non_null(rel);
  assert_int_equal(peer_release_state(rel), PEER_REL_READY);
  assert_true(peer_release_settled(rel, PEER_REL_WATCH_READY));
  assert_true(peer_release_settled(rel, PEER_REL_WATCH_RESOLVED));
  assert_false(peer_release_pinned(rel));
  assert_int_equal(peer_releases_active(fx->t), 0);
  peer_release_t *seeded = NULL;
  assert_int_equal(peer_releases_seeded(fx->t, &m, &seeded), 0);
  assert_ptr_equal(seeded, rel); /* known: only pinned */
  assert_true(peer_release_pinned(rel));
  memset(m.digest.b, 15, sizeof(m.digest.b));
  assert_int_equal(peer_releases_seeded(fx->t, &m, &seeded), 0);
  assert_ptr_not_equal(seeded, rel);
  assert_true(peer_release_pinned(seeded));
  assert_ptr_equal(peer_releases_first(fx->t), seeded); /* newest first */
  ws_hash_t first;
  memset(first.b, 14, sizeof(first.b));
  peer_release_remove(rel); /* evicted */
  assert_null(peer_release_find(fx->t, &first));
  assert_null(peer_release_next(seeded));
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
  const struct CMUnitTest tests[] = {
      T(test_resolved_settles_at_fetching),
      T(test_ready_settles_on_failure),
      T(test_timeout),
      T(test_unwatch),
      T(test_stop_cancels),
      T(test_move_to_other),
      T(test_watch_limit),
      T(test_prefetch_refusals),
      T(test_prefetch_joins),
      T(test_failed_without_uri),
      T(test_want_ignored_when_not_running),
      T(test_ready_and_seeded),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
