/* fake_upload_chunk.h - swarm/upload_chunk.c's functions for tests of
 * upload.c's queue, with uploads the test ends (fake_upload_chunk.c).
 * Test process only. */
#ifndef FAKE_UPLOAD_CHUNK_H
#define FAKE_UPLOAD_CHUNK_H

#include "swarm/upload_chunk.h"

typedef struct {
  bool mux; /* what peer_upload_mux says of every neighbour */
  unsigned starts, rejects;
  peer_neighbor_t *last_reject_to;
  uint32_t last_reject_chunk;
  ws_reject_reason_t last_reject_why;
} fake_upload_log_t;

extern fake_upload_log_t fake_upload_log;

/* n's last started upload ends: the slot frees, n's queue moves on
 * through u->next, as upload_chunk.c does. */
void fake_upload_end(peer_uploads_t *u, peer_neighbor_t *n);

#endif
