"""L2 (price level) feeds -> matching-core events (docs/l2.md).

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
message that also removes every level it does not hold.

Both passes are in C (csrc/feeds/l2.c): scan() sizes the books in one pass over the
records; L2Replay hands the records over one chunk per call and turns the rows
the C replay wrote into report columns. The Python implementation this
replaced is kept as tests/l2_reference.py (the differential tests' reference).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lobreplay.core import _coreapi as core
from lobreplay.l2 import lobc
from lobreplay.core.book import Session
from lobreplay.core.events import Cause, Kind, Side, Status

__all__ = ["BookSizing", "scan", "scan_counts", "L2Replay", "ORDER_SYMBOL_SHIFT", "MAX_GRID_LEVELS"]

ORDER_SYMBOL_SHIFT = 48            # order id = (symbol + 1) << 48 | level << 1 | (side is ask)
MAX_GRID_LEVELS = 1 << 20          # a grid book spans at most this many ticks; else a ladder book
MAX_MESSAGE = core.lib.LOB_L2_MAX_MESSAGE  # records a message may hold between its BEGIN and END (csrc/feeds/l2.h)
NONE, SYNCED, GAPPED = 0, 1, 2     # symbol states (L2Replay.state)
_LEVEL = {lobc.DIFF_BEGIN: lobc.DIFF_LEVEL, lobc.SNAPSHOT_BEGIN: lobc.SNAPSHOT_LEVEL}
# the tables a .lobc replay writes (lobreplay.l2.replay; named here so that what a report
# directory may hold, lobreplay.replay.outdir, is known without the replay)
ALL_REPORTS = ("bbo", "desyncs", "trades", "latency", "ticker_mismatches", "depth")  # depth: with depth_levels
_I64 = np.int64


@dataclass
class BookSizing:
    """The core book of one symbol. mode "grid": core prices are the feed's
    prices, on [band_low, band_high] in steps of tick (the gcd of the prices
    seen). mode "ladder": when that grid would be too wide (far-away levels),
    core price k is the k-th smallest price seen (`prices`): the order of
    prices, hence priority and crossing, is the same."""
    symbol: int
    name: str
    prices: np.ndarray            # every level price seen (sorted, unique, feed units)
    mode: str
    band_low: int
    band_high: int
    tick: int
    capacity: int
    peak_levels: int

    @property
    def levels(self) -> int:
        return (self.band_high - self.band_low) // self.tick + 1

    def to_core(self, prices: np.ndarray) -> np.ndarray:
        prices = np.asarray(prices, _I64)
        return prices.copy() if self.mode == "grid" else np.searchsorted(self.prices, prices).astype(_I64)

    def from_core(self, core_prices: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
        cp = np.asarray(core_prices, _I64)
        if self.mode == "grid":
            out = cp.copy()
        else:
            out = self.prices[np.clip(cp, 0, max(0, len(self.prices) - 1))] if len(self.prices) else cp * 0
        if present is not None:
            out = np.where(present, out, 0)
        return out

    def as_dict(self) -> dict:
        return {"symbol": self.name, "mode": self.mode, "band_low": self.band_low, "band_high": self.band_high,
                "tick": self.tick, "levels": self.levels, "capacity": self.capacity,
                "peak_levels": self.peak_levels, "distinct_prices": int(len(self.prices))}


def check_max_message(n: int) -> None:
    """max_message (scan, L2Replay, L2ReplayConfig) must fit the C side's uint32, above 0."""
    if not 0 < n < 1 << 32:
        raise ValueError(f"max_message: expected 1 .. 2**32 - 1 records, got {n}")


def scan(records: np.ndarray, symbols: list[str], *, headroom: float = 0.2, mode: str = "auto",
         max_grid_levels: int = MAX_GRID_LEVELS, only: set[int] | None = None,
         max_message: int = MAX_MESSAGE) -> dict[int, BookSizing]:
    """Pass 1 (see scan_counts)."""
    return scan_counts(records, symbols, headroom=headroom, mode=mode, max_grid_levels=max_grid_levels,
                       only=only, max_message=max_message)[0]


