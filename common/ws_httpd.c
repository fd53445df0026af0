/* ws_httpd.c - the HTTP server object: listeners (unix socket, TCP), the
 * route table, accepting connections under the connection cap, and
 * shutdown. Connections live in ws_httpd_conn.c, requests and replies in
 * ws_httpd_req.c. Loop thread only.
 *
 * Server states: open -> closing (ws_httpd_close) -> freed once every
 * handle it owns has run its close callback (open_handles == 0). The close
 * timer is one of those handles, so completion is always asynchronous.
 */
#include "ws_httpd-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

#include "ws_log.h"

static const char *const k_status_text[][2] = {
    {"100", "Continue"},
    {"200", "OK"},
    {"201", "Created"},
    {"202", "Accepted"},
    {"204", "No Content"},
    {"301", "Moved Permanently"},
    {"302", "Found"},
    {"304", "Not Modified"},
    {"400", "Bad Request"},
    {"401", "Unauthorized"},
    {"403", "Forbidden"},
    {"404", "Not Found"},
    {"405", "Method Not Allowed"},
    {"408", "Request Timeout"},
    {"409", "Conflict"},
    {"410", "Gone"},
    {"411", "Length Required"},
    {"413", "Content Too Large"},
    {"415", "Unsupported Media Type"},
    {"422", "Unprocessable Content"},
    {"429", "Too Many Requests"},
    {"431", "Request Header Fields Too Large"},
    {"500", "Internal Server Error"},
    {"501", "Not Implemented"},
    {"502", "Bad Gateway"},
    {"503", "Service Unavailable"},
    {"504", "Gateway Timeout"},
    {"507", "Insufficient Storage"},
};

const char *ws_httpd_status_text(int status) {
  char code[8];
  snprintf(code, sizeof(code), "%d", status);
  for (size_t i = 0; i < sizeof(k_status_text) / sizeof(k_status_text[0]);
       i++) {
    if (strcmp(code, k_status_text[i][0]) == 0)
      return k_status_text[i][1];
  }
  return "Unknown";
}

/* ---- creation --------------------------------------------------------- */

static void srv_timer_closed(uv_handle_t *h) {
  ws_httpd_handle_closed(h->data);
}

int ws_httpd_new(uv_loop_t *loop, const ws_httpd_config_t *cfg,
                 ws_httpd_t **out) {
  ws_httpd_t *srv;
  int rc;

  if (loop == NULL || out == NULL)
    return WS_EUSAGE;
  srv = calloc(1, sizeof(*srv));
  if (srv == NULL)
    return -ENOMEM;
  srv->loop = loop;
  if (cfg != NULL)
    srv->cfg = *cfg;
  if (srv->cfg.max_header_bytes == 0)
    srv->cfg.max_header_bytes = WS_HTTPD_DEFAULT_MAX_HEADER_BYTES;
  if (srv->cfg.max_body_bytes == 0)
    srv->cfg.max_body_bytes = WS_HTTPD_DEFAULT_MAX_BODY_BYTES;
  if (srv->cfg.max_conns == 0)
    srv->cfg.max_conns = WS_HTTPD_DEFAULT_MAX_CONNS;
  if (srv->cfg.max_conns_per_addr == 0)
    srv->cfg.max_conns_per_addr =
        srv->cfg.max_conns / WS_HTTPD_DEFAULT_CONNS_PER_ADDR_DIV;
  if (srv->cfg.max_conns_per_addr == 0)
    srv->cfg.max_conns_per_addr = 1;
  if (srv->cfg.idle_timeout_ms == 0)
    srv->cfg.idle_timeout_ms = WS_HTTPD_DEFAULT_IDLE_TIMEOUT_MS;
  if (srv->cfg.header_timeout_ms == 0)
    srv->cfg.header_timeout_ms = WS_HTTPD_DEFAULT_HEADER_TIMEOUT_MS;
  if (srv->cfg.body_timeout_ms == 0)
    srv->cfg.body_timeout_ms = WS_HTTPD_DEFAULT_BODY_TIMEOUT_MS;
  if (srv->cfg.max_write_queue_bytes == 0)
    srv->cfg.max_write_queue_bytes = WS_HTTPD_DEFAULT_MAX_WRITE_QUEUE_BYTES;
  if (srv->cfg.name == NULL)
    srv->cfg.name = "httpd";
  rc = uv_timer_init(loop, &srv->close_timer);
  if (rc < 0)
    goto err_free;
  srv->close_timer.data = srv;
  srv->open_handles = 1;
  *out = srv;
  return 0;

err_free:
  free(srv);
  return rc;
}

/* ---- listeners -------------------------------------------------------- */

