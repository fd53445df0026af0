"""Release tags against a real S3 server (radosgw): `p2pctl publish --tag`
writes the release, then the tag object (tags/<tag> = "sha256-<hex>\\n");
`p2pctl tag` moves it (promotion and rollback) as a compare-and-swap on the
object's ETag; `p2pctl resolve` prints what it names; two movers racing on
the same read: exactly one wins and the loser says so; p2pd prefetches by
tag (`s3://B/P/MODEL/:TAG`, resolved once), then links
by-name/<model>/<tag> and refs/<model>/<tag> in its cache at the release
(and refs/<tag> in its Hugging Face view); `p2pctl wait MODEL/:TAG` waits
on the digest the tag names; the tracker's POST /api/v1/prefetch resolves
a tag once and wants the release by digest, selector kept."""
import os
import subprocess
import sys
import time

import pytest

from test_s3_rgw import boto, bucket, s3env, tool_env  # noqa: F401 fixtures

BUILD = os.environ.get("WS_BUILD_ROOT", "/work/main/build")
P2PCTL = os.path.join(BUILD, "tools", "p2pctl")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import ws  # noqa: E402
from ws import P2pd  # noqa: E402


def ctl(s3env, *args, timeout=120):
    return subprocess.run([P2PCTL, *args], capture_output=True, text=True,
                          env=tool_env(s3env), timeout=timeout)


def publish(s3env, d, uri, *extra):
    p = ctl(s3env, "publish", str(d), uri, *extra)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()[0]


def versions(tmp_path, n):
    out = []
    for i in range(n):
        d = tmp_path / ("v%d" % i)
        d.mkdir()
        (d / "config.json").write_text('{"v": %d}\n' % i)
        (d / "w.bin").write_bytes(os.urandom(100 * 1024 + i))
        out.append(d)
    return out


def wait_link(path, target, d, timeout=10):
    """The links are written on a worker once the release is READY, so
    they may trail `--wait` by a moment."""
    deadline = time.time() + timeout
    while True:
        try:
            if os.readlink(path) == target:
                return
        except FileNotFoundError:
            pass
        assert time.time() < deadline, (path, target, d.tail())
        time.sleep(0.05)


def tag_body(boto, bucket, key):
    return boto.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_publish_tag_move_resolve_rollback(s3env, boto, bucket, tmp_path):  # noqa: F811
    v0, v1 = versions(tmp_path, 2)
    model = "s3://%s/team/tagged/" % bucket
    d0 = publish(s3env, v0, model, "--tag", "prod")
    assert tag_body(boto, bucket, "team/tagged/tags/prod") == \
        (d0 + "\n").encode()
    r = ctl(s3env, "resolve", model + ":prod")
    assert r.returncode == 0, r.stderr
    assert r.stdout == d0 + "\n"
    # A new version published with the same tag moves it (If-Match).
    d1 = publish(s3env, v1, model, "--tag", "prod")
    assert d1 != d0
    assert ctl(s3env, "resolve", model + ":prod").stdout == d1 + "\n"
    # Rollback: point prod back at the first release.
    t = ctl(s3env, "tag", model, "prod", d0)
    assert t.returncode == 0, t.stderr
    assert ctl(s3env, "resolve", model + ":prod").stdout == d0 + "\n"
    # --expect guards a move on what the tag names now.
    t = ctl(s3env, "tag", model, "prod", d1, "--expect", d1)
    assert t.returncode == 1 and "not the expected one" in t.stderr
    assert ctl(s3env, "resolve", model + ":prod").stdout == d0 + "\n"
    # A second tag, created by `tag` (If-None-Match: *).
    assert ctl(s3env, "tag", model, "canary", d1).returncode == 0
    assert ctl(s3env, "resolve", model + ":canary").stdout == d1 + "\n"
    # Errors: unknown tag (4), a release that is not published (4), a bad
    # tag name (2), a tag object that is not a digest (1).
    r = ctl(s3env, "resolve", model + ":nope")
    assert r.returncode == 4, r.stderr
    t = ctl(s3env, "tag", model, "prod", "sha256-" + "0" * 64)
    assert t.returncode == 4 and "manifest.json missing" in t.stderr
    assert ctl(s3env, "tag", model, "../x", d1).returncode == 2
    assert ctl(s3env, "resolve", model + ":prod").stdout == d0 + "\n"
    boto.put_object(Bucket=bucket, Key="team/tagged/tags/junk",
                    Body=b"sha256-zz\n")
    r = ctl(s3env, "resolve", model + ":junk")
    assert r.returncode == 1 and "not sha256-<hex>" in r.stderr


