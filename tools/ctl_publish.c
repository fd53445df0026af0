/* ctl_publish.c - `p2pctl publish DIR s3://BUCKET/PREFIX/MODEL/`: builds the
 * v1 manifest of DIR (parallel hashing), uploads every file under
 * .../MODEL/sha256-<digest>/ (multipart with parallel parts for large ones),
 * then manifest.json.sig (with --sign-key) and manifest.json last, so a
 * release is visible only once all of its files are. Re-running skips
 * objects already present with the right size (HEAD).
 *
 * Thread: main thread; hashing runs on ws_manifest_build's own workers
 * before the loop starts; uploads run on one uv loop with the S3 client
 * (which reads file bodies with pread: this is a tool, not the daemon).
 *
 * Per file: PENDING -> HEAD -> (SKIPPED | PUT | MPU_CREATE -> PARTS ->
 * COMPLETE) -> DONE, or FAILED. pump() keeps at most PUB_MAX_OPEN files
 * open and the S3 client bounds requests in flight (--concurrency).
 */
#include "ctl.h"

#include "digest.h"
#include "manifest.h"
#include "s3.h"
#include "sig.h"
#include "ws_err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PUB_SINGLE_MAX (64ull << 20)   /* larger files go multipart */
#define PUB_PART_DEFAULT (16ull << 20) /* 16-64 MiB parts */
#define PUB_PART_MAX (5ull << 30)      /* S3's own part limit */
#define PUB_MAX_PARTS 10000u
#define PUB_MAX_OPEN 16u /* files with an open fd at once */
#define PUB_CONCURRENCY 8u

typedef enum {
  PF_PENDING,
  PF_HEAD,
  PF_PUT,
  PF_MPU_CREATE,
  PF_PARTS,
  PF_COMPLETE,
  PF_DONE,
  PF_FAILED,
  PF_LAST
} pfile_state_t;

typedef struct pub_s pub_t;

typedef struct {
  pub_t *pub;
  const ws_mfile_t *mf; /* NULL for the release's own metadata objects */
  char *path;           /* local file */
  char *key;            /* object key */
  uint64_t size;
  char sha_hex[WS_SHA256_HEX_LEN + 1];
  pfile_state_t state;
  int fd;
  char *upload_id;
  uint64_t part_size;
  unsigned nparts, parts_sent, parts_done;
  char **etags;
} pfile_t;

struct pub_s {
  uv_loop_t loop;
  ws_s3_t *s3;
  char *bucket;
  pfile_t *files;
  size_t nfiles, next; /* next: first file not yet started */
  unsigned open;
  int failed;
  int json, progress;
  uint64_t total, uploaded, skipped_bytes;
  unsigned skipped, uploaded_files;
  uv_timer_t bar;
};

static void pump(pub_t *p);

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
  pump(p);
}

static void on_put(ws_s3_req_t *req, int status, void *arg) {
  pfile_t *f = arg;
  if (status) {
    pfile_fail(f, req, status);
    pump(f->pub);
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
    pump(f->pub);
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
    pump(p);
    return;
  }
  pump(p);
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
    pump(f->pub);
    return;
  }
  f->upload_id = strdup(ws_s3_req_upload_id(req));
  f->etags = calloc(f->nparts, sizeof(char *));
  if (!f->upload_id || !f->etags) {
    pfile_fail(f, NULL, -ENOMEM);
    pump(f->pub);
    return;
  }
  f->state = PF_PARTS;
  pump(f->pub);
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
    pump(p);
    return;
  }
  if (status != 0 && status != WS_ES3NOKEY) {
    pfile_fail(f, req, status);
    pump(p);
    return;
  }
  f->state = PF_PENDING; /* missing or wrong size: upload it */
  f->part_size = 1;      /* marks "HEAD done" for pump() */
  pump(p);
}

/* Starts what may start: HEADs in file order, then uploads while fewer
 * than PUB_MAX_OPEN files are open, then parts of open multipart files.
 * Requests beyond the client's concurrency wait in its queue; parts are
 * fed a few at a time so the queue stays short. */
