/* manifest_build.c - builds a v1 manifest from a directory tree and verifies
 * a directory against a manifest. Blocking (directory walk + the parallel
 * hasher in manifest_hash.c): tools and worker threads only.
 *
 * The walk is bounded before it allocates: depth, file count, per-file and
 * total size all come from the manifest limits, and every name is checked
 * by the same rules a reader applies, so whatever this builds parses.
 * Names starting with '.' are never taken (VCS and cache metadata), nor
 * what the include/exclude patterns leave out (path_glob.c). A Hugging Face
 * snapshot's symlinks may point into its repository folder's blobs/.
 */
#include "manifest-int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define BUILD_DEPTH_MAX 64 /* directory nesting below the root */

typedef struct {
  char *name; /* relative, manifest form */
  char *path; /* what to open */
  uint64_t size;
} bentry_t;

typedef struct {
  const char *root; /* realpath of the directory */
  size_t rootlen;
  const char *linkroot; /* symlinks must resolve inside (root or HF repo) */
  size_t linkrootlen;
  const ws_manifest_build_opts_t *opts;
  bentry_t *ents;
  uint32_t n, cap;
  uint64_t total;
  const ws_manifest_limits_t *lim;
  char *errbuf;
  size_t errlen;
} walk_t;

static void entries_free(bentry_t *ents, uint32_t n) {
  for (uint32_t i = 0; ents != NULL && i < n; i++) {
    free(ents[i].name);
    free(ents[i].path);
  }
  free(ents);
}

static int inside_root(const walk_t *wk, const char *real) {
  if (wk->linkrootlen == 1) /* root is "/" */
    return real[0] == '/' && real[1] != '\0';
  return strncmp(real, wk->linkroot, wk->linkrootlen) == 0 &&
         real[wk->linkrootlen] == '/';
}

/* 1 when the entry rel (is_dir: a directory, else a file) is left out. */
static int walk_skip(const walk_t *wk, const char *rel, const char *name,
                     int is_dir) {
  const ws_manifest_build_opts_t *o = wk->opts;
  int in = o->ninclude == 0 || is_dir;

  if (name[0] == '.')
    return 1;
  for (unsigned i = 0; i < o->nexclude; i++)
    if (ws_path_glob_match(o->exclude[i], rel, is_dir))
      return 1;
  for (unsigned i = 0; !in && i < o->ninclude; i++)
    in = ws_path_glob_match(o->include[i], rel, 0);
  return !in;
}

static int walk_add(walk_t *wk, const char *rel, char *path, uint64_t size) {
  bentry_t *e;
  if (wk->n >= wk->lim->max_files) {
    free(path);
    return ws_manifest_fail(wk->errbuf, wk->errlen, WS_ELIMIT,
                            "more than %" PRIu32 " files", wk->lim->max_files);
  }
  if (size > wk->lim->max_file_size ||
      size > wk->lim->max_total_size - wk->total) {
    free(path);
    return ws_manifest_fail(wk->errbuf, wk->errlen, WS_ELIMIT,
                            "%s: size over the file or total limit", rel);
  }
  if (wk->n == wk->cap) {
    uint32_t ncap = wk->cap == 0 ? 64 : wk->cap * 2;
    bentry_t *ne = realloc(wk->ents, (size_t)ncap * sizeof(*ne));
    if (ne == NULL) {
      free(path);
      return -ENOMEM;
    }
    wk->ents = ne;
    wk->cap = ncap;
  }
  e = &wk->ents[wk->n];
  if ((e->name = strdup(rel)) == NULL) {
    free(path);
    return -ENOMEM;
  }
  e->path = path;
  e->size = size;
  wk->n++;
  wk->total += size;
  return 0;
}

/* A symlink is taken only when it resolves to a regular file inside root. */
static int walk_symlink(walk_t *wk, const char *rel, const char *abs) {
  char *real = realpath(abs, NULL);
  struct stat st;

  if (real == NULL)
    return ws_manifest_fail(wk->errbuf, wk->errlen, WS_EPATH,
                            "%s: dangling symlink", rel);
  if (!inside_root(wk, real)) {
    free(real);
    return ws_manifest_fail(wk->errbuf, wk->errlen, WS_EPATH,
                            "%s: symlink escapes the directory", rel);
  }
  if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
    free(real);
    return ws_manifest_fail(wk->errbuf, wk->errlen, WS_EPATH,
                            "%s: symlink to something not a regular file", rel);
  }
  return walk_add(wk, rel, real, (uint64_t)st.st_size);
}

