"""An independent Python implementation of the weightswarm wire protocol
(docs/protocol.md): frames, the HELLO/AUTH handshake with the cluster key,
per-frame MACs, sealed (AES-256-GCM) payloads. Used by the fault tests to play hostile or broken peers:
a client without the key, a peer that announces and then never answers;
and by the swarm tests to serve a p2pd by hand. Conn dials (the initiator);
Conn.accepted(...).respond() answers a p2pd that dialled us.
"""
import hashlib
import hmac
import os
import socket
import struct

import msgpack
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HDR = struct.Struct(">2sBBB3xII")
T = dict(HELLO=1, AUTH=2, ERROR=3, GOODBYE=4, ANNOUNCE=16, ANNOUNCE_REPLY=17,
         LEASE_RENEW=18, LEASE_RELEASE=19, HAVE=32, BITFIELD=33, REQUEST=34,
         CANCEL=35, CHUNK=36, REJECT=37, MANIFEST_REQ=38, MANIFEST=39)
NAMES = {v: k for k, v in T.items()}


def kdf(key, subkey_id, ctx=b"wswarm01"):
    return hashlib.blake2b(b"", digest_size=32, key=key,
                           salt=struct.pack("<Q", subkey_id) + bytes(8),
                           person=ctx + bytes(8)).digest()


def mac(key, msg):
    return hmac.new(key, msg, hashlib.sha512).digest()[:32]


SEALED = 0x02  # frame flag: the payload is AES-256-GCM, a 16-byte tag follows
TAG = 16


def payload_iv(seq):
    return bytes(4) + struct.pack(">Q", seq)


def frame(type_, body, flags=0, payload_len=0):
    b = msgpack.packb(body, use_bin_type=True)
    return HDR.pack(b"WS", 1, type_, flags, len(b), payload_len) + b


class Closed(Exception):
    pass


