"""p2pd standalone smoke test: a release uploaded with boto3 (manifest
written here in Python, independent of our C manifest code) is prefetched
through the API, coalesced, published byte-identical, listed after a
restart, pinned, verified and evicted; sd_notify READY=1 / STOPPING=1 reach
an abstract NOTIFY_SOCKET; SIGTERM exits 0.
"""
import hashlib
import json
import os
import socket
import sys
import threading

from conftest import BUILD

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ws import P2pd, api  # noqa: E402

MiB = 1 << 20
CHUNK = 1 * MiB


def manifest_for(src, files):
    out = []
    for name in files:
        data = open(os.path.join(src, name), "rb").read()
        chunks = [hashlib.sha256(data[i:i + CHUNK]).hexdigest()
                  for i in range(0, len(data), CHUNK)]
        out.append({"name": name, "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "chunks": chunks})
    m = {"format": "weightswarm/v1", "model": "smoke", "version": "1",
         "chunk_size": CHUNK, "files": out}
    return json.dumps(m, indent=1).encode()


def upload(rgw, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_bytes(b'{"x": 1}\n')
    (src / "model.safetensors").write_bytes(os.urandom(5 * MiB + 123))
    (src / "empty.txt").write_bytes(b"")
    files = ["config.json", "model.safetensors", "empty.txt"]
    mbytes = manifest_for(str(src), files)
    digest = "sha256-" + hashlib.sha256(mbytes).hexdigest()
    c = rgw.client()
    bucket = rgw.bucket()
    prefix = f"smoke/{digest}/"
    for f in files:
        c.upload_file(str(src / f), bucket, prefix + f)
    c.put_object(Bucket=bucket, Key=prefix + "manifest.json", Body=mbytes)
    return src, files, digest, f"s3://{bucket}/{prefix}"


def notify_listener(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + name)
    s.settimeout(30)
    got = []

    def run():
        try:
            while True:
                got.append(s.recv(4096).decode())
        except OSError:
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return s, got


def test_prefetch_restart_pin_verify_evict(rgw, s3env, tmp_path):
    src, files, digest, uri = upload(rgw, tmp_path)
    name = "ws-notify-" + os.urandom(6).hex()
    nsock, notes = notify_listener(name)
    env = dict(s3env, NOTIFY_SOCKET="@" + name)
    d = P2pd(BUILD, str(tmp_path), env).start()
    try:
        st, r1 = api(d.sock, "POST", "/api/v1/prefetch", {"uri": uri})
        st2, r2 = api(d.sock, "POST", "/api/v1/prefetch", {"digest": digest})
        assert st == 200 and st2 == 200, (r1, r2)
        assert r1["digest"] == digest and r1["path"] == r2["path"]
        st, rel = api(d.sock, "GET",
                      f"/api/v1/releases/{digest}/wait?timeout_ms=60000",
                      timeout=90)
        assert st == 200 and rel["state"] == "ready", rel
        assert rel["bytes_done"] == rel["bytes_total"] == 5 * MiB + 123 + 9
        assert rel["chunks_total"] == 7 and rel["model"] == "smoke"
        for f in files:
            with open(os.path.join(rel["path"], f), "rb") as a, \
                    open(os.path.join(src, f), "rb") as b:
                assert a.read() == b.read(), f
        st, bad = api(d.sock, "POST", "/api/v1/prefetch",
                      {"uri": uri, "digest": "sha256-" + "0" * 64})
        assert st == 422 and bad["error"]["code"] == "WS_EDIGEST"
        st, _ = api(d.sock, "GET", "/metrics")
        assert st == 200
        assert d.stop() == 0
        assert "READY=1" in "".join(notes) and "STOPPING=1" in "".join(notes)

        d.start()
        st, lst = api(d.sock, "GET", "/api/v1/releases")
        assert [r["state"] for r in lst["releases"]
                if r["digest"] == digest] == ["ready"]
        assert d.ctl("pin", digest).returncode == 0
        r = d.ctl("evict", digest)
        assert r.returncode == 1, r.stderr        # pinned
        assert d.ctl("unpin", digest).returncode == 0
        r = d.ctl("verify", digest, "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True
        r = d.ctl("wait", digest, "--timeout", "5")
        assert r.returncode == 0 and r.stdout.strip() == rel["path"]
        assert d.ctl("evict", digest).returncode == 0
        assert d.ctl("status", digest).returncode == 4
        assert d.ctl("wait", "sha256-" + "1" * 64, "--timeout", "1"
                     ).returncode == 4
    finally:
        d.stop()
        nsock.close()
