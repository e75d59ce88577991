"""Stage 1 of the conversion: what a recording is. Its content (gzip or plain, told from the bytes),
its format, a --raw file's header, a cryptofeed log's sibling, the market its text shows.

Formats (gzip or plain, detected from the content):

* hftbacktest collector lines, `<recv ns> <message>`: combined-stream envelopes as the
  websocket delivered them, with the REST snapshot bodies (no envelope) between them at the
  time they arrived. The snapshot's symbol is the file's only symbol, else the one waiting
  for a snapshot whose buffered ids fit lastUpdateId best.
* our own `capture binance --raw` files: the same `<recv ns> <message>` lines, starting with a
  `{"lobreplay":{"format":"raw",...}}` header; snapshots are `{"stream":"<sym>@depthSnapshot",
  "data":<REST body>}` and the capture's own events (disconnects, failed snapshots) are
  `{"lobreplay":{"event":...}}` lines, so a conversion reproduces the capture's .lobc exactly.
* cryptofeed raw logs: `X.ws.N.M` (first line `<ws url> <-> <secs>`, then `<secs>: <envelope>`)
  and its sibling `X.http.N.M` (`<url> -> <secs>: <REST body>`), merged by receive time;
  the snapshot's symbol comes from the URL.

Several files are read as one continuous recording (e.g. hftbacktest day files in order).
"""
from __future__ import annotations

import io
import re
from pathlib import Path

from lobreplay import _gz
from lobreplay.binance.sync import SPOT, USDM, decode_json
from lobreplay.errors import InputError

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


def detect_format(path) -> str:
    """'raw' (ours), 'hftbacktest', 'cryptofeed-ws' or 'cryptofeed-http'."""
    head = read_head(Path(path))
    first = head.split(b"\n", 1)[0]
    if re.match(rb"^wss?://\S+ <-> [0-9.]+\s*$", first):
        return "cryptofeed-ws"
    if re.match(rb"^https?://\S+ -> [0-9.]+: ", first):
        return "cryptofeed-http"
    if re.match(rb"^[0-9]+ \{", first):
        return "raw" if first.split(b" ", 1)[1].startswith(b'{"lobreplay"') else "hftbacktest"
    if not head:
        raise InputError(f"{path}: empty file")
    raise InputError(f"{path}: not a recording this converter knows (hftbacktest `<recv ns> <json>` lines, "
                     "a lobreplay --raw file or a cryptofeed BINANCE*.ws/.http log)")


def raw_header(path) -> dict:
    """The header line of one of our --raw files (its first line)."""
    first = read_head(path, 1 << 16).split(b"\n", 1)[0]
    try:
        h = decode_json(first.split(b" ", 1)[1])["lobreplay"]
        if type(h) is not dict:
            raise TypeError
        return h
    except (ValueError, KeyError, TypeError, IndexError):
        raise InputError(f"{path}: byte 0: expected a lobreplay raw header line") from None


def cryptofeed_pair(path: Path) -> tuple[Path, Path | None]:
    m = re.match(r"^(.*)\.(ws|http)\.(\d+)\.(\d+)$", path.name)
    if not m:
        raise InputError(f"{path}: a cryptofeed log is named X.ws.N.M / X.http.N.M")
    other = "http" if m.group(2) == "ws" else "ws"
    sib = sorted(path.parent.glob(f"{m.group(1)}.{other}.*"))
    sib = sib[0] if sib else None
    return (path, sib) if m.group(2) == "ws" else (sib, path)


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
