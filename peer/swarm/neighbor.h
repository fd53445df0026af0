/* neighbor.h - one neighbour (another p2pd over an authenticated
 * wire_conn) and the set of them.
 *
 *   CONNECTING --both AUTHs checked--> READY --goodbye/close--> CLOSING
 *   CONNECTING --handshake failed/banned/duplicate--> CLOSING
 *   CLOSING --wire_conn on_close--> timer closed --> freed
 *
 * The module is three files, each calling only the ones before it:
 *   neighbor.c          the object: state, what the neighbour announced
 *                       (have-bitfields, chunks arriving at it, chunks it
 *                       refused), sending, closing, the rate-wait timer;
 *   neighbor_requests.c our chunk requests out to it (pipeline slots,
 *                       timeouts, cancels, endgame duplicates);
 *   neighbor_deadline.c the chunks arriving from it and their progress
 *                       deadlines, misses, and the neighbour slots (idle
 *                       ones make room for newcomers);
 *   neighbor_conn.c     (neighbor_conn.h) the connection: connect, accept,
 *                       handshake outcome, close, and the dispatch of what
 *                       it sends to the modules that handle it.
 *
 * Caps: PEER_NBR_RELEASES_MAX bitfields (each at most WS_MAX_TOTAL_CHUNKS
 * bits, checked by the decoder), PEER_PIPELINE_DEPTH requests out,
 * PEER_SERVE_QUEUE_MAX requests queued from it.
 *
 * Owns (per neighbour): the wire_conn (until its on_close), the timer, the
 * bitfields, the request slots (each holding a file reference), the
 * manifest being received. The set owns the neighbours.
 * Thread: loop thread.
 */
#ifndef PEER_SWARM_NEIGHBOR_H
#define PEER_SWARM_NEIGHBOR_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/ctx.h"
#include "core/tunables.h"
#include "fetch/file.h"
#include "proto.h"
#include "swarm/bans.h"
#include "swarm/rate.h"
#include "wire_conn.h"

typedef struct peer_neighbor_s peer_neighbor_t;
typedef struct peer_neighbors_s peer_neighbors_t;
struct peer_swarm_rel_s;  /* swarm_release.h */
struct peer_swarm_rels_s; /* swarm_release.h */
struct peer_picker_s;     /* picker.h */
struct peer_uploads_s;    /* upload.h */
struct peer_upload_s;     /* upload.h */
struct peer_downloads_s;  /* download.h */
struct peer_download_s;   /* download.h */

typedef enum {
  PEER_NEIGHBOR_CONNECTING, /* TCP + handshake */
  PEER_NEIGHBOR_READY,      /* authenticated: swapping */
  PEER_NEIGHBOR_CLOSING,    /* wire_conn closing; freed after its on_close */
  PEER_NEIGHBOR_STATE_LAST
} peer_neighbor_state_t;

/* What a neighbour told us about one release. */
typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  ws_bitfield_t have; /* nbits 0 until its BITFIELD */
  bool sent_ours;     /* our BITFIELD went out */
  bool mani_refused;  /* it could not give us the manifest */
  bool live_ok;       /* its BITFIELD said "live": HAVE "p", CHUNK pieces */
  bool mux_ok;        /* ... and "mux": pieces of several chunks interleaved */
  uint64_t active_ms; /* its last BITFIELD or HAVE (origin_share.h) */
  uint32_t live[PEER_LIVE_MAX]; /* chunks it said (HAVE "p") are arriving */
  uint32_t nlive, live_next;    /* entries; the slot a new one replaces */
  struct {
    uint32_t chunk;
    uint64_t until_ms;
  } hidden[PEER_REJECT_HIDE_MAX]; /* refused chunks to ask for again */
  uint32_t nhidden;
} peer_neighbor_rel_t;

/* One chunk request we have out to a neighbour. */
typedef struct {
  bool used;
  bool dup;                     /* endgame duplicate */
  struct peer_swarm_rel_s *rel; /* the swarm record it is for */
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  peer_file_t *file; /* reference held */
  uint32_t g;        /* global chunk index */
  uint32_t j;        /* chunk in file */
  uint32_t req_id;
  uint64_t sent_ms;
} peer_request_t;

