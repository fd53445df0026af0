/* ctl_manifest.c - `p2pctl manifest ...`: offline manifest and signature
 * tools (no daemon needed). Single-threaded CLI except for the hashing
 * threads ws_manifest_build / ws_manifest_verify_dir start.
 *
 *   create DIR [--chunk-size N] [--model NAME] [--version V]
 *              [--include GLOB]... [--exclude GLOB]...
 *              [--created-at T] [--threads N]     manifest JSON on stdout,
 *                                                 digest on stderr
 *   check FILE [--dir DIR] [--threads N]          exit 0 only if valid
 *   digest FILE                                   sha256-<hex> of the bytes
 *   keygen KEYFILE                                seed hex (0600), prints pub
 *   sign FILE --key KEYFILE [--out SIGFILE]       64 raw bytes (stdout)
 *   verify FILE --sig SIGFILE --pub HEX|FILE      exit 0 only if valid
 *
 * FILE may be "-" for stdin. Exit codes: tools/ctl.h.
 */
#include "ctl.h"
#include "ctl_select.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manifest.h"
#include "sig.h"
#include "ws_args.h"

#define CTL_ERRBUF 512

typedef struct {
  const char *pos[2]; /* positional arguments */
  int npos;
  const char *chunk_size, *model, *version, *created_at, *threads;
  const char *dir, *key, *out, *sig, *pub;
  ctl_select_t sel; /* create: --include / --exclude */
} margs_t;

static const char usage_text[] =
    "usage: p2pctl manifest create DIR [--chunk-size SIZE] [--model NAME]\n"
    "                 [--version V] [--created-at T] [--threads N]\n"
    "                 [--include GLOB]... [--exclude GLOB]... > manifest.json\n"
    "       p2pctl manifest check FILE [--dir DIR] [--threads N]\n"
    "       p2pctl manifest digest FILE\n"
    "       p2pctl manifest keygen KEYFILE\n"
    "       p2pctl manifest sign FILE --key KEYFILE [--out SIGFILE]\n"
    "       p2pctl manifest verify FILE --sig SIGFILE --pub HEX|FILE\n";

static int usage(const char *why) {
  if (why != NULL)
    fprintf(stderr, "p2pctl manifest: %s\n", why);
  fputs(usage_text, stderr);
  return CTL_EXIT_USAGE;
}

enum {
  MO_CHUNK,
  MO_MODEL,
  MO_VERSION,
  MO_CREATED,
  MO_THREADS,
  MO_DIR,
  MO_KEY,
  MO_OUT,
  MO_SIG,
  MO_PUB,
  MO_INCLUDE,
  MO_EXCLUDE,
  MO_LAST
};

static const ws_arg_t k_mopts[MO_LAST] = {
    [MO_CHUNK] = {"chunk-size", NULL, "SIZE", WS_ARG_SIZE, 0,
                  "create: power of two in 1Mi..64Mi, e.g. 4Mi"},
    [MO_MODEL] = {"model", NULL, "NAME", WS_ARG_STR, 0, "create: model name"},
    [MO_VERSION] = {"version", NULL, "V", WS_ARG_STR, 0,
                    "create: model version"},
    [MO_CREATED] = {"created-at", NULL, "T", WS_ARG_STR, 0,
                    "create: RFC 3339 time (default newest mtime)"},
    [MO_THREADS] = {"threads", NULL, "N", WS_ARG_UINT, 0,
                    "create, check: hashing threads"},
    [MO_DIR] = {"dir", NULL, "DIR", WS_ARG_STR, 0,
                "check: also check the files under DIR"},
    [MO_KEY] = {"key", NULL, "KEYFILE", WS_ARG_STR, 0, "sign: secret key"},
    [MO_OUT] = {"out", NULL, "SIGFILE", WS_ARG_STR, 0,
                "sign: write the signature here"},
    [MO_SIG] = {"sig", NULL, "SIGFILE", WS_ARG_STR, 0, "verify: signature"},
    [MO_PUB] = {"pub", NULL, "HEX|FILE", WS_ARG_STR, 0, "verify: public key"},
    [MO_INCLUDE] = CTL_SELECT_INCLUDE_ROW,
    [MO_EXCLUDE] = CTL_SELECT_EXCLUDE_ROW,
};

static const ws_args_spec_t k_mspec = {
    .prog = "p2pctl manifest",
    .synopsis = "create|check|digest|keygen|sign|verify ARGS [options]",
    .about = usage_text,
    .args = k_mopts,
    .nargs = MO_LAST,
    .footer = NULL,
};

/* argv[0] is "manifest", argv[1] the manifest command. 0, WS_ARGS_HELP or
 * WS_EUSAGE (printed). */
