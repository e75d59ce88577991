"""Event, execution, result and top-of-book record types shared with the C core.

The numpy dtypes are built from the C structs (lobreplay.core._coreapi.struct_dtype),
so the header csrc/core/lob.h is the single source of truth for their layout.
"""
from __future__ import annotations

import enum

import numpy as np

from lobreplay.core._coreapi import BBO_DTYPE, CONSTANTS, DESYNC_DTYPE, EVENT_DTYPE, EXEC_DTYPE, RESULT_DTYPE, STATUS_NAMES
from lobreplay.errors import BadEventError

__all__ = ["EVENT_DTYPE", "EXEC_DTYPE", "RESULT_DTYPE", "BBO_DTYPE", "DESYNC_DTYPE", "Kind", "Side", "TIF",
           "Status", "Flag", "Cause", "empty_events"]

Kind = enum.IntEnum("Kind", {n: CONSTANTS[f"LOB_{n}"] for n in ("NEW", "CANCEL", "REDUCE", "REPLACE", "EXEC", "STATE")})
Kind.__doc__ = "Event kinds (lob_event.kind)."

Side = enum.IntEnum("Side", {"BUY": CONSTANTS["LOB_BUY"], "SELL": CONSTANTS["LOB_SELL"]})
Side.__doc__ = "Sides, ASCII 'B' and 'S' (lob_event.side)."

TIF = enum.IntEnum("TIF", {n: CONSTANTS[f"LOB_{n}"] for n in ("GTC", "IOC", "FOK", "MARKET")})
TIF.__doc__ = "Time in force of a NEW order (lob_event.tif)."

Flag = enum.IntFlag("Flag", {n: CONSTANTS[f"LOB_F_{n}"] for n in (
    "FEED", "PRICE", "NOCHECK", "NOTIONAL", "STP_CANCEL_RESTING", "STP_CANCEL_INCOMING", "STP_CANCEL_BOTH")})
Flag.__doc__ = ("Event flags (lob_event.flags): FEED, PRICE, NOCHECK for feed replays; NOTIONAL (a MARKET "
                "NEW whose qty is a budget) and STP_* (self-trade prevention): see docs/core.md.")

Cause = enum.IntEnum("Cause", {n: CONSTANTS[f"LOB_D_{n}"] for n in ("FILL_ORDER", "QTY", "CROSSED", "EXEC_PRICE")})
Cause.__doc__ = "Desync causes found by the core (lob_desync.cause)."

Status = enum.IntEnum("Status", {name: code for code, name in sorted(STATUS_NAMES.items())})
Status.__doc__ = "Per-event status codes (lob_result.status); 0 is OK."


def empty_events(n: int) -> np.ndarray:
    """A zeroed array of n events."""
    return np.zeros(n, dtype=EVENT_DTYPE)


_SIDES = frozenset(int(s) for s in Side)
_TIFS = frozenset(int(t) for t in TIF)


def as_side(side) -> int:
    """Side from a Side, 'B'/'S' (also 'BUY'/'SELL', 'bid'/'ask'), or its integer value."""
    if type(side) is int and side in _SIDES or isinstance(side, Side):
        return side
    if isinstance(side, str):
        s = side.strip().upper()
        if s in ("B", "BUY", "BID"):
            return Side.BUY
        if s in ("S", "SELL", "A", "ASK"):
            return Side.SELL
        raise BadEventError(f"side: expected 'B' or 'S', got {side!r}", status=CONSTANTS["LOB_EKIND"])
    try:
        if isinstance(side, bool) or not isinstance(side, (int, np.integer)):  # (66.9 is not BUY)
            raise ValueError
        return Side(int(side))
    except ValueError:
        raise BadEventError(f"side: expected 'B' (66) or 'S' (83), got {side!r}",
                            status=CONSTANTS["LOB_EKIND"]) from None


def as_tif(tif) -> int:
    """TIF from a TIF, its name ('GTC', 'IOC', 'FOK', 'MARKET'), or its integer value."""
    if type(tif) is int and tif in _TIFS or isinstance(tif, TIF):
        return tif
    if isinstance(tif, str):
        try:
            return TIF[tif.strip().upper()]
        except KeyError:
            raise BadEventError(f"tif: expected one of {', '.join(TIF.__members__)}, got {tif!r}",
                                status=CONSTANTS["LOB_EKIND"]) from None
    try:
        if isinstance(tif, bool) or not isinstance(tif, (int, np.integer)):  # (1.9 is not IOC)
            raise ValueError
        return TIF(int(tif))
    except ValueError:
        raise BadEventError(f"tif: expected 0..3, got {tif!r}", status=CONSTANTS["LOB_EKIND"]) from None
