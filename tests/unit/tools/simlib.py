"""What test_sim.py and test_sim_policy.py share: where the built ws-sim
is, a tiny release, one run as JSON, and what every run must keep."""
import json
import os
import subprocess

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
    """Every node complete and verified, each chunk read from the origin
    once, bytes conserved, nobody faster than the bound."""
    assert d["complete"] is True
    assert d["nodes"] == nodes and d["chunks"] == chunks
    assert d["verified_nodes"] == nodes
    F = d["bytes"]
    assert d["s3_bytes"] >= F
    assert d["s3_gets"] == chunks and d["s3_gets_per_chunk_max"] == 1
    assert d["peer_bytes"] - d["dup_bytes"] == nodes * F - d["s3_bytes"]
    assert d["t_all_s"] >= d["t_min_s"]
    assert d["t_first_s"] <= d["t_p50_s"] <= d["t_p99_s"] <= d["t_all_s"]
