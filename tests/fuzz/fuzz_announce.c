/* fuzz_announce.c - fuzz target for the tracker's announce handling: the
 * ANNOUNCE / HAVE / LEASE_* body decoders (proto/msg_trk.c) and, for what
 * decodes, the tracker core (trk_tracker.c: state machine, leases, caps,
 * the suspect-chunk "st" path, the weighing of claims: HAVE "f" and the
 * tick), the way trk_server_msg.c drives it.
 *
 * The input is a script of records run on a fresh tracker (8 peer slots,
 * so the peer cap is reached): one op byte, then for message ops a 2-byte
 * little-endian length and that many body bytes (msgpack, as on the wire).
 * Op low 3 bits: 0 ANNOUNCE, 1 HAVE, 2 LEASE_RENEW, 3 LEASE_RELEASE,
 * 4 connect, 5 disconnect, 6 tick after (op >> 3) * 500 ms, 7 one lease
 * TTL later. The peer is slot (op >> 3) % NPEER. A fresh tracker per input
 * keeps every crash reproducible from its one file and bounds memory;
 * swarms over FUZZ_MAX_TOTAL chunks are not created (50 MB each at the
 * wire maximum). After every record each small swarm's invariants are
 * checked from scratch (as tests/unit/tracker/trk_fixture.h fx_check does)
 * and abort() on violation.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "trk_swarm-int.h"
#include "trk_tracker.h"
#include "trk_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NPEER 4u
#define FUZZ_MAX_TOTAL 65536u
#define FUZZ_MAX_RECORDS 64u
#define FUZZ_CHECK_CELLS (1u << 16) /* chunks x members checked per swarm */

#define CHECK(x)                                                               \
  do {                                                                         \
    if (!(x))                                                                  \
      abort();                                                                 \
  } while (0)

typedef struct {
  trk_tracker_t *t;
  trk_peer_id_t id[NPEER];
  int connected[NPEER];
  uint64_t now;
} fz_t;

/* Per chunk: availability, lease exclusivity, suspect and need marks. */
static void check_chunk(const trk_swarm_t *s, uint32_t c, uint32_t *need,
                        uint32_t *suspect) {
  uint32_t a = 0, holders = 0;
  for (uint32_t i = 0; i < s->nmembers; i++) {
    const trk_member_t *m = s->members[i];
    /* avail counts the claims of counted (believed) members only. */
    a += (uint32_t)(m->counted && trk_bits_get(m->have, c));
    for (uint32_t k = 0; k < m->nleases; k++)
      if (m->leases[k].chunk == c) {
        holders++;
        CHECK(s->holder[c] == m && !trk_bits_get(m->have, c));
      }
  }
  CHECK(a == s->avail[c] && holders <= 1);
  CHECK(holders != 0 || s->holder[c] == NULL);
  if (a > 0 && !trk_bits_get(s->suspect, c))
    CHECK(s->holder[c] == NULL);
  if (trk_bits_get(s->suspect, c)) {
    CHECK(a > 0 && !trk_bits_get(s->vouched, c));
    (*suspect)++;
  }
  int nb = a == 0 && s->holder[c] == NULL;
  CHECK(nb == trk_bits_get(s->need, c));
  CHECK(!nb || c >= s->need_lo);
  *need += (uint32_t)nb;
}

static void check_swarm(const trk_swarm_t *s) {
  uint32_t need = 0, held = 0, leased = 0, complete = 0, down = 0;
  uint32_t suspect = 0, uncounted = 0;
  if ((uint64_t)s->total * (s->nmembers + 1) > FUZZ_CHECK_CELLS)
    return;
  for (uint32_t c = 0; c < s->total; c++) {
    check_chunk(s, c, &need, &suspect);
    held += s->avail[c] > 0;
    leased += s->holder[c] != NULL;
  }
  for (uint32_t i = 0; i < s->nmembers; i++) {
    const trk_member_t *m = s->members[i];
    CHECK(m->idx == i && m->nleases <= TRK_LEASES_PER_PEER_MAX);
    uncounted += !m->counted;
    complete += m->have_count == s->total;
    down += m->role == TRK_ROLE_LEECH && m->have_count < s->total;
  }
  CHECK(need == s->need_count && suspect == s->suspect_count);
  CHECK(uncounted == s->uncounted);
  CHECK(held == s->held_chunks && leased == s->leased);
  CHECK(complete == s->complete && down == s->downloaders);
}

static void check_reply(const trk_reply_t *r) {
  CHECK(r->npeers <= TRK_REPLY_PEERS_MAX);
  CHECK(r->nleases <= TRK_LEASES_PER_PEER_MAX && r->ngranted <= r->nleases);
  /* streams is the swarm's cap (trk_lease_cap), not bounded by nleases. */
  CHECK((r->nleases > 0 || r->streams == 0) && r->nwanted <= TRK_MAX_WANTED);
}

static void check_all(const fz_t *f) {
  trk_tracker_stats_t st;
  trk_tracker_stats(f->t, &st);
  CHECK(st.peers <= NPEER && st.swarms == trk_tracker_swarm_count(f->t));
  for (uint32_t i = 0; i < trk_tracker_swarm_count(f->t); i++)
    check_swarm(trk_tracker_swarm_at(f->t, i));
}

/* Peer p's address: peers 0 and 1 differ (confirmations count), 2 and 3
 * share 0's (they do not). */
static const char *addr_of(unsigned p) {
  return p == 1 ? "10.0.0.2" : "10.0.0.1";
}

