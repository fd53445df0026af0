/* config.c - p2pd settings: flags > P2P_* env > JSON config file > default.
 *
 * Owns the parsing of the command line and the config file. Runs on the
 * main thread before the loop starts; the only file it reads (the config
 * file) is read here with blocking I/O for that reason.
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "ws_args.h"
#include "ws_token.h"
#include "core/tunables.h"
#include "proto.h"

typedef enum {
  KEY_CACHE,
  KEY_API,
  KEY_HTTP,
  KEY_API_TOKEN_FILE,
  KEY_API_TOKEN_READS,
  KEY_INSECURE,
  KEY_PLAINTEXT_PAYLOADS,
  KEY_LISTEN,
  KEY_TRACKER,
  KEY_CLUSTER_KEY,
  KEY_CAPACITY,
  KEY_S3_CONCURRENCY,
  KEY_LOG_LEVEL,
  KEY_NODE_ID,
  KEY_ZONE,
  KEY_ZONE_FILE,
  KEY_LABEL,
  KEY_METRICS,
  KEY_HF_CACHE,
  KEY_UPLOAD_RATE,
  KEY_DOWNLOAD_RATE,
  KEY_MAX_NEIGHBORS,
  KEY_STALL_TIMEOUT,
  KEY_STALL_FAIL,
  KEY_TEST_CORRUPT_SERVE,
  KEY_TEST_WRITE_FAULT,
  KEY_CONFIG,
  KEY_LAST
} config_key_t;

/* One row per setting: long flag (also the config-file key), environment
 * variable, type, help. Indexed by config_key_t. */
