/* chunkw.c - ordered, hashed writes of one chunk (see chunkw.h). */
#include "fetch/chunk_writer.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "core/bufpool.h"

int peer_chunkw_init(peer_chunkw_t *w, peer_daemon_t *d, peer_file_t *file,
                     uint32_t j, peer_file_write_cb cb, void *arg) {
  memset(w, 0, sizeof(*w));
  w->d = d;
  w->file = file;
  w->j = j;
  w->next_off = (uint64_t)j * file->chunk_size;
  w->cb = cb;
  w->arg = arg;
  if (file->mf.chunks != NULL) {
    if ((w->sha = ws_sha256_new()) == NULL)
      return -ENOMEM;
    if (ws_sha256_init(w->sha) != 0) {
      peer_chunkw_cleanup(w);
      return -ENOMEM;
    }
  }
  return 0;
}

void peer_chunkw_cleanup(peer_chunkw_t *w) {
  assert(!w->busy && w->head == NULL);
  ws_sha256_free(w->sha);
  w->sha = NULL;
}

static void chunkw_after_cb(void *arg, int status);

/* [worker] pwrite of the whole buffer, then the hash over the same bytes. */
static void chunkw_work(void *arg) {
  peer_chunkw_t *w = arg;
  peer_buf_t *b = w->cur;
  int rc = w->file->pf != NULL
               ? ws_store_file_pwrite(w->file->pf, b->data, b->len, b->off)
               : -EBADF;
  if (rc != 0) {
    w->work_status = rc;
    return;
  }
  if (w->sha != NULL && ws_sha256_update(w->sha, b->data, b->len) != 0) {
    w->work_status = -ENOMEM;
    return;
  }
  w->hashed += b->len;
}

/* Hands the oldest queued buffer to a worker; on failure it stays queued. */
static int chunkw_issue(peer_chunkw_t *w) {
  peer_buf_t *b = w->head;
  w->cur = b;
  w->busy = 1;
  int rc = peer_daemon_queue(w->d, chunkw_work, chunkw_after_cb, w);
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

static void chunkw_after_cb(void *arg, int status) {
  peer_chunkw_t *w = arg;
  peer_buf_t *b = w->cur, *failed = NULL;
  w->cur = NULL;
  w->busy = 0;
  if (status == 0)
    status = w->work_status;
  if (status != 0 && w->status == 0)
    w->status = status;
  if (w->status == 0 && w->head != NULL) {
    int rc = chunkw_issue(w);
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
  peer_file_write_cb cb = w->cb;
  void *cbarg = w->arg;
  cb(cbarg, b, st);
  while (failed != NULL) {
    peer_buf_t *next = failed->next;
    failed->next = NULL;
    cb(cbarg, failed, st);
    failed = next;
  }
}

int peer_chunkw_write(peer_chunkw_t *w, peer_buf_t *buf, uint64_t off) {
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
    int rc = chunkw_issue(w);
    if (rc != 0) {
      w->head = w->tail = NULL; /* buf was the only one queued */
      return rc;
    }
  }
  w->next_off += buf->len;
  return 0;
}

int peer_chunkw_verify_commit(peer_chunkw_t *w) {
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
  return ws_store_chunk_commit(file->pf, w->j);
}
