/* s3-int.h - what the s3_*.c files share; not part of the public API.
 *
 * The pure pieces (encoding, URL building, XML extraction, retry policy,
 * credential parsing, refresh timing) are declared here so unit tests can
 * call them directly. Thread: pure functions are thread-safe; everything
 * taking a ws_s3_t runs on its loop thread.
 */
#ifndef WS_S3_INT_H
#define WS_S3_INT_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "curl_uv.h"
#include "s3.h"

/* Caps on what a remote party can make us hold: every buffer filled from
 * the network or a file has one. */
#define S3_ERRBODY_MAX (64u << 10)    /* error document kept for the message */
#define S3_XMLBODY_MAX (16u << 20)    /* one ListObjectsV2 page / reply */
#define S3_ETAG_MAX 256               /* bytes of an ETag header */
#define S3_KEY_MAX 1024               /* S3's own limit on key length */
#define S3_CREDS_BODY_MAX (64u << 10) /* STS/container/IMDS reply */
#define S3_CREDS_FIELD_MAX 4096       /* one key/secret/token string */
#define S3_CREDS_FILE_MAX (1u << 20)  /* shared credentials/token file */
#define S3_INI_ENTRIES_MAX 4096       /* key = value lines in one file */
#define S3_INI_NAME_MAX 256           /* a section or sub-section name */
#define S3_PROC_OUT_MAX (64u << 10)   /* credential_process stdout */
#define S3_PROC_ERR_MAX 1024          /* stderr kept for the message */
#define S3_PROC_TIMEOUT_MS 60000      /* credential_process run time */
#define S3_IMDS_TIMEOUT_MS                                                     \
  1000 /* each IMDS call: pods usually cannot reach it */
#define S3_ERRMSG_LEN 512
#define S3_REFRESH_MARGIN_MS (5 * 60 * 1000) /* refresh before Expiration */
#define S3_REFRESH_JITTER_MS (60 * 1000)
#define S3_EMPTY_SHA256                                                        \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* ---- bounded growable buffer ---- */
typedef struct {
  char *p; /* NUL-terminated when non-NULL */
  size_t len, cap, max;
} s3_buf_t;

/* Appends n bytes; WS_ELIMIT past b->max, -ENOMEM. */
int s3_buf_add(s3_buf_t *b, const void *d, size_t n) WS_MUST_USE;
int s3_buf_str(s3_buf_t *b, const char *s) WS_MUST_USE;
void s3_buf_free(s3_buf_t *b);

/* ---- s3_req.c: endpoint, addressing, encoding, headers ---- */
typedef struct {
  char *scheme;   /* "http" or "https" */
  char *host;     /* without port; IPv6 kept in brackets */
  char *hostport; /* host[:port] as written */
  char *path;     /* base path without trailing '/', usually "" */
  int is_ip;      /* virtual-hosted addressing impossible */
  int is_aws;     /* *.amazonaws.com */
} s3_endpoint_t;

/* Parses "http(s)://host[:port][/path]" into new strings. WS_EUSAGE. */
int s3_endpoint_parse(const char *url, s3_endpoint_t *ep) WS_MUST_USE;
void s3_endpoint_free(s3_endpoint_t *ep);
/* Bucket usable as a DNS label for virtual-hosted style (no dots on
 * https, since the wildcard certificate covers one label). */
int s3_bucket_dns_ok(const char *bucket, int https);
/* Valid S3 bucket name (3-63, lowercase, digits, '.', '-'). */
int s3_bucket_valid(const char *bucket);

/* Appends s[0..n) percent-encoded per SigV4 (unreserved A-Za-z0-9-._~
 * kept; '/' kept when keep_slash; upper-case hex). */
/* Appends k=v (v URI-encoded) to an application/x-www-form-urlencoded
 * body, with '&' between pairs. 0 or -ENOMEM. */
int s3_form_add(s3_buf_t *b, const char *k, const char *v) WS_MUST_USE;
int s3_uri_encode(s3_buf_t *out, const char *s, size_t n,
                  int keep_slash) WS_MUST_USE;

typedef struct {
  const char *name;
  const char *value; /* NULL or "" -> "name=" */
} s3_qparam_t;

/* Builds the request URL: endpoint + addressing + encoded key + sorted,
 * encoded query. *out is new. WS_EUSAGE if the addressing cannot be used. */
