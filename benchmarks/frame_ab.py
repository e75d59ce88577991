"""A/B of the C framer alone: `python benchmarks/frame_ab.py CHECKOUT FILE` frames a whole
BinaryFILE day held in memory with CHECKOUT's build (best of 7) and prints ns per message.
Run it alternately for two checkouts (a git worktree with `python csrc/build_core.py` run in it)."""
import os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (numpy's idle BLAS threads would spin beside the timing)
import numpy as np
sys.path.insert(0, sys.argv[1])
from lobreplay.core import _coreapi as core
import lobreplay; assert lobreplay.__file__.startswith(sys.argv[1]), lobreplay.__file__
buf = np.fromfile(sys.argv[2], np.uint8)
n = len(buf)
offs = np.empty(n // 3 + 1, np.uint32); types = np.empty(n // 3 + 1, np.uint8); counts = np.zeros(256, np.uint64)
best = 1e9
for _ in range(7):
    t = time.perf_counter(); st, k, consumed, end, bad = core.itch_frames(buf, n, offs, types, counts); best = min(best, time.perf_counter() - t)
print(sys.argv[1], k, f"{best*1e3:.1f} ms", f"{best/k*1e9:.2f} ns/msg")
