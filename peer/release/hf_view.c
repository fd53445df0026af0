/* hf_view.c - the Hugging Face hub cache view of READY releases (p2pd
 * --hf-cache DIR, docs/cache.md "Hugging Face view"):
 *
 *   DIR/models--ORG--NAME/blobs/<file sha256>   -> <cache>/blobs/sha256/..
 *   DIR/models--ORG--NAME/snapshots/<rev>/<name> -> ../../blobs/<file sha256>
 *   DIR/models--ORG--NAME/refs/<tag>              "<rev>" (no newline)
 *
 * ORG/NAME is the manifest's model name, rev the first 40 hex digits of the
 * release digest (the shape of the git commit sha the hub uses). Every step
 * replaces atomically: a blob link and a ref are written under a temporary
 * name and renamed over, a snapshot is built under models--ORG--NAME/.tmp-*
 * (outside snapshots/, where a scanner would take it for a revision) and
 * renamed into place once complete (an existing snapshot of the same rev is
 * complete and identical: it is named by the digest). Temporary names carry
 * the worker's thread id: two updates of one release (refs/main when it
 * becomes READY, refs/<tag> for a prefetch by tag) may run at once on two
 * workers. Nothing is fsynced:
 * the view is derived from the cache and rebuilt by the next update.
 * An update skips the blob links when the snapshot is already there (a
 * snapshot's blobs stay while it does) and rewrites a ref only when it
 * names another revision. It holds the view lock (hf_prune.c) throughout
 * and ends with a prune pass, which takes out the releases the cache lost
 * (a seed import may have evicted some).
 *
 * The manifest is read back from the cache's release directory and parsed
 * again (the release table no longer holds it once READY); the model name is
 * checked against the hub's repository-id rules before it names a folder.
 *
 * Thread: peer_rel_hf_view runs on the loop and queues the job; everything
 * else runs on a worker (ctx worker queue).
 */
#include "release/release-int.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_log.h"

#define HF_REV_LEN PEER_HF_REV_LEN
#define HF_PART_MAX 96 /* the hub's limit on an org or name */

typedef struct {
  peer_release_t *rel; /* reference held until after */
  char *root;          /* the cache (realpath once on the worker) */
  char *view;          /* --hf-cache */
  char *model;
  char tag[PEER_HF_TAG_MAX + 1];
  char digest[WS_DIGEST_STR_LEN + 1];
  char err[320];
} hfv_job_t;

/* One part of a repository id: [A-Za-z0-9._-], no "--" or "..", not
 * starting or ending with '-' or '.'. */
static int part_ok(const char *s, size_t n) {
  if (n == 0 || n > HF_PART_MAX || s[0] == '-' || s[0] == '.' ||
      s[n - 1] == '-' || s[n - 1] == '.')
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok || (i > 0 && (c == '-' || c == '.') && s[i - 1] == c))
      return 0;
  }
  return 1;
}

int peer_hf_repo_folder(const char *model, char *out, size_t len) {
  const char *slash = model != NULL ? strchr(model, '/') : NULL;
  int n;
  if (model == NULL)
    return WS_EUSAGE;
  if (slash == NULL ? !part_ok(model, strlen(model))
                    : (!part_ok(model, (size_t)(slash - model)) ||
                       !part_ok(slash + 1, strlen(slash + 1))))
    return WS_EUSAGE;
  if (slash == NULL)
    n = snprintf(out, len, "models--%s", model);
  else
    n = snprintf(out, len, "models--%.*s--%s", (int)(slash - model), model,
                 slash + 1);
  return n > 0 && (size_t)n < len ? 0 : WS_EUSAGE;
}

int peer_hf_tag_ok(const char *tag) {
  size_t n = strlen(tag);
  return n > 0 && n <= PEER_HF_TAG_MAX && part_ok(tag, n);
}

