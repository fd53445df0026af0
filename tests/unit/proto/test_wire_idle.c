/* test_wire_idle.c - what idle wire_conns keep. NCONN connections, both
 * ends in this process on one loop, finish the handshake and exchange a
 * frame each way; once idle, together they hold far less than one read
 * buffer (WIRE_READ_BUF_BYTES) per connection: a tracker keeps thousands
 * of such connections open. Memory is the heap in use (heap_bytes.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../heap_bytes.h"
#include "wire_fixture.h"

#define NCONN 16u

typedef struct fx_s fx_t;

typedef struct {
  fx_t *fx;
  bool client;
} side_t;

struct fx_s {
  wf_loop_t w;
  wire_conn_cfg_t ccfg, scfg;
  side_t cside, sside;
  wire_conn_t *conn[2u * NCONN];
  unsigned nconn, ready, frames_cli, frames_srv, closed;
  uv_timer_t t;
  size_t heap_start, heap_idle;
};

static void send_have(wire_conn_t *c, uint32_t chunk) {
  ws_msg_t m;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memset(m.u.have.digest, 0xab, sizeof(m.u.have.digest));
  m.u.have.chunk = chunk;
  assert_int_equal(wire_conn_send(c, &m), 0);
}

static void on_idle(uv_timer_t *t) {
  fx_t *fx = t->data;

  fx->heap_idle = heap_bytes();
  for (unsigned i = 0; i < fx->nconn; i++)
    wire_conn_close(fx->conn[i], 0);
}

static void check_idle(fx_t *fx) {
  /* Everyone ready and both frames of every pair delivered: let the loop
   * settle (write callbacks, empty reads), then measure. */
  if (fx->ready == 2u * NCONN && fx->frames_cli == NCONN &&
      fx->frames_srv == NCONN)
    uv_timer_start(&fx->t, on_idle, 50, 0);
}

static void cb_ready(wire_conn_t *c, const wire_peer_t *peer) {
  side_t *s = wire_conn_user(c);

  (void)peer;
  s->fx->ready++;
  if (s->client)
    send_have(c, 1);
  check_idle(s->fx);
}

static void cb_frame(wire_conn_t *c, const ws_msg_t *m) {
  side_t *s = wire_conn_user(c);

  assert_int_equal(m->type, WS_MSG_HAVE);
  if (s->client) {
    s->fx->frames_cli++;
  } else {
    s->fx->frames_srv++;
    send_have(c, 2); /* the answer */
  }
  check_idle(s->fx);
}

static void cb_close(wire_conn_t *c, int status) {
  side_t *s = wire_conn_user(c);

  (void)status;
  if (++s->fx->closed == 2u * NCONN) {
    wf_listen_close(&s->fx->w);
    uv_close((uv_handle_t *)&s->fx->t, NULL);
  }
}

static const wire_conn_cbs_t k_cbs = {
    .on_ready = cb_ready, .on_frame = cb_frame, .on_close = cb_close};

static void on_conn(wf_loop_t *w, uv_stream_t *server) {
  fx_t *fx = w->arg;

  assert_true(fx->nconn < 2u * NCONN);
  assert_int_equal(wire_conn_accept(server, &fx->scfg, &k_cbs, &fx->sside,
                                    &fx->conn[fx->nconn]),
                   0);
  fx->nconn++;
}

static void test_idle_conns_hold_no_read_buffer(void **state) {
  fx_t *fx = calloc(1, sizeof(*fx));

  (void)state;
  assert_non_null(fx);
  wf_init(&fx->w, on_conn, fx);
  wf_cfg(&fx->ccfg, "node-client", "", 0x22);
  wf_cfg(&fx->scfg, "node-server", "", 0x22);
  fx->scfg.role = WS_ROLE_TRACKER;
  fx->cside = (side_t){.fx = fx, .client = true};
  fx->sside = (side_t){.fx = fx, .client = false};
  assert_int_equal(uv_timer_init(&fx->w.loop, &fx->t), 0);
  fx->t.data = fx;
  fx->heap_start = heap_bytes();
  for (unsigned i = 0; i < NCONN; i++) {
    assert_int_equal(wire_conn_connect(&fx->w.loop, "127.0.0.1", fx->w.port,
                                       &fx->ccfg, &k_cbs, &fx->cside,
                                       &fx->conn[fx->nconn]),
                     0);
    fx->nconn++;
  }
  wf_run(&fx->w, 10000);
  assert_int_equal(fx->closed, 2u * NCONN);
  assert_true(fx->heap_idle > fx->heap_start);
  size_t per_conn = (fx->heap_idle - fx->heap_start) / (2u * NCONN);
  print_message("# %zu heap bytes per idle connection\n", per_conn);
  assert_true(per_conn < WIRE_READ_BUF_BYTES / 4u);
  wf_finish(&fx->w);
  free(fx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idle_conns_hold_no_read_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
