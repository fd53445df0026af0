/* trk_notify.c - sd_notify for p2p-tracker: READY=1 once both listeners
 * accept, STOPPING=1 when a signal starts the shutdown (Type=notify in
 * deploy/systemd/p2p-tracker.service.in). Same protocol and rules as
 * p2pd's daemon_notify: one unix datagram, no libsystemd.
 *
 * Thread: loop thread; the send is non-blocking.
 */
#include "trk_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ws_log.h"

int trk_notify(const char *msg) {
  const char *path = getenv("NOTIFY_SOCKET");
  if (path == NULL || *path == '\0')
    return 0;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  size_t len = strlen(path);
  /* The variable comes from whoever started us: check it before use. */
  if (len >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@')) {
    WS_LOGW("NOTIFY_SOCKET '%s' is not usable", path);
    return -EINVAL;
  }
  memcpy(sa.sun_path, path, len);
  if (path[0] == '@')
    sa.sun_path[0] = '\0'; /* abstract namespace */
  socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    int err = -errno;
    WS_LOGW("notify %s: socket: %s", path, strerror(-err));
    return err;
  }
  int rc = 1;
  if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
             salen) < 0) {
    rc = -errno;
    WS_LOGW("notify %s: %s", path, strerror(-rc));
  }
  close(fd);
  return rc;
}
