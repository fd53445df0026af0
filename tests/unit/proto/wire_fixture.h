/* wire_fixture.h - a real uv loop with one TCP listener on 127.0.0.1 (an
 * ephemeral port) and a guard timer, shared by the wire_conn and
 * trk_client tests. Main thread only.
 */
#ifndef WIRE_FIXTURE_H
#define WIRE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "proto.h"
#include "wire_conn.h"

typedef struct wf_loop_s wf_loop_t;
/* A connection is pending on the listener: accept it (or not). */
typedef void (*wf_conn_cb)(wf_loop_t *w, uv_stream_t *server);

struct wf_loop_s {
  uv_loop_t loop;
  uv_tcp_t lsn;
  bool lsn_open;
  uint16_t port;
  uv_timer_t guard; /* unref'd: never keeps the loop alive */
  bool guard_fired;
  wf_conn_cb on_conn;
  void *arg;
};

/* Loop + listener on 127.0.0.1:0 (port written to w->port). */
void wf_init(wf_loop_t *w, wf_conn_cb on_conn, void *arg);
/* Closes the listener (idempotent); the port stays unused afterwards. */
void wf_listen_close(wf_loop_t *w);
/* Listens again on the same port after wf_listen_close (whose close must
 * have completed: call from a later loop iteration). */
void wf_relisten(wf_loop_t *w);
/* Runs the loop until no handle is left or guard_ms pass (then the loop is
 * stopped and guard_fired set: the test fails). */
void wf_run(wf_loop_t *w, uint64_t guard_ms);
/* Closes the listener and guard, runs the loop dry and asserts that
 * uv_loop_close succeeds. */
void wf_finish(wf_loop_t *w);
/* A config with node id, zone and a key of 32 bytes of keyfill. */
void wf_cfg(wire_conn_cfg_t *cfg, const char *node, const char *zone,
            uint8_t keyfill);
/* Accepts the listener's connection as node "srv" (key fill 7), offering
 * protocol version 1 (payloads in clear) when clear; asserts it worked. */
void wf_accept(uv_stream_t *server, bool clear, const wire_conn_cbs_t *cbs,
               void *user, wire_conn_t **out);

/* A raw peer's blocking-socket helpers (its own thread, proto/ directly):
 * connects to 127.0.0.1:port (an fd, or -1); sends all of b (0 or -1);
 * reads byte by byte until rd has one complete frame (f points into rd). */
int wf_raw_connect(uint16_t port);
int wf_raw_send(int fd, const ws_pbuf_t *b);
int wf_raw_recv_frame(int fd, ws_frame_reader_t *rd, ws_frame_t *f);
/* The initiator's handshake on fd: sends hello (our HELLO, already encoded
 * through hs), takes the other HELLO, sends AUTH, checks the other's, and
 * writes the session keys. 0 or -1. */
int wf_raw_handshake(int fd, ws_frame_reader_t *rd, ws_hs_t *hs,
                     const ws_pbuf_t *hello, ws_session_t *sess);

#endif
