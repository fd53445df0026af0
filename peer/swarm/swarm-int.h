/* swarm-int.h - what the swarm's files share: swarm.c (the object, release
 * records, bans, tracker callbacks), nbr.c (one neighbour connection),
 * picker.c (which chunk from whom, origin leases), recv.c (a chunk being
 * received), serve.c (chunks and manifests being uploaded), rate.c (token
 * buckets). Loop thread only.
 */
#ifndef PEER_SWARM_INT_H
#define PEER_SWARM_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "proto.h"
#include "swarm/tracker_link.h"
#include "wire_conn.h"

#include "core/tunables.h"
#include "release/release.h"
#include "swarm/swarm.h"

typedef struct peer_nbr_s peer_nbr_t;
typedef struct peer_srel_s peer_srel_t;
typedef struct peer_rx_s peer_rx_t;
typedef struct peer_up_s peer_up_t;

/* ---- token bucket (rate.c) --------------------------------------------- */

typedef struct {
  uint64_t rate; /* bytes per second; 0 = unlimited */
  double tokens; /* may go negative: bytes are charged after the fact */
  double burst;
  uint64_t last_ns;
} peer_rate_t;

void peer_rate_init(peer_rate_t *r, uint64_t bytes_per_s);
/* Charges n bytes; returns 0 when the bucket is not in debt, else the
 * milliseconds until it is out of debt (the caller waits that long). */
uint64_t peer_rate_charge(peer_rate_t *r, uint64_t n);
/* Milliseconds until the bucket is out of debt (0 = now). */
uint64_t peer_rate_wait_ms(peer_rate_t *r);

/* ---- release records (swarm.c) ------------------------------------------ */

typedef enum {
  PEER_SREL_RESOLVING,
  PEER_SREL_FETCHING,
  PEER_SREL_READY,
  PEER_SREL_STATE_LAST
} peer_srel_state_t;

typedef struct {
  uint32_t chunk;      /* global index */
  uint64_t expires_ms; /* loop time */
} peer_lease_t;

struct peer_srel_s {
  peer_swarm_t *s;
  peer_srel_t *next;
  peer_srel_state_t state;
  ws_hash_t digest;
  peer_release_t *rel; /* RESOLVING/FETCHING: borrowed; READY: NULL */
  ws_manifest_t *m;    /* FETCHING: rel->m (borrowed); READY: owned */
  char *mbytes;        /* same ownership as m */
  size_t mlen;
  uint32_t total;     /* chunks; 0 while RESOLVING */
  ws_bitfield_t have; /* verified chunks we can serve (global index) */
  peer_lease_t leases[PEER_LEASES_MAX];
  uint32_t nleases;
  uint32_t streams;        /* leases to fetch at once (tracker's); 0: all */
  uint64_t renew_ms;       /* last LEASE_RENEW */
  uint64_t mwait_since_ms; /* RESOLVING: waiting for a holder since */
  peer_nbr_t *masked;      /* RESOLVING: neighbour asked (weak) */
  uint64_t mask_ms;        /* RESOLVING: when masked was asked */
  bool mdone;              /* RESOLVING: the release has its answer */
};

/* ---- neighbours (nbr.c) ------------------------------------------------- */

typedef enum {
  PEER_NBR_CONNECTING, /* TCP + handshake */
  PEER_NBR_READY,      /* authenticated: swapping */
  PEER_NBR_CLOSING,    /* wire_conn closing; freed after its on_close */
  PEER_NBR_STATE_LAST
} peer_nbr_state_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  ws_bitfield_t have; /* nbits 0 until its BITFIELD */
  bool sent_ours;     /* our BITFIELD went out */
  bool mani_refused;  /* it could not give us the manifest */
  bool live_ok;       /* its BITFIELD said "live": HAVE "p", CHUNK pieces */
  bool mux_ok;        /* ... and "mux": pieces of several chunks interleaved */
  uint32_t live[PEER_LIVE_MAX]; /* chunks it said (HAVE "p") are arriving */
  uint32_t nlive, live_next;    /* entries; the slot a new one replaces */
  struct {
    uint32_t chunk;
    uint64_t until_ms;
  } hidden[PEER_REJECT_HIDE_MAX]; /* refused chunks to ask for again */
  uint32_t nhidden;
} peer_nbr_rel_t;

