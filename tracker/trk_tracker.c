/* trk_tracker.c - glue of registry, swarms and wanted set; the operations
 * of trk_tracker.h.
 *
 * Owns the swarm table (trk_swarms.h) and, through the registry, every
 * peer. A swarm whose last member left stays listed as ended until the
 * table's sweep frees it; nobody joins an ended swarm. Loop thread only.
 */
#include "trk_tracker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trk_joining.h"
#include "trk_swarms.h"
#include "trk_target.h"

struct trk_tracker_s {
  trk_peers_t *peers;
  trk_wanted_t *wanted;
  trk_swarms_t swarms;
  uint64_t rng;
  uint32_t origin_target; /* 0: default policy (trk_lease_cap) */
  uint32_t tree_k;        /* stripes (trk_tree.c); 0: no trees */
  trk_tracker_stats_t st;
  trk_joining_set_t joining;
  uint32_t max_members;   /* per swarm (--max-members) */
  uint64_t max_bytes;     /* memory cap (--max-memory) */
  trk_refusal_t refusal;  /* why the last refused call was refused */
  uint32_t nregrant;      /* swarms marked to top up (trk_swarm_regrant) */
  uint64_t hold_until_ms; /* no origin lease before (a restart) */
};

static uint64_t state_bytes(const trk_tracker_t *t);

void trk_tracker_set_max_members(trk_tracker_t *t, uint32_t n) {
  t->max_members = n;
  for (uint32_t i = 0; i < t->swarms.n; i++)
    trk_swarm_set_max_members(t->swarms.at[i], n);
}

void trk_tracker_set_max_memory(trk_tracker_t *t, uint64_t bytes) {
  t->max_bytes = bytes != 0 ? bytes : TRK_MAX_STATE_BYTES;
}

trk_refusal_t trk_tracker_refusal(const trk_tracker_t *t) {
  return t->refusal;
}

/* Refuses with WS_ELIMIT for reason r (counted). */
static int refuse(trk_tracker_t *t, trk_refusal_t r) {
  t->refusal = r;
  t->st.refused[r]++;
  return WS_ELIMIT;
}

/* Bytes a peer costs: its record, its join slots and its connection. */
static uint64_t peer_bytes(const trk_tracker_t *t) {
  return sizeof(trk_peer_t) +
         (uint64_t)trk_peers_max_joined(t->peers) * sizeof(trk_peer_join_t) +
         TRK_PEER_CONN_BYTES;
}

/* Everything counted against --max-memory. */
static uint64_t memory_bytes(const trk_tracker_t *t) {
  return state_bytes(t) + (uint64_t)trk_peers_count(t->peers) * peer_bytes(t);
}

void trk_tracker_set_origin_inflight(trk_tracker_t *t, uint32_t n) {
  t->origin_target = n;
  for (uint32_t i = 0; i < t->swarms.n; i++)
    trk_swarm_set_origin_target(t->swarms.at[i], n);
}

void trk_tracker_set_tree(trk_tracker_t *t, uint32_t k) {
  t->tree_k = k;
  for (uint32_t i = 0; i < t->swarms.n; i++)
    trk_swarm_set_tree(t->swarms.at[i], k);
}

trk_tracker_t *trk_tracker_new(uint32_t max_peers, uint64_t seed,
                               uint64_t now_ms) {
  trk_tracker_t *t = calloc(1, sizeof(*t));
  if (t == NULL)
    goto fail;
  t->peers = trk_peers_new(max_peers);
  if (t->peers == NULL)
    goto fail_t;
  t->wanted = trk_wanted_new();
  if (t->wanted == NULL)
    goto fail_peers;
  t->rng = seed != 0 ? seed : 0x2545F4914F6CDD1Dull;
  t->st.started_ms = now_ms;
  t->max_bytes = TRK_MAX_STATE_BYTES;
  return t;

fail_peers:
  trk_peers_free(t->peers);
fail_t:
  free(t);
fail:
  return NULL;
}

void trk_tracker_free(trk_tracker_t *t) {
  if (t == NULL)
    return;
  /* Swarms first: leaving drops the join records the peers point at. */
  trk_swarms_free_all(&t->swarms);
  trk_peers_free(t->peers);
  trk_wanted_free(t->wanted);
  free(t);
}

void trk_tracker_hold_leases(trk_tracker_t *t, uint64_t until_ms) {
  t->hold_until_ms = until_ms;
}