int s3_url_build(const s3_endpoint_t *ep, ws_s3_addressing_t addr,
                 const char *bucket, const char *key, const s3_qparam_t *q,
                 size_t nq, char **out) WS_MUST_USE;

/* "aws:amz:<region>:s3" for CURLOPT_AWS_SIGV4. */
int s3_sigv4_param(const char *region, char *buf, size_t len) WS_MUST_USE;

/* ---- s3_xml.c: a bounded extractor for the few elements S3 sends ---- */

/* Finds the first element <name> in doc[0..len) at or after *pos. On
 * success sets [*start,*end) to its inner text range and *pos past the
 * closing tag. Returns 0, WS_ENOTFOUND, or WS_EBADMSG if unterminated. */
int s3_xml_find(const char *doc, size_t len, const char *name, size_t *pos,
                size_t *start, size_t *end) WS_MUST_USE;
/* Decodes XML text (the five named entities and &#N; / &#xH; as UTF-8)
 * into a new NUL-terminated string of at most max bytes. WS_EBADMSG on a
 * malformed entity or a raw '<', WS_ELIMIT when too long. */
int s3_xml_text(const char *s, size_t n, size_t max, char **out) WS_MUST_USE;
/* find + text in one call: the first <name> anywhere in doc. */
int s3_xml_get(const char *doc, size_t len, const char *name, size_t max,
               char **out) WS_MUST_USE;

/* ---- s3_retry.c ---- */
typedef enum {
  S3_RETRY_NO,      /* final */
  S3_RETRY_YES,     /* transient: back off and try again */
  S3_RETRY_REFRESH, /* credentials/clock: refresh creds, retry once */
  S3_RETRY_LAST
} s3_retry_t;

/* Classifies one attempt. cc: curl's result; http: status (0 if none);
 * code: S3 <Code> or NULL; short_body: fewer body bytes than announced. */
s3_retry_t s3_retry_classify(CURLcode cc, long http, const char *code,
                             int short_body);
/* Full-jitter exponential backoff: uniform in [0, min(max, base*2^n)]
 * for retry number n (0-based); rnd is a uniform 32-bit random value. */
uint64_t s3_retry_delay_ms(unsigned base_ms, unsigned max_ms, unsigned n,
                           uint32_t rnd);
/* Whether another attempt is allowed after `attempts` tries spanning
 * elapsed_ms: until both max_attempts and window_ms are used up, never
 * more than 4 * max_attempts. */
int s3_retry_more(unsigned max_attempts, unsigned window_ms, unsigned attempts,
                  uint64_t elapsed_ms);
/* A final answer that says the bucket lives in another region (301
 * PermanentRedirect, 400 AuthorizationHeaderMalformed or
 * IllegalLocationConstraint): writes "bucket B is in R, not ours: set ..."
 * into out and returns 1; 0 when it is not such an answer. The bucket's
 * region comes from the x-amz-bucket-region header (hdr_region, may be "")
 * or the error document's <Region>. */
int s3_region_hint(long http, const char *code, const char *hdr_region,
                   const char *doc, size_t doclen, const char *bucket,
                   const char *region, char *out, size_t outlen);
/* The WS_E* status for a final HTTP answer. */
int s3_status_from_http(long http, const char *code);
uint32_t s3_rand32(void);
uint64_t s3_now_ms(void); /* wall clock, ms since epoch */

/* ---- s3_stall.c: the stall deadline of an attempt ---- */
/* Arms the deadline of r's attempt about to start (rx_ms, stall_ms). */
void s3_stall_begin(ws_s3_req_t *r);
/* curl's progress callback (CURLOPT_XFERINFOFUNCTION, data r): at least
 * once a second while the low-speed check runs; cuts the attempt (r->stalled,
 * CURLE_ABORTED_BY_CALLBACK) once nothing came for its deadline. Time
 * during which r was paused by its consumer does not count. */
int s3_stall_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                      curl_off_t ultotal, curl_off_t ulnow);
/* After an attempt cut for a stall: says why into why, counts it, asks
 * for a new connection, and doubles the next deadline unless the attempt
 * received bytes (then the retry budget starts afresh). */
void s3_stall_cut(ws_s3_req_t *r, char *why, size_t whylen);

