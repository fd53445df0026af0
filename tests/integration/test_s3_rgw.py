"""S3 client against a real S3 server (radosgw), checked with boto3.

Uses WS_TEST_S3_ENDPOINT (+ AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) when
set; otherwise starts a throwaway radosgw with the reference script for the
session. The C side is driven through build/tests/unit/s3_tool (built from
tests/unit/storage/s3/s3_tool.c; WS_BUILD_ROOT).
"""
import atexit
import hashlib
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

import ws

BUILD = os.environ.get("WS_BUILD_ROOT", "/work/main/build")
TOOL = os.path.join(BUILD, "tests", "unit", "s3_tool")
RGW_SCRIPT = "/work/shared/s3-local/start-rgw.sh"
TEST_AK = "AKIDTESTTESTTEST0000"
TEST_SK = "testsecrettestsecrettestsecret0000000000"

ODD_KEYS = [
    "plain.bin",
    "with space/and+plus=eq~tilde.bin",
    "pct%20literal%/x",
    "unicode/caf\u00e9-\u2713-\u65e5\u672c.bin",
    "q?x#y&z;a:b@c$d,e'f(g)h!i*j",
    "dots/./and/../seg",
    "double//slash",
    "xml<&>\"'.bin",
]


_RGW = {}


@pytest.fixture(scope="session")
def s3env():
    """Endpoint and credentials; starts radosgw when none is given. One
    server per test session even when other modules import this fixture
    (the started server is kept in a module global, stopped at exit)."""
    ep = os.environ.get("WS_TEST_S3_ENDPOINT")
    if ep:
        return {"endpoint": ep,
                "ak": os.environ.get("AWS_ACCESS_KEY_ID", TEST_AK),
                "sk": os.environ.get("AWS_SECRET_ACCESS_KEY", TEST_SK)}
    if not _RGW:
        d = "/tmp/ws-s3test-rgw-%d" % os.getpid()
        rgw_port, mon_port = ws.free_port(), ws.free_port()
        env = dict(os.environ, RGW_PORT=str(rgw_port), MON_PORT=str(mon_port))
        try:
            subprocess.run([RGW_SCRIPT, d], env=env, check=True,
                           stdout=subprocess.DEVNULL, timeout=300)
        except Exception:
            stop_rgw(d)
            raise
        atexit.register(stop_rgw, d)
        _RGW.update(endpoint="http://127.0.0.1:%d" % rgw_port, ak=TEST_AK,
                    sk=TEST_SK)
    return dict(_RGW)


def stop_rgw(d):
    """Stops the daemons we started (by their pid files), harder if the
    script's polite stop leaves any behind, then removes the directory."""
    run = os.path.join(d, "run")
    pids = []
    for f in os.listdir(run) if os.path.isdir(run) else []:
        if f.endswith(".pid"):
            try:
                pids.append(int(open(os.path.join(run, f)).read().strip()))
            except (OSError, ValueError):
                pass
    subprocess.run([RGW_SCRIPT, "stop", d], timeout=120)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    subprocess.run(["rm", "-rf", d])


@pytest.fixture(scope="session")
def boto(s3env):
    import boto3
    from botocore.config import Config
    return boto3.client(
        "s3", endpoint_url=s3env["endpoint"], region_name="us-east-1",
        aws_access_key_id=s3env["ak"], aws_secret_access_key=s3env["sk"],
        config=Config(s3={"addressing_style": "path"}))


@pytest.fixture(scope="session")
def bucket(boto):
    name = "ws-s3-" + uuid.uuid4().hex[:10]
    boto.create_bucket(Bucket=name)
    return name


def tool_env(s3env, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and not k.startswith("WS_S3_")}
    env.update(AWS_ENDPOINT_URL=s3env["endpoint"],
               AWS_ACCESS_KEY_ID=s3env["ak"],
               AWS_SECRET_ACCESS_KEY=s3env["sk"], AWS_REGION="us-east-1",
               AWS_EC2_METADATA_DISABLED="true")
    env.update(extra)
    return env


def run_tool(s3env, *args, env=None, timeout=120):
    return subprocess.run([TOOL, "--stats", *args], capture_output=True,
                          text=True, env=env or tool_env(s3env),
                          timeout=timeout)


def stats(proc):
    line = [l for l in proc.stderr.splitlines() if l.startswith("stats ")][-1]
    return {k: int(v) for k, v in (f.split("=") for f in line.split()[1:])}


def test_put_odd_keys_boto_reads(s3env, boto, bucket, tmp_path):
    for i, key in enumerate(ODD_KEYS):
        data = os.urandom(1000 + i * 777)
        src = tmp_path / ("src%d" % i)
        src.write_bytes(data)
        p = run_tool(s3env, "put", str(src), "s3://%s/%s" % (bucket, key),
                     *(["--sha256"] if i % 2 else []))
        assert p.returncode == 0, p.stderr
        got = boto.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == data, key


