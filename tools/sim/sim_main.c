/* sim_main.c - ws-sim: options, the release's layout and the event loop
 * (sim.h; docs/scale.md); the report is sim_report.c.
 *
 * The release is laid out as tools/bench makes it: --shards files of
 * --shard-bytes (or, with --size-mib S, four of (S - 1) / 4 MiB, as
 * benchlib.make_model) plus --small-files single-chunk files; each file
 * is cut into --chunk-mib chunks of its own. T_min is the bench's bound
 * max(F/U, F/B, N F / (U + N B)).
 */
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch/file.h"
#include "sim.h"

#define MiB (1024.0 * 1024.0)

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: ws-sim [options]\n"
      "  --nodes N          nodes fetching the release (default 8)\n"
      "  --rate-mbit B      each node's uplink and downlink (100)\n"
      "  --up-mbit B        uplink only; --down-mbit B downlink only\n"
      "  --origin-mbit U    the origin's (S3's) uplink (= rate)\n"
      "  --size-mib S       release as tools/bench makes it: 4 shards of\n"
      "                     (S-1)/4 MiB and 3 small files (128)\n"
      "  --shards K --shard-mib M   K shards of M MiB instead\n"
      "  --small-files K    single-chunk files (3), --small-bytes B (9533)\n"
      "  --chunk-mib M      chunk size (16, p2pctl publish's default)\n"
      "  --rtt-us R         round trip between any two parties (100)\n"
      "  --ttfb-ms T        an S3 GET's time to first byte (10)\n"
      "  --quantum-us Q     recompute rates at most every Q us (0: at\n"
      "                     every flow start and end)\n"
      "  --spread-ms S      nodes start uniformly within S ms (0)\n"
      "  --max-time-s T     give up after T simulated seconds (3600)\n"
      "  --seed X           random seed (1)\n"
      "  --sample-ms S      utilisation samples every S ms (1000)\n"
      "  --json             one JSON object instead of text\n"
      "  --series           and the samples over time in it\n"
      "  --hosts            and each node's finish time (node order)\n"
      "  --progress         a line on stderr per sample: simulated time,\n"
      "                     nodes done, share held, CPU seconds\n"
      "  --no-frame-queue   frames (and a transfer's first byte) do not wait\n"
      "                     behind the payload queued on their connection\n"
      "  --origin-inflight N  the tracker's --origin-inflight: S3 fetches\n"
      "                     per swarm (0: its default policy)\n"
      "  --stripes K        the tracker's --stripes: stripe trees (0: none)\n"
      "  --rto-per-mib X    TCP retransmission timeouts a transfer meets\n"
      "                     per MiB it carries, at random (0: none)\n"
      "  --rto-ms R         how long each stops its transfer (200)\n"
      "peer policy (defaults: p2pd's constants, core/tunables.h):\n"
      "  --reqs-max R       requests in flight over all neighbours (%u)\n"
      "  --pipeline-depth D requests in flight per neighbour (%u)\n"
      "  --uploads-max U    upload slots per node (%u)\n"
      "  --uploads-spare S  of them, for a neighbour holding none (%u)\n"
      "  --upload-line L    neighbours with no slot that wait for the next\n"
      "                     instead of a REJECT busy (0, as p2pd)\n"
      "  --max-neighbors M  neighbour slots (%u)\n"
      "  --dial-share K     a node dials M / K of them (%u; 1: all)\n"
      "  --forward-piece-kib P  a chunk arriving is servable onwards in\n"
      "                     buffers of at most P KiB (%u)\n"
      "  --forward-ms F     a buffer that has waited F ms goes once it holds\n"
      "                     %u KiB (%u; 0: only whole buffers)\n"
      "  --no-forward       serve as they arrive only chunks from S3\n"
      "  --no-deadlines     no progress deadlines or request timeouts\n"
      "  --no-first         announces do not name the chunks to read from\n"
      "                     S3 first (the rule before session 17)\n"
      "  --no-fill-dial     a node never dials the slots left for nodes\n"
      "                     dialing it (the rule before session 18)\n"
      "  --fixed-depth      every pipeline --pipeline-depth deep, however\n"
      "                     many neighbours are ready (the rule before\n"
      "                     session 33)\n",
      PEER_REQS_MAX, PEER_PIPELINE_DEPTH, PEER_UPLOADS_MAX, PEER_UPLOADS_SPARE,
      PEER_MAX_NEIGHBORS_DEFAULT, PEER_NBR_DIAL_SHARE, PEER_BUF_BYTES / 1024u,
      PEER_BUF_FORWARD_MIN_BYTES / 1024u, PEER_BUF_FORWARD_MS);
}

