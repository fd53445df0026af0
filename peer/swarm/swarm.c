/* swarm.c - the swarm object (lifecycle in swarm.h): the peer listener,
 * the tracker link and what its callbacks do, the ban list, the
 * housekeeping tick, and the kick that refills request pipelines.
 *
 * Tracker callbacks: on_peers connects to new neighbours (bounded by
 * --max-neighbors, never to ourselves, never to a banned one); on_leases
 * records the chunks the origin may fetch and kicks it; on_wanted starts a
 * prefetch (the API's path) of a release the cluster wants; on_link tracks
 * whether the tracker is reachable, because leases die with the link and
 * after PEER_TRACKER_FALLBACK_MS without one the origin falls back to
 * fetching whatever no neighbour has.
 *
 * Owns: the listener handle, the tick timer, the tracker client, the
 * neighbour list (nbr.c frees each after its close), the release records
 * (srel.c). Thread: loop thread.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/swarm-int.h" /* first: see its note on ws_manifest_t */
#include "fetch/origin.h"
#include "ws_log.h"

/* ---- bans --------------------------------------------------------------- */

static void swarm_hostport(char *buf, size_t len, const char *host,
                           uint16_t port) {
  if (host == NULL || host[0] == '\0' || port == 0)
    buf[0] = '\0';
  else
    snprintf(buf, len, "%s:%u", host, port);
}

int peer_swarm_banned(peer_swarm_t *s, const char *node_id, const char *host,
                      uint16_t port) {
  char hp[80];
  uint64_t now = uv_now(&s->d->loop);
  swarm_hostport(hp, sizeof(hp), host, port);
  for (uint32_t i = 0; i < s->nbans; i++) {
    if (s->bans[i].until_ms <= now)
      continue;
    if ((node_id != NULL && node_id[0] != '\0' &&
         strcmp(s->bans[i].node_id, node_id) == 0) ||
        (hp[0] != '\0' && strcmp(s->bans[i].hostport, hp) == 0))
      return 1;
  }
  return 0;
}

void peer_swarm_ban(peer_swarm_t *s, const char *node_id, const char *host,
                    uint16_t port, const char *why) {
  uint64_t now = uv_now(&s->d->loop);
  uint32_t slot = 0;
  char hp[80];
  swarm_hostport(hp, sizeof(hp), host, port);
  for (uint32_t i = 0; i < s->nbans; i++) {
    /* Already banned (a second bad chunk was in flight): extend it. */
    if (node_id != NULL && strcmp(s->bans[i].node_id, node_id) == 0 &&
        strcmp(s->bans[i].hostport, hp) == 0 && s->bans[i].until_ms > now) {
      s->bans[i].until_ms = now + PEER_BAN_MS;
      return;
    }
  }
  if (s->nbans < PEER_BANS_MAX) {
    slot = s->nbans++;
  } else {
    /* Full: reuse the entry that ends first. */
    for (uint32_t i = 1; i < s->nbans; i++) {
      if (s->bans[i].until_ms < s->bans[slot].until_ms)
        slot = i;
    }
  }
  snprintf(s->bans[slot].node_id, sizeof(s->bans[slot].node_id), "%s",
           node_id != NULL ? node_id : "");
  swarm_hostport(s->bans[slot].hostport, sizeof(s->bans[slot].hostport), host,
                 port);
  s->bans[slot].until_ms = now + PEER_BAN_MS;
  s->d->metrics.peers_banned++;
  WS_LOGW("peer %s (%s) banned for %u s: %s", node_id, s->bans[slot].hostport,
          PEER_BAN_MS / 1000u, why);
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    if (n->state != PEER_NBR_CLOSING &&
        peer_swarm_banned(s, n->node_id, n->host, n->port))
      peer_nbr_close(n, WS_BYE_BANNED);
  }
}

void peer_swarm_ban_node(peer_swarm_t *s, const char *node_id,
                         const char *why) {
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    if (strcmp(n->node_id, node_id) == 0) {
      peer_swarm_ban(s, node_id, n->host, n->port, why);
      return;
    }
  }
  peer_swarm_ban(s, node_id, NULL, 0, why);
}

/* ---- neighbours --------------------------------------------------------- */

void peer_swarm_kick(peer_swarm_t *s) {
  if (s->stopping)
    return;
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next)
    peer_picker_fill(n);
}

void peer_swarm_nbr_ready(peer_swarm_t *s, peer_nbr_t *n) {
  peer_picker_fill(n);
}

