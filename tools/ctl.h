/* ctl.h - p2pctl subcommands. Each lives in its own ctl_*.c file and is
 * called by p2pctl.c with argv[0] = the subcommand name. Exit codes are the
 * documented ones below; every subcommand prints errors to stderr once. */
#ifndef WS_CTL_H
#define WS_CTL_H

/* Exit codes scripts can rely on (docs/operations.md). */
enum {
  CTL_EXIT_OK = 0,
  CTL_EXIT_FAIL = 1,     /* the operation failed (invalid, mismatch, ...) */
  CTL_EXIT_USAGE = 2,    /* bad command line */
  CTL_EXIT_DAEMON = 3,   /* cannot reach p2pd's API */
  CTL_EXIT_NOTFOUND = 4, /* unknown release/digest */
  CTL_EXIT_TIMEOUT = 5,  /* wait/--wait ran out of time */
  CTL_EXIT_ORIGIN = 6    /* S3 refused or failed */
};

int ctl_manifest_main(int argc, char **argv);  /* ctl_manifest.c */
int ctl_publish_main(int argc, char **argv);   /* ctl_publish.c */
int ctl_node_zone_main(int argc, char **argv); /* ctl_node.c */

/* ctl_daemon.c: commands against the local p2pd. */
int ctl_prefetch_main(int argc, char **argv);
int ctl_wait_main(int argc, char **argv);
int ctl_status_main(int argc, char **argv);
int ctl_ls_main(int argc, char **argv);
int ctl_pin_main(int argc, char **argv);
int ctl_unpin_main(int argc, char **argv);
int ctl_evict_main(int argc, char **argv);
int ctl_verify_main(int argc, char **argv);
int ctl_seed_main(int argc, char **argv);

#endif