/* The options without a value: 1 if a is one (--help exits). */
static int flag(const char *a, sim_cfg_t *c) {
  if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
    usage(stdout);
    exit(0);
  }
  if (strcmp(a, "--json") == 0)
    c->json = true;
  else if (strcmp(a, "--series") == 0)
    c->series = true;
  else if (strcmp(a, "--hosts") == 0)
    c->hosts = true;
  else if (strcmp(a, "--progress") == 0)
    c->progress = true;
  else if (strcmp(a, "--no-forward") == 0)
    c->pol.forward = false;
  else if (strcmp(a, "--no-deadlines") == 0)
    c->pol.deadlines = false;
  else if (strcmp(a, "--no-first") == 0)
    c->pol.first = false;
  else if (strcmp(a, "--no-fill-dial") == 0)
    c->pol.fill_dial = false;
  else if (strcmp(a, "--fixed-depth") == 0)
    c->pol.depth_spread = false;
  else if (strcmp(a, "--no-frame-queue") == 0)
    c->frame_queue = false;
  else
    return 0;
  return 1;
}

/* The options with a value, as given; apply() makes sim_cfg_t of them. */
typedef struct {
  double nodes, rate, up, down, origin, size_mib, shards, shard_mib;
  double small_files, small_bytes, chunk_mib, rtt_us, ttfb_ms, quantum_us;
  double goodput, spread_ms, max_time_s, seed, sample_ms, rto_per_mib, rto_ms;
  double reqs_max, depth, uploads_max, uploads_spare, line_max, max_nbrs,
      dial_share;
  double piece_kib, forward_ms, origin_inflight, stripes;
} sim_args_t;

#define ARG(name, field)                                                       \
  { name, offsetof(sim_args_t, field) }
static const struct {
  const char *name;
  size_t off;
} k_args[] = {
    ARG("--nodes", nodes),
    ARG("--rate-mbit", rate),
    ARG("--up-mbit", up),
    ARG("--down-mbit", down),
    ARG("--origin-mbit", origin),
    ARG("--size-mib", size_mib),
    ARG("--shards", shards),
    ARG("--shard-mib", shard_mib),
    ARG("--small-files", small_files),
    ARG("--small-bytes", small_bytes),
    ARG("--chunk-mib", chunk_mib),
    ARG("--rtt-us", rtt_us),
    ARG("--ttfb-ms", ttfb_ms),
    ARG("--quantum-us", quantum_us),
    ARG("--goodput", goodput),
    ARG("--rto-per-mib", rto_per_mib),
    ARG("--rto-ms", rto_ms),
    ARG("--spread-ms", spread_ms),
    ARG("--max-time-s", max_time_s),
    ARG("--seed", seed),
    ARG("--sample-ms", sample_ms),
    ARG("--reqs-max", reqs_max),
    ARG("--pipeline-depth", depth),
    ARG("--uploads-max", uploads_max),
    ARG("--uploads-spare", uploads_spare),
    ARG("--upload-line", line_max),
    ARG("--max-neighbors", max_nbrs),
    ARG("--dial-share", dial_share),
    ARG("--forward-piece-kib", piece_kib),
    ARG("--forward-ms", forward_ms),
    ARG("--origin-inflight", origin_inflight),
    ARG("--stripes", stripes),
};
#undef ARG

