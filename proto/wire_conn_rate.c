/* wire_conn_rate.c - how fast a connection's socket takes its bytes, and
 * the unsent bytes the kernel may hold for it. Part of the ws_wire
 * library. Loop thread only.
 *
 * Why: a frame queued behind payload waits for every byte before it: the
 * pieces the caller has queued and what the kernel holds unsent
 * (TCP_NOTSENT_LOWAT). A fixed 128 KiB of unsent bytes and two 256 KiB
 * pieces are 4 ms on a 1 Gbit/s share and 1.3 s on a 4 Mbit/s one (a
 * 16 Mbit/s link shared by four uploads): every HAVE and REQUEST a node
 * sent to a neighbour it was uploading to took that long, each hop of a
 * chunk paid it, and the nodes of a 48-node swarm fell further behind S3
 * the longer it ran (docs/benchmarks.md, session 27). Both now follow the
 * rate the connection drains at: the kernel holds about WIRE_UNSENT_MS of
 * it (between WIRE_NOTSENT_MIN_BYTES and WIRE_NOTSENT_LOWAT_BYTES, or
 * WIRE_NOTSENT_BULK_BYTES on a bulk uplink, wire_uplink.h), and a
 * caller may size its pieces from wire_conn_send_rate the same way. A fast
 * connection keeps the large sizes, whose fewer writes cost less CPU per
 * byte.
 *
 * The rate: the bytes written while the connection had more queued, over
 * the time it had (from one write's completion to the next, when the
 * queue was not empty after the first: time with nothing queued measures
 * the sender, not the link), in samples of at least WIRE_RATE_WINDOW_MS of
 * such time or of WIRE_RATE_SAMPLE_BYTES (a fast connection gets its rate
 * within milliseconds, a slow one after 100 ms of busy time), as a moving
 * average of 1/4 per sample. A connection whose queue runs empty between
 * chunks adds up its busy time until it makes a sample. 0 until the first
 * sample; the kernel holds WIRE_NOTSENT_MIN_BYTES until then.
 */
#include "wire_conn-int.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

uint64_t wire_conn_send_rate(const wire_conn_t *c) {
  return c->tx_rate;
}

void wire_rate_set_unsent(wire_conn_t *c, uint32_t bytes) {
  uv_os_fd_t fd;
  int v = (int)bytes;

  c->unsent_limit = bytes;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0)
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v));
}

void wire_rate_written(wire_conn_t *c, size_t len) {
  uint64_t now = uv_hrtime();

  wire_uplink_written(c);
  if (c->rate_last_ns != 0) { /* more was queued since the last write */
    c->rate_acc_ns += now - c->rate_last_ns;
    c->rate_acc_bytes += len;
  }
  c->rate_last_ns = c->st.sendq_bytes > 0 ? now : 0;
  if (c->rate_acc_ns < (uint64_t)WIRE_RATE_WINDOW_MS * 1000000u &&
      c->rate_acc_bytes < WIRE_RATE_SAMPLE_BYTES)
    return;
  if (c->rate_acc_ns == 0)
    c->rate_acc_ns = 1;
  uint64_t sample =
      (uint64_t)((double)c->rate_acc_bytes * 1e9 / (double)c->rate_acc_ns);
  c->tx_rate = c->tx_rate == 0 ? sample : (3u * c->tx_rate + sample) / 4u;
  c->rate_acc_ns = c->rate_acc_bytes = 0;
  /* Only a change of a quarter or more is worth the system call. */
  bool bulk = c->cfg.uplink != NULL && c->cfg.uplink->bulk;
  uint32_t want = (uint32_t)wire_rate_bytes(
      c->tx_rate, WIRE_UNSENT_MS, WIRE_NOTSENT_MIN_BYTES,
      bulk ? WIRE_NOTSENT_BULK_BYTES : WIRE_NOTSENT_LOWAT_BYTES);
  if ((uint64_t)want * 4u < (uint64_t)c->unsent_limit * 3u ||
      (uint64_t)want * 3u > (uint64_t)c->unsent_limit * 4u)
    wire_rate_set_unsent(c, want);
}
