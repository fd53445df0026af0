"""The credential chain of the S3 client, against loopback mock endpoints
(python http.server threads) for STS, the container endpoint, IMDSv2 and
S3 itself.

`s3_tool creds` resolves credentials exactly as p2pd does and prints the
source and access key id; these tests check the order (env, shared file,
web identity, container, IMDS), the request each endpoint receives, and
that failures are reported clearly and quickly. The AWS config file cases
(profile region, endpoint_url, s3 addressing_style, role_arn +
source_profile through a SigV4-checking STS, credential_process, region
from IMDS, a bucket in another region) are in the second half; the one that
needs a real S3 runs against radosgw (WS_TEST_S3_ENDPOINT, set by the
integration runner).
"""
import json
import os
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

BUILD = os.environ.get("WS_BUILD_ROOT", "/work/main/build")
TOOL = os.path.join(BUILD, "tests", "unit", "s3_tool")
# One expiry for every mock, an hour after the module is imported (pytest
# imports every module of the suite first, so compare with EXP_TS, not with
# the time a test runs).
EXP_TS = int(time.time()) + 3600
EXP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(EXP_TS))


class Mock:
    """One loopback HTTP server; handler(method, path, headers, body) ->
    (status, body). Records every request."""

    def __init__(self, handler):
        self.requests = []
        mock = self

        class H(BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                mock.requests.append((self.command, self.path,
                                      dict(self.headers), body))
                status, out = handler(self.command, self.path, self.headers,
                                      body)
                data = out.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_GET = do_PUT = do_POST = _any

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def creds_json(akid, token="tok"):
    return json.dumps({"AccessKeyId": akid, "SecretAccessKey": "s" * 40,
                       "Token": token, "Expiration": EXP})


def sts_handler(method, path, headers, body):
    f = urllib.parse.parse_qs(body)
    if (method != "POST" or f.get("Action") != ["AssumeRoleWithWebIdentity"]
            or f.get("WebIdentityToken") != ["jwt.token+/="]
            or f.get("RoleArn") != ["arn:aws:iam::123:role/ws"]):
        return 403, ("<ErrorResponse><Error><Code>AccessDenied</Code>"
                     "</Error></ErrorResponse>")
    return 200, ("<AssumeRoleWithWebIdentityResponse>"
                 "<AssumeRoleWithWebIdentityResult><Credentials>"
                 "<AccessKeyId>ASIASTSMOCK</AccessKeyId>"
                 "<SecretAccessKey>sts-secret</SecretAccessKey>"
                 "<SessionToken>sts&amp;token</SessionToken>"
                 "<Expiration>%s</Expiration></Credentials>"
                 "</AssumeRoleWithWebIdentityResult>"
                 "</AssumeRoleWithWebIdentityResponse>" % EXP)


def container_handler(method, path, headers, body):
    if headers.get("Authorization") != "Bearer pod-identity-token":
        return 401, "{}"
    return 200, creds_json("ASIACONTAINER")


def imds_handler(method, path, headers, body):
    if method == "PUT" and path == "/latest/api/token":
        if not headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return 400, ""
        return 200, "imds-session-token"
    if headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
        return 401, ""
    if path == "/latest/meta-data/iam/security-credentials/":
        return 200, "node-role\n"
    if path == "/latest/meta-data/iam/security-credentials/node-role":
        return 200, creds_json("ASIAIMDS")
    return 404, ""


@pytest.fixture
def mocks():
    m = {"sts": Mock(sts_handler), "container": Mock(container_handler),
         "imds": Mock(imds_handler)}
    yield m
    for x in m.values():
        x.close()


@pytest.fixture
def files(tmp_path):
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = AKIDFILE\n"
        "aws_secret_access_key = filesecret\n"
        "[team]\naws_access_key_id = AKIDTEAM\n"
        "aws_secret_access_key = teamsecret\n")
    (tmp_path / "webtoken").write_text("jwt.token+/=\n")
    (tmp_path / "podtoken").write_text("Bearer pod-identity-token\n")
    return tmp_path


def base_env(files, mocks):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(files / "nohome")
    env["AWS_REGION"] = "us-east-1"  # no IMDS region lookup in these cases
    env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = mocks["imds"].url
    env["AWS_ENDPOINT_URL_STS"] = mocks["sts"].url + "/"
    return env


