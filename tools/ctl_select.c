/* ctl_select.c - collects the repeatable --include / --exclude GLOB options
 * (ctl_select.h) for `p2pctl publish` and `p2pctl manifest create`; the
 * matching itself is ws_path_glob_match's. Main thread. */
#include "ctl_select.h"

#include <stdio.h>
#include <string.h>

#include "ws_err.h"

static int add(const char *prog, const char *opt, const char *val,
               const char **list, unsigned *n) {
  if (val == NULL || val[0] == '\0') {
    fprintf(stderr, "%s: --%s: want a GLOB\n", prog, opt);
    return WS_EUSAGE;
  }
  if (*n == CTL_SELECT_MAX) {
    fprintf(stderr, "%s: --%s: at most %d patterns\n", prog, opt,
            CTL_SELECT_MAX);
    return WS_EUSAGE;
  }
  list[(*n)++] = val;
  return 0;
}

/* 1 when argv[i] is "--NAME" (the value follows) of an option taking one. */
static int takes_value(const ws_args_spec_t *s, const char *arg) {
  int k;
  if (strncmp(arg, "--", 2) != 0 || strchr(arg, '=') != NULL)
    return 0;
  k = ws_args_find(s, arg + 2);
  return k >= 0 && s->args[k].type != WS_ARG_BOOL;
}

int ctl_select_collect(const ws_args_spec_t *s, int argc, char **argv,
                       ctl_select_t *out) {
  memset(out, 0, sizeof(*out));
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    const char **list = NULL;
    unsigned *n = NULL;
    const char *opt = NULL;
    if (strcmp(a, "--") == 0)
      break;
    if (strncmp(a, "--include", 9) == 0 && (a[9] == '\0' || a[9] == '=')) {
      opt = "include", list = out->include, n = &out->ninclude;
      val = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
    } else if (strncmp(a, "--exclude", 9) == 0 &&
               (a[9] == '\0' || a[9] == '=')) {
      opt = "exclude", list = out->exclude, n = &out->nexclude;
      val = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
    } else {
      if (takes_value(s, a))
        i++;
      continue;
    }
    if (add(s->prog, opt, val, list, n) != 0)
      return WS_EUSAGE;
  }
  return 0;
}

void ctl_select_apply(const ctl_select_t *sel, ws_manifest_build_opts_t *o) {
  o->include = sel->include;
  o->ninclude = sel->ninclude;
  o->exclude = sel->exclude;
  o->nexclude = sel->nexclude;
}
