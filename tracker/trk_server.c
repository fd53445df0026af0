/* trk_server.c - the peer listener: accept, per-connection read/write,
 * caps, the sweep timer, shutdown.
 *
 * Owns every trk_conn_t (a doubly linked list) and its uv_tcp_t; a conn is
 * freed only in its handle's close callback. Reads go through one shared
 * buffer (the frame reader copies what it keeps), writes are copied into a
 * request that lives until its callback. The state machine is in
 * trk_server-int.h; message handling in trk_server_msg.c. Loop thread only.
 */
#include "trk_server-int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_log.h"

typedef struct {
  uv_write_t req;
  trk_conn_t *c;
  size_t len;
  uint8_t data[];
} wreq_t;

static const char *state_name(trk_conn_state_t s) {
  static const char *const names[TRK_CONN_LAST] = {"handshake", "ready",
                                                   "closing"};
  return s < TRK_CONN_LAST ? names[s] : "?";
}

void trk_conn_set_state(trk_conn_t *c, trk_conn_state_t next) {
  assert((c->state == TRK_CONN_HANDSHAKE &&
          (next == TRK_CONN_READY || next == TRK_CONN_CLOSING)) ||
         (c->state == TRK_CONN_READY && next == TRK_CONN_CLOSING));
  WS_LOGD("conn#%llu %s: %s -> %s", (unsigned long long)c->id, c->remote,
          state_name(c->state), state_name(next));
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

static void server_handle_closed(trk_server_t *srv) {
  assert(srv->live_handles > 0);
  if (--srv->live_handles == 0 && srv->closing) {
    trk_server_close_cb cb = srv->close_cb;
    void *arg = srv->close_arg;
    if (cb != NULL)
      cb(srv, arg);
    free(srv);
  }
}

static void listener_closed_cb(uv_handle_t *h) {
  server_handle_closed(h->data);
}

static void conn_closed_cb(uv_handle_t *h) {
  trk_conn_t *c = h->data;
  trk_server_t *srv = c->srv;
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    srv->conns = c->next;
  if (c->next != NULL)
    c->next->prev = c->prev;
  srv->st.conns--;
  ws_frame_reader_free(c->reader);
  ws_hs_wipe(&c->hs);
  ws_session_wipe(&c->sess);
  free(c);
  /* Shutting down: the sweep only stayed to force stuck flushes. */
  if (srv->closing && srv->conns == NULL &&
      !uv_is_closing((uv_handle_t *)&srv->sweep))
    uv_close((uv_handle_t *)&srv->sweep, listener_closed_cb);
  server_handle_closed(srv);
}

static void conn_shutdown_cb(uv_shutdown_t *req, int status) {
  trk_conn_t *c = req->data;
  (void)status;
  if (!uv_is_closing((uv_handle_t *)&c->tcp))
    uv_close((uv_handle_t *)&c->tcp, conn_closed_cb);
}

void trk_conn_close(trk_conn_t *c, bool flush, const char *why) {
  trk_server_t *srv = c->srv;
  if (c->state == TRK_CONN_CLOSING)
    return;
  if (c->state == TRK_CONN_READY)
    WS_LOGI("conn#%llu %s node=%s: closed: %s", (unsigned long long)c->id,
            c->remote, c->node_id, why);
  else
    WS_LOGD("conn#%llu %s: closed during handshake: %s",
            (unsigned long long)c->id, c->remote, why);
  if (c->state == TRK_CONN_HANDSHAKE)
    srv->preauth--;
  if (c->peer != 0) {
    trk_tracker_disconnect(srv->t, c->peer);
    c->peer = 0;
  }
  trk_conn_set_state(c, TRK_CONN_CLOSING);
  c->closing_ms = uv_now(srv->loop);
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->shutdown.data = c;
  if (flush && c->wq_bytes > 0 &&
      uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, conn_shutdown_cb) == 0)
    return; /* closes in conn_shutdown_cb, or the sweep forces it */
  uv_close((uv_handle_t *)&c->tcp, conn_closed_cb);
}

static void write_cb(uv_write_t *req, int status) {
  wreq_t *w = (wreq_t *)req;
  trk_conn_t *c = w->c;
  c->wq_bytes -= w->len;
  free(w);
  if (status < 0 && status != UV_ECANCELED)
    trk_conn_close(c, false, uv_strerror(status));
}

int trk_conn_write(trk_conn_t *c, const uint8_t *data, size_t len) {
  if (c->state == TRK_CONN_CLOSING)
    return WS_ECANCELED;
  if (c->wq_bytes + len > TRK_CONN_WRITE_QUEUE_MAX) {
    /* The peer does not read its replies: drop it rather than buffer. */
    trk_conn_close(c, false, "write queue full");
    return WS_ELIMIT;
  }
  wreq_t *w = malloc(sizeof(*w) + len);
  if (w == NULL) {
    trk_conn_close(c, false, "out of memory");
    return -ENOMEM;
  }
  w->c = c;
  w->len = len;
  memcpy(w->data, data, len);
  uv_buf_t buf = uv_buf_init((char *)w->data, (unsigned)len);
  int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, write_cb);
  if (rc < 0) {
    free(w);
    trk_conn_close(c, false, uv_strerror(rc));
    return rc;
  }
  c->wq_bytes += len;
  c->srv->st.frames_out++;
  return 0;
}

