/* swarm.c - the swarm object (lifecycle in swarm.h): the peer listener,
 * the tracker link and what its callbacks do, bans, the housekeeping tick,
 * the fetch layer's events, and the public calls of swarm.h. It creates
 * the swarm's modules with their collaborators and is the only file of the
 * swarm that knows them all; none of them calls back into it except
 * through the callbacks it hands them (download outcome, tracker link,
 * fetch listener, origin gate).
 *
 * Tracker callbacks: on_peers connects to new neighbours (bounded by
 * --max-neighbors, never to ourselves, never to a banned one); on_leases
 * records the chunks the origin may fetch and kicks it; on_wanted hands the
 * cluster's wanted release to the release layer (hooks.want); on_link
 * tracks whether any tracker is reachable (stats, logs); on_leases_lost
 * voids a release's leases when its tracker's link drops or the release
 * moves to another tracker (trackers.h). After PEER_TRACKER_FALLBACK_MS
 * with the link of a release's tracker down (and no other to move to) the
 * origin falls back to fetching whatever no neighbour has. The tick also
 * checks each release's liveness (swarm_stall.c) and fails, through
 * hooks.stalled_out, one that had no byte from anyone for --stall-fail.
 *
 * Owns: the listener handle, the tick timer, the tracker links, and the
 * modules embedded below (neighbours, records, picker, uploads, downloads,
 * bans). Thread: loop thread.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/addrbook.h"
#include "swarm/bans.h"
#include "swarm/download.h"
#include "swarm/neighbor.h"
#include "swarm/neighbor_conn.h"
#include "swarm/picker.h"
#include "swarm/swarm.h"
#include "swarm/swarm_release.h"
#include "swarm/trackers.h"
#include "swarm/upload.h"
#include "ws_log.h"

struct peer_swarm_s {
  peer_ctx_t *ctx;
  peer_files_t *files;
  peer_origin_t *origin;
  peer_swarm_hooks_t hooks;
  int stopping;
  uv_tcp_t listener;
  int listening;       /* listener open (closing counts) */
  uint16_t port;       /* bound listen port, 0 = none */
  peer_trackers_t *tl; /* NULL without --tracker */
  peer_tracker_state_t tracker;
  peer_bans_t bans;
  peer_addrbook_t book; /* nodes to dial while a tracker is down */
  peer_neighbors_t nbrs;
  peer_swarm_rels_t rels;
  peer_picker_t picker;
  peer_uploads_t uploads;
  peer_downloads_t downloads;
  peer_fetch_listener_t fetch_events;
  uv_timer_t tick;
  int tick_open;
  uv_timer_t mwait; /* the next end of a wait for a neighbour's manifest */
  int mwait_open;
  uint64_t renew_ms;
};

/* ---- bans --------------------------------------------------------------- */

/* Bans a neighbour (its node id and listen port, both at the address the
 * bad bytes came from: bans.h) and closes it if connected. */
static void swarm_ban(peer_swarm_t *s, const char *node_id, const char *host,
                      uint16_t port, const char *why) {
  uint64_t now = uv_now(s->ctx->loop);
  int slot = peer_bans_add(&s->bans, now, node_id, host, port);
  if (slot < 0)
    return; /* extended */
  s->ctx->counters.peers_banned++;
  WS_LOGW("peer %s at %s:%u banned for %u s: %s", node_id, s->bans.e[slot].host,
          s->bans.e[slot].port, PEER_BAN_MS / 1000u, why);
  for (peer_neighbor_t *n = s->nbrs.head; n != NULL; n = n->next) {
    if (n->state != PEER_NEIGHBOR_CLOSING &&
        peer_bans_check(&s->bans, now, n->node_id, n->host, n->port))
      peer_neighbor_close(n, WS_BYE_BANNED);
  }
}

void peer_swarm_ban_node(peer_swarm_t *s, const char *node_id, const char *host,
                         const char *why) {
  for (peer_neighbor_t *n = s->nbrs.head; n != NULL; n = n->next) {
    if (strcmp(n->node_id, node_id) == 0 && strcmp(n->host, host) == 0) {
      swarm_ban(s, node_id, n->host, n->port, why);
      return;
    }
  }
  swarm_ban(s, node_id, host, 0, why);
}

