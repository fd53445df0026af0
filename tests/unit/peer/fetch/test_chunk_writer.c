/* test_chunk_writer.c - the chunk writer (fetch/chunk_writer.c) on a real
 * loop and worker pool against a real store: buffers written in order at
 * the chunk's offsets, hashed while written (the digest matches without
 * reading back), a wrong byte caught, a short chunk caught, and write
 * errors handed back for every queued buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fetch/chunk_writer.h"
#include "fetch_fixture.h"

#define BUF (256u * 1024u)

typedef struct {
  ffx_t fx;
  peer_file_t *file;
  peer_chunk_writer_t w;
  int cbs;
  uint64_t offs[16];
  int statuses[16];
  int verify_rc;
} cw_t;

static void cw_written(void *arg, peer_buf_t *buf, int status) {
  cw_t *t = arg;
  assert_true(t->cbs < 16);
  t->offs[t->cbs] = buf->off;
  t->statuses[t->cbs++] = status;
  peer_bufpool_put(t->fx.ctx.pool, buf);
}

static void cw_verify_work(void *arg) {
  cw_t *t = arg;
  t->verify_rc = peer_chunk_writer_verify(&t->w);
}

static cw_t *cw_setup(uint32_t j) {
  cw_t *t = calloc(1, sizeof(*t));
  static const ffx_spec_t spec[] = {{"w.bin", 3 * FFX_CS, 7}};
  assert_non_null(t);
  ffx_setup(&t->fx, BUF, 8);
  ffx_manifest(&t->fx, spec, 1, 0);
  t->file = ffx_open(&t->fx, 0);
  assert_int_equal(t->file->state, PEER_FILE_FETCHING);
  peer_file_chunk_take(t->file, j);
  assert_int_equal(
      peer_chunk_writer_init(&t->w, &t->fx.ctx, t->file, j, cw_written, t), 0);
  return t;
}

/* Queues buffers n of chunk j from src (BUF bytes each, from its start). */
static void cw_write(cw_t *t, uint32_t j, const uint8_t *src, unsigned from,
                     unsigned n) {
  for (unsigned k = from; k < from + n; k++) {
    peer_buf_t *b = peer_bufpool_get(t->fx.ctx.pool);
    assert_non_null(b);
    uint64_t off = (uint64_t)j * FFX_CS + (uint64_t)k * BUF;
    memcpy(b->data, src + off, BUF);
    b->len = BUF;
    assert_int_equal(peer_chunk_writer_write(&t->w, b, off), 0);
  }
}

static void cw_wait(cw_t *t, int cbs) {
  while (t->cbs < cbs)
    uv_run(&t->fx.loop, UV_RUN_ONCE);
}

static void cw_finish(cw_t *t, uint32_t j, int status) {
  peer_chunk_writer_cleanup(&t->w);
  peer_file_chunk_done(t->file, j, PEER_SRC_ORIGIN, status, "test");
  peer_file_unref(t->file);
  ffx_teardown(&t->fx);
  free(t);
}

static void test_ordered_writes_hash_matches(void **state) {
  (void)state;
  cw_t *t = cw_setup(1);
  cw_write(t, 1, t->fx.data[0], 0, 4);
  cw_wait(t, 4);
  for (int k = 0; k < 4; k++) {
    assert_int_equal(t->statuses[k], 0);
    assert_int_equal(t->offs[k], FFX_CS + (uint64_t)k * BUF);
  }
  assert_int_equal(t->w.hashed, FFX_CS);
  ffx_on_worker(&t->fx, cw_verify_work, t);
  assert_int_equal(t->verify_rc, 0);
  assert_true(ws_store_file_has_chunk(t->file->pf, 1));
  assert_false(ws_store_file_has_chunk(t->file->pf, 0));
  uint8_t *got = malloc(FFX_CS);
  ffx_read_partial(t->file, FFX_CS, got, FFX_CS);
  assert_memory_equal(got, t->fx.data[0] + FFX_CS, FFX_CS);
  free(got);
  cw_finish(t, 1, 0);
}

