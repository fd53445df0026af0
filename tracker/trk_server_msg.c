/* trk_server_msg.c - what the tracker does with a connection once it is
 * authenticated: registering its peer, and each message it sends.
 *
 * The wire_conn has already checked the handshake, every frame's MAC and
 * the message encoding, and skipped unknown types; what arrives here is a
 * decoded message. ANNOUNCE / HAVE / LEASE_RENEW / LEASE_RELEASE drive the
 * tracker. Replies:
 *   ANNOUNCE      -> ANNOUNCE_REPLY (peers, every lease held, wanted;
 *                    to the presence digest also a sample of other nodes)
 *   HAVE          -> ANNOUNCE_REPLY with the lease list, only if it grew
 *   LEASE_RENEW   -> ANNOUNCE_REPLY with the lease list if a chunk was done,
 *                    or a renew found the lease gone (expired or revoked)
 *   LEASE_RELEASE -> ANNOUNCE_REPLY with the (refilled) lease list
 * An ANNOUNCE_REPLY's lease list is always the peer's complete current set
 * for that digest; its peer and wanted lists are hints to add, not a set
 * to replace (docs/tracker.md). Semantic errors (caps, rate limit, a chunk
 * count that disagrees with the swarm) answer ERROR and keep the
 * connection; a message not meant for a tracker gets GOODBYE (protocol).
 * Loop thread only.
 */
#include "trk_server-int.h"

#include <stdio.h>
#include <string.h>

#include "trk_wire.h"
#include "ws_log.h"

/* Other nodes in the reply to a presence announce (<= WS_MAX_NODES): with
 * a fresh sample at every interval a node soon knows this many or more. */
#define TRK_REPLY_NODES 16u

static uint64_t now_ms(const trk_conn_t *c) {
  return uv_now(c->srv->loop);
}

static void protocol_error(trk_conn_t *c, const char *why) {
  c->srv->st.protocol_errors++;
  trk_conn_goodbye(c, WS_BYE_PROTOCOL, why);
}

/* ---- replies ---------------------------------------------------------- */

/* Copies src (NUL-terminated within srccap bytes) into dst of cap bytes,
 * cut to fit. */
static void copy_text(char *dst, size_t cap, const char *src, size_t srccap) {
  size_t n = strnlen(src, (cap < srccap ? cap : srccap) - 1u);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* The wire entries of peers in[0..n) that have an address, into out;
 * returns how many. */
static uint32_t reply_peer_infos(const trk_peer_t *const *in, uint32_t n,
                                 ws_peer_info_t *out) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    const trk_peer_t *p = in[i];
    ws_peer_info_t *o = &out[k];
    if (p->addr[0] == '\0')
      continue; /* nowhere to connect to */
    /* Copies, not snprintf: sixteen peers in every reply. */
    copy_text(o->node_id, sizeof(o->node_id), p->node_id, sizeof(p->node_id));
    copy_text(o->host, sizeof(o->host), p->addr, sizeof(p->addr));
    copy_text(o->zone, sizeof(o->zone), p->zone, sizeof(p->zone));
    o->port = p->port;
    k++;
  }
  return k;
}

/* The reply r to d; nodes[0..nnodes) (the presence reply's sample of
 * other connected nodes) may be empty. */
