/* wire_conn-int.h - what wire_conn.c (lifecycle, timers, close) and
 * wire_conn_io.c (reading, handshake frames, send queue) share. Loop thread
 * only; see wire_conn.h for the public contract.
 */
#ifndef WIRE_CONN_INT_H
#define WIRE_CONN_INT_H

#include "wire_conn.h"

typedef enum {
  WC_RESOLVING,  /* initiator: uv_getaddrinfo in flight */
  WC_CONNECTING, /* initiator: uv_tcp_connect in flight */
  WC_HANDSHAKE,  /* HELLO/AUTH exchange, pre-auth limits */
  WC_OPEN,       /* authenticated: frames both ways */
  WC_GOODBYE,    /* flushing the queue and our GOODBYE; not reading */
  WC_CLOSING,    /* handles closing; freed when all close callbacks ran */
  WC_STATE_LAST
} wc_state_t;

/* One queued write. Frames own their bytes (pb); raw payload pieces borrow
 * the caller's buffer until done runs. Freed in the write callback (or at
 * close, for frames still held back behind an open payload). */
typedef struct wire_item_s {
  struct wire_item_s *next; /* held-back list only */
  wire_conn_t *c;
  uv_write_t req;
  ws_pbuf_t pb;    /* frame bytes (owned) */
  const void *raw; /* payload piece (borrowed), or NULL for a frame */
  uint8_t *sealed; /* raw's ciphertext (+ the tag after the last piece),
                      owned; what is written instead of raw */
  size_t len;
  wire_conn_raw_cb done;
  void *arg;
} wire_item_t;

struct wire_conn_s {
  uv_loop_t *loop;  /* borrowed */
  uv_tcp_t tcp;     /* data = this conn */
  uv_timer_t timer; /* connect / handshake / idle / linger, by state */
  uv_idle_t kick;   /* delivers buffered input after read_resume */
  uv_getaddrinfo_t gai;
  uv_connect_t creq;
  uint64_t id;
  wc_state_t state;
  int status;         /* first close status */
  int pending_closes; /* handle close callbacks still to run */
  bool gai_pending;   /* resolver callback still to run */
  bool silent;        /* creation failed: free without on_close */
  bool initiator;
  bool reading; /* uv_read_start active */
  bool paused;  /* wire_conn_read_pause */
  bool in_process;
  bool drain_wanted;
  /* current inbound payload goes to on_payload (decrypted, "last" after
   * its tag, when sess.sealed: every payload of a sealed session is) */
  bool rx_payload_user;
  wire_conn_cfg_t cfg; /* key wiped once the handshake is set up */
  wire_conn_cbs_t cbs;
  void *user;
  uint16_t port;
  ws_hs_t hs;
  ws_session_t sess;
  ws_payload_aead_t *tx_aead, *rx_aead; /* owned; sealed sessions only */
  uint32_t rx_payload_len;              /* of the inbound payload */
  ws_frame_reader_t *rd;                /* owned */
  uint8_t *rbuf;     /* owned, WIRE_READ_BUF_BYTES; NULL when drained */
  size_t rpos, rlen; /* undelivered input is rbuf[rpos, rlen) */
  wire_item_t *held_head, *held_tail; /* frames behind the open payload */
  uint64_t payload_left;              /* outbound payload bytes still owed */
  unsigned writes_inflight;
  bool bye_queued;
  uint64_t last_io_ms; /* uv_now of the last byte read or written */
  wire_peer_t peer;
  wire_conn_stats_t st;
};

/* wire_conn.c */
void wire_conn_set_state(wire_conn_t *c, wc_state_t next);
void wire_conn_timer_arm(wire_conn_t *c, uint64_t ms);
void wire_conn_idle_arm(wire_conn_t *c);

/* wire_conn_io.c */
/* Sends our HELLO, starts reading; state must be WC_HANDSHAKE. */
int wire_io_handshake_start(wire_conn_t *c) WS_MUST_USE;
/* Starts or stops uv_read according to state, pause and buffered input. */
void wire_io_update_reading(wire_conn_t *c);
/* Delivers buffered input (kick callback / read callback). */
void wire_io_process(wire_conn_t *c);
/* A connection was created / is being freed on this thread (counts the
 * users of the thread's spare read buffer). */
void wire_io_conn_added(void);
void wire_io_conn_freed(wire_conn_t *c);
/* Gives c's read buffer back once all its input is delivered. */
void wire_io_rbuf_release(wire_conn_t *c);
/* Frees frames still held back (at close). */
void wire_io_drop_held(wire_conn_t *c);
/* Queues our GOODBYE behind everything else. */
int wire_io_send_goodbye(wire_conn_t *c, uint32_t reason) WS_MUST_USE;

#endif
