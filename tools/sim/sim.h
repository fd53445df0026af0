/* sim.h - ws-sim, a discrete-event model of one release's swarm
 * (docs/scale.md).
 *
 * N nodes fetch one release of C chunks. Each node has an uplink and a
 * downlink of a given rate; the origin (S3) has an uplink of its own.
 * Bytes move in flows (one chunk from one sender to one receiver), and the
 * rates of all flows are the max-min fair share of the links they cross
 * (sim_net.c), recomputed when flows start or end, or, with a quantum, at
 * most once per quantum. Every message (request, HAVE, CANCEL, REJECT,
 * CHUNK header, tracker call, chunk's last byte) takes a fixed one-way
 * latency of RTT / 2; an S3 GET takes its time to first byte before its
 * bytes flow.
 *
 * What is not modelled but linked: the tracker is the real tracker core
 * (trk_tracker_announce / _have / _served / _renew / _tick / _regrant:
 * leases, their cap and spare, peer selection, weighed have-claims), and
 * each node's chunk choice is p2pd's (swarm/pick_rank.h, with the
 * constants of core/tunables.h). The rest of a node (request pipelines and
 * their cap over all neighbours, upload slots and queues, the origin gate,
 * chunks served on as they arrive from S3 or a neighbour, progress
 * deadlines, neighbour slots and the dial share) is re-stated here from
 * picker.c, neighbor*.c, download.c, upload*.c and origin.c.
 *
 * Single thread; files: sim_main.c (options, event loop), sim_report.c
 * (samples and the report), sim_net.c (flows), sim_ev.c (event queue),
 * sim_node.c (the peer side: requests, uploads), sim_nbr.c (neighbour
 * slots, deadlines), sim_origin.c (S3 fetches and the tracker calls).
 */
#ifndef WS_SIM_H
#define WS_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tunables.h"
#include "fetch/file.h"
#include "proto.h"
#include "trk_tracker.h"

#define SIM_NONE UINT32_MAX
/* in_flow of a chunk whose S3 GET waits for its first byte. */
#define SIM_PENDING (UINT32_MAX - 1u)
/* Bound of --pipeline-depth (the per-neighbour request array). */
#define SIM_DEPTH_MAX 64u
/* Upload line seats a node may be given (--upload-line). */
#define SIM_LINE_MAX 16u

/* The peer policy an experimenter may vary (docs/scale.md, options);
 * every default is p2pd's constant. */
typedef struct {
  uint32_t reqs_max;      /* PEER_REQS_MAX: requests over all neighbours */
  uint32_t depth;         /* PEER_PIPELINE_DEPTH: per neighbour */
  uint32_t uploads_max;   /* PEER_UPLOADS_MAX */
  uint32_t uploads_spare; /* PEER_UPLOADS_SPARE */
  uint32_t line_max;      /* upload line: an experiment, 0 in p2pd */
  uint32_t max_nbrs;      /* PEER_MAX_NEIGHBORS_DEFAULT (--max-neighbors) */
  uint32_t dial_share;    /* PEER_NBR_DIAL_SHARE (1: dial every slot) */
  double piece_bytes;     /* PEER_BUF_BYTES: bytes become servable onwards
                             in buffers of at most this size */
  double forward_s;       /* PEER_BUF_FORWARD_MS: a buffer that has waited
                             this long goes at PEER_BUF_FORWARD_MIN_BYTES
                             (0: only whole buffers) */
  bool forward;           /* chunks from neighbours served as they arrive */
  bool deadlines;         /* progress deadlines and request timeouts */
  bool first;             /* announces name the chunks to read first */
  bool depth_spread;      /* one request per neighbour once reqs_max are
                             ready (peer_picker_depth) */
  bool fill_dial;         /* a node dials the slots nobody dialed in */
} sim_policy_t;

typedef struct {
  uint32_t nodes;
  double up_Bps, down_Bps, origin_Bps; /* line rates, bytes per second */
  double goodput;                      /* payload share of a line rate */
  double rtt_s;                        /* between any two parties */
  double ttfb_s;                       /* S3 GET to its first byte */
  double rto_per_mib; /* retransmission timeouts a flow meets per MiB */
  double rto_s;       /* how long each stops its flow */
  uint64_t chunk_bytes;
  uint32_t shards;       /* big files */
  uint64_t shard_bytes;  /* each */
  uint32_t small_files;  /* single-chunk files (config, tokenizer...) */
  uint64_t small_bytes;  /* each */
  double quantum_s;      /* 0: rates exact at every flow change */
  double start_spread_s; /* nodes start uniformly in [0, spread) */
  double max_time_s;     /* give up (stalled) after this */
  double sample_s;       /* utilisation samples every this */
  uint64_t seed;
  sim_policy_t pol;
  bool frame_queue; /* frames wait behind the payload queued before them */
  uint32_t origin_inflight; /* the tracker's --origin-inflight (0: none) */
  uint32_t stripes;         /* the tracker's --stripes (0: no stripe trees) */
  bool json;
  bool series;   /* the per-sample utilisation series in the report */
  bool hosts;    /* each node's finish time in the report */
  bool progress; /* a line on stderr per sample (long runs) */
} sim_cfg_t;