static int parse_args(int argc, char **argv, margs_t *a) {
  const char *v[MO_LAST] = {0};
  size_t npos = 0;
  int rc = ws_args_parse(&k_mspec, argc - 1, argv + 1, v, a->pos, 2, &npos);
  if (rc == WS_ARGS_VERSION)
    rc = WS_ARGS_HELP; /* "--version" without a value: the usage */
  if (rc != 0)
    return rc;
  if (ctl_select_collect(&k_mspec, argc - 1, argv + 1, &a->sel) != 0)
    return WS_EUSAGE;
  a->npos = (int)npos;
  a->chunk_size = v[MO_CHUNK];
  a->model = v[MO_MODEL];
  a->version = v[MO_VERSION];
  a->created_at = v[MO_CREATED];
  a->threads = v[MO_THREADS];
  a->dir = v[MO_DIR];
  a->key = v[MO_KEY];
  a->out = v[MO_OUT];
  a->sig = v[MO_SIG];
  a->pub = v[MO_PUB];
  return 0;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out) {
  char *end = NULL;
  unsigned long long v;
  uint64_t mul = 1;
  if (s == NULL || *s < '0' || *s > '9')
    return -1;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0)
    return -1;
  if (strcmp(end, "K") == 0 || strcmp(end, "KiB") == 0)
    mul = 1024;
  else if (strcmp(end, "M") == 0 || strcmp(end, "MiB") == 0)
    mul = 1024 * 1024;
  else if (*end != '\0')
    return -1;
  if (v > max / mul)
    return -1;
  *out = v * mul;
  return 0;
}

static int parse_threads(const margs_t *a, unsigned *out) {
  uint64_t v = 0;
  if (a->threads != NULL && parse_uint(a->threads, 1024, &v) != 0)
    return -1;
  *out = (unsigned)v;
  return 0;
}

/* Reads all of path ("-": stdin) up to max bytes into a new buffer. */
static int read_all(const char *path, size_t max, char **out, size_t *outlen) {
  size_t cap = 64 * 1024, len = 0;
  char *buf = NULL;
  int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC);
  int err = 0;

  if (fd < 0)
    return -errno;
  if ((buf = malloc(cap)) == NULL) {
    err = -ENOMEM;
    goto cleanup;
  }
  for (;;) {
    ssize_t n;
    if (len == cap) {
      char *nb;
      if (cap > max) {
        err = WS_ELIMIT;
        goto cleanup;
      }
      cap *= 2;
      if ((nb = realloc(buf, cap)) == NULL) {
        err = -ENOMEM;
        goto cleanup;
      }
      buf = nb;
    }
    n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      err = -errno;
      goto cleanup;
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  if (len > max) {
    err = WS_ELIMIT;
    goto cleanup;
  }
  *out = buf;
  *outlen = len;
  buf = NULL;
cleanup:
  free(buf);
  if (fd > 0)
    close(fd);
  return err;
}

/* Reads and validates a manifest file; prints the reason on failure. */
static int load_manifest(const char *path, char **buf, size_t *len,
                         ws_manifest_t **m) {
  ws_manifest_limits_t lim;
  char errbuf[CTL_ERRBUF];
  int err;

  ws_manifest_limits_default(&lim);
  if ((err = read_all(path, lim.max_bytes, buf, len)) != 0) {
    fprintf(stderr, "p2pctl manifest: %s: %s\n", path, ws_strerror(err));
    return err;
  }
  if ((err = ws_manifest_parse(*buf, *len, &lim, m, errbuf, sizeof(errbuf))) !=
      0) {
    fprintf(stderr, "p2pctl manifest: %s: invalid (%s): %s\n", path,
            ws_errname(err), errbuf);
    free(*buf);
    *buf = NULL;
  }
  return err;
}

static int write_all(FILE *f, const void *p, size_t len) {
  if (fwrite(p, 1, len, f) != len || fflush(f) != 0)
    return -1;
  return 0;
}

