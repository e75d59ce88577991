"""Recorded Binance depth captures -> .lobc, through the same sync machine as the live capture.

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

import gc
import io
import os
import re
import time
from pathlib import Path

import numpy as np

from lobreplay import _gz
from lobreplay.l2 import lobc
from lobreplay._ahead import read_ahead
from lobreplay.core._coreapi import BN_DEPTH, BN_SYNC_DTYPE, BN_TAKEN_DTYPE, bn_decode, bn_records, bn_values
from lobreplay.errors import InputError
from lobreplay.l2.lobc import GAP_ROTATE, GAP_SHUTDOWN, INT64_MAX, RECORD_DTYPE
from lobreplay.binance.sync import SPOT, USDM, DepthSync, decode_json, open_writer

CHUNK = 1 << 22


def _open(path: Path, buffer: int = CHUNK, *, tolerate: bool = False) -> _Text:
    """The file's content (gzip inflated), read through a buffer of `buffer` bytes."""
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return _Text(path, io.BufferedReader(_gz.open_path(path), buffer), tolerate, buffer)
    return _Text(path, open(path, "rb", buffering=buffer), tolerate)


class _Text:
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

    def __enter__(self) -> _Text:
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


def _head(path: Path, n: int = 4096) -> bytes:
    """The first n bytes of the content (a gzip file inflated only about that far: with
    _open's usual 4 MB buffer it would inflate 4 MB to read 4 KB)."""
    try:
        with _open(path, n) as f:
            return f.read(n)
    except InputError:  # a file that breaks off this early: what there is (the conversion reports the break)
        with _open(path, n, tolerate=True) as f:
            head = f.read(n)
        if not head:
            raise
        return head


def detect_format(path) -> str:
    """'raw' (ours), 'hftbacktest', 'cryptofeed-ws' or 'cryptofeed-http'."""
    head = _head(Path(path))
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


def _iter_lines(path: Path, breaks: list | None = None):
    """The file's lines in batches of about CHUNK bytes; breaks: as for _iter_chunks."""
    dropped = 0
    with _open(path, tolerate=breaks is not None) as f:
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


def _note_break(breaks: list, path: Path, f: _Text, dropped: int) -> None:
    """Record where a tolerated break ended a file's text (once per file)."""
    if all(b["file"] != str(path) for b in breaks):
        breaks.append({"file": str(path), "text_bytes": f.pos - dropped, "dropped_bytes": dropped,
                       "reason": f.broken})


def _iter_chunks(path: Path, breaks: list | None = None):
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
    with _open(path, tolerate=breaks is not None) as f:
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


class _Seen:
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
            self.market = _market_of(blob)


def _scan(paths, keep: dict | None = None, breaks: list | None = None, *, partial: bool = False) -> _Seen:
    """Streams, symbols and market seen in hftbacktest-style files (one pass of regexes).
    keep (a dict): the chunks of text read, path -> list, if all of them come to at most
    KEEP_BYTES (else it is left empty), so that a small recording is decompressed once.
    partial: a recording with more text than that is read only that far (`partial` is then
    set on the result): the conversion pass, which reads it all anyway, sees the rest, and
    convert() converts again if the rest had more to say (a day's file is then inflated
    once for the conversion instead of twice). breaks: as for _iter_chunks."""
    seen = _Seen()
    kept, kept_bytes = {}, 0
    if len(set(paths)) != len(paths):  # a file named twice is read twice
        keep = None
    for p in paths:
        chunks = kept.setdefault(p, []) if keep is not None else None
        for blob in _iter_chunks(p, breaks):
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


_USDM_SNAPSHOT_RE = re.compile(rb'"lastUpdateId":\d+,"E":')


def _market_of(blob: bytes) -> str | None:
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


def _ns_from_secs(text: str) -> int:
    return lobc.parse_decimal(text.strip(), 10**9)


