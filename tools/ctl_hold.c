/* ctl_hold.c - p2pctl hold / unhold: named holds on a release in the local
 * p2pd ("a server uses this release": never evicted while held):
 *
 *   hold DIGEST NAME [--ttl DURATION] [--json]   take or renew
 *   unhold DIGEST NAME [--json]                  release
 *
 * and ctl_hold_take, which `wait --hold NAME` calls once the release is
 * ready. A hold with a TTL lapses unless renewed (run hold again before it
 * ends); without one it lasts until released. Exit codes: tools/ctl.h.
 * Single-threaded, blocking (no loop).
 */
#include "ctl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "ctl_http.h"
#include "digest.h"
#include "ws_args.h"

#define CTL_HOLD_REQ_TIMEOUT_MS 30000L

int ctl_hold_take(const char *digest, const char *name, uint64_t ttl_ms,
                  int remove, int json) {
  char path[512];
  long status = 0;
  cJSON *r = NULL;
  if (remove)
    snprintf(path, sizeof(path), "/api/v1/releases/%s/holds/%s", digest, name);
  else
    snprintf(path, sizeof(path), "/api/v1/releases/%s/holds/%s?ttl_s=%llu",
             digest, name, (unsigned long long)((ttl_ms + 999) / 1000));
  int rc = ctl_http_request(NULL, remove ? "DELETE" : "POST", path, NULL,
                            CTL_HOLD_REQ_TIMEOUT_MS, &status, &r);
  int ex = rc != 0 ? ctl_http_exit(rc) : ctl_http_reply_exit(status, r);
  if (ex == CTL_EXIT_OK && json) {
    char *text = cJSON_Print(r);
    if (text != NULL)
      printf("%s\n", text);
    cJSON_free(text);
  }
  cJSON_Delete(r);
  return ex;
}

static int hold_main(int argc, char **argv, int remove) {
  static const ws_arg_t rows[] = {
      {"ttl", NULL, "DURATION", WS_ARG_DURATION, 0,
       "the hold lapses after this long unless renewed (default: until "
       "released)"},
      {"json", NULL, NULL, WS_ARG_BOOL, 0, "print the release as JSON"},
  };
  const char *synopsis = remove ? "sha256-HEX NAME [--json]"
                                : "sha256-HEX NAME [--ttl DURATION] [--json]";
  ws_args_spec_t spec = {
      remove ? "p2pctl unhold" : "p2pctl hold",
      synopsis,
      remove ? "Releases the named hold on a release (it may be evicted "
               "again once no hold or pin keeps it)."
             : "Takes or renews a named hold on a ready release: it is never "
               "evicted while held. Renew before --ttl ends.",
      remove ? rows + 1 : rows,
      remove ? 1 : 2,
      NULL};
  const char *v[2] = {0};
  const char *pos[2] = {0};
  size_t npos = 0;
  ws_hash_t h;
  uint64_t ttl_ms = 0;
  int rc = ws_args_parse(&spec, argc, argv, v, pos, 2, &npos);
  if (rc == WS_ARGS_HELP) {
    ws_args_usage(&spec, stdout);
    return CTL_EXIT_OK;
  }
  if (rc == WS_ARGS_VERSION) {
    ws_args_print_version("p2pctl");
    return CTL_EXIT_OK;
  }
  if (rc != 0 || ws_args_check(&spec, v) != 0 || npos != 2 ||
      ws_digest_from_str(pos[0], &h) != 0 ||
      (!remove && v[0] != NULL && ws_parse_duration_ms(v[0], &ttl_ms) != 0)) {
    fprintf(stderr, "usage: %s %s\n", spec.prog, synopsis);
    return CTL_EXIT_USAGE;
  }
  int json = v[remove ? 0 : 1] != NULL && ws_parse_bool(v[remove ? 0 : 1]) == 1;
  int ex = ctl_hold_take(pos[0], pos[1], ttl_ms, remove, json);
  if (ex == CTL_EXIT_OK && !json)
    printf("%s %s %s\n", pos[0], remove ? "released" : "held", pos[1]);
  return ex;
}

int ctl_hold_main(int argc, char **argv) {
  return hold_main(argc, argv, 0);
}

int ctl_unhold_main(int argc, char **argv) {
  return hold_main(argc, argv, 1);
}
