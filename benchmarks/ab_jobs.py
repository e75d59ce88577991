"""`itch replay --jobs 1` against `--jobs 2`, in one or more checkouts, in alternating runs.

    python benchmarks/ab_jobs.py FILE CHECKOUT [CHECKOUT ...] [--reps N] [-- replay options...]

Each checkout must have its core built in place (as for ab_replay.py). Every repetition runs,
for each checkout in turn, `--jobs 1` then `--jobs 2` (fresh processes). Prints each run's
whole-process wall time, pass 1 / pass 2 / core seconds and, for --jobs 2, each part's
pass 1, pass 2, core seconds and events and the parent's timeline (summary.json "parallel");
then per checkout and job count the minimum and median, and the speed-up of the medians and
of the minima. On a shared machine a run where the other core was busy shows as a --jobs 2
run whose parts' core seconds are not about half of --jobs 1's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ab_replay import checkout_env

os.environ["LOBREPLAY_CACHE_DIR"] = "off"  # every replay here scans its file: pass 1 is timed, not read from the sizing cache


def run(checkout: str, path: str, out: str, jobs: int, extra: list[str]) -> dict:
    env = checkout_env(checkout)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "lobreplay",
                    "itch", "replay", path, "-o", out, "--force", "--no-progress", "--jobs", str(jobs), *extra],
                   env=env, cwd=out, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    s = json.load(open(os.path.join(out, "summary.json")))
    got = {"wall": round(wall, 3), "pass1": s["pass1"]["seconds"], "pass2": s["pass2"]["seconds"],
           "core": s["pass2"]["core_seconds"]}
    if jobs > 1:
        per1 = s["pass1"].get("per_part") or [{}] * len(s["pass2"]["per_part"])  # (pass 1 in each part: before stop 11)
        got["parts"] = [{"pass1": a.get("seconds"), "pass2": b["seconds"], "core": b["core_seconds"],
                         "events": b.get("events")}
                        for a, b in zip(per1, s["pass2"]["per_part"])]
        got["parallel"] = s.get("parallel")
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("checkouts", nargs="+")
    ap.add_argument("--reps", type=int, default=4)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = ap.parse_args(argv[:cut]), argv[cut + 1:]
    path = os.path.abspath(args.file)
    got: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            for i, checkout in enumerate(args.checkouts):
                for jobs in (1, 2):
                    out = os.path.join(tmp, f"{i}-{jobs}")
                    os.makedirs(out, exist_ok=True)
                    r = run(os.path.abspath(checkout), path, out, jobs, extra)
                    got.setdefault((checkout, jobs), []).append(r)
                    print(checkout, f"--jobs {jobs}", json.dumps(r), flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}; {args.reps} alternating runs each")
    for (checkout, jobs), runs in got.items():
        print(checkout, f"--jobs {jobs}:", "  ".join(
            f"{f} min {min(r[f] for r in runs):.3f} med {statistics.median(r[f] for r in runs):.3f}"
            for f in ("wall", "pass1", "pass2", "core")))
    for checkout in args.checkouts:
        one = [r["wall"] for r in got[(checkout, 1)]]
        two = [r["wall"] for r in got[(checkout, 2)]]
        print(checkout, f"speed-up: medians {statistics.median(one) / statistics.median(two):.2f}x, "
                        f"minima {min(one) / min(two):.2f}x")


if __name__ == "__main__":
    main()