/* ---- credentials: s3_creds_parse.c (pure), s3_creds.c (chain) ---- */
typedef enum {
  S3_SRC_NONE,
  S3_SRC_ENV,
  S3_SRC_FILE,
  S3_SRC_WEBID,
  S3_SRC_CONTAINER,
  S3_SRC_IMDS,
  S3_SRC_ASSUME,  /* role_arn + source_profile: STS AssumeRole */
  S3_SRC_PROCESS, /* credential_process */
  S3_SRC_LAST
} s3_src_t;

typedef struct {
  char *akid;
  char *secret;
  char *token;        /* NULL for long-term keys */
  int64_t expires_ms; /* epoch ms; 0 = does not expire */
  char source[64];
} s3_creds_t;

void s3_creds_clear(s3_creds_t *c);
/* Deep copy into *dst (cleared first on success). */
int s3_creds_copy(s3_creds_t *dst, const s3_creds_t *src) WS_MUST_USE;

/* Environment snapshot taken on the loop thread; strings borrowed. */
typedef struct {
  const char *akid, *secret, *token;
  const char *shared_file; /* AWS_SHARED_CREDENTIALS_FILE */
  const char *home;
  const char *profile;
  const char *role_arn, *web_token_file, *session_name;
  const char *sts_endpoint, *region;
  const char *container_full_uri, *container_rel_uri;
  const char *container_token_file, *container_token;
  const char *imds_endpoint, *imds_disabled;
  const char *config_file;      /* AWS_CONFIG_FILE */
  const char *endpoint_global;  /* AWS_ENDPOINT_URL (STS falls back to it) */
  const char *ignore_endpoints; /* AWS_IGNORE_CONFIGURED_ENDPOINT_URLS */
  unsigned process_timeout_ms;  /* credential_process cap */
} s3_env_t;

/* region_override: the client's explicit region (NULL: AWS_REGION, then
 * AWS_DEFAULT_REGION). */
void s3_env_load(s3_env_t *env, const char *profile_override,
                 const char *region_override);

/* What the local part of the chain decided (worker thread). */
typedef struct {
  s3_src_t src;
  s3_creds_t creds;  /* ENV, FILE, PROCESS */
  s3_creds_t source; /* ASSUME: the source profile's, to sign with */
  char *url;         /* WEBID/ASSUME: STS (NULL: regional, once the region is
                        known), CONTAINER, IMDS base */
  char *body;        /* WEBID/ASSUME form body */
  char *auth;        /* CONTAINER Authorization value */
  /* settings: environment first, then the profile */
  char *region;                  /* NULL: not set anywhere */
  char *endpoint;                /* the profile's S3 endpoint_url or NULL */
  ws_s3_addressing_t addressing; /* the profile's s3.addressing_style */
  char *imds_base;               /* NULL when IMDS is disabled */
  int status; /* 0 or WS_ECREDS etc. for a configured-but-broken src */
  char errmsg[S3_ERRMSG_LEN];
} s3_plan_t;

struct s3_profile_s;

/* Walks env -> profile (role_arn, credentials file keys,
 * credential_process, config file keys) -> web identity -> container ->
 * IMDS, reading the files it needs and running credential_process
 * (blocking: worker thread or tools only). */
void s3_creds_plan(const s3_env_t *env, s3_plan_t *plan);
void s3_plan_clear(s3_plan_t *plan);
/* Plans AssumeRoleWithWebIdentity for role with the token in token_file. */
void s3_plan_webid(const s3_env_t *e, s3_plan_t *p, const char *role,
                   const char *token_file, const char *session,
                   const struct s3_profile_s *pr);
/* Reads a whole small file (at most S3_CREDS_FILE_MAX; blocking). */
int s3_file_read(const char *path, char **out, size_t *len) WS_MUST_USE;

/* ---- s3_ini.c: the INI dialect of the AWS shared files ---- */
typedef struct {
  char *section; /* "default", "profile x", "services y", "x" */
  char *key;     /* lower case; "s3.addressing_style" inside "s3 =" */
  char *value;
} s3_ini_ent_t;
typedef struct {
  s3_ini_ent_t *e;
  size_t n, cap;
} s3_ini_t;
/* Parses text[0..len). On failure *bad_line is the 1-based line (0: the
 * file as a whole) and the result is WS_EBADMSG or WS_ELIMIT. */
int s3_ini_parse(const char *text, size_t len, s3_ini_t *out,
                 size_t *bad_line) WS_MUST_USE;
