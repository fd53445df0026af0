/* settings.h - what the operator set for p2pd: long flags, P2P_*
 * environment, the JSON config file, defaults (config.c fills it; the
 * defaults and compile-time limits are in tunables.h). Read-only after
 * start-up; every module borrows it through its context (ctx.h).
 */
#ifndef PEER_CORE_SETTINGS_H
#define PEER_CORE_SETTINGS_H

#include <stdint.h>

#include "ws_log.h"

typedef struct {
  char *cache_dir;         /* --cache DIR (required) */
  char *api_socket;        /* --api SOCKET */
  char *http;              /* --http HOST:PORT: API also on TCP, or NULL */
  char *api_token;         /* from --api-token-file: TCP API requests other
                              than GET need it; NULL = none (owned, wiped) */
  int api_token_reads;     /* --api-token-reads: GETs on TCP need it too */
  int insecure;            /* --insecure: no key / no token allowed */
  int plaintext_payloads;  /* --plaintext-payloads: HELLO v1, no sealing */
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
  char *zone;             /* --zone, or the first line of --zone-file */
  char *zone_file;        /* --zone-file FILE, or NULL */
  char *labels;           /* --label K=V..., canonical "k=v,k2=v2" (never
                             NULL after load; "" = none), sent in HELLO */
  char *hf_cache;         /* --hf-cache DIR: Hugging Face view, or NULL */
  char *metrics;          /* --metrics HOST:PORT: read-only /metrics,
                             /healthz, /readyz on TCP; NULL = off */
  uint64_t upload_rate;   /* --upload-rate BYTES/s (and pace); 0 = unlimited */
  uint64_t download_rate; /* --download-rate BYTES/s; 0 = unlimited */
  unsigned max_neighbors; /* --max-neighbors */
  /* Liveness (docs/operations.md): seconds without a byte from any source
   * before a release is stalled (--stall-timeout) and failed (--stall-fail). */
  unsigned stall_timeout_s;
  unsigned stall_fail_s;
  int test_corrupt_serve; /* --test-corrupt-serve (fault-inject builds) */
  /* --test-write-fault CODE:N (fault-inject builds): chunk writes from the
   * Nth on fail with test_write_fault (-ENOSPC or -EIO); 0 = off. */
  int test_write_fault;
  unsigned test_write_fault_nth;
} peer_settings_t;

#endif
