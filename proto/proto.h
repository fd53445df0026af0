/* proto.h - weightswarm wire protocol: frames, messages, handshake, limits.
 *
 * Pure library: no sockets, no files, no clocks, no threads of its own. Every
 * function is safe to call from a loop thread (the CPU work is msgpack
 * encode/decode of small bodies, HMAC over control frames, and AES-256-GCM
 * over sealed payloads at a few GB/s; never a hash over chunk payloads).
 * Objects belong to one thread at a time. docs/protocol.md is the normative
 * description of the bytes; this header is the C view of it.
 *
 * Frame on the wire (all integers big-endian):
 *
 *   0      2    3     4      5        8          12           16
 *   | "WS" | ver | type | flags | 0 0 0 | body_len | payload_len |
 *   then body_len bytes of msgpack (one map with short string keys),
 *   then 32 bytes MAC if flags & WS_FRAME_F_MAC,
 *   then payload_len raw bytes (CHUNK and MANIFEST only; never msgpack),
 *   then a 16-byte tag if flags & WS_FRAME_F_SEALED and payload_len > 0
 *   (the payload is then AES-256-GCM ciphertext: ws_payload_aead_t).
 *
 * Ownership convention: "borrows" = pointer must stay valid for the call
 * only; "takes" = callee frees; "returns-new" = caller frees with the named
 * function. Decoded messages own their arrays (free with ws_msg_free); structs
 * passed to encoders are only read.
 */
#ifndef WS_PROTO_H
#define WS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"
#include "ws_labels.h"

/* ---- constants and limits (a remote can grow nothing beyond these) ---- */

#define WS_PROTO_VERSION 1 /* frame header version byte */
/* HELLO "v": the highest protocol version this side speaks. Version 2 adds
 * sealed payloads; both sides use the lower of their two versions. */
#define WS_HELLO_VERSION 2
#define WS_HELLO_VERSION_SEALED 2 /* first version with sealed payloads */
#define WS_FRAME_HDR_LEN 16       /* fixed header */
#define WS_FRAME_MAC_LEN 32       /* crypto_auth_hmacsha512256_BYTES */
#define WS_FRAME_F_MAC 0x01       /* flags: 32-byte MAC follows the body */
#define WS_FRAME_F_SEALED 0x02    /* flags: payload encrypted, tag follows it */
#define WS_PAYLOAD_TAG_LEN 16     /* AES-256-GCM tag after a sealed payload */
#define WS_PROTO_DIGEST_LEN 32    /* raw sha256 of the manifest bytes */
#define WS_HS_NONCE_LEN 32
#define WS_CLUSTER_KEY_LEN 32

/* Body cap before the handshake completes: HELLO/AUTH/ERROR are small. */
#define WS_MAX_BODY_PREAUTH 4096u
/* Body cap after: a BITFIELD for WS_MAX_TOTAL_CHUNKS needs 512 KiB. */
#define WS_MAX_BODY (1024u * 1024u)
/* Raw payload cap (a chunk or a manifest): 64 MiB, the largest chunk_size a
 * manifest may declare (WS_CHUNK_SIZE_MAX in manifest.h). */
#define WS_MAX_PAYLOAD (64u * 1024u * 1024u)
/* Chunks per release: 4 Mi chunks of >= 1 MiB covers 4 TiB releases. */
#define WS_MAX_TOTAL_CHUNKS (4u * 1024u * 1024u)
/* Requests whose CHUNK pieces may be interleaved on one connection, to a
 * peer whose BITFIELD said "mux". */
