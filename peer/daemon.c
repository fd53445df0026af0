/* daemon.c - p2pd's lifecycle (state diagram in daemon.h): setup and
 * wiring (context, files, origin, swarm with its want hook into the
 * release table, releases, API), the startup scan of the cache, signals,
 * systemd notification and the ordered shutdown.
 *
 * Owns the loop and every top-level object on it. Thread: loop thread;
 * daemon_open_work and daemon_store_close_work run on workers.
 */
#include "daemon.h"

#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/bufpool.h"
#include "core/tunables.h"
#include "release/job_record.h"
#include "ws_log.h"

/* Shutdown steps, driven by stop_timer while STOPPING. */
enum {
  STOP_DRAIN,       /* API closing, transfers canceled, jobs finishing */
  STOP_CLOSE_FILES, /* partial handles closing on workers */
  STOP_CLOSE_STORE, /* store closing on a worker */
  STOP_CLOSE_S3,    /* S3 client closing */
  STOP_DONE
};
#define DAEMON_STOP_POLL_MS 10

static const char *daemon_state_name(peer_daemon_state_t s) {
  static const char *const names[PEER_DAEMON_STATE_LAST] = {
      "STARTING", "RUNNING", "STOPPING", "STOPPED"};
  return s < PEER_DAEMON_STATE_LAST ? names[s] : "?";
}

static void daemon_set_state(peer_daemon_t *d, peer_daemon_state_t to) {
  static const uint8_t legal[PEER_DAEMON_STATE_LAST][PEER_DAEMON_STATE_LAST] = {
      [PEER_DAEMON_STARTING] =
          {[PEER_DAEMON_RUNNING] = 1, [PEER_DAEMON_STOPPING] = 1},
      [PEER_DAEMON_RUNNING] = {[PEER_DAEMON_STOPPING] = 1},
      [PEER_DAEMON_STOPPING] = {[PEER_DAEMON_STOPPED] = 1},
  };
  assert(legal[d->state][to]);
  WS_LOGD("daemon: %s -> %s", daemon_state_name(d->state),
          daemon_state_name(to));
  d->state = to;
  /* Modules see the lifecycle only as this flag: no new work after it
   * drops. */
  d->ctx.running = to == PEER_DAEMON_RUNNING;
}

/* ---- systemd notification (sd_notify protocol, no libsystemd) ---------- */

/* Sends msg to $NOTIFY_SOCKET (a unix datagram socket; '@' = abstract).
 * Non-blocking; failures are logged once at debug level: systemd may not
 * be there at all. */
static void daemon_notify(const char *msg) {
  const char *path = getenv("NOTIFY_SOCKET");
  if (path == NULL || *path == '\0')
    return;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  size_t len = strlen(path);
  if (len >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@')) {
    WS_LOGW("NOTIFY_SOCKET '%s' is not usable", path);
    return;
  }
  memcpy(sa.sun_path, path, len);
  if (path[0] == '@')
    sa.sun_path[0] = '\0';
  socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return;
  if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
             salen) < 0)
    WS_LOGW("notify %s: %s", path, strerror(errno));
  close(fd);
}

/* ---- startup: open the cache and list what it holds -------------------- */

typedef struct {
  peer_daemon_t *d;
  const peer_settings_t *cfg; /* the worker reads only this of d */
  int status;
  ws_store_t *store;
  ws_manifest_t **ready; /* published releases' manifests */
  char **ready_bytes;    /* and their bytes (swarm mode: to seed) */
  size_t *ready_len;
  ws_cache_release_info_t *infos;
  size_t nready;
  peer_job_record_t *jobs;
  size_t njobs;
} daemon_open_t;

