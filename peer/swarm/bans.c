/* bans.c - the swarm's ban list (bans.h). Owns nothing beyond the table
 * its user embeds. Thread: loop thread.
 */
#include <stdio.h>
#include <string.h>

#include "swarm/bans.h"

static void bans_hostport(char *buf, size_t len, const char *host,
                          uint16_t port) {
  if (host == NULL || host[0] == '\0' || port == 0)
    buf[0] = '\0';
  else
    snprintf(buf, len, "%s:%u", host, port);
}

int peer_bans_check(const peer_bans_t *b, uint64_t now_ms, const char *node_id,
                    const char *host, uint16_t port) {
  char hp[80];
  bans_hostport(hp, sizeof(hp), host, port);
  for (uint32_t i = 0; i < b->n; i++) {
    if (b->e[i].until_ms <= now_ms)
      continue;
    if ((node_id != NULL && node_id[0] != '\0' &&
         strcmp(b->e[i].node_id, node_id) == 0) ||
        (hp[0] != '\0' && strcmp(b->e[i].hostport, hp) == 0))
      return 1;
  }
  return 0;
}

int peer_bans_add(peer_bans_t *b, uint64_t now_ms, const char *node_id,
                  const char *host, uint16_t port) {
  uint32_t slot = 0;
  char hp[80];
  bans_hostport(hp, sizeof(hp), host, port);
  for (uint32_t i = 0; i < b->n; i++) {
    /* Already banned (a second bad chunk was in flight): extend it. */
    if (node_id != NULL && strcmp(b->e[i].node_id, node_id) == 0 &&
        strcmp(b->e[i].hostport, hp) == 0 && b->e[i].until_ms > now_ms) {
      b->e[i].until_ms = now_ms + PEER_BAN_MS;
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
  memcpy(b->e[slot].hostport, hp, sizeof(hp));
  b->e[slot].until_ms = now_ms + PEER_BAN_MS;
  return (int)slot;
}

uint32_t peer_bans_count(const peer_bans_t *b, uint64_t now_ms) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < b->n; i++)
    n += b->e[i].until_ms > now_ms;
  return n;
}
