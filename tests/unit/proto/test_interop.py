"""Interop: our frames against an independent implementation.

python3-msgpack decodes what proto/ encodes and encodes what proto/ decodes;
hashlib/hmac recompute every handshake value (crypto_kdf = keyed BLAKE2b with
salt/personal, crypto_generichash = BLAKE2b, crypto_auth = HMAC-SHA512-256)
from docs/protocol.md alone. WS_PROTO_TOOL names proto_interop_tool.
"""
import hashlib
import os
import struct
import subprocess

import sys

import msgpack
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# The independent Python implementation of docs/protocol.md, shared with the
# fault suite's hostile peers.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "lib"))
from wsproto import HDR, T, kdf, mac as auth  # noqa: E402

TOOL = os.environ.get("WS_PROTO_TOOL", "")
PAYLOAD_TYPES = {T["CHUNK"], T["MANIFEST"]}


def dg(seed):
    return bytes(seed ^ i for i in range(32))


def frame(type_, body, payload=b"", flags=0, raw_body=None):
    b = raw_body if raw_body is not None else msgpack.packb(body, use_bin_type=True)
    return HDR.pack(b"WS", 1, type_, flags, len(b), len(payload)) + b + payload


def split_frames(data):
    out, pos = [], 0
    while pos < len(data):
        magic, ver, typ, flags, blen, plen = HDR.unpack_from(data, pos)
        assert magic == b"WS" and ver == 1
        pos += HDR.size
        body = msgpack.unpackb(data[pos:pos + blen], raw=False)
        pos += blen
        if flags & 1:
            pos += 32
        payload = data[pos:pos + plen]
        pos += plen
        out.append((typ, body, payload))
    return out


def run(*args):
    if not TOOL:
        pytest.skip("WS_PROTO_TOOL not set")
    return subprocess.run([TOOL, *args], capture_output=True, text=True,
                          timeout=60)


def test_c_frames_decode_in_python(tmp_path):
    f = tmp_path / "c.bin"
    assert run("encode", str(f)).returncode == 0
    msgs = {t: (b, p) for t, b, p in split_frames(f.read_bytes())}
    assert set(msgs) == set(T.values())
    hello = msgs[T["HELLO"]][0]
    assert hello == {"v": 1, "n": dg(0x11), "id": "node-a", "port": 7070,
                     "role": 0, "zone": "za"}
    assert msgs[T["AUTH"]][0] == {"mac": dg(0x22)}
    assert msgs[T["ERROR"]][0] == {"code": -20001, "msg": "bad"}
    ann = msgs[T["ANNOUNCE"]][0]
    assert ann["d"] == dg(0x50) and ann["tot"] == 9 and ann["want"] is True
    assert ann["have"] == b"\xf0\x80" and "hd" not in ann
    assert ann["uri"] == "s3://bkt/m/sha256-50/manifest.json"
    rep = msgs[T["ANNOUNCE_REPLY"]][0]
    assert rep["iv"] == 15000
    assert rep["peers"] == [{"id": "node-b", "host": "10.1.2.3", "port": 6881,
                             "zone": "zb"}]
    assert rep["leases"] == [{"d": dg(0x30), "c": [1, 2, 300, 70000],
                              "ttl": 30000}]
    assert rep["wanted"] == [{"d": dg(0x40),
                              "uri": "s3://bkt/m/sha256-00/manifest.json"}]
    for t in ("LEASE_RENEW", "LEASE_RELEASE"):
        assert msgs[T[t]][0] == {"d": dg(0x60), "c": [1, 2], "done": [300, 70000]}
    assert msgs[T["HAVE"]][0] == {"d": dg(0x70), "c": 65536}
    assert msgs[T["BITFIELD"]][0] == {"d": dg(0x70), "tot": 9, "bits": b"\xf0\x80"}
    assert msgs[T["REQUEST"]][0] == {"d": dg(0x70), "c": 3, "id": 4000000000}
    assert msgs[T["CHUNK"]] == ({"d": dg(0x70), "c": 3, "id": 5}, b"0123456789")
    assert msgs[T["REJECT"]][0] == {"d": dg(0x70), "c": 3, "id": 6, "r": 1,
                                    "ra": 500}
    assert msgs[T["MANIFEST"]] == ({"d": dg(0x80)}, b"0123456789")
    for t, (_, p) in msgs.items():
        assert (len(p) > 0) == (t in PAYLOAD_TYPES)


