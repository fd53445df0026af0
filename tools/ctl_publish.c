/* ctl_publish.c - `p2pctl publish DIR s3://BUCKET/PREFIX/MODEL/`: builds the
 * v1 manifest of DIR (parallel hashing), uploads every file under
 * .../MODEL/sha256-<digest>/ (multipart with parallel parts for large ones),
 * then manifest.json.sig (with --sign-key) and manifest.json last, so a
 * release is visible only once all of its files are. Re-running skips
 * objects already present with the right size (HEAD). DIR may be a
 * Hugging Face snapshot (model name ORG/NAME by default); --include and
 * --exclude pick the files, names starting with '.' are never published.
 *
 * Thread: main thread; hashing runs on ws_manifest_build's own workers
 * before the loop starts; uploads run on one uv loop with the S3 client
 * (which reads file bodies with pread: this is a tool, not the daemon).
 *
 * The uploads themselves are ctl_upload.c's.
 */
#include "ctl.h"
#include "ctl_select.h"
#include "ctl_upload.h"

#include "digest.h"
#include "manifest.h"
#include "s3.h"
#include "sig.h"
#include "tag.h"
#include "ws_args.h"
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
  const char *tag; /* --tag: moved to the release last (ctl_tag.c) */
  uint64_t chunk_size, concurrency, threads;
  int json;
  ctl_select_t sel; /* --include / --exclude */
} pub_args_t;

enum {
  PO_JSON,
  PO_SIGN_KEY,
  PO_MODEL,
  PO_VERSION,
  PO_CHUNK,
  PO_CONC,
  PO_THREADS,
  PO_TAG,
  PO_INCLUDE,
  PO_EXCLUDE,
  PO_LAST
};

static const ws_arg_t k_pub_opts[PO_LAST] = {
    [PO_JSON] = {"json", NULL, NULL, WS_ARG_BOOL, 0,
                 "print the result as JSON"},
    [PO_SIGN_KEY] = {"sign-key", NULL, "FILE", WS_ARG_STR, 0,
                     "sign the manifest (manifest.json.sig)"},
    [PO_MODEL] = {"model", NULL, "NAME", WS_ARG_STR, 0,
                  "model name in the manifest"},
    [PO_VERSION] = {"version", NULL, "V", WS_ARG_STR, 0,
                    "model version in the manifest"},
    [PO_CHUNK] = {"chunk-size", NULL, "SIZE", WS_ARG_SIZE, 0,
                  "chunk size, a power of two in 1Mi..64Mi"},
    [PO_CONC] = {"concurrency", NULL, "N", WS_ARG_UINT, 0,
                 "parallel uploads, 1..256"},
    [PO_THREADS] = {"threads", NULL, "N", WS_ARG_UINT, 0,
                    "hashing threads, 0..64 (0 = one per CPU)"},
    [PO_TAG] = {"tag", NULL, "TAG", WS_ARG_STR, 0,
                "then point TAG at the release (compare-and-swap)"},
    [PO_INCLUDE] = CTL_SELECT_INCLUDE_ROW,
    [PO_EXCLUDE] = CTL_SELECT_EXCLUDE_ROW,
};

static const ws_args_spec_t k_pub_spec = {
    .prog = "p2pctl publish",
    .synopsis = "DIR s3://BUCKET/PREFIX/MODEL/ [options]",
    .about = "Builds the manifest of DIR and uploads the release under "
             "s3://BUCKET/PREFIX/MODEL/sha256-<digest>/, manifest last. "
             "S3 settings come from the AWS environment and config files.",
    .args = k_pub_opts,
    .nargs = PO_LAST,
    .footer = NULL,
};

