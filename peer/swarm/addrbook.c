/* addrbook.c - the swarm's address book and its dialing while a tracker
 * is down (addrbook.h).
 *
 * Owns: its table. Thread: loop thread.
 */
#include <stdio.h>
#include <string.h>

#include "swarm/addrbook.h"
#include "swarm/neighbor_conn.h"
#include "ws_log.h"

void peer_addrbook_init(peer_addrbook_t *b, peer_ctx_t *ctx,
                        peer_neighbors_t *nbrs, const peer_bans_t *bans,
                        peer_swarm_rels_t *rels, const peer_picker_t *picker) {
  memset(b, 0, sizeof(*b));
  b->ctx = ctx;
  b->nbrs = nbrs;
  b->bans = bans;
  b->rels = rels;
  b->picker = picker;
}

/* The entry for node_id, a free one, or the one heard of longest ago. */
static peer_addr_t *book_slot(peer_addrbook_t *b, const char *node_id) {
  peer_addr_t *old = NULL;
  for (uint32_t i = 0; i < b->n; i++) {
    if (strcmp(b->e[i].node_id, node_id) == 0)
      return &b->e[i];
    if (old == NULL || b->e[i].seen_ms < old->seen_ms)
      old = &b->e[i];
  }
  if (b->n < PEER_ADDRBOOK_MAX) {
    memset(&b->e[b->n], 0, sizeof(b->e[0]));
    return &b->e[b->n++];
  }
  return old;
}

void peer_addrbook_learn(peer_addrbook_t *b, const ws_peer_info_t *nodes,
                         uint32_t n, uint64_t now_ms) {
  const char *self = b->ctx->cfg->node_id;
  for (uint32_t i = 0; i < n; i++) {
    const ws_peer_info_t *p = &nodes[i];
    if (p->port == 0 || p->node_id[0] == '\0' || p->host[0] == '\0' ||
        strcmp(p->node_id, self) == 0)
      continue;
    peer_addr_t *e = book_slot(b, p->node_id);
    if (strcmp(e->node_id, p->node_id) != 0 || strcmp(e->host, p->host) != 0 ||
        e->port != p->port) {
      snprintf(e->node_id, sizeof(e->node_id), "%s", p->node_id);
      snprintf(e->host, sizeof(e->host), "%s", p->host);
      e->port = p->port;
      e->next_dial_ms = 0; /* new or moved: may be dialed at once */
    }
    e->seen_ms = now_ms;
  }
  b->ctx->counters.nodes_known = b->n;
}

/* 1 when the tracker of a resolving or fetching release is down: nobody
 * names its holders, so the book's nodes are dialed. */
static int book_wanted(const peer_addrbook_t *b, uint64_t now_ms) {
  for (peer_swarm_rel_t *rel = b->rels->head; rel != NULL; rel = rel->next) {
    if (rel->state != PEER_SWARM_REL_READY &&
        peer_picker_tracker_down(b->picker, rel, now_ms, NULL))
      return 1;
  }
  return 0;
}

uint32_t peer_addrbook_tick(peer_addrbook_t *b, uint64_t now_ms) {
  peer_neighbors_t *set = b->nbrs;
  uint32_t dialed = 0;
  if (b->n == 0 || set->stopping || !book_wanted(b, now_ms))
    return 0;
  for (uint32_t i = 0; i < b->n && dialed < PEER_ADDRBOOK_DIAL_MAX; i++) {
    peer_addr_t *e = &b->e[i];
    if (!peer_neighbors_room_dial(set, now_ms))
      break;
    if (e->next_dial_ms > now_ms ||
        peer_neighbors_knows(set, e->node_id, e->host) ||
        peer_bans_check(b->bans, now_ms, e->node_id, e->host, e->port))
      continue;
    e->next_dial_ms = now_ms + PEER_ADDRBOOK_REDIAL_MS;
    int rc = peer_neighbor_connect(set, e->host, e->port, e->node_id);
    if (rc != 0) {
      WS_LOGD("node %s at %s:%u: cannot connect: %s", e->node_id, e->host,
              e->port, ws_strerror(rc));
      continue;
    }
    WS_LOGD("node %s at %s:%u: dialed (tracker down)", e->node_id, e->host,
            e->port);
    dialed++;
  }
  return dialed;
}