/* Whether the policy and the run make sense; says what is wrong if not. */
static int check(const sim_cfg_t *c) {
  const sim_policy_t *p = &c->pol;
  if (p->reqs_max < 1 || p->depth < 1 || p->depth > SIM_DEPTH_MAX ||
      p->uploads_max < 1 || p->uploads_spare >= p->uploads_max ||
      p->line_max > SIM_LINE_MAX || p->max_nbrs < 1 ||
      p->max_nbrs > PEER_MAX_NEIGHBORS_MAX || p->dial_share < 1 ||
      p->piece_bytes < 1024 || p->forward_s < 0 || p->forward_s > 10 ||
      c->sample_s < 0.001 || c->origin_inflight > TRK_ORIGIN_INFLIGHT_MAX ||
      c->stripes > TRK_TREE_MAX) {
    fprintf(stderr,
            "ws-sim: need --reqs-max >= 1, --pipeline-depth 1..%u, "
            "--uploads-spare < --uploads-max, --upload-line 0..%u, "
            "--max-neighbors 1..%u, "
            "--dial-share >= 1, --forward-piece-kib >= 1, --forward-ms "
            "0..10000, --sample-ms >= 1, --origin-inflight 0..%u, "
            "--stripes 0..%u\n",
            SIM_DEPTH_MAX, SIM_LINE_MAX, PEER_MAX_NEIGHBORS_MAX,
            TRK_ORIGIN_INFLIGHT_MAX, TRK_TREE_MAX);
    return -1;
  }
  if (c->nodes < 1 || c->nodes > TRK_MAX_PEERS || c->up_Bps <= 0 ||
      c->down_Bps <= 0 || c->origin_Bps <= 0 || c->goodput <= 0 ||
      c->goodput > 1 || c->rto_per_mib < 0 || c->rto_per_mib > 1e6 ||
      c->rto_s <= 0 || c->rto_s > 60 || c->chunk_bytes < 1024 ||
      c->chunk_bytes > WS_CHUNK_SIZE_MAX || c->shards + c->small_files == 0) {
    fprintf(
        stderr,
        "ws-sim: need nodes in 1..%u, rates > 0, chunks of 1 KiB to 64 MiB, "
        "at least one file, --rto-per-mib 0..1e6 and --rto-ms in "
        "(0, 60000]\n",
        TRK_MAX_PEERS);
    return -1;
  }
  return 0;
}

static int apply(const sim_args_t *a, sim_cfg_t *c) {
  double shard_mib = a->shard_mib;
  c->nodes = (uint32_t)a->nodes;
  c->shards = (uint32_t)a->shards;
  if (shard_mib < 0) { /* the bench's layout (benchlib.make_model) */
    double m = floor((a->size_mib - 1) / 4);
    shard_mib = m < 1 ? 1 : m;
    c->shards = 4;
  }
  c->small_files = (uint32_t)a->small_files;
  c->small_bytes = (uint64_t)a->small_bytes;
  c->up_Bps = (a->up >= 0 ? a->up : a->rate) * 1e6 / 8;
  c->down_Bps = (a->down >= 0 ? a->down : a->rate) * 1e6 / 8;
  c->origin_Bps = (a->origin >= 0 ? a->origin : a->rate) * 1e6 / 8;
  c->shard_bytes = (uint64_t)(shard_mib * MiB);
  c->chunk_bytes = (uint64_t)(a->chunk_mib * MiB);
  c->rtt_s = a->rtt_us / 1e6;
  c->ttfb_s = a->ttfb_ms / 1e3;
  c->rto_per_mib = a->rto_per_mib;
  c->rto_s = a->rto_ms / 1e3;
  c->quantum_s = a->quantum_us / 1e6;
  c->goodput = a->goodput;
  c->start_spread_s = a->spread_ms / 1e3;
  c->max_time_s = a->max_time_s;
  c->seed = (uint64_t)a->seed;
  c->sample_s = a->sample_ms / 1e3;
  c->pol.reqs_max = (uint32_t)a->reqs_max;
  c->pol.depth = (uint32_t)a->depth;
  c->pol.uploads_max = (uint32_t)a->uploads_max;
  c->pol.uploads_spare = (uint32_t)a->uploads_spare;
  c->pol.line_max = (uint32_t)a->line_max;
  c->pol.max_nbrs = (uint32_t)a->max_nbrs;
  c->pol.dial_share = (uint32_t)a->dial_share;
  c->pol.piece_bytes = a->piece_kib * 1024.0;
  c->pol.forward_s = a->forward_ms / 1e3;
  c->origin_inflight = (uint32_t)a->origin_inflight;
  c->stripes = (uint32_t)a->stripes;
  return check(c);
}