def scan_counts(records: np.ndarray, symbols: list[str], *, headroom: float = 0.2, mode: str = "auto",
                max_grid_levels: int = MAX_GRID_LEVELS, only: set[int] | None = None,
                max_message: int = MAX_MESSAGE) -> tuple[dict[int, BookSizing], np.ndarray]:
    """Pass 1, and the records by kind (256 counts) from the same pass: a book size for every
    symbol of `symbols` with a snapshot or diff message (a record whose symbol index is beyond
    them is pass 2's unknown_symbol: no book).
    Prices: every level price seen; tick = their gcd; band = their range
    widened by headroom (grid), or the prices themselves (ladder: mode
    "ladder", or "auto" when the grid would exceed max_grid_levels).
    Capacity: the peak number of live levels, applying the level records in
    file order, where a zero removes a level only in a message pass 2 applies
    (whole, and a snapshot or a diff while synced; snapshots only add): an
    upper bound of pass 2's book whatever the records; plus slack. One C pass
    over the records (csrc/feeds/l2.c, lob_l2_scan). records: an array, or an
    iterable of arrays in file order (a file's chunks). max_message: the records a
    message may hold (a longer one is incomplete); pass 2 (L2Replay) must take the same."""
    if mode not in ("auto", "grid", "ladder"):
        raise ValueError(f"mode: expected auto, grid or ladder, got {mode!r}")
    sc = core.L2Scan(len(symbols), max_message)
    for part in ([records] if isinstance(records, np.ndarray) else records):
        sc.feed(np.ascontiguousarray(part, lobc.RECORD_DTYPE))
    sc.finish()
    st = sc.symbols()
    with_book = np.flatnonzero(st["has_book"]).tolist()
    lv_sym, lv_price = sc.levels()  # (prices > 0: lob_l2_scan keeps valid levels only)
    if len(lv_price) and int(lv_price.max()) < 1 << 47:  # one key, symbol then price: a sort, not a lexsort
        key = np.sort((lv_sym.astype(np.int64) << 47) | lv_price)
        lv_sym, lv_price = (key >> 47).astype(lv_sym.dtype), key & ((1 << 47) - 1)
    else:
        o = np.lexsort((lv_price, lv_sym))
        lv_sym, lv_price = lv_sym[o], lv_price[o]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(lv_sym, minlength=65536))])  # symbol s: [bounds[s], bounds[s+1])
    out = {}
    for s in with_book:
        if only is not None and s not in only:
            continue
        prices = lv_price[bounds[s]:bounds[s + 1]]
        peak = int(st["peak"][s])
        peak = min(peak, 2 * len(prices))
        cap = max(16, peak + max(16, peak // 8))
        name = symbols[s]
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
    return out, sc.kinds().astype(_I64)


def _cat(parts: list[dict]) -> dict:
    if not parts:
        return {}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


# desync causes: the core's codes (csrc/feeds/l2.h) -> their names (docs/l2.md)
_CAUSES = {getattr(core.lib, f"LOB_L2D_{n.upper()}"): n for n in (
    "unknown_symbol", "end_id_mismatch", "incomplete_message", "orphan_record", "malformed_level", "unpaired_ticker",
    "unknown_kind", "update_before_snapshot", "unsynced_update_skipped", "no_book", "price_not_in_book",
    "crossed_by_bid_update", "crossed_by_ask_update", "crossed_by_snapshot", "resync_without_snapshot",
    "resync_id_mismatch", "sequence_break")}
_GAP, _REJECTED, _CORE = core.lib.LOB_L2D_GAP, core.lib.LOB_L2D_REJECTED, core.lib.LOB_L2D_CORE
# a .lobc file's market -> the update-id rule its diff messages follow (csrc/feeds/l2.h)
SEQUENCE_RULES = {None: core.lib.LOB_L2_SEQ_NONE, "spot": core.lib.LOB_L2_SEQ_SPOT, "usdm": core.lib.LOB_L2_SEQ_USDM}


def _cause_name(cause: int, detail: int) -> str:
    if cause == _GAP:
        return "gap_" + lobc.GAP_REASONS.get(detail, f"unknown_{detail}")
    if cause == _REJECTED:
        return f"rejected_{Status(detail).name.lower()}"
    if cause == _CORE:
        return f"core_{Cause(detail).name.lower()}"
    return _CAUSES.get(cause, f"unknown_cause_{cause}")


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
    crossing_events: int = 0       # events that met stale levels (applied one at a time)
    core_calls: int = 0            # lob_session_apply calls
    core_seconds: float = 0.0      # time in the C replay calls (conversion and core)
    core_events: int = 0


class L2Replay:
    """Replays .lobc records through one core Session (one book per symbol); the
    per-record work is in C (csrc/feeds/l2.c), one call per batch of records.

    feed(records) takes records in file order, in batches of any size (a
    message cut by the batch end waits for the next batch), and returns the
    report rows it produced: dict name -> dict of columns ("bbo", "desyncs",
    "trades", "ticker_mismatches", and "depth" with depth samples), each sorted by
    record. finish() at the end.
    levels(symbol) and best(symbol) give the book in feed units."""

    def __init__(self, sizing: dict[int, BookSizing], symbols: list[str], *, timing: bool = False,
                 ticker_history: int = 1 << 16, compare_tickers: bool = True, market: str | None = None,
                 depth_levels: int = 0, depth_every_ns: int = 0, max_message: int = MAX_MESSAGE):
        """market: "spot" or "usdm" checks that each diff message follows the last one by that
        market's update-id rule (a .lobc file's `market`; docs/l2.md "Update ids"); None: not
        checked. depth_levels > 0: a "depth" row of the N best levels of each book that
        changed, at each multiple of depth_every_ns of receive time, or with depth_every_ns 0
        after every message that changed them (docs/l2.md "Depth samples"). max_message: the
        records a message may hold between its BEGIN and END, as pass 1 (scan) took it: a
        longer one is incomplete, and no more of it than that is held while it is read."""
        check_max_message(max_message)
        if market not in SEQUENCE_RULES:
            raise ValueError(f"market {market!r}: expected one of {', '.join(map(repr, SEQUENCE_RULES))}")
        if depth_levels < 0 or depth_every_ns < 0 or (depth_every_ns and not depth_levels):
            raise ValueError(f"depth samples need levels > 0 and an interval >= 0 (0: after every change; got "
                             f"{depth_levels} levels every {depth_every_ns} ns)")
        self.market = market
        self.depth_levels, self.depth_every_ns = int(depth_levels), int(depth_every_ns)
        self.sizing = sizing
        self.symbols = list(symbols)
        if any(not 0 <= s < len(symbols) for s in sizing):
            raise ValueError(f"a book for a symbol index beyond the {len(symbols)} symbol(s)")
        nsym = len(symbols)  # a record of a higher index is reported as unknown_symbol
        self.nsym = nsym
        self.max_message = int(max_message)
        self.session = Session(max(0, max(sizing, default=0)))
        self.base = np.full(nsym, -1, _I64)
        cores, ids, reals = [], [], []
        has_book = np.zeros(nsym, np.uint8)
        ladder = np.zeros(nsym, np.uint8)
        band_low = np.zeros(nsym, _I64)
        tick = np.ones(nsym, _I64)
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
            has_book[s], ladder[s], band_low[s], tick[s] = 1, z.mode == "ladder", z.band_low, z.tick
            g += len(z.prices)
        self.g_core = np.concatenate(cores) if cores else np.empty(0, _I64)
        self.g_id = np.concatenate(ids) if ids else np.empty(0, np.uint64)
        self.g_real = np.concatenate(reals) if reals else np.empty(0, _I64)
        self.g_sym = np.repeat(np.array(sorted(sizing), _I64), [len(sizing[s].prices) for s in sorted(sizing)]) \
            if sizing else np.empty(0, _I64)
        self._c = core.L2Core(self.session._s, n_symbols=nsym, symbol=self.g_sym, real=self.g_real,
                              core=self.g_core, order_id=self.g_id, has_book=has_book, ladder=ladder,
                              band_low=band_low, tick=tick, ticker_history=ticker_history,
                              compare_tickers=compare_tickers, sequence=SEQUENCE_RULES[market],
                              depth_levels=self.depth_levels, depth_every_ns=self.depth_every_ns,
                              desync_rows=3 * max([z.capacity for z in sizing.values()], default=0) + 4096,
                              max_message=self.max_message)
        self.counters = Counters()
        self.session.set_timing(bool(timing), every=max(1, int(timing)))  # timing: 0 off, N every Nth event
        self.timing = timing
        self.compare_tickers = compare_tickers
        self.next_index = 0
        self.replayed = 0  # records replayed: the index of the first one not yet (a group may wait)
        self._carry = np.empty(0, lobc.RECORD_DTYPE)
        self._carry_idx = 0
        self._desyncs_by_symbol = np.zeros(nsym, _I64)
        self.ticker_stats = {"tickers": 0, "points": 0, "comparable": 0, "matches": 0, "price_matches": 0,
                             "not_comparable": {}}

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
            p, q, c = v.depth_arrays(side, max(1, v.order_count))
            assert (c == 1).all(), "one order per level"
            res.append(list(zip(z.from_core(p).tolist(), q.tolist())))
        return res[0], res[1]

    @property
    def state(self) -> np.ndarray:
        """Per symbol: 0 not yet synced, 1 synced, 2 unsynced (after a GAP)."""
        return self._c.symbols()["state"]

    @property
    def last_u(self) -> np.ndarray:
        return self._c.symbols()["last_u"]

    @property
    def per_symbol(self) -> dict[int, dict]:
        y = self._c.symbols()
        return {s: {"messages": int(y["messages"][s]), "desyncs": int(self._desyncs_by_symbol[s]),
                    "skipped": int(y["skipped"][s])} for s in range(self.nsym)}

    # ------------------------------------------------------------ feeding

    def feed(self, records: np.ndarray) -> dict[str, dict]:
        n = len(records)
        first = self.next_index - len(self._carry)
        self.next_index += n
        if len(self._carry):
            records = np.concatenate([self._carry, records])
        cut = self._cut(records)
        self._carry = records[cut:].copy()
        return self._process(records[:cut], first) if cut else {}

    def feed_from(self, read, chunk: int, *, ahead: bool = False):
        """The same as feed() of each `chunk` records of a stream in turn, yielding what each
        returns: read(out) fills `out` with the stream's next records (fewer only at its end;
        lobc.ChunkReader.reader() reads a file's straight into it). Two buffers take turns:
        the group a chunk leaves unfinished is copied to the front of the other one and the
        next records are read in behind it, before this chunk is replayed; with ahead=True
        that read runs on a thread meanwhile (read must then be called from one thread at a
        time, which it is). One C call per chunk."""
        if len(self._carry):
            raise ValueError("feed_from: records already pending from feed()")
        R = lobc.RECORD_DTYPE.itemsize
        spare = max(4096, chunk // 8)  # room for the unfinished group a chunk leaves
        bufs = [np.empty(chunk + spare, lobc.RECORD_DTYPE) for _ in range(2)]
        pool = ThreadPoolExecutor(1, thread_name_prefix="lobreplay-read") if ahead else None

        def start(buf: np.ndarray, at: int):  # the next records read into buf[at:], now or on the thread
            if pool is None:
                got = read(buf[at:at + chunk])
                return lambda: got
            return pool.submit(read, buf[at:at + chunk]).result

        try:
            turn, fill, first = 0, 0, self.next_index  # records in bufs[turn]; the index of its first
            held = 0  # records at its front known to be one unfinished message (its BEGIN, its levels)
            pending = start(bufs[0], 0)
            while True:
                buf = bufs[turn]
                got = pending()
                if not got:  # (the end: what is left is the group at the front)
                    self._carry = buf[:fill].copy()
                    return
                fill += got
                self.next_index += got
                cut = self._cut(buf[:fill], held)
                held = fill - cut if cut < fill and buf["kind"][cut] in _LEVEL else 0
                rest = fill - cut
                if got == chunk:  # more may follow: the unfinished group, then the next records
                    nxt = bufs[1 - turn]
                    if len(nxt) < rest + chunk:  # (doubling: a message that goes on for chunks)
                        nxt = bufs[1 - turn] = np.empty(max(rest + chunk, 2 * len(nxt)), lobc.RECORD_DTYPE)
                    nxt.view(np.uint8)[:rest * R] = buf.view(np.uint8)[cut * R:fill * R]  # (as bytes: fast)
                    pending = start(nxt, rest)
                yield self._process(buf[:cut], first) if cut else {}
                if got < chunk:  # (the end: what is left is the group behind this chunk's cut)
                    self._carry = buf[cut:fill].copy()
                    return
                first, fill, turn = first + cut, rest, 1 - turn
        finally:
            if pool is not None:
                pool.shutdown(wait=True)

    def _cut(self, rec: np.ndarray, held: int = 0) -> int:
        """Where the records held for the next batch start: at the unfinished group at the end
        of rec (_open_tail; held: as there), unless it is a message already longer than
        max_message, which the C side finds incomplete without its END: then none (nothing more
        of it is held, however long it goes on)."""
        cut = _open_tail(rec, self.nsym, held)
        return len(rec) if len(rec) - cut - 1 > self.max_message and rec["kind"][cut] in _LEVEL else cut

    def finish(self) -> dict[str, dict]:
        """Ends the replay: an unfinished message at the end is dropped (counted); pending
        bookTicker comparison points are counted as unresolved."""
        parts = []
        if len(self._carry):
            r = self._carry
            self._carry = np.empty(0, lobc.RECORD_DTYPE)
            parts.append(self._rows(self._timed(lambda: self._c.feed(r, self.next_index - len(r)))))
        parts.append(self._rows(self._timed(self._c.finish)))
        self._sync()
        out = {}
        for p in parts:
            for k, v in p.items():
                out[k] = _cat([out[k], v]) if k in out else v
        return out

    def _process(self, rec: np.ndarray, first: int) -> dict[str, dict]:
        rec = np.ascontiguousarray(rec)
        self.replayed = first + len(rec)  # (after the call: no row is past it)
        out = self._rows(self._timed(lambda: self._c.feed(rec, first)))
        self._sync()
        return out

    def _timed(self, call):
        t = time.perf_counter()
        out = call()
        self.counters.core_seconds += time.perf_counter() - t
        return out

    def _rows(self, raw: dict[str, np.ndarray]) -> dict[str, dict]:
        """The C rows as the report columns, each table sorted by record (stable)."""
        out = {}
        b = raw["bbo"]
        if len(b):
            out["bbo"] = {"record": b["record"], "recv_ns": b["recv_ns"], "exch_ns": b["exch_ns"],
                          "symbol": b["symbol"].astype(np.uint16), "update_id": b["update_id"],
                          "bid_price": b["bid_price"], "bid_qty": b["bid_qty"], "ask_price": b["ask_price"],
                          "ask_qty": b["ask_qty"]}
        d = raw["desyncs"]
        if len(d):
            cd = d["cause"].astype(_I64) << 32 | d["detail"].astype(_I64)
            u, inv = np.unique(cd, return_inverse=True)
            names = np.array([_cause_name(int(x >> 32), int(x & 0xFFFFFFFF)) for x in u.tolist()], object)
            causes = names[inv.reshape(-1)]
            sym = d["symbol"].astype(np.uint16)
            out["desyncs"] = {"record": d["record"], "recv_ns": d["recv_ns"], "exch_ns": d["exch_ns"], "symbol": sym,
                              "cause": causes, "first_id": d["first_id"], "last_id": d["last_id"],
                              "side": d["side"], "price": d["price"], "qty": d["qty"],
                              "other_price": d["other_price"], "other_qty": d["other_qty"]}
            for name, k in zip(*np.unique(causes.astype(str), return_counts=True)):
                self.counters.desyncs[str(name)] = self.counters.desyncs.get(str(name), 0) + int(k)
            mine = sym < self.nsym
            if mine.any():
                np.add.at(self._desyncs_by_symbol, sym[mine].astype(_I64), 1)
        t = raw["trades"]
        if len(t):
            out["trades"] = {"record": t["record"], "recv_ns": t["recv_ns"], "exch_ns": t["exch_ns"],
                             "symbol": t["symbol"].astype(np.uint16), "trade_id": t["trade_id"], "price": t["price"],
                             "qty": t["qty"], "side": t["side"]}
        dp = raw["depth"]
        if len(dp):
            n, book = self.depth_levels, raw["depth_book"]
            out["depth"] = {"record": dp["record"], "recv_ns": dp["recv_ns"], "symbol": dp["symbol"].astype(np.uint16),
                            "update_id": dp["update_id"], "synced": dp["synced"].astype(bool)}
            for i in range(n):
                for side, key in ((0, "bid"), (1, "ask")):
                    out["depth"][f"{key}_price_{i + 1}"] = book[:, (2 * side) * n + i]
                    out["depth"][f"{key}_qty_{i + 1}"] = book[:, (2 * side + 1) * n + i]
        m = raw["mismatches"]
        if len(m):
            out["ticker_mismatches"] = {
                "record": m["record"], "recv_ns": m["recv_ns"], "symbol": m["symbol"].astype(np.uint16),
                "update_id": m["update_id"], "ticker_id": m["ticker_id"],
                "book_bid_price": m["book"][:, 0], "book_bid_qty": m["book"][:, 1],
                "book_ask_price": m["book"][:, 2], "book_ask_qty": m["book"][:, 3],
                "ticker_bid_price": m["ticker"][:, 0], "ticker_bid_qty": m["ticker"][:, 1],
                "ticker_ask_price": m["ticker"][:, 2], "ticker_ask_qty": m["ticker"][:, 3]}
        for k, v in out.items():
            r = v["record"]
            if len(r) > 1 and (r[1:] < r[:-1]).any():
                o = np.argsort(r, kind="stable")
                out[k] = {c: a[o] for c, a in v.items()}
            else:
                out[k] = {c: np.ascontiguousarray(a) for c, a in v.items()}
        return out

    def _sync(self) -> None:
        """The counters from the C replay's."""
        c = self._c.counts()
        k = self.counters
        k.messages_applied, k.snapshots_applied = c["messages_applied"], c["snapshots_applied"]
        k.levels_applied, k.levels_skipped = c["levels_applied"], c["levels_skipped"]
        for kind in (Kind.NEW, Kind.CANCEL, Kind.REDUCE, Kind.REPLACE):
            k.events[kind.name] = c["events"][int(kind)]
        k.unchanged_levels, k.zero_qty_unknown_level = c["unchanged_levels"], c["zero_qty_unknown_level"]
        k.messages_skipped = {n: v for n, v in (("update_before_snapshot", c["skipped_before_snapshot"]),
                                                ("unsynced_update_skipped", c["skipped_unsynced"]),
                                                ("sequence_break", c["skipped_sequence_break"])) if v}
        k.trades, k.tickers, k.bbo_changes = c["trades"], c["tickers"], c["bbo_changes"]
        k.crossing_events, k.core_calls = c["crossing_events"], c["core_calls"]
        k.core_events = sum(c["events"])
        st = self.ticker_stats
        st.update(tickers=c["tickers"], points=c["points"], comparable=c["comparable"], matches=c["matches"],
                  price_matches=c["price_matches"])
        st["not_comparable"] = {n: v for n, v in (("no_ticker", c["no_ticker"]),
                                                  ("unresolved_at_gap", c["unresolved_at_gap"]),
                                                  ("unresolved_at_end", c["unresolved_at_end"])) if v}


def _open_tail(rec: np.ndarray, nsym: int, held: int = 0) -> int:
    """Where an unfinished group at the end of rec starts, else len(rec): a BEGIN followed only
    by its level kind's records, or a TICKER_BID followed by nothing, where records of a symbol
    index >= nsym do not count (lob_l2_feed skips them when it matches a BEGIN with its END and
    a TICKER_BID with its TICKER_ASK, so a chunk cut after one must not end the group).
    held: rec[:held] is known to be such a message (its BEGIN first): while the records after
    it go on with it, only they are looked at (a long message is not rescanned every chunk)."""
    n = len(rec)
    if not n:
        return 0
    k, sym = rec["kind"], rec["symbol"]
    if held:  # (in blocks: the message usually ends a few records on, not at the chunk's end)
        lo, lk = held, _LEVEL[int(k[0])]
        while lo < n and ((sym[lo:lo + 4096] >= nsym) | (k[lo:lo + 4096] == lk)).all():
            lo += 4096
        if lo >= n:
            return 0
    # the last record of a known symbol that is not a level: the group's start, if what follows is its own
    hi = n
    while hi > 0:
        lo = max(0, hi - 4096)
        kk = k[lo:hi]
        nl = np.flatnonzero((sym[lo:hi] < nsym) & (kk != lobc.DIFF_LEVEL) & (kk != lobc.SNAPSHOT_LEVEL))
        if len(nl):
            break
        hi = lo
    if hi == 0:
        return n
    p = lo + int(nl[-1])
    kp = int(k[p])
    known = sym[p + 1:] < nsym
    if kp == lobc.TICKER_BID:
        return n if known.any() else p
    if kp in _LEVEL and (k[p + 1:][known] == _LEVEL[kp]).all():
        return p
    return n
