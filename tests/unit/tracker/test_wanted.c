/* test_wanted.c - the wanted set: URI parsing, add/update/remove, caps,
 * digest/URI consistency, the --state file round trip.
 */
#include "trk_fixture.h"

#include <stdlib.h>

#define HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define URI "s3://models/llama/sha256-" HEX "/"

static void test_uri_digest(void **state) {
  (void)state;
  ws_hash_t d, want;
  assert_int_equal(ws_hash_from_hex(HEX, 64, &want), 0);
  assert_int_equal(trk_wanted_uri_digest(URI, &d), 0);
  assert_true(ws_hash_eq(&d, &want));
  assert_int_equal(trk_wanted_uri_digest("s3://b/p/sha256-" HEX, &d), 0);
  assert_int_equal(trk_wanted_uri_digest("s3://b/llama/v1/", &d), WS_ENOTFOUND);
  assert_int_equal(trk_wanted_uri_digest("s3://b/sha256-abc/", &d),
                   WS_ENOTFOUND);
  assert_int_equal(trk_wanted_uri_digest("https://b/sha256-" HEX "/", &d),
                   WS_EUSAGE);
  assert_int_equal(trk_wanted_uri_digest("s3://", &d), WS_EUSAGE);
  assert_int_equal(trk_wanted_uri_digest("s3://b/a b", &d), WS_EUSAGE);
  assert_int_equal(trk_wanted_uri_digest("s3://b/\x01", &d), WS_EUSAGE);
  char *big = malloc(TRK_URI_MAX + 2);
  assert_non_null(big);
  memcpy(big, "s3://", 5);
  memset(big + 5, 'a', TRK_URI_MAX - 4);
  big[TRK_URI_MAX + 1] = '\0';
  assert_int_equal(trk_wanted_uri_valid(big), WS_EUSAGE);
  big[TRK_URI_MAX] = '\0';
  assert_int_equal(trk_wanted_uri_valid(big), 0);
  free(big);
}

static void test_add_update_remove(void **state) {
  (void)state;
  trk_wanted_t *w = trk_wanted_new();
  ws_hash_t d, other = fx_digest(3);
  assert_int_equal(ws_hash_from_hex(HEX, 64, &d), 0);
  assert_int_equal(trk_wanted_add(w, NULL, NULL, 0), WS_EUSAGE);
  /* By digest first (no URI known), then the URI fills in. */
  assert_int_equal(trk_wanted_add(w, &d, NULL, 10), 0);
  uint64_t v = trk_wanted_version(w);
  assert_string_equal(trk_wanted_at(w, 0)->uri, "");
  assert_int_equal(trk_wanted_add(w, NULL, URI, 20), 1);
  assert_true(trk_wanted_version(w) > v);
  assert_int_equal(trk_wanted_count(w), 1);
  const trk_wanted_entry_t *e = trk_wanted_find(w, &d);
  assert_non_null(e);
  assert_string_equal(e->uri, URI);
  assert_string_equal(e->digest_str, "sha256-" HEX);
  assert_int_equal(e->added_ms, 10);
  /* Idempotent: same again changes nothing. */
  v = trk_wanted_version(w);
  assert_int_equal(trk_wanted_add(w, &d, URI, 30), 1);
  assert_int_equal(trk_wanted_version(w), v);
  /* Digest and URI that disagree. */
  assert_int_equal(trk_wanted_add(w, &other, URI, 0), WS_EDIGEST);
  assert_int_equal(trk_wanted_add(w, NULL, "gs://x/", 0), WS_EUSAGE);
  /* Legacy layout: keyed by URI. */
  assert_int_equal(trk_wanted_add(w, NULL, "s3://b/llama/v1/", 0), 0);
  assert_int_equal(trk_wanted_add(w, NULL, "s3://b/llama/v1/", 0), 1);
  assert_int_equal(trk_wanted_count(w), 2);
  assert_false(trk_wanted_at(w, 1)->has_digest);
  assert_null(trk_wanted_at(w, 2));
  /* Remove by URI and by digest string. */
  assert_int_equal(trk_wanted_remove(w, "s3://b/llama/v1/"), 0);
  assert_int_equal(trk_wanted_remove(w, "s3://b/llama/v1/"), WS_ENOTFOUND);
  assert_int_equal(trk_wanted_remove(w, ""), WS_ENOTFOUND);
  assert_int_equal(trk_wanted_remove(w, "sha256-" HEX), 0);
  assert_int_equal(trk_wanted_count(w), 0);
  assert_null(trk_wanted_find(w, &d));
  trk_wanted_free(w);
  trk_wanted_free(NULL);
}

