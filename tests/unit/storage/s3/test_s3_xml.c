/* test_s3_xml.c - the bounded XML extractor (storage/s3/s3_xml.c) and the
 * retry policy (storage/s3/s3_retry.c), including hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3-int.h"

static const char LIST[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>bkt</Name><Prefix>m/</Prefix><KeyCount>2</KeyCount>"
    "<MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>"
    "<Contents><Key>m/a &amp; b&lt;1&gt;.bin</Key><Size>123</Size>"
    "<ETag>&quot;abc&quot;</ETag></Contents>"
    "<Contents><Key>m/caf&#233;&#x2713;</Key><Size>0</Size>"
    "<ETag>\"d41d\"</ETag></Contents>"
    "<NextContinuationToken>m/caf\xc3\xa9</NextContinuationToken>"
    "</ListBucketResult>";

static void test_find_iterate(void **state) {
  (void)state;
  size_t pos = 0, a, b, n = 0;
  const char *keys[] = {"m/a & b<1>.bin", "m/caf\xc3\xa9\xe2\x9c\x93"};
  while (s3_xml_find(LIST, sizeof(LIST) - 1, "Contents", &pos, &a, &b) == 0) {
    char *k = NULL;
    assert_int_equal(s3_xml_get(LIST + a, b - a, "Key", 1024, &k), 0);
    assert_string_equal(k, keys[n]);
    free(k);
    n++;
  }
  assert_int_equal(n, 2);
  char *v = NULL;
  /* <KeyCount> must not match a search for <Key>. */
  assert_int_equal(s3_xml_get(LIST, sizeof(LIST) - 1, "Key", 1024, &v), 0);
  assert_string_equal(v, "m/a & b<1>.bin");
  free(v);
  assert_int_equal(s3_xml_get(LIST, sizeof(LIST) - 1, "ETag", 64, &v), 0);
  assert_string_equal(v, "\"abc\"");
  free(v);
  assert_int_equal(s3_xml_get(LIST, sizeof(LIST) - 1, "IsTruncated", 8, &v), 0);
  assert_string_equal(v, "true");
  free(v);
  assert_int_equal(s3_xml_get(LIST, sizeof(LIST) - 1, "Missing", 8, &v),
                   WS_ENOTFOUND);
}

static void test_error_doc(void **state) {
  (void)state;
  const char doc[] = "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch"
                     "</Code><Message>The request signature we calculated "
                     "does not match</Message><RequestId>x</RequestId>"
                     "</Error>";
  char *code = NULL;
  assert_int_equal(s3_xml_get(doc, sizeof(doc) - 1, "Code", 128, &code), 0);
  assert_string_equal(code, "SignatureDoesNotMatch");
  free(code);
  const char selfclose[] = "<R><UploadId/><X>1</X></R>";
  assert_int_equal(
      s3_xml_get(selfclose, sizeof(selfclose) - 1, "UploadId", 64, &code), 0);
  assert_string_equal(code, "");
  free(code);
  const char attr[] = "<R><Key a=\"1\">v</Key></R>";
  assert_int_equal(s3_xml_get(attr, sizeof(attr) - 1, "Key", 64, &code), 0);
  assert_string_equal(code, "v");
  free(code);
}