uint64_t trk_tracker_hold_until(const trk_tracker_t *t) {
  return t->hold_until_ms;
}

/* 1 while no origin lease goes out: a restart's hold is on. */
static bool leases_held(const trk_tracker_t *t, uint64_t now_ms) {
  return now_ms < t->hold_until_ms;
}

/* trk_lease_grant, unless leases are held. */
static uint32_t lease_grant(trk_tracker_t *t, trk_swarm_t *s, trk_member_t *m,
                            uint32_t want, uint64_t now_ms, uint32_t *granted) {
  if (leases_held(t, now_ms))
    return 0;
  return trk_lease_grant(s, m, want, now_ms, granted, TRK_LEASES_PER_PEER_MAX);
}

trk_swarm_t *trk_tracker_swarm_find(const trk_tracker_t *t,
                                    const ws_hash_t *digest) {
  return trk_swarms_find(&t->swarms, digest);
}

/* p's membership in a swarm of digest (one per digest and peer). */
static trk_peer_join_t *join_of(trk_peer_t *p, const ws_hash_t *digest) {
  for (uint32_t i = 0; i < p->njoined; i++)
    if (ws_hash_eq(trk_swarm_digest(p->joined[i].swarm), digest))
      return &p->joined[i];
  return NULL;
}

/* m leaves by its STOPPED announce; the error of a failure in its report
 * stays on its departed row (the dashboard's) and is counted. */
static void member_stop(trk_tracker_t *t, trk_swarm_t *s, trk_member_t *m,
                        const trk_report_t *rep, uint64_t now_ms) {
  trk_stats_report(s, m, rep, now_ms);
  t->st.nodes_failed += rep->err != NULL && rep->err[0] != '\0';
  trk_swarm_leave(s, m);
}

/* A swarm's own arrays per chunk: avail (u32), holder (pointer), the
 * deadline order (two u32) and six bits (need, first, ever, suspect,
 * vouched, loose), rounded up to a byte (trk_swarm-int.h). */
#define SWARM_CHUNK_BYTES (3u * sizeof(uint32_t) + sizeof(void *) + 1u)

/* Everything a swarm allocates but its members: its record, its
 * dashboard history and its per-chunk arrays. */
static uint64_t swarm_bytes(uint32_t total_chunks) {
  return trk_swarm_fixed_bytes() + (uint64_t)total_chunks * SWARM_CHUNK_BYTES;
}

static uint64_t state_bytes(const trk_tracker_t *t) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < t->swarms.n; i++)
    n += (uint64_t)trk_swarm_member_count(t->swarms.at[i]) *
             trk_swarm_member_bytes(t->swarms.at[i]) +
         swarm_bytes(trk_swarm_total_chunks(t->swarms.at[i]));
  return n;
}

void trk_tracker_disconnect(trk_tracker_t *t, trk_peer_id_t id) {
  trk_peer_t *p = trk_peers_get(t->peers, id);
  if (p == NULL)
    return;
  while (p->njoined > 0) {
    trk_peer_join_t j = p->joined[p->njoined - 1u];
    trk_swarm_leave(j.swarm, j.member); /* the last leaves it ended */
  }
  trk_peers_remove(t->peers, id);
}

