"""One checkout, several option sets of `itch replay`, in alternating runs.

    python benchmarks/ab_options.py FILE REPS "OPTIONS A" "OPTIONS B" ...

e.g. `... 20191230.narrow_5M.itch 6 "--no-reports --no-timing" "--no-reports --no-timing --chunk-mb 4"`.
Each run is a fresh `lobreplay itch replay FILE -o TMP --force --no-progress OPTIONS`
from this checkout's .venv; prints per option set the median and minimum of the
process wall time, its CPU time (user + system, all threads), pass 1 and pass 2
seconds and peak RSS (MiB) from summary.json.
"""
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["LOBREPLAY_CACHE_DIR"] = "off"  # every replay here scans its file: pass 1 is timed, not read from the sizing cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) < 4 or not sys.argv[2].isdigit():
    sys.exit(__doc__.split("\n\n")[1].strip())
path, reps, sets = os.path.abspath(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
compileall.compile_dir(os.path.join(ROOT, "lobreplay"), quiet=1)  # as installed (pip compiles bytecode)
got = {s: {"wall": [], "cpu": [], "p1": [], "p2": [], "rss": []} for s in sets}
with tempfile.TemporaryDirectory() as tmp:
    for _ in range(reps):
        for s in sets:
            b = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), "-m", "lobreplay", "itch", "replay", path, "-o", tmp + "/o", "--force",
                            "--no-progress", *s.split()], check=True, stdout=subprocess.DEVNULL)
            w = time.perf_counter() - t
            a = resource.getrusage(resource.RUSAGE_CHILDREN)
            j = json.load(open(tmp + "/o/summary.json"))
            g = got[s]
            g["wall"].append(w)
            g["cpu"].append(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime)
            g["p1"].append(j["pass1"]["seconds"])
            g["p2"].append(j["pass2"]["seconds"])
            g["rss"].append(j["peak_rss_bytes"] / 2**20)
print(f"load {os.getloadavg()[0]:.2f}, {reps} alternating runs")
for s, g in got.items():
    print(f"{s!r:40} " + "  ".join(f"{k} med {statistics.median(v):.3f} min {min(v):.3f}" for k, v in g.items()))
