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
#include "core/tunables.h"
#include "proto.h"

typedef enum {
  KEY_CACHE,
  KEY_API,
  KEY_HTTP,
  KEY_LISTEN,
  KEY_TRACKER,
  KEY_CLUSTER_KEY,
  KEY_CAPACITY,
  KEY_S3_CONCURRENCY,
  KEY_LOG_LEVEL,
  KEY_NODE_ID,
  KEY_ZONE,
  KEY_UPLOAD_RATE,
  KEY_DOWNLOAD_RATE,
  KEY_MAX_NEIGHBORS,
  KEY_TEST_CORRUPT_SERVE,
  KEY_CONFIG,
  KEY_LAST
} config_key_t;

static const struct {
  const char *flag; /* long flag without "--", and config-file key */
  const char *env;
  const char *arg;
} k_keys[KEY_LAST] = {
    [KEY_CACHE] = {"cache", "P2P_CACHE", "DIR"},
    [KEY_API] = {"api", "P2P_API", "SOCKET"},
    [KEY_HTTP] = {"http", "P2P_HTTP", "HOST:PORT"},
    [KEY_LISTEN] = {"listen", "P2P_LISTEN", "HOST:PORT"},
    [KEY_TRACKER] = {"tracker", "P2P_TRACKER", "HOST:PORT"},
    [KEY_CLUSTER_KEY] = {"cluster-key", "P2P_CLUSTER_KEY_FILE", "FILE"},
    [KEY_CAPACITY] = {"capacity", "P2P_CAPACITY", "BYTES"},
    [KEY_S3_CONCURRENCY] = {"s3-concurrency", "P2P_S3_CONCURRENCY", "N"},
    [KEY_LOG_LEVEL] = {"log-level", "P2P_LOG_LEVEL", "LEVEL"},
    [KEY_NODE_ID] = {"node-id", "P2P_NODE_ID", "ID"},
    [KEY_ZONE] = {"zone", "P2P_ZONE", "ZONE"},
    [KEY_UPLOAD_RATE] = {"upload-rate", "P2P_UPLOAD_RATE", "BYTES/s"},
    [KEY_DOWNLOAD_RATE] = {"download-rate", "P2P_DOWNLOAD_RATE", "BYTES/s"},
    [KEY_MAX_NEIGHBORS] = {"max-neighbors", "P2P_MAX_NEIGHBORS", "N"},
    /* Test builds only (-Dfault_inject=true): flips a byte in every chunk
     * served, for the fault suite. Value 1/0. */
    [KEY_TEST_CORRUPT_SERVE] = {"test-corrupt-serve", "P2P_TEST_CORRUPT_SERVE",
                                "1"},
    [KEY_CONFIG] = {"config", "P2P_CONFIG", "FILE"},
};

static void config_usage(FILE *out) {
  fputs("usage: p2pd --cache DIR --api SOCKET [options]\n\n", out);
  for (int k = 0; k < KEY_LAST; k++)
    fprintf(out, "  --%-15s %-10s (env %s)\n", k_keys[k].flag, k_keys[k].arg,
            k_keys[k].env);
  fputs("\nprecedence: flag > environment > config file (JSON, same keys) >"
        " default\nS3: AWS_ENDPOINT_URL_S3, AWS_REGION, AWS_ACCESS_KEY_ID, ..."
        "\n",
        out);
}

int peer_config_parse_size(const char *s, uint64_t *out) {
  if (s == NULL || *s == '\0' || *s == '-')
    return WS_EUSAGE;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s)
    return WS_EUSAGE;
  unsigned shift = 0;
  switch (*end) {
  case '\0':
    break;
  case 'K':
  case 'k':
    shift = 10;
    break;
  case 'M':
  case 'm':
    shift = 20;
    break;
  case 'G':
  case 'g':
    shift = 30;
    break;
  case 'T':
  case 't':
    shift = 40;
    break;
  default:
    return WS_EUSAGE;
  }
  if (*end != '\0') {
    end++;
    if (*end == 'i' || *end == 'B') /* "Gi", "GB", "GiB" */
      end++;
    if (*end == 'B')
      end++;
    if (*end != '\0')
      return WS_EUSAGE;
  }
  if (shift != 0 && v > (UINT64_MAX >> shift))
    return WS_EUSAGE;
  *out = (uint64_t)v << shift;
  return 0;
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
    if (k != KEY_CONFIG && strcmp(it->string, k_keys[k].flag) == 0)
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
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      config_usage(stdout);
      return PEER_CONFIG_EXIT;
    }
    if (strcmp(a, "--version") == 0) {
      puts("p2pd 0.1.0");
      return PEER_CONFIG_EXIT;
    }
    if (strncmp(a, "--", 2) != 0) {
      fprintf(stderr, "p2pd: unexpected argument '%s'\n", a);
      return WS_EUSAGE;
    }
    a += 2;
    const char *eq = strchr(a, '=');
    size_t nlen = eq != NULL ? (size_t)(eq - a) : strlen(a);
    int k;
    for (k = 0; k < KEY_LAST; k++) {
      if (strlen(k_keys[k].flag) == nlen &&
          strncmp(a, k_keys[k].flag, nlen) == 0)
        break;
    }
    if (k == KEY_LAST) {
      fprintf(stderr, "p2pd: unknown flag '%s' (see --help)\n", argv[i]);
      return WS_EUSAGE;
    }
    if (eq != NULL) {
      flag_vals[k] = eq + 1;
    } else if (k == KEY_TEST_CORRUPT_SERVE) {
      flag_vals[k] = "1"; /* a switch */
    } else if (i + 1 < argc) {
      flag_vals[k] = argv[++i];
    } else {
      fprintf(stderr, "p2pd: --%s needs a value\n", k_keys[k].flag);
      return WS_EUSAGE;
    }
  }
  return 0;
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
    fprintf(stderr, "p2pd: --upload-rate/--download-rate: want "
                    "BYTES[K|M|G] per second (0 = unlimited)\n");
    return WS_EUSAGE;
  }
  if (v[KEY_TEST_CORRUPT_SERVE] != NULL &&
      strcmp(v[KEY_TEST_CORRUPT_SERVE], "0") != 0) {
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
  }
  return rc;
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
    fprintf(stderr, "p2pd: --capacity '%s': want BYTES[K|M|G|T]\n",
            v[KEY_CAPACITY]);
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
      (rc = config_load_swarm(cfg, v)) != 0) {
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
  memset(cfg, 0, sizeof(*cfg));
}
