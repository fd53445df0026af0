/* ctl_upload.c - uploads of `p2pctl publish` (see ctl_upload.h for the
 * per-file states).
 *
 * Owns: the file records' descriptors, upload ids and part ETags.
 * Thread: main thread, on the uploader's loop.
 */
#include "ctl_upload.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ws_err.h"

static void pfile_close(pfile_t *f) {
  if (f->fd >= 0) {
    close(f->fd);
    f->fd = -1;
    f->pub->open--;
  }
}

static void pfile_fail(pfile_t *f, ws_s3_req_t *req, int status) {
  pub_t *p = f->pub;
  if (!p->failed)
    fprintf(stderr, "%sp2pctl publish: %s (%s)\n", p->progress ? "\n" : "",
            req ? ws_s3_req_errmsg(req) : ws_strerror(status),
            ws_errname(status));
  p->failed = status;
  f->state = PF_FAILED;
  pfile_close(f);
}

static void on_abort(ws_s3_req_t *req, int status, void *arg) {
  (void)req;
  (void)status;
  (void)arg;
}

static void pfile_done(pfile_t *f, int uploaded) {
  pub_t *p = f->pub;
  f->state = PF_DONE;
  pfile_close(f);
  if (uploaded)
    p->uploaded_files++;
  ctl_upload_pump(p);
}

static void on_put(ws_s3_req_t *req, int status, void *arg) {
  pfile_t *f = arg;
  if (status) {
    pfile_fail(f, req, status);
    ctl_upload_pump(f->pub);
    return;
  }
  f->pub->uploaded += f->size;
  pfile_done(f, 1);
}

static void on_complete(ws_s3_req_t *req, int status, void *arg) {
  pfile_t *f = arg;
  if (status) {
    ws_s3_mpu_abort(f->pub->s3, f->pub->bucket, f->key, f->upload_id, on_abort,
                    NULL);
    pfile_fail(f, req, status);
    ctl_upload_pump(f->pub);
    return;
  }
  pfile_done(f, 1);
}

static void on_part(ws_s3_req_t *req, int status, void *arg) {
  pfile_t *f = arg;
  pub_t *p = f->pub;
  if (f->state == PF_FAILED)
    return;
  if (status) {
    ws_s3_mpu_abort(p->s3, p->bucket, f->key, f->upload_id, on_abort, NULL);
    pfile_fail(f, req, status);
    ctl_upload_pump(p);
    return;
  }
  ctl_upload_pump(p);
}

/* Part requests carry (file, part index) through this small struct. */
typedef struct {
  pfile_t *f;
  unsigned idx;
} part_arg_t;

static void on_part_arg(ws_s3_req_t *req, int status, void *arg) {
  part_arg_t *pa = arg;
  pfile_t *f = pa->f;
  unsigned idx = pa->idx;
  free(pa);
  if (status == 0 && f->state != PF_FAILED) {
    f->etags[idx] = strdup(ws_s3_req_etag(req));
    if (!f->etags[idx])
      status = -ENOMEM;
    uint64_t off = (uint64_t)idx * f->part_size;
    f->pub->uploaded +=
        f->size - off < f->part_size ? f->size - off : f->part_size;
    if (status == 0 && ++f->parts_done == f->nparts) {
      f->state = PF_COMPLETE;
      if (!ws_s3_mpu_complete(f->pub->s3, f->pub->bucket, f->key, f->upload_id,
                              (const char *const *)f->etags, f->nparts,
                              on_complete, f))
        status = -ENOMEM;
    }
  }
  on_part(req, status, f);
}

static void on_create(ws_s3_req_t *req, int status, void *arg) {
  pfile_t *f = arg;
  if (status) {
    pfile_fail(f, req, status);
    ctl_upload_pump(f->pub);
    return;
  }
  f->upload_id = strdup(ws_s3_req_upload_id(req));
  f->etags = calloc(f->nparts, sizeof(char *));
  if (!f->upload_id || !f->etags) {
    pfile_fail(f, NULL, -ENOMEM);
    ctl_upload_pump(f->pub);
    return;
  }
  f->state = PF_PARTS;
  ctl_upload_pump(f->pub);
}

