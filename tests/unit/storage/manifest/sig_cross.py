#!/usr/bin/python3
"""Cross-checks p2pctl's manifest signatures and digests against independent
implementations: PyNaCl (libsodium's Python binding, but its own key and
signature handling) and hashlib.

Usage: sig_cross.py P2PCTL.  Prints TAP; exit 0 only if every check passed.
"""
import hashlib
import os
import subprocess
import sys
import tempfile

import nacl.exceptions
import nacl.signing

P2PCTL = sys.argv[1]
results = []


def check(name, cond):
    results.append((name, bool(cond)))


def ctl(*args, stdin=None):
    return subprocess.run([P2PCTL, "manifest", *args], input=stdin,
                          capture_output=True, timeout=60)


def main():
    with tempfile.TemporaryDirectory(prefix="ws-sig-") as tmp:
        rel = os.path.join(tmp, "rel")
        os.makedirs(os.path.join(rel, "sub"))
        with open(os.path.join(rel, "w.bin"), "wb") as f:
            f.write(os.urandom(3 * 1024 * 1024 + 17))
        with open(os.path.join(rel, "sub", "config.json"), "w") as f:
            f.write('{"a": 1}\n')
        man = os.path.join(tmp, "manifest.json")
        r = ctl("create", rel, "--chunk-size", "1Mi", "--model", "m")
        check("create exits 0", r.returncode == 0)
        with open(man, "wb") as f:
            f.write(r.stdout)
        body = r.stdout
        digest = "sha256-" + hashlib.sha256(body).hexdigest()
        r = ctl("digest", man)
        check("digest equals hashlib sha256 of the bytes",
              r.stdout.decode().strip() == digest)

        # ours signs, PyNaCl verifies
        key = os.path.join(tmp, "key")
        r = ctl("keygen", key)
        pub_hex = r.stdout.decode().strip()
        check("keygen exits 0", r.returncode == 0)
        check("key file is mode 0600", os.stat(key).st_mode & 0o777 == 0o600)
        with open(key) as f:
            seed = bytes.fromhex(f.read().strip())
        sk = nacl.signing.SigningKey(seed)
        check("keygen public key matches PyNaCl's from the seed",
              sk.verify_key.encode().hex() == pub_hex)
        r = ctl("sign", man, "--key", key)
        sig = r.stdout
        check("sign writes 64 raw bytes", r.returncode == 0 and len(sig) == 64)
        try:
            nacl.signing.VerifyKey(bytes.fromhex(pub_hex)).verify(body, sig)
            ok = True
        except nacl.exceptions.BadSignatureError:
            ok = False
        check("PyNaCl verifies p2pctl's signature", ok)
        check("signature is deterministic Ed25519 (equals PyNaCl's)",
              sk.sign(body).signature == sig)

        # PyNaCl signs, ours verifies
        other = nacl.signing.SigningKey.generate()
        sigfile = os.path.join(tmp, "manifest.json.sig")
        with open(sigfile, "wb") as f:
            f.write(other.sign(body).signature)
        opub = other.verify_key.encode().hex()
        r = ctl("verify", man, "--sig", sigfile, "--pub", opub)
        check("p2pctl verifies PyNaCl's signature", r.returncode == 0)
        pubfile = os.path.join(tmp, "pub")
        with open(pubfile, "w") as f:
            f.write(opub + "\n")
        r = ctl("verify", man, "--sig", sigfile, "--pub", pubfile)
        check("--pub accepts a file", r.returncode == 0)
        r = ctl("verify", man, "--sig", sigfile, "--pub", pub_hex)
        check("wrong public key is rejected", r.returncode == 1)
        tampered = os.path.join(tmp, "tampered.json")
        with open(tampered, "wb") as f:
            f.write(body.replace(b'"m"', b'"n"', 1))
        r = ctl("verify", tampered, "--sig", sigfile, "--pub", opub)
        check("tampered manifest is rejected", r.returncode == 1)
        with open(sigfile, "wb") as f:
            f.write(other.sign(body).signature[:63])
        r = ctl("verify", man, "--sig", sigfile, "--pub", opub)
        check("short signature file is rejected", r.returncode == 1)
        r = ctl("keygen", key)
        check("keygen refuses to overwrite a key", r.returncode == 1)

    for i, (name, ok) in enumerate(results, 1):
        print(("ok" if ok else "not ok"), i, "-", name)
    print("1..%d" % len(results))
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
