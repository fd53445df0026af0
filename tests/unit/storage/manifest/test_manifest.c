/* test_manifest.c - manifest v1 rules: every rejection with its own error,
 * legacy and whole-file acceptance, serialize round trip, chunk geometry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "manifest.h"

#define H64 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define HX "\"" H64 "\""
#define V1(cs, files)                                                          \
  "{\"format\":\"weightswarm/v1\",\"chunk_size\":" cs ",\"files\":[" files "]" \
  "}"
#define FW(name, size) "{\"name\":" name ",\"size\":" size ",\"sha256\":" HX "}"
#define FC(name, size, chunks)                                                 \
  "{\"name\":" name ",\"size\":" size ",\"sha256\":" HX ",\"chunks\":[" chunks \
  "]}"
#define MIB "1048576"

static int parse(const char *json, ws_manifest_t **m, char *err, size_t elen) {
  return ws_manifest_parse(json, strlen(json), NULL, m, err, elen);
}

typedef struct {
  const char *json;
  int err;
  const char *msg; /* substring the reason must contain */
} bad_t;

static const bad_t bad_cases[] = {
    /* names */
    {V1(MIB, FW("\"\"", "0")), WS_EPATH, "empty name"},
    {V1(MIB, FW("\"/etc/passwd\"", "0")), WS_EPATH, "absolute"},
    {V1(MIB, FW("\"../../etc/passwd\"", "0")), WS_EPATH, "'..'"},
    {V1(MIB, FW("\"a/../b\"", "0")), WS_EPATH, "'..'"},
    {V1(MIB, FW("\"..\"", "0")), WS_EPATH, "'..'"},
    /* a path separator on Windows, where releases are copied and read */
    {V1(MIB, FW("\"..\\\\evil\"", "0")), WS_EPATH, "backslash"},
    {V1(MIB, FW("\"a\\\\b.bin\"", "0")), WS_EPATH, "backslash"},
    {V1(MIB, FW("\"sub/c:\\\\x\"", "0")), WS_EPATH, "backslash"},
    {V1(MIB, FW("\"./a\"", "0")), WS_EPATH, "'.'"},
    {V1(MIB, FW("\"a//b\"", "0")), WS_EPATH, "//"},
    {V1(MIB, FW("\"a/\"", "0")), WS_EPATH, "trailing"},
    {V1(MIB, FW("\"a\\u0001b\"", "0")), WS_EPATH, "control"},
    {V1(MIB, FW("\"a\\u007fb\"", "0")), WS_EPATH, "control"},
    {V1(MIB, FW("\"a\\nb\"", "0")), WS_EPATH, "control"},
    {V1(MIB, FW("\"a\\u0000b\"", "0")), WS_EJSON, "\\u0000"},
    {V1(MIB, FW("\"a\tb\"", "0")), WS_EJSON, "raw control"},
    {V1(MIB, FW("\"\xff\"", "0")), WS_EPATH, "UTF-8"},
    {V1(MIB, FW("\"\xc0\xaf\"", "0")), WS_EPATH, "UTF-8"},
    {V1(MIB, FW("\"\xed\xa0\x80\"", "0")), WS_EPATH, "UTF-8"},
    {V1(MIB, FW("\"\\ud800\"", "0")), WS_EJSON, "syntax"},
    {V1(MIB, FW("\"manifest.json\"", "0")), WS_EPATH, "reserved"},
    {V1(MIB, FW("\"manifest.json.sig\"", "0")), WS_EPATH, "reserved"},
    {V1(MIB, FW("\"a\"", "0") "," FW("\"a\"", "0")), WS_EDUPNAME, "duplicate"},
    {V1(MIB, FW("\"a\"", "0") "," FW("\"a.txt\"", "0") "," FW("\"a/b\"", "0")),
     WS_EPATH, "directory"},
    {V1(MIB, FW("\"x/y/z\"", "0") "," FW("\"x/y\"", "0")), WS_EPATH,
     "directory"},
    {V1(MIB, FW("5", "0")), WS_EMANIFEST, "files[0].name"},
    /* chunk_size */
    {V1("0", FW("\"a\"", "0")), WS_ECHUNKSIZE, "chunk_size"},
    {V1("1000000", FW("\"a\"", "0")), WS_ECHUNKSIZE, "power of two"},
    {V1("3145728", FW("\"a\"", "0")), WS_ECHUNKSIZE, "power of two"},
    {V1("524288", FW("\"a\"", "0")), WS_ECHUNKSIZE, "power of two"},
    {V1("134217728", FW("\"a\"", "0")), WS_ECHUNKSIZE, "power of two"},
    {V1("-1048576", FW("\"a\"", "0")), WS_ECHUNKSIZE, "power of two"},
    {V1("1048576.5", FW("\"a\"", "0")), WS_ECHUNKSIZE, "power of two"},
    {V1("\"1048576\"", FW("\"a\"", "0")), WS_ECHUNKSIZE, "power of two"},
    {"{\"files\":[" FC("\"a\"", "1", HX) "]}", WS_ECHUNKSIZE, "required"},
    /* chunk counts */
    {V1(MIB, FC("\"a\"", "3145728", HX "," HX)), WS_ECHUNKCOUNT, "needs 3"},
    {V1(MIB, FC("\"a\"", "3145729", HX "," HX "," HX)), WS_ECHUNKCOUNT,
     "needs 4"},
    {V1(MIB, FC("\"a\"", "1", HX "," HX)), WS_ECHUNKCOUNT, "needs 1"},
    {V1(MIB, FC("\"a\"", "0", HX)), WS_ECHUNKCOUNT, "needs 0"},
    {V1(MIB, FC("\"a\"", "1", HX) "," FW("\"b\"", "1")), WS_ECHUNKCOUNT,
     "lack chunks"},
    {V1(MIB, "{\"name\":\"a\",\"size\":1,\"sha256\":" HX ",\"chunks\":5}"),
     WS_EMANIFEST, "not an array"},
    /* hex */
    {V1(MIB, "{\"name\":\"a\",\"size\":1,\"sha256\":\"abc\"}"), WS_EHEX,
     "files[0].sha256"},
    {V1(MIB, "{\"name\":\"a\",\"size\":1}"), WS_EHEX, "files[0].sha256"},
    {V1(MIB, "{\"name\":\"a\",\"size\":1,\"sha256\":\"sha256-" H64 "\"}"),
     WS_EHEX, "sha256"},
    {V1(MIB, "{\"name\":\"a\",\"size\":1,\"sha256\":"
             "\"g0112233445566778899aabbccddeeff00112233445566778899aabbccddee"
             "ff\"}"),
     WS_EHEX, "sha256"},
    {V1(MIB, FC("\"a\"", "1", "\"" H64 "0\"")), WS_EHEX, "chunks[0]"},
    {V1(MIB, FC("\"a\"", "1", "7")), WS_EHEX, "chunks[0]"},
    /* sizes */
    {V1(MIB, FW("\"a\"", "-1")), WS_EMANIFEST, "negative"},
    {V1(MIB, FW("\"a\"", "1.5")), WS_EMANIFEST, "not an integer"},
    {V1(MIB, FW("\"a\"", "\"5\"")), WS_EMANIFEST, "not a number"},
    {V1(MIB, FW("\"a\"", "9007199254740993")), WS_ELIMIT, "2^53"},
    {V1(MIB, FW("\"a\"", "1e300")), WS_ELIMIT, "2^53"},
    {V1(MIB, FW("\"a\"", "17592186044417")), WS_ELIMIT, "limit"},
    {V1(MIB, FW("\"a\"", "17592186044416") "," FW("\"b\"", "1")), WS_ELIMIT,
     "total"},
    {V1(MIB, "{\"name\":\"a\",\"sha256\":" HX "}"), WS_EMANIFEST, "missing"},
    /* document */
    {"", WS_EJSON, "syntax"},
    {"{", WS_EJSON, "syntax"},
    {"[]", WS_EMANIFEST, "not an object"},
    {V1(MIB, FW("\"a\"", "1")) "x", WS_EJSON, "trailing"},
    {V1(MIB, FW("\"a\"", "1")) "{}", WS_EJSON, "trailing"},
    {"{\"files\":[" FW("\"a\"", "1") "],\"files\":[]}", WS_EJSON,
     "duplicate key"},
    {"{\"files\":[{\"name\":\"a\",\"name\":\"b\",\"size\":1,\"sha256\":" HX
     "}]}",
     WS_EJSON, "duplicate key"},
    {"{\"format\":\"weightswarm/v2\",\"files\":[" FW("\"a\"", "1") "]}",
     WS_EMANIFEST, "unsupported"},
    {"{\"format\":7,\"files\":[" FW("\"a\"", "1") "]}", WS_EMANIFEST, "format"},
    {"{\"model\":\"a\\u0007\",\"files\":[" FW("\"a\"", "1") "]}", WS_EMANIFEST,
     "model"},
    {V1(MIB, ""), WS_EMANIFEST, "empty"},
    {"{\"format\":\"weightswarm/v1\"}", WS_EMANIFEST, "files"},
    {"{\"files\":{}}", WS_EMANIFEST, "files"},
    {V1(MIB, "7"), WS_EMANIFEST, "files[0]: not an object"},
};

