/* upload_line.c - who gets our next free upload slot (upload_line.h).
 * Thread: loop thread. */
#include "swarm/upload_line.h"

#include <stddef.h>

peer_neighbor_t *peer_upload_line_head(const peer_upload_line_t *l) {
  return l->len > 0 ? l->q[0] : NULL;
}

int peer_upload_line_turn(const peer_upload_line_t *l,
                          const peer_neighbor_t *n) {
  return l->len == 0 || l->q[0] == n;
}

int peer_upload_line_join(peer_upload_line_t *l, peer_neighbor_t *n,
                          uint64_t now_ms) {
  if (n->in_line)
    return 1;
  uint32_t seats = PEER_UPLOAD_LINE_MAX - l->len;
  if (seats == 0 || seats <= peer_neighbors_seats_owed(n, now_ms))
    return 0;
  l->q[l->len++] = n;
  n->in_line = true;
  return 1;
}

void peer_upload_line_leave(peer_upload_line_t *l, peer_neighbor_t *n) {
  if (!n->in_line)
    return;
  n->in_line = false;
  uint32_t k = 0;
  while (k < l->len && l->q[k] != n)
    k++;
  if (k == l->len)
    return;
  for (; k + 1 < l->len; k++)
    l->q[k] = l->q[k + 1];
  l->len--;
}
