/* s3_creds.c - the credential provider: runs the AWS chain without ever
 * blocking the loop, keeps the current credentials and refreshes temporary
 * ones a few minutes (jittered) before they expire.
 *
 * Owns: the current s3_creds_t, a uv_work_t for the local half of the chain
 * (env, config and credentials files, credential_process: s3_creds_plan on
 * the threadpool), at most one s3_fetch_t for the network half, one
 * uv_timer (refresh and fetch retries), and the settings the first plan
 * found (region, the profile's endpoint and addressing).
 * Thread: loop thread (the plan runs on a worker with its own copies).
 *
 * States:  IDLE --resolve--> PLANNING --env/file/process--> IDLE (installed)
 *                               |--webid/assume/container/imds--> FETCHING
 *          FETCHING --reply ok--> IDLE (installed) | --fail--> IDLE (error)
 * When no region is set anywhere, the first resolve asks IMDS for it
 * (token, then placement/region; S3_IMDS_TIMEOUT_MS each) in FETCHING
 * before anything else; a failure there only means "us-east-1".
 *          any --close--> CLOSING --work done + timer closed--> freed
 * A resolve that fails while older credentials are still valid keeps them
 * and tries again on the timer.
 */
#include "s3-int.h"

#include "ws_log.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROV_NET_ATTEMPTS 3
#define PROV_RETRY_MS 10000 /* after a failed refresh, old creds valid */
#define PROV_VALID_SLACK_MS 10000

typedef enum {
  PROV_IDLE,
  PROV_PLANNING,
  PROV_FETCHING,
  PROV_CLOSING,
  PROV_LAST
} prov_state_t;

typedef enum {
  IMDS_TOKEN,
  IMDS_ROLE,
  IMDS_CREDS,
  IMDS_REGION_TOKEN, /* the region lookup: its own token, then */
  IMDS_REGION,       /* placement/region */
  IMDS_LAST
} imds_step_t;

struct s3_provider_s {
  uv_loop_t *loop;
  ws_curl_uv_t *cu;
  prov_state_t state;
  char *profile;
  char *ca_bundle;
  char *region;       /* the client's explicit region, or NULL */
  char *endpoint;     /* the profile's endpoint_url (first plan) */
  char *found_region; /* env/profile (first plan) or IMDS */
  ws_s3_addressing_t addr;
  int settings_done;
  unsigned timeout_ms;
  unsigned process_timeout_ms;
  s3_creds_t creds;
  int have;
  uint64_t refreshes;
  uv_work_t work;
  int work_busy;
  s3_env_t env;
  s3_plan_t plan;
  s3_fetch_t *fetch;
  unsigned net_attempt;
  imds_step_t imds;
  char *imds_token;
  char *imds_role;
  uv_timer_t timer;
  int timer_retry; /* timer fires a retry of the fetch, not a refresh */
  int timer_closed;
  char errmsg[S3_ERRMSG_LEN];
  s3_provider_cb cb;
  void *arg;
  void (*close_cb)(void *);
  void *close_arg;
};

static const char *state_name[PROV_LAST] = {"idle", "planning", "fetching",
                                            "closing"};

static void set_state(s3_provider_t *p, prov_state_t s) {
  assert(p->state != PROV_CLOSING || s == PROV_CLOSING);
  assert(s != PROV_FETCHING || p->state == PROV_PLANNING ||
         p->state == PROV_FETCHING);
  WS_LOGD("s3 creds: %s -> %s", state_name[p->state], state_name[s]);
  p->state = s;
}

static void prov_maybe_free(s3_provider_t *p) {
  if (p->state != PROV_CLOSING || p->work_busy || !p->timer_closed)
    return;
  void (*cb)(void *) = p->close_cb;
  void *arg = p->close_arg;
  s3_creds_clear(&p->creds);
  s3_plan_clear(&p->plan);
  free(p->imds_token);
  free(p->imds_role);
  free(p->profile);
  free(p->ca_bundle);
  free(p->region);
  free(p->endpoint);
  free(p->found_region);
  free(p);
  if (cb)
    cb(arg);
}