enum { SIM_MISSING, SIM_INFLIGHT, SIM_DONE };

/* One direction of a neighbour connection: client asks, server sends.
 * The fields every HAVE, request and upload touch come first, so that a
 * connection looked at costs one or two cache lines, not its whole
 * kilobyte. */
typedef struct {
  uint32_t client, server;
  uint32_t rev; /* the other direction (sim_conn_rev) */
  bool up;      /* ready (handshake done) */
  bool closed;
  bool dialed; /* the client dialed it */
  uint32_t nups;
  uint32_t ups[WS_MUX_MAX]; /* server's uploads on it (flows) */
  uint32_t nreqs;
  uint32_t nlive, live_next;
  uint64_t live_bits; /* bit g % 64 set for each g in live[] (and maybe
                         others): most chunks are ruled out without
                         reading live[] (sim_conn_live) */
  uint32_t sq_len;
  uint32_t misses; /* client's deadline misses since a chunk came */
  uint32_t nhidden;
  uint64_t *view;    /* client's view of what server has (incl. arriving) */
  double fifo_s;     /* when the last frame sent on it arrives */
  double useful_s;   /* last transfer start or end on it */
  double busy_until; /* REJECT busy or a miss: not asked till then */
  uint32_t live[PEER_LIVE_MAX];      /* server said HAVE "p" (a ring) */
  uint32_t reqs[SIM_DEPTH_MAX];      /* client's requests with no header yet */
  uint32_t sq[PEER_SERVE_QUEUE_MAX]; /* server's queue of requests */
  uint32_t hidden[PEER_REJECT_HIDE_MAX]; /* refused: not asked till */
  double hidden_until[PEER_REJECT_HIDE_MAX];
  double req_sent[SIM_DEPTH_MAX];
} sim_conn_t;

typedef struct {
  uint32_t chunk;
  uint32_t flow; /* SIM_NONE while waiting for the first byte */
} sim_fetch_t;

typedef struct {
  trk_peer_id_t tid;
  uint64_t *have;    /* bitmap */
  uint8_t *state;    /* SIM_MISSING / _INFLIGHT / _DONE per chunk (set it
                        with sim_chunk_state) */
  uint64_t *missing; /* bitmap: state is SIM_MISSING (the picker's scan) */
  uint32_t lacking[PEER_TIER_LAST]; /* chunks of each tier not held */
  uint8_t *nreq;
  uint8_t *rx_busy;
  uint16_t *avail;   /* ready neighbours whose view has each chunk */
  uint32_t *in_flow; /* chunk -> flow bringing it, SIM_PENDING, SIM_NONE */
  uint32_t nhave, nmissing;
  uint32_t *conns; /* as client, connecting or ready */
  uint32_t nconn, conns_cap, nready, ndialed;
  double short_since; /* share dialed, slots not full, since (-1: not) */
  uint32_t nreqs;     /* requests with no header yet, over all neighbours */
  uint32_t leases[TRK_LEASES_PER_PEER_MAX];
  uint32_t nleases, streams;
  sim_fetch_t fetch[PEER_S3_CONCURRENCY_DEFAULT];
  uint32_t nfetch;
  uint32_t uploads;
  /* Server connections waiting for the next free slot (--upload-line). */
  uint32_t line[SIM_LINE_MAX];
  uint32_t line_len;
  double lead_s; /* moving average S3 time to first byte */
  /* The tracker's stripe trees (--stripes): parent per stripe (SIM_NONE:
   * the root), since tree_s. */
  uint32_t ntree, tparent[TRK_TREE_MAX];
  double tree_s;
  double tree_fed_s[TRK_TREE_MAX]; /* parent last offered a chunk we lack */
  double rx_Bps; /* typical rate of chunks from neighbours (deadlines) */
  double start_s, done_s, last_rx_s;
  double rx_bytes, tx_bytes; /* payload bytes in and out, wasted too */
  bool joined, done;
  uint8_t soon; /* announces brought forward while short of neighbours */
  uint64_t s3_bytes;
} sim_node_t;

