/* file.h - the files being assembled in the cache, shared by every release
 * that lists them (keyed by the file's sha256, so releases sharing a file
 * fetch it once), the one chunk scheduler that decides which chunk is
 * fetched next, and the fetch layer's events.
 *
 * File states:
 *
 *   OPENING --open ok--> FETCHING --all chunks done--> FINISHING
 *   OPENING --blob exists--> COMPLETE
 *   FINISHING --whole sha256 ok--> COMPLETE --> CLOSING
 *   FINISHING --WS_EDIGEST, retries left--> FETCHING (every chunk again)
 *   OPENING/FETCHING/FINISHING --error or nobody waits for it--> FAILED
 *   FAILED --> CLOSING
 *
 * CLOSING: out of the table, handle closed on a worker, freed when the
 * last reference (transfer or job) is gone.
 *
 * Chunk states: MISSING -> INFLIGHT -> DONE, INFLIGHT -> MISSING on failure
 * or cancel. The origin takes chunks with peer_sched_next(), the swarm's
 * picker with peer_file_chunk_take(); both report with
 * peer_file_chunk_done(), the one completion path. In swarm mode an
 * INFLIGHT chunk taken by the picker may have several peer requests out
 * (endgame): nreq counts them and rx_busy marks the one whose bytes are
 * being written.
 *
 * Nothing here calls up into the layers above: what happens to chunks and
 * files is told to the registered listeners (peer_fetch_listener_t), and
 * whoever waits for a file gives a callback (peer_file_attach).
 *
 * Owns: the table, every peer_file_t in it, and the open/finish/close jobs.
 * Borrows the context (store, worker queue, counters).
 * Thread: loop thread; the open/finish/close bodies run on workers.
 */
#ifndef PEER_FETCH_FILE_H
#define PEER_FETCH_FILE_H

#include <stdint.h>

#include "core/ctx.h"
#include "manifest.h"
#include "store.h"
#include "ws_err.h"

typedef struct peer_file_s peer_file_t;
typedef struct peer_files_s peer_files_t;

typedef enum {
  PEER_FILE_OPENING,
  PEER_FILE_FETCHING,
  PEER_FILE_FINISHING,
  PEER_FILE_COMPLETE,
  PEER_FILE_FAILED,
  PEER_FILE_CLOSING,
  PEER_FILE_STATE_LAST
} peer_file_state_t;

typedef enum {
  PEER_CHUNK_MISSING,
  PEER_CHUNK_INFLIGHT,
  PEER_CHUNK_DONE,
  PEER_CHUNK_STATE_LAST
} peer_chunk_state_t;

/* Where a chunk comes from. The scheduler hands a source only chunks it may
 * fetch: in swarm mode the origin gets only chunks the origin gate (the
 * swarm's leases) hands out. */
typedef enum { PEER_SRC_ORIGIN, PEER_SRC_PEER, PEER_SRC_LAST } peer_source_t;

/* Scheduler tiers, in order: single-chunk (small) files, then the first
 * chunk of every file (the safetensors header), then the rest. */
enum { PEER_TIER_SMALL, PEER_TIER_FIRST, PEER_TIER_REST, PEER_TIER_LAST };

/* A release (or anyone) waiting for a file: called once when the file
 * completes (err 0) or fails (err < 0, msg says why). */
typedef void (*peer_file_done_fn)(void *arg, peer_file_t *file, int err,
                                  const char *msg);

typedef struct {
  peer_file_done_fn done;
  void *arg;
} peer_file_waiter_t;

