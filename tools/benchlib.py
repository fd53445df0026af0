"""Shared pieces of tools/bench: build, radosgw, publishing, process
stats, and the cold benchmark."""
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
BUILD = os.path.join(ROOT, "build")
MiB = 1 << 20


# Every mode shares radosgw's directory and the swarm's namespace names, so
# two runs at once tear down each other's setup; one waits for the other.
LOCK_PATH = ("/run/lock/weightswarm-bench.lock" if os.path.isdir("/run/lock")
             else "/tmp/weightswarm-bench.lock")


def exclusive(path=LOCK_PATH):
    """Holds the benchmark's lock for as long as the returned file stays
    open (the process's life): at once when it is free, else after saying
    who holds it and waiting for it."""
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        print(f"tools/bench: another run holds {path} ({holder}); waiting for it",
              file=sys.stderr, flush=True)
        fcntl.flock(f, fcntl.LOCK_EX)
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    return f


def sh(*args, **kw):
    kw.setdefault("check", True)
    return subprocess.run(args, **kw)


def build():
    sh(os.path.join(ROOT, "tools", "bootstrap"), "--quiet")
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        # The source directory named: meson would take the working one.
        sh("meson", "setup", BUILD, ROOT, "--buildtype=release", stdout=subprocess.DEVNULL)
    sh("ninja", "-C", BUILD, stdout=subprocess.DEVNULL)


class Rgw:
    """radosgw through tools/rgw, on its own ports and directory."""

    def __init__(self, bind="127.0.0.1", port=7680, mon=6989, netns=None):
        self.env = dict(os.environ, WS_RGW_DIR="/tmp/weightswarm-bench-rgw",
                        WS_RGW_PORT=str(port), WS_RGW_MON_PORT=str(mon),
                        WS_RGW_BIND=bind, WS_RGW_MEM_GB="8")
        self.netns = netns
        pre = ["ip", "netns", "exec", netns] if netns else []
        rgw = os.path.join(ROOT, "tools", "rgw")
        # A fresh one-node cluster right after the previous one stopped has
        # failed to answer once in a long series of runs; one retry.
        if sh(*pre, rgw, "start", env=self.env, stdout=subprocess.DEVNULL,
              check=False).returncode != 0:
            sh(*pre, rgw, "stop", env=self.env, check=False)
            sh(*pre, rgw, "start", env=self.env, stdout=subprocess.DEVNULL)
        out = sh(os.path.join(ROOT, "tools", "rgw"), "env", env=self.env,
                 capture_output=True, text=True).stdout
        self.s3env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        for line in out.splitlines():
            k, _, v = line.replace("export ", "", 1).partition("=")
            self.s3env[k] = v
        self.endpoint = self.s3env["AWS_ENDPOINT_URL_S3"]

    def bytes_sent(self):
        return int(sh(os.path.join(ROOT, "tools", "rgw"), "usage", env=self.env,
                      capture_output=True, text=True).stdout.strip() or 0)

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint,
                            aws_access_key_id=self.s3env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.s3env["AWS_SECRET_ACCESS_KEY"],
                            region_name="us-east-1")

    def stop(self):
        sh(os.path.join(ROOT, "tools", "rgw"), "stop", env=self.env, check=False)


