/* ws_args.h - the one command-line parser of p2pd, p2p-tracker and p2pctl.
 *
 * A program describes its options in a table (long name, environment
 * variable, type, help text, hidden) and ws_args_parse fills one value slot
 * per row from argv: `--name VALUE`, `--name=VALUE`, switches as `--name`
 * ("1"), positionals anywhere, `--` ends the options. `-h`/`--help` (which
 * wins over any other mistake on the line) and
 * `--version` are recognised unless the table has its own "version" row
 * (p2pctl publish --version V). Values stay strings, borrowed from argv;
 * ws_args_check then type-checks them (sizes, durations, counts) with one
 * error message per type, so every binary refuses "800GB" the same way.
 *
 * Sizes follow Kubernetes quantities: a bare integer is bytes, K M G T P
 * are powers of 1000, Ki Mi Gi Ti Pi powers of 1024; anything else (800GB,
 * 800gb, 1.5G, 800GiB) is refused. Durations: 500ms, 30s, 2m, 1h, or a bare
 * number of seconds (today's --timeout S).
 *
 * Main thread, before any loop exists; no state besides what the caller
 * passes in.
 */
#ifndef WS_ARGS_H
#define WS_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ws_err.h"

typedef enum {
  WS_ARG_STR,      /* any text */
  WS_ARG_BOOL,     /* switch: --name, or --name=1|0|true|false */
  WS_ARG_SIZE,     /* bytes, Kubernetes suffixes (ws_parse_size) */
  WS_ARG_UINT,     /* decimal integer */
  WS_ARG_DURATION, /* ws_parse_duration_ms */
} ws_arg_type_t;

#define WS_ARG_HIDDEN 1u /* parsed but not listed by --help (test-only) */

typedef struct {
  const char *name;    /* long flag without "--" */
  const char *env;     /* environment fallback, or NULL */
  const char *metavar; /* "HOST:PORT"; NULL for switches */
  ws_arg_type_t type;
  unsigned flags; /* WS_ARG_HIDDEN */
  const char *help;
} ws_arg_t;

typedef struct {
  const char *prog;     /* "p2pd", "p2pctl publish": errors and usage */
  const char *synopsis; /* after prog on the usage line */
  const char *about;    /* one paragraph under the usage line, or NULL */
  const ws_arg_t *args;
  size_t nargs;
  const char *footer; /* printed after the options, or NULL */
} ws_args_spec_t;

/* ws_args_parse results besides 0 and WS_EUSAGE. */
#define WS_ARGS_HELP 1
#define WS_ARGS_VERSION 2

/* The accepted size forms, for error messages and help. */
#define WS_SIZE_FORMS                                                          \
  "bytes as an integer, or with a suffix K, M, G, T, P (powers of 1000) or "   \
  "Ki, Mi, Gi, Ti, Pi (powers of 1024), e.g. 800G or 800Gi"
#define WS_DURATION_FORMS                                                      \
  "a number of seconds, or an integer with ms, s, m or h, e.g. 120s or 2m"

/* Parses argv[1..argc) against s. vals has s->nargs slots (set on the
 * options seen, others untouched); positionals go to pos[0..max_pos) and
 * their count to *npos. Returns 0, WS_ARGS_HELP, WS_ARGS_VERSION, or
 * WS_EUSAGE after printing "PROG: reason (see --help)" to stderr. */
int ws_args_parse(const ws_args_spec_t *s, int argc, char **argv,
                  const char **vals, const char **pos, size_t max_pos,
                  size_t *npos) WS_MUST_USE;

/* Fills every unset slot whose row names an environment variable that is
 * set and non-empty. */
void ws_args_env(const ws_args_spec_t *s, const char **vals);

/* Type-checks every set slot; prints "PROG: --name 'v': reason" for the
 * first bad one and returns WS_EUSAGE, else 0. */
int ws_args_check(const ws_args_spec_t *s, const char **vals) WS_MUST_USE;

/* Index of the row called name, or -1. */
int ws_args_find(const ws_args_spec_t *s, const char *name);

/* The usage text (help): usage line, about, every row not hidden with its
 * metavar, environment variable and help, then the footer. */
void ws_args_usage(const ws_args_spec_t *s, FILE *out);

/* The project version from meson ("0.1.0"). */
const char *ws_version(void);

/* Prints "PROG VERSION\n" to stdout. */
void ws_args_print_version(const char *prog);

/* Sizes (see above) into *out: 0 or WS_EUSAGE (also on overflow). */
int ws_parse_size(const char *s, uint64_t *out) WS_MUST_USE;

/* Durations (see above) into *out_ms: 0 or WS_EUSAGE. */
int ws_parse_duration_ms(const char *s, uint64_t *out_ms) WS_MUST_USE;

/* Decimal integer in [min, max]: 0 or WS_EUSAGE. */
int ws_parse_uint(const char *s, uint64_t min, uint64_t max,
                  uint64_t *out) WS_MUST_USE;

/* "1", "true", "yes" -> 1; "0", "false", "no", "" -> 0; else -1. */
int ws_parse_bool(const char *s);

#endif
