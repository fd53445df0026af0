/* s3_profile.c - the profile half of the credential chain: the shared config
 * file (AWS_CONFIG_FILE, else ~/.aws/config) and the shared credentials file
 * (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials), read for one
 * profile (AWS_PROFILE or the client's, else "default").
 *
 * Gives the client its settings (region, S3 endpoint_url, s3
 * addressing_style) and the profile's credential source, in the SDKs'
 * order: role_arn (AssumeRole signed with source_profile's credentials, or
 * web_identity_token_file), static keys in the credentials file,
 * credential_process, static keys in the config file. A key set in both
 * files is taken from the credentials file. Environment variables win over
 * the files (the callers apply them first).
 *
 * Thread: blocks (reads files, runs credential_process): the provider calls
 * it from s3_creds_plan on a libuv worker; tools may call it directly.
 */
#include "s3-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int load(const char *path, s3_ini_t *ini, char *err, size_t errlen) {
  char *text = NULL;
  size_t len = 0, line = 0;
  int rc = s3_file_read(path, &text, &len);
  if (rc == -ENOENT || rc == -ENOTDIR)
    return 0; /* no file: nothing configured there */
  if (rc == 0) {
    rc = s3_ini_parse(text, len, ini, &line);
    memset(text, 0, len);
    free(text);
  }
  if (rc && line)
    snprintf(err, errlen, "%.300s line %zu: %s", path, line,
             rc == WS_ELIMIT ? "too long or too many entries"
                             : "malformed (expected [section] or key = value)");
  else if (rc)
    snprintf(err, errlen, "%.300s: %s", path, ws_strerror(rc));
  return rc;
}

int s3_profile_load(const s3_env_t *e, s3_profile_t *pr, char *err,
                    size_t errlen) {
  memset(pr, 0, sizeof(*pr));
  pr->name = e->profile ? e->profile : "default";
  if (e->config_file)
    snprintf(pr->cfg_path, sizeof(pr->cfg_path), "%s", e->config_file);
  else if (e->home)
    snprintf(pr->cfg_path, sizeof(pr->cfg_path), "%s/.aws/config", e->home);
  if (e->shared_file)
    snprintf(pr->cred_path, sizeof(pr->cred_path), "%s", e->shared_file);
  else if (e->home)
    snprintf(pr->cred_path, sizeof(pr->cred_path), "%s/.aws/credentials",
             e->home);
  int rc = 0;
  if (*pr->cfg_path)
    rc = load(pr->cfg_path, &pr->cfg, err, errlen);
  if (rc == 0 && *pr->cred_path)
    rc = load(pr->cred_path, &pr->cred, err, errlen);
  if (rc)
    s3_profile_free(pr);
  return rc;
}

void s3_profile_free(s3_profile_t *pr) {
  s3_ini_free(&pr->cfg);
  s3_ini_free(&pr->cred);
}

static const char *cfg_get(const s3_profile_t *pr, const char *name,
                           const char *key) {
  char sec[S3_INI_NAME_MAX];
  const char *v = NULL;
  if (strcmp(name, "default") == 0)
    v = s3_ini_get(&pr->cfg, "default", key);
  snprintf(sec, sizeof(sec), "profile %s", name);
  return v ? v : s3_ini_get(&pr->cfg, sec, key);
}

static const char *cred_get(const s3_profile_t *pr, const char *name,
                            const char *key) {
  char sec[S3_INI_NAME_MAX];
  const char *v = s3_ini_get(&pr->cred, name, key);
  snprintf(sec, sizeof(sec), "profile %s", name);
  return v ? v : s3_ini_get(&pr->cred, sec, key);
}

const char *s3_profile_get(const s3_profile_t *pr, const char *name,
                           const char *key) {
  const char *v = cred_get(pr, name, key);
  return v ? v : cfg_get(pr, name, key);
}

/* A service's endpoint_url from the config: the profile's "services"
 * section, then "<svc> =\n  endpoint_url" in the profile, then the
 * profile's global endpoint_url. */
