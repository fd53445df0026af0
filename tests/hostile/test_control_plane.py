"""The control plane under attack (docs/security.md, "Control plane"):
anonymous callers of the tracker's and p2pd's TCP APIs, slow-loris clients
that try to keep /healthz from answering, and daemons started without their
secrets.

Against the binaries before the defence (a regression run with an older
build) the helpers start the daemons the same way minus the options that
build does not know (ws.supports): the attack then succeeds, and that is
what fails the test.
"""
import json
import os
import socket
import subprocess
import time

import pytest

import ws
from conftest import BUILD, binary

MiB = 1 << 20
DIGEST = "sha256-" + "ab" * 32
URI = f"s3://models/prod/m/{DIGEST}/"


def call(port, method, path, body=None, token=None, timeout=10):
    """One request on a fresh connection: (status, headers, parsed body)."""
    return ws.http_json("127.0.0.1", port, method, path, body, token, timeout)


def wanted(trk):
    st, _, body = call(trk.http, "GET", "/api/v1/prefetch", token=trk.token)
    assert st == 200, body
    return [w["digest"] for w in body["wanted"]]


def tracker_metric(trk, name):
    """One sample of the tracker's /metrics (0 when absent)."""
    st, _, text = call(trk.http, "GET", "/metrics", token=trk.token)
    assert st == 200, text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def assert_401(st, hdrs, body):
    assert st == 401, (st, body)
    assert hdrs.get("WWW-Authenticate", "").startswith("Bearer"), dict(hdrs)
    assert body["error"]["code"] == "WS_EAUTH", body


def test_tracker_writes_need_the_token(tmp_path):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    try:
        # Anonymous: refused, and the wanted set stays as it was.
        assert_401(*call(trk.http, "POST", "/api/v1/prefetch", {"uri": URI}))
        assert wanted(trk) == []
        assert_401(*call(trk.http, "POST", "/api/v1/prefetch", {"uri": URI},
                         token="not-the-token-0123456789"))
        assert wanted(trk) == []
        # With the token: the autoscaler's call works.
        st, _, body = call(trk.http, "POST", "/api/v1/prefetch", {"uri": URI}, token=trk.token)
        assert st == 201, body
        assert wanted(trk) == [DIGEST]
        # Nobody else can take it away.
        assert_401(*call(trk.http, "DELETE", f"/api/v1/prefetch/{DIGEST}"))
        assert_401(*call(trk.http, "DELETE", f"/api/v1/prefetch/{DIGEST}", token=trk.token[:-1]))
        assert wanted(trk) == [DIGEST]
        # Filling the wanted set anonymously (64 entries) gets nowhere.
        for i in range(70):
            st, _, _ = call(trk.http, "POST", "/api/v1/prefetch",
                            {"uri": f"s3://models/x/sha256-{i:064x}/"})
            assert st == 401, (i, st)
        assert wanted(trk) == [DIGEST]
        # ... and each refusal is counted where an operator looks.
        assert tracker_metric(trk, "weightswarm_tracker_http_unauthorized_total") >= 70 + 4
        st, _, body = call(trk.http, "DELETE", f"/api/v1/prefetch/{DIGEST}", token=trk.token)
        assert st == 204, body
        assert wanted(trk) == []
        # Reads stay open by default (dashboard, p2pctl targets).
        st, _, _ = call(trk.http, "GET", "/api/v1/swarms")
        assert st == 200
    finally:
        trk.stop()