static int walk_dir(walk_t *wk, const char *rel, unsigned depth) {
  char crel[WS_MANIFEST_NAME_MAX + 2];
  char abs[PATH_MAX];
  struct dirent *de;
  DIR *d;
  int err = 0;

  if (depth > BUILD_DEPTH_MAX)
    return ws_manifest_fail(wk->errbuf, wk->errlen, WS_ELIMIT,
                            "%s: nested deeper than %d", rel, BUILD_DEPTH_MAX);
  snprintf(abs, sizeof(abs), "%s%s%s", wk->root, rel[0] ? "/" : "", rel);
  if ((d = opendir(abs)) == NULL)
    return ws_manifest_fail(wk->errbuf, wk->errlen, -errno, "%s: %s", abs,
                            strerror(errno));
  while ((errno = 0, de = readdir(d)) != NULL) {
    const char *why;
    struct stat st;
    int n;

    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
      continue;
    if (rel[0] == '\0' && (strcmp(de->d_name, "manifest.json") == 0 ||
                           strcmp(de->d_name, "manifest.json.sig") == 0))
      continue; /* the release's own metadata, not a release file */
    n = snprintf(crel, sizeof(crel), "%s%s%s", rel, rel[0] ? "/" : "",
                 de->d_name);
    if (n < 0 || (size_t)n >= sizeof(crel) ||
        (why = ws_manifest_name_problem(crel, (size_t)n)) != NULL) {
      err =
          ws_manifest_fail(wk->errbuf, wk->errlen, WS_EPATH, "%.200s: %s", crel,
                           n >= (int)sizeof(crel) ? "name too long" : why);
      goto cleanup;
    }
    n = snprintf(abs, sizeof(abs), "%s/%s", wk->root, crel);
    if (n < 0 || (size_t)n >= sizeof(abs)) {
      err = ws_manifest_fail(wk->errbuf, wk->errlen, WS_EPATH,
                             "%s: path too long", crel);
      goto cleanup;
    }
    if (lstat(abs, &st) != 0) {
      err = ws_manifest_fail(wk->errbuf, wk->errlen, -errno, "%s: %s", abs,
                             strerror(errno));
      goto cleanup;
    }
    if (walk_skip(wk, crel, de->d_name, S_ISDIR(st.st_mode)))
      continue;
    if (S_ISDIR(st.st_mode)) {
      err = walk_dir(wk, crel, depth + 1);
    } else if (S_ISREG(st.st_mode)) {
      char *path = strdup(abs);
      err = path == NULL ? -ENOMEM
                         : walk_add(wk, crel, path, (uint64_t)st.st_size);
    } else if (S_ISLNK(st.st_mode)) {
      err = walk_symlink(wk, crel, abs);
    } else {
      err = ws_manifest_fail(wk->errbuf, wk->errlen, WS_EPATH,
                             "%s: not a regular file", crel);
    }
    if (err != 0)
      goto cleanup;
  }
  if (errno != 0)
    err = ws_manifest_fail(wk->errbuf, wk->errlen, -errno, "%s: %s", abs,
                           strerror(errno));
cleanup:
  closedir(d);
  return err;
}

static int has_prefix(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

/* "ORG--NAME" -> "ORG/NAME" (the hub's folder naming; ids hold no "--"). */
static char *hf_repo_id(const char *folder) {
  char *id = strdup(folder), *w = id;
  if (id == NULL)
    return NULL;
  for (const char *r = folder; *r != '\0';) {
    if (r[0] == '-' && r[1] == '-') {
      *w++ = '/';
      r += 2;
    } else {
      *w++ = *r++;
    }
  }
  *w = '\0';
  return id;
}

int ws_manifest_hf_snapshot(const char *dir, char **repo, char **model) {
  static const char *const kinds[] = {"models--", "datasets--", "spaces--"};
  char *real = realpath(dir, NULL), *slash, *base;
  const char *kind = NULL;

  if (real == NULL)
    return -errno;
  /* real = <repo>/snapshots/<rev> */
  if ((slash = strrchr(real, '/')) == NULL || slash == real)
    goto no;
  *slash = '\0';
  if ((slash = strrchr(real, '/')) == NULL || strcmp(slash, "/snapshots") != 0)
    goto no;
  *slash = '\0';
  base = strrchr(real, '/');
  base = base != NULL ? base + 1 : real;
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (has_prefix(base, kinds[i]) && base[strlen(kinds[i])] != '\0')
      kind = kinds[i];
  if (kind == NULL)
    goto no;
  if (model != NULL && (*model = hf_repo_id(base + strlen(kind))) == NULL) {
    free(real);
    return -ENOMEM;
  }
  if (repo != NULL)
    *repo = real;
  else
    free(real);
  return 1;
no:
  free(real);
  return 0;
}

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const bentry_t *)a)->name, ((const bentry_t *)b)->name);
}