enum { SIM_FLOW_PEER, SIM_FLOW_ORIGIN };
/* The link that fixed a flow's rate: its sender's uplink (the origin's
 * for an S3 flow), its receiver's downlink, or its sender's source. */
enum { SIM_BNECK_UP, SIM_BNECK_DOWN, SIM_BNECK_SOURCE };

typedef struct {
  uint32_t src, dst; /* node index; src == nodes: the origin */
  uint32_t kind, chunk, conn;
  double size, left, rate, t_ref;
  double rx_start;  /* its deadline runs from here (client) */
  double rx_first;  /* its header came (client) */
  double header_at; /* its header arrives (sent with its first piece) */
  double go_at;     /* its bytes move from then (behind the FIFO, or
                       after a retransmission timeout) */
  double stall_at;  /* bytes sent when its next timeout comes */
  double piece;     /* what it brings becomes servable onwards in pieces
                       of this size, set at its first rate (sim_piece_bytes;
                       0: not yet, whole buffers) */
  uint32_t version; /* changes with its rate (flow events) */
  uint32_t serial;  /* which transfer (messages name it) */
  bool alive;       /* allocated */
  bool sent;        /* every byte sent; freed when the client took it */
  bool accepted;    /* the client took its header: it is in_flow there */
  bool discard;     /* the client throws its bytes away */
  bool late;        /* waited for its sender's source (no rate sample) */
  bool paced;       /* its rate is its sender's source's (last fill) */
  bool was_live;    /* its sender did not hold the chunk when it began */
  bool src_held;    /* its sender holds the chunk (for good: a chunk DONE
                       stays so), known without looking it up */
  bool unheaded;    /* no piece could go yet: its header waits (live) */
  uint8_t bneck;    /* what fixed its rate: SIM_BNECK_* (last fill) */
} sim_flow_t;

typedef struct {
  double t;
  uint32_t flow, version, what;
} sim_fev_t;

/* 32 bytes: the scheduling order and the type share a word (sim_ev_type),
 * so that a heap level's four children span two cache lines, not three. */
typedef struct {
  double t;
  uint64_t seq; /* order of scheduling << 8 | type (EV_*) */
  uint32_t a, b, c, d;
} sim_ev_t;

enum {
  EV_START,       /* a: node: hears of the release, announces */
  EV_JOIN,        /* a: node: has the manifest, joins */
  EV_ANNOUNCE,    /* a: node: periodic announce */
  EV_RENEW,       /* a: node: renews its leases */
  EV_TRK_TICK,    /* the tracker's sweep */
  EV_TICK,        /* a: node: p2pd's swarm tick */
  EV_SAMPLE,      /* utilisation sample (sim_report.c) */
  EV_CONN_UP,     /* a: conn (client side, the dialer's) */
  EV_HAVE,        /* a: node, b: chunk, c: 1 live */
  EV_HAVE1,       /* a: conn (to its client), b: chunk, c: 1 live */
  EV_TRK_HAVE,    /* a: node, b: chunk, c: sender + 1 (0: S3) */
  EV_REQ,         /* a: conn, b: chunk */
  EV_CANCEL,      /* a: conn, b: chunk */
  EV_REJECT,      /* a: conn, b: chunk, c: 1 busy, 0 not held */
  EV_HEADER,      /* a: conn, b: chunk, c: flow, d: its version */
  EV_CHUNK,       /* a: flow, b: its version: its last byte arrived */
  EV_ORIGIN_KICK, /* a: node */
  EV_ORIGIN_BODY, /* a: node, b: chunk: first byte of an S3 GET */
  EV_FLOW,        /* a: generation of the flow events (sim_net.c) */
  EV_RATES,       /* recompute rates */
};