def publish(rgw, src, bucket, chunk_mib):
    try:
        rgw.client().create_bucket(Bucket=bucket)
    except Exception:  # already there from an earlier run on the same server
        pass
    r = sh(os.path.join(BUILD, "tools", "p2pctl"), "publish", src,
           f"s3://{bucket}/bench/model/", "--json", "--chunk-size", str(chunk_mib * MiB),
           env=rgw.s3env, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def make_model(d, size_mib, seed):
    import ws
    shard = max(1, (size_mib - 1) // 4) * MiB
    ws.make_release(d, shard_bytes=shard, nshards=4, seed=seed)
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def disk_bytes_s(dirpath, size=512 * MiB):
    """Durable write speed of the cache's filesystem: what p2pd must do for
    every byte (data fdatasync'd before its chunk counts)."""
    path = os.path.join(dirpath, "ddtest")
    buf = os.urandom(16 * MiB)
    t0 = time.time()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(size // len(buf)):
            os.write(fd, buf)
        os.fdatasync(fd)
    finally:
        os.close(fd)
        os.unlink(path)
    return size / (time.time() - t0)


def curl_ranged(endpoint, env, bucket, prefix, files, chunk, streams, out, pre=()):
    """Downloads every object as chunk-sized ranges, `streams` at a time,
    with the curl CLI (SigV4 by curl), each range to its own file. Returns
    (seconds, CPU seconds of the curl processes)."""
    import resource
    jobs = []
    for name, size in files:
        for off in range(0, size, chunk):
            end = min(size, off + chunk) - 1
            jobs.append((name, off, end))
    cmds = []
    for i, (name, off, end) in enumerate(jobs):
        cmds.append(list(pre) + [
            "curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3",
            "--user", f"{env['AWS_ACCESS_KEY_ID']}:{env['AWS_SECRET_ACCESS_KEY']}",
            "-H", "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "-r", f"{off}-{end}", "-o", os.path.join(out, f"r{i}"),
            f"{endpoint}/{bucket}/{prefix}{name}"])
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    running = []
    while cmds or running:
        while cmds and len(running) < streams:
            running.append(subprocess.Popen(cmds.pop(0)))
        for p in list(running):
            if p.poll() is not None:
                if p.returncode != 0:
                    raise RuntimeError(f"curl failed: {p.args[-1]}")
                running.remove(p)
        time.sleep(0.002)
    t = time.time() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return t, (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)


def server_cpu_s():
    """CPU seconds used so far by the S3 server's processes (radosgw and the
    Ceph daemons behind it): it shares this machine's cores."""
    tot = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if comm in ("radosgw", "ceph-osd", "ceph-mon", "ceph-mgr"):
                tot += cpu_s(int(pid))
        except OSError:
            pass
    return tot


def settle(seconds=3.0):
    """The same start for every measured run: no writeback left over from
    the previous step, and memory freed by it (the last run's output was
    just deleted) handed back to the hypervisor. This machine is a
    Firecracker guest with free page reporting: pages freed a moment ago
    are still backed and cheap to write into, pages reported to the host
    fault in again on first touch, which made whichever client ran right
    after a deletion look up to twice as fast as the other."""
    os.sync()
    time.sleep(seconds)


def bench_cold(a):
    """p2pd against parallel ranged curl, alternating, a.rounds of each.
    With a.link_mbit the client sits in a network namespace whose link to
    the server is shaped to that rate (a node's NIC towards S3); without it
    both run over loopback and share the two cores with radosgw."""
    import statistics

    import ws
    build()
    work = tempfile.mkdtemp(prefix="ws-bench-cold-")
    os.chmod(work, 0o755)
    rgw = net = None
    pre = ()
    try:
        src = os.path.join(work, "model")
        F = make_model(src, a.size_mib, "bench-cold")
        if a.link_mbit:
            import bench_swarm as bs
            net = bs.Net(1, a.link_mbit, None)
            rgw = Rgw(bind=bs.S3_IP, port=7480, mon=6789, netns=f"{bs.PFX}-s3")
            rgw.s3env["AWS_ENDPOINT_URL_S3"] = f"http://{bs.S3_IP}:7480"
            rgw.endpoint = rgw.s3env["AWS_ENDPOINT_URL_S3"]
            pub = bs.publish_in_ns(rgw, src, a.chunk_mib, "bench-cold")
            pre = ("ip", "netns", "exec", f"{bs.PFX}-h1")
        else:
            rgw = Rgw()
            pub = publish(rgw, src, "bench-cold", a.chunk_mib)
        prefix = pub["uri"].split("bench-cold/", 1)[1]
        files = [(n, os.path.getsize(os.path.join(src, n))) for n in sorted(os.listdir(src))]
        # One unmeasured pass first: the server's first read of the objects
        # is slower than the later ones, and would count against whichever
        # client went first.
        warm = os.path.join(work, "warmup")
        os.makedirs(warm)
        curl_ranged(rgw.endpoint, rgw.s3env, "bench-cold", prefix, files,
                    a.chunk_mib * MiB, a.streams, warm, pre)
        shutil.rmtree(warm)
        results = []
        for rnd in range(a.rounds):
            out = os.path.join(work, f"curl{rnd}")
            os.makedirs(out)
            settle()
            srv0 = server_cpu_s()
            t_curl, curl_cpu = curl_ranged(rgw.endpoint, rgw.s3env, "bench-cold", prefix,
                                           files, a.chunk_mib * MiB, a.streams, out, pre)
            srv_curl = server_cpu_s() - srv0
            # p2pd makes its bytes durable (checkpoints, fsync before a file
            # becomes visible); curl leaves them in the page cache. The
            # second baseline adds the time to make curl's output durable.
            t0 = time.time()
            sh("sync", "-f", os.path.join(out, "r0"))
            t_curl_sync = t_curl + time.time() - t0
            shutil.rmtree(out)
            extra = ["--s3-concurrency", str(a.streams), "--log-level", "warn"]
            if a.link_mbit:
                d = bs.NsP2pd(f"{bs.PFX}-h1", BUILD, work, rgw.s3env, name=f"p2pd{rnd}",
                              extra=extra).start()
            else:
                d = ws.P2pd(BUILD, work, rgw.s3env, name=f"p2pd{rnd}", extra=extra).start()
            settle()
            srv0 = server_cpu_s()
            t0 = time.time()
            r = d.ctl("prefetch", pub["uri"], "--wait")
            t_p2pd = time.time() - t0
            srv_p2pd = server_cpu_s() - srv0
            if r.returncode != 0:
                raise RuntimeError(r.stderr + d.tail())
            rss = peak_rss_kib(d.proc.pid)
            cpu = cpu_s(d.proc.pid)
            ok, bad = ws.tree_equal(src, os.path.join(d.cache, "releases", pub["digest"]))
            d.stop()
            shutil.rmtree(d.dir)
            results.append({"mode": "cold", "round": rnd + 1, "bytes": F,
                            "link_mbit": a.link_mbit or None, "streams": a.streams,
                            "chunk_mib": a.chunk_mib, "curl_s": round(t_curl, 3),
                            "p2pd_s": round(t_p2pd, 3),
                            "curl_mib_s": round(F / MiB / t_curl, 1),
                            "p2pd_mib_s": round(F / MiB / t_p2pd, 1),
                            "ratio": round(t_curl / t_p2pd, 3),
                            "curl_sync_s": round(t_curl_sync, 3),
                            "ratio_vs_durable_curl": round(t_curl_sync / t_p2pd, 3),
                            "p2pd_peak_rss_mib": round(rss / 1024, 1),
                            "p2pd_cpu_s": round(cpu, 2), "curl_cpu_s": round(curl_cpu, 2),
                            "server_cpu_s_curl": round(srv_curl, 2),
                            "server_cpu_s_p2pd": round(srv_p2pd, 2), "verified": ok})
        for res in results:
            if a.json:
                print(json.dumps(res))
            else:
                link = f"link {res['link_mbit']} Mbit/s" if res["link_mbit"] else "loopback"
                print(f"cold #{res['round']}: {res['bytes'] / MiB:.0f} MiB, {link}, "
                      f"{res['streams']} streams, {res['chunk_mib']} MiB ranges: curl "
                      f"{res['curl_mib_s']} MiB/s, p2pd {res['p2pd_mib_s']} MiB/s "
                      f"(verified={res['verified']}), ratio {res['ratio']} (vs curl + sync: "
                      f"{res['ratio_vs_durable_curl']}), p2pd peak RSS "
                      f"{res['p2pd_peak_rss_mib']} MiB; CPU s: p2pd {res['p2pd_cpu_s']}, "
                      f"curl {res['curl_cpu_s']}, server {res['server_cpu_s_curl']} (curl run) / "
                      f"{res['server_cpu_s_p2pd']} (p2pd run)")
        med = {"mode": "cold-median", "rounds": len(results), "link_mbit": a.link_mbit or None,
               "ratio": round(statistics.median(r["ratio"] for r in results), 3),
               "ratio_vs_durable_curl": round(statistics.median(
                   r["ratio_vs_durable_curl"] for r in results), 3),
               "p2pd_peak_rss_mib": max(r["p2pd_peak_rss_mib"] for r in results),
               "verified": all(r["verified"] for r in results)}
        if a.json:
            print(json.dumps(med))
        else:
            print(f"cold median of {med['rounds']}: ratio {med['ratio']} (vs curl + sync "
                  f"{med['ratio_vs_durable_curl']}), p2pd peak RSS {med['p2pd_peak_rss_mib']} MiB, "
                  f"verified={med['verified']}")
    finally:
        if rgw is not None:
            if net is not None:
                subprocess.run(["ip", "netns", "exec", f"{bs.PFX}-s3",
                                os.path.join(ROOT, "tools", "rgw"), "stop"],
                               env=rgw.env, check=False)
                bs.Net.cleanup()
            else:
                rgw.stop()
        shutil.rmtree(work, ignore_errors=True)


def cpu_split_s(pid):
    """(user, system) CPU seconds of process pid so far, all its threads
    (those that exited included), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(parts[11]) / tck, int(parts[12]) / tck


def machine_ticks():
    """(busy, steal, total, nice) jiffies of the whole machine so far, from
    /proc/stat: busy is every CPU state but idle, iowait and steal; nice is
    the part of busy spent in processes at a positive nice value (work that
    yields to the benchmark but still shares the cores and their caches)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle - v[7], v[7], sum(v), v[1]


def machine_share(t0, t1):
    """The machine's busy, stolen and niced CPU share between two
    machine_ticks()."""
    span = max(1, t1[2] - t0[2])
    return {"busy": round((t1[0] - t0[0]) / span, 3), "steal": round((t1[1] - t0[1]) / span, 3),
            "nice": round((t1[3] - t0[3]) / span, 3)}
