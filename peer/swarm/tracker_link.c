/* tracker_link.c - p2pd's tracker client (see tracker_link.h). Loop thread
 * only.
 *
 * Owns: the uv_timer_t (reconnect backoff while down, announce schedule
 * while up), the wire_conn to the tracker (at most one), and a table of
 * tracked releases, each with its own copy of the have-bitfield, the delta
 * of chunks gained since its last announce, its uri and its schedule. The
 * struct is freed only after peer_tracker_link_close, once the timer's close
 * callback and the connection's on_close have both run.
 *
 *   CONNECTING --on_ready--> READY --link lost--> BACKOFF --timer--> CONNECTING
 *       \--connect/handshake failed--> BACKOFF
 *   any state --peer_tracker_link_close--> CLOSING --timer + conn closed-->
 * freed
 *
 * Announce rules: each release is announced in full (bitfield) as the first
 * announce on every connection and after peer_tracker_link_track; later
 * announces carry the delta list (or the full bitfield again if the delta
 * outgrew WS_MAX_CHUNK_LIST). A release is due when its interval (from the
 * reply that answered its last announce; tc_on_reply) has passed, or at
 * once after track/done (an interval less a random share, proto.h), or
 * sooner while the node is short of neighbours (peer_tracker_link_soon).
 * A send refused by a full queue leaves the release due; on_drain retries.
 * Reconnect delay: uniformly random in [d/2, d], d doubling from
 * backoff_min_ms to backoff_max_ms, so a restarted tracker is not hit by
 * every node at the same instant. The link counts as up (on_link, the
 * backoff reset) only once the tracker answered an announce: a full
 * tracker completes the handshake, then turns the node away with an ERROR
 * that names no release and a GOODBYE; such a node keeps doubling its
 * delay and stays "down" for the daemon, which fetches from neighbours
 * and S3 meanwhile (trackers.h), instead of coming back every half second
 * to a tracker that will refuse it again.
 */
#include "swarm/tracker_link-int.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ws_log.h"

static const char *const k_state_name[TC_STATE_LAST] = {"connecting", "ready",
                                                        "backoff", "closing"};

/* Bit t of k_legal[s] allows s -> t. */
static const unsigned k_legal[TC_STATE_LAST] = {
    [TC_CONNECTING] = 1u << TC_READY | 1u << TC_BACKOFF | 1u << TC_CLOSING,
    [TC_READY] = 1u << TC_BACKOFF | 1u << TC_CLOSING,
    [TC_BACKOFF] = 1u << TC_CONNECTING | 1u << TC_CLOSING,
    [TC_CLOSING] = 0,
};

static void tc_connect(peer_tracker_link_t *tc);

static void tc_set_state(peer_tracker_link_t *tc, tc_state_t next) {
  assert(k_legal[tc->state] & (1u << next));
  WS_LOGD("tracker link %s:%u: %s -> %s", tc->cfg.host, (unsigned)tc->cfg.port,
          k_state_name[tc->state], k_state_name[next]);
  tc->state = next;
}

/* ---- config ------------------------------------------------------------ */

void peer_tracker_link_cfg_init(peer_tracker_link_cfg_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->backoff_min_ms = PEER_TRACKER_LINK_BACKOFF_MIN_MS;
  cfg->backoff_max_ms = PEER_TRACKER_LINK_BACKOFF_MAX_MS;
  cfg->interval_ms = PEER_TRACKER_LINK_INTERVAL_MS;
  wire_conn_cfg_init(&cfg->wire);
}

