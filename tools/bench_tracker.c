/* bench_tracker.c - the load generator of `tools/bench tracker`: N
 * simulated p2pd nodes, each on its own authenticated wire_conn (the real
 * handshake, sealing and framing of proto/) to a real p2p-tracker, each
 * announcing R releases and the presence digest at the interval the
 * tracker asks for (TRK_ANNOUNCE_INTERVAL_MS, 5 s) less p2pd's random
 * share (ws_announce_delay_ms), as p2pd does; its first two rounds come
 * 1 s and 2 s after the one before, as from a p2pd short of neighbours
 * (WS_ANNOUNCE_SOON_MS).
 *
 *   bench_tracker --port P --key-file F --peers N --releases R
 *                 [--host H] [--seconds S] [--ramp-s S] [--chunks C]
 *                 [--tracker-pid PID] [--max-wait S] [--spread 1]
 *
 * Every node joins every release, or with --spread 1 node i joins only
 * release i % R (N/R nodes per release). Node i joins release r as a seed
 * when (i + r) % 4 == 0 (every chunk),
 * else as a downloader holding a random half of the chunks and wanting
 * origin leases; it never reports more chunks and never renews a lease,
 * so leases keep expiring and being granted again (the tracker's worst
 * case, not a quiet swarm). Its first announce of each release carries
 * the full have-bitfield, later ones none. Connections start spread over
 * --ramp-s, like a scale-up; a node turned away (ERROR without a release)
 * or dropped reconnects with exponential backoff, reset only by a reply.
 *
 * Once every node is up (the tracker answered it; or --max-wait seconds
 * after the start, whichever comes first) and one more interval has
 * passed, latencies (announce sent -> its reply, in this process's clock)
 * are recorded for --seconds; with
 * --tracker-pid the tracker's CPU time over that window and its peak RSS
 * (VmHWM) are read from /proc, and the machine's busy and stolen CPU
 * share from /proc/stat. One JSON object goes to stdout. The generator
 * shares the machine with the tracker: its own loop delay is part of the
 * latency it measures (docs/benchmarks.md "Tracker capacity").
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uv.h>

#include "proto.h"
#include "wire_conn.h"
#include "ws_rand.h"

#define BT_INTERVAL_MS 5000u /* until the tracker's reply says otherwise */
#define BT_RELEASES_MAX 64u
#define BT_BACKOFF_MIN_MS 500u
#define BT_BACKOFF_MAX_MS 30000u
#define BT_LAG_PERIOD_MS 5u

typedef struct bt_s bt_t;

typedef struct {
  bt_t *b;
  uint32_t idx;
  wire_conn_t *wc; /* NULL while down */
  uv_timer_t timer;
  bool ready;    /* handshake done */
  bool accepted; /* the tracker answered an announce */
  uint32_t backoff_ms;
  uint32_t interval_ms;
  uint64_t due_ms; /* its next announce, loop time; 0: none yet */
  uint8_t soon;    /* rounds brought forward (WS_ANNOUNCE_SOON_MS) */
  uint64_t rng;    /* its announce delays (ws_announce_delay_ms) */
  uint64_t sent_ns[BT_RELEASES_MAX + 1]; /* 0: no announce in flight */
  bool announced[BT_RELEASES_MAX + 1];   /* on this connection */
  uint8_t *have;                         /* releases x nbytes */
} bt_peer_t;