static int dup_text(const char *s, char **out) {
  if (s == NULL)
    return 0;
  return (*out = strdup(s)) != NULL ? 0 : -ENOMEM;
}

static int now_rfc3339(char **out) {
  char buf[32];
  time_t t = time(NULL);
  struct tm tm;
  if (gmtime_r(&t, &tm) == NULL ||
      strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    return WS_EUSAGE;
  return dup_text(buf, out);
}

/* Fills m (already holding chunk_size) from the sorted walk entries and
 * hashes them; takes the names out of ents. */
static int build_files(ws_manifest_t *m, bentry_t *ents, uint32_t n,
                       unsigned nthreads, char *errbuf, size_t errlen) {
  ws_mhash_job_t *jobs = calloc(n, sizeof(*jobs));
  int err = 0;

  if (jobs == NULL || (m->files = calloc(n, sizeof(*m->files))) == NULL) {
    free(jobs);
    return -ENOMEM;
  }
  m->nfiles = n;
  for (uint32_t i = 0; i < n; i++) {
    ws_mfile_t *f = &m->files[i];
    f->name = ents[i].name;
    ents[i].name = NULL;
    f->size = ents[i].size;
    f->nchunks = ws_manifest_nchunks(f->size, m->chunk_size);
    f->first_chunk = m->total_chunks;
    m->total_chunks += f->nchunks;
    m->total_size += f->size;
    if (f->nchunks > 0 &&
        (f->chunks = calloc(f->nchunks, sizeof(*f->chunks))) == NULL) {
      err = -ENOMEM;
      goto cleanup;
    }
    jobs[i].path = ents[i].path;
    jobs[i].size = f->size;
    jobs[i].nchunks = f->nchunks;
    jobs[i].chunks = f->chunks;
  }
  if ((err = ws_manifest_hash_jobs(jobs, n, m->chunk_size, nthreads, errbuf,
                                   errlen)) != 0)
    goto cleanup;
  for (uint32_t i = 0; i < n; i++)
    m->files[i].sha256 = jobs[i].sha256;
cleanup:
  free(jobs);
  return err;
}

int ws_manifest_build(const char *dir, const ws_manifest_build_opts_t *opts,
                      ws_manifest_t **out, char *errbuf, size_t errlen) {
  ws_manifest_limits_t deflim;
  walk_t wk = {.errbuf = errbuf, .errlen = errlen};
  ws_manifest_t *m = NULL;
  char *root = NULL, *text = NULL, *hfrepo = NULL;
  size_t textlen = 0;
  uint32_t cs = opts->chunk_size ? opts->chunk_size : WS_CHUNK_SIZE_DEFAULT;
  int err;

  if (errbuf != NULL && errlen > 0)
    errbuf[0] = '\0';
  if (!ws_manifest_chunk_size_ok(cs))
    return ws_manifest_fail(
        errbuf, errlen, WS_ECHUNKSIZE,
        "chunk size %" PRIu32 " is not a power of two in 1..64 MiB", cs);
  if (opts->lim == NULL)
    ws_manifest_limits_default(&deflim);
  wk.lim = opts->lim != NULL ? opts->lim : &deflim;
  if ((root = realpath(dir, NULL)) == NULL)
    return ws_manifest_fail(errbuf, errlen, -errno, "%s: %s", dir,
                            strerror(errno));
  wk.root = root;
  wk.rootlen = strlen(root);
  wk.opts = opts;
  if ((err = ws_manifest_hf_snapshot(root, &hfrepo, NULL)) < 0)
    goto cleanup;
  wk.linkroot = hfrepo != NULL ? hfrepo : root;
  wk.linkrootlen = strlen(wk.linkroot);
  if ((err = walk_dir(&wk, "", 0)) != 0)
    goto cleanup;
  if (wk.n == 0) {
    err = ws_manifest_fail(errbuf, errlen, WS_EMANIFEST, "%s: no regular files",
                           dir);
    goto cleanup;
  }
  qsort(wk.ents, wk.n, sizeof(*wk.ents), entry_cmp);

  if ((m = calloc(1, sizeof(*m))) == NULL) {
    err = -ENOMEM;
    goto cleanup;
  }
  m->chunk_size = cs;
  if ((err = dup_text(WS_MANIFEST_FORMAT_V1, &m->format)) != 0 ||
      (err = dup_text(opts->model, &m->model)) != 0 ||
      (err = dup_text(opts->version, &m->version)) != 0 ||
      (err = opts->created_at != NULL
                 ? dup_text(opts->created_at, &m->created_at)
                 : now_rfc3339(&m->created_at)) != 0)
    goto cleanup;
  if ((err = build_files(m, wk.ents, wk.n, opts->nthreads, errbuf, errlen)) !=
      0)
    goto cleanup;
  if ((err = ws_manifest_check_names(m->files, m->nfiles, errbuf, errlen)) != 0)
    goto cleanup;
  if ((err = ws_manifest_serialize(m, &text, &textlen)) != 0)
    goto cleanup;
  if (textlen > wk.lim->max_bytes) {
    err = ws_manifest_fail(errbuf, errlen, WS_ELIMIT,
                           "manifest would be %zu bytes, limit %zu", textlen,
                           wk.lim->max_bytes);
    goto cleanup;
  }
  if ((err = ws_sha256(text, textlen, &m->digest)) != 0)
    goto cleanup;
  *out = m;
  m = NULL;
cleanup:
  if (err == -ENOMEM && errbuf != NULL && errlen > 0 && errbuf[0] == '\0')
    snprintf(errbuf, errlen, "out of memory");
  free(text);
  ws_manifest_free(m);
  entries_free(wk.ents, wk.n);
  free(hfrepo);
  free(root);
  return err;
}

static int verify_compare(const ws_manifest_t *m, const ws_mhash_job_t *jobs,
                          char *errbuf, size_t errlen) {
  for (uint32_t i = 0; i < m->nfiles; i++) {
    const ws_mfile_t *f = &m->files[i];
    if (!ws_hash_eq(&jobs[i].sha256, &f->sha256))
      return ws_manifest_fail(errbuf, errlen, WS_EDIGEST, "%s: sha256 mismatch",
                              f->name);
    for (uint32_t j = 0; j < jobs[i].nchunks; j++)
      if (!ws_hash_eq(&jobs[i].chunks[j], &f->chunks[j]))
        return ws_manifest_fail(errbuf, errlen, WS_EDIGEST,
                                "%s: chunk %" PRIu32 " mismatch", f->name, j);
  }
  return 0;
}

int ws_manifest_verify_dir(const ws_manifest_t *m, const char *dir,
                           unsigned nthreads, char *errbuf, size_t errlen) {
  ws_mhash_job_t *jobs = NULL;
  ws_hash_t *got = NULL;
  uint64_t next = 0;
  int err = 0;

  if (errbuf != NULL && errlen > 0)
    errbuf[0] = '\0';
  jobs = calloc(m->nfiles ? m->nfiles : 1, sizeof(*jobs));
  if (jobs == NULL)
    return -ENOMEM;
  if (!m->whole_file && m->total_chunks > 0 &&
      (got = calloc(m->total_chunks, sizeof(*got))) == NULL) {
    err = -ENOMEM;
    goto cleanup;
  }
  for (uint32_t i = 0; i < m->nfiles; i++) {
    const ws_mfile_t *f = &m->files[i];
    const char *why = ws_manifest_name_problem(f->name, strlen(f->name));
    size_t plen = strlen(dir) + strlen(f->name) + 2;
    if (why != NULL) {
      err = ws_manifest_fail(errbuf, errlen, WS_EPATH,
                             "files[%" PRIu32 "].name: %s", i, why);
      goto cleanup;
    }
    if ((jobs[i].path = malloc(plen)) == NULL) {
      err = -ENOMEM;
      goto cleanup;
    }
    snprintf(jobs[i].path, plen, "%s/%s", dir, f->name);
    jobs[i].size = f->size;
    if (!m->whole_file && f->nchunks > 0) {
      jobs[i].nchunks = f->nchunks;
      jobs[i].chunks = got + next;
      next += f->nchunks;
    }
  }
  if ((err = ws_manifest_hash_jobs(jobs, m->nfiles, m->chunk_size, nthreads,
                                   errbuf, errlen)) != 0)
    goto cleanup;
  err = verify_compare(m, jobs, errbuf, errlen);
cleanup:
  for (uint32_t i = 0; i < m->nfiles; i++)
    free(jobs[i].path);
  free(jobs);
  free(got);
  return err;
}
