"""Cache trust against a real radosgw and real p2pd processes: what p2pd
trusts of what it finds on its own disk (docs/security.md "Cache and
disk", docs/cache.md "Cache trust").

- a wrong file put at a blob's name before the prefetch (p2pd running, or
  stopped) is hashed, removed and counted; the release is fetched and its
  files are the published bytes;
- a wrong file put at the blob's name while the file is being fetched
  loses: the verified download takes the name;
- a chunk marked durable in a partial, overwritten in place while p2pd is
  stopped, is re-hashed on resume and fetched again;
- a release a server has open (a shared flock on its manifest.json) is not
  evicted, on request or to make room;
- a manifest naming a file `..\\evil` is refused.
"""
import fcntl
import hashlib
import json
import os
import struct
import time

import pytest

from conftest import BUILD
from s3fault import S3Fault
import ws

MiB = 1 << 20
BIG = 32 * MiB


@pytest.fixture(scope="module")
def rel32(rgw, tmp_path_factory):
    """A release with one 32 MiB file in 1 MiB chunks, published once."""
    src = tmp_path_factory.mktemp("trust") / "model"
    src.mkdir()
    (src / "config.json").write_text('{"trust": 1}\n')
    ws.write_random(str(src / "w.bin"), BIG, "cache-trust")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(rgw.env)
    bucket = rgw.bucket()
    out = ws.publish(BUILD, env, str(src), f"s3://{bucket}/trust/m/", chunk_size=MiB)
    sha = hashlib.sha256((src / "w.bin").read_bytes()).hexdigest()
    return {"src": str(src), "digest": out["digest"], "uri": out["uri"], "sha": sha}


def blob_path(p, sha):
    return os.path.join(p.cache, "blobs", "sha256", sha[:2], sha)


