/* hf_prune.c - takes releases the cache no longer has out of the Hugging
 * Face view (--hf-cache, docs/cache.md "Hugging Face view"), so that no
 * link in it dangles after an eviction, automatic or asked for.
 *
 * A pass reads which releases are published (<cache>/releases/sha256-*),
 * then, in each DIR/models--*:
 *   1. removes leftovers of an interrupted update or pass (.tmp-*, .trash-*);
 *   2. for each snapshots/<rev> that is ours (its links lead to blob links
 *      into this cache's blobs/) and whose release is gone: removes the
 *      refs/<x> naming rev, then renames the snapshot to .trash-<rev>-<pid>
 *      (it disappears from snapshots/ at once) and deletes that;
 *   3. removes the blob links into this cache that no snapshot left uses;
 *   4. removes the repository folder once nothing is left in it.
 * Only links into this cache are removed: a snapshot or blob of a real hub
 * download in the same folder is left alone.
 *
 * The lock serialises passes with view updates (hf_view.c), which hold it
 * for their whole work: a pass never sees the blob links of a snapshot not
 * renamed into place yet. One p2pd per view directory.
 *
 * Thread: peer_releases_hf_prune on the loop; the pass on a worker.
 */
#include "release/release-int.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_log.h"

#define REV_LEN PEER_HF_REV_LEN
#define HEX_LEN 64
#define WALK_DEPTH 32

static pthread_mutex_t hf_mu = PTHREAD_MUTEX_INITIALIZER;

void peer_hf_lock(void) {
  pthread_mutex_lock(&hf_mu);
}

void peer_hf_unlock(void) {
  pthread_mutex_unlock(&hf_mu);
}

/* A growable array of fixed-size names (revs or blob hexes). */
typedef struct {
  char *v;
  size_t n, cap, w; /* w: bytes per entry, NUL included */
} names_t;

static int names_add(names_t *s, const char *p, size_t len) {
  if (s->n == s->cap) {
    size_t ncap = s->cap == 0 ? 64 : s->cap * 2;
    char *nv = realloc(s->v, ncap * s->w);
    if (nv == NULL)
      return -ENOMEM;
    s->v = nv;
    s->cap = ncap;
  }
  memcpy(s->v + s->n * s->w, p, len);
  s->v[s->n * s->w + len] = '\0';
  s->n++;
  return 0;
}

static int names_has(const names_t *s, const char *p) {
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->v + i * s->w, p) == 0)
      return 1;
  return 0;
}

static int is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return s[n] == '\0';
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

static void rm_rf(const char *path) {
  (void)nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The revisions of the releases published in the cache. */
static int revs_load(const char *root, names_t *revs) {
  char path[PATH_MAX];
  struct dirent *de;
  DIR *d;
  int rc = 0;

  if (snprintf(path, sizeof(path), "%s/releases", root) >= (int)sizeof(path))
    return -ENAMETOOLONG;
  if ((d = opendir(path)) == NULL)
    return -errno;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "sha256-", 7) == 0 &&
        is_hex(de->d_name + 7, HEX_LEN))
      rc = names_add(revs, de->d_name + 7, REV_LEN);
  }
  closedir(d);
  return rc;
}

/* 1 when repo/blobs/<hex> is a link into this cache's blobs/. */
static int blob_ours(const char *repo, const char *hex, const char *root) {
  char path[PATH_MAX], target[PATH_MAX];
  size_t rl = strlen(root);
  ssize_t n;
  if (snprintf(path, sizeof(path), "%s/blobs/%s", repo, hex) >=
      (int)sizeof(path))
    return 0;
  if ((n = readlink(path, target, sizeof(target) - 1)) < 0)
    return 0;
  target[n] = '\0';
  return strncmp(target, root, rl) == 0 &&
         strncmp(target + rl, "/blobs/", 7) == 0;
}