static const ws_arg_t k_keys[KEY_LAST] = {
    [KEY_CACHE] = {"cache", "P2P_CACHE", "DIR", WS_ARG_STR, 0,
                   "cache directory (required)"},
    [KEY_API] =
        {"api", "P2P_API", "SOCKET", WS_ARG_STR, 0,
         "unix socket of the local API (default " PEER_API_SOCKET_DEFAULT ")"},
    [KEY_HTTP] = {"http", "P2P_HTTP", "HOST:PORT", WS_ARG_STR, 0,
                  "the whole API also on TCP (needs --api-token-file)"},
    [KEY_API_TOKEN_FILE] = {"api-token-file", "P2P_API_TOKEN_FILE", "FILE",
                            WS_ARG_STR, 0,
                            "bearer token POST/DELETE on --http must send "
                            "(required with --http unless --insecure)"},
    [KEY_API_TOKEN_READS] = {"api-token-reads", "P2P_API_TOKEN_READS", NULL,
                             WS_ARG_BOOL, 0,
                             "GETs on --http need the token too (not "
                             "/healthz, /readyz)"},
    [KEY_INSECURE] = {"insecure", "P2P_INSECURE", NULL, WS_ARG_BOOL, 0,
                      "development only: swarm mode without --cluster-key "
                      "(all-zero key), --http without a token (open API)"},
    [KEY_PLAINTEXT_PAYLOADS] = {"plaintext-payloads", "P2P_PLAINTEXT_PAYLOADS",
                                NULL, WS_ARG_BOOL, 0,
                                "chunks cross the node network in clear "
                                "(saves AES-GCM's CPU; only where nobody "
                                "unkeyed can see that network)"},
    [KEY_LISTEN] = {"listen", "P2P_LISTEN", "HOST:PORT", WS_ARG_STR, 0,
                    "peer protocol listener (swarm mode)"},
    [KEY_TRACKER] = {"tracker", "P2P_TRACKER", "HOST:PORT[,HOST:PORT...]",
                     WS_ARG_STR, 0,
                     "tracker address(es), releases sharded among them; "
                     "unset = standalone"},
    [KEY_CLUSTER_KEY] = {"cluster-key", "P2P_CLUSTER_KEY_FILE", "FILE",
                         WS_ARG_STR, 0, "file with the 64-hex cluster key"},
    [KEY_CAPACITY] = {"capacity", "P2P_CAPACITY", "SIZE", WS_ARG_SIZE, 0,
                      "cache capacity, e.g. 800G or 750Gi (default "
                      "unlimited)"},
    [KEY_S3_CONCURRENCY] = {"s3-concurrency", "P2P_S3_CONCURRENCY", "N",
                            WS_ARG_UINT, 0, "parallel S3 requests"},
    [KEY_LOG_LEVEL] = {"log-level", "P2P_LOG_LEVEL", "LEVEL", WS_ARG_STR, 0,
                       "error|warn|info|debug (default info)"},
    [KEY_NODE_ID] = {"node-id", "P2P_NODE_ID", "ID", WS_ARG_STR, 0,
                     "node id (default random per start)"},
    [KEY_ZONE] = {"zone", "P2P_ZONE", "ZONE", WS_ARG_STR, 0,
                  "zone label; peers in the same zone are preferred"},
    [KEY_ZONE_FILE] = {"zone-file", "P2P_ZONE_FILE", "FILE", WS_ARG_STR, 0,
                       "read the zone from the file's first line"},
    [KEY_LABEL] = {"label", "P2P_LABELS", "K=V", WS_ARG_STR, 0,
                   "node label for targeted prefetch; repeatable "
                   "(P2P_LABELS=k=v,k2=v2)"},
    [KEY_METRICS] = {"metrics", "P2P_METRICS", "HOST:PORT", WS_ARG_STR, 0,
                     "read-only /metrics, /healthz, /readyz on TCP"},
    [KEY_HF_CACHE] = {"hf-cache", "P2P_HF_CACHE", "DIR", WS_ARG_STR, 0,
                      "keep a Hugging Face hub cache view of ready releases "
                      "in DIR"},
    [KEY_UPLOAD_RATE] = {"upload-rate", "P2P_UPLOAD_RATE", "SIZE", WS_ARG_SIZE,
                         0,
                         "upload cap in bytes/s, the uploading sockets paced "
                         "to it (0 = unlimited)"},
    [KEY_DOWNLOAD_RATE] = {"download-rate", "P2P_DOWNLOAD_RATE", "SIZE",
                           WS_ARG_SIZE, 0,
                           "download cap in bytes/s (0 = unlimited)"},
    [KEY_MAX_NEIGHBORS] = {"max-neighbors", "P2P_MAX_NEIGHBORS", "N",
                           WS_ARG_UINT, 0, "peer connections at most"},
    [KEY_STALL_TIMEOUT] = {"stall-timeout", "P2P_STALL_TIMEOUT", "SECONDS",
                           WS_ARG_UINT, 0,
                           "a release with no byte from any source this long "
                           "is stalled: reported, another source asked, S3 "
                           "after twice this (default 20)"},
    [KEY_STALL_FAIL] = {"stall-fail", "P2P_STALL_FAIL", "SECONDS", WS_ARG_UINT,
                        0,
                        "a release with no byte from any source, S3 "
                        "included, this long fails (default 600)"},
    /* Test builds only (-Dfault_inject=true): flips a byte in every chunk
     * served, for the fault suite. Hidden from --help. */
    [KEY_TEST_CORRUPT_SERVE] = {"test-corrupt-serve", "P2P_TEST_CORRUPT_SERVE",
                                NULL, WS_ARG_BOOL, WS_ARG_HIDDEN, NULL},
    /* Test builds only: chunk writes from the Nth on fail with CODE (eio or
     * enospc), for the disk-error tests. Hidden from --help. */
    [KEY_TEST_WRITE_FAULT] = {"test-write-fault", "P2P_TEST_WRITE_FAULT",
                              "CODE:N", WS_ARG_STR, WS_ARG_HIDDEN, NULL},
    [KEY_CONFIG] = {"config", "P2P_CONFIG", "FILE", WS_ARG_STR, 0,
                    "JSON config file (keys = long option names)"},
};