struct peer_file_s {
  peer_files_t *t; /* the table it belongs to */
  peer_ctx_t *ctx;
  peer_file_state_t state;
  unsigned refs; /* table + transfers + worker jobs */
  ws_mfile_t mf; /* own deep copy: name, sizes, chunk hashes */
  uint32_t chunk_size;
  char *bucket; /* S3 object of the first release that listed it; NULL:
                   none (neighbours only) */
  char *key;
  char *etag;           /* learned from the first response; If-Match after */
  ws_store_file_t *pf;  /* partial handle, NULL until opened / after close */
  uint8_t *chunk_state; /* nchunks peer_chunk_state_t */
  uint8_t *chunk_tries; /* hash failures per chunk */
  uint32_t chunks_done;
  uint32_t chunks_inflight;
  uint64_t bytes_done;
  uint64_t bytes_from_s3;
  uint64_t bytes_from_peers;
  /* Bytes the cache held whole when the file opened (a blob an earlier
   * release fetched and verified): no source delivered them. */
  uint64_t bytes_cached;
  /* Digest of the release that created the file (the first to list it):
   * the bytes above count for that release only; every other release that
   * shares the file reports them as shared (peer_file_counts_for). */
  ws_hash_t owner;
  unsigned digest_retries;
  /* Another release shares this file (same sha256) with a different chunk
   * list: its chunks alone do not vouch for the blob, hash it whole. */
  int need_whole;
  int err; /* when FAILED */
  char errmsg[256];
  peer_file_waiter_t *waiters; /* who needs it (one entry per arg) */
  uint32_t nwaiters, capwaiters;
  int intable;        /* findable by sha256 (not FAILED/CLOSING) */
  peer_file_t *hnext; /* hash chain */
  /* The scheduler's queues (sched.c). */
  peer_file_t *qnext[PEER_TIER_LAST], *qprev[PEER_TIER_LAST];
  uint8_t inq[PEER_TIER_LAST];
  uint32_t cursor;  /* PEER_TIER_REST: no MISSING chunk before it */
  uint8_t *nreq;    /* swarm: peer requests out per chunk */
  uint8_t *rx_busy; /* swarm: a peer's bytes are being written */
};

/* ---- the table ---------------------------------------------------------- */

/* Creates the table and scheduler on ctx (borrowed; must outlive it). */
int peer_files_new(peer_ctx_t *ctx, peer_files_t **out) WS_MUST_USE;
/* Frees the table; every file must be gone. NULL is fine. */
void peer_files_free(peer_files_t *t);
/* Files in the table (not FAILED or CLOSING). */
uint32_t peer_files_count(const peer_files_t *t);
/* Closes every file (shutdown, once transfers and jobs are drained):
 * handles closed on workers. */
void peer_files_close_all(peer_files_t *t);

/* ---- events ------------------------------------------------------------- */

/* Events of the fetch layer, fanned out to every registered listener in
 * the order they registered. Any callback may be NULL. The listener struct
 * is owned by the registrant and stays registered until
 * peer_files_unlisten. */
typedef struct peer_fetch_listener_s {
  struct peer_fetch_listener_s *next; /* the table's list */
  void *arg;
  /* Chunks changed (a file can be fetched, a chunk is MISSING again):
   * sources may start work. */
  void (*kick)(void *arg);
  /* Chunk j of f was verified and committed (from src). */
  void (*chunk_done)(void *arg, peer_file_t *f, uint32_t j, peer_source_t src);
  /* The origin began fetching chunk j of f. */
  void (*chunk_live)(void *arg, peer_file_t *f, uint32_t j);
  /* More of chunk j of f is written, or its origin fetch ended (verified
   * or failed). */
  void (*chunk_progress)(void *arg, peer_file_t *f, uint32_t j);
  /* f is a verified blob (told before its waiters). */
  void (*file_complete)(void *arg, peer_file_t *f);
  /* f failed or nobody needs it any more: stop working on it (told before
   * its waiters). */
  void (*file_failed)(void *arg, peer_file_t *f);
} peer_fetch_listener_t;

/* Adds l at the end of the listener list. */
void peer_files_listen(peer_files_t *t, peer_fetch_listener_t *l);
/* Removes l (no-op if it is not registered). */
void peer_files_unlisten(peer_files_t *t, peer_fetch_listener_t *l);

/* Swarm mode: the origin fetches only what this gate hands out (leases).
 * Same contract as peer_sched_next (the gate takes the chunk with
 * peer_file_chunk_take). With a gate set, peer_sched_next hands nothing to
 * other sources. NULL fn: standalone (the origin may fetch any chunk). */
typedef int (*peer_origin_gate_fn)(void *arg, peer_file_t **file, uint32_t *j);
void peer_files_set_origin_gate(peer_files_t *t, peer_origin_gate_fn fn,
                                void *arg);

