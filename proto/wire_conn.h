/* wire_conn.h - one authenticated, framed weightswarm connection on a libuv
 * TCP stream: p2pd's peer<->peer and peer->tracker links and p2p-tracker's
 * accepted connections all use this object.
 *
 * This is the I/O half of proto/: it lives in its own static library
 * (ws_wire, wire_dep) so that proto_lib (ws_proto) stays pure. The object
 * runs the HELLO/AUTH handshake itself, seals every frame it sends, opens
 * every frame it receives, decodes known types, skips unknown ones, and
 * hands chunk/manifest payload bytes out zero-copy as they arrive.
 *
 * Thread: every function and callback runs on the loop thread that created
 * the connection. Nothing here blocks (name resolution goes through
 * uv_getaddrinfo on the threadpool).
 *
 * Lifetime: a connection is created by wire_conn_connect/wire_conn_accept
 * and freed by the library after on_close has returned; on_close is called
 * exactly once (unless creation itself failed), never from inside another
 * wire_conn call, so the caller may free its own context there. After
 * on_close the wire_conn_t pointer is dangling. wire_conn_close() may be
 * called from any callback, any number of times.
 *
 * Sending: wire_conn_send() encodes and seals a message into a bounded
 * queue (WS_ELIMIT when full; on_drain tells when to retry). A CHUNK or
 * MANIFEST message opens a payload of msg->u.chunk.len bytes that the
 * caller then streams with wire_conn_send_raw() from its own buffers
 * (zero-copy: a buffer is borrowed until its done callback). Control frames
 * sent while a payload is open are held back and go out right after it, so
 * a server can keep announcing HAVEs while it streams a chunk from disk.
 */
#ifndef WIRE_CONN_H
#define WIRE_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "proto.h"
#include "wire_uplink.h"

/* Defaults for wire_conn_cfg_init (each overridable in the cfg). */
#define WIRE_CONNECT_TIMEOUT_MS 5000u   /* resolve + TCP connect */
#define WIRE_HANDSHAKE_TIMEOUT_MS 5000u /* TCP up -> both AUTHs checked */
#define WIRE_IDLE_TIMEOUT_MS 120000u    /* no byte either way; 0 = off */
#define WIRE_LINGER_TIMEOUT_MS 5000u    /* wire_conn_goodbye flush limit */
/* Queued-but-unwritten bytes; one BITFIELD of 4 Mi chunks is 512 KiB. */
#define WIRE_SENDQ_MAX_BYTES (2u * 1024u * 1024u)
#define WIRE_SENDQ_LOW_BYTES (512u * 1024u) /* on_drain at or below this */
#define WIRE_READ_BUF_BYTES (256u * 1024u)  /* held while input waits */
/* Unsent bytes the kernel may hold per socket (TCP_NOTSENT_LOWAT): about
 * WIRE_UNSENT_MS at the rate the connection drains, within these bounds
 * (wire_conn_rate.c); the least until the rate is measured. The top is
 * WIRE_NOTSENT_BULK_BYTES on a bulk uplink (wire_uplink.h), reached above
 * ~1.6 Gbit/s. */
#define WIRE_NOTSENT_LOWAT_BYTES (128u * 1024u)
#define WIRE_NOTSENT_BULK_BYTES (4096u * 1024u)
#define WIRE_NOTSENT_MIN_BYTES (16u * 1024u)
#define WIRE_UNSENT_MS 20u
#define WIRE_RATE_WINDOW_MS 100u
#define WIRE_RATE_SAMPLE_BYTES (4u * 1024u * 1024u)

typedef struct wire_conn_s wire_conn_t;

/* What this side tells the other in its HELLO, and the connection's limits
 * and timeouts. Copied by wire_conn_connect/accept (borrowed for the call).
 */
