/* ctl_http.c - p2pctl's HTTP/JSON client for p2pd's unix-socket API (see
 * ctl_http.h). Owns one curl easy handle per call; blocking, main thread of
 * p2pctl only (a CLI, not a daemon: blocking here is the point).
 */
#include "ctl_http.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

const char *ctl_api_socket = NULL;

const char *ctl_http_socket(void) {
  const char *env;

  if (ctl_api_socket != NULL && ctl_api_socket[0] != '\0')
    return ctl_api_socket;
  env = getenv("P2P_API");
  if (env != NULL && env[0] != '\0')
    return env;
  return CTL_HTTP_DEFAULT_SOCKET;
}

/* What one transfer collects. */
typedef struct {
  char *buf; /* whole body (request mode) or the partial line (stream) */
  size_t len, cap;
  size_t max;
  long status; /* known once headers are in, for stream mode */
  CURL *curl;
  ctl_http_line_cb line_cb; /* NULL: collect the whole body */
  void *line_arg;
  int err; /* set when the write callback aborts the transfer */
} xfer_t;

static int xfer_append(xfer_t *x, const char *p, size_t n) {
  if (n > x->max || x->len > x->max - n)
    return WS_ELIMIT;
  if (x->len + n + 1 > x->cap) {
    size_t ncap = x->cap ? x->cap : 4096;
    char *nb;
    while (ncap < x->len + n + 1)
      ncap *= 2;
    nb = realloc(x->buf, ncap);
    if (nb == NULL)
      return -ENOMEM;
    x->buf = nb;
    x->cap = ncap;
  }
  memcpy(x->buf + x->len, p, n);
  x->len += n;
  x->buf[x->len] = '\0';
  return 0;
}

/* Hands every complete line in x->buf to the callback. */
static int xfer_lines(xfer_t *x, bool flush) {
  size_t start = 0;

  for (;;) {
    char *nl = memchr(x->buf + start, '\n', x->len - start);
    size_t end;
    if (nl == NULL) {
      if (!flush || start == x->len)
        break;
      end = x->len;
    } else {
      end = (size_t)(nl - x->buf);
    }
    {
      /* The line's bytes are consumed below, so terminating it in place
       * is fine. */
      size_t l = end - start;
      if (l > 0 && x->buf[start + l - 1] == '\r')
        l--;
      x->buf[start + l] = '\0';
      if (x->line_cb(x->buf + start, l, x->line_arg) != 0)
        return WS_ECANCELED;
    }
    start = nl != NULL ? end + 1 : x->len;
  }
  memmove(x->buf, x->buf + start, x->len - start);
  x->len -= start;
  if (x->buf != NULL)
    x->buf[x->len] = '\0';
  return 0;
}

static size_t xfer_write(char *p, size_t size, size_t nmemb, void *arg) {
  xfer_t *x = arg;
  size_t n = size * nmemb;
  int rc;

  if (x->line_cb != NULL && x->status == 0)
    curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
  /* Error replies in stream mode are collected whole, like requests. */
  if (x->line_cb != NULL && x->status >= 200 && x->status < 300) {
    rc = xfer_append(x, p, n); /* WS_ELIMIT: a line longer than max */
    if (rc == 0)
      rc = xfer_lines(x, false);
  } else {
    rc = xfer_append(x, p, n);
  }
  if (rc < 0) {
    x->err = rc;
    return 0; /* makes curl fail with CURLE_WRITE_ERROR */
  }
  return n;
}

/* Parses a collected body into *out (NULL for an empty body). */
static int xfer_json(const xfer_t *x, const char *sock, cJSON **out) {
  cJSON *j;

  if (x->len == 0) {
    *out = NULL;
    return 0;
  }
  j = cJSON_ParseWithLength(x->buf, x->len);
  if (j == NULL) {
    fprintf(stderr, "p2pctl: p2pd at %s sent a reply that is not JSON\n", sock);
    return WS_EJSON;
  }
  *out = j;
  return 0;
}

/* What curl's result means for the caller (and a line on stderr for the
 * failures a user can act on). */
static int xfer_result(xfer_t *x, CURLcode cc, const char *sock,
                       long timeout_ms, const char *errbuf) {
  long os_errno = 0;
  if (cc == CURLE_OK) {
    curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
    return 0;
  }
  if (cc == CURLE_WRITE_ERROR && x->err != 0) {
    if (x->err == WS_ELIMIT)
      fprintf(stderr, "p2pctl: reply from p2pd at %s is too large\n", sock);
    else if (x->err == -ENOMEM)
      fprintf(stderr, "p2pctl: out of memory\n");
    return x->err;
  }
  if (cc == CURLE_COULDNT_CONNECT) {
    curl_easy_getinfo(x->curl, CURLINFO_OS_ERRNO, &os_errno);
    fprintf(stderr,
            "p2pctl: cannot reach p2pd at %s: %s (is p2pd running? "
            "use --api SOCKET or P2P_API)\n",
            sock, os_errno != 0 ? strerror((int)os_errno) : errbuf);
    return -ECONNREFUSED;
  }
  if (cc == CURLE_OPERATION_TIMEDOUT) {
    fprintf(stderr, "p2pctl: p2pd at %s did not answer within %ld ms\n", sock,
            timeout_ms);
    return WS_ETIMEOUT;
  }
  fprintf(stderr, "p2pctl: request to p2pd at %s failed: %s\n", sock,
          errbuf[0] != '\0' ? errbuf : curl_easy_strerror(cc));
  return WS_EHTTP;
}