def _cryptofeed_pair(path: Path) -> tuple[Path, Path | None]:
    m = re.match(r"^(.*)\.(ws|http)\.(\d+)\.(\d+)$", path.name)
    if not m:
        raise InputError(f"{path}: a cryptofeed log is named X.ws.N.M / X.http.N.M")
    other = "http" if m.group(2) == "ws" else "ws"
    sib = sorted(path.parent.glob(f"{m.group(1)}.{other}.*"))
    sib = sib[0] if sib else None
    return (path, sib) if m.group(2) == "ws" else (sib, path)


def _cryptofeed_items(ws: Path, http: Path | None, breaks: list | None = None):
    """(recv_ns, kind, symbol, text) merged by receive time; kind 'ws' or 'snapshot'. A line
    whose receive time does not parse is an InputError naming the file and line; the last
    line cut short (no newline: a log copied in part, a killed process) is one too, unless
    breaks (--allow-truncated) is given: then it is dropped and noted there."""
    items = []
    url = None

    def lines(path: Path):
        pos = 0
        with _open(path, tolerate=breaks is not None) as f:
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


def convert(src, dst, *, market: str | None = None, symbols=None, price_scale: int = lobc.DEFAULT_SCALE,
            qty_scale: int = lobc.DEFAULT_SCALE, c_decoder: bool = True, allow_truncated: bool = False,
            _whole_scan: bool = False, _since: tuple | None = None) -> dict:
    """Convert one recording (or several, read as one continuous recording) to a .lobc file.
    c_decoder=False decodes every message in Python (the same output, slower: the reference
    the C decoder of depth messages is tested against). allow_truncated: a gzip file that
    breaks off (a capture's --raw .gz of a killed process) converts up to its last whole line
    before the break, and stats["truncated"] says where, per file (hftbacktest and --raw
    files; otherwise such a file is an InputError).

    Returns stats: messages, records by kind, gaps, resyncs, per-symbol sync results
    (`synced` > 0 means the book was synced at least once), levels and the speed."""
    market_arg, symbols_arg = market, symbols
    paths = [Path(src)] if isinstance(src, (str, os.PathLike)) else [Path(p) for p in src]
    if not paths:
        raise InputError("convert: no input file")
    for p in paths:
        if not p.is_file():
            raise InputError(f"{p}: {'a directory, not a file' if p.is_dir() else 'no such file'}")
    # the whole conversion, format detection included (_since: of the first try, when the
    # text after a partial scan named more than the scan had seen and this converts again)
    t0, cpu0 = _since or (time.perf_counter(), time.process_time())
    fmts = {detect_format(p) for p in paths}
    if len(fmts) > 1 and not fmts <= {"hftbacktest", "raw"}:
        raise InputError(f"convert: mixed formats {sorted(fmts)}")
    fmt = fmts.pop() if len(fmts) == 1 else "hftbacktest"
    streams = []
    breaks = [] if allow_truncated else None
    rest = None  # after a partial scan: the scan of the whole text, as the conversion pass reads it
    if fmt.startswith("cryptofeed"):
        if len(paths) != 1:
            raise InputError("convert: one cryptofeed log at a time (its .ws and .http files are paired)")
        ws, http = _cryptofeed_pair(paths[0])
        if ws is None:
            raise InputError(f"{paths[0]}: no matching .ws file beside it")
        url, items = _cryptofeed_items(ws, http, breaks)
        if url:
            q = url.split("streams=", 1)[1] if "streams=" in url else url.rsplit("/", 1)[-1]
            streams = [s for s in q.split("/") if s]
        if market is None:
            host = url or ""
            market = USDM if "fstream" in host or "fapi" in host else SPOT
            if http is not None and "fapi." in http.read_text(errors="replace")[:300]:
                market = USDM
        if symbols is None:
            symbols = sorted({s.split("@", 1)[0].upper() for s in streams}
                             | {s for _, k, s, _ in items if k == "snapshot"})
    else:
        header = None
        kept = {}  # the text the scan read, if small: path -> chunks
        if fmt == "raw":  # (every file is one of our --raw files)
            headers = [_raw_header(p) for p in paths]
            header = headers[0]
            for p, h in zip(paths, headers):  # every part from the same market (the records would be misread)
                if market is not None and h.get("market") not in (None, market):
                    raise InputError(f"{p}: a {h['market']} capture (its header says so), not {market}")
                market = market or h.get("market")
            symbols = symbols or header.get("symbols")
            streams = header.get("streams", [])
        if symbols is None or market is None or not streams:
            seen = _scan(paths, kept if c_decoder else None, breaks, partial=c_decoder and not _whole_scan)
            if seen.partial and (not seen.symbols or seen.market is None):  # (nothing to go on yet)
                seen = _scan(paths, None, breaks)
            taken = (not streams, symbols is None, market is None)  # what comes from the scan
            streams = streams or sorted(seen.streams)
            symbols = symbols or sorted(seen.symbols)
            market = market or seen.market
            if seen.partial:  # the conversion pass sees the rest: the same scan, to compare at the end
                rest = _Seen()
                agrees = lambda: ((not taken[0] or sorted(rest.streams) == streams)  # noqa: E731
                                  and (not taken[1] or sorted(rest.symbols) == symbols)
                                  and (not taken[2] or rest.market == market))
    if not symbols:
        raise InputError(f"{paths[0]}: no symbol found; pass symbols=")
    if market not in (SPOT, USDM):
        raise InputError(f"{paths[0]}: market not found (no depth event or snapshot); pass market='spot'|'usdm'")
    machine = DepthSync(market, symbols, price_scale=price_scale, qty_scale=qty_scale)
    source = ",".join(str(p) for p in paths)
    lines_n = 0
    was_enabled = gc.isenabled()
    gc.disable()  # the parse makes many short-lived containers and no cycles
    # written beside dst and renamed at the end: a conversion that fails or is stopped part way
    # (a full disk, Ctrl-C, a file that turns corrupt) leaves no .lobc that `lobc check` calls
    # whole yet holds only part of the recording, and an earlier dst stays as it was
    tmp = f"{os.fspath(dst)}.tmp"
    try:
        with open_writer(tmp, market=market, symbols=machine.symbols, price_scale=price_scale,
                         qty_scale=qty_scale, streams=streams, source=source, flush_records=1 << 16,
                         flush_seconds=3600) as w:
            if fmt.startswith("cryptofeed"):
                # the websocket messages' depthUpdates decoded in C, all in one call
                depth = _decode_depth(machine, "\n".join(t for _, k, _, t in items if k == "ws").encode(),
                                      bare=True) if c_decoder else {}
                ws = -1
                for recv, kind, sym, text in items:
                    lines_n += 1
                    if kind == "snapshot":
                        machine.feed_snapshot(sym, text, recv)
                    else:
                        ws += 1
                        dd = depth.get(ws) if depth else None
                        if dd is not None:
                            _feed_decoded(machine, dd, recv)
                        else:
                            machine.feed(text, recv)
                    if machine.events:
                        _react(machine, recv, raw=False)
                w.add_many(machine.take_records())
            else:
                for p in paths:
                    raw_fmt = detect_format(p) == "raw"
                    if c_decoder:
                        for blob, decoded in _decoded(kept.pop(p, None) or _iter_chunks(p, breaks), machine, rest):
                            recs, n = _feed_blob(machine, blob, decoded, raw_fmt)
                            lines_n += n
                            w.add_many(recs)
                    else:
                        for lines in _iter_lines(p, breaks):
                            lines_n += len(lines)
                            w.add_many(_feed_lines(machine, lines, raw_fmt))
            w.add_many(machine.take_records())
            w.flush()
            out_records, out_bytes = w.records, w.bytes
        again = rest is not None and not agrees()
        if again:  # the rest of the text named a stream, symbol or market the partial scan had not seen
            os.unlink(tmp)
        else:
            os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        if was_enabled:
            gc.enable()
    if again:
        return convert(paths, dst, market=market_arg, symbols=symbols_arg, price_scale=price_scale,
                       qty_scale=qty_scale, c_decoder=c_decoder, allow_truncated=allow_truncated, _whole_scan=True,
                       _since=(t0, cpu0))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    st = dict(machine.stats)
    levels = st["diff_levels"] + st["snapshot_levels"]
    st.update(format=fmt, market=market, symbols=machine.symbols, lines=lines_n, records=out_records, bytes=out_bytes,
              truncated=breaks or [],
              seconds=wall, cpu_seconds=cpu, level_updates=levels,
              level_updates_per_s=levels / wall if wall > 0 else 0.0,
              per_symbol=machine.symbol_stats(), dst=str(dst))
    return st


