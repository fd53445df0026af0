"""Disk errors are the node's own: ENOSPC or EIO while a release is being
written fails that release with WS_ENOSPC / WS_EIO and a message naming
the file, whatever the source of the bytes (S3 or a neighbour). The daemon
stays up, nothing of the release is published, its space is given back,
and a release that fits still completes on the same node.

Before this, a write error on a chunk from a neighbour was taken for the
neighbour's fault: the chunk went back to be fetched again, for ever, and
the release never ended.

- ENOSPC for real: the cache on a small tmpfs (mounted here, as root),
  once from S3 only and once from a neighbour (a seed on the normal disk,
  a tracker).
- EIO (and ENOSPC in the middle of a fetch): the fault build's
  --test-write-fault CODE:N makes chunk writes fail from the Nth on.
"""
import os
import subprocess
import time

import pytest

from conftest import BUILD, ROOT
import ws

MiB = 1 << 20
FAULT_BUILD = os.environ.get("WS_FAULT_BUILD_ROOT") or os.path.join(ROOT, "build-fault")
BOUND_S = 60  # a disk error ends the release within this (generous: shared CPUs)


def publish(env, src, uri):
    return ws.publish(BUILD, env, src, uri, MiB)


@pytest.fixture(scope="module")
def rels(rgw, tmp_path_factory):
    """A big release (16 MiB of shards) and a small one (2 MiB)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(rgw.env)
    bucket = rgw.bucket()
    d = tmp_path_factory.mktemp("diskrels")
    out = {}
    for name, shard, n in (("big", 8 * MiB, 2), ("small", 1 * MiB, 2)):
        src = ws.make_release(str(d / name), shard_bytes=shard, nshards=n,
                              seed=f"disk-{name}")
        out[name] = (src, publish(env, src, f"s3://{bucket}/m/disk-{name}/"))
    return out


@pytest.fixture
def small_fs(tmp_path):
    """A 10 MiB tmpfs: too small for the big release, room for the small."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=10m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fs_used(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def wait_end(p, digest, bound=BOUND_S):
    """The release's final state, or an AssertionError after bound seconds
    (it never ended: the bug)."""
    t0 = time.time()
    r = None
    while time.time() - t0 < bound:
        r = ws.release_state(p, digest)
        if r and r["state"] in ("ready", "failed"):
            return r
        time.sleep(0.2)
    raise AssertionError(f"release did not end within {bound} s: {r}\n{p.tail()}")


def prefetch_end(p, pub):
    """Prefetches pub on p and returns the release's final state. A
    failure found while reserving space comes back at once (507)."""
    st, body = p.api("POST", "/api/v1/prefetch", {"uri": pub["uri"]})
    assert st in (200, 507), (st, body)
    if st == 507:
        assert body["error"]["code"] == "WS_ENOSPC", body
    return wait_end(p, pub["digest"])


def assert_failed_cleanly(p, digest, code, r):
    assert r["state"] == "failed", (r, p.tail())
    assert r["error"]["code"] == code, (r["error"], p.tail())
    # The message says which file (the big release's files are all listed).
    assert any(n in r["error"]["message"] for n in
               ("safetensors", ".json", "cache space")), r["error"]
    st, _ = p.api("GET", "/healthz")
    assert st == 200
    assert p.proc.poll() is None, p.tail()
    assert not os.path.exists(os.path.join(p.cache, "releases", digest))


def assert_space_back(p, mnt, limit=MiB):
    """Partials and blobs of the failed release are gone (the tmpfs holds
    only the daemon's own small files)."""
    t0 = time.time()
    while time.time() - t0 < 20 and fs_used(mnt) > limit:
        time.sleep(0.2)
    assert fs_used(mnt) <= limit, (fs_used(mnt), os.listdir(os.path.join(p.cache, "partial")))


