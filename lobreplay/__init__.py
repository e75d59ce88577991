"""lobreplay: market-data replay on a C price-time priority matching core.

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
}
_WHERE = {name: module for module, names in _FROM.items() for name in names}

__all__ = [
    "Session", "OrderBook", "BookView", "BatchResult", "Fill",
    "EVENT_DTYPE", "EXEC_DTYPE", "RESULT_DTYPE", "BBO_DTYPE", "DESYNC_DTYPE", "Kind", "Side", "TIF", "Status",
    "Flag", "Cause",
    "LobError", "UnknownOrderError", "DuplicateOrderError", "OutOfBandError", "BookFullError",
    "BadQuantityError", "BadPriceError", "BadEventError", "UnknownInstrumentError", "CorruptBookError",
    "InputError", "__version__",
]


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'lobreplay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
