/* wire_conn.c - lifecycle of one weightswarm connection: creation (connect
 * as initiator, accept as responder), name resolution, the one timer, close
 * and deferred free. Reading, the handshake frames and the send queue are in
 * wire_conn_io.c. Part of the ws_wire library (proto/ I/O half; proto_lib
 * itself stays pure). Loop thread only.
 *
 * Owns: the uv_tcp_t, the uv_timer_t and the uv_idle_t inside the struct,
 * the resolver and connect requests, the frame reader, the read buffer and
 * every queued item. The struct is freed only after the close callbacks of
 * all three handles (and the resolver callback, if one is in flight) have
 * run; on_close is called right before, from that last callback.
 *
 *   RESOLVING --addr--> CONNECTING --tcp up--> HANDSHAKE --AUTHs ok--> OPEN
 *   (accept starts in HANDSHAKE)                                        |
 *                                            OPEN --wire_conn_goodbye-->
 * GOODBYE any state --error / timeout / EOF / wire_conn_close--> CLOSING -->
 * freed
 *
 * The timer means, by state: RESOLVING/CONNECTING connect_timeout_ms from
 * the start; HANDSHAKE handshake_timeout_ms from TCP up; OPEN idle check
 * (no byte read or written for idle_timeout_ms, suspended while paused);
 * GOODBYE linger_timeout_ms. Every expiry closes with WS_ETIMEOUT.
 */
#include "wire_conn-int.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "ws_log.h"

static const char *const k_state_name[WC_STATE_LAST] = {
    "resolving", "connecting", "handshake", "open", "goodbye", "closing"};

/* Bit t of k_legal[s] allows s -> t. */
static const unsigned k_legal[WC_STATE_LAST] = {
    [WC_RESOLVING] = 1u << WC_CONNECTING | 1u << WC_CLOSING,
    [WC_CONNECTING] = 1u << WC_HANDSHAKE | 1u << WC_CLOSING,
    [WC_HANDSHAKE] = 1u << WC_OPEN | 1u << WC_CLOSING,
    [WC_OPEN] = 1u << WC_GOODBYE | 1u << WC_CLOSING,
    [WC_GOODBYE] = 1u << WC_CLOSING,
    [WC_CLOSING] = 0,
};

static uint64_t g_next_id;

void wire_conn_set_state(wire_conn_t *c, wc_state_t next) {
  assert(k_legal[c->state] & (1u << next));
  WS_LOGD("wire#%llu peer=%s:%u: %s -> %s", (unsigned long long)c->id,
          c->peer.addr, c->peer.addr_port, k_state_name[c->state],
          k_state_name[next]);
  c->state = next;
}

void wire_conn_cfg_init(wire_conn_cfg_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->role = WS_ROLE_PEER;
  cfg->hello_version = WS_HELLO_VERSION;
  cfg->connect_timeout_ms = WIRE_CONNECT_TIMEOUT_MS;
  cfg->handshake_timeout_ms = WIRE_HANDSHAKE_TIMEOUT_MS;
  cfg->idle_timeout_ms = WIRE_IDLE_TIMEOUT_MS;
  cfg->linger_timeout_ms = WIRE_LINGER_TIMEOUT_MS;
  cfg->max_body = WS_MAX_BODY;
  cfg->max_payload = WS_MAX_PAYLOAD;
  cfg->sendq_max_bytes = WIRE_SENDQ_MAX_BYTES;
  cfg->sendq_low_bytes = WIRE_SENDQ_LOW_BYTES;
}

static bool cfg_valid(const wire_conn_cfg_t *cfg, const wire_conn_cbs_t *cbs) {
  size_t id_len = strnlen(cfg->node_id, sizeof(cfg->node_id));

  if (cbs == NULL || cbs->on_ready == NULL || cbs->on_frame == NULL ||
      cbs->on_close == NULL)
    return false;
  return id_len > 0 && id_len < sizeof(cfg->node_id) &&
         strnlen(cfg->zone, sizeof(cfg->zone)) < sizeof(cfg->zone) &&
         strnlen(cfg->labels, sizeof(cfg->labels)) < sizeof(cfg->labels) &&
         ws_labels_valid(cfg->labels) && cfg->role < WS_ROLE_LAST &&
         cfg->connect_timeout_ms > 0 && cfg->handshake_timeout_ms > 0 &&
         cfg->linger_timeout_ms > 0 && cfg->max_body >= WS_MAX_BODY_PREAUTH &&
         cfg->max_body <= WS_MAX_BODY && cfg->max_payload <= WS_MAX_PAYLOAD &&
         cfg->sendq_max_bytes > 0 &&
         cfg->sendq_low_bytes < cfg->sendq_max_bytes;
}

/* ---- free and close --------------------------------------------------- */

