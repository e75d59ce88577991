"""Shared by the peer drivers (run in the peers virtualenv, not lobreplay's).

Every driver is called by benchmarks/bench_peers.py as

    python run_TOOL.py FILE --checkpoint-offset B --checkpoint-message K --symbols SYMBOLS.json --out OUT.json

FILE is a raw BinaryFILE ITCH 5.0 day. The generated days end with a D for every
live order, so every book is empty at the end; the books are therefore also
compared at a checkpoint: after the first K messages (byte offset B, the start
of that end-of-day delete run). A driver feeds bytes [0, B), records the best
bid/ask of every symbol, feeds the rest, records them again, and writes OUT.json:

    {"tool", "version", "mode", "messages", "seconds", "phases": {...},
     "checkpoint": {symbol: [bid_px, bid_qty, ask_px, ask_qty]}, "final": {...}, "stats": {...}}

Prices are ITCH integers (1/10000 dollar); an empty side is [0, 0]. "seconds" is
the driver's own timed region (from opening the file to the final book, imports
and interpreter start-up excluded); the harness measures the process wall time
and peak RSS itself.
"""
from __future__ import annotations

import argparse
import json
import time
from importlib.metadata import version as _version


def parser(doc: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("file")
    ap.add_argument("--checkpoint-offset", type=int, required=True, help="byte offset of message K")
    ap.add_argument("--checkpoint-message", type=int, required=True, help="K: books compared after K messages")
    ap.add_argument("--symbols", required=True, help="JSON {locate: symbol} of the file's stock directory")
    ap.add_argument("--out", required=True)
    return ap


def load_symbols(path: str) -> dict[int, str]:
    with open(path) as fh:
        return {int(k): v for k, v in json.load(fh).items()}


def version(dist: str) -> str:
    return _version(dist)


def write(out: str, **fields) -> None:
    with open(out, "w") as fh:
        json.dump(fields, fh)


class Clock:
    """Named phases of the timed region."""

    def __init__(self) -> None:
        self.t0 = self.t = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = round(self.phases.get(name, 0.0) + now - self.t, 6)
        self.t = now

    def total(self) -> float:
        return round(time.perf_counter() - self.t0, 6)
