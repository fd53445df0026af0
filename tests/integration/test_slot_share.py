"""Neighbours reading from S3 get no more than their share of a node's
upload slots (peer/swarm/slot_share.h): the slots times the share of its
ready neighbours that said HAVE "p" with "s" (a chunk arriving from S3),
rounded down, at least one.

At a cluster-wide start the few nodes reading from S3 join first, are
named to each other first and took each other's upload slots, so the
chunks they brought in reached few others (docs/scale.md, session 31).

A p2pd holding a release (read from S3 first) has eight Python neighbours
(tests/lib/wsproto.py). Two say they read a chunk from S3, six do not: the
S3 readers' share is 6 x 2 / 8 = 1 slot. The first reader asks for a chunk
and does not read it (a tiny receive buffer keeps the upload open); the
second reader's request is then refused busy while another neighbour's is
served; once the first reader is gone, the second is served. The code
before served the second reader at once (six slots for anyone).
"""
import threading
import time

from conftest import BUILD
from test_live import publish
import ws
import wsproto

MiB = 1 << 20
NCHUNKS = 4
REJECT_BUSY = 1


def neighbour(port, key, dig, name, s3_chunk=None, rcvbuf=None):
    """A keyed neighbour that holds nothing and takes pieces; with s3_chunk
    it says that chunk is arriving from S3."""
    c = wsproto.Conn("127.0.0.1", port, wsproto.read_key(key), node_id=name,
                     rcvbuf=rcvbuf)
    assert c.handshake()
    c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": NCHUNKS, "bits": bytes(1),
                                   "live": True, "mux": True})
    if s3_chunk is not None:
        c.send(wsproto.T["HAVE"], {"d": dig, "c": s3_chunk, "p": True, "s": True})
    return c


def answer(c, rid, timeout=10):
    """The first CHUNK or REJECT for request rid on c: (type, body)."""
    deadline = time.time() + timeout
    c.s.settimeout(0.5)
    while time.time() < deadline:
        try:
            t, b, _ = c.read_frame()
        except TimeoutError:
            continue
        if t in (wsproto.T["CHUNK"], wsproto.T["REJECT"]) and b.get("id") == rid:
            return t, b
    raise AssertionError(f"no answer to request {rid}")


def test_s3_readers_get_their_share_of_upload_slots(rgw, s3env, tmp_path):
    pub, data, src = publish(s3env, tmp_path, rgw, "share", NCHUNKS)
    dig = bytes.fromhex(pub["digest"][len("sha256-"):])
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    port = ws.free_port()
    p = ws.P2pd(BUILD, str(tmp_path), s3env, name="holder",
                extra=["--listen", f"127.0.0.1:{port}", "--cluster-key", key]).start()
    conns = []
    try:
        p.ctl("prefetch", pub["uri"], "--wait", check=True)
        hog = neighbour(port, key, dig, "s3-reader-1", s3_chunk=3, rcvbuf=4096)
        conns.append(hog)
        reader = neighbour(port, key, dig, "s3-reader-2", s3_chunk=3)
        conns.append(reader)
        plain = [neighbour(port, key, dig, f"plain-{i}") for i in range(6)]
        conns.extend(plain)
        time.sleep(0.5)  # every BITFIELD and HAVE is in

        # The first reader takes the one slot and keeps it (never reads).
        hog.send(wsproto.T["REQUEST"], {"d": dig, "c": 0, "id": 1})
        time.sleep(0.5)
        reader.send(wsproto.T["REQUEST"], {"d": dig, "c": 1, "id": 2})
        t, b = answer(reader, 2)
        assert t == wsproto.T["REJECT"] and b["r"] == REJECT_BUSY, (t, b, p.tail())
        # Slots are free for the others.
        plain[0].send(wsproto.T["REQUEST"], {"d": dig, "c": 1, "id": 3})
        t, b = answer(plain[0], 3)
        assert t == wsproto.T["CHUNK"], (t, b, p.tail())

        # The first reader goes: the second is served.
        hog.close()
        conns.remove(hog)
        ok = False
        for rid in range(10, 30):
            reader.send(wsproto.T["REQUEST"], {"d": dig, "c": 1, "id": rid})
            t, b = answer(reader, rid)
            if t == wsproto.T["CHUNK"]:
                ok = True
                break
            time.sleep(0.3)
        assert ok, p.tail()
    finally:
        for c in conns:
            c.close()
        p.stop()
