/* s3_creds_parse.c - the local, pure half of the AWS credential chain.
 *
 * Decides which source to use, in the order AWS SDKs use: environment, the
 * shared credentials file (profile), web identity (IRSA: role ARN + token
 * file -> STS), container endpoint (EKS Pod Identity / ECS), IMDSv2. It reads
 * the files involved (credentials file, web identity token, container
 * authorization token), so s3_creds_plan() blocks: the provider runs it on
 * the libuv threadpool, tools may call it directly. Also parses the replies
 * of the network sources (JSON, STS XML) and times refreshes.
 * Every input is bounded (S3_CREDS_FILE_MAX, S3_CREDS_FIELD_MAX).
 */
#include "s3-int.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

void s3_creds_clear(s3_creds_t *c) {
  if (!c)
    return;
  if (c->secret)
    memset(c->secret, 0, strlen(c->secret));
  free(c->akid);
  free(c->secret);
  free(c->token);
  memset(c, 0, sizeof(*c));
}

int s3_creds_copy(s3_creds_t *dst, const s3_creds_t *src) {
  s3_creds_t t = {0};
  t.akid = strdup(src->akid);
  t.secret = strdup(src->secret);
  t.token = src->token ? strdup(src->token) : NULL;
  t.expires_ms = src->expires_ms;
  memcpy(t.source, src->source, sizeof(t.source));
  if (!t.akid || !t.secret || (src->token && !t.token)) {
    s3_creds_clear(&t);
    return -ENOMEM;
  }
  s3_creds_clear(dst);
  *dst = t;
  return 0;
}

static const char *env_get(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

void s3_env_load(s3_env_t *e, const char *profile_override) {
  memset(e, 0, sizeof(*e));
  e->akid = env_get("AWS_ACCESS_KEY_ID");
  e->secret = env_get("AWS_SECRET_ACCESS_KEY");
  e->token = env_get("AWS_SESSION_TOKEN");
  e->shared_file = env_get("AWS_SHARED_CREDENTIALS_FILE");
  e->home = env_get("HOME");
  e->profile = profile_override ? profile_override : env_get("AWS_PROFILE");
  e->role_arn = env_get("AWS_ROLE_ARN");
  e->web_token_file = env_get("AWS_WEB_IDENTITY_TOKEN_FILE");
  e->session_name = env_get("AWS_ROLE_SESSION_NAME");
  e->sts_endpoint = env_get("AWS_ENDPOINT_URL_STS");
  e->region = env_get("AWS_REGION");
  if (!e->region)
    e->region = env_get("AWS_DEFAULT_REGION");
  e->container_full_uri = env_get("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  e->container_rel_uri = env_get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  e->container_token_file = env_get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  e->container_token = env_get("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  e->imds_endpoint = env_get("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  e->imds_disabled = env_get("AWS_EC2_METADATA_DISABLED");
}

static char *strip_dup(const char *s, size_t n) {
  while (n > 0 && (*s == ' ' || *s == '\t'))
    s++, n--;
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
                   s[n - 1] == '\n'))
    n--;
  if (n > S3_CREDS_FIELD_MAX)
    return NULL;
  return strndup(s, n);
}

int s3_creds_parse_ini(const char *text, size_t len, const char *profile,
                       s3_creds_t *out) {
  s3_creds_t c = {0};
  int in = 0, rc = 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    char *line = strip_dup(p, (size_t)(le - p));
    p = nl ? nl + 1 : end;
    if (!line) {
      rc = -ENOMEM;
      goto cleanup;
    }
    size_t ll = strlen(line);
    if (ll == 0 || line[0] == '#' || line[0] == ';') {
      free(line);
      continue;
    }
    if (line[0] == '[' && line[ll - 1] == ']') {
      char *name = strip_dup(line + 1, ll - 2);
      const char *n = name;
      if (n && strncmp(n, "profile ", 8) == 0)
        n += 8;
      in = n && strcmp(n, profile) == 0;
      free(name);
      free(line);
      continue;
    }
    char *eq = strchr(line, '=');
    if (in && eq) {
      char *k = strip_dup(line, (size_t)(eq - line));
      char *v = strip_dup(eq + 1, strlen(eq + 1));
      char **slot = NULL;
      if (k && strcmp(k, "aws_access_key_id") == 0)
        slot = &c.akid;
      else if (k && strcmp(k, "aws_secret_access_key") == 0)
        slot = &c.secret;
      else if (k && (strcmp(k, "aws_session_token") == 0 ||
                     strcmp(k, "aws_security_token") == 0))
        slot = &c.token;
      if (slot && v && *v) {
        free(*slot);
        *slot = v;
        v = NULL;
      }
      free(k);
      free(v);
    }
    free(line);
  }
  if (!c.akid || !c.secret) {
    rc = WS_ENOTFOUND;
    goto cleanup;
  }
  snprintf(c.source, sizeof(c.source), "shared-file:%s", profile);
  *out = c;
  return 0;
cleanup:
  s3_creds_clear(&c);
  return rc;
}