static void pump(pub_t *p) {
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

static void on_bar(uv_timer_t *t) {
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

static int all_files_done(const pub_t *p) {
  for (size_t i = 0; i < p->nfiles; i++)
    if (p->files[i].mf && p->files[i].state != PF_DONE)
      return 0;
  return 1;
}

/* Runs the loop until every request has completed. */
static void run_loop(pub_t *p) {
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

static int put_bytes(pub_t *p, const char *key, const void *buf, size_t len) {
  meta_t m = {p, 0, 0, len};
  if (!ws_s3_head(p->s3, p->bucket, key, on_meta_head, &m))
    return -ENOMEM;
  run_loop(p);
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
  run_loop(p);
  rc = m.status;
  if (rc == 0) {
    p->uploaded_files++;
    p->uploaded += len;
  }
cleanup:
  close(fd);
  return rc;
}

static int usage(void) {
  fputs("usage: p2pctl publish DIR s3://BUCKET/PREFIX/MODEL/ [--json] "
        "[--sign-key FILE] [--chunk-size BYTES] [--model NAME] "
        "[--version V] [--concurrency N] [--threads N]\n",
        stderr);
  return CTL_EXIT_USAGE;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-')
    return -1;
  *out = v;
  return 0;
}

static void json_str(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(o, "\\%c", c);
    else if (c < 0x20)
      fprintf(o, "\\u%04x", c);
    else
      fputc(c, o);
  }
  fputc('"', o);
}

typedef struct {
  const char *dir, *uri, *sign_key, *model, *version;
  uint64_t chunk_size, concurrency, threads;
  int json;
} pub_args_t;

static int args_parse(int argc, char **argv, pub_args_t *a) {
  memset(a, 0, sizeof(*a));
  a->concurrency = PUB_CONCURRENCY;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(s, "--json") == 0) {
      a->json = 1;
    } else if (strcmp(s, "--sign-key") == 0 && v) {
      a->sign_key = v, i++;
    } else if (strcmp(s, "--model") == 0 && v) {
      a->model = v, i++;
    } else if (strcmp(s, "--version") == 0 && v) {
      a->version = v, i++;
    } else if (strcmp(s, "--chunk-size") == 0 && v) {
      if (parse_u64(v, &a->chunk_size) ||
          !ws_manifest_chunk_size_ok(a->chunk_size))
        return -1;
      i++;
    } else if (strcmp(s, "--concurrency") == 0 && v) {
      if (parse_u64(v, &a->concurrency) || !a->concurrency ||
          a->concurrency > 256)
        return -1;
      i++;
    } else if (strcmp(s, "--threads") == 0 && v) {
      if (parse_u64(v, &a->threads) || a->threads > 64)
        return -1;
      i++;
    } else if (s[0] == '-' && s[1]) {
      return -1;
    } else if (!a->dir) {
      a->dir = s;
    } else if (!a->uri) {
      a->uri = s;
    } else {
      return -1;
    }
  }
  return a->dir && a->uri ? 0 : -1;
}

static char *str_cat3(const char *a, const char *b, const char *c) {
  size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
  char *s = malloc(la + lb + lc + 1);
  if (!s)
    return NULL;
  memcpy(s, a, la);
  memcpy(s + la, b, lb);
  memcpy(s + la + lb, c, lc + 1);
  return s;
}

