"""ITCH benchmark: decode only, and the full replay with reports off and on,
on generated days (made once, cached in benchmarks/build/).

    .venv/bin/python benchmarks/bench_itch.py                 # 5M-message wide and narrow days
    .venv/bin/python benchmarks/bench_itch.py --sizes 5,50    # also a 50M-message wide day
    .venv/bin/python benchmarks/bench_itch.py --reps 3
    .venv/bin/python benchmarks/bench_itch.py --full --reps 1   # the full-size day (270M, C generator)

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


SEED = 7  # the generator's seed of the days RESULTS.md quotes; others are days of the same kind


def make_day(name: str, millions: int, seed: int = SEED) -> Path:
    symbols, resting = DAYS[name]
    path = BUILD / f"20191230.{name}_{millions}M{'' if seed == SEED else f'_seed{seed}'}.itch"
    if not path.exists():
        print(f"generating {path.name} ({millions}M messages, {symbols} symbols) ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        subprocess.run([PY, "-m", "lobreplay.testing.itch_synth", str(path), "--messages", str(millions * 1_000_000),
                        "--symbols", str(symbols), "--seed", str(seed), "--resting-per-symbol", str(resting)],
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


# ---- the full-size day (issue 25): made once by the C generator, replayed with /usr/bin/time ----

FULL_MESSAGES = 270_000_000
GIB = 2**30


def make_full_day(far_off: str, millions: int) -> Path:
    """The full-size day, cached; only one copy is kept (a raw 270M day is ~8 GB).
    far_off: "all", "no-max-price" (no $199,999.99 orders) or "none" (no far-off orders)."""
    name = f"20191230.full_day_{millions}M{'' if far_off == 'all' else '_' + far_off.replace('-', '')}.itch"
    path = BUILD / name
    if not path.exists():
        for old in BUILD.glob("20191230.full_day_*.itch"):
            old.unlink()
        print(f"generating {name} (C generator, {millions}M messages, 9,000 symbols) ...", file=sys.stderr,
              flush=True)
        cmd = [PY, "-m", "lobreplay.testing.itch_synth", str(path), "--preset", "full-day", "--seed", "1",
               "--messages", str(millions * 1_000_000)]
        cmd += {"all": [], "no-max-price": ["--no-max-price"],
                "none": ["--features", "halts,ipo,operational,mwcb"]}[far_off]
        r = timed(cmd)
        summary = json.loads(r["stdout"])
        (BUILD / (name + ".json")).write_text(json.dumps({**summary, "wall_s": r["wall"], "cpu_s": r["cpu"],
                                                          "peak_rss": r["rss"]}, indent=1))
        print(f"  {r['wall']:.0f} s wall, {r['cpu']:.0f} s CPU", file=sys.stderr)
    return path


def timed(cmd: list[str]) -> dict:
    """Run a command under /usr/bin/time: wall, CPU (user + system) and the child's peak RSS."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %e %U %S %M", *cmd], capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    line = [x for x in p.stderr.splitlines() if x.startswith("TIME ")][-1].split()
    return {"wall": float(line[1]), "cpu": float(line[2]) + float(line[3]), "rss": int(line[4]) * 1024,
            "stdout": p.stdout}


FULL_CONFIGS = {
    "reports off, no timing": ["--no-reports", "--no-timing"],
    "every report (--depth 5), timing": ["--depth", "5"],
}


