"""Write the core's input for a prefix of an ITCH day to a file, for benchmarks/core_events.c.

    .venv/bin/python benchmarks/core_events.py DAY OUT [--messages N]

The books are sized as a replay sizes them (pass 1 over the same prefix) and the events are
pass 2's (core.itch_events, regrouped by book where a replay would regroup), so that a C
driver can run the core alone on exactly what a replay gives it: under callgrind for
instruction counts that do not drift with the machine's load, under perf, or built from two
checkouts' lob.c to compare them (the driver prints a checksum of every output). A prefix
of 1M messages is about 40 MB.

File layout (little-endian): u32 books, per book u32 instrument, i64 band_low, i64 band_high,
i64 tick, u32 capacity; u32 chunks, per chunk u64 k and k 40-byte lob_event records.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lobreplay.core import _coreapi as core  # noqa: E402
from lobreplay.core.book import Session  # noqa: E402
from lobreplay.core.events import EVENT_DTYPE  # noqa: E402
from lobreplay.itch.reader import ItchFile  # noqa: E402
from lobreplay.itch.replay import GROUP_BYTES, all_order_prices, candidates, size_books  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("day")
    ap.add_argument("out")
    ap.add_argument("--messages", type=int, default=1_000_000, help="the prefix's length (default 1M)")
    args = ap.parse_args()
    chunks, total = [], 0
    for c in ItchFile(args.day).chunks():
        n = min(c.n, args.messages - total)
        chunks.append((c.buf.copy(), c.offsets.copy(), c.types.copy(), n))
        total += n
        if total >= args.messages:
            break
    sc = core.ItchScan()
    for buf, offs, types, n in chunks:
        sc.feed(buf, offs, types, n)
    stats = sc.stats()
    locates = [int(x) for x in np.flatnonzero(stats["price_gcd"] != 0)]
    cand = candidates(stats, 0.2, locates)
    sizing, _ = size_books(stats, 0.2, locates, prices=all_order_prices(args.day, cand) if cand else {})
    if any(z.pmap is not None for z in sizing):
        sys.exit(f"{args.day}: some books take a price map, whose events this script does not map")
    select = np.zeros(65536, np.uint8)
    select[[z.locate for z in sizing]] = 1
    s = Session(65535)
    for z in sizing:
        s.add_book(z.locate, z.band_low, z.band_high, z.tick, z.capacity)
    group = s.book_bytes >= GROUP_BYTES
    cap = max(c[3] for c in chunks) + 1
    counts = np.empty(65536, np.uint32)
    n_events = 0
    with open(args.out, "wb") as f:
        f.write(struct.pack("<I", len(sizing)))
        for z in sizing:
            f.write(struct.pack("<IqqqI", z.locate, z.band_low, z.band_high, z.tick, z.capacity))
        f.write(struct.pack("<I", len(chunks)))
        for buf, offs, types, n in chunks:
            ev, ts, mi = np.empty(cap, EVENT_DTYPE), np.empty(cap, np.int64), np.empty(cap, np.uint32)
            k = core.itch_events(buf, offs, types, n, select, ev, ts, mi)
            if group:
                out = (np.empty(cap, EVENT_DTYPE), np.empty(cap, np.int64), np.empty(cap, np.uint32))
                core.itch_group(ev[:k], ts[:k], mi[:k], counts, *(a[:k] for a in out))
                ev = out[0]
            f.write(struct.pack("<Q", k))
            f.write(ev[:k].tobytes())
            n_events += k
    print(f"{args.out}: {total:,} messages, {n_events:,} events, {len(sizing):,} books "
          f"({s.book_bytes / 2**20:.0f} MiB{', regrouped by book' if group else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
