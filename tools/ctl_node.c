/* ctl_node.c - `p2pctl node-zone`: the Kubernetes step that gives p2pd its
 * zone. The downward API cannot expose a node label, so the p2pd
 * DaemonSet's init container runs this: GET /api/v1/nodes/NODE from the API
 * server with the pod's projected service-account token (RBAC: get nodes),
 * read the label (default topology.kubernetes.io/zone) and write it as one
 * line to --out, which p2pd reads with --zone-file. The file is written to
 * FILE.tmp and renamed, so p2pd never sees half of it.
 *
 * Everything from the API server is hostile until checked: the body is
 * capped, parsed with cJSON, and the label value must be a valid label
 * value (<= 63 bytes of [A-Za-z0-9._-]). With --best-effort any failure
 * writes an empty file (p2pd: no zone) and exits 0 after saying why on
 * stderr, so a missing label or RBAC never keeps p2pd from starting.
 *
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

#define NODE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define NODE_LABEL_DEFAULT "topology.kubernetes.io/zone"
#define NODE_BODY_MAX (4u << 20) /* a Node object is a few KiB */
#define NODE_TOKEN_MAX 16384
#define NODE_TIMEOUT_MS 10000L

enum { A_NODE, A_OUT, A_LABEL, A_SERVER, A_TOKEN, A_CA, A_BEST, A_N };

static const ws_arg_t k_rows[A_N] = {
    {"node", "NODE_NAME", "NAME", WS_ARG_STR, 0,
     "the Node object to read (the pod's spec.nodeName)"},
    {"out", NULL, "FILE", WS_ARG_STR, 0,
     "file to write the zone to (one line; empty when unknown)"},
    {"label", NULL, "KEY", WS_ARG_STR, 0,
     "node label holding the zone (default " NODE_LABEL_DEFAULT ")"},
    {"server", NULL, "URL", WS_ARG_STR, 0,
     "API server (default https://$KUBERNETES_SERVICE_HOST:"
     "$KUBERNETES_SERVICE_PORT)"},
    {"token", NULL, "FILE", WS_ARG_STR, 0,
     "bearer token file (default " NODE_SA_DIR "/token)"},
    {"ca", NULL, "FILE", WS_ARG_STR, 0,
     "CA bundle for the API server (default " NODE_SA_DIR "/ca.crt)"},
    {"best-effort", NULL, NULL, WS_ARG_BOOL, 0,
     "on any failure write an empty zone and exit 0 (reason on stderr)"},
};

static const ws_args_spec_t k_spec = {
    "p2pctl node-zone",
    "--out FILE [--node NAME] [options]",
    "Reads this node's zone label from the Kubernetes API and writes it to "
    "FILE for p2pd --zone-file (the DaemonSet's init step).",
    k_rows,
    A_N,
    NULL};

/* RFC 1123 subdomain: what Kubernetes allows in a node name. */
static int node_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 253)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.'))
      return 0;
  }
  return 1;
}

/* A label value: empty, or <= 63 of [A-Za-z0-9._-]. */
static int node_value_ok(const char *s) {
  size_t n = strlen(s);
  if (n > 63)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
      return 0;
  }
  return 1;
}

/* The token file's first line, trimmed; printable only. NULL + message. */
static char *node_read_token(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "p2pctl node-zone: cannot read token %s\n", path);
    return NULL;
  }
  char *t = calloc(1, NODE_TOKEN_MAX + 1);
  size_t n = t == NULL ? 0 : fread(t, 1, NODE_TOKEN_MAX, f);
  fclose(f);
  while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
    n--;
  if (t != NULL)
    t[n] = '\0';
  for (size_t i = 0; t != NULL && i < n; i++) {
    if (t[i] <= ' ' || t[i] > '~')
      n = 0;
  }
  if (n == 0) {
    fprintf(stderr, "p2pctl node-zone: token %s is empty or not printable\n",
            path);
    free(t);
    return NULL;
  }
  return t;
}

/* GET url with the bearer token; *body (new) on HTTP 200. */
static int node_get(const char *url, const char *token, const char *ca,
                    ctl_body_t *body) {
  CURL *c = curl_easy_init();
  if (c == NULL)
    return CTL_EXIT_FAIL;
  struct curl_slist *h = NULL;
  size_t hl = strlen(token) + 32;
  char *auth = malloc(hl);
  if (auth != NULL) {
    snprintf(auth, hl, "Authorization: Bearer %s", token);
    h = curl_slist_append(h, auth);
  }
  h = curl_slist_append(h, "Accept: application/json");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, NODE_TIMEOUT_MS);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, ctl_body_write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
  CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  curl_slist_free_all(h);
  free(auth);
  if (rc != CURLE_OK) {
    fprintf(stderr, "p2pctl node-zone: GET %s: %s\n", url,
            body->over ? "reply too large" : curl_easy_strerror(rc));
    return CTL_EXIT_FAIL;
  }
  if (status != 200) {
    fprintf(stderr, "p2pctl node-zone: GET %s: HTTP %ld%s\n", url, status,
            status == 403 ? " (RBAC: the service account needs get nodes)"
                          : "");
    return status == 404 ? CTL_EXIT_NOTFOUND : CTL_EXIT_FAIL;
  }
  return CTL_EXIT_OK;
}

