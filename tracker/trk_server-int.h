/* trk_server-int.h - shared by trk_server.c (listener, connection
 * lifecycle, I/O, sweep) and trk_server_msg.c (handshake and message
 * handling). Loop thread only.
 *
 * Connection state machine (conn_set_state asserts these edges):
 *
 *   HANDSHAKE --both AUTHs checked, peer registered--> READY
 *   HANDSHAKE | READY --error, EOF, timeout, replaced, shutdown--> CLOSING
 *   CLOSING --handle closed--> freed (in the close callback only)
 *
 * A CLOSING connection may still be flushing (uv_shutdown) for up to
 * TRK_CONN_CLOSE_GRACE_MS; the sweep forces uv_close after that.
 */
#ifndef TRK_SERVER_INT_H
#define TRK_SERVER_INT_H

#include <stdbool.h>

#include "proto.h"
#include "trk_server.h"

typedef enum {
  TRK_CONN_HANDSHAKE,
  TRK_CONN_READY,
  TRK_CONN_CLOSING,
  TRK_CONN_LAST
} trk_conn_state_t;

typedef struct trk_conn_s {
  uv_tcp_t tcp; /* handle.data = this; freed only in its close callback */
  uv_shutdown_t shutdown;
  trk_server_t *srv;
  struct trk_conn_s *prev, *next;
  uint64_t id; /* conn#N in logs */
  trk_conn_state_t state;
  char ip[64];     /* remote address text, given to other peers */
  char remote[80]; /* "ip:port" for logs */
  ws_hs_t hs;      /* handshake secrets; wiped once READY */
  ws_session_t sess;
  ws_frame_reader_t *reader;
  bool hello_seen;
  char node_id[WS_NODE_ID_MAX + 1];
  char zone[WS_ZONE_MAX + 1];
  uint16_t port;
  trk_peer_id_t peer; /* 0 until READY */
  uint64_t accepted_ms;
  uint64_t last_rx_ms;
  uint64_t closing_ms;
  size_t wq_bytes;    /* queued, not yet written */
  uint64_t window_ms; /* start of the frame-rate window */
  uint32_t window_frames;
  bool throttled; /* reading paused until the next sweep */
} trk_conn_t;

struct trk_server_s {
  uv_loop_t *loop;
  trk_tracker_t *t;
  uint8_t key[WS_CLUSTER_KEY_LEN];
  uv_tcp_t listener;
  bool listening;
  uv_timer_t sweep;
  trk_conn_t *conns; /* every connection not yet freed */
  uint32_t preauth;
  uint32_t live_handles; /* handles not yet closed (listener, timer, conns) */
  uint64_t next_id;
  bool closing;
  trk_server_close_cb close_cb;
  void *close_arg;
  bool rbuf_busy;
  trk_server_stats_t st;
  uint8_t rbuf[TRK_READ_BUF_BYTES];
};

/* trk_server.c */
void trk_conn_set_state(trk_conn_t *c, trk_conn_state_t next);
/* Starts closing c (idempotent). flush: let queued frames go out first. */
void trk_conn_close(trk_conn_t *c, bool flush, const char *why);
/* Queues len bytes (copied) for c. Closes c on failure (queue over
 * TRK_CONN_WRITE_QUEUE_MAX, uv error). */
int trk_conn_write(trk_conn_t *c, const uint8_t *data, size_t len) WS_MUST_USE;
/* Encodes m (sealed once READY) and queues it. Closes c on failure. */
int trk_conn_send(trk_conn_t *c, const ws_msg_t *m);
/* Sends ERROR {code, msg}; keeps the connection. */
void trk_conn_send_error(trk_conn_t *c, int code, const char *msg);
/* Queues our HELLO; called once at accept. */
int trk_conn_hello(trk_conn_t *c) WS_MUST_USE;
trk_conn_t *trk_server_find_peer(trk_server_t *srv, trk_peer_id_t id);

/* trk_server_msg.c: one complete frame from c's reader. */
void trk_conn_on_frame(trk_conn_t *c, const ws_frame_t *f);

#endif
