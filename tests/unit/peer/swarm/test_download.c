/* test_download.c - chunks downloaded from neighbours (swarm/download.c on
 * the fetch layer's inbound machine) on a real loop against a real store:
 * the picker asks a neighbour over a real wire_conn pair, the chunk's bytes
 * go through peer_download_* as the neighbour's connection hands them over,
 * and the outcome reaches the file, the ban list (swarm/bans.c) and the
 * listeners. A verified chunk is DONE from a peer; one that fails its hash
 * bans its sender (by node id and host:port) and goes back to MISSING, and
 * the picker asks another neighbour; a lost connection bans nobody; in the
 * endgame the first sender wins and the duplicate is canceled on the wire.
 * A chunk in pieces that is still arriving at its sender (HAVE "p") is not
 * held to the progress deadline until the sender holds it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/download.h"
#include "swarm_fixture.h"
#include "wire_conn.h"

static const ffx_spec_t spec[] = {{"a.bin", 2 * FFX_CS, 21}};

typedef struct {
  sfx_t *s;
  peer_downloads_t dls;
  int reported, woken, bans;
  char ban_node[WS_NODE_ID_MAX + 1];
  char ban_host[64];
  uint16_t ban_port;
} dl_t;

/* What the swarm does with a sender whose chunk failed its hash. */
static void on_ban(void *arg, const char *node_id, const char *host,
                   uint16_t port, const char *why) {
  dl_t *d = arg;
  (void)why;
  d->bans++;
  snprintf(d->ban_node, sizeof(d->ban_node), "%s", node_id);
  snprintf(d->ban_host, sizeof(d->ban_host), "%s", host);
  d->ban_port = port;
  (void)peer_bans_add(&d->s->bans, uv_now(&d->s->fx.loop), node_id, host, port);
}

static void on_reported(void *arg) {
  dl_t *d = arg;
  d->reported++;
}

static void on_wake(void *arg) {
  dl_t *d = arg;
  d->woken = 1;
}

static dl_t *dl_setup(void) {
  dl_t *d = calloc(1, sizeof(*d));
  assert_non_null(d);
  d->s = sfx_setup(spec, 1);
  d->dls.ctx = &d->s->fx.ctx;
  d->dls.arg = d;
  d->dls.ban = on_ban;
  d->dls.reported = on_reported;
  d->s->set.downloads = &d->dls;
  return d;
}

static void dl_teardown(dl_t *d) {
  assert_int_equal(d->dls.alive, 0);
  sfx_teardown(d->s);
  free(d);
}

static void dl_wait_wake(dl_t *d) {
  d->woken = 0;
  ffx_run_until(&d->s->fx, &d->woken);
}

/* nb's request for global chunk g: its slot. */
static uint32_t slot_of(const sfx_nbr_t *nb, uint32_t g) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (nb->n.reqs[i].used && nb->n.reqs[i].g == g)
      return i;
  }
  fail_msg("%s has no request for chunk %u", nb->n.node_id, g);
  return 0;
}

/* nb answers its request for chunk g with the chunk's bytes, one flipped
 * when corrupt, only the first `cut` bytes and then status when cut > 0:
 * what the neighbour's connection does on a CHUNK header, its payload and
 * its end. Runs the loop until the download reported. */
static void dl_receive(dl_t *d, sfx_nbr_t *nb, uint32_t g, bool corrupt,
                       size_t cut, int status) {
  uint32_t i = slot_of(nb, g);
  peer_file_t *file = nb->n.reqs[i].file;
  uint32_t j = nb->n.reqs[i].j;
  size_t len = peer_file_chunk_len(file, j);
  uint8_t *bytes = malloc(len);
  assert_non_null(bytes);
  memcpy(bytes, d->s->fx.data[0] + (size_t)j * FFX_CS, len);
  if (corrupt)
    bytes[len / 2] ^= 0x01;
  peer_download_t *dl = peer_download_new(&d->dls, file, j, nb->n.node_id,
                                          nb->n.host, nb->n.port, on_wake, d);
  assert_non_null(dl);
  peer_request_drop(&nb->n, i, 0); /* rx_busy keeps the chunk INFLIGHT */
  assert_int_equal(file->chunk_state[j], PEER_CHUNK_INFLIGHT);
  peer_requests_cancel_others(&d->s->set, &nb->n, file, j);
  if (peer_download_reserve(dl) == PEER_INBOUND_PAUSE)
    dl_wait_wake(d);
  size_t end = cut > 0 ? cut : len;
  for (size_t off = 0; off < end; off += WIRE_READ_BUF_BYTES) {
    size_t n =
        end - off < WIRE_READ_BUF_BYTES ? end - off : WIRE_READ_BUF_BYTES;
    int rc = peer_download_data(dl, bytes + off, n);
    assert_true(rc == 0 || rc == PEER_INBOUND_PAUSE);
    if (rc == PEER_INBOUND_PAUSE)
      dl_wait_wake(d);
  }
  int before = d->reported;
  peer_download_end(dl, cut > 0 ? status : 0);
  while (d->reported == before)
    uv_run(&d->s->fx.loop, UV_RUN_ONCE);
  free(bytes);
}

