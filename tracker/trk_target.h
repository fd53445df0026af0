/* trk_target.h - targeted prefetch: which nodes a wanted release is for.
 *
 * A POST /api/v1/prefetch may carry a selector (trk_selector_t, see
 * trk_wanted.h): labels and zones narrow the nodes, count and percent cap
 * how many of them fetch. Under a cap the nodes are chosen by rendezvous
 * score of (node id, digest) among the matching connected nodes, so the
 * choice does not depend on connection order and the same nodes are chosen
 * again after a tracker restart; a chosen node stays chosen (its id is
 * kept in the entry and in the --state file), and nodes that join later
 * are admitted while the cap allows. A node hears a wanted release only
 * when the release selects it (trk_target_selects).
 *
 * Pure logic over the registry and the wanted set, loop thread only.
 */
#ifndef TRK_TARGET_H
#define TRK_TARGET_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "trk_peer.h"
#include "trk_wanted.h"

/* Parses an API selector:
 *   {"labels": {"k": "v", ...}, "zones": ["a", ...], "count": N,
 *    "percent": P}
 * every key optional; any other key with a string value is a label too
 * (shorthand: {"pool": "a100"}). 0, or WS_EUSAGE with *msg saying why. */
int trk_selector_from_json(const cJSON *j, trk_selector_t *out,
                           const char **msg) WS_MUST_USE;
/* The selector in the API form above (labels as an object); NULL on
 * allocation failure. */
cJSON *trk_selector_to_json(const trk_selector_t *s);
/* 1 when p has every label of s and is in one of its zones (if any). */
int trk_selector_matches(const trk_selector_t *s, const trk_peer_t *p);

/* Rendezvous score of a node for a release (higher is chosen first). */
uint64_t trk_target_score(const char *node_id, const ws_hash_t *digest);
/* 1 when the wanted release e is for peer p. */
int trk_target_selects(const trk_wanted_entry_t *e, const trk_peer_t *p);
/* Admits matching connected nodes, best score first, until the entry with
 * this digest reaches its cap (no-op without one). 1 when nodes were
 * chosen, 0 when none, <0 on error. */
int trk_target_refresh(trk_wanted_t *w, const trk_peers_t *peers,
                       const ws_hash_t *digest);
/* trk_target_refresh for every capped entry (a node connected). 1 when
 * any node was chosen. */
int trk_target_refresh_all(trk_wanted_t *w, const trk_peers_t *peers);
/* Adds "selector" (null without one) and "targets" (sorted node ids of
 * the connected nodes e is for) to o. 0 or -ENOMEM. */
int trk_target_json_add(cJSON *o, const trk_wanted_entry_t *e,
                        const trk_peers_t *peers);

#endif
