/* ws_httpd-int.h - what ws_httpd.c (server, listeners, routes),
 * ws_httpd_conn.c (one connection's state machine), ws_httpd_admit.c
 * (connection caps) and ws_httpd_req.c
 * (requests and replies) share. Loop thread only. Not for other modules.
 */
#ifndef WS_HTTPD_INT_H
#define WS_HTTPD_INT_H

#include <http_parser.h>
#include <stdbool.h>

#include "ws_httpd.h"

/* Read buffer per connection. The parser streams, so this bounds nothing
 * but how much unparsed input (a pipelined next request) may wait. */
#define WS_HTTPD_INBUF_BYTES (16u * 1024u)
#define WS_HTTPD_METHOD_MAX 16

typedef struct ws_httpd_conn_s ws_httpd_conn_t;

typedef struct {
  char *method;
  char *path;
  size_t path_len;
  ws_httpd_match_t match;
  ws_httpd_handler_cb handler;
  void *arg;
} ws_httpd_route_t;

typedef union {
  uv_handle_t handle;
  uv_stream_t stream;
  uv_tcp_t tcp;
  uv_pipe_t pipe;
} ws_httpd_sock_t;

typedef struct {
  ws_httpd_sock_t sock; /* first: the close callback casts back */
  ws_httpd_t *srv;
  bool is_unix;
} ws_httpd_listener_t;

struct ws_httpd_s {
  uv_loop_t *loop; /* borrowed */
  ws_httpd_config_t cfg;
  ws_httpd_listener_t *listeners[WS_HTTPD_MAX_LISTENERS]; /* owned */
  int nlisteners;
  ws_httpd_route_t *routes; /* owned array */
  size_t nroutes, routes_cap;
  ws_httpd_conn_t *conns; /* owned list, freed in each close callback */
  unsigned nconns;
  /* Handles whose close callback has not run yet (listeners, connections,
   * rejected sockets, the close timer). The server is freed at 0. */
  unsigned open_handles;
  uv_timer_t close_timer; /* makes ws_httpd_close() always complete async */
  bool closing;
  ws_httpd_close_cb close_cb;
  void *close_arg;
  uint64_t next_conn_id;
  unsigned nlive; /* connections not closing: what the caps count */
  /* Bearer token (ws_httpd_set_auth): its BLAKE2b hash, so a comparison
   * takes the same time whatever the presented token's length. */
  bool auth_on;
  bool auth_reads;
  uint8_t auth_hash[32];
  char **auth_open; /* owned NULL-terminated copy of open_paths */
  ws_httpd_stats_t stats;
  ws_httpd_stats_t reported; /* stats at the last ws_httpd_note() line */
  uint64_t reported_ms;      /* loop time of that line; 0 = none yet */
};

typedef struct {
  uint32_t name_off, value_off; /* into ws_httpd_req_s.raw */
} ws_httpd_hdr_t;

struct ws_httpd_req_s {
  /* Two owners at most: the connection (from parse until its close
   * callback, or until the reply is queued) and the handler (from dispatch
   * until it gives the request back). Freed when both are done. */
  int refs;
  bool handler_done;     /* handler gave it back */
  ws_httpd_conn_t *conn; /* NULL once gone or answered */
  ws_httpd_gone_cb on_gone;
  void *gone_arg;

  char method[WS_HTTPD_METHOD_MAX];
  unsigned short http_major, http_minor;
  bool keep_alive;
  bool streaming;

  /* raw: url NUL, then name NUL value NUL ... ; capped by max_header_bytes */
  char *raw;
  size_t raw_len, raw_cap;
  ws_httpd_hdr_t hdrs[WS_HTTPD_MAX_REQ_HEADERS];
  unsigned nhdrs;
  char *path;            /* owned, split from the url */
  char *query;           /* owned */
  const char *path_rest; /* points into path */

  char *body; /* owned, NUL terminated */
  size_t body_len, body_cap;

  char *reply_hdrs[WS_HTTPD_MAX_REPLY_HEADERS]; /* owned "Name: value" */
  unsigned nreply_hdrs;
  char peer[64];
};

/* ---- ws_httpd.c ---- */
void ws_httpd_handle_closed(ws_httpd_t *srv);
/* Returns the route for req, or NULL with *path_known telling 404 vs 405. */
const ws_httpd_route_t *ws_httpd_route_find(const ws_httpd_t *srv,
                                            const char *method,
                                            const char *path, bool *path_known);

/* After a stats counter moved: one warning line with what the defences did
 * since the last line, at most every WS_HTTPD_NOTE_MS, so an attack is in
 * the log without a line per connection. */
#define WS_HTTPD_NOTE_MS 10000u
/* One more of the defence count field: the server's own, and its tally
 * (ws_httpd_config_t) if it has one. */
#define WS_HTTPD_COUNT(srv, field)                                             \
  do {                                                                         \
    (srv)->stats.field++;                                                      \
    if ((srv)->cfg.tally != NULL)                                              \
      (srv)->cfg.tally->field++;                                               \
  } while (0)
void ws_httpd_note(ws_httpd_t *srv);

/* 1 if the request (method, path, Authorization value or NULL) may pass
 * the token check of srv; TCP connections only. */
bool ws_httpd_auth_ok(const ws_httpd_t *srv, const char *method,
                      const char *path, const char *authorization);

/* ---- one connection (ws_httpd_conn.c; admission in ws_httpd_admit.c) -- */

typedef enum {
  CONN_READING,
  CONN_HANDLING,
  CONN_STREAMING,
  CONN_WRITING,
  CONN_CLOSING,
  CONN_STATE_LAST
} conn_state_t;

extern const char *const ws_httpd_conn_state_name[CONN_STATE_LAST];

