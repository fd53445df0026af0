/* ws_args.c - table-driven command-line parsing, sizes and durations
 * (ws_args.h). Main thread, start-up only; keeps no state.
 */
#include "ws_args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef WS_VERSION
#error "WS_VERSION must come from meson (common/meson.build)"
#endif

const char *ws_version(void) {
  return WS_VERSION;
}

void ws_args_print_version(const char *prog) {
  printf("%s %s\n", prog, WS_VERSION);
}

int ws_args_find(const ws_args_spec_t *s, const char *name) {
  for (size_t i = 0; i < s->nargs; i++) {
    if (strcmp(s->args[i].name, name) == 0)
      return (int)i;
  }
  return -1;
}

/* The row whose name is the first n bytes of name, or -1. */
static int args_find_n(const ws_args_spec_t *s, const char *name, size_t n) {
  for (size_t i = 0; i < s->nargs; i++) {
    if (strlen(s->args[i].name) == n && strncmp(s->args[i].name, name, n) == 0)
      return (int)i;
  }
  return -1;
}

static int args_error(const ws_args_spec_t *s, const char *what,
                      const char *arg) {
  fprintf(stderr, "%s: %s '%s' (see %s --help)\n", s->prog, what, arg, s->prog);
  return WS_EUSAGE;
}

/* One "--name[=value]" at argv[*i]; may consume argv[*i + 1]. */
static int args_long(const ws_args_spec_t *s, int argc, char **argv, int *i,
                     const char **vals) {
  const char *a = argv[*i] + 2;
  const char *eq = strchr(a, '=');
  size_t n = eq != NULL ? (size_t)(eq - a) : strlen(a);
  int k = args_find_n(s, a, n);
  if (k < 0) {
    if (n == 4 && strncmp(a, "help", 4) == 0)
      return WS_ARGS_HELP;
    if (n == 7 && strncmp(a, "version", 7) == 0)
      return WS_ARGS_VERSION;
    return args_error(s, "unknown option", argv[*i]);
  }
  if (s->args[k].type == WS_ARG_BOOL) {
    vals[k] = eq != NULL ? eq + 1 : "1";
  } else if (eq != NULL) {
    vals[k] = eq + 1;
  } else if (*i + 1 < argc) {
    vals[k] = argv[++*i];
  } else {
    fprintf(stderr, "%s: --%s needs a value (%s; see %s --help)\n", s->prog,
            s->args[k].name, s->args[k].metavar ? s->args[k].metavar : "",
            s->prog);
    return WS_EUSAGE;
  }
  return 0;
}

int ws_args_parse(const ws_args_spec_t *s, int argc, char **argv,
                  const char **vals, const char **pos, size_t max_pos,
                  size_t *npos) {
  int only_pos = 0;
  *npos = 0;
  /* --help wins over any mistake elsewhere on the line. */
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
      return WS_ARGS_HELP;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!only_pos && strcmp(a, "--") == 0) {
      only_pos = 1;
    } else if (!only_pos && strcmp(a, "-h") == 0) {
      return WS_ARGS_HELP;
    } else if (!only_pos && strncmp(a, "--", 2) == 0) {
      int rc = args_long(s, argc, argv, &i, vals);
      if (rc != 0)
        return rc;
    } else if (!only_pos && a[0] == '-' && a[1] != '\0') {
      return args_error(s, "unknown option", a);
    } else if (*npos < max_pos) {
      pos[(*npos)++] = a;
    } else {
      return args_error(s, "unexpected argument", a);
    }
  }
  return 0;
}

void ws_args_env(const ws_args_spec_t *s, const char **vals) {
  for (size_t i = 0; i < s->nargs; i++) {
    const char *e = s->args[i].env ? getenv(s->args[i].env) : NULL;
    if (vals[i] == NULL && e != NULL && *e != '\0')
      vals[i] = e;
  }
}

int ws_args_check(const ws_args_spec_t *s, const char **vals) {
  for (size_t i = 0; i < s->nargs; i++) {
    const ws_arg_t *r = &s->args[i];
    const char *v = vals[i];
    const char *want = NULL;
    uint64_t x;
    if (v == NULL)
      continue;
    if (r->type == WS_ARG_SIZE && ws_parse_size(v, &x) != 0)
      want = WS_SIZE_FORMS;
    else if (r->type == WS_ARG_DURATION && ws_parse_duration_ms(v, &x) != 0)
      want = WS_DURATION_FORMS;
    else if (r->type == WS_ARG_UINT && ws_parse_uint(v, 0, UINT64_MAX, &x))
      want = "a decimal integer";
    else if (r->type == WS_ARG_BOOL && ws_parse_bool(v) < 0)
      want = "1 or 0";
    if (want != NULL) {
      fprintf(stderr, "%s: --%s '%s': want %s\n", s->prog, r->name, v, want);
      return WS_EUSAGE;
    }
  }
  return 0;
}

