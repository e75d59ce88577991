"""Pass 1 of a replay, kept between replays of the same file: the sizing cache.

A replay sizes every book from a first pass over the whole file (about a third of an ITCH
replay without reports, a fifth of a .lobc one). Researchers replay one file many times:
other symbols, other reports. The first replay of a file keeps what its pass 1 found in a
small entry; a later replay of the same, unchanged file reads the entry instead of
scanning again.

Which file an entry belongs to is decided without reading the whole file: its resolved
path, size, modification time (ns), inode and device, the SHA-256 of its first and last
64 KiB, the options that change what pass 1 finds, this lobreplay's version and the
compiled core's own SHA-256 (a rebuilt core may scan differently). The entry also holds the
file's whole SHA-256 once a replay has computed it (every replay does unless --no-hash); a
replay from the entry checks it against its own at the end, so a file rewritten in place
with its size, time and both ends kept still cannot pass unnoticed: the entry is removed
and the replay fails, saying so.

Where: $LOBREPLAY_CACHE_DIR, else $XDG_CACHE_HOME/lobreplay, else ~/.cache/lobreplay,
one subdirectory per kind of replay. LOBREPLAY_CACHE_DIR=off (or empty) turns it off, as
does `--no-cache` for one replay. Entries are compressed (a full ITCH day's, about 9,000
symbols, some 0.7 MB by the 1,000-symbol day's 75 KB) and the cache keeps at most
$LOBREPLAY_CACHE_MAX_MB (default 256) megabytes: past that, the entries used longest ago
go (an entry's modification time is its last use). Deleting the directory is always safe
(`lobreplay cache clear`). An entry that cannot be read is recomputed and rewritten; one
that cannot be written is reported in the summary's notes; neither stops a replay.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time

import numpy as np

from lobreplay import __version__
from lobreplay.errors import InputError

FORMAT = 4                # bumped whenever an entry's layout, or what a pass 1 records, changes
ENDS = 64 << 10           # bytes read at each end of the file for its fingerprint
KINDS = ("itch-pass1", "lobc-pass1")  # the replays that keep entries: a subdirectory each
MAX_MB = 256              # the cache's size, unless LOBREPLAY_CACHE_MAX_MB says otherwise
STALE_TMP = 3600          # seconds after which a writer's temporary file is a killed writer's
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


def max_bytes() -> int:
    """The cache's size limit (LOBREPLAY_CACHE_MAX_MB, megabytes; default MAX_MB)."""
    v = os.environ.get("LOBREPLAY_CACHE_MAX_MB", "").strip()
    try:
        mb = float(v) if v else MAX_MB
    except ValueError:
        raise InputError(f"LOBREPLAY_CACHE_MAX_MB: expected a number of megabytes, got {v!r}") from None
    if not mb >= 0:
        raise InputError(f"LOBREPLAY_CACHE_MAX_MB: expected a number of megabytes >= 0, got {v!r}")
    return int(mb * 1e6)


def core_digest() -> str:
    """SHA-256 of the compiled core in use (once per process)."""
    global _core_digest
    if _core_digest is None:
        from lobreplay.core import _coreapi
        with open(_coreapi._core.__file__, "rb") as f:
            _core_digest = hashlib.file_digest(f, "sha256").hexdigest()
    return _core_digest


