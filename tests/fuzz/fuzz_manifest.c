/* fuzz_manifest.c - libFuzzer target for ws_manifest_parse.
 *
 * Any input: parse must return cleanly (ASan/UBSan watch memory). When it
 * accepts, the manifest's invariants are checked and abort() on violation:
 * geometry sums, every name passes the name rule, locate() maps every
 * global chunk back to its file, and serialize -> parse -> serialize is a
 * fixed point with the digest of the serialized bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_invariants(const ws_manifest_t *m) {
  uint64_t total = 0, chunks = 0;
  for (uint32_t i = 0; i < m->nfiles; i++) {
    const ws_mfile_t *f = &m->files[i];
    uint32_t fi = 0, j = 0;
    if (ws_manifest_check_name(f->name, strlen(f->name)) != 0 ||
        f->first_chunk != chunks ||
        f->nchunks != ws_manifest_nchunks(f->size, m->chunk_size) ||
        (!m->whole_file && f->nchunks > 0 && f->chunks == NULL))
      abort();
    if (f->nchunks > 0) {
      uint32_t last = f->nchunks - 1;
      if (ws_manifest_locate(m, f->first_chunk + last, &fi, &j) != 0 ||
          fi != i || j != last || ws_mfile_chunk_len(m, f, last) == 0 ||
          (uint64_t)last * m->chunk_size + ws_mfile_chunk_len(m, f, last) !=
              f->size)
        abort();
    }
    total += f->size;
    chunks += f->nchunks;
  }
  if (total != m->total_size || chunks != m->total_chunks ||
      !ws_manifest_chunk_size_ok(m->chunk_size))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ws_manifest_limits_t lim;
  ws_manifest_t *m = NULL, *m2 = NULL;
  char *t1 = NULL, *t2 = NULL;
  size_t l1 = 0, l2 = 0;
  char err[256];
  ws_hash_t d;

  ws_manifest_limits_default(&lim);
  lim.max_bytes = 1 << 20;
  lim.max_files = 1000;
  if (ws_manifest_parse((const char *)data, size, &lim, &m, err, sizeof(err)) !=
      0)
    return 0;
  check_invariants(m);
  if (ws_manifest_serialize(m, &t1, &l1) != 0)
    abort();
  /* Re-parse with default limits: the serialized form may be longer. */
  if (ws_manifest_parse(t1, l1, NULL, &m2, err, sizeof(err)) != 0)
    abort();
  if (ws_sha256(t1, l1, &d) != 0 || !ws_hash_eq(&d, &m2->digest))
    abort();
  check_invariants(m2);
  if (ws_manifest_serialize(m2, &t2, &l2) != 0 || l1 != l2 ||
      memcmp(t1, t2, l1) != 0 || m2->nfiles != m->nfiles ||
      m2->whole_file != m->whole_file || m2->total_size != m->total_size)
    abort();
  free(t1);
  free(t2);
  ws_manifest_free(m);
  ws_manifest_free(m2);
  return 0;
}
