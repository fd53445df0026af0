"""Cold path against a real radosgw: publish, prefetch into an empty cache,
crash/resume, credential errors, an S3 outage and a corrupted response.

Bytes read from S3 are counted by radosgw's own usage log (rgw.bytes_sent),
not by p2pd.
"""
import hashlib
import json
import os
import subprocess
import time

import pytest

from conftest import BUILD, ROOT, binary
import ws
from flipproxy import FlipProxy

MiB = 1 << 20


@pytest.fixture(scope="module")
def release512(tmp_path_factory):
    """~512 MiB model-shaped release on disk (generated once per module)."""
    d = tmp_path_factory.mktemp("rel512") / "model"
    ws.make_release(str(d), shard_bytes=170 * MiB, nshards=3, seed="cold512")
    return str(d)


def publish(s3env, src, uri, *extra):
    r = subprocess.run([binary("tools/p2pctl"), "publish", src, uri, "--json", *extra],
                       env=s3env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["digest"].startswith("sha256-")
    return out


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


@pytest.fixture(scope="module")
def published(rgw, release512, tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(rgw.env)
    bucket = rgw.bucket()
    out = publish(env, release512, f"s3://{bucket}/models/cold-model/", "--chunk-size", str(4 * MiB))
    return {"bucket": bucket, "digest": out["digest"], "uri": out["uri"],
            "size": dir_bytes(release512), "src": release512}


def check_release(p2pd, digest, src):
    path = os.path.join(p2pd.cache, "releases", digest)
    ok, bad = ws.tree_equal(src, path)
    assert ok, f"{bad} differs"
    for n in os.listdir(path):
        if n.endswith(".safetensors"):
            ws.read_safetensors(os.path.join(path, n))
    return path


def test_publish_then_prefetch_matches(rgw, s3env, published, tmp_path):
    # boto3, an independent client, reads what p2pctl published.
    c = rgw.client()
    key_prefix = published["uri"].split(published["bucket"] + "/", 1)[1]
    body = c.get_object(Bucket=published["bucket"], Key=key_prefix + "manifest.json")["Body"].read()
    assert "sha256-" + hashlib.sha256(body).hexdigest() == published["digest"]
    before = rgw.bytes_sent()
    d = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        t0 = time.time()
        r = d.ctl("prefetch", published["uri"], "--wait")
        assert r.returncode == 0, r.stderr + d.tail()
        path = check_release(d, published["digest"], published["src"])
        st, rel = d.api("GET", f"/api/v1/releases/{published['digest']}")
        assert st == 200 and rel["state"] == "ready" and rel["path"] == path
        print(f"cold prefetch of {published['size']} bytes took {time.time() - t0:.1f}s")
    finally:
        d.stop()
    sent = rgw.bytes_sent() - before
    assert published["size"] <= sent <= published["size"] * 1.01 + MiB


def test_kill9_resume_bounded_refetch(rgw, s3env, published, tmp_path):
    conc, chunk = 4, 4 * MiB
    before = rgw.bytes_sent()
    d = ws.P2pd(BUILD, str(tmp_path), s3env, extra=["--s3-concurrency", str(conc)]).start()
    st, _ = d.api("POST", "/api/v1/prefetch", {"uri": published["uri"]})
    assert st == 200
    deadline = time.time() + 120
    while time.time() < deadline:
        st, rel = d.api("GET", f"/api/v1/releases/{published['digest']}")
        if rel["bytes_done"] >= published["size"] // 3:
            break
        time.sleep(0.05)
    assert rel["state"] == "fetching", rel
    d.kill9()
    d.start()
    r = d.ctl("wait", published["digest"], "--timeout", "300")
    assert r.returncode == 0, r.stderr + d.tail()
    d.stop()
    check_release(d, published["digest"], published["src"])
    sent = rgw.bytes_sent() - before
    window = conc * chunk + 2 * MiB  # in flight at the kill, plus manifests
    assert sent <= published["size"] + window, (sent, published["size"], window)


def test_wrong_secret_fails_fast_without_retry_storm(rgw, s3env, published, tmp_path):
    env = dict(s3env, AWS_SECRET_ACCESS_KEY="not-the-secret-" + "x" * 25)
    d = ws.P2pd(BUILD, str(tmp_path), env).start()
    try:
        t0 = time.time()
        r = d.ctl("prefetch", published["uri"], "--wait", timeout=60)
        assert r.returncode != 0
        assert "403" in r.stderr or "denied" in r.stderr.lower() or "signature" in r.stderr.lower() \
            or "credential" in r.stderr.lower(), r.stderr
        assert time.time() - t0 < 10
        assert d.metric("weightswarm_p2pd_s3_requests_total") <= 3
    finally:
        d.stop()


def test_missing_key_clear_error_fast(rgw, s3env, published, tmp_path):
    d = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        t0 = time.time()
        uri = f"s3://{published['bucket']}/models/no-such-model/sha256-{'0' * 64}/"
        r = d.ctl("prefetch", uri, "--wait", timeout=30)
        assert r.returncode != 0
        assert time.time() - t0 < 5
        assert "no-such-model" in r.stderr, r.stderr
    finally:
        d.stop()


def rgw_cmd(rgw, what):
    subprocess.run([os.path.join(ROOT, "tools", "rgw"), what],
                   check=True, env={**os.environ, **rgw.env}, timeout=120)


def test_s3_outage_10s_then_completes(rgw, s3env, published, tmp_path):
    """radosgw itself is stopped for 10 s mid-download (connections reset,
    then refused) and started again: p2pd retries and completes."""
    d = ws.P2pd(BUILD, str(tmp_path), s3env, extra=["--s3-concurrency", "4"]).start()
    try:
        st, _ = d.api("POST", "/api/v1/prefetch", {"uri": published["uri"]})
        assert st == 200
        while d.api("GET", f"/api/v1/releases/{published['digest']}")[1]["bytes_done"] < 64 * MiB:
            time.sleep(0.05)
        rgw_cmd(rgw, "gw-stop")
        try:
            time.sleep(10)
            st, rel = d.api("GET", f"/api/v1/releases/{published['digest']}")
            assert rel["state"] == "fetching", rel  # still trying, not failed
        finally:
            rgw_cmd(rgw, "gw-start")
        r = d.ctl("wait", published["digest"], "--timeout", "300")
        assert r.returncode == 0, r.stderr + d.tail()
        check_release(d, published["digest"], published["src"])
        assert d.metric("weightswarm_p2pd_s3_retries_total") >= 1
    finally:
        d.stop()


def test_flipped_byte_is_refetched_never_published(rgw, s3env, published, tmp_path):
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = FlipProxy(host, int(port), flip_at=12345)
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    d = ws.P2pd(BUILD, str(tmp_path), env).start()
    try:
        r = d.ctl("prefetch", published["uri"], "--wait")
        assert r.returncode == 0, r.stderr + d.tail()
        assert proxy.flipped == 1
        assert d.metric("weightswarm_p2pd_chunks_failed_total") >= 1
        check_release(d, published["digest"], published["src"])
    finally:
        d.stop()
        proxy.close()


def test_legacy_release_uploaded_by_boto3(rgw, s3env, tmp_path):
    src = tmp_path / "legacy"
    ws.make_release(str(src), shard_bytes=3 * MiB, nshards=2, seed="legacy")
    c = rgw.client()
    bucket = rgw.bucket()
    files = []
    for n in sorted(os.listdir(src)):
        data = (src / n).read_bytes()
        c.put_object(Bucket=bucket, Key=f"llama/v1.2/{n}", Body=data)
        files.append({"name": n, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    manifest = json.dumps({"model": "llama", "version": "v1.2", "files": files,
                           "created_at": "2026-11-30T00:00:00Z"}).encode()
    c.put_object(Bucket=bucket, Key="llama/v1.2/manifest.json", Body=manifest)
    digest = "sha256-" + hashlib.sha256(manifest).hexdigest()
    d = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        st, rep = d.api("POST", "/api/v1/prefetch", {"uri": f"s3://{bucket}/llama/v1.2/"})
        assert st == 200, rep
        assert rep["digest"] == digest
        r = d.ctl("wait", digest, "--timeout", "120")
        assert r.returncode == 0, r.stderr
        check_release(d, digest, str(src))
        # An expected digest that does not match is refused.
        st, rep = d.api("POST", "/api/v1/prefetch",
                        {"uri": f"s3://{bucket}/llama/v1.2/", "digest": "sha256-" + "1" * 64})
        assert st == 422, rep
    finally:
        d.stop()


def test_two_releases_share_files_under_different_chunk_lists(rgw, s3env, tmp_path):
    """The same files published twice with different chunk sizes, both
    prefetched at once by one p2pd: the shared files are fetched once, under
    the first release's chunk list, and hashed whole before the second
    release may use them (its chunk list vouches for nothing it fetched).
    Both releases appear byte for byte."""
    src = tmp_path / "m"
    ws.make_release(str(src), shard_bytes=6 * MiB, nshards=2, seed="share")
    bucket = rgw.bucket()
    a = publish(s3env, str(src), f"s3://{bucket}/models/share-a/", "--chunk-size", str(1 * MiB))
    b = publish(s3env, str(src), f"s3://{bucket}/models/share-b/", "--chunk-size", str(2 * MiB))
    assert a["digest"] != b["digest"]
    before = rgw.bytes_sent()
    d = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        for rel in (a, b):
            st, body = d.api("POST", "/api/v1/prefetch", {"uri": rel["uri"]})
            assert st == 200, body
        for rel in (a, b):
            r = d.ctl("wait", rel["digest"], "--timeout", "120")
            assert r.returncode == 0, r.stderr + d.tail()
            check_release(d, rel["digest"], str(src))
    finally:
        d.stop()
    # Each file came from S3 once (plus two manifests and retries' slack).
    assert rgw.bytes_sent() - before <= dir_bytes(str(src)) * 1.01 + MiB