static void daemon_open_work(void *arg) {
  daemon_open_t *o = arg;
  const peer_settings_t *cfg = o->cfg;
  ws_cache_release_info_t *infos = NULL;
  size_t n = 0;
  o->status = ws_store_open(cfg->cache_dir, cfg->capacity_bytes, &o->store);
  if (o->status != 0)
    return;
  o->status = ws_cache_list(ws_store_cache(o->store), &infos, &n);
  if (o->status != 0)
    return;
  o->ready = calloc(n + 1, sizeof(*o->ready));
  o->ready_bytes = calloc(n + 1, sizeof(*o->ready_bytes));
  o->ready_len = calloc(n + 1, sizeof(*o->ready_len));
  o->infos = calloc(n + 1, sizeof(*o->infos));
  if (o->ready == NULL || o->infos == NULL || o->ready_bytes == NULL ||
      o->ready_len == NULL) {
    o->status = -ENOMEM;
    goto free_infos;
  }
  for (size_t i = 0; i < n; i++) {
    char *bytes = NULL;
    size_t len = 0;
    char ds[WS_DIGEST_STR_LEN + 1];
    if (infos[i].published_ns == 0)
      continue;
    ws_digest_to_str(&infos[i].digest, ds);
    int rc = ws_store_release_lookup(o->store, &infos[i].digest, &bytes, &len);
    if (rc == 0) {
      rc = ws_manifest_parse(bytes, len, NULL, &o->ready[o->nready], NULL, 0);
      if (rc != 0)
        free(bytes);
    }
    if (rc != 0) {
      WS_LOGW("release %s: unreadable manifest in cache (%s); not listed", ds,
              ws_strerror(rc));
      continue;
    }
    o->ready_bytes[o->nready] = bytes;
    o->ready_len[o->nready] = len;
    o->infos[o->nready++] = infos[i];
  }
  if (peer_job_records_read(ws_store_root(o->store), &o->jobs, &o->njobs) != 0)
    WS_LOGW("cannot read job records; nothing resumed");
free_infos:
  free(infos);
}

/* The releases the cache holds join the table (and, in swarm mode, are
 * seeded from the start: the swarm takes manifest and bytes). */
static void daemon_list_ready(peer_daemon_t *d, daemon_open_t *o) {
  for (size_t i = 0; i < o->nready; i++) {
    if (peer_releases_add_ready(d->releases, o->ready[i], o->infos[i].pinned,
                                o->infos[i].published_ns / 1000000u) != 0)
      WS_LOGE("out of memory listing releases");
    else /* holds persisted in state/ (peer_release_hold) */
      peer_release_holds_set(
          peer_release_find(d->releases, &o->ready[i]->digest),
          o->infos[i].holds, o->infos[i].nholds);
    if (d->swarm != NULL) {
      peer_swarm_add_ready(d->swarm, o->ready[i], o->ready_bytes[i],
                           o->ready_len[i]);
      o->ready[i] = NULL;
      o->ready_bytes[i] = NULL;
    }
  }
}

static void daemon_open_free(daemon_open_t *o) {
  for (size_t i = 0; i < o->nready; i++) {
    ws_manifest_free(o->ready[i]);
    free(o->ready_bytes[i]);
  }
  free(o->ready);
  free(o->ready_bytes);
  free(o->ready_len);
  free(o->infos);
  peer_job_records_free(o->jobs, o->njobs);
  free(o);
}

static void daemon_open_after(void *arg, int status) {
  daemon_open_t *o = arg;
  peer_daemon_t *d = o->d;
  int rc = status != 0 ? status : o->status;
  d->ctx.store = o->store;
  if (rc != 0) {
    WS_LOGE("cache %s: cannot open: %s", d->cfg->cache_dir, ws_strerror(rc));
    peer_daemon_stop(d, 1);
  } else if (d->state == PEER_DAEMON_STARTING) {
    daemon_list_ready(d, o);
    daemon_set_state(d, PEER_DAEMON_RUNNING);
    /* --hf-cache: snapshots of releases gone while p2pd was down. */
    peer_releases_hf_prune(d->releases);
    ws_cache_stats_t cs;
    ws_cache_stats(ws_store_cache(d->ctx.store), &cs);
    WS_LOGI("cache %s open: %zu releases ready, %llu bytes used of %llu%s",
            d->cfg->cache_dir, o->nready, (unsigned long long)cs.used,
            (unsigned long long)cs.capacity,
            cs.capacity == 0 ? " (unlimited)" : "");
    for (size_t i = 0; i < o->njobs; i++)
      peer_releases_resume(d->releases, o->jobs[i].uri, &o->jobs[i].digest);
    if (d->swarm != NULL)
      peer_swarm_running(d->swarm); /* wants heard before were dropped */
    daemon_notify("READY=1\nSTATUS=serving");
  }
  daemon_open_free(o);
}

/* ---- shutdown ----------------------------------------------------------- */

static void daemon_handle_closed(uv_handle_t *h) {}

static void daemon_api_closed(void *arg) {
  peer_daemon_t *d = arg;
  d->api_open = 0;
}

static void daemon_metrics_closed(void *arg) {
  peer_daemon_t *d = arg;
  d->metrics_open = 0;
}

