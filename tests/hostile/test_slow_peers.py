"""Neighbours that hold a node's time or slots without delivering: each test
plays one liar (keyed, tests/lib/wsproto.py, but for the handshake flood)
against real p2pd processes and a real radosgw, and checks that the honest
node still finishes, within
1.2 x the time the same fetch took without the liar (measured in the same
test) plus SLACK_S:

- a neighbour that claims every chunk, answers a REQUEST with a full-length
  CHUNK header and then trickles one payload byte a second (each byte
  re-armed the idle timer, and the endgame never asked elsewhere: the node
  stayed one chunk short for ever);
- idle keyed connections that fill a node's neighbour slots (the real seed
  was turned away after every handshake and the node stayed at 0 bytes);
- anonymous connections that never start their handshake: past
  PEER_PREAUTH_MAX at once the rest are closed at once and counted in
  weightswarm_p2pd_peer_connections_refused_total, and a keyed neighbour
  gets in after them (this one checks the count and that handshake, not a
  fetch time; the defence predates it, and it fails with the count
  removed);
- "mux" connections that request chunks arriving from S3 and never read
  (their uploads took every upload slot; an honest neighbour got REJECT
  busy for ever).

docs/security.md ("Keyed peers") maps each attack to its defence.
SLACK_S covers what the defences take by design (a progress deadline of
a few seconds, an idle slot holder idle for PEER_NBR_IDLE_MS, a tracker
announce interval, a stalled upload closed after PEER_UPLOAD_STALL_BUSY_MS)
plus noise on a loaded machine; each attack held the old code for far
longer than the bound (for ever, or until the stall fallback at
--stall-timeout).
"""
import os
import select
import socket
import struct
import subprocess
import threading
import time

from conftest import BUILD
from flipproxy import FlipProxy
import ws
import wsproto

MiB = 1 << 20
SLACK_S = 10.0


def bound(clean_s):
    return 1.2 * clean_s + SLACK_S


def send_header(c, type_, body, plen):
    """A frame announcing a payload of plen bytes, none of which is sent."""
    c.send_header(type_, body, plen)


def refuse_manifest(c, b):
    """REJECT "release unknown" to a manifest ask: the node asks the next
    neighbour, or S3, at once."""
    c.send(wsproto.T["REJECT"], {"d": b["d"], "c": 0xFFFFFFFF, "r": 3})


def keyed(port, key, node_id, rcvbuf=None):
    c = wsproto.Conn("127.0.0.1", port, wsproto.read_key(key), node_id=node_id,
                     rcvbuf=rcvbuf)
    assert c.handshake(), node_id
    assert c.sealed, "p2pd speaks version 2: payloads sealed"
    return c


def publish(s3env, rgw, tmp_path, name, nchunks, chunk):
    src = tmp_path / f"src-{name}"
    src.mkdir()
    (src / "weights.bin").write_bytes(os.urandom(nchunks * chunk))
    pub = ws.publish(BUILD, s3env, str(src), f"s3://{rgw.bucket()}/hostile/{name}/",
                     chunk_size=chunk)
    return pub, str(src)


def timed_fetch(p, pub, timeout):
    """Prefetches pub on p and waits (at most timeout s) until it is ready;
    returns the seconds it took."""
    t0 = time.time()
    r = p.ctl("prefetch", pub["uri"])
    assert r.returncode == 0, (r.stdout, r.stderr)
    ws.wait_ready([p], pub["digest"], timeout=timeout)
    return time.time() - t0


def check(p, pub, src):
    ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", pub["digest"]))
    assert ok, bad


def swarm(tmp_path, s3env, rgw, name, nchunks):
    """A tracker and a seed holding a release of nchunks 1 MiB chunks."""
    pub, src = publish(s3env, rgw, tmp_path, name, nchunks, MiB)
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    seed = ws.swarm_peer(BUILD, str(tmp_path), s3env, "seed", trk, key).start()
    seed.ctl("prefetch", pub["uri"], "--wait", check=True)
    return pub, src, key, trk, seed


# ---- a neighbour that trickles one byte a second --------------------------