def creds(env, timeout=30):
    t0 = time.monotonic()
    p = subprocess.run([TOOL, "creds"], capture_output=True, text=True,
                       env=env, timeout=timeout)
    return p, time.monotonic() - t0


def full_env(files, mocks):
    env = base_env(files, mocks)
    env.update(AWS_ACCESS_KEY_ID="AKIDENV", AWS_SECRET_ACCESS_KEY="envsecret",
               AWS_SHARED_CREDENTIALS_FILE=str(files / "credentials"),
               AWS_ROLE_ARN="arn:aws:iam::123:role/ws",
               AWS_WEB_IDENTITY_TOKEN_FILE=str(files / "webtoken"),
               AWS_CONTAINER_CREDENTIALS_FULL_URI=mocks["container"].url +
               "/v1/credentials",
               AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(files / "podtoken"))
    return env


def test_chain_order(files, mocks):
    env = full_env(files, mocks)
    steps = [
        ("env", "AKIDENV", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]),
        ("shared-file:default", "AKIDFILE", ["AWS_SHARED_CREDENTIALS_FILE"]),
        ("web-identity", "ASIASTSMOCK", ["AWS_ROLE_ARN"]),
        ("container", "ASIACONTAINER", ["AWS_CONTAINER_CREDENTIALS_FULL_URI"]),
        ("imds", "ASIAIMDS", []),
    ]
    for source, akid, drop in steps:
        p, _ = creds(env)
        assert p.returncode == 0, (source, p.stderr)
        assert p.stdout.strip() == "source=%s access_key_id=%s" % (source,
                                                                    akid)
        for k in drop:
            env.pop(k)
    # Exactly the network calls expected, with the right inputs.
    assert len(mocks["sts"].requests) == 1
    assert mocks["sts"].requests[0][3].startswith(
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&")
    assert [r[0] for r in mocks["container"].requests] == ["GET"]
    assert mocks["container"].requests[0][1] == "/v1/credentials"
    assert [(r[0], r[1]) for r in mocks["imds"].requests] == [
        ("PUT", "/latest/api/token"),
        ("GET", "/latest/meta-data/iam/security-credentials/"),
        ("GET", "/latest/meta-data/iam/security-credentials/node-role")]


def test_profile(files, mocks):
    env = base_env(files, mocks)
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(files / "credentials"),
               AWS_PROFILE="team")
    p, _ = creds(env)
    assert p.stdout.strip() == "source=shared-file:team access_key_id=AKIDTEAM"
    # HOME/.aws/credentials is the default location.
    (files / "nohome" / ".aws").mkdir(parents=True)
    (files / "nohome" / ".aws" / "credentials").write_text(
        (files / "credentials").read_text())
    env = base_env(files, mocks)
    p, _ = creds(env)
    assert p.stdout.strip() == \
        "source=shared-file:default access_key_id=AKIDFILE"


def test_container_token_reread(files, mocks):
    env = base_env(files, mocks)
    env.update(AWS_CONTAINER_CREDENTIALS_FULL_URI=mocks["container"].url +
               "/v1/credentials",
               AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(files / "podtoken"))
    (files / "podtoken").write_text("Bearer rotated-wrong")
    p, _ = creds(env)
    assert p.returncode != 0
    assert "container" in p.stderr and "401" in p.stderr
    assert mocks["container"].requests[-1][2]["Authorization"] == \
        "Bearer rotated-wrong"


def test_sts_denied_is_clear(files, mocks):
    env = base_env(files, mocks)
    (files / "webtoken").write_text("some-other-token")
    env.update(AWS_ROLE_ARN="arn:aws:iam::123:role/ws",
               AWS_WEB_IDENTITY_TOKEN_FILE=str(files / "webtoken"))
    p, dt = creds(env)
    assert p.returncode != 0
    assert "web-identity" in p.stderr and "AccessDenied" in p.stderr
    assert len(mocks["sts"].requests) == 1  # 403 is not retried
    assert dt < 5


def test_nothing_configured(files, mocks):
    env = base_env(files, mocks)
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    p, dt = creds(env)
    assert p.returncode != 0
    assert "no AWS credentials" in p.stderr
    assert not mocks["imds"].requests
    assert dt < 5


