/* trk_config.h - every tunable of p2p-tracker, in one place.
 *
 * Units are in the names. Caps bound everything a remote party can grow:
 * peers, swarms, members per swarm, swarms per peer, chunks per swarm,
 * leases per peer, announce rate, wanted releases, string lengths. The
 * reasoning behind the lease numbers is in docs/tracker.md.
 */
#ifndef TRK_CONFIG_H
#define TRK_CONFIG_H

/* Wire caps come from proto.h: a value the protocol lets a peer send is
 * one the tracker takes, so a release p2pd may announce is never refused
 * for a cap the two sides disagree on (docs/protocol.md "Limits"). */
#include "proto.h"

/* --- peers ------------------------------------------------------------ */
/* Connected peers, whole tracker: the default of --max-peers, and the
 * most it may be (a peer id packs a 16-bit slot). Each peer also costs
 * TRK_PEER_CONN_BYTES of connection buffers; the sum counts against
 * --max-memory (TRK_MAX_STATE_BYTES), so a tracker with less memory set
 * aside refuses peers before this cap (docs/tracker.md "Capacity"). */
#define TRK_MAX_PEERS 16384u
#define TRK_MAX_PEERS_MAX 65534u
/* What one connected peer costs outside its swarm memberships: the
 * wire_conn with libuv's handle (2.8 KiB), its frame reader's 4 KiB
 * buffer, and the heap around them; an idle connection holds no read
 * buffer (proto/wire_conn_io.c). An estimate from tools/bench tracker:
 * 10,000 nodes in 4 releases peaked at 119 MiB (124 MB), of which about 41 MB
 * were memberships and peer records and a few MB the process itself, so about
 * 7.5 KiB per connection, rounded up (docs/benchmarks.md "Tracker
 * capacity"). Replies queued for a peer that does not read them are
 * bounded by TRK_CONN_WRITE_QUEUE_MAX instead. */
#define TRK_PEER_CONN_BYTES (8u << 10)
/* Releases one peer may join: the default of --max-releases-per-node,
 * and the most it may be set to (every release the tracker tracks). The
 * join table costs 16 bytes per slot; it starts at TRK_PEER_JOIN_SLOTS_MIN
 * slots and doubles as the peer joins more, up to this cap, while the
 * memory budget keeps room for every slot (TRK_MAX_STATE_BYTES). The
 * memberships themselves count against it too. p2pd announces what fits,
 * in-progress releases first, and fetches a refused one from S3
 * (docs/operations.md). */
#define TRK_MAX_SWARMS_PER_PEER 64u
#define TRK_PEER_JOIN_SLOTS_MIN 4u
#define TRK_MAX_SWARMS_PER_PEER_MAX TRK_MAX_SWARMS
#define TRK_NODE_ID_MAX ((unsigned)WS_NODE_ID_MAX) /* bytes, without NUL */
#define TRK_ADDR_MAX 64u /* listen host text (an IP literal), without NUL */
#define TRK_ZONE_MAX ((unsigned)WS_ZONE_MAX) /* zone label, without NUL */
#define TRK_ANNOUNCE_BURST 20u        /* token bucket depth (announces) */
#define TRK_ANNOUNCE_PER_S 4u         /* token refill rate */
#define TRK_ANNOUNCE_INTERVAL_MS 5000 /* interval the reply asks peers for */
/* Node ids one remote address may hold at once: the default of
 * --max-nodes-per-addr, and its largest value. A keyed client on one host
 * cannot fill the registry, nor confirm its own have-claims from a crowd of
 * ids (docs/tracker.md "Weighing have-claims"); nodes that reach the
 * tracker through one NAT address need it raised. Loopback addresses are
 * exempt: processes on the tracker's own host, whom it cannot tell apart
 * (tests, a single-host install). A node id is bound to the address it
 * connected from while that connection lives: the same id from another
 * address is refused, not swapped in. */
#define TRK_MAX_NODES_PER_ADDR 8u
#define TRK_MAX_NODES_PER_ADDR_MAX TRK_MAX_PEERS_MAX

/* --- swarms ----------------------------------------------------------- */
#define TRK_MAX_SWARMS 256u /* distinct digests tracked */
/* How long a swarm stays listed once its last member has left (an ended
 * swarm, trk_swarms.h): the dashboard and /api/v1/swarms keep its departed
 * members' rows and errors that long, unless a new swarm needs its place. */
