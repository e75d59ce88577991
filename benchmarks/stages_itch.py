"""The ITCH replay's stages, each timed alone over a whole day in one process: what the
pipeline costs at best on this machine: the floor of a replay of this design.

    .venv/bin/python benchmarks/stages_itch.py FILE [--reps 3] [--json OUT]

The day is read and framed once into memory (kept: about its size again), then each stage
runs alone over all of it, best of --reps, single-threaded, with nothing else in the process:

  read + frame   ItchFile's chunks (the file from the page cache, the C framer)
  scan           pass 1's sizing scan (core.ItchScan) over the framed chunks
  prices again   the distinct prices of the books that could take a price map, read from
                 the file again (all_order_prices; none on a day without such a book)
  events         pass 2's event conversion (core.itch_events), and the regrouping by book
                 (core.itch_group) where a replay would regroup (books over GROUP_BYTES)
  core           the events through a Session with the books pass 1 sizes, one call per
                 chunk, reports and timing off (core_seconds of `--no-reports --no-timing`)

A replay runs read + frame and events on a reader thread beside the main thread, which runs
the scan (pass 1), the prices read again (if any book could take a price map) and the core
(pass 2): with a second core to itself the reader is hidden, so scan + prices again + core
is the least a replay of this design can take, before any Python, report or
start-up. The script prints each stage in ns per message and that sum as M msg/s (`make
bench` adds the start-up to it: the least a book-only replay's whole process can take, set
beside itch-book's time on the same day). A stage alone does not
share the caches with the reader thread as it does in a replay: judge a change to one by
`ab_replay.py` too (the core's prefetch off looked faster here and was slower in a replay). It checks nothing beyond the
core's own statuses (every event applied, the counts printed); the replay's tests do that.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the command line does: numpy's idle BLAS threads spin
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lobreplay.core import _coreapi as core# noqa: E402
from lobreplay.core.book import Session, _touched  # noqa: E402
from lobreplay.core.events import BBO_DTYPE, EVENT_DTYPE, RESULT_DTYPE  # noqa: E402
from lobreplay.itch.reader import ItchFile  # noqa: E402
from lobreplay.itch.replay import GROUP_BYTES, all_order_prices, candidates, size_books  # noqa: E402


def best(f, reps: int, setup=None) -> float:
    """The least time of reps calls of f (f(setup()) with a setup, made untimed each time)."""
    times = []
    for _ in range(reps):
        args = () if setup is None else (setup(),)
        t = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prefetch", choices=("auto", "on", "off"), default="auto",
                    help="the core's software prefetching (Session.set_prefetch; a replay leaves it at auto)")
    ap.add_argument("--timing", action="store_true", help="the core stage with per-event timing (as every report)")
    ap.add_argument("--bbo", action="store_true", help="the core stage writing top-of-book changes (the bbo report)")
    ap.add_argument("--json", help="also write the figures (seconds per stage) to this file (make bench reads it)")
    args = ap.parse_args()

    chunks = []  # (buf, offsets, types, n): copies, since the reader reuses its buffers

    def read():
        chunks.clear()
        for c in ItchFile(args.file).chunks():
            chunks.append((c.buf.copy(), c.offsets.copy(), c.types.copy(), c.n))

    def frame_only():
        for _ in ItchFile(args.file).chunks():
            pass

    read()  # (kept for the stages below; timed without the copies next)
    messages = sum(c[3] for c in chunks)
    t_read = best(frame_only, args.reps)

    stats = prices = None

    def scan():
        nonlocal stats
        sc = core.ItchScan()
        for buf, offs, types, n in chunks:
            sc.feed(buf, offs, types, n)
        stats = sc.stats()

    t_scan = best(scan, args.reps)
    locates = [int(x) for x in np.flatnonzero(stats["price_gcd"] != 0)]
    cand = candidates(stats, 0.2, locates)

    def again():  # (a replay does it after the scan, only for these books)
        nonlocal prices
        prices = all_order_prices(args.file, cand) if cand else {}

    t_keep = best(again, args.reps)
    sizing, _ = size_books(stats, 0.2, locates, prices=prices)
    if any(z.pmap is not None for z in sizing):
        print("(books with price maps: their events are not mapped here; the core stage is not a replay's)")
    select = np.zeros(65536, np.uint8)
    select[[z.locate for z in sizing]] = 1

    def session():
        s = Session(65535)
        for z in sizing:
            s.add_book(z.locate, z.band_low, z.band_high, z.tick, z.capacity)
        s.set_prefetch({"auto": None, "on": True, "off": False}[args.prefetch])
        s.set_timing(args.timing)
        return s

    book_bytes = session().book_bytes
    group = book_bytes >= GROUP_BYTES
    cap = max(c[3] for c in chunks) + 1
    events = [(np.empty(cap, EVENT_DTYPE), np.empty(cap, np.int64), np.empty(cap, np.uint32)) for _ in chunks]
    grouped = [(np.empty(cap, EVENT_DTYPE), np.empty(cap, np.int64), np.empty(cap, np.uint32)) for _ in chunks]
    counts = np.empty(65536, np.uint32)
    ks = []

    def convert():
        ks.clear()
        for (buf, offs, types, n), (ev, ts, mi), out in zip(chunks, events, grouped):
            k = core.itch_events(buf, offs, types, n, select, ev, ts, mi)
            if group:
                core.itch_group(ev[:k], ts[:k], mi[:k], counts, *(a[:k] for a in out))
            ks.append(k)

    t_events = best(convert, args.reps)
    n_events = sum(ks)
    # (written through once, as a replay does: no page fault inside the timed calls)
    res = _touched(np.empty(cap, RESULT_DTYPE))
    bbo = _touched(np.empty(cap, BBO_DTYPE)) if args.bbo else False
    bev = _touched(np.empty(cap, np.uint32)) if args.bbo else False
    rejects = []

    def replay(s):
        rejects.clear()
        for k, (ev, _, _) in zip(ks, grouped if group else events):
            out = s.apply(ev[:k], results=res[:k], bbo=bbo[:k] if args.bbo else False,
                          bbo_changes=bev[:k] if args.bbo else False)
            rejects.append(int(np.count_nonzero(out.results["status"])))

    t_core = best(replay, args.reps, setup=session)  # (a fresh session each time)

    per = lambda t: t / messages * 1e9  # noqa: E731
    print(f"{os.path.basename(args.file)}: {messages:,} messages, {len(sizing):,} books "
          f"({book_bytes / 2**20:.0f} MiB), {n_events:,} events "
          f"({sum(rejects):,} refused by the core), regrouped by book: {group}; best of {args.reps}")
    print("| stage | s | ns/message |\n|---|---:|---:|")
    core_label = "core (pass 2" + "".join(f", {w}" for w, on in (("timing", args.timing), ("bbo", args.bbo)) if on) + ")"
    for label, t in (("read + frame", t_read), ("scan (pass 1)", t_scan), (f"prices again (books: {len(cand)})", t_keep),
                     ("events" + (" + regroup" if group else ""), t_events), (core_label, t_core)):
        print(f"| {label} | {t:.3f} | {per(t):.1f} |")
    crit = t_scan + t_keep + t_core  # (the prices read again: on the main thread, after the scan)
    print(f"| scan + prices again + core: the main thread's least | {crit:.3f} | {per(crit):.1f} |")
    every = t_read + t_keep + t_scan + t_events + t_core
    print(f"| every stage on one thread | {every:.3f} | {per(every):.1f} |")
    print(f"scan + prices again + core alone: {messages / crit / 1e6:.1f} M msg/s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"file": os.path.basename(args.file), "messages": messages, "events": n_events,
                       "books": len(sizing), "reps": args.reps, "read_frame_s": t_read, "scan_s": t_scan,
                       "prices_again_s": t_keep, "events_s": t_events, "core_s": t_core, "main_thread_least_s": crit}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