static const ws_args_spec_t k_spec = {
    .prog = "p2pd",
    .synopsis = "--cache DIR [--api SOCKET] [options]",
    .about = "weightswarm node daemon: fetches model releases from S3 and "
             "peers into the local cache.",
    .args = k_keys,
    .nargs = KEY_LAST,
    .footer = "precedence: option > environment > config file > default\n"
              "sizes: " WS_SIZE_FORMS "\n"
              "S3: AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID, ...",
};

int peer_config_parse_size(const char *s, uint64_t *out) {
  return ws_parse_size(s, out);
}

static int config_parse_uint(const char *s, unsigned min, unsigned max,
                             unsigned *out) {
  if (s == NULL || *s == '\0' || *s == '-')
    return WS_EUSAGE;
  errno = 0;
  char *end = NULL;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return WS_EUSAGE;
  *out = (unsigned)v;
  return 0;
}

/* Reads the JSON config file into file_vals (new strings). */
/* Reads the whole config file into *out (new, NUL-terminated). Blocking:
 * start-up only. Prints the reason on failure. */
static int config_file_slurp(const char *path, char **out, size_t *outlen) {
  int rc = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    rc = -errno;
    fprintf(stderr, "p2pd: --config %s: %s\n", path, ws_strerror(rc));
    return rc;
  }
  char *buf = malloc(PEER_CONFIG_FILE_MAX_BYTES + 1);
  size_t len = 0;
  if (buf == NULL)
    rc = -ENOMEM;
  while (rc == 0) {
    ssize_t n = read(fd, buf + len, PEER_CONFIG_FILE_MAX_BYTES + 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = -errno;
      fprintf(stderr, "p2pd: --config %s: %s\n", path, ws_strerror(rc));
      break;
    }
    if (n == 0)
      break;
    len += (size_t)n;
    if (len > PEER_CONFIG_FILE_MAX_BYTES) {
      rc = WS_ELIMIT;
      fprintf(stderr, "p2pd: --config %s: larger than %u bytes\n", path,
              PEER_CONFIG_FILE_MAX_BYTES);
    }
  }
  close(fd);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[len] = '\0';
  *out = buf;
  *outlen = len;
  return 0;
}

/* One key of the config file into file_vals (a copy of its value). */
static int config_file_key(const char *path, const cJSON *it,
                           char *file_vals[KEY_LAST]) {
  int k;
  for (k = 0; k < KEY_LAST; k++) {
    if (k != KEY_CONFIG && strcmp(it->string, k_keys[k].name) == 0)
      break;
  }
  if (k == KEY_LAST) {
    fprintf(stderr, "p2pd: --config %s: unknown key '%s'\n", path, it->string);
    return WS_EUSAGE;
  }
  char num[32];
  const char *v = NULL;
  if (cJSON_IsString(it)) {
    v = it->valuestring;
  } else if (cJSON_IsNumber(it) && it->valuedouble >= 0 &&
             it->valuedouble < 1.8e19) {
    snprintf(num, sizeof(num), "%.0f", it->valuedouble);
    v = num;
  } else {
    fprintf(stderr, "p2pd: --config %s: '%s' must be a string or number\n",
            path, it->string);
    return WS_EUSAGE;
  }
  free(file_vals[k]);
  file_vals[k] = strdup(v);
  return file_vals[k] != NULL ? 0 : -ENOMEM;
}

static int config_file_read(const char *path, char *file_vals[KEY_LAST]) {
  char *buf = NULL;
  size_t len = 0;
  int rc = config_file_slurp(path, &buf, &len);
  if (rc != 0)
    return rc;
  cJSON *root = cJSON_ParseWithLength(buf, len);
  if (root == NULL || !cJSON_IsObject(root)) {
    rc = WS_EUSAGE;
    fprintf(stderr, "p2pd: --config %s: not a JSON object\n", path);
  }
  for (cJSON *it = root != NULL ? root->child : NULL; rc == 0 && it != NULL;
       it = it->next)
    rc = config_file_key(path, it, file_vals);
  cJSON_Delete(root);
  free(buf);
  return rc;
}