#define WS_MUX_MAX 4u
#define WS_MAX_PEERS 64         /* peers in one ANNOUNCE_REPLY */
#define WS_MAX_LEASES 64        /* leases in one ANNOUNCE_REPLY */
#define WS_MAX_LEASE_CHUNKS 256 /* chunks in one lease */
#define WS_MAX_WANTED 64        /* wanted releases in one ANNOUNCE_REPLY */
#define WS_MAX_NODES 32         /* nodes in one ANNOUNCE_REPLY */
#define WS_MAX_TREE 16          /* stripes in one ANNOUNCE_REPLY's "tree" */
#define WS_MAX_CHUNK_LIST 65536 /* ANNOUNCE delta, LEASE_* lists */
#define WS_MAX_DEPTH 8          /* msgpack nesting depth */
#define WS_MAX_OBJECTS 200000   /* msgpack objects in one body */
#define WS_NODE_ID_MAX 128      /* bytes, without NUL */
#define WS_HOST_MAX 255
#define WS_ZONE_MAX 64
#define WS_URI_MAX 2048
#define WS_ERRMSG_MAX 256

/* ---- message types (header byte). Unknown types are skipped by callers;
 * gaps are reserved for future families. ---- */
typedef enum {
  WS_MSG_HELLO = 1,
  WS_MSG_AUTH = 2,
  WS_MSG_ERROR = 3,
  WS_MSG_GOODBYE = 4,
  WS_MSG_ANNOUNCE = 16,
  WS_MSG_ANNOUNCE_REPLY = 17,
  WS_MSG_LEASE_RENEW = 18,
  WS_MSG_LEASE_RELEASE = 19,
  WS_MSG_HAVE = 32,
  WS_MSG_BITFIELD = 33,
  WS_MSG_REQUEST = 34,
  WS_MSG_CANCEL = 35,
  WS_MSG_CHUNK = 36,  /* payload: the chunk bytes */
  WS_MSG_REJECT = 37, /* also "busy": reason WS_REJECT_BUSY */
  WS_MSG_MANIFEST_REQ = 38,
  WS_MSG_MANIFEST = 39, /* payload: the manifest.json bytes */
  WS_MSG_LAST
} ws_msg_type_t;

typedef enum { WS_ROLE_PEER = 0, WS_ROLE_TRACKER = 1, WS_ROLE_LAST } ws_role_t;
typedef enum {
  WS_SWARM_LEECH = 0,
  WS_SWARM_SEED = 1,
  WS_SWARM_LAST
} ws_swarm_role_t;
typedef enum {
  WS_ANN_UPDATE = 0,
  WS_ANN_STARTED = 1,
  WS_ANN_COMPLETED = 2,
  WS_ANN_STOPPED = 3,
  WS_ANN_LAST
} ws_ann_event_t;
typedef enum {
  WS_REJECT_NOT_HAVE = 0, /* we do not hold that chunk (yet) */
  WS_REJECT_BUSY = 1,     /* too many in flight; retry after retry_after_ms */
  WS_REJECT_BAD = 2,      /* malformed or out-of-range request */
  WS_REJECT_UNKNOWN = 3,  /* release not known here */
  WS_REJECT_LAST
} ws_reject_reason_t;
typedef enum {
  WS_BYE_SHUTDOWN = 0,
  WS_BYE_IDLE = 1,
  WS_BYE_PROTOCOL = 2,
  WS_BYE_BANNED = 3,
  WS_BYE_AUTH = 4,
  WS_BYE_LAST
} ws_bye_reason_t;

/* True for the types this build can decode. */
bool ws_msg_type_known(uint8_t type);
/* "HELLO", ...; "UNKNOWN" otherwise. Static storage. */
const char *ws_msg_type_name(uint8_t type);
/* True for types whose frame may carry a raw payload (CHUNK, MANIFEST). */
bool ws_msg_type_has_payload(uint8_t type);

/* ---- growable bounded byte buffer (encoder output) ---- */
typedef struct {
  uint8_t *data; /* owned; NULL until first write */
  size_t len;
  size_t cap;
  size_t max; /* appends past max fail with WS_ELIMIT */
} ws_pbuf_t;

