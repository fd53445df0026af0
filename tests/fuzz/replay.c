/* replay.c - runs a libFuzzer target over corpus files without a fuzzer.
 *
 * Usage: fuzz_X FILE|DIR...  Every regular file (directories one level deep)
 * is fed to LLVMFuzzerTestOneInput. Prints TAP: one case per input, so a
 * crash names the file that caused it. Exit 0 when all ran.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ncase;

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  long len;

  if (f == NULL)
    return -1;
  if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
      fseek(f, 0, SEEK_SET) != 0)
    goto fail;
  buf = malloc(len > 0 ? (size_t)len : 1);
  if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len)
    goto fail;
  fclose(f);
  LLVMFuzzerTestOneInput(buf, (size_t)len);
  free(buf);
  printf("ok %d - %s\n", ++ncase, path);
  return 0;
fail:
  free(buf);
  fclose(f);
  return -1;
}

int main(int argc, char **argv) {
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      printf("not ok %d - %s: missing\n", ++ncase, argv[i]);
      bad = 1;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      struct dirent **ents;
      int n = scandir(argv[i], &ents, NULL, alphasort);
      for (int j = 0; j < n; j++) {
        char path[4096];
        if (ents[j]->d_name[0] != '.') {
          snprintf(path, sizeof(path), "%s/%s", argv[i], ents[j]->d_name);
          if (run_file(path) != 0) {
            printf("not ok %d - %s: unreadable\n", ++ncase, path);
            bad = 1;
          }
        }
        free(ents[j]);
      }
      if (n >= 0)
        free(ents);
    } else if (run_file(argv[i]) != 0) {
      printf("not ok %d - %s: unreadable\n", ++ncase, argv[i]);
      bad = 1;
    }
  }
  printf("1..%d\n", ncase);
  return bad;
}
