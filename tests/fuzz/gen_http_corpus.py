#!/usr/bin/python3
"""Writes the seed corpus for fuzz_trk_http into corpus/trk_http/: raw
requests to the tracker's HTTP server, valid ones for every route plus the
shapes the parser must refuse. Deterministic: ./gen_http_corpus.py"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DIG = "sha256-" + "ab" * 32
URI = "s3://bucket/models/m/" + DIG + "/"


def req(method, path, body=None, headers=(), ver="1.1"):
    h = [f"{method} {path} HTTP/{ver}", "Host: x"] + list(headers)
    b = b""
    if body is not None:
        b = body if isinstance(body, bytes) else json.dumps(body).encode()
        h.append(f"Content-Length: {len(b)}")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + b


TRK = {
    "get_root": req("GET", "/"),
    "get_vendor": req("GET", "/vendor/uPlot.iife.min.js"),
    "get_vendor_bad": req("GET", "/vendor/../etc/passwd"),
    "healthz": req("GET", "/healthz"),
    "metrics": req("GET", "/metrics"),
    "swarms": req("GET", "/api/v1/swarms?x=1&y=%41"),
    "swarm_one": req("GET", "/api/v1/swarms/" + DIG),
    "swarm_bad": req("GET", "/api/v1/swarms/sha256-zz"),
    "prefetch_list": req("GET", "/api/v1/prefetch"),
    "prefetch_digest": req("POST", "/api/v1/prefetch", {"digest": DIG}),
    "prefetch_uri_sel": req("POST", "/api/v1/prefetch", {
        "uri": URI, "selector": {"labels": {"gpu": "h100"},
                                 "zones": ["z", "y"], "count": 2,
                                 "percent": 50}}),
    "prefetch_bad_json": req("POST", "/api/v1/prefetch", b"{\"uri\": [1,"),
    "prefetch_not_obj": req("POST", "/api/v1/prefetch", b"[1, 2, 3]"),
    "prefetch_then_delete": req("POST", "/api/v1/prefetch", {"uri": URI}) +
                            req("DELETE", "/api/v1/prefetch/" + DIG) +
                            req("GET", "/api/v1/prefetch"),
    "chunked": b"POST /api/v1/prefetch HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n"
               b"5\r\n{\"dig\r\n4c\r\nest\": \"" + DIG.encode() +
               b"\"}\r\n0\r\n\r\n",
    "pipelined_keepalive": req("GET", "/healthz") + req("GET", "/metrics") +
                           req("GET", "/nope", headers=["Connection: close"]),
    "http10": req("GET", "/healthz", ver="1.0"),
    "method_not_allowed": req("PUT", "/api/v1/prefetch", b"{}"),
    "garbage": b"\x00\xff GET / HTTP/9.9\r\n\r\n",
    "body_too_big": req("POST", "/api/v1/prefetch",
                        headers=["Content-Length: 99999999"]),
    "many_headers": req("GET", "/healthz",
                        headers=[f"X-H{i}: {i}" for i in range(40)]),
}

if __name__ == "__main__":
    out = os.path.join(HERE, "corpus", "trk_http")
    os.makedirs(out, exist_ok=True)
    for name, data in TRK.items():
        with open(os.path.join(out, name + ".http"), "wb") as f:
            f.write(data)
    print(f"wrote {len(TRK)} seeds to {out}")