typedef struct {
  bool used;
  bool dup; /* endgame duplicate */
  peer_srel_t *srel;
  peer_file_t *file; /* reference held */
  uint32_t g;        /* global chunk index */
  uint32_t j;        /* chunk in file */
  uint32_t req_id;
  uint64_t sent_ms;
} peer_req_t;

typedef enum {
  PEER_NBR_IN_NONE,     /* between payloads */
  PEER_NBR_IN_CHUNK,    /* bytes go to rx */
  PEER_NBR_IN_DISCARD,  /* a payload we did not ask for */
  PEER_NBR_IN_MANIFEST, /* bytes go to mbuf */
  PEER_NBR_IN_LAST
} peer_nbr_in_t;

/* A chunk arriving in pieces, more to come (CHUNK with "o"). */
typedef struct {
  bool open;
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t g, req_id;
  uint32_t got, len; /* bytes so far, the chunk's length */
  uint64_t last_ms;  /* last piece began */
  peer_rx_t *rx;
} peer_pieces_t;

typedef struct {
  uint8_t type; /* WS_MSG_REQUEST or WS_MSG_MANIFEST_REQ */
  ws_request_t r;
} peer_serve_req_t;

struct peer_nbr_s {
  peer_swarm_t *s;
  peer_nbr_t *prev, *next;
  peer_nbr_state_t state;
  uint64_t id;                     /* for log lines */
  wire_conn_t *c;                  /* NULL after on_close */
  bool initiator;                  /* we connected */
  char expect[WS_NODE_ID_MAX + 1]; /* node id the tracker gave, or "" */
  char node_id[WS_NODE_ID_MAX + 1];
  char host[64];
  uint16_t port; /* its listen port (HELLO), 0 = none */
  peer_nbr_rel_t rels[PEER_NBR_RELEASES_MAX];
  uint32_t nrels;
  peer_req_t reqs[PEER_PIPELINE_DEPTH];
  uint32_t nreqs;
  uint32_t next_req_id;
  uint64_t busy_until_ms; /* it said busy */
  /* receiving */
  peer_nbr_in_t in;
  peer_rx_t *rx;     /* IN_CHUNK: where the payload goes */
  peer_pieces_t *pc; /* IN_CHUNK: its entry in pcs (a piece), or NULL */
  peer_pieces_t pcs[WS_MUX_MAX]; /* chunks arriving in pieces */
  char *mbuf;                    /* IN_MANIFEST */
  uint32_t mlen, mgot;
  ws_hash_t mdigest;
  bool read_paused_pool;
  bool read_paused_rate;
  /* serving */
  peer_serve_req_t sq[PEER_SERVE_QUEUE_MAX];
  uint32_t sq_head, sq_len;
  /* Chunk uploads streaming: one, or to a neighbour that said "mux" up to
   * WS_MUX_MAX whose pieces interleave (serve.c). */
  peer_up_t *ups[WS_MUX_MAX];
  uint32_t nups;
  bool serving;     /* in peer_serve_next */
  bool serve_again; /* it was called again meanwhile */
  bool mani_open;   /* a MANIFEST payload is streaming */
  bool want_drain;  /* a send got WS_ELIMIT */
  uv_timer_t timer; /* rate-limit waits; closed before the free */
};

/* Connects to host:port (node id expected, may be ""). 0 or an error. */
int peer_nbr_connect(peer_swarm_t *s, const char *host, uint16_t port,
                     const char *expect) WS_MUST_USE;
/* Accepts one connection from the listener. */
int peer_nbr_accept(peer_swarm_t *s, uv_stream_t *server) WS_MUST_USE;
/* Closes with GOODBYE(reason) (or at once when not ready). */
void peer_nbr_close(peer_nbr_t *n, ws_bye_reason_t reason);
/* Sends a message: 0; WS_ELIMIT when the send queue is full (not sent;
 * want_drain set, on_drain retries the uploads); -ENOTCONN when n is not
 * ready; another error closes n. */
int peer_nbr_send(peer_nbr_t *n, const ws_msg_t *m);
/* Our BITFIELD for srel (FETCHING/READY) unless already sent. */
void peer_nbr_send_bitfield(peer_nbr_t *n, peer_srel_t *srel);
/* The neighbour's entry for digest, or NULL. */
peer_nbr_rel_t *peer_nbr_rel_find(peer_nbr_t *n, const uint8_t *digest);
/* 1 when n holds global chunk g of srel. */
int peer_nbr_has(peer_nbr_t *n, const peer_srel_t *srel, uint32_t g);
/* 1 when r's chunk g is one it is still fetching from origin (HAVE "p"). */
int peer_nbr_rel_live(const peer_nbr_rel_t *r, uint32_t g);
/* Drops request i (status: why) and gives its chunk back when no other
 * request or receiver holds it. */
