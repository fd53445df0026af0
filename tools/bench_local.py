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

Cost per byte: the CPU seconds (user + system, every thread, from
/proc/PID/stat) the seed and the fetcher each spent over the transfer, per
GiB moved, and next to them the least a fetcher must spend per GiB,
measured in the same run on one thread each (CPU time of that thread): one
SHA-256 pass (hashlib, which is OpenSSL's EVP, in 256 KiB updates, the
fetcher's buffer size), one copy in (reading a loopback TCP stream into a
256 KiB buffer: the copy a fetcher cannot avoid is its socket read, so the
probe is that read, system call included, rather than a bare memcpy; the
sender's side, which on loopback also runs the receive path in its
softirq, is not counted) and one page-cache write (pwrite of 256 KiB
pieces into a new file). The targets (docs/benchmarks.md): seed at most
0.3 CPU-s/GiB, fetcher at most 1.3 x that reference. Next to the seed's
figure: a bare sender's, one thread sending the release's largest file
from the page cache to a loopback socket with sendfile. On loopback the
sender's system time carries part of the receive path too (the part its
own sends deliver; what the receiver's reads deliver counts against the
receiver), for p2pd's seed as for this probe, so the two compare only
roughly, and seed and fetcher are best read together as well
(docs/benchmarks.md, session 37). One AES-256-GCM pass
(OpenSSL EVP through the cryptography package, when installed) is
measured too: a sealed payload costs each side one.

--build-dir runs the binaries of another build (no build step), and
--p2pd-arg gives both daemons one more option (repeat), e.g.
--p2pd-arg=--plaintext-payloads.
"""
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import ws
from benchlib import (BUILD, MiB, build, cpu_split_s, disk_bytes_s, machine_share, machine_ticks,
                      make_model, peak_rss_kib, sh)

GiB = 1 << 30
PIECE = 256 * 1024  # the fetcher's buffer size (PEER_BUF_BYTES)


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
    memory bandwidth. Returns (bytes/s, CPU seconds of the writer threads
    together, bytes written)."""
    buf = os.urandom(PIECE)
    path = os.path.join(dirpath, "pagecache-probe")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    n = size // len(buf)
    cpu = [0.0] * threads

    def writer(k):
        c0 = time.thread_time()
        for i in range(k, n, threads):
            os.pwrite(fd, buf, i * len(buf))
        cpu[k] = time.thread_time() - c0

    try:
        ts = [threading.Thread(target=writer, args=(k,)) for k in range(threads)]
        t0 = time.time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return n * len(buf) / (time.time() - t0), sum(cpu), n * len(buf)
    finally:
        os.close(fd)
        os.unlink(path)


def sha256_cpu_s_per_gib(size):
    """CPU-s/GiB of one SHA-256 pass over size bytes in memory: OpenSSL's
    EVP (hashlib) in PIECE updates, cycling through a 64 MiB buffer. One
    pass over the buffer first, unmeasured: the first runs several times
    slower here (the fetcher's buffers are long-lived)."""
    mv = memoryview(os.urandom(64 * MiB))
    h = hashlib.sha256()
    for off in range(0, len(mv), PIECE):
        h.update(mv[off:off + PIECE])
    done = 0
    c0 = time.thread_time()
    while done < size:
        for off in range(0, len(mv), PIECE):
            h.update(mv[off:off + PIECE])
        done += len(mv)
    return (time.thread_time() - c0) * GiB / done


def aes_gcm_cpu_s_per_gib(size):
    """CPU-s/GiB of one AES-256-GCM pass (OpenSSL EVP through the
    cryptography package) in PIECE updates into a buffer of their own, or
    None without that package."""
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        return None
    src = memoryview(os.urandom(64 * MiB))
    out = bytearray(PIECE + 16)
    enc = Cipher(algorithms.AES(os.urandom(32)), modes.GCM(os.urandom(12))).encryptor()
    for off in range(0, len(src), PIECE):  # unmeasured, as for SHA-256
        enc.update_into(src[off:off + PIECE], out)
    done = 0
    c0 = time.thread_time()
    while done < size:
        for off in range(0, len(src), PIECE):
            enc.update_into(src[off:off + PIECE], out)
        done += len(src)
    cpu = time.thread_time() - c0
    enc.finalize()
    return cpu * GiB / done


