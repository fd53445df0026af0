/* s3_creds_net.c - one small HTTP exchange on the client's multi handle, for
 * the network credential sources (STS, container endpoint, IMDSv2). STS
 * AssumeRole is signed (SigV4, service sts) with the source profile's
 * credentials; the other calls are not signed.
 *
 * Owns: the easy handle, the header list it is given (freed at the end),
 * and a reply buffer capped at S3_CREDS_BODY_MAX. Thread: loop thread. The
 * fetch completes once through its callback (never from inside
 * s3_fetch_start) unless cancelled; it is freed right after the callback.
 */
#include "s3-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct s3_fetch_s {
  ws_curl_uv_xfer_t x;
  ws_curl_uv_t *cu;
  struct curl_slist *headers;
  s3_buf_t body;
  int overflow;
  s3_fetch_cb cb;
  void *arg;
  char err[CURL_ERROR_SIZE];
};

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
  s3_fetch_t *f = ud;
  size_t len = size * n;
  if (s3_buf_add(&f->body, p, len) != 0) {
    f->overflow = 1;
    return 0;
  }
  return len;
}

static void fetch_free(s3_fetch_t *f) {
  curl_easy_cleanup(f->x.easy);
  curl_slist_free_all(f->headers);
  s3_buf_free(&f->body);
  free(f);
}

static void on_done(ws_curl_uv_xfer_t *x, CURLcode cc) {
  s3_fetch_t *f = x->data;
  long http = 0;
  curl_easy_getinfo(f->x.easy, CURLINFO_RESPONSE_CODE, &http);
  int status = 0;
  const char *err = "";
  if (f->overflow) {
    status = WS_ELIMIT;
    err = "reply too large";
  } else if (cc != CURLE_OK) {
    status = WS_EHTTP;
    err = f->err[0] ? f->err : curl_easy_strerror(cc);
  }
  f->cb(f->arg, status, http, f->body.p ? f->body.p : "", f->body.len, err);
  fetch_free(f);
}

s3_fetch_t *s3_fetch_start(ws_curl_uv_t *cu, const char *method,
                           const char *url, struct curl_slist *headers,
                           const char *body, unsigned timeout_ms,
                           const char *ca_bundle, const s3_creds_t *sign,
                           const char *sigv4, s3_fetch_cb cb, void *arg) {
  s3_fetch_t *f = calloc(1, sizeof(*f));
  if (!f) {
    curl_slist_free_all(headers);
    return NULL;
  }
  f->cu = cu;
  f->headers = headers;
  f->body.max = S3_CREDS_BODY_MAX;
  f->cb = cb;
  f->arg = arg;
  f->x.data = f;
  f->x.done = on_done;
  CURL *e = f->x.easy = curl_easy_init();
  if (!e)
    goto fail;
  int bad = 0;
  bad |= curl_easy_setopt(e, CURLOPT_URL, url) != CURLE_OK;
  bad |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
  bad |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms) != CURLE_OK;
  bad |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms) !=
         CURLE_OK;
  bad |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK;
  bad |= curl_easy_setopt(e, CURLOPT_WRITEDATA, f) != CURLE_OK;
  bad |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->err) != CURLE_OK;
  bad |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
  if (headers)
    bad |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers) != CURLE_OK;
  if (ca_bundle)
    bad |= curl_easy_setopt(e, CURLOPT_CAINFO, ca_bundle) != CURLE_OK;
  if (sign) {
    bad |= curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_USERNAME, sign->akid) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_PASSWORD, sign->secret) != CURLE_OK;
  }
  if (strcmp(method, "POST") == 0) {
    bad |= curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body ? body : "") !=
           CURLE_OK;
  } else if (strcmp(method, "GET") != 0) {
    bad |= curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK;
  }
  if (bad || ws_curl_uv_add(cu, &f->x) != 0)
    goto fail;
  return f;
fail:
  fetch_free(f);
  return NULL;
}

void s3_fetch_cancel(s3_fetch_t *f) {
  if (!f)
    return;
  ws_curl_uv_remove(f->cu, &f->x);
  fetch_free(f);
}
