/* sim.h - ws-sim, a discrete-event model of one release's swarm
 * (docs/scale.md).
 *
 * N nodes fetch one release of C chunks. Each node has an uplink and a
 * downlink of a given rate; the origin (S3) has an uplink of its own.
 * Bytes move in flows (one chunk from one sender to one receiver), and the
 * rates of all flows are the max-min fair share of the links they cross
 * (sim_net.c), recomputed when flows start or end, or, with a quantum, at
 * most once per quantum. Every message (request, HAVE, tracker call,
 * chunk's last byte) takes a fixed one-way latency of RTT / 2; an S3 GET
 * takes its time to first byte before its bytes flow.
 *
 * What is not modelled but linked: the tracker is the real tracker core
 * (trk_tracker_announce / _have / _renew / _tick: leases, their cap and
 * spare, peer selection), and each node's chunk choice is p2pd's
 * (swarm/pick_rank.h, with the constants of core/tunables.h). The rest of
 * a node (pipelines, upload slots and queues, the origin gate, HAVE "p"
 * live serving) is re-stated here from picker.c, upload.c and origin.c.
 *
 * Single thread; files: sim_main.c (options, report), sim_net.c (flows),
 * sim_ev.c (event queue), sim_node.c (the peer side), sim_origin.c (S3
 * fetches and the tracker calls).
 */
#ifndef WS_SIM_H
#define WS_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tunables.h"
#include "trk_tracker.h"

#define SIM_NONE UINT32_MAX
#define SIM_CONN_MAX (PEER_MAX_NEIGHBORS_DEFAULT + PEER_NBR_SPARE)

typedef struct {
  uint32_t nodes;
  double up_Bps, down_Bps, origin_Bps; /* line rates, bytes per second */
  double goodput;                      /* payload share of a line rate */
  double rtt_s;                        /* between any two parties */
  double ttfb_s;                       /* S3 GET to its first byte */
  uint64_t chunk_bytes;
  uint32_t shards;       /* big files */
  uint64_t shard_bytes;  /* each */
  uint32_t small_files;  /* single-chunk files (config, tokenizer...) */
  uint64_t small_bytes;  /* each */
  double quantum_s;      /* 0: rates exact at every flow change */
  double start_spread_s; /* nodes start uniformly in [0, spread) */
  double max_time_s;     /* give up (stalled) after this */
  uint64_t seed;
  bool json;
  bool quiet;
} sim_cfg_t;

enum { SIM_MISSING, SIM_INFLIGHT, SIM_DONE };

/* One direction of a neighbour connection: client asks, server sends. */
typedef struct {
  uint32_t client, server;
  uint32_t rev;   /* the other direction */
  uint64_t *view; /* client's view of what server has (incl. live) */
  uint32_t live[PEER_LIVE_MAX]; /* chunks arriving at server from S3 */
  uint32_t nlive;
  uint32_t reqs[PEER_PIPELINE_DEPTH]; /* client's requests out */
  uint32_t nreqs;
  double busy_until;                 /* a REJECT busy: not asked till then */
  uint32_t sq[PEER_SERVE_QUEUE_MAX]; /* server's queue of requests */
  uint32_t sq_len;
  uint32_t nups;   /* uploads on it now */
  uint32_t nheld;  /* of them, of held chunks (not live) */
  double active_s; /* a request or a chunk byte, either way */
  bool up;         /* connected */
  bool closed;     /* replaced by a newcomer (sim_node_dial) */
} sim_conn_t;

typedef struct {
  uint32_t chunk;
  uint32_t flow; /* SIM_NONE while waiting for the first byte */
  double started;
} sim_fetch_t;

typedef struct {
  trk_peer_id_t tid;
  uint64_t *have; /* bitmap */
  uint8_t *state; /* SIM_MISSING / _INFLIGHT / _DONE per chunk */
  uint8_t *nreq;
  uint8_t *rx_busy;
  uint16_t *avail;       /* neighbours known to hold (or fetch) each chunk */
  uint32_t *origin_flow; /* chunk -> flow of our S3 fetch, or SIM_NONE */
  uint32_t nhave, nmissing;
  uint32_t conns[SIM_CONN_MAX]; /* as client */
  uint32_t nconn;
  uint32_t leases[TRK_LEASES_PER_PEER_MAX];
  uint32_t nleases, streams;
  sim_fetch_t fetch[PEER_S3_CONCURRENCY_DEFAULT];
  uint32_t nfetch;
  uint32_t uploads;
  double lead_s; /* moving average S3 time to first byte */
  double start_s, done_s, last_rx_s;
  bool joined, done;
  uint64_t s3_bytes;
} sim_node_t;

enum { SIM_FLOW_PEER, SIM_FLOW_ORIGIN };

typedef struct {
  uint32_t src, dst; /* node index; src == nodes: the origin */
  uint32_t kind, chunk, conn;
  uint32_t live_of; /* origin flow feeding this one, or SIM_NONE */
  double size, left, rate, t_ref;
  uint32_t version;
  bool active;
} sim_flow_t;

typedef struct {
  double t;
  uint32_t flow, version, what;
} sim_fev_t;

