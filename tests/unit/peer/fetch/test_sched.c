/* test_sched.c - the files table and the one scheduler (fetch/file.c,
 * fetch/sched.c) on a real loop against a real store: small files and
 * first chunks first, then the rest in order; a chunk that failed is
 * fetched again first; too many hash failures fail the file; the origin
 * gate decides in swarm mode; a file that completes or fails tells its
 * listeners, then its waiters; a file nobody waits for stops; a partial
 * resumes with the chunks it has.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "fetch_fixture.h"
#include "store.h"

/* a: 3 chunks, b: one small chunk, c: 2 chunks (the last short). */
static const ffx_spec_t spec[] = {
    {"a.bin", 3 * FFX_CS, 1}, {"b.bin", 1000, 2}, {"c.bin", FFX_CS + 4096, 3}};

typedef struct {
  peer_file_t *f;
  uint32_t j;
} pick_t;

static int pick(ffx_t *fx, peer_source_t src, pick_t *p) {
  return peer_sched_next(fx->files, src, &p->f, &p->j);
}

static void give_back(pick_t *p, int status) {
  peer_file_chunk_done(p->f, p->j, PEER_SRC_ORIGIN, status, "test");
  peer_file_unref(p->f);
}

static void test_small_then_first_chunks_then_rest(void **state) {
  (void)state;
  ffx_t fx;
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 3, 0);
  peer_file_t *a = ffx_open(&fx, 0), *b = ffx_open(&fx, 1);
  peer_file_t *c = ffx_open(&fx, 2);
  const struct {
    peer_file_t *f;
    uint32_t j;
  } want[] = {{b, 0}, {a, 0}, {c, 0}, {a, 1}, {a, 2}, {c, 1}};
  pick_t got[6];
  for (int i = 0; i < 6; i++) {
    assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &got[i]), 1);
    assert_ptr_equal(got[i].f, want[i].f);
    assert_int_equal(got[i].j, want[i].j);
    assert_int_equal(got[i].f->chunk_state[got[i].j], PEER_CHUNK_INFLIGHT);
  }
  pick_t none;
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &none), 0);
  assert_int_equal(a->chunks_inflight, 3);
  for (int i = 0; i < 6; i++)
    give_back(&got[i], WS_ECANCELED);
  assert_int_equal(a->chunks_inflight, 0);
  ffx_teardown(&fx);
}

static void test_failed_chunk_comes_first_again(void **state) {
  (void)state;
  ffx_t fx;
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 1, 0);
  ffx_open(&fx, 0);
  pick_t p[3], again;
  for (int i = 0; i < 3; i++)
    assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p[i]), 1);
  give_back(&p[1], WS_EDIGEST);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &again), 1);
  assert_int_equal(again.j, 1);
  assert_int_equal(again.f->chunk_tries[1], 1);
  assert_int_equal(fx.ctx.counters.chunks_failed, 1);
  /* A canceled chunk comes back too, and counts nothing. */
  give_back(&again, WS_ECANCELED);
  give_back(&p[0], WS_ECANCELED);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p[0]), 1);
  assert_int_equal(p[0].j, 0);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p[1]), 1);
  assert_int_equal(p[1].j, 1);
  assert_int_equal(p[1].f->chunk_tries[1], 1);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &again), 0);
  for (int i = 0; i < 3; i++)
    give_back(&p[i], WS_ECANCELED);
  ffx_teardown(&fx);
}

static void test_too_many_hash_failures_fail_file(void **state) {
  (void)state;
  ffx_t fx;
  char want[128];
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 2, 0);
  ffx_open(&fx, 1); /* b.bin, one chunk */
  fx.log[0] = '\0';
  for (unsigned i = 0; i <= PEER_CHUNK_RETRIES_MAX; i++) {
    pick_t p;
    assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p), 1);
    assert_string_equal(p.f->mf.name, "b.bin");
    give_back(&p, WS_EDIGEST);
  }
  snprintf(want, sizeof(want), "failed:b.bin wait:b.bin:%d", WS_EDIGEST);
  assert_string_equal(fx.log, want);
  assert_null(peer_file_find(fx.files, &fx.m->files[1].sha256));
  ffx_teardown(&fx);
}

typedef struct {
  ffx_t *fx;
  peer_file_t *file;
  uint32_t j;
  int calls;
  int give; /* hand out file/j */
} gate_t;

static int gate_fn(void *arg, peer_file_t **file, uint32_t *j) {
  gate_t *g = arg;
  g->calls++;
  if (!g->give)
    return 0;
  g->give = 0;
  peer_file_chunk_take(g->file, g->j);
  *file = g->file;
  *j = g->j;
  return 1;
}

