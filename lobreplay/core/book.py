"""Public book API: `Session` (many books, whole arrays per call) and
`OrderBook` (one book, one event per call, for interactive use)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lobreplay.core import _coreapi as core
from lobreplay.errors import BadEventError
from lobreplay.core.events import (BBO_DTYPE, DESYNC_DTYPE, EVENT_DTYPE, EXEC_DTYPE, RESULT_DTYPE, Kind, Side, TIF,
                     as_side, as_tif)
from lobreplay.reports.latency import summarize

__all__ = ["Session", "BookView", "BatchResult", "OrderBook", "Fill"]


@dataclass
class BatchResult:
    """Outputs of Session.apply: per-event results, the executions in trade
    order (event_index is the event's index in the array given to apply), the
    top of book after each event when asked for, and the divergences found in
    feed events (LOB_EXEC, LOB_F_FEED; see docs/core.md)."""
    results: np.ndarray
    execs: np.ndarray
    bbo: np.ndarray | None = None
    desyncs: np.ndarray | None = None
    depth: dict | None = None  # with depth_levels: "event" (index), "prices"/"qtys"/"counts" (rows, 2, N)
    bbo_event: np.ndarray | None = None  # with bbo_changes: the event of each bbo row


SCRATCH_ROWS = 1 << 16  # execution and desync rows kept between apply calls (3 + 4 MiB)


def _touched(a: np.ndarray) -> np.ndarray:
    """a, with every page of its memory written once (one byte per 4 KiB), so that the
    first write of the core to it is not a page fault inside a timed event. Its values
    are left as they were (the core writes every row it returns)."""
    a.view(np.uint8).reshape(-1)[::4096] = 0
    return a


def _join(parts: list, dtype) -> np.ndarray:
    return parts[0] if len(parts) == 1 else (np.concatenate(parts) if parts else np.empty(0, dtype))


def _join_depth(parts: list[dict], n_levels: int) -> dict:
    """Depth rows of several apply calls (BatchResult.depth each) as one: "event", then
    "prices"/"qtys"/"counts" of shape (rows, 2, n_levels)."""
    empty = {"event": np.empty(0, np.uint32), "prices": np.empty((0, 2, n_levels), np.int64),
             "qtys": np.empty((0, 2, n_levels), np.int64), "counts": np.empty((0, 2, n_levels), np.uint32)}
    return {k: np.concatenate([z[k] for z in parts]) if parts else e for k, e in empty.items()}


def _levels(depth_levels) -> int:
    """apply's depth_levels, checked: a whole number of levels >= 0."""
    if isinstance(depth_levels, bool) or not isinstance(depth_levels, (int, np.integer)) or depth_levels < 0:
        raise BadEventError(f"depth_levels: expected a number of levels >= 0, got {depth_levels!r}")
    return int(depth_levels)


class BookView:
    """Queries on one instrument's book (a view: it reflects later events)."""

    def __init__(self, core_book: core.CoreBook, instrument: int):
        self._b = core_book
        self.instrument = instrument
        self.band_low, self.band_high, self.tick, self.capacity = core_book.info()

    @property
    def order_count(self) -> int:
        return self._b.order_count()

    def __len__(self) -> int:
        return self._b.order_count()

    @property
    def halted(self) -> bool:
        """True while the book is halted (a STATE event: orders rest without matching)."""
        return self._b.halted()

    @property
    def parked(self) -> int:
        """Orders that arrived while the book was halted and wait for the resumption."""
        return self._b.parked()

    def best(self, side) -> tuple[int, int, int] | None:
        """(price, total qty, order count) of the best level of a side, or None."""
        return self._b.best(as_side(side))

    def best_bid(self):
        return self.best(Side.BUY)

    def best_ask(self):
        return self.best(Side.SELL)

    def depth(self, side, n: int = 10) -> list[tuple[int, int, int]]:
        """Up to n best levels of a side as (price, qty, count), best first."""
        p, q, c = self.depth_arrays(side, n)
        return list(zip(p.tolist(), q.tolist(), c.tolist()))

    def depth_arrays(self, side, n: int = 10):
        """As depth(), as three numpy arrays (prices, qtys, counts)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise BadEventError(f"n: expected a number of levels >= 0, got {n!r}")
        return self._b.depth(as_side(side), n)

    def level_orders(self, price: int) -> list[tuple[int, int]]:
        """Orders resting at a price as (id, qty), front of the queue first."""
        _check_integer("price", price, -I64, I64 - 1)
        ids, qtys, _ = self._b.level_orders(price)
        return list(zip(ids.tolist(), qtys.tolist()))

    def orders(self, side) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every order resting on a side as numpy arrays (ids, qtys, prices): best price
        first, front of each queue first (one call into the core, whatever the count)."""
        return self._b.orders(as_side(side))

    def find(self, order_id: int) -> tuple[int, int, int] | None:
        """(side, price, qty) of a live order, or None."""
        _check_integer("order_id", order_id, 0, U64)
        return self._b.find(order_id)

    def participant(self, order_id: int) -> int | None:
        """The participant (self-trade prevention) of a live order, 0 for none; None if not live."""
        _check_integer("order_id", order_id, 0, U64)
        return self._b.participant(order_id)

    def validate(self) -> None:
        """Check every structural invariant; raises CorruptBookError."""
        self._b.validate()


class Session:
    """Many books keyed by a small instrument id (0 .. max_instrument), driven
    by whole arrays of events: one C call per chunk."""

    def __init__(self, max_instrument: int = 0):
        self._s = core.CoreSession(max_instrument)
        self.max_instrument = max_instrument
        self._views: dict[int, BookView] = {}
        self._scratch = np.empty(1024, EXEC_DTYPE)
        self._scratch_d = np.empty(1024, DESYNC_DTYPE)
        self._scratch_z = None  # depth output rows (see _depth_scratch)
        self._has_book = np.zeros(max_instrument + 1, bool)

    def add_book(self, instrument: int, band_low: int, band_high: int, tick: int = 1,
                 capacity: int = 1 << 16) -> BookView:
        """Create the book of an instrument over [band_low, band_high] in steps of tick,
        with room for `capacity` live orders; it never grows."""
        self._s.add_book(instrument, band_low, band_high, tick, capacity)
        self._has_book[instrument] = True
        return self.book(instrument)

    def book(self, instrument: int) -> BookView:
        if instrument not in self._views:
            ptr = self._s.book(instrument)
            if ptr is None:
                raise core.exception_for(core.CONSTANTS["LOB_EINSTRUMENT"], f"instrument {instrument}",
                                         instrument=instrument)
            self._views[instrument] = BookView(core.CoreBook(ptr, self._s), instrument)
        return self._views[instrument]

    def depth(self, instruments, n: int = 10):
        """The n best levels of many books in one core call: (prices, qtys, counts),
        each shaped (books, 2, n) with side 0 = bid, 1 = ask, best first, 0 past the last level.
        An instrument without a book is an UnknownInstrumentError (not an empty book)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise BadEventError(f"n: expected a number of levels >= 0, got {n!r}")
        inst = np.asarray(instruments)
        if inst.size and (inst.dtype.kind not in "iu" or inst.min() < 0 or inst.max() > self.max_instrument
                          or not self._has_book[inst].all()):
            bad = next(i for i in inst.ravel().tolist() if not (isinstance(i, int) and 0 <= i <= self.max_instrument
                                                                 and self._has_book[i]))
            raise core.exception_for(core.CONSTANTS["LOB_EINSTRUMENT"], f"instrument {bad!r}", instrument=bad)
        return self._s.depth(inst, n)

    def instruments(self) -> list[int]:
        return [i for i in range(self.max_instrument + 1) if self._s.book(i) is not None]

    def apply(self, events: np.ndarray, *, bbo: bool | np.ndarray = False, exec_capacity: int | None = None,
              results: np.ndarray | None = None, depth_levels: int = 0,
              bbo_changes: bool | np.ndarray = False) -> BatchResult:
        """Apply an EVENT_DTYPE array in order. Rejected events are reported in
        results['status'] and change nothing; they do not stop the batch.

        bbo=True adds the top of book after each event; results= and bbo= may
        also be arrays the caller owns (RESULT_DTYPE, BBO_DTYPE), to reuse them.
        With bbo_changes as well, bbo holds only the rows of the events that changed the
        top of their book, and BatchResult.bbo_event those events' indices (bbo_changes
        may be a uint32 array of one per event, to reuse; bbo's array still needs one row
        per event).

        The core writes executions and desyncs into buffers (by default scratch
        buffers kept by the session, at least one row per event; or
        exec_capacity rows each); if an event could need more room than is
        left, the core stops before it, and this drains the buffers and goes
        on, so the result is the same whatever the capacity.

        depth_levels=N also returns, after every event that changed any of the N best
        levels of either side of its book, those levels (BatchResult.depth)."""
        n = len(events)
        core.check_array(events, EVENT_DTYPE, "events")
        N = _levels(depth_levels)
        if results is None:
            results = np.empty(n, RESULT_DTYPE)
        bbo_arr, bev = self._bbo_outputs(bbo, bbo_changes, n)
        return self._drain(events, None, None, results, bbo_arr, bev, exec_capacity, N)

    def apply_pieces(self, events: np.ndarray, cuts, at_cut=None, *, results: np.ndarray,
                     bbo: np.ndarray | None = None, bbo_changes: np.ndarray | None = None,
                     exec_capacity: int | None = None, depth_levels: int = 0) -> BatchResult:
        """Apply an EVENT_DTYPE array as apply() does, in pieces that end at `cuts` (pairs
        (end, tag), ends in order; what follows the last is one more piece, tagged None),
        each into the same per-event arrays: results (RESULT_DTYPE) and, if given, bbo
        (BBO_DTYPE) and bbo_changes (uint32) need rows for the longest piece only, and are
        written over by the next piece. After each piece (an empty one too),
        at_cut(lo, hi, results[:hi - lo], tag) sees it: events[lo:hi] are applied and the
        rest are not (the replays read the statuses there, or sample the books).

        The executions, desyncs, depth rows and (copied) bbo rows of every piece come back
        as one BatchResult, event indices into `events`, without per-event results (None):
        the same rows as one apply() of the whole array, the same draining of the core's
        buffers (one mechanism: apply is this with one piece)."""
        n = len(events)
        core.check_array(events, EVENT_DTYPE, "events")
        N = _levels(depth_levels)
        ends = [(int(e), tag) for e, tag in cuts]
        if not ends or ends[-1][0] < n:
            ends.append((n, None))
        prev = 0
        for e, _ in ends:
            if not prev <= e <= n:
                raise BadEventError(f"cuts: expected ends in order within 0..{n}, got {e} after {prev}")
            prev = e
        longest = max(b - a for a, b in zip([0] + [e for e, _ in ends], [e for e, _ in ends]))
        core.check_array(results, RESULT_DTYPE, "results", writable=True)
        for name, a in (("results", results), ("bbo", bbo), ("bbo_changes", bbo_changes)):
            if a is not None and len(a) < longest:
                raise BadEventError(f"{name}: {len(a)} rows, the longest piece has {longest}")
        bbo_arr, bev = self._bbo_outputs(bbo if bbo is not None else False,
                                         bbo_changes if bbo_changes is not None else False, longest)
        return self._drain(events, ends, at_cut, results, bbo_arr, bev, exec_capacity, N)

    @staticmethod
    def _bbo_outputs(bbo, bbo_changes, rows: int):
        """apply's bbo= and bbo_changes= as the arrays the core writes (or None), `rows` of them."""
        if isinstance(bbo, np.ndarray):
            core.check_array(bbo, BBO_DTYPE, "bbo", writable=True, length=rows)
            bbo_arr = bbo
        else:
            bbo_arr = np.empty(rows, BBO_DTYPE) if bbo else None
        bev = None
        if bbo_arr is not None and (isinstance(bbo_changes, np.ndarray) or bbo_changes):
            bev = bbo_changes if isinstance(bbo_changes, np.ndarray) else np.empty(rows, np.uint32)
        return bbo_arr, bev

    def _drain(self, events, ends, at_cut, results, bbo_arr, bev, exec_capacity, N: int) -> BatchResult:
        """The one loop of apply and apply_pieces: C calls over events, piece by piece
        (ends: None, one piece whose per-event outputs are the whole arrays; else the pieces'
        (end, tag), each written from row 0 of the per-event arrays), the core's execution,
        desync and depth buffers drained into the result whenever it stops for room, and
        the buffers grown when one event needs more than a whole buffer."""
        n = len(events)
        if exec_capacity is None:  # reuse scratch buffers; rows are copied out
            rows = min(max(n, 1), SCRATCH_ROWS)
            if len(self._scratch) < rows:
                # written once now, so the core never takes a page fault on them (it would be
                # timed as the latency of the event that writes there); capped: a batch with
                # more executions or desyncs than rows is drained and resumed below
                self._scratch = _touched(np.empty(min(max(rows, 2 * len(self._scratch)), SCRATCH_ROWS),
                                                  EXEC_DTYPE))
                self._scratch_d = _touched(np.empty(len(self._scratch), DESYNC_DTYPE))
            execs, desyncs = self._scratch, self._scratch_d
        else:
            execs = np.empty(max(1, exec_capacity), EXEC_DTYPE)
            desyncs = np.empty(max(1, exec_capacity), DESYNC_DTYPE)
        pieces = ends is not None
        parts, dparts, zparts, bparts, eparts = [], [], [], [], []
        zbuf = self._depth_scratch(N, min(n + 1, 1 << 16)) if N else None
        done = lo = 0
        nb = 0  # bbo rows so far (of the piece), with bbo_changes
        for end, tag in ends if pieces else ((n, None),):
            base = lo if pieces else 0  # (the event of the per-event arrays' row 0)
            while True:
                # (a row per event at most: the changes so far leave room for the rest)
                m = end - done
                at = done - base if bev is None else nb
                rc, k, nex, nd, nz, nbo = self._s.apply(events[done:end], results[done - base:end - base], execs,
                                                        None if bbo_arr is None else bbo_arr[at:at + m],
                                                        desyncs, zbuf, None if bev is None else bev[at:at + m])
                if nbo:
                    bev[nb:nb + nbo] += done
                    nb += nbo
                if nz:
                    zparts.append({"event": zbuf[1][:nz] + done,
                                   **{k: a[:nz * 2 * N].reshape(nz, 2, N).copy()
                                      for k, a in zip(("prices", "qtys", "counts"), zbuf[2:])}})
                if nex:
                    part = execs[:nex].copy()
                    part["event_index"] += done
                    parts.append(part)
                if nd:
                    part = desyncs[:nd].copy()
                    part["event_index"] += done
                    dparts.append(part)
                done += k
                if rc == core.CONSTANTS["LOB_OK"]:
                    break
                if k == 0 and nex == 0 and nd == 0 and nz == 0:  # one event needs more room than a whole buffer
                    inst = int(events["instrument"][done])
                    need = (self.book(inst).order_count if inst <= self.max_instrument and self._has_book[inst]
                            else 0) + 3
                    if min(len(execs), len(desyncs)) >= need:  # lob.h: live orders + 3 rows always suffice
                        raise core.exception_for(core.CONSTANTS["LOB_EEXECFULL"],
                                                 f"event {done} of the batch (with room for "
                                                 f"{min(len(execs), len(desyncs))} rows, its book's {need - 3} "
                                                 f"live orders + 3)")
                    execs = np.empty(2 * len(execs), EXEC_DTYPE)
                    desyncs = np.empty(2 * len(desyncs), DESYNC_DTYPE)
                    if exec_capacity is None:
                        self._scratch, self._scratch_d = execs, desyncs
            if pieces:  # (the per-event arrays are the next piece's: what is kept of them, copied)
                if bev is not None and nb:
                    bparts.append(bbo_arr[:nb].copy())
                    eparts.append(bev[:nb].copy())
                elif bev is None and bbo_arr is not None and end > lo:
                    bparts.append(bbo_arr[:end - lo].copy())
                nb = 0
                if at_cut is not None:
                    at_cut(lo, end, results[:end - lo], tag)
                lo = end
        depth = _join_depth(zparts, N) if N else None
        xs, ds = _join(parts, EXEC_DTYPE), _join(dparts, DESYNC_DTYPE)
        if pieces:
            return BatchResult(None, xs, None if bbo_arr is None else _join(bparts, BBO_DTYPE), ds, depth,
                               None if bev is None else _join(eparts, np.uint32))
        if bev is not None:
            return BatchResult(results, xs, bbo_arr[:nb], ds, depth, bev[:nb])
        return BatchResult(results, xs, bbo_arr, ds, depth)

    # ---- latency ----

    def _depth_scratch(self, n_levels: int, rows: int):
        """Depth output rows (at least 2) for apply, kept between calls and written once
        when made; a batch with more changes than rows is drained and resumed."""
        z = self._scratch_z
        if z is None or z[0] != n_levels or len(z[1]) < rows:
            rows = max(2, rows)
            z = (n_levels, _touched(np.empty(rows, np.uint32)), _touched(np.empty(rows * 2 * n_levels, np.int64)),
                 _touched(np.empty(rows * 2 * n_levels, np.int64)), _touched(np.empty(rows * 2 * n_levels, np.uint32)))
            self._scratch_z = z
        return z

    def set_timing(self, on: bool = True, every: int = 1) -> None:
        """Time events inside the core, per kind for the session (3 significant figures) and
        per book (coarse): every event (every=1: one clock reading per event, see clock()), or
        every Nth event of the session (every=N: two readings per timed event; a histogram
        needs thousands of samples, not millions). on=False turns timing off."""
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise BadEventError(f"set_timing: every must be a whole number >= 1, got {every!r}")
        self._s.set_timing(every if on else 0)

    def clock(self, iterations: int = 200_000) -> dict:
        """The clock timing reads (chosen when timing is turned on): "source" TSC (the
        invariant time-stamp counter, calibrated against CLOCK_MONOTONIC) or
        CLOCK_MONOTONIC, "ns_per_tick", and, probed over `iterations` readings,
        "cost_ns" (one reading) and "min_step_ns" (smallest non-zero step)."""
        return self._s.clock(iterations)

    def set_prefetch(self, mode: bool | None = None) -> None:
        """Software prefetching inside apply: True, False, or None (the default:
        on once the books take more than 16 MiB). Results never depend on it."""
        self._s.set_prefetch(-1 if mode is None else int(bool(mode)))

    @property
    def book_bytes(self) -> int:
        """The memory of the books (levels, orders, index, bitmaps): what an event may touch."""
        return self._s.book_bytes()

    def histogram(self, kind: int) -> np.ndarray:
        """Counts per bucket (see lobreplay.reports.latency) for one event kind (0: unknown kinds); a
        Kind, its name ('NEW') or its value."""
        if isinstance(kind, str):
            try:
                kind = Kind[kind.strip().upper()]
            except KeyError:
                raise BadEventError(f"kind: expected one of {', '.join(Kind.__members__)}, got {kind!r}") from None
        _check_integer("kind", kind, 0, 255)
        return self._s.histogram(int(kind))

    def reset_histograms(self) -> None:
        self._s.reset_histograms()

    def book_histogram(self, instrument: int, kind: int) -> np.ndarray:
        """A book's coarse histogram of one kind (4 buckets per power of two)."""
        return self._s.book_histogram(instrument, int(kind))

    def book_histograms(self, instruments) -> np.ndarray:
        """Every kind's coarse histogram of many books in one core call, shaped
        (books, kinds, buckets): [j, kind] is book_histogram(instruments[j], kind)."""
        return self._s.book_histograms(instruments)

    def latency(self) -> dict[str, dict]:
        """Per event kind and overall: count, p50, p90, p99, p99.9, p99.99, max in ns."""
        hists = {k.name: self.histogram(k) for k in Kind}
        out = {name: summarize(h) for name, h in hists.items() if h.any()}
        out["ALL"] = summarize(sum(hists.values()))
        return out