typedef struct {
  uint8_t key[WS_CLUSTER_KEY_LEN];  /* cluster key; wiped from the conn */
  char node_id[WS_NODE_ID_MAX + 1]; /* non-empty */
  uint16_t listen_port;             /* 0 = not listening */
  uint8_t role;                     /* ws_role_t */
  /* HELLO "v" this side offers: WS_HELLO_VERSION (sealed payloads), or 1
   * for payloads in clear on this side's connections (p2pd
   * --plaintext-payloads). */
  uint32_t hello_version;
  char zone[WS_ZONE_MAX + 1];
  char labels[WS_LABELS_MAX + 1]; /* canonical "k=v,..." or "" (HELLO lb) */
  bool rejoin; /* HELLO "rj": a peer dialing a tracker it lost (proto.h) */
  uint32_t connect_timeout_ms;
  uint32_t handshake_timeout_ms;
  uint32_t idle_timeout_ms; /* 0 = never */
  uint32_t linger_timeout_ms;
  uint32_t max_body;    /* after auth, <= WS_MAX_BODY */
  uint32_t max_payload; /* after auth, <= WS_MAX_PAYLOAD; 0 = none */
  size_t sendq_max_bytes;
  size_t sendq_low_bytes; /* < sendq_max_bytes */
  /* The upload link this connection shares (borrowed, must outlive it;
   * NULL: not paced): wire_uplink.h. */
  wire_uplink_t *uplink;
} wire_conn_cfg_t;

/* The other side, from its HELLO (node_id..zone) and from the socket
 * (addr, addr_port: numeric remote address). */
typedef struct {
  char node_id[WS_NODE_ID_MAX + 1];
  uint16_t listen_port;
  uint8_t role; /* ws_role_t as claimed; trust it only after on_ready */
  char zone[WS_ZONE_MAX + 1];
  char labels[WS_LABELS_MAX + 1]; /* "" from peers that send none */
  bool rejoin;                    /* HELLO "rj" (proto.h ws_hello_t) */
  char addr[64];
  uint16_t addr_port;
} wire_peer_t;

typedef struct {
  uint64_t bytes_in;       /* read from the socket */
  uint64_t bytes_out;      /* written to the socket (write completed) */
  uint64_t frames_in;      /* complete frames received, handshake included */
  uint64_t frames_out;     /* frames queued, handshake included */
  size_t sendq_bytes;      /* queued (held back or in uv_write), not written */
  size_t sendq_file_bytes; /* of them, file pieces: no memory of ours */
  uint64_t send_waits;     /* the file queue found the socket full and waited */
  uint32_t unsent_limit;   /* TCP_NOTSENT_LOWAT now (wire_conn_rate.c) */
} wire_conn_stats_t;

/* Handshake done (both AUTHs checked); peer borrowed for the call (also
 * readable later with wire_conn_peer). Sends are allowed from here on. */
typedef void (*wire_conn_ready_cb)(wire_conn_t *c, const wire_peer_t *peer);
/* One authenticated frame of a known type (never HELLO/AUTH). msg is
 * borrowed for the call (freed after it returns). For CHUNK and MANIFEST
 * the payload follows as on_payload calls. */
typedef void (*wire_conn_frame_cb)(wire_conn_t *c, const ws_msg_t *msg);
/* Next piece of the current CHUNK/MANIFEST payload: data points into the
 * connection's read buffer, valid during the call only. off is the piece's
 * offset within the payload; last marks the final piece. */
typedef void (*wire_conn_payload_cb)(wire_conn_t *c, const uint8_t *data,
                                     size_t len, uint64_t off, bool last);
/* Queued bytes, file pieces not counted, fell to sendq_low_bytes after
 * having been above it (or after a send was refused with WS_ELIMIT). */
