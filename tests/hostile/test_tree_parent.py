"""A keyed member that the tracker makes a stripe-tree parent (p2p-tracker
--stripes, docs/tracker.md "Stripe trees") and that never offers its
stripe, against a real p2p-tracker, real p2pd nodes and a real radosgw.

The liar joins the swarm first, so it is member 0: the root of stripe 0
and the parent in it of members 1 and 2. It asks for no leases (its
stripe is then anyone's to read from S3), answers the nodes' dials with a
good handshake, says it holds nothing and stays connected. p2pd asked a
stripe's chunks only of its parent there while that parent was a ready
neighbour, so members 1 and 2 never asked anyone for the stripe-0 chunks
they had not read themselves: they waited out --stall-timeout, reported
those chunks stuck, and read them from S3 again. Now a parent that has
offered none of its stripe's chunks that the node lacks for
PEER_TREE_GRACE_MS no longer holds that stripe (peer/swarm/picker.c).
Asserted: the nodes finish within 1.2 x the time the same fetch took
without the liar (measured first, same test) plus SLACK_S, and S3 sends
the release about once (<= 1.02 x F).

S3 is slowed (a proxy, 2 MiB/s per response) so that the fetch lasts
long enough for the trees to matter. SLACK_S covers what the defence
takes by design (PEER_TREE_GRACE_MS, 3 s, once for the trees to come and
once for the stripe to open) plus noise on a loaded machine; before the
fix the nodes waited --stall-timeout (20 s, the default these nodes run
with) before any S3 read of those chunks.
"""
import os
import socket
import threading
import time

from conftest import BUILD
from flipproxy import FlipProxy
import ws
import wsproto

MiB = 1 << 20
NCHUNKS = 48
STRIPES = 2
SLACK_S = 8.0
S3_RATE = 2 * MiB  # bytes/s per S3 response through the proxy


def bound(clean_s):
    return 1.2 * clean_s + SLACK_S


class SilentParent:
    """A keyed member with a listen port: announces the release first (no
    chunks, no leases wanted), answers every dial with a good handshake and
    a BITFIELD with no chunk set, refuses manifest asks, and says nothing
    else."""

    def __init__(self, trk, key, digest):
        self.key = wsproto.read_key(key)
        self.digest = digest
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.conns = []
        self.bitfields = 0  # BITFIELDs the nodes sent it for the release
        self.stop = threading.Event()
        self.trk = wsproto.Conn("127.0.0.1", trk.port, self.key, node_id="liar",
                                listen_port=self.port)
        assert self.trk.handshake(), "the liar's tracker handshake failed"
        self.body = {"d": digest, "tot": NCHUNKS, "ev": 1, "role": 0, "want": False,
                     "port": self.port, "zone": "", "have": bytes(NCHUNKS // 8)}
        self.trk.send(wsproto.T["ANNOUNCE"], self.body)
        t, b, _ = self.trk.read_frame()
        assert wsproto.NAMES.get(t) == "ANNOUNCE_REPLY", (t, b)
        threading.Thread(target=self.announce, daemon=True).start()
        threading.Thread(target=self.accept, daemon=True).start()

    def announce(self):
        """Stays a member: re-announces every 2 s, reads the replies."""
        last = time.time()
        self.trk.s.settimeout(0.5)
        while not self.stop.is_set():
            try:
                self.trk.read_frame()
            except (TimeoutError, socket.timeout):
                pass
            except (wsproto.Closed, OSError, ValueError):
                return
            if time.time() - last >= 2:
                last = time.time()
                self.body["ev"] = 0
                try:
                    self.trk.send(wsproto.T["ANNOUNCE"], self.body)
                except OSError:
                    return

    def accept(self):
        while not self.stop.is_set():
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, s):
        c = wsproto.Conn.accepted(s, self.key, node_id="liar", listen_port=self.port)
        if not c.respond():
            c.close()
            return
        self.conns.append(c)
        c.s.settimeout(None)
        try:
            while not self.stop.is_set():
                t, b, _ = c.read_frame()
                if t == wsproto.T["BITFIELD"] and b.get("d") == self.digest:
                    self.bitfields += 1
                    c.send(wsproto.T["BITFIELD"], {"d": self.digest, "tot": NCHUNKS,
                                                   "bits": bytes(NCHUNKS // 8),
                                                   "live": True})
                elif t == wsproto.T["MANIFEST_REQ"]:
                    c.send(wsproto.T["REJECT"], {"d": b["d"], "c": 0xFFFFFFFF, "r": 3})
        except (wsproto.Closed, OSError, ValueError):
            pass

    def close(self):
        self.stop.set()
        self.ls.close()
        self.trk.close()
        for c in self.conns:
            c.close()


def publish(s3env, rgw, tmp_path, name):
    src = tmp_path / f"src-{name}"
    src.mkdir()
    (src / "weights.bin").write_bytes(os.urandom(NCHUNKS * MiB))
    pub = ws.publish(BUILD, s3env, str(src), f"s3://{rgw.bucket()}/tree/{name}/",
                     chunk_size=MiB)
    return pub, str(src)


def fetch(tmp_path, s3env, trk, key, pub, src, prefix, timeout):
    """Four nodes prefetch pub at once; returns (seconds until all had it
    ready, bytes they read from S3)."""
    peers = [ws.swarm_peer(BUILD, str(tmp_path), s3env, f"{prefix}{i}", trk, key).start()
             for i in range(4)]
    try:
        t0 = time.time()
        for p in peers:
            r = p.ctl("prefetch", pub["uri"])
            assert r.returncode == 0, (r.stdout, r.stderr)
        ws.wait_ready(peers, pub["digest"], timeout=timeout)
        took = time.time() - t0
        for p in peers:
            ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", pub["digest"]))
            assert ok, bad
            with open(p.log) as f:
                assert f": {STRIPES} stripe trees" in f.read(), p.tail()
        return took, sum(ws.release_state(p, pub["digest"])["bytes_from_s3"] for p in peers)
    finally:
        for p in peers:
            p.stop()


def test_silent_tree_parent_does_not_hold_its_stripe(rgw, s3env, tmp_path):
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = FlipProxy(host, int(port), flip_at=None, rate=S3_RATE)
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key, extra=["--stripes", str(STRIPES)]).start()
    liar = None
    try:
        pub, src = publish(s3env, rgw, tmp_path, "clean")
        clean_s, clean_s3 = fetch(tmp_path, env, trk, key, pub, src, "clean", 120)
        assert clean_s3 <= 1.02 * NCHUNKS * MiB, clean_s3

        pub, src = publish(s3env, rgw, tmp_path, "liar")
        liar = SilentParent(trk, key, bytes.fromhex(pub["digest"][len("sha256-"):]))
        limit = bound(clean_s)
        took, s3 = fetch(tmp_path, env, trk, key, pub, src, "h", limit)
        print(f"clean {clean_s:.1f}s, with the silent parent {took:.1f}s (bound {limit:.1f}s); "
              f"S3 {s3 / (NCHUNKS * MiB):.3f} x F; {len(liar.conns)} nodes dialled it, "
              f"{liar.bitfields} BITFIELDs")
        # The attack took place: nodes dialled their parent and told it
        # they fetch the release.
        assert liar.bitfields >= 1, "no node announced the release to the liar"
        assert took <= limit, (took, limit)
        assert s3 <= 1.02 * NCHUNKS * MiB, f"S3 sent {s3 / (NCHUNKS * MiB):.3f} x the release"
    finally:
        if liar is not None:
            liar.close()
        trk.stop()
        proxy.close()
