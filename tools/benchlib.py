"""Shared pieces of tools/bench: build, radosgw, publishing, process
stats, and the cold benchmark."""
import argparse
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


def sh(*args, **kw):
    kw.setdefault("check", True)
    return subprocess.run(args, **kw)


def build():
    sh(os.path.join(ROOT, "tools", "bootstrap"), "--quiet")
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        sh("meson", "setup", BUILD, "--buildtype=release", stdout=subprocess.DEVNULL)
    sh("ninja", "-C", BUILD, stdout=subprocess.DEVNULL)


class Rgw:
    """radosgw through tools/rgw, on its own ports and directory."""

    def __init__(self, bind="127.0.0.1", port=7680, mon=6989, netns=None):
        self.env = dict(os.environ, WS_RGW_DIR=f"/tmp/weightswarm-bench-rgw",
                        WS_RGW_PORT=str(port), WS_RGW_MON_PORT=str(mon),
                        WS_RGW_BIND=bind, WS_RGW_MEM_GB="8")
        self.netns = netns
        pre = ["ip", "netns", "exec", netns] if netns else []
        sh(*pre, os.path.join(ROOT, "tools", "rgw"), "start", env=self.env,
           stdout=subprocess.DEVNULL)
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


def curl_ranged(rgw, bucket, prefix, files, chunk, streams, out):
    """Downloads every object as chunk-sized ranges, `streams` at a time,
    with the curl CLI (SigV4 by curl), each range to its own file."""
    env = rgw.s3env
    jobs = []
    for name, size in files:
        for off in range(0, size, chunk):
            end = min(size, off + chunk) - 1
            jobs.append((name, off, end))
    cmds = []
    for i, (name, off, end) in enumerate(jobs):
        cmds.append([
            "curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3",
            "--user", f"{env['AWS_ACCESS_KEY_ID']}:{env['AWS_SECRET_ACCESS_KEY']}",
            "-H", "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "-r", f"{off}-{end}", "-o", os.path.join(out, f"r{i}"),
            f"{rgw.endpoint}/{bucket}/{prefix}{name}"])
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
    return time.time() - t0


def bench_cold(a):
    import ws
    build()
    work = tempfile.mkdtemp(prefix="ws-bench-cold-")
    rgw = Rgw()
    try:
        src = os.path.join(work, "model")
        F = make_model(src, a.size_mib, "bench-cold")
        pub = publish(rgw, src, "bench-cold", a.chunk_mib)
        prefix = pub["uri"].split("bench-cold/", 1)[1]
        files = [(n, os.path.getsize(os.path.join(src, n))) for n in sorted(os.listdir(src))]
        results = []
        os.sync()  # the generated release's writeback is not the benchmark's
        for rnd in range(a.rounds):
            out = os.path.join(work, f"curl{rnd}")
            os.makedirs(out)
            t_curl = curl_ranged(rgw, "bench-cold", prefix, files, a.chunk_mib * MiB, a.streams, out)
            # p2pd makes every chunk durable (fdatasync) before it counts it;
            # curl leaves its bytes in the page cache. The second baseline
            # adds the time to make curl's output durable too.
            t0 = time.time()
            sh("sync", "-f", os.path.join(out, "r0"))
            t_curl_sync = t_curl + time.time() - t0
            shutil.rmtree(out)
            os.sync()
            d = ws.P2pd(BUILD, work, rgw.s3env, name=f"p2pd{rnd}",
                        extra=["--s3-concurrency", str(a.streams), "--log-level", "warn"]).start()
            t0 = time.time()
            r = d.ctl("prefetch", pub["uri"], "--wait")
            t_p2pd = time.time() - t0
            if r.returncode != 0:
                raise RuntimeError(r.stderr + d.tail())
            rss = peak_rss_kib(d.proc.pid)
            cpu = cpu_s(d.proc.pid)
            ok, bad = ws.tree_equal(src, os.path.join(d.cache, "releases", pub["digest"]))
            d.stop()
            shutil.rmtree(d.dir)
            results.append({"mode": "cold", "bytes": F, "streams": a.streams,
                            "chunk_mib": a.chunk_mib, "curl_s": round(t_curl, 3),
                            "p2pd_s": round(t_p2pd, 3),
                            "curl_mib_s": round(F / MiB / t_curl, 1),
                            "p2pd_mib_s": round(F / MiB / t_p2pd, 1),
                            "ratio": round(t_curl / t_p2pd, 3),
                            "curl_sync_s": round(t_curl_sync, 3),
                            "ratio_vs_durable_curl": round(t_curl_sync / t_p2pd, 3),
                            "p2pd_peak_rss_mib": round(rss / 1024, 1),
                            "p2pd_cpu_s": round(cpu, 2), "verified": ok})
        disk = disk_bytes_s(work)
        for res in results:
            res["disk_durable_mib_s"] = round(disk / MiB, 1)
            if a.json:
                print(json.dumps(res))
            else:
                print(f"cold: {res['bytes'] / MiB:.0f} MiB, {res['streams']} streams, "
                      f"{res['chunk_mib']} MiB ranges: curl {res['curl_mib_s']} MiB/s, "
                      f"p2pd {res['p2pd_mib_s']} MiB/s (verified={res['verified']}), "
                      f"ratio {res['ratio']} (vs curl + sync: {res['ratio_vs_durable_curl']}; "
                      f"durable disk writes {res['disk_durable_mib_s']} MiB/s), p2pd peak RSS {res['p2pd_peak_rss_mib']} MiB, "
                      f"p2pd CPU {res['p2pd_cpu_s']} s")
    finally:
        rgw.stop()
        shutil.rmtree(work, ignore_errors=True)


