"""The systemd units as `meson install` ships them, and the daemons under
their policy.

- `meson install --destdir` puts the binaries, both units (with this
  build's bindir in ExecStart, nothing left unsubstituted), the sysusers.d
  file, the example env files and every docs/*.md where meson says.
- `systemd-analyze verify --root=DESTDIR` passes for both installed units
  (ExecStart is checked against the installed binaries) and prints nothing.
- `systemd-analyze security --offline=true` scores each unit at or below
  EXPOSURE_MAX and finds no exposure beyond the ones listed (and argued)
  in docs/operations.md.
- p2p-tracker sends READY=1 over $NOTIFY_SOCKET only once both listeners
  accept (never when it cannot listen) and STOPPING=1 on SIGTERM.
- This machine has no systemd as PID 1, so the units cannot be started
  here: a tracker and two p2pd run a real swarm fetch from radosgw under
  the unit's syscall filter, address families and W^X rule, applied with
  seccomp by tests/lib/unit_seccomp.py (a call outside the filter kills
  the daemon with SIGSYS), and exit 0 on SIGTERM.
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import BUILD, ROOT, binary
import ws

MiB = 1 << 20
UNITS = ("p2pd.service", "p2p-tracker.service")
# Exposure measured on systemd 252 (docs/operations.md): 1.0 for both.
EXPOSURE_MAX = 1.2
# What systemd-analyze security still marks, and why it stays (the same
# list is in docs/operations.md).
ACCEPTED = {
    "RootDirectory=/RootImage=",                # runs on the host's root, read-only
    "RestrictAddressFamilies=~AF_UNIX",         # API socket, sd_notify
    "RestrictAddressFamilies=~AF_(INET|INET6)",  # peers, tracker, S3
    "PrivateNetwork=",                           # same
    "IPAddressDeny=",                            # peers and S3 are anywhere
    "DeviceAllow=",                              # char-rtc:r, from ProtectClock=
    "UMask=",                                    # p2pd only: 0027, the group reads the cache
}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`meson install --destdir` of this build; returns (destdir,
    {source or build path: installed path})."""
    meson = shutil.which("meson")
    assert meson, "meson not on PATH"
    dest = str(tmp_path_factory.mktemp("destdir"))
    r = run([meson, "install", "-C", BUILD, "--destdir", dest, "--no-rebuild",
             "--quiet"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run([meson, "introspect", BUILD, "--installed"])
    assert r.returncode == 0, r.stderr
    return dest, json.loads(r.stdout)


def where(installed, suffix):
    """The install path (absolute, without destdir) of the one file whose
    source or build path ends in suffix."""
    _, files = installed
    hits = [v for k, v in files.items() if k.endswith("/" + suffix)]
    assert len(hits) == 1, (suffix, hits)
    return hits[0]


def in_dest(installed, path):
    return installed[0] + path


def test_meson_install_puts_units_docs_and_binaries_in_place(installed):
    bins = {b: where(installed, rel) for b, rel in
            (("p2pd", "peer/p2pd"), ("p2p-tracker", "tracker/p2p-tracker"),
             ("p2pctl", "tools/p2pctl"))}
    for b, path in bins.items():
        assert os.access(in_dest(installed, path), os.X_OK), path
    bindir = os.path.dirname(bins["p2pd"])
    for unit in UNITS:
        path = where(installed, "deploy/systemd/" + unit)
        assert "/systemd/system/" in path, path
        text = open(in_dest(installed, path)).read()
        assert not re.search(r"@[a-z_]+@", text), f"{unit}: unsubstituted @var@"
        m = re.search(r"^ExecStart=(\S+)", text, re.M)
        assert m and m.group(1) == bins[unit.split(".")[0]], (unit, m and m.group(1))
        assert os.path.dirname(m.group(1)) == bindir
        assert re.search(r"^Type=notify$", text, re.M), unit
    sysusers = where(installed, "deploy/systemd/weightswarm.sysusers")
    assert sysusers.endswith("/sysusers.d/weightswarm.conf"), sysusers
    assert re.search(r"^u weightswarm ", open(in_dest(installed, sysusers)).read(), re.M)
    docdir = os.path.dirname(where(installed, "docs/operations.md"))
    assert docdir.endswith("/share/doc/weightswarm"), docdir
    want = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))}
    want.add("README.md")
    have = set(os.listdir(in_dest(installed, docdir)))
    assert want <= have, f"docs not installed (add them to meson.build): {sorted(want - have)}"
    for env in ("p2pd.env", "p2p-tracker.env"):
        path = in_dest(installed, os.path.join(docdir, "examples", env))
        text = open(path).read()
        assert not re.search(r"@[a-z_]+@", text), f"{env}: unsubstituted @var@"


