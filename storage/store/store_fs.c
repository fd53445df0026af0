/* store_fs.c - path builders and blocking filesystem helpers for the chunk
 * store: mkdir -p, fsync of files and directories, recursive delete, atomic
 * small-file writes. Worker threads only (every call here may block on disk).
 */
#include "store-int.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int path_fmt_check(int n, size_t len) {
  return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* root/blobs/<kind>/<ab>/<hex of h> */
static int path_fanout(const char *root, const char *kind, const ws_hash_t *h,
                       char *buf, size_t len) {
  char hex[WS_SHA256_HEX_LEN + 1];
  ws_hash_to_hex(h, hex);
  return path_fmt_check(
      snprintf(buf, len, "%s/blobs/%s/%.2s/%s", root, kind, hex, hex), len);
}

int store_path_blob(const char *root, const ws_hash_t *h, char *buf,
                    size_t len) {
  return path_fanout(root, "sha256", h, buf, len);
}

int store_path_note(const char *root, const ws_hash_t *h, char *buf,
                    size_t len) {
  return path_fanout(root, "notes", h, buf, len);
}

int store_path_partial(const char *root, const ws_hash_t *h, const char *ext,
                       char *buf, size_t len) {
  char hex[WS_SHA256_HEX_LEN + 1];
  ws_hash_to_hex(h, hex);
  return path_fmt_check(snprintf(buf, len, "%s/partial/%s.%s", root, hex, ext),
                        len);
}

int store_path_release(const char *root, const ws_hash_t *digest, char *buf,
                       size_t len) {
  char hex[WS_SHA256_HEX_LEN + 1];
  ws_hash_to_hex(digest, hex);
  return path_fmt_check(snprintf(buf, len, "%s/releases/sha256-%s", root, hex),
                        len);
}

int store_fs_sync(int fd, int data_only) {
  store_crash_point("sync");
  return (data_only ? fdatasync(fd) : fsync(fd)) != 0 ? -errno : 0;
}

int store_fs_fsync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int err = store_fs_sync(fd, 0);
  close(fd);
  return err;
}

int store_fs_fsync_parent(const char *path) {
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  size_t n;
  if (slash == NULL)
    return store_fs_fsync_path(".");
  n = (size_t)(slash - path);
  if (n == 0)
    return store_fs_fsync_path("/");
  if (n >= sizeof(dir))
    return -ENAMETOOLONG;
  memcpy(dir, path, n);
  dir[n] = '\0';
  return store_fs_fsync_path(dir);
}

/* mkdir -p; every directory created is made durable in its parent so that a
 * later rename into it cannot be lost with the directory itself. */
int store_fs_mkdirs(const char *path) {
  char buf[PATH_MAX];
  size_t n = strlen(path);
  int err;
  if (n >= sizeof(buf))
    return -ENAMETOOLONG;
  memcpy(buf, path, n + 1);
  for (char *p = buf + 1;; p++) {
    int last = (*p == '\0');
    if (*p != '/' && !last)
      continue;
    *p = '\0';
    if (mkdir(buf, 0755) == 0) {
      if ((err = store_fs_fsync_parent(buf)) != 0)
        return err;
    } else if (errno != EEXIST) {
      return -errno;
    }
    if (last)
      break;
    *p = '/';
  }
  return 0;
}

int store_fs_mkdirs_parent(const char *path) {
  char buf[PATH_MAX];
  const char *slash = strrchr(path, '/');
  size_t n;
  if (slash == NULL || slash == path)
    return 0;
  n = (size_t)(slash - path);
  if (n >= sizeof(buf))
    return -ENAMETOOLONG;
  memcpy(buf, path, n);
  buf[n] = '\0';
  return store_fs_mkdirs(buf);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
                  struct FTW *ftw) {
  (void)sb;
  (void)ftw;
  if (flag == FTW_DP) {
    if (rmdir(path) != 0 && errno != ENOENT)
      return -errno;
    return 0;
  }
  if (unlink(path) != 0 && errno != ENOENT)
    return -errno;
  return 0;
}

int store_fs_rm_rf(const char *path) {
  struct stat sb;
  int r;
  if (lstat(path, &sb) != 0)
    return errno == ENOENT ? 0 : -errno;
  if (!S_ISDIR(sb.st_mode))
    return unlink(path) == 0 ? 0 : -errno;
  /* 16 fds: deep manifest trees are rare and nftw reuses fds past that. */
  r = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return r == 0 ? 0 : (r < 0 ? r : -EIO);
}

int store_fs_pwrite_all(int fd, const void *buf, size_t len, uint64_t off) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = pwrite(fd, p, len, (off_t)off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  return 0;
}

int store_fs_pread_all(int fd, void *buf, size_t len, uint64_t off) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = pread(fd, p, len, (off_t)off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (n == 0)
      return WS_ETRUNCATED;
    p += n;
    len -= (size_t)n;
    off += (uint64_t)n;
  }
  return 0;
}

int store_fs_write_atomic(const char *path, const void *data, size_t len,
                          int durable) {
  char tmp[PATH_MAX];
  int fd, err;
  if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
    return -ENAMETOOLONG;
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return -errno;
  if ((err = store_fs_pwrite_all(fd, data, len, 0)) != 0)
    goto fail_fd;
  if (durable && (err = store_fs_sync(fd, 0)) != 0)
    goto fail_fd;
  close(fd);
  if (rename(tmp, path) != 0) {
    err = -errno;
    goto fail_tmp;
  }
  return durable ? store_fs_fsync_parent(path) : 0;

fail_fd:
  close(fd);
fail_tmp:
  unlink(tmp);
  return err;
}

int store_fs_read_all(const char *path, size_t max, char **out, size_t *len) {
  struct stat sb;
  char *buf = NULL;
  int fd, err;
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? WS_ENOTFOUND : -errno;
  if (fstat(fd, &sb) != 0) {
    err = -errno;
    goto cleanup_fd;
  }
  if ((uint64_t)sb.st_size > max) {
    err = WS_ELIMIT;
    goto cleanup_fd;
  }
  buf = malloc((size_t)sb.st_size + 1);
  if (buf == NULL) {
    err = -ENOMEM;
    goto cleanup_fd;
  }
  if ((err = store_fs_pread_all(fd, buf, (size_t)sb.st_size, 0)) != 0)
    goto cleanup_buf;
  buf[sb.st_size] = '\0';
  *out = buf;
  *len = (size_t)sb.st_size;
  close(fd);
  return 0;

cleanup_buf:
  free(buf);
cleanup_fd:
  close(fd);
  return err;
}