void ws_pbuf_init(ws_pbuf_t *b, size_t max);
void ws_pbuf_free(ws_pbuf_t *b);  /* accepts an initialised, empty buffer */
void ws_pbuf_reset(ws_pbuf_t *b); /* len = 0, keeps memory */
int ws_pbuf_append(ws_pbuf_t *b, const void *p, size_t n) WS_MUST_USE;

/* ---- bitfields: bit i is byte i/8, mask 0x80 >> (i%8) (MSB first) ---- */
typedef struct {
  uint8_t *bits; /* owned, ws_bitfield_nbytes(nbits) bytes */
  uint32_t nbits;
} ws_bitfield_t;

size_t ws_bitfield_nbytes(uint32_t nbits);
/* All clear. nbits 1..WS_MAX_TOTAL_CHUNKS else WS_ELIMIT; -ENOMEM. */
int ws_bitfield_init(ws_bitfield_t *bf, uint32_t nbits) WS_MUST_USE;
void ws_bitfield_free(ws_bitfield_t *bf); /* accepts zeroed struct */
/* Copies len bytes; len must equal nbytes(nbits) and the spare bits of the
 * last byte must be zero (WS_EBADMSG). bf is written only on success. */
int ws_bitfield_from_bytes(ws_bitfield_t *bf, uint32_t nbits,
                           const uint8_t *bytes, size_t len) WS_MUST_USE;
void ws_bitfield_set(ws_bitfield_t *bf, uint32_t i);        /* i < nbits */
void ws_bitfield_clear(ws_bitfield_t *bf, uint32_t i);      /* i < nbits */
bool ws_bitfield_test(const ws_bitfield_t *bf, uint32_t i); /* false OOB */
uint32_t ws_bitfield_count(const ws_bitfield_t *bf);
bool ws_bitfield_full(const ws_bitfield_t *bf);
/* First set bit >= from, or nbits when none. */
uint32_t ws_bitfield_next_set(const ws_bitfield_t *bf, uint32_t from);
/* First clear bit >= from, or nbits when none. */
uint32_t ws_bitfield_next_clear(const ws_bitfield_t *bf, uint32_t from);

/* ---- message structs ---- */
typedef struct {
  uint32_t version; /* WS_HELLO_VERSION (the sender's highest) */
  uint8_t nonce[WS_HS_NONCE_LEN];
  char node_id[WS_NODE_ID_MAX + 1]; /* non-empty */
  uint16_t port;                    /* listen port, 0 = none */
  uint8_t role;                     /* ws_role_t */
  char zone[WS_ZONE_MAX + 1];       /* may be empty */
  /* Optional node labels, canonical "k=v,k2=v2" (ws_labels.h), key "lb";
   * empty is not sent, and peers that predate it never send it. */
  char labels[WS_LABELS_MAX + 1];
  /* Optional "rj" (peer -> tracker): this node had been accepted by a
   * tracker at the address it dialed and lost that link; it is joining
   * again. Sent only when true (older trackers ignore it). A tracker that
   * hears it within TRK_RESTART_HOLD_MS of its start has restarted, with or
   * without --state (docs/tracker.md, "The restart hold"). */
  bool rejoin;
} ws_hello_t;

typedef struct {
  uint8_t mac[WS_FRAME_MAC_LEN];
} ws_auth_t;

typedef struct {
  int32_t code; /* ws_err.h code or -errno */
  char msg[WS_ERRMSG_MAX + 1];
  /* Optional "d": the release the error is about (a tracker refusing an
   * ANNOUNCE names it, so the peer knows which one); absent on the wire
   * when has_digest is false, and older peers ignore it. */
  bool has_digest;
  uint8_t digest[WS_PROTO_DIGEST_LEN];
} ws_error_t;

