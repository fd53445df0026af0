/* main.c - p2pd entry point: settings, then the daemon (daemon.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "daemon.h"
#include "core/tunables.h"
#include "ws_log.h"

int main(int argc, char **argv) {
  peer_settings_t cfg;
  peer_daemon_t d;
  int rc = peer_config_load(&cfg, argc, argv);
  if (rc == PEER_CONFIG_EXIT)
    return 0;
  if (rc != 0)
    return 2;
  ws_log_set_prog("p2pd");
  ws_log_set_level(cfg.log_level);
  if (cfg.swarm && !cfg.has_cluster_key) /* only with --insecure */
    WS_LOGW("INSECURE: swarm mode without --cluster-key: the all-zero "
            "development key; any host that can reach the tracker or this "
            "node's --listen port can join the swarm");
  if (cfg.http != NULL && cfg.api_token == NULL) /* only with --insecure */
    WS_LOGW("INSECURE: --http %s without --api-token-file: anyone who can "
            "reach it can prefetch, evict and seed",
            cfg.http);
  signal(SIGPIPE, SIG_IGN);
  /* Size the worker pool before libuv creates it (first uv_queue_work). */
  if (getenv("UV_THREADPOOL_SIZE") == NULL) {
    char n[16];
    snprintf(n, sizeof(n), "%d", PEER_THREADPOOL_SIZE);
    setenv("UV_THREADPOOL_SIZE", n, 1);
  }
  if (peer_daemon_init(&d, &cfg) != 0) {
    peer_config_free(&cfg);
    return 1;
  }
  rc = peer_daemon_run(&d);
  peer_config_free(&cfg);
  return rc;
}
