"""The container image (tools/image, deploy/Containerfile) in use: a
tracker and three p2pd containers from it on a private podman network
fetch one release from radosgw together.

radosgw runs on the host (tools/test's, or the rgw fixture's) on loopback;
a byte-counting TCP relay in this process makes it reachable from the
containers on the network's bridge address only, so no traffic leaves the
machine. The release is published with the host's p2pctl, the prefetch
goes to the tracker's HTTP API, and every node must end with the files
byte for byte, verified by p2pd, and S3 sending about one copy (radosgw's
usage log). Containers and the network are removed at the end; the image
is kept so the next run only rebuilds what changed.

Skipped, with the reason printed, only where podman cannot run at all.
WS_TEST_IMAGE=NAME tests an image built elsewhere instead of running
tools/image (for example the one `tools/image --containerfile` builds).
"""
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest

from conftest import ROOT, binary
import ws

MiB = 1 << 20
# The flags podman needs on these machines (see tools/image).
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
UID = 10001


def podman(*args, check=True, timeout=120):
    r = subprocess.run(PODMAN + list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def podman_usable():
    """None when podman can run here, else the reason it cannot."""
    if shutil.which("podman") is None:
        return "podman is not installed (tools/bootstrap installs it)"
    r = subprocess.run(PODMAN + ["info", "--format", "json"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        return f"podman info fails: {r.stderr.strip()[-400:]}"
    return None


# Decided before any fixture (radosgw included) is set up; -rs prints it.
WHY_NOT = podman_usable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"podman cannot run: {WHY_NOT}")


class Relay:
    """A TCP relay from HOST:any to an upstream, counting the bytes that go
    back to the clients (what the containers got from S3)."""

    def __init__(self, host, upstream):
        self.upstream = upstream
        self.lsock = socket.socket()
        self.lsock.bind((host, 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.down = 0
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True), daemon=True).start()

    def _pump(self, src, dst, count):
        try:
            while True:
                b = src.recv(1 << 16)
                if not b:
                    break
                dst.sendall(b)
                if count:
                    with self.lock:
                        self.down += len(b)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.lsock.close()


def tracker_request(ip, method, path, body=None, token=None):
    st, _, out = ws.http_json(ip, 7601, method, path, body, token)
    return st, out


def container_ip(name, net):
    info = json.loads(podman("inspect", name).stdout)[0]
    return info["NetworkSettings"]["Networks"][net]["IPAddress"]


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


@pytest.fixture(scope="module")
def image():
    if os.environ.get("WS_TEST_IMAGE"):
        # An image built elsewhere (tools/image --containerfile, a registry's).
        return os.environ["WS_TEST_IMAGE"]
    t0 = time.time()
    r = subprocess.run([os.path.join(ROOT, "tools", "image")], capture_output=True, text=True,
                       timeout=1200, env={**os.environ, "WS_IMAGE_JOBS": os.environ.get(
                           "WS_IMAGE_JOBS", str(os.cpu_count() or 2))})
    assert r.returncode == 0, f"tools/image failed:\n{r.stdout}\n{r.stderr}"
    name = r.stdout.strip().splitlines()[-1]
    print(f"tools/image: {name} in {time.time() - t0:.1f} s ({r.stderr.strip()})")
    return name


def test_image_contents(image):
    """Non-root user 10001, the three binaries of this version run (every
    library they load is there), no compiler, build tool or -dev header."""
    name = subprocess.run([os.path.join(ROOT, "tools", "image"), "--print-name"],
                          capture_output=True, text=True, check=True).stdout.strip()
    version = name.rsplit(":", 1)[1]  # meson.build's
    r = podman("run", "--rm", *ULIMITS, image, "sh", "-c",
               "id -u; id -g; for b in p2pd p2p-tracker p2pctl; do "
               "$b --help >/dev/null 2>&1; echo $b-help=$?; $b --version; done; "
               "for t in gcc cc meson ninja pkg-config; do command -v $t; done; "
               "ls /usr/include/uv.h /usr/include/curl 2>/dev/null; true")
    out = r.stdout.splitlines()
    assert out[:2] == [str(UID), str(UID)], r.stdout
    for b in ("p2pd", "p2p-tracker", "p2pctl"):
        assert f"{b}-help=0" in out, r.stdout
        assert f"{b} {version}" in out, r.stdout
    assert len(out) == 2 + 3 * 2, f"build tools or headers in the image:\n{r.stdout}"
    cfg = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert cfg.get("User") == f"{UID}:{UID}", cfg
    assert "P2P_CACHE=/var/lib/weightswarm" in cfg.get("Env", []), cfg


def test_tracker_and_three_p2pd_containers_fetch_a_release(image, rgw, s3env, tmp_path):
    rel = ws.make_release(str(tmp_path / "model"), shard_bytes=8 * MiB, nshards=3, seed="image")
    F = dir_bytes(rel)
    r = subprocess.run([binary("tools/p2pctl"), "publish", rel,
                        f"s3://{rgw.bucket()}/m/image/", "--json", "--chunk-size", str(MiB)],
                       env=s3env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    pub = json.loads(r.stdout.strip().splitlines()[-1])
    digest = pub["digest"]

    tag = "ws-img-" + uuid.uuid4().hex[:8]
    net = tag
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    os.chown(key, UID, UID)
    token = ws.write_token(str(tmp_path / "api.token"))
    os.chown(token, UID, UID)
    mounts = ["-v", f"{key}:/etc/weightswarm/cluster.key:ro"]
    trk_mounts = mounts + ["-v", f"{token}:/etc/weightswarm/api.token:ro"]
    names = []
    relay = None
    t0 = time.time()
    podman("network", "create", net)
    try:
        trk = f"{tag}-tracker"
        names.append(trk)
        podman("run", "-d", "--name", trk, "--network", net, *ULIMITS, *trk_mounts, image,
               "p2p-tracker", "--listen", "0.0.0.0:7600", "--http", "0.0.0.0:7601",
               "--cluster-key", "/etc/weightswarm/cluster.key",
               "--api-token-file", "/etc/weightswarm/api.token")
        trk_ip = container_ip(trk, net)
        deadline = time.time() + 30
        while True:
            try:
                if tracker_request(trk_ip, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline, podman("logs", trk, check=False).stderr
            time.sleep(0.2)

        # The bridge exists once a container runs on the network: radosgw
        # is offered on its address, reachable from the containers only.
        subnet = json.loads(podman("network", "inspect", net).stdout)[0]["subnets"][0]
        gw = subnet["gateway"]
        up = rgw.endpoint.split("://", 1)[1].rstrip("/")
        relay = Relay(gw, (up.rsplit(":", 1)[0], int(up.rsplit(":", 1)[1])))
        aws = {k: v for k, v in rgw.env.items() if k.startswith("AWS_")}
        aws["AWS_ENDPOINT_URL_S3"] = f"http://{gw}:{relay.port}"
        envs = [a for k, v in aws.items() for a in ("-e", f"{k}={v}")]
        envs += ["-e", "WS_S3_ADDRESSING=path"]

        caches = []
        for i in range(3):
            name = f"{tag}-p{i}"
            cache = tmp_path / f"cache{i}"
            cache.mkdir()
            os.chown(cache, UID, UID)
            caches.append(str(cache))
            names.append(name)
            # --cache and --api come from the image's P2P_CACHE / P2P_API.
            podman("run", "-d", "--name", name, "--network", net, *ULIMITS, *mounts,
                   "-v", f"{cache}:/var/lib/weightswarm", *envs, image,
                   "p2pd", "--listen", "0.0.0.0:7610", "--tracker", f"{trk_ip}:7600",
                   "--cluster-key", "/etc/weightswarm/cluster.key", "--node-id", f"node{i}")
        peers = names[1:]

        before = rgw.bytes_sent()
        # Anonymous: refused; with the token: accepted.
        st, body = tracker_request(trk_ip, "POST", "/api/v1/prefetch", {"uri": pub["uri"]})
        assert st == 401, body
        st, body = tracker_request(trk_ip, "POST", "/api/v1/prefetch", {"uri": pub["uri"]},
                                   token=ws.read_token(token))
        assert st in (200, 201), body
        for name in peers:
            w = podman("exec", name, "p2pctl", "wait", digest, "--timeout", "120",
                       check=False, timeout=180)
            assert w.returncode == 0, (name, w.stdout, w.stderr,
                                       podman("logs", name, check=False).stderr[-3000:])
        took = time.time() - t0
        sent = rgw.bytes_sent() - before

        from_s3 = []
        for name, cache in zip(peers, caches):
            v = podman("exec", name, "p2pctl", "verify", digest, "--json", check=False)
            assert v.returncode == 0, (name, v.stdout, v.stderr)
            assert json.loads(v.stdout)["ok"] is True, v.stdout
            s = json.loads(podman("exec", name, "p2pctl", "status", digest, "--json").stdout)
            assert s["state"] == "ready", s
            from_s3.append(s["bytes_from_s3"])
            out = os.path.join(cache, "releases", digest)
            ok, bad = ws.tree_equal(rel, out)
            assert ok, f"{name}: {bad} differs"
            assert os.stat(out).st_uid == UID  # written by the container's user
        print(f"3 p2pd containers, {F} bytes: ready {took:.1f} s after the network came up; "
              f"S3 sent {sent} ({sent / F:.3f} x F), through the relay {relay.down}, "
              f"from S3 per node {from_s3}")
        assert F <= sent <= 1.05 * F, (sent, F)
        assert F <= relay.down <= 1.05 * F + 64 * 1024, (relay.down, F)
        assert F <= sum(from_s3) <= 1.05 * F, (from_s3, F)
    finally:
        if relay:
            relay.close()
        for n in names:
            logs = podman("logs", n, check=False)
            print(f"---- {n}\n{(logs.stdout + logs.stderr)[-2000:]}")
        if names:
            podman("rm", "--force", "--time", "2", *names, check=False)
        podman("network", "rm", "--force", net, check=False)