static int cmd_create(const margs_t *a) {
  ws_manifest_build_opts_t o = {0};
  ws_manifest_t *m = NULL;
  char errbuf[CTL_ERRBUF], dstr[WS_DIGEST_STR_LEN + 1];
  char *text = NULL, *hfmodel = NULL;
  size_t len = 0;
  uint64_t cs = 0;
  int err, rc = CTL_EXIT_FAIL;

  if (a->npos != 1 || parse_threads(a, &o.nthreads) != 0)
    return usage("create: expected DIR");
  if (a->chunk_size != NULL && (ws_parse_size(a->chunk_size, &cs) != 0 ||
                                !ws_manifest_chunk_size_ok(cs)))
    return usage("--chunk-size: a power of two in 1Mi..64Mi, e.g. 4Mi or "
                 "4194304");
  o.chunk_size = (uint32_t)cs;
  o.model = a->model;
  if (o.model == NULL &&
      ws_manifest_hf_snapshot(a->pos[0], NULL, &hfmodel) == 1)
    o.model = hfmodel; /* a Hugging Face snapshot: ORG/NAME */
  o.version = a->version;
  o.created_at = a->created_at;
  ctl_select_apply(&a->sel, &o);
  if ((err = ws_manifest_build(a->pos[0], &o, &m, errbuf, sizeof(errbuf))) !=
      0) {
    fprintf(stderr, "p2pctl manifest create: %s: %s\n", ws_errname(err),
            errbuf);
    free(hfmodel);
    return CTL_EXIT_FAIL;
  }
  if ((err = ws_manifest_serialize(m, &text, &len)) != 0) {
    fprintf(stderr, "p2pctl manifest create: %s\n", ws_strerror(err));
    goto cleanup;
  }
  if (write_all(stdout, text, len) != 0) {
    fprintf(stderr, "p2pctl manifest create: stdout: %s\n", strerror(errno));
    goto cleanup;
  }
  ws_digest_to_str(&m->digest, dstr);
  fprintf(stderr,
          "%s  files=%" PRIu32 " bytes=%" PRIu64 " chunks=%" PRIu64 "\n", dstr,
          m->nfiles, m->total_size, m->total_chunks);
  rc = CTL_EXIT_OK;
cleanup:
  free(text);
  free(hfmodel);
  ws_manifest_free(m);
  return rc;
}

