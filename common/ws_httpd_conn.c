/* ws_httpd_conn.c - one HTTP connection: reading and parsing a request with
 * http_parser, dispatching it, writing the reply, keep-alive and timeouts.
 * Loop thread only.
 *
 * State machine (one request at a time, no pipelined parsing):
 *
 *   READING --dispatch--> HANDLING --reply--> WRITING --drained, keep-alive--+
 *      ^  \                  |  \                 ^    \                      |
 *      |   \--parse error----+---\----------------+     \--drained, close--+  |
 *      |                     |    \--stream--> STREAMING --end--> WRITING   | |
 *      +---------------------+-------------------------------------------+-+--+
 *   any state --EOF/error/timeout/server close--> CLOSING --both handles
 *   closed--> freed (never earlier: the conn is freed only in its close cb).
 *
 * While a request is handled or its reply written, input is still read into
 * the 16 KiB in[] buffer but not parsed: that bounds what a client can queue
 * (reading stops when it is full) and still notices a client that hangs up
 * while waiting, so a handler's on_gone can run. The timer is armed while a
 * request is being read and while written bytes wait; a handler may take as
 * long as it likes.
 *
 * Deadlines (ws_httpd.h): deadline_ms is when the request being read must be
 * complete: its headers header_timeout_ms after its first byte (after accept
 * for the first request), then its body body_timeout_ms after the headers.
 * Each byte re-arms the idle timer, but never past deadline_ms, so a client
 * that trickles a byte now and then is answered 408 and closed on time.
 * Admission (ws_httpd_admit.c): a new connection over max_conns or over its
 * address's max_conns_per_addr closes the connection that has been READING
 * the longest (read_since_ms) to take its place; with none READING, the new
 * one is refused (503). Handlers' requests and replies are never cut.
 */
#include "ws_httpd-int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ws_log.h"

const char *const ws_httpd_conn_state_name[CONN_STATE_LAST] = {
    "reading", "handling", "streaming", "writing", "closing"};

/* Bit t of k_legal[s] allows s -> t. */
static const unsigned k_legal[CONN_STATE_LAST] = {
    [CONN_READING] =
        1u << CONN_HANDLING | 1u << CONN_WRITING | 1u << CONN_CLOSING,
    [CONN_HANDLING] =
        1u << CONN_WRITING | 1u << CONN_STREAMING | 1u << CONN_CLOSING,
    [CONN_STREAMING] = 1u << CONN_WRITING | 1u << CONN_CLOSING,
    [CONN_WRITING] = 1u << CONN_READING | 1u << CONN_CLOSING,
    [CONN_CLOSING] = 0,
};

static void conn_parse(ws_httpd_conn_t *conn);

static void conn_set_state(ws_httpd_conn_t *conn, conn_state_t next) {
  assert(k_legal[conn->state] & (1u << next));
  WS_LOGD("%s conn#%llu peer=%s: %s -> %s", conn->srv->cfg.name,
          (unsigned long long)conn->id, conn->peer,
          ws_httpd_conn_state_name[conn->state],
          ws_httpd_conn_state_name[next]);
  conn->state = next;
}

/* ---- timer and reading ------------------------------------------------ */

static void conn_on_timeout(uv_timer_t *t);

/* The idle timeout, cut short by the request's deadline while reading. */
static void conn_timer_arm(ws_httpd_conn_t *conn) {
  uint64_t delay = conn->srv->cfg.idle_timeout_ms;

  if (conn->state == CONN_READING && conn->deadline_ms != 0) {
    uint64_t now = uv_now(conn->srv->loop);
    uint64_t left = conn->deadline_ms > now ? conn->deadline_ms - now : 0;
    if (left < delay)
      delay = left;
  }
  uv_timer_start(&conn->timer, conn_on_timeout, delay, 0);
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  ws_httpd_conn_t *conn = h->data;

  (void)hint;
  *buf = uv_buf_init(conn->in + conn->in_len,
                     (unsigned)(sizeof(conn->in) - conn->in_len));
}

static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Reads while there is room in in[] and the peer has not finished. */
static void conn_update_reading(ws_httpd_conn_t *conn) {
  bool want = conn->state != CONN_CLOSING && !conn->peer_eof &&
              conn->in_len < sizeof(conn->in);

  if (want == conn->reading)
    return;
  if (want) {
    if (uv_read_start(&conn->sock.stream, conn_alloc, conn_on_read) < 0) {
      ws_httpd_conn_close(conn);
      return;
    }
  } else {
    uv_read_stop(&conn->sock.stream);
  }
  conn->reading = want;
}

