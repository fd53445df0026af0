/* release_view.c - what a release shows: its counters and JSON, and the
 * requests parked on it until its state settles them.
 *
 * Owns: each release's parked requests (prefetch replies and waits, each
 * with its timer; a waiter is freed in its timer's close callback).
 * Borrows: the release and its files (counters are read, never written).
 * Thread: loop thread.
 */
#include "release/release-int.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch/file.h"
#include "core/tunables.h"

struct peer_waiter_s {
  peer_waiter_t *next;
  peer_release_t *rel;
  ws_httpd_req_t *req; /* NULL once answered */
  peer_rel_wait_t kind;
  uv_timer_t timer; /* freed in its close callback */
};

/* ---- counters and JSON ------------------------------------------------- */

void peer_rel_progress(const peer_release_t *rel, peer_rel_progress_t *p) {
  memset(p, 0, sizeof(*p));
  if (rel->files == NULL || peer_rel_terminal(rel->state)) {
    p->bytes_done = rel->bytes_done;
    p->chunks_done = rel->chunks_done;
    p->from_s3 = rel->bytes_from_s3;
    p->from_peers = rel->bytes_from_peers;
    return;
  }
  for (uint32_t k = 0; k < rel->nfiles; k++) {
    const peer_file_t *f = rel->files[k];
    if (f == NULL)
      continue;
    if (f->state == PEER_FILE_COMPLETE || f->state == PEER_FILE_CLOSING) {
      p->bytes_done += f->mf.size;
      p->chunks_done += f->mf.nchunks;
    } else {
      p->bytes_done += f->bytes_done;
      p->chunks_done += f->chunks_done;
    }
    p->from_s3 += f->bytes_from_s3;
    p->from_peers += f->bytes_from_peers;
  }
}

static cJSON *rel_time_json(uint64_t unix_ms) {
  if (unix_ms == 0)
    return cJSON_CreateNull();
  time_t t = (time_t)(unix_ms / 1000);
  struct tm tm;
  char buf[64];
  gmtime_r(&t, &tm);
  snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, (unsigned)(unix_ms % 1000));
  return cJSON_CreateString(buf);
}

static cJSON *rel_str_json(const char *s) {
  return s != NULL ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static int rel_path(const peer_release_t *rel, char *buf, size_t len) {
  if (!rel->digest_known || rel->d->store == NULL)
    return WS_ENOTFOUND;
  return ws_store_release_path(rel->d->store, &rel->digest, buf, len);
}

cJSON *peer_release_json(const peer_release_t *rel) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  char path[4096];
  peer_rel_progress_t p;
  peer_rel_progress(rel, &p);
  int has_path = rel_path(rel, path, sizeof(path)) == 0;
  cJSON_AddItemToObject(
      o, "digest", rel_str_json(rel->digest_known ? rel->digest_str : NULL));
  cJSON_AddStringToObject(o, "state", peer_release_state_name(rel->state));
  cJSON_AddItemToObject(o, "model", rel_str_json(rel->model));
  cJSON_AddItemToObject(o, "version", rel_str_json(rel->version));
  cJSON_AddItemToObject(o, "uri", rel_str_json(rel->uri));
  cJSON_AddItemToObject(o, "path", rel_str_json(has_path ? path : NULL));
  cJSON_AddNumberToObject(o, "files", rel->nfiles);
  cJSON_AddNumberToObject(o, "bytes_total", (double)rel->bytes_total);
  cJSON_AddNumberToObject(o, "bytes_done", (double)p.bytes_done);
  cJSON_AddNumberToObject(o, "bytes_from_s3", (double)p.from_s3);
  cJSON_AddNumberToObject(o, "bytes_from_peers", (double)p.from_peers);
  cJSON_AddNumberToObject(o, "chunks_total", (double)rel->chunks_total);
  cJSON_AddNumberToObject(o, "chunks_done", (double)p.chunks_done);
  cJSON_AddBoolToObject(o, "pinned", rel->pinned);
  if (rel->state == PEER_REL_FAILED) {
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    if (e != NULL) {
      cJSON_AddStringToObject(e, "code", ws_errname(rel->err));
      cJSON_AddStringToObject(e, "message", rel->errmsg);
    }
  }
  cJSON_AddItemToObject(o, "started_at", rel_time_json(rel->started_unix_ms));
  cJSON_AddItemToObject(
      o, "finished_at",
      rel_time_json(peer_rel_terminal(rel->state) ? rel->finished_unix_ms : 0));
  uint64_t end = peer_rel_terminal(rel->state) ? rel->t1_ns : uv_hrtime();
  cJSON_AddNumberToObject(o, "elapsed_s",
                          end > rel->t0_ns ? (double)(end - rel->t0_ns) / 1e9
                                           : 0.0);
  return o;
}

/* ---- parked requests --------------------------------------------------- */

static void waiter_timer_closed(uv_handle_t *h) {
  free(h->data);
}

