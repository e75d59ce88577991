"""lobreplay: market-data replay on a C price-time priority matching core.

    import lobreplay as lr
    r = lr.open_itch("day.itch.gz", symbols=["AAPL"])   # or lr.open_lobc("x.lobc")
    r.run_until("10:00")
    r.book("AAPL").depth("B", 10)
    for c in r.chunks(until="10:05"): ...
    r.to_parquet("out/")
    rep = lr.load_reports("out/")                        # the reports as pandas; lr.analysis: the plots

The public names below are imported on first use (PEP 562), so that the
command line can start, and set up its environment, before numpy loads.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_FROM = {
    ".core.book": ("BatchResult", "BookView", "Fill", "OrderBook", "Session"),
    ".errors": ("BadEventError", "BadPriceError", "BadQuantityError", "BookFullError", "CorruptBookError",
                "DuplicateOrderError", "InputError", "LobError", "OutOfBandError", "UnknownInstrumentError",
                "UnknownOrderError"),
    ".core.events": ("BBO_DTYPE", "DESYNC_DTYPE", "EVENT_DTYPE", "EXEC_DTYPE", "RESULT_DTYPE", "TIF", "Cause", "Flag",
                "Kind", "Side", "Status"),
    ".api": ("open_itch", "open_lobc", "replay_itch", "replay_lobc"),
    ".replay.engine": ("BookAt", "Chunk"),
    ".itch.replay": ("ReplayConfig",),
    ".l2.replay": ("L2ReplayConfig",),
    ".itch.tools": ("ItchStats", "itch_stats", "decode_itch"),
}
_WHERE = {name: (module, name) for module, names in _FROM.items() for name in names}
# Public under another name than their module's: the report loader, the Binance conversion.
_WHERE.update({"load_reports": (".reports.analysis", "load"), "convert_binance": (".binance.convert", "convert")})
# Public submodules (an attribute of the package: `lr.analysis.plot_bbo(...)`).
_MODULES = {"analysis": ".reports.analysis"}

__all__ = [
    "open_itch", "open_lobc", "replay_itch", "replay_lobc", "ReplayConfig", "L2ReplayConfig", "BookAt", "Chunk",
    "itch_stats", "decode_itch", "ItchStats", "load_reports", "analysis", "convert_binance",
    "Session", "OrderBook", "BookView", "BatchResult", "Fill",
    "EVENT_DTYPE", "EXEC_DTYPE", "RESULT_DTYPE", "BBO_DTYPE", "DESYNC_DTYPE", "Kind", "Side", "TIF", "Status",
    "Flag", "Cause",
    "LobError", "UnknownOrderError", "DuplicateOrderError", "OutOfBandError", "BookFullError",
    "BadQuantityError", "BadPriceError", "BadEventError", "UnknownInstrumentError", "CorruptBookError",
    "InputError", "__version__",
]


def __getattr__(name: str):
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name], __name__)
    elif name in _WHERE:
        module, attr = _WHERE[name]
        value = getattr(importlib.import_module(module, __name__), attr)
    else:
        raise AttributeError(f"module 'lobreplay' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