void ws_args_usage(const ws_args_spec_t *s, FILE *out) {
  fprintf(out, "usage: %s %s\n", s->prog, s->synopsis ? s->synopsis : "");
  if (s->about != NULL)
    fprintf(out, "\n%s\n", s->about);
  fputs("\noptions:\n", out);
  for (size_t i = 0; i < s->nargs; i++) {
    const ws_arg_t *r = &s->args[i];
    char head[64];
    if (r->flags & WS_ARG_HIDDEN)
      continue;
    snprintf(head, sizeof(head), "--%s%s%s", r->name, r->metavar ? " " : "",
             r->metavar ? r->metavar : "");
    fprintf(out, "  %-26s %s", head, r->help ? r->help : "");
    if (r->env != NULL)
      fprintf(out, " (env %s)", r->env);
    fputc('\n', out);
  }
  fprintf(out, "  %-26s %s\n", "-h, --help", "show this help and exit");
  if (ws_args_find(s, "version") < 0)
    fprintf(out, "  %-26s %s\n", "--version", "print the version and exit");
  if (s->footer != NULL)
    fprintf(out, "\n%s\n", s->footer);
}

/* ---- values -------------------------------------------------------------- */

int ws_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out) {
  if (s == NULL || *s < '0' || *s > '9')
    return WS_EUSAGE;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return WS_EUSAGE;
  *out = v;
  return 0;
}

int ws_parse_size(const char *s, uint64_t *out) {
  static const char units[] = "KMGTP";
  if (s == NULL || *s < '0' || *s > '9')
    return WS_EUSAGE; /* also refuses "-1", " 1", "" */
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0)
    return WS_EUSAGE;
  if (*end == '\0') {
    *out = v;
    return 0;
  }
  /* Kubernetes spells kilo "k"; "K" is accepted as well. */
  const char *u = *end == 'k' ? units : strchr(units, *end);
  if (u == NULL || *end == '\0')
    return WS_EUSAGE; /* "1.5G", "800g", "800x" */
  int binary = end[1] == 'i' && *end != 'k';
  if (end[1 + binary] != '\0')
    return WS_EUSAGE; /* "800GB", "800GiB", "800Gb" */
  uint64_t mul = 1, base = binary ? 1024 : 1000;
  for (const char *p = units; p <= u; p++)
    mul *= base;
  if (v > UINT64_MAX / mul)
    return WS_EUSAGE;
  *out = (uint64_t)v * mul;
  return 0;
}

/* A bare number of seconds, fractions allowed (--timeout 0.5). */
static int args_seconds(const char *s, uint64_t *out_ms) {
  errno = 0;
  char *end = NULL;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 1e12)
    return WS_EUSAGE;
  *out_ms = (uint64_t)(v * 1000.0 + 0.5);
  return 0;
}

int ws_parse_duration_ms(const char *s, uint64_t *out_ms) {
  static const struct {
    const char *suffix;
    uint64_t ms;
  } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  if (s == NULL || *s < '0' || *s > '9')
    return WS_EUSAGE;
  const char *end = s;
  while (*end >= '0' && *end <= '9')
    end++;
  if (*end == '\0' || *end == '.')
    return args_seconds(s, out_ms);
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    if (strcmp(end, units[i].suffix) != 0)
      continue;
    uint64_t v;
    char num[24];
    size_t n = (size_t)(end - s);
    if (n >= sizeof(num))
      return WS_EUSAGE;
    memcpy(num, s, n);
    num[n] = '\0';
    if (ws_parse_uint(num, 0, UINT64_MAX / units[i].ms, &v) != 0)
      return WS_EUSAGE;
    *out_ms = v * units[i].ms;
    return 0;
  }
  return WS_EUSAGE;
}

int ws_parse_bool(const char *s) {
  if (s == NULL)
    return -1;
  if (strcmp(s, "1") == 0 || strcmp(s, "true") == 0 || strcmp(s, "yes") == 0)
    return 1;
  if (*s == '\0' || strcmp(s, "0") == 0 || strcmp(s, "false") == 0 ||
      strcmp(s, "no") == 0)
    return 0;
  return -1;
}
