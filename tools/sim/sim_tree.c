/* sim_tree.c - ws-sim's side of the tracker's stripe trees (--stripes).
 *
 * The tracker (trk_tree.c, linked) names each node's parent in every
 * stripe and leases a stripe's chunks to its root; this re-states the
 * peer's rule (picker.c, picker_tree_mask): chunk g is asked of the
 * node's parent in stripe g % K while that parent is a ready neighbour
 * that feeds it; of anyone where the node is the root, without trees,
 * when PEER_TREE_GRACE_MS after the trees came the parent is not one, or
 * while the parent has offered none of the stripe's chunks the node lacks
 * for PEER_TREE_GRACE_MS.
 */
#include "sim.h"

bool sim_tree_may_ask(const sim_t *s, uint32_t client, uint32_t server,
                      uint32_t g) {
  const sim_node_t *n = &s->nodes[client];
  if (n->ntree == 0)
    return true;
  uint32_t p = n->tparent[g % n->ntree];
  if (p == SIM_NONE || p == server ||
      s->now - n->tree_fed_s[g % n->ntree] >= PEER_TREE_GRACE_MS / 1000.0)
    return true;
  for (uint32_t k = 0; k < n->nconn; k++) {
    const sim_conn_t *c = &s->conns[n->conns[k]];
    if (c->server == p && c->up && !c->closed)
      return false;
  }
  return s->now - n->tree_s >= PEER_TREE_GRACE_MS / 1000.0;
}
