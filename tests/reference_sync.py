"""The Binance depth sync machine in pure Python: the reference the machine in C
(csrc/feeds/bnsync.c, driven by lobreplay.binance.sync.DepthSync) is tested against, as
tests/reference_book.py is for the matching core. It takes the same calls (feed, feed_depth,
feed_snapshot, snapshot_failed, disconnected, end_file) and gives the same records, events,
stats and symbol_stats, written the simple way: one Python object per buffered event, records
gathered in runs and built with numpy at take_records().

This was lobreplay.binance.sync.DepthSync until the machine moved to C; the rules are in
lobreplay/binance/sync.py's docstring and docs/binance.md."""
from __future__ import annotations

import re
from collections import deque

import numpy as np

from lobreplay.binance.sync import (ASK, BID, MARKETS, MAX_MS, MS, SPOT, TRADE_FLAG_AGG, U64_MAX, Levels, Malformed,
                                    _int, _ms, decode_json)
from lobreplay.l2 import lobc
from lobreplay.l2.lobc import (DIFF_BEGIN, DIFF_END, DIFF_LEVEL, GAP, GAP_DISCONNECT, GAP_MALFORMED, GAP_RATE_LIMIT,
                            GAP_ROTATE, GAP_SEQUENCE, GAP_STALE_SNAPSHOT, RECORD_DTYPE, RESYNC, SNAPSHOT_BEGIN,
                            SNAPSHOT_END, SNAPSHOT_LEVEL, TICKER_ASK, TICKER_BID, TRADE)

# A "run": `count` records sharing every field but price/qty; mode 0 = price/qty 0,
# 1 = decimal strings queued for the vectorised parser, 2 = integers already parsed.
_RUN_DTYPE = np.dtype([("kind", "u1"), ("side", "u1"), ("symbol", "<u2"), ("flags", "<u4"), ("recv_ns", "<i8"),
                       ("exch_ns", "<i8"), ("first_id", "<u8"), ("last_id", "<u8"), ("prev_id", "<u8"),
                       ("count", "<i8"), ("mode", "u1")])
_COPY = ("kind", "side", "symbol", "flags", "recv_ns", "exch_ns", "first_id", "last_id", "prev_id")


class RecordBuffer:
    """Records in order, built in bulk: per-record Python work is one tuple per run.
    A run's prices and quantities are strings for the vectorised parser (mode 1), integers
    (mode 2), or an int64 (n, 2) array of price, qty (mode 3: from the C decoder)."""

    def __init__(self, levels: Levels):
        self.levels = levels
        self.runs = []
        self.fast = []
        self.slow = []
        self.arrays = []
        self.n = 0

    def single(self, kind, symbol, recv_ns, *, exch_ns=0, first_id=0, last_id=0, prev_id=0, side=0, flags=0,
               price=0, qty=0):
        mode = 0
        if price or qty:
            mode = 2
            self.slow += (price, qty)
        self.runs.append((kind, side, symbol, flags, recv_ns, exch_ns, first_id, last_id, prev_id, 1, mode))
        self.n += 1

    def run(self, kind, side, symbol, recv_ns, exch_ns, prepared, first_id=0, last_id=0, prev_id=0, flags=0):
        mode, vals, n = prepared
        if not n:
            return
        if mode == 1:
            self.fast += vals
        elif mode == 3:
            self.arrays.append(vals)
        else:
            self.slow += vals
        self.runs.append((kind, side, symbol, flags, recv_ns, exch_ns, first_id, last_id, prev_id, n, mode))
        self.n += n

    def take(self) -> np.ndarray:
        if not self.runs:
            return np.empty(0, RECORD_DTYPE)
        runs = np.array(self.runs, dtype=_RUN_DTYPE)
        counts = runs["count"]
        # a record per run with the fields its records share, then each repeated count times
        # (whole records: one copy, not a repeat and a strided write per field)
        out = np.zeros(len(runs), RECORD_DTYPE)
        for f in _COPY:
            out[f] = runs[f]
        simple = bool((counts == 1).all())
        if not simple:
            out = np.repeat(out, counts)
        modes = runs["mode"] if simple else np.repeat(runs["mode"], counts)
        if self.fast or self.slow or self.arrays:
            vals = np.zeros((len(out), 2), np.int64)
            if self.fast:
                vals[modes == 1] = self.levels.parse_fast(self.fast)
            if self.slow:
                vals[modes == 2] = np.array(self.slow, dtype=np.int64).reshape(-1, 2)
            if self.arrays:
                vals[modes == 3] = np.concatenate(self.arrays) if len(self.arrays) > 1 else self.arrays[0]
            out["price"] = vals[:, 0]
            out["qty"] = vals[:, 1]
        self.runs, self.fast, self.slow, self.arrays, self.n = [], [], [], [], 0
        return out


