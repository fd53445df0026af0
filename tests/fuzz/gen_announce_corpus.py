#!/usr/bin/python3
"""Writes the seed corpus for fuzz_announce into corpus/announce/: scripts
of records (op byte, then for ops 0-3 a little-endian u16 length and a
msgpack body) that connect peers, announce, report haves, renew/release
leases, report stuck chunks and let leases expire. The record format is
documented in fuzz_announce.c. Deterministic: ./gen_announce_corpus.py"""
import os
import struct



def packb(o):
    """Minimal msgpack encoder (dict, list, str, bytes, bool, uint)."""
    if isinstance(o, bool):
        return b"\xc3" if o else b"\xc2"
    if isinstance(o, int):
        if o < 128:
            return bytes([o])
        return b"\xce" + struct.pack(">I", o) if o < 1 << 32 else \
            b"\xcf" + struct.pack(">Q", o)
    if isinstance(o, str):
        b = o.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else
                b"\xda" + struct.pack(">H", len(b))) + b
    if isinstance(o, bytes):
        return b"\xc5" + struct.pack(">H", len(o)) + o
    if isinstance(o, list):
        return b"\xdc" + struct.pack(">H", len(o)) + b"".join(map(packb, o))
    return b"\xde" + struct.pack(">H", len(o)) + b"".join(
        packb(k) + packb(v) for k, v in o.items())

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                   "announce")
D = bytes(range(32))
D2 = bytes(range(1, 33))
PRESENCE = bytes(32)

ANN, HAVE, RENEW, RELEASE, CONNECT, DISCONNECT, TICK, TTL = range(8)


def msg(op, peer, body):
    b = packb(body) if not isinstance(
        body, bytes) else body
    return bytes([op | peer << 3]) + struct.pack("<H", len(b)) + b


def op(o, peer=0):
    return bytes([o | peer << 3])


def ann(peer, d=D, tot=16, role=0, want=True, **kw):
    body = {"d": d, "tot": tot, "role": role, "want": want}
    body.update(kw)
    return msg(ANN, peer, body)


SEEDS = {
    "leech_seed": ann(1, role=1, have=b"\xff\xff") + ann(0, have=b"\x00\x00"),
    "presence": ann(0, d=PRESENCE, tot=0, want=False) +
                ann(1, d=PRESENCE, tot=0, want=False, ev=3),
    "origin_leases": ann(0, tot=40) + ann(1, tot=40) +
                     msg(HAVE, 0, {"d": D, "c": 3}) +
                     msg(RENEW, 0, {"d": D, "c": [0, 1], "done": [2]}) +
                     msg(RELEASE, 1, {"d": D, "c": [8], "done": []}) +
                     op(TICK, 4) + op(TTL) + op(TICK, 1) + ann(0, tot=40),
    "delta_uri": ann(0, tot=10, uri="s3://b/m/sha256-" + "ab" * 32 + "/") +
                 ann(0, tot=10, hd=[1, 2, 9], sz=1000, s3=10, pb=20,
                     err="x"),
    "stuck": ann(1, tot=16, role=0, have=b"\x0f\x00") +
             ann(0, tot=16, hd=[0]) + ann(0, tot=16, st=[1, 2, 3, 15]) +
             op(TTL) + ann(0, tot=16, st=[1]),
    "mismatch_total": ann(0, tot=16) + ann(1, tot=17) + ann(1, tot=0),
    "reconnect": op(CONNECT, 2) + ann(2) + op(DISCONNECT, 2) + ann(2) +
                 op(CONNECT, 2) + ann(2, role=1, have=b"\xff\xff") +
                 op(DISCONNECT, 0) + op(DISCONNECT, 1),
    "many_swarms": b"".join(ann(i % 2, d=bytes([i]) * 32, tot=i + 1)
                            for i in range(20)),
    "bad_bodies": msg(ANN, 0, b"\x80") + msg(ANN, 0, b"\xdf\xff\xff") +
                  msg(HAVE, 0, {"d": D}) + msg(RENEW, 0, {"c": [1]}) +
                  ann(0, tot=8, have=b"\x00\x00"),
    "truncated": ann(0)[:-4],
    # A full-bitfield claim nobody confirms stops counting after the grace
    # (ticks of 3 s), its chunks are leased; a HAVE "f" naming it from
    # another address (peer 1 is at its own address) counts it again, one
    # from the same address (peer 2) does not.
    "liar_claims": ann(1, role=1, have=b"\xff\xff") + ann(0, hd=[0]) +
                   op(TICK, 6) + op(TICK, 6) + ann(0) +
                   msg(HAVE, 0, {"d": D, "c": 1, "f": "node-1"}) +
                   op(CONNECT, 2) + ann(2) +
                   msg(HAVE, 2, {"d": D, "c": 2, "f": "node-0"}) +
                   op(TICK, 30) + ann(0, have=b"\x00\x00") + op(TICK, 2),
    # A wrong chunk count is a swarm of its own: the right one joins.
    "squat_tot": ann(1, tot=1, role=1, have=b"\x80") + ann(0, tot=16) +
                 op(CONNECT, 2) + ann(2, tot=16) + ann(1, tot=16) +
                 msg(HAVE, 0, {"d": D, "c": 0, "f": "node-2"}) +
                 ann(3, tot=0),
}

if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")