typedef struct {
  uint32_t reason; /* ws_bye_reason_t; unknown values allowed */
} ws_goodbye_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t total_chunks; /* 0 = manifest not known yet */
  uint8_t event;         /* ws_ann_event_t */
  uint8_t role;          /* ws_swarm_role_t */
  bool want;             /* still wants chunks */
  uint16_t port;
  char zone[WS_ZONE_MAX + 1];
  /* At most one of have_bits (nbytes(total_chunks) bytes, full state) and
   * have_list (chunks gained since the last announce) is set. */
  uint8_t *have_bits;
  uint32_t *have_list;
  uint32_t n_have_list;
  char *uri; /* NULL or NUL-terminated, <= WS_URI_MAX: where to fetch */
  /* Optional progress report for the tracker's dashboard (docs/protocol.md:
   * sz, s3, pb, err). 0 / "" are not sent; an old tracker ignores them. */
  uint64_t size_bytes;         /* release bytes (manifest total) */
  uint64_t s3_bytes;           /* bytes of it this node read from S3 */
  uint64_t peer_bytes;         /* bytes of it received from neighbours */
  char err[WS_ERRMSG_MAX + 1]; /* this node's last error for the release */
  /* Optional "st": chunks this node has waited on past its stall time
   * with no byte from anyone (docs/protocol.md), at most
   * WS_MAX_LEASE_CHUNKS, each < total_chunks. Absent: none; an old
   * tracker ignores it. */
  uint32_t *stuck;
  uint32_t n_stuck;
  /* Optional "pf": chunks this node lacks that it wants read from S3
   * before the rest (p2pd: its single-chunk files), at most
   * WS_MAX_LEASE_CHUNKS, each < total_chunks. Absent: none; an old tracker
   * ignores it. */
  uint32_t *first;
  uint32_t n_first;
} ws_announce_t;

typedef struct {
  char node_id[WS_NODE_ID_MAX + 1];
  char host[WS_HOST_MAX + 1];
  uint16_t port;
  char zone[WS_ZONE_MAX + 1];
} ws_peer_info_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t *chunks; /* 1..WS_MAX_LEASE_CHUNKS */
  uint32_t n_chunks;
  uint32_t ttl_ms;
} ws_lease_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  char *uri; /* NULL or NUL-terminated */
} ws_wanted_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN]; /* the announce this answers */
  uint32_t interval_ms;
  ws_peer_info_t *peers;
  uint32_t n_peers;
  ws_lease_t *leases;
  uint32_t n_leases;
  ws_wanted_t *wanted;
  uint32_t n_wanted;
  /* Leases to fetch at full rate at once; the others are spares, started
   * as one of those ends. 0 (absent): fetch every lease at once. */
  uint32_t streams;
  /* Optional "nodes": a sample of other connected nodes (any release),
   * at most WS_MAX_NODES, in the reply to the presence announce; kept in
   * an address book to swap with while the tracker is down. Absent: none;
   * an old peer ignores it. */
  ws_peer_info_t *nodes;
  uint32_t n_nodes;
  /* Optional "tree": the node id of this node's parent in each stripe
   * tree, "" in the stripe it is the root of (docs/protocol.md); at most
   * WS_MAX_TREE. Absent: no trees; an old peer ignores it. */
  char (*tree)[WS_NODE_ID_MAX + 1];
  uint32_t n_tree;
} ws_announce_reply_t;

/* A node announces a release again ws_announce_delay_ms(iv, r) after the
 * reply that answered its last announce: iv shortened by a random share of
 * up to WS_ANNOUNCE_JITTER_PCT % (r: a uniform 32-bit random number).
 * Without it, nodes whose replies came together (a tracker that stalled, a
 * cluster-wide restart) stay in step for ever and hit the tracker in one
 * burst every interval (Floyd and Jacobson, "The Synchronization of
 * Periodic Routing Messages", 1993); docs/benchmarks.md "Tracker capacity",
 * session 29. Only ever shorter than iv, so a tracker's deadlines that
 * count intervals still hold. */
#define WS_ANNOUNCE_JITTER_PCT 15u

