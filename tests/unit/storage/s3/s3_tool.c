/* s3_tool.c - a small test CLI over the S3 client, used by the integration
 * tests (tests/integration/test_s3_*.py). One loop, one client, one
 * command; prints errors once to stderr and exits non-zero on failure.
 *
 *   s3_tool creds [-v]     (-v: also "expires_ms=N region=R")
 *   s3_tool head s3://b/k
 *   s3_tool get s3://b/k OUT [--range A-B] [--pause-every N]
 *   s3_tool put FILE s3://b/k [--part-size N] [--sha256]
 *   s3_tool ls s3://b/prefix [--delimiter D]
 * Global: --stats prints request/retry counters to stderr at exit.
 */
#include "digest.h"
#include "s3.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  uv_loop_t loop;
  ws_s3_t *s3;
  ws_s3_uri_t uri;
  int status;
  int out_fd;
  uint64_t pause_every, since_pause;
  uint64_t first; /* object offset of the output file's byte 0 */
  uv_timer_t resume_timer;
  ws_s3_req_t *get_req;
  /* multipart */
  int in_fd;
  uint64_t size, part_size;
  unsigned nparts, parts_done, parts_started;
  char **etags;
  char *upload_id;
} tool_t;

static tool_t T;

static void fail(ws_s3_req_t *req, int status) {
  T.status = status;
  fprintf(stderr, "s3_tool: %s (%s)\n", ws_s3_req_errmsg(req),
          ws_errname(status));
}

static void on_creds(ws_s3_req_t *req, int status, void *arg) {
  (void)arg;
  if (status) {
    fail(req, status);
    return;
  }
  printf("source=%s access_key_id=%s\n", ws_s3_creds_source(T.s3),
         ws_s3_creds_access_key(T.s3));
  if (arg)
    printf("expires_ms=%lld region=%s\n", (long long)ws_s3_creds_expiry(T.s3),
           ws_s3_region(T.s3));
}

static void on_head(ws_s3_req_t *req, int status, void *arg) {
  (void)arg;
  if (status) {
    fail(req, status);
    return;
  }
  printf("size=%" PRIu64 " etag=%s\n", ws_s3_req_size(req),
         ws_s3_req_etag(req) ? ws_s3_req_etag(req) : "");
}

static void on_resume(uv_timer_t *t) {
  (void)t;
  if (T.get_req)
    ws_s3_req_resume(T.get_req);
}

static int on_data(ws_s3_req_t *req, uint64_t off, const void *buf, size_t len,
                   void *arg) {
  (void)arg;
  if (T.pause_every && T.since_pause >= T.pause_every) {
    T.since_pause = 0;
    T.get_req = req;
    uv_timer_start(&T.resume_timer, on_resume, 2, 0);
    return WS_S3_DATA_PAUSE;
  }
  const char *p = buf;
  size_t left = len;
  while (left > 0) { /* the file holds the range from its first byte */
    ssize_t w = pwrite(T.out_fd, p, left, (off_t)(off - T.first));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -EIO;
    p += w;
    off += (uint64_t)w;
    left -= (size_t)w;
  }
  T.since_pause += len;
  return WS_S3_DATA_OK;
}

static void on_get(ws_s3_req_t *req, int status, void *arg) {
  (void)arg;
  T.get_req = NULL;
  uv_close((uv_handle_t *)&T.resume_timer, NULL);
  if (status)
    fail(req, status);
  else
    printf("size=%" PRIu64 " etag=%s\n", ws_s3_req_size(req),
           ws_s3_req_etag(req) ? ws_s3_req_etag(req) : "");
}

static void on_put(ws_s3_req_t *req, int status, void *arg) {
  (void)arg;
  if (status)
    fail(req, status);
  else
    printf("etag=%s\n", ws_s3_req_etag(req) ? ws_s3_req_etag(req) : "");
}

static void on_ls(ws_s3_req_t *req, int status, void *arg) {
  (void)arg;
  if (status) {
    fail(req, status);
    return;
  }
  size_t n;
  const ws_s3_entry_t *e = ws_s3_req_entries(req, &n);
  for (size_t i = 0; i < n; i++)
    printf("%" PRIu64 "\t%s\t%s\n", e[i].size, e[i].etag ? e[i].etag : "",
           e[i].key);
}

static void on_abort(ws_s3_req_t *req, int status, void *arg) {
  (void)req;
  (void)status;
  (void)arg;
}

