/* ws_labels.c - node labels, the canonical "k=v,k2=v2" form (see
 * ws_labels.h). Pure, any thread.
 */
#include "ws_labels.h"

#include <ctype.h>
#include <string.h>

#include "ws_err.h"

static bool alnum(char c) {
  return isalnum((unsigned char)c) != 0;
}

bool ws_label_key_ok(const char *k, size_t n) {
  if (n == 0 || n > WS_LABEL_KEY_MAX || !alnum(k[0]))
    return false;
  for (size_t i = 0; i < n; i++)
    if (!alnum(k[i]) && k[i] != '.' && k[i] != '_' && k[i] != '-' &&
        k[i] != '/')
      return false;
  return true;
}

bool ws_label_value_ok(const char *v, size_t n) {
  if (n > WS_LABEL_VALUE_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!alnum(v[i]) && v[i] != '.' && v[i] != '_' && v[i] != '-')
      return false;
  return true;
}

/* Walks one "k=v" item of s starting at *pos; 1 with k/v set, 0 at the
 * end, -1 malformed. */
static int next_pair(const char *s, size_t *pos, const char **k, size_t *kn,
                     const char **v, size_t *vn) {
  const char *p = s + *pos;
  if (*p == '\0')
    return 0;
  size_t len = strcspn(p, ",");
  const char *eq = memchr(p, '=', len);
  if (eq == NULL)
    return -1;
  *k = p;
  *kn = (size_t)(eq - p);
  *v = eq + 1;
  *vn = len - *kn - 1u;
  *pos += len + (p[len] == ',' ? 1u : 0u);
  if (p[len] == ',' && p[len + 1] == '\0')
    return -1; /* trailing comma */
  if (!ws_label_key_ok(*k, *kn) || !ws_label_value_ok(*v, *vn))
    return -1;
  return 1;
}

bool ws_labels_get(const char *labels, const char *key, const char **val,
                   size_t *vlen) {
  size_t pos = 0, kn, vn, want = strlen(key);
  const char *k, *v;
  int rc;
  if (labels == NULL)
    return false;
  while ((rc = next_pair(labels, &pos, &k, &kn, &v, &vn)) == 1) {
    if (kn == want && memcmp(k, key, kn) == 0) {
      *val = v;
      *vlen = vn;
      return true;
    }
  }
  return false;
}

bool ws_labels_has(const char *labels, const char *key, const char *value) {
  const char *v;
  size_t vn;
  return ws_labels_get(labels, key, &v, &vn) && vn == strlen(value) &&
         memcmp(v, value, vn) == 0;
}

bool ws_labels_valid(const char *s) {
  size_t pos = 0, kn, vn, n = 0;
  const char *k, *v, *ov;
  size_t ovn;
  int rc;
  if (s == NULL || strnlen(s, WS_LABELS_MAX + 1u) > WS_LABELS_MAX)
    return false;
  while ((rc = next_pair(s, &pos, &k, &kn, &v, &vn)) == 1) {
    char key[WS_LABEL_KEY_MAX + 1];
    memcpy(key, k, kn);
    key[kn] = '\0';
    /* The first pair with this key must be this one: keys are unique. */
    if (!ws_labels_get(s, key, &ov, &ovn) || ov != v ||
        ++n > WS_LABELS_COUNT_MAX)
      return false;
  }
  return rc == 0;
}

/* Removes key from the canonical list buf (in place). */
static void labels_del(char *buf, const char *key, size_t keyn) {
  size_t pos = 0, kn, vn;
  const char *k, *v;
  while (1) {
    size_t start = pos;
    if (next_pair(buf, &pos, &k, &kn, &v, &vn) != 1)
      return;
    if (kn == keyn && memcmp(k, key, kn) == 0) {
      size_t tail = strlen(buf + pos);
      memmove(buf + start, buf + pos, tail + 1u);
      size_t n = strlen(buf);
      if (n > 0 && buf[n - 1u] == ',')
        buf[n - 1u] = '\0';
      return;
    }
  }
}

int ws_labels_add(char *buf, size_t cap, const char *list) {
  char tmp[WS_LABELS_MAX + 1];
  size_t have = strnlen(buf, cap);
  if (have >= sizeof(tmp) || list == NULL)
    return WS_EUSAGE;
  memcpy(tmp, buf, have + 1u);
  const char *p = list;
  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    const char *eq = memchr(p, '=', len);
    if (len > 0) {
      if (eq == NULL || !ws_label_key_ok(p, (size_t)(eq - p)) ||
          !ws_label_value_ok(eq + 1, len - (size_t)(eq - p) - 1u))
        return WS_EUSAGE;
      labels_del(tmp, p, (size_t)(eq - p));
      size_t n = strlen(tmp);
      if (n + (n > 0) + len >= sizeof(tmp))
        return WS_EUSAGE;
      if (n > 0)
        tmp[n++] = ',';
      memcpy(tmp + n, p, len);
      tmp[n + len] = '\0';
    }
    p += len + (p[len] == ',' ? 1u : 0u);
  }
  size_t n = strlen(tmp);
  if (n >= cap || !ws_labels_valid(tmp))
    return WS_EUSAGE;
  memcpy(buf, tmp, n + 1u);
  return 0;
}
