/* trk_server.c - the peer listener: the uv TCP listener, connection caps,
 * the wire_conn callbacks (ready, frame, close), the per-connection frame
 * rate, the sweep timer and shutdown.
 *
 * Owns every trk_conn_t (a doubly linked list). Each wraps one wire_conn_t,
 * which owns the socket, the handshake (tracker = responder), sealing,
 * the bounded send queue and the handshake / idle / linger timeouts; a
 * trk_conn_t is freed only in its wire_conn's on_close, which never runs
 * inside another wire_conn call. The server itself is freed once the
 * listener and sweep handles have closed and the last on_close has run.
 * The state machine is in trk_server-int.h; messages in trk_server_msg.c.
 * Loop thread only.
 */
#include "trk_server-int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ws_log.h"

/* p2pd's tracker link sends nothing between announces (no keepalive), so
 * an idle timeout within one interval would drop healthy peers; two
 * intervals leave room for one late announce. */
_Static_assert(TRK_CONN_IDLE_TIMEOUT_MS > 2u * TRK_ANNOUNCE_INTERVAL_MS,
               "tracker idle timeout must exceed the announce interval");

static const char *state_name(trk_conn_state_t s) {
  static const char *const names[TRK_CONN_LAST] = {"handshake", "ready",
                                                   "closing"};
  return s < TRK_CONN_LAST ? names[s] : "?";
}

void trk_conn_set_state(trk_conn_t *c, trk_conn_state_t next) {
  assert((c->state == TRK_CONN_HANDSHAKE &&
          (next == TRK_CONN_READY || next == TRK_CONN_CLOSING)) ||
         (c->state == TRK_CONN_READY && next == TRK_CONN_CLOSING));
  WS_LOGD("conn#%llu: %s -> %s", (unsigned long long)c->id,
          state_name(c->state), state_name(next));
  if (c->state == TRK_CONN_HANDSHAKE)
    c->srv->preauth--;
  c->state = next;
}

int trk_addr_parse(const char *hp, struct sockaddr_storage *sa) {
  char host[64];
  const char *colon;
  const char *h = hp;
  size_t hl;
  if (hp == NULL)
    return WS_EUSAGE;
  if (hp[0] == '[') {
    const char *end = strchr(hp, ']');
    if (end == NULL || end[1] != ':')
      return WS_EUSAGE;
    h = hp + 1;
    hl = (size_t)(end - h);
    colon = end + 1;
  } else {
    colon = strrchr(hp, ':');
    if (colon == NULL)
      return WS_EUSAGE;
    hl = (size_t)(colon - hp);
  }
  if (hl >= sizeof(host))
    return WS_EUSAGE;
  memcpy(host, h, hl);
  host[hl] = '\0';
  char *end;
  errno = 0;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (colon[1] == '\0' || *end != '\0' || errno != 0 || port > 65535)
    return WS_EUSAGE;
  memset(sa, 0, sizeof(*sa));
  if (hl == 0)
    memcpy(host, "0.0.0.0", sizeof("0.0.0.0"));
  if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)sa) == 0)
    return 0;
  if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)sa) == 0)
    return 0;
  return WS_EUSAGE;
}

/* ---- server lifetime -------------------------------------------------- */

static void server_maybe_free(trk_server_t *srv) {
  if (!srv->closing || srv->live_handles > 0 || srv->conns != NULL)
    return;
  if (srv->close_cb != NULL)
    srv->close_cb(srv, srv->close_arg);
  sodium_memzero(srv->cfg.key, sizeof(srv->cfg.key));
  free(srv);
}

static void handle_closed_cb(uv_handle_t *h) {
  trk_server_t *srv = h->data;
  assert(srv->live_handles > 0);
  srv->live_handles--;
  server_maybe_free(srv);
}

/* ---- closing one connection ------------------------------------------- */

/* Leaves HANDSHAKE/READY for CLOSING: logs once, frees the peer's tracker
 * state at once. */
static void conn_closing(trk_conn_t *c, const char *why) {
  trk_server_t *srv = c->srv;
  if (c->state == TRK_CONN_READY && !c->refused)
    WS_LOGI("conn#%llu %s node=%s: closed: %s", (unsigned long long)c->id,
            wire_conn_peer(c->wc)->addr, wire_conn_peer(c->wc)->node_id, why);
  else if (c->refused)
    WS_LOGD("conn#%llu %s node=%s: closed: %s", (unsigned long long)c->id,
            wire_conn_peer(c->wc)->addr, wire_conn_peer(c->wc)->node_id, why);
  else
    WS_LOGD("conn#%llu %s: closed during handshake: %s",
            (unsigned long long)c->id, wire_conn_peer(c->wc)->addr, why);
  if (c->peer != 0) {
    trk_tracker_disconnect(srv->t, c->peer);
    c->peer = 0;
  }
  trk_conn_set_state(c, TRK_CONN_CLOSING);
}

