/* manifest.c - manifest v1 (docs/manifest.md): parse, validate, serialize,
 * chunk geometry. Owns the ws_manifest_t object and every rule a reader
 * enforces.
 *
 * Parsing order (each step bounds the next one's allocations):
 *   1. document size <= lim->max_bytes;
 *   2. one linear pre-scan of the raw bytes: rejects NUL and raw control
 *      bytes inside strings (cJSON would silently truncate at a NUL, so two
 *      parsers could disagree on a name) and counts an upper bound of JSON
 *      values, which must fit the node budget derived from the limits: cJSON
 *      allocates one ~64-byte node per value, so "0,0,0,..." would otherwise
 *      cost 32x the document size;
 *   3. cJSON parse, then the whole document must be consumed (the digest is
 *      over the exact bytes, so trailing bytes are not allowed to hide);
 *   4. field checks; every array is counted against its cap before the
 *      matching C array is allocated.
 *
 * Thread: pure functions, any thread (cJSON's parse-error pointer is global
 * but unused here: positions come from return_parse_end).
 */
#include "manifest.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest-int.h"

#define MANIFEST_TEXT_MAX 256    /* bytes in model, version, created_at */
#define MANIFEST_OBJ_KEYS_MAX 32 /* keys in the top object / a file object */
#define MANIFEST_SAFE_INT_MAX ((uint64_t)1 << 53) /* exact in a double */

void ws_manifest_limits_default(ws_manifest_limits_t *lim) {
  lim->max_bytes = (size_t)64 << 20;
  lim->max_files = 100000;
  lim->max_total_size = (uint64_t)16 << 40;
  lim->max_file_size = (uint64_t)16 << 40;
}

int ws_manifest_fail(char *errbuf, size_t errlen, int err, const char *fmt,
                     ...) {
  va_list ap;
  if (errbuf == NULL || errlen == 0)
    return err;
  va_start(ap, fmt);
  vsnprintf(errbuf, errlen, fmt, ap);
  va_end(ap);
  return err;
}

/* ---- raw pre-scan ------------------------------------------------------ */

static int prescan(const char *buf, size_t len, size_t max_nodes, char *errbuf,
                   size_t errlen) {
  size_t nodes = 1;
  int in_str = 0;

  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)buf[i];
    if (c == 0)
      return ws_manifest_fail(errbuf, errlen, WS_EJSON, "NUL byte at %zu", i);
    if (in_str) {
      if (c == '\\') {
        if (i + 5 < len && buf[i + 1] == 'u' &&
            memcmp(buf + i + 2, "0000", 4) == 0)
          return ws_manifest_fail(errbuf, errlen, WS_EJSON,
                                  "\\u0000 escape at byte %zu", i);
        i++; /* skip the escaped character ('"' or '\\' included) */
      } else if (c == '"') {
        in_str = 0;
      } else if (c < 0x20) {
        return ws_manifest_fail(errbuf, errlen, WS_EJSON,
                                "raw control character in string at byte %zu",
                                i);
      }
    } else if (c == '"') {
      in_str = 1;
    } else if (c == ',' || c == '[' || c == '{') {
      nodes++;
    }
  }
  if (nodes > max_nodes)
    return ws_manifest_fail(errbuf, errlen, WS_ELIMIT,
                            "document has more than %zu JSON values",
                            max_nodes);
  return 0;
}

/* ---- text and name rules ----------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no
 * surrogates, <= U+10FFFF), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len) {
  unsigned char c = s[0];
  unsigned char lo = 0x80, hi = 0xbf;
  size_t n;

  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4;
  else
    return 0;
  if (c == 0xe0)
    lo = 0xa0;
  else if (c == 0xed)
    hi = 0x9f;
  else if (c == 0xf0)
    lo = 0x90;
  else if (c == 0xf4)
    hi = 0x8f;
  if (len < n || s[1] < lo || s[1] > hi)
    return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xbf)
      return 0;
  return n;
}

/* Reason why s is not acceptable text (UTF-8, no control chars), or NULL. */
static const char *text_problem(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    size_t n;
    if (u[i] < 0x20 || u[i] == 0x7f)
      return "control character";
    if ((n = utf8_seq(u + i, len - i)) == 0)
      return "invalid UTF-8";
    i += n;
  }
  return NULL;
}

