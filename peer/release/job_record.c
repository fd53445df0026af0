/* job_record.c - job records for resuming prefetches after a restart
 * (job_record.h): write, remove, read back.
 * Worker threads only: every function here does blocking file I/O.
 */
#include "release/job_record.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tunables.h"
#include "ws_log.h"

static int job_path(const char *root, const ws_hash_t *digest, char *buf,
                    size_t len) {
  char ds[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(digest, ds);
  int n = snprintf(buf, len, "%s/%s/%s.json", root, PEER_JOBS_DIR, ds);
  return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int job_write_all(int fd, const char *p, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int peer_job_record_write(const char *root, const ws_hash_t *digest,
                          const char *uri) {
  char path[PATH_MAX], tmp[PATH_MAX + 8], dir[PATH_MAX];
  char ds[WS_DIGEST_STR_LEN + 1];
  int rc = job_path(root, digest, path, sizeof(path));
  if (rc != 0)
    return rc;
  snprintf(dir, sizeof(dir), "%s/%s", root, PEER_JOBS_DIR);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return -errno;
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  ws_digest_to_str(digest, ds);
  cJSON *o = cJSON_CreateObject();
  if (o == NULL)
    return -ENOMEM;
  cJSON_AddStringToObject(o, "uri", uri);
  cJSON_AddStringToObject(o, "digest", ds);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text == NULL)
    return -ENOMEM;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    rc = -errno;
    goto free_text;
  }
  rc = job_write_all(fd, text, strlen(text));
  if (rc == 0 && fsync(fd) != 0)
    rc = -errno;
  close(fd);
  if (rc == 0 && rename(tmp, path) != 0)
    rc = -errno;
  if (rc != 0)
    unlink(tmp);
free_text:
  free(text);
  return rc;
}

void peer_job_record_remove(const char *root, const ws_hash_t *digest) {
  char path[PATH_MAX];
  if (job_path(root, digest, path, sizeof(path)) == 0 && unlink(path) != 0 &&
      errno != ENOENT)
    WS_LOGW("job record %s: %s", path, ws_strerror(-errno));
}

static int job_read_one(const char *path, peer_job_record_t *rec) {
  char buf[PEER_JOB_FILE_MAX_BYTES + 1];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  int rc = n < 0 ? -errno : 0;
  close(fd);
  if (rc != 0)
    return rc;
  buf[n] = '\0';
  cJSON *o = cJSON_Parse(buf);
  const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "uri");
  const cJSON *dg = cJSON_GetObjectItemCaseSensitive(o, "digest");
  rc = WS_EJSON;
  if (cJSON_IsString(u) && cJSON_IsString(dg) &&
      ws_digest_from_str(dg->valuestring, &rec->digest) == 0) {
    rec->uri = strdup(u->valuestring);
    rc = rec->uri != NULL ? 0 : -ENOMEM;
  }
  cJSON_Delete(o);
  return rc;
}

int peer_job_records_read(const char *root, peer_job_record_t **out,
                          size_t *nout) {
  char dir[PATH_MAX], path[PATH_MAX + 256];
  peer_job_record_t *recs = NULL;
  size_t n = 0, cap = 0;
  snprintf(dir, sizeof(dir), "%s/%s", root, PEER_JOBS_DIR);
  DIR *dh = opendir(dir);
  if (dh == NULL) {
    *out = NULL;
    *nout = 0;
    return errno == ENOENT ? 0 : -errno;
  }
  struct dirent *de;
  while ((de = readdir(dh)) != NULL) {
    size_t len = strlen(de->d_name);
    if (len < 5 || strcmp(de->d_name + len - 5, ".json") != 0)
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 8;
      peer_job_record_t *p = realloc(recs, ncap * sizeof(*p));
      if (p == NULL) {
        closedir(dh);
        peer_job_records_free(recs, n);
        return -ENOMEM;
      }
      recs = p;
      cap = ncap;
    }
    int rc = job_read_one(path, &recs[n]);
    if (rc != 0)
      WS_LOGW("job record %s: %s; ignored", path, ws_strerror(rc));
    else
      n++;
  }
  closedir(dh);
  *out = recs;
  *nout = n;
  return 0;
}

void peer_job_records_free(peer_job_record_t *recs, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(recs[i].uri);
  free(recs);
}
