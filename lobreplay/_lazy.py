"""Modules imported on first use.

pyarrow (with pyarrow.parquet) takes about 0.05-0.1 s to import; a replay without
reports does not need it. pyarrow.compute takes as long again (it wraps each of its
functions in Python at import) and a replay needs it only for a desyncs table with rows
(a sort): it is imported on first use, not by `load`/`preload`, and lobreplay.core.arrow
builds the report columns without casts or takes, which would import it. The modules that
write reports refer to pyarrow through `Deferred` stand-ins. A replay that will write them imports them after its first
pass (`load`: on two cores an import thread during the pass competed with the reader, the
hash and the scan, and gained nothing); a parallel replay's parent imports them on a thread
during its own first pass (`preload`), once for all the parts it forks afterwards.
(pandas, 0.25 s more, is not needed by a replay at all: `pyarrow.array` would import it, so
reports build their arrays with lobreplay.core.arrow.)
"""
from __future__ import annotations

import importlib
import sys
import threading

ARROW = ("pyarrow", "pyarrow.parquet")


class Deferred:
    """Stands for module `name`: the first attribute read imports it."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"


def load(names=ARROW) -> None:
    """Import the modules now, on this thread."""
    for n in names:
        importlib.import_module(n)


def preload(names=ARROW) -> threading.Thread | None:
    """Import the modules on a daemon thread (the import lock makes a use meanwhile wait).
    Returns the thread (None if every module is imported already), for a caller that must
    join it, e.g. before a fork."""
    missing = [n for n in names if n not in sys.modules]
    if not missing:
        return None
    t = threading.Thread(target=lambda: [importlib.import_module(n) for n in missing], daemon=True,
                         name="preload-imports")
    t.start()
    return t
