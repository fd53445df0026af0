/* test_inbound.c - the inbound-chunk machine (fetch/inbound.c) on a real
 * loop and worker pool against a real store: a chunk fed in pieces is
 * written, verified and committed; a wrong byte gives WS_EDIGEST and
 * commits nothing; both back-pressure modes pause and resume on a pool of
 * two buffers; ending early or with an error, failing, and too many bytes
 * each give their status; a file whose chunks all come through it
 * completes and its waiters and listeners hear so, in order; a slow
 * transfer's bytes are written before its buffer fills.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/tunables.h"
#include "fetch/inbound.h"
#include "fetch_fixture.h"

#define SMALL_BUF (64u * 1024u)

typedef struct {
  ffx_t fx;
  peer_file_t *file;
  uint32_t j;
  peer_inbound_t *in;
  int done, status;
  char msg[256];
  int woken, wakes, pauses;
  int failed, failed_status;
  int progress_calls;
  uint64_t progress_last;
  int progress_ordered; /* each report >= the one before */
  int report;           /* done: report to the file */
  peer_inbound_mode_t mode;
} ib_t;

static void ib_wake(void *arg) {
  ib_t *t = arg;
  t->woken = 1;
  t->wakes++;
}

static void ib_progress(void *arg, uint64_t written) {
  ib_t *t = arg;
  if (written <= t->progress_last)
    t->progress_ordered = 0;
  t->progress_last = written;
  t->progress_calls++;
}

static void ib_failed(void *arg, int status) {
  ib_t *t = arg;
  t->failed++;
  t->failed_status = status;
}

static void ib_done(void *arg, int status, const char *errmsg) {
  ib_t *t = arg;
  t->done = 1;
  t->status = status;
  t->in = NULL;
  snprintf(t->msg, sizeof(t->msg), "%s", errmsg);
  if (t->report) {
    peer_file_chunk_done(
        t->file, t->j, PEER_SRC_PEER,
        status == 0 || status == WS_EDIGEST ? status : WS_ECANCELED, errmsg);
    peer_file_unref(t->file);
  }
}

static ib_t *ib_setup(size_t buf_bytes, unsigned nbufs, size_t size) {
  ib_t *t = calloc(1, sizeof(*t));
  ffx_spec_t spec[] = {{"in.bin", size, 11}};
  assert_non_null(t);
  ffx_setup(&t->fx, buf_bytes, nbufs);
  ffx_manifest(&t->fx, spec, 1, 0);
  t->file = ffx_open(&t->fx, 0);
  assert_int_equal(t->file->state, PEER_FILE_FETCHING);
  t->progress_ordered = 1;
  t->report = 1;
  return t;
}

static void ib_start(ib_t *t, uint32_t j, peer_inbound_mode_t mode,
                     size_t room) {
  peer_inbound_ops_t ops = {.mode = mode,
                            .room = room,
                            .arg = t,
                            .wake = ib_wake,
                            .progress = ib_progress,
                            .failed = ib_failed,
                            .done = ib_done};
  t->j = j;
  t->mode = mode;
  t->done = 0;
  peer_file_chunk_take(t->file, j);
  assert_int_equal(peer_inbound_new(&t->fx.ctx, t->file, j, &ops, &t->in), 0);
}

/* Feeds src[0..len) of the chunk in pieces, pausing as told: on
 * PEER_INBOUND_PAUSE an ALL_OR_NONE machine took nothing (the piece is
 * offered again after the wake), a RESERVE one took the piece. */
static void ib_feed(ib_t *t, const uint8_t *src, size_t len, size_t piece) {
  size_t off = 0;
  if (peer_inbound_reserve(t->in) == PEER_INBOUND_PAUSE) {
    t->pauses++;
    t->woken = 0;
    ffx_run_until(&t->fx, &t->woken);
  }
  while (off < len) {
    size_t n = len - off < piece ? len - off : piece;
    int rc = peer_inbound_data(t->in, src + off, n);
    assert_true(rc == 0 || rc == PEER_INBOUND_PAUSE);
    if (rc == 0 || t->mode == PEER_INBOUND_RESERVE)
      off += n;
    assert_int_equal(peer_inbound_received(t->in), off);
    if (rc == PEER_INBOUND_PAUSE) {
      t->pauses++;
      t->woken = 0;
      ffx_run_until(&t->fx, &t->woken);
    }
  }
}