static const char *cfg_endpoint(const s3_env_t *e, const s3_profile_t *pr,
                                const char *svc) {
  if (e->ignore_endpoints && (strcasecmp(e->ignore_endpoints, "true") == 0 ||
                              strcmp(e->ignore_endpoints, "1") == 0))
    return NULL;
  char key[64], sec[S3_INI_NAME_MAX];
  snprintf(key, sizeof(key), "%s.endpoint_url", svc);
  const char *services = s3_profile_get(pr, pr->name, "services");
  const char *v = NULL;
  if (services) {
    snprintf(sec, sizeof(sec), "services %s", services);
    v = s3_ini_get(&pr->cfg, sec, key);
  }
  if (!v)
    v = s3_profile_get(pr, pr->name, key);
  return v ? v : s3_profile_get(pr, pr->name, "endpoint_url");
}

int s3_region_valid(const char *r) {
  size_t n = strlen(r);
  if (n == 0 || n > 32)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') ||
          r[i] == '-'))
      return 0;
  return 1;
}

static int settings_fail(s3_plan_t *p, const s3_profile_t *pr, const char *key,
                         const char *v) {
  p->status = WS_EUSAGE;
  snprintf(p->errmsg, sizeof(p->errmsg),
           "profile %.64s (%.200s): %s = '%.64s' is not valid", pr->name,
           pr->cfg_path, key, v);
  return WS_EUSAGE;
}

int s3_profile_settings(const s3_env_t *e, const s3_profile_t *pr,
                        s3_plan_t *p) {
  const char *region = e->region;
  if (!region && (region = s3_profile_get(pr, pr->name, "region")) &&
      !s3_region_valid(region))
    return settings_fail(p, pr, "region", region);
  const char *ep = cfg_endpoint(e, pr, "s3");
  const char *st = s3_profile_get(pr, pr->name, "s3.addressing_style");
  p->addressing = WS_S3_ADDR_AUTO;
  if (st && strcmp(st, "path") == 0)
    p->addressing = WS_S3_ADDR_PATH;
  else if (st && strcmp(st, "virtual") == 0)
    p->addressing = WS_S3_ADDR_VIRTUAL;
  else if (st && strcmp(st, "auto") != 0)
    return settings_fail(p, pr, "s3.addressing_style", st);
  int imds_off = e->imds_disabled && strcasecmp(e->imds_disabled, "true") == 0;
  if ((region && !(p->region = strdup(region))) ||
      (ep && !(p->endpoint = strdup(ep))) ||
      (!imds_off &&
       !(p->imds_base = strdup(e->imds_endpoint ? e->imds_endpoint
                                                : "http://169.254.169.254")))) {
    p->status = -ENOMEM;
    return -ENOMEM;
  }
  return 0;
}

char *s3_profile_sts_url(const s3_env_t *e, const s3_profile_t *pr,
                         const char *region) {
  const char *v = e->sts_endpoint ? e->sts_endpoint : e->endpoint_global;
  if (!v && pr)
    v = cfg_endpoint(e, pr, "sts");
  if (v)
    return strdup(v);
  if (!region)
    return NULL; /* the provider builds it once IMDS told the region */
  char url[128];
  snprintf(url, sizeof(url), "https://sts.%s.amazonaws.com/", region);
  return strdup(url);
}

/* Static keys of a profile in one file. 1 found, 0 none, -ENOMEM. */
static int keys(const s3_profile_t *pr, int cred_file, const char *name,
                s3_creds_t *c) {
  const char *(*get)(const s3_profile_t *, const char *, const char *) =
      cred_file ? cred_get : cfg_get;
  const char *a = get(pr, name, "aws_access_key_id");
  const char *s = get(pr, name, "aws_secret_access_key");
  const char *t = get(pr, name, "aws_session_token");
  if (!t)
    t = get(pr, name, "aws_security_token");
  if (!a || !*a || !s || !*s)
    return 0;
  c->akid = strdup(a);
  c->secret = strdup(s);
  c->token = t && *t ? strdup(t) : NULL;
  snprintf(c->source, sizeof(c->source), "%s:%.40s",
           cred_file ? "shared-file" : "config-file", name);
  if (!c->akid || !c->secret || (t && *t && !c->token)) {
    s3_creds_clear(c);
    return -ENOMEM;
  }
  return 1;
}