static void test_hostile(void **state) {
  (void)state;
  char *v = NULL;
  /* Truncated documents. */
  const char *trunc[] = {"<Code>abc", "<Code", "<Code>abc</Cod", "<Co"};
  for (size_t i = 0; i < 4; i++) {
    int rc = s3_xml_get(trunc[i], strlen(trunc[i]), "Code", 64, &v);
    assert_true(rc == WS_EBADMSG || rc == WS_ENOTFOUND);
  }
  /* Bad entities. */
  const char *bad[] = {"<K>&#0;</K>",       "<K>&#xD800;</K>",
                       "<K>&#x110000;</K>", "<K>&bogus;</K>",
                       "<K>&amp</K>",       "<K>&#;</K>",
                       "<K>&#x;</K>",       "<K>&#12a;</K>",
                       "<K>a<b</K>",        "<K>&#99999999999999999999;</K>"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(s3_xml_get(bad[i], strlen(bad[i]), "K", 64, &v),
                     WS_EBADMSG);
  /* Length caps. */
  const char big[] = "<K>0123456789</K>";
  assert_int_equal(s3_xml_get(big, sizeof(big) - 1, "K", 9, &v), WS_ELIMIT);
  assert_int_equal(s3_xml_get(big, sizeof(big) - 1, "K", 10, &v), 0);
  free(v);
  /* A huge document with no match is scanned within its bounds. */
  size_t n = 8u << 20;
  char *huge = malloc(n);
  assert_non_null(huge);
  memset(huge, '<', n);
  assert_int_equal(s3_xml_get(huge, n, "Key", 64, &v), WS_ENOTFOUND);
  memcpy(huge, "<Key>", 5);
  assert_int_equal(s3_xml_get(huge, n, "Key", 64, &v), WS_EBADMSG);
  free(huge);
  /* Text is bounded by len, not by a NUL. */
  const char nonul[] = {'<', 'K', '>', 'a', 'b'};
  assert_int_equal(s3_xml_get(nonul, sizeof(nonul), "K", 64, &v), WS_EBADMSG);
  /* Names are bounded. */
  char longname[100];
  memset(longname, 'n', sizeof(longname) - 1);
  longname[99] = '\0';
  size_t pos = 0, a, b;
  assert_int_equal(s3_xml_find("<x/>", 4, longname, &pos, &a, &b), WS_EBADMSG);
}

static void test_retry_classify(void **state) {
  (void)state;
  assert_int_equal(s3_retry_classify(CURLE_OK, 200, NULL, 0), S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_OK, 200, NULL, 1), S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_OK, 503, "SlowDown", 0),
                   S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_OK, 500, NULL, 0), S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_OK, 502, NULL, 0), S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_OK, 501, NULL, 0), S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_OK, 429, NULL, 0), S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_OK, 400, "RequestTimeout", 0),
                   S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_OK, 403, "SignatureDoesNotMatch", 0),
                   S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_OK, 403, "InvalidAccessKeyId", 0),
                   S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_OK, 404, "NoSuchKey", 0),
                   S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_OK, 404, NULL, 0), S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_OK, 400, "ExpiredToken", 0),
                   S3_RETRY_REFRESH);
  assert_int_equal(s3_retry_classify(CURLE_OK, 403, "RequestTimeTooSkewed", 0),
                   S3_RETRY_REFRESH);
  assert_int_equal(s3_retry_classify(CURLE_OK, 416, "InvalidRange", 0),
                   S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_OK, 412, NULL, 0), S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_COULDNT_CONNECT, 0, NULL, 0),
                   S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_RECV_ERROR, 0, NULL, 0),
                   S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_PARTIAL_FILE, 200, NULL, 0),
                   S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_OPERATION_TIMEDOUT, 0, NULL, 0),
                   S3_RETRY_YES);
  assert_int_equal(s3_retry_classify(CURLE_GOT_NOTHING, 0, NULL, 0),
                   S3_RETRY_YES);
  assert_int_equal(
      s3_retry_classify(CURLE_PEER_FAILED_VERIFICATION, 0, NULL, 0),
      S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_URL_MALFORMAT, 0, NULL, 0),
                   S3_RETRY_NO);
  assert_int_equal(s3_retry_classify(CURLE_ABORTED_BY_CALLBACK, 0, NULL, 0),
                   S3_RETRY_NO);
  assert_int_equal(s3_status_from_http(403, "SignatureDoesNotMatch"),
                   WS_ES3AUTH);
  assert_int_equal(s3_status_from_http(404, NULL), WS_ES3NOKEY);
  assert_int_equal(s3_status_from_http(400, "NoSuchBucket"), WS_ES3NOKEY);
  assert_int_equal(s3_status_from_http(500, "InternalError"), WS_ES3);
}

static void test_retry_backoff(void **state) {
  (void)state;
  /* Ceiling doubles from base and stops at the cap; value within it. */
  assert_int_equal(s3_retry_delay_ms(100, 5000, 0, UINT32_MAX),
                   UINT32_MAX % 101);
  for (uint32_t rnd = 0; rnd < 100000; rnd += 997) {
    assert_true(s3_retry_delay_ms(100, 5000, 0, rnd) <= 100);
    assert_true(s3_retry_delay_ms(100, 5000, 3, rnd) <= 800);
    assert_true(s3_retry_delay_ms(100, 5000, 40, rnd) <= 5000);
  }
  assert_int_equal(s3_retry_delay_ms(100, 5000, 3, 800), 800);
  assert_int_equal(s3_retry_delay_ms(100, 5000, 3, 801), 0);
  assert_int_equal(s3_retry_delay_ms(100, 5000, 60, 5000), 5000);
  assert_int_equal(s3_retry_delay_ms(0, 5000, 3, 12345), 0);
  /* Jitter: different random inputs give different delays. */
  assert_int_not_equal(s3_retry_delay_ms(100, 5000, 5, 1),
                       s3_retry_delay_ms(100, 5000, 5, 2));
  /* Attempt budget and window. */
  assert_true(s3_retry_more(10, 30000, 1, 0));
  assert_true(s3_retry_more(10, 30000, 9, 100000));
  assert_false(s3_retry_more(10, 30000, 10, 30000));
  assert_true(s3_retry_more(10, 30000, 15, 20000));
  assert_false(s3_retry_more(10, 30000, 40, 0));
  assert_false(s3_retry_more(1, 0, 1, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_iterate),
      cmocka_unit_test(test_error_doc),
      cmocka_unit_test(test_hostile),
      cmocka_unit_test(test_retry_classify),
      cmocka_unit_test(test_retry_backoff),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