void trk_conn_close(trk_conn_t *c, int status, const char *why) {
  if (c->state == TRK_CONN_CLOSING)
    return;
  conn_closing(c, why);
  wire_conn_close(c->wc, status);
}

void trk_conn_goodbye(trk_conn_t *c, ws_bye_reason_t reason, const char *why) {
  if (c->state == TRK_CONN_CLOSING)
    return;
  conn_closing(c, why);
  wire_conn_goodbye(c->wc, reason);
}

int trk_conn_send(trk_conn_t *c, const ws_msg_t *m) {
  if (c->state != TRK_CONN_READY)
    return -ENOTCONN;
  int rc = wire_conn_send(c->wc, m);
  /* A full queue means the peer does not read its replies: drop it rather
   * than buffer (every reply answers a frame it sent). */
  if (rc == WS_ELIMIT)
    trk_conn_close(c, rc, "reply queue full");
  else if (rc < 0)
    trk_conn_close(c, rc, ws_strerror(rc));
  return rc;
}

void trk_conn_send_error(trk_conn_t *c, int code, const char *msg) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ERROR;
  m.u.error.code = code;
  snprintf(m.u.error.msg, sizeof(m.u.error.msg), "%s", msg);
  (void)trk_conn_send(c, &m); /* failure already closed c */
}

trk_conn_t *trk_server_find_peer(trk_server_t *srv, trk_peer_id_t id) {
  for (trk_conn_t *c = srv->conns; c != NULL; c = c->next)
    if (c->peer == id && c->state == TRK_CONN_READY)
      return c;
  return NULL;
}

/* ---- refusals ----------------------------------------------------------- */

void trk_server_refused_flush(trk_server_t *srv) {
  char line[256];
  size_t n = 0;
  uint64_t now = uv_now(srv->loop), total = 0;
  if (srv->refused_log_ms != 0 &&
      now - srv->refused_log_ms < TRK_REFUSAL_LOG_MS)
    return;
  line[0] = '\0';
  for (int r = 0; r < TRK_REFUSE_LAST; r++) {
    if (srv->refused_unlogged[r] == 0)
      continue;
    int k =
        snprintf(line + n, sizeof(line) - n, "%s%llu %s", total > 0 ? ", " : "",
                 (unsigned long long)srv->refused_unlogged[r],
                 trk_refusal_name((trk_refusal_t)r));
    if (k > 0 && (size_t)k < sizeof(line) - n)
      n += (size_t)k;
    total += srv->refused_unlogged[r];
    srv->refused_unlogged[r] = 0;
  }
  if (total == 0)
    return;
  srv->refused_log_ms = now;
  trk_peers_t *reg = trk_tracker_peers(srv->t);
  WS_LOGW("refused %llu nodes or connections at a cap (%s; %u/%u peers "
          "connected); next report in %u s at the earliest",
          (unsigned long long)total, line, trk_peers_count(reg),
          trk_peers_max(reg), TRK_REFUSAL_LOG_MS / 1000u);
}

void trk_server_refused(trk_server_t *srv, trk_refusal_t why) {
  if (why < TRK_REFUSE_LAST)
    srv->refused_unlogged[why]++;
  trk_server_refused_flush(srv);
}

/* ---- wire_conn callbacks ---------------------------------------------- */

static void conn_on_ready(wire_conn_t *wc, const wire_peer_t *p) {
  trk_conn_t *c = wire_conn_user(wc);
  if (c->state != TRK_CONN_HANDSHAKE)
    return;
  if (p->role != WS_ROLE_PEER) {
    c->srv->st.protocol_errors++;
    trk_conn_close(c, WS_EPROTO, "HELLO from a non-peer");
    return;
  }
  trk_conn_set_state(c, TRK_CONN_READY);
  trk_conn_register(c);
}

/* Counts a frame against c's per-second budget; false once exceeded. */
static bool frame_budget(trk_conn_t *c, uint64_t now) {
  if (now - c->window_ms >= 1000u) {
    c->window_ms = now;
    c->window_frames = 0;
  }
  return ++c->window_frames <= TRK_CONN_FRAMES_PER_S;
}

static void conn_on_frame(wire_conn_t *wc, const ws_msg_t *m) {
  trk_conn_t *c = wire_conn_user(wc);
  if (c->state != TRK_CONN_READY)
    return;
  trk_conn_on_msg(c, m);
  if (c->state == TRK_CONN_READY && !c->throttled &&
      !frame_budget(c, uv_now(c->srv->loop))) {
    /* Back-pressure, not a ban: stop reading until the next sweep. */
    c->throttled = true;
    wire_conn_read_pause(wc);
  }
}

