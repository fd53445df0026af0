/* swarm_fixture.c - see swarm_fixture.h. Test process only. */
#include "swarm_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the neighbour's far end --------------------------------------------- */

static void remote_on_ready(wire_conn_t *c, const wire_peer_t *peer) {
  (void)c;
  (void)peer;
}

static void remote_on_frame(wire_conn_t *c, const ws_msg_t *m) {
  sfx_nbr_t *nb = wire_conn_user(c);
  if (m->type == WS_MSG_REQUEST)
    nb->nrequests++;
  if (m->type == WS_MSG_BITFIELD)
    nb->nbitfields++;
  if (nb->nseen == SFX_SEEN_MAX)
    return;
  sfx_seen_t *e = &nb->seen[nb->nseen++];
  e->type = m->type;
  if (m->type == WS_MSG_REQUEST || m->type == WS_MSG_CANCEL) {
    e->chunk = m->u.request.chunk;
    e->req_id = m->u.request.req_id;
  }
}

static void remote_on_close(wire_conn_t *c, int status) {
  sfx_nbr_t *nb = wire_conn_user(c);
  (void)status;
  nb->remote_closed = true;
  nb->remote = NULL;
}

static const wire_conn_cbs_t remote_cbs = {.on_ready = remote_on_ready,
                                           .on_frame = remote_on_frame,
                                           .on_close = remote_on_close};

/* ---- our end ------------------------------------------------------------- */

static void local_on_ready(wire_conn_t *c, const wire_peer_t *peer) {
  sfx_nbr_t *nb = wire_conn_user(c);
  peer_neighbor_t *n = &nb->n;
  snprintf(n->node_id, sizeof(n->node_id), "%s", peer->node_id);
  snprintf(n->host, sizeof(n->host), "%s", peer->addr);
  n->port = peer->listen_port;
  peer_neighbor_set_state(n, PEER_NEIGHBOR_READY);
}

static void local_on_frame(wire_conn_t *c, const ws_msg_t *m) {
  (void)c;
  (void)m; /* the far end sends nothing */
}

static void local_on_close(wire_conn_t *c, int status) {
  sfx_nbr_t *nb = wire_conn_user(c);
  (void)status;
  nb->local_closed = true;
  nb->n.c = NULL;
}

static const wire_conn_cbs_t local_cbs = {.on_ready = local_on_ready,
                                          .on_frame = local_on_frame,
                                          .on_close = local_on_close};

static void on_connection(uv_stream_t *server, int status) {
  sfx_t *s = server->data;
  sfx_nbr_t *nb = s->accepting;
  assert_int_equal(status, 0);
  assert_non_null(nb);
  assert_int_equal(
      wire_conn_accept(server, &nb->rcfg, &remote_cbs, nb, &nb->remote), 0);
  s->accepting = NULL;
}

/* ---- setup --------------------------------------------------------------- */

static void sfx_listen(sfx_t *s) {
  struct sockaddr_in a;
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  assert_int_equal(uv_tcp_init(&s->fx.loop, &s->lsn), 0);
  s->lsn.data = s;
  assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &a), 0);
  assert_int_equal(uv_tcp_bind(&s->lsn, (struct sockaddr *)&a, 0), 0);
  assert_int_equal(uv_listen((uv_stream_t *)&s->lsn, 8, on_connection), 0);
  assert_int_equal(uv_tcp_getsockname(&s->lsn, (struct sockaddr *)&ss, &len),
                   0);
  s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void sfx_cfg(wire_conn_cfg_t *cfg, const char *node, uint16_t port) {
  wire_conn_cfg_init(cfg);
  snprintf(cfg->node_id, sizeof(cfg->node_id), "%s", node);
  snprintf(cfg->zone, sizeof(cfg->zone), "z1");
  memset(cfg->key, 0x5a, sizeof(cfg->key));
  cfg->listen_port = port;
}

