/* wire_uplink.h - one node's upload link, shared by the connections that
 * upload over it: their sockets are paced so that together they send no
 * faster than the link's rate.
 *
 * Why: a node's NIC queue holds its uploads and the ACKs of its downloads
 * alike. Behind a plain FIFO (no fq_codel, no priority for small packets)
 * each upload's TCP keeps the queue full (BBR adds up to 100 ms of its
 * rate for ACKs that come in bursts), every ACK of every download waits
 * behind it, and the node's downloads slow to a fraction of its link.
 * Bytes that never queue at the NIC leave room for the ACKs. A token
 * bucket before the sockets (--upload-rate alone) does not do it: the
 * kernel still sends what it was given in bursts at the rate its
 * congestion control paces at, far above the link's; the kernel's own
 * pacing (SO_MAX_PACING_RATE) spreads them out. Measured on the benchmark
 * (docs/benchmarks.md, session 36).
 *
 * How: a connection is "backlogged" while it had more queued after a write
 * completed (wire_conn_rate.c). Each backlogged connection's socket gets
 * SO_MAX_PACING_RATE = WIRE_UPLINK_OVER_PCT % of rate / backlogged (at
 * most rate), set again at its next write when the count changed.
 * Connections with nothing queued keep the pace they last had; they send
 * little. The shares add up to a quarter more than the rate because some
 * connections cannot take theirs (the receiver's link is full): split
 * exactly, what they leave is lost, and 8 nodes sharing 100 Mbit/s links
 * finished 1-4 % later than unpaced; with the quarter about 1 %, and the
 * FIFO case keeps its gain (docs/benchmarks.md, session 36).
 *
 * Bulk: while the node sends no frame anyone waits for (p2pd: it fetches
 * nothing, so it sends no HAVE or REQUEST; a seed), its connections let
 * the kernel hold up to WIRE_NOTSENT_BULK_BYTES unsent instead of
 * WIRE_NOTSENT_LOWAT_BYTES (each still about WIRE_UNSENT_MS of its rate,
 * wire_conn_rate.c), and p2pd sends its held chunks in larger pieces.
 * Fewer, larger sends cost a fast seed a quarter of the CPU per byte; a
 * node that fetches keeps the small limit, because every HAVE and REQUEST
 * it sends waits behind those bytes, and in the model (docs/scale.md) the
 * large limit on every node made 100 nodes at 25 Gbit/s 11 % slower
 * (docs/benchmarks.md, session 37).
 *
 * Owner: whoever embeds it (p2pd's neighbour set); connections borrow it
 * through wire_conn_cfg_t.uplink and leave it when they are freed.
 * Thread: the loop thread of its connections.
 */
#ifndef WIRE_UPLINK_H
#define WIRE_UPLINK_H

#include <stdbool.h>
#include <stdint.h>

#define WIRE_UPLINK_OVER_PCT 125u

typedef struct {
  uint64_t rate;       /* bytes/s over all its connections; 0 = unpaced */
  uint32_t backlogged; /* connections now backlogged */
  bool bulk;           /* no frame of the node is urgent (above) */
} wire_uplink_t;

/* An uplink of bytes_per_s (0: its connections are not paced), not bulk. */
void wire_uplink_init(wire_uplink_t *u, uint64_t bytes_per_s);
/* The node's frames are urgent (false) or not (true); its connections
 * take the new limit at their next rate sample. */
void wire_uplink_set_bulk(wire_uplink_t *u, bool bulk);
/* The pacing rate each backlogged connection gets now:
 * WIRE_UPLINK_OVER_PCT % of rate / backlogged, at most rate (all of it
 * for one or none), 0 when unpaced. */
uint64_t wire_uplink_share(const wire_uplink_t *u);

#endif