void peer_swarm_nbr_gone(peer_swarm_t *s, peer_nbr_t *n) {
  uint64_t now = uv_now(&s->d->loop);
  for (peer_srel_t *srel = s->srels, *next; srel != NULL; srel = next) {
    next = srel->next;
    if (srel->masked == n) {
      srel->masked = NULL;
      peer_srel_manifest_try(srel, now); /* may free srel */
    }
  }
}

void peer_swarm_nbr_announced(peer_swarm_t *s, peer_nbr_t *n,
                              const uint8_t *digest) {
  peer_srel_t *srel = peer_srel_find(s, digest);
  if (srel != NULL)
    peer_srel_manifest_try(srel, uv_now(&s->d->loop));
}

static int swarm_knows(peer_swarm_t *s, const char *node_id) {
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    if (strcmp(n->node_id, node_id) == 0 || strcmp(n->expect, node_id) == 0)
      return 1;
  }
  return 0;
}

/* ---- tracker callbacks -------------------------------------------------- */

static void swarm_on_peers(void *arg, const uint8_t *digest,
                           const ws_peer_info_t *peers, uint32_t n) {
  peer_swarm_t *s = arg;
  const peer_settings_t *cfg = s->d->cfg;
  if (n == 0 && !s->stopping) {
    peer_srel_t *srel = peer_srel_find(s, digest);
    if (srel != NULL)
      peer_srel_manifest_no_holders(srel); /* may answer the release */
    return;
  }
  for (uint32_t i = 0; i < n && !s->stopping; i++) {
    const ws_peer_info_t *p = &peers[i];
    if (s->nnbrs >= cfg->max_neighbors)
      break;
    if (p->port == 0 || strcmp(p->node_id, cfg->node_id) == 0 ||
        swarm_knows(s, p->node_id) ||
        peer_swarm_banned(s, p->node_id, p->host, p->port))
      continue;
    int rc = peer_nbr_connect(s, p->host, p->port, p->node_id);
    if (rc != 0)
      WS_LOGW("peer %s at %s:%u: cannot connect: %s", p->node_id, p->host,
              p->port, ws_strerror(rc));
  }
}

static void swarm_on_leases(void *arg, const uint8_t *digest,
                            const uint32_t *chunks, uint32_t n, uint32_t ttl_ms,
                            uint32_t streams) {
  peer_swarm_t *s = arg;
  peer_srel_t *srel = peer_srel_find(s, digest);
  if (srel == NULL || srel->state != PEER_SREL_FETCHING)
    return; /* it expires at the tracker */
  peer_srel_leases_add(srel, chunks, n, ttl_ms);
  srel->streams = streams;
  peer_origin_kick(s->d->origin);
}

static void swarm_on_wanted(void *arg, const uint8_t *digest, const char *uri) {
  peer_swarm_t *s = arg;
  peer_daemon_t *d = s->d;
  ws_hash_t h;
  memcpy(h.b, digest, sizeof(h.b));
  if (d->state != PEER_DAEMON_RUNNING)
    return;
  peer_release_t *rel = peer_release_find(d, &h);
  if (rel != NULL && rel->state != PEER_REL_FAILED)
    return;
  /* A failed release is retried, but not at every announce. */
  if (rel != NULL &&
      peer_daemon_now_unix_ms() - rel->finished_unix_ms < PEER_MANIFEST_WAIT_MS)
    return;
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&h, ds);
  WS_LOGI("tracker: cluster wants %s%s%s", ds, uri != NULL ? " from " : "",
          uri != NULL ? uri : "");
  if (uri != NULL)
    peer_release_prefetch(d, uri, &h, NULL);
  else
    peer_release_prefetch_digest(d, &h);
}

static void swarm_on_link(void *arg, bool up, int status) {
  peer_swarm_t *s = arg;
  if (up == (s->tracker_up != 0))
    return;
  s->tracker_up = up;
  if (up) {
    WS_LOGI("tracker %s: connected", s->d->cfg->tracker);
    return;
  }
  WS_LOGW("tracker %s: link down (%s); swapping with known peers, S3 for "
          "chunks none has after %u s",
          s->d->cfg->tracker, ws_strerror(status),
          PEER_TRACKER_FALLBACK_MS / 1000u);
  s->tracker_down_ms = uv_now(&s->d->loop);
  /* Leases die with the link: the tracker re-grants after re-announce. */
  for (peer_srel_t *srel = s->srels; srel != NULL; srel = srel->next)
    srel->nleases = 0;
}

/* ---- tick --------------------------------------------------------------- */