@dataclass
class Fill:
    """What one interactive event did. desyncs: the divergences a feed event found, rows of
    DESYNC_DTYPE as in BatchResult.desyncs (a FEED order that meets the opposite side removes
    each stale order it meets with a CROSSED row and rests whole; docs/core.md)."""
    filled: int
    resting: int
    execs: np.ndarray
    desyncs: np.ndarray = field(default_factory=lambda: core.NO_DESYNCS)

    @property
    def trades(self) -> list[tuple[int, int, int]]:
        """(maker_id, price, qty) of each trade (not the STP records)."""
        x = self.execs[self.execs["qty"] > 0]
        return list(zip(x["maker_id"].tolist(), x["price"].tolist(), x["qty"].tolist()))

    @property
    def stp(self) -> list[tuple[int, int, int]]:
        """(maker_id, price, qty) of each self-trade prevention record: qty = -n, resting
        order maker_id (n shares) cancelled; qty = 0, this order stopped at maker_id."""
        x = self.execs[self.execs["qty"] <= 0]
        return list(zip(x["maker_id"].tolist(), x["price"].tolist(), x["qty"].tolist()))


U64, I64 = (1 << 64) - 1, 1 << 63


def _check_integer(name: str, value, lo: int, hi: int) -> None:
    """A BadEventError naming the argument unless value is an integer in [lo, hi]: prices are
    integers in the feed's units (never floats), ids and quantities whole numbers."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise BadEventError(f"{name}: expected an integer{' (feed units)' if name == 'price' else ''}, "
                            f"got {value!r} ({type(value).__name__})")
    if not lo <= int(value) <= hi:
        raise BadEventError(f"{name}: {int(value)} is outside {lo}..{hi}")


class OrderBook(BookView):
    """One book, one event per call: for notebooks and exploration. Rejects
    raise LobError subclasses. Replays use Session.apply, never this."""

    def __init__(self, band_low: int, band_high: int, tick: int = 1, capacity: int = 1 << 16):
        for name, value, lo, hi in (("band_low", band_low, -I64, I64 - 1), ("band_high", band_high, -I64, I64 - 1),
                                    ("tick", tick, 1, I64 - 1), ("capacity", capacity, 1, (1 << 32) - 1)):
            _check_integer(name, value, lo, hi)
        self.session = Session(0)
        self.session.add_book(0, band_low, band_high, tick, capacity)
        super().__init__(self.session.book(0)._b, 0)

    def _apply(self, kind, order_id, *, new_id=0, side=0, price=0, qty=0, tif=0, flags=0) -> Fill:
        def check_each():  # (names the argument that is not an integer in range)
            ids, top = ("participant", (1 << 32) - 1) if kind == Kind.NEW else ("new_id", U64)
            for name, value, lo, hi in (("order_id", order_id, 0, U64), (ids, new_id, 0, top),
                                        ("price", price, -I64, I64 - 1), ("qty", qty, -I64, I64 - 1),
                                        ("flags", flags, 0, 255)):
                _check_integer(name, value, lo, hi)

        if bool in {type(order_id), type(new_id), type(price), type(qty), type(flags)}:  # (cffi takes True as 1)
            check_each()
        try:
            st, filled, resting, execs, desyncs = self.session._s.apply_one(kind, order_id, new_id, price, qty, 0,
                                                                            side, tif, flags)
        except (TypeError, OverflowError):  # (cffi's words name no argument: find which, off the fast path)
            check_each()
            raise
        if st:
            raise core.exception_for(st, f"{Kind(kind).name} order {order_id}")
        return Fill(filled, resting, execs, desyncs)

    def new(self, order_id: int, side, price: int, qty: int, tif=TIF.GTC, *, participant: int = 0,
            flags: int = 0) -> Fill:
        """Add an order (GTC/IOC/FOK limit, or MARKET, whose price is ignored).
        participant (0: none) and flags (Flag.STP_*, Flag.NOTIONAL with MARKET: qty is then
        a budget in price x quantity): self-trade prevention and notional orders, docs/core.md.
        Flag.FEED (GTC only): the feed says it rests; the orders it meets are stale and leave,
        each reported in Fill.desyncs (CROSSED), as Session.apply reports them."""
        return self._apply(Kind.NEW, order_id, new_id=participant, side=as_side(side), price=price, qty=qty,
                           tif=as_tif(tif), flags=flags)

    def cancel(self, order_id: int) -> Fill:
        return self._apply(Kind.CANCEL, order_id)

    def reduce(self, order_id: int, qty: int) -> Fill:
        """Remove qty shares from a live order, keeping its place in the queue."""
        return self._apply(Kind.REDUCE, order_id, qty=qty)

    def replace(self, order_id: int, new_id: int, price: int, qty: int, *, flags: int = 0) -> Fill:
        """Retire order_id; rest new_id on the same side at price/qty, at the back
        of the queue (it trades first if it crosses). It keeps the old order's
        participant; flags may carry an STP mode (Flag.STP_*), or Flag.FEED (it rests whole;
        the orders it meets are stale and leave, reported in Fill.desyncs)."""
        return self._apply(Kind.REPLACE, order_id, new_id=new_id, price=price, qty=qty, flags=flags)

    def halt(self) -> None:
        """Halt the book, as a venue halts or pauses a symbol: from now on orders rest
        whole without matching (IOC, FOK and MARKET orders are cancelled unfilled), and
        the book may be crossed until resume() (docs/core.md, "Halted books")."""
        self._state(1)

    def resume(self) -> np.ndarray:
        """End a halt: the orders that arrived during it rest in arrival order. Returns the
        desyncs (DESYNC_DTYPE rows): one per opposite order that a resting order still met
        and removed, which a venue's cross should have left none of."""
        return self._state(0)

    def _state(self, halted: int) -> np.ndarray:
        ev = np.zeros(1, EVENT_DTYPE)
        ev["kind"], ev["qty"] = Kind.STATE, halted
        out = self.session.apply(ev)
        st = int(out.results["status"][0])
        if st:
            raise core.exception_for(st, "STATE")
        return out.desyncs

    def __repr__(self) -> str:
        return (f"OrderBook(band {self.band_low}..{self.band_high} tick {self.tick}, "
                f"{self.order_count} orders, bid {self.best_bid()}, ask {self.best_ask()})")
