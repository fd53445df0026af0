/* upload_line.h - who gets our next free upload slot.
 *
 * A neighbour we upload nothing to that asks while every upload slot is
 * taken waits in a short line, its requests kept in its queue, instead of
 * being refused; the next slot to free is the line's head's, started at
 * once (upload.c). The line holds PEER_UPLOAD_LINE_MAX neighbours; a
 * request from a neighbour that finds no seat is refused busy and its
 * sender asks another holder. A seat that frees is kept for a neighbour
 * refused before, while it may be back for it (PEER_SLOT_HOLD_MS), so that
 * nobody loses every race for a seat; a free slot is never kept.
 *
 * Before the line a free slot was kept for the neighbour refused first
 * until it came back: slots sat idle while everyone else was refused, and
 * at 8 nodes the swarm settled into a state with under one upload at once
 * per node and 1.8 x T_min (docs/benchmarks.md, "session 17").
 *
 * Borrows the neighbours in it; upload.c takes a neighbour out before it
 * goes (peer_upload_detach). Thread: loop thread.
 */
#ifndef PEER_SWARM_UPLOAD_LINE_H
#define PEER_SWARM_UPLOAD_LINE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tunables.h"
#include "swarm/neighbor.h"

typedef struct {
  peer_neighbor_t *q[PEER_UPLOAD_LINE_MAX]; /* in order of joining */
  uint32_t len;
} peer_upload_line_t;

/* The neighbour whose turn is next, or NULL. */
peer_neighbor_t *peer_upload_line_head(const peer_upload_line_t *l);
/* 1 when n may take a free slot now: nobody waits, or n is the head. */
int peer_upload_line_turn(const peer_upload_line_t *l,
                          const peer_neighbor_t *n);
/* n, which has no upload from us, finds every slot taken at now_ms: 1 when
 * it waits in the line (it joined, or was in it), 0 when it gets no seat:
 * the line is full, or the seats left are kept for neighbours refused
 * before it (peer_neighbors_seats_owed). */
int peer_upload_line_join(peer_upload_line_t *l, peer_neighbor_t *n,
                          uint64_t now_ms);
/* n leaves the line (it got its slot, has nothing left to ask, or goes);
 * nothing when it is not in it. */
void peer_upload_line_leave(peer_upload_line_t *l, peer_neighbor_t *n);

#endif