static void srv_on_connection(uv_stream_t *server, int status) {
  ws_httpd_listener_t *l = (ws_httpd_listener_t *)server;
  int rc;

  if (status < 0) {
    WS_LOGW("%s: accept failed: %s", l->srv->cfg.name, uv_strerror(status));
    return;
  }
  if (l->srv->closing)
    return;
  rc = ws_httpd_conn_accept(l->srv, server, l->is_unix);
  if (rc == WS_EBUSY)
    WS_LOGD("%s: refused a connection: %u open, every one busy (max_conns "
            "%u, per address %u)",
            l->srv->cfg.name, l->srv->nlive, l->srv->cfg.max_conns,
            l->srv->cfg.max_conns_per_addr);
  else if (rc < 0)
    WS_LOGW("%s: accept failed: %s", l->srv->cfg.name, ws_strerror(rc));
}

static void srv_listener_closed(uv_handle_t *h) {
  ws_httpd_listener_t *l = (ws_httpd_listener_t *)h;
  ws_httpd_t *srv = l->srv;

  free(l);
  ws_httpd_handle_closed(srv);
}

static int srv_listener_add(ws_httpd_t *srv, ws_httpd_listener_t **out) {
  ws_httpd_listener_t *l;

  if (srv->closing)
    return WS_EUSAGE;
  if (srv->nlisteners >= WS_HTTPD_MAX_LISTENERS)
    return WS_ELIMIT;
  l = calloc(1, sizeof(*l));
  if (l == NULL)
    return -ENOMEM;
  l->srv = srv;
  *out = l;
  return 0;
}

/* Registers an initialized listener handle: from here it is closed (and
 * freed) through uv_close, also on failure. */
static int srv_listener_start(ws_httpd_t *srv, ws_httpd_listener_t *l) {
  int rc;

  srv->listeners[srv->nlisteners++] = l;
  srv->open_handles++;
  /* Backlog 128: the connection cap applies after accept. */
  rc = uv_listen(&l->sock.stream, 128, srv_on_connection);
  if (rc < 0) {
    srv->listeners[--srv->nlisteners] = NULL;
    uv_close(&l->sock.handle, srv_listener_closed);
  }
  return rc;
}

/* Startup only (a local connect answers at once). Returns 0 if nobody
 * listens at path (stale), -EADDRINUSE if someone does, or -errno. */
static int srv_unix_probe(const char *path) {
  struct sockaddr_un sa;
  size_t len = strlen(path);
  int fd, rc = 0;

  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  if (len >= sizeof(sa.sun_path))
    return -ENAMETOOLONG;
  memcpy(sa.sun_path, path, len + 1);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN)
    rc = -EADDRINUSE;
  else if (errno != ECONNREFUSED)
    rc = -errno;
  close(fd);
  return rc;
}

int ws_httpd_listen_unix(ws_httpd_t *srv, const char *path, int mode) {
  ws_httpd_listener_t *l = NULL;
  struct stat st;
  int rc;

  if (srv == NULL || path == NULL || path[0] == '\0')
    return WS_EUSAGE;
  /* A socket file left by a crashed daemon would make bind fail; anything
   * else at that path is not ours to remove, nor is a live daemon's socket. */
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return -EEXIST;
    rc = srv_unix_probe(path);
    if (rc < 0)
      return rc;
    if (unlink(path) != 0)
      return -errno;
  }
  rc = srv_listener_add(srv, &l);
  if (rc < 0)
    return rc;
  rc = uv_pipe_init(srv->loop, &l->sock.pipe, 0);
  if (rc < 0) {
    free(l);
    return rc;
  }
  l->is_unix = true;
  rc = uv_pipe_bind(&l->sock.pipe, path);
  if (rc < 0)
    goto err_close;
  /* chmod after bind: the window with umask permissions is before listen,
   * when nobody can connect yet. */
  if (chmod(path, (mode_t)mode) != 0) {
    rc = -errno;
    goto err_close;
  }
  return srv_listener_start(srv, l);

err_close:
  srv->open_handles++;
  uv_close(&l->sock.handle, srv_listener_closed);
  return rc;
}

/* Parses "HOST:PORT", "[V6]:PORT" or ":PORT" into addr. Numeric hosts only
 * (no DNS on the loop thread), plus "localhost". */
static int srv_parse_host_port(const char *hp, struct sockaddr_storage *addr) {
  char host[64];
  const char *colon, *hs = hp, *he;
  char *end;
  long port;

  if (hp[0] == '[') {
    he = strchr(hp, ']');
    if (he == NULL || he[1] != ':')
      return WS_EUSAGE;
    hs = hp + 1;
    colon = he + 1;
  } else {
    colon = strrchr(hp, ':');
    if (colon == NULL)
      return WS_EUSAGE;
    he = colon;
  }
  if ((size_t)(he - hs) >= sizeof(host))
    return WS_EUSAGE;
  memcpy(host, hs, (size_t)(he - hs));
  host[he - hs] = '\0';
  errno = 0;
  port = strtol(colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || port < 0 ||
      port > 65535)
    return WS_EUSAGE;
  if (host[0] == '\0')
    snprintf(host, sizeof(host), "0.0.0.0");
  else if (strcasecmp(host, "localhost") == 0)
    snprintf(host, sizeof(host), "127.0.0.1");
  if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)addr) == 0)
    return 0;
  if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)addr) == 0)
    return 0;
  return WS_EUSAGE;
}

