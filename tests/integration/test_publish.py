"""`p2pctl publish` against a real S3 server (radosgw), checked with boto3:
every file lands under MODEL/sha256-<digest>/, the manifest's bytes hash to
the printed digest and list every file with the right sha256, large files
go multipart, a re-run uploads nothing, and --sign-key adds a signature
that verifies (PyNaCl)."""
import hashlib
import json
import os
import subprocess

import pytest

from test_s3_rgw import boto, bucket, s3env, tool_env  # noqa: F401 fixtures

BUILD = os.environ.get("WS_BUILD_ROOT", "/work/main/build")
P2PCTL = os.path.join(BUILD, "tools", "p2pctl")


def publish(s3env, *args):
    return subprocess.run([P2PCTL, "publish", *args], capture_output=True,
                          text=True, env=tool_env(s3env), timeout=300)


@pytest.fixture
def model(tmp_path):
    d = tmp_path / "model"
    (d / "tokenizer").mkdir(parents=True)
    files = {
        "config.json": b'{"hidden": 4096}\n',
        "tokenizer/tok en+1.json": os.urandom(3000),
        "model-00001.safetensors": os.urandom(70 * 1024 * 1024 + 3),
        "model-00002.safetensors": os.urandom(5 * 1024 * 1024),
        "empty.txt": b"",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d, files


def test_publish_roundtrip(s3env, boto, bucket, model):  # noqa: F811
    d, files = model
    p = publish(s3env, str(d), "s3://%s/team/llama-test/" % bucket, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    digest = out["digest"]
    assert out["uri"] == "s3://%s/team/llama-test/%s/" % (bucket, digest)
    assert out["skipped"] == 0
    assert out["bytes_uploaded"] >= sum(len(v) for v in files.values())
    prefix = "team/llama-test/%s/" % digest
    raw = boto.get_object(Bucket=bucket, Key=prefix + "manifest.json")
    mbytes = raw["Body"].read()
    assert "sha256-" + hashlib.sha256(mbytes).hexdigest() == digest
    m = json.loads(mbytes)
    assert m["format"] == "weightswarm/v1"
    assert m["model"] == "llama-test"
    assert sorted(f["name"] for f in m["files"]) == sorted(files)
    for f in m["files"]:
        data = files[f["name"]]
        assert f["size"] == len(data)
        assert f["sha256"] == hashlib.sha256(data).hexdigest()
        obj = boto.get_object(Bucket=bucket, Key=prefix + f["name"])
        assert obj["Body"].read() == data
        if len(data) > 64 * 1024 * 1024:
            assert obj["ETag"].strip('"').endswith("-5")  # 16 MiB parts
    # Re-running uploads nothing and prints the same digest.
    p = publish(s3env, str(d), "s3://%s/team/llama-test" % bucket, "--json")
    assert p.returncode == 0, p.stderr
    again = json.loads(p.stdout.strip().splitlines()[-1])
    assert again["digest"] == digest
    assert again["bytes_uploaded"] == 0
    assert again["skipped"] == len(files) + 1


def test_publish_signed(s3env, boto, bucket, model, tmp_path):  # noqa: F811
    nacl = pytest.importorskip("nacl.signing")
    d, _ = model
    seed = os.urandom(32)
    key = tmp_path / "sign.key"
    key.write_text(seed.hex() + "\n")
    key.chmod(0o600)
    p = publish(s3env, str(d), "s3://%s/signed/m/" % bucket, "--sign-key",
                str(key))
    assert p.returncode == 0, p.stderr
    digest, uri = p.stdout.split()[:2]
    prefix = uri.split("/", 3)[3]
    mbytes = boto.get_object(Bucket=bucket,
                             Key=prefix + "manifest.json")["Body"].read()
    sig = boto.get_object(Bucket=bucket,
                          Key=prefix + "manifest.json.sig")["Body"].read()
    assert len(sig) == 64
    nacl.SigningKey(seed).verify_key.verify(mbytes, sig)


def test_publish_errors(s3env, bucket, model):  # noqa: F811
    d, _ = model
    env = dict(tool_env(s3env), AWS_SECRET_ACCESS_KEY="wrong" * 8)
    p = subprocess.run([P2PCTL, "publish", str(d), "s3://%s/x/m/" % bucket],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 6
    assert "credentials rejected" in p.stderr or "403" in p.stderr
    p = publish(s3env, str(d), "not-a-uri")
    assert p.returncode == 2
    p = publish(s3env, str(d / "missing"), "s3://%s/x/m/" % bucket)
    assert p.returncode == 1


def test_publish_more_parts_than_concurrency(s3env, boto, bucket, model):  # noqa: F811
    """5 parts through 2 transfer slots: queued requests must start as
    slots free up (regression: the loop once ended with parts queued)."""
    d, files = model
    p = publish(s3env, str(d), "s3://%s/team/narrow/" % bucket, "--json",
                "--concurrency", "2")
    assert p.returncode == 0, p.stderr
    digest = json.loads(p.stdout.strip().splitlines()[-1])["digest"]
    obj = boto.get_object(Bucket=bucket, Key="team/narrow/%s/model-00001.safetensors" % digest)
    assert obj["Body"].read() == files["model-00001.safetensors"]