def test_imds_unreachable_falls_through_fast(files, mocks):
    env = base_env(files, mocks)
    env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = "http://127.0.0.1:9"
    p, dt = creds(env)
    assert p.returncode != 0
    assert "IMDS" in p.stderr
    assert dt < 5


# ---- the AWS config file: ~/.aws/config / AWS_CONFIG_FILE ----------------

import hashlib
import hmac
import re
import stat

P2PCTL = os.path.join(BUILD, "tools", "p2pctl")


class S3Mock:
    """A loopback S3 stand-in: handler(method, path, headers) -> (status,
    extra headers, body). Records (method, path, headers)."""

    def __init__(self, handler):
        self.requests = []
        mock = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                mock.requests.append((self.command, self.path,
                                      dict(self.headers)))
                status, hdrs, out = handler(self.command, self.path,
                                            self.headers)
                data = out.encode()
                self.send_response(status)
                for k, v in hdrs.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.srv.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def s3_ok(method, path, headers):
    return 200, {"ETag": '"abc"'}, "hello"


def cred_of(headers):
    """(access key id, region) of a SigV4 Authorization header."""
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/([^/]+)/",
                 headers.get("Authorization", ""))
    return (m.group(1), m.group(2)) if m else (None, None)


def sigv4_ok(method, path, headers, body, akid, secret):
    """Recomputes the request's SigV4 signature with secret."""
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/"
                 r"([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?"
                 r"Signature=([0-9a-f]{64})$",
                 headers.get("Authorization", ""))
    if not m or m.group(1) != akid:
        return False
    date, region, service, signed, sig = m.group(2, 3, 4, 5, 6)
    u = urllib.parse.urlsplit(path)
    query = "&".join(sorted(u.query.split("&"))) if u.query else ""
    canon = "".join("%s:%s\n" % (h, " ".join((headers.get(h) or "").split()))
                    for h in signed.split(";"))
    payload = headers.get("x-amz-content-sha256") or \
        hashlib.sha256(body.encode()).hexdigest()
    creq = "\n".join([method, u.path or "/", query, canon, signed, payload])
    scope = "%s/%s/%s/aws4_request" % (date, region, service)
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return hmac.new(k, sts.encode(), hashlib.sha256).hexdigest() == sig


def assume_handler(method, path, headers, body):
    f = urllib.parse.parse_qs(body)
    if not sigv4_ok(method, path, headers, body, "AKIDBASE", "basesecret"):
        return 403, ("<ErrorResponse><Error><Code>SignatureDoesNotMatch"
                     "</Code></Error></ErrorResponse>")
    if (f.get("Action") != ["AssumeRole"]
            or f.get("RoleArn") != ["arn:aws:iam::123:role/deploy"]
            or headers.get("X-Amz-Security-Token") != "basetoken"):
        return 403, ("<ErrorResponse><Error><Code>AccessDenied</Code>"
                     "</Error></ErrorResponse>")
    return 200, ("<AssumeRoleResponse><AssumeRoleResult><Credentials>"
                 "<AccessKeyId>ASIAASSUMED</AccessKeyId>"
                 "<SecretAccessKey>assumed-secret</SecretAccessKey>"
                 "<SessionToken>assumed-token</SessionToken>"
                 "<Expiration>%s</Expiration></Credentials>"
                 "</AssumeRoleResult></AssumeRoleResponse>" % EXP)


def tool(env, *args, timeout=30):
    t0 = time.monotonic()
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, env=env,
                       timeout=timeout)
    return p, time.monotonic() - t0


def config_env(tmp_path, text, **extra):
    cfg = tmp_path / "config"
    cfg.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path / "nohome"), AWS_CONFIG_FILE=str(cfg),
               AWS_EC2_METADATA_DISABLED="true")
    env.update(extra)
    return env


KEYS = dict(AWS_ACCESS_KEY_ID="AKIDENV", AWS_SECRET_ACCESS_KEY="envsecret")


