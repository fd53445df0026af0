"""tools/bench swarm: N hosts in network namespaces on one bridge, each
host's link shaped to B in both directions with tc (htb, ACKs ahead of
bulk data, see shape()), the S3 server
(radosgw) in its own namespace with uplink U, the tracker in its own
unshaped namespace. Runs `direct` (every host fetches from S3 with p2pd
standalone) and `swarm` (tracker + p2pd everywhere, one cluster-wide
prefetch) one after the other on the same setup and prints, per mode:
per-host completion times, time for all, the bound
T_min = max(F/U, F/B, N*F/(U + N*B)), the ratio to it, the bytes the S3
host sent (its interface counter), their ratio to F, CPU used, and whether
every host's files verified. Cleans up every namespace and process it made,
also on failure.

Addresses are 10.77.0.0/24, private to namespaces this script creates;
every namespace has every other one's MAC address as a permanent
neighbour entry (static_neighbours). Latency is not shaped: this kernel
has no sch_netem.

For a closer look: WS_BENCH_P2PD_LOG=debug sets p2pd's log level (each
origin GET and body, with its time to first byte, is logged at debug) and
WS_BENCH_KEEP=1 keeps the work directory with every host's p2pd.log.
"""
import datetime
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import benchlib
import ws
from benchlib import BUILD, ROOT, MiB, Rgw, build, cpu_s, make_model, peak_rss_kib, settle, sh

PFX = "wsb"
NET = "10.77.0"
S3_IP = f"{NET}.1"
TRK_IP = f"{NET}.2"


def host_ip(i):
    return f"{NET}.{10 + i}"


def shape(ns, dev, mbit, qdisc="ack", queue_ms=0):
    """Rate mbit on dev's egress. qdisc "fifo": one htb class and a plain
    FIFO under it (htb's default leaf), what a node whose queue discipline
    is not kind gets. qdisc "ack" (the default): one htb link class, with small TCP packets
    (pure ACKs, < 128 bytes) in a priority child class and everything else
    in a bulk one. A host's NIC sends the ACKs of its downloads on the same
    queue as its uploads; Linux's default fq_codel keeps them from waiting
    behind bulk data, but this kernel has neither fq_codel nor sfq, and a
    plain FIFO under the shaper would throttle every download of a host
    that is also uploading (the swarm's normal state) to well under B."""
    tc = ["tc", "-n", ns]
    if qdisc == "fifo":
        sh(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
           "r2q", "1000")
        sh(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
           "rate", f"{mbit}mbit", "ceil", f"{mbit}mbit")
        leaf_limit(tc, dev, mbit, queue_ms, ["1:1"])
        return
    sh(*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20",
       "r2q", "1000")
    sh(*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
       "rate", f"{mbit}mbit", "ceil", f"{mbit}mbit")
    sh(*tc, "class", "add", "dev", dev, "parent", "1:1", "classid", "1:10", "htb",
       "rate", f"{max(1, mbit // 10)}mbit", "ceil", f"{mbit}mbit", "prio", "0")
    sh(*tc, "class", "add", "dev", dev, "parent", "1:1", "classid", "1:20", "htb",
       "rate", f"{mbit - max(1, mbit // 10)}mbit", "ceil", f"{mbit}mbit", "prio", "1")
    sh(*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
       "u32", "match", "ip", "protocol", "6", "0xff", "match", "u16", "0x0000", "0xff80",
       "at", "2", "flowid", "1:10")
    leaf_limit(tc, dev, mbit, queue_ms, ["1:10", "1:20"])


def leaf_limit(tc, dev, mbit, queue_ms, classes):
    """With queue_ms, each leaf class queues at most queue_ms of the link's
    rate (a byte FIFO, at least 10 full frames) instead of htb's default
    leaf, a FIFO of txqueuelen (1000) packets: 0.75 s of a 16 Mbit/s link,
    where a switch port holds well under a millisecond of 25 Gbit/s."""
    if not queue_ms:
        return
    limit = max(10 * 1514, int(mbit * 1e6 / 8 * queue_ms / 1000))
    for i, cls in enumerate(classes):
        sh(*tc, "qdisc", "add", "dev", dev, "parent", cls, "handle", f"{100 + i}:",
           "bfifo", "limit", str(limit))


