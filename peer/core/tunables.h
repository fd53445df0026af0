/* tunables.h - every tunable of p2pd in one place, so that none hides in
 * the code as a bare number; units are in the names. Operator-facing
 * settings (flags, env, config file) have their defaults here too;
 * config.c applies them. Constants only: no state, any thread.
 */
#ifndef PEER_CORE_TUNABLES_H
#define PEER_CORE_TUNABLES_H

/* ---- defaults of operator settings ------------------------------------ */

/* S3 ranged GETs in flight (--s3-concurrency / P2P_S3_CONCURRENCY). */
#define PEER_S3_CONCURRENCY_DEFAULT 16u
#define PEER_S3_CONCURRENCY_MAX 256u
/* S3 client slots beyond the chunk GETs, so that a manifest GET does not
 * queue behind a release's chunk transfers. */
#define PEER_S3_CONTROL_SLOTS 4u
/* Local API socket when neither --api nor P2P_API is given. */
#define PEER_API_SOCKET_DEFAULT "/run/weightswarm/p2pd.sock"
/* Mode of the API socket: group members (e.g. an inference pod's init
 * container sharing the group) may call it. */
#define PEER_API_SOCKET_MODE 0660
/* The config file is read whole before the loop starts. */
#define PEER_CONFIG_FILE_MAX_BYTES (1024u * 1024u)

/* ---- threads ---------------------------------------------------------- */

/* libuv worker threads (UV_THREADPOOL_SIZE when the environment does not
 * set it). Workers hash 16 MiB chunks (~25 ms each) and do the store's
 * fdatasync; a few more than cores keeps hashing going while others sit in
 * fdatasync. */
#define PEER_THREADPOOL_SIZE 8

/* ---- inbound data path (memory bound: PEER_BUF_BYTES * PEER_BUF_COUNT) - */

/* One buffer of chunk bytes (from S3 or a neighbour) on its way to the
 * partial file. */
#define PEER_BUF_BYTES (256u * 1024u)
/* A buffer that has waited PEER_BUF_FORWARD_MS since its first byte is
 * written once it holds PEER_BUF_FORWARD_MIN_BYTES, without waiting to be
 * full: what is written is what a neighbour fetching the chunk from us
 * while it arrives may have, so on a slow transfer whole buffers held each
 * hop of a chain a buffer's time behind the one before (256 KiB at 4
 * Mbit/s: 0.5 s a hop). A transfer fast enough to fill a buffer within
 * the wait is written as before, in whole buffers. */
#define PEER_BUF_FORWARD_MS 20u
#define PEER_BUF_FORWARD_MIN_BYTES (32u * 1024u)
/* Buffers in the pool: 64 x 256 KiB = 16 MiB in all, whatever the release
 * size or the number of transfers. */
#define PEER_BUF_COUNT 64u
/* A chunk whose hash fails is refetched at most this many times before its
 * file (and the releases waiting on it) fail with WS_EDIGEST. */
#define PEER_CHUNK_RETRIES_MAX 3u
/* Whole-file mode: a file whose sha256 fails is refetched entirely this
 * many times. */
#define PEER_FILE_DIGEST_RETRIES_MAX 1u
/* Files indexed by sha256 for sharing between releases. */
#define PEER_FILE_HASH_BUCKETS 4096u

/* ---- releases and the local API --------------------------------------- */

/* manifest.json is buffered while it is fetched; bigger ones fail. */
#define PEER_MANIFEST_MAX_BYTES (64u * 1024u * 1024u)
/* Releases being resolved or fetched at once (prefetch answers 503). */
#define PEER_ACTIVE_RELEASES_MAX 64u
/* Requests parked on one release (prefetch replies and waits). */
#define PEER_WAITERS_PER_RELEASE_MAX 1024u
/* GET .../wait without timeout_ms, and the largest accepted. */
#define PEER_WAIT_TIMEOUT_DEFAULT_MS (300u * 1000u)
#define PEER_WAIT_TIMEOUT_MAX_MS (7u * 24u * 3600u * 1000u)
#define PEER_API_MAX_BODY_BYTES (64u * 1024u)
#define PEER_API_MAX_CONNS 256u
/* Parked wait requests send nothing for a long time; the idle timeout of
 * the API must not cut them. */
#define PEER_API_IDLE_TIMEOUT_MS (8u * 24u * 3600u * 1000u)
/* The --metrics listener (read-only, scraped every few seconds): its
 * connections, request bodies (none are read), and how many releases get
 * series of their own; the rest are summed under model="other". */
