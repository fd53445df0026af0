/* trk_wanted.c - the wanted set: a small bounded array of releases.
 *
 * Owns its entries (fixed array of TRK_MAX_WANTED). Order is insertion
 * order, so replies list older prefetches first. Loop thread only.
 */
#include "trk_wanted.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trk_target.h"

#define STATE_FILE_MAX (1u << 20)
#define S3_SCHEME "s3://"

struct trk_wanted_s {
  uint32_t n;
  uint64_t version;
  uint64_t ttl_ms;
  uint64_t evicted, expired, superseded; /* removals by rule */
  trk_wanted_entry_t e[TRK_MAX_WANTED];
};

trk_wanted_t *trk_wanted_new(void) {
  trk_wanted_t *w = calloc(1, sizeof(trk_wanted_t));
  if (w != NULL)
    w->ttl_ms = TRK_WANTED_TTL_MS;
  return w;
}

void trk_wanted_set_ttl(trk_wanted_t *w, uint64_t ttl_ms) {
  w->ttl_ms = ttl_ms == 0 ? TRK_WANTED_TTL_MS : ttl_ms;
}

static void remove_at(trk_wanted_t *w, uint32_t i) {
  trk_wanted_entry_t *e = &w->e[i];
  free(e->chosen);
  memmove(e, e + 1, (size_t)(w->n - i - 1u) * sizeof(*e));
  w->n--;
  w->version++;
}

void trk_wanted_free(trk_wanted_t *w) {
  if (w == NULL)
    return;
  for (uint32_t i = 0; i < w->n; i++)
    free(w->e[i].chosen);
  free(w);
}

int trk_wanted_uri_valid(const char *uri) {
  if (uri == NULL)
    return WS_EUSAGE;
  size_t n = strnlen(uri, TRK_URI_MAX + 1);
  size_t pre = sizeof(S3_SCHEME) - 1u;
  if (n > TRK_URI_MAX || n <= pre || memcmp(uri, S3_SCHEME, pre) != 0)
    return WS_EUSAGE;
  for (size_t i = pre; i < n; i++) {
    unsigned char c = (unsigned char)uri[i];
    if (c <= 0x20 || c >= 0x7F || c == '"' || c == '\\')
      return WS_EUSAGE;
  }
  return 0;
}

int trk_wanted_uri_digest(const char *uri, ws_hash_t *out) {
  if (trk_wanted_uri_valid(uri) < 0)
    return WS_EUSAGE;
  const size_t plen = sizeof(WS_DIGEST_PREFIX) - 1u;
  int found = 0;
  ws_hash_t h;
  const char *seg = uri + sizeof(S3_SCHEME) - 1u;
  while (*seg != '\0') {
    const char *end = strchr(seg, '/');
    size_t len = end == NULL ? strlen(seg) : (size_t)(end - seg);
    if (len == WS_DIGEST_STR_LEN && memcmp(seg, WS_DIGEST_PREFIX, plen) == 0 &&
        ws_hash_from_hex(seg + plen, WS_SHA256_HEX_LEN, &h) == 0) {
      *out = h;
      found = 1;
    }
    if (end == NULL)
      break;
    seg = end + 1;
  }
  return found ? 0 : WS_ENOTFOUND;
}

static trk_wanted_entry_t *find_digest(trk_wanted_t *w, const ws_hash_t *d) {
  for (uint32_t i = 0; i < w->n; i++)
    if (w->e[i].has_digest && ws_hash_eq(&w->e[i].digest, d))
      return &w->e[i];
  return NULL;
}

static trk_wanted_entry_t *find_uri(trk_wanted_t *w, const char *uri) {
  for (uint32_t i = 0; i < w->n; i++)
    if (strcmp(w->e[i].uri, uri) == 0)
      return &w->e[i];
  return NULL;
}

static void set_uri(trk_wanted_entry_t *e, const char *uri) {
  size_t n = strnlen(uri, TRK_URI_MAX);
  memcpy(e->uri, uri, n);
  e->uri[n] = '\0';
}