static void test_verified_chunk_done_from_peer(void **state) {
  (void)state;
  dl_t *d = dl_setup();
  sfx_t *s = d->s;
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  uint32_t all[] = {0, 1};
  sfx_holds(a, all, 2);
  peer_picker_fill(&s->picker, &a->n);
  assert_int_equal(a->n.nreqs, 2);
  sfx_wait_requests(a, 2);
  dl_receive(d, a, 1, false, 0, 0);
  peer_file_t *f = s->files[0];
  assert_int_equal(f->chunk_state[1], PEER_CHUNK_DONE);
  assert_int_equal(f->rx_busy[1], 0);
  assert_int_equal(f->nreq[1], 0);
  assert_int_equal(f->bytes_from_peers, FFX_CS);
  assert_true(ws_store_file_has_chunk(f->pf, 1));
  assert_non_null(strstr(s->fx.log, "done:a.bin:1:peer"));
  assert_int_equal(s->fx.ctx.counters.chunks_from_peers, 1);
  assert_int_equal(d->bans, 0);
  assert_int_equal(peer_bans_count(&s->bans, uv_now(&s->fx.loop)), 0);
  assert_int_equal(a->n.nreqs, 1); /* chunk 0 still asked */
  dl_teardown(d);
}

static void test_mismatch_bans_sender_and_refetches(void **state) {
  (void)state;
  dl_t *d = dl_setup();
  sfx_t *s = d->s;
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  uint32_t all[] = {0, 1};
  sfx_holds(a, all, 2);
  peer_picker_fill(&s->picker, &a->n);
  sfx_wait_requests(a, 2);
  dl_receive(d, a, 1, true, 0, 0);
  peer_file_t *f = s->files[0];
  uint64_t now = uv_now(&s->fx.loop);
  /* The sender is banned, by node id and by its listener, both at the
   * address the bad bytes came from. */
  assert_int_equal(d->bans, 1);
  assert_string_equal(d->ban_node, "nbrA");
  assert_string_equal(d->ban_host, "127.0.0.1");
  assert_int_equal(d->ban_port, 7001);
  assert_true(peer_bans_check(&s->bans, now, "nbrA", "127.0.0.1", 0));
  assert_true(peer_bans_check(&s->bans, now, "new-id", "127.0.0.1", 7001));
  assert_false(peer_bans_check(&s->bans, now, "nbrB", "127.0.0.1", 7002));
  /* The id elsewhere is another node (the sender may have claimed it):
   * not banned, nor is anything without an address. */
  assert_false(peer_bans_check(&s->bans, now, "nbrA", "127.0.0.2", 7001));
  assert_false(peer_bans_check(&s->bans, now, "nbrA", NULL, 0));
  /* Nothing committed; the chunk is MISSING again, one try counted. */
  assert_int_equal(f->state, PEER_FILE_FETCHING);
  assert_int_equal(f->chunk_state[1], PEER_CHUNK_MISSING);
  assert_int_equal(f->chunk_tries[1], 1);
  assert_int_equal(f->rx_busy[1], 0);
  assert_false(ws_store_file_has_chunk(f->pf, 1));
  assert_null(strstr(s->fx.log, "done:a.bin:1"));
  assert_int_equal(s->fx.ctx.counters.chunks_from_peers, 0);
  /* Another neighbour that has it is asked for it. */
  sfx_nbr_t *b = sfx_neighbor(s, "nbrB", 7002);
  sfx_holds(b, all, 2);
  peer_picker_fill(&s->picker, &b->n);
  uint32_t g[PEER_PIPELINE_DEPTH];
  bool dup[PEER_PIPELINE_DEPTH];
  assert_int_equal(sfx_requests(b, g, dup), 2);
  assert_int_equal(g[0], 1); /* fresh (MISSING) before the duplicate */
  assert_false(dup[0]);
  assert_true(dup[1]);
  dl_receive(d, b, 1, false, 0, 0);
  assert_int_equal(f->chunk_state[1], PEER_CHUNK_DONE);
  assert_int_equal(d->bans, 1);
  dl_teardown(d);
}

