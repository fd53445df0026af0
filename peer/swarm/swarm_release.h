/* swarm_release.h - the swarm release record: what the swarm keeps for
 * each release it fetches or seeds, and the table of them.
 *
 *   RESOLVING --manifest parsed--> FETCHING --published--> READY
 *   RESOLVING/FETCHING --release failed or removed--> (freed)
 *   READY --release evicted--> (freed)
 *
 * RESOLVING: the release knows only its digest; neighbours that announced
 * it are asked for the manifest, and the answer goes to the asker's
 * callback once. FETCHING: the manifest and the files belong to the release
 * (borrowed); chunks come from neighbours (picker.c) and, for leased
 * chunks, from S3 through the origin gate (picker.c). READY: the record owns
 * the manifest and serves the blobs.
 *
 * A record keeps our verified have-bitfield (global chunk indexes), the
 * origin leases the tracker granted, and sends what the release's progress
 * means to neighbours and tracker (BITFIELD, HAVE, HAVE "p").
 *
 * Chunk numbering on the wire is per release: global chunk g of a release
 * is chunk g - first_chunk of the manifest file holding it. Files are
 * shared between releases by sha256, so one verified chunk may be HAVE in
 * several releases.
 *
 * Files: swarm_release.c (records, BITFIELD/HAVE, leases, upload sources)
 * and swarm_manifest.c (the manifest asked from neighbours), which calls
 * only swarm_release.c.
 *
 * Owns: the records, their bitfields, READY records' manifests.
 * Borrows: a FETCHING record's manifest and files array, the neighbours
 * (to send), the origin (what is being fetched now), the trackers.
 * Thread: loop thread; the seed manifest read-back runs on a worker.
 */
#ifndef PEER_SWARM_RELEASE_H
#define PEER_SWARM_RELEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ctx.h"
#include "core/tunables.h"
#include "fetch/file.h"
#include "fetch/origin.h"
#include "manifest.h"
#include "swarm/neighbor.h"
#include "swarm/swarm.h"
#include "swarm/trackers.h"

typedef struct peer_swarm_rel_s peer_swarm_rel_t;
typedef struct peer_swarm_rels_s peer_swarm_rels_t;

typedef enum {
  PEER_SWARM_REL_RESOLVING,
  PEER_SWARM_REL_FETCHING,
  PEER_SWARM_REL_READY,
  PEER_SWARM_REL_STATE_LAST
} peer_swarm_rel_state_t;

typedef struct {
  uint32_t chunk;      /* global index */
  uint64_t expires_ms; /* loop time */
} peer_lease_t;

struct peer_swarm_rel_s {
  peer_swarm_rels_t *t;
  peer_swarm_rel_t *next;
  peer_swarm_rel_state_t state;
  ws_hash_t digest;
  bool has_uri; /* the release can read its manifest from S3 */
  /* FETCHING: the release's (borrowed); READY: owned. */
  ws_manifest_t *m;
  char *mbytes;
  size_t mlen;
  peer_file_t *const *files; /* FETCHING: the release's, m->nfiles */
  uint32_t nfiles;
  uint32_t total;             /* chunks; 0 while RESOLVING */
  uint64_t rep_s3, rep_peers; /* READY: bytes from S3 / neighbours */
  ws_bitfield_t have;         /* verified chunks we can serve (global index) */
  peer_lease_t leases[PEER_LEASES_MAX];
  uint32_t nleases;
  uint32_t streams;           /* leases to fetch at once (tracker's); 0: all */
  uint64_t fetching_ms;       /* FETCHING since (loop time; picker.h grace) */
  uint64_t mwait_since_ms;    /* RESOLVING: waiting for a holder since */
  peer_neighbor_t *masked;    /* RESOLVING: neighbour asked (weak) */
  uint64_t mask_ms;           /* RESOLVING: when masked was asked */
  bool mdone;                 /* RESOLVING: the asker has its answer */
  peer_swarm_manifest_fn mcb; /* RESOLVING: the asker */
  void *marg;
  char *uri; /* FETCHING: where the release reads from S3 (owned), or NULL */
  /* Liveness (swarm_stall.c), FETCHING only; loop times. */
  uint64_t prog_ms;    /* last byte progress (or the start) */
  uint64_t prog_bytes; /* bytes counted then (verified + arriving) */
  uint64_t prog_peer;  /* of which verified from neighbours */
  uint64_t stalled_ms; /* stalled since; 0: not stalled */
  bool stall_s3;       /* stalled for 2 x the stall time: S3 itself */
  bool stall_seen;     /* stalled once: keep naming unreachable chunks */
  uint32_t stuck[PEER_STALL_REPORT_MAX]; /* named to the tracker */
  /* Stripe trees (the tracker's "tree", docs/tracker.md): our parent's
   * node id in each stripe ("" where we are its root), since tree_ms (loop
   * time); ntree 0: none. picker.c asks a stripe's chunks of its parent. */
  uint32_t ntree;
  uint64_t tree_ms;
  char tree[WS_MAX_TREE][WS_NODE_ID_MAX + 1];
  /* Per stripe, when its parent last offered one of its chunks that we
   * lacked (HAVE, "p" too) or the parent was named: a parent silent for
   * PEER_TREE_GRACE_MS no longer holds its stripe (picker.c). */
  uint64_t tree_fed_ms[WS_MAX_TREE];
  uint32_t first[PEER_FIRST_REPORT_MAX]; /* to read first (swarm_rels_report) */
};