def test_profile_region_endpoint_addressing(tmp_path):
    s3, other = S3Mock(s3_ok), S3Mock(s3_ok)
    try:
        text = ("[default]\nregion = us-west-1\n"
                "[profile dev]\nregion = eu-central-1\n"
                "endpoint_url = http://127.0.0.1:9\n"
                "s3 =\n  endpoint_url = http://localhost:%d\n"
                "  addressing_style = %s\n")
        env = config_env(tmp_path, text % (s3.port, "path"),
                         AWS_PROFILE="dev", **KEYS)
        p, _ = tool(env, "head", "s3://bkt-one/some/key")
        assert p.returncode == 0, p.stderr
        method, path, h = s3.requests[-1]
        assert (method, path) == ("HEAD", "/bkt-one/some/key")
        assert h["Host"] == "localhost:%d" % s3.port
        assert cred_of(h) == ("AKIDENV", "eu-central-1")
        # virtual: the bucket moves into the host name.
        env = config_env(tmp_path, text % (s3.port, "virtual"),
                         AWS_PROFILE="dev", **KEYS)
        p, _ = tool(env, "head", "s3://bkt-one/some/key")
        assert p.returncode == 0, p.stderr
        method, path, h = s3.requests[-1]
        assert (method, path) == ("HEAD", "/some/key")
        assert h["Host"] == "bkt-one.localhost:%d" % s3.port
        # Environment over profile: AWS_REGION and AWS_ENDPOINT_URL_S3 win.
        n = len(s3.requests)
        env.update(AWS_REGION="ap-south-1", AWS_ENDPOINT_URL_S3=other.url,
                   WS_S3_ADDRESSING="path")
        p, _ = tool(env, "head", "s3://bkt-one/k")
        assert p.returncode == 0, p.stderr
        assert len(s3.requests) == n
        assert other.requests[-1][1] == "/bkt-one/k"
        assert cred_of(other.requests[-1][2]) == ("AKIDENV", "ap-south-1")
        # The default profile's region; the global endpoint_url.
        env = config_env(tmp_path, "[default]\nregion = us-west-1\n"
                         "endpoint_url = %s\n" % other.url, **KEYS)
        p, _ = tool(env, "creds", "-v")
        assert "region=us-west-1" in p.stdout, p.stderr
        p, _ = tool(env, "head", "s3://bkt-two/k")
        assert p.returncode == 0, p.stderr
        assert other.requests[-1][1] == "/bkt-two/k"
        assert cred_of(other.requests[-1][2])[1] == "us-west-1"
        # A broken config file is an error naming the file and line.
        env = config_env(tmp_path, "[default]\nregion us-west-1\n", **KEYS)
        p, _ = tool(env, "head", "s3://bkt-two/k")
        assert p.returncode != 0
        assert "config line 2: malformed" in p.stderr, p.stderr
        env = config_env(tmp_path, "[default]\ns3 =\n  addressing_style = "
                         "sideways\n", **KEYS)
        p, _ = tool(env, "head", "s3://bkt-two/k")
        assert "addressing_style = 'sideways' is not valid" in p.stderr
    finally:
        s3.close()
        other.close()


def test_assume_role_source_profile(tmp_path):
    sts, s3 = Mock(assume_handler), S3Mock(s3_ok)
    try:
        (tmp_path / "credentials").write_text(
            "[base]\naws_access_key_id = AKIDBASE\n"
            "aws_secret_access_key = basesecret\n"
            "aws_session_token = basetoken\n")
        text = ("[profile ci]\nrole_arn = arn:aws:iam::123:role/deploy\n"
                "source_profile = base\nrole_session_name = ci-run\n"
                "duration_seconds = 900\nregion = us-west-2\n"
                "sts =\n  endpoint_url = %s/\n"
                "s3 =\n  endpoint_url = %s\n" % (sts.url, s3.url))
        env = config_env(tmp_path, text, AWS_PROFILE="ci",
                         AWS_SHARED_CREDENTIALS_FILE=str(
                             tmp_path / "credentials"))
        p, _ = tool(env, "creds", "-v")
        assert p.returncode == 0, p.stderr
        lines = p.stdout.split("\n")
        assert lines[0] == "source=assume-role access_key_id=ASIAASSUMED"
        assert "region=us-west-2" in lines[1]
        exp = int(lines[1].split()[0].split("=")[1])
        assert abs(exp / 1000 - EXP_TS) < 2
        form = urllib.parse.parse_qs(sts.requests[-1][3])
        assert form["RoleSessionName"] == ["ci-run"]
        assert form["DurationSeconds"] == ["900"]
        assert cred_of(sts.requests[-1][2]) == ("AKIDBASE", "us-west-2")
        # The temporary credentials sign the S3 requests.
        p, _ = tool(env, "head", "s3://bkt/k")
        assert p.returncode == 0, p.stderr
        h = s3.requests[-1][2]
        assert cred_of(h) == ("ASIAASSUMED", "us-west-2")
        assert h["x-amz-security-token"] == "assumed-token"
        # Signed with the wrong secret: STS refuses, the error says where.
        (tmp_path / "credentials").write_text(
            "[base]\naws_access_key_id = AKIDBASE\n"
            "aws_secret_access_key = wrongsecret\n"
            "aws_session_token = basetoken\n")
        p, dt = tool(env, "creds")
        assert p.returncode != 0
        assert "assume-role" in p.stderr
        assert "SignatureDoesNotMatch" in p.stderr
        assert dt < 5
        # A source profile without credentials, and role chains, are clear.
        env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "none")
        p, _ = tool(env, "creds")
        assert "source_profile base has no credentials" in p.stderr
    finally:
        sts.close()
        s3.close()