/* Parses argv into flag_vals (borrowed pointers into argv). */
static int config_parse_argv(int argc, char **argv,
                             const char *flag_vals[KEY_LAST]) {
  size_t npos = 0;
  int rc = ws_args_parse(&k_spec, argc, argv, flag_vals, NULL, 0, &npos);
  if (rc == WS_ARGS_HELP)
    ws_args_usage(&k_spec, stdout);
  else if (rc == WS_ARGS_VERSION)
    ws_args_print_version("p2pd");
  return rc == 0 ? 0 : rc == WS_EUSAGE ? WS_EUSAGE : PEER_CONFIG_EXIT;
}

int peer_config_read_key(const char *path, uint8_t key[32]) {
  char buf[256];
  size_t len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  for (;;) {
    ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
    if (len == sizeof(buf) - 1)
      break;
  }
  close(fd);
  buf[len] = '\0';
  char *p = buf;
  while (*p != '\0' && isspace((unsigned char)*p))
    p++;
  size_t n = strlen(p);
  while (n > 0 && isspace((unsigned char)p[n - 1]))
    n--;
  ws_hash_t h;
  int rc = n == 64 ? ws_hash_from_hex(p, n, &h) : WS_EKEY;
  memset(buf, 0, sizeof(buf));
  if (rc != 0)
    return WS_EKEY;
  memcpy(key, h.b, 32);
  memset(&h, 0, sizeof(h));
  return 0;
}

/* Node ids are sent in HELLO: printable, no spaces, 1..WS_NODE_ID_MAX. */
static int config_node_id_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > WS_NODE_ID_MAX)
    return 0;
  for (size_t i = 0; i < n; i++) {
    if (!isgraph((unsigned char)s[i]))
      return 0;
  }
  return 1;
}

static int config_node_id_random(char **out) {
  uint8_t b[PEER_NODE_ID_RANDOM_BYTES];
  size_t got = 0;
  while (got < sizeof(b)) {
    ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    got += (size_t)n;
  }
  char *s = malloc(2 * sizeof(b) + 1);
  if (s == NULL)
    return -ENOMEM;
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof(b); i++) {
    s[2 * i] = hex[b[i] >> 4];
    s[2 * i + 1] = hex[b[i] & 15];
  }
  s[2 * sizeof(b)] = '\0';
  *out = s;
  return 0;
}

/* Reads the zone from the first line of path (written by an init step
 * from the node's topology label). Blocking: start-up only. Surrounding
 * whitespace is dropped; an empty first line means no zone (*out NULL). */
static int config_zone_file(const char *path, char **out) {
  char buf[WS_ZONE_MAX + 2];
  *out = NULL;
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    int rc = -errno;
    fprintf(stderr, "p2pd: --zone-file %s: %s\n", path, ws_strerror(rc));
    return WS_EUSAGE;
  }
  char *line = fgets(buf, sizeof(buf), f);
  fclose(f);
  if (line == NULL)
    return 0; /* empty file: no zone */
  size_t n = strcspn(line, "\n");
  if (n > WS_ZONE_MAX) {
    fprintf(stderr, "p2pd: --zone-file %s: zone longer than %d bytes\n", path,
            WS_ZONE_MAX);
    return WS_EUSAGE;
  }
  while (n > 0 && isspace((unsigned char)line[n - 1]))
    n--;
  while (n > 0 && isspace((unsigned char)*line)) {
    line++;
    n--;
  }
  for (size_t i = 0; i < n; i++) {
    if (!isgraph((unsigned char)line[i])) {
      fprintf(stderr,
              "p2pd: --zone-file %s: zone has spaces or control "
              "bytes\n",
              path);
      return WS_EUSAGE;
    }
  }
  if (n == 0)
    return 0;
  *out = strndup(line, n);
  return *out != NULL ? 0 : -ENOMEM;
}