static void conn_free(wire_conn_t *c) {
  wire_uplink_leave(c);
  wire_io_drop_held(c);
  ws_frame_reader_free(c->rd);
  wire_io_conn_freed(c);
  ws_hs_wipe(&c->hs);
  ws_session_wipe(&c->sess);
  ws_payload_aead_free(c->tx_aead);
  ws_payload_aead_free(c->rx_aead);
  sodium_memzero(c->cfg.key, sizeof(c->cfg.key));
  if (c->wfd >= 0)
    close(c->wfd); /* after the file queue's job and wpoll are done */
  free(c->scr);
  free(c);
}

/* Last callback of the close sequence: report, then free. */
static void conn_maybe_free(wire_conn_t *c) {
  if (c->pending_closes > 0 || c->gai_pending)
    return;
  wire_file_cancel_all(c); /* done callbacks come before on_close */
  if (!c->silent)
    c->cbs.on_close(c, c->status);
  conn_free(c);
}

void wire_conn_closed_one(wire_conn_t *c) {
  c->pending_closes--;
  conn_maybe_free(c);
}

static void conn_on_handle_closed(uv_handle_t *h) {
  wire_conn_closed_one(h->data);
}

void wire_conn_close(wire_conn_t *c, int status) {
  if (c == NULL || c->state == WC_CLOSING)
    return;
  wire_conn_set_state(c, WC_CLOSING);
  c->status = status;
  c->reading = false;
  c->payload_left = 0;
  wire_io_drop_held(c);
  if (c->gai_pending)
    (void)uv_cancel((uv_req_t *)&c->gai); /* EBUSY: the cb runs anyway */
  /* Closing the stream completes pending writes and the connect request
   * with UV_ECANCELED before its close callback runs. */
  uv_close((uv_handle_t *)&c->tcp, conn_on_handle_closed);
  uv_close((uv_handle_t *)&c->timer, conn_on_handle_closed);
  uv_close((uv_handle_t *)&c->kick, conn_on_handle_closed);
  c->pending_closes = 3 + (int)wire_file_close(c);
}

/* Creation failed after the handles exist: close them, free without any
 * callback. */
static void conn_abort(wire_conn_t *c, int err) {
  c->silent = true;
  wire_conn_close(c, err);
}

/* ---- timer ------------------------------------------------------------ */

static void conn_on_timer(uv_timer_t *t);

void wire_conn_timer_arm(wire_conn_t *c, uint64_t ms) {
  uv_timer_start(&c->timer, conn_on_timer, ms, 0);
}

void wire_conn_idle_arm(wire_conn_t *c) {
  if (c->state != WC_OPEN)
    return;
  if (c->cfg.idle_timeout_ms == 0 || c->paused) {
    uv_timer_stop(&c->timer);
    return;
  }
  wire_conn_timer_arm(c, c->cfg.idle_timeout_ms);
}

static void conn_on_timer(uv_timer_t *t) {
  wire_conn_t *c = t->data;
  uint64_t now, idle;

  if (c->state != WC_OPEN) {
    wire_conn_close(c, WS_ETIMEOUT);
    return;
  }
  /* Reads and writes only stamp last_io_ms; the timer re-arms for what is
   * left instead of being restarted on every byte. */
  now = uv_now(c->loop);
  idle = now - c->last_io_ms;
  if (idle >= c->cfg.idle_timeout_ms) {
    wire_conn_close(c, WS_ETIMEOUT);
    return;
  }
  wire_conn_timer_arm(c, c->cfg.idle_timeout_ms - idle);
}

static void conn_on_kick(uv_idle_t *h) {
  wire_conn_t *c = h->data;

  uv_idle_stop(&c->kick);
  wire_io_process(c);
}

/* ---- creation --------------------------------------------------------- */

static int conn_new(uv_loop_t *loop, const wire_conn_cfg_t *cfg,
                    const wire_conn_cbs_t *cbs, void *user, bool initiator,
                    wire_conn_t **out) {
  wire_conn_t *c;
  int rc = -ENOMEM;

  if (!cfg_valid(cfg, cbs))
    return WS_EUSAGE;
  c = calloc(1, sizeof(*c));
  if (c == NULL)
    return -ENOMEM;
  c->wfd = -1;
  wire_io_conn_added(); /* the read buffer comes with the first read */
  /* Pre-auth limits: small bodies, no payload at all. */
  c->rd = ws_frame_reader_new(WS_MAX_BODY_PREAUTH, 0);
  if (c->rd == NULL)
    goto fail_free;
  c->loop = loop;
  c->id = __atomic_add_fetch(&g_next_id, 1, __ATOMIC_RELAXED);
  c->cfg = *cfg;
  c->cbs = *cbs;
  c->user = user;
  c->initiator = initiator;
  c->state = initiator ? WC_RESOLVING : WC_HANDSHAKE;
  c->last_io_ms = uv_now(loop);
  rc = uv_tcp_init(loop, &c->tcp);
  if (rc < 0)
    goto fail_free;
  c->tcp.data = c;
  /* From here on the struct is freed by the close callbacks. */
  uv_timer_init(loop, &c->timer);
  uv_idle_init(loop, &c->kick);
  c->timer.data = c;
  c->kick.data = c;
  *out = c;
  return 0;

fail_free:
  conn_free(c);
  return rc;
}