static void daemon_store_close_work(void *arg) {
  peer_daemon_t *d = arg;
  ws_store_close(d->ctx.store);
}

static void daemon_store_close_after(void *arg, int status) {
  peer_daemon_t *d = arg;
  d->ctx.store = NULL;
}

static void daemon_s3_closed(void *arg) {
  peer_daemon_t *d = arg;
  d->ctx.s3 = NULL;
}

/* One step of STOPPING per tick, each once the previous has drained. */
static void daemon_stop_tick(uv_timer_t *t) {
  peer_daemon_t *d = t->data;
  unsigned jobs = peer_workq_pending(&d->ctx.workq);
  switch (d->stop_step) {
  case STOP_DRAIN:
    if (d->api_open || d->metrics_open || jobs > 0 ||
        (d->origin != NULL && peer_origin_inflight(d->origin) > 0) ||
        (d->swarm != NULL && peer_swarm_busy(d->swarm)))
      return;
    peer_files_close_all(d->files);
    d->stop_step = STOP_CLOSE_FILES;
    return;
  case STOP_CLOSE_FILES:
    if (jobs > 0)
      return;
    if (d->ctx.store != NULL &&
        peer_ctx_queue(&d->ctx, daemon_store_close_work,
                       daemon_store_close_after, d) != 0) {
      /* Cannot queue: closing here would block; the OS frees it at exit
       * and the store is crash-safe. */
      d->ctx.store = NULL;
    }
    d->stop_step = STOP_CLOSE_STORE;
    return;
  case STOP_CLOSE_STORE:
    if (jobs > 0 || d->ctx.store != NULL)
      return;
    d->stop_step = STOP_CLOSE_S3;
    ws_s3_close(d->ctx.s3, daemon_s3_closed, d);
    return;
  case STOP_CLOSE_S3:
    if (d->ctx.s3 != NULL)
      return;
    d->stop_step = STOP_DONE;
    daemon_set_state(d, PEER_DAEMON_STOPPED);
    uv_close((uv_handle_t *)&d->sig_term, daemon_handle_closed);
    uv_close((uv_handle_t *)&d->sig_int, daemon_handle_closed);
    uv_close((uv_handle_t *)t, daemon_handle_closed);
    return;
  default:
    return;
  }
}

void peer_daemon_stop(peer_daemon_t *d, int exit_code) {
  if (d->state == PEER_DAEMON_STOPPING || d->state == PEER_DAEMON_STOPPED)
    return;
  d->exit_code = exit_code;
  WS_LOGI("stopping: %u transfers and %u worker jobs to drain",
          d->origin != NULL ? peer_origin_inflight(d->origin) : 0,
          peer_workq_pending(&d->ctx.workq));
  daemon_set_state(d, PEER_DAEMON_STOPPING);
  daemon_notify("STOPPING=1");
  if (d->api_open)
    peer_api_close(d->api, daemon_api_closed, d);
  if (d->metrics_open)
    peer_metrics_close(d->metrics, daemon_metrics_closed, d);
  if (d->releases != NULL)
    peer_releases_stop(d->releases);
  if (d->origin != NULL)
    peer_origin_stop(d->origin);
  if (d->swarm != NULL)
    peer_swarm_stop(d->swarm);
  /* Polled, not event-driven: shutdown is rare and the steps depend on
   * counters spread over every module. */
  uv_timer_start(&d->stop_timer, daemon_stop_tick, 0, DAEMON_STOP_POLL_MS);
}

static void daemon_on_signal(uv_signal_t *h, int signum) {
  peer_daemon_t *d = h->data;
  WS_LOGI("signal %d (%s)", signum, signum == SIGTERM ? "SIGTERM" : "SIGINT");
  peer_daemon_stop(d, 0);
}

/* ---- setup ------------------------------------------------------------- */

/* The swarm's want hook: the release table decides. */
static void daemon_on_want(void *arg, const char *uri,
                           const ws_hash_t *digest) {
  peer_daemon_t *d = arg;
  peer_releases_want(d->releases, uri, digest);
}

/* The swarm's stalled_out hook: the release fails (swarm_stall.c). */
static void daemon_on_stalled_out(void *arg, const ws_hash_t *digest, int err,
                                  const char *msg) {
  peer_daemon_t *d = arg;
  peer_releases_stalled_out(d->releases, digest, err, msg);
}