def _react(machine: DepthSync, recv: int, raw: bool) -> None:
    """What a live capture would do on a serverShutdown: the connection ends (GAP for every
    symbol) and the next events start a new sync. Our raw files carry the capture's own
    `disconnected` lines instead, so nothing is done for them here."""
    evs = machine.events
    machine.events = []
    if not raw and any(e[0] == "shutdown" for e in evs):
        machine.disconnected(recv, GAP_SHUTDOWN)


def _decode_depth(machine: DepthSync, blob: bytes, *, bare: bool) -> dict:
    """The depthUpdate messages among the newline-separated lines of blob that the C decoder
    takes (lobreplay.core._coreapi.bn_decode): line index -> (recv_ns, U, u, pu, E ms, bids, asks,
    stream, s). The other lines are for machine.feed."""
    dec, levels = bn_decode(blob, usdm=machine.market == USDM, price_digits=machine.levels.dp,
                            qty_digits=machine.levels.dq, bare=bare)
    return _depth_of(blob, dec, levels)


_DEPTH_FIELDS = ("recv_ns", "first_id", "last_id", "prev_id", "exch_ms", "level", "n_bids", "n_asks", "stream_start",
                 "stream_len", "sym_start", "sym_len")  # a decoded depth line's, as _depth_tuple takes them


