/* api.c - p2pd's local HTTP/JSON API (routes listed in docs/operations.md):
 * health, readiness, metrics, prefetch, seed, release list/status/wait,
 * pin, unpin, evict, verify; holds are in api_hold.c.
 *
 * The only place where error codes of the release layer and of seed
 * imports become HTTP statuses and bodies. Owns the HTTP server and the
 * requests in flight: each handler answers at once, or watches a release
 * until it settles (prefetch, wait), or hands the request to a worker job
 * (pin, evict, verify) or a seed import that calls back. Borrows the
 * context, the release table and the swarm.
 * Thread: loop thread; *_work on workers.
 */
#include "api.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/tunables.h"
#include "metrics.h"
#include "release/tag_prefetch.h"
#include "seed.h"
#include "ws_httpd.h"
#include "ws_log.h"

#define API_RELEASES "/api/v1/releases"

struct peer_api_s {
  peer_ctx_t *ctx;
  peer_releases_t *releases;
  peer_swarm_t *swarm; /* NULL when standalone */
  ws_httpd_t *srv;     /* NULL once closed */
  int stopping;        /* peer_api_close was called */
  void (*closed)(void *arg);
  void *closed_arg;
};

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
  case WS_ENOSPC:
  case -ENOSPC:
    return 507;
  case WS_EIO:
    return 500;
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
static int api_not_ready(const peer_api_t *api, ws_httpd_req_t *req) {
  if (api->ctx->running)
    return 0;
  ws_httpd_reply_error(req, 503, WS_EBUSY,
                       api->stopping ? "p2pd is stopping"
                                     : "p2pd is opening its cache");
  return 1;
}

