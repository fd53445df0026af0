/* trk_wanted.h - the cluster-wide wanted set (the autoscaler hook).
 *
 * POST /api/v1/prefetch adds a release here; every announce reply lists the
 * wanted releases the asking peer has not joined yet, so every connected
 * peer and every peer that connects later fetches them. An entry is a
 * digest ("sha256-<hex>"), a release URI ("s3://bucket/.../sha256-<hex>/"),
 * or both; a URI that names a digest segment yields the digest.
 *
 * An entry leaves (docs/operations.md "Wanted set"): by DELETE; when
 * superseded (a newer
 * entry for the same model, the same URI up to the digest segment, with
 * the same selector); after the TTL (--wanted-ttl, default 24 h, counted
 * from when it was added, or restored from --state); and when the set is
 * full (TRK_MAX_WANTED), the oldest makes room for a new one.
 *
 * Restart: like the rest of the tracker this is soft state. Releases peers
 * hold or fetch come back by themselves (peers re-announce them, with their
 * URIs, within one announce interval). A prefetch POSTed before a restart
 * would be lost, so p2p-tracker --state FILE persists exactly this set
 * (trk_wanted_to_json / trk_wanted_load_json, written with uv_fs off the
 * loop's critical path after every change and read at start). Without
 * --state, the autoscaler re-POSTs (the call is idempotent).
 *
 * Pure logic, loop thread only.
 */
#ifndef TRK_WANTED_H
#define TRK_WANTED_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "trk_config.h"
#include "ws_err.h"
#include "ws_labels.h"

/* Which nodes a wanted release is for (POST /api/v1/prefetch "selector",
 * docs/tracker.md). A node matches when it has every label and, when zones
 * are given, is in one of them. Of the matching nodes at most count (0: no
 * cap) and at most percent % (0: no cap; rounded up) are chosen: the
 * highest rendezvous scores of (node id, digest) when the selector is set,
 * later joiners while the cap allows; a chosen node stays chosen. */
#define TRK_SEL_ZONES_MAX 16u
typedef struct {
  char labels[WS_LABELS_MAX + 1]; /* required labels, canonical; "" none */
  uint32_t nzones;
  char zones[TRK_SEL_ZONES_MAX][TRK_ZONE_MAX + 1];
  uint32_t count;   /* 0: no cap */
  uint32_t percent; /* 0: no cap, else 1..100 */
} trk_selector_t;

typedef struct {
  int has_digest;
  ws_hash_t digest;
  char digest_str[WS_DIGEST_STR_LEN + 1]; /* "" when !has_digest */
  char uri[TRK_URI_MAX + 1];              /* "" when unknown */
  uint64_t added_ms;
  int has_sel; /* 0: every node */
  trk_selector_t sel;
  /* Nodes chosen under a count/percent cap (node ids, malloc'd). */
  char (*chosen)[TRK_NODE_ID_MAX + 1];
  uint32_t nchosen, chosen_cap;
} trk_wanted_entry_t;

typedef struct trk_wanted_s trk_wanted_t;

/* Returns a new empty set, or NULL on allocation failure. */
trk_wanted_t *trk_wanted_new(void);
void trk_wanted_free(trk_wanted_t *w); /* accepts NULL */

/* Adds a release by digest, URI, or both (either may be NULL, not both).
 * A URI's digest segment supplies a missing digest; a given digest that
 * differs from the URI's is WS_EDIGEST. An existing entry (same digest, or
 * same URI when there is no digest) is updated (a URI is filled in) and 1
 * is returned; a new entry returns 0 (when TRK_MAX_WANTED entries exist,
 * the oldest is removed first). WS_EUSAGE for a bad URI. */
int trk_wanted_add(trk_wanted_t *w, const ws_hash_t *digest, const char *uri,
                   uint64_t now_ms) WS_MUST_USE;
/* Sets the selector of the entry with this digest (sel NULL: every node).
 * A different selector forgets the chosen nodes. 1 changed, 0 same,
 * WS_ENOTFOUND. */
int trk_wanted_set_selector(trk_wanted_t *w, const ws_hash_t *digest,
                            const trk_selector_t *sel) WS_MUST_USE;
/* Records node_id as chosen for the entry with this digest: 0 (also when
 * it already was), WS_ENOTFOUND, WS_ELIMIT (TRK_MAX_PEERS chosen), -ENOMEM. */
int trk_wanted_choose(trk_wanted_t *w, const ws_hash_t *digest,
                      const char *node_id) WS_MUST_USE;
/* 1 when node_id is among e's chosen nodes. */
int trk_wanted_is_chosen(const trk_wanted_entry_t *e, const char *node_id);
/* Removes the entry whose digest string or URI equals key; WS_ENOTFOUND. */
int trk_wanted_remove(trk_wanted_t *w, const char *key) WS_MUST_USE;
uint32_t trk_wanted_count(const trk_wanted_t *w);
/* Entries older than ttl_ms (0: TRK_WANTED_TTL_MS) leave at the next
 * trk_wanted_expire. */
void trk_wanted_set_ttl(trk_wanted_t *w, uint64_t ttl_ms);
/* Removes entries added ttl_ms or longer before now_ms; returns how many. */
uint32_t trk_wanted_expire(trk_wanted_t *w, uint64_t now_ms);
/* Removes every entry that a later one supersedes (same model, same
 * selector; see above); returns how many. */
uint32_t trk_wanted_supersede(trk_wanted_t *w);
typedef struct {
  uint64_t evicted, expired, superseded;
} trk_wanted_removals_t;
/* Entries removed by each rule since start. */
void trk_wanted_removals(const trk_wanted_t *w, trk_wanted_removals_t *out);
/* Entry i (0 <= i < count), borrowed until the next change. */
const trk_wanted_entry_t *trk_wanted_at(const trk_wanted_t *w, uint32_t i);
/* Entry with this digest, or NULL. */
const trk_wanted_entry_t *trk_wanted_find(const trk_wanted_t *w,
                                          const ws_hash_t *digest);
/* Incremented by every change; the server persists when it moves. */
uint64_t trk_wanted_version(const trk_wanted_t *w);

/* Validates a release URI: "s3://" then at most TRK_URI_MAX printable,
 * non-space, non-quote bytes. 0 or WS_EUSAGE. */
int trk_wanted_uri_valid(const char *uri);
/* The digest named by a "sha256-<64 hex>" path segment of uri (the last
 * one): 0, WS_ENOTFOUND if none, WS_EUSAGE for an invalid URI. */
int trk_wanted_uri_digest(const char *uri, ws_hash_t *out) WS_MUST_USE;

/* State file form: {"version":1,"wanted":[{"digest":..,"uri":..,
 * "selector":{..},"chosen":[node ids]},..]} (selector as in the API).
 * Returns a new malloc'd NUL-terminated string (caller frees), or NULL. */
char *trk_wanted_to_json(const trk_wanted_t *w);
/* Adds every entry of a state file (len bytes, at most 1 MiB); entries that
 * fail validation are skipped and counted in *skipped (may be NULL).
 * WS_EJSON if the document itself is malformed. */
int trk_wanted_load_json(trk_wanted_t *w, const char *buf, size_t len,
                         uint64_t now_ms, uint32_t *skipped) WS_MUST_USE;

#endif
