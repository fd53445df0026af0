/* p2pctl.c - command-line entry: dispatches to the ctl_*.c subcommands. */
#include "ctl.h"
#include "ctl_http.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *help;
} ctl_cmd_t;

static const ctl_cmd_t commands[] = {
    {"manifest", ctl_manifest_main,
     "create DIR | check FILE [--dir DIR] | digest FILE"},
    {"publish", ctl_publish_main,
     "DIR s3://BUCKET/PREFIX/MODEL/ [--json] [--sign-key FILE]"},
    {"prefetch", ctl_prefetch_main,
     "URI|DIGEST [--digest D] [--wait] [--timeout S] [--json]"},
    {"wait", ctl_wait_main, "DIGEST [--timeout S] [--json] (0 = ready)"},
    {"status", ctl_status_main, "[DIGEST] [--json]"},
    {"ls", ctl_ls_main, "[--json]"},
    {"pin", ctl_pin_main, "DIGEST"},
    {"unpin", ctl_unpin_main, "DIGEST"},
    {"evict", ctl_evict_main, "DIGEST"},
    {"verify", ctl_verify_main, "DIGEST [--json] (re-hash cached files)"},
    {"seed", ctl_seed_main, "DIGEST | DIR --manifest FILE|URI [--json]"},
};

static void usage(FILE *out) {
  fputs("usage: p2pctl [--api SOCKET] COMMAND [ARGS]\n\ncommands:\n", out);
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
  /* Global options before the command: --api SOCKET or --api=SOCKET. */
  while (argc >= 2 && strncmp(argv[1], "--api", 5) == 0 &&
         (argv[1][5] == '\0' || argv[1][5] == '=')) {
    int used = argv[1][5] == '=' ? 1 : 2;
    ctl_api_socket = used == 1 ? argv[1] + 6 : argv[2];
    if (used == 2 && argc < 3) {
      fputs("p2pctl: --api needs a SOCKET path\n", stderr);
      return CTL_EXIT_USAGE;
    }
    argc -= used;
    argv += used;
  }
  if (argc < 2) {
    usage(stderr);
    return CTL_EXIT_USAGE;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    usage(stdout);
    return CTL_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].main(argc - 1, argv + 1);
  }
  fprintf(stderr, "p2pctl: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return CTL_EXIT_USAGE;
}
