/* trackers.c - p2pd's trackers (see trackers.h): rendezvous hashing of
 * releases over the tracker list, one tracker link per tracker, and the
 * moves of releases between them. Loop thread only.
 *
 * Owns: the links (tracker_link.h), a uv_timer_t that checks for moves
 * (only with two trackers or more), and a table of the releases tracked,
 * each with its own copy of what a full announce says (chunk count,
 * have-bitfield, uri, role) so that it can be announced again in full on
 * another link, its rendezvous order and the index of its link now.
 * Freed after peer_trackers_close once the timer's close callback ran (the
 * links free themselves).
 */
#include "swarm/trackers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ws_log.h"

typedef struct {
  peer_trackers_t *tr;
  unsigned idx;
  peer_tracker_link_t *tc;
  char addr[PEER_TRACKERS_ADDR_MAX + 1];
  peer_trackers_link_state_t st;
} trs_link_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t total;
  ws_bitfield_t have; /* nbits == total (empty while total == 0) */
  char *uri;
  ws_swarm_role_t role;
  unsigned cur; /* index of its link now */
  uint8_t order[PEER_TRACKERS_MAX];
} trs_rel_t;

/* The presence digest takes one slot of every link's table. */
#define TRS_RELS_MAX (PEER_TRACKER_LINK_RELEASES_MAX - 1u)

struct peer_trackers_s {
  uv_loop_t *loop;
  trs_link_t links[PEER_TRACKERS_MAX];
  unsigned n;
  peer_trackers_cbs_t cbs;
  trs_rel_t *rels[TRS_RELS_MAX];
  uint32_t nrels;
  uv_timer_t timer;
  bool timer_on;
  bool closing;
};

static const uint8_t k_presence[WS_PROTO_DIGEST_LEN];

/* ---- rendezvous hashing -------------------------------------------------- */

void peer_trackers_addr(const peer_tracker_link_cfg_t *cfg,
                        char out[PEER_TRACKERS_ADDR_MAX + 1]) {
  bool v6 = strchr(cfg->host, ':') != NULL;
  snprintf(out, PEER_TRACKERS_ADDR_MAX + 1, "%s%s%s:%u", v6 ? "[" : "",
           cfg->host, v6 ? "]" : "", (unsigned)cfg->port);
}

int peer_trackers_parse(const char *list, const peer_tracker_link_cfg_t *base,
                        peer_tracker_link_cfg_t *cfgs, unsigned max,
                        unsigned *n) {
  char one[PEER_TRACKERS_ADDR_MAX + 1];
  char addrs[PEER_TRACKERS_MAX][PEER_TRACKERS_ADDR_MAX + 1];
  const char *p = list;

  *n = 0;
  if (list == NULL || max > PEER_TRACKERS_MAX)
    return WS_EUSAGE;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);

    while (len > 0 && (*p == ' ' || *p == '\t')) {
      p++;
      len--;
    }
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
      len--;
    if (len == 0 || len > PEER_TRACKERS_ADDR_MAX || *n == max)
      return WS_EUSAGE;
    memcpy(one, p, len);
    one[len] = '\0';
    cfgs[*n] = *base;
    if (peer_tracker_link_cfg_addr(&cfgs[*n], one) != 0)
      return WS_EUSAGE;
    peer_trackers_addr(&cfgs[*n], addrs[*n]);
    for (unsigned i = 0; i < *n; i++) {
      if (strcmp(addrs[i], addrs[*n]) == 0)
        return WS_EUSAGE; /* twice: it would count double */
    }
    (*n)++;
    if (end == NULL)
      return 0;
    p = end + 1;
  }
}

uint64_t peer_trackers_score(const char *addr, const uint8_t digest[32]) {
  crypto_generichash_state st;
  uint8_t h[8];
  uint64_t v = 0;

  crypto_generichash_init(&st, NULL, 0, sizeof(h));
  crypto_generichash_update(&st, digest, WS_PROTO_DIGEST_LEN);
  crypto_generichash_update(&st, (const uint8_t *)addr, strlen(addr));
  crypto_generichash_final(&st, h, sizeof(h));
  for (unsigned i = 0; i < sizeof(h); i++)
    v = v << 8 | h[i];
  return v;
}

