#!/usr/bin/python3
"""Writes the seed corpus for fuzz_p2pd_http into corpus/p2pd_http/: one
byte choosing the way in (0: the --http TCP listener, which wants the
bearer token for all but GETs; 1: the unix socket, no token), then raw
requests to p2pd's API. Every route with valid and refused arguments, on
the harness's releases A (READY, pinned), B (READY, unpinned) and C
(FAILED); token variants; chunked and pipelined bodies; the shapes the
parser must refuse. Deterministic: ./gen_p2pd_http_corpus.py"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "fuzz-token-0123456789abcdef"  # FUZZ_TOKEN in fuzz_p2pd_http.c
A = "sha256-f112094c346b58ca889b5214917bab302ddeff4d431701879e41d713e10cb91e"
B = "sha256-f6ca427bdf62fd9cfdccd6c0b5441dd657ba2e0f268b3d192aa36d0c623b811a"
C = "sha256-" + "cc" * 32
UNKNOWN = "sha256-" + "ab" * 32
URI_C = "s3://fuzz-bucket/models/c/"
URI = "s3://fuzz-bucket/models/m/" + UNKNOWN + "/"
REL = "/api/v1/releases/"
TCP, UNIX = b"\x00", b"\x01"
AUTH = "Authorization: Bearer " + TOKEN


def req(method, path, body=None, headers=(), ver="1.1", auth=True):
    h = [f"{method} {path} HTTP/{ver}", "Host: p2pd"] + list(headers)
    if auth:
        h.append(AUTH)
    b = b""
    if body is not None:
        b = body if isinstance(body, bytes) else json.dumps(body).encode()
        h.append("Content-Type: application/json")
        h.append(f"Content-Length: {len(b)}")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + b


# Requests with the token; written for both ways in.
BOTH = {
    "healthz": req("GET", "/healthz"),
    "readyz": req("GET", "/readyz"),
    "metrics": req("GET", "/metrics"),
    "list": req("GET", "/api/v1/releases"),
    "list_query": req("GET", "/api/v1/releases?x=1&y=%41%zz"),
    "status_a": req("GET", REL + A),
    "status_c": req("GET", REL + C),
    "status_unknown": req("GET", REL + UNKNOWN),
    "status_bad_digest": req("GET", REL + "sha256-" + "zz" * 32),
    "status_short": req("GET", REL + "sha256-abc"),
    "status_empty": req("GET", REL),
    "prefetch_uri": req("POST", "/api/v1/prefetch", {"uri": URI}),
    "prefetch_uri_digest": req("POST", "/api/v1/prefetch",
                               {"uri": URI, "digest": UNKNOWN}),
    "prefetch_ready_digest": req("POST", "/api/v1/prefetch", {"digest": A}),
    "prefetch_ready_both": req("POST", "/api/v1/prefetch",
                               {"uri": URI, "digest": B}),
    "prefetch_failed_again": req("POST", "/api/v1/prefetch",
                                 {"uri": URI_C, "digest": C}),
    "prefetch_digest_only": req("POST", "/api/v1/prefetch",
                                {"digest": UNKNOWN}),
    "prefetch_legacy_uri": req("POST", "/api/v1/prefetch",
                               {"uri": "s3://fuzz-bucket/models/m/v1/"}),
    "prefetch_tag": req("POST", "/api/v1/prefetch",
                        {"uri": "s3://fuzz-bucket/models/m/:latest"}),
    "prefetch_tag_bad": req("POST", "/api/v1/prefetch",
                            {"uri": "s3://x/:"}),
    "prefetch_not_s3": req("POST", "/api/v1/prefetch",
                           {"uri": "http://example.com/m/"}),
    "prefetch_nulls": req("POST", "/api/v1/prefetch",
                          {"uri": None, "digest": None}),
    # Regression (found by this target): CR LF in a URI or path reached
    # the log and forged lines ("release s3://...\r\nHost: ...: failed");
    # ws_log now writes control bytes as \xNN (tests/unit/common/test_log.c).
    "prefetch_uri_crlf": req("POST", "/api/v1/prefetch", {
        "uri": "s3://fuzz-bucket/m/x\r\n2026-01-01T00:00:00.000Z p2pd "
               "error: forged\x1b[31m/"}),
    "seed_dir_crlf": req("POST", "/api/v1/seed",
                         {"dir": "/x\r\nforged", "manifest": "/m\n.json"}),
    "prefetch_empty": req("POST", "/api/v1/prefetch", {}),
    "prefetch_types": req("POST", "/api/v1/prefetch",
                          {"uri": 5, "digest": [A]}),
    "prefetch_bad_hex": req("POST", "/api/v1/prefetch",
                            {"digest": "sha256-xyz"}),
    "prefetch_bad_json": req("POST", "/api/v1/prefetch", b"{\"uri\": [1,"),
    "prefetch_not_obj": req("POST", "/api/v1/prefetch", b"[1, 2, 3]"),
    "prefetch_no_body": req("POST", "/api/v1/prefetch"),
    "prefetch_long_uri": req("POST", "/api/v1/prefetch",
                             {"uri": "s3://fuzz-bucket/" + "k" * 2000}),
    "prefetch_chunked": b"POST /api/v1/prefetch HTTP/1.1\r\nHost: p2pd\r\n" +
                        AUTH.encode() + b"\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n"
                        b"5\r\n{\"dig\r\n4c\r\nest\": \"" + A.encode() +
                        b"\"}\r\n0\r\n\r\n",
    "seed_pin_a": req("POST", "/api/v1/seed", {"digest": A}),
    "seed_pin_b": req("POST", "/api/v1/seed", {"digest": B}),
    "seed_pin_c": req("POST", "/api/v1/seed", {"digest": C}),
    "seed_pin_unknown": req("POST", "/api/v1/seed", {"digest": UNKNOWN}),
    "seed_pin_bad": req("POST", "/api/v1/seed", {"digest": "sha256-1"}),
    "seed_dir_missing": req("POST", "/api/v1/seed",
                            {"dir": "/nonexistent/m",
                             "manifest": "/nonexistent/m.json"}),
    "seed_dir_s3": req("POST", "/api/v1/seed",
                       {"dir": "/nonexistent/m", "manifest": URI_C}),
    "seed_not_manifest": req("POST", "/api/v1/seed",
                             {"dir": "/", "manifest": "/dev/null"}),
    "seed_relative": req("POST", "/api/v1/seed",
                         {"dir": "m", "manifest": "m.json"}),
    "seed_empty": req("POST", "/api/v1/seed", {}),
    "wait_a": req("GET", REL + A + "/wait"),
    "wait_timeout": req("GET", REL + A + "/wait?timeout_ms=50"),
    "wait_failed": req("GET", REL + C + "/wait?timeout_ms=99999999999999"),
    "wait_bad_timeout": req("GET", REL + A + "/wait?timeout_ms=-1"),
    "wait_bad_timeout2": req("GET", REL + A + "/wait?timeout_ms=1x"),
    "pin_b": req("POST", REL + B + "/pin"),
    "pin_c": req("POST", REL + C + "/pin"),
    "unpin_a": req("POST", REL + A + "/unpin"),
    "verify_a": req("POST", REL + A + "/verify"),
    "verify_c": req("POST", REL + C + "/verify"),
    "evict_a_pinned": req("DELETE", REL + A),
    "evict_b": req("DELETE", REL + B),
    "evict_c_failed": req("DELETE", REL + C),
    "evict_unknown": req("DELETE", REL + UNKNOWN),
    "hold_a": req("POST", REL + A + "/holds/job-1"),
    "hold_ttl": req("POST", REL + B + "/holds/ci@host:1?ttl_s=60"),
    "hold_ttl_bad": req("POST", REL + B + "/holds/x?ttl_s=99999999999"),
    "hold_name_bad": req("POST", REL + A + "/holds/.hidden"),
    "hold_name_long": req("POST", REL + A + "/holds/" + "h" * 70),
    "hold_failed": req("POST", REL + C + "/holds/job-1"),
    "hold_release_missing": req("DELETE", REL + A + "/holds/none"),
    "hold_get": req("GET", REL + A + "/holds/job-1"),
    "action_unknown": req("POST", REL + A + "/frobnicate"),
    "action_wrong_method": req("GET", REL + A + "/pin"),
    "route_unknown": req("GET", "/api/v2/nothing"),
    "method_not_allowed": req("PUT", "/api/v1/prefetch", b"{}"),
    "head_healthz": req("HEAD", "/healthz"),
    # Sequences on one connection (keep-alive).
    "hold_then_evict": req("POST", REL + B + "/holds/keep") +
                       req("DELETE", REL + B) +
                       req("DELETE", REL + B + "/holds/keep") +
                       req("DELETE", REL + B),
    "unpin_evict_a": req("POST", REL + A + "/unpin") + req("DELETE", REL + A) +
                     req("GET", "/api/v1/releases"),
    "evict_then_prefetch": req("DELETE", REL + B) +
                           req("POST", "/api/v1/prefetch", {"digest": B}),
    "prefetch_then_wait": req("POST", "/api/v1/prefetch", {"uri": URI}) +
                          req("GET", REL + UNKNOWN + "/wait?timeout_ms=100") +
                          req("DELETE", REL + UNKNOWN),
    "pipelined_close": req("GET", "/healthz") + req("GET", "/metrics") +
                       req("GET", "/readyz", headers=["Connection: close"]) +
                       req("GET", "/api/v1/releases"),
    "expect_continue": req("POST", REL + A + "/holds/x", b"",
                           headers=["Expect: 100-continue"]),
    "http10": req("GET", "/healthz", ver="1.0"),
    "body_too_big": req("POST", "/api/v1/prefetch",
                        headers=["Content-Length: 99999999"]),
    "many_headers": req("GET", "/healthz",
                        headers=[f"X-H{i}: {i}" for i in range(40)]),
    "garbage": b"\x00\xff GET / HTTP/9.9\r\n\r\n",
    "partial": b"POST /api/v1/prefetch HTTP/1.1\r\nHost: p2pd\r\nContent-Le",
}

# The token check on TCP.
TCP_ONLY = {
    "auth_none_post": req("POST", REL + B + "/pin", auth=False),
    "auth_none_get": req("GET", "/api/v1/releases", auth=False),
    "auth_none_probe": req("GET", "/readyz", auth=False),
    "auth_wrong": req("POST", REL + B + "/pin", auth=False,
                      headers=["Authorization: Bearer " + TOKEN[:-1] + "x"]),
    "auth_short": req("DELETE", REL + B, auth=False,
                      headers=["Authorization: Bearer " + TOKEN[:5]]),
    "auth_long": req("DELETE", REL + B, auth=False,
                     headers=["Authorization: Bearer " + TOKEN + "0"]),
    "auth_lowercase": req("POST", "/api/v1/prefetch", {"digest": A},
                          auth=False,
                          headers=["authorization: bearer   " + TOKEN]),
    "auth_basic": req("POST", "/api/v1/prefetch", {"digest": A}, auth=False,
                      headers=["Authorization: Basic Zm9vOmJhcg=="]),
    "auth_empty": req("POST", "/api/v1/seed", {"digest": A}, auth=False,
                      headers=["Authorization: Bearer "]),
    "auth_twice": req("POST", REL + A + "/holds/h", auth=False,
                      headers=["Authorization: Bearer wrong", AUTH]),
    "auth_wrong_probe": req("GET", "/healthz", auth=False,
                            headers=["Authorization: Bearer wrong"]),
}

if __name__ == "__main__":
    out = os.path.join(HERE, "corpus", "p2pd_http")
    os.makedirs(out, exist_ok=True)
    n = 0
    for name, data in BOTH.items():
        for way, prefix in (("tcp", TCP), ("unix", UNIX)):
            with open(os.path.join(out, f"{way}_{name}.http"), "wb") as f:
                f.write(prefix + data)
            n += 1
    for name, data in TCP_ONLY.items():
        with open(os.path.join(out, f"tcp_{name}.http"), "wb") as f:
            f.write(TCP + data)
        n += 1
    print(f"wrote {n} seeds to {out}")