sfx_t *sfx_setup(const ffx_spec_t *spec, uint32_t n) {
  sfx_t *s = calloc(1, sizeof(*s));
  assert_non_null(s);
  ffx_setup(&s->fx, 64 * 1024, 16);
  ffx_manifest(&s->fx, spec, n, 0);
  s->nfiles = n;
  for (uint32_t k = 0; k < n; k++) {
    s->files[k] = ffx_open(&s->fx, k);
    assert_int_equal(s->files[k]->state, PEER_FILE_FETCHING);
  }
  peer_ctx_t *ctx = &s->fx.ctx;
  /* A real fetcher with no transfer slot: what the gate and the records
   * ask of it (streaming, live) is real, and it never dials S3. */
  assert_int_equal(peer_origin_new(ctx, s->fx.files, 0, &s->origin), 0);
  s->set.ctx = ctx;
  s->set.bans = &s->bans;
  s->set.rels = &s->rels;
  s->set.picker = &s->picker;
  s->rels.ctx = ctx;
  s->rels.nbrs = &s->set;
  s->rels.origin = s->origin;
  s->tracker.configured = true;
  s->tracker.up = true;
  s->tracker.down_ms = uv_now(&s->fx.loop);
  s->fx.cfg.node_id = (char *)"us"; /* the picker's rendezvous key */
  peer_picker_init(&s->picker, ctx, &s->set, &s->rels, s->origin, &s->tracker);
  sfx_cfg(&s->ours, "us", 7000);
  sfx_listen(s);
  ws_manifest_t *m = s->fx.m;
  assert_int_equal(swarm_rel_fetching(&s->rels, &m->digest, "s3://bucket/m", m,
                                      s->fx.mbytes, strlen(s->fx.mbytes),
                                      s->files, n),
                   1);
  s->rel = swarm_rel_find(&s->rels, m->digest.b);
  assert_non_null(s->rel);
  assert_int_equal(s->rel->state, PEER_SWARM_REL_FETCHING);
  return s;
}

sfx_nbr_t *sfx_neighbor(sfx_t *s, const char *node_id, uint16_t listen_port) {
  assert_true(s->nnbrs < SFX_NBRS_MAX);
  sfx_nbr_t *nb = &s->nbrs[s->nnbrs++];
  peer_neighbor_t *n = &nb->n;
  memset(nb, 0, sizeof(*nb));
  nb->sfx = s;
  nb->used = true;
  sfx_cfg(&nb->rcfg, node_id, listen_port);
  n->set = &s->set;
  n->id = ++s->set.next_id;
  n->initiator = true;
  n->state = PEER_NEIGHBOR_CONNECTING;
  snprintf(n->expect, sizeof(n->expect), "%s", node_id);
  /* Linked first, as the set does: the picker walks the list. */
  n->next = s->set.head;
  if (s->set.head != NULL)
    s->set.head->prev = n;
  s->set.head = n;
  s->set.count++;
  s->accepting = nb;
  assert_int_equal(wire_conn_connect(&s->fx.loop, "127.0.0.1", s->port,
                                     &s->ours, &local_cbs, nb, &n->c),
                   0);
  uint64_t start = uv_hrtime();
  while (n->state != PEER_NEIGHBOR_READY || nb->remote == NULL ||
         !wire_conn_is_open(nb->remote)) {
    if (uv_hrtime() - start > 10ull * 1000 * 1000 * 1000)
      fail_msg("neighbour %s: no handshake", node_id);
    uv_run(&s->fx.loop, UV_RUN_ONCE);
  }
  assert_string_equal(n->node_id, node_id);
  /* What the swarm does for a neighbour that became ready. */
  swarm_rels_announce_to(&s->rels, n);
  return nb;
}

void sfx_holds(sfx_nbr_t *nb, const uint32_t *chunks, uint32_t n) {
  peer_swarm_rel_t *rel = nb->sfx->rel;
  ws_bitfield_t bf;
  assert_int_equal(ws_bitfield_init(&bf, rel->total), 0);
  for (uint32_t i = 0; i < n; i++)
    ws_bitfield_set(&bf, chunks[i]);
  ws_bitfield_msg_t b = {.total_chunks = rel->total, .bits = bf.bits};
  memcpy(b.digest, rel->digest.b, WS_PROTO_DIGEST_LEN);
  peer_neighbor_rel_t *r = peer_neighbor_rel_get(&nb->n, rel->digest.b);
  assert_non_null(r);
  assert_int_equal(peer_neighbor_rel_set(&nb->n, r, &b), 0);
  ws_bitfield_free(&bf);
}

