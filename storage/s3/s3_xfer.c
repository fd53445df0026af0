/* s3_xfer.c - one HTTP attempt of a request: builds the signed easy handle,
 * receives headers and body, validates the answer, and decides between
 * done, retry with backoff, credential refresh, and failure.
 *
 * Owns (per attempt, released in xfer_release): the easy handle, its header
 * list and URL. Thread: loop thread; the curl callbacks below run inside
 * curl_multi_socket_action and therefore never finish or free a request —
 * they record what they saw (r->verr, r->cb_status) and return; the
 * decision is taken in s3_xfer_done, which curl_uv calls outside curl.
 *
 * GET integrity: a 206 must carry a Content-Range that starts where we asked
 * and ends where we asked (or at the object's end for open ranges), a 200
 * is accepted for a ranged request only when it is exactly the bytes asked
 * for, the body must match Content-Length, and retries continue at the
 * first byte the caller has not consumed, with If-Match on the ETag the
 * first answer carried so a replaced object is noticed (412).
 */
#include "s3-int.h"

#include "digest.h"
#include "ws_log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define S3_CURL_BUFFER (256 << 10) /* fewer write callbacks on fast links */

static void s3_xfer_done(ws_curl_uv_xfer_t *x, CURLcode cc);

static void xfer_release(ws_s3_req_t *r) {
  curl_easy_cleanup(r->xfer.easy);
  r->xfer.easy = NULL;
  curl_slist_free_all(r->hdrs);
  r->hdrs = NULL;
  free(r->url);
  r->url = NULL;
}

void s3_xfer_stop(ws_s3_req_t *r) {
  ws_curl_uv_remove(r->s3->cu, &r->xfer);
  xfer_release(r);
}

static int parse_u64(const char *s, size_t n, uint64_t *out) {
  uint64_t v = 0;
  if (n == 0 || n > 20)
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* "bytes A-B/T" (T may be '*'). */
static int parse_content_range(const char *v, size_t n, uint64_t *a,
                               uint64_t *b, uint64_t *t) {
  if (n < 6 || strncmp(v, "bytes ", 6) != 0)
    return -1;
  const char *p = v + 6, *end = v + n;
  const char *dash = memchr(p, '-', (size_t)(end - p));
  const char *slash = dash ? memchr(dash, '/', (size_t)(end - dash)) : NULL;
  if (!dash || !slash)
    return -1;
  if (parse_u64(p, (size_t)(dash - p), a) ||
      parse_u64(dash + 1, (size_t)(slash - dash - 1), b) || *b < *a)
    return -1;
  if (end - slash == 2 && slash[1] == '*')
    *t = S3_UNKNOWN;
  else if (parse_u64(slash + 1, (size_t)(end - slash - 1), t) || *b >= *t)
    return -1;
  return 0;
}

static char *etag_dup(const char *v, size_t n) {
  if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
    v++;
    n -= 2;
  }
  if (n == 0 || n > S3_ETAG_MAX)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)v[i] < 0x20 || v[i] == '"')
      return NULL;
  return strndup(v, n);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  ws_s3_req_t *r = ud;
  size_t len = size * n;
  size_t l = len;
  r->rx_ms = s3_now_ms();
  while (l > 0 && (p[l - 1] == '\r' || p[l - 1] == '\n'))
    l--;
  if (l >= 5 && strncmp(p, "HTTP/", 5) == 0) { /* a new response (100...) */
    r->cl = S3_UNKNOWN;
    r->have_cr = 0;
    free(r->hdr_etag);
    r->hdr_etag = NULL;
    r->hdr_region[0] = '\0';
    return len;
  }
  const char *colon = memchr(p, ':', l);
  if (!colon)
    return len;
  size_t nl = (size_t)(colon - p);
  const char *v = colon + 1;
  while (v < p + l && (*v == ' ' || *v == '\t'))
    v++;
  size_t vl = (size_t)(p + l - v);
  while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
    vl--;
  if (nl == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
    if (parse_u64(v, vl, &r->cl)) {
      r->verr = WS_ES3;
      r->verr_retry = 1;
      s3_req_errmsg(r, "malformed Content-Length");
    }
  } else if (nl == 13 && strncasecmp(p, "Content-Range", 13) == 0) {
    r->have_cr =
        parse_content_range(v, vl, &r->cr_a, &r->cr_b, &r->cr_total) == 0;
  } else if (nl == 4 && strncasecmp(p, "ETag", 4) == 0) {
    free(r->hdr_etag);
    r->hdr_etag = etag_dup(v, vl);
  } else if (nl == 19 && strncasecmp(p, "x-amz-bucket-region", 19) == 0 &&
             vl < sizeof(r->hdr_region)) {
    memcpy(r->hdr_region, v, vl); /* checked by s3_region_hint */
    r->hdr_region[vl] = '\0';
  }
  return len;
}