class Trickler:
    """Claims every chunk; answers the first REQUEST with a full-length CHUNK
    header, then sends one payload byte a second; ignores every other
    request and refuses manifest asks."""

    def __init__(self, port, key, dig, nchunks):
        self.c = keyed(port, key, "trickler")
        self.c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": nchunks,
                                            "bits": b"\xff" * (nchunks // 8)})
        self.dig = dig
        self.header_sent = threading.Event()
        self.trickled = 0
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        c = self.c
        c.s.settimeout(1.0)
        try:
            while True:
                try:
                    t, b, _ = c.read_frame()
                except TimeoutError:
                    t = None
                if t == wsproto.T["MANIFEST_REQ"]:
                    refuse_manifest(c, b)
                elif t == wsproto.T["REQUEST"] and not self.header_sent.is_set():
                    send_header(c, wsproto.T["CHUNK"],
                                {"d": b["d"], "c": b["c"], "id": b.get("id", 0)}, MiB)
                    self.header_sent.set()
                if self.header_sent.is_set() and self.trickled < MiB - 1:
                    c.s.sendall(b"\0")
                    self.trickled += 1
        except (wsproto.Closed, OSError, ValueError):
            return

    def close(self):
        self.c.close()


def test_byte_trickling_neighbour_is_dropped(rgw, s3env, tmp_path):
    nchunks = 16
    pub, src, key, trk, seed = swarm(tmp_path, s3env, rgw, "trickle", nchunks)
    dig = bytes.fromhex(pub["digest"][len("sha256-"):])
    nodes, liar = [], None
    try:
        clean = ws.swarm_peer(BUILD, str(tmp_path), s3env, "clean", trk, key).start()
        nodes.append(clean)
        clean_s = timed_fetch(clean, pub, 120)

        victim = ws.swarm_peer(BUILD, str(tmp_path), s3env, "victim", trk, key).start()
        nodes.append(victim)
        liar = Trickler(ws.listen_port(victim), key, dig, nchunks)
        limit = bound(clean_s)
        took = timed_fetch(victim, pub, limit)
        print(f"clean {clean_s:.1f}s, with the trickler {took:.1f}s (bound {limit:.1f}s)")
        assert liar.header_sent.is_set()  # the attack was made
        check(victim, pub, src)
        assert victim.metric("weightswarm_p2pd_peers_dropped_slow_total") >= 1
        assert victim.metric("weightswarm_p2pd_peer_deadlines_missed_total") >= 1
    finally:
        if liar is not None:
            liar.close()
        for p in nodes + [seed]:
            p.stop()
        trk.stop()


# ---- idle keyed connections in every neighbour slot -----------------------

class IdleCrowd:
    """Keeps n keyed connections to port open that say nothing after the
    handshake (and read what they get, so that nothing else holds them);
    a connection that is closed is opened again."""

    def __init__(self, port, key, n):
        self.port, self.key, self.n = port, key, n
        self.stop = threading.Event()
        self.opened = 0
        self.lock = threading.Lock()
        for i in range(n):
            threading.Thread(target=self.hold, args=(i,), daemon=True).start()
        deadline = time.time() + 30
        while self.opened < n and time.time() < deadline:
            time.sleep(0.05)

    def hold(self, i):
        gen = 0
        while not self.stop.is_set():
            gen += 1
            try:
                c = keyed(self.port, self.key, f"idle-{i}-{gen}")
            except (AssertionError, OSError, wsproto.Closed):
                time.sleep(0.2)
                continue
            with self.lock:
                self.opened += 1
            c.s.settimeout(0.5)
            try:
                while not self.stop.is_set():
                    try:
                        c.read_frame()
                    except TimeoutError:
                        pass
            except (wsproto.Closed, OSError, ValueError):
                pass
            c.close()
            time.sleep(0.2)

    def close(self):
        self.stop.set()


def test_idle_connections_do_not_keep_the_seed_out(rgw, s3env, tmp_path):
    nchunks = 16
    pub, src, key, trk, seed = swarm(tmp_path, s3env, rgw, "idle", nchunks)
    nodes, crowd = [], None
    try:
        clean = ws.swarm_peer(BUILD, str(tmp_path), s3env, "clean", trk, key).start()
        nodes.append(clean)
        clean_s = timed_fetch(clean, pub, 120)

        victim = ws.swarm_peer(BUILD, str(tmp_path), s3env, "victim", trk, key).start()
        nodes.append(victim)
        # Every slot (--max-neighbors 16) and more: whatever room a node
        # lends for a while is taken too, and each one closed comes back.
        crowd = IdleCrowd(ws.listen_port(victim), key, 20)
        assert crowd.opened >= 16
        # Every slot is taken before the victim hears of the seed.
        assert victim.metric("weightswarm_p2pd_peer_neighbors") >= 16
        limit = bound(clean_s)
        took = timed_fetch(victim, pub, limit)
        print(f"clean {clean_s:.1f}s, with 20 idle connections {took:.1f}s "
              f"(bound {limit:.1f}s)")
        check(victim, pub, src)
        r = ws.release_state(victim, pub["digest"])
        assert r["bytes_from_peers"] > 0, r  # from the seed, not S3 at last
    finally:
        if crowd is not None:
            crowd.close()
        for p in nodes + [seed]:
            p.stop()
        trk.stop()


# ---- anonymous connections that never start a handshake --------------------

PREAUTH_MAX = 16  # PEER_PREAUTH_MAX (peer/core/tunables.h)
REFUSED = "weightswarm_p2pd_peer_connections_refused_total"


def test_handshake_flood_is_refused_and_counted(rgw, s3env, tmp_path):
    p, key, lport = ws.lone_peer(BUILD, str(tmp_path), s3env, "flooded")
    flood = []
    try:
        assert p.metric(REFUSED) == 0
        extra = 8
        for _ in range(PREAUTH_MAX + extra):
            flood.append(socket.create_connection(("127.0.0.1", lport), timeout=5))
        deadline = time.time() + 3
        while p.metric(REFUSED) < extra and time.time() < deadline:
            time.sleep(0.05)
        refused = p.metric(REFUSED)
        # The connections past the limit, no more (the handshake timeout of
        # the others is seconds away).
        assert refused == extra, refused
        # The node speaks first: a socket is closed when what it reads ends,
        # open while it waits. Read all at once for 0.5 s, well within the
        # handshake timeout (5 s from the connect), which closes the others.
        closed, open_ = set(), set(flood)
        end = time.time() + 0.5
        while open_ and time.time() < end:
            ready, _, _ = select.select(list(open_), [], [], 0.05)
            for s in ready:
                try:
                    if s.recv(65536):
                        continue
                except ConnectionResetError:
                    pass
                closed.add(s)
                open_.discard(s)
        assert len(closed) == extra, len(closed)
        for s in flood:
            s.close()
        # The daemon is up and a keyed neighbour gets in once the node has
        # seen the flood go (until then it is refused like the others).
        deadline, turned_away = time.time() + 5, 0
        while True:
            c = wsproto.Conn("127.0.0.1", lport, wsproto.read_key(key),
                             node_id="honest-after-flood")
            ok = c.handshake()
            c.close()
            if ok or time.time() > deadline:
                break
            turned_away += 1
            time.sleep(0.1)
        assert ok, turned_away
        assert p.metric(REFUSED) == extra + turned_away
    finally:
        for s in flood:
            s.close()
        p.stop()


# ---- "mux" connections that request and never read ------------------------

UP_CHUNK = 4 * MiB
UP_NCHUNKS = 8
UP_RATE = 2 * MiB  # bytes/s per S3 connection through the proxy


def origin(rgw, s3env, tmp_path, name):
    """p2pd listening, no tracker (it reads every chunk from S3 itself),
    S3 through a proxy that slows each response to UP_RATE."""
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = FlipProxy(host, int(port), flip_at=None, rate=UP_RATE)
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    p, key, lport = ws.lone_peer(BUILD, str(tmp_path), env, name)
    return proxy, p, key, lport


class Hoarder:
    """Says "live" and "mux", requests the first four chunks it hears are
    arriving at the node (HAVE "p"), then never reads again; a tiny receive
    buffer keeps the kernel from reading for it."""

    def __init__(self, port, key, dig, name):
        self.c = keyed(port, key, name, rcvbuf=4096)
        self.c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": UP_NCHUNKS,
                                            "bits": bytes(UP_NCHUNKS // 8),
                                            "live": True, "mux": True})
        self.asked = []
        self.done = threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        c = self.c
        c.s.settimeout(None)
        try:
            while len(self.asked) < 4:
                t, b, _ = c.read_frame()
                if t == wsproto.T["MANIFEST_REQ"]:
                    refuse_manifest(c, b)
                elif t == wsproto.T["HAVE"] and b.get("p"):
                    c.send(wsproto.T["REQUEST"], {"d": b["d"], "c": b["c"],
                                                  "id": 1 + len(self.asked)})
                    self.asked.append(b["c"])
        except (wsproto.Closed, OSError, ValueError):
            pass
        self.done.set()

    def close(self):
        self.c.close()