int ws_httpd_listen_tcp(ws_httpd_t *srv, const char *host_port,
                        int *bound_port) {
  ws_httpd_listener_t *l = NULL;
  struct sockaddr_storage addr, bound;
  int rc, len = sizeof(bound);

  if (srv == NULL || host_port == NULL)
    return WS_EUSAGE;
  memset(&addr, 0, sizeof(addr));
  rc = srv_parse_host_port(host_port, &addr);
  if (rc < 0)
    return rc;
  rc = srv_listener_add(srv, &l);
  if (rc < 0)
    return rc;
  rc = uv_tcp_init(srv->loop, &l->sock.tcp);
  if (rc < 0) {
    free(l);
    return rc;
  }
  rc = uv_tcp_bind(&l->sock.tcp, (const struct sockaddr *)&addr, 0);
  if (rc < 0)
    goto err_close;
  rc = uv_tcp_getsockname(&l->sock.tcp, (struct sockaddr *)&bound, &len);
  if (rc < 0)
    goto err_close;
  rc = srv_listener_start(srv, l);
  if (rc < 0)
    return rc;
  if (bound_port != NULL)
    *bound_port = ntohs(bound.ss_family == AF_INET6
                            ? ((struct sockaddr_in6 *)&bound)->sin6_port
                            : ((struct sockaddr_in *)&bound)->sin_port);
  return 0;

err_close:
  srv->open_handles++;
  uv_close(&l->sock.handle, srv_listener_closed);
  return rc;
}

/* ---- routes ----------------------------------------------------------- */

int ws_httpd_route(ws_httpd_t *srv, const char *method, const char *path,
                   ws_httpd_match_t match, ws_httpd_handler_cb handler,
                   void *arg) {
  ws_httpd_route_t *r;

  if (srv == NULL || method == NULL || path == NULL || path[0] != '/' ||
      handler == NULL || strlen(method) >= WS_HTTPD_METHOD_MAX ||
      (match != WS_HTTPD_MATCH_EXACT && match != WS_HTTPD_MATCH_PREFIX))
    return WS_EUSAGE;
  for (size_t i = 0; i < srv->nroutes; i++) {
    r = &srv->routes[i];
    if (r->match == match && strcmp(r->method, method) == 0 &&
        strcmp(r->path, path) == 0)
      return WS_EEXISTS;
  }
  if (srv->nroutes == srv->routes_cap) {
    size_t cap = srv->routes_cap ? srv->routes_cap * 2 : 8;
    ws_httpd_route_t *nr = realloc(srv->routes, cap * sizeof(*nr));
    if (nr == NULL)
      return -ENOMEM;
    srv->routes = nr;
    srv->routes_cap = cap;
  }
  r = &srv->routes[srv->nroutes];
  memset(r, 0, sizeof(*r));
  r->method = strdup(method);
  r->path = strdup(path);
  if (r->method == NULL || r->path == NULL) {
    free(r->method);
    free(r->path);
    return -ENOMEM;
  }
  r->path_len = strlen(path);
  r->match = match;
  r->handler = handler;
  r->arg = arg;
  srv->nroutes++;
  return 0;
}

const ws_httpd_route_t *ws_httpd_route_find(const ws_httpd_t *srv,
                                            const char *method,
                                            const char *path,
                                            bool *path_known) {
  const ws_httpd_route_t *best = NULL;

  *path_known = false;
  for (size_t i = 0; i < srv->nroutes; i++) {
    const ws_httpd_route_t *r = &srv->routes[i];
    bool hit = r->match == WS_HTTPD_MATCH_EXACT
                   ? strcmp(path, r->path) == 0
                   : strncmp(path, r->path, r->path_len) == 0;
    if (!hit)
      continue;
    *path_known = true;
    if (strcmp(method, r->method) != 0)
      continue;
    /* Exact beats prefix; a longer prefix beats a shorter one. */
    if (best == NULL || r->match == WS_HTTPD_MATCH_EXACT ||
        (best->match == WS_HTTPD_MATCH_PREFIX && r->path_len > best->path_len))
      best = r;
    if (best->match == WS_HTTPD_MATCH_EXACT)
      break;
  }
  return best;
}

/* ---- bearer token ----------------------------------------------------- */

