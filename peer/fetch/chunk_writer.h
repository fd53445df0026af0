/* chunkw.h - one chunk's bytes on their way into the partial file: the one
 * write and verify path of every source (origin, peers).
 *
 * Buffers are written in order, one at a time, each by a worker thread that
 * pwrites it and then feeds it to the chunk's SHA-256 while the bytes are
 * still in its cache (DESIGN §7: hashed while being written, never read
 * back). When every byte is written, peer_chunkw_verify_commit (worker)
 * compares the digest with the manifest's and commits the chunk. Writes of
 * different chunks run in parallel on the pool. Loop thread except where
 * marked.
 */
#ifndef PEER_CHUNKW_H
#define PEER_CHUNKW_H

#include <stdint.h>

#include "digest.h"
#include "fetch/file.h"

struct peer_buf_s;

typedef struct peer_chunkw_s {
  peer_daemon_t *d;
  peer_file_t *file; /* borrowed: the owner holds a reference */
  uint32_t j;
  uint64_t next_off; /* where the next queued buffer must start */
  uint64_t hashed;   /* bytes written and hashed */
  ws_sha256_t *sha;  /* NULL in whole-file mode (no chunk hashes) */
  struct peer_buf_s *head, *tail; /* queued, oldest first */
  struct peer_buf_s *cur;         /* being written */
  int busy;
  int status;      /* first write error; later buffers are not written */
  int work_status; /* the worker's result for cur */
  peer_file_write_cb cb;
  void *arg;
} peer_chunkw_t;

/* Prepares w for chunk j of file; cb(arg, buf, status) runs once for every
 * buffer handed to peer_chunkw_write, in order. 0 or -ENOMEM. */
int peer_chunkw_init(peer_chunkw_t *w, peer_daemon_t *d, peer_file_t *file,
                     uint32_t j, peer_file_write_cb cb, void *arg) WS_MUST_USE;
/* Queues buf->data[0..buf->len) for offset off, which must follow the
 * previous buffer. buf is borrowed until its callback. 0 when queued, or an
 * error (nothing queued, no callback). */
int peer_chunkw_write(peer_chunkw_t *w, struct peer_buf_s *buf,
                      uint64_t off) WS_MUST_USE;
/* [worker] Every callback has run and the chunk's len bytes were written:
 * checks the digest (when the manifest has chunk hashes) and commits the
 * chunk (data durable, then its bit). 0, WS_EDIGEST (nothing committed),
 * WS_ETRUNCATED or a store error. */
int peer_chunkw_verify_commit(peer_chunkw_t *w) WS_MUST_USE;
/* Frees the hash state; no write may be queued. */
void peer_chunkw_cleanup(peer_chunkw_t *w);

#endif