def test_get_what_boto_wrote(s3env, boto, bucket, tmp_path):
    for i, key in enumerate(ODD_KEYS):
        data = os.urandom(5000 + i)
        k = "from-boto/" + key
        boto.put_object(Bucket=bucket, Key=k, Body=data)
        out = tmp_path / ("out%d" % i)
        p = run_tool(s3env, "get", "s3://%s/%s" % (bucket, k), str(out))
        assert p.returncode == 0, p.stderr
        assert out.read_bytes() == data, k
        assert stats(p)["bytes_rx"] == len(data)


def test_ranged_get(s3env, boto, bucket, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)
    boto.put_object(Bucket=bucket, Key="ranged.bin", Body=data)
    for a, b in [(0, 0), (100, 199), (1 << 20, (2 << 20) - 1),
                 (len(data) - 1, len(data) - 1), (17, len(data) - 1)]:
        out = tmp_path / "r"
        p = run_tool(s3env, "get", "s3://%s/ranged.bin" % bucket, str(out),
                     "--range", "%d-%d" % (a, b))
        assert p.returncode == 0, p.stderr
        assert out.read_bytes() == data[a:b + 1]
        assert "size=%d" % len(data) in p.stdout
    # A range past the end is refused, not silently shortened.
    p = run_tool(s3env, "get", "s3://%s/ranged.bin" % bucket, str(out),
                 "--range", "%d-%d" % (len(data) - 10, len(data) + 10))
    assert p.returncode != 0
    p = run_tool(s3env, "get", "s3://%s/ranged.bin" % bucket, str(out),
                 "--range", "%d-%d" % (len(data) + 5, len(data) + 10))
    assert p.returncode != 0 and "416" in p.stderr


def test_pause_resume(s3env, boto, bucket, tmp_path):
    data = os.urandom(6 * 1024 * 1024)
    boto.put_object(Bucket=bucket, Key="paused.bin", Body=data)
    out = tmp_path / "p"
    p = run_tool(s3env, "get", "s3://%s/paused.bin" % bucket, str(out),
                 "--pause-every", "300000")
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == data


def test_list_paging(s3env, boto, bucket):
    keys = sorted("lst/%02d-%s" % (i, ODD_KEYS[i % len(ODD_KEYS)])
                  for i in range(23))
    for k in keys:
        boto.put_object(Bucket=bucket, Key=k, Body=k.encode())
    p = run_tool(s3env, "ls", "s3://%s/lst/" % bucket,
                 env=tool_env(s3env, WS_S3_TEST_LIST_PAGE="5"))
    assert p.returncode == 0, p.stderr
    rows = [l.split("\t") for l in p.stdout.splitlines()]
    assert [r[2] for r in rows] == keys
    assert [int(r[0]) for r in rows] == [len(k.encode()) for k in keys]
    assert stats(p)["requests"] == 5  # ceil(23 / 5) pages
    ref = boto.list_objects_v2(Bucket=bucket, Prefix="lst/")
    assert [o["ETag"].strip('"') for o in ref["Contents"]] == \
        [r[1] for r in rows]


def test_multipart(s3env, boto, bucket, tmp_path):
    data = os.urandom(12 * 1024 * 1024 + 5)
    src = tmp_path / "big"
    src.write_bytes(data)
    key = "mp/big \u2713.bin"
    p = run_tool(s3env, "put", str(src), "s3://%s/%s" % (bucket, key),
                 "--part-size", str(5 * 1024 * 1024))
    assert p.returncode == 0, p.stderr
    obj = boto.get_object(Bucket=bucket, Key=key)
    assert obj["ETag"].strip('"').endswith("-3")
    assert hashlib.sha256(obj["Body"].read()).digest() == \
        hashlib.sha256(data).digest()
    assert stats(p)["requests"] == 5  # create + 3 parts + complete


def test_virtual_hosted(s3env, boto, bucket, tmp_path):
    if "127.0.0.1" not in s3env["endpoint"]:
        pytest.skip("virtual-host check needs a loopback endpoint")
    boto.put_object(Bucket=bucket, Key="vh/k", Body=b"virtual")
    ep = s3env["endpoint"].replace("127.0.0.1", "localhost")
    out = tmp_path / "vh"
    p = run_tool(s3env, "get", "s3://%s/vh/k" % bucket, str(out),
                 env=tool_env(s3env, AWS_ENDPOINT_URL=ep,
                              WS_S3_ADDRESSING="virtual"))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == b"virtual"