static void srv_auth_free(ws_httpd_t *srv) {
  for (size_t i = 0; srv->auth_open != NULL && srv->auth_open[i] != NULL; i++)
    free(srv->auth_open[i]);
  free(srv->auth_open);
  srv->auth_open = NULL;
  srv->auth_on = false;
  sodium_memzero(srv->auth_hash, sizeof(srv->auth_hash));
}

int ws_httpd_set_auth(ws_httpd_t *srv, const ws_httpd_auth_t *auth) {
  size_t n = 0;

  if (srv == NULL)
    return WS_EUSAGE;
  srv_auth_free(srv);
  if (auth == NULL || auth->token == NULL || auth->token[0] == '\0')
    return 0;
  if (sodium_init() < 0)
    return -ENOMEM;
  while (auth->open_paths != NULL && auth->open_paths[n] != NULL)
    n++;
  srv->auth_open = calloc(n + 1, sizeof(char *));
  if (srv->auth_open == NULL)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    srv->auth_open[i] = strdup(auth->open_paths[i]);
    if (srv->auth_open[i] == NULL) {
      srv_auth_free(srv);
      return -ENOMEM;
    }
  }
  crypto_generichash(srv->auth_hash, sizeof(srv->auth_hash),
                     (const unsigned char *)auth->token, strlen(auth->token),
                     NULL, 0);
  srv->auth_reads = auth->reads != 0;
  srv->auth_on = true;
  return 0;
}

bool ws_httpd_auth_ok(const ws_httpd_t *srv, const char *method,
                      const char *path, const char *authorization) {
  uint8_t got[sizeof(srv->auth_hash)];
  const char *tok;
  bool ok;

  if (!srv->auth_on)
    return true;
  if (!srv->auth_reads &&
      (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0))
    return true;
  for (size_t i = 0; srv->auth_open[i] != NULL; i++) {
    if (strcmp(path, srv->auth_open[i]) == 0)
      return true;
  }
  /* RFC 6750: "Bearer" (any case), one or more spaces, the token. */
  if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
    return false;
  tok = authorization + 7;
  while (*tok == ' ')
    tok++;
  /* Hashing first makes the comparison independent of where (and whether
   * by length) the presented token differs. */
  crypto_generichash(got, sizeof(got), (const unsigned char *)tok, strlen(tok),
                     NULL, 0);
  ok = sodium_memcmp(got, srv->auth_hash, sizeof(got)) == 0;
  sodium_memzero(got, sizeof(got));
  return ok;
}

/* ---- shutdown --------------------------------------------------------- */

unsigned ws_httpd_conn_count(const ws_httpd_t *srv) {
  return srv->nconns;
}

void ws_httpd_get_stats(const ws_httpd_t *srv, ws_httpd_stats_t *out) {
  *out = srv->stats;
}

void ws_httpd_note(ws_httpd_t *srv) {
  const ws_httpd_stats_t *n = &srv->stats, *o = &srv->reported;
  uint64_t now = uv_now(srv->loop);

  if (srv->reported_ms != 0 && now - srv->reported_ms < WS_HTTPD_NOTE_MS)
    return;
  WS_LOGW("%s: since %s: %llu requests too slow (408), %llu connections "
          "closed to make room, %llu refused (503), %llu unauthorized (401)",
          srv->cfg.name, srv->reported_ms != 0 ? "the last report" : "start",
          (unsigned long long)(n->deadline_closed - o->deadline_closed),
          (unsigned long long)(n->evicted - o->evicted),
          (unsigned long long)(n->refused - o->refused),
          (unsigned long long)(n->unauthorized - o->unauthorized));
  srv->reported = *n;
  srv->reported_ms = now != 0 ? now : 1;
}

static void srv_free(ws_httpd_t *srv) {
  srv_auth_free(srv);
  for (size_t i = 0; i < srv->nroutes; i++) {
    free(srv->routes[i].method);
    free(srv->routes[i].path);
  }
  free(srv->routes);
  free(srv);
}

void ws_httpd_handle_closed(ws_httpd_t *srv) {
  if (--srv->open_handles > 0)
    return;
  if (srv->close_cb != NULL)
    srv->close_cb(srv, srv->close_arg);
  srv_free(srv);
}

void ws_httpd_close(ws_httpd_t *srv, ws_httpd_close_cb cb, void *arg) {
  if (srv == NULL || srv->closing)
    return;
  srv->closing = true;
  srv->close_cb = cb;
  srv->close_arg = arg;
  for (int i = 0; i < srv->nlisteners; i++) {
    uv_close(&srv->listeners[i]->sock.handle, srv_listener_closed);
    srv->listeners[i] = NULL;
  }
  srv->nlisteners = 0;
  ws_httpd_conn_close_all(srv);
  uv_close((uv_handle_t *)&srv->close_timer, srv_timer_closed);
}