#define PEER_METRICS_MAX_CONNS 16u
#define PEER_METRICS_MAX_BODY_BYTES 1024u
#define PEER_METRICS_IDLE_TIMEOUT_MS (60u * 1000u)
#define PEER_METRICS_RELEASES_MAX 16u
#define PEER_METRICS_LABEL_MAX 64u /* bytes of a model label value */
/* Subdirectory of the cache holding one record per release being
 * fetched, so that a restart resumes it. Owned by p2pd, not the store. */
#define PEER_JOBS_DIR "p2pd-jobs"
#define PEER_JOB_FILE_MAX_BYTES (64u * 1024u)

/* ---- swarm mode (--listen / --tracker) -------------------------------- */

/* Neighbour connections (ready or handshaking), both directions
 * (--max-neighbors / P2P_MAX_NEIGHBORS). */
#define PEER_MAX_NEIGHBORS_DEFAULT 16u
#define PEER_MAX_NEIGHBORS_MAX 256u
/* Extra accepted connections still handshaking beyond the neighbour cap:
 * a handshake is cheap, and this bounds what an unauthenticated client can
 * hold. */
#define PEER_PREAUTH_MAX 16u
/* Releases one neighbour may tell us about (have-bitfields kept). */
#define PEER_NBR_RELEASES_MAX 16u
/* Chunk requests in flight to one neighbour. The server streams held
 * chunks one after the other, so a second keeps its link busy between
 * chunks; a third only waits in its queue, where its chunk is asked of
 * nobody else meanwhile (the likely reason fewer wins; one debug run of
 * each did not show it hop by hop). Depth 2 against 3, interleaved on
 * the netns benchmark (docs/benchmarks.md, session 32): 24 nodes 1.198 x
 * T_min against 1.222 (median of six, better in every pair), 48 nodes
 * 1.300 against 1.350 (three); the model agreed (docs/scale.md).
 * Sessions 4-7, before pieces were served onwards as they arrive and with
 * up to 16 requests over all: depth 2 gave N=4, U=B 1.10-1.11 x T_min and
 * N=8, U=4B 1.12, depth 3 1.10-1.13 and 1.085.
 * The most: one each (peer_picker_depth, picker.c) while PEER_REQS_MAX
 * neighbours or more in a swarm of ours are ready and chunks come slowly
 * (below), so that the requests go to as many neighbours as there are
 * requests and none waits second in a queue while another neighbour
 * idles. Bench, interleaved (session 33): 48 nodes 1.312 x T_min against
 * 1.338, 24 nodes 1.191 against 1.215, fifo 1.388 against 1.404 (medians
 * of three, better or equal in every pair). With fewer neighbours two
 * keep the downlink full (the model's 8-node swarms lost with one: up to
 * 1.21). Neighbours that swap only other releases cannot take our
 * requests and do not count (session 34). */
#define PEER_PIPELINE_DEPTH 2u
/* ...and only while a whole chunk takes this long or more at the typical
 * rate chunks come from neighbours (peer_neighbors_t.rx_bps). In the
 * model at 25 Gbit/s (16 MiB chunks in ~20 ms) one request per neighbour
 * everywhere starved the nodes that fell behind: most of their
 * neighbours refused them busy (each then not asked for
 * PEER_BUSY_RETRY_MS) and they had one to three requests out where two
 * per neighbour kept eight; 100 nodes x 140 GB 1.59 x T_min against 1.08,
 * though the median node gained (docs/scale.md, session 33). Where a
 * chunk takes longer than that wait, as on the bench's links (0.5-3 s),
 * one per neighbour gained (above).
 * One deep, a neighbour whose chunk is arriving here counts as asked
 * (peer_picker_fill): it is asked again once that chunk is whole. A
 * neighbour uploading to us with PEER_UPLOADS_MAX - PEER_UPLOADS_SPARE
 * slots taken keeps our next request queued until one ends (upload.c),
 * mostly the end of the chunk it sends us: at 48 nodes 35 % of the
 * requests waited there over 0.3 s, 0.74-0.84 s on average, their chunks
 * asked of nobody else meanwhile, while other senders had free slots
 * (0.62 of 6 idle per host) and each chunk arriving filled about one
 * sixth of a host's downlink. Asked elsewhere instead (session 46,
 * interleaved): 48 nodes 1.244 x T_min (median of 7) against 1.267, fifo
 * 1.334 against 1.355, 24 nodes 1.187 against 1.165 (three each); with
 * the last 250 ms of such a chunk left out, 48 nodes 1.2515 (six), 24
 * nodes 1.153 (docs/benchmarks.md). */