/* Sums over the samples of nodes still fetching (sim_report.c). */
typedef struct {
  double n;        /* node samples */
  double down, up; /* link utilisation (payload / goodput x rate) */
  double in_flows, in_paced;
  double paced_rate;       /* share of the downlink in paced flows */
  double reqs;             /* request slots held (of reqs_max) */
  double reqs_full;        /* samples with every slot held */
  double reqs_queued_live; /* slots held by requests for arriving chunks */
  /* Where the held slots wait (shares of --reqs-max): the request or its
   * header on the wire; its sender's first buffer (live); queued there
   * behind a held chunk streaming on that connection, for an upload slot
   * of that node, behind WS_MUX_MAX uploads, or else. */
  double rq_wire, rq_unheaded, rq_behind, rq_slots, rq_mux, rq_other;
  /* Shares of the downlink in flows fixed by each link (SIM_BNECK_*). */
  double in_by[3];
  double starved;      /* no missing chunk any neighbour offers */
  double nothing_free; /* some offered, none askable (slots, busy) */
  double nbrs, uploads;
  double ups_paced, ups_slots_full; /* uploads paced; nodes at the cap */
  double up_all_n, up_all;          /* uplinks of every node, done or not */
} sim_diag_t;

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
  uint32_t nflows, flows_cap, *flow_free, nfree, flow_serial;
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
  double wasted_bytes; /* of transfers canceled or thrown away */
  uint64_t rejects, not_held, origin_gets, recomputes, replaced;
  uint64_t dials, conns_refused, served, served_live, discarded;
  uint64_t deadline_misses, dropped_slow, req_timeouts, confirms;
  uint64_t regrants;
  uint64_t loss_rng; /* the timeouts' own generator (--rto-per-mib) */
  uint64_t rto_stalls;
  double origin_done_s; /* the origin's last byte of the release */
  uint32_t *fetches_of; /* S3 GETs per chunk */
  /* How each chunk crossed the swarm: per chunk, the time of its first S3
   * GET and the times the first node, half the nodes and every node held
   * it verified (SIM_SPREAD_COLS each; sim_node_got), and its holders. */
  double *spread_at;
  uint32_t *holders;
  sim_diag_t diag;
#define SIM_SPREAD_COLS 4
  double *series; /* per sample: t, down, up, nodes fetching */
  uint32_t nseries, series_cap;
} sim_t;

/* sim_ev.c */
void sim_ev_push(sim_t *s, double t, uint32_t type, uint32_t a, uint32_t b,
                 uint32_t c);
void sim_ev_push4(sim_t *s, double t, uint32_t type, uint32_t a, uint32_t b,
                  uint32_t c, uint32_t d);
bool sim_ev_pop(sim_t *s, sim_ev_t *out);
void sim_ev_free(sim_t *s);
uint64_t sim_rand(sim_t *s);
static inline uint32_t sim_ev_type(const sim_ev_t *e) {
  return (uint32_t)(e->seq & 255u);
}

/* sim_net.c */
uint32_t sim_flow_start(sim_t *s, uint32_t src, uint32_t dst, uint32_t kind,
                        uint32_t chunk, uint32_t conn);
/* Bytes of f sent by now. */
double sim_flow_done_bytes(const sim_t *s, const sim_flow_t *f);
/* Requests c's client may have out to its server now (sim_node.c):
 * peer_picker_depth, and one deep none while a chunk comes from it. */
uint32_t sim_conn_depth(const sim_t *s, const sim_conn_t *c);
/* f sent its last byte: out of the links, kept for its receiver. */
void sim_flow_sent(sim_t *s, uint32_t id);
/* f is gone (taken, canceled, failed). */
void sim_flow_end(sim_t *s, uint32_t id);
void sim_rates(sim_t *s);
/* Runs the flow events now due (EV_FLOW of generation gen). */
void sim_flow_events(sim_t *s, uint32_t gen);
void sim_rates_dirty(sim_t *s);
/* Frees the flows and the allocation's buffers. */
void sim_net_free(sim_t *s);
/* Bytes f may send now (all it has left, or, live, what its sender may
 * forward). */
double sim_flow_may_send(const sim_t *s, const sim_flow_t *f);

/* sim_node.c */
void sim_node_fill(sim_t *s, uint32_t node);
void sim_node_fill_conn(sim_t *s, uint32_t conn);
void sim_on_have(sim_t *s, uint32_t node, uint32_t chunk, bool live);
void sim_on_have1(sim_t *s, uint32_t conn, uint32_t chunk, bool live);
/* When a frame sent now on conn (from its server to its client) arrives:
 * half an RTT, and, with frame_queue, after the payload queued on that
 * connection before it (and after the frames sent on it before). */
double sim_frame_at(sim_t *s, uint32_t conn);
/* The wait behind the payload queued now on conn (server to client). */
double sim_frame_queue_s(const sim_t *s, const sim_conn_t *c);
void sim_on_req(sim_t *s, uint32_t conn, uint32_t chunk);
void sim_on_cancel(sim_t *s, uint32_t conn, uint32_t chunk);
/* Server connection conn leaves its node's upload line, if in it. */
void sim_node_line_leave(sim_t *s, uint32_t conn);
void sim_on_reject(sim_t *s, uint32_t conn, uint32_t chunk, bool busy);
void sim_on_header(sim_t *s, uint32_t conn, uint32_t chunk, uint32_t flow,
                   uint32_t version);
