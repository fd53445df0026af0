/* slot_share.h - how many of a node's upload slots its neighbours that
 * read from S3 may hold at once, pure.
 *
 * A node reading a chunk from S3 (it said HAVE "p" with "s") is one of
 * the few that bring new chunks into the swarm. At a cluster-wide start
 * those few join first, are named to each other first and fill each
 * other's upload slots: in the model at 48 nodes the six S3 readers
 * spent almost all their uploads on each other, so three of the six
 * chunks then arriving reached few others, and the fetching nodes'
 * downlinks ran at half their rate for 3 s (docs/scale.md, session 31). So
 * they get no more than their share of a node's slots: the slots times
 * the share of its ready neighbours that read from S3, rounded down, and
 * at least one. In a small swarm, where most nodes read from S3, that is
 * nearly every slot; in a large one, one or two. Not for a release with
 * stripe trees (upload.c): there the tracker names who serves whom.
 *
 * Here rather than in upload.c so that tools/sim (docs/scale.md) makes
 * the very same choice. No state. Thread: any.
 */
#ifndef PEER_SWARM_SLOT_SHARE_H
#define PEER_SWARM_SLOT_SHARE_H

/* The slots, of slots in all, that neighbours reading from S3 may hold
 * when s3_nbrs of ready_nbrs ready neighbours read from S3. */
unsigned peer_slot_share_s3(unsigned slots, unsigned s3_nbrs,
                            unsigned ready_nbrs);

#endif
