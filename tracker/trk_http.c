/* trk_http.c - HTTP routes of p2p-tracker (see trk_http.h).
 *
 * Owns the ws_httpd server it creates and the tag resolver (trk_tag.h);
 * every handler answers at once from live state (no request outlives its
 * handler) except a prefetch by tag, answered once S3 has named the digest
 * (cancelled if the client goes away). Bodies are capped at
 * TRK_HTTP_BODY_MAX and connections at TRK_HTTP_MAX_CONNS by ws_httpd,
 * which also enforces the API token (trk_http_set_token) before a handler
 * runs. Loop thread only.
 */
#include "trk_http.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trk_dashboard.h"
#include "trk_json.h"
#include "trk_metrics.h"
#include "trk_tag.h"
#include "trk_target.h"
#include "ws_httpd.h"
#include "ws_log.h"

struct trk_http_s {
  uv_loop_t *loop;
  trk_tracker_t *t;
  trk_server_t *srv;
  ws_httpd_stats_t *tally; /* the tracker's HTTP defence counts; may be NULL */
  ws_httpd_t *httpd;
  trk_tags_t *tags; /* tagged prefetch URIs (trk_tag.h) */
  trk_http_wanted_cb wanted_cb;
  void *wanted_arg;
  trk_http_close_cb close_cb;
  void *close_arg;
};

static uint64_t now_ms(const trk_http_t *h) {
  return uv_now(h->loop);
}

static void h_dashboard(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  if (ws_httpd_req_add_header(req, "Cache-Control", "no-cache") < 0) {
    ws_httpd_reply_error(req, 500, WS_ELIMIT, NULL);
    return;
  }
  ws_httpd_reply(req, 200, "text/html; charset=utf-8", trk_dashboard_html,
                 trk_dashboard_html_len);
}

/* The vendored chart library; immutable for one build, so cacheable. */
static void h_vendor(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  const char *path = ws_httpd_req_path_rest(req);
  const char *body, *ctype;
  size_t len;
  if (strcmp(path, "uPlot.iife.min.js") == 0) {
    body = trk_uplot_js;
    len = trk_uplot_js_len;
    ctype = "text/javascript; charset=utf-8";
  } else if (strcmp(path, "uPlot.min.css") == 0) {
    body = trk_uplot_css;
    len = trk_uplot_css_len;
    ctype = "text/css; charset=utf-8";
  } else {
    ws_httpd_reply_error(req, 404, WS_ENOTFOUND, "no such file");
    return;
  }
  if (ws_httpd_req_add_header(req, "Cache-Control", "max-age=3600") < 0) {
    ws_httpd_reply_error(req, 500, WS_ELIMIT, NULL);
    return;
  }
  ws_httpd_reply(req, 200, ctype, body, len);
}

/* /healthz and /readyz: the tracker answers as soon as it listens (it
 * depends on nothing that could come up later), as on --metrics. */
