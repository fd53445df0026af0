/* ctl_body.c - bounded reply bodies for libcurl (see ctl_body.h).
 *
 * Owns nothing: the caller frees body->p.
 */
#include "ctl_body.h"

#include <stdlib.h>
#include <string.h>

size_t ctl_body_write(char *data, size_t size, size_t n, void *arg) {
  ctl_body_t *b = arg;
  size_t add = size * n;
  if (add > b->max || b->len > b->max - add) {
    b->over = 1;
    return 0;
  }
  char *p = realloc(b->p, b->len + add + 1);
  if (p == NULL)
    return 0;
  memcpy(p + b->len, data, add);
  b->p = p;
  b->len += add;
  p[b->len] = '\0';
  return add;
}
