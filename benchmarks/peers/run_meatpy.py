"""MeatPy: ITCH50MessageReader + one ITCH50MarketProcessor (MeatPy builds the book
of one instrument per processor, in pure Python) over the first N messages of
the day. Its book is compared with lobreplay's after those N messages.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def main() -> int:
    ap = common.parser(__doc__)
    ap.add_argument("--symbol", required=True)
    ap.add_argument("--max-messages", type=int, required=True)
    a = ap.parse_args()
    import datetime
    import itertools

    from meatpy.itch50 import ITCH50MarketProcessor, ITCH50MessageReader

    clock = common.Clock()
    proc = ITCH50MarketProcessor(a.symbol, datetime.datetime(2019, 12, 30))
    n = 0
    with ITCH50MessageReader(a.file) as reader:
        for msg in itertools.islice(reader, a.max_messages):
            proc.process_message(msg)
            n += 1
    clock.lap("replay")
    lob = proc.current_lob
    bid = lob.bid_levels[0] if lob is not None and lob.bid_levels else None
    ask = lob.ask_levels[0] if lob is not None and lob.ask_levels else None
    bbo = [bid.price if bid else 0, bid.volume if bid else 0, ask.price if ask else 0, ask.volume if ask else 0]
    common.write(a.out, tool="MeatPy", version=common.version("meatpy"),
                 mode=f"one symbol ({a.symbol}), first {n:,} messages", messages=n, seconds=clock.total(),
                 phases=clock.phases, checkpoint={}, final={a.symbol: [int(v) for v in bbo]},
                 stats={"bid_levels": len(lob.bid_levels) if lob else 0,
                        "ask_levels": len(lob.ask_levels) if lob else 0})
    return 0


if __name__ == "__main__":
    sys.exit(main())
