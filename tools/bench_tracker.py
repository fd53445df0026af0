"""tools/bench tracker: tracker capacity. A real p2p-tracker on loopback and
the load generator build/tools/bench_tracker (tools/bench_tracker.c): N
simulated nodes, each over its own authenticated connection, announcing R
releases and the presence digest every 5 s (the tracker's interval, less
p2pd's random share of up to 15 %), the connections spread over --ramp-s. Per run it prints announce latency (sent
-> reply) p50/p99/max, the tracker's CPU over the measured window (seconds
and % of one core), its peak RSS (VmHWM), the machine's busy and stolen
CPU share in that window, how late the generator's own loop ran (p99 and
max of a 5-ms timer's lateness: a reply that came meanwhile waited as
long, so it is part of the measured latency that is not the tracker's),
refusals and the tracker's log lines; with
--rounds R, then the medians. --tracker-bin measures another build's
tracker (e.g. the one before a change) with this generator.
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time

import ws
from benchlib import BUILD, sh

KEYS = ["p50_ms", "p99_ms", "max_ms", "tracker_cpu_pct", "tracker_cpu_us_per_announce",
        "tracker_hwm_mib",
        "machine_busy_pct", "machine_steal_pct", "tracker_runq_wait_pct",
        "generator_cpu_pct", "generator_lag_p99_ms", "peers_up", "refused", "log_lines"]


def wait_port(port, proc, deadline_s=30.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("p2p-tracker exited at start (rc %s)" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("p2p-tracker did not listen on %d" % port)


def niced(n):
    """preexec_fn: the child at nice n (negative needs the privilege)."""
    return (lambda: os.setpriority(os.PRIO_PROCESS, 0, n)) if n else None


def one_run(a, tracker_bin, gen_bin):
    with tempfile.TemporaryDirectory(prefix="ws-bench-trk-") as d:
        key = ws.write_cluster_key(os.path.join(d, "cluster.key"))
        port, http = ws.free_port(), ws.free_port()
        log_path = os.path.join(d, "tracker.log")
        cmd = [tracker_bin, "--listen", "127.0.0.1:%d" % port,
               "--http", "127.0.0.1:%d" % http, "--cluster-key", key] + list(a.tracker_arg or [])
        if ws.supports(tracker_bin, "--api-token-file"):  # older builds (before/after runs)
            cmd += ["--api-token-file", ws.write_token(os.path.join(d, "api.token"))]
        with open(log_path, "w") as log:
            trk = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=niced(a.nice))
        try:
            wait_port(port, trk)
            gen = [gen_bin, "--port", str(port), "--key-file", key,
                   "--peers", str(a.peers), "--releases", str(a.releases),
                   "--seconds", str(a.seconds), "--ramp-s", str(a.ramp_s),
                   "--chunks", str(a.chunks), "--tracker-pid", str(trk.pid),
                   "--spread", "1" if a.spread else "0"]
            limit = max(a.ramp_s, 120) + a.seconds + 90  # the generator's --max-wait is 120 s
            out = sh(*gen, capture_output=True, text=True, timeout=limit,
                     preexec_fn=niced(a.nice)).stdout
            res = json.loads(out.strip().splitlines()[-1])
        finally:
            trk.send_signal(signal.SIGTERM)
            try:
                trk.wait(30)
            except subprocess.TimeoutExpired:
                trk.kill()
                trk.wait()
        with open(log_path, errors="replace") as f:
            res["log_lines"] = sum(1 for _ in f)
        res["tracker"] = tracker_bin
        res["nice"] = a.nice
        return res


def run(a):
    tracker_bin = a.tracker_bin or os.path.join(BUILD, "tracker", "p2p-tracker")
    gen_bin = os.path.join(BUILD, "tools", "bench_tracker")
    sh("ninja", "-C", BUILD, stdout=subprocess.DEVNULL)
    runs = []
    for i in range(a.rounds):
        res = one_run(a, tracker_bin, gen_bin)
        res["round"] = i + 1
        runs.append(res)
        if a.json:
            print(json.dumps(res), flush=True)
        else:
            print("run %d: %d peers x %d releases: p50 %.2f ms p99 %.2f ms max %.1f ms; "
                  "tracker CPU %.1f %% of a core (%.0f us per announce), peak RSS %.1f MiB; "
                  "machine busy %.1f %%, steal %.1f %%, tracker waited for a CPU %.1f %% "
                  "of the time; the generator's own loop late by %.2f ms at p99; "
                  "%d up (all up after %.0f s), %d refused, %d tracker log lines"
                  % (i + 1, res["peers"], res["releases"], res["p50_ms"], res["p99_ms"],
                     res["max_ms"], res["tracker_cpu_pct"],
                     res["tracker_cpu_us_per_announce"], res["tracker_hwm_mib"],
                     res["machine_busy_pct"], res["machine_steal_pct"],
                     res["tracker_runq_wait_pct"], res["generator_lag_p99_ms"],
                     res["peers_up"], res["all_up_s"],
                     res["refused"], res["log_lines"]), flush=True)
    if len(runs) > 1:
        med = {k: statistics.median(r[k] for r in runs) for k in KEYS}
        med.update(peers=a.peers, releases=a.releases, rounds=len(runs), median=True)
        if a.json:
            print(json.dumps(med), flush=True)
        else:
            print("median of %d: p50 %.2f ms p99 %.2f ms; tracker CPU %.1f %% "
                  "(%.0f us per announce), peak RSS %.1f MiB; steal %.1f %%"
                  % (len(runs), med["p50_ms"], med["p99_ms"], med["tracker_cpu_pct"],
                     med["tracker_cpu_us_per_announce"],
                     med["tracker_hwm_mib"], med["machine_steal_pct"]), flush=True)
