/* s3.h - the S3 origin client: ranged GET, HEAD, ListObjectsV2, PUT and
 * multipart upload, signed with libcurl's CURLOPT_AWS_SIGV4, driven by a
 * libcurl multi handle on a libuv loop (curl_uv.h).
 *
 * Thread: a ws_s3_t belongs to the loop it was created on. Every ws_s3_*
 * function except the pure helpers (ws_s3_uri_*, ws_s3_config_*) must be
 * called on that loop's thread, and every callback runs there. Nothing here
 * blocks the loop: credential files are read on the libuv threadpool and the
 * network credential sources (STS, container endpoint, IMDSv2) run on the
 * same multi handle. The one exception is PUT/upload-part, which reads the
 * body from the caller's fd with pread in curl's read callback; only tools
 * (p2pctl publish) upload, never the daemon's loop.
 *
 * Requests: each call returns a new ws_s3_req_t owned by the client. It is
 * queued until a transfer slot (max_concurrency) and valid credentials are
 * available, retried on transient failures (5xx, SlowDown, resets, short
 * bodies, timeouts) with jittered exponential backoff, and completes exactly
 * once through its done callback. Inside the done callback the result
 * accessors (ws_s3_req_*) are valid; the request is freed when the callback
 * returns. ws_s3_req_cancel() completes it with WS_ECANCELED (later, never
 * inside the call).
 *
 * Errors: 0, WS_ES3AUTH (403: bad key/secret/signature/denied),
 * WS_ES3NOKEY (404: no such key or bucket), WS_ECREDS (no credentials),
 * WS_ES3 (any other S3 failure after retries), WS_ETRUNCATED (short body
 * after retries), WS_ECANCELED, -ENOMEM. ws_s3_req_errmsg() gives a one-line
 * message that names the bucket and key and S3's error code.
 */
#ifndef WS_S3_H
#define WS_S3_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ws_err.h"
#include "ws_hist.h"

typedef struct ws_s3_s ws_s3_t;
typedef struct ws_s3_req_s ws_s3_req_t;

typedef enum {
  WS_S3_ADDR_AUTO,    /* virtual-hosted on *.amazonaws.com, else path */
  WS_S3_ADDR_PATH,    /* https://host/bucket/key */
  WS_S3_ADDR_VIRTUAL, /* https://bucket.host/key */
  WS_S3_ADDR_LAST
} ws_s3_addressing_t;

/* Client configuration. Strings are borrowed for the duration of
 * ws_s3_new() only (the client copies them). */
typedef struct {
  const char *endpoint;  /* "http(s)://host[:port]"; NULL: the profile's
                            endpoint_url, else AWS for the region */
  const char *region;    /* NULL: the profile's region, else IMDS's, else
                            "us-east-1" (found by the first resolve) */
  const char *ca_bundle; /* PEM file for TLS; NULL: system store */
  ws_s3_addressing_t addressing; /* AUTO: the profile's addressing_style */
  unsigned max_concurrency;      /* transfers in flight (default 16) */
  unsigned max_attempts;         /* tries per request (default 10) */
  unsigned retry_window_ms;      /* keep retrying transient failures at
                                    least this long (default 30000) */
  unsigned backoff_base_ms;      /* first backoff ceiling (default 100) */
  unsigned backoff_max_ms;       /* backoff ceiling cap (default 5000) */
  unsigned connect_timeout_ms;   /* default 5000 */
  unsigned low_speed_bytes;      /* abort below this many bytes/s ... */
  unsigned low_speed_time_s;     /* ... for this long (default 1 B/s, 20 s) */
  unsigned stall_timeout_ms;     /* a GET or HEAD attempt that receives no
                                    byte for this long is cut and tried
                                    again, resuming; doubles with each
                                    such attempt in a row (default 2000;
                                    0: only the low-speed abort) */
  unsigned creds_timeout_ms;     /* per credential endpoint call (5000) */
  unsigned creds_process_timeout_ms; /* credential_process run (60000) */
  uint64_t list_max_entries;         /* cap on keys one LIST collects (1e6) */
  const char *profile;     /* shared-file profile; NULL: AWS_PROFILE */
  unsigned list_page_size; /* keys per ListObjectsV2 page (1000) */
} ws_s3_config_t;

/* Fills defaults (no environment). */
void ws_s3_config_default(ws_s3_config_t *cfg);
/* Overlays the AWS environment on cfg: AWS_ENDPOINT_URL_S3, then
 * AWS_ENDPOINT_URL; AWS_REGION, then AWS_DEFAULT_REGION; AWS_CA_BUNDLE;
 * WS_S3_ADDRESSING (path|virtual|auto); AWS_PROFILE;
 * WS_S3_CREDENTIAL_PROCESS_TIMEOUT_MS; WS_S3_STALL_TIMEOUT_MS. The strings
 * point into the environment (valid until it changes). What is left unset here
 * is taken from the profile in ~/.aws/config (AWS_CONFIG_FILE) when the client
 * first resolves credentials, on a worker; reading no file here keeps this call
 * cheap on any thread. */
