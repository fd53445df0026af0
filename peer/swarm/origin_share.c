/* origin_share.c - rendezvous choice of a chunk's S3 reader while the
 * tracker is down (origin_share.h). Pure.
 */
#include <string.h>

#include "swarm/origin_share.h"

/* splitmix64's finalizer: every input bit moves every output bit. */
static uint64_t share_mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

uint64_t peer_share_key(const char *node_id) {
  uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a, then mixed */
  for (const unsigned char *p = (const unsigned char *)node_id; *p != '\0';
       p++) {
    h ^= *p;
    h *= 0x100000001B3ull;
  }
  return share_mix(h);
}

uint64_t peer_share_score(const uint8_t digest[WS_PROTO_DIGEST_LEN], uint32_t g,
                          uint64_t key) {
  uint64_t d;
  memcpy(&d, digest, sizeof(d)); /* a sha256: any 8 bytes are uniform */
  return share_mix(share_mix(d ^ ((uint64_t)g * 0x9E3779B97F4A7C15ull)) ^ key);
}

int peer_share_mine(const uint8_t digest[WS_PROTO_DIGEST_LEN], uint32_t g,
                    uint64_t self, const uint64_t *others, uint32_t n) {
  uint64_t mine = peer_share_score(digest, g, self);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t s = peer_share_score(digest, g, others[i]);
    if (s > mine || (s == mine && others[i] < self))
      return 0;
  }
  return 1;
}
