#!/usr/bin/python3
"""tools/swarm_lag.py: how far each host of a swarm run lags S3, from logs.

  tools/swarm_lag.py DIR [--rate-mbit B] [--step-s S] [--gets] [--json]

DIR is a swarm run kept by `WS_BENCH_KEEP=1 WS_BENCH_P2PD_LOG=debug
tools/bench swarm ...` (one swarm-h*/p2pd.log per host). From each host's
debug lines (an S3 GET's "origin: GET FILE chunk J (N bytes)", its "s3
req#K" attempt and done, and "chunk J of FILE from NODE: whole MS ms after
its header" for a chunk from a neighbour) it prints, every S seconds after
the first prefetch:

- the bytes S3 has sent, the 10th-percentile, median and 90th-percentile
  host's bytes, and the median and worst host's lag behind S3 (MiB); each
  transfer's bytes are spread evenly over its time, so these are estimates;
- with B, the median host's downlink use: the sum of its transfers' rates
  over 0.956 × B (TCP payload per line rate);

- the transfers arriving at a host (its S3 GETs and chunks from
  neighbours), and with p2pd's "upload #N" lines the uploads under way, of
  them chunks still arriving at the sender (means over the hosts);

and, per chunk from the start of its S3 GET (medians over the chunks): the
GET's duration, when a first neighbour and the median host began taking
it, and when the median and the last host had it whole. The series also
counts the S3 GETs under way.

With B it prints each host's downlink use over the last 1, 2 and 4 s
before its last byte (the median host's and the last host's): how well
the end of a host's download fills its link. --gets lists every S3 GET
(start, end, file and chunk, host) in the order they began.

docs/benchmarks.md (sessions 43 to 45) has runs' numbers.
"""
import argparse
import datetime
import glob
import json
import os
import re
import statistics
import sys

GOODPUT = 0.956  # TCP payload per line rate (1448 of 1514 bytes)
MIB = 1048576.0

RE_GET = re.compile(r"origin: GET (\S+) chunk (\d+) \((\d+) bytes\)")
RE_ATTEMPT = re.compile(r"(s3 req#\d+): attempt 1 ")
RE_DONE = re.compile(r"(s3 req#\d+): done status=0")
RE_PEER = re.compile(r"chunk (\d+) of (\S+) from \w+: whole (\d+) ms after")
RE_UP_START = re.compile(r"upload #(\d+): chunk \d+ to nbr#\d+ \S+ \((held|arriving here)\)")
RE_UP_END = re.compile(r"upload #(\d+): ended")


def stamp(line):
    """The log line's time in seconds, or None."""
    try:
        t = datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        return None
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


def parse_host(path):
    """(first prefetch time, S3 GETs, chunks from neighbours, uploads) of
    one log: GETs as (file, chunk, bytes, start, end), chunks as (file,
    chunk, start, end), uploads as (start, end or None, still arriving
    here)."""
    prefetch, gets, peers = None, [], []
    pending, started, ups = None, {}, {}
    with open(path, errors="replace") as f:
        for line in f:
            t = stamp(line)
            if t is None:
                continue
            if prefetch is None and "prefetch from" in line:
                prefetch = t
            m = RE_GET.search(line)
            if m:
                pending = (m.group(1), int(m.group(2)), int(m.group(3)), t)
                continue
            m = RE_ATTEMPT.search(line)
            if m and pending is not None:
                started[m.group(1)] = pending
                pending = None
                continue
            m = RE_DONE.search(line)
            if m and m.group(1) in started:
                name, j, n, t0 = started.pop(m.group(1))
                gets.append((name, j, n, t0, t))
                continue
            m = RE_PEER.search(line)
            if m:
                took = int(m.group(3)) / 1000.0
                peers.append((m.group(2), int(m.group(1)), t - took, t))
                continue
            m = RE_UP_START.search(line)
            if m:
                ups[m.group(1)] = [t, None, m.group(2) != "held"]
                continue
            m = RE_UP_END.search(line)
            if m and m.group(1) in ups:
                ups[m.group(1)][1] = t
    return prefetch, gets, peers, [tuple(u) for u in ups.values()]