static void test_rejects(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
    ws_manifest_t *m = NULL;
    char err[256] = "";
    int rc = parse(bad_cases[i].json, &m, err, sizeof(err));
    if (rc != bad_cases[i].err || strstr(err, bad_cases[i].msg) == NULL)
      fail_msg("case %zu: got %s '%s', want %s '%s' for %s", i, ws_errname(rc),
               err, ws_errname(bad_cases[i].err), bad_cases[i].msg,
               bad_cases[i].json);
    assert_null(m);
  }
}

static void test_accepts_names(void **state) {
  static const char *ok[] = {
      "a",
      "a/b/c.safetensors",
      "..a",
      "a..",
      ".hidden",
      "a/.b",
      "a b",
      "\xe6\xa8\xa1\xe5\x9e\x8b/w.bin",
      "manifest.json.bak",
      "sub/manifest.json",
  };
  (void)state;
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    assert_int_equal(ws_manifest_check_name(ok[i], strlen(ok[i])), 0);
  char longname[WS_MANIFEST_NAME_MAX + 2];
  memset(longname, 'a', sizeof(longname));
  for (size_t i = 100; i < sizeof(longname); i += 101)
    longname[i] = '/';
  assert_int_equal(ws_manifest_check_name(longname, WS_MANIFEST_NAME_MAX), 0);
  assert_int_equal(ws_manifest_check_name(longname, WS_MANIFEST_NAME_MAX + 1),
                   WS_EPATH);
  memset(longname, 'b', 300);
  assert_int_equal(ws_manifest_check_name(longname, 256), WS_EPATH);
  assert_int_equal(ws_manifest_check_name(longname, 255), 0);
  assert_int_equal(ws_manifest_check_name("a\0b", 3), WS_EPATH);
}

