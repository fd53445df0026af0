"""A tracker protocol client for tests, written from docs/protocol.md
(python msgpack + hashlib/hmac), independent of the C code: the
initiator side of the handshake and sealed frames. A test passes the
cluster key (32 bytes) and the release digest it announces.
"""
import hashlib
import hmac
import os
import socket
import struct

import msgpack

HDR = struct.Struct(">2sBBB3xII")
T = dict(HELLO=1, AUTH=2, ERROR=3, GOODBYE=4, ANNOUNCE=16, ANNOUNCE_REPLY=17,
         LEASE_RENEW=18, LEASE_RELEASE=19, HAVE=32)


def kdf(key, subkey_id):
    return hashlib.blake2b(b"", digest_size=32, key=key,
                           salt=struct.pack("<Q", subkey_id) + bytes(8),
                           person=b"wswarm01" + bytes(8)).digest()


def mac(key, msg):
    return hmac.new(key, msg, hashlib.sha512).digest()[:32]


def frame(type_, body, flags=0):
    b = msgpack.packb(body, use_bin_type=True)
    return HDR.pack(b"WS", 1, type_, flags, len(b), 0) + b


class Peer:
    """A protocol client: initiator side of the handshake, sealed frames."""

    def __init__(self, port, node_id, key, digest, listen_port=7000, zone=""):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.digest = digest
        self.buf = b""
        self.node_id = node_id
        hello = frame(T["HELLO"], {"v": 1, "n": os.urandom(32), "id": node_id,
                                   "port": listen_port, "role": 0,
                                   "zone": zone})
        self.s.sendall(hello)
        typ, body, (rhdr, rbody, _) = self.read_raw()
        assert typ == T["HELLO"] and body["role"] == 1
        hi = hashlib.blake2b(hello, digest_size=32).digest()
        hr = hashlib.blake2b(rhdr + rbody, digest_size=32).digest()
        ak, sk = kdf(key, 1), kdf(key, 2)
        self.s.sendall(frame(T["AUTH"], {"mac": mac(ak, b"ws-auth-i" + hi + hr)}))
        typ, body, _ = self.read_raw()  # raises EOFError on a wrong key
        assert typ == T["AUTH"]
        assert body["mac"] == mac(ak, b"ws-auth-r" + hi + hr)
        self.tx = hashlib.blake2b(b"ws-i2r" + hi + hr, digest_size=32, key=sk).digest()
        self.rx = hashlib.blake2b(b"ws-r2i" + hi + hr, digest_size=32, key=sk).digest()
        self.txseq = 0
        self.rxseq = 0

    def read_exact(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_raw(self):
        hdr = self.read_exact(HDR.size)
        magic, ver, typ, flags, blen, plen = HDR.unpack(hdr)
        assert magic == b"WS" and ver == 1 and plen == 0
        body = self.read_exact(blen)
        tag = self.read_exact(32) if flags & 1 else None
        return typ, msgpack.unpackb(body, raw=False), (hdr, body, tag)

    def send(self, type_, body):
        b = msgpack.packb(body, use_bin_type=True)
        hdr = HDR.pack(b"WS", 1, type_, 1, len(b), 0)
        tag = mac(self.tx, struct.pack(">Q", self.txseq) + hdr + b)
        self.txseq += 1
        self.s.sendall(hdr + b + tag)

    def recv(self):
        typ, body, (hdr, raw, tag) = self.read_raw()
        assert tag == mac(self.rx, struct.pack(">Q", self.rxseq) + hdr + raw)
        self.rxseq += 1
        return typ, body

    def announce(self, tot=64, **kw):
        body = {"d": self.digest, "tot": tot, "ev": 0, "role": 0, "want": True}
        body.update(kw)
        self.send(T["ANNOUNCE"], body)
        typ, rep = self.recv()
        assert typ == T["ANNOUNCE_REPLY"], rep
        return rep

    def close(self):
        self.s.close()