struct peer_swarm_rels_s {
  peer_ctx_t *ctx;
  peer_neighbors_t *nbrs; /* borrowed: to send */
  peer_origin_t *origin;  /* borrowed: chunks being fetched from S3 */
  peer_trackers_t *tl;    /* borrowed; NULL without --tracker */
  peer_swarm_rel_t *head;
  uint32_t count;
  bool stopping;
  /* While swarm_rels_chunk_done reports a chunk from a neighbour: its
   * node id (the tracker HAVE's "f"); NULL otherwise. */
  const char *from;
  /* A neighbour asked for a manifest refused or went: a wait may end
   * sooner than the swarm's timer was set for (swarm.c re-arms it). */
  void (*mwait_changed)(void *arg);
  void *mwait_arg;
};

/* The only way a record changes state (the table of legal transitions is
 * in swarm_release.c). */
void swarm_rel_set_state(peer_swarm_rel_t *rel, peer_swarm_rel_state_t to);
/* A new RESOLVING record for digest in t, or NULL (out of memory). */
peer_swarm_rel_t *swarm_rel_new(peer_swarm_rels_t *t, const ws_hash_t *digest);
/* Tracker calls whose failure changes nothing here (no link: the next
 * connection re-announces the full state) are logged at debug level. */
void swarm_rel_tracker_rc(const char *what, int rc);
/* The record for digest, or NULL. */
peer_swarm_rel_t *swarm_rel_find(peer_swarm_rels_t *t, const uint8_t *digest);
/* node_id, a neighbour, offers chunk of rel (a HAVE): if we lack it and
 * node_id is our parent in its stripe, that stripe is fed now. */
void swarm_rel_tree_offer(peer_swarm_rel_t *rel, const char *node_id,
                          uint32_t chunk, uint64_t now_ms);
/* The tracker's stripe trees for rel (NULL: none tracked): tree[0..n). */
void swarm_rel_set_tree(peer_swarm_rel_t *rel,
                        const char (*tree)[WS_NODE_ID_MAX + 1], uint32_t n,
                        uint64_t now_ms);
/* Frees a record: neighbours' requests for it canceled, tracker told. A
 * pending manifest callback is dropped uncalled. */
void swarm_rel_free(peer_swarm_rel_t *rel);
/* File k of a FETCHING record (NULL when not set up) and the chunk in it
 * of global chunk g; NULL when g is not in the manifest. */
peer_file_t *swarm_rel_file_of(const peer_swarm_rel_t *rel, uint32_t g,
                               uint32_t *j);

/* ---- the release's progress (swarm.h: peer_swarm_rel_*) ----------------- */

