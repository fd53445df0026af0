/* test_s3_creds.c - credential parsing and the local chain decision
 * (storage/s3/s3_creds_parse.c): env, shared file profiles, container/IMDS
 * JSON, STS XML, expiration times, refresh timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "s3-int.h"

static const char INI[] = "# comment\n"
                          "[default]\n"
                          "aws_access_key_id = AKIDDEFAULT\n"
                          "aws_secret_access_key=secretdefault\n"
                          "\n"
                          "[profile other]\r\n"
                          "  aws_access_key_id   =   AKIDOTHER  \r\n"
                          "aws_secret_access_key = s/ecret+other=\r\n"
                          "aws_session_token = tok\r\n"
                          "; another comment\n"
                          "[partial]\n"
                          "aws_access_key_id = AKIDPARTIAL\n";

static void test_ini(void **state) {
  (void)state;
  s3_creds_t c = {0};
  assert_int_equal(s3_creds_parse_ini(INI, sizeof(INI) - 1, "default", &c), 0);
  assert_string_equal(c.akid, "AKIDDEFAULT");
  assert_string_equal(c.secret, "secretdefault");
  assert_null(c.token);
  assert_string_equal(c.source, "shared-file:default");
  s3_creds_clear(&c);
  assert_int_equal(s3_creds_parse_ini(INI, sizeof(INI) - 1, "other", &c), 0);
  assert_string_equal(c.akid, "AKIDOTHER");
  assert_string_equal(c.secret, "s/ecret+other=");
  assert_string_equal(c.token, "tok");
  s3_creds_clear(&c);
  assert_int_equal(s3_creds_parse_ini(INI, sizeof(INI) - 1, "partial", &c),
                   WS_ENOTFOUND);
  assert_int_equal(s3_creds_parse_ini(INI, sizeof(INI) - 1, "nope", &c),
                   WS_ENOTFOUND);
  assert_int_equal(s3_creds_parse_ini("", 0, "default", &c), WS_ENOTFOUND);
  /* No trailing newline, and a value past the field cap. */
  const char t[] = "[default]\naws_access_key_id=A\naws_secret_access_key=B";
  assert_int_equal(s3_creds_parse_ini(t, sizeof(t) - 1, "default", &c), 0);
  assert_string_equal(c.secret, "B");
  s3_creds_clear(&c);
}

