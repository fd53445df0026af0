"""The last chunks of a file: one whose bytes stop coming is asked elsewhere
within PEER_CHUNK_ENDGAME_STALL_MS, not at its progress deadline.

A p2pd (no tracker, release wanted by digest) fetches from two Python
neighbours (tests/lib/wsproto.py) that both claim every chunk and take
pieces ("live", "mux"). One, the staller, answers each REQUEST with the
chunk's first piece and then sends nothing more for it (as a connection in
TCP retransmission backoff would); the other serves every chunk at once.
Once every chunk is asked for (the file's endgame), the staller's chunks
used to wait for their progress deadline (3 s and more; 11 s for 1 MiB on
a 16 Mbit/s link, which is what held the last node of a 48-node benchmark
run seconds after the rest); now each is canceled after 1.5 s without a
byte and taken from the other neighbour, with no deadline missed.
"""
import os
import threading
import time

from conftest import BUILD
from test_swarm import seed_manifest
import ws
import wsproto

MiB = 1 << 20
NCHUNKS = 8
PIECE = 64 * 1024
STALL_S = 1.5  # PEER_CHUNK_ENDGAME_STALL_MS
SERVE_DELAY_S = 0.2
MUX_MAX = 4  # piece sequences open at once on a connection
REJECT_BUSY = 1


class Neighbour:
    """A keyed neighbour holding every chunk, served from a thread until
    close(): a staller sends the first piece of each of up to four chunks
    and refuses more (busy), else every chunk goes whole, a little later. Records (time, type, body) of what it got."""

    def __init__(self, port, key, node_id, dig, mani, data, staller):
        self.c = wsproto.Conn("127.0.0.1", port, wsproto.read_key(key),
                              node_id=node_id)
        assert self.c.handshake()
        self.dig, self.mani, self.data, self.staller = dig, mani, data, staller
        self.got = []
        self.began = {}  # request id -> (time, chunk): sequences left open
        self.stop = threading.Event()
        self.c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": NCHUNKS, "bits": b"\xff",
                                            "live": True, "mux": True})
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        c = self.c
        c.s.settimeout(0.1)
        try:
            while not self.stop.is_set():
                try:
                    t, b, _ = c.read_frame()
                except TimeoutError:
                    continue
                self.got.append((time.time(), t, b))
                if t == wsproto.T["MANIFEST_REQ"]:
                    if self.staller:  # "release unknown": the other is asked
                        c.send(wsproto.T["REJECT"], {"d": b["d"], "c": 0xFFFFFFFF, "r": 3})
                    else:
                        c.send(wsproto.T["MANIFEST"], {"d": self.dig}, payload=self.mani)
                elif t == wsproto.T["REQUEST"]:
                    g = b["c"]
                    if self.staller and len(self.began) < MUX_MAX:
                        self.began[b["id"]] = (time.time(), g)
                        c.send(wsproto.T["CHUNK"], {"d": self.dig, "c": g, "id": b["id"], "o": 0},
                               payload=self.data[g * MiB:g * MiB + PIECE])
                    elif self.staller:  # a fifth sequence would break "mux"
                        c.send(wsproto.T["REJECT"], {"d": self.dig, "c": g, "id": b["id"],
                                                     "r": REJECT_BUSY})
                    else:
                        # A little later, so that the staller's first
                        # pieces come first and no endgame duplicate goes
                        # out before its chunks are arriving.
                        time.sleep(SERVE_DELAY_S)
                        c.send(wsproto.T["CHUNK"], {"d": self.dig, "c": g, "id": b["id"]},
                               payload=self.data[g * MiB:(g + 1) * MiB])
        except (wsproto.Closed, OSError, ValueError):
            return

    def frames(self, name):
        return [(at, b) for at, t, b in self.got if t == wsproto.T[name]]

    def close(self):
        self.stop.set()
        self.th.join(5)
        self.c.close()


def test_chunk_stalled_in_the_endgame_is_asked_elsewhere(s3env, tmp_path):
    rel = tmp_path / "rel"
    rel.mkdir()
    data = os.urandom(NCHUNKS * MiB)
    (rel / "weights.bin").write_bytes(data)
    mpath, d = seed_manifest(str(rel), tmp_path, MiB)
    dig = bytes.fromhex(d[len("sha256-"):])
    p, key, port = ws.lone_peer(BUILD, str(tmp_path), s3env, "target")
    nbrs = []
    try:
        staller = Neighbour(port, key, "staller", dig, mpath.read_bytes(), data, True)
        nbrs.append(staller)
        server = Neighbour(port, key, "server", dig, mpath.read_bytes(), data, False)
        nbrs.append(server)
        r = p.ctl("prefetch", d, "--wait", "--timeout", "60")
        assert r.returncode == 0, (r.stdout, r.stderr, p.tail())
        ok, bad = ws.tree_equal(str(rel), os.path.join(p.cache, "releases", d))
        assert ok, bad

        began = staller.began
        assert began, ("the staller was never asked", p.tail())  # the stall was made
        canceled = {b["id"]: at for at, b in staller.frames("CANCEL")}
        for rid, (at, g) in began.items():
            assert rid in canceled, (g, began, canceled, p.tail())
            # Not before the stall time, and not at the deadline (3 s on).
            assert canceled[rid] - at >= STALL_S - 0.1, (g, canceled[rid] - at)
        assert p.metric("weightswarm_p2pd_chunks_cut_stalled_total") >= len(began)
        assert p.metric("weightswarm_p2pd_peer_deadlines_missed_total") == 0, p.tail()
        assert p.metric("weightswarm_p2pd_peers_dropped_slow_total") == 0, p.tail()
    finally:
        for n in nbrs:
            n.close()
        p.stop()


def test_payload_nobody_asked_for_is_read_counted_and_dropped(s3env, tmp_path):
    """A CHUNK nobody asked for (an endgame duplicate that lost, a chunk
    canceled after its sender began it) costs its sender's upload for
    nothing: p2pd reads it past, counts it and its bytes, and keeps the
    connection."""
    p, key, port = ws.lone_peer(BUILD, str(tmp_path), s3env, "target")
    c = wsproto.Conn("127.0.0.1", port, wsproto.read_key(key), node_id="stranger")
    try:
        assert c.handshake()
        dig = os.urandom(32)
        sizes = (200_000, PIECE)
        for i, n in enumerate(sizes):
            c.send(wsproto.T["CHUNK"], {"d": dig, "c": i, "id": 1000 + i},
                   payload=os.urandom(n))
        deadline = time.time() + 10
        while (p.metric("weightswarm_p2pd_peer_discarded_bytes_total") < sum(sizes)
               and time.time() < deadline):
            time.sleep(0.05)
        assert p.metric("weightswarm_p2pd_peer_discarded_bytes_total") == sum(sizes), p.tail()
        assert p.metric("weightswarm_p2pd_peer_chunks_discarded_total") == len(sizes)
        assert p.metric("weightswarm_p2pd_peer_rx_bytes_total") == 0
        assert p.metric("weightswarm_p2pd_peer_neighbors") == 1, p.tail()
    finally:
        c.close()
        p.stop()