static void h_healthz(ws_httpd_req_t *req, void *arg) {
  (void)arg;
  ws_httpd_reply(req, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

static void h_metrics(ws_httpd_req_t *req, void *arg) {
  trk_http_t *h = arg;
  trk_metrics_reply(req, h->t, h->srv, h->tally, now_ms(h));
}

static void reply_text_json(ws_httpd_req_t *req, int status, char *text) {
  if (text == NULL) {
    ws_httpd_reply_error(req, 500, -ENOMEM, NULL);
    return;
  }
  ws_httpd_reply(req, status, "application/json", text, strlen(text));
  free(text);
}

static void h_swarms(ws_httpd_req_t *req, void *arg) {
  trk_http_t *h = arg;
  reply_text_json(req, 200, trk_json_swarms(h->t, now_ms(h)));
}

static void h_swarm(ws_httpd_req_t *req, void *arg) {
  trk_http_t *h = arg;
  ws_hash_t d;
  char *text = NULL;
  if (ws_digest_from_str(ws_httpd_req_path_rest(req), &d) < 0) {
    ws_httpd_reply_error(req, 400, WS_EHEX,
                         "expected /api/v1/swarms/sha256-<hex>");
    return;
  }
  int rc = trk_json_swarm(h->t, &d, now_ms(h), &text);
  if (rc < 0) {
    ws_httpd_reply_error(req, rc == WS_ENOTFOUND ? 404 : 500, rc,
                         rc == WS_ENOTFOUND ? "no swarm for that digest"
                                            : NULL);
    return;
  }
  reply_text_json(req, 200, text);
}

static cJSON *wanted_json(const trk_http_t *h, const trk_wanted_entry_t *e) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL || !cJSON_AddStringToObject(o, "digest", e->digest_str) ||
      !cJSON_AddStringToObject(o, "uri", e->uri) ||
      trk_target_json_add(o, e, trk_tracker_peers(h->t)) < 0) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static void h_prefetch_list(ws_httpd_req_t *req, void *arg) {
  trk_http_t *h = arg;
  const trk_wanted_t *w = trk_tracker_wanted(h->t);
  cJSON *root = cJSON_CreateObject();
  cJSON *arr = root == NULL ? NULL : cJSON_AddArrayToObject(root, "wanted");
  if (arr == NULL) {
    cJSON_Delete(root);
    ws_httpd_reply_json(req, 500, NULL);
    return;
  }
  for (uint32_t i = 0; i < trk_wanted_count(w); i++) {
    cJSON *o = wanted_json(h, trk_wanted_at(w, i));
    if (o == NULL) {
      cJSON_Delete(root);
      ws_httpd_reply_json(req, 500, NULL);
      return;
    }
    cJSON_AddItemToArray(arr, o);
  }
  ws_httpd_reply_json(req, 200, root);
}

static int prefetch_status(int rc) {
  switch (rc) {
  case WS_ENOTFOUND:
    return 404;
  case WS_ELIMIT:
    return 409;
  case WS_EJSON:
  case WS_EUSAGE:
  case WS_EHEX:
  case WS_EDIGEST:
    return 400;
  default:
    return 500;
  }
}

static void changed(trk_http_t *h) {
  if (h->wanted_cb != NULL)
    h->wanted_cb(h->wanted_arg);
}

/* The body's optional "selector" (null or absent: every node). */
static int body_selector(const cJSON *body, trk_selector_t *sel,
                         const trk_selector_t **out, const char **msg) {
  const cJSON *js = cJSON_GetObjectItemCaseSensitive(body, "selector");
  *out = NULL;
  if (js == NULL || cJSON_IsNull(js))
    return 0;
  int rc = trk_selector_from_json(js, sel, msg);
  if (rc == 0)
    *out = sel;
  return rc;
}

/* The body states the whole request: a prefetch without a selector is for
 * every node. added is trk_tracker_prefetch's 0 (new) or 1 (existing);
 * returns it, or an error. */
static int prefetch_select(trk_http_t *h, const ws_hash_t *d,
                           const trk_selector_t *sel, int added) {
  int rc = trk_tracker_prefetch_select(h->t, d, sel);
  if (rc < 0)
    return rc;
  if (rc > 0 && added == 1)
    changed(h); /* same release, more nodes: tell them now */
  return added;
}

/* Adds (or updates) the wanted entry d with its selector and answers: 201
 * new, 200 already wanted. given is the body's digest (checked against the
 * URI's), resolved the digest a tag named (added to the answer). */
static void prefetch_commit(trk_http_t *h, ws_httpd_req_t *req,
                            const ws_hash_t *d, const ws_hash_t *given,
                            const char *uri, const trk_selector_t *sp,
                            const char *resolved) {
  const char *msg;
  int rc = trk_tracker_prefetch(h->t, given, uri, now_ms(h));
  if (rc >= 0)
    rc = prefetch_select(h, d, sp, rc);
  if (rc < 0) {
    msg = rc == WS_ENOTFOUND ? "unknown digest: no swarm has it; POST its uri"
          : rc == WS_EDIGEST ? "digest and uri disagree"
          : rc == WS_ELIMIT  ? "wanted set is full"
                             : NULL;
    ws_httpd_reply_error(req, prefetch_status(rc), rc, msg);
    return;
  }
  const trk_wanted_entry_t *e = trk_wanted_find(trk_tracker_wanted(h->t), d);
  cJSON *out = e == NULL ? NULL : wanted_json(h, e);
  if (out != NULL)
    cJSON_AddBoolToObject(out, "created", rc == 0);
  if (out != NULL && resolved != NULL)
    cJSON_AddStringToObject(out, "resolved", resolved);
  WS_LOGI("prefetch %s %s (%s)", e != NULL ? e->digest_str : "?",
          e != NULL ? e->uri : "", rc == 0 ? "added" : "already wanted");
  if (rc == 0)
    changed(h);
  ws_httpd_reply_json(req, rc == 0 ? 201 : 200, out);
}

/* ---- prefetch by tag: resolved once (trk_tag.h), then by digest ---- */

typedef struct {
  trk_http_t *h;
  ws_httpd_req_t *req;
  int has_given, has_sel;
  ws_hash_t given;
  trk_selector_t sel;
  trk_tag_op_t *op;
} tag_prefetch_t;

static void tag_resolved(void *arg, int status, const ws_hash_t *digest,
                         const char *release_uri, const char *why) {
  tag_prefetch_t *tp = arg;
  char d[WS_DIGEST_STR_LEN + 1];
  if (status != 0) {
    int code = status == WS_ES3NOKEY                         ? 404
               : status == WS_EBADMSG || status == WS_ELIMIT ? 422
               : status == WS_ECANCELED                      ? 503
               : status == WS_EUSAGE                         ? 400
                                                             : 502;
    ws_httpd_reply_error(tp->req, code, status, why);
  } else {
    ws_digest_to_str(digest, d);
    prefetch_commit(tp->h, tp->req, digest, tp->has_given ? &tp->given : NULL,
                    release_uri, tp->has_sel ? &tp->sel : NULL, d);
  }
  free(tp);
}

/* The client hung up before S3 answered: forget the resolve. */
static void tag_gone(ws_httpd_req_t *req, void *arg) {
  tag_prefetch_t *tp = arg;
  trk_tag_cancel(tp->op);
  free(tp);
  ws_httpd_req_drop(req);
}

/* POST with uri s3://B/P/MODEL/:TAG; the selector is parsed already and
 * carried through the resolve. Takes req. */
static void prefetch_tag(trk_http_t *h, ws_httpd_req_t *req, const char *uri,
                         const ws_hash_t *given, const trk_selector_t *sp) {
  tag_prefetch_t *tp = calloc(1, sizeof(*tp));
  int rc = tp == NULL ? -ENOMEM : 0;
  if (rc == 0) {
    tp->h = h;
    tp->req = req;
    tp->has_given = given != NULL;
    if (given != NULL)
      tp->given = *given;
    tp->has_sel = sp != NULL;
    if (sp != NULL)
      tp->sel = *sp;
    rc = trk_tags_resolve(h->tags, uri, tag_resolved, tp, &tp->op);
  }
  if (rc == 0) {
    ws_httpd_req_on_gone(req, tag_gone, tp);
    return;
  }
  free(tp);
  ws_httpd_reply_error(
      req, rc == WS_EUSAGE ? 400 : 500, rc,
      rc == WS_EUSAGE ? "tagged uri must be s3://BUCKET/PREFIX/MODEL/:TAG "
                        "(TAG: 1..128 of [A-Za-z0-9._-], first a letter or "
                        "digit)"
                      : "cannot resolve tags: S3 client not available");
}

static void h_prefetch_add(ws_httpd_req_t *req, void *arg) {
  trk_http_t *h = arg;
  cJSON *body = NULL;
  ws_hash_t d, ud;
  const ws_hash_t *dp = NULL;
  const char *uri = NULL;
  const char *msg = NULL;
  int tagged = 0;
  int rc = ws_httpd_req_json(req, &body);
  if (rc < 0 || !cJSON_IsObject(body)) {
    rc = WS_EJSON;
    msg = "body must be a JSON object";
    goto fail;
  }
  const cJSON *ju = cJSON_GetObjectItemCaseSensitive(body, "uri");
  const cJSON *jd = cJSON_GetObjectItemCaseSensitive(body, "digest");
  if ((ju != NULL && !cJSON_IsString(ju)) ||
      (jd != NULL && !cJSON_IsString(jd)) || (ju == NULL && jd == NULL)) {
    rc = WS_EUSAGE;
    msg = "expected {\"uri\": \"s3://.../sha256-<hex>/\"} or "
          "{\"digest\": \"sha256-<hex>\"}";
    goto fail;
  }
  if (jd != NULL) {
    rc = ws_digest_from_str(jd->valuestring, &d);
    if (rc < 0) {
      msg = "digest must be sha256-<64 hex>";
      goto fail;
    }
    dp = &d;
  }
  if (ju != NULL) {
    uri = ju->valuestring;
    /* Peers are told releases by digest (docs/protocol.md), so a URI must
     * name its digest: the immutable layout .../sha256-<hex>/, or a tag
     * (s3://B/P/MODEL/:TAG) resolved to one first (trk_tag.h). */
    tagged = strstr(uri, "/:") != NULL;
    rc = tagged ? 0 : trk_wanted_uri_digest(uri, &ud);
    if (rc < 0) {
      msg = rc == WS_ENOTFOUND ? "uri has no sha256-<hex> path segment"
                               : "uri must be s3://bucket/...";
      rc = WS_EUSAGE;
      goto fail;
    }
  }
  trk_selector_t sel;
  const trk_selector_t *sp = NULL;
  if ((rc = body_selector(body, &sel, &sp, &msg)) < 0)
    goto fail;
  if (tagged) {
    prefetch_tag(h, req, uri, dp, sp);
    cJSON_Delete(body);
    return;
  }
  prefetch_commit(h, req, dp != NULL ? dp : &ud, dp, uri, sp, NULL);
  cJSON_Delete(body);
  return;

fail:
  cJSON_Delete(body);
  ws_httpd_reply_error(req, prefetch_status(rc), rc, msg);
}

static void h_prefetch_del(ws_httpd_req_t *req, void *arg) {
  trk_http_t *h = arg;
  ws_hash_t d;
  const char *key = ws_httpd_req_path_rest(req);
  if (ws_digest_from_str(key, &d) < 0) {
    ws_httpd_reply_error(req, 400, WS_EHEX, "expected sha256-<hex>");
    return;
  }
  int rc = trk_wanted_remove(trk_tracker_wanted(h->t), key);
  if (rc < 0) {
    ws_httpd_reply_error(req, 404, rc, "not in the wanted set");
    return;
  }
  WS_LOGI("prefetch %s removed", key);
  changed(h);
  ws_httpd_reply(req, 204, NULL, NULL, 0);
}

int trk_http_new(uv_loop_t *loop, trk_tracker_t *t, trk_server_t *srv,
                 ws_httpd_stats_t *tally, trk_http_t **out) {
  static const struct {
    const char *method;
    const char *path;
    ws_httpd_match_t match;
    ws_httpd_handler_cb cb;
  } routes[] = {
      {"GET", "/", WS_HTTPD_MATCH_EXACT, h_dashboard},
      {"GET", "/vendor/", WS_HTTPD_MATCH_PREFIX, h_vendor},
      {"GET", "/healthz", WS_HTTPD_MATCH_EXACT, h_healthz},
      {"GET", "/readyz", WS_HTTPD_MATCH_EXACT, h_healthz},
      {"GET", "/metrics", WS_HTTPD_MATCH_EXACT, h_metrics},
      {"GET", "/api/v1/swarms", WS_HTTPD_MATCH_EXACT, h_swarms},
      {"GET", "/api/v1/swarms/", WS_HTTPD_MATCH_PREFIX, h_swarm},
      {"GET", "/api/v1/prefetch", WS_HTTPD_MATCH_EXACT, h_prefetch_list},
      {"POST", "/api/v1/prefetch", WS_HTTPD_MATCH_EXACT, h_prefetch_add},
      {"DELETE", "/api/v1/prefetch/", WS_HTTPD_MATCH_PREFIX, h_prefetch_del},
  };
  ws_httpd_config_t cfg = {.max_body_bytes = TRK_HTTP_BODY_MAX,
                           .max_conns = TRK_HTTP_MAX_CONNS,
                           .name = "http",
                           .tally = tally};
  int rc;
  trk_http_t *h = calloc(1, sizeof(*h));
  if (h == NULL)
    return -ENOMEM;
  h->loop = loop;
  h->t = t;
  h->srv = srv;
  h->tally = tally;
  rc = trk_tags_new(loop, &h->tags);
  if (rc < 0)
    goto fail_h;
  rc = ws_httpd_new(loop, &cfg, &h->httpd);
  if (rc < 0)
    goto fail_h;
  for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
    rc = ws_httpd_route(h->httpd, routes[i].method, routes[i].path,
                        routes[i].match, routes[i].cb, h);
    if (rc < 0)
      goto fail_httpd;
  }
  *out = h;
  return 0;

fail_httpd:
  /* ws_httpd frees itself once its handles are closed. */
  ws_httpd_close(h->httpd, NULL, NULL);
fail_h:
  if (h->tags != NULL)
    trk_tags_close(h->tags, NULL, NULL); /* no client yet: frees at once */
  free(h);
  return rc;
}

