"""Many releases on one node (issue 16): a tracker caps the releases one
node may join (--max-releases-per-node, default 64); p2pd announces what
fits, releases being fetched first, gives up announcing its oldest seeds
to make room, and fetches a release the tracker still refuses from S3.
Every release ends ready, also after a restart of p2pd on the same cache
(when it re-announces everything it holds as seeds).

Before the fix the tracker took 16 releases per node: the 17th stayed at
0 bytes for ever (the tracker answered WS_ELIMIT every 5 s and, being up,
was never bypassed), and after a restart the 16 seeds filled the slots
again."""
import time

from conftest import BUILD
import ws

KiB = 1 << 10


def publish_many(env, tmp_path, bucket, n, tag):
    """n small distinct releases (two shards of ~150 KiB), published."""
    out = []
    for i in range(n):
        d = ws.make_release(str(tmp_path / f"{tag}{i}"), shard_bytes=150 * KiB,
                            nshards=2, seed=f"{tag}-{i}")
        out.append(ws.publish(BUILD, env, d, f"s3://{bucket}/many/{tag}{i}/",
                              timeout=120))
    return out


def prefetch_all(p, pubs):
    for pub in pubs:
        r = p.ctl("prefetch", pub["uri"])
        assert r.returncode == 0, r.stdout + r.stderr + p.tail()


def wait_all_ready(p, pubs, timeout):
    deadline = time.time() + timeout
    left = [x["digest"] for x in pubs]
    while left and time.time() < deadline:
        for d in list(left):
            r = ws.release_state(p, d)
            if r and r["state"] == "ready":
                left.remove(d)
            elif r and r["state"] == "failed":
                raise AssertionError(f"{d}: failed: {r.get('error')}")
        time.sleep(0.2)
    assert not left, "not ready in %ds: %s\n%s" % (
        timeout, [(d[:16], (ws.release_state(p, d) or {}).get("state"),
                   (ws.release_state(p, d) or {}).get("bytes_done"))
                  for d in left], p.tail(3000))


def run(rgw, s3env, tmp_path, n_first, n_after, extra):
    bucket = rgw.bucket()
    first = publish_many(s3env, tmp_path, bucket, n_first, "a")
    after = publish_many(s3env, tmp_path, bucket, n_after, "b")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key, extra).start()
    p = ws.swarm_peer(BUILD, str(tmp_path), s3env, "p", trk, key).start()
    try:
        prefetch_all(p, first)
        wait_all_ready(p, first, timeout=60)
        # Restart on the same cache: every release comes back as a seed.
        p.stop()
        p.start()
        prefetch_all(p, after)
        wait_all_ready(p, after, timeout=60)
        for x in first + after:
            assert ws.release_state(p, x["digest"])["state"] == "ready"
    finally:
        p.stop()
        trk.stop()


def test_twenty_releases_one_node_default_tracker(rgw, s3env, tmp_path):
    run(rgw, s3env, tmp_path, 20, 3, ())


def test_more_releases_than_the_tracker_takes(rgw, s3env, tmp_path):
    run(rgw, s3env, tmp_path, 7, 2, ("--max-releases-per-node", "4"))