struct bt_s {
  uv_loop_t *loop;
  wire_conn_cfg_t cfg;
  char host[64];
  uint16_t port;
  uint32_t npeers, nrels, chunks, nbytes;
  uint32_t seconds, ramp_s, max_wait_s;
  bool spread;          /* node i joins release i % nrels only */
  uint32_t up;          /* nodes the tracker answered, now */
  double all_up_s;      /* seconds from the start until all were up */
  uint32_t up_at_start; /* nodes up when the window opened */
  uint64_t t0_ns;
  int tracker_pid;
  bt_peer_t *peers;
  uint8_t digests[BT_RELEASES_MAX + 1][WS_PROTO_DIGEST_LEN];
  uint64_t win_start_ns, win_end_ns;
  uint32_t *lat_us; /* recorded in the window */
  size_t nlat, caplat;
  /* This loop's own lateness: how late a BT_LAG_PERIOD_MS timer fired,
   * in the window (a reply that came meanwhile waited as long). */
  uv_timer_t lag_timer;
  uint64_t lag_due_ns;
  uint32_t *lag_us;
  size_t nlag, caplag;
  uint64_t connects, links, refused, announce_errors, drops, sent, replies;
  uint64_t fail_timeout, fail_eof, fail_other; /* closed before ready */
  char last_error[WS_ERRMSG_MAX + 1];          /* of an announce */
  uint64_t cpu0_ticks; /* tracker CPU ticks at the window start */
  double self_cpu0;    /* this process's CPU seconds then */
  uint64_t runq0_ns;   /* the tracker's run-queue wait then */
  uint64_t st_busy0, st_total0, st_steal0;
  uv_timer_t phase;
  int phase_no;
};

/* ---- /proc -------------------------------------------------------------- */

/* utime + stime of pid, in clock ticks; 0 when unreadable. */
static uint64_t proc_cpu_ticks(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the name may hold spaces */
  unsigned long long ut = 0, st = 0;
  if (p == NULL || sscanf(p + 2,
                          "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
                          "%*u %llu %llu",
                          &ut, &st) != 2)
    return 0;
  return ut + st;
}

/* Nanoseconds pid's main thread waited, runnable, for a CPU. */
static uint64_t proc_runq_ns(int pid) {
  char path[64];
  unsigned long long run = 0, wait = 0;
  snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  if (fscanf(f, "%llu %llu", &run, &wait) != 2)
    wait = 0;
  fclose(f);
  return wait;
}

