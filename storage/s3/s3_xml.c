/* s3_xml.c - a tiny bounded extractor for the few XML elements S3 and STS
 * send (Error/Code/Message, ListBucketResult Contents/Key/Size/ETag,
 * IsTruncated, NextContinuationToken, UploadId, STS Credentials).
 *
 * No general XML parser is in the stack, and none is needed: these documents
 * are flat, their text never contains a raw '<' (it is escaped as &lt;), and
 * no element we read nests inside one of the same name. So finding an
 * element is finding "<name>" (or "<name attr...>") and the next "</name>".
 * Input is hostile: every scan is bounded by len, text is bounded by max,
 * entities are validated (no &#0;, no surrogates, nothing above U+10FFFF).
 * Pure functions; any thread.
 */
#include "s3-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *mem_find(const char *h, size_t hn, const char *n,
                            size_t nn) {
  if (nn == 0 || hn < nn)
    return NULL;
  return memmem(h, hn, n, nn);
}

int s3_xml_find(const char *doc, size_t len, const char *name, size_t *pos,
                size_t *start, size_t *end) {
  size_t nl = strlen(name);
  if (nl == 0 || nl > 64)
    return WS_EBADMSG;
  char open[80], close[80];
  open[0] = '<';
  memcpy(open + 1, name, nl);
  close[0] = '<';
  close[1] = '/';
  memcpy(close + 2, name, nl);
  close[nl + 2] = '>';
  size_t p = *pos;
  while (p < len) {
    const char *hit = mem_find(doc + p, len - p, open, nl + 1);
    if (!hit)
      return WS_ENOTFOUND;
    size_t at = (size_t)(hit - doc) + nl + 1;
    if (at >= len)
      return WS_EBADMSG;
    char c = doc[at];
    if (c != '>' && c != ' ' && c != '\t' && c != '\r' && c != '\n' &&
        c != '/') {
      p = at; /* "<KeyCount>" when looking for "<Key>" */
      continue;
    }
    const char *gt = memchr(doc + at, '>', len - at);
    if (!gt)
      return WS_EBADMSG;
    size_t body = (size_t)(gt - doc) + 1;
    if (gt > doc + at && gt[-1] == '/') { /* <name/> */
      *start = *end = body;
      *pos = body;
      return 0;
    }
    const char *cl = mem_find(doc + body, len - body, close, nl + 3);
    if (!cl)
      return WS_EBADMSG;
    *start = body;
    *end = (size_t)(cl - doc);
    *pos = *end + nl + 3;
    return 0;
  }
  return WS_ENOTFOUND;
}

static size_t utf8_put(char *o, unsigned long cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Decodes one entity at s[0..n) (s[0] == '&'); writes to o, returns bytes
 * written and sets *used, or 0 when malformed. */
static size_t entity_decode(const char *s, size_t n, char *o, size_t *used) {
  const char *semi = memchr(s, ';', n < 12 ? n : 12);
  if (!semi)
    return 0;
  size_t el = (size_t)(semi - s) + 1;
  *used = el;
  static const struct {
    const char *name;
    char c;
  } named[] = {{"&amp;", '&'},
               {"&lt;", '<'},
               {"&gt;", '>'},
               {"&quot;", '"'},
               {"&apos;", '\''}};
  for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
    if (strlen(named[i].name) == el && memcmp(s, named[i].name, el) == 0) {
      o[0] = named[i].c;
      return 1;
    }
  }
  if (el < 4 || s[1] != '#')
    return 0;
  unsigned long cp = 0;
  size_t i = 2;
  int hexa = s[2] == 'x' || s[2] == 'X';
  if (hexa)
    i++;
  if (i >= el - 1)
    return 0;
  for (; i < el - 1; i++) {
    char c = s[i];
    unsigned d;
    if (c >= '0' && c <= '9')
      d = (unsigned)(c - '0');
    else if (hexa && c >= 'a' && c <= 'f')
      d = (unsigned)(c - 'a' + 10);
    else if (hexa && c >= 'A' && c <= 'F')
      d = (unsigned)(c - 'A' + 10);
    else
      return 0;
    cp = cp * (hexa ? 16 : 10) + d;
    if (cp > 0x10FFFF)
      return 0;
  }
  if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return utf8_put(o, cp);
}

int s3_xml_text(const char *s, size_t n, size_t max, char **out) {
  /* Decoded text is never longer than its source (an entity of k bytes
   * yields at most 4 <= k bytes), so one allocation of min(n, max) + 1. */
  size_t cap = n < max ? n : max;
  char *o = malloc(cap + 1);
  if (!o)
    return -ENOMEM;
  size_t w = 0;
  for (size_t i = 0; i < n;) {
    char tmp[4];
    size_t k = 1, used = 1;
    if (s[i] == '<') {
      free(o);
      return WS_EBADMSG;
    }
    if (s[i] == '&') {
      k = entity_decode(s + i, n - i, tmp, &used);
      if (k == 0) {
        free(o);
        return WS_EBADMSG;
      }
    } else {
      tmp[0] = s[i];
    }
    if (w + k > cap) {
      free(o);
      return WS_ELIMIT;
    }
    memcpy(o + w, tmp, k);
    w += k;
    i += used;
  }
  o[w] = '\0';
  *out = o;
  return 0;
}

int s3_xml_get(const char *doc, size_t len, const char *name, size_t max,
               char **out) {
  size_t pos = 0, a, b;
  int rc = s3_xml_find(doc, len, name, &pos, &a, &b);
  if (rc)
    return rc;
  return s3_xml_text(doc + a, b - a, max, out);
}
