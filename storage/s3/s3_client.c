/* s3_client.c - the S3 client object: configuration, the request queue,
 * dispatch (concurrency cap, credentials, backoff), cancellation, closing,
 * stats and the result accessors.
 *
 * Owns: the curl<->uv glue, the credential provider, every request not yet
 * DONE (a doubly linked list in submission order) and one uv_timer ("kick")
 * that runs dispatch on the next tick or when the earliest backoff ends.
 * Thread: the loop thread only.
 *
 * Requests are never started, finished or resumed from inside a curl
 * callback or from inside the public call that asked for it: those calls
 * set a flag and kick, and dispatch does the work from the timer. Finishing
 * a request runs its done callback and then frees it; a ws_s3_close() made
 * from inside such a callback waits until the frame unwinds.
 *
 * Settings the caller left unset (endpoint, region, addressing) come from
 * the profile, and the region maybe from IMDS, found by the provider's first
 * resolve; s3_configure applies them before the first request starts, so
 * no file is read and no IMDS call is made on the caller's thread.
 *
 * Client states: OPEN -> CLOSING (requests cancelled; glue, provider and
 * timer closing) -> freed when all three reported closed.
 *
 * Request states (s3_req_state_t in s3-int.h) change only in
 * s3_req_set_state, which checks each move against k_legal and keeps the
 * count of RUNNING requests (the concurrency cap's input) in step.
 */
#include "s3-int.h"

#include "ws_log.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s3_do_close(ws_s3_t *s3);

void s3_enter(ws_s3_t *s3) {
  s3->depth++;
}

void s3_leave(ws_s3_t *s3) {
  assert(s3->depth > 0);
  if (--s3->depth == 0 && s3->close_wanted && !s3->closing)
    s3_do_close(s3);
}

void s3_req_errmsg(ws_s3_req_t *r, const char *fmt, ...) {
  char m[S3_ERRMSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof(m), fmt, ap);
  va_end(ap);
  int n;
  if (r->op == S3_OP_CREDS)
    n = snprintf(r->errmsg, sizeof(r->errmsg), "%s", m);
  else
    n = snprintf(r->errmsg, sizeof(r->errmsg), "s3://%s/%s: %s", r->bucket,
                 r->key, m);
  if (n < 0) /* truncation is fine: the message stays one bounded line */
    r->errmsg[0] = '\0';
}

static void req_free(ws_s3_req_t *r) {
  free(r->bucket);
  free(r->key);
  free(r->upload_id);
  free(r->post);
  free(r->prefix);
  free(r->delim);
  free(r->token);
  for (size_t i = 0; i < r->nentries; i++) {
    free(r->entries[i].key);
    free(r->entries[i].etag);
  }
  free(r->entries);
  curl_slist_free_all(r->hdrs);
  free(r->url);
  free(r->hdr_etag);
  s3_buf_free(&r->xml);
  free(r->etag);
  free(r->if_match);
  free(r);
}

static void req_unlink(ws_s3_req_t *r) {
  ws_s3_t *s3 = r->s3;
  if (r->prev)
    r->prev->next = r->next;
  else
    s3->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    s3->tail = r->prev;
  r->prev = r->next = NULL;
}

/* Bit t of k_legal[s] allows s -> t. QUEUED -> QUEUED: a request is
 * queued again without running (submission, a credential refresh, the
 * next LIST page). RUNNING -> QUEUED: an attempt ended; its outcome
 * (done, retry, backoff) is decided from QUEUED. */
static const unsigned k_legal[S3_REQ_LAST] = {
    [S3_REQ_QUEUED] = 1u << S3_REQ_QUEUED | 1u << S3_REQ_RUNNING |
                      1u << S3_REQ_BACKOFF | 1u << S3_REQ_DONE,
    [S3_REQ_RUNNING] = 1u << S3_REQ_QUEUED | 1u << S3_REQ_DONE,
    [S3_REQ_BACKOFF] = 1u << S3_REQ_QUEUED | 1u << S3_REQ_DONE,
    [S3_REQ_DONE] = 0,
};

void s3_req_set_state(ws_s3_req_t *r, s3_req_state_t to) {
  ws_s3_t *s3 = r->s3;
  assert(r->state < S3_REQ_LAST && to < S3_REQ_LAST);
  assert(k_legal[r->state] & (1u << to));
  if (r->state == S3_REQ_RUNNING) {
    assert(s3->running > 0);
    s3->running--;
  } else if (to == S3_REQ_RUNNING) {
    s3->running++;
  }
  r->state = to;
}

static void on_kick(uv_timer_t *t);