/* The release is FETCHING: shares it (BITFIELD to neighbours, tracked).
 * Returns 1 when the record is FETCHING now (the caller kicks the
 * pickers), 0 when it was READY already or could not be shared. */
int swarm_rel_fetching(peer_swarm_rels_t *t, const ws_hash_t *digest,
                       const char *uri, const ws_manifest_t *m,
                       const char *mbytes, size_t mlen,
                       peer_file_t *const *files, uint32_t nfiles);
/* READY: takes m and mbytes (freed here when not kept). */
void swarm_rel_ready(peer_swarm_rels_t *t, const ws_hash_t *digest,
                     ws_manifest_t *m, char *mbytes, size_t mlen);
/* Failed or removed: the record of digest (any state) is freed. */
void swarm_rel_gone(peer_swarm_rels_t *t, const ws_hash_t *digest);
/* Fills a's progress report for digest (release bytes, bytes from S3 and
 * from neighbours, a failed file's error): summed over the files while
 * FETCHING, the totals kept at READY after; while stalled, the stuck
 * chunks (swarm_rel_stall_report). No record: a is unchanged. */
void swarm_rels_report(peer_swarm_rels_t *t, const uint8_t *digest,
                       ws_announce_t *a);
/* Published already (startup, seed import): takes m and bytes. */
void swarm_rel_add_ready(peer_swarm_rels_t *t, ws_manifest_t *m, char *bytes,
                         size_t len);
/* READY without FETCHING: the manifest is read back from the cache on a
 * worker, then added as above. No-op when a record exists. */
void swarm_rel_seed_load(peer_swarm_rels_t *t, const ws_hash_t *digest);

/* ---- our BITFIELD and HAVEs --------------------------------------------- */

/* Our BITFIELD for rel (FETCHING/READY) to n unless already sent; after it
 * the HAVE "p" of chunks being fetched from S3 now (n said "live"). */
void swarm_rel_send_bitfield(peer_swarm_rel_t *rel, peer_neighbor_t *n);
/* Our BITFIELD of every shared record to n (n became ready). */
void swarm_rels_announce_to(peer_swarm_rels_t *t, peer_neighbor_t *n);
/* HAVE "p" to n for each chunk of rel we are fetching from origin now,
 * once both BITFIELDs went (n said "live"): the chunks whose fetch began
 * before n was there. */
void swarm_rel_live_haves(peer_swarm_rel_t *rel, peer_neighbor_t *n);
/* Chunk j of file verified: HAVE in every FETCHING record listing file
 * (manifests with chunk hashes only; whole-file ones wait for the file). */
void swarm_rels_chunk_done(peer_swarm_rels_t *t, peer_file_t *file, uint32_t j);
/* The same for a chunk verified from neighbour from (node id). */
void swarm_rels_chunk_done_from(peer_swarm_rels_t *t, peer_file_t *file,
                                uint32_t j, const char *from);
/* The origin began fetching chunk j of file: HAVE "p" to neighbours that
 * take it and lack the chunk. */
void swarm_rels_chunk_live(peer_swarm_rels_t *t, peer_file_t *file, uint32_t j);
/* file is a verified blob: every chunk of it is HAVE. */
void swarm_rels_file_complete(peer_swarm_rels_t *t, peer_file_t *file);

/* ---- manifests from neighbours (swarm_manifest.c) ------------------------ */

/* RESOLVING record for digest, asking neighbours for its manifest (see
 * peer_swarm_manifest_fetch). 0, WS_ECANCELED (stopping), -ENOMEM. */
int swarm_rel_manifest_fetch(peer_swarm_rels_t *t, const ws_hash_t *digest,
                             const char *uri, peer_swarm_manifest_fn cb,
                             void *arg) WS_MUST_USE;
/* RESOLVING: asks a neighbour that announced the digest for the manifest
 * when none is asked; gives up (cb with NULL) after the wait. May free
 * rel (through the callback). */
void swarm_rel_manifest_try(peer_swarm_rel_t *rel, uint64_t now_ms);
/* The tracker knows no holder of rel's digest: a release with a URI stops
 * waiting and reads its manifest from S3 now. May free rel. */