int trk_conn_send(trk_conn_t *c, const ws_msg_t *m) {
  ws_pbuf_t b;
  ws_pbuf_init(&b, WS_FRAME_HDR_LEN + WS_MAX_BODY + WS_FRAME_MAC_LEN);
  int rc = ws_msg_encode(m, &b);
  if (rc == 0 && c->state == TRK_CONN_READY)
    rc = ws_frame_seal(&c->sess, &b, 0);
  if (rc == 0)
    rc = trk_conn_write(c, b.data, b.len);
  else
    trk_conn_close(c, false, ws_strerror(rc));
  ws_pbuf_free(&b);
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

int trk_conn_hello(trk_conn_t *c) {
  ws_pbuf_t b;
  ws_hello_t h;
  memset(&h, 0, sizeof(h));
  h.version = WS_PROTO_VERSION;
  h.role = WS_ROLE_TRACKER;
  snprintf(h.node_id, sizeof(h.node_id), "%s", TRK_NODE_NAME);
  ws_pbuf_init(&b, WS_MAX_BODY_PREAUTH + WS_FRAME_HDR_LEN);
  int rc = ws_hs_hello_encode(&c->hs, &h, &b);
  if (rc == 0)
    rc = trk_conn_write(c, b.data, b.len);
  ws_pbuf_free(&b);
  return rc;
}

trk_conn_t *trk_server_find_peer(trk_server_t *srv, trk_peer_id_t id) {
  for (trk_conn_t *c = srv->conns; c != NULL; c = c->next)
    if (c->peer == id && c->state == TRK_CONN_READY)
      return c;
  return NULL;
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  trk_conn_t *c = h->data;
  (void)hint;
  /* libuv pairs each alloc with its read callback on this one thread, so
   * one buffer serves every connection; busy means a bug, not a race. */
  assert(!c->srv->rbuf_busy);
  c->srv->rbuf_busy = true;
  *buf = uv_buf_init((char *)c->srv->rbuf, sizeof(c->srv->rbuf));
}

/* Counts a frame against c's per-second budget; false once exceeded. */
static bool frame_budget(trk_conn_t *c, uint64_t now) {
  if (now - c->window_ms >= 1000u) {
    c->window_ms = now;
    c->window_frames = 0;
  }
  return ++c->window_frames <= TRK_CONN_FRAMES_PER_S;
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  trk_conn_t *c = s->data;
  trk_server_t *srv = c->srv;
  size_t off = 0;
  (void)buf;
  if (nread < 0) {
    srv->rbuf_busy = false;
    trk_conn_close(c, false, nread == UV_EOF ? "eof" : uv_strerror((int)nread));
    return;
  }
  uint64_t now = uv_now(srv->loop);
  c->last_rx_ms = now;
  while (off < (size_t)nread && c->state != TRK_CONN_CLOSING) {
    size_t used = 0;
    ws_frame_ev_t ev;
    int rc = ws_frame_reader_feed(c->reader, srv->rbuf + off,
                                  (size_t)nread - off, &used, &ev);
    if (rc < 0) {
      srv->st.protocol_errors++;
      trk_conn_close(c, false, ws_strerror(rc));
      break;
    }
    off += used;
    if (ev.kind == WS_FRAME_EV_FRAME) {
      srv->st.frames_in++;
      trk_conn_on_frame(c, &ev.frame);
      if (c->state != TRK_CONN_CLOSING && !c->throttled &&
          !frame_budget(c, now)) {
        /* Back-pressure, not a ban: stop reading until the next sweep. */
        c->throttled = true;
        uv_read_stop(s);
      }
    } else if (ev.kind == WS_FRAME_EV_NONE && used == 0) {
      break;
    }
    /* PAYLOAD events cannot occur: payloads are capped at 0 here. */
  }
  srv->rbuf_busy = false;
}

static void reject_closed_cb(uv_handle_t *h) {
  free(h);
}

static void conn_reject(trk_server_t *srv, uv_tcp_t *tmp) {
  srv->st.rejected++;
  uv_close((uv_handle_t *)tmp, reject_closed_cb);
}

static void conn_name(trk_conn_t *c) {
  struct sockaddr_storage sa;
  int len = sizeof(sa);
  int port = 0;
  snprintf(c->ip, sizeof(c->ip), "?");
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&sa, &len) == 0) {
    if (sa.ss_family == AF_INET) {
      uv_ip4_name((struct sockaddr_in *)&sa, c->ip, sizeof(c->ip));
      port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
    } else if (sa.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&sa, c->ip, sizeof(c->ip));
      port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    }
  }
  snprintf(c->remote, sizeof(c->remote), "%s:%d", c->ip, port);
}