static void verr_set(ws_s3_req_t *r, int status, int retry) {
  r->verr = status;
  r->verr_retry = retry;
}

/* Checks a 2xx GET's headers before its first body byte. */
static void check_get(ws_s3_req_t *r) {
  uint64_t start = r->off + r->delivered;
  uint64_t want_end = r->len == S3_UNKNOWN ? S3_UNKNOWN : r->off + r->len - 1;
  int ranged = start > 0 || r->len != S3_UNKNOWN;
  if (r->http == 206) {
    if (!r->have_cr) {
      s3_req_errmsg(r, "206 without a valid Content-Range");
      verr_set(r, WS_ES3, 1);
      return;
    }
    if (want_end != S3_UNKNOWN && r->cr_b < want_end &&
        r->cr_total != S3_UNKNOWN && r->cr_b + 1 == r->cr_total) {
      s3_req_errmsg(r, "object has %" PRIu64 " bytes, range ends at %" PRIu64,
                    r->cr_total, want_end);
      verr_set(r, WS_ETRUNCATED, 0);
      return;
    }
    int end_ok = want_end != S3_UNKNOWN ? r->cr_b == want_end
                                        : (r->cr_total == S3_UNKNOWN ||
                                           r->cr_b + 1 == r->cr_total);
    if (r->cr_a != start || !end_ok) {
      s3_req_errmsg(r,
                    "Content-Range %" PRIu64 "-%" PRIu64 " does not match "
                    "the range asked for (from %" PRIu64 ")",
                    r->cr_a, r->cr_b, start);
      verr_set(r, WS_ES3, 1);
      return;
    }
    r->expect = r->cr_b - r->cr_a + 1;
    if (r->cr_total != S3_UNKNOWN)
      r->size = r->cr_total;
    if (r->cl != S3_UNKNOWN && r->cl != r->expect) {
      s3_req_errmsg(r, "Content-Length disagrees with Content-Range");
      verr_set(r, WS_ES3, 1);
      return;
    }
  } else {
    if (ranged && !(start == 0 && r->cl != S3_UNKNOWN &&
                    (r->len == S3_UNKNOWN || r->cl == r->len))) {
      s3_req_errmsg(r, "server ignored the Range header (HTTP %ld)", r->http);
      verr_set(r, WS_ES3, 0);
      return;
    }
    r->expect = r->cl;
    if (r->cl != S3_UNKNOWN)
      r->size = r->cl;
  }
  if (r->hdr_etag) {
    if (!r->etag) {
      r->etag = strdup(r->hdr_etag);
    } else if (strcmp(r->etag, r->hdr_etag) != 0) {
      s3_req_errmsg(r, "object changed during download (ETag %s -> %s)",
                    r->etag, r->hdr_etag);
      verr_set(r, WS_ES3, 0);
    }
  }
}

