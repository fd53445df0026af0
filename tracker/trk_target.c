/* trk_target.c - targeted prefetch: selectors, rendezvous choice of nodes
 * under a cap, and the targets shown by the API (see trk_target.h).
 * Loop thread only.
 */
#include "trk_target.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trk_peer.h"

#define SEL_RESERVED(k)                                                        \
  (strcmp((k), "labels") == 0 || strcmp((k), "zones") == 0 ||                  \
   strcmp((k), "count") == 0 || strcmp((k), "percent") == 0)

static int add_label(trk_selector_t *s, const cJSON *it) {
  char pair[WS_LABEL_KEY_MAX + WS_LABEL_VALUE_MAX + 2];
  if (!cJSON_IsString(it) || it->string == NULL ||
      strlen(it->string) > WS_LABEL_KEY_MAX ||
      strlen(it->valuestring) > WS_LABEL_VALUE_MAX ||
      strchr(it->string, ',') != NULL || strchr(it->string, '=') != NULL)
    return WS_EUSAGE;
  snprintf(pair, sizeof(pair), "%s=%s", it->string, it->valuestring);
  return ws_labels_add(s->labels, sizeof(s->labels), pair);
}

static int get_uint(const cJSON *o, const char *key, uint32_t max,
                    uint32_t *out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (j == NULL)
    return 0;
  if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > max ||
      j->valuedouble != (double)(uint32_t)j->valuedouble)
    return WS_EUSAGE;
  *out = (uint32_t)j->valuedouble;
  return 0;
}

int trk_selector_from_json(const cJSON *j, trk_selector_t *out,
                           const char **msg) {
  const cJSON *it;
  memset(out, 0, sizeof(*out));
  *msg = "selector must be an object";
  if (!cJSON_IsObject(j))
    return WS_EUSAGE;
  const cJSON *jl = cJSON_GetObjectItemCaseSensitive(j, "labels");
  *msg = "selector labels: an object of key: value strings (Kubernetes "
         "label syntax, at most 16)";
  if (jl != NULL && !cJSON_IsObject(jl))
    return WS_EUSAGE;
  cJSON_ArrayForEach(it, jl) if (add_label(out, it) < 0) return WS_EUSAGE;
  cJSON_ArrayForEach(it, j) {
    if (!SEL_RESERVED(it->string) && add_label(out, it) < 0)
      return WS_EUSAGE;
  }
  const cJSON *jz = cJSON_GetObjectItemCaseSensitive(j, "zones");
  *msg = "selector zones: an array of at most 16 zone names";
  if (jz != NULL && !cJSON_IsArray(jz))
    return WS_EUSAGE;
  cJSON_ArrayForEach(it, jz) {
    if (!cJSON_IsString(it) || it->valuestring[0] == '\0' ||
        !trk_peer_zone_valid(it->valuestring) ||
        out->nzones >= TRK_SEL_ZONES_MAX)
      return WS_EUSAGE;
    snprintf(out->zones[out->nzones++], TRK_ZONE_MAX + 1u, "%s",
             it->valuestring);
  }
  *msg = "selector count: an integer 0..65534; percent: 0..100";
  if (get_uint(j, "count", TRK_MAX_PEERS_MAX, &out->count) < 0 ||
      get_uint(j, "percent", 100, &out->percent) < 0)
    return WS_EUSAGE;
  *msg = NULL;
  return 0;
}

cJSON *trk_selector_to_json(const trk_selector_t *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON *l = o == NULL ? NULL : cJSON_AddObjectToObject(o, "labels");
  cJSON *z = o == NULL ? NULL : cJSON_AddArrayToObject(o, "zones");
  if (l == NULL || z == NULL)
    goto fail;
  const char *p = s->labels;
  while (*p != '\0') {
    char key[WS_LABEL_KEY_MAX + 1], val[WS_LABEL_VALUE_MAX + 1];
    size_t len = strcspn(p, ","), kn = strcspn(p, "=");
    snprintf(key, sizeof(key), "%.*s", (int)kn, p);
    snprintf(val, sizeof(val), "%.*s", (int)(len - kn - 1u), p + kn + 1);
    if (!cJSON_AddStringToObject(l, key, val))
      goto fail;
    p += len + (p[len] == ',');
  }
  for (uint32_t i = 0; i < s->nzones; i++)
    if (!cJSON_AddItemToArray(z, cJSON_CreateString(s->zones[i])))
      goto fail;
  if (!cJSON_AddNumberToObject(o, "count", s->count) ||
      !cJSON_AddNumberToObject(o, "percent", s->percent))
    goto fail;
  return o;

fail:
  cJSON_Delete(o);
  return NULL;
}