int trk_wanted_add(trk_wanted_t *w, const ws_hash_t *digest, const char *uri,
                   uint64_t now_ms) {
  ws_hash_t d;
  int has_d = 0;
  if (uri != NULL && uri[0] == '\0')
    uri = NULL;
  if (digest == NULL && uri == NULL)
    return WS_EUSAGE;
  if (uri != NULL) {
    int rc = trk_wanted_uri_digest(uri, &d);
    if (rc == WS_EUSAGE)
      return rc;
    has_d = rc == 0;
    if (has_d && digest != NULL && !ws_hash_eq(&d, digest))
      return WS_EDIGEST;
  }
  if (digest != NULL) {
    d = *digest;
    has_d = 1;
  }
  trk_wanted_entry_t *e = has_d ? find_digest(w, &d) : find_uri(w, uri);
  if (e != NULL) {
    if (uri != NULL && strcmp(e->uri, uri) != 0) {
      set_uri(e, uri);
      w->version++;
    }
    return 1;
  }
  if (w->n >= TRK_MAX_WANTED) {
    /* Full: the oldest prefetch makes room (docs/operations.md). */
    remove_at(w, 0);
    w->evicted++;
  }
  e = &w->e[w->n];
  memset(e, 0, sizeof(*e));
  e->has_digest = has_d;
  if (has_d) {
    e->digest = d;
    ws_digest_to_str(&d, e->digest_str);
  }
  if (uri != NULL)
    set_uri(e, uri);
  e->added_ms = now_ms;
  w->n++;
  w->version++;
  return 0;
}

int trk_wanted_remove(trk_wanted_t *w, const char *key) {
  if (key == NULL || key[0] == '\0')
    return WS_ENOTFOUND;
  for (uint32_t i = 0; i < w->n; i++) {
    trk_wanted_entry_t *e = &w->e[i];
    if (strcmp(e->digest_str, key) == 0 || strcmp(e->uri, key) == 0) {
      remove_at(w, i);
      return 0;
    }
  }
  return WS_ENOTFOUND;
}

static int sel_eq(const trk_selector_t *a, const trk_selector_t *b) {
  if (strcmp(a->labels, b->labels) != 0 || a->nzones != b->nzones ||
      a->count != b->count || a->percent != b->percent)
    return 0;
  for (uint32_t i = 0; i < a->nzones; i++)
    if (strcmp(a->zones[i], b->zones[i]) != 0)
      return 0;
  return 1;
}

int trk_wanted_set_selector(trk_wanted_t *w, const ws_hash_t *digest,
                            const trk_selector_t *sel) {
  trk_wanted_entry_t *e = find_digest(w, digest);
  if (e == NULL)
    return WS_ENOTFOUND;
  if (sel == NULL ? !e->has_sel : e->has_sel && sel_eq(&e->sel, sel))
    return 0;
  e->has_sel = sel != NULL;
  memset(&e->sel, 0, sizeof(e->sel));
  if (sel != NULL)
    e->sel = *sel;
  free(e->chosen);
  e->chosen = NULL;
  e->nchosen = e->chosen_cap = 0;
  w->version++;
  return 1;
}

/* Index of node_id in the sorted chosen list, or where it would go. */
static uint32_t chosen_pos(const trk_wanted_entry_t *e, const char *id,
                           int *found) {
  uint32_t lo = 0, hi = e->nchosen;
  *found = 0;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2u;
    int c = strcmp(e->chosen[mid], id);
    if (c == 0) {
      *found = 1;
      return mid;
    }
    if (c < 0)
      lo = mid + 1u;
    else
      hi = mid;
  }
  return lo;
}

int trk_wanted_is_chosen(const trk_wanted_entry_t *e, const char *node_id) {
  int found;
  (void)chosen_pos(e, node_id, &found);
  return found;
}

