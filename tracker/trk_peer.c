/* trk_peer.c - peer registry: slots, generations, validation, rate limit.
 *
 * Owns every trk_peer_t. Slots are a fixed array sized at creation (the peer
 * cap); an id is (generation << 16) | (slot + 1), so ids are never 0 and a
 * reused slot gets a new id. A new peer takes the lowest free slot, so the
 * slots in use stay below a high-water mark that iteration stops at, and
 * node ids are found through a hash index (open addressing, linear
 * probing, deletion by backward shift), not by a scan: connecting 10,000
 * nodes costs no more per node than connecting ten. Loop thread only.
 */
#include "trk_peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#define SLOT_MASK 0xFFFFu
#define MAX_SLOTS TRK_MAX_PEERS_MAX

struct trk_peers_s {
  uint32_t max;
  uint32_t max_joined;   /* join slots of each peer added */
  uint32_t max_per_addr; /* node ids per remote address */
  uint32_t count;
  uint32_t hwm;       /* slots >= hwm are free */
  uint32_t free_from; /* no free slot below this */
  trk_peer_t **slot;  /* max entries; NULL = free */
  uint16_t *gen;      /* generation per slot, bumped on each add */
  uint32_t *index;    /* node id hash -> slot + 1; 0 = empty */
  uint32_t index_mask;
  /* Peers per remote address: keyed hash of the address -> count, open
   * addressing in index_mask + 1 entries (n == 0: empty). */
  struct {
    uint64_t h;
    uint32_t n;
  } * addrs;
};

static uint32_t node_hash(const char *node_id) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)node_id; *p; p++)
    h = (h ^ *p) * 16777619u;
  return h;
}

/* A key nobody outside knows: a node cannot pick a zone label whose hash
 * equals another zone's and pass for a neighbour of its nodes, nor an
 * address that shares another's count of peers. */
static uint64_t zone_hash(const char *zone) {
  static unsigned char key[crypto_shorthash_KEYBYTES];
  static int keyed;
  unsigned char h[crypto_shorthash_BYTES];
  uint64_t v;
  if (!keyed) {
    if (sodium_init() < 0)
      abort(); /* no usable randomness: nothing here can be trusted */
    randombytes_buf(key, sizeof(key));
    keyed = 1;
  }
  crypto_shorthash(h, (const unsigned char *)zone, strlen(zone), key);
  memcpy(&v, h, sizeof(v));
  return v;
}

/* The address's entry in reg->addrs: its slot, or the empty one where it
 * would go. */
static uint32_t addr_slot(const trk_peers_t *reg, uint64_t h) {
  uint32_t i = (uint32_t)h & reg->index_mask;
  while (reg->addrs[i].n != 0 && reg->addrs[i].h != h)
    i = (i + 1u) & reg->index_mask;
  return i;
}

static void addr_add(trk_peers_t *reg, uint64_t h) {
  uint32_t i = addr_slot(reg, h);
  reg->addrs[i].h = h;
  reg->addrs[i].n++;
}

static void addr_del(trk_peers_t *reg, uint64_t h) {
  uint32_t i = addr_slot(reg, h);
  if (reg->addrs[i].n == 0 || --reg->addrs[i].n != 0)
    return;
  /* Backward shift, as in index_del. */
  for (uint32_t j = (i + 1u) & reg->index_mask; reg->addrs[j].n != 0;
       j = (j + 1u) & reg->index_mask) {
    uint32_t home = (uint32_t)reg->addrs[j].h & reg->index_mask;
    if (((j - home) & reg->index_mask) >= ((j - i) & reg->index_mask)) {
      reg->addrs[i] = reg->addrs[j];
      i = j;
    }
  }
  reg->addrs[i].n = 0;
}

uint32_t trk_peers_addr_count(const trk_peers_t *reg, const char *addr) {
  return reg->addrs[addr_slot(reg, zone_hash(addr == NULL ? "" : addr))].n;
}

int trk_peer_addr_loopback(const char *addr) {
  return addr != NULL &&
         (strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 ||
          strncmp(addr, "::ffff:127.", 11) == 0);
}