static void test_json(void **state) {
  (void)state;
  s3_creds_t c = {0};
  const char j[] = "{\"AccessKeyId\":\"ASIAX\",\"SecretAccessKey\":\"sek\","
                   "\"Token\":\"tkn\",\"Expiration\":\"2030-01-02T03:04:05Z\","
                   "\"RoleArn\":\"arn:aws:iam::1:role/r\"}";
  assert_int_equal(s3_creds_parse_json(j, sizeof(j) - 1, &c), 0);
  assert_string_equal(c.akid, "ASIAX");
  assert_string_equal(c.token, "tkn");
  assert_int_equal(c.expires_ms, (int64_t)1893553445 * 1000);
  s3_creds_clear(&c);
  const char *bad[] = {
      "{\"AccessKeyId\":\"A\"}",
      "{\"AccessKeyId\":\"\",\"SecretAccessKey\":\"s\"}",
      "{\"AccessKeyId\":1,\"SecretAccessKey\":\"s\"}",
      "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"s\",\"Expiration\":\"x\"}",
      "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"s\",\"Token\":5}",
      "[1,2]",
      "{\"AccessKeyId\":\"A\",",
      "",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(s3_creds_parse_json(bad[i], strlen(bad[i]), &c),
                     WS_EBADMSG);
  const char nt[] = "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"s\"}";
  assert_int_equal(s3_creds_parse_json(nt, sizeof(nt) - 1, &c), 0);
  assert_null(c.token);
  assert_int_equal(c.expires_ms, 0);
  s3_creds_clear(&c);
}

static void test_sts(void **state) {
  (void)state;
  s3_creds_t c = {0};
  const char x[] =
      "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/"
      "doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult>"
      "<SubjectFromWebIdentityToken>sub</SubjectFromWebIdentityToken>"
      "<Credentials><SessionToken>tok&amp;en</SessionToken>"
      "<SecretAccessKey>sec</SecretAccessKey>"
      "<Expiration>2030-01-02T03:04:05.123Z</Expiration>"
      "<AccessKeyId>ASIASTS</AccessKeyId></Credentials>"
      "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
  assert_int_equal(s3_creds_parse_sts(x, sizeof(x) - 1, &c), 0);
  assert_string_equal(c.akid, "ASIASTS");
  assert_string_equal(c.secret, "sec");
  assert_string_equal(c.token, "tok&en");
  assert_int_equal(c.expires_ms, (int64_t)1893553445 * 1000);
  s3_creds_clear(&c);
  const char e[] = "<ErrorResponse><Error><Code>AccessDenied</Code></Error>"
                   "</ErrorResponse>";
  assert_int_not_equal(s3_creds_parse_sts(e, sizeof(e) - 1, &c), 0);
  const char nok[] = "<Credentials><AccessKeyId>A</AccessKeyId>"
                     "<SecretAccessKey>s</SecretAccessKey></Credentials>";
  assert_int_not_equal(s3_creds_parse_sts(nok, sizeof(nok) - 1, &c), 0);
}

static void test_time(void **state) {
  (void)state;
  int64_t t;
  assert_int_equal(s3_time_parse("1970-01-01T00:00:00Z", &t), 0);
  assert_int_equal(t, 0);
  assert_int_equal(s3_time_parse("2024-02-29T12:00:00+00:00", &t), 0);
  assert_int_equal(t, (int64_t)1709208000 * 1000);
  assert_int_equal(s3_time_parse("2024-02-29T12:00:00.999999Z", &t), 0);
  assert_int_equal(t, (int64_t)1709208000 * 1000);
  const char *bad[] = {"2024-02-29 12:00:00Z",
                       "2024-02-29T12:00:00",
                       "2024-13-01T00:00:00Z",
                       "2024-02-29T12:00:00+02:00",
                       "24-02-29T12:00:00Z",
                       "2024-02-29T12:00:00Zjunk",
                       ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(s3_time_parse(bad[i], &t), WS_EBADMSG);
}

static void test_refresh_at(void **state) {
  (void)state;
  int64_t now = 1000000000;
  assert_int_equal(s3_creds_refresh_at(now, 0, 0), -1);
  /* One hour: 5-6 minutes before expiry, jittered. */
  int64_t exp = now + 3600 * 1000;
  int64_t a = s3_creds_refresh_at(now, exp, 0);
  int64_t b = s3_creds_refresh_at(now, exp, 59999);
  assert_int_equal(a, exp - 5 * 60 * 1000);
  assert_int_equal(b, exp - 5 * 60 * 1000 - 59999);
  for (uint32_t r = 0; r < 1000000; r += 7919) {
    int64_t t = s3_creds_refresh_at(now, exp, r);
    assert_true(t <= exp - 5 * 60 * 1000 && t >= exp - 6 * 60 * 1000);
  }
  /* Short-lived (60 s): between 50% and 75% of the lifetime. */
  exp = now + 60000;
  for (uint32_t r = 0; r < 100000; r += 101) {
    int64_t t = s3_creds_refresh_at(now, exp, r);
    assert_true(t >= now + 30000 && t <= now + 45001);
  }
  /* Already expired: now. */
  assert_int_equal(s3_creds_refresh_at(now, now - 1, 5), now);
}

static char tmpdir[64];

static char *write_tmp(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_plan_chain(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/ws_s3_creds_XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  s3_env_t e = {0};
  s3_plan_t p;
  /* 1. env wins over everything. */
  char credfile[256];
  snprintf(credfile, sizeof(credfile), "%s", write_tmp("credentials", INI));
  e.akid = "AKIDENV";
  e.secret = "secretenv";
  e.token = "sess";
  e.shared_file = credfile;
  e.role_arn = "arn:aws:iam::1:role/r";
  e.web_token_file = "/nonexistent";
  s3_creds_plan(&e, &p);
  assert_int_equal(p.status, 0);
  assert_int_equal(p.src, S3_SRC_ENV);
  assert_string_equal(p.creds.akid, "AKIDENV");
  assert_string_equal(p.creds.token, "sess");
  s3_plan_clear(&p);
  /* Half of an env pair is ignored: 2. the shared file with profile. */
  e.secret = NULL;
  e.profile = "other";
  s3_creds_plan(&e, &p);
  assert_int_equal(p.src, S3_SRC_FILE);
  assert_string_equal(p.creds.akid, "AKIDOTHER");
  assert_string_equal(p.creds.source, "shared-file:other");
  s3_plan_clear(&p);
  /* 3. web identity: the token is read and form-encoded for STS. */
  e.akid = NULL;
  e.profile = "missing";
  char tokfile[256];
  snprintf(tokfile, sizeof(tokfile), "%s",
           write_tmp("webtoken", "eyJ.tok+en/=\n"));
  e.web_token_file = tokfile;
  e.session_name = "sess 1";
  e.region = "eu-west-1";
  s3_creds_plan(&e, &p);
  assert_int_equal(p.status, 0);
  assert_int_equal(p.src, S3_SRC_WEBID);
  assert_string_equal(p.url, "https://sts.eu-west-1.amazonaws.com/");
  assert_string_equal(
      p.body, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&"
              "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr&"
              "RoleSessionName=sess%201&WebIdentityToken=eyJ.tok%2Ben%2F%3D");
  s3_plan_clear(&p);
  e.sts_endpoint = "http://127.0.0.1:1/sts";
  s3_creds_plan(&e, &p);
  assert_string_equal(p.url, "http://127.0.0.1:1/sts");
  s3_plan_clear(&p);
  /* A configured but unreadable token file is an error, not a fall-through. */
  e.web_token_file = "/nonexistent/token";
  s3_creds_plan(&e, &p);
  assert_int_equal(p.status, WS_ECREDS);
  assert_non_null(strstr(p.errmsg, "/nonexistent/token"));
  s3_plan_clear(&p);
  /* 4. container endpoint with a token file. */
  e.role_arn = NULL;
  e.container_full_uri = "http://127.0.0.1:9/creds";
  char authfile[256];
  snprintf(authfile, sizeof(authfile), "%s", write_tmp("auth", "Bearer abc\n"));
  e.container_token_file = authfile;
  s3_creds_plan(&e, &p);
  assert_int_equal(p.status, 0);
  assert_int_equal(p.src, S3_SRC_CONTAINER);
  assert_string_equal(p.url, "http://127.0.0.1:9/creds");
  assert_string_equal(p.auth, "Bearer abc");
  s3_plan_clear(&p);
  /* Plain http only to loopback / the link-local agent addresses. */
  e.container_full_uri = "http://evil.example.com/creds";
  s3_creds_plan(&e, &p);
  assert_int_equal(p.status, WS_ECREDS);
  s3_plan_clear(&p);
  e.container_full_uri = NULL;
  e.container_rel_uri = "/v2/credentials/x";
  e.container_token_file = NULL;
  s3_creds_plan(&e, &p);
  assert_string_equal(p.url, "http://169.254.170.2/v2/credentials/x");
  assert_null(p.auth);
  s3_plan_clear(&p);
  /* 5. IMDS, unless disabled. */
  e.container_rel_uri = NULL;
  e.imds_endpoint = "http://127.0.0.1:8";
  s3_creds_plan(&e, &p);
  assert_int_equal(p.src, S3_SRC_IMDS);
  assert_string_equal(p.url, "http://127.0.0.1:8");
  s3_plan_clear(&p);
  e.imds_disabled = "TRUE";
  s3_creds_plan(&e, &p);
  assert_int_equal(p.src, S3_SRC_NONE);
  assert_int_equal(p.status, WS_ECREDS);
  assert_non_null(strstr(p.errmsg, "no AWS credentials"));
  s3_plan_clear(&p);
  unlink(credfile);
  unlink(tokfile);
  unlink(authfile);
  rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ini),        cmocka_unit_test(test_json),
      cmocka_unit_test(test_sts),        cmocka_unit_test(test_time),
      cmocka_unit_test(test_refresh_at), cmocka_unit_test(test_plan_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
