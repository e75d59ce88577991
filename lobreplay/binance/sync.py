"""The Binance depth sync procedure: the driver of the sync machine (no I/O).

The machine itself is in C (csrc/feeds/bnsync.c, lobreplay.core._coreapi.BnMachine): it alone holds
every symbol's sync state and writes the records. DepthSync reads what the C decoder leaves to
Python (JSON messages, REST snapshots, a --raw file's own lines, malformed input) and hands the
machine what they say; a batch of lines decoded in C goes to the machine in one call
(feed_lines). The machine in pure Python is the test reference, tests/reference_sync.py.

One DepthSync holds every symbol of a capture. The driver (live capture or
file converter) hands it what arrived, in arrival order, each with its local
receive time:

    feed(message, recv_ns)                 a websocket message: a combined-stream
                                           envelope {"stream","data"} or a raw payload
    feed_snapshot(symbol, body, recv_ns)   a REST depth snapshot body (symbol None:
                                           guess from context, for recordings)
    snapshot_failed(symbol, recv_ns, reason)   e.g. 429/418 -> GAP(rate limit)
    disconnected(recv_ns, reason, symbols)     connection lost / 24-hour cut / serverShutdown
    feed_lines(lines, levels, pos, name_sym)   a batch decoded in C (lobreplay.core._coreapi.bn_decode)
    feed_recorded(line, raw)                   one recorded `<recv ns> <message>` line

and takes back:

    take_records()        the .lobc records produced since the last call (numpy RECORD_DTYPE)
    snapshot_wanted()     symbols whose buffered events wait for a snapshot nobody asked for yet
                          (the driver fetches it and calls mark_requested(symbol))
    events                list of ("gap", symbol, reason) / ("synced", symbol, lastUpdateId) (every
                          sync) / ("resync", symbol, lastUpdateId) (a sync after a GAP) /
                          ("shutdown", None) the driver may react to; it clears the list

The rules (docs/binance.md, shared/docs/binance-depth.md 1.1-1.2 and 2.1-2.2):

* events are buffered until a snapshot is there; a snapshot with L + 1 < U of the first
  buffered event (spot) or L < U (USD-M) is stale: GAP(stale snapshot), fetch again;
* buffered events with u <= L (spot) / u < L (USD-M) are dropped;
* the first event applied must have U <= L+1 <= u (spot) / U <= L <= u (USD-M);
* then every event must continue the previous one: U == prev u + 1 (spot), pu == prev u (USD-M);
  an event with u <= the book's id is old or a duplicate and is ignored;
* anything else is a gap: GAP(sequence), the event starts a new buffer, new snapshot,
  and once the first event is accepted again: SNAPSHOT, RESYNC, then the diffs.

Numbers: JSON is decoded with parse_float=str (nothing goes through a float);
every price and quantity is a decimal string converted exactly to a scaled
integer (lobreplay.l2.lobc.parse_decimal semantics; a vectorised path parses the
common shape, anything else goes through parse_decimal itself). A message that
is not valid JSON or whose fields are wrong becomes GAP(malformed) for the
symbol it concerns (every symbol if that cannot be told) and a resync; no
exception escapes feed*().
"""
from __future__ import annotations

import json
import os
import re
from itertools import chain

import numpy as np

from lobreplay.l2 import lobc
from lobreplay.core._coreapi import (BN_AGGTRADE, BN_DEPTH, BN_EV_GAP, BN_EV_RESYNC, BN_EV_SYNCED, BN_TICKER,
                                     BN_TRADE, BnMachine)
from lobreplay.l2.lobc import GAP_DISCONNECT, GAP_RATE_LIMIT, GAP_ROTATE, GAP_SHUTDOWN, RECORD_DTYPE

SPOT, USDM = "spot", "usdm"
MARKETS = (SPOT, USDM)
BID, ASK = ord("B"), ord("S")
U64_MAX = 2**64 - 1
MS = 1_000_000  # ns per ms

# TRADE flags (docs/binance.md): bit 0 = the record came from an aggTrade (first_id..last_id = f..l)
TRADE_FLAG_AGG = 1


def _no_constant(name):
    raise ValueError(f"JSON constant {name} is not a number here")