def _span(blob: bytes, start: int, n: int) -> str | None:
    """A name bn_decode found in blob (n = -1: none)."""
    return blob[start:start + n].decode("ascii") if n >= 0 else None


def _depth_tuple(blob: bytes, levels: np.ndarray, recv, U, u, pu, E, lv, nb, na, ss, sl, ys, yl, *,
                 copy: bool = False) -> tuple:
    """A decoded depth line (its _DEPTH_FIELDS) as (recv_ns, U, u, pu, E ms, bids, asks, stream,
    s); copy: its levels copied out of `levels` (an event the machine buffers keeps them)."""
    bids, asks = levels[lv:lv + nb], levels[lv + nb:lv + nb + na]
    if copy:
        bids, asks = bids.copy(), asks.copy()
    return recv, U, u, pu, E, bids, asks, _span(blob, ss, sl), _span(blob, ys, yl)


def _depth_of(blob: bytes, dec: np.ndarray, levels: np.ndarray) -> dict:
    idx = np.flatnonzero(dec["status"] == BN_DEPTH)
    if not len(idx):
        return {}
    d = dec[idx]
    levels = levels.copy()  # only the rows used: buffered events keep it alive
    return {i: _depth_tuple(blob, levels, *vals) for i, *vals in zip(idx.tolist(), *(d[f].tolist()
                                                                                     for f in _DEPTH_FIELDS))}


def _feed_decoded(machine: DepthSync, dd: tuple, recv_ns) -> None:
    recv, U, u, pu, E, bids, asks, stream, sym = dd
    machine.feed_depth(stream, sym, U, u, pu, E, recv if recv_ns is None else recv_ns, bids, asks)