static inline uint32_t ws_announce_delay_ms(uint32_t iv, uint32_t r) {
  uint64_t span = (uint64_t)iv * WS_ANNOUNCE_JITTER_PCT / 100u;
  return iv - (uint32_t)((span * r) >> 32);
}

/* A node short of neighbours while it fetches announces the release again
 * WS_ANNOUNCE_SOON_MS after the reply, then twice that, at most
 * WS_ANNOUNCE_SOON_MAX times per release it joins, before the reply's
 * interval is over (at a cluster-wide start the first replies can name
 * only the members joined before it; docs/protocol.md). */
#define WS_ANNOUNCE_SOON_MS 1000u
#define WS_ANNOUNCE_SOON_MAX 2u

typedef struct { /* LEASE_RENEW and LEASE_RELEASE */
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t *chunks; /* renew: still working on; release: giving back */
  uint32_t n_chunks;
  uint32_t *done; /* fetched and verified */
  uint32_t n_done;
} ws_lease_upd_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t chunk;
  bool live; /* "p": being fetched from origin, served as it arrives */
  /* Optional "f" (to a tracker only): the node id of the neighbour this
   * chunk was received from and verified, "" when it came from S3 or is
   * not known. The tracker confirms that neighbour's have-claims with it
   * (docs/tracker.md "Weighing have-claims"); an old tracker ignores it. */
  char from[WS_NODE_ID_MAX + 1];
} ws_have_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t total_chunks; /* 1..WS_MAX_TOTAL_CHUNKS */
  uint8_t *bits;         /* ws_bitfield_nbytes(total_chunks) bytes */
  bool live; /* "live": the sender takes HAVE "p" and CHUNK pieces */
  bool mux;  /* "mux": and pieces of up to WS_MUX_MAX requests interleaved */
} ws_bitfield_msg_t;

typedef struct { /* REQUEST and CANCEL */
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t chunk;
  uint32_t req_id;
} ws_request_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t chunk;
  uint32_t req_id;
  uint32_t len; /* == frame payload_len, 1..WS_MAX_PAYLOAD */
  bool piece;   /* "o" present: the payload is bytes off.. of the chunk */
  uint32_t off; /* piece: offset in the chunk (< WS_MAX_PAYLOAD) */
} ws_chunk_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t chunk;
  uint32_t req_id;
  uint32_t reason; /* ws_reject_reason_t; unknown values allowed */
  uint32_t retry_after_ms;
} ws_reject_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
} ws_manifest_req_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t len; /* == frame payload_len, 1..WS_MAX_PAYLOAD */
} ws_manifest_msg_t;

typedef struct {
  uint8_t type; /* ws_msg_type_t; selects the union member */
  union {
    ws_hello_t hello;
    ws_auth_t auth;
    ws_error_t error;
    ws_goodbye_t goodbye;
    ws_announce_t announce;
    ws_announce_reply_t announce_reply;
    ws_lease_upd_t lease; /* LEASE_RENEW, LEASE_RELEASE */
    ws_have_t have;
    ws_bitfield_msg_t bitfield;
    ws_request_t request; /* REQUEST, CANCEL */
    ws_chunk_t chunk;
    ws_reject_t reject;
    ws_manifest_req_t manifest_req;
    ws_manifest_msg_t manifest;
  } u;
} ws_msg_t;

/* ---- frames ---- */
typedef struct {
  uint8_t version;
  uint8_t type;
  uint8_t flags;
  uint32_t body_len;
  uint32_t payload_len;
  const uint8_t *hdr;  /* WS_FRAME_HDR_LEN bytes (borrowed) */
  const uint8_t *body; /* body_len bytes (borrowed) */
  const uint8_t *mac;  /* WS_FRAME_MAC_LEN bytes, or NULL */
} ws_frame_t;

/* Parses one frame header (exactly WS_FRAME_HDR_LEN bytes) into f (body and
 * mac left NULL). WS_EPROTO bad magic or payload on a type that cannot carry
 * one, WS_EVERSION, WS_ELIMIT when body_len > max_body or payload_len >
 * max_payload. */
