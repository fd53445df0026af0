"""The swarm against a real radosgw: six peers fetch one release together
from S3 at most ~once (its manifest too), a release seeded from a warm node's directory
reaches other peers with zero bytes from S3, and a chunk a neighbour once
refused is asked for again.

S3 bytes are counted by radosgw's usage log, not by p2pd.
"""
import datetime
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import BUILD, binary
import ws
import wsproto

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


@pytest.mark.parametrize("stripes", [0, 3])
def test_six_peers_fetch_one_release_together(rgw, s3env, rel, tmp_path, stripes):
    """With stripe trees (p2p-tracker --stripes 3, docs/tracker.md) too:
    six peers are two blocks of three, each peer the root of no stripe or
    one, and each release still leaves S3 about once."""
    F = dir_bytes(rel)
    pub = publish(s3env, rel, f"s3://{rgw.bucket()}/m/six{stripes}/")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key,
                     extra=["--stripes", str(stripes)] if stripes else []).start()
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
        # The manifest too: the tracker told one joiner to read it from S3
        # and named it to the others (docs/tracker.md "A release nobody
        # holds yet"); all six read it from S3 before.
        st, text = trk.get("/metrics")
        assert st == 200
        assert ws.metric_sum(text, "weightswarm_tracker_manifest_readers_total") >= 1
        mani = sum(p.metric("weightswarm_p2pd_manifests_from_peers_total") for p in peers)
        assert mani >= 3, (mani, [p.tail() for p in peers])
        if stripes:  # every peer was told its parents
            for p in peers:
                with open(p.log) as f:
                    assert f": {stripes} stripe trees" in f.read(), p.tail()
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


def seed_to_one_fetcher(rel, tmp_path, s3env, chunk, seed_extra, check_both):
    """A seed that imported rel (in chunks of chunk bytes) and a fetcher
    that gets it through the tracker's prefetch; check_both(seed, fetch, d)
    runs once the fetcher is ready and its tree checked."""
    mpath, d = seed_manifest(rel, tmp_path, chunk)
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    seed = ws.swarm_peer(BUILD, str(tmp_path), s3env, "seed", trk, key,
                         extra=seed_extra).start()
    fetch = None
    try:
        r = seed.ctl("seed", rel, "--manifest", str(mpath))
        assert r.returncode == 0, r.stderr + seed.tail()
        fetch = ws.swarm_peer(BUILD, str(tmp_path), s3env, "fetch", trk, key).start()
        st, body = trk.prefetch(digest=d)
        assert st in (200, 201), body
        ws.wait_ready([fetch], d, timeout=300)
        check(fetch, d, rel)
        assert fetch.metric("weightswarm_p2pd_peer_receive_errors_total") == 0, fetch.tail()
        check_both(seed, fetch, d)
    finally:
        for p in ([fetch] if fetch else []) + [seed]:
            p.stop()
        trk.stop()


def test_seed_to_one_fetcher_keeps_its_connection(rgw, s3env, rel, tmp_path):
    """16 MiB chunks from one seed to one fetcher: the fetcher's buffer pool
    runs dry while chunks are being written and hashed. A CHUNK payload must
    then wait for a buffer (the neighbour pauses); it used to close the
    connection instead (WS_ELIMIT), and every request on it waited for the
    reconnect and the request timeout."""
    def check_both(seed, fetch, d):
        assert fetch.metric("weightswarm_p2pd_buffers_peak") > 0
        # Sealed payloads are encrypted in user memory: never sendfile.
        assert seed.metric("weightswarm_p2pd_peer_tx_bytes_total") >= dir_bytes(rel)
        assert seed.metric("weightswarm_p2pd_peer_tx_sendfile_bytes_total") == 0

    seed_to_one_fetcher(rel, tmp_path, s3env, 16 * MiB, (), check_both)