_DECODER = json.JSONDecoder(parse_float=str, parse_int=int, parse_constant=_no_constant)
try:  # the C scanner itself: json.loads without its per-call Python wrappers
    _scan_once = json.scanner.c_make_scanner(_DECODER)
except (AttributeError, TypeError):  # pragma: no cover - CPython always has it
    _scan_once = None


def decode_json(raw):
    """json text (str or bytes) -> object, floats kept as their strings (exactly
    json.loads(raw, parse_float=str), faster)."""
    if type(raw) is not str:
        raw = bytes(raw).decode("utf-8")
    if _scan_once is None or not raw.startswith("{"):
        return _DECODER.decode(raw)
    try:
        obj, end = _scan_once(raw, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(raw) and raw[end:].strip(" \t\r\n"):
        raise ValueError(f"extra data after the JSON value at {end}")
    return obj


class Malformed(ValueError):
    pass


def _int(v, name) -> int:
    if type(v) is not int or v < 0 or v > U64_MAX:
        raise Malformed(f"field {name}: expected an unsigned integer, got {v!r}")
    return v


MAX_MS = 9_223_372_036_853  # the last ms whose ns fit int64


def _ms_of(v, name) -> int:
    """A time in ms as a message gives it (-1: none), checked as _ms checks it."""
    return -1 if v is None else _ms(v, name) // MS


def _ms(v, name) -> int:
    if v is None:
        return 0
    if type(v) is not int or v < 0 or v > MAX_MS:
        raise Malformed(f"field {name}: expected a time in ms, got {v!r}")
    return v * MS


# ---------------------------------------------------------------- .lobc writer

def open_writer(path, *, market, symbols, streams=(), source=None, **kw) -> "lobc.LobcWriter":
    """A LobcWriter whose metadata fits the header (at most 65,460 bytes): the stream list is kept whole
    if it fits, else summarised as "*@<stream type>" (the symbols are listed anyway). source
    (comma-separated paths) is recorded as file names only: a .lobc file is shared, and the
    directories of the machine that converted it are nobody else's business (nor the same
    from one checkout to the next)."""
    streams = list(streams)
    summary = sorted({"*@" + s.split("@", 1)[1] for s in streams if "@" in s})
    if source is not None:
        source = ",".join(os.path.basename(x) for x in str(source).split(","))
    tries = [(streams, source), (summary, source), ([], source), ([], None)]
    err = None
    for st, src in tries:
        try:
            return lobc.LobcWriter(path, venue="binance", market=market, symbols=symbols, streams=st, source=src,
                                   **kw)
        except ValueError as e:
            if "metadata" not in str(e):
                raise
            err = e
    raise err


# ---------------------------------------------------------------- records

_POW10 = np.array([10**i for i in range(19)], dtype=np.int64)
_HAVE_NP_STRINGS = hasattr(np, "strings")


class Levels:
    """Validates [[price, qty], ...] lists and turns them into records in bulk.

    prepare(pairs) checks the shape and that every string has the simple shape
    digits[.digits] within the scales (one C-level regex over the joined strings);
    such strings are parsed later, all at once, with numpy. Anything else is
    parsed at once with lobc.parse_decimal (exact; raises ValueError)."""

    def __init__(self, price_scale: int, qty_scale: int):
        self.price_scale, self.qty_scale = price_scale, qty_scale
        dp, dq = lobc._scale_digits(price_scale), lobc._scale_digits(qty_scale)
        self.dp, self.dq = dp, dq

        def num(d):
            frac = rf"(?:\.[0-9]{{1,{d}}})?" if d else ""
            return rf"[0-9]{{1,{18 - d}}}{frac}"
        self._fast = re.compile(rf"(?:{num(dp)},{num(dq)},)*").fullmatch
        self._fast_one = re.compile(rf"{num(dp)},{num(dq)}").fullmatch

    def prepare_one(self, price, qty):
        """One price/qty pair (trade, bookTicker) -> prepared, as prepare([[price, qty]])."""
        if type(price) is str and type(qty) is str and self._fast_one(price + "," + qty):
            return 1, [price, qty], 1
        if type(price) is not str or type(qty) is not str:
            raise Malformed("prices and quantities must be strings")
        return 2, [lobc.parse_decimal(price, self.price_scale), lobc.parse_decimal(qty, self.qty_scale)], 1

    def prepare(self, pairs):
        """-> (mode, values, n). mode 1: values = flat list of strings; mode 2: flat ints."""
        if type(pairs) is not list:
            raise Malformed(f"levels: expected a list, got {type(pairs).__name__}")
        n = len(pairs)
        if not n:
            return 1, [], 0
        if set(map(type, pairs)) != {list} or set(map(len, pairs)) != {2}:
            raise Malformed("levels: expected [price, qty] pairs")
        flat = list(chain.from_iterable(pairs))
        try:
            joined = ",".join(flat)
        except TypeError:
            raise Malformed("levels: prices and quantities must be strings") from None
        if joined.count(",") == 2 * n - 1 and self._fast(joined + ","):
            return 1, flat, n
        ps, qs = self.price_scale, self.qty_scale
        vals = []
        for i in range(0, 2 * n, 2):
            vals.append(lobc.parse_decimal(flat[i], ps))
            vals.append(lobc.parse_decimal(flat[i + 1], qs))
        return 2, vals, n

    def parse_fast(self, flat) -> np.ndarray:
        """Flat [p, q, p, q, ...] strings that passed the fast check -> int64 (n, 2)."""
        if not flat:
            return np.empty((0, 2), np.int64)
        if not _HAVE_NP_STRINGS:  # numpy < 2: exact, slower
            ints = np.array([int(s.replace(".", "")) for s in flat], dtype=np.int64)
            fracs = np.array([(len(s) - s.index(".") - 1) if "." in s else 0 for s in flat], dtype=np.int64)
        else:
            a = np.array(flat, dtype="S")
            ints = np.strings.replace(a, b".", b"").astype(np.int64)
            dot = np.strings.find(a, b".")
            fracs = np.where(dot >= 0, np.strings.str_len(a) - dot - 1, 0)
        fr = fracs.reshape(-1, 2)
        out = ints.reshape(-1, 2)
        out[:, 0] *= _POW10[self.dp - fr[:, 0]]
        out[:, 1] *= _POW10[self.dq - fr[:, 1]]
        return out


# ---------------------------------------------------------------- the state machine

# bookTicker envelopes as Binance sends them (spot: no e/T/E; USD-M: e first, T and E last);
# anything else goes through the JSON path.
_TICKER_RE = re.compile(
    r'\{"stream":"([a-z0-9_\-]+@bookTicker)","data":\{(?:"e":"bookTicker",)?"u":([0-9]{1,20}),'
    r'"s":"([A-Z0-9_\-]+)","b":"([0-9.]+)","B":"([0-9.]+)","a":"([0-9.]+)","A":"([0-9.]+)"'
    r'(?:,"T":([0-9]{1,15}),"E":([0-9]{1,15}))?\}\}[ \t\r\n]*')

_EVENT_NAMES = {BN_EV_GAP: "gap", BN_EV_SYNCED: "synced", BN_EV_RESYNC: "resync"}
_SYMBOL_STATS = ("depth", "applied", "dropped_covered", "duplicates", "gaps", "resyncs", "first_L", "snapshots",
                 "snapshots_stale", "snapshots_unused")
_NO_LEVELS = np.empty((0, 2), np.int64)
_UNKNOWN = (-1, BN_DEPTH, 0, 0, 0, -1, _NO_LEVELS, 0, False)  # a message of none of the symbols: counted


class DepthSync:
    """Every symbol of one capture (see the module docstring). The sync state is the C
    machine's (lobreplay.core._coreapi.BnMachine, csrc/feeds/bnsync.c); this object reads the messages
    the C decoder leaves to Python and hands the machine what they say."""

    def __init__(self, market: str, symbols, *, price_scale: int = lobc.DEFAULT_SCALE,
                 qty_scale: int = lobc.DEFAULT_SCALE, max_buffer: int = 50_000, c_decoder: bool = True):
        if market not in MARKETS:
            raise ValueError(f"market must be one of {MARKETS}, got {market!r}")
        self.market = market
        self.c_decoder = c_decoder  # feed() tries the C decoder first (False: every message read in Python)
        self.spot = market == SPOT
        self.symbols = [str(s).upper() for s in symbols]
        if not self.symbols:
            raise ValueError("at least one symbol")
        self._by_name = {s: i for i, s in enumerate(self.symbols)}
        self._by_stream = {}
        self.levels = Levels(price_scale, qty_scale)
        self.max_buffer = max_buffer
        self.core = BnMachine(len(self.symbols), usdm=not self.spot, max_buffer=max_buffer)
        self._sym = self.core.symbols  # the machine's per-symbol state, live
        self._events = []
        # what the Python side counts (the machine counts the rest: stats)
        self._counts = {"messages": 0, "snapshots": 0, "ignored": 0, "unknown_symbol": 0, "malformed": 0,
                        "shutdowns": 0}
        self._malformed_by = {}

    # ------------------------------------------------------------ driver API

    def take_records(self) -> np.ndarray:
        return self.core.take().view(RECORD_DTYPE)

    @property
    def pending_records(self) -> int:
        return self.core.pending

    @property
    def events(self) -> list:
        self._drain_events()
        return self._events

    @events.setter
    def events(self, value) -> None:
        self.core.take_events()
        self._events = list(value)

    def _drain_events(self) -> None:
        evs = self.core.take_events()
        if evs is not None:
            names = self.symbols
            self._events += [(_EVENT_NAMES[k], names[s], v)
                             for k, s, v in zip(evs["kind"].tolist(), evs["symbol"].tolist(), evs["value"].tolist())]

    @property
    def stats(self) -> dict:
        """The counts so far (a new dict: the machine's and those of the messages read here)."""
        t, c = self.core.totals, self._counts
        by_reason = t["gaps_by_reason"].tolist()
        return {"messages": c["messages"] + int(t["messages"]), "depth": int(t["depth"]),
                "trades": int(t["trades"]), "tickers": int(t["tickers"]),
                "snapshots": c["snapshots"], "ignored": c["ignored"],
                "unknown_symbol": c["unknown_symbol"] + int(t["unknown_symbol"]), "malformed": c["malformed"],
                "shutdowns": c["shutdowns"], "gaps": int(t["gaps"]), "resyncs": int(t["resyncs"]),
                "gaps_by_reason": {lobc.GAP_REASONS[r]: by_reason[r]
                                   for r in t["gap_order"][:int(t["n_gap_order"])].tolist()},
                "diff_levels": int(t["diff_levels"]), "snapshot_levels": int(t["snapshot_levels"]),
                "malformed_by_stream": dict(self._malformed_by)}

    def snapshot_wanted(self) -> list[str]:
        # (asked after every message of a capture: one call)
        return [self.symbols[i] for i in self.core.wanted()]

    def mark_requested(self, symbol: str) -> None:
        self.core.request(self._by_name[symbol.upper()], True)

    def is_live(self, symbol: str) -> bool:
        return bool(self._sym["live"][self._by_name[symbol.upper()]])

    def symbol_stats(self) -> dict:
        out = {}
        for name, row in zip(self.symbols, self._sym.tolist()):
            d = dict(zip(self._sym.dtype.names, row))
            st = {k: d[k] for k in _SYMBOL_STATS}
            if not d["synced"]:
                st["first_L"] = None
            st.update(live=bool(d["live"]), synced=d["synced"], last_u=d["last_u"])
            out[name] = st
        return out

    def feed_lines(self, lines: np.ndarray, levels: np.ndarray, pos: int, name_sym: np.ndarray) -> int:
        """Lines decoded in C (lobreplay.core._coreapi.bn_decode), from line pos on, through the
        machine in one call, up to the first line the decoder left to Python (feed() it);
        returns that line's index (len(lines): all taken). name_sym: the symbol index of each
        of the batch's (stream, s) names (int32, -1: none of these symbols: symbol_index)."""
        return self.core.lines(lines, levels, pos, name_sym)

    def symbol_index(self, s, stream) -> int:
        """The index of the symbol a message with this "s" and stream name is for (-1: none)."""
        i = self._symbol_of(s, stream)
        return -1 if i is None else i

    def feed(self, raw, recv_ns: int) -> None:
        """One websocket message (str/bytes JSON text, or an already decoded dict). A depth,
        trade or ticker message in the usual shape is decoded in C (as in a batch; not with
        c_decoder=False) and goes straight to the machine; any other is read here."""
        if self.c_decoder and type(raw) is not dict:
            b = raw.encode() if type(raw) is str else bytes(raw)
            ln = self.core.decode_message(b, usdm=not self.spot, price_digits=self.levels.dp,
                                          qty_digits=self.levels.dq)
            if ln is not None:
                self.core.take_message(self.symbol_index(
                    b[ln.sym_start:ln.sym_start + ln.sym_len].decode() if ln.sym_len >= 0 else None,
                    b[ln.stream_start:ln.stream_start + ln.stream_len].decode() if ln.stream_len >= 0 else None),
                    recv_ns)
                return
        msg = self._read(raw, recv_ns)
        if msg is not None:
            self._counts["messages"] -= 1  # (the machine counts the messages it takes)
            self.core.message(recv_ns, *msg)

    def _read(self, raw, recv_ns: int) -> tuple | None:
        """A message read in Python: a depth, trade or ticker message in the form the C decoder
        gives, for the machine (symbol, status, first id, last id, pu, E ms or -1, levels,
        bids, maker); any other is done with here (a snapshot, serverShutdown, ignored,
        malformed: None)."""
        self._counts["messages"] += 1
        try:
            if type(raw) is not dict:
                if type(raw) is not str:
                    raw = bytes(raw).decode("utf-8")
                if raw.startswith('{"stream":"') and "@bookTicker" in raw[:64]:
                    m = _TICKER_RE.fullmatch(raw)
                    got = self._fast_ticker(m) if m is not None else None
                    if got is not None:
                        return got
            msg = raw if type(raw) is dict else decode_json(raw)
            if type(msg) is not dict:
                raise Malformed("not a JSON object")
            stream = msg.get("stream")
            if stream is not None and "data" in msg:
                data = msg["data"]
                if type(data) is not dict or type(stream) is not str:
                    raise Malformed("envelope: data must be an object")
            else:
                data, stream = msg, None
            e = data.get("e")
            if e == "depthUpdate":
                return self._on_depth(data, stream, recv_ns)
            elif e == "trade":
                return self._on_trade(data, stream, agg=False)
            elif e == "aggTrade":
                return self._on_trade(data, stream, agg=True)
            elif e == "bookTicker" or (e is None and "A" in data and "u" in data and "b" in data):
                return self._on_ticker(data, stream)
            elif e == "serverShutdown":
                self._counts["shutdowns"] += 1
                self._drain_events()  # (in the order they happened)
                self._events.append(("shutdown", None))
            elif stream is not None and stream.endswith("@depthSnapshot"):
                # our --raw files: a REST snapshot wrapped with its symbol
                self._counts["messages"] -= 1
                self.feed_snapshot(stream.split("@", 1)[0], data, recv_ns)
            elif stream is None and "lastUpdateId" in data and "bids" in data:
                # a bare REST snapshot body (hftbacktest recordings)
                self._counts["messages"] -= 1
                self.feed_snapshot(None, data, recv_ns)
            else:
                self._counts["ignored"] += 1  # kline, partial depth, subscription replies, ...
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError) as err:
            self._malformed(raw, recv_ns, err)
        return None

    def feed_depth(self, stream, s, U, u, pu, exch_ms, recv_ns: int, bids: np.ndarray, asks: np.ndarray) -> None:
        """A depthUpdate message that the C decoder (lobreplay.core._coreapi.bn_decode) took: the
        same as feed() of its text. stream: the envelope's stream name (None: no envelope),
        s: its "s" (None: none), pu: 0 on spot, exch_ms: E (-1: none), bids and asks: int64
        (n, 2) arrays of price, qty. The decoder took only well-formed messages (U <= u,
        every field in range, every decimal within the scales)."""
        i = self._symbol_of(s, stream)
        self.core.message(recv_ns, -1 if i is None else i, BN_DEPTH, U, u, pu, exch_ms,
                          np.concatenate((bids, asks)) if len(asks) else bids, len(bids), False)

    def feed_snapshot(self, symbol, body, recv_ns: int) -> None:
        """A REST depth snapshot body (text or dict) for `symbol` (None: the one waiting for it)."""
        self._counts["snapshots"] += 1
        i = None
        try:
            if symbol is not None:
                i = self._by_name.get(str(symbol).upper())
                if i is None:
                    self._counts["unknown_symbol"] += 1
                    return
            data = body if type(body) is dict else decode_json(body)
            if type(data) is not dict:
                raise Malformed("snapshot: not a JSON object")
            L = _int(data["lastUpdateId"], "lastUpdateId")
            exch = _ms(data.get("E"), "E")
            bids = self._pairs(self.levels.prepare(data["bids"]))
            asks = self._pairs(self.levels.prepare(data["asks"]))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError):
            self.count_malformed("snapshot")
            sy = self._sym
            targets = [i] if i is not None else np.flatnonzero((sy["live"] == 0) & (sy["requested"] != 0)).tolist()
            for k in targets or range(len(self.symbols)):
                self.core.bad_snapshot(k, recv_ns)
            return
        if i is None:
            i = self.core.guess(L)
            if i < 0:
                self._counts["unknown_symbol"] += 1
                return
        self.core.snapshot(i, L, exch, recv_ns, np.concatenate((bids, asks)) if len(asks) else bids, len(bids))

    def snapshot_failed(self, symbol: str, recv_ns: int, reason: int = GAP_RATE_LIMIT) -> None:
        """The snapshot request for `symbol` failed (429/418: reason GAP_RATE_LIMIT). The
        symbol keeps buffering; the driver retries. One GAP per reason until the next sync."""
        i = self._by_name.get(str(symbol).upper())
        if i is not None:  # (else: a raw file converted for some of its symbols)
            self.core.snapshot_failed(i, recv_ns, reason)

    def disconnected(self, recv_ns: int, reason: int = GAP_DISCONNECT, symbols=None) -> None:
        """The connection carrying `symbols` (default all) ended; what was buffered is
        dropped and each symbol syncs again from the new connection's events. A GAP is
        written for a symbol that had received depth events since its last GAP."""
        if symbols is None:
            self.core.disconnected(recv_ns, reason)
        else:  # (a name that is none of these symbols: not converted)
            self.core.disconnected(recv_ns, reason, [i for i in map(self._by_name.get, map(str.upper, symbols))
                                                     if i is not None])

    def end_file(self, recv_ns: int) -> None:
        """The capture moves on to its next file (capture --rotate): a GAP (GAP_ROTATE) for
        each symbol that had received depth events since its last GAP, then every symbol
        starts again as in a new capture (buffering, no open gap), so that the next file's
        records stand on their own: a snapshot per symbol, no RESYNC."""
        self.core.end_file(recv_ns)

    # ------------------------------------------------------------ recorded lines

    def feed_recorded(self, line: bytes, raw: bool) -> None:
        """One recorded `<recv ns> <message>` line (hftbacktest, our --raw files), as a
        conversion reads it: the message through feed(), then after_recorded(); one of the
        capture's own lines in a --raw file (raw): the call the capture made. A line that is
        not `<recv ns> <message>` is counted as malformed."""
        sp = line.find(b" ")
        if sp <= 0:
            if line.strip():
                self.count_malformed("line")
            return
        try:
            recv = int(line[:sp])
        except ValueError:
            self.count_malformed("line")
            return
        if not -lobc.INT64_MAX - 1 <= recv <= lobc.INT64_MAX:  # a receive time the records cannot hold
            self.count_malformed("line")
            return
        msg = line[sp + 1:]
        if raw and msg.startswith(b'{"lobreplay"'):
            self._control(msg, recv)
            return
        self.feed(msg, recv)
        self.after_recorded(recv, raw)

    def after_recorded(self, recv_ns: int, raw: bool) -> None:
        """After a recorded message, what a live capture would do on a serverShutdown: the
        connection ends (GAP for every symbol) and the next events start a new sync. Our raw
        files carry the capture's own `disconnected` lines instead, so nothing is done for
        them here. Clears the events."""
        evs = self.events
        self.events = []
        if not raw and any(e[0] == "shutdown" for e in evs):
            self.disconnected(recv_ns, GAP_SHUTDOWN)

    def _control(self, msg: bytes, recv_ns: int) -> None:
        """One of the capture's own lines (capture.py): the same call the capture made. A line
        that cannot be read is counted as malformed (the events after it show any gap it hid)."""
        try:
            ctl = decode_json(msg)["lobreplay"]
            ev = ctl.get("event")
            if ev == "disconnected":
                symbols = ctl.get("symbols")
                if symbols is not None and not (type(symbols) is list and all(type(x) is str for x in symbols)):
                    raise TypeError("symbols")
                self.disconnected(recv_ns, _reason(ctl["reason"]), symbols)
            elif ev == "snapshot_failed":
                self.snapshot_failed(str(ctl["symbol"]), recv_ns, _reason(ctl["reason"]))
            elif ev == "end_file":
                # capture --rotate: the last line of a file. The capture starts its next file
                # afresh (a snapshot, no RESYNC); read here, the next file (if converted with
                # this one) continues this one's .lobc file, so the rotation is a gap like a
                # disconnect and the sync after it a RESYNC. Alone, the file's records are the
                # capture's.
                self.disconnected(recv_ns, GAP_ROTATE)
        except (ValueError, KeyError, TypeError, AttributeError):
            self.count_malformed("control")
        self.events = []

    # ------------------------------------------------------------ messages

    def _pairs(self, prepared) -> np.ndarray:
        """Levels.prepare's result as int64 (n, 2) price, qty."""
        mode, vals, n = prepared
        if not n:
            return _NO_LEVELS
        if mode == 1:
            return self.levels.parse_fast(vals)
        return np.array(vals, np.int64).reshape(-1, 2)

    def _pair(self, prepared) -> tuple[int, int]:
        """Levels.prepare_one's result as (price, qty)."""
        mode, (p, q), _ = prepared
        if mode == 1:
            return lobc.parse_decimal(p, self.levels.price_scale), lobc.parse_decimal(q, self.levels.qty_scale)
        return p, q

    def _symbol(self, data, stream):
        return self._symbol_of(data.get("s"), stream)

    def _symbol_of(self, s, stream):
        """The index of the symbol of a message (stream name first, then "s"), or None."""
        if stream is not None:
            i = self._by_stream.get(stream)
            if i is None:
                i = self._by_name.get(stream.split("@", 1)[0].upper())
                if i is not None:
                    self._by_stream[stream] = i
            if i is not None:
                return i
        if type(s) is str:
            return self._by_name.get(s.upper())
        return None

    def _on_depth(self, data, stream, recv_ns):
        i = self._symbol(data, stream)
        if i is None:
            return _UNKNOWN
        try:
            U = _int(data["U"], "U")
            u = _int(data["u"], "u")
            if U > u:
                raise Malformed(f"U {U} > u {u}")
            pu = 0 if self.spot else _int(data["pu"], "pu")
            exch = _ms_of(data.get("E"), "E")
            bids = self._pairs(self.levels.prepare(data["b"]))
            asks = self._pairs(self.levels.prepare(data["a"]))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as err:
            self._malformed_symbol(i, recv_ns, err)
            return None
        return i, BN_DEPTH, U, u, pu, exch, np.concatenate((bids, asks)) if len(asks) else bids, len(bids), False

    def _on_trade(self, data, stream, agg):
        i = self._symbol(data, stream)
        if i is None:
            return _UNKNOWN
        try:
            if agg:
                first, last = _int(data["f"], "f"), _int(data["l"], "l")
            else:
                first = last = _int(data["t"], "t")
            m = data["m"]
            if type(m) is not bool:
                raise Malformed("field m: expected true/false")
            exch = _ms_of(data.get("T"), "T")
            pair = self._pair(self.levels.prepare_one(data["p"], data["q"]))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            self.count_malformed("aggTrade" if agg else "trade")  # (the book is not touched: go on)
            return None
        return i, BN_AGGTRADE if agg else BN_TRADE, first, last, 0, exch, [pair], 1, m

    def _fast_ticker(self, m):
        """A bookTicker envelope of the usual shape, matched by _TICKER_RE (same result as the
        JSON path; None: let the JSON path handle it)."""
        stream, u, _s, b, B, a, A, _T, E = m.groups()
        i = self._by_stream.get(stream)
        if i is None:
            return None
        fast = self.levels._fast_one
        if not (fast(b + "," + B) and fast(a + "," + A)):
            return None
        u = int(u)
        if u > U64_MAX or (E is not None and int(E) > MAX_MS):  # the JSON path refuses them
            return None
        ps, qs = self.levels.price_scale, self.levels.qty_scale
        return (i, BN_TICKER, u, 0, 0, int(E) if E is not None else -1,
                [(lobc.parse_decimal(b, ps), lobc.parse_decimal(B, qs)),
                 (lobc.parse_decimal(a, ps), lobc.parse_decimal(A, qs))], 1, False)

    def _on_ticker(self, data, stream):
        i = self._symbol(data, stream)
        if i is None:
            return _UNKNOWN
        try:
            u = _int(data["u"], "u")
            exch = _ms_of(data.get("E"), "E")
            bid = self._pair(self.levels.prepare_one(data["b"], data["B"]))
            ask = self._pair(self.levels.prepare_one(data["a"], data["A"]))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            self.count_malformed("bookTicker")  # (the book is not touched: go on)
            return None
        return i, BN_TICKER, u, 0, 0, exch, [bid, ask], 1, False

    # ------------------------------------------------------------ malformed input

    _SYM_RE = re.compile(r'"stream"\s*:\s*"([A-Za-z0-9_.\-]+)@|"s"\s*:\s*"([A-Za-z0-9_.\-]+)"')
    _KIND_RE = re.compile(r'"stream"\s*:\s*"[A-Za-z0-9_.\-]+@([A-Za-z]+)|"e"\s*:\s*"([A-Za-z]+)"')
    OTHER_STREAMS = ("trade", "aggTrade", "bookTicker")  # streams whose loss costs no book

    def count_malformed(self, kind: str) -> None:
        """Count a malformed message (or line) of this kind: depth, trade, aggTrade,
        bookTicker, snapshot, unknown (nothing tells), line (not `<recv ns> <message>`),
        control (one of a --raw file's own lines)."""
        self._counts["malformed"] += 1
        self._malformed_by[kind] = self._malformed_by.get(kind, 0) + 1

    def _malformed(self, raw, recv_ns, err):
        """An undecodable message: one of a trade or ticker stream (its stream name or "e"
        says so) is counted, and costs no book; any other is GAP(malformed) for the symbol it
        names, else for every symbol."""
        text = raw if isinstance(raw, str) else (bytes(raw).decode("utf-8", "replace")
                                                 if isinstance(raw, (bytes, bytearray, memoryview)) else "")
        k = self._KIND_RE.search(text[:400]) if text else None
        kind = (k.group(1) or k.group(2)) if k else None
        if kind in self.OTHER_STREAMS:
            self.count_malformed(kind)
            return
        kind = "depth" if kind is not None and kind.startswith("depth") else "unknown"
        i = None
        m = self._SYM_RE.search(text[:400]) if text else None
        if m:
            i = self._by_name.get((m.group(1) or m.group(2)).upper())
        if i is not None:
            self._malformed_symbol(i, recv_ns, err, kind)
            return
        self.count_malformed(kind)
        for k in range(len(self.symbols)):
            self.core.bad_depth(k, recv_ns)

    def _malformed_symbol(self, i, recv_ns, err, kind: str = "depth"):
        self.count_malformed(kind)
        self.core.bad_depth(i, recv_ns)  # (its buffer dropped: the lost message may sit anywhere in it)


def _reason(v) -> int:
    """A GAP reason from a --raw file's control line (9, damaged, is a reader's, never a capture's)."""
    if type(v) is not int or v not in lobc.GAP_REASONS or v == lobc.GAP_DAMAGED:
        raise ValueError(f"reason {v!r}")
    return v