static void on_timer_closed(uv_handle_t *h) {
  s3_provider_t *p = h->data;
  p->timer_closed = 1;
  prov_maybe_free(p);
}

static void on_timer(uv_timer_t *t);

/* A pending refresh must not keep a loop alive on its own (a tool's loop
 * should end when its work is done); a fetch retry in progress must. */
static void timer_arm(s3_provider_t *p, uint64_t delay_ms, int retry) {
  p->timer_retry = retry;
  if (retry)
    uv_ref((uv_handle_t *)&p->timer);
  else
    uv_unref((uv_handle_t *)&p->timer);
  uv_timer_start(&p->timer, on_timer, delay_ms, 0);
}

static void prov_finish(s3_provider_t *p, int status) {
  s3_plan_clear(&p->plan);
  free(p->imds_token);
  free(p->imds_role);
  p->imds_token = p->imds_role = NULL;
  set_state(p, PROV_IDLE);
  if (status != 0 && s3_provider_get(p))
    timer_arm(p, PROV_RETRY_MS + s3_rand32() % 5000, 0);
  p->cb(p->arg, status);
}

static void prov_install(s3_provider_t *p, s3_creds_t *c, const char *source) {
  s3_creds_clear(&p->creds);
  p->creds = *c;
  memset(c, 0, sizeof(*c));
  if (source)
    snprintf(p->creds.source, sizeof(p->creds.source), "%s", source);
  p->have = 1;
  p->refreshes++;
  p->errmsg[0] = '\0';
  int64_t now = (int64_t)s3_now_ms();
  int64_t at = s3_creds_refresh_at(now, p->creds.expires_ms, s3_rand32());
  if (at >= 0)
    timer_arm(p, (uint64_t)(at - now), 0);
  else
    uv_timer_stop(&p->timer);
  prov_finish(p, 0);
}

static void prov_fail(s3_provider_t *p, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void prov_fail(s3_provider_t *p, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(p->errmsg, sizeof(p->errmsg), fmt, ap) < 0)
    p->errmsg[0] = '\0';
  va_end(ap);
  prov_finish(p, status);
}

static void prov_fetch(s3_provider_t *p);

static void on_timer(uv_timer_t *t) {
  s3_provider_t *p = t->data;
  if (p->timer_retry && p->state == PROV_FETCHING)
    prov_fetch(p);
  else
    s3_provider_resolve(p, 0);
}

static void on_fetch(void *arg, int status, long http, const char *body,
                     size_t len, const char *err);

static struct curl_slist *hdr_add(struct curl_slist *l, const char *name,
                                  const char *v, int *bad) {
  char line[S3_CREDS_FIELD_MAX + 128];
  snprintf(line, sizeof(line), "%s: %s", name, v);
  struct curl_slist *n = curl_slist_append(l, line);
  if (!n)
    *bad = 1;
  return n ? n : l;
}

static const char *eff_region(const s3_provider_t *p) {
  return p->found_region ? p->found_region : "us-east-1";
}

/* An IMDS call: the token PUT or a GET with the token. */
static struct curl_slist *imds_req(s3_provider_t *p, char *url, size_t len,
                                   const char **method, int *bad) {
  if (p->imds == IMDS_TOKEN || p->imds == IMDS_REGION_TOKEN) {
    *method = "PUT";
    snprintf(url, len, "%s/latest/api/token", p->plan.imds_base);
    return hdr_add(NULL, "X-aws-ec2-metadata-token-ttl-seconds", "21600", bad);
  }
  if (p->imds == IMDS_REGION)
    snprintf(url, len, "%s/latest/meta-data/placement/region",
             p->plan.imds_base);
  else
    snprintf(url, len, "%s/latest/meta-data/iam/security-credentials/%s",
             p->plan.url, p->imds == IMDS_CREDS ? p->imds_role : "");
  return hdr_add(NULL, "X-aws-ec2-metadata-token", p->imds_token, bad);
}

