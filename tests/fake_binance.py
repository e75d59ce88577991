"""The local fake Binance for the capture tests.

The server itself is lobreplay/testing/fake_binance.py (so `capture binance --selftest` has it in an
installed package too); this module feeds it the REAL recorded messages of the hftbacktest
files in data/real/binance (stream messages from the recorded snapshot on, and that
snapshot), runs it in a thread for subprocess tests, and builds the naive reference books
the tests compare against.
"""
from __future__ import annotations

import asyncio
import gzip
import threading

from lobreplay.testing.fake_binance import SPOT, USDM, Fault, FakeBinance, Script, script_from_lines, synthetic_script
from lobreplay.l2.lobc import DIFF_LEVEL, SNAPSHOT_BEGIN, SNAPSHOT_LEVEL, parse_decimal

__all__ = ["SPOT", "USDM", "Fault", "FakeBinance", "Script", "recorded_script", "synthetic_script", "ThreadedFake",
           "replay_books", "true_book", "BINANCE_DATA"]

from conftest import REAL_BINANCE as BINANCE_DATA  # noqa: E402
RECORDED = {SPOT: BINANCE_DATA / "hftbacktest" / "spot" / "btcusdt_20240808.gz",
            USDM: BINANCE_DATA / "hftbacktest" / "usdm" / "btcusdt_20240808.gz"}
_cache = {}


def recorded_script(market: str, max_items: int | None = None) -> Script:
    """BTCUSDT as recorded by hftbacktest (spot or USD-M): its snapshot and the messages after it."""
    path = RECORDED[market]
    assert path.is_file(), f"the recorded Binance fixtures are missing: expected {path}"
    key = (market, max_items)
    if key not in _cache:
        with gzip.open(path, "rt") as f:
            _cache[key] = script_from_lines(f, "BTCUSDT", market, max_items=max_items)
    s = _cache[key]
    return Script(s.symbol, s.snapshot, list(s.items))


class ThreadedFake:
    """A FakeBinance running in its own thread and event loop (for subprocess captures)."""

    def __init__(self, *args, **kw):
        self.args, self.kw = args, kw
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.fb = None
        self._stop = None

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self):
        self._stop = asyncio.Event()
        async with FakeBinance(*self.args, **self.kw) as fb:
            self.fb = fb
            self.ready.set()
            await self._stop.wait()

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(10), "fake Binance did not start"
        return self.fb

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(10)


def replay_books(records, n_symbols: int):
    """Books from .lobc records, naively: SNAPSHOT_BEGIN empties, SNAPSHOT/DIFF levels set (0 deletes)."""
    books = [({}, {}) for _ in range(n_symbols)]
    for r in records.tolist():
        kind, side, sym, price, qty = r[7], r[8], r[9], r[5], r[6]
        if kind == SNAPSHOT_BEGIN:
            books[sym] = ({}, {})
        elif kind in (SNAPSHOT_LEVEL, DIFF_LEVEL):
            book = books[sym][0 if side == ord("B") else 1]
            if qty == 0:
                book.pop(price, None)
            else:
                book[price] = qty
    return books


def true_book(fb: FakeBinance, symbol: str, scale: int = 10**8):
    """The server's book of symbol (script snapshot + every depth event it played), scaled."""
    b = fb.books[symbol.upper()]
    return ({parse_decimal(p, scale): parse_decimal(q, scale) for p, q in b.bids.items()},
            {parse_decimal(p, scale): parse_decimal(q, scale) for p, q in b.asks.items()})