class Net:
    def __init__(self, n, rate_mbit, origin_mbit, cc=None, qdisc="ack", queue_ms=0):
        self.pids = {}  # namespace name -> a process in it (tx_bytes)
        self.n = n
        self.cc = cc
        self.qdisc = qdisc
        self.queue_ms = queue_ms
        self.ns = []
        self.cleanup()
        sh("ip", "netns", "add", f"{PFX}-br")
        sh("ip", "-n", f"{PFX}-br", "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", f"{PFX}-br", "link", "set", "br0", "up")
        self.add("s3", S3_IP, origin_mbit)
        self.add("trk", TRK_IP, None)
        for i in range(1, n + 1):
            self.add(f"h{i}", host_ip(i), rate_mbit)
        self.static_neighbours()

    def static_neighbours(self):
        """Every namespace knows every other one's MAC address for good.
        With ARP left to the kernel, neighbour entries in this bridge of
        htb-shaped ports failed to resolve for seconds at a time while the
        swarm ran: dials timed out (3,312 SYN retransmissions in one
        48-node run), established connections stopped when an entry was
        re-probed (4,311 timeouts against 1,000), and late joiners stayed
        with 5 neighbours (docs/benchmarks.md, session 18). A datacenter
        fabric resolves neighbours in microseconds."""
        ends = [("s3", S3_IP), ("trk", TRK_IP)] + [
            (f"h{i}", host_ip(i)) for i in range(1, self.n + 1)]
        mac = {}
        for name, ip in ends:
            out = sh("ip", "-n", f"{PFX}-{name}", "-j", "link", "show", "eth0",
                     capture_output=True, text=True).stdout
            mac[ip] = json.loads(out)[0]["address"]
        for name, ip in ends:
            cmds = "".join(f"neigh replace {o} lladdr {m} dev eth0 nud permanent\n"
                           for o, m in mac.items() if o != ip)
            sh("ip", "-n", f"{PFX}-{name}", "-batch", "-", input=cmds, text=True)

    def add(self, name, ip, mbit):
        ns = f"{PFX}-{name}"
        sh("ip", "netns", "add", ns)
        self.ns.append(ns)
        if self.cc and sh("ip", "netns", "exec", ns, "sysctl", "-qw",
                          f"net.ipv4.tcp_congestion_control={self.cc}",
                          check=False).returncode != 0:
            # Outside the initial namespace only the algorithms listed in
            # net.ipv4.tcp_allowed_congestion_control may be chosen.
            raise SystemExit(f"bench swarm: cannot use --cc {self.cc} in a namespace; "
                             "add it to net.ipv4.tcp_allowed_congestion_control first")
        sh("ip", "link", "add", f"{PFX}{name}a", "type", "veth", "peer", "name", f"{PFX}{name}b")
        sh("ip", "link", "set", f"{PFX}{name}a", "netns", ns)
        sh("ip", "link", "set", f"{PFX}{name}b", "netns", f"{PFX}-br")
        sh("ip", "-n", ns, "link", "set", f"{PFX}{name}a", "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", f"{PFX}-br", "link", "set", f"{PFX}{name}b", "master", "br0")
        sh("ip", "-n", f"{PFX}-br", "link", "set", f"{PFX}{name}b", "up")
        if mbit:
            # Egress of the host (its upload) and egress of the bridge port
            # towards it (its download): rate B both ways.
            for nsx, dev in ((ns, "eth0"), (f"{PFX}-br", f"{PFX}{name}b")):
                shape(nsx, dev, mbit, self.qdisc, self.queue_ms)

    def host_bytes(self, sent=False):
        """Bytes each host has received on its link, h1..hN, or with sent
        those it sent (read on the bridge side, where the host's download
        is the port's tx; one process for all)."""
        side = "rx" if sent else "tx"
        out = sh("ip", "netns", "exec", f"{PFX}-br", "sh", "-c",
                 "for i in $(seq 1 %d); do cat /sys/class/net/%sh${i}b/statistics/%s_bytes; done"
                 % (self.n, PFX, side), capture_output=True, text=True)
        return [int(v) for v in out.stdout.split()]

    TCP_COUNTERS = ("TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPSynRetrans")

    def tcp_counters(self, names=None):
        """Retransmitted segments and retransmission timeouts, summed over
        the S3 host's and every host's namespace (or those named), since
        each was made."""
        tot = dict.fromkeys(self.TCP_COUNTERS, 0)
        for name in names or ["s3"] + [f"h{i}" for i in range(1, self.n + 1)]:
            out = sh("ip", "netns", "exec", f"{PFX}-{name}", "nstat", "-asz",
                     *self.TCP_COUNTERS, capture_output=True, text=True).stdout
            for line in out.splitlines():
                f = line.split()
                if len(f) >= 2 and f[0] in tot:
                    tot[f[0]] += int(f[1])
        return tot

    def tx_bytes(self, name):
        """Bytes the namespace's eth0 has sent. Read through a process that
        lives there (/proc/PID/net/dev is that process's namespace's), so
        that the wait loop, which asks this every turn, starts no process;
        through `ip netns exec` only while none is known."""
        pid = self.pids.get(name)
        if pid is None:
            out = sh("ip", "netns", "pids", f"{PFX}-{name}", capture_output=True,
                     text=True).stdout.split()
            pid = self.pids[name] = int(out[0]) if out else None
        if pid is not None:
            try:
                if (os.stat(f"/proc/{pid}/ns/net").st_ino
                        != os.stat(f"/run/netns/{PFX}-{name}").st_ino):
                    raise OSError("the process left the namespace")
                with open(f"/proc/{pid}/net/dev") as f:
                    for line in f:
                        dev, _, rest = line.partition(":")
                        if dev.strip() == "eth0":
                            return int(rest.split()[8])
            except OSError:
                self.pids.pop(name, None)
        out = sh("ip", "netns", "exec", f"{PFX}-{name}", "cat",
                 "/sys/class/net/eth0/statistics/tx_bytes", capture_output=True, text=True)
        return int(out.stdout)

    @staticmethod
    def cleanup():
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            ns = line.split()[0] if line.strip() else ""
            if ns.startswith(PFX + "-"):
                pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                      text=True).stdout.split()
                for p in pids:
                    try:
                        os.kill(int(p), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", ns], check=False)


class NsP2pd(ws.P2pd):
    """p2pd inside a host namespace; its API socket is a file path, so the
    benchmark talks to it from the root namespace."""

    def __init__(self, ns, *a, **kw):
        super().__init__(*a, **kw)
        self.ns = ns

    def start(self, timeout=20):
        args = ["ip", "netns", "exec", self.ns, os.path.join(self.build, "peer", "p2pd"),
                "--cache", self.cache, "--api", self.sock] + self.extra
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(args, env=self.env, stdout=self.logf, stderr=subprocess.STDOUT)
        t0 = time.time()
        while time.time() - t0 < timeout:
            try:
                if ws.api(self.sock, "GET", "/readyz", timeout=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("p2pd not ready: " + self.tail())


def cpu_ticks():
    """(busy, steal, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v) - idle - v[7], v[7], sum(v)


def wait_all(peers, digest, t0, timeout=3600, timeline=None, origin_mib=None, step=1.0,
             rx=None, gauges=None, origin_left=None):
    """Each host's time to ready. gauges: a dict that gets, once a second,
    each host's uploads and neighbours at that moment (lists of samples);
    origin_left(): bytes the S3 host has yet to send of the release (its
    first <= 0 is kept as gauges["origin_done_s"])."""
    done = {}
    next_sample = 0.0
    next_gauge = 1.0
    next_poll = 0.0
    while len(done) < len(peers):
        if gauges is not None and time.time() - t0 >= next_gauge:
            next_gauge += 1.0
            for i, p in enumerate(peers):
                st, text = p.api("GET", "/metrics")
                if st == 200 and isinstance(text, str):
                    up = ws.metric_sum(text, "weightswarm_p2pd_peer_uploads")
                    nb = ws.metric_sum(text, "weightswarm_p2pd_peer_neighbors")
                    gauges.setdefault("uploads", []).append(up)
                    gauges.setdefault("neighbors", []).append(nb)
                    if i not in done:  # while it fetches
                        gauges.setdefault("nbr_hosts", {}).setdefault(i, []).append(nb)
        if origin_left is not None and "origin_done_s" not in gauges and origin_left() <= 0:
            gauges["origin_done_s"] = round(time.time() - t0, 2)
        if timeline is not None and time.time() - t0 >= next_sample:
            row = [round(time.time() - t0, 2)]
            if origin_mib is not None:
                row.append(origin_mib())
            for p in peers:
                st, r = p.api("GET", f"/api/v1/releases/{digest}")
                row.append(r.get("bytes_done", 0) // MiB if st == 200 else 0)
            if rx is not None:
                row += [round(v / MiB, 1) for v in rx()]
            timeline.append(row)
            next_sample += step
        if time.time() - t0 >= next_poll:
            next_poll += POLL_S
            for i, p in enumerate(peers):
                if i in done:
                    continue
                st, r = p.api("GET", f"/api/v1/releases/{digest}")
                if st == 200 and r["state"] == "ready":
                    done[i] = finished_s(r, t0)
                elif st == 200 and r["state"] == "failed":
                    raise RuntimeError(f"host {i + 1} failed: {r.get('error')}\n{p.tail()}")
        if time.time() - t0 > timeout:
            raise RuntimeError("timed out")
        time.sleep(0.05)
    return [done[i] for i in range(len(peers))]


# How often the wait loop asks each host how its release stands. A host's
# time is the release's own finished_at (to the millisecond, p2pd's clock
# is this machine's), not when the loop saw it, so a slower poll loses no
# precision. At 48 hosts the loop made 359 API calls a second at 50 ms
# and makes 95 at 0.5 s (counted over one run each), each run on a
# host's loop thread.
POLL_S = 0.5


def finished_s(release, t0):
    """Seconds from t0 (time.time()) to the release's finished_at, which
    p2pd stamps from the same clock when the release turns ready; the
    time seen now when the field is missing."""
    at = release.get("finished_at")
    if not at:
        return time.time() - t0
    return (datetime.datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ")
            .replace(tzinfo=datetime.timezone.utc).timestamp() - t0)


def run_mode(mode, a, net, rgw, pub, src, F, work, key):
    peers = []
    trk = None
    s3_before = net.tx_bytes("s3")
    rx_before = net.host_bytes()
    sent_before = net.host_bytes(sent=True)
    tcp_before = net.tcp_counters()
    s3_retrans_before = net.tcp_counters(["s3"])["TcpRetransSegs"]
    try:
        token = ws.write_token(os.path.join(work, "api.token"))
        auth = os.path.join(work, "api.auth")  # curl -H @FILE: not in ps
        with open(auth, "w") as f:
            f.write(f"Authorization: Bearer {ws.read_token(token)}\n")
        if mode == "swarm":
            trk = subprocess.Popen(
                ["ip", "netns", "exec", f"{PFX}-trk", os.path.join(BUILD, "tracker", "p2p-tracker"),
                 "--listen", f"{TRK_IP}:7600", "--http", f"{TRK_IP}:7601", "--cluster-key", key,
                 "--api-token-file", token]
                + (["--origin-inflight", str(a.origin_inflight)] if a.origin_inflight else [])
                + (["--stripes", str(a.stripes)] if a.stripes else []),
                stdout=open(os.path.join(work, "tracker.log"), "ab"), stderr=subprocess.STDOUT)
            time.sleep(0.5)
        for i in range(1, a.peers + 1):
            extra = ["--log-level", os.environ.get("WS_BENCH_P2PD_LOG", "warn")]
            if mode == "swarm":
                extra += ["--listen", f"{host_ip(i)}:7610", "--tracker", f"{TRK_IP}:7600",
                          "--cluster-key", key]
                if a.upload_share > 0:
                    # The node's uplink as its operator would give it:
                    # a share of its link rate (wire_uplink.h).
                    extra += ["--upload-rate",
                              str(int(a.upload_share * a.rate_mbit * 1e6 / 8))]
            peers.append(NsP2pd(f"{PFX}-h{i}", BUILD, work, rgw.s3env,
                                name=f"{mode}-h{i}", extra=extra).start())
        t0 = time.time()
        if mode == "swarm":
            r = sh("ip", "netns", "exec", f"{PFX}-trk", "curl", "-sf", "-X", "POST",
                   "-H", "Content-Type: application/json", "-H", "@" + auth,
                   "-d", json.dumps({"uri": pub["uri"]}),
                   f"http://{TRK_IP}:7601/api/v1/prefetch", capture_output=True, text=True)
        else:
            for p in peers:
                st, r = p.api("POST", "/api/v1/prefetch", {"uri": pub["uri"]})
                assert st == 200, r
        timeline = [] if a.timeline else None
        ticks0 = cpu_ticks()
        gauges = {}
        times = wait_all(peers, pub["digest"], t0, timeline=timeline,
                         origin_mib=lambda: round((net.tx_bytes("s3") - s3_before) / MiB, 1),
                         step=a.timeline,
                         rx=lambda: [v - b for v, b in zip(net.host_bytes(), rx_before)]
                         + [v - b for v, b in zip(net.host_bytes(sent=True), sent_before)],
                         gauges=gauges,
                         origin_left=lambda: F - (net.tx_bytes("s3") - s3_before))
        if timeline:
            print(f"{mode} timeline (s, MiB the S3 host sent, MiB done per host, "
                  "MiB received on each host's link, MiB each host sent):")
            for row in timeline:
                print("  " + " ".join(f"{v:>6}" for v in row))
        ticks1 = cpu_ticks()
        # Share of the machine's CPUs in use (all processes, softirq
        # included) and stolen by the hypervisor while the hosts fetched.
        span = max(1, ticks1[2] - ticks0[2])
        machine = {"busy": round((ticks1[0] - ticks0[0]) / span, 3),
                   "steal": round((ticks1[1] - ticks0[1]) / span, 3)}
        # Counters that explain a slow run: requests a neighbour refused,
        # duplicate chunks thrown away, connections closed on a bad receive;
        # how many uploads began while the chunk was still arriving; and
        # the deadlines' work: chunks given up on a slow neighbour (past a
        # deadline, or stalled in the endgame), neighbours closed as slow,
        # idle (evicted) or not reading; S3
        # attempts retried and cut for a stall (0 from a p2pd without it).
        events = {k: int(sum(p.metric("weightswarm_p2pd_" + k) for p in peers)) for k in
                  ("peer_requests_rejected_total", "peer_chunks_discarded_total",
                   "peer_discarded_bytes_total", "manifests_from_peers_total",
                   "peer_receive_errors_total", "chunks_failed_total",
                   "peer_chunks_served_total", "peer_chunks_served_live_total",
                   "peer_deadlines_missed_total", "peers_dropped_slow_total",
                   "chunks_cut_stalled_total",
                   "peers_evicted_total", "peer_upload_stalls_total",
                   "s3_retries_total", "s3_stalls_total", "release_stalls_total")}
        # Why S3 sent a chunk twice: the tracker's leases granted (one per
        # chunk when none is read again), expired, given back, and the
        # holders' claims it stopped believing.
        if mode == "swarm":
            events.update(tracker_counters(auth))
        # TCP's own trouble on the shaped links: segments sent again and
        # retransmission timeouts (a connection silent for >= 200 ms).
        events.update({k: v - tcp_before[k] for k, v in net.tcp_counters().items()})
        # Segments the S3 host sent again: its interface bytes (S3 / F)
        # count them, so a run reading no chunk twice can still show more.
        events["s3_retrans_segs"] = (net.tcp_counters(["s3"])["TcpRetransSegs"]
                                     - s3_retrans_before)
        cpu = sum(cpu_s(p.proc.pid) for p in peers)
        rss = max(peak_rss_kib(p.proc.pid) for p in peers)
        verified = all(ws.tree_equal(src, os.path.join(p.cache, "releases", pub["digest"]))[0]
                       for p in peers)
    finally:
        for p in peers:
            p.stop()
            # The next mode must not run while these bytes are written back.
            shutil.rmtree(p.cache, ignore_errors=True)
        if trk:
            trk.terminate()
            trk.wait()
    origin = net.tx_bytes("s3") - s3_before
    N, B, U = a.peers, a.rate_mbit * 1e6 / 8, a.origin_mbit * 1e6 / 8
    t_min = max(F / U, F / B, N * F / (U + N * B))
    t_all = max(times)
    return {"mode": mode, "n": N, "bytes": F, "rate_mbit": a.rate_mbit,
            "origin_mbit": a.origin_mbit, "chunk_mib": a.chunk_mib,
            "origin_inflight": a.origin_inflight or "default", "stripes": a.stripes,
            "qdisc": a.qdisc, "queue_ms": a.queue_ms, "upload_share": a.upload_share,
            "t_hosts_s": [round(t, 2) for t in times], "t_all_s": round(t_all, 2),
            "t_min_s": round(t_min, 2), "ratio": round(t_all / t_min, 3),
            "origin_bytes": origin, "origin_ratio": round(origin / F, 4),
            "cpu_s": round(cpu, 1), "peak_rss_mib": round(rss / 1024, 1), "events": events,
            "machine_cpu": machine,
            # When the S3 host had sent the release's bytes (it sends each
            # chunk about once, plus HTTP and TCP overhead): how far the
            # hosts finish behind it. Uploads and neighbours per host,
            # sampled once a second over the run: mean and largest; and
            # each host's neighbours on average while it fetched (host
            # order, as t_hosts_s).
            "origin_done_s": gauges.get("origin_done_s"),
            "uploads_at_once": gauge_summary(gauges.get("uploads")),
            "neighbors": gauge_summary(gauges.get("neighbors")),
            "neighbors_hosts": [round(sum(v) / len(v), 1) if v else None
                                for v in (gauges.get("nbr_hosts", {}).get(i, [])
                                          for i in range(a.peers))],
            "verified": verified}


def tracker_counters(auth):
    """The tracker's lease and claim counters, summed over swarms."""
    names = {"trk_leases_granted": "weightswarm_tracker_swarm_leases_granted_total",
             "trk_leases_expired": "weightswarm_tracker_swarm_leases_expired_total",
             "trk_leases_released": "weightswarm_tracker_swarm_leases_released_total",
             "trk_claims_distrusted": "weightswarm_tracker_swarm_claims_distrusted_total",
             "trk_manifest_readers": "weightswarm_tracker_manifest_readers_total"}
    r = subprocess.run(["ip", "netns", "exec", f"{PFX}-trk", "curl", "-sf", "-H", "@" + auth,
                        f"http://{TRK_IP}:7601/metrics"], capture_output=True, text=True)
    return {k: int(ws.metric_sum(r.stdout, name)) for k, name in names.items()}


def gauge_summary(v):
    return {"mean": round(sum(v) / len(v), 2), "max": max(v)} if v else None


def run_tcp_mesh(a, net, k=3, seconds=15):
    """What TCP alone gets on these links: each host sends to the k hosts
    after it (iperf3, one stream each) for the given seconds, every link at
    once. Returns each host's received bytes per second as a share of B
    (headers included, as the swarm timeline counts them, over the wall
    time from the first start: low when starting the clients takes long),
    and the streams' goodput (payload, as F counts it)."""
    k = min(k, a.peers - 1)
    servers, clients = [], []
    try:
        for i in range(1, a.peers + 1):
            for j in range(1, k + 1):
                servers.append(subprocess.Popen(
                    ["ip", "netns", "exec", f"{PFX}-h{i}", "iperf3", "-s", "-1",
                     "-p", str(5200 + j)], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
        time.sleep(1)
        rx0 = net.host_bytes()
        t0 = time.time()
        for i in range(1, a.peers + 1):
            for j in range(1, k + 1):
                clients.append(subprocess.Popen(
                    ["ip", "netns", "exec", f"{PFX}-h{i}", "iperf3", "-c",
                     host_ip((i - 1 + j) % a.peers + 1), "-p", str(5200 + j),
                     "-t", str(seconds), "-J"], stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, text=True))
        outs = [c.communicate()[0] for c in clients]
        dt = time.time() - t0
        link = a.rate_mbit * 1e6 / 8
        share = [round((v - b) / dt / link, 3) for v, b in zip(net.host_bytes(), rx0)]
        goodput = []
        for c, o in zip(clients, outs):
            try:
                goodput.append(json.loads(o)["end"]["sum_received"]["bits_per_second"])
            except (ValueError, KeyError) as e:
                raise RuntimeError(f"iperf3 stream failed (exit {c.returncode}): {e}")
        return {"mode": "tcp", "n": a.peers, "rate_mbit": a.rate_mbit, "qdisc": a.qdisc,
                "streams_per_host": k, "seconds": seconds, "rx_share": share,
                "rx_share_median": sorted(share)[len(share) // 2],
                "goodput_share": round(sum(goodput) / (a.peers * a.rate_mbit * 1e6), 3)}
    finally:
        for p in servers + clients:
            if p.poll() is None:
                p.kill()


def run(a):
    global BUILD
    if a.build_dir:  # another tree's binaries, as they are (A/B runs)
        BUILD = benchlib.BUILD = os.path.abspath(a.build_dir)
    else:
        build()
    if os.geteuid() != 0:
        raise SystemExit("bench swarm needs root (network namespaces, tc)")
    work = tempfile.mkdtemp(prefix="ws-bench-swarm-")
    os.chmod(work, 0o755)
    net = rgw = None
    try:
        net = Net(a.peers, a.rate_mbit, a.origin_mbit, a.cc, a.qdisc, a.queue_ms)
        rgw = Rgw(bind=S3_IP, port=7480, mon=6789, netns=f"{PFX}-s3")
        rgw.s3env["AWS_ENDPOINT_URL_S3"] = f"http://{S3_IP}:7480"
        src = os.path.join(work, "model")
        F = make_model(src, a.size_mib, "bench-swarm")
        # Publish from inside the origin namespace: the upload must not count
        # against any shaped host link.
        pub = publish_in_ns(rgw, src, a.chunk_mib)
        key = os.path.join(work, "cluster.key")
        with open(key, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        for mode in a.modes.split(","):
            if mode == "tcp":
                res = run_tcp_mesh(a, net, k=a.tcp_streams)
                print(json.dumps(res) if a.json else
                      f"tcp: goodput {res['goodput_share']} x B per host "
                      f"({res['streams_per_host']} iperf3 streams out of and into each "
                      f"host; link bytes over the wall time, starts included: median "
                      f"{res['rx_share_median']} x B)", flush=True)
                continue
            ratios = []
            for rnd in range(a.rounds):
                # Same start for every run: the model just written and the
                # last run's caches flushed (see settle()).
                settle()
                res = run_mode(mode, a, net, rgw, pub, src, F, work, key)
                res["round"] = rnd + 1
                ratios.append(res)
                report(res, a, F)
            if a.rounds > 1:
                med = sorted(ratios, key=lambda r: r["ratio"])[len(ratios) // 2]
                summary = {"mode": mode + "-median", "n": a.peers, "rounds": a.rounds,
                           "ratios": [r["ratio"] for r in ratios], "ratio": med["ratio"],
                           "origin_ratio_max": max(r["origin_ratio"] for r in ratios),
                           "steal": [r["machine_cpu"]["steal"] for r in ratios],
                           "verified": all(r["verified"] for r in ratios)}
                if a.json:
                    print(json.dumps(summary), flush=True)
                else:
                    print(f"{mode} median of {a.rounds}: ratio {summary['ratio']} "
                          f"(runs {summary['ratios']}), S3 sent at most "
                          f"{summary['origin_ratio_max']}xF", flush=True)
    finally:
        if rgw:
            subprocess.run(["ip", "netns", "exec", f"{PFX}-s3", os.path.join(ROOT, "tools", "rgw"), "stop"],
                           env=rgw.env, check=False)
        Net.cleanup()
        if not os.environ.get("WS_BENCH_KEEP"):
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("work directory kept:", work)


def report(res, a, F):
    if a.json:
        print(json.dumps(res), flush=True)
        return
    print(f"{res['mode']:6s} N={res['n']} F={F / MiB:.0f}MiB B={a.rate_mbit}Mbit "
          f"U={a.origin_mbit}Mbit: all done {res['t_all_s']}s, T_min "
          f"{res['t_min_s']}s, ratio {res['ratio']}, S3 sent "
          f"{res['origin_ratio']}xF, CPU {res['cpu_s']}s, peak RSS "
          f"{res['peak_rss_mib']}MiB, verified={res['verified']}\n"
          f"       events: {res['events']}, machine CPU busy "
          f"{res['machine_cpu']['busy']:.0%}, stolen {res['machine_cpu']['steal']:.1%}\n"
          f"       per host: {res['t_hosts_s']}", flush=True)


def publish_in_ns(rgw, src, chunk_mib, bucket="bench-swarm"):
    env = dict(rgw.s3env)
    sh("ip", "netns", "exec", f"{PFX}-s3", "/usr/bin/python3", "-c",
       "import boto3,os; boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL_S3'])"
       f".create_bucket(Bucket='{bucket}')", env=env)
    r = sh("ip", "netns", "exec", f"{PFX}-s3", os.path.join(BUILD, "tools", "p2pctl"), "publish",
           src, f"s3://{bucket}/bench/model/", "--json", "--chunk-size", str(chunk_mib * MiB),
           env=env, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])