int ws_frame_hdr_parse(const uint8_t *hdr, uint32_t max_body,
                       uint32_t max_payload, ws_frame_t *f) WS_MUST_USE;
/* Parses one complete frame held in buf (header, body, mac; the payload is
 * not included). *used = bytes of the frame. WS_ETRUNCATED if buf is short.
 * f points into buf (borrowed). */
int ws_frame_parse(const uint8_t *buf, size_t len, uint32_t max_body,
                   uint32_t max_payload, ws_frame_t *f,
                   size_t *used) WS_MUST_USE;

/* Streaming reader: accepts bytes in arbitrary splits, buffers at most one
 * header + body + MAC (bounded by max_body), never buffers payloads: payload
 * bytes are handed out as PAYLOAD events pointing into the caller's input.
 *
 * States: HEADER -> BODY -> (PAYLOAD ->) HEADER; any error -> DEAD. */
typedef struct ws_frame_reader_s ws_frame_reader_t;

typedef enum {
  WS_FRAME_EV_NONE = 0, /* all input consumed, nothing complete */
  WS_FRAME_EV_FRAME,    /* ev.frame is a complete frame (payload follows
                           as PAYLOAD events when payload_len > 0) */
  WS_FRAME_EV_PAYLOAD,  /* ev.data/ev.len: next payload piece */
  WS_FRAME_EV_TAG,      /* ev.data: the WS_PAYLOAD_TAG_LEN-byte tag after a
                           sealed payload (points into the reader; valid
                           until the next feed) */
  WS_FRAME_EV_LAST
} ws_frame_ev_kind_t;

typedef struct {
  ws_frame_ev_kind_t kind;
  ws_frame_t frame;     /* FRAME: points into the reader; valid until the
                           reader starts the next frame's header */
  const uint8_t *data;  /* PAYLOAD: points into the caller's input */
  size_t len;           /* PAYLOAD: piece length (> 0) */
  uint32_t payload_off; /* PAYLOAD: offset of data within the payload */
  bool payload_last;    /* PAYLOAD: this piece ends the payload */
} ws_frame_ev_t;

/* Returns-new (free with _free), NULL on ENOMEM. max_body <= WS_MAX_BODY,
 * max_payload <= WS_MAX_PAYLOAD (clamped). */
ws_frame_reader_t *ws_frame_reader_new(uint32_t max_body, uint32_t max_payload);
void ws_frame_reader_free(ws_frame_reader_t *r);
/* New limits apply from the next frame header (e.g. after authentication). */
void ws_frame_reader_set_limits(ws_frame_reader_t *r, uint32_t max_body,
                                uint32_t max_payload);
/* Consumes a prefix of data (borrowed) and reports at most one event. Call
 * again with the rest (data + *used) until *used == len and ev->kind ==
 * NONE. *used is always written. Errors are sticky (the connection must be
 * closed): WS_EPROTO, WS_EVERSION, WS_ELIMIT, -ENOMEM. */
int ws_frame_reader_feed(ws_frame_reader_t *r, const uint8_t *data, size_t len,
                         size_t *used, ws_frame_ev_t *ev) WS_MUST_USE;
/* True between frames (no partial frame or payload buffered/pending). */
bool ws_frame_reader_idle(const ws_frame_reader_t *r);

/* ---- messages ---- */

/* Appends one frame (header + msgpack body, no MAC, no payload) for m to out
 * (borrows m). For CHUNK/MANIFEST the header's payload_len is m's len; the
 * caller sends the payload bytes after the frame. WS_EUSAGE for invalid
 * fields (over a limit, bad enum), WS_ELIMIT if out's max is reached (out is
 * restored to its previous length on any failure). */
