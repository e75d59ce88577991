"""Binance depth capture and conversion to .lobc (docs/binance.md).

sync.py    DepthSync, the driver of the depth sync machine (in C: csrc/feeds/bnsync.c); no I/O
detect.py  a recording's format and header (what a file is)
scan.py    a recording's content and lines -> decoded batches (and the streams, symbols, market they show)
convert.py decoded batches -> .lobc records through the machine; convert() puts the stages together
capture.py the live capture (asyncio + websockets)
(the fake Binance of the tests and --selftest: lobreplay.testing.fake_binance; the command:
lobreplay.cli.binance)
"""
__all__ = ["SPOT", "USDM", "DepthSync"]


def __getattr__(name):
    """The names of sync.py, imported on first use (the CLI imports this package to build
    its parser: every command would pay for sync.py's import otherwise)."""
    if name in __all__:
        from lobreplay.binance import sync
        return getattr(sync, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
