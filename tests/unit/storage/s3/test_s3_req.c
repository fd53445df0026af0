/* test_s3_req.c - s3:// URIs, endpoints, SigV4 key/query encoding and
 * path-style vs virtual-hosted addressing (storage/s3/s3_req.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3-int.h"

static void test_uri_parse(void **state) {
  (void)state;
  ws_s3_uri_t u;
  assert_int_equal(ws_s3_uri_parse("s3://bucket/a/b c.bin", &u), 0);
  assert_string_equal(u.bucket, "bucket");
  assert_string_equal(u.key, "a/b c.bin");
  ws_s3_uri_free(&u);
  assert_int_equal(ws_s3_uri_parse("s3://bucket", &u), 0);
  assert_string_equal(u.key, "");
  ws_s3_uri_free(&u);
  assert_int_equal(ws_s3_uri_parse("s3://bucket/", &u), 0);
  assert_string_equal(u.key, "");
  ws_s3_uri_free(&u);
  assert_int_equal(ws_s3_uri_parse("s3://my.bucket-1/p/", &u), 0);
  assert_string_equal(u.key, "p/");
  ws_s3_uri_free(&u);
  assert_int_equal(ws_s3_uri_parse("http://bucket/k", &u), WS_EUSAGE);
  assert_int_equal(ws_s3_uri_parse("s3://ab/k", &u), WS_EUSAGE);
  assert_int_equal(ws_s3_uri_parse("s3:///k", &u), WS_EUSAGE);
  assert_int_equal(ws_s3_uri_parse("s3://bad bucket/k", &u), WS_EUSAGE);
  assert_int_equal(ws_s3_uri_parse("s3://b%2fx/k", &u), WS_EUSAGE);
  char longkey[1100];
  memset(longkey, 'k', sizeof(longkey));
  memcpy(longkey, "s3://bkt/", 9);
  longkey[sizeof(longkey) - 1] = '\0';
  assert_int_equal(ws_s3_uri_parse(longkey, &u), WS_EUSAGE);
  assert_int_equal(ws_s3_uri_parse(NULL, &u), WS_EUSAGE);
}

static char *enc(const char *s, int keep_slash) {
  s3_buf_t b = {.max = 4096};
  assert_int_equal(s3_uri_encode(&b, s, strlen(s), keep_slash), 0);
  if (!b.p)
    assert_int_equal(s3_buf_add(&b, "", 0), 0);
  return b.p;
}

static void test_encode(void **state) {
  (void)state;
  struct {
    const char *in;
    const char *slash;
    const char *noslash;
  } cases[] = {
      {"plain-key_1.bin~", "plain-key_1.bin~", "plain-key_1.bin~"},
      {"a b", "a%20b", "a%20b"},
      {"a+b=c", "a%2Bb%3Dc", "a%2Bb%3Dc"},
      {"dir/file", "dir/file", "dir%2Ffile"},
      {"100%", "100%25", "100%25"},
      {"caf\xc3\xa9", "caf%C3%A9", "caf%C3%A9"},
      {"\xe2\x9c\x93/x", "%E2%9C%93/x", "%E2%9C%93%2Fx"},
      {"q?x#y&z", "q%3Fx%23y%26z", "q%3Fx%23y%26z"},
      {"*'()!$,;:@", "%2A%27%28%29%21%24%2C%3B%3A%40",
       "%2A%27%28%29%21%24%2C%3B%3A%40"},
      {"./../a//b", "./../a//b", ".%2F..%2Fa%2F%2Fb"},
      {"\x01\x7f", "%01%7F", "%01%7F"},
      {"", "", ""},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *a = enc(cases[i].in, 1);
    char *b = enc(cases[i].in, 0);
    assert_string_equal(a, cases[i].slash);
    assert_string_equal(b, cases[i].noslash);
    free(a);
    free(b);
  }
  s3_buf_t small = {.max = 5};
  assert_int_equal(s3_uri_encode(&small, "a b c", 5, 1), WS_ELIMIT);
  s3_buf_free(&small);
}

static void test_endpoint(void **state) {
  (void)state;
  s3_endpoint_t ep;
  assert_int_equal(s3_endpoint_parse("http://127.0.0.1:7490", &ep), 0);
  assert_string_equal(ep.scheme, "http");
  assert_string_equal(ep.host, "127.0.0.1");
  assert_string_equal(ep.hostport, "127.0.0.1:7490");
  assert_string_equal(ep.path, "");
  assert_true(ep.is_ip);
  assert_false(ep.is_aws);
  s3_endpoint_free(&ep);
  assert_int_equal(
      s3_endpoint_parse("https://s3.eu-west-1.amazonaws.com/", &ep), 0);
  assert_true(ep.is_aws);
  assert_false(ep.is_ip);
  assert_string_equal(ep.path, "");
  s3_endpoint_free(&ep);
  assert_int_equal(s3_endpoint_parse("http://[::1]:9000/base/", &ep), 0);
  assert_string_equal(ep.host, "[::1]");
  assert_string_equal(ep.path, "/base");
  assert_true(ep.is_ip);
  s3_endpoint_free(&ep);
  assert_int_equal(s3_endpoint_parse("ftp://x", &ep), WS_EUSAGE);
  assert_int_equal(s3_endpoint_parse("http://", &ep), WS_EUSAGE);
  assert_int_equal(s3_endpoint_parse("http://h?x=1", &ep), WS_EUSAGE);
  assert_int_equal(s3_endpoint_parse("http://user@h", &ep), WS_EUSAGE);
  assert_int_equal(s3_endpoint_parse("http://[::1", &ep), WS_EUSAGE);
}

static char *url(const char *endpoint, ws_s3_addressing_t a, const char *bucket,
                 const char *key, const s3_qparam_t *q, size_t nq, int *rc) {
  s3_endpoint_t ep;
  assert_int_equal(s3_endpoint_parse(endpoint, &ep), 0);
  char *out = NULL;
  *rc = s3_url_build(&ep, a, bucket, key, q, nq, &out);
  s3_endpoint_free(&ep);
  return out;
}

static void test_addressing(void **state) {
  (void)state;
  int rc;
  char *u = url("http://127.0.0.1:7490", WS_S3_ADDR_AUTO, "bkt", "a b/c+d",
                NULL, 0, &rc);
  assert_int_equal(rc, 0);
  assert_string_equal(u, "http://127.0.0.1:7490/bkt/a%20b/c%2Bd");
  free(u);
  u = url("https://s3.us-west-2.amazonaws.com", WS_S3_ADDR_AUTO, "bkt", "k",
          NULL, 0, &rc);
  assert_string_equal(u, "https://bkt.s3.us-west-2.amazonaws.com/k");
  free(u);
  /* Dotted bucket on https: the wildcard certificate does not cover it. */
  u = url("https://s3.us-west-2.amazonaws.com", WS_S3_ADDR_AUTO, "my.bkt", "k",
          NULL, 0, &rc);
  assert_string_equal(u, "https://s3.us-west-2.amazonaws.com/my.bkt/k");
  free(u);
  u = url("https://s3.us-west-2.amazonaws.com", WS_S3_ADDR_PATH, "bkt", "k",
          NULL, 0, &rc);
  assert_string_equal(u, "https://s3.us-west-2.amazonaws.com/bkt/k");
  free(u);
  u = url("http://localhost:7490", WS_S3_ADDR_VIRTUAL, "bkt", "d/k", NULL, 0,
          &rc);
  assert_string_equal(u, "http://bkt.localhost:7490/d/k");
  free(u);
  u = url("http://127.0.0.1:7490", WS_S3_ADDR_VIRTUAL, "bkt", "k", NULL, 0,
          &rc);
  assert_int_equal(rc, WS_EUSAGE);
  assert_null(u);
  u = url("http://localhost:7490", WS_S3_ADDR_VIRTUAL, "Bad_Bucket", "k", NULL,
          0, &rc);
  assert_int_equal(rc, WS_EUSAGE);
  u = url("http://h:1/base", WS_S3_ADDR_PATH, "bkt", "", NULL, 0, &rc);
  assert_string_equal(u, "http://h:1/base/bkt");
  free(u);
}