static void pub_free(pub_t *p) {
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

/* created_at is the newest mtime under DIR, not the current time, so that
 * publishing an unchanged directory again yields the same manifest bytes,
 * the same digest, and therefore skips every object already uploaded. */
static time_t newest_mtime;

static int on_walk(const char *path, const struct stat *st, int type,
                   struct FTW *ftw) {
  (void)path;
  (void)ftw;
  if (type == FTW_F && st->st_mtime > newest_mtime)
    newest_mtime = st->st_mtime;
  return 0;
}

static void created_at_of(const char *dir, char *out, size_t len) {
  newest_mtime = 0;
  struct tm tm;
  if (nftw(dir, on_walk, 16, FTW_PHYS) != 0 || newest_mtime == 0 ||
      !gmtime_r(&newest_mtime, &tm) ||
      strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    out[0] = '\0';
}

/* Builds the manifest; on success *mbuf and *mlen hold its exact bytes. */
static int build_manifest(const pub_args_t *a, const char *model,
                          ws_manifest_t **m, char **mbuf, size_t *mlen) {
  ws_manifest_build_opts_t o = {0};
  o.chunk_size = (uint32_t)a->chunk_size;
  o.model = model;
  o.version = a->version;
  char created[32];
  created_at_of(a->dir, created, sizeof(created));
  o.created_at = created[0] ? created : NULL;
  o.nthreads = (unsigned)a->threads;
  char err[512] = "";
  int rc = ws_manifest_build(a->dir, &o, m, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "p2pctl publish: %s: %s\n", a->dir,
            err[0] ? err : ws_strerror(rc));
    return rc;
  }
  rc = ws_manifest_serialize(*m, mbuf, mlen);
  if (rc) {
    fprintf(stderr, "p2pctl publish: serializing the manifest: %s\n",
            ws_strerror(rc));
    ws_manifest_free(*m);
    *m = NULL;
  }
  return rc;
}

/* Model name: --model, else the last component of the prefix. New string
 * or NULL. */
static char *model_name(const pub_args_t *a, const char *prefix) {
  if (a->model)
    return strdup(a->model);
  size_t pl = strlen(prefix);
  size_t end = pl ? pl - 1 : 0, start = end;
  while (start > 0 && prefix[start - 1] != '/')
    start--;
  return end > start ? strndup(prefix + start, end - start) : NULL;
}

/* One upload record per file of m, its object under release. 0 or -1. */
static int pub_files_init(pub_t *p, const pub_args_t *a, const ws_manifest_t *m,
                          const char *release) {
  for (size_t i = 0; i < p->nfiles; i++) {
    pfile_t *f = &p->files[i];
    f->pub = p;
    f->mf = &m->files[i];
    f->fd = -1;
    f->size = m->files[i].size;
    ws_hash_to_hex(&m->files[i].sha256, f->sha_hex);
    f->path = str_cat3(a->dir, "/", m->files[i].name);
    f->key = str_cat3(release, "", m->files[i].name);
    if (!f->path || !f->key)
      return -1;
    p->total += f->size;
  }
  return 0;
}

/* The signature (with --sign-key), then manifest.json, written last so the
 * release is complete when it appears. 0, CTL_EXIT_FAIL for a bad key, or
 * an upload error. */
static int put_manifest(pub_t *p, const pub_args_t *a, const char *release,
                        const char *mbuf, size_t mlen) {
  int rc;
  if (a->sign_key) {
    ws_sig_secret_t sk;
    ws_sig_pub_t pk;
    ws_sig_t sig;
    rc = ws_sig_secret_load(a->sign_key, &sk, &pk);
    if (rc == 0) {
      rc = ws_sig_sign(mbuf, mlen, &sk, &sig);
      ws_sig_secret_wipe(&sk);
    }
    if (rc) {
      fprintf(stderr, "p2pctl publish: --sign-key %s: %s\n", a->sign_key,
              ws_strerror(rc));
      return CTL_EXIT_FAIL;
    }
    char *k = str_cat3(release, "", "manifest.json.sig");
    rc = k ? put_bytes(p, k, sig.b, sizeof(sig.b)) : -ENOMEM;
    free(k);
    if (rc)
      return rc;
  }
  char *mk = str_cat3(release, "", "manifest.json");
  rc = mk ? put_bytes(p, mk, mbuf, mlen) : -ENOMEM;
  free(mk);
  return rc;
}

static void print_result(const pub_t *p, const pub_args_t *a,
                         const char *bucket, const char *release,
                         const char *digest) {
  uint64_t sent = p->uploaded - p->skipped_bytes;
  if (a->json) {
    char uri[4096];
    snprintf(uri, sizeof(uri), "s3://%s/%s", bucket, release);
    printf("{\"digest\":\"%s\",\"uri\":", digest);
    json_str(stdout, uri);
    printf(",\"bytes_uploaded\":%" PRIu64 ",\"skipped\":%u,\"files\":%zu}\n",
           sent, p->skipped, p->nfiles);
  } else {
    printf("%s\ns3://%s/%s\n", digest, bucket, release);
    fprintf(stderr,
            "published %zu files (%" PRIu64 " bytes uploaded, %u objects "
            "already present)\n",
            p->nfiles, sent, p->skipped);
  }
}

int ctl_publish_main(int argc, char **argv) {
  pub_args_t a;
  if (args_parse(argc, argv, &a) != 0)
    return usage();
  ws_s3_uri_t u = {0};
  if (ws_s3_uri_parse(a.uri, &u) != 0) {
    fprintf(stderr, "p2pctl publish: not an s3://BUCKET/PREFIX/ URI: %s\n",
            a.uri);
    return CTL_EXIT_USAGE;
  }
  int ret = CTL_EXIT_FAIL, rc;
  pub_t p = {0};
  ws_manifest_t *m = NULL;
  char *mbuf = NULL, *prefix = NULL, *release = NULL, *model = NULL;
  size_t mlen = 0;
  size_t kl = strlen(u.key);
  prefix = str_cat3(u.key, kl && u.key[kl - 1] != '/' ? "/" : "", "");
  if (!prefix)
    goto cleanup_uri;
  model = model_name(&a, prefix);
  if ((rc = build_manifest(&a, model, &m, &mbuf, &mlen)))
    goto cleanup_uri;
  char digest[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&m->digest, digest);
  release = str_cat3(prefix, digest, "/");
  p.bucket = u.bucket;
  p.nfiles = m->nfiles;
  p.files = calloc(p.nfiles ? p.nfiles : 1, sizeof(pfile_t));
  if (!release || !p.files)
    goto cleanup_manifest;
  if (pub_files_init(&p, &a, m, release) != 0)
    goto cleanup_files;
  p.total += mlen;
  if (uv_loop_init(&p.loop) != 0)
    goto cleanup_files;
  ws_s3_config_t cfg;
  ws_s3_config_default(&cfg);
  ws_s3_config_from_env(&cfg);
  cfg.max_concurrency = (unsigned)a.concurrency;
  if ((rc = ws_s3_new(&p.loop, &cfg, &p.s3))) {
    fprintf(stderr, "p2pctl publish: S3 configuration: %s\n", ws_strerror(rc));
    goto cleanup_loop;
  }
  p.progress = isatty(STDERR_FILENO);
  if (p.progress) {
    uv_timer_init(&p.loop, &p.bar);
    p.bar.data = &p;
    uv_timer_start(&p.bar, on_bar, 0, 200);
    uv_unref((uv_handle_t *)&p.bar);
  }
  pump(&p);
  run_loop(&p);
  ret = CTL_EXIT_ORIGIN;
  if (p.failed || !all_files_done(&p))
    goto cleanup_s3;
  if ((rc = put_manifest(&p, &a, release, mbuf, mlen)) != 0) {
    if (rc == CTL_EXIT_FAIL)
      ret = CTL_EXIT_FAIL;
    goto cleanup_s3;
  }
  if (p.progress) {
    on_bar(&p.bar);
    fputc('\n', stderr);
  }
  print_result(&p, &a, u.bucket, release, digest);
  ret = CTL_EXIT_OK;
cleanup_s3:
  if (p.progress)
    uv_close((uv_handle_t *)&p.bar, NULL);
  ws_s3_close(p.s3, NULL, NULL);
  uv_run(&p.loop, UV_RUN_DEFAULT);
cleanup_loop:
  if (uv_loop_close(&p.loop) != 0)
    fprintf(stderr, "p2pctl publish: loop did not close cleanly\n");
cleanup_files:
  pub_free(&p);
cleanup_manifest:
  free(release);
  free(mbuf);
  ws_manifest_free(m);
cleanup_uri:
  free(model);
  free(prefix);
  ws_s3_uri_free(&u);
  return ret;
}
