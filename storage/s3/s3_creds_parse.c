/* s3_creds_parse.c - the local half of the AWS credential chain.
 *
 * Decides which source to use, in the order AWS SDKs use: environment, the
 * profile (s3_profile.c: role_arn, credentials file keys,
 * credential_process, config file keys), web identity (IRSA: role ARN +
 * token file -> STS), container endpoint (EKS Pod Identity / ECS), IMDSv2.
 * It reads the files involved (config and credentials files, web identity
 * token, container authorization token) and may run credential_process, so
 * s3_creds_plan() blocks: the provider runs it on the libuv threadpool,
 * tools may call it directly. Also parses the replies of the network
 * sources (JSON, STS XML) and times refreshes.
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

void s3_env_load(s3_env_t *e, const char *profile_override,
                 const char *region_override) {
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
  e->config_file = env_get("AWS_CONFIG_FILE");
  e->endpoint_global = env_get("AWS_ENDPOINT_URL");
  e->ignore_endpoints = env_get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
  e->process_timeout_ms = S3_PROC_TIMEOUT_MS;
  if (region_override)
    e->region = region_override;
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
  s3_profile_t pr = {.name = profile};
  size_t line;
  int rc = s3_ini_parse(text, len, &pr.cred, &line);
  if (rc)
    return rc;
  const char *a = s3_profile_get(&pr, profile, "aws_access_key_id");
  const char *s = s3_profile_get(&pr, profile, "aws_secret_access_key");
  const char *t = s3_profile_get(&pr, profile, "aws_session_token");
  if (!t)
    t = s3_profile_get(&pr, profile, "aws_security_token");
  s3_creds_t c = {0};
  rc = WS_ENOTFOUND;
  if (a && *a && s && *s) {
    rc = -ENOMEM;
    c.akid = strdup(a);
    c.secret = strdup(s);
    c.token = t && *t ? strdup(t) : NULL;
    if (c.akid && c.secret && (!t || !*t || c.token))
      rc = 0;
  }
  s3_profile_free(&pr);
  if (rc) {
    s3_creds_clear(&c);
    return rc;
  }
  snprintf(c.source, sizeof(c.source), "shared-file:%.40s", profile);
  *out = c;
  return 0;
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

int s3_json_str(const cJSON *o, const char *name, int required, char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (v == NULL && !required)
    return 0;
  if (!cJSON_IsString(v) || !v->valuestring[0] ||
      strlen(v->valuestring) > S3_CREDS_FIELD_MAX)
    return WS_EBADMSG;
  *out = strdup(v->valuestring);
  return *out ? 0 : -ENOMEM;
}

int s3_creds_parse_json_keys(const char *text, size_t len,
                             const s3_json_keys_t *k, s3_creds_t *out) {
  if (len > k->max_bytes)
    return WS_ELIMIT;
  s3_creds_t c = {0};
  int rc = WS_EBADMSG;
  cJSON *j = cJSON_ParseWithLength(text, len);
  if (!j || !cJSON_IsObject(j))
    goto cleanup;
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(j, "Version");
  if (k->version1 && (!cJSON_IsNumber(ver) || ver->valuedouble != 1))
    goto cleanup;
  if ((rc = s3_json_str(j, "AccessKeyId", 1, &c.akid)) ||
      (rc = s3_json_str(j, "SecretAccessKey", 1, &c.secret)) ||
      (rc = s3_json_str(j, k->token_key, 0, &c.token)))
    goto cleanup;
  const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "Expiration");
  if (exp && !(k->version1 && cJSON_IsNull(exp))) {
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

int s3_creds_parse_json(const char *text, size_t len, s3_creds_t *out) {
  static const s3_json_keys_t k = {S3_CREDS_BODY_MAX, "Token", 0};
  return s3_creds_parse_json_keys(text, len, &k, out);
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

int s3_file_read(const char *path, char **out, size_t *outlen) {
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

int s3_form_add(s3_buf_t *b, const char *k, const char *v) {
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

void s3_plan_webid(const s3_env_t *e, s3_plan_t *p, const char *role,
                   const char *token_file, const char *session,
                   const s3_profile_t *pr) {
  char *tok = NULL;
  size_t tl = 0;
  int rc = s3_file_read(token_file, &tok, &tl);
  if (rc) {
    plan_fail(p, S3_SRC_WEBID, "web identity token file", token_file, rc);
    return;
  }
  char *t = strip_dup(tok, tl);
  free(tok);
  s3_buf_t b = {.max = 2 * S3_CREDS_FILE_MAX};
  char def[64];
  snprintf(def, sizeof(def), "weightswarm-%u", s3_rand32() % 1000000u);
  if (!t || !*t || s3_form_add(&b, "Action", "AssumeRoleWithWebIdentity") ||
      s3_form_add(&b, "Version", "2011-06-15") ||
      s3_form_add(&b, "RoleArn", role) ||
      s3_form_add(&b, "RoleSessionName", session ? session : def) ||
      s3_form_add(&b, "WebIdentityToken", t)) {
    free(t);
    s3_buf_free(&b);
    plan_fail(p, S3_SRC_WEBID, "web identity token file", token_file,
              WS_EBADMSG);
    return;
  }
  free(t);
  p->src = S3_SRC_WEBID;
  p->body = b.p;
  /* NULL when no region is known yet: the provider asks IMDS first. */
  p->url = s3_profile_sts_url(e, pr, p->region ? p->region : e->region);
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
    int rc = s3_file_read(e->container_token_file, &tok, &tl);
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

