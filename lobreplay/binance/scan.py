"""Stage 2 of the conversion: a recording's lines -> decoded batches. Its content (gzip or plain,
told from the bytes) in pieces of whole lines (a tolerated gzip break noted), what a pass over
it finds (streams, symbols, market), the
pieces decoded in C (bn_decode, on a read-ahead thread), and a cryptofeed log's two files merged
by receive time."""
from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np

from lobreplay import _gz
from lobreplay._ahead import read_ahead
from lobreplay.core._coreapi import BN_DEPTH, bn_decode, bn_values
from lobreplay.errors import InputError
from lobreplay.l2 import lobc
from lobreplay.binance.sync import SPOT, USDM

CHUNK = 1 << 22


def open_text(path: Path, buffer: int = CHUNK, *, tolerate: bool = False) -> Text:
    """The file's content (gzip inflated), read through a buffer of `buffer` bytes."""
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return Text(path, io.BufferedReader(_gz.open_path(path), buffer), tolerate, buffer)
    return Text(path, open(path, "rb", buffering=buffer), tolerate)


class Text:
    """A recording's content for reading (read, readlines, lines by iteration). A gzip stream
    that is corrupt or cut short, or a failing read, becomes an InputError that names the file
    and how many bytes of its text came before (instead of a traceback); with tolerate, the text
    ends there instead and `broken` says why (a capture's --raw .gz file of a killed process
    ends without its gzip trailer: everything before the break converts)."""

    def __init__(self, path: Path, f, tolerate: bool = False, gzip_buffer: int = 0):
        self.path, self._f, self.pos = path, f, 0
        self.tolerate, self._why, self._salvage = tolerate, None, None
        self._gzip_buffer = gzip_buffer  # a gzip file: its reader's buffer size

    @property
    def broken(self) -> str | None:
        """Why the text ended early (tolerate only), or None."""
        return self._why or (self._salvage.broken if self._salvage is not None else None)

    def __enter__(self) -> Text:
        return self

    def __exit__(self, *exc) -> None:
        self._f.close()

    def _took(self, data):
        self.pos += len(data) if isinstance(data, bytes) else sum(map(len, data))
        return data

    def _broken(self, e: BaseException, empty):
        """At a break: an InputError, or (tolerate) the end of the text. A gzip stream is
        read fast (ISA-L) until it breaks; then again, from where the text had got to, by a
        SalvageReader, which gives every decodable byte before the break and then ends."""
        why = f"{type(e).__name__}: {e}"
        if self.tolerate and self._gzip_buffer and self._salvage is None:
            self._f.close()
            self._f, self._salvage = _gz.salvage_from(self.path, self.pos, self._gzip_buffer)
            return None  # read again
        if self.tolerate:
            self._why = why
            return empty
        raise InputError(f"{self.path}: the text breaks off in the piece read after byte {self.pos:,} of it "
                         f"({why}; a gzip file cut short or corrupt? --allow-truncated converts what comes before "
                         "and says exactly where)") from None

    def read(self, n: int = -1) -> bytes:
        return self._call(lambda: self._f.read(n), b"")

    def readlines(self, hint: int = -1) -> list:
        return self._call(lambda: self._f.readlines(hint), [])

    def _call(self, op, empty):
        while not self._why:
            try:
                return self._took(op())
            except _gz.ERRORS as e:
                got = self._broken(e, empty)
                if got is not None:
                    return got
        return empty

    def __iter__(self):
        while line := self.read_line():
            yield line

    def read_line(self) -> bytes:
        return self._call(lambda: self._f.readline(), b"")


def read_head(path: Path, n: int = 4096) -> bytes:
    """The first n bytes of the content (a gzip file inflated only about that far: with
    open_text's usual 4 MB buffer it would inflate 4 MB to read 4 KB)."""
    try:
        with open_text(path, n) as f:
            return f.read(n)
    except InputError:  # a file that breaks off this early: what there is (the conversion reports the break)
        with open_text(path, n, tolerate=True) as f:
            head = f.read(n)
        if not head:
            raise
        return head