int trk_wanted_choose(trk_wanted_t *w, const ws_hash_t *digest,
                      const char *node_id) {
  trk_wanted_entry_t *e = find_digest(w, digest);
  int found;
  if (e == NULL)
    return WS_ENOTFOUND;
  if (node_id == NULL || node_id[0] == '\0' ||
      strnlen(node_id, TRK_NODE_ID_MAX + 1u) > TRK_NODE_ID_MAX)
    return WS_EUSAGE;
  uint32_t at = chosen_pos(e, node_id, &found);
  if (found)
    return 0;
  if (e->nchosen >= TRK_MAX_PEERS_MAX)
    return WS_ELIMIT;
  if (e->nchosen == e->chosen_cap) {
    uint32_t cap = e->chosen_cap == 0 ? 8u : e->chosen_cap * 2u;
    void *p = realloc(e->chosen, (size_t)cap * sizeof(*e->chosen));
    if (p == NULL)
      return -ENOMEM;
    e->chosen = p;
    e->chosen_cap = cap;
  }
  memmove(&e->chosen[at + 1u], &e->chosen[at],
          (size_t)(e->nchosen - at) * sizeof(*e->chosen));
  snprintf(e->chosen[at], sizeof(e->chosen[at]), "%s", node_id);
  e->nchosen++;
  w->version++;
  return 0;
}

uint32_t trk_wanted_count(const trk_wanted_t *w) {
  return w->n;
}

const trk_wanted_entry_t *trk_wanted_at(const trk_wanted_t *w, uint32_t i) {
  return i < w->n ? &w->e[i] : NULL;
}

const trk_wanted_entry_t *trk_wanted_find(const trk_wanted_t *w,
                                          const ws_hash_t *digest) {
  return find_digest((trk_wanted_t *)w, digest);
}

uint64_t trk_wanted_version(const trk_wanted_t *w) {
  return w->version;
}

/* Length of the model part of uri: everything before its last
 * "sha256-<hex>" segment (s3://B/P/MODEL/ of s3://B/P/MODEL/sha256-<hex>/);
 * 0 when it names no digest. */
static size_t model_len(const char *uri) {
  size_t n = 0;
  const char *seg = uri;
  while ((seg = strstr(seg, "/" WS_DIGEST_PREFIX)) != NULL) {
    const char *end = strchr(seg + 1, '/');
    size_t len = end == NULL ? strlen(seg + 1) : (size_t)(end - seg - 1);
    if (len == WS_DIGEST_STR_LEN)
      n = (size_t)(seg - uri) + 1u;
    seg++;
  }
  return n;
}

static int same_model(const trk_wanted_entry_t *a,
                      const trk_wanted_entry_t *b) {
  size_t na = model_len(a->uri);
  if (na == 0 || na != model_len(b->uri) || memcmp(a->uri, b->uri, na) != 0 ||
      a->has_sel != b->has_sel)
    return 0;
  return !a->has_sel || sel_eq(&a->sel, &b->sel);
}

uint32_t trk_wanted_supersede(trk_wanted_t *w) {
  uint32_t removed = 0;
  for (uint32_t i = 0; i < w->n;) {
    uint32_t j = i + 1u;
    while (j < w->n && !same_model(&w->e[i], &w->e[j]))
      j++;
    if (j < w->n) { /* a newer release of the same model, same nodes */
      remove_at(w, i);
      w->superseded++;
      removed++;
    } else {
      i++;
    }
  }
  return removed;
}

uint32_t trk_wanted_expire(trk_wanted_t *w, uint64_t now_ms) {
  uint32_t removed = 0;
  for (uint32_t i = 0; i < w->n;) {
    if (now_ms >= w->e[i].added_ms && now_ms - w->e[i].added_ms >= w->ttl_ms) {
      remove_at(w, i);
      w->expired++;
      removed++;
    } else {
      i++;
    }
  }
  return removed;
}

void trk_wanted_removals(const trk_wanted_t *w, trk_wanted_removals_t *out) {
  out->evicted = w->evicted;
  out->expired = w->expired;
  out->superseded = w->superseded;
}