/* ---- files -------------------------------------------------------------- */

/* The live file with this sha256, or NULL. Borrowed. */
peer_file_t *peer_file_find(peer_files_t *t, const ws_hash_t *sha256);
/* Creates file (deep-copying f of m) in OPENING, inserts it in the table
 * and queues its open on a worker. bucket/key: where S3 has it (copied),
 * both NULL for a file only neighbours can give (swarm, digest-only).
 * *out is borrowed (the table owns it). */
int peer_file_create(peer_files_t *t, const ws_manifest_t *m,
                     const ws_mfile_t *f, const char *bucket, const char *key,
                     peer_file_t **out) WS_MUST_USE;
/* 1 if file was set up from the same chunk list as mf in m (size, chunk
 * size and chunk hashes). */
int peer_file_same_chunks(const peer_file_t *file, const ws_manifest_t *m,
                          const ws_mfile_t *mf);
/* arg waits for file: done(arg, file, err, msg) runs once when the file
 * completes (err 0) or fails. Returns 1 when added, 0 when arg already
 * waits or the file is already COMPLETE, -ENOMEM. */
int peer_file_attach(peer_file_t *file, peer_file_done_fn done,
                     void *arg) WS_MUST_USE;
/* arg no longer waits (done will not run for it). A file nobody waits for
 * stops fetching. */
void peer_file_detach(peer_file_t *file, void *arg);

void peer_file_ref(peer_file_t *file);
/* Drops a reference; frees a CLOSING file whose last one it was. */
void peer_file_unref(peer_file_t *file);

/* Fails the file and tells the listeners and every waiter (once). */
void peer_file_fail(peer_file_t *file, int err, const char *msg);

const char *peer_file_state_name(peer_file_state_t s);

/* ---- chunks ------------------------------------------------------------- */

/* 1 when the S3 and neighbour bytes of file count for the release with
 * this digest (the one that created it); a release sharing the file with
 * it reports them as shared, so that fetched bytes are counted once. */
int peer_file_counts_for(const peer_file_t *file, const ws_hash_t *digest);

/* Byte length of chunk j. */
uint32_t peer_file_chunk_len(const peer_file_t *file, uint32_t j);
/* Chunks of a FETCHING file neither done nor in flight (0 otherwise): 0
 * while it fetches is its endgame, only chunks in flight left. */
uint32_t peer_file_chunks_missing(const peer_file_t *file);

/* Picks the next chunk src may fetch, marks it INFLIGHT and returns 1 with
 * *file (a new reference; unref after peer_file_chunk_done) and *j; 0 when
 * nothing is to be fetched now. Standalone: small files first, then the
 * first chunk of every file, then the rest in order; with an origin gate,
 * the gate decides for the origin and other sources get nothing. */
int peer_sched_next(peer_files_t *t, peer_source_t src, peer_file_t **file,
                    uint32_t *j);
/* Marks MISSING chunk j of a FETCHING file INFLIGHT for the swarm's
 * picker and takes a reference (dropped with peer_file_unref after
 * peer_file_chunk_done). */
void peer_file_chunk_take(peer_file_t *file, uint32_t j);
/* Tells every listener's kick: chunks changed. */
void peer_files_kick(peer_files_t *t);
/* The one completion path for an INFLIGHT chunk. status 0: verified and
 * committed, DONE (listeners' chunk_done). WS_EDIGEST: the hash failed,
 * MISSING again (the file fails after PEER_CHUNK_RETRIES_MAX).
 * WS_ECANCELED: MISSING again, nothing counted. Other errors fail the
 * file with errmsg. */
void peer_file_chunk_done(peer_file_t *file, uint32_t j, peer_source_t src,
                          int status, const char *errmsg);
/* Chunk j began arriving, from the origin or a neighbour (listeners'
 * chunk_live). */
void peer_file_chunk_live(peer_file_t *file, uint32_t j);
/* More of chunk j is written, or its fetch ended (listeners'
 * chunk_progress). */
void peer_file_chunk_progress(peer_file_t *file, uint32_t j);

#endif