static void check_headers(ws_s3_req_t *r) {
  if (r->hdr_checked)
    return;
  r->hdr_checked = 1;
  curl_easy_getinfo(r->xfer.easy, CURLINFO_RESPONSE_CODE, &r->http);
  if (r->http < 200 || r->http >= 300)
    return;
  if (r->op == S3_OP_GET)
    check_get(r);
}

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  ws_s3_req_t *r = ud;
  size_t len = size * n;
  check_headers(r);
  if (r->verr)
    return 0;
  if (r->http < 200 || r->http >= 300) {
    /* Error document: keep the first S3_ERRBODY_MAX bytes, drop the rest. */
    size_t room = r->xml.max > r->xml.len ? r->xml.max - r->xml.len : 0;
    if (s3_buf_add(&r->xml, p, len < room ? len : room) == -ENOMEM)
      return 0;
    return len;
  }
  if (r->op != S3_OP_GET) {
    if (s3_buf_add(&r->xml, p, len) != 0) {
      s3_req_errmsg(r, "reply larger than %zu bytes", r->xml.max);
      verr_set(r, WS_ELIMIT, 0);
      return 0;
    }
    return len;
  }
  if (r->expect != S3_UNKNOWN && len > r->expect - r->got) {
    s3_req_errmsg(r, "server sent more bytes than announced");
    verr_set(r, WS_ES3, 1);
    return 0;
  }
  int rc = r->data ? r->data(r, r->off + r->delivered, p, len, r->arg)
                   : WS_S3_DATA_OK;
  if (rc == WS_S3_DATA_PAUSE) {
    r->paused = 1;
    r->rx_ms = s3_now_ms();
    return CURL_WRITEFUNC_PAUSE;
  }
  if (rc < 0) {
    r->cb_status = rc;
    return 0;
  }
  r->delivered += len;
  r->got += len;
  r->s3->stats.bytes_rx += len;
  return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ud) {
  ws_s3_req_t *r = ud;
  uint64_t left = r->body.len - r->sent;
  size_t want = size * n;
  if (want > left)
    want = (size_t)left;
  if (want == 0)
    return 0;
  ssize_t got;
  do {
    got = pread(r->body.fd, buf, want, (off_t)(r->body.offset + r->sent));
  } while (got < 0 && errno == EINTR);
  if (got <= 0) {
    s3_req_errmsg(r, "reading the upload source: %s",
                  got < 0 ? ws_strerror(-errno) : "file shrank");
    verr_set(r, got < 0 ? -errno : WS_ETRUNCATED, 0);
    return CURL_READFUNC_ABORT;
  }
  r->sent += (uint64_t)got;
  r->s3->stats.bytes_tx += (uint64_t)got;
  return (size_t)got;
}

static int on_seek(void *ud, curl_off_t offset, int origin) {
  ws_s3_req_t *r = ud;
  if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > r->body.len)
    return CURL_SEEKFUNC_FAIL;
  r->sent = (uint64_t)offset;
  return CURL_SEEKFUNC_OK;
}

static int hdr(ws_s3_req_t *r, const char *name, const char *value) {
  if (!value || !*value) /* curl 7.88 signs but never sends empty headers */
    return 0;
  char line[S3_CREDS_FIELD_MAX + 128];
  int n = snprintf(line, sizeof(line), "%s: %s", name, value);
  if (n < 0 || (size_t)n >= sizeof(line))
    return WS_ELIMIT;
  struct curl_slist *l = curl_slist_append(r->hdrs, line);
  if (!l)
    return -ENOMEM;
  r->hdrs = l;
  return 0;
}

static int build_url(ws_s3_req_t *r) {
  char part[16], maxkeys[16];
  s3_qparam_t q[6];
  size_t nq = 0;
  const char *key = r->key;
  switch (r->op) {
  case S3_OP_LIST:
    key = "";
    q[nq++] = (s3_qparam_t){"list-type", "2"};
    snprintf(maxkeys, sizeof(maxkeys), "%u", r->s3->cfg.list_page_size);
    q[nq++] = (s3_qparam_t){"max-keys", maxkeys};
    q[nq++] = (s3_qparam_t){"prefix", r->prefix};
    if (r->delim)
      q[nq++] = (s3_qparam_t){"delimiter", r->delim};
    if (r->token)
      q[nq++] = (s3_qparam_t){"continuation-token", r->token};
    break;
  case S3_OP_MPU_CREATE:
    q[nq++] = (s3_qparam_t){"uploads", ""};
    break;
  case S3_OP_MPU_PART:
    snprintf(part, sizeof(part), "%u", r->part);
    q[nq++] = (s3_qparam_t){"partNumber", part};
    /* fall through */
  case S3_OP_MPU_COMPLETE:
  case S3_OP_MPU_ABORT:
    q[nq++] = (s3_qparam_t){"uploadId", r->upload_id};
    break;
  default:
    break;
  }
  free(r->url);
  r->url = NULL;
  return s3_url_build(&r->s3->ep, r->s3->addr, r->bucket, key, q, nq, &r->url);
}

static int payload_hash(ws_s3_req_t *r, char *out) {
  ws_hash_t h;
  switch (r->op) {
  case S3_OP_PUT:
  case S3_OP_MPU_PART:
    snprintf(out, 65, "%s", r->body_sha[0] ? r->body_sha : "UNSIGNED-PAYLOAD");
    return 0;
  case S3_OP_MPU_COMPLETE:
    if (ws_sha256(r->post, r->post_len, &h))
      return WS_ECORRUPT;
    ws_hash_to_hex(&h, out);
    return 0;
  default:
    snprintf(out, 65, "%s", S3_EMPTY_SHA256);
    return 0;
  }
}