/* The value of key in section (the last one written), or NULL. Borrowed. */
const char *s3_ini_get(const s3_ini_t *ini, const char *section,
                       const char *key);
int s3_ini_has_section(const s3_ini_t *ini, const char *section);
void s3_ini_free(s3_ini_t *ini);

/* ---- s3_profile.c: one profile of the shared files ---- */
typedef struct s3_profile_s {
  const char *name; /* borrowed from the env */
  char cfg_path[1024], cred_path[1024];
  s3_ini_t cfg, cred;
} s3_profile_t;
/* Reads and parses both files (a missing file is empty). On failure err
 * names the file and line. */
int s3_profile_load(const s3_env_t *e, s3_profile_t *pr, char *err,
                    size_t errlen) WS_MUST_USE;
void s3_profile_free(s3_profile_t *pr);
/* key of profile name: credentials file first, then config. Borrowed. */
const char *s3_profile_get(const s3_profile_t *pr, const char *name,
                           const char *key);
/* region, endpoint, addressing, imds_base into p; WS_EUSAGE (p->errmsg
 * set) for an invalid value. */
int s3_profile_settings(const s3_env_t *e, const s3_profile_t *pr,
                        s3_plan_t *p) WS_MUST_USE;
/* The profile's credential source into p: 1 when it has one (p->status
 * says whether it worked), 0 when it has none. */
int s3_profile_creds(const s3_env_t *e, const s3_profile_t *pr, s3_plan_t *p);
/* STS endpoint: AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, the profile's sts
 * endpoint_url, its endpoint_url, then https://sts.<region>.amazonaws.com/
 * (NULL when region is NULL). pr may be NULL. New string. */
char *s3_profile_sts_url(const s3_env_t *e, const s3_profile_t *pr,
                         const char *region);
/* A region name: 1-32 of [a-z0-9-]. */
int s3_region_valid(const char *region);

/* ---- s3_creds_proc.c: credential_process (blocking: worker/tools) ---- */
/* Runs cmd with /bin/sh -c, at most timeout_ms; err gets a one-line reason. */
int s3_creds_process(const char *cmd, unsigned timeout_ms, s3_creds_t *out,
                     char *err, size_t errlen) WS_MUST_USE;
/* Its JSON: Version 1, AccessKeyId, SecretAccessKey, SessionToken,
 * Expiration (optional). */
int s3_creds_parse_process(const char *text, size_t len,
                           s3_creds_t *out) WS_MUST_USE;

/* Parses an INI credentials file for profile; WS_ENOTFOUND if the profile
 * or its keys are missing. */
int s3_creds_parse_ini(const char *text, size_t len, const char *profile,
                       s3_creds_t *out) WS_MUST_USE;
/* Copies the string member name of JSON object o into *out (new): a
 * non-empty string of at most S3_CREDS_FIELD_MAX bytes. Absent: 0 with
 * *out untouched unless required (then WS_EBADMSG, as for a bad value). */
struct cJSON;
int s3_json_str(const struct cJSON *o, const char *name, int required,
                char **out) WS_MUST_USE;
/* The JSON credential shapes: container/IMDS ({AccessKeyId,
 * SecretAccessKey, Token, Expiration}) and credential_process (Version 1,
 * SessionToken; Expiration may be null). */
typedef struct {
  size_t max_bytes;      /* longer input: WS_ELIMIT */
  const char *token_key; /* the optional session token's key */
  int version1;          /* "Version": 1 required, null Expiration allowed */
} s3_json_keys_t;
int s3_creds_parse_json_keys(const char *text, size_t len,
                             const s3_json_keys_t *k,
                             s3_creds_t *out) WS_MUST_USE;
/* Container / IMDS JSON (AccessKeyId, SecretAccessKey, Token, Expiration). */
int s3_creds_parse_json(const char *text, size_t len,
                        s3_creds_t *out) WS_MUST_USE;
/* STS AssumeRoleWithWebIdentity XML reply. */
int s3_creds_parse_sts(const char *text, size_t len,
                       s3_creds_t *out) WS_MUST_USE;
/* ISO 8601 UTC time ("2026-01-02T03:04:05Z", fraction and +00:00 ok) to
 * epoch ms. WS_EBADMSG. */
