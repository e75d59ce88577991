"""The core's latency suite (issue 8): build and run benchmarks/bench_hdr.c, then turn
its raw per-operation latencies into HdrHistograms, .hgrm files and one table.

    python benchmarks/bench_hdr.py [--out DIR] [--scale F] [--only a,b] [--clock tsc|mono]
                                   [--rates 1000000,2000000,5000000] [--no-build] [--markdown FILE]

(`make bench-hdr` runs it with the defaults.) Steps:

1. `gcc -O2 -std=c11 -Icsrc/core csrc/core/lob.c benchmarks/bench_hdr.c benchmarks/counting_malloc.c`
   into benchmarks/build/bench_hdr (the core compiled in, as benchmarks/run_core.sh does,
   with a counting malloc that sees every allocation in the process);
2. run it: it writes DIR/<run>.lat (uint32 ns per measured operation, or per burst) and
   DIR/summary.json (the clock probe; per run the batch mean, counts and allocations);
3. record each run's values into an HdrHistogram (the `hdrhistogram` package: 1 ns to 1 s,
   3 significant figures) through lobreplay.reports.hgrm, write DIR/<run>.hgrm (HdrHistogram's
   percentile distribution, V2 .hgrm text) and print the table (also DIR/table.md).

Percentiles are HdrHistogram's (the highest value equivalent to the sample's bucket, 3
significant figures); max is the largest raw value. A value below twice the cost of one
clock reading is marked with a dagger: the clock cannot resolve it (every sample includes
about one reading), and the batch mean beside it is the figure to read. Exits 1 if a run
failed a check (allocation in a measured loop, unexpected rejects, one-per-call and batched
results differing).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
try:
    from lobreplay.reports.hgrm import write_values_hgrm
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(ROOT))
    from lobreplay.reports.hgrm import write_values_hgrm

PERCENTILES = (50.0, 99.0, 99.9, 99.99)
SOURCES = ["csrc/core/lob.c", "benchmarks/bench_hdr.c", "benchmarks/counting_malloc.c"]


def build(exe: Path) -> None:
    exe.parent.mkdir(parents=True, exist_ok=True)
    cmd = [os.environ.get("CC", "gcc"), "-O2", "-std=c11", "-Wall", "-Wextra", "-Icsrc/core", "-Ibenchmarks",
           *SOURCES, "-o", str(exe)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)


def machine() -> list[str]:
    lines = []
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
                     platform.processor())
    except OSError:
        model = platform.processor()
    cc = subprocess.run([os.environ.get("CC", "gcc"), "--version"], capture_output=True, text=True).stdout
    lines.append(f"machine: {model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
                 f"{cc.splitlines()[0] if cc else 'cc ?'}, -O2")
    try:
        lines.append("load average at start: " + " ".join(open("/proc/loadavg").read().split()[:3]))
    except OSError:
        pass
    digests = ", ".join(f"{hashlib.sha256((ROOT / p).read_bytes()).hexdigest()[:16]} {p}" for p in SOURCES[:2])
    lines.append(f"sources: sha256 {digests}")
    return lines


def fmt_ns(v: float) -> str:
    if v >= 10_000_000:
        return f"{v / 1e6:,.1f} ms"
    if v >= 10_000:
        return f"{v / 1e3:,.1f} µs"
    return f"{v:,.0f}"


def table(summary: dict, out: Path) -> tuple[list[str], list[dict]]:
    clock = summary["clock"]
    floor = 2 * clock["cost_ns"]
    rows, out_rows = [], []
    head = ("| run | samples | p50 | p99 | p99.9 | p99.99 | max | batch mean ns/event | "
            "allocations/op | bytes/op |")
    rows += [head, "|" + "---|" * 2 + "---:|" * 8]
    for r in summary["runs"]:
        lat = np.fromfile(out / f"{r['name']}.lat", dtype="<u4")
        path, h, clamped = write_values_hgrm(lat, out / f"{r['name']}.hgrm")
        pct = [h.get_value_at_percentile(p) for p in PERCENTILES]
        mx = int(lat.max()) if len(lat) else 0
        ops = max(1, r["samples"] * r["events_per_sample"])
        allocs = r["loop"]["proc_allocs"] / ops
        nbytes = r["loop"]["proc_bytes"] / ops

        def cell(v):
            return fmt_ns(v) + (" †" if v < floor else "")

        name = r["name"] + (" (per burst)" if r["unit"] == "burst" else "")
        batch = f"{r['batch_mean_ns']:.1f}" if r["mode"] == "closed" else "—"
        if r["unit"] == "burst":
            batch += " (per cancel)"
        rows.append(f"| {name} | {r['samples']:,} | " + " | ".join(cell(v) for v in pct) +
                    f" | {cell(mx)} | {batch} | {allocs:g} | {nbytes:g} |")
        out_rows.append({"name": r["name"], "samples": r["samples"], "p50": pct[0], "p99": pct[1],
                         "p99.9": pct[2], "p99.99": pct[3], "max": mx, "batch_mean_ns": r["batch_mean_ns"],
                         "allocs_per_op": allocs, "bytes_per_op": nbytes, "clamped": clamped, "hgrm": str(path)})
    return rows, out_rows


def notes(summary: dict) -> list[str]:
    c = summary["clock"]
    lines = [
        f"clock: {c['used']}" + (f" ({c['tsc_ghz']:.3f} GHz, calibrated against CLOCK_MONOTONIC)"
                                 if c["used"] == "tsc" else "") +
        f"; {c['cost_ns']:.1f} ns per reading; smallest step between readings {c['step_ns']:.1f} ns; "
        f"an empty timed region reads {c['floor_min_ns']} / {c['floor_p50_ns']} / {c['floor_p99_ns']} ns "
        f"(min / p50 / p99). CLOCK_MONOTONIC: {c['mono_cost_ns']:.1f} ns per reading, smallest step "
        f"{c['mono_step_ns']:.0f} ns, OS resolution {c['mono_os_resolution_ns']} ns.",
        f"† below 2 x the cost of a reading ({2 * c['cost_ns']:.0f} ns): under what the clock resolves for one "
        "operation; read the batch mean.",
    ]
    for r in summary["runs"]:
        bits = [f"{r['name']}: {r['what']}"]
        if r["unit"] == "burst":
            bits.append(f"one sample per burst of {r['events_per_sample']:,} cancels; each burst's adds are applied "
                        "untimed before it; batch mean = burst time / cancels")
        elif r["fillers"]:
            bits.append(f"{r['fillers']:,} untimed refill events in the measured phase "
                        f"(included in the batch mean's {r['phase_events']:,} events)")
        if r["aggressive"]:
            bits.append(f"{r['aggressive']:,} IOC orders measured")
        if r["aggressive_stp"] or "self_trade" in r["name"]:
            share = r["aggressive_stp"] / max(1, r["aggressive"])
            bits.append(f"{share:.1%} of them met their own participant's orders "
                        f"({r['stp_records']:,} STP records, warm-up included)")
        bits.append(f"set-up: {r['setup']['core_allocs']} allocations by the core "
                    f"({r['setup']['core_bytes']:,} bytes), {r['setup']['proc_allocs']} in the process")
        bits.append(f"measured loop: {r['loop']['core_allocs']} by the core, {r['loop']['proc_allocs']} allocations "
                    f"and {r['loop']['proc_frees']} frees in the process, "
                    f"{r['loop']['ctx_involuntary']} involuntary context switches")
        if r["rejects"]:
            bits.append(f"{r['rejects']} rejected events")
        lines.append("; ".join(bits))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "build" / "hdr"))
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every scenario's event counts")
    ap.add_argument("--only", help="comma-separated run names (mixed_open for the open-loop runs)")
    ap.add_argument("--clock", choices=("tsc", "mono"))
    ap.add_argument("--rates", default="1000000,2000000,5000000", help="open-loop arrival rates, operations per second")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--exe", default=str(ROOT / "benchmarks" / "build" / "bench_hdr"), help="where to build the driver")
    ap.add_argument("--markdown", help="also write the report (table and notes) to this file")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    exe = Path(a.exe).resolve()
    if not a.no_build:
        build(exe)
    head = machine()
    cmd = [str(exe), "--out", str(out), "--scale", str(a.scale), "--rates", a.rates]
    if a.only:
        cmd += ["--only", a.only]
    if a.clock:
        cmd += ["--clock", a.clock]
    print("$", " ".join(os.path.relpath(c, ROOT) if c.startswith(str(ROOT)) else c for c in cmd), flush=True)
    rc = subprocess.run(cmd).returncode
    summary = json.loads((out / "summary.json").read_text())
    rows, parsed = table(summary, out)
    text = "\n".join(head + [""] + rows + [""] + notes(summary))
    print()
    print(text)
    (out / "table.md").write_text(text + "\n")
    (out / "table.json").write_text(json.dumps({"clock": summary["clock"], "runs": parsed}, indent=1) + "\n")
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    print(f"\n.hgrm files, table.md and table.json in {os.path.relpath(out, Path.cwd())}")
    failed = [r["name"] for r in summary["runs"] if r["failed"]]
    if rc or failed:
        print(f"FAILED: {', '.join(failed) or 'bench_hdr exited ' + str(rc)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