int trk_tracker_connect(trk_tracker_t *t, const trk_peer_info_t *info,
                        uint64_t now_ms, trk_peer_id_t *out,
                        trk_peer_id_t *replaced) {
  trk_peer_t *p;
  trk_peer_id_t old_id = 0;
  t->refusal = TRK_REFUSE_NONE;
  if (info == NULL || !trk_peer_node_id_valid(info->node_id))
    return WS_EUSAGE;
  const char *addr = info->addr != NULL ? info->addr : "";
  trk_peer_t *old = trk_peers_find_node(t->peers, info->node_id);
  /* A node id is bound to its address while connected (trk_config.h
   * TRK_MAX_NODES_PER_ADDR): nobody elsewhere takes a node's place. */
  if (old != NULL && strcmp(old->addr, addr) != 0)
    return refuse(t, TRK_REFUSE_NODE_BOUND);
  if (old == NULL && !trk_peer_addr_loopback(addr) &&
      trk_peers_addr_count(t->peers, addr) >= trk_peers_max_per_addr(t->peers))
    return refuse(t, TRK_REFUSE_PER_ADDR);
  if (old != NULL) {
    old_id = old->id;
    trk_tracker_disconnect(t, old_id);
    t->st.peers_replaced++;
  }
  if (trk_peers_count(t->peers) >= trk_peers_max(t->peers))
    return refuse(t, TRK_REFUSE_PEERS);
  if (memory_bytes(t) + peer_bytes(t) > t->max_bytes)
    return refuse(t, TRK_REFUSE_MEMORY);
  int rc = trk_peers_add(t->peers, info, now_ms, &p);
  if (rc == WS_ELIMIT)
    return refuse(t, TRK_REFUSE_PEERS);
  if (rc < 0)
    return rc;
  /* A node that lost its link to a tracker here, joining again this soon
   * after our start: we restarted. Hold the leases as after a --state
   * restart, counted from the start (trk_config.h TRK_RESTART_HOLD_MS). */
  if (info->rejoin && t->hold_until_ms == 0 &&
      now_ms < t->st.started_ms + TRK_RESTART_HOLD_MS)
    t->hold_until_ms = t->st.started_ms + TRK_RESTART_HOLD_MS;
  /* A node that joins later is admitted by capped selectors (best effort:
   * out of memory only leaves it unchosen until the next join). */
  (void)trk_target_refresh_all(t->wanted, t->peers);
  *out = p->id;
  if (replaced != NULL)
    *replaced = old_id;
  return 0;
}

int trk_tracker_peer_update(trk_tracker_t *t, trk_peer_id_t id,
                            const trk_peer_info_t *info) {
  trk_peer_t *p = trk_peers_get(t->peers, id);
  if (p == NULL)
    return WS_ENOTFOUND;
  uint16_t port = p->port;
  uint64_t zone = p->zone_hash;
  int rc = trk_peers_update(t->peers, p, info);
  if (rc == 0 && (p->port != port || p->zone_hash != zone))
    for (uint32_t i = 0; i < p->njoined; i++)
      trk_swarm_member_refresh(p->joined[i].swarm, p->joined[i].member);
  return rc;
}

/* Finds or creates the swarm for a and joins p to it. */
static int swarm_enter(trk_tracker_t *t, trk_peer_t *p, const trk_announce_t *a,
                       uint64_t now_ms, trk_swarm_t **out_s,
                       trk_member_t **out_m) {
  int rc;
  int created = 0;
  trk_peer_join_t *j = join_of(p, &a->digest);
  if (j != NULL && trk_swarm_total_chunks(j->swarm) != a->total_chunks)
    return WS_EPROTO; /* it joined with another count: leave first */
  trk_swarm_t *s =
      j != NULL ? j->swarm
                : trk_swarms_find_key(&t->swarms, &a->digest, a->total_chunks);
  trk_member_t *m = j != NULL ? j->member : NULL;
  if (m != NULL)
    goto done;
  if (p->njoined >= p->max_joined)
    return refuse(t, TRK_REFUSE_RELEASES_PER_NODE);
  if (s != NULL && trk_swarm_member_count(s) == 0) {
    trk_swarms_drop(&t->swarms, s); /* ended: a new swarm takes its place */
    s = NULL;
  }
  if (s == NULL) {
    /* Ended swarms make room first, the one that ended first first. */
    while ((t->swarms.n >= TRK_MAX_SWARMS ||
            memory_bytes(t) + swarm_bytes(a->total_chunks) > t->max_bytes) &&
           trk_swarms_drop_oldest_ended(&t->swarms))
      ;
    if (t->swarms.n >= TRK_MAX_SWARMS)
      return refuse(t, TRK_REFUSE_SWARMS);
    if (memory_bytes(t) + swarm_bytes(a->total_chunks) > t->max_bytes)
      return refuse(t, TRK_REFUSE_MEMORY);
    s = trk_swarm_new(&a->digest, a->total_chunks, now_ms);
    if (s == NULL)
      return -ENOMEM;
    trk_swarm_set_origin_target(s, t->origin_target);
    trk_swarm_set_tree(s, t->tree_k);
    trk_swarm_set_max_members(s, t->max_members);
    (void)trk_swarms_add(&t->swarms, s); /* room was checked above */
    created = 1;
  }
  if (trk_swarm_member_count(s) >= trk_swarm_max_members(s)) {
    rc = refuse(t, TRK_REFUSE_MEMBERS);
    goto fail_swarm;
  }
  if (memory_bytes(t) + trk_swarm_member_bytes(s) > t->max_bytes) {
    rc = refuse(t, TRK_REFUSE_MEMORY);
    goto fail_swarm;
  }
  rc = trk_swarm_join(s, p, a->role, now_ms, &m);
  if (rc < 0)
    goto fail_swarm;

done:
  *out_s = s;
  *out_m = m;
  return 0;

fail_swarm:
  if (created)
    trk_swarms_drop(&t->swarms, s);
  return rc;
}

