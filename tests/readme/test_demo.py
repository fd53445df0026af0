"""The README's first command, as a new user runs it: `tools/demo` from a
fresh copy of the tree (no build directory yet), started from a directory
that is not the repository, then once more from another one.

- The first run sets up and builds the copy itself (meson is given the
  source directory: with the working directory taken for it instead, the
  demo stopped at its build step, silently, whenever it was not started
  from the repository's root).
- Each run starts its own radosgw, tracker and peers, distributes a small
  generated release and prints what happened: every peer done, S3 sending
  about one release, and each peer's bytes from S3 and from peers adding
  up to the release's size exactly (the demo printed the size with its
  directory's 4 KiB in it).
- The second run, straight after, finds the build and the S3 server's
  directory of the first and works again.
"""
import os
import re
import shutil
import subprocess

from conftest import ROOT

PEERS = 2
SIZE_MIB = 8


def fresh_copy(dst):
    """The tree's tracked files as they are in the working tree (so that a
    change not yet committed is what runs), without any build directory."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True,
                         capture_output=True).stdout
    for rel in filter(None, out.decode().split("\0")):
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src):
            continue  # deleted in the working tree
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dst, rel))


def run_demo(tree, cwd):
    p = subprocess.run([os.path.join(tree, "tools", "demo"), "--peers", str(PEERS),
                        "--size-mib", str(SIZE_MIB)],
                       cwd=cwd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"tools/demo from {cwd}: exit {p.returncode}\n" \
        f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def check_report(out):
    assert re.search(rf"^all {PEERS} peers done in: +[0-9.]+ s$", out, re.M), out
    m = re.search(r"^S3 sent \(radosgw\): +(\d+) bytes = ([0-9.]+) x release size", out, re.M)
    assert m, out
    assert 0.99 <= float(m.group(2)) <= 1.05, out
    rows = re.findall(r"^p(\d+) +[0-9.]+ +(\d+) +(\d+)  /", out, re.M)
    assert sorted(int(r[0]) for r in rows) == list(range(1, PEERS + 1)), out
    size = int(re.search(r"^release: +sha256-[0-9a-f]{64} \((\d+) bytes\)$", out, re.M).group(1))
    for _, s3, peers in rows:
        assert int(s3) + int(peers) == size, out  # each peer got it once


def test_demo_from_a_fresh_copy_anywhere_twice(tmp_path):
    tree = tmp_path / "weightswarm"
    fresh_copy(str(tree))
    assert not (tree / "build").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    check_report(run_demo(str(tree), "/"))
    assert (tree / "build" / "peer" / "p2pd").exists()
    check_report(run_demo(str(tree), str(elsewhere)))
