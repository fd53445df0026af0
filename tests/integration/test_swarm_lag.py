"""tools/swarm_lag.py reads a kept swarm run's debug logs: each host's S3
GETs and chunks from neighbours, spread over their time, against what S3
has sent. Two hosts written here with known times: a reader that gets a
1 MiB chunk from S3 in 1 s, and a neighbour that takes it from 0.5 s to
1.5 s."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "swarm_lag.py")

READER = """\
2026-12-06T10:00:00.000Z p2pd info: release sha256-ab: prefetch from s3://b/p/
2026-12-06T10:00:00.000Z p2pd debug: origin: GET f.safetensors chunk 0 (1048576 bytes)
2026-12-06T10:00:00.000Z p2pd debug: s3 creds: idle -> planning
2026-12-06T10:00:00.000Z p2pd debug: s3 req#1: attempt 1 http://10.77.0.1:7480/b/p/f.safetensors
2026-12-06T10:00:01.000Z p2pd debug: s3 req#1: done status=0 attempts=1
"""
NEIGHBOUR = """\
2026-12-06T10:00:00.100Z p2pd info: release sha256-ab: prefetch from s3://b/p/
2026-12-06T10:00:01.500Z p2pd debug: chunk 0 of f.safetensors from 10113b27c147142c: whole 1000 ms after its header
"""


def write_run(tmp_path):
    for host, text in (("swarm-h1", READER), ("swarm-h2", NEIGHBOUR)):
        (tmp_path / host).mkdir()
        (tmp_path / host / "p2pd.log").write_text(text)


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)


def test_lag_and_spread_from_two_hosts(tmp_path):
    write_run(tmp_path)
    r = run(str(tmp_path), "--json", "--step-s", "1", "--rate-mbit", "16")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["hosts"] == 2 and res["s3_gets"] == 1
    at1, at2 = res["series"][0], res["series"][1]
    # At 1 s: S3 sent the whole MiB, the reader holds it, the neighbour half.
    assert at1["t_s"] == 1 and at1["s3_mib"] == 1.0
    assert at1["lag_worst_mib"] == 0.5
    assert at1["host_median_mib"] == 0.75
    # The neighbour's transfer runs at 1 MiB/s: 1048576 / (16e6 / 8 * 0.956).
    assert abs(at1["down_use_median"] - 0.548) < 0.002
    assert at2["lag_worst_mib"] == 0.0 and at2["lag_median_mib"] == 0.0
    assert res["chunks"] == {"get_s": 1.0, "first_start_s": 0.5, "median_start_s": 0.5,
                             "median_whole_s": 1.5, "last_whole_s": 1.5}
    assert at1["gets_under_way"] == 0  # the GET ended at 1 s
    # Both hosts' last bytes came at 1 MiB/s over their last second: 0.548
    # of the link; spread over 2 and 4 s, half and a quarter of it.
    tail = res["tail"]
    for who in ("median", "last_host"):
        assert abs(tail[f"{who}_last_1s"] - 0.548) < 0.002
        assert abs(tail[f"{who}_last_2s"] - 0.274) < 0.002
        assert abs(tail[f"{who}_last_4s"] - 0.137) < 0.002
    assert res["gets"] == [{"file": "f.safetensors", "chunk": 0, "host": "swarm-h1",
                            "start_s": 0.0, "end_s": 1.0}]
    half = json.loads(run(str(tmp_path), "--json", "--step-s", "0.5").stdout)
    assert half["series"][0]["t_s"] == 0.5 and half["series"][0]["gets_under_way"] == 1
    assert "tail" not in half  # no link rate given
    text = run(str(tmp_path))
    assert text.returncode == 0 and "2 hosts, 1 S3 GETs" in text.stdout
    text = run(str(tmp_path), "--gets", "--rate-mbit", "16")
    assert text.returncode == 0 and "f.safetensors 0  swarm-h1" in text.stdout
    assert "last host 0.548 / 0.274 / 0.137" in text.stdout


UPLOADS = """\
2026-12-06T10:00:00.500Z p2pd debug: upload #1: chunk 0 to nbr#3 10113b27c147142c (arriving here)
2026-12-06T10:00:01.200Z p2pd debug: upload #2: chunk 0 to nbr#4 20113b27c147142c (held)
2026-12-06T10:00:01.500Z p2pd debug: upload #1: ended, 1048576 of 1048576 bytes sent
2026-12-06T10:00:01.800Z p2pd debug: upload #2: ended, 1048576 of 1048576 bytes sent
"""


def test_transfers_and_uploads_under_way(tmp_path):
    """The reader sends its chunk on while it arrives (0.5-1.5 s), then
    whole to another neighbour (1.2-1.8 s); the series counts what each
    host receives and, from p2pd's upload lines, what it sends."""
    write_run(tmp_path)
    res = json.loads(run(str(tmp_path), "--json", "--step-s", "0.5").stdout)
    s = {r["t_s"]: r for r in res["series"]}
    assert "uploads_mean" not in s[0.5]  # no upload lines: not counted
    assert s[0.5]["arriving_mean"] == 1.0  # the GET, and the neighbour's
    assert s[1.0]["arriving_mean"] == 0.5  # the GET ended at 1 s
    log = tmp_path / "swarm-h1" / "p2pd.log"
    log.write_text(READER + UPLOADS)
    res = json.loads(run(str(tmp_path), "--json", "--step-s", "0.5").stdout)
    s = {r["t_s"]: r for r in res["series"]}
    # Means over the two hosts: the reader's uploads, the neighbour's none.
    assert (s[1.0]["uploads_mean"], s[1.0]["uploads_arriving_mean"]) == (0.5, 0.5)
    assert (s[1.5]["uploads_mean"], s[1.5]["uploads_arriving_mean"]) == (0.5, 0.0)
    assert s[2.0]["uploads_mean"] == 0.0
    text = run(str(tmp_path), "--step-s", "0.5")
    assert text.returncode == 0 and "arriving  uploads  (arriving)" in text.stdout


def test_a_run_without_debug_lines_is_refused(tmp_path):
    (tmp_path / "swarm-h1").mkdir()
    (tmp_path / "swarm-h1" / "p2pd.log").write_text(
        "2026-12-06T10:00:00.000Z p2pd warn: nbr#4 10.77.0.51: handshake ended\n")
    r = run(str(tmp_path))
    assert r.returncode != 0 and "prefetch" in r.stderr
    r = run(str(tmp_path / "nothing-here"))
    assert r.returncode != 0 and "no swarm-h*/p2pd.log" in r.stderr


def test_a_host_that_took_nothing_is_left_out(tmp_path):
    """A host that logged its prefetch and then nothing (it failed before
    any transfer) counts as holding nothing; the tool still reads the run."""
    write_run(tmp_path)
    (tmp_path / "swarm-h3").mkdir()
    (tmp_path / "swarm-h3" / "p2pd.log").write_text(
        "2026-12-06T10:00:00.200Z p2pd info: release sha256-ab: prefetch from s3://b/p/\n")
    r = run(str(tmp_path), "--json", "--step-s", "1", "--rate-mbit", "16")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["hosts"] == 3
    at1 = res["series"][0]
    assert at1["lag_worst_mib"] == 1.0  # it has none of the MiB S3 sent
    assert abs(at1["down_use_median"] - 0.548) < 0.002  # of those fetching
    assert abs(res["tail"]["last_host_last_1s"] - 0.548) < 0.002