/* Caps the bytes the kernel holds unsent for this socket. Without it the
 * send buffer autotunes to megabytes, and a control frame queued after a
 * payload waits behind all of them (measured: 1-1.3 MiB unsent per peer
 * connection, ~150 ms at a third of 200 Mbit/s). The rate it drains at
 * lowers it later (wire_conn_rate.c). Best effort. */
static void conn_limit_unsent(wire_conn_t *c) {
  wire_rate_set_unsent(c, WIRE_NOTSENT_MIN_BYTES);
}

/* The numeric address of sa into peer.addr and its port. An IPv4 client
 * of a dual-stack listener is written as IPv4 ("10.0.0.5", not
 * "::ffff:10.0.0.5"): a node is its id at its address (bans, neighbour
 * lookups), so one host must always be written one way. */
static void conn_addr_name(wire_conn_t *c, const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
      struct sockaddr_in a4;
      memset(&a4, 0, sizeof(a4));
      a4.sin_family = AF_INET;
      memcpy(&a4.sin_addr, a6->sin6_addr.s6_addr + 12, 4);
      uv_ip4_name(&a4, c->peer.addr, sizeof(c->peer.addr));
    } else {
      uv_ip6_name(a6, c->peer.addr, sizeof(c->peer.addr));
    }
    c->peer.addr_port = ntohs(a6->sin6_port);
  } else {
    const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
    uv_ip4_name(a4, c->peer.addr, sizeof(c->peer.addr));
    c->peer.addr_port = ntohs(a4->sin_port);
  }
}

/* TCP is up (either role): record the remote address, handshake. */
static int conn_established(wire_conn_t *c) {
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  int rc;

  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
    conn_addr_name(c, (const struct sockaddr *)&ss);
  /* Control frames are small and latency-bound; payloads are large writes
   * that Nagle would not help either. */
  (void)uv_tcp_nodelay(&c->tcp, 1);
  (void)uv_tcp_keepalive(&c->tcp, 1, 60);
  conn_limit_unsent(c);
  wire_conn_timer_arm(c, c->cfg.handshake_timeout_ms);
  rc = wire_io_handshake_start(c);
  /* The cluster key is only needed to derive the handshake keys. */
  sodium_memzero(c->cfg.key, sizeof(c->cfg.key));
  return rc;
}

static void conn_on_connect(uv_connect_t *req, int status) {
  wire_conn_t *c = req->data;
  int rc;

  if (c->state == WC_CLOSING)
    return; /* UV_ECANCELED from our own close */
  if (status < 0) {
    wire_conn_close(c, status);
    return;
  }
  wire_conn_set_state(c, WC_HANDSHAKE);
  rc = conn_established(c);
  if (rc < 0)
    wire_conn_close(c, rc);
}

static int conn_start_connect(wire_conn_t *c, const struct sockaddr *sa) {
  c->creq.data = c;
  conn_addr_name(c, sa);
  c->peer.addr_port = c->port;
  wire_conn_set_state(c, WC_CONNECTING);
  return uv_tcp_connect(&c->creq, &c->tcp, sa, conn_on_connect);
}

static void conn_on_resolved(uv_getaddrinfo_t *req, int status,
                             struct addrinfo *res) {
  wire_conn_t *c = req->data;
  struct addrinfo *ai, *pick = NULL;
  int rc;

  c->gai_pending = false;
  if (c->state == WC_CLOSING) {
    uv_freeaddrinfo(res);
    conn_maybe_free(c);
    return;
  }
  if (status < 0) {
    wire_conn_close(c, status);
    return;
  }
  /* One address is tried, IPv4 first: "localhost" commonly lists ::1
   * first while servers listen on 0.0.0.0. */
  for (ai = res; ai != NULL && pick == NULL; ai = ai->ai_next)
    if (ai->ai_family == AF_INET)
      pick = ai;
  for (ai = res; ai != NULL && pick == NULL; ai = ai->ai_next)
    if (ai->ai_family == AF_INET6)
      pick = ai;
  rc = pick != NULL ? conn_start_connect(c, pick->ai_addr) : UV_EAI_NONAME;
  uv_freeaddrinfo(res);
  if (rc < 0)
    wire_conn_close(c, rc);
}

