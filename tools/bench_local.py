"""tools/bench local: warm peer-to-peer throughput on loopback, next to what
the machine can do at best in the same run.

One seed p2pd imports a generated release from a directory (p2pctl seed,
no S3 anywhere), one fetcher p2pd gets it through the tracker's prefetch
hook; the time from the hook to "ready" (every chunk received, verified,
committed, every file verified and published) gives the throughput. Next
to it: iperf3 over loopback, and OpenSSL SHA-256 on one core times the
cores p2pd can use, and the rate at which plain writes fill new page-cache
memory (what the fetcher must do with every byte at least). Prints the
ratio to min(iperf3, SHA-256 x cores) and to the others, and the peak RSS
of both daemons.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import ws
from benchlib import BUILD, MiB, build, cpu_s, disk_bytes_s, make_model, peak_rss_kib, sh


def iperf3_bytes_s():
    srv = subprocess.Popen(["iperf3", "-s", "-1", "-p", "5299"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = sh("iperf3", "-c", "127.0.0.1", "-p", "5299", "-t", "5", "-J",
                 capture_output=True, text=True).stdout
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 8
    finally:
        srv.wait(10)


def pagecache_write_bytes_s(dirpath, size, threads):
    """Rate at which `threads` writers fill a new file of `size` bytes in
    the page cache (256 KiB pwrites, disjoint ranges, no sync): the least
    any fetcher has to do with the bytes it receives. Measured while the
    fetched release is still cached, so it gets new memory as the fetcher
    did. On a VM whose free memory goes back to the hypervisor, first
    writes into such memory fault in the host and this is far below the
    memory bandwidth."""
    buf = os.urandom(256 * 1024)
    path = os.path.join(dirpath, "pagecache-probe")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    n = size // len(buf)

    def writer(k):
        for i in range(k, n, threads):
            os.pwrite(fd, buf, i * len(buf))

    try:
        ts = [threading.Thread(target=writer, args=(k,)) for k in range(threads)]
        t0 = time.time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return n * len(buf) / (time.time() - t0)
    finally:
        os.close(fd)
        os.unlink(path)


def sha256_bytes_s_one_core():
    out = sh("openssl", "speed", "-evp", "sha256", "-bytes", str(1 << 20), "-seconds", "3",
             capture_output=True, text=True).stdout
    m = re.search(r"^sha256\s+([\d.]+)k", out, re.M)
    return float(m.group(1)) * 1000


def run(a):
    build()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # no S3 in this benchmark
    env["P2P_LOG_LEVEL"] = "warn"
    work = tempfile.mkdtemp(prefix="ws-bench-local-")
    peers = []
    trk = None
    try:
        src = os.path.join(work, "model")
        F = make_model(src, a.size_mib, "bench-local")
        mpath = os.path.join(work, "manifest.json")
        with open(mpath, "wb") as f:
            f.write(sh(os.path.join(BUILD, "tools", "p2pctl"), "manifest", "create", src,
                       "--chunk-size", str(a.chunk_mib * MiB), capture_output=True).stdout)
        digest = sh(os.path.join(BUILD, "tools", "p2pctl"), "manifest", "digest", mpath,
                    capture_output=True, text=True).stdout.strip()
        key = ws.write_cluster_key(os.path.join(work, "cluster.key"))
        trk = ws.Tracker(BUILD, work, key).start()
        seed = ws.swarm_peer(BUILD, work, env, "seed", trk, key).start()
        peers.append(seed)
        r = seed.ctl("seed", src, "--manifest", mpath)
        if r.returncode != 0:
            raise RuntimeError(r.stderr + seed.tail())
        fetch = ws.swarm_peer(BUILD, work, env, "fetch", trk, key).start()
        peers.append(fetch)
        # The setup wrote the release three times (generated, hashed, imported
        # into the seed's cache): let that writeback finish so the transfer
        # is not charged for it.
        os.sync()
        cpu0 = cpu_s(seed.proc.pid) + cpu_s(fetch.proc.pid)
        t0 = time.time()
        trk.prefetch(digest=digest)
        ws.wait_ready([fetch], digest, timeout=1800)
        t = time.time() - t0
        cpu = cpu_s(seed.proc.pid) + cpu_s(fetch.proc.pid) - cpu0
        ok, _ = ws.tree_equal(src, os.path.join(fetch.cache, "releases", digest))
        rss_seed = peak_rss_kib(seed.proc.pid) / 1024
        rss_fetch = peak_rss_kib(fetch.proc.pid) / 1024
        pagecache = pagecache_write_bytes_s(work, F, min(os.cpu_count() or 1, 8))
    finally:
        for p in peers:
            p.stop()
        if trk:
            trk.stop()
        shutil.rmtree(work, ignore_errors=True)
    disk = disk_bytes_s(tempfile.gettempdir())
    tcp = iperf3_bytes_s()
    sha1 = sha256_bytes_s_one_core()
    cores = min(os.cpu_count() or 1, 8)
    bound = min(tcp, sha1 * cores)
    # iperf3 and openssl each had both cores to themselves; a transfer that
    # hashes every byte does both on the same cores, one after the other
    # per byte: the most such a transfer could reach here, before any disk
    # write or read.
    shared = 1 / (1 / tcp + 1 / (sha1 * cores))
    res = {"mode": "local", "bytes": F, "chunk_mib": a.chunk_mib, "t_s": round(t, 3),
           "p2p_mib_s": round(F / MiB / t, 1), "iperf3_mib_s": round(tcp / MiB, 1),
           "sha256_mib_s_per_core": round(sha1 / MiB, 1), "cores": cores,
           "bound_mib_s": round(bound / MiB, 1), "ratio": round(F / t / bound, 3),
           "shared_bound_mib_s": round(shared / MiB, 1),
           "ratio_to_shared": round(F / t / shared, 3),
           "disk_durable_mib_s": round(disk / MiB, 1),
           "ratio_to_disk": round(F / t / disk, 3),
           "pagecache_write_mib_s": round(pagecache / MiB, 1),
           "ratio_to_pagecache": round(F / t / pagecache, 3),
           "cpu_s": round(cpu, 2), "peak_rss_seed_mib": round(rss_seed, 1),
           "peak_rss_fetch_mib": round(rss_fetch, 1), "verified": ok}
    if a.json:
        print(json.dumps(res))
    else:
        print(f"local: {F / MiB:.0f} MiB seed -> fetcher in {t:.2f}s = {res['p2p_mib_s']} MiB/s "
              f"(verified={ok}); iperf3 loopback {res['iperf3_mib_s']} MiB/s, SHA-256 "
              f"{res['sha256_mib_s_per_core']} MiB/s/core x {cores}; ratio to "
              f"min(...) = {res['ratio']}; TCP and SHA-256 sharing the cores "
              f"{res['shared_bound_mib_s']} MiB/s (ratio {res['ratio_to_shared']}); durable disk writes {res['disk_durable_mib_s']} "
              f"MiB/s (ratio {res['ratio_to_disk']}); writing new page-cache memory "
              f"{res['pagecache_write_mib_s']} MiB/s (ratio {res['ratio_to_pagecache']}); "
              f"CPU {res['cpu_s']}s; peak RSS seed "
              f"{res['peak_rss_seed_mib']} MiB, fetcher {res['peak_rss_fetch_mib']} MiB")