/* ---- peers about to join ---------------------------------------------- */

/* Tells s how many peers are about to join it, before a grant. */
static void joining_update(trk_tracker_t *t, trk_swarm_t *s, uint64_t now_ms) {
  trk_swarm_set_joining(
      s, trk_joining_count(&t->joining, trk_swarm_digest(s), now_ms));
}

static void reply_leases(trk_reply_t *r, const trk_swarm_t *s,
                         const trk_member_t *m, uint32_t ngranted) {
  r->nleases = trk_lease_list(m, r->leases, TRK_LEASES_PER_PEER_MAX);
  r->ngranted = ngranted;
  r->streams = r->nleases > 0 ? trk_lease_cap(s) : 0;
}

static int joined_release(trk_peer_t *p, const trk_wanted_entry_t *e) {
  for (uint32_t i = 0; i < p->njoined; i++) {
    const trk_swarm_t *s = p->joined[i].swarm;
    if (e->has_digest ? ws_hash_eq(trk_swarm_digest(s), &e->digest)
                      : strcmp(trk_swarm_uri(s), e->uri) == 0)
      return 1;
  }
  return 0;
}

static void reply_wanted(trk_tracker_t *t, trk_peer_t *p, trk_reply_t *r) {
  uint32_t n = trk_wanted_count(t->wanted);
  for (uint32_t i = 0; i < n && r->nwanted < TRK_MAX_WANTED; i++) {
    const trk_wanted_entry_t *e = trk_wanted_at(t->wanted, i);
    if (!joined_release(p, e) && trk_target_selects(e, p))
      r->wanted[r->nwanted++] = e;
  }
}

void trk_tracker_wanted_reply(trk_tracker_t *t, trk_peer_id_t id,
                              trk_reply_t *r) {
  trk_peer_t *p = trk_peers_get(t->peers, id);
  memset(r, 0, sizeof(*r));
  if (p != NULL)
    reply_wanted(t, p, r);
}

