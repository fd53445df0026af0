/* ctl_targets.c - `p2pctl targets HOST:PORT`: which nodes each wanted
 * release of a tracker is for (GET /api/v1/prefetch on the tracker's
 * --http address: its selector and the connected nodes it targets).
 *
 * The reply is hostile until checked: the body is capped, parsed with
 * cJSON, and only strings/numbers of the documented shape are printed.
 * Single-threaded, blocking (libcurl easy), like the other subcommands.
 */
#include "ctl.h"
#include "ctl_body.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_args.h"
#include "ws_token.h"

#define TARGETS_BODY_MAX (4u << 20)
#define TARGETS_TIMEOUT_MS 10000L

enum { A_JSON, A_TOKEN, A_N };

static const ws_arg_t k_rows[A_N] = {
    {"json", NULL, NULL, WS_ARG_BOOL, 0, "print the tracker's JSON reply"},
    {"api-token-file", "P2P_TRACKER_API_TOKEN_FILE", "FILE", WS_ARG_STR, 0,
     "the tracker's API token (needed when it runs with --api-token-reads)"},
};

static const ws_args_spec_t k_spec = {
    "p2pctl targets",
    "TRACKER_HTTP_HOST:PORT [--json] [--api-token-file FILE]",
    "Lists the tracker's wanted releases (POST /api/v1/prefetch), each with "
    "its selector and the connected nodes it targets.",
    k_rows,
    A_N,
    NULL};

/* GET http://addr/api/v1/prefetch into *out (parsed); token NULL = send
 * none. */
static int tg_get(const char *addr, const char *token, cJSON **out) {
  char url[512], auth[WS_TOKEN_MAX + 32];
  struct curl_slist *hdrs = NULL;
  ctl_body_t b = {.max = TARGETS_BODY_MAX};
  long code = 0;
  int rc = CTL_EXIT_FAIL;
  if (snprintf(url, sizeof(url), "http://%s/api/v1/prefetch", addr) >=
      (int)sizeof(url))
    return CTL_EXIT_USAGE;
  CURL *c = curl_easy_init();
  if (c == NULL)
    return CTL_EXIT_FAIL;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, TARGETS_TIMEOUT_MS);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ctl_body_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  if (token != NULL) {
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    hdrs = curl_slist_append(NULL, auth);
    memset(auth, 0, sizeof(auth));
    if (hdrs == NULL) {
      curl_easy_cleanup(c);
      return CTL_EXIT_FAIL;
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  }
  CURLcode cc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  curl_slist_free_all(hdrs);
  if (cc != CURLE_OK || code != 200 || b.p == NULL) {
    fprintf(stderr, "p2pctl targets: %s: %s\n", url,
            b.over           ? "reply too large"
            : cc != CURLE_OK ? curl_easy_strerror(cc)
            : code == 401    ? "401: the tracker wants its API token "
                               "(--api-token-file FILE)"
            : code != 200    ? "HTTP error status"
                             : "empty reply");
    goto done;
  }
  *out = cJSON_ParseWithLength(b.p, b.len);
  if (*out == NULL ||
      !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(*out, "wanted"))) {
    fprintf(stderr, "p2pctl targets: %s: not a wanted list\n", url);
    cJSON_Delete(*out);
    goto done;
  }
  rc = CTL_EXIT_OK;

done:
  free(b.p);
  return rc;
}

static const char *tg_str(const cJSON *o, const char *key) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(j) ? j->valuestring : "";
}

/* One line per release: digest, selector, then the target nodes. */
static void tg_print(const cJSON *root) {
  const cJSON *w, *it;
  cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(root, "wanted")) {
    const cJSON *sel = cJSON_GetObjectItemCaseSensitive(w, "selector");
    const cJSON *tg = cJSON_GetObjectItemCaseSensitive(w, "targets");
    printf("%s %s\n  selector:", tg_str(w, "digest"), tg_str(w, "uri"));
    if (!cJSON_IsObject(sel)) {
      printf(" every node");
    } else {
      cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(
                                 sel, "labels")) if (cJSON_IsString(it))
          printf(" %s=%s", it->string, it->valuestring);
      cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(
                                 sel, "zones")) if (cJSON_IsString(it))
          printf(" zone=%s", it->valuestring);
      const cJSON *n = cJSON_GetObjectItemCaseSensitive(sel, "count");
      const cJSON *p = cJSON_GetObjectItemCaseSensitive(sel, "percent");
      if (cJSON_IsNumber(n) && n->valuedouble > 0)
        printf(" count=%.0f", n->valuedouble);
      if (cJSON_IsNumber(p) && p->valuedouble > 0)
        printf(" percent=%.0f", p->valuedouble);
    }
    printf("\n  targets (%d):", cJSON_GetArraySize(tg));
    cJSON_ArrayForEach(it, tg) if (cJSON_IsString(it))
        printf(" %s", it->valuestring);
    printf("\n");
  }
}

int ctl_targets_main(int argc, char **argv) {
  const char *v[A_N] = {0};
  const char *pos[1] = {0};
  size_t npos = 0;
  cJSON *root = NULL;
  int rc = ws_args_parse(&k_spec, argc, argv, v, pos, 1, &npos);
  if (rc == WS_ARGS_HELP || rc == WS_ARGS_VERSION) {
    if (rc == WS_ARGS_HELP)
      ws_args_usage(&k_spec, stdout);
    else
      ws_args_print_version("p2pctl");
    return CTL_EXIT_OK;
  }
  ws_args_env(&k_spec, v);
  if (rc != 0 || ws_args_check(&k_spec, v) != 0)
    return CTL_EXIT_USAGE;
  char token[WS_TOKEN_MAX + 1];
  const char *why = NULL;
  if (v[A_TOKEN] != NULL &&
      (rc = ws_token_load(v[A_TOKEN], token, sizeof(token), &why)) != 0) {
    fprintf(stderr, "p2pctl targets: --api-token-file %s: %s\n", v[A_TOKEN],
            why != NULL ? why : ws_strerror(rc));
    return CTL_EXIT_USAGE;
  }
  if (npos != 1) {
    fputs("p2pctl targets: needs the tracker's HTTP HOST:PORT\n", stderr);
    return CTL_EXIT_USAGE;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return CTL_EXIT_FAIL;
  rc = tg_get(pos[0], v[A_TOKEN] != NULL ? token : NULL, &root);
  memset(token, 0, sizeof(token));
  if (rc == CTL_EXIT_OK) {
    if (v[A_JSON] != NULL && ws_parse_bool(v[A_JSON]) == 1) {
      char *s = cJSON_PrintUnformatted(root);
      if (s != NULL)
        printf("%s\n", s);
      free(s);
    } else {
      tg_print(root);
    }
  }
  cJSON_Delete(root);
  curl_global_cleanup();
  return rc;
}
