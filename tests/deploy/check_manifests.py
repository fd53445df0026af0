#!/usr/bin/python3
"""Static checks of deploy/ (there is no cluster to apply them to).

Prints TAP. deploy/k8s: every overlay and the examples are rendered with
`kubectl kustomize` and the output validated offline (k8s_checks.py: fields,
selectors, probes and monitors against ports, references, images,
placeholders); every flag a container passes to p2pd, p2p-tracker or p2pctl
is one the built binary accepts (from its --help), so the manifests cannot
drift from the code. systemd units get the same flag check.
Usage: check_manifests.py SOURCE_ROOT BUILD_ROOT
"""
import glob
import json
import os
import re
import subprocess
import sys

import yaml

src, build = sys.argv[1], sys.argv[2]
BINS = {"p2pd": "peer/p2pd", "p2p-tracker": "tracker/p2p-tracker", "p2pctl": "tools/p2pctl"}
n = 0
bad = 0


def check(ok, what):
    global n, bad
    n += 1
    print(("ok" if ok else "not ok"), n, "-", what)
    if not ok:
        bad += 1


_help = {}
_env = {}


def flags_of(prog, sub=None):
    key = (prog, sub)
    if key not in _help:
        argv = [os.path.join(build, BINS[prog])] + ([sub] if sub else []) + ["--help"]
        if not os.path.exists(argv[0]):
            check(False, f"{argv[0]} is built")
            _help[key] = set()
            return _help[key]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        _help[key] = set(re.findall(r"--[a-z][a-z0-9-]*", r.stdout + r.stderr))
        if sub is None:
            _env[prog] = set(re.findall(r"\benv (P2P_[A-Z0-9_]+)", r.stdout + r.stderr))
    return _help[key]


def check_flags(prog, args, where):
    if prog not in BINS:
        return
    known = flags_of(prog)
    if prog == "p2pctl":
        # p2pctl [--api SOCKET] SUBCOMMAND ARGS: subcommand flags come from
        # "p2pctl SUBCOMMAND --help".
        rest = list(args)
        while rest and rest[0].startswith("--"):
            rest = rest[(1 if "=" in rest[0] else 2):]
        if rest:
            known = known | flags_of(prog, rest[0])
    for a in args:
        if a.startswith("--"):
            f = a.split("=", 1)[0]
            check(f in known, f"{where}: {prog} accepts {f}")


def env_names(prog):
    """The environment variables prog's --help lists ("env P2P_X")."""
    flags_of(prog)
    return _env.get(prog, set())


# Kubernetes: render every overlay and the examples, validate offline.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_checks  # noqa: E402

_version = re.search(r"version:\s*'([^']+)'", open(os.path.join(src, "meson.build")).read()).group(1)
k8s_checks.run(src, check, check_flags, env_names, _version)

for path in sorted(glob.glob(os.path.join(src, "deploy", "systemd", "*.service.in"))):
    rel = os.path.relpath(path, src)
    text = open(path).read()
    m = re.search(r"^ExecStart=(\S+)(.*)$", text, re.M)
    check(m is not None, f"{rel}: has ExecStart")
    if m:
        check_flags(os.path.basename(m.group(1)), m.group(2).split(), rel)
    if "p2pd" in os.path.basename(path):
        check(re.search(r"^Type=notify$", text, re.M) is not None, f"{rel}: Type=notify")

# Dashboards may only chart metrics the daemons export.
exported = set()
for f in glob.glob(os.path.join(src, "peer", "*.c")) + glob.glob(os.path.join(src, "tracker", "*.c")):
    exported |= set(re.findall(r'"(weightswarm_(?:p2pd|tracker)_[a-z0-9_]+)"', open(f).read()))
for path in sorted(glob.glob(os.path.join(src, "deploy", "dashboards", "*.json"))):
    rel = os.path.relpath(path, src)
    try:
        dash = json.load(open(path))
        check(True, f"{rel} parses")
    except ValueError as e:
        check(False, f"{rel} parses: {e}")
        continue
    for panel in dash.get("panels", []):
        for t in panel.get("targets", []):
            for m in set(re.findall(r"\b(weightswarm_(?:p2pd|tracker)_[a-z0-9_]+)", t["expr"])):
                # a histogram's series are its name + _bucket, _sum, _count
                m = re.sub(r"_(bucket|sum|count)$", "", m) if m not in exported else m
                check(m in exported, f"{rel}: '{panel['title']}' uses exported {m}")

print(f"1..{n}")
sys.exit(1 if bad else 0)