static void test_query(void **state) {
  (void)state;
  int rc;
  s3_qparam_t q[] = {{"prefix", "models/llama 3/"},
                     {"list-type", "2"},
                     {"continuation-token", "a+b/c=="},
                     {"max-keys", "1000"}};
  char *u = url("http://h", WS_S3_ADDR_PATH, "bkt", "", q, 4, &rc);
  assert_int_equal(rc, 0);
  assert_string_equal(u,
                      "http://h/bkt?continuation-token=a%2Bb%2Fc%3D%3D&"
                      "list-type=2&max-keys=1000&prefix=models%2Fllama%203%2F");
  free(u);
  s3_qparam_t q2[] = {{"uploads", NULL}};
  u = url("http://h", WS_S3_ADDR_PATH, "bkt", "big.bin", q2, 1, &rc);
  assert_string_equal(u, "http://h/bkt/big.bin?uploads=");
  free(u);
  s3_qparam_t q3[] = {{"uploadId", "x~y z"}, {"partNumber", "7"}};
  u = url("http://h", WS_S3_ADDR_PATH, "bkt", "k", q3, 2, &rc);
  assert_string_equal(u, "http://h/bkt/k?partNumber=7&uploadId=x~y%20z");
  free(u);
}

static void test_sigv4_param(void **state) {
  (void)state;
  char buf[64];
  assert_int_equal(s3_sigv4_param("eu-central-1", buf, sizeof(buf)), 0);
  assert_string_equal(buf, "aws:amz:eu-central-1:s3");
  assert_int_equal(s3_sigv4_param("", buf, sizeof(buf)), WS_EUSAGE);
  assert_int_equal(s3_sigv4_param("us:east", buf, sizeof(buf)), WS_EUSAGE);
  assert_int_equal(s3_sigv4_param("us-east-1", buf, 10), WS_EUSAGE);
}