int s3_time_parse(const char *s, int64_t *out_ms) {
  struct tm tm = {0};
  int y, mo, d, h, mi, sec, n = 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) !=
          6 ||
      n != 19)
    return WS_EBADMSG;
  const char *r = s + 19;
  if (*r == '.') {
    r++;
    while (*r >= '0' && *r <= '9')
      r++;
  }
  if (!(strcmp(r, "Z") == 0 || strcmp(r, "+00:00") == 0 ||
        strcmp(r, "+0000") == 0))
    return WS_EBADMSG;
  if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
      mi > 59 || sec > 60)
    return WS_EBADMSG;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  time_t t = timegm(&tm);
  if (t == (time_t)-1)
    return WS_EBADMSG;
  *out_ms = (int64_t)t * 1000;
  return 0;
}

static int json_str(const cJSON *o, const char *name, char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!cJSON_IsString(v) || !v->valuestring[0] ||
      strlen(v->valuestring) > S3_CREDS_FIELD_MAX)
    return WS_EBADMSG;
  *out = strdup(v->valuestring);
  return *out ? 0 : -ENOMEM;
}

int s3_creds_parse_json(const char *text, size_t len, s3_creds_t *out) {
  if (len > S3_CREDS_BODY_MAX)
    return WS_ELIMIT;
  s3_creds_t c = {0};
  int rc = WS_EBADMSG;
  cJSON *j = cJSON_ParseWithLength(text, len);
  if (!j || !cJSON_IsObject(j))
    goto cleanup;
  if ((rc = json_str(j, "AccessKeyId", &c.akid)) ||
      (rc = json_str(j, "SecretAccessKey", &c.secret)))
    goto cleanup;
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(j, "Token");
  if (tok && (rc = json_str(j, "Token", &c.token)))
    goto cleanup;
  const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "Expiration");
  if (exp) {
    rc = WS_EBADMSG;
    if (!cJSON_IsString(exp) || s3_time_parse(exp->valuestring, &c.expires_ms))
      goto cleanup;
  }
  rc = 0;
  *out = c;
  memset(&c, 0, sizeof(c));
cleanup:
  cJSON_Delete(j);
  s3_creds_clear(&c);
  return rc;
}

int s3_creds_parse_sts(const char *text, size_t len, s3_creds_t *out) {
  if (len > S3_CREDS_BODY_MAX)
    return WS_ELIMIT;
  s3_creds_t c = {0};
  char *exp = NULL;
  size_t pos = 0, a, b;
  int rc = s3_xml_find(text, len, "Credentials", &pos, &a, &b);
  if (rc)
    goto cleanup;
  const char *d = text + a;
  size_t n = b - a;
  if ((rc = s3_xml_get(d, n, "AccessKeyId", S3_CREDS_FIELD_MAX, &c.akid)) ||
      (rc = s3_xml_get(d, n, "SecretAccessKey", S3_CREDS_FIELD_MAX,
                       &c.secret)) ||
      (rc = s3_xml_get(d, n, "SessionToken", S3_CREDS_FIELD_MAX, &c.token)) ||
      (rc = s3_xml_get(d, n, "Expiration", 64, &exp)))
    goto cleanup;
  if ((rc = s3_time_parse(exp, &c.expires_ms)))
    goto cleanup;
  rc = WS_EBADMSG;
  if (!*c.akid || !*c.secret || !*c.token)
    goto cleanup;
  rc = 0;
  *out = c;
  memset(&c, 0, sizeof(c));
cleanup:
  free(exp);
  s3_creds_clear(&c);
  return rc;
}