/* Where the bytes of the payload being read go. */
typedef enum {
  PEER_NEIGHBOR_IN_NONE,     /* between payloads */
  PEER_NEIGHBOR_IN_CHUNK,    /* bytes go to dl */
  PEER_NEIGHBOR_IN_DISCARD,  /* a payload we did not ask for */
  PEER_NEIGHBOR_IN_MANIFEST, /* bytes go to mbuf */
  PEER_NEIGHBOR_IN_LAST
} peer_neighbor_in_t;

/* A chunk arriving from a neighbour: in pieces, more to come (CHUNK with
 * "o"), or whole (one payload); its progress deadline runs from start_ms
 * (PEER_CHUNK_GRACE_MS in tunables.h), which moves on while the chunk is
 * still arriving at the neighbour itself (late). */
typedef struct {
  bool open;
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t g, req_id;
  uint32_t got, len;          /* bytes so far, the chunk's length */
  uint64_t last_ms;           /* last piece began */
  uint64_t start_ms;          /* its first CHUNK header came (or later) */
  uint64_t first_ms;          /* its first CHUNK header came */
  uint64_t paused0_ms;        /* the neighbour's paused_ms then */
  uint64_t byte_ms;           /* its last byte (or first header) came */
  uint64_t byte_paused_ms;    /* the neighbour's paused_ms then */
  bool late;                  /* start_ms moved: not a rate sample */
  struct peer_download_s *dl; /* pieces only (whole: the neighbour's dl) */
} peer_pieces_t;

/* A request the neighbour sent us, queued for upload.c. */
typedef struct {
  uint8_t type; /* WS_MSG_REQUEST or WS_MSG_MANIFEST_REQ */
  ws_request_t r;
} peer_upload_req_t;

struct peer_neighbor_s {
  peer_neighbors_t *set;
  peer_neighbor_t *prev, *next;
  peer_neighbor_state_t state;
  uint64_t id;                     /* for log lines */
  wire_conn_t *c;                  /* NULL after on_close */
  bool initiator;                  /* we connected */
  char expect[WS_NODE_ID_MAX + 1]; /* node id the tracker gave, or "" */
  char node_id[WS_NODE_ID_MAX + 1];
  char host[64];
  uint16_t port;      /* its listen port (HELLO), 0 = none */
  uint64_t share_key; /* its rendezvous key (origin_share.h), once ready */
  peer_neighbor_rel_t rels[PEER_NBR_RELEASES_MAX];
  uint32_t nrels;
  peer_request_t reqs[PEER_PIPELINE_DEPTH];
  uint32_t nreqs;
  uint32_t next_req_id;
  uint64_t busy_until_ms; /* it said busy, or benched (missed a deadline) */
  uint32_t misses;        /* deadlines missed since its last chunk */
  uint64_t useful_ms;     /* ready, or a chunk/manifest byte either way */
  /* Refused one of our upload slots (busy), last at wait_last_ms, and not
   * given one since (upload.c). */
  bool waiting;
  uint64_t wait_last_ms;
  /* Time its reads were held by us (--download-rate, no buffer): not its
   * fault, so progress deadlines do not count it. */
  uint64_t paused_ms, paused_since_ms;
  bool paused_now;
  /* Upload progress: bytes the socket took, when that last moved (or
   * nothing was waiting to be written). */
  uint64_t tx_bytes, tx_ms;
  /* receiving (neighbor_conn.c) */
  peer_neighbor_in_t in;
  struct peer_download_s *dl;    /* IN_CHUNK: where the payload goes */
  peer_pieces_t *pc;             /* IN_CHUNK: its entry in pcs, or NULL */
  peer_pieces_t pcs[WS_MUX_MAX]; /* chunks arriving in pieces */
  peer_pieces_t whole;           /* the chunk arriving as one payload */
  char *mbuf;                    /* IN_MANIFEST */
  uint32_t mlen, mgot;
  ws_hash_t mdigest;
  bool read_paused_pool;
  bool read_paused_rate;
  /* uploading to it (upload.c) */
  peer_upload_req_t sq[PEER_SERVE_QUEUE_MAX];
  uint32_t sq_head, sq_len;
  /* Chunk uploads streaming: one, or to a neighbour that said "mux" up to
   * WS_MUX_MAX whose pieces interleave. */
  struct peer_upload_s *ups[WS_MUX_MAX];
  uint32_t nups;
  bool serving;     /* in peer_upload_next */
  bool serve_again; /* it was called again meanwhile */
  bool just_served; /* an upload to it just ended (upload_chunk.c) */
  uint64_t turn_ms; /* when its current run of back-to-back uploads began */
  bool mani_open;   /* a MANIFEST payload is streaming */
  bool want_drain;  /* a send got WS_ELIMIT */
  uv_timer_t timer; /* rate-limit waits; closed before the free */
};

