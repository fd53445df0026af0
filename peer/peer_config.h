/* peer_config.h - every tunable of p2pd in one place (STYLE 16), units in
 * the names. Operator-facing settings (flags, env, config file) have their
 * defaults here too; config.c applies them.
 */
#ifndef PEER_CONFIG_H
#define PEER_CONFIG_H

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

/* ---- origin data path (memory bound: PEER_BUF_BYTES * PEER_BUF_COUNT) -- */

/* One buffer of S3 body bytes on its way to the partial file. */
#define PEER_BUF_BYTES (256u * 1024u)
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
/* Subdirectory of the cache holding one record per release being
 * fetched, so that a restart resumes it. Owned by p2pd, not the store. */
#define PEER_JOBS_DIR "p2pd-jobs"
#define PEER_JOB_FILE_MAX_BYTES (64u * 1024u)

#endif