def _symbols_of_names(machine: DepthSync, blob: bytes, dec: np.ndarray, names: np.ndarray) -> np.ndarray:
    """The symbol index (-1: unknown) of each (stream, s) name of bn_decode, as machine.feed
    would find it (int32)."""
    out = []
    for i in names.tolist():
        ln = dec[i]
        st = machine._symbol_of(_span(blob, int(ln["sym_start"]), int(ln["sym_len"])),
                                _span(blob, int(ln["stream_start"]), int(ln["stream_len"])))
        out.append(-1 if st is None else st.index)
    return np.array(out, np.int32)


_ROW = np.dtype("V64")  # a record as one opaque item: copied in one piece
assert _ROW.itemsize == RECORD_DTYPE.itemsize


class _Pieces:
    """Pieces of text as read_ahead's source."""

    def __init__(self, pieces):
        self._pieces = pieces

    def chunks(self, buffers: int = 1):
        yield from self._pieces  # (each piece is a bytes object of its own: no buffer is reused)


def _decoded(pieces, machine: DepthSync, seen: _Seen | None = None):
    """(piece, its bn_decode) for each piece of text, the next piece read and decoded on a
    thread while the caller converts this one (the C decoder runs without the GIL); seen:
    also scans each piece, on that thread."""
    usdm, dp, dq = machine.market == USDM, machine.levels.dp, machine.levels.dq

    def work(blob, _slot):
        if seen is not None:
            seen.add(blob)
        return bn_decode(blob, usdm=usdm, price_digits=dp, qty_digits=dq, names=True)
    return read_ahead(_Pieces(pieces), work)


def _feed_blob(machine: DepthSync, blob: bytes, decoded: tuple, raw_fmt: bool) -> tuple[np.ndarray, int]:
    """One chunk of whole `<recv ns> <message>` lines (the last may lack its newline), in order;
    returns (the records taken from the machine after it, with those pending before it first;
    the number of lines). decoded: bn_decode(blob, names=True), the chunk decoded in C in one
    call (_decoded). C writes the records of the lines whose outcome needs no decision
    (bn_records: trades, tickers, and the depth messages that continue a synced book; it
    counts those the book has already) straight into one array, up to the first line that
    does: that one goes through the machine (a depth message the decoder took:
    machine.feed_depth; any other line: machine.feed of its text), and C goes on after it.
    The machine's records and C's are put together in line order at the end."""
    usdm = machine.market == USDM
    dec, levels, names = decoded
    nl = len(dec)
    name_sym = _symbols_of_names(machine, blob, dec, names)
    # room for every record C may write: a diff's levels and two, a ticker's two, a trade's one
    out = np.empty(int(dec["n_bids"].sum()) + int(dec["n_asks"].sum()) + 2 * nl, RECORD_DTYPE)
    syms = np.zeros(len(machine.syms), BN_SYNC_DTYPE)
    machine.sync_to(syms, everything=True)
    taken = np.zeros(1, BN_TAKEN_DTYPE)
    pieces = []  # (0: the machine's next records / 1: out's next records, how many), in line order
    machine_n = machine.pending_records  # the machine's records accounted for in pieces (and before them)
    if machine_n:
        pieces.append((0, machine_n))
    pos = done = 0
    while True:
        pos, n = bn_records(dec, levels, pos, name_sym, syms, taken, out[done:], usdm=usdm)
        if n:
            machine.sync_from(syms)
            pieces.append((1, n))
            done += n
        if pos >= nl:
            break
        _feed_line(machine, blob, dec, levels, pos, raw_fmt)
        pos += 1
        if machine.pending_records > machine_n:
            pieces.append((0, machine.pending_records - machine_n))
            machine_n = machine.pending_records
        machine.sync_to(syms)
    machine.sync_counts(syms, taken[0])
    recs = machine.take_records()
    if not done:
        return recs, nl
    if len(pieces) == 1:
        return out[:done], nl
    whole = np.empty(done + len(recs), RECORD_DTYPE)
    rows, parts = whole.view(_ROW), (recs.view(_ROW), out.view(_ROW))  # (as opaque rows: numpy would copy each field)
    at, src = 0, [0, 0]
    for which, n in pieces:
        rows[at:at + n] = parts[which][src[which]:src[which] + n]
        src[which] += n
        at += n
    return whole, nl