void s3_kick(ws_s3_t *s3) {
  if (!s3->closing)
    uv_timer_start(&s3->kick, on_kick, 0, 0);
}

void s3_req_finish(ws_s3_req_t *r, int status) {
  ws_s3_t *s3 = r->s3;
  s3_req_set_state(r, S3_REQ_DONE);
  req_unlink(r);
  uint64_t now_ms = s3_now_ms(); /* metrics: only requests that were sent */
  if (r->attempts > 0 && now_ms >= r->first_ms)
    ws_hist_observe(&s3->stats.latency, (double)(now_ms - r->first_ms) / 1e3);
  if (status != 0) {
    s3->stats.failures++;
    if (!r->errmsg[0])
      s3_req_errmsg(r, "%s", ws_strerror(status));
  } else {
    r->errmsg[0] = '\0';
  }
  WS_LOGD("s3 req#%llu: done status=%d attempts=%u %s",
          (unsigned long long)r->id, status, r->attempts, r->errmsg);
  s3_enter(s3);
  if (r->done)
    r->done(r, status, r->arg);
  s3_leave(s3);
  req_free(r);
}

ws_s3_req_t *s3_req_new(ws_s3_t *s3, s3_op_t op, const char *bucket,
                        const char *key, ws_s3_done_cb done, void *arg) {
  if (s3->closing || s3->close_wanted)
    return NULL;
  ws_s3_req_t *r = calloc(1, sizeof(*r));
  if (!r)
    return NULL;
  r->s3 = s3;
  r->state = S3_REQ_QUEUED; /* not linked until s3_req_submit */
  r->op = op;
  r->id = ++s3->next_id;
  r->done = done;
  r->arg = arg;
  r->len = S3_UNKNOWN;
  r->size = S3_UNKNOWN;
  r->body.fd = -1;
  r->bucket = strdup(bucket ? bucket : "");
  r->key = strdup(key ? key : "");
  r->xfer.data = r;
  if (!r->bucket || !r->key) {
    req_free(r);
    return NULL;
  }
  return r;
}

void s3_req_submit(ws_s3_req_t *r) {
  ws_s3_t *s3 = r->s3;
  s3_req_set_state(r, S3_REQ_QUEUED);
  r->first_ms = s3_now_ms();
  r->prev = s3->tail;
  if (s3->tail)
    s3->tail->next = r;
  else
    s3->head = r;
  s3->tail = r;
  s3_kick(s3);
}

/* One pass over the requests: cancels, resumes, backoffs that ended,
 * credential waits, and new transfers up to the concurrency cap. */
static void s3_dispatch(ws_s3_t *s3) {
  uint64_t now = s3_now_ms();
  uint64_t next_due = S3_UNKNOWN;
  const s3_creds_t *c = s3->configured ? s3_provider_get(s3->prov) : NULL;
  int need_creds = 0;
  s3_enter(s3);
  for (ws_s3_req_t *r = s3->head, *next; r && !s3->close_wanted; r = next) {
    next = r->next;
    if (r->cancel) {
      if (r->state == S3_REQ_RUNNING)
        s3_xfer_stop(r);
      s3_req_finish(r, WS_ECANCELED);
      continue;
    }
    if (r->state == S3_REQ_RUNNING) {
      if (r->resume && r->paused) {
        r->resume = 0;
        r->paused = 0;
        r->rx_ms = now; /* the time held was ours, not the server's */
        curl_easy_pause(r->xfer.easy, CURLPAUSE_CONT);
      }
      continue;
    }
    if (r->state == S3_REQ_BACKOFF) {
      if (r->due_ms > now) {
        if (r->due_ms < next_due)
          next_due = r->due_ms;
        continue;
      }
      s3_req_set_state(r, S3_REQ_QUEUED);
    }
    if (!c) {
      if (s3->creds_fail) {
        snprintf(r->errmsg, sizeof(r->errmsg), "%s", s3->creds_msg);
        s3_req_finish(r, s3->creds_fail);
      } else {
        need_creds = 1;
      }
      continue;
    }
    if (r->op == S3_OP_CREDS) {
      s3_req_finish(r, 0);
      continue;
    }
    if (r->op == S3_OP_GET && r->len == 0) {
      s3_req_finish(r, 0);
      continue;
    }
    if (s3->running >= s3->cfg.max_concurrency)
      continue;
    int rc = s3_xfer_start(r, c);
    if (rc) {
      s3_req_finish(r, rc);
      continue;
    }
    s3_req_set_state(r, S3_REQ_RUNNING);
    s3->stats.requests++;
    if (r->attempts++ > 0)
      s3->stats.retries++;
  }
  s3->creds_fail = 0;
  if (need_creds && !s3->close_wanted)
    s3_provider_resolve(s3->prov, 0);
  if (next_due != S3_UNKNOWN && !s3->close_wanted)
    uv_timer_start(&s3->kick, on_kick, next_due > now ? next_due - now : 0, 0);
  s3_leave(s3);
}

