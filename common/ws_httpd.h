/* ws_httpd.h - a small HTTP/1.1 server on a libuv loop, for the daemons'
 * local JSON APIs (p2pd on a unix socket, p2p-tracker on TCP).
 *
 * Loop thread only: every function here must be called on the thread that
 * runs the loop given to ws_httpd_new(), and every callback runs there.
 *
 * One server has several listeners (unix socket paths, TCP HOST:PORT) and a
 * route table (method + exact path, or method + path prefix). Each parsed
 * request goes to one handler; the handler answers it exactly once, either
 * at once or later (async), or streams a chunked body. One request at a time
 * per connection: the next request is not parsed until the reply has been
 * written. Caps (header bytes, body bytes, connections, connections per
 * client address, idle time, deadlines) are set at creation; violations are
 * answered 400/408/413/431/503 by the server.
 *
 * Slow clients (docs/security.md, "Control plane"): a request's line and
 * headers must arrive within header_timeout_ms of its first byte (of accept,
 * for a connection's first request) and its body within body_timeout_ms of
 * the end of its headers, however steadily the bytes trickle in; the idle
 * timeout only bounds the gap between two bytes. A TCP client address holds
 * at most max_conns_per_addr connections. When a new connection finds the
 * server (or its address) at the cap, the connection that has been reading
 * the longest (idle keep-alive, or a request still arriving) is closed to
 * make room; only when every connection is busy (a handler holds its
 * request, or a reply is being written) is the new one refused with 503. So
 * a burst of clients that never finish a request cannot keep a probe out.
 *
 * Bearer token (ws_httpd_set_auth): on TCP connections, requests other than
 * GET/HEAD (and, if asked, those too) must carry "Authorization: Bearer
 * <token>", else the server answers 401 with WWW-Authenticate: Bearer before
 * reading the body; a few exact paths (the probes) stay open. Unix socket
 * connections are trusted (filesystem permissions guard the socket).
 *
 * Request lifetime (the important contract):
 *   - the handler receives a borrowed-then-owned ws_httpd_req_t *: from the
 *     moment the handler is called it holds one reference to the request;
 *   - it gives that reference back by calling exactly one of
 *     ws_httpd_reply*(), ws_httpd_stream_end() or ws_httpd_req_drop();
 *     after that call the pointer is invalid;
 *   - if the connection goes away first (client hung up, idle timeout,
 *     ws_httpd_close()), the request becomes "gone": the optional on_gone
 *     callback runs once, and the handler's later reply is accepted and
 *     silently discarded (it still frees the request). A gone request never
 *     outlives the handler's final call, and never touches the server, so it
 *     may be answered even after the server has been closed.
 */
#ifndef WS_HTTPD_H
#define WS_HTTPD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ws_err.h"

struct cJSON;

typedef struct ws_httpd_s ws_httpd_t;
typedef struct ws_httpd_req_s ws_httpd_req_t;

/* Defaults used for a zero field of ws_httpd_config_t. */
#define WS_HTTPD_DEFAULT_MAX_HEADER_BYTES (16u * 1024u)
#define WS_HTTPD_DEFAULT_MAX_BODY_BYTES (1024u * 1024u)
#define WS_HTTPD_DEFAULT_MAX_CONNS 64u
#define WS_HTTPD_DEFAULT_IDLE_TIMEOUT_MS 30000u
#define WS_HTTPD_DEFAULT_HEADER_TIMEOUT_MS 10000u
#define WS_HTTPD_DEFAULT_BODY_TIMEOUT_MS 30000u
/* max_conns_per_addr 0: a quarter of max_conns (at least 1). */
#define WS_HTTPD_DEFAULT_CONNS_PER_ADDR_DIV 4u
#define WS_HTTPD_DEFAULT_MAX_WRITE_QUEUE_BYTES (4u * 1024u * 1024u)
#define WS_HTTPD_MAX_LISTENERS 8
#define WS_HTTPD_MAX_REQ_HEADERS 32 /* further headers are parsed, not kept */
#define WS_HTTPD_MAX_REPLY_HEADERS 8

/* What the slow-client defences did since creation (for metrics, logs and
 * tests). */
typedef struct {
  uint64_t deadline_closed; /* 408: headers or body not in time */
  uint64_t evicted;         /* closed to make room for a new connection */
  uint64_t refused;         /* new connections refused (503: all busy) */
  uint64_t unauthorized;    /* 401 answers */
} ws_httpd_stats_t;