int peer_tracker_link_cfg_addr(peer_tracker_link_cfg_t *cfg,
                               const char *hostport) {
  const char *colon, *host = hostport, *host_end;
  unsigned long port;
  char *end;
  size_t n;

  if (hostport == NULL)
    return WS_EUSAGE;
  if (hostport[0] == '[') {
    host = hostport + 1;
    host_end = strchr(host, ']');
    if (host_end == NULL || host_end[1] != ':')
      return WS_EUSAGE;
    colon = host_end + 1;
  } else {
    colon = strrchr(hostport, ':');
    if (colon == NULL || strchr(hostport, ':') != colon)
      return WS_EUSAGE;
    host_end = colon;
  }
  n = (size_t)(host_end - host);
  if (n == 0 || n > WS_HOST_MAX)
    return WS_EUSAGE;
  errno = 0;
  port = strtoul(colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || port == 0 ||
      port > 65535)
    return WS_EUSAGE;
  memcpy(cfg->host, host, n);
  cfg->host[n] = '\0';
  cfg->port = (uint16_t)port;
  return 0;
}

/* ---- release table ------------------------------------------------------ */

static tc_rel_t *tc_rel_find(const peer_tracker_link_t *tc,
                             const uint8_t *digest, uint32_t *idx) {
  uint32_t i;

  for (i = 0; i < tc->nrels; i++) {
    if (memcmp(tc->rels[i]->digest, digest, WS_PROTO_DIGEST_LEN) == 0) {
      if (idx != NULL)
        *idx = i;
      return tc->rels[i];
    }
  }
  return NULL;
}

static void tc_rel_free(tc_rel_t *r) {
  if (r == NULL)
    return;
  ws_bitfield_free(&r->have);
  free(r->delta);
  free(r->uri);
  free(r);
}

static void tc_rel_remove(peer_tracker_link_t *tc, uint32_t idx) {
  tc_rel_free(tc->rels[idx]);
  tc->rels[idx] = tc->rels[--tc->nrels];
}

/* Records chunk in the delta; past WS_MAX_CHUNK_LIST the next announce is
 * a full one instead. */
static int tc_rel_delta_add(tc_rel_t *r, uint32_t chunk) {
  uint32_t *nd;
  uint32_t ncap;

  if (r->full)
    return 0; /* the full bitfield will carry it */
  if (r->n_delta >= WS_MAX_CHUNK_LIST) {
    r->full = true;
    r->n_delta = 0;
    return 0;
  }
  if (r->n_delta == r->cap_delta) {
    ncap = r->cap_delta == 0 ? 64 : r->cap_delta * 2;
    if (ncap > WS_MAX_CHUNK_LIST)
      ncap = WS_MAX_CHUNK_LIST;
    nd = realloc(r->delta, ncap * sizeof(*nd));
    if (nd == NULL)
      return -ENOMEM;
    r->delta = nd;
    r->cap_delta = ncap;
  }
  r->delta[r->n_delta++] = chunk;
  return 0;
}

/* ---- sending ------------------------------------------------------------ */

int tc_send_announce(peer_tracker_link_t *tc, tc_rel_t *r) {
  ws_announce_t *a;
  ws_msg_t m;
  int rc;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ANNOUNCE;
  a = &m.u.announce;
  memcpy(a->digest, r->digest, WS_PROTO_DIGEST_LEN);
  a->total_chunks = r->total;
  a->event = r->event;
  a->role = r->role;
  a->want = r->want;
  a->port = tc->cfg.listen_port;
  memcpy(a->zone, tc->cfg.zone, sizeof(a->zone));
  a->uri = r->uri;
  if (r->total > 0 && r->full) {
    a->have_bits = r->have.bits;
  } else if (r->total > 0 && r->n_delta > 0) {
    a->have_list = r->delta;
    a->n_have_list = r->n_delta;
  }
  if (tc->cbs.on_report != NULL) /* the dashboard's numbers */
    tc->cbs.on_report(tc->cbs.arg, r->digest, a);
  rc = wire_conn_send(tc->conn, &m);
  if (rc < 0)
    return rc;
  tc->st.announces++;
  r->full = false;
  r->n_delta = 0;
  r->due_now = false;
  r->event = WS_ANN_UPDATE;
  r->next_ms = uv_now(tc->loop) +
               ws_announce_delay_ms(r->interval_ms, randombytes_random());
  r->asked = true;
  return 0;
}

static void tc_on_timer(uv_timer_t *t);