#define PEER_DEPTH_ONE_CHUNK_MS PEER_BUSY_RETRY_MS
/* Chunk requests in flight over all neighbours at once (each neighbour
 * still PEER_PIPELINE_DEPTH at most). With 16 neighbours x 3 (the depth
 * then), up to 48 chunks shared one download link: at 48 nodes on 16
 * Mbit/s links each came at ~40 KiB/s, under the progress deadline's
 * floor, so healthy neighbours were cut as slow, and a chunk took that
 * long to become servable onwards. With 8, busy refusals at 24 nodes fell
 * from 1,774-3,043 to 95-234 per run and chunks thrown away from 398-579
 * to 127-188, at the same T_all (docs/benchmarks.md). */
#define PEER_REQS_MAX 8u
/* Chunk requests a neighbour may queue with us; more get REJECT busy. */
#define PEER_SERVE_QUEUE_MAX 16u
/* Chunks being uploaded at once over all neighbours (each holds
 * PEER_SERVE_BUFS buffers of PEER_SERVE_PIECE_BYTES while its chunk
 * arrives, none when it is held: it goes from the file). Few, so that each
 * goes fast: a chunk a node holds alone (just read from S3) is whole at
 * its first neighbour in a quarter of the uplink's time for 4 chunks,
 * and that neighbour serves it on; sixteen uploads at once sent one chunk
 * to up to sixteen neighbours at 1/16 of the uplink each, and nobody held
 * it whole for 16 chunk-times (BitTorrent unchokes 4 for the same reason).
 * With the tracker's rotating origin leases (tracker/trk_config.h), in the
 * simulator: 48 nodes 1.37 x T_min (16 slots: 1.78), 24 nodes 1.22
 * (1.53), 8 nodes 1.08 (1.07), 4 nodes 1.06 (1.08); 8 slots were worse
 * at 48 and 24 nodes, 3 at 24 (docs/benchmarks.md, session 14).
 * Six since session 19: with chunks written onwards in small pieces
 * (PEER_BUF_FORWARD_MS) most uploads are of chunks still arriving, each
 * paced by its source, and four such at the pace of one of S3's six GETs
 * (U/6) fill two thirds of the uplink at most. Six, two of them spare:
 * simulator 48 / 24 / 8 nodes 1.285 / 1.185 / 1.079 against 1.321 /
 * 1.208 / 1.089 with four; bench 24 nodes 1.222-1.235 against 1.309-1.311
 * (docs/benchmarks.md, session 19). */
#define PEER_UPLOADS_MAX 6u
#define PEER_SERVE_BUFS 2u
/* Chunks per neighbour and release remembered as arriving there from
 * origin (HAVE "p"): the picker asks for them only when that neighbour has
 * nothing else for us; older ones are forgotten (still held, like any). */
#define PEER_LIVE_MAX 32u
/* Origin fetches listed at once (HAVE "p" to a neighbour that just came):
 * all of them, --s3-concurrency at most. */
#define PEER_ORIGIN_LIST_MAX PEER_S3_CONCURRENCY_MAX
/* A payload piece carries about PEER_SERVE_PIECE_MS at the rate its
 * connection drains (wire_conn_send_rate), between PEER_SERVE_PIECE_MIN
 * (also until the rate is known) and PEER_SERVE_PIECE_BYTES:
 * frames queued behind an upload's pieces wait for them, and two 256 KiB
 * pieces on a 4 Mbit/s share held every HAVE and REQUEST on that
 * connection for a second (48 nodes, 16 Mbit/s; docs/benchmarks.md,
 * session 27). A fast connection keeps large pieces: fewer worker jobs
 * per byte. */
#define PEER_SERVE_PIECE_BYTES (256u * 1024u)
#define PEER_SERVE_PIECE_MIN (32u * 1024u)
#define PEER_SERVE_PIECE_MS 20u
/* While the node fetches nothing (a seed: its uplink is bulk,
 * proto/wire_uplink.h), a piece of a chunk it holds (sent from the file,
 * no buffer) may be this large on a connection fast enough to drain it in
 * PEER_SERVE_PIECE_MS: each piece costs a worker job and a loop wake-up,
 * and with 256 KiB pieces and 128 KiB unsent a clear seed spent 0.53-0.75
 * CPU-s/GiB on loopback against 0.17-0.20 with both at 4 MiB
 * (docs/benchmarks.md, session 37). Under about 100 Mbit/s per connection
 * pieces never reach 256 KiB, so this changes nothing there. */
