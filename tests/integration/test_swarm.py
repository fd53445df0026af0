"""The swarm against a real radosgw: six peers fetch one release together
from S3 at most ~once, and a release seeded from a warm node's directory
reaches other peers with zero bytes from S3.

S3 bytes are counted by radosgw's usage log, not by p2pd.
"""
import json
import os
import subprocess
import time

import pytest

from conftest import BUILD, binary
import ws

MiB = 1 << 20


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    d = tmp_path_factory.mktemp("swarmrel") / "model"
    ws.make_release(str(d), shard_bytes=48 * MiB, nshards=4, seed="swarm6")
    return str(d)


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def publish(env, src, uri):
    r = subprocess.run([binary("tools/p2pctl"), "publish", src, uri, "--json",
                        "--chunk-size", str(2 * MiB)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def check(p, digest, src):
    ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", digest))
    assert ok, f"{p.dir}: {bad} differs"


def test_six_peers_fetch_one_release_together(rgw, s3env, rel, tmp_path):
    F = dir_bytes(rel)
    pub = publish(s3env, rel, f"s3://{rgw.bucket()}/m/six/")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    peers = [ws.swarm_peer(BUILD, str(tmp_path), s3env, f"p{i}", trk, key).start()
             for i in range(6)]
    try:
        before = rgw.bytes_sent()
        t0 = time.time()
        st, r = trk.prefetch(uri=pub["uri"])
        assert st in (200, 201), r
        ws.wait_ready(peers, pub["digest"], timeout=600)
        took = time.time() - t0
        sent = rgw.bytes_sent() - before
        from_peers = []
        for p in peers:
            check(p, pub["digest"], rel)
            r = ws.release_state(p, pub["digest"])
            from_peers.append(r["bytes_from_peers"])
        print(f"6 peers, {F} bytes: {took:.1f}s, S3 sent {sent} ({sent / F:.3f} x F), "
              f"from peers {from_peers}")
        assert sent <= 1.05 * F, (sent, F)
        assert sum(from_peers) >= 4 * F  # most bytes moved peer to peer
    finally:
        for p in peers:
            p.stop()
        trk.stop()


def seed_manifest(rel, tmp_path, chunk, *extra):
    """Writes the manifest of directory rel (p2pctl manifest create) for
    p2pctl seed; returns its path and digest."""
    mpath = tmp_path / "manifest.json"
    r = subprocess.run([binary("tools/p2pctl"), "manifest", "create", rel,
                        "--chunk-size", str(chunk), *extra], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    mpath.write_bytes(r.stdout)
    d = subprocess.run([binary("tools/p2pctl"), "manifest", "digest", str(mpath)],
                       capture_output=True, text=True, check=True).stdout.strip()
    return mpath, d


def test_seeded_release_reaches_three_peers_with_zero_s3_bytes(rgw, s3env, rel, tmp_path):
    mpath, d = seed_manifest(rel, tmp_path, 2 * MiB, "--model", "seeded", "--version", "1")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    seed = ws.swarm_peer(BUILD, str(tmp_path), s3env, "seed", trk, key).start()
    peers = []
    try:
        before = rgw.bytes_sent()
        r = seed.ctl("seed", rel, "--manifest", str(mpath))
        assert r.returncode == 0, r.stderr + seed.tail()
        assert ws.release_state(seed, d)["state"] == "ready"
        check(seed, d, rel)
        peers = [ws.swarm_peer(BUILD, str(tmp_path), s3env, f"l{i}", trk, key).start()
                 for i in range(3)]
        st, body = trk.prefetch(digest=d)
        assert st in (200, 201), body
        ws.wait_ready(peers, d, timeout=300)
        for p in peers:
            check(p, d, rel)
            r = ws.release_state(p, d)
            assert r["bytes_from_s3"] == 0, r
        assert rgw.bytes_sent() - before == 0
    finally:
        for p in peers + [seed]:
            p.stop()
        trk.stop()


def test_seed_to_one_fetcher_keeps_its_connection(rgw, s3env, rel, tmp_path):
    """16 MiB chunks from one seed to one fetcher: the fetcher's buffer pool
    runs dry while chunks are being written and hashed. A CHUNK payload must
    then wait for a buffer (the neighbour pauses); it used to close the
    connection instead (WS_ELIMIT), and every request on it waited for the
    reconnect and the request timeout."""
    mpath, d = seed_manifest(rel, tmp_path, 16 * MiB)
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    seed = ws.swarm_peer(BUILD, str(tmp_path), s3env, "seed", trk, key).start()
    fetch = None
    try:
        r = seed.ctl("seed", rel, "--manifest", str(mpath))
        assert r.returncode == 0, r.stderr + seed.tail()
        fetch = ws.swarm_peer(BUILD, str(tmp_path), s3env, "fetch", trk, key).start()
        st, body = trk.prefetch(digest=d)
        assert st in (200, 201), body
        ws.wait_ready([fetch], d, timeout=300)
        check(fetch, d, rel)
        assert fetch.metric("ws_p2pd_peer_receive_errors_total") == 0, fetch.tail()
        assert fetch.metric("ws_p2pd_buffers_peak") > 0
    finally:
        for p in ([fetch] if fetch else []) + [seed]:
            p.stop()
        trk.stop()