void swarm_rel_manifest_no_holders(peer_swarm_rel_t *rel);
/* Milliseconds from now_ms until rel's wait for a neighbour's manifest
 * runs out (0: out already), or UINT64_MAX when nothing is due (no wait,
 * or a neighbour asked, whose answer or loss comes as an event). */
uint64_t swarm_rel_manifest_due(const peer_swarm_rel_t *rel, uint64_t now_ms);
/* n answered our MANIFEST_REQ with bytes (taken) or not (bytes NULL:
 * refused or connection lost). */
void swarm_rel_manifest_got(peer_swarm_rels_t *t, peer_neighbor_t *n,
                            const ws_hash_t *digest, char *bytes, size_t len);
/* n is gone: records that asked it ask another. */
void swarm_rels_neighbor_gone(peer_swarm_rels_t *t, peer_neighbor_t *n);
/* Stopping: every pending manifest ask is answered (NULL) and no record
 * asks again. */
void swarm_rels_stop(peer_swarm_rels_t *t);

/* ---- leases ------------------------------------------------------------- */

/* Adds or refreshes leases from the tracker. */
void swarm_rel_leases_add(peer_swarm_rel_t *rel, const uint32_t *chunks,
                          uint32_t n, uint32_t ttl_ms);
/* LEASE_RENEW of the leases still to fetch. */
void swarm_rel_leases_renew(peer_swarm_rel_t *rel);

/* ---- liveness (swarm_stall.c) -------------------------------------------- */

/* Checks rel's byte progress at now (the tick): a FETCHING release with
 * chunks missing and no byte from any source for the stall time becomes
 * stalled (log line, counter, re-announced to the tracker with its stuck
 * chunks); any byte ends it. Returns 1 with why written when it has had no
 * byte for the fail time: the caller fails the release. */
int swarm_rel_stall_check(peer_swarm_rel_t *rel, uint64_t now, char *why,
                          size_t len);
/* Whether rel has been stalled for twice the stall time: its origin
 * fetches whatever no neighbour has, as with the tracker down. Stays so
 * until a neighbour delivers a chunk again. */
bool swarm_rel_stall_fallback(const peer_swarm_rel_t *rel, uint64_t now);
/* Milliseconds rel has been stalled at now; 0 when it is not. */
uint64_t swarm_rel_stalled_for(const peer_swarm_rel_t *rel, uint64_t now);
/* Stalled: a's "st" names up to PEER_STALL_REPORT_MAX missing chunks of
 * rel that no lease of ours covers; after the stall, until READY, those of
 * them no neighbour lists (kept in rel->stuck for the send). */
void swarm_rel_stall_report(peer_swarm_rel_t *rel, ws_announce_t *a);

/* ---- what we can upload -------------------------------------------------- */

/* Bytes of a chunk we hold verified, as a fd source: 1 = blob of the file
 * (*sha256 set), 0 = the partial's fd (dup'ed into *fd), or WS_ENOTFOUND.
 * *off and *len: the chunk's place in the file. */
int swarm_rel_chunk_source(peer_swarm_rel_t *rel, uint32_t g, ws_hash_t *sha256,
                           int *fd, uint64_t *off, uint32_t *len) WS_MUST_USE;
/* 1 when chunk j of file is arriving now, from the origin or from a
 * neighbour, with no error so far; *written: its bytes in the partial file
 * (in order from the chunk's start, not verified). */
int swarm_rel_arriving(const peer_swarm_rel_t *rel, const peer_file_t *file,
                       uint32_t j, uint64_t *written);
/* A chunk we do not hold yet but are receiving right now, from the origin
 * or a neighbour (a manifest with chunk hashes): 0 with *file (a new
 * reference), *j, a dup of the partial's fd in *fd and the chunk's place
 * in the file; else WS_ENOTFOUND or an error. fd NULL: only whether
 * (nothing taken). */
int swarm_rel_chunk_live(peer_swarm_rel_t *rel, uint32_t g, peer_file_t **file,
                         uint32_t *j, int *fd, uint64_t *off,
                         uint32_t *len) WS_MUST_USE;

#endif