static const uint8_t *ib_chunk(ib_t *t, uint32_t j) {
  return t->fx.data[0] + (size_t)j * FFX_CS;
}

static void ib_teardown(ib_t *t) {
  ffx_teardown(&t->fx);
  free(t);
}

static void test_chunk_verified_and_committed(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, 2 * FFX_CS + 5000);
  ib_start(t, 1, PEER_INBOUND_ALL_OR_NONE, 0);
  ib_feed(t, ib_chunk(t, 1), FFX_CS, 100 * 1000);
  assert_int_equal(peer_inbound_received(t->in), FFX_CS);
  peer_inbound_end(t->in, 0, NULL);
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, 0);
  assert_string_equal(t->msg, "");
  assert_true(ws_store_file_has_chunk(t->file->pf, 1));
  assert_int_equal(t->file->chunk_state[1], PEER_CHUNK_DONE);
  assert_int_equal(t->file->bytes_from_peers, FFX_CS);
  assert_true(t->progress_ordered);
  assert_int_equal(t->progress_last, FFX_CS);
  assert_int_equal(t->progress_calls, 4); /* four 256 KiB buffers */
  assert_int_equal(t->failed, 0);
  assert_int_equal(t->fx.ctx.counters.chunks_verified, 1);
  ib_teardown(t);
}

static void test_last_short_chunk(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, 2 * FFX_CS + 5000);
  ib_start(t, 2, PEER_INBOUND_RESERVE, 64 * 1024);
  assert_int_equal(peer_inbound_len(t->in), 5000);
  ib_feed(t, ib_chunk(t, 2), 5000, 3000);
  peer_inbound_end(t->in, 0, NULL);
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, 0);
  assert_true(ws_store_file_has_chunk(t->file->pf, 2));
  uint8_t got[5000];
  ffx_read_partial(t->file, 2 * (uint64_t)FFX_CS, got, sizeof(got));
  assert_memory_equal(got, ib_chunk(t, 2), sizeof(got));
  ib_teardown(t);
}

static void test_wrong_byte_edigest_nothing_committed(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, 2 * FFX_CS);
  uint8_t *bad = malloc(FFX_CS);
  memcpy(bad, ib_chunk(t, 0), FFX_CS);
  bad[FFX_CS - 1] ^= 1;
  ib_start(t, 0, PEER_INBOUND_ALL_OR_NONE, 0);
  ib_feed(t, bad, FFX_CS, 256 * 1024);
  peer_inbound_end(t->in, 0, NULL);
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, WS_EDIGEST);
  assert_false(ws_store_file_has_chunk(t->file->pf, 0));
  assert_int_equal(t->file->chunk_state[0], PEER_CHUNK_MISSING);
  assert_int_equal(t->file->chunk_tries[0], 1);
  assert_int_equal(t->fx.ctx.counters.chunks_failed, 1);
  free(bad);
  ib_teardown(t);
}

/* Pieces of 40 KB into a pool of two 64 KiB buffers (as curl hands 16 KiB
 * pieces to 256 KiB buffers): the machine takes a piece only when the pool
 * has the buffers for all of it. */
static void test_all_or_none_pauses_and_resumes(void **state) {
  (void)state;
  ib_t *t = ib_setup(SMALL_BUF, 2, FFX_CS);
  ib_start(t, 0, PEER_INBOUND_ALL_OR_NONE, 0);
  ib_feed(t, ib_chunk(t, 0), FFX_CS, 40 * 1000);
  assert_true(t->pauses > 0);
  assert_int_equal(t->wakes, t->pauses);
  peer_inbound_end(t->in, 0, NULL);
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, 0);
  assert_true(ws_store_file_has_chunk(t->file->pf, 0));
  assert_int_equal(peer_bufpool_peak(t->fx.ctx.pool), 2);
  ib_teardown(t);
}

/* Pieces of 64 KiB (the room kept) into two 64 KiB buffers: every piece is
 * taken; when no spare is left for the next one the producer pauses. */
