#!/usr/bin/python3
"""Writes the seed corpus for fuzz_frame into corpus/frame/: small valid
streams of every family plus the hostile shapes the reader must refuse.
Deterministic; rerun after a wire format change: ./gen_frame_corpus.py"""
import os
import struct

import msgpack

HDR = struct.Struct(">2sBBB3xII")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "frame")
D = bytes(range(32))


def frame(t, body, payload=b"", flags=0, raw=None, ver=1, mac=b""):
    b = raw if raw is not None else msgpack.packb(body, use_bin_type=True)
    return HDR.pack(b"WS", ver, t, flags, len(b), len(payload)) + b + mac + payload


SEEDS = {
    "hello": frame(1, {"v": 1, "n": D, "id": "node-a", "port": 7070,
                       "role": 0, "zone": "z"}),
    "auth": frame(2, {"mac": D}),
    "error_goodbye": frame(3, {"code": -20001, "msg": "x"}) + frame(4, {"r": 0}),
    "announce_bits": frame(16, {"d": D, "tot": 12, "role": 0, "want": True,
                                "have": b"\xf0\x00"}),
    "announce_delta": frame(16, {"d": D, "tot": 0, "role": 1, "want": False,
                                 "hd": [1, 2, 3], "uri": "s3://b/k"}),
    "announce_reply": frame(17, {"d": D, "iv": 1000,
                                 "peers": [{"id": "a", "host": "h", "port": 1}],
                                 "leases": [{"d": D, "c": [1, 2], "ttl": 5}],
                                 "wanted": [{"d": D}]}),
    "lease": frame(18, {"d": D, "c": [1], "done": [2]}) +
             frame(19, {"d": D, "c": [], "done": [1]}),
    "peer_msgs": frame(32, {"d": D, "c": 1}) +
                 frame(33, {"d": D, "tot": 9, "bits": b"\xff\x80"}) +
                 frame(34, {"d": D, "c": 1, "id": 2}) +
                 frame(35, {"d": D, "c": 1, "id": 2}) +
                 frame(37, {"d": D, "c": 1, "r": 1, "ra": 10}),
    "chunk": frame(36, {"d": D, "c": 0, "id": 1}, payload=b"A" * 100),
    "manifest": frame(38, {"d": D}) + frame(39, {"d": D}, payload=b"{}"),
    "sealed": frame(4, {"r": 0}, flags=1, mac=bytes(32)),
    "unknown_type": frame(200, {"x": [1, {"y": None}]}, payload=b"zz") +
                    frame(4, {}),
    "huge_map_1013": frame(32, None, raw=b"\xdf\xff\xff\xff\xff"),
    "huge_array_nested": frame(32, None, raw=b"\x81\xa1d\xdd\xff\xff\xff\xff"),
    "deep_nesting": frame(32, None, raw=b"\x81\xa1x" + b"\x91" * 20 + b"\xc0"),
    "body_too_big": HDR.pack(b"WS", 1, 32, 0, 0xffffffff, 0),
    "payload_on_have": HDR.pack(b"WS", 1, 32, 0, 1, 4) + b"\x80abcd",
    "bad_version": frame(4, {}, ver=7),
    "truncated": frame(32, {"d": D, "c": 1})[:-3],
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")