static void test_wrong_byte_is_edigest(void **state) {
  (void)state;
  cw_t *t = cw_setup(2);
  uint8_t *bad = malloc(3 * FFX_CS);
  memcpy(bad, t->fx.data[0], 3 * FFX_CS);
  bad[2 * FFX_CS + 3 * BUF + 17] ^= 0x40;
  cw_write(t, 2, bad, 0, 4);
  cw_wait(t, 4);
  ffx_on_worker(&t->fx, cw_verify_work, t);
  assert_int_equal(t->verify_rc, WS_EDIGEST);
  assert_false(ws_store_file_has_chunk(t->file->pf, 2));
  free(bad);
  cw_finish(t, 2, WS_EDIGEST);
}

static void test_short_chunk_is_truncated(void **state) {
  (void)state;
  cw_t *t = cw_setup(0);
  cw_write(t, 0, t->fx.data[0], 0, 3);
  cw_wait(t, 3);
  ffx_on_worker(&t->fx, cw_verify_work, t);
  assert_int_equal(t->verify_rc, WS_ETRUNCATED);
  assert_false(ws_store_file_has_chunk(t->file->pf, 0));
  cw_finish(t, 0, WS_ECANCELED);
}

static void test_offset_gap_refused(void **state) {
  (void)state;
  cw_t *t = cw_setup(1);
  peer_buf_t *b = peer_bufpool_get(t->fx.ctx.pool);
  b->len = BUF;
  /* Not where the chunk starts: refused, no callback. */
  assert_int_equal(peer_chunk_writer_write(&t->w, b, FFX_CS + BUF), WS_EUSAGE);
  /* No partial handle: refused too. */
  ws_store_file_t *pf = t->file->pf;
  t->file->pf = NULL;
  assert_int_equal(peer_chunk_writer_write(&t->w, b, FFX_CS), -EBADF);
  t->file->pf = pf;
  peer_bufpool_put(t->fx.ctx.pool, b);
  assert_int_equal(t->cbs, 0);
  cw_finish(t, 1, WS_ECANCELED);
}

static uv_sem_t blocker_sem;
static void blocker_work(void *arg) {
  (void)arg;
  uv_sem_wait(&blocker_sem);
}
static void blocker_after(void *arg, int status) {
  (void)status;
  *(int *)arg = 1;
}

/* The worker pool has one thread (main): a blocker holds it while three
 * buffers are queued; the first write then fails and every buffer comes
 * back, in order, with the error. */
static void test_write_error_fails_every_buffer(void **state) {
  (void)state;
  cw_t *t = cw_setup(1);
  int unblocked = 0;
  assert_int_equal(uv_sem_init(&blocker_sem, 0), 0);
  assert_int_equal(
      peer_ctx_queue(&t->fx.ctx, blocker_work, blocker_after, &unblocked), 0);
  cw_write(t, 1, t->fx.data[0], 0, 3);
  ws_store_file_t *pf = t->file->pf;
  t->file->pf = NULL; /* the pwrite fails with -EBADF */
  uv_sem_post(&blocker_sem);
  cw_wait(t, 3);
  t->file->pf = pf;
  for (int k = 0; k < 3; k++) {
    assert_int_equal(t->statuses[k], -EBADF);
    assert_int_equal(t->offs[k], FFX_CS + (uint64_t)k * BUF);
  }
  /* Later writes are refused with the first error. */
  peer_buf_t *b = peer_bufpool_get(t->fx.ctx.pool);
  b->len = BUF;
  assert_int_equal(peer_chunk_writer_write(&t->w, b, FFX_CS + 3 * BUF), -EBADF);
  peer_bufpool_put(t->fx.ctx.pool, b);
  ffx_on_worker(&t->fx, cw_verify_work, t);
  assert_int_equal(t->verify_rc, -EBADF);
  uv_sem_destroy(&blocker_sem);
  assert_int_equal(unblocked, 1);
  cw_finish(t, 1, WS_ECANCELED);
}

int main(void) {
  /* One worker thread: the write-error test orders jobs behind a blocker. */
  setenv("UV_THREADPOOL_SIZE", "1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ordered_writes_hash_matches),
      cmocka_unit_test(test_wrong_byte_is_edigest),
      cmocka_unit_test(test_short_chunk_is_truncated),
      cmocka_unit_test(test_offset_gap_refused),
      cmocka_unit_test(test_write_error_fails_every_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
