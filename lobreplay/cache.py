"""Pass 1 of an ITCH replay, kept between replays of the same file.

A replay sizes every book from a first pass over the whole day (about a third of
a replay without reports). Researchers replay one day many times: other symbols,
other reports, other headroom. The first replay of a file keeps what its pass 1
found in a small entry (about 100 bytes per symbol, plus the directory); a later
replay of the same, unchanged file reads the entry instead of scanning again.

Which file an entry belongs to is decided without reading the whole file: its
resolved path, size, modification time (ns), inode and device, the SHA-256 of
its first and last 64 KiB, whether a truncated tail was allowed, this lobreplay's
version and the compiled core's own SHA-256 (a rebuilt core may scan differently).
The entry also holds the file's whole SHA-256 once a replay has computed it (every
replay does unless --no-hash); a replay from the entry checks it against its own
at the end, so a file rewritten in place with its size, time and both ends kept
still cannot pass unnoticed: the entry is removed and the replay fails, saying so.

Where: $LOBREPLAY_CACHE_DIR, else $XDG_CACHE_HOME/lobreplay, else
~/.cache/lobreplay. LOBREPLAY_CACHE_DIR=off (or empty) turns it off, as does
`--no-cache` for one replay. Deleting the directory is always safe
(`lobreplay cache clear`). An entry that cannot be read is recomputed and
rewritten; one that cannot be written is reported in the summary's notes; neither
stops a replay.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time

import numpy as np

from . import __version__

FORMAT = 1                # bumped whenever what pass 1 records, or how, changes
ENDS = 64 << 10           # bytes read at each end of the file for its fingerprint
KIND = "itch-pass1"       # the entries' subdirectory and file prefix
_OFF = ("", "0", "off", "none", "no", "false")
_core_digest: str | None = None


class BadEntry(Exception):
    """An entry that cannot be used (the message says why); it is recomputed."""


def cache_dir() -> str | None:
    """Where the entries live, or None when caching is off."""
    v = os.environ.get("LOBREPLAY_CACHE_DIR")
    if v is not None:
        return None if v.strip().lower() in _OFF else v
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "lobreplay")


def core_digest() -> str:
    """SHA-256 of the compiled core in use (once per process)."""
    global _core_digest
    if _core_digest is None:
        from . import _coreapi
        with open(_coreapi._core.__file__, "rb") as f:
            _core_digest = hashlib.file_digest(f, "sha256").hexdigest()
    return _core_digest


def identity(path: str, **options) -> dict:
    """What identifies `path` as it is now (see the module's notes), with options that
    change what pass 1 finds."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        h = hashlib.sha256(f.read(ENDS))
        if st.st_size > ENDS:
            f.seek(max(ENDS, st.st_size - ENDS))
            h.update(f.read(ENDS))
    return {"format": FORMAT, "kind": KIND, "lobreplay": __version__, "core": core_digest(),
            "path": os.path.realpath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "inode": st.st_ino, "device": st.st_dev, "ends_sha256": h.hexdigest(), **options}


def entry_path(directory: str, ident: dict) -> str:
    name = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:32]
    return os.path.join(directory, KIND, f"{name}.npz")


def _text(a: np.ndarray) -> dict:
    return json.loads(a.tobytes().decode())


def _array(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj, sort_keys=True).encode(), np.uint8)


def load(path: str, ident: dict):
    """(stats, meta) from the entry at path, or None when there is none. Raises
    BadEntry (with the reason) for an entry that is unreadable or for another file."""
    try:
        with np.load(path, allow_pickle=False) as z:
            got, meta = _text(z["identity"]), _text(z["meta"])
            rows, locates, blank = z["rows"], z["locates"], z["blank"]
    except (FileNotFoundError, NotADirectoryError):  # (no entry; or no cache directory where one would be)
        return None
    except Exception as e:  # (a torn or foreign file: zipfile, numpy and json each raise their own)
        raise BadEntry(f"unreadable ({type(e).__name__}: {e})") from None
    if got != ident:
        raise BadEntry("it was made for another file (a collision of the entry's name)")
    from ._coreapi import LOCATE_DTYPE
    if (rows.dtype != LOCATE_DTYPE or blank.dtype != LOCATE_DTYPE or len(rows) != len(locates)
            or blank.shape != (1,) or not isinstance(meta, dict)):
        raise BadEntry("its figures do not have this lobreplay's layout")
    stats = np.repeat(blank, 65536)
    stats[locates] = rows
    return stats, meta


def save(path: str, ident: dict, stats: np.ndarray, blank: np.ndarray, meta: dict) -> None:
    """Write the entry atomically (a crash leaves the old one or none, never half).
    stats: pass 1's row per locate; blank: the row of a locate pass 1 never met (only
    the other rows are written)."""
    used = np.flatnonzero(stats != blank)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, identity=_array(ident), locates=used.astype(np.uint16), rows=stats[used],
                     blank=np.asarray(blank).reshape(1),
                     meta=_array({**meta, "written_unix": round(time.time(), 3)}))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def entries(directory: str | None = None) -> list[str]:
    """The entry files in the cache directory (default: cache_dir())."""
    directory = cache_dir() if directory is None else directory
    if not directory:
        return []
    sub = os.path.join(directory, KIND)
    try:
        names = os.listdir(sub)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(sub, n) for n in names if n.endswith(".npz"))


def clear(directory: str | None = None) -> tuple[int, int]:
    """Remove every entry (and any temporary file left by a killed writer); returns
    (files removed, bytes freed)."""
    directory = cache_dir() if directory is None else directory
    if not directory:
        return 0, 0
    sub = os.path.join(directory, KIND)
    n = freed = 0
    for name in os.listdir(sub) if os.path.isdir(sub) else []:
        if name.endswith((".npz", ".tmp")):
            p = os.path.join(sub, name)
            try:
                size = os.path.getsize(p)
                os.remove(p)
            except OSError:
                continue
            n, freed = n + 1, freed + size
    return n, freed
