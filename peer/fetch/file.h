/* file.h - a file being assembled in the cache, shared by every release
 * that lists it (keyed by the file's sha256, so releases sharing a file
 * fetch it once), and the chunk scheduler that decides which chunk is
 * fetched next and from which source.
 *
 * File states:
 *
 *   OPENING --open ok--> FETCHING --all chunks done--> FINISHING
 *   OPENING --blob exists--> COMPLETE
 *   FINISHING --whole sha256 ok--> COMPLETE --> CLOSING
 *   FINISHING --WS_EDIGEST, retries left--> FETCHING (every chunk again)
 *   OPENING/FETCHING/FINISHING --error or no release wants it--> FAILED
 *   FAILED --> CLOSING
 *
 * CLOSING: out of the table, handle closed on a worker, freed when the
 * last reference (transfer or job) is gone.
 *
 * Chunk states: MISSING -> INFLIGHT -> DONE, INFLIGHT -> MISSING on failure
 * or cancel. The origin takes chunks with peer_sched_next(), the swarm's
 * picker with peer_file_chunk_take(); both report with
 * peer_file_chunk_done(), the one completion path, which also tells the
 * swarm (HAVE to neighbours and tracker). In swarm mode an INFLIGHT chunk
 * taken by the picker may have several peer requests out (endgame): nreq
 * counts them and rx_busy marks the one whose bytes are being written.
 *
 * Thread: loop thread; the open/finish/close bodies run on workers.
 */
#ifndef PEER_FILE_H
#define PEER_FILE_H

#include <stdint.h>

#include "daemon.h"
#include "manifest.h"
#include "store.h"

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
 * fetch: in swarm mode the origin gets only chunks the tracker leased to
 * this node. */
typedef enum { PEER_SRC_ORIGIN, PEER_SRC_PEER, PEER_SRC_LAST } peer_source_t;

/* Scheduler tiers, in order: single-chunk (small) files, then the first
 * chunk of every file (the safetensors header), then the rest. */
enum { PEER_TIER_SMALL, PEER_TIER_FIRST, PEER_TIER_REST, PEER_TIER_LAST };

struct peer_file_s {
  peer_daemon_t *d;
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
  unsigned digest_retries;
  /* Another release shares this file (same sha256) with a different chunk
   * list: its chunks alone do not vouch for the blob, hash it whole. */
  int need_whole;
  int err; /* when FAILED */
  char errmsg[256];
  peer_release_t **waiters; /* releases that need it (no duplicates) */
  uint32_t nwaiters, capwaiters;
  int intable;        /* findable by sha256 (not FAILED/CLOSING) */
  peer_file_t *hnext; /* hash chain */
  peer_file_t *qnext[PEER_TIER_LAST], *qprev[PEER_TIER_LAST];
  uint8_t inq[PEER_TIER_LAST];
  uint32_t cursor;  /* PEER_TIER_REST: no MISSING chunk before it */
  uint8_t *nreq;    /* swarm: peer requests out per chunk */
  uint8_t *rx_busy; /* swarm: a peer's bytes are being written */
};

/* Creates the table and scheduler. */
int peer_files_new(peer_daemon_t *d, peer_files_t **out) WS_MUST_USE;
/* Frees the table; every file must be gone. */
void peer_files_free(peer_files_t *t);
/* Files in the table (not CLOSING). */
uint32_t peer_files_count(const peer_files_t *t);

/* The live file with this sha256, or NULL. Borrowed. */
peer_file_t *peer_file_find(peer_daemon_t *d, const ws_hash_t *sha256);
/* Creates file (deep-copying f of m) in OPENING, inserts it in the table
 * and queues its open on a worker. bucket/key: where S3 has it (copied),
 * both NULL for a file only neighbours can give (swarm, digest-only).
 * *out is borrowed (the table owns it). */
int peer_file_create(peer_daemon_t *d, const ws_manifest_t *m,
                     const ws_mfile_t *f, const char *bucket, const char *key,
                     peer_file_t **out) WS_MUST_USE;
/* Registers rel as needing file. Returns 1 when added (rel then gets
 * peer_release_file_done() once the file completes or fails), 0 when rel
 * was already registered or the file is already COMPLETE, -ENOMEM. */
/* 1 if file was set up from the same chunk list as mf in m (size, chunk
 * size and chunk hashes). */
int peer_file_same_chunks(const peer_file_t *file, const ws_manifest_t *m,
                          const ws_mfile_t *mf);
int peer_file_attach(peer_file_t *file, peer_release_t *rel) WS_MUST_USE;
/* rel no longer needs file. A file nobody needs stops fetching. */
void peer_file_detach(peer_file_t *file, peer_release_t *rel);

void peer_file_ref(peer_file_t *file);
/* Drops a reference; frees a CLOSING file whose last one it was. */
void peer_file_unref(peer_file_t *file);

/* Picks the next chunk src may fetch, marks it INFLIGHT and returns 1 with
 * *file (a new reference; unref after peer_file_chunk_done) and *j; 0 when
 * nothing is to be fetched now. */
int peer_sched_next(peer_daemon_t *d, peer_source_t src, peer_file_t **file,
                    uint32_t *j);
/* Marks MISSING chunk j of a FETCHING file INFLIGHT for the swarm's
 * picker and takes a reference (dropped with peer_file_unref after
 * peer_file_chunk_done). */
void peer_file_chunk_take(peer_file_t *file, uint32_t j);
/* Kicks every source (origin fetcher, swarm picker): chunks changed. */
void peer_files_kick(peer_daemon_t *d);
/* Called once per buffer written into the partial (chunkw.h), with 0 or a
 * negative error; the buffer goes back to its owner. */
struct peer_buf_s; /* bufpool.h */
typedef void (*peer_file_write_cb)(void *arg, struct peer_buf_s *buf,
                                   int status);
/* The one completion path for an INFLIGHT chunk. status 0: verified and
 * committed, DONE. WS_EDIGEST: the hash failed, MISSING again (the file
 * fails after PEER_CHUNK_RETRIES_MAX). WS_ECANCELED: MISSING again,
 * nothing counted. Other errors fail the file. */
void peer_file_chunk_done(peer_file_t *file, uint32_t j, peer_source_t src,
                          int status, const char *errmsg);
/* Byte length of chunk j. */
uint32_t peer_file_chunk_len(const peer_file_t *file, uint32_t j);
/* Fails the file and every release waiting on it (once). */
void peer_file_fail(peer_file_t *file, int err, const char *msg);
/* Closes every file (daemon STOPPING): handles closed on workers. */
void peer_files_close_all(peer_daemon_t *d);

const char *peer_file_state_name(peer_file_state_t s);

#endif
