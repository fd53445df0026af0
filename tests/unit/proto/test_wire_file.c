/* test_wire_file.c - payload pieces sent from a file (wire_conn_send_file)
 * between two real wire_conns on one loop. The server sends CHUNKs whose
 * payloads come from a temporary file in pieces, mixed with a piece from
 * memory and with frames sent while the payload is open; the client must
 * receive exactly the file's bytes, in order, and the frames after their
 * payload. Clear sessions (one side offers version 1) go with sendfile
 * (counted by wire_conn_file_bytes), sealed ones are read and encrypted on
 * the worker (the client opens them with the payload key and checks the
 * tag). Also: a client that stops reading (the socket fills, the queue
 * waits for it to drain), a file that ends before its piece, and a close
 * while pieces are queued.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire_fixture.h"

#define FILE_BYTES (6u * 1024u * 1024u + 12345u)
#define PIECE (256u * 1024u)
#define MEM_PIECE 5000u /* one piece from memory in the middle */
#define NPAYLOADS 2u

typedef enum {
  RUN_NORMAL,
  RUN_SLOW_READER, /* the client pauses reading for a while */
  RUN_SHORT_FILE,  /* the last piece reaches past the file's end */
  RUN_CLOSE_EARLY  /* the server closes with pieces still queued */
} run_t;

typedef struct {
  wf_loop_t w;
  run_t run;
  bool clear; /* the server offers version 1 */
  int fd;
  uint8_t *data; /* the file's bytes */
  size_t size;   /* bytes in the file */
  wire_conn_t *srv, *cli;
  /* server */
  unsigned sent_payloads;
  unsigned dones, done_ok, done_err;
  bool done_after_close;
  bool srv_closed;
  int srv_status;
  uint64_t file_bytes;
  uint64_t send_waits;
  /* client */
  uint8_t *got;
  size_t got_len;
  unsigned payloads_ended, haves, haves_early;
  bool order_ok;
  bool cli_closed;
  int cli_status;
  uv_timer_t resume;
} fx_t;

/* Pieces in one payload of len bytes, as send_payload cuts it. */
static unsigned pieces_of(size_t len) {
  unsigned n = 0;

  for (size_t off = 0; off < len; n++)
    off += off == PIECE ? MEM_PIECE : (len - off < PIECE ? len - off : PIECE);
  return n;
}

static void send_payload(fx_t *fx, wire_conn_t *c, uint32_t k, size_t len);

/* Once every piece of a payload was written, the server sends the next;
 * after the last, it says goodbye (the client closes on it). */
static void piece_done(wire_conn_t *c, void *arg, int status) {
  fx_t *fx = arg;

  fx->dones++;
  if (status == 0)
    fx->done_ok++;
  else
    fx->done_err++;
  if (fx->srv_closed)
    fx->done_after_close = true;
  if (fx->run == RUN_SHORT_FILE || status != 0)
    return;
  if (fx->done_ok == NPAYLOADS * pieces_of(fx->size))
    wire_conn_goodbye(c, WS_BYE_SHUTDOWN);
  else if (fx->done_ok == fx->sent_payloads * pieces_of(fx->size))
    send_payload(fx, c, fx->sent_payloads++, fx->size); /* this one went */
}

static void send_have(fx_t *fx, wire_conn_t *c, uint32_t chunk) {
  ws_msg_t m;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_HAVE;
  memset(m.u.have.digest, 0x11, 32);
  m.u.have.chunk = chunk;
  assert_int_equal(wire_conn_send(c, &m), 0);
  (void)fx;
}

/* Payload k: its header, file pieces (one piece from memory in the middle),
 * a HAVE while it is open (it must arrive after the payload), queued
 * behind all of its 6 MiB: file pieces hold no memory of the connection's
 * and count towards no bound on its queue (wire_conn_io.c), so the frame
 * is taken (up to session 36 it was refused, WS_ELIMIT, past
 * sendq_max_bytes). */
static void send_payload(fx_t *fx, wire_conn_t *c, uint32_t k, size_t len) {
  ws_msg_t m;
  size_t off = 0;

  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_CHUNK;
  memset(m.u.chunk.digest, 0x22, 32);
  m.u.chunk.chunk = k;
  m.u.chunk.len = (uint32_t)len;
  assert_int_equal(wire_conn_send(c, &m), 0);
  /* More than the payload still needs, or no descriptor: refused. */
  assert_int_equal(wire_conn_send_file(c, fx->fd, 0, len + 1, piece_done, fx),
                   WS_EUSAGE);
  assert_int_equal(wire_conn_send_file(c, -1, 0, 10, piece_done, fx),
                   WS_EUSAGE);
  while (off < len) {
    size_t n = len - off < PIECE ? len - off : PIECE;
    if (off == PIECE) {
      n = MEM_PIECE;
      assert_int_equal(wire_conn_send_raw(c, fx->data + off, n, piece_done, fx),
                       0);
    } else {
      assert_int_equal(wire_conn_send_file(c, fx->fd, off, n, piece_done, fx),
                       0);
    }
    off += n;
  }
  send_have(fx, c, k); /* held behind the open payload */
}