def socket_read_cpu_s_per_gib(size):
    """CPU-s/GiB of reading size bytes from a loopback TCP connection into
    one PIECE buffer: the receiving thread's CPU only (a sender thread
    writes them)."""
    srv = socket.create_server(("127.0.0.1", 0))
    snd = socket.create_connection(srv.getsockname())
    rcv, _ = srv.accept()
    srv.close()
    chunk = os.urandom(4 * MiB)

    def sender():
        left = size
        while left > 0:
            n = min(left, len(chunk))
            snd.sendall(chunk[:n] if n < len(chunk) else chunk)
            left -= n
        snd.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=sender)
    buf = bytearray(PIECE)
    mv = memoryview(buf)
    got = 0
    try:
        t.start()
        c0 = time.thread_time()
        while got < size:
            n = rcv.recv_into(mv)
            if n == 0:
                break
            got += n
        cpu = time.thread_time() - c0
        t.join()
    finally:
        snd.close()
        rcv.close()
    return cpu * GiB / max(1, got)


def sendfile_cpu_s_per_gib(path, size):
    """CPU-s/GiB of sending size bytes of the file at path (in the page
    cache, looped over) to a loopback TCP connection with sendfile, 1 MiB a
    call: the sending thread's CPU only (another thread reads and drops
    them). On loopback the sender's system time also carries the part of
    the receive path its own sends deliver, as it does for p2pd's seed."""
    srv = socket.create_server(("127.0.0.1", 0))
    snd = socket.create_connection(srv.getsockname())
    rcv, _ = srv.accept()
    srv.close()

    def receiver():
        buf = bytearray(PIECE)
        while rcv.recv_into(buf) > 0:
            pass

    t = threading.Thread(target=receiver)
    fd = os.open(path, os.O_RDONLY)
    flen = os.fstat(fd).st_size
    sent = 0
    try:
        t.start()
        c0 = time.thread_time()
        while sent < size:
            off = sent % flen
            n = os.sendfile(snd.fileno(), fd, off, min(MiB, flen - off, size - sent))
            if n <= 0:
                break
            sent += n
        cpu = time.thread_time() - c0
        snd.shutdown(socket.SHUT_WR)
        t.join()
    finally:
        os.close(fd)
        snd.close()
        rcv.close()
    return cpu * GiB / max(1, sent)


def sha256_bytes_s_one_core():
    out = sh("openssl", "speed", "-evp", "sha256", "-bytes", str(1 << 20), "-seconds", "3",
             capture_output=True, text=True).stdout
    m = re.search(r"^sha256\s+([\d.]+)k", out, re.M)
    return float(m.group(1)) * 1000


