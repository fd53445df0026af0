/* test_crypto_kat.c - known-answer tests for the crypto wrappers:
 * SHA-256 (storage/manifest/digest.h) against the FIPS 180-2 / NIST CAVP
 * examples and Ed25519 (storage/manifest/sig.h) against RFC 8032 section 7.1,
 * plus key files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "digest.h"
#include "sig.h"

static void unhex(const char *hex, uint8_t *out, size_t n) {
  assert_int_equal(strlen(hex), 2 * n);
  for (size_t i = 0; i < n; i++) {
    unsigned v = 0;
    assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
    out[i] = (uint8_t)v;
  }
}

static void expect_hash(const ws_hash_t *h, const char *hex) {
  char got[WS_SHA256_HEX_LEN + 1];
  ws_hash_to_hex(h, got);
  assert_string_equal(got, hex);
}

static const struct {
  const char *msg;
  const char *hex;
} sha_vectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
     "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

static void test_sha256_vectors(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(sha_vectors) / sizeof(sha_vectors[0]); i++) {
    ws_hash_t h;
    ws_sha256_t *ctx = ws_sha256_new();
    const char *msg = sha_vectors[i].msg;
    size_t len = strlen(msg);
    assert_int_equal(ws_sha256(msg, len, &h), 0);
    expect_hash(&h, sha_vectors[i].hex);
    /* the same bytes fed in uneven pieces */
    assert_non_null(ctx);
    assert_int_equal(ws_sha256_init(ctx), 0);
    for (size_t off = 0; off < len; off += 7)
      assert_int_equal(
          ws_sha256_update(ctx, msg + off, len - off < 7 ? len - off : 7), 0);
    assert_int_equal(ws_sha256_final(ctx, &h), 0);
    expect_hash(&h, sha_vectors[i].hex);
    ws_sha256_free(ctx);
  }
}

