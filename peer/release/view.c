/* view.c - what a release shows: its counters, accessors and JSON.
 *
 * Owns nothing. Borrows the release and its files (read; only the pinned
 * flag is written, by peer_release_set_pinned) and the store (the path).
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

/* ---- accessors ---------------------------------------------------------- */

const char *peer_release_state_name(peer_release_state_t s) {
  static const char *const names[PEER_REL_STATE_LAST] = {
      "resolving", "resolving", "fetching", "finishing", "ready", "failed"};
  return s < PEER_REL_STATE_LAST ? names[s] : "?";
}

peer_release_state_t peer_release_state(const peer_release_t *rel) {
  return rel->state;
}

const ws_hash_t *peer_release_digest(const peer_release_t *rel) {
  return rel->digest_known ? &rel->digest : NULL;
}

const char *peer_release_digest_str(const peer_release_t *rel) {
  return rel->digest_known ? rel->digest_str : NULL;
}

int peer_release_error(const peer_release_t *rel, const char **msg) {
  int failed = rel->state == PEER_REL_FAILED;
  *msg = failed ? rel->errmsg : "";
  return failed ? rel->err : 0;
}

int peer_release_pinned(const peer_release_t *rel) {
  return rel->pinned;
}

void peer_release_set_pinned(peer_release_t *rel, int pinned) {
  rel->pinned = pinned != 0;
}

/* ---- counters and JSON ------------------------------------------------- */

void peer_release_counts(const peer_release_t *rel,
                         peer_release_counts_t *out) {
  peer_rel_progress_t p;
  peer_rel_progress(rel, &p);
  out->model = rel->model;
  out->bytes_total = rel->bytes_total;
  out->bytes_done = p.bytes_done;
  out->from_s3 = p.from_s3;
  out->from_peers = p.from_peers;
}

void peer_rel_progress(const peer_release_t *rel, peer_rel_progress_t *p) {
  memset(p, 0, sizeof(*p));
  if (rel->files == NULL || peer_rel_terminal(rel->state)) {
    p->bytes_done = rel->bytes_done;
    p->chunks_done = rel->chunks_done;
    p->from_s3 = rel->bytes_from_s3;
    p->from_peers = rel->bytes_from_peers;
    p->shared = rel->bytes_shared;
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
    /* A file shared with another release counts where it was fetched:
     * here only if this release created it, else as shared; one the cache
     * held whole already (another release fetched it before) as shared. */
    if (peer_file_counts_for(f, &rel->digest)) {
      p->from_s3 += f->bytes_from_s3;
      p->from_peers += f->bytes_from_peers;
      p->shared += f->bytes_cached;
    } else {
      p->shared += f->bytes_from_s3 + f->bytes_from_peers + f->bytes_cached;
    }
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

int peer_release_path(const peer_release_t *rel, char *buf, size_t len) {
  ws_store_t *st = rel->t->ctx->store;
  if (!rel->digest_known || st == NULL)
    return WS_ENOTFOUND;
  return ws_store_release_path(st, &rel->digest, buf, len);
}

cJSON *peer_release_json(const peer_release_t *rel) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return NULL;
  char path[4096];
  peer_rel_progress_t p;
  peer_rel_progress(rel, &p);
  int has_path = peer_release_path(rel, path, sizeof(path)) == 0;
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
  cJSON_AddNumberToObject(o, "bytes_shared", (double)p.shared);
  cJSON_AddNumberToObject(o, "chunks_total", (double)rel->chunks_total);
  cJSON_AddNumberToObject(o, "chunks_done", (double)p.chunks_done);
  cJSON_AddBoolToObject(o, "pinned", rel->pinned);
  /* Liveness: no byte from any source for --stall-timeout (swarm). */
  uint64_t stalled = rel->state == PEER_REL_FETCHING && rel->t->swarm != NULL
                         ? peer_swarm_rel_stalled(rel->t->swarm, &rel->digest)
                         : 0;
  cJSON_AddBoolToObject(o, "stalled", stalled != 0);
  cJSON_AddNumberToObject(o, "stalled_s", (double)stalled / 1000.0);
  peer_rel_holds_json(rel, o);
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
