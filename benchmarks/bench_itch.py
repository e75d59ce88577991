"""ITCH benchmark: decode only, and the full replay with reports off and on,
on generated days (made once, cached in benchmarks/build/).

    .venv/bin/python benchmarks/bench_itch.py                 # 5M-message wide and narrow days
    .venv/bin/python benchmarks/bench_itch.py --sizes 5,50    # also a 50M-message wide day
    .venv/bin/python benchmarks/bench_itch.py --reps 3

Each measurement runs in a fresh subprocess (so peak RSS is that run's own),
repetitions alternate between configurations, and the median is printed.
Prints a Markdown table for benchmarks/RESULTS.md. Speed is never asserted.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "benchmarks" / "build"
PY = sys.executable
os.environ["LOBREPLAY_CACHE_DIR"] = "off"  # every replay here scans its file: pass 1 is timed, not read from the sizing cache

DAYS = {  # name -> (symbols, resting orders per symbol)
    "wide": (1000, 350),
    "narrow": (8, 2000),
}

DECODE = r"""
import sys, time, resource, numpy as np
from lobreplay.itch.reader import ItchFile
from lobreplay.itch.decode import decode
t = time.perf_counter(); f = ItchFile(sys.argv[1]); n = 0
for c in f.chunks():
    cols = decode(c); n += c.n
dt = time.perf_counter() - t
print(n, f.stats.bytes, dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

FRAME = r"""
import sys, time, resource
from lobreplay.itch.reader import ItchFile
t = time.perf_counter(); f = ItchFile(sys.argv[1]); n = 0
for c in f.chunks():
    n += c.n
dt = time.perf_counter() - t
print(n, f.stats.bytes, dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def make_day(name: str, millions: int) -> Path:
    symbols, resting = DAYS[name]
    path = BUILD / f"20191230.{name}_{millions}M.itch"
    if not path.exists():
        print(f"generating {path.name} ({millions}M messages, {symbols} symbols) ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        subprocess.run([PY, "-m", "lobreplay.itch.synth", str(path), "--messages", str(millions * 1_000_000),
                        "--symbols", str(symbols), "--seed", "7", "--resting-per-symbol", str(resting)],
                       check=True, stdout=subprocess.DEVNULL)
        print(f"  {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return path


def run_script(script: str, path: Path) -> dict:
    # (OPENBLAS_NUM_THREADS=1 as the command line sets it: numpy's OpenBLAS threads would spin
    # beside the timed decode)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    out = subprocess.run([PY, "-c", script, str(path)], check=True, capture_output=True, text=True,
                         env=env).stdout.split()
    n, nbytes, secs, rss = int(out[0]), int(out[1]), float(out[2]), int(out[3])
    return {"messages": n, "bytes": nbytes, "seconds": secs, "rss": rss}


def run_replay(path: Path, args: list[str]) -> dict:
    out = BUILD / "replay_out"
    subprocess.run([PY, "-m", "lobreplay", "itch", "replay", str(path), "-o", str(out), "--force", "--no-progress",
                    *args], check=True, stdout=subprocess.DEVNULL)
    s = json.loads((out / "summary.json").read_text())
    return {"messages": s["messages"], "bytes": s["bytes"], "seconds": s["pass1"]["seconds"] + s["pass2"]["seconds"],
            "pass1": s["pass1"]["seconds"], "pass2": s["pass2"]["seconds"], "wall": s["wall_seconds"],
            "rss": s["peak_rss_bytes"], "desyncs": s["desyncs"], "books": s["books"],
            "capacity": s["book_capacity"]}


CONFIGS = {
    "frame only (C)": lambda p: run_script(FRAME, p),
    "decode all types (numpy)": lambda p: run_script(DECODE, p),
    "replay, reports off, no timing": lambda p: run_replay(p, ["--no-reports", "--no-timing"]),
    "replay, all reports, timing": lambda p: run_replay(p, []),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5", help="comma-separated sizes of the wide day in millions (5,50)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--configs", help="comma-separated config numbers (1-based) to run")
    args = ap.parse_args()
    compileall.compile_dir(ROOT / "lobreplay", quiet=1)  # as installed (pip compiles bytecode)
    BUILD.mkdir(parents=True, exist_ok=True)
    days = [("wide", int(m)) for m in args.sizes.split(",")] + [("narrow", 5)]
    files = {(n, m): make_day(n, m) for n, m in days}
    configs = list(CONFIGS.items())
    if args.configs:
        configs = [configs[int(i) - 1] for i in args.configs.split(",")]
    results: dict = {}
    for rep in range(args.reps):  # alternate: every config on every file, then again
        for (n, m), path in files.items():
            for name, fn in configs:
                r = fn(path)
                results.setdefault((n, m, name), []).append(r)
                print(f"rep {rep + 1} {n} {m}M {name}: {r['messages'] / r['seconds'] / 1e6:.2f} M msg/s, "
                      f"{r['rss'] / 2**20:.0f} MiB", file=sys.stderr, flush=True)
    print(f"\nmachine: {os.cpu_count()} CPUs; python {sys.version.split()[0]}; median of {args.reps}\n")
    print("| file | what | M msg/s | MB/s | seconds | pass 1 s | pass 2 s | peak RSS MiB | desyncs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (n, m, name), rs in results.items():
        secs = statistics.median(r["seconds"] for r in rs)
        r0 = rs[0]
        p1 = statistics.median(r["pass1"] for r in rs) if "pass1" in r0 else None
        p2 = statistics.median(r["pass2"] for r in rs) if "pass2" in r0 else None
        rss = statistics.median(r["rss"] for r in rs)
        print(f"| {n} {m}M | {name} | {r0['messages'] / secs / 1e6:.2f} | {r0['bytes'] / secs / 1e6:.0f} | "
              f"{secs:.2f} | {'' if p1 is None else f'{p1:.2f}'} | {'' if p2 is None else f'{p2:.2f}'} | "
              f"{rss / 2**20:.0f} | {r0.get('desyncs', '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
