/* release-int.h - what the release layer's files share: release.c (the
 * table and the state machine: resolve, begin, fetch, finish, fail),
 * prefetch.c (the entry points that start a job), watch.c (the watches
 * settled by state changes) and view.c (counters, accessors, JSON).
 * Loop thread only.
 */
#ifndef PEER_RELEASE_INT_H
#define PEER_RELEASE_INT_H

#include <stdint.h>

#include "release/release.h"

struct peer_releases_s {
  peer_ctx_t *ctx;
  peer_files_t *files;
  peer_swarm_t *swarm;  /* NULL when standalone */
  peer_release_t *head; /* list, newest first */
  unsigned active;      /* releases not READY/FAILED */
};

struct peer_release_s {
  peer_releases_t *t;
  peer_release_t *next; /* the table's list */
  peer_release_state_t state;
  unsigned refs;    /* list + jobs + S3 request + swarm ask + callers */
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
  uint64_t bytes_shared; /* of files another release fetched (counts once) */
  int pinned;
  ws_cache_hold_t holds[WS_CACHE_HOLDS_MAX]; /* copy of the ledger's (hold.c) */
  uint32_t nholds;
  int err;
  char errmsg[512];
  uint64_t started_unix_ms;
  uint64_t finished_unix_ms;
  uint64_t wanted_unix_ms; /* last tracker want while READY (prefetch.c) */
  uint64_t t0_ns;          /* uv_hrtime at start */
  uint64_t t1_ns;          /* uv_hrtime at READY/FAILED */
  peer_release_watch_t *watches;
  unsigned nwatches;
  ws_s3_req_t *mreq; /* manifest GET in flight */
  /* Swarm mode: neighbours were asked for the manifest first; mpeer is
   * the node id that sent the bytes being parsed ("" = from S3). */
  int mpeer_tried;
  int mpeer_waiting; /* the swarm will answer the manifest ask */
  char mpeer[129];
  char mpeer_host[64]; /* its address (bans are bound to it) */
};

static inline int peer_rel_terminal(peer_release_state_t s) {
  return s == PEER_REL_READY || s == PEER_REL_FAILED;
}

/* The name logs use: the digest, or the URI while a legacy URI resolves. */
static inline const char *peer_rel_name(const peer_release_t *rel) {
  return rel->digest_known ? rel->digest_str : rel->uri;
}

/* ---- table and state machine (release.c) -------------------------------- */

/* A new release in state, first on t's list (the list's reference).
 * Returns NULL on -ENOMEM. */
peer_release_t *peer_rel_new(peer_releases_t *t, peer_release_state_t state);
void peer_rel_set_digest(peer_release_t *rel, const ws_hash_t *digest);
/* Asserts the transition is legal and keeps t->active. */
void peer_rel_set_state(peer_release_t *rel, peer_release_state_t to);
/* FAILED -> RESOLVING: clears the error and restarts the clocks. */
void peer_rel_restart(peer_release_t *rel);
/* Starts RESOLVING: manifest from a neighbour (swarm, digest known, not
 * tried yet), else GET from S3, else fails. */
void peer_rel_resolve_start(peer_release_t *rel);
/* -> FAILED with err and msg (borrowed; NULL or "": strerror), settles the
 * watches. No-op when already READY/FAILED. May remove rel. */
void peer_rel_fail(peer_release_t *rel, int err, const char *msg);
void peer_rel_ref(peer_release_t *rel);

/* ---- watches (watch.c) -------------------------------------------------- */

/* Settles every watch the current state settles (after a state change). */
void peer_rel_watches_settle(peer_release_t *rel);
/* Moves rel's watches to other and settles what other's state settles (a
 * legacy URI resolved to a digest that other already has). */
void peer_rel_watches_move(peer_release_t *rel, peer_release_t *other);
/* Table stopping: settles every watch with WS_ECANCELED. */
void peer_rel_watches_cancel(peer_release_t *rel);

/* ---- holds (hold.c) ----------------------------------------------------- */

/* Adds "holds": [{"name", "expires_in_s"}] (live ones) to o. */
void peer_rel_holds_json(const peer_release_t *rel, struct cJSON *o);

/* ---- Hugging Face hub cache view (hf_view.c) --------------------------- */

#define PEER_HF_TAG_MAX 96 /* bytes of a ref name in the view */

/* With --hf-cache, queues the update of the view for the READY release rel
 * on a worker: its blobs, snapshots/<rev> and refs/<tag> (tag NULL: "main").
 * Failures are logged (a model name that is no repository id, say); the
 * release is not affected. Loop thread. */
void peer_rel_hf_view(peer_release_t *rel, const char *tag);
/* "ORG/NAME" (or "NAME") -> "models--ORG--NAME" into out: 0, or WS_EUSAGE
 * when model breaks the hub's repository-id rules or out is too short. */
int peer_hf_repo_folder(const char *model, char *out, size_t len);
/* 1 when tag may name a file under refs/. */
int peer_hf_tag_ok(const char *tag);

/* ---- Hugging Face view: removing what the cache lost (hf_prune.c) ------ */

#define PEER_HF_REV_LEN 40 /* hex digits of the digest naming a snapshot */

/* Serialise view updates and prune passes (any worker). */
void peer_hf_lock(void);
void peer_hf_unlock(void);
/* [worker, lock held] One pass over the view dir: snapshots of releases no
 * longer published under root (a realpath) go, with the refs naming them,
 * the blob links no snapshot uses and folders left empty. 0 or -errno. */
int peer_hf_prune_locked(const char *root, const char *view);

/* ---- counters (view.c) -------------------------------------------------- */

typedef struct {
  uint64_t bytes_done, chunks_done, from_s3, from_peers;
  uint64_t shared; /* fetched by another release sharing the files */
} peer_rel_progress_t;

/* Live counters (summed over the files) or the final ones once terminal. */
void peer_rel_progress(const peer_release_t *rel, peer_rel_progress_t *p);

#endif