/* Starts the network call for the current plan / IMDS step. */
static void prov_fetch(s3_provider_t *p) {
  struct curl_slist *h = NULL;
  int bad = 0;
  char url[4096], sigv4[96] = "";
  const char *method = "GET";
  const s3_creds_t *sign = NULL;
  unsigned tmo = p->timeout_ms;
  if (p->imds >= IMDS_REGION_TOKEN || p->plan.src == S3_SRC_IMDS) {
    tmo = S3_IMDS_TIMEOUT_MS;
    h = imds_req(p, url, sizeof(url), &method, &bad);
  } else if (p->plan.src == S3_SRC_CONTAINER) {
    snprintf(url, sizeof(url), "%s", p->plan.url);
    if (p->plan.auth && *p->plan.auth)
      h = hdr_add(h, "Authorization", p->plan.auth, &bad);
  } else { /* STS: web identity (unsigned) or AssumeRole (signed) */
    method = "POST";
    if (p->plan.url)
      snprintf(url, sizeof(url), "%s", p->plan.url);
    else
      snprintf(url, sizeof(url), "https://sts.%s.amazonaws.com/",
               eff_region(p));
    h = hdr_add(h, "Content-Type", "application/x-www-form-urlencoded", &bad);
    if (p->plan.src == S3_SRC_ASSUME) {
      sign = &p->plan.source;
      snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:sts", eff_region(p));
      if (sign->token)
        h = hdr_add(h, "X-Amz-Security-Token", sign->token, &bad);
    }
  }
  if (bad) {
    curl_slist_free_all(h);
    prov_fail(p, -ENOMEM, "credentials: out of memory");
    return;
  }
  p->net_attempt++;
  p->fetch = s3_fetch_start(p->cu, method, url, h, p->plan.body, tmo,
                            p->ca_bundle, sign, sigv4, on_fetch, p);
  if (!p->fetch)
    prov_fail(p, WS_ECREDS, "credentials: cannot start request to %s", url);
}

static const char *src_name(s3_src_t s) {
  switch (s) {
  case S3_SRC_WEBID:
    return "web-identity";
  case S3_SRC_CONTAINER:
    return "container";
  case S3_SRC_IMDS:
    return "imds";
  case S3_SRC_ASSUME:
    return "assume-role";
  default:
    return "?";
  }
}

static void prov_continue(s3_provider_t *p);

/* A step of the IMDS region lookup answered (body NULL: it failed). */
static void on_region(s3_provider_t *p, const char *body) {
  size_t n = body ? strcspn(body, "\r\n") : 0;
  char *v = n > 0 && n <= 32 ? strndup(body, n) : NULL;
  if (v && p->imds == IMDS_REGION_TOKEN) {
    p->imds_token = v;
    p->imds = IMDS_REGION;
    prov_fetch(p);
    return;
  }
  if (v && s3_region_valid(v)) {
    WS_LOGI("s3: region %s from IMDS", v);
    p->found_region = v;
  } else {
    WS_LOGI("s3: no region set and none from IMDS at %s: using us-east-1",
            p->plan.imds_base);
    free(v);
  }
  free(p->imds_token);
  p->imds_token = NULL;
  p->imds = IMDS_TOKEN;
  prov_continue(p);
}

