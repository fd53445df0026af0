/* test_s3_ini.c - the AWS shared-file INI parser (storage/s3/s3_ini.c),
 * profile lookups across the two files (s3_profile.c), the
 * credential_process JSON and the region-mismatch message (s3_retry.c):
 * sections, comments, sub-sections, precedence and hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3-int.h"

static const char CFG[] = "# top comment\n"
                          "; another\n"
                          "[default]\n"
                          "region = us-west-2\n"
                          "[profile  dev]   # trailing comment\n"
                          "Region=eu-west-1\n"
                          "endpoint_url = http://global:1\n"
                          "s3 =\n"
                          "  addressing_style = path\n"
                          "\tendpoint_url = http://s3only:2\n"
                          "output = json\n"
                          "  indented_plain = yes\n"
                          "credential_process = /bin/tool --x '#1' ; y\n"
                          "[services shared]\r\n"
                          "s3 =\r\n"
                          "  endpoint_url = http://svc:3\r\n"
                          "[profile dev]\n"
                          "region = eu-west-3\n";

static void test_sections(void **state) {
  (void)state;
  s3_ini_t ini;
  size_t line = 99;
  assert_int_equal(s3_ini_parse(CFG, sizeof(CFG) - 1, &ini, &line), 0);
  assert_string_equal(s3_ini_get(&ini, "default", "region"), "us-west-2");
  /* Names are normalised, keys lower-cased, the last value wins. */
  assert_string_equal(s3_ini_get(&ini, "profile dev", "region"), "eu-west-3");
  assert_string_equal(s3_ini_get(&ini, "profile dev", "s3.addressing_style"),
                      "path");
  assert_string_equal(s3_ini_get(&ini, "profile dev", "s3.endpoint_url"),
                      "http://s3only:2");
  assert_string_equal(s3_ini_get(&ini, "profile dev", "endpoint_url"),
                      "http://global:1");
  /* A sub-section ends at the next unindented key. */
  assert_string_equal(s3_ini_get(&ini, "profile dev", "indented_plain"), "yes");
  assert_null(s3_ini_get(&ini, "profile dev", "output.indented_plain"));
  /* Values are taken as written: no inline comments. */
  assert_string_equal(s3_ini_get(&ini, "profile dev", "credential_process"),
                      "/bin/tool --x '#1' ; y");
  assert_string_equal(s3_ini_get(&ini, "services shared", "s3.endpoint_url"),
                      "http://svc:3");
  assert_null(s3_ini_get(&ini, "profile nope", "region"));
  assert_true(s3_ini_has_section(&ini, "services shared"));
  s3_ini_free(&ini);
}

static void expect_bad(const char *text, size_t want_line) {
  s3_ini_t ini;
  size_t line = 12345;
  int rc = s3_ini_parse(text, strlen(text), &ini, &line);
  assert_true(rc == WS_EBADMSG || rc == WS_ELIMIT);
  assert_int_equal(line, want_line);
}

static void test_hostile(void **state) {
  (void)state;
  expect_bad("key = before any section\n", 1);
  expect_bad("[default]\nno equals sign here\n", 2);
  expect_bad("[default\nregion=x\n", 1);
  expect_bad("[]\n", 1);
  expect_bad("[default] junk\n", 1);
  expect_bad("[a[b]\n", 1);
  expect_bad("[default]\n = value\n", 2);
  expect_bad("[default]\nbad key = v\n", 2);
  /* An embedded NUL fails the file as a whole. */
  s3_ini_t ini;
  size_t line = 7;
  const char nul[] = "[default]\nregion=a\0b\n";
  assert_int_equal(s3_ini_parse(nul, sizeof(nul) - 1, &ini, &line), WS_EBADMSG);
  assert_int_equal(line, 0);
  /* An over-long line. */
  size_t n = S3_CREDS_FIELD_MAX + 1000;
  char *big = malloc(n + 32);
  assert_non_null(big);
  memcpy(big, "[default]\nk=", 12);
  memset(big + 12, 'v', n);
  big[12 + n] = '\0';
  assert_int_equal(s3_ini_parse(big, strlen(big), &ini, &line), WS_ELIMIT);
  assert_int_equal(line, 2);
  free(big);
  /* Too many entries. */
  size_t cap = 16 + (size_t)(S3_INI_ENTRIES_MAX + 1) * 8;
  char *many = malloc(cap);
  assert_non_null(many);
  size_t o = (size_t)snprintf(many, cap, "[default]\n");
  for (int i = 0; i <= S3_INI_ENTRIES_MAX; i++)
    o += (size_t)snprintf(many + o, cap - o, "k%d=v\n", i % 10);
  assert_int_equal(s3_ini_parse(many, o, &ini, &line), WS_ELIMIT);
  free(many);
  /* Empty input and comments only are fine. */
  assert_int_equal(s3_ini_parse("", 0, &ini, &line), 0);
  assert_int_equal(ini.n, 0);
  s3_ini_free(&ini);
  assert_int_equal(s3_ini_parse("# x\n;y\n\n", 8, &ini, &line), 0);
  s3_ini_free(&ini);
}