/* snprintf into a PATH_MAX buffer: 0, or -ENAMETOOLONG. */
#define PATHF(buf, ...)                                                        \
  (snprintf((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf)               \
       ? -ENAMETOOLONG                                                         \
       : 0)

static int fail(hfv_job_t *j, int err, const char *what) {
  snprintf(j->err, sizeof(j->err), "%.200s: %s", what, ws_strerror(err));
  return err;
}

static int mkdir_p(char *path) {
  for (char *p = path + 1; *p != '\0'; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    int rc = mkdir(path, 0755);
    *p = '/';
    if (rc != 0 && errno != EEXIST)
      return -errno;
  }
  return mkdir(path, 0755) != 0 && errno != EEXIST ? -errno : 0;
}

/* Reads and parses <root>/releases/<digest>/manifest.json; checks it is the
 * release's. */
static int load_manifest(hfv_job_t *j, ws_manifest_t **m) {
  ws_manifest_limits_t lim;
  char path[PATH_MAX], perr[256], got[WS_DIGEST_STR_LEN + 1];
  struct stat st;
  char *buf = NULL;
  ssize_t n = 0;
  int fd, rc;

  ws_manifest_limits_default(&lim);
  if (PATHF(path, "%s/releases/%s/manifest.json", j->root, j->digest) != 0)
    return fail(j, -ENAMETOOLONG, "manifest.json");
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return fail(j, -errno, "manifest.json");
  rc = fstat(fd, &st) != 0 ? -errno : 0;
  if (rc == 0 && (st.st_size <= 0 || (uint64_t)st.st_size > lim.max_bytes))
    rc = WS_ELIMIT;
  if (rc == 0 && (buf = malloc((size_t)st.st_size)) == NULL)
    rc = -ENOMEM;
  if (rc == 0 && (n = pread(fd, buf, (size_t)st.st_size, 0)) != st.st_size)
    rc = n < 0 ? -errno : -EIO;
  close(fd);
  if (rc == 0 && (rc = ws_manifest_parse(buf, (size_t)n, &lim, m, perr,
                                         sizeof(perr))) == 0) {
    ws_digest_to_str(&(*m)->digest, got);
    if (strcmp(got, j->digest) != 0) {
      ws_manifest_free(*m);
      *m = NULL;
      rc = WS_EDIGEST;
    }
  }
  free(buf);
  return rc != 0 ? fail(j, rc, "manifest.json") : 0;
}

/* Makes link path -> target, replacing what is there atomically. */
static int link_replace(const char *target, const char *path) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)gettid()) >=
      (int)sizeof(tmp))
    return -ENAMETOOLONG;
  (void)unlink(tmp);
  if (symlink(target, tmp) != 0)
    return -errno;
  if (rename(tmp, path) != 0) {
    int err = -errno;
    (void)unlink(tmp);
    return err;
  }
  return 0;
}

/* repo/blobs/<hex> -> the cache's blob of file f (its realpath, which must
 * lie under <root>/blobs/). */