def analyze_root(installed):
    """destdir plus the host's unit files, so the units' implicit
    dependencies (sysinit.target, ...) resolve under --root."""
    dest = installed[0]
    host = os.path.join(dest, "lib", "systemd", "system")
    if not os.path.isdir(host):
        shutil.copytree("/lib/systemd/system", host, symlinks=True)
    return dest


def man_args(installed):
    """--man=yes with MANPATH in destdir when meson installed man pages
    for the Documentation= lines; else --man=no (said in the output)."""
    dest = installed[0]
    mans = glob.glob(os.path.join(dest, "**", "man", "man*", "p2p*"), recursive=True)
    if not mans:
        print("man pages not installed by this build (scdoc missing?): "
              "systemd-analyze verify --man=no")
        return ["--man=no"], {}
    mandir = os.path.dirname(os.path.dirname(mans[0]))
    return ["--man=yes"], {"MANPATH": mandir}


def test_systemd_analyze_verify_passes_for_both_units(installed):
    dest = analyze_root(installed)
    args, env = man_args(installed)
    for unit in UNITS:
        path = where(installed, "deploy/systemd/" + unit)
        r = run(["systemd-analyze", "verify", *args, "--root=" + dest, path],
                env={**os.environ, **env})
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 0 and out == "", f"{unit}: rc {r.returncode}\n{out}"
    # It can fail: a unit whose ExecStart is missing under the root.
    p2pd = in_dest(installed, where(installed, "peer/p2pd"))
    os.rename(p2pd, p2pd + ".away")
    try:
        r = run(["systemd-analyze", "verify", "--man=no", "--root=" + dest,
                 where(installed, "deploy/systemd/p2pd.service")])
        assert r.returncode != 0 and "not executable" in r.stderr, r.stderr
    finally:
        os.rename(p2pd + ".away", p2pd)


def test_systemd_analyze_security_exposure(installed):
    dest = analyze_root(installed)
    for unit in UNITS:
        path = where(installed, "deploy/systemd/" + unit)
        r = run(["systemd-analyze", "security", "--offline=true", "--no-pager",
                 "--root=" + dest, path])
        out = r.stdout + r.stderr
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", out)
        assert m, out
        score = float(m.group(1))
        marked = {line.split()[1] for line in out.splitlines() if line.startswith("✗")}
        print(f"{unit}: exposure {score} {m.group(2)}; marked {sorted(marked)}")
        assert score <= EXPOSURE_MAX, f"{unit}: exposure {score} > {EXPOSURE_MAX}\n{out}"
        assert marked <= ACCEPTED, f"{unit}: new exposures {sorted(marked - ACCEPTED)}"
        assert r.returncode == 0, out


class NotifySocket:
    """The service manager's end: a unix datagram socket in a short
    temporary directory (sun_path holds 108 bytes)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="wsn-", dir="/tmp")
        self.path = os.path.join(self.dir, "notify")
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(self.path)

    def recv(self, timeout):
        self.s.settimeout(timeout)
        try:
            return self.s.recv(4096).decode()
        except socket.timeout:
            return None

    def close(self):
        self.s.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_tracker(tmp_path, note, port, http):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    token = ws.write_token(str(tmp_path / "api.token"))
    log = open(tmp_path / "tracker.log", "ab")
    return subprocess.Popen(
        [binary("tracker/p2p-tracker"), "--listen", f"127.0.0.1:{port}",
         "--http", f"127.0.0.1:{http}", "--cluster-key", key, "--api-token-file", token],
        env={**os.environ, "NOTIFY_SOCKET": note.path},
        stdout=log, stderr=subprocess.STDOUT)


def test_tracker_notifies_ready_when_listening_and_stopping_on_sigterm(tmp_path):
    note = NotifySocket()
    port, http = ws.free_port(), ws.free_port()
    p = start_tracker(tmp_path, note, port, http)
    try:
        msg = note.recv(10)
        assert msg is not None, "no READY=1 in 10 s"
        assert "READY=1" in msg.split("\n"), msg
        # READY means both listeners accept now, without a retry.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        c = socket.create_connection(("127.0.0.1", http), timeout=2)
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert c.recv(64).startswith(b"HTTP/1.1 200"), "healthz"
        c.close()
        p.send_signal(signal.SIGTERM)
        msg = note.recv(10)
        assert msg is not None and "STOPPING=1" in msg.split("\n"), msg
        assert p.wait(20) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        note.close()


def test_tracker_that_cannot_listen_never_says_ready(tmp_path):
    note = NotifySocket()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    p = start_tracker(tmp_path, note, busy.getsockname()[1], ws.free_port())
    try:
        assert p.wait(20) != 0
        msgs = []
        while (m := note.recv(0.2)) is not None:
            msgs.append(m)
        assert not any("READY=1" in m.split("\n") for m in msgs), msgs
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        busy.close()
        note.close()


def policy_build(tmp_path):
    """A build tree whose p2pd and p2p-tracker run the real binaries under
    their unit's seccomp policy (tests/lib/unit_seccomp.py)."""
    fake = tmp_path / "policy-build"
    harness = os.path.join(ROOT, "tests", "lib", "unit_seccomp.py")
    for rel, unit in (("peer/p2pd", "p2pd.service"),
                      ("tracker/p2p-tracker", "p2p-tracker.service")):
        unit_path = os.path.join(BUILD, "deploy", "systemd", unit)
        assert os.path.exists(unit_path), unit_path
        real = binary(rel)
        path = fake / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'#!/bin/sh\nexec /usr/bin/python3 {harness} {unit_path} -- {real} "$@"\n')
        path.chmod(0o755)
    (fake / "tools").mkdir()
    os.symlink(binary("tools/p2pctl"), fake / "tools" / "p2pctl")
    return str(fake)