void sim_on_chunk(sim_t *s, uint32_t flow, uint32_t version);
/* A peer flow sent its last byte (sim_net.c). */
void sim_on_upload_end(sim_t *s, uint32_t flow);
/* Sends flow's CHUNK header (its first piece may go now). */
void sim_upload_header(sim_t *s, uint32_t flow);
/* node now holds chunk (from a neighbour: from, else SIM_NONE). */
void sim_node_got(sim_t *s, uint32_t node, uint32_t chunk, uint32_t from);
/* Why a transfer ends unfinished (sim_download_fail). */
typedef enum {
  SIM_FAIL_CANCELED, /* CANCEL at the sender, or the receiver gave up */
  SIM_FAIL_SOURCE,   /* the sender's own fetch of the chunk failed */
  SIM_FAIL_CLOSED,   /* the connection closed */
} sim_fail_t;
/* The transfer of flow ends unfinished, at both ends. */
void sim_download_fail(sim_t *s, uint32_t flow, sim_fail_t why);
/* Drops the client's request for chunk on conn (answered, refused or
 * canceled; cancel: a CANCEL goes to the server). */
bool sim_req_drop(sim_t *s, uint32_t conn, uint32_t chunk, bool cancel);
/* Whether the client of c sees chunk g as arriving at c's server. */
bool sim_conn_live(const sim_conn_t *c, uint32_t g);

/* sim_nbr.c */
void sim_node_dial(sim_t *s, uint32_t from, uint32_t to);
bool sim_room_dial(sim_t *s, uint32_t node);
void sim_on_conn_up(sim_t *s, uint32_t conn);
void sim_on_tick(sim_t *s, uint32_t node);
/* The client of c learns that c's server has (live: is fetching) chunk g
 * (neighbor.c, peer_neighbor_rel_have). */
void sim_view_learn(sim_t *s, sim_conn_t *c, uint32_t g, bool live);
void sim_view_hide(sim_t *s, sim_conn_t *c, uint32_t g);

/* sim_origin.c */
int sim_trk_init(sim_t *s);
/* The next announce's interval in ms (the reply's, clamped as
 * tracker_link.c does); 0 when refused. */
uint32_t sim_trk_announce(sim_t *s, uint32_t node, bool join);
void sim_trk_have(sim_t *s, uint32_t node, uint32_t chunk, uint32_t from);
void sim_trk_renew(sim_t *s, uint32_t node);
void sim_trk_tick(sim_t *s);
void sim_origin_kick(sim_t *s, uint32_t node);
void sim_on_origin_body(sim_t *s, uint32_t node, uint32_t chunk);
void sim_on_origin_end(sim_t *s, uint32_t flow);

/* sim_tree.c */
/* Whether chunk g may be asked of server by client (its stripe trees). */
bool sim_tree_may_ask(const sim_t *s, uint32_t client, uint32_t server,
                      uint32_t g);

/* sim_report.c */
void sim_sample(sim_t *s);
void sim_report(sim_t *s, double wall_s);

static inline bool sim_bit(const uint64_t *b, uint32_t i) {
  return (b[i >> 6] >> (i & 63)) & 1u;
}
static inline void sim_bit_set(uint64_t *b, uint32_t i) {
  b[i >> 6] |= (uint64_t)1 << (i & 63);
}
static inline void sim_bit_clear(uint64_t *b, uint32_t i) {
  b[i >> 6] &= ~((uint64_t)1 << (i & 63));
}
/* The other direction of connection cid: sim_node_dial makes both at
 * once, as ids 2k and 2k + 1, so it needs no look-up of cid's record (a
 * cache miss per neighbour on every HAVE sent). */
static inline uint32_t sim_conn_rev(uint32_t cid) {
  return cid ^ 1u;
}
/* Chunk g of node n is now in state st (SIM_MISSING...), its bit in
 * n->missing with it. */
static inline void sim_chunk_state(sim_node_t *n, uint32_t g, uint8_t st) {
  n->state[g] = st;
  if (st == SIM_MISSING)
    sim_bit_set(n->missing, g);
  else
    sim_bit_clear(n->missing, g);
}
static inline double sim_half_rtt(const sim_t *s) {
  return s->cfg.rtt_s / 2;
}

#endif