/* Adds the blob hex every link under dir names (.../blobs/<hex>) to out. */
static int snap_blobs(const char *dir, unsigned depth, names_t *out) {
  char path[PATH_MAX], target[PATH_MAX];
  struct dirent *de;
  struct stat st;
  DIR *d;
  int rc = 0;

  if (depth > WALK_DEPTH || (d = opendir(dir)) == NULL)
    return 0;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
            (int)sizeof(path) ||
        lstat(path, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      rc = snap_blobs(path, depth + 1, out);
      continue;
    }
    ssize_t n =
        S_ISLNK(st.st_mode) ? readlink(path, target, sizeof(target) - 1) : -1;
    if (n <= HEX_LEN)
      continue;
    target[n] = '\0';
    const char *hex = target + n - HEX_LEN;
    if (hex[-1] == '/' && is_hex(hex, HEX_LEN) && !names_has(out, hex))
      rc = names_add(out, hex, HEX_LEN);
  }
  closedir(d);
  return rc;
}

/* 1 when snapshot dir is ours: one of its links leads to a blob link into
 * this cache. */
static int snap_ours(const char *repo, const char *dir, const char *root) {
  names_t b = {.w = HEX_LEN + 1};
  int ours = 0;
  if (snap_blobs(dir, 0, &b) == 0)
    for (size_t i = 0; !ours && i < b.n; i++)
      ours = blob_ours(repo, b.v + i * b.w, root);
  free(b.v);
  return ours;
}

/* Step 1: leftovers of an update or pass that did not finish. */
static void repo_leftovers(const char *repo) {
  char path[PATH_MAX];
  struct dirent *de;
  DIR *d = opendir(repo);
  if (d == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    if ((strncmp(de->d_name, ".tmp-", 5) == 0 ||
         strncmp(de->d_name, ".trash-", 7) == 0) &&
        snprintf(path, sizeof(path), "%s/%s", repo, de->d_name) <
            (int)sizeof(path))
      rm_rf(path);
  }
  closedir(d);
}

/* Step 2, refs: removes refs/<x> whose content is one of gone. */
static void refs_drop(const char *repo, const names_t *gone) {
  char dir[PATH_MAX], path[PATH_MAX], buf[REV_LEN + 2];
  struct dirent *de;
  struct stat st;
  DIR *d;

  if (snprintf(dir, sizeof(dir), "%s/refs", repo) >= (int)sizeof(dir) ||
      (d = opendir(dir)) == NULL)
    return;
  while ((de = readdir(d)) != NULL) {
    if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
            (int)sizeof(path) ||
        lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
      fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    if (names_has(gone, buf) && unlink(path) == 0)
      WS_LOGI("hugging face view: %s removed (its release is gone)", path);
  }
  closedir(d);
}

/* Step 2: the revisions of snapshots that are ours and whose release is
 * gone, into gone. */
static int snaps_gone(const char *repo, const char *root, const names_t *revs,
                      names_t *gone) {
  char dir[PATH_MAX], path[PATH_MAX];
  struct dirent *de;
  DIR *d;
  int rc = 0;

  if (snprintf(dir, sizeof(dir), "%s/snapshots", repo) >= (int)sizeof(dir) ||
      (d = opendir(dir)) == NULL)
    return 0;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    if (!is_hex(de->d_name, REV_LEN) || names_has(revs, de->d_name) ||
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
            (int)sizeof(path))
      continue;
    if (snap_ours(repo, path, root))
      rc = names_add(gone, de->d_name, REV_LEN);
  }
  closedir(d);
  return rc;
}

/* Step 2: snapshots/<rev> -> .trash-<rev>-<pid>, then deleted. */
static void snap_remove(const char *repo, const char *rev) {
  char path[PATH_MAX], trash[PATH_MAX];
  if (snprintf(path, sizeof(path), "%s/snapshots/%s", repo, rev) >=
          (int)sizeof(path) ||
      snprintf(trash, sizeof(trash), "%s/.trash-%s-%d", repo, rev,
               (int)getpid()) >= (int)sizeof(trash))
    return;
  rm_rf(trash);
  if (rename(path, trash) != 0) {
    WS_LOGW("hugging face view: cannot remove %s: %s", path,
            ws_strerror(-errno));
    return;
  }
  rm_rf(trash);
  WS_LOGI("hugging face view: snapshot %s removed (its release is gone)", path);
}

