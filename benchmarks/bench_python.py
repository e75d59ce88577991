"""The Python paths on the seed workload, for contrast with bench_core.

Loads the stream that ``bench_core --dump FILE`` recorded (raw lob_event
records, read with numpy.fromfile(FILE, dtype=lobreplay.EVENT_DTYPE), plus
FILE.json with the book parameters and the warm-up length) and replays the
same events through:

  1. lobreplay.OrderBook, one Python call per event (new/cancel/reduce/replace),
     rejects caught and counted;
  2. lobreplay.Session.apply over the same events in chunks (default 4096),
     and in one whole-array call.

Every path starts on fresh books, replays the warm-up prefix untimed, then
times the first --events events after the warm-up (default 100,000).  For the
OrderBook path each record is converted field-wise to Python ints before the
timed loop (numpy .tolist()), so the timing is the call path, not the
conversion.  Prints mean ns/message per path and checks that all paths
filled the same number of shares with the same number of executions.

usage: python benchmarks/bench_python.py STREAM [--events N] [--chunk N] [--reps N]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # (numpy's idle BLAS threads would spin beside the timing)
import numpy as np  # noqa: E402

import lobreplay
from lobreplay import EVENT_DTYPE, Kind, LobError, OrderBook, Session

NEW, CANCEL, REDUCE, REPLACE = int(Kind.NEW), int(Kind.CANCEL), int(Kind.REDUCE), int(Kind.REPLACE)


def load(path: str):
    with open(path + ".json") as f:
        meta = json.load(f)
    if meta["record_size"] != EVENT_DTYPE.itemsize:
        sys.exit(f"{path}: records of {meta['record_size']} bytes, EVENT_DTYPE has {EVENT_DTYPE.itemsize}")
    ev = np.fromfile(path, dtype=EVENT_DTYPE)
    if len(ev) != meta["warmup"] + meta["timed"]:
        sys.exit(f"{path}: {len(ev)} records, expected warmup+timed = {meta['warmup'] + meta['timed']}")
    return ev, meta


def new_books(meta):
    return {k: OrderBook(meta["band_low"], meta["band_high"], meta["tick"], meta["capacity"])
            for k in range(meta["instruments"])}


def replay_orderbook(books, rows):
    """One OrderBook call per event. Returns (rejects, filled, executions)."""
    rejects = filled = nexec = 0
    for (oid, new_id, price, qty, instr, kind, side, tif, _flags) in rows:
        ob = books[instr]
        try:
            if kind == NEW:
                f = ob.new(oid, side, price, qty, tif)
            elif kind == CANCEL:
                f = ob.cancel(oid)
            elif kind == REPLACE:
                f = ob.replace(oid, new_id, price, qty)
            elif kind == REDUCE:
                f = ob.reduce(oid, qty)
            else:
                rejects += 1
                continue
        except LobError:
            rejects += 1
            continue
        filled += f.filled
        nexec += len(f.execs)
    return rejects, filled, nexec


def new_session(meta) -> Session:
    s = Session(meta["instruments"] - 1)
    for k in range(meta["instruments"]):
        s.add_book(k, meta["band_low"], meta["band_high"], meta["tick"], meta["capacity"])
    return s


def replay_session(s: Session, ev: np.ndarray, chunk: int):
    """Session.apply over ev in chunks. Returns (rejects, filled, executions)."""
    rejects = filled = nexec = 0
    for i in range(0, len(ev), chunk):
        out = s.apply(ev[i:i + chunk])
        rejects += int(np.count_nonzero(out.results["status"]))
        filled += int(out.results["filled"].sum())
        nexec += len(out.execs)
    return rejects, filled, nexec


def timed(fn, *args):
    t0 = time.perf_counter_ns()
    r = fn(*args)
    return time.perf_counter_ns() - t0, r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stream", help="file written by bench_core --dump")
    ap.add_argument("--events", type=int, default=100_000, help="timed events after the warm-up (default 100000)")
    ap.add_argument("--chunk", type=int, default=4096, help="events per Session.apply call (default 4096)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each path (default 3)")
    a = ap.parse_args(argv)

    ev, meta = load(a.stream)
    w = meta["warmup"]
    n = min(a.events, meta["timed"])
    warm, part, whole = ev[:w], ev[w:w + n], ev[w:]
    print(f"== lobreplay Python paths: seed workload ({a.stream}) ==")
    print(f"python {platform.python_version()}, numpy {np.__version__}, lobreplay {lobreplay.__version__}")
    print(f"stream: seed {meta['seed']}, {meta['instruments']} instrument(s), {w} warm-up + {meta['timed']} timed "
          f"events; timing the first {n} timed events (fresh books, warm-up replayed untimed); {a.reps} reps")

    warm_rows, rows = warm.tolist(), part.tolist()  # field-wise conversion, outside the timed region
    res = {}
    checks = {}

    def record(name, ns_list, count, out):
        res[name] = (min(ns_list) / count, statistics.median(ns_list) / count)
        checks[name] = out

    # 1. OrderBook, one call per event.
    ns = []
    for _ in range(a.reps):
        books = new_books(meta)
        wr = replay_orderbook(books, warm_rows)
        if wr[0]:
            print(f"  warning: {wr[0]} rejects in the warm-up through OrderBook")
        t, out = timed(replay_orderbook, books, rows)
        ns.append(t)
    record("OrderBook, 1 call/event", ns, n, out)

    # 2. Session.apply in chunks over the same events, then in one call.
    for label, chunk in ((f"Session.apply, {a.chunk}/call", a.chunk), ("Session.apply, 1 call", n)):
        ns = []
        for _ in range(a.reps):
            s = new_session(meta)
            replay_session(s, warm, max(1, len(warm)))
            t, out = timed(replay_session, s, part, chunk)
            ns.append(t)
        record(label, ns, n, out)

    # 3. Session.apply over the whole timed region (the size bench_core times).
    ns = []
    for _ in range(a.reps):
        s = new_session(meta)
        replay_session(s, warm, max(1, len(warm)))
        t, out_all = timed(replay_session, s, whole, a.chunk)
        ns.append(t)
    res_all = (min(ns) / len(whole), statistics.median(ns) / len(whole))

    print(f"\n  {'path (mean ns/message)':44s} {'best':>10s} {'median':>10s}")
    for name, (b, m) in res.items():
        print(f"  {name + f' ({n} events)':44s} {b:10.1f} {m:10.1f}")
    print(f"  {f'Session.apply, {a.chunk}/call ({len(whole)} events)':44s} {res_all[0]:10.1f} {res_all[1]:10.1f}")
    ob = res["OrderBook, 1 call/event"][1]
    sa = res[f"Session.apply, {a.chunk}/call"][1]
    print(f"\n  OrderBook per-event path is {ob / sa:.0f}x the chunked Session.apply path (medians)")

    ok = True
    print("\nCHECK (first %d timed events): rejects / shares filled / executions" % n)
    for name, (rej, filled, nexec) in checks.items():
        print(f"  {name:44s} {rej:6d} {filled:12d} {nexec:9d}")
    vals = {v for v in checks.values()}
    if len(vals) != 1 or next(iter(vals))[0] != 0:
        ok = False
    rej, filled, nexec = out_all
    print(f"  {'whole timed region, Session.apply':44s} {rej:6d} {filled:12d} {nexec:9d}"
          f"   (bench_core: {meta['timed_filled']} filled, {meta['timed_execs']} executions)")
    if rej or filled != meta["timed_filled"] or nexec != meta["timed_execs"]:
        ok = False
    print("  " + ("PASS: all paths agree, no rejects" if ok else "FAIL: the paths disagree or rejected events"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