# ---------------------------------------------------------------- the state machine

# bookTicker envelopes as Binance sends them (spot: no e/T/E; USD-M: e first, T and E last);
# anything else goes through the JSON path.
_TICKER_RE = re.compile(
    r'\{"stream":"([a-z0-9_\-]+@bookTicker)","data":\{(?:"e":"bookTicker",)?"u":([0-9]{1,20}),'
    r'"s":"([A-Z0-9_\-]+)","b":"([0-9.]+)","B":"([0-9.]+)","a":"([0-9.]+)","A":"([0-9.]+)"'
    r'(?:,"T":([0-9]{1,15}),"E":([0-9]{1,15}))?\}\}[ \t\r\n]*')

BUFFERING, LIVE = 0, 1


class _Event:
    __slots__ = ("U", "u", "pu", "exch_ns", "recv_ns", "bids", "asks")

    def __init__(self, U, u, pu, exch_ns, recv_ns, bids, asks):
        self.U, self.u, self.pu, self.exch_ns, self.recv_ns, self.bids, self.asks = U, u, pu, exch_ns, recv_ns, bids, asks


class _Snapshot:
    __slots__ = ("L", "exch_ns", "recv_ns", "bids", "asks")

    def __init__(self, L, exch_ns, recv_ns, bids, asks):
        self.L, self.exch_ns, self.recv_ns, self.bids, self.asks = L, exch_ns, recv_ns, bids, asks


class _Sym:
    __slots__ = ("index", "name", "state", "buffer", "snapshot", "last_u", "requested", "gap_open",
                 "last_gap", "fresh", "synced", "stats")

    def __init__(self, index, name):
        self.index, self.name = index, name
        self.state = BUFFERING
        self.buffer = deque()
        self.snapshot = None
        self.last_u = 0
        self.requested = False
        self.gap_open = False  # a GAP was written and no RESYNC since
        self.last_gap = 0
        self.fresh = False     # a depth event arrived since the last GAP
        self.synced = 0        # times synced (first sync + resyncs)
        self.stats = {"depth": 0, "applied": 0, "dropped_covered": 0, "duplicates": 0, "gaps": 0, "resyncs": 0,
                      "first_L": None, "snapshots": 0, "snapshots_stale": 0, "snapshots_unused": 0}


