"""lobreplay: market-data replay on a C price-time priority matching core."""
from .book import BatchResult, BookView, Fill, OrderBook, Session
from .errors import (BadEventError, BadPriceError, BadQuantityError, BookFullError, CorruptBookError,
                     DuplicateOrderError, InputError, LobError, OutOfBandError, UnknownInstrumentError,
                     UnknownOrderError)
from .events import BBO_DTYPE, DESYNC_DTYPE, EVENT_DTYPE, EXEC_DTYPE, RESULT_DTYPE, TIF, Cause, Flag, Kind, Side, Status

__version__ = "0.1.0"

__all__ = [
    "Session", "OrderBook", "BookView", "BatchResult", "Fill",
    "EVENT_DTYPE", "EXEC_DTYPE", "RESULT_DTYPE", "BBO_DTYPE", "DESYNC_DTYPE", "Kind", "Side", "TIF", "Status",
    "Flag", "Cause",
    "LobError", "UnknownOrderError", "DuplicateOrderError", "OutOfBandError", "BookFullError",
    "BadQuantityError", "BadPriceError", "BadEventError", "UnknownInstrumentError", "CorruptBookError",
    "InputError", "__version__",
]