/* Forgets what the previous attempt of r learned. */
static void attempt_reset(ws_s3_req_t *r) {
  r->http = 0;
  s3_stall_begin(r);
  r->hdr_checked = 0;
  r->cl = S3_UNKNOWN;
  r->have_cr = 0;
  r->expect = S3_UNKNOWN;
  r->got = 0;
  r->sent = 0;
  r->paused = 0;
  r->resume = 0;
  r->verr = r->verr_retry = 0;
  r->curlerr[0] = '\0';
  s3_buf_free(&r->xml);
  r->xml.max = r->op == S3_OP_GET || r->op == S3_OP_HEAD ||
                       r->op == S3_OP_PUT || r->op == S3_OP_MPU_PART ||
                       r->op == S3_OP_MPU_ABORT
                   ? S3_ERRBODY_MAX
                   : S3_XMLBODY_MAX;
  curl_slist_free_all(r->hdrs);
  r->hdrs = NULL;
}

/* The URL and the headers of one attempt (r->url, r->hdrs). */
static int attempt_request(ws_s3_req_t *r, const s3_creds_t *c) {
  char sha[65];
  int rc;
  if ((rc = build_url(r))) {
    s3_req_errmsg(r, "cannot build a URL (%s)", ws_strerror(rc));
    return rc;
  }
  if ((rc = payload_hash(r, sha)) ||
      (rc = hdr(r, "x-amz-content-sha256", sha)) ||
      (rc = hdr(r, "x-amz-security-token", c->token)))
    return rc;
  const char *match = r->if_match ? r->if_match : r->etag;
  if (r->op == S3_OP_GET && match) {
    char q[S3_ETAG_MAX + 3];
    snprintf(q, sizeof(q), "\"%s\"", match);
    if ((rc = hdr(r, "If-Match", q)))
      return rc;
  }
  /* A conditional PUT's ETag goes unquoted: radosgw compares it byte for
   * byte with the stored (unquoted) ETag and answers 412 to the quoted
   * form; AWS S3 accepts either. */
  if (r->op == S3_OP_PUT && r->if_match &&
      (rc = hdr(r, "If-Match", r->if_match)))
    return rc;
  if (r->op == S3_OP_PUT && r->if_none_match &&
      (rc = hdr(r, "If-None-Match", "*")))
    return rc;
  if (r->op == S3_OP_MPU_COMPLETE &&
      (rc = hdr(r, "Content-Type", "application/xml")))
    return rc;
  return 0;
}

#define SET(opt, val) bad |= curl_easy_setopt(e, opt, val) != CURLE_OK

/* The options every attempt sets. Returns nonzero if one was refused. */
static int easy_common(ws_s3_req_t *r, const s3_creds_t *c, CURL *e) {
  ws_s3_t *s3 = r->s3;
  int bad = 0;
  SET(CURLOPT_URL, r->url);
  SET(CURLOPT_AWS_SIGV4, s3->sigv4);
  SET(CURLOPT_USERNAME, c->akid);
  SET(CURLOPT_PASSWORD, c->secret);
  SET(CURLOPT_HTTPHEADER, r->hdrs);
  SET(CURLOPT_NOSIGNAL, 1L);
  SET(CURLOPT_PATH_AS_IS, 1L);
  SET(CURLOPT_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_CONNECTTIMEOUT_MS, (long)s3->cfg.connect_timeout_ms);
  SET(CURLOPT_LOW_SPEED_LIMIT, (long)s3->cfg.low_speed_bytes);
  SET(CURLOPT_LOW_SPEED_TIME, (long)s3->cfg.low_speed_time_s);
  SET(CURLOPT_TCP_KEEPALIVE, 1L);
  SET(CURLOPT_HEADERFUNCTION, on_header);
  SET(CURLOPT_HEADERDATA, r);
  SET(CURLOPT_WRITEFUNCTION, on_write);
  SET(CURLOPT_WRITEDATA, r);
  SET(CURLOPT_ERRORBUFFER, r->curlerr);
  /* After a stall, not another pooled connection that may be stuck too. */
  SET(CURLOPT_FRESH_CONNECT, r->fresh ? 1L : 0L);
  r->fresh = 0;
  if (r->stall_ms > 0) {
    SET(CURLOPT_NOPROGRESS, 0L);
    SET(CURLOPT_XFERINFOFUNCTION, s3_stall_progress);
    SET(CURLOPT_XFERINFODATA, r);
  }
  if (s3->ca_bundle)
    SET(CURLOPT_CAINFO, s3->ca_bundle);
  return bad;
}