def iter_lines(path: Path, breaks: list | None = None):
    """The file's lines in batches of about CHUNK bytes; breaks: as for iter_chunks."""
    dropped = 0
    with open_text(path, tolerate=breaks is not None) as f:
        while True:
            lines = f.readlines(CHUNK)
            if not lines:
                break
            if f.broken and not lines[-1].endswith(b"\n"):  # the partial line before a break
                dropped = len(lines.pop())
            if lines:
                yield lines
        if f.broken:
            _note_break(breaks, path, f, dropped)


def _note_break(breaks: list, path: Path, f: Text, dropped: int) -> None:
    """Record where a tolerated break ended a file's text (once per file)."""
    if all(b["file"] != str(path) for b in breaks):
        breaks.append({"file": str(path), "text_bytes": f.pos - dropped, "dropped_bytes": dropped,
                       "reason": f.broken})


def iter_chunks(path: Path, breaks: list | None = None):
    """The file's content in pieces of about CHUNK bytes, each cut after a newline (the last
    piece may end without one). A file of up to CHUNK bytes is read in one call (a gzip one
    inflated in one call) and its text cut into pieces of up to 4 x CHUNK (one, for most
    recordings of a day): no reads through buffers, fewer pieces (spot 2024-08-08: 85 -> 78
    ms of CPU for the conversion). breaks (a list): a break in the gzip stream ends the text
    instead of raising, the partial line before it is dropped, and where it happened is
    appended to breaks."""
    if path.stat().st_size <= CHUNK:
        with open(path, "rb") as f:
            text = f.read()
        if text[:2] == b"\x1f\x8b":
            try:
                text = _gz.decompress(text)
            except _gz.ERRORS:
                text = None  # the streaming reader below reports where it breaks
        if text is not None:
            yield from _pieces(text, CHUNK // 2)
            return
    with open_text(path, tolerate=breaks is not None) as f:
        rest = b""
        while True:
            data = f.read(CHUNK)
            if not data:
                if f.broken:
                    _note_break(breaks, path, f, len(rest))
                elif rest:
                    yield rest
                return
            if rest:
                data = rest + data
            cut = data.rfind(b"\n") + 1
            if cut == len(data):
                rest = b""
                yield data
            elif cut:
                rest = data[cut:]
                yield data[:cut]
            else:
                rest = data


def _pieces(text: bytes, size: int):
    """text in pieces of up to about `size` bytes, each cut after a newline (a line longer
    than that is a piece of its own)."""
    start = 0
    while len(text) - start > size:
        cut = text.rfind(b"\n", start, start + size) + 1
        if cut <= start:
            cut = text.find(b"\n", start + size) + 1 or len(text)
        yield text[start:cut]
        start = cut
    if start < len(text):
        yield text[start:] if start else text


_STREAM_RE = re.compile(rb'"stream":\s*"([^"]+)"')


_S_RE = re.compile(rb'"s":\s*"([A-Za-z0-9_\-]+)"')


def _distinct(blob: bytes, key: bytes, rx: re.Pattern, *, word: bool = False):
    """The distinct values rx (`"key":\\s*"(...)"`) finds in blob: found in C (memmem, 10x the
    regex), by the regex when there are more than a few hundred."""
    got = bn_values(blob, key, word=word)
    return set(rx.findall(blob)) if got is None else got


KEEP_BYTES = 1 << 27  # a scan keeps the text it read, up to this much, for the conversion pass


class Seen:
    """What a scan finds in a recording's text, piece by piece in order: the streams, the
    symbols (from the streams; from the messages' "s" while no stream has been seen) and the
    market (from the first piece that shows it). partial: the scan stopped before the end."""

    def __init__(self):
        self.streams, self.symbols, self.market, self.partial = set(), set(), None, False

    def add(self, blob: bytes) -> None:
        for s in _distinct(blob, b"stream", _STREAM_RE):
            s = s.decode("ascii", "replace")
            if s.startswith("!") or s.endswith("@depthSnapshot"):
                continue
            self.streams.add(s)
            self.symbols.add(s.split("@", 1)[0].upper())
        if not self.streams:
            self.symbols.update(x.decode("ascii", "replace").upper() for x in _distinct(blob, b"s", _S_RE, word=True))
        if self.market is None:
            self.market = market_of(blob)


_USDM_SNAPSHOT_RE = re.compile(rb'"lastUpdateId":\d+,"E":')


def market_of(blob: bytes) -> str | None:
    """USD-M if the first depth event carries `pu` or the first snapshot has `E` after its
    lastUpdateId (futures snapshots do), spot if they do not, None if blob has neither.
    Only those lines are looked at: a spot recording's text is not searched end to end."""
    d = blob.find(b'"e":"depthUpdate"')
    if d >= 0:
        end = blob.find(b"\n", d)
        line = blob[blob.rfind(b"\n", 0, d) + 1:end if end >= 0 else len(blob)]
        if b'"pu":' in line:
            return USDM
    s = blob.find(b'"lastUpdateId"')
    if s >= 0 and _USDM_SNAPSHOT_RE.match(blob, s):
        return USDM
    return SPOT if d >= 0 or s >= 0 else None


def scan(paths, keep: dict | None = None, breaks: list | None = None, *, partial: bool = False) -> Seen:
    """Streams, symbols and market seen in hftbacktest-style files (one pass of regexes).
    keep (a dict): the chunks of text read, path -> list, if all of them come to at most
    KEEP_BYTES (else it is left empty), so that a small recording is decompressed once.
    partial: a recording with more text than that is read only that far (`partial` is then
    set on the result): the conversion pass, which reads it all anyway, sees the rest, and
    convert() converts again if the rest had more to say (a day's file is then inflated
    once for the conversion instead of twice). breaks: as for iter_chunks."""
    seen = Seen()
    kept, kept_bytes = {}, 0
    if len(set(paths)) != len(paths):  # a file named twice is read twice
        keep = None
    for p in paths:
        chunks = kept.setdefault(p, []) if keep is not None else None
        for blob in iter_chunks(p, breaks):
            kept_bytes += len(blob)
            if chunks is not None:
                if kept_bytes <= KEEP_BYTES:
                    chunks.append(blob)
                else:
                    keep, chunks = None, None
                    kept.clear()
            seen.add(blob)
            if partial and kept_bytes > KEEP_BYTES:
                seen.partial = True
                return seen
    if keep is not None:
        keep.update(kept)
    return seen


def _ns_from_secs(text: str) -> int:
    return lobc.parse_decimal(text.strip(), 10**9)


def cryptofeed_items(ws: Path, http: Path | None, breaks: list | None = None):
    """(recv_ns, kind, symbol, text) merged by receive time; kind 'ws' or 'snapshot'. A line
    whose receive time does not parse is an InputError naming the file and line; the last
    line cut short (no newline: a log copied in part, a killed process) is one too, unless
    breaks (--allow-truncated) is given: then it is dropped and noted there."""
    items = []
    url = None

    def lines(path: Path):
        pos = 0
        with open_text(path, tolerate=breaks is not None) as f:
            for n, raw in enumerate(f):
                if not raw.endswith(b"\n"):  # cryptofeed ends every line
                    if breaks is None:
                        raise InputError(f"{path}: line {n + 1} (byte {pos}): the log ends in the middle of a "
                                         "line (cut short? --allow-truncated converts what comes before)")
                    breaks.append({"file": str(path), "text_bytes": pos, "dropped_bytes": len(raw),
                                   "reason": "the last line is cut short"})
                    return
                yield n, pos, raw.decode("utf-8", "replace").rstrip("\n")
                pos += len(raw)

    def stamp(path: Path, n: int, pos: int, ts: str) -> int:
        try:
            return _ns_from_secs(ts)
        except ValueError:
            raise InputError(f"{path}: line {n + 1} (byte {pos}): receive time {ts[:40]!r} is not seconds "
                             "since the epoch (e.g. 1633998512.0633569)") from None

    for n, pos, line in lines(ws):
        if not line:
            continue
        if n == 0 and " <-> " in line:
            url = line.split(" <-> ", 1)[0]
            continue
        ts, _, msg = line.partition(": ")
        items.append((stamp(ws, n, pos, ts), 0, len(items), "ws", None, msg))
    if http is not None:
        for n, pos, line in lines(http):
            if not line.strip():
                continue
            head, _, body = line.partition(": ")
            u, _, ts = head.rpartition(" -> ")
            m = re.search(r"[?&]symbol=([A-Za-z0-9_\-]+)", u)
            if "/depth" not in u or not m:
                continue
            items.append((stamp(http, n, pos, ts), 1, len(items), "snapshot", m.group(1).upper(), body))
    items.sort(key=lambda x: (x[0], x[1], x[2]))
    return url, [(t, k, s, b) for t, _, _, k, s, b in items]


class _Pieces:
    """Pieces of text as read_ahead's source."""

    def __init__(self, pieces):
        self._pieces = pieces

    def chunks(self, buffers: int = 1):
        yield from self._pieces  # (each piece is a bytes object of its own: no buffer is reused)


def decoded(pieces, *, usdm: bool, price_digits: int, qty_digits: int, seen: Seen | None = None):
    """(piece, its bn_decode) for each piece of text, the next piece read and decoded on a
    thread while the caller converts this one (the C decoder runs without the GIL); seen:
    also scans each piece, on that thread."""
    dp, dq = price_digits, qty_digits

    def work(blob, _slot):
        if seen is not None:
            seen.add(blob)
        return bn_decode(blob, usdm=usdm, price_digits=dp, qty_digits=dq, names=True)
    return read_ahead(_Pieces(pieces), work)


def decode_depth(blob: bytes, *, usdm: bool, price_digits: int, qty_digits: int, bare: bool) -> dict:
    """The depthUpdate messages among the newline-separated lines of blob that the C decoder
    takes (lobreplay.core._coreapi.bn_decode): line index -> (recv_ns, U, u, pu, E ms, bids, asks,
    stream, s). The other lines are for machine.feed."""
    dec, levels = bn_decode(blob, usdm=usdm, price_digits=price_digits, qty_digits=qty_digits, bare=bare)
    return _depth_of(blob, dec, levels)


DEPTH_FIELDS = ("recv_ns", "first_id", "last_id", "prev_id", "exch_ms", "level", "n_bids", "n_asks", "stream_start",
                 "stream_len", "sym_start", "sym_len")  # a decoded depth line's, as depth_tuple takes them


def span(blob: bytes, start: int, n: int) -> str | None:
    """A name bn_decode found in blob (n = -1: none)."""
    return blob[start:start + n].decode("ascii") if n >= 0 else None


def depth_tuple(blob: bytes, levels: np.ndarray, recv, U, u, pu, E, lv, nb, na, ss, sl, ys, yl, *,
                 copy: bool = False) -> tuple:
    """A decoded depth line (its DEPTH_FIELDS) as (recv_ns, U, u, pu, E ms, bids, asks, stream,
    s); copy: its levels copied out of `levels` (an event the machine buffers keeps them)."""
    bids, asks = levels[lv:lv + nb], levels[lv + nb:lv + nb + na]
    if copy:
        bids, asks = bids.copy(), asks.copy()
    return recv, U, u, pu, E, bids, asks, span(blob, ss, sl), span(blob, ys, yl)


def _depth_of(blob: bytes, dec: np.ndarray, levels: np.ndarray) -> dict:
    idx = np.flatnonzero(dec["status"] == BN_DEPTH)
    if not len(idx):
        return {}
    d = dec[idx]
    levels = levels.copy()  # only the rows used: buffered events keep it alive
    return {i: depth_tuple(blob, levels, *vals) for i, *vals in zip(idx.tolist(), *(d[f].tolist()
                                                                                     for f in DEPTH_FIELDS))}
