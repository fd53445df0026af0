/* curl_uv.h - glue that drives one libcurl multi handle from a libuv loop.
 *
 * The shape of curl's docs/examples/multi-uv.c, hardened: one
 * uv_timer for curl's timeout, one uv_poll per socket curl asks about, the
 * poll stopped and closed before curl closes the fd, poll errors passed to
 * curl as CURL_CSELECT_ERR, curl_multi_info_read drained after every action.
 *
 * Thread: everything runs on the loop thread of the loop given to
 * ws_curl_uv_new(). Transfer completions are reported through the
 * ws_curl_uv_xfer_t the caller embeds in its own request object.
 */
#ifndef WS_CURL_UV_H
#define WS_CURL_UV_H

#include <curl/curl.h>
#include <uv.h>

#include "ws_err.h"

typedef struct ws_curl_uv_s ws_curl_uv_t;
typedef struct ws_curl_uv_xfer_s ws_curl_uv_xfer_t;

/* Called once when a transfer finishes (success or failure), after the easy
 * handle was removed from the multi handle. The callee owns the easy handle
 * again and may clean it up, re-add it or add others. */
typedef void (*ws_curl_uv_done_cb)(ws_curl_uv_xfer_t *x, CURLcode result);

/* Embedded by the caller in its request; borrowed by the glue while the
 * easy handle is added. */
struct ws_curl_uv_xfer_s {
  CURL *easy;
  ws_curl_uv_done_cb done;
  void *data; /* caller's */
};

/* Creates the glue and its multi handle on loop. *out is new; close with
 * ws_curl_uv_close(). Returns 0, -ENOMEM or WS_EHTTP. */
int ws_curl_uv_new(uv_loop_t *loop, ws_curl_uv_t **out) WS_MUST_USE;

/* The multi handle (borrowed), for CURLMOPT_* tuning by the owner. */
CURLM *ws_curl_uv_multi(ws_curl_uv_t *cu);

/* Starts x->easy (already configured). The glue sets CURLOPT_PRIVATE and the
 * socket-close hook on it. x is borrowed until x->done runs or
 * ws_curl_uv_remove() is called. Must not be called from inside a curl
 * callback. Returns 0 or WS_EHTTP. */
int ws_curl_uv_add(ws_curl_uv_t *cu, ws_curl_uv_xfer_t *x) WS_MUST_USE;

/* Stops x without calling x->done. Not from inside a curl callback. */
void ws_curl_uv_remove(ws_curl_uv_t *cu, ws_curl_uv_xfer_t *x);

/* Number of transfers added and not yet done/removed. */
unsigned ws_curl_uv_active(const ws_curl_uv_t *cu);

typedef void (*ws_curl_uv_close_cb)(void *arg);
/* Every transfer must have been removed or finished. Cleans up the multi
 * handle (closing cached connections), closes the uv handles and frees cu
 * once they are closed, then calls cb(arg) (cb may be NULL). Accepts NULL. */
void ws_curl_uv_close(ws_curl_uv_t *cu, ws_curl_uv_close_cb cb, void *arg);

#endif
