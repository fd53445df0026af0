"""The credential chain of the S3 client, against loopback mock endpoints
(python http.server threads) for STS, the container endpoint and IMDSv2.

`s3_tool creds` resolves credentials exactly as p2pd does and prints the
source and access key id; these tests check the order (env, shared file,
web identity, container, IMDS), the request each endpoint receives, and
that failures are reported clearly and quickly.
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
EXP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))


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