def honest_reader(port, key, dig, data, deadline):
    """A plain neighbour: asks for each chunk once the node holds it (HAVE),
    again after a REJECT busy, reads everything. Returns when it has every
    chunk, checked against data; the chunks it still lacks at deadline
    otherwise."""
    c = keyed(port, key, "honest")
    c.send(wsproto.T["BITFIELD"], {"d": dig, "tot": UP_NCHUNKS,
                                   "bits": bytes(UP_NCHUNKS // 8)})
    got, retry, nid = {}, {}, 0
    c.s.settimeout(0.2)
    try:
        while len(got) < UP_NCHUNKS and time.time() < deadline:
            try:
                t, b, pl = c.read_frame()
            except TimeoutError:
                t, b, pl = None, {}, b""
            now = time.time()
            if t == wsproto.T["MANIFEST_REQ"]:
                refuse_manifest(c, b)
            elif t == wsproto.T["HAVE"] and not b.get("p") and b["c"] not in got:
                retry[b["c"]] = now
            elif t == wsproto.T["CHUNK"]:
                g = b["c"]
                assert "o" not in b, b
                assert pl == data[g * UP_CHUNK:(g + 1) * UP_CHUNK], g
                got[g] = True
            elif t == wsproto.T["REJECT"] and b["c"] not in got:
                retry[b["c"]] = now + b.get("ra", 250) / 1000.0
            for g, at in list(retry.items()):
                if at <= now:
                    nid += 1
                    c.send(wsproto.T["REQUEST"], {"d": dig, "c": g, "id": nid})
                    del retry[g]
    finally:
        c.close()
    return sorted(set(range(UP_NCHUNKS)) - set(got))


def upload_run(rgw, s3env, tmp_path, pub, data, name, hoarders, limit):
    """One origin node fetching pub from S3, hoarders connected first, and
    an honest reader; returns (seconds the reader took, chunks it lacks,
    the node, the hoarders)."""
    dig = bytes.fromhex(pub["digest"][len("sha256-"):])
    proxy, p, key, lport = origin(rgw, s3env, tmp_path, name)
    hs = [Hoarder(lport, key, dig, f"hoarder-{i}") for i in range(hoarders)]
    out = {}
    t0 = time.time()
    th = threading.Thread(target=lambda: out.setdefault(
        "lack", honest_reader(lport, key, dig, data, t0 + limit)))
    th.start()
    time.sleep(0.3)  # the reader's BITFIELD is in
    r = p.ctl("prefetch", pub["uri"])
    assert r.returncode == 0, (r.stdout, r.stderr)
    th.join(limit + 30)
    took = time.time() - t0
    return took, out.get("lack"), p, hs, proxy


def test_mux_connections_that_never_read_do_not_take_every_upload_slot(
        rgw, s3env, tmp_path):
    pub, src = publish(s3env, rgw, tmp_path, "hoard", UP_NCHUNKS, UP_CHUNK)
    with open(os.path.join(src, "weights.bin"), "rb") as f:
        data = f.read()
    procs, hs = [], []
    try:
        clean_s, lack, p, _, _ = upload_run(rgw, s3env, tmp_path, pub, data,
                                            "clean", 0, 120)
        procs.append(p)
        assert lack == [], (lack, p.tail())

        limit = bound(clean_s)
        took, lack, p, hs, _ = upload_run(rgw, s3env, tmp_path, pub, data,
                                          "victim", 4, limit)
        procs.append(p)
        print(f"clean {clean_s:.1f}s, with 4 hoarders {took:.1f}s (bound {limit:.1f}s)")
        assert all(h.done.is_set() and len(h.asked) == 4 for h in hs), \
            [h.asked for h in hs]  # the attack was made
        assert lack == [], (lack, p.tail())
        assert took <= limit
        # Nor do the hoarders keep their slots: each that got one (with 4
        # slots, the last only for a neighbour holding none, not every
        # hoarder does; the rest were refused busy) holds uploads and reads
        # nothing, and is closed within PEER_UPLOAD_STALL_MS (30 s) of that:
        # then no upload is left (the honest reader has everything).
        deadline = time.time() + 45
        while ((p.metric("weightswarm_p2pd_peer_uploads") > 0
                or p.metric("weightswarm_p2pd_peer_upload_stalls_total") < 1)
               and time.time() < deadline):
            time.sleep(0.5)
        stalls = p.metric("weightswarm_p2pd_peer_upload_stalls_total")
        assert 1 <= stalls <= len(hs), p.tail()
        assert p.metric("weightswarm_p2pd_peer_uploads") == 0, p.tail()
    finally:
        for h in hs:
            h.close()
        for p in procs:
            p.stop()