/* Opens the file and starts its upload (single PUT or multipart). */
static void pfile_upload(pfile_t *f) {
  pub_t *p = f->pub;
  f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) {
    int e = -errno;
    fprintf(stderr, "p2pctl publish: %s: %s\n", f->path, ws_strerror(e));
    p->failed = e;
    f->state = PF_FAILED;
    return;
  }
  p->open++;
  if (f->size <= PUB_SINGLE_MAX) {
    ws_s3_body_t b = {f->fd, 0, f->size, f->sha_hex};
    f->state = PF_PUT;
    if (!ws_s3_put(p->s3, p->bucket, f->key, &b, on_put, f))
      pfile_fail(f, NULL, -ENOMEM);
    return;
  }
  uint64_t ps = PUB_PART_DEFAULT;
  while ((f->size + ps - 1) / ps > PUB_MAX_PARTS && ps < PUB_PART_MAX)
    ps *= 2;
  f->part_size = ps;
  f->nparts = (unsigned)((f->size + ps - 1) / ps);
  f->state = PF_MPU_CREATE;
  if (!ws_s3_mpu_create(p->s3, p->bucket, f->key, on_create, f))
    pfile_fail(f, NULL, -ENOMEM);
}

static void on_head(ws_s3_req_t *req, int status, void *arg) {
  pfile_t *f = arg;
  pub_t *p = f->pub;
  if (status == 0 && ws_s3_req_size(req) == f->size) {
    p->skipped++;
    p->skipped_bytes += f->size;
    p->uploaded += f->size;
    f->state = PF_DONE;
    ctl_upload_pump(p);
    return;
  }
  if (status != 0 && status != WS_ES3NOKEY) {
    pfile_fail(f, req, status);
    ctl_upload_pump(p);
    return;
  }
  f->state = PF_PENDING; /* missing or wrong size: upload it */
  f->part_size = 1;      /* marks "HEAD done" for ctl_upload_pump() */
  ctl_upload_pump(p);
}

/* Starts what may start: HEADs in file order, then uploads while fewer
 * than PUB_MAX_OPEN files are open, then parts of open multipart files.
 * Requests beyond the client's concurrency wait in its queue; parts are
 * fed a few at a time so the queue stays short. */
void ctl_upload_pump(pub_t *p) {
  if (p->failed)
    return;
  unsigned queued_parts = 0;
  for (size_t i = 0; i < p->nfiles; i++) {
    pfile_t *f = &p->files[i];
    if (f->state == PF_PARTS) {
      while (f->parts_sent < f->nparts && queued_parts < 2 * PUB_CONCURRENCY) {
        part_arg_t *pa = malloc(sizeof(*pa));
        unsigned idx = f->parts_sent;
        uint64_t off = (uint64_t)idx * f->part_size;
        uint64_t len =
            f->size - off < f->part_size ? f->size - off : f->part_size;
        ws_s3_body_t b = {f->fd, off, len, NULL};
        if (pa) {
          pa->f = f;
          pa->idx = idx;
        }
        if (!pa || !ws_s3_mpu_part(p->s3, p->bucket, f->key, f->upload_id,
                                   idx + 1, &b, on_part_arg, pa)) {
          free(pa);
          pfile_fail(f, NULL, -ENOMEM);
          return;
        }
        f->parts_sent++;
        queued_parts++;
      }
      queued_parts += f->parts_sent - f->parts_done;
    }
  }
  ws_s3_stats_t st;
  ws_s3_stats_get(p->s3, &st);
  for (size_t i = 0; i < p->nfiles && st.queued < 2 * PUB_CONCURRENCY; i++) {
    pfile_t *f = &p->files[i];
    if (f->state != PF_PENDING || !f->mf)
      continue;
    if (f->part_size == 0) { /* not yet HEADed */
      f->state = PF_HEAD;
      if (!ws_s3_head(p->s3, p->bucket, f->key, on_head, f)) {
        pfile_fail(f, NULL, -ENOMEM);
        return;
      }
      st.queued++;
    } else if (p->open < PUB_MAX_OPEN) {
      pfile_upload(f);
      st.queued++;
      if (p->failed)
        return;
    }
  }
}

void ctl_upload_bar(uv_timer_t *t) {
  pub_t *p = t->data;
  double frac = p->total ? (double)p->uploaded / (double)p->total : 1.0;
  int w = 30, fill = (int)(frac * w);
  char bar[32];
  for (int i = 0; i < w; i++)
    bar[i] = i < fill ? '#' : '.';
  bar[w] = '\0';
  fprintf(stderr, "\r[%s] %5.1f%%  %" PRIu64 "/%" PRIu64 " MiB", bar,
          frac * 100.0, p->uploaded >> 20, p->total >> 20);
}

