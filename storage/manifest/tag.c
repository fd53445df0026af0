/* tag.c - release tag names, tagged URIs and the tag object's bytes
 * (tag.h). Pure; any thread. Everything here comes from users or S3 and is
 * checked byte by byte.
 */
#include "tag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int tag_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int ws_tag_name_ok(const char *tag) {
  size_t n = tag ? strlen(tag) : 0;
  if (n == 0 || n > WS_TAG_MAX || !tag_char_ok(tag[0]) || tag[0] == '.' ||
      tag[0] == '_' || tag[0] == '-')
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!tag_char_ok(tag[i]))
      return 0;
  return strncmp(tag, WS_DIGEST_PREFIX, strlen(WS_DIGEST_PREFIX)) != 0;
}

int ws_tag_uri_split(const char *uri, char **model_uri, char **tag) {
  if (!uri || strncmp(uri, "s3://", 5) != 0)
    return 0;
  const char *colon = strrchr(uri, ':');
  if (!colon || colon < uri + 5 || colon[-1] != '/')
    return 0;
  /* s3://B/…/:TAG — the model prefix must not be the bucket alone. */
  const char *slash = strchr(uri + 5, '/');
  if (!slash || slash + 1 >= colon || !ws_tag_name_ok(colon + 1))
    return WS_EUSAGE;
  char *m = strndup(uri, (size_t)(colon - uri));
  char *t = strdup(colon + 1);
  if (!m || !t) {
    free(m);
    free(t);
    return -ENOMEM;
  }
  *model_uri = m;
  *tag = t;
  return 1;
}

char *ws_tag_key(const char *prefix, const char *tag) {
  size_t pl = strlen(prefix), dl = strlen(WS_TAG_DIR), tl = strlen(tag);
  char *k = malloc(pl + dl + tl + 1);
  if (!k)
    return NULL;
  memcpy(k, prefix, pl);
  memcpy(k + pl, WS_TAG_DIR, dl);
  memcpy(k + pl + dl, tag, tl + 1);
  return k;
}

int ws_tag_body_parse(const char *buf, size_t len, ws_hash_t *digest) {
  if (len == WS_DIGEST_STR_LEN + 1 && buf[WS_DIGEST_STR_LEN] == '\n')
    len--;
  if (len != WS_DIGEST_STR_LEN)
    return WS_EBADMSG;
  char s[WS_DIGEST_STR_LEN + 1];
  memcpy(s, buf, len);
  s[len] = '\0';
  ws_hash_t h;
  /* Lowercase only: the published form is what ws_digest_to_str writes. */
  for (size_t i = strlen(WS_DIGEST_PREFIX); i < len; i++)
    if (s[i] >= 'A' && s[i] <= 'F')
      return WS_EBADMSG;
  if (ws_digest_from_str(s, &h) != 0)
    return WS_EBADMSG;
  *digest = h;
  return 0;
}

size_t ws_tag_body_format(const ws_hash_t *digest, char *out) {
  ws_digest_to_str(digest, out);
  out[WS_DIGEST_STR_LEN] = '\n';
  out[WS_DIGEST_STR_LEN + 1] = '\0';
  return WS_DIGEST_STR_LEN + 1;
}
