/* s3_ops.c - the S3 operations: argument checks and request setup for GET,
 * HEAD, LIST, PUT (plain or conditional) and multipart upload, and the reading
 * of a successful answer (ETag, UploadId, one ListObjectsV2 page). Thread: loop
 * thread. Everything read from a reply is bounded (S3_XMLBODY_MAX per page,
 * S3_KEY_MAX per key, list_max_entries per LIST).
 */
#include "s3-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int key_ok(const char *key, int may_be_empty) {
  size_t n = strlen(key);
  return n <= S3_KEY_MAX && (may_be_empty || n > 0);
}

static ws_s3_req_t *req_make(ws_s3_t *s3, s3_op_t op, const char *bucket,
                             const char *key, int key_may_be_empty,
                             ws_s3_done_cb done, void *arg) {
  if (!bucket || !key || !s3_bucket_valid(bucket) ||
      !key_ok(key, key_may_be_empty))
    return NULL;
  return s3_req_new(s3, op, bucket, key, done, arg);
}

ws_s3_req_t *ws_s3_get(ws_s3_t *s3, const char *bucket, const char *key,
                       const ws_s3_range_t *range, ws_s3_data_cb data,
                       ws_s3_done_cb done, void *arg) {
  if (range && range->len != WS_S3_LEN_TO_END &&
      range->offset > UINT64_MAX - range->len)
    return NULL;
  ws_s3_req_t *r = req_make(s3, S3_OP_GET, bucket, key, 0, done, arg);
  if (!r)
    return NULL;
  r->data = data;
  if (range) {
    r->off = range->offset;
    r->len = range->len;
    if (range->if_match) {
      const char *m = range->if_match;
      size_t n = strlen(m);
      if (n >= 2 && m[0] == '"' && m[n - 1] == '"') {
        m++;
        n -= 2;
      }
      r->if_match = n <= S3_ETAG_MAX ? strndup(m, n) : NULL;
      if (!r->if_match) {
        s3_req_submit(r);
        ws_s3_req_cancel(r);
        return r;
      }
    }
  }
  s3_req_submit(r);
  return r;
}

ws_s3_req_t *ws_s3_head(ws_s3_t *s3, const char *bucket, const char *key,
                        ws_s3_done_cb done, void *arg) {
  ws_s3_req_t *r = req_make(s3, S3_OP_HEAD, bucket, key, 0, done, arg);
  if (r)
    s3_req_submit(r);
  return r;
}

ws_s3_req_t *ws_s3_list(ws_s3_t *s3, const char *bucket, const char *prefix,
                        const char *delimiter, ws_s3_done_cb done, void *arg) {
  const char *p = prefix ? prefix : "";
  ws_s3_req_t *r = req_make(s3, S3_OP_LIST, bucket, p, 1, done, arg);
  if (!r)
    return NULL;
  r->prefix = strdup(p);
  if (delimiter && *delimiter)
    r->delim = strdup(delimiter);
  if (!r->prefix || (delimiter && *delimiter && !r->delim)) {
    /* Out of memory after creation: complete it as cancelled. */
    s3_req_submit(r);
    ws_s3_req_cancel(r);
    return r;
  }
  s3_req_submit(r);
  return r;
}

static int body_ok(const ws_s3_body_t *b) {
  if (!b || b->fd < 0 || b->offset > UINT64_MAX - b->len)
    return 0;
  if (b->sha256_hex) {
    if (strlen(b->sha256_hex) != 64)
      return 0;
    for (const char *c = b->sha256_hex; *c; c++)
      if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
        return 0;
  }
  return 1;
}

static void body_set(ws_s3_req_t *r, const ws_s3_body_t *b) {
  r->body = *b;
  r->body.sha256_hex = NULL;
  if (b->sha256_hex)
    memcpy(r->body_sha, b->sha256_hex, 65);
}

ws_s3_req_t *ws_s3_put(ws_s3_t *s3, const char *bucket, const char *key,
                       const ws_s3_body_t *body, ws_s3_done_cb done,
                       void *arg) {
  if (!body_ok(body))
    return NULL;
  ws_s3_req_t *r = req_make(s3, S3_OP_PUT, bucket, key, 0, done, arg);
  if (!r)
    return NULL;
  body_set(r, body);
  s3_req_submit(r);
  return r;
}