/* ---- callbacks of the swarm's modules and of the fetch layer ------------ */

static void swarm_on_download_ban(void *arg, const char *node_id,
                                  const char *host, uint16_t port,
                                  const char *why) {
  swarm_ban(arg, node_id, host, port, why);
}

static void swarm_kick(void *arg) {
  peer_swarm_t *s = arg;
  peer_picker_fill_all(&s->picker);
}

static void swarm_on_chunk_done(void *arg, peer_file_t *f, uint32_t j,
                                peer_source_t src) {
  peer_swarm_t *s = arg;
  /* From a neighbour: the download being reported names it. */
  swarm_rels_chunk_done_from(&s->rels, f, j,
                             src == PEER_SRC_PEER ? s->downloads.sender : NULL);
}

static void swarm_on_chunk_live(void *arg, peer_file_t *f, uint32_t j) {
  peer_swarm_t *s = arg;
  swarm_rels_chunk_live(&s->rels, f, j);
}

static void swarm_on_chunk_progress(void *arg, peer_file_t *f, uint32_t j) {
  peer_swarm_t *s = arg;
  peer_upload_live_progress(&s->uploads, &s->nbrs, f, j);
}

static void swarm_on_file_complete(void *arg, peer_file_t *f) {
  peer_swarm_t *s = arg;
  swarm_rels_file_complete(&s->rels, f);
}

/* ---- tracker callbacks -------------------------------------------------- */

static void swarm_on_peers(void *arg, const uint8_t *digest,
                           const ws_peer_info_t *peers, uint32_t n,
                           const char (*tree)[WS_NODE_ID_MAX + 1],
                           uint32_t ntree) {
  peer_swarm_t *s = arg;
  const peer_settings_t *cfg = s->ctx->cfg;
  uint64_t now = uv_now(s->ctx->loop);
  if (n > 0 || ntree > 0)
    swarm_rel_set_tree(swarm_rel_find(&s->rels, digest), tree, ntree, now);
  if (n == 0 && !s->stopping) {
    peer_swarm_rel_t *rel = swarm_rel_find(&s->rels, digest);
    if (rel != NULL)
      swarm_rel_manifest_no_holders(rel); /* may answer the release */
    return;
  }
  for (uint32_t i = 0; i < n && !s->stopping; i++) {
    const ws_peer_info_t *p = &peers[i];
    if (!peer_neighbors_room_dial(&s->nbrs, now))
      break;
    if (p->port == 0 || strcmp(p->node_id, cfg->node_id) == 0 ||
        peer_neighbors_knows(&s->nbrs, p->node_id, p->host) ||
        peer_bans_check(&s->bans, now, p->node_id, p->host, p->port))
      continue;
    int rc = peer_neighbor_connect(&s->nbrs, p->host, p->port, p->node_id);
    if (rc != 0)
      WS_LOGW("peer %s at %s:%u: cannot connect: %s", p->node_id, p->host,
              p->port, ws_strerror(rc));
  }
  /* Still short while fetching: at a cluster-wide start the first replies
   * can name only the members already joined, and the next announce would
   * come a whole interval later (tracker_link.h). */
  peer_swarm_rel_t *rel = swarm_rel_find(&s->rels, digest);
  if (!s->stopping && rel != NULL && rel->state == PEER_SWARM_REL_FETCHING &&
      s->nbrs.count < cfg->max_neighbors)
    (void)peer_trackers_soon(s->tl, digest);
}

static void swarm_on_leases(void *arg, const uint8_t *digest,
                            const uint32_t *chunks, uint32_t n, uint32_t ttl_ms,
                            uint32_t streams) {
  peer_swarm_t *s = arg;
  peer_swarm_rel_t *rel = swarm_rel_find(&s->rels, digest);
  if (rel == NULL || rel->state != PEER_SWARM_REL_FETCHING)
    return; /* it expires at the tracker */
  swarm_rel_leases_add(rel, chunks, n, ttl_ms);
  rel->streams = streams;
  peer_origin_kick(s->origin);
}

