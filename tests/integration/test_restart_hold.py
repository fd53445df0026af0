"""A tracker restarted without --state (a Kubernetes pod replaced, the
manifests in deploy/k8s keep no state) still knows it restarted: a p2pd
whose link to a tracker was lost says so in its next HELLO ("rj"), and a
tracker that hears that within TRK_RESTART_HOLD_MS (10 s) of its start
holds its S3 leases until then, as after a --state restart
(docs/tracker.md, "The restart hold"). A node joining a fresh tracker for
the first time starts no hold.

Before the change a stateless tracker could not tell a restart from a first
start: restart_hold_s stayed 0 after the restart below.

WS_P2PD_BUILD=DIR runs the node from another build (e.g. the p2pd from
before the change against this tracker)."""
import os
import signal
import time

from conftest import BUILD
import ws


def hold_s(trk):
    st, body = trk.get("/api/v1/swarms")
    assert st == 200, body
    return body["restart_hold_s"]


def test_node_rejoining_a_restarted_tracker_starts_the_hold(s3env, tmp_path):
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    nodes = os.environ.get("WS_P2PD_BUILD") or None
    p = ws.swarm_peer(BUILD, str(tmp_path), s3env, "p1", trk, key,
                      binary_build=nodes).start()
    try:
        ws.wait_for(lambda: trk.metric("weightswarm_tracker_peers") == 1, 20,
             "the node joins")
        # A first join is no restart.
        assert hold_s(trk) == 0, trk.tail()
        assert "rejoin" not in trk.tail(100000)
        # The tracker dies and comes back on the same ports, with no state.
        trk.stop(signal.SIGKILL)
        t0 = time.time()
        trk.start()
        ws.wait_for(lambda: trk.metric("weightswarm_tracker_peers") == 1, 20,
             "the node rejoins")
        h = hold_s(trk)
        since = time.time() - t0
        # Counted from the tracker's start, so at most 10 s and no more
        # than what is left of them.
        assert 0 < h <= 10 - since + 0.75, (h, since, trk.tail())
        assert trk.metric("weightswarm_tracker_restart_hold_seconds") > 0
        log = trk.tail(100000)
        assert "peer rejoined" in log and "a restart: node" in log, log
        # The hold ends on its own.
        ws.wait_for(lambda: hold_s(trk) == 0, 15, "the hold ends")
    finally:
        p.stop()
        trk.stop()