void peer_trackers_rank(const char *const *addrs, unsigned n,
                        const uint8_t digest[32], uint8_t *order) {
  uint64_t score[PEER_TRACKERS_MAX];

  for (unsigned i = 0; i < n && i < PEER_TRACKERS_MAX; i++) {
    score[i] = peer_trackers_score(addrs[i], digest);
    order[i] = (uint8_t)i;
  }
  /* Insertion sort: n is at most PEER_TRACKERS_MAX. */
  for (unsigned i = 1; i < n && i < PEER_TRACKERS_MAX; i++) {
    uint8_t x = order[i];
    unsigned j = i;

    while (j > 0 && (score[order[j - 1]] < score[x] ||
                     (score[order[j - 1]] == score[x] &&
                      strcmp(addrs[order[j - 1]], addrs[x]) > 0))) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = x;
  }
}

unsigned peer_trackers_choose(const uint8_t *order, unsigned n,
                              const peer_trackers_link_state_t *links, int cur,
                              uint64_t now_ms, uint32_t grace_ms) {
  for (unsigned k = 0; k < n; k++) {
    const peer_trackers_link_state_t *l = &links[order[k]];
    bool settled = now_ms - l->since_ms >= grace_ms;

    if ((int)order[k] == cur) {
      if (l->up || !settled)
        return (unsigned)cur; /* up, or maybe only a blip */
    } else if (l->up && settled) {
      return order[k]; /* ranked above cur, or cur is gone */
    }
  }
  return cur >= 0 ? (unsigned)cur : order[0];
}

/* ---- the release table --------------------------------------------------- */

static trs_rel_t *trs_find(const peer_trackers_t *tr, const uint8_t *digest,
                           uint32_t *idx) {
  for (uint32_t i = 0; i < tr->nrels; i++) {
    if (memcmp(tr->rels[i]->digest, digest, WS_PROTO_DIGEST_LEN) == 0) {
      if (idx != NULL)
        *idx = i;
      return tr->rels[i];
    }
  }
  return NULL;
}

static void trs_rel_free(trs_rel_t *r) {
  ws_bitfield_free(&r->have);
  free(r->uri);
  free(r);
}

static void trs_states(const peer_trackers_t *tr,
                       peer_trackers_link_state_t *out) {
  for (unsigned i = 0; i < tr->n; i++)
    out[i] = tr->links[i].st;
}

static void trs_order(const peer_trackers_t *tr, const uint8_t *digest,
                      uint8_t *order) {
  const char *addrs[PEER_TRACKERS_MAX];

  for (unsigned i = 0; i < tr->n; i++)
    addrs[i] = tr->links[i].addr;
  peer_trackers_rank(addrs, tr->n, digest, order);
}

/* The full state of r on its link now. */
static int trs_announce(peer_trackers_t *tr, trs_rel_t *r) {
  return peer_tracker_link_track(tr->links[r->cur].tc, r->digest, r->total,
                                 r->total > 0 ? &r->have : NULL, r->uri,
                                 r->role);
}

/* Moves r to link to: STOPPED (or forgotten) on the old one, announced in
 * full on the new one; its leases are void. */
static void trs_move(peer_trackers_t *tr, trs_rel_t *r, unsigned to) {
  char ds[2 * 8 + 1];
  unsigned from = r->cur;
  int rc;

  for (unsigned i = 0; i < 8; i++)
    snprintf(ds + 2 * i, 3, "%02x", r->digest[i]);
  rc = peer_tracker_link_untrack(tr->links[from].tc, r->digest);
  if (rc != 0)
    WS_LOGD("trackers: untrack at %s: %s", tr->links[from].addr,
            ws_strerror(rc));
  r->cur = to;
  rc = trs_announce(tr, r);
  WS_LOGI("release sha256-%s...: tracker %s %s, now %s%s%s", ds,
          tr->links[from].addr, tr->links[from].st.up ? "up" : "down",
          tr->links[to].addr, rc != 0 ? ": " : "",
          rc != 0 ? ws_strerror(rc) : "");
  if (tr->cbs.on_leases_lost != NULL)
    tr->cbs.on_leases_lost(tr->cbs.arg, r->digest);
}

static void trs_on_timer(uv_timer_t *t) {
  peer_trackers_t *tr = t->data;
  peer_trackers_link_state_t st[PEER_TRACKERS_MAX];
  uint64_t now = uv_now(tr->loop);

  if (tr->closing)
    return;
  trs_states(tr, st);
  for (uint32_t i = 0; i < tr->nrels; i++) {
    trs_rel_t *r = tr->rels[i];
    unsigned to = peer_trackers_choose(r->order, tr->n, st, (int)r->cur, now,
                                       PEER_TRACKERS_MOVE_MS);

    if (to != r->cur)
      trs_move(tr, r, to);
  }
}