int ctl_upload_all_done(const pub_t *p) {
  for (size_t i = 0; i < p->nfiles; i++)
    if (p->files[i].mf && p->files[i].state != PF_DONE)
      return 0;
  return 1;
}

/* Runs the loop until every request has completed. */
void ctl_upload_run_loop(pub_t *p) {
  uv_run(&p->loop, UV_RUN_DEFAULT);
}

/* Uploads one in-memory object (signature, manifest) through a memfd;
 * HEAD first so a re-run skips it when present with the right size. */
typedef struct {
  pub_t *p;
  int status;
  int present;
  uint64_t size;
} meta_t;

static void on_meta_head(ws_s3_req_t *req, int status, void *arg) {
  meta_t *m = arg;
  m->present = status == 0 && ws_s3_req_size(req) == m->size;
  if (status != 0 && status != WS_ES3NOKEY) {
    m->status = status;
    fprintf(stderr, "p2pctl publish: %s (%s)\n", ws_s3_req_errmsg(req),
            ws_errname(status));
  }
}

static void on_meta_put(ws_s3_req_t *req, int status, void *arg) {
  meta_t *m = arg;
  m->status = status;
  if (status)
    fprintf(stderr, "p2pctl publish: %s (%s)\n", ws_s3_req_errmsg(req),
            ws_errname(status));
}

int ctl_upload_put_bytes(pub_t *p, const char *key, const void *buf,
                         size_t len) {
  meta_t m = {p, 0, 0, len};
  if (!ws_s3_head(p->s3, p->bucket, key, on_meta_head, &m))
    return -ENOMEM;
  ctl_upload_run_loop(p);
  if (m.status)
    return m.status;
  if (m.present) {
    p->skipped++;
    return 0;
  }
  int fd = memfd_create("ws-publish", MFD_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = 0;
  if (write(fd, buf, len) != (ssize_t)len) {
    rc = -EIO;
    goto cleanup;
  }
  ws_hash_t h;
  char hex[WS_SHA256_HEX_LEN + 1];
  if ((rc = ws_sha256(buf, len, &h)))
    goto cleanup;
  ws_hash_to_hex(&h, hex);
  ws_s3_body_t b = {fd, 0, len, hex};
  if (!ws_s3_put(p->s3, p->bucket, key, &b, on_meta_put, &m)) {
    rc = -ENOMEM;
    goto cleanup;
  }
  ctl_upload_run_loop(p);
  rc = m.status;
  if (rc == 0) {
    p->uploaded_files++;
    p->uploaded += len;
  }
cleanup:
  close(fd);
  return rc;
}

void ctl_upload_free(pub_t *p) {
  for (size_t i = 0; i < p->nfiles; i++) {
    pfile_t *f = &p->files[i];
    pfile_close(f);
    free(f->path);
    free(f->key);
    free(f->upload_id);
    if (f->etags)
      for (unsigned j = 0; j < f->nparts; j++)
        free(f->etags[j]);
    free(f->etags);
  }
  free(p->files);
}

int ctl_upload_open(pub_t *p, unsigned concurrency) {
  if (uv_loop_init(&p->loop) != 0)
    return -1;
  ws_s3_config_t cfg;
  ws_s3_config_default(&cfg);
  ws_s3_config_from_env(&cfg);
  cfg.max_concurrency = concurrency;
  int rc = ws_s3_new(&p->loop, &cfg, &p->s3);
  if (rc != 0) {
    fprintf(stderr, "p2pctl publish: S3 configuration: %s\n", ws_strerror(rc));
    if (uv_loop_close(&p->loop) != 0)
      fprintf(stderr, "p2pctl publish: loop did not close cleanly\n");
    return -1;
  }
  p->progress = isatty(STDERR_FILENO);
  if (p->progress) {
    uv_timer_init(&p->loop, &p->bar);
    p->bar.data = p;
    uv_timer_start(&p->bar, ctl_upload_bar, 0, 200);
    uv_unref((uv_handle_t *)&p->bar);
  }
  return 0;
}

void ctl_upload_close(pub_t *p) {
  if (p->progress)
    uv_close((uv_handle_t *)&p->bar, NULL);
  ws_s3_close(p->s3, NULL, NULL);
  uv_run(&p->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&p->loop) != 0)
    fprintf(stderr, "p2pctl publish: loop did not close cleanly\n");
}