/* READY: arm the timer for the earliest release due. */
void tc_schedule(peer_tracker_link_t *tc) {
  uint64_t now = uv_now(tc->loop), first = UINT64_MAX;
  uint32_t i;

  if (tc->state != TC_READY)
    return;
  for (i = 0; i < tc->nrels; i++) {
    uint64_t when = tc->rels[i]->due_now ? now : tc->rels[i]->next_ms;

    if (tc->rels[i]->parked)
      continue;
    if (when < first)
      first = when;
  }
  if (first == UINT64_MAX) {
    uv_timer_stop(&tc->timer);
    return;
  }
  uv_timer_start(&tc->timer, tc_on_timer, first > now ? first - now : 0, 0);
}

/* Announces every release that is due, in priority order (so that the
 * tracker's room goes to releases being fetched first), until the queue
 * is full. Parked seeds wait for room. */
void tc_flush(peer_tracker_link_t *tc) {
  tc_rel_t *ord[PEER_TRACKER_LINK_RELEASES_MAX];
  uint64_t now = uv_now(tc->loop);
  uint32_t i;
  int rc;

  if (tc->state != TC_READY)
    return;
  tc_room_order(tc, ord);
  for (i = 0; i < tc->nrels; i++) {
    tc_rel_t *r = ord[i];

    if (r->parked || (!r->due_now && r->next_ms > now))
      continue;
    rc = tc_send_announce(tc, r);
    if (rc == WS_ELIMIT) {
      r->due_now = true;
      return; /* on_drain flushes again */
    }
    if (rc < 0) {
      WS_LOGW("tracker link %s:%u: announce: %s", tc->cfg.host,
              (unsigned)tc->cfg.port, ws_strerror(rc));
      r->next_ms = now + r->interval_ms; /* do not spin on a bad entry */
      r->due_now = false;
    }
    if (tc->state != TC_READY)
      return;
  }
  tc_schedule(tc);
}

/* ---- link --------------------------------------------------------------- */

static void tc_backoff(peer_tracker_link_t *tc) {
  uint32_t d = tc->st.backoff_ms, wait;

  tc_set_state(tc, TC_BACKOFF);
  wait = d / 2 + randombytes_uniform(d / 2 + 1);
  uv_timer_start(&tc->timer, tc_on_timer, wait, 0);
  tc->st.backoff_ms =
      d >= tc->cfg.backoff_max_ms / 2 ? tc->cfg.backoff_max_ms : d * 2;
}

static void tc_maybe_free(peer_tracker_link_t *tc) {
  uint32_t i;

  if (tc->state != TC_CLOSING || tc->conn != NULL || !tc->timer_closed)
    return;
  for (i = 0; i < tc->nrels; i++)
    tc_rel_free(tc->rels[i]);
  sodium_memzero(tc->cfg.key, sizeof(tc->cfg.key));
  sodium_memzero(tc->cfg.wire.key, sizeof(tc->cfg.wire.key));
  free(tc);
}

static void tc_on_ready(wire_conn_t *c, const wire_peer_t *peer) {
  peer_tracker_link_t *tc = wire_conn_user(c);
  uint32_t i;

  if (peer->role != WS_ROLE_TRACKER) {
    WS_LOGW("tracker link %s:%u: node %s is not a tracker", tc->cfg.host,
            (unsigned)tc->cfg.port, peer->node_id);
    wire_conn_close(c, WS_EPROTO);
    return;
  }
  tc_set_state(tc, TC_READY);
  tc->st.links++;
  /* Up, and the backoff reset, come with the first reply (tc_on_reply). */
  /* A new connection may be a restarted tracker: tell it everything, in
   * priority order (tc_flush); room is found anew. */
  for (i = 0; i < tc->nrels; i++) {
    tc_rel_t *r = tc->rels[i];

    r->full = true;
    r->n_delta = 0;
    r->due_now = true;
    r->parked = false;
    r->dropped = false;
    if (r->event == WS_ANN_UPDATE)
      r->event = WS_ANN_STARTED;
  }
  tc_flush(tc);
}