static int blob_link(hfv_job_t *j, const char *repo, const ws_mfile_t *f,
                     const char *hex) {
  char rel[PATH_MAX], path[PATH_MAX], *real;
  size_t rl = strlen(j->root);
  int rc;

  if (PATHF(rel, "%s/releases/%s/%s", j->root, j->digest, f->name) != 0)
    return fail(j, -ENAMETOOLONG, f->name);
  if ((real = realpath(rel, NULL)) == NULL)
    return fail(j, -errno, f->name);
  if (strncmp(real, j->root, rl) != 0 || strncmp(real + rl, "/blobs/", 7)) {
    free(real);
    return fail(j, WS_EPATH, f->name);
  }
  rc = PATHF(path, "%s/blobs/%s", repo, hex);
  if (rc == 0)
    rc = link_replace(real, path);
  free(real);
  return rc != 0 ? fail(j, rc, path) : 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

/* One snapshot entry: dir/<name> -> ../../blobs/<hex> ("../" per level). */
static int snap_link(const char *dir, const char *name, const char *hex) {
  char target[PATH_MAX], path[PATH_MAX];
  size_t off = 0;
  const char *slash;

  for (const char *p = name; (p = strchr(p, '/')) != NULL; p++)
    off += (size_t)snprintf(target + off, sizeof(target) - off, "../");
  snprintf(target + off, sizeof(target) - off, "../../blobs/%s", hex);
  if (PATHF(path, "%s/%s", dir, name) != 0)
    return -ENAMETOOLONG;
  if ((slash = strrchr(path, '/')) != NULL && slash > path + strlen(dir)) {
    path[slash - path] = '\0';
    int rc = mkdir_p(path);
    path[slash - path] = '/';
    if (rc != 0)
      return rc;
  }
  return symlink(target, path) != 0 ? -errno : 0;
}

/* repo/snapshots/<rev>/, built under a temporary name and renamed. */
static int snapshot(hfv_job_t *j, const char *repo, const ws_manifest_t *m,
                    const char *rev) {
  char dst[PATH_MAX], tmp[PATH_MAX], hex[65];
  struct stat st;
  int rc = 0;

  if (PATHF(dst, "%s/snapshots/%s", repo, rev) != 0 ||
      PATHF(tmp, "%s/.tmp-%s-%d", repo, rev, (int)gettid()) != 0)
    return fail(j, -ENAMETOOLONG, "snapshot");
  if (lstat(dst, &st) == 0 && S_ISDIR(st.st_mode))
    return 0; /* complete: named by the digest, renamed in whole */
  (void)nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (mkdir(tmp, 0755) != 0)
    return fail(j, -errno, tmp);
  for (uint32_t i = 0; rc == 0 && i < m->nfiles; i++) {
    ws_hash_to_hex(&m->files[i].sha256, hex);
    rc = snap_link(tmp, m->files[i].name, hex);
  }
  if (rc == 0 && rename(tmp, dst) != 0 && errno != EEXIST && errno != ENOTEMPTY)
    rc = -errno;
  (void)nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return rc != 0 ? fail(j, rc, "snapshot") : 0;
}

/* repo/refs/<tag> = rev, via a temporary file and rename (unless it names
 * rev already). */
static int write_ref(hfv_job_t *j, const char *repo, const char *rev) {
  char path[PATH_MAX], tmp[PATH_MAX], cur[HF_REV_LEN + 1];
  int fd, rc = 0;

  if (PATHF(path, "%s/refs/%s", repo, j->tag) != 0 ||
      PATHF(tmp, "%s/.tmp-ref-%s-%d", repo, j->tag, (int)gettid()) != 0)
    return fail(j, -ENAMETOOLONG, "refs");
  if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
    ssize_t n = read(fd, cur, sizeof(cur));
    close(fd);
    if (n == HF_REV_LEN && memcmp(cur, rev, HF_REV_LEN) == 0)
      return 0;
  }
  if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
    return fail(j, -errno, tmp);
  if (write(fd, rev, HF_REV_LEN) != HF_REV_LEN)
    rc = -EIO;
  if (close(fd) != 0 && rc == 0)
    rc = -errno;
  if (rc == 0 && rename(tmp, path) != 0)
    rc = -errno;
  if (rc != 0)
    (void)unlink(tmp);
  return rc != 0 ? fail(j, rc, path) : 0;
}

