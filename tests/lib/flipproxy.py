"""A TCP proxy in front of the S3 server that corrupts exactly one byte of
one ranged (206) response body (unless flip_at is None) and can slow every
response down to rate bytes per second per connection; otherwise it
forwards faithfully.

Used to prove that a chunk whose bytes were altered in flight is refetched
and that nothing corrupt is published, and to watch a chunk while it is
still arriving, and to count what S3 sent (.body_bytes: response body bytes
forwarded). Runs in threads; .flipped tells whether it has struck yet.
"""
import re
import socket
import threading
import time


class FlipProxy:
    def __init__(self, upstream_host, upstream_port, flip_at=4096, rate=None):
        self.up = (upstream_host, upstream_port)
        self.flip_at = flip_at
        self.rate = rate
        self.flipped = 0
        self.body_bytes = 0  # response body bytes forwarded (all responses)
        self.lock = threading.Lock()
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.up)
            except OSError:
                c.close()
                continue
            threading.Thread(target=self._pipe, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, True), daemon=True).start()

    def _pipe(self, src, dst, downstream):
        """Forwards src to dst. Downstream (server to client) it follows the
        HTTP/1.1 response framing (Content-Length bodies, keep-alive) so it
        knows where each body is, and flips one bit in the first 206 body
        long enough to have a byte at flip_at."""
        head = b""
        body_left = 0
        body_pos = 0
        is_206 = False
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if not downstream:
                    dst.sendall(data)
                    continue
                out = bytearray()
                while data:
                    if body_left == 0:
                        head += data
                        end = head.find(b"\r\n\r\n")
                        if end < 0:
                            data = b""
                            continue
                        hdr, data = head[:end + 4], head[end + 4:]
                        head = b""
                        out += hdr
                        is_206 = hdr.startswith(b"HTTP/1.1 206")
                        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", hdr)
                        body_left = int(m.group(1)) if m else 0
                        body_pos = 0
                        continue
                    n = min(body_left, len(data))
                    piece = bytearray(data[:n])
                    pos = self.flip_at - body_pos if self.flip_at is not None else -1
                    if is_206 and 0 <= pos < n:
                        with self.lock:
                            if not self.flipped:
                                piece[pos] ^= 0x01
                                self.flipped = 1
                    out += piece
                    with self.lock:
                        self.body_bytes += n
                    body_pos += n
                    body_left -= n
                    data = data[n:]
                if out:
                    dst.sendall(bytes(out))
                    if self.rate:
                        time.sleep(len(out) / self.rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self):
        self.stopped = True
        self.ls.close()