#define TRK_SWARM_ENDED_MS (15u * 60u * 1000u)
/* Peers per swarm: the default of --max-members (every peer may join a
 * release), and the most it may be. */
#define TRK_MAX_MEMBERS TRK_MAX_PEERS
#define TRK_MAX_MEMBERS_MAX TRK_MAX_PEERS_MAX
/* Chunks per release: the wire's cap. A swarm's per-chunk arrays and its
 * members' have-bitfields count against TRK_MAX_STATE_BYTES, so memory
 * stays bounded whatever the releases' sizes. */
#define TRK_MAX_CHUNKS ((uint32_t)WS_MAX_TOTAL_CHUNKS)
/* Swarm and member state plus every peer's records and connection
 * (TRK_PEER_CONN_BYTES): the default of --max-memory. At the cap a new
 * peer or membership is refused with a reason (ERROR). */
#define TRK_MAX_STATE_BYTES (512ull << 20)
#define TRK_MAX_STATE_BYTES_MIN (1ull << 20)
#define TRK_MAX_STATE_BYTES_MAX (1ull << 40)
#define TRK_URI_MAX ((unsigned)WS_URI_MAX) /* release URI, without NUL */

/* --- origin leases ---------------------------------------------------- */
/* A lease lives this long unless renewed; a holder renews while bytes
 * arrive, so a stalled or dead holder loses its chunks after one TTL. */
#define TRK_LEASE_TTL_MS 15000u
/* Origin fetches of one swarm. The tracker aims for about
 * TRK_ORIGIN_INFLIGHT_TARGET fetches at once (--origin-inflight sets it).
 * Fewer downloaders than that share it: each gets ceil(target / n),
 * clamped to [TRK_LEASES_PER_PEER_MIN, TRK_LEASES_PER_PEER_MAX], plus
 * TRK_LEASE_SPARE (below). One lone peer gets 6 + 1 (parallel ranged
 * GETs), four peers 2 + 1 each, eight peers 1 + 1 each. With at least
 * twice as many downloaders as the target (TRK_LEASE_SHARED_FACTOR) the
 * swarm holds the target in all, one lease per member and no spare, and
 * a member that had one of the last TRK_LEASE_ROTATE grants
 * waits while others may take it (trk_lease.c). Fewer fetches at once
 * finish each chunk sooner (the origin's rate is shared by all of them),
 * and a chunk leaves its first holder fast only while that holder has the
 * uplink to itself: at U = B a swarm moves every byte through the uplinks
 * of the nodes that read it from S3 first. When every downloader held a
 * lease (one each at least, the rule before), 48 nodes ran 32 S3 GETs at
 * 1/32 of the origin's link each, the first chunk was whole at 17 s and
 * every node's downlink ran at 30-40 % until then; in the simulator
 * (docs/scale.md) the target of 6 spread in turn, with p2pd's 4 upload
 * slots, gives 48 nodes 1.37 x T_min instead of 1.93 and 24 nodes 1.22
 * instead of 1.38 (8 gave 1.62 and 1.28); on the bench 24 nodes 1.31
 * instead of 1.68 (docs/benchmarks.md, session 14). */
#define TRK_LEASES_PER_PEER_MIN 1u
/* Leases beyond that share a member may hold as spares (up to _MAX): the
 * peer starts a spare when one of its fetches is about to end, so its next
 * GET is already on the way instead of waiting for HAVE, the tracker's
 * reply and the origin's first byte (~40 ms per chunk on the benchmark,
 * 12 % of each fetch's time at N=4, U=B). The reply tells the peer how
 * many to run at full rate ("streams"). */
#define TRK_LEASE_SPARE 1u
#define TRK_LEASES_PER_PEER_MAX 8u
#define TRK_ORIGIN_INFLIGHT_TARGET 6u
/* In such a swarm, a member granted one of the last
 * min(TRK_LEASE_ROTATE, downloaders - target) leases gets none while that
 * holds, so the S3 reads, and the first uploads of what they bring, go
 * round the swarm instead of to whichever member asks again first (the
 * one that just finished a chunk). In the simulator at 48 nodes: no
 * rotation 1.57 x T_min, 4 grants 1.54, 8 grants 1.37, 16 grants 1.37. */
