/* trk_json.c - JSON state documents and Prometheus metrics text.
 *
 * Builds fresh documents from live state on each request; nothing is
 * cached. JSON goes through cJSON (escaping is its job); metrics text is
 * built in a bounded growable buffer. Loop thread only.
 */
#include "trk_json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *role_name(trk_role_t r) {
  return r == TRK_ROLE_SEED ? "seed" : "leech";
}

/* Mean fraction of the release the members hold, 0..1. */
static double swarm_progress(const trk_swarm_t *s) {
  uint32_t n = trk_swarm_member_count(s);
  uint64_t have = 0;
  if (n == 0)
    return 0.0;
  for (uint32_t i = 0; i < n; i++) {
    trk_member_info_t mi;
    trk_swarm_member_info(s, i, &mi);
    have += mi.have_count;
  }
  return (double)have / ((double)n * (double)trk_swarm_total_chunks(s));
}

static double age_s(uint64_t now_ms, uint64_t then_ms) {
  return now_ms > then_ms ? (double)(now_ms - then_ms) / 1000.0 : 0.0;
}

/* Adds the summary fields of s to o; 0 or -ENOMEM. */
static int swarm_fill(cJSON *o, const trk_swarm_t *s, uint64_t now_ms) {
  trk_swarm_stats_t st;
  trk_swarm_stats(s, &st);
  cJSON *l;
  if (!cJSON_AddStringToObject(o, "digest", trk_swarm_digest_str(s)) ||
      !cJSON_AddStringToObject(o, "uri", trk_swarm_uri(s)) ||
      !cJSON_AddNumberToObject(o, "total_chunks", st.total_chunks) ||
      !cJSON_AddNumberToObject(o, "members", st.members) ||
      !cJSON_AddNumberToObject(o, "complete", st.complete) ||
      !cJSON_AddNumberToObject(o, "downloaders", st.downloaders) ||
      !cJSON_AddNumberToObject(o, "chunks_held", st.chunks_held) ||
      !cJSON_AddNumberToObject(o, "chunks_leased", st.chunks_leased) ||
      !cJSON_AddNumberToObject(o, "chunks_need", st.chunks_need) ||
      !cJSON_AddNumberToObject(o, "progress", swarm_progress(s)) ||
      !cJSON_AddNumberToObject(o, "lease_cap", trk_lease_cap(s)) ||
      !cJSON_AddNumberToObject(o, "lease_limit", trk_lease_limit(s)) ||
      !cJSON_AddNumberToObject(o, "age_s", age_s(now_ms, st.created_ms)) ||
      (l = cJSON_AddObjectToObject(o, "leases")) == NULL ||
      !cJSON_AddNumberToObject(l, "granted", (double)st.leases_granted) ||
      !cJSON_AddNumberToObject(l, "completed", (double)st.leases_completed) ||
      !cJSON_AddNumberToObject(l, "expired", (double)st.leases_expired) ||
      !cJSON_AddNumberToObject(l, "released", (double)st.leases_released) ||
      !cJSON_AddNumberToObject(l, "revoked", (double)st.leases_revoked) ||
      !cJSON_AddNumberToObject(l, "origin_refetch", (double)st.origin_refetch))
    return -ENOMEM;
  return 0;
}

static int wanted_fill(cJSON *arr, const trk_wanted_t *w, uint64_t now_ms) {
  for (uint32_t i = 0; i < trk_wanted_count(w); i++) {
    const trk_wanted_entry_t *e = trk_wanted_at(w, i);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
      return -ENOMEM;
    cJSON_AddItemToArray(arr, o);
    if (!cJSON_AddStringToObject(o, "digest", e->digest_str) ||
        !cJSON_AddStringToObject(o, "uri", e->uri) ||
        !cJSON_AddNumberToObject(o, "age_s", age_s(now_ms, e->added_ms)))
      return -ENOMEM;
  }
  return 0;
}

char *trk_json_swarms(const trk_tracker_t *t, uint64_t now_ms) {
  char *out = NULL;
  trk_tracker_stats_t st;
  trk_tracker_stats(t, &st);
  cJSON *root = cJSON_CreateObject();
  cJSON *arr, *wanted;
  if (root == NULL ||
      !cJSON_AddNumberToObject(root, "now_ms", (double)now_ms) ||
      !cJSON_AddNumberToObject(root, "uptime_s",
                               age_s(now_ms, st.started_ms)) ||
      !cJSON_AddNumberToObject(root, "peers", st.peers) ||
      !cJSON_AddNumberToObject(root, "peers_max", st.peers_max) ||
      (arr = cJSON_AddArrayToObject(root, "swarms")) == NULL ||
      (wanted = cJSON_AddArrayToObject(root, "wanted")) == NULL)
    goto done;
  for (uint32_t i = 0; i < trk_tracker_swarm_count(t); i++) {
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
      goto done;
    cJSON_AddItemToArray(arr, o);
    if (swarm_fill(o, trk_tracker_swarm_at(t, i), now_ms) < 0)
      goto done;
  }
  if (wanted_fill(wanted, trk_tracker_wanted(t), now_ms) < 0)
    goto done;
  out = cJSON_PrintUnformatted(root);

done:
  cJSON_Delete(root);
  return out;
}