static int parse(int argc, char **argv, sim_cfg_t *c) {
  sim_args_t a = {.nodes = 8,
                  .rate = 100,
                  .up = -1,
                  .down = -1,
                  .origin = -1,
                  .size_mib = 128,
                  .shards = 4,
                  .shard_mib = -1,
                  .small_files = 3,
                  .small_bytes = 9533,
                  .chunk_mib = 16,
                  .rtt_us = 100,
                  .ttfb_ms = 10,
                  .rto_ms = 200,
                  .goodput = 1448.0 / 1514.0,
                  .max_time_s = 3600,
                  .seed = 1,
                  .sample_ms = 1000,
                  .reqs_max = PEER_REQS_MAX,
                  .depth = PEER_PIPELINE_DEPTH,
                  .uploads_max = PEER_UPLOADS_MAX,
                  .uploads_spare = PEER_UPLOADS_SPARE,
                  .max_nbrs = PEER_MAX_NEIGHBORS_DEFAULT,
                  .dial_share = PEER_NBR_DIAL_SHARE,
                  .piece_kib = PEER_BUF_BYTES / 1024.0,
                  .forward_ms = PEER_BUF_FORWARD_MS};
  *c = (sim_cfg_t){.frame_queue = true,
                   .pol = {.forward = true,
                           .deadlines = true,
                           .first = true,
                           .fill_dial = true,
                           .depth_spread = true}};
  for (int i = 1; i < argc; i++) {
    const char *name = argv[i];
    if (flag(name, c))
      continue;
    size_t k = 0, nk = sizeof(k_args) / sizeof(k_args[0]);
    while (k < nk && strcmp(name, k_args[k].name) != 0)
      k++;
    char *end = NULL;
    errno = 0;
    double v = k < nk && i + 1 < argc ? strtod(argv[++i], &end) : -1;
    if (k == nk || end == NULL || errno != 0 || *end != '\0' || !(v >= 0) ||
        v > 4e9) {
      fprintf(stderr, "ws-sim: bad option or value: %s\n", name);
      usage(stderr);
      return -1;
    }
    *(double *)((char *)&a + k_args[k].off) = v;
  }
  return apply(&a, c);
}

/* Chunks of every file, their lengths and scheduler tiers, in the order of
 * the bench's manifest (files sorted by name): the first small file
 * (config.json), the shards, the other small files
 * (model.safetensors.index.json, tokenizer.json). */
static int layout(sim_t *s) {
  const sim_cfg_t *c = &s->cfg;
  uint64_t per = (c->shard_bytes + c->chunk_bytes - 1) / c->chunk_bytes;
  uint64_t total = per * c->shards + c->small_files;
  if (total == 0 || total > TRK_MAX_CHUNKS) {
    fprintf(stderr, "ws-sim: %llu chunks (1..%u)\n", (unsigned long long)total,
            (unsigned)TRK_MAX_CHUNKS);
    return -1;
  }
  s->chunks = (uint32_t)total;
  s->words = (s->chunks + 63u) / 64u;
  s->chunk_len = calloc(s->chunks, sizeof(uint32_t));
  s->chunk_tier = calloc(s->chunks, 1);
  if (s->chunk_len == NULL || s->chunk_tier == NULL)
    return -1;
  for (uint32_t k = 0; k < c->small_files; k++) {
    uint32_t at = k == 0 ? 0 : s->chunks - c->small_files + k;
    s->chunk_len[at] = (uint32_t)c->small_bytes;
    s->chunk_tier[at] = PEER_TIER_SMALL;
  }
  uint32_t g = c->small_files > 0 ? 1u : 0u;
  for (uint32_t k = 0; k < c->shards; k++)
    for (uint64_t j = 0; j < per; j++, g++) {
      uint64_t left = c->shard_bytes - j * c->chunk_bytes;
      s->chunk_len[g] =
          (uint32_t)(left < c->chunk_bytes ? left : c->chunk_bytes);
      s->chunk_tier[g] = per == 1 ? PEER_TIER_SMALL
                         : j == 0 ? PEER_TIER_FIRST
                                  : PEER_TIER_REST;
    }
  for (uint32_t i = 0; i < s->chunks; i++)
    s->total_bytes += s->chunk_len[i];
  return 0;
}

static void *zalloc(size_t n, size_t sz) {
  void *p = calloc(n ? n : 1, sz);
  if (p == NULL) {
    fprintf(stderr, "ws-sim: out of memory (%zu x %zu bytes)\n", n, sz);
    exit(1);
  }
  return p;
}

