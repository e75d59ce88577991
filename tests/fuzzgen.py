"""Seeded random command streams and a differential driver: lobreplay's C core
against the naive reference book (tests/reference_book.py).

Importable (tests/core/test_differential.py uses :func:`run`) and runnable::

    python -m tests.fuzzgen --commands 1000000 --seed 1
    python tests/fuzzgen.py --commands 100000000 --seed 1            # long run
    python tests/fuzzgen.py --commands 200000 --seed 7 --save s.npy  # keep the stream
    python tests/fuzzgen.py --replay s.npy                           # replay a saved stream

It exits 0 when every event matched and 1 on the first divergence, after
printing a report: seed, event index, the event, both sides' outputs, the
reference book before the event, and (unless --no-minimize) a minimal stream
that reproduces the divergence from empty books.

How a run works
---------------
A run is a sequence of *epochs* (--epoch-len events each).  An epoch has its
own session config drawn from (seed, mode, epoch): instruments 0..max_instrument,
books on some of them, each book with a *style*:

  chaos      tiny bands (1..12 levels, sometimes at the ends of int64, ticks
             from 1 to 2^61+1) and tiny capacities (1..8): EFULL, every
             reject code, ids 0 and 2^64-1, hash-twin ids, garbage in every
             field, prices one off the tick grid, all TIFs crossing all the
             time, FOK/GTC quantities equal to the crossing quantity +-1;
  mixed      medium bands and capacities, mostly resting GTC, the same mix;
  wide       4096..1,000,003 levels with prices at bitmap-word and
             summary-word boundaries and the band edges, so best-price
             searches jump far;
  realistic  capacity 256..4096, a random-walk mid and mostly valid orders
             near it, so books get deep (hundreds of orders) and long FIFO
             queues form (100+ orders at a price); rare sweeps that print
             hundreds of executions in one event.  Realistic books take
             turns: an order flow (plus a few EXEC bursts), or a feed replay
             (FEED-flagged GTC/REPLACE/REDUCE that rest without crossing, the
             unpublished aggressors seen as bursts of EXECs that follow
             price-time priority, now and then a fill that breaks it, a price
             or a size the book does not have, and a stale-book FEED order that
             clears hundreds of orders).

Every style also draws the feed events (docs/core.md, "Feed replays"): EXECs,
mostly of live orders -- the front of a best level (what priority gives), the
orders behind it, worse levels, any live order -- sometimes of dead ids, with
quantities below, equal to and above the order's size, with and without PRICE
(at the order's price or another), some NOCHECK; FEED NEW (mostly GTC, other
tifs are EKIND) and FEED REPLACE priced to cross one or several levels of
stale orders; FEED REDUCE by more than remains; and flags everywhere: bits
outside FEED|PRICE|NOCHECK (EKIND) and known bits where they mean nothing.

Notional MARKET orders (chaos, mixed and wide books, and the realistic order flow) buy
and sell with budgets that mostly run out at a chosen point of their walk: before the
very first maker, inside a maker (the first or a later one), or exactly at the end of one;
inside a maker, often with a remainder that would buy a share of a cheaper bid behind it,
where a sell must stop all the same (docs/core.md; the core went on to that bid until
issue 26, and this reference with it).

Some instrument ids have no book and some events name ids past max_instrument.

Events are generated one at a time against the reference (so CANCEL/REDUCE/
REPLACE/EXEC mostly name ids the reference knows are live, and REDUCE/EXEC
quantities are chosen relative to what remains), collected into a chunk of a
few thousand (sometimes 1..16) and applied to the core with one
``Session.apply`` call (sometimes with a tiny exec_capacity -- which sizes the
desync buffer too -- to exercise the EEXECFULL drain, sometimes without BBO).
Per event the status, filled, resting, n_exec, every execution field, every
desync field and every BBO field are compared; after every chunk the full books
(every level on both sides, every level's FIFO queue, order counts, find() on
live and dead ids) are compared and ``validate()`` is called.  Memory stays
flat: nothing but the current chunk is kept.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import sys
import time

import numpy as np

try:  # imported as tests.fuzzgen (python -m tests.fuzzgen)
    from . import reference_book as rb
except ImportError:  # imported as a top-level module (pytest, python tests/fuzzgen.py)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import reference_book as rb

try:
    import lobreplay
except ImportError:  # running from a checkout without the package on sys.path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import lobreplay

BUY, SELL = rb.BUY, rb.SELL
NEW, CANCEL, REDUCE, REPLACE, EXEC, STATE = rb.NEW, rb.CANCEL, rb.REDUCE, rb.REPLACE, rb.EXEC, rb.STATE
GTC, IOC, FOK, MARKET = rb.GTC, rb.IOC, rb.FOK, rb.MARKET
FEED, PRICE, NOCHECK = rb.FEED, rb.PRICE, rb.NOCHECK
NOTIONAL, STP_RESTING, STP_INCOMING, STP_BOTH = rb.NOTIONAL, rb.STP_RESTING, rb.STP_INCOMING, rb.STP_BOTH

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
UINT32_MAX = 2**32 - 1

# Ids whose products with the 64-bit golden-ratio constant differ by a few
# units share the high bits of a multiplicative (Fibonacci) hash: "hash twins"
# that probe to the same slot with the same tag.
GOLDEN = 0x9E3779B97F4A7C15
GOLDEN_INV = pow(GOLDEN, -1, 2**64)

SPECIAL_IDS = (
    0, 1, 2, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1,
    2**63 - 1, 2**63, 2**64 - 2, UINT64_MAX,
)

# Field order of the events/results/execs/bbo tuples built here: the order of
# the C structs in csrc/core/lob.h.
EVENT_FIELDS = ("id", "new_id", "price", "qty", "instrument", "kind", "side", "tif", "flags")
RESULT_FIELDS = ("filled", "resting", "n_exec", "status")
EXEC_FIELDS = ("maker_id", "taker_id", "price", "qty", "maker_remaining", "event_index", "instrument")
BBO_FIELDS = ("bid_price", "bid_qty", "ask_price", "ask_qty", "bid_count", "ask_count",
              "instrument", "changed")
DESYNC_FIELDS = ("order_id", "found_id", "expected_qty", "found_qty", "expected_price", "found_price",
                 "event_index", "instrument", "cause", "reserved")

# The stream format of --save/--replay (same layout as lob_event).
STREAM_DTYPE = np.dtype([
    ("id", "<u8"), ("new_id", "<u8"), ("price", "<i8"), ("qty", "<i8"),
    ("instrument", "<u4"), ("kind", "u1"), ("side", "u1"), ("tif", "u1"), ("flags", "u1"),
])

STYLES = ("chaos", "mixed", "wide", "realistic")
MODES = ("all",) + STYLES


def _canon(core_dtype, fields):
    """A packed dtype with the core dtype's field types in `fields` order."""
    return np.dtype([(f, core_dtype.fields[f][0]) for f in fields])


_R_RESULT = _canon(lobreplay.RESULT_DTYPE, RESULT_FIELDS)
_R_EXEC = _canon(lobreplay.EXEC_DTYPE, EXEC_FIELDS)
_R_BBO = _canon(lobreplay.BBO_DTYPE, BBO_FIELDS)
_R_DESYNC = _canon(lobreplay.DESYNC_DTYPE, DESYNC_FIELDS)
_R_EVENT = _canon(lobreplay.EVENT_DTYPE, EVENT_FIELDS)
assert _R_EVENT == STREAM_DTYPE, "lob_event layout differs from the fuzz stream format"


def to_core_events(arr: np.ndarray) -> np.ndarray:
    """A STREAM_DTYPE array as an EVENT_DTYPE array (field by field if layouts differ)."""
    if arr.dtype == lobreplay.EVENT_DTYPE:
        return np.ascontiguousarray(arr)
    out = np.zeros(len(arr), lobreplay.EVENT_DTYPE)
    for f in EVENT_FIELDS:
        out[f] = arr[f]
    return out


def events_array(events) -> np.ndarray:
    """Event tuples (EVENT_FIELDS order) -> EVENT_DTYPE array for Session.apply."""
    return to_core_events(np.array(events, dtype=STREAM_DTYPE) if events
                          else np.zeros(0, STREAM_DTYPE))


# ---------------------------------------------------------------------------
# formatting


def _status_name(s):
    return rb.STATUS_NAMES.get(int(s), str(int(s)))


def fmt_flags(flags: int) -> str:
    names = [n for n, bit in (("FEED", FEED), ("PRICE", PRICE), ("NOCHECK", NOCHECK), ("NOTIONAL", NOTIONAL),
                              ("STP_RESTING", STP_RESTING), ("STP_INCOMING", STP_INCOMING)) if flags & bit]
    if flags & ~rb.KNOWN_FLAGS:
        names.append(hex(flags & ~rb.KNOWN_FLAGS))
    return "|".join(names)