/* The context's S3 client and buffer pool. */
static int daemon_ctx_init(peer_daemon_t *d) {
  const peer_settings_t *cfg = d->cfg;
  ws_s3_config_t s3c;
  d->ctx.loop = &d->loop;
  d->ctx.cfg = cfg;
  peer_workq_init(&d->ctx.workq, &d->loop);
  ws_s3_config_default(&s3c);
  ws_s3_config_from_env(&s3c);
  s3c.max_concurrency = cfg->s3_concurrency + PEER_S3_CONTROL_SLOTS;
  int rc = peer_bufpool_new(PEER_BUF_BYTES, PEER_BUF_COUNT, &d->ctx.pool);
  if (rc != 0) {
    WS_LOGE("setup: %s", ws_strerror(rc));
    return rc;
  }
  rc = ws_s3_new(&d->loop, &s3c, &d->ctx.s3);
  if (rc != 0)
    WS_LOGE("s3: bad configuration (endpoint '%s'): %s",
            s3c.endpoint != NULL ? s3c.endpoint : "(aws)", ws_strerror(rc));
  return rc;
}

/* Every module gets its collaborators here, lowest layer first. */
static int daemon_wire(peer_daemon_t *d) {
  const peer_settings_t *cfg = d->cfg;
  int rc;
  if ((rc = peer_files_new(&d->ctx, &d->files)) != 0 ||
      (rc = peer_origin_new(&d->ctx, d->files, cfg->s3_concurrency,
                            &d->origin)) != 0) {
    WS_LOGE("setup: %s", ws_strerror(rc));
    return rc;
  }
  d->swarm_hooks.arg = d;
  d->swarm_hooks.want = daemon_on_want;
  d->swarm_hooks.stalled_out = daemon_on_stalled_out;
  if (cfg->swarm && (rc = peer_swarm_new(&d->ctx, d->files, d->origin,
                                         &d->swarm_hooks, &d->swarm)) != 0)
    return rc;
  rc = peer_releases_new(&d->ctx, d->files, d->swarm, &d->releases);
  if (rc != 0) {
    WS_LOGE("setup: %s", ws_strerror(rc));
    return rc;
  }
  rc = peer_api_new(&d->ctx, d->releases, d->swarm, &d->api);
  d->api_open = d->api != NULL;
  if (rc == 0 && cfg->metrics != NULL) {
    rc = peer_metrics_new(&d->ctx, d->releases, d->swarm, cfg->metrics,
                          &d->metrics);
    d->metrics_open = d->metrics != NULL;
  }
  return rc;
}

int peer_daemon_init(peer_daemon_t *d, const peer_settings_t *cfg) {
  memset(d, 0, sizeof(*d));
  d->cfg = cfg;
  d->state = PEER_DAEMON_STARTING;
  d->started_unix_ms = peer_now_unix_ms();
  int rc = uv_loop_init(&d->loop);
  if (rc != 0)
    return rc;
  uv_signal_init(&d->loop, &d->sig_term);
  uv_signal_init(&d->loop, &d->sig_int);
  uv_timer_init(&d->loop, &d->stop_timer);
  d->sig_term.data = d->sig_int.data = d->stop_timer.data = d;
  uv_signal_start(&d->sig_term, daemon_on_signal, SIGTERM);
  uv_signal_start(&d->sig_int, daemon_on_signal, SIGINT);
  rc = daemon_ctx_init(d);
  if (rc == 0)
    rc = daemon_wire(d);
  return rc;
}

void peer_daemon_start(peer_daemon_t *d) {
  daemon_open_t *o = calloc(1, sizeof(*o));
  if (o != NULL) {
    o->d = d;
    o->cfg = d->cfg;
  }
  if (o == NULL ||
      peer_ctx_queue(&d->ctx, daemon_open_work, daemon_open_after, o) != 0) {
    free(o);
    WS_LOGE("cannot start: out of memory");
    peer_daemon_stop(d, 1);
  }
}

int peer_daemon_run(peer_daemon_t *d) {
  peer_daemon_start(d);
  uv_run(&d->loop, UV_RUN_DEFAULT);
  /* Upper layers first: each unregisters from what it was given. */
  peer_releases_free(d->releases);
  peer_api_free(d->api);
  peer_metrics_free(d->metrics);
  peer_swarm_free(d->swarm);
  peer_origin_free(d->origin);
  peer_files_free(d->files);
  peer_bufpool_free(d->ctx.pool);
  if (uv_loop_close(&d->loop) != 0)
    WS_LOGW("loop closed with handles left");
  WS_LOGI("stopped");
  return d->exit_code;
}