static void nodes_init(sim_t *s) {
  s->nodes = zalloc(s->n, sizeof(sim_node_t));
  s->fetches_of = zalloc(s->chunks, sizeof(uint32_t));
  s->spread_at = zalloc((size_t)s->chunks * SIM_SPREAD_COLS, sizeof(double));
  s->holders = zalloc(s->chunks, sizeof(uint32_t));
  for (uint32_t i = 0; i < s->n; i++) {
    sim_node_t *n = &s->nodes[i];
    n->have = zalloc(s->words, sizeof(uint64_t));
    n->state = zalloc(s->chunks, 1);
    n->missing = zalloc(s->words, sizeof(uint64_t));
    n->nreq = zalloc(s->chunks, 1);
    n->rx_busy = zalloc(s->chunks, 1);
    n->avail = zalloc(s->chunks, sizeof(uint16_t));
    n->in_flow = zalloc(s->chunks, sizeof(uint32_t));
    n->short_since = -1;
    for (uint32_t g = 0; g < s->chunks; g++) {
      n->in_flow[g] = SIM_NONE;
      sim_chunk_state(n, g, SIM_MISSING);
      n->lacking[s->chunk_tier[g]]++;
    }
    n->nmissing = s->chunks;
    double u = (double)(sim_rand(s) >> 11) / 9007199254740992.0;
    n->start_s = u * s->cfg.start_spread_s;
    sim_ev_push(s, n->start_s, EV_START, i, 0, 0);
  }
}

/* When a node announces next after a reply giving iv: at most
 * WS_ANNOUNCE_SOON_MAX times sooner, while it fetches short of neighbours
 * (swarm.c's on_peers, tracker_link.c's peer_tracker_link_soon). */
static double announce_next_s(sim_t *s, uint32_t node, uint32_t iv) {
  sim_node_t *n = &s->nodes[node];
  double d = (iv ? iv : TRK_ANNOUNCE_INTERVAL_MS) / 1e3;
  if (!n->done && n->nconn < s->cfg.pol.max_nbrs &&
      n->soon < WS_ANNOUNCE_SOON_MAX) {
    double q = (double)(WS_ANNOUNCE_SOON_MS << n->soon++) / 1e3;
    d = q < d ? q : d;
  }
  return s->now + d;
}

/* A node's own timers (and the tracker's, the sampler's). */
static void dispatch_timer(sim_t *s, const sim_ev_t *e) {
  double manifest_s = s->cfg.rtt_s + s->cfg.ttfb_s;
  uint32_t iv;
  switch (sim_ev_type(e)) {
  case EV_START:
    (void)sim_trk_announce(s, e->a, false);
    sim_ev_push(s, s->now + manifest_s, EV_JOIN, e->a, 0, 0);
    break;
  case EV_JOIN:
    iv = sim_trk_announce(s, e->a, true);
    if (!s->nodes[e->a].joined) {
      sim_ev_push(s, s->now + 1.0 / TRK_ANNOUNCE_PER_S, EV_JOIN, e->a, 0, 0);
      break;
    }
    s->nodes[e->a].last_rx_s = s->now;
    sim_ev_push(s, announce_next_s(s, e->a, iv), EV_ANNOUNCE, e->a, 0, 0);
    sim_ev_push(s, s->now + PEER_LEASE_RENEW_MS / 1e3, EV_RENEW, e->a, 0, 0);
    /* p2pd's tick runs from its start, at a phase of its own. */
    sim_ev_push(s, s->now + (double)(sim_rand(s) % PEER_SWARM_TICK_MS) / 1e3,
                EV_TICK, e->a, 0, 0);
    sim_node_fill(s, e->a);
    break;
  case EV_ANNOUNCE:
    iv = sim_trk_announce(s, e->a, false);
    sim_ev_push(s, announce_next_s(s, e->a, iv), EV_ANNOUNCE, e->a, 0, 0);
    break;
  case EV_RENEW:
    sim_trk_renew(s, e->a);
    sim_ev_push(s, s->now + PEER_LEASE_RENEW_MS / 1e3, EV_RENEW, e->a, 0, 0);
    break;
  case EV_TRK_TICK:
    sim_trk_tick(s);
    sim_ev_push(s, s->now + TRK_SWEEP_INTERVAL_MS / 1e3, EV_TRK_TICK, 0, 0, 0);
    break;
  case EV_TICK:
    sim_on_tick(s, e->a);
    sim_ev_push(s, s->now + PEER_SWARM_TICK_MS / 1e3, EV_TICK, e->a, 0, 0);
    break;
  case EV_SAMPLE:
    sim_sample(s);
    sim_ev_push(s, s->now + s->cfg.sample_s, EV_SAMPLE, 0, 0, 0);
    break;
  default:
    break;
  }
}