static int cmd_check(const margs_t *a) {
  ws_manifest_t *m = NULL;
  char errbuf[CTL_ERRBUF], dstr[WS_DIGEST_STR_LEN + 1];
  char *buf = NULL;
  size_t len = 0;
  unsigned nthreads = 0;
  int err;

  if (a->npos != 1 || parse_threads(a, &nthreads) != 0)
    return usage("check: expected FILE");
  if (load_manifest(a->pos[0], &buf, &len, &m) != 0)
    return CTL_EXIT_FAIL;
  free(buf);
  ws_digest_to_str(&m->digest, dstr);
  if (a->dir != NULL &&
      (err = ws_manifest_verify_dir(m, a->dir, nthreads, errbuf,
                                    sizeof(errbuf))) != 0) {
    fprintf(stderr, "p2pctl manifest check: %s does not match %s (%s): %s\n",
            a->dir, dstr, ws_errname(err), errbuf);
    ws_manifest_free(m);
    return CTL_EXIT_FAIL;
  }
  printf("%s valid: %s files=%" PRIu32 " bytes=%" PRIu64 " chunks=%" PRIu64
         " chunk_size=%" PRIu32 "%s%s\n",
         dstr, m->format != NULL ? m->format : "legacy", m->nfiles,
         m->total_size, m->total_chunks, m->chunk_size,
         m->whole_file ? " whole-file" : "",
         a->dir != NULL ? " dir=verified" : "");
  ws_manifest_free(m);
  return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int cmd_digest(const margs_t *a) {
  ws_manifest_t *m = NULL;
  char dstr[WS_DIGEST_STR_LEN + 1];
  char *buf = NULL;
  size_t len = 0;

  if (a->npos != 1)
    return usage("digest: expected FILE");
  if (load_manifest(a->pos[0], &buf, &len, &m) != 0)
    return CTL_EXIT_FAIL;
  ws_digest_to_str(&m->digest, dstr);
  printf("%s\n", dstr);
  free(buf);
  ws_manifest_free(m);
  return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int cmd_keygen(const margs_t *a) {
  ws_sig_secret_t sk;
  ws_sig_pub_t pk;
  char hex[WS_SIG_KEY_HEX_LEN + 1];
  int err;

  if (a->npos != 1)
    return usage("keygen: expected KEYFILE");
  if ((err = ws_sig_keypair(&pk, &sk)) != 0 ||
      (err = ws_sig_secret_save(a->pos[0], &sk)) != 0) {
    ws_sig_secret_wipe(&sk);
    fprintf(stderr, "p2pctl manifest keygen: %s: %s\n", a->pos[0],
            ws_strerror(err));
    return CTL_EXIT_FAIL;
  }
  ws_sig_secret_wipe(&sk);
  ws_sig_hex32_format(pk.b, hex);
  printf("%s\n", hex);
  return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

static int cmd_sign(const margs_t *a) {
  ws_manifest_t *m = NULL;
  ws_sig_secret_t sk;
  ws_sig_pub_t pk;
  ws_sig_t sig;
  FILE *out = stdout;
  char *buf = NULL;
  size_t len = 0;
  int err, rc = CTL_EXIT_FAIL;

  if (a->npos != 1 || a->key == NULL)
    return usage("sign: expected FILE --key KEYFILE");
  if (a->out == NULL && isatty(STDOUT_FILENO))
    return usage("sign: the signature is binary; redirect stdout or --out");
  if ((err = ws_sig_secret_load(a->key, &sk, &pk)) != 0) {
    fprintf(stderr, "p2pctl manifest sign: %s: %s\n", a->key, ws_strerror(err));
    return CTL_EXIT_FAIL;
  }
  if (load_manifest(a->pos[0], &buf, &len, &m) != 0)
    goto cleanup;
  if ((err = ws_sig_sign(buf, len, &sk, &sig)) != 0) {
    fprintf(stderr, "p2pctl manifest sign: %s\n", ws_strerror(err));
    goto cleanup;
  }
  if (a->out != NULL && (out = fopen(a->out, "wb")) == NULL) {
    fprintf(stderr, "p2pctl manifest sign: %s: %s\n", a->out, strerror(errno));
    goto cleanup;
  }
  if (write_all(out, sig.b, sizeof(sig.b)) != 0) {
    fprintf(stderr, "p2pctl manifest sign: write: %s\n", strerror(errno));
    goto cleanup;
  }
  rc = CTL_EXIT_OK;
cleanup:
  if (out != stdout && out != NULL && fclose(out) != 0)
    rc = CTL_EXIT_FAIL;
  ws_sig_secret_wipe(&sk);
  ws_manifest_free(m);
  free(buf);
  return rc;
}

static int cmd_verify(const margs_t *a) {
  ws_sig_pub_t pk;
  ws_sig_t sig;
  char *buf = NULL, *sbuf = NULL;
  size_t len = 0, slen = 0;
  int err, rc = CTL_EXIT_FAIL;

  if (a->npos != 1 || a->sig == NULL || a->pub == NULL)
    return usage("verify: expected FILE --sig SIGFILE --pub HEX|FILE");
  if ((err = ws_sig_pub_load(a->pub, &pk)) != 0) {
    fprintf(stderr, "p2pctl manifest verify: --pub: %s\n", ws_strerror(err));
    return CTL_EXIT_FAIL;
  }
  if ((err = read_all(a->sig, WS_SIG_LEN, &sbuf, &slen)) != 0 ||
      slen != WS_SIG_LEN) {
    fprintf(stderr, "p2pctl manifest verify: %s: %s\n", a->sig,
            err != 0 ? ws_strerror(err) : "not a 64-byte signature");
    goto cleanup;
  }
  memcpy(sig.b, sbuf, WS_SIG_LEN);
  /* The signature covers bytes, valid manifest or not: check it first so a
   * forged manifest is reported as such, then validate the content. */
  if ((err = read_all(a->pos[0], (size_t)64 << 20, &buf, &len)) != 0) {
    fprintf(stderr, "p2pctl manifest verify: %s: %s\n", a->pos[0],
            ws_strerror(err));
    goto cleanup;
  }
  if ((err = ws_sig_verify(buf, len, &sig, &pk)) != 0) {
    fprintf(stderr, "p2pctl manifest verify: %s: signature does not verify\n",
            a->pos[0]);
    goto cleanup;
  }
  {
    ws_manifest_t *m = NULL;
    char errbuf[CTL_ERRBUF];
    if ((err = ws_manifest_parse(buf, len, NULL, &m, errbuf, sizeof(errbuf))) !=
        0) {
      fprintf(stderr,
              "p2pctl manifest verify: %s: signature valid but manifest "
              "invalid (%s): %s\n",
              a->pos[0], ws_errname(err), errbuf);
      goto cleanup;
    }
    ws_manifest_free(m);
  }
  printf("ok: signature valid\n");
  rc = fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
cleanup:
  free(buf);
  free(sbuf);
  return rc;
}

int ctl_manifest_main(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*run)(const margs_t *a);
  } cmds[] = {
      {"create", cmd_create}, {"check", cmd_check}, {"digest", cmd_digest},
      {"keygen", cmd_keygen}, {"sign", cmd_sign},   {"verify", cmd_verify},
  };
  margs_t a = {0};

  if (argc < 2)
    return usage(NULL);
  int rc = parse_args(argc, argv, &a);
  if (rc == WS_ARGS_HELP || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "--help") == 0) {
    ws_args_usage(&k_mspec, stdout);
    return CTL_EXIT_OK;
  }
  if (rc != 0)
    return CTL_EXIT_USAGE;
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    if (strcmp(argv[1], cmds[i].name) == 0)
      return cmds[i].run(&a);
  return usage("unknown manifest command");
}