typedef struct {
  size_t max_header_bytes;      /* request line + headers; 0 = 16 KiB */
  size_t max_body_bytes;        /* request body; 0 = 1 MiB */
  unsigned max_conns;           /* open connections; 0 = 64 */
  unsigned max_conns_per_addr;  /* open TCP connections from one client
                                   address; 0 = max_conns / 4 (>= 1) */
  uint64_t idle_timeout_ms;     /* no progress reading a request or writing
                                   a reply for this long closes; 0 = 30 s */
  uint64_t header_timeout_ms;   /* request line + headers must be complete
                                   this long after the request's first byte
                                   (after accept, for the first request):
                                   else 408; 0 = 10 s */
  uint64_t body_timeout_ms;     /* the body must be complete this long after
                                   the headers: else 408; 0 = 30 s */
  size_t max_write_queue_bytes; /* streamed bytes not yet written; 0 = 4 MiB */
  const char *name;             /* for log lines ("api", "http"); borrowed,
                                   must outlive the server; NULL = "httpd" */
  ws_httpd_stats_t *tally;      /* every count also added here (a daemon's
                                   servers share one for its metrics);
                                   borrowed, must outlive the server; NULL =
                                   none */
} ws_httpd_config_t;

typedef enum {
  WS_HTTPD_MATCH_EXACT, /* path == route path */
  WS_HTTPD_MATCH_PREFIX /* path starts with route path; longest wins */
} ws_httpd_match_t;

/* Handler: owns one reference to req from now on (see the contract above).
 * arg is the pointer given to ws_httpd_route(). */
typedef void (*ws_httpd_handler_cb)(ws_httpd_req_t *req, void *arg);
/* The connection behind req went away; req is still valid and must still be
 * given back (typically ws_httpd_req_drop(req) from here). */
typedef void (*ws_httpd_gone_cb)(ws_httpd_req_t *req, void *arg);
/* All listeners and connections are closed; the server is freed right after
 * this returns. */
typedef void (*ws_httpd_close_cb)(ws_httpd_t *srv, void *arg);

/* ---- server ---------------------------------------------------------- */

/* Creates a server on loop (borrowed; must outlive it). cfg may be NULL for
 * all defaults; it is copied. Returns 0 and *out (new; ends with
 * ws_httpd_close()), or -ENOMEM / WS_EUSAGE. */
WS_MUST_USE int ws_httpd_new(uv_loop_t *loop, const ws_httpd_config_t *cfg,
                             ws_httpd_t **out);

/* Listens on a unix socket at path: a stale socket file there is unlinked
 * first (only if it is a socket), then the new one is chmod'ed to mode
 * (e.g. 0660). Returns 0, WS_ELIMIT (too many listeners), WS_EUSAGE, or a
 * -errno from bind/listen. */
WS_MUST_USE int ws_httpd_listen_unix(ws_httpd_t *srv, const char *path,
                                     int mode);

/* Listens on TCP "HOST:PORT" ("127.0.0.1:8080", "[::1]:0", ":9000" = all
 * addresses). Port 0 picks a free port; *bound_port (may be NULL) gets the
 * port actually bound. Returns 0, WS_EUSAGE (bad address), WS_ELIMIT, or a
 * -errno. */
WS_MUST_USE int ws_httpd_listen_tcp(ws_httpd_t *srv, const char *host_port,
                                    int *bound_port);

/* Registers handler for method ("GET", "POST", ...) and path (starting with
 * '/'). Both strings are copied. Returns 0, WS_EUSAGE, WS_EEXISTS (same
 * method, path and match already registered), -ENOMEM. A path registered for
 * other methods only is answered 405; no matching path at all, 404. */
WS_MUST_USE int ws_httpd_route(ws_httpd_t *srv, const char *method,
                               const char *path, ws_httpd_match_t match,
                               ws_httpd_handler_cb handler, void *arg);

/* Bearer-token check for TCP connections (see the top of this file). */
typedef struct {
  const char *token;             /* copied (only its hash is kept); NULL or
                                    "" turns the check off */
  int reads;                     /* nonzero: GET and HEAD need it too */
  const char *const *open_paths; /* NULL-terminated exact paths that never
                                    need it (probes); copied; may be NULL */
} ws_httpd_auth_t;

/* Sets (or, with auth NULL or an empty token, clears) the token check for
 * requests parsed from now on. Returns 0, WS_EUSAGE or -ENOMEM. */
WS_MUST_USE int ws_httpd_set_auth(ws_httpd_t *srv, const ws_httpd_auth_t *auth);

/* Stops accepting, closes every listener and connection (requests held by
 * handlers become gone), unlinks unix socket files it created, then calls
 * cb (may be NULL) once everything is closed, and frees srv. Safe to call
 * from a handler. Call at most once. */
void ws_httpd_close(ws_httpd_t *srv, ws_httpd_close_cb cb, void *arg);

/* Number of open connections (for metrics and tests). */
unsigned ws_httpd_conn_count(const ws_httpd_t *srv);

