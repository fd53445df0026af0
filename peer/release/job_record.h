/* job_record.h - p2pd's job records: one small JSON file per release being
 * fetched, <cache>/p2pd-jobs/sha256-<hex>.json = {"uri","digest"}, so that a
 * restart (also after kill -9) resumes the prefetch. The store's bitmaps
 * keep the chunks already verified, so only chunks in flight are fetched
 * again. Worker threads only (blocking file I/O).
 */
#ifndef PEER_RELEASE_JOB_RECORD_H
#define PEER_RELEASE_JOB_RECORD_H

#include "digest.h"
#include "ws_err.h"

/* [worker] Writes (atomically: temp file + rename) the record for digest. */
int peer_job_record_write(const char *cache_root, const ws_hash_t *digest,
                          const char *uri) WS_MUST_USE;
/* [worker] Removes the record; missing is fine. */
void peer_job_record_remove(const char *cache_root, const ws_hash_t *digest);

typedef struct {
  char *uri;
  ws_hash_t digest;
} peer_job_record_t;

/* [worker] Reads every record. *out is a new array of *n entries; free
 * with peer_job_records_free. Unreadable records are skipped (logged). */
int peer_job_records_read(const char *cache_root, peer_job_record_t **out,
                          size_t *n) WS_MUST_USE;
void peer_job_records_free(peer_job_record_t *recs, size_t n);

#endif
