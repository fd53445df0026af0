/* swarm_stub.c - the swarm functions the release layer calls, for tests
 * that run the release table standalone (swarm NULL): none of them may be
 * reached, so each fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "swarm/swarm.h"

int peer_swarm_manifest_fetch(peer_swarm_t *s, const ws_hash_t *digest,
                              const char *uri, peer_swarm_manifest_fn cb,
                              void *arg) {
  fail_msg("swarm called in a standalone test");
  return 0;
}

void peer_swarm_ban_node(peer_swarm_t *s, const char *node_id, const char *host,
                         const char *why) {
  fail_msg("swarm called in a standalone test");
}

void peer_swarm_rel_fetching(peer_swarm_t *s, const ws_hash_t *digest,
                             const char *uri, const ws_manifest_t *m,
                             const char *mbytes, size_t mlen,
                             peer_file_t *const *files, uint32_t nfiles) {
  fail_msg("swarm called in a standalone test");
}

void peer_swarm_rel_ready(peer_swarm_t *s, const ws_hash_t *digest,
                          ws_manifest_t *m, char *mbytes, size_t mlen) {
  fail_msg("swarm called in a standalone test");
}

void peer_swarm_rel_gone(peer_swarm_t *s, const ws_hash_t *digest) {
  fail_msg("swarm called in a standalone test");
}

void peer_swarm_seed_ready(peer_swarm_t *s, const ws_hash_t *digest) {
  fail_msg("swarm called in a standalone test");
}

uint64_t peer_swarm_rel_stalled(peer_swarm_t *s, const ws_hash_t *digest) {
  fail_msg("swarm called in a standalone test");
  return 0;
}