static void swarm_tick(uv_timer_t *t) {
  peer_swarm_t *s = t->data;
  uint64_t now = uv_now(&s->d->loop);
  if (s->stopping || s->d->state != PEER_DAEMON_RUNNING)
    return;
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    if (n->state == PEER_NBR_READY)
      peer_nbr_tick(n, now);
  }
  int renew = now - s->renew_ms >= PEER_LEASE_RENEW_MS;
  if (renew)
    s->renew_ms = now;
  for (peer_srel_t *srel = s->srels, *next; srel != NULL; srel = next) {
    next = srel->next;
    if (renew)
      peer_srel_leases_renew(srel);
    peer_srel_manifest_try(srel, now); /* may free srel */
  }
  /* Busy neighbours become askable again; fallback may have begun. */
  peer_swarm_kick(s);
  peer_origin_kick(s->d->origin);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void swarm_on_connection(uv_stream_t *server, int status) {
  peer_swarm_t *s = server->data;
  if (status < 0) {
    WS_LOGW("listener: %s", uv_strerror(status));
    return;
  }
  int rc = peer_nbr_accept(s, server);
  if (rc != 0)
    WS_LOGW("listener: accept: %s", ws_strerror(rc));
}

/* Binds --listen HOST:PORT ("[v6]:port" too); *port gets the bound port. */
static int swarm_listen(peer_swarm_t *s, const char *hostport) {
  char host[WS_HOST_MAX + 1];
  const char *colon = strrchr(hostport, ':');
  if (colon == NULL || colon == hostport)
    return WS_EUSAGE;
  size_t hl = (size_t)(colon - hostport);
  const char *h = hostport;
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  if (hl >= sizeof(host))
    return WS_EUSAGE;
  memcpy(host, h, hl);
  host[hl] = '\0';
  char *end = NULL;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (end == colon + 1 || *end != '\0' || port > 65535)
    return WS_EUSAGE;
  struct sockaddr_storage ss;
  if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&ss) != 0)
    return WS_EUSAGE;
  int rc = uv_tcp_init(&s->d->loop, &s->listener);
  if (rc != 0)
    return rc;
  s->listening = 1;
  s->listener.data = s;
  if ((rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)&s->listener, 128, swarm_on_connection)) !=
          0)
    return rc;
  struct sockaddr_storage got;
  int len = sizeof(got);
  if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&got, &len) == 0)
    s->port = ntohs(got.ss_family == AF_INET6
                        ? ((struct sockaddr_in6 *)&got)->sin6_port
                        : ((struct sockaddr_in *)&got)->sin_port);
  return 0;
}

static int swarm_tracker_start(peer_swarm_t *s) {
  const peer_settings_t *cfg = s->d->cfg;
  trk_client_cfg_t tcfg;
  trk_client_cfg_init(&tcfg);
  int rc = trk_client_cfg_addr(&tcfg, cfg->tracker);
  if (rc != 0)
    return rc;
  memcpy(tcfg.key, cfg->cluster_key, sizeof(tcfg.key));
  snprintf(tcfg.node_id, sizeof(tcfg.node_id), "%s", cfg->node_id);
  tcfg.listen_port = s->port;
  snprintf(tcfg.zone, sizeof(tcfg.zone), "%s",
           cfg->zone != NULL ? cfg->zone : "");
  trk_client_cbs_t cbs = {
      .on_peers = swarm_on_peers,
      .on_leases = swarm_on_leases,
      .on_wanted = swarm_on_wanted,
      .on_link = swarm_on_link,
      .arg = s,
  };
  rc = trk_client_new(&s->d->loop, &tcfg, &cbs, &s->tc);
  sodium_memzero(tcfg.key, sizeof(tcfg.key));
  if (rc != 0)
    return rc;
  /* The tracker speaks only in answer to an announce, and a node with no
   * release yet has nothing to announce: without this it would never hear
   * of the wanted set, and the tracker would time the idle link out. An
   * announce of the all-zero digest without a chunk count joins nothing
   * (docs/tracker.md) and is answered with the wanted set, at every
   * interval. */
  static const uint8_t presence[WS_PROTO_DIGEST_LEN];
  return trk_client_track(s->tc, presence, 0, NULL, NULL, WS_SWARM_LEECH);
}

