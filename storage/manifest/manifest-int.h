/* manifest-int.h - shared only by manifest*.c in this folder (parse,
 * serialize, build). Not part of the public manifest interface. */
#ifndef WS_MANIFEST_INT_H
#define WS_MANIFEST_INT_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

/* Writes a formatted reason into errbuf (if any) and returns err. */
int ws_manifest_fail(char *errbuf, size_t errlen, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reason why name breaks a manifest name rule, or NULL if it is valid. */
const char *ws_manifest_name_problem(const char *name, size_t len);

/* Rejects duplicate names and a name that is a directory of another.
 * 0, WS_EDUPNAME, WS_EPATH or -ENOMEM. */
int ws_manifest_check_names(const ws_mfile_t *files, uint32_t n, char *errbuf,
                            size_t errlen);

/* One file for the parallel hasher (manifest_hash.c). The caller fills
 * path, size, nchunks and chunks (nchunks slots, or NULL when nchunks is 0);
 * the hasher writes sha256 and chunks[]. front/back are the hasher's. */
typedef struct {
  char *path;        /* borrowed */
  uint64_t size;     /* expected size; a different size is WS_EDIGEST */
  uint32_t nchunks;  /* chunk hashes wanted (0: whole file only) */
  ws_hash_t sha256;  /* out */
  ws_hash_t *chunks; /* out, borrowed array of nchunks */
  uint32_t front;    /* chunks [0, front) claimed by the file pass */
  uint32_t back;     /* chunks [back, nchunks) claimed by helpers */
} ws_mhash_job_t;

/* Hashes every job on up to nthreads threads (see manifest_hash.c for the
 * schedule). Blocking. 0 or the first error, described in errbuf. */
int ws_manifest_hash_jobs(ws_mhash_job_t *jobs, uint32_t n, uint32_t chunk_size,
                          unsigned nthreads, char *errbuf, size_t errlen);

#endif
