"""tools/bench runs one at a time (benchlib.exclusive): two runs at once
tore down each other's namespaces and radosgw (a 48-node swarm run died
reading the S3 host's bytes when a second run began its setup, session
39). A second holder says who holds the lock and waits until it is free."""
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HOLD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import benchlib
f = benchlib.exclusive(sys.argv[2])
print("held", time.time(), flush=True)
time.sleep(float(sys.argv[3]))
"""


def start(lock, seconds):
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, os.path.join(ROOT, "tools"), lock, str(seconds)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_second_run_waits_for_the_first(tmp_path):
    lock = str(tmp_path / "bench.lock")
    first = start(lock, 1.5)
    line = first.stdout.readline().split()
    assert line[0] == "held"
    first_at = float(line[1])
    second = start(lock, 0)
    out, err = second.communicate(timeout=30)
    first.communicate(timeout=30)
    second_at = float(out.split()[1])
    assert second_at - first_at >= 1.4  # it waited for the first to exit
    assert f"another run holds {lock} (pid {first.pid})" in err
    assert second.returncode == 0 and first.returncode == 0


def test_free_lock_taken_at_once(tmp_path):
    lock = str(tmp_path / "bench.lock")
    t0 = time.time()
    p = start(lock, 0)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0
    assert float(out.split()[1]) - t0 < 5
    assert err == ""