/* Applies the announce's have-set, deltas, role and uri to m. */
static int member_apply(trk_tracker_t *t, trk_swarm_t *s, trk_member_t *m,
                        const trk_announce_t *a) {
  int rc;
  if (a->uri != NULL && a->uri[0] != '\0') {
    if (trk_wanted_uri_valid(a->uri) < 0)
      return WS_EUSAGE;
    if (strcmp(trk_swarm_uri(s), a->uri) != 0) {
      rc = trk_swarm_set_uri(s, a->uri);
      if (rc < 0)
        return rc;
    }
    /* A wanted digest learns its URI from the first peer that knows it. */
    const trk_wanted_entry_t *e = trk_wanted_find(t->wanted, &a->digest);
    if (e != NULL && e->uri[0] == '\0') {
      if (trk_wanted_add(t->wanted, &a->digest, a->uri, 0) < 0)
        return WS_EUSAGE;
      (void)trk_wanted_supersede(t->wanted); /* its model is known now */
    }
  }
  trk_swarm_set_role(s, m, a->role);
  trk_member_set_want(m, a->want_leases);
  if (a->bitfield != NULL) {
    rc = trk_swarm_set_have(s, m, a->bitfield, a->bitfield_len);
    if (rc < 0)
      return rc;
  }
  if (a->nhave > trk_swarm_total_chunks(s))
    return WS_EBADMSG;
  for (uint32_t i = 0; i < a->nhave; i++) {
    rc = trk_swarm_add_have(s, m, a->have[i]);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* The dashboard's side of an announce: report, progress, start time. */
static void stats_announce(trk_tracker_t *t, trk_swarm_t *s, trk_member_t *m,
                           const trk_announce_t *a, uint64_t now_ms) {
  const trk_wanted_entry_t *e = trk_wanted_find(t->wanted, &a->digest);
  if (e != NULL)
    trk_stats_set_start(s, e->added_ms);
  trk_stats_report(s, m, &a->report, now_ms);
  trk_stats_touch(s, m, now_ms);
}

/* An announce of a release p leaves, or has not joined yet (no manifest,
 * so no chunk count): the peer gets holders to fetch the manifest from (or
 * whom to get it from while one joiner reads it: trk_joining.h), and the
 * wanted set. */
static void announce_outside(trk_tracker_t *t, trk_peer_t *p,
                             const trk_announce_t *a, uint64_t now_ms,
                             trk_reply_t *r) {
  trk_peer_join_t *j = join_of(p, &a->digest);
  trk_swarm_t *s = j != NULL ? j->swarm : trk_tracker_swarm_find(t, &a->digest);
  trk_member_t *m = j != NULL ? j->member : NULL;
  if (a->leave && m != NULL) {
    member_stop(t, s, m, &a->report, now_ms);
    s = NULL;
  }
  if (!a->leave && s != NULL)
    r->npeers = trk_select_peers(s, p, m, a->max_peers, &t->rng, r->peers);
  /* The presence digest (all zero) is never a release: nobody joins. */
  static const ws_hash_t presence;
  if (!a->leave && m == NULL && !ws_hash_eq(&a->digest, &presence)) {
    trk_joining_answer_t ja = TRK_JOINING_ALONE;
    if (r->npeers == 0)
      ja = trk_joining_name(&t->joining, t->peers, &a->digest, p, a->max_peers,
                            t->tree_k > 0, now_ms, r->peers, &r->npeers);
    t->st.manifest_readers += ja == TRK_JOINING_READ_NEW;
    trk_joining_note(&t->joining, &a->digest, p->id, now_ms,
                     ja == TRK_JOINING_READ_NEW || ja == TRK_JOINING_READ);
  }
  reply_wanted(t, p, r);
}

int trk_tracker_announce(trk_tracker_t *t, trk_peer_id_t id,
                         const trk_announce_t *a, uint64_t now_ms,
                         trk_reply_t *r) {
  int rc;
  trk_swarm_t *s;
  trk_member_t *m;
  uint32_t granted[TRK_LEASES_PER_PEER_MAX];
  memset(r, 0, sizeof(*r));
  r->interval_ms = TRK_ANNOUNCE_INTERVAL_MS;
  t->refusal = TRK_REFUSE_NONE;
  trk_peer_t *p = trk_peers_get(t->peers, id);
  if (p == NULL)
    return WS_ENOTFOUND;
  rc = trk_peer_rate_take(p, now_ms);
  if (rc < 0) {
    t->st.announces_limited++;
    return rc;
  }
  t->st.announces++;
  if (a->total_chunks > TRK_MAX_CHUNKS) {
    rc = WS_ELIMIT;
    goto fail;
  }
  if (a->role >= TRK_ROLE_LAST) {
    rc = WS_EUSAGE;
    goto fail;
  }
  if (a->nstuck > TRK_STUCK_MAX || (a->nstuck > 0 && a->stuck == NULL) ||
      a->nfirst > TRK_STUCK_MAX || (a->nfirst > 0 && a->first == NULL)) {
    rc = WS_ELIMIT;
    goto fail;
  }
  if (a->leave || a->total_chunks == 0) {
    announce_outside(t, p, a, now_ms, r);
    return 0;
  }
  rc = swarm_enter(t, p, a, now_ms, &s, &m);
  if (rc < 0)
    goto fail;
  trk_swarm_set_now(s, now_ms);
  rc = member_apply(t, s, m, a);
  if (rc < 0)
    goto fail;
  stats_announce(t, s, m, a, now_ms);
  t->st.leases_expired += trk_lease_expire(s, now_ms);
  trk_joining_prune(&t->joining, &a->digest, id,
                    now_ms); /* joined: a downloader now */
  joining_update(t, s, now_ms);
  trk_lease_prefer(s, a->first, a->nfirst);
  uint32_t ng = lease_grant(t, s, m, a->want_leases, now_ms, granted);
  if (!leases_held(t, now_ms))
    ng += trk_lease_grant_stuck(s, m, a->stuck, a->nstuck, now_ms, granted + ng,
                                TRK_LEASES_PER_PEER_MAX - ng);
  reply_leases(r, s, m, ng);
  r->npeers = trk_select_peers(s, p, m, a->max_peers, &t->rng, r->peers);
  r->ntree =
      trk_tree_reply(s, m, r->tree, r->peers, &r->npeers, &r->interval_ms);
  reply_wanted(t, p, r);
  return 0;

fail:
  t->st.announces_rejected++;
  memset(r, 0, sizeof(*r));
  return rc;
}

static int find_member(trk_tracker_t *t, trk_peer_id_t id,
                       const ws_hash_t *digest, trk_swarm_t **s,
                       trk_member_t **m) {
  trk_peer_t *p = trk_peers_get(t->peers, id);
  if (p == NULL)
    return WS_ENOTFOUND;
  trk_peer_join_t *j = join_of(p, digest);
  *s = j == NULL ? NULL : j->swarm;
  *m = j == NULL ? NULL : j->member;
  return *m == NULL ? WS_ENOTFOUND : 0;
}

int trk_tracker_served(trk_tracker_t *t, trk_peer_id_t id,
                       const ws_hash_t *digest, const char *from_node,
                       uint64_t now_ms) {
  trk_swarm_t *s;
  trk_member_t *m;
  if (find_member(t, id, digest, &s, &m) < 0 || from_node == NULL)
    return 0;
  trk_peer_t *by = trk_member_peer(m);
  trk_peer_t *from = trk_peers_find_node(t->peers, from_node);
  if (from == NULL || from == by)
    return 0;
  /* One host cannot vouch for itself with a second node id; on loopback
   * (the tracker's own host) processes cannot be told apart. */
  if (strcmp(from->addr, by->addr) == 0 &&
      !(trk_peer_addr_loopback(from->addr) && trk_peer_addr_loopback(by->addr)))
    return 0;
  trk_member_t *fm = trk_swarm_member_of(s, from);
  if (fm == NULL)
    return 0; /* not in this swarm (another chunk count, or left) */
  trk_swarm_confirm(s, fm, now_ms);
  return 1;
}

int trk_tracker_have(trk_tracker_t *t, trk_peer_id_t id,
                     const ws_hash_t *digest, const uint32_t *chunks,
                     uint32_t n, uint64_t now_ms, trk_reply_t *r) {
  trk_swarm_t *s;
  trk_member_t *m;
  uint32_t granted[TRK_LEASES_PER_PEER_MAX];
  if (r != NULL)
    memset(r, 0, sizeof(*r));
  int rc = find_member(t, id, digest, &s, &m);
  if (rc < 0)
    return rc;
  if (n > trk_swarm_total_chunks(s))
    return WS_EBADMSG;
  trk_swarm_set_now(s, now_ms);
  for (uint32_t i = 0; i < n; i++) {
    rc = trk_swarm_add_have(s, m, chunks[i]);
    if (rc < 0)
      return rc;
  }
  t->st.haves += n;
  trk_stats_touch(s, m, now_ms);
  joining_update(t, s, now_ms);
  uint32_t ng = lease_grant(t, s, m, trk_member_want(m), now_ms, granted);
  if (r != NULL) {
    r->interval_ms = 0; /* no announce answered: the peer keeps its time */
    reply_leases(r, s, m, ng);
  }
  return 0;
}

int trk_tracker_renew(trk_tracker_t *t, trk_peer_id_t id,
                      const ws_hash_t *digest, uint32_t chunk,
                      uint64_t now_ms) {
  trk_swarm_t *s;
  trk_member_t *m;
  int rc = find_member(t, id, digest, &s, &m);
  if (rc < 0)
    return rc;
  return trk_lease_renew(s, m, chunk, now_ms);
}

int trk_tracker_release(trk_tracker_t *t, trk_peer_id_t id,
                        const ws_hash_t *digest, uint32_t chunk,
                        uint64_t now_ms) {
  trk_swarm_t *s;
  trk_member_t *m;
  int rc = find_member(t, id, digest, &s, &m);
  if (rc < 0)
    return rc;
  return trk_lease_release(s, m, chunk, now_ms);
}

uint32_t trk_tracker_tick(trk_tracker_t *t, uint64_t now_ms) {
  uint32_t n = 0;
  bool hold_over = t->hold_until_ms != 0 && now_ms >= t->hold_until_ms;
  if (hold_over)
    t->hold_until_ms = 0; /* every swarm is topped up now */
  for (uint32_t i = 0; i < t->swarms.n; i++) {
    trk_swarm_t *s = t->swarms.at[i];
    if (hold_over)
      trk_swarm_mark_regrant(s);
    n += trk_lease_expire(s, now_ms);
    trk_swarm_weigh(s, now_ms);
    t->nregrant += (uint32_t)trk_swarm_regrant(s, 0);
    trk_stats_sample(s, now_ms);
  }
  trk_swarms_sweep(&t->swarms, now_ms);
  t->st.leases_expired += n;
  (void)trk_wanted_expire(t->wanted, now_ms);
  return n;
}

int trk_tracker_regrant_pending(trk_tracker_t *t, int clear) {
  int pending = t->nregrant > 0;
  for (uint32_t i = 0; clear && i < t->swarms.n; i++)
    (void)trk_swarm_regrant(t->swarms.at[i], 1);
  if (clear)
    t->nregrant = 0;
  return pending;
}

int trk_tracker_regrant(trk_tracker_t *t, trk_peer_id_t id, uint32_t i,
                        uint64_t now_ms, ws_hash_t *digest, trk_reply_t *r) {
  uint32_t granted[TRK_LEASES_PER_PEER_MAX];
  trk_peer_t *p = trk_peers_get(t->peers, id);
  if (p == NULL || i >= p->njoined)
    return WS_ENOTFOUND;
  trk_swarm_t *s = p->joined[i].swarm;
  trk_member_t *m = p->joined[i].member;
  if (!trk_swarm_regrant(s, 0))
    return 0;
  joining_update(t, s, now_ms);
  uint32_t ng = lease_grant(t, s, m, trk_member_want(m), now_ms, granted);
  if (ng == 0)
    return 0;
  memset(r, 0, sizeof(*r)); /* interval 0: no announce answered */
  reply_leases(r, s, m, ng);
  *digest = *trk_swarm_digest(s);
  return 1;
}

int trk_tracker_prefetch(trk_tracker_t *t, const ws_hash_t *digest,
                         const char *uri, uint64_t now_ms) {
  if (uri != NULL && uri[0] == '\0')
    uri = NULL;
  if (uri == NULL && digest != NULL) {
    const trk_swarm_t *s = trk_tracker_swarm_find(t, digest);
    if (s == NULL && trk_wanted_find(t->wanted, digest) == NULL)
      return WS_ENOTFOUND;
    if (s != NULL && trk_swarm_uri(s)[0] != '\0')
      uri = trk_swarm_uri(s);
  }
  return trk_wanted_add(t->wanted, digest, uri, now_ms);
}

int trk_tracker_prefetch_select(trk_tracker_t *t, const ws_hash_t *digest,
                                const trk_selector_t *sel) {
  int rc = trk_wanted_set_selector(t->wanted, digest, sel);
  if (rc < 0)
    return rc;
  int chose = trk_target_refresh(t->wanted, t->peers, digest);
  if (chose < 0)
    return chose;
  /* A newer release of a model replaces the older one (trk_wanted.h). */
  (void)trk_wanted_supersede(t->wanted);
  return rc > 0 || chose > 0;
}

trk_peers_t *trk_tracker_peers(const trk_tracker_t *t) {
  return t->peers;
}

trk_wanted_t *trk_tracker_wanted(const trk_tracker_t *t) {
  return t->wanted;
}

uint32_t trk_tracker_swarm_count(const trk_tracker_t *t) {
  return t->swarms.n;
}

trk_swarm_t *trk_tracker_swarm_at(const trk_tracker_t *t, uint32_t i) {
  return i < t->swarms.n ? t->swarms.at[i] : NULL;
}

int trk_tracker_swarm_ended(const trk_tracker_t *t, const trk_swarm_t *s,
                            uint64_t now_ms, uint64_t *since_ms) {
  return trk_swarms_ended(&t->swarms, s, now_ms, since_ms);
}

void trk_tracker_stats(const trk_tracker_t *t, trk_tracker_stats_t *out) {
  *out = t->st;
  out->peers = trk_peers_count(t->peers);
  out->peers_max = trk_peers_max(t->peers);
  out->swarms = t->swarms.n;
  out->swarms_ended = 0;
  for (uint32_t i = 0; i < t->swarms.n; i++)
    out->swarms_ended += trk_swarm_member_count(t->swarms.at[i]) == 0;
  out->wanted = trk_wanted_count(t->wanted);
  out->hold_until_ms = t->hold_until_ms;
  out->state_bytes = state_bytes(t);
  out->memory_bytes = memory_bytes(t);
  out->memory_max = t->max_bytes;
  out->members_max = t->max_members != 0 ? t->max_members : TRK_MAX_MEMBERS;
}
