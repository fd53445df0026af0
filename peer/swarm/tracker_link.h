/* trk_client.h - p2pd's link to p2p-tracker over one wire_conn: keeps a
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
 */
#ifndef TRK_CLIENT_H
#define TRK_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "proto.h"
#include "wire_conn.h"

#define TRK_CLIENT_BACKOFF_MIN_MS 500u   /* first reconnect delay */
#define TRK_CLIENT_BACKOFF_MAX_MS 30000u /* cap of the doubling */
#define TRK_CLIENT_INTERVAL_MS 30000u    /* until the tracker says */
#define TRK_CLIENT_INTERVAL_MIN_MS 100u  /* clamp of the reply's "iv" */
#define TRK_CLIENT_INTERVAL_MAX_MS 600000u
#define TRK_CLIENT_RELEASES_MAX 256u /* tracked at once */

typedef struct trk_client_s trk_client_t;

typedef struct {
  char host[WS_HOST_MAX + 1]; /* tracker: numeric address or name */
  uint16_t port;
  uint8_t key[WS_CLUSTER_KEY_LEN];
  char node_id[WS_NODE_ID_MAX + 1];
  uint16_t listen_port; /* our peer listener, 0 = none */
  char zone[WS_ZONE_MAX + 1];
  uint32_t backoff_min_ms;
  uint32_t backoff_max_ms;
  uint32_t interval_ms; /* announce interval before the first reply */
  wire_conn_cfg_t wire; /* timeouts and caps of the link; trk_client fills
                           in key, node id, port, zone and role */
} trk_client_cfg_t;

typedef struct {
  /* The tracker's current peer selection for digest (may be n == 0). */
  void (*on_peers)(void *arg, const uint8_t digest[WS_PROTO_DIGEST_LEN],
                   const ws_peer_info_t *peers, uint32_t n);
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
  /* Link up (after the handshake) or down (status of the close). Leases
   * die with the link: the tracker re-grants after re-announce. Optional. */
  void (*on_link)(void *arg, bool up, int status);
  void *arg;
} trk_client_cbs_t;

typedef struct {
  uint64_t connects;   /* connection attempts */
  uint64_t links;      /* handshakes completed */
  uint64_t announces;  /* ANNOUNCE frames sent */
  uint64_t replies;    /* ANNOUNCE_REPLY frames received */
  uint64_t haves;      /* HAVE frames sent */
  uint32_t backoff_ms; /* current reconnect delay */
  bool up;
} trk_client_stats_t;

/* Defaults above, wire defaults, empty strings, zero key. */
void trk_client_cfg_init(trk_client_cfg_t *cfg);
/* Parses "HOST:PORT" or "[V6]:PORT" into cfg->host/port: WS_EUSAGE. */
int trk_client_cfg_addr(trk_client_cfg_t *cfg,
                        const char *hostport) WS_MUST_USE;

/* Returns-new in *out (free with trk_client_close) and starts connecting.
 * cfg, cbs borrowed (copied). WS_EUSAGE bad cfg, -ENOMEM. */
int trk_client_new(uv_loop_t *loop, const trk_client_cfg_t *cfg,
                   const trk_client_cbs_t *cbs, trk_client_t **out) WS_MUST_USE;

/* Starts (or refreshes) tracking a release: announced at once with event
 * STARTED and the full have-set. total_chunks 0 = manifest not known yet
 * (have must then be NULL); have may be NULL (nothing held) or must have
 * nbits == total_chunks (copied). uri may be NULL. Calling it again for a
 * known digest replaces total/have/uri/role and re-announces in full.
 * WS_EUSAGE bad args, WS_ELIMIT more than TRK_CLIENT_RELEASES_MAX, -ENOMEM. */
int trk_client_track(trk_client_t *tc, const uint8_t digest[32],
                     uint32_t total_chunks, const ws_bitfield_t *have,
                     const char *uri, ws_swarm_role_t role) WS_MUST_USE;
/* We now hold chunk (verified): HAVE to the tracker now if the link is up,
 * and in the next announce's delta. WS_ENOTFOUND untracked digest,
 * WS_EUSAGE chunk out of range. Idempotent. */
int trk_client_have(trk_client_t *tc, const uint8_t digest[32],
                    uint32_t chunk) WS_MUST_USE;
/* The release is complete: role seed, want false, announced at once with
 * event COMPLETED. WS_ENOTFOUND. */
int trk_client_done(trk_client_t *tc, const uint8_t digest[32]) WS_MUST_USE;
/* Stops tracking (release evicted or cancelled): announced with event
 * STOPPED if the link is up, then forgotten. WS_ENOTFOUND. */
int trk_client_untrack(trk_client_t *tc, const uint8_t digest[32]) WS_MUST_USE;
/* LEASE_RENEW: chunks still being fetched, done fetched and verified (either
 * list may be empty). -ENOTCONN without a link (leases died with it),
 * WS_ELIMIT send queue full (retry later), WS_EUSAGE lists too long. */
int trk_client_lease_renew(trk_client_t *tc, const uint8_t digest[32],
                           const uint32_t *chunks, uint32_t n,
                           const uint32_t *done, uint32_t n_done) WS_MUST_USE;
/* LEASE_RELEASE: chunks given back unfetched; same errors. */
int trk_client_lease_release(trk_client_t *tc, const uint8_t digest[32],
                             const uint32_t *chunks, uint32_t n,
                             const uint32_t *done, uint32_t n_done) WS_MUST_USE;

void trk_client_stats(const trk_client_t *tc, trk_client_stats_t *out);

/* Says GOODBYE if connected, stops reconnecting, frees everything once the
 * link and timer have closed (no callback runs after this call). Accepts
 * NULL. */
void trk_client_close(trk_client_t *tc);

#endif