static void test_sha256_million_a(void **state) {
  char path[] = "/tmp/ws-kat-XXXXXX";
  char *buf = malloc(1000000);
  ws_hash_t h;
  int fd;
  (void)state;
  assert_non_null(buf);
  memset(buf, 'a', 1000000);
  assert_int_equal(ws_sha256(buf, 1000000, &h), 0);
  expect_hash(
      &h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  /* and through the pread path, from an offset */
  fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(write(fd, "xyz", 3), 3);
  assert_int_equal(write(fd, buf, 1000000), 1000000);
  assert_int_equal(ws_sha256_fd(fd, 3, 1000000, &h), 0);
  expect_hash(
      &h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  assert_int_equal(ws_sha256_fd(fd, 4, 1000000, &h), WS_ETRUNCATED);
  close(fd);
  free(buf);
}

static void test_hex_forms(void **state) {
  ws_hash_t h, h2;
  char s[WS_DIGEST_STR_LEN + 1];
  (void)state;
  assert_int_equal(
      ws_hash_from_hex(
          "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
          64, &h),
      0);
  expect_hash(
      &h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ws_digest_to_str(&h, s);
  assert_string_equal(
      s, "sha256-"
         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert_int_equal(ws_digest_from_str(s, &h2), 0);
  assert_true(ws_hash_eq(&h, &h2));
  assert_int_equal(ws_digest_from_str(s + 7, &h2), WS_EHEX);
  assert_int_equal(ws_hash_from_hex(s + 7, 63, &h2), WS_EHEX);
  assert_int_equal(
      ws_hash_from_hex(
          "ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
          64, &h2),
      WS_EHEX);
}

/* RFC 8032 7.1: TEST 1, 2, 3 and TEST SHA(abc). */
static const struct {
  const char *seed, *pub, *msg, *sig;
} ed_vectors[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
     "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
    {"833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
     "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
     "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
     "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
     "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
     "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"},
};

static void test_ed25519_rfc8032(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(ed_vectors) / sizeof(ed_vectors[0]); i++) {
    uint8_t seed[32], msg[64 + 1]; /* +1: room for the appended byte */
    size_t mlen = strlen(ed_vectors[i].msg) / 2;
    ws_sig_pub_t pk, want_pk;
    ws_sig_secret_t sk;
    ws_sig_t sig, want;

    unhex(ed_vectors[i].seed, seed, 32);
    unhex(ed_vectors[i].pub, want_pk.b, 32);
    unhex(ed_vectors[i].msg, msg, mlen);
    unhex(ed_vectors[i].sig, want.b, 64);
    assert_int_equal(ws_sig_from_seed(seed, &pk, &sk), 0);
    assert_memory_equal(pk.b, want_pk.b, 32);
    assert_int_equal(ws_sig_sign(msg, mlen, &sk, &sig), 0);
    assert_memory_equal(sig.b, want.b, 64);
    assert_int_equal(ws_sig_verify(msg, mlen, &want, &pk), 0);
    /* any change to signature, message or key must fail */
    sig.b[i * 7 % 64] ^= 0x01;
    assert_int_equal(ws_sig_verify(msg, mlen, &sig, &pk), WS_ESIG);
    sig.b[i * 7 % 64] ^= 0x01;
    msg[mlen] = 0;
    assert_int_equal(ws_sig_verify(msg, mlen + 1, &sig, &pk), WS_ESIG);
    pk.b[5] ^= 0x80;
    assert_int_equal(ws_sig_verify(msg, mlen, &sig, &pk), WS_ESIG);
    ws_sig_secret_wipe(&sk);
  }
}

static void test_key_files(void **state) {
  char dir[] = "/tmp/ws-keys-XXXXXX", path[64], pubpath[64], hex[65];
  ws_sig_pub_t pk, pk2, pk3;
  ws_sig_secret_t sk, sk2;
  uint8_t seed[32], seed2[32], b[32];
  struct stat st;
  FILE *f;
  (void)state;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof(path), "%s/key", dir);
  snprintf(pubpath, sizeof(pubpath), "%s/pub", dir);
  assert_int_equal(ws_sig_keypair(&pk, &sk), 0);
  assert_int_equal(ws_sig_secret_save(path, &sk), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(st.st_size, 65);
  assert_int_equal(ws_sig_secret_save(path, &sk), -EEXIST);
  assert_int_equal(ws_sig_secret_load(path, &sk2, &pk2), 0);
  assert_memory_equal(pk.b, pk2.b, 32);
  ws_sig_seed(&sk, seed);
  ws_sig_seed(&sk2, seed2);
  assert_memory_equal(seed, seed2, 32);

  ws_sig_hex32_format(pk.b, hex);
  assert_int_equal(ws_sig_pub_load(hex, &pk3), 0);
  assert_memory_equal(pk.b, pk3.b, 32);
  f = fopen(pubpath, "w");
  assert_non_null(f);
  fprintf(f, "%s\r\n", hex);
  fclose(f);
  memset(&pk3, 0, sizeof(pk3));
  assert_int_equal(ws_sig_pub_load(pubpath, &pk3), 0);
  assert_memory_equal(pk.b, pk3.b, 32);
  assert_int_equal(ws_sig_pub_load("/nonexistent/pub", &pk3), WS_EKEY);

  assert_int_equal(ws_sig_hex32_parse(hex, 63, b), WS_EKEY);
  hex[10] = 'z';
  assert_int_equal(ws_sig_hex32_parse(hex, 64, b), WS_EKEY);
  assert_int_equal(ws_sig_hex32_parse("00 11", 5, b), WS_EKEY);

  f = fopen(path, "w");
  assert_non_null(f);
  fputs("not a key\n", f);
  fclose(f);
  assert_int_equal(ws_sig_secret_load(path, &sk2, &pk2), WS_EKEY);
  unlink(path);
  unlink(pubpath);
  rmdir(dir);
  ws_sig_secret_wipe(&sk);
  ws_sig_secret_wipe(&sk2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vectors),
      cmocka_unit_test(test_sha256_million_a),
      cmocka_unit_test(test_hex_forms),
      cmocka_unit_test(test_ed25519_rfc8032),
      cmocka_unit_test(test_key_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
