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
int ctl_targets_main(int argc, char **argv);   /* ctl_targets.c */

/* ctl_tag.c: release tags in S3 (tag.h). */
#include <stdint.h>
#include <uv.h>

#include "digest.h"
#include "s3.h"
int ctl_tag_main(int argc, char **argv);
int ctl_resolve_main(int argc, char **argv);
/* Reads the digest s3://B/P/MODEL/:TAG names into out (a blocking S3 GET
 * on a private loop). Returns an exit code: OK, USAGE (not a tagged URI),
 * NOTFOUND (no such tag), FAIL or ORIGIN; errors printed, prefixed by prog. */
int ctl_tag_resolve(const char *prog, const char *tagged_uri,
                    char out[WS_DIGEST_STR_LEN + 1]);
/* Moves tag of the model at s3://bucket/prefix (ends in "/") to digest, a
 * compare-and-swap on the tag object; with expect, only if the tag names
 * expect now. Runs loop until done; errors printed once, prefixed by prog.
 * pause_ms > 0 sleeps between the read and the write (tests). Returns an
 * exit code (CTL_EXIT_FAIL when another mover won). */
int ctl_tag_move(uv_loop_t *loop, ws_s3_t *s3, const char *prog,
                 const char *bucket, const char *prefix, const char *tag,
                 const ws_hash_t *digest, const ws_hash_t *expect,
                 uint64_t pause_ms);

/* ctl_hold.c: named holds on a release in the local p2pd. */
int ctl_hold_main(int argc, char **argv);
int ctl_unhold_main(int argc, char **argv);
/* Takes or renews (remove 0; ttl_ms 0: until released) or releases the
 * hold name on digest; with json the release's JSON goes to stdout.
 * Errors printed once. Returns an exit code. */
int ctl_hold_take(const char *digest, const char *name, uint64_t ttl_ms,
                  int remove, int json);

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