static void send_reply_nodes(trk_conn_t *c, const ws_hash_t *d,
                             const trk_reply_t *r,
                             const trk_peer_t *const *nodes, uint32_t nnodes) {
  ws_msg_t m;
  ws_peer_info_t peers[TRK_REPLY_PEERS_MAX];
  ws_peer_info_t infos[WS_MAX_NODES];
  ws_lease_t leases[TRK_LEASES_PER_PEER_MAX];
  uint32_t chunks[TRK_LEASES_PER_PEER_MAX];
  ws_wanted_t wanted[TRK_MAX_WANTED];
  char tree[TRK_TREE_MAX][WS_NODE_ID_MAX + 1];
  uint64_t now = now_ms(c);
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ANNOUNCE_REPLY;
  ws_announce_reply_t *ar = &m.u.announce_reply;
  memcpy(ar->digest, d->b, WS_PROTO_DIGEST_LEN);
  ar->interval_ms = r->interval_ms;
  ar->n_peers = reply_peer_infos(r->peers, r->npeers, peers);
  ar->peers = peers;
  ar->n_nodes = reply_peer_infos(
      nodes, nnodes < WS_MAX_NODES ? nnodes : WS_MAX_NODES, infos);
  ar->nodes = infos;
  for (uint32_t i = 0; i < r->nleases; i++) {
    const trk_lease_t *l = &r->leases[i];
    chunks[i] = l->chunk;
    memcpy(leases[i].digest, d->b, WS_PROTO_DIGEST_LEN);
    leases[i].chunks = &chunks[i];
    leases[i].n_chunks = 1;
    leases[i].ttl_ms =
        l->expires_ms > now ? (uint32_t)(l->expires_ms - now) : 1u;
  }
  ar->leases = leases;
  ar->n_leases = r->nleases;
  ar->streams = r->streams;
  for (uint32_t i = 0; i < r->ntree; i++) /* "": the root of stripe i */
    copy_text(tree[i], sizeof(tree[i]), r->tree[i] ? r->tree[i]->node_id : "",
              r->tree[i] ? sizeof(r->tree[i]->node_id) : 1);
  ar->tree = tree;
  ar->n_tree = r->ntree;
  for (uint32_t i = 0; i < r->nwanted; i++) {
    const trk_wanted_entry_t *e = r->wanted[i];
    if (!e->has_digest)
      continue; /* the wire names releases by digest */
    ws_wanted_t *w = &wanted[ar->n_wanted++];
    memcpy(w->digest, e->digest.b, WS_PROTO_DIGEST_LEN);
    w->uri = e->uri[0] != '\0' ? (char *)e->uri : NULL;
  }
  ar->wanted = wanted;
  (void)trk_conn_send(c, &m); /* failure closed c */
}

static void send_reply(trk_conn_t *c, const ws_hash_t *d,
                       const trk_reply_t *r) {
  send_reply_nodes(c, d, r, NULL, 0);
}

/* Up to max connected nodes other than self that serve chunks (a port and
 * an address): a window of the registry from a random slot, so every node
 * learns a changing sample of the others, whatever releases they share
 * (p2pd keeps them to swap with while the tracker is down). Costs at most
 * one pass over the registry's slots in use (trk_peers_slots). */