static void swarm_on_wanted(void *arg, const uint8_t *digest, const char *uri) {
  peer_swarm_t *s = arg;
  ws_hash_t h;
  memcpy(h.b, digest, sizeof(h.b));
  if (!s->ctx->running || s->hooks.want == NULL)
    return;
  s->hooks.want(s->hooks.arg, uri, &h);
}

static void swarm_on_nodes(void *arg, const ws_peer_info_t *nodes, uint32_t n) {
  peer_swarm_t *s = arg;
  peer_addrbook_learn(&s->book, nodes, n, uv_now(s->ctx->loop));
}

static void swarm_on_report(void *arg, const uint8_t *digest,
                            ws_announce_t *a) {
  peer_swarm_t *s = arg;
  swarm_rels_report(&s->rels, digest, a);
}

static void swarm_on_link(void *arg, const char *addr, bool up, int status,
                          unsigned ups) {
  peer_swarm_t *s = arg;
  if (up) {
    WS_LOGI("tracker %s: connected", addr);
  } else if (ups > 0) {
    WS_LOGW("tracker %s: link down (%s); its releases move to another "
            "tracker after %u ms",
            addr, ws_strerror(status), PEER_TRACKERS_MOVE_MS);
  } else if (s->tracker.up) {
    WS_LOGW("tracker %s: link down (%s); swapping with known peers, S3 for "
            "chunks none has after %u s",
            addr, ws_strerror(status), PEER_TRACKER_FALLBACK_MS / 1000u);
  }
  if ((ups > 0) == s->tracker.up)
    return;
  s->tracker.up = ups > 0;
  if (!s->tracker.up)
    s->tracker.down_ms = uv_now(s->ctx->loop);
}

/* Leases die with the link (the tracker re-grants after re-announce) and
 * are void when the release moves to another tracker. */
static void swarm_on_leases_lost(void *arg, const uint8_t *digest) {
  peer_swarm_t *s = arg;
  peer_swarm_rel_t *rel = swarm_rel_find(&s->rels, digest);
  if (rel != NULL)
    rel->nleases = 0;
}

/* ---- tick --------------------------------------------------------------- */

/* Liveness of the FETCHING releases (swarm_stall.c). One release past
 * --stall-fail is failed per tick: failing it frees its record. */
static void swarm_stall_tick(peer_swarm_t *s, uint64_t now) {
  char why[WS_ERRMSG_MAX + 1];
  for (peer_swarm_rel_t *rel = s->rels.head; rel != NULL; rel = rel->next) {
    if (!swarm_rel_stall_check(rel, now, why, sizeof(why)))
      continue;
    ws_hash_t d = rel->digest;
    char ds[WS_DIGEST_STR_LEN + 1];
    ws_digest_to_str(&d, ds);
    WS_LOGE("release %s: %s", ds, why);
    if (s->hooks.stalled_out != NULL)
      s->hooks.stalled_out(s->hooks.arg, &d, WS_ETIMEOUT, why);
    return;
  }
}

static void swarm_tick(uv_timer_t *t) {
  peer_swarm_t *s = t->data;
  uint64_t now = uv_now(s->ctx->loop);
  if (s->stopping || !s->ctx->running)
    return;
  for (peer_neighbor_t *n = s->nbrs.head; n != NULL; n = n->next) {
    if (n->state == PEER_NEIGHBOR_READY &&
        !peer_upload_tick(&s->uploads, n, now))
      peer_neighbor_tick(n, now);
  }
  peer_neighbors_trim(&s->nbrs, now); /* spare slots lent are given back */
  int renew = now - s->renew_ms >= PEER_LEASE_RENEW_MS;
  if (renew)
    s->renew_ms = now;
  for (peer_swarm_rel_t *rel = s->rels.head, *next; rel != NULL; rel = next) {
    next = rel->next;
    if (renew)
      swarm_rel_leases_renew(rel);
    swarm_rel_manifest_try(rel, now); /* may free rel */
  }
  /* A release's tracker down: dial the nodes it named (addrbook.h). */
  (void)peer_addrbook_tick(&s->book, now);
  swarm_stall_tick(s, now);
  /* Busy neighbours become askable again; fallback may have begun. */
  peer_picker_fill_all(&s->picker);
  peer_origin_kick(s->origin);
}

