/* trk_server.h - p2p-tracker's peer protocol listener.
 *
 * Accepts TCP connections from p2pd, each as a wire_conn (proto/: the
 * cluster-key handshake, sealed frames, send queue, handshake/idle/linger
 * timeouts), then turns ANNOUNCE, HAVE, LEASE_RENEW and LEASE_RELEASE
 * messages into trk_tracker_t calls and answers with ANNOUNCE_REPLY (or
 * ERROR). One authenticated connection = one registered peer; closing it
 * disconnects the peer (its leases become leasable at once). A periodic
 * sweep expires leases and resumes throttled readers. Loop thread only.
 */
#ifndef TRK_SERVER_H
#define TRK_SERVER_H

#include <stdint.h>
#include <uv.h>

#include "trk_tracker.h"
#include "ws_err.h"

typedef struct trk_server_s trk_server_t;
typedef void (*trk_server_close_cb)(trk_server_t *srv, void *arg);

typedef struct {
  uint64_t accepted;
  uint64_t rejected;         /* over a connection cap */
  uint64_t auth_failed;      /* wrong cluster key or a bad frame MAC */
  uint64_t protocol_errors;  /* connections closed for bad input */
  uint64_t confirms_ignored; /* HAVE "f" naming no other-address member */
  uint64_t leases_pushed;    /* lease lists sent after claims stopped
                                counting (trk_server_push_leases) */
  uint64_t frames_in;        /* handshake frames included */
  uint64_t frames_out;
  uint32_t conns;
  uint32_t preauth;
} trk_server_stats_t;

/* Creates a server on loop (borrowed) driving t (borrowed; both outlive the
 * server) with the 32-byte cluster key (copied). 0 and *out (new; ends
 * with trk_server_close), or -ENOMEM / a uv error. */
int trk_server_new(uv_loop_t *loop, trk_tracker_t *t, const uint8_t key[32],
                   trk_server_t **out) WS_MUST_USE;
/* Listens on "HOST:PORT" ("0.0.0.0:7070", "[::]:7070", ":7070" = all IPv4
 * addresses). Port 0 binds a free port; *bound_port (may be NULL) gets it.
 * 0, WS_EUSAGE, WS_EBUSY (already listening) or a uv error. */
int trk_server_listen(trk_server_t *srv, const char *host_port,
                      int *bound_port) WS_MUST_USE;
/* Sends GOODBYE to every peer, closes the listener and all connections,
 * then calls cb (may be NULL) and frees srv. Call at most once. */
void trk_server_close(trk_server_t *srv, trk_server_close_cb cb, void *arg);
void trk_server_stats(const trk_server_t *srv, trk_server_stats_t *out);
/* Sends every authenticated peer the wanted releases it has not joined (an
 * ANNOUNCE_REPLY per peer, named by the first of them). Call after the
 * wanted set grows. */
void trk_server_push_wanted(trk_server_t *srv);
/* After a sweep whose weighing made chunks leasable (trk_tracker_regrant):
 * sends each peer of those swarms its topped-up lease list. */
void trk_server_push_leases(trk_server_t *srv);

/* Parses "HOST:PORT" / "[V6]:PORT" / ":PORT" into sa (shared with main.c
 * and tests). 0 or WS_EUSAGE. */
int trk_addr_parse(const char *host_port,
                   struct sockaddr_storage *sa) WS_MUST_USE;

#endif
