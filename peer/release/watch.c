/* watch.c - "tell me when this release settles": the watches registered
 * on a release (by the API for prefetch replies and waits), each with an
 * optional timeout, settled by the state machine's changes.
 *
 * Owns: each release's watches (a watch is freed in its timer's close
 * callback, after its callback ran or it was canceled).
 * Thread: loop thread.
 */
#include "release/release-int.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "core/tunables.h"

struct peer_release_watch_s {
  peer_release_watch_t *next;
  peer_release_t *rel;
  peer_release_watch_kind_t kind;
  peer_release_watch_fn cb;
  void *arg;
  uv_timer_t timer; /* runs only with a timeout; freed in its close cb */
};

int peer_release_settled(const peer_release_t *rel,
                         peer_release_watch_kind_t kind) {
  if (peer_rel_terminal(rel->state))
    return 1;
  return kind == PEER_REL_WATCH_RESOLVED && rel->state >= PEER_REL_FETCHING;
}

static void watch_timer_closed(uv_handle_t *h) {
  free(h->data);
}

/* Takes w off its release; its timer closes (and frees w). */
static void watch_unlink(peer_release_watch_t *w) {
  peer_release_t *rel = w->rel;
  peer_release_watch_t **pp = &rel->watches;
  while (*pp != NULL && *pp != w)
    pp = &(*pp)->next;
  assert(*pp == w);
  *pp = w->next;
  rel->nwatches--;
  uv_timer_stop(&w->timer);
  uv_close((uv_handle_t *)&w->timer, watch_timer_closed);
}

static void watch_finish(peer_release_watch_t *w, int err) {
  peer_release_t *rel = w->rel;
  watch_unlink(w);
  w->cb(w->arg, rel, err);
}

static void watch_timeout(uv_timer_t *t) {
  watch_finish(t->data, WS_ETIMEOUT);
}

int peer_release_watch(peer_release_t *rel, peer_release_watch_kind_t kind,
                       uint64_t timeout_ms, peer_release_watch_fn cb, void *arg,
                       peer_release_watch_t **out) {
  if (rel->nwatches >= PEER_WAITERS_PER_RELEASE_MAX)
    return WS_ELIMIT;
  peer_release_watch_t *w = calloc(1, sizeof(*w));
  if (w == NULL)
    return -ENOMEM;
  w->rel = rel;
  w->kind = kind;
  w->cb = cb;
  w->arg = arg;
  uv_timer_init(rel->t->ctx->loop, &w->timer);
  w->timer.data = w;
  if (timeout_ms > 0)
    uv_timer_start(&w->timer, watch_timeout, timeout_ms, 0);
  w->next = rel->watches;
  rel->watches = w;
  rel->nwatches++;
  *out = w;
  return 0;
}

void peer_release_unwatch(peer_release_watch_t *w) {
  watch_unlink(w);
}

void peer_rel_watches_settle(peer_release_t *rel) {
  peer_release_watch_t *w = rel->watches;
  while (w != NULL) {
    /* next is read before the callback runs, so a callback must not
     * unwatch another watch of this release. */
    peer_release_watch_t *next = w->next;
    if (peer_release_settled(rel, w->kind))
      watch_finish(w, 0);
    w = next;
  }
}

void peer_rel_watches_move(peer_release_t *rel, peer_release_t *other) {
  while (rel->watches != NULL) {
    peer_release_watch_t *w = rel->watches;
    rel->watches = w->next;
    rel->nwatches--;
    w->rel = other;
    w->next = other->watches;
    other->watches = w;
    other->nwatches++;
  }
  peer_rel_watches_settle(other);
}

void peer_rel_watches_cancel(peer_release_t *rel) {
  while (rel->watches != NULL)
    watch_finish(rel->watches, WS_ECANCELED);
}
