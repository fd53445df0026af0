/* trk_server-int.h - shared by trk_server.c (listener, caps, wire_conn
 * callbacks, sweep, shutdown) and trk_server_msg.c (peer registration and
 * message handling). Loop thread only.
 *
 * Each accepted connection is one wire_conn_t (proto/wire_conn.h: it runs
 * the handshake, seals and opens frames, bounds the send queue and owns
 * the handshake, idle and linger timeouts) plus one trk_conn_t here: the
 * tracker's bookkeeping for it (peer id, frame-rate window). State machine
 * (trk_conn_set_state asserts these edges):
 *
 *   HANDSHAKE --on_ready, role ok--> READY (peer registered)
 *   HANDSHAKE | READY --we close, or the wire_conn closed itself--> CLOSING
 *   CLOSING --on_close--> freed (in on_close only)
 *
 * Entering CLOSING disconnects the peer from the tracker at once (its
 * leases become leasable); the wire_conn may still flush a GOODBYE after
 * that, and reports on_close when it is gone.
 */
#ifndef TRK_SERVER_INT_H
#define TRK_SERVER_INT_H

#include <stdbool.h>

#include "proto.h"
#include "trk_server.h"
#include "wire_conn.h"

typedef enum {
  TRK_CONN_HANDSHAKE,
  TRK_CONN_READY,
  TRK_CONN_CLOSING,
  TRK_CONN_LAST
} trk_conn_state_t;

typedef struct trk_conn_s {
  wire_conn_t *wc; /* user = this; valid until on_close returns */
  trk_server_t *srv;
  struct trk_conn_s *prev, *next;
  uint64_t id; /* wire_conn_id: conn#N in logs */
  trk_conn_state_t state;
  trk_peer_id_t peer; /* 0 until READY, and once replaced or closing */
  uint64_t window_ms; /* start of the frame-rate window */
  uint32_t window_frames;
  bool throttled; /* reading paused until the next sweep */
  bool refused;   /* turned away at a cap: closed without a log line */
} trk_conn_t;

struct trk_server_s {
  uv_loop_t *loop;
  trk_tracker_t *t;
  wire_conn_cfg_t cfg; /* for every accept; holds the cluster key */
  uv_tcp_t listener;
  bool listening;
  uv_timer_t sweep;
  trk_conn_t *conns; /* every connection whose on_close has not run */
  uint32_t preauth;
  uint32_t live_handles; /* listener and sweep, until their close callbacks */
  bool closing;
  trk_server_close_cb close_cb;
  void *close_arg;
  trk_server_stats_t st; /* frames_in/out: of connections already freed */
  /* Refusals since the last line about them (trk_server_refused). */
  uint64_t refused_unlogged[TRK_REFUSE_LAST];
  uint64_t refused_log_ms; /* when that line was written */
};

/* trk_server.c */
void trk_conn_set_state(trk_conn_t *c, trk_conn_state_t next);
/* Closes c now (queued replies are dropped); status goes to the
 * wire_conn. Idempotent. */
void trk_conn_close(trk_conn_t *c, int status, const char *why);
/* Closes c after queued replies and a GOODBYE(reason) went out. */
void trk_conn_goodbye(trk_conn_t *c, ws_bye_reason_t reason, const char *why);
/* Queues m (borrowed) for c. A full send queue (the peer does not read its
 * replies) or another failure closes c. 0 or the wire_conn_send error. */
int trk_conn_send(trk_conn_t *c, const ws_msg_t *m);
/* Sends ERROR {code, msg}; keeps the connection. */
void trk_conn_send_error(trk_conn_t *c, int code, const char *msg);
trk_conn_t *trk_server_find_peer(trk_server_t *srv, trk_peer_id_t id);
/* Counts a refused node or connection for the log: one line per
 * TRK_REFUSAL_LOG_MS at most, with how many and why (a full tracker is
 * asked again by every node it turns away). */
void trk_server_refused(trk_server_t *srv, trk_refusal_t why);
/* Writes the pending refusal line if its interval has passed. */
void trk_server_refused_flush(trk_server_t *srv);

/* trk_server_msg.c */
/* c just became READY: registers its peer with the tracker (or refuses
 * it), replacing an older connection of the same node. */
void trk_conn_register(trk_conn_t *c);
/* One authenticated message from c (borrowed; c is READY). */
void trk_conn_on_msg(trk_conn_t *c, const ws_msg_t *m);

#endif
