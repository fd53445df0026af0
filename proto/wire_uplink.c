/* wire_uplink.c - pacing the connections that share one upload link
 * (wire_uplink.h). Part of the ws_wire library. Loop thread only. */
#include "wire_conn-int.h"

#include <sys/socket.h>

void wire_uplink_init(wire_uplink_t *u, uint64_t bytes_per_s) {
  u->rate = bytes_per_s;
  u->backlogged = 0;
  u->bulk = false;
}

void wire_uplink_set_bulk(wire_uplink_t *u, bool bulk) {
  u->bulk = bulk;
}

uint64_t wire_uplink_share(const wire_uplink_t *u) {
  if (u->rate == 0)
    return 0;
  if (u->backlogged <= 1)
    return u->rate;
  uint64_t share = u->rate * WIRE_UPLINK_OVER_PCT / 100u / u->backlogged;
  return share < u->rate ? share : u->rate;
}

/* Best effort: a socket that refuses keeps the kernel's pacing. */
static void uplink_pace(wire_conn_t *c, uint64_t share) {
  uv_os_fd_t fd;
  unsigned long v = (unsigned long)share;

  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
      setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof(v)) == 0)
    c->pace_rate = share;
}

void wire_uplink_written(wire_conn_t *c) {
  wire_uplink_t *u = c->cfg.uplink;
  bool backlogged = c->st.sendq_bytes > 0;

  if (u == NULL || u->rate == 0)
    return;
  if (backlogged != c->up_backlogged) {
    c->up_backlogged = backlogged;
    if (backlogged)
      u->backlogged++;
    else
      u->backlogged--;
  }
  if (!backlogged)
    return;
  uint64_t share = wire_uplink_share(u);
  if (share != c->pace_rate)
    uplink_pace(c, share);
}

void wire_uplink_leave(wire_conn_t *c) {
  wire_uplink_t *u = c->cfg.uplink;

  if (u != NULL && c->up_backlogged) {
    c->up_backlogged = false;
    u->backlogged--;
  }
}
