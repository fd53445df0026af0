"""The Hugging Face layout, both ways, against radosgw and a real p2pd.

In: `p2pctl publish` takes a hub cache snapshot directory made here the way
huggingface_hub lays one out (models--ORG--NAME/snapshots/<rev>/ of symlinks
into ../../blobs/<sha256>), follows those links but nothing outside the
repository folder, leaves out .gitattributes and .cache/ (hidden) and what
--exclude names (the duplicate original/*.pth set), and names the model
ORG/NAME. --include keeps only what it matches.

Out: p2pd --hf-cache DIR keeps a hub cache view of the release once READY.
It is read by an independent client, the npm package @huggingface/hub
(installed under the build directory when missing): its cache scanner must
list the repository, the revision (refs/main) and every top-level file with
its size; every file of the release is read through the view byte for byte
and each .safetensors header is parsed. Evicting a release takes its
snapshot, refs and unshared blobs out of the view (no link dangles, the
scanner lists no revision for it), and the last one the repository folder.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import BUILD

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ws import P2pd, write_safetensors  # noqa: E402

P2PCTL = os.path.join(BUILD, "tools", "p2pctl")
MiB = 1 << 20
HF_HUB = "@huggingface/hub@2"  # scanCacheDir: dist/src/lib/cache-management.d.ts
NPM_DIR = os.environ.get("WS_HF_NPM_DIR") or os.path.join(BUILD, "hf-npm")
REPO = "models--acme--tiny-llm"
WANT = ["config.json", "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors", "tokenizer.json",
        "tokenizer/special_tokens_map.json"]


@pytest.fixture(scope="module")
def hf_hub():
    """node_modules with @huggingface/hub, installed once per build dir."""
    mod = os.path.join(NPM_DIR, "node_modules", "@huggingface", "hub")
    if not os.path.isfile(os.path.join(mod, "package.json")):
        npm = shutil.which("npm")
        assert npm, "npm missing: run tools/bootstrap (nodejs, npm)"
        os.makedirs(NPM_DIR, exist_ok=True)
        r = subprocess.run([npm, "install", "--prefix", NPM_DIR, "--no-audit",
                            "--no-fund", "--no-save", HF_HUB],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    return os.path.join(NPM_DIR, "node_modules")


def blob(repo, data):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(repo, "blobs", h), "wb") as f:
        f.write(data)
    return h


def link(snap, name, h):
    path = os.path.join(snap, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(os.path.relpath(os.path.join(snap, "..", "..", "blobs", h),
                               os.path.dirname(path)), path)


@pytest.fixture
def snapshot(tmp_path):
    """A hub cache snapshot as huggingface_hub writes it; returns its path
    and the bytes of every file that must be published."""
    repo = tmp_path / "hub" / REPO
    for d in ("blobs", "refs", "snapshots"):
        (repo / d).mkdir(parents=True)
    rev = "0123456789abcdef0123456789abcdef01234567"
    snap = repo / "snapshots" / rev
    snap.mkdir()
    (repo / "refs" / "main").write_text(rev)
    files = {}
    for i, n in enumerate(WANT[1:3]):
        p = str(tmp_path / n)
        write_safetensors(p, (3 - i) * MiB + 4 * i, "hf-%d" % i)
        files[n] = open(p, "rb").read()
        os.unlink(p)
    files["config.json"] = b'{"model_type": "llama", "hidden_size": 64}\n'
    files["tokenizer.json"] = json.dumps({"v": list(range(3000))}).encode()
    files["tokenizer/special_tokens_map.json"] = b'{"bos": "<s>"}\n'
    extra = {".gitattributes": b"*.safetensors filter=lfs\n",
             "original/consolidated.00.pth": os.urandom(MiB + 1),
             "original/params.json": b'{"dim": 64}\n'}
    for name, data in list(files.items()) + list(extra.items()):
        link(str(snap), name, blob(str(repo), data))
    # huggingface_hub's own metadata inside a local dir: a real file
    meta = snap / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    (meta / "config.json.metadata").write_text(rev + "\n")
    return snap, files


def ctl(env, *args, timeout=300):
    return subprocess.run([P2PCTL, *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


SCAN_JS = r"""
const hub = require("@huggingface/hub");
hub.scanCacheDir(process.argv[1]).then(
  (info) => { process.stdout.write(JSON.stringify(info)); },
  (err) => { console.error(err); process.exit(1); });
