/* neighbor.c - one neighbour (neighbor.h): its state, what it announced
 * (have-bitfields, chunks arriving at it, chunks it refused), sending to it,
 * closing it, and the timer of its rate-limit waits.
 *
 * Nothing reaches a neighbour before its handshake proved the cluster key
 * (wire_conn sends only HELLO/AUTH until then), so a client without the key
 * learns no digest, no chunk and no peer.
 *
 * Owns: the neighbours' bitfields. Thread: loop thread.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "swarm/neighbor.h"
#include "ws_log.h"

static const char *neighbor_state_name(peer_neighbor_state_t st) {
  static const char *const names[PEER_NEIGHBOR_STATE_LAST] = {
      "connecting", "ready", "closing"};
  return st < PEER_NEIGHBOR_STATE_LAST ? names[st] : "?";
}

void peer_neighbor_set_state(peer_neighbor_t *n, peer_neighbor_state_t to) {
  static const uint8_t
      legal[PEER_NEIGHBOR_STATE_LAST][PEER_NEIGHBOR_STATE_LAST] = {
          [PEER_NEIGHBOR_CONNECTING] =
              {[PEER_NEIGHBOR_READY] = 1, [PEER_NEIGHBOR_CLOSING] = 1},
          [PEER_NEIGHBOR_READY] = {[PEER_NEIGHBOR_CLOSING] = 1},
      };
  assert(legal[n->state][to]);
  WS_LOGD("nbr#%llu %s: %s -> %s", (unsigned long long)n->id, n->node_id,
          neighbor_state_name(n->state), neighbor_state_name(to));
  if (n->state == PEER_NEIGHBOR_READY)
    n->set->nready--;
  if (n->state == PEER_NEIGHBOR_CONNECTING && !n->initiator)
    n->set->npreauth_in--;
  if (to == PEER_NEIGHBOR_READY)
    n->set->nready++;
  n->state = to;
}

/* ---- what it announced -------------------------------------------------- */

peer_neighbor_rel_t *peer_neighbor_rel_find(peer_neighbor_t *n,
                                            const uint8_t *digest) {
  for (uint32_t i = 0; i < n->nrels; i++) {
    if (memcmp(n->rels[i].digest, digest, WS_PROTO_DIGEST_LEN) == 0)
      return &n->rels[i];
  }
  return NULL;
}

peer_neighbor_rel_t *peer_neighbor_rel_get(peer_neighbor_t *n,
                                           const uint8_t *digest) {
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, digest);
  if (r != NULL || n->nrels == PEER_NBR_RELEASES_MAX)
    return r;
  r = &n->rels[n->nrels++];
  memset(r, 0, sizeof(*r));
  memcpy(r->digest, digest, WS_PROTO_DIGEST_LEN);
  return r;
}

int peer_neighbor_rel_set(peer_neighbor_t *n, peer_neighbor_rel_t *r,
                          const ws_bitfield_msg_t *b) {
  ws_bitfield_t bf;
  int rc = ws_bitfield_from_bytes(&bf, b->total_chunks, b->bits,
                                  ws_bitfield_nbytes(b->total_chunks));
  if (rc != 0) {
    peer_neighbor_close(n, WS_BYE_PROTOCOL);
    return rc;
  }
  ws_bitfield_free(&r->have);
  r->have = bf;
  r->live_ok = b->live;
  r->mux_ok = b->live && b->mux;
  r->nlive = r->live_next = 0;
  r->nhidden = 0; /* its new word on every chunk */
  return 0;
}

int peer_neighbor_rel_live(const peer_neighbor_rel_t *r, uint32_t g) {
  for (uint32_t i = 0; i < r->nlive; i++) {
    if (r->live[i] == g)
      return 1;
  }
  return 0;
}

/* Forgets g as arriving at r (a plain HAVE, a refusal). */
static void neighbor_live_forget(peer_neighbor_rel_t *r, uint32_t g) {
  for (uint32_t i = 0; i < r->nlive; i++) {
    if (r->live[i] == g) {
      r->live[i] = r->live[--r->nlive];
      r->live_next = r->nlive;
      return;
    }
  }
}

void peer_neighbor_rel_have(peer_neighbor_rel_t *r, const ws_have_t *h) {
  ws_bitfield_set(&r->have, h->chunk);
  if (!h->live) {
    neighbor_live_forget(r, h->chunk);
  } else if (!peer_neighbor_rel_live(r, h->chunk)) {
    r->live[r->live_next] = h->chunk;
    if (r->nlive < PEER_LIVE_MAX)
      r->nlive++;
    r->live_next = r->nlive < PEER_LIVE_MAX
                       ? r->nlive
                       : (r->live_next + 1) % PEER_LIVE_MAX;
  }
}

int peer_neighbor_has(peer_neighbor_t *n, const uint8_t *digest, uint32_t total,
                      uint32_t g) {
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, digest);
  return r != NULL && r->have.nbits == total && ws_bitfield_test(&r->have, g);
}

