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
 * the caller's buffer until done runs; file pieces (wire_conn_send_file)
 * name a range of the caller's descriptor. What a sealed payload owes the
 * cipher is done when the item is written, in stream order
 * (wire_item_seal): on the loop thread, or on the file queue's worker
 * while that holds the queue. Freed in the write callback (or at close,
 * for frames still held back behind an open payload), or by the file
 * queue (wire_conn_file.c) once written or cancelled. */
typedef struct wire_item_s {
  struct wire_item_s *next; /* held-back list or file queue */
  wire_conn_t *c;
  uv_write_t req;
  ws_pbuf_t pb;     /* frame bytes (owned) */
  const void *raw;  /* payload piece (borrowed), or NULL for a frame */
  uint8_t *sealed;  /* raw's ciphertext when not in place, owned; what is
                       written instead of raw */
  uint8_t *inplace; /* raw, which the caller lets us encrypt in place */
  size_t dlen;      /* data bytes (frame, piece or file range) */
  size_t len;       /* dlen + the tag after a sealed payload's last piece */
  wire_conn_raw_cb done;
  void *arg;
  bool file;       /* a file piece: dlen bytes of fd from foff */
  bool seal;       /* a piece of a sealed payload: encrypted when written */
  bool last;       /* the payload's last piece: its tag follows */
  bool aead_begin; /* a frame that opens a sealed payload (seq aead_seq) */
  bool sealed_done;
  int fd; /* borrowed until done */
  uint64_t foff;
  uint64_t aead_seq;
  size_t sent; /* file queue: bytes of it the socket took so far */
  size_t enc;  /* sealed file piece: bytes read and encrypted so far */
  uint8_t tag[WS_PAYLOAD_TAG_LEN];
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
  /* File queue (wire_conn_file.c): from the first file piece on, every
   * write goes through it, in order, until it is empty again. */
  wire_item_t *fq_head, *fq_tail;
  unsigned fq_batch;   /* items at the head being written by the job */
  bool fq_job;         /* a worker is writing the batch */
  bool fq_wait;        /* waiting for the socket to take more (wpoll) */
  bool fq_poll_inited; /* wpoll and wfd exist (closed with the conn) */
  int fq_err;          /* the job's error, 0 when none */
  bool fq_eagain;      /* the job stopped because the socket was full */
  bool fq_progress;    /* the job wrote something */
  bool fq_completing;  /* done callbacks of a batch are running */
  int wfd;             /* dup of the socket: the job's and wpoll's, or -1 */
  uv_work_t fq_work;
  uv_poll_t wpoll;
  uint64_t file_bytes;     /* clear file-piece bytes the socket took */
  uint8_t *scr;            /* sealed file pieces: read, encrypted, sent from */
  size_t scr_len, scr_pos; /* ciphertext in scr, and how much of it went */
  /* Send rate (wire_conn_rate.c): the moving average; the last write's
   * completion while more was queued (uv_hrtime, 0: none); busy time and
   * bytes towards the next sample; the unsent limit set on the socket. */
  uint64_t tx_rate;
  uint64_t rate_last_ns, rate_acc_ns, rate_acc_bytes;
  uint32_t unsent_limit;
  bool up_backlogged; /* counted in cfg.uplink's backlogged */
  uint64_t pace_rate; /* SO_MAX_PACING_RATE set (wire_uplink.c), or 0 */
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
/* What a written item owes: stats, the idle stamp, the caller's done
 * callback (status), then the item is freed. */
void wire_io_item_written(wire_conn_t *c, wire_item_t *it, int status);
/* The open payload's last byte is queued: the frames held behind it
 * follow. */
void wire_io_payload_done(wire_conn_t *c);
/* After writes completed: on_drain when the queue fell low enough, and the
 * end of a GOODBYE. */
void wire_io_after_writes(wire_conn_t *c);

/* wire_conn_rate.c */
/* len bytes of c were written (after st.sendq_bytes dropped by them). */
void wire_rate_written(wire_conn_t *c, size_t len);
/* Sets the socket's TCP_NOTSENT_LOWAT (best effort). */
void wire_rate_set_unsent(wire_conn_t *c, uint32_t bytes);

/* wire_uplink.c */
/* After a write completed: c's backlogged state in its uplink, and its
 * socket's pacing when its share changed (nothing without an uplink). */
void wire_uplink_written(wire_conn_t *c);
/* c is being freed: it no longer counts. */
void wire_uplink_leave(wire_conn_t *c);

/* wire_conn_file.c */
/* The cipher steps it owes (once): start the payload's AEAD for a frame
 * that opens a sealed payload; encrypt a raw piece (in place or into a
 * copy) and, after the payload's last piece, make the tag. 0 or an
 * error. */
int wire_item_seal(wire_conn_t *c, wire_item_t *it) WS_MUST_USE;
/* The bytes it writes before its tag. */
const uint8_t *wire_item_bytes(const wire_item_t *it);
/* 1 while the file queue holds items: every write must go behind them. */
bool wire_file_queue_busy(const wire_conn_t *c);
/* Appends it to the file queue and starts the queue when it can. */
void wire_file_enqueue(wire_conn_t *c, wire_item_t *it);
/* The libuv write queue may have emptied: start the file queue if it
 * waits for that. */
void wire_file_kick(wire_conn_t *c);
/* At close: the handles and jobs of the file queue that the struct must
 * outlive (each ends with wire_conn_closed_one); returns their count. */
unsigned wire_file_close(wire_conn_t *c);
/* Before on_close: every queued item gets its done callback with
 * UV_ECANCELED and is freed. */
void wire_file_cancel_all(wire_conn_t *c);

/* wire_conn.c */
/* One of the things the close waits for has ended (a handle closed, the
 * file queue's job returned): frees the connection after the last. */
void wire_conn_closed_one(wire_conn_t *c);

#endif