int s3_time_parse(const char *s, int64_t *out_ms) WS_MUST_USE;
/* When to refresh credentials that expire at expires_ms: a few minutes
 * before (jittered by rnd), at most half the remaining lifetime ahead, never
 * in the past. -1 when they never expire. */
int64_t s3_creds_refresh_at(int64_t now_ms, int64_t expires_ms, uint32_t rnd);

typedef struct s3_provider_s s3_provider_t;
/* The settings the first resolve found (environment, profile, IMDS):
 * region (NULL: none anywhere), the profile's S3 endpoint (NULL: none),
 * the profile's addressing. Borrowed. */
void s3_provider_settings(const s3_provider_t *p, const char **region,
                          const char **endpoint, ws_s3_addressing_t *addr);
/* Called when a resolve finishes: status 0 (creds available) or error. */
typedef void (*s3_provider_cb)(void *arg, int status);
int s3_provider_new(uv_loop_t *loop, ws_curl_uv_t *cu,
                    const ws_s3_config_t *cfg, s3_provider_cb cb, void *arg,
                    s3_provider_t **out) WS_MUST_USE;
/* Valid credentials (not expiring within 10 s) or NULL. Borrowed until the
 * next resolve completes. */
const s3_creds_t *s3_provider_get(s3_provider_t *p);
/* Starts a resolve unless one runs; force drops the current creds. */
void s3_provider_resolve(s3_provider_t *p, int force);
int s3_provider_busy(const s3_provider_t *p);
const char *s3_provider_errmsg(const s3_provider_t *p);
uint64_t s3_provider_refreshes(const s3_provider_t *p);
/* Stops timers and in-flight fetches; frees p once its work is done, then
 * calls cb(arg). */
void s3_provider_close(s3_provider_t *p, void (*cb)(void *), void *arg);

/* ---- the network half of the chain: s3_creds_net.c ---- */
typedef struct s3_fetch_s s3_fetch_t;
typedef void (*s3_fetch_cb)(void *arg, int status, long http, const char *body,
                            size_t len, const char *err);
/* One small HTTP exchange on the shared multi handle (body capped at
 * S3_CREDS_BODY_MAX). headers taken (freed at the end). method
 * "GET"/"PUT"/"POST". sign (may be NULL: unsigned) and sigv4
 * ("aws:amz:<region>:sts") are copied by curl before the call returns. */
s3_fetch_t *s3_fetch_start(ws_curl_uv_t *cu, const char *method,
                           const char *url, struct curl_slist *headers,
                           const char *body, unsigned timeout_ms,
                           const char *ca_bundle, const s3_creds_t *sign,
                           const char *sigv4, s3_fetch_cb cb, void *arg);
/* Cancels without calling cb. */
void s3_fetch_cancel(s3_fetch_t *f);

/* ---- the client and its requests (s3_client.c, s3_xfer.c, s3_ops.c) ---- */
typedef enum {
  S3_OP_GET,
  S3_OP_HEAD,
  S3_OP_LIST,
  S3_OP_PUT,
  S3_OP_MPU_CREATE,
  S3_OP_MPU_PART,
  S3_OP_MPU_COMPLETE,
  S3_OP_MPU_ABORT,
  S3_OP_CREDS, /* no HTTP: completes once credentials are available */
  S3_OP_LAST
} s3_op_t;

/* QUEUED -> RUNNING -> (BACKOFF -> QUEUED)* -> DONE; QUEUED also loops
 * for LIST pages and credential refreshes. Every change goes through
 * s3_req_set_state, whose table lists the legal ones. DONE requests are
 * freed. */
typedef enum {
  S3_REQ_QUEUED,
  S3_REQ_RUNNING,
  S3_REQ_BACKOFF,
  S3_REQ_DONE,
  S3_REQ_LAST
} s3_req_state_t;

#define S3_UNKNOWN UINT64_MAX