int trk_selector_matches(const trk_selector_t *s, const trk_peer_t *p) {
  const char *q = s->labels;
  while (*q != '\0') {
    char key[WS_LABEL_KEY_MAX + 1], val[WS_LABEL_VALUE_MAX + 1];
    size_t len = strcspn(q, ","), kn = strcspn(q, "=");
    snprintf(key, sizeof(key), "%.*s", (int)kn, q);
    snprintf(val, sizeof(val), "%.*s", (int)(len - kn - 1u), q + kn + 1);
    if (!ws_labels_has(p->labels, key, val))
      return 0;
    q += len + (q[len] == ',');
  }
  if (s->nzones == 0)
    return 1;
  for (uint32_t i = 0; i < s->nzones; i++)
    if (strcmp(s->zones[i], p->zone) == 0)
      return 1;
  return 0;
}

/* FNV-1a over digest and node id, then a 64-bit finalizer (splitmix):
 * cheap, stable across builds and restarts. */
uint64_t trk_target_score(const char *node_id, const ws_hash_t *digest) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < sizeof(digest->b); i++)
    h = (h ^ digest->b[i]) * 0x100000001b3ull;
  for (const char *c = node_id; *c != '\0'; c++)
    h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

static int capped(const trk_wanted_entry_t *e) {
  return e->has_sel && (e->sel.count > 0 || e->sel.percent > 0);
}

int trk_target_selects(const trk_wanted_entry_t *e, const trk_peer_t *p) {
  if (!e->has_sel)
    return 1;
  if (!trk_selector_matches(&e->sel, p))
    return 0;
  return !capped(e) || trk_wanted_is_chosen(e, p->node_id);
}

typedef struct {
  uint64_t score;
  const trk_peer_t *p;
} cand_t;

static int cand_cmp(const void *a, const void *b) {
  const cand_t *x = a, *y = b;
  if (x->score != y->score)
    return x->score < y->score ? 1 : -1;
  return strcmp(x->p->node_id, y->p->node_id);
}

/* How many nodes the cap allows out of m matching ones. */
static uint32_t cap_of(const trk_selector_t *s, uint32_t m) {
  uint32_t n = m;
  if (s->count > 0 && s->count < n)
    n = s->count;
  if (s->percent > 0) {
    uint32_t p = (uint32_t)(((uint64_t)m * s->percent + 99u) / 100u);
    if (p < n)
      n = p;
  }
  return n;
}

int trk_target_refresh(trk_wanted_t *w, const trk_peers_t *peers,
                       const ws_hash_t *digest) {
  const trk_wanted_entry_t *e = trk_wanted_find(w, digest);
  if (e == NULL || !capped(e))
    return 0;
  uint32_t n = trk_peers_count(peers), nc = 0, cur = 0;
  cand_t *c = calloc(n + 1u, sizeof(*c));
  if (c == NULL)
    return -ENOMEM;
  const trk_peer_t *p;
  while ((p = trk_peers_next(peers, &cur)) != NULL && nc < n) {
    if (!trk_selector_matches(&e->sel, p))
      continue;
    if (trk_wanted_is_chosen(e, p->node_id))
      continue;
    c[nc].p = p;
    c[nc++].score = trk_target_score(p->node_id, digest);
  }
  /* Matching nodes: the connected ones plus chosen ones not connected. */
  uint32_t m = nc + e->nchosen;
  uint32_t want = cap_of(&e->sel, m);
  int rc = 0;
  if (want > e->nchosen && nc > 0) {
    qsort(c, nc, sizeof(*c), cand_cmp);
    uint32_t k = want - e->nchosen;
    for (uint32_t i = 0; i < k && i < nc && rc >= 0; i++) {
      rc = trk_wanted_choose(w, digest, c[i].p->node_id);
      if (rc == 0)
        rc = 1;
    }
  }
  free(c);
  return rc;
}

int trk_target_refresh_all(trk_wanted_t *w, const trk_peers_t *peers) {
  int any = 0;
  for (uint32_t i = 0; i < trk_wanted_count(w); i++) {
    const trk_wanted_entry_t *e = trk_wanted_at(w, i);
    if (e->has_digest && capped(e) &&
        trk_target_refresh(w, peers, &e->digest) > 0)
      any = 1;
  }
  return any;
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int trk_target_json_add(cJSON *o, const trk_wanted_entry_t *e,
                        const trk_peers_t *peers) {
  uint32_t n = trk_peers_count(peers), nt = 0, cur = 0;
  const char **ids = calloc(n + 1u, sizeof(*ids));
  cJSON *arr = NULL;
  int rc = -ENOMEM;
  if (ids == NULL)
    return -ENOMEM;
  const trk_peer_t *p;
  while ((p = trk_peers_next(peers, &cur)) != NULL && nt < n)
    if (trk_target_selects(e, p))
      ids[nt++] = p->node_id;
  qsort(ids, nt, sizeof(*ids), str_cmp);
  cJSON *sel = e->has_sel ? trk_selector_to_json(&e->sel) : cJSON_CreateNull();
  if (sel == NULL || !cJSON_AddItemToObject(o, "selector", sel))
    goto done;
  arr = cJSON_AddArrayToObject(o, "targets");
  if (arr == NULL)
    goto done;
  for (uint32_t i = 0; i < nt; i++)
    if (!cJSON_AddItemToArray(arr, cJSON_CreateString(ids[i])))
      goto done;
  rc = 0;

done:
  free(ids);
  return rc;
}
