/* bufpool.c - bounded buffer pool with a FIFO of parked waiters.
 * Loop thread only. See bufpool.h.
 */
#include "core/bufpool.h"

#include <errno.h>
#include <stdlib.h>

struct peer_bufpool_s {
  peer_buf_t *bufs; /* count entries, owned */
  char *mem;        /* count * buf_bytes, owned */
  peer_buf_t *free_list;
  unsigned count;
  unsigned available;
  unsigned peak;
  size_t buf_bytes;
  peer_bufwait_t *wait_head, *wait_tail;
};

int peer_bufpool_new(size_t buf_bytes, unsigned count, peer_bufpool_t **out) {
  if (buf_bytes == 0 || count == 0)
    return WS_EUSAGE;
  peer_bufpool_t *p = calloc(1, sizeof(*p));
  if (p == NULL)
    return -ENOMEM;
  p->bufs = calloc(count, sizeof(*p->bufs));
  if (p->bufs == NULL)
    goto free_pool;
  p->mem = malloc(buf_bytes * count);
  if (p->mem == NULL)
    goto free_bufs;
  p->count = count;
  p->available = count;
  p->buf_bytes = buf_bytes;
  for (unsigned i = count; i-- > 0;) {
    p->bufs[i].cap = buf_bytes;
    p->bufs[i].data = p->mem + (size_t)i * buf_bytes;
    p->bufs[i].next_free = p->free_list;
    p->free_list = &p->bufs[i];
  }
  *out = p;
  return 0;
free_bufs:
  free(p->bufs);
free_pool:
  free(p);
  return -ENOMEM;
}

void peer_bufpool_free(peer_bufpool_t *p) {
  if (p == NULL)
    return;
  free(p->mem);
  free(p->bufs);
  free(p);
}

peer_buf_t *peer_bufpool_get(peer_bufpool_t *p) {
  peer_buf_t *b = p->free_list;
  if (b == NULL)
    return NULL;
  p->free_list = b->next_free;
  b->next_free = NULL;
  b->len = 0;
  p->available--;
  if (p->count - p->available > p->peak)
    p->peak = p->count - p->available;
  return b;
}

void peer_bufpool_put(peer_bufpool_t *p, peer_buf_t *b) {
  b->next_free = p->free_list;
  p->free_list = b;
  p->available++;
  peer_bufwait_t *w = p->wait_head;
  if (w == NULL)
    return;
  p->wait_head = w->next;
  if (p->wait_head == NULL)
    p->wait_tail = NULL;
  w->next = NULL;
  w->queued = 0;
  w->cb(w);
}

unsigned peer_bufpool_available(const peer_bufpool_t *p) {
  return p->available;
}

size_t peer_bufpool_buf_bytes(const peer_bufpool_t *p) {
  return p->buf_bytes;
}

unsigned peer_bufpool_peak(const peer_bufpool_t *p) {
  return p->peak;
}

void peer_bufpool_wait(peer_bufpool_t *p, peer_bufwait_t *w) {
  if (w->queued)
    return;
  w->queued = 1;
  w->next = NULL;
  if (p->wait_tail != NULL)
    p->wait_tail->next = w;
  else
    p->wait_head = w;
  p->wait_tail = w;
}

void peer_bufpool_unwait(peer_bufpool_t *p, peer_bufwait_t *w) {
  if (!w->queued)
    return;
  peer_bufwait_t *prev = NULL;
  for (peer_bufwait_t *it = p->wait_head; it != NULL; it = it->next) {
    if (it == w) {
      if (prev != NULL)
        prev->next = w->next;
      else
        p->wait_head = w->next;
      if (p->wait_tail == w)
        p->wait_tail = prev;
      break;
    }
    prev = it;
  }
  w->next = NULL;
  w->queued = 0;
}

void peer_bufpool_kick(peer_bufpool_t *p) {
  unsigned n = p->available;
  while (n-- > 0 && p->wait_head != NULL) {
    peer_bufwait_t *w = p->wait_head;
    p->wait_head = w->next;
    if (p->wait_head == NULL)
      p->wait_tail = NULL;
    w->next = NULL;
    w->queued = 0;
    w->cb(w);
  }
}
