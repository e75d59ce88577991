"""Exceptions. One base class; each C status code has its own subclass, which
also inherits the builtin a caller would expect. lobreplay.core._coreapi maps codes
to these classes in one place."""
from __future__ import annotations

import os


class LobError(Exception):
    """Base class of every lobreplay error.

    Attributes: ``status`` (the core's status code, or None), ``index`` (event
    index in the batch, or None), ``instrument`` (or None).
    """

    status: int | None = None

    def __init__(self, message: str, *, status: int | None = None, index: int | None = None,
                 instrument: int | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.index = index
        self.instrument = instrument


class UnknownOrderError(LobError, LookupError):
    """CANCEL/REDUCE/REPLACE of an id that is not live."""


class DuplicateOrderError(LobError, ValueError):
    """NEW (or REPLACE's new id) with an id that is already live."""


class OutOfBandError(LobError, ValueError):
    """Limit price outside the book's price band."""


class BookFullError(LobError):
    """The order pool is full and the order would have to rest."""


class BadQuantityError(LobError, ValueError):
    """Quantity <= 0, or REDUCE by more than remains."""


class BadPriceError(LobError, ValueError):
    """Limit price not on the band's tick grid."""


class BadEventError(LobError, ValueError):
    """Unknown event kind, side or time in force."""


class UnknownInstrumentError(LobError, LookupError):
    """No book for the event's instrument id."""


class CoreArgumentError(LobError, ValueError):
    """Bad argument to a creation or query call."""


class CoreMemoryError(LobError, MemoryError):
    """The core could not allocate at creation."""


class CorruptBookError(LobError, RuntimeError):
    """validate() found a broken invariant (a bug in the core: please report it)."""


class InputError(LobError):
    """Bad input data (file, array, stream); the message names where and what was expected."""


def refuse_overwrite(paths, force: bool) -> None:
    """Output files that exist (a path, or several) are replaced only when told so (--force).
    A dangling symbolic link counts as existing: writing would create its target."""
    if force:
        return
    there = [str(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths) if os.path.lexists(p)]
    if len(there) == 1:
        raise InputError(f"{there[0]} exists; use --force to overwrite it")
    if there:
        raise InputError(f"{', '.join(there)} exist; use --force to overwrite them")


def same_file(a, b) -> bool:
    """Whether paths a and b name the same file: the same path once resolved (symbolic links
    followed, `..` taken out; a file not there yet included), or, where both exist, the same
    file by os.path.samefile (a hard link, or the same file reached another way)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _paths(p) -> list:
    return [p] if isinstance(p, (str, os.PathLike)) else list(p)


def refuse_input_as_output(outputs, inputs) -> None:
    """Every command that reads files and writes files calls this first, --force or not: an
    output (a path, or several) that is one of the inputs would destroy what is being read,
    and two outputs that are one file would overwrite each other. InputError naming both."""
    outs, ins = _paths(outputs), _paths(inputs)
    for k, o in enumerate(outs):
        for i in ins:
            if same_file(o, i):
                named = f"{o}" if os.fspath(o) == os.fspath(i) else f"{o} (the same file as {i})"
                raise InputError(f"{named}: the output is an input of this command and would be overwritten "
                                 "while it is read; choose another output")
        for other in outs[k + 1:]:
            if same_file(o, other):
                raise InputError(f"{o} and {other}: two outputs of this command are the same file; "
                                 "give each its own")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by the command line's handler: a replay stops as it
    does on Ctrl-C (report files closed whole, summary.json with status failed)."""