def test_plaintext_seed_serves_chunks_with_sendfile(rgw, s3env, rel, tmp_path):
    """A seed with --plaintext-payloads (its connections carry payloads in
    clear) sends the chunks it holds with sendfile, from the page cache to
    the socket: every chunk byte it sent went that way (the counter), and
    the fetcher got the release byte for byte."""
    def check_both(seed, fetch, d):
        assert ws.release_state(fetch, d)["bytes_from_s3"] == 0
        tx = seed.metric("weightswarm_p2pd_peer_tx_bytes_total")
        assert tx >= dir_bytes(rel)
        assert seed.metric("weightswarm_p2pd_peer_tx_sendfile_bytes_total") == tx

    seed_to_one_fetcher(rel, tmp_path, s3env, 4 * MiB, ["--plaintext-payloads"], check_both)


def target_and_neighbour(tmp_path, s3env, node_id):
    """A p2pd listening on loopback (no tracker) and a Python neighbour
    connected to it and authenticated: (p2pd, wsproto.Conn)."""
    p, key, port = ws.lone_peer(BUILD, str(tmp_path), s3env, "target")
    try:
        c = wsproto.Conn("127.0.0.1", port, wsproto.read_key(key), node_id=node_id)
        assert c.handshake()
    except BaseException:
        p.stop()
        raise
    return p, c