static void test_origin_gate_in_swarm_mode(void **state) {
  (void)state;
  ffx_t fx;
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 1, 0);
  peer_file_t *a = ffx_open(&fx, 0);
  gate_t g = {&fx, a, 2, 0, 1};
  pick_t p, q;
  peer_files_set_origin_gate(fx.files, gate_fn, &g);
  /* The origin gets the leased chunk (2), not the scheduler's first (0). */
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p), 1);
  assert_ptr_equal(p.f, a);
  assert_int_equal(p.j, 2);
  assert_int_equal(g.calls, 1);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &q), 0);
  assert_int_equal(g.calls, 2);
  /* Peers are fed by the swarm's picker, never by the scheduler. */
  assert_int_equal(pick(&fx, PEER_SRC_PEER, &q), 0);
  assert_int_equal(g.calls, 2);
  /* Without the gate: standalone again. */
  peer_files_set_origin_gate(fx.files, NULL, NULL);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &q), 1);
  assert_int_equal(q.j, 0);
  give_back(&q, WS_ECANCELED);
  give_back(&p, WS_ECANCELED);
  ffx_teardown(&fx);
}

typedef struct {
  ffx_t *fx;
  uint32_t i, j;
  int rc;
} write_job_t;

/* [worker] Writes and commits chunk j of file i straight into the store. */
static void write_chunk_work(void *arg) {
  write_job_t *w = arg;
  ws_store_file_t *pf;
  const ws_mfile_t *mf = &w->fx->m->files[w->i];
  w->rc = ws_store_file_open(w->fx->ctx.store, mf, FFX_CS, &pf);
  if (w->rc != 0)
    return;
  uint64_t off = (uint64_t)w->j * FFX_CS;
  size_t len = mf->size - off < FFX_CS ? mf->size - off : FFX_CS;
  w->rc = ws_store_chunk_write(pf, w->j, w->fx->data[w->i] + off, len);
  if (w->rc == 0 && ws_store_file_done_count(pf) == mf->nchunks)
    w->rc = ws_store_file_finish(pf);
  ws_store_file_close(pf);
}

/* [worker] Through the open file's own handle (one handle per file). */
static void commit_chunk_work(void *arg) {
  write_job_t *w = arg;
  peer_file_t *f = peer_file_find(w->fx->files, &w->fx->m->files[w->i].sha256);
  uint64_t off = (uint64_t)w->j * FFX_CS;
  w->rc = ws_store_chunk_write(f->pf, w->j, w->fx->data[w->i] + off,
                               peer_file_chunk_len(f, w->j));
}

static void second_waiter(void *arg, peer_file_t *file, int err,
                          const char *msg) {
  (void)msg;
  ffx_log(arg, "wait2:%s:%d", file->mf.name, err);
}

static void test_complete_tells_listeners_then_waiters(void **state) {
  (void)state;
  ffx_t fx;
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 3, 0);
  peer_file_t *c = ffx_open(&fx, 2);
  ffx_t *other = calloc(1, sizeof(*other)); /* its log only */
  assert_non_null(other);
  assert_int_equal(peer_file_attach(c, second_waiter, other), 1);
  assert_int_equal(peer_file_attach(c, ffx_waiter, &fx), 0); /* already */
  peer_file_ref(c);
  fx.log[0] = '\0';
  for (uint32_t j = 0; j < 2; j++) {
    pick_t p;
    write_job_t w = {&fx, 2, j, -1};
    assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p), 1);
    assert_int_equal(p.j, j);
    ffx_on_worker(&fx, commit_chunk_work, &w);
    assert_int_equal(w.rc, 0);
    give_back(&p, 0);
  }
  ffx_drain(&fx);
  assert_string_equal(fx.log, "done:c.bin:0:origin done:c.bin:1:origin "
                              "complete:c.bin wait:c.bin:0");
  assert_string_equal(other->log, "wait2:c.bin:0");
  free(other);
  assert_int_equal(c->state, PEER_FILE_CLOSING);
  assert_int_equal(c->bytes_from_s3, FFX_CS + 4096);
  assert_int_equal(fx.ctx.counters.chunks_verified, 2);
  assert_null(peer_file_find(fx.files, &fx.m->files[2].sha256));
  peer_file_unref(c);
  ffx_teardown(&fx);
}