def progress(transfers, t):
    """Bytes of (bytes, start, end) transfers done by t, each spread evenly."""
    done = 0.0
    for n, a, b in transfers:
        if t >= b:
            done += n
        elif t > a:
            done += n * (t - a) / (b - a)
    return done


def rate_at(transfers, t):
    """Bytes per second of the (bytes, start, end) transfers under way at t."""
    return sum(n / (b - a) for n, a, b in transfers if a <= t < b and b > a)


def quantile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def analyse(dirpath, rate_mbit=0, step_s=2.0):
    logs = sorted(glob.glob(os.path.join(dirpath, "swarm-h*", "p2pd.log")))
    if not logs:
        raise SystemExit(f"swarm_lag: no swarm-h*/p2pd.log under {dirpath}")
    hosts = {os.path.basename(os.path.dirname(p)): parse_host(p) for p in logs}
    starts = [h[0] for h in hosts.values() if h[0] is not None]
    if not starts:
        raise SystemExit("swarm_lag: no prefetch line (run with WS_BENCH_P2PD_LOG=debug)")
    t0 = min(starts)
    size = {}
    gets = []
    for h, (_, hg, _, _) in hosts.items():
        for name, j, n, a, b in hg:
            size[(name, j)] = n
            gets.append((name, j, n, a - t0, b - t0, h))
    gets.sort(key=lambda g: g[3])
    if not gets:
        raise SystemExit("swarm_lag: no S3 GET with its done line (debug logs?)")
    s3 = [(n, a, b) for _, _, n, a, b, _ in gets]
    mine = {}
    for h, (_, hg, hp, _) in hosts.items():
        own = [(n, a - t0, b - t0) for _, _, n, a, b in hg]
        got = [(size[(name, j)], a - t0, b - t0) for name, j, a, b in hp if (name, j) in size]
        mine[h] = own + got
    end = max(b for v in mine.values() for _, _, b in v)
    # Uploads under way (p2pd's "upload #N" debug lines), an unended one
    # to the end of the run.
    ups = {h: [(a - t0, (b if b is not None else t0 + end) - t0, live)
               for a, b, live in hu] for h, (_, _, _, hu) in hosts.items()}
    has_ups = any(ups.values())
    rows = []
    t = step_s
    goodput = rate_mbit * 1e6 / 8 * GOODPUT if rate_mbit else 0
    while t <= end + step_s:
        sent = progress(s3, t)
        held = [progress(v, t) for v in mine.values()]
        row = {"t_s": round(t, 2), "s3_mib": round(sent / MIB, 2),
               "host_p10_mib": round(quantile(held, 0.1) / MIB, 2),
               "host_median_mib": round(statistics.median(held) / MIB, 2),
               "host_p90_mib": round(quantile(held, 0.9) / MIB, 2),
               "lag_median_mib": round((sent - statistics.median(held)) / MIB, 2),
               "lag_worst_mib": round((sent - min(held)) / MIB, 2),
               "gets_under_way": sum(1 for _, a, b in s3 if a <= t < b),
               "arriving_mean": round(statistics.mean(
                   sum(1 for _, a, b in v if a <= t < b) for v in mine.values()), 2)}
        if has_ups:
            row["uploads_mean"] = round(statistics.mean(
                sum(1 for a, b, _ in u if a <= t < b) for u in ups.values()), 2)
            row["uploads_arriving_mean"] = round(statistics.mean(
                sum(1 for a, b, live in u if live and a <= t < b) for u in ups.values()), 2)
        if goodput:
            fetching = [v for v in mine.values() if v and max(b for _, _, b in v) > t]
            if fetching:
                row["down_use_median"] = round(statistics.median(rate_at(v, t) / goodput for v in fetching), 3)
        rows.append(row)
        t += step_s
    spread = []
    for name, j, n, a, b, _ in gets:
        took = sorted((pa - t0, pb - t0) for pn, pj, pa, pb in
                      (x for _, _, hp, _ in hosts.values() for x in hp) if (pn, pj) == (name, j))
        if not took:
            continue
        begun = sorted(x for x, _ in took)
        whole = sorted(y for _, y in took)
        spread.append((b - a, begun[0] - a, begun[len(begun) // 2] - a,
                       whole[len(whole) // 2] - a, whole[-1] - a))
    names = ["get_s", "first_start_s", "median_start_s", "median_whole_s", "last_whole_s"]
    chunks = {k: round(statistics.median(s[i] for s in spread), 2) for i, k in enumerate(names)} if spread else {}
    res = {"hosts": len(hosts), "s3_gets": len(gets), "series": rows, "chunks": chunks,
           "gets": [{"file": name, "chunk": j, "host": h, "start_s": round(a, 3), "end_s": round(b, 3)}
                    for name, j, _, a, b, h in gets]}
    if goodput:
        res["tail"] = tail_use(mine, goodput)
    return res


def tail_use(mine, goodput):
    """Each host's downlink use over the last 1, 2 and 4 s before its last
    byte: the median over the hosts and the last host's."""
    use = []
    for v in (v for v in mine.values() if v):  # a host that took nothing has no end
        end = max(b for _, _, b in v)
        use.append((end, [(progress(v, end) - progress(v, end - w)) / (w * goodput) for w in (1, 2, 4)]))
    last = max(use)[1]
    return {f"{k}_last_{w}s": round(x, 3)
            for i, w in enumerate((1, 2, 4))
            for k, x in (("median", statistics.median(u[i] for _, u in use)), ("last_host", last[i]))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--rate-mbit", type=float, default=0, help="the hosts' link rate (for downlink use)")
    ap.add_argument("--step-s", type=float, default=2.0)
    ap.add_argument("--gets", action="store_true", help="list every S3 GET")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.step_s <= 0:
        ap.error("--step-s must be above 0")
    res = analyse(a.dir, a.rate_mbit, a.step_s)
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"{res['hosts']} hosts, {res['s3_gets']} S3 GETs; MiB, seconds after the first prefetch")
    if a.gets:
        print("  start     end  file chunk  host")
        for g in res["gets"]:
            print(f"{g['start_s']:7.2f} {g['end_s']:7.2f}  {g['file']} {g['chunk']}  {g['host']}")
    print("    s   S3 sent  host p10  median   p90  lag median  worst  GETs  arriving  uploads"
          "  (arriving)  down use")
    for r in res["series"]:
        use = f"{r['down_use_median']:8.2f}" if "down_use_median" in r else ""
        up = (f"{r['uploads_mean']:8.2f} {r['uploads_arriving_mean']:11.2f}"
              if "uploads_mean" in r else f"{'-':>8} {'-':>11}")
        print(f"{r['t_s']:5.1f} {r['s3_mib']:9.1f} {r['host_p10_mib']:9.1f} {r['host_median_mib']:7.1f}"
              f" {r['host_p90_mib']:5.1f} {r['lag_median_mib']:11.1f} {r['lag_worst_mib']:6.1f}"
              f" {r['gets_under_way']:5d} {r['arriving_mean']:9.2f} {up} {use}")
    c = res["chunks"]
    if c:
        print(f"a chunk from its S3 GET's start (medians): GET {c['get_s']} s, first neighbour starts"
              f" {c['first_start_s']} s, median host starts {c['median_start_s']} s, median host whole"
              f" {c['median_whole_s']} s, last host whole {c['last_whole_s']} s")
    t = res.get("tail")
    if t:
        print("downlink use before a host's last byte, over 1 / 2 / 4 s: median host"
              f" {t['median_last_1s']} / {t['median_last_2s']} / {t['median_last_4s']},"
              f" last host {t['last_host_last_1s']} / {t['last_host_last_2s']} / {t['last_host_last_4s']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