static void test_bucket_rules(void **state) {
  (void)state;
  assert_true(s3_bucket_dns_ok("abc", 1));
  assert_false(s3_bucket_dns_ok("a.b.c", 1));
  assert_true(s3_bucket_dns_ok("a.b.c", 0));
  assert_false(s3_bucket_dns_ok("a..b", 0));
  assert_false(s3_bucket_dns_ok("-ab", 0));
  assert_false(s3_bucket_dns_ok("ABC", 0));
  assert_false(s3_bucket_dns_ok("ab", 0));
  assert_true(s3_bucket_valid("Legacy_Bucket"));
  assert_false(s3_bucket_valid("has space"));
}

static void test_config_env(void **state) {
  (void)state;
  ws_s3_config_t c;
  setenv("AWS_ENDPOINT_URL", "http://generic:1", 1);
  setenv("AWS_ENDPOINT_URL_S3", "http://s3only:2", 1);
  setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
  unsetenv("AWS_REGION");
  setenv("WS_S3_ADDRESSING", "virtual", 1);
  ws_s3_config_default(&c);
  ws_s3_config_from_env(&c);
  assert_string_equal(c.endpoint, "http://s3only:2");
  assert_string_equal(c.region, "eu-west-3");
  assert_int_equal(c.addressing, WS_S3_ADDR_VIRTUAL);
  setenv("AWS_REGION", "ap-south-1", 1);
  unsetenv("AWS_ENDPOINT_URL_S3");
  ws_s3_config_default(&c);
  ws_s3_config_from_env(&c);
  assert_string_equal(c.endpoint, "http://generic:1");
  assert_string_equal(c.region, "ap-south-1");
  unsetenv("AWS_ENDPOINT_URL");
  unsetenv("AWS_REGION");
  unsetenv("AWS_DEFAULT_REGION");
  unsetenv("WS_S3_ADDRESSING");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uri_parse),    cmocka_unit_test(test_encode),
      cmocka_unit_test(test_endpoint),     cmocka_unit_test(test_addressing),
      cmocka_unit_test(test_query),        cmocka_unit_test(test_sigv4_param),
      cmocka_unit_test(test_bucket_rules), cmocka_unit_test(test_config_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