/* The tracker took us: the link is up. May close the client (on_link). */
static void tc_accepted(peer_tracker_link_t *tc) {
  if (tc->st.up)
    return;
  tc->st.up = true;
  tc->st.backoff_ms = tc->cfg.backoff_min_ms;
  if (tc->refused_logged)
    WS_LOGI("tracker link %s:%u: accepted after %llu refusals", tc->cfg.host,
            (unsigned)tc->cfg.port, (unsigned long long)tc->st.refusals);
  tc->refused_logged = false;
  if (tc->cbs.on_link != NULL)
    tc->cbs.on_link(tc->cbs.arg, true, 0);
}

/* ERROR without a release before any reply: the tracker turns this node
 * away (full); GOODBYE follows. Logged once until accepted again. */
static void tc_refused(peer_tracker_link_t *tc, const ws_error_t *e) {
  tc->st.refusals++;
  if (tc->refused_logged) {
    WS_LOGD("tracker link %s:%u: refused again: %s", tc->cfg.host,
            (unsigned)tc->cfg.port, e->msg);
    return;
  }
  tc->refused_logged = true;
  WS_LOGW("tracker link %s:%u: the tracker turned this node away (%s: %s); "
          "fetching from neighbours and S3 without it, asking again with "
          "backoff up to %u s",
          tc->cfg.host, (unsigned)tc->cfg.port, ws_errname(e->code), e->msg,
          tc->cfg.backoff_max_ms / 1000u);
}

static void tc_on_reply(peer_tracker_link_t *tc,
                        const ws_announce_reply_t *rep) {
  tc_rel_t *r = tc_rel_find(tc, rep->digest, NULL);
  uint32_t i;

  tc->st.replies++;
  tc_accepted(tc);
  if (tc->state != TC_READY)
    return; /* on_link closed the client */
  if (r != NULL)
    tc_room_accepted(r);
  /* The interval of the reply that answers our announce sets the next
   * one. Other replies (a HAVE's lease list, a push) carry iv 0; a tracker
   * from before that put its interval in every one, and a node holding
   * leases got one every few hundred ms: such a reply may bring the next
   * announce forward, never push it back (replies come in order, so the
   * first after an announce is taken for its answer). */
  if (r != NULL && rep->interval_ms > 0) {
    uint32_t iv = rep->interval_ms;
    uint64_t next;
    if (iv < PEER_TRACKER_LINK_INTERVAL_MIN_MS)
      iv = PEER_TRACKER_LINK_INTERVAL_MIN_MS;
    if (iv > PEER_TRACKER_LINK_INTERVAL_MAX_MS)
      iv = PEER_TRACKER_LINK_INTERVAL_MAX_MS;
    next = uv_now(tc->loop) + ws_announce_delay_ms(iv, randombytes_random());
    if (r->asked) {
      r->asked = false;
      r->interval_ms = iv;
      r->next_ms = next;
    } else if (next < r->next_ms) {
      r->next_ms = next;
    }
    tc_schedule(tc);
  }
  /* Peers and leases only for releases still tracked; a reply can cross an
   * untrack on the wire. Each callback may close the client. */
  if (r != NULL && tc->cbs.on_peers != NULL)
    tc->cbs.on_peers(tc->cbs.arg, rep->digest, rep->peers, rep->n_peers,
                     (const char(*)[WS_NODE_ID_MAX + 1]) rep->tree,
                     rep->n_tree);
  for (i = 0; i < rep->n_leases && tc->state == TC_READY; i++) {
    const ws_lease_t *l = &rep->leases[i];

    if (tc->cbs.on_leases != NULL && tc_rel_find(tc, l->digest, NULL) != NULL)
      tc->cbs.on_leases(tc->cbs.arg, l->digest, l->chunks, l->n_chunks,
                        l->ttl_ms, rep->streams);
  }
  if (r != NULL && rep->n_nodes > 0 && tc->state == TC_READY &&
      tc->cbs.on_nodes != NULL)
    tc->cbs.on_nodes(tc->cbs.arg, rep->nodes, rep->n_nodes);
  for (i = 0; i < rep->n_wanted && tc->state == TC_READY; i++)
    if (tc->cbs.on_wanted != NULL)
      tc->cbs.on_wanted(tc->cbs.arg, rep->wanted[i].digest, rep->wanted[i].uri);
}

