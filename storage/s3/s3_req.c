/* s3_req.c - the addressing half of an S3 request: s3:// URIs, endpoint
 * parsing, path-style vs virtual-hosted URLs, SigV4 percent-encoding of keys
 * and query strings, client configuration defaults.
 *
 * libcurl 7.88 signs the path and query exactly as written, so everything
 * here produces the canonical form SigV4 expects: key bytes outside
 * A-Za-z0-9-._~ percent-encoded with upper-case hex ('/' kept in keys),
 * query parameters sorted by name with names and values encoded, valueless
 * parameters written "name=". Pure functions; any thread.
 */
#include "s3-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int s3_buf_add(s3_buf_t *b, const void *d, size_t n) {
  if (n > b->max || b->len > b->max - n)
    return WS_ELIMIT;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    if (cap > b->max + 1)
      cap = b->max + 1;
    char *p = realloc(b->p, cap);
    if (!p)
      return -ENOMEM;
    b->p = p;
    b->cap = cap;
  }
  if (n)
    memcpy(b->p + b->len, d, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

int s3_buf_str(s3_buf_t *b, const char *s) {
  return s3_buf_add(b, s, strlen(s));
}

void s3_buf_free(s3_buf_t *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

void ws_s3_config_default(ws_s3_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->addressing = WS_S3_ADDR_AUTO;
  cfg->max_concurrency = 16;
  cfg->max_attempts = 10;
  cfg->retry_window_ms = 30000;
  cfg->backoff_base_ms = 100;
  cfg->backoff_max_ms = 5000;
  cfg->connect_timeout_ms = 5000;
  cfg->low_speed_bytes = 1;
  cfg->low_speed_time_s = 20;
  cfg->stall_timeout_ms = 2000;
  cfg->creds_timeout_ms = 5000;
  cfg->creds_process_timeout_ms = 60000;
  cfg->list_max_entries = 1000000;
  cfg->list_page_size = 1000;
}

static const char *env_nonempty(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

void ws_s3_config_from_env(ws_s3_config_t *cfg) {
  const char *v;
  if ((v = env_nonempty("AWS_ENDPOINT_URL_S3")) ||
      (v = env_nonempty("AWS_ENDPOINT_URL")))
    cfg->endpoint = v;
  if ((v = env_nonempty("AWS_REGION")) ||
      (v = env_nonempty("AWS_DEFAULT_REGION")))
    cfg->region = v;
  if ((v = env_nonempty("AWS_CA_BUNDLE")))
    cfg->ca_bundle = v;
  if ((v = env_nonempty("AWS_PROFILE")))
    cfg->profile = v;
  if ((v = env_nonempty("WS_S3_CREDENTIAL_PROCESS_TIMEOUT_MS"))) {
    char *end;
    unsigned long ms = strtoul(v, &end, 10);
    if (*end == '\0' && ms > 0 && ms <= 3600000)
      cfg->creds_process_timeout_ms = (unsigned)ms;
  }
  if ((v = env_nonempty("WS_S3_STALL_TIMEOUT_MS"))) {
    char *end;
    unsigned long ms = strtoul(v, &end, 10);
    if (*end == '\0' && ms <= 600000)
      cfg->stall_timeout_ms = (unsigned)ms;
  }
  if ((v = env_nonempty("WS_S3_ADDRESSING"))) {
    if (strcmp(v, "path") == 0)
      cfg->addressing = WS_S3_ADDR_PATH;
    else if (strcmp(v, "virtual") == 0)
      cfg->addressing = WS_S3_ADDR_VIRTUAL;
    else if (strcmp(v, "auto") == 0)
      cfg->addressing = WS_S3_ADDR_AUTO;
  }
}

int s3_bucket_valid(const char *b) {
  size_t n = strlen(b);
  if (n < 3 || n > 63)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = b[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
             c == '-' || c == '_' || (c >= 'A' && c <= 'Z');
    if (!ok)
      return 0;
  }
  return 1;
}

int s3_bucket_dns_ok(const char *b, int https) {
  size_t n = strlen(b);
  if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-' || b[0] == '.' ||
      b[n - 1] == '.')
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = b[i];
    if (c == '.') {
      if (https || b[i + 1] == '.')
        return 0;
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      return 0;
  }
  return 1;
}

int ws_s3_uri_parse(const char *uri, ws_s3_uri_t *out) {
  if (!uri || strncmp(uri, "s3://", 5) != 0)
    return WS_EUSAGE;
  const char *b = uri + 5;
  const char *slash = strchr(b, '/');
  size_t blen = slash ? (size_t)(slash - b) : strlen(b);
  const char *key = slash ? slash + 1 : "";
  if (blen < 3 || blen > 63 || strlen(key) > S3_KEY_MAX)
    return WS_EUSAGE;
  char *bucket = strndup(b, blen);
  char *k = strdup(key);
  if (!bucket || !k) {
    free(bucket);
    free(k);
    return -ENOMEM;
  }
  if (!s3_bucket_valid(bucket)) {
    free(bucket);
    free(k);
    return WS_EUSAGE;
  }
  out->bucket = bucket;
  out->key = k;
  return 0;
}

void ws_s3_uri_free(ws_s3_uri_t *u) {
  if (!u)
    return;
  free(u->bucket);
  free(u->key);
  u->bucket = u->key = NULL;
}

void s3_endpoint_free(s3_endpoint_t *ep) {
  if (!ep)
    return;
  free(ep->scheme);
  free(ep->host);
  free(ep->hostport);
  free(ep->path);
  memset(ep, 0, sizeof(*ep));
}

static int host_is_ip(const char *h) {
  if (h[0] == '[')
    return 1;
  for (; *h; h++)
    if (!((*h >= '0' && *h <= '9') || *h == '.'))
      return 0;
  return 1;
}

int s3_endpoint_parse(const char *url, s3_endpoint_t *ep) {
  memset(ep, 0, sizeof(*ep));
  const char *rest;
  if (strncmp(url, "https://", 8) == 0) {
    ep->scheme = strdup("https");
    rest = url + 8;
  } else if (strncmp(url, "http://", 7) == 0) {
    ep->scheme = strdup("http");
    rest = url + 7;
  } else {
    return WS_EUSAGE;
  }
  size_t hp = strcspn(rest, "/?#");
  if (hp == 0 || rest[hp] == '?' || rest[hp] == '#')
    goto bad;
  const char *path = rest + hp;
  size_t plen = strlen(path);
  while (plen > 0 && path[plen - 1] == '/')
    plen--;
  if (strpbrk(path, "?#"))
    goto bad;
  ep->hostport = strndup(rest, hp);
  ep->path = strndup(path, plen);
  size_t hl;
  if (rest[0] == '[') {
    const char *close = memchr(rest, ']', hp);
    if (!close)
      goto bad;
    hl = (size_t)(close - rest) + 1;
  } else {
    const char *colon = memchr(rest, ':', hp);
    hl = colon ? (size_t)(colon - rest) : hp;
  }
  if (hl == 0)
    goto bad;
  ep->host = strndup(rest, hl);
  if (!ep->scheme || !ep->hostport || !ep->path || !ep->host) {
    s3_endpoint_free(ep);
    return -ENOMEM;
  }
  for (char *c = ep->host; *c; c++)
    if ((unsigned char)*c <= ' ' || *c == '@')
      goto bad;
  ep->is_ip = host_is_ip(ep->host);
  size_t n = strlen(ep->host);
  ep->is_aws =
      n > 14 && strcmp(ep->host + n - 14, ".amazonaws.com") == 0 && !ep->is_ip;
  return 0;
bad:
  s3_endpoint_free(ep);
  return WS_EUSAGE;
}

int s3_uri_encode(s3_buf_t *out, const char *s, size_t n, int keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
               (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
               c == '~' || (keep_slash && c == '/');
    int rc;
    if (keep) {
      rc = s3_buf_add(out, &s[i], 1);
    } else {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      rc = s3_buf_add(out, e, 3);
    }
    if (rc)
      return rc;
  }
  return 0;
}

static int qparam_cmp(const void *a, const void *b) {
  const s3_qparam_t *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  return strcmp(x->value ? x->value : "", y->value ? y->value : "");
}

int s3_url_build(const s3_endpoint_t *ep, ws_s3_addressing_t addr,
                 const char *bucket, const char *key, const s3_qparam_t *q,
                 size_t nq, char **out) {
  int https = strcmp(ep->scheme, "https") == 0;
  int virt;
  switch (addr) {
  case WS_S3_ADDR_PATH:
    virt = 0;
    break;
  case WS_S3_ADDR_VIRTUAL:
    if (ep->is_ip || !s3_bucket_dns_ok(bucket, https))
      return WS_EUSAGE;
    virt = 1;
    break;
  default:
    virt = ep->is_aws && s3_bucket_dns_ok(bucket, https);
    break;
  }
  s3_qparam_t *sorted = NULL;
  s3_buf_t b = {.max = 64 << 10};
  int rc = 0;
  if (nq > 64)
    return WS_ELIMIT;
  if (nq) {
    sorted = malloc(nq * sizeof(*sorted));
    if (!sorted)
      return -ENOMEM;
    memcpy(sorted, q, nq * sizeof(*sorted));
    qsort(sorted, nq, sizeof(*sorted), qparam_cmp);
  }
  if ((rc = s3_buf_str(&b, ep->scheme)) || (rc = s3_buf_str(&b, "://")))
    goto cleanup;
  if (virt && ((rc = s3_buf_str(&b, bucket)) || (rc = s3_buf_str(&b, "."))))
    goto cleanup;
  if ((rc = s3_buf_str(&b, ep->hostport)) || (rc = s3_buf_str(&b, ep->path)) ||
      (rc = s3_buf_str(&b, "/")))
    goto cleanup;
  if (!virt) {
    if ((rc = s3_uri_encode(&b, bucket, strlen(bucket), 0)))
      goto cleanup;
    if (*key && (rc = s3_buf_str(&b, "/")))
      goto cleanup;
  }
  if ((rc = s3_uri_encode(&b, key, strlen(key), 1)))
    goto cleanup;
  for (size_t i = 0; i < nq; i++) {
    const char *v = sorted[i].value ? sorted[i].value : "";
    if ((rc = s3_buf_str(&b, i == 0 ? "?" : "&")) ||
        (rc = s3_uri_encode(&b, sorted[i].name, strlen(sorted[i].name), 0)) ||
        (rc = s3_buf_str(&b, "=")) || (rc = s3_uri_encode(&b, v, strlen(v), 0)))
      goto cleanup;
  }
  *out = b.p;
  b.p = NULL;
cleanup:
  free(sorted);
  s3_buf_free(&b);
  return rc;
}

int s3_sigv4_param(const char *region, char *buf, size_t len) {
  for (const char *c = region; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
      return WS_EUSAGE;
  int n = snprintf(buf, len, "aws:amz:%s:s3", region);
  if (n < 0 || (size_t)n >= len || !*region)
    return WS_EUSAGE;
  return 0;
}