static void on_connection(uv_stream_t *ls, int status) {
  trk_server_t *srv = ls->data;
  if (status < 0 || srv->closing)
    return;
  bool full = srv->preauth >= TRK_MAX_PREAUTH_CONNS ||
              srv->st.conns >= TRK_MAX_PEERS + TRK_MAX_PREAUTH_CONNS;
  if (full) {
    /* Accept and drop at once, or the backlog would keep waking us. */
    uv_tcp_t *tmp = malloc(sizeof(*tmp));
    if (tmp == NULL || uv_tcp_init(srv->loop, tmp) < 0) {
      free(tmp);
      return;
    }
    if (uv_accept(ls, (uv_stream_t *)tmp) == 0)
      WS_LOGW("connection refused: %u handshaking, %u total", srv->preauth,
              srv->st.conns);
    conn_reject(srv, tmp);
    return;
  }
  trk_conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL)
    return;
  c->reader = ws_frame_reader_new(WS_MAX_BODY_PREAUTH, 0);
  if (c->reader == NULL || uv_tcp_init(srv->loop, &c->tcp) < 0) {
    ws_frame_reader_free(c->reader);
    free(c);
    return;
  }
  c->tcp.data = c;
  c->srv = srv;
  c->id = ++srv->next_id;
  c->state = TRK_CONN_HANDSHAKE;
  c->accepted_ms = c->last_rx_ms = c->window_ms = uv_now(srv->loop);
  c->next = srv->conns;
  if (srv->conns != NULL)
    srv->conns->prev = c;
  srv->conns = c;
  srv->live_handles++;
  srv->st.conns++;
  srv->preauth++;
  srv->st.accepted++;
  int rc = uv_accept(ls, (uv_stream_t *)&c->tcp);
  if (rc == 0) {
    conn_name(c);
    uv_tcp_nodelay(&c->tcp, 1);
    rc = ws_hs_init(&c->hs, srv->key, false);
  }
  if (rc == 0)
    rc = trk_conn_hello(c);
  if (rc == 0 && c->state != TRK_CONN_CLOSING)
    rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
  if (rc < 0)
    trk_conn_close(c, false, ws_strerror(rc));
}

static void sweep_cb(uv_timer_t *tm) {
  trk_server_t *srv = tm->data;
  uint64_t now = uv_now(srv->loop);
  if (!srv->closing)
    trk_tracker_tick(srv->t, now);
  trk_conn_t *next;
  for (trk_conn_t *c = srv->conns; c != NULL; c = next) {
    next = c->next; /* closing unlinks only in the close callback */
    if (c->state == TRK_CONN_CLOSING) {
      if (now - c->closing_ms >= TRK_CONN_CLOSE_GRACE_MS &&
          !uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, conn_closed_cb);
      continue;
    }
    if (c->state == TRK_CONN_HANDSHAKE &&
        now - c->accepted_ms >= TRK_HANDSHAKE_TIMEOUT_MS) {
      trk_conn_close(c, false, "handshake timeout");
      continue;
    }
    if (now - c->last_rx_ms >= TRK_CONN_IDLE_TIMEOUT_MS) {
      trk_conn_close(c, false, "idle timeout");
      continue;
    }
    if (c->throttled) {
      c->throttled = false;
      int rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
      if (rc < 0)
        trk_conn_close(c, false, uv_strerror(rc));
    }
  }
}

int trk_server_new(uv_loop_t *loop, trk_tracker_t *t, const uint8_t key[32],
                   trk_server_t **out) {
  int rc;
  trk_server_t *srv = calloc(1, sizeof(*srv));
  if (srv == NULL)
    return -ENOMEM;
  srv->loop = loop;
  srv->t = t;
  memcpy(srv->key, key, sizeof(srv->key));
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
  /* Handles are closed through the normal path so the loop stays clean. */
  srv->closing = true;
  uv_close((uv_handle_t *)&srv->sweep, listener_closed_cb);
  uv_close((uv_handle_t *)&srv->listener, listener_closed_cb);
  return rc;
fail_listener:
  srv->closing = true;
  uv_close((uv_handle_t *)&srv->listener, listener_closed_cb);
  return rc;
fail_srv:
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
  uv_close((uv_handle_t *)&srv->listener, listener_closed_cb);
  /* The sweep keeps running until the last connection is gone, forcing
   * flushes that take longer than TRK_CONN_CLOSE_GRACE_MS. */
  if (srv->conns == NULL)
    uv_close((uv_handle_t *)&srv->sweep, listener_closed_cb);
  for (trk_conn_t *c = srv->conns; c != NULL; c = c->next) {
    if (c->state == TRK_CONN_READY) {
      ws_msg_t m;
      memset(&m, 0, sizeof(m));
      m.type = WS_MSG_GOODBYE;
      m.u.goodbye.reason = WS_BYE_SHUTDOWN;
      if (trk_conn_send(c, &m) < 0)
        continue; /* already closing */
      trk_conn_close(c, true, "tracker shutting down");
    } else if (c->state == TRK_CONN_HANDSHAKE) {
      trk_conn_close(c, false, "tracker shutting down");
    }
  }
}

void trk_server_stats(const trk_server_t *srv, trk_server_stats_t *out) {
  *out = srv->st;
  out->preauth = srv->preauth;
}
