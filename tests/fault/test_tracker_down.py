"""Tracker down is not an origin storm (issue 16): nodes that learned each
other from the tracker while it was up share the S3 reads among themselves
once it is gone. Each chunk's S3 reader is chosen by rendezvous hashing over
the nodes fetching the release (peer/swarm/origin_share.h); the others get
it from that node. S3 bytes are counted by a proxy in front of radosgw.
"""
import os
import subprocess
import time

import pytest

from conftest import BUILD, binary, s3_environ
import ws
from flipproxy import FlipProxy

MiB = 1 << 20
F = 48 * MiB
NODES = 6


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    d = tmp_path_factory.mktemp("tdrel") / "model"
    ws.make_release(str(d), shard_bytes=12 * MiB, nshards=4, seed="trackerdown")
    return str(d)


@pytest.fixture(scope="module")
def pub(rgw, rel):
    return ws.publish(BUILD, s3_environ(rgw), rel,
                      f"s3://{rgw.bucket()}/m/trackerdown/", 1 * MiB)


@pytest.fixture
def cluster(tmp_path, rgw, s3env):
    """A tracker, an S3-counting proxy, and a maker of swarm peers that read
    S3 through the proxy."""
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = FlipProxy(host, int(port), flip_at=None)
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    made = []

    def peer(name):
        p = ws.swarm_peer(BUILD, str(tmp_path), env, name, trk, key).start()
        made.append(p)
        return p

    yield trk, proxy, peer
    for p in made:
        p.stop()
    trk.stop()
    proxy.close()


def prefetch_all(peers, uri):
    """p2pctl prefetch on every node at once (no --wait)."""
    procs = [subprocess.Popen([binary("tools/p2pctl"), "--api", p.sock, "prefetch", uri],
                              env=p.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
             for p in peers]
    for p, pr in zip(peers, procs):
        out, err = pr.communicate(timeout=60)
        assert pr.returncode == 0, f"{p.dir}: {err}\n{p.tail()}"


def check(p, digest, src):
    ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", digest))
    assert ok, f"{p.dir}: {bad} differs"


def test_six_nodes_tracker_down_share_s3(cluster, pub, rel):
    trk, proxy, peer = cluster
    peers = [peer(f"n{i}") for i in range(NODES)]
    # Each learns the others from the tracker's presence replies (every
    # announce interval, 5 s): the metric counts its address book. A build
    # without one (the code before the fix) gets two intervals instead.
    if "weightswarm_p2pd_nodes_known" in peers[0].api("GET", "/metrics")[1]:
        ws.wait_for(lambda: all(p.metric("weightswarm_p2pd_nodes_known") >= NODES - 1
                             for p in peers), 40, "every node knows the other five")
    else:
        time.sleep(11)
    trk.stop(sig=9)
    before = proxy.body_bytes
    t0 = time.time()
    prefetch_all(peers, pub["uri"])
    ws.wait_ready(peers, pub["digest"], timeout=120)
    took = time.time() - t0
    read = proxy.body_bytes - before
    for p in peers:
        check(p, pub["digest"], rel)
    print(f"tracker down, {NODES} nodes: S3 sent {read / F:.3f} x F; ready after {took:.1f} s")
    assert read <= 1.25 * F, (
        f"S3 sent {read / F:.2f} x the release ({read} bytes) to {NODES} nodes "
        f"with the tracker down; ready after {took:.1f} s")


def test_one_node_alone_tracker_down_finishes_from_s3(cluster, pub, rel):
    trk, proxy, peer = cluster
    p = peer("alone")
    trk.stop(sig=9)
    before = proxy.body_bytes
    prefetch_all([p], pub["uri"])
    ws.wait_ready([p], pub["digest"], timeout=120)
    check(p, pub["digest"], rel)
    read = proxy.body_bytes - before
    assert F <= read <= 1.25 * F, read
