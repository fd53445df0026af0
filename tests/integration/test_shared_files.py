"""Two releases that share files, prefetched at the same instant on one
node: each shared file is fetched from S3 once and its bytes are counted
once. The release that fetched a shared file reports its bytes in
bytes_from_s3; the other reports them in bytes_shared.

Before this, each release reported the shared files' bytes as fetched from
S3 (the per-file counters were summed by every release listing the file),
so the releases' bytes_from_s3 added up to more than S3 sent.

The race on the shared partials themselves (ENOENT) is covered by
test_acceptance.py::test_four_releases_at_once_no_eviction.
"""
import hashlib
import os
import threading

from conftest import BUILD
from flipproxy import FlipProxy
import ws

MiB = 1 << 20


def publish(env, src, uri):
    return ws.publish(BUILD, env, src, uri, MiB)


def files_by_hash(src):
    out = {}
    for r, _, fs in os.walk(src):
        for f in fs:
            with open(os.path.join(r, f), "rb") as fh:
                out[hashlib.sha256(fh.read()).hexdigest()] = os.path.getsize(fh.name)
    return out


def two_releases(rgw, s3env, tmp_path, name):
    """Two releases published to S3 that share files: their own shards, and
    a 3 MiB file both versions ship unchanged (tokenizer.json and the index
    are equal too), so a double count or a missed one is plain to see.
    Returns [(src, publish result)] and the files of each by sha256."""
    bucket = rgw.bucket()
    rels = []
    for i in range(2):
        src = ws.make_release(str(tmp_path / f"v{i}"), shard_bytes=2 * MiB, nshards=2,
                              seed=f"{name}-{i}")
        ws.write_random(os.path.join(src, "shared.bin"), 3 * MiB, f"{name}-bin")
        rels.append((src, publish(s3env, src, f"s3://{bucket}/m/{name}{i}/")))
    return rels, [files_by_hash(src) for src, _ in rels]


def test_shared_files_fetched_and_counted_once(rgw, s3env, tmp_path):
    rels, (a, b) = two_releases(rgw, s3env, tmp_path, "shared")
    union = sum({**a, **b}.values())
    shared = sum(a[h] for h in a if h in b)
    assert shared >= 3 * MiB

    host, port = s3env["AWS_ENDPOINT_URL_S3"].split("//", 1)[1].rsplit(":", 1)
    proxy = FlipProxy(host, int(port), flip_at=None)
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    p = ws.P2pd(BUILD, str(tmp_path), env).start()
    try:
        go = threading.Barrier(2)
        results = [None, None]

        def claim(i):
            go.wait()
            st, body = p.api("POST", "/api/v1/prefetch", {"uri": rels[i][1]["uri"]})
            if st != 200:
                results[i] = (st, body)
                return
            results[i] = p.api("GET", f"/api/v1/releases/{body['digest']}/wait"
                               "?timeout_ms=90000", timeout=120)

        ths = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(130)
        for i, res in enumerate(results):
            assert res is not None and res[0] == 200, (i, res, p.tail())
        reps = [ws.release_state(p, pub["digest"]) for _, pub in rels]
        for src, pub in rels:
            ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", pub["digest"]))
            assert ok, bad
        s3 = sum(r["bytes_from_s3"] for r in reps)
        # Counted once: the releases' S3 bytes add up to the distinct files.
        assert s3 <= union + 64 * 1024, (s3, union, shared, reps)
        assert s3 >= union - 64 * 1024, (s3, union, reps)
        # The other release says so: the shared bytes, once.
        got_shared = sum(r.get("bytes_shared", 0) for r in reps)
        assert abs(got_shared - shared) <= 64 * 1024, (got_shared, shared, reps)
        # Fetched once: what S3 sent (bodies through the proxy, manifests
        # included) is the distinct files and not the shared ones twice.
        sent = proxy.body_bytes
        assert union <= sent <= union + 256 * 1024, (sent, union, shared)
    finally:
        p.stop()
        proxy.stopped = True


def test_shared_file_in_the_cache_already_counts_as_shared(rgw, s3env, tmp_path):
    """The second release is prefetched only once the first is ready, so
    the files they share are whole in the cache (and no longer open) when
    it lists them: it reads none of them from S3 and reports their bytes in
    bytes_shared, so its bytes_from_s3 + bytes_shared add up to the release
    (before, they counted nowhere: the sum fell short by the shared files,
    and the concurrent test above failed whenever one release finished a
    shared file before the other listed it)."""
    rels, (a, b) = two_releases(rgw, s3env, tmp_path, "later")
    shared = sum(b[h] for h in b if h in a)
    own = sum(b[h] for h in b if h not in a)
    assert shared >= 3 * MiB
    p = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        reps = []
        for _, pub in rels:
            st, body = p.api("POST", "/api/v1/prefetch", {"uri": pub["uri"]})
            assert st == 200, body
            st, _ = p.api("GET", f"/api/v1/releases/{body['digest']}/wait"
                          "?timeout_ms=60000", timeout=90)
            assert st == 200, p.tail()
            reps.append(ws.release_state(p, pub["digest"]))
        first, second = reps
        assert first["bytes_shared"] == 0 and first["bytes_from_s3"] == first["bytes_total"], first
        assert second["bytes_shared"] == shared, (second, shared)
        assert second["bytes_from_s3"] == own, (second, own)
        assert second["bytes_from_s3"] + second["bytes_shared"] == second["bytes_total"], second
        ok, bad = ws.tree_equal(rels[1][0], os.path.join(p.cache, "releases", rels[1][1]["digest"]))
        assert ok, bad
    finally:
        p.stop()
