"""ws-sim's peer policy and what it reports (tools/sim, docs/scale.md):
the policy options default to p2pd's own constants (read here from
peer/core/tunables.h, not copied), each option reaches the model, the
invariants of test_sim.py hold under every policy, and the report's
shares add up. At 48 nodes and U = B the linked tracker weighs have-claims
(a holder is believed for a grace unless a HAVE "f" confirms it): the sim
must send those confirmations as p2pd does, or the tracker stops
believing honest holders and leases their chunks again (S3 read more than
once per chunk). Runs the built binary; a few seconds.

Registered with test_sim.py as the meson test `sim` (suite unit).
"""
import json
import os
import re
import subprocess

import pytest

import simlib
from simlib import ROOT, SIM, TINY, sim

# The benchmark's 48-node setup (docs/benchmarks.md).
BENCH48 = ["--nodes", "48", "--rate-mbit", "16", "--origin-mbit", "16",
           "--size-mib", "64", "--chunk-mib", "1", "--rtt-us", "200",
           "--ttfb-ms", "5"]


def tunable(name):
    """The value of #define name in peer/core/tunables.h (products of
    unsigned literals, as that file writes them)."""
    with open(os.path.join(ROOT, "peer", "core", "tunables.h")) as f:
        text = f.read()
    m = re.search(r"^#define\s+%s\s+(.+?)\s*(?:/\*.*)?$" % name, text, re.M)
    assert m, name
    value = 1
    for factor in re.findall(r"(\d+)u?", m.group(1)):
        value *= int(factor)
    return value


def tunable_trk_max():
    """TRK_ORIGIN_INFLIGHT_MAX of tracker/trk_config.h."""
    with open(os.path.join(ROOT, "tracker", "trk_config.h")) as f:
        m = re.search(r"^#define\s+TRK_ORIGIN_INFLIGHT_MAX\s+(\d+)u?",
                      f.read(), re.M)
    assert m
    return int(m.group(1))


def check_invariants(d, nodes, chunks):
    simlib.check_invariants(d, nodes, chunks)
    assert d["s3_bytes"] == d["bytes"]


def test_policy_defaults_are_p2pds_constants():
    d = sim("--nodes", "4", *TINY)
    p = d["policy"]
    assert p["reqs_max"] == tunable("PEER_REQS_MAX")
    assert p["pipeline_depth"] == tunable("PEER_PIPELINE_DEPTH")
    assert p["uploads_max"] == tunable("PEER_UPLOADS_MAX")
    assert p["uploads_spare"] == tunable("PEER_UPLOADS_SPARE")
    assert p["upload_line"] == 0  # p2pd refuses busy at once
    assert p["max_neighbors"] == tunable("PEER_MAX_NEIGHBORS_DEFAULT")
    assert p["dial_share"] == tunable("PEER_NBR_DIAL_SHARE")
    assert p["forward_piece_kib"] * 1024 == tunable("PEER_BUF_BYTES")
    assert p["forward_ms"] == tunable("PEER_BUF_FORWARD_MS")
    assert p["forward"] is True and p["deadlines"] is True
    assert p["first"] is True and p["fill_dial"] is True
    assert p["depth_spread"] is True  # peer_picker_depth
    assert d["frame_queue"] is True


def test_policy_options_reach_the_model():
    d = sim("--nodes", "6", "--rate-mbit", "100", "--reqs-max", "2",
            "--pipeline-depth", "1", "--uploads-max", "3", "--uploads-spare",
            "1", "--upload-line", "2", "--max-neighbors", "3", "--dial-share", "1",
            "--forward-piece-kib", "64", "--forward-ms", "5", "--no-forward",
            "--no-deadlines",
            "--no-first", "--no-fill-dial", "--fixed-depth",
            "--no-frame-queue", "--origin-inflight", "3", *TINY)
    assert d["policy"] == {"reqs_max": 2, "pipeline_depth": 1,
                           "uploads_max": 3, "uploads_spare": 1,
                           "upload_line": 2, "max_neighbors": 3, "dial_share": 1,
                           "forward_piece_kib": 64, "forward_ms": 5,
                           "forward": False,
                           "deadlines": False, "first": False,
                           "fill_dial": False, "depth_spread": False}
    assert d["frame_queue"] is False and d["origin_inflight"] == 3
    check_invariants(d, 6, 16)
    u = d["util"]
    # Three neighbour slots and a few spare ones lent for a while.
    assert 0 < u["neighbours"] <= 3 + tunable("PEER_NBR_SPARE")
    assert u["uploads"] <= 3


