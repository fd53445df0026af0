/* config.h - loads p2pd settings (core/settings.h): long flags, then P2P_*
 * environment, then an optional JSON config file (same keys as the long
 * flags), then defaults.
 * Runs once in main() before the loop exists (the config file is read with
 * plain blocking I/O there, which is allowed because no loop runs yet).
 */
#ifndef PEER_CONFIG_FILE_H
#define PEER_CONFIG_FILE_H

#include <stdint.h>

#include "ws_err.h"
#include "ws_log.h"

#include "core/settings.h"

/* Returned by peer_config_load for --help / --version (usage printed). */
#define PEER_CONFIG_EXIT 1

/* Fills cfg from argv, the environment and the config file. Prints a
 * one-line reason to stderr on failure. Returns 0, PEER_CONFIG_EXIT, or
 * WS_EUSAGE / -errno. cfg's strings are new; free with peer_config_free. */
int peer_config_load(peer_settings_t *cfg, int argc, char **argv) WS_MUST_USE;
void peer_config_free(peer_settings_t *cfg);

/* Reads a cluster key file: 64 hex characters, surrounding whitespace
 * allowed. Blocking (start-up only). 0, WS_EKEY or -errno. */
int peer_config_read_key(const char *path, uint8_t key[32]) WS_MUST_USE;

/* Sizes as Kubernetes writes them (ws_parse_size): "123" bytes, "800G" =
 * 800 x 10^9, "800Gi" = 800 x 2^30; "800GB", "1.5G" are refused. Returns 0
 * or WS_EUSAGE. */
int peer_config_parse_size(const char *s, uint64_t *out) WS_MUST_USE;

#endif
