"""ws-sim (tools/sim, docs/scale.md) on tiny swarms: what every run must
keep whatever its parameters. Every node ends holding every chunk (counted
from its bitmap by the simulator after the run); the origin sends every
chunk once, under one lease each (the tracker's single flight); bytes are
conserved (what the nodes received from peers, less duplicates, is what
they did not get from S3); nobody beats the bound T_min; and a run is the
same for the same seed. Runs the built binary; a few seconds.

Registered as the meson test `sim` (suite unit).
"""
import subprocess

import pytest

import simlib
from simlib import SIM, TINY, sim


def check_invariants(d, nodes, chunks):
    simlib.check_invariants(d, nodes, chunks)
    assert d["leases_granted"] == chunks


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