@pytest.mark.parametrize("opts", [
    ["--reqs-max", "1"],
    ["--pipeline-depth", "1", "--reqs-max", "64"],
    ["--uploads-max", "2", "--uploads-spare", "1"],
    ["--upload-line", "0"],
    ["--upload-line", "16"],
    ["--max-neighbors", "2", "--dial-share", "1"],
    ["--no-fill-dial"],
    ["--forward-piece-kib", "4"],
    ["--forward-piece-kib", "4096"],
    ["--forward-ms", "0"],
    ["--forward-ms", "1000"],
    ["--no-forward"],
    ["--no-frame-queue", "--quantum-us", "500"],
])
def test_invariants_under_each_policy(opts):
    # Twelve nodes, the origin at a quarter of their rate: chunks are
    # served while they arrive, at every hop, under the changed policy.
    d = sim("--nodes", "12", "--rate-mbit", "100", "--origin-mbit", "25",
            *opts, *TINY)
    check_invariants(d, 12, 16)


def test_forwarding_at_every_hop():
    # With forwarding, a chunk still arriving from a neighbour is served
    # on as it arrives, so more uploads start before their sender holds
    # the chunk than when only chunks from S3 are served so.
    args = ["--nodes", "24", "--rate-mbit", "33", "--origin-mbit", "33",
            "--size-mib", "32", "--chunk-mib", "1"]
    fwd, nofwd = sim(*args), sim(*args, "--no-forward")
    check_invariants(fwd, 24, fwd["chunks"])
    check_invariants(nofwd, 24, nofwd["chunks"])
    assert fwd["chunks_served_live"] > nofwd["chunks_served_live"]


def test_weighed_claims_confirmed_at_48_nodes():
    # Past the tracker's grace every holder must be confirmed by a HAVE
    # "f" naming it, or its chunks are leased again and S3 is read twice.
    d = sim(*BENCH48)
    check_invariants(d, 48, d["chunks"])
    assert d["s3_ratio"] == 1.0
    # One confirmation per chunk a node verified from a neighbour, less
    # the HAVEs still on their way when the last node finished.
    from_peers = 48 * d["chunks"] - d["s3_gets"]
    assert from_peers - 2 <= d["claims_confirmed"] <= from_peers


def test_report_shares_add_up():
    d = sim(*BENCH48, "--seed", "2")
    u = d["util"]
    where = (u["reqs_wire"] + u["reqs_first_buffer"] + u["reqs_behind_held"]
             + u["reqs_upload_slots"] + u["reqs_mux"] + u["reqs_other"])
    assert where == pytest.approx(u["reqs_held"], abs=2e-3)
    assert u["down_by_sender_up"] + u["down_by_own_down"] + \
        u["down_by_source"] == pytest.approx(u["down"], abs=2e-3)
    for k in ("down", "up", "up_all", "reqs_held", "reqs_full", "starved",
              "capped", "down_paced", "down_run"):
        assert 0 <= u[k] <= 1 + 1e-9, k
    assert 0 <= u["in_paced"] <= u["in_flows"]
    assert u["reqs_arriving"] <= u["reqs_held"] + 1e-9
    assert 32 < d["origin_done_s"] <= d["t_all_s"]
    # How chunks crossed the swarm: a GET cannot bring 1 MiB faster than
    # the origin's 16 Mbit/s link (0.52 s), and each later mark is later.
    sp = d["spread_s"]
    assert 0.52 < sp["first"] <= sp["half"] <= sp["all"] <= sp["all_p90"]
    assert sp["all_p90"] < d["t_all_s"]


def test_series_and_hosts():
    d = sim("--nodes", "6", "--rate-mbit", "100", "--sample-ms", "100",
            "--series", "--hosts", *TINY)
    hosts = d["t_hosts_s"]
    assert len(hosts) == 6
    assert max(hosts) == pytest.approx(d["t_all_s"], abs=1e-3)
    assert min(hosts) == pytest.approx(d["t_first_s"], abs=1e-3)
    rows = d["series"]
    assert len(rows) == int(d["t_all_s"] / 0.1)
    times = [r[0] for r in rows]
    assert times == sorted(times) and times[0] == pytest.approx(0.1)
    for r in rows:
        assert len(r) == 8 and 0 <= r[3] <= 6
        assert all(0 <= x <= 1 + 1e-9 for x in (r[1], r[2], r[4], r[5],
                                                 r[6], r[7]))