void sfx_have(sfx_nbr_t *nb, uint32_t g) {
  peer_swarm_rel_t *rel = nb->sfx->rel;
  ws_have_t h = {.chunk = g};
  memcpy(h.digest, rel->digest.b, WS_PROTO_DIGEST_LEN);
  peer_neighbor_rel_t *r = peer_neighbor_rel_find(&nb->n, rel->digest.b);
  assert_non_null(r);
  peer_neighbor_rel_have(r, &h);
}

peer_file_t *sfx_file(sfx_t *s, const char *name, uint32_t *k) {
  for (uint32_t i = 0; i < s->fx.m->nfiles; i++) {
    if (strcmp(s->fx.m->files[i].name, name) == 0) {
      if (k != NULL)
        *k = i;
      return s->files[i];
    }
  }
  fail_msg("no file %s", name);
  return NULL;
}

uint32_t sfx_global(sfx_t *s, const char *name, uint32_t j) {
  uint32_t k = 0; /* fail_msg() does not return, but is not marked so */
  (void)sfx_file(s, name, &k);
  return (uint32_t)s->fx.m->files[k].first_chunk + j;
}

void sfx_wait_requests(sfx_nbr_t *nb, unsigned requests) {
  uint64_t start = uv_hrtime();
  while (nb->nrequests < requests) {
    if (uv_hrtime() - start > 10ull * 1000 * 1000 * 1000)
      fail_msg("%s got %u requests, not %u", nb->rcfg.node_id, nb->nrequests,
               requests);
    uv_run(&nb->sfx->fx.loop, UV_RUN_ONCE);
  }
}

void sfx_settle(sfx_t *s) {
  for (int i = 0; i < 20; i++) {
    uv_run(&s->fx.loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
}

uint32_t sfx_requests(const sfx_nbr_t *nb, uint32_t *g, bool *dup) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (!nb->n.reqs[i].used)
      continue;
    g[k] = nb->n.reqs[i].g;
    if (dup != NULL)
      dup[k] = nb->n.reqs[i].dup;
    k++;
  }
  assert_int_equal(k, nb->n.nreqs);
  return k;
}

void sfx_drop_all(sfx_nbr_t *nb) {
  for (uint32_t i = 0; i < PEER_PIPELINE_DEPTH; i++) {
    if (nb->n.reqs[i].used)
      peer_request_drop(&nb->n, i, WS_ECANCELED);
  }
}

/* ---- teardown ------------------------------------------------------------ */

void sfx_teardown(sfx_t *s) {
  /* The record goes first: it cancels every request made for it. */
  swarm_rel_free(s->rel);
  for (unsigned i = 0; i < s->nnbrs; i++) {
    sfx_nbr_t *nb = &s->nbrs[i];
    assert_int_equal(nb->n.nreqs, 0);
    if (nb->n.c != NULL)
      wire_conn_close(nb->n.c, 0);
    if (nb->remote != NULL)
      wire_conn_close(nb->remote, 0);
  }
  uv_close((uv_handle_t *)&s->lsn, NULL);
  uint64_t start = uv_hrtime();
  for (unsigned i = 0; i < s->nnbrs; i++) {
    sfx_nbr_t *nb = &s->nbrs[i];
    while (!nb->local_closed || !nb->remote_closed) {
      if (uv_hrtime() - start > 10ull * 1000 * 1000 * 1000)
        fail_msg("connections did not close");
      uv_run(&s->fx.loop, UV_RUN_ONCE);
    }
    for (uint32_t r = 0; r < nb->n.nrels; r++)
      ws_bitfield_free(&nb->n.rels[r].have);
  }
  uv_run(&s->fx.loop, UV_RUN_NOWAIT);
  peer_origin_free(s->origin);
  ffx_teardown(&s->fx);
  free(s);
}