/* ---- link callbacks ------------------------------------------------------ */

static void trs_on_peers(void *arg, const uint8_t *digest,
                         const ws_peer_info_t *peers, uint32_t n,
                         const char (*tree)[WS_NODE_ID_MAX + 1],
                         uint32_t ntree) {
  peer_trackers_t *tr = ((trs_link_t *)arg)->tr;

  if (tr->cbs.on_peers != NULL)
    tr->cbs.on_peers(tr->cbs.arg, digest, peers, n, tree, ntree);
}

static void trs_on_leases(void *arg, const uint8_t *digest,
                          const uint32_t *chunks, uint32_t n, uint32_t ttl_ms,
                          uint32_t streams) {
  trs_link_t *l = arg;
  peer_trackers_t *tr = l->tr;
  trs_rel_t *r = trs_find(tr, digest, NULL);

  /* Only the release's tracker leases its chunks. */
  if (r == NULL || r->cur != l->idx || tr->cbs.on_leases == NULL)
    return;
  tr->cbs.on_leases(tr->cbs.arg, digest, chunks, n, ttl_ms, streams);
}

static void trs_on_wanted(void *arg, const uint8_t *digest, const char *uri) {
  peer_trackers_t *tr = ((trs_link_t *)arg)->tr;

  if (tr->cbs.on_wanted != NULL)
    tr->cbs.on_wanted(tr->cbs.arg, digest, uri);
}

static void trs_on_nodes(void *arg, const ws_peer_info_t *nodes, uint32_t n) {
  peer_trackers_t *tr = ((trs_link_t *)arg)->tr;

  if (tr->cbs.on_nodes != NULL)
    tr->cbs.on_nodes(tr->cbs.arg, nodes, n);
}

static void trs_on_report(void *arg, const uint8_t *digest, ws_announce_t *a) {
  peer_trackers_t *tr = ((trs_link_t *)arg)->tr;

  if (tr->cbs.on_report != NULL)
    tr->cbs.on_report(tr->cbs.arg, digest, a);
}

static void trs_on_link(void *arg, bool up, int status) {
  trs_link_t *l = arg;
  peer_trackers_t *tr = l->tr;
  unsigned ups;

  l->st.up = up;
  l->st.since_ms = uv_now(tr->loop);
  if (!up) {
    /* Leases die with the link (the tracker forgets them with us). */
    for (uint32_t i = 0; i < tr->nrels && tr->cbs.on_leases_lost != NULL; i++) {
      if (tr->rels[i]->cur == l->idx)
        tr->cbs.on_leases_lost(tr->cbs.arg, tr->rels[i]->digest);
    }
  }
  if (tr->cbs.on_link != NULL) {
    ups = peer_trackers_up(tr, NULL);
    tr->cbs.on_link(tr->cbs.arg, l->addr, up, status, ups);
  }
}

/* ---- public -------------------------------------------------------------- */

int peer_trackers_new(uv_loop_t *loop, const peer_tracker_link_cfg_t *cfgs,
                      unsigned n, const peer_trackers_cbs_t *cbs,
                      peer_trackers_t **out) {
  peer_tracker_link_cbs_t lcbs = {
      .on_peers = trs_on_peers,
      .on_leases = trs_on_leases,
      .on_wanted = trs_on_wanted,
      .on_nodes = trs_on_nodes,
      .on_link = trs_on_link,
      .on_report = trs_on_report,
  };
  peer_trackers_t *tr;
  int rc = 0;

  if (loop == NULL || cfgs == NULL || cbs == NULL || n == 0 ||
      n > PEER_TRACKERS_MAX)
    return WS_EUSAGE;
  tr = calloc(1, sizeof(*tr));
  if (tr == NULL)
    return -ENOMEM;
  tr->loop = loop;
  tr->cbs = *cbs;
  for (unsigned i = 0; i < n; i++) {
    trs_link_t *l = &tr->links[i];

    l->tr = tr;
    l->idx = i;
    l->st.since_ms = uv_now(loop);
    peer_trackers_addr(&cfgs[i], l->addr);
    lcbs.arg = l;
    rc = peer_tracker_link_new(loop, &cfgs[i], &lcbs, &l->tc);
    if (rc != 0)
      break;
    tr->n++;
    /* Presence: every tracker's wanted set reaches us (trackers.h). */
    rc = peer_tracker_link_track(l->tc, k_presence, 0, NULL, NULL,
                                 WS_SWARM_LEECH);
    if (rc != 0)
      break;
  }
  if (rc != 0) {
    for (unsigned i = 0; i < tr->n; i++)
      peer_tracker_link_close(tr->links[i].tc);
    free(tr);
    return rc;
  }
  uv_timer_init(loop, &tr->timer);
  tr->timer.data = tr;
  tr->timer_on = true;
  if (n > 1)
    uv_timer_start(&tr->timer, trs_on_timer, PEER_TRACKERS_CHECK_MS,
                   PEER_TRACKERS_CHECK_MS);
  *out = tr;
  return 0;
}