const char *ws_manifest_name_problem(const char *name, size_t len) {
  const char *why;
  size_t start = 0;

  if (len == 0)
    return "empty name";
  if (len > WS_MANIFEST_NAME_MAX)
    return "name longer than 1024 bytes";
  if (memchr(name, 0, len) != NULL)
    return "NUL byte";
  if ((why = text_problem(name, len)) != NULL)
    return why;
  if (name[0] == '/')
    return "absolute path";
  /* A path separator elsewhere: "..\\x" climbs out of the release where
   * a copy of it is read on Windows. */
  if (memchr(name, '\\', len) != NULL)
    return "backslash";
  for (size_t i = 0; i <= len; i++) {
    if (i < len && name[i] != '/')
      continue;
    size_t clen = i - start;
    const char *comp = name + start;
    if (clen == 0)
      return i == len ? "trailing '/'" : "empty path component ('//')";
    if (clen == 1 && comp[0] == '.')
      return "'.' component";
    if (clen == 2 && comp[0] == '.' && comp[1] == '.')
      return "'..' component";
    if (clen > 255)
      return "path component longer than 255 bytes";
    start = i + 1;
  }
  if ((len == 13 && memcmp(name, "manifest.json", 13) == 0) ||
      (len == 17 && memcmp(name, "manifest.json.sig", 17) == 0))
    return "reserved name (the release's own manifest)";
  return NULL;
}

int ws_manifest_check_name(const char *name, size_t len) {
  return ws_manifest_name_problem(name, len) == NULL ? 0 : WS_EPATH;
}

/* Orders names component-wise: '/' sorts before every other byte, so a name
 * is immediately followed by its descendants ("a" < "a/b" < "a.txt"). */
static int name_cmp(const char *a, const char *b) {
  for (;; a++, b++) {
    unsigned ca = (unsigned char)*a, cb = (unsigned char)*b;
    if (ca == cb) {
      if (ca == 0)
        return 0;
      continue;
    }
    ca = ca == '/' ? 1 : ca;
    cb = cb == '/' ? 1 : cb;
    return ca < cb ? -1 : 1;
  }
}

static int name_idx_cmp(const void *pa, const void *pb) {
  const ws_mfile_t *a = *(const ws_mfile_t *const *)pa;
  const ws_mfile_t *b = *(const ws_mfile_t *const *)pb;
  return name_cmp(a->name, b->name);
}

int ws_manifest_check_names(const ws_mfile_t *files, uint32_t n, char *errbuf,
                            size_t errlen) {
  const ws_mfile_t **idx;
  int err = 0;

  if (n < 2)
    return 0;
  idx = malloc((size_t)n * sizeof(*idx));
  if (idx == NULL)
    return -ENOMEM;
  for (uint32_t i = 0; i < n; i++)
    idx[i] = &files[i];
  qsort(idx, n, sizeof(*idx), name_idx_cmp);
  for (uint32_t i = 0; i + 1 < n; i++) {
    const char *a = idx[i]->name, *b = idx[i + 1]->name;
    size_t alen = strlen(a);
    if (strcmp(a, b) == 0) {
      err = ws_manifest_fail(errbuf, errlen, WS_EDUPNAME,
                             "files[%td].name: duplicate of files[%td] '%s'",
                             idx[i + 1] - files, idx[i] - files, a);
      goto out;
    }
    if (strncmp(a, b, alen) == 0 && b[alen] == '/') {
      err = ws_manifest_fail(errbuf, errlen, WS_EPATH,
                             "files[%td].name: '%s' is also a directory of "
                             "files[%td] '%s'",
                             idx[i] - files, a, idx[i + 1] - files, b);
      goto out;
    }
  }
out:
  free(idx);
  return err;
}

/* ---- field readers ----------------------------------------------------- */

/* Rejects objects with too many keys or a key given twice (JSON parsers
 * disagree on which duplicate wins; the digest must mean one thing). */
static int check_keys(const cJSON *obj, const char *where, char *errbuf,
                      size_t errlen) {
  int n = 0;
  for (const cJSON *a = obj->child; a != NULL; a = a->next) {
    if (++n > MANIFEST_OBJ_KEYS_MAX)
      return ws_manifest_fail(errbuf, errlen, WS_ELIMIT,
                              "%s: more than %d keys", where,
                              MANIFEST_OBJ_KEYS_MAX);
    for (const cJSON *b = obj->child; b != a; b = b->next)
      if (strcmp(a->string, b->string) == 0)
        return ws_manifest_fail(errbuf, errlen, WS_EJSON,
                                "%s: duplicate key '%s'", where, a->string);
  }
  return 0;
}

/* A JSON integer 0..2^53-1 (exact in a double, and so in every JSON
 * reader); larger than max is WS_ELIMIT. */