static void index_add(trk_peers_t *reg, uint32_t s) {
  uint32_t i = node_hash(reg->slot[s]->node_id) & reg->index_mask;
  while (reg->index[i] != 0)
    i = (i + 1u) & reg->index_mask;
  reg->index[i] = s + 1u;
}

static void index_del(trk_peers_t *reg, uint32_t s) {
  uint32_t i = node_hash(reg->slot[s]->node_id) & reg->index_mask;
  while (reg->index[i] != s + 1u)
    i = (i + 1u) & reg->index_mask;
  /* Backward shift: pull up every later entry whose home is at or before
   * the hole, so lookups never stop early at it. */
  for (uint32_t j = (i + 1u) & reg->index_mask; reg->index[j] != 0;
       j = (j + 1u) & reg->index_mask) {
    uint32_t home =
        node_hash(reg->slot[reg->index[j] - 1u]->node_id) & reg->index_mask;
    if (((j - home) & reg->index_mask) >= ((j - i) & reg->index_mask)) {
      reg->index[i] = reg->index[j];
      i = j;
    }
  }
  reg->index[i] = 0;
}

trk_peers_t *trk_peers_new(uint32_t max_peers) {
  if (max_peers == 0)
    max_peers = TRK_MAX_PEERS;
  if (max_peers > MAX_SLOTS)
    max_peers = MAX_SLOTS;
  trk_peers_t *reg = calloc(1, sizeof(*reg));
  if (reg == NULL)
    goto fail;
  reg->max = max_peers;
  reg->max_joined = TRK_MAX_SWARMS_PER_PEER;
  reg->max_per_addr = TRK_MAX_NODES_PER_ADDR;
  reg->slot = calloc(max_peers, sizeof(*reg->slot));
  if (reg->slot == NULL)
    goto fail_reg;
  reg->gen = calloc(max_peers, sizeof(*reg->gen));
  if (reg->gen == NULL)
    goto fail_slot;
  uint32_t size = 16;
  while (size < 2u * max_peers) /* at most half full */
    size *= 2u;
  reg->index = calloc(size, sizeof(*reg->index));
  if (reg->index == NULL)
    goto fail_gen;
  reg->addrs = calloc(size, sizeof(*reg->addrs));
  if (reg->addrs == NULL)
    goto fail_index;
  reg->index_mask = size - 1u;
  return reg;

fail_index:
  free(reg->index);
fail_gen:
  free(reg->gen);
fail_slot:
  free(reg->slot);
fail_reg:
  free(reg);
fail:
  return NULL;
}

void trk_peers_free(trk_peers_t *reg) {
  if (reg == NULL)
    return;
  for (uint32_t i = 0; i < reg->hwm; i++) {
    if (reg->slot[i] != NULL)
      free(reg->slot[i]->joined);
    free(reg->slot[i]);
  }
  free(reg->addrs);
  free(reg->index);
  free(reg->gen);
  free(reg->slot);
  free(reg);
}

/* Printable ASCII without space, quote or backslash: safe to echo into
 * JSON, logs and Prometheus labels without escaping surprises. */
static int node_char_ok(unsigned char c) {
  return c > 0x20 && c < 0x7F && c != '"' && c != '\\';
}

int trk_peer_node_id_valid(const char *s) {
  if (s == NULL)
    return 0;
  size_t n = strnlen(s, TRK_NODE_ID_MAX + 1);
  if (n == 0 || n > TRK_NODE_ID_MAX)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!node_char_ok((unsigned char)s[i]))
      return 0;
  return 1;
}

int trk_peer_zone_valid(const char *s) {
  if (s == NULL)
    return 1;
  size_t n = strnlen(s, TRK_ZONE_MAX + 1);
  if (n > TRK_ZONE_MAX)
    return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
          c == ':' || c == '/'))
      return 0;
  }
  return 1;
}

int trk_peer_addr_valid(const char *s) {
  if (s == NULL)
    return 1;
  size_t n = strnlen(s, TRK_ADDR_MAX + 1);
  if (n > TRK_ADDR_MAX)
    return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    /* IPv4, IPv6 (with optional zone id) and DNS names. */
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':' ||
          c == '%' || c == '_'))
      return 0;
  }
  return 1;
}

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src == NULL ? 0 : strnlen(src, cap - 1);
  if (n > 0)
    memcpy(dst, src, n);
  dst[n] = '\0';
}