def plant(path, size, seed="planted"):
    """A wrong file of the right size at path (over whatever is there)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".plant"
    ws.write_random(tmp, size, seed)
    os.chmod(tmp, 0o444)
    os.replace(tmp, path)


def check_release(p, rel):
    path = os.path.join(p.cache, "releases", rel["digest"])
    ok, bad = ws.tree_equal(rel["src"], path)
    assert ok, f"{bad} differs from what was published"


def rel_state(p, digest):
    st, r = p.api("GET", f"/api/v1/releases/{digest}")
    return r if st == 200 else {}


@pytest.mark.parametrize("when", ["running", "stopped"])
def test_planted_blob_before_prefetch_is_hashed_and_discarded(rel32, s3env, tmp_path, when):
    p = ws.P2pd(BUILD, str(tmp_path), s3env)
    if when == "stopped":
        plant(blob_path(p, rel32["sha"]), BIG)
    p.start()
    try:
        if when == "running":
            plant(blob_path(p, rel32["sha"]), BIG)
        r = p.ctl("prefetch", rel32["uri"], "--wait", "--timeout", "120s")
        assert r.returncode == 0, r.stderr + p.tail()
        check_release(p, rel32)
        assert p.metric("weightswarm_p2pd_cache_blobs_discarded_total") == 1
        assert p.metric("weightswarm_p2pd_cache_blobs_hashed_total") >= 1
        assert "does not hash to its name" in p.tail(20000)
    finally:
        p.stop()


def proxied(rgw, s3env):
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = S3Fault(host, int(port))
    return proxy, dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")


def test_planted_during_fetch_loses_to_verified(rgw, rel32, s3env, tmp_path):
    proxy, env = proxied(rgw, s3env)
    p = ws.P2pd(BUILD, str(tmp_path), env, extra=["--s3-concurrency", "1"]).start()
    try:
        proxy.stall(4, 1.0)
        st, _ = p.api("POST", "/api/v1/prefetch", {"uri": rel32["uri"]})
        assert st == 200
        # The manifest (stalled, then whole) and the first chunk GET sent:
        # the file is open and being fetched.
        deadline = time.time() + 60
        while proxy.requests < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert proxy.requests >= 2, p.tail()
        assert rel_state(p, rel32["digest"])["state"] == "fetching"
        plant(blob_path(p, rel32["sha"]), BIG)
        proxy.clear()
        r = p.ctl("wait", rel32["digest"], "--timeout", "120s")
        assert r.returncode == 0, r.stderr + p.tail()
        check_release(p, rel32)
        with open(blob_path(p, rel32["sha"]), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == rel32["sha"]
    finally:
        p.stop()
        proxy.close()


def durable_chunks(bits_path, nchunks):
    """Chunks whose durable bit is set (docs/cache.md "Bitmap journal")."""
    with open(bits_path, "rb") as f:
        data = f.read()
    hdr = {b"WSBITS03": 48, b"WSBITS04": 64}[data[:8]]
    assert struct.unpack("<I", data[8:12])[0] == nchunks
    bitmap = data[hdr:hdr + (nchunks + 7) // 8]
    return [j for j in range(nchunks) if bitmap[j // 8] >> (j % 8) & 1]


def test_resume_rehashes_overwritten_durable_chunk(rgw, rel32, s3env, tmp_path):
    proxy, env = proxied(rgw, s3env)
    p = ws.P2pd(BUILD, str(tmp_path), env, extra=["--s3-concurrency", "1"]).start()
    try:
        proxy.stall(0.3, 1.0)  # about 3 chunks a second
        st, _ = p.api("POST", "/api/v1/prefetch", {"uri": rel32["uri"]})
        assert st == 200
        deadline = time.time() + 120
        while rel_state(p, rel32["digest"]).get("bytes_done", 0) < 4 * MiB:
            assert time.time() < deadline, p.tail()
            time.sleep(0.05)
        assert rel_state(p, rel32["digest"])["state"] == "fetching"
    finally:
        p.stop()  # a clean stop: the handle's close makes every chunk durable
        proxy.close()
    part = os.path.join(p.cache, "partial", rel32["sha"])
    done = durable_chunks(part + ".bits", BIG // MiB)
    assert done, "no durable chunk to corrupt"
    j = done[0]
    with open(part + ".data", "r+b") as f:  # in place: same inode
        f.seek(j * MiB + 1000)
        f.write(b"\0" * 4096)
    p.env = s3env
    p.start()  # the job record resumes the prefetch
    try:
        r = p.ctl("wait", rel32["digest"], "--timeout", "120s")
        assert r.returncode == 0, r.stderr + p.tail()
        check_release(p, rel32)
        assert p.metric("weightswarm_p2pd_cache_chunks_dropped_total") >= 1
    finally:
        p.stop()


def publish_version(rgw, s3env, tmp_path, bucket, model, v, seed):
    d = tmp_path / f"{model}-{v}"
    d.mkdir()
    (d / "config.json").write_text('{"v": "%s"}\n' % v)
    ws.write_random(str(d / "w.bin"), 2 * MiB, seed)
    r = ws.publish(BUILD, s3env, str(d), f"s3://{bucket}/inuse/{model}/", chunk_size=MiB)
    return r


def test_release_in_use_is_not_evicted(rgw, s3env, tmp_path):
    bucket = rgw.bucket()
    rels = [publish_version(rgw, s3env, tmp_path, bucket, "m", f"v{i}", f"inuse-{i}")
            for i in range(3)]
    other = publish_version(rgw, s3env, tmp_path, bucket, "n", "v0", "inuse-n")
    # Room for the three releases of m, not for a fourth.
    p = ws.P2pd(BUILD, str(tmp_path), s3env, extra=["--capacity", str(3 * 2 * MiB + MiB // 2)])
    p.start()
    try:
        for r in rels:
            c = p.ctl("prefetch", r["uri"], "--wait", "--timeout", "60s")
            assert c.returncode == 0, c.stderr + p.tail()
        # v0 is neither current nor previous of m: evictable, but a server
        # has it open.
        v0 = os.path.join(p.cache, "releases", rels[0]["digest"])
        server = os.open(os.path.join(v0, "manifest.json"), os.O_RDONLY)
        fcntl.flock(server, fcntl.LOCK_SH)
        try:
            st, body = p.api("DELETE", f"/api/v1/releases/{rels[0]['digest']}")
            assert st == 409, body
            c = p.ctl("prefetch", other["uri"], "--wait", "--timeout", "60s")
            assert c.returncode != 0, "n/v0 found room: something was evicted"
            assert os.path.exists(os.path.join(v0, "manifest.json"))
            ok, bad = ws.tree_equal(str(tmp_path / "m-v0"), v0)
            assert ok, bad
            assert p.metric("weightswarm_p2pd_cache_evictions_in_use_total") >= 1
        finally:
            os.close(server)
        # The server is gone: now v0 makes room.
        c = p.ctl("prefetch", other["uri"], "--wait", "--timeout", "60s")
        assert c.returncode == 0, c.stderr + p.tail()
        assert not os.path.exists(v0)
    finally:
        p.stop()


def test_backslash_name_refused(rgw, s3env, tmp_path):
    c = rgw.client()
    bucket = rgw.bucket()
    data = b"evil bytes\n"
    c.put_object(Bucket=bucket, Key="bs/m/..\\evil", Body=data)
    manifest = json.dumps({"model": "bs", "version": "v1", "files": [
        {"name": "..\\evil", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}],
        "created_at": "2026-12-01T00:00:00Z"}).encode()
    c.put_object(Bucket=bucket, Key="bs/m/manifest.json", Body=manifest)
    p = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        r = p.ctl("prefetch", f"s3://{bucket}/bs/m/", "--wait", "--timeout", "60s")
        assert r.returncode != 0, "a name with a backslash was accepted"
        assert "backslash" in r.stderr, r.stderr
        assert not os.listdir(os.path.join(p.cache, "releases"))
    finally:
        p.stop()