static int member_fill(cJSON *o, const trk_member_info_t *mi, uint32_t total,
                       uint64_t now_ms) {
  if (!cJSON_AddStringToObject(o, "node_id", mi->peer->node_id) ||
      !cJSON_AddStringToObject(o, "addr", mi->peer->addr) ||
      !cJSON_AddNumberToObject(o, "port", mi->peer->port) ||
      !cJSON_AddStringToObject(o, "zone", mi->peer->zone) ||
      !cJSON_AddStringToObject(o, "role", role_name(mi->role)) ||
      !cJSON_AddNumberToObject(o, "have", mi->have_count) ||
      !cJSON_AddNumberToObject(o, "progress",
                               (double)mi->have_count / (double)total) ||
      !cJSON_AddNumberToObject(o, "leases", mi->nleases) ||
      !cJSON_AddNumberToObject(o, "origin_chunks", (double)mi->origin_chunks) ||
      !cJSON_AddNumberToObject(o, "age_s", age_s(now_ms, mi->joined_ms)))
    return -ENOMEM;
  return 0;
}

int trk_json_swarm(const trk_tracker_t *t, const ws_hash_t *digest,
                   uint64_t now_ms, char **out) {
  int rc = -ENOMEM;
  const trk_swarm_t *s = trk_tracker_swarm_find(t, digest);
  if (s == NULL)
    return WS_ENOTFOUND;
  cJSON *root = cJSON_CreateObject();
  cJSON *arr;
  if (root == NULL || swarm_fill(root, s, now_ms) < 0 ||
      (arr = cJSON_AddArrayToObject(root, "peers")) == NULL)
    goto done;
  for (uint32_t i = 0; i < trk_swarm_member_count(s); i++) {
    trk_member_info_t mi;
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
      goto done;
    cJSON_AddItemToArray(arr, o);
    trk_swarm_member_info(s, i, &mi);
    if (member_fill(o, &mi, trk_swarm_total_chunks(s), now_ms) < 0)
      goto done;
  }
  char *text = cJSON_PrintUnformatted(root);
  if (text == NULL)
    goto done;
  *out = text;
  rc = 0;

done:
  cJSON_Delete(root);
  return rc;
}

/* --- Prometheus text -------------------------------------------------- */

typedef struct {
  char *p;
  size_t len;
  size_t cap;
  int err; /* first error; later appends are no-ops */
} text_t;