static void on_kick(uv_timer_t *t) {
  s3_dispatch(t->data);
}

/* Region, endpoint and addressing: the caller's, else the profile's (and
 * IMDS's region), else the defaults. 0 or WS_EUSAGE with creds_msg set. */
static int s3_configure(ws_s3_t *s3) {
  const char *region, *endpoint;
  ws_s3_addressing_t addr;
  s3_provider_settings(s3->prov, &region, &endpoint, &addr);
  if (!s3->region[0])
    snprintf(s3->region, sizeof(s3->region), "%s",
             region ? region : "us-east-1");
  if (s3->addr == WS_S3_ADDR_AUTO)
    s3->addr = addr;
  int rc = s3_sigv4_param(s3->region, s3->sigv4, sizeof(s3->sigv4));
  if (rc == 0 && !s3->ep_set) {
    char def[128];
    snprintf(def, sizeof(def), "https://s3.%s.amazonaws.com", s3->region);
    rc = s3_endpoint_parse(endpoint ? endpoint : def, &s3->ep);
    if (rc)
      snprintf(s3->creds_msg, sizeof(s3->creds_msg),
               "S3 endpoint_url '%.200s' from the AWS profile is not "
               "http(s)://host[:port]",
               endpoint ? endpoint : def);
    s3->ep_set = rc == 0;
  } else if (rc) {
    snprintf(s3->creds_msg, sizeof(s3->creds_msg), "bad region '%s'",
             s3->region);
  }
  s3->configured = rc == 0;
  return rc;
}

static void on_creds(void *arg, int status) {
  ws_s3_t *s3 = arg;
  if (status == 0 && !s3->configured && (status = s3_configure(s3))) {
    s3->creds_fail = status;
    s3_kick(s3);
    return;
  }
  if (status != 0 && !s3_provider_get(s3->prov)) {
    s3->creds_fail = status;
    snprintf(s3->creds_msg, sizeof(s3->creds_msg), "%s",
             s3_provider_errmsg(s3->prov));
  }
  s3->stats.creds_refreshes = s3_provider_refreshes(s3->prov);
  s3_kick(s3);
}

int ws_s3_new(uv_loop_t *loop, const ws_s3_config_t *cfg, ws_s3_t **out) {
  int rc = -ENOMEM;
  ws_s3_t *s3 = calloc(1, sizeof(*s3));
  if (!s3)
    return rc;
  s3->loop = loop;
  s3->cfg = *cfg;
  s3->cfg.endpoint = s3->cfg.region = s3->cfg.ca_bundle = NULL;
  s3->cfg.profile = NULL;
  if (!s3->cfg.max_concurrency)
    s3->cfg.max_concurrency = 1;
  if (!s3->cfg.max_attempts)
    s3->cfg.max_attempts = 1;
  if (!s3->cfg.list_page_size || s3->cfg.list_page_size > 1000)
    s3->cfg.list_page_size = 1000;
  s3->addr = cfg->addressing;
  /* An explicit region or endpoint is checked now; the rest waits for the
   * profile (s3_configure). */
  if (cfg->region &&
      ((rc = s3_sigv4_param(cfg->region, s3->sigv4, sizeof(s3->sigv4))) ||
       (rc = snprintf(s3->region, sizeof(s3->region), "%s", cfg->region) >=
                     (int)sizeof(s3->region)
                 ? WS_EUSAGE
                 : 0)))
    goto fail_free;
  if (cfg->endpoint && (rc = s3_endpoint_parse(cfg->endpoint, &s3->ep)))
    goto fail_free;
  s3->ep_set = cfg->endpoint != NULL;
  rc = -ENOMEM;
  if (cfg->ca_bundle && !(s3->ca_bundle = strdup(cfg->ca_bundle)))
    goto fail_ep;
  if ((rc = ws_curl_uv_new(loop, &s3->cu)))
    goto fail_ep;
  CURLM *m = ws_curl_uv_multi(s3->cu);
  curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                    (long)s3->cfg.max_concurrency + 4);
  curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)s3->cfg.max_concurrency + 4);
  if ((rc = s3_provider_new(loop, s3->cu, cfg, on_creds, s3, &s3->prov)))
    goto fail_cu;
  uv_timer_init(loop, &s3->kick);
  s3->kick.data = s3;
  *out = s3;
  return 0;