/* 0, or -1 with *ex the exit code (0 after --help). */
static int args_parse(int argc, char **argv, pub_args_t *a, int *ex) {
  const char *v[PO_LAST] = {0};
  const char *pos[2];
  size_t npos = 0;
  memset(a, 0, sizeof(*a));
  a->concurrency = PUB_CONCURRENCY;
  int rc = ws_args_parse(&k_pub_spec, argc, argv, v, pos, 2, &npos);
  *ex = CTL_EXIT_OK;
  if (rc == WS_ARGS_HELP || rc == WS_ARGS_VERSION) {
    ws_args_usage(&k_pub_spec, stdout);
    return -1;
  }
  *ex = CTL_EXIT_USAGE;
  if (rc != 0 || ws_args_check(&k_pub_spec, v) != 0 ||
      ctl_select_collect(&k_pub_spec, argc, argv, &a->sel) != 0)
    return -1;
  if (npos != 2) {
    fprintf(stderr, "usage: p2pctl publish %s (see p2pctl publish --help)\n",
            k_pub_spec.synopsis);
    return -1;
  }
  a->dir = pos[0];
  a->uri = pos[1];
  a->json = ws_parse_bool(v[PO_JSON]) == 1;
  a->sign_key = v[PO_SIGN_KEY];
  a->model = v[PO_MODEL];
  a->version = v[PO_VERSION];
  a->tag = v[PO_TAG];
  if (a->tag != NULL && !ws_tag_name_ok(a->tag)) {
    fprintf(stderr,
            "p2pctl publish: --tag '%s': want 1..%d of [A-Za-z0-9._-], "
            "first a letter or digit\n",
            a->tag, WS_TAG_MAX);
    return -1;
  }
  if (v[PO_CHUNK] != NULL && (ws_parse_size(v[PO_CHUNK], &a->chunk_size) != 0 ||
                              !ws_manifest_chunk_size_ok(a->chunk_size))) {
    fprintf(stderr,
            "p2pctl publish: --chunk-size '%s': want a power of two "
            "in 1Mi..64Mi, e.g. 4Mi or 4194304\n",
            v[PO_CHUNK]);
    return -1;
  }
  if (v[PO_CONC] != NULL &&
      ws_parse_uint(v[PO_CONC], 1, 256, &a->concurrency) != 0) {
    fprintf(stderr, "p2pctl publish: --concurrency: want 1..256\n");
    return -1;
  }
  if (v[PO_THREADS] != NULL &&
      ws_parse_uint(v[PO_THREADS], 0, 64, &a->threads) != 0) {
    fprintf(stderr, "p2pctl publish: --threads: want 0..64\n");
    return -1;
  }
  return 0;
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

/* created_at is the newest mtime under DIR, not the current time, so that
 * publishing an unchanged directory again yields the same manifest bytes,
 * the same digest, and therefore skips every object already uploaded. */
static time_t newest_mtime;

static int on_walk(const char *path, const struct stat *st, int type,
                   struct FTW *ftw) {
  struct stat lst;
  (void)ftw;
  /* A Hugging Face snapshot is symlinks: their targets' times count. */
  if (type == FTW_SL && stat(path, &lst) == 0 && S_ISREG(lst.st_mode))
    st = &lst;
  else if (type != FTW_F)
    return 0;
  if (st->st_mtime > newest_mtime)
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
  ctl_select_apply(&a->sel, &o);
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

/* Model name: --model, else the repository id of a Hugging Face snapshot
 * (ORG/NAME), else the last component of the prefix. New string or NULL. */
static char *model_name(const pub_args_t *a, const char *prefix) {
  char *hf = NULL;
  if (a->model)
    return strdup(a->model);
  if (ws_manifest_hf_snapshot(a->dir, NULL, &hf) == 1)
    return hf;
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
    rc = k ? ctl_upload_put_bytes(p, k, sig.b, sizeof(sig.b)) : -ENOMEM;
    free(k);
    if (rc)
      return rc;
  }
  char *mk = str_cat3(release, "", "manifest.json");
  rc = mk ? ctl_upload_put_bytes(p, mk, mbuf, mlen) : -ENOMEM;
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
  int ex;
  if (args_parse(argc, argv, &a, &ex) != 0)
    return ex;
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
  if (ctl_upload_open(&p, (unsigned)a.concurrency) != 0)
    goto cleanup_files;
  ctl_upload_pump(&p);
  ctl_upload_run_loop(&p);
  ret = CTL_EXIT_ORIGIN;
  if (p.failed || !ctl_upload_all_done(&p))
    goto cleanup_s3;
  if ((rc = put_manifest(&p, &a, release, mbuf, mlen)) != 0) {
    if (rc == CTL_EXIT_FAIL)
      ret = CTL_EXIT_FAIL;
    goto cleanup_s3;
  }
  if (p.progress) {
    ctl_upload_bar(&p.bar);
    fputc('\n', stderr);
  }
  /* The tag last: it never names a release that is not all there. */
  if (a.tag != NULL &&
      (rc = ctl_tag_move(&p.loop, p.s3, "p2pctl publish", u.bucket, prefix,
                         a.tag, &m->digest, NULL, 0)) != 0) {
    ret = rc;
    goto cleanup_s3;
  }
  print_result(&p, &a, u.bucket, release, digest);
  ret = CTL_EXIT_OK;
cleanup_s3:
  ctl_upload_close(&p);
cleanup_files:
  ctl_upload_free(&p);
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
