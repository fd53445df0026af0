/* ctl_select.h - the repeatable --include / --exclude GLOB options of
 * `p2pctl publish` and `p2pctl manifest create` (ws_args keeps one value per
 * option, so every occurrence is collected here). Main thread. */
#ifndef WS_CTL_SELECT_H
#define WS_CTL_SELECT_H

#include "manifest.h"
#include "ws_args.h"

#define CTL_SELECT_MAX 64 /* patterns of each kind */

typedef struct {
  const char *include[CTL_SELECT_MAX]; /* borrowed from argv */
  unsigned ninclude;
  const char *exclude[CTL_SELECT_MAX];
  unsigned nexclude;
} ctl_select_t;

/* Help rows for the spec's option table. */
#define CTL_SELECT_INCLUDE_ROW                                                 \
  {                                                                            \
    "include", NULL, "GLOB", WS_ARG_STR, 0,                                    \
        "only files matching GLOB (repeatable; ** = any directories)"          \
  }
#define CTL_SELECT_EXCLUDE_ROW                                                 \
  {                                                                            \
    "exclude", NULL, "GLOB", WS_ARG_STR, 0,                                    \
        "leave out files/directories matching GLOB (repeatable)"               \
  }

/* Collects every --include/--exclude of argv[1..argc) (values of the spec's
 * other options skipped, nothing after "--"). 0, or WS_EUSAGE after
 * printing the reason (too many, empty pattern). */
int ctl_select_collect(const ws_args_spec_t *s, int argc, char **argv,
                       ctl_select_t *out) WS_MUST_USE;

/* Points the build options at the patterns (sel is borrowed). */
void ctl_select_apply(const ctl_select_t *sel, ws_manifest_build_opts_t *o);

#endif