static void tc_on_frame(wire_conn_t *c, const ws_msg_t *m) {
  peer_tracker_link_t *tc = wire_conn_user(c);

  if (tc->state != TC_READY)
    return;
  if (m->type == WS_MSG_ANNOUNCE_REPLY)
    tc_on_reply(tc, &m->u.announce_reply);
  else if (m->type == WS_MSG_ERROR && m->u.error.code == WS_ELIMIT &&
           m->u.error.has_digest)
    tc_room_refused(tc, m->u.error.digest); /* logs once per refusal */
  else if (m->type == WS_MSG_ERROR && !m->u.error.has_digest && !tc->st.up)
    tc_refused(tc, &m->u.error);
  else if (m->type == WS_MSG_ERROR)
    WS_LOGW("tracker link %s:%u: tracker error %s: %s", tc->cfg.host,
            (unsigned)tc->cfg.port, ws_errname(m->u.error.code),
            m->u.error.msg);
}

static void tc_on_drain(wire_conn_t *c) {
  tc_flush(wire_conn_user(c));
}

static void tc_on_close(wire_conn_t *c, int status) {
  peer_tracker_link_t *tc = wire_conn_user(c);
  bool was_up = tc->st.up; /* accepted, not merely handshaken */

  tc->conn = NULL;
  tc->st.up = false;
  if (tc->state == TC_CLOSING) {
    tc_maybe_free(tc);
    return;
  }
  if (!tc->refused_logged || was_up)
    WS_LOGI("tracker link %s:%u: link %s: %s", tc->cfg.host,
            (unsigned)tc->cfg.port, was_up ? "lost" : "failed",
            ws_strerror(status));
  /* From now on this node says it rejoins (HELLO "rj"): a tracker that
   * hears that soon after its start has restarted and holds its S3 leases
   * while the holders come back (docs/tracker.md, "The restart hold"). */
  if (was_up)
    tc->cfg.wire.rejoin = true;
  tc_backoff(tc);
  if (was_up && tc->cbs.on_link != NULL)
    tc->cbs.on_link(tc->cbs.arg, false, status);
}

static const wire_conn_cbs_t k_tc_cbs = {
    .on_ready = tc_on_ready,
    .on_frame = tc_on_frame,
    .on_payload = NULL, /* the tracker sends no payloads */
    .on_drain = tc_on_drain,
    .on_close = tc_on_close,
};

static void tc_connect(peer_tracker_link_t *tc) {
  int rc;

  if (tc->state != TC_CONNECTING)
    tc_set_state(tc, TC_CONNECTING);
  tc->st.connects++;
  rc = wire_conn_connect(tc->loop, tc->cfg.host, tc->cfg.port, &tc->cfg.wire,
                         &k_tc_cbs, tc, &tc->conn);
  if (rc < 0) {
    tc->conn = NULL;
    WS_LOGI("tracker link %s:%u: connect: %s", tc->cfg.host,
            (unsigned)tc->cfg.port, ws_strerror(rc));
    tc_backoff(tc);
  }
}

static void tc_on_timer(uv_timer_t *t) {
  peer_tracker_link_t *tc = t->data;

  if (tc->state == TC_BACKOFF)
    tc_connect(tc);
  else if (tc->state == TC_READY)
    tc_flush(tc);
}

static void tc_on_timer_closed(uv_handle_t *h) {
  peer_tracker_link_t *tc = h->data;

  tc->timer_closed = true;
  tc_maybe_free(tc);
}

/* ---- public ------------------------------------------------------------- */