/* Copies the announce state into r (replacing what it had). */
static int trs_rel_set(trs_rel_t *r, uint32_t total, const ws_bitfield_t *have,
                       const char *uri, ws_swarm_role_t role) {
  ws_bitfield_t bf = {0};
  char *u = NULL;
  int rc = 0;

  if (total > 0)
    rc = have != NULL ? ws_bitfield_from_bytes(&bf, total, have->bits,
                                               ws_bitfield_nbytes(total))
                      : ws_bitfield_init(&bf, total);
  if (rc != 0)
    return rc;
  if (uri != NULL && (u = strdup(uri)) == NULL) {
    ws_bitfield_free(&bf);
    return -ENOMEM;
  }
  ws_bitfield_free(&r->have);
  free(r->uri);
  r->have = bf;
  r->uri = u;
  r->total = total;
  r->role = role;
  return 0;
}

int peer_trackers_track(peer_trackers_t *tr, const uint8_t digest[32],
                        uint32_t total_chunks, const ws_bitfield_t *have,
                        const char *uri, ws_swarm_role_t role) {
  peer_trackers_link_state_t st[PEER_TRACKERS_MAX];
  trs_rel_t *r;
  bool fresh = false;
  int rc;

  if (tr->closing || total_chunks > WS_MAX_TOTAL_CHUNKS ||
      role >= WS_SWARM_LAST || (have != NULL && have->nbits != total_chunks) ||
      (uri != NULL && strlen(uri) > WS_URI_MAX))
    return WS_EUSAGE;
  if (memcmp(digest, k_presence, WS_PROTO_DIGEST_LEN) == 0)
    return WS_EUSAGE; /* the links announce it themselves */
  r = trs_find(tr, digest, NULL);
  if (r == NULL) {
    if (tr->nrels == TRS_RELS_MAX)
      return WS_ELIMIT;
    if ((r = calloc(1, sizeof(*r))) == NULL)
      return -ENOMEM;
    memcpy(r->digest, digest, WS_PROTO_DIGEST_LEN);
    trs_order(tr, digest, r->order);
    trs_states(tr, st);
    r->cur = peer_trackers_choose(r->order, tr->n, st, -1, uv_now(tr->loop),
                                  PEER_TRACKERS_MOVE_MS);
    fresh = true;
  }
  rc = trs_rel_set(r, total_chunks, have, uri, role);
  if (rc == 0)
    rc = trs_announce(tr, r);
  if (rc != 0) {
    if (fresh)
      trs_rel_free(r);
    return rc;
  }
  if (fresh)
    tr->rels[tr->nrels++] = r;
  return 0;
}

int peer_trackers_have(peer_trackers_t *tr, const uint8_t digest[32],
                       uint32_t chunk) {
  return peer_trackers_have_from(tr, digest, chunk, NULL);
}

int peer_trackers_have_from(peer_trackers_t *tr, const uint8_t digest[32],
                            uint32_t chunk, const char *from) {
  trs_rel_t *r = trs_find(tr, digest, NULL);

  if (r == NULL)
    return WS_ENOTFOUND;
  if (chunk >= r->total)
    return WS_EUSAGE;
  ws_bitfield_set(&r->have, chunk);
  return peer_tracker_link_have_from(tr->links[r->cur].tc, digest, chunk, from);
}