void peer_neighbor_hide(peer_neighbor_t *n, const uint8_t *digest, uint32_t g) {
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(n, digest);
  if (r == NULL || g >= r->have.nbits || !ws_bitfield_test(&r->have, g))
    return;
  ws_bitfield_clear(&r->have, g);
  if (peer_neighbor_rel_live(r, g)) {
    neighbor_live_forget(r, g);
    return;
  }
  if (r->nhidden < PEER_REJECT_HIDE_MAX) {
    r->hidden[r->nhidden].chunk = g;
    r->hidden[r->nhidden].until_ms =
        uv_now(n->set->ctx->loop) + PEER_REJECT_HIDE_MS;
    r->nhidden++;
  }
}

void peer_neighbor_unhide(peer_neighbor_t *n, uint64_t now_ms) {
  for (uint32_t k = 0; k < n->nrels; k++) {
    peer_neighbor_rel_t *r = &n->rels[k];
    for (uint32_t h = 0; h < r->nhidden;) {
      if (r->hidden[h].until_ms > now_ms) {
        h++;
        continue;
      }
      if (r->hidden[h].chunk < r->have.nbits)
        ws_bitfield_set(&r->have, r->hidden[h].chunk);
      r->hidden[h] = r->hidden[--r->nhidden];
    }
  }
}

/* ---- sending, closing, waiting ------------------------------------------ */

int peer_neighbor_send(peer_neighbor_t *n, const ws_msg_t *m) {
  if (n->state != PEER_NEIGHBOR_READY || n->c == NULL ||
      !wire_conn_is_open(n->c))
    return -ENOTCONN;
  int rc = wire_conn_send(n->c, m);
  if (rc == WS_ELIMIT) {
    n->want_drain = true;
  } else if (rc != 0) {
    WS_LOGW("nbr#%llu %s: send %s: %s", (unsigned long long)n->id, n->node_id,
            ws_msg_type_name(m->type), ws_strerror(rc));
    peer_neighbor_close(n, WS_BYE_PROTOCOL);
  }
  return rc;
}

void peer_neighbor_close(peer_neighbor_t *n, ws_bye_reason_t reason) {
  if (n->state == PEER_NEIGHBOR_CLOSING || n->c == NULL)
    return;
  peer_neighbor_set_state(n, PEER_NEIGHBOR_CLOSING);
  wire_conn_goodbye(n->c, reason);
}

void peer_neighbor_timer_arm(peer_neighbor_t *n, uint64_t ms) {
  if (n->state == PEER_NEIGHBOR_CLOSING)
    return;
  if (uv_is_active((uv_handle_t *)&n->timer) &&
      uv_timer_get_due_in(&n->timer) <= ms)
    return;
  uv_timer_start(&n->timer, n->set->on_timer, ms, 0);
}

void peer_neighbor_read_resume(void *arg) {
  peer_neighbor_t *n = arg;
  n->read_paused_pool = false;
  peer_neighbor_pause_note(n);
  if (n->state == PEER_NEIGHBOR_READY && !n->read_paused_rate)
    wire_conn_read_resume(n->c);
}

void peer_neighbor_read_pause_pool(peer_neighbor_t *n) {
  n->read_paused_pool = true;
  peer_neighbor_pause_note(n);
  wire_conn_read_pause(n->c);
}

void peer_neighbor_pause_note(peer_neighbor_t *n) {
  bool now_paused = n->read_paused_pool || n->read_paused_rate;
  uint64_t now = uv_now(n->set->ctx->loop);
  if (now_paused == n->paused_now)
    return;
  if (now_paused)
    n->paused_since_ms = now;
  else
    n->paused_ms += now - n->paused_since_ms;
  n->paused_now = now_paused;
}

uint64_t peer_neighbor_paused(const peer_neighbor_t *n, uint64_t now_ms) {
  return n->paused_ms + (n->paused_now ? now_ms - n->paused_since_ms : 0);
}

int peer_neighbor_missed(peer_neighbor_t *n, uint64_t now_ms) {
  n->set->ctx->counters.peer_deadline_misses++;
  if (n->busy_until_ms < now_ms + PEER_NBR_BENCH_MS)
    n->busy_until_ms = now_ms + PEER_NBR_BENCH_MS;
  return ++n->misses >= PEER_NBR_MISSES_MAX;
}

uint32_t peer_neighbor_arriving(const peer_neighbor_t *n) {
  uint32_t k = n->whole.open;
  for (uint32_t i = 0; i < WS_MUX_MAX; i++)
    k += n->pcs[i].open;
  return k;
}