/* Why the wire_conn closed on its own, for the log and the counters. */
static const char *close_reason(trk_server_t *srv, int status) {
  switch (status) {
  case WS_EAUTH:
    srv->st.auth_failed++; /* wrong cluster key or a bad frame MAC */
    break;
  case WS_EPROTO:
  case WS_EBADMSG:
  case WS_ELIMIT:
  case WS_ETRUNCATED:
  case WS_EVERSION:
    srv->st.protocol_errors++;
    break;
  case UV_EOF:
    return "eof";
  case WS_ETIMEOUT:
    return "handshake or idle timeout";
  default:
    break;
  }
  return ws_strerror(status);
}

static void conn_on_close(wire_conn_t *wc, int status) {
  trk_conn_t *c = wire_conn_user(wc);
  trk_server_t *srv = c->srv;
  wire_conn_stats_t ws;
  if (c->state != TRK_CONN_CLOSING)
    conn_closing(c, close_reason(srv, status));
  wire_conn_stats(wc, &ws);
  srv->st.frames_in += ws.frames_in;
  srv->st.frames_out += ws.frames_out;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  srv->st.conns--;
  free(c);
  server_maybe_free(srv);
}

static const wire_conn_cbs_t k_conn_cbs = {
    .on_ready = conn_on_ready,
    .on_frame = conn_on_frame,
    .on_close = conn_on_close,
    /* no on_drain: a full queue closes the connection (trk_conn_send) */
};

/* ---- accepting -------------------------------------------------------- */

static void reject_closed_cb(uv_handle_t *h) {
  free(h);
}

/* Accepts the pending connection and drops it at once; leaving it in the
 * backlog would stall the listener (libuv waits for that accept). With
 * nothing pending (a failed wire_conn_accept already took it) uv_accept
 * just fails. */
static void conn_reject(trk_server_t *srv, uv_stream_t *ls) {
  uv_tcp_t *tmp = malloc(sizeof(*tmp));
  if (tmp == NULL || uv_tcp_init(srv->loop, tmp) < 0) {
    free(tmp);
    return;
  }
  (void)uv_accept(ls, (uv_stream_t *)tmp);
  uv_close((uv_handle_t *)tmp, reject_closed_cb);
}

static void on_connection(uv_stream_t *ls, int status) {
  trk_server_t *srv = ls->data;
  if (status < 0 || srv->closing)
    return;
  if (srv->preauth >= TRK_MAX_PREAUTH_CONNS ||
      srv->st.conns >=
          trk_peers_max(trk_tracker_peers(srv->t)) + TRK_MAX_PREAUTH_CONNS) {
    srv->st.rejected++;
    trk_server_refused(srv, TRK_REFUSE_CONNS);
    conn_reject(srv, ls);
    return;
  }
  trk_conn_t *c = calloc(1, sizeof(*c));
  int rc = c != NULL ? wire_conn_accept(ls, &srv->cfg, &k_conn_cbs, c, &c->wc)
                     : -ENOMEM;
  if (rc < 0) {
    WS_LOGW("accept failed: %s", ws_strerror(rc));
    free(c);
    conn_reject(srv, ls);
    return;
  }
  c->srv = srv;
  c->id = wire_conn_id(c->wc);
  c->state = TRK_CONN_HANDSHAKE;
  c->window_ms = uv_now(srv->loop);
  c->next = srv->conns;
  if (srv->conns != NULL)
    srv->conns->prev = c;
  srv->conns = c;
  srv->st.conns++;
  srv->st.accepted++;
  srv->preauth++;
  WS_LOGD("conn#%llu %s:%u: accepted", (unsigned long long)c->id,
          wire_conn_peer(c->wc)->addr, wire_conn_peer(c->wc)->addr_port);
}

/* ---- sweep ------------------------------------------------------------ */

static void sweep_cb(uv_timer_t *tm) {
  trk_server_t *srv = tm->data;
  trk_tracker_tick(srv->t, uv_now(srv->loop));
  /* Chunks whose claims stopped counting: their leases go out now, not
   * at each downloader's next announce. */
  trk_server_push_leases(srv);
  trk_server_refused_flush(srv);
  for (trk_conn_t *c = srv->conns; c != NULL; c = c->next) {
    if (c->state == TRK_CONN_READY && c->throttled) {
      c->throttled = false;
      wire_conn_read_resume(c->wc);
    }
  }
}

/* ---- public ----------------------------------------------------------- */