/* The options of r's operation. Returns nonzero if one was refused. */
static int easy_op(ws_s3_req_t *r, CURL *e) {
  int bad = 0;
  char range[64];
  switch (r->op) {
  case S3_OP_GET: {
    uint64_t start = r->off + r->delivered;
    SET(CURLOPT_BUFFERSIZE, (long)S3_CURL_BUFFER);
    if (r->len != S3_UNKNOWN)
      snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, start,
               r->off + r->len - 1);
    else
      snprintf(range, sizeof(range), "%" PRIu64 "-", start);
    if (start > 0 || r->len != S3_UNKNOWN)
      SET(CURLOPT_RANGE, range);
    break;
  }
  case S3_OP_HEAD:
    SET(CURLOPT_NOBODY, 1L);
    break;
  case S3_OP_PUT:
  case S3_OP_MPU_PART:
    SET(CURLOPT_UPLOAD, 1L);
    SET(CURLOPT_READFUNCTION, on_read);
    SET(CURLOPT_READDATA, r);
    SET(CURLOPT_SEEKFUNCTION, on_seek);
    SET(CURLOPT_SEEKDATA, r);
    SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body.len);
    break;
  case S3_OP_MPU_CREATE:
    SET(CURLOPT_POSTFIELDSIZE, 0L);
    SET(CURLOPT_POSTFIELDS, "");
    break;
  case S3_OP_MPU_COMPLETE:
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->post_len);
    SET(CURLOPT_POSTFIELDS, r->post);
    break;
  case S3_OP_MPU_ABORT:
    SET(CURLOPT_CUSTOMREQUEST, "DELETE");
    break;
  default:
    break;
  }
  return bad;
}

#undef SET

int s3_xfer_start(ws_s3_req_t *r, const s3_creds_t *c) {
  ws_s3_t *s3 = r->s3;
  int rc;
  attempt_reset(r);
  if ((rc = attempt_request(r, c)))
    return rc;
  CURL *e = curl_easy_init();
  if (!e)
    return -ENOMEM;
  r->xfer.easy = e;
  int bad = easy_common(r, c, e);
  bad |= easy_op(r, e);
  r->xfer.done = s3_xfer_done;
  if (bad || (rc = ws_curl_uv_add(s3->cu, &r->xfer)) != 0) {
    xfer_release(r);
    s3_req_errmsg(r, "cannot start the transfer");
    return bad ? WS_EHTTP : rc;
  }
  WS_LOGD("s3 req#%llu: attempt %u %s", (unsigned long long)r->id,
          r->attempts + 1, r->url);
  return 0;
}

/* Retry bookkeeping after a failed attempt; returns 1 when requeued. */
static int maybe_retry(ws_s3_req_t *r, s3_retry_t cls, const char *why) {
  ws_s3_t *s3 = r->s3;
  uint64_t now = s3_now_ms();
  if (cls == S3_RETRY_REFRESH && !r->refreshed) {
    r->refreshed = 1;
    s3_provider_resolve(s3->prov, 1);
    s3_req_set_state(r, S3_REQ_QUEUED);
    return 1;
  }
  if (cls != S3_RETRY_YES ||
      !s3_retry_more(s3->cfg.max_attempts, s3->cfg.retry_window_ms, r->attempts,
                     now - r->first_ms))
    return 0;
  uint64_t d =
      s3_retry_delay_ms(s3->cfg.backoff_base_ms, s3->cfg.backoff_max_ms,
                        r->attempts ? r->attempts - 1 : 0, s3_rand32());
  WS_LOGD("s3 req#%llu: retry in %llu ms: %s", (unsigned long long)r->id,
          (unsigned long long)d, why);
  s3_req_set_state(r, S3_REQ_BACKOFF);
  r->due_ms = now + d;
  return 1;
}

/* An attempt that failed: retries it (after a backoff, or once fresh
 * credentials arrive) when the failure is transient and attempts are left,
 * else finishes r with the status and a message saying why. code and msg
 * are the S3 error document's <Code> and <Message>, or NULL. */