/* The waits for a neighbour's manifest end on their own timer, on time:
 * on the tick (every PEER_SWARM_TICK_MS) a node whose dials had all been
 * refused read its manifest from S3 ~1 s after the prefetch, not 0.25 s
 * (docs/benchmarks.md, session 42). */
static void swarm_mwait(uv_timer_t *t);

static void swarm_mwait_arm(peer_swarm_t *s) {
  if (!s->mwait_open || s->stopping)
    return;
  uint64_t now = uv_now(s->ctx->loop), due = UINT64_MAX;
  for (const peer_swarm_rel_t *rel = s->rels.head; rel != NULL;
       rel = rel->next) {
    uint64_t d = swarm_rel_manifest_due(rel, now);
    if (d < due)
      due = d;
  }
  if (due == UINT64_MAX)
    uv_timer_stop(&s->mwait);
  else
    uv_timer_start(&s->mwait, swarm_mwait, due, 0);
}

static void swarm_on_mwait_changed(void *arg) {
  swarm_mwait_arm(arg);
}

static void swarm_mwait(uv_timer_t *t) {
  peer_swarm_t *s = t->data;
  if (s->stopping)
    return;
  uint64_t now = uv_now(s->ctx->loop);
  for (peer_swarm_rel_t *rel = s->rels.head, *next; rel != NULL; rel = next) {
    next = rel->next;
    swarm_rel_manifest_try(rel, now); /* may free rel */
  }
  swarm_mwait_arm(s);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void swarm_on_connection(uv_stream_t *server, int status) {
  peer_swarm_t *s = server->data;
  if (status < 0) {
    WS_LOGW("listener: %s", uv_strerror(status));
    return;
  }
  int rc = peer_neighbor_accept(&s->nbrs, server);
  if (rc != 0)
    WS_LOGW("listener: accept: %s", ws_strerror(rc));
}

/* Parses --listen HOST:PORT ("[v6]:port" too) into ss. */
static int swarm_listen_addr(const char *hostport,
                             struct sockaddr_storage *ss) {
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
  if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) != 0 &&
      uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) != 0)
    return WS_EUSAGE;
  return 0;
}

