"""itchcpp: itchcpp.book.BookManager.process_stream over the whole day (every symbol,
L3 books in C++), then L3Book.bbo() per symbol.

process_stream takes bytes, so the day is read into memory first (in two reads,
split at the checkpoint); the read is inside the timed region.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def main() -> int:
    a = common.parser(__doc__).parse_args()
    from itchcpp.book import BookManager

    symbols = common.load_symbols(a.symbols)

    def snapshot(m) -> dict:
        out = {}
        for s in symbols.values():
            book = m.book_for_symbol(s)
            if book is None:          # no order ever reached this symbol
                out[s] = [0, 0, 0, 0]
                continue
            b = book.bbo()
            # prices come back as float dollars; ITCH integers are exact in a double
            out[s] = [round(b.bid_price * 10_000) if b.has_bid else 0, b.bid_shares if b.has_bid else 0,
                      round(b.ask_price * 10_000) if b.has_ask else 0, b.ask_shares if b.has_ask else 0]
        return out

    clock = common.Clock()
    m = BookManager()
    with open(a.file, "rb") as f:
        head = f.read(a.checkpoint_offset)
        clock.lap("read")
        m.process_stream(head)
        del head
        clock.lap("to checkpoint")
        checkpoint = snapshot(m)
        clock.lap("snapshot")
        tail = f.read()
        clock.lap("read")
    m.process_stream(tail)
    clock.lap("rest")
    final = snapshot(m)
    clock.lap("snapshot")
    common.write(a.out, tool="itchcpp", version=common.version("itchcpp"), mode="BookManager.process_stream",
                 messages=None, seconds=clock.total(), phases=clock.phases, checkpoint=checkpoint, final=final,
                 stats={"books": m.book_count()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