static void test_reserve_pauses_and_resumes(void **state) {
  (void)state;
  ib_t *t = ib_setup(SMALL_BUF, 2, FFX_CS);
  ib_start(t, 0, PEER_INBOUND_RESERVE, SMALL_BUF);
  ib_feed(t, ib_chunk(t, 0), FFX_CS, SMALL_BUF);
  assert_true(t->pauses > 0);
  assert_int_equal(peer_inbound_received(t->in), FFX_CS);
  peer_inbound_end(t->in, 0, NULL);
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, 0);
  assert_true(ws_store_file_has_chunk(t->file->pf, 0));
  ib_teardown(t);
}

static void test_end_with_error_is_reported(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, FFX_CS);
  ib_start(t, 0, PEER_INBOUND_RESERVE, 64 * 1024);
  ib_feed(t, ib_chunk(t, 0), FFX_CS / 2, 64 * 1024);
  peer_inbound_end(t->in, WS_ECANCELED, "connection lost");
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, WS_ECANCELED);
  assert_string_equal(t->msg, "connection lost");
  assert_int_equal(t->failed, 0); /* the producer is gone already */
  assert_false(ws_store_file_has_chunk(t->file->pf, 0));
  assert_int_equal(t->file->chunk_state[0], PEER_CHUNK_MISSING);
  assert_int_equal(t->file->chunk_tries[0], 0);
  ib_teardown(t);
}

static void test_end_early_is_truncated(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, FFX_CS);
  ib_start(t, 0, PEER_INBOUND_ALL_OR_NONE, 0);
  ib_feed(t, ib_chunk(t, 0), 1000, 1000);
  peer_inbound_end(t->in, 0, "body ended early");
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, WS_ETRUNCATED);
  assert_string_equal(t->msg, "body ended early");
  assert_false(ws_store_file_has_chunk(t->file->pf, 0));
  ib_teardown(t);
}

static void test_too_many_bytes_is_eproto(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, 2 * FFX_CS);
  ib_start(t, 0, PEER_INBOUND_RESERVE, 64 * 1024);
  ib_feed(t, ib_chunk(t, 0), FFX_CS - 10, 64 * 1024);
  assert_int_equal(peer_inbound_data(t->in, ib_chunk(t, 0), 11), WS_EPROTO);
  assert_int_equal(peer_inbound_status(t->in), WS_EPROTO);
  assert_int_equal(t->failed, 1);
  /* Later pieces are refused with the first error. */
  assert_int_equal(peer_inbound_data(t->in, ib_chunk(t, 0), 1), WS_EPROTO);
  peer_inbound_end(t->in, WS_ECANCELED, NULL);
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, WS_EPROTO);
  assert_false(ws_store_file_has_chunk(t->file->pf, 0));
  ib_teardown(t);
}

static void test_fail_stops_producer_once(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, FFX_CS);
  ib_start(t, 0, PEER_INBOUND_ALL_OR_NONE, 0);
  ib_feed(t, ib_chunk(t, 0), 300 * 1000, 100 * 1000);
  peer_inbound_fail(t->in, WS_ECANCELED, "canceled");
  peer_inbound_fail(t->in, WS_ES3, "later");
  assert_int_equal(t->failed, 1);
  assert_int_equal(t->failed_status, WS_ECANCELED);
  assert_int_equal(peer_inbound_data(t->in, ib_chunk(t, 0), 10), WS_ECANCELED);
  peer_inbound_end(t->in, WS_ES3, "S3 said no");
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, WS_ECANCELED);
  assert_string_equal(t->msg, "canceled");
  ib_teardown(t);
}

static void test_free_unused(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, FFX_CS);
  ib_start(t, 0, PEER_INBOUND_RESERVE, 64 * 1024);
  assert_int_equal(peer_inbound_reserve(t->in), 0); /* holds a spare */
  peer_inbound_free(t->in);
  assert_int_equal(peer_bufpool_available(t->fx.ctx.pool), 8);
  assert_int_equal(t->done, 0);
  peer_file_chunk_done(t->file, 0, PEER_SRC_PEER, WS_ECANCELED, NULL);
  peer_file_unref(t->file);
  ib_teardown(t);
}

/* A slow transfer: a buffer that has waited PEER_BUF_FORWARD_MS goes to
 * the writer once it holds PEER_BUF_FORWARD_MIN_BYTES, not when full, so
 * an upload serving the chunk onwards may send those bytes; under the
 * minimum it waits; bytes that come fast still fill whole buffers. */