static void on_complete(ws_s3_req_t *req, int status, void *arg) {
  (void)arg;
  if (status) {
    fail(req, status);
    ws_s3_mpu_abort(T.s3, T.uri.bucket, T.uri.key, T.upload_id, on_abort, NULL);
    return;
  }
  printf("etag=%s parts=%u\n", ws_s3_req_etag(req) ? ws_s3_req_etag(req) : "",
         T.nparts);
}

static void on_part(ws_s3_req_t *req, int status, void *arg) {
  unsigned i = (unsigned)(uintptr_t)arg;
  if (status) {
    if (T.status == 0) {
      fail(req, status);
      ws_s3_mpu_abort(T.s3, T.uri.bucket, T.uri.key, T.upload_id, on_abort,
                      NULL);
    }
    return;
  }
  T.etags[i] = strdup(ws_s3_req_etag(req));
  if (++T.parts_done == T.nparts && T.status == 0)
    ws_s3_mpu_complete(T.s3, T.uri.bucket, T.uri.key, T.upload_id,
                       (const char *const *)T.etags, T.nparts, on_complete,
                       NULL);
}

static void on_create(ws_s3_req_t *req, int status, void *arg) {
  (void)arg;
  if (status) {
    fail(req, status);
    return;
  }
  T.upload_id = strdup(ws_s3_req_upload_id(req));
  for (unsigned i = 0; i < T.nparts; i++) {
    uint64_t off = (uint64_t)i * T.part_size;
    uint64_t len = T.size - off < T.part_size ? T.size - off : T.part_size;
    ws_s3_body_t b = {.fd = T.in_fd, .offset = off, .len = len};
    ws_s3_mpu_part(T.s3, T.uri.bucket, T.uri.key, T.upload_id, i + 1, &b,
                   on_part, (void *)(uintptr_t)i);
  }
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end)
    return -1;
  *out = v;
  return 0;
}

static int usage(void) {
  fputs("usage: s3_tool [--stats] creds [-v] | head URI | get URI OUT "
        "[--range A-B] [--pause-every N] | put FILE URI [--part-size N] "
        "[--sha256] | ls URI [--delimiter D]\n",
        stderr);
  return 2;
}

static int start(int argc, char **argv) {
  const char *cmd = argv[0];
  if (strcmp(cmd, "creds") == 0) {
    int verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    return ws_s3_creds_resolve(T.s3, on_creds, verbose ? &T : NULL) ? 0
                                                                    : -ENOMEM;
  }
  if (argc < 2 ||
      ws_s3_uri_parse(argv[strcmp(cmd, "put") == 0 ? 2 : 1], &T.uri) != 0)
    return WS_EUSAGE;
  if (strcmp(cmd, "head") == 0)
    return ws_s3_head(T.s3, T.uri.bucket, T.uri.key, on_head, NULL) ? 0
                                                                    : WS_EUSAGE;
  if (strcmp(cmd, "ls") == 0) {
    const char *delim = NULL;
    if (argc >= 4 && strcmp(argv[2], "--delimiter") == 0)
      delim = argv[3];
    return ws_s3_list(T.s3, T.uri.bucket, T.uri.key, delim, on_ls, NULL)
               ? 0
               : WS_EUSAGE;
  }
  if (strcmp(cmd, "get") == 0) {
    if (argc < 3)
      return WS_EUSAGE;
    ws_s3_range_t range = {0, WS_S3_LEN_TO_END, NULL};
    int ranged = 0;
    for (int i = 3; i + 1 < argc; i += 2) {
      if (strcmp(argv[i], "--range") == 0) {
        uint64_t a, b;
        char *dash = strchr(argv[i + 1], '-');
        if (!dash)
          return WS_EUSAGE;
        *dash = '\0';
        if (parse_u64(argv[i + 1], &a) || parse_u64(dash + 1, &b) || b < a)
          return WS_EUSAGE;
        range.offset = a;
        range.len = b - a + 1;
        T.first = a;
        ranged = 1;
      } else if (strcmp(argv[i], "--pause-every") == 0) {
        if (parse_u64(argv[i + 1], &T.pause_every))
          return WS_EUSAGE;
      } else {
        return WS_EUSAGE;
      }
    }
    T.out_fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (T.out_fd < 0)
      return -errno;
    uv_timer_init(&T.loop, &T.resume_timer);
    return ws_s3_get(T.s3, T.uri.bucket, T.uri.key, ranged ? &range : NULL,
                     on_data, on_get, NULL)
               ? 0
               : WS_EUSAGE;
  }
  if (strcmp(cmd, "put") == 0) {
    int want_sha = 0;
    for (int i = 3; i < argc; i++) {
      if (strcmp(argv[i], "--part-size") == 0 && i + 1 < argc) {
        if (parse_u64(argv[++i], &T.part_size) || T.part_size < (5u << 20))
          return WS_EUSAGE;
      } else if (strcmp(argv[i], "--sha256") == 0) {
        want_sha = 1;
      } else {
        return WS_EUSAGE;
      }
    }
    T.in_fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (T.in_fd < 0 || fstat(T.in_fd, &st) != 0)
      return -errno;
    T.size = (uint64_t)st.st_size;
    if (T.part_size && T.size > T.part_size) {
      T.nparts = (unsigned)((T.size + T.part_size - 1) / T.part_size);
      T.etags = calloc(T.nparts, sizeof(char *));
      if (!T.etags)
        return -ENOMEM;
      return ws_s3_mpu_create(T.s3, T.uri.bucket, T.uri.key, on_create, NULL)
                 ? 0
                 : WS_EUSAGE;
    }
    char hex[WS_SHA256_HEX_LEN + 1];
    ws_s3_body_t b = {.fd = T.in_fd, .offset = 0, .len = T.size};
    if (want_sha) {
      ws_hash_t h;
      int rc = ws_sha256_fd(T.in_fd, 0, T.size, &h);
      if (rc)
        return rc;
      ws_hash_to_hex(&h, hex);
      b.sha256_hex = hex;
    }
    return ws_s3_put(T.s3, T.uri.bucket, T.uri.key, &b, on_put, NULL)
               ? 0
               : WS_EUSAGE;
  }
  return WS_EUSAGE;
}