def test_wrong_secret_fails_fast(s3env, bucket, tmp_path):
    t0 = time.monotonic()
    p = run_tool(s3env, "get", "s3://%s/plain.bin" % bucket,
                 str(tmp_path / "x"),
                 env=tool_env(s3env, AWS_SECRET_ACCESS_KEY="wrong" * 8))
    assert p.returncode == 3, p.stderr
    assert "SignatureDoesNotMatch" in p.stderr or "403" in p.stderr
    assert "s3://%s/plain.bin" % bucket in p.stderr
    assert stats(p)["requests"] == 1 and stats(p)["retries"] == 0
    assert time.monotonic() - t0 < 5
    p = run_tool(s3env, "head", "s3://%s/plain.bin" % bucket,
                 env=tool_env(s3env, AWS_ACCESS_KEY_ID="AKIDNOSUCHKEY0000000"))
    assert p.returncode == 3, p.stderr


def test_missing_key_fails_fast(s3env, bucket, tmp_path):
    t0 = time.monotonic()
    p = run_tool(s3env, "get", "s3://%s/no/such key" % bucket,
                 str(tmp_path / "x"))
    assert p.returncode == 4, p.stderr
    assert "s3://%s/no/such key" % bucket in p.stderr
    assert "404" in p.stderr
    assert time.monotonic() - t0 < 5
    p = run_tool(s3env, "head", "s3://%s/no/such key" % bucket)
    assert p.returncode == 4
    p = run_tool(s3env, "get", "s3://no-such-bucket-ws/k", str(tmp_path / "x"))
    assert p.returncode == 4, p.stderr


class FlakyProxy:
    """TCP proxy that ruins the first `bad` connections: each either gets
    reset immediately or forwards the request and cuts the answer after
    `cut` bytes; later connections pass through."""

    def __init__(self, upstream, bad, cut):
        host, port = upstream.split("//")[1].split(":")
        self.up = (host, int(port))
        self.bad, self.cut, self.conns = bad, cut, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns += 1
            limit = self.cut if self.conns <= self.bad else None
            threading.Thread(target=self.pipe, args=(c, limit),
                             daemon=True).start()

    def pipe(self, c, limit):
        if limit == 0:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b"\x01\x00\x00\x00\x00\x00\x00\x00")
            c.close()
            return
        u = socket.create_connection(self.up)

        def up():
            try:
                while (d := c.recv(65536)):
                    u.sendall(d)
            except OSError:
                pass
        threading.Thread(target=up, daemon=True).start()
        sent = 0
        try:
            while (d := u.recv(65536)):
                if limit is not None and sent + len(d) > limit:
                    c.sendall(d[:limit - sent])
                    break
                c.sendall(d)
                sent += len(d)
        except OSError:
            pass
        for s in (c, u):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def test_retry_resets_and_short_bodies(s3env, boto, bucket, tmp_path):
    data = os.urandom(4 * 1024 * 1024)
    boto.put_object(Bucket=bucket, Key="flaky.bin", Body=data)
    # Two connections reset outright.
    px = FlakyProxy(s3env["endpoint"], bad=2, cut=0)
    out = tmp_path / "f"
    env = tool_env(s3env, AWS_ENDPOINT_URL="http://127.0.0.1:%d" % px.port)
    p = run_tool(s3env, "get", "s3://%s/flaky.bin" % bucket, str(out), env=env)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == data
    assert stats(p)["retries"] >= 2
    # Three answers cut mid-body: the download resumes where it stopped and
    # never delivers a byte twice.
    px = FlakyProxy(s3env["endpoint"], bad=3, cut=1024 * 1024 + 333)
    env = tool_env(s3env, AWS_ENDPOINT_URL="http://127.0.0.1:%d" % px.port)
    p = run_tool(s3env, "get", "s3://%s/flaky.bin" % bucket, str(out), env=env)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes() == data
    st = stats(p)
    assert st["retries"] >= 3 and st["bytes_rx"] == len(data)


def test_server_down_then_up(s3env, boto, bucket, tmp_path):
    """Nothing listens for ~3 s, then the server appears: the client keeps
    retrying with backoff inside its retry window and completes."""
    boto.put_object(Bucket=bucket, Key="late.bin", Body=b"late data")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = tool_env(s3env, AWS_ENDPOINT_URL="http://127.0.0.1:%d" % port)
    proc = subprocess.Popen([TOOL, "--stats", "get", "s3://%s/late.bin" % bucket,
                             str(tmp_path / "l")], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3)
    px = FlakyProxy.__new__(FlakyProxy)
    host, uport = s3env["endpoint"].split("//")[1].split(":")
    px.up, px.bad, px.cut, px.conns = (host, int(uport)), 0, 0, 0
    px.sock = socket.socket()
    px.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    px.sock.bind(("127.0.0.1", port))
    px.sock.listen(16)
    threading.Thread(target=px.loop, daemon=True).start()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert (tmp_path / "l").read_bytes() == b"late data"
