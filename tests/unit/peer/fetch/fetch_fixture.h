/* fetch_fixture.h - a real fetch layer for unit tests: a libuv loop, a
 * context with a small buffer pool and a worker queue, a chunk store in a
 * temp directory, a files table, manifests built through the real parser
 * and files opened in it. Test process only; failures abort the test
 * through cmocka asserts.
 */
#ifndef PEER_FETCH_FIXTURE_H
#define PEER_FETCH_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "core/ctx.h"
#include "fetch/file.h"
#include "manifest.h"

#define FFX_CS (1u << 20) /* smallest legal chunk size keeps tests fast */
#define FFX_MAX_FILES 8
#define FFX_LOG_MAX 1024

typedef struct {
  const char *name;
  size_t size;
  uint32_t seed; /* contents: fx_pattern(size, seed) */
} ffx_spec_t;

typedef struct {
  uv_loop_t loop;
  peer_settings_t cfg;
  peer_ctx_t ctx;
  char *root;
  unsigned nbufs;
  peer_files_t *files;
  ws_manifest_t *m;
  char *mbytes;
  uint8_t *data[FFX_MAX_FILES]; /* each file's expected contents */
  /* What the waiter and listener callbacks saw, in order, one word each
   * separated by spaces (e.g. "done:a.bin:0 complete:a.bin wait:a.bin:0"). */
  char log[FFX_LOG_MAX];
  peer_fetch_listener_t listener;
} ffx_t;

/* Loop, pool of nbufs buffers of buf_bytes, store, files table and a
 * listener that logs every event. */
void ffx_setup(ffx_t *fx, size_t buf_bytes, unsigned nbufs);
/* Closes every file, drains the loop and frees everything. */
void ffx_teardown(ffx_t *fx);
/* Builds the manifest of n files (chunk hashes unless whole) and begins
 * its release in the store. */
void ffx_manifest(ffx_t *fx, const ffx_spec_t *files, size_t n, int whole);
/* Creates file i, attaches the logging waiter and runs the loop until it
 * left OPENING. */
peer_file_t *ffx_open(ffx_t *fx, uint32_t i);
/* The logging waiter (for peer_file_attach). */
void ffx_waiter(void *arg, peer_file_t *file, int err, const char *msg);
/* Runs the loop until *flag is set (fails after a few seconds). */
void ffx_run_until(ffx_t *fx, const int *flag);
/* Runs the loop until no worker job is left. */
void ffx_drain(ffx_t *fx);
/* Appends a word to the log. */
void ffx_log(ffx_t *fx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Runs work(arg) on a worker and waits for it (for [worker] store calls). */
void ffx_on_worker(ffx_t *fx, void (*work)(void *), void *arg);
/* Reads len bytes of the partial of file at off (through its data fd). */
void ffx_read_partial(peer_file_t *file, uint64_t off, void *buf, size_t len);

#endif
