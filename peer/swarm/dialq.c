/* dialq.c - the dial queue (dialq.h).
 *
 * Owns: its table. Thread: loop thread.
 */
#include <stdio.h>
#include <string.h>

#include "swarm/dialq.h"
#include "ws_log.h"

void peer_dialq_init(peer_dialq_t *q, peer_ctx_t *ctx, peer_neighbors_t *nbrs,
                     const peer_bans_t *bans, peer_dial_fn dial,
                     void *dial_arg) {
  memset(q, 0, sizeof(*q));
  q->ctx = ctx;
  q->nbrs = nbrs;
  q->bans = bans;
  q->dial = dial;
  q->dial_arg = dial_arg;
}

static int dialq_find(const peer_dialq_t *q, const ws_peer_info_t *p) {
  for (uint32_t i = 0; i < q->n; i++) {
    const peer_dial_cand_t *e = &q->e[i];
    if (strcmp(e->node_id, p->node_id) == 0 && strcmp(e->host, p->host) == 0 &&
        e->port == p->port)
      return (int)i;
  }
  return -1;
}

/* Drops the candidates not named within PEER_DIALQ_TTL_MS. */
static void dialq_expire(peer_dialq_t *q, uint64_t now_ms) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < q->n; i++) {
    if (now_ms - q->e[i].named_ms <= PEER_DIALQ_TTL_MS)
      q->e[k++] = q->e[i];
  }
  q->n = k;
}

void peer_dialq_offer(peer_dialq_t *q, const ws_peer_info_t *peers, uint32_t n,
                      uint64_t now_ms) {
  const char *self = q->ctx->cfg->node_id;
  /* Walked backwards: each goes to the front, so the tracker's first ends
   * first. */
  for (uint32_t k = n; k-- > 0;) {
    const ws_peer_info_t *p = &peers[k];
    if (p->port == 0 || p->node_id[0] == '\0' || p->host[0] == '\0' ||
        strcmp(p->node_id, self) == 0)
      continue;
    peer_dial_cand_t c;
    int i = dialq_find(q, p);
    if (i >= 0) {
      c = q->e[i];
    } else {
      memset(&c, 0, sizeof(c));
      snprintf(c.node_id, sizeof(c.node_id), "%s", p->node_id);
      snprintf(c.host, sizeof(c.host), "%s", p->host);
      c.port = p->port;
      /* Full: the last (named longest ago) goes. */
      i = q->n < PEER_DIALQ_MAX ? (int)q->n++ : (int)q->n - 1;
    }
    c.named_ms = now_ms;
    memmove(&q->e[1], &q->e[0], (size_t)i * sizeof(q->e[0]));
    q->e[0] = c;
  }
  dialq_expire(q, now_ms);
}

uint32_t peer_dialq_run(peer_dialq_t *q, uint64_t now_ms) {
  peer_neighbors_t *set = q->nbrs;
  uint32_t dialed = 0;
  if (set->stopping)
    return 0;
  dialq_expire(q, now_ms);
  for (uint32_t i = 0; i < q->n; i++) {
    peer_dial_cand_t *e = &q->e[i];
    if (!peer_neighbors_room_dial(set, now_ms))
      break;
    if (e->next_dial_ms > now_ms ||
        peer_neighbors_knows(set, e->node_id, e->host) ||
        peer_bans_check(q->bans, now_ms, e->node_id, e->host, e->port))
      continue;
    e->next_dial_ms = now_ms + PEER_DIALQ_REDIAL_MS;
    int rc = q->dial(q->dial_arg, e->host, e->port, e->node_id);
    if (rc != 0) {
      WS_LOGW("peer %s at %s:%u: cannot connect: %s", e->node_id, e->host,
              e->port, ws_strerror(rc));
      continue;
    }
    dialed++;
  }
  return dialed;
}