/* --label K=V (every occurrence on the command line; ws_args keeps only
 * the last), else P2P_LABELS / the config file's "label" (a comma list),
 * into cfg->labels in canonical form (ws_labels.h). */
static int config_labels(peer_settings_t *cfg, int argc, char **argv,
                         const char *fallback) {
  int rc = 0, seen = 0;
  cfg->labels = calloc(1, WS_LABELS_MAX + 1u);
  if (cfg->labels == NULL)
    return -ENOMEM;
  for (int i = 1; i < argc && rc == 0; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0)
      break;
    if (strncmp(a, "--label=", 8) == 0) {
      seen = 1;
      rc = ws_labels_add(cfg->labels, WS_LABELS_MAX + 1u, a + 8);
    } else if (strcmp(a, "--label") == 0 && i + 1 < argc) {
      seen = 1;
      a = argv[++i];
      rc = ws_labels_add(cfg->labels, WS_LABELS_MAX + 1u, a);
    }
    if (rc != 0)
      fprintf(stderr,
              "p2pd: --label '%s': want KEY=VALUE (key [A-Za-z0-9._/-] "
              "<= %d, value [A-Za-z0-9._-] <= %d, at most %d labels)\n",
              a, WS_LABEL_KEY_MAX, WS_LABEL_VALUE_MAX, WS_LABELS_COUNT_MAX);
  }
  if (rc == 0 && !seen && fallback != NULL &&
      (rc = ws_labels_add(cfg->labels, WS_LABELS_MAX + 1u, fallback)) != 0)
    fprintf(stderr, "p2pd: P2P_LABELS '%s': want k=v,k2=v2\n", fallback);
  return rc == 0 ? 0 : WS_EUSAGE;
}

/* The swarm settings (called after the common ones parsed). */
static int config_load_swarm(peer_settings_t *cfg, const char *v[KEY_LAST]) {
  int rc;
  cfg->swarm = v[KEY_LISTEN] != NULL || v[KEY_TRACKER] != NULL;
  cfg->max_neighbors = PEER_MAX_NEIGHBORS_DEFAULT;
  if (v[KEY_MAX_NEIGHBORS] != NULL &&
      config_parse_uint(v[KEY_MAX_NEIGHBORS], 1, PEER_MAX_NEIGHBORS_MAX,
                        &cfg->max_neighbors) != 0) {
    fprintf(stderr, "p2pd: --max-neighbors '%s': want 1..%u\n",
            v[KEY_MAX_NEIGHBORS], PEER_MAX_NEIGHBORS_MAX);
    return WS_EUSAGE;
  }
  if ((v[KEY_UPLOAD_RATE] != NULL &&
       peer_config_parse_size(v[KEY_UPLOAD_RATE], &cfg->upload_rate) != 0) ||
      (v[KEY_DOWNLOAD_RATE] != NULL &&
       peer_config_parse_size(v[KEY_DOWNLOAD_RATE], &cfg->download_rate) !=
           0)) {
    fprintf(stderr,
            "p2pd: --upload-rate/--download-rate: want %s per "
            "second (0 = unlimited)\n",
            WS_SIZE_FORMS);
    return WS_EUSAGE;
  }
  if (v[KEY_TEST_CORRUPT_SERVE] != NULL &&
      ws_parse_bool(v[KEY_TEST_CORRUPT_SERVE]) == 1) {
#ifdef WS_FAULT_INJECT
    cfg->test_corrupt_serve = 1;
#else
    fprintf(stderr, "p2pd: --test-corrupt-serve needs a build with "
                    "-Dfault_inject=true\n");
    return WS_EUSAGE;
#endif
  }
  if (v[KEY_ZONE] != NULL && strlen(v[KEY_ZONE]) > WS_ZONE_MAX) {
    fprintf(stderr, "p2pd: --zone: at most %d bytes\n", WS_ZONE_MAX);
    return WS_EUSAGE;
  }
  if (v[KEY_NODE_ID] != NULL && !config_node_id_ok(v[KEY_NODE_ID])) {
    fprintf(stderr, "p2pd: --node-id: 1..%d printable bytes, no spaces\n",
            WS_NODE_ID_MAX);
    return WS_EUSAGE;
  }
  if (v[KEY_CLUSTER_KEY] != NULL) {
    rc = peer_config_read_key(v[KEY_CLUSTER_KEY], cfg->cluster_key);
    if (rc != 0) {
      fprintf(stderr, "p2pd: --cluster-key %s: %s\n", v[KEY_CLUSTER_KEY],
              rc == WS_EKEY ? "expected 64 hex characters" : ws_strerror(rc));
      return WS_EUSAGE;
    }
    cfg->has_cluster_key = 1;
  }
  if (v[KEY_NODE_ID] != NULL) {
    cfg->node_id = strdup(v[KEY_NODE_ID]);
    rc = cfg->node_id == NULL ? -ENOMEM : 0;
  } else {
    rc = config_node_id_random(&cfg->node_id);
  }
  if (rc == 0 && v[KEY_ZONE] != NULL && *v[KEY_ZONE] != '\0') {
    cfg->zone = strdup(v[KEY_ZONE]);
    rc = cfg->zone == NULL ? -ENOMEM : 0;
  } else if (rc == 0 && v[KEY_ZONE_FILE] != NULL && *v[KEY_ZONE_FILE] != '\0') {
    rc = config_zone_file(v[KEY_ZONE_FILE], &cfg->zone); /* --zone wins */
  }
  return rc;
}