static void text_add(text_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void text_add(text_t *b, const char *fmt, ...) {
  va_list ap;
  if (b->err != 0)
    return;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->err = WS_EUSAGE;
      return;
    }
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap * 2u;
    while (cap - b->len <= (size_t)n)
      cap *= 2u;
    if (cap > TRK_TEXT_MAX_BYTES) {
      b->err = WS_ELIMIT;
      return;
    }
    char *np = realloc(b->p, cap);
    if (np == NULL) {
      b->err = -ENOMEM;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
}

static void metric_head(text_t *b, const char *name, const char *type,
                        const char *help) {
  text_add(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_one(text_t *b, const char *name, const char *type,
                       const char *help, double v) {
  metric_head(b, name, type, help);
  text_add(b, "%s %.17g\n", name, v);
}

/* Per-swarm series: one HELP/TYPE, one sample per swarm (the exposition
 * format wants all samples of a metric together). */
typedef enum {
  SM_MEMBERS,
  SM_COMPLETE,
  SM_DOWNLOADERS,
  SM_CHUNKS_TOTAL,
  SM_CHUNKS_HELD,
  SM_CHUNKS_LEASED,
  SM_CHUNKS_NEED,
  SM_GRANTED,
  SM_COMPLETED,
  SM_EXPIRED,
  SM_RELEASED,
  SM_REVOKED,
  SM_REFETCH,
  SM_LAST
} swarm_metric_t;

static const struct {
  const char *name;
  const char *type;
  const char *help;
} swarm_metrics[SM_LAST] = {
    {"p2p_tracker_swarm_members", "gauge", "Peers in the swarm."},
    {"p2p_tracker_swarm_complete", "gauge", "Members holding every chunk."},
    {"p2p_tracker_swarm_downloaders", "gauge", "Leechers still missing data."},
    {"p2p_tracker_swarm_chunks", "gauge", "Chunks in the release."},
    {"p2p_tracker_swarm_chunks_held", "gauge", "Chunks some member holds."},
    {"p2p_tracker_swarm_chunks_leased", "gauge",
     "Chunks being fetched from the origin under a lease."},
    {"p2p_tracker_swarm_chunks_need", "gauge",
     "Chunks nobody holds and nobody fetches."},
    {"p2p_tracker_swarm_leases_granted_total", "counter", "Leases granted."},
    {"p2p_tracker_swarm_leases_completed_total", "counter",
     "Leases ended by the holder reporting the chunk."},
    {"p2p_tracker_swarm_leases_expired_total", "counter",
     "Leases ended by TTL without renew."},
    {"p2p_tracker_swarm_leases_released_total", "counter",
     "Leases given back or dropped with their holder."},
    {"p2p_tracker_swarm_leases_revoked_total", "counter",
     "Leases ended because another peer reported the chunk."},
    {"p2p_tracker_swarm_origin_refetch_total", "counter",
     "Leases for chunks that some peer had held before."},
};

static double swarm_metric(const trk_swarm_stats_t *st, swarm_metric_t m) {
  switch (m) {
  case SM_MEMBERS:
    return st->members;
  case SM_COMPLETE:
    return st->complete;
  case SM_DOWNLOADERS:
    return st->downloaders;
  case SM_CHUNKS_TOTAL:
    return st->total_chunks;
  case SM_CHUNKS_HELD:
    return st->chunks_held;
  case SM_CHUNKS_LEASED:
    return st->chunks_leased;
  case SM_CHUNKS_NEED:
    return st->chunks_need;
  case SM_GRANTED:
    return (double)st->leases_granted;
  case SM_COMPLETED:
    return (double)st->leases_completed;
  case SM_EXPIRED:
    return (double)st->leases_expired;
  case SM_RELEASED:
    return (double)st->leases_released;
  case SM_REVOKED:
    return (double)st->leases_revoked;
  case SM_REFETCH:
    return (double)st->origin_refetch;
  case SM_LAST:
    break;
  }
  return 0.0;
}

int trk_metrics_text(const trk_tracker_t *t, uint64_t now_ms, char **out,
                     size_t *len) {
  trk_tracker_stats_t st;
  text_t b = {.cap = 4096};
  b.p = malloc(b.cap);
  if (b.p == NULL)
    return -ENOMEM;
  b.p[0] = '\0';
  trk_tracker_stats(t, &st);
  metric_one(&b, "p2p_tracker_peers", "gauge", "Connected peers.", st.peers);
  metric_one(&b, "p2p_tracker_peers_max", "gauge", "Peer cap.", st.peers_max);
  metric_one(&b, "p2p_tracker_swarms", "gauge", "Releases tracked.", st.swarms);
  metric_one(&b, "p2p_tracker_wanted", "gauge",
             "Releases in the cluster-wide wanted set.", st.wanted);
  metric_one(&b, "p2p_tracker_state_bytes", "gauge",
             "Bytes of per-member swarm state.", (double)st.state_bytes);
  metric_one(&b, "p2p_tracker_announces_total", "counter",
             "Announces accepted.", (double)st.announces);
  metric_one(&b, "p2p_tracker_announces_limited_total", "counter",
             "Announces refused by the per-peer rate limit.",
             (double)st.announces_limited);
  metric_one(&b, "p2p_tracker_announces_rejected_total", "counter",
             "Announces refused for bad input or caps.",
             (double)st.announces_rejected);
  metric_one(&b, "p2p_tracker_haves_total", "counter",
             "Chunk completions reported.", (double)st.haves);
  metric_one(&b, "p2p_tracker_leases_expired_total", "counter",
             "Origin leases expired (all swarms).", (double)st.leases_expired);
  metric_one(&b, "p2p_tracker_peers_replaced_total", "counter",
             "Connections replaced by a reconnect of the same node.",
             (double)st.peers_replaced);
  metric_one(&b, "p2p_tracker_uptime_seconds", "gauge",
             "Seconds since the tracker started.",
             age_s(now_ms, st.started_ms));
  uint32_t ns = trk_tracker_swarm_count(t);
  for (int m = 0; m < SM_LAST; m++) {
    metric_head(&b, swarm_metrics[m].name, swarm_metrics[m].type,
                swarm_metrics[m].help);
    for (uint32_t i = 0; i < ns; i++) {
      const trk_swarm_t *s = trk_tracker_swarm_at(t, i);
      trk_swarm_stats_t ss;
      trk_swarm_stats(s, &ss);
      text_add(&b, "%s{digest=\"%s\"} %.17g\n", swarm_metrics[m].name,
               trk_swarm_digest_str(s), swarm_metric(&ss, (swarm_metric_t)m));
    }
  }
  if (b.err != 0) {
    free(b.p);
    return b.err;
  }
  *out = b.p;
  *len = b.len;
  return 0;
}
