"""Two trackers, and one of them killed mid-swarm: nothing a user sees
changes.

p2pd takes a list of trackers (--tracker A,B; the nodes here get it in
either order). A release belongs to the tracker with the highest
rendezvous weight, BLAKE2b-64(digest || "host:port") (peer/swarm/trackers.c;
computed here independently with hashlib), so every node announces it
there and that tracker alone grants its origin leases; every node keeps a
link to both trackers and takes the wanted set from either (the prefetch
is POSTed to the tracker that does NOT own the release). Mid-run, with
every node still fetching, the owner is killed with SIGKILL; after
PEER_TRACKERS_MOVE_MS the nodes move the release to the other tracker
(their full have-bitfields rebuild its state there), which leases the
rest. Every node must end with byte-identical files, and S3 must have sent
at most 1.05 x the release size, counted by radosgw's usage log as in
test_swarm.py.

S3 is the real radosgw behind the slowing proxy of tests/lib (RATE bytes/s
per connection), so the S3 side lasts several seconds and the kill lands
while chunks are still being leased.
"""
import hashlib
import json
import os
import subprocess
import time

from conftest import BUILD, binary
from flipproxy import FlipProxy
import ws

MiB = 1 << 20
RATE = 1024 * 1024  # bytes/s per S3 connection
SHARD = 20 * MiB  # two shards: ~40 MiB release in 1 MiB chunks


def weight(addr, digest_hex):
    """The rendezvous weight p2pd gives tracker addr for a release."""
    h = hashlib.blake2b(bytes.fromhex(digest_hex) + addr.encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def swarm(tracker, digest):
    st, body = tracker.get(f"/api/v1/swarms/{digest}")
    return body if st == 200 else None


def test_owner_tracker_killed_mid_swarm(rgw, s3env, tmp_path):
    src = ws.make_release(str(tmp_path / "model"), shard_bytes=SHARD, nshards=2,
                          seed="trackers2")
    F = dir_bytes(src)
    r = subprocess.run([binary("tools/p2pctl"), "publish", src,
                        f"s3://{rgw.bucket()}/m/trk/", "--json", "--chunk-size", str(MiB)],
                       env=s3env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    pub = json.loads(r.stdout.strip().splitlines()[-1])
    digest = pub["digest"]
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trks = []
    for name in ("ta", "tb"):
        os.makedirs(tmp_path / name)
        trks.append(ws.Tracker(BUILD, str(tmp_path / name), key).start())
    addrs = [f"127.0.0.1:{t.port}" for t in trks]
    w = [weight(a, digest.split("-", 1)[1]) for a in addrs]
    owner, other = (trks[0], trks[1]) if w[0] > w[1] else (trks[1], trks[0])
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = FlipProxy(host, int(port), flip_at=None, rate=RATE)
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    peers = []
    try:
        for i in range(4):
            lst = ",".join(addrs if i % 2 == 0 else addrs[::-1])
            peers.append(ws.P2pd(BUILD, str(tmp_path), env, name=f"p{i}", extra=[
                "--listen", f"127.0.0.1:{ws.free_port()}", "--tracker", lst,
                "--cluster-key", key]).start())
        before = rgw.bytes_sent()
        t0 = time.time()
        other.prefetch(uri=pub["uri"])  # the wanted set reaches every node
        # Mid-run: every node fetching and S3 well under way, none done.
        deadline = time.time() + 60
        while time.time() < deadline:
            states = [ws.release_state(p, digest) for p in peers]
            s3 = sum(s["bytes_from_s3"] for s in states if s)
            if all(s and s["state"] == "fetching" for s in states) and s3 >= 0.3 * F:
                break
            assert not any(s and s["state"] == "ready" for s in states), states
            time.sleep(0.05)
        else:
            raise AssertionError(f"never mid-run: {states}")
        # The release is on its rendezvous owner alone.
        sw = swarm(owner, digest)
        assert sw is not None and sw["members"] == 4, sw
        assert swarm(other, digest) is None
        owner.stop(sig=9)
        t_kill = time.time() - t0
        ws.wait_ready(peers, digest, timeout=120)
        took = time.time() - t0
        sent = rgw.bytes_sent() - before
        for p in peers:
            ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", digest))
            assert ok, f"{p.dir}: {bad} differs"
        s3_nodes = [ws.release_state(p, digest)["bytes_from_s3"] for p in peers]
        moved = swarm(other, digest)
        print(f"2 trackers, 4 peers, {F} bytes: owner killed at {t_kill:.1f}s "
              f"({s3 / F:.2f} x F from S3 by then), all ready at {took:.1f}s; "
              f"S3 sent {sent} ({sent / F:.3f} x F), per node {s3_nodes}")
        # The survivor took the release over: every node moved there.
        assert moved is not None and moved["members"] == 4, moved
        assert sent <= 1.05 * F, (sent, F)
        assert sum(s3_nodes) <= 1.05 * F, (s3_nodes, F)
        for p in peers:
            assert "now " + addrs[trks.index(other)] in p.tail(1 << 20), p.tail()
    finally:
        for p in peers:
            p.stop()
        for t in trks:
            t.stop()
        proxy.close()
