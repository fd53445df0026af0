/* s3_ini.c - the INI dialect of the AWS shared files (~/.aws/config and
 * ~/.aws/credentials), parsed into a flat list of (section, key, value).
 *
 * Rules (those of the AWS CLI's parser, made strict where it is lenient):
 * - "[name]" opens a section; the name is trimmed and "profile   x" is
 *   written "profile x". A '#' or ';' comment may follow the ']'.
 * - Whole-line comments start with '#' or ';'. Values are taken as written
 *   (no inline comments: a credential_process command may hold " #").
 * - "key = value": the key is trimmed and lower-cased, the value trimmed.
 * - "key =" with an empty value opens a sub-section: the indented
 *   "k = v" lines that follow are stored as "key.k" (how "s3 =\n
 *   addressing_style = path" is written). An indented line with no open
 *   sub-section is an ordinary key.
 * - A key before any section, a line without '=', a bad section header, a
 *   NUL byte, an over-long line or too many entries fails the whole parse
 *   with the line number: the operator sees the file is broken instead of
 *   silently getting other settings.
 * Pure; any thread. Inputs are bounded by the caller (S3_CREDS_FILE_MAX).
 */
#include "s3-int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void trim(const char **s, size_t *n) {
  while (*n > 0 && (**s == ' ' || **s == '\t'))
    (*s)++, (*n)--;
  while (*n > 0 &&
         ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r'))
    (*n)--;
}

static int ent_add(s3_ini_t *ini, const char *section, const char *parent,
                   const char *k, size_t kn, const char *v, size_t vn) {
  if (ini->n >= S3_INI_ENTRIES_MAX)
    return WS_ELIMIT;
  if (ini->n == ini->cap) {
    size_t cap = ini->cap ? ini->cap * 2 : 16;
    s3_ini_ent_t *e = realloc(ini->e, cap * sizeof(*e));
    if (!e)
      return -ENOMEM;
    ini->e = e;
    ini->cap = cap;
  }
  size_t pn = parent ? strlen(parent) + 1 : 0;
  char *key = malloc(pn + kn + 1);
  char *val = strndup(v, vn);
  char *sec = strdup(section);
  if (!key || !val || !sec) {
    free(key);
    free(val);
    free(sec);
    return -ENOMEM;
  }
  if (parent) {
    memcpy(key, parent, pn - 1);
    key[pn - 1] = '.';
  }
  for (size_t i = 0; i < kn; i++)
    key[pn + i] = (char)tolower((unsigned char)k[i]);
  key[pn + kn] = '\0';
  ini->e[ini->n++] = (s3_ini_ent_t){.section = sec, .key = key, .value = val};
  return 0;
}

/* "[ name ]  # comment" -> normalised name into buf. */
static int section_name(const char *s, size_t n, char *buf, size_t len) {
  const char *close = memchr(s, ']', n);
  if (!close)
    return WS_EBADMSG;
  const char *rest = close + 1;
  size_t rn = n - (size_t)(rest - s);
  trim(&rest, &rn);
  if (rn > 0 && *rest != '#' && *rest != ';')
    return WS_EBADMSG;
  const char *name = s + 1;
  size_t nn = (size_t)(close - name);
  trim(&name, &nn);
  if (nn == 0 || nn >= len || memchr(name, '[', nn))
    return WS_EBADMSG;
  size_t o = 0;
  for (size_t i = 0; i < nn; i++) {
    int sp = name[i] == ' ' || name[i] == '\t';
    if (sp && o > 0 && buf[o - 1] == ' ')
      continue;
    buf[o++] = sp ? ' ' : name[i];
  }
  buf[o] = '\0';
  return 0;
}

/* One non-blank, non-comment line. */
static int parse_line(s3_ini_t *ini, const char *s, size_t n, int indented,
                      char *section, size_t seclen, char *parent,
                      size_t parentlen) {
  if (*s == '[' && !indented) {
    parent[0] = '\0';
    return section_name(s, n, section, seclen);
  }
  const char *eq = memchr(s, '=', n);
  if (!eq || !section[0])
    return WS_EBADMSG;
  const char *k = s, *v = eq + 1;
  size_t kn = (size_t)(eq - s), vn = n - kn - 1;
  trim(&k, &kn);
  trim(&v, &vn);
  if (kn == 0 || memchr(k, ' ', kn) || memchr(k, '\t', kn) ||
      vn > S3_CREDS_FIELD_MAX)
    return WS_EBADMSG;
  if (indented && parent[0])
    return ent_add(ini, section, parent, k, kn, v, vn);
  parent[0] = '\0';
  if (vn == 0 && kn < parentlen) { /* "s3 =": a sub-section follows */
    for (size_t i = 0; i < kn; i++)
      parent[i] = (char)tolower((unsigned char)k[i]);
    parent[kn] = '\0';
  }
  return ent_add(ini, section, NULL, k, kn, v, vn);
}

int s3_ini_parse(const char *text, size_t len, s3_ini_t *out,
                 size_t *bad_line) {
  s3_ini_t ini = {0};
  char section[S3_INI_NAME_MAX] = "", parent[S3_INI_NAME_MAX] = "";
  size_t lineno = 0;
  int rc = 0;
  const char *p = text, *end = text + len;
  if (memchr(text, '\0', len)) {
    *bad_line = 0;
    return WS_EBADMSG;
  }
  while (p < end && rc == 0) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *s = p;
    size_t n = (size_t)((nl ? nl : end) - p);
    p = nl ? nl + 1 : end;
    lineno++;
    if (n > S3_CREDS_FIELD_MAX + 256) {
      rc = WS_ELIMIT;
      break;
    }
    int indented = n > 0 && (*s == ' ' || *s == '\t');
    trim(&s, &n);
    if (n == 0 || *s == '#' || *s == ';')
      continue;
    rc = parse_line(&ini, s, n, indented, section, sizeof(section), parent,
                    sizeof(parent));
  }
  if (rc) {
    *bad_line = lineno;
    s3_ini_free(&ini);
    return rc;
  }
  *out = ini;
  return 0;
}

const char *s3_ini_get(const s3_ini_t *ini, const char *section,
                       const char *key) {
  const char *v = NULL;
  for (size_t i = 0; ini && i < ini->n; i++)
    if (strcmp(ini->e[i].section, section) == 0 &&
        strcmp(ini->e[i].key, key) == 0)
      v = ini->e[i].value; /* the last one wins */
  return v;
}

int s3_ini_has_section(const s3_ini_t *ini, const char *section) {
  for (size_t i = 0; ini && i < ini->n; i++)
    if (strcmp(ini->e[i].section, section) == 0)
      return 1;
  return 0;
}

void s3_ini_free(s3_ini_t *ini) {
  if (!ini)
    return;
  for (size_t i = 0; i < ini->n; i++) {
    free(ini->e[i].section);
    free(ini->e[i].key);
    if (ini->e[i].value)
      memset(ini->e[i].value, 0, strlen(ini->e[i].value));
    free(ini->e[i].value);
  }
  free(ini->e);
  memset(ini, 0, sizeof(*ini));
}