def test_python_frames_decode_in_c(tmp_path):
    d = dg(0x33)
    stream = b"".join([
        # Keys reordered, wide integer encodings, unknown keys of every kind.
        frame(T["HAVE"], {"zz": [None, 1.5, {"q": b"x"}], "c": 7, "d": d}),
        frame(T["HAVE"], {"p": True, "c": 8, "d": d}),
        frame(T["REQUEST"], {"id": 2**32 - 1, "d": d, "c": 0}),
        frame(T["HELLO"], {"v": 3, "n": dg(1), "id": "py", "role": 1,
                           "extra": "ignored"}),
        # A newer peer's type, with a payload: reported, skipped.
        frame(200, {"new": True}, payload=b"abc"),
        frame(T["CHUNK"], {"d": d, "c": 1, "id": 9}, payload=b"\x00\xff" * 5),
        frame(T["CHUNK"], {"o": 65536, "d": d, "c": 1, "id": 9}, payload=b"z"),
        frame(T["ANNOUNCE"], {"d": d, "tot": 20, "role": 0, "want": False,
                              "hd": [0, 19], "ev": 3}),
        frame(T["ANNOUNCE_REPLY"], {"d": d, "iv": 1000,
                                    "peers": [{"id": "a", "host": "h", "port": 1}],
                                    "leases": [{"d": d, "c": [5], "ttl": 9}]}),
        frame(T["BITFIELD"], {"d": d, "tot": 12, "bits": b"\x81\x10"}),
        frame(T["BITFIELD"], {"mux": True, "d": d, "tot": 12, "bits": b"\x81\x10",
                              "live": True}),
        frame(T["REJECT"], {"d": d, "c": 4, "r": 7}),
        frame(T["ERROR"], {"code": -5, "msg": "io"}),
        frame(T["GOODBYE"], {}),
    ])
    f = tmp_path / "py.bin"
    f.write_bytes(stream)
    r = run("decode", str(f))
    assert r.returncode == 0, r.stdout
    dh = d.hex()
    assert r.stdout.splitlines() == [
        f"HAVE d={dh} c=7",
        f"HAVE d={dh} c=8 p=1",
        f"REQUEST d={dh} c=0 id=4294967295",
        f"HELLO v=3 n={dg(1).hex()} id=py port=0 role=1 zone=",
        "SKIP type=200 payload=3",
        " payload=616263",
        f"CHUNK d={dh} c=1 id=9 len=10",
        " payload=00ff00ff00ff00ff00ff",
        f"CHUNK d={dh} c=1 id=9 len=1 o=65536",
        " payload=7a",
        f"ANNOUNCE d={dh} tot=20 ev=3 role=0 want=0 port=0 zone= hd=0,19",
        f"ANNOUNCE_REPLY d={dh} iv=1000 peer=a@h:1/ lease={dh} c=5 ttl=9",
        f"BITFIELD d={dh} tot=12 bits=8110",
        f"BITFIELD d={dh} tot=12 bits=8110 live=1 mux=1",
        f"REJECT d={dh} c=4 id=0 r=7 ra=0",
        "ERROR code=-5 msg=io",
        "GOODBYE r=0",
    ]