static void on_fetch(void *arg, int status, long http, const char *body,
                     size_t len, const char *err) {
  s3_provider_t *p = arg;
  p->fetch = NULL;
  if (p->state == PROV_CLOSING)
    return;
  if (p->imds >= IMDS_REGION_TOKEN) {
    on_region(p, status == 0 && http == 200 ? body : NULL);
    return;
  }
  const char *src = src_name(p->plan.src);
  if (p->plan.src == S3_SRC_IMDS && (status != 0 || http != 200)) {
    prov_fail(p, WS_ECREDS,
              "no AWS credentials: environment, shared file, web identity and "
              "container endpoint not configured; IMDS at %s: %s",
              p->plan.url, status ? err : "no role credentials");
    return;
  }
  int transient = status == WS_EHTTP || http >= 500 || http == 429;
  if ((status != 0 || http != 200) && transient &&
      p->net_attempt < PROV_NET_ATTEMPTS) {
    timer_arm(p, 200u << p->net_attempt, 1);
    return;
  }
  if (status != 0) {
    prov_fail(p, WS_ECREDS, "credentials (%s): %s", src, err);
    return;
  }
  if (http != 200) {
    char *code = NULL;
    if (s3_xml_get(body, len, "Code", 128, &code) != 0)
      code = NULL;
    char m[64];
    snprintf(m, sizeof(m), "HTTP %ld%s%s", http, code ? " " : "",
             code ? code : "");
    free(code);
    prov_fail(p, WS_ECREDS, "credentials (%s): endpoint answered %s", src, m);
    return;
  }
  s3_creds_t c = {0};
  int rc;
  switch (p->plan.src) {
  case S3_SRC_WEBID:
  case S3_SRC_ASSUME:
    rc = s3_creds_parse_sts(body, len, &c);
    break;
  case S3_SRC_CONTAINER:
    rc = s3_creds_parse_json(body, len, &c);
    break;
  default:
    if (p->imds == IMDS_TOKEN || p->imds == IMDS_ROLE) {
      size_t n = strcspn(body, "\r\n");
      char *v = n > 0 && n <= 1024 ? strndup(body, n) : NULL;
      if (!v || (p->imds == IMDS_ROLE && strpbrk(v, "/?#% "))) {
        free(v);
        prov_fail(p, WS_ECREDS, "credentials (imds): bad reply from %s",
                  p->plan.url);
        return;
      }
      if (p->imds == IMDS_TOKEN) {
        p->imds_token = v;
        p->imds = IMDS_ROLE;
      } else {
        p->imds_role = v;
        p->imds = IMDS_CREDS;
      }
      p->net_attempt = 0;
      prov_fetch(p);
      return;
    }
    rc = s3_creds_parse_json(body, len, &c);
    break;
  }
  if (rc) {
    prov_fail(p, WS_ECREDS, "credentials (%s): malformed reply: %s", src,
              ws_strerror(rc));
    return;
  }
  prov_install(p, &c, src);
}

static void plan_work(uv_work_t *w) {
  s3_provider_t *p = w->data;
  s3_creds_plan(&p->env, &p->plan);
}

static void plan_after(uv_work_t *w, int status) {
  s3_provider_t *p = w->data;
  p->work_busy = 0;
  if (p->state == PROV_CLOSING) {
    prov_maybe_free(p);
    return;
  }
  if (status != 0) {
    prov_fail(p, WS_ECREDS, "credentials: %s", uv_strerror(status));
    return;
  }
  if (p->plan.status != 0) {
    prov_fail(p, p->plan.status, "%s", p->plan.errmsg);
    return;
  }
  if (!p->settings_done) { /* the client reads them once, after this */
    p->settings_done = 1;
    p->addr = p->plan.addressing;
    p->endpoint = p->plan.endpoint;
    p->found_region = p->plan.region;
    p->plan.endpoint = p->plan.region = NULL;
    if (!p->found_region && p->plan.imds_base) {
      set_state(p, PROV_FETCHING);
      p->net_attempt = 0;
      p->imds = IMDS_REGION_TOKEN;
      prov_fetch(p);
      return;
    }
  }
  prov_continue(p);
}

