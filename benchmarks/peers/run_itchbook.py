"""itch-book: its C++ Session (what itch_book.Feed.batches drives) over the whole day.

    --tables none   books only (no table rows; the final BBO cannot be read back,
                    so the check is its stats: live orders, unresolved references)
    --tables bbo    books + the bbo table (one row per top-of-book change); the
                    last row per locate is the BBO compared by the harness
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

CHUNK = 8 << 20
ROWS = 1_000_000


def main() -> int:
    ap = common.parser(__doc__)
    ap.add_argument("--tables", choices=("none", "bbo"), default="bbo")
    a = ap.parse_args()
    import numpy as np
    from itch_book._core import Session

    symbols = common.load_symbols(a.symbols)
    bbo = a.tables == "bbo"
    last = np.zeros((65536, 4), np.int64)      # bid_px, bid_sz, ask_px, ask_sz by locate

    def take() -> None:
        c = session.take_bbo()
        loc = c["locate"]
        if len(loc):
            rev = loc[::-1]
            locs, first_in_rev = np.unique(rev, return_index=True)
            i = len(loc) - 1 - first_in_rev
            last[locs] = np.stack([c["bid_px"][i], c["bid_sz"][i], c["ask_px"][i], c["ask_sz"][i]], axis=1)

    def snapshot() -> dict:
        if not bbo:
            return {}
        take()
        return {s: [int(v) for v in last[loc]] for loc, s in symbols.items()}

    clock = common.Clock()
    session = Session(tables=["bbo"] if bbo else [], depth=0, symbols=[])
    session.reserve(ROWS + CHUNK // 21)
    with open(a.file, "rb") as f:
        left = a.checkpoint_offset
        while left > 0:
            buf = f.read(min(CHUNK, left))
            left -= len(buf)
            session.feed(buf)
            if bbo and session.rows() >= ROWS:
                take()
        at_checkpoint = session.stats()
        checkpoint = snapshot()
        clock.lap("to checkpoint")
        while buf := f.read(CHUNK):
            session.feed(buf)
            if bbo and session.rows() >= ROWS:
                take()
        final = snapshot()
    clock.lap("rest")
    seconds = clock.total()
    stats = session.stats()
    if stats["pending_bytes"]:
        raise SystemExit(f"itch-book: {stats['pending_bytes']} trailing bytes")
    common.write(a.out, tool="itch-book", version=common.version("itch-book"), mode=f"tables={a.tables}",
                 messages=stats["messages"], seconds=seconds, phases=clock.phases, checkpoint=checkpoint,
                 final=final, stats={"checkpoint": at_checkpoint, "final": stats})
    return 0


if __name__ == "__main__":
    sys.exit(main())
