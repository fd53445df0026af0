"""The tracker's wanted set (issue 16): a node hears it as soon as its link
is up (not at its first presence announce, 5 s later), and entries leave by
a documented rule (docs/operations.md "Wanted set"): superseded by a newer
release of the same model, after --wanted-ttl, and a full set evicts its
oldest entry instead of refusing a prefetch (409); an entry every node
connected now has stays for the nodes that join later."""
import time

from conftest import BUILD
import ws

KiB = 1 << 10


def fake_uri(model, i):
    return "s3://bucket/team/%s/sha256-%064x/" % (model, i + 1)


def wanted(trk):
    st, body = trk.get("/api/v1/prefetch")
    assert st == 200, body
    return [e["uri"] for e in body["wanted"]]


def publish(env, tmp_path, bucket, name):
    d = ws.make_release(str(tmp_path / name), shard_bytes=200 * KiB,
                        nshards=2, seed=name)
    return ws.publish(BUILD, env, d, f"s3://{bucket}/team/{name}/", timeout=120)


def test_full_set_evicts_oldest_and_newer_release_supersedes(tmp_path):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    try:
        for i in range(70):  # distinct models: nothing supersedes
            st, r = trk.request("POST", "/api/v1/prefetch",
                                {"uri": fake_uri("m%d" % i, i)})
            assert st == 201, (i, st, r)
        w = wanted(trk)
        assert len(w) == 64 and w[-1] == fake_uri("m69", 69), w[-3:]
        assert fake_uri("m0", 0) not in w  # the oldest made room
        # Two releases of one model: the newer one replaces the older.
        trk.prefetch(uri=fake_uri("llama", 100))
        trk.prefetch(uri=fake_uri("llama", 101))
        w = wanted(trk)
        assert fake_uri("llama", 101) in w
        assert fake_uri("llama", 100) not in w
    finally:
        trk.stop()


def test_wanted_entries_expire_after_ttl(tmp_path):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key, ("--wanted-ttl", "2s")).start()
    try:
        trk.prefetch(uri=fake_uri("ttl", 1))
        assert wanted(trk) == [fake_uri("ttl", 1)]
        deadline = time.time() + 15
        while wanted(trk) and time.time() < deadline:
            time.sleep(0.2)
        assert wanted(trk) == []
    finally:
        trk.stop()


def test_wanted_set_pushed_on_connect_and_kept_for_later_nodes(rgw, s3env, tmp_path):
    pub = publish(s3env, tmp_path, rgw.bucket(), "pushed")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    p = ws.swarm_peer(BUILD, str(tmp_path), s3env, "p", trk, key)
    late = ws.swarm_peer(BUILD, str(tmp_path), s3env, "late", trk, key)
    try:
        trk.prefetch(uri=pub["uri"])
        t0 = time.time()
        p.start()
        took = None
        while time.time() - t0 < 10:
            if ws.release_state(p, pub["digest"]) is not None:
                took = time.time() - t0
                break
            time.sleep(0.05)
        print("wanted release known %.2fs after start" % (took or -1))
        assert took is not None and took < 2.5, (took, p.tail())
        ws.wait_ready([p], pub["digest"], timeout=60)
        # Every node connected now holds it, but the autoscaler posted it
        # for the nodes it is adding: one that joins later fetches it too.
        time.sleep(2)  # the tracker's sweeps run every second
        assert len(wanted(trk)) == 1, wanted(trk)
        late.start()
        ws.wait_ready([late], pub["digest"], timeout=60)
    finally:
        late.stop()
        p.stop()
        trk.stop()