#define PEER_SERVE_FILE_PIECE_BYTES (4096u * 1024u)
/* Pieces of one upload of a chunk we hold queued on the connection at
 * once (wire_conn_send_file: no buffers): one worker job writes what is
 * queued. As many as the buffered path keeps in flight (PEER_SERVE_BUFS),
 * so frames queued behind wait no longer than before (while the node
 * fetches, when the pieces are as small); 8 lowered the clear seed's CPU
 * a little more on loopback (docs/benchmarks.md, "Cost per byte") but
 * would quadruple that wait on a slow link. */
#define PEER_SERVE_FILE_PIECES 2u
/* retry_after_ms in a REJECT busy. */
#define PEER_BUSY_RETRY_MS 250u
/* Once it has had its turn (PEER_UPLOAD_TURN_MS), the neighbour whose
 * upload just ended does not take the freed slot straight back while
 * another one we upload nothing to was refused a slot within this long (it
 * asks again after PEER_BUSY_RETRY_MS): its queue runs first, so a refused
 * neighbour could wait for ever (a 4-node swarm: a node finished after the
 * one with 60 % of its rate). Anyone else asking while a slot is free gets
 * it (docs/benchmarks.md, session 17). */
#define PEER_SLOT_HOLD_MS (2u * PEER_BUSY_RETRY_MS)
/* How long a neighbour keeps an upload slot for the chunks it has queued
 * with us, back to back, before a refused neighbour's claim comes first.
 * Session 17 gave the slot away after every chunk: each time, the stream
 * on that connection stopped, its queued requests were refused, and the
 * slot sat idle until the refused neighbour asked again (up to
 * PEER_BUSY_RETRY_MS). With turns of 5 s: 8 nodes 1.079-1.099 x T_min
 * against 1.183-1.186; 24 nodes, fifo and 48 nodes within the spread;
 * 2 s did about as well at 8 nodes (docs/benchmarks.md, session 23).
 * BitTorrent rotates the peers it unchokes every 10 s. */
#define PEER_UPLOAD_TURN_MS 5000u
/* A REJECT "not held" (or "release unknown") hides that chunk of that
 * neighbour for at least this long; then it may be asked again. Forgetting
 * it for good left a chunk with no source at all when the refusal was
 * wrong or passing: the tracker still counts the neighbour as a holder, so
 * it leases the chunk to nobody, and the neighbour sends no second HAVE.
 * At most PEER_REJECT_HIDE_MAX chunks per neighbour and release are held
 * for a retry (a neighbour that really dropped a release refuses a few
 * requests every few seconds); beyond that a refused chunk is forgotten. */
#define PEER_REJECT_HIDE_MS 5000u
#define PEER_REJECT_HIDE_MAX 16u
/* Endgame: requests for one chunk at once (the first CHUNK wins, the rest
 * are canceled). */
#define PEER_ENDGAME_DUP_MAX 2u
/* Chunks the picker examines per pick (from a random start), so a pick
 * costs the same whatever the release size. */
#define PEER_PICK_SCAN_MAX 8192u
/* Stripe trees (docs/tracker.md): a stripe's chunks are asked of our
 * parent in it only, unless this long after the tracker named the trees
 * that parent is not a ready neighbour (never reached, or gone), or the
 * parent has offered none of the stripe's chunks we lack for this long:
 * then of anyone. Dialing a parent and the handshake take a few round
 * trips; a stripe's root reads a chunk in about a second on the
 * benchmark's links. */
#define PEER_TREE_GRACE_MS 3000u
/* A request with no CHUNK header after this is canceled and its chunk
 * asked elsewhere; the neighbour has missed (PEER_NBR_BENCH_MS). */
#define PEER_REQUEST_TIMEOUT_MS 30000u
/* Progress deadlines of chunks from neighbours (neighbor_conn.c). Once
 * its CHUNK header came, a chunk must have arrived whole by
 *   start + PEER_CHUNK_GRACE_MS + len / PEER_CHUNK_FLOOR_BPS,
 * and, when another neighbour holds it too, by
 *   start + PEER_CHUNK_GRACE_MS + PEER_CHUNK_SLOW_FACTOR x len / typical,
 * typical being the moving average rate of the chunks that came whole
 * from neighbours (weight 1/PEER_CHUNK_RATE_EWMA per chunk). Time during
 * which we held its reads (--download-rate, no buffer) does not count. The
 * deadline runs from the header, whatever the bytes after it: one byte now
 * and then does not re-arm it. A floor of 128 KiB/s gives a 16 MiB chunk
 * two minutes; the relative one cuts a neighbour 16 times slower than the
 * rest within a few seconds, when someone else can serve the chunk. */