/* --test-write-fault CODE:N (fault-inject builds only). */
static int config_load_test(peer_settings_t *cfg, const char *v[KEY_LAST]) {
  const char *a = v[KEY_TEST_WRITE_FAULT];
  if (a == NULL)
    return 0;
#ifdef WS_FAULT_INJECT
  const char *colon = strchr(a, ':');
  size_t n = colon != NULL ? (size_t)(colon - a) : 0;
  if (n == 3 && strncmp(a, "eio", 3) == 0)
    cfg->test_write_fault = -EIO;
  else if (n == 6 && strncmp(a, "enospc", 6) == 0)
    cfg->test_write_fault = -ENOSPC;
  if (cfg->test_write_fault == 0 ||
      config_parse_uint(colon + 1, 1, UINT32_MAX, &cfg->test_write_fault_nth) !=
          0) {
    fprintf(stderr, "p2pd: --test-write-fault '%s': want eio:N or enospc:N\n",
            a);
    return WS_EUSAGE;
  }
  return 0;
#else
  (void)cfg;
  fprintf(stderr, "p2pd: --test-write-fault needs a build with "
                  "-Dfault_inject=true\n");
  return WS_EUSAGE;
#endif
}

/* --stall-timeout and --stall-fail (docs/operations.md, "Liveness
 * contract"). */
static int config_load_liveness(peer_settings_t *cfg, const char *v[KEY_LAST]) {
  cfg->stall_timeout_s = PEER_STALL_TIMEOUT_S_DEFAULT;
  cfg->stall_fail_s = PEER_STALL_FAIL_S_DEFAULT;
  if (v[KEY_STALL_TIMEOUT] != NULL &&
      config_parse_uint(v[KEY_STALL_TIMEOUT], 1, PEER_STALL_TIMEOUT_S_MAX,
                        &cfg->stall_timeout_s) != 0) {
    fprintf(stderr, "p2pd: --stall-timeout '%s': want 1..%u seconds\n",
            v[KEY_STALL_TIMEOUT], PEER_STALL_TIMEOUT_S_MAX);
    return WS_EUSAGE;
  }
  if (v[KEY_STALL_FAIL] != NULL &&
      config_parse_uint(v[KEY_STALL_FAIL], 1, PEER_STALL_FAIL_S_MAX,
                        &cfg->stall_fail_s) != 0) {
    fprintf(stderr, "p2pd: --stall-fail '%s': want 1..%u seconds\n",
            v[KEY_STALL_FAIL], PEER_STALL_FAIL_S_MAX);
    return WS_EUSAGE;
  }
  return 0;
}

