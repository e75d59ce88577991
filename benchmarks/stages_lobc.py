"""The .lobc replay's stages, each timed alone over a whole file in one process: what a
replay of this design costs at best on this machine, against issue 4's 20 M records/s
(50 ns per record for the whole replay).

    .venv/bin/python benchmarks/stages_lobc.py FILE.lobc [--reps 5]

The file is read into memory once, then each stage runs alone over all of it, best of --reps,
single-threaded, with nothing else in the process:

  pass 1   the sizing scan (lobreplay.l2.ladder.scan_counts: lob_l2_scan) over the records, in the
           chunks a replay reads (no CRC check, no read: those run on a thread in a replay)
  pass 2   L2Replay.feed_from, as a replay drives it, its records copied from memory where a
           replay reads the file (no read-ahead thread), the books pass 1 sized: the L2 ->
           events conversion and the core together (timing off, every report row made)
  read     pass 2's records copied into its buffer, chunk by chunk, as its read() does here
           (a replay reads them from the file with preadv: a copy from the page cache)
  core     the core alone: a Session with the same books applies the events of the L2
           conversion, in calls of 262,144, no bbo, no timing

The core's events are taken, untimed, from the slow Python implementation of the L2 replay
(tests/l2_reference.py, which tests/test_l2_differential.py holds to the C path's rows,
counters and books), by recording what it hands its Session. A first replay must run pass 1
before pass 2, and pass 2 must read the records again and do at least the core's work:
pass 1 + read + core is the least a first replay of this design can take, before the L2
conversion itself, hashing, reports or start-up. The script prints each stage in ns per
record and those sums against 50 ns. It checks that the core applied every event (the
status of each); the replay's tests check the rest.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the command line does: numpy's idle BLAS threads spin
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from lobreplay.l2 import lobc  # noqa: E402
from lobreplay.core.book import Session  # noqa: E402
from lobreplay.core.events import Status  # noqa: E402
from lobreplay.l2.ladder import L2Replay, scan_counts  # noqa: E402
from lobreplay.l2.replay import L2ReplayConfig  # noqa: E402

PIECE = 262_144
ROW = np.dtype("V64")  # a record as one opaque item
BUDGET_NS = 50.0  # 20 M records/s


def best(f, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def core_events(records: np.ndarray, sizing, names, market, chunk: int) -> list[np.ndarray]:
    """The events the L2 conversion hands the core, in order (from the reference replay)."""
    import l2_reference
    got = []
    ref = l2_reference.L2Replay(sizing, names, market=market)
    apply = ref.session.apply

    def recording(ev, bbo=True):
        got.append(np.array(ev, copy=True))
        return apply(ev, bbo=bbo)

    ref.session.apply = recording
    for a in range(0, len(records), chunk):
        ref.feed(records[a:a + chunk])
    ref.finish()
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    data = lobc.read(args.file)
    rec, meta = data.records, data.meta
    names, market = list(meta["symbols"]), meta.get("market")
    n = len(rec)
    rows = rec.view(ROW)
    chunk = L2ReplayConfig.chunk_records
    chunks = [rec[a:a + chunk] for a in range(0, n, chunk)]
    has_tickers = bool(np.isin(rec["kind"], (lobc.TICKER_BID, lobc.TICKER_ASK)).any())
    sizing = scan_counts(iter(chunks), names)[0]

    t1 = best(lambda: scan_counts(iter(chunks), names), args.reps)

    def pass2():
        rp = L2Replay(sizing, names, compare_tickers=has_tickers, market=market)
        at = 0

        def read(out):  # (a replay: ChunkReader.reader(), the file read straight into out)
            nonlocal at
            k = min(len(out), n - at)
            out.view(ROW)[:k] = rows[at:at + k]  # (as opaque rows: numpy copies records field by field)
            at += k
            return k
        for _ in rp.feed_from(read, chunk):
            pass
        rp.finish()
    t2 = best(pass2, args.reps)

    buf = np.empty(chunk, lobc.RECORD_DTYPE)

    def read_all():
        for a in range(0, n, chunk):
            k = min(chunk, n - a)
            buf.view(ROW)[:k] = rows[a:a + k]
    tr = best(read_all, args.reps)

    t = time.perf_counter()
    events = core_events(rec, sizing, names, market, chunk)
    ref_s = time.perf_counter() - t
    ev = np.concatenate(events) if events else np.empty(0)
    pieces = [ev[a:a + PIECE] for a in range(0, len(ev), PIECE)]
    statuses = []

    def core():
        s = Session(max(sizing, default=0))
        for sym, z in sorted(sizing.items()):
            s.add_book(sym, z.band_low, z.band_high, z.tick, z.capacity)
        statuses.clear()
        for p in pieces:
            statuses.append(s.apply(p, bbo=False).results["status"])
    tc = best(core, args.reps)
    st = np.concatenate(statuses) if statuses else np.empty(0, np.int32)
    bad = int((st != int(Status.OK)).sum())

    def ns(sec):
        return sec / n * 1e9
    print(f"{args.file}: {n:,} records, {len(ev):,} core events ({len(ev) / n:.2f} per record), "
          f"{len(sizing)} book(s); best of {args.reps}; the events taken from the reference in {ref_s:.1f} s")
    print("| stage | s | ns/record |")
    print("|---|---:|---:|")
    for label, sec in (("pass 1 (sizing scan)", t1), ("pass 2 (L2 conversion + core)", t2),
                       ("read (pass 2's records into its buffer)", tr), ("core alone", tc)):
        print(f"| {label} | {sec:.3f} | {ns(sec):.1f} |")
    floor = ns(t1) + ns(tr) + ns(tc)
    print(f"pass 1 + read + core alone: {floor:.1f} ns/record = {1e3 / floor:.1f} M records/s at most "
          f"(target {1e3 / BUDGET_NS:.0f} M/s: {BUDGET_NS:.0f} ns/record); pass 1 + core alone: "
          f"{ns(t1) + ns(tc):.1f}; pass 1 + pass 2: {ns(t1) + ns(t2):.1f} ns/record")
    if bad:
        print(f"the core refused {bad:,} of {len(st):,} events (statuses other than OK)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