/* ---- writing ---------------------------------------------------------- */

ws_httpd_wbuf_t *ws_httpd_wbuf_new(size_t cap) {
  ws_httpd_wbuf_t *wb = malloc(sizeof(*wb) + cap);

  if (wb == NULL)
    return NULL;
  wb->conn = NULL;
  wb->len = 0;
  wb->cap = cap;
  return wb;
}

static void conn_write_drained(ws_httpd_conn_t *conn) {
  if (!conn->keep_alive) {
    ws_httpd_conn_close(conn);
    return;
  }
  conn_set_state(conn, CONN_READING);
  conn->read_since_ms = uv_now(conn->srv->loop);
  conn->deadline_ms = 0; /* the next request's first byte sets it */
  conn_parse(conn);
  if (conn->state == CONN_READING)
    conn_timer_arm(conn);
}

static void conn_on_write(uv_write_t *w, int status) {
  ws_httpd_wbuf_t *wb = (ws_httpd_wbuf_t *)w;
  ws_httpd_conn_t *conn = wb->conn;

  conn->wq_bytes -= wb->len;
  conn->pending_writes--;
  free(wb);
  if (conn->state == CONN_CLOSING)
    return;
  if (status < 0) {
    WS_LOGD("%s conn#%llu peer=%s: write: %s", conn->srv->cfg.name,
            (unsigned long long)conn->id, conn->peer, uv_strerror(status));
    ws_httpd_conn_close(conn);
    return;
  }
  if (conn->pending_writes > 0) {
    conn_timer_arm(conn); /* progress: restart the stall clock */
    return;
  }
  if (conn->state == CONN_WRITING)
    conn_write_drained(conn);
  else if (conn->state != CONN_READING)
    uv_timer_stop(&conn->timer);
}

int ws_httpd_conn_write(ws_httpd_conn_t *conn, ws_httpd_wbuf_t *wb) {
  uv_buf_t b;
  int rc;

  if (conn->state == CONN_CLOSING) {
    free(wb);
    return UV_ECANCELED;
  }
  wb->conn = conn;
  b = uv_buf_init(wb->data, (unsigned)wb->len);
  rc = uv_write(&wb->w, &conn->sock.stream, &b, 1, conn_on_write);
  if (rc < 0) {
    free(wb);
    ws_httpd_conn_close(conn);
    return rc;
  }
  conn->wq_bytes += wb->len;
  conn->pending_writes++;
  if (conn->state != CONN_READING)
    conn_timer_arm(conn);
  return 0;
}

size_t ws_httpd_conn_queued(const ws_httpd_conn_t *conn) {
  return conn->wq_bytes;
}

size_t ws_httpd_conn_max_queue(const ws_httpd_conn_t *conn) {
  return conn->srv->cfg.max_write_queue_bytes;
}

bool ws_httpd_conn_srv_closing(const ws_httpd_conn_t *conn) {
  return conn->srv->closing;
}

void ws_httpd_conn_reply_done(ws_httpd_conn_t *conn, bool keep_alive) {
  ws_httpd_req_t *req = conn->req;

  conn->req = NULL;
  req->conn = NULL;
  ws_httpd_req_unref(req);
  conn->keep_alive = keep_alive && !conn->peer_eof && !conn->srv->closing;
  conn_set_state(conn, CONN_WRITING);
  if (conn->pending_writes == 0)
    conn_write_drained(conn);
}

void ws_httpd_conn_stream_started(ws_httpd_conn_t *conn) {
  conn_set_state(conn, CONN_STREAMING);
}

/* Answers a request the server rejects itself, then closes. extra: one
 * more "Name: value" header line, or NULL. */
static void conn_fail(ws_httpd_conn_t *conn, int status, int err,
                      const char *message, const char *extra) {
  char *extra_hdrs[1] = {(char *)extra};
  ws_httpd_wbuf_t *wb;
  size_t len = 0;
  char *body;

  WS_LOGD("%s conn#%llu peer=%s: %d %s", conn->srv->cfg.name,
          (unsigned long long)conn->id, conn->peer, status, message);
  ws_httpd_req_unref(conn->req); /* never dispatched: the conn's alone */
  conn->req = NULL;
  conn->in_len = 0;
  body = ws_httpd_error_body(err, message, &len);
  wb = body == NULL ? NULL
                    : ws_httpd_resp_build(status, "application/json", body, len,
                                          WS_HTTPD_BODY_LENGTH, false,
                                          extra_hdrs, extra != NULL ? 1 : 0);
  free(body);
  if (wb == NULL || ws_httpd_conn_write(conn, wb) < 0) {
    ws_httpd_conn_close(conn);
    return;
  }
  conn->keep_alive = false;
  conn_set_state(conn, CONN_WRITING);
}

