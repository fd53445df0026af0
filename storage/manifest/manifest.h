/* manifest.h - release manifests (docs/manifest.md): parse, validate,
 * serialize.
 *
 * A manifest is hostile input: every rule below is checked before the
 * manifest is handed out, and sizes are checked before allocating for them.
 * The release digest is sha256 of the exact bytes parsed (not a re-encoding).
 *
 * Chunks are numbered across the whole release: file k's chunk j has global
 * index files[k].first_chunk + j. All chunks are chunk_size bytes except each
 * file's last, which is shorter when size is not a multiple. An empty file has
 * no chunks.
 *
 * Thread: pure functions, any thread. A parsed manifest is immutable and may
 * be shared read-only between threads.
 */
#ifndef WS_MANIFEST_H
#define WS_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"

#define WS_MANIFEST_FORMAT_V1 "weightswarm/v1"
#define WS_CHUNK_SIZE_MIN (1u << 20)
#define WS_CHUNK_SIZE_MAX (64u << 20)
#define WS_CHUNK_SIZE_DEFAULT (16u << 20)
/* Chunk size used to slice files of a manifest that has none (legacy). */
#define WS_CHUNK_SIZE_LEGACY (16u << 20)
#define WS_MANIFEST_NAME_MAX 1024 /* bytes in one file name */

typedef struct {
  char *name;           /* relative, normalized, validated */
  uint64_t size;        /* bytes */
  ws_hash_t sha256;     /* whole file */
  uint64_t first_chunk; /* global index of this file's first chunk */
  uint32_t nchunks;     /* ceil(size / chunk_size) */
  ws_hash_t *chunks;    /* nchunks hashes, or NULL in whole-file mode */
} ws_mfile_t;

typedef struct {
  char *format;     /* "weightswarm/v1" or NULL for a legacy manifest */
  char *model;      /* may be NULL */
  char *version;    /* may be NULL */
  char *created_at; /* may be NULL */
  uint32_t chunk_size;
  int whole_file; /* 1: no chunk hashes, files verified whole */
  uint32_t nfiles;
  ws_mfile_t *files;
  uint64_t total_size;
  uint64_t total_chunks;
  ws_hash_t digest; /* sha256 of the bytes parsed */
} ws_manifest_t;

typedef struct {
  size_t max_bytes; /* manifest document size */
  uint32_t max_files;
  uint64_t max_total_size; /* bytes over all files */
  uint64_t max_file_size;
} ws_manifest_limits_t;

/* Defaults: 64 MiB document, 100k files, 16 TiB total and per file. */
void ws_manifest_limits_default(ws_manifest_limits_t *lim);

/* Parses and validates buf[0..len). On success *out is a new manifest owned
 * by the caller (free with ws_manifest_free). On failure returns a WS_E* code
 * and, when errbuf is not NULL, a one-line reason naming the offending field
 * or file ("files[3].name: '..' component"). lim NULL means defaults. */
int ws_manifest_parse(const char *buf, size_t len,
                      const ws_manifest_limits_t *lim, ws_manifest_t **out,
                      char *errbuf, size_t errlen) WS_MUST_USE;

/* Serializes m to JSON text (new malloc'd NUL-terminated string in *out,
 * length in *outlen). The bytes are what the publisher uploads; their sha256
 * is the release digest. Deterministic for equal manifests. */
int ws_manifest_serialize(const ws_manifest_t *m, char **out,
                          size_t *outlen) WS_MUST_USE;

void ws_manifest_free(ws_manifest_t *m);

/* Validates one relative file name by the manifest rules; 0 or WS_EPATH. */
int ws_manifest_check_name(const char *name, size_t len) WS_MUST_USE;

/* Chunk geometry helpers. */
uint32_t ws_manifest_nchunks(uint64_t size, uint32_t chunk_size);
/* Byte length of chunk j of file f. */
uint32_t ws_mfile_chunk_len(const ws_manifest_t *m, const ws_mfile_t *f,
                            uint32_t j);
