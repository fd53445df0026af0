/* ws_httpd_req.c - one HTTP request: the parsed pieces (method, path,
 * query, headers, body), their accessors, and the ways a handler answers
 * (plain, JSON, error, chunked stream, drop). Loop thread only.
 *
 * A request has at most two references (see ws_httpd-int.h): its
 * connection's and, once dispatched, its handler's. Answering gives the
 * handler's back; a request whose connection is gone (req->conn == NULL)
 * answers into the void.
 */
#include "ws_httpd-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

ws_httpd_req_t *ws_httpd_req_new(ws_httpd_conn_t *conn, const char *peer) {
  ws_httpd_req_t *req = calloc(1, sizeof(*req));

  if (req == NULL)
    return NULL;
  req->refs = 1;
  req->conn = conn;
  req->path_rest = "";
  snprintf(req->peer, sizeof(req->peer), "%s", peer);
  return req;
}

void ws_httpd_req_unref(ws_httpd_req_t *req) {
  if (req == NULL || --req->refs > 0)
    return;
  for (unsigned i = 0; i < req->nreply_hdrs; i++)
    free(req->reply_hdrs[i]);
  free(req->raw);
  free(req->path);
  free(req->query);
  free(req->body);
  free(req);
}

/* Grows *buf to hold need bytes, doubling; cap is enforced by callers. */
static int req_grow(char **buf, size_t *cap, size_t need) {
  size_t ncap = *cap ? *cap : 256;
  char *nb;

  if (need <= *cap)
    return 0;
  while (ncap < need)
    ncap *= 2;
  nb = realloc(*buf, ncap);
  if (nb == NULL)
    return -ENOMEM;
  *buf = nb;
  *cap = ncap;
  return 0;
}

int ws_httpd_req_raw_append(ws_httpd_req_t *req, const char *p, size_t n,
                            size_t cap) {
  int rc;

  if (n > cap || req->raw_len > cap - n)
    return WS_ELIMIT;
  rc = req_grow(&req->raw, &req->raw_cap, req->raw_len + n);
  if (rc < 0)
    return rc;
  memcpy(req->raw + req->raw_len, p, n);
  req->raw_len += n;
  return 0;
}

int ws_httpd_req_body_append(ws_httpd_req_t *req, const char *p, size_t n,
                             size_t cap) {
  int rc;

  if (n > cap || req->body_len > cap - n)
    return WS_ELIMIT;
  rc = req_grow(&req->body, &req->body_cap, req->body_len + n + 1);
  if (rc < 0)
    return rc;
  memcpy(req->body + req->body_len, p, n);
  req->body_len += n;
  req->body[req->body_len] = '\0';
  return 0;
}

int ws_httpd_req_split_url(ws_httpd_req_t *req) {
  const char *url = req->raw; /* NUL terminated by the parser glue */
  size_t plen;
  const char *q, *hash;

  if (url == NULL || url[0] != '/')
    return WS_EBADMSG; /* only origin-form: "/path?query" */
  hash = strchr(url, '#');
  q = strchr(url, '?');
  if (q != NULL && hash != NULL && hash < q)
    q = NULL;
  plen = q != NULL ? (size_t)(q - url)
                   : (hash != NULL ? (size_t)(hash - url) : strlen(url));
  req->path = strndup(url, plen);
  if (q != NULL)
    req->query =
        strndup(q + 1, hash != NULL ? (size_t)(hash - q - 1) : strlen(q + 1));
  else
    req->query = strdup("");
  if (req->path == NULL || req->query == NULL)
    return -ENOMEM;
  return 0;
}

/* ---- accessors -------------------------------------------------------- */

const char *ws_httpd_req_method(const ws_httpd_req_t *req) {
  return req->method;
}

const char *ws_httpd_req_path(const ws_httpd_req_t *req) {
  return req->path;
}

const char *ws_httpd_req_path_rest(const ws_httpd_req_t *req) {
  return req->path_rest;
}

const char *ws_httpd_req_query(const ws_httpd_req_t *req) {
  return req->query;
}