fail_cu:
  ws_curl_uv_close(s3->cu, NULL, NULL);
fail_ep:
  s3_endpoint_free(&s3->ep);
fail_free:
  free(s3->ca_bundle);
  free(s3);
  return rc;
}

static void s3_close_step(void *arg) {
  ws_s3_t *s3 = arg;
  assert(s3->close_pending > 0);
  if (--s3->close_pending > 0)
    return;
  ws_s3_close_cb cb = s3->close_cb;
  void *cb_arg = s3->close_arg;
  s3_endpoint_free(&s3->ep);
  free(s3->ca_bundle);
  free(s3);
  if (cb)
    cb(cb_arg);
}

static void on_kick_closed(uv_handle_t *h) {
  s3_close_step(h->data);
}

static void on_provider_closed(void *arg) {
  ws_s3_t *s3 = arg;
  ws_curl_uv_close(s3->cu, s3_close_step, s3);
  s3_close_step(s3);
}

static void s3_do_close(ws_s3_t *s3) {
  /* Cancel every request; their callbacks may not start new ones
   * (s3_req_new refuses once close_wanted is set). */
  s3->depth++;
  while (s3->head) {
    ws_s3_req_t *r = s3->head;
    if (r->state == S3_REQ_RUNNING)
      s3_xfer_stop(r);
    if (!r->errmsg[0])
      s3_req_errmsg(r, "client closed");
    s3_req_finish(r, WS_ECANCELED);
  }
  s3->depth--;
  s3->closing = 1;
  s3->close_pending = 3; /* kick timer, provider, then curl glue */
  uv_timer_stop(&s3->kick);
  uv_close((uv_handle_t *)&s3->kick, on_kick_closed);
  s3_provider_close(s3->prov, on_provider_closed, s3);
}

void ws_s3_close(ws_s3_t *s3, ws_s3_close_cb cb, void *arg) {
  if (!s3 || s3->close_wanted)
    return;
  s3->close_wanted = 1;
  s3->close_cb = cb;
  s3->close_arg = arg;
  if (s3->depth == 0)
    s3_do_close(s3);
}

void ws_s3_stats_get(const ws_s3_t *s3, ws_s3_stats_t *out) {
  *out = s3->stats;
  out->in_flight = s3->running;
  unsigned q = 0;
  for (const ws_s3_req_t *r = s3->head; r; r = r->next)
    q += r->state != S3_REQ_RUNNING;
  out->queued = q;
}

const char *ws_s3_creds_source(const ws_s3_t *s3) {
  const s3_creds_t *c = s3_provider_get(s3->prov);
  return c ? c->source : NULL;
}

int64_t ws_s3_creds_expiry(const ws_s3_t *s3) {
  const s3_creds_t *c = s3_provider_get(s3->prov);
  return c ? c->expires_ms : 0;
}

const char *ws_s3_region(const ws_s3_t *s3) {
  return s3->region[0] ? s3->region : "us-east-1";
}

const char *ws_s3_creds_access_key(const ws_s3_t *s3) {
  const s3_creds_t *c = s3_provider_get(s3->prov);
  return c ? c->akid : NULL;
}

ws_s3_req_t *ws_s3_creds_resolve(ws_s3_t *s3, ws_s3_done_cb done, void *arg) {
  ws_s3_req_t *r = s3_req_new(s3, S3_OP_CREDS, "", "", done, arg);
  if (r)
    s3_req_submit(r);
  return r;
}

void ws_s3_req_resume(ws_s3_req_t *r) {
  r->resume = 1;
  s3_kick(r->s3);
}

void ws_s3_req_cancel(ws_s3_req_t *r) {
  if (r->state == S3_REQ_DONE)
    return;
  r->cancel = 1;
  s3_kick(r->s3);
}

long ws_s3_req_http_status(const ws_s3_req_t *r) {
  return r->http;
}

const char *ws_s3_req_errmsg(const ws_s3_req_t *r) {
  return r->errmsg;
}

const char *ws_s3_req_etag(const ws_s3_req_t *r) {
  return r->etag;
}

uint64_t ws_s3_req_size(const ws_s3_req_t *r) {
  return r->size;
}

const char *ws_s3_req_upload_id(const ws_s3_req_t *r) {
  return r->upload_id;
}

const ws_s3_entry_t *ws_s3_req_entries(const ws_s3_req_t *r, size_t *n) {
  *n = r->nentries;
  return r->entries;
}

unsigned ws_s3_req_attempts(const ws_s3_req_t *r) {
  return r->attempts;
}
