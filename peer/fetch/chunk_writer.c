/* chunk_writer.c - ordered, hashed writes of one chunk (see
 * chunk_writer.h).
 *
 * Owns: the hash state; one worker job at a time per chunk.
 * Thread: loop thread; chunk_writer_work runs on a worker and touches only
 * the writer, its current buffer and the store handle.
 */
#include "fetch/chunk_writer.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#ifdef WS_FAULT_INJECT
#include <stdatomic.h>

/* Chunk writes so far, process-wide (the fault hook counts them). */
static atomic_uint g_chunk_writes;

/* Test builds: --test-write-fault CODE:N makes the Nth chunk write of the
 * process and every later one fail with CODE, as a disk that filled up or
 * died would. 0 when the write may go ahead. */
static int chunk_writer_fault(const peer_ctx_t *ctx) {
  const peer_settings_t *cfg = ctx->cfg;
  if (cfg == NULL || cfg->test_write_fault == 0)
    return 0;
  unsigned n = atomic_fetch_add(&g_chunk_writes, 1) + 1;
  return n >= cfg->test_write_fault_nth ? cfg->test_write_fault : 0;
}
#endif

int peer_chunk_writer_init(peer_chunk_writer_t *w, peer_ctx_t *ctx,
                           peer_file_t *file, uint32_t j,
                           peer_chunk_written_cb cb, void *arg) {
  memset(w, 0, sizeof(*w));
  w->ctx = ctx;
  w->file = file;
  w->j = j;
  w->next_off = (uint64_t)j * file->chunk_size;
  w->cb = cb;
  w->arg = arg;
  if (file->mf.chunks != NULL) {
    if ((w->sha = ws_sha256_new()) == NULL)
      return -ENOMEM;
    if (ws_sha256_init(w->sha) != 0) {
      peer_chunk_writer_cleanup(w);
      return -ENOMEM;
    }
  }
  return 0;
}

void peer_chunk_writer_cleanup(peer_chunk_writer_t *w) {
  assert(!w->busy && w->head == NULL);
  ws_sha256_free(w->sha);
  w->sha = NULL;
}

static void chunk_writer_after_cb(void *arg, int status);

/* [worker] pwrite of the whole buffer, then the hash over the same bytes.
 * A disk error is named as ours (WS_ENOSPC, WS_EIO: ws_err_disk) so that
 * the owner fails the file rather than blame the source. */
static void chunk_writer_work(void *arg) {
  peer_chunk_writer_t *w = arg;
  peer_buf_t *b = w->cur;
  int rc = w->file->pf != NULL
               ? ws_store_file_pwrite(w->file->pf, b->data, b->len, b->off)
               : -EBADF;
#ifdef WS_FAULT_INJECT
  if (rc == 0)
    rc = chunk_writer_fault(w->ctx);
#endif
  if (rc != 0) {
    w->work_status = ws_err_disk(rc);
    return;
  }
  if (w->sha != NULL && ws_sha256_update(w->sha, b->data, b->len) != 0) {
    w->work_status = -ENOMEM;
    return;
  }
  w->hashed += b->len;
}

/* Hands the oldest queued buffer to a worker; on failure it stays queued. */
static int chunk_writer_issue(peer_chunk_writer_t *w) {
  peer_buf_t *b = w->head;
  w->cur = b;
  w->busy = 1;
  int rc = peer_ctx_queue(w->ctx, chunk_writer_work, chunk_writer_after_cb, w);
  if (rc != 0) {
    w->cur = NULL;
    w->busy = 0;
    return rc;
  }
  w->head = b->next;
  if (w->head == NULL)
    w->tail = NULL;
  b->next = NULL;
  return 0;
}

static void chunk_writer_after_cb(void *arg, int status) {
  peer_chunk_writer_t *w = arg;
  peer_buf_t *b = w->cur, *failed = NULL;
  w->cur = NULL;
  w->busy = 0;
  if (status == 0)
    status = w->work_status;
  if (status != 0 && w->status == 0)
    w->status = status;
  if (w->status == 0 && w->head != NULL) {
    int rc = chunk_writer_issue(w);
    if (rc != 0)
      w->status = rc;
  }
  if (w->status != 0) {
    /* Nothing more is written: every queued buffer comes back failed. */
    failed = w->head;
    w->head = w->tail = NULL;
  }
  /* The callbacks come last and w is not touched between them: after the
   * last one the owner may free w. */
  int st = w->status;
  peer_chunk_written_cb cb = w->cb;
  void *cbarg = w->arg;
  cb(cbarg, b, st);
  while (failed != NULL) {
    peer_buf_t *next = failed->next;
    failed->next = NULL;
    cb(cbarg, failed, st);
    failed = next;
  }
}

int peer_chunk_writer_write(peer_chunk_writer_t *w, peer_buf_t *buf,
                            uint64_t off) {
  if (w->status != 0)
    return w->status;
  if (off != w->next_off)
    return WS_EUSAGE;
  if (w->file->pf == NULL)
    return -EBADF;
  buf->off = off;
  buf->next = NULL;
  if (w->tail != NULL)
    w->tail->next = buf;
  else
    w->head = buf;
  w->tail = buf;
  if (!w->busy) {
    int rc = chunk_writer_issue(w);
    if (rc != 0) {
      w->head = w->tail = NULL; /* buf was the only one queued */
      return rc;
    }
  }
  w->next_off += buf->len;
  return 0;
}

int peer_chunk_writer_verify(peer_chunk_writer_t *w) {
  peer_file_t *file = w->file;
  if (w->status != 0)
    return w->status;
  if (w->hashed != peer_file_chunk_len(file, w->j))
    return WS_ETRUNCATED;
  if (w->sha != NULL) {
    ws_hash_t got;
    int rc = ws_sha256_final(w->sha, &got);
    if (rc != 0)
      return rc;
    if (!ws_hash_eq(&got, &file->mf.chunks[w->j]))
      return WS_EDIGEST;
  }
  return ws_err_disk(ws_store_chunk_commit(file->pf, w->j));
}