def full_day(args) -> int:
    import platform
    BUILD.mkdir(parents=True, exist_ok=True)
    far_off = "none" if args.no_far_off else "no-max-price" if args.no_max_price else "all"
    path = make_full_day(far_off, args.full_millions)
    gen = json.loads((BUILD / (path.name + ".json")).read_text())
    out = BUILD / "replay_full"
    rows = []
    for rep in range(args.reps):
        for name, extra in FULL_CONFIGS.items():
            r = timed([PY, "-m", "lobreplay", "itch", "replay", str(path), "-o", str(out), "--force",
                       "--no-progress", *extra])
            s = json.loads((out / "summary.json").read_text())
            r.update(name=name, messages=s["messages"], desyncs=s["desyncs"], causes=s["desyncs_by_cause"],
                     books=s["books"], levels=s["book_levels"])
            rows.append(r)
            print(f"rep {rep + 1} {name}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, "
                  f"{r['rss'] / 2**20:.0f} MiB, desyncs {r['desyncs']}", file=sys.stderr, flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    opt = {"all": "", "no-max-price": " --no-max-price", "none": " --no-far-off"}[far_off]
    cmd = "make bench-itch-full" + (f" FULL_ARGS={opt.strip()}" if opt else "")
    lines = [f"`{cmd}` (= `benchmarks/bench_itch.py --full{opt}`; far-off orders: {far_off}), "
             f"commit {commit}, {time.strftime('%Y-%m-%d')}, {platform.machine()} {os.cpu_count()} vCPUs, "
             f"load average at the start {os.getloadavg()[0]:.1f}, median of {args.reps}.",
             "",
             f"Day: {gen['messages']:,} messages, {gen['bytes'] / 1e9:.2f} GB raw, {gen['symbols']:,} symbols, "
             f"{gen['halts']} halt windows, {gen['crossing_orders']} crossing orders, "
             f"{gen['far_off_orders']} far-off orders, peak live {gen['peak_live_total']:,}; generated in "
             f"{gen['wall_s']:.0f} s wall, {gen['cpu_s']:.0f} s CPU "
             f"({gen['messages'] / gen['cpu_s'] / 1e6:.2f} M msg/s of CPU), generator peak RSS "
             f"{gen['peak_rss'] / 2**20:.0f} MiB.",
             "",
             "| replay | wall s | CPU s | M msg/s (wall) | peak RSS MiB | RSS <= 2 GiB | desyncs |",
             "|---|---:|---:|---:|---:|---|---:|"]
    for name in FULL_CONFIGS:
        rs = [r for r in rows if r["name"] == name]
        wall = statistics.median(r["wall"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)
        rss = max(r["rss"] for r in rs)
        lines.append(f"| {name} | {wall:.1f} | {cpu:.1f} | {rs[0]['messages'] / wall / 1e6:.2f} | "
                     f"{rss / 2**20:,.0f} | {'yes' if rss <= 2 * GIB else 'NO'} | {rs[0]['desyncs']:,} |")
    causes = rows[-1]["causes"]
    if causes:
        lines += ["", f"Desyncs by cause: {json.dumps(causes)}"]
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(Path(args.write), text)
    return 0


SECTION = "### Full-size day (issue 25): 270M messages, 9,000 symbols"
START, END = "<!-- bench-itch-full:start -->", "<!-- bench-itch-full:end -->"


def write_section(results: Path, text: str) -> None:
    """Put the figures under SECTION in RESULTS.md, replacing the previous run's (between the
    markers: RESULTS.md holds current figures only, the earlier ones are in git history)."""
    body = results.read_text()
    block = f"{START}\n{text.rstrip()}\n\n{END}"
    if START in body and END in body:
        pre, rest = body.split(START, 1)
        body = pre + block + rest.split(END, 1)[1]
    elif SECTION in body:
        body = body.replace(f"{SECTION}\n\n", f"{SECTION}\n\n{block}\n\n", 1)
    else:
        body = body.rstrip("\n") + f"\n\n{SECTION}\n\n{block}\n"
    results.write_text(body)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5", help="comma-separated sizes of the wide day in millions (5,50)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--configs", help="comma-separated config numbers (1-based) to run")
    ap.add_argument("--full", action="store_true",
                    help="only the full-size day: 270M messages, 9,000 symbols, every feature (C generator)")
    ap.add_argument("--full-millions", type=int, default=FULL_MESSAGES // 1_000_000, help=argparse.SUPPRESS)
    ap.add_argument("--no-max-price", action="store_true",
                    help="with --full: a day without the $199,999.99 far-off orders")
    ap.add_argument("--no-far-off", action="store_true", help="with --full: a day without far-off orders")
    ap.add_argument("--write", help="with --full: put the figures into this RESULTS.md")
    args = ap.parse_args()
    if args.full:
        return full_day(args)
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