"""


def scan(node_modules, view):
    node = shutil.which("node")
    assert node, "node missing: run tools/bootstrap (nodejs)"
    r = subprocess.run([node, "-e", SCAN_JS, view], capture_output=True,
                       text=True, timeout=60,
                       env={**os.environ, "NODE_PATH": node_modules})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_hf_snapshot_publish_and_view(rgw, s3env, snapshot, hf_hub, tmp_path):
    snap, files = snapshot
    bucket = rgw.bucket()
    p = ctl(s3env, "publish", str(snap), "s3://%s/hf/tiny/" % bucket,
            "--exclude", "original/**", "--chunk-size", "1Mi", "--json")
    assert p.returncode == 0, p.stderr
    digest = json.loads(p.stdout.strip().splitlines()[-1])["digest"]
    mbytes = rgw.client().get_object(
        Bucket=bucket, Key="hf/tiny/%s/manifest.json" % digest)["Body"].read()
    m = json.loads(mbytes)
    assert m["model"] == "acme/tiny-llm"
    assert sorted(f["name"] for f in m["files"]) == sorted(WANT)
    for f in m["files"]:
        assert f["size"] == len(files[f["name"]])
        assert f["sha256"] == hashlib.sha256(files[f["name"]]).hexdigest()

    view = tmp_path / "hf-view"
    d = P2pd(BUILD, str(tmp_path), s3env, extra=["--hf-cache", str(view)])
    d.start()
    try:
        r = d.ctl("prefetch", "s3://%s/hf/tiny/%s/" % (bucket, digest),
                  "--wait", "--timeout", "60s")
        assert r.returncode == 0, r.stdout + r.stderr + d.tail()
        rev = digest[len("sha256-"):][:40]
        ref = view / REPO / "refs" / "main"
        deadline = time.time() + 20
        while not ref.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert ref.exists(), d.tail()
        assert ref.read_text() == rev

        info = scan(hf_hub, str(view))
        assert info["warnings"] == []
        assert len(info["repos"]) == 1
        repo = info["repos"][0]
        assert repo["id"] == {"name": "acme/tiny-llm", "type": "model"}
        assert [v["commitOid"] for v in repo["revisions"]] == [rev]
        assert repo["revisions"][0]["refs"] == ["main"]
        # the scanner lists the snapshot's top level (it skips folders)
        got = {os.path.basename(f["path"]): f["blob"]["size"]
               for f in repo["revisions"][0]["files"]}
        assert got == {n: len(files[n]) for n in WANT if "/" not in n}
        assert repo["size"] == sum(v for v in got.values())

        sdir = view / REPO / "snapshots" / rev
        for n in WANT:
            path = sdir / n
            target = os.readlink(path)
            h = hashlib.sha256(files[n]).hexdigest()
            assert os.path.normpath(os.path.join(os.path.dirname(n), target)) \
                == os.path.join("..", "..", "blobs", h)
            assert path.read_bytes() == files[n]
            if n.endswith(".safetensors"):
                raw = path.read_bytes()
                hl = int.from_bytes(raw[:8], "little")
                header = json.loads(raw[8:8 + hl])
                end = header["weight"]["data_offsets"][1]
                assert 8 + hl + end == len(raw)

        # A second release sharing blobs; evicting the first takes its
        # snapshot out (the shared blobs stay), evicting the second the
        # whole repository folder. No link ever dangles.
        p = ctl(s3env, "publish", str(snap), "s3://%s/hf/tiny/" % bucket,
                "--exclude", "original/**", "--exclude", "tokenizer.json",
                "--chunk-size", "1Mi", "--json")
        assert p.returncode == 0, p.stderr
        digest2 = json.loads(p.stdout.strip().splitlines()[-1])["digest"]
        rev2 = digest2[len("sha256-"):][:40]
        r = d.ctl("prefetch", "s3://%s/hf/tiny/%s/" % (bucket, digest2),
                  "--wait", "--timeout", "60s")
        assert r.returncode == 0, r.stdout + r.stderr + d.tail()
        wait_for(lambda: ref.exists() and ref.read_text() == rev2, d)
        r = d.ctl("evict", digest)
        assert r.returncode == 0, r.stdout + r.stderr + d.tail()
        # the snapshot leaves snapshots/ by a rename to .trash-*, then goes
        wait_for(lambda: not sdir.exists() and not any(
            e.startswith(".") for e in os.listdir(view / REPO)), d)
        assert no_dangling(view) > 0
        assert ref.read_text() == rev2
        repo = scan(hf_hub, str(view))["repos"][0]
        assert [v["commitOid"] for v in repo["revisions"]] == [rev2]
        blobs = sorted(os.listdir(view / REPO / "blobs"))
        assert blobs == sorted(hashlib.sha256(files[n]).hexdigest()
                               for n in WANT if n != "tokenizer.json")
        r = d.ctl("evict", digest2)
        assert r.returncode == 0, r.stdout + r.stderr + d.tail()
        wait_for(lambda: not (view / REPO).exists(), d)
        assert no_dangling(view) == 0
        assert scan(hf_hub, str(view))["repos"] == []
    finally:
        assert d.stop() == 0, d.tail()


def wait_for(cond, d, timeout=20):
    deadline = time.time() + timeout
    while not cond() and time.time() < deadline:
        time.sleep(0.05)
    assert cond(), d.tail()


def no_dangling(top):
    """Asserts every link under top resolves; returns how many there are."""
    n = 0
    for base, dirs, names in os.walk(top):
        for name in dirs + names:
            path = os.path.join(base, name)
            if os.path.islink(path):
                assert os.path.exists(path), "dangling: " + path
                n += 1
    return n


def test_hf_include_and_outside_links(snapshot, tmp_path):
    snap, files = snapshot
    env = dict(os.environ)
    r = ctl(env, "manifest", "create", str(snap), "--include", "*.safetensors",
            "--include", "tokenizer/**")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["model"] == "acme/tiny-llm"
    assert [f["name"] for f in m["files"]] == sorted(
        n for n in WANT if n.endswith(".safetensors") or "/" in n)
    # a link out of the repository folder (into another repo) is refused
    other = tmp_path / "hub" / "models--evil--x" / "blobs"
    other.mkdir(parents=True)
    (other / "b").write_bytes(b"x")
    os.symlink("../../../models--evil--x/blobs/b", snap / "stolen.bin")
    r = ctl(env, "manifest", "create", str(snap))
    assert r.returncode == 1
    assert "stolen.bin: symlink escapes the directory" in r.stderr