class ReferenceDepthSync:
    """Every symbol of one capture (see the module docstring)."""

    def __init__(self, market: str, symbols, *, price_scale: int = lobc.DEFAULT_SCALE,
                 qty_scale: int = lobc.DEFAULT_SCALE, max_buffer: int = 50_000):
        if market not in MARKETS:
            raise ValueError(f"market must be one of {MARKETS}, got {market!r}")
        self.market = market
        self.spot = market == SPOT
        self.symbols = [str(s).upper() for s in symbols]
        if not self.symbols:
            raise ValueError("at least one symbol")
        self.syms = [_Sym(i, s) for i, s in enumerate(self.symbols)]
        self._buffering = set(self.syms)  # the symbols whose state is BUFFERING
        self._by_name = {s.name: s for s in self.syms}
        self._by_stream = {}
        self.levels = Levels(price_scale, qty_scale)
        self.out = RecordBuffer(self.levels)
        self.max_buffer = max_buffer
        self.events = []
        self.stats = {"messages": 0, "depth": 0, "trades": 0, "tickers": 0, "snapshots": 0, "ignored": 0,
                      "unknown_symbol": 0, "malformed": 0, "shutdowns": 0, "gaps": 0, "resyncs": 0,
                      "gaps_by_reason": {}, "diff_levels": 0, "snapshot_levels": 0,
                      "malformed_by_stream": {}}  # what each malformed message was (count_malformed)

    # ------------------------------------------------------------ driver API

    def take_records(self) -> np.ndarray:
        return self.out.take()

    @property
    def pending_records(self) -> int:
        return self.out.n

    def snapshot_wanted(self) -> list[str]:
        # (asked after every message of a capture: only the symbols not live are looked at)
        if not self._buffering:
            return []
        return [s.name for s in sorted(self._buffering, key=lambda s: s.index)
                if s.state == BUFFERING and s.buffer and s.snapshot is None and not s.requested]

    def mark_requested(self, symbol: str) -> None:
        self._by_name[symbol.upper()].requested = True

    def is_live(self, symbol: str) -> bool:
        return self._by_name[symbol.upper()].state == LIVE

    def symbol_stats(self) -> dict:
        return {s.name: dict(s.stats, live=s.state == LIVE, synced=s.synced, last_u=s.last_u) for s in self.syms}

    def feed(self, raw, recv_ns: int) -> None:
        """One websocket message (str/bytes JSON text, or an already decoded dict)."""
        self.stats["messages"] += 1
        try:
            if type(raw) is not dict:
                if type(raw) is not str:
                    raw = bytes(raw).decode("utf-8")
                if raw.startswith('{"stream":"') and "@bookTicker" in raw[:64]:
                    m = _TICKER_RE.fullmatch(raw)
                    if m is not None and self._fast_ticker(m, recv_ns):
                        return
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
                self._on_depth(data, stream, recv_ns)
            elif e == "trade":
                self._on_trade(data, stream, recv_ns, agg=False)
            elif e == "aggTrade":
                self._on_trade(data, stream, recv_ns, agg=True)
            elif e == "bookTicker" or (e is None and "A" in data and "u" in data and "b" in data):
                self._on_ticker(data, stream, recv_ns)
            elif e == "serverShutdown":
                self.stats["shutdowns"] += 1
                self.events.append(("shutdown", None))
            elif stream is not None and stream.endswith("@depthSnapshot"):
                # our --raw files: a REST snapshot wrapped with its symbol
                self.stats["messages"] -= 1
                self.feed_snapshot(stream.split("@", 1)[0], data, recv_ns)
            elif stream is None and "lastUpdateId" in data and "bids" in data:
                # a bare REST snapshot body (hftbacktest recordings)
                self.stats["messages"] -= 1
                self.feed_snapshot(None, data, recv_ns)
            else:
                self.stats["ignored"] += 1  # kline, partial depth, subscription replies, ...
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError) as err:
            self._malformed(raw, recv_ns, err)

    def feed_depth(self, stream, s, U, u, pu, exch_ms, recv_ns: int, bids: np.ndarray, asks: np.ndarray) -> None:
        """A depthUpdate message that the C decoder (lobreplay.core._coreapi.bn_decode) took: the
        same as feed() of its text. stream: the envelope's stream name (None: no envelope),
        s: its "s" (None: none), pu: 0 on spot, exch_ms: E (-1: none), bids and asks: int64
        (n, 2) arrays of price, qty. The decoder took only well-formed messages (U <= u,
        every field in range, every decimal within the scales)."""
        self.stats["messages"] += 1
        st = self._symbol_of(s, stream)
        if st is None:
            self.stats["unknown_symbol"] += 1
            return
        self._depth_event(st, U, u, pu, exch_ms * MS if exch_ms >= 0 else 0, recv_ns,
                          (3, bids, len(bids)), (3, asks, len(asks)))

    def feed_snapshot(self, symbol, body, recv_ns: int) -> None:
        """A REST depth snapshot body (text or dict) for `symbol` (None: the one waiting for it)."""
        self.stats["snapshots"] += 1
        st = None
        try:
            if symbol is not None:
                st = self._by_name.get(str(symbol).upper())
                if st is None:
                    self.stats["unknown_symbol"] += 1
                    return
            data = body if type(body) is dict else decode_json(body)
            if type(data) is not dict:
                raise Malformed("snapshot: not a JSON object")
            L = _int(data["lastUpdateId"], "lastUpdateId")
            exch = _ms(data.get("E"), "E")
            bids = self.levels.prepare(data["bids"])
            asks = self.levels.prepare(data["asks"])
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError):
            self.count_malformed("snapshot")
            targets = [st] if st is not None else [s for s in self.syms if s.state == BUFFERING and s.requested]
            for s in targets or self.syms:
                s.requested = False
                self._gap(s, recv_ns, GAP_MALFORMED, s.last_u, 0)
                self._lose(s)
            return
        if st is None:
            st = self._guess_snapshot_symbol(L)
            if st is None:
                self.stats["unknown_symbol"] += 1
                return
        st.requested = False
        st.stats["snapshots"] += 1
        if st.state == LIVE:
            st.stats["snapshots_unused"] += 1
            return
        st.snapshot = _Snapshot(L, exch, recv_ns, bids, asks)
        self._try_sync(st)

    def snapshot_failed(self, symbol: str, recv_ns: int, reason: int = GAP_RATE_LIMIT) -> None:
        """The snapshot request for `symbol` failed (429/418: reason GAP_RATE_LIMIT). The
        symbol keeps buffering; the driver retries. One GAP per reason until the next sync."""
        st = self._by_name.get(str(symbol).upper())
        if st is None:  # (a raw file converted for some of its symbols)
            return
        if not (st.gap_open and st.last_gap == reason):
            self._gap(st, recv_ns, reason, st.last_u if st.state == LIVE else 0, 0)

    def disconnected(self, recv_ns: int, reason: int = GAP_DISCONNECT, symbols=None) -> None:
        """The connection carrying `symbols` (default all) ended; what was buffered is
        dropped and each symbol syncs again from the new connection's events. A GAP is
        written for a symbol that had received depth events since its last GAP."""
        targets = self.syms if symbols is None else [st for st in map(self._by_name.get, map(str.upper, symbols))
                                                     if st is not None]  # (others: not converted)
        for st in targets:
            if st.fresh or st.state == LIVE:
                self._gap(st, recv_ns, reason, st.last_u + (1 if self.spot else 0) if st.state == LIVE else 0, 0)
            self._lose(st)
            st.buffer.clear()
            st.requested = False

    def end_file(self, recv_ns: int) -> None:
        """The capture moves on to its next file (capture --rotate): a GAP (GAP_ROTATE) for
        each symbol that had received depth events since its last GAP, then every symbol
        starts again as in a new capture (buffering, no open gap), so that the next file's
        records stand on their own: a snapshot per symbol, no RESYNC."""
        self.disconnected(recv_ns, GAP_ROTATE)
        for st in self.syms:
            st.gap_open = False
            st.fresh = False

    # ------------------------------------------------------------ messages

    def _symbol(self, data, stream):
        return self._symbol_of(data.get("s"), stream)

    def _symbol_of(self, s, stream):
        if stream is not None:
            st = self._by_stream.get(stream)
            if st is None:
                st = self._by_name.get(stream.split("@", 1)[0].upper())
                if st is not None:
                    self._by_stream[stream] = st
            if st is not None:
                return st
        if type(s) is str:
            return self._by_name.get(s.upper())
        return None

    def _on_depth(self, data, stream, recv_ns):
        st = self._symbol(data, stream)
        if st is None:
            self.stats["unknown_symbol"] += 1
            return
        try:
            U = _int(data["U"], "U")
            u = _int(data["u"], "u")
            if U > u:
                raise Malformed(f"U {U} > u {u}")
            pu = 0 if self.spot else _int(data["pu"], "pu")
            exch = _ms(data.get("E"), "E")
            bids = self.levels.prepare(data["b"])
            asks = self.levels.prepare(data["a"])
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as err:
            self._malformed_symbol(st, recv_ns, err)
            return
        self._depth_event(st, U, u, pu, exch, recv_ns, bids, asks)

    def _depth_event(self, st, U, u, pu, exch, recv_ns, bids, asks):
        self.stats["depth"] += 1
        st.stats["depth"] += 1
        st.fresh = True
        ev = _Event(U, u, pu, exch, recv_ns, bids, asks)
        if st.state == LIVE:
            if u <= st.last_u:
                st.stats["duplicates"] += 1
                return
            if (U == st.last_u + 1) if self.spot else (pu == st.last_u):
                self._emit_diff(st, ev)
                return
            if self.spot:
                self._gap(st, recv_ns, GAP_SEQUENCE, st.last_u + 1, U)
            else:
                self._gap(st, recv_ns, GAP_SEQUENCE, st.last_u, pu)
            self._lose(st)
            st.buffer.append(ev)
            return
        buf = st.buffer
        buf.append(ev)
        if len(buf) > self.max_buffer:
            buf.popleft()
        if st.snapshot is not None:
            self._try_sync(st)

    def _on_trade(self, data, stream, recv_ns, agg):
        st = self._symbol(data, stream)
        if st is None:
            self.stats["unknown_symbol"] += 1
            return
        try:
            if agg:
                first, last = _int(data["f"], "f"), _int(data["l"], "l")
            else:
                first = last = _int(data["t"], "t")
            m = data["m"]
            if type(m) is not bool:
                raise Malformed("field m: expected true/false")
            exch = _ms(data.get("T"), "T")
            prep = self.levels.prepare_one(data["p"], data["q"])
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as err:
            self.count_malformed("aggTrade" if agg else "trade")  # (the book is not touched: go on)
            return
        self.stats["trades"] += 1
        self.out.run(TRADE, ASK if m else BID, st.index, recv_ns, exch, prep, first, last, 0,
                     TRADE_FLAG_AGG if agg else 0)

    def _fast_ticker(self, m, recv_ns) -> bool:
        """A bookTicker envelope of the usual shape, matched by _TICKER_RE (same result as the
        JSON path; False: let the JSON path handle it)."""
        stream, u, _s, b, B, a, A, _T, E = m.groups()
        st = self._by_stream.get(stream)
        if st is None:
            return False
        fast = self.levels._fast_one
        if not (fast(b + "," + B) and fast(a + "," + A)):
            return False
        u = int(u)
        if u > U64_MAX or (E is not None and int(E) > MAX_MS):  # the JSON path refuses them
            return False
        exch = int(E) * MS if E is not None else 0
        self.stats["tickers"] += 1
        self.out.run(TICKER_BID, BID, st.index, recv_ns, exch, (1, [b, B], 1), u)
        self.out.run(TICKER_ASK, ASK, st.index, recv_ns, exch, (1, [a, A], 1), u)
        return True

    def _on_ticker(self, data, stream, recv_ns):
        st = self._symbol(data, stream)
        if st is None:
            self.stats["unknown_symbol"] += 1
            return
        try:
            u = _int(data["u"], "u")
            exch = _ms(data.get("E"), "E")
            bid = self.levels.prepare_one(data["b"], data["B"])
            ask = self.levels.prepare_one(data["a"], data["A"])
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as err:
            self.count_malformed("bookTicker")  # (the book is not touched: go on)
            return
        self.stats["tickers"] += 1
        self.out.run(TICKER_BID, BID, st.index, recv_ns, exch, bid, u)
        self.out.run(TICKER_ASK, ASK, st.index, recv_ns, exch, ask, u)

    # ------------------------------------------------------------ sync

    def _guess_snapshot_symbol(self, L):
        if len(self.syms) == 1:
            return self.syms[0]
        waiting = [s for s in self.syms if s.state == BUFFERING and s.snapshot is None and s.buffer]
        if not waiting:
            return None
        if len(waiting) == 1:
            return waiting[0]
        # the symbol whose buffered range [first U, last u] contains L, else the nearest
        def dist(s):
            lo, hi = s.buffer[0].U, s.buffer[-1].u
            return 0 if lo - 1 <= L <= hi else min(abs(L - lo), abs(L - hi))
        return min(waiting, key=dist)

    def _try_sync(self, st):
        snap = st.snapshot
        buf = st.buffer
        if not buf:
            return  # hold the snapshot until an event comes
        L = snap.L
        U0 = buf[0].U
        if (L + 1 < U0) if self.spot else (L < U0):
            st.stats["snapshots_stale"] += 1
            self._gap(st, snap.recv_ns, GAP_STALE_SNAPSHOT, L + 1 if self.spot else L, U0)
            st.snapshot = None  # the buffer stays; snapshot_wanted() asks again
            return
        if self.spot:
            while buf and buf[0].u <= L:
                buf.popleft()
                st.stats["dropped_covered"] += 1
        else:
            while buf and buf[0].u < L:
                buf.popleft()
                st.stats["dropped_covered"] += 1
        if not buf:
            return
        first = buf[0]
        if not ((first.U <= L + 1 <= first.u) if self.spot else (first.U <= L <= first.u)):
            # the buffer itself has a hole after L
            self._gap(st, first.recv_ns, GAP_SEQUENCE, L + 1 if self.spot else L, first.U)
            st.snapshot = None
            return
        # synced: the snapshot, RESYNC if this follows a GAP, then the buffered events
        o = self.out
        i = st.index
        o.single(SNAPSHOT_BEGIN, i, snap.recv_ns, exch_ns=snap.exch_ns, first_id=L)
        o.run(SNAPSHOT_LEVEL, BID, i, snap.recv_ns, snap.exch_ns, snap.bids)
        o.run(SNAPSHOT_LEVEL, ASK, i, snap.recv_ns, snap.exch_ns, snap.asks)
        o.single(SNAPSHOT_END, i, snap.recv_ns, exch_ns=snap.exch_ns, first_id=L)
        self.stats["snapshot_levels"] += snap.bids[2] + snap.asks[2]
        if st.gap_open:
            o.single(RESYNC, i, snap.recv_ns, first_id=L)
            st.gap_open = False
            st.stats["resyncs"] += 1
            self.stats["resyncs"] += 1
            self.events.append(("resync", st.name, L))
        self.events.append(("synced", st.name, L))
        if st.stats["first_L"] is None:
            st.stats["first_L"] = L
        st.synced += 1
        st.state = LIVE
        self._buffering.discard(st)
        st.snapshot = None
        st.last_u = L
        self._emit_diff(st, buf.popleft())
        while buf:
            ev = buf.popleft()
            if ev.u <= st.last_u:
                st.stats["duplicates"] += 1
                continue
            if (ev.U == st.last_u + 1) if self.spot else (ev.pu == st.last_u):
                self._emit_diff(st, ev)
                continue
            if self.spot:
                self._gap(st, ev.recv_ns, GAP_SEQUENCE, st.last_u + 1, ev.U)
            else:
                self._gap(st, ev.recv_ns, GAP_SEQUENCE, st.last_u, ev.pu)
            self._lose(st)
            buf.appendleft(ev)
            return

    def _emit_diff(self, st, ev):
        o = self.out
        i = st.index
        o.single(DIFF_BEGIN, i, ev.recv_ns, exch_ns=ev.exch_ns, first_id=ev.U, last_id=ev.u, prev_id=ev.pu)
        o.run(DIFF_LEVEL, BID, i, ev.recv_ns, ev.exch_ns, ev.bids)
        o.run(DIFF_LEVEL, ASK, i, ev.recv_ns, ev.exch_ns, ev.asks)
        o.single(DIFF_END, i, ev.recv_ns, exch_ns=ev.exch_ns, first_id=ev.U, last_id=ev.u)
        st.last_u = ev.u
        st.stats["applied"] += 1
        self.stats["diff_levels"] += ev.bids[2] + ev.asks[2]

    def _lose(self, st):
        """The book of st is unknown from here: buffer again, ask for a snapshot."""
        st.state = BUFFERING
        self._buffering.add(st)
        st.snapshot = None

    def _gap(self, st, recv_ns, reason, expected, received):
        self.out.single(GAP, st.index, recv_ns, first_id=expected, last_id=received, flags=reason)
        st.gap_open = True
        st.last_gap = reason
        st.fresh = False
        st.stats["gaps"] += 1
        self.stats["gaps"] += 1
        g = self.stats["gaps_by_reason"]
        name = lobc.GAP_REASONS[reason]
        g[name] = g.get(name, 0) + 1
        self.events.append(("gap", st.name, reason))

    # ------------------------------------------------------------ malformed input

    _SYM_RE = re.compile(r'"stream"\s*:\s*"([A-Za-z0-9_.\-]+)@|"s"\s*:\s*"([A-Za-z0-9_.\-]+)"')
    _KIND_RE = re.compile(r'"stream"\s*:\s*"[A-Za-z0-9_.\-]+@([A-Za-z]+)|"e"\s*:\s*"([A-Za-z]+)"')
    OTHER_STREAMS = ("trade", "aggTrade", "bookTicker")  # streams whose loss costs no book

    def count_malformed(self, kind: str) -> None:
        """Count a malformed message (or line) of this kind: depth, trade, aggTrade,
        bookTicker, snapshot, unknown (nothing tells), line (not `<recv ns> <message>`),
        control (one of a --raw file's own lines)."""
        self.stats["malformed"] += 1
        by = self.stats["malformed_by_stream"]
        by[kind] = by.get(kind, 0) + 1

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
        st = None
        m = self._SYM_RE.search(text[:400]) if text else None
        if m:
            st = self._by_name.get((m.group(1) or m.group(2)).upper())
        if st is not None:
            self._malformed_symbol(st, recv_ns, err, kind)
            return
        self.count_malformed(kind)
        for s in self.syms:
            self._gap(s, recv_ns, GAP_MALFORMED, s.last_u if s.state == LIVE else 0, 0)
            self._lose(s)
            s.buffer.clear()

    def _malformed_symbol(self, st, recv_ns, err, kind: str = "depth"):
        self.count_malformed(kind)
        self._gap(st, recv_ns, GAP_MALFORMED, st.last_u if st.state == LIVE else 0, 0)
        self._lose(st)
        st.buffer.clear()  # the lost message may sit anywhere in the buffered range
