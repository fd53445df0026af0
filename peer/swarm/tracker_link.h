/* tracker_link.h - p2pd's link to p2p-tracker over one wire_conn: keeps a
 * connection up (reconnecting with jittered exponential backoff), announces
 * every release the daemon tracks (full have-bitfield on the first announce
 * of each connection, deltas afterwards, at the interval the tracker asks
 * for and at once on joining, finishing or leaving), forwards HAVEs and
 * lease renew/release, and hands ANNOUNCE_REPLY contents to the daemon.
 *
 * Thread: the loop thread that created it; every call and callback runs
 * there. Ownership: everything passed in is borrowed for the call and
 * copied; everything passed to a callback is borrowed for that call.
 * Soft state only: if the tracker restarts or the link drops, the next
 * connection re-announces the full state of every tracked release.
 *
 * Room at the tracker (tracker_link_room.c): releases are announced in
 * priority order, those being fetched first (oldest first), then seeds
 * (most recent first). A seed the tracker refuses with WS_ELIMIT is
 * "parked": no longer announced there (it stays ready here and neighbours
 * already connected keep fetching from it) until room frees up or the
 * link reconnects. A release being fetched that is refused makes room: the
 * oldest seed announced gets STOPPED and is parked, and the release is
 * announced again; with no seed to drop it counts as refused
 * (peer_tracker_link_refused_since) and is announced again with backoff.
 */
#ifndef PEER_SWARM_TRACKER_LINK_H
#define PEER_SWARM_TRACKER_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "proto.h"
#include "wire_conn.h"

#define PEER_TRACKER_LINK_BACKOFF_MIN_MS 500u   /* first reconnect delay */
#define PEER_TRACKER_LINK_BACKOFF_MAX_MS 30000u /* cap of the doubling */
#define PEER_TRACKER_LINK_INTERVAL_MS 30000u    /* until the tracker says */
#define PEER_TRACKER_LINK_INTERVAL_MIN_MS 100u  /* clamp of the reply's "iv" */
#define PEER_TRACKER_LINK_INTERVAL_MAX_MS 600000u
#define PEER_TRACKER_LINK_RELEASES_MAX 256u /* tracked at once */
/* A release the tracker refused (WS_ELIMIT, no seed left to drop) is
 * announced again after this, doubling up to _MAX. */
#define PEER_TRACKER_LINK_REFUSED_RETRY_MS 5000u
#define PEER_TRACKER_LINK_REFUSED_RETRY_MAX_MS 60000u

typedef struct peer_tracker_link_s peer_tracker_link_t;

typedef struct {
  char host[WS_HOST_MAX + 1]; /* tracker: numeric address or name */
  uint16_t port;
  uint8_t key[WS_CLUSTER_KEY_LEN];
  char node_id[WS_NODE_ID_MAX + 1];
  uint16_t listen_port; /* our peer listener, 0 = none */
  char zone[WS_ZONE_MAX + 1];
  char labels[WS_LABELS_MAX + 1]; /* node labels for the tracker, or "" */
  uint32_t backoff_min_ms;
  uint32_t backoff_max_ms;
  uint32_t interval_ms; /* announce interval before the first reply */
  wire_conn_cfg_t wire; /* timeouts and caps of the link; the link fills
                           in key, node id, port, zone and role */
} peer_tracker_link_cfg_t;

typedef struct {
  /* The tracker's current peer selection for digest (may be n == 0), and
   * our parent in each stripe tree (tree[0..ntree), "" where we are the
   * root; ntree 0: none, or a reply that names no peers either). */
  void (*on_peers)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                   const ws_peer_info_t *peers, uint32_t n,
                   const char (*tree)[WS_NODE_ID_MAX + 1], uint32_t ntree);
  /* One origin lease: fetch chunks[0..n) of digest from S3 within ttl_ms.
   * Every reply lists every lease held, old and new. streams: how many of
   * them to fetch at full rate at once, the rest being spares to start as
   * one ends (0: all at once). */
  void (*on_leases)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                    const uint32_t *chunks, uint32_t n, uint32_t ttl_ms,
                    uint32_t streams);
  /* The cluster wants this release everywhere (uri may be NULL). */
  void (*on_wanted)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                    const char *uri);
  /* Other connected nodes the tracker named (the presence reply's
   * "nodes", n > 0): to swap with while it is down. Optional. */
  void (*on_nodes)(void *arg, const ws_peer_info_t *nodes, uint32_t n);
  /* Link up (the tracker answered the first announce of a connection;
   * a tracker that turns the node away never does) or down (status of the
   * close). Leases die with the link: the tracker re-grants after
   * re-announce. Optional. */
  void (*on_link)(void *arg, bool up, int status);
  /* Fills the optional progress report (size_bytes, s3_bytes, peer_bytes,
   * err) of the announce about to be sent for digest. Optional. */
  void (*on_report)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                    ws_announce_t *a);
  void *arg;
} peer_tracker_link_cbs_t;

