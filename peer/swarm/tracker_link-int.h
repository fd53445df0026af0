/* tracker_link-int.h - tracker_link's internals, shared by tracker_link.c
 * and tracker_link_room.c only (see tracker_link.c for the ownership and
 * state machine, tracker_link.h for the room rules). Loop thread only.
 */
#ifndef PEER_SWARM_TRACKER_LINK_INT_H
#define PEER_SWARM_TRACKER_LINK_INT_H

#include "swarm/tracker_link.h"

typedef enum {
  TC_CONNECTING,
  TC_READY,
  TC_BACKOFF,
  TC_CLOSING,
  TC_STATE_LAST
} tc_state_t;

typedef struct {
  uint8_t digest[WS_PROTO_DIGEST_LEN];
  uint32_t total;
  ws_bitfield_t have; /* nbits == total when total > 0 */
  uint32_t *delta;    /* chunks gained since the last announce */
  uint32_t n_delta, cap_delta;
  bool full;    /* next announce carries the whole bitfield */
  bool due_now; /* announce at the next flush */
  char *uri;    /* owned or NULL */
  uint8_t role; /* ws_swarm_role_t */
  bool want;
  uint8_t event; /* ws_ann_event_t of the next announce */
  uint32_t interval_ms;
  uint64_t next_ms;
  bool asked;   /* an announce of it is not answered yet */
  uint8_t soon; /* announces brought forward (peer_tracker_link_soon) */
  /* Room at the tracker (tracker_link_room.c). */
  uint64_t seq;        /* recency: set when tracked and when completed */
  bool parked;         /* a seed not announced: the tracker had no room */
  bool dropped;        /* a seed was parked to make room for this one */
  uint64_t refused_ms; /* first refusal with nothing to drop, 0: none */
  uint32_t retry_ms;   /* current backoff of a refused release */
} tc_rel_t;

struct peer_tracker_link_s {
  uv_loop_t *loop;   /* borrowed */
  uv_timer_t timer;  /* data = this client */
  bool timer_closed; /* its close callback ran */
  wire_conn_t *conn; /* owned link, NULL while down */
  tc_state_t state;
  peer_tracker_link_cfg_t cfg;
  peer_tracker_link_cbs_t cbs;
  tc_rel_t *rels[PEER_TRACKER_LINK_RELEASES_MAX];
  uint32_t nrels;
  uint64_t seq;        /* last tc_rel_t.seq handed out */
  bool refused_logged; /* turned away, said so; cleared once accepted */
  peer_tracker_link_stats_t st;
};

/* tracker_link.c */
int tc_send_announce(peer_tracker_link_t *tc, tc_rel_t *r);
void tc_schedule(peer_tracker_link_t *tc);
void tc_flush(peer_tracker_link_t *tc);

/* tracker_link_room.c */
/* ord[0..nrels) = the releases in the order to announce them. */
void tc_room_order(const peer_tracker_link_t *tc, tc_rel_t **ord);
/* The tracker refused digest with WS_ELIMIT. */
void tc_room_refused(peer_tracker_link_t *tc, const uint8_t *digest);
/* The tracker answered an announce of r: it holds r. */
void tc_room_accepted(tc_rel_t *r);
/* A release the tracker held was stopped: a parked seed may take its
 * place. */
void tc_room_freed(peer_tracker_link_t *tc);
/* r will next be announced as new (full bitfield, STARTED). */
void tc_rel_restart(tc_rel_t *r);

#endif
