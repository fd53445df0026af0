#include "ctl.h"
#include <stdio.h>
int ctl_manifest_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fputs("p2pctl manifest: not built yet\n", stderr);
  return CTL_EXIT_FAIL;
}
