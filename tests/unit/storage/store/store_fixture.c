/* store_fixture.c - see store_fixture.h. Test process only; failures abort
 * the test through cmocka asserts. */
#include "store_fixture.h"

#include <stdarg.h>
#include <setjmp.h>
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

/* snprintf into a path buffer; fails the test if it does not fit. */
static void pathf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pathf(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(buf, len, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < len);
}

char *fx_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char buf[PATH_MAX];
  pathf(buf, sizeof(buf), "%s/ws-store-XXXXXX", base ? base : "/tmp");
  assert_non_null(mkdtemp(buf));
  return strdup(buf);
}

void fx_rmrf(const char *path) {
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
    pathf(sub, sizeof(sub), "%s/%s", path, e->d_name);
    if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
      fx_rmrf(sub);
    else
      unlink(sub);
  }
  closedir(d);
  rmdir(path);
}

uint8_t *fx_pattern(size_t n, uint32_t seed) {
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

void fx_manifest(const char *model, const char *version, const fx_file_t *f,
                 size_t n, int whole, ws_manifest_t **m, char **bytes,
                 size_t *len) {
  cJSON *root = cJSON_CreateObject(), *files = cJSON_CreateArray();
  char err[256] = "";
  int rc;
  cJSON_AddStringToObject(root, "format", WS_MANIFEST_FORMAT_V1);
  if (model)
    cJSON_AddStringToObject(root, "model", model);
  if (version)
    cJSON_AddStringToObject(root, "version", version);
  cJSON_AddNumberToObject(root, "chunk_size", FX_CS);
  for (size_t i = 0; i < n; i++) {
    cJSON *fo = cJSON_CreateObject();
    cJSON_AddStringToObject(fo, "name", f[i].name);
    cJSON_AddNumberToObject(fo, "size", (double)f[i].size);
    add_hex(fo, "sha256", f[i].data, f[i].size);
    if (!whole) {
      cJSON *ch = cJSON_AddArrayToObject(fo, "chunks");
      for (size_t off = 0; off < f[i].size; off += FX_CS)
        add_hex(ch, NULL, f[i].data + off,
                f[i].size - off < FX_CS ? f[i].size - off : FX_CS);
    }
    cJSON_AddItemToArray(files, fo);
  }
  cJSON_AddItemToObject(root, "files", files);
  *bytes = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  *len = strlen(*bytes);
  rc = ws_manifest_parse(*bytes, *len, NULL, m, err, sizeof(err));
  if (rc != 0)
    fail_msg("manifest: %s (%s)", ws_strerror(rc), err);
}

int fx_fetch_file(ws_store_t *st, const ws_manifest_t *m, uint32_t i,
                  const uint8_t *data, uint32_t *written) {
  ws_store_file_t *pf;
  uint32_t w = 0;
  int rc = ws_store_file_open(st, &m->files[i], m->chunk_size, &pf);
  if (rc != 0)
    return rc;
  for (uint32_t j = 0; j < ws_store_file_nchunks(pf); j++) {
    if (ws_store_file_has_chunk(pf, j))
      continue;
    rc = ws_store_chunk_write(pf, j, data + ws_store_file_chunk_offset(pf, j),
                              ws_store_file_chunk_len(pf, j));
    if (rc != 0)
      goto out;
    w++;
  }
  rc = ws_store_file_finish(pf);
out:
  ws_store_file_close(pf);
  if (written)
    *written += w;
  return rc;
}

int fx_fetch_release(ws_store_t *st, const ws_manifest_t *m, const char *bytes,
                     size_t len, const uint8_t *const *datas,
                     uint32_t *written) {
  int rc = ws_store_release_begin(st, m);
  for (uint32_t i = 0; i < m->nfiles && rc == 0; i++)
    rc = fx_fetch_file(st, m, i, datas[i], written);
  if (rc == 0)
    rc = ws_store_release_publish(st, m, bytes, len);
  return rc;
}

static int file_hash(const char *path, ws_hash_t *h) {
  FILE *f = fopen(path, "rb");
  ws_sha256_t *ctx = ws_sha256_new();
  uint8_t buf[65536];
  size_t n;
  int rc = ws_sha256_init(ctx);
  if (f == NULL) {
    ws_sha256_free(ctx);
    return -1;
  }
  while (rc == 0 && (n = fread(buf, 1, sizeof(buf), f)) > 0)
    rc = ws_sha256_update(ctx, buf, n);
  if (rc == 0)
    rc = ws_sha256_final(ctx, h);
  fclose(f);
  ws_sha256_free(ctx);
  return rc;
}

static int check_blobs(const char *root, int *count) {
  char dir[PATH_MAX];
  DIR *d, *sd;
  struct dirent *e, *se;
  int bad = 0;
  pathf(dir, sizeof(dir), "%s/blobs/sha256", root);
  if ((d = opendir(dir)) == NULL)
    return 0;
  while ((e = readdir(d)) != NULL) {
    char sub[PATH_MAX];
    if (e->d_name[0] == '.')
      continue;
    pathf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
    if ((sd = opendir(sub)) == NULL)
      continue;
    while ((se = readdir(sd)) != NULL) {
      char path[PATH_MAX];
      ws_hash_t want, got;
      if (se->d_name[0] == '.')
        continue;
      pathf(path, sizeof(path), "%s/%s", sub, se->d_name);
      (*count)++;
      if (ws_hash_from_hex(se->d_name, strlen(se->d_name), &want) != 0 ||
          file_hash(path, &got) != 0 || !ws_hash_eq(&want, &got)) {
        print_error("bad blob %s\n", path);
        bad++;
      }
    }
    closedir(sd);
  }
  closedir(d);
  return bad;
}

static int check_release(const char *dir, const char *name) {
  char path[PATH_MAX];
  FILE *f;
  char *buf;
  long n;
  ws_manifest_t *m = NULL;
  ws_hash_t want, got;
  int bad = 0;
  pathf(path, sizeof(path), "%s/%s/manifest.json", dir, name);
  if ((f = fopen(path, "rb")) == NULL)
    return 1;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  rewind(f);
  buf = malloc((size_t)n + 1);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n)
    n = -1;
  fclose(f);
  if (n < 0 || ws_digest_from_str(name, &want) != 0 ||
      ws_sha256(buf, (size_t)n, &got) != 0 || !ws_hash_eq(&want, &got) ||
      ws_manifest_parse(buf, (size_t)n, NULL, &m, NULL, 0) != 0) {
    free(buf);
    return 1;
  }
  for (uint32_t i = 0; i < m->nfiles; i++) {
    pathf(path, sizeof(path), "%s/%s/%s", dir, name, m->files[i].name);
    if (file_hash(path, &got) != 0 || !ws_hash_eq(&got, &m->files[i].sha256)) {
      print_error("bad release file %s\n", path);
      bad++;
    }
  }
  ws_manifest_free(m);
  free(buf);
  return bad;
}

int fx_check_visible(const char *root, int *nblobs, int *nreleases) {
  char dir[PATH_MAX];
  DIR *d;
  struct dirent *e;
  int bad, nb = 0, nr = 0;
  bad = check_blobs(root, &nb);
  pathf(dir, sizeof(dir), "%s/releases", root);
  if ((d = opendir(dir)) != NULL) {
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.')
        continue;
      nr++;
      bad += check_release(dir, e->d_name);
    }
    closedir(d);
  }
  if (nblobs)
    *nblobs = nb;
  if (nreleases)
    *nreleases = nr;
  return bad;
}