struct ws_s3_req_s {
  ws_s3_t *s3;
  ws_s3_req_t *prev, *next; /* s3->reqs: every request not yet DONE */
  uint64_t id;
  s3_op_t op;
  s3_req_state_t state;
  ws_curl_uv_xfer_t xfer;
  char *bucket, *key;
  ws_s3_done_cb done;
  void *arg;
  /* GET */
  ws_s3_data_cb data;
  uint64_t off, len;  /* requested range; len S3_UNKNOWN = to the end */
  uint64_t delivered; /* bytes the caller consumed, over all attempts */
  /* uploads */
  ws_s3_body_t body;
  char body_sha[65];
  uint64_t sent; /* body bytes read in this attempt */
  char *upload_id;
  unsigned part;
  char *post; /* POST body (complete) */
  size_t post_len;
  /* LIST */
  char *prefix, *delim, *token;
  ws_s3_entry_t *entries;
  size_t nentries, centries;
  /* one attempt */
  struct curl_slist *hdrs;
  char *url;
  long http;
  int hdr_checked;
  uint64_t cl; /* Content-Length or S3_UNKNOWN */
  uint64_t cr_a, cr_b, cr_total;
  int have_cr;
  char *hdr_etag;
  char hdr_region[40]; /* x-amz-bucket-region of this answer, or "" */
  uint64_t expect;     /* body bytes this attempt should carry or S3_UNKNOWN */
  uint64_t got;
  int paused;
  uint64_t rx_ms;    /* when a byte last came, or the attempt began */
  uint64_t rx_seen;  /* body bytes curl had counted then */
  unsigned stall_ms; /* this attempt's stall deadline (0: none) */
  int stalled;       /* cut for it */
  int verr;          /* this attempt failed validation with this status */
  int verr_retry;    /* ... and another attempt may fix it */
  s3_buf_t xml;      /* error document or XML reply */
  char curlerr[CURL_ERROR_SIZE];
  /* results and retry bookkeeping */
  char *etag; /* learned from the first answer; If-Match on later ones */
  char *if_match;
  int if_none_match; /* PUT: If-None-Match: * */
  uint64_t size;
  char errmsg[S3_ERRMSG_LEN];
  unsigned attempts;
  unsigned stalls; /* attempts in a row cut for a stall, nothing received */
  int fresh;       /* the next attempt opens a new connection */
  uint64_t first_ms, due_ms;
  int refreshed;
  int cancel, resume, cb_status;
};

struct ws_s3_s {
  uv_loop_t *loop;
  ws_curl_uv_t *cu;
  s3_provider_t *prov;
  s3_endpoint_t ep;
  ws_s3_addressing_t addr;
  char sigv4[96];
  char region[40]; /* the signing region */
  int ep_set;      /* ep parsed (from the config, or once configured) */
  int configured;  /* region/endpoint/addressing final (s3_configure) */
  char *ca_bundle;
  ws_s3_config_t cfg; /* numbers only; strings copied above */
  ws_s3_req_t *head, *tail;
  uint64_t next_id;
  unsigned running;
  uv_timer_t kick; /* dispatch: next tick, or the earliest backoff */
  ws_s3_stats_t stats;
  int creds_fail; /* last resolve failed with this status */
  char creds_msg[S3_ERRMSG_LEN];
  unsigned depth; /* dispatch/completion frames on the stack */
  int close_wanted, closing;
  unsigned close_pending;
  ws_s3_close_cb close_cb;
  void *close_arg;
};

/* s3_client.c */
ws_s3_req_t *s3_req_new(ws_s3_t *s3, s3_op_t op, const char *bucket,
                        const char *key, ws_s3_done_cb done, void *arg);
void s3_req_submit(ws_s3_req_t *r); /* queues r and kicks dispatch */
/* The one place r->state changes: asserts the move is legal and keeps
 * s3->running (the RUNNING count) in step. */
void s3_req_set_state(ws_s3_req_t *r, s3_req_state_t to);
void s3_kick(ws_s3_t *s3);
/* Final status: runs done, unlinks and frees r. Never from a curl callback. */
void s3_req_finish(ws_s3_req_t *r, int status);
void s3_enter(ws_s3_t *s3);
void s3_leave(ws_s3_t *s3);

/* s3_xfer.c: one HTTP attempt of r with creds c. 0 or error (r unchanged
 * except errmsg). */
int s3_xfer_start(ws_s3_req_t *r, const s3_creds_t *c) WS_MUST_USE;
/* Stops a RUNNING attempt without completing r. */
void s3_xfer_stop(ws_s3_req_t *r);

/* s3_ops.c: the op-specific reading of a 2xx answer. Returns 0 (done),
 * 1 (more: LIST page queued again) or an error with r->errmsg set; *retry
 * is set when the error is transient. */
int s3_ops_complete(ws_s3_req_t *r, int *retry) WS_MUST_USE;
void s3_req_errmsg(ws_s3_req_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
