"""p2p-tracker end to end: the real binary, real sockets, an independent
client (python msgpack + hashlib/hmac, written from docs/protocol.md).

Covers the handshake (right and wrong cluster key), announce replies
(leases, peers, wanted), HAVE/LEASE_* refills, disconnect freeing leases,
the HTTP API (dashboard, healthz, swarms, metrics, prefetch add/list/delete),
--state persistence across a restart, and SIGTERM shutdown (GOODBYE, exit 0).
WS_TRACKER_BIN names the binary.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "lib"))
import trkclient  # noqa: E402

BIN = os.environ.get("WS_TRACKER_BIN", "")
KEY = bytes(range(32))
HEX = "ab" * 32
DIGEST = bytes.fromhex(HEX)
URI = "s3://models/llama/sha256-" + HEX + "/"
T = trkclient.T


def Peer(port, node_id, key=KEY, **kw):
    return trkclient.Peer(port, node_id, key, DIGEST, **kw)


def lease_chunks(rep):
    return sorted(c for l in rep.get("leases", []) for c in l["c"])


class Tracker:
    def __init__(self, tmp_path, key_hex=KEY.hex(), state=None):
        if not BIN:
            pytest.skip("WS_TRACKER_BIN not set")
        kf = tmp_path / "cluster.key"
        kf.write_text(key_hex + "\n")
        tf = tmp_path / "api.token"  # POST/DELETE need it (docs/api.md)
        self.token = os.urandom(24).hex()
        tf.write_text(self.token + "\n")
        # 8 leases per peer with 2 downloaders, as the lease flows here
        # count (the default target divides 8; its policy has unit tests).
        args = [BIN, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
                "--cluster-key", str(kf), "--api-token-file", str(tf),
                "--log-level", "info",
                "--origin-inflight", "16"]
        if state:
            args += ["--state", str(state)]
        self.log = open(tmp_path / "tracker.log", "wb+")
        self.p = subprocess.Popen(args, stderr=self.log)
        self.port = self.http = None
        deadline = time.time() + 10
        while time.time() < deadline and self.http is None:
            time.sleep(0.05)
            text = self.text()
            m = re.search(r"peer protocol on \S+ \(port (\d+)\)", text)
            h = re.search(r"http on \S+ \(port (\d+)\)", text)
            if m and h:
                self.port, self.http = int(m.group(1)), int(h.group(1))
        assert self.http, self.text()

    def text(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http}{path}",
                                    timeout=5) as r:
            return r.status, r.headers.get("Content-Type"), r.read()

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.http}{path}",
                                     data=data, method=method,
                                     headers={"Authorization": "Bearer " + self.token})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                raw = r.read()
                return r.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=10)
        self.log.close()
        return rc


@pytest.fixture
def trk(tmp_path):
    t = Tracker(tmp_path)
    yield t
    if t.p.poll() is None:
        t.p.kill()
        t.p.wait()


def test_wrong_key_learns_nothing(trk):
    with pytest.raises((EOFError, ConnectionResetError)):
        Peer(trk.port, "intruder", key=bytes(32))
    _, _, body = trk.get("/api/v1/swarms")
    assert json.loads(body)["peers"] == 0


def test_leases_spread_and_refill(trk):
    a = Peer(trk.port, "node-a", listen_port=7001, zone="z1")
    b = Peer(trk.port, "node-b", listen_port=7002, zone="z1")
    ra = a.announce(uri=URI)
    assert ra["d"] == DIGEST and ra["iv"] > 0
    assert lease_chunks(ra) == list(range(8))  # alone: 8 at once
    rb = b.announce()
    assert lease_chunks(rb) == list(range(8, 16))  # disjoint, next in line
    assert [p["id"] for p in rb["peers"]] == ["node-a"]
    assert rb["peers"][0]["port"] == 7001 and rb["peers"][0]["host"]
    assert all(l["ttl"] > 1000 for l in rb["leases"])
    # HAVE completes a lease; the reply refills it.
    a.send(T["HAVE"], {"d": DIGEST, "c": 0})
    typ, rep = a.recv()
    assert typ == T["ANNOUNCE_REPLY"]
    assert lease_chunks(rep) == [1, 2, 3, 4, 5, 6, 7, 16]
    # LEASE_RENEW with a done chunk and a renew; LEASE_RELEASE refills too.
    a.send(T["LEASE_RENEW"], {"d": DIGEST, "c": [2], "done": [1]})
    typ, rep = a.recv()
    assert lease_chunks(rep) == [2, 3, 4, 5, 6, 7, 16, 17]
    a.send(T["LEASE_RELEASE"], {"d": DIGEST, "c": [3], "done": []})
    typ, rep = a.recv()
    assert 3 not in lease_chunks(rep) and len(lease_chunks(rep)) == 8
    # A disconnects: its leases are leasable at once, and so are the
    # chunks only A held (0 and 1): the swarm needs the origin again.
    a.close()
    time.sleep(0.3)
    b.send(T["LEASE_RELEASE"], {"d": DIGEST, "c": [8], "done": []})
    typ, rep = b.recv()
    assert lease_chunks(rep) == [0] + list(range(9, 16))
    _, _, body = trk.get("/api/v1/swarms/sha256-" + HEX)
    sw = json.loads(body)
    assert sw["members"] == 1 and sw["chunks_held"] == 0
    # Alone, b's share is all 8 origin fetches; the spare would be a 9th,
    # over the per-member maximum of 8.
    assert sw["lease_cap"] == 8 and sw["lease_limit"] == 8, sw
    b.close()


def test_http_api_and_prefetch(trk):
    st, ctype, page = trk.get("/")
    assert st == 200 and ctype.startswith("text/html")
    assert b"/api/v1/swarms" in page and b"http://" not in page
    assert b"https://" not in page  # self-contained: no CDN
    assert trk.get("/healthz")[2] == b"ok\n"
    # The readiness probe answers on --http as on --metrics.
    st, _, body = trk.get("/readyz")
    assert st == 200 and body == b"ok\n", (st, body)
    a = Peer(trk.port, "node-a")
    a.announce(uri=URI)
    st, body = trk.call("GET", "/api/v1/swarms")
    assert st == 200 and body["swarms"][0]["digest"] == "sha256-" + HEX
    assert body["swarms"][0]["uri"] == URI
    st, body = trk.call("GET", "/api/v1/swarms/sha256-" + "00" * 32)
    assert st == 404
    st, _, metrics = trk.get("/metrics")
    assert b"\nweightswarm_tracker_peers 1\n" in metrics
    assert b"weightswarm_tracker_conns 1\n" in metrics
    # Prefetch by URI of another release; by digest of the known one.
    other = "cd" * 32
    st, body = trk.call("POST", "/api/v1/prefetch",
                        {"uri": "s3://models/x/sha256-" + other + "/"})
    assert st == 201 and body["digest"] == "sha256-" + other
    st, body = trk.call("POST", "/api/v1/prefetch", {"digest": "sha256-" + HEX})
    assert st == 201 and body["uri"] == URI
    st, body = trk.call("POST", "/api/v1/prefetch", {"digest": "sha256-" + HEX})
    assert st == 200 and body["created"] is False
    assert trk.call("POST", "/api/v1/prefetch", {"digest": "sha256-" + "ee" * 32})[0] == 404
    assert trk.call("POST", "/api/v1/prefetch", {"uri": "s3://b/legacy/v1/"})[0] == 400
    assert trk.call("POST", "/api/v1/prefetch", [1])[0] == 400
    # Every peer, including one that joins later, is told; a member of the
    # release is not told about that release.
    rep = a.announce()
    assert [w["d"].hex() for w in rep["wanted"]] == [other]
    c = Peer(trk.port, "node-c")
    rep = c.announce(tot=0)  # knows no manifest yet: no join, peers + wanted
    assert sorted(w["d"].hex() for w in rep["wanted"]) == sorted([HEX, other])
    assert [p["id"] for p in rep.get("peers", [])] == ["node-a"]
    st, body = trk.call("GET", "/api/v1/prefetch")
    assert len(body["wanted"]) == 2
    assert trk.call("DELETE", "/api/v1/prefetch/sha256-" + other)[0] == 204
    assert trk.call("DELETE", "/api/v1/prefetch/sha256-" + other)[0] == 404
    a.close()
    c.close()


def test_errors_keep_connection(trk):
    a = Peer(trk.port, "node-a")
    a.announce(tot=10)
    a.send(T["ANNOUNCE"], {"d": DIGEST, "tot": 11, "role": 0, "want": True})
    typ, body = a.recv()
    assert typ == T["ERROR"] and "announce" in body["msg"]
    rep = a.announce(tot=10)  # still usable
    assert len(lease_chunks(rep)) == 8
    a.close()


def test_reconnect_replaces_old_connection(trk):
    a1 = Peer(trk.port, "same-node")
    a1.announce()
    a2 = Peer(trk.port, "same-node")
    rep = a2.announce()
    assert lease_chunks(rep) == list(range(8))  # old leases were freed
    with pytest.raises((EOFError, ConnectionResetError)):
        a1.recv()
    a2.close()


def test_sigterm_says_goodbye(trk):
    a = Peer(trk.port, "node-a")
    a.announce()
    trk.p.send_signal(signal.SIGTERM)
    typ, body = a.recv()
    assert typ == T["GOODBYE"] and body["r"] == 0
    assert trk.p.wait(timeout=10) == 0
    a.close()


def test_state_survives_restart(tmp_path):
    state = tmp_path / "wanted.json"
    t = Tracker(tmp_path, state=state)
    st, _ = t.call("POST", "/api/v1/prefetch", {"uri": URI})
    assert st == 201
    time.sleep(0.3)
    assert t.stop() == 0
    assert json.loads(state.read_text())["wanted"][0]["uri"] == URI
    t = Tracker(tmp_path, state=state)
    try:
        st, body = t.call("GET", "/api/v1/prefetch")
        assert body["wanted"][0]["digest"] == "sha256-" + HEX
        p = Peer(t.port, "late")
        rep = p.announce(tot=0, d=bytes(32))
        assert [w["d"] for w in rep["wanted"]] == [DIGEST]
        p.close()
    finally:
        assert t.stop() == 0


def test_bad_key_file_is_usage_error(tmp_path):
    if not BIN:
        pytest.skip("WS_TRACKER_BIN not set")
    kf = tmp_path / "k"
    kf.write_text("nothex")
    r = subprocess.run([BIN, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
                        "--cluster-key", str(kf)], capture_output=True, timeout=10)
    assert r.returncode == 2
    r = subprocess.run([BIN], capture_output=True, timeout=10)
    assert r.returncode == 2