static void test_fail_tells_listeners_then_waiters(void **state) {
  (void)state;
  ffx_t fx;
  char want[128];
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 1, 0);
  peer_file_t *a = ffx_open(&fx, 0);
  pick_t p, q;
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p), 1);
  fx.log[0] = '\0';
  peer_file_fail(a, WS_ES3, "boom");
  snprintf(want, sizeof(want), "failed:a.bin wait:a.bin:%d", WS_ES3);
  assert_string_equal(fx.log, want);
  assert_string_equal(a->errmsg, "a.bin: boom");
  assert_int_equal(a->state, PEER_FILE_FAILED);
  peer_file_fail(a, -EIO, "again"); /* once only */
  assert_string_equal(fx.log, want);
  assert_null(peer_file_find(fx.files, &fx.m->files[0].sha256));
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &q), 0);
  give_back(&p, WS_ECANCELED); /* the last transfer: the file closes */
  ffx_teardown(&fx);
}

static void test_nobody_waits_stops_file(void **state) {
  (void)state;
  ffx_t fx;
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 1, 0);
  peer_file_t *a = ffx_open(&fx, 0);
  assert_ptr_equal(peer_file_find(fx.files, &fx.m->files[0].sha256), a);
  fx.log[0] = '\0';
  peer_file_detach(a, &fx);
  /* Listeners hear of it; the detached waiter does not. */
  assert_string_equal(fx.log, "failed:a.bin");
  assert_null(peer_file_find(fx.files, &fx.m->files[0].sha256));
  ffx_teardown(&fx);
}

static void test_listeners_in_order(void **state) {
  (void)state;
  ffx_t fx, other;
  peer_fetch_listener_t l2 = {0};
  ffx_setup(&fx, 64 * 1024, 4);
  memset(&other, 0, sizeof(other));
  l2.arg = &other;
  l2.kick = fx.listener.kick;
  peer_files_listen(fx.files, &l2);
  fx.log[0] = '\0';
  peer_files_kick(fx.files);
  assert_string_equal(fx.log, "kick");
  assert_string_equal(other.log, "kick");
  peer_files_unlisten(fx.files, &l2);
  peer_files_kick(fx.files);
  assert_string_equal(fx.log, "kick kick");
  assert_string_equal(other.log, "kick");
  ffx_teardown(&fx);
}

/* A partial with chunk 1 already committed resumes: only 0 and 2 are
 * fetched. A file whose blob exists completes at once. */
static void test_resume_and_existing_blob(void **state) {
  (void)state;
  ffx_t fx;
  ffx_setup(&fx, 64 * 1024, 4);
  ffx_manifest(&fx, spec, 2, 0);
  write_job_t w1 = {&fx, 0, 1, -1}, wb = {&fx, 1, 0, -1};
  ffx_on_worker(&fx, write_chunk_work, &w1);
  ffx_on_worker(&fx, write_chunk_work, &wb);
  assert_int_equal(w1.rc, 0);
  assert_int_equal(wb.rc, 0);
  peer_file_t *a = ffx_open(&fx, 0);
  assert_int_equal(a->chunks_done, 1);
  assert_int_equal(a->chunk_state[1], PEER_CHUNK_DONE);
  pick_t p[2], none;
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p[0]), 1);
  assert_int_equal(p[0].j, 0);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &p[1]), 1);
  assert_int_equal(p[1].j, 2);
  assert_int_equal(pick(&fx, PEER_SRC_ORIGIN, &none), 0);
  give_back(&p[0], WS_ECANCELED);
  give_back(&p[1], WS_ECANCELED);
  fx.log[0] = '\0';
  peer_file_t *b = NULL;
  assert_int_equal(
      peer_file_create(fx.files, fx.m, &fx.m->files[1], NULL, NULL, &b), 0);
  assert_int_equal(peer_file_attach(b, ffx_waiter, &fx), 1);
  ffx_drain(&fx);
  assert_string_equal(fx.log, "complete:b.bin wait:b.bin:0");
  ffx_teardown(&fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_small_then_first_chunks_then_rest),
      cmocka_unit_test(test_failed_chunk_comes_first_again),
      cmocka_unit_test(test_too_many_hash_failures_fail_file),
      cmocka_unit_test(test_origin_gate_in_swarm_mode),
      cmocka_unit_test(test_complete_tells_listeners_then_waiters),
      cmocka_unit_test(test_fail_tells_listeners_then_waiters),
      cmocka_unit_test(test_nobody_waits_stops_file),
      cmocka_unit_test(test_listeners_in_order),
      cmocka_unit_test(test_resume_and_existing_blob),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