/* Mirrors trk_server_msg.c on_announce. */
static void on_announce(fz_t *f, unsigned p, const ws_announce_t *a) {
  const char *addr = addr_of(p);
  char node[16] = "node-0";
  trk_announce_t ta;
  trk_reply_t r;
  node[5] = (char)('0' + p);
  trk_peer_info_t info = {.node_id = node,
                          .addr = addr,
                          .port = a->port != 0 ? a->port : 7000,
                          .zone = a->zone};
  if (a->total_chunks > FUZZ_MAX_TOTAL ||
      trk_tracker_peer_update(f->t, f->id[p], &info) < 0)
    return;
  trk_announce_from_wire(a, &ta);
  if (trk_tracker_announce(f->t, f->id[p], &ta, f->now, &r) == 0)
    check_reply(&r);
  else
    CHECK(r.nleases == 0 && r.npeers == 0);
}

/* Mirrors trk_server_msg.c on_lease. */
static void on_lease(fz_t *f, unsigned p, uint8_t type,
                     const ws_lease_upd_t *u) {
  trk_reply_t r;
  ws_hash_t d;
  memcpy(d.b, u->digest, sizeof(d.b));
  if (trk_tracker_have(f->t, f->id[p], &d, u->done, u->n_done, f->now, NULL) <
      0)
    return;
  for (uint32_t i = 0; i < u->n_chunks; i++) {
    /* Errors (not ours, not leased) are answers too: nothing to check. */
    int rc =
        type == WS_MSG_LEASE_RENEW
            ? trk_tracker_renew(f->t, f->id[p], &d, u->chunks[i], f->now)
            : trk_tracker_release(f->t, f->id[p], &d, u->chunks[i], f->now);
    (void)rc;
  }
  if (trk_tracker_have(f->t, f->id[p], &d, NULL, 0, f->now, &r) == 0)
    check_reply(&r);
}

static void on_msg(fz_t *f, unsigned p, uint8_t type, const uint8_t *body,
                   uint32_t len) {
  ws_frame_t fr;
  ws_msg_t m;
  trk_reply_t r;
  ws_hash_t d;
  memset(&fr, 0, sizeof(fr));
  fr.version = 1;
  fr.type = type;
  fr.body = body;
  fr.body_len = len;
  if (ws_msg_decode(&fr, &m) != 0)
    return;
  if (f->connected[p]) {
    if (type == WS_MSG_ANNOUNCE) {
      on_announce(f, p, &m.u.announce);
    } else if (type == WS_MSG_HAVE) {
      memcpy(d.b, m.u.have.digest, sizeof(d.b));
      /* Mirrors trk_server_msg.c on_have: "f" first. */
      if (m.u.have.from[0] != '\0')
        (void)trk_tracker_served(f->t, f->id[p], &d, m.u.have.from, f->now);
      if (trk_tracker_have(f->t, f->id[p], &d, &m.u.have.chunk, 1, f->now,
                           &r) == 0)
        check_reply(&r);
    } else {
      on_lease(f, p, type, &m.u.lease);
    }
  }
  ws_msg_free(&m);
}

static void on_connect(fz_t *f, unsigned p) {
  char node[16] = "node-0";
  trk_peer_id_t replaced = 0;
  node[5] = (char)('0' + p);
  trk_peer_info_t info = {
      .node_id = node, .addr = addr_of(p), .port = 7000, .zone = "z"};
  if (trk_tracker_connect(f->t, &info, f->now, &f->id[p], &replaced) == 0)
    f->connected[p] = 1;
  for (unsigned i = 0; i < NPEER; i++)
    if (replaced != 0 && i != p && f->connected[i] && f->id[i] == replaced)
      f->connected[i] = 0;
}

static void run_op(fz_t *f, uint8_t op, const uint8_t *body, uint32_t len) {
  static const uint8_t types[4] = {WS_MSG_ANNOUNCE, WS_MSG_HAVE,
                                   WS_MSG_LEASE_RENEW, WS_MSG_LEASE_RELEASE};
  unsigned p = (op >> 3) % NPEER;
  switch (op & 7) {
  case 4:
    if (!f->connected[p])
      on_connect(f, p);
    break;
  case 5:
    if (f->connected[p])
      trk_tracker_disconnect(f->t, f->id[p]);
    f->connected[p] = 0;
    break;
  case 6:
    f->now += (uint64_t)(op >> 3) * 500u;
    (void)trk_tracker_tick(f->t, f->now);
    break;
  case 7:
    f->now += TRK_LEASE_TTL_MS + 1u;
    break;
  default:
    on_msg(f, p, types[op & 3], body, len);
    break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_t f;
  size_t pos = 0;
  memset(&f, 0, sizeof(f));
  f.now = 1000000;
  f.t = trk_tracker_new(NPEER * 2, 1, f.now);
  if (f.t == NULL)
    abort();
  /* Peers 0 and 1 start connected so short inputs reach the core. */
  on_connect(&f, 0);
  on_connect(&f, 1);
  for (unsigned n = 0; pos < size && n < FUZZ_MAX_RECORDS; n++) {
    uint8_t op = data[pos++];
    uint32_t len = 0;
    if ((op & 7) < 4) {
      if (size - pos < 2)
        break;
      len = (uint32_t)data[pos] | (uint32_t)data[pos + 1] << 8;
      pos += 2;
      if (len > size - pos)
        len = (uint32_t)(size - pos);
    }
    run_op(&f, op, data + pos, len);
    pos += len;
    check_all(&f);
  }
  trk_tracker_free(f.t);
  return 0;
}
