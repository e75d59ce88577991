"""The Python implementation of the L2 replay (lobreplay.l2.ladder before its per-record work
moved into C, csrc/feeds/l2.c), kept as the slow reference: tests/l2/test_l2_differential.py
compares the C path's rows, counters and books against it, on the real recordings and on
generated streams. Its own docstring follows.

L2 (price level) feeds -> matching-core events (docs/l2.md).

An L2 feed publishes the total quantity at each price, never the orders, so
the book of a symbol holds one synthetic order per (side, price) level, with
an id derived from the symbol, the side and the level: a level that appears
is a NEW (GTC, FEED), one that shrinks a REDUCE (FEED), one that grows a
REPLACE (same id, same price, FEED), one that goes to zero a CANCEL. A zero
for a level that is not in the book is normal (Binance says so) and counted.

Records come from .lobc files (lobreplay.l2.lobc). One diff message (DIFF_BEGIN
.. DIFF_END) is applied as a unit: its removals and reductions first, then its
additions, so a message that moves the touch from one side to the other never
crosses the book half way. A snapshot (SNAPSHOT_BEGIN .. END) is applied as a
message that also removes every level it does not hold. Many messages are
turned into events with numpy and applied in one core call; the book state
the conversion needs (the quantity of each level) is mirrored in a dense
array indexed by level. When the core finds stale levels (an addition that
crosses the other side: the core removes them, see docs/core.md "Feed
replays"), the levels it removed make the precomputed events of later
messages wrong, so the symbol is put back as it was before the call and its
messages are applied again one by one (and a message that touches the
levels it crossed, event by event): exact, and rare.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lobreplay.l2 import lobc
from lobreplay.core.book import Session
from lobreplay.core.events import EVENT_DTYPE, TIF, Cause, Flag, Kind, Side, Status
# the sizing both implementations take, and their shared constants
from lobreplay.l2.ladder import _I64, _LEVEL, MAX_GRID_LEVELS, MAX_MESSAGE, ORDER_SYMBOL_SHIFT, BookSizing, _cat  # noqa: F401

__all__ = ["BookSizing", "scan", "L2Replay", "ORDER_SYMBOL_SHIFT", "MAX_GRID_LEVELS"]

NONE, SYNCED, GAPPED = 0, 1, 2     # symbol states
STATE_SKIP_CAUSE = {NONE: "update_before_snapshot", GAPPED: "unsynced_update_skipped"}


def _valid_levels(rec: np.ndarray) -> np.ndarray:
    k = rec["kind"]
    return (((k == lobc.DIFF_LEVEL) | (k == lobc.SNAPSHOT_LEVEL)) & ((rec["side"] == ord("B")) | (rec["side"] == ord("S")))
            & (rec["price"] > 0) & (rec["qty"] >= 0))


def scan(records: np.ndarray, symbols: list[str], *, headroom: float = 0.2, mode: str = "auto",
         max_grid_levels: int = MAX_GRID_LEVELS, only: set[int] | None = None,
         max_message: int = MAX_MESSAGE) -> dict[int, BookSizing]:
    """Pass 1: a book size for every symbol of `symbols` with a snapshot or diff message.
    Prices: every level price seen; tick = their gcd; band = their range
    widened by headroom (grid), or the prices themselves (ladder: mode
    "ladder", or "auto" when the grid would exceed max_grid_levels).
    Capacity: the peak number of live levels, applying the level records in
    file order, a zero only where pass 2 applies it (_applied_levels; snapshots
    only add: an upper bound), plus slack. (Changed since the Python replay: it
    applied every zero, and sized a book for a symbol index beyond `symbols`.)"""
    if mode not in ("auto", "grid", "ladder"):
        raise ValueError(f"mode: expected auto, grid or ladder, got {mode!r}")
    at = np.flatnonzero(records["symbol"] < len(symbols))  # the others: unknown_symbol, no book
    records = records[at]
    k = records["kind"]
    with_book = np.unique(records["symbol"][(k == lobc.DIFF_BEGIN) | (k == lobc.SNAPSHOT_BEGIN)]).tolist()
    valid = _valid_levels(records)
    lv = records[valid & ((records["qty"] > 0) | _applied_levels(records, at, max_message))]
    sb = lv["symbol"].astype(_I64) * 2 + (lv["side"] == ord("S"))
    price, qty = lv["price"], lv["qty"]
    order = np.lexsort((np.arange(len(lv)), price, sb))
    s_sb, s_p, s_q = sb[order], price[order], qty[order]
    same = np.zeros(len(lv), bool)
    same[1:] = (s_sb[1:] == s_sb[:-1]) & (s_p[1:] == s_p[:-1])
    prev = np.zeros(len(lv), _I64)
    prev[1:] = s_q[:-1]
    prev[~same] = 0
    delta = np.empty(len(lv), _I64)
    delta[order] = (s_q > 0).astype(_I64) - (prev > 0)
    out = {}
    every = records[valid]  # prices: of every valid level record
    for s in with_book:
        if only is not None and s not in only:
            continue
        m = lv["symbol"] == s
        prices = np.unique(every["price"][every["symbol"] == s])
        peak = int(np.cumsum(delta[m]).max(initial=0))
        peak = min(peak, 2 * len(prices))
        cap = max(16, peak + max(16, peak // 8))
        name = symbols[s] if s < len(symbols) else str(s)
        sz = None
        if len(prices) and mode != "ladder":
            tick = int(np.gcd.reduce(prices))
            lo, hi = int(prices[0]), int(prices[-1])
            for pad in (int(headroom * (hi - lo)) // tick * tick, 0):
                low, high = max(tick, lo - pad), hi + pad
                low -= (low - lo) % tick  # stay on the grid of the prices
                if mode == "grid" or (high - low) // tick + 1 <= max_grid_levels:
                    sz = BookSizing(s, name, prices, "grid", low, high, tick, cap, peak)
                    break
        if sz is None:
            sz = BookSizing(s, name, prices, "ladder", 0, max(0, len(prices) - 1), 1, cap, peak)
        if sz.levels >= 1 << 46:
            raise ValueError(f"{name}: {sz.levels} levels do not fit the synthetic order ids")
        out[s] = sz
    return out


def _applied_levels(rec: np.ndarray, at: np.ndarray, max_message: int) -> np.ndarray:
    """Which records are level records pass 2 applies (every symbol index known; at: their
    positions among all the records): those of a whole message (BEGIN, its symbol's levels of
    its kind among other symbols' ones, its END, with at most max_message records between
    them, those of unknown symbols included) that is a snapshot, or a diff while its symbol is
    synced: after a RESYNC, or after its first whole snapshot when no GAP or RESYNC came
    before."""
    n = len(rec)
    k = rec["kind"]
    sym = rec["symbol"].astype(_I64)
    pos = np.arange(n, dtype=_I64)
    is_begin = (k == lobc.DIFF_BEGIN) | (k == lobc.SNAPSHOT_BEGIN)
    begins = pos[is_begin]
    nxt = np.full(len(begins), n, _I64)
    for bk in (lobc.DIFF_BEGIN, lobc.SNAPSHOT_BEGIN):
        sel = k[begins] == bk
        not_level = pos[k != _LEVEL[bk]]
        j = np.searchsorted(not_level, begins[sel], side="right")
        nxt[sel] = np.where(j < len(not_level), not_level[np.minimum(j, max(len(not_level) - 1, 0))], n)
    nn = np.minimum(nxt, max(n - 1, 0))
    whole = (nxt < n) & (k[nn] == k[begins] + 2) & (sym[nn] == sym[begins]) & (at[nn] - at[begins] - 1 <= max_message)
    go = whole & (k[begins] == lobc.SNAPSHOT_BEGIN)
    snaps = begins[go]
    ctrl = pos[(k == lobc.GAP) | (k == lobc.RESYNC)]
    for s in np.unique(sym[begins]).tolist():
        d = np.flatnonzero(whole & (k[begins] == lobc.DIFF_BEGIN) & (sym[begins] == s))
        c = ctrl[sym[ctrl] == s]
        j = np.searchsorted(c, begins[d])  # the GAP/RESYNC before each diff, if any
        last = c[np.maximum(j - 1, 0)] if len(c) else np.zeros(len(d), _I64)
        snap_before = np.searchsorted(snaps[sym[snaps] == s], begins[d]) > 0
        go[d] = np.where(j > 0, k[last] == lobc.RESYNC, snap_before)
    applied = np.zeros(n + 1, bool)
    # the levels between each applied BEGIN and its END, of its symbol
    owner = np.full(n + 1, -1, _I64)
    starts = begins[go]
    if len(starts):
        mark = np.zeros(n + 1, _I64)
        np.add.at(mark, starts + 1, 1)
        np.add.at(mark, nxt[go], -1)
        inside = np.cumsum(mark)[:n] > 0
        own = np.maximum.accumulate(np.where(is_begin, pos, -1))
        applied[:n] = inside & (sym == sym[np.maximum(own, 0)])
    return applied[:n] & _valid_levels(rec)


@dataclass
class Counters:
    messages_applied: int = 0
    snapshots_applied: int = 0
    levels_applied: int = 0
    events: dict = field(default_factory=lambda: {k.name: 0 for k in (Kind.NEW, Kind.CANCEL, Kind.REDUCE,
                                                                       Kind.REPLACE)})
    unchanged_levels: int = 0
    zero_qty_unknown_level: int = 0
    messages_skipped: dict = field(default_factory=dict)
    levels_skipped: int = 0
    desyncs: dict = field(default_factory=dict)
    trades: int = 0
    tickers: int = 0
    bbo_changes: int = 0
    rollbacks: int = 0
    sequential_messages: int = 0
    core_seconds: float = 0.0
    core_events: int = 0


class L2Replay:
    """Replays .lobc records through one core Session (one book per symbol).

    feed(records) takes records in file order, in batches of any size (a
    message cut by the batch end waits for the next batch), and returns the
    report rows it produced: dict name -> dict of columns ("bbo", "desyncs",
    "trades", "ticker_points"). finish() at the end. levels(symbol) and
    best(symbol) give the book in feed units."""

    def __init__(self, sizing: dict[int, BookSizing], symbols: list[str], *, timing: bool = False,
                 ticker_history: int = 1 << 16, compare_tickers: bool = True, market: str | None = None,
                 max_message: int = MAX_MESSAGE):
        assert market in (None, "spot", "usdm")
        self.max_message = max_message  # a message with more records between BEGIN and END: incomplete
        self.market = market  # the update-id rule diff messages are checked by (None: not checked)
        self.sizing = sizing
        self.symbols = list(symbols)
        nsym = len(symbols)  # (changed: the Python replay gave a symbol index beyond them a book)
        self.nsym = nsym
        self.session = Session(max(0, max(sizing, default=0)))
        self.base = np.full(nsym, -1, _I64)
        cores, ids, reals = [], [], []
        g = 0
        for s in sorted(sizing):
            z = sizing[s]
            self.session.add_book(s, z.band_low, z.band_high, z.tick, z.capacity)
            self.base[s] = g
            core_p = z.to_core(z.prices)
            level = (core_p - z.band_low) // z.tick
            cores.append(core_p)
            ids.append((np.uint64(s + 1) << np.uint64(ORDER_SYMBOL_SHIFT)) | (level.astype(np.uint64) << np.uint64(1)))
            reals.append(z.prices)
            g += len(z.prices)
        self.g_core = np.concatenate(cores) if cores else np.empty(0, _I64)
        self.g_id = np.concatenate(ids) if ids else np.empty(0, np.uint64)
        self.g_real = np.concatenate(reals) if reals else np.empty(0, _I64)
        self.g_sym = np.repeat(np.array(sorted(sizing), _I64), [len(sizing[s].prices) for s in sorted(sizing)]) \
            if sizing else np.empty(0, _I64)
        self.mq = np.zeros(2 * g, _I64)          # the quantity of each level key (2 * g + is_ask)
        self.state = np.zeros(nsym, np.uint8)
        self.snapshot_id = np.full(nsym, -1, np.int64)   # last snapshot applied since the last GAP (-1: none)
        self.last_u = np.zeros(nsym, np.uint64)
        self.after_snapshot = np.zeros(nsym, bool)      # the last message applied was a snapshot
        self.last_bbo = np.zeros((nsym, 4), _I64)        # bid price, bid qty, ask price, ask qty
        self.per_symbol = {s: {"messages": 0, "desyncs": 0, "skipped": 0} for s in range(nsym)}
        self.counters = Counters()
        self.session.set_timing(timing)
        self.timing = timing
        self.next_index = 0
        self._carry = np.empty(0, lobc.RECORD_DTYPE)
        self._carry_idx = np.empty(0, _I64)
        self._after_bad_begin = False  # the last BEGIN/END fed was an incomplete BEGIN
        # bookTicker comparison state, per symbol
        self.ticker_history = ticker_history
        self.compare_tickers = compare_tickers
        self._tick = {s: np.empty(0, _TICK_DTYPE) for s in range(nsym)}
        self._points = {s: [] for s in range(nsym)}    # pending comparison points (arrays of _POINT_DTYPE)
        self.ticker_stats = {"tickers": 0, "points": 0, "comparable": 0, "matches": 0, "price_matches": 0,
                             "not_comparable": {}}
        self._out: dict[str, list] = {}

    # ------------------------------------------------------------ queries

    def name(self, s: int) -> str:
        return self.symbols[s] if s < len(self.symbols) else str(s)

    def best(self, s: int) -> tuple[int, int, int, int]:
        """(bid price, bid qty, ask price, ask qty) in feed units; 0, 0 for an empty side."""
        if s not in self.sizing:
            return (0, 0, 0, 0)
        v = self.session.book(s)
        z = self.sizing[s]
        out = []
        for side in (Side.BUY, Side.SELL):
            b = v.best(side)
            out += [int(z.from_core(np.array([b[0]]))[0]), int(b[1])] if b else [0, 0]
        return tuple(out)

    def levels(self, s: int) -> tuple[list, list]:
        """Every level of the book of s as ((price, qty) bids best first, (price, qty) asks best first)."""
        if s not in self.sizing:
            return [], []
        v = self.session.book(s)
        z = self.sizing[s]
        res = []
        for side in (Side.BUY, Side.SELL):
            p, q, c = v.depth_arrays(side, 1 << 30)
            assert (c == 1).all(), "one order per level"
            res.append(list(zip(z.from_core(p).tolist(), q.tolist())))
        return res[0], res[1]

    # ------------------------------------------------------------ feeding

    def feed(self, records: np.ndarray) -> dict[str, dict]:
        n = len(records)
        idx = np.arange(self.next_index, self.next_index + n, dtype=_I64)
        self.next_index += n
        if len(self._carry):
            records = np.concatenate([self._carry, records])
            idx = np.concatenate([self._carry_idx, idx])
        cut = _open_tail(records, self.nsym)
        if len(records) - cut - 1 > self.max_message and records["kind"][cut] in _LEVEL:
            cut = len(records)  # (a message already too long: incomplete, not held)
        self._carry, self._carry_idx = records[cut:].copy(), idx[cut:]
        self._out = {}
        if cut:
            self._process(records[:cut], idx[:cut])
        return self._collect()

    def finish(self) -> dict[str, dict]:
        """Ends the replay: an unfinished message at the end is dropped (counted); pending
        bookTicker comparison points are counted as unresolved."""
        self._out = {}
        if len(self._carry):
            r, i = self._carry, self._carry_idx
            self._carry = np.empty(0, lobc.RECORD_DTYPE)
            self._carry_idx = np.empty(0, _I64)
            self._process(r, i)
        for s in range(self.nsym):
            self._drop_points(s, "unresolved_at_end")
        return self._collect()

    def _collect(self) -> dict[str, dict]:
        out = {k: _cat(v) for k, v in self._out.items() if v}
        for k, v in out.items():
            if "record" in v and len(v["record"]):
                o = np.argsort(v["record"], kind="stable")
                out[k] = {c: a[o] for c, a in v.items()}
        self._out = {}
        return out

    def _emit(self, name: str, cols: dict) -> None:
        n = len(next(iter(cols.values())))
        if n:
            self._out.setdefault(name, []).append(cols)

    def _desync(self, rec, idx, pos, cause, *, first_id=None, last_id=None, side=None, price=None, qty=None,
                other_price=None, other_qty=None, symbol=None) -> None:
        """Anomaly rows for records at positions pos (array) with one cause (str or array)."""
        pos = np.asarray(pos, _I64)
        n = len(pos)
        if not n:
            return
        z = np.zeros(n, _I64)
        r = rec[pos]
        sym = r["symbol"].astype(np.uint16) if symbol is None else np.asarray(symbol, np.uint16)
        causes = np.full(n, cause, object) if isinstance(cause, str) else np.asarray(cause, object)
        self._emit("desyncs", {
            "record": idx[pos], "recv_ns": r["recv_ns"], "exch_ns": r["exch_ns"], "symbol": sym, "cause": causes,
            "first_id": r["first_id"] if first_id is None else np.asarray(first_id, np.uint64),
            "last_id": r["last_id"] if last_id is None else np.asarray(last_id, np.uint64),
            "side": r["side"] if side is None else np.asarray(side, np.uint8),
            "price": r["price"] if price is None else np.asarray(price, _I64),
            "qty": r["qty"] if qty is None else np.asarray(qty, _I64),
            "other_price": z if other_price is None else np.asarray(other_price, _I64),
            "other_qty": z if other_qty is None else np.asarray(other_qty, _I64)})
        u, c = np.unique(causes.astype(str), return_counts=True)
        for name, k in zip(u.tolist(), c.tolist()):
            self.counters.desyncs[name] = self.counters.desyncs.get(name, 0) + k
        for s, k in zip(*np.unique(sym, return_counts=True)):
            if int(s) in self.per_symbol:
                self.per_symbol[int(s)]["desyncs"] += int(k)

    # ------------------------------------------------------------ structure

    def _process(self, rec: np.ndarray, idx: np.ndarray) -> None:
        far = rec["symbol"] >= self.nsym
        if far.any():
            self._desync(rec, idx, np.flatnonzero(far), "unknown_symbol")
            rec, idx = rec[~far], idx[~far]
        n = len(rec)
        k = rec["kind"]
        sym = rec["symbol"].astype(_I64)
        pos = np.arange(n, dtype=_I64)
        is_begin = (k == lobc.DIFF_BEGIN) | (k == lobc.SNAPSHOT_BEGIN)
        is_end = (k == lobc.DIFF_END) | (k == lobc.SNAPSHOT_END)
        is_level = (k == lobc.DIFF_LEVEL) | (k == lobc.SNAPSHOT_LEVEL)
        # each level belongs to the nearest BEGIN/END before it, if that is its BEGIN
        mark = np.maximum.accumulate(np.where(is_begin | is_end, pos, -1)) if n else pos
        owner = np.where(is_level, mark, -1)
        okl = is_level & (owner >= 0)
        okl[okl] &= (k[owner[okl]] + 1 == k[okl]) & (sym[owner[okl]] == sym[okl])
        # a group is whole if the first record after its levels is its END, same symbol (and ids)
        begins = pos[is_begin]
        nxt = np.empty(len(begins), _I64)
        for bk in (lobc.DIFF_BEGIN, lobc.SNAPSHOT_BEGIN):
            sel = k[begins] == bk
            not_level = pos[k != _LEVEL[bk]]
            j = np.searchsorted(not_level, begins[sel], side="right")
            nxt[sel] = np.where(j < len(not_level), not_level[np.minimum(j, len(not_level) - 1)], n)
        has_next = nxt < n
        nn = np.minimum(nxt, n - 1) if n else nxt
        whole = has_next & (k[nn] == k[begins] + 2) & (sym[nn] == sym[begins])
        whole &= idx[nn] - idx[begins] - 1 <= self.max_message  # (records between, unknown symbols' too)
        idm = whole & (rec["first_id"][nn] != rec["first_id"][begins])
        if idm.any():
            self._desync(rec, idx, nxt[idm], "end_id_mismatch")
        end_of = np.full(n, -1, _I64)
        end_of[begins[whole]] = nxt[whole]
        used_end = np.zeros(n, bool)
        used_end[nxt[whole]] = True
        group_ok = np.zeros(n, bool)
        group_ok[begins[whole]] = True
        bad_levels = is_level & ~(okl & group_ok[np.maximum(owner, 0)])
        bad_begins = begins[~whole]
        if len(bad_begins):
            self._desync(rec, idx, bad_begins, "incomplete_message")
        # a level after an incomplete BEGIN is skipped without a row, also in a later batch
        # (changed: the Python replay made it an orphan there)
        quiet = np.isin(owner, bad_begins) | ((owner < 0) & self._after_bad_begin)
        marks = pos[is_begin | is_end]
        if len(marks):
            self._after_bad_begin = bool(np.isin(marks[-1], bad_begins))
        orphans = pos[(is_end & ~used_end) | (bad_levels & ~quiet)]
        if len(orphans):
            self._desync(rec, idx, orphans, "orphan_record")
        self.counters.levels_skipped += int(bad_levels.sum())
        # level validity
        bad_val = okl & group_ok[np.maximum(owner, 0)] & ~_valid_levels(rec)
        if bad_val.any():
            self._desync(rec, idx, pos[bad_val], "malformed_level")
        good_level = okl & group_ok[np.maximum(owner, 0)] & ~bad_val
        self._rec, self._idx, self._owner, self._good_level = rec, idx, owner, good_level
        self._end_of = end_of
        # trades: rows, not applied
        tr = pos[k == lobc.TRADE]
        if len(tr):
            t = rec[tr]
            self.counters.trades += len(tr)
            self._emit("trades", {"record": idx[tr], "recv_ns": t["recv_ns"], "exch_ns": t["exch_ns"],
                                  "symbol": t["symbol"].astype(np.uint16), "trade_id": t["first_id"],
                                  "price": t["price"], "qty": t["qty"], "side": t["side"]})
        # tickers: a TICKER_BID followed by its TICKER_ASK (same symbol and id)
        tb = pos[k == lobc.TICKER_BID]
        ta = np.minimum(tb + 1, max(n - 1, 0))
        paired = (tb + 1 < n) & (k[ta] == lobc.TICKER_ASK) & (sym[ta] == sym[tb]) & \
                 (rec["first_id"][ta] == rec["first_id"][tb])
        lone = np.setdiff1d(pos[k == lobc.TICKER_ASK], ta[paired])
        if (~paired).any() or len(lone):
            self._desync(rec, idx, np.sort(np.concatenate([tb[~paired], lone])), "unpaired_ticker")
        tick_pos = tb[paired]
        unknown = (k == 0) | (k > lobc.TICKER_ASK)
        if unknown.any():
            self._desync(rec, idx, pos[unknown], "unknown_kind")
        # controls, in order: whole snapshots, GAP, RESYNC; diff messages in between go in bulk
        ctrl = pos[(is_begin & (k == lobc.SNAPSHOT_BEGIN) & (end_of >= 0)) | (k == lobc.GAP) | (k == lobc.RESYNC)]
        diffs = pos[(k == lobc.DIFF_BEGIN) & (end_of >= 0)]
        lo = 0
        for c in [*ctrl.tolist(), n]:
            d = diffs[np.searchsorted(diffs, lo):np.searchsorted(diffs, c)]
            t = tick_pos[np.searchsorted(tick_pos, lo):np.searchsorted(tick_pos, c)]
            self._segment(d, t)
            if c < n:
                self._control(c)
            lo = c + 1

    # ------------------------------------------------------------ segments and controls

    def _segment(self, diff_begins: np.ndarray, tick_pos: np.ndarray) -> None:
        """The diff messages and tickers between two controls; a diff message out of sequence
        is a control of its own (the symbol is unsynced from there, as after a GAP)."""
        while self.market and len(diff_begins):
            brk = self._first_break(diff_begins)
            if brk is None:
                break
            self._segment_in_sequence(diff_begins[diff_begins < brk], tick_pos[tick_pos < brk])
            self._sequence_break(brk)
            diff_begins, tick_pos = diff_begins[diff_begins > brk], tick_pos[tick_pos > brk]
        self._segment_in_sequence(diff_begins, tick_pos)

    def _follows(self, U, u, pu, prev_u, after) -> np.ndarray:
        """Per message: does it follow the one before (prev_u; after: that was a snapshot) by
        the market's rule? Also the update ids expected and received."""
        want = prev_u + np.uint64(1) if self.market == "spot" else prev_u
        in_range = (U <= want) & (want <= u)
        got = np.where(after, np.where(U > want, U, u), U if self.market == "spot" else pu)
        return np.where(after, in_range, got == want), want, got

    def _first_break(self, d: np.ndarray):
        """The position of the first diff message in d that does not follow the message before
        it of its symbol, among the symbols that apply them (synced, with a book), or None."""
        rec = self._rec
        sym = rec["symbol"][d].astype(_I64)
        go = (self.state[sym] == SYNCED) & np.isin(sym, list(self.sizing))
        first = None
        for s in np.unique(sym[go]).tolist():
            dm = d[go & (sym == s)]
            u = rec["last_id"][dm]
            prev_u = np.empty(len(dm), np.uint64)
            prev_u[0], prev_u[1:] = self.last_u[s], u[:-1]
            after = np.zeros(len(dm), bool)
            after[0] = self.after_snapshot[s]
            ok, _, _ = self._follows(rec["first_id"][dm], u, rec["prev_id"][dm], prev_u, after)
            bad = np.flatnonzero(~ok)
            if len(bad) and (first is None or dm[bad[0]] < first):
                first = int(dm[bad[0]])
        return first

    def _sequence_break(self, c: int) -> None:
        """Diff message c does not follow: a sequence_break row, not applied, unsynced."""
        rec = self._rec
        s = int(rec["symbol"][c])
        one = lambda f: np.array([rec[f][c]], np.uint64)  # noqa: E731
        _, want, got = self._follows(one("first_id"), one("last_id"), one("prev_id"),
                                     np.array([self.last_u[s]], np.uint64), np.array([self.after_snapshot[s]]))
        self._desync(rec, self._idx, [c], "sequence_break", first_id=want, last_id=got)
        self.counters.messages_skipped["sequence_break"] = self.counters.messages_skipped.get("sequence_break", 0) + 1
        self.per_symbol[s]["skipped"] += 1
        self._lose_sync(s)

    def _lose_sync(self, s: int) -> None:
        """The book of s is not known from here (a GAP, a sequence break): unsynced until a
        RESYNC; its pending comparison points and ticker history go."""
        self.state[s] = GAPPED
        self.snapshot_id[s] = -1
        self._drop_points(s, "unresolved_at_gap")
        self._tick[s] = self._tick[s][:0]

    def _segment_in_sequence(self, diff_begins: np.ndarray, tick_pos: np.ndarray) -> None:
        rec = self._rec
        if len(tick_pos):
            self._add_tickers(tick_pos)
        if len(diff_begins):
            s = rec["symbol"][diff_begins].astype(_I64)
            st = self.state[s]
            go = (st == SYNCED) & np.isin(s, list(self.sizing))
            for code in (NONE, GAPPED):
                skip = diff_begins[(st == code) & ~go]
                if len(skip):
                    cause = STATE_SKIP_CAUSE[code]
                    self.counters.messages_skipped[cause] = self.counters.messages_skipped.get(cause, 0) + len(skip)
                    for si, cnt in zip(*np.unique(rec["symbol"][skip], return_counts=True)):
                        self.per_symbol[int(si)]["skipped"] += int(cnt)
                    self._desync(rec, self._idx, skip, cause)
            skip = diff_begins[(st == SYNCED) & ~go]  # synced but without a book: cannot happen via scan
            if len(skip):
                self._desync(rec, self._idx, skip, "no_book")
            b = diff_begins[go]
            if len(b):
                self._apply_messages(b, self._entries(b), snapshot=False)
        touched = np.concatenate([rec["symbol"][tick_pos], rec["symbol"][diff_begins]])
        for s in np.unique(touched).tolist():
            self._resolve_points(s)

    def _entries(self, begins: np.ndarray) -> dict:
        """The level records of the messages starting at begins: message number, key, qty, position."""
        # a whole message is BEGIN, its levels, END: contiguous
        lens = self._end_of[begins] - begins - 1
        msg = np.repeat(np.arange(len(begins), dtype=_I64), lens)
        lv = np.repeat(begins + 1, lens) + (np.arange(int(lens.sum()), dtype=_I64)
                                            - np.repeat(np.cumsum(lens) - lens, lens))
        good = self._good_level[lv]
        lv, msg = lv[good], msg[good]
        key, ok = self._keys(self._rec[lv])
        if (~ok).any():
            self._desync(self._rec, self._idx, lv[~ok], "price_not_in_book")
        return {"msg": msg[ok], "key": key[ok], "q": self._rec["qty"][lv][ok], "pos": lv[ok]}

    def _keys(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = np.zeros(len(r), _I64)
        ok = np.zeros(len(r), bool)
        sym = r["symbol"].astype(_I64)
        for s in np.unique(sym).tolist():
            m = sym == s
            if s not in self.sizing:
                continue
            prices = self.sizing[s].prices
            j = np.searchsorted(prices, r["price"][m])
            jj = np.minimum(j, max(len(prices) - 1, 0))
            good = (j < len(prices)) & (prices[jj] == r["price"][m]) if len(prices) else np.zeros(m.sum(), bool)
            key[m] = 2 * (self.base[s] + jj) + (r["side"][m] == ord("S"))
            ok[m] = good
        return key, ok

    def _control(self, c: int) -> None:
        rec, idx = self._rec, self._idx
        r = rec[c]
        s = int(r["symbol"])
        kind = int(r["kind"])
        if s >= self.nsym:
            self._desync(rec, idx, [c], "unknown_symbol")
            return
        if kind == lobc.GAP:
            reason = lobc.GAP_REASONS.get(int(r["flags"]), f"unknown_{int(r['flags'])}")
            self._desync(rec, idx, [c], f"gap_{reason}")
            self._lose_sync(s)
        elif kind == lobc.RESYNC:
            if self.snapshot_id[s] < 0:
                self._desync(rec, idx, [c], "resync_without_snapshot")
            elif self.snapshot_id[s] != int(r["first_id"]):
                self._desync(rec, idx, [c], "resync_id_mismatch")
            if s in self.sizing:
                self.state[s] = SYNCED
        else:  # a whole snapshot
            if s not in self.sizing:
                self._desync(rec, idx, [c], "no_book")
                return
            e = self._entries(np.array([c], _I64))
            # every live level of the symbol that the snapshot does not hold goes to zero
            b, nl = self.base[s], len(self.sizing[s].prices)
            live = np.flatnonzero(self.mq[2 * b:2 * (b + nl)]) + 2 * b
            live = live[~np.isin(live, e["key"])]
            e = {"msg": np.concatenate([np.zeros(len(live), _I64), e["msg"]]),
                 "key": np.concatenate([live, e["key"]]),
                 "q": np.concatenate([np.zeros(len(live), _I64), e["q"]]),
                 "pos": np.concatenate([np.full(len(live), c, _I64), e["pos"]])}
            self._apply_messages(np.array([c], _I64), e, snapshot=True)
            self.snapshot_id[s] = int(r["first_id"])
            self.counters.snapshots_applied += 1
            if self.state[s] == NONE:
                self.state[s] = SYNCED
            self._resolve_points(s)

    # ------------------------------------------------------------ applying messages

    def _apply_messages(self, begins: np.ndarray, e: dict, *, snapshot: bool, single: bool = False) -> None:
        """Apply whole messages (their BEGIN positions, sorted) in one core call."""
        rec = self._rec
        M = len(begins)
        m_sym = rec["symbol"][begins].astype(_I64)
        # one entry per (message, key): the last
        o = np.lexsort((e["pos"], e["key"], e["msg"]))
        msg, key, q, pos = e["msg"][o], e["key"][o], e["q"][o], e["pos"][o]
        last = np.ones(len(o), bool)
        last[:-1] = (msg[1:] != msg[:-1]) | (key[1:] != key[:-1])
        msg, key, q, pos = msg[last], key[last], q[last], pos[last]
        # the quantity before: the same key's entry in an earlier message of this call, else the mirror
        o2 = np.lexsort((msg, key))
        prev = self.mq[key]
        sk = key[o2]
        samek = np.zeros(len(o2), bool)
        samek[1:] = sk[1:] == sk[:-1]
        p2 = prev[o2]
        p2[1:] = np.where(samek[1:], q[o2][:-1], p2[1:])
        prev[o2] = p2
        ev, ev_entry = self._events(key, q, prev, msg, pos)
        out = self._apply(ev, bbo=True)
        ev_msg = msg[ev_entry]
        bad = np.flatnonzero(out.results["status"] != 0)
        d = out.desyncs
        dirty_ev = np.concatenate([bad, d["event_index"].astype(_I64)])
        dirty_syms = {}
        for i in dirty_ev.tolist():
            s = int(m_sym[ev_msg[i]])
            dirty_syms[s] = min(dirty_syms.get(s, M), int(ev_msg[i]))
        redo = set()
        stale_keys = self._stale_keys(d)
        for s, first in dirty_syms.items():
            ms = np.flatnonzero(m_sym == s)
            ok_here = first == ms[-1] and not any(int(m_sym[ev_msg[i]]) == s for i in bad.tolist())
            if ok_here:
                sk_s = stale_keys[d["instrument"] == s]
                ok_here = not np.isin(sk_s, key[msg == first]).any()
            if not ok_here:
                redo.add(s)
        keep_m = ~np.isin(m_sym, list(redo))
        keep_e = keep_m[msg]
        # commit the mirror: the last quantity of each key, then the stale levels the core removed
        ck = key[keep_e]
        if len(ck):
            oo = np.lexsort((msg[keep_e], ck))
            lastk = np.ones(len(oo), bool)
            lastk[:-1] = ck[oo][1:] != ck[oo][:-1]
            self.mq[ck[oo][lastk]] = q[keep_e][oo][lastk]
        dkeep = keep_m[ev_msg[d["event_index"].astype(_I64)]] if len(d) else np.zeros(0, bool)
        self.mq[stale_keys[dkeep]] = 0
        self._crossed_rows(d[dkeep], ev, ev_msg, begins, snapshot)
        self._finish_messages(begins, keep_m, ev_msg, out.bbo, snapshot)
        self.counters.levels_applied += int(keep_e.sum())
        self._count_levels(q[keep_e], prev[keep_e])
        self._count_events(ev[keep_m[ev_msg]])
        for s in sorted(redo):
            self.counters.rollbacks += 1
            self._rollback(key[m_sym[msg] == s], stale_keys[d["instrument"] == s])
            for m in np.flatnonzero(m_sym == s).tolist():
                sel = msg == m
                one = {"msg": np.zeros(int(sel.sum()), _I64), "key": key[sel], "q": q[sel], "pos": pos[sel]}
                if single or M == 1:
                    self._apply_sequential(begins[m:m + 1], one, snapshot)
                else:
                    self._apply_messages(begins[m:m + 1], one, snapshot=snapshot, single=True)

    def _events(self, key, q, prev, msg, pos):
        """Events for entries (already in message order): removals and reductions of each message first."""
        new = (prev == 0) & (q > 0)
        cancel = (prev > 0) & (q == 0)
        reduce_ = (q > 0) & (q < prev)
        grow = (prev > 0) & (q > prev)
        act = new | cancel | reduce_ | grow
        phase = (new | grow).astype(_I64)
        sel = np.flatnonzero(act)
        sel = sel[np.lexsort((pos[sel], phase[sel], msg[sel]))]
        ev = np.zeros(len(sel), EVENT_DTYPE)
        kk = key[sel]
        g = kk >> 1
        ev["id"] = self.g_id[g] | (kk & 1).astype(np.uint64)
        ev["price"] = self.g_core[g]
        ev["instrument"] = self.g_sym[g]
        ev["side"] = np.where(kk & 1, Side.SELL, Side.BUY)
        ev["tif"] = TIF.GTC
        kinds = np.select([new[sel], cancel[sel], reduce_[sel]], [Kind.NEW, Kind.CANCEL, Kind.REDUCE], Kind.REPLACE)
        ev["kind"] = kinds
        ev["new_id"] = np.where(kinds == Kind.REPLACE, ev["id"], 0)  # a NEW's new_id is its participant: none
        ev["qty"] = np.where(reduce_[sel], prev[sel] - q[sel], q[sel])
        ev["flags"] = np.where(kinds == Kind.CANCEL, 0, int(Flag.FEED))
        return ev, sel

    def _count_levels(self, q, prev) -> None:
        c = self.counters
        c.unchanged_levels += int(((q == prev) & (q > 0)).sum())
        c.zero_qty_unknown_level += int(((q == 0) & (prev == 0)).sum())

    def _apply(self, ev: np.ndarray, bbo: bool = True):
        import time
        t = time.perf_counter()
        out = self.session.apply(ev, bbo=bbo)
        self.counters.core_seconds += time.perf_counter() - t
        self.counters.core_events += len(ev)
        return out

    def _stale_keys(self, d: np.ndarray) -> np.ndarray:
        """The level keys of the stale orders the core removed (CROSSED desyncs)."""
        return self._key_of_id(d["order_id"])

    def _key_of_id(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, np.uint64)
        s = (ids >> np.uint64(ORDER_SYMBOL_SHIFT)).astype(_I64) - 1
        level = ((ids & np.uint64((1 << ORDER_SYMBOL_SHIFT) - 1)) >> np.uint64(1)).astype(_I64)
        out = np.zeros(len(ids), _I64)
        for sv in np.unique(s).tolist():
            m = s == sv
            z = self.sizing[sv]
            b, nl = self.base[sv], len(z.prices)
            cp = z.band_low + level[m] * z.tick
            out[m] = 2 * (b + np.searchsorted(self.g_core[b:b + nl], cp)) + (ids[m] & np.uint64(1)).astype(_I64)
        return out

    def _crossed_rows(self, d, ev, ev_msg, begins, snapshot) -> None:
        other = d[d["cause"] != Cause.CROSSED] if len(d) else d
        if len(other):  # not expected from NEW/REDUCE/REPLACE/CANCEL computed from an exact mirror
            m = ev_msg[other["event_index"].astype(_I64)]
            self._desync(self._rec, self._idx, begins[m], np.array(
                [f"core_{Cause(int(c)).name.lower()}" for c in other["cause"].tolist()], object))
        d = d[d["cause"] == Cause.CROSSED] if len(d) else d
        if not len(d):
            return
        inc = self._key_of_id(d["found_id"])
        stale = self._key_of_id(d["order_id"])
        if snapshot:
            cause = np.full(len(d), "crossed_by_snapshot", object)
        else:
            cause = np.where(inc & 1, "crossed_by_ask_update", "crossed_by_bid_update").astype(object)
        m = ev_msg[d["event_index"].astype(_I64)]
        pos = begins[m]
        s = self._rec["symbol"][pos]
        self._desync(self._rec, self._idx, pos, cause,
                     side=np.where(inc & 1, ord("S"), ord("B")), price=self.g_real[inc >> 1], qty=d["expected_qty"],
                     other_price=self.g_real[stale >> 1], other_qty=d["found_qty"], symbol=s)

    def _rollback(self, keys: np.ndarray, stale: np.ndarray) -> None:
        """Put these levels of the core book back as the mirror has them (before the call)."""
        keys = np.unique(np.concatenate([keys, stale]))
        g = keys >> 1
        ids = self.g_id[g] | (keys & 1).astype(np.uint64)
        ev = np.zeros(2 * len(keys), EVENT_DTYPE)
        ev["id"][:len(keys)] = ids
        ev["instrument"][:len(keys)] = self.g_sym[g]
        ev["kind"][:len(keys)] = Kind.CANCEL
        live = self.mq[keys] > 0
        nl = int(live.sum())
        r = ev[len(keys):len(keys) + nl]
        r["id"] = ids[live]
        r["price"] = self.g_core[g[live]]
        r["qty"] = self.mq[keys[live]]
        r["instrument"] = self.g_sym[g[live]]
        r["kind"] = Kind.NEW
        r["side"] = np.where(keys[live] & 1, Side.SELL, Side.BUY)
        r["tif"] = TIF.GTC
        r["flags"] = int(Flag.FEED)
        ev = ev[:len(keys) + nl]
        if self.timing:
            self.session.set_timing(False)
        out = self.session.apply(ev)
        if self.timing:
            self.session.set_timing(True)
        st = out.results["status"][len(keys):]
        assert not st.any() and not len(out.desyncs), "a rollback restores a book the core held"

    def _apply_sequential(self, begins: np.ndarray, e: dict, snapshot: bool) -> None:
        """One message, one event at a time, each from the mirror as the events before it left it."""
        self.counters.sequential_messages += 1
        key, q, pos = e["key"], e["q"], e["pos"]
        o = np.lexsort((pos, key))
        lastk = np.ones(len(o), bool)
        lastk[:-1] = key[o][1:] != key[o][:-1]
        key, q, pos = key[o][lastk], q[o][lastk], pos[o][lastk]
        prev0 = self.mq[key]
        phase = ((q > 0) & (q >= prev0)).astype(_I64)
        o = np.lexsort((pos, phase))
        key, q, pos = key[o], q[o], pos[o]
        self._count_levels(q, prev0[o])
        for i in range(len(key)):
            kk = key[i:i + 1]
            prev = self.mq[kk]
            ev, _ = self._events(kk, q[i:i + 1], prev, np.zeros(1, _I64), pos[i:i + 1])
            if not len(ev):
                continue
            out = self._apply(ev, bbo=False)
            st = int(out.results["status"][0])
            self._count_events(ev)
            if st:
                self._desync(self._rec, self._idx, begins[:1], f"rejected_{Status(st).name.lower()}")
                f = self.session.book(int(ev["instrument"][0])).find(int(ev["id"][0]))
                self.mq[kk] = 0 if f is None else f[2]
            else:
                self.mq[kk] = q[i]
            if len(out.desyncs):
                self.mq[self._stale_keys(out.desyncs)] = 0
                self._crossed_rows(out.desyncs, ev, np.zeros(1, _I64), begins, snapshot)
        self.counters.levels_applied += len(key)
        # the message's top of book: from the book itself
        self._finish_messages(begins, np.ones(1, bool), np.zeros(0, _I64), None, snapshot)

    def _count_events(self, ev: np.ndarray) -> None:
        for kname in self.counters.events:
            self.counters.events[kname] += int((ev["kind"] == Kind[kname]).sum())

    def _finish_messages(self, begins, keep_m, ev_msg, bbo, snapshot) -> None:
        """Top of book after each kept message, bbo rows where it changed, comparison points."""
        rec = self._rec
        ms = np.flatnonzero(keep_m)
        if not len(ms):
            return
        m_sym = rec["symbol"][begins].astype(_I64)
        tops = np.zeros((len(begins), 4), _I64)
        if bbo is None:  # from the book (a single message)
            for m in ms.tolist():
                tops[m] = self.best(int(m_sym[m]))
        else:
            last_ev = np.full(len(begins), -1, _I64)
            if len(ev_msg):
                np.maximum.at(last_ev, ev_msg, np.arange(len(ev_msg)))
            for s in np.unique(m_sym[ms]).tolist():
                sm = ms[m_sym[ms] == s]
                le = last_ev[sm]
                ff = np.maximum.accumulate(np.where(le >= 0, np.arange(len(sm)), -1))
                has = ff >= 0
                t = np.tile(self.last_bbo[s], (len(sm), 1))
                if has.any():
                    b = bbo[le[ff[has]]]
                    z = self.sizing[s]
                    t[has] = np.stack([z.from_core(b["bid_price"], b["bid_qty"] > 0), b["bid_qty"],
                                       z.from_core(b["ask_price"], b["ask_qty"] > 0), b["ask_qty"]], axis=1)
                tops[sm] = t
        for s in np.unique(m_sym[ms]).tolist():
            sm = ms[m_sym[ms] == s]
            t = tops[sm]
            before = np.vstack([self.last_bbo[s][None, :], t[:-1]])
            changed = (t != before).any(axis=1)
            self.last_bbo[s] = t[-1]
            ends = self._end_of[begins[sm]]
            u = np.where(snapshot, rec["first_id"][begins[sm]], rec["last_id"][begins[sm]]).astype(np.uint64)
            self.last_u[s] = u[-1]
            self.after_snapshot[s] = snapshot
            self.per_symbol[s]["messages"] += len(sm)
            ch = np.flatnonzero(changed)
            if len(ch):
                self.counters.bbo_changes += len(ch)
                bp = begins[sm][ch]
                self._emit("bbo", {
                    "record": self._idx[ends[ch]], "recv_ns": rec["recv_ns"][bp], "exch_ns": rec["exch_ns"][bp],
                    "symbol": np.full(len(ch), s, np.uint16), "update_id": u[ch],
                    "bid_price": t[ch, 0], "bid_qty": t[ch, 1], "ask_price": t[ch, 2], "ask_qty": t[ch, 3]})
            if not self.compare_tickers:
                continue
            pts = np.zeros(len(sm), _POINT_DTYPE)
            pts["u"] = u
            pts["top"] = t
            pts["record"] = self._idx[ends]
            pts["recv_ns"] = rec["recv_ns"][begins[sm]]
            self._points[s].append(pts)
            self.ticker_stats["points"] += len(sm)
        if not snapshot:
            self.counters.messages_applied += len(ms)

    # ------------------------------------------------------------ bookTicker comparison

    def _add_tickers(self, tick_pos: np.ndarray) -> None:
        rec = self._rec
        b, a = rec[tick_pos], rec[tick_pos + 1]
        self.ticker_stats["tickers"] += len(tick_pos)
        for s in np.unique(b["symbol"]).tolist():
            if s >= self.nsym:
                continue
            m = b["symbol"] == s
            t = np.zeros(int(m.sum()), _TICK_DTYPE)
            t["u"] = b["first_id"][m]
            t["top"] = np.stack([b["price"][m], b["qty"][m], a["price"][m], a["qty"][m]], axis=1)
            h = np.concatenate([self._tick[s], t])
            if len(h) > 1 and (h["u"][1:] < h["u"][:-1]).any():
                h = h[np.argsort(h["u"], kind="stable")]
            self._tick[s] = h[-self.ticker_history:]

    def _resolve_points(self, s: int) -> None:
        """Compare the pending points of s that a later ticker proves final (see docs/l2.md)."""
        if not self._points[s] or not len(self._tick[s]):
            return
        p = np.concatenate(self._points[s])
        h = self._tick[s]
        ready = p["u"] < h["u"][-1]
        self._points[s] = [p[~ready]] if (~ready).any() else []
        p = p[ready]
        if not len(p):
            return
        j = np.searchsorted(h["u"], p["u"], side="right") - 1
        none = j < 0
        if none.any():
            self._not_comparable("no_ticker", int(none.sum()))
        p, j = p[~none], j[~none]
        tk = h["top"][j]
        eq = tk == p["top"]
        match = eq.all(axis=1)
        st = self.ticker_stats
        st["comparable"] += len(p)
        st["matches"] += int(match.sum())
        st["price_matches"] += int((eq[:, 0] & eq[:, 2]).sum())
        miss = ~match
        if miss.any():
            pm, tm = p[miss], tk[miss]
            self._emit("ticker_mismatches", {
                "record": pm["record"], "recv_ns": pm["recv_ns"], "symbol": np.full(len(pm), s, np.uint16),
                "update_id": pm["u"], "ticker_id": h["u"][j[miss]],
                "book_bid_price": pm["top"][:, 0], "book_bid_qty": pm["top"][:, 1],
                "book_ask_price": pm["top"][:, 2], "book_ask_qty": pm["top"][:, 3],
                "ticker_bid_price": tm[:, 0], "ticker_bid_qty": tm[:, 1],
                "ticker_ask_price": tm[:, 2], "ticker_ask_qty": tm[:, 3]})

    def _drop_points(self, s: int, why: str) -> None:
        if s in self._points and self._points[s]:
            self._resolve_points(s)
            n = sum(len(p) for p in self._points[s])
            if n:
                self._not_comparable(why, n)
            self._points[s] = []

    def _not_comparable(self, why: str, n: int) -> None:
        nc = self.ticker_stats["not_comparable"]
        nc[why] = nc.get(why, 0) + n


_TICK_DTYPE = np.dtype([("u", "<u8"), ("top", "<i8", (4,))])
_POINT_DTYPE = np.dtype([("u", "<u8"), ("top", "<i8", (4,)), ("record", "<i8"), ("recv_ns", "<i8")])


def _open_tail(rec: np.ndarray, nsym: int) -> int:
    """Where an unfinished group at the end of rec starts (a BEGIN followed only by its levels,
    or a trailing TICKER_BID), else len(rec); records of a symbol index >= nsym do not count
    (_process drops them before it matches groups). (Changed: the Python replay counted them,
    so a chunk cut after one ended the group.)"""
    n = len(rec)
    known = np.flatnonzero(rec["symbol"] < nsym)
    if not len(known):
        return n
    k = rec["kind"][known]
    if k[-1] == lobc.TICKER_BID:
        return int(known[-1])
    b = np.flatnonzero((k == lobc.DIFF_BEGIN) | (k == lobc.SNAPSHOT_BEGIN))
    if not len(b):
        return n
    p = int(b[-1])
    if (k[p + 1:] == _LEVEL[int(k[p])]).all():
        return int(known[p])
    return n