static void test_slow_bytes_written_before_the_buffer_fills(void **state) {
  (void)state;
  const size_t min = PEER_BUF_FORWARD_MIN_BYTES, half = min / 2;
  ib_t *t = ib_setup(256 * 1024, 8, 2 * FFX_CS + 5000);
  ib_start(t, 0, PEER_INBOUND_RESERVE, 64 * 1024);
  const uint8_t *src = ib_chunk(t, 0);
  assert_int_equal(peer_inbound_data(t->in, src, half), 0);
  uv_sleep(PEER_BUF_FORWARD_MS + 5);
  uv_update_time(&t->fx.loop);
  /* Waited, but under the minimum. */
  assert_int_equal(peer_inbound_data(t->in, src + half, 1), 0);
  ffx_drain(&t->fx);
  assert_int_equal(t->progress_calls, 0);
  assert_int_equal(peer_inbound_data(t->in, src + half + 1, min - half - 1), 0);
  ffx_drain(&t->fx);
  assert_int_equal(t->progress_calls, 1);
  assert_int_equal(t->progress_last, min);
  /* The rest at once: the loop's clock stands still, whole buffers. */
  for (size_t off = min, n; off < FFX_CS; off += n) {
    n = FFX_CS - off < 64 * 1024 ? FFX_CS - off : 64 * 1024;
    assert_int_equal(peer_inbound_data(t->in, src + off, n), 0);
  }
  peer_inbound_end(t->in, 0, NULL);
  ffx_run_until(&t->fx, &t->done);
  assert_int_equal(t->status, 0);
  assert_true(t->progress_ordered);
  assert_int_equal(t->progress_last, FFX_CS);
  assert_int_equal(t->progress_calls,
                   1 + (FFX_CS - min + 256 * 1024 - 1) / (256 * 1024));
  assert_true(ws_store_file_has_chunk(t->file->pf, 0));
  ib_teardown(t);
}

/* Every chunk through the machine: the file finishes, the listeners hear
 * of each chunk and of the blob before the waiter does. */
static void test_file_completes_events_in_order(void **state) {
  (void)state;
  ib_t *t = ib_setup(256 * 1024, 8, FFX_CS + 777);
  peer_file_ref(t->file); /* look at it once it is CLOSING */
  t->fx.log[0] = '\0';
  for (uint32_t j = 0; j < 2; j++) {
    ib_start(t, j, PEER_INBOUND_RESERVE, 64 * 1024);
    ib_feed(t, ib_chunk(t, j), peer_inbound_len(t->in), 64 * 1024);
    peer_inbound_end(t->in, 0, NULL);
    ffx_run_until(&t->fx, &t->done);
    assert_int_equal(t->status, 0);
  }
  for (int k = 0; k < 5000 && t->file->state != PEER_FILE_COMPLETE &&
                  t->file->state != PEER_FILE_CLOSING;
       k++)
    uv_run(&t->fx.loop, UV_RUN_ONCE);
  assert_string_equal(t->fx.log, "done:in.bin:0:peer done:in.bin:1:peer "
                                 "complete:in.bin wait:in.bin:0");
  assert_int_equal(t->file->bytes_done, FFX_CS + 777);
  ffx_drain(&t->fx);
  assert_int_equal(t->file->state, PEER_FILE_CLOSING);
  peer_file_unref(t->file);
  ib_teardown(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chunk_verified_and_committed),
      cmocka_unit_test(test_last_short_chunk),
      cmocka_unit_test(test_wrong_byte_edigest_nothing_committed),
      cmocka_unit_test(test_all_or_none_pauses_and_resumes),
      cmocka_unit_test(test_reserve_pauses_and_resumes),
      cmocka_unit_test(test_end_with_error_is_reported),
      cmocka_unit_test(test_end_early_is_truncated),
      cmocka_unit_test(test_too_many_bytes_is_eproto),
      cmocka_unit_test(test_fail_stops_producer_once),
      cmocka_unit_test(test_free_unused),
      cmocka_unit_test(test_file_completes_events_in_order),
      cmocka_unit_test(test_slow_bytes_written_before_the_buffer_fills),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