/* The set: every neighbour in any state, and what they share. */
struct peer_neighbors_s {
  peer_ctx_t *ctx;
  peer_bans_t *bans;     /* borrowed: checked at every handshake */
  peer_rate_t down_rate; /* --download-rate, over all neighbours */
  /* --upload-rate as the pace of the sockets uploading (wire_uplink.h) */
  wire_uplink_t uplink;
  wire_conn_cfg_t wcfg; /* our side of every handshake */
  peer_neighbor_t *head;
  uint32_t count;       /* all states */
  uint32_t nready;      /* PEER_NEIGHBOR_READY */
  uint32_t nreqs;       /* chunk requests in flight, all neighbours */
  uint32_t npreauth_in; /* accepted, not yet authenticated */
  uint64_t next_id;
  /* Since when our share is dialed and the slots are not full (0: not
   * so when last asked; peer_neighbors_room_dial). */
  uint64_t short_since_ms;
  /* Typical rate of a chunk from a neighbour (bytes/s, moving average of
   * the chunks that came whole; 0 until one did): progress deadlines. */
  uint64_t rx_bps;
  bool stopping;
  /* The rate-wait timer fired (set by neighbor_conn.c). */
  uv_timer_cb on_timer;
  /* Where neighbor_conn.c routes what neighbours send (set at creation). */
  struct peer_swarm_rels_s *rels;
  struct peer_picker_s *picker;
  struct peer_uploads_s *uploads;
  struct peer_downloads_s *downloads;
};

/* ---- neighbor.c --------------------------------------------------------- */

/* The only way a neighbour changes state (the table of legal transitions
 * is in neighbor.c); keeps the set's counts. */
void peer_neighbor_set_state(peer_neighbor_t *n, peer_neighbor_state_t to);
/* The neighbour's entry for digest, or NULL. */
peer_neighbor_rel_t *peer_neighbor_rel_find(peer_neighbor_t *n,
                                            const uint8_t *digest);
/* The entry for digest, made empty when new; NULL over the cap. */
peer_neighbor_rel_t *peer_neighbor_rel_get(peer_neighbor_t *n,
                                           const uint8_t *digest);
/* Takes its BITFIELD b into r: its new word on every chunk. An invalid
 * bitfield closes n and returns an error. */
int peer_neighbor_rel_set(peer_neighbor_t *n, peer_neighbor_rel_t *r,
                          const ws_bitfield_msg_t *b);
/* Its HAVE h: sets the bit; "p" (live) adds the chunk to the ones arriving
 * there, a plain HAVE removes it. */
void peer_neighbor_rel_have(peer_neighbor_rel_t *r, const ws_have_t *h);
/* 1 when n holds global chunk g of the release digest of total chunks. */
int peer_neighbor_has(peer_neighbor_t *n, const uint8_t *digest, uint32_t total,
                      uint32_t g);
/* 1 when r's chunk g is one it is still fetching from origin (HAVE "p"). */
int peer_neighbor_rel_live(const peer_neighbor_rel_t *r, uint32_t g);
/* It refused chunk g of digest, or failed to finish sending it: not asked
 * for again for PEER_REJECT_HIDE_MS; one it only said was arriving is
 * forgotten (its fetch failed; the next holder says so). */
void peer_neighbor_hide(peer_neighbor_t *n, const uint8_t *digest, uint32_t g);
/* Chunks it refused a while ago count as its again (the caller kicks). */
void peer_neighbor_unhide(peer_neighbor_t *n, uint64_t now_ms);
/* Sends a message: 0; WS_ELIMIT when the send queue is full (not sent;
 * want_drain set, on_drain retries the uploads); -ENOTCONN when n is not
 * ready; another error closes n. */
