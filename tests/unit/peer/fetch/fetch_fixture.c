/* fetch_fixture.c - see fetch_fixture.h. Test process only. */
#include "fetch_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "store.h"

static char *ffx_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char buf[PATH_MAX];
  snprintf(buf, sizeof(buf), "%s/ws-fetch-XXXXXX", base ? base : "/tmp");
  assert_non_null(mkdtemp(buf));
  return strdup(buf);
}

static void ffx_rmrf(const char *path) {
  DIR *d = opendir(path);
  struct dirent *e;
  if (d == NULL) {
    unlink(path);
    return;
  }
  while ((e = readdir(d)) != NULL) {
    char sub[PATH_MAX];
    struct stat sb;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
    if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode)) {
      chmod(sub, 0700);
      ffx_rmrf(sub);
    } else {
      unlink(sub);
    }
  }
  closedir(d);
  rmdir(path);
}

static uint8_t *ffx_pattern(size_t n, uint32_t seed) {
  uint8_t *p = malloc(n ? n : 1);
  uint32_t x = seed * 2654435761u + 1;
  assert_non_null(p);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)x;
  }
  return p;
}

void ffx_log(ffx_t *fx, const char *fmt, ...) {
  size_t used = strlen(fx->log);
  va_list ap;
  if (used > 0 && used + 1 < sizeof(fx->log))
    fx->log[used++] = ' ';
  va_start(ap, fmt);
  vsnprintf(fx->log + used, sizeof(fx->log) - used, fmt, ap);
  va_end(ap);
}

static void on_kick(void *arg) {
  ffx_log(arg, "kick");
}

static void on_chunk_done(void *arg, peer_file_t *f, uint32_t j,
                          peer_source_t src) {
  ffx_log(arg, "done:%s:%u:%s", f->mf.name, j,
          src == PEER_SRC_ORIGIN ? "origin" : "peer");
}

static void on_file_complete(void *arg, peer_file_t *f) {
  ffx_log(arg, "complete:%s", f->mf.name);
}

static void on_file_failed(void *arg, peer_file_t *f) {
  ffx_log(arg, "failed:%s", f->mf.name);
}

void ffx_waiter(void *arg, peer_file_t *file, int err, const char *msg) {
  (void)msg;
  ffx_log(arg, "wait:%s:%d", file->mf.name, err);
}

void ffx_setup(ffx_t *fx, size_t buf_bytes, unsigned nbufs) {
  memset(fx, 0, sizeof(*fx));
  fx->nbufs = nbufs;
  assert_int_equal(uv_loop_init(&fx->loop), 0);
  fx->root = ffx_tmpdir();
  fx->ctx.loop = &fx->loop;
  fx->ctx.cfg = &fx->cfg;
  assert_int_equal(peer_bufpool_new(buf_bytes, nbufs, &fx->ctx.pool), 0);
  peer_workq_init(&fx->ctx.workq, &fx->loop);
  assert_int_equal(ws_store_open(fx->root, 0, &fx->ctx.store), 0);
  fx->ctx.running = 1;
  assert_int_equal(peer_files_new(&fx->ctx, &fx->files), 0);
  fx->listener.arg = fx;
  fx->listener.kick = on_kick;
  fx->listener.chunk_done = on_chunk_done;
  fx->listener.file_complete = on_file_complete;
  fx->listener.file_failed = on_file_failed;
  peer_files_listen(fx->files, &fx->listener);
}

void ffx_drain(ffx_t *fx) {
  for (int i = 0; i < 5000 && peer_workq_pending(&fx->ctx.workq) > 0; i++)
    uv_run(&fx->loop, UV_RUN_ONCE);
  assert_int_equal(peer_workq_pending(&fx->ctx.workq), 0);
}

void ffx_teardown(ffx_t *fx) {
  ffx_drain(fx);
  fx->ctx.running = 0;
  peer_files_close_all(fx->files);
  ffx_drain(fx);
  assert_int_equal(peer_files_count(fx->files), 0);
  peer_files_unlisten(fx->files, &fx->listener);
  peer_files_free(fx->files);
  /* Every buffer came back. */
  assert_int_equal(peer_bufpool_available(fx->ctx.pool), fx->nbufs);
  peer_bufpool_free(fx->ctx.pool);
  ws_store_close(fx->ctx.store);
  ws_manifest_free(fx->m);
  cJSON_free(fx->mbytes);
  for (int i = 0; i < FFX_MAX_FILES; i++)
    free(fx->data[i]);
  ffx_rmrf(fx->root);
  free(fx->root);
  assert_int_equal(uv_loop_close(&fx->loop), 0);
}