/* The sources after the profile: web identity, container, IMDS. */
static void plan_machine(const s3_env_t *e, const s3_profile_t *pr,
                         s3_plan_t *p) {
  if (e->role_arn && e->web_token_file) {
    s3_plan_webid(e, p, e->role_arn, e->web_token_file, e->session_name, pr);
    return;
  }
  if (e->container_full_uri || e->container_rel_uri) {
    plan_container(e, p);
    return;
  }
  if (p->imds_base) {
    p->src = S3_SRC_IMDS;
    if (!(p->url = strdup(p->imds_base)))
      p->status = -ENOMEM;
    return;
  }
  p->src = S3_SRC_NONE;
  p->status = WS_ECREDS;
  snprintf(p->errmsg, sizeof(p->errmsg),
           "no AWS credentials: tried environment, profile %.64s in %.160s "
           "and %.160s, web identity, container endpoint; IMDS disabled",
           pr->name, *pr->cred_path ? pr->cred_path : "(no HOME)",
           *pr->cfg_path ? pr->cfg_path : "(no HOME)");
}

void s3_creds_plan(const s3_env_t *e, s3_plan_t *p) {
  memset(p, 0, sizeof(*p));
  s3_profile_t pr;
  char err[S3_ERRMSG_LEN];
  if (s3_profile_load(e, &pr, err, sizeof(err))) {
    p->status = WS_ECREDS;
    snprintf(p->errmsg, sizeof(p->errmsg), "AWS config: %.480s", err);
    return;
  }
  if (s3_profile_settings(e, &pr, p))
    goto out;
  if (e->akid && e->secret) {
    p->src = S3_SRC_ENV;
    p->creds.akid = strdup(e->akid);
    p->creds.secret = strdup(e->secret);
    p->creds.token = e->token ? strdup(e->token) : NULL;
    snprintf(p->creds.source, sizeof(p->creds.source), "env");
    if (!p->creds.akid || !p->creds.secret || (e->token && !p->creds.token))
      p->status = -ENOMEM;
    goto out;
  }
  if (!s3_profile_creds(e, &pr, p))
    plan_machine(e, &pr, p);
out:
  s3_profile_free(&pr);
}

void s3_plan_clear(s3_plan_t *p) {
  s3_creds_clear(&p->creds);
  s3_creds_clear(&p->source);
  free(p->region);
  free(p->endpoint);
  free(p->imds_base);
  free(p->url);
  free(p->body);
  free(p->auth);
  memset(p, 0, sizeof(*p));
}