#define TRK_LEASE_ROTATE 8u
/* The rule above holds from TRK_LEASE_SHARED_FACTOR x target downloaders;
 * below that each holds its share and a spare as before. Without the
 * spare, each lease ends with a gap on the origin's link (verify, HAVE,
 * the next member's request and its GET's first byte), and with few
 * members to take turns the turn saves less than that costs: at 8 nodes
 * on the bench (100 Mbit/s, U = B) S3 finished at 47.2 and 48.8 s with
 * the rule from 6 downloaders against 45.5 s without it, and the swarm at
 * 1.135 and 1.175 x T_min against 1.099 and 1.105 (docs/benchmarks.md,
 * session 14). */
#define TRK_LEASE_SHARED_FACTOR 2u
/* A peer that announces a release without a chunk count is reading its
 * manifest and joins in a moment. For TRK_JOINING_MS the lease cap counts
 * it as a downloader already, so that in a cluster-wide start the first
 * peer to join does not take every lease: on the netns benchmark (N=4,
 * U=B) the first joiner used to get 7, the last 2, and with 16 fetches
 * sharing the origin's link the first chunk was complete only after ~0.6 s.
 * The same notes choose who reads a manifest nobody holds yet from S3
 * (trk_joining.h). At most TRK_JOINING_MAX such announces are remembered. */
#define TRK_JOINING_MS 2000u
#define TRK_JOINING_MAX 1024u
/* A tracker whose state file (--state) existed at start has restarted, and
 * so has one that a node joins with HELLO "rj" (it had been accepted by a
 * tracker at this address and lost the link) within this long of its
 * start, state file or not (a Deployment's pod is replaced without one):
 * the nodes are reconnecting, each within its own reconnect backoff, and
 * until a holder announces again the tracker counts its chunks as needed
 * and would lease them to whichever node asked first, which then reads
 * from S3 what the holder has (chaos seed 4301: a node restarted while the
 * tracker was down read a whole release again, 3 x F in all). For this
 * long after such a start no origin lease is granted; then every swarm is
 * topped up at once (leases pushed, trk_tracker_tick). */
#define TRK_RESTART_HOLD_MS 10000u
/* Hard cap on concurrent origin fetches of one swarm (S3 request rate). */
#define TRK_ORIGIN_INFLIGHT_MAX 256u
#define TRK_SWEEP_INTERVAL_MS 1000u /* lease expiry sweep */
/* A released chunk is offered to other downloaders before its releaser,
 * for this long; the last few releases per member are remembered. */
#define TRK_LEASE_AVOID_MS 5000u
#define TRK_LEASE_AVOID_SLOTS 4u

/* --- have-claims (docs/tracker.md "Weighing have-claims") ------------ */
/* A member's claims count as holders for lease decisions (a chunk someone
 * holds is not leased) only while believed: always while no other member
 * downloads; otherwise for TRK_CLAIM_GRACE_MS after its trial starts (the
 * first sweep with another downloader around) or after it completes an
 * origin lease on a chunk it never held before, and for
 * TRK_CLAIM_CONFIRM_MS after another member, at another address, reported
 * a verified chunk from it (HAVE "f"). Past that, the chunks only it
 * claims are leased again: a keyed liar claiming everything and serving
 * nothing holds a release up for about the grace, not until every node's
 * stall fallback. The grace covers a downloader's first chunk from a new
 * holder (connect, request, one chunk, HAVE: well under a second on a
 * LAN at 16 MiB chunks); the confirm window two announce intervals. */
#define TRK_CLAIM_GRACE_MS 5000u
#define TRK_CLAIM_CONFIRM_MS 10000u
/* Shortest interval a reply asks for while a claim is being weighed (the
 * downloader comes back for its lease when the grace ends). */
#define TRK_CLAIM_RECHECK_MS 1000u

/* --- replies ---------------------------------------------------------- */
#define TRK_REPLY_PEERS_MAX 32u /* peers in one reply (<= WS_MAX_PEERS) */
/* Stripe trees (trk_tree.c): at most this many stripes; by default
 * (p2p-tracker --stripes) none. */
#define TRK_TREE_MAX 16u
#define TRK_TREE_STRIPES_DEFAULT 0u
/* A new swarm with trees leases nothing for this long unless its trees
 * are on (2 x stripes members), so that its first chunks go to the
 * stripes' roots; and for TRK_TREE_SETTLE_MS its replies ask for an
 * announce every TRK_TREE_INTERVAL_MS, so that members who joined before
 * the trees formed learn them. */