def identity(path: str, kind: str, **options) -> dict:
    """What identifies `path` as it is now for a replay of `kind` (see the module's notes),
    with the options that change what its pass 1 finds."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        h = hashlib.sha256(f.read(ENDS))
        if st.st_size > ENDS:
            f.seek(max(ENDS, st.st_size - ENDS))
            h.update(f.read(ENDS))
    return {"format": FORMAT, "kind": kind, "lobreplay": __version__, "core": core_digest(),
            "path": os.path.realpath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "inode": st.st_ino, "device": st.st_dev, "ends_sha256": h.hexdigest(), "options": options}


def entry_path(directory: str, ident: dict) -> str:
    name = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:32]
    return os.path.join(directory, ident["kind"], f"{name}.npz")


def _text(a: np.ndarray):
    return json.loads(a.tobytes().decode())


def _array(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj, sort_keys=True).encode(), np.uint8)


def load(path: str, ident: dict) -> tuple[dict[str, np.ndarray], dict] | None:
    """(arrays, meta) of the entry at path, or None when there is none. Raises BadEntry
    (with the reason) for an entry that is unreadable or for another file."""
    try:
        with np.load(path, allow_pickle=False) as z:
            got, meta = _text(z["identity"]), _text(z["meta"])
            arrays = {k: z[k] for k in z.files if k not in ("identity", "meta")}
    except (FileNotFoundError, NotADirectoryError):  # (no entry; or no cache directory where one would be)
        return None
    except Exception as e:  # (a torn or foreign file: zipfile, numpy and json each raise their own)
        raise BadEntry(f"unreadable ({type(e).__name__}: {e})") from None
    if got != ident:
        raise BadEntry("it was made for another file (a collision of the entry's name)")
    if not isinstance(meta, dict):
        raise BadEntry("its figures do not have this lobreplay's layout")
    with contextlib.suppress(OSError):
        os.utime(path)  # (used now: the last to go when the cache is pruned)
    return arrays, meta


def save(path: str, ident: dict, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write the entry atomically (a crash leaves the old one or none, never half)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez_compressed(f, identity=_array(ident),
                                meta=_array({**meta, "written_unix": round(time.time(), 3)}), **arrays)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def prune(directory: str, limit: int, keep: str | None = None) -> tuple[int, int]:
    """Remove the entries used longest ago until those left take at most `limit` bytes
    (never `keep`, the one just written), and temporary files of writers killed an hour or
    more ago; returns (files removed, bytes freed)."""
    now, n, freed = time.time(), 0, 0
    found = []
    for p in entries(directory) + _files(directory, ".tmp"):
        with contextlib.suppress(OSError):
            st = os.stat(p)
            if p.endswith(".tmp"):
                if now - st.st_mtime > STALE_TMP and _remove(p):
                    n, freed = n + 1, freed + st.st_size
            else:
                found.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in found)
    for _, size, p in sorted(found):
        if total <= limit:
            break
        if p != keep and _remove(p):
            total -= size
            n, freed = n + 1, freed + size
    return n, freed


def _remove(path: str) -> bool:
    try:
        os.remove(path)
        return True
    except OSError:
        return False


def _files(directory: str, suffix: str) -> list[str]:
    """The files of every kind's subdirectory whose names end so."""
    out = []
    for kind in KINDS:
        sub = os.path.join(directory, kind)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            out += [os.path.join(sub, n) for n in os.listdir(sub) if n.endswith(suffix)]
    return sorted(out)