def test_enospc_from_s3(rgw, s3env, rels, small_fs, tmp_path):
    src_big, big = rels["big"]
    src_small, small = rels["small"]
    p = ws.P2pd(BUILD, str(tmp_path), s3env)
    p.cache = os.path.join(small_fs, "cache")
    p.start()
    try:
        r = prefetch_end(p, big)
        assert_failed_cleanly(p, big["digest"], "WS_ENOSPC", r)
        assert_space_back(p, small_fs)
        r = p.ctl("prefetch", small["uri"], "--wait", timeout=120)
        assert r.returncode == 0, r.stderr + p.tail()
        ok, bad = ws.tree_equal(src_small, os.path.join(p.cache, "releases", small["digest"]))
        assert ok, bad
    finally:
        p.stop()


@pytest.fixture
def swarm(tmp_path, s3env):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    made = []

    def peer(name, extra=(), build=None, cache=None):
        p = ws.swarm_peer(BUILD, str(tmp_path), s3env, name, trk, key, extra=extra,
                          binary_build=build)
        if cache is not None:
            p.cache = cache
        made.append(p)
        return p.start()

    yield trk, peer
    for p in made:
        p.stop()
    trk.stop()


def seed_with(peer, *pubs):
    seed = peer("seed")
    for pub in pubs:
        r = seed.ctl("prefetch", pub["uri"], "--wait", timeout=120)
        assert r.returncode == 0, r.stderr + seed.tail()
    return seed


def test_enospc_from_neighbour(rels, small_fs, swarm):
    trk, peer = swarm
    src_small, small = rels["small"]
    _, big = rels["big"]
    seed_with(peer, big, small)
    p = peer("tight", cache=os.path.join(small_fs, "cache"))
    trk.prefetch(digest=big["digest"])
    t0 = time.time()
    while ws.release_state(p, big["digest"]) is None and time.time() - t0 < 30:
        time.sleep(0.2)
    r = wait_end(p, big["digest"])
    assert_failed_cleanly(p, big["digest"], "WS_ENOSPC", r)
    assert_space_back(p, small_fs)
    trk.prefetch(digest=small["digest"])
    ws.wait_ready([p], small["digest"], timeout=120)
    r = ws.release_state(p, small["digest"])
    assert r["bytes_from_peers"] > 0, r
    ok, bad = ws.tree_equal(src_small, os.path.join(p.cache, "releases", small["digest"]))
    assert ok, bad


def fault_build():
    path = os.path.join(FAULT_BUILD, "peer", "p2pd")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{FAULT_BUILD} missing: tools/test builds it with -Dfault_inject=true")
    return FAULT_BUILD


def partials(p):
    d = os.path.join(p.cache, "partial")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_eio_from_s3(rgw, s3env, rels, tmp_path):
    _, big = rels["big"]
    p = ws.P2pd(fault_build(), str(tmp_path), s3env,
                extra=["--test-write-fault", "eio:3"]).start()
    try:
        r = prefetch_end(p, big)
        assert_failed_cleanly(p, big["digest"], "WS_EIO", r)
        assert "writing chunk" in r["error"]["message"], r["error"]
    finally:
        p.stop()


@pytest.mark.parametrize("code,name", [("eio", "WS_EIO"), ("enospc", "WS_ENOSPC")])
def test_write_error_from_neighbour(rels, swarm, code, name):
    """Every chunk comes from the seed; the third chunk write fails on our
    disk. The release fails with the disk's error (it used to send the
    chunk round the neighbours for ever), and the partials it made are
    removed."""
    trk, peer = swarm
    _, big = rels["big"]
    seed = seed_with(peer, big)
    p = peer("faulty", extra=["--test-write-fault", f"{code}:3"], build=fault_build())
    trk.prefetch(digest=big["digest"])
    t0 = time.time()
    while ws.release_state(p, big["digest"]) is None and time.time() - t0 < 30:
        time.sleep(0.2)
    r = wait_end(p, big["digest"])
    assert_failed_cleanly(p, big["digest"], name, r)
    assert "writing chunk" in r["error"]["message"], r["error"]
    # Nothing was blamed on the seed, and the space is given back.
    assert p.metric("weightswarm_p2pd_peers_banned_total") == 0
    t0 = time.time()
    while partials(p) and time.time() - t0 < 20:
        time.sleep(0.2)
    assert partials(p) == [], partials(p)
    assert seed.proc.poll() is None
