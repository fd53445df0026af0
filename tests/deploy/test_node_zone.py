"""`p2pctl node-zone` (the p2pd DaemonSet's zone init step) against a fake
Kubernetes API server: real HTTPS on loopback with a throwaway CA, the
bearer token checked, Node objects as the API server returns them.

Shows: the zone label is written for --zone-file; a wrong CA is refused
(TLS is verified); 403 / missing label / hostile value / oversized reply
fail with the documented exit codes; --best-effort writes an empty zone
and exits 0 in those cases; p2pd reads the file it writes.
"""
import http.server
import json
import os
import ssl
import subprocess
import threading
import time

import pytest

BUILD = os.environ.get("WS_BUILD_ROOT", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
P2PCTL = os.path.join(BUILD, "tools", "p2pctl")
P2PD = os.path.join(BUILD, "peer", "p2pd")
TOKEN = "eyJhbGciOiJSUzI1NiJ9.test-token"


def node(labels):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a", "labels": labels}}


# path -> (status, body)
ROUTES = {
    "/api/v1/nodes/gpu-a": (200, node({"topology.kubernetes.io/zone": "eu-central-1a"})),
    "/api/v1/nodes/gpu-nolabel": (200, node({"kubernetes.io/hostname": "gpu-nolabel"})),
    "/api/v1/nodes/gpu-evil": (200, node({"topology.kubernetes.io/zone": "a\nb; rm -rf /"})),
    "/api/v1/nodes/gpu-forbidden": (403, {"kind": "Status", "reason": "Forbidden"}),
    "/api/v1/nodes/gpu-huge": (200, {"metadata": {"labels": {}}, "pad": "x" * (5 << 20)}),
}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get("Authorization") != "Bearer " + TOKEN:
            status, body = 401, {"kind": "Status", "reason": "Unauthorized"}
        else:
            status, body = ROUTES.get(self.path, (404, {"kind": "Status", "reason": "NotFound"}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    d = tmp_path_factory.mktemp("kube")
    for name in ("ca", "other"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=" + name, "-keyout", str(d / (name + ".key")),
                        "-out", str(d / (name + ".crt"))], check=True, capture_output=True)
    subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(d / "srv.key"), "-out", str(d / "srv.csr")], check=True, capture_output=True)
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    subprocess.run(["openssl", "x509", "-req", "-in", str(d / "srv.csr"), "-CA", str(d / "ca.crt"),
                    "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "1", "-extfile", str(d / "ext"),
                    "-out", str(d / "srv.crt")], check=True, capture_output=True)
    (d / "token").write_text(TOKEN + "\n")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(d / "srv.crt"), str(d / "srv.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield {"dir": d, "url": f"https://127.0.0.1:{srv.server_address[1]}"}
    srv.shutdown()


def zone(api, node_name, *extra, ca="ca.crt"):
    out = api["dir"] / ("zone-" + node_name)
    if out.exists():
        out.unlink()
    r = subprocess.run([P2PCTL, "node-zone", "--node=" + node_name, "--out=" + str(out),
                        "--server=" + api["url"], "--token=" + str(api["dir"] / "token"),
                        "--ca=" + str(api["dir"] / ca), *extra],
                       capture_output=True, text=True, timeout=30)
    return r, (out.read_text() if out.exists() else None)


def test_writes_the_zone_label(api):
    r, text = zone(api, "gpu-a")
    assert r.returncode == 0, r.stderr
    assert text == "eu-central-1a\n"


def test_other_label(api):
    r, text = zone(api, "gpu-nolabel", "--label=kubernetes.io/hostname")
    assert r.returncode == 0, r.stderr
    assert text == "gpu-nolabel\n"


def test_node_name_from_env(api):
    out = api["dir"] / "zone-env"
    r = subprocess.run([P2PCTL, "node-zone", "--out=" + str(out), "--server=" + api["url"],
                        "--token=" + str(api["dir"] / "token"), "--ca=" + str(api["dir"] / "ca.crt")],
                       capture_output=True, text=True, timeout=30, env={**os.environ, "NODE_NAME": "gpu-a"})
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "eu-central-1a\n"


@pytest.mark.parametrize("node_name,code,why", [
    ("gpu-forbidden", 1, "RBAC"),
    ("gpu-nolabel", 4, "no label"),
    ("gpu-evil", 1, "not a valid value"),
    ("gpu-huge", 1, "too large"),
    ("gpu-missing", 4, "HTTP 404"),
])
def test_failures(api, node_name, code, why):
    r, text = zone(api, node_name)
    assert r.returncode == code, r.stderr
    assert why in r.stderr
    assert text is None
    r, text = zone(api, node_name, "--best-effort")
    assert r.returncode == 0, r.stderr
    assert text == "" and "best-effort" in r.stderr


def test_tls_is_verified(api):
    r, text = zone(api, "gpu-a", ca="other.crt")
    assert r.returncode == 1 and text is None, r.stderr


def test_bad_token_is_refused(api, tmp_path):
    (tmp_path / "t").write_text("wrong")
    r = subprocess.run([P2PCTL, "node-zone", "--node=gpu-a", "--out=" + str(tmp_path / "z"),
                        "--server=" + api["url"], "--token=" + str(tmp_path / "t"),
                        "--ca=" + str(api["dir"] / "ca.crt")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "HTTP 401" in r.stderr


def test_usage(tmp_path):
    r = subprocess.run([P2PCTL, "node-zone", "--node=Not_A_Node", "--out=" + str(tmp_path / "z")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    r = subprocess.run([P2PCTL, "node-zone", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "--zone-file" in r.stdout


def test_p2pd_starts_with_the_file(api, tmp_path):
    """p2pd starts with the file node-zone writes as --zone-file (and
    refuses a missing one: the init step must have run)."""
    r, _ = zone(api, "gpu-a")
    assert r.returncode == 0
    sock = tmp_path / "p2pd.sock"
    key = tmp_path / "cluster.key"  # swarm mode needs one (docs/security.md)
    key.write_text(os.urandom(32).hex() + "\n")
    p = subprocess.Popen([P2PD, "--cache=" + str(tmp_path / "cache"), "--api=" + str(sock),
                          "--listen=127.0.0.1:0", "--cluster-key=" + str(key),
                          "--zone-file=" + str(api["dir"] / "zone-gpu-a")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(100):
            if sock.exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        assert p.poll() is None and sock.exists(), p.stdout.read() if p.poll() is not None else ""
    finally:
        p.terminate()
        p.wait(timeout=10)
    bad = subprocess.run([P2PD, "--cache=" + str(tmp_path / "cache"), "--api=" + str(sock),
                          "--zone-file=" + str(tmp_path / "absent")], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2, bad.stderr