def run(a):
    bdir = os.path.abspath(a.build_dir) if a.build_dir else BUILD
    if not a.build_dir:
        build()
    extra = list(a.p2pd_arg)
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
            f.write(sh(os.path.join(bdir, "tools", "p2pctl"), "manifest", "create", src,
                       "--chunk-size", str(a.chunk_mib * MiB), capture_output=True).stdout)
        digest = sh(os.path.join(bdir, "tools", "p2pctl"), "manifest", "digest", mpath,
                    capture_output=True, text=True).stdout.strip()
        key = ws.write_cluster_key(os.path.join(work, "cluster.key"))
        trk = ws.Tracker(bdir, work, key).start()
        seed = ws.swarm_peer(bdir, work, env, "seed", trk, key, extra=extra).start()
        peers.append(seed)
        r = seed.ctl("seed", src, "--manifest", mpath)
        if r.returncode != 0:
            raise RuntimeError(r.stderr + seed.tail())
        fetch = ws.swarm_peer(bdir, work, env, "fetch", trk, key, extra=extra).start()
        peers.append(fetch)
        # The setup wrote the release three times (generated, hashed, imported
        # into the seed's cache): let that writeback finish so the transfer
        # is not charged for it.
        os.sync()
        s0, f0, m0 = cpu_split_s(seed.proc.pid), cpu_split_s(fetch.proc.pid), machine_ticks()
        t0 = time.time()
        trk.prefetch(digest=digest)
        ws.wait_ready([fetch], digest, timeout=1800)
        t = time.time() - t0
        s1, f1, m1 = cpu_split_s(seed.proc.pid), cpu_split_s(fetch.proc.pid), machine_ticks()
        seed_cpu = [s1[0] - s0[0], s1[1] - s0[1]]
        fetch_cpu = [f1[0] - f0[0], f1[1] - f0[1]]
        machine = machine_share(m0, m1)
        ok, _ = ws.tree_equal(src, os.path.join(fetch.cache, "releases", digest))
        rss_seed = peak_rss_kib(seed.proc.pid) / 1024
        rss_fetch = peak_rss_kib(fetch.proc.pid) / 1024
        # The seed's floor, on the largest file of the release it served.
        biggest = max((os.path.join(dp, f) for dp, _, fs in os.walk(src) for f in fs),
                      key=os.path.getsize)
        floor_send = sendfile_cpu_s_per_gib(biggest, F)
        pagecache, pc_cpu, pc_bytes = pagecache_write_bytes_s(work, F,
                                                              min(os.cpu_count() or 1, 8))
    finally:
        for p in peers:
            p.stop()
        if trk:
            trk.stop()
        shutil.rmtree(work, ignore_errors=True)
    # The fetcher's reference, one thread each, over the same size.
    r0 = machine_ticks()
    ref_sha = sha256_cpu_s_per_gib(F)
    ref_read = socket_read_cpu_s_per_gib(F)
    ref_write = pc_cpu * GiB / pc_bytes
    ref = ref_sha + ref_read + ref_write
    aes = aes_gcm_cpu_s_per_gib(F)
    machine_ref = machine_share(r0, machine_ticks())
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
    gib = F / GiB
    seed_gib = sum(seed_cpu) / gib
    fetch_gib = sum(fetch_cpu) / gib
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
           "cpu_s": round(sum(seed_cpu) + sum(fetch_cpu), 2),
           "seed_cpu_s": round(sum(seed_cpu), 3), "fetch_cpu_s": round(sum(fetch_cpu), 3),
           "seed_user_sys_s": [round(x, 2) for x in seed_cpu],
           "fetch_user_sys_s": [round(x, 2) for x in fetch_cpu],
           "seed_cpu_s_per_gib": round(seed_gib, 3),
           "ref_sendfile_cpu_s_per_gib": round(floor_send, 3),
           "fetch_cpu_s_per_gib": round(fetch_gib, 3),
           "ref_sha256_cpu_s_per_gib": round(ref_sha, 3),
           "ref_socket_read_cpu_s_per_gib": round(ref_read, 3),
           "ref_pagecache_write_cpu_s_per_gib": round(ref_write, 3),
           "ref_fetch_cpu_s_per_gib": round(ref, 3),
           "fetch_to_ref": round(fetch_gib / ref, 3),
           "aes256gcm_cpu_s_per_gib": round(aes, 3) if aes is not None else None,
           "seed_target_met": seed_gib <= 0.3, "fetch_target_met": fetch_gib <= 1.3 * ref,
           "p2pd_args": extra, "build": bdir, "machine_cpu": machine,
           "machine_cpu_ref": machine_ref,
           "peak_rss_seed_mib": round(rss_seed, 1),
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
        aes_s = f"{aes:.3f}" if aes is not None else "n/a"
        print(f"cost per byte{' (' + ' '.join(extra) + ')' if extra else ''}: seed "
              f"{seed_gib:.3f} CPU-s/GiB (user {seed_cpu[0]:.2f} s, system {seed_cpu[1]:.2f} s; "
              f"target <= 0.3: {'met' if res['seed_target_met'] else 'not met'}; a bare "
              f"sendfile sender here {floor_send:.3f}); fetcher "
              f"{fetch_gib:.3f} CPU-s/GiB (user {fetch_cpu[0]:.2f} s, system "
              f"{fetch_cpu[1]:.2f} s) = {res['fetch_to_ref']} x reference {ref:.3f} (SHA-256 "
              f"{ref_sha:.3f} + socket read {ref_read:.3f} + page-cache write {ref_write:.3f}; "
              f"target <= 1.3: {'met' if res['fetch_target_met'] else 'not met'}); one "
              f"AES-256-GCM pass {aes_s} CPU-s/GiB; machine during the transfer: busy "
              f"{machine['busy']:.0%} (niced {machine['nice']:.0%}), stolen "
              f"{machine['steal']:.1%}; during the reference: busy {machine_ref['busy']:.0%} "
              f"(niced {machine_ref['nice']:.0%}), stolen {machine_ref['steal']:.1%}")
