/* s3_retry.c - which failed S3 attempts are worth another try, and when.
 *
 * Transient: connection refused/reset, timeouts (including curl's low-speed
 * abort), short bodies, 5xx except 501, 429, S3's SlowDown/RequestTimeout/
 * InternalError codes. Final: 4xx (403 and 404 fail fast: a wrong secret
 * must not become a retry storm), TLS verification, malformed URLs. Two
 * 4xx codes are fixable by re-signing: ExpiredToken (refresh credentials)
 * and RequestTimeTooSkewed (sign again now); those get one more try.
 * Backoff is "full jitter" (uniform in [0, min(cap, base * 2^n)]), which
 * spreads a fleet's retries after a shared outage. A final answer saying
 * the bucket is in another region gets a message naming that region
 * (s3_region_hint). Pure; any thread.
 */
#include "s3-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static int code_is(const char *code, const char *want) {
  return code && strcmp(code, want) == 0;
}

s3_retry_t s3_retry_classify(CURLcode cc, long http, const char *code,
                             int short_body) {
  switch (cc) {
  case CURLE_OK:
    break;
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_PARTIAL_FILE:
  case CURLE_GOT_NOTHING:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_WEIRD_SERVER_REPLY:
    return S3_RETRY_YES;
  default:
    return S3_RETRY_NO;
  }
  if (code_is(code, "ExpiredToken") || code_is(code, "RequestTimeTooSkewed") ||
      code_is(code, "TokenRefreshRequired"))
    return S3_RETRY_REFRESH;
  if (code_is(code, "SlowDown") || code_is(code, "RequestTimeout") ||
      code_is(code, "InternalError") || code_is(code, "ServiceUnavailable"))
    return S3_RETRY_YES;
  if (http >= 500 && http != 501)
    return S3_RETRY_YES;
  if (http == 429 || http == 408)
    return S3_RETRY_YES;
  if (http >= 200 && http < 300 && short_body)
    return S3_RETRY_YES;
  return S3_RETRY_NO;
}

uint64_t s3_retry_delay_ms(unsigned base_ms, unsigned max_ms, unsigned n,
                           uint32_t rnd) {
  uint64_t ceil = base_ms;
  for (unsigned i = 0; i < n && ceil < max_ms; i++)
    ceil *= 2;
  if (ceil > max_ms)
    ceil = max_ms;
  return ceil ? (uint64_t)rnd % (ceil + 1) : 0;
}

int s3_retry_more(unsigned max_attempts, unsigned window_ms, unsigned attempts,
                  uint64_t elapsed_ms) {
  if (attempts >= 4 * (uint64_t)max_attempts)
    return 0;
  return attempts < max_attempts || elapsed_ms < window_ms;
}

int s3_status_from_http(long http, const char *code) {
  if (http == 403 || http == 401 || code_is(code, "InvalidAccessKeyId") ||
      code_is(code, "SignatureDoesNotMatch") || code_is(code, "AccessDenied"))
    return WS_ES3AUTH;
  if (http == 404 || code_is(code, "NoSuchKey") ||
      code_is(code, "NoSuchBucket"))
    return WS_ES3NOKEY;
  return WS_ES3;
}

uint32_t s3_rand32(void) {
  uint32_t r;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = (uint32_t)ts.tv_nsec * 2654435761u;
  }
  return r;
}

uint64_t s3_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int s3_region_hint(long http, const char *code, const char *hdr_region,
                   const char *doc, size_t doclen, const char *bucket,
                   const char *region, char *out, size_t outlen) {
  int redirect = http == 301 || code_is(code, "PermanentRedirect");
  int bad400 = http == 400 && (code_is(code, "AuthorizationHeaderMalformed") ||
                               code_is(code, "IllegalLocationConstraint"));
  if (!redirect && !bad400)
    return 0;
  char *doc_region = NULL;
  const char *where =
      hdr_region && s3_region_valid(hdr_region) ? hdr_region : NULL;
  if (!where && doc && doclen &&
      s3_xml_get(doc, doclen, "Region", 40, &doc_region) == 0 &&
      s3_region_valid(doc_region))
    where = doc_region;
  int wrote = 1;
  if (where && strcmp(where, region) != 0)
    snprintf(out, outlen,
             "bucket %s is in %s, not %s: set AWS_REGION=%s or region in the "
             "profile",
             bucket, where, region, where);
  else if (!where && redirect)
    snprintf(out, outlen,
             "bucket %s is not in %s (HTTP %ld%s%s, no region named): set "
             "AWS_REGION or region in the profile to the bucket's region",
             bucket, region, http, code ? " " : "", code ? code : "");
  else
    wrote = 0; /* same region: the answer has another cause */
  free(doc_region);
  return wrote;
}