struct ws_httpd_conn_s {
  ws_httpd_sock_t sock; /* handle data = this conn */
  uv_timer_t timer;     /* idle / read / write-stall timeout */
  ws_httpd_t *srv;      /* borrowed; outlives the conn */
  ws_httpd_conn_t *prev, *next;
  uint64_t id;
  conn_state_t state;
  int pending_closes; /* sock + timer close callbacks still to run */
  bool reading;       /* uv_read_start is active */
  bool peer_eof;
  bool keep_alive; /* for the reply being written */
  bool is_unix;
  bool counted;           /* admitted: counted in srv->nlive until closing */
  uint64_t read_since_ms; /* entered READING (accept or reply drained) */
  uint64_t deadline_ms;   /* the request being read is due; 0 = none yet */
  bool deadline_body;     /* deadline_ms is the body's (else the headers') */
  http_parser parser;
  ws_httpd_req_t *req; /* being parsed or handled; the conn holds one ref */
  bool req_ready;      /* parsed completely, not yet dispatched */
  int parse_status;    /* answer chosen by a parser callback; 0 = 400 */
  int hdr_phase;       /* 0 url, 1 header name, 2 header value */
  bool hdr_indexed;    /* current header gets a slot in req->hdrs */
  size_t wq_bytes;     /* queued, not yet written */
  unsigned pending_writes;
  size_t in_len;
  char peer[64];
  char addr[INET6_ADDRSTRLEN]; /* client IP for the per-address cap */
  char in[WS_HTTPD_INBUF_BYTES];
};

/* Fills conn->peer ("IP:PORT", "unix") and conn->addr (the IP). */
void ws_httpd_conn_peer_name(ws_httpd_conn_t *conn, bool is_unix);
/* Counts conn in (accepted, not yet reading) under the caps, closing the
 * longest reader to make room when needed. 0, or WS_EBUSY: refuse it. */
int ws_httpd_conn_admit(ws_httpd_t *srv, ws_httpd_conn_t *conn);
/* Writes a 503 with message if the socket takes it at once, and closes. */
void ws_httpd_conn_busy_close(ws_httpd_conn_t *conn, const char *message);

/* Accepts one connection from listener into a new conn (owned by srv's
 * list). Returns 0 or a -errno. */
int ws_httpd_conn_accept(ws_httpd_t *srv, uv_stream_t *listener, bool is_unix);
void ws_httpd_conn_close(ws_httpd_conn_t *conn);
void ws_httpd_conn_close_all(ws_httpd_t *srv);
/* One queued write: the uv_write_t and its bytes in one allocation that
 * lives until the write callback. */
typedef struct {
  uv_write_t w;
  ws_httpd_conn_t *conn;
  size_t len, cap;
  char data[];
} ws_httpd_wbuf_t;
/* Returns new (free with free()) or NULL. */
ws_httpd_wbuf_t *ws_httpd_wbuf_new(size_t cap);
/* Takes wb. Returns 0 or a -errno (the connection is then closing). */
int ws_httpd_conn_write(ws_httpd_conn_t *conn, ws_httpd_wbuf_t *wb);
size_t ws_httpd_conn_queued(const ws_httpd_conn_t *conn);
size_t ws_httpd_conn_max_queue(const ws_httpd_conn_t *conn);
bool ws_httpd_conn_srv_closing(const ws_httpd_conn_t *conn);
/* The reply for conn's current request is fully queued: detach the request
 * and write out, then keep alive or close. */
void ws_httpd_conn_reply_done(ws_httpd_conn_t *conn, bool keep_alive);
/* The handler started streaming. */
void ws_httpd_conn_stream_started(ws_httpd_conn_t *conn);

/* ---- ws_httpd_req.c ---- */
/* Returns a new request owned by conn (refs 1), or NULL. peer is copied. */
ws_httpd_req_t *ws_httpd_req_new(ws_httpd_conn_t *conn, const char *peer);
/* Drops one reference; frees at zero. Accepts NULL. */
void ws_httpd_req_unref(ws_httpd_req_t *req);
/* Appends to req->raw within cap; returns 0 or WS_ELIMIT / -ENOMEM. */
int ws_httpd_req_raw_append(ws_httpd_req_t *req, const char *p, size_t n,
                            size_t cap);
/* Splits the url into path and query; WS_EBADMSG if not origin-form. */
int ws_httpd_req_split_url(ws_httpd_req_t *req);
/* Appends body bytes within cap; returns 0 or WS_ELIMIT / -ENOMEM. */
int ws_httpd_req_body_append(ws_httpd_req_t *req, const char *p, size_t n,
                             size_t cap);

typedef enum {
  WS_HTTPD_BODY_LENGTH,  /* Content-Length: len, body follows */
  WS_HTTPD_BODY_CHUNKED, /* Transfer-Encoding: chunked, head only */
  WS_HTTPD_BODY_TO_EOF,  /* HTTP/1.0 stream: no length, ends at close */
  WS_HTTPD_BODY_LAST
} ws_httpd_body_mode_t;
/* Builds status line, headers (extra: nextra "Name: value" strings,
 * borrowed) and, for WS_HTTPD_BODY_LENGTH, the body. Returns new or NULL. */
ws_httpd_wbuf_t *ws_httpd_resp_build(int status, const char *ctype,
                                     const void *body, size_t len,
                                     ws_httpd_body_mode_t mode, bool keep_alive,
                                     char *const *extra, unsigned nextra);
/* Returns the JSON error document (new, malloc'd, NUL terminated) for err
 * and message (NULL = ws_strerror(err)), or NULL; *len gets its length. */
char *ws_httpd_error_body(int err, const char *message, size_t *len);

#endif