int main(int argc, char **argv) {
  int stats = 0;
  argv++, argc--;
  if (argc > 0 && strcmp(argv[0], "--stats") == 0) {
    stats = 1;
    argv++, argc--;
  }
  if (argc < 1)
    return usage();
  uv_loop_init(&T.loop);
  T.out_fd = T.in_fd = -1;
  ws_s3_config_t cfg;
  ws_s3_config_default(&cfg);
  ws_s3_config_from_env(&cfg);
  const char *v = getenv("WS_S3_TEST_MAX_ATTEMPTS");
  uint64_t n;
  if (v && parse_u64(v, &n) == 0)
    cfg.max_attempts = (unsigned)n;
  v = getenv("WS_S3_TEST_LIST_PAGE");
  if (v && parse_u64(v, &n) == 0)
    cfg.list_page_size = (unsigned)n;
  v = getenv("WS_S3_TEST_RETRY_WINDOW_MS");
  if (v && parse_u64(v, &n) == 0)
    cfg.retry_window_ms = (unsigned)n;
  int rc = ws_s3_new(&T.loop, &cfg, &T.s3);
  if (rc) {
    fprintf(stderr, "s3_tool: bad configuration: %s\n", ws_strerror(rc));
    return 1;
  }
  rc = start(argc, argv);
  if (rc == WS_EUSAGE) {
    ws_s3_close(T.s3, NULL, NULL);
    uv_run(&T.loop, UV_RUN_DEFAULT);
    return usage();
  }
  if (rc) {
    fprintf(stderr, "s3_tool: %s\n", ws_strerror(rc));
    T.status = rc;
  } else {
    uv_run(&T.loop, UV_RUN_DEFAULT);
  }
  ws_s3_stats_t st;
  ws_s3_stats_get(T.s3, &st);
  if (stats)
    fprintf(stderr,
            "stats requests=%" PRIu64 " retries=%" PRIu64 " bytes_rx=%" PRIu64
            " bytes_tx=%" PRIu64 "\n",
            st.requests, st.retries, st.bytes_rx, st.bytes_tx);
  ws_s3_close(T.s3, NULL, NULL);
  uv_run(&T.loop, UV_RUN_DEFAULT);
  int crc = uv_loop_close(&T.loop);
  if (crc != 0) {
    fprintf(stderr, "s3_tool: loop did not close cleanly: %s\n",
            uv_strerror(crc));
    return 1;
  }
  if (T.etags) {
    for (unsigned i = 0; i < T.nparts; i++)
      free(T.etags[i]);
    free(T.etags);
  }
  free(T.upload_id);
  ws_s3_uri_free(&T.uri);
  if (T.out_fd >= 0)
    close(T.out_fd);
  if (T.in_fd >= 0)
    close(T.in_fd);
  if (T.status == WS_ES3NOKEY)
    return 4;
  if (T.status == WS_ES3AUTH)
    return 3;
  return T.status ? 1 : 0;
}