const char *ws_httpd_req_peer(const ws_httpd_req_t *req) {
  return req->peer;
}

int ws_httpd_req_is_gone(const ws_httpd_req_t *req) {
  return req->conn == NULL;
}

void ws_httpd_req_on_gone(ws_httpd_req_t *req, ws_httpd_gone_cb cb, void *arg) {
  req->on_gone = cb;
  req->gone_arg = arg;
}

const char *ws_httpd_req_header(const ws_httpd_req_t *req, const char *name) {
  for (unsigned i = 0; i < req->nhdrs; i++) {
    if (strcasecmp(req->raw + req->hdrs[i].name_off, name) == 0)
      return req->raw + req->hdrs[i].value_off;
  }
  return NULL;
}

const char *ws_httpd_req_body(const ws_httpd_req_t *req, size_t *len) {
  if (len != NULL)
    *len = req->body_len;
  return req->body != NULL ? req->body : "";
}

int ws_httpd_req_json(const ws_httpd_req_t *req, cJSON **out) {
  cJSON *j;

  if (req->body_len == 0)
    return WS_EJSON;
  j = cJSON_ParseWithLength(req->body, req->body_len);
  if (j == NULL)
    return WS_EJSON;
  *out = j;
  return 0;
}

static int req_hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Decodes s[0..n) (percent and '+') into buf; returns length or error. */
static int req_unescape(const char *s, size_t n, char *buf, size_t cap) {
  size_t o = 0;

  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '+') {
      c = ' ';
    } else if (c == '%') {
      int hi, lo;
      if (i + 2 >= n)
        return WS_EBADMSG;
      hi = req_hexval(s[i + 1]);
      lo = req_hexval(s[i + 2]);
      if (hi < 0 || lo < 0)
        return WS_EBADMSG;
      c = (char)(hi * 16 + lo);
      i += 2;
    }
    if (o + 1 >= cap)
      return WS_ELIMIT;
    buf[o++] = c;
  }
  if (cap == 0)
    return WS_ELIMIT;
  buf[o] = '\0';
  return o > (size_t)0x7fffffff ? WS_ELIMIT : (int)o;
}

int ws_httpd_req_query_get(const ws_httpd_req_t *req, const char *name,
                           char *buf, size_t cap) {
  const char *p = req->query;
  size_t nlen = strlen(name);

  while (p != NULL && *p != '\0') {
    const char *amp = strchr(p, '&');
    size_t plen = amp != NULL ? (size_t)(amp - p) : strlen(p);
    const char *eq = memchr(p, '=', plen);
    size_t klen = eq != NULL ? (size_t)(eq - p) : plen;

    if (klen == nlen && memcmp(p, name, nlen) == 0) {
      if (eq == NULL)
        return req_unescape("", 0, buf, cap);
      return req_unescape(eq + 1, plen - klen - 1, buf, cap);
    }
    p = amp != NULL ? amp + 1 : NULL;
  }
  return WS_ENOTFOUND;
}

/* ---- building replies ------------------------------------------------- */

char *ws_httpd_error_body(int err, const char *message, size_t *len) {
  cJSON *doc = cJSON_CreateObject();
  cJSON *e = cJSON_AddObjectToObject(doc, "error");
  char *s = NULL;

  if (e == NULL ||
      cJSON_AddStringToObject(e, "code", ws_errname(err)) == NULL ||
      cJSON_AddStringToObject(
          e, "message", message != NULL ? message : ws_strerror(err)) == NULL)
    goto cleanup;
  s = cJSON_PrintUnformatted(doc);
  if (s != NULL)
    *len = strlen(s);

cleanup:
  cJSON_Delete(doc);
  return s;
}