void ws_s3_config_from_env(ws_s3_config_t *cfg);

/* Creates a client on loop. On success *out is new; close with
 * ws_s3_close(). Fails with WS_EUSAGE on a malformed endpoint. */
int ws_s3_new(uv_loop_t *loop, const ws_s3_config_t *cfg,
              ws_s3_t **out) WS_MUST_USE;

typedef void (*ws_s3_close_cb)(void *arg);
/* Cancels every request (their done callbacks run with WS_ECANCELED), closes
 * the uv handles and frees the client; cb (may be NULL) runs once it is gone.
 * Accepts NULL. Must not be called from inside a ws_s3 callback twice. */
void ws_s3_close(ws_s3_t *s3, ws_s3_close_cb cb, void *arg);

/* Counters for metrics; monotonic except in_flight/queued. */
typedef struct {
  uint64_t bytes_rx; /* body bytes delivered to callers */
  uint64_t bytes_tx; /* body bytes uploaded */
  uint64_t requests; /* HTTP attempts sent (incl. retries) */
  uint64_t retries;  /* attempts that were retries */
  uint64_t stalls;   /* attempts cut for receiving nothing for a while */
  uint64_t failures; /* requests that completed with an error */
  uint64_t creds_refreshes;
  unsigned in_flight; /* transfers on the multi handle */
  unsigned queued;    /* requests waiting for a slot/creds/backoff */
  /* Requests that reached S3: seconds from submit to completion, retries
   * and the body included (s3_req_finish). */
  ws_hist_t latency;
} ws_s3_stats_t;
void ws_s3_stats_get(const ws_s3_t *s3, ws_s3_stats_t *out);

/* Which credential source is in use ("env", "shared-file:<profile>",
 * "web-identity", "container", "imds") or NULL before the first resolve. */
const char *ws_s3_creds_source(const ws_s3_t *s3);
/* Access key id of the current credentials or NULL. */
const char *ws_s3_creds_access_key(const ws_s3_t *s3);
/* When the current credentials expire (epoch ms; 0: never or none). */
int64_t ws_s3_creds_expiry(const ws_s3_t *s3);
/* The signing region in use ("us-east-1" until the first resolve). */
const char *ws_s3_region(const ws_s3_t *s3);

/* ---- s3://bucket/key URIs (pure, any thread) ---- */

typedef struct {
  char *bucket; /* 3..63 chars, validated */
  char *key;    /* may be "" (prefix or bucket root); never NULL */
} ws_s3_uri_t;

/* Parses "s3://bucket[/key]". On success out holds new strings (free with
 * ws_s3_uri_free). WS_EUSAGE when malformed. */
int ws_s3_uri_parse(const char *uri, ws_s3_uri_t *out) WS_MUST_USE;
void ws_s3_uri_free(ws_s3_uri_t *u);

/* ---- requests ---- */

/* Completion: status is 0 or a negative error (see top). Runs once, on the
 * loop thread; req is freed when it returns. */
typedef void (*ws_s3_done_cb)(ws_s3_req_t *req, int status, void *arg);

/* Completes (status 0 or WS_ECREDS with ws_s3_req_errmsg saying why) once
 * credentials are available, resolving them if needed; then
 * ws_s3_creds_source() tells where they came from. */
ws_s3_req_t *ws_s3_creds_resolve(ws_s3_t *s3, ws_s3_done_cb done, void *arg);

/* Body bytes of a GET: buf[0..len) is the object's content at byte offset
 * `offset` (absolute in the object). Return WS_S3_DATA_OK when consumed,
 * WS_S3_DATA_PAUSE to pause the transfer without consuming these bytes (they
 * are delivered again after ws_s3_req_resume()), or a negative error to
 * abort the request with that status (not retried). After a retry, delivery
 * continues at the first byte not yet consumed: bytes are never delivered
 * twice and never skipped. */
enum { WS_S3_DATA_OK = 0, WS_S3_DATA_PAUSE = 1 };
typedef int (*ws_s3_data_cb)(ws_s3_req_t *req, uint64_t offset, const void *buf,
                             size_t len, void *arg);

#define WS_S3_LEN_TO_END UINT64_MAX

typedef struct {
  uint64_t offset;      /* first byte (0) */
  uint64_t len;         /* bytes; WS_S3_LEN_TO_END for the rest of the object */
  const char *if_match; /* ETag the object must still have; NULL: none */
} ws_s3_range_t;

/* GET s3://bucket/key, the whole object (range NULL) or a byte range.
 * Strings and range are copied. A ranged answer is accepted only as a 206
 * whose Content-Range matches the request; the body length is checked
 * against Content-Length. Returns a request handle (borrowed; valid until
 * done runs) or NULL on -ENOMEM, in which case nothing is called. */