static uint64_t proc_hwm_kib(int pid) {
  char path[64], line[256];
  unsigned long long kib = 0;
  snprintf(path, sizeof(path), "/proc/%d/status", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  while (fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
      break;
  fclose(f);
  return kib;
}

/* The machine's "cpu" line: busy (not idle/iowait), steal, total. */
static void proc_stat(uint64_t *busy, uint64_t *steal, uint64_t *total) {
  unsigned long long v[10] = {0};
  FILE *f = fopen("/proc/stat", "r");
  *busy = *steal = *total = 0;
  if (f == NULL)
    return;
  int n =
      fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
             &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  fclose(f);
  if (n < 8)
    return;
  /* guest time is already in user; count the first eight fields */
  for (int i = 0; i < 8; i++)
    *total += v[i];
  *steal = v[7];
  *busy = *total - v[3] - v[4];
}

static double self_cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* ---- announces ---------------------------------------------------------- */

static bool is_seed(const bt_peer_t *p, uint32_t r) {
  return (p->idx + r) % 4u == 0;
}

static void send_one(bt_peer_t *p, uint32_t k) {
  bt_t *b = p->b;
  ws_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = WS_MSG_ANNOUNCE;
  ws_announce_t *a = &m.u.announce;
  memcpy(a->digest, b->digests[k], WS_PROTO_DIGEST_LEN);
  a->port = (uint16_t)(20000u + p->idx % 40000u);
  snprintf(a->zone, sizeof(a->zone), "zone-%u", p->idx % 4u);
  a->event = p->announced[k] ? WS_ANN_UPDATE : WS_ANN_STARTED;
  if (k < b->nrels) { /* a release; k == nrels is the presence digest */
    a->total_chunks = b->chunks;
    a->role = is_seed(p, k) ? WS_SWARM_SEED : WS_SWARM_LEECH;
    a->want = !is_seed(p, k);
    if (!p->announced[k])
      a->have_bits = p->have + (size_t)k * b->nbytes;
  } else {
    a->want = true;
  }
  if (wire_conn_send(p->wc, &m) != 0)
    return; /* a full queue: this one is skipped, the next goes */
  p->announced[k] = true;
  p->sent_ns[k] = uv_hrtime();
  b->sent++;
}

static void on_peer_timer(uv_timer_t *t);

/* Each node keeps its own phase: the next announce is due p2pd's delay
 * (ws_announce_delay_ms: the interval less a random share) after this one
 * was due, not after the loop got round to it. Re-arming from the loop's
 * clock made every node whose timer fired in one (late) iteration announce
 * in the same millisecond from then on: each stall of this one loop merged
 * nodes into bigger bursts, which 10,000 separate machines, each on its
 * own clock, do not do (docs/benchmarks.md "Tracker capacity", session
 * 28). Without the random share, the nodes that joined together in the
 * ramp stayed together and came as one burst every interval (session
 * 29). */
static void announce_all(bt_peer_t *p) {
  bt_t *b = p->b;
  for (uint32_t k = 0; k <= b->nrels && p->wc != NULL && p->ready; k++)
    if (!b->spread || k == b->nrels || k == p->idx % b->nrels)
      send_one(p, k);
  uint64_t now = uv_now(b->loop);
  if (p->due_ms == 0 || p->due_ms + p->interval_ms <= now)
    p->due_ms = now; /* the first, or a whole interval behind */
  /* Its first rounds come sooner, as from a p2pd short of neighbours (each
   * node is taken to be: the most such announces there can be). */
  if (p->soon < WS_ANNOUNCE_SOON_MAX)
    p->due_ms += (uint64_t)WS_ANNOUNCE_SOON_MS << p->soon++;
  else
    p->due_ms +=
        ws_announce_delay_ms(p->interval_ms, (uint32_t)ws_xorshift64(&p->rng));
  uv_timer_start(&p->timer, on_peer_timer, p->due_ms - now, 0);
}

/* ---- the connection ----------------------------------------------------- */

static void peer_connect(bt_peer_t *p);

static void peer_backoff(bt_peer_t *p) {
  uint32_t d = p->backoff_ms;
  uint64_t s = (uint64_t)p->idx * 0x9E3779B97F4A7C15ull ^ uv_hrtime();
  uint32_t wait = d / 2u + (uint32_t)(ws_xorshift64(&s) % (d / 2u + 1u));
  p->backoff_ms = d >= BT_BACKOFF_MAX_MS / 2u ? BT_BACKOFF_MAX_MS : d * 2u;
  uv_timer_start(&p->timer, on_peer_timer, wait, 0);
}

static void on_peer_timer(uv_timer_t *t) {
  bt_peer_t *p = t->data;
  if (p->wc == NULL)
    peer_connect(p);
  else if (p->ready)
    announce_all(p);
}

static void on_ready(wire_conn_t *c, const wire_peer_t *peer) {
  bt_peer_t *p = wire_conn_user(c);
  (void)peer;
  p->ready = true;
  p->b->links++;
  memset(p->announced, 0, sizeof(p->announced));
  announce_all(p);
}

/* Appends x to *v (n used of cap, doubled as needed); dropped when out of
 * memory (the figure then covers less of the window). */
static void push_u32(uint32_t **v, size_t *n, size_t *cap, uint32_t x) {
  if (*n == *cap) {
    size_t c = *cap == 0 ? 65536 : *cap * 2u;
    uint32_t *nv = realloc(*v, c * sizeof(*nv));
    if (nv == NULL)
      return;
    *v = nv;
    *cap = c;
  }
  (*v)[(*n)++] = x;
}

static bool in_window(const bt_t *b, uint64_t t_ns) {
  return b->win_start_ns != 0 && t_ns >= b->win_start_ns && b->win_end_ns == 0;
}

static void record(bt_t *b, uint64_t sent, uint64_t now) {
  if (!in_window(b, sent))
    return;
  uint64_t us = (now - sent) / 1000u;
  push_u32(&b->lat_us, &b->nlat, &b->caplat,
           us > UINT32_MAX ? UINT32_MAX : (uint32_t)us);
}

static void on_lag(uv_timer_t *t) {
  bt_t *b = t->data;
  uint64_t now = uv_hrtime();
  if (b->lag_due_ns != 0 && in_window(b, b->lag_due_ns)) {
    uint64_t us = now > b->lag_due_ns ? (now - b->lag_due_ns) / 1000u : 0;
    push_u32(&b->lag_us, &b->nlag, &b->caplag,
             us > UINT32_MAX ? UINT32_MAX : (uint32_t)us);
  }
  b->lag_due_ns = now + BT_LAG_PERIOD_MS * 1000000ull;
}

static void on_frame(wire_conn_t *c, const ws_msg_t *m) {
  bt_peer_t *p = wire_conn_user(c);
  bt_t *b = p->b;
  if (m->type == WS_MSG_ERROR && !m->u.error.has_digest) {
    b->refused++; /* turned away: the GOODBYE follows */
    return;
  }
  if (m->type == WS_MSG_ERROR) {
    b->announce_errors++;
    snprintf(b->last_error, sizeof(b->last_error), "%s", m->u.error.msg);
    return;
  }
  if (m->type != WS_MSG_ANNOUNCE_REPLY)
    return;
  const ws_announce_reply_t *r = &m->u.announce_reply;
  for (uint32_t k = 0; k <= b->nrels; k++) {
    if (memcmp(r->digest, b->digests[k], WS_PROTO_DIGEST_LEN) != 0)
      continue;
    if (p->sent_ns[k] != 0) {
      if (b->win_start_ns != 0 && p->sent_ns[k] >= b->win_start_ns)
        b->replies++;
      record(b, p->sent_ns[k], uv_hrtime());
      p->sent_ns[k] = 0;
    }
    break;
  }
  if (!p->accepted) {
    p->accepted = true;
    p->backoff_ms = BT_BACKOFF_MIN_MS;
    if (++b->up == b->npeers && b->all_up_s == 0)
      b->all_up_s = (double)(uv_hrtime() - b->t0_ns) / 1e9;
  }
  if (r->interval_ms >= 100u && r->interval_ms <= 600000u)
    p->interval_ms = r->interval_ms;
}

static void on_close(wire_conn_t *c, int status) {
  bt_peer_t *p = wire_conn_user(c);
  if (p->accepted)
    p->b->up--;
  if (p->ready)
    p->b->drops++;
  else if (status == WS_ETIMEOUT)
    p->b->fail_timeout++;
  else if (status == UV_EOF || status == WS_EAUTH || status == UV_ECONNRESET)
    p->b->fail_eof++; /* the tracker closed it (a cap) during the handshake */
  else
    p->b->fail_other++;
  p->wc = NULL;
  p->ready = false;
  p->accepted = false;
  memset(p->sent_ns, 0, sizeof(p->sent_ns));
  if (p->b->win_end_ns == 0)
    peer_backoff(p);
}

static const wire_conn_cbs_t k_cbs = {
    .on_ready = on_ready, .on_frame = on_frame, .on_close = on_close};

static void peer_connect(bt_peer_t *p) {
  bt_t *b = p->b;
  wire_conn_cfg_t cfg = b->cfg;
  snprintf(cfg.node_id, sizeof(cfg.node_id), "bench-%05u", p->idx);
  snprintf(cfg.zone, sizeof(cfg.zone), "zone-%u", p->idx % 4u);
  cfg.listen_port = (uint16_t)(20000u + p->idx % 40000u);
  b->connects++;
  if (wire_conn_connect(b->loop, b->host, b->port, &cfg, &k_cbs, p, &p->wc) !=
      0) {
    p->wc = NULL;
    peer_backoff(p);
  }
}

/* ---- phases: ramp, warm-up, window, report ------------------------------ */

static int cmp_u32(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, c = *(const uint32_t *)y;
  return a < c ? -1 : a > c;
}

static double pct(const uint32_t *v, size_t n, double q) {
  if (n == 0)
    return 0;
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i] / 1000.0;
}

static void report(bt_t *b) {
  uint64_t busy, steal, total;
  double secs = (double)(b->win_end_ns - b->win_start_ns) / 1e9;
  double hz = (double)sysconf(_SC_CLK_TCK);
  double cpu =
      b->tracker_pid > 0
          ? (double)(proc_cpu_ticks(b->tracker_pid) - b->cpu0_ticks) / hz
          : 0;
  proc_stat(&busy, &steal, &total);
  double dt = (double)(total - b->st_total0);
  qsort(b->lat_us, b->nlat, sizeof(*b->lat_us), cmp_u32);
  qsort(b->lag_us, b->nlag, sizeof(*b->lag_us), cmp_u32);
  printf("{\"peers\": %u, \"releases\": %u, \"spread\": %d, \"chunks\": %u, "
         "\"seconds\": %.1f, "
         "\"peers_up\": %u, \"all_up_s\": %.1f, \"announces\": %zu, "
         "\"p50_ms\": %.3f, "
         "\"p99_ms\": %.3f, \"max_ms\": %.3f, \"tracker_cpu_s\": %.2f, "
         "\"tracker_cpu_pct\": %.1f, \"tracker_cpu_us_per_announce\": %.1f, "
         "\"tracker_hwm_mib\": %.1f, "
         "\"machine_busy_pct\": %.1f, \"machine_steal_pct\": %.1f, "
         "\"connects\": %llu, \"handshakes\": %llu, \"refused\": %llu, "
         "\"announce_errors\": %llu, \"drops\": %llu, \"unanswered\": %llu, "
         "\"fail_timeout\": %llu, \"fail_closed\": %llu, "
         "\"fail_other\": %llu, \"generator_cpu_pct\": %.1f, "
         "\"tracker_runq_wait_pct\": %.1f, \"generator_lag_p99_ms\": %.3f, "
         "\"generator_lag_max_ms\": %.3f, \"last_announce_error\": \"%s\"}\n",
         b->npeers, b->nrels, (int)b->spread, b->chunks, secs, b->up_at_start,
         b->all_up_s, b->nlat, pct(b->lat_us, b->nlat, 0.50),
         pct(b->lat_us, b->nlat, 0.99), pct(b->lat_us, b->nlat, 1.0), cpu,
         secs > 0 ? 100.0 * cpu / secs : 0,
         b->nlat > 0 ? 1e6 * cpu / (double)b->nlat : 0,
         b->tracker_pid > 0 ? proc_hwm_kib(b->tracker_pid) / 1024.0 : 0,
         dt > 0 ? 100.0 * (double)(busy - b->st_busy0) / dt : 0,
         dt > 0 ? 100.0 * (double)(steal - b->st_steal0) / dt : 0,
         (unsigned long long)b->connects, (unsigned long long)b->links,
         (unsigned long long)b->refused, (unsigned long long)b->announce_errors,
         (unsigned long long)b->drops,
         (unsigned long long)(b->sent - b->replies),
         (unsigned long long)b->fail_timeout, (unsigned long long)b->fail_eof,
         (unsigned long long)b->fail_other,
         secs > 0 ? 100.0 * (self_cpu_s() - b->self_cpu0) / secs : 0,
         secs > 0 && b->tracker_pid > 0
             ? (double)(proc_runq_ns(b->tracker_pid) - b->runq0_ns) / 1e7 / secs
             : 0,
         pct(b->lag_us, b->nlag, 0.99), pct(b->lag_us, b->nlag, 1.0),
         b->last_error);
  fflush(stdout);
}

/* Phase 0: every second, until all nodes are up or --max-wait passed;
 * phase 1: one interval more; phase 2: the window; then the report. */
static void on_phase(uv_timer_t *t) {
  bt_t *b = t->data;
  double elapsed = (double)(uv_hrtime() - b->t0_ns) / 1e9;
  if (b->phase_no == 0) {
    if (b->up < b->npeers && elapsed < (double)b->max_wait_s) {
      uv_timer_start(t, on_phase, 1000, 0);
      return;
    }
    b->phase_no = 1;
    uv_timer_start(t, on_phase, BT_INTERVAL_MS + 1000u, 0);
    return;
  }
  if (b->phase_no == 1) { /* warm-up over: the window opens */
    b->phase_no = 2;
    b->win_start_ns = uv_hrtime();
    b->up_at_start = b->up;
    b->sent = b->replies = 0;
    if (b->tracker_pid > 0) {
      b->cpu0_ticks = proc_cpu_ticks(b->tracker_pid);
      b->runq0_ns = proc_runq_ns(b->tracker_pid);
    }
    proc_stat(&b->st_busy0, &b->st_steal0, &b->st_total0);
    b->self_cpu0 = self_cpu_s();
    uv_timer_start(t, on_phase, (uint64_t)b->seconds * 1000u, 0);
    return;
  }
  b->win_end_ns = uv_hrtime();
  report(b);
  /* 2N sockets and timers: the process exit closes them at once; a
   * GOODBYE to each would only load the tracker being measured. */
  exit(0);
}

static void ramp_start(bt_t *b) {
  uint64_t s = 0x5EEDull;
  for (uint32_t i = 0; i < b->npeers; i++) {
    bt_peer_t *p = &b->peers[i];
    p->b = b;
    p->idx = i;
    p->rng = ((uint64_t)i + 1u) * 0x9E3779B97F4A7C15ull;
    p->backoff_ms = BT_BACKOFF_MIN_MS;
    p->interval_ms = BT_INTERVAL_MS;
    uv_timer_init(b->loop, &p->timer);
    p->timer.data = p;
    for (uint32_t r = 0; r < b->nrels; r++) {
      uint8_t *h = p->have + (size_t)r * b->nbytes;
      for (uint32_t c = 0; c < b->chunks; c++)
        if (is_seed(p, r) || ws_xorshift64(&s) % 2u == 0)
          h[c / 8u] |= (uint8_t)(0x80u >> (c % 8u));
    }
    uint64_t at = (uint64_t)b->ramp_s * 1000u * i / b->npeers;
    uv_timer_start(&p->timer, on_peer_timer, at, 0);
  }
  uv_timer_init(b->loop, &b->phase);
  b->phase.data = b;
  uv_timer_init(b->loop, &b->lag_timer);
  b->lag_timer.data = b;
  uv_timer_start(&b->lag_timer, on_lag, BT_LAG_PERIOD_MS, BT_LAG_PERIOD_MS);
  b->t0_ns = uv_hrtime();
  uv_timer_start(&b->phase, on_phase, (uint64_t)b->ramp_s * 1000u, 0);
}

/* ---- setup -------------------------------------------------------------- */

static int key_load(const char *path, uint8_t key[WS_CLUSTER_KEY_LEN]) {
  char hex[256];
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  size_t n = fread(hex, 1, sizeof(hex) - 1, f);
  fclose(f);
  hex[n] = '\0';
  for (unsigned i = 0; i < WS_CLUSTER_KEY_LEN; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1)
      return -1;
    key[i] = (uint8_t)v;
  }
  return 0;
}

