"""Binance depth capture and conversion to .lobc (docs/binance.md).

sync.py    the per-symbol depth sync state machine (pure: no I/O)
convert.py recorded files (hftbacktest, cryptofeed, our --raw JSONL) to .lobc
capture.py the live capture (asyncio + websockets)
fake.py    a local fake Binance (websocket streams + REST snapshots) for tests and --selftest
cli.py     `lobreplay capture binance ...`
"""
from .sync import SPOT, USDM, DepthSync

__all__ = ["SPOT", "USDM", "DepthSync"]
