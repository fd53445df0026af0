/* cache_state.c - per-release state files state/sha256-<hex>.json holding
 * what the disk scan cannot know: pinned, publish time, last access.
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

#define STATE_FILE_MAX 4096

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
  cJSON_Delete(o);
}

int cache_state_save(ws_cache_t *c, const cache_rel_t *r, int durable) {
  char path[PATH_MAX], pub[24], acc[24];
  cJSON *o;
  char *text;
  int err;
  if ((err = state_path(c, &r->digest, path, sizeof(path))) != 0)
    return err;
  snprintf(pub, sizeof(pub), "%llu", (unsigned long long)r->published_ns);
  snprintf(acc, sizeof(acc), "%llu", (unsigned long long)r->accessed_ns);
  o = cJSON_CreateObject();
  if (o == NULL || cJSON_AddBoolToObject(o, "pinned", r->pinned) == NULL ||
      cJSON_AddStringToObject(o, "published_ns", pub) == NULL ||
      cJSON_AddStringToObject(o, "accessed_ns", acc) == NULL ||
      cJSON_AddStringToObject(o, "model", r->model) == NULL ||
      cJSON_AddStringToObject(o, "version", r->version) == NULL) {
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