static void test_v1_geometry(void **state) {
  static const char json[] =
      V1(MIB, FC("\"big\"", "2621440", HX "," HX "," HX) "," FC(
                  "\"e\"", "0", "") "," FC("\"one\"", MIB,
                                           HX) "," FC("\"tail\"", "5", HX));
  ws_manifest_t *m = NULL;
  ws_hash_t d;
  uint32_t fi = 0, j = 0;
  (void)state;

  assert_int_equal(parse(json, &m, NULL, 0), 0);
  assert_string_equal(m->format, WS_MANIFEST_FORMAT_V1);
  assert_false(m->whole_file);
  assert_int_equal(m->chunk_size, 1u << 20);
  assert_int_equal(m->nfiles, 4);
  assert_int_equal(m->total_chunks, 5);
  assert_int_equal(m->total_size, 2621440 + 1048576 + 5);
  assert_int_equal(m->files[0].nchunks, 3);
  assert_int_equal(m->files[1].nchunks, 0);
  assert_int_equal(m->files[1].first_chunk, 3);
  assert_int_equal(m->files[2].first_chunk, 3);
  assert_int_equal(m->files[3].first_chunk, 4);
  assert_int_equal(ws_mfile_chunk_len(m, &m->files[0], 0), 1 << 20);
  assert_int_equal(ws_mfile_chunk_len(m, &m->files[0], 2), 524288);
  assert_int_equal(ws_mfile_chunk_len(m, &m->files[0], 3), 0);
  assert_int_equal(ws_mfile_chunk_len(m, &m->files[2], 0), 1 << 20);
  assert_int_equal(ws_mfile_chunk_len(m, &m->files[3], 0), 5);
  assert_int_equal(ws_manifest_locate(m, 2, &fi, &j), 0);
  assert_int_equal(fi, 0);
  assert_int_equal(j, 2);
  assert_int_equal(ws_manifest_locate(m, 3, &fi, &j), 0);
  assert_int_equal(fi, 2);
  assert_int_equal(j, 0);
  assert_int_equal(ws_manifest_locate(m, 4, &fi, &j), 0);
  assert_int_equal(fi, 3);
  assert_int_equal(ws_manifest_locate(m, 5, &fi, &j), WS_ENOTFOUND);
  assert_int_equal(ws_sha256(json, strlen(json), &d), 0);
  assert_true(ws_hash_eq(&d, &m->digest));
  ws_manifest_free(m);
}

