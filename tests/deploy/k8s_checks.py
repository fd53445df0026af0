"""Kubernetes part of check_manifests.py: render deploy/k8s with kustomize and
validate what would be applied, offline.

There is no API server here, and `kubectl apply --dry-run=client` (even with
--validate=false) needs one for API discovery, so the validation is ours:
every overlay (and the examples) is rendered with kustomize (`kubectl
kustomize`, or build-deps/bin/kustomize where tools/bootstrap put one) from a
copy of deploy/k8s into which the per-cluster inputs are written the way
docs/operations.md tells a user to (cluster.key, *.env from *.env.example),
then every rendered object is checked: identity and namespace, the fields
each kind needs, selectors against labels, probes and monitors against
declared ports, every Secret/ConfigMap/ServiceAccount a pod names exists in
the render, images come from the overlay's `images:`, the trackers p2pd is
given are the StatefulSet's pods, no placeholder survives, and every flag
or P2P_* variable is one the built binary accepts. Negative renders show the
checks can fail: an overlay without its inputs does not render, and the
unedited *.example inputs are caught as placeholders.
"""
import glob
import os
import re
import shutil
import subprocess
import tempfile

import yaml

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet", "Job")
# Created by Kubernetes in every namespace (the API server's CA).
BUILTIN_CONFIGMAPS = {"kube-root-ca.crt"}
PLACEHOLDER = re.compile(r"REPLACE|ACCOUNT_ID|111122223333|changeme|TODO|sha256-0{64}")
SIZE_RE = re.compile(r"^[0-9]+(K|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$")
# What a user writes into the inputs (docs/operations.md, Kubernetes).
INPUTS = {
    "AWS_REGION": "eu-central-1",
    "ROLE_ARN": "arn:aws:iam::210987654321:role/weightswarm-p2pd-read",
    "AWS_ENDPOINT_URL_S3": "https://rgw.storage.internal:7480",
    "AWS_ACCESS_KEY_ID": "AKIAWSTESTKEY",
    "AWS_SECRET_ACCESS_KEY": "c2VjcmV0LXRlc3Qta2V5",
}


def renderer(src):
    """The command that renders a kustomization: the kustomize 5 that
    tools/bootstrap unpacks into build-deps/ where kubectl's is older (Debian
    12's kubectl carries kustomize 2, which knows no components), else
    kubectl's own; None when there is neither."""
    own = os.path.join(src, "build-deps", "bin", "kustomize")
    if os.access(own, os.X_OK):
        return [own, "build"]
    return ["kubectl", "kustomize"] if shutil.which("kubectl") else None


