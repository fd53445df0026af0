"""Liveness: a holder nobody can reach (docs/operations.md, "Liveness
contract").

A member with the cluster key announces the release with every chunk set
and never serves: it has no listen port, so nobody can even ask it. The
tracker then sees every chunk held and nothing needing S3, so before the
fix it granted no lease and three honest nodes stayed at 0 bytes for good.
Now each honest node finds itself stalled after --stall-timeout, names the
chunks it waits on in its announce ("st"), and the tracker leases each such
chunk to one of them: the chunks leave S3 about once and the nodes swap
them. Asserted: all three ready within a bound, S3 bytes (the nodes' own
bytes_from_s3) <= 1.5 x the release, and the API said "stalled" meanwhile.
"""
import math
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import BUILD, s3_environ
import ws
import wsproto

MiB = 1 << 20
CHUNK = 1 * MiB
STALL_S = 4
READY_BOUND_S = 75


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    d = tmp_path_factory.mktemp("stallrel") / "model"
    ws.make_release(str(d), shard_bytes=4 * MiB, nshards=3, seed="stall")
    return str(d)


@pytest.fixture(scope="module")
def pub(rgw, rel):
    return ws.publish(BUILD, s3_environ(rgw), rel, f"s3://{rgw.bucket()}/m/stall/",
                      CHUNK)


def release_shape(d):
    """(total chunks, total bytes) of the release directory, as the
    manifest counts them: ceil(size / chunk) per file, 0 for empty ones."""
    chunks = size = 0
    for root, _, names in os.walk(d):
        for n in names:
            s = os.path.getsize(os.path.join(root, n))
            chunks += math.ceil(s / CHUNK)
            size += s
    return chunks, size


class SilentPort:
    """A listening socket that accepts and never says a byte (the liar's
    port, when it has one): dialers wait out their handshake deadline."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.held = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            try:
                self.held.append(self.ls.accept()[0])
            except OSError:
                return

    def close(self):
        self.ls.close()
        for s in self.held:
            s.close()


class Liar:
    """A keyed member that claims every chunk and never serves: no listen
    port, or one that accepts and stays silent; re-announcing so the
    tracker keeps it."""

    def __init__(self, trk, key, digest, total, port=0):
        self.c = wsproto.Conn("127.0.0.1", trk.port, wsproto.read_key(key),
                              node_id="liar", listen_port=port)
        assert self.c.handshake(), "liar: handshake with the tracker failed"
        nbytes = (total + 7) // 8
        bits = bytearray(b"\xff" * nbytes)
        if total % 8:
            bits[-1] = (0xff << (8 - total % 8)) & 0xff
        self.ann = {"d": bytes.fromhex(digest.split("-", 1)[1]), "tot": total,
                    "ev": 1, "role": 0, "want": False, "port": port, "zone": "",
                    "have": bytes(bits)}
        self.stop = threading.Event()
        self.replies = 0
        self.c.send(wsproto.T["ANNOUNCE"], self.ann)
        t, _, _ = self.c.read_frame()
        assert wsproto.NAMES.get(t) == "ANNOUNCE_REPLY", wsproto.NAMES.get(t)
        self.ann["ev"] = 0
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        last = time.time()
        self.c.s.settimeout(1)
        while not self.stop.is_set():
            try:
                self.c.read_frame()  # replies; never answers anything
            except Exception:
                pass
            if time.time() - last >= 4:
                last = time.time()
                try:
                    self.c.send(wsproto.T["ANNOUNCE"], self.ann)
                except OSError:
                    return

    def close(self):
        self.stop.set()
        self.th.join(5)
        self.c.close()


def supports_stall_flag(build):
    r = subprocess.run([os.path.join(build, "peer", "p2pd"), "--help"],
                       capture_output=True, text=True, timeout=30)
    return "--stall-timeout" in r.stdout + r.stderr


@pytest.mark.parametrize("holder", ["no-port", "silent-port"])
def test_unreachable_holder_does_not_stall_the_swarm(tmp_path, s3env, pub, rel,
                                                     holder):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    total, size = release_shape(rel)
    silent = SilentPort() if holder == "silent-port" else None
    liar = Liar(trk, key, pub["digest"], total, silent.port if silent else 0)
    extra = ["--stall-timeout", str(STALL_S)] if supports_stall_flag(BUILD) else []
    peers = []
    try:
        for i in range(3):
            peers.append(ws.swarm_peer(BUILD, str(tmp_path), s3env, f"h{i}", trk,
                                       key, extra=extra).start())
        for p in peers:
            p.ctl("prefetch", pub["uri"], check=True)
        stalled_seen = False
        states = {}
        deadline = time.time() + READY_BOUND_S
        while time.time() < deadline:
            states = {p.dir: ws.release_state(p, pub["digest"]) for p in peers}
            for r in states.values():
                assert r is None or r["state"] != "failed", r
                stalled_seen |= bool(r and r.get("stalled"))
            if all(r and r["state"] == "ready" for r in states.values()):
                break
            time.sleep(0.2)
        got = {d: (r["state"], r["bytes_done"]) if r else None
               for d, r in states.items()}
        st, sw = trk.get("/api/v1/swarms")
        assert all(r and r["state"] == "ready" for r in states.values()), (
            f"not all ready within {READY_BOUND_S} s behind a holder nobody "
            f"can reach: {got}; tracker: {sw}")
        for p in peers:
            ok, bad = ws.tree_equal(rel, os.path.join(p.cache, "releases",
                                                      pub["digest"]))
            assert ok, f"{p.dir}: {bad} differs"
        s3 = sum(r["bytes_from_s3"] for r in states.values())
        assert s3 <= 1.5 * size, f"S3 sent {s3 / size:.2f} x the release"
        assert stalled_seen, "the API never reported the release stalled"
        assert sum(p.metric("weightswarm_p2pd_release_stalls_total")
                   for p in peers) >= 1
    finally:
        for p in peers:
            p.stop()
        liar.close()
        if silent:
            silent.close()
        trk.stop()