static void test_nchunks(void **state) {
  (void)state;
  assert_int_equal(ws_manifest_nchunks(0, 1 << 20), 0);
  assert_int_equal(ws_manifest_nchunks(1, 1 << 20), 1);
  assert_int_equal(ws_manifest_nchunks(1 << 20, 1 << 20), 1);
  assert_int_equal(ws_manifest_nchunks((1 << 20) + 1, 1 << 20), 2);
  assert_true(ws_manifest_chunk_size_ok(1u << 20));
  assert_true(ws_manifest_chunk_size_ok(64u << 20));
  assert_false(ws_manifest_chunk_size_ok(128u << 20));
  assert_false(ws_manifest_chunk_size_ok(3u << 20));
}

static void test_legacy(void **state) {
  static const char json[] =
      "{\"model\":\"llama\",\"version\":\"v3\",\"created_at\":\"2024-01-01\","
      "\"files\":[" FW("\"config.json\"", "100") "," FW("\"w.bin\"",
                                                        "33554433") "]}";
  ws_manifest_t *m = NULL, *m2 = NULL;
  char *out = NULL;
  size_t len = 0;
  (void)state;

  assert_int_equal(parse(json, &m, NULL, 0), 0);
  assert_null(m->format);
  assert_true(m->whole_file);
  assert_int_equal(m->chunk_size, WS_CHUNK_SIZE_LEGACY);
  assert_int_equal(m->files[1].nchunks, 3);
  assert_null(m->files[1].chunks);
  assert_string_equal(m->model, "llama");
  assert_int_equal(ws_manifest_serialize(m, &out, &len), 0);
  assert_null(strstr(out, "chunk_size"));
  assert_null(strstr(out, "chunks"));
  assert_null(strstr(out, "format"));
  assert_int_equal(ws_manifest_parse(out, len, NULL, &m2, NULL, 0), 0);
  assert_true(m2->whole_file);
  assert_int_equal(m2->total_chunks, m->total_chunks);
  free(out);
  ws_manifest_free(m);
  ws_manifest_free(m2);
}

static void test_whole_file_v1(void **state) {
  static const char json[] =
      V1("67108864", FW("\"a\"", "67108865") "," FC("\"e\"", "0", ""));
  ws_manifest_t *m = NULL;
  (void)state;
  assert_int_equal(parse(json, &m, NULL, 0), 0);
  assert_true(m->whole_file);
  assert_int_equal(m->files[0].nchunks, 2);
  ws_manifest_free(m);
}

static void test_roundtrip(void **state) {
  static const char json[] =
      "{\"files\":[" FC("\"b/x\"", "1048577", HX ",\"" H64 "\"") "," FC(
          "\"a\"", "9007199254740",
          HX) "],\"chunk_size\":67108864,\"model\":"
              "\"m\\u00e9\",\"format\":\"weightswarm/v1\",\"extra\":[1,2]}";
  ws_manifest_t *m = NULL, *m2 = NULL;
  char *out = NULL, *out2 = NULL;
  size_t len = 0, len2 = 0;
  ws_hash_t d;
  (void)state;

  /* 9007199254740 bytes at 64 MiB needs 134218 chunks: too many to write
   * here, so use the custom-size path below instead. */
  assert_int_equal(parse(json, &m, NULL, 0), WS_ECHUNKCOUNT);
  static const char json2[] =
      "{\"files\":[" FC("\"b/x\"", "1048577", HX "," HX) "," FW(
          "\"a\"", "0") "],\"chunk_size\":1048576,\"model\":\"m\\u00e9\","
                        "\"format\":\"weightswarm/v1\",\"extra\":[1,2]}";
  assert_int_equal(parse(json2, &m, NULL, 0), 0);
  assert_int_equal(ws_manifest_serialize(m, &out, &len), 0);
  assert_int_equal(strlen(out), len);
  assert_int_equal(out[len - 1], '\n');
  /* key order is fixed, unknown keys dropped */
  assert_true(strstr(out, "\"format\"") < strstr(out, "\"model\""));
  assert_true(strstr(out, "\"model\"") < strstr(out, "\"chunk_size\""));
  assert_true(strstr(out, "\"chunk_size\"") < strstr(out, "\"files\""));
  assert_null(strstr(out, "extra"));
  assert_non_null(strstr(out, "m\xc3\xa9"));
  assert_int_equal(ws_manifest_parse(out, len, NULL, &m2, NULL, 0), 0);
  assert_int_equal(ws_sha256(out, len, &d), 0);
  assert_true(ws_hash_eq(&d, &m2->digest));
  assert_false(ws_hash_eq(&m->digest, &m2->digest));
  assert_int_equal(ws_manifest_serialize(m2, &out2, &len2), 0);
  assert_int_equal(len, len2);
  assert_memory_equal(out, out2, len);
  assert_int_equal(m2->nfiles, 2);
  assert_string_equal(m2->files[0].name, "b/x");
  assert_int_equal(m2->files[0].size, 1048577);
  assert_int_equal(m2->files[1].size, 0);
  free(out);
  free(out2);
  ws_manifest_free(m);
  ws_manifest_free(m2);
}

