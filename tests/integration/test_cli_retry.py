"""p2pctl waits for a p2pd that is not up yet (the init container on a node
that just joined): `p2pctl prefetch URI --wait` started before p2pd exists
keeps retrying and succeeds once p2pd starts; `p2pctl wait` likewise; with
no p2pd the retries end at --retry-for with exit 3, and --retry-for 0 fails
at once. The release is published with `p2pctl publish --chunk-size 1Mi`
(a Kubernetes size) to radosgw, and p2pd joins a real tracker with
--zone-file and --node-id, so the tracker's API shows the zone read from
the file.
"""
import json
import os
import subprocess
import time

from conftest import BUILD
from ws import P2pd, Tracker, free_port, write_cluster_key

P2PCTL = os.path.join(BUILD, "tools", "p2pctl")


def publish(s3env, rgw, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_bytes(b'{"retry": true}\n')
    (src / "model.bin").write_bytes(os.urandom(3 * (1 << 20) + 17))
    bucket = rgw.bucket()
    r = subprocess.run([P2PCTL, "publish", str(src), f"s3://{bucket}/retry/m/",
                        "--json", "--chunk-size", "1Mi"], capture_output=True,
                       text=True, env=s3env, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    return out["digest"], f"s3://{bucket}/retry/m/{out['digest']}/"


def ctl(sock, *args, env, **kw):
    return subprocess.Popen([P2PCTL, "--api", sock, *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def test_prefetch_waits_for_p2pd(rgw, s3env, tmp_path):
    digest, uri = publish(s3env, rgw, tmp_path)
    key = write_cluster_key(str(tmp_path / "key"))
    tracker = Tracker(BUILD, str(tmp_path), key).start()
    zone = tmp_path / "zone"
    zone.write_text("  eu-west-1b \n")
    d = P2pd(BUILD, str(tmp_path), s3env, name="late",
             extra=["--listen", f"127.0.0.1:{free_port()}",
                    "--tracker", f"127.0.0.1:{tracker.port}",
                    "--cluster-key", key, "--zone-file", str(zone),
                    "--node-id", "node-late"])
    # Started before p2pd's socket exists.
    pre = ctl(d.sock, "prefetch", uri, "--wait", "--timeout", "2m",
              "--retry-for", "60s", env=s3env)
    wait = None
    try:
        time.sleep(2.0)
        assert pre.poll() is None, pre.communicate()
        d.start()
        out, err = pre.communicate(timeout=120)
        assert pre.returncode == 0, err
        assert "retrying" in err, err
        path = out.strip().splitlines()[-1]
        assert os.path.isdir(path) and path.endswith(digest), out
        assert open(os.path.join(path, "config.json"), "rb").read() == \
            b'{"retry": true}\n'
        # The zone came from the file (trimmed), the node id from the flag.
        st, sw = tracker.get(f"/api/v1/swarms/{digest}")
        assert st == 200, sw
        members = {m["node_id"]: m for m in sw["peers"]}
        assert members["node-late"]["zone"] == "eu-west-1b", members
        # p2pd restarts: `wait` started while it is down gets the release.
        assert d.stop() == 0
        wait = ctl(d.sock, "wait", digest, "--retry-for", "60s", env=s3env)
        time.sleep(1.5)
        assert wait.poll() is None, wait.communicate()
        d.start()
        wout, werr = wait.communicate(timeout=60)
        assert wait.returncode == 0 and wout.strip() == path, werr
    finally:
        for p in (pre, wait):
            if p is not None and p.poll() is None:
                p.kill()
        d.stop()
        tracker.stop()


def test_retry_deadline_without_p2pd(s3env, tmp_path):
    sock = str(tmp_path / "nobody.sock")
    uri = "s3://bucket/m/sha256-" + "1" * 64 + "/"
    t0 = time.monotonic()
    r = ctl(sock, "prefetch", uri, "--retry-for", "2s", env=s3env)
    _, err = r.communicate(timeout=30)
    took = time.monotonic() - t0
    assert r.returncode == 3, err
    assert 1.5 <= took < 10, took
    assert "retrying" in err and "gave up" in err, err
    # P2PCTL_RETRY_FOR=0: fails at once, no retry line
    t0 = time.monotonic()
    r = ctl(sock, "wait", "sha256-" + "1" * 64, "--timeout", "30",
            env=dict(s3env, P2PCTL_RETRY_FOR="0"))
    _, err = r.communicate(timeout=30)
    assert r.returncode == 3 and time.monotonic() - t0 < 1.5, err