void ws_httpd_get_stats(const ws_httpd_t *srv, ws_httpd_stats_t *out);

/* ---- request (all borrowed from req; valid until it is given back) ---- */

const char *ws_httpd_req_method(const ws_httpd_req_t *req); /* "GET" */
/* Path without the query string, not percent-decoded ("/api/v1/status"). */
const char *ws_httpd_req_path(const ws_httpd_req_t *req);
/* For a prefix route: the part of the path after the route's prefix
 * ("/api/v1/releases/" + "abc" -> "abc"); for an exact route "". */
const char *ws_httpd_req_path_rest(const ws_httpd_req_t *req);
/* Raw query string without '?', "" if none. */
const char *ws_httpd_req_query(const ws_httpd_req_t *req);
/* Copies the percent-decoded value of query parameter name into buf (NUL
 * terminated; "+" decodes to space). "?wait" yields "". Returns the value's
 * length, WS_ENOTFOUND, WS_ELIMIT (buf too small) or WS_EBADMSG (bad %xx). */
WS_MUST_USE int ws_httpd_req_query_get(const ws_httpd_req_t *req,
                                       const char *name, char *buf, size_t cap);
/* Value of header name (case-insensitive), or NULL. */
const char *ws_httpd_req_header(const ws_httpd_req_t *req, const char *name);
/* Body bytes (NUL terminated for convenience; len excludes the NUL) and
 * length; "" and 0 when there is none. */
const char *ws_httpd_req_body(const ws_httpd_req_t *req, size_t *len);
/* Parses the body as JSON. Returns 0 and *out (new; caller frees with
 * cJSON_Delete), or WS_EJSON (empty or malformed). */
WS_MUST_USE int ws_httpd_req_json(const ws_httpd_req_t *req,
                                  struct cJSON **out);
/* "unix" or "IP:PORT" of the client, for log lines. */
const char *ws_httpd_req_peer(const ws_httpd_req_t *req);
/* 1 once the connection has gone away (replies will be discarded). */
int ws_httpd_req_is_gone(const ws_httpd_req_t *req);
/* Registers cb to run (once) if the connection goes away before the request
 * is answered. Call it before returning from the handler when answering
 * later. If the request is already gone, cb is not called. */
void ws_httpd_req_on_gone(ws_httpd_req_t *req, ws_httpd_gone_cb cb, void *arg);

/* ---- answering (each gives req back; req is invalid afterwards) ------- */

/* Adds a response header for the reply or stream that follows (name and
 * value copied; no CR/LF allowed). Returns 0, WS_ELIMIT, WS_EUSAGE. */
WS_MUST_USE int ws_httpd_req_add_header(ws_httpd_req_t *req, const char *name,
                                        const char *value);
/* Replies with status, content type (NULL = "application/octet-stream") and
 * body (borrowed, copied before return; may be NULL when len is 0). */
void ws_httpd_reply(ws_httpd_req_t *req, int status, const char *ctype,
                    const void *body, size_t len);
/* Replies with json as application/json; takes json (freed here, may be
 * NULL which answers 500). */
void ws_httpd_reply_json(ws_httpd_req_t *req, int status, struct cJSON *json);
/* Replies {"error":{"code":"<ws_errname(err)>","message":message}}; message
 * NULL = ws_strerror(err). */
void ws_httpd_reply_error(ws_httpd_req_t *req, int status, int err,
                          const char *message);
/* Gives req back without answering: if its connection is still there it is
 * closed (the client sees EOF). Use from on_gone, or to abort. */
void ws_httpd_req_drop(ws_httpd_req_t *req);

/* Streaming: begin sends status and headers with chunked transfer coding;
 * the handler keeps req. Returns 0, WS_ECANCELED (gone; still call
 * ws_httpd_stream_end), WS_EBUSY (already begun). */
WS_MUST_USE int ws_httpd_stream_begin(ws_httpd_req_t *req, int status,
                                      const char *ctype);
/* Queues one chunk (copied; len 0 is a no-op). Returns 0, WS_ECANCELED
 * (gone), WS_EUSAGE (not begun) or WS_ELIMIT when more than
 * max_write_queue_bytes would be waiting: back off and write later (check
 * ws_httpd_stream_queued()). */
WS_MUST_USE int ws_httpd_stream_write(ws_httpd_req_t *req, const void *data,
                                      size_t len);
/* Bytes queued on req's connection and not yet written (0 if gone). */
size_t ws_httpd_stream_queued(const ws_httpd_req_t *req);
/* Ends the chunked body (or, if never begun, answers 500) and gives req
 * back. */
void ws_httpd_stream_end(ws_httpd_req_t *req);

/* Reason phrase for an HTTP status code ("Not Found"); never NULL. */
const char *ws_httpd_status_text(int status);

#endif