/* Takes w out of its release and gives req back (status 0: drop). */
static void waiter_finish(peer_waiter_t *w, int status, cJSON *json, int err,
                          const char *msg) {
  peer_release_t *rel = w->rel;
  peer_waiter_t **pp = &rel->waiters;
  while (*pp != NULL && *pp != w)
    pp = &(*pp)->next;
  assert(*pp == w);
  *pp = w->next;
  rel->nwaiters--;
  ws_httpd_req_t *req = w->req;
  w->req = NULL;
  uv_timer_stop(&w->timer);
  uv_close((uv_handle_t *)&w->timer, waiter_timer_closed);
  if (status == 0)
    ws_httpd_req_drop(req);
  else if (json != NULL)
    ws_httpd_reply_json(req, status, json);
  else
    ws_httpd_reply_error(req, status, err, msg);
}

static void waiter_gone(ws_httpd_req_t *req, void *arg) {
  waiter_finish(arg, 0, NULL, 0, NULL);
}

static void waiter_timeout(uv_timer_t *t) {
  peer_waiter_t *w = t->data;
  waiter_finish(w, 504, NULL, WS_ETIMEOUT,
                "release not ready before timeout_ms");
}

void peer_rel_waiter_add(peer_release_t *rel, ws_httpd_req_t *req,
                         peer_rel_wait_t kind, uint64_t timeout_ms) {
  if (rel->nwaiters >= PEER_WAITERS_PER_RELEASE_MAX) {
    ws_httpd_reply_error(req, 503, WS_ELIMIT, "too many requests waiting");
    return;
  }
  peer_waiter_t *w = calloc(1, sizeof(*w));
  if (w == NULL) {
    ws_httpd_reply_error(req, 503, -ENOMEM, NULL);
    return;
  }
  w->rel = rel;
  w->req = req;
  w->kind = kind;
  uv_timer_init(&rel->d->loop, &w->timer);
  w->timer.data = w;
  if (timeout_ms > 0)
    uv_timer_start(&w->timer, waiter_timeout, timeout_ms, 0);
  w->next = rel->waiters;
  rel->waiters = w;
  rel->nwaiters++;
  ws_httpd_req_on_gone(req, waiter_gone, w);
}

static cJSON *rel_prefetch_json(const peer_release_t *rel) {
  cJSON *o = cJSON_CreateObject();
  char path[4096];
  if (o == NULL)
    return NULL;
  cJSON_AddItemToObject(
      o, "digest", rel_str_json(rel->digest_known ? rel->digest_str : NULL));
  cJSON_AddStringToObject(o, "state", peer_release_state_name(rel->state));
  cJSON_AddItemToObject(
      o, "path",
      rel_str_json(rel_path(rel, path, sizeof(path)) == 0 ? path : NULL));
  return o;
}

/* Answers every parked request the current state settles. */
void peer_rel_answer(peer_release_t *rel) {
  peer_waiter_t *w = rel->waiters;
  while (w != NULL) {
    peer_waiter_t *next = w->next;
    if (rel->state == PEER_REL_FAILED) {
      if (w->kind == PEER_REL_WAIT_PREFETCH)
        waiter_finish(w, peer_api_status_for(rel->err), NULL, rel->err,
                      rel->errmsg);
      else
        waiter_finish(w, 409, peer_release_json(rel), 0, NULL);
    } else if (rel->state == PEER_REL_READY) {
      waiter_finish(w, 200,
                    w->kind == PEER_REL_WAIT_PREFETCH ? rel_prefetch_json(rel)
                                                      : peer_release_json(rel),
                    0, NULL);
    } else if (w->kind == PEER_REL_WAIT_PREFETCH &&
               rel->state >= PEER_REL_FETCHING) {
      waiter_finish(w, 200, rel_prefetch_json(rel), 0, NULL);
    }
    w = next;
  }
}

/* Moves rel's parked requests to other (a legacy URI resolved to a digest
 * that other already has). */
void peer_rel_waiters_move(peer_release_t *rel, peer_release_t *other) {
  while (rel->waiters != NULL) {
    peer_waiter_t *w = rel->waiters;
    rel->waiters = w->next;
    rel->nwaiters--;
    w->rel = other;
    w->next = other->waiters;
    other->waiters = w;
    other->nwaiters++;
  }
  peer_rel_answer(other);
}

void peer_release_wait(peer_release_t *rel, ws_httpd_req_t *req,
                       uint64_t timeout_ms) {
  if (rel->state == PEER_REL_READY)
    ws_httpd_reply_json(req, 200, peer_release_json(rel));
  else if (rel->state == PEER_REL_FAILED)
    ws_httpd_reply_json(req, 409, peer_release_json(rel));
  else
    peer_rel_waiter_add(rel, req, PEER_REL_WAIT_READY, timeout_ms);
}

void peer_rel_waiters_cancel(peer_release_t *rel) {
  while (rel->waiters != NULL)
    waiter_finish(rel->waiters, 503, NULL, WS_ECANCELED, "p2pd stopping");
}
