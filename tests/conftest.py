"""Fixtures shared by the integration and fault suites.

Everything here starts real processes: radosgw (tools/rgw), p2pd,
p2p-tracker. Nothing is mocked except where a test says so (credential
endpoints). tools/test starts radosgw once and exports WS_TEST_S3_ENDPOINT;
run alone, the first test that needs S3 starts it.
"""
import os
import subprocess
import sys
import uuid

import pytest

ROOT = os.environ.get("WS_SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("WS_BUILD_ROOT") or os.path.join(ROOT, "build")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))


def binary(rel):
    path = os.path.join(BUILD, rel)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} missing: build first (tools/test does)")
    return path


class Rgw:
    """The S3 server: endpoint, keys, a boto3 client and the usage counter."""

    def __init__(self, endpoint, env):
        self.endpoint = endpoint
        self.env = env

    def client(self, **kw):
        import boto3
        from botocore.config import Config
        return boto3.client(
            "s3", endpoint_url=self.endpoint,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, **kw))

    def bucket(self):
        name = "t-" + uuid.uuid4().hex[:16]
        self.client().create_bucket(Bucket=name)
        return name

    def bytes_sent(self):
        """Bytes radosgw itself logged as sent (usage log), cumulative."""
        out = subprocess.run([os.path.join(ROOT, "tools", "rgw"), "usage"],
                             check=True, capture_output=True, text=True,
                             env={**os.environ, **self.env})
        return int(out.stdout.strip() or 0)


@pytest.fixture(scope="session")
def rgw():
    started = False
    if not os.environ.get("WS_TEST_S3_ENDPOINT"):
        subprocess.run([os.path.join(ROOT, "tools", "rgw"), "start"], check=True)
        started = True
    out = subprocess.run([os.path.join(ROOT, "tools", "rgw"), "env"],
                         check=True, capture_output=True, text=True).stdout
    env = {}
    for line in out.splitlines():
        k, _, v = line.replace("export ", "", 1).partition("=")
        env[k] = v
    env["WS_RGW_DIR"] = os.environ.get("WS_RGW_DIR", "/tmp/weightswarm-rgw")
    yield Rgw(env["AWS_ENDPOINT_URL_S3"], env)
    if started:
        subprocess.run([os.path.join(ROOT, "tools", "rgw"), "stop"], check=False)


@pytest.fixture
def s3env(rgw):
    """Environment for our binaries talking to radosgw."""
    return s3_environ(rgw)


def s3_environ(rgw):
    """This process's environment without AWS_*, plus radosgw's (for
    module-scoped fixtures, which cannot use s3env)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(rgw.env)
    return env