static int read_u64(const cJSON *it, uint64_t max, const char *where,
                    uint64_t *out, char *errbuf, size_t errlen) {
  double d;
  uint64_t v;

  if (!cJSON_IsNumber(it))
    return ws_manifest_fail(errbuf, errlen, WS_EMANIFEST, "%s: not a number",
                            where);
  d = it->valuedouble;
  if (!(d >= 0))
    return ws_manifest_fail(errbuf, errlen, WS_EMANIFEST, "%s: negative",
                            where);
  if (d >= (double)MANIFEST_SAFE_INT_MAX)
    return ws_manifest_fail(errbuf, errlen, WS_ELIMIT, "%s: not below 2^53",
                            where);
  v = (uint64_t)d;
  if ((double)v != d)
    return ws_manifest_fail(errbuf, errlen, WS_EMANIFEST, "%s: not an integer",
                            where);
  if (v > max)
    return ws_manifest_fail(errbuf, errlen, WS_ELIMIT,
                            "%s: %" PRIu64 " over the limit %" PRIu64, where, v,
                            max);
  *out = v;
  return 0;
}

/* Optional text field: absent or null leaves *out NULL. */
static int read_text(const cJSON *obj, const char *key, char **out,
                     char *errbuf, size_t errlen) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  const char *why;
  size_t len;

  if (it == NULL || cJSON_IsNull(it))
    return 0;
  if (!cJSON_IsString(it))
    return ws_manifest_fail(errbuf, errlen, WS_EMANIFEST, "%s: not a string",
                            key);
  len = strlen(it->valuestring);
  if (len > MANIFEST_TEXT_MAX)
    return ws_manifest_fail(errbuf, errlen, WS_ELIMIT,
                            "%s: longer than %d bytes", key, MANIFEST_TEXT_MAX);
  if ((why = text_problem(it->valuestring, len)) != NULL)
    return ws_manifest_fail(errbuf, errlen, WS_EMANIFEST, "%s: %s", key, why);
  if ((*out = strdup(it->valuestring)) == NULL)
    return -ENOMEM;
  return 0;
}

static int read_hex(const cJSON *it, const char *where, ws_hash_t *out,
                    char *errbuf, size_t errlen) {
  if (!cJSON_IsString(it) ||
      ws_hash_from_hex(it->valuestring, strlen(it->valuestring), out) != 0)
    return ws_manifest_fail(errbuf, errlen, WS_EHEX,
                            "%s: not 64 hex characters", where);
  return 0;
}

/* ---- parse ------------------------------------------------------------- */

typedef struct {
  const ws_manifest_limits_t *lim;
  char *errbuf;
  size_t errlen;
  int chunk_size_given;
  uint32_t with_chunks;    /* non-empty files that carry chunk hashes */
  uint32_t without_chunks; /* non-empty files without one */
} parse_ctx_t;

static int parse_chunks(parse_ctx_t *pc, const cJSON *arr, uint32_t k,
                        ws_mfile_t *f) {
  char where[48];
  int n, i = 0;

  if (!cJSON_IsArray(arr))
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST,
                            "files[%" PRIu32 "].chunks: not an array", k);
  n = cJSON_GetArraySize(arr);
  if (n < 0 || (uint64_t)n != f->nchunks)
    return ws_manifest_fail(
        pc->errbuf, pc->errlen, WS_ECHUNKCOUNT,
        "files[%" PRIu32 "].chunks: %d hashes, size %" PRIu64 " needs %" PRIu32,
        k, n, f->size, f->nchunks);
  if (n == 0) /* an empty file: says nothing about the manifest's mode */
    return 0;
  if (!pc->chunk_size_given)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_ECHUNKSIZE,
                            "chunk_size: required when files have chunks");
  pc->with_chunks++;
  f->chunks = calloc((size_t)n, sizeof(*f->chunks));
  if (f->chunks == NULL)
    return -ENOMEM;
  for (const cJSON *c = arr->child; c != NULL; c = c->next, i++) {
    int err;
    snprintf(where, sizeof(where), "files[%" PRIu32 "].chunks[%d]", k, i);
    if ((err = read_hex(c, where, &f->chunks[i], pc->errbuf, pc->errlen)) != 0)
      return err;
  }
  return 0;
}