static void srv_ready(wire_conn_t *c, const wire_peer_t *p) {
  fx_t *fx = wire_conn_user(c);
  size_t len = fx->run == RUN_SHORT_FILE ? fx->size + 100 : fx->size;

  (void)p;
  assert_int_equal(wire_conn_payload_clear(c), fx->clear);
  /* No payload open yet: nothing to send a piece of. */
  assert_int_equal(wire_conn_send_file(c, fx->fd, 0, 10, piece_done, fx),
                   WS_EUSAGE);
  send_payload(fx, c, fx->sent_payloads++, len);
  if (fx->run == RUN_CLOSE_EARLY) {
    assert_true(fx->dones == 0); /* never from inside the calls */
    wire_conn_close(c, WS_ECANCELED);
  }
}

static void srv_frame(wire_conn_t *c, const ws_msg_t *m) {
  (void)c;
  (void)m;
}

static void srv_close(wire_conn_t *c, int status) {
  fx_t *fx = wire_conn_user(c);
  wire_conn_stats_t st;

  wire_conn_stats(c, &st);
  fx->send_waits = st.send_waits;
  fx->file_bytes = wire_conn_file_bytes(c);
  fx->srv_status = status;
  fx->srv_closed = true;
  wf_listen_close(&fx->w);
}

static const wire_conn_cbs_t srv_cbs = {
    .on_ready = srv_ready,
    .on_frame = srv_frame,
    .on_close = srv_close,
};

/* ---- the client ----------------------------------------------------------
 */

static void cli_ready(wire_conn_t *c, const wire_peer_t *p) {
  fx_t *fx = wire_conn_user(c);

  (void)p;
  if (fx->run == RUN_SLOW_READER)
    wire_conn_read_pause(c); /* resumed by fx->resume */
}

static void cli_resume(uv_timer_t *t) {
  fx_t *fx = t->data;

  wire_conn_read_resume(fx->cli);
}

static void cli_frame(wire_conn_t *c, const ws_msg_t *m) {
  fx_t *fx = wire_conn_user(c);

  if (m->type == WS_MSG_HAVE) {
    fx->haves++;
    /* A HAVE sent while payload k was open comes after all of it. */
    if (fx->payloads_ended != m->u.have.chunk + 1)
      fx->haves_early++;
  }
  if (m->type == WS_MSG_CHUNK && m->u.chunk.len != fx->size)
    fx->order_ok = false;
  if (m->type == WS_MSG_GOODBYE)
    wire_conn_close(c, 0);
}

static void cli_payload(wire_conn_t *c, const uint8_t *data, size_t len,
                        uint64_t off, bool last) {
  fx_t *fx = wire_conn_user(c);
  size_t base = (size_t)fx->payloads_ended * fx->size;

  if (base + off != fx->got_len || fx->got_len + len > NPAYLOADS * fx->size)
    fx->order_ok = false;
  else
    memcpy(fx->got + fx->got_len, data, len);
  fx->got_len += len;
  fx->payloads_ended += last;
}

static void cli_close(wire_conn_t *c, int status) {
  fx_t *fx = wire_conn_user(c);

  fx->cli_status = status;
  fx->cli_closed = true;
  uv_close((uv_handle_t *)&fx->resume, NULL);
}

static const wire_conn_cbs_t cli_cbs = {
    .on_ready = cli_ready,
    .on_frame = cli_frame,
    .on_payload = cli_payload,
    .on_close = cli_close,
};

static void on_conn(wf_loop_t *w, uv_stream_t *server) {
  fx_t *fx = w->arg;

  wf_accept(server, fx->clear, &srv_cbs, fx, &fx->srv);
}

/* ---- runs ----------------------------------------------------------------
 */

static void fx_run(fx_t *fx, run_t run, bool clear) {
  char path[] = "/tmp/ws-test-wire-file-XXXXXX";
  wire_conn_cfg_t cfg;

  memset(fx, 0, sizeof(*fx));
  fx->run = run;
  fx->clear = clear;
  fx->order_ok = true;
  fx->size = FILE_BYTES;
  fx->data = malloc(fx->size);
  fx->got = malloc(NPAYLOADS * fx->size);
  assert_non_null(fx->data);
  assert_non_null(fx->got);
  for (size_t i = 0; i < fx->size; i++)
    fx->data[i] = (uint8_t)(i * 131u + (i >> 12));
  fx->fd = mkstemp(path);
  assert_true(fx->fd >= 0);
  unlink(path);
  assert_int_equal(write(fx->fd, fx->data, fx->size), (ssize_t)fx->size);
  wf_init(&fx->w, on_conn, fx);
  assert_int_equal(uv_timer_init(&fx->w.loop, &fx->resume), 0);
  fx->resume.data = fx;
  if (run == RUN_SLOW_READER)
    uv_timer_start(&fx->resume, cli_resume, 500, 0);
  wf_cfg(&cfg, "cli", "", 7);
  assert_int_equal(wire_conn_connect(&fx->w.loop, "127.0.0.1", fx->w.port, &cfg,
                                     &cli_cbs, fx, &fx->cli),
                   0);
  wf_run(&fx->w, 20000);
  wf_finish(&fx->w);
  close(fx->fd);
}

