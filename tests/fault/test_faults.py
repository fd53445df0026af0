"""Fault suite: the swarm keeps going when a peer dies, when the tracker
restarts, when a peer serves corrupt data, when an outsider without the
cluster key connects, and when a peer accepts connections but never answers.
"""
import json
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import BUILD, ROOT, binary
import ws
import wsproto

MiB = 1 << 20
FAULT_BUILD = os.environ.get("WS_FAULT_BUILD_ROOT") or os.path.join(ROOT, "build-fault")


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    d = tmp_path_factory.mktemp("faultrel") / "model"
    ws.make_release(str(d), shard_bytes=24 * MiB, nshards=4, seed="faults")
    return str(d)


@pytest.fixture(scope="module")
def pub(rgw, rel):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(rgw.env)
    r = subprocess.run([binary("tools/p2pctl"), "publish", rel, f"s3://{rgw.bucket()}/m/faults/",
                        "--json", "--chunk-size", str(1 * MiB)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture
def swarm(tmp_path, s3env):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    made = []

    def peer(name, extra=(), build=None):
        p = ws.swarm_peer(BUILD, str(tmp_path), s3env, name, trk, key, extra=extra,
                          binary_build=build).start()
        made.append(p)
        return p

    yield trk, key, peer
    for p in made:
        p.stop()
    trk.stop()


def check(p, digest, src):
    ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", digest))
    assert ok, f"{p.dir}: {bad} differs"


def progress(p, digest):
    r = ws.release_state(p, digest)
    return r["bytes_done"] if r else 0


def test_peer_killed_mid_run_does_not_stop_the_others(swarm, pub, rel):
    trk, key, peer = swarm
    peers = [peer(f"p{i}", extra=["--download-rate", str(20 * MiB)]) for i in range(4)]
    trk.prefetch(uri=pub["uri"])
    while max(progress(p, pub["digest"]) for p in peers) < 20 * MiB:
        time.sleep(0.05)
    peers[0].kill9()
    ws.wait_ready(peers[1:], pub["digest"], timeout=300)
    for p in peers[1:]:
        check(p, pub["digest"], rel)


def test_tracker_killed_and_restarted_mid_run(swarm, pub, rel):
    trk, key, peer = swarm
    peers = [peer(f"p{i}", extra=["--download-rate", str(20 * MiB)]) for i in range(4)]
    trk.prefetch(uri=pub["uri"])
    while max(progress(p, pub["digest"]) for p in peers) < 20 * MiB:
        time.sleep(0.05)
    trk.stop(sig=9)
    time.sleep(2)
    trk.start()
    ws.wait_ready(peers, pub["digest"], timeout=300)
    for p in peers:
        check(p, pub["digest"], rel)


def test_corrupt_peer_is_banned_and_nothing_corrupt_is_cached(swarm, pub, rel, tmp_path):
    if not os.access(os.path.join(FAULT_BUILD, "peer", "p2pd"), os.X_OK):
        pytest.fail(f"{FAULT_BUILD} missing: tools/test builds it with -Dfault_inject=true")
    trk, key, peer = swarm
    good = peer("good-seed")
    bad = peer("bad-seed", extra=["--test-corrupt-serve"], build=FAULT_BUILD)
    for s in (good, bad):
        r = s.ctl("prefetch", pub["uri"], "--wait")
        assert r.returncode == 0, r.stderr + s.tail()
    leechers = [peer(f"l{i}") for i in range(3)]
    trk.prefetch(digest=pub["digest"])
    ws.wait_ready(leechers, pub["digest"], timeout=300)
    for p in leechers:
        check(p, pub["digest"], rel)
    banned = sum(p.metric("weightswarm_p2pd_peers_banned_total") for p in leechers)
    failed = sum(p.metric("weightswarm_p2pd_chunks_failed_total") for p in leechers)
    assert banned >= 1 and failed >= 1, (banned, failed)
    # The bad seed's own cache is fine: it corrupts only what it sends.
    check(bad, pub["digest"], rel)


def test_client_without_cluster_key_gets_nothing(swarm, pub, rel):
    trk, key, peer = swarm
    seed = peer("seed")
    r = seed.ctl("prefetch", pub["uri"], "--wait")
    assert r.returncode == 0, r.stderr
    port = ws.listen_port(seed)
    digest = bytes.fromhex(pub["digest"][7:])
    wrong = os.urandom(32)
    for target in (port, trk.port):
        c = wsproto.Conn("127.0.0.1", target, wrong)
        assert c.handshake() is False
        # Try anyway: requests and a manifest request, unauthenticated.
        try:
            for j in range(4):
                c.send(wsproto.T["REQUEST"], {"d": digest, "c": j, "id": j})
            c.send(wsproto.T["MANIFEST_REQ"], {"d": digest})
            c.send(wsproto.T["ANNOUNCE"], {"d": digest, "tot": 0, "role": 0, "want": True})
            while True:
                t, body, payload = c.read_frame()
                assert t not in (wsproto.T["CHUNK"], wsproto.T["MANIFEST"],
                                 wsproto.T["ANNOUNCE_REPLY"], wsproto.T["BITFIELD"],
                                 wsproto.T["HAVE"]), wsproto.NAMES.get(t)
        except (wsproto.Closed, ConnectionError, socket.timeout):
            pass
        assert c.payload_bytes == 0
        c.close()
    # With the right key the same client is served: the test can fail.
    c = wsproto.Conn("127.0.0.1", port, wsproto.read_key(key))
    assert c.handshake() is True
    c.close()


def test_silent_peer_does_not_stall_anyone(swarm, pub, rel):
    trk, key, peer = swarm
    # A listener that accepts and never writes a byte.
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    held = []

    def accept():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            held.append(c)

    threading.Thread(target=accept, daemon=True).start()
    # It joins the tracker properly (it has the key) and claims to hold
    # every chunk, so the tracker hands it out as the best source.
    c = wsproto.Conn("127.0.0.1", trk.port, wsproto.read_key(key), node_id="silent",
                     listen_port=ls.getsockname()[1])
    assert c.handshake() is True
    digest = bytes.fromhex(pub["digest"][7:])
    seed = peer("seed")
    r = seed.ctl("prefetch", pub["uri"], "--wait")
    assert r.returncode == 0, r.stderr
    tot = ws.release_state(seed, pub["digest"])["chunks_total"]
    c.send(wsproto.T["ANNOUNCE"], {"d": digest, "tot": tot, "ev": 1, "role": 1, "want": False,
                                   "port": ls.getsockname()[1],
                                   "have": bytes([0xFF]) * (tot // 8) +
                                   (bytes([(0xFF << (8 - tot % 8)) & 0xFF]) if tot % 8 else b"")})
    t, reply, _ = c.read_frame()
    assert t == wsproto.T["ANNOUNCE_REPLY"]
    leechers = [peer(f"l{i}") for i in range(3)]
    t0 = time.time()
    trk.prefetch(digest=pub["digest"])
    ws.wait_ready(leechers, pub["digest"], timeout=180)
    print(f"3 leechers done in {time.time() - t0:.1f}s with a silent peer in the swarm "
          f"({len(held)} connections to it)")
    for p in leechers:
        check(p, pub["digest"], rel)
    c.close()
    ls.close()
