/* api.c - p2pd's local HTTP/JSON API (routes listed in docs/operations.md):
 * health, readiness, metrics, prefetch, release list/status/wait, pin,
 * unpin, evict, verify.
 *
 * Owns nothing long-lived: each handler answers at once or hands the
 * request to a release (prefetch, wait) or to a worker job (pin, evict,
 * verify) that answers it. Thread: loop thread; *_work on workers.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "core/tunables.h"
#include "release/release.h"
#include "ws_log.h"

#define API_RELEASES "/api/v1/releases"

int peer_api_status_for(int err) {
  switch (err) {
  case 0:
    return 200;
  case WS_ES3NOKEY:
  case WS_ENOTFOUND:
    return 404;
  case WS_ES3AUTH:
  case WS_ECREDS:
    return 403;
  case WS_EDIGEST:
  case WS_EMANIFEST:
  case WS_EPATH:
  case WS_EDUPNAME:
  case WS_ECHUNKSIZE:
  case WS_ECHUNKCOUNT:
  case WS_ELIMIT:
    return 422;
  case WS_ENOSPACE:
  case -ENOSPC:
    return 507;
  case WS_EUSAGE:
  case WS_EJSON:
    return 400;
  case WS_EBUSY:
    return 409;
  case WS_ECANCELED:
    return 503;
  default:
    return 502;
  }
}

/* Answers 503 unless the cache is open; returns 1 when it answered. */
static int api_not_ready(peer_daemon_t *d, ws_httpd_req_t *req) {
  if (peer_daemon_is_running(d))
    return 0;
  ws_httpd_reply_error(req, 503, WS_EBUSY,
                       d->state == PEER_DAEMON_STARTING
                           ? "p2pd is opening its cache"
                           : "p2pd is stopping");
  return 1;
}

static void api_healthz(ws_httpd_req_t *req, void *arg) {
  ws_httpd_reply(req, 200, "text/plain", "ok\n", 3);
}

static void api_readyz(ws_httpd_req_t *req, void *arg) {
  peer_daemon_t *d = arg;
  if (peer_daemon_is_running(d))
    ws_httpd_reply(req, 200, "text/plain", "ready\n", 6);
  else
    ws_httpd_reply(req, 503, "text/plain", "not ready\n", 10);
}

static void api_metrics(ws_httpd_req_t *req, void *arg) {
  peer_metrics_reply(arg, req);
}

static void api_prefetch(ws_httpd_req_t *req, void *arg) {
  peer_daemon_t *d = arg;
  cJSON *body = NULL;
  ws_hash_t expect;
  if (api_not_ready(d, req))
    return;
  if (ws_httpd_req_json(req, &body) != 0 || !cJSON_IsObject(body)) {
    ws_httpd_reply_error(req, 400, WS_EJSON, "body must be a JSON object");
    goto free_body;
  }
  const cJSON *uri = cJSON_GetObjectItemCaseSensitive(body, "uri");
  const cJSON *dg = cJSON_GetObjectItemCaseSensitive(body, "digest");
  if ((uri != NULL && !cJSON_IsString(uri) && !cJSON_IsNull(uri)) ||
      (dg != NULL && !cJSON_IsString(dg) && !cJSON_IsNull(dg))) {
    ws_httpd_reply_error(req, 400, WS_EUSAGE, "uri and digest must be strings");
    goto free_body;
  }
  const char *u = cJSON_IsString(uri) ? uri->valuestring : NULL;
  int has_expect = cJSON_IsString(dg);
  if (has_expect && ws_digest_from_str(dg->valuestring, &expect) != 0) {
    ws_httpd_reply_error(req, 400, WS_EHEX, "digest must be sha256-<64 hex>");
    goto free_body;
  }
  if (u == NULL && !has_expect) {
    ws_httpd_reply_error(req, 400, WS_EUSAGE, "give uri and/or digest");
    goto free_body;
  }
  peer_release_prefetch(d, u, has_expect ? &expect : NULL, req);
free_body:
  cJSON_Delete(body);
}

static void api_list(ws_httpd_req_t *req, void *arg) {
  peer_daemon_t *d = arg;
  if (api_not_ready(d, req))
    return;
  cJSON *o = cJSON_CreateObject();
  cJSON *arr = cJSON_AddArrayToObject(o, "releases");
  if (arr == NULL) {
    cJSON_Delete(o);
    ws_httpd_reply_error(req, 500, -ENOMEM, NULL);
    return;
  }
  /* The list is newest first; show oldest first like `ls -tr`. */
  size_t n = 0;
  for (peer_release_t *r = d->releases; r != NULL; r = r->next)
    n++;
  for (size_t i = n; i-- > 0;) {
    peer_release_t *r = d->releases;
    for (size_t k = 0; k < i; k++)
      r = r->next;
    cJSON_AddItemToArray(arr, peer_release_json(r));
  }
  ws_httpd_reply_json(req, 200, o);
}

/* ---- worker-backed actions --------------------------------------------- */