int peer_neighbor_send(peer_neighbor_t *n, const ws_msg_t *m);
/* Closes with GOODBYE(reason) (or at once when not ready). */
void peer_neighbor_close(peer_neighbor_t *n, ws_bye_reason_t reason);
/* Arms n's timer to fire within ms (rate-limit waits of reads and
 * uploads; both re-check their bucket when it fires). */
void peer_neighbor_timer_arm(peer_neighbor_t *n, uint64_t ms);
/* Reading paused for lack of a buffer may go on (download.c's wake). */
void peer_neighbor_read_resume(void *n);
/* Pauses reading until peer_neighbor_read_resume (no buffer). */
void peer_neighbor_read_pause_pool(peer_neighbor_t *n);
/* Its read-pause flags changed: keeps paused_ms (time held by us). */
void peer_neighbor_pause_note(peer_neighbor_t *n);
/* Milliseconds its reads have been held by us in all, up to now. */
uint64_t peer_neighbor_paused(const peer_neighbor_t *n, uint64_t now_ms);
/* It missed a progress deadline: benched for PEER_NBR_BENCH_MS; 1 when
 * that makes PEER_NBR_MISSES_MAX and it should be closed. */
int peer_neighbor_missed(peer_neighbor_t *n, uint64_t now_ms);
/* Chunks arriving from n now: their first CHUNK header came, their last
 * byte has not. */
uint32_t peer_neighbor_arriving(const peer_neighbor_t *n);
/* 1 when n is idle (nothing open either way, no chunk or manifest byte
 * for PEER_NBR_IDLE_MS, not refused one of our upload slots in that
 * time): its slot may go to another. */
int peer_neighbor_idle(const peer_neighbor_t *n, uint64_t now_ms);
/* Ready neighbour with this node id at this address (host: the numeric
 * address of its connection) other than except, or NULL. A node is its id
 * at its address: a keyed client elsewhere that claims the id is another
 * neighbour, and never stands in for the real one. */
peer_neighbor_t *peer_neighbors_find_ready(peer_neighbors_t *set,
                                           const char *node_id,
                                           const char *host,
                                           const peer_neighbor_t *except);
/* 1 when a neighbour in any state is node_id at host, or was dialed at host
 * as node_id. */
int peer_neighbors_knows(const peer_neighbors_t *set, const char *node_id,
                         const char *host);
/* 1 when a ready neighbour other than n holds chunk g of digest. */
int peer_neighbors_other_holds(const peer_neighbors_t *set,
                               const peer_neighbor_t *n, const uint8_t *digest,
                               uint32_t g);
/* n was refused one of our upload slots (busy) at now_ms: it waits for
 * one; n->waiting ends when it gets one. A waiting neighbour is not idle
 * (peer_neighbor_idle). */
void peer_neighbor_slot_wait(peer_neighbor_t *n, uint64_t now_ms);
/* 1 when a ready neighbour other than n that we upload nothing to was
 * refused a slot within PEER_SLOT_HOLD_MS: n, whose upload just ended,
 * leaves the freed slot to it (upload.c). */
int peer_neighbors_slot_waiter(const peer_neighbor_t *n, uint64_t now_ms);
/* The ready neighbour idle longest among the idle ones, or NULL. */
peer_neighbor_t *peer_neighbors_idlest(peer_neighbors_t *set, uint64_t now_ms);
/* 1 when a connection more may be dialed: under --max-neighbors, or under
 * it plus PEER_NBR_SPARE with an idle neighbour to replace. */
int peer_neighbors_room(peer_neighbors_t *set, uint64_t now_ms);
/* Connections we dialed, open or being opened, other than except (may be
 * NULL). */
uint32_t peer_neighbors_dialed(const peer_neighbors_t *set,
                               const peer_neighbor_t *except);
/* 1 when a node the tracker or the address book named may be dialed:
 * peer_neighbors_room() with fewer dialed connections than half of
 * --max-neighbors (PEER_NBR_DIAL_SHARE; the rest of the slots are for
 * nodes that dial us), or fewer than PEER_NBR_DIALED_MIN dialed
 * connections however many accepted ones there are, or a free slot when
 * the slots have not been full for PEER_NBR_INBOUND_WAIT_MS with our
 * share dialed (nobody came to take the rest). */
