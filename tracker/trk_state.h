/* trk_state.h - the optional --state FILE: the wanted set, persisted.
 *
 * The only tracker state that peers cannot re-announce is a prefetch
 * POSTed but not yet acted on, so that is all the file holds (the
 * trk_wanted_to_json form). Loading happens once at start-up, before the
 * loop runs (synchronous reads are fine then); saving runs on the loop
 * with uv_fs_* requests (write a temp file, fsync, rename), coalescing
 * changes that arrive while a save is in flight. Loop thread only.
 */
#ifndef TRK_STATE_H
#define TRK_STATE_H

#include <uv.h>

#include "trk_wanted.h"
#include "ws_err.h"

typedef struct trk_state_s trk_state_t;
typedef void (*trk_state_close_cb)(void *arg);

/* Reads path into w (synchronously: start-up only). A missing file is
 * 0 (nothing to restore). *loaded gets the entry count. WS_EJSON /
 * WS_ELIMIT / -errno otherwise. */
int trk_state_load(const char *path, trk_wanted_t *w, uint64_t now_ms,
                   uint32_t *loaded) WS_MUST_USE;

/* Returns a new saver for path (copied) writing w (borrowed), or NULL. */
trk_state_t *trk_state_new(uv_loop_t *loop, const char *path,
                           const trk_wanted_t *w);
/* Schedules a save of the current set; errors are logged. */
void trk_state_save(trk_state_t *s);
/* Schedules a save if the set changed since the last one (the tracker
 * removes entries by itself: superseded, expired). */
void trk_state_sync(trk_state_t *s);
/* Finishes any save in flight, then calls cb (may be NULL) and frees s. */
void trk_state_close(trk_state_t *s, trk_state_close_cb cb, void *arg);

#endif