int peer_neighbor_idle(const peer_neighbor_t *n, uint64_t now_ms) {
  if (n->state != PEER_NEIGHBOR_READY || n->in != PEER_NEIGHBOR_IN_NONE ||
      n->nups > 0 || n->mani_open || n->sq_len > 0 ||
      peer_neighbor_arriving(n) > 0)
    return 0;
  /* Waiting for one of our upload slots is not idle. */
  if (n->waiting && now_ms - n->wait_last_ms < PEER_NBR_IDLE_MS)
    return 0;
  return now_ms - n->useful_ms >= PEER_NBR_IDLE_MS;
}

void peer_neighbor_slot_wait(peer_neighbor_t *n, uint64_t now_ms) {
  n->waiting = true;
  n->wait_last_ms = now_ms;
}

/* ---- the set ------------------------------------------------------------ */

int peer_neighbors_slot_waiter(const peer_neighbor_t *n, uint64_t now_ms) {
  for (const peer_neighbor_t *o = n->set->head; o != NULL; o = o->next) {
    if (o != n && o->waiting && o->nups == 0 &&
        o->state == PEER_NEIGHBOR_READY &&
        now_ms - o->wait_last_ms <= PEER_SLOT_HOLD_MS)
      return 1;
  }
  return 0;
}

peer_neighbor_t *peer_neighbors_find_ready(peer_neighbors_t *set,
                                           const char *node_id,
                                           const char *host,
                                           const peer_neighbor_t *except) {
  for (peer_neighbor_t *o = set->head; o != NULL; o = o->next) {
    if (o != except && o->state == PEER_NEIGHBOR_READY &&
        strcmp(o->node_id, node_id) == 0 && strcmp(o->host, host) == 0)
      return o;
  }
  return NULL;
}

int peer_neighbors_knows(const peer_neighbors_t *set, const char *node_id,
                         const char *host) {
  for (const peer_neighbor_t *n = set->head; n != NULL; n = n->next) {
    if ((strcmp(n->node_id, node_id) == 0 || strcmp(n->expect, node_id) == 0) &&
        strcmp(n->host, host) == 0)
      return 1;
  }
  return 0;
}

int peer_neighbors_other_holds(const peer_neighbors_t *set,
                               const peer_neighbor_t *n, const uint8_t *digest,
                               uint32_t g) {
  for (peer_neighbor_t *o = set->head; o != NULL; o = o->next) {
    const peer_neighbor_rel_t *r;
    if (o == n || o->state != PEER_NEIGHBOR_READY ||
        (r = peer_neighbor_rel_find(o, digest)) == NULL || g >= r->have.nbits)
      continue;
    if (ws_bitfield_test(&r->have, g))
      return 1;
  }
  return 0;
}

peer_neighbor_t *peer_neighbors_idlest(peer_neighbors_t *set, uint64_t now_ms) {
  peer_neighbor_t *best = NULL;
  for (peer_neighbor_t *n = set->head; n != NULL; n = n->next) {
    if (peer_neighbor_idle(n, now_ms) &&
        (best == NULL || n->useful_ms < best->useful_ms))
      best = n;
  }
  return best;
}

int peer_neighbors_room(peer_neighbors_t *set, uint64_t now_ms) {
  uint32_t max = set->ctx->cfg->max_neighbors;
  if (set->count < max)
    return 1;
  return set->count < max + PEER_NBR_SPARE &&
         peer_neighbors_idlest(set, now_ms) != NULL;
}

uint32_t peer_neighbors_dialed(const peer_neighbors_t *set,
                               const peer_neighbor_t *except) {
  uint32_t k = 0;
  for (const peer_neighbor_t *n = set->head; n != NULL; n = n->next) {
    if (n != except && n->initiator && n->state != PEER_NEIGHBOR_CLOSING)
      k++;
  }
  return k;
}

int peer_neighbors_room_dial(peer_neighbors_t *set, uint64_t now_ms) {
  uint32_t dialed = peer_neighbors_dialed(set, NULL);
  uint32_t max = set->ctx->cfg->max_neighbors;
  uint32_t share = max / PEER_NBR_DIAL_SHARE;
  if (dialed < PEER_NBR_DIALED_MIN)
    return 1;
  if (dialed < share)
    return peer_neighbors_room(set, now_ms);
  /* Our share is dialed: the other slots wait for nodes that dial us,
   * for a while. */
  if (set->count >= max) {
    set->short_since_ms = 0;
    return 0;
  }
  if (set->short_since_ms == 0)
    set->short_since_ms = now_ms != 0 ? now_ms : 1;
  return now_ms - set->short_since_ms >= PEER_NBR_INBOUND_WAIT_MS;
}

uint32_t peer_neighbors_holding(const peer_neighbors_t *set,
                                const uint8_t *digest, uint32_t total,
                                uint32_t g) {
  uint32_t a = 0;
  for (peer_neighbor_t *n = set->head; n != NULL; n = n->next) {
    if (n->state == PEER_NEIGHBOR_READY &&
        peer_neighbor_has(n, digest, total, g))
      a++;
  }
  return a;
}
