/* cache_state.c - per-release state files state/sha256-<hex>.json holding
 * what the disk scan cannot know: pinned, publish time, last access, last
 * activation, holds ([{"name", "expires_ns"}], expires_ns "0" = until
 * released).
 * Written via tmp + rename (+ fsync when durable). Callers hold c->mu.
 * Worker threads only.
 *
 * Times are nanoseconds since the epoch, stored as decimal strings because
 * JSON numbers (doubles) cannot hold them exactly.
 */
#include "store-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FILE_MAX 16384 /* 16 holds and two 255-byte names fit */

static int state_path(const ws_cache_t *c, const ws_hash_t *digest, char *buf,
                      size_t len) {
  char hex[WS_SHA256_HEX_LEN + 1];
  int n;
  ws_hash_to_hex(digest, hex);
  n = snprintf(buf, len, "%s/state/sha256-%s.json", c->root, hex);
  return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

static int ns_get(const cJSON *o, const char *key, uint64_t *out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
  char *end;
  unsigned long long v;
  if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
    return -1;
  errno = 0;
  v = strtoull(it->valuestring, &end, 10);
  if (errno != 0 || *end != '\0')
    return -1;
  *out = (uint64_t)v;
  return 0;
}

/* Hostile input: names are checked, extra or malformed entries skipped. */
static void holds_load(cache_rel_t *r, const cJSON *arr) {
  const cJSON *it;
  r->nholds = 0;
  if (!cJSON_IsArray(arr))
    return;
  cJSON_ArrayForEach(it, arr) {
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(it, "name");
    uint64_t exp;
    if (r->nholds == WS_CACHE_HOLDS_MAX)
      break;
    if (!cJSON_IsString(jn) || !ws_cache_hold_name_ok(jn->valuestring) ||
        ns_get(it, "expires_ns", &exp) != 0)
      continue;
    ws_cache_hold_t *h = &r->holds[r->nholds++];
    memset(h, 0, sizeof(*h));
    memcpy(h->name, jn->valuestring, strlen(jn->valuestring) + 1);
    h->expires_ns = exp;
  }
}

/* [{"name", "expires_ns"}] of r's holds, added to o; NULL on -ENOMEM. */
static cJSON *holds_save(const cache_rel_t *r, cJSON *o) {
  cJSON *arr = cJSON_AddArrayToObject(o, "holds");
  char exp[24];
  for (uint32_t i = 0; arr != NULL && i < r->nholds; i++) {
    cJSON *h = cJSON_CreateObject();
    snprintf(exp, sizeof(exp), "%llu",
             (unsigned long long)r->holds[i].expires_ns);
    if (h == NULL || !cJSON_AddItemToArray(arr, h) ||
        cJSON_AddStringToObject(h, "name", r->holds[i].name) == NULL ||
        cJSON_AddStringToObject(h, "expires_ns", exp) == NULL)
      return NULL;
  }
  return arr;
}

void cache_state_load(ws_cache_t *c, cache_rel_t *r) {
  char path[PATH_MAX];
  char *buf = NULL;
  size_t len;
  cJSON *o;
  uint64_t v;
  if (state_path(c, &r->digest, path, sizeof(path)) != 0 ||
      store_fs_read_all(path, STATE_FILE_MAX, &buf, &len) != 0)
    return;
  o = cJSON_ParseWithLength(buf, len);
  free(buf);
  if (o == NULL)
    return;
  if (cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "pinned")))
    r->pinned = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "pinned"));
  if (ns_get(o, "published_ns", &v) == 0)
    r->published_ns = v;
  if (ns_get(o, "accessed_ns", &v) == 0)
    r->accessed_ns = v;
  if (ns_get(o, "activated_ns", &v) == 0)
    r->activated_ns = v;
  holds_load(r, cJSON_GetObjectItemCaseSensitive(o, "holds"));
  cJSON_Delete(o);
}

int cache_state_save(ws_cache_t *c, const cache_rel_t *r, int durable) {
  char path[PATH_MAX], pub[24], acc[24], act[24];
  cJSON *o;
  char *text;
  int err;
  if ((err = state_path(c, &r->digest, path, sizeof(path))) != 0)
    return err;
  snprintf(pub, sizeof(pub), "%llu", (unsigned long long)r->published_ns);
  snprintf(acc, sizeof(acc), "%llu", (unsigned long long)r->accessed_ns);
  snprintf(act, sizeof(act), "%llu", (unsigned long long)r->activated_ns);
  o = cJSON_CreateObject();
  if (o == NULL || cJSON_AddBoolToObject(o, "pinned", r->pinned) == NULL ||
      cJSON_AddStringToObject(o, "published_ns", pub) == NULL ||
      cJSON_AddStringToObject(o, "accessed_ns", acc) == NULL ||
      cJSON_AddStringToObject(o, "model", r->model) == NULL ||
      cJSON_AddStringToObject(o, "version", r->version) == NULL ||
      cJSON_AddStringToObject(o, "activated_ns", act) == NULL ||
      holds_save(r, o) == NULL) {
    cJSON_Delete(o);
    return -ENOMEM;
  }
  text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text == NULL)
    return -ENOMEM;
  err = store_fs_write_atomic(path, text, strlen(text), durable);
  cJSON_free(text);
  return err;
}

void cache_state_remove(ws_cache_t *c, const ws_hash_t *digest) {
  char path[PATH_MAX];
  if (state_path(c, digest, path, sizeof(path)) == 0)
    (void)store_fs_rm_rf(path);
}