int peer_tracker_link_new(uv_loop_t *loop, const peer_tracker_link_cfg_t *cfg,
                          const peer_tracker_link_cbs_t *cbs,
                          peer_tracker_link_t **out) {
  peer_tracker_link_t *tc;

  if (loop == NULL || cfg == NULL || cbs == NULL || cfg->port == 0 ||
      cfg->host[0] == '\0' || cfg->node_id[0] == '\0' ||
      cfg->backoff_min_ms == 0 || cfg->backoff_max_ms < cfg->backoff_min_ms ||
      cfg->interval_ms == 0)
    return WS_EUSAGE;
  tc = calloc(1, sizeof(*tc));
  if (tc == NULL)
    return -ENOMEM;
  tc->loop = loop;
  tc->cfg = *cfg;
  tc->cbs = *cbs;
  memcpy(tc->cfg.wire.key, cfg->key, sizeof(cfg->key));
  memcpy(tc->cfg.wire.node_id, cfg->node_id, sizeof(cfg->node_id));
  memcpy(tc->cfg.wire.zone, cfg->zone, sizeof(cfg->zone));
  memcpy(tc->cfg.wire.labels, cfg->labels, sizeof(cfg->labels));
  tc->cfg.wire.listen_port = cfg->listen_port;
  tc->cfg.wire.role = WS_ROLE_PEER;
  tc->cfg.wire.max_payload = 0; /* a tracker never sends payloads */
  /* The link is quiet between announces (up to
   * PEER_TRACKER_LINK_INTERVAL_MAX_MS): the tracker's idle timeout and TCP
   * keepalive find dead links instead. */
  tc->cfg.wire.idle_timeout_ms = 0;
  tc->st.backoff_ms = cfg->backoff_min_ms;
  uv_timer_init(loop, &tc->timer);
  tc->timer.data = tc;
  tc->state = TC_CONNECTING;
  tc_connect(tc);
  *out = tc;
  return 0;
}

int peer_tracker_link_track(peer_tracker_link_t *tc, const uint8_t digest[32],
                            uint32_t total_chunks, const ws_bitfield_t *have,
                            const char *uri, ws_swarm_role_t role) {
  tc_rel_t *r, *old;
  uint32_t idx = 0;
  int rc = -ENOMEM;

  if (total_chunks > WS_MAX_TOTAL_CHUNKS || role >= WS_SWARM_LAST ||
      (have != NULL && have->nbits != total_chunks) ||
      (uri != NULL && strlen(uri) > WS_URI_MAX) || tc->state == TC_CLOSING)
    return WS_EUSAGE;
  old = tc_rel_find(tc, digest, &idx);
  if (old == NULL && tc->nrels == PEER_TRACKER_LINK_RELEASES_MAX)
    return WS_ELIMIT;
  r = calloc(1, sizeof(*r));
  if (r == NULL)
    return -ENOMEM;
  memcpy(r->digest, digest, WS_PROTO_DIGEST_LEN);
  r->total = total_chunks;
  if (total_chunks > 0) {
    rc = have != NULL
             ? ws_bitfield_from_bytes(&r->have, total_chunks, have->bits,
                                      ws_bitfield_nbytes(have->nbits))
             : ws_bitfield_init(&r->have, total_chunks);
    if (rc < 0)
      goto fail;
  }
  if (uri != NULL && (r->uri = strdup(uri)) == NULL) {
    rc = -ENOMEM;
    goto fail;
  }
  r->role = (uint8_t)role;
  r->want = role != WS_SWARM_SEED;
  r->event = WS_ANN_STARTED;
  r->full = true;
  r->due_now = true;
  r->interval_ms = old != NULL ? old->interval_ms : tc->cfg.interval_ms;
  r->seq = ++tc->seq;
  if (old != NULL) {
    tc_rel_free(old);
    tc->rels[idx] = r;
  } else {
    tc->rels[tc->nrels++] = r;
  }
  tc_flush(tc);
  return 0;

fail:
  tc_rel_free(r);
  return rc;
}

int peer_tracker_link_have(peer_tracker_link_t *tc, const uint8_t digest[32],
                           uint32_t chunk) {
  return peer_tracker_link_have_from(tc, digest, chunk, NULL);
}