static void raise_nofile(uint32_t need) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return;
  rl.rlim_cur = rl.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < need)
    fprintf(stderr, "bench_tracker: open-file limit %llu < %u needed\n",
            (unsigned long long)rl.rlim_cur, need);
}

static int usage(void) {
  fprintf(stderr, "usage: bench_tracker --port P --key-file F --peers N "
                  "--releases R [--host H] [--seconds S] [--ramp-s S] "
                  "[--chunks C] [--tracker-pid PID] [--max-wait S] "
                  "[--spread 1]\n");
  return 2;
}

static int parse(bt_t *b, int argc, char **argv, const char **key_file) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    bool num = errno == 0 && *end == '\0' && end != v && n <= 1000000ul;
    if (strcmp(k, "--host") == 0)
      snprintf(b->host, sizeof(b->host), "%s", v);
    else if (strcmp(k, "--key-file") == 0)
      *key_file = v;
    else if (!num)
      return -1;
    else if (strcmp(k, "--port") == 0 && n > 0 && n < 65536)
      b->port = (uint16_t)n;
    else if (strcmp(k, "--peers") == 0 && n > 0)
      b->npeers = (uint32_t)n;
    else if (strcmp(k, "--releases") == 0 && n > 0 && n <= BT_RELEASES_MAX)
      b->nrels = (uint32_t)n;
    else if (strcmp(k, "--seconds") == 0 && n > 0)
      b->seconds = (uint32_t)n;
    else if (strcmp(k, "--ramp-s") == 0)
      b->ramp_s = (uint32_t)n;
    else if (strcmp(k, "--chunks") == 0 && n > 0 && n <= WS_MAX_TOTAL_CHUNKS)
      b->chunks = (uint32_t)n;
    else if (strcmp(k, "--spread") == 0)
      b->spread = n != 0;
    else if (strcmp(k, "--max-wait") == 0)
      b->max_wait_s = (uint32_t)n;
    else if (strcmp(k, "--tracker-pid") == 0)
      b->tracker_pid = (int)n;
    else
      return -1;
  }
  return b->port != 0 && *key_file != NULL && b->npeers > 0 && b->nrels > 0
             ? 0
             : -1;
}