/* Step 3: blob links into this cache that no snapshot uses. */
static int blobs_drop(const char *repo, const char *root) {
  char dir[PATH_MAX], path[PATH_MAX];
  names_t used = {.w = HEX_LEN + 1};
  struct dirent *de;
  DIR *d;
  int rc;

  if (snprintf(dir, sizeof(dir), "%s/snapshots", repo) >= (int)sizeof(dir))
    return -ENAMETOOLONG;
  if ((rc = snap_blobs(dir, 0, &used)) != 0) {
    free(used.v);
    return rc; /* not sure what is used: remove nothing */
  }
  if (snprintf(dir, sizeof(dir), "%s/blobs", repo) < (int)sizeof(dir) &&
      (d = opendir(dir)) != NULL) {
    while ((de = readdir(d)) != NULL) {
      if (is_hex(de->d_name, HEX_LEN) && !names_has(&used, de->d_name) &&
          blob_ours(repo, de->d_name, root) &&
          snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) <
              (int)sizeof(path))
        (void)unlink(path);
    }
    closedir(d);
  }
  free(used.v);
  return 0;
}

/* Step 4: the folder goes once empty (each rmdir fails if something is
 * left, which is fine). */
static void repo_rmdir(const char *repo) {
  static const char *const subs[] = {"refs", "blobs", "snapshots"};
  char path[PATH_MAX];
  for (size_t i = 0; i < 3; i++)
    if (snprintf(path, sizeof(path), "%s/%s", repo, subs[i]) <
        (int)sizeof(path))
      (void)rmdir(path);
  if (rmdir(repo) == 0)
    WS_LOGI("hugging face view: %s removed (empty)", repo);
}

static int repo_prune(const char *repo, const char *root, const names_t *revs) {
  names_t gone = {.w = REV_LEN + 1};
  int rc;
  repo_leftovers(repo);
  if ((rc = snaps_gone(repo, root, revs, &gone)) == 0) {
    refs_drop(repo, &gone);
    for (size_t i = 0; i < gone.n; i++)
      snap_remove(repo, gone.v + i * gone.w);
    rc = blobs_drop(repo, root);
  }
  free(gone.v);
  if (rc == 0)
    repo_rmdir(repo);
  return rc;
}

int peer_hf_prune_locked(const char *root, const char *view) {
  char repo[PATH_MAX];
  names_t revs = {.w = REV_LEN + 1};
  struct dirent *de;
  struct stat st;
  DIR *d;
  int rc;

  if ((rc = revs_load(root, &revs)) != 0) {
    free(revs.v); /* not sure what is published: remove nothing */
    return rc;
  }
  if ((d = opendir(view)) == NULL) {
    free(revs.v);
    return errno == ENOENT ? 0 : -errno;
  }
  while (rc == 0 && (de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "models--", 8) != 0 ||
        snprintf(repo, sizeof(repo), "%s/%s", view, de->d_name) >=
            (int)sizeof(repo) ||
        lstat(repo, &st) != 0 || !S_ISDIR(st.st_mode))
      continue;
    rc = repo_prune(repo, root, &revs);
  }
  closedir(d);
  free(revs.v);
  return rc;
}

/* ---- the job ------------------------------------------------------------- */

typedef struct {
  char *root, *view;
  int status;
} prune_job_t;

static void prune_work(void *arg) {
  prune_job_t *j = arg;
  char *real = realpath(j->root, NULL);
  if (real == NULL) {
    j->status = -errno;
    return;
  }
  peer_hf_lock();
  j->status = peer_hf_prune_locked(real, j->view);
  peer_hf_unlock();
  free(real);
}

static void prune_free(prune_job_t *j) {
  free(j->root);
  free(j->view);
  free(j);
}

static void prune_after(void *arg, int status) {
  prune_job_t *j = arg;
  int rc = status != 0 ? status : j->status;
  if (rc != 0)
    WS_LOGW("hugging face view: pruning %s: %s", j->view, ws_strerror(rc));
  prune_free(j);
}

void peer_releases_hf_prune(peer_releases_t *t) {
  peer_ctx_t *ctx = t->ctx;
  prune_job_t *j;

  if (ctx->cfg->hf_cache == NULL || ctx->store == NULL || !ctx->running)
    return;
  if ((j = calloc(1, sizeof(*j))) == NULL ||
      (j->root = strdup(ws_store_root(ctx->store))) == NULL ||
      (j->view = strdup(ctx->cfg->hf_cache)) == NULL ||
      peer_ctx_queue(ctx, prune_work, prune_after, j) != 0) {
    WS_LOGW("hugging face view: out of memory; not pruned");
    if (j != NULL)
      prune_free(j);
  }
}