int trk_server_new(uv_loop_t *loop, trk_tracker_t *t, const uint8_t key[32],
                   trk_server_t **out) {
  int rc;
  trk_server_t *srv = calloc(1, sizeof(*srv));
  if (srv == NULL)
    return -ENOMEM;
  srv->loop = loop;
  srv->t = t;
  wire_conn_cfg_init(&srv->cfg);
  memcpy(srv->cfg.key, key, sizeof(srv->cfg.key));
  snprintf(srv->cfg.node_id, sizeof(srv->cfg.node_id), "%s", TRK_NODE_NAME);
  srv->cfg.role = WS_ROLE_TRACKER;
  srv->cfg.handshake_timeout_ms = TRK_HANDSHAKE_TIMEOUT_MS;
  srv->cfg.idle_timeout_ms = TRK_CONN_IDLE_TIMEOUT_MS;
  srv->cfg.linger_timeout_ms = TRK_CONN_CLOSE_GRACE_MS;
  srv->cfg.max_body = WS_MAX_BODY;
  srv->cfg.max_payload = 0; /* nothing a peer sends the tracker has one */
  srv->cfg.sendq_max_bytes = TRK_CONN_WRITE_QUEUE_MAX;
  srv->cfg.sendq_low_bytes = TRK_CONN_WRITE_QUEUE_MAX / 2u;
  rc = uv_tcp_init(loop, &srv->listener);
  if (rc < 0)
    goto fail_srv;
  srv->listener.data = srv;
  srv->live_handles++;
  rc = uv_timer_init(loop, &srv->sweep);
  if (rc < 0)
    goto fail_listener;
  srv->sweep.data = srv;
  srv->live_handles++;
  rc = uv_timer_start(&srv->sweep, sweep_cb, TRK_SWEEP_INTERVAL_MS,
                      TRK_SWEEP_INTERVAL_MS);
  if (rc < 0)
    goto fail_timer;
  *out = srv;
  return 0;

fail_timer:
  /* Handles are closed through the normal path so the loop stays clean;
   * srv is freed by the last close callback. */
  srv->closing = true;
  uv_close((uv_handle_t *)&srv->sweep, handle_closed_cb);
  uv_close((uv_handle_t *)&srv->listener, handle_closed_cb);
  return rc;
fail_listener:
  srv->closing = true;
  uv_close((uv_handle_t *)&srv->listener, handle_closed_cb);
  return rc;
fail_srv:
  sodium_memzero(srv->cfg.key, sizeof(srv->cfg.key));
  free(srv);
  return rc;
}

int trk_server_listen(trk_server_t *srv, const char *host_port,
                      int *bound_port) {
  struct sockaddr_storage sa;
  if (srv->listening)
    return WS_EBUSY;
  if (trk_addr_parse(host_port, &sa) < 0)
    return WS_EUSAGE;
  int rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&sa, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
  if (rc < 0)
    return rc;
  srv->listening = true;
  if (bound_port != NULL) {
    struct sockaddr_storage got;
    int len = sizeof(got);
    rc = uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&got, &len);
    if (rc < 0)
      return rc;
    *bound_port = ntohs(got.ss_family == AF_INET6
                            ? ((struct sockaddr_in6 *)&got)->sin6_port
                            : ((struct sockaddr_in *)&got)->sin_port);
  }
  return 0;
}

void trk_server_close(trk_server_t *srv, trk_server_close_cb cb, void *arg) {
  assert(!srv->closing);
  srv->closing = true;
  srv->close_cb = cb;
  srv->close_arg = arg;
  uv_close((uv_handle_t *)&srv->listener, handle_closed_cb);
  uv_close((uv_handle_t *)&srv->sweep, handle_closed_cb);
  /* Each wire_conn flushes its GOODBYE within TRK_CONN_CLOSE_GRACE_MS (its
   * linger timeout) and then reports on_close; nothing closes synchronously,
   * so the list is safe to walk. */
  for (trk_conn_t *c = srv->conns; c != NULL; c = c->next) {
    if (c->state == TRK_CONN_READY)
      trk_conn_goodbye(c, WS_BYE_SHUTDOWN, "tracker shutting down");
    else
      trk_conn_close(c, 0, "tracker shutting down");
  }
}

void trk_server_stats(const trk_server_t *srv, trk_server_stats_t *out) {
  wire_conn_stats_t ws;
  *out = srv->st;
  out->preauth = srv->preauth;
  for (const trk_conn_t *c = srv->conns; c != NULL; c = c->next) {
    wire_conn_stats(c->wc, &ws);
    out->frames_in += ws.frames_in;
    out->frames_out += ws.frames_out;
  }
}
