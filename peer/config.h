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
  /* Swarm mode: on when listen or tracker is set. */
  int swarm;
  uint8_t cluster_key[32]; /* from cluster_key_file; all-zero without */
  int has_cluster_key;
  char *node_id;          /* --node-id, or random hex */
  char *zone;             /* --zone, or NULL */
  uint64_t upload_rate;   /* --upload-rate BYTES/s; 0 = unlimited */
  uint64_t download_rate; /* --download-rate BYTES/s; 0 = unlimited */
  unsigned max_neighbors; /* --max-neighbors */
  int test_corrupt_serve; /* --test-corrupt-serve (fault-inject builds) */
} peer_config_t;

/* Returned by peer_config_load for --help / --version (usage printed). */
#define PEER_CONFIG_EXIT 1

/* Fills cfg from argv, the environment and the config file. Prints a
 * one-line reason to stderr on failure. Returns 0, PEER_CONFIG_EXIT, or
 * WS_EUSAGE / -errno. cfg's strings are new; free with peer_config_free. */
int peer_config_load(peer_config_t *cfg, int argc, char **argv) WS_MUST_USE;
void peer_config_free(peer_config_t *cfg);

/* Reads a cluster key file: 64 hex characters, surrounding whitespace
 * allowed. Blocking (start-up only). 0, WS_EKEY or -errno. */
int peer_config_read_key(const char *path, uint8_t key[32]) WS_MUST_USE;

/* Parses "123", "64K", "10G", "1.5T" is refused (integers only); K/M/G/T
 * are powers of 1024. Returns 0 or WS_EUSAGE. */
int peer_config_parse_size(const char *s, uint64_t *out) WS_MUST_USE;

#endif