int peer_swarm_new(peer_daemon_t *d, peer_swarm_t **out) {
  const peer_settings_t *cfg = d->cfg;
  int rc;
  peer_swarm_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return -ENOMEM;
  s->d = d;
  s->rng = uv_hrtime() | 1u;
  s->tracker_down_ms = uv_now(&d->loop);
  peer_rate_init(&s->up_rate, cfg->upload_rate);
  peer_rate_init(&s->down_rate, cfg->download_rate);
  wire_conn_cfg_init(&s->wcfg);
  memcpy(s->wcfg.key, cfg->cluster_key, sizeof(s->wcfg.key));
  snprintf(s->wcfg.node_id, sizeof(s->wcfg.node_id), "%s", cfg->node_id);
  snprintf(s->wcfg.zone, sizeof(s->wcfg.zone), "%s",
           cfg->zone != NULL ? cfg->zone : "");
  s->wcfg.role = WS_ROLE_PEER;
  uv_timer_init(&d->loop, &s->tick);
  s->tick.data = s;
  s->tick_open = 1;
  *out = s; /* the daemon stops and frees it from here on */
  if (!cfg->has_cluster_key)
    WS_LOGW("swarm: no --cluster-key: using the all-zero development key; "
            "anyone who can reach the port can join");
  if (cfg->listen != NULL) {
    rc = swarm_listen(s, cfg->listen);
    if (rc != 0) {
      WS_LOGE("--listen %s: %s", cfg->listen, ws_strerror(rc));
      return rc;
    }
    WS_LOGI("swarm: node %s listening on %s (port %u)", cfg->node_id,
            cfg->listen, s->port);
  }
  s->wcfg.listen_port = s->port;
  if (cfg->tracker != NULL) {
    rc = swarm_tracker_start(s);
    if (rc != 0) {
      WS_LOGE("--tracker %s: %s", cfg->tracker, ws_strerror(rc));
      return rc;
    }
  }
  uv_timer_start(&s->tick, swarm_tick, PEER_SWARM_TICK_MS, PEER_SWARM_TICK_MS);
  return 0;
}

void peer_swarm_tick_soon(peer_swarm_t *s, uint64_t ms) {
  if (s->tick_open && !s->stopping && uv_timer_get_due_in(&s->tick) > ms)
    uv_timer_start(&s->tick, swarm_tick, ms, PEER_SWARM_TICK_MS);
}

static void swarm_listener_closed(uv_handle_t *h) {
  peer_swarm_t *s = h->data;
  s->listening = 0;
}

static void swarm_tick_closed(uv_handle_t *h) {
  peer_swarm_t *s = h->data;
  s->tick_open = 0;
}

void peer_swarm_stop(peer_swarm_t *s) {
  if (s == NULL || s->stopping)
    return;
  s->stopping = 1;
  if (s->listening && !uv_is_closing((uv_handle_t *)&s->listener))
    uv_close((uv_handle_t *)&s->listener, swarm_listener_closed);
  if (s->tick_open && !uv_is_closing((uv_handle_t *)&s->tick))
    uv_close((uv_handle_t *)&s->tick, swarm_tick_closed);
  trk_client_close(s->tc);
  s->tc = NULL;
  for (peer_nbr_t *n = s->nbrs; n != NULL; n = n->next) {
    if (n->state == PEER_NBR_CONNECTING && n->c != NULL)
      wire_conn_close(n->c, WS_ECANCELED);
    else
      peer_nbr_close(n, WS_BYE_SHUTDOWN);
  }
  /* Releases waiting for a manifest from neighbours get their answer. */
  for (peer_srel_t *srel = s->srels, *next; srel != NULL; srel = next) {
    next = srel->next;
    if (srel->state == PEER_SREL_RESOLVING && !srel->mdone) {
      srel->mdone = true;
      peer_release_manifest_peer(srel->rel, NULL, 0, NULL);
    }
  }
}

int peer_swarm_busy(const peer_swarm_t *s) {
  return s->listening || s->tick_open || s->nnbrs > 0 || s->rx_alive > 0 ||
         s->up_alive > 0;
}

void peer_swarm_free(peer_swarm_t *s) {
  if (s == NULL)
    return;
  assert(!peer_swarm_busy(s));
  while (s->srels != NULL)
    peer_srel_free(s->srels);
  sodium_memzero(s->wcfg.key, sizeof(s->wcfg.key));
  free(s);
}

void peer_swarm_stats(const peer_swarm_t *s, peer_swarm_stats_t *out) {
  uint64_t now = uv_now(&s->d->loop);
  memset(out, 0, sizeof(*out));
  out->neighbors = s->nready;
  out->releases = s->nsrels;
  out->uploads = s->uploads;
  for (uint32_t i = 0; i < s->nbans; i++)
    out->bans += s->bans[i].until_ms > now;
  out->tracker_up = s->tracker_up;
}