def _feed_line(machine: DepthSync, blob: bytes, dec: np.ndarray, levels: np.ndarray, i: int, raw_fmt: bool) -> None:
    """Line i of a chunk through the machine: a depth message the decoder took as decoded, any
    other line as text."""
    ln = dec[i]
    if ln["status"] == BN_DEPTH:
        dd = _depth_tuple(blob, levels, *(int(ln[f]) for f in _DEPTH_FIELDS), copy=True)
        _feed_decoded(machine, dd, None)
        if machine.events:
            _react(machine, dd[0], raw_fmt)
        return
    a = int(ln["start"])
    _feed_text_line(machine, blob[a:a + int(ln["len"]) + 1], raw_fmt)


def _feed_lines(machine: DepthSync, lines, raw_fmt: bool) -> np.ndarray:
    """One chunk of `<recv ns> <message>` lines (readlines), in order, all through machine.feed
    (the reference path, c_decoder=False); returns the records taken from the machine after it."""
    for line in lines:
        _feed_text_line(machine, line, raw_fmt)
    return machine.take_records()


def _feed_text_line(machine: DepthSync, line: bytes, raw_fmt: bool) -> None:
    """One `<recv ns> <message>` line through machine.feed (one of the capture's own lines in
    a --raw file: the call the capture made)."""
    sp = line.find(b" ")
    if sp <= 0:
        if line.strip():
            machine.count_malformed("line")
        return
    try:
        recv = int(line[:sp])
    except ValueError:
        machine.count_malformed("line")
        return
    if not -INT64_MAX - 1 <= recv <= INT64_MAX:  # a receive time the records cannot hold
        machine.count_malformed("line")
        return
    msg = line[sp + 1:]
    if raw_fmt and msg.startswith(b'{"lobreplay"'):
        _raw_control(machine, msg, recv)
        return
    machine.feed(msg, recv)
    if machine.events:
        _react(machine, recv, raw_fmt)


def _raw_header(path) -> dict:
    """The header line of one of our --raw files (its first line)."""
    first = _head(path, 1 << 16).split(b"\n", 1)[0]
    try:
        h = decode_json(first.split(b" ", 1)[1])["lobreplay"]
        if type(h) is not dict:
            raise TypeError
        return h
    except (ValueError, KeyError, TypeError, IndexError):
        raise InputError(f"{path}: byte 0: expected a lobreplay raw header line") from None


def _raw_control(machine: DepthSync, msg: bytes, recv: int) -> None:
    """One of the capture's own lines (capture.py): the same call the capture made. A line
    that cannot be read is counted as malformed (the events after it show any gap it hid)."""
    try:
        ctl = decode_json(msg)["lobreplay"]
        ev = ctl.get("event")
        if ev == "disconnected":
            symbols = ctl.get("symbols")
            if symbols is not None and not (type(symbols) is list and all(type(x) is str for x in symbols)):
                raise TypeError("symbols")
            machine.disconnected(recv, _reason(ctl["reason"]), symbols)
        elif ev == "snapshot_failed":
            machine.snapshot_failed(str(ctl["symbol"]), recv, _reason(ctl["reason"]))
        elif ev == "end_file":
            # capture --rotate: the last line of a file. The capture starts its next file
            # afresh (a snapshot, no RESYNC); read here, the next file (if converted with
            # this one) continues this one's .lobc file, so the rotation is a gap like a
            # disconnect and the sync after it a RESYNC. Alone, the file's records are the
            # capture's.
            machine.disconnected(recv, GAP_ROTATE)
    except (ValueError, KeyError, TypeError, AttributeError):
        machine.count_malformed("control")
    machine.events = []


def _reason(v) -> int:
    if type(v) is not int or v not in lobc.GAP_REASONS or v == lobc.GAP_DAMAGED:  # (9: a reader's, never a capture's)
        raise ValueError(f"reason {v!r}")
    return v
