"""The --metrics listeners of p2p-tracker and p2pd, scraped for real.

A tracker and two p2pd in swarm mode, each with --metrics on its own
loopback port, fetch one small release from radosgw together. Then:
- the metrics ports answer only GET /metrics, /healthz and /readyz (API
  routes are 404 there, other methods 405);
- `promtool check metrics` (Debian's promtool) accepts both pages, and
  every series carries the daemon's prefix;
- Debian's real `prometheus` scrapes the three targets every 0.5 s, and
  its HTTP API (/api/v1/targets, /api/v1/query) shows them up and the key
  series (build_info, counters, histogram buckets, model/digest labels)
  with the values the swarm produced.
"""
import http.client
import json
import os
import shutil
import subprocess
import time
import urllib.parse

import pytest

from conftest import BUILD, binary
import ws

MiB = 1 << 20


def get(port, path, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        c.close()


def wait_http(port, path, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if get(port, path)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"127.0.0.1:{port}{path} not answering 200")


def samples(text, name):
    """{labels-string: value} of every sample of metric name."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        rest = line[len(name):]
        if rest[:1] == "{":
            labels, _, v = rest[1:].rpartition("} ")
            out[labels] = float(v)
        elif rest[:1] == " ":
            out[""] = float(rest[1:])
    return out


class MetricsTracker(ws.Tracker):
    """ws.Tracker with --metrics on a free port."""

    def __init__(self, build, workdir, key):
        super().__init__(build, workdir, key)
        self.metrics = ws.free_port()

    def start(self, timeout=10):
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            self.command() + ["--metrics", f"127.0.0.1:{self.metrics}"],
            stdout=self.logf, stderr=subprocess.STDOUT)
        wait_http(self.metrics, "/readyz", timeout)
        return self


@pytest.fixture(scope="module")
def swarm(rgw, tmp_path_factory):
    """A tracker and two p2pd that fetched one release (model "metrics-m")."""
    tmp = tmp_path_factory.mktemp("metrics")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(rgw.env)
    src = ws.make_release(str(tmp / "model"), shard_bytes=3 * MiB, nshards=2, seed="metrics")
    r = subprocess.run([binary("tools/p2pctl"), "publish", src,
                        f"s3://{rgw.bucket()}/m/metrics-m/", "--json",
                        "--chunk-size", str(1 * MiB)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    pub = json.loads(r.stdout.strip().splitlines()[-1])
    key = ws.write_cluster_key(str(tmp / "cluster.key"))
    trk = MetricsTracker(BUILD, str(tmp), key).start()
    peers = []
    try:
        # a: unlimited cache (capacity 0), b: a capacity in bytes.
        for name, cap in (("a", []), ("b", ["--capacity", str(1 << 30)])):
            port = ws.free_port()
            p = ws.swarm_peer(BUILD, str(tmp), env, name, trk, key,
                              extra=["--metrics", f"127.0.0.1:{port}", *cap])
            p.metrics = port
            peers.append(p.start())
        trk.prefetch(uri=pub["uri"])
        ws.wait_ready(peers, pub["digest"], timeout=120)
        F = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(src) for f in fs)
        yield {"tracker": trk, "peers": peers, "digest": pub["digest"], "tmp": tmp, "F": F}
    finally:
        # Clean exits: the metrics listeners close with the rest.
        rcs = [p.stop() for p in peers]
        tproc = trk.proc
        trk.stop()
    assert rcs == [0, 0] and tproc.returncode == 0, (rcs, tproc.returncode)


def test_metrics_port_serves_only_metrics_and_probes(swarm):
    trk, peers = swarm["tracker"], swarm["peers"]
    for port in [trk.metrics] + [p.metrics for p in peers]:
        for path in ("/metrics", "/healthz", "/readyz"):
            assert get(port, path)[0] == 200, (port, path)
        assert get(port, "/metrics", "POST")[0] == 405
    # The APIs' routes exist on their own ports, never on the metrics port.
    for p in peers:
        assert p.api("GET", "/api/v1/releases")[0] == 200
        for method, path in (("GET", "/api/v1/releases"),
                             ("GET", f"/api/v1/releases/{swarm['digest']}"),
                             ("POST", "/api/v1/prefetch"), ("POST", "/api/v1/seed"),
                             ("DELETE", f"/api/v1/releases/{swarm['digest']}"),
                             ("GET", "/")):
            st, body = get(p.metrics, path, method)
            assert st == 404, (method, path, st, body)
    assert trk.get("/api/v1/swarms")[0] == 200
    for method, path in (("GET", "/"), ("GET", "/api/v1/swarms"),
                         ("POST", "/api/v1/prefetch"), ("GET", "/api/v1/prefetch")):
        st, body = get(trk.metrics, path, method)
        assert st == 404, (method, path, st, body)
    # p2pd's /readyz and /metrics are the API's.
    assert peers[0].api("GET", "/readyz")[0] == 200
    st, text = peers[0].api("GET", "/metrics")
    assert st == 200 and "weightswarm_p2pd_build_info{" in text


def test_promtool_check_metrics_on_both_endpoints(swarm):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (tools/bootstrap installs prometheus)")
    trk, peers = swarm["tracker"], swarm["peers"]
    pages = {"tracker": get(trk.metrics, "/metrics")[1]}
    for p in peers:
        pages[p.dir] = get(p.metrics, "/metrics")[1]
    for who, text in pages.items():
        r = subprocess.run([promtool, "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", \
            f"{who}: promtool: {r.stdout}{r.stderr}"
        prefix = "weightswarm_tracker_" if who == "tracker" else "weightswarm_p2pd_"
        names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                 if line and not line.startswith("#")}
        assert names and all(n.startswith(prefix) for n in names), \
            sorted(n for n in names if not n.startswith(prefix))
    # Values the fetch produced, on each node.
    total_from_s3 = 0
    for p in peers:
        text = pages[p.dir]
        assert samples(text, "weightswarm_p2pd_build_info") == {'version="0.1.0"': 1.0}
        ready = samples(text, "weightswarm_p2pd_prefetch_duration_seconds_count")
        assert ready['state="ready"'] == 1.0, ready
        chunks = samples(text, "weightswarm_p2pd_chunk_fetch_duration_seconds_count")
        verified = samples(text, "weightswarm_p2pd_chunks_verified_total")[""]
        assert chunks['source="origin"'] + chunks['source="peer"'] == verified > 0
        total_from_s3 += chunks['source="origin"']
        inf = samples(text, "weightswarm_p2pd_chunk_fetch_duration_seconds_bucket")
        assert inf['source="origin",le="+Inf"'] == chunks['source="origin"']
        label = f'model="metrics-m",digest="{swarm["digest"]}"'
        assert samples(text, "weightswarm_p2pd_release_size_bytes") == {label: swarm["F"]}
        assert samples(text, "weightswarm_p2pd_release_done_bytes") == {label: swarm["F"]}
        assert samples(text, "weightswarm_p2pd_release_ready") == {label: 1.0}
    assert total_from_s3 > 0
    s3 = sum(samples(pages[p.dir], "weightswarm_p2pd_s3_request_duration_seconds_count")[""]
             for p in peers)
    assert s3 >= total_from_s3
    held = samples(pages["tracker"], "weightswarm_tracker_swarm_chunks_held")
    assert held.get(f'model="metrics-m",digest="{swarm["digest"]}"', 0) > 0, held


def prom_query(port, q):
    st, body = get(port, "/api/v1/query?query=" + urllib.parse.quote(q))
    assert st == 200, body
    r = json.loads(body)
    assert r["status"] == "success", r
    return r["data"]["result"]


def check_grafana_queries(port, peers):
    """Every query of the Grafana dashboard evaluates in this Prometheus
    (with $node = all); no ratio gives Inf or NaN, although node a's cache
    is unlimited (capacity 0); the promise panel shows S3 bytes / size."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "dashboards",
                        "weightswarm-grafana.json")
    dash = json.load(open(path))
    assert any(v["name"] == "node" for v in dash["templating"]["list"])
    time.sleep(1.5)  # rate() needs two scrapes in its window
    for panel in dash["panels"]:
        for t in panel["targets"]:
            assert '$node' in t["expr"] or "tracker" in t["expr"], t["expr"]
            res = prom_query(port, t["expr"].replace("$node", ".*"))
            if "histogram_quantile" in t["expr"]:
                continue  # NaN there means no observation in the window
            for r in res:
                v = r["value"][1]
                assert v not in ("NaN", "+Inf", "-Inf"), (panel["title"], r)
    cache = [t["expr"] for p in dash["panels"] for t in p["targets"]
             if "cache_capacity_bytes" in t["expr"]]
    assert cache
    res = prom_query(port, cache[0].replace("$node", ".*"))
    assert [r["metric"]["instance"] for r in res] == [f"127.0.0.1:{peers[1].metrics}"]
    promise = [t["expr"] for p in dash["panels"] for t in p["targets"]
               if "release_s3_bytes" in t["expr"]]
    res = prom_query(port, promise[0].replace("$node", ".*"))
    assert len(res) == 1 and 0.5 < float(res[0]["value"][1]) < 1.5, res