def test_tracker_reads_closed_on_request(tmp_path):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    tracker_bin = os.path.join(BUILD, "tracker", "p2p-tracker")
    extra = ["--api-token-reads"] if ws.supports(tracker_bin, "--api-token-reads") else []
    trk = ws.Tracker(BUILD, str(tmp_path), key, extra).start()
    try:
        for path in ("/api/v1/prefetch", "/api/v1/swarms", "/metrics", "/"):
            assert_401(*call(trk.http, "GET", path))
            st, _, _ = call(trk.http, "GET", path, token=trk.token)
            assert st == 200, path
        # The probes need no token.
        for probe in ("/healthz", "/readyz"):
            st, _, body = call(trk.http, "GET", probe)
            assert st == 200, (probe, body)
        # p2pctl targets sends the token from the file.
        ctl = binary("tools/p2pctl")
        r = subprocess.run([ctl, "targets", f"127.0.0.1:{trk.http}"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and "401" in r.stderr, (r.returncode, r.stderr)
        r = subprocess.run([ctl, "targets", f"127.0.0.1:{trk.http}", "--json",
                            "--api-token-file", trk.token_file],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["wanted"] == []
    finally:
        trk.stop()


def test_p2pd_http_needs_the_token(rgw, s3env, tmp_path):
    src = ws.make_release(str(tmp_path / "model"), shard_bytes=1 * MiB, nshards=1, seed="cp")
    pub = ws.publish(BUILD, s3env, src, f"s3://{rgw.bucket()}/m/cp/", chunk_size=MiB)
    port = ws.free_port()
    token_file = ws.write_token(str(tmp_path / "api.token"))
    token = ws.read_token(token_file)
    p2pd_bin = os.path.join(BUILD, "peer", "p2pd")
    extra = ["--http", f"127.0.0.1:{port}"]
    if ws.supports(p2pd_bin, "--api-token-file"):
        extra += ["--api-token-file", token_file, "--api-token-reads"]
    d = ws.P2pd(BUILD, str(tmp_path), s3env, extra=extra).start()
    try:
        assert_401(*call(port, "POST", "/api/v1/prefetch", {"uri": pub["uri"]}))
        assert_401(*call(port, "GET", "/api/v1/releases"))
        assert_401(*call(port, "DELETE", f"/api/v1/releases/{pub['digest']}/holds/x"))
        # Nothing was fetched (the unix socket is trusted: no token there).
        st, rels = d.api("GET", "/api/v1/releases")
        assert st == 200 and rels["releases"] == [], rels
        for probe in ("/healthz", "/readyz"):
            st, _, _ = call(port, "GET", probe)
            assert st == 200, probe
        assert d.metric("weightswarm_p2pd_http_unauthorized_total") == 3
        st, _, body = call(port, "POST", "/api/v1/prefetch", {"uri": pub["uri"]}, token=token,
                           timeout=120)
        assert st == 200, body
        st, _, rels = call(port, "GET", "/api/v1/releases", token=token)
        assert st == 200 and [r["digest"] for r in rels["releases"]] == [pub["digest"]], rels
    finally:
        d.stop()


def test_slow_loris_cannot_starve_healthz(tmp_path):
    """70 clients each send one header byte every 2 s (each byte used to
    re-arm the idle timer, so they held the tracker's 64 slots for good and
    /healthz answered 503). Now the header deadline (10 s from accept)
    closes them, and while they hold slots a probe takes the slot of the
    one that has been reading the longest."""
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    line = b"GET /api/v1/swarms HTTP/1.1\r\nHost: tracker\r\nX-Slow: " + b"a" * 64
    slow = []
    try:
        for _ in range(70):
            s = socket.create_connection(("127.0.0.1", trk.http), timeout=5)
            s.setblocking(False)
            slow.append({"sock": s, "t0": time.time(), "sent": 0, "closed": None, "got": b""})
            time.sleep(0.01)

        def poll_slow(send):
            for c in slow:
                if c["closed"] is not None:
                    continue
                try:
                    data = c["sock"].recv(4096)
                    c["got"] += data
                    if not data:
                        c["closed"] = time.time()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    c["closed"] = time.time()
                    continue
                if send and c["sent"] < len(line):
                    try:
                        c["sock"].send(line[c["sent"]:c["sent"] + 1])
                        c["sent"] += 1
                    except OSError:
                        c["closed"] = time.time()

        probes = []
        start = time.time()
        next_byte = 0.0
        while time.time() - start < 16:
            now = time.time()
            send = now >= next_byte
            if send:
                next_byte = now + 2.0
            poll_slow(send)
            t = time.time()
            try:
                st, _, _ = call(trk.http, "GET", "/healthz", timeout=5)
            except OSError as e:
                st = repr(e)
            probes.append((round(t - start, 1), st, round(time.time() - t, 2)))
            time.sleep(0.5)
        bad = [p for p in probes if p[1] != 200 or p[2] > 3]
        assert not bad, f"{len(bad)} of {len(probes)} probes failed: {bad[:8]}"
        # Every slow client was closed by the server, none later than the
        # header deadline (10 s) plus slack after it connected; those that
        # kept their slot to the end were told 408.
        deadline = time.time() + 10
        while time.time() < deadline and any(c["closed"] is None for c in slow):
            poll_slow(False)
            time.sleep(0.2)
        open_ = [c for c in slow if c["closed"] is None]
        assert not open_, f"{len(open_)} slow clients still connected"
        late = [round(c["closed"] - c["t0"], 1) for c in slow if c["closed"] - c["t0"] > 17]
        assert not late, late
        timed_out = [c for c in slow if b" 408 " in c["got"]]
        assert timed_out and all(b"headers not received in time" in c["got"] for c in timed_out)
        assert tracker_metric(trk, "weightswarm_tracker_http_deadline_closed_total") >= \
            len(timed_out)
    finally:
        for c in slow:
            c["sock"].close()
        trk.stop()


def start_fails(argv, timeout=5):
    """Runs argv; returns (exit code, output) if it exits within timeout,
    else kills it and fails: the daemon started without its secrets."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        pytest.fail(f"{os.path.basename(argv[0])} started without its secrets: {out[-2000:]}")
    return p.returncode, out


def test_daemons_refuse_to_start_without_their_secrets(tmp_path):
    tracker_bin = binary("tracker/p2p-tracker")
    p2pd_bin = binary("peer/p2pd")
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    token = ws.write_token(str(tmp_path / "api.token"))
    base = [tracker_bin, "--listen", f"127.0.0.1:{ws.free_port()}",
            "--http", f"127.0.0.1:{ws.free_port()}"]
    # The tracker: no key; a key but no token. (An older build knows no
    # --api-token-file: started without it, it runs keyless, and fails.)
    has_token_opt = ws.supports(tracker_bin, "--api-token-file")
    rc, out = start_fails(base + (["--api-token-file", token] if has_token_opt else []))
    assert rc == 2 and "cluster key" in out and "--insecure" in out, out
    rc, out = start_fails(base + ["--cluster-key", key])
    assert rc == 2 and "API token" in out and "--insecure" in out, out
    # A bad token file is refused, with the reason.
    for content, why in (("short\n", "shorter than 16"), ("a" * 300, "longer than 256"),
                         ("two words here, spaced\n", "spaces")):
        bad = tmp_path / "bad.token"
        bad.write_text(content)
        rc, out = start_fails(base + ["--cluster-key", key, "--api-token-file", str(bad)])
        assert rc == 2 and why in out, (content, out)
    # p2pd in swarm mode without a key, and --http without a token.
    cache, sock = str(tmp_path / "cache"), str(tmp_path / "p2pd.sock")
    pbase = [p2pd_bin, "--cache", cache, "--api", sock]
    rc, out = start_fails(pbase + ["--listen", f"127.0.0.1:{ws.free_port()}",
                                   "--tracker", "127.0.0.1:1"])
    assert rc == 2 and "cluster key" in out and "--insecure" in out, out
    rc, out = start_fails(pbase + ["--http", f"127.0.0.1:{ws.free_port()}"])
    assert rc == 2 and "API token" in out and "--insecure" in out, out
    # --insecure starts them, saying so loudly.
    trk = ws.Tracker(BUILD, str(tmp_path), None, token=False).start()
    try:
        assert "INSECURE" in open(trk.log).read()
        st, _, _ = call(trk.http, "POST", "/api/v1/prefetch", {"uri": URI})
        assert st == 201  # what --insecure means: an open API
    finally:
        trk.stop()


def test_seed_manifest_fifo_does_not_hold_a_worker(s3env, tmp_path):
    """POST /api/v1/seed naming a FIFO that has no writer as its manifest:
    the worker used to block in open(2) for ever (the request never
    answered, the worker lost); it is refused as not a regular file."""
    d = ws.P2pd(BUILD, str(tmp_path), s3env).start()
    try:
        rel = tmp_path / "rel"
        rel.mkdir()
        (rel / "a.bin").write_bytes(b"x" * 100)
        fifo = tmp_path / "manifest.fifo"
        os.mkfifo(fifo)
        st, body = d.api("POST", "/api/v1/seed",
                         {"dir": str(rel), "manifest": str(fifo)}, timeout=15)
        assert st >= 400, body
        assert "not a regular file" in json.dumps(body), body
        assert d.api("GET", "/healthz")[0] == 200
    finally:
        d.stop()