static int xfer_run(const char *sock, const char *method, const char *path,
                    const cJSON *body, long timeout_ms, xfer_t *x) {
  char url[1024], errbuf[CURL_ERROR_SIZE] = "";
  struct curl_slist *hdrs = NULL, *h;
  char *json = NULL;
  CURLcode cc;
  int rc = WS_EHTTP;

  if (snprintf(url, sizeof(url), "http://localhost%s", path) >=
      (int)sizeof(url))
    return WS_EUSAGE;
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return -ENOMEM;
  x->curl = curl_easy_init();
  if (x->curl == NULL) {
    rc = -ENOMEM;
    goto cleanup_global;
  }
  /* "Expect:" off: p2pd answers at once, no 100-continue round trip. */
  h = curl_slist_append(hdrs, "Expect:");
  if (h == NULL) {
    rc = -ENOMEM;
    goto cleanup_easy;
  }
  hdrs = h;
  if (body != NULL) {
    json = cJSON_PrintUnformatted(body);
    h = json != NULL ? curl_slist_append(hdrs, "Content-Type: "
                                               "application/json")
                     : NULL;
    if (h == NULL) {
      rc = -ENOMEM;
      goto cleanup_easy;
    }
    hdrs = h;
    curl_easy_setopt(x->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
    curl_easy_setopt(x->curl, CURLOPT_COPYPOSTFIELDS, json);
  }
  curl_easy_setopt(x->curl, CURLOPT_UNIX_SOCKET_PATH, sock);
  curl_easy_setopt(x->curl, CURLOPT_URL, url);
  curl_easy_setopt(x->curl, CURLOPT_CUSTOMREQUEST, method);
  if (strcmp(method, "HEAD") == 0)
    curl_easy_setopt(x->curl, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(x->curl, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(x->curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(x->curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(x->curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(x->curl, CURLOPT_CONNECTTIMEOUT_MS,
                   CTL_HTTP_CONNECT_TIMEOUT_MS);
  curl_easy_setopt(x->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(x->curl, CURLOPT_WRITEFUNCTION, xfer_write);
  curl_easy_setopt(x->curl, CURLOPT_WRITEDATA, x);
  cc = curl_easy_perform(x->curl);
  rc = xfer_result(x, cc, sock, timeout_ms, errbuf);

cleanup_easy:
  curl_easy_cleanup(x->curl);
  x->curl = NULL;
  curl_slist_free_all(hdrs);
  cJSON_free(json);
cleanup_global:
  curl_global_cleanup();
  return rc;
}

int ctl_http_request(const char *sock, const char *method, const char *path,
                     const cJSON *body, long timeout_ms, long *status,
                     cJSON **reply) {
  xfer_t x = {.max = CTL_HTTP_MAX_REPLY_BYTES};
  cJSON *j = NULL;
  int rc;

  if (method == NULL || path == NULL || path[0] != '/' || status == NULL ||
      reply == NULL)
    return WS_EUSAGE;
  if (sock == NULL)
    sock = ctl_http_socket();
  rc = xfer_run(sock, method, path, body, timeout_ms, &x);
  if (rc == 0)
    rc = xfer_json(&x, sock, &j);
  if (rc == 0) {
    *status = x.status;
    *reply = j;
  }
  free(x.buf);
  return rc;
}

int ctl_http_stream(const char *sock, const char *method, const char *path,
                    const cJSON *body, long timeout_ms, long *status,
                    ctl_http_line_cb cb, void *arg, cJSON **err_reply) {
  xfer_t x = {.max = CTL_HTTP_MAX_LINE_BYTES, .line_cb = cb, .line_arg = arg};
  cJSON *j = NULL;
  int rc;

  if (method == NULL || path == NULL || path[0] != '/' || status == NULL ||
      cb == NULL)
    return WS_EUSAGE;
  if (sock == NULL)
    sock = ctl_http_socket();
  rc = xfer_run(sock, method, path, body, timeout_ms, &x);
  if (rc == WS_ELIMIT && x.status >= 200 && x.status < 300)
    fprintf(stderr, "p2pctl: a progress line from p2pd is too long\n");
  if (rc == 0 && x.status >= 200 && x.status < 300) {
    rc = xfer_lines(&x, true); /* a last line without '\n' */
  } else if (rc == 0) {
    rc = xfer_json(&x, sock, &j);
    if (rc == 0 && err_reply != NULL)
      *err_reply = j;
    else
      cJSON_Delete(j);
  }
  if (rc == 0)
    *status = x.status;
  free(x.buf);
  return rc;
}

int ctl_http_exit(int rc) {
  if (rc == 0)
    return CTL_EXIT_OK;
  if (rc == WS_ETIMEOUT)
    return CTL_EXIT_TIMEOUT;
  if (rc == WS_ECANCELED)
    return CTL_EXIT_FAIL;
  return CTL_EXIT_DAEMON;
}

int ctl_http_reply_exit(long status, const cJSON *reply) {
  const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
  const char *c = cJSON_IsString(code) ? code->valuestring : "";

  if (status >= 200 && status < 300)
    return CTL_EXIT_OK;
  if (cJSON_IsString(msg))
    fprintf(stderr, "p2pctl: %s (%s)\n", msg->valuestring,
            c[0] != '\0' ? c : "no code");
  else
    fprintf(stderr, "p2pctl: p2pd answered HTTP %ld\n", status);
  if (status == 404 || strcmp(c, "WS_ENOTFOUND") == 0)
    return CTL_EXIT_NOTFOUND;
  if (strcmp(c, "WS_ETIMEOUT") == 0)
    return CTL_EXIT_TIMEOUT;
  if (strncmp(c, "WS_ES3", 6) == 0 || strcmp(c, "WS_ECREDS") == 0)
    return CTL_EXIT_ORIGIN;
  if (status == 400 && strcmp(c, "WS_EUSAGE") == 0)
    return CTL_EXIT_USAGE;
  return CTL_EXIT_FAIL;
}