static cJSON *api_str_json(const char *s) {
  return s != NULL ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static void api_healthz(ws_httpd_req_t *req, void *arg) {
  ws_httpd_reply(req, 200, "text/plain", "ok\n", 3);
}

static void api_readyz(ws_httpd_req_t *req, void *arg) {
  peer_api_t *api = arg;
  if (api->ctx->running)
    ws_httpd_reply(req, 200, "text/plain", "ready\n", 6);
  else
    ws_httpd_reply(req, 503, "text/plain", "not ready\n", 10);
}

static void api_metrics(ws_httpd_req_t *req, void *arg) {
  peer_api_t *api = arg;
  peer_metrics_reply(api->ctx, api->swarm, api->releases, req);
}

/* ---- watching releases: prefetch replies and waits ----------------------- */

/* The prefetch reply: where the release is and will be. */
static cJSON *api_prefetch_json(const peer_release_t *rel) {
  cJSON *o = cJSON_CreateObject();
  char path[4096];
  if (o == NULL)
    return NULL;
  cJSON_AddItemToObject(o, "digest",
                        api_str_json(peer_release_digest_str(rel)));
  cJSON_AddStringToObject(o, "state",
                          peer_release_state_name(peer_release_state(rel)));
  cJSON_AddItemToObject(
      o, "path",
      api_str_json(peer_release_path(rel, path, sizeof(path)) == 0 ? path
                                                                   : NULL));
  return o;
}

/* Answers req for rel, settled as kind says (err 0), or at the timeout
 * (WS_ETIMEOUT), or because p2pd stops (WS_ECANCELED). */
static void api_reply_settled(ws_httpd_req_t *req, peer_release_t *rel,
                              peer_release_watch_kind_t kind, int err) {
  const char *msg;
  int failed = peer_release_state(rel) == PEER_REL_FAILED;
  int rel_err = peer_release_error(rel, &msg);
  if (err == WS_ETIMEOUT)
    ws_httpd_reply_error(req, 504, WS_ETIMEOUT,
                         "release not ready before timeout_ms");
  else if (err != 0)
    ws_httpd_reply_error(req, 503, WS_ECANCELED, "p2pd stopping");
  else if (kind == PEER_REL_WATCH_READY)
    ws_httpd_reply_json(req, failed ? 409 : 200, peer_release_json(rel));
  else if (failed)
    ws_httpd_reply_error(req, peer_api_status_for(rel_err), rel_err, msg);
  else
    ws_httpd_reply_json(req, 200, api_prefetch_json(rel));
}

static void api_on_resolved(void *arg, peer_release_t *rel, int err) {
  api_reply_settled(arg, rel, PEER_REL_WATCH_RESOLVED, err);
}

static void api_on_ready(void *arg, peer_release_t *rel, int err) {
  api_reply_settled(arg, rel, PEER_REL_WATCH_READY, err);
}

/* The client went away before rel settled. */
static void api_watch_gone(ws_httpd_req_t *req, void *arg) {
  peer_release_unwatch(arg);
  ws_httpd_req_drop(req);
}

/* Answers req now if rel is settled as kind says, else once it is (or at
 * timeout_ms; 0: none). Takes req. */
static void api_watch(ws_httpd_req_t *req, peer_release_t *rel,
                      peer_release_watch_kind_t kind, uint64_t timeout_ms) {
  peer_release_watch_t *w;
  if (peer_release_settled(rel, kind)) {
    api_reply_settled(req, rel, kind, 0);
    return;
  }
  int rc = peer_release_watch(
      rel, kind, timeout_ms,
      kind == PEER_REL_WATCH_READY ? api_on_ready : api_on_resolved, req, &w);
  if (rc == WS_ELIMIT)
    ws_httpd_reply_error(req, 503, WS_ELIMIT, "too many requests waiting");
  else if (rc != 0)
    ws_httpd_reply_error(req, 503, rc, NULL);
  else
    ws_httpd_req_on_gone(req, api_watch_gone, w);
}

/* Status of a prefetch the release table refused before any job ran. */
static int api_prefetch_refused_status(int err, const char *why) {
  if (why == NULL)
    return 500;
  switch (err) {
  case WS_EUSAGE:
    return 400;
  case WS_EDIGEST:
    return 422;
  case WS_ENOTFOUND:
    return 404;
  case WS_EBUSY:
    return 503; /* too many releases being fetched: try again later */
  default:
    return 500;
  }
}

/* ---- prefetch by tag (release/tag_prefetch.h): resolved once, then by digest
 * ---- */

static void api_tag_done(void *arg, int status, peer_release_t *rel,
                         const char *why) {
  ws_httpd_req_t *req = arg;
  if (status != 0)
    ws_httpd_reply_error(req,
                         status == WS_ES3NOKEY || status == WS_EBADMSG
                             ? (status == WS_ES3NOKEY ? 404 : 422)
                             : peer_api_status_for(status),
                         status, why);
  else
    api_watch(req, rel, PEER_REL_WATCH_RESOLVED, 0);
}

static void api_tag_gone(ws_httpd_req_t *req, void *arg) {
  peer_tag_cancel(arg);
  ws_httpd_req_drop(req);
}

/* POST prefetch with uri s3://B/P/MODEL/:TAG. Takes req. */
static void api_prefetch_tag(peer_api_t *api, ws_httpd_req_t *req,
                             const char *uri) {
  peer_tag_op_t *op;
  int rc =
      peer_tag_prefetch(api->ctx, api->releases, uri, api_tag_done, req, &op);
  if (rc == WS_EUSAGE)
    ws_httpd_reply_error(req, 400, rc,
                         "tagged uri must be s3://BUCKET/PREFIX/MODEL/:TAG");
  else if (rc != 0)
    ws_httpd_reply_error(req, 500, rc, NULL);
  else
    ws_httpd_req_on_gone(req, api_tag_gone, op);
}

static void api_prefetch(ws_httpd_req_t *req, void *arg) {
  peer_api_t *api = arg;
  cJSON *body = NULL;
  ws_hash_t expect;
  peer_release_t *rel;
  const char *why;
  if (api_not_ready(api, req))
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
  if (u != NULL && !has_expect && strstr(u, "/:") != NULL) {
    api_prefetch_tag(api, req, u);
    goto free_body;
  }
  int rc = peer_release_prefetch(api->releases, u, has_expect ? &expect : NULL,
                                 &rel, &why);
  if (rc != 0) {
    ws_httpd_reply_error(req, api_prefetch_refused_status(rc, why), rc, why);
  } else {
    peer_release_claim(rel); /* already READY: current again */
    /* Answered once the release has left BEGINNING or failed. */
    api_watch(req, rel, PEER_REL_WATCH_RESOLVED, 0);
    peer_release_unref(rel);
  }
free_body:
  cJSON_Delete(body);
}

static void api_list(ws_httpd_req_t *req, void *arg) {
  peer_api_t *api = arg;
  if (api_not_ready(api, req))
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
  for (peer_release_t *r = peer_releases_first(api->releases); r != NULL;
       r = peer_release_next(r))
    n++;
  for (size_t i = n; i-- > 0;) {
    peer_release_t *r = peer_releases_first(api->releases);
    for (size_t k = 0; k < i; k++)
      r = peer_release_next(r);
    cJSON_AddItemToArray(arr, peer_release_json(r));
  }
  ws_httpd_reply_json(req, 200, o);
}

/* ---- worker-backed actions --------------------------------------------- */

typedef enum { ACT_PIN, ACT_UNPIN, ACT_EVICT, ACT_VERIFY } api_action_t;

typedef struct {
  peer_api_t *api;
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
  ws_store_t *st = job->api->ctx->store;
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
  ws_cache_t *c = ws_store_cache(job->api->ctx->store);
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
  ws_httpd_req_t *req = job->req;
  int rc = status != 0 ? status : job->status;
  peer_release_t *rel = peer_release_find(job->api->releases, &job->digest);
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
    peer_release_set_pinned(rel, job->act == ACT_PIN);
    WS_LOGI("release %s: %s", ds,
            peer_release_pinned(rel) ? "pinned" : "unpinned");
    ws_httpd_reply_json(req, 200, peer_release_json(rel));
    break;
  case ACT_EVICT: {
    if (rel != NULL && (peer_release_state(rel) == PEER_REL_READY ||
                        peer_release_state(rel) == PEER_REL_FAILED))
      peer_release_remove(rel);
    peer_releases_hf_prune(job->api->releases); /* --hf-cache view */
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

static void api_action(peer_api_t *api, ws_httpd_req_t *req,
                       peer_release_t *rel, api_action_t act) {
  peer_release_state_t state = peer_release_state(rel);
  if (act == ACT_EVICT && state == PEER_REL_FAILED) {
    /* Nothing published: only the list entry goes. */
    peer_release_remove(rel);
    ws_httpd_reply(req, 200, "application/json", "{\"evicted\":true}", 16);
    return;
  }
  if (state != PEER_REL_READY) {
    ws_httpd_reply_error(req, 409, WS_EBUSY, "release is not ready");
    return;
  }
  if (act == ACT_EVICT && peer_release_pinned(rel)) {
    ws_httpd_reply_error(req, 409, WS_EBUSY, "release is pinned; unpin first");
    return;
  }
  api_job_t *job = calloc(1, sizeof(*job));
  if (job == NULL) {
    ws_httpd_reply_error(req, 503, -ENOMEM, NULL);
    return;
  }
  job->api = api;
  job->req = req;
  job->act = act;
  job->digest = *peer_release_digest(rel); /* READY: known */
  int rc = peer_ctx_queue(api->ctx, api_job_work, api_job_after, job);
  if (rc != 0) {
    free(job);
    ws_httpd_reply_error(req, 503, rc, NULL);
  }
}

/* ---- POST /api/v1/seed --------------------------------------------------- */

static void api_seed_done(void *arg, int err, const char *msg,
                          peer_release_t *rel) {
  ws_httpd_req_t *req = arg;
  cJSON *o;
  if (err != 0)
    ws_httpd_reply_error(req, peer_api_status_for(err), err, msg);
  else if ((o = peer_release_json(rel)) == NULL)
    ws_httpd_reply_error(req, peer_api_status_for(-ENOMEM), -ENOMEM,
                         "out of memory");
  else
    ws_httpd_reply_json(req, 200, o);
}

/* {"digest"}: pin a READY release (it is announced as a seed like every
 * ready release). */
static void api_seed_pin(peer_api_t *api, ws_httpd_req_t *req, const char *ds) {
  ws_hash_t digest;
  if (ws_digest_from_str(ds, &digest) != 0) {
    ws_httpd_reply_error(req, 400, WS_EUSAGE, "digest: want sha256-<hex>");
    return;
  }
  peer_release_t *rel = peer_release_find(api->releases, &digest);
  if (rel == NULL)
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "release not in this cache");
  else if (peer_release_state(rel) != PEER_REL_READY)
    ws_httpd_reply_error(req, 409, WS_EBUSY, "release not ready yet");
  else
    api_action(api, req, rel, ACT_PIN);
}

/* {"digest"} pins; {"dir", "manifest"} imports a local directory (seed.h). */
static void api_seed(ws_httpd_req_t *req, void *arg) {
  peer_api_t *api = arg;
  cJSON *body = NULL;
  if (api_not_ready(api, req))
    return;
  if (ws_httpd_req_json(req, &body) != 0 || !cJSON_IsObject(body)) {
    ws_httpd_reply_error(req, 400, WS_EJSON, "body must be a JSON object");
    goto free_body;
  }
  const cJSON *jd = cJSON_GetObjectItemCaseSensitive(body, "digest");
  const cJSON *jdir = cJSON_GetObjectItemCaseSensitive(body, "dir");
  const cJSON *jm = cJSON_GetObjectItemCaseSensitive(body, "manifest");
  if (cJSON_IsString(jd)) {
    api_seed_pin(api, req, jd->valuestring);
  } else if (!cJSON_IsString(jdir) || jdir->valuestring[0] != '/' ||
             !cJSON_IsString(jm) || jm->valuestring[0] == '\0') {
    ws_httpd_reply_error(req, 400, WS_EUSAGE,
                         "want {\"digest\"} or {\"dir\": absolute path, "
                         "\"manifest\": absolute path or s3:// URI}");
  } else if (peer_seed_import(api->ctx, api->releases, jdir->valuestring,
                              jm->valuestring, api_seed_done, req) != 0) {
    ws_httpd_reply_error(req, 500, -ENOMEM, "out of memory");
  }
free_body:
  cJSON_Delete(body);
}

/* /api/v1/releases/<digest>[/action] */
static void api_release(ws_httpd_req_t *req, void *arg) {
  peer_api_t *api = arg;
  const char *method = ws_httpd_req_method(req);
  const char *rest = ws_httpd_req_path_rest(req);
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_hash_t digest;
  if (api_not_ready(api, req))
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
  peer_release_t *rel = peer_release_find(api->releases, &digest);
  if (rel == NULL) {
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "unknown release");
    return;
  }
  int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
  if (*action == '\0' && get) {
    ws_httpd_reply_json(req, 200, peer_release_json(rel));
  } else if (*action == '\0' && strcmp(method, "DELETE") == 0) {
    api_action(api, req, rel, ACT_EVICT);
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
    peer_release_claim(rel); /* a server waits on it: current now */
    api_watch(req, rel, PEER_REL_WATCH_READY, timeout_ms);
  } else if (strcmp(action, "pin") == 0 && post) {
    api_action(api, req, rel, ACT_PIN);
  } else if (strcmp(action, "unpin") == 0 && post) {
    api_action(api, req, rel, ACT_UNPIN);
  } else if (strcmp(action, "verify") == 0 && post) {
    api_action(api, req, rel, ACT_VERIFY);
  } else if (strncmp(action, "holds/", 6) == 0 && !get) {
    peer_api_hold(req, rel, action + 6); /* api_hold.c */
  } else {
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "no such action");
  }
}

