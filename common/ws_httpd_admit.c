/* ws_httpd_admit.c - who gets a connection slot: the peer's address,
 * the caps on connections (all, and per client address), and closing the
 * longest reader to make room (see ws_httpd_conn.c for why). Loop thread
 * only.
 */
#include "ws_httpd-int.h"

#include <stdio.h>
#include <string.h>

#include "ws_log.h"

/* Says 503 if the socket takes it at once (nothing is queued: the conn is
 * closed right after), and closes conn. */
void ws_httpd_conn_busy_close(ws_httpd_conn_t *conn, const char *message) {
  char body[160], busy[352];
  int bn = snprintf(body, sizeof(body),
                    "{\"error\":{\"code\":\"WS_EBUSY\",\"message\":\"%s\"}}",
                    message);
  int n = snprintf(busy, sizeof(busy),
                   "HTTP/1.1 503 Service Unavailable\r\n"
                   "Content-Type: application/json\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                   bn, body);
  uv_buf_t b = uv_buf_init(busy, (unsigned)n);

  if (conn->pending_writes == 0 && bn > 0 && (size_t)bn < sizeof(body) &&
      n > 0 && (size_t)n < sizeof(busy))
    (void)uv_try_write(&conn->sock.stream, &b, 1);
  ws_httpd_conn_close(conn);
}

/* The READING connection (other than fresh) that has been reading the
 * longest, among all or only those from fresh's address; NULL if none. */
static ws_httpd_conn_t *
conn_victim(ws_httpd_t *srv, const ws_httpd_conn_t *fresh, bool same_addr) {
  ws_httpd_conn_t *best = NULL;

  for (ws_httpd_conn_t *c = srv->conns; c != NULL; c = c->next) {
    if (c == fresh || c->state != CONN_READING || !c->counted)
      continue;
    if (same_addr && (c->is_unix || strcmp(c->addr, fresh->addr) != 0))
      continue;
    if (best == NULL || c->read_since_ms < best->read_since_ms ||
        (c->read_since_ms == best->read_since_ms && c->id < best->id))
      best = c;
  }
  return best;
}

/* Lets fresh in under max_conns and max_conns_per_addr, closing the
 * longest reader to make room when needed. 0, or WS_EBUSY (refuse it). */
int ws_httpd_conn_admit(ws_httpd_t *srv, ws_httpd_conn_t *fresh) {
  unsigned same = 0;
  ws_httpd_conn_t *victim = NULL;

  if (!fresh->is_unix) {
    for (ws_httpd_conn_t *c = srv->conns; c != NULL; c = c->next)
      if (c != fresh && c->counted && !c->is_unix &&
          strcmp(c->addr, fresh->addr) == 0)
        same++;
  }
  if (same >= srv->cfg.max_conns_per_addr) {
    victim = conn_victim(srv, fresh, true);
    if (victim == NULL)
      return WS_EBUSY;
  } else if (srv->nlive >= srv->cfg.max_conns) {
    victim = conn_victim(srv, fresh, false);
    if (victim == NULL)
      return WS_EBUSY;
  }
  if (victim != NULL) {
    WS_LOGD("%s conn#%llu peer=%s: closed for conn#%llu peer=%s (%s since "
            "%llu ms)",
            srv->cfg.name, (unsigned long long)victim->id, victim->peer,
            (unsigned long long)fresh->id, fresh->peer,
            ws_httpd_conn_state_name[victim->state],
            (unsigned long long)(uv_now(srv->loop) - victim->read_since_ms));
    WS_HTTPD_COUNT(srv, evicted);
    ws_httpd_note(srv);
    ws_httpd_conn_busy_close(victim,
                             "connection closed to make room for another");
  }
  fresh->counted = true;
  srv->nlive++;
  return 0;
}

void ws_httpd_conn_peer_name(ws_httpd_conn_t *conn, bool is_unix) {
  struct sockaddr_storage ss;
  char ip[INET6_ADDRSTRLEN] = "?";
  int len = sizeof(ss), port = 0;

  snprintf(conn->peer, sizeof(conn->peer), "unix");
  if (is_unix ||
      uv_tcp_getpeername(&conn->sock.tcp, (struct sockaddr *)&ss, &len) < 0)
    return;
  conn->addr[0] = '\0';
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    uv_ip6_name(a6, ip, sizeof(ip));
    snprintf(conn->addr, sizeof(conn->addr), "%s", ip);
    port = ntohs(a6->sin6_port);
    snprintf(conn->peer, sizeof(conn->peer), "[%s]:%d", ip, port);
  } else {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    uv_ip4_name(a4, ip, sizeof(ip));
    snprintf(conn->addr, sizeof(conn->addr), "%s", ip);
    port = ntohs(a4->sin_port);
    snprintf(conn->peer, sizeof(conn->peer), "%s:%d", ip, port);
  }
}