/* [worker] The whole update: blobs, then the snapshot, then the ref. */
static void hfv_update(hfv_job_t *j) {
  ws_manifest_t *m = NULL;
  struct stat st;
  char folder[2 * HF_PART_MAX + 16], repo[PATH_MAX], sub[PATH_MAX], hex[65];
  const char *rev = j->digest + strlen("sha256-");
  char revbuf[HF_REV_LEN + 1];
  int rc;

  if (peer_hf_repo_folder(j->model, folder, sizeof(folder)) != 0) {
    snprintf(j->err, sizeof(j->err),
             "model name '%.200s' is not a Hugging "
             "Face repository id (ORG/NAME)",
             j->model ? j->model : "");
    return;
  }
  memcpy(revbuf, rev, HF_REV_LEN);
  revbuf[HF_REV_LEN] = '\0';
  if (PATHF(repo, "%s/%s", j->view, folder) != 0) {
    fail(j, -ENAMETOOLONG, j->view);
    return;
  }
  static const char *const subs[] = {"blobs", "snapshots", "refs"};
  for (size_t i = 0; i < 3; i++) {
    if ((rc = PATHF(sub, "%s/%s", repo, subs[i])) != 0 ||
        (rc = mkdir_p(sub)) != 0) {
      fail(j, rc, sub);
      return;
    }
  }
  if (load_manifest(j, &m) != 0)
    return;
  if (PATHF(sub, "%s/snapshots/%s", repo, revbuf) == 0 &&
      lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
    goto ref; /* complete, and its blob links stay while it does */
  for (uint32_t i = 0; i < m->nfiles; i++) {
    ws_hash_to_hex(&m->files[i].sha256, hex);
    if (blob_link(j, repo, &m->files[i], hex) != 0)
      goto done;
  }
  if (snapshot(j, repo, m, revbuf) != 0)
    goto done;
ref:
  (void)write_ref(j, repo, revbuf);
done:
  ws_manifest_free(m);
}

/* [worker] The update, then a prune pass (hf_prune.c), under the lock. */
static void hfv_work(void *arg) {
  hfv_job_t *j = arg;
  char *real = realpath(j->root, NULL);
  int rc;
  if (real == NULL) {
    fail(j, -errno, j->root);
    return;
  }
  free(j->root);
  j->root = real;
  peer_hf_lock();
  hfv_update(j);
  if ((rc = peer_hf_prune_locked(j->root, j->view)) != 0)
    WS_LOGW("hugging face view: pruning %s: %s", j->view, ws_strerror(rc));
  peer_hf_unlock();
}

static void hfv_free(hfv_job_t *j) {
  free(j->root);
  free(j->view);
  free(j->model);
  free(j);
}

static void hfv_after(void *arg, int status) {
  hfv_job_t *j = arg;
  if (status != 0)
    WS_LOGW("release %s: hugging face view: canceled", j->digest);
  else if (j->err[0] != '\0')
    WS_LOGW("release %s: hugging face view not updated: %s", j->digest, j->err);
  else
    WS_LOGI("release %s: hugging face view %s, refs/%s", j->digest, j->model,
            j->tag);
  peer_release_unref(j->rel);
  hfv_free(j);
}

void peer_rel_hf_view(peer_release_t *rel, const char *tag) {
  peer_ctx_t *ctx = rel->t->ctx;
  hfv_job_t *j;

  if (ctx->cfg->hf_cache == NULL || ctx->store == NULL || !rel->digest_known ||
      rel->state != PEER_REL_READY)
    return;
  if (tag == NULL)
    tag = "main";
  if (!peer_hf_tag_ok(tag)) {
    WS_LOGW("release %s: hugging face view: tag '%s' not usable as a ref",
            rel->digest_str, tag);
    return;
  }
  if ((j = calloc(1, sizeof(*j))) == NULL ||
      (j->root = strdup(ws_store_root(ctx->store))) == NULL ||
      (j->view = strdup(ctx->cfg->hf_cache)) == NULL ||
      (rel->model != NULL && (j->model = strdup(rel->model)) == NULL))
    goto oom;
  snprintf(j->tag, sizeof(j->tag), "%s", tag);
  memcpy(j->digest, rel->digest_str, sizeof(j->digest));
  j->rel = rel;
  peer_rel_ref(rel);
  if (peer_ctx_queue(ctx, hfv_work, hfv_after, j) != 0) {
    peer_release_unref(rel);
    goto oom;
  }
  return;
oom:
  WS_LOGW("release %s: hugging face view: out of memory", rel->digest_str);
  if (j != NULL)
    hfv_free(j);
}