def kustomize(render, path):
    r = subprocess.run(render + [path], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr.strip()


def write_inputs(overlay, edited):
    """cluster.key, api.token and every X.env from X.env.example, as a user
    would."""
    with open(os.path.join(overlay, "cluster.key"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    with open(os.path.join(overlay, "api.token"), "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    for ex in glob.glob(os.path.join(overlay, "*.env.example")):
        lines = []
        for line in open(ex):
            k = line.split("=", 1)[0].strip()
            if edited and not line.startswith("#") and k in INPUTS:
                line = f"{k}={INPUTS[k]}\n"
            lines.append(line)
        with open(ex[: -len(".example")], "w") as f:
            f.writelines(lines)


def env_of(c, cms):
    """Variables of a container: env names plus envFrom ConfigMap keys."""
    names = {e["name"] for e in c.get("env", [])}
    for ef in c.get("envFrom", []):
        if "configMapRef" in ef:
            names |= set(cms.get(ef["configMapRef"]["name"], {}).get("data", {}))
    return names


class Render:
    def __init__(self, where, docs, check, check_flags, env_names):
        self.where, self.docs = where, docs
        self.check, self.check_flags, self.env_names = check, check_flags, env_names
        self.by = {}
        for d in docs:
            self.by.setdefault(d.get("kind"), {})[d.get("metadata", {}).get("name")] = d

    def named(self, kind):
        return self.by.get(kind, {})

    def pods(self):
        for kind in WORKLOADS:
            for name, d in self.named(kind).items():
                yield kind, name, d, d["spec"]["template"]

    def run(self, images):
        c = self.check
        for d in self.docs:
            kind, meta = d.get("kind"), d.get("metadata", {})
            c(bool(d.get("apiVersion")) and bool(kind) and bool(meta.get("name")),
              f"{self.where}: {kind}/{meta.get('name')} has identity")
            if kind not in CLUSTER_SCOPED:
                c(bool(meta.get("namespace")), f"{self.where}: {kind}/{meta.get('name')} is namespaced")
        for kind, name, d, t in self.pods():
            self.workload(kind, name, d, t, images)
        self.services()
        self.policies()
        self.monitors()
        self.rbac()
        c(PLACEHOLDER.search(yaml.safe_dump_all(self.docs)) is None,
          f"{self.where}: no placeholder left in the render")

    def workload(self, kind, name, d, t, images):
        c, w = self.check, f"{self.where}: {kind}/{name}"
        spec = t["spec"]
        if kind != "Job":
            sel = d["spec"]["selector"]["matchLabels"]
            labels = t["metadata"]["labels"]
            c(all(labels.get(k) == v for k, v in sel.items()), f"{w}: selector matches its pods")
        if kind == "StatefulSet":
            svc = self.named("Service").get(d["spec"].get("serviceName"), {})
            c(svc.get("spec", {}).get("clusterIP") == "None", f"{w}: serviceName is a headless Service")
        sa = spec.get("serviceAccountName")
        if sa:
            c(sa in self.named("ServiceAccount"), f"{w}: service account {sa} exists")
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for v in vols.values():
            self.volume_refs(w, v)
        cms = self.named("ConfigMap")
        for ct in spec.get("initContainers", []) + spec.get("containers", []):
            self.container(w, ct, vols, cms, images)
        self.zone_step(w, spec)

    def volume_refs(self, w, v):
        c = self.check
        if "secret" in v:
            c(v["secret"]["secretName"] in self.named("Secret"), f"{w}: Secret {v['secret']['secretName']} exists")
        if "configMap" in v:
            c(v["configMap"]["name"] in self.named("ConfigMap"), f"{w}: ConfigMap {v['configMap']['name']} exists")
        for s in v.get("projected", {}).get("sources", []):
            if "configMap" in s:
                n = s["configMap"]["name"]
                c(n in self.named("ConfigMap") or n in BUILTIN_CONFIGMAPS, f"{w}: ConfigMap {n} exists")

    def container(self, w, ct, vols, cms, images):
        c = self.check
        w = f"{w}/{ct['name']}"
        c(bool(ct.get("image")), f"{w}: has an image")
        img = ct.get("image", "")
        mine = "weightswarm" in img
        if mine:
            c(img in images, f"{w}: image {img} is set by the overlay's images:")
        else:
            c(re.search(r"(:[^/:]+|@sha256:[0-9a-f]{64})$", img) is not None and not img.endswith(":latest"),
              f"{w}: third-party image {img} is pinned")
        for m in ct.get("volumeMounts", []):
            c(m["name"] in vols, f"{w}: volume {m['name']} defined")
        for ef in ct.get("envFrom", []):
            for key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                if key in ef:
                    c(ef[key]["name"] in self.named(kind), f"{w}: {kind} {ef[key]['name']} exists")
        for e in ct.get("env", []):
            for key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                ref = e.get("valueFrom", {}).get(key)
                if ref:
                    c(ref["name"] in self.named(kind), f"{w}: {kind} {ref['name']} exists")
        ports = {p.get("name"): p["containerPort"] for p in ct.get("ports", [])}
        env = env_of(ct, cms)
        cmd = ct.get("command", []) + ct.get("args", [])
        for a in cmd:
            for var in re.findall(r"\$\(([A-Z_][A-Z0-9_]*)\)", a):
                c(var in env, f"{w}: $({var}) is defined in its env")
        if cmd:
            self.check_flags(os.path.basename(cmd[0]), cmd[1:], w)
        prog = os.path.basename(cmd[0]) if cmd else ""
        if prog in ("p2pd", "p2p-tracker"):
            self.daemon(w, prog, ct, cmd, ports, cms)
        for pr in ("startupProbe", "livenessProbe", "readinessProbe"):
            p = ct.get(pr)
            if p and "httpGet" in p:
                port = p["httpGet"]["port"]
                c(port in ports or port in ports.values(), f"{w}: {pr} port {port} is declared")
            if p and "exec" in p:
                self.check_flags(os.path.basename(p["exec"]["command"][0]), p["exec"]["command"][1:], f"{w} {pr}")
        for a in cmd:
            for dg in re.findall(r"sha256-([0-9a-zA-Z]*)", a):
                c(re.fullmatch(r"[0-9a-f]{64}", dg) is not None, f"{w}: digest well-formed")

    def daemon(self, w, prog, ct, cmd, ports, cms):
        c = self.check
        want = {"startupProbe": None, "livenessProbe": "/healthz", "readinessProbe": "/readyz"}
        for pr, path in want.items():
            g = ct.get(pr, {}).get("httpGet", {})
            c(g.get("port") == "metrics" and (path is None or g.get("path") == path),
              f"{w}: {pr} on the metrics port{'' if path is None else ' ' + path}")
        m = [a.split(":")[-1] for a in cmd if a.startswith("--metrics=")]
        c(len(m) == 1 and m[0].isdigit() and int(m[0]) == ports.get("metrics"),
          f"{w}: --metrics listens on the declared metrics port")
        for ef in ct.get("envFrom", []):
            for k, v in cms.get(ef.get("configMapRef", {}).get("name"), {}).get("data", {}).items():
                if k.startswith("P2P_"):
                    c(k in self.env_names(prog), f"{w}: {prog} reads {k}")
                if k == "P2P_CAPACITY":
                    c(SIZE_RE.match(v) is not None, f"{w}: P2P_CAPACITY {v} is a Kubernetes quantity")
                if k == "P2P_TRACKER":
                    c(sorted(v.split(",")) == sorted(self.tracker_addrs()), f"{w}: P2P_TRACKER names each tracker pod")
        if prog == "p2pd":
            c("--node-id=$(NODE_NAME)" in cmd, f"{w}: --node-id from NODE_NAME")
            node = [e for e in ct.get("env", []) if e["name"] == "NODE_NAME"]
            c(len(node) == 1 and node[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
              f"{w}: NODE_NAME is spec.nodeName")

    def tracker_addrs(self):
        out = []
        for name, s in self.named("StatefulSet").items():
            ports = s["spec"]["template"]["spec"]["containers"][0].get("ports", [])
            swarm = [p["containerPort"] for p in ports if p.get("name") == "swarm"]
            for i in range(s["spec"].get("replicas", 1)):
                out.append(f"{name}-{i}.{s['spec']['serviceName']}:{swarm[0] if swarm else '?'}")
        return out

    def zone_step(self, w, spec):
        """p2pd's --zone-file is written by an init container, on a shared volume."""
        mains = [ct for ct in spec.get("containers", []) if ct.get("command", [""])[0] == "p2pd"]
        if not mains:
            return
        c = self.check

        def mount_of(ct, path):
            for m in ct.get("volumeMounts", []):
                if path.startswith(m["mountPath"].rstrip("/") + "/"):
                    return m["name"]
            return None

        zf = [a.split("=", 1)[1] for a in mains[0].get("args", []) if a.startswith("--zone-file=")]
        c(len(zf) == 1, f"{w}: p2pd reads --zone-file")
        writers = [ct for ct in spec.get("initContainers", []) if "node-zone" in ct.get("command", [])]
        c(len(writers) == 1, f"{w}: an init container runs p2pctl node-zone")
        if zf and writers:
            out = [a.split("=", 1)[1] for a in writers[0].get("args", []) if a.startswith("--out=")]
            c(out == zf, f"{w}: node-zone --out is p2pd's --zone-file")
            c(mount_of(writers[0], zf[0]) is not None and mount_of(writers[0], zf[0]) == mount_of(mains[0], zf[0]),
              f"{w}: the zone file is on a volume both containers mount")
            sa = spec.get("serviceAccountName")
            c(self.can_get_nodes(sa), f"{w}: service account {sa} may get nodes")

    def can_get_nodes(self, sa):
        for b in self.named("ClusterRoleBinding").values():
            if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa for s in b.get("subjects", [])):
                continue
            role = self.named("ClusterRole").get(b["roleRef"]["name"], {})
            for r in role.get("rules", []):
                if "nodes" in r.get("resources", []) and "get" in r.get("verbs", []):
                    return True
        return False

    def pods_matching(self, sel):
        return [t for _, _, _, t in self.pods() if all(t["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())]

    def services(self):
        c = self.check
        for name, s in self.named("Service").items():
            match = self.pods_matching(s["spec"]["selector"])
            c(len(match) > 0, f"{self.where}: Service {name} selects a workload")
            names = {p.get("name") for t in match for ct in t["spec"]["containers"] for p in ct.get("ports", [])}
            for p in s["spec"]["ports"]:
                if isinstance(p.get("targetPort"), str):
                    c(p["targetPort"] in names, f"{self.where}: Service {name} targetPort {p['targetPort']} exists")

    def policies(self):
        c = self.check
        for name, p in self.named("NetworkPolicy").items():
            w = f"{self.where}: NetworkPolicy {name}"
            match = self.pods_matching(p["spec"]["podSelector"].get("matchLabels", {}))
            c(len(match) > 0, f"{w} selects a workload")
            ports = {q.get("name"): q["containerPort"] for t in match for ct in t["spec"]["containers"] for q in ct.get("ports", [])}
            for i, rule in enumerate(p["spec"].get("ingress", [])):
                c(len(rule.get("from", [])) > 0, f"{w} rule {i} has from:")
                for q in rule.get("ports", []):
                    c(q["port"] in ports or q["port"] in ports.values(), f"{w} rule {i} port {q['port']} is declared")
                for f in rule.get("from", []):
                    if "podSelector" in f and "namespaceSelector" not in f:
                        c(len(self.pods_matching(f["podSelector"].get("matchLabels", {}))) > 0
                          or "weightswarm.io/tracker-api" in f["podSelector"].get("matchLabels", {}),
                          f"{w} rule {i} podSelector names pods")
        problems = policy_problems(self)
        c(not problems, f"{self.where}: each port admits only the sources that need it ({problems[:3]})")

    def monitors(self):
        c = self.check
        for name, m in self.named("PodMonitor").items():
            match = self.pods_matching(m["spec"]["selector"]["matchLabels"])
            ports = {q.get("name") for t in match for ct in t["spec"]["containers"] for q in ct.get("ports", [])}
            c(len(match) > 0, f"{self.where}: PodMonitor {name} selects pods")
            for e in m["spec"]["podMetricsEndpoints"]:
                c(e["port"] in ports, f"{self.where}: PodMonitor {name} port {e['port']} is declared")
        for name, m in self.named("ServiceMonitor").items():
            sel = m["spec"]["selector"]["matchLabels"]
            svcs = [s for s in self.named("Service").values()
                    if all(s["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())]
            ports = {p.get("name") for s in svcs for p in s["spec"]["ports"]}
            c(len(svcs) > 0, f"{self.where}: ServiceMonitor {name} selects a Service")
            for e in m["spec"]["endpoints"]:
                c(e["port"] in ports, f"{self.where}: ServiceMonitor {name} port {e['port']} is a Service port")

    def rbac(self):
        for name, b in self.named("ClusterRoleBinding").items():
            self.check(b["roleRef"]["name"] in self.named("ClusterRole"), f"{self.where}: {name} roleRef exists")
            for s in b.get("subjects", []):
                if s.get("kind") == "ServiceAccount":
                    sa = self.named("ServiceAccount").get(s["name"], {})
                    self.check(sa.get("metadata", {}).get("namespace") == s.get("namespace"),
                               f"{self.where}: {name} subject {s['name']} exists in its namespace")


# Who needs each port (docs/security.md, "Control plane"): the source
# classes each NetworkPolicy port may admit, and must admit.
POLICY_SOURCES = {
    ("p2p-tracker", "swarm"): {"p2pd"},            # peers announce
    ("p2p-tracker", "http"): {"api-client"},       # prefetch callers, page
    ("p2p-tracker", "metrics"): {"monitoring"},    # Prometheus
    ("p2pd", 7610): {"p2pd"},                      # other peers
    ("p2pd", 7611): {"monitoring"},                # Prometheus
}
PRIVATE_NETS = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"}


def policy_source(r, f):
    """The class of one `from:` entry, or None when it admits more than a
    known caller: p2pd (its pods, or node address ranges: hostNetwork),
    api-client (pods labelled weightswarm.io/tracker-api, here or in a
    named namespace), monitoring (the monitoring namespace)."""
    pods = f.get("podSelector", {}).get("matchLabels")
    ns = f.get("namespaceSelector", {}).get("matchLabels")
    if "ipBlock" in f:
        b = f["ipBlock"]
        return "p2pd" if b.get("cidr") in PRIVATE_NETS and not b.get("except") else None
    if pods is not None and pods.get("weightswarm.io/tracker-api") == "allowed":
        return "api-client" if ns is None or "kubernetes.io/metadata.name" in ns else None
    if pods is not None and ns is None and pods and \
            all(t["metadata"]["labels"].get("app.kubernetes.io/name") == "p2pd" for t in r.pods_matching(pods)) \
            and r.pods_matching(pods):
        return "p2pd"
    if pods is None and ns == {"kubernetes.io/metadata.name": "monitoring"}:
        return "monitoring"
    return None


def policy_problems(r):
    """What the policies admit beyond (or short of) POLICY_SOURCES."""
    out = []
    seen = set()
    for name, p in r.named("NetworkPolicy").items():
        if "Ingress" not in p["spec"].get("policyTypes", []):
            out.append(f"{name}: no Ingress policy type")
        for i, rule in enumerate(p["spec"].get("ingress", [])):
            if not rule.get("ports"):
                out.append(f"{name} rule {i}: no ports (admits every port)")
            if not rule.get("from"):
                out.append(f"{name} rule {i}: no from (admits everyone)")
            classes = {policy_source(r, f) for f in rule.get("from", [])}
            for q in rule.get("ports", []):
                key = (name, q["port"])
                seen.add(key)
                want = POLICY_SOURCES.get(key)
                if want is None:
                    out.append(f"{name}: port {q['port']} has no known callers")
                elif classes != want:
                    out.append(f"{name}: port {q['port']} admits {sorted(map(str, classes))}, want {sorted(want)}")
    for key in POLICY_SOURCES:
        if key not in seen:
            out.append(f"{key[0]}: port {key[1]} has no rule")
    return out


def overlay_images(path):
    k = yaml.safe_load(open(os.path.join(path, "kustomization.yaml")))
    out = set()
    for i in k.get("images", []):
        out.add(f"{i['newName']}@{i['digest']}" if "digest" in i else f"{i['newName']}:{i['newTag']}")
    return out


def run(src, check, check_flags, env_names, version):
    render = renderer(src)
    if render is None:
        check(False, "kustomize 5 is installed (tools/bootstrap)")
        return
    k8s = os.path.join(src, "deploy", "k8s")
    for path in sorted(glob.glob(os.path.join(k8s, "**", "*.yaml"), recursive=True)):
        rel = os.path.relpath(path, src)
        try:
            list(yaml.safe_load_all(open(path)))
            check(True, f"{rel} parses")
        except yaml.YAMLError as e:
            check(False, f"{rel} parses: {e}")
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "k8s")
        shutil.copytree(k8s, root, ignore=shutil.ignore_patterns("cluster.key", "api.token", "*.env"))
        overlays = sorted(glob.glob(os.path.join(root, "overlays", "*")))
        check(len(overlays) >= 2, "deploy/k8s has the eks and generic overlays")
        for o in overlays:
            name = "overlays/" + os.path.basename(o)
            rc, _, err = kustomize(render, o)
            check(rc != 0 and "no such file" in err.lower(), f"{name}: does not render without its inputs")
            write_inputs(o, edited=False)
            rc, out, err = kustomize(render, o)
            check(rc == 0 and PLACEHOLDER.search(out) is not None, f"{name}: unedited *.example inputs are caught as placeholders")
            write_inputs(o, edited=True)
            rc, out, err = kustomize(render, o)
            check(rc == 0, f"{name}: kustomize renders ({err[:200]})")
            if rc != 0:
                continue
            docs = [d for d in yaml.safe_load_all(out) if d]
            images = overlay_images(o)
            check(all(i.endswith(":" + version) or "@sha256:" in i for i in images), f"{name}: images: tag is the release {version}")
            r = Render(name, docs, check, check_flags, env_names)
            r.run(images)
            values(name, r, check)
            policy_negatives(name, docs, check)
        ex = os.path.join(root, "examples")
        rc, out, err = kustomize(render, ex)
        check(rc == 0, f"examples: kustomize renders ({err[:200]})")
        if rc == 0:
            docs = [d for d in yaml.safe_load_all(out) if d]
            for kind, name, d, t in Render("examples", docs, check, check_flags, env_names).pods():
                for ct in t["spec"].get("initContainers", []) + t["spec"]["containers"]:
                    w = f"examples: {kind}/{name}/{ct['name']}"
                    cmd = ct.get("command", []) + ct.get("args", [])
                    if cmd:
                        check_flags(os.path.basename(cmd[0]), cmd[1:], w)
                    if "prefetch" in cmd:
                        check("--wait" in cmd and any(a.startswith("--retry-for=") for a in cmd), f"{w}: waits, retrying p2pd")
                    if "weightswarm" in ct["image"]:
                        check(ct["image"] in overlay_images(ex), f"{w}: image set by images:")
            job = next((d for d in docs if d.get("kind") == "Job" and d["metadata"]["name"] == "prefetch-llama"), None)
            check(job is not None, "examples: the prefetch hook Job is there")
            if job is not None:
                t = job["spec"]["template"]
                check(t["metadata"].get("labels", {}).get("weightswarm.io/tracker-api") == "allowed",
                      "examples: the prefetch hook carries the label the tracker's policy admits")
                for ct in t["spec"]["containers"]:
                    refs = [e["valueFrom"]["secretKeyRef"] for e in ct.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})]
                    a = ct.get("args", [])
                    check(any(r_["name"] == "weightswarm-tracker-api-token" and r_["key"] == "api.token" for r_ in refs)
                          and "--oauth2-bearer" in a and a[a.index("--oauth2-bearer") + 1].startswith("$("),
                          f"examples: {ct['name']} sends the trackers' API token from the Secret")
            served = {a.split("sha256-")[1][:64] for a in out.split() if "sha256-" in a}
            check(len(served) == 1, "examples: the vLLM example fetches, pins and serves one digest")
            check("- pin" in out, "examples: the release is pinned while served")


def policy_negatives(name, docs, check):
    """The policy check can fail: an open rule, a stray source, a port
    without a rule are each caught."""
    import copy
    muts = {
        "a rule without from:": lambda p: p["spec"]["ingress"][0].pop("from"),
        "everyone on the HTTP API": lambda p: p["spec"]["ingress"][1]["from"].append({"ipBlock": {"cidr": "0.0.0.0/0"}}),
        "the metrics port dropped": lambda p: p["spec"]["ingress"].pop(2),
        "HTTP open to every pod of the namespace": lambda p: p["spec"]["ingress"][1]["from"].append({"podSelector": {}}),
    }
    for what, mut in muts.items():
        d2 = copy.deepcopy(docs)
        pol = next(d for d in d2 if d.get("kind") == "NetworkPolicy" and d["metadata"]["name"] == "p2p-tracker")
        mut(pol)
        r2 = Render(name, d2, lambda ok, w: None, None, None)
        check(len(policy_problems(r2)) > 0, f"{name}: the policy check catches {what}")


def values(name, r, check):
    """The inputs a user wrote land where they must."""
    cms = r.named("ConfigMap")
    env = {}
    for cm in cms.values():
        if cm["metadata"]["name"].startswith("p2pd-env"):
            env = cm.get("data", {})
    check(env.get("AWS_REGION") == INPUTS["AWS_REGION"], f"{name}: AWS_REGION from the inputs")
    if name.endswith("eks"):
        sa = r.named("ServiceAccount").get("p2pd", {})
        check(sa.get("metadata", {}).get("annotations", {}).get("eks.amazonaws.com/role-arn") == INPUTS["ROLE_ARN"],
              f"{name}: IRSA role-arn annotation from irsa.env")
        check(not any(n.startswith("irsa") for n in cms), f"{name}: the local-config irsa ConfigMap is not applied")
    if name.endswith("generic"):
        check(env.get("AWS_ENDPOINT_URL_S3") == INPUTS["AWS_ENDPOINT_URL_S3"], f"{name}: AWS_ENDPOINT_URL_S3 from s3.env")
        pass
    tok = r.named("Secret").get("weightswarm-tracker-api-token", {})
    check(set(tok.get("data", {})) == {"api.token"}, f"{name}: the trackers' API token is a Secret (fixed name)")
    trk = r.named("StatefulSet")["p2p-tracker"]["spec"]["template"]["spec"]
    args = trk["containers"][0].get("args", [])
    mounts = {m["name"]: m["mountPath"] for m in trk["containers"][0].get("volumeMounts", [])}
    vols = {v["name"]: v.get("secret", {}).get("secretName") for v in trk.get("volumes", [])}
    tf = [a.split("=", 1)[1] for a in args if a.startswith("--api-token-file=")]
    check(len(tf) == 1 and any(tf[0] == f"{mounts[n]}/api.token" and vols.get(n) == "weightswarm-tracker-api-token"
                               for n in mounts),
          f"{name}: the trackers read --api-token-file from that Secret")
    check("--insecure" not in args, f"{name}: the trackers do not run --insecure")
    # Chunks cross the node network sealed: nothing shipped turns it off.
    flat = yaml.safe_dump_all(r.docs)
    check("plaintext-payloads" not in flat and "P2P_PLAINTEXT_PAYLOADS" not in flat,
          f"{name}: nothing shipped runs --plaintext-payloads")
    mm = [a.split("=", 1)[1] for a in args if a.startswith("--max-memory=")]
    lim = trk["containers"][0].get("resources", {}).get("limits", {}).get("memory", "")
    mib = {"Mi": 1, "Gi": 1024}
    check(len(mm) == 1 and mm[0][-2:] in mib and lim[-2:] in mib and
          int(mm[0][:-2]) * mib[mm[0][-2:]] < int(lim[:-2]) * mib[lim[-2:]],
          f"{name}: the tracker's --max-memory ({mm}) is below its memory limit ({lim})")
    if name.endswith("generic"):
        creds = [s for n, s in r.named("Secret").items() if n.startswith("s3-credentials")]
        check(len(creds) == 1 and set(creds[0].get("data", {})) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
              f"{name}: the S3 key pair is a Secret")
        ds = r.named("DaemonSet")["p2pd"]["spec"]["template"]["spec"]["containers"][0]
        check(any(ef.get("secretRef", {}).get("name", "").startswith("s3-credentials") for ef in ds.get("envFrom", [])),
              f"{name}: p2pd takes the key pair from the Secret")
