/* swarm_fixture.h - the swarm's chunk choice on a real loop for unit tests:
 * the fetch fixture (context, buffer pool, worker queue, chunk store in a
 * temp directory, files table), a real origin fetcher that starts no
 * transfer (no S3 slot), a real release table and picker, and neighbours
 * that are real authenticated wire_conn pairs over loopback TCP: our end
 * is a peer_neighbor_t the picker sends REQUESTs through, the other end
 * records what reaches it. Test process only; failures abort the test
 * through cmocka asserts.
 */
#ifndef SWARM_FIXTURE_H
#define SWARM_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "fetch/origin.h"
#include "fetch_fixture.h"
#include "swarm/bans.h"
#include "swarm/neighbor.h"
#include "swarm/picker.h"
#include "swarm/swarm_release.h"

#define SFX_NBRS_MAX 10
#define SFX_SEEN_MAX 64

/* What one neighbour's far end received, in order. */
typedef struct {
  uint8_t type;
  uint32_t chunk;
  uint32_t req_id;
} sfx_seen_t;

typedef struct sfx_s sfx_t;

typedef struct {
  sfx_t *sfx;
  peer_neighbor_t n;    /* our end, as the swarm sees it */
  wire_conn_t *remote;  /* the neighbour's end */
  wire_conn_cfg_t rcfg; /* its handshake */
  bool used, local_closed, remote_closed;
  sfx_seen_t seen[SFX_SEEN_MAX];
  unsigned nseen, nrequests, nbitfields;
} sfx_nbr_t;

struct sfx_s {
  ffx_t fx;
  peer_origin_t *origin;
  peer_bans_t bans;
  peer_neighbors_t set;
  peer_swarm_rels_t rels;
  peer_picker_t picker;
  peer_tracker_state_t tracker;
  wire_conn_cfg_t ours;
  uv_tcp_t lsn;
  uint16_t port;
  sfx_nbr_t nbrs[SFX_NBRS_MAX];
  unsigned nnbrs;
  sfx_nbr_t *accepting;
  peer_file_t *files[FFX_MAX_FILES];
  uint32_t nfiles;
  peer_swarm_rel_t *rel;
};

/* Fixture with a release of the n files of spec (chunk hashes), each file
 * open and FETCHING, the release FETCHING in the swarm table; tracker
 * configured and up. */
sfx_t *sfx_setup(const ffx_spec_t *spec, uint32_t n);
/* Drops every request, closes every connection, frees everything. */
void sfx_teardown(sfx_t *s);
/* Connects a neighbour named node_id (listen port listen_port) and runs
 * the loop until both ends are ready. */
sfx_nbr_t *sfx_neighbor(sfx_t *s, const char *node_id, uint16_t listen_port);
/* Its BITFIELD for the release: it holds the global chunks listed. */
void sfx_holds(sfx_nbr_t *nb, const uint32_t *chunks, uint32_t n);
/* Its HAVE for global chunk g. */
void sfx_have(sfx_nbr_t *nb, uint32_t g);
/* Global chunk index of chunk j of the file named name. */
uint32_t sfx_global(sfx_t *s, const char *name, uint32_t j);
/* The open file named name and its index in the manifest. */
peer_file_t *sfx_file(sfx_t *s, const char *name, uint32_t *k);
/* Runs the loop until the far end of nb has received `requests` REQUESTs
 * (fails after a few seconds). */
void sfx_wait_requests(sfx_nbr_t *nb, unsigned requests);
/* Lets the loop run a little (frames in flight arrive). */
void sfx_settle(sfx_t *s);
/* Global chunks of nb's requests out, in slot order, into g; count. */
uint32_t sfx_requests(const sfx_nbr_t *nb, uint32_t *g, bool *dup);
/* Drops every request nb has out (its chunks go back to MISSING). */
void sfx_drop_all(sfx_nbr_t *nb);

#endif