int ws_msg_encode(const ws_msg_t *m, ws_pbuf_t *out) WS_MUST_USE;
/* Validates f's body with the pre-scanner, then decodes it into out (all
 * arrays newly allocated and owned by out: free with ws_msg_free). Unknown
 * map keys are ignored; missing or mistyped required keys and out-of-range
 * values are WS_EBADMSG; over-limit arrays WS_ELIMIT; an unknown type
 * WS_EPROTO (check ws_msg_type_known first and skip). out written only on
 * success. */
int ws_msg_decode(const ws_frame_t *f, ws_msg_t *out) WS_MUST_USE;
/* Frees the arrays a decode allocated; accepts a zeroed message. Do not call
 * on messages whose arrays the caller built itself. */
void ws_msg_free(ws_msg_t *m);

/* Pre-scan: walks one msgpack object in buf checking every declared
 * str/bin/ext length and array/map count against the bytes left, nesting
 * depth <= WS_MAX_DEPTH and object count <= WS_MAX_OBJECTS, and that the
 * object fills buf exactly. Run before any msgpack-c unpack (ws_msg_decode
 * does). 0, WS_ETRUNCATED, WS_ELIMIT or WS_EBADMSG. */
int ws_msgpack_scan(const uint8_t *buf, size_t len) WS_MUST_USE;

/* ---- handshake and frame authentication (libsodium) ----
 *
 * Both sides send HELLO (fresh 32-byte nonce), then AUTH: an HMAC-SHA512-256
 * keyed by a subkey of the cluster key over a transcript of both HELLO frames
 * and a direction label. The initiator (the side that connected) sends AUTH
 * first; the responder checks it before sending its own. After both AUTHs
 * check, ws_hs_session() yields per-direction keys for ws_frame_seal/open.
 * States: INIT -> HELLO_SENT/HELLO_RECVD -> HELLOS -> AUTHED. */
typedef struct {
  uint8_t tx_key[32];
  uint8_t rx_key[32];
  uint8_t tx_pkey[32]; /* payload AEAD keys (sealed sessions) */
  uint8_t rx_pkey[32];
  uint64_t tx_seq; /* next sequence number to seal */
  uint64_t rx_seq; /* next sequence number expected */
  /* Both HELLOs said >= WS_HELLO_VERSION_SEALED: every CHUNK and MANIFEST
   * payload is encrypted and authenticated (ws_payload_aead_t). */
  bool sealed;
} ws_session_t;

typedef struct {
  uint8_t auth_key[32];
  uint8_t sess_key[32];
  uint8_t my_nonce[WS_HS_NONCE_LEN];
  uint8_t my_hello_hash[32];   /* BLAKE2b-256 of our HELLO frame */
  uint8_t peer_hello_hash[32]; /* BLAKE2b-256 of the peer's HELLO frame */
  uint32_t my_version;         /* our HELLO "v" */
  uint32_t peer_version;       /* the peer's HELLO "v" */
  bool initiator;
  bool hello_sent, hello_recvd, auth_sent, auth_recvd;
} ws_hs_t;

/* Derives subkeys from the 32-byte cluster key (borrowed) and draws a fresh
 * nonce (randombytes_buf). Returns 0 or -ENOMEM if sodium_init fails. */
int ws_hs_init(ws_hs_t *hs, const uint8_t key[WS_CLUSTER_KEY_LEN],
               bool initiator) WS_MUST_USE;
/* Same with a caller-chosen nonce: for known-answer tests only. */
int ws_hs_init_nonce(ws_hs_t *hs, const uint8_t key[WS_CLUSTER_KEY_LEN],
                     bool initiator,
                     const uint8_t nonce[WS_HS_NONCE_LEN]) WS_MUST_USE;
/* Appends our HELLO frame (info borrowed; its nonce is replaced by the
 * handshake's; its version, when 1..WS_HELLO_VERSION, is what we offer, else
 * WS_HELLO_VERSION) to out. */