static uint32_t sample_nodes(trk_conn_t *c, const trk_peer_t **out,
                             uint32_t max) {
  const trk_peers_t *reg = trk_tracker_peers(c->srv->t);
  uint32_t slots = trk_peers_slots(reg), n = 0;
  if (slots == 0)
    return 0;
  uint64_t x = uv_hrtime() ^ (c->id * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  uint32_t start = (uint32_t)(x % slots);
  for (int pass = 0; pass < 2 && n < max; pass++) {
    uint32_t cur = pass == 0 ? start : 0;
    uint32_t end = pass == 0 ? slots : start;
    const trk_peer_t *p;
    while (n < max && cur < end && (p = trk_peers_next(reg, &cur)) != NULL) {
      if (pass == 1 && cur > end)
        break; /* went past start: seen in the first pass */
      if (p->id != c->peer && p->port != 0 && p->addr[0] != '\0')
        out[n++] = p;
    }
  }
  return n;
}

void trk_server_push_leases(trk_server_t *srv) {
  uint64_t now = uv_now(srv->loop);
  if (!trk_tracker_regrant_pending(srv->t, 0))
    return;
  for (trk_conn_t *c = srv->conns; c != NULL; c = c->next) {
    trk_reply_t r;
    ws_hash_t d;
    if (c->state != TRK_CONN_READY || c->peer == 0)
      continue;
    for (uint32_t i = 0;; i++) {
      int rc = trk_tracker_regrant(srv->t, c->peer, i, now, &d, &r);
      if (rc < 0 || c->state != TRK_CONN_READY)
        break;
      if (rc > 0) {
        srv->st.leases_pushed++;
        send_reply(c, &d, &r);
      }
    }
  }
  (void)trk_tracker_regrant_pending(srv->t, 1);
}

void trk_server_push_wanted(trk_server_t *srv) {
  for (trk_conn_t *c = srv->conns; c != NULL; c = c->next) {
    trk_reply_t r;
    if (c->state != TRK_CONN_READY || c->peer == 0)
      continue;
    trk_tracker_wanted_reply(srv->t, c->peer, &r);
    if (r.nwanted > 0)
      send_reply(c, &r.wanted[0]->digest, &r);
  }
}

static void send_result(trk_conn_t *c, int rc, const char *what) {
  char msg[WS_ERRMSG_MAX + 1];
  snprintf(msg, sizeof(msg), "%s: %s", what, ws_strerror(rc));
  WS_LOGD("conn#%llu node=%s: %s", (unsigned long long)c->id,
          wire_conn_peer(c->wc)->node_id, msg);
  trk_conn_send_error(c, rc, msg);
}

/* An ANNOUNCE refused: the ERROR names the release, so that p2pd can make
 * room (WS_ELIMIT) or fetch it without the tracker (docs/protocol.md). */
static void send_refusal(trk_conn_t *c, int rc, const ws_hash_t *d) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ERROR;
  m.u.error.code = rc;
  if (rc == WS_ELIMIT && trk_tracker_refusal(c->srv->t) != TRK_REFUSE_NONE)
    snprintf(m.u.error.msg, sizeof(m.u.error.msg), "announce: %s (%s)",
             ws_strerror(rc), trk_refusal_name(trk_tracker_refusal(c->srv->t)));
  else
    snprintf(m.u.error.msg, sizeof(m.u.error.msg), "announce: %s",
             ws_strerror(rc));
  m.u.error.has_digest = true;
  memcpy(m.u.error.digest, d->b, WS_PROTO_DIGEST_LEN);
  WS_LOGD("conn#%llu node=%s: %s", (unsigned long long)c->id,
          wire_conn_peer(c->wc)->node_id, m.u.error.msg);
  (void)trk_conn_send(c, &m); /* failure closed c */
}

/* ---- authenticated messages ------------------------------------------- */

static void on_announce(trk_conn_t *c, const ws_announce_t *a) {
  trk_server_t *srv = c->srv;
  const wire_peer_t *p = wire_conn_peer(c->wc);
  trk_reply_t r;
  trk_announce_t ta;
  ws_hash_t d;
  memcpy(d.b, a->digest, sizeof(d.b));
  /* Omitted fields are 0 / "": keep what HELLO said. */
  trk_peer_info_t info = {.node_id = p->node_id,
                          .addr = p->addr,
                          .port = a->port != 0 ? a->port : p->listen_port,
                          .zone = a->zone[0] != '\0' ? a->zone : p->zone};
  int rc = trk_tracker_peer_update(srv->t, c->peer, &info);
  if (rc < 0) {
    send_result(c, rc, "announce: bad port or zone");
    return;
  }
  trk_announce_from_wire(a, &ta);
  rc = trk_tracker_announce(srv->t, c->peer, &ta, now_ms(c), &r);
  if (rc < 0) {
    send_refusal(c, rc, &d);
    return;
  }
  if (ta.leave && a->err[0] != '\0') {
    /* Its release failed there; the swarm's row keeps it too, also once
     * the swarm has ended, for TRK_SWARM_ENDED_MS (trk_swarms.h). */
    char ds[WS_DIGEST_STR_LEN + 1];
    ws_digest_to_str(&d, ds);
    WS_LOGW("conn#%llu node=%s: left %s: %s", (unsigned long long)c->id,
            p->node_id, ds, a->err);
  }
  static const uint8_t presence[WS_PROTO_DIGEST_LEN];
  const trk_peer_t *nodes[WS_MAX_NODES];
  uint32_t nn = 0;
  if (!ta.leave && memcmp(d.b, presence, sizeof(presence)) == 0)
    nn = sample_nodes(c, nodes, TRK_REPLY_NODES);
  send_reply_nodes(c, &d, &r, nodes, nn);
}

