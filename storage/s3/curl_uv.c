/* curl_uv.c - one libcurl multi handle driven by a libuv loop.
 *
 * Owns: the CURLM, one uv_timer for curl's timeout and one uv_poll per
 * socket curl watches (a sock_t, kept in a list so the socket-close hook can
 * find it by fd). Thread: the loop thread only.
 *
 * Socket lifecycle: curl asks (SOCKETFUNCTION) IN/OUT/INOUT -> sock_t with
 * an active poll; REMOVE or the CLOSESOCKETFUNCTION hook -> poll stopped and
 * closed *before* close(fd), so epoll never holds a recycled fd; the sock_t
 * is freed in the poll's close callback.
 *
 * Glue lifecycle: OPEN -> CLOSING (multi cleaned up, handles closing) ->
 * freed when the timer and every poll have reported closed. A close asked
 * for from inside a completion callback is deferred until the dispatch that
 * called it unwinds: nothing is freed under a frame that still uses it.
 */
#include "curl_uv.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct sock_s {
  uv_poll_t poll; /* first: the close callback casts back */
  curl_socket_t fd;
  int dropped; /* poll closing; curl's later REMOVE is ignored */
  ws_curl_uv_t *cu;
  struct sock_s *next;
} sock_t;

struct ws_curl_uv_s {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;
  sock_t *socks;    /* live (not dropped) sockets */
  unsigned active;  /* transfers added, not yet done/removed */
  unsigned depth;   /* nested dispatches on the stack */
  int close_wanted; /* ws_curl_uv_close() called */
  int closing;      /* multi cleaned up, handles closing */
  unsigned handles; /* uv handles not yet reported closed */
  ws_curl_uv_close_cb close_cb;
  void *close_arg;
};

static void cu_maybe_free(ws_curl_uv_t *cu) {
  if (!cu->closing || cu->handles > 0)
    return;
  ws_curl_uv_close_cb cb = cu->close_cb;
  void *arg = cu->close_arg;
  free(cu);
  if (cb)
    cb(arg);
}

static void on_handle_closed(uv_handle_t *h) {
  ws_curl_uv_t *cu = h->data;
  if (h->type == UV_POLL)
    free((sock_t *)h);
  assert(cu->handles > 0);
  cu->handles--;
  cu_maybe_free(cu);
}

/* Stops and closes the poll of s now; frees s in the close callback. */
static void sock_drop(ws_curl_uv_t *cu, sock_t *s) {
  if (s->dropped)
    return;
  for (sock_t **pp = &cu->socks; *pp; pp = &(*pp)->next) {
    if (*pp == s) {
      *pp = s->next;
      break;
    }
  }
  s->dropped = 1;
  s->fd = CURL_SOCKET_BAD;
  uv_poll_stop(&s->poll);
  uv_close((uv_handle_t *)&s->poll, on_handle_closed);
}

static void cu_do_close(ws_curl_uv_t *cu);

/* Hands finished transfers back to their owners. */
static void cu_drain(ws_curl_uv_t *cu) {
  CURLMsg *msg;
  int left;
  while (!cu->closing && (msg = curl_multi_info_read(cu->multi, &left))) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    CURL *easy = msg->easy_handle;
    CURLcode result = msg->data.result; /* msg dies with remove_handle */
    ws_curl_uv_xfer_t *x = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    curl_multi_remove_handle(cu->multi, easy);
    assert(cu->active > 0);
    cu->active--;
    if (x && x->done)
      x->done(x, result);
  }
}

static void cu_enter(ws_curl_uv_t *cu) {
  cu->depth++;
}

static void cu_leave(ws_curl_uv_t *cu) {
  assert(cu->depth > 0);
  if (--cu->depth == 0 && cu->close_wanted && !cu->closing)
    cu_do_close(cu);
}

static void cu_action(ws_curl_uv_t *cu, curl_socket_t fd, int flags) {
  int running = 0;
  cu_enter(cu);
  curl_multi_socket_action(cu->multi, fd, flags, &running);
  cu_drain(cu);
  cu_leave(cu);
}

static void on_poll(uv_poll_t *h, int status, int events) {
  sock_t *s = (sock_t *)h;
  if (s->dropped)
    return;
  int flags = 0;
  if (status < 0) {
    flags = CURL_CSELECT_ERR;
  } else {
    if (events & UV_READABLE)
      flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
      flags |= CURL_CSELECT_OUT;
  }
  cu_action(s->cu, s->fd, flags);
}

