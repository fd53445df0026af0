/* bans.h - the swarm's ban list: neighbours that sent a chunk or a
 * manifest that failed its hash are kept out for PEER_BAN_MS.
 *
 * A ban is bound to the address the bad bytes came from (the numeric
 * address of that authenticated connection, which a keyed client
 * elsewhere cannot take): it covers the sender's node id at that address
 * and its listen port at that address (a node that comes back under a new
 * id from the same listener stays out too). Node ids are self-declared, so
 * a ban by id alone would let any key holder get an honest node banned by
 * claiming its id; bound to the address, the same claim bans only the
 * claimer.
 *
 * A fixed table of PEER_BANS_MAX entries; when full, the entry that ends
 * first is reused. Times are loop time in milliseconds.
 *
 * Owns: its table (embedded by its user). Thread: loop thread.
 */
#ifndef PEER_SWARM_BANS_H
#define PEER_SWARM_BANS_H

#include <stdint.h>

#include "core/tunables.h"
#include "proto.h"

typedef struct {
  struct {
    char node_id[WS_NODE_ID_MAX + 1];
    char host[64]; /* numeric address; never empty in a used entry */
    uint16_t port; /* listen port at host, 0 = unknown */
    uint64_t until_ms;
  } e[PEER_BANS_MAX];
  uint32_t n;
} peer_bans_t;

/* 1 when, at now_ms, a ban at host (NULL or "": no address, never
 * banned) covers node_id (may be NULL or "") or port (0: unknown). */
int peer_bans_check(const peer_bans_t *b, uint64_t now_ms, const char *node_id,
                    const char *host, uint16_t port);
/* Bans node_id and port at host until now_ms + PEER_BAN_MS. Returns the
 * index of a new entry in e (the caller counts and logs it), or -1 when the
 * same node was banned already (its ban is extended: a second bad chunk was
 * in flight) or host is NULL or "" (nothing to bind a ban to). */
int peer_bans_add(peer_bans_t *b, uint64_t now_ms, const char *node_id,
                  const char *host, uint16_t port);
/* Bans in force at now_ms. */
uint32_t peer_bans_count(const peer_bans_t *b, uint64_t now_ms);

#endif