int peer_tracker_link_have_from(peer_tracker_link_t *tc,
                                const uint8_t digest[32], uint32_t chunk,
                                const char *from) {
  tc_rel_t *r = tc_rel_find(tc, digest, NULL);
  ws_msg_t m;
  int rc;

  if (r == NULL)
    return WS_ENOTFOUND;
  if (chunk >= r->total)
    return WS_EUSAGE;
  if (ws_bitfield_test(&r->have, chunk))
    return 0;
  ws_bitfield_set(&r->have, chunk);
  rc = tc_rel_delta_add(r, chunk);
  if (rc < 0)
    r->full = true; /* out of memory for the delta: resend everything */
  /* Tell the tracker now if it knows this release on this link (a pending
   * full announce carries the bit anyway). A refused HAVE is covered by the
   * delta of the next announce. */
  if (tc->state == TC_READY && !r->full && !r->parked && r->refused_ms == 0) {
    memset(&m, 0, sizeof(m));
    m.type = WS_MSG_HAVE;
    memcpy(m.u.have.digest, digest, WS_PROTO_DIGEST_LEN);
    m.u.have.chunk = chunk;
    if (from != NULL)
      snprintf(m.u.have.from, sizeof(m.u.have.from), "%s", from);
    if (wire_conn_send(tc->conn, &m) == 0)
      tc->st.haves++;
  }
  return 0;
}

int peer_tracker_link_done(peer_tracker_link_t *tc, const uint8_t digest[32]) {
  tc_rel_t *r = tc_rel_find(tc, digest, NULL);

  if (r == NULL)
    return WS_ENOTFOUND;
  r->role = WS_SWARM_SEED;
  r->want = false;
  r->event = WS_ANN_COMPLETED;
  r->due_now = true;
  r->seq = ++tc->seq; /* the most recent seed */
  r->refused_ms = 0;  /* complete: nothing left to fetch */
  r->retry_ms = 0;
  tc_flush(tc);
  return 0;
}

int peer_tracker_link_soon(peer_tracker_link_t *tc, const uint8_t digest[32]) {
  tc_rel_t *r = tc_rel_find(tc, digest, NULL);

  if (r == NULL)
    return WS_ENOTFOUND;
  if (r->soon >= WS_ANNOUNCE_SOON_MAX || r->asked || r->parked ||
      r->refused_ms != 0)
    return 0;
  uint64_t next = uv_now(tc->loop) + ((uint64_t)WS_ANNOUNCE_SOON_MS << r->soon);
  r->soon++;
  if (next < r->next_ms) {
    r->next_ms = next;
    tc_schedule(tc);
  }
  return 0;
}

int peer_tracker_link_untrack(peer_tracker_link_t *tc,
                              const uint8_t digest[32]) {
  uint32_t idx;
  tc_rel_t *r = tc_rel_find(tc, digest, &idx);
  bool held;

  if (r == NULL)
    return WS_ENOTFOUND;
  held = !r->parked && r->refused_ms == 0;
  if (tc->state == TC_READY && !r->parked) {
    r->event = WS_ANN_STOPPED;
    r->want = false;
    if (tc_send_announce(tc, r) < 0)
      WS_LOGI("tracker link %s:%u: stop announce not sent", tc->cfg.host,
              (unsigned)tc->cfg.port);
  }
  tc_rel_remove(tc, idx);
  if (held && tc->state == TC_READY)
    tc_room_freed(tc);
  tc_schedule(tc);
  return 0;
}

void peer_tracker_link_stats(const peer_tracker_link_t *tc,
                             peer_tracker_link_stats_t *out) {
  *out = tc->st;
}

void peer_tracker_link_close(peer_tracker_link_t *tc) {
  if (tc == NULL || tc->state == TC_CLOSING)
    return;
  tc_set_state(tc, TC_CLOSING);
  uv_close((uv_handle_t *)&tc->timer, tc_on_timer_closed);
  if (tc->conn != NULL)
    wire_conn_goodbye(tc->conn, WS_BYE_SHUTDOWN);
}