static void on_timer(uv_timer_t *t) {
  ws_curl_uv_t *cu = t->data;
  cu_action(cu, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION: never calls back into curl (no recursion); a
 * zero timeout fires on the next loop iteration. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  ws_curl_uv_t *cu = userp;
  if (cu->closing)
    return 0;
  if (timeout_ms < 0)
    uv_timer_stop(&cu->timer);
  else
    uv_timer_start(&cu->timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* CURLMOPT_SOCKETFUNCTION */
static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp,
                          void *socketp) {
  (void)easy;
  ws_curl_uv_t *cu = userp;
  sock_t *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      sock_drop(cu, s);
      curl_multi_assign(cu->multi, fd, NULL);
    }
    return 0;
  }
  if (s && s->dropped)
    s = NULL; /* stale: curl reuses the fd number for a new socket */
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s)
      return -1;
    if (uv_poll_init_socket(cu->loop, &s->poll, fd) != 0) {
      free(s);
      return -1;
    }
    s->poll.data = cu;
    s->fd = fd;
    s->cu = cu;
    s->next = cu->socks;
    cu->socks = s;
    cu->handles++;
    curl_multi_assign(cu->multi, fd, s);
  }
  int events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
    events |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
    events |= UV_WRITABLE;
  if (uv_poll_start(&s->poll, events, on_poll) != 0)
    return -1;
  return 0;
}

/* CURLOPT_CLOSESOCKETFUNCTION: the poll goes before the fd does. */
static int on_curl_closesocket(void *clientp, curl_socket_t fd) {
  ws_curl_uv_t *cu = clientp;
  for (sock_t *s = cu->socks; s; s = s->next) {
    if (s->fd == fd) {
      sock_drop(cu, s);
      break;
    }
  }
  return close(fd);
}

int ws_curl_uv_new(uv_loop_t *loop, ws_curl_uv_t **out) {
  int rc = -ENOMEM;
  ws_curl_uv_t *cu = calloc(1, sizeof(*cu));
  if (!cu)
    goto fail;
  cu->loop = loop;
  cu->multi = curl_multi_init();
  if (!cu->multi)
    goto fail_cu;
  rc = WS_EHTTP;
  if (curl_multi_setopt(cu->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) ||
      curl_multi_setopt(cu->multi, CURLMOPT_SOCKETDATA, cu) ||
      curl_multi_setopt(cu->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) ||
      curl_multi_setopt(cu->multi, CURLMOPT_TIMERDATA, cu))
    goto fail_multi;
  rc = uv_timer_init(loop, &cu->timer);
  if (rc != 0)
    goto fail_multi;
  cu->timer.data = cu;
  cu->handles = 1;
  *out = cu;
  return 0;

fail_multi:
  curl_multi_cleanup(cu->multi);
fail_cu:
  free(cu);
fail:
  return rc;
}

CURLM *ws_curl_uv_multi(ws_curl_uv_t *cu) {
  return cu->multi;
}

unsigned ws_curl_uv_active(const ws_curl_uv_t *cu) {
  return cu->active;
}

int ws_curl_uv_add(ws_curl_uv_t *cu, ws_curl_uv_xfer_t *x) {
  if (cu->closing || cu->close_wanted)
    return WS_ECANCELED;
  if (curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x) ||
      curl_easy_setopt(x->easy, CURLOPT_CLOSESOCKETFUNCTION,
                       on_curl_closesocket) ||
      curl_easy_setopt(x->easy, CURLOPT_CLOSESOCKETDATA, cu))
    return WS_EHTTP;
  if (curl_multi_add_handle(cu->multi, x->easy) != CURLM_OK)
    return WS_EHTTP;
  cu->active++;
  return 0;
}

void ws_curl_uv_remove(ws_curl_uv_t *cu, ws_curl_uv_xfer_t *x) {
  cu_enter(cu);
  if (curl_multi_remove_handle(cu->multi, x->easy) == CURLM_OK) {
    assert(cu->active > 0);
    cu->active--;
  }
  cu_leave(cu);
}

static void cu_do_close(ws_curl_uv_t *cu) {
  assert(cu->active == 0);
  cu->closing = 1;
  curl_multi_cleanup(cu->multi); /* may call both socket hooks */
  cu->multi = NULL;
  while (cu->socks)
    sock_drop(cu, cu->socks);
  uv_timer_stop(&cu->timer);
  uv_close((uv_handle_t *)&cu->timer, on_handle_closed);
}

void ws_curl_uv_close(ws_curl_uv_t *cu, ws_curl_uv_close_cb cb, void *arg) {
  if (!cu || cu->close_wanted)
    return;
  cu->close_wanted = 1;
  cu->close_cb = cb;
  cu->close_arg = arg;
  if (cu->depth == 0)
    cu_do_close(cu);
}
