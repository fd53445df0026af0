/* sched.h - the one chunk scheduler's queues: which chunk of which file is
 * fetched next.
 *
 * Three tiers, served in order: single-chunk (small) files, then the first
 * chunk of every bigger file (the safetensors header, which readers need
 * first), then the rest of every file in order. A chunk that failed is
 * fetched again soon (its file goes to the head of its tier).
 *
 * The scheduler only reads a file's chunk states and links files through
 * the queue fields of peer_file_t; it calls nothing in file.c (which owns
 * the chunk states and asks it through peer_sched_pick).
 *
 * Thread: loop thread.
 */
#ifndef PEER_FETCH_SCHED_H
#define PEER_FETCH_SCHED_H

#include <stdint.h>

#include "fetch/file.h"

typedef struct {
  peer_file_t *qhead[PEER_TIER_LAST];
  peer_file_t *qtail[PEER_TIER_LAST];
} peer_sched_t;

/* Queues a FETCHING file at the tail of its tiers (from its first chunk). */
void peer_sched_add(peer_sched_t *s, peer_file_t *file);
/* Chunk j of file is MISSING again: queues the file at the head of its
 * tier so that j is picked soon. */
void peer_sched_requeue(peer_sched_t *s, peer_file_t *file, uint32_t j);
/* Takes file out of every queue. */
void peer_sched_remove(peer_sched_t *s, peer_file_t *file);
/* The next MISSING chunk of a FETCHING file: returns 1 with *file and *j
 * (not yet marked or referenced: the caller does), 0 when no queued file
 * has one. Files with nothing left are dropped from the queues. */
int peer_sched_pick(peer_sched_t *s, peer_file_t **file, uint32_t *j);

#endif