#define PEER_CHUNK_GRACE_MS 3000u
#define PEER_CHUNK_FLOOR_BPS (128u * 1024u)
#define PEER_CHUNK_SLOW_FACTOR 16u
#define PEER_CHUNK_RATE_EWMA 8u
/* A chunk in pieces still arriving at its sender (HAVE "p") is held to
 * the deadline above only from when the sender holds it, for at most this
 * long after its first piece (neighbor_deadline.c). */
#define PEER_CHUNK_LIVE_WAIT_MS 60000u
/* In a file's endgame (none of its chunks left to ask for, only chunks in
 * flight), a chunk from which no byte came for PEER_CHUNK_ENDGAME_STALL_MS
 * (time we held the neighbour's reads not counted) while another neighbour
 * holds it is cut and asked elsewhere, long before its deadline (11 s for
 * 1 MiB at the floor): the last chunks decide when the file is done, and a
 * connection in TCP retransmission backoff delivers nothing for seconds.
 * Pieces come every ~20 ms of their connection's rate (PEER_SERVE_PIECE_MS)
 * and a single retransmission timeout stops one for 200 ms or more. */
#define PEER_CHUNK_ENDGAME_STALL_MS 1500u
/* A neighbour that missed a deadline (or a request timeout) is not asked
 * for anything for PEER_NBR_BENCH_MS; PEER_NBR_MISSES_MAX misses without a
 * chunk delivered between them close it. A chunk sent whole (no "o")
 * cannot be cut short on the wire: missing its deadline closes at once. */
#define PEER_NBR_BENCH_MS 10000u
#define PEER_NBR_MISSES_MAX 2u
/* Neighbour slots: --max-neighbors, plus PEER_NBR_SPARE for a while. When
 * the slots are full, a new connection takes the place of the neighbour
 * idle longest (no chunk or manifest byte either way, no transfer open)
 * if that one has been idle PEER_NBR_IDLE_MS; else it may use a spare
 * slot, and the tick closes idle neighbours until the count is back at
 * --max-neighbors. Idle or hostile connections thus cannot keep a useful
 * one out. */
#define PEER_NBR_SPARE 4u
#define PEER_NBR_IDLE_MS 3000u
/* Connections this node dialed (to nodes the tracker or the address book
 * named) get a slot even when every slot and spare is taken, up to
 * PEER_NBR_DIALED_MIN of them: accepted connections, which anyone with the
 * key can open and reopen as fast as they are closed, cannot fill every
 * slot and keep this node from the nodes it chose (an eclipse). The tick
 * trims the excess from the idle ones. */
#define PEER_NBR_DIALED_MIN 4u
/* A node dials at most 1/PEER_NBR_DIAL_SHARE of --max-neighbors itself
 * (and PEER_NBR_DIALED_MIN at least) and leaves the other slots to the
 * nodes that dial it. When every node dialed all its slots, a cluster-wide
 * start of 48 nodes with 16 slots each tried 768 connections that only
 * about 16 x 48 / 2 could hold: each node's slots filled with its own
 * dials, most dials were refused, connections were replaced as soon as
 * one idled (3,154 connections and 850 replacements in one 80 s run), and
 * a node whose dials all found full nodes had no neighbour at all for
 * 53 s and read its chunks from S3 once it counted as stalled. */
#define PEER_NBR_DIAL_SHARE 2u
/* The slots left to the nodes that dial us are ours to dial too once they
 * have stayed short this long with our share dialed (in effect from the
 * next announce on). At a cluster-wide start the tracker can name only
 * the members already joined, so the last to join are named to few or no
 * later joiners: in a 24-node run six nodes held 8-10 neighbours from the
 * start to their end, and those six finished last (1.34-1.44 x T_min
 * against 1.17-1.22 for the nodes with 16-20; docs/benchmarks.md, session
 * 18). */
#define PEER_NBR_INBOUND_WAIT_MS 3000u
/* Upload slots: the last PEER_UPLOADS_SPARE of PEER_UPLOADS_MAX go only to
 * a neighbour that holds none, so a few connections cannot take them all.
 * A neighbour holding upload slots whose socket took no byte for
 * PEER_UPLOAD_STALL_MS (PEER_UPLOAD_STALL_BUSY_MS while another neighbour
 * was refused a slot) is closed: it requests and does not read. */
