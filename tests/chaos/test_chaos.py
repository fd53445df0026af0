"""A two-minute seeded chaos run (tools/chaos) on the build under test:
tracker, four peers and the S3 fault proxy in front of this suite's
radosgw; kill -9 of peers and the tracker, S3 stalls and 503s, disk full
on one peer. Fails on any violation of the invariants tools/chaos checks
(liveness, integrity, S3 bytes per release, no crash or sanitizer report);
its output names each violation with the seed that reproduces it.

WS_CHAOS_SEED and WS_CHAOS_MINUTES change the run (default seed 1, 2 min).
"""
import os
import subprocess

from conftest import BUILD, ROOT, binary


def test_chaos_two_minutes(rgw):
    binary("peer/p2pd")
    seed = os.environ.get("WS_CHAOS_SEED", "1")
    minutes = os.environ.get("WS_CHAOS_MINUTES", "2")
    env = dict(os.environ, WS_TEST_S3_ENDPOINT=rgw.endpoint, **rgw.env)
    r = subprocess.run([os.path.join(ROOT, "tools", "chaos"), "--seed", seed,
                        "--minutes", minutes, "--peers", "4", "--build", BUILD],
                       env=env, capture_output=True, text=True,
                       timeout=int(float(minutes) * 60) + 900)
    print(r.stdout[-20000:])
    print(r.stderr[-5000:])
    assert r.returncode == 0, "chaos run failed:\n" + r.stdout[-8000:] + r.stderr[-3000:]