class Entry:
    """The sizing cache for one replay of one file. `find` before pass 1: what an earlier
    replay left, or None (scan). After a scan, `scanned` stores what it found at once (a
    replay stopped or failed later leaves it too), without the file's SHA-256, which the
    replay knows only at its end; `finish`, once the replay has succeeded, adds it, or, for
    a pass 1 taken from the entry, checks the entry's against it (`check`). Troubles are
    lines in `notes`."""

    def __init__(self, path: str, kind: str, notes: list[str], *, enabled: bool = True, **options):
        self.path, self.kind, self.notes, self.options = path, kind, notes, options
        self.where = self.ident = None
        self.found: dict | None = None  # the meta of the entry find() returned
        self._got = None                # (arrays, meta) of that entry, or of the scan stored
        directory = cache_dir() if enabled else None
        if directory is None:
            return
        self.limit = max_bytes()  # (a bad setting said now, not after the replay)
        try:
            self.ident = identity(path, kind, **options)
        except OSError:
            return  # (pass 1 says what is wrong with the file)
        self.where = entry_path(directory, self.ident)

    def find(self) -> tuple[dict[str, np.ndarray], dict] | None:
        if self.where is None:
            return None
        try:
            got = load(self.where, self.ident)
        except (BadEntry, OSError) as e:
            self.notes.append(f"sizing cache entry {self.where}: {e}; pass 1 scanned the file again")
            return None
        self.found, self._got = (got[1], got) if got else (None, None)
        return got

    def unusable(self, why: str) -> None:
        """The entry find() returned cannot be used after all (its figures' layout): noted,
        and pass 1 scans."""
        self.notes.append(f"sizing cache entry {self.where}: its figures do not have this lobreplay's layout "
                          f"({why}); pass 1 scanned the file again")
        self.found = self._got = None

    def scanned(self, arrays: dict[str, np.ndarray], meta: dict) -> None:
        """Right after pass 1 scanned the file: store what it found."""
        if self.where is not None:
            self._got = (arrays, meta)
            self._write("")

    def finish(self, sha256: str) -> None:
        """After a replay that succeeded: a pass 1 from the entry checked against the file's
        SHA-256; that SHA-256 added to an entry without one."""
        if self.where is None or self._got is None:  # (off, or the scan's entry not written)
            return
        if self.found is not None:
            self.check(sha256)
            if self.found.get("sha256"):
                return
        if sha256:
            self._write(sha256)

    def check(self, sha256: str) -> None:
        """After a replay from the entry: InputError (the entry removed) if the file's SHA-256
        is not the one the entry holds (if it holds one: one made with --no-hash, or by a
        replay stopped after its pass 1, does not)."""
        known = self.found.get("sha256", "")
        if known and sha256 and known != sha256:
            _remove(self.where)
            raise InputError(
                f"{self.path}: its SHA-256 is {sha256}, not {known} as when the sizing cache entry {self.where} "
                "was made (the file changed in place since, its size, time and both ends kept: rewritten, "
                "or damaged on the disk): this replay's books were sized from the old file's figures (and a "
                ".lobc file's block checksums taken as checked then), so its reports cannot be trusted. "
                "The entry is removed; replay again (or use --no-cache)")

    def _write(self, sha256: str) -> None:
        """The entry (self._got, with sha256) written, if the file is still the one it was
        made from (else one written earlier in this replay goes)."""
        arrays, meta = self._got
        try:
            if identity(self.path, self.kind, **self.options) != self.ident:
                _remove(self.where)
                self._got = None
                self.notes.append("the input changed during the replay: its pass 1 was not kept in the sizing cache")
                return
            save(self.where, self.ident, arrays, {**meta, "sha256": sha256})
            prune(os.path.dirname(os.path.dirname(self.where)), self.limit, keep=self.where)
        except OSError as e:
            self._got = None
            self.notes.append(f"could not write the sizing cache entry {self.where} ({e.strerror or e}): "
                              "the next replay of this file scans it again")


def entries(directory: str | None = None) -> list[str]:
    """The entry files in the cache directory (default: cache_dir())."""
    directory = cache_dir() if directory is None else directory
    return _files(directory, ".npz") if directory else []


def describe(path: str) -> dict:
    """What the entry at path is for (`lobreplay cache list`): its kind, source file (path,
    size, options), bytes, last use, and whether the source is gone or changed since (by
    its size, time and inode: no bytes read), or {"entry": path, "error": ...}."""
    try:
        st = os.stat(path)
        with np.load(path, allow_pickle=False) as z:
            ident = _text(z["identity"])
        out = {"entry": path, "bytes": st.st_size, "last_used_unix": st.st_mtime, "kind": ident["kind"],
               "source": ident["path"], "source_size": ident["size"], "options": ident.get("options", {})}
    except Exception as e:  # (a torn or foreign file: what list shows, not a failure)
        return {"entry": path, "error": f"unreadable ({type(e).__name__}: {e})"}
    try:
        now = os.stat(ident["path"])
        same = (now.st_size, now.st_mtime_ns, now.st_ino) == (ident["size"], ident["mtime_ns"], ident["inode"])
        out["source_state"] = "unchanged" if same else "changed since"
    except OSError:
        out["source_state"] = "gone"
    return out


def clear(directory: str | None = None) -> tuple[int, int]:
    """Remove every entry (and any temporary file left by a killed writer); returns
    (files removed, bytes freed)."""
    directory = cache_dir() if directory is None else directory
    n = freed = 0
    for p in (entries(directory) + _files(directory, ".tmp")) if directory else []:
        try:
            size = os.path.getsize(p)
        except OSError:
            continue
        if _remove(p):
            n, freed = n + 1, freed + size
    return n, freed
