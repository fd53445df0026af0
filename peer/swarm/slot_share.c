/* slot_share.c - the upload slots neighbours reading from S3 may hold
 * (slot_share.h). Pure. Thread: any.
 */
#include "swarm/slot_share.h"

unsigned peer_slot_share_s3(unsigned slots, unsigned s3_nbrs,
                            unsigned ready_nbrs) {
  if (ready_nbrs == 0 || s3_nbrs >= ready_nbrs)
    return slots;
  unsigned share = (unsigned)((unsigned long long)slots * s3_nbrs / ready_nbrs);
  return share > 0 ? share : 1u;
}
