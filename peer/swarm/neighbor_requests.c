/* neighbor_requests.c - our chunk requests out to one neighbour
 * (neighbor.h): at most PEER_PIPELINE_DEPTH in flight, each holding a file
 * reference and counted in the file's nreq; dropped when answered,
 * refused, canceled or timed out, and the chunk given back to be fetched
 * again when no other request or download holds it.
 *
 * Endgame: several neighbours may have a request out for the same chunk;
 * the first CHUNK header wins and the others are canceled.
 *
 * Owns: the request slots' file references. Thread: loop thread.
 */
#include <assert.h>
#include <string.h>

#include "swarm/neighbor.h"
#include "ws_log.h"

int peer_request_send(peer_neighbor_t *n, struct peer_swarm_rel_s *rel,
                      const uint8_t *digest, peer_file_t *file, uint32_t g,
                      uint32_t j, bool dup) {
  uint32_t slot = 0;
  while (slot < PEER_PIPELINE_DEPTH && n->reqs[slot].used)
    slot++;
  assert(slot < PEER_PIPELINE_DEPTH);
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_REQUEST;
  memcpy(m.u.request.digest, digest, WS_PROTO_DIGEST_LEN);
  m.u.request.chunk = g;
  m.u.request.req_id = ++n->next_req_id;
  int rc = peer_neighbor_send(n, &m);
  if (rc != 0)
    return rc;
  if (dup)
    peer_file_ref(file);
  else
    peer_file_chunk_take(file, j);
  file->nreq[j]++;
  peer_request_t *r = &n->reqs[slot];
  *r = (peer_request_t){.used = true,
                        .dup = dup,
                        .rel = rel,
                        .file = file,
                        .g = g,
                        .j = j,
                        .req_id = m.u.request.req_id,
                        .sent_ms = uv_now(n->set->ctx->loop)};
  memcpy(r->digest, digest, WS_PROTO_DIGEST_LEN);
  n->nreqs++;
  n->set->nreqs++;
  return 0;
}

int peer_request_pending(const peer_neighbor_t *n, const peer_file_t *f,
                         uint32_t j) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used && n->reqs[i].file == f && n->reqs[i].j == j)
      return 1;
  }
  return 0;
}

int peer_request_find(const peer_neighbor_t *n, const uint8_t *digest,
                      uint32_t g, uint32_t req_id) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    const peer_request_t *r = &n->reqs[i];
    if (r->used && r->g == g && r->req_id == req_id &&
        memcmp(r->digest, digest, WS_PROTO_DIGEST_LEN) == 0)
      return (int)i;
  }
  return -1;
}

void peer_request_chunk_release(peer_file_t *file, uint32_t j) {
  if (file->nreq[j] == 0 && !file->rx_busy[j] &&
      file->chunk_state[j] == PEER_CHUNK_INFLIGHT)
    peer_file_chunk_done(file, j, PEER_SRC_PEER, WS_ECANCELED, NULL);
}

void peer_request_drop(peer_neighbor_t *n, uint32_t i, int status) {
  peer_request_t *r = &n->reqs[i];
  assert(r->used);
  peer_file_t *file = r->file;
  uint32_t j = r->j;
  r->used = false;
  r->file = NULL;
  n->nreqs--;
  assert(n->set->nreqs > 0);
  n->set->nreqs--;
  assert(file->nreq[j] > 0);
  file->nreq[j]--;
  if (status != 0)
    WS_LOGD("nbr#%llu %s: request for chunk %u dropped: %s",
            (unsigned long long)n->id, n->node_id, r->g, ws_strerror(status));
  peer_request_chunk_release(file, j);
  peer_file_unref(file);
}

void peer_request_send_cancel(peer_neighbor_t *n, const uint8_t *digest,
                              uint32_t g, uint32_t req_id) {
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CANCEL;
  memcpy(m.u.request.digest, digest, WS_PROTO_DIGEST_LEN);
  m.u.request.chunk = g;
  m.u.request.req_id = req_id;
  (void)peer_neighbor_send(n, &m);
}

static void request_cancel(peer_neighbor_t *n, uint32_t i) {
  peer_request_t *r = &n->reqs[i];
  peer_request_send_cancel(n, r->digest, r->g, r->req_id);
  peer_request_drop(n, i, WS_ECANCELED);
}

void peer_requests_cancel_others(peer_neighbors_t *set, peer_neighbor_t *keep,
                                 peer_file_t *file, uint32_t j) {
  for (peer_neighbor_t *n = set->head; n != NULL && file->nreq[j] > 0;
       n = n->next) {
    if (n == keep)
      continue;
    for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
      if (n->reqs[i].used && n->reqs[i].file == file && n->reqs[i].j == j)
        request_cancel(n, i);
    }
  }
}

void peer_requests_forget_rel(peer_neighbor_t *n,
                              const struct peer_swarm_rel_s *rel) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used && n->reqs[i].rel == rel)
      request_cancel(n, i);
  }
}

uint32_t peer_requests_timeouts(peer_neighbor_t *n, uint64_t now_ms) {
  uint32_t late = 0;
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (n->reqs[i].used &&
        now_ms - n->reqs[i].sent_ms > PEER_REQUEST_TIMEOUT_MS) {
      WS_LOGW("nbr#%llu %s: chunk %u not sent in %u ms; asking elsewhere",
              (unsigned long long)n->id, n->node_id, n->reqs[i].g,
              PEER_REQUEST_TIMEOUT_MS);
      request_cancel(n, i);
      late++;
    }
  }
  return late;
}