static int info_valid(const trk_peer_info_t *info) {
  return info != NULL && trk_peer_node_id_valid(info->node_id) &&
         trk_peer_addr_valid(info->addr) && trk_peer_zone_valid(info->zone) &&
         (info->labels == NULL || ws_labels_valid(info->labels));
}

int trk_peers_add(trk_peers_t *reg, const trk_peer_info_t *info,
                  uint64_t now_ms, trk_peer_t **out) {
  if (!info_valid(info))
    return WS_EUSAGE;
  if (reg->count >= reg->max)
    return WS_ELIMIT;
  uint32_t s = reg->free_from;
  while (s < reg->max && reg->slot[s] != NULL)
    s++;
  if (s == reg->max)
    return WS_ELIMIT;
  reg->free_from = s + 1u;
  trk_peer_t *p = calloc(1, sizeof(*p));
  if (p == NULL)
    return -ENOMEM;
  p->max_joined = reg->max_joined;
  reg->gen[s]++;
  if (reg->gen[s] == 0)
    reg->gen[s] = 1;
  p->id = ((uint32_t)reg->gen[s] << 16) | (s + 1u);
  copy_str(p->node_id, sizeof(p->node_id), info->node_id);
  copy_str(p->addr, sizeof(p->addr), info->addr);
  p->addr_hash = zone_hash(p->addr);
  copy_str(p->zone, sizeof(p->zone), info->zone);
  p->zone_hash = zone_hash(p->zone);
  copy_str(p->labels, sizeof(p->labels), info->labels);
  p->port = info->port;
  p->connected_ms = now_ms;
  p->tokens_milli = (uint64_t)TRK_ANNOUNCE_BURST * 1000u;
  p->tokens_ms = now_ms;
  reg->slot[s] = p;
  reg->count++;
  if (s >= reg->hwm)
    reg->hwm = s + 1u;
  index_add(reg, s);
  addr_add(reg, p->addr_hash);
  *out = p;
  return 0;
}

static uint32_t id_slot(const trk_peers_t *reg, trk_peer_id_t id) {
  uint32_t s = id & SLOT_MASK;
  if (s == 0 || s > reg->max)
    return UINT32_MAX;
  return s - 1u;
}

trk_peer_t *trk_peers_get(const trk_peers_t *reg, trk_peer_id_t id) {
  uint32_t s = id_slot(reg, id);
  if (s == UINT32_MAX || reg->slot[s] == NULL || reg->slot[s]->id != id)
    return NULL;
  return reg->slot[s];
}

void trk_peers_remove(trk_peers_t *reg, trk_peer_id_t id) {
  trk_peer_t *p = trk_peers_get(reg, id);
  if (p == NULL)
    return;
  uint32_t s = id_slot(reg, id);
  index_del(reg, s);
  addr_del(reg, p->addr_hash);
  reg->slot[s] = NULL;
  reg->count--;
  if (s < reg->free_from)
    reg->free_from = s;
  while (reg->hwm > 0 && reg->slot[reg->hwm - 1u] == NULL)
    reg->hwm--;
  free(p->joined);
  free(p);
}

trk_peer_t *trk_peers_find_node(const trk_peers_t *reg, const char *node_id) {
  if (node_id == NULL)
    return NULL;
  for (uint32_t i = node_hash(node_id) & reg->index_mask; reg->index[i] != 0;
       i = (i + 1u) & reg->index_mask) {
    trk_peer_t *p = reg->slot[reg->index[i] - 1u];
    if (strcmp(p->node_id, node_id) == 0)
      return p;
  }
  return NULL;
}

uint32_t trk_peers_count(const trk_peers_t *reg) {
  return reg->count;
}

uint32_t trk_peers_max(const trk_peers_t *reg) {
  return reg->max;
}

uint32_t trk_peers_slots(const trk_peers_t *reg) {
  return reg->hwm;
}

int trk_peers_set_max_joined(trk_peers_t *reg, uint32_t n) {
  if (n == 0 || n > TRK_MAX_SWARMS_PER_PEER_MAX)
    return WS_EUSAGE;
  reg->max_joined = n;
  return 0;
}

uint32_t trk_peers_max_joined(const trk_peers_t *reg) {
  return reg->max_joined;
}

