/* origin_share.h - which node reads a chunk from S3 while the tracker is
 * down: rendezvous hashing (highest random weight) of (release digest,
 * chunk) over a set of node keys.
 *
 * Without a tracker nobody grants origin leases, and a node that fetched
 * every chunk no neighbour had would read the whole release from S3 like
 * every other. Instead each node scores every chunk for itself and for each
 * neighbour that fetches or holds the release, and reads from S3 only the
 * chunks it scores highest on; the others arrive from their winner through
 * the normal picker path once it says HAVE "p" or HAVE. Every node of a set
 * computes the same winner without talking, and a node joining or leaving
 * the set moves only the chunks it wins. Taking over is the caller's part
 * (picker.c): a winner gone or silent for PEER_SHARE_STALL_MS leaves the
 * set, so its chunks fall to the next in the order.
 *
 * Pure: no state, no I/O. The hash is a 64-bit mix, not a cryptographic
 * one: a neighbour that lies about its node id only changes which chunks it
 * is asked to read (and fails to, and is taken over).
 */
#ifndef PEER_SWARM_ORIGIN_SHARE_H
#define PEER_SWARM_ORIGIN_SHARE_H

#include <stdint.h>

#include "proto.h"

/* A node's key: a 64-bit hash of its node id (NUL-terminated). */
uint64_t peer_share_key(const char *node_id);
/* The score of node key for global chunk g of the release digest. */
uint64_t peer_share_score(const uint8_t digest[WS_PROTO_DIGEST_LEN], uint32_t g,
                          uint64_t key);
/* 1 when self scores highest for chunk g of digest among self and
 * others[0..n) (equal scores: the smaller key wins), else 0. */
int peer_share_mine(const uint8_t digest[WS_PROTO_DIGEST_LEN], uint32_t g,
                    uint64_t self, const uint64_t *others, uint32_t n);

#endif