int64_t s3_creds_refresh_at(int64_t now_ms, int64_t expires_ms, uint32_t rnd) {
  if (expires_ms <= 0)
    return -1;
  int64_t life = expires_ms - now_ms;
  if (life <= 0)
    return now_ms;
  int64_t margin = S3_REFRESH_MARGIN_MS + (int64_t)(rnd % S3_REFRESH_JITTER_MS);
  if (margin > life / 2) /* short-lived creds: refresh at 50-75% of life */
    margin = life / 2 - (int64_t)(rnd % (uint32_t)(life / 4 + 1));
  if (margin < 0)
    margin = 0;
  return expires_ms - margin;
}

/* Reads a whole small file (blocking). */
static int file_read(const char *path, char **out, size_t *outlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  s3_buf_t b = {.max = S3_CREDS_FILE_MAX};
  int rc = 0;
  char tmp[4096];
  for (;;) {
    ssize_t r = read(fd, tmp, sizeof(tmp));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rc = -errno;
      break;
    }
    if (r == 0)
      break;
    if ((rc = s3_buf_add(&b, tmp, (size_t)r)))
      break;
  }
  close(fd);
  if (rc == 0 && !b.p)
    rc = s3_buf_add(&b, "", 0);
  if (rc) {
    s3_buf_free(&b);
    return rc;
  }
  *out = b.p;
  *outlen = b.len;
  return 0;
}

static int form_add(s3_buf_t *b, const char *k, const char *v) {
  int rc;
  if (b->len && (rc = s3_buf_str(b, "&")))
    return rc;
  if ((rc = s3_buf_str(b, k)) || (rc = s3_buf_str(b, "=")))
    return rc;
  return s3_uri_encode(b, v, strlen(v), 0);
}

static int container_url_ok(const char *url) {
  s3_endpoint_t ep;
  if (s3_endpoint_parse(url, &ep))
    return 0;
  int ok = strcmp(ep.scheme, "https") == 0 ||
           strncmp(ep.host, "127.", 4) == 0 ||
           strcmp(ep.host, "localhost") == 0 || strcmp(ep.host, "[::1]") == 0 ||
           strcmp(ep.host, "169.254.170.2") == 0 ||
           strcmp(ep.host, "169.254.170.23") == 0 ||
           strcmp(ep.host, "[fd00:ec2::23]") == 0;
  s3_endpoint_free(&ep);
  return ok;
}

static void plan_fail(s3_plan_t *p, s3_src_t src, const char *what,
                      const char *path, int err) {
  p->src = src;
  p->status = WS_ECREDS;
  if (snprintf(p->errmsg, sizeof(p->errmsg), "%s %.256s: %s", what, path,
               ws_strerror(err)) < 0)
    p->errmsg[0] = '\0';
}

static void plan_webid(const s3_env_t *e, s3_plan_t *p) {
  char *tok = NULL;
  size_t tl = 0;
  int rc = file_read(e->web_token_file, &tok, &tl);
  if (rc) {
    plan_fail(p, S3_SRC_WEBID, "web identity token file", e->web_token_file,
              rc);
    return;
  }
  char *t = strip_dup(tok, tl);
  free(tok);
  s3_buf_t b = {.max = 2 * S3_CREDS_FILE_MAX};
  char session[64];
  snprintf(session, sizeof(session), "weightswarm-%u", s3_rand32() % 1000000u);
  const char *region = e->region ? e->region : "us-east-1";
  char url[256];
  snprintf(url, sizeof(url), "https://sts.%s.amazonaws.com/", region);
  if (!t || !*t || form_add(&b, "Action", "AssumeRoleWithWebIdentity") ||
      form_add(&b, "Version", "2011-06-15") ||
      form_add(&b, "RoleArn", e->role_arn) ||
      form_add(&b, "RoleSessionName",
               e->session_name ? e->session_name : session) ||
      form_add(&b, "WebIdentityToken", t)) {
    free(t);
    s3_buf_free(&b);
    plan_fail(p, S3_SRC_WEBID, "web identity token file", e->web_token_file,
              WS_EBADMSG);
    return;
  }
  free(t);
  p->src = S3_SRC_WEBID;
  p->body = b.p;
  p->url = strdup(e->sts_endpoint ? e->sts_endpoint : url);
  if (!p->url)
    p->status = -ENOMEM;
}