class Conn:
    """A blocking client connection. handshake() with any key (the right
    one, or a wrong one to play an outsider). version 2 (the default) seals
    payloads when the other side speaks 2 too; 1 plays an older peer.
    source: a local address to connect from (e.g. "127.0.0.2", to play a
    node on another host)."""

    def __init__(self, host, port, key, node_id="pytest", listen_port=0, timeout=10,
                 version=2, source=None, rcvbuf=None):
        self.s = socket.socket()
        if rcvbuf is not None:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source:
            self.s.bind((source, 0))
        self.s.settimeout(timeout)
        self.s.connect((host, port))
        self._start(key, node_id, listen_port, version)

    def _start(self, key, node_id, listen_port, version):
        self.key = key
        self.id = node_id
        self.listen_port = listen_port
        self.version = version
        self.sealed = False  # both HELLOs said v >= 2
        self.p_tx = self.p_rx = None
        self.buf = b""
        self.k_tx = self.k_rx = None
        self.seq_tx = self.seq_rx = 0
        self.payload_bytes = 0  # raw payload bytes received (CHUNK/MANIFEST)

    def _session(self, h_i, h_r, sk, their_v, initiator):
        """The session's MAC keys (and payload keys when both speak 2)."""
        def k(label):
            return hashlib.blake2b(label + h_i + h_r, digest_size=32, key=sk).digest()
        mine, theirs = (b"i2r", b"r2i") if initiator else (b"r2i", b"i2r")
        self.k_tx, self.k_rx = k(b"ws-" + mine), k(b"ws-" + theirs)
        self.sealed = min(self.version, their_v) >= 2
        if self.sealed:
            self.p_tx, self.p_rx = k(b"ws-p" + mine), k(b"ws-p" + theirs)

    def _read(self, n):
        while len(self.buf) < n:
            d = self.s.recv(65536)
            if not d:
                raise Closed()
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_frame(self):
        """Returns (type, body dict, payload bytes). Verifies the MAC after
        the handshake."""
        hdr = self._read(16)
        magic, ver, type_, flags, blen, plen = HDR.unpack(hdr)
        if magic != b"WS":
            raise ValueError("bad magic")
        body = self._read(blen)
        seq = self.seq_rx
        if flags & 1:
            m = self._read(32)
            if self.k_rx is not None:
                want = mac(self.k_rx, struct.pack(">Q", self.seq_rx) + hdr + body)
                if not hmac.compare_digest(m, want):
                    raise ValueError("bad MAC from the other side")
                self.seq_rx += 1
        payload = self._read(plen) if plen else b""
        if plen and flags & SEALED:
            tag = self._read(TAG)
            payload = AESGCM(self.p_rx).decrypt(payload_iv(seq), payload + tag, hdr)
        self.payload_bytes += plen
        return type_, msgpack.unpackb(body, raw=False, strict_map_key=False), payload

    def header(self, type_, body, plen):
        """A frame for this session (MAC flag, and SEALED when it carries a
        payload in a sealed session), without its MAC."""
        return frame(type_, body, flags=1 | (SEALED if self.sealed and plen else 0),
                     payload_len=plen)

    def send_header(self, type_, body, plen):
        """A frame announcing a payload of plen bytes, none of which is sent
        (the caller sends them, or not, raw on self.s)."""
        f = self.header(type_, body, plen)
        self.s.sendall(f + mac(self.k_tx, struct.pack(">Q", self.seq_tx) + f))
        self.seq_tx += 1

    def send(self, type_, body, payload=b"", tamper=None):
        """Sends one frame; payload (CHUNK, MANIFEST) follows the MAC, sealed
        when the session is. tamper(bytes) -> bytes, if given, alters the
        payload as it would leave (sealed: the ciphertext), playing someone
        on the path."""
        if self.k_tx is None:
            self.s.sendall(frame(type_, body, payload_len=len(payload)) + payload)
            return
        seal = self.sealed and len(payload) > 0
        f = self.header(type_, body, len(payload))
        if seal:
            payload = AESGCM(self.p_tx).encrypt(payload_iv(self.seq_tx), payload, f[:16])
        if tamper is not None:
            payload = tamper(payload)
        self.s.sendall(f + mac(self.k_tx, struct.pack(">Q", self.seq_tx) + f) + payload)
        self.seq_tx += 1

    def _hello(self, role):
        return frame(T["HELLO"], {"v": self.version, "n": os.urandom(32), "id": self.id,
                                  "port": self.listen_port, "role": role, "zone": ""})

    def _read_hello(self):
        """The other side's HELLO: (its bytes, its version), or (None, 0)
        when the frame is something else."""
        hdr = self._read(16)
        _, _, type_, _, blen, _ = HDR.unpack(hdr)
        body = self._read(blen)
        if type_ != T["HELLO"]:
            return None, 0
        return hdr + body, msgpack.unpackb(body, raw=False).get("v", 1)

    def handshake(self, role=0):
        """Runs the initiator side. Returns True when both AUTHs checked;
        False when the other side closed (as it must for a wrong key)."""
        hello = self._hello(role)
        self.s.sendall(hello)
        try:
            theirs, their_v = self._read_hello()
            if theirs is None:
                return False
            h_i = hashlib.blake2b(hello, digest_size=32).digest()
            h_r = hashlib.blake2b(theirs, digest_size=32).digest()
            ak, sk = kdf(self.key, 1), kdf(self.key, 2)
            self.s.sendall(frame(T["AUTH"], {"mac": mac(ak, b"ws-auth-i" + h_i + h_r)}))
            t, b, _ = self.read_frame()
            if t != T["AUTH"] or not hmac.compare_digest(
                    b["mac"], mac(ak, b"ws-auth-r" + h_i + h_r)):
                return False
        except (Closed, ConnectionError, socket.timeout):
            return False
        self._session(h_i, h_r, sk, their_v, True)
        return True

    @classmethod
    def accepted(cls, sock, key, node_id="pytest", listen_port=0, timeout=10, version=2):
        """The responder's end of a connection another party dialled (sock,
        from accept()); respond() runs its handshake."""
        c = cls.__new__(cls)
        c.s = sock
        c.s.settimeout(timeout)
        c._start(key, node_id, listen_port, version)
        return c

    def respond(self, role=0):
        """Runs the responder side: the initiator's HELLO, ours, its AUTH
        checked, ours. True when it checked; False otherwise."""
        hello = self._hello(role)
        try:
            theirs, their_v = self._read_hello()
            if theirs is None:
                return False
            self.s.sendall(hello)
            h_i = hashlib.blake2b(theirs, digest_size=32).digest()
            h_r = hashlib.blake2b(hello, digest_size=32).digest()
            ak, sk = kdf(self.key, 1), kdf(self.key, 2)
            t, b, _ = self.read_frame()
            if t != T["AUTH"] or not hmac.compare_digest(
                    b["mac"], mac(ak, b"ws-auth-i" + h_i + h_r)):
                return False
            self.s.sendall(frame(T["AUTH"], {"mac": mac(ak, b"ws-auth-r" + h_i + h_r)}))
        except (Closed, ConnectionError, socket.timeout, ValueError):
            return False
        self._session(h_i, h_r, sk, their_v, False)
        return True

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def read_key(path):
    with open(path) as f:
        return bytes.fromhex(f.read().strip())
