"""The tracker's dashboard as a person sees it: headless Chromium loads the
page from a real p2p-tracker and must show live data (the page's script
runs, polls /api/v1/swarms and renders the wanted release)."""
import re
import subprocess
import tempfile

from conftest import BUILD
import ws


def dom_after(url, ms=4000):
    with tempfile.TemporaryDirectory() as prof:
        r = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={prof}",
             f"--virtual-time-budget={ms}", "--dump-dom", url],
            capture_output=True, text=True, timeout=60)
    return r.stdout


def test_dashboard_renders_live_state(tmp_path):
    key = ws.write_cluster_key(str(tmp_path / "k"))
    trk = ws.Tracker(BUILD, str(tmp_path), key).start()
    try:
        digest = "sha256-" + "ab" * 32
        trk.prefetch(uri=f"s3://models/demo/m/{digest}/")
        dom = dom_after(f"http://127.0.0.1:{trk.http}/")
        assert "weightswarm tracker" in dom
        status = re.search(r'id="status"[^>]*>([^<]*)<', dom)
        assert status is not None, dom[:2000]
        assert status.group(1).startswith("live"), status.group(1)
        # the wanted table was rendered from the API (a <td>, not the script)
        assert re.search(r"<td[^>]*>" + digest + "</td>", dom), dom[-3000:]
    finally:
        trk.stop()