static void plan_container(const s3_env_t *e, s3_plan_t *p) {
  char url[2048];
  if (e->container_full_uri)
    snprintf(url, sizeof(url), "%s", e->container_full_uri);
  else
    snprintf(url, sizeof(url), "http://169.254.170.2%.2000s",
             e->container_rel_uri);
  if (e->container_full_uri && !container_url_ok(url)) {
    plan_fail(p, S3_SRC_CONTAINER, "container credentials URI", url, WS_EUSAGE);
    return;
  }
  p->src = S3_SRC_CONTAINER;
  if (e->container_token_file) {
    char *tok = NULL;
    size_t tl = 0;
    int rc = file_read(e->container_token_file, &tok, &tl);
    if (rc) {
      plan_fail(p, S3_SRC_CONTAINER, "container authorization token file",
                e->container_token_file, rc);
      return;
    }
    p->auth = strip_dup(tok, tl);
    free(tok);
    if (!p->auth || strpbrk(p->auth, "\r\n")) {
      plan_fail(p, S3_SRC_CONTAINER, "container authorization token file",
                e->container_token_file, WS_EBADMSG);
      return;
    }
  } else if (e->container_token) {
    p->auth = strdup(e->container_token);
  }
  p->url = strdup(url);
  if (!p->url)
    p->status = -ENOMEM;
}

void s3_creds_plan(const s3_env_t *e, s3_plan_t *p) {
  memset(p, 0, sizeof(*p));
  const char *profile = e->profile ? e->profile : "default";
  if (e->akid && e->secret) {
    p->src = S3_SRC_ENV;
    p->creds.akid = strdup(e->akid);
    p->creds.secret = strdup(e->secret);
    p->creds.token = e->token ? strdup(e->token) : NULL;
    snprintf(p->creds.source, sizeof(p->creds.source), "env");
    if (!p->creds.akid || !p->creds.secret || (e->token && !p->creds.token))
      p->status = -ENOMEM;
    return;
  }
  char path[4096] = "";
  if (e->shared_file)
    snprintf(path, sizeof(path), "%s", e->shared_file);
  else if (e->home)
    snprintf(path, sizeof(path), "%s/.aws/credentials", e->home);
  if (*path) {
    char *text = NULL;
    size_t len = 0;
    if (file_read(path, &text, &len) == 0) {
      int rc = s3_creds_parse_ini(text, len, profile, &p->creds);
      free(text);
      if (rc == 0) {
        p->src = S3_SRC_FILE;
        return;
      }
    }
  }
  if (e->role_arn && e->web_token_file) {
    plan_webid(e, p);
    return;
  }
  if (e->container_full_uri || e->container_rel_uri) {
    plan_container(e, p);
    return;
  }
  if (!(e->imds_disabled && strcasecmp(e->imds_disabled, "true") == 0)) {
    p->src = S3_SRC_IMDS;
    p->url =
        strdup(e->imds_endpoint ? e->imds_endpoint : "http://169.254.169.254");
    if (!p->url)
      p->status = -ENOMEM;
    return;
  }
  p->src = S3_SRC_NONE;
  p->status = WS_ECREDS;
  snprintf(p->errmsg, sizeof(p->errmsg),
           "no AWS credentials: tried environment, shared file %s "
           "(profile %s), web identity, container endpoint; IMDS disabled",
           *path ? path : "(no HOME)", profile);
}

void s3_plan_clear(s3_plan_t *p) {
  s3_creds_clear(&p->creds);
  free(p->url);
  free(p->body);
  free(p->auth);
  memset(p, 0, sizeof(*p));
}
