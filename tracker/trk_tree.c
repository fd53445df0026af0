/* trk_tree.c - stripe trees: whose chunks a member asks of whom, and who
 * fetches each stripe from the origin. Off by default (p2p-tracker
 * --stripes K): an experiment, measured in docs/benchmarks.md.
 *
 * With K stripes and at least 2K members, chunk c belongs to stripe c % K.
 * Members are taken in blocks of K by index (block b: b*K .. b*K + K - 1).
 * In stripe s, member b*K + s is inside the tree: its parent is the same
 * member of the block before (member s, the root, has none), so those
 * members form a chain; the block's other members are its leaves. Every
 * member is thus inside one tree and a leaf of the others, and sends its
 * stripe to K children (the next in its chain and its K - 1 block mates;
 * up to 2K - 1 when the last block is short, whose members take the
 * stripes it lacks from the last full block). A member's parents do not
 * depend on how many members there are, so a join changes no one's tree
 * but the joiner's (and a short last block's). The root is the only
 * member leased its stripe's chunks, one at full rate and a spare, in
 * index order; a chunk whose lease ended unfinished (expired, given back)
 * is "loose" and may go to anyone, as may every chunk of a stripe whose
 * root does not fetch from the origin. A new swarm leases nothing for
 * TRK_TREE_FORM_MS while it has too few members for trees, and asks for
 * announces every TRK_TREE_INTERVAL_MS while it is young, so that the
 * first chunks go to the roots and the first members learn their trees.
 * The announce reply names the member's parent in each stripe ("tree",
 * docs/protocol.md) and lists the parents first among its peers, so the
 * member dials them; p2pd asks a stripe's chunks of its parent in it while
 * that parent is a neighbour (picker.c).
 *
 * Each member then receives every stripe from one parent at 1/K of its
 * link and sends its own to K children, so every link carries K long
 * flows and a chunk reaches every node a few pieces after its root's GET:
 * SplitStream's forest (Castro et al., SOSP 2003) over the tracker's
 * member list, with chains instead of K-ary trees (depth members / K, not
 * log_K members: fine for tens of nodes, not for thousands). See
 * docs/tracker.md "Stripe trees" for what it gains in the simulator and
 * loses on the benchmark's links.
 *
 * Members are swap-removed (trk_swarm.c), so a leave changes the trees of
 * the member moved; the next reply says so. Loop thread only.
 */
#include "trk_swarm-int.h"

void trk_swarm_set_tree(trk_swarm_t *s, uint32_t stripes) {
  s->tree_k = stripes < TRK_TREE_MAX ? stripes : TRK_TREE_MAX;
}

uint32_t trk_tree_stripes(const trk_swarm_t *s) {
  uint32_t k = s->tree_k;
  return k >= 2u && s->nmembers >= 2u * k ? k : 0u;
}

const trk_member_t *trk_tree_parent(const trk_swarm_t *s, const trk_member_t *m,
                                    uint32_t st) {
  uint32_t k = trk_tree_stripes(s), i = m->idx;
  if (k == 0 || st >= k || i == st)
    return NULL;
  /* Block b = i / k holds the members b*k .. b*k + k - 1; its member
   * b*k + st is inside stripe st's tree, the others are its leaves. */
  uint32_t j = (i / k) * k + st;
  if (i == j || j >= s->nmembers)
    j -= k; /* the chain's previous, or the last full block's */
  return s->members[j];
}

bool trk_tree_may_lease(const trk_swarm_t *s, const trk_member_t *m,
                        uint32_t c) {
  uint32_t k = trk_tree_stripes(s);
  if (k == 0 || m->idx == c % k || trk_bits_get(s->loose, c))
    return true;
  const trk_member_t *root = s->members[c % k];
  return !trk_member_is_downloader(s, root) || root->want_leases == 0;
}

void trk_tree_loosen(trk_swarm_t *s, uint32_t c) {
  if (s->tree_k != 0 && !trk_bits_get(s->loose, c)) {
    trk_bits_set(s->loose, c);
    s->nloose++;
  }
}

bool trk_tree_leases_none(const trk_swarm_t *s, const trk_member_t *m) {
  uint32_t k = trk_tree_stripes(s);
  if (s->tree_k != 0 && k == 0 && s->now_ms - s->created_ms < TRK_TREE_FORM_MS)
    return true; /* a new swarm: its trees may form in a moment */
  if (k == 0 || m->idx < k || s->nloose > 0)
    return false; /* no tree, a root, or loose chunks to lease */
  for (uint32_t st = 0; st < k; st++)
    if (trk_tree_may_lease(s, m, st))
      return false; /* a root that does not fetch: its stripe is anyone's */
  return true;
}

static bool listed(const trk_peer_t *const *peers, uint32_t n,
                   const trk_peer_t *p) {
  for (uint32_t i = 0; i < n; i++)
    if (peers[i] == p)
      return true;
  return false;
}

uint32_t trk_tree_reply(const trk_swarm_t *s, const trk_member_t *m,
                        const trk_peer_t **tree, const trk_peer_t **peers,
                        uint32_t *npeers, uint32_t *interval_ms) {
  uint32_t k = trk_tree_stripes(s), n = 0;
  if (s->tree_k != 0 && s->now_ms - s->created_ms < TRK_TREE_SETTLE_MS)
    *interval_ms = TRK_TREE_INTERVAL_MS; /* members may join still */
  const trk_peer_t *first[TRK_TREE_MAX];
  for (uint32_t st = 0; st < k; st++) {
    const trk_member_t *p = trk_tree_parent(s, m, st);
    tree[st] = p != NULL ? p->peer : NULL;
    if (p != NULL && p->peer->port != 0 && !listed(first, n, p->peer))
      first[n++] = p->peer;
  }
  if (n == 0)
    return k;
  /* The parents first, then the selection without them, within the cap. */
  const trk_peer_t *rest[TRK_REPLY_PEERS_MAX];
  uint32_t nrest = 0;
  for (uint32_t i = 0; i < *npeers; i++)
    if (!listed(first, n, peers[i]))
      rest[nrest++] = peers[i];
  for (uint32_t i = 0; i < n; i++)
    peers[i] = first[i];
  for (uint32_t i = 0; i < nrest && n < TRK_REPLY_PEERS_MAX; i++)
    peers[n++] = rest[i];
  *npeers = n;
  return k;
}