/* The API token and the cluster key's absence: --http needs a token and
 * swarm mode a key, unless --insecure (docs/security.md). Runs after the
 * swarm settings are loaded. */
static int config_load_secrets(peer_settings_t *cfg, const char *v[KEY_LAST]) {
  cfg->insecure = v[KEY_INSECURE] != NULL && ws_parse_bool(v[KEY_INSECURE]);
  cfg->plaintext_payloads = v[KEY_PLAINTEXT_PAYLOADS] != NULL &&
                            ws_parse_bool(v[KEY_PLAINTEXT_PAYLOADS]);
  cfg->api_token_reads =
      v[KEY_API_TOKEN_READS] != NULL && ws_parse_bool(v[KEY_API_TOKEN_READS]);
  if (cfg->api_token_reads && v[KEY_API_TOKEN_FILE] == NULL) {
    fprintf(stderr, "p2pd: --api-token-reads needs --api-token-file\n");
    return WS_EUSAGE;
  }
  if (v[KEY_API_TOKEN_FILE] != NULL) {
    const char *why = NULL;
    cfg->api_token = calloc(1, WS_TOKEN_MAX + 1);
    if (cfg->api_token == NULL)
      return -ENOMEM;
    int rc = ws_token_load(v[KEY_API_TOKEN_FILE], cfg->api_token,
                           WS_TOKEN_MAX + 1, &why);
    if (rc != 0) {
      fprintf(stderr, "p2pd: --api-token-file %s: %s\n", v[KEY_API_TOKEN_FILE],
              why != NULL ? why : ws_strerror(rc));
      return WS_EUSAGE;
    }
  }
  if (cfg->insecure)
    return 0;
  if (cfg->swarm && !cfg->has_cluster_key) {
    fprintf(stderr, "p2pd: refusing to start in swarm mode without a cluster "
                    "key: give --cluster-key FILE, or --insecure for a "
                    "development run (docs/security.md)\n");
    return WS_EUSAGE;
  }
  if (cfg->http != NULL && cfg->api_token == NULL) {
    fprintf(stderr, "p2pd: refusing to open --http without an API token: "
                    "give --api-token-file FILE, or --insecure for a "
                    "development run (docs/security.md)\n");
    return WS_EUSAGE;
  }
  return 0;
}

static int config_dup(char **dst, const char *v) {
  *dst = NULL;
  if (v == NULL || *v == '\0')
    return 0;
  *dst = strdup(v);
  return *dst == NULL ? -ENOMEM : 0;
}

