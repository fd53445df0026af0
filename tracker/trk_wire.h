/* trk_wire.h - the wire's ANNOUNCE in the tracker core's terms.
 *
 * One conversion, used by the connection handler (trk_server_msg.c) and by
 * the announce fuzz target, so what is fuzzed is what the server runs.
 * Thread: any; pure.
 */
#ifndef TRK_WIRE_H
#define TRK_WIRE_H

#include "proto.h"
#include "trk_tracker.h"

/* Fills *ta from the decoded announce a (pointers borrowed from a, which
 * must outlive ta): digest, uri, chunk count, role, have bitfield and
 * delta, leases wanted, leave, the node's report and its stuck chunks. */
void trk_announce_from_wire(const ws_announce_t *a, trk_announce_t *ta);

#endif