static void on_have(trk_conn_t *c, const ws_have_t *h) {
  trk_reply_t r;
  ws_hash_t d;
  memcpy(d.b, h->digest, sizeof(d.b));
  /* "f": the neighbour that sent the chunk served it (before the have,
   * which may complete a lease and top up from the need set). */
  if (h->from[0] != '\0' &&
      trk_tracker_served(c->srv->t, c->peer, &d, h->from, now_ms(c)) == 0)
    c->srv->st.confirms_ignored++;
  int rc =
      trk_tracker_have(c->srv->t, c->peer, &d, &h->chunk, 1, now_ms(c), &r);
  if (rc == WS_ENOTFOUND)
    return; /* a HAVE before the first announce of that release */
  if (rc < 0) {
    send_result(c, rc, "have");
    return;
  }
  if (r.ngranted > 0)
    send_reply(c, &d, &r);
}

static void on_lease(trk_conn_t *c, uint8_t type, const ws_lease_upd_t *u) {
  trk_tracker_t *t = c->srv->t;
  trk_reply_t r;
  ws_hash_t d;
  uint64_t now = now_ms(c);
  bool changed = type == WS_MSG_LEASE_RELEASE || u->n_done > 0;
  memcpy(d.b, u->digest, sizeof(d.b));
  /* Done chunks first: they complete leases and make room. */
  int rc = trk_tracker_have(t, c->peer, &d, u->done, u->n_done, now, NULL);
  if (rc < 0) {
    send_result(c, rc, "lease update");
    return;
  }
  for (uint32_t i = 0; i < u->n_chunks; i++) {
    if (type == WS_MSG_LEASE_RENEW)
      rc = trk_tracker_renew(t, c->peer, &d, u->chunks[i], now);
    else
      rc = trk_tracker_release(t, c->peer, &d, u->chunks[i], now);
    if (rc == WS_ENOTFOUND)
      changed = true; /* expired or revoked: the reply says so */
  }
  if (!changed)
    return;
  /* No new chunks: tops the leases up and lists them. */
  rc = trk_tracker_have(t, c->peer, &d, NULL, 0, now, &r);
  if (rc == 0)
    send_reply(c, &d, &r);
}

/* ---- dispatch --------------------------------------------------------- */

void trk_conn_on_msg(trk_conn_t *c, const ws_msg_t *m) {
  switch (m->type) {
  case WS_MSG_ANNOUNCE:
    on_announce(c, &m->u.announce);
    break;
  case WS_MSG_HAVE:
    on_have(c, &m->u.have);
    break;
  case WS_MSG_LEASE_RENEW:
  case WS_MSG_LEASE_RELEASE:
    on_lease(c, m->type, &m->u.lease);
    break;
  case WS_MSG_ERROR:
    WS_LOGW("conn#%llu node=%s: peer reports error %d: %s",
            (unsigned long long)c->id, wire_conn_peer(c->wc)->node_id,
            (int)m->u.error.code, m->u.error.msg);
    break;
  case WS_MSG_GOODBYE:
    trk_conn_close(c, 0, "goodbye");
    break;
  case WS_MSG_MANIFEST_REQ:
    trk_conn_send_error(c, WS_ENOTFOUND, "the tracker holds no manifests");
    break;
  default:
    protocol_error(c, "message not for a tracker");
    break;
  }
}