static int fail(s3_plan_t *p, s3_src_t src, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(s3_plan_t *p, s3_src_t src, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  p->src = src;
  p->status = WS_ECREDS;
  if (vsnprintf(p->errmsg, sizeof(p->errmsg), fmt, ap) < 0)
    p->errmsg[0] = '\0';
  va_end(ap);
  return 1;
}

/* Credentials of one profile without roles: keys in the credentials file,
 * credential_process, keys in the config file. 1 when p->creds or p->status
 * was set, 0 when the profile holds none. */
static int direct(const s3_env_t *e, const s3_profile_t *pr, const char *name,
                  s3_plan_t *p, s3_creds_t *c) {
  int rc = keys(pr, 1, name, c);
  if (rc == 0) {
    const char *cmd = s3_profile_get(pr, name, "credential_process");
    if (cmd && *cmd) {
      char why[S3_ERRMSG_LEN];
      if (s3_creds_process(cmd, e->process_timeout_ms, c, why, sizeof(why)))
        return fail(p, S3_SRC_PROCESS, "%s", why);
      snprintf(c->source, sizeof(c->source), "process:%.48s", name);
      return 1;
    }
    rc = keys(pr, 0, name, c);
  }
  if (rc < 0)
    p->status = rc;
  return rc != 0;
}

static int assume_body(const s3_profile_t *pr, const char *role, s3_plan_t *p) {
  const char *n = pr->name;
  const char *sess = s3_profile_get(pr, n, "role_session_name");
  const char *dur = s3_profile_get(pr, n, "duration_seconds");
  const char *ext = s3_profile_get(pr, n, "external_id");
  char def[64];
  snprintf(def, sizeof(def), "weightswarm-%u", s3_rand32() % 1000000u);
  if (dur && (strspn(dur, "0123456789") != strlen(dur) || strlen(dur) > 5))
    return fail(p, S3_SRC_ASSUME,
                "profile %.64s: duration_seconds '%.16s' "
                "is not a number of seconds",
                n, dur);
  s3_buf_t b = {.max = 4 * S3_CREDS_FIELD_MAX};
  int rc = s3_form_add(&b, "Action", "AssumeRole");
  rc = rc ? rc : s3_form_add(&b, "Version", "2011-06-15");
  rc = rc ? rc : s3_form_add(&b, "RoleArn", role);
  rc = rc ? rc : s3_form_add(&b, "RoleSessionName", sess ? sess : def);
  if (dur)
    rc = rc ? rc : s3_form_add(&b, "DurationSeconds", dur);
  if (ext)
    rc = rc ? rc : s3_form_add(&b, "ExternalId", ext);
  if (rc) {
    s3_buf_free(&b);
    p->status = rc;
    return 1;
  }
  p->body = b.p;
  return 0;
}

/* role_arn: AssumeRole with source_profile's credentials, or web identity. */
static int plan_role(const s3_env_t *e, const s3_profile_t *pr,
                     const char *role, s3_plan_t *p) {
  const char *n = pr->name;
  const char *wit = s3_profile_get(pr, n, "web_identity_token_file");
  if (wit) {
    s3_plan_webid(e, p, role, wit, s3_profile_get(pr, n, "role_session_name"),
                  pr);
    return 1;
  }
  if (s3_profile_get(pr, n, "mfa_serial"))
    return fail(p, S3_SRC_ASSUME,
                "profile %.64s: mfa_serial needs an interactive code; "
                "not supported",
                n);
  const char *src = s3_profile_get(pr, n, "source_profile");
  if (!src)
    return fail(p, S3_SRC_ASSUME,
                "profile %.64s: role_arn needs source_profile "
                "(credential_source is not supported)",
                n);
  if (strcmp(src, n) != 0 && s3_profile_get(pr, src, "role_arn"))
    return fail(p, S3_SRC_ASSUME,
                "profile %.64s: source_profile %.64s has its own role_arn; "
                "role chains are not supported",
                n, src);
  if (!direct(e, pr, src, p, &p->source))
    return fail(p, S3_SRC_ASSUME,
                "profile %.64s: source_profile %.64s has no credentials", n,
                src);
  if (p->status) {
    p->src = S3_SRC_ASSUME;
    return 1;
  }
  if (assume_body(pr, role, p))
    return 1;
  p->src = S3_SRC_ASSUME;
  p->url = s3_profile_sts_url(e, pr, p->region);
  return 1;
}

int s3_profile_creds(const s3_env_t *e, const s3_profile_t *pr, s3_plan_t *p) {
  const char *role = s3_profile_get(pr, pr->name, "role_arn");
  if (role)
    return plan_role(e, pr, role, p);
  if (!direct(e, pr, pr->name, p, &p->creds))
    return 0;
  if (p->status == 0)
    p->src = strncmp(p->creds.source, "process:", 8) == 0 ? S3_SRC_PROCESS
                                                          : S3_SRC_FILE;
  return 1;
}
