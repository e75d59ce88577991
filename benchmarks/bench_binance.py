"""Binance paths: recorded JSONL -> .lobc conversion (level updates/s), .lobc
replay (records/s), and the capture's CPU per 1,000 messages against the
local fake Binance (the capture runs in its own process; its CPU time comes
from getrusage of that child, the server's is not counted; "running": the CPU
time the capture reports from the start of its run, without start-up and imports).

    .venv/bin/python benchmarks/bench_binance.py [--reps 3] [--rate 4000] [--only convert,replay,capture]
    .venv/bin/python benchmarks/bench_binance.py --only long [--copies 10]   # a long file: rate, peak RSS

Uses the real recordings in data/real/binance (hftbacktest). Prints a
Markdown table for benchmarks/RESULTS.md. Speed is never asserted.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# as the command line does (lobreplay/cli/main.py): numpy's OpenBLAS would start a thread per core
# at import that spins for work that never comes, beside the conversions and replays timed here
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["LOBREPLAY_CACHE_DIR"] = "off"  # every replay here scans its file: pass 1 is timed, not read from the sizing cache

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # fake_binance, and conftest: where the real recordings are

from conftest import REAL_BINANCE  # noqa: E402

DATA = REAL_BINANCE / "hftbacktest"

import numpy as np  # noqa: E402

from lobreplay.l2 import lobc  # noqa: E402
from lobreplay.binance.convert import convert  # noqa: E402
from lobreplay.l2.replay import replay_lobc  # noqa: E402

FILES = {"spot 2024-08-08": DATA / "spot" / "btcusdt_20240808.gz",
         "usdm 2024-08-08": DATA / "usdm" / "btcusdt_20240808.gz"}


def bench_convert(src: Path, dst: Path) -> dict:
    """One conversion into a path that does not exist yet, as a first conversion writes it
    (written over an existing file, the rename at the end costs more on ext4, which then
    starts writing the new file back: ~3 ms more for spot, ~14 ms for USD-M on the stop-23 VM)."""
    dst.unlink(missing_ok=True)
    t = time.perf_counter()
    st = convert(str(src), str(dst))
    secs = time.perf_counter() - t
    st = st if isinstance(st, dict) else vars(st)
    return {"seconds": secs, "cpu_seconds": st["cpu_seconds"], "level_updates": st["level_updates"],
            "messages": st["lines"],
            "records": len(lobc.read(dst).records)}


def bench_replay(src: Path, out: Path) -> dict:
    """The whole `lobc replay` (read, CRC and SHA-256 of the file, both passes, every report
    written); records/s counts every record of the file."""
    n = len(lobc.read(src).records)
    t = time.perf_counter()
    s = replay_lobc(str(src), str(out), None, force=True) if _takes_force() else replay_lobc(str(src), str(out))
    secs = time.perf_counter() - t
    return {"seconds": secs, "records": n, "match": s.get("ticker", s.get("bookticker")),
            "pass2_seconds": s["pass2"]["seconds"]}


def _takes_force() -> bool:
    import inspect
    return "force" in inspect.signature(replay_lobc).parameters


def bench_capture(market: str, seconds: float, rate: float) -> dict:
    """The capture as a child process against the fake server (in this process)."""
    from fake_binance import ThreadedFake, recorded_script
    with tempfile.TemporaryDirectory() as d, ThreadedFake(market, [recorded_script(market)], rate=rate) as fb:
        out = Path(d) / "cap.lobc"
        stats = Path(d) / "stats.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "lobreplay", "capture", "binance", "--symbol", "btcusdt",
                        "--market", market, "--seconds", str(seconds), "-o", str(out), "--trades", "--book-ticker",
                        "--ws-url", fb.ws_url, "--rest-url", fb.rest_url, "--no-progress",
                        "--stats-json", str(stats)], check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        st = json.loads(stats.read_text())
        msgs = st.get("messages") or st.get("messages_received")
        return {"cpu_s": cpu, "run_cpu_s": st["cpu_seconds"], "messages": msgs, "records": len(lobc.read(out).records),
                "stats": st}


def long_file(src: Path, dst: Path, copies: int) -> int:
    """`copies` copies of a recording one after another as one continuous capture (update ids and
    times shifted past the copy before), for the replay's cost and memory on a long file."""
    d = lobc.read(src)
    r, m = d.records, d.meta
    ids = np.concatenate([r[f][r[f] != 0] for f in ("first_id", "last_id", "prev_id")])
    id_span = int(ids.max() - ids.min()) + 1
    t_span = int(r["recv_ns"].max() - r["recv_ns"].min()) + 1
    with lobc.LobcWriter(dst, venue=m["venue"], market=m["market"], symbols=m["symbols"],
                         price_scale=m["price_scale"], qty_scale=m["qty_scale"], flush_records=65536) as w:
        for i in range(copies):
            c = r.copy()
            for f, step in (("first_id", id_span), ("last_id", id_span), ("prev_id", id_span),
                            ("recv_ns", t_span), ("exch_ns", t_span)):
                nz = c[f] != 0
                c[f][nz] += c[f].dtype.type(i * step)
            w.add_many(c)
    return w.records


