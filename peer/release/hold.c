/* hold.c - holds and claims of a release, as the release table shows them:
 *
 *   hold    a named "a server uses this release" with an optional TTL the
 *           holder renews; while one has not expired the cache never
 *           evicts the release (ws_cache_hold, persisted in state/);
 *   claim   a local prefetch or wait asked for a release already READY: it
 *           becomes its model's current release (ws_cache_activate), which
 *           decides the current and previous releases retention keeps.
 *
 * The cache's ledger is the truth; the release keeps a copy of its holds
 * (taken at startup from ws_cache_list, then after each change) so that
 * the JSON a loop thread builds never waits for the ledger's mutex.
 * Owns: the worker jobs below (each holds a reference on its release).
 * Thread: loop thread; *_work on workers.
 */
#include "release/release-int.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "ws_log.h"

typedef struct {
  peer_release_t *rel;
  int remove;   /* unhold */
  int activate; /* claim, no hold */
  char name[WS_CACHE_HOLD_NAME_MAX];
  uint64_t ttl_ms;
  int status;
  ws_cache_hold_t holds[WS_CACHE_HOLDS_MAX]; /* live holds after the change */
  uint32_t nholds;
  peer_release_hold_fn cb;
  void *arg;
} hold_job_t;

static void hold_work(void *arg) {
  hold_job_t *job = arg;
  ws_cache_t *c = ws_store_cache(job->rel->t->ctx->store);
  if (job->activate)
    job->status = ws_cache_activate(c, &job->rel->digest);
  else if (job->remove)
    job->status = ws_cache_unhold(c, &job->rel->digest, job->name);
  else
    job->status =
        ws_cache_hold(c, &job->rel->digest, job->name, job->ttl_ms, NULL);
  if (job->activate || (job->status != 0 && job->status != WS_ENOTFOUND))
    return;
  /* The ledger's view after the change (expired holds dropped). */
  ws_cache_release_info_t *v = NULL;
  size_t n = 0;
  if (ws_cache_list(c, &v, &n) != 0) {
    job->nholds = UINT32_MAX; /* keep the old copy */
    return;
  }
  job->nholds = 0;
  for (size_t i = 0; i < n; i++) {
    if (!ws_hash_eq(&v[i].digest, &job->rel->digest))
      continue;
    job->nholds = v[i].nholds;
    memcpy(job->holds, v[i].holds, v[i].nholds * sizeof(job->holds[0]));
  }
  free(v);
}

static void hold_after(void *arg, int status) {
  hold_job_t *job = arg;
  peer_release_t *rel = job->rel;
  int rc = status != 0 ? status : job->status;
  if (job->activate) {
    if (rc != 0)
      WS_LOGW("release %s: cannot mark current: %s", rel->digest_str,
              ws_strerror(rc));
  } else {
    if (status == 0 && job->nholds != UINT32_MAX)
      peer_release_holds_set(rel, job->holds, job->nholds);
    if (rc == 0)
      WS_LOGI("release %s: hold %s %s", rel->digest_str, job->name,
              job->remove ? "released" : "taken");
    if (job->cb != NULL)
      job->cb(job->arg, rel, rc);
  }
  peer_release_unref(rel);
  free(job);
}

static int hold_queue(peer_release_t *rel, hold_job_t *job) {
  job->rel = rel;
  peer_rel_ref(rel);
  int rc = peer_ctx_queue(rel->t->ctx, hold_work, hold_after, job);
  if (rc != 0) {
    peer_release_unref(rel);
    free(job);
  }
  return rc;
}

int peer_release_hold(peer_release_t *rel, const char *name, uint64_t ttl_ms,
                      int remove, peer_release_hold_fn cb, void *arg) {
  if (!ws_cache_hold_name_ok(name))
    return WS_EUSAGE;
  if (rel->state != PEER_REL_READY)
    return WS_EBUSY;
  hold_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL)
    return -ENOMEM;
  memcpy(job->name, name, strlen(name) + 1); /* checked: fits */
  job->ttl_ms = ttl_ms;
  job->remove = remove;
  job->cb = cb;
  job->arg = arg;
  return hold_queue(rel, job);
}

void peer_release_claim(peer_release_t *rel) {
  if (rel->state != PEER_REL_READY)
    return; /* becomes current when it is published */
  hold_job_t *job = calloc(1, sizeof(*job));
  if (job != NULL)
    job->activate = 1;
  if (job == NULL || hold_queue(rel, job) != 0)
    WS_LOGW("release %s: cannot mark current: out of memory", rel->digest_str);
}

void peer_release_holds_set(peer_release_t *rel, const ws_cache_hold_t *holds,
                            uint32_t n) {
  if (n > WS_CACHE_HOLDS_MAX)
    n = WS_CACHE_HOLDS_MAX;
  memcpy(rel->holds, holds, n * sizeof(*holds));
  rel->nholds = n;
}

uint32_t peer_release_holds_live(const peer_release_t *rel) {
  uint64_t now_ns = peer_now_unix_ms() * 1000000u;
  uint32_t n = 0;
  for (uint32_t i = 0; i < rel->nholds; i++)
    n += rel->holds[i].expires_ns == 0 || rel->holds[i].expires_ns > now_ns;
  return n;
}

void peer_rel_holds_json(const peer_release_t *rel, struct cJSON *o) {
  uint64_t now_ns = peer_now_unix_ms() * 1000000u;
  cJSON *arr = cJSON_AddArrayToObject(o, "holds");
  for (uint32_t i = 0; arr != NULL && i < rel->nholds; i++) {
    const ws_cache_hold_t *h = &rel->holds[i];
    if (h->expires_ns != 0 && h->expires_ns <= now_ns)
      continue;
    cJSON *j = cJSON_CreateObject();
    if (j == NULL || !cJSON_AddItemToArray(arr, j))
      break;
    cJSON_AddStringToObject(j, "name", h->name);
    if (h->expires_ns == 0)
      cJSON_AddNullToObject(j, "expires_in_s");
    else
      cJSON_AddNumberToObject(j, "expires_in_s",
                              (double)((h->expires_ns - now_ns) / 1000000u) /
                                  1000.0);
  }
}