def fmt_event(ev) -> str:
    oid, new_id, price, qty, inst, kind, side, tif, flags = (int(x) for x in ev)
    k = rb.KIND_NAMES.get(kind, f"kind={kind}")
    sd = chr(side) if 32 < side < 127 else str(side)
    t = rb.TIF_NAMES.get(tif, str(tif))
    if kind == NEW:
        body = f"id={oid} side={sd} price={price} qty={qty} tif={t}" + (f" participant={new_id}" if new_id else "")
    elif kind == CANCEL:
        body = f"id={oid}"
    elif kind == REDUCE:
        body = f"id={oid} qty={qty}"
    elif kind == REPLACE:
        body = f"id={oid} new_id={new_id} price={price} qty={qty}"
    elif kind == EXEC:
        body = f"id={oid} qty={qty}" + (f" price={price}" if flags & PRICE else "")
    else:
        body = f"id={oid} price={price} qty={qty}"
    if flags:
        body += f" flags={fmt_flags(flags)}"
    return (f"{k} {body} instrument={inst}   "
            f"[raw: id={oid} new_id={new_id} price={price} qty={qty} instrument={inst} "
            f"kind={kind} side={side} tif={tif} flags={flags}]")


def _fmt_row(row, fields):
    return " ".join(f"{f}={int(v)}" for f, v in zip(fields, row))


def fmt_book(book: rb.RefBook, max_levels=12, max_orders=16) -> str:
    lines = [f"    band [{book.low}, {book.high}] tick {book.tick} capacity {book.capacity}, "
             f"{book.order_count} live orders"]
    for side, name in ((SELL, "asks"), (BUY, "bids")):
        snap = book.snapshot()[side]
        lines.append(f"    {name} ({len(snap)} levels, best first):")
        for price, orders in snap[:max_levels]:
            shown = ", ".join(f"{i}:{q}" for i, q in orders[:max_orders])
            more = f", ... (+{len(orders) - max_orders})" if len(orders) > max_orders else ""
            lines.append(f"      {price}: qty {sum(q for _, q in orders)} "
                         f"[{shown}{more}]")
        if len(snap) > max_levels:
            lines.append(f"      ... {len(snap) - max_levels} more levels")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# session configs


@dataclasses.dataclass
class BookSpec:
    instrument: int
    low: int
    high: int
    tick: int
    capacity: int
    style: str

    @property
    def nlev(self):
        return (self.high - self.low) // self.tick + 1


@dataclasses.dataclass
class EpochConfig:
    max_instrument: int
    books: list  # [BookSpec]
    weights: dict  # instrument -> relative event rate (books only)
    missing_rate: float  # share of events naming an instrument without a book

    def to_json(self):
        return {
            "max_instrument": self.max_instrument,
            "books": [dataclasses.asdict(b) for b in self.books],
        }

    @classmethod
    def from_json(cls, d):
        books = [BookSpec(**b) for b in d["books"]]
        return cls(d["max_instrument"], books, {b.instrument: 1.0 for b in books}, 0.0)

    def make_ref(self) -> rb.RefSession:
        s = rb.RefSession(self.max_instrument)
        for b in self.books:
            s.add_book(b.instrument, b.low, b.high, b.tick, b.capacity)
        return s

    def make_core(self):
        s = lobreplay.Session(self.max_instrument)
        for b in self.books:
            s.add_book(b.instrument, b.low, b.high, b.tick, b.capacity)
        return s

    def describe(self):
        parts = [f"max_instrument={self.max_instrument}"]
        for b in self.books:
            parts.append(f"book {b.instrument} ({b.style}): band [{b.low}, {b.high}] "
                         f"tick {b.tick} capacity {b.capacity}")
        return "; ".join(parts)