/* ---- parser callbacks ------------------------------------------------- */

static int conn_raw(ws_httpd_conn_t *conn, const char *p, size_t n) {
  int rc =
      ws_httpd_req_raw_append(conn->req, p, n, conn->srv->cfg.max_header_bytes);
  if (rc < 0) {
    conn->parse_status = rc == WS_ELIMIT ? 431 : 503;
    return -1;
  }
  return 0;
}

static int on_message_begin(http_parser *p) {
  ws_httpd_conn_t *conn = p->data;

  assert(conn->req == NULL);
  conn->req = ws_httpd_req_new(conn, conn->peer);
  if (conn->req == NULL) {
    conn->parse_status = 503;
    return -1;
  }
  conn->hdr_phase = 0;
  conn->hdr_indexed = false;
  if (conn->deadline_ms == 0) { /* a keep-alive request's first byte */
    conn->deadline_ms =
        uv_now(conn->srv->loop) + conn->srv->cfg.header_timeout_ms;
    conn->deadline_body = false;
  }
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  return conn_raw(p->data, at, n);
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
  ws_httpd_conn_t *conn = p->data;
  ws_httpd_req_t *req = conn->req;

  if (conn->hdr_phase != 1) {      /* a new header starts */
    if (conn_raw(conn, "", 1) < 0) /* ends the url or the last value */
      return -1;
    conn->hdr_indexed = req->nhdrs < WS_HTTPD_MAX_REQ_HEADERS;
    if (conn->hdr_indexed)
      req->hdrs[req->nhdrs].name_off = (uint32_t)req->raw_len;
    conn->hdr_phase = 1;
  }
  return conn_raw(conn, at, n);
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
  ws_httpd_conn_t *conn = p->data;
  ws_httpd_req_t *req = conn->req;

  if (conn->hdr_phase != 2) {
    if (conn_raw(conn, "", 1) < 0) /* ends the name */
      return -1;
    if (conn->hdr_indexed)
      req->hdrs[req->nhdrs++].value_off = (uint32_t)req->raw_len;
    conn->hdr_phase = 2;
  }
  return conn_raw(conn, at, n);
}