typedef void (*wire_conn_drain_cb)(wire_conn_t *c);
/* Exactly once. status: 0 after wire_conn_goodbye flushed or close(c, 0);
 * UV_EOF when the other side hung up after the handshake; WS_EAUTH for a
 * failed handshake (also when the responder hangs up on our AUTH);
 * WS_ETIMEOUT for connect, handshake, idle or linger timeouts; WS_EPROTO,
 * WS_ELIMIT, WS_EBADMSG, WS_EVERSION for bad input; a UV_E* socket or
 * resolver error; or the status given to wire_conn_close. */
typedef void (*wire_conn_close_cb)(wire_conn_t *c, int status);
/* A wire_conn_send_raw buffer is no longer needed: status 0 written,
 * UV_ECANCELED (or another UV_E*) when the connection closed first. Called
 * exactly once per accepted buffer, always before on_close. */
typedef void (*wire_conn_raw_cb)(wire_conn_t *c, void *arg, int status);

typedef struct {
  wire_conn_ready_cb on_ready;     /* required */
  wire_conn_frame_cb on_frame;     /* required */
  wire_conn_payload_cb on_payload; /* NULL: payload bytes are dropped */
  wire_conn_drain_cb on_drain;     /* optional */
  wire_conn_close_cb on_close;     /* required */
} wire_conn_cbs_t;

/* Fills cfg with the defaults above, role WS_ROLE_PEER, empty node id and
 * zone, zero key. */
void wire_conn_cfg_init(wire_conn_cfg_t *cfg);

/* Starts an outgoing connection (this side is the initiator): resolves host
 * (numeric or a name, through uv_getaddrinfo), connects, handshakes. cfg and
 * cbs are borrowed (copied); user is stored. On success *out is written and
 * every outcome is reported through the callbacks (on_ready or on_close).
 * Errors returned here (no callback follows): WS_EUSAGE bad cfg/host/port,
 * -ENOMEM, a UV_E* from handle setup. */
int wire_conn_connect(uv_loop_t *loop, const char *host, uint16_t port,
                      const wire_conn_cfg_t *cfg, const wire_conn_cbs_t *cbs,
                      void *user, wire_conn_t **out) WS_MUST_USE;

/* Accepts one pending connection on server (borrowed; call from its
 * connection callback) and starts the handshake as responder. Same contract
 * as wire_conn_connect. */
int wire_conn_accept(uv_stream_t *server, const wire_conn_cfg_t *cfg,
                     const wire_conn_cbs_t *cbs, void *user,
                     wire_conn_t **out) WS_MUST_USE;

/* Encodes msg (borrowed) into one sealed frame and queues it. CHUNK and
 * MANIFEST open a payload of msg->u.chunk.len / msg->u.manifest.len bytes,
 * to be given with wire_conn_send_raw. Errors: -ENOTCONN before on_ready or
 * once closing; WS_ELIMIT queue full (wait for on_drain; a frame is always
 * accepted into an empty queue); WS_EBUSY a CHUNK/MANIFEST while a payload
 * is still open; WS_EUSAGE HELLO/AUTH or invalid fields; -ENOMEM. */
int wire_conn_send(wire_conn_t *c, const ws_msg_t *msg) WS_MUST_USE;

/* Queues the next len bytes of the open payload. buf is borrowed until
 * done(c, arg, status) runs (never from inside this call). Not refused
 * for a full queue: the caller bounds its own buffers in flight, and the
 * bytes count towards on_drain. WS_EUSAGE when no payload is open, len is 0
 * or exceeds what the payload still needs; -ENOTCONN when closing. */
int wire_conn_send_raw(wire_conn_t *c, const void *buf, size_t len,
                       wire_conn_raw_cb done, void *arg) WS_MUST_USE;

/* The same for a buffer the caller lets the connection overwrite until
 * done runs (its own read buffer, not one shared with other connections):
 * a sealed payload is then encrypted in place, without a copy. */
int wire_conn_send_raw_inplace(wire_conn_t *c, void *buf, size_t len,
                               wire_conn_raw_cb done, void *arg) WS_MUST_USE;