ws_s3_req_t *ws_s3_put_if(ws_s3_t *s3, const char *bucket, const char *key,
                          const ws_s3_body_t *body, const ws_s3_cond_t *cond,
                          ws_s3_done_cb done, void *arg) {
  if (!body_ok(body) || !cond || !cond->if_match == !cond->if_none_match)
    return NULL;
  const char *m = cond->if_match;
  size_t n = m ? strlen(m) : 0;
  if (n >= 2 && m[0] == '"' && m[n - 1] == '"') {
    m++;
    n -= 2;
  }
  if (m && (n == 0 || n > S3_ETAG_MAX || memchr(m, '"', n)))
    return NULL;
  ws_s3_req_t *r = req_make(s3, S3_OP_PUT, bucket, key, 0, done, arg);
  if (!r)
    return NULL;
  body_set(r, body);
  r->if_none_match = cond->if_none_match != 0;
  if (m && !(r->if_match = strndup(m, n))) {
    s3_req_submit(r);
    ws_s3_req_cancel(r);
    return r;
  }
  s3_req_submit(r);
  return r;
}

ws_s3_req_t *ws_s3_mpu_create(ws_s3_t *s3, const char *bucket, const char *key,
                              ws_s3_done_cb done, void *arg) {
  ws_s3_req_t *r = req_make(s3, S3_OP_MPU_CREATE, bucket, key, 0, done, arg);
  if (r)
    s3_req_submit(r);
  return r;
}

static ws_s3_req_t *mpu_req(ws_s3_t *s3, s3_op_t op, const char *bucket,
                            const char *key, const char *upload_id,
                            ws_s3_done_cb done, void *arg) {
  if (!upload_id || !*upload_id || strlen(upload_id) > 1024)
    return NULL;
  ws_s3_req_t *r = req_make(s3, op, bucket, key, 0, done, arg);
  if (!r)
    return NULL;
  r->upload_id = strdup(upload_id);
  if (!r->upload_id) {
    s3_req_submit(r);
    ws_s3_req_cancel(r);
  }
  return r;
}

ws_s3_req_t *ws_s3_mpu_part(ws_s3_t *s3, const char *bucket, const char *key,
                            const char *upload_id, unsigned part_number,
                            const ws_s3_body_t *body, ws_s3_done_cb done,
                            void *arg) {
  if (part_number < 1 || part_number > 10000 || !body_ok(body))
    return NULL;
  ws_s3_req_t *r =
      mpu_req(s3, S3_OP_MPU_PART, bucket, key, upload_id, done, arg);
  if (!r || !r->upload_id)
    return r;
  r->part = part_number;
  body_set(r, body);
  s3_req_submit(r);
  return r;
}

ws_s3_req_t *ws_s3_mpu_complete(ws_s3_t *s3, const char *bucket,
                                const char *key, const char *upload_id,
                                const char *const *etags, unsigned nparts,
                                ws_s3_done_cb done, void *arg) {
  if (nparts < 1 || nparts > 10000)
    return NULL;
  s3_buf_t b = {.max = S3_XMLBODY_MAX};
  int bad = s3_buf_str(&b, "<CompleteMultipartUpload>");
  for (unsigned i = 0; i < nparts && !bad; i++) {
    char line[S3_ETAG_MAX + 128];
    const char *e = etags[i];
    if (!e || strlen(e) > S3_ETAG_MAX || strpbrk(e, "<&\"")) {
      bad = 1;
      break;
    }
    snprintf(line, sizeof(line),
             "<Part><PartNumber>%u</PartNumber><ETag>\"%s\"</ETag></Part>",
             i + 1, e);
    bad = s3_buf_str(&b, line);
  }
  if (!bad)
    bad = s3_buf_str(&b, "</CompleteMultipartUpload>");
  ws_s3_req_t *r =
      bad ? NULL
          : mpu_req(s3, S3_OP_MPU_COMPLETE, bucket, key, upload_id, done, arg);
  if (!r || !r->upload_id) {
    s3_buf_free(&b);
    return r;
  }
  r->post = b.p;
  r->post_len = b.len;
  s3_req_submit(r);
  return r;
}

ws_s3_req_t *ws_s3_mpu_abort(ws_s3_t *s3, const char *bucket, const char *key,
                             const char *upload_id, ws_s3_done_cb done,
                             void *arg) {
  ws_s3_req_t *r =
      mpu_req(s3, S3_OP_MPU_ABORT, bucket, key, upload_id, done, arg);
  if (r && r->upload_id)
    s3_req_submit(r);
  return r;
}

static int parse_size(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-')
    return WS_EBADMSG;
  *out = v;
  return 0;
}