/* Binds --listen; s->port gets the bound port. */
static int swarm_listen(peer_swarm_t *s, const char *hostport) {
  struct sockaddr_storage ss;
  int rc = swarm_listen_addr(hostport, &ss);
  if (rc != 0)
    return rc;
  rc = uv_tcp_init(s->ctx->loop, &s->listener);
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

/* One link per address of --tracker A,B,... (trackers.h). */
static int swarm_tracker_start(peer_swarm_t *s) {
  const peer_settings_t *cfg = s->ctx->cfg;
  peer_tracker_link_cfg_t tcfg, list[PEER_TRACKERS_MAX];
  unsigned n = 0;
  peer_tracker_link_cfg_init(&tcfg);
  memcpy(tcfg.key, cfg->cluster_key, sizeof(tcfg.key));
  snprintf(tcfg.node_id, sizeof(tcfg.node_id), "%s", cfg->node_id);
  tcfg.listen_port = s->port;
  snprintf(tcfg.zone, sizeof(tcfg.zone), "%s",
           cfg->zone != NULL ? cfg->zone : "");
  snprintf(tcfg.labels, sizeof(tcfg.labels), "%s",
           cfg->labels != NULL ? cfg->labels : "");
  peer_trackers_cbs_t cbs = {
      .on_peers = swarm_on_peers,
      .on_leases = swarm_on_leases,
      .on_wanted = swarm_on_wanted,
      .on_nodes = swarm_on_nodes,
      .on_link = swarm_on_link,
      .on_leases_lost = swarm_on_leases_lost,
      .on_report = swarm_on_report,
      .arg = s,
  };
  /* Each link announces the all-zero digest without a chunk count, which
   * joins nothing (docs/tracker.md) and is answered with the wanted set at
   * every interval: the tracker speaks only in answer to an announce, and
   * a node with no release yet would otherwise never hear of the wanted
   * set, and the tracker would time the idle link out. */
  int rc =
      peer_trackers_parse(cfg->tracker, &tcfg, list, PEER_TRACKERS_MAX, &n);
  if (rc == 0)
    rc = peer_trackers_new(s->ctx->loop, list, n, &cbs, &s->tl);
  sodium_memzero(tcfg.key, sizeof(tcfg.key));
  for (unsigned i = 0; i < n; i++)
    sodium_memzero(list[i].key, sizeof(list[i].key));
  if (rc != 0)
    return rc;
  s->rels.tl = s->tl;
  s->tracker.configured = true;
  s->tracker.trackers = s->tl;
  return 0;
}

/* Creates the modules with their collaborators; listens to the files. */
static void swarm_wire(peer_swarm_t *s) {
  peer_ctx_t *ctx = s->ctx;
  s->rels.ctx = ctx;
  s->rels.nbrs = &s->nbrs;
  s->rels.origin = s->origin;
  s->rels.mwait_changed = swarm_on_mwait_changed;
  s->rels.mwait_arg = s;
  s->downloads.ctx = ctx;
  s->downloads.arg = s;
  s->downloads.ban = swarm_on_download_ban;
  s->downloads.reported = swarm_kick;
  peer_picker_init(&s->picker, ctx, &s->nbrs, &s->rels, s->origin, &s->tracker);
  peer_uploads_init(&s->uploads, ctx, &s->rels, s->origin);
  peer_neighbors_init(&s->nbrs, ctx, &s->bans, &s->rels, &s->picker,
                      &s->uploads, &s->downloads);
  peer_addrbook_init(&s->book, ctx, &s->nbrs, &s->bans, &s->rels, &s->picker);
  s->fetch_events = (peer_fetch_listener_t){
      .arg = s,
      .kick = swarm_kick,
      .chunk_done = swarm_on_chunk_done,
      .chunk_live = swarm_on_chunk_live,
      .chunk_progress = swarm_on_chunk_progress,
      .file_complete = swarm_on_file_complete,
  };
  peer_files_listen(s->files, &s->fetch_events);
  peer_files_set_origin_gate(s->files, peer_picker_origin_next, &s->picker);
}

int peer_swarm_new(peer_ctx_t *ctx, peer_files_t *files, peer_origin_t *origin,
                   const peer_swarm_hooks_t *hooks, peer_swarm_t **out) {
  const peer_settings_t *cfg = ctx->cfg;
  int rc;
  peer_swarm_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return -ENOMEM;
  s->ctx = ctx;
  s->files = files;
  s->origin = origin;
  if (hooks != NULL)
    s->hooks = *hooks;
  s->tracker.down_ms = uv_now(ctx->loop);
  swarm_wire(s);
  uv_timer_init(ctx->loop, &s->tick);
  s->tick.data = s;
  s->tick_open = 1;
  uv_timer_init(ctx->loop, &s->mwait);
  s->mwait.data = s;
  s->mwait_open = 1;
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
  s->nbrs.wcfg.listen_port = s->port;
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

static void swarm_listener_closed(uv_handle_t *h) {
  peer_swarm_t *s = h->data;
  s->listening = 0;
}

static void swarm_tick_closed(uv_handle_t *h) {
  peer_swarm_t *s = h->data;
  s->tick_open = 0;
}

static void swarm_mwait_closed(uv_handle_t *h) {
  peer_swarm_t *s = h->data;
  s->mwait_open = 0;
}

void peer_swarm_stop(peer_swarm_t *s) {
  if (s == NULL || s->stopping)
    return;
  s->stopping = 1;
  s->picker.stopping = true;
  s->uploads.stopping = true;
  s->rels.stopping = true;
  s->nbrs.stopping = true;
  if (s->listening && !uv_is_closing((uv_handle_t *)&s->listener))
    uv_close((uv_handle_t *)&s->listener, swarm_listener_closed);
  if (s->tick_open && !uv_is_closing((uv_handle_t *)&s->tick))
    uv_close((uv_handle_t *)&s->tick, swarm_tick_closed);
  if (s->mwait_open && !uv_is_closing((uv_handle_t *)&s->mwait))
    uv_close((uv_handle_t *)&s->mwait, swarm_mwait_closed);
  peer_trackers_close(s->tl);
  s->tl = NULL;
  s->rels.tl = NULL;
  s->tracker.configured = false;
  s->tracker.trackers = NULL;
  peer_neighbors_stop(&s->nbrs);
  /* Releases waiting for a manifest from neighbours get their answer. */
  swarm_rels_stop(&s->rels);
}

int peer_swarm_busy(const peer_swarm_t *s) {
  return s->listening || s->tick_open || s->mwait_open || s->nbrs.count > 0 ||
         s->downloads.alive > 0 || s->uploads.alive > 0;
}

void peer_swarm_free(peer_swarm_t *s) {
  if (s == NULL)
    return;
  assert(!peer_swarm_busy(s));
  peer_files_unlisten(s->files, &s->fetch_events);
  peer_files_set_origin_gate(s->files, NULL, NULL);
  while (s->rels.head != NULL)
    swarm_rel_free(s->rels.head);
  peer_neighbors_cleanup(&s->nbrs);
  free(s);
}

void peer_swarm_stats(const peer_swarm_t *s, peer_swarm_stats_t *out) {
  memset(out, 0, sizeof(*out));
  out->neighbors = s->nbrs.nready;
  out->releases = s->rels.count;
  out->uploads = s->uploads.uploads;
  out->bans = peer_bans_count(&s->bans, uv_now(s->ctx->loop));
  out->tracker_up = s->tracker.up;
  uint64_t now = uv_now(s->ctx->loop);
  for (const peer_swarm_rel_t *r = s->rels.head; r != NULL; r = r->next)
    out->stalled += swarm_rel_stalled_for(r, now) != 0;
}

uint64_t peer_swarm_rel_stalled(peer_swarm_t *s, const ws_hash_t *digest) {
  const peer_swarm_rel_t *rel = swarm_rel_find(&s->rels, digest->b);
  return rel == NULL ? 0 : swarm_rel_stalled_for(rel, uv_now(s->ctx->loop));
}

/* ---- releases ----------------------------------------------------------- */

int peer_swarm_manifest_fetch(peer_swarm_t *s, const ws_hash_t *digest,
                              const char *uri, peer_swarm_manifest_fn cb,
                              void *arg) {
  int rc = swarm_rel_manifest_fetch(&s->rels, digest, uri, cb, arg);
  if (rc == 0)
    swarm_mwait_arm(s);
  return rc;
}

void peer_swarm_rel_fetching(peer_swarm_t *s, const ws_hash_t *digest,
                             const char *uri, const ws_manifest_t *m,
                             const char *mbytes, size_t mlen,
                             peer_file_t *const *files, uint32_t nfiles) {
  if (swarm_rel_fetching(&s->rels, digest, uri, m, mbytes, mlen, files, nfiles))
    peer_picker_fill_all(&s->picker);
}

void peer_swarm_rel_ready(peer_swarm_t *s, const ws_hash_t *digest,
                          ws_manifest_t *m, char *mbytes, size_t mlen) {
  swarm_rel_ready(&s->rels, digest, m, mbytes, mlen);
}

void peer_swarm_rel_gone(peer_swarm_t *s, const ws_hash_t *digest) {
  swarm_rel_gone(&s->rels, digest);
}

void peer_swarm_seed_ready(peer_swarm_t *s, const ws_hash_t *digest) {
  swarm_rel_seed_load(&s->rels, digest);
}

void peer_swarm_add_ready(peer_swarm_t *s, ws_manifest_t *m, char *bytes,
                          size_t len) {
  swarm_rel_add_ready(&s->rels, m, bytes, len);
}

void peer_swarm_running(peer_swarm_t *s) {
  if (s->tl != NULL)
    peer_trackers_presence_now(s->tl);
}