static void fx_free(fx_t *fx) {
  free(fx->data);
  free(fx->got);
}

/* Every piece's done ran once, the client got both payloads byte for byte
 * and each HAVE after its payload. */
static void check_delivered(fx_t *fx) {
  unsigned pieces = NPAYLOADS * pieces_of(fx->size);

  assert_true(fx->srv_closed);
  assert_true(fx->cli_closed);
  assert_int_equal(fx->cli_status, 0);
  assert_int_equal(fx->dones, pieces);
  assert_int_equal(fx->done_ok, pieces);
  assert_false(fx->done_after_close);
  assert_true(fx->order_ok);
  assert_int_equal(fx->payloads_ended, NPAYLOADS);
  assert_int_equal(fx->got_len, NPAYLOADS * fx->size);
  for (unsigned k = 0; k < NPAYLOADS; k++)
    assert_memory_equal(fx->got + k * fx->size, fx->data, fx->size);
  assert_int_equal(fx->haves, NPAYLOADS);
  assert_int_equal(fx->haves_early, 0);
}

static void test_clear_goes_with_sendfile(void **state) {
  fx_t *fx = *state;

  fx_run(fx, RUN_NORMAL, true);
  check_delivered(fx);
  /* Every file byte went with sendfile; the memory piece did not. */
  assert_int_equal(fx->file_bytes, NPAYLOADS * (fx->size - MEM_PIECE));
  fx_free(fx);
}

static void test_sealed_is_read_and_encrypted(void **state) {
  fx_t *fx = *state;

  fx_run(fx, RUN_NORMAL, false);
  check_delivered(fx); /* opened and tag-checked by the client */
  assert_int_equal(fx->file_bytes, 0);
  fx_free(fx);
}

/* The client reads nothing for a while: the socket fills, the queue waits
 * for it to drain (at least once) and goes on where it stopped. */
static void test_slow_reader_clear(void **state) {
  fx_t *fx = *state;

  fx_run(fx, RUN_SLOW_READER, true);
  check_delivered(fx);
  assert_true(fx->send_waits > 0);
  fx_free(fx);
}

static void test_slow_reader_sealed(void **state) {
  fx_t *fx = *state;

  fx_run(fx, RUN_SLOW_READER, false);
  check_delivered(fx);
  assert_true(fx->send_waits > 0);
  fx_free(fx);
}

/* A file that ends before its piece: the connection closes with
 * WS_ETRUNCATED, never with bytes that were not in the file. */
static void check_short(fx_t *fx) {
  assert_true(fx->srv_closed);
  assert_int_equal(fx->srv_status, WS_ETRUNCATED);
  assert_true(fx->done_err > 0);
  assert_int_equal(fx->dones, fx->done_ok + fx->done_err);
  assert_false(fx->done_after_close);
  assert_int_equal(fx->payloads_ended, 0);
  assert_true(fx->cli_closed);
  assert_int_not_equal(fx->cli_status, 0);
}

static void test_short_file_clear(void **state) {
  fx_t *fx = *state;

  fx_run(fx, RUN_SHORT_FILE, true);
  check_short(fx);
  fx_free(fx);
}

static void test_short_file_sealed(void **state) {
  fx_t *fx = *state;

  fx_run(fx, RUN_SHORT_FILE, false);
  check_short(fx);
  fx_free(fx);
}

/* Closed with pieces queued (a job may be writing): each done runs once,
 * cancelled, before on_close. */
static void test_close_with_pieces_queued(void **state) {
  fx_t *fx = *state;
  unsigned pieces;

  fx_run(fx, RUN_CLOSE_EARLY, true);
  pieces = pieces_of(fx->size); /* only the first payload was queued */
  assert_true(fx->srv_closed);
  assert_int_equal(fx->srv_status, WS_ECANCELED);
  assert_int_equal(fx->dones, pieces);
  assert_true(fx->done_err > 0);
  assert_false(fx->done_after_close);
  assert_true(fx->cli_closed);
  fx_free(fx);
}

int main(void) {
  static fx_t fx;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_prestate(test_clear_goes_with_sendfile, &fx),
      cmocka_unit_test_prestate(test_sealed_is_read_and_encrypted, &fx),
      cmocka_unit_test_prestate(test_slow_reader_clear, &fx),
      cmocka_unit_test_prestate(test_slow_reader_sealed, &fx),
      cmocka_unit_test_prestate(test_short_file_clear, &fx),
      cmocka_unit_test_prestate(test_short_file_sealed, &fx),
      cmocka_unit_test_prestate(test_close_with_pieces_queued, &fx),
  };

  signal(SIGPIPE, SIG_IGN); /* sendfile to a reset socket, as p2pd does */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
