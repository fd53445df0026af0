/* pbuf.c - ws_pbuf_t, the growable byte buffer with a hard maximum that all
 * encoders write into. Pure; the buffer belongs to one thread at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

void ws_pbuf_init(ws_pbuf_t *b, size_t max) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->max = max;
}

void ws_pbuf_free(ws_pbuf_t *b) {
  if (b == NULL)
    return;
  free(b->data);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

void ws_pbuf_reset(ws_pbuf_t *b) {
  b->len = 0;
}

int ws_pbuf_append(ws_pbuf_t *b, const void *p, size_t n) {
  if (n == 0)
    return 0;
  if (n > b->max || b->len > b->max - n)
    return WS_ELIMIT;
  if (b->len + n > b->cap) {
    /* Double, but never beyond max: max is the memory promise. */
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + n)
      ncap = ncap > b->max / 2 ? b->max : ncap * 2;
    uint8_t *nd = realloc(b->data, ncap);
    if (nd == NULL)
      return -ENOMEM;
    b->data = nd;
    b->cap = ncap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}