ws_httpd_wbuf_t *ws_httpd_resp_build(int status, const char *ctype,
                                     const void *body, size_t len,
                                     ws_httpd_body_mode_t mode, bool keep_alive,
                                     char *const *extra, unsigned nextra) {
  size_t head_cap = 192 + (ctype != NULL ? strlen(ctype) : 0);
  bool no_body = status == 204 || status == 304 || status < 200;
  ws_httpd_wbuf_t *wb;
  int n;

  for (unsigned i = 0; i < nextra; i++)
    head_cap += strlen(extra[i]) + 2;
  if (mode != WS_HTTPD_BODY_LENGTH || no_body)
    len = 0;
  wb = ws_httpd_wbuf_new(head_cap + len);
  if (wb == NULL)
    return NULL;
  n = snprintf(wb->data, head_cap, "HTTP/1.1 %d %s\r\nConnection: %s\r\n",
               status, ws_httpd_status_text(status),
               keep_alive ? "keep-alive" : "close");
  if (!no_body) {
    n += snprintf(wb->data + n, head_cap - (size_t)n, "Content-Type: %s\r\n",
                  ctype != NULL ? ctype : "application/octet-stream");
    if (mode == WS_HTTPD_BODY_LENGTH)
      n += snprintf(wb->data + n, head_cap - (size_t)n,
                    "Content-Length: %zu\r\n", len);
    else if (mode == WS_HTTPD_BODY_CHUNKED)
      n += snprintf(wb->data + n, head_cap - (size_t)n,
                    "Transfer-Encoding: chunked\r\n");
  }
  for (unsigned i = 0; i < nextra; i++)
    n += snprintf(wb->data + n, head_cap - (size_t)n, "%s\r\n", extra[i]);
  n += snprintf(wb->data + n, head_cap - (size_t)n, "\r\n");
  if (len > 0)
    memcpy(wb->data + n, body, len);
  wb->len = (size_t)n + len;
  return wb;
}

/* ---- answering -------------------------------------------------------- */

static void req_give_back(ws_httpd_req_t *req) {
  req->handler_done = true;
  ws_httpd_req_unref(req);
}

int ws_httpd_req_add_header(ws_httpd_req_t *req, const char *name,
                            const char *value) {
  size_t n;
  char *h;

  if (name == NULL || value == NULL || name[0] == '\0' ||
      strpbrk(name, "\r\n:") != NULL || strpbrk(value, "\r\n") != NULL)
    return WS_EUSAGE;
  if (req->nreply_hdrs >= WS_HTTPD_MAX_REPLY_HEADERS)
    return WS_ELIMIT;
  n = strlen(name) + strlen(value) + 3;
  h = malloc(n);
  if (h == NULL)
    return -ENOMEM;
  snprintf(h, n, "%s: %s", name, value);
  req->reply_hdrs[req->nreply_hdrs++] = h;
  return 0;
}

static bool req_keep_alive(const ws_httpd_req_t *req) {
  return req->keep_alive && !ws_httpd_conn_srv_closing(req->conn);
}

void ws_httpd_reply(ws_httpd_req_t *req, int status, const char *ctype,
                    const void *body, size_t len) {
  ws_httpd_conn_t *conn = req->conn;
  ws_httpd_wbuf_t *wb;
  bool ka;

  if (conn != NULL && req->streaming) {
    ws_httpd_conn_close(conn); /* misuse: a stream must end with _end */
  } else if (conn != NULL) {
    ka = req_keep_alive(req);
    wb = ws_httpd_resp_build(status, ctype, body, len, WS_HTTPD_BODY_LENGTH, ka,
                             req->reply_hdrs, req->nreply_hdrs);
    if (wb == NULL)
      ws_httpd_conn_close(conn);
    else if (ws_httpd_conn_write(conn, wb) == 0)
      ws_httpd_conn_reply_done(conn, ka);
  }
  req_give_back(req);
}

void ws_httpd_reply_json(ws_httpd_req_t *req, int status, cJSON *json) {
  char *s = json != NULL ? cJSON_PrintUnformatted(json) : NULL;
  size_t len;

  cJSON_Delete(json);
  if (s == NULL) {
    ws_httpd_reply_error(req, 500, -ENOMEM, "cannot encode JSON");
    return;
  }
  len = strlen(s);
  s[len] = '\n'; /* one document per line, for curl users */
  ws_httpd_reply(req, status, "application/json", s, len + 1);
  cJSON_free(s);
}