static int on_headers_complete(http_parser *p) {
  ws_httpd_conn_t *conn = p->data;
  ws_httpd_req_t *req = conn->req;
  const char *expect;
  bool has_body;

  if (conn->hdr_phase == 1) { /* a name with no value callback */
    if (conn_raw(conn, "", 1) < 0)
      return -1;
    if (conn->hdr_indexed)
      req->hdrs[req->nhdrs++].value_off = (uint32_t)req->raw_len;
  }
  if (conn_raw(conn, "", 1) < 0)
    return -1;
  snprintf(req->method, sizeof(req->method), "%s",
           http_method_str((enum http_method)p->method));
  req->http_major = p->http_major;
  req->http_minor = p->http_minor;
  if (ws_httpd_req_split_url(req) < 0) {
    conn->parse_status = 400;
    return -1;
  }
  /* Before the body is read: an anonymous client cannot make the server
   * buffer one. */
  if (!conn->is_unix &&
      !ws_httpd_auth_ok(conn->srv, req->method, req->path,
                        ws_httpd_req_header(req, "Authorization"))) {
    conn->parse_status = 401;
    return -1;
  }
  if (p->content_length != ULLONG_MAX &&
      p->content_length > conn->srv->cfg.max_body_bytes) {
    conn->parse_status = 413;
    return -1;
  }
  has_body = (p->content_length != ULLONG_MAX && p->content_length > 0) ||
             (p->flags & F_CHUNKED);
  if (has_body) {
    conn->deadline_ms =
        uv_now(conn->srv->loop) + conn->srv->cfg.body_timeout_ms;
    conn->deadline_body = true;
  }
  expect = ws_httpd_req_header(req, "Expect");
  if (has_body && expect != NULL && strcasecmp(expect, "100-continue") == 0 &&
      p->http_minor >= 1) {
    static const char k_continue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    ws_httpd_wbuf_t *wb = ws_httpd_wbuf_new(sizeof(k_continue) - 1);
    if (wb == NULL) {
      conn->parse_status = 503;
      return -1;
    }
    memcpy(wb->data, k_continue, sizeof(k_continue) - 1);
    wb->len = sizeof(k_continue) - 1;
    if (ws_httpd_conn_write(conn, wb) < 0)
      return -1;
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t n) {
  ws_httpd_conn_t *conn = p->data;
  int rc =
      ws_httpd_req_body_append(conn->req, at, n, conn->srv->cfg.max_body_bytes);
  if (rc < 0) {
    conn->parse_status = rc == WS_ELIMIT ? 413 : 503;
    return -1;
  }
  return 0;
}

static int on_message_complete(http_parser *p) {
  ws_httpd_conn_t *conn = p->data;

  conn->req->keep_alive = http_should_keep_alive(p) != 0;
  conn->req_ready = true;
  conn->deadline_ms = 0;
  /* Pause so execute returns here: the handler runs outside the parser. */
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings k_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- dispatch --------------------------------------------------------- */

static void conn_dispatch(ws_httpd_conn_t *conn) {
  ws_httpd_req_t *req = conn->req;
  const ws_httpd_route_t *route;
  bool path_known;

  route = ws_httpd_route_find(conn->srv, req->method, req->path, &path_known);
  req->refs++; /* the handler's reference */
  conn_set_state(conn, CONN_HANDLING);
  uv_timer_stop(&conn->timer);
  if (route == NULL) {
    if (path_known)
      ws_httpd_reply_error(req, 405, WS_EUSAGE, "method not allowed");
    else
      ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "no such endpoint");
    return;
  }
  req->path_rest =
      route->match == WS_HTTPD_MATCH_PREFIX ? req->path + route->path_len : "";
  route->handler(req, route->arg); /* req may be gone after this */
}

static void conn_parse(ws_httpd_conn_t *conn) {
  while (conn->state == CONN_READING && conn->in_len > 0) {
    size_t n =
        http_parser_execute(&conn->parser, &k_settings, conn->in, conn->in_len);
    enum http_errno e = HTTP_PARSER_ERRNO(&conn->parser);

    if (conn->state != CONN_READING)
      return; /* a write failed inside a callback: closing */
    if (n > conn->in_len)
      n = conn->in_len;
    memmove(conn->in, conn->in + n, conn->in_len - n);
    conn->in_len -= n;
    if (conn->req_ready) {
      conn->req_ready = false;
      http_parser_pause(&conn->parser, 0);
      conn_dispatch(conn);
      continue;
    }
    if (e != HPE_OK) {
      int status = conn->parse_status ? conn->parse_status : 400;
      if (status == 401) {
        WS_HTTPD_COUNT(conn->srv, unauthorized);
        ws_httpd_note(conn->srv);
        conn_fail(conn, 401, WS_EAUTH,
                  "missing or wrong API token (Authorization: Bearer TOKEN)",
                  "WWW-Authenticate: Bearer realm=\"weightswarm\"");
        return;
      }
      conn_fail(conn, status,
                status == 413 || status == 431 ? WS_ELIMIT
                : status == 400                ? WS_EBADMSG
                                               : -ENOMEM,
                status == 413   ? "request body too large"
                : status == 431 ? "request headers too large"
                : status == 400 ? http_errno_description(e)
                                : "out of memory",
                NULL);
      return;
    }
    if (n == 0)
      break;
  }
  conn_update_reading(conn);
}

/* ---- input, timeout --------------------------------------------------- */

static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  ws_httpd_conn_t *conn = s->data;

  (void)buf;
  if (nread == 0 || conn->state == CONN_CLOSING)
    return;
  if (nread == UV_ENOBUFS) {
    conn_update_reading(conn);
    return;
  }
  if (nread < 0) {
    conn->peer_eof = true;
    /* A reply being written is still delivered; anything else is moot. */
    if (nread == UV_EOF && conn->state == CONN_WRITING) {
      conn->keep_alive = false;
      conn_update_reading(conn);
      return;
    }
    ws_httpd_conn_close(conn);
    return;
  }
  conn->in_len += (size_t)nread;
  if (conn->state == CONN_READING) {
    conn_parse(conn);
    if (conn->state == CONN_READING)
      conn_timer_arm(conn); /* progress, but never past the deadline */
  } else {
    conn_update_reading(conn);
  }
}

static void conn_on_timeout(uv_timer_t *t) {
  ws_httpd_conn_t *conn = t->data;

  WS_LOGD("%s conn#%llu peer=%s: timeout while %s", conn->srv->cfg.name,
          (unsigned long long)conn->id, conn->peer,
          ws_httpd_conn_state_name[conn->state]);
  /* Half a request after the timeout gets a 408; an idle keep-alive
   * connection or a stalled writer is just closed. */
  bool late = conn->state == CONN_READING && conn->deadline_ms != 0 &&
              uv_now(conn->srv->loop) >= conn->deadline_ms;
  if (late) {
    WS_HTTPD_COUNT(conn->srv, deadline_closed);
    ws_httpd_note(conn->srv);
  }
  if (conn->state == CONN_READING && (conn->req != NULL || conn->in_len > 0))
    conn_fail(conn, 408, WS_ETIMEOUT,
              !late                 ? "request not received in time"
              : conn->deadline_body ? "request body not received in time"
                                    : "request headers not received in time",
              NULL);
  else
    ws_httpd_conn_close(conn);
}