/* Queues the next len bytes of the open payload from fd, starting at file
 * offset off. The writes run on a libuv worker (wire_conn_file.c): reading
 * a file may wait for the disk, the loop thread must not. A clear payload
 * goes with sendfile(2), from the page cache to the socket with no copy
 * through user memory; a sealed one is read, encrypted and sent by the
 * worker. fd is borrowed until done(c, arg, status) runs (never from
 * inside this call); a file that ends before the range closes the
 * connection with WS_ETRUNCATED. Every write queued after a file piece goes
 * out after it. The same errors as wire_conn_send_raw; a libuv error or
 * -ENOMEM when the worker's descriptor or buffer cannot be set up (the
 * connection then closes: the payload cannot go on). sendfile raises
 * SIGPIPE on a reset connection: the process must ignore SIGPIPE. */
int wire_conn_send_file(wire_conn_t *c, int fd, uint64_t off, size_t len,
                        wire_conn_raw_cb done, void *arg) WS_MUST_USE;

/* Bytes still owed to the open payload (0 when none is open). */
uint64_t wire_conn_payload_left(const wire_conn_t *c);
/* 1 when the connection is open and its payloads go in clear (the other
 * side or this one offered protocol version 1): wire_conn_send_file uses
 * sendfile. */
bool wire_conn_payload_clear(const wire_conn_t *c);
/* Clear payload bytes the socket took with sendfile (file pieces). */
uint64_t wire_conn_file_bytes(const wire_conn_t *c);
/* The rate (bytes/s) c's socket has taken its bytes at while more were
 * queued: a moving average, 0 until measured (wire_conn_rate.c). */
uint64_t wire_conn_send_rate(const wire_conn_t *c);
/* About ms of rate r (bytes/s), within [lo, hi]: what the kernel may hold
 * unsent (wire_conn_rate.c) and how large a caller's pieces are
 * (peer/swarm/upload_chunk.c) for a connection that drains at r. */
static inline uint64_t wire_rate_bytes(uint64_t r, uint32_t ms, uint64_t lo,
                                       uint64_t hi) {
  uint64_t b = r * ms / 1000u;
  return b < lo ? lo : b > hi ? hi : b;
}

/* Read back-pressure: stop/restart delivering frames and payload. Pausing
 * inside on_frame/on_payload takes effect after that call returns; input
 * already read stays buffered (at most WIRE_READ_BUF_BYTES) and is delivered
 * after resume, from a later loop iteration. The idle timeout does not run
 * while paused. Both are idempotent. */
void wire_conn_read_pause(wire_conn_t *c);
void wire_conn_read_resume(wire_conn_t *c);

/* Graceful close: sends GOODBYE(reason) after anything queued (and after
 * the open payload completes), then closes with status 0; WS_ETIMEOUT if
 * that takes longer than linger_timeout_ms. No frames are delivered any
 * more. Before on_ready this is wire_conn_close(c, 0). */
void wire_conn_goodbye(wire_conn_t *c, ws_bye_reason_t reason);

/* Closes now: queued frames are dropped, raw buffers get their done
 * callback with UV_ECANCELED, then on_close(c, status) runs from a later
 * callback. Safe from any callback; later calls are no-ops (the first status
 * wins). */
void wire_conn_close(wire_conn_t *c, int status);

void *wire_conn_user(const wire_conn_t *c);
void wire_conn_set_user(wire_conn_t *c, void *user);
/* The other side: addr fields once connected, HELLO fields once on_ready
 * has run. Borrowed; valid until on_close returns. */
const wire_peer_t *wire_conn_peer(const wire_conn_t *c);
bool wire_conn_is_open(const wire_conn_t *c); /* ready and not closing */
bool wire_conn_initiator(const wire_conn_t *c);
void wire_conn_stats(const wire_conn_t *c, wire_conn_stats_t *out);
/* Stable per-process id for log lines ("wire#7"). */
uint64_t wire_conn_id(const wire_conn_t *c);

#endif
