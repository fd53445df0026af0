/* release.h - a release job: resolve the manifest, reserve space, fetch
 * every file, publish.
 *
 *   RESOLVING  GET <prefix>/manifest.json, hash and parse it on a worker,
 *              check the digest (URI's or the expected one)
 *   BEGINNING  ws_store_release_begin on a worker (space reserved, ENOSPC
 *              reported here), job record written for restarts
 *   FETCHING   files attached (shared by sha256) and fetched chunk by chunk
 *   FINISHING  ws_store_release_publish on a worker
 *   READY      releases/sha256-<digest>/ is there (terminal)
 *   FAILED     error kept (terminal; a new prefetch retries: -> RESOLVING)
 *
 * Prefetch requests are answered once the release leaves BEGINNING (200)
 * or fails (error status); wait requests once it is READY (200) or FAILED
 * (409), or at their timeout (504).
 *
 * Thread: loop thread; the bodies of the worker jobs are marked.
 */
#ifndef PEER_RELEASE_H
#define PEER_RELEASE_H

#include <stdint.h>

#include "daemon.h"
#include "manifest.h"

struct cJSON;

typedef enum {
  PEER_REL_RESOLVING,
  PEER_REL_BEGINNING,
  PEER_REL_FETCHING,
  PEER_REL_FINISHING,
  PEER_REL_READY,
  PEER_REL_FAILED,
  PEER_REL_STATE_LAST
} peer_release_state_t;

typedef struct peer_waiter_s peer_waiter_t;

struct peer_release_s {
  peer_daemon_t *d;
  peer_release_t *next; /* daemon's list */
  peer_release_state_t state;
  unsigned refs;    /* list + jobs + S3 request */
  int removed;      /* out of the list (evicted/merged); freed at refs 0 */
  int digest_known; /* 0 while a legacy URI resolves */
  ws_hash_t digest;
  char digest_str[WS_DIGEST_STR_LEN + 1];
  int expect_known; /* caller's expected digest */
  ws_hash_t expect;
  char *uri; /* NULL for releases found in the cache */
  char *bucket;
  char *prefix; /* key prefix of the release's objects, ends in '/' */
  char *model;
  char *version;
  char *mbytes; /* manifest bytes (until READY) */
  size_t mlen;
  ws_manifest_t *m;       /* parsed manifest (until READY/FAILED) */
  peer_file_t **files;    /* m->nfiles entries (shared objects, refs held) */
  uint32_t files_pending; /* distinct files not yet complete */
  uint32_t nfiles;
  uint64_t bytes_total;
  uint64_t chunks_total;
  /* Final counters once READY/FAILED (files are released then). */
  uint64_t bytes_done;
  uint64_t chunks_done;
  uint64_t bytes_from_s3;
  uint64_t bytes_from_peers;
  int pinned;
  int err;
  char errmsg[512];
  uint64_t started_unix_ms;
  uint64_t finished_unix_ms;
  uint64_t t0_ns; /* uv_hrtime at start */
  uint64_t t1_ns; /* uv_hrtime at READY/FAILED */
  peer_waiter_t *waiters;
  unsigned nwaiters;
  ws_s3_req_t *mreq; /* manifest GET in flight */
  /* Swarm mode: neighbours were asked for the manifest first; mpeer is
   * the node id that sent the bytes being parsed ("" = from S3). */
  int mpeer_tried;
  int mpeer_waiting; /* the swarm will call peer_release_manifest_peer */
  char mpeer[129];
};

/* POST /api/v1/prefetch: uri may be NULL (then expect must be given and
 * the release known), expect may be NULL. Creates or joins the job and
 * answers req (takes it) when the release is resolved or failed. */
void peer_release_prefetch(peer_daemon_t *d, const char *uri,
                           const ws_hash_t *expect, ws_httpd_req_t *req);
/* Swarm mode: fetch the release known only by its digest (the tracker's
 * wanted set without a URI, or POST prefetch {"digest"} for a release the
 * daemon does not know): the manifest comes from neighbours. */
void peer_release_prefetch_digest(peer_daemon_t *d, const ws_hash_t *digest);
/* The swarm's answer to peer_swarm_manifest_fetch: the manifest bytes
 * (taken; NUL-terminated) from node_id, or bytes NULL when no neighbour
 * could give them (then S3 if the release has a URI, else it fails). */
void peer_release_manifest_peer(peer_release_t *rel, char *bytes, size_t len,
                                const char *node_id);
/* Restarts a job from its record after a restart (no request). */
void peer_release_resume(peer_daemon_t *d, const char *uri,
                         const ws_hash_t *digest);
/* Adds a release found published in the cache at startup (READY). m is
 * borrowed (counts copied). */
int peer_release_add_ready(peer_daemon_t *d, const ws_manifest_t *m, int pinned,
                           uint64_t published_unix_ms) WS_MUST_USE;

/* The release with this digest, or NULL. Borrowed. */
peer_release_t *peer_release_find(peer_daemon_t *d, const ws_hash_t *digest);
/* R as documented in docs/operations.md. New object. */
struct cJSON *peer_release_json(const peer_release_t *rel);
const char *peer_release_state_name(peer_release_state_t s);
/* GET .../wait: answers now or parks req until READY/FAILED/timeout. */
void peer_release_wait(peer_release_t *rel, ws_httpd_req_t *req,
                       uint64_t timeout_ms);
/* Drops a READY or FAILED release from the table (after eviction). */
void peer_release_remove(peer_release_t *rel);

/* file.c -> release: file completed (err 0) or failed. */
void peer_release_file_done(peer_release_t *rel, peer_file_t *file, int err,
                            const char *msg);
/* Daemon STOPPING: answer parked requests 503, cancel manifest GETs. */
void peer_releases_stop(peer_daemon_t *d);
/* Daemon teardown: frees every release. */
void peer_releases_free(peer_daemon_t *d);

#endif