static void test_profile_lookup(void **state) {
  (void)state;
  s3_profile_t pr = {.name = "dev"};
  size_t line;
  const char cred[] = "[dev]\nregion = Bad_Region\n"
                      "[profile other]\naws_access_key_id = A\n";
  assert_int_equal(s3_ini_parse(CFG, sizeof(CFG) - 1, &pr.cfg, &line), 0);
  assert_int_equal(s3_ini_parse(cred, sizeof(cred) - 1, &pr.cred, &line), 0);
  /* The credentials file wins over the config file for the same key. */
  assert_string_equal(s3_profile_get(&pr, "dev", "region"), "Bad_Region");
  assert_string_equal(s3_profile_get(&pr, "dev", "s3.addressing_style"),
                      "path");
  assert_string_equal(s3_profile_get(&pr, "default", "region"), "us-west-2");
  assert_string_equal(s3_profile_get(&pr, "other", "aws_access_key_id"), "A");
  /* Settings: env region first, then the profile's; invalid values fail. */
  s3_env_t e = {.profile = "dev", .imds_disabled = "true"};
  s3_plan_t p = {0};
  pr.name = "default";
  assert_int_equal(s3_profile_settings(&e, &pr, &p), 0);
  assert_string_equal(p.region, "us-west-2");
  assert_null(p.endpoint);
  assert_null(p.imds_base);
  s3_plan_clear(&p);
  pr.name = "dev";
  assert_int_equal(s3_profile_settings(&e, &pr, &p), WS_EUSAGE);
  assert_non_null(strstr(p.errmsg, "Bad_Region"));
  s3_plan_clear(&p);
  s3_ini_free(&pr.cred);
  e.region = "ap-south-1";
  assert_int_equal(s3_profile_settings(&e, &pr, &p), 0);
  assert_string_equal(p.region, "ap-south-1");
  assert_string_equal(p.endpoint, "http://s3only:2");
  assert_int_equal(p.addressing, WS_S3_ADDR_PATH);
  s3_plan_clear(&p);
  e.ignore_endpoints = "true";
  assert_int_equal(s3_profile_settings(&e, &pr, &p), 0);
  assert_null(p.endpoint);
  s3_plan_clear(&p);
  s3_profile_free(&pr);
}

static void test_process_json(void **state) {
  (void)state;
  s3_creds_t c = {0};
  const char ok[] = "{\"Version\": 1, \"AccessKeyId\": \"AK\", "
                    "\"SecretAccessKey\": \"SK\", \"SessionToken\": \"T\", "
                    "\"Expiration\": \"2031-01-01T00:00:00Z\"}";
  assert_int_equal(s3_creds_parse_process(ok, sizeof(ok) - 1, &c), 0);
  assert_string_equal(c.akid, "AK");
  assert_string_equal(c.token, "T");
  assert_true(c.expires_ms > 0);
  s3_creds_clear(&c);
  const char *bad[] = {
      "garbage",
      "[]",
      "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\"}",
      "{\"Version\":2,\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\"}",
      "{\"Version\":1,\"AccessKeyId\":\"\",\"SecretAccessKey\":\"S\"}",
      "{\"Version\":1,\"AccessKeyId\":\"A\",\"SecretAccessKey\":5}",
      "{\"Version\":1,\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\","
      "\"Expiration\":\"tomorrow\"}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_not_equal(s3_creds_parse_process(bad[i], strlen(bad[i]), &c), 0);
}

static void test_region_hint(void **state) {
  (void)state;
  char m[256];
  assert_int_equal(s3_region_hint(301, NULL, "eu-west-1", NULL, 0, "bkt",
                                  "us-east-1", m, sizeof(m)),
                   1);
  assert_string_equal(m, "bucket bkt is in eu-west-1, not us-east-1: set "
                         "AWS_REGION=eu-west-1 or region in the profile");
  const char doc[] = "<Error><Code>AuthorizationHeaderMalformed</Code>"
                     "<Region>ap-northeast-1</Region></Error>";
  assert_int_equal(s3_region_hint(400, "AuthorizationHeaderMalformed", "", doc,
                                  sizeof(doc) - 1, "b2", "us-east-1", m,
                                  sizeof(m)),
                   1);
  assert_non_null(strstr(m, "is in ap-northeast-1, not us-east-1"));
  /* A hostile header value is not echoed; 301 still says what to do. */
  assert_int_equal(s3_region_hint(301, "PermanentRedirect", "x\"<evil>", NULL,
                                  0, "b3", "us-east-1", m, sizeof(m)),
                   1);
  assert_null(strstr(m, "evil"));
  assert_non_null(strstr(m, "AWS_REGION"));
  /* Other answers are not region mismatches. */
  assert_int_equal(s3_region_hint(400, "InvalidArgument", "eu-west-1", NULL, 0,
                                  "b", "us-east-1", m, sizeof(m)),
                   0);
  assert_int_equal(s3_region_hint(403, NULL, "eu-west-1", NULL, 0, "b",
                                  "us-east-1", m, sizeof(m)),
                   0);
  assert_int_equal(s3_region_hint(400, "AuthorizationHeaderMalformed",
                                  "us-east-1", NULL, 0, "b", "us-east-1", m,
                                  sizeof(m)),
                   0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sections),
      cmocka_unit_test(test_hostile),
      cmocka_unit_test(test_profile_lookup),
      cmocka_unit_test(test_process_json),
      cmocka_unit_test(test_region_hint),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