@pytest.mark.parametrize("create", [False, True])
def test_tag_race_one_winner(s3env, boto, bucket, tmp_path, create):  # noqa: F811
    """Two movers read the same tag state, then both write: S3's If-Match
    (If-None-Match: * when the tag does not exist yet) lets one through."""
    vs = versions(tmp_path, 3)
    model = "s3://%s/team/race%d/" % (bucket, create)
    ds = [publish(s3env, v, model) for v in vs]
    if not create:
        assert ctl(s3env, "tag", model, "prod", ds[0]).returncode == 0
    env = tool_env(s3env)
    procs = [subprocess.Popen([P2PCTL, "tag", model, "prod", d,
                               "--pause-before-put", "1500"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for d in ds[1:]]
    res = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in res)
    assert codes == [0, 1], res
    winner = ds[1 + [rc for rc, _ in res].index(0)]
    loser_err = [err for rc, err in res if rc == 1][0]
    assert "moved by someone else" in loser_err, loser_err
    assert winner in loser_err  # the loser names what won
    assert ctl(s3env, "resolve", model + ":prod").stdout == winner + "\n"


def test_p2pd_prefetch_by_tag_links(s3env, bucket, tmp_path):  # noqa: F811
    """p2pd resolves MODEL/:prod once, fetches that release by digest and
    links by-name/MODEL/prod (and refs/MODEL/prod) at it; after a rollback
    (tag moved back) a new prefetch by tag relinks to the old release."""
    v0, v1 = versions(tmp_path, 2)
    model = "s3://%s/team/served/" % bucket
    d0 = publish(s3env, v0, model, "--tag", "prod")
    d1 = publish(s3env, v1, model)
    d = P2pd(BUILD, str(tmp_path), tool_env(s3env)).start()
    try:
        link = os.path.join(d.cache, "by-name", "served", "prod")
        ref = os.path.join(d.cache, "refs", "served", "prod")
        r = d.ctl("prefetch", model + ":prod", "--wait", "--timeout", "60")
        assert r.returncode == 0, r.stderr + d.tail()
        wait_link(link, "../../releases/" + d0, d)
        wait_link(ref, "../../releases/" + d0, d)
        assert open(os.path.join(link, "config.json")).read() == \
            '{"v": 0}\n'
        # Promote v1: the served path follows after the next prefetch.
        assert ctl(s3env, "tag", model, "prod", d1).returncode == 0
        r = d.ctl("prefetch", model + ":prod", "--wait", "--timeout", "60")
        assert r.returncode == 0, r.stderr + d.tail()
        wait_link(link, "../../releases/" + d1, d)
        assert open(os.path.join(link, "config.json")).read() == \
            '{"v": 1}\n'
        # Roll back: the old release is still cached, the link moves back.
        assert ctl(s3env, "tag", model, "prod", d0).returncode == 0
        st, body = d.api("POST", "/api/v1/prefetch", {"uri": model + ":prod"})
        assert st == 200 and body["digest"] == d0, body
        r = d.ctl("wait", d0, "--timeout", "30")
        assert r.returncode == 0, r.stderr
        wait_link(link, "../../releases/" + d0, d)
        assert open(os.path.join(link, "config.json")).read() == \
            '{"v": 0}\n'
        # Errors: unknown tag -> 404, bad tag name -> 400.
        st, body = d.api("POST", "/api/v1/prefetch", {"uri": model + ":nope"})
        assert st == 404 and body["error"]["code"] == "WS_ES3NOKEY", body
        st, body = d.api("POST", "/api/v1/prefetch", {"uri": model + ":../x"})
        assert st == 400, body
        r = d.ctl("prefetch", model + ":nope")
        assert r.returncode == 4, r.stderr
    finally:
        d.stop()


def test_tracker_prefetch_by_tag(s3env, boto, bucket, tmp_path, monkeypatch):  # noqa: F811
    """The tracker resolves MODEL/:prod once (its own S3 client, from the
    AWS environment), then wants the release by digest with its release URI
    and the selector: a node it selects fetches it; errors are 404 (no such
    tag), 422 (not a digest), 400 (bad tag name)."""
    v0, v1 = versions(tmp_path, 2)
    model = "s3://%s/team/trk/" % bucket
    d0 = publish(s3env, v0, model, "--tag", "prod")
    publish(s3env, v1, model)
    for k, v in tool_env(s3env).items():  # the tracker's S3 settings
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    key = ws.write_cluster_key(str(tmp_path / "cluster.key"))
    os.makedirs(tmp_path / "trk")
    trk = ws.Tracker(BUILD, str(tmp_path / "trk"), key).start()
    p = None
    try:
        sel = {"labels": {"pool": "t"}}
        st, r = trk.request("POST", "/api/v1/prefetch",
                            {"uri": model + ":prod", "selector": sel})
        assert st == 201, (st, r)
        assert r["digest"] == d0 and r["resolved"] == d0, r
        assert r["uri"] == model + d0 + "/", r
        assert r["selector"]["labels"] == {"pool": "t"}, r
        wanted = trk.get("/api/v1/prefetch")[1]["wanted"]
        assert [w["digest"] for w in wanted] == [d0], wanted
        # Again: the same release, already wanted.
        st, r = trk.request("POST", "/api/v1/prefetch",
                            {"uri": model + ":prod", "selector": sel})
        assert st == 200 and r["created"] is False, (st, r)
        # A node the selector picks gets the release by digest.
        p = ws.swarm_peer(BUILD, str(tmp_path), tool_env(s3env), "n1", trk,
                          key, extra=["--label", "pool=t"]).start()
        ws.wait_ready([p], d0, timeout=30)
        r = p.ctl("wait", d0, "--timeout", "10")
        assert r.returncode == 0, r.stderr
        # Errors, and nothing more becomes wanted.
        st, r = trk.request("POST", "/api/v1/prefetch", {"uri": model + ":nope"})
        assert st == 404 and r["error"]["code"] == "WS_ES3NOKEY", (st, r)
        boto.put_object(Bucket=bucket, Key="team/trk/tags/junk",
                        Body=b"not a digest\n")
        st, r = trk.request("POST", "/api/v1/prefetch", {"uri": model + ":junk"})
        assert st == 422, (st, r)
        st, r = trk.request("POST", "/api/v1/prefetch", {"uri": model + ":../x"})
        assert st == 400, (st, r)
        st, r = trk.request("POST", "/api/v1/prefetch",
                            {"uri": model + ":prod", "selector": {"count": -1}})
        assert st == 400, (st, r)
        wanted = trk.get("/api/v1/prefetch")[1]["wanted"]
        assert [w["digest"] for w in wanted] == [d0], wanted
    finally:
        if p:
            p.stop()
        trk.stop()


def test_wait_by_tag_and_hf_ref(s3env, bucket, tmp_path):  # noqa: F811
    """`p2pctl wait MODEL/:prod --hold NAME` resolves the tag, waits on the
    digest and holds it; so does `prefetch MODEL/:prod --wait --hold NAME`
    (through p2pd); a prefetch by tag names the release refs/prod in
    the Hugging Face view (besides refs/main)."""
    v0, = versions(tmp_path, 1)
    model = "s3://%s/team/hfref/" % bucket
    d0 = publish(s3env, v0, model, "--tag", "prod", "--model", "acme/hfref")
    view = tmp_path / "hf-view"
    d = P2pd(BUILD, str(tmp_path), tool_env(s3env),
             extra=["--hf-cache", str(view)]).start()
    try:
        r = d.ctl("wait", model + ":nope", "--timeout", "5")
        assert r.returncode == 4, r.stderr
        r = d.ctl("prefetch", model + ":prod")
        assert r.returncode == 0, r.stderr + d.tail()
        r = d.ctl("wait", model + ":prod", "--timeout", "30",
                  "--hold", "server-a")
        assert r.returncode == 0, r.stderr + d.tail()
        assert d0 in r.stdout, r.stdout
        st, rel = d.api("GET", "/api/v1/releases/" + d0)
        assert [h["name"] for h in rel["holds"]] == ["server-a"], rel
        # An init container without S3 access: p2pd resolves the tag and the
        # hold goes on the digest it resolved.
        r = d.ctl("prefetch", model + ":prod", "--wait", "--timeout", "30",
                  "--hold", "server-b")
        assert r.returncode == 0, r.stderr + d.tail()
        st, rel = d.api("GET", "/api/v1/releases/" + d0)
        assert sorted(h["name"] for h in rel["holds"]) == \
            ["server-a", "server-b"], rel
        r = d.ctl("prefetch", model + ":prod", "--hold", "server-c")
        assert r.returncode == 2, "--hold needs --wait"
        refs = view / "models--acme--hfref" / "refs"
        deadline = time.time() + 10
        while not ((refs / "prod").exists() and (refs / "main").exists()):
            assert time.time() < deadline, d.tail()
            time.sleep(0.05)
        rev = d0[len("sha256-"):][:40]
        assert (refs / "prod").read_text() == rev
        assert (refs / "main").read_text() == rev
        snap = view / "models--acme--hfref" / "snapshots" / rev
        assert (snap / "config.json").read_text() == '{"v": 0}\n'
    finally:
        d.stop()