/* ---- the server ---------------------------------------------------------- */

static int api_routes(peer_api_t *api) {
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
    int rc = ws_httpd_route(api->srv, routes[i].method, routes[i].path,
                            routes[i].match, routes[i].cb, api);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* Listens on the unix socket (making its directory, e.g. /run/p2pd, which
 * may not exist yet: this runs before the loop does) and on --http. */
static int api_listen(peer_api_t *api) {
  const peer_settings_t *cfg = api->ctx->cfg;
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s", cfg->api_socket);
  char *slash = strrchr(dir, '/');
  if (slash != NULL && slash != dir) {
    *slash = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
      WS_LOGW("mkdir %s: %s", dir, strerror(errno));
  }
  int rc =
      ws_httpd_listen_unix(api->srv, cfg->api_socket, PEER_API_SOCKET_MODE);
  if (rc != 0) {
    WS_LOGE("api: cannot listen on %s: %s", cfg->api_socket, ws_strerror(rc));
    return rc;
  }
  if (cfg->http != NULL) {
    int port = 0;
    rc = ws_httpd_listen_tcp(api->srv, cfg->http, &port);
    if (rc != 0) {
      WS_LOGE("api: cannot listen on %s: %s", cfg->http, ws_strerror(rc));
      return rc;
    }
    WS_LOGI("api: also on %s (port %d)%s", cfg->http, port,
            cfg->api_token != NULL ? ", API token required" : "");
  }
  WS_LOGI("api: listening on %s", cfg->api_socket);
  return 0;
}

int peer_api_new(peer_ctx_t *ctx, peer_releases_t *releases,
                 peer_swarm_t *swarm, peer_api_t **out) {
  ws_httpd_config_t hc = {.max_body_bytes = PEER_API_MAX_BODY_BYTES,
                          .max_conns = PEER_API_MAX_CONNS,
                          .idle_timeout_ms = PEER_API_IDLE_TIMEOUT_MS,
                          .name = "api",
                          .tally = &ctx->counters.http};
  peer_api_t *api = calloc(1, sizeof(*api));
  if (api == NULL)
    return -ENOMEM;
  api->ctx = ctx;
  api->releases = releases;
  api->swarm = swarm;
  *out = api;
  /* TCP only (the unix socket's file mode guards it); probes open. */
  static const char *const open_paths[] = {"/healthz", "/readyz", NULL};
  ws_httpd_auth_t auth = {.token = ctx->cfg->api_token,
                          .reads = ctx->cfg->api_token_reads,
                          .open_paths = open_paths};
  int rc = ws_httpd_new(ctx->loop, &hc, &api->srv);
  if (rc == 0)
    rc = ws_httpd_set_auth(api->srv, &auth);
  if (rc == 0)
    rc = api_routes(api);
  if (rc == 0)
    rc = api_listen(api);
  return rc;
}

static void api_srv_closed(ws_httpd_t *srv, void *arg) {
  peer_api_t *api = arg;
  api->srv = NULL;
  if (api->closed != NULL)
    api->closed(api->closed_arg);
}

void peer_api_close(peer_api_t *api, void (*closed)(void *arg), void *arg) {
  api->stopping = 1;
  api->closed = closed;
  api->closed_arg = arg;
  if (api->srv != NULL)
    ws_httpd_close(api->srv, api_srv_closed, api);
  else if (closed != NULL)
    closed(arg);
}

void peer_api_free(peer_api_t *api) {
  free(api);
}