#define PEER_UPLOADS_SPARE 2u
#define PEER_UPLOAD_STALL_MS 30000u
#define PEER_UPLOAD_STALL_BUSY_MS 5000u
/* A sender whose chunk fails its hash is refused for this long. */
#define PEER_BAN_MS (30u * 60u * 1000u)
#define PEER_BANS_MAX 256u
/* Housekeeping tick: request timeouts, lease renewals, fallback check. */
#define PEER_SWARM_TICK_MS 1000u
/* Origin leases are renewed this often (tracker TTL is 15 s). */
#define PEER_LEASE_RENEW_MS 5000u
/* Leases remembered per release. */
#define PEER_LEASES_MAX 64u
/* A tracker lists how many of our leases to fetch at full rate; a spare
 * starts when a fetch's remaining bytes should arrive within 1.5 x the
 * time a GET takes to bring its first byte (a moving average, capped at
 * PEER_ORIGIN_LEAD_MAX_MS), measured once PEER_ORIGIN_RATE_MIN_MS of body has
 * come in. */
#define PEER_ORIGIN_LEAD_MAX_MS 1000u
#define PEER_ORIGIN_RATE_MIN_MS 5u
/* With the tracker unreachable this long (or no --tracker at all: at
 * once), the origin may fetch chunks no neighbour has. */
#define PEER_TRACKER_FALLBACK_MS 10000u
/* A release known only by digest waits this long for a neighbour that has
 * its manifest; one with a URI asks neighbours first for this long: about
 * one tracker round trip plus a connect on a LAN. Longer only delays every
 * cold start, and the S3 alternative is one small GET (a 1 TiB release at
 * 16 MiB chunks has a ~5 MiB manifest; typical ones are tens of KiB). */
#define PEER_MANIFEST_WAIT_MS 60000u
#define PEER_MANIFEST_PEER_TRY_MS 250u
/* Tracker down (origin_share.h, addrbook.h). The address book keeps this
 * many other nodes the trackers named; while a release's tracker is down
 * the swarm dials at most PEER_ADDRBOOK_DIAL_MAX of them per tick, each
 * again only after PEER_ADDRBOOK_REDIAL_MS. A release waits
 * PEER_SHARE_GRACE_MS after it began fetching (when the book is not
 * empty) so its neighbours can find it before anyone reads S3; a
 * neighbour that said nothing about the release for PEER_SHARE_STALL_MS
 * (no BITFIELD, no HAVE) no longer counts, and its chunks are taken over. */
#define PEER_ADDRBOOK_MAX 64u
#define PEER_ADDRBOOK_DIAL_MAX 8u
#define PEER_ADDRBOOK_REDIAL_MS 10000u
#define PEER_SHARE_GRACE_MS 2000u
#define PEER_SHARE_STALL_MS 8000u
/* A neighbour asked for a manifest that has not begun to send it by then
 * counts as having refused (the next is asked, or S3). */
#define PEER_MANIFEST_ASK_MS 5000u
/* MANIFEST payloads being sent at once (each a copy of the bytes). */
#define PEER_MANIFEST_SENDS_MAX 4u
/* Node id: random bytes, hex-encoded, when --node-id is not given. */
#define PEER_NODE_ID_RANDOM_BYTES 8u
/* Token buckets hold this many seconds of rate. */
#define PEER_RATE_BURST_MS 250u
/* Liveness (docs/operations.md, "Liveness contract"): a FETCHING release
 * with chunks missing and no byte from any source for --stall-timeout is
 * stalled; it names up to PEER_STALL_REPORT_MAX of its missing chunks to
 * the tracker (ANNOUNCE "st", <= WS_MAX_LEASE_CHUNKS), reads them from S3
 * itself once stalled for twice that, and fails after --stall-fail. */
#define PEER_STALL_TIMEOUT_S_DEFAULT 20u
#define PEER_STALL_TIMEOUT_S_MAX 3600u
#define PEER_STALL_FAIL_S_DEFAULT 600u
#define PEER_STALL_FAIL_S_MAX (7u * 24u * 3600u)
#define PEER_STALL_REPORT_MAX 64u
/* Chunks an announce asks the tracker to have read from S3 first ("pf"):
 * those of the single-chunk files we lack, in file order, this many at
 * most (swarm_release.c; the tracker's order otherwise is the index's). */
#define PEER_FIRST_REPORT_MAX 64u

#endif