def test_policy_harness_kills_a_call_outside_the_filter(tmp_path):
    harness = os.path.join(ROOT, "tests", "lib", "unit_seccomp.py")
    unit = os.path.join(BUILD, "deploy", "systemd", "p2pd.service")
    ok = run(["/usr/bin/python3", harness, unit, "--", "/bin/true"])
    assert ok.returncode == 0, ok.stderr
    # setresuid is in @privileged (denied): SIGSYS.
    bad = run(["/usr/bin/python3", harness, unit, "--", "/usr/bin/python3", "-c",
               "import os; os.setresuid(0, 0, 0)"])
    assert bad.returncode == -signal.SIGSYS, (bad.returncode, bad.stderr)
    # AF_NETLINK is not in RestrictAddressFamilies: EAFNOSUPPORT.
    nl = run(["/usr/bin/python3", harness, unit, "--", "/usr/bin/python3", "-c",
              "import socket\ntry:\n socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)\n"
              "except OSError as e:\n print(e.errno)"])
    assert nl.returncode == 0 and nl.stdout.strip() == "97", (nl.stdout, nl.stderr)


def test_swarm_fetch_under_the_units_syscall_policy(rgw, s3env, tmp_path, monkeypatch):
    # On an ASan build, LeakSanitizer's exit check stops the world with
    # ptrace (@debug), which the unit rightly denies: its tracer dies and
    # the daemon hangs at exit. The leak check runs in every other test.
    asan = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    monkeypatch.setenv("ASAN_OPTIONS", asan)
    s3env = dict(s3env, ASAN_OPTIONS=asan)
    src = ws.make_release(str(tmp_path / "model"), shard_bytes=3 * MiB, nshards=2,
                          seed="systemd")
    r = run([binary("tools/p2pctl"), "publish", src, f"s3://{rgw.bucket()}/m/sd/",
             "--json", "--chunk-size", str(1 * MiB)], env=s3env)
    assert r.returncode == 0, r.stderr
    pub = json.loads(r.stdout.strip().splitlines()[-1])
    fake = policy_build(tmp_path)
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(fake, str(tmp_path), key).start()
    peers = [ws.swarm_peer(fake, str(tmp_path), s3env, f"p{i}", trk, key).start()
             for i in range(2)]
    try:
        trk.prefetch(uri=pub["uri"])
        ws.wait_ready(peers, pub["digest"], timeout=120)
        for p in peers:
            ok, bad = ws.tree_equal(src, os.path.join(p.cache, "releases", pub["digest"]))
            assert ok, f"{p.dir}: {bad} differs"
            v = p.ctl("verify", pub["digest"], "--json")
            assert v.returncode == 0 and json.loads(v.stdout)["ok"] is True, v.stderr
            assert p.api("GET", "/metrics")[0] == 200
        for p in peers:
            rc = p.stop()
            assert rc == 0, f"{p.dir}: exit {rc} (-31: a syscall outside the filter)\n{p.tail()}"
        trk.proc.send_signal(signal.SIGTERM)
        rc = trk.proc.wait(20)
        assert rc == 0, f"tracker exit {rc} (-31: a syscall outside the filter)"
    finally:
        for p in peers:
            p.stop()
        trk.stop()
