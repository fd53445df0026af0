/* chunk_writer.h - one chunk's bytes on their way into the partial file:
 * the one write-and-hash path of every source (the inbound-chunk machine,
 * inbound.h, is its only user).
 *
 * Buffers are written in order, one at a time, each by a worker that
 * pwrites it and then feeds the same bytes to the chunk's SHA-256 while
 * they are still in its CPU cache: a chunk is hashed while being written,
 * never read back. When every byte is written, peer_chunk_writer_verify
 * (worker) compares the digest with the manifest's and commits the chunk.
 * Writers of different chunks run in parallel on the worker pool.
 *
 * Owns: the hash state. Borrows ctx (worker queue), the file (the owner
 * holds a reference) and each buffer until its callback.
 * Thread: loop thread except where marked.
 */
#ifndef PEER_FETCH_CHUNK_WRITER_H
#define PEER_FETCH_CHUNK_WRITER_H

#include <stdint.h>

#include "core/bufpool.h"
#include "core/ctx.h"
#include "digest.h"
#include "fetch/file.h"

/* Called once per buffer handed to peer_chunk_writer_write, in order, with
 * 0 or the writer's first error; the buffer goes back to its owner. */
typedef void (*peer_chunk_written_cb)(void *arg, peer_buf_t *buf, int status);

typedef struct {
  peer_ctx_t *ctx;
  peer_file_t *file; /* borrowed: the owner holds a reference */
  uint32_t j;
  uint64_t next_off;       /* where the next queued buffer must start */
  uint64_t hashed;         /* bytes written and hashed */
  ws_sha256_t *sha;        /* NULL in whole-file mode (no chunk hashes) */
  peer_buf_t *head, *tail; /* queued, oldest first */
  peer_buf_t *cur;         /* being written */
  int busy;
  int status;      /* first write error; later buffers are not written */
  int work_status; /* the worker's result for cur */
  peer_chunk_written_cb cb;
  void *arg;
} peer_chunk_writer_t;

/* Prepares w for chunk j of file; cb(arg, buf, status) runs once for every
 * buffer handed to peer_chunk_writer_write, in order. 0 or -ENOMEM. */
int peer_chunk_writer_init(peer_chunk_writer_t *w, peer_ctx_t *ctx,
                           peer_file_t *file, uint32_t j,
                           peer_chunk_written_cb cb, void *arg) WS_MUST_USE;
/* Queues buf->data[0..buf->len) for offset off, which must follow the
 * previous buffer. buf is borrowed until its callback. 0 when queued, or an
 * error (nothing queued, no callback). */
int peer_chunk_writer_write(peer_chunk_writer_t *w, peer_buf_t *buf,
                            uint64_t off) WS_MUST_USE;
/* [worker] Every callback has run and the chunk's len bytes were written:
 * checks the digest (when the manifest has chunk hashes) and commits the
 * chunk (data durable, then its bit). 0, WS_EDIGEST (nothing committed),
 * WS_ETRUNCATED or a store error. Errors of the local disk come as WS_ENOSPC
 * or WS_EIO (ws_err_disk), here and in the write callbacks: they are the
 * node's, not the source's. */
int peer_chunk_writer_verify(peer_chunk_writer_t *w) WS_MUST_USE;
/* Frees the hash state; no write may be queued. */
void peer_chunk_writer_cleanup(peer_chunk_writer_t *w);

#endif
