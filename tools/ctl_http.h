/* ctl_http.h - p2pctl's client for p2pd's local HTTP/JSON API on a unix
 * socket (libcurl easy interface). Blocking; p2pctl's main thread only (it
 * has no event loop). Transport failures are printed to stderr here, once,
 * with the socket path; HTTP-level errors are left to the caller, which can
 * print and map them with ctl_http_reply_exit().
 */
#ifndef WS_CTL_HTTP_H
#define WS_CTL_HTTP_H

#include <stddef.h>

#include "ws_err.h"

struct cJSON;

/* Where p2pd listens when neither --api nor P2P_API says otherwise. */
#define CTL_HTTP_DEFAULT_SOCKET "/run/weightswarm/p2pd.sock"
/* Largest reply body accepted (a remote may not grow our memory freely). */
#define CTL_HTTP_MAX_REPLY_BYTES (16u * 1024u * 1024u)
/* Longest progress line accepted by ctl_http_stream(). */
#define CTL_HTTP_MAX_LINE_BYTES (64u * 1024u)
#define CTL_HTTP_CONNECT_TIMEOUT_MS 5000L

/* Set by p2pctl.c from the global `--api SOCKET` option; NULL if absent.
 * Borrowed from argv. */
extern const char *ctl_api_socket;

/* The socket to use: ctl_api_socket, else $P2P_API (if non-empty), else
 * CTL_HTTP_DEFAULT_SOCKET. Never NULL; borrowed. */
const char *ctl_http_socket(void);

/* Sends method path (e.g. "GET", "/api/v1/status") to p2pd at sock (NULL =
 * ctl_http_socket()) with body (borrowed, serialized as JSON; NULL = no
 * body) and waits at most timeout_ms for the whole exchange (0 = no limit,
 * for waits). On 0, *status is the HTTP status and *reply a new JSON value
 * (caller frees with cJSON_Delete) or NULL for an empty body. Errors, each
 * printed to stderr: -ECONNREFUSED (cannot reach p2pd: not running, wrong
 * path, no permission), WS_ETIMEOUT, WS_EJSON (reply is not JSON),
 * WS_ELIMIT (reply too large), WS_EHTTP (other transport failure),
 * -ENOMEM. Map them with ctl_http_exit(). */
WS_MUST_USE int ctl_http_request(const char *sock, const char *method,
                                 const char *path, const struct cJSON *body,
                                 long timeout_ms, long *status,
                                 struct cJSON **reply);

/* Called once per line of a streamed 2xx reply, without the '\n' (and
 * without a trailing '\r'), NUL terminated. Return 0 to go on, nonzero to
 * stop (ctl_http_stream then returns WS_ECANCELED, printing nothing). */
typedef int (*ctl_http_line_cb)(const char *line, size_t len, void *arg);

/* Like ctl_http_request, but a 2xx reply body is handed to cb line by line
 * as it arrives (a last line without '\n' is delivered too). A non-2xx
 * reply is not passed to cb: it is parsed into *err_reply (may be NULL:
 * then discarded) as for ctl_http_request. Extra error: WS_ELIMIT for a
 * line over CTL_HTTP_MAX_LINE_BYTES. */
WS_MUST_USE int ctl_http_stream(const char *sock, const char *method,
                                const char *path, const struct cJSON *body,
                                long timeout_ms, long *status,
                                ctl_http_line_cb cb, void *arg,
                                struct cJSON **err_reply);

/* Exit code for a ctl_http_request/_stream return value: 0 -> CTL_EXIT_OK,
 * WS_ETIMEOUT -> CTL_EXIT_TIMEOUT, WS_ECANCELED -> CTL_EXIT_FAIL, any other
 * failure -> CTL_EXIT_DAEMON. */
int ctl_http_exit(int rc);

/* For a completed exchange: 2xx -> CTL_EXIT_OK; otherwise prints
 * "p2pctl: MESSAGE (CODE)" from the {"error":{...}} reply (or the status
 * line if there is none) to stderr and returns CTL_EXIT_NOTFOUND (404 or
 * WS_ENOTFOUND), CTL_EXIT_TIMEOUT (WS_ETIMEOUT), CTL_EXIT_ORIGIN (WS_ES3*,
 * WS_ECREDS), CTL_EXIT_USAGE (400 with WS_EUSAGE), else CTL_EXIT_FAIL.
 * reply is borrowed and may be NULL. */
int ctl_http_reply_exit(long status, const struct cJSON *reply);

#endif
