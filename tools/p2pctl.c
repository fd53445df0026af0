/* p2pctl.c - command-line entry: global options (common/ws_args.h), then
 * dispatch to the ctl_*.c subcommands. `p2pctl --help`, `p2pctl help
 * [COMMAND]`, `p2pctl --version` and `p2pctl version` are answered here on
 * stdout with exit 0; every subcommand answers its own --help.
 * Main thread only.
 */
#include "ctl.h"
#include "ctl_http.h"

#include <stdio.h>
#include <string.h>

#include "ws_args.h"

typedef struct {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *help;
} ctl_cmd_t;

static int ctl_version_main(int argc, char **argv);
static int ctl_help_main(int argc, char **argv);

static const ctl_cmd_t commands[] = {
    {"manifest", ctl_manifest_main,
     "create DIR | check FILE | digest FILE | keygen | sign | verify"},
    {"publish", ctl_publish_main, "DIR s3://BUCKET/PREFIX/MODEL/ [options]"},
    {"tag", ctl_tag_main, "s3://B/P/MODEL/ TAG DIGEST [--expect DIGEST]"},
    {"resolve", ctl_resolve_main, "s3://B/P/MODEL/:TAG (prints the digest)"},
    {"prefetch", ctl_prefetch_main,
     "URI|DIGEST [--digest D] [--wait] [--timeout T] [--retry-for T]"},
    {"wait", ctl_wait_main, "DIGEST [--timeout T] [--retry-for T] (0 = ready)"},
    {"status", ctl_status_main, "[DIGEST] [--json]"},
    {"ls", ctl_ls_main, "[--json]"},
    {"hold", ctl_hold_main, "DIGEST NAME [--ttl T] (in use: never evicted)"},
    {"unhold", ctl_unhold_main, "DIGEST NAME"},
    {"pin", ctl_pin_main, "DIGEST"},
    {"unpin", ctl_unpin_main, "DIGEST"},
    {"evict", ctl_evict_main, "DIGEST"},
    {"verify", ctl_verify_main, "DIGEST [--json] (re-hash cached files)"},
    {"seed", ctl_seed_main, "DIGEST | DIR --manifest FILE|URI [--json]"},
    {"targets", ctl_targets_main, "TRACKER_HTTP [--json] (wanted: nodes)"},
    {"node-zone", ctl_node_zone_main, "--out FILE [--node NAME] (k8s init)"},
    {"version", ctl_version_main, "print the version"},
    {"help", ctl_help_main, "[COMMAND] show help"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const ws_arg_t k_global[] = {
    {"api", "P2P_API", "SOCKET", WS_ARG_STR, 0,
     "p2pd's API socket (default " CTL_HTTP_DEFAULT_SOCKET ")"},
};

static const ws_args_spec_t k_spec = {
    .prog = "p2pctl",
    .synopsis = "[--api SOCKET] COMMAND [ARGS]",
    .about = "weightswarm command-line tool: publish releases to S3 and "
             "drive the local p2pd.",
    .args = k_global,
    .nargs = 1,
    .footer = "exit codes: 0 ok, 1 failed, 2 usage, 3 p2pd unreachable, 4 not "
              "found, 5 timed out, 6 S3 failed\n"
              "`p2pctl COMMAND --help` shows a command's options.",
};

static void usage(FILE *out) {
  ws_args_usage(&k_spec, out);
  fputs("\ncommands:\n", out);
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
}

static const ctl_cmd_t *ctl_find(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++) {
    if (strcmp(name, commands[i].name) == 0)
      return &commands[i];
  }
  return NULL;
}

static int ctl_version_main(int argc, char **argv) {
  (void)argv;
  if (argc > 1 &&
      (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    puts("usage: p2pctl version\n\nPrints the version and exits.");
    return CTL_EXIT_OK;
  }
  ws_args_print_version("p2pctl");
  return CTL_EXIT_OK;
}

static int ctl_help_main(int argc, char **argv) {
  const ctl_cmd_t *c = argc > 1 ? ctl_find(argv[1]) : NULL;
  if (c != NULL && c->main != ctl_help_main) {
    char help[] = "--help";
    char *av[] = {argv[1], help, NULL};
    return c->main(2, av);
  }
  if (argc > 1 && c == NULL && argv[1][0] != '-') {
    fprintf(stderr, "p2pctl: unknown command '%s' (see p2pctl --help)\n",
            argv[1]);
    return CTL_EXIT_USAGE;
  }
  usage(stdout);
  return CTL_EXIT_OK;
}

int main(int argc, char **argv) {
  /* The global options end at the first word that is not one. */
  int cmd = 1;
  while (cmd < argc && argv[cmd][0] == '-')
    cmd += strcmp(argv[cmd], "--api") == 0 ? 2 : 1;
  if (cmd > argc)
    cmd = argc; /* "--api" without a value: ws_args_parse says so */
  const char *v[1] = {0};
  size_t npos = 0;
  int rc = ws_args_parse(&k_spec, cmd, argv, v, NULL, 0, &npos);
  if (rc == WS_ARGS_HELP) {
    usage(stdout);
    return CTL_EXIT_OK;
  }
  if (rc == WS_ARGS_VERSION) {
    ws_args_print_version("p2pctl");
    return CTL_EXIT_OK;
  }
  if (rc != 0)
    return CTL_EXIT_USAGE;
  ctl_api_socket = v[0];
  if (cmd >= argc) {
    usage(stderr);
    return CTL_EXIT_USAGE;
  }
  const ctl_cmd_t *c = ctl_find(argv[cmd]);
  if (c == NULL) {
    fprintf(stderr, "p2pctl: unknown command '%s' (see p2pctl --help)\n",
            argv[cmd]);
    return CTL_EXIT_USAGE;
  }
  return c->main(argc - cmd, argv + cmd);
}