static void xfer_failed(ws_s3_req_t *r, CURLcode cc, int short_body,
                        const char *code, const char *msg) {
  s3_retry_t cls;
  char why[S3_ERRMSG_LEN];
  if (r->verr) {
    cls = S3_RETRY_YES;
    snprintf(why, sizeof(why), "%s", r->errmsg);
  } else if (r->stalled) {
    cls = S3_RETRY_YES;
    s3_stall_cut(r, why, sizeof(why));
  } else if (cc != CURLE_OK) {
    cls = s3_retry_classify(cc, 0, NULL, 0);
    snprintf(why, sizeof(why), "%s",
             r->curlerr[0] ? r->curlerr : curl_easy_strerror(cc));
  } else if (short_body) {
    cls = s3_retry_classify(cc, r->http, NULL, 1);
    snprintf(why, sizeof(why), "short body: %" PRIu64 " of %" PRIu64 " bytes",
             r->got, r->expect);
  } else {
    cls = s3_retry_classify(cc, r->http, code, 0);
    snprintf(why, sizeof(why), "HTTP %ld%s%s%s%s", r->http, code ? " " : "",
             code ? code : "", msg && *msg ? ": " : "", msg ? msg : "");
  }
  if (maybe_retry(r, cls, why)) {
    s3_kick(r->s3);
    return;
  }
  int status;
  if (r->verr)
    status = r->verr;
  else if (r->stalled)
    status = WS_ETIMEOUT;
  else if (cc != CURLE_OK)
    status = cc == CURLE_PARTIAL_FILE ? WS_ETRUNCATED : WS_ES3;
  else if (short_body)
    status = WS_ETRUNCATED;
  else
    status = s3_status_from_http(r->http, code);
  if (status == WS_ES3NOKEY && !code)
    snprintf(why, sizeof(why), "HTTP 404: no such key or bucket");
  if (status == WS_ES3AUTH && !code) /* HEAD answers carry no error body */
    snprintf(why, sizeof(why),
             "HTTP %ld: credentials rejected or access denied", r->http);
  if (cc == CURLE_OK && !r->verr &&
      s3_region_hint(r->http, code, r->hdr_region, r->xml.p, r->xml.len,
                     r->bucket, r->s3->region[0] ? r->s3->region : "us-east-1",
                     why, sizeof(why)))
    status = WS_ES3;
  if (r->attempts > 1)
    s3_req_errmsg(r, "%s (after %u attempts)", why, r->attempts);
  else
    s3_req_errmsg(r, "%s", why);
  s3_req_finish(r, status);
}

static void s3_xfer_done(ws_curl_uv_xfer_t *x, CURLcode cc) {
  ws_s3_req_t *r = x->data;
  ws_s3_t *s3 = r->s3;
  s3_enter(s3);
  if (cc == CURLE_OK)
    check_headers(r);
  curl_easy_getinfo(r->xfer.easy, CURLINFO_RESPONSE_CODE, &r->http);
  xfer_release(r);
  /* A slot is free: queued requests may start. QUEUED is provisional:
   * finish or retry decides below. */
  s3_req_set_state(r, S3_REQ_QUEUED);
  s3_kick(s3);
  if (r->cancel) {
    s3_req_finish(r, WS_ECANCELED);
    goto out;
  }
  if (r->cb_status) {
    s3_req_finish(r, r->cb_status);
    goto out;
  }
  if (r->verr && !r->verr_retry) {
    s3_req_finish(r, r->verr);
    goto out;
  }
  char *code = NULL, *msg = NULL;
  if (r->http >= 300 && r->xml.len) {
    if (s3_xml_get(r->xml.p, r->xml.len, "Code", 128, &code))
      code = NULL;
    if (s3_xml_get(r->xml.p, r->xml.len, "Message", 300, &msg))
      msg = NULL;
  }
  int ok2xx = cc == CURLE_OK && r->http >= 200 && r->http < 300;
  int short_body = ok2xx && r->op == S3_OP_GET && r->expect != S3_UNKNOWN &&
                   r->got < r->expect;
  if (ok2xx && !short_body && !r->verr) {
    int retry = 0;
    int rc = s3_ops_complete(r, &retry);
    if (rc == 0) {
      s3_req_finish(r, 0);
    } else if (rc == 1) {
      r->attempts = 0;
      r->first_ms = s3_now_ms();
      s3_kick(s3);
    } else if (!(retry && maybe_retry(r, S3_RETRY_YES, r->errmsg))) {
      s3_req_finish(r, rc);
    } else {
      s3_kick(s3);
    }
    goto out_free;
  }
  /* A GET whose every byte was consumed is done, whatever broke after. */
  if (r->op == S3_OP_GET && r->size != S3_UNKNOWN &&
      r->off + r->delivered ==
          (r->len == S3_UNKNOWN ? r->size : r->off + r->len)) {
    s3_req_finish(r, 0);
    goto out_free;
  }
  xfer_failed(r, cc, short_body, code, msg);
out_free:
  free(code);
  free(msg);
out:
  s3_leave(s3);
}