int main(int argc, char **argv) {
  static bt_t b;
  const char *key_file = NULL;
  snprintf(b.host, sizeof(b.host), "127.0.0.1");
  b.seconds = 30;
  b.ramp_s = 10;
  b.max_wait_s = 120;
  b.chunks = 1024;
  if (argc % 2 != 1 || parse(&b, argc, argv, &key_file) != 0)
    return usage();
  wire_conn_cfg_init(&b.cfg);
  if (key_load(key_file, b.cfg.key) != 0) {
    fprintf(stderr, "bench_tracker: %s: want 64 hex characters\n", key_file);
    return 2;
  }
  b.cfg.role = WS_ROLE_PEER;
  b.cfg.idle_timeout_ms = 0; /* quiet between announces, like p2pd */
  b.cfg.max_payload = 0;
  b.nbytes = (b.chunks + 7u) / 8u;
  for (uint32_t r = 0; r < b.nrels; r++)
    for (uint32_t i = 0; i < WS_PROTO_DIGEST_LEN; i++)
      b.digests[r][i] = (uint8_t)(0xB0u + r * 7u + i * 13u);
  /* digests[nrels] stays all zero: the presence digest */
  signal(SIGPIPE, SIG_IGN); /* a tracker that closes on us: an error, no kill */
  raise_nofile(b.npeers + 64u);
  b.peers = calloc(b.npeers, sizeof(*b.peers));
  uint8_t *have = calloc((size_t)b.npeers * b.nrels, b.nbytes);
  if (b.peers == NULL || have == NULL) {
    fprintf(stderr, "bench_tracker: out of memory\n");
    return 1;
  }
  for (uint32_t i = 0; i < b.npeers; i++)
    b.peers[i].have = have + (size_t)i * b.nrels * b.nbytes;
  b.loop = uv_default_loop();
  ramp_start(&b);
  return uv_run(b.loop, UV_RUN_DEFAULT);
}