int peer_trackers_soon(peer_trackers_t *tr, const uint8_t digest[32]) {
  trs_rel_t *r = trs_find(tr, digest, NULL);

  if (r == NULL)
    return WS_ENOTFOUND;
  return peer_tracker_link_soon(tr->links[r->cur].tc, digest);
}

int peer_trackers_done(peer_trackers_t *tr, const uint8_t digest[32]) {
  trs_rel_t *r = trs_find(tr, digest, NULL);

  if (r == NULL)
    return WS_ENOTFOUND;
  r->role = WS_SWARM_SEED; /* a move announces it as a seed */
  return peer_tracker_link_done(tr->links[r->cur].tc, digest);
}

int peer_trackers_untrack(peer_trackers_t *tr, const uint8_t digest[32]) {
  uint32_t idx;
  trs_rel_t *r = trs_find(tr, digest, &idx);
  int rc;

  if (r == NULL)
    return WS_ENOTFOUND;
  rc = peer_tracker_link_untrack(tr->links[r->cur].tc, digest);
  trs_rel_free(r);
  tr->rels[idx] = tr->rels[--tr->nrels];
  return rc;
}

int peer_trackers_lease_renew(peer_trackers_t *tr, const uint8_t digest[32],
                              const uint32_t *chunks, uint32_t n,
                              const uint32_t *done, uint32_t n_done) {
  trs_rel_t *r = trs_find(tr, digest, NULL);

  if (r == NULL)
    return WS_ENOTFOUND;
  return peer_tracker_link_lease_renew(tr->links[r->cur].tc, digest, chunks, n,
                                       done, n_done);
}

int peer_trackers_lease_release(peer_trackers_t *tr, const uint8_t digest[32],
                                const uint32_t *chunks, uint32_t n,
                                const uint32_t *done, uint32_t n_done) {
  trs_rel_t *r = trs_find(tr, digest, NULL);

  if (r == NULL)
    return WS_ENOTFOUND;
  return peer_tracker_link_lease_release(tr->links[r->cur].tc, digest, chunks,
                                         n, done, n_done);
}

int peer_trackers_down_since(const peer_trackers_t *tr,
                             const uint8_t digest[32], uint64_t *since_ms) {
  peer_trackers_link_state_t st[PEER_TRACKERS_MAX];
  uint8_t order[PEER_TRACKERS_MAX];
  const trs_rel_t *r = trs_find(tr, digest, NULL);
  unsigned i;

  if (r != NULL) {
    i = r->cur;
  } else {
    trs_order(tr, digest, order);
    trs_states(tr, st);
    i = peer_trackers_choose(order, tr->n, st, -1, uv_now(tr->loop),
                             PEER_TRACKERS_MOVE_MS);
  }
  if (tr->links[i].st.up)
    /* Up, but with no room for this release: as good as down for it. */
    return peer_tracker_link_refused_since(tr->links[i].tc, digest, since_ms);
  *since_ms = tr->links[i].st.since_ms;
  return 1;
}

unsigned peer_trackers_up(const peer_trackers_t *tr, unsigned *n) {
  unsigned ups = 0;

  for (unsigned i = 0; i < tr->n; i++)
    ups += tr->links[i].st.up ? 1u : 0u;
  if (n != NULL)
    *n = tr->n;
  return ups;
}

const char *peer_trackers_owner(const peer_trackers_t *tr,
                                const uint8_t digest[32]) {
  const trs_rel_t *r = trs_find(tr, digest, NULL);

  return r != NULL ? tr->links[r->cur].addr : NULL;
}

static void trs_on_timer_closed(uv_handle_t *h) {
  peer_trackers_t *tr = h->data;

  for (uint32_t i = 0; i < tr->nrels; i++)
    trs_rel_free(tr->rels[i]);
  free(tr);
}

void peer_trackers_close(peer_trackers_t *tr) {
  if (tr == NULL || tr->closing)
    return;
  tr->closing = true;
  for (unsigned i = 0; i < tr->n; i++)
    peer_tracker_link_close(tr->links[i].tc);
  uv_close((uv_handle_t *)&tr->timer, trs_on_timer_closed);
}

void peer_trackers_presence_now(peer_trackers_t *tr) {
  for (unsigned i = 0; i < tr->n; i++)
    if (peer_tracker_link_track(tr->links[i].tc, k_presence, 0, NULL, NULL,
                                WS_SWARM_LEECH) != 0)
      WS_LOGD("tracker %s: presence announce not queued", tr->links[i].addr);
}
