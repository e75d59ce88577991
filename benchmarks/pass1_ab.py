"""A/B of the .lobc replay's pass 1 alone: `python benchmarks/pass1_ab.py CHECKOUT FILE.lobc` runs
lobreplay.l2.ladder.scan_counts over the file's records (held in memory) with CHECKOUT's build, best of 9.
Run it alternately for two checkouts (a git worktree with `python csrc/build_core.py` run in it)."""
import os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (numpy's idle BLAS threads would spin beside the timing)
sys.path.insert(0, sys.argv[1])
import lobreplay; assert lobreplay.__file__.startswith(sys.argv[1])
from lobreplay.l2 import lobc
from lobreplay.l2.ladder import scan_counts
r = lobc.ChunkReader(sys.argv[2])
names = [str(s) for s in r.meta["symbols"]]
recs = [c.copy() for c in r.chunks()]
best = 1e9
for _ in range(9):
    t = time.perf_counter(); sizing, kinds = scan_counts(iter(recs), names); best = min(best, time.perf_counter() - t)
print(sys.argv[1], f"pass 1 (scan_counts) best of 9: {best*1e3:.2f} ms", sum(len(c) for c in recs))