typedef enum { ACT_PIN, ACT_UNPIN, ACT_EVICT, ACT_VERIFY } api_action_t;

typedef struct {
  peer_daemon_t *d;
  ws_httpd_req_t *req;
  api_action_t act;
  ws_hash_t digest;
  int status;
  uint32_t nfiles;
  char **names; /* verify: file names (owned) */
  uint8_t *ok;  /* verify: 1 if the blob re-hashed to its sha256 */
} api_job_t;

static void api_job_free(api_job_t *job) {
  for (uint32_t i = 0; job->names != NULL && i < job->nfiles; i++)
    free(job->names[i]);
  free(job->names);
  free(job->ok);
  free(job);
}

static void api_verify(api_job_t *job) {
  ws_store_t *st = job->d->store;
  char *bytes = NULL;
  size_t len = 0;
  ws_manifest_t *m = NULL;
  job->status = ws_store_release_lookup(st, &job->digest, &bytes, &len);
  if (job->status != 0)
    return;
  job->status = ws_manifest_parse(bytes, len, NULL, &m, NULL, 0);
  free(bytes);
  if (job->status != 0)
    return;
  job->names = calloc(m->nfiles + 1u, sizeof(*job->names));
  job->ok = calloc(m->nfiles + 1u, 1);
  if (job->names == NULL || job->ok == NULL) {
    job->status = -ENOMEM;
    goto free_m;
  }
  for (uint32_t i = 0; i < m->nfiles; i++) {
    job->names[i] = strdup(m->files[i].name);
    if (job->names[i] == NULL) {
      job->status = -ENOMEM;
      goto free_m;
    }
    job->nfiles = i + 1;
    job->ok[i] = ws_store_blob_verify(st, &m->files[i].sha256) == 0;
  }
free_m:
  ws_manifest_free(m);
}

static void api_job_work(void *arg) {
  api_job_t *job = arg;
  ws_cache_t *c = ws_store_cache(job->d->store);
  switch (job->act) {
  case ACT_PIN:
  case ACT_UNPIN:
    job->status = ws_cache_pin(c, &job->digest, job->act == ACT_PIN);
    break;
  case ACT_EVICT:
    job->status = ws_cache_evict(c, &job->digest, 0);
    break;
  case ACT_VERIFY:
    api_verify(job);
    break;
  }
}

static void api_job_after(void *arg, int status) {
  api_job_t *job = arg;
  peer_daemon_t *d = job->d;
  ws_httpd_req_t *req = job->req;
  int rc = status != 0 ? status : job->status;
  peer_release_t *rel = peer_release_find(d, &job->digest);
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&job->digest, ds);
  if (job->act == ACT_EVICT && rc == WS_ENOTFOUND)
    rc = 0; /* already gone from the cache: drop it from the list too */
  if (rc != 0) {
    ws_httpd_reply_error(req, rc == WS_EBUSY ? 409 : peer_api_status_for(rc),
                         rc, NULL);
    goto done;
  }
  switch (job->act) {
  case ACT_PIN:
  case ACT_UNPIN:
    if (rel == NULL) {
      ws_httpd_reply_error(req, 404, WS_ENOTFOUND, NULL);
      break;
    }
    rel->pinned = job->act == ACT_PIN;
    WS_LOGI("release %s: %s", ds, rel->pinned ? "pinned" : "unpinned");
    ws_httpd_reply_json(req, 200, peer_release_json(rel));
    break;
  case ACT_EVICT: {
    if (rel != NULL &&
        (rel->state == PEER_REL_READY || rel->state == PEER_REL_FAILED))
      peer_release_remove(rel);
    WS_LOGI("release %s: evicted", ds);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "digest", ds);
    cJSON_AddBoolToObject(o, "evicted", 1);
    ws_httpd_reply_json(req, 200, o);
    break;
  }
  case ACT_VERIFY: {
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    int all = 1;
    for (uint32_t i = 0; i < job->nfiles; i++) {
      cJSON *f = cJSON_CreateObject();
      cJSON_AddStringToObject(f, "name", job->names[i]);
      cJSON_AddBoolToObject(f, "ok", job->ok[i]);
      cJSON_AddItemToArray(arr, f);
      all &= job->ok[i];
    }
    cJSON_AddStringToObject(o, "digest", ds);
    cJSON_AddBoolToObject(o, "ok", all);
    cJSON_AddItemToObject(o, "files", arr);
    if (!all)
      WS_LOGW("release %s: verify found damaged files", ds);
    ws_httpd_reply_json(req, 200, o);
    break;
  }
  }
done:
  api_job_free(job);
}

