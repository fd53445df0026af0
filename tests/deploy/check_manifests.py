#!/usr/bin/python3
"""Static checks of deploy/ (there is no cluster to apply them to).

Prints TAP. For every Kubernetes object: well-formed identity; every
volumeMount has its volume; probe and Service port names exist; Service
selectors match a workload; and every flag a container passes to p2pd,
p2p-tracker or p2pctl is one the built binary accepts (from its --help), so
the manifests cannot drift from the code. systemd units get the same flag
check.
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


def flags_of(prog, sub=None):
    key = (prog, sub)
    if key not in _help:
        argv = [os.path.join(build, BINS[prog])] + ([sub] if sub else []) + ["--help"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        _help[key] = set(re.findall(r"--[a-z][a-z0-9-]*", r.stdout + r.stderr))
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


objs = []
for path in sorted(glob.glob(os.path.join(src, "deploy", "k8s", "**", "*.yaml"), recursive=True)):
    rel = os.path.relpath(path, src)
    try:
        docs = [d for d in yaml.safe_load_all(open(path)) if d]
        check(True, f"{rel} parses")
    except yaml.YAMLError as e:
        check(False, f"{rel} parses: {e}")
        continue
    for d in docs:
        objs.append((rel, d))

pods = []
for rel, d in objs:
    kind, meta = d.get("kind"), d.get("metadata", {})
    name = meta.get("name")
    check(bool(d.get("apiVersion")) and bool(kind) and bool(name), f"{rel}: {kind}/{name} has identity")
    if kind != "Namespace":
        check(bool(meta.get("namespace")), f"{rel}: {kind}/{name} is namespaced")
    tmpl = None
    if kind in ("Deployment", "DaemonSet", "StatefulSet"):
        tmpl = d["spec"]["template"]
        sel = d["spec"]["selector"]["matchLabels"]
        labels = tmpl["metadata"]["labels"]
        check(all(labels.get(k) == v for k, v in sel.items()), f"{rel}: {name} selector matches its pods")
    elif kind == "Job":
        tmpl = d["spec"]["template"]
    if tmpl is None:
        continue
    spec = tmpl["spec"]
    vols = {v["name"] for v in spec.get("volumes", [])}
    pods.append((rel, tmpl))
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        where = f"{rel}: {name}/{c['name']}"
        for m in c.get("volumeMounts", []):
            check(m["name"] in vols, f"{where}: volume {m['name']} defined")
        ports = {p.get("name") for p in c.get("ports", [])}
        for pr in ("readinessProbe", "livenessProbe", "startupProbe"):
            p = c.get(pr)
            if p and "httpGet" in p and isinstance(p["httpGet"]["port"], str):
                check(p["httpGet"]["port"] in ports, f"{where}: {pr} port named")
            if p and "exec" in p:
                cmd = p["exec"]["command"]
                check_flags(os.path.basename(cmd[0]), cmd[1:], f"{where} {pr}")
        cmd = c.get("command", [])
        if cmd:
            check_flags(os.path.basename(cmd[0]), cmd[1:] + c.get("args", []), where)
        for a in c.get("args", []) + cmd:
            for dg in re.findall(r"sha256-([0-9a-zA-Z]*)", a):
                check(re.fullmatch(r"[0-9a-f]{64}", dg) is not None, f"{where}: digest well-formed")

for rel, d in objs:
    if d.get("kind") != "Service":
        continue
    sel = d["spec"]["selector"]
    match = [t for _, t in pods if all(t.get("metadata", {}).get("labels", {}).get(k) == v for k, v in sel.items())]
    check(len(match) > 0, f"{rel}: service {d['metadata']['name']} selects a workload")
    for p in d["spec"]["ports"]:
        tp = p.get("targetPort")
        if isinstance(tp, str) and match:
            names = {cp.get("name") for t in match for c in t["spec"]["containers"] for cp in c.get("ports", [])}
            check(tp in names, f"{rel}: targetPort {tp} exists")

for path in sorted(glob.glob(os.path.join(src, "deploy", "systemd", "*.service"))):
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
    exported |= set(re.findall(r'"((?:ws_p2pd|p2p_tracker)_[a-z0-9_]+)"', open(f).read()))
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
            for m in set(re.findall(r"\b((?:ws_p2pd|p2p_tracker)_[a-z0-9_]+)", t["expr"])):
                check(m in exported, f"{rel}: '{panel['title']}' uses exported {m}")

print(f"1..{n}")
sys.exit(1 if bad else 0)
