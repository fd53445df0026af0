/* trk_json.c - JSON state documents (the metrics text is trk_metrics.c).
 *
 * Builds fresh documents from live state on each request; nothing is
 * cached. JSON goes through cJSON (escaping is its job). Loop thread only.
 */
#include "trk_json.h"
#include "trk_json_dash.h"
#include "trk_target.h"

#include <cjson/cJSON.h>
#include <errno.h>
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

/* Adds the summary fields of s to o, with "ended_s" once its last member
 * has left (trk_swarms.h); 0 or -ENOMEM. */
static int swarm_fill(cJSON *o, const trk_tracker_t *t, const trk_swarm_t *s,
                      uint64_t now_ms) {
  trk_swarm_stats_t st;
  trk_swarm_stats(s, &st);
  cJSON *l;
  uint64_t since;
  if ((trk_tracker_swarm_ended(t, s, now_ms, &since) &&
       !cJSON_AddNumberToObject(o, "ended_s", age_s(now_ms, since))) ||
      !cJSON_AddStringToObject(o, "digest", trk_swarm_digest_str(s)) ||
      !cJSON_AddStringToObject(o, "uri", trk_swarm_uri(s)) ||
      !cJSON_AddNumberToObject(o, "total_chunks", st.total_chunks) ||
      !cJSON_AddNumberToObject(o, "members", st.members) ||
      !cJSON_AddNumberToObject(o, "complete", st.complete) ||
      !cJSON_AddNumberToObject(o, "downloaders", st.downloaders) ||
      !cJSON_AddNumberToObject(o, "chunks_held", st.chunks_held) ||
      !cJSON_AddNumberToObject(o, "chunks_leased", st.chunks_leased) ||
      !cJSON_AddNumberToObject(o, "chunks_need", st.chunks_need) ||
      !cJSON_AddNumberToObject(o, "chunks_suspect", st.chunks_suspect) ||
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
      !cJSON_AddNumberToObject(l, "suspect", (double)st.leases_suspect) ||
      !cJSON_AddNumberToObject(l, "origin_refetch", (double)st.origin_refetch))
    return -ENOMEM;
  return 0;
}

static int wanted_fill(cJSON *arr, const trk_tracker_t *t, uint64_t now_ms) {
  const trk_wanted_t *w = trk_tracker_wanted(t);
  for (uint32_t i = 0; i < trk_wanted_count(w); i++) {
    const trk_wanted_entry_t *e = trk_wanted_at(w, i);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
      return -ENOMEM;
    cJSON_AddItemToArray(arr, o);
    if (!cJSON_AddStringToObject(o, "digest", e->digest_str) ||
        !cJSON_AddStringToObject(o, "uri", e->uri) ||
        !cJSON_AddNumberToObject(o, "age_s", age_s(now_ms, e->added_ms)) ||
        trk_target_json_add(o, e, trk_tracker_peers(t)) < 0)
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
      !cJSON_AddNumberToObject(root, "restart_hold_s",
                               trk_tracker_hold_left_s(&st, now_ms)) ||
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
    if (swarm_fill(o, t, trk_tracker_swarm_at(t, i), now_ms) < 0 ||
        trk_json_dash_summary(o, trk_tracker_swarm_at(t, i), now_ms) < 0)
      goto done;
  }
  if (wanted_fill(wanted, t, now_ms) < 0)
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
      !cJSON_AddBoolToObject(o, "claims_counted", mi->counted) ||
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
  if (root == NULL || swarm_fill(root, t, s, now_ms) < 0 ||
      trk_json_dash_summary(root, s, now_ms) < 0 ||
      trk_json_dash_detail(root, s, now_ms) < 0 ||
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
