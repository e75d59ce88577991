"""The Python API (public at the top level: `import lobreplay as lr`).

    r = lr.open_itch("day.itch.gz", symbols=["AAPL", "MSFT"])   # pass 1 done; or lr.open_lobc(path)
    r.run_until("10:00")                 # feed time of day, or a message (record) number
    r.book("AAPL").depth("B", 10)        # the live book there: [(price, shares, orders), ...]
    for c in r.chunks(until="10:05"):    # each step's events and report rows (Arrow; format="pandas")
        print(c.first, c.last, len(c.bbo))
    r.to_parquet("out/")                 # the rest of the day: every report as the command line writes it

A replay opened here is the command line's replay (lobreplay.replay.engine.Engine) stepped from
Python: its reports are written as it goes into a temporary directory, which to_parquet moves
into place (so the tables hold the whole day, the steps already taken included). close() (or a
`with` block) discards them.
"""
from __future__ import annotations

import os

from lobreplay.errors import InputError

__all__ = ["open_itch", "open_lobc", "replay_itch", "replay_lobc"]


def _config(cls, symbols, options: dict, **fixed):
    """A replay configuration from keyword options (its field names), a bad name an InputError."""
    import dataclasses
    fields = {f.name for f in dataclasses.fields(cls)}
    bad = sorted(set(options) - fields)
    if bad:
        raise InputError(f"unknown option(s) {', '.join(bad)}; choose from {', '.join(sorted(fields - set(fixed)))}")
    return cls(symbols=symbols, **{**fixed, **options})


def _path(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"path: expected a file name, got {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    return path


def open_itch(path, symbols=None, **options):
    """Open an ITCH 5.0 file (plain, gzip or pcap) for a replay driven from Python, and run
    its pass 1 (the books sized; from the sizing cache when an earlier replay scanned it).
    symbols: the symbols to replay (default: every symbol with orders). options: any field of
    lobreplay.itch.replay.ReplayConfig (headroom, reports, depth_levels, depth_every_ns, date,
    timing, allow_truncated, ...). Returns the replay (lobreplay.itch.replay.ItchReplay):
    run_until, chunks, book, to_parquet, close.

        r = lobreplay.open_itch("12302019.NASDAQ_ITCH50.gz", symbols=["AAPL"])
        r.run_until("10:00")
        r.book("AAPL").best_ask()
    """
    from lobreplay.itch.replay import ItchReplay, ReplayConfig
    # (a replay stopped inside a chunk keeps its events in file order: no regrouping by book)
    cfg = _config(ReplayConfig, symbols, options, group_books=options.pop("group_books", False), progress=False)
    return ItchReplay(_path(path), None, cfg).start()


def open_lobc(path, symbols=None, **options):
    """Open a .lobc file (Binance depth, lobreplay.l2.lobc) for a replay driven from Python,
    and run its pass 1. options: any field of lobreplay.l2.replay.L2ReplayConfig. A time of day
    ("12:00") is receive time (UTC) on the day of the first record; a number is a record number.

        r = lobreplay.open_lobc("btcusdt.lobc")
        r.run_until("12:00")
        r.book("BTCUSDT").depth("S", 5)
    """
    from lobreplay.l2.replay import L2ReplayConfig, LobcReplay
    cfg = _config(L2ReplayConfig, symbols, options, progress=False)
    return LobcReplay(_path(path), None, cfg).start()


def replay_itch(path, out_dir, cfg=None, *, force: bool = False) -> dict:
    """The whole replay of an ITCH file into out_dir (lobreplay.itch.replay.replay_itch)."""
    from lobreplay.itch.replay import replay_itch as run
    return run(path, out_dir, cfg, force=force)


def replay_lobc(path, out_dir, cfg=None, *, force: bool = False) -> dict:
    """The whole replay of a .lobc file into out_dir (lobreplay.l2.replay.replay_lobc)."""
    from lobreplay.l2.replay import replay_lobc as run
    return run(path, out_dir, cfg, force=force)