int wire_conn_connect(uv_loop_t *loop, const char *host, uint16_t port,
                      const wire_conn_cfg_t *cfg, const wire_conn_cbs_t *cbs,
                      void *user, wire_conn_t **out) {
  struct sockaddr_in a4;
  struct sockaddr_in6 a6;
  struct addrinfo hints;
  char portstr[8];
  wire_conn_t *c;
  int rc;

  if (loop == NULL || host == NULL || host[0] == '\0' || port == 0 ||
      strlen(host) > WS_HOST_MAX)
    return WS_EUSAGE;
  rc = conn_new(loop, cfg, cbs, user, true, &c);
  if (rc < 0)
    return rc;
  c->port = port;
  wire_conn_timer_arm(c, cfg->connect_timeout_ms);
  if (uv_ip4_addr(host, port, &a4) == 0) {
    rc = conn_start_connect(c, (const struct sockaddr *)&a4);
  } else if (uv_ip6_addr(host, port, &a6) == 0) {
    rc = conn_start_connect(c, (const struct sockaddr *)&a6);
  } else {
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    snprintf(c->peer.addr, sizeof(c->peer.addr), "%s", host);
    c->peer.addr_port = port;
    c->gai.data = c;
    rc = uv_getaddrinfo(loop, &c->gai, conn_on_resolved, host, portstr, &hints);
    c->gai_pending = rc == 0;
  }
  if (rc < 0) {
    conn_abort(c, rc);
    return rc;
  }
  *out = c;
  return 0;
}

int wire_conn_accept(uv_stream_t *server, const wire_conn_cfg_t *cfg,
                     const wire_conn_cbs_t *cbs, void *user,
                     wire_conn_t **out) {
  wire_conn_t *c;
  int rc;

  if (server == NULL)
    return WS_EUSAGE;
  rc = conn_new(server->loop, cfg, cbs, user, false, &c);
  if (rc < 0)
    return rc;
  rc = uv_accept(server, (uv_stream_t *)&c->tcp);
  if (rc == 0)
    rc = conn_established(c);
  if (rc < 0) {
    conn_abort(c, rc);
    return rc;
  }
  *out = c;
  return 0;
}

/* ---- goodbye, pause, accessors ---------------------------------------- */

void wire_conn_goodbye(wire_conn_t *c, ws_bye_reason_t reason) {
  int rc;

  if (c->state == WC_GOODBYE || c->state == WC_CLOSING)
    return;
  if (c->state != WC_OPEN) {
    wire_conn_close(c, 0);
    return;
  }
  wire_conn_set_state(c, WC_GOODBYE);
  wire_io_update_reading(c);
  uv_idle_stop(&c->kick);
  wire_conn_timer_arm(c, c->cfg.linger_timeout_ms);
  rc = wire_io_send_goodbye(c, (uint32_t)reason);
  if (rc < 0)
    wire_conn_close(c, rc);
}

void wire_conn_read_pause(wire_conn_t *c) {
  if (c->paused || c->state == WC_CLOSING)
    return;
  c->paused = true;
  wire_io_update_reading(c);
  wire_conn_idle_arm(c); /* stops the idle check */
}

void wire_conn_read_resume(wire_conn_t *c) {
  if (!c->paused || c->state == WC_CLOSING)
    return;
  c->paused = false;
  c->last_io_ms = uv_now(c->loop);
  wire_conn_idle_arm(c);
  /* Input buffered while paused is delivered from the loop, not from inside
   * this call: callers resume from their own callbacks. A resume from inside
   * on_frame/on_payload lets the running delivery loop continue. */
  if (c->rpos < c->rlen && !c->in_process)
    uv_idle_start(&c->kick, conn_on_kick);
  else
    wire_io_update_reading(c);
}

void *wire_conn_user(const wire_conn_t *c) {
  return c->user;
}

void wire_conn_set_user(wire_conn_t *c, void *user) {
  c->user = user;
}

const wire_peer_t *wire_conn_peer(const wire_conn_t *c) {
  return &c->peer;
}

bool wire_conn_is_open(const wire_conn_t *c) {
  return c->state == WC_OPEN;
}

bool wire_conn_initiator(const wire_conn_t *c) {
  return c->initiator;
}

void wire_conn_stats(const wire_conn_t *c, wire_conn_stats_t *out) {
  *out = c->st;
  out->unsent_limit = c->unsent_limit;
}

uint64_t wire_conn_id(const wire_conn_t *c) {
  return c->id;
}

uint64_t wire_conn_payload_left(const wire_conn_t *c) {
  return c->payload_left;
}

bool wire_conn_payload_clear(const wire_conn_t *c) {
  return c->state == WC_OPEN && !c->sess.sealed;
}

uint64_t wire_conn_file_bytes(const wire_conn_t *c) {
  return c->file_bytes;
}