static int parse_file(parse_ctx_t *pc, ws_manifest_t *m, const cJSON *fo,
                      uint32_t k) {
  ws_mfile_t *f = &m->files[k];
  const cJSON *it;
  const char *why;
  char where[48];
  uint64_t nch;
  int err;

  snprintf(where, sizeof(where), "files[%" PRIu32 "]", k);
  if (!cJSON_IsObject(fo))
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST,
                            "%s: not an object", where);
  if ((err = check_keys(fo, where, pc->errbuf, pc->errlen)) != 0)
    return err;

  it = cJSON_GetObjectItemCaseSensitive(fo, "name");
  if (!cJSON_IsString(it))
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST,
                            "%s.name: missing or not a string", where);
  if ((why = ws_manifest_name_problem(it->valuestring,
                                      strlen(it->valuestring))) != NULL)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EPATH, "%s.name: %s",
                            where, why);
  if ((f->name = strdup(it->valuestring)) == NULL)
    return -ENOMEM;

  snprintf(where, sizeof(where), "files[%" PRIu32 "].size", k);
  it = cJSON_GetObjectItemCaseSensitive(fo, "size");
  if (it == NULL)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST, "%s: missing",
                            where);
  if ((err = read_u64(it, pc->lim->max_file_size, where, &f->size, pc->errbuf,
                      pc->errlen)) != 0)
    return err;
  if (f->size > pc->lim->max_total_size - m->total_size)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_ELIMIT,
                            "%s: total size over the limit %" PRIu64, where,
                            pc->lim->max_total_size);
  m->total_size += f->size;

  snprintf(where, sizeof(where), "files[%" PRIu32 "].sha256", k);
  if ((err = read_hex(cJSON_GetObjectItemCaseSensitive(fo, "sha256"), where,
                      &f->sha256, pc->errbuf, pc->errlen)) != 0)
    return err;

  nch = (f->size + m->chunk_size - 1) / m->chunk_size;
  if (nch > UINT32_MAX)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_ELIMIT,
                            "files[%" PRIu32 "]: too many chunks", k);
  f->nchunks = (uint32_t)nch;
  f->first_chunk = m->total_chunks;
  m->total_chunks += nch;

  it = cJSON_GetObjectItemCaseSensitive(fo, "chunks");
  if (it != NULL && !cJSON_IsNull(it))
    return parse_chunks(pc, it, k, f);
  if (f->size > 0)
    pc->without_chunks++;
  return 0;
}

static int parse_top(parse_ctx_t *pc, ws_manifest_t *m, const cJSON *root) {
  const cJSON *it;
  int n, err;
  uint32_t k = 0;

  if (!cJSON_IsObject(root))
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST,
                            "top level: not an object");
  if ((err = check_keys(root, "top level", pc->errbuf, pc->errlen)) != 0)
    return err;
  if ((err = read_text(root, "format", &m->format, pc->errbuf, pc->errlen)) !=
      0)
    return err;
  if (m->format != NULL && strcmp(m->format, WS_MANIFEST_FORMAT_V1) != 0)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST,
                            "format: unsupported '%s'", m->format);
  if ((err = read_text(root, "model", &m->model, pc->errbuf, pc->errlen)) ||
      (err = read_text(root, "version", &m->version, pc->errbuf, pc->errlen)) ||
      (err = read_text(root, "created_at", &m->created_at, pc->errbuf,
                       pc->errlen)))
    return err;

  m->chunk_size = WS_CHUNK_SIZE_LEGACY;
  it = cJSON_GetObjectItemCaseSensitive(root, "chunk_size");
  if (it != NULL && !cJSON_IsNull(it)) {
    uint64_t cs;
    if ((err = read_u64(it, UINT32_MAX, "chunk_size", &cs, NULL, 0)) != 0 ||
        !ws_manifest_chunk_size_ok(cs))
      return ws_manifest_fail(pc->errbuf, pc->errlen, WS_ECHUNKSIZE,
                              "chunk_size: must be a power of two in "
                              "1 MiB..64 MiB");
    m->chunk_size = (uint32_t)cs;
    pc->chunk_size_given = 1;
  }

  it = cJSON_GetObjectItemCaseSensitive(root, "files");
  if (!cJSON_IsArray(it))
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST,
                            "files: missing or not an array");
  n = cJSON_GetArraySize(it);
  if (n <= 0)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_EMANIFEST,
                            "files: empty");
  if ((uint64_t)n > pc->lim->max_files)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_ELIMIT,
                            "files: %d entries over the limit %" PRIu32, n,
                            pc->lim->max_files);
  m->files = calloc((size_t)n, sizeof(*m->files));
  if (m->files == NULL)
    return -ENOMEM;
  m->nfiles = (uint32_t)n;
  for (const cJSON *fo = it->child; fo != NULL; fo = fo->next, k++)
    if ((err = parse_file(pc, m, fo, k)) != 0)
      return err;

  if (pc->with_chunks > 0 && pc->without_chunks > 0)
    return ws_manifest_fail(pc->errbuf, pc->errlen, WS_ECHUNKCOUNT,
                            "files: %" PRIu32 " files lack chunks while "
                            "others have them",
                            pc->without_chunks);
  m->whole_file = pc->with_chunks == 0;
  return ws_manifest_check_names(m->files, m->nfiles, pc->errbuf, pc->errlen);
}