ws_s3_req_t *ws_s3_get(ws_s3_t *s3, const char *bucket, const char *key,
                       const ws_s3_range_t *range, ws_s3_data_cb data,
                       ws_s3_done_cb done, void *arg);

/* HEAD: on success ws_s3_req_size() and ws_s3_req_etag() are set. */
ws_s3_req_t *ws_s3_head(ws_s3_t *s3, const char *bucket, const char *key,
                        ws_s3_done_cb done, void *arg);

typedef struct {
  char *key;
  uint64_t size;
  char *etag; /* quotes stripped */
} ws_s3_entry_t;

/* ListObjectsV2 of every key under prefix (all pages, at most
 * list_max_entries entries or the request fails with WS_ELIMIT). With a
 * delimiter (may be NULL) common prefixes are skipped. Result via
 * ws_s3_req_entries(). */
ws_s3_req_t *ws_s3_list(ws_s3_t *s3, const char *bucket, const char *prefix,
                        const char *delimiter, ws_s3_done_cb done, void *arg);

/* Body of an upload: len bytes of fd from offset (the fd is borrowed and
 * must stay open until done runs). sha256_hex (64 hex chars, may be NULL) is
 * the body's hash: when given S3 verifies it; when NULL the body is sent as
 * UNSIGNED-PAYLOAD. */
typedef struct {
  int fd;
  uint64_t offset;
  uint64_t len;
  const char *sha256_hex;
} ws_s3_body_t;

/* PUT one object. On success ws_s3_req_etag() is the new ETag. */
ws_s3_req_t *ws_s3_put(ws_s3_t *s3, const char *bucket, const char *key,
                       const ws_s3_body_t *body, ws_s3_done_cb done, void *arg);

/* The precondition of a conditional PUT (compare-and-swap on an object):
 * if_match is the ETag the object must still have (quotes optional), or
 * if_none_match asks that no object exist (If-None-Match: *). Exactly one
 * must be set. */
typedef struct {
  const char *if_match;
  int if_none_match;
} ws_s3_cond_t;

/* PUT one object only if cond holds. A precondition that fails completes
 * with WS_ES3 and ws_s3_req_http_status() 412 (409 when S3 saw a conflicting
 * conditional write in flight); neither is retried. Strings copied. */
ws_s3_req_t *ws_s3_put_if(ws_s3_t *s3, const char *bucket, const char *key,
                          const ws_s3_body_t *body, const ws_s3_cond_t *cond,
                          ws_s3_done_cb done, void *arg);

/* Multipart upload. create → ws_s3_req_upload_id(); part (1..10000) →
 * ws_s3_req_etag(); complete with every part's ETag in order; abort frees
 * the parts on the server. */
ws_s3_req_t *ws_s3_mpu_create(ws_s3_t *s3, const char *bucket, const char *key,
                              ws_s3_done_cb done, void *arg);
ws_s3_req_t *ws_s3_mpu_part(ws_s3_t *s3, const char *bucket, const char *key,
                            const char *upload_id, unsigned part_number,
                            const ws_s3_body_t *body, ws_s3_done_cb done,
                            void *arg);
ws_s3_req_t *ws_s3_mpu_complete(ws_s3_t *s3, const char *bucket,
                                const char *key, const char *upload_id,
                                const char *const *etags, unsigned nparts,
                                ws_s3_done_cb done, void *arg);
ws_s3_req_t *ws_s3_mpu_abort(ws_s3_t *s3, const char *bucket, const char *key,
                             const char *upload_id, ws_s3_done_cb done,
                             void *arg);

/* Resumes a GET paused by WS_S3_DATA_PAUSE. Safe to call when not paused.
 * Call it from outside the data callback (e.g. from a uv_fs callback). */
void ws_s3_req_resume(ws_s3_req_t *req);
/* Cancels: done runs later with WS_ECANCELED (unless it already ran). */
void ws_s3_req_cancel(ws_s3_req_t *req);

/* Result accessors, valid inside the done callback (and, for
 * ws_s3_req_etag/size, inside the data callback once headers arrived). */
long ws_s3_req_http_status(const ws_s3_req_t *req);   /* last HTTP status */
const char *ws_s3_req_errmsg(const ws_s3_req_t *req); /* "" when ok */
const char *ws_s3_req_etag(const ws_s3_req_t *req);   /* NULL if none */
/* Object size: HEAD Content-Length, or the total of a GET's
 * Content-Range / Content-Length. UINT64_MAX when unknown. */
uint64_t ws_s3_req_size(const ws_s3_req_t *req);
const char *ws_s3_req_upload_id(const ws_s3_req_t *req);
/* LIST result: borrowed array of n entries. */
const ws_s3_entry_t *ws_s3_req_entries(const ws_s3_req_t *req, size_t *n);
unsigned ws_s3_req_attempts(const ws_s3_req_t *req);

#endif