@pytest.mark.parametrize("data,err", [
    # msgpack-c #1013: a 5-byte body declaring a 2^32-entry map.
    (frame(T["HAVE"], None, raw_body=b"\xdf\xff\xff\xff\xff"), "WS_EBADMSG"),
    (frame(T["HAVE"], {"d": dg(1)}), "WS_EBADMSG"),                 # no "c"
    (frame(T["HAVE"], {"d": dg(1)[:31], "c": 1}), "WS_EBADMSG"),    # short
    (frame(T["HAVE"], {"d": "x" * 32, "c": 1}), "WS_EBADMSG"),      # str
    (frame(T["HAVE"], {"d": dg(1), "c": -1}), "WS_EBADMSG"),
    (frame(T["HAVE"], {"d": dg(1), "c": 1, "p": 1}), "WS_EBADMSG"),   # not a bool
    (frame(T["CHUNK"], {"d": dg(1), "c": 1, "o": 2**26}, payload=b"x"),
     "WS_EBADMSG"),                                                  # o >= 64 MiB
    (frame(T["BITFIELD"], {"d": dg(1), "tot": 12, "bits": b"\x81\x11"}),
     "WS_EBADMSG"),                                                  # spare bit
    (frame(T["BITFIELD"], {"d": dg(1), "tot": 12, "bits": b"\x81\x10", "mux": 1}),
     "WS_EBADMSG"),                                                  # not a bool
    (frame(T["ANNOUNCE_REPLY"], {"d": dg(1), "iv": 1,
                                 "peers": [{"id": "a", "host": "h", "port": 1}] * 65}),
     "WS_ELIMIT"),
    (HDR.pack(b"WS", 1, T["HAVE"], 0, 2**31, 0), "WS_ELIMIT"),
    (HDR.pack(b"WS", 1, T["HAVE"], 0, 1, 1) + b"\x80\x00", "WS_EPROTO"),
    (HDR.pack(b"WS", 9, T["HAVE"], 0, 1, 0) + b"\x80", "WS_EVERSION"),
    (frame(T["GOODBYE"], {})[:-1], "WS_ETRUNCATED"),
])
def test_c_rejects_hostile(tmp_path, data, err):
    f = tmp_path / "bad.bin"
    f.write_bytes(data)
    r = run("decode", str(f))
    assert r.returncode == 1
    assert r.stdout.splitlines()[-1] == "ERROR " + err


def test_handshake_known_answers():
    r = run("hs-kat")
    assert r.returncode == 0, r.stdout
    kv = dict(line.split("=", 1) for line in r.stdout.split())
    key = bytes(range(32))
    # HELLO frames byte-identical to an independent encoding.
    hello_i = frame(T["HELLO"], {"v": 2, "n": b"\x11" * 32, "id": "init",
                                 "port": 1000, "role": 0, "zone": ""})
    hello_r = frame(T["HELLO"], {"v": 2, "n": b"\x22" * 32, "id": "resp",
                                 "port": 2000, "role": 0, "zone": ""})
    assert kv["hello_i"] == hello_i.hex()
    assert kv["hello_r"] == hello_r.hex()
    hi = hashlib.blake2b(hello_i, digest_size=32).digest()
    hr = hashlib.blake2b(hello_r, digest_size=32).digest()
    ak, sk = kdf(key, 1), kdf(key, 2)
    assert kv["auth_i"] == auth(ak, b"ws-auth-i" + hi + hr).hex()
    assert kv["auth_r"] == auth(ak, b"ws-auth-r" + hi + hr).hex()
    k_i2r = hashlib.blake2b(b"ws-i2r" + hi + hr, digest_size=32, key=sk).digest()
    k_r2i = hashlib.blake2b(b"ws-r2i" + hi + hr, digest_size=32, key=sk).digest()
    assert kv["key_i2r"] == k_i2r.hex()
    assert kv["key_r2i"] == k_r2i.hex()
    for seq in (0, 1):
        body = msgpack.packb({"r": 0})
        hdr = HDR.pack(b"WS", 1, T["GOODBYE"], 1, len(body), 0)
        mac = auth(k_i2r, struct.pack(">Q", seq) + hdr + body)
        assert kv[f"sealed{seq}"] == (hdr + body + mac).hex()
    # A sealed CHUNK payload (both HELLOs v=2): AES-256-GCM under the
    # direction's payload key, IV = 4 zero bytes || BE64(seq of the frame),
    # AAD = the frame's 16-byte header, tag after the payload.
    p_i2r = hashlib.blake2b(b"ws-pi2r" + hi + hr, digest_size=32, key=sk).digest()
    text = b"weights, in two pieces"
    body = msgpack.packb({"d": b"\xab" * 32, "c": 7, "id": 0}, use_bin_type=True)
    hdr = HDR.pack(b"WS", 1, T["CHUNK"], 3, len(body), len(text))
    mac = auth(k_i2r, struct.pack(">Q", 2) + hdr + body)
    sealed = AESGCM(p_i2r).encrypt(bytes(4) + struct.pack(">Q", 2), text, hdr)
    assert kv["sealed_chunk"] == (hdr + body + mac + sealed).hex()