def test_prometheus_scrapes_tracker_and_two_nodes(swarm):
    prom = shutil.which("prometheus")
    if prom is None:
        pytest.skip("prometheus not installed (tools/bootstrap installs it)")
    trk, peers = swarm["tracker"], swarm["peers"]
    tmp = swarm["tmp"]
    port = ws.free_port()
    targets = {"tracker": [f"127.0.0.1:{trk.metrics}"],
               "p2pd": [f"127.0.0.1:{p.metrics}" for p in peers]}
    cfg = tmp / "prometheus.yml"
    cfg.write_text(json.dumps({  # YAML is a superset of JSON
        "global": {"scrape_interval": "500ms", "scrape_timeout": "400ms"},
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": t}]}
                           for job, t in targets.items()]}))
    log = open(tmp / "prometheus.log", "wb")
    proc = subprocess.Popen([prom, f"--config.file={cfg}",
                             f"--storage.tsdb.path={tmp / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(port, "/-/ready", timeout=60)
        deadline = time.time() + 60
        while True:
            st, body = get(port, "/api/v1/targets")
            active = json.loads(body)["data"]["activeTargets"] if st == 200 else []
            up = [t for t in active if t["health"] == "up"]
            if len(up) == 3:
                break
            assert time.time() < deadline, f"targets not up: {active}"
            time.sleep(0.25)
        assert {t["labels"]["job"] for t in up} == {"tracker", "p2pd"}
        # Each series once scraped.
        deadline = time.time() + 30
        while len(prom_query(port, "weightswarm_p2pd_build_info")) < 2:
            assert time.time() < deadline, "no p2pd build_info"
            time.sleep(0.25)
        assert len(prom_query(port, "up == 1")) == 3
        bi = prom_query(port, "weightswarm_p2pd_build_info")
        assert {r["metric"]["version"] for r in bi} == {"0.1.0"}
        assert all(r["value"][1] == "1" for r in bi)
        tbi = prom_query(port, "weightswarm_tracker_build_info")
        assert len(tbi) == 1 and tbi[0]["metric"]["job"] == "tracker"
        verified = prom_query(port, "sum(weightswarm_p2pd_chunks_verified_total)")
        assert float(verified[0]["value"][1]) > 0, verified
        buckets = prom_query(port, 'sum(weightswarm_p2pd_chunk_fetch_duration_seconds_bucket'
                                   '{le="+Inf"})')
        assert float(buckets[0]["value"][1]) == float(verified[0]["value"][1])
        ready = prom_query(port, 'weightswarm_p2pd_prefetch_duration_seconds_count'
                                 '{state="ready"}')
        assert sorted(float(r["value"][1]) for r in ready) == [1.0, 1.0]
        p50 = prom_query(port, 'histogram_quantile(0.5, sum by (le) '
                               '(weightswarm_p2pd_s3_request_duration_seconds_bucket))')
        assert 0 < float(p50[0]["value"][1]) < 60, p50
        held = prom_query(port, 'weightswarm_tracker_swarm_chunks_held{model="metrics-m"}')
        assert len(held) == 1 and held[0]["metric"]["digest"] == swarm["digest"]
        assert float(held[0]["value"][1]) > 0
        check_grafana_queries(port, peers)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