int trk_http_set_token(trk_http_t *h, const char *token, int reads) {
  /* Probes stay open: a liveness probe has no token to send. */
  static const char *const open_paths[] = {"/healthz", "/readyz", NULL};
  ws_httpd_auth_t auth = {
      .token = token, .reads = reads, .open_paths = open_paths};
  return ws_httpd_set_auth(h->httpd, &auth);
}

int trk_http_listen(trk_http_t *h, const char *host_port, int *bound_port) {
  return ws_httpd_listen_tcp(h->httpd, host_port, bound_port);
}

void trk_http_on_wanted(trk_http_t *h, trk_http_wanted_cb cb, void *arg) {
  h->wanted_cb = cb;
  h->wanted_arg = arg;
}

static void tags_closed(void *arg) {
  trk_http_t *h = arg;
  if (h->close_cb != NULL)
    h->close_cb(h->close_arg);
  free(h);
}

/* Requests are gone (their resolves cancelled): then the S3 client. */
static void httpd_closed(ws_httpd_t *srv, void *arg) {
  trk_http_t *h = arg;
  (void)srv;
  trk_tags_close(h->tags, tags_closed, h);
}

void trk_http_close(trk_http_t *h, trk_http_close_cb cb, void *arg) {
  h->close_cb = cb;
  h->close_arg = arg;
  ws_httpd_close(h->httpd, httpd_closed, h);
}
