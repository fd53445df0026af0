/* ctl_upload.h - the uploads of `p2pctl publish`: every file of a release
 * to S3 (HEAD first, single PUT or multipart with parallel parts) and small
 * in-memory objects (manifest, signature), on one uv loop with the S3
 * client.
 *
 * Per file: PENDING -> HEAD -> (SKIPPED | PUT | MPU_CREATE -> PARTS ->
 * COMPLETE) -> DONE, or FAILED. ctl_upload_pump() keeps at most
 * PUB_MAX_OPEN files open and the S3 client bounds requests in flight.
 *
 * Thread: main thread, on the uploader's loop (file bodies are read with
 * pread by the S3 client: this is a tool, not the daemon).
 */
#ifndef WS_CTL_UPLOAD_H
#define WS_CTL_UPLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "digest.h"
#include "manifest.h"
#include "s3.h"

#define PUB_SINGLE_MAX (64ull << 20)   /* larger files go multipart */
#define PUB_PART_DEFAULT (16ull << 20) /* 16-64 MiB parts */
#define PUB_PART_MAX (5ull << 30)      /* S3's own part limit */
#define PUB_MAX_PARTS 10000u
#define PUB_MAX_OPEN 16u   /* files with an open fd at once */
#define PUB_CONCURRENCY 8u /* S3 requests in flight (--concurrency) */

typedef enum {
  PF_PENDING,
  PF_HEAD,
  PF_PUT,
  PF_MPU_CREATE,
  PF_PARTS,
  PF_COMPLETE,
  PF_DONE,
  PF_FAILED,
  PF_LAST
} pfile_state_t;

typedef struct pub_s pub_t;

typedef struct {
  pub_t *pub;
  const ws_mfile_t *mf; /* NULL for the release's own metadata objects */
  char *path;           /* local file */
  char *key;            /* object key */
  uint64_t size;
  char sha_hex[WS_SHA256_HEX_LEN + 1];
  pfile_state_t state;
  int fd;
  char *upload_id;
  uint64_t part_size;
  unsigned nparts, parts_sent, parts_done;
  char **etags;
} pfile_t;

struct pub_s {
  uv_loop_t loop;
  ws_s3_t *s3;
  char *bucket;
  pfile_t *files;
  size_t nfiles, next; /* next: first file not yet started */
  unsigned open;
  int failed;
  int json, progress;
  uint64_t total, uploaded, skipped_bytes;
  unsigned skipped, uploaded_files;
  uv_timer_t bar;
};

/* Starts p's loop, its S3 client (AWS_* environment, concurrency requests
 * in flight) and, on a terminal, the progress bar. 0 or -1 (logged;
 * nothing left open). */
int ctl_upload_open(pub_t *p, unsigned concurrency);
/* Closes what ctl_upload_open started and runs the loop dry. */
void ctl_upload_close(pub_t *p);
/* Starts files until PUB_MAX_OPEN are open (again after each finishes). */
void ctl_upload_pump(pub_t *p);
/* Runs the loop until every request has completed. */
void ctl_upload_run_loop(pub_t *p);
/* Uploads one in-memory object through a memfd; skipped when present
 * with the right size. 0 or an error. Runs the loop. */
int ctl_upload_put_bytes(pub_t *p, const char *key, const void *buf,
                         size_t len);
/* 1 when every file of the manifest is DONE. */
int ctl_upload_all_done(const pub_t *p);
/* Draws the progress bar (a timer callback; also called once at the end). */
void ctl_upload_bar(uv_timer_t *t);
/* Frees the file records (closing open descriptors). */
void ctl_upload_free(pub_t *p);

#endif