static void test_cap(void **state) {
  (void)state;
  trk_wanted_t *w = trk_wanted_new();
  for (uint32_t i = 0; i < TRK_MAX_WANTED; i++) {
    ws_hash_t d = fx_digest((uint8_t)i);
    assert_int_equal(trk_wanted_add(w, &d, NULL, i), 0);
  }
  /* An existing entry still updates at the cap. */
  ws_hash_t d0 = fx_digest(0);
  assert_int_equal(trk_wanted_add(w, &d0, NULL, 0), 1);
  /* Full: a new entry evicts the oldest (no refusal). */
  ws_hash_t d = fx_digest(200);
  assert_int_equal(trk_wanted_add(w, &d, NULL, 0), 0);
  assert_int_equal(trk_wanted_count(w), TRK_MAX_WANTED);
  assert_null(trk_wanted_find(w, &d0));
  /* Removal keeps insertion order of the rest. */
  ws_hash_t d1 = fx_digest(1);
  assert_true(ws_hash_eq(&trk_wanted_at(w, 0)->digest, &d1));
  char key[WS_DIGEST_STR_LEN + 1];
  ws_digest_to_str(&d1, key);
  assert_int_equal(trk_wanted_remove(w, key), 0);
  ws_hash_t d2 = fx_digest(2);
  assert_true(ws_hash_eq(&trk_wanted_at(w, 0)->digest, &d2));
  /* TTL: entries added at 0..63 ms, ttl 10 ms, now 12 ms. */
  trk_wanted_set_ttl(w, 10);
  assert_int_equal(trk_wanted_expire(w, 12), 2); /* added at 2 and 0 */
  assert_int_equal(trk_wanted_count(w), TRK_MAX_WANTED - 3u);
  trk_wanted_free(w);
}

static void test_state_round_trip(void **state) {
  (void)state;
  trk_wanted_t *w = trk_wanted_new();
  ws_hash_t d2 = fx_digest(2);
  assert_int_equal(trk_wanted_add(w, NULL, URI, 0), 0);
  assert_int_equal(trk_wanted_add(w, &d2, NULL, 0), 0);
  assert_int_equal(trk_wanted_add(w, NULL, "s3://b/legacy/v2/", 0), 0);
  char *json = trk_wanted_to_json(w);
  assert_non_null(json);
  trk_wanted_t *w2 = trk_wanted_new();
  uint32_t skipped = 99;
  assert_int_equal(trk_wanted_load_json(w2, json, strlen(json), 5, &skipped),
                   0);
  assert_int_equal(skipped, 0);
  assert_int_equal(trk_wanted_count(w2), 3);
  for (uint32_t i = 0; i < 3; i++) {
    assert_string_equal(trk_wanted_at(w2, i)->uri, trk_wanted_at(w, i)->uri);
    assert_string_equal(trk_wanted_at(w2, i)->digest_str,
                        trk_wanted_at(w, i)->digest_str);
  }
  free(json);
  /* Malformed documents and bad entries. */
  const char *bad = "{\"wanted\": 3}";
  assert_int_equal(trk_wanted_load_json(w2, bad, strlen(bad), 0, NULL),
                   WS_EJSON);
  assert_int_equal(trk_wanted_load_json(w2, "{", 1, 0, NULL), WS_EJSON);
  const char *mixed = "{\"version\":1,\"wanted\":[{\"digest\":\"sha256-zz\"},"
                      "{\"uri\":\"ftp://x\"},{},{\"uri\":\"s3://b/new/\"}]}";
  assert_int_equal(trk_wanted_load_json(w2, mixed, strlen(mixed), 0, &skipped),
                   0);
  assert_int_equal(skipped, 3);
  assert_int_equal(trk_wanted_count(w2), 4);
  trk_wanted_free(w2);
  trk_wanted_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uri_digest),
      cmocka_unit_test(test_add_update_remove),
      cmocka_unit_test(test_cap),
      cmocka_unit_test(test_state_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
