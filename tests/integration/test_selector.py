"""Targeted prefetch: a selector on the tracker's POST /api/v1/prefetch
reaches exactly the nodes it selects, including one that joins later, and
no other node ever fetches.

Six real p2pd nodes report labels (--label, and P2P_LABELS for the late
joiner) and zones in HELLO to one real p2p-tracker; releases are published
to the real radosgw. Release A goes to {"labels": {"pool": "a100"},
"zones": ["a", "b"]}: nodes a100/a and a100/b now and a100/b joining after
the POST fetch it; a100/c, h100/a and the unlabelled node never do.
Release B goes to {"pool": "a100", "count": 2} (the label shorthand):
exactly two of the three a100 nodes connected at the POST (chosen by
rendezvous score), and the late a100 node not (the cap is reached). GET
/api/v1/prefetch and the dashboard's /api/v1/swarms name exactly those
targets, and `p2pctl targets` prints them.
"""
import json
import os
import subprocess
import time

from conftest import BUILD, binary
import ws

MiB = 1 << 20

NODES = [  # name, zone, labels (flags)
    ("a100-a", "a", ["--label", "pool=a100", "--label=gpu=8"]),
    ("a100-b", "b", ["--label", "pool=a100"]),
    ("a100-c", "c", ["--label", "pool=a100"]),
    ("h100-a", "a", ["--label", "pool=h100"]),
    ("plain-a", "a", []),
]


def publish(s3env, src, dest):
    r = subprocess.run([binary("tools/p2pctl"), "publish", src, dest, "--json",
                        "--chunk-size", str(MiB)],
                       env=s3env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def has_release(p, digest):
    return (ws.release_state(p, digest) is not None or
            os.path.exists(os.path.join(p.cache, "releases", digest)))


def targets(trk, digest):
    st, body = trk.get("/api/v1/prefetch")
    assert st == 200, body
    for w in body["wanted"]:
        if w["digest"] == digest:
            return w
    raise AssertionError(f"{digest} not wanted: {body}")


def test_selector_reaches_exactly_the_selected_nodes(rgw, s3env, tmp_path):
    t0 = time.time()
    a = publish(s3env, ws.make_release(str(tmp_path / "ma"), shard_bytes=MiB, nshards=2,
                                       seed="sel-a"), f"s3://{rgw.bucket()}/m/sel-a/")
    b = publish(s3env, ws.make_release(str(tmp_path / "mb"), shard_bytes=MiB, nshards=2,
                                       seed="sel-b"), f"s3://{rgw.bucket()}/m/sel-b/")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    os.makedirs(tmp_path / "trk")
    trk = ws.Tracker(BUILD, str(tmp_path / "trk"), key).start()
    nodes = {}
    try:
        for name, zone, flags in NODES:
            nodes[name] = ws.swarm_peer(BUILD, str(tmp_path), s3env, name, trk, key, extra=[
                "--node-id", name, "--zone", zone, *flags]).start()
        # Every node registered (HELLO carries labels and zone).
        deadline = time.time() + 20
        while trk.get("/api/v1/swarms")[1]["peers"] < len(NODES):
            assert time.time() < deadline, trk.get("/api/v1/swarms")
            time.sleep(0.05)

        # A bad selector is refused, and nothing becomes wanted.
        for bad in ({"zones": "a"}, {"labels": {"pool": "a b"}}, {"count": -1},
                    {"percent": 101}, {"labels": ["pool"]}, "a100"):
            st, body = trk.request("POST", "/api/v1/prefetch",
                                   {"uri": a["uri"], "selector": bad})
            assert st == 400, (bad, st, body)
        assert trk.get("/api/v1/prefetch")[1]["wanted"] == []

        trk.prefetch(uri=a["uri"], selector={"labels": {"pool": "a100"}, "zones": ["a", "b"]})
        trk.prefetch(uri=b["uri"], selector={"pool": "a100", "count": 2})
        da, db = a["digest"], b["digest"]
        ws.wait_ready([nodes["a100-a"], nodes["a100-b"]], da, timeout=60)

        # The late joiner: labels from P2P_LABELS, zone b.
        late_env = dict(s3env, P2P_LABELS="pool=a100,rack=r7")
        nodes["late-b"] = ws.swarm_peer(BUILD, str(tmp_path), late_env, "late-b", trk, key,
                                        extra=["--node-id", "late-b", "--zone", "b"]).start()
        ws.wait_ready([nodes["late-b"]], da, timeout=60)

        chosen_b = sorted(n for n in ("a100-a", "a100-b", "a100-c")
                          if n in targets(trk, db)["targets"])
        assert len(chosen_b) == 2, targets(trk, db)
        ws.wait_ready([nodes[n] for n in chosen_b], db, timeout=60)
        # Time for anything mis-sent to show: pushes are immediate and every
        # node announces presence well within this.
        time.sleep(2.0)

        want_a = ["a100-a", "a100-b", "late-b"]
        for name, p in nodes.items():
            assert has_release(p, da) == (name in want_a), (name, "A")
            assert has_release(p, db) == (name in chosen_b), (name, "B")
        ta = targets(trk, da)
        assert ta["targets"] == want_a, ta
        assert ta["selector"]["labels"] == {"pool": "a100"} and ta["selector"]["zones"] == ["a", "b"]
        assert targets(trk, db)["targets"] == chosen_b
        assert targets(trk, db)["selector"]["count"] == 2
        dash = {w["digest"]: w for w in trk.get("/api/v1/swarms")[1]["wanted"]}
        assert dash[da]["targets"] == want_a and dash[db]["targets"] == chosen_b, dash
        # p2pctl shows the same.
        r = subprocess.run([binary("tools/p2pctl"), "targets", f"127.0.0.1:{trk.http}",
                            "--json"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        shown = {w["digest"]: w["targets"] for w in json.loads(r.stdout)["wanted"]}
        assert shown == {da: want_a, db: chosen_b}, shown
        r = subprocess.run([binary("tools/p2pctl"), "targets", f"127.0.0.1:{trk.http}"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and "late-b" in r.stdout and "pool=a100" in r.stdout, r
        print(f"selector: A -> {want_a}, B (count 2) -> {chosen_b}; "
              f"{time.time() - t0:.1f}s")
    finally:
        for p in nodes.values():
            p.stop()
        trk.stop()