/* "selector" and "chosen" of a state file entry. */
static int sel_save(cJSON *o, const trk_wanted_entry_t *e) {
  cJSON *sel = trk_selector_to_json(&e->sel);
  if (sel == NULL || !cJSON_AddItemToObject(o, "selector", sel)) {
    cJSON_Delete(sel);
    return -ENOMEM;
  }
  cJSON *arr = cJSON_AddArrayToObject(o, "chosen");
  if (arr == NULL)
    return -ENOMEM;
  for (uint32_t i = 0; i < e->nchosen; i++)
    if (!cJSON_AddItemToArray(arr, cJSON_CreateString(e->chosen[i])))
      return -ENOMEM;
  return 0;
}

static int sel_load(trk_wanted_t *w, const ws_hash_t *d, const cJSON *it) {
  const cJSON *js = cJSON_GetObjectItemCaseSensitive(it, "selector");
  const cJSON *jc = cJSON_GetObjectItemCaseSensitive(it, "chosen");
  const cJSON *c;
  trk_selector_t sel;
  const char *msg;
  if (js == NULL || cJSON_IsNull(js))
    return 0;
  if (trk_selector_from_json(js, &sel, &msg) < 0 ||
      trk_wanted_set_selector(w, d, &sel) < 0)
    return WS_EUSAGE;
  cJSON_ArrayForEach(c, jc) {
    if (!cJSON_IsString(c) || trk_wanted_choose(w, d, c->valuestring) < 0)
      return WS_EUSAGE;
  }
  return 0;
}

char *trk_wanted_to_json(const trk_wanted_t *w) {
  char *out = NULL;
  cJSON *root = cJSON_CreateObject();
  if (root == NULL)
    goto done;
  cJSON *arr = cJSON_AddArrayToObject(root, "wanted");
  if (cJSON_AddNumberToObject(root, "version", 1) == NULL || arr == NULL)
    goto done;
  for (uint32_t i = 0; i < w->n; i++) {
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
      goto done;
    cJSON_AddItemToArray(arr, o);
    if (w->e[i].has_digest &&
        cJSON_AddStringToObject(o, "digest", w->e[i].digest_str) == NULL)
      goto done;
    if (w->e[i].uri[0] != '\0' &&
        cJSON_AddStringToObject(o, "uri", w->e[i].uri) == NULL)
      goto done;
    if (w->e[i].has_sel && sel_save(o, &w->e[i]) < 0)
      goto done;
  }
  out = cJSON_PrintUnformatted(root);

done:
  cJSON_Delete(root);
  return out;
}

int trk_wanted_load_json(trk_wanted_t *w, const char *buf, size_t len,
                         uint64_t now_ms, uint32_t *skipped) {
  int rc = 0;
  uint32_t bad = 0;
  if (len > STATE_FILE_MAX)
    return WS_ELIMIT;
  cJSON *root = cJSON_ParseWithLength(buf, len);
  cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "wanted");
  if (root == NULL || !cJSON_IsArray(arr)) {
    rc = WS_EJSON;
    goto done;
  }
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(it, "digest");
    const cJSON *ju = cJSON_GetObjectItemCaseSensitive(it, "uri");
    ws_hash_t d;
    const ws_hash_t *dp = NULL;
    const char *uri = cJSON_IsString(ju) ? ju->valuestring : NULL;
    if (cJSON_IsString(jd)) {
      if (ws_digest_from_str(jd->valuestring, &d) < 0) {
        bad++;
        continue;
      }
      dp = &d;
    }
    ws_hash_t ud;
    if (dp == NULL && uri != NULL && trk_wanted_uri_digest(uri, &ud) == 0)
      dp = &ud;
    if (trk_wanted_add(w, dp, uri, now_ms) < 0 ||
        (dp != NULL && sel_load(w, dp, it) < 0))
      bad++;
  }

done:
  cJSON_Delete(root);
  if (skipped != NULL)
    *skipped = bad;
  return rc;
}