void peer_nbr_req_drop(peer_nbr_t *n, uint32_t i, int status);
/* Drops every request for srel (record going away). */
void peer_nbr_forget_srel(peer_nbr_t *n, peer_srel_t *srel);
/* Cancels the other neighbours' requests for chunk j of file. */
void peer_nbr_cancel_others(peer_swarm_t *s, peer_nbr_t *keep,
                            peer_file_t *file, uint32_t j);
/* Arms n's timer to fire within ms (rate-limit waits of reads and
 * uploads; both re-check their bucket when it fires). */
void peer_nbr_timer_arm(peer_nbr_t *n, uint64_t ms);
/* recv.c: a buffer is free again; resume reading. */
void peer_nbr_rx_resume(peer_nbr_t *n);
/* Housekeeping: request timeouts. */
void peer_nbr_tick(peer_nbr_t *n, uint64_t now_ms);

/* ---- picker (picker.c) -------------------------------------------------- */

/* Fills n's request pipeline: rarest first among the chunks n holds and we
 * miss (small files and first chunks first), endgame duplicates at the
 * end. */
void peer_picker_fill(peer_nbr_t *n);
/* Neighbours holding global chunk g of srel. */
uint32_t peer_picker_avail(peer_swarm_t *s, const peer_srel_t *srel,
                           uint32_t g);

/* ---- receiving a chunk (recv.c) ----------------------------------------- */

/* Starts receiving chunk j of file (INFLIGHT, rx_busy set by the caller;
 * takes one file reference) from n. */
peer_rx_t *peer_rx_new(peer_swarm_t *s, peer_nbr_t *n, peer_file_t *file,
                       uint32_t j);
/* Takes a payload piece (all of it). Returns 1 when reading must pause
 * until peer_nbr_rx_resume (no buffer for the next piece), 0, or an error
 * (the receive failed; the connection should close). */
int peer_rx_data(peer_rx_t *rx, const uint8_t *p, size_t len) WS_MUST_USE;
/* Reserves the buffer the payload's first piece goes into: 0 when there is
 * one, 1 when the pool is empty (the neighbour must pause reading; it is
 * resumed through peer_nbr_rx_resume once a buffer is reserved). */
int peer_rx_reserve(peer_rx_t *rx);
/* The payload ended (status 0) or the connection dropped (status < 0):
 * rx finishes on its own (writes, verify, report) and forgets n. */
void peer_rx_end(peer_rx_t *rx, int status);
/* rx objects alive (for shutdown). */
unsigned peer_rx_count(const peer_swarm_t *s);

/* ---- serving (serve.c) -------------------------------------------------- */

/* A REQUEST or MANIFEST_REQ from n: queue it or REJECT it. */
void peer_serve_request(peer_nbr_t *n, uint8_t type, const ws_request_t *r);
/* CANCEL from n: drop the queued request. */
void peer_serve_cancel(peer_nbr_t *n, const ws_request_t *r);
/* Starts the next upload of n when it has none (after one ended, on drain,
 * after a rate wait). */
void peer_serve_next(peer_nbr_t *n);
/* n is closing: its upload finishes without it. */
void peer_serve_detach(peer_nbr_t *n);
/* More of chunk j of file arrived from origin, or its fetch ended: the
 * uploads sending it as it arrives send more, finish or fail. */
void peer_serve_live_progress(peer_swarm_t *s, peer_file_t *file, uint32_t j);

/* ---- the swarm (swarm.c) ------------------------------------------------ */

struct peer_swarm_s {
  peer_daemon_t *d;
  int stopping;
  uv_tcp_t listener;
  int listening;    /* listener open (closing counts) */
  uint16_t port;    /* bound listen port, 0 = none */
  trk_client_t *tc; /* NULL without --tracker */
  int tracker_up;
  uint64_t tracker_down_ms; /* loop time the link went (or start) */
  peer_nbr_t *nbrs;
  uint32_t nnbrs;       /* all states */
  uint32_t nready;      /* PEER_NBR_READY */
  uint32_t npreauth_in; /* accepted, not yet authenticated */
  peer_srel_t *srels;
  uint32_t nsrels;
  struct {
    char node_id[WS_NODE_ID_MAX + 1];
    char hostport[80];
    uint64_t until_ms;
  } bans[PEER_BANS_MAX];
  uint32_t nbans;
  peer_rate_t up_rate, down_rate;
  unsigned uploads; /* chunk uploads active */
  unsigned mani_sends;
  unsigned rx_alive;
  unsigned up_alive; /* upload objects not yet freed */
  uv_timer_t tick;
  int tick_open;
  uint64_t next_nbr_id;
  uint64_t rng; /* picker tie-breaks */
  uint64_t renew_ms;
  wire_conn_cfg_t wcfg;
};

