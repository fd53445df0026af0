"""An HTTP/1.1 proxy in front of the S3 server that injects faults and
counts what S3 sent.

Unlike flipproxy.py (raw TCP) it follows the request/response framing of
each keep-alive connection, so it knows which object key every response
body belongs to. Faults, switched on and off while it runs:

- stall(seconds, fraction): that fraction of responses sends its head and
  the first 64 KiB of the body, then nothing for `seconds`, then the rest
  (a client with a low-speed timeout gives up first; that is the point);
- fail(fraction): that fraction of requests is answered 503 SlowDown by
  the proxy itself, never reaching S3 (an S3 error body, keep-alive);
- hold(seconds, count): the next `count` GETs get nothing at all, not
  even a status line, for `seconds` (a request the server sits on, or a
  connection stuck in TCP's retransmission backoff), then their answer.

body_bytes[key] counts every response body byte sent to a client for an
object key (the path without the query), complete or cut off; requests,
errors_503, stalled and held count events. Clients sign requests for the
proxy's Host header and the proxy forwards it unchanged, so SigV4 servers
(radosgw) accept them. Runs in daemon threads; close() stops accepting
and cuts every connection.
"""
import random
import re
import socket
import threading
import time

STALL_PREFIX = 64 * 1024
ERR_503 = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
           b"<Message>Please reduce your request rate. (s3fault)</Message></Error>")


class _Closed(Exception):
    pass


def _read_head(sock, buf):
    """Reads up to and including the blank line; returns (head, rest)."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            return buf[:end + 4], buf[end + 4:]
        if len(buf) > 1 << 20:
            raise _Closed()
        data = sock.recv(1 << 16)
        if not data:
            raise _Closed()
        buf += data


def _header(head, name):
    m = re.search(rb"(?im)^" + name.encode() + rb":\s*([^\r\n]*)", head)
    return m.group(1).strip().decode("latin-1") if m else None


class S3Fault:
    def __init__(self, upstream_host, upstream_port, seed=0):
        self.up = (upstream_host, upstream_port)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.stall_s = 0.0
        self.stall_frac = 0.0
        self.fail_frac = 0.0
        self.hold_s = 0.0
        self.hold_left = 0
        self.held = 0
        self.body_bytes = {}
        self.requests = 0
        self.errors_503 = 0
        self.stalled = 0
        self.conns = set()
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(256)
        self.port = self.ls.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    # -- faults ---------------------------------------------------------
    def stall(self, seconds, fraction=1.0):
        with self.lock:
            self.stall_s, self.stall_frac = float(seconds), float(fraction)

    def fail(self, fraction):
        with self.lock:
            self.fail_frac = float(fraction)

    def hold(self, seconds, count=1):
        with self.lock:
            self.hold_s, self.hold_left = float(seconds), int(count)

    def clear(self):
        with self.lock:
            self.stall_s = self.stall_frac = self.fail_frac = 0.0
            self.hold_left = 0

    def snapshot(self):
        with self.lock:
            return dict(self.body_bytes)

    # -- plumbing -------------------------------------------------------
    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _count(self, key, n):
        with self.lock:
            self.body_bytes[key] = self.body_bytes.get(key, 0) + n

    def _serve(self, c):
        u = None
        with self.lock:
            self.conns.add(c)
        try:
            buf = b""
            while not self.stopped:
                head, buf = _read_head(c, buf)
                line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
                if len(line) < 2:
                    break
                method, path = line[0], line[1].split("?", 1)[0]
                n = int(_header(head, "content-length") or 0)
                while len(buf) < n:
                    data = c.recv(1 << 16)
                    if not data:
                        raise _Closed()
                    buf += data
                body, buf = buf[:n], buf[n:]
                with self.lock:
                    self.requests += 1
                    fail = self.fail_frac > 0 and self.rng.random() < self.fail_frac
                    stall = (self.stall_s if self.stall_frac > 0 and
                             self.rng.random() < self.stall_frac else 0.0)
                    hold = 0.0
                    if fail:
                        self.errors_503 += 1
                    elif method == "GET" and self.hold_left > 0:
                        self.hold_left -= 1
                        self.held += 1
                        hold = self.hold_s
                    elif stall:
                        self.stalled += 1
                if fail:
                    c.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                              b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n"
                              % len(ERR_503) + ERR_503)
                    continue
                if hold:
                    time.sleep(hold)
                if u is None:
                    u = socket.create_connection(self.up, timeout=120)
                    with self.lock:
                        self.conns.add(u)
                u.sendall(head + body)
                if not self._relay(u, c, method, path, stall):
                    break
        except (_Closed, OSError, ValueError):
            pass
        finally:
            for s in (c, u):
                if s is None:
                    continue
                with self.lock:
                    self.conns.discard(s)
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _relay(self, u, c, method, path, stall):
        """Forwards one response; returns False when the connection ends."""
        head, rest = _read_head(u, b"")
        status = int(head.split(b" ", 2)[1])
        c.sendall(head)
        te = (_header(head, "transfer-encoding") or "").lower()
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return True
        sent = [0]

        def out(data):
            if stall and sent[0] < STALL_PREFIX <= sent[0] + len(data):
                k = STALL_PREFIX - sent[0]
                c.sendall(data[:k])
                self._count(path, k)
                time.sleep(stall)
                data, sent[0] = data[k:], STALL_PREFIX
            c.sendall(data)
            self._count(path, len(data))
            sent[0] += len(data)

        if "chunked" in te:
            # Relayed raw; counted by what passes (framing included).
            while True:
                if rest.endswith(b"0\r\n\r\n"):
                    out(rest)
                    return True
                out(rest)
                rest = u.recv(1 << 16)
                if not rest:
                    return False
        cl = _header(head, "content-length")
        left = int(cl) if cl is not None else None
        if stall and left is not None and left < STALL_PREFIX:
            time.sleep(stall)  # a small body stalls before its first byte
        while left is None or left > 0:
            data = rest or u.recv(1 << 16)
            rest = b""
            if not data:
                return False
            if left is not None:
                data = data[:left]
                left -= len(data)
            out(data)
        return cl is not None

    def close(self):
        self.stopped = True
        try:
            self.ls.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
