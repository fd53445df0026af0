/* trk_state.c - load and save the wanted set (see trk_state.h).
 *
 * Save state machine (one uv_fs_t reused step by step):
 *
 *   IDLE --save--> OPEN --> WRITE --> FSYNC --> CLOSE --> RENAME --> IDLE
 *   any step failing --> (close fd if open) --> IDLE, error logged
 *   a save requested while busy sets `dirty`; IDLE with dirty starts again
 *
 * The JSON text lives in the saver until the write completes. Loop thread
 * only (the fs work itself runs in libuv's threadpool).
 */
#include "trk_state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ws_log.h"

#define STATE_FILE_MAX (1 << 20)

typedef enum {
  SAVE_IDLE,
  SAVE_OPEN,
  SAVE_WRITE,
  SAVE_FSYNC,
  SAVE_CLOSE,
  SAVE_RENAME,
  SAVE_LAST
} save_step_t;

struct trk_state_s {
  uv_loop_t *loop;
  const trk_wanted_t *w;
  char *path;
  char *tmp;
  uv_fs_t req;
  save_step_t step;
  uv_file fd;
  int err; /* first error of this round */
  bool dirty;
  bool closing;
  trk_state_close_cb close_cb;
  void *close_arg;
  char *json;
  uint64_t version; /* trk_wanted_version of the last save scheduled */
};

int trk_state_load(const char *path, trk_wanted_t *w, uint64_t now_ms,
                   uint32_t *loaded) {
  int rc;
  uint32_t skipped = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL && errno == ENOENT) {
    *loaded = 0; /* first start: nothing to restore */
    return 0;
  }
  if (f == NULL)
    return -errno;
  char *buf = malloc(STATE_FILE_MAX + 1);
  if (buf == NULL) {
    rc = -ENOMEM;
    goto close_f;
  }
  size_t n = fread(buf, 1, STATE_FILE_MAX + 1, f);
  if (ferror(f)) {
    rc = -EIO;
    goto free_buf;
  }
  if (n > STATE_FILE_MAX) {
    rc = WS_ELIMIT;
    goto free_buf;
  }
  rc = trk_wanted_load_json(w, buf, n, now_ms, &skipped);
  if (rc == 0) {
    *loaded = trk_wanted_count(w);
    if (skipped > 0)
      WS_LOGW("state %s: %u invalid entries skipped", path, skipped);
  }

free_buf:
  free(buf);
close_f:
  fclose(f);
  return rc;
}

trk_state_t *trk_state_new(uv_loop_t *loop, const char *path,
                           const trk_wanted_t *w) {
  trk_state_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return NULL;
  size_t n = strlen(path);
  s->path = malloc(n + 1);
  s->tmp = malloc(n + 5);
  if (s->path == NULL || s->tmp == NULL) {
    free(s->path);
    free(s->tmp);
    free(s);
    return NULL;
  }
  memcpy(s->path, path, n + 1);
  snprintf(s->tmp, n + 5, "%s.tmp", path);
  s->loop = loop;
  s->w = w;
  s->fd = -1;
  return s;
}

static void step_cb(uv_fs_t *req);

static void finish(trk_state_t *s) {
  if (s->err < 0)
    WS_LOGE("state %s: save failed: %s", s->path, ws_strerror(s->err));
  free(s->json);
  s->json = NULL;
  s->step = SAVE_IDLE;
  if (s->dirty) {
    /* Changed while saving (also on shutdown: the last change counts). */
    s->dirty = false;
    trk_state_save(s);
    if (s->step != SAVE_IDLE)
      return;
  }
  if (s->closing) {
    trk_state_close_cb cb = s->close_cb;
    void *arg = s->close_arg;
    free(s->path);
    free(s->tmp);
    free(s);
    if (cb != NULL)
      cb(arg);
  }
}

/* Issues the request for s->step; on a synchronous error, fails the round. */
static void issue(trk_state_t *s) {
  int rc = 0;
  switch (s->step) {
  case SAVE_OPEN:
    rc = uv_fs_open(s->loop, &s->req, s->tmp, O_WRONLY | O_CREAT | O_TRUNC,
                    0600, step_cb);
    break;
  case SAVE_WRITE: {
    uv_buf_t b = uv_buf_init(s->json, (unsigned)strlen(s->json));
    rc = uv_fs_write(s->loop, &s->req, s->fd, &b, 1, 0, step_cb);
    break;
  }
  case SAVE_FSYNC:
    rc = uv_fs_fsync(s->loop, &s->req, s->fd, step_cb);
    break;
  case SAVE_CLOSE:
    rc = uv_fs_close(s->loop, &s->req, s->fd, step_cb);
    break;
  case SAVE_RENAME:
    rc = uv_fs_rename(s->loop, &s->req, s->tmp, s->path, step_cb);
    break;
  case SAVE_IDLE:
  case SAVE_LAST:
    return;
  }
  s->req.data = s;
  if (rc < 0) {
    s->err = rc;
    finish(s);
  }
}

static void step_cb(uv_fs_t *req) {
  trk_state_t *s = req->data;
  ssize_t res = req->result;
  uv_fs_req_cleanup(req);
  if (res < 0 && s->err == 0)
    s->err = (int)res;
  switch (s->step) {
  case SAVE_OPEN:
    if (res < 0) {
      finish(s);
      return;
    }
    s->fd = (uv_file)res;
    s->step = SAVE_WRITE;
    break;
  case SAVE_WRITE:
    if (res >= 0 && (size_t)res != strlen(s->json))
      s->err = WS_ETRUNCATED; /* small file: one write or nothing */
    s->step = s->err == 0 ? SAVE_FSYNC : SAVE_CLOSE;
    break;
  case SAVE_FSYNC:
    s->step = SAVE_CLOSE;
    break;
  case SAVE_CLOSE:
    s->fd = -1;
    if (s->err < 0) {
      finish(s);
      return;
    }
    s->step = SAVE_RENAME;
    break;
  case SAVE_RENAME:
  case SAVE_IDLE:
  case SAVE_LAST:
    finish(s);
    return;
  }
  issue(s);
}

void trk_state_save(trk_state_t *s) {
  if (s->step != SAVE_IDLE) {
    s->dirty = true;
    return;
  }
  s->version = trk_wanted_version(s->w);
  s->json = trk_wanted_to_json(s->w);
  if (s->json == NULL) {
    WS_LOGE("state %s: save failed: out of memory", s->path);
    return;
  }
  s->err = 0;
  s->step = SAVE_OPEN;
  issue(s);
}

void trk_state_sync(trk_state_t *s) {
  if (!s->closing && trk_wanted_version(s->w) != s->version)
    trk_state_save(s);
}

void trk_state_close(trk_state_t *s, trk_state_close_cb cb, void *arg) {
  s->closing = true;
  s->close_cb = cb;
  s->close_arg = arg;
  if (s->step == SAVE_IDLE) {
    finish(s);
  }
}
