/* release-int.h - what the release job's files share: release.c (the state
 * machine: list and references, resolve, begin, fetch, finish, fail),
 * release_view.c (counters, JSON, parked requests) and release_prefetch.c
 * (the entry points that start a job). Loop thread only.
 */
#ifndef PEER_RELEASE_INT_H
#define PEER_RELEASE_INT_H

#include <stdint.h>

#include "release/release.h"

/* What a parked request waits for (release.h: prefetch vs wait). */
typedef enum {
  PEER_REL_WAIT_PREFETCH,
  PEER_REL_WAIT_READY,
  PEER_REL_WAIT_LAST
} peer_rel_wait_t;

static inline int peer_rel_terminal(peer_release_state_t s) {
  return s == PEER_REL_READY || s == PEER_REL_FAILED;
}

/* The name logs use: the digest, or the URI while a legacy URI resolves. */
static inline const char *peer_rel_name(const peer_release_t *rel) {
  return rel->digest_known ? rel->digest_str : rel->uri;
}

/* ---- state machine (release.c) ----------------------------------------- */

/* A new release in state, first on d's list (the list's reference).
 * Returns NULL on -ENOMEM. */
peer_release_t *peer_rel_new(peer_daemon_t *d, peer_release_state_t state);
void peer_rel_set_digest(peer_release_t *rel, const ws_hash_t *digest);
/* Asserts the transition is legal and keeps d->active_releases. */
void peer_rel_set_state(peer_release_t *rel, peer_release_state_t to);
/* Starts RESOLVING: manifest from a neighbour (swarm, digest known, not
 * tried yet), else GET from S3, else fails. */
void peer_rel_resolve_start(peer_release_t *rel);
/* -> FAILED with err and msg (borrowed; NULL or "": strerror), answers the
 * parked requests. No-op when already READY/FAILED. May remove rel. */
void peer_rel_fail(peer_release_t *rel, int err, const char *msg);

/* ---- counters and parked requests (release_view.c) ---------------------- */

typedef struct {
  uint64_t bytes_done, chunks_done, from_s3, from_peers;
} peer_rel_progress_t;

/* Live counters (summed over the files) or the final ones once terminal. */
void peer_rel_progress(const peer_release_t *rel, peer_rel_progress_t *p);
/* Parks req (taken) on rel; timeout_ms 0: no timeout. Answers 503 when
 * too many are parked. */
void peer_rel_waiter_add(peer_release_t *rel, ws_httpd_req_t *req,
                         peer_rel_wait_t kind, uint64_t timeout_ms);
/* Answers every parked request the current state settles. */
void peer_rel_answer(peer_release_t *rel);
/* Moves rel's parked requests to other and answers what other's state
 * settles (a legacy URI resolved to a digest that other already has). */
void peer_rel_waiters_move(peer_release_t *rel, peer_release_t *other);
/* Daemon STOPPING: answers every parked request 503. */
void peer_rel_waiters_cancel(peer_release_t *rel);

#endif
