/* store_fixture.h - helpers shared by the chunk store and cache unit tests:
 * temp cache dirs, deterministic file contents, manifests built through the
 * real parser, fetching a release chunk by chunk, and the "everything
 * visible is exactly what the manifest says" check. Test process only.
 */
#ifndef WS_STORE_FIXTURE_H
#define WS_STORE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"
#include "store.h"

#define FX_CS (1u << 20) /* smallest legal chunk size keeps tests fast */

typedef struct {
  const char *name;
  const uint8_t *data;
  size_t size;
} fx_file_t;

/* New temp directory (malloc'd path). */
char *fx_tmpdir(void);
/* Removes a tree (also read-only blobs). */
void fx_rmrf(const char *path);
/* Deterministic bytes from seed (malloc'd). */
uint8_t *fx_pattern(size_t n, uint32_t seed);
/* Builds manifest JSON for files (with chunk hashes unless whole) and parses
 * it; *m and *bytes are new. model/version may be NULL. */
void fx_manifest(const char *model, const char *version, const fx_file_t *f,
                 size_t n, int whole, ws_manifest_t **m, char **bytes,
                 size_t *len);
/* Writes every missing chunk of file i from data and finishes the file.
 * Returns what ws_store_file_finish returned; *written counts chunks
 * actually written by this call (may be NULL). */
int fx_fetch_file(ws_store_t *st, const ws_manifest_t *m, uint32_t i,
                  const uint8_t *data, uint32_t *written);
/* begin + fetch every file + publish; returns the first error. */
int fx_fetch_release(ws_store_t *st, const ws_manifest_t *m, const char *bytes,
                     size_t len, const uint8_t *const *datas,
                     uint32_t *written);
/* Checks every blob hashes to its name and every published release's
 * manifest hashes to its name and its files (through the symlinks) to the
 * manifest's sha256s. Returns the number of violations. *nblobs and
 * *nreleases (may be NULL) count what is visible. */
int fx_check_visible(const char *root, int *nblobs, int *nreleases);

#endif