static void add_hex(cJSON *o, const char *key, const void *data, size_t len) {
  ws_hash_t h;
  char hex[WS_SHA256_HEX_LEN + 1];
  assert_int_equal(ws_sha256(data, len, &h), 0);
  ws_hash_to_hex(&h, hex);
  if (key != NULL)
    cJSON_AddStringToObject(o, key, hex);
  else
    cJSON_AddItemToArray(o, cJSON_CreateString(hex));
}

void ffx_manifest(ffx_t *fx, const ffx_spec_t *files, size_t n, int whole) {
  cJSON *root = cJSON_CreateObject(), *arr = cJSON_CreateArray();
  char err[256] = "";
  assert_true(n <= FFX_MAX_FILES);
  cJSON_AddStringToObject(root, "format", WS_MANIFEST_FORMAT_V1);
  cJSON_AddNumberToObject(root, "chunk_size", FFX_CS);
  for (size_t i = 0; i < n; i++) {
    cJSON *fo = cJSON_CreateObject();
    const uint8_t *d = fx->data[i] = ffx_pattern(files[i].size, files[i].seed);
    cJSON_AddStringToObject(fo, "name", files[i].name);
    cJSON_AddNumberToObject(fo, "size", (double)files[i].size);
    add_hex(fo, "sha256", d, files[i].size);
    if (!whole) {
      cJSON *ch = cJSON_AddArrayToObject(fo, "chunks");
      for (size_t off = 0; off < files[i].size; off += FFX_CS)
        add_hex(ch, NULL, d + off,
                files[i].size - off < FFX_CS ? files[i].size - off : FFX_CS);
    }
    cJSON_AddItemToArray(arr, fo);
  }
  cJSON_AddItemToObject(root, "files", arr);
  fx->mbytes = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  int rc = ws_manifest_parse(fx->mbytes, strlen(fx->mbytes), NULL, &fx->m, err,
                             sizeof(err));
  if (rc != 0)
    fail_msg("manifest: %s (%s)", ws_strerror(rc), err);
  assert_int_equal(ws_store_release_begin(fx->ctx.store, fx->m), 0);
}

void ffx_run_until(ffx_t *fx, const int *flag) {
  uint64_t start = uv_hrtime();
  while (!*flag) {
    if (uv_hrtime() - start > 10ull * 1000 * 1000 * 1000)
      fail_msg("timed out waiting on the loop");
    if (uv_run(&fx->loop, UV_RUN_ONCE) == 0 && !*flag)
      uv_sleep(1);
  }
}

peer_file_t *ffx_open(ffx_t *fx, uint32_t i) {
  peer_file_t *file = NULL;
  assert_int_equal(peer_file_create(fx->files, fx->m, &fx->m->files[i],
                                    "bucket", fx->m->files[i].name, &file),
                   0);
  assert_int_equal(peer_file_attach(file, ffx_waiter, fx), 1);
  for (int k = 0; k < 5000 && file->state == PEER_FILE_OPENING; k++)
    uv_run(&fx->loop, UV_RUN_ONCE);
  assert_int_not_equal(file->state, PEER_FILE_OPENING);
  return file;
}

typedef struct {
  void (*work)(void *);
  void *arg;
  int done;
} ffx_job_t;

static void ffx_job_work(void *arg) {
  ffx_job_t *j = arg;
  j->work(j->arg);
}

static void ffx_job_after(void *arg, int status) {
  ffx_job_t *j = arg;
  assert_int_equal(status, 0);
  j->done = 1;
}

void ffx_on_worker(ffx_t *fx, void (*work)(void *), void *arg) {
  ffx_job_t j = {work, arg, 0};
  assert_int_equal(peer_ctx_queue(&fx->ctx, ffx_job_work, ffx_job_after, &j),
                   0);
  ffx_run_until(fx, &j.done);
}

void ffx_read_partial(peer_file_t *file, uint64_t off, void *buf, size_t len) {
  int fd = ws_store_file_fd(file->pf);
  assert_true(fd >= 0);
  assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
}
