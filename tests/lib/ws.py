"""Helpers for tests that run real weightswarm processes.

P2pd starts a real p2pd with its own cache and API socket, talks to its API
over the unix socket (http.client), and stops it with SIGTERM or SIGKILL.
make_release() writes a model-shaped directory: config.json,
tokenizer.json, an index json and safetensors shards with real headers.
"""
import hashlib
import http.client
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import time


def log_tail(path, n=4000):
    """The last n bytes of a daemon's log as text ("" when there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def api(sock, method, path, body=None, timeout=30):
    """One API call; returns (status, parsed JSON or text)."""
    c = UnixHTTPConnection(sock, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw.decode(errors="replace")
    finally:
        c.close()


_help_cache = {}


def metric_sum(text, name):
    """Sum of all samples of metric name in Prometheus text."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(cond, timeout, what, step=0.1):
    """Polls cond() every step seconds until it is true; AssertionError
    naming what after timeout seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(step)
    raise AssertionError(f"not in {timeout} s: {what}")


def supports(binary, flag):
    """True if binary's --help lists flag. The binaries of an older build
    (a regression test run against the code before a change) lack newer
    flags; helpers pass those only where they exist."""
    if binary not in _help_cache:
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
        _help_cache[binary] = r.stdout + r.stderr
    return flag in _help_cache[binary]


def has_flag(args, flag):
    return any(a == flag or a.startswith(flag + "=") for a in args)


def write_token(path):
    """An API token file (docs/security.md): 32 random bytes as hex."""
    with open(path, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(path, 0o600)
    return path


def read_token(path):
    with open(path) as f:
        return f.read().strip()


class P2pd:
    """insecure: None adds --insecure when the test gives no cluster key in
    swarm mode or --http without --api-token-file (as a development run
    would); False never adds it."""

    def __init__(self, build, workdir, env, name="p2pd", extra=(), insecure=None):
        self.build = build
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.cache = os.path.join(self.dir, "cache")
        self.sock = os.path.join(self.dir, "api.sock")
        self.env = env
        self.extra = list(extra)
        self.insecure = insecure
        self.proc = None
        self.log = os.path.join(self.dir, "p2pd.log")

    def needs_insecure(self):
        e, env = self.extra, self.env or {}
        swarm = has_flag(e, "--listen") or has_flag(e, "--tracker")
        keyless = not has_flag(e, "--cluster-key") and not env.get("P2P_CLUSTER_KEY_FILE")
        open_http = has_flag(e, "--http") and not has_flag(e, "--api-token-file")
        return (swarm and keyless) or open_http

    def start(self, timeout=20):
        binary = os.path.join(self.build, "peer", "p2pd")
        args = [binary, "--cache", self.cache, "--api", self.sock] + self.extra
        if (self.insecure is not False and self.needs_insecure()
                and not has_flag(args, "--insecure") and supports(binary, "--insecure")):
            args.append("--insecure")
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(args, env=self.env, stdout=self.logf,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"p2pd exited {self.proc.returncode}: {self.tail()}")
            try:
                if api(self.sock, "GET", "/readyz", timeout=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("p2pd not ready: " + self.tail())

    def tail(self, n=4000):
        return log_tail(self.log, n)

    def api(self, method, path, body=None, timeout=30):
        return api(self.sock, method, path, body, timeout)

    def ctl(self, *args, check=False, timeout=600):
        cmd = [os.path.join(self.build, "tools", "p2pctl"), "--api", self.sock] + list(args)
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{cmd} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def metric(self, name):
        """Sum of all samples of a Prometheus metric from /metrics."""
        st, text = self.api("GET", "/metrics")
        assert st == 200
        return metric_sum(text, name)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def kill9(self):
        return self.stop(signal.SIGKILL)


def write_random(path, size, seed):
    """Deterministic pseudo-random bytes, fast (sha256 counter stream via
    os.urandom is not reproducible; this one is)."""
    h = hashlib.sha256(seed.encode()).digest()
    block = (h * (1 << 15))  # 1 MiB
    with open(path, "wb") as f:
        left, i = size, 0
        while left > 0:
            n = min(left, len(block))
            # vary every MiB so chunks differ
            f.write(struct.pack("<Q", i) + block[8:n] if n > 8 else block[:n])
            left -= n
            i += 1


def write_safetensors(path, nbytes, seed):
    """A valid safetensors file: u64 header length, JSON header, raw data."""
    n = nbytes // 4
    header = {"__metadata__": {"format": "pt"},
              "weight": {"dtype": "F32", "shape": [n], "data_offsets": [0, n * 4]}}
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
    tmp = path + ".body"
    write_random(tmp, n * 4, seed)
    with open(path, "ab") as f, open(tmp, "rb") as b:
        while True:
            buf = b.read(1 << 20)
            if not buf:
                break
            f.write(buf)
    os.unlink(tmp)


def make_release(d, shard_bytes, nshards=3, seed="ws"):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": 64, "seed": seed}, f)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"vocab": {f"t{i}": i for i in range(2000)}}}, f)
    names = [f"model-{i + 1:05d}-of-{nshards:05d}.safetensors" for i in range(nshards)]
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}, f)
    for i, n in enumerate(names):
        write_safetensors(os.path.join(d, n), shard_bytes, f"{seed}-{i}")
    return d


def read_safetensors(path):
    """What an inference server does first: parse the header, touch data."""
    with open(path, "rb") as f:
        (hl,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hl))
        off = header["weight"]["data_offsets"]
        f.seek(8 + hl + off[1] - 4)
        assert len(f.read(4)) == 4
    return header


def tree_equal(a, b):
    """Byte-for-byte comparison of every regular file under a with b."""
    for root, _, files in os.walk(a):
        for n in files:
            pa = os.path.join(root, n)
            pb = os.path.join(b, os.path.relpath(pa, a))
            with open(pa, "rb") as fa, open(pb, "rb") as fb:
                while True:
                    x, y = fa.read(1 << 20), fb.read(1 << 20)
                    if x != y:
                        return False, os.path.relpath(pa, a)
                    if not x:
                        break
    return True, None


_handed_out = set()


def free_port():
    """A loopback port that no socket holds now, for a daemon to bind.

    It lies below the kernel's ephemeral range, so no outgoing connection
    (radosgw's own to its monitor, a p2pd's, Chromium's) can take it as its
    local port between this call and the daemon's bind, and it is never
    handed out twice in one test run. A port from bind(0) could be taken
    that way; a tracker then exited with "address already in use" and the
    test failed with "tracker not up"."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    low = 20000  # above tools/rgw's, the demo's and Ceph's fixed ports
    for _ in range(2000 if ephemeral_low - low >= 1000 else 0):
        p = random.randrange(low, ephemeral_low)
        if p in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
        _handed_out.add(p)
        return p
    with socket.socket() as s:  # no room below the range: the kernel's choice
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_cluster_key(path):
    with open(path, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(path, 0o600)
    return path


def http_json(host, port, method, path, body=None, token=None, timeout=10):
    """One request on a fresh connection, body sent as JSON and a bearer
    token if given: (status, headers, body parsed as JSON, else as text)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    try:
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                  headers=headers)
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, r.headers, json.loads(raw)
        except ValueError:
            return r.status, r.headers, raw.decode(errors="replace")
    finally:
        c.close()


class Tracker:
    """A real p2p-tracker on loopback ports that stay the same across
    restarts (so peers reconnect to it). It gets an API token of its own
    (self.token, sent by request()) unless token=False; without a key or a
    token it runs with --insecure."""

    def __init__(self, build, workdir, key, extra=(), token=True):
        self.build = build
        self.key = key
        self.extra = list(extra)  # more command-line options
        self.port = free_port()
        self.http = free_port()
        self.log = os.path.join(workdir, "tracker.log")
        self.proc = None
        self.token_file = None
        self.token = None
        if token:
            self.token_file = write_token(os.path.join(workdir, f"tracker-{self.http}.token"))
            self.token = read_token(self.token_file)

    def start(self, timeout=10):
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tracker exited {self.proc.returncode}: {self.tail()}")
            try:
                if self.get("/healthz")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("tracker not up: " + self.tail())

    def tail(self, n=4000):
        return log_tail(self.log, n)

    def command(self):
        """The tracker's command line (the options above, then extra)."""
        binary = os.path.join(self.build, "tracker", "p2p-tracker")
        args = [binary, "--listen", f"127.0.0.1:{self.port}", "--http", f"127.0.0.1:{self.http}"]
        if self.key:
            args += ["--cluster-key", self.key]
        # An older build (regression runs) has neither option.
        if self.token_file and supports(binary, "--api-token-file"):
            args += ["--api-token-file", self.token_file]
        if ((not self.key or not self.token_file) and not has_flag(self.extra, "--insecure")
                and supports(binary, "--insecure")):
            args.append("--insecure")
        return args + self.extra

    def request(self, method, path, body=None, token=None):
        """token: None sends self.token, "" sends none, else that one."""
        st, _, out = http_json("127.0.0.1", self.http, method, path, body,
                               self.token if token is None else token)
        return st, out

    def get(self, path):
        return self.request("GET", path)

    def metric(self, name):
        """A metric's value from /metrics (summed over its labels); it must
        be there."""
        st, text = self.get("/metrics")
        assert st == 200, text
        assert re.search(r"^%s[ {]" % re.escape(name), text, re.M), name
        return metric_sum(text, name)

    def prefetch(self, **body):
        """POST /api/v1/prefetch (the autoscaler hook); it must be accepted:
        201 when the release becomes wanted, 200 when it already was."""
        st, r = self.request("POST", "/api/v1/prefetch", body)
        assert st in (200, 201), (st, r)
        return st, r

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(20)
        self.proc = None


def publish(build, env, src, uri, chunk_size=None, timeout=300):
    """p2pctl publish src to uri with env (S3 credentials); the --json
    answer (digest, uri, ...) as a dict."""
    cmd = [os.path.join(build, "tools", "p2pctl"), "publish", src, uri, "--json"]
    if chunk_size is not None:
        cmd += ["--chunk-size", str(chunk_size)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def swarm_peer(build, workdir, env, name, tracker, key, extra=(), binary_build=None):
    """A p2pd in swarm mode: listening on a free loopback port, joined to
    tracker with the cluster key."""
    d = P2pd(binary_build or build, workdir, env, name=name,
             extra=["--listen", f"127.0.0.1:{free_port()}",
                    "--tracker", f"127.0.0.1:{tracker.port}",
                    "--cluster-key", key, *extra])
    return d


def listen_port(p):
    """The peer port a P2pd started with --listen listens on."""
    return int(p.extra[p.extra.index("--listen") + 1].rsplit(":", 1)[1])


def lone_peer(build, workdir, env, name):
    """A p2pd listening on a free loopback port with a new cluster key and
    no tracker, started, for tests that play its neighbours:
    (p2pd, key path, port). env decides where it reads S3 (a test's slow
    proxy, say)."""
    key = write_cluster_key(os.path.join(workdir, f"{name}.key"))
    port = free_port()
    p = P2pd(build, workdir, env, name=name,
             extra=["--listen", f"127.0.0.1:{port}", "--cluster-key", key]).start()
    return p, key, port


def release_state(p, digest):
    st, r = p.api("GET", f"/api/v1/releases/{digest}")
    return r if st == 200 else None


def wait_ready(peers, digest, timeout=300):
    """Waits until every peer has the release ready; fails fast when one
    reports failed."""
    deadline = time.time() + timeout
    left = list(peers)
    while left and time.time() < deadline:
        for p in list(left):
            r = release_state(p, digest)
            if r and r["state"] == "ready":
                left.remove(p)
            elif r and r["state"] == "failed":
                raise AssertionError(f"{p.dir}: failed: {r.get('error')}\n{p.tail()}")
        time.sleep(0.1)
    if left:
        raise AssertionError("not ready in time: " + ", ".join(
            f"{p.dir}: {release_state(p, digest)}" for p in left))