#define TRK_TREE_FORM_MS 2000u
#define TRK_TREE_SETTLE_MS 10000u
#define TRK_TREE_INTERVAL_MS 1000u
#define TRK_REPLY_PEERS_DEFAULT 16u
#define TRK_SELECT_SCAN_MAX 512u /* members examined per selection */
/* A member named by this many replies ranks after those named fewer
 * times, useful or not, unless it is useful and holds 1/TRK_RICH_SHARE_DIV
 * of the release (below; trk_select.c): a reply names 16 and a node dials
 * 8 of them, so about as often as a member's slots can take in. Below it
 * the order is by usefulness, then random: least named first outright
 * chained each joiner to the ones just before it, and the model's 48
 * nodes took 3.5 % longer. */
#define TRK_NAMED_FULL 16u
/* A useful member holding at least 1/TRK_RICH_SHARE_DIV of the release's
 * chunks ranks before the count (trk_select.c): a node joining a swarm
 * long under way, where every holder was named TRK_NAMED_FULL times, is
 * named the holders first, not the other new joiners, who hold nothing.
 * At a cluster-wide start nobody holds that much until every member was
 * named that often (the small files the first joiners hold at once are a
 * few chunks of a model's hundreds). */
#define TRK_RICH_SHARE_DIV 4u

/* --- wanted set -------------------------------------------------------- */
/* Entries (= the wire's WS_MAX_WANTED, so one reply lists them all). When
 * full, a new entry evicts the oldest (docs/operations.md "Wanted set"). */
#define TRK_MAX_WANTED ((unsigned)WS_MAX_WANTED)
/* An entry leaves after this long (--wanted-ttl), and at most this. */
#define TRK_WANTED_TTL_MS (24ull * 3600u * 1000u)
#define TRK_WANTED_TTL_MAX_MS (365ull * 24u * 3600u * 1000u)

/* --- peer protocol listener (trk_server.c) ---------------------------- */
/* Refused nodes and connections are counted (metrics) and logged at most
 * once per this interval, with how many and why. */
#define TRK_REFUSAL_LOG_MS 10000u
#define TRK_MAX_PREAUTH_CONNS 128u          /* connections still handshaking */
#define TRK_HANDSHAKE_TIMEOUT_MS 10000u     /* accept -> both AUTHs checked */
#define TRK_CONN_IDLE_TIMEOUT_MS 60000u     /* no byte either way */
#define TRK_CONN_CLOSE_GRACE_MS 5000u       /* flush before a forced close */
#define TRK_CONN_WRITE_QUEUE_MAX (1u << 20) /* unsent reply bytes per conn */
#define TRK_CONN_FRAMES_PER_S 2000u         /* then reading pauses a second */
#define TRK_NODE_NAME "p2p-tracker"         /* our HELLO node id */

/* --- dashboard statistics (trk_stats.c; docs/tracker.md "Dashboard") -- */
#define TRK_STATS_SAMPLES 600u    /* history ring per release: one per tick */
#define TRK_STATS_STUCK_MS 30000u /* downloader without a new chunk: stuck */
#define TRK_STATS_RATE_SAMPLES 5u /* samples a node's current rate spans */
#define TRK_STATS_GONE_MAX 32u    /* departed members remembered per release */
#define TRK_STATS_CHART_NODES 16u /* per-node series in one swarm document */
#define TRK_STATS_ERR_MAX 256u    /* last error text, without NUL */

/* --- HTTP API (trk_http.c) --------------------------------------------- */
#define TRK_HTTP_BODY_MAX (16u << 10) /* POST body bytes */
#define TRK_HTTP_MAX_CONNS 64u

/* --- --metrics listener (trk_metrics.c) -------------------------------- */
#define TRK_METRICS_MAX_CONNS 16u
#define TRK_METRICS_BODY_MAX 1024u /* no route reads a body */
#define TRK_METRICS_SWARMS_MAX 32u /* swarms with labels of their own */
#define TRK_METRICS_LABEL_MAX 64u  /* bytes of a model label value */

_Static_assert(TRK_REPLY_PEERS_MAX <= WS_MAX_PEERS, "reply peers");
_Static_assert(TRK_TREE_MAX <= WS_MAX_TREE, "reply tree");
_Static_assert(TRK_LEASES_PER_PEER_MAX <= WS_MAX_LEASES, "reply leases");
_Static_assert(TRK_MAX_SWARMS_PER_PEER <= TRK_MAX_SWARMS_PER_PEER_MAX,
               "releases per node");

#endif