/* ---- registration ----------------------------------------------------- */

/* What the ERROR to a node turned away at connect says. */
static void refusal_text(trk_server_t *srv, int rc, char *out, size_t cap) {
  trk_tracker_stats_t st;
  if (rc != WS_ELIMIT) {
    snprintf(out, cap, "refused: %s", ws_strerror(rc));
    return;
  }
  trk_tracker_stats(srv->t, &st);
  if (trk_tracker_refusal(srv->t) == TRK_REFUSE_NODE_BOUND)
    snprintf(out, cap,
             "node id already connected from another address; retry once "
             "that connection is gone");
  else if (trk_tracker_refusal(srv->t) == TRK_REFUSE_PER_ADDR)
    snprintf(out, cap,
             "too many node ids from this address (%u, "
             "--max-nodes-per-addr); retry later, fetch without this tracker",
             trk_peers_max_per_addr(trk_tracker_peers(srv->t)));
  else if (trk_tracker_refusal(srv->t) == TRK_REFUSE_MEMORY)
    snprintf(out, cap,
             "tracker full: memory cap of %llu bytes reached "
             "(--max-memory); retry later, fetch without this tracker",
             (unsigned long long)st.memory_max);
  else
    snprintf(out, cap,
             "tracker full: %u of %u peers connected (--max-peers); "
             "retry later, fetch without this tracker",
             st.peers, st.peers_max);
}

void trk_conn_register(trk_conn_t *c) {
  trk_server_t *srv = c->srv;
  const wire_peer_t *p = wire_conn_peer(c->wc);
  trk_peer_id_t id, old = 0;
  trk_peer_info_t info = {.node_id = p->node_id,
                          .addr = p->addr,
                          .port = p->listen_port,
                          .zone = p->zone,
                          .labels = p->labels,
                          .rejoin = p->rejoin};
  bool held = trk_tracker_hold_until(srv->t) != 0;
  int rc = trk_tracker_connect(srv->t, &info, now_ms(c), &id, &old);
  if (rc < 0) {
    char why[WS_ERRMSG_MAX + 1];
    refusal_text(srv, rc, why, sizeof(why));
    if (rc == WS_ELIMIT) /* a full tracker: counted, logged in summary */
      trk_server_refused(srv, trk_tracker_refusal(srv->t));
    else
      WS_LOGW("conn#%llu %s node=%s: refused: %s", (unsigned long long)c->id,
              p->addr, p->node_id, why);
    WS_LOGD("conn#%llu %s node=%s: refused: %s", (unsigned long long)c->id,
            p->addr, p->node_id, why);
    /* The ERROR (no "d": about the node, not a release) says why; p2pd
     * backs off and fetches without this tracker. GOODBYE closes once it
     * has gone out. */
    c->refused = rc == WS_ELIMIT; /* in the summary line instead */
    trk_conn_send_error(c, rc, why);
    trk_conn_goodbye(c, WS_BYE_SHUTDOWN, "refused");
    return;
  }
  c->peer = id;
  WS_LOGI("conn#%llu %s node=%s zone=%s labels=%s port=%u: peer %s",
          (unsigned long long)c->id, p->addr, p->node_id, p->zone, p->labels,
          (unsigned)p->listen_port, p->rejoin ? "rejoined" : "joined");
  uint64_t until = trk_tracker_hold_until(srv->t);
  if (!held && until != 0)
    WS_LOGI("a restart: node %s rejoins; no S3 lease for %llu ms while the "
            "nodes reconnect",
            p->node_id, (unsigned long long)(until - now_ms(c)));
  if (old != 0) {
    /* The node reconnected; its old connection is stale. Its peer record
     * is already gone, so closing it must not disconnect anything. */
    trk_conn_t *stale = trk_server_find_peer(srv, old);
    if (stale != NULL) {
      stale->peer = 0;
      trk_conn_close(stale, 0, "replaced by a new connection");
    }
  }
}