static void test_lost_connection_bans_nobody(void **state) {
  (void)state;
  dl_t *d = dl_setup();
  sfx_t *s = d->s;
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  uint32_t all[] = {0, 1};
  sfx_holds(a, all, 2);
  peer_picker_fill(&s->picker, &a->n);
  sfx_wait_requests(a, 2);
  dl_receive(d, a, 0, false, FFX_CS / 2, WS_ECANCELED);
  peer_file_t *f = s->files[0];
  assert_int_equal(d->bans, 0);
  assert_int_equal(f->chunk_state[0], PEER_CHUNK_MISSING);
  assert_int_equal(f->chunk_tries[0], 0);
  assert_int_equal(s->fx.ctx.counters.chunks_from_peers, 0);
  /* Asked again. */
  peer_picker_fill(&s->picker, &a->n);
  assert_int_equal(a->n.reqs[slot_of(a, 0)].dup, false);
  dl_teardown(d);
}

/* nb's far end received CANCEL for request req_id of chunk g. */
static bool saw_cancel(const sfx_nbr_t *nb, uint32_t g, uint32_t req_id) {
  for (unsigned i = 0; i < nb->nseen; i++) {
    if (nb->seen[i].type == WS_MSG_CANCEL && nb->seen[i].chunk == g &&
        nb->seen[i].req_id == req_id)
      return true;
  }
  return false;
}

static void test_endgame_first_sender_wins(void **state) {
  (void)state;
  dl_t *d = dl_setup();
  sfx_t *s = d->s;
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  sfx_nbr_t *b = sfx_neighbor(s, "nbrB", 7002);
  uint32_t all[] = {0, 1};
  sfx_holds(a, all, 2);
  sfx_holds(b, all, 2);
  peer_picker_fill(&s->picker, &a->n);
  peer_picker_fill(&s->picker, &b->n);
  assert_int_equal(a->n.nreqs, 2);
  assert_int_equal(b->n.nreqs, 2); /* both duplicates */
  sfx_wait_requests(a, 2);
  uint32_t a_req0 = a->n.reqs[slot_of(a, 0)].req_id;
  /* b's CHUNK for 0 arrives first: a's request for it is canceled. */
  dl_receive(d, b, 0, false, 0, 0);
  peer_file_t *f = s->files[0];
  assert_int_equal(f->chunk_state[0], PEER_CHUNK_DONE);
  assert_int_equal(f->nreq[0], 0);
  assert_int_equal(a->n.nreqs, 1);
  uint64_t start = uv_hrtime();
  while (!saw_cancel(a, 0, a_req0)) {
    if (uv_hrtime() - start > 10ull * 1000 * 1000 * 1000)
      fail_msg("no CANCEL reached nbrA");
    uv_run(&s->fx.loop, UV_RUN_ONCE);
  }
  assert_int_equal(d->bans, 0);
  dl_teardown(d);
}

