"""An S3 GET that gets no answer is cut after p2pd's stall deadline and
tried again (docs/s3.md "Stall deadline"), against a real radosgw behind
a proxy that sits on chosen requests.

Before the deadline, such a GET waited out the 20 s low-speed window; on
the shaped 48-node bench a single held chunk kept every node waiting
(docs/benchmarks.md, session 18). Here the first two GETs get nothing
for 60 s: the release must be ready well before one low-speed window
would have passed, both held GETs counted as stalls, the files intact.
"""
import os
import time

import pytest

from conftest import BUILD, s3_environ
from s3fault import S3Fault
import ws

MiB = 1 << 20
HOLD_S = 60
# Two held GETs under the low-speed window alone: 40 s and more.
READY_BOUND_S = 15


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    d = tmp_path_factory.mktemp("s3stall") / "model"
    ws.make_release(str(d), shard_bytes=2 * MiB, nshards=2, seed="s3stall")
    return str(d)


@pytest.fixture(scope="module")
def pub(rgw, rel):
    return ws.publish(BUILD, s3_environ(rgw), rel, f"s3://{rgw.bucket()}/m/s3stall/",
                      MiB)


def test_get_without_answer_is_cut_and_retried(rgw, s3env, rel, pub, tmp_path):
    host, port = rgw.endpoint.split("//")[1].split(":")
    proxy = S3Fault(host, int(port))
    env = dict(s3env, AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{proxy.port}")
    p = ws.P2pd(BUILD, str(tmp_path / "p"), env).start()
    try:
        proxy.hold(HOLD_S, 2)
        t0 = time.time()
        st, body = p.api("POST", "/api/v1/prefetch", {"uri": pub["uri"]})
        assert st == 200, body
        r = p.ctl("wait", pub["digest"], "--timeout", "120s")
        elapsed = time.time() - t0
        assert r.returncode == 0, r.stderr + p.tail()
        assert proxy.held == 2
        assert elapsed < READY_BOUND_S, (elapsed, p.tail())
        assert p.metric("weightswarm_p2pd_s3_stalls_total") >= 2
        ok, bad = ws.tree_equal(rel, os.path.join(p.cache, "releases", pub["digest"]))
        assert ok, f"{bad} differs from what was published"
    finally:
        p.stop()
        proxy.close()