void ws_httpd_reply_error(ws_httpd_req_t *req, int status, int err,
                          const char *message) {
  size_t len = 0;
  char *s = ws_httpd_error_body(err, message, &len);

  if (s == NULL) {
    static const char k_oom[] =
        "{\"error\":{\"code\":\"ENOMEM\",\"message\":\"out of memory\"}}";
    ws_httpd_reply(req, 500, "application/json", k_oom, sizeof(k_oom) - 1);
    return;
  }
  ws_httpd_reply(req, status, "application/json", s, len);
  cJSON_free(s);
}

void ws_httpd_req_drop(ws_httpd_req_t *req) {
  if (req->conn != NULL)
    ws_httpd_conn_close(req->conn);
  req_give_back(req);
}

int ws_httpd_stream_begin(ws_httpd_req_t *req, int status, const char *ctype) {
  ws_httpd_conn_t *conn = req->conn;
  ws_httpd_wbuf_t *wb;
  bool http10 = req->http_major == 1 && req->http_minor == 0;

  if (req->streaming)
    return WS_EBUSY;
  req->streaming = true;
  if (conn == NULL)
    return WS_ECANCELED;
  wb = ws_httpd_resp_build(
      status, ctype, NULL, 0,
      http10 ? WS_HTTPD_BODY_TO_EOF : WS_HTTPD_BODY_CHUNKED,
      !http10 && req_keep_alive(req), req->reply_hdrs, req->nreply_hdrs);
  if (wb == NULL) {
    ws_httpd_conn_close(conn);
    return -ENOMEM;
  }
  if (ws_httpd_conn_write(conn, wb) < 0)
    return WS_ECANCELED;
  ws_httpd_conn_stream_started(conn);
  return 0;
}

int ws_httpd_stream_write(ws_httpd_req_t *req, const void *data, size_t len) {
  ws_httpd_conn_t *conn = req->conn;
  bool http10 = req->http_major == 1 && req->http_minor == 0;
  ws_httpd_wbuf_t *wb;
  int n = 0;

  if (!req->streaming)
    return WS_EUSAGE;
  if (conn == NULL)
    return WS_ECANCELED;
  if (len == 0)
    return 0;
  if (ws_httpd_conn_queued(conn) + len > ws_httpd_conn_max_queue(conn))
    return WS_ELIMIT;
  wb = ws_httpd_wbuf_new(len + 24);
  if (wb == NULL)
    return -ENOMEM;
  if (!http10)
    n = snprintf(wb->data, 24, "%zx\r\n", len);
  memcpy(wb->data + n, data, len);
  if (!http10) {
    memcpy(wb->data + n + len, "\r\n", 2);
    n += 2;
  }
  wb->len = (size_t)n + len;
  if (ws_httpd_conn_write(conn, wb) < 0)
    return WS_ECANCELED;
  return 0;
}

size_t ws_httpd_stream_queued(const ws_httpd_req_t *req) {
  return req->conn != NULL ? ws_httpd_conn_queued(req->conn) : 0;
}

void ws_httpd_stream_end(ws_httpd_req_t *req) {
  static const char k_last[] = "0\r\n\r\n";
  ws_httpd_conn_t *conn = req->conn;
  bool http10 = req->http_major == 1 && req->http_minor == 0;
  ws_httpd_wbuf_t *wb;

  if (conn == NULL) {
    req_give_back(req);
    return;
  }
  if (!req->streaming) {
    ws_httpd_reply_error(req, 500, WS_ECANCELED, "stream never began");
    return;
  }
  if (http10) {
    ws_httpd_conn_reply_done(conn, false);
    req_give_back(req);
    return;
  }
  wb = ws_httpd_wbuf_new(sizeof(k_last) - 1);
  if (wb == NULL) {
    ws_httpd_conn_close(conn);
  } else {
    memcpy(wb->data, k_last, sizeof(k_last) - 1);
    wb->len = sizeof(k_last) - 1;
    if (ws_httpd_conn_write(conn, wb) == 0)
      ws_httpd_conn_reply_done(conn, req_keep_alive(req));
  }
  req_give_back(req);
}
