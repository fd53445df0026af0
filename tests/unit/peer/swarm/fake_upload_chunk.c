/* fake_upload_chunk.c - a stand-in for swarm/upload_chunk.c in tests of
 * upload.c's queue: an upload "streams" until the test ends it
 * (fake_upload_end), a REJECT is recorded, nothing reaches a socket.
 * Test process only. */
#include "fake_upload_chunk.h"

#include <stdlib.h>

fake_upload_log_t fake_upload_log;

struct peer_upload_s {
  uint32_t chunk;
};

void peer_upload_reject(peer_uploads_t *u, peer_neighbor_t *n,
                        const uint8_t *digest, uint32_t chunk, uint32_t req_id,
                        ws_reject_reason_t why) {
  (void)u;
  (void)digest;
  (void)req_id;
  fake_upload_log.rejects++;
  fake_upload_log.last_reject_to = n;
  fake_upload_log.last_reject_chunk = chunk;
  fake_upload_log.last_reject_why = why;
}

bool peer_upload_mux(peer_neighbor_t *n, const uint8_t *digest) {
  (void)n;
  (void)digest;
  return fake_upload_log.mux;
}

int peer_upload_can(peer_neighbor_t *n, peer_swarm_rel_t *rel, uint32_t g) {
  (void)n;
  (void)rel;
  (void)g;
  return 1;
}

bool peer_upload_is_live(const peer_upload_t *up) {
  (void)up;
  return false;
}

void peer_upload_chunk_start(peer_uploads_t *u, peer_neighbor_t *n,
                             const ws_request_t *r) {
  peer_upload_t *up = malloc(sizeof(*up));
  if (up == NULL)
    abort();
  up->chunk = r->chunk;
  n->ups[n->nups++] = up;
  u->uploads++;
  fake_upload_log.starts++;
}

void peer_upload_chunk_pump(peer_neighbor_t *n, const peer_file_t *file,
                            uint32_t j) {
  (void)n;
  (void)file;
  (void)j;
}

int peer_upload_chunk_cancel(peer_neighbor_t *n, const ws_request_t *r) {
  (void)n;
  (void)r;
  return 0;
}

void peer_upload_chunk_detach(peer_neighbor_t *n) {
  for (uint32_t i = 0; i < n->nups; i++)
    free(n->ups[i]);
  n->nups = 0;
}

void fake_upload_end(peer_uploads_t *u, peer_neighbor_t *n) {
  if (n->nups == 0)
    abort();
  free(n->ups[--n->nups]);
  u->uploads--;
  n->just_served = true;
  u->next(u, n);
}