/* ---- release records (srel.c) ------------------------------------------ */

peer_srel_t *peer_srel_find(peer_swarm_t *s, const uint8_t *digest);
/* Frees a record: neighbours' requests for it canceled, tracker told. */
void peer_srel_free(peer_srel_t *srel);
/* RESOLVING: asks a neighbour that announced the digest for the manifest
 * when none is asked; gives up (the release goes to S3 or fails) after the
 * wait. */
void peer_srel_manifest_try(peer_srel_t *srel, uint64_t now_ms);
/* The tracker answered a manifest-less announce for srel's digest with no
 * peers: a release with a URI stops waiting for neighbours and reads its
 * manifest from S3 now. */
void peer_srel_manifest_no_holders(peer_srel_t *srel);
/* Runs the housekeeping tick within ms (and every PEER_SWARM_TICK_MS
 * after): a deadline shorter than the tick, such as the manifest wait. */
void peer_swarm_tick_soon(peer_swarm_t *s, uint64_t ms);
/* Leases: renew the ones still to fetch (tick). */
void peer_srel_leases_renew(peer_srel_t *srel);
/* Adds or refreshes leases from the tracker. */
void peer_srel_leases_add(peer_srel_t *srel, const uint32_t *chunks, uint32_t n,
                          uint32_t ttl_ms);

/* ---- swarm.c ------------------------------------------------------------ */

/* 1 when node_id or host:port is banned now. */
int peer_swarm_banned(peer_swarm_t *s, const char *node_id, const char *host,
                      uint16_t port);
/* Bans a neighbour's node id and host:port and closes it if connected. */
void peer_swarm_ban(peer_swarm_t *s, const char *node_id, const char *host,
                    uint16_t port, const char *why);
/* nbr.c -> swarm: n became READY / is gone (counts, manifest asks). */
void peer_swarm_nbr_ready(peer_swarm_t *s, peer_nbr_t *n);
void peer_swarm_nbr_gone(peer_swarm_t *s, peer_nbr_t *n);
/* nbr.c -> swarm: n announced digest (BITFIELD): a RESOLVING record may
 * ask it for the manifest. */
void peer_swarm_nbr_announced(peer_swarm_t *s, peer_nbr_t *n,
                              const uint8_t *digest);
/* nbr.c -> swarm: n answered our MANIFEST_REQ with bytes (taken) or not
 * (bytes NULL: rejected or connection lost). */
void peer_swarm_manifest_got(peer_swarm_t *s, peer_nbr_t *n,
                             const ws_hash_t *digest, char *bytes, size_t len);
/* Bytes of a chunk we hold verified for srel, as a fd source: 1 = blob of
 * the file (*sha256 set), 0 = the partial's fd (dup'ed into *fd), or
 * WS_ENOTFOUND. *off and *len: the chunk's place in the file. */
int peer_srel_chunk_source(peer_srel_t *srel, uint32_t g, ws_hash_t *sha256,
                           int *fd, uint64_t *off, uint32_t *len) WS_MUST_USE;
/* HAVE "p" to n for each chunk of srel we are fetching from origin now,
 * once both BITFIELDs went (n said "live"): the chunks whose fetch began
 * before n was there. */
void peer_srel_live_haves(peer_srel_t *srel, peer_nbr_t *n);
/* A chunk we do not hold yet but are fetching from origin right now (a
 * manifest with chunk hashes): 0 with *file (a new reference), *j, a dup of
 * the partial's fd in *fd and the chunk's place in the file; else
 * WS_ENOTFOUND or an error. fd NULL: only whether (nothing taken). */
int peer_srel_chunk_live(peer_srel_t *srel, uint32_t g, peer_file_t **file,
                         uint32_t *j, int *fd, uint64_t *off,
                         uint32_t *len) WS_MUST_USE;

#endif