def test_progress_on_stderr_only():
    """--progress says on stderr, once a sample, how far the run is, and
    changes nothing in the run or its report (but the wall time)."""
    args = ["--nodes", "6", "--rate-mbit", "100", "--sample-ms", "100",
            *TINY]
    runs = [subprocess.run([SIM, "--json", *args, *extra],
                           capture_output=True, text=True, timeout=120)
            for extra in ([], ["--progress"])]
    assert [r.returncode for r in runs] == [0, 0]
    assert runs[0].stderr == ""
    plain, prog = (json.loads(r.stdout) for r in runs)
    del plain["wall_s"], prog["wall_s"]
    assert prog == plain
    lines = runs[1].stderr.splitlines()
    assert len(lines) == int(plain["t_all_s"] / 0.1)
    pat = re.compile(r"ws-sim: t ([0-9.]+) s, (\d+) of 6 nodes done, "
                     r"([0-9.]+) % held, (\d+) events, \d+ s CPU$")
    seen = [pat.match(line) for line in lines]
    assert all(seen), lines
    held = [float(m.group(3)) for m in seen]
    done = [int(m.group(2)) for m in seen]
    assert float(seen[0].group(1)) == pytest.approx(0.1)
    assert held == sorted(held) and 0 <= held[0] and held[-1] <= 100
    assert done == sorted(done) and done[-1] < 6


def test_retransmission_timeouts_stop_transfers():
    # --rto-per-mib: each transfer meets timeouts at that rate over the
    # bytes it carries, each stopping it for --rto-ms. Off by default and
    # at 0; on, the invariants hold, the count is about the rate times
    # the MiB carried, and the swarm is slower, the more so the longer
    # each timeout.
    args = ["--nodes", "12", "--rate-mbit", "100", "--origin-mbit", "100",
            *TINY]
    base, zero = sim(*args), sim(*args, "--rto-per-mib", "0")
    assert base["rto_stalls"] == 0 and base["rto_per_mib"] == 0
    base.pop("wall_s"), zero.pop("wall_s")
    assert zero == base
    lossy = sim(*args, "--rto-per-mib", "0.5", "--rto-ms", "300")
    check_invariants(lossy, 12, 16)
    assert lossy["rto_ms"] == 300
    mib = (lossy["s3_bytes"] + lossy["peer_bytes"] +
           lossy["wasted_bytes"]) / 2**20
    assert 0.6 * 0.5 * mib <= lossy["rto_stalls"] <= 1.4 * 0.5 * mib
    assert lossy["t_all_s"] > base["t_all_s"]
    longer = sim(*args, "--rto-per-mib", "0.5", "--rto-ms", "1500")
    check_invariants(longer, 12, 16)
    assert longer["t_all_s"] > lossy["t_all_s"]


def test_stripe_trees_reach_the_model():
    """--stripes runs the linked tracker's stripe trees (docs/tracker.md):
    at 24 nodes a chunk then reaches every node a few pieces after its
    root's GET, much sooner than through the default choice."""
    args = ("--nodes", "24", "--rate-mbit", "33", "--shards", "1",
            "--shard-mib", "32", "--small-files", "0", "--chunk-mib", "1",
            "--rtt-us", "200", "--ttfb-ms", "5")
    base = sim(*args)
    tree = sim(*args, "--stripes", "4")
    for d in (base, tree):
        check_invariants(d, 24, 32)
    assert base["stripes"] == 0 and tree["stripes"] == 4
    assert tree["spread_s"]["all"] < base["spread_s"]["all"] / 2
    assert tree["t_all_s"] < base["t_all_s"]


def test_bad_policy_refused():
    for args in (["--pipeline-depth", "0"], ["--uploads-spare", "16"],
                 ["--dial-share", "0"], ["--max-neighbors", "0"],
                 ["--rto-per-mib", "-1"], ["--rto-ms", "0"],
                 ["--origin-inflight", str(tunable_trk_max() + 1)],
                 ["--stripes", "17"]):
        r = subprocess.run([SIM, *args], capture_output=True, text=True,
                           timeout=20)
        assert r.returncode == 2, args
