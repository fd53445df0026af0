"""The acceptance checks a platform team runs before adopting a weight
cache, against a real radosgw, real trackers and real p2pd processes:

- replicas started one after another: replicas 2 and 3 become ready much
  faster than replica 1, because they fetch from peers while replica 1 had
  to read S3 (which sits behind the slowing proxy of tests/lib, so S3 is
  the slow path, as it is from a GPU cluster to a remote region);
- four releases claimed at once on one node whose capacity fits all four
  cause no eviction, and all four end ready and byte-identical;
- a release whose S3 object was altered after publishing never becomes
  ready: it ends failed with a digest error and nothing of it appears under
  releases/ (a node refuses to report ready on a digest mismatch).

S3 bytes are counted by radosgw's usage log (rgw.bytes_sent), not by p2pd.
"""
import hashlib
import json
import os
import re
import subprocess
import threading
import time

from conftest import BUILD, binary
from flipproxy import FlipProxy
import trkclient
import ws

MiB = 1 << 20


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def publish(env, src, uri, chunk=MiB):
    r = subprocess.run([binary("tools/p2pctl"), "publish", src, uri, "--json",
                        "--chunk-size", str(chunk)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["digest"].startswith("sha256-"), out
    return out


def check(p, digest, src):
    path = os.path.join(p.cache, "releases", digest)
    ok, bad = ws.tree_equal(src, path)
    assert ok, f"{p.dir}: {bad} differs"
    for n in os.listdir(path):
        if n.endswith(".safetensors"):
            ws.read_safetensors(os.path.join(path, n))


# --- (a) replicas 2 and 3 are ready faster than replica 1 -------------------

RATE = 3 * MiB // 2  # bytes/s per S3 connection through the proxy


def test_replicas_two_and_three_ready_faster_than_first(rgw, s3env, tmp_path):
    """A Deployment scaled to three on three nodes, one pod after another
    (each init container runs `p2pctl prefetch URI --wait` once its node's
    p2pd is up, the next pod starts when the previous one is ready). S3 is
    limited to RATE bytes/s per connection and 2 connections per node, so
    replica 1 needs several seconds; replicas 2 and 3 must take under half
    of replica 1's time, get at least 90 % of the bytes from peers, and S3
    must send the release about once in all."""
    src = ws.make_release(str(tmp_path / "model"), shard_bytes=8 * MiB, nshards=2,
                          seed="accept-replicas")
    F = dir_bytes(src)
    pub = publish(s3env, src, f"s3://{rgw.bucket()}/m/replicas/")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = FlipProxy(host, int(port), flip_at=None, rate=RATE)
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    peers, took = [], []
    try:
        before = rgw.bytes_sent()
        for i in range(3):
            p = ws.swarm_peer(BUILD, str(tmp_path), env, f"r{i + 1}", trk, key,
                              extra=["--s3-concurrency", "2"]).start()
            peers.append(p)
            t0 = time.time()
            r = p.ctl("prefetch", pub["uri"], "--wait", "--timeout", "120", timeout=150)
            took.append(time.time() - t0)
            assert r.returncode == 0, r.stderr + p.tail()
            check(p, pub["digest"], src)
        sent = rgw.bytes_sent() - before
        states = [ws.release_state(p, pub["digest"]) for p in peers]
        print(f"replicas ready after {[round(t, 2) for t in took]} s; S3 sent {sent} "
              f"({sent / F:.3f} x F); from peers {[s['bytes_from_peers'] for s in states]}")
        assert all(s["state"] == "ready" for s in states), states
        # Replica 1 read S3 (the slow path): at least ~F / (2 x RATE) seconds.
        assert took[0] >= F / (2 * RATE) * 0.8, took
        assert states[0]["bytes_from_s3"] >= 0.9 * F, states[0]
        for i in (1, 2):
            assert took[i] < 0.5 * took[0], took
            assert states[i]["bytes_from_peers"] >= 0.9 * F, states[i]
        assert sent <= 1.05 * F + MiB, (sent, F)
    finally:
        for p in peers:
            p.stop()
        trk.stop()
        proxy.close()


# --- (b) four releases at once, capacity fits all: no eviction --------------

def test_four_releases_at_once_no_eviction(rgw, s3env, tmp_path):
    """Four releases of four models are prefetched at the same moment (four
    concurrent API requests) on one node whose --capacity is the four
    releases' distinct file bytes plus 1 MiB for manifests and bitmaps.
    Nothing may be evicted: the eviction counter stays 0, no eviction is
    logged, all four end ready and byte-identical, every release directory
    survives.

    The releases share two files (tokenizer.json and the index are equal).
    This used to fail: one release's begin reserved a shared file in the
    ledger before creating its partial, a second release (seeing it
    reserved) opened it at the same time, both created it and one lost the
    bitmap's rename: "opening partial (ENOENT)" and a failed release. The
    store now opens and creates partials one at a time (open_mu)."""
    bucket = rgw.bucket()
    rels = []
    for i in range(4):
        src = ws.make_release(str(tmp_path / f"model{i}"), shard_bytes=6 * MiB, nshards=2,
                              seed=f"accept-four-{i}")
        pub = publish(s3env, src, f"s3://{bucket}/m/four{i}/")
        rels.append((src, pub))
    # Files with equal content (tokenizer.json here) are stored once.
    uniq = {}
    for src, _ in rels:
        for r, _, fs in os.walk(src):
            for f in fs:
                with open(os.path.join(r, f), "rb") as fh:
                    uniq[hashlib.sha256(fh.read()).hexdigest()] = os.path.getsize(fh.name)
    total = sum(uniq.values())
    cap = total + MiB
    p = ws.P2pd(BUILD, str(tmp_path), s3env, extra=["--capacity", str(cap)]).start()
    try:
        results = [None] * 4

        def claim(i):
            st, body = p.api("POST", "/api/v1/prefetch", {"uri": rels[i][1]["uri"]})
            if st != 200:
                results[i] = (st, body)
                return
            results[i] = p.api("GET", f"/api/v1/releases/{body['digest']}/wait"
                               "?timeout_ms=120000", timeout=150)

        ths = [threading.Thread(target=claim, args=(i,)) for i in range(4)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(150)
        for i, (st, body) in enumerate(results):
            assert st == 200, (i, st, body, p.tail())
        for src, pub in rels:
            r = ws.release_state(p, pub["digest"])
            assert r["state"] == "ready", r
            check(p, pub["digest"], src)
        assert p.metric("weightswarm_p2pd_cache_evicted_bytes_total") == 0, p.tail()
        used = p.metric("weightswarm_p2pd_cache_used_bytes")
        assert total <= used <= cap, (total, used, cap)
        listed = sorted(n for n in os.listdir(os.path.join(p.cache, "releases"))
                        if n.startswith("sha256-"))
        assert listed == sorted(pub["digest"] for _, pub in rels), listed
        assert "evict" not in p.tail(1 << 20).lower(), p.tail()
    finally:
        p.stop()


def test_failed_file_with_a_long_name_says_its_error_was_cut(rgw, s3env, tmp_path):
    """A release fetched in swarm mode whose file (name of 238 bytes) fails
    its hash: the release's error names the file first and, cut at 256
    bytes, ends with "..." (before, it stopped mid-word, unannounced).
    The tracker hears it too: with another member keeping the swarm (a
    protocol client), the failed node's row stays on the dashboard as
    "left", with the error its stop announce carried, and the tracker logs
    it and counts it (weightswarm_tracker_nodes_failed_total) (before, the release
    was out of p2pd's swarm before that announce was built, and the
    tracker dropped a leaving node's report). Once the other member has
    left too, the release stays listed, ended, with that row."""
    src = tmp_path / "long"
    src.mkdir()
    name = "w" * 234 + ".bin"
    (src / name).write_bytes(os.urandom(2 * MiB))
    bucket = rgw.bucket()
    pub = publish(s3env, str(src), f"s3://{bucket}/m/longname/")
    c = rgw.client()
    key = pub["uri"].split(bucket + "/", 1)[1] + name
    body = bytearray(c.get_object(Bucket=bucket, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0x01
    c.put_object(Bucket=bucket, Key=key, Body=bytes(body))
    ckey = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), ckey).start()
    with open(ckey) as f:
        key = bytes.fromhex(f.read().strip())
    digest = bytes.fromhex(pub["digest"][len("sha256-"):])
    other = trkclient.Peer(trk.port, "other", key, digest, listen_port=ws.free_port())
    other.announce(tot=2, want=False)  # 2 MiB in 1 MiB chunks
    p = ws.swarm_peer(BUILD, str(tmp_path), s3env, "long", trk, ckey).start()
    try:
        r = p.ctl("prefetch", pub["uri"], "--wait", "--timeout", "60", timeout=90)
        assert r.returncode != 0, r.stdout + p.tail()
        rel = ws.release_state(p, pub["digest"])
        assert rel["state"] == "failed", rel
        err = rel["error"]["message"]
        assert err.startswith(name + ": chunk "), err
        assert len(err.encode()) == 255 and err.endswith("..."), err
        deadline = time.time() + 10
        while True:
            st, sw = trk.get(f"/api/v1/swarms/{pub['digest']}")
            left = [n for n in sw.get("nodes", []) if n["state"] == "left"] \
                if st == 200 else []
            if left or time.time() > deadline:
                break
            time.sleep(0.2)
        assert len(left) == 1, (st, sw)
        assert left[0]["last_error"].startswith("file " + name + ": chunk "), left
        st, text = trk.get("/metrics")
        assert st == 200 and re.search(
            r"^weightswarm_tracker_nodes_failed_total 1$", text, re.M), text
        with open(trk.log, errors="replace") as f:
            assert f"left {pub['digest']}: file {name}" in f.read()
        # The other member gone too, the release stays listed, ended, with
        # the failed node's row (before, it went with its last member).
        other.close()
        deadline = time.time() + 10
        while True:
            st, sw = trk.get(f"/api/v1/swarms/{pub['digest']}")
            if (st == 200 and "ended_s" in sw) or time.time() > deadline:
                break
            time.sleep(0.2)
        assert st == 200 and "ended_s" in sw and sw["members"] == 0, (st, sw)
        left = [n for n in sw["nodes"] if n["last_error"]]
        assert len(left) == 1 and left[0]["state"] == "left", sw
        assert left[0]["last_error"].startswith("file " + name + ": chunk "), left
        st, text = trk.get("/metrics")
        assert st == 200 and re.search(
            r"^weightswarm_tracker_swarms_ended 1$", text, re.M), text
    finally:
        other.close()
        p.stop()
        trk.stop()


# --- (c) a tampered S3 object never becomes ready ---------------------------

def test_tampered_object_fails_never_ready(rgw, s3env, tmp_path):
    """After publishing, one byte of a shard in S3 is changed (same size, so
    only the hash can tell). p2pd fetches it, every try of that chunk fails
    its hash, and the release must end failed with a digest error: never
    ready, `p2pctl prefetch --wait` exits non-zero, and nothing of it is
    published under releases/ (no directory, no blob of the bad file)."""
    src = ws.make_release(str(tmp_path / "model"), shard_bytes=3 * MiB, nshards=2,
                          seed="accept-tamper")
    bucket = rgw.bucket()
    pub = publish(s3env, src, f"s3://{bucket}/m/tamper/")
    c = rgw.client()
    prefix = pub["uri"].split(bucket + "/", 1)[1]
    name = "model-00002-of-00002.safetensors"
    body = bytearray(c.get_object(Bucket=bucket, Key=prefix + name)["Body"].read())
    body[len(body) // 2] ^= 0x01
    c.put_object(Bucket=bucket, Key=prefix + name, Body=bytes(body))
    p = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        seen = []
        stop = threading.Event()

        def watch():  # every state the API reports while it runs
            while not stop.is_set():
                r = ws.release_state(p, pub["digest"])
                if r:
                    seen.append(r["state"])
                time.sleep(0.02)

        th = threading.Thread(target=watch)
        th.start()
        t0 = time.time()
        r = p.ctl("prefetch", pub["uri"], "--wait", "--timeout", "60", timeout=90)
        stop.set()
        th.join()
        took = time.time() - t0
        print(f"tampered release refused after {took:.2f}s; states seen {sorted(set(seen))}")
        assert r.returncode != 0, r.stdout + p.tail()
        rel = ws.release_state(p, pub["digest"])
        assert rel["state"] == "failed", rel
        assert "ready" not in seen, seen
        err = json.dumps(rel.get("error"))
        assert "WS_EDIGEST" in err or "hash" in err or "digest" in err, rel
        assert "hash" in r.stderr or "digest" in r.stderr.lower(), r.stderr
        assert not os.path.exists(os.path.join(p.cache, "releases", pub["digest"]))
        assert not any(n.startswith("sha256-")
                       for n in os.listdir(os.path.join(p.cache, "releases")))
        # The good file may be a blob; the tampered one never is.
        m = json.loads(c.get_object(Bucket=bucket, Key=prefix + "manifest.json")["Body"].read())
        bad = next(f["sha256"] for f in m["files"] if f["name"] == name)
        assert not os.path.exists(os.path.join(p.cache, "blobs", "sha256", bad[:2], bad))
        # Asked again, it fails again rather than trusting anything.
        r2 = p.ctl("wait", pub["digest"], "--timeout", "5", timeout=30)
        assert r2.returncode != 0, r2.stdout
        assert ws.release_state(p, pub["digest"])["state"] != "ready"
    finally:
        p.stop()