static void test_big_sizes_exact(void **state) {
  ws_manifest_limits_t lim;
  ws_manifest_t *m = NULL;
  char *out = NULL;
  size_t len = 0;
  static const char json[] =
      "{\"files\":[" FW("\"a\"", "9007199254740991") "]}";
  (void)state;
  ws_manifest_limits_default(&lim);
  assert_int_equal(ws_manifest_parse(json, strlen(json), &lim, &m, NULL, 0),
                   WS_ELIMIT);
  lim.max_file_size = lim.max_total_size = UINT64_MAX;
  assert_int_equal(ws_manifest_parse(json, strlen(json), &lim, &m, NULL, 0), 0);
  assert_int_equal(m->files[0].size, 9007199254740991ull);
  assert_int_equal(ws_manifest_serialize(m, &out, &len), 0);
  assert_non_null(strstr(out, "9007199254740991"));
  free(out);
  ws_manifest_free(m);
}

static void test_limits(void **state) {
  ws_manifest_limits_t lim;
  ws_manifest_t *m = NULL;
  char err[256];
  static const char two[] = V1(MIB, FW("\"a\"", "10") "," FW("\"b\"", "10"));
  (void)state;

  ws_manifest_limits_default(&lim);
  lim.max_files = 1;
  assert_int_equal(
      ws_manifest_parse(two, strlen(two), &lim, &m, err, sizeof(err)),
      WS_ELIMIT);
  assert_non_null(strstr(err, "files"));
  ws_manifest_limits_default(&lim);
  lim.max_total_size = 15;
  assert_int_equal(
      ws_manifest_parse(two, strlen(two), &lim, &m, err, sizeof(err)),
      WS_ELIMIT);
  ws_manifest_limits_default(&lim);
  lim.max_bytes = sizeof(two) - 2;
  assert_int_equal(
      ws_manifest_parse(two, strlen(two), &lim, &m, err, sizeof(err)),
      WS_ELIMIT);
  assert_null(m);

  /* A document of tiny values blows the node budget before cJSON runs. */
  lim.max_bytes = 1 << 20;
  lim.max_files = 10;
  size_t n = 200000;
  char *doc = malloc(n * 2 + 64);
  assert_non_null(doc);
  size_t off = (size_t)snprintf(doc, 64, "{\"x\":[");
  for (size_t i = 0; i < n; i++) {
    doc[off++] = '0';
    doc[off++] = ',';
  }
  memcpy(doc + off, "0],\"files\":[]}", 15);
  assert_int_equal(
      ws_manifest_parse(doc, strlen(doc), &lim, &m, err, sizeof(err)),
      WS_ELIMIT);
  assert_non_null(strstr(err, "JSON values"));
  free(doc);
  assert_null(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rejects),
      cmocka_unit_test(test_accepts_names),
      cmocka_unit_test(test_v1_geometry),
      cmocka_unit_test(test_nchunks),
      cmocka_unit_test(test_legacy),
      cmocka_unit_test(test_whole_file_v1),
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_big_sizes_exact),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