/* After the plan (and the region lookup): install or fetch. */
static void prov_continue(s3_provider_t *p) {
  switch (p->plan.src) {
  case S3_SRC_ENV:
  case S3_SRC_FILE:
  case S3_SRC_PROCESS: {
    s3_creds_t c = p->plan.creds;
    memset(&p->plan.creds, 0, sizeof(p->plan.creds));
    prov_install(p, &c, NULL);
    return;
  }
  default:
    if (p->state != PROV_FETCHING)
      set_state(p, PROV_FETCHING);
    p->net_attempt = 0;
    p->imds = IMDS_TOKEN;
    prov_fetch(p);
    return;
  }
}

int s3_provider_new(uv_loop_t *loop, ws_curl_uv_t *cu,
                    const ws_s3_config_t *cfg, s3_provider_cb cb, void *arg,
                    s3_provider_t **out) {
  s3_provider_t *p = calloc(1, sizeof(*p));
  if (!p)
    return -ENOMEM;
  p->loop = loop;
  p->cu = cu;
  p->cb = cb;
  p->arg = arg;
  p->timeout_ms = cfg->creds_timeout_ms ? cfg->creds_timeout_ms : 5000;
  p->process_timeout_ms = cfg->creds_process_timeout_ms
                              ? cfg->creds_process_timeout_ms
                              : S3_PROC_TIMEOUT_MS;
  p->profile = cfg->profile ? strdup(cfg->profile) : NULL;
  p->ca_bundle = cfg->ca_bundle ? strdup(cfg->ca_bundle) : NULL;
  p->region = cfg->region ? strdup(cfg->region) : NULL;
  if ((cfg->profile && !p->profile) || (cfg->ca_bundle && !p->ca_bundle) ||
      (cfg->region && !p->region)) {
    free(p->profile);
    free(p->ca_bundle);
    free(p->region);
    free(p);
    return -ENOMEM;
  }
  uv_timer_init(loop, &p->timer);
  p->timer.data = p;
  p->work.data = p;
  *out = p;
  return 0;
}

const s3_creds_t *s3_provider_get(s3_provider_t *p) {
  if (!p->have)
    return NULL;
  if (p->creds.expires_ms &&
      p->creds.expires_ms - (int64_t)s3_now_ms() < PROV_VALID_SLACK_MS)
    return NULL;
  return &p->creds;
}

void s3_provider_resolve(s3_provider_t *p, int force) {
  if (force) {
    s3_creds_clear(&p->creds);
    p->have = 0;
  }
  if (p->state != PROV_IDLE)
    return;
  set_state(p, PROV_PLANNING);
  uv_timer_stop(&p->timer);
  s3_plan_clear(&p->plan);
  s3_env_load(&p->env, p->profile, p->region);
  p->env.process_timeout_ms = p->process_timeout_ms;
  if (uv_queue_work(p->loop, &p->work, plan_work, plan_after) != 0) {
    prov_fail(p, WS_ECREDS, "credentials: cannot queue work");
    return;
  }
  p->work_busy = 1;
}

int s3_provider_busy(const s3_provider_t *p) {
  return p->state == PROV_PLANNING || p->state == PROV_FETCHING;
}

void s3_provider_settings(const s3_provider_t *p, const char **region,
                          const char **endpoint, ws_s3_addressing_t *addr) {
  *region = p->found_region;
  *endpoint = p->endpoint;
  *addr = p->addr;
}

const char *s3_provider_errmsg(const s3_provider_t *p) {
  return p->errmsg;
}

uint64_t s3_provider_refreshes(const s3_provider_t *p) {
  return p->refreshes;
}

void s3_provider_close(s3_provider_t *p, void (*cb)(void *), void *arg) {
  if (!p)
    return;
  p->close_cb = cb;
  p->close_arg = arg;
  set_state(p, PROV_CLOSING);
  s3_fetch_cancel(p->fetch);
  p->fetch = NULL;
  uv_timer_stop(&p->timer);
  uv_close((uv_handle_t *)&p->timer, on_timer_closed);
  /* A cancelled plan still runs plan_after (UV_ECANCELED), which frees. */
  if (p->work_busy)
    (void)uv_cancel((uv_req_t *)&p->work);
}