static void test_live_at_sender_waits_for_its_source(void **state) {
  (void)state;
  dl_t *d = dl_setup();
  sfx_t *s = d->s;
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  const uint8_t *dig = s->rel->digest.b;
  peer_file_t *f = s->files[0];
  /* a says chunk 0 is arriving there (HAVE "p"); we take it in pieces,
   * half of it so far, at the pace of a's own source. */
  ws_have_t h = {.chunk = 0, .live = true};
  memcpy(h.digest, dig, WS_PROTO_DIGEST_LEN);
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(&a->n, dig);
  assert_non_null(r);
  peer_neighbor_rel_have(r, &h);
  peer_file_chunk_take(f, 0);
  peer_download_t *dl = peer_download_new(&d->dls, f, 0, a->n.node_id,
                                          a->n.host, a->n.port, on_wake, d);
  assert_non_null(dl);
  peer_pieces_t *pc = peer_pieces_free(&a->n);
  assert_non_null(pc);
  *pc = (peer_pieces_t){.open = true,
                        .g = 0,
                        .req_id = 1,
                        .len = FFX_CS,
                        .got = FFX_CS / 2,
                        .dl = dl};
  memcpy(pc->digest, dig, WS_PROTO_DIGEST_LEN);
  uint64_t t0 = uv_now(&s->fx.loop);
  peer_rx_start(&a->n, pc);
  /* Far past the floor deadline (3 s + 1 MiB at 128 KiB/s), a piece now
   * and then: still open, no miss, not a rate sample. */
  uint64_t t1 = t0 + 60 * 1000;
  pc->last_ms = t1;
  peer_neighbor_tick(&a->n, t1);
  assert_true(pc->open);
  assert_true(pc->late);
  assert_int_equal(s->fx.ctx.counters.peer_deadline_misses, 0);
  assert_int_equal(a->n.busy_until_ms, 0);
  /* Held there now (plain HAVE): the deadline runs from then. */
  h.live = false;
  peer_neighbor_rel_have(r, &h);
  peer_neighbor_tick(&a->n, t1 + PEER_CHUNK_GRACE_MS);
  assert_true(pc->open);
  pc->last_ms = t1 + 20 * 1000;
  peer_neighbor_tick(&a->n, t1 + 20 * 1000);
  assert_false(pc->open); /* cut: asked elsewhere */
  assert_int_equal(s->fx.ctx.counters.peer_deadline_misses, 1);
  while (d->reported == 0)
    uv_run(&s->fx.loop, UV_RUN_ONCE);
  assert_int_equal(f->chunk_state[0], PEER_CHUNK_MISSING);
  dl_teardown(d);
}

/* One that says "p" and never HAVE is held to the deadline once
 * PEER_CHUNK_LIVE_WAIT_MS passed since its first piece. */
static void test_live_wait_is_bounded(void **state) {
  (void)state;
  dl_t *d = dl_setup();
  sfx_t *s = d->s;
  sfx_nbr_t *a = sfx_neighbor(s, "nbrA", 7001);
  const uint8_t *dig = s->rel->digest.b;
  peer_file_t *f = s->files[0];
  ws_have_t h = {.chunk = 0, .live = true};
  memcpy(h.digest, dig, WS_PROTO_DIGEST_LEN);
  peer_neighbor_rel_have(peer_neighbor_rel_find(&a->n, dig), &h);
  peer_file_chunk_take(f, 0);
  peer_download_t *dl = peer_download_new(&d->dls, f, 0, a->n.node_id,
                                          a->n.host, a->n.port, on_wake, d);
  assert_non_null(dl);
  peer_pieces_t *pc = peer_pieces_free(&a->n);
  *pc = (peer_pieces_t){
      .open = true, .g = 0, .req_id = 1, .len = FFX_CS, .got = 1, .dl = dl};
  memcpy(pc->digest, dig, WS_PROTO_DIGEST_LEN);
  peer_rx_start(&a->n, pc);
  uint64_t t = uv_now(&s->fx.loop);
  for (uint64_t k = 1; k * 10000 <= PEER_CHUNK_LIVE_WAIT_MS; k++) {
    pc->last_ms = t + k * 10000; /* a byte now and then */
    peer_neighbor_tick(&a->n, t + k * 10000);
    assert_true(pc->open);
  }
  uint64_t end = t + PEER_CHUNK_LIVE_WAIT_MS + 20 * 1000;
  pc->last_ms = end;
  peer_neighbor_tick(&a->n, end);
  assert_false(pc->open);
  assert_int_equal(s->fx.ctx.counters.peer_deadline_misses, 1);
  while (d->reported == 0)
    uv_run(&s->fx.loop, UV_RUN_ONCE);
  dl_teardown(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_verified_chunk_done_from_peer),
      cmocka_unit_test(test_mismatch_bans_sender_and_refetches),
      cmocka_unit_test(test_lost_connection_bans_nobody),
      cmocka_unit_test(test_endgame_first_sender_wins),
      cmocka_unit_test(test_live_at_sender_waits_for_its_source),
      cmocka_unit_test(test_live_wait_is_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
