/* tracker_link_lease.c - the tracker link's lease messages (LEASE_RENEW,
 * LEASE_RELEASE; tracker_link.h): sent on the link as they are asked for,
 * never queued while it is down (the tracker re-grants after the next
 * announce). Loop thread only.
 */
#include "swarm/tracker_link-int.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static int tc_send_lease(peer_tracker_link_t *tc, uint8_t type,
                         const uint8_t digest[32], const uint32_t *chunks,
                         uint32_t n, const uint32_t *done, uint32_t n_done) {
  ws_msg_t m;

  if (n > WS_MAX_CHUNK_LIST || n_done > WS_MAX_CHUNK_LIST ||
      (n > 0 && chunks == NULL) || (n_done > 0 && done == NULL))
    return WS_EUSAGE;
  if (tc->state != TC_READY)
    return -ENOTCONN;
  memset(&m, 0, sizeof(m));
  m.type = type;
  memcpy(m.u.lease.digest, digest, WS_PROTO_DIGEST_LEN);
  /* The encoder only reads the lists. */
  m.u.lease.chunks = (uint32_t *)(uintptr_t)chunks;
  m.u.lease.n_chunks = n;
  m.u.lease.done = (uint32_t *)(uintptr_t)done;
  m.u.lease.n_done = n_done;
  return wire_conn_send(tc->conn, &m);
}

int peer_tracker_link_lease_renew(peer_tracker_link_t *tc,
                                  const uint8_t digest[32],
                                  const uint32_t *chunks, uint32_t n,
                                  const uint32_t *done, uint32_t n_done) {
  return tc_send_lease(tc, WS_MSG_LEASE_RENEW, digest, chunks, n, done, n_done);
}

int peer_tracker_link_lease_release(peer_tracker_link_t *tc,
                                    const uint8_t digest[32],
                                    const uint32_t *chunks, uint32_t n,
                                    const uint32_t *done, uint32_t n_done) {
  return tc_send_lease(tc, WS_MSG_LEASE_RELEASE, digest, chunks, n, done,
                       n_done);
}