static void api_action(peer_daemon_t *d, ws_httpd_req_t *req,
                       peer_release_t *rel, api_action_t act) {
  if (act == ACT_EVICT && rel->state == PEER_REL_FAILED) {
    /* Nothing published: only the list entry goes. */
    peer_release_remove(rel);
    ws_httpd_reply(req, 200, "application/json", "{\"evicted\":true}", 16);
    return;
  }
  if (rel->state != PEER_REL_READY) {
    ws_httpd_reply_error(req, 409, WS_EBUSY, "release is not ready");
    return;
  }
  if (act == ACT_EVICT && rel->pinned) {
    ws_httpd_reply_error(req, 409, WS_EBUSY, "release is pinned; unpin first");
    return;
  }
  api_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL) {
    ws_httpd_reply_error(req, 503, -ENOMEM, NULL);
    return;
  }
  job->d = d;
  job->req = req;
  job->act = act;
  job->digest = rel->digest;
  int rc = peer_daemon_queue(d, api_job_work, api_job_after, job);
  if (rc != 0) {
    free(job);
    ws_httpd_reply_error(req, 503, rc, NULL);
  }
}

void peer_api_pin(peer_daemon_t *d, ws_httpd_req_t *req, peer_release_t *rel,
                  int pin) {
  api_action(d, req, rel, pin ? ACT_PIN : ACT_UNPIN);
}

/* POST /api/v1/seed (seed.c) */
static void api_seed(ws_httpd_req_t *req, void *arg) {
  peer_daemon_t *d = arg;
  if (api_not_ready(d, req))
    return;
  peer_seed_handle(d, req);
}

/* /api/v1/releases/<digest>[/action] */
static void api_release(ws_httpd_req_t *req, void *arg) {
  peer_daemon_t *d = arg;
  const char *method = ws_httpd_req_method(req);
  const char *rest = ws_httpd_req_path_rest(req);
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_hash_t digest;
  if (api_not_ready(d, req))
    return;
  size_t n = strcspn(rest, "/");
  if (n != WS_DIGEST_STR_LEN) {
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "want sha256-<64 hex>");
    return;
  }
  memcpy(ds, rest, n);
  ds[n] = '\0';
  const char *action = rest[n] == '/' ? rest + n + 1 : "";
  if (ws_digest_from_str(ds, &digest) != 0) {
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "want sha256-<64 hex>");
    return;
  }
  peer_release_t *rel = peer_release_find(d, &digest);
  if (rel == NULL) {
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "unknown release");
    return;
  }
  int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
  if (*action == '\0' && get) {
    ws_httpd_reply_json(req, 200, peer_release_json(rel));
  } else if (*action == '\0' && strcmp(method, "DELETE") == 0) {
    api_action(d, req, rel, ACT_EVICT);
  } else if (strcmp(action, "wait") == 0 && get) {
    char buf[32];
    uint64_t timeout_ms = PEER_WAIT_TIMEOUT_DEFAULT_MS;
    if (ws_httpd_req_query_get(req, "timeout_ms", buf, sizeof(buf)) >= 0) {
      char *end = NULL;
      errno = 0;
      unsigned long long v = strtoull(buf, &end, 10);
      if (errno != 0 || end == buf || *end != '\0' || buf[0] == '-') {
        ws_httpd_reply_error(req, 400, WS_EUSAGE, "timeout_ms: want integer");
        return;
      }
      timeout_ms = v > PEER_WAIT_TIMEOUT_MAX_MS ? PEER_WAIT_TIMEOUT_MAX_MS : v;
    }
    peer_release_wait(rel, req, timeout_ms);
  } else if (strcmp(action, "pin") == 0 && post) {
    api_action(d, req, rel, ACT_PIN);
  } else if (strcmp(action, "unpin") == 0 && post) {
    api_action(d, req, rel, ACT_UNPIN);
  } else if (strcmp(action, "verify") == 0 && post) {
    api_action(d, req, rel, ACT_VERIFY);
  } else {
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "no such action");
  }
}

int peer_api_routes(peer_daemon_t *d, ws_httpd_t *srv) {
  static const struct {
    const char *method, *path;
    ws_httpd_match_t match;
    ws_httpd_handler_cb cb;
  } routes[] = {
      {"GET", "/healthz", WS_HTTPD_MATCH_EXACT, api_healthz},
      {"GET", "/readyz", WS_HTTPD_MATCH_EXACT, api_readyz},
      {"GET", "/metrics", WS_HTTPD_MATCH_EXACT, api_metrics},
      {"POST", "/api/v1/prefetch", WS_HTTPD_MATCH_EXACT, api_prefetch},
      {"POST", "/api/v1/seed", WS_HTTPD_MATCH_EXACT, api_seed},
      {"GET", API_RELEASES, WS_HTTPD_MATCH_EXACT, api_list},
      {"GET", API_RELEASES "/", WS_HTTPD_MATCH_PREFIX, api_release},
      {"POST", API_RELEASES "/", WS_HTTPD_MATCH_PREFIX, api_release},
      {"DELETE", API_RELEASES "/", WS_HTTPD_MATCH_PREFIX, api_release},
  };
  for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
    int rc = ws_httpd_route(srv, routes[i].method, routes[i].path,
                            routes[i].match, routes[i].cb, d);
    if (rc != 0)
      return rc;
  }
  return 0;
}
