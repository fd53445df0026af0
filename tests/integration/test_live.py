"""A chunk served while it is still arriving ("live"), from S3 or from a
neighbour (the last test): p2pd says
HAVE with "p" as its origin fetch begins, to neighbours whose BITFIELD said
"live", and sends the chunk to one that asks as CHUNK pieces (body key
"o"), each made of bytes already written, the last byte only after its own
hash check. A fetch that fails ends the pieces with a REJECT. Neighbours
that did not say "live" see none of this.

The neighbour here is Python (tests/lib/wsproto.py); S3 is the real
radosgw behind a proxy that slows each response to RATE bytes/s, so a
1 MiB chunk takes ~2 s to arrive and there is time to watch it. To a
neighbour that did not also say "mux", p2pd sends one upload at a time per
connection, so only the first chunk asked for while arriving is sure to go
out in pieces; those tests ask for one. To one that said "mux" it sends
every chunk in pieces, those of up to four requests interleaved.
"""
import json
import os
import subprocess
import threading
import time

from conftest import BUILD, binary
from flipproxy import FlipProxy
import ws
import wsproto

MiB = 1 << 20
RATE = 512 * 1024
NCHUNKS = 3


def publish(env, tmp_path, rgw, name, nchunks):
    src = tmp_path / "rel"
    src.mkdir()
    data = os.urandom(nchunks * MiB)
    (src / "weights.bin").write_bytes(data)
    r = subprocess.run([binary("tools/p2pctl"), "publish", str(src),
                        f"s3://{rgw.bucket()}/live/{name}/", "--json",
                        "--chunk-size", str(MiB)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), data, str(src)


def start(rgw, s3env, tmp_path, **proxy_args):
    """p2pd listening, no tracker, S3 through the slow proxy; returns
    (proxy, p2pd, key)."""
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = FlipProxy(host, int(port), **dict(dict(flip_at=None, rate=RATE), **proxy_args))
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    p, key, lport = ws.lone_peer(BUILD, str(tmp_path), env, "origin")
    return proxy, p, key, lport


def connect(lport, key, dig, node_id, live, tot, mux=False):
    c = wsproto.Conn("127.0.0.1", lport, wsproto.read_key(key), node_id=node_id)
    assert c.handshake()
    # Holds nothing; also says nothing when asked for the manifest, which
    # p2pd then reads from S3 after PEER_MANIFEST_ASK_MS per neighbour.
    body = {"d": dig, "tot": tot, "bits": bytes(1)}
    if live:
        body["live"] = True
    if mux:
        body["mux"] = True
    c.send(wsproto.T["BITFIELD"], body)
    return c


def prefetch_async(p, uri):
    out = []
    th = threading.Thread(target=lambda: out.append(p.ctl("prefetch", uri, "--wait")))
    th.start()
    return th, out


def frames(c, until, deadline):
    """Yields (type, body, payload, time) until until() or the deadline;
    (None, {}, b"", time) after 0.2 s without a frame."""
    c.s.settimeout(0.2)
    while time.time() < deadline and not until():
        try:
            t, b, pl = c.read_frame()
        except TimeoutError:
            t, b, pl = None, {}, b""
        yield t, b, pl, time.time()


def test_chunk_is_served_in_pieces_while_it_arrives(rgw, s3env, tmp_path):
    pub, data, src = publish(s3env, tmp_path, rgw, "pieces", NCHUNKS)
    dig = bytes.fromhex(pub["digest"][len("sha256-"):])
    proxy, p, key, lport = start(rgw, s3env, tmp_path)
    live = plain = None
    try:
        live = connect(lport, key, dig, "live-peer", True, NCHUNKS)
        plain = connect(lport, key, dig, "old-peer", False, NCHUNKS)
        th, out = prefetch_async(p, pub["uri"])
        # The peer that did not say "live" must hear no "p" and be refused
        # chunk 0 while it is arriving; it reads in a thread meanwhile.
        plain_seen = []
        arriving = threading.Event()

        def read_plain():
            asked = False
            for t, b, _, _ in frames(plain, lambda: len(out) > 0, time.time() + 60):
                if t is not None:
                    plain_seen.append((t, b))
                if arriving.is_set() and not asked:
                    plain.send(wsproto.T["REQUEST"], {"d": dig, "c": 0, "id": 7})
                    asked = True
        tp = threading.Thread(target=read_plain)
        tp.start()

        got = {}          # chunk -> bytearray
        pieces = {}       # chunk -> CHUNK frames it came in
        first_piece = {}  # chunk -> time of its first byte
        have_at = {}      # chunk -> time of the plain HAVE
        live_said = set()
        refused = []      # REJECTs on this connection (there should be none)
        first = None      # the chunk asked for while arriving
        for t, b, pl, now in frames(live, lambda: len(got) == NCHUNKS and
                                    all(len(got[g]) == MiB for g in got) and
                                    len(have_at) == NCHUNKS, time.time() + 60):
            if t == wsproto.T["HAVE"] and b.get("p"):
                live_said.add(b["c"])
                if b["c"] == 0:
                    arriving.set()  # and not verified for ~2 s
                if first is None:
                    first = b["c"]
                    live.send(wsproto.T["REQUEST"], {"d": dig, "c": first, "id": 100 + first})
            elif t == wsproto.T["HAVE"]:
                have_at[b["c"]] = now
                if b["c"] != first:
                    live.send(wsproto.T["REQUEST"], {"d": dig, "c": b["c"], "id": 100 + b["c"]})
            elif t == wsproto.T["CHUNK"]:
                g = b["c"]
                assert b["id"] == 100 + g
                buf = got.setdefault(g, bytearray())
                assert b.get("o", 0) == len(buf), (b, len(buf))  # in order, no gap
                buf += pl
                pieces[g] = pieces.get(g, 0) + 1
                first_piece.setdefault(g, now)
            elif t == wsproto.T["REJECT"]:
                refused.append(b)
        th.join(60)
        tp.join(60)
        assert out and out[0].returncode == 0, (out, p.tail())
        assert not refused, (refused, p.tail())
        assert live_said == set(range(NCHUNKS))  # every fetch was announced
        for g in range(NCHUNKS):
            assert bytes(got[g]) == data[g * MiB:(g + 1) * MiB], g
        # The first went out in pieces, well before it was whole here; the
        # others were asked for once held and came whole.
        assert pieces[first] >= 2, pieces
        assert first_piece[first] < have_at[first] - 0.5, (first_piece, have_at)
        assert all(pieces[g] == 1 for g in range(NCHUNKS) if g != first), pieces
        assert p.metric("weightswarm_p2pd_peer_chunks_served_live_total") == 1
        assert not any(t == wsproto.T["HAVE"] and b.get("p") for t, b in plain_seen)
        rej = [b for t, b in plain_seen if t == wsproto.T["REJECT"]]
        assert rej and rej[0]["c"] == 0 and rej[0]["id"] == 7 and rej[0]["r"] == 0, plain_seen
        # ... and asked before chunk 0 was verified.
        assert not any(t == wsproto.T["HAVE"] and b["c"] == 0
                       for t, b in plain_seen[:plain_seen.index((wsproto.T["REJECT"], rej[0]))])
        ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", pub["digest"]))
        assert ok, bad
    finally:
        for c in (live, plain):
            if c is not None:
                c.close()
        p.stop()
        proxy.close()


def test_mux_neighbour_gets_pieces_of_chunks_arriving_at_once(rgw, s3env, tmp_path):
    """A neighbour that said "live" and "mux" asks for each chunk as soon as
    HAVE "p" says its fetch began. The three fetches run at once, and so do
    the three uploads: pieces of the three chunks arrive interleaved, each
    chunk's in order, every one well before the chunk is held. A chunk asked
    for once held also comes in pieces."""
    pub, data, src = publish(s3env, tmp_path, rgw, "mux", NCHUNKS)
    dig = bytes.fromhex(pub["digest"][len("sha256-"):])
    proxy, p, key, lport = start(rgw, s3env, tmp_path)
    c = None
    try:
        c = connect(lport, key, dig, "mux-peer", True, NCHUNKS, mux=True)
        th, out = prefetch_async(p, pub["uri"])
        got = {}          # chunk -> bytearray
        order = []        # chunk of every CHUNK frame, as they came
        first_piece = {}  # chunk -> time of its first byte
        have_at = {}      # chunk -> time of the plain HAVE
        again = None      # pieces of chunk 0 asked for again once held
        for t, b, pl, now in frames(c, lambda: again is not None and len(again) == MiB,
                                    time.time() + 60):
            if t == wsproto.T["HAVE"] and b.get("p"):
                c.send(wsproto.T["REQUEST"], {"d": dig, "c": b["c"], "id": 100 + b["c"]})
            elif t == wsproto.T["HAVE"]:
                have_at[b["c"]] = now
            elif t == wsproto.T["CHUNK"] and b["id"] == 7:
                assert "o" in b and b["o"] == len(again), b
                again += pl
            elif t == wsproto.T["CHUNK"]:
                g = b["c"]
                assert b["id"] == 100 + g and "o" in b, b
                buf = got.setdefault(g, bytearray())
                assert b["o"] == len(buf), (b, len(buf))  # in order, no gap
                buf += pl
                order.append(g)
                first_piece.setdefault(g, now)
            if again is None and len(have_at) == NCHUNKS and \
                    all(len(got.get(g, b"")) == MiB for g in range(NCHUNKS)):
                again = bytearray()
                c.send(wsproto.T["REQUEST"], {"d": dig, "c": 0, "id": 7})
        th.join(60)
        assert out and out[0].returncode == 0, (out, p.tail())
        for g in range(NCHUNKS):
            assert bytes(got[g]) == data[g * MiB:(g + 1) * MiB], g
            assert first_piece[g] < have_at[g] - 0.5, (g, first_piece, have_at)
        # Interleaved: one after the other would switch chunks twice.
        switches = sum(1 for a, b in zip(order, order[1:]) if a != b)
        assert switches > 2 * NCHUNKS, order
        assert again is not None and bytes(again) == data[:MiB]
        assert p.metric("weightswarm_p2pd_peer_chunks_served_live_total") == NCHUNKS
        assert p.metric("weightswarm_p2pd_peer_chunks_served_total") == NCHUNKS + 1
    finally:
        if c is not None:
            c.close()
        p.stop()
        proxy.close()


def test_chunk_failing_its_hash_ends_the_pieces_with_reject(rgw, s3env, tmp_path):
    """A one-chunk release; the proxy flips one bit of its first S3
    response. The pieces sent while it arrived stop short of the chunk (the
    last byte waits for the hash check, which fails), a REJECT
    "not held" for that request follows, the connection stays, and p2pd
    fetches the chunk again, says HAVE "p" again and serves it."""
    pub, data, src = publish(s3env, tmp_path, rgw, "flip", 1)
    dig = bytes.fromhex(pub["digest"][len("sha256-"):])
    proxy, p, key, lport = start(rgw, s3env, tmp_path, flip_at=12345)
    c = None
    try:
        c = connect(lport, key, dig, "live-peer", True, 1)
        th, out = prefetch_async(p, pub["uri"])
        req_id = {}   # chunk -> id of our latest request
        got = {}      # chunk -> bytes of the current attempt
        done = {}     # chunk -> complete bytes
        rejected = []  # (chunk, bytes received before the REJECT)
        next_id = 1
        for t, b, pl, _ in frames(c, lambda: len(done) == 1, time.time() + 90):
            g = b.get("c")
            if t == wsproto.T["HAVE"] and g not in done and (b.get("p") or g not in req_id):
                c.send(wsproto.T["REQUEST"], {"d": dig, "c": g, "id": next_id})
                req_id[g] = next_id
                got[g] = bytearray()
                next_id += 1
            elif t == wsproto.T["CHUNK"] and b["id"] == req_id.get(g):
                assert b.get("o", 0) == len(got[g])
                got[g] += pl
                if len(got[g]) == MiB:
                    done[g] = bytes(got[g])
            elif t == wsproto.T["REJECT"] and b["id"] == req_id.get(g):
                rejected.append((g, len(got[g])))
                req_id.pop(g)
        th.join(60)
        assert out and out[0].returncode == 0, (out, p.tail())
        assert proxy.flipped == 1
        # Some pieces went out, never the whole chunk (its last byte waits
        # for the hash check).
        assert len(rejected) == 1 and rejected[0][0] == 0, rejected
        assert 0 < rejected[0][1] < MiB, rejected
        assert done[0] == data
        assert p.metric("weightswarm_p2pd_peer_chunks_served_live_total") == 1
        assert p.metric("weightswarm_p2pd_chunks_failed_total") >= 1
        ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", pub["digest"]))
        assert ok, bad
    finally:
        if c is not None:
            c.close()
        p.stop()
        proxy.close()


def test_chunk_from_a_neighbour_is_served_on_while_it_arrives(s3env, tmp_path):
    """Every hop forwards pieces, not only the first: a chunk arriving from
    a neighbour is "arriving" like one from S3. p2pd (no tracker, release
    asked for by digest) fetches two chunks from a Python source that sends
    each in four pieces 0.4 s apart; a second Python neighbour, which said
    "live", hears HAVE "p" for each as its download begins, asks for it, and
    gets pieces of it before the source has sent the chunk's last piece.
    Before this only a fetch from S3 was served as it arrived: the second
    neighbour heard of each chunk only once p2pd held it whole."""
    from test_swarm import seed_manifest
    rel = tmp_path / "rel"
    rel.mkdir()
    data = os.urandom(2 * MiB)
    (rel / "weights.bin").write_bytes(data)
    mpath, d = seed_manifest(str(rel), tmp_path, MiB)
    dig = bytes.fromhex(d[len("sha256-"):])
    p, key, lport = ws.lone_peer(BUILD, str(tmp_path), s3env, "hop")
    src = nxt = None
    try:
        src = wsproto.Conn("127.0.0.1", lport, wsproto.read_key(key), node_id="source")
        assert src.handshake()
        src.send(wsproto.T["BITFIELD"], {"d": dig, "tot": 2, "bits": bytes([0xC0])})
        prefetch = []
        th = threading.Thread(target=lambda: prefetch.append(p.ctl("prefetch", d)))
        th.start()
        nxt = wsproto.Conn("127.0.0.1", lport, wsproto.read_key(key), node_id="next")
        assert nxt.handshake()
        nxt.send(wsproto.T["BITFIELD"], {"d": dig, "tot": 2, "bits": bytes(1), "live": True})
        live_said = {}   # chunk -> time of HAVE "p"
        got = {}         # chunk -> bytes received by the second neighbour
        first_piece = {}  # chunk -> time its first piece reached it
        refused = []

        def read_next():
            for t, b, pl, now in frames(nxt, lambda: len(got) == 2 and all(
                    len(v) == MiB for v in got.values()), time.time() + 60):
                if t == wsproto.T["HAVE"] and b.get("p"):
                    live_said[b["c"]] = now
                    nxt.send(wsproto.T["REQUEST"], {"d": dig, "c": b["c"], "id": 50 + b["c"]})
                elif t == wsproto.T["CHUNK"]:
                    buf = got.setdefault(b["c"], bytearray())
                    assert b.get("o", 0) == len(buf), (b, len(buf))
                    buf += pl
                    first_piece.setdefault(b["c"], now)
                elif t == wsproto.T["REJECT"]:
                    refused.append(b)
        tn = threading.Thread(target=read_next)
        tn.start()
        last_sent = {}  # chunk -> when the source sent its last piece
        for t, b, pl, now in frames(src, lambda: len(last_sent) == 2, time.time() + 60):
            if t == wsproto.T["MANIFEST_REQ"]:
                src.send(wsproto.T["MANIFEST"], {"d": dig}, payload=mpath.read_bytes())
            elif t == wsproto.T["REQUEST"] and b["c"] not in last_sent:
                g, q = b["c"], MiB // 4
                for k in range(4):
                    if k > 0:
                        time.sleep(0.4)
                    src.send(wsproto.T["CHUNK"], {"d": dig, "c": g, "id": b["id"], "o": k * q},
                             payload=data[g * MiB + k * q:g * MiB + (k + 1) * q])
                last_sent[g] = time.time()
        th.join(60)
        tn.join(60)
        assert prefetch and prefetch[0].returncode == 0, (prefetch, p.tail())
        assert not refused, (refused, p.tail())
        assert sorted(live_said) == [0, 1], (live_said, p.tail())
        for g in range(2):
            assert bytes(got[g]) == data[g * MiB:(g + 1) * MiB], g
            assert first_piece[g] < last_sent[g] - 0.3, (g, first_piece, last_sent)
        assert p.metric("weightswarm_p2pd_peer_chunks_served_live_total") == 2
    finally:
        for c in (src, nxt):
            if c is not None:
                c.close()
        p.stop()