typedef struct {
  uint64_t connects;   /* connection attempts */
  uint64_t links;      /* handshakes completed */
  uint64_t announces;  /* ANNOUNCE frames sent */
  uint64_t replies;    /* ANNOUNCE_REPLY frames received */
  uint64_t haves;      /* HAVE frames sent */
  uint64_t refusals;   /* times the tracker turned this node away */
  uint32_t backoff_ms; /* current reconnect delay */
  bool up;             /* the tracker answered on this connection */
} peer_tracker_link_stats_t;

/* Defaults above, wire defaults, empty strings, zero key. */
void peer_tracker_link_cfg_init(peer_tracker_link_cfg_t *cfg);
/* Parses "HOST:PORT" or "[V6]:PORT" into cfg->host/port: WS_EUSAGE. */
int peer_tracker_link_cfg_addr(peer_tracker_link_cfg_t *cfg,
                               const char *hostport) WS_MUST_USE;

/* Returns-new in *out (free with peer_tracker_link_close) and starts
 * connecting. cfg, cbs borrowed (copied). WS_EUSAGE bad cfg, -ENOMEM. */
int peer_tracker_link_new(uv_loop_t *loop, const peer_tracker_link_cfg_t *cfg,
                          const peer_tracker_link_cbs_t *cbs,
                          peer_tracker_link_t **out) WS_MUST_USE;

/* Starts (or refreshes) tracking a release: announced at once with event
 * STARTED and the full have-set. total_chunks 0 = manifest not known yet
 * (have must then be NULL); have may be NULL (nothing held) or must have
 * nbits == total_chunks (copied). uri may be NULL. Calling it again for a
 * known digest replaces total/have/uri/role and re-announces in full.
 * WS_EUSAGE bad args, WS_ELIMIT more than PEER_TRACKER_LINK_RELEASES_MAX,
 * -ENOMEM. */
int peer_tracker_link_track(peer_tracker_link_t *tc, const uint8_t digest[32],
                            uint32_t total_chunks, const ws_bitfield_t *have,
                            const char *uri, ws_swarm_role_t role) WS_MUST_USE;
/* We now hold chunk (verified): HAVE to the tracker now if the link is up,
 * and in the next announce's delta. WS_ENOTFOUND untracked digest,
 * WS_EUSAGE chunk out of range. Idempotent. */
int peer_tracker_link_have(peer_tracker_link_t *tc, const uint8_t digest[32],
                           uint32_t chunk) WS_MUST_USE;
/* Same, naming the neighbour the chunk came from and was verified from
 * (from: its node id, NULL or "" for S3): the HAVE's "f", with which the
 * tracker confirms that neighbour's have-claims (docs/tracker.md). */
int peer_tracker_link_have_from(peer_tracker_link_t *tc,
                                const uint8_t digest[32], uint32_t chunk,
                                const char *from) WS_MUST_USE;
/* The release is complete: role seed, want false, announced at once with
 * event COMPLETED. WS_ENOTFOUND. */
int peer_tracker_link_done(peer_tracker_link_t *tc,
                           const uint8_t digest[32]) WS_MUST_USE;
/* We are short of neighbours for digest (a cluster-wide start: the first
 * replies could name only the members already joined): its next announce
 * comes WS_ANNOUNCE_SOON_MS from now (twice that the second time), unless
 * it was due sooner; at most WS_ANNOUNCE_SOON_MAX times per track, and not
 * while an announce of it is unanswered (its reply sets the next), parked or
 * refused. WS_ENOTFOUND. */
int peer_tracker_link_soon(peer_tracker_link_t *tc, const uint8_t digest[32]);
/* Stops tracking (release evicted or cancelled): announced with event
 * STOPPED if the link is up, then forgotten. WS_ENOTFOUND. */
int peer_tracker_link_untrack(peer_tracker_link_t *tc,
                              const uint8_t digest[32]) WS_MUST_USE;
/* LEASE_RENEW: chunks still being fetched, done fetched and verified (either
 * list may be empty). -ENOTCONN without a link (leases died with it),
 * WS_ELIMIT send queue full (retry later), WS_EUSAGE lists too long. */
int peer_tracker_link_lease_renew(peer_tracker_link_t *tc,
                                  const uint8_t digest[32],
                                  const uint32_t *chunks, uint32_t n,
                                  const uint32_t *done,
                                  uint32_t n_done) WS_MUST_USE;
/* LEASE_RELEASE: chunks given back unfetched; same errors. */
int peer_tracker_link_lease_release(peer_tracker_link_t *tc,
                                    const uint8_t digest[32],
                                    const uint32_t *chunks, uint32_t n,
                                    const uint32_t *done,
                                    uint32_t n_done) WS_MUST_USE;

/* 1 with *since_ms (the first refusal) while the tracker refuses digest
 * for want of room (WS_ELIMIT) and no seed of ours could make room; the
 * release is then fetched as if the tracker were down. 0 otherwise. */
int peer_tracker_link_refused_since(const peer_tracker_link_t *tc,
                                    const uint8_t digest[32],
                                    uint64_t *since_ms);

void peer_tracker_link_stats(const peer_tracker_link_t *tc,
                             peer_tracker_link_stats_t *out);

/* Says GOODBYE if connected, stops reconnecting, frees everything once the
 * link and timer have closed (no callback runs after this call). Accepts
 * NULL. */
void peer_tracker_link_close(peer_tracker_link_t *tc);

#endif
