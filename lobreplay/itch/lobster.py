"""LOBSTER files: export from an ITCH day, and verify a message/orderbook pair.

`export_lobster` replays one symbol of an ITCH 5.0 file on the replay engine (the
ITCH replay, lobreplay.itch.replay.ItchReplay: its pass 1 and sizing, its chunks
applied by the core one call each) and writes LOBSTER's message and orderbook
files for the top N levels from what each step hands on (_Export).
`verify_lobster` replays a LOBSTER message file through the core, seeded from
the first orderbook row, and compares the core's top N levels with the
orderbook file row by row. See docs/lobster.md.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import os
import signal
import threading
import zlib

import numpy as np

from lobreplay.core.book import Session
from lobreplay.core.events import EVENT_DTYPE, Flag, Kind, Side, TIF
from lobreplay.errors import InputError, refuse_input_as_output, refuse_overwrite
from lobreplay.itch.replay import ItchReplay, ReplayConfig, given_date, session_date

__all__ = ["export_lobster", "verify_lobster", "lobster_names", "read_message", "read_orderbook",
           "format_times", "ASK_EMPTY", "BID_EMPTY"]

ASK_EMPTY = 9999999999      # LOBSTER's price of an unoccupied ask level (size 0)
BID_EMPTY = -9999999999     # ... of an unoccupied bid level
START_MS, END_MS = 34_200_000, 57_600_000
HALT_PRICE = {b"H": -1, b"P": -1, b"Q": 0, b"T": 1}  # ITCH H trading state -> LOBSTER type-7 price
_BIG = 1 << 62
SYNTH_BASE = 1 << 62        # synthetic order ids of verify: one per (side, price)
PARTIAL = ".partial"         # the two files of an export while they are written


# ---------------------------------------------------------------- formats

def lobster_names(symbol: str, date, start_ms: int, end_ms: int, levels: int) -> tuple[str, str]:
    """LOBSTER's file names: TICKER_YYYY-MM-DD_start_end_{message|orderbook}_LEVEL.csv. The
    ticker (and a date given as text) escaped as every name from data is (reports.name_part):
    a symbol such as ../../x names a file inside the output directory, not above it."""
    from lobreplay.reports.tables import name_part
    d = date.isoformat() if isinstance(date, dt.date) else name_part(date)
    stem = f"{name_part(symbol)}_{d}_{int(start_ms)}_{int(end_ms)}"
    return f"{stem}_message_{levels}.csv", f"{stem}_orderbook_{levels}.csv"


def format_times(ns: np.ndarray) -> np.ndarray:
    """Seconds after midnight as LOBSTER writes them: the nanoseconds with trailing zeros
    dropped (34200.18960767); a whole second is written without decimals."""
    ns = np.asarray(ns, np.int64)
    if not len(ns):  # (numpy's char.zfill fails on an empty array)
        return np.empty(0, str)
    sec = (ns // 1_000_000_000).astype(str)
    frac = np.char.rstrip(np.char.zfill((ns % 1_000_000_000).astype(str), 9), "0")
    dot = np.where(np.char.str_len(frac) > 0, ".", "")
    return np.char.add(np.char.add(sec, dot), frac)


def _join_columns(cols: list[np.ndarray]) -> list[str]:
    out = cols[0].astype(str)
    for c in cols[1:]:
        out = np.char.add(np.char.add(out, ","), c.astype(str))
    return out.tolist()


def _write_rows(f, lines: list[str]) -> None:
    if lines:
        f.write("\n".join(lines))
        f.write("\n")


def message_lines(t_ns, typ, oid, size, price, direction) -> list[str]:
    return _join_columns([format_times(t_ns), np.asarray(typ, np.int64), np.asarray(oid, np.int64),
                          np.asarray(size, np.int64), np.asarray(price, np.int64), np.asarray(direction, np.int64)])


def orderbook_lines(book: np.ndarray) -> list[str]:
    book = np.asarray(book, np.int64)
    if not len(book):
        return []
    return _join_columns([book[:, j] for j in range(book.shape[1])])


def _load(path: str, what: str, dtype) -> np.ndarray:
    """A comma-separated file of `what` as a 2-D array, or an InputError naming the file. A
    name ending in .gz is read through gzip (numpy inflates it; data/real/lobster/ holds them so)."""
    try:
        return np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2)
    except (ValueError, UnicodeDecodeError) as e:  # (numpy's text: which row or value)
        why = str(e).split("; use `usecols`", 1)[0]  # (numpy's advice is for its own callers)
        if "number of columns changed" in why:
            why += " (a row cut short?)"
        raise InputError(f"{path}: not a LOBSTER {what} file: {why}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:  # a .gz cut short, damaged, or not gzip at all
        raise InputError(f"{path}: not a whole gzip file ({e}); expected a gzip of a LOBSTER {what} file") from None


def read_message(path: str) -> dict[str, np.ndarray]:
    """A LOBSTER message file as columns; time_ns parsed exactly from the decimal string."""
    raw = _load(path, "message", "U32")
    if raw.shape[1] < 6:
        raise InputError(f"{path}: a LOBSTER message file has 6 columns, found {raw.shape[1]}")
    parts = np.char.partition(raw[:, 0], ".")
    frac = parts[:, 2]
    if (np.char.str_len(frac) > 9).any():
        raise InputError(f"{path}: time with more than 9 decimals")
    try:
        frac_ns = np.char.ljust(frac, 9, "0").astype(np.int64)
        out = {"time_ns": parts[:, 0].astype(np.int64) * 1_000_000_000 + frac_ns, "time": raw[:, 0]}
        for j, name in enumerate(("type", "id", "size", "price", "direction"), 1):
            out[name] = raw[:, j].astype(np.int64)
    except ValueError as e:
        raise InputError(f"{path}: not a LOBSTER message file: {e}") from None
    bad = ~np.isin(out["type"], np.arange(1, 8))
    if bad.any():
        raise InputError(f"{path}: row {int(np.argmax(bad)) + 1}: type {out['type'][bad][0]} is not 1..7")
    return out


def read_orderbook(path: str) -> np.ndarray:
    book = _load(path, "orderbook", np.int64)
    if book.shape[1] % 4:
        raise InputError(f"{path}: an orderbook file has 4 columns per level, found {book.shape[1]}")
    return book


def _snapshot(bv, n: int, pm=None) -> np.ndarray:
    """The top n levels of a book as one LOBSTER orderbook row (pm: the book's price map,
    lobreplay.itch.prices.PriceMaps, when its core prices are ranks)."""
    row = np.empty(4 * n, np.int64)
    row[0::4], row[1::4], row[2::4], row[3::4] = ASK_EMPTY, 0, BID_EMPTY, 0
    ap, aq, _ = bv.depth_arrays(Side.SELL, n)
    bp, bq, _ = bv.depth_arrays(Side.BUY, n)
    if pm is not None:
        ap, bp = (pm.real(np.full(len(p), bv.instrument), p) for p in (ap, bp))
    row[0:4 * len(ap):4], row[1:4 * len(ap):4] = ap, aq
    row[2:4 * len(bp):4], row[3:4 * len(bp):4] = bp, bq
    return row


# ---------------------------------------------------------------- export

class _Orders:
    """Price, side, shares and shares taken off of the symbol's live orders, as sorted
    numpy arrays, updated chunk by chunk (no per-message Python)."""

    def __init__(self):
        self.ids = np.empty(0, np.uint64)
        self.price = np.empty(0, np.int64)
        self.side = np.empty(0, np.uint8)
        self.qty = np.empty(0, np.int64)
        self.red = np.empty(0, np.int64)

    def add(self, ids, price, side, qty):
        if not len(ids):
            return
        ids = np.concatenate([self.ids, ids.astype(np.uint64)])
        o = np.argsort(ids, kind="stable")
        self.ids = ids[o]
        self.price = np.concatenate([self.price, price])[o]
        self.side = np.concatenate([self.side, side.astype(np.uint8)])[o]
        self.qty = np.concatenate([self.qty, qty.astype(np.int64)])[o]
        self.red = np.concatenate([self.red, np.zeros(len(price), np.int64)])[o]

    def find(self, ids) -> np.ndarray:
        """Index of each id in the table, or -1."""
        ids = np.asarray(ids, np.uint64)
        if not len(self.ids):
            return np.full(len(ids), -1, np.int64)
        i = np.searchsorted(self.ids, ids)
        ic = np.minimum(i, len(self.ids) - 1)
        return np.where(self.ids[ic] == ids, ic, -1).astype(np.int64)

    def drop(self, idx) -> None:
        idx = idx[idx >= 0]
        if len(idx):
            keep = np.ones(len(self.ids), bool)
            keep[idx] = False
            for a in ("ids", "price", "side", "qty", "red"):
                setattr(self, a, getattr(self, a)[keep])


def export_lobster(itch_path: str, symbol: str, levels: int, out_dir: str, *, date=None,
                   start_ms: int = START_MS, end_ms: int = END_MS, chunk_bytes: int = 16 << 20,
                   headroom: float = 0.2, force: bool = False, allow_truncated: bool = False,
                   allow_gaps: bool = False, read: dict | None = None) -> tuple[str, str]:
    """Replay one symbol of an ITCH file and write LOBSTER's message and orderbook files
    (top `levels` levels) for the events of [start_ms, end_ms) that touch those levels.
    Returns (message_path, orderbook_path). Existing files of those names are refused
    (before any work) unless force. Both are written as NAME.partial and renamed when both
    are complete: an export that fails or is stopped (Ctrl-C, SIGTERM: the exception's
    note says where) removes them, and leaves any files already under the final names as
    they were. allow_truncated: stop at a partial last message or where a gzip stream is
    cut short; allow_gaps: a pcap whose sequence anomalies lose more than MAX_LOSS_SHARE of
    its messages is read all the same (lobreplay.itch.reader); `read`, a dict if given, is
    filled with the messages read, `truncated` (None, or offset, bytes, stream_break and
    bytes_after_end_marker, as in a replay's summary.json) and `moldudp64` (as there).

    The replay is the ITCH replay's own (lobreplay.itch.replay.ItchReplay on the engine,
    stepped to the end of the window: pass 1, the book sized, each chunk's events made on
    the reader's thread and applied by the core in one call); _Export writes the files from
    what each step hands on."""
    levels = int(levels)
    if levels < 1:
        raise InputError(f"levels must be >= 1, got {levels}")
    if not 0 <= int(start_ms) < int(end_ms) <= 86_400_000:
        raise InputError(f"window: expected 0 <= start < end <= 86400000 ms after midnight, got start {start_ms}, "
                         f"end {end_ms}")
    if date is None:
        date = session_date(itch_path)
        if date is None:
            raise InputError(f"{itch_path}: no date in the file name; pass date=YYYY-MM-DD (--date)")
    else:
        date = given_date(date, "--date")
    mname, oname = lobster_names(symbol, date, start_ms, end_ms, levels)
    mpath, opath = os.path.join(out_dir, mname), os.path.join(out_dir, oname)
    refuse_input_as_output((mpath, opath), itch_path)
    refuse_overwrite((mpath, opath), force)
    cfg = ReplayConfig(reports=(), timing=False, chunk_bytes=chunk_bytes, headroom=headroom,
                       allow_truncated=allow_truncated, allow_gaps=allow_gaps, hash=False, group_books=False,
                       cache=False)
    exp = _Export(itch_path, cfg, symbol, levels, int(start_ms) * 1_000_000, int(end_ms) * 1_000_000)
    renamed: list = []  # [True] once both files have their final names
    try:
        with contextlib.closing(exp):
            exp.start()  # pass 1 (its errors as they are: no file was begun), the book, pass 2 set up
            found = exp.pass1_read  # (what pass 1 read: pass 2 may stop at the end of the window)
            if read is not None:
                read.update(messages=found.messages, truncated=found.truncation(), moldudp64=found.moldudp64())
            os.makedirs(out_dir, exist_ok=True)
            tmp = (mpath + PARTIAL, opath + PARTIAL)
            try:
                with open(tmp[0], "w", newline="\n") as fm, open(tmp[1], "w", newline="\n") as fo:
                    exp.files = (fm, fo)
                    exp.run_until(dt.timedelta(milliseconds=int(end_ms)))  # (the chunk there cut at end_ms)
                _rename_both(tmp, (mpath, opath), renamed)
            except BaseException as e:
                if renamed:  # (a signal held back during the renames: the pair is whole)
                    raise
                for p in tmp:
                    with contextlib.suppress(OSError):
                        os.remove(p)
                if type(e) is InputError:  # (e.g. the file changed since pass 1)
                    raise InputError(f"{e}; no LOBSTER file was written") from None
                raise
    except KeyboardInterrupt as e:  # (Ctrl-C, and SIGTERM from the command line)
        if renamed:
            e.add_note(f"{itch_path}: after the export was written whole ({mpath}, {opath})")
            raise
        e.add_note(f"{exp.where_text()}; no LOBSTER file was written (files already in {out_dir} are as they were)")
        raise
    return mpath, opath


def _rename_both(tmp, final, renamed: list) -> None:
    """The pair to its final names with Ctrl-C and SIGTERM held back in between (a stop after
    the first rename paired a new message file with the old order book): a signal waits until
    both are done (`renamed` gets True first; its handler runs then, and the export says it
    was written). Held by handlers that only note it, not by blocking it: a signal sent to the
    process goes to a thread that does not block it (the reader's), and Python then runs the
    handler in the main thread all the same."""
    noted: list[int] = []
    old = {}
    if threading.current_thread() is threading.main_thread():  # (only it may set handlers)
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, lambda s, _frame: noted.append(s))
    try:
        os.replace(tmp[0], final[0])
        os.replace(tmp[1], final[1])
        renamed.append(True)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if noted:
            signal.raise_signal(noted[0])  # (now, to the handler it was meant for)


def _chunk_rows(chunk, ev, ts, mi, orders: _Orders, locate: int, decode_type) -> dict | None:
    """The chunk's LOBSTER rows (before filtering by level), in feed order, with the core
    event of each (kind 0: none). U becomes a delete row and an add row."""
    kind = ev["kind"]
    # the table of orders: adds, then replaces (new ids take the old one's side; chains resolved)
    isnew = kind == Kind.NEW
    orders.add(ev["id"][isnew], ev["price"][isnew], ev["side"][isnew], ev["qty"][isnew])
    isrep = np.flatnonzero(kind == Kind.REPLACE)
    rep_side = np.zeros(len(isrep), np.uint8)
    pending = np.ones(len(isrep), bool)
    while pending.any():
        idx = orders.find(ev["id"][isrep[pending]])
        ok = idx >= 0
        if not ok.any():
            break
        sel = np.flatnonzero(pending)[ok]
        rep_side[sel] = orders.side[idx[ok]]
        r = isrep[sel]
        orders.add(ev["new_id"][r], ev["price"][r], rep_side[sel], ev["qty"][r])
        pending[sel] = False
    idx = orders.find(ev["id"])
    red = np.isin(kind, (Kind.REDUCE, Kind.EXEC)) & (idx >= 0)
    np.add.at(orders.red, idx[red], ev["qty"][red].astype(np.int64))
    known = idx >= 0
    oprice = np.where(known, orders.price[np.maximum(idx, 0)] if len(orders.ids) else 0, 0)
    oside = np.where(known, orders.side[np.maximum(idx, 0)] if len(orders.ids) else 0, 0)
    remaining = np.where(known, (orders.qty[np.maximum(idx, 0)] - orders.red[np.maximum(idx, 0)])
                         if len(orders.ids) else 0, 0)
    # rows of the core events (U: two rows)
    n = len(ev)
    rep = kind == Kind.REPLACE
    cnt = np.where(rep, 2, 1)
    src = np.repeat(np.arange(n), cnt)
    sub = np.zeros(len(src), np.int64)
    sub[1:][src[1:] == src[:-1]] = 1
    m = len(src)
    cev = ev[src].copy()
    r_del = rep[src] & (sub == 0)
    r_add = rep[src] & (sub == 1)
    cev["kind"][r_del] = Kind.CANCEL
    cev["kind"][r_add] = Kind.NEW
    cev["id"][r_add] = ev["new_id"][src[r_add]]
    cev["new_id"][r_add | r_del] = 0
    cev["side"][r_add] = oside[src[r_add]]
    cev["tif"][r_add] = TIF.GTC
    cev["flags"][r_add] = Flag.FEED
    k = ev["kind"][src]
    ltype = np.select([k == Kind.NEW, k == Kind.REDUCE, k == Kind.CANCEL, r_del, r_add, k == Kind.EXEC],
                      [1, 2, 3, 3, 1, 4], 0)
    side = np.where((k == Kind.NEW) | r_add, cev["side"], oside[src]).astype(np.uint8)
    price = np.where((k == Kind.NEW) | r_add, cev["price"], oprice[src]).astype(np.int64)
    size = np.where((k == Kind.CANCEL) | r_del, remaining[src], cev["qty"]).astype(np.int64)
    valid = ((k == Kind.NEW) | r_add | known[src]) & ((side == Side.BUY) | (side == Side.SELL))
    rows = {"msg": mi[src].astype(np.int64), "sub": sub, "ts": ts[src], "type": ltype, "id": cev["id"].astype(np.int64),
            "size": size, "price": price, "side": side, "valid": valid, "ev": cev}
    # prune finished orders (deleted, replaced away, fully executed)
    done = idx[((kind == Kind.CANCEL) | rep) & known]
    full = np.flatnonzero(orders.red >= orders.qty)
    orders.drop(np.unique(np.concatenate([done, full])))
    # trades and halts that touch no order: P (5), Q (6), H (7)
    extra = []
    for t, ltyp in (("P", 5), ("Q", 6), ("H", 7)):
        if not chunk.has(t):
            continue
        c = decode_type(chunk, t)
        keep = c["stock_locate"] == locate
        if not keep.any():
            continue
        c = {a: v[keep] for a, v in c.items()}
        q = len(c["message"])
        if t == "P":
            sz, pr = c["shares"].astype(np.int64), c["price"]
            sd = np.where(c["side"] == b"S", Side.SELL, Side.BUY).astype(np.uint8)
        elif t == "Q":
            sz, pr = c["shares"].astype(np.int64), c["cross_price"]
            sd = np.full(q, Side.SELL, np.uint8)
        else:
            sz = np.zeros(q, np.int64)
            pr = np.array([HALT_PRICE.get(bytes(s), -1) for s in c["trading_state"]], np.int64)
            sd = np.full(q, Side.SELL, np.uint8)
        extra.append({"msg": c["message"] - chunk.first_message, "sub": np.zeros(q, np.int64),
                      "ts": c["timestamp"], "type": np.full(q, ltyp), "id": np.zeros(q, np.int64), "size": sz,
                      "price": pr, "side": sd, "valid": np.ones(q, bool), "ev": np.zeros(q, EVENT_DTYPE)})
    if not m and not extra:
        return None
    parts = [rows] + extra
    allr = {a: np.concatenate([p[a] for p in parts]) for a in rows}
    o = np.lexsort((allr["sub"], allr["msg"]))
    return {a: v[o] for a, v in allr.items()}


class _Export(ItchReplay):
    """The ITCH replay of one symbol (the engine's ITCH source) writing LOBSTER files: on the
    reader's thread each chunk's events become LOBSTER rows (_chunk_rows: a U is a delete and
    an add, each with its own row and core event), the core applies their events with the
    N best levels written after every change (one call per chunk), and each step's rows that
    touch the top N levels of the book as it stood are written with the book after them
    (_piece_rows), all in numpy. Nothing is written but the two files (no reports, no
    summary; the sizing cache is not used: `read` says what pass 1 read).

    Unlike the replay's, the export's book is never halted: the STATE events of H messages
    are left out (the H messages are type-7 rows), as verify_lobster's core has none either;
    so a FEED order that crosses the book during a halt removes the orders it meets as stale,
    as it always did here (docs/lobster.md)."""

    def __init__(self, path: str, cfg, symbol: str, levels: int, start_ns: int, end_ns: int):
        super().__init__(path, None, cfg)
        self.symbol, self.levels, self.start_ns, self.end_ns = symbol, levels, start_ns, end_ns
        self.files = None      # (message file, orderbook file), open during pass 2
        self.pass1_read = None  # the reader's figures of pass 1
        self._orders = _Orders()
        self._locate = None
        self._book = _empty_book(levels).reshape(-1)  # the top N levels where the last step left them

    def where_text(self) -> str:
        w = self.where()
        if w["pass"] == 2:
            return super().where_text()
        return f"{self.path}: in pass 1 ({w['file_bytes_read']:,} of {w['file_bytes']:,} bytes read)"

    def sizing_pass(self, threads: int = 1):
        p1 = self.pass1(threads)  # (the one book's distinct prices, if it needs them, read by size_books)
        self.pass1_read = self.src.stats
        return p1

    def _select(self, p1) -> list[int]:
        loc = next((k for k, s in p1.symbols.items() if s == self.symbol), None)
        if loc is None:
            raise InputError(f"{self.path}: no such symbol in this file: {self.symbol}")
        if not p1.stats["price_gcd"][loc]:
            raise InputError(f"{self.path}: {self.symbol} has no orders")
        self._locate = loc
        return [loc]

    def _change_levels(self, reports, sampling: bool) -> int:
        return self.levels

    def _chunk_events(self, chunk, ev, ts, mi):
        from lobreplay.itch.decode import decode_type
        halts = ev["kind"] == Kind.STATE
        if halts.any():  # the book never halts (its H messages are type-7 rows), as verify's does not
            ev, ts, mi = ev[~halts], ts[~halts], mi[~halts]
        rows = _chunk_rows(chunk, ev, ts, mi, self._orders, self._locate, decode_type)
        if rows is None:
            return (ev[:0], ts[:0], mi[:0]), None
        has = rows["ev"]["kind"] != 0
        rows["has"] = has
        return (rows["ev"][has], rows["ts"][has], rows["msg"][has].astype(np.uint32)), rows

    def _piece_rows(self, chunk, ev, ts, mi, out, rejects, span, events_span, rows) -> None:
        if rows is None:
            return
        n = self.levels
        if span is not None:  # (the rows of the piece's messages)
            a, b = np.searchsorted(rows["msg"], span, "left")
            rows = {k: v[a:b] for k, v in rows.items()}
        has = rows["has"]
        pos = np.cumsum(has) - has  # each row's event (or the next one's) among the piece's
        z = out.depth
        books = np.concatenate([self._book.reshape(1, -1), _books(z["prices"], z["qtys"], z["counts"], n)])
        d = z["event"].astype(np.int64)
        before = books[np.searchsorted(d, pos, "left")]   # the top N as the row found it
        after = books[np.searchsorted(d, pos, "right")]   # ... and after its event
        self._book = books[-1]
        ask_n, bid_n = before[:, 4 * (n - 1)], before[:, 4 * (n - 1) + 2]
        ask_thr = np.where(ask_n != ASK_EMPTY, ask_n, _BIG)   # an add/cancel at or below touches
        bid_thr = np.where(bid_n != BID_EMPTY, bid_n, -_BIG)
        t, p, s = rows["type"], rows["price"], rows["side"]
        book = np.where(s == Side.BUY, p >= bid_thr, p <= ask_thr)
        hidden = (p >= bid_thr) & (p <= ask_thr)
        touch = rows["valid"] & np.where(t <= 4, book, np.where(t == 5, hidden, True))
        ts_rows = rows["ts"]
        lo, hi = np.searchsorted(ts_rows, [self.start_ns, self.end_ns], "left")  # the window
        touch[:lo] = touch[hi:] = False
        keep = np.flatnonzero(touch)
        t = t[keep]
        msg = (ts_rows[keep], t, np.where(t <= 5, rows["id"][keep], 0), rows["size"][keep], p[keep],
               np.where(s[keep] == Side.BUY, 1, -1))
        ob = np.where((t <= 4)[:, None], after[keep], before[keep])
        fm, fo = self.files
        _write_rows(fm, message_lines(*msg))
        _write_rows(fo, orderbook_lines(ob))


def _empty_book(n: int) -> np.ndarray:
    """One LOBSTER orderbook row of an empty book (n levels), shaped (1, 4n)."""
    row = np.zeros((1, 4 * n), np.int64)
    row[:, 0::4], row[:, 2::4] = ASK_EMPTY, BID_EMPTY
    return row


def _books(prices, qtys, counts, n: int) -> np.ndarray:
    """The core's depth rows (prices, qtys, counts shaped (rows, 2, n), side 0 the bids) as
    LOBSTER orderbook rows: ask price, ask size, bid price, bid size per level, an empty level
    as LOBSTER writes it."""
    out = np.repeat(_empty_book(n), len(prices), axis=0)
    ask, bid = counts[:, 1, :] > 0, counts[:, 0, :] > 0
    out[:, 0::4] = np.where(ask, prices[:, 1, :], ASK_EMPTY)
    out[:, 1::4] = np.where(ask, qtys[:, 1, :], 0)
    out[:, 2::4] = np.where(bid, prices[:, 0, :], BID_EMPTY)
    out[:, 3::4] = np.where(bid, qtys[:, 0, :], 0)
    return out


# ---------------------------------------------------------------- verify

def _side_levels(row: np.ndarray, n: int):
    """(ask prices, ask sizes, bid prices, bid sizes) of one orderbook row, without empty levels."""
    ap, aq, bp, bq = row[0::4], row[1::4], row[2::4], row[3::4]
    ka, kb = ap != ASK_EMPTY, bp != BID_EMPTY
    return list(zip(ap[ka].tolist(), aq[ka].tolist())), list(zip(bp[kb].tolist(), bq[kb].tolist()))


def _naive(msgs: dict, book: np.ndarray, n: int):
    """The check of PROVENANCE.md: apply message i to orderbook row i-1 at the level
    of aggregate sizes and compare with row i on the predictable levels. Returns
    derivable[i], and for each side whether its last level is unpredictable at row i
    (a level emptied on a side that showed n levels)."""
    rows = len(book)
    derivable = np.ones(rows, bool)
    open_ask = np.zeros(rows, bool)
    open_bid = np.zeros(rows, bool)
    typ, price, size, dirn = (msgs[k].tolist() for k in ("type", "price", "size", "direction"))
    prev = _side_levels(book[0], n)
    for i in range(1, rows):
        cur = _side_levels(book[i], n)
        asks, bids = dict(prev[0]), dict(prev[1])
        side_is_bid = dirn[i] == 1
        lv = bids if side_is_bid else asks
        opened = False
        t, p, s = typ[i], price[i], size[i]
        ok = True
        if t == 1:
            lv[p] = lv.get(p, 0) + s
        elif t in (2, 3, 4):
            if p in lv and lv[p] >= s:
                lv[p] -= s
                if lv[p] == 0:
                    del lv[p]
                    opened = len(prev[1] if side_is_bid else prev[0]) == n
            else:
                ok = False
        pa = sorted(asks.items())[:n]
        pb = sorted(bids.items(), reverse=True)[:n]
        if opened:  # the level that slides in from beyond the visible depth is unknown
            if side_is_bid:
                pb, cb = pb[:n - 1], cur[1][:n - 1]
                ok = ok and pa == cur[0] and pb == cb
                open_bid[i] = True
            else:
                pa, ca = pa[:n - 1], cur[0][:n - 1]
                ok = ok and pb == cur[1] and pa == ca
                open_ask[i] = True
        else:
            ok = ok and pa == cur[0] and pb == cur[1]
        derivable[i] = ok
        prev = cur
    return derivable, open_ask, open_bid


def _sid(side: np.ndarray | int, price):
    """The synthetic order of a level: one id per (side, price)."""
    return SYNTH_BASE + (np.asarray(side, np.int64) == Side.BUY) * (1 << 40) + np.asarray(price, np.int64)


def verify_lobster(message_csv: str, orderbook_csv: str, *, max_differences: int = 10) -> dict:
    """Replay a LOBSTER message file through the core, seeded from the first orderbook row,
    and compare the core's top N levels with every orderbook row. See docs/lobster.md."""
    m = read_message(message_csv)
    book = read_orderbook(orderbook_csv)
    rows, n = len(book), book.shape[1] // 4
    if len(m["type"]) != rows:
        raise InputError(f"{message_csv}: {len(m['type'])} messages but {rows} orderbook rows")
    if rows == 0:
        raise InputError(f"{message_csv}: empty")
    derivable, open_ask, open_bid = _naive(m, book, n)
    # the book: band and tick from every price in both files
    bp = book[:, 0::2].ravel()
    bp = bp[(bp != ASK_EMPTY) & (bp != BID_EMPTY) & (bp > 0)]
    mp = m["price"][(m["type"] <= 4) & (m["price"] > 0)]
    prices = np.concatenate([bp, mp]).astype(np.int64)
    if not len(prices):
        raise InputError(f"{message_csv}: no prices")
    tick = int(np.gcd.reduce(prices))
    lo, hi = int(prices.min()), int(prices.max())
    pad = (hi - lo) // 5 + lo // 10 + tick
    low, high = max(0, (lo - pad) // tick * tick), -(-(hi + pad) // tick) * tick
    if (high - low) // tick > (1 << 24):
        raise InputError(f"{message_csv}: price range {lo}..{hi} at tick {tick} is too wide")
    cap = int((m["type"] == 1).sum()) + 2 * ((high - low) // tick + 1) + 4 * n + 16
    sess = Session(0)
    bv = sess.add_book(0, low, high, tick, cap)
    # every message as a core event (types 5, 6, 7: none)
    typ = m["type"]
    side = np.where(m["direction"] == 1, Side.BUY, Side.SELL).astype(np.uint8)
    ids = m["id"]
    order = np.argsort(ids, kind="stable")           # first row where each id is added
    first_add = np.full(rows, rows, np.int64)
    adds = np.flatnonzero(typ == 1)
    ua, ui = np.unique(ids[adds], return_index=True)
    pos = np.searchsorted(ua, ids)
    posc = np.minimum(pos, max(len(ua) - 1, 0))
    hit = (len(ua) > 0) & (ua[posc] == ids) if len(ua) else np.zeros(rows, bool)
    first_add[hit] = adds[ui[posc[hit]]]
    del order
    known = (first_add >= 1) & (first_add < np.arange(rows)) & (ids != 0)  # row 0's add is in the seed
    ev = np.zeros(rows, EVENT_DTYPE)
    ev["instrument"] = 0
    ev["price"] = m["price"]
    ev["qty"] = m["size"]
    ev["side"] = side
    ev["id"] = np.where(known | (typ == 1), ids, _sid(side, m["price"])).astype(np.uint64)
    ev["kind"] = np.select([typ == 1, (typ == 2) | (typ == 3), typ == 4], [Kind.NEW, Kind.REDUCE, Kind.EXEC], 0)
    ev["tif"] = np.where(typ == 1, TIF.GTC, 0)
    ev["flags"] = np.select([typ <= 3, typ == 4], [Flag.FEED, Flag.NOCHECK], 0)
    unknown_rows = int(((typ >= 2) & (typ <= 4) & ~known).sum())
    # seed: one synthetic order per level of row 0
    asks0, bids0 = _side_levels(book[0], n)
    seed = [(Side.SELL, p, q) for p, q in asks0] + [(Side.BUY, p, q) for p, q in bids0]
    sess.apply(_new_events([(int(_sid(s, p)), s, p, q) for s, p, q in seed if q > 0]))
    got = np.empty_like(book)
    got[0] = _snapshot(bv, n)
    demoted: set[int] = set()
    fix = (open_ask | open_bid | ~derivable)
    fix[0] = False
    ends = np.flatnonzero(fix).tolist() + [rows - 1]
    state = got[0]
    reconciles = 0
    i = 1
    per_event = n > 1
    for e in ends:
        if e < i:
            continue
        seg = ev[i:e + 1].copy()
        if demoted:  # orders whose level was reset: their shares now sit in the level's synthetic order
            dm = np.fromiter((int(x) in demoted for x in seg["id"]), bool, len(seg)) & (seg["kind"] != Kind.NEW)
            seg["id"][dm] = _sid(seg["side"][dm], seg["price"][dm]).astype(np.uint64)
        if per_event:
            for j in range(len(seg)):
                if seg["kind"][j]:
                    sess.apply(seg[j:j + 1])
                    state = _snapshot(bv, n)
                got[i + j] = state
        else:
            act = np.flatnonzero(seg["kind"] != 0)
            if len(act):
                out = sess.apply(seg[act], bbo=True).bbo
                snaps = np.empty((len(act), 4), np.int64)
                snaps[:, 0] = np.where(out["ask_count"] > 0, out["ask_price"], ASK_EMPTY)
                snaps[:, 1] = np.where(out["ask_count"] > 0, out["ask_qty"], 0)
                snaps[:, 2] = np.where(out["bid_count"] > 0, out["bid_price"], BID_EMPTY)
                snaps[:, 3] = np.where(out["bid_count"] > 0, out["bid_qty"], 0)
                k = np.searchsorted(act, np.arange(len(seg)), "right") - 1
                got[i:e + 1] = np.where((k >= 0)[:, None], snaps[np.maximum(k, 0)], state)
                state = got[e].copy()
            else:
                got[i:e + 1] = state
        if fix[e]:
            sides = [Side.SELL] if open_ask[e] and derivable[e] else []
            sides += [Side.BUY] if open_bid[e] and derivable[e] else []
            if not derivable[e]:
                sides = [Side.SELL, Side.BUY]
            for s in sides:
                reconciles += _reconcile(sess, bv, s, book[e], book[e - 1], n, demoted)
            state = _snapshot(bv, n)
        i = e + 1
    # compare on the predictable levels
    diff = got != book
    cmp = diff.copy()
    last = 4 * (n - 1)
    cmp[open_ask, last] = cmp[open_ask, last + 1] = False
    cmp[open_bid, last + 2] = cmp[open_bid, last + 3] = False
    agree = ~cmp.any(axis=1)
    exact = ~diff.any(axis=1)
    bad = np.flatnonzero(derivable & ~agree)
    cols = ("ask_price", "ask_size", "bid_price", "bid_size")
    first = []
    for r in np.flatnonzero(~agree)[:max_differences].tolist():
        c = int(np.argmax(cmp[r]))
        first.append({"row": r + 1, "derivable": bool(derivable[r]), "time": str(m["time"][r]),
                      "message": [int(m[k][r]) for k in ("type", "id", "size", "price", "direction")],
                      "level": c // 4 + 1, "column": cols[c % 4], "file": int(book[r, c]), "core": int(got[r, c])})
    by_type = {}
    for t in range(1, 8):
        sel = typ == t
        if sel.any():
            by_type[str(t)] = {"rows": int(sel.sum()), "agree": int((agree & sel).sum())}
    return {
        "message_file": os.path.basename(message_csv), "orderbook_file": os.path.basename(orderbook_csv),
        "rows": rows, "levels": n, "tick": tick,
        "derivable": int(derivable.sum()), "not_derivable": int((~derivable).sum()),
        "agree": int(agree.sum()), "differ": int((~agree).sum()),
        "agree_derivable": int((agree & derivable).sum()), "differ_derivable": int(len(bad)),
        "agree_exact": int(exact.sum()),
        "level_entered_from_beyond_depth": int((open_ask | open_bid).sum()),
        "unknown_order_rows": unknown_rows, "levels_reset": reconciles,
        "rows_by_type": by_type, "first_differences": first,
        "ok": bool(len(bad) == 0),
    }


def _new_events(specs) -> np.ndarray:
    ev = np.zeros(len(specs), EVENT_DTYPE)
    for k, (oid, s, p, q) in enumerate(specs):
        ev[k] = (oid, 0, p, q, 0, Kind.NEW, s, TIF.GTC, Flag.FEED)
    return ev


def _reconcile(sess, bv, side, row, prev, n, demoted) -> int:
    """Make the core's visible levels of one side those of the orderbook row: a level
    whose size or presence differs, or that was not visible in the previous row (what
    happened to it out of sight is unknown), is emptied (its orders are `demoted`) and,
    if the file shows it, refilled by the level's synthetic order. Returns levels reset."""
    asks, bids = _side_levels(row, n)
    want = dict(bids if side == Side.BUY else asks)
    pa, pb = _side_levels(prev, n)
    seen = {p for p, _ in (pb if side == Side.BUY else pa)}
    full = len(want) == n
    if full:
        worst = min(want) if side == Side.BUY else max(want)
        k = 2 * n + 64
        while True:
            lv = bv.depth(side, k)
            if len(lv) < k or not (lv[-1][0] >= worst if side == Side.BUY else lv[-1][0] <= worst):
                break
            k *= 4
        got = [(p, q) for p, q, _ in lv if (p >= worst if side == Side.BUY else p <= worst)]
    else:
        got = [(p, q) for p, q, _ in bv.depth(side, 1 << 30)]
    have = dict(got)
    ev = []
    reset = 0
    for p, q in got:
        if want.get(p) != q or p not in seen:
            ids, _, _ = bv._b.level_orders(p)
            for oid in ids.tolist():
                demoted.add(int(oid))
                ev.append((int(oid), 0, 0, 0, 0, Kind.CANCEL, 0, 0, 0))
            reset += 1
    for p, q in want.items():
        if have.get(p) != q or p not in seen:
            ev.append((int(_sid(side, p)), 0, p, q, 0, Kind.NEW, side, TIF.GTC, Flag.FEED))
            reset += p not in have
    if ev:
        sess.apply(np.array(ev, EVENT_DTYPE))
    return reset


def format_report(rep: dict) -> str:
    lines = [f"{rep['message_file']} / {rep['orderbook_file']}: {rep['rows']:,} rows, {rep['levels']} level(s)",
             f"derivable rows: {rep['derivable']:,} (not derivable: {rep['not_derivable']:,}); "
             f"a level entered from beyond the visible depth in {rep['level_entered_from_beyond_depth']:,}",
             f"core vs file on the predictable levels: {rep['agree']:,} rows agree, {rep['differ']:,} differ; "
             f"derivable rows: {rep['agree_derivable']:,} agree, {rep['differ_derivable']:,} differ",
             f"rows identical on every level: {rep['agree_exact']:,}; executions/cancels of orders not in the "
             f"file: {rep['unknown_order_rows']:,}; levels reset from the file: {rep['levels_reset']:,}",
             "rows by type: " + ", ".join(f"{t}: {v['agree']:,}/{v['rows']:,}" for t, v in rep["rows_by_type"].items())]
    for d in rep["first_differences"]:
        lines.append(f"  row {d['row']} ({'derivable' if d['derivable'] else 'not derivable'}) t={d['time']} "
                     f"msg {d['message']}: level {d['level']} {d['column']} file {d['file']} core {d['core']}")
    lines.append("OK: every derivable row agrees" if rep["ok"] else "FAIL: derivable rows differ")
    return "\n".join(lines)