static char *strip_quotes(char *e) {
  size_t n = strlen(e);
  if (n >= 2 && e[0] == '"' && e[n - 1] == '"') {
    memmove(e, e + 1, n - 2);
    e[n - 2] = '\0';
  }
  return e;
}

/* Appends one ListObjectsV2 page to r->entries; 1 when more pages follow. */
static int list_page(ws_s3_req_t *r) {
  const char *d = r->xml.p ? r->xml.p : "";
  size_t len = r->xml.len, pos = 0, a, b;
  uint64_t cap = r->s3->cfg.list_max_entries;
  int rc;
  for (;;) {
    rc = s3_xml_find(d, len, "Contents", &pos, &a, &b);
    if (rc == WS_ENOTFOUND)
      break;
    if (rc)
      goto bad;
    ws_s3_entry_t e = {0};
    char *size = NULL;
    if ((rc = s3_xml_get(d + a, b - a, "Key", S3_KEY_MAX, &e.key)) ||
        (rc = s3_xml_get(d + a, b - a, "Size", 24, &size)) ||
        (rc = parse_size(size, &e.size))) {
      free(e.key);
      free(size);
      goto bad;
    }
    free(size);
    if (s3_xml_get(d + a, b - a, "ETag", S3_ETAG_MAX, &e.etag) == 0)
      strip_quotes(e.etag);
    if (r->nentries >= cap) {
      free(e.key);
      free(e.etag);
      s3_req_errmsg(r, "more than %" PRIu64 " keys", cap);
      return WS_ELIMIT;
    }
    if (r->nentries == r->centries) {
      size_t nc = r->centries ? r->centries * 2 : 64;
      ws_s3_entry_t *ne = realloc(r->entries, nc * sizeof(*ne));
      if (!ne) {
        free(e.key);
        free(e.etag);
        return -ENOMEM;
      }
      r->entries = ne;
      r->centries = nc;
    }
    r->entries[r->nentries++] = e;
  }
  char *trunc = NULL;
  if (s3_xml_get(d, len, "IsTruncated", 8, &trunc) != 0) {
    rc = WS_EBADMSG;
    goto bad;
  }
  int more = strcmp(trunc, "true") == 0;
  free(trunc);
  if (!more)
    return 0;
  char *tok = NULL;
  if (s3_xml_get(d, len, "NextContinuationToken", 4096, &tok) != 0 || !*tok) {
    free(tok);
    rc = WS_EBADMSG;
    goto bad;
  }
  free(r->token);
  r->token = tok;
  return 1;
bad:
  s3_req_errmsg(r, "malformed ListObjectsV2 reply (%s)", ws_strerror(rc));
  return WS_ES3;
}

int s3_ops_complete(ws_s3_req_t *r, int *retry) {
  *retry = 0;
  char *v = NULL;
  switch (r->op) {
  case S3_OP_HEAD:
    r->size = r->cl;
    /* fall through */
  case S3_OP_PUT:
  case S3_OP_MPU_PART:
    free(r->etag);
    r->etag = r->hdr_etag;
    r->hdr_etag = NULL;
    if (!r->etag && r->op != S3_OP_HEAD) {
      s3_req_errmsg(r, "upload answered without an ETag");
      *retry = 1;
      return WS_ES3;
    }
    return 0;
  case S3_OP_LIST:
    return list_page(r);
  case S3_OP_MPU_CREATE:
    if (s3_xml_get(r->xml.p ? r->xml.p : "", r->xml.len, "UploadId", 1024,
                   &v) != 0 ||
        !*v) {
      free(v);
      s3_req_errmsg(r, "CreateMultipartUpload reply without UploadId");
      return WS_ES3;
    }
    free(r->upload_id);
    r->upload_id = v;
    return 0;
  case S3_OP_MPU_COMPLETE:
    /* S3 may answer 200 and put the error in the body. */
    if (r->xml.p && s3_xml_get(r->xml.p, r->xml.len, "Code", 128, &v) == 0) {
      s3_retry_t cls = s3_retry_classify(CURLE_OK, 500, v, 0);
      s3_req_errmsg(r, "CompleteMultipartUpload failed: %s", v);
      free(v);
      *retry = cls == S3_RETRY_YES;
      return WS_ES3;
    }
    if (r->xml.p &&
        s3_xml_get(r->xml.p, r->xml.len, "ETag", S3_ETAG_MAX, &v) == 0 && *v) {
      free(r->etag);
      r->etag = strip_quotes(v);
    } else {
      free(v);
    }
    return 0;
  default:
    return 0;
  }
}