def _band(R, style):
    if style == "chaos":
        tick = R.choice((1, 1, 2, 3, 5, 7, 10, 100, 641, 65521, 2**31 - 1, 2**32 - 1, 2**32 + 1,
                         2**33 + 3, 10**12 + 39, 2**61 + 1))
        nlev = R.choice((1, 2, 3, 4, 5, 6, 9, 12))
        cap = R.choice((1, 2, 3, 4, 5, 6, 8))
    elif style == "mixed":
        tick = R.choice((1, 2, 3, 7, 10))
        nlev = R.randint(6, 40)
        cap = R.choice((4, 8, 16, 32, 64))
    elif style == "wide":  # many bitmap words: searches jump far
        tick = R.choice((1, 2, 3, 5, 7, 641, 65521, 65537))
        nlev = R.choice((4096, 4097, 4160, 8193, 65537, 262144, 1_000_003))
        cap = R.choice((16, 64, 256))
    else:
        tick = R.choice((1, 5, 25))
        nlev = R.randint(120, 400)
        cap = R.choice((256, 512, 1024, 4096))
    nlev = min(nlev, (2**64 - 1) // tick + 1)  # the band must fit in int64
    span = tick * (nlev - 1)
    r = R.random()
    if style == "realistic" or r < 0.55:
        low = tick * R.randrange(1, 5000)
    elif r < 0.70:
        low = 0
    elif r < 0.85:
        low = -tick * R.randrange(0, 40) - R.randrange(0, tick)
    elif r < 0.93:
        low = INT64_MAX - span - R.randrange(0, 3)  # band touching the top of int64
    else:
        low = INT64_MIN + R.randrange(0, 3)  # band touching the bottom of int64
    low = max(INT64_MIN, min(low, INT64_MAX - span))  # huge ticks: keep the band in int64
    return low, low + span, tick, cap


def make_config(R: random.Random, mode: str) -> EpochConfig:
    if mode == "all":
        styles = (["chaos"] * R.randint(1, 2) + ["mixed"] * R.randint(1, 2) + ["wide"]
                  + ["realistic"] * R.randint(1, 2))
    elif mode == "realistic":
        styles = ["realistic"] * R.randint(1, 2)
    else:
        styles = [mode] * R.randint(2, 4)
    n_missing = R.randint(1, 2)
    max_instrument = len(styles) + n_missing - 1
    slots = list(range(max_instrument + 1))
    R.shuffle(slots)
    books = []
    weights = {}
    for inst, style in zip(slots, styles):
        low, high, tick, cap = _band(R, style)
        books.append(BookSpec(inst, low, high, tick, cap, style))
        weights[inst] = {"chaos": 1.0, "mixed": 1.5, "wide": 1.5, "realistic": 3.0}[style]
    books.sort(key=lambda b: b.instrument)
    missing_rate = 0.01 if mode == "realistic" else 0.03
    return EpochConfig(max_instrument, books, weights, missing_rate)


# ---------------------------------------------------------------------------
# the generator


class _Inst:
    """Generator state of one instrument's book."""

    __slots__ = ("spec", "book", "low", "high", "tick", "nlev", "pool", "dead", "next_id",
                 "mid", "target", "style", "feed", "burst")

    def __init__(self, spec: BookSpec, book: rb.RefBook):
        self.spec = spec
        self.book = book
        self.low, self.high, self.tick = spec.low, spec.high, spec.tick
        self.nlev = spec.nlev
        self.style = spec.style
        self.pool = []  # ids that rested at some point (most still live)
        self.dead = collections.deque(maxlen=48)  # ids known to have left the book
        self.next_id = 0  # the same counter sequence in every book: ids repeat across books
        self.mid = self.nlev // 2
        self.target = max(1, int(spec.capacity * 0.85))
        self.feed = False  # realistic: replay a feed (FEED-flagged orders, trades as EXEC)
        self.burst = None  # realistic: [side, shares] an unpublished aggressor still takes


def st_passive(st):
    """Share of GTC orders priced on their own side of the band."""
    return 0.5 if st.style == "chaos" else 0.75


class StreamGen:
    """Draws events against a reference session (which it also advances)."""

    def __init__(self, R: random.Random, config: EpochConfig, ref: rb.RefSession):
        self.R = R
        self.config = config
        self.ref = ref
        self.insts = {b.instrument: _Inst(b, ref.books[b.instrument]) for b in config.books}
        feed = R.random() < 0.5  # realistic books take turns: a feed replay, an order flow
        for i in sorted(self.insts):
            if self.insts[i].style == "realistic":
                self.insts[i].feed, feed = feed, not feed
        self.missing = [i for i in range(config.max_instrument + 1) if i not in self.insts]
        table = []
        total = sum(config.weights.values())
        for inst, w in config.weights.items():
            table += [self.insts[inst]] * max(1, round(200 * w / total))
        self.table = table

    # ---- field helpers ------------------------------------------------------

    def _garbage_int64(self):
        R = self.R
        return R.choice((0, -1, 1, INT64_MIN, INT64_MAX, R.randint(INT64_MIN, INT64_MAX),
                         R.randint(-1000, 1000)))

    def _fresh_id(self, st: _Inst):
        R = self.R
        r = R.random()
        if st.style == "realistic":
            r *= 0.9  # almost always the counter
        if r < 0.80:
            st.next_id += 1 if R.random() < 0.9 else R.randint(2, 1000)
            return st.next_id
        if r < 0.87 and st.dead:
            return st.dead[R.randrange(len(st.dead))]  # reuse an id that left the book
        if r < 0.93:
            return R.choice(SPECIAL_IDS)
        if r < 0.95:  # same low bits: stresses hash tables
            return (R.randrange(1, 256) << R.choice((16, 20, 32, 40, 48, 56))) & UINT64_MAX
        if r < 0.98 and st.book.orders:  # a hash twin of a live id
            oid = self._live_id(st)
            return (oid + R.choice((1, 2, 3, -1)) * GOLDEN_INV) & UINT64_MAX
        return R.getrandbits(64)

    def _live_id(self, st: _Inst):
        """A live id of the book (reference's knowledge), or None if it is empty."""
        orders = st.book.orders
        if not orders:
            return None
        pool = st.pool
        R = self.R
        for _ in range(6):
            if not pool:
                break
            j = R.randrange(len(pool))
            oid = pool[j]
            if oid in orders:
                return oid
            pool[j] = pool[-1]
            pool.pop()
            st.dead.append(oid)
        ids = list(orders)
        st.pool = ids[:]
        return ids[R.randrange(len(ids))]

    def _not_live_id(self, st: _Inst):
        R = self.R
        r = R.random()
        if r < 0.5 and st.dead:
            oid = st.dead[R.randrange(len(st.dead))]
        elif r < 0.75:
            oid = R.choice(SPECIAL_IDS)
        else:
            oid = st.next_id + R.randint(1, 50)
        return oid  # may happen to be live: then it is just another valid target

    def _target_id(self, st: _Inst, p_live):
        if self.R.random() < p_live:
            oid = self._live_id(st)
            if oid is not None:
                return oid
        return self._not_live_id(st)

    def _wide_k(self, st: _Inst, lo=0, hi=None):
        """A level index in [lo, hi) of a wide band: uniform, at bitmap word
        boundaries, at summary-word boundaries, at the edges."""
        R = self.R
        hi = st.nlev if hi is None else hi
        r = R.random()
        if r < 0.35:
            k = R.randrange(lo, hi)
        elif r < 0.6:
            k = 64 * R.randrange(lo // 64, hi // 64 + 1) + R.choice((-1, 0, 1, 63))
        elif r < 0.8:
            k = 4096 * R.randrange(lo // 4096, hi // 4096 + 1) + R.choice((-65, -64, -1, 0, 1, 64))
        else:
            k = R.choice((lo, lo + 1, hi - 2, hi - 1))
        return min(hi - 1, max(lo, k))

    def _chaos_price(self, st: _Inst):
        R = self.R
        if R.random() < 0.86:
            if st.style == "wide":
                return st.low + st.tick * self._wide_k(st)
            return st.low + st.tick * R.randrange(st.nlev)
        k = R.randrange(11)
        if k == 0:
            p = st.low - st.tick
        elif k == 1:
            p = st.high + st.tick
        elif k == 2:
            p = st.low - 1
        elif k == 3:
            p = st.high + 1
        elif k <= 5:  # off the grid inside the band (one off a level is the hardest case)
            p = st.low + st.tick * R.randrange(st.nlev)
            if st.tick == 1:
                p = st.high + R.randint(1, 5)
            else:
                p += R.choice((1, -1, st.tick - 1, R.randrange(1, st.tick)))
                if p < st.low:
                    p += st.tick
        elif k == 6:
            p = INT64_MIN
        elif k == 7:
            p = INT64_MAX
        elif k == 8:
            p = st.low - st.tick * R.randrange(1, 1000)
        elif k == 9:
            p = st.high + st.tick * R.randrange(1, 1000)
        else:
            p = 0
        return min(INT64_MAX, max(INT64_MIN, p))

    def _passive_price(self, st: _Inst, side):
        """A price on the resting side of the middle of the band (so books fill up)."""
        R = self.R
        half = st.nlev // 2
        if st.style == "wide":
            k = self._wide_k(st, 0, half + 1) if side == BUY else self._wide_k(st, half, st.nlev)
            return st.low + st.tick * k
        if side == BUY:
            k = R.randrange(0, half + 1) if st.nlev > 1 else 0
        else:
            k = R.randrange(half, st.nlev) if st.nlev > 1 else 0
        return st.low + st.tick * k

    def _chaos_qty(self):
        R = self.R
        r = R.random()
        if r < 0.88:
            return R.randint(1, 8)
        if r < 0.93:
            return R.randint(9, 60)
        if r < 0.955:
            return 0
        if r < 0.98:
            return R.choice((-1, -R.randint(2, 100), INT64_MIN))
        return R.choice((2**31, 2**32 + 1, 2**40))

    def _reduce_qty(self, st: _Inst, oid, chaos: bool):
        R = self.R
        o = st.book.orders.get(oid)
        rem = o.qty if o is not None else R.randint(1, 10)
        r = R.random()
        if not chaos:
            return R.randint(1, rem) if r < 0.85 else rem
        if r < 0.45:
            return R.randint(1, max(1, rem - 1))
        if r < 0.68:
            return rem  # exactly what remains: the order leaves
        if r < 0.82:
            return rem + R.choice((1, 2, 7, 2**40))  # more than remains: EQTY
        if r < 0.90:
            return R.choice((0, -1, INT64_MIN))
        return R.randint(1, rem)

    def _junk_side_tif(self):
        R = self.R
        if R.random() < 0.3:
            return R.randrange(256), R.randrange(256)
        return 0, 0

    def _junk_flags(self):
        """Flags on any kind: mostly 0; bits outside FEED|PRICE|NOCHECK (EKIND);
        known bits where they may mean nothing (ignored)."""
        R = self.R
        r = R.random()
        if r < 0.012:
            return R.randrange(256)
        if r < 0.024:
            return (1 << R.randrange(3, 8)) | R.randrange(8)  # one unknown bit
        if r < 0.05:
            return R.randrange(1, 8)
        return 0

    def _participant(self, chaos: bool = True):
        """A NEW's participant (new_id): mostly 0 or one of a few ids, so that
        orders meet their own; in chaos also the largest one and too large ones (EKIND)."""
        R = self.R
        r = R.random()
        if r < 0.45:
            return 0
        if not chaos or r < 0.97:
            return R.randint(1, 3)
        return R.choice((UINT32_MAX, UINT32_MAX + 1, R.getrandbits(64)))

    def _stp(self, p: float):
        """An STP mode (flag bits) with probability p."""
        R = self.R
        return R.choice((STP_RESTING, STP_INCOMING, STP_BOTH)) if R.random() < p else 0

    def _walk_budget(self, st: _Inst, side):
        """A notional budget that runs out at a chosen point of the walk an order on `side`
        would make: before the very first maker (less than one share of it), inside a maker
        (on the first one or a later one), or exactly at the end of one (then nothing left,
        or less than a share of the next). Inside a maker, the remainder is often between
        the next maker's price and this one's: a sell walking down the bids could then afford
        a share of a cheaper bid behind the maker it filled in part, and must stop all the
        same. None if the opposite side is empty or its best price is <= 0."""
        R = self.R
        opp = st.book.levels[SELL if side == BUY else BUY]
        makers = []  # (price, qty) as the walk meets them, up to the first price <= 0
        ends = []  # indices of the last maker of a level
        for p in sorted(opp, reverse=(side == SELL)):
            if p <= 0 or len(makers) >= 64:
                break
            makers += [(p, o.qty) for o in opp[p]]
            ends.append(len(makers) - 1)
        if not makers:
            return None
        r = R.random()
        if r < 0.3:
            j = 0  # the very first maker
        elif r < 0.7:
            j = R.choice(ends)  # a level's last maker: the next one is at the next price
        else:
            j = R.randrange(len(makers))
        spent = sum(p * q for p, q in makers[:j])
        p, q = makers[j]
        nxt = makers[j + 1][0] if j + 1 < len(makers) else None
        r = R.random()
        if r < 0.2:  # less than one share of maker j: it stops before it
            b = spent + R.randrange(p)
        elif r < 0.75:  # part of maker j (at least one share), then a remainder below its price
            k = R.randint(1, q - 1) if q > 1 else 1
            if nxt is not None and nxt < p and R.random() < 0.7:
                rest = R.randrange(nxt, p)  # enough for a share of the cheaper maker behind it
            else:
                rest = R.randrange(p)
            b = spent + k * p + rest if k < q else spent + p * q
        else:  # all of maker j, then nothing, or less than one share of the next
            b = spent + p * q + (R.randrange(nxt) if nxt is not None and R.random() < 0.6 else 0)
        return max(1, min(INT64_MAX, b))

    def _budget(self, st: _Inst, side):
        """A notional budget: one that runs out at a chosen point of the walk (_walk_budget),
        a few times the opposite best price (+- a little), or anything."""
        R = self.R
        opp = st.book.best_price(SELL if side == BUY else BUY)
        r = R.random()
        if r < 0.6:
            b = self._walk_budget(st, side)
            if b is not None:
                return b
        if opp is not None and opp > 0 and r < 0.8:
            b = opp * R.choice((1, 2, 3, R.randint(1, 40))) + R.choice((0, 0, -1, 1, R.randrange(opp)))
        elif r < 0.9:
            b = R.randint(1, 10**6)
        else:
            b = R.choice((INT64_MAX, 2**62, 1, 0, -5))
        return min(INT64_MAX, max(INT64_MIN, b))

    def _clamp(self, p):
        return min(INT64_MAX, max(INT64_MIN, p))

    def _level_order(self, st: _Inst, side, depth=0, pos=0):
        """The order at queue position pos of the depth-th best level of a
        side (clamped to what exists), or None if the side is empty."""
        lv = st.book.levels[side]
        if not lv:
            return None
        if depth == 0:
            p = max(lv) if side == BUY else min(lv)
        else:
            prices = sorted(lv, reverse=(side == BUY))
            p = prices[min(depth, len(prices) - 1)]
        q = lv[p]
        return q[min(pos, len(q) - 1)]

    def _crossing_price(self, st: _Inst, side):
        """A price at which an order on `side` meets one or several levels of the
        opposite side (or a passive price if that side is empty)."""
        R = self.R
        opp = st.book.levels[SELL if side == BUY else BUY]
        if not opp:
            return self._passive_price(st, side)
        prices = sorted(opp, reverse=(side == SELL))  # the opposite side, best first
        k = R.randrange(len(prices)) if R.random() < 0.7 else len(prices) - 1
        p = prices[k]
        if R.random() < 0.3:  # past that level (toward the far end), within the band
            p = min(st.high, p + st.tick) if side == BUY else max(st.low, p - st.tick)
        return p

    def _exec_qty(self, size, chaos: bool):
        """A fill of an order of `size`: below, equal to or above it."""
        R = self.R
        r = R.random()
        if r < 0.45:
            return R.randint(1, max(1, size - 1))
        if r < 0.72:
            return size
        if r < 0.88:
            return size + R.choice((1, 1, 2, R.randint(3, 100), 2**40))
        if r < 0.91:
            return INT64_MAX
        if chaos and r < 0.96:
            return R.choice((0, -1, INT64_MIN))
        return R.randint(1, size)

    def _exec_event(self, st: _Inst, inst: int, chaos: bool = True):
        """EXEC: mostly of a live order -- the one priority gives next (the front
        of its side's best level) or another -- sometimes of a dead id; with
        and without PRICE (at the order's price or another) and NOCHECK."""
        R = self.R
        side = BUY if R.random() < 0.5 else SELL
        if not st.book.levels[side]:
            side = SELL if side == BUY else BUY
        r = R.random()
        if r < 0.42:
            o = self._level_order(st, side)  # consistent with priority
        elif r < 0.52:
            o = self._level_order(st, side, 0, R.randint(1, 3))  # behind the front
        elif r < 0.60:
            o = self._level_order(st, side, R.randint(1, 3))  # a worse level
        elif r < 0.90:
            oid = self._live_id(st)
            o = st.book.orders.get(oid) if oid is not None else None
        else:
            o = None
        if o is None:
            oid, size, oprice = self._not_live_id(st), R.randint(1, 10), self._chaos_price(st)
        else:
            oid, size, oprice = o.id, o.qty, o.price
        qty = self._exec_qty(size, chaos)
        flags = NOCHECK if R.random() < 0.15 else 0
        if R.random() < 0.45:
            flags |= PRICE
            if R.random() < 0.7:
                price = oprice
            else:
                price = self._clamp(R.choice((oprice + st.tick, oprice - st.tick, oprice + 1,
                                              self._chaos_price(st), self._garbage_int64())))
        else:  # price is not read without PRICE
            price = 0 if R.random() < 0.6 else R.choice((oprice, self._garbage_int64()))
        side = tif = 0
        new_id = 0
        if chaos:
            flags |= self._junk_flags()
            side, tif = self._junk_side_tif()
            if R.random() < 0.1:
                new_id = R.getrandbits(64)
        return (oid, new_id, price, qty, inst, EXEC, side, tif, flags)

    def _chaos_event(self, st: _Inst, inst: int):
        R = self.R
        r = R.random()
        flags = self._junk_flags()
        if r < 0.012:  # a trading state change, sometimes with a bad qty
            qty = R.choice((0, 1, 1, 0, 2, -1, self._chaos_qty()))
            return (R.choice(SPECIAL_IDS), 0, self._garbage_int64(), qty, inst, STATE, 0, 0, flags)
        if r < 0.02:  # unknown kind
            kind = R.choice((0, 7, 9, 127, 255))
            side, tif = R.randrange(256), R.randrange(256)
            return (R.choice(SPECIAL_IDS), R.getrandbits(64), self._garbage_int64(),
                    self._chaos_qty(), inst, kind, side, tif, flags)
        if r < 0.50:  # NEW
            oid = self._live_id(st) if R.random() < 0.05 else None
            if oid is None:
                oid = self._fresh_id(st)
            side = BUY if R.random() < 0.5 else SELL
            if R.random() < 0.03:
                side = R.choice((0, 1, ord("b"), ord("s"), ord("X"), 255))
            feed = R.random() < 0.12
            t = R.random()
            g = 0.40 if st.style == "chaos" else 0.64
            if feed:
                flags |= FEED
                g = 0.9  # a FEED order with another tif: EKIND
            if t < g:
                tif = GTC
            elif t < g + (0.96 - g) * 0.35:
                tif = IOC
            elif t < g + (0.96 - g) * 0.68:
                tif = FOK
            elif t < 0.96:
                tif = MARKET
            else:
                tif = R.choice((4, 5, 128, 255))
            if feed and side in (BUY, SELL) and R.random() < 0.6:
                price = self._crossing_price(st, side)  # stale orders to remove
            elif tif == MARKET and R.random() < 0.6:
                price = self._garbage_int64()
            elif tif == GTC and R.random() < st_passive(st):
                price = self._passive_price(st, side)
            else:
                price = self._chaos_price(st)
            qty = self._chaos_qty()
            if tif in (GTC, FOK, IOC, MARKET) and side in (BUY, SELL) and R.random() < 0.15:
                # exactly the crossing quantity, or one share off: the FOK/EFULL edges
                limit = None if tif == MARKET else price
                avail = st.book.crossing_qty(side, limit)
                if avail > 0:
                    qty = avail + R.choice((-1, 0, 0, 1))
            participant = self._participant()
            if not feed:
                flags |= self._stp(0.35)
            elif R.random() < 0.03:
                flags |= self._stp(1.0)  # STP with FEED: EKIND
            if tif == MARKET and side in (BUY, SELL) and R.random() < 0.4:
                flags |= NOTIONAL
                if not st.book.levels[SELL if side == BUY else BUY] and R.random() < 0.8:
                    side = SELL if side == BUY else BUY  # mostly a side with makers to walk
                qty = self._budget(st, side)
            elif R.random() < 0.01:
                flags |= NOTIONAL  # on another tif: EKIND
            return (oid, participant, price, qty, inst, NEW, side, tif, flags)
        if 0.74 <= r < 0.86:
            return self._exec_event(st, inst)
        side, tif = self._junk_side_tif()
        if r < 0.62:  # CANCEL: qty and price are ignored
            oid = self._target_id(st, 0.85)
            qty = R.randint(1, 9) if R.random() < 0.7 else self._garbage_int64()
            price = 0 if R.random() < 0.7 else self._garbage_int64()
            return (oid, R.getrandbits(64) if R.random() < 0.2 else 0, price, qty,
                    inst, CANCEL, side, tif, flags)
        if r < 0.74:  # REDUCE
            oid = self._target_id(st, 0.85)
            qty = self._reduce_qty(st, oid, True)
            if R.random() < 0.2:
                flags |= FEED
                o = st.book.orders.get(oid)
                if o is not None and R.random() < 0.4:  # more than remains: the order leaves
                    qty = o.qty + R.choice((1, 1, 3, 2**40, INT64_MAX - o.qty))
            price = 0 if R.random() < 0.7 else self._garbage_int64()
            return (oid, 0, price, qty, inst, REDUCE, side, tif, flags)
        # REPLACE
        oid = self._target_id(st, 0.85)
        n = R.random()
        if n < 0.55:
            new_id = self._fresh_id(st)
        elif n < 0.75:
            new_id = oid
        elif n < 0.88:
            new_id = self._live_id(st)
            if new_id is None:
                new_id = oid
        else:
            new_id = self._not_live_id(st)
        price = self._chaos_price(st)
        o = st.book.orders.get(oid)
        if o is not None and R.random() < 0.15:  # the price it has (the core resizes a last order in place)
            price = o.price
        if R.random() < 0.12:
            flags |= FEED
            o = st.book.orders.get(oid)
            if o is not None and R.random() < 0.6:
                price = self._crossing_price(st, o.side)
        elif R.random() < 0.3:
            flags |= self._stp(1.0)
            o = st.book.orders.get(oid)
            if o is not None and R.random() < 0.6:
                price = self._crossing_price(st, o.side)
        return (oid, new_id, price, self._chaos_qty(), inst, REPLACE, side, tif, flags)

    def _real_qty(self):
        R = self.R
        r = R.random()
        if r < 0.6:
            return R.randint(1, 20)
        if r < 0.88:
            return R.randint(20, 200)
        return 100 * R.randint(1, 10)

    def _real_price(self, st: _Inst, side, aggressive):
        R = self.R
        if aggressive:
            k = st.mid + 1 + R.randrange(4) if side == BUY else st.mid - R.randrange(4)
        else:
            off = int(R.expovariate(0.3))
            k = st.mid - off if side == BUY else st.mid + 1 + off
        k = min(st.nlev - 1, max(0, k))
        return st.low + st.tick * k

    def _burst_exec(self, st: _Inst, inst: int):
        """The next fill of an aggressor the feed does not publish: the front
        order of the best level of st.burst's side, as ITCH reports it (E, or
        C with the price); now and then a fill that breaks priority, a price
        or a size the book does not have, or a NOCHECK fill."""
        R = self.R
        side, left = st.burst
        front = self._level_order(st, side)
        if front is None:
            st.burst = None
            return None
        o, qty, price, flags = front, min(left, front.qty), 0, 0
        if R.random() < 0.3:
            flags, price = PRICE, front.price
        d = R.random()
        if d < 0.012:  # the feed names another order than priority does
            o = self._level_order(st, side, 0, 1) if R.random() < 0.5 else self._level_order(st, side, 1)
            qty = min(left, o.qty)
        elif d < 0.018:  # more than the order has
            qty = o.qty + R.randint(1, 50)
        elif d < 0.024:  # another price
            flags, price = PRICE, self._clamp(front.price + R.choice((st.tick, -st.tick)))
        elif d < 0.03:
            flags |= NOCHECK
        left -= qty
        st.burst = [side, left] if left > 0 and R.random() < 0.97 else None
        return (o.id, 0, price, qty, inst, EXEC, 0, 0, flags)

    def _start_burst(self, st: _Inst, inst: int, sweep=False):
        R = self.R
        side = BUY if R.random() < 0.5 else SELL
        if not st.book.levels[side]:
            return None
        if sweep:  # most of (or more than) the side
            total = sum(o.qty for q in st.book.levels[side].values() for o in q)
            st.burst = [side, max(1, int(total * R.uniform(0.5, 1.3)))]
        else:
            st.burst = [side, self._real_qty()]
        return self._burst_exec(st, inst)

    def _feed_price(self, st: _Inst, side):
        """A passive price that does not meet the opposite best: a consistent
        feed publishes resting orders only (the mid may have moved past it)."""
        p = self._real_price(st, side, False)
        opp = st.book.best_price(SELL if side == BUY else BUY)
        if opp is not None and (p >= opp if side == BUY else p <= opp):
            p = max(st.low, opp - st.tick) if side == BUY else min(st.high, opp + st.tick)
        return p

    def _halt_event(self, st: _Inst, inst: int):
        """While a book is halted: crossing orders (feed and not), the cross's NOCHECK
        executions of live orders, and now and then the resumption; None: an ordinary event."""
        R = self.R
        r = R.random()
        if r < 0.04:
            return (0, 0, 0, 0, inst, STATE, 0, 0, 0)
        side = BUY if R.random() < 0.5 else SELL
        if r < 0.4:  # an order that crosses the displayed book
            tif = GTC if R.random() < 0.9 else R.choice((IOC, FOK, MARKET))
            flags = FEED if tif == GTC and R.random() < 0.8 else 0
            return (self._fresh_id(st), 0, self._real_price(st, side, True), self._real_qty(), inst, NEW, side,
                    tif, flags)
        if r < 0.55 and st.book.orders:  # the cross: a live order (parked or not) executed at one price
            o = st.book.orders[R.choice(list(st.book.orders))]
            qty = o.qty if R.random() < 0.6 else R.randint(1, o.qty)
            price = st.low + st.tick * st.mid
            return (o.id, 0, price, qty, inst, EXEC, 0, 0, NOCHECK | PRICE)
        return None

    def _realistic_event(self, st: _Inst, inst: int):
        R = self.R
        if R.random() < 0.0015 and not st.book.halted:
            return (0, 0, 0, 1, inst, STATE, 0, 0, 0)
        if st.book.halted:
            ev = self._halt_event(st, inst)
            if ev is not None:
                return ev
        if st.burst is not None and R.random() < 0.8:
            ev = self._burst_exec(st, inst)
            if ev is not None:
                return ev
        if R.random() < 0.03:
            st.mid += 1 if R.random() < 0.5 else -1
            if R.random() < 0.01:
                st.mid += R.randint(-6, 6)
            st.mid = min(st.nlev * 3 // 4, max(st.nlev // 4, st.mid))
        r = R.random()
        if r < 0.004:
            return self._chaos_event(st, inst)
        if r < 0.006:
            return self._exec_event(st, inst, False)
        feed = FEED if st.feed else 0
        live = len(st.book.orders)
        if live:
            if r < 0.08:
                oid = self._target_id(st, 0.99)
                qty = self._reduce_qty(st, oid, False)
                o = st.book.orders.get(oid)
                if feed and o is not None and R.random() < 0.01:
                    qty = o.qty + R.randint(1, 100)  # the feed takes more than the book has
                return (oid, 0, 0, qty, inst, REDUCE, 0, 0, feed)
            if r < 0.18:
                oid = self._target_id(st, 0.99)
                o = st.book.orders.get(oid)
                side = o.side if o is not None else BUY
                new_id = oid if R.random() < 0.1 else self._fresh_id(st)
                if feed and R.random() >= 0.01:
                    price = self._feed_price(st, side)
                else:
                    price = self._real_price(st, side, R.random() < 0.1)
                flags = feed or self._stp(0.3)
                return (oid, new_id, price, self._real_qty(), inst, REPLACE, 0, 0, flags)
            c = 0.18 + 0.34 * min(1.5, live / st.target)
            if r < c:
                return (self._target_id(st, 0.99), 0, 0, 0, inst, CANCEL, 0, 0, 0)
            if r < c + (0.1 if feed else 0.03):  # an aggressor, seen through its fills
                ev = self._start_burst(st, inst)
                if ev is not None:
                    return ev
        oid = self._fresh_id(st)
        side = BUY if R.random() < 0.5 else SELL
        u = R.random()
        qty = self._real_qty()
        part = self._participant(False)
        if feed:  # a feed publishes resting orders only; aggressors show as EXECs
            if u < 0.996:
                return (oid, part, self._feed_price(st, side), qty, inst, NEW, side, GTC, FEED)
            if u < 0.9993:  # a stale book: the feed's order meets orders it does not have
                return (oid, 0, self._real_price(st, side, True), qty, inst, NEW, side, GTC, FEED)
            ev = self._start_burst(st, inst, sweep=True)
            if ev is not None:
                return ev
            return (oid, 0, self._feed_price(st, side), qty, inst, NEW, side, GTC, FEED)
        stp = self._stp(0.5) if part else 0  # self-trade prevention on orders that may meet their own
        if u < 0.70:
            return (oid, part, self._real_price(st, side, False), qty, inst, NEW, side, GTC, stp)
        if u < 0.78:
            return (oid, part, self._real_price(st, side, True), qty, inst, NEW, side, GTC, stp)
        if u < 0.89:
            return (oid, part, self._real_price(st, side, True), qty, inst, NEW, side, IOC, stp)
        if u < 0.95:
            return (oid, part, self._real_price(st, side, True), qty, inst, NEW, side, FOK, stp)
        if u < 0.975:  # a notional market order: a budget of a few shares' worth at the mid,
            # or one that runs out at a chosen point of its walk
            budget = self._walk_budget(st, side) if R.random() < 0.6 else None
            if budget is None:
                budget = (st.low + st.tick * st.mid) * self._real_qty() + R.randrange(1000)
            return (oid, part, 0, budget, inst, NEW, side, MARKET, NOTIONAL | stp)
        if u < 0.9997:
            return (oid, part, R.choice((0, INT64_MAX, st.low)), qty, inst, NEW, side, MARKET, stp)
        # a sweep: most of (or more than) the opposite side in one event
        opp = st.book.levels[SELL if side == BUY else BUY]
        total = sum(o.qty for q in opp.values() for o in q)
        qty = max(1, int(total * R.uniform(0.5, 1.3)))
        tif = R.choice((MARKET, IOC, GTC))
        price = st.high if side == BUY else st.low
        return (oid, 0, price, qty, inst, NEW, side, tif, 0)

    def _missing_event(self):
        """An event for an instrument with no book (or past max_instrument)."""
        R = self.R
        mx = self.config.max_instrument
        if self.missing and R.random() < 0.6:
            inst = R.choice(self.missing)
        else:
            inst = R.choice((mx + 1, mx + 2, mx + 1000, 2**24, 2**24 + 1, UINT32_MAX))
        kind = R.choice((NEW, NEW, CANCEL, REDUCE, REPLACE, EXEC, 0, 9))
        side = R.choice((BUY, SELL, 0))
        flags = R.choice((0, 0, 0, FEED, PRICE | NOCHECK, R.randrange(256)))
        return (R.choice(SPECIAL_IDS), R.choice(SPECIAL_IDS), R.randint(-10, 10**6),
                R.randint(-2, 100), inst, kind, side, R.randrange(5), flags)

    def next_event(self):
        R = self.R
        if R.random() < self.config.missing_rate:
            return self._missing_event()
        st = self.table[int(R.random() * len(self.table))]
        inst = st.spec.instrument
        if st.style == "realistic":
            return self._realistic_event(st, inst)
        return self._chaos_event(st, inst)

    def observe(self, ev, status, resting, desyncs=()):
        """Book-keeping after the reference applied ev."""
        kind = ev[5]
        if status != rb.OK:
            return
        st = self.insts.get(ev[4])
        if st is None:
            return
        if kind == NEW:
            if resting > 0:
                st.pool.append(ev[0])
        elif kind == REPLACE:
            if ev[1] != ev[0]:
                st.dead.append(ev[0])
            if resting > 0:
                st.pool.append(ev[1])
        elif kind == CANCEL or (kind in (REDUCE, EXEC) and resting == 0):
            st.dead.append(ev[0])
        for d in desyncs:
            if d[6] == rb.CROSSED:
                st.dead.append(d[0])  # a stale order the feed's order removed
        if len(st.pool) > 2 * len(st.book.orders) + 64:
            st.pool = list(st.book.orders)


# ---------------------------------------------------------------------------
# chunk sources: generated (seeded) or replayed from a file


@dataclasses.dataclass
class Chunk:
    start: int  # index of the chunk's first event in the epoch
    events: list  # event tuples
    results: list  # (filled, resting, n_exec, status) per event
    execs: list  # EXEC_FIELDS tuples, event_index relative to the chunk
    bbo: list  # BBO_FIELDS tuples per event
    desyncs: list  # DESYNC_FIELDS tuples, event_index relative to the chunk
    bbo_on: bool  # ask the core for BBO
    exec_capacity: int | None  # Session.apply(exec_capacity=...)


def _desync_row(d, i, inst):
    """A reference desync tuple as a DESYNC_FIELDS row."""
    return d[:6] + (i, inst, d[6], 0)


def _apply_ref(ref: rb.RefSession, events, observe=None):
    """Run events through the reference; the per-chunk output rows."""
    res, exe, bbo, des = [], [], [], []
    apply = ref.apply
    for i, ev in enumerate(events):
        st, filled, resting, execs, b, desyncs = apply(ev)
        inst = ev[4]
        res.append((filled, resting, len(execs), st))
        for e in execs:
            exe.append(e + (i, inst))
        for d in desyncs:
            des.append(_desync_row(d, i, inst))
        bbo.append(b[:6] + (inst, b[6]))
        if observe is not None:
            observe(ev, st, resting, desyncs)
    return res, exe, bbo, des


def _gen_events(gen: StreamGen, ref: rb.RefSession, n: int):
    """Generate n events one at a time against the reference; the chunk's rows."""
    events, res, exe, bbo, des = [], [], [], [], []
    apply = ref.apply
    nxt = gen.next_event
    observe = gen.observe
    for i in range(n):
        ev = nxt()
        events.append(ev)
        st, filled, resting, execs, b, desyncs = apply(ev)
        inst = ev[4]
        res.append((filled, resting, len(execs), st))
        for e in execs:
            exe.append(e + (i, inst))
        if desyncs:
            for d in desyncs:
                des.append(_desync_row(d, i, inst))
        bbo.append(b[:6] + (inst, b[6]))
        if st == 0:
            observe(ev, st, resting, desyncs)
    return events, res, exe, bbo, des


class GenSource:
    """The seeded stream of one epoch. chunks() can be iterated again from the
    start (fresh reference) and yields exactly the same chunks."""

    def __init__(self, seed: int, mode: str, epoch: int, n_events: int, tiny_chunks=True):
        self.seed, self.mode, self.epoch, self.n = seed, mode, epoch, n_events
        self.tiny_chunks = tiny_chunks
        self.config = make_config(random.Random(f"config:{seed}:{mode}:{epoch}"), mode)
        self.label = f"seed={seed} mode={mode} epoch={epoch}"

    def chunks(self):
        R = random.Random(f"events:{self.seed}:{self.mode}:{self.epoch}")
        C = random.Random(f"chunks:{self.seed}:{self.mode}:{self.epoch}")
        self.ref = self.config.make_ref()
        gen = self.gen = StreamGen(R, self.config, self.ref)
        done = 0
        while done < self.n:
            r = C.random()
            if r < 0.08 and self.tiny_chunks:
                k = C.randint(1, 16)
            elif r < 0.85:
                k = C.randint(1000, 5000)
            else:
                k = C.randint(5000, 8192)
            k = min(k, self.n - done)
            bbo_on = C.random() >= 0.05
            cap = C.choice((1, 2, 3, 5, 16, 100)) if C.random() < 0.15 else None
            events, res, exe, bbo, des = _gen_events(gen, self.ref, k)
            yield Chunk(done, events, res, exe, bbo, des, bbo_on, cap)
            done += k

    def dead_ids(self, inst):
        st = self.gen.insts.get(inst)
        return list(st.dead) if st is not None else []


class FileSource:
    """One epoch of a saved stream, applied in fixed-size chunks."""

    def __init__(self, arr, config: EpochConfig, chunk: int, label: str):
        self.arr, self.config, self.chunk, self.label = arr, config, chunk, label
        self.n = len(arr)

    def chunks(self):
        self.ref = self.config.make_ref()
        done = 0
        while done < self.n:
            k = min(self.chunk, self.n - done)
            events = np.asarray(self.arr[done:done + k]).astype(STREAM_DTYPE).tolist()
            res, exe, bbo, des = _apply_ref(self.ref, events)
            yield Chunk(done, events, res, exe, bbo, des, True, None)
            done += k

    def dead_ids(self, inst):
        return []


# ---------------------------------------------------------------------------
# comparison


@dataclasses.dataclass
class Mismatch:
    what: str  # "event", "book", "validate", "exception"
    index: int | None  # event index in the chunk (event mismatches)
    instrument: int | None
    lines: list


def _rows(arr, fields):
    return [tuple(int(x) for x in r) for r in arr[list(fields)].tolist()] if len(arr) else []


def compare_chunk(chunk: Chunk, out) -> Mismatch | None:
    """First event of the chunk whose core outputs differ from the reference's."""
    n = len(chunk.events)
    res = out.results
    if len(res) != n:
        return Mismatch("exception", None, None, [f"core returned {len(res)} results for {n} events"])
    ref_res = np.array(chunk.results, dtype=_R_RESULT) if n else np.zeros(0, _R_RESULT)
    bad = np.zeros(n, bool)
    for f in RESULT_FIELDS:
        bad |= res[f] != ref_res[f]
    first = int(np.argmax(bad)) if bad.any() else n
    if chunk.bbo_on:
        if out.bbo is None or len(out.bbo) != n:
            return Mismatch("exception", None, None, ["core returned no/short BBO array with bbo=True"])
        ref_bbo = np.array(chunk.bbo, dtype=_R_BBO) if n else np.zeros(0, _R_BBO)
        badb = np.zeros(n, bool)
        for f in BBO_FIELDS:
            badb |= out.bbo[f] != ref_bbo[f]
        if badb.any():
            first = min(first, int(np.argmax(badb)))
    elif out.bbo is not None:
        return Mismatch("exception", None, None, ["core returned a BBO array with bbo=False"])
    for core_rows, ref_rows, dtype, fields in ((out.execs, chunk.execs, _R_EXEC, EXEC_FIELDS),
                                               (out.desyncs, chunk.desyncs, _R_DESYNC, DESYNC_FIELDS)):
        if core_rows is None:
            return Mismatch("exception", None, None, ["core returned no desync array"])
        j = _first_row_diff(core_rows, ref_rows, dtype, fields, n)
        if j is not None:
            first = min(first, j)
    if first >= n:
        return None
    return _event_mismatch(chunk, out, first)


def _first_row_diff(core_rows, ref_rows, dtype, fields, n):
    """Event index of the first row (execution or desync) that differs, or None."""
    ref_arr = np.array(ref_rows, dtype=dtype) if ref_rows else np.zeros(0, dtype)
    m = min(len(core_rows), len(ref_arr))
    bad = np.zeros(m, bool)
    for f in fields:
        bad |= core_rows[f][:m] != ref_arr[f][:m]
    j = int(np.argmax(bad)) if bad.any() else (m if len(core_rows) != len(ref_arr) else None)
    if j is None:
        return None
    cands = []
    if j < len(ref_arr):
        cands.append(int(ref_arr["event_index"][j]))
    if j < len(core_rows):
        cands.append(int(core_rows["event_index"][j]))
    return min(min(cands), n - 1)


def _fmt_desync(d):
    cause = rb.CAUSE_NAMES.get(d[8], str(d[8]))
    return f"desync {cause} " + _fmt_row(d, DESYNC_FIELDS)


def _event_mismatch(chunk, out, i):
    ev = chunk.events[i]
    rr = chunk.results[i]
    cr = tuple(int(out.results[f][i]) for f in RESULT_FIELDS)
    lines = []
    diffs = [f"{f}: core={c} ref={r}" for f, c, r in zip(RESULT_FIELDS, cr, rr) if c != r]
    ref_e = [e for e in chunk.execs if e[5] == i]
    core_e = _rows(out.execs[out.execs["event_index"] == i], EXEC_FIELDS)
    ref_d = [d for d in chunk.desyncs if d[6] == i]
    core_d = _rows(out.desyncs[out.desyncs["event_index"] == i], DESYNC_FIELDS)
    lines.append("reference: status=%s filled=%d resting=%d n_exec=%d"
                 % (_status_name(rr[3]), rr[0], rr[1], rr[2]))
    for e in ref_e:
        lines.append("    exec " + _fmt_row(e, EXEC_FIELDS))
    for d in ref_d:
        lines.append("    " + _fmt_desync(d))
    if chunk.bbo_on:
        lines.append("    bbo  " + _fmt_row(chunk.bbo[i], BBO_FIELDS))
    lines.append("core:      status=%s filled=%d resting=%d n_exec=%d"
                 % (_status_name(cr[3]), cr[0], cr[1], cr[2]))
    for e in core_e:
        lines.append("    exec " + _fmt_row(e, EXEC_FIELDS))
    for d in core_d:
        lines.append("    " + _fmt_desync(d))
    if chunk.bbo_on and out.bbo is not None:
        cb = tuple(int(out.bbo[f][i]) for f in BBO_FIELDS)
        lines.append("    bbo  " + _fmt_row(cb, BBO_FIELDS))
        diffs += [f"bbo.{f}: core={c} ref={r}" for f, c, r in zip(BBO_FIELDS, cb, chunk.bbo[i]) if c != r]
    if core_e != ref_e:
        diffs.append("executions differ")
    if core_d != ref_d:
        diffs.append("desyncs differ")
    return Mismatch("event", i, ev[4], ["differences: " + "; ".join(diffs)] + lines)


def compare_books(core, ref: rb.RefSession, config: EpochConfig, dead_ids=lambda inst: [],
                  R: random.Random | None = None) -> Mismatch | None:
    """Full books: validate(), order counts, every level on both sides, every
    level's queue, best(), find() on a sample of live and dead ids."""
    R = R or random.Random(0)
    for spec in config.books:
        inst = spec.instrument
        rbk = ref.books[inst]
        try:
            v = core.book(inst)
            v.validate()
        except lobreplay.LobError as e:
            return Mismatch("validate", None, inst, [f"instrument {inst}: validate() raised {e!r}"])
        if v.order_count != rbk.order_count:
            return Mismatch("book", None, inst, [f"instrument {inst}: order_count core={v.order_count} "
                                                 f"ref={rbk.order_count}"])
        for side in (BUY, SELL):
            name = "bids" if side == BUY else "asks"
            cd = v.depth(side, rbk.order_count + 1)
            rd = rbk.depth(side)
            if cd != rd:
                return Mismatch("book", None, inst, [f"instrument {inst} {name} levels differ",
                                                     f"  core: {cd[:20]}", f"  ref:  {rd[:20]}"])
            cb, rbb = v.best(side), rbk.best(side)
            if cb != rbb:
                return Mismatch("book", None, inst, [f"instrument {inst} best {name}: core={cb} ref={rbb}"])
            for price, _, _ in rd:
                co, ro = v.level_orders(price), rbk.level_orders(price)
                if co != ro:
                    return Mismatch("book", None, inst, [f"instrument {inst} queue at {price} ({name}) differs",
                                                         f"  core: {co[:30]}", f"  ref:  {ro[:30]}"])
        ids = list(rbk.orders)
        sample = R.sample(ids, min(12, len(ids))) + list(dead_ids(inst))[-12:] + list(SPECIAL_IDS[:3])
        for oid in sample:
            cf, rf = v.find(oid), rbk.find(oid)
            if cf != rf:
                return Mismatch("book", None, inst, [f"instrument {inst} find({oid}): core={cf} ref={rf}"])
            cp, rp = v.participant(oid), rbk.participant(oid)
            if cp != rp:
                return Mismatch("book", None, inst, [f"instrument {inst} participant({oid}): core={cp} ref={rp}"])
        # an empty level inside the band reports no orders
        for _ in range(2):
            p = spec.low + spec.tick * R.randrange(spec.nlev)
            if rbk.level_side(p) is None and v.level_orders(p) != []:
                return Mismatch("book", None, inst, [f"instrument {inst} level_orders({p}) of an empty "
                                                     f"level returned {v.level_orders(p)}"])
    mx = config.max_instrument
    others = range(mx + 1) if mx <= 4096 else [0, 1, mx // 2, mx - 1, mx] + [R.randrange(mx + 1) for _ in range(8)]
    for inst in others:
        if inst in ref.books:
            continue
        try:
            core.book(inst)
        except lobreplay.LobError:
            continue
        return Mismatch("book", None, inst, [f"core has a book for instrument {inst}, which has none"])
    return None


# ---------------------------------------------------------------------------
# reproducing and minimizing a divergence


def check_stream(config: EpochConfig, events, batch: int | None = None,
                 exec_capacity: int | None = None) -> Mismatch | None:
    """Apply events (tuples) to fresh books on both sides; the first mismatch.
    batch=None: one Session.apply for all; batch=k: k events per call;
    exec_capacity: Session.apply's (executions and desyncs) buffer size."""
    try:
        ref = config.make_ref()
        core = config.make_core()
        step = len(events) if batch is None else batch
        kw = {} if exec_capacity is None else {"exec_capacity": exec_capacity}
        for s in range(0, max(1, len(events)), max(1, step)):
            part = events[s:s + step]
            res, exe, bbo, des = _apply_ref(ref, part)
            chunk = Chunk(s, part, res, exe, bbo, des, True, exec_capacity)
            out = core.apply(events_array(part), bbo=True, **kw)
            mm = compare_chunk(chunk, out)
            if mm is not None:
                mm.index = s + mm.index if mm.index is not None else None
                return mm
        return compare_books(core, ref, config)
    except Exception as e:  # the core (or its Python layer) blew up: also a divergence
        return Mismatch("exception", None, None, [f"{type(e).__name__}: {e}"])


def ddmin(items, fails, deadline):
    """Delta debugging: a (locally) minimal sublist of items for which fails() holds."""
    n = 2
    while len(items) >= 2 and time.monotonic() < deadline:
        size = len(items) // n
        reduced = False
        for i in range(n):
            comp = items[:i * size] + items[(i + 1) * size if i < n - 1 else len(items):]
            if comp and fails(comp):
                items = comp
                n = max(n - 1, 2)
                reduced = True
                break
            if time.monotonic() >= deadline:
                return items
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    # last pass: drop single events
    i = 0
    while i < len(items) and time.monotonic() < deadline and len(items) > 1:
        comp = items[:i] + items[i + 1:]
        if fails(comp):
            items = comp
        else:
            i += 1
    return items


def minimize(config: EpochConfig, candidates, seconds: float):
    """Try candidate streams (name, events); for the first that reproduces in
    one batch or one event per call, shrink it. Returns (name, batch, events) or None."""
    deadline = time.monotonic() + seconds
    for name, events in candidates:
        if not events:
            continue
        for batch in (None, 1):
            if batch == 1 and len(events) > 300_000:
                continue
            if check_stream(config, events, batch) is None:
                continue
            small = ddmin(list(events), lambda ev: check_stream(config, ev, batch) is not None, deadline)
            return name, batch, small
    return None


def repro_text(config: EpochConfig, events, batch, mismatch: Mismatch | None) -> str:
    used = sorted({e[4] for e in events})
    lines = ["import numpy as np, lobreplay",
             f"s = lobreplay.Session({config.max_instrument})"]
    for b in config.books:
        if b.instrument in used:
            lines.append(f"s.add_book({b.instrument}, {b.low}, {b.high}, {b.tick}, {b.capacity})")
    lines.append("ev = np.zeros(%d, lobreplay.EVENT_DTYPE)" % len(events))
    lines.append("# fields: " + ", ".join(EVENT_FIELDS))
    for i, e in enumerate(events):
        lines.append(f"ev[{i}] = {tuple(int(x) for x in e)}  # {fmt_event(e).split('   [')[0]}")
    if batch == 1:
        lines.append("outs = [s.apply(ev[i:i+1], bbo=True) for i in range(len(ev))]")
    else:
        lines.append("out = s.apply(ev, bbo=True)")
        lines.append("print(out.results, out.execs, out.bbo, out.desyncs, sep='\\n')")
    if mismatch is not None:
        if mismatch.index is not None:
            lines.append(f"# reference vs core on ev[{mismatch.index}]:")
        else:
            lines.append(f"# after the last event ({mismatch.what}):")
        lines += ["#   " + ln for ln in mismatch.lines]
    return "\n".join(lines)


def save_stream(path, config: EpochConfig, events):
    arr = np.array(events, dtype=STREAM_DTYPE) if events else np.zeros(0, STREAM_DTYPE)
    np.save(path, arr)
    with open(_sidecar(path), "w") as f:
        json.dump({"n_events": len(arr), "epochs": [dict(start=0, **config.to_json())]}, f, indent=1)


def _sidecar(path):
    return str(path) + ".json"


# ---------------------------------------------------------------------------
# the driver


@dataclasses.dataclass
class Divergence:
    label: str
    epoch_offset: int  # global index of the epoch's first event
    chunk: Chunk
    mismatch: Mismatch
    config: EpochConfig
    before_book: str = ""
    repro: str = ""
    repro_events: list | None = None
    rerun: str = ""

    @property
    def global_index(self):
        if self.mismatch.index is None:
            return None
        return self.epoch_offset + self.chunk.start + self.mismatch.index

    def report(self) -> str:
        c, m = self.chunk, self.mismatch
        out = [f"DIVERGENCE between the core and the reference ({self.label})",
               f"session: {self.config.describe()}"]
        if m.index is not None:
            out.append(f"at event {self.global_index} (chunk of {len(c.events)} events starting at "
                       f"{self.epoch_offset + c.start}, index {m.index} in the batch; "
                       f"bbo={c.bbo_on} exec_capacity={c.exec_capacity})")
            out.append("event: " + fmt_event(c.events[m.index]))
        else:
            out.append(f"after the chunk of {len(c.events)} events starting at "
                       f"{self.epoch_offset + c.start} ({m.what}; bbo={c.bbo_on} "
                       f"exec_capacity={c.exec_capacity})")
        out += m.lines
        if self.before_book:
            out.append(f"reference book of instrument {m.instrument} just before that event:")
            out.append(self.before_book)
        if self.rerun:
            out.append("rerun: " + self.rerun)
        if self.repro:
            out.append("minimal reproduction:")
            out.append(self.repro)
        return "\n".join(out)


def check_source(source, *, epoch_offset=0, book_every=1, saver=None, progress=None):
    """Run one epoch through core and reference. Returns a Divergence or None."""
    config = source.config
    try:
        core = config.make_core()
    except Exception as e:
        return Divergence(source.label, epoch_offset, Chunk(0, [], [], [], [], [], True, None),
                          Mismatch("exception", None, None, [f"creating the books failed: {e!r}"]),
                          config)
    R = random.Random(f"books:{source.label}")
    # neither per-event timing nor prefetching (hints only) may change an outcome
    if R.random() < 0.3 and hasattr(core, "set_timing"):
        core.set_timing(True)
    if hasattr(core, "set_prefetch"):
        core.set_prefetch(R.choice((None, True, False)))
    prev = None  # the previous chunk and its BatchResult: a later call must not change it
    for ci, chunk in enumerate(source.chunks()):
        arr = events_array(chunk.events)
        if saver is not None:
            saver(arr)
        try:
            if chunk.exec_capacity is None:
                out = core.apply(arr, bbo=chunk.bbo_on)
            else:
                out = core.apply(arr, bbo=chunk.bbo_on, exec_capacity=chunk.exec_capacity)
            mm = compare_chunk(chunk, out)
            if mm is None and (ci % book_every == 0):
                mm = compare_books(core, source.ref, config, source.dead_ids, R)
            if mm is None and prev is not None and compare_chunk(*prev) is not None:
                old = compare_chunk(*prev)
                mm = Mismatch("exception", None, None,
                              ["the BatchResult of the previous apply call changed during this one"]
                              + old.lines)
        except Exception as e:
            mm = Mismatch("exception", None, None, [f"{type(e).__name__}: {e}"])
        if mm is not None:
            return Divergence(source.label, epoch_offset, chunk, mm, config)
        prev = (chunk, out)
        if progress is not None:
            progress(len(chunk.events))
    return None


def explain(source, div: Divergence, minimize_seconds: float = 60.0, prefix_limit=3_000_000):
    """Fill in div's book-before-the-event and a minimal reproduction by
    re-iterating the (deterministic) source up to the failing chunk."""
    c, m = div.chunk, div.mismatch
    inst = m.instrument
    config = source.config
    mine = (lambda e: True) if inst is None else (lambda e: e[4] == inst)
    prefix = []  # every earlier event of the instrument (fallback candidate)
    snapshot = config.make_ref().snapshot()
    parts = {}
    if c.start > 0:
        for ch in source.chunks():
            if len(prefix) < prefix_limit:
                prefix += [e for e in ch.events if mine(e)]
            if ch.start + len(ch.events) == c.start:
                snapshot = source.ref.snapshot()  # state at the failing chunk's start
                parts = source.ref.participants()
                break
        else:
            return
    loaded = []
    for i, snap in snapshot.items():
        if inst is None or i == inst:
            loaded += [(oid, parts.get(i, {}).get(oid, 0), price, qty, i, NEW, side, GTC, 0)
                       for oid, side, price, qty in rb.load_events(snap)]
    upto = m.index + 1 if m.index is not None else len(c.events)
    own = [e for e in c.events[:upto] if mine(e)]
    if m.index is not None and inst is not None and inst in config.make_ref().books:
        ref = config.make_ref()
        for ev in loaded + own[:-1]:
            ref.apply(ev)
        div.before_book = fmt_book(ref.books[inst])
    candidates = [("book state at the chunk start + the chunk's events", loaded + own)]
    if len(prefix) < prefix_limit:
        candidates.append(("every event of the instrument since the epoch start", prefix + own))
    if minimize_seconds > 0:
        found = minimize(config, candidates, minimize_seconds)
        if found is None:
            div.repro = ("(no single-instrument stream reproduces it: it depends on the chunking; "
                         "rerun the same seed with --save FILE and --replay FILE)")
        else:
            name, batch, events = found
            mm = check_stream(config, events, batch)
            div.repro_events = events
            div.repro = (f"# {len(events)} events, shrunk from: {name}; "
                         f"{'one batch' if batch is None else 'one event per apply call'}\n"
                         + repro_text(config, events, batch, mm))


class Saver:
    """Writes a run's events to an .npy file (memory-mapped, chunk by chunk)."""

    def __init__(self, path, n_total):
        self.path = path
        self.arr = np.lib.format.open_memmap(path, mode="w+", dtype=STREAM_DTYPE, shape=(n_total,))
        self.n = 0
        self.epochs = []

    def epoch(self, config):
        self.epochs.append(dict(start=self.n, **config.to_json()))

    def __call__(self, arr):
        k = len(arr)
        a = self.arr[self.n:self.n + k]
        for f in EVENT_FIELDS:
            a[f] = arr[f]
        self.n += k

    def close(self):
        self.arr.flush()
        del self.arr
        with open(_sidecar(self.path), "w") as f:
            json.dump({"n_events": self.n, "epochs": self.epochs}, f, indent=1)


@dataclasses.dataclass
class RunResult:
    commands: int
    seconds: float
    divergence: Divergence | None

    @property
    def ok(self):
        return self.divergence is None


def run(seed: int = 1, mode: str = "all", commands: int = 100_000, epoch_len: int = 2_000_000,
        book_every: int = 1, save: str | None = None, minimize_seconds: float = 60.0,
        progress_every: int = 0, log=sys.stderr) -> RunResult:
    """Generate `commands` events for (seed, mode) and check them epoch by epoch."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    t0 = time.monotonic()
    saver = Saver(save, commands) if save else None
    done = 0
    state = {"next": progress_every, "done": 0}

    def progress(k):
        state["done"] += k
        if progress_every and state["done"] >= state["next"]:
            state["next"] += progress_every
            dt = time.monotonic() - t0
            print(f"[fuzzgen] {state['done']:,}/{commands:,} events, {dt:.0f}s, "
                  f"{state['done'] / max(dt, 1e-9):,.0f} events/s, no divergence",
                  file=log, flush=True)

    epoch = 0
    try:
        while done < commands:
            n = min(epoch_len, commands - done)
            src = GenSource(seed, mode, epoch, n)
            if saver is not None:
                saver.epoch(src.config)
            div = check_source(src, epoch_offset=done, book_every=book_every, saver=saver,
                               progress=progress)
            if div is not None:
                div.rerun = (f"python tests/fuzzgen.py --seed {seed} --mode {mode} "
                             f"--commands {done + div.chunk.start + len(div.chunk.events)} "
                             f"--epoch-len {epoch_len}")
                explain(src, div, minimize_seconds)
                return RunResult(done + div.chunk.start + len(div.chunk.events),
                                 time.monotonic() - t0, div)
            done += n
            epoch += 1
    finally:
        if saver is not None:
            saver.close()
    return RunResult(done, time.monotonic() - t0, None)


def replay(path: str, chunk: int = 4096, minimize_seconds: float = 60.0) -> RunResult:
    """Check a stream saved by --save (or a repro written by --repro)."""
    t0 = time.monotonic()
    with open(_sidecar(path)) as f:
        meta = json.load(f)
    arr = np.load(path, mmap_mode="r")
    n_total = meta["n_events"]
    epochs = meta["epochs"]
    for k, ep in enumerate(epochs):
        start = ep["start"]
        end = epochs[k + 1]["start"] if k + 1 < len(epochs) else n_total
        config = EpochConfig.from_json(ep)
        src = FileSource(arr[start:end], config, chunk, f"replay of {path}, epoch {k}")
        div = check_source(src, epoch_offset=start)
        if div is not None:
            explain(src, div, minimize_seconds)
            return RunResult(start + div.chunk.start + len(div.chunk.events), time.monotonic() - t0, div)
    return RunResult(n_total, time.monotonic() - t0, None)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="fuzzgen", description="Differential fuzz of lobreplay's core against a reference book.")
    ap.add_argument("--commands", type=int, default=1_000_000, help="events to generate (default 1e6)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", choices=MODES, default="all",
                    help="book styles: all (default, a mix of every style), chaos, mixed, wide or realistic")
    ap.add_argument("--epoch-len", type=int, default=2_000_000,
                    help="events per epoch (fresh books and a new config each epoch)")
    ap.add_argument("--book-check-every", type=int, default=1,
                    help="compare full books every K chunks (default every chunk)")
    ap.add_argument("--progress", type=int, default=2_000_000, help="print progress every N events")
    ap.add_argument("--save", metavar="FILE", help="write the generated stream to FILE (.npy + FILE.json)")
    ap.add_argument("--replay", metavar="FILE", help="check a saved stream instead of generating one")
    ap.add_argument("--chunk", type=int, default=4096, help="events per apply call when replaying")
    ap.add_argument("--no-minimize", action="store_true", help="don't shrink a divergence")
    ap.add_argument("--minimize-seconds", type=float, default=120.0)
    ap.add_argument("--repro", metavar="FILE", help="write the minimal reproduction to FILE (.npy + .json)")
    a = ap.parse_args(argv)
    secs = 0.0 if a.no_minimize else a.minimize_seconds
    if a.replay:
        res = replay(a.replay, a.chunk, secs)
        what = f"replay of {a.replay}"
    else:
        print(f"[fuzzgen] seed={a.seed} mode={a.mode} commands={a.commands:,}", file=sys.stderr, flush=True)
        res = run(a.seed, a.mode, a.commands, a.epoch_len, a.book_check_every, a.save, secs, a.progress)
        what = f"seed={a.seed} mode={a.mode}"
    if res.divergence is not None:
        print(res.divergence.report())
        if a.repro and res.divergence.repro_events:
            save_stream(a.repro, res.divergence.config, res.divergence.repro_events)
            print(f"minimal reproduction written to {a.repro} (+ .json); "
                  f"check it with: python tests/fuzzgen.py --replay {a.repro}")
        return 1
    print(f"[fuzzgen] OK: {what}: {res.commands:,} events matched in {res.seconds:.1f}s "
          f"({res.commands / max(res.seconds, 1e-9):,.0f} events/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