int ws_hs_hello_encode(ws_hs_t *hs, const ws_hello_t *info,
                       ws_pbuf_t *out) WS_MUST_USE;
/* Takes the peer's HELLO frame: decodes into out, checks type and version
 * (WS_EVERSION), records its transcript hash. */
int ws_hs_hello_recv(ws_hs_t *hs, const ws_frame_t *f,
                     ws_hello_t *out) WS_MUST_USE;
/* Appends our AUTH frame. WS_EPROTO before both HELLOs, or (responder)
 * before the initiator's AUTH checked. */
int ws_hs_auth_encode(ws_hs_t *hs, ws_pbuf_t *out) WS_MUST_USE;
/* Checks the peer's AUTH frame in constant time: WS_EAUTH on mismatch. */
int ws_hs_auth_recv(ws_hs_t *hs, const ws_frame_t *f) WS_MUST_USE;
bool ws_hs_done(const ws_hs_t *hs);
/* After ws_hs_done: per-direction session keys, sequences at 0. Wipes the
 * handshake secrets from hs. */
int ws_hs_session(ws_hs_t *hs, ws_session_t *out) WS_MUST_USE;
/* Wipes hs (sodium_memzero). */
void ws_hs_wipe(ws_hs_t *hs);

/* frame points at exactly one encoded frame (header + body, no MAC) at the
 * tail of out, starting at offset off: sets WS_FRAME_F_MAC, appends the MAC
 * over (tx_seq BE64 || header || body), advances tx_seq. */
int ws_frame_seal(ws_session_t *s, ws_pbuf_t *out, size_t off) WS_MUST_USE;
/* Verifies f's MAC against rx_seq and advances it. WS_EAUTH when the MAC is
 * missing or wrong (a replayed, reordered, or forged frame). */
int ws_frame_open(ws_session_t *s, const ws_frame_t *f) WS_MUST_USE;
/* Wipes keys. */
void ws_session_wipe(ws_session_t *s);

/* ---- sealed payloads (OpenSSL EVP AES-256-GCM, streaming) ----
 *
 * In a sealed session every CHUNK and MANIFEST payload is AES-256-GCM
 * ciphertext under the direction's payload key, with a 16-byte tag after
 * it; the frame header carries WS_FRAME_F_SEALED. The IV is 4 zero bytes
 * || BE64 of the carrying frame's sequence number (unique per key: one
 * payload per frame, keys fresh per connection), the AAD is that frame's
 * 16-byte header (type, flags, lengths). A payload streams: begin with the
 * frame, update piece by piece (in place allowed), then the tag. One
 * object per direction of a connection; it holds one EVP context. */
typedef struct ws_payload_aead_s ws_payload_aead_t;

/* Returns-new for key (32 bytes, borrowed: the schedule is kept, the caller
 * wipes its copy); encrypt or decrypt. NULL on ENOMEM or an OpenSSL
 * failure. */
ws_payload_aead_t *ws_payload_aead_new(const uint8_t key[32], bool encrypt);
void ws_payload_aead_free(ws_payload_aead_t *a);
/* Starts the payload of the frame with sequence number seq and header hdr
 * (WS_FRAME_HDR_LEN bytes, borrowed). */
int ws_payload_aead_begin(ws_payload_aead_t *a, uint64_t seq,
                          const uint8_t *hdr) WS_MUST_USE;
/* Encrypts or decrypts len bytes from in to out (out == in allowed). */
int ws_payload_aead_update(ws_payload_aead_t *a, const uint8_t *in,
                           uint8_t *out, size_t len) WS_MUST_USE;
/* Encrypting: writes the tag. Decrypting: checks tag (borrowed) in constant
 * time, WS_EAUTH when it does not match (the plaintext handed out so far
 * must then be thrown away). */
int ws_payload_aead_final(ws_payload_aead_t *a,
                          uint8_t tag[WS_PAYLOAD_TAG_LEN]) WS_MUST_USE;

#endif
