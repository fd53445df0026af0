"""The command line of the three binaries, run as built (no servers): --help
on stdout with exit 0 for every binary and every p2pctl command (each
mentioning its options), --version everywhere with meson's project version,
the test-only p2pd option kept out of help, Kubernetes sizes and their
refusals as p2pd reports them, --zone-file errors, the man pages rendered
with `man -l`, and the bash completion sourced and asked to complete.

Registered as the meson test `cli` (suite unit); runs in a few seconds.
"""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.environ.get("WS_SOURCE_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("WS_BUILD_ROOT") or os.path.join(ROOT, "build")
P2PD = os.path.join(BUILD, "peer", "p2pd")
TRACKER = os.path.join(BUILD, "tracker", "p2p-tracker")
P2PCTL = os.path.join(BUILD, "tools", "p2pctl")
COMPLETION = os.path.join(ROOT, "tools", "completion", "weightswarm.bash")


def version():
    text = open(os.path.join(ROOT, "meson.build")).read()
    return re.search(r"project\([^)]*?version:\s*'([^']+)'", text, re.S).group(1)


def run(*args, env=None, timeout=20):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("P2P"):
            del e[k]  # the caller's P2P_* must not change what is tested
    e.update(env or {})
    return subprocess.run(list(args), capture_output=True, text=True,
                          timeout=timeout, env=e)


# Every p2pctl command and options its --help must mention.
P2PCTL_COMMANDS = {
    "manifest": ["create", "check", "--chunk-size", "--threads", "--sig"],
    "publish": ["--json", "--sign-key", "--chunk-size", "--model",
                "--version", "--concurrency", "--threads", "--tag"],
    "tag": ["--expect", "compare-and-swap"],
    "resolve": ["TAG"],
    "prefetch": ["--digest", "--wait", "--timeout", "--retry-for", "--json",
                 "--hold", "--hold-ttl"],
    "wait": ["--timeout", "--retry-for", "--json", "--hold", "--hold-ttl"],
    "hold": ["--ttl", "--json"],
    "unhold": ["--json"],
    "status": ["--json"],
    "ls": ["--json"],
    "pin": ["--json"],
    "unpin": ["--json"],
    "evict": ["--json"],
    "verify": ["--json"],
    "seed": ["--manifest", "--json"],
    "node-zone": ["--out", "--node"],
    "targets": ["--json", "--api-token-file"],
    "version": [],
    "help": [],
}
P2PD_OPTIONS = ["--cache", "--api", "--http", "--metrics", "--listen",
                "--tracker", "--cluster-key", "--capacity", "--s3-concurrency",
                "--log-level", "--node-id", "--zone", "--zone-file", "--label",
                "--max-neighbors", "--upload-rate", "--download-rate",
                "--config", "--api-token-file", "--api-token-reads",
                "--insecure", "--version"]
TRACKER_OPTIONS = ["--listen", "--http", "--metrics", "--cluster-key",
                   "--state", "--origin-inflight", "--stripes", "--log-level",
                   "--api-token-file", "--api-token-reads", "--insecure",
                   "--max-nodes-per-addr", "--version"]


def check_help(r, options):
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stderr == "", r.stderr
    assert r.stdout.startswith("usage: "), r.stdout
    for o in options:
        assert o in r.stdout, (o, r.stdout)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_daemons_help(flag):
    check_help(run(P2PD, flag), P2PD_OPTIONS)
    check_help(run(TRACKER, flag), TRACKER_OPTIONS)
    check_help(run(P2PCTL, flag), ["--api"] + list(P2PCTL_COMMANDS))


def test_p2pctl_commands_listed():
    out = run(P2PCTL, "--help").stdout
    listed = re.findall(r"^  ([a-z-]+) ", out.split("commands:")[1], re.M)
    assert sorted(listed) == sorted(P2PCTL_COMMANDS), listed


@pytest.mark.parametrize("cmd", sorted(P2PCTL_COMMANDS))
def test_p2pctl_command_help(cmd):
    r = run(P2PCTL, cmd, "--help")
    check_help(r, P2PCTL_COMMANDS[cmd] if cmd not in ("version", "help")
               else [])
    if cmd not in ("version", "help"):
        assert f"usage: p2pctl {cmd}" in r.stdout
        # also after other words, and via `p2pctl help CMD`
        check_help(run(P2PCTL, cmd, "x", "--help"), P2PCTL_COMMANDS[cmd])
        assert run(P2PCTL, "help", cmd).stdout == r.stdout


def test_version_everywhere():
    v = version()
    for argv, prog in [([P2PD, "--version"], "p2pd"),
                       ([TRACKER, "--version"], "p2p-tracker"),
                       ([P2PCTL, "--version"], "p2pctl"),
                       ([P2PCTL, "version"], "p2pctl"),
                       ([P2PCTL, "--api", "/x", "--version"], "p2pctl")]:
        r = run(*argv)
        assert r.returncode == 0 and r.stdout == f"{prog} {v}\n", (argv, r)


def test_usage_errors_on_stderr():
    for argv in ([P2PD, "--bogus"], [TRACKER, "--bogus"], [P2PCTL, "bogus"],
                 [P2PCTL, "publish"], [P2PCTL, "prefetch"],
                 [P2PCTL, "wait", "not-a-digest"], [P2PCTL, "ls", "--nope"],
                 [P2PCTL, "--api"], [P2PCTL]):
        r = run(*argv)
        assert r.returncode == 2 and r.stdout == "" and r.stderr, (argv, r)


@pytest.mark.parametrize("bad", ["0", "65535", "x", "-1"])
def test_tracker_nodes_per_addr_refused(bad):
    r = run(TRACKER, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
            "--insecure", "--max-nodes-per-addr", bad)
    assert r.returncode == 2, (bad, r)
    assert f"--max-nodes-per-addr '{bad}': want" in r.stderr, r.stderr
    r = run(TRACKER, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
            "--insecure", env={"P2P_TRACKER_MAX_NODES_PER_ADDR": bad})
    assert r.returncode == 2 and "--max-nodes-per-addr" in r.stderr, r.stderr


def test_test_only_option_hidden():
    assert "test-corrupt" not in run(P2PD, "--help").stdout
    # still parsed: a build without fault injection names what it needs
    r = run(P2PD, "--cache", "/nonexistent", "--test-corrupt-serve")
    assert r.returncode == 2 and "fault_inject" in r.stderr, r.stderr
    man = os.path.join(BUILD, "docs", "man", "p2pd.8")
    if os.path.exists(man):
        assert "test-corrupt" not in open(man).read()


@pytest.mark.parametrize("bad", ["800GB", "800gb", "1.5G", "800GiB", "-1",
                                 "800 G", "12x"])
def test_sizes_refused(bad):
    for opt in ("--capacity", "--upload-rate"):
        r = run(P2PD, "--cache", "/nonexistent", opt, bad)
        assert r.returncode == 2, (opt, bad, r)
        assert "800G" in r.stderr and "800Gi" in r.stderr, r.stderr
        assert "powers of 1000" in r.stderr and "Ki" in r.stderr
    r = run(P2PD, "--cache", "/nonexistent", env={"P2P_CAPACITY": bad})
    assert r.returncode == 2 and "--capacity" in r.stderr, r.stderr


@pytest.mark.parametrize("size,want", [("800G", 800 * 10**9),
                                       ("800Gi", 800 * 2**30),
                                       ("1500M", 1500 * 10**6),
                                       ("123456", 123456)])
def test_sizes_accepted(tmp_path, size, want):
    """p2pd starts with the capacity and logs the bytes it understood."""
    sock = str(tmp_path / "api.sock")
    p = subprocess.Popen([P2PD, "--cache", str(tmp_path / "c"), "--api", sock,
                          "--capacity", size], stderr=subprocess.PIPE,
                         text=True)
    try:
        line = ""
        for line in p.stderr:
            if "bytes used of" in line:
                break
        assert f"bytes used of {want}" in line, line
    finally:
        p.terminate()
        p.wait(20)
    assert p.returncode == 0


def test_zone_file_errors(tmp_path):
    r = run(P2PD, "--cache", str(tmp_path / "c"), "--zone-file",
            str(tmp_path / "missing"))
    assert r.returncode == 2 and "--zone-file" in r.stderr, r.stderr
    z = tmp_path / "zone"
    z.write_text("a zone with spaces\n")
    r = run(P2PD, "--cache", str(tmp_path / "c"), "--zone-file", str(z))
    assert r.returncode == 2 and "--zone-file" in r.stderr, r.stderr
    z.write_text("z" * 200 + "\n")
    r = run(P2PD, "--cache", str(tmp_path / "c"), "--zone-file", str(z))
    assert r.returncode == 2 and "longer" in r.stderr, r.stderr


def test_man_pages():
    pages = {"p2pd.8": P2PD_OPTIONS, "p2p-tracker.8": TRACKER_OPTIONS,
             "p2pctl.1": ["--retry-for", "prefetch", "publish", "wait"]}
    if shutil.which("scdoc") is None:
        pytest.skip("scdoc not installed (tools/bootstrap installs it): "
                    "man pages are not built")
    for page, words in pages.items():
        path = os.path.join(BUILD, "docs", "man", page)
        assert os.path.exists(path), f"{path} not built (scdoc is installed)"
        r = subprocess.run(["man", "-l", "-P", "cat", path], capture_output=True,
                           text=True, env=dict(os.environ, MANWIDTH="100"),
                           timeout=30)
        assert r.returncode == 0, r.stderr
        text = r.stdout.replace("\u2010", "-").replace("\u2212", "-")
        assert "NAME" in text and "SYNOPSIS" in text, text[:400]
        for w in words:
            assert w in text, (page, w)
        assert "warning" not in r.stderr.lower(), r.stderr


def complete(words, cword=None):
    """Sources the completion and runs the function bash would run for the
    command line `words` with the cursor on the last word."""
    cword = len(words) - 1 if cword is None else cword
    arr = " ".join("'%s'" % w for w in words)
    func = "_weightswarm_p2pctl" if words[0].endswith("p2pctl") \
        else "_weightswarm_daemon"
    script = (f"source '{COMPLETION}'; COMP_WORDS=({arr}); COMP_CWORD={cword}; "
              f"{func} '{words[0]}' '{words[cword]}' '{words[cword - 1]}'; "
              "printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.split("\n") if w]


def test_completion():
    r = subprocess.run(["bash", "-n", COMPLETION], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert complete([P2PCTL, ""]) == sorted(P2PCTL_COMMANDS) or \
        sorted(complete([P2PCTL, ""])) == sorted(P2PCTL_COMMANDS)
    assert complete([P2PCTL, "pre"]) == ["prefetch"]
    assert complete([P2PCTL, "--api", "/s", "wa"]) == ["wait"]
    assert complete([P2PCTL, "prefetch", "--re"]) == ["--retry-for"]
    assert set(complete([P2PCTL, "publish", "--c"])) == {"--chunk-size",
                                                          "--concurrency"}
    assert complete([P2PCTL, "manifest", "cr"]) == ["create"]
    assert complete([P2PCTL, "help", "pu"]) == ["publish"]
    assert set(complete([P2PD, "--zo"])) == {"--zone", "--zone-file"}
    assert complete([P2PD, "--test"]) == []  # hidden stays hidden
    assert complete([P2PD, "--log-level", "de"]) == ["debug"]
    assert complete([TRACKER, "--orig"]) == ["--origin-inflight"]
