"""ws-sim (tools/sim, docs/scale.md) on tiny swarms: what every run must
keep whatever its parameters. Every node ends holding every chunk (counted
from its bitmap by the simulator after the run); the origin sends every
chunk once, under one lease each (the tracker's single flight); bytes are
conserved (what the nodes received from peers, less duplicates, is what
they did not get from S3); nobody beats the bound T_min; and a run is the
same for the same seed. Runs the built binary; a few seconds.

Registered as the meson test `sim` (suite unit).
"""
import json
import os
import subprocess

import pytest

ROOT = os.environ.get("WS_SOURCE_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("WS_BUILD_ROOT") or os.path.join(ROOT, "build")
SIM = os.path.join(BUILD, "tools", "sim", "ws-sim")

# 16 chunks of 1 MiB in one file, no small files.
TINY = ["--shards", "1", "--shard-mib", "16", "--small-files", "0",
        "--chunk-mib", "1"]


def sim(*args):
    r = subprocess.run([SIM, "--json", *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "runtime error" not in r.stderr, r.stderr  # UBSan (build-asan)
    return json.loads(r.stdout)


def check_invariants(d, nodes, chunks):
    assert d["complete"] is True
    assert d["nodes"] == nodes and d["chunks"] == chunks
    assert d["verified_nodes"] == nodes
    F = d["bytes"]
    assert d["s3_bytes"] >= F
    assert d["s3_gets"] == chunks and d["s3_gets_per_chunk_max"] == 1
    assert d["leases_granted"] == chunks
    assert d["peer_bytes"] - d["dup_bytes"] == nodes * F - d["s3_bytes"]
    assert d["t_all_s"] >= d["t_min_s"]
    assert d["t_first_s"] <= d["t_p50_s"] <= d["t_p99_s"] <= d["t_all_s"]


@pytest.mark.parametrize("quantum", ["0", "200"])
@pytest.mark.parametrize("seed", ["1", "2", "3"])
def test_four_nodes_sixteen_chunks(quantum, seed):
    d = sim("--nodes", "4", "--rate-mbit", "100", "--origin-mbit", "100",
            "--quantum-us", quantum, "--seed", seed, *TINY)
    check_invariants(d, 4, 16)
    # Four nodes, U = B: the pipelines keep every link busy; a broken
    # picker, slot or lease rule shows as a run far above the bound.
    assert d["ratio"] < 1.5


def test_slow_origin_live_serving():
    # The origin at a quarter of a node's rate, twelve nodes: S3 flows are
    # slow, neighbours ask for chunks while they arrive (HAVE "p").
    d = sim("--nodes", "12", "--rate-mbit", "100", "--origin-mbit", "25",
            "--goodput", "1", *TINY)
    check_invariants(d, 12, 16)
    assert d["t_all_s"] >= d["bytes"] * 8 / 25e6


def test_small_files_and_spread_start():
    d = sim("--nodes", "6", "--rate-mbit", "50", "--shards", "2",
            "--shard-mib", "4", "--small-files", "3", "--chunk-mib", "1",
            "--spread-ms", "500", "--rtt-us", "2000")
    check_invariants(d, 6, 11)


def test_same_seed_same_run():
    args = ["--nodes", "5", "--rate-mbit", "100", "--seed", "7", *TINY]
    a, b = sim(*args), sim(*args)
    for d in (a, b):
        d.pop("wall_s")
    assert a == b


def test_bad_option_refused():
    r = subprocess.run([SIM, "--nodes", "x"], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 2 and "bad option" in r.stderr
