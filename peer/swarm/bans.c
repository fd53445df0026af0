/* bans.c - the swarm's ban list (bans.h). Owns nothing beyond the table
 * its user embeds. Thread: loop thread.
 */
#include <stdio.h>
#include <string.h>

#include "swarm/bans.h"

static int bans_str_eq(const char *a, const char *b) {
  return b != NULL && b[0] != '\0' && strcmp(a, b) == 0;
}

int peer_bans_check(const peer_bans_t *b, uint64_t now_ms, const char *node_id,
                    const char *host, uint16_t port) {
  for (uint32_t i = 0; i < b->n; i++) {
    if (b->e[i].until_ms <= now_ms || !bans_str_eq(b->e[i].host, host))
      continue;
    if (bans_str_eq(b->e[i].node_id, node_id) ||
        (port != 0 && b->e[i].port == port))
      return 1;
  }
  return 0;
}

int peer_bans_add(peer_bans_t *b, uint64_t now_ms, const char *node_id,
                  const char *host, uint16_t port) {
  uint32_t slot = 0;
  if (host == NULL || host[0] == '\0')
    return -1; /* nothing proven about anyone: no ban */
  for (uint32_t i = 0; i < b->n; i++) {
    /* Already banned (a second bad chunk was in flight): extend it. */
    if (node_id != NULL && strcmp(b->e[i].node_id, node_id) == 0 &&
        strcmp(b->e[i].host, host) == 0 && b->e[i].until_ms > now_ms) {
      b->e[i].until_ms = now_ms + PEER_BAN_MS;
      if (port != 0)
        b->e[i].port = port;
      return -1;
    }
  }
  if (b->n < PEER_BANS_MAX) {
    slot = b->n++;
  } else {
    /* Full: reuse the entry that ends first. */
    for (uint32_t i = 1; i < b->n; i++) {
      if (b->e[i].until_ms < b->e[slot].until_ms)
        slot = i;
    }
  }
  snprintf(b->e[slot].node_id, sizeof(b->e[slot].node_id), "%s",
           node_id != NULL ? node_id : "");
  snprintf(b->e[slot].host, sizeof(b->e[slot].host), "%s", host);
  b->e[slot].port = port;
  b->e[slot].until_ms = now_ms + PEER_BAN_MS;
  return (int)slot;
}

uint32_t peer_bans_count(const peer_bans_t *b, uint64_t now_ms) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < b->n; i++)
    n += b->e[i].until_ms > now_ms;
  return n;
}
