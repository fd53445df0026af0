/* api_hold.c - the hold routes of p2pd's API (docs/api.md, "Holds"):
 *
 *   POST   /api/v1/releases/<digest>/holds/<name>[?ttl_s=N]  take or renew
 *   DELETE /api/v1/releases/<digest>/holds/<name>            release
 *
 * Both answer with the release's JSON (its "holds" included) once the
 * cache has recorded the change. The release table does the work
 * (peer_release_hold); this file only turns requests and error codes into
 * HTTP. Thread: loop thread.
 */
#include "api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ws_httpd.h"

/* 10 years: a TTL beyond this is a mistake, and the ns sum cannot wrap. */
#define API_HOLD_TTL_MAX_S 315360000ull

static void api_hold_done(void *arg, peer_release_t *rel, int err) {
  ws_httpd_req_t *req = arg;
  if (err == WS_ENOTFOUND)
    ws_httpd_reply_error(req, 404, err, "no such hold");
  else if (err != 0)
    ws_httpd_reply_error(req, peer_api_status_for(err), err, NULL);
  else
    ws_httpd_reply_json(req, 200, peer_release_json(rel));
}

/* ttl_s from the query: 0 when absent. -1 when malformed. */
static int api_hold_ttl(ws_httpd_req_t *req, uint64_t *ttl_ms) {
  char buf[32], *end = NULL;
  *ttl_ms = 0;
  if (ws_httpd_req_query_get(req, "ttl_s", buf, sizeof(buf)) < 0)
    return 0;
  errno = 0;
  unsigned long long v = strtoull(buf, &end, 10);
  if (errno != 0 || end == buf || *end != '\0' || buf[0] == '-' ||
      v > API_HOLD_TTL_MAX_S)
    return -1;
  *ttl_ms = (uint64_t)v * 1000u;
  return 0;
}

void peer_api_hold(ws_httpd_req_t *req, peer_release_t *rel, const char *name) {
  const char *method = ws_httpd_req_method(req);
  int remove = strcmp(method, "DELETE") == 0;
  uint64_t ttl_ms = 0;
  if (!remove && strcmp(method, "POST") != 0) {
    ws_httpd_reply_error(req, 405, WS_EUSAGE, "POST or DELETE a hold");
    return;
  }
  if (!ws_cache_hold_name_ok(name)) {
    ws_httpd_reply_error(req, 400, WS_EUSAGE,
                         "hold name: 1-63 of [A-Za-z0-9._:@-], not '.' first");
    return;
  }
  if (!remove && api_hold_ttl(req, &ttl_ms) != 0) {
    ws_httpd_reply_error(req, 400, WS_EUSAGE,
                         "ttl_s: want seconds (0 = until released)");
    return;
  }
  int rc = peer_release_hold(rel, name, ttl_ms, remove, api_hold_done, req);
  if (rc == WS_EBUSY)
    ws_httpd_reply_error(req, 409, rc, "release is not ready");
  else if (rc != 0)
    ws_httpd_reply_error(req, 503, rc, NULL);
}