def frames_until_ready(p, d, c, poll, timeout=60):
    """Yields neighbour c's frames as (type, body, payload), or None after
    poll seconds without one, until p's release d is ready or timeout."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = ws.release_state(p, d)
        if st and st["state"] == "ready":
            return
        c.s.settimeout(poll)
        try:
            yield c.read_frame()
        except TimeoutError:
            yield None


def test_chunk_refused_once_is_asked_for_again(s3env, tmp_path):
    """A neighbour that answers a REQUEST with REJECT "not held" for a chunk
    its BITFIELD listed may be wrong or passing. p2pd used to forget that
    bit for good; when no one else had the chunk (and the tracker counted
    that neighbour as its holder, so it leased it to nobody) the fetch hung
    until the connection idled out. Here a Python peer is p2pd's only source
    (no tracker, release wanted by digest), refuses chunk 2 once, and serves
    everything else: p2pd must ask for chunk 2 again and finish."""
    rel = tmp_path / "rel"
    rel.mkdir()
    data = os.urandom(4 * MiB + 4321)  # chunks 0-3 of 1 MiB, 4 is short
    (rel / "weights.bin").write_bytes(data)
    mpath, d = seed_manifest(str(rel), tmp_path, 1 * MiB)
    dig = bytes.fromhex(d[len("sha256-"):])
    tot = 5
    p, c = target_and_neighbour(tmp_path, s3env, "server")
    try:
        c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": tot, "bits": bytes([0xF8])})
        # The prefetch answers once it has the manifest, which we serve below.
        prefetch = []
        th = threading.Thread(target=lambda: prefetch.append(p.ctl("prefetch", d)))
        th.start()
        asks = {}  # chunk -> times it was requested
        refused_at = None
        for fr in frames_until_ready(p, d, c, 0.5):
            if fr is None:
                continue
            t, b, _ = fr
            if t == wsproto.T["MANIFEST_REQ"]:
                c.send(wsproto.T["MANIFEST"], {"d": dig}, payload=mpath.read_bytes())
            elif t == wsproto.T["REQUEST"]:
                g = b["c"]
                asks[g] = asks.get(g, 0) + 1
                if g == 2 and asks[g] == 1:
                    c.send(wsproto.T["REJECT"], {"d": dig, "c": g, "id": b["id"], "r": 0})
                    refused_at = time.time()
                    continue
                if g == 2:
                    again_after = time.time() - refused_at
                c.send(wsproto.T["CHUNK"], {"d": dig, "c": g, "id": b["id"]},
                       payload=data[g * MiB:(g + 1) * MiB])
        th.join(30)
        assert prefetch and prefetch[0].returncode == 0, (prefetch, p.tail())
        assert asks.get(2) == 2, (asks, p.tail())
        assert 4 <= again_after <= 15, again_after  # after the hold, not at once
        assert all(asks.get(g) == 1 for g in (0, 1, 3, 4)), asks
        ok, bad = ws.tree_equal(str(rel), os.path.join(p.cache, "releases", d))
        assert ok, bad
    finally:
        c.close()
        p.stop()


def test_neighbour_silent_on_manifest_does_not_stall_the_release(rgw, s3env, tmp_path):
    """A neighbour announces the release (BITFIELD) and then never answers
    the MANIFEST_REQ p2pd sends it. p2pd used to wait for that answer for
    as long as the connection lived; now it gives up on the neighbour after
    PEER_MANIFEST_ASK_MS (5 s) and reads the manifest from S3."""
    src = tmp_path / "rel"
    src.mkdir()
    (src / "weights.bin").write_bytes(os.urandom(3 * MiB))
    r = subprocess.run([binary("tools/p2pctl"), "publish", str(src),
                        f"s3://{rgw.bucket()}/m/silent/", "--json",
                        "--chunk-size", str(MiB)],
                       env=s3env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    pub = json.loads(r.stdout.strip().splitlines()[-1])
    dig = bytes.fromhex(pub["digest"][len("sha256-"):])
    p, c = target_and_neighbour(tmp_path, s3env, "silent")
    try:
        c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": 3, "bits": bytes(1)})
        t0 = time.time()
        out = []
        th = threading.Thread(target=lambda: out.append(p.ctl("prefetch", pub["uri"], "--wait")))
        th.start()
        asked = False
        c.s.settimeout(0.5)
        while th.is_alive() and time.time() - t0 < 60:
            try:
                t, _, _ = c.read_frame()
            except TimeoutError:
                continue
            asked |= t == wsproto.T["MANIFEST_REQ"]  # and never answered
        th.join(60)
        took = time.time() - t0
        assert asked
        assert out and out[0].returncode == 0, (out, p.tail())
        assert 4 <= took <= 30, took  # gave up on it after the ask timeout
        ok, bad = ws.tree_equal(str(src), os.path.join(p.cache, "releases", pub["digest"]))
        assert ok, bad
    finally:
        c.close()
        p.stop()


def serve_in_pieces(tmp_path, s3env, nchunks, open_max):
    """p2pd fetches a release (wanted by digest) from a Python neighbour
    that answers each REQUEST with a first 64 KiB piece and then sends the
    pieces of every open request round-robin, keeping up to open_max
    requests open at once. Returns (p2pd, data, digest, rel, log): log is
    ("open", chunk, open now) / ("closed",) events in order; p2pd is still
    running."""
    rel = tmp_path / "rel"
    rel.mkdir()
    data = os.urandom(nchunks * MiB)
    (rel / "weights.bin").write_bytes(data)
    mpath, d = seed_manifest(str(rel), tmp_path, 1 * MiB)
    dig = bytes.fromhex(d[len("sha256-"):])
    piece = 64 * 1024
    p, c = target_and_neighbour(tmp_path, s3env, "pieces")
    log = []
    try:
        c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": nchunks,
                                       "bits": bytes([0xFF]) * (nchunks // 8)})
        threading.Thread(target=lambda: p.ctl("prefetch", d), daemon=True).start()
        waiting = []  # requests not begun
        sent = {}     # open request id -> (chunk, bytes sent)
        try:
            for fr in frames_until_ready(p, d, c, 0.05):
                if fr is not None:
                    t, b, _ = fr
                    if t == wsproto.T["MANIFEST_REQ"]:
                        c.send(wsproto.T["MANIFEST"], {"d": dig}, payload=mpath.read_bytes())
                    elif t == wsproto.T["REQUEST"]:
                        waiting.append((b["c"], b["id"]))
                    continue
                while waiting and len(sent) < open_max:
                    g, i = waiting.pop(0)
                    sent[i] = (g, 0)
                    log.append(("open", g, len(sent)))
                for i, (g, off) in list(sent.items()):
                    c.send(wsproto.T["CHUNK"], {"d": dig, "c": g, "id": i, "o": off},
                           payload=data[g * MiB + off:g * MiB + off + piece])
                    if off + piece == MiB:
                        del sent[i]
                    else:
                        sent[i] = (g, off + piece)
        except (ConnectionError, OSError, ValueError, wsproto.Closed):
            log.append(("closed",))  # seen sending, or reading its end
    finally:
        c.close()
    return p, data, d, rel, log


def test_pieces_of_four_chunks_interleaved_are_taken(s3env, tmp_path):
    """A sender may interleave the pieces of up to four requests on one
    connection (docs/protocol.md, "Chunks served as they arrive", mux):
    p2pd puts each piece in its chunk and verifies every chunk."""
    p, data, d, rel, log = serve_in_pieces(tmp_path, s3env, 16, 4)
    try:
        assert ("closed",) not in log, (log, p.tail())
        assert ws.release_state(p, d)["state"] == "ready", p.tail()
        ok, bad = ws.tree_equal(str(rel), os.path.join(p.cache, "releases", d))
        assert ok, bad
        assert p.metric("weightswarm_p2pd_peer_chunks_total") == 16
    finally:
        p.stop()


def test_fifth_chunk_in_pieces_at_once_closes_the_connection(s3env, tmp_path):
    """More than four open piece sequences is a protocol error: p2pd closes
    that connection when the fifth begins (and stays up)."""
    p, data, d, rel, log = serve_in_pieces(tmp_path, s3env, 16, 5)
    try:
        assert log[-1] == ("closed",), (log, p.tail())
        fifth = next(k for k, e in enumerate(log) if e[0] == "open" and e[2] == 5)
        assert all(e[0] == "open" for e in log[fifth:-1]), log
        assert "more than 4 chunks in pieces at once" in p.tail(), p.tail()
        assert p.metric("weightswarm_p2pd_peer_neighbors") == 0
    finally:
        p.stop()


def test_manifest_wait_ends_on_time_between_ticks(rgw, s3env, tmp_path):
    """A node waiting for a neighbour's manifest (here: none, no tracker)
    reads it from S3 when PEER_MANIFEST_PEER_TRY_MS (250 ms) run out. The
    wait used to end on the swarm's 1 s tick: a prefetch made 0.15 s
    before a tick waited for the one after, ~1.15 s. The timestamps are
    p2pd's own log lines; the test only places the prefetch in the tick's
    phase (the tick runs every second from the listen line)."""
    src = tmp_path / "small"
    src.mkdir()
    (src / "a.bin").write_bytes(os.urandom(64 * 1024))
    pub = ws.publish(BUILD, s3env, str(src), f"s3://{rgw.bucket()}/m/mwait/")
    key = ws.write_cluster_key(str(tmp_path / "k.key"))
    p = ws.P2pd(BUILD, str(tmp_path), s3env, name="mwait",
                extra=["--listen", f"127.0.0.1:{ws.free_port()}", "--cluster-key", key,
                       "--log-level", "debug"]).start()

    def stamp(pattern):
        with open(p.log, errors="replace") as f:
            for line in f:
                if pattern in line:
                    return datetime.datetime.strptime(
                        line[:23] + "+0000", "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
        return None

    try:
        listening = stamp("listening on 127.0.0.1")
        assert listening is not None, p.tail()
        # 0.15 s before the tick at 3 s: the old code's tick came before the
        # 250 ms were out, and the next one a second later.
        time.sleep(max(0.0, listening + 2.85 - time.time()))
        r = p.ctl("prefetch", pub["uri"], "--wait", "--timeout", "60")
        assert r.returncode == 0, (r.stdout, r.stderr, p.tail())
        asked = stamp("prefetch from s3://")
        read = stamp("manifest.json")
        assert asked is not None and read is not None, p.tail()
        assert 0.2 <= read - asked < 0.7, (read - asked, p.tail())
    finally:
        p.stop()