int peer_neighbors_room_dial(peer_neighbors_t *set, uint64_t now_ms);
/* Ready neighbours holding global chunk g of the release digest. */
uint32_t peer_neighbors_holding(const peer_neighbors_t *set,
                                const uint8_t *digest, uint32_t total,
                                uint32_t g);

/* ---- neighbor_requests.c ------------------------------------------------ */

/* Sends a REQUEST for chunk j of file (global g of rel, digest) in a free
 * slot (there must be one) and counts it on the file: a fresh request
 * takes the chunk (MISSING -> INFLIGHT), a duplicate (dup) only a file
 * reference. 0, or the send's error (nothing taken). */
int peer_request_send(peer_neighbor_t *n, struct peer_swarm_rel_s *rel,
                      const uint8_t *digest, peer_file_t *file, uint32_t g,
                      uint32_t j, bool dup) WS_MUST_USE;
/* 1 when n has a request out for chunk j of f. */
int peer_request_pending(const peer_neighbor_t *n, const peer_file_t *f,
                         uint32_t j);
/* The slot of request (g, req_id) of digest, or -1. */
int peer_request_find(const peer_neighbor_t *n, const uint8_t *digest,
                      uint32_t g, uint32_t req_id);
/* Drops request i (status: why) and gives its chunk back when no other
 * request or download holds it. */
void peer_request_drop(peer_neighbor_t *n, uint32_t i, int status);
/* Gives chunk j of file back when no request or download holds it. */
void peer_request_chunk_release(peer_file_t *file, uint32_t j);
/* CANCEL for request (g, req_id) of digest; best effort: if it does not
 * go, whatever still arrives for it is discarded. */
void peer_request_send_cancel(peer_neighbor_t *n, const uint8_t *digest,
                              uint32_t g, uint32_t req_id);
/* Cancels the other neighbours' requests for chunk j of file (the first
 * sender won). */
void peer_requests_cancel_others(peer_neighbors_t *set, peer_neighbor_t *keep,
                                 peer_file_t *file, uint32_t j);
/* Cancels every request of n for rel (record going away). */
void peer_requests_forget_rel(peer_neighbor_t *n,
                              const struct peer_swarm_rel_s *rel);
/* Cancels requests not answered in PEER_REQUEST_TIMEOUT_MS; how many. */
uint32_t peer_requests_timeouts(peer_neighbor_t *n, uint64_t now_ms);

/* ---- neighbor_deadline.c ------------------------------------------------ */

/* The chunk (g, req_id) of digest arriving in pieces, or NULL. */
peer_pieces_t *peer_pieces_find(peer_neighbor_t *n, const uint8_t *digest,
                                uint32_t g, uint32_t req_id);
/* A free slot for a chunk in pieces, or NULL. */
peer_pieces_t *peer_pieces_free(peer_neighbor_t *n);
/* Ends a chunk arriving in pieces (status < 0: given up, the chunk goes
 * back to be fetched again). */
void peer_pieces_end(peer_neighbor_t *n, peer_pieces_t *pc, int status);
/* Chunk pc (in pieces, or n->whole) starts arriving: its deadline runs. */
void peer_rx_start(peer_neighbor_t *n, peer_pieces_t *pc);
/* len more bytes of chunk pc came from n. */
void peer_rx_got(peer_neighbor_t *n, peer_pieces_t *pc, uint32_t len);
/* Chunk pc came whole: its rate joins the typical one; n's misses are
 * forgiven. */
void peer_rx_sample(peer_neighbor_t *n, const peer_pieces_t *pc);
/* Housekeeping of a ready neighbour: refused chunks become askable again;
 * chunks past their progress deadline or stalled in their file's endgame
 * (PEER_CHUNK_ENDGAME_STALL_MS), stalled chunks in pieces and
 * unanswered requests are asked elsewhere, and n benched or closed. */
void peer_neighbor_tick(peer_neighbor_t *n, uint64_t now_ms);
/* The slots are full and a newcomer is ready: the idlest neighbour makes
 * room if idle long enough, else a spare slot is lent for a while
 * (PEER_NBR_SPARE). 0 when neither. */
int peer_neighbors_make_room(peer_neighbors_t *set, uint64_t now_ms);
/* More neighbours ready than --max-neighbors (spare slots lent): the idle
 * ones go, idlest first, until the count is back. */
void peer_neighbors_trim(peer_neighbors_t *set, uint64_t now_ms);

#endif