def script(tmp_path, name, body):
    f = tmp_path / name
    f.write_text("#!/bin/sh\n" + body)
    f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return f


def test_credential_process(tmp_path):
    good = script(tmp_path, "good", 'printf \'{"Version": 1, "AccessKeyId": '
                  '"ASIAPROC", "SecretAccessKey": "ps", "SessionToken": '
                  '"pt", "Expiration": "%s"}\' "$1"\n')
    fails = script(tmp_path, "fails", "echo 'sso session expired' >&2\n"
                   "exit 3\n")
    slow = script(tmp_path, "slow", "sleep 30\n")
    garbage = script(tmp_path, "garbage", "echo hello world\n")
    huge = script(tmp_path, "huge", "head -c 200000 /dev/zero | tr '\\0' x\n")
    expired = script(tmp_path, "expired", 'echo \'{"Version": 1, '
                     '"AccessKeyId": "A", "SecretAccessKey": "S", '
                     '"Expiration": "2001-01-01T00:00:00Z"}\'\n')

    def run(cmd):
        env = config_env(tmp_path, "[default]\ncredential_process = %s\n" %
                         cmd, WS_S3_CREDENTIAL_PROCESS_TIMEOUT_MS="800")
        return tool(env, "creds", "-v")

    # The command goes through /bin/sh -c: quoting works as in a shell.
    p, _ = run("%s '%s'" % (good, EXP))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("source=process:default access_key_id=ASIAPROC")
    exp = int(p.stdout.split("\n")[1].split()[0].split("=")[1])
    assert abs(exp / 1000 - EXP_TS) < 2
    p, _ = run(str(fails))
    assert p.returncode != 0
    assert "exited with status 3: sso session expired" in p.stderr
    p, dt = run(str(slow))
    assert p.returncode != 0 and "timed out after 800 ms" in p.stderr
    assert dt < 5
    p, _ = run(str(garbage))
    assert "no valid Version 1 credentials JSON" in p.stderr
    p, _ = run(str(huge))
    assert "printed more than 65536 bytes" in p.stderr
    p, _ = run(str(expired))
    assert "expire within 60 s" in p.stderr
    # Static keys in the credentials file come before credential_process.
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = AKIDFILE\n"
        "aws_secret_access_key = fs\n")
    env = config_env(tmp_path, "[default]\ncredential_process = %s\n" % slow,
                     AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"))
    p, dt = tool(env, "creds")
    assert p.stdout.strip() == "source=shared-file:default access_key_id=AKIDFILE"
    assert dt < 5


def region_imds(answer):
    def h(method, path, headers, body):
        if method == "PUT" and path == "/latest/api/token":
            return 200, "tok-region"
        if headers.get("X-aws-ec2-metadata-token") != "tok-region":
            return 401, ""
        if path == "/latest/meta-data/placement/region" and answer:
            return 200, answer
        return 404, ""
    return h


def test_region_from_imds(tmp_path):
    imds, bad = Mock(region_imds("ap-southeast-2")), Mock(region_imds(None))
    try:
        env = config_env(tmp_path, "[default]\n", **KEYS)
        env.pop("AWS_EC2_METADATA_DISABLED")
        env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds.url
        p, _ = tool(env, "creds", "-v")
        assert p.returncode == 0, p.stderr
        assert "region=ap-southeast-2" in p.stdout
        assert [(r[0], r[1]) for r in imds.requests] == [
            ("PUT", "/latest/api/token"),
            ("GET", "/latest/meta-data/placement/region")]
        # A region set anywhere means no IMDS call.
        env["AWS_DEFAULT_REGION"] = "eu-north-1"
        p, _ = tool(env, "creds", "-v")
        assert "region=eu-north-1" in p.stdout and len(imds.requests) == 2
        # IMDS without an answer, or unreachable: us-east-1, quickly.
        env.pop("AWS_DEFAULT_REGION")
        for url in (bad.url, "http://127.0.0.1:9"):
            env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = url
            p, dt = tool(env, "creds", "-v")
            assert p.returncode == 0, p.stderr
            assert "region=us-east-1" in p.stdout and dt < 5
    finally:
        imds.close()
        bad.close()


def mismatch(method, path, headers):
    if method == "HEAD" or "/k301" in path:
        return 301, {"x-amz-bucket-region": "eu-west-1"}, ""
    return 400, {"Content-Type": "application/xml"}, (
        "<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region "
        "'us-east-1' is wrong; expecting 'eu-west-1'</Message>"
        "<Region>eu-west-1</Region></Error>")


def test_region_mismatch(tmp_path):
    s3 = S3Mock(mismatch)
    try:
        env = config_env(tmp_path, "[default]\nregion = us-east-1\n",
                         AWS_ENDPOINT_URL_S3=s3.url, **KEYS)
        want = ("bucket models is in eu-west-1, not us-east-1: set "
                "AWS_REGION=eu-west-1 or region in the profile")
        for args in (["head", "s3://models/k"],
                     ["get", "s3://models/k", str(tmp_path / "out")],
                     ["get", "s3://models/k301", str(tmp_path / "out")]):
            n = len(s3.requests)
            p, dt = tool(env, *args)
            assert p.returncode != 0
            assert want in p.stderr, p.stderr
            assert len(s3.requests) == n + 1  # final: not retried
            assert dt < 5
        # p2pctl publish says the same.
        d = tmp_path / "rel"
        d.mkdir()
        (d / "config.json").write_text("{}")
        p = subprocess.run([P2PCTL, "publish", str(d), "s3://models/x/"],
                           capture_output=True, text=True, env=env,
                           timeout=60)
        assert p.returncode != 0
        assert want in p.stderr, p.stderr
    finally:
        s3.close()


def test_profile_only_against_radosgw(tmp_path):
    """A profile with keys, region and endpoint_url, and no AWS_* variable
    but AWS_CONFIG_FILE, reaches the real radosgw."""
    endpoint = os.environ.get("WS_TEST_S3_ENDPOINT")
    if not endpoint:
        pytest.skip("WS_TEST_S3_ENDPOINT unset: run under the integration "
                    "runner, which starts radosgw")
    akid, secret = os.environ["AWS_ACCESS_KEY_ID"], \
        os.environ["AWS_SECRET_ACCESS_KEY"]
    text = ("[profile rgw]\nregion = us-east-1\naws_access_key_id = %s\n"
            "aws_secret_access_key = %s\ns3 =\n  endpoint_url = %s\n"
            "  addressing_style = path\n" % (akid, secret, endpoint))
    env = config_env(tmp_path, text, AWS_PROFILE="rgw")
    bucket = "ws-awscfg-%d" % os.getpid()
    import boto3
    b3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=akid,
                      aws_secret_access_key=secret, region_name="us-east-1")
    b3.create_bucket(Bucket=bucket)
    b3.put_object(Bucket=bucket, Key="m/a.bin", Body=b"weights")
    try:
        p, _ = tool(env, "creds")
        assert p.stdout.strip() == \
            "source=config-file:rgw access_key_id=%s" % akid
        out = tmp_path / "a.bin"
        p, _ = tool(env, "get", "s3://%s/m/a.bin" % bucket, str(out))
        assert p.returncode == 0, p.stderr
        assert out.read_bytes() == b"weights"
    finally:
        b3.delete_object(Bucket=bucket, Key="m/a.bin")
        b3.delete_bucket(Bucket=bucket)