static void dispatch(sim_t *s, const sim_ev_t *e) {
  switch (sim_ev_type(e)) {
  case EV_CONN_UP:
    sim_on_conn_up(s, e->a);
    break;
  case EV_HAVE:
    sim_on_have(s, e->a, e->b, e->c != 0);
    break;
  case EV_HAVE1:
    sim_on_have1(s, e->a, e->b, e->c != 0);
    break;
  case EV_TRK_HAVE:
    sim_trk_have(s, e->a, e->b, e->c == 0 ? SIM_NONE : e->c - 1u);
    break;
  case EV_REQ:
    sim_on_req(s, e->a, e->b);
    break;
  case EV_CANCEL:
    sim_on_cancel(s, e->a, e->b);
    break;
  case EV_REJECT:
    sim_on_reject(s, e->a, e->b, e->c != 0);
    break;
  case EV_HEADER:
    sim_on_header(s, e->a, e->b, e->c, e->d);
    break;
  case EV_CHUNK:
    sim_on_chunk(s, e->a, e->b);
    break;
  case EV_ORIGIN_KICK:
    sim_origin_kick(s, e->a);
    break;
  case EV_ORIGIN_BODY:
    sim_on_origin_body(s, e->a, e->b);
    break;
  case EV_FLOW:
    sim_flow_events(s, e->a);
    break;
  case EV_RATES:
    sim_rates(s);
    break;
  default:
    dispatch_timer(s, e);
    break;
  }
}

/* Nodes holding every chunk, counted from their bitmaps and chunk states
 * (not from the counters the run kept). */
static void verify(sim_t *s) {
  for (uint32_t i = 0; i < s->n; i++) {
    const sim_node_t *n = &s->nodes[i];
    uint32_t bits = 0, done = 0;
    for (uint32_t w = 0; w < s->words; w++)
      bits += (uint32_t)__builtin_popcountll(n->have[w]);
    for (uint32_t g = 0; g < s->chunks; g++)
      done += n->state[g] == SIM_DONE;
    s->verified_nodes += bits == s->chunks && done == s->chunks;
  }
}

static void sim_free(sim_t *s) {
  for (uint32_t i = 0; s->nodes != NULL && i < s->n; i++) {
    sim_node_t *n = &s->nodes[i];
    free(n->have);
    free(n->state);
    free(n->missing);
    free(n->nreq);
    free(n->rx_busy);
    free(n->avail);
    free(n->in_flow);
    free(n->conns);
  }
  for (uint32_t i = 0; i < s->nconns; i++)
    free(s->conns[i].view);
  free(s->conns);
  free(s->nodes);
  free(s->fetches_of);
  free(s->spread_at);
  free(s->holders);
  free(s->chunk_len);
  free(s->chunk_tier);
  sim_ev_free(s);
  free(s->series);
  sim_net_free(s);
  trk_tracker_free(s->trk);
}

int main(int argc, char **argv) {
  static sim_t sim;
  sim_t *s = &sim;
  if (parse(argc, argv, &s->cfg) != 0 || layout(s) != 0) {
    sim_free(s);
    return 2;
  }
  s->n = s->cfg.nodes;
  s->rng = s->cfg.seed * 0x9E3779B97F4A7C15ull | 1u;
  s->loss_rng = (s->cfg.seed + 1u) * 0xD1B54A32D192ED03ull | 1u;
  for (uint32_t i = 0; i < sizeof(s->digest.b); i++)
    s->digest.b[i] = (uint8_t)(sim_rand(s) >> 56);
  nodes_init(s);
  if (sim_trk_init(s) != 0) {
    fprintf(stderr, "ws-sim: the tracker refused the nodes\n");
    sim_free(s);
    return 1;
  }
  sim_ev_push(s, 0, EV_TRK_TICK, 0, 0, 0);
  sim_ev_push(s, s->cfg.sample_s, EV_SAMPLE, 0, 0, 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  sim_ev_t e;
  while (s->done_nodes < s->n && sim_ev_pop(s, &e)) {
    if (e.t > s->cfg.max_time_s)
      break;
    s->now = e.t;
    s->events++;
    dispatch(s, &e);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  verify(s);
  sim_report(s, (double)(t1.tv_sec - t0.tv_sec) +
                    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  int rc = s->done_nodes == s->n ? 0 : 1;
  sim_free(s);
  return rc;
}
