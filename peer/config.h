/* config.h - p2pd settings: long flags, then P2P_* environment, then an
 * optional JSON config file (same keys as the long flags), then defaults.
 * Runs once in main() before the loop exists (the config file is read with
 * plain blocking I/O there, which is allowed because no loop runs yet).
 */
#ifndef PEER_CONFIG_FILE_H
#define PEER_CONFIG_FILE_H

#include <stdint.h>

#include "ws_err.h"
#include "ws_log.h"

typedef struct {
  char *cache_dir;         /* --cache DIR (required) */
  char *api_socket;        /* --api SOCKET */
  char *http;              /* --http HOST:PORT: API also on TCP, or NULL */
  char *listen;            /* --listen HOST:PORT (swarm mode), or NULL */
  char *tracker;           /* --tracker HOST:PORT; NULL = standalone */
  char *cluster_key_file;  /* --cluster-key FILE, or NULL */
  char *config_file;       /* --config FILE, or NULL */
  uint64_t capacity_bytes; /* --capacity; 0 = unlimited */
  unsigned s3_concurrency; /* --s3-concurrency */
  ws_log_level_t log_level;
} peer_config_t;

/* Returned by peer_config_load for --help / --version (usage printed). */
#define PEER_CONFIG_EXIT 1

/* Fills cfg from argv, the environment and the config file. Prints a
 * one-line reason to stderr on failure. Returns 0, PEER_CONFIG_EXIT, or
 * WS_EUSAGE / -errno. cfg's strings are new; free with peer_config_free. */
int peer_config_load(peer_config_t *cfg, int argc, char **argv) WS_MUST_USE;
void peer_config_free(peer_config_t *cfg);

/* Parses "123", "64K", "10G", "1.5T" is refused (integers only); K/M/G/T
 * are powers of 1024. Returns 0 or WS_EUSAGE. */
int peer_config_parse_size(const char *s, uint64_t *out) WS_MUST_USE;

#endif