def bench_long(path: Path, out: Path) -> dict:
    """The whole command as a user runs it, in a fresh process: wall time and peak RSS from its
    summary.json."""
    subprocess.run([sys.executable, "-m", "lobreplay", "lobc", "replay", str(path), "-o", str(out), "--force"], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    s = json.loads((out / "summary.json").read_text())
    return {"seconds": s["wall_seconds"], "records": s["records"], "rss": s["peak_rss_bytes"],
            "pass2": s["pass2"]["seconds"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=float, default=4000.0, help="messages/s the fake server sends")
    ap.add_argument("--seconds", type=float, default=5.0, help="capture duration")
    ap.add_argument("--only", default="convert,replay,capture",
                    help="comma-separated: convert, replay, capture, long (the USD-M recording --copies times "
                         "over as one file: the replay's rate and peak RSS on a long file, fresh processes)")
    ap.add_argument("--copies", type=int, default=10, help="copies of the USD-M recording in the long file")
    args = ap.parse_args()
    compileall.compile_dir(ROOT / "lobreplay", quiet=1)  # as installed (pip compiles bytecode)
    only = {w.strip() for w in args.only.split(",")}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for name, src in FILES.items():
            conv = [bench_convert(src, d / "x.lobc") for _ in range(args.reps if "convert" in only else 1)]
            secs = statistics.median(c["seconds"] for c in conv)
            c0 = conv[0]
            if "convert" in only:
                rows.append((f"convert {name}", f"{c0['level_updates'] / secs / 1e6:.2f} M level updates/s",
                             f"{c0['messages'] / secs / 1e3:.0f} k messages/s",
                             f"{secs:.3f} s (CPU {statistics.median(c['cpu_seconds'] for c in conv):.3f} s)"))
            if "replay" in only:
                bench_replay(d / "x.lobc", d / "out")  # warm-up: imports, first-use costs
                rep = [bench_replay(d / "x.lobc", d / "out") for _ in range(args.reps)]
                secs = statistics.median(r["seconds"] for r in rep)
                p2 = statistics.median(r["pass2_seconds"] for r in rep)
                rows.append((f"replay {name} .lobc", f"{rep[0]['records'] / secs / 1e6:.2f} M records/s",
                             f"{rep[0]['records']:,} records", f"{secs * 1e3:.0f} ms (pass 2: {p2 * 1e3:.0f} ms, "
                             f"{rep[0]['records'] / p2 / 1e6:.1f} M records/s)" if p2 else f"{secs:.2f} s"))
        if "long" in only:
            convert(str(FILES["usdm 2024-08-08"]), str(d / "usdm.lobc"))
            n = long_file(d / "usdm.lobc", d / "long.lobc", args.copies)
            size = (d / "long.lobc").stat().st_size
            one = [bench_long(d / "usdm.lobc", d / "out1") for _ in range(args.reps)]
            many = [bench_long(d / "long.lobc", d / "outn") for _ in range(args.reps)]
            for label, runs in (("usdm 2024-08-08 .lobc", one),
                                (f"{args.copies} x usdm as one .lobc ({n:,} records, {size / 1e6:.0f} MB)", many)):
                secs = statistics.median(r["seconds"] for r in runs)
                rows.append((f"replay {label}, whole command", f"{runs[0]['records'] / secs / 1e6:.2f} M records/s",
                             f"{runs[0]['records']:,} records",
                             f"{secs:.3f} s; peak RSS {max(r['rss'] for r in runs) / 2**20:.0f} MiB"))
        for market in (("spot", "usdm") if "capture" in only else ()):
            caps = [bench_capture(market, args.seconds, args.rate) for _ in range(args.reps)]
            per = statistics.median(c["cpu_s"] / c["messages"] * 1000 for c in caps if c["messages"])
            run = statistics.median(c["run_cpu_s"] / c["messages"] * 1000 for c in caps if c["messages"])
            rows.append((f"capture {market} (fake server, {args.rate:.0f} msg/s offered)",
                         f"{per * 1e3:.1f} ms CPU per 1,000 messages ({run * 1e3:.1f} ms running)",
                         f"{caps[0]['messages']:,} messages in {args.seconds:.0f} s",
                         f"{statistics.median(c['cpu_s'] for c in caps):.2f} s CPU (incl. start-up; running: "
                         f"{statistics.median(c['run_cpu_s'] for c in caps):.2f} s)"))
    print(f"\nmachine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}; median of {args.reps}\n")
    print("| what | rate | size | time |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
