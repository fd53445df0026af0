/* trk_joining.h - peers about to join a release: they announced its digest
 * without a chunk count, reading its manifest (TRK_JOINING_MS).
 *
 * Two uses. The lease cap counts them as downloaders already, so that the
 * first peer to join a cluster-wide start does not take every lease
 * (trk_joining_count). And a release nobody holds yet has its manifest
 * read from S3 by one of them, not by all: the first is told to read it
 * (its reply names nobody), each later one is named that reader first and
 * then other joiners, and gets the manifest from a neighbour
 * (trk_joining_name; docs/tracker.md "A release nobody holds yet").
 *
 * A fixed table (TRK_JOINING_MAX entries, unordered, swap-remove); a full
 * table only makes both uses less even. Pure logic, loop thread only.
 */
#ifndef TRK_JOINING_H
#define TRK_JOINING_H

#include <stdbool.h>
#include <stdint.h>

#include "trk_config.h"
#include "trk_peer.h"
#include "digest.h"

typedef struct {
  ws_hash_t digest;
  trk_peer_id_t peer;
  uint64_t until_ms;
  bool reads; /* told to read the manifest from S3 */
} trk_joining_t;

typedef struct {
  trk_joining_t at[TRK_JOINING_MAX];
  uint32_t n;
  uint32_t next; /* where the next trk_joining_name scan begins */
} trk_joining_set_t;

/* Forgets expired entries and, when peer is not 0, peer's entry for d. */
void trk_joining_prune(trk_joining_set_t *js, const ws_hash_t *d,
                       trk_peer_id_t peer, uint64_t now_ms);
/* Notes peer as joining d until TRK_JOINING_MS from now; reads: it was
 * told to read the manifest. */
void trk_joining_note(trk_joining_set_t *js, const ws_hash_t *d,
                      trk_peer_id_t peer, uint64_t now_ms, bool reads);
/* Peers joining d now. */
uint32_t trk_joining_count(const trk_joining_set_t *js, const ws_hash_t *d,
                           uint64_t now_ms);

/* What p, joining d and named no member, is told. */
typedef enum {
  TRK_JOINING_READ_NEW, /* to read the manifest: nobody else does (counted) */
  TRK_JOINING_READ,     /* to read it, as it was told before */
  TRK_JOINING_NAMED,    /* out[0..*nout) to get it from: the reader first */
  TRK_JOINING_ALONE     /* nothing: it serves nobody (port 0), reads itself */
} trk_joining_answer_t;

/* With only_reader (stripe trees: a tree parent needs the slots) the reader
 * alone is named; else other joiners of d after it, up to max in all, from
 * where the last answer stopped, so that each is named about as often as
 * the others (the first joiners named to everybody refused most dials,
 * every slot taken). */
trk_joining_answer_t trk_joining_name(trk_joining_set_t *js,
                                      const trk_peers_t *peers,
                                      const ws_hash_t *d, const trk_peer_t *p,
                                      uint32_t max, bool only_reader,
                                      uint64_t now_ms, const trk_peer_t **out,
                                      uint32_t *nout);

#endif /* TRK_JOINING_H */