/* Maps a global chunk index to (file index, chunk in file); WS_ENOTFOUND if
 * out of range. O(log nfiles). */
int ws_manifest_locate(const ws_manifest_t *m, uint64_t chunk, uint32_t *file,
                       uint32_t *j) WS_MUST_USE;
/* 1 if cs is a power of two in WS_CHUNK_SIZE_MIN..WS_CHUNK_SIZE_MAX. */
int ws_manifest_chunk_size_ok(uint64_t cs);

/* ---- building and verifying against a directory (manifest_build.c) ----
 * Blocking file I/O and hashing on worker threads it starts itself: call
 * from tools or from a uv_queue_work callback, never from a loop thread. */

typedef struct {
  uint32_t chunk_size;             /* 0: WS_CHUNK_SIZE_DEFAULT */
  const char *model;               /* borrowed; may be NULL */
  const char *version;             /* borrowed; may be NULL */
  const char *created_at;          /* borrowed; NULL: now, UTC RFC 3339 */
  unsigned nthreads;               /* 0: online CPUs; capped at 64 */
  const ws_manifest_limits_t *lim; /* NULL: defaults */
  /* Which files (docs/manifest.md, "Which files"): with includes, only
   * files matching one; never one matching an exclude (a directory
   * matching one is not entered). Borrowed; NULL with a 0 count: none. */
  const char *const *include;
  unsigned ninclude;
  const char *const *exclude;
  unsigned nexclude;
} ws_manifest_build_opts_t;

/* 1 when the relative path rel (is_dir: a directory) matches the pattern:
 * fnmatch(3) per component, "**" for any number of directories; a pattern
 * without '/' matches the last component, a trailing '/' only directories.
 * Any thread. */
int ws_path_glob_match(const char *pat, const char *rel, int is_dir);

/* When dir is a Hugging Face hub cache snapshot (.../models--ORG--NAME/
 * snapshots/<rev>, also datasets--/spaces--), 1 with *repo the realpath of
 * the repository folder (models--ORG--NAME, new string) and *model the
 * repository id "ORG/NAME" (new string); 0 when it is not one; < 0 on
 * error. Blocking (realpath): tools and workers. */
int ws_manifest_hf_snapshot(const char *dir, char **repo,
                            char **model) WS_MUST_USE;

/* Builds a v1 manifest of every regular file under dir (recursive, names
 * sorted bytewise). A top-level manifest.json / manifest.json.sig is
 * skipped (it is the release's own metadata), so is every name starting with
 * '.' at any depth (VCS and cache metadata: .git/, .gitattributes, .cache/,
 * .huggingface/), and the files opts' include/exclude leave out. Symlinks
 * are followed only to regular files inside dir, or, when dir is a Hugging
 * Face snapshot (ws_manifest_hf_snapshot), inside its repository folder;
 * one escaping that, dangling, or to a directory
 * fails with WS_EPATH, as do special files and names breaking the manifest
 * rules. Hashes each file and its chunks in parallel on nthreads threads with
 * bounded memory (one 1 MiB buffer per thread). On success *out is a new
 * manifest owned by the caller whose digest field is the sha256 of
 * ws_manifest_serialize(*out). */
int ws_manifest_build(const char *dir, const ws_manifest_build_opts_t *opts,
                      ws_manifest_t **out, char *errbuf,
                      size_t errlen) WS_MUST_USE;

/* Checks every file of m against dir/<name>: it must be a regular file
 * (symlinks followed, so a cache release dir verifies) of the right size
 * whose sha256 and, unless whole-file, every chunk hash match. Extra files
 * in dir are ignored. Returns 0, WS_EDIGEST (size or content mismatch),
 * WS_EPATH (not a regular file), -ENOENT, ...; errbuf names the first
 * failing file. m is borrowed. */
int ws_manifest_verify_dir(const ws_manifest_t *m, const char *dir,
                           unsigned nthreads, char *errbuf,
                           size_t errlen) WS_MUST_USE;

#endif