int ws_manifest_parse(const char *buf, size_t len,
                      const ws_manifest_limits_t *lim, ws_manifest_t **out,
                      char *errbuf, size_t errlen) {
  ws_manifest_limits_t deflim;
  parse_ctx_t pc = {0};
  ws_manifest_t *m = NULL;
  cJSON *root = NULL;
  const char *end = NULL;
  size_t max_nodes;
  int err;

  if (lim == NULL) {
    ws_manifest_limits_default(&deflim);
    lim = &deflim;
  }
  if (errbuf != NULL && errlen > 0)
    errbuf[0] = '\0';
  if (len > lim->max_bytes)
    return ws_manifest_fail(errbuf, errlen, WS_ELIMIT,
                            "document is %zu bytes, limit %zu", len,
                            lim->max_bytes);
  /* Values a valid manifest can hold: ~8 per file, and one per chunk hash,
   * each of which takes at least 66 bytes of document. */
  max_nodes = 64 + (size_t)lim->max_files * 8 + lim->max_bytes / 66;
  if ((err = prescan(buf, len, max_nodes, errbuf, errlen)) != 0)
    return err;
  root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
  if (root == NULL) {
    size_t at = end != NULL && end >= buf ? (size_t)(end - buf) : 0;
    return ws_manifest_fail(errbuf, errlen, WS_EJSON,
                            "JSON syntax error near byte %zu", at);
  }
  while (end < buf + len &&
         (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
    end++;
  if (end != buf + len) {
    err = ws_manifest_fail(errbuf, errlen, WS_EJSON,
                           "trailing bytes after the JSON value at %td",
                           end - buf);
    goto cleanup;
  }
  if ((m = calloc(1, sizeof(*m))) == NULL) {
    err = -ENOMEM;
    goto cleanup;
  }
  if ((err = ws_sha256(buf, len, &m->digest)) != 0)
    goto cleanup;
  pc.lim = lim;
  pc.errbuf = errbuf;
  pc.errlen = errlen;
  if ((err = parse_top(&pc, m, root)) != 0)
    goto cleanup;
  *out = m;
  m = NULL;
cleanup:
  if (err == -ENOMEM && errbuf != NULL && errlen > 0 && errbuf[0] == '\0')
    snprintf(errbuf, errlen, "out of memory");
  ws_manifest_free(m);
  cJSON_Delete(root);
  return err;
}

void ws_manifest_free(ws_manifest_t *m) {
  if (m == NULL)
    return;
  for (uint32_t i = 0; m->files != NULL && i < m->nfiles; i++) {
    free(m->files[i].name);
    free(m->files[i].chunks);
  }
  free(m->files);
  free(m->format);
  free(m->model);
  free(m->version);
  free(m->created_at);
  free(m);
}

/* ---- geometry ---------------------------------------------------------- */

int ws_manifest_chunk_size_ok(uint64_t cs) {
  return cs >= WS_CHUNK_SIZE_MIN && cs <= WS_CHUNK_SIZE_MAX &&
         (cs & (cs - 1)) == 0;
}

uint32_t ws_manifest_nchunks(uint64_t size, uint32_t chunk_size) {
  uint64_t n;
  if (chunk_size == 0)
    return 0;
  n = size / chunk_size + (size % chunk_size != 0);
  return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

uint32_t ws_mfile_chunk_len(const ws_manifest_t *m, const ws_mfile_t *f,
                            uint32_t j) {
  uint64_t off;
  if (j >= f->nchunks)
    return 0;
  off = (uint64_t)j * m->chunk_size;
  return f->size - off < m->chunk_size ? (uint32_t)(f->size - off)
                                       : m->chunk_size;
}

int ws_manifest_locate(const ws_manifest_t *m, uint64_t chunk, uint32_t *file,
                       uint32_t *j) {
  uint32_t lo = 0, hi = m->nfiles;
  const ws_mfile_t *f;

  if (chunk >= m->total_chunks || m->nfiles == 0)
    return WS_ENOTFOUND;
  /* Last file whose first_chunk <= chunk; empty files share first_chunk
   * with their successor, so the last such file is never empty here. */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (m->files[mid].first_chunk <= chunk)
      lo = mid;
    else
      hi = mid;
  }
  f = &m->files[lo];
  if (chunk < f->first_chunk || chunk - f->first_chunk >= f->nchunks)
    return WS_ENOTFOUND;
  *file = lo;
  *j = (uint32_t)(chunk - f->first_chunk);
  return 0;
}