typedef struct {
  double t;
  uint64_t seq;
  uint32_t type, a, b, c;
} sim_ev_t;

enum {
  EV_START,       /* a: node: hears of the release, announces */
  EV_JOIN,        /* a: node: has the manifest, joins */
  EV_ANNOUNCE,    /* a: node: periodic announce */
  EV_RENEW,       /* a: node: renews its leases */
  EV_TRK_TICK,    /* the tracker's sweep */
  EV_CONN_UP,     /* a: conn (client side) */
  EV_HAVE,        /* a: node, b: chunk, c: 1 live */
  EV_TRK_HAVE,    /* a: node, b: chunk */
  EV_REQ,         /* a: conn, b: chunk */
  EV_REJECT,      /* a: conn, b: chunk */
  EV_CHUNK,       /* a: conn, b: chunk: its last byte arrived */
  EV_FILL,        /* a: node: refill pipelines (busy wait over) */
  EV_ORIGIN_KICK, /* a: node */
  EV_ORIGIN_BODY, /* a: node, b: chunk: first byte of an S3 GET */
  EV_FLOW,        /* a: generation of the flow events (sim_net.c) */
  EV_RATES,       /* recompute rates */
};

typedef struct sim_s {
  sim_cfg_t cfg;
  uint32_t n;      /* nodes */
  uint32_t chunks; /* C */
  uint32_t words;  /* bitmap words */
  uint64_t total_bytes;
  uint32_t *chunk_len;
  uint8_t *chunk_tier;
  sim_node_t *nodes;
  sim_conn_t *conns;
  uint32_t nconns, conns_cap;
  sim_flow_t *flows;
  uint32_t nflows, flows_cap, *flow_free, nfree;
  uint32_t active_flows;
  bool rates_dirty, rates_scheduled;
  double rates_at; /* last recompute */
  sim_fev_t *fev;  /* flow events until the next recompute, by time */
  uint32_t nfev, fev_cap, fev_pos, fev_gen;
  sim_ev_t *ev;
  uint32_t nev, ev_cap;
  uint64_t ev_seq, events;
  double now;
  uint64_t rng;
  trk_tracker_t *trk;
  ws_hash_t digest;
  uint32_t done_nodes;
  uint32_t verified_nodes; /* every chunk's bit set, counted at the end */
  uint64_t s3_bytes, peer_bytes, dup_bytes;
  uint64_t rejects, origin_gets, recomputes, replaced;
  uint32_t *fetches_of; /* S3 GETs per chunk */
  uint8_t *scratch;     /* bitfield for announces */
} sim_t;

/* sim_ev.c */
void sim_ev_push(sim_t *s, double t, uint32_t type, uint32_t a, uint32_t b,
                 uint32_t c);
bool sim_ev_pop(sim_t *s, sim_ev_t *out);
uint64_t sim_rand(sim_t *s);

/* sim_net.c */
uint32_t sim_flow_start(sim_t *s, uint32_t src, uint32_t dst, uint32_t kind,
                        uint32_t chunk, uint32_t conn, uint32_t live_of);
/* Bytes of f sent by now. */
double sim_flow_done_bytes(const sim_t *s, const sim_flow_t *f);
void sim_flow_end(sim_t *s, uint32_t id);
void sim_rates(sim_t *s);
/* Runs the flow events now due (EV_FLOW of generation gen). */
void sim_flow_events(sim_t *s, uint32_t gen);
void sim_rates_dirty(sim_t *s);
/* Frees the flows and the allocation's buffers. */
void sim_net_free(sim_t *s);

/* sim_node.c */
void sim_node_fill(sim_t *s, uint32_t node);
void sim_node_fill_conn(sim_t *s, uint32_t conn);
void sim_node_dial(sim_t *s, uint32_t from, uint32_t to);
void sim_on_conn_up(sim_t *s, uint32_t conn);
void sim_on_have(sim_t *s, uint32_t node, uint32_t chunk, bool live);
void sim_on_req(sim_t *s, uint32_t conn, uint32_t chunk);
void sim_on_reject(sim_t *s, uint32_t conn, uint32_t chunk);
void sim_on_chunk(sim_t *s, uint32_t conn, uint32_t chunk);
void sim_on_upload_end(sim_t *s, uint32_t flow);
/* node now holds chunk (from a neighbour or S3). */
void sim_node_got(sim_t *s, uint32_t node, uint32_t chunk);

/* sim_origin.c */
int sim_trk_init(sim_t *s);
void sim_trk_announce(sim_t *s, uint32_t node, bool join);
void sim_trk_have(sim_t *s, uint32_t node, uint32_t chunk);
void sim_trk_renew(sim_t *s, uint32_t node);
void sim_origin_kick(sim_t *s, uint32_t node);
void sim_on_origin_body(sim_t *s, uint32_t node, uint32_t chunk);
void sim_on_origin_end(sim_t *s, uint32_t flow);

static inline bool sim_bit(const uint64_t *b, uint32_t i) {
  return (b[i >> 6] >> (i & 63)) & 1u;
}
static inline void sim_bit_set(uint64_t *b, uint32_t i) {
  b[i >> 6] |= (uint64_t)1 << (i & 63);
}

#endif
