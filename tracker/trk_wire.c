/* trk_wire.c - the wire's ANNOUNCE in the tracker core's terms (see
 * trk_wire.h). */
#include "trk_wire.h"

#include <string.h>

void trk_announce_from_wire(const ws_announce_t *a, trk_announce_t *ta) {
  memset(ta, 0, sizeof(*ta));
  memcpy(ta->digest.b, a->digest, sizeof(ta->digest.b));
  ta->uri = a->uri;
  ta->total_chunks = a->total_chunks;
  ta->role = a->role == WS_SWARM_SEED ? TRK_ROLE_SEED : TRK_ROLE_LEECH;
  if (a->have_bits != NULL) {
    ta->bitfield = a->have_bits;
    ta->bitfield_len = ws_bitfield_nbytes(a->total_chunks);
  }
  ta->have = a->have_list;
  ta->nhave = a->n_have_list;
  ta->want_leases =
      a->want && ta->role == TRK_ROLE_LEECH ? TRK_LEASES_PER_PEER_MAX : 0;
  ta->max_peers = TRK_REPLY_PEERS_DEFAULT;
  ta->leave = a->event == WS_ANN_STOPPED;
  ta->report.size_bytes = a->size_bytes;
  ta->report.s3_bytes = a->s3_bytes;
  ta->report.peer_bytes = a->peer_bytes;
  ta->report.err = a->err;
  ta->stuck = a->stuck;
  ta->nstuck = a->n_stuck;
  ta->first = a->first;
  ta->nfirst = a->n_first;
}