int trk_peers_set_max_per_addr(trk_peers_t *reg, uint32_t n) {
  if (n == 0 || n > TRK_MAX_NODES_PER_ADDR_MAX)
    return WS_EUSAGE;
  reg->max_per_addr = n;
  return 0;
}

uint32_t trk_peers_max_per_addr(const trk_peers_t *reg) {
  return reg->max_per_addr;
}

trk_peer_t *trk_peers_next(const trk_peers_t *reg, uint32_t *cursor) {
  while (*cursor < reg->hwm) {
    trk_peer_t *p = reg->slot[(*cursor)++];
    if (p != NULL)
      return p;
  }
  return NULL;
}

int trk_peers_update(trk_peers_t *reg, trk_peer_t *peer,
                     const trk_peer_info_t *info) {
  uint64_t h = peer->addr_hash;
  int rc = trk_peer_update(peer, info);
  if (rc == 0 && peer->addr_hash != h) {
    addr_del(reg, h);
    addr_add(reg, peer->addr_hash);
  }
  return rc;
}

int trk_peer_update(trk_peer_t *peer, const trk_peer_info_t *info) {
  if (!info_valid(info) || strcmp(info->node_id, peer->node_id) != 0)
    return WS_EUSAGE;
  copy_str(peer->addr, sizeof(peer->addr), info->addr);
  peer->addr_hash = zone_hash(peer->addr);
  copy_str(peer->zone, sizeof(peer->zone), info->zone);
  peer->zone_hash = zone_hash(peer->zone);
  if (info->labels != NULL)
    copy_str(peer->labels, sizeof(peer->labels), info->labels);
  peer->port = info->port;
  return 0;
}

int trk_peer_rate_take(trk_peer_t *peer, uint64_t now_ms) {
  const uint64_t cap = (uint64_t)TRK_ANNOUNCE_BURST * 1000u;
  if (now_ms > peer->tokens_ms) {
    /* TRK_ANNOUNCE_PER_S tokens per second = that many milli-tokens per
     * millisecond. Clamp elapsed first so the product cannot overflow. */
    uint64_t elapsed = now_ms - peer->tokens_ms;
    if (elapsed > cap)
      elapsed = cap;
    peer->tokens_milli += elapsed * TRK_ANNOUNCE_PER_S;
    if (peer->tokens_milli > cap)
      peer->tokens_milli = cap;
    peer->tokens_ms = now_ms;
  }
  if (peer->tokens_milli < 1000u) {
    peer->rate_limited++;
    return WS_EBUSY;
  }
  peer->tokens_milli -= 1000u;
  peer->announces++;
  peer->last_announce_ms = now_ms;
  return 0;
}

int trk_peer_join_add(trk_peer_t *peer, struct trk_swarm_s *swarm,
                      struct trk_member_s *member) {
  if (trk_peer_join_find(peer, swarm) != NULL)
    return WS_EEXISTS;
  if (peer->njoined >= peer->max_joined)
    return WS_ELIMIT;
  if (peer->njoined == peer->joined_cap) {
    uint32_t cap =
        peer->joined_cap == 0 ? TRK_PEER_JOIN_SLOTS_MIN : peer->joined_cap * 2u;
    if (cap > peer->max_joined)
      cap = peer->max_joined;
    trk_peer_join_t *v = realloc(peer->joined, cap * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
    peer->joined = v;
    peer->joined_cap = cap;
  }
  peer->joined[peer->njoined].swarm = swarm;
  peer->joined[peer->njoined].member = member;
  peer->njoined++;
  return 0;
}

trk_peer_join_t *trk_peer_join_find(trk_peer_t *peer,
                                    const struct trk_swarm_s *swarm) {
  for (uint32_t i = 0; i < peer->njoined; i++)
    if (peer->joined[i].swarm == swarm)
      return &peer->joined[i];
  return NULL;
}

void trk_peer_join_del(trk_peer_t *peer, const struct trk_swarm_s *swarm) {
  for (uint32_t i = 0; i < peer->njoined; i++) {
    if (peer->joined[i].swarm == swarm) {
      peer->joined[i] = peer->joined[peer->njoined - 1u];
      peer->njoined--;
      return;
    }
  }
}
