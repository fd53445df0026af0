#!/usr/bin/python3
"""p2pctl manifest end to end on a 1 GiB directory.

create on a directory of random data, then check --dir round-trips; the
digest printed equals `sha256sum manifest.json`; chunk hashes agree with
hashlib; a flipped byte fails check --dir; a manifest naming
../../etc/passwd is rejected. The directory lives in a temporary dir that
is removed at the end.

Usage: roundtrip_1g.py P2PCTL [TOTAL_MIB].  Prints TAP.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

P2PCTL = sys.argv[1]
TOTAL_MIB = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
MIB = 1 << 20
results = []


def check(name, cond, detail=""):
    results.append((name, bool(cond), detail))


def ctl(*args):
    return subprocess.run([P2PCTL, "manifest", *args], capture_output=True,
                          timeout=900)


def write_random(path, size):
    """Non-trivial data: a fresh urandom block per MiB (no repetition)."""
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 4 * MIB)
            f.write(os.urandom(n))
            left -= n


def main():
    with tempfile.TemporaryDirectory(prefix="ws-1g-") as tmp:
        rel = os.path.join(tmp, "release")
        os.makedirs(os.path.join(rel, "tokenizer"))
        # one big shard, a few smaller ones with sizes off chunk boundaries
        big = (TOTAL_MIB * MIB) // 2
        rest = TOTAL_MIB * MIB - big
        sizes = {
            "model-00001-of-00003.safetensors": big,
            "model-00002-of-00003.safetensors": rest // 2 + 12345,
            "model-00003-of-00003.safetensors": rest - rest // 2 - 12345 - 4096,
            "tokenizer/tokenizer.json": 4096 - 7,
            "config.json": 7,
        }
        for name, size in sizes.items():
            write_random(os.path.join(rel, name), size)
        total = sum(sizes.values())
        check("fixture is 1 GiB" if TOTAL_MIB == 1024 else "fixture built",
              total == TOTAL_MIB * MIB)

        man = os.path.join(tmp, "manifest.json")
        t0 = time.monotonic()
        r = ctl("create", rel, "--chunk-size", "16Mi", "--model", "org/m",
                "--version", "1")
        dt = time.monotonic() - t0
        with open(man, "wb") as f:
            f.write(r.stdout)
        check("create exits 0", r.returncode == 0, r.stderr.decode())
        print("# create: %.1f s, %.0f MiB/s" % (dt, total / MIB / dt))

        sha = subprocess.run(["sha256sum", man], capture_output=True,
                             check=True).stdout.split()[0].decode()
        printed = r.stderr.decode().split()[0] if r.stderr else ""
        check("create's digest equals sha256sum manifest.json",
              printed == "sha256-" + sha, printed)
        r2 = ctl("digest", man)
        check("digest equals sha256sum manifest.json",
              r2.returncode == 0 and r2.stdout.decode().strip() == "sha256-" + sha)

        doc = json.loads(r.stdout)
        files = {f["name"]: f for f in doc["files"]}
        check("all files listed, sorted",
              [f["name"] for f in doc["files"]] == sorted(sizes))
        ok = True
        for name, size in sizes.items():
            f = files[name]
            h = hashlib.sha256()
            chunks = []
            with open(os.path.join(rel, name), "rb") as fh:
                while True:
                    b = fh.read(16 * MIB)
                    if not b:
                        break
                    h.update(b)
                    chunks.append(hashlib.sha256(b).hexdigest())
            ok = ok and f["size"] == size and f["sha256"] == h.hexdigest() \
                and f["chunks"] == chunks
        check("sizes, file and chunk hashes match hashlib", ok)

        t0 = time.monotonic()
        r = ctl("check", man, "--dir", rel)
        print("# check --dir: %.1f s" % (time.monotonic() - t0))
        check("check --dir round-trips", r.returncode == 0, r.stderr.decode())

        shard = os.path.join(rel, "model-00002-of-00003.safetensors")
        at = min(20 * MIB, os.path.getsize(shard) // 2) + 3
        with open(shard, "r+b") as fh:
            fh.seek(at)
            b = fh.read(1)
            fh.seek(at)
            fh.write(bytes([b[0] ^ 0xFF]))
        r = ctl("check", man, "--dir", rel)
        check("a flipped byte fails check --dir",
              r.returncode == 1 and b"model-00002" in r.stderr,
              r.stderr.decode())

        evil = dict(doc)
        evil["files"] = [dict(doc["files"][0], name="../../etc/passwd",
                              size=0, chunks=[])]
        evil_path = os.path.join(tmp, "evil.json")
        with open(evil_path, "w") as fh:
            json.dump(evil, fh)
        r = ctl("check", evil_path)
        check("manifest naming ../../etc/passwd is rejected",
              r.returncode == 1 and b"'..'" in r.stderr, r.stderr.decode())
        r = ctl("check", evil_path, "--dir", rel)
        check("... also with --dir", r.returncode == 1)

    for i, (name, ok, detail) in enumerate(results, 1):
        print(("ok" if ok else "not ok"), i, "-", name)
        if not ok and detail:
            for line in detail.splitlines():
                print("#", line)
    print("1..%d" % len(results))
    return 0 if all(ok for _, ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