/* ---- lifetime --------------------------------------------------------- */

static void conn_handle_closed(uv_handle_t *h) {
  ws_httpd_conn_t *conn = h->data;
  ws_httpd_t *srv = conn->srv;
  ws_httpd_req_t *req;

  if (--conn->pending_closes > 0)
    return;
  if (conn->prev != NULL)
    conn->prev->next = conn->next;
  else
    srv->conns = conn->next;
  if (conn->next != NULL)
    conn->next->prev = conn->prev;
  srv->nconns--;
  req = conn->req;
  conn->req = NULL;
  free(conn);
  if (req != NULL) {
    /* Told here, after the stack that closed the conn has unwound. */
    if (!req->handler_done && req->on_gone != NULL)
      req->on_gone(req, req->gone_arg);
    ws_httpd_req_unref(req);
  }
  ws_httpd_handle_closed(srv);
}

void ws_httpd_conn_close(ws_httpd_conn_t *conn) {
  if (conn->state == CONN_CLOSING)
    return;
  conn_set_state(conn, CONN_CLOSING);
  if (conn->counted) {
    conn->counted = false;
    conn->srv->nlive--;
  }
  if (conn->req != NULL)
    conn->req->conn = NULL; /* gone: later replies are dropped */
  conn->reading = false;
  uv_timer_stop(&conn->timer);
  uv_close((uv_handle_t *)&conn->timer, conn_handle_closed);
  uv_close(&conn->sock.handle, conn_handle_closed);
}

void ws_httpd_conn_close_all(ws_httpd_t *srv) {
  for (ws_httpd_conn_t *c = srv->conns; c != NULL; c = c->next)
    ws_httpd_conn_close(c);
}

static int conn_sock_init(ws_httpd_t *srv, ws_httpd_sock_t *sock,
                          bool is_unix) {
  return is_unix ? uv_pipe_init(srv->loop, &sock->pipe, 0)
                 : uv_tcp_init(srv->loop, &sock->tcp);
}

int ws_httpd_conn_accept(ws_httpd_t *srv, uv_stream_t *listener, bool is_unix) {
  ws_httpd_conn_t *conn;
  int rc;

  conn = calloc(1, sizeof(*conn));
  if (conn == NULL)
    return -ENOMEM;
  rc = conn_sock_init(srv, &conn->sock, is_unix);
  if (rc < 0) {
    free(conn);
    return rc;
  }
  uv_timer_init(srv->loop, &conn->timer);
  conn->sock.handle.data = conn;
  conn->timer.data = conn;
  conn->srv = srv;
  conn->id = ++srv->next_conn_id;
  conn->pending_closes = 2;
  conn->state = CONN_READING;
  conn->is_unix = is_unix;
  conn->read_since_ms = uv_now(srv->loop);
  conn->deadline_ms = conn->read_since_ms + srv->cfg.header_timeout_ms;
  snprintf(conn->peer, sizeof(conn->peer), "?");
  /* Until getpeername says otherwise, all such clients share one cap. */
  snprintf(conn->addr, sizeof(conn->addr), "?");
  http_parser_init(&conn->parser, HTTP_REQUEST);
  conn->parser.data = conn;
  /* From here the conn is on the list and freed only by its close. */
  conn->next = srv->conns;
  if (srv->conns != NULL)
    srv->conns->prev = conn;
  srv->conns = conn;
  srv->nconns++;
  srv->open_handles++;
  rc = uv_accept(listener, &conn->sock.stream);
  if (rc < 0) {
    ws_httpd_conn_close(conn);
    return rc;
  }
  ws_httpd_conn_peer_name(conn, is_unix);
  if (ws_httpd_conn_admit(srv, conn) < 0) {
    WS_HTTPD_COUNT(srv, refused);
    ws_httpd_note(srv);
    ws_httpd_conn_busy_close(conn, "too many connections");
    return WS_EBUSY;
  }
  WS_LOGD("%s conn#%llu peer=%s: accepted", srv->cfg.name,
          (unsigned long long)conn->id, conn->peer);
  conn_timer_arm(conn);
  conn_update_reading(conn);
  return 0;
}
