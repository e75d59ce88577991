"""Compare two checkouts of lobreplay on one ITCH or .lobc replay, in alternating runs.

    python benchmarks/ab_replay.py A_DIR B_DIR FILE [--reps N] [-- replay options...]

Each checkout must have its core built in place (`python csrc/build_core.py` inside it;
`git worktree add` makes a second checkout of another commit). Each run is a fresh
process (`lobreplay itch replay FILE -o TMPDIR --force --no-progress ...`, or `lobreplay
lobc replay` for a FILE ending in .lobc) importing that checkout's package and core; runs
alternate A, B, A, B, ... Prints, per checkout, the minimum and median of the
whole-process wall time, its CPU time (user + system, all threads), and pass 1, pass 2 and
core seconds from summary.json. Every run scans its file (the sizing cache is off).
"""
from __future__ import annotations

import argparse
import compileall
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["LOBREPLAY_CACHE_DIR"] = "off"  # every replay here scans its file: pass 1 is timed, not read from the sizing cache

FIELDS = ("wall", "cpu", "pass1", "pass2", "core")


def checkout_env(checkout: str) -> dict:
    """The environment that runs this checkout's package with its newest core build
    (an in-place build and an installed one can sit side by side), after compiling
    its bytecode: an installed package has it (pip compiles on install), a checkout
    run with PYTHONDONTWRITEBYTECODE would otherwise compile every module every run."""
    cores = sorted(glob.glob(os.path.join(checkout, "lobreplay", "_core*.so")), key=os.path.getmtime, reverse=True)
    if not cores:
        sys.exit(f"{checkout}: no built core (run `python csrc/build_core.py` there)")
    compileall.compile_dir(os.path.join(checkout, "lobreplay"), quiet=1)
    return dict(os.environ, PYTHONPATH=checkout, LOBREPLAY_CORE=cores[0])


def run(checkout: str, path: str, out: str, extra: list[str]) -> dict:
    env = checkout_env(checkout)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "lobreplay",  # (any checkout's layout: the package's __main__)
                    *(("lobc",) if path.endswith(".lobc") else ("itch",)), "replay", path, "-o", out, "--force",
                    "--no-progress", *extra],
                   env=env, cwd=out, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    s = json.load(open(os.path.join(out, "summary.json")))
    return {"wall": wall, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "pass1": s["pass1"]["seconds"], "pass2": s["pass2"]["seconds"], "core": s["pass2"]["core_seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("file")
    ap.add_argument("--reps", type=int, default=4)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = ap.parse_args(argv[:cut]), argv[cut + 1:]  # after --: options for the replay
    path = os.path.abspath(args.file)
    got = {k: {f: [] for f in FIELDS} for k in ("A", "B")}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.reps):
            for key, checkout in (("A", args.a), ("B", args.b)):
                out = os.path.join(tmp, key)
                os.makedirs(out, exist_ok=True)
                for f, v in run(os.path.abspath(checkout), path, out, extra).items():
                    got[key][f].append(v)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}; {args.reps} alternating runs each")
    for key, checkout in (("A", args.a), ("B", args.b)):
        print(f"{key} {checkout}: " + "  ".join(f"{f} min {min(v):.3f} med {statistics.median(v):.3f}"
                                                 for f, v in got[key].items()))


if __name__ == "__main__":
    main()
