/* path_glob.c - the --include / --exclude patterns of `manifest create` and
 * `publish` (docs/manifest.md, "Which files"): fnmatch(3) per path
 * component, plus "**" for any number of directories. Pure functions, any
 * thread, no allocation.
 *
 * A pattern without '/' matches the last component (a file or directory name
 * at any depth, as in .gitignore); one with '/' is anchored at the root and
 * matches the whole relative path, component by component ('*' never
 * crosses '/'). A leading '/' only anchors; a trailing '/' makes the pattern
 * match directories only.
 */
#include "manifest-int.h"

#include <fnmatch.h>
#include <string.h>

#define SEG_MAX 256 /* a component is at most 255 bytes (manifest rules) */

/* The next component of s (stops at '/' or the end): its length. */
static size_t seg_len(const char *s) {
  const char *e = strchr(s, '/');
  return e != NULL ? (size_t)(e - s) : strlen(s);
}

static int seg_match(const char *p, size_t plen, const char *s, size_t slen) {
  char pb[SEG_MAX], sb[SEG_MAX];
  if (plen >= sizeof(pb) || slen >= sizeof(sb))
    return 0;
  memcpy(pb, p, plen);
  pb[plen] = '\0';
  memcpy(sb, s, slen);
  sb[slen] = '\0';
  return fnmatch(pb, sb, 0) == 0;
}

/* p and s are '/'-separated; both may be empty. depth bounds "**" work. */
static int path_match(const char *p, const char *s, unsigned depth) {
  if (depth > 64)
    return 0;
  while (*p != '\0') {
    size_t pl = seg_len(p);
    const char *pn = p[pl] == '/' ? p + pl + 1 : p + pl;
    if (pl == 2 && p[0] == '*' && p[1] == '*') {
      for (;;) { /* zero or more components of s */
        if (path_match(pn, s, depth + 1))
          return 1;
        if (*s == '\0')
          return 0;
        size_t sl = seg_len(s);
        s = s[sl] == '/' ? s + sl + 1 : s + sl;
      }
    }
    if (*s == '\0')
      return 0;
    size_t sl = seg_len(s);
    if (!seg_match(p, pl, s, sl))
      return 0;
    p = pn;
    s = s[sl] == '/' ? s + sl + 1 : s + sl;
  }
  return *s == '\0';
}

int ws_path_glob_match(const char *pat, const char *rel, int is_dir) {
  size_t n = strlen(pat);
  char buf[WS_MANIFEST_NAME_MAX + 2];

  if (n > 0 && pat[n - 1] == '/') {
    if (!is_dir)
      return 0;
    n--;
  }
  if (n == 0 || n >= sizeof(buf))
    return 0;
  memcpy(buf, pat, n);
  buf[n] = '\0';
  if (memchr(buf, '/', n) == NULL) {
    const char *base = strrchr(rel, '/');
    base = base != NULL ? base + 1 : rel;
    return seg_match(buf, n, base, strlen(base));
  }
  return path_match(buf[0] == '/' ? buf + 1 : buf, rel, 0);
}