int peer_config_load(peer_settings_t *cfg, int argc, char **argv) {
  const char *flag_vals[KEY_LAST] = {0};
  char *file_vals[KEY_LAST] = {0};
  const char *v[KEY_LAST] = {0};
  memset(cfg, 0, sizeof(*cfg));
  int rc = config_parse_argv(argc, argv, flag_vals);
  if (rc != 0)
    return rc;
  const char *cfile = flag_vals[KEY_CONFIG] != NULL ? flag_vals[KEY_CONFIG]
                                                    : getenv("P2P_CONFIG");
  if (cfile != NULL && *cfile != '\0') {
    rc = config_file_read(cfile, file_vals);
    if (rc != 0)
      goto free_file;
  }
  for (int k = 0; k < KEY_LAST; k++) {
    const char *env = getenv(k_keys[k].env);
    v[k] = flag_vals[k] != NULL            ? flag_vals[k]
           : (env != NULL && *env != '\0') ? env
                                           : file_vals[k];
  }
  if ((rc = ws_args_check(&k_spec, v)) != 0)
    goto free_file;
  if (v[KEY_API] == NULL)
    v[KEY_API] = PEER_API_SOCKET_DEFAULT;
  if (v[KEY_CACHE] == NULL) {
    fprintf(stderr, "p2pd: --cache DIR (or P2P_CACHE) is required\n");
    rc = WS_EUSAGE;
    goto free_file;
  }
  cfg->s3_concurrency = PEER_S3_CONCURRENCY_DEFAULT;
  if (v[KEY_S3_CONCURRENCY] != NULL &&
      config_parse_uint(v[KEY_S3_CONCURRENCY], 1, PEER_S3_CONCURRENCY_MAX,
                        &cfg->s3_concurrency) != 0) {
    fprintf(stderr, "p2pd: --s3-concurrency '%s': want 1..%u\n",
            v[KEY_S3_CONCURRENCY], PEER_S3_CONCURRENCY_MAX);
    rc = WS_EUSAGE;
    goto free_file;
  }
  if (v[KEY_CAPACITY] != NULL &&
      peer_config_parse_size(v[KEY_CAPACITY], &cfg->capacity_bytes) != 0) {
    fprintf(stderr, "p2pd: --capacity '%s': want %s\n", v[KEY_CAPACITY],
            WS_SIZE_FORMS);
    rc = WS_EUSAGE;
    goto free_file;
  }
  cfg->log_level = WS_LOG_INFO;
  if (v[KEY_LOG_LEVEL] != NULL &&
      ws_log_parse_level(v[KEY_LOG_LEVEL], &cfg->log_level) != 0) {
    fprintf(stderr, "p2pd: --log-level '%s': want error|warn|info|debug\n",
            v[KEY_LOG_LEVEL]);
    rc = WS_EUSAGE;
    goto free_file;
  }
  if ((rc = config_dup(&cfg->cache_dir, v[KEY_CACHE])) != 0 ||
      (rc = config_dup(&cfg->api_socket, v[KEY_API])) != 0 ||
      (rc = config_dup(&cfg->http, v[KEY_HTTP])) != 0 ||
      (rc = config_dup(&cfg->listen, v[KEY_LISTEN])) != 0 ||
      (rc = config_dup(&cfg->tracker, v[KEY_TRACKER])) != 0 ||
      (rc = config_dup(&cfg->cluster_key_file, v[KEY_CLUSTER_KEY])) != 0 ||
      (rc = config_dup(&cfg->config_file, cfile)) != 0 ||
      (rc = config_dup(&cfg->metrics, v[KEY_METRICS])) != 0 ||
      (rc = config_dup(&cfg->zone_file, v[KEY_ZONE_FILE])) != 0 ||
      (rc = config_dup(&cfg->hf_cache, v[KEY_HF_CACHE])) != 0 ||
      (rc = config_labels(cfg, argc, argv, v[KEY_LABEL])) != 0 ||
      (rc = config_load_swarm(cfg, v)) != 0 ||
      (rc = config_load_secrets(cfg, v)) != 0 ||
      (rc = config_load_liveness(cfg, v)) != 0 ||
      (rc = config_load_test(cfg, v)) != 0) {
    peer_config_free(cfg);
    goto free_file;
  }
free_file:
  for (int k = 0; k < KEY_LAST; k++)
    free(file_vals[k]);
  return rc;
}

void peer_config_free(peer_settings_t *cfg) {
  if (cfg == NULL)
    return;
  free(cfg->cache_dir);
  free(cfg->api_socket);
  free(cfg->http);
  free(cfg->listen);
  free(cfg->tracker);
  free(cfg->cluster_key_file);
  free(cfg->config_file);
  free(cfg->node_id);
  free(cfg->zone);
  free(cfg->zone_file);
  free(cfg->labels);
  free(cfg->hf_cache);
  free(cfg->metrics);
  if (cfg->api_token != NULL)
    memset(cfg->api_token, 0, WS_TOKEN_MAX + 1);
  free(cfg->api_token);
  memset(cfg, 0, sizeof(*cfg));
}