/* metadata.labels[label] of the Node JSON into zone (may stay ""). */
static int node_zone_of(const char *json, const char *label, char *zone,
                        size_t len) {
  cJSON *j = cJSON_Parse(json);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "metadata");
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(m, "labels");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(l, label);
  int rc = CTL_EXIT_OK;
  zone[0] = '\0';
  if (!cJSON_IsObject(m)) {
    fputs("p2pctl node-zone: the reply is not a Kubernetes object\n", stderr);
    rc = CTL_EXIT_FAIL;
  } else if (v == NULL) {
    fprintf(stderr, "p2pctl node-zone: the node has no label %s\n", label);
    rc = CTL_EXIT_NOTFOUND;
  } else if (!cJSON_IsString(v) || !node_value_ok(v->valuestring)) {
    fprintf(stderr, "p2pctl node-zone: label %s is not a valid value\n", label);
    rc = CTL_EXIT_FAIL;
  } else {
    snprintf(zone, len, "%s", v->valuestring);
  }
  cJSON_Delete(j);
  return rc;
}

/* zone + "\n" (or nothing) to path, atomically. */
static int node_write(const char *path, const char *zone) {
  size_t n = strlen(path) + 5;
  char *tmp = malloc(n);
  if (tmp == NULL)
    return CTL_EXIT_FAIL;
  snprintf(tmp, n, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  int ok = f != NULL;
  if (ok && zone[0] != '\0')
    ok = fprintf(f, "%s\n", zone) > 0;
  if (f != NULL && fclose(f) != 0)
    ok = 0;
  if (ok && rename(tmp, path) != 0)
    ok = 0;
  if (!ok) {
    fprintf(stderr, "p2pctl node-zone: cannot write %s\n", path);
    remove(tmp);
  }
  free(tmp);
  return ok ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

/* The default API server URL from the in-cluster environment. */
static int node_server(char *buf, size_t len) {
  const char *host = getenv("KUBERNETES_SERVICE_HOST");
  const char *port = getenv("KUBERNETES_SERVICE_PORT");
  if (host == NULL || *host == '\0') {
    fputs("p2pctl node-zone: not in a cluster (KUBERNETES_SERVICE_HOST "
          "unset); pass --server\n",
          stderr);
    return CTL_EXIT_USAGE;
  }
  int v6 = strchr(host, ':') != NULL;
  snprintf(buf, len, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
           port != NULL && *port != '\0' ? port : "443");
  return CTL_EXIT_OK;
}

static int node_lookup(const char **v, char *zone, size_t zlen) {
  char server[512], url[1024];
  const char *label = v[A_LABEL] ? v[A_LABEL] : NODE_LABEL_DEFAULT;
  int rc = CTL_EXIT_OK;
  if (v[A_SERVER] != NULL)
    snprintf(server, sizeof(server), "%s", v[A_SERVER]);
  else
    rc = node_server(server, sizeof(server));
  if (rc != CTL_EXIT_OK)
    return rc;
  size_t sl = strlen(server);
  while (sl > 0 && server[sl - 1] == '/')
    server[--sl] = '\0';
  snprintf(url, sizeof(url), "%s/api/v1/nodes/%s", server, v[A_NODE]);
  char *token = node_read_token(v[A_TOKEN] ? v[A_TOKEN] : NODE_SA_DIR "/token");
  if (token == NULL)
    return CTL_EXIT_FAIL;
  ctl_body_t body = {.max = NODE_BODY_MAX};
  rc = node_get(url, token, v[A_CA] ? v[A_CA] : NODE_SA_DIR "/ca.crt", &body);
  free(token);
  if (rc == CTL_EXIT_OK)
    rc = node_zone_of(body.p ? body.p : "", label, zone, zlen);
  free(body.p);
  return rc;
}

int ctl_node_zone_main(int argc, char **argv) {
  const char *v[A_N] = {0};
  size_t npos = 0;
  int rc = ws_args_parse(&k_spec, argc, argv, v, NULL, 0, &npos);
  if (rc == WS_ARGS_HELP || rc == WS_ARGS_VERSION) {
    if (rc == WS_ARGS_HELP)
      ws_args_usage(&k_spec, stdout);
    else
      ws_args_print_version("p2pctl");
    return CTL_EXIT_OK;
  }
  if (rc != 0)
    return CTL_EXIT_USAGE;
  ws_args_env(&k_spec, v);
  if (ws_args_check(&k_spec, v) != 0)
    return CTL_EXIT_USAGE;
  if (v[A_OUT] == NULL || v[A_NODE] == NULL || !node_name_ok(v[A_NODE])) {
    fputs("p2pctl node-zone: needs --out FILE and a valid --node NAME (or "
          "NODE_NAME)\n",
          stderr);
    return CTL_EXIT_USAGE;
  }
  char zone[64];
  rc = node_lookup(v, zone, sizeof(zone));
  if (rc != CTL_EXIT_OK) {
    if (v[A_BEST] == NULL || ws_parse_bool(v[A_BEST]) != 1)
      return rc;
    fputs("p2pctl node-zone: --best-effort: writing an empty zone\n", stderr);
    zone[0] = '\0';
  }
  rc = node_write(v[A_OUT], zone);
  if (rc == CTL_EXIT_OK)
    fprintf(stderr, "p2pctl node-zone: %s zone '%s'\n", v[A_NODE], zone);
  return rc;
}
