"""A deterministic, seeded synthetic NASDAQ TotalView-ITCH 5.0 trading day in miniature.

``generate_day(path, n_messages=..., n_symbols=..., seed=...)`` writes a
BinaryFILE stream (optionally gzip) that is shaped like a real day file and
returns a :class:`DayTruth` that says what is in it.

Shape of the day (times are ET, ns since midnight, never decreasing):

* S "O" at about 03:02, then the directory spin: one R per symbol, locates
  1..n in alphabetical order (two test issues, ZVZZT and ZXZZT, with
  authenticity "T"), the H ("T") and Y ("0") spin interleaved about 80 symbols
  behind it, a few L, one V (stock locate 0).
* S "S" at 04:00, order flow from 04:00 to about 20:00 with the real day's mix
  of types (see ``TARGET_MIX``), S "Q" at 09:30 followed by an opening cross,
  S "M" at 16:00 followed by a closing cross, NOII (I) before both crosses, a
  LULD pause (H "P"/"LUDP", J, H "T"), a halt, two Reg SHO (Y "1") changes,
  then a D for every order still live, S "E" at 20:00 and S "C" at 20:05.
* Order flow: symbols drawn with Zipf-like activity; passive adds (A, and F with
  an MPID) near a per-symbol random-walk price, on the $0.01 grid (Price(4)
  tick 100) except a few sub-dollar symbols with tick 1 ($0.0001); deletes,
  partial cancels (X) and replaces (U: new reference, new price and size, same
  side) of live orders; non-displayed trades (P: order reference 0, side "B").
* Executions come from aggressive incoming orders matched against the
  generator's own naive book: best price first, FIFO within a price, one E per
  resting order touched (same timestamp, locate and tracking 2, 4, 6, ...;
  match numbers increasing), then optionally an A for the aggressor's remainder
  at its limit price. A few single-order executions are written as C with
  printable "Y" at the order's own price. Crosses execute resting orders as C
  with printable "N" at the cross price, followed by one Q per symbol.
* Passive adds, replaces and remainder adds never cross (or lock) the opposite
  best at the time they are written. Order references are unique and increasing.

Memory is proportional to the live orders (plus the aggressor-group list when
``record_groups``); messages stream to the writer (about 225 MB peak RSS for a
5M-message day with 350k live orders). Pure Python: about 200-250k messages/s
of CPU time uncompressed, about 150k/s with gzip. Determinism: the same
arguments give the same bytes (the gzip header has mtime 0 and no name).

The price dynamics: each symbol's price is a random walk; passive orders are
placed a few ticks around it (re-anchored on the opposite best when they would
cross), deletes take the staler of two random live orders, aggressors lean in
the direction of the price and sometimes take a whole level, so the book
follows the walk (intraday ranges of about 1-5%).

Command line (benchmark files)::

    python -m lobreplay.testing.itch_synth OUT.itch --messages 5000000 --symbols 1000 --seed 1 \\
        --resting-per-symbol 350 [--gzip] [--truth OUT.truth.json]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from bisect import bisect_left, insort
from dataclasses import asdict, dataclass, field

from lobreplay.itch.writer import ItchWriter, framed_struct

__all__ = ["DayTruth", "FastDayTruth", "generate_day", "generate_day_fast", "TARGET_MIX", "FEATURES", "PRESETS",
           "FAST_PRESETS", "main"]

NS = 1_000_000_000


def _hms(h: int, m: int = 0, s: int = 0, ns: int = 0) -> int:
    return ((h * 60 + m) * 60 + s) * NS + ns


# Shares of the real 12302019.NASDAQ_ITCH50 day the flow is steered towards
# (docs: itch-format.md section 7); the remainder is I, C, Q, L, H, Y, R, S, V, J.
TARGET_MIX = {"A": 0.44, "D": 0.43, "U": 0.08, "E": 0.02, "X": 0.01, "F": 0.005, "P": 0.005}
NOII_SHARE = 0.008           # I messages, spread over the two crosses
C_Y_SHARE = 0.0002           # single-order executions written as C, printable "Y"
TEST_ISSUES = ("ZVZZT", "ZXZZT")
# The real-day features (off unless asked for: a day without them is byte for byte what it was):
# halts = LULD pauses and halts whose displayed orders cross, then a halt cross (C "N" on both
# sides, Q type "H") and H "T"; ipo = a symbol halted from the start, K, H "Q", crossing orders,
# the IPO cross; operational = an h halt ("H" then "T") without a cross; far_off = orders far
# from the market (8x, $199,999.99, $1,000 in a sub-dollar stock), later deleted, and one on a
# test issue that becomes its side's best and trades; mwcb = a W (level 1 breached).
FEATURES = ("halts", "ipo", "operational", "far_off", "mwcb")
MAX_PRICE = 1_999_999_900    # $199,999.99, the highest Price(4) NASDAQ accepts
PRESETS = {
    "real-shape": dict(n_symbols=9000, features=FEATURES),
}
MPIDS = ("GSCO", "UBSS", "VIRT", "FLTU", "CDRG", "NITE", "MAXM", "JPMS", "MSCO", "SUSQ")

# Relative message intensity through the session (hour, weight); piecewise linear.
_INTENSITY = ((4.0, 0.25), (7.0, 0.4), (8.0, 0.8), (9.0, 1.2), (9.49, 2.0), (9.5, 10.0), (9.75, 6.0),
              (10.5, 4.0), (12.0, 2.8), (14.0, 3.0), (15.5, 4.5), (15.9, 9.0), (16.0, 10.0),
              (16.02, 2.0), (16.5, 0.8), (18.0, 0.35), (20.0, 0.2))


@dataclass
class DayTruth:
    """What the generator wrote. Keys of the per-locate dicts are locates (ints).

    aggressor_groups: (timestamp, locate, resting side "B"/"S", [(order_ref,
    executed shares, price), ...] in feed order), one per aggressor of the
    continuous session (E messages, and C "Y" at the order's price).
    cross_groups: (timestamp, locate, resting side, [(order_ref, executed
    shares, cross price), ...], cross type "O"/"C", Q shares) for the C "N"
    executions of the crosses. Both are None when record_groups was off.
    executed_shares counts E and C (cross executions included).
    price_min/price_max: over the prices of A, F, U and the execution prices of C.

    What the real-day features planted (empty lists on a day without them):
    features: the names asked for (see ``FEATURES``).
    halts: one dict per window in which a symbol did not trade continuously: ``kind``
    ("pause": LULD, H "P"; "halt": H "H"; "ipo": halted from the start, K, H "Q";
    "operational": h "H"/"T"), ``locate``, ``start`` and ``end`` (timestamps of the
    messages that open it and of the H "T" or h "T" that ends it), and for the crosses
    ``cross_price``, ``cross_shares`` (the Q's) and ``executions``: [order_ref, shares,
    side] per C "N", in feed order (both sides).
    crossing_orders: the displayed orders planted inside a window that cross the
    opposite best when added: dicts of ``timestamp``, ``locate``, ``order_ref``,
    ``side``, ``price``, ``shares``, ``opposite_best``.
    far_off_orders: orders planted far from the market: ``timestamp``, ``locate``,
    ``order_ref``, ``side``, ``price``, ``shares``, ``why`` ("x8", "max_price",
    "sub_penny_1000" or "best_and_trades": its side's other orders deleted first, then
    it is the best and an incoming order executes ``executed`` shares of it),
    ``deleted_at`` (the timestamp of its D; None if it was executed in full first).
    """
    path: str
    date: str
    seed: int
    gzip: bool
    n_messages: int
    counts: dict
    symbols: dict
    test_issues: list
    ticks: dict
    price_min: dict
    price_max: dict
    peak_live: dict
    peak_live_total: int
    final_live: int
    executed_shares: dict
    n_aggressor_groups: int
    aggressor_groups: list | None
    cross_groups: list | None
    last_order_ref: int
    last_match_number: int
    resting_target: int
    elapsed_s: float = 0.0
    features: list = field(default_factory=list)
    halts: list = field(default_factory=list)
    crossing_orders: list = field(default_factory=list)
    far_off_orders: list = field(default_factory=list)

    _INT_KEYED = ("symbols", "ticks", "price_min", "price_max", "peak_live", "executed_shares")

    def mix(self) -> dict:
        """Share of each message type."""
        return {t: c / self.n_messages for t, c in sorted(self.counts.items())}

    def to_json(self, **kw) -> str:
        return json.dumps(asdict(self), **kw)

    @classmethod
    def from_json(cls, text: str) -> "DayTruth":
        d = json.loads(text)
        for k in cls._INT_KEYED:
            d[k] = {int(a): b for a, b in d[k].items()}
        for k in ("aggressor_groups", "cross_groups"):
            if d[k] is not None:
                d[k] = [(g[0], g[1], g[2], [tuple(f) for f in g[3]], *g[4:]) for g in d[k]]
        return cls(**d)

    def summary(self) -> dict:
        planted = {"halts": len(self.halts), "crossing_orders": len(self.crossing_orders),
                   "far_off_orders": len(self.far_off_orders)} if self.features else {}
        return {**planted,
            "path": self.path, "messages": self.n_messages, "symbols": len(self.symbols), "seed": self.seed,
            "counts": dict(sorted(self.counts.items(), key=lambda kv: -kv[1])),
            "mix_percent": {t: round(100 * s, 3) for t, s in sorted(self.mix().items(), key=lambda kv: -kv[1])},
            "peak_live_total": self.peak_live_total, "final_live": self.final_live,
            "aggressor_groups": self.n_aggressor_groups,
            "executed_shares": sum(self.executed_shares.values()),
            "last_order_ref": self.last_order_ref, "last_match_number": self.last_match_number,
            "elapsed_s": round(self.elapsed_s, 3),
            "messages_per_s": round(self.n_messages / self.elapsed_s) if self.elapsed_s else None,
        }


# ---------------------------------------------------------------------------------------------

_PK = {t: framed_struct(t) for t in "SRHYLVJAFEXDUPCQIKhW"}


def _pad(s: str, n: int) -> bytes:
    return s.encode("ascii").ljust(n, b" ")


def _table(rng: random.Random, pairs, size: int = 4096) -> list:
    """A lookup table of `size` values drawn in proportion to the weights (fast sampling)."""
    vals = [v for v, _ in pairs]
    cum, acc = [], 0.0
    for _, w in pairs:
        acc += w
        cum.append(acc)
    out = []
    for i in range(size):
        u = (i + 0.5) / size * acc
        out.append(vals[min(bisect_left(cum, u), len(vals) - 1)])
    rng.shuffle(out)
    return out


def _make_symbols(rng: random.Random, n: int) -> list[str]:
    n_test = 2 if n >= 8 else 0
    out = set(TEST_ISSUES[:n_test])
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    lengths = _table(rng, ((1, 2), (2, 8), (3, 35), (4, 50), (5, 5)), 1000)
    while len(out) < n:
        k = lengths[int(rng.random() * 1000)]
        s = "".join(letters[int(rng.random() * 26)] for _ in range(k))
        if k == 5:
            s = s[:4] + "W"  # warrants: fifth letter W
        out.add(s)
    return sorted(out)


class _Day:
    def __init__(self, n_messages, n_symbols, seed, resting_per_symbol, record_groups, date, features=()):
        bad = set(features) - set(FEATURES)
        if bad:
            raise ValueError(f"unknown feature(s) {sorted(bad)}; known: {', '.join(FEATURES)}")
        self.features = [f for f in FEATURES if f in features]
        if n_symbols < 1:
            raise ValueError(f"n_symbols must be >= 1, got {n_symbols}")
        if n_symbols > 65535:
            raise ValueError(f"n_symbols must fit a 2-byte stock locate (<= 65535), got {n_symbols}")
        preamble = 3 * n_symbols + 16
        if n_messages < preamble + 100:
            raise ValueError(f"n_messages={n_messages} is too small for {n_symbols} symbols "
                             f"(the directory alone takes {preamble}); use at least {preamble + 100}")
        self.rng = rng = random.Random(seed)
        self.n_messages = n_messages
        self.seed = seed
        self.date = date
        self.record_groups = record_groups
        if resting_per_symbol is None:
            resting_per_symbol = max(2, min(200, n_messages // (n_symbols * 25)))
        self.resting_target = max(1, int(resting_per_symbol * n_symbols))
        self.syms = syms = _make_symbols(rng, n_symbols)
        n = self.n = len(syms)
        # index 0 unused: arrays are indexed by locate
        self.stock8 = [b""] + [_pad(s, 8) for s in syms]
        self.is_test = [False] + [s in TEST_ISSUES for s in syms]
        n_sub = max(1, round(0.06 * n)) if n >= 5 else 0
        order = list(range(1, n + 1))
        rng.shuffle(order)
        sub = set(order[:n_sub]) - {i for i in range(1, n + 1) if self.is_test[i]}
        self.tick = [0] * (n + 1)
        self.ds = [1] * (n + 1)
        self.mid = [0] * (n + 1)
        self.lo = [0] * (n + 1)
        self.hi = [0] * (n + 1)
        self.cap = [0] * (n + 1)       # highest price allowed (sub-dollar symbols stay below $1)
        for loc in range(1, n + 1):
            if loc in sub:
                tk, ds = 1, 3 + int(rng.random() * 10)
                p = int((0.08 + 0.85 * rng.random()) * 10_000)
                lo, hi = 200, 9_800           # stays below $1: sub-penny quoting allowed
            else:
                tk, ds = 100, 1
                dollars = math.exp(math.log(2.0) + rng.random() * (math.log(600.0) - math.log(2.0)))
                if rng.random() < 0.03:
                    dollars *= 8
                p = max(2, int(dollars * 100)) * 100
                lo, hi = max(100 * tk, p // 4), min(p * 4, 1_999_000_000)
            self.tick[loc], self.ds[loc], self.mid[loc] = tk, ds, p
            self.lo[loc], self.hi[loc] = lo, hi
            self.cap[loc] = 9_999 if tk == 1 else 1_999_999_900
        # Zipf-like activity, the test issues at the bottom.
        ranks = [loc for loc in range(1, n + 1) if not self.is_test[loc]]
        rng.shuffle(ranks)
        ranks += [loc for loc in range(1, n + 1) if self.is_test[loc]]
        weights = {loc: 1.0 / (r + 1) ** 0.8 for r, loc in enumerate(ranks)}
        w_mid = sorted(weights.values())[len(weights) // 2]
        for loc in range(1, n + 1):
            if self.is_test[loc]:
                # (with the real-day features, the test issues get the flow of a middling symbol,
                # as NASDAQ's test orders run all day; below the quietest, as on a plain day, they
                # get no entry in the symbol table of a 9,000-symbol day)
                weights[loc] = w_mid if self.features else min(weights.values()) * 0.2
        self.weights = weights
        self.ipo_loc = 0
        if "ipo" in self.features and n >= 8:
            # an IPO: a middling symbol (the sixth busiest), halted from the start, no orders
            # until its quotation period
            self.ipo_loc = sorted((loc for loc in ranks if not self.is_test[loc]), key=lambda x: -weights[x])[5]
        self.sym_table = _table(rng, [(loc, weights[loc]) for loc in range(1, n + 1)], 1 << 16)
        # distance from the price in ticks: a hump a few ticks out, as real books have
        self.depth_table = _table(rng, [(d, (0.6 + 0.25 * min(d, 3)) * 0.86 ** max(0, d - 3))
                                        for d in range(0, 50)], 4096)
        self.size_table = _table(rng, [(100, 40), (200, 12), (300, 6), (400, 3), (500, 6), (1000, 3),
                                       (2000, 1), (5000, 0.3), (50, 3), (25, 2), (10, 3), (1, 3), (5, 2),
                                       (30, 1), (75, 1), (150, 2), (250, 1), (600, 1), (800, 0.7)], 4096)
        self.touch_table = _table(rng, ((1, 58), (2, 20), (3, 9), (4, 5), (5, 3), (6, 2), (8, 2), (12, 1)), 1024)
        self.replace_table = _table(rng, ((0, 30), (1, 20), (-1, 20), (2, 7), (-2, 7), (3, 3), (-3, 3),
                                          (5, 2), (-5, 2)), 1024)
        # state
        self.orders: dict[int, list] = {}      # ref -> [locate, is_buy, price, shares]
        self.live: list[int] = []              # refs for random picks; dead entries removed lazily
        self.bid_lv = [dict() for _ in range(n + 1)]   # price -> {ref: None} in time order
        self.ask_lv = [dict() for _ in range(n + 1)]
        self.bid_keys = [[] for _ in range(n + 1)]     # sorted prices; best bid last
        self.ask_keys = [[] for _ in range(n + 1)]     # sorted negated prices; best ask last
        self.nlive = [0] * (n + 1)
        self.peak = [0] * (n + 1)
        self.pmin = [0] * (n + 1)
        self.pmax = [0] * (n + 1)
        self.execd = [0] * (n + 1)
        self.halted = [False] * (n + 1)
        self.blocked = [False] * (n + 1)   # an IPO before its quotation period: no orders at all
        self.halts: list = []
        self.open_halt: dict = {}          # locate -> its entry in halts while the window is open
        self.crossing: list = []
        self.far: list = []
        self.far_by_ref: dict = {}
        if self.ipo_loc:
            self.halted[self.ipo_loc] = self.blocked[self.ipo_loc] = True
        self.counts = dict.fromkeys("SRHYLVJAFEXDUPCQIKhW", 0)
        self.next_ref = 4_000 + int(rng.random() * 1000)
        self.match = 10_000 + int(rng.random() * 1000)
        self.last_t = 0
        self.emitted = 0
        self.buf: list[bytes] = []
        self.groups: list | None = [] if record_groups else None
        self.cross_groups: list | None = [] if record_groups else None
        self.n_groups = 0
        self.peak_total = 0

    # -- plumbing --------------------------------------------------------------------------

    def _emit(self, t: str, data: bytes, ts: int) -> None:
        self.buf.append(data)
        self.counts[t] += 1
        self.emitted += 1
        self.last_t = ts

    def _flush(self, w: ItchWriter) -> None:
        if self.buf:
            w.write_framed(b"".join(self.buf), len(self.buf))
            self.buf.clear()

    def _price_seen(self, loc: int, p: int) -> None:
        if self.pmin[loc] == 0 or p < self.pmin[loc]:
            self.pmin[loc] = p
        if p > self.pmax[loc]:
            self.pmax[loc] = p

    def _s(self, ts: int, code: bytes) -> None:
        self._emit("S", _PK["S"].pack(12, b"S", 0, 0, ts >> 32, ts & 0xFFFFFFFF, code), ts)

    # -- book helpers (used outside the hot loop) ------------------------------------------

    def _best(self, loc: int, buy: bool):
        keys = self.bid_keys[loc] if buy else self.ask_keys[loc]
        if not keys:
            return None
        return keys[-1] if buy else -keys[-1]

    def _unrest(self, ref: int) -> list:
        o = self.orders.pop(ref)
        loc, buy, price = o[0], o[1], o[2]
        lv = self.bid_lv[loc] if buy else self.ask_lv[loc]
        lvl = lv[price]
        del lvl[ref]
        if not lvl:
            del lv[price]
            keys = self.bid_keys[loc] if buy else self.ask_keys[loc]
            k = price if buy else -price
            keys.pop(bisect_left(keys, k))
        self.nlive[loc] -= 1
        return o

    # -- start of day -----------------------------------------------------------------------

    def preamble(self) -> int:
        rng, n = self.rng, self.n
        t = _hms(3, 1, 30) + int(rng.random() * 180 * NS)
        self._s(t, b"O")
        span = _hms(3, 50) - t
        step = min(280_000_000, span // (3 * n + 20))
        lag = min(80, max(1, n // 3))
        pk_r, pk_h, pk_y = _PK["R"], _PK["H"], _PK["Y"]

        def tick_t():
            nonlocal t
            t += step // 2 + int(rng.random() * step)
            return t

        def r_msg(loc):
            test = self.is_test[loc]
            u = rng.random()
            if test:
                cat, fin, cls, sub, etp, lev = b"Q", b"N", b"C", b"Z ", b"N", 0
            elif u < 0.45:
                cat, fin, cls, sub, etp, lev = (b"Q", b"G", b"S")[int(rng.random() * 3)], b"N", b"C", b"Z ", b"N", 0
            elif u < 0.60:
                cat, fin, cls, sub, etp, lev = b"P", b" ", b"Q", b"I ", b"Y", 1
            else:
                cat = (b"N", b"N", b"N", b"A", b"Z")[int(rng.random() * 5)]
                fin, cls, sub, etp, lev = b" ", (b"C", b"C", b"C", b"A", b"L")[int(rng.random() * 5)], b"Z ", b"N", 0
            nasdaq = cat in (b"Q", b"G", b"S")
            ts = tick_t()
            self._emit("R", pk_r.pack(39, b"R", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc], cat, fin, 100,
                                      b"N", cls, sub, b"T" if test else b"P", b"N" if nasdaq else b" ",
                                      b"Y" if loc == self.ipo_loc else (b"N" if nasdaq else b" "),
                                      b"1" if rng.random() < 0.25 else b"2", etp, lev,
                                      b"N"), ts)

        def hy(loc):
            ts = tick_t()
            ipo = loc == self.ipo_loc
            self._emit("H", pk_h.pack(25, b"H", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc],
                                      b"H" if ipo else b"T", b" ", b"IPO1" if ipo else b"    "), ts)
            if ipo:
                self.open_halt[loc] = {"kind": "ipo", "locate": loc, "start": ts}
            ts = tick_t()
            self._emit("Y", pk_y.pack(20, b"Y", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc], b"0"), ts)

        for loc in range(1, n + 1):
            r_msg(loc)
            if loc > lag:
                hy(loc - lag)
        for loc in range(max(1, n - lag + 1), n + 1):
            hy(loc)
        # a few market participant positions
        pk_l = _PK["L"]
        for _ in range(min(n, 6)):
            loc = self.sym_table[int(rng.random() * 65536)]
            ts = tick_t()
            self._emit("L", pk_l.pack(26, b"L", loc, 0, ts >> 32, ts & 0xFFFFFFFF,
                                      MPIDS[int(rng.random() * len(MPIDS))].encode(), self.stock8[loc],
                                      b"Y" if rng.random() < 0.7 else b"N", b"N", b"A"), ts)
        # MWCB decline levels (Price(8)): 7%, 13%, 20% below a previous S&P 500 close
        close = 3_200 + int(rng.random() * 200)
        lv = [close * (100 - pct) * 1_000_000 for pct in (7, 13, 20)]
        ts = tick_t()
        self._emit("V", _PK["V"].pack(35, b"V", 0, 0, ts >> 32, ts & 0xFFFFFFFF, *lv), ts)
        self._s(_hms(4) + int(rng.random() * 50_000), b"S")
        return self.last_t

    # -- scheduled events ---------------------------------------------------------------------

    def schedule(self) -> list:
        rng = self.rng
        ev = []
        q_t = _hms(9, 30, 0, 70_000 + int(rng.random() * 10_000))
        m_t = _hms(16, 0, 0, 40_000 + int(rng.random() * 10_000))
        ev.append((q_t, 0, "S", b"Q"))
        ev.append((q_t + 60_000, 1, "cross", "O"))
        ev.append((m_t, 0, "S", b"M"))
        ev.append((m_t + 60_000, 1, "cross", "C"))
        # NOII: every 10 s 09:25-09:28 and 15:50-15:55, every 1 s 09:28-09:30 and 15:55-16:00
        part = [loc for loc in range(1, self.n + 1) if not self.is_test[loc]]
        budget = max(2, int(NOII_SHARE * self.n_messages))
        per_cross = max(1, budget // (2 * max(1, len(part))))
        open_slots = [_hms(9, 25, s) for s in range(0, 180, 10)] + [_hms(9, 28, s) for s in range(120)]
        close_slots = [_hms(15, 50, s) for s in range(0, 300, 10)] + [_hms(15, 55, s) for s in range(300)]
        for cross, slots in (("O", open_slots), ("C", close_slots)):
            k = min(per_cross, len(slots))
            chosen = [slots[len(slots) - 1 - (i * len(slots)) // k] for i in range(k)]
            for st in sorted(chosen):
                ev.append((st + 5_000, 2, "noii", cross))
        # trading-status changes on active, non-test symbols
        active = sorted(part, key=lambda loc: -self.weights[loc])
        if len(active) >= 4:
            p_loc, h_loc, y1, y2 = active[1], active[min(3, len(active) - 1)], active[0], active[2]
            t0 = _hms(11, 0) + int(rng.random() * 3600 * NS)
            ev.append((t0, 3, "pause", p_loc))
            ev.append((t0 + 300 * NS + int(rng.random() * NS), 3, "resume", p_loc))
            t1 = _hms(13, 0) + int(rng.random() * 1800 * NS)
            ev.append((t1, 3, "halt", h_loc))
            ev.append((t1 + 900 * NS + int(rng.random() * NS), 3, "resume", h_loc))
            ev.append((_hms(10, 15) + int(rng.random() * 3600 * NS), 4, "regsho", y1))
            ev.append((_hms(12, 15) + int(rng.random() * 3600 * NS), 4, "regsho", y2))
        if self.features:
            ev = self._schedule_features(ev, active)
        ev.sort(key=lambda e: (e[0], e[1]))
        return ev

    def _schedule_features(self, ev: list, active: list) -> list:
        """The real-day features' events (only with features: a plain day draws nothing here)."""
        rng, n, feats = self.rng, self.n, self.features
        S = NS
        spare = [loc for loc in active[4:] if loc != self.ipo_loc]
        rng.shuffle(spare)

        def take():
            return spare.pop() if spare else None

        if "halts" in feats:
            windows = []
            # the day's pause and halt become windows with crossing orders and a halt cross
            for e in ev:
                if e[2] in ("pause", "halt"):
                    windows.append([e[0], None, e[3]])
            for e in ev:
                if e[2] == "resume":
                    for w in windows:
                        if w[2] == e[3] and w[1] is None:
                            w[1] = e[0]
            ev = [e for e in ev if e[2] != "resume"]
            # more at about a real day's frequency: a LULD pause per ~400 symbols, a halt per ~3,000
            for kind, count, secs in (("pause", n // 400, 300), ("halt", n // 3000, 900)):
                for _ in range(count):
                    loc = take()
                    if loc is None:
                        break
                    t0 = _hms(9, 45) + int(rng.random() * 5.5 * 3600 * S)
                    ev.append((t0, 3, kind, loc))
                    windows.append([t0, t0 + secs * S + int(rng.random() * S), loc])
            for t0, t1, loc in windows:
                for k in range(2 + int(rng.random() * 3)):
                    ev.append((t0 + (t1 - t0) * (k + 1) // 6, 3, "plant", (loc, k)))
                ev.append((t1, 3, "xresume", loc))
        if self.ipo_loc:
            loc = self.ipo_loc
            tq = _hms(10) + int(rng.random() * 1800 * S)
            tx = tq + 1800 * S + int(rng.random() * S)
            ev.append((tq, 3, "ipo_quote", (loc, tx)))
            for k in range(4):
                ev.append((tq + (tx - tq) * (k + 2) // 7, 3, "plant", (loc, k)))
            ev.append((tx, 3, "xresume", loc))
        if "operational" in feats:
            loc = take()
            if loc is not None:
                t0 = _hms(13, 30) + int(rng.random() * 3600 * S)
                ev.append((t0, 3, "ohalt", loc))
                ev.append((t0 + 120 * S + int(rng.random() * S), 3, "oresume", loc))
        if "mwcb" in feats:
            ev.append((_hms(14, 45) + int(rng.random() * 600 * S), 4, "mwcb", b"1"))
        if "far_off" in feats:
            penny = [loc for loc in spare if self.tick[loc] == 100]
            sub = [loc for loc in range(1, n + 1) if self.tick[loc] == 1 and not self.is_test[loc]
                   and loc != self.ipo_loc]
            plan = []
            for _ in range(1 + n // 2000):
                for why, pool in (("x8", penny), ("max_price", penny), ("x1/8", penny), ("sub_penny_1000", sub)):
                    if pool:
                        plan.append((why, pool[int(rng.random() * len(pool))]))
            if self.test_locs():
                plan.append(("best_and_trades", self.test_locs()[0]))
            for k, (why, loc) in enumerate(plan):
                t0 = _hms(9, 35) + int(rng.random() * 5 * 3600 * S)
                ev.append((t0, 5, "far_add", (why, loc, k)))
                ev.append((t0 + (1800 + int(rng.random() * 3600)) * S, 5, "far_del", k))
        return ev

    def test_locs(self) -> list:
        return [loc for loc in range(1, self.n + 1) if self.is_test[loc]]

    def run_event(self, e, w) -> None:
        t_sched, _, kind, arg = e
        ts = max(t_sched, self.last_t)
        rng = self.rng
        if kind == "S":
            self._s(ts, arg)
        elif kind == "cross":
            self.cross(ts, arg)
        elif kind == "noii":
            self.noii(ts, arg)
        elif kind in ("pause", "halt", "resume"):
            loc = arg
            state, reason = {"pause": (b"P", b"LUDP"), "halt": (b"H", b"T1  "), "resume": (b"T", b"    ")}[kind]
            self.halted[loc] = kind != "resume"
            if self.features and kind != "resume":
                self.feature_event(ts, kind, loc)
            self._emit("H", _PK["H"].pack(25, b"H", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc], state,
                                          b" ", reason), ts)
            if kind == "pause":
                ref = self.mid[loc]
                tk = self.tick[loc]
                band = max(tk, (ref // 20) // tk * tk)
                ts2 = ts + 1_000 + int(rng.random() * 50_000)
                self._emit("J", _PK["J"].pack(35, b"J", loc, 0, ts2 >> 32, ts2 & 0xFFFFFFFF, self.stock8[loc], ref,
                                              ref + band, max(tk, ref - band), 0), ts2)
        elif kind == "regsho":
            loc = arg
            self._emit("Y", _PK["Y"].pack(20, b"Y", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc], b"1"), ts)
        else:
            self.feature_event(ts, kind, arg)

    # -- the real-day features ----------------------------------------------------------------

    def _h(self, ts: int, loc: int, state: bytes, reason: bytes) -> None:
        self._emit("H", _PK["H"].pack(25, b"H", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc], state, b" ",
                                      reason), ts)

    def _add(self, ts: int, loc: int, buy: bool, price: int, shares: int, in_live: bool) -> int:
        """Rest one order (written as A); in_live: the flow may pick it for D/U/X."""
        self.next_ref += 1 + (self.emitted & 3)
        ref = self.next_ref
        self.orders[ref] = [loc, buy, price, shares]
        lv = self.bid_lv[loc] if buy else self.ask_lv[loc]
        lvl = lv.get(price)
        if lvl is None:
            lv[price] = {ref: None}
            insort(self.bid_keys[loc] if buy else self.ask_keys[loc], price if buy else -price)
        else:
            lvl[ref] = None
        if in_live:
            self.live.append(ref)
        self.nlive[loc] += 1
        self.peak[loc] = max(self.peak[loc], self.nlive[loc])
        self.peak_total = max(self.peak_total, len(self.orders))
        self._price_seen(loc, price)
        self._emit("A", _PK["A"].pack(36, b"A", loc, 0, ts >> 32, ts & 0xFFFFFFFF, ref, b"B" if buy else b"S", shares,
                                      self.stock8[loc], price), ts)
        return ref

    def _delete(self, ts: int, ref: int) -> None:
        o = self._unrest(ref)
        self._emit("D", _PK["D"].pack(19, b"D", o[0], 0, ts >> 32, ts & 0xFFFFFFFF, ref), ts)

    def _level_refs(self, loc: int, buy: bool) -> list:
        """The side's orders in priority order (best price first, then time)."""
        lv = self.bid_lv[loc] if buy else self.ask_lv[loc]
        keys = self.bid_keys[loc] if buy else self.ask_keys[loc]
        out = []
        for key in reversed(keys):
            out.extend(lv[key if buy else -key])
        return out

    def feature_event(self, ts: int, kind: str, arg) -> None:
        if kind in ("pause", "halt"):
            loc = arg
            self.open_halt[loc] = {"kind": kind, "locate": loc, "start": ts}
        elif kind == "plant":
            self.plant(ts, *arg)
        elif kind == "xresume":
            self.halt_cross(ts, arg)
        elif kind == "ipo_quote":
            loc, tx = arg
            tk = self.tick[loc]
            release = tx // NS
            self._emit("K", _PK["K"].pack(28, b"K", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc], release, b"A",
                                          self.mid[loc] // tk * tk), ts)
            self._h(ts, loc, b"Q", b"IPOQ")
            self.blocked[loc] = False
        elif kind in ("ohalt", "oresume"):
            loc = arg
            self._emit("h", _PK["h"].pack(21, b"h", loc, 0, ts >> 32, ts & 0xFFFFFFFF, self.stock8[loc], b"Q",
                                          b"H" if kind == "ohalt" else b"T"), ts)
            if kind == "ohalt":
                self.halted[loc] = True
                self.open_halt[loc] = {"kind": "operational", "locate": loc, "start": ts}
            else:
                self.halted[loc] = False
                h = self.open_halt.pop(loc)
                h.update(end=ts, cross_price=None, cross_shares=None, executions=[])
                self.halts.append(h)
        elif kind == "mwcb":
            self._emit("W", _PK["W"].pack(12, b"W", 0, 0, ts >> 32, ts & 0xFFFFFFFF, arg), ts)
        elif kind == "far_add":
            self.far_add(ts, *arg)
        elif kind == "far_del":
            f = self.far_by_ref.get(arg)
            if f is not None and f["order_ref"] in self.orders:
                self._delete(ts, f["order_ref"])
                f["deleted_at"] = self.last_t

    def plant(self, ts: int, loc: int, k: int) -> None:
        """A displayed order that crosses the opposite best (the symbol is halted, so it rests)."""
        rng = self.rng
        tk = self.tick[loc]
        buy = bool(k & 1)
        opp = self._best(loc, not buy)
        if opp is None:
            # give the opposite side a best first, at the symbol's price
            m = self.mid[loc]
            self._add(ts, loc, not buy, m if not buy else max(tk, m - tk), self.size_table[int(rng.random() * 4096)],
                      True)
            opp = self._best(loc, not buy)
        d = int(rng.random() * 3) * tk * self.ds[loc]
        price = opp + d if buy else max(tk, opp - d)
        shares = self.size_table[int(rng.random() * 4096)]
        ref = self._add(ts, loc, buy, price, shares, False)
        self.crossing.append({"timestamp": self.last_t, "locate": loc, "order_ref": ref, "side": "B" if buy else "S",
                              "price": price, "shares": shares, "opposite_best": opp})

    def halt_cross(self, ts: int, loc: int) -> None:
        """The halt (or IPO) cross, then H "T": the crossing orders execute at one price, price-time
        order on each side; one C "N" per order executed (buys, then sells), one Q type "H"."""
        tk = self.tick[loc]
        bids, asks = self._level_refs(loc, True), self._level_refs(loc, False)
        left = {}
        fills_b, fills_s = [], []
        i = j = 0
        while i < len(bids) and j < len(asks):
            b, a = self.orders[bids[i]], self.orders[asks[j]]
            if b[2] < a[2]:
                break
            qb = left.get(bids[i], b[3])
            qa = left.get(asks[j], a[3])
            q = min(qb, qa)
            left[bids[i]], left[asks[j]] = qb - q, qa - q
            for fills, ref in ((fills_b, bids[i]), (fills_s, asks[j])):
                if fills and fills[-1][0] == ref:
                    fills[-1][1] += q
                else:
                    fills.append([ref, q])
            if qb == q:
                i += 1
            if qa == q:
                j += 1
        total = sum(q for _, q in fills_b)
        price = 0
        if total:
            lo = max(self.orders[r][2] for r, _ in fills_s)   # every executed sell's limit is at most this
            hi = min(self.orders[r][2] for r, _ in fills_b)   # every executed buy's limit at least this
            price = lo + (hi - lo) // 2 // tk * tk
        execs = []
        for side, fills in (("B", fills_b), ("S", fills_s)):
            for ref, q in fills:
                self.match += 1
                self._emit("C", _PK["C"].pack(36, b"C", loc, 1, ts >> 32, ts & 0xFFFFFFFF, ref, q, self.match, b"N",
                                              price), ts)
                self.execd[loc] += q
                execs.append([ref, q, side])
                o = self.orders[ref]
                o[3] -= q
                if o[3] == 0:
                    self._unrest(ref)
        if total:
            self._price_seen(loc, price)
        self.match += 1
        self._emit("Q", _PK["Q"].pack(40, b"Q", loc, 1, ts >> 32, ts & 0xFFFFFFFF, total, self.stock8[loc], price,
                                      self.match, b"H"), ts)
        ts = self.last_t
        self._h(ts, loc, b"T", b"    ")
        self.halted[loc] = self.blocked[loc] = False
        h = self.open_halt.pop(loc)
        h.update(end=ts, cross_price=price, cross_shares=total, executions=execs)
        self.halts.append(h)

    def far_add(self, ts: int, why: str, loc: int, k: int) -> None:
        rng = self.rng
        tk = self.tick[loc]
        m = self.mid[loc]
        shares = self.size_table[int(rng.random() * 4096)]
        buy = False
        if why == "x8":
            price = min(MAX_PRICE, m * 8 // tk * tk)
        elif why == "x1/8":
            buy, price = True, max(tk, m // 8 // tk * tk)
        elif why == "max_price":
            price = MAX_PRICE
        elif why == "sub_penny_1000":
            price = 10_000_000
        else:  # best_and_trades: the side's other orders go, it is the best ask, a buy takes part of it
            for ref in self._level_refs(loc, False):
                self._delete(ts, ref)
            price = min(MAX_PRICE, max(m, self._best(loc, True) or 0) * 8 // tk * tk)
            shares = max(shares, 2)
        ref = self._add(ts, loc, buy, price, shares, False)
        f = {"timestamp": self.last_t, "locate": loc, "order_ref": ref, "side": "B" if buy else "S", "price": price,
             "shares": shares, "why": why, "deleted_at": None}
        if why == "best_and_trades":
            x = 1 + int(rng.random() * (shares - 1))
            ts = self.last_t + 1
            self.match += 1
            self._emit("E", _PK["E"].pack(31, b"E", loc, 2, ts >> 32, ts & 0xFFFFFFFF, ref, x, self.match), ts)
            self.execd[loc] += x
            self.n_groups += 1
            if self.groups is not None:
                self.groups.append((ts, loc, "S", [(ref, x, price)]))
            self.orders[ref][3] -= x
            f["executed"] = x
        self.far.append(f)
        self.far_by_ref[k] = f

    def noii(self, ts: int, cross: str) -> None:
        rng = self.rng
        pk = _PK["I"]
        ct = cross.encode()
        for loc in range(1, self.n + 1):
            if self.is_test[loc]:
                continue
            u = rng.random()
            bb, ba = self._best(loc, True), self._best(loc, False)
            if u < 0.1 or bb is None or ba is None:
                paired, imb, d, far, near, ref, pvi = 0, 0, b"O", 0, 0, 0, b" "
            else:
                ref = bb if rng.random() < 0.5 else ba
                paired = self.size_table[int(rng.random() * 4096)] * (1 + int(rng.random() * 20))
                imb = self.size_table[int(rng.random() * 4096)] * int(rng.random() * 10)
                d = b"N" if imb == 0 else (b"B" if rng.random() < 0.5 else b"S")
                near, far = ref, ref
                pvi = b"L" if rng.random() < 0.8 else b"1"
            self._emit("I", pk.pack(50, b"I", loc, 0, ts >> 32, ts & 0xFFFFFFFF, paired, imb, d, self.stock8[loc],
                                    far, near, ref, ct, pvi), ts)

    def cross(self, ts: int, cross: str) -> None:
        """One cross: for each non-test symbol, C "N" executions of resting orders on one side at
        the cross price (price-time order, never beyond an order's limit), then a Q."""
        rng = self.rng
        pk_c, pk_q = _PK["C"], _PK["Q"]
        ct = cross.encode()
        for loc in range(1, self.n + 1):
            if self.is_test[loc]:
                continue
            ts += 1_000 + int(rng.random() * 40_000)
            buy_side = rng.random() < 0.5
            if self._best(loc, buy_side) is None:
                buy_side = not buy_side
            best = self._best(loc, buy_side)
            if best is None or self.halted[loc] or rng.random() < 0.15:
                self.match += 1
                self._emit("Q", pk_q.pack(40, b"Q", loc, 1, ts >> 32, ts & 0xFFFFFFFF, 0, self.stock8[loc], 0,
                                          self.match, ct), ts)
                continue
            tk = self.tick[loc]
            k = int(rng.random() * 2)
            price = best - k * tk if buy_side else best + k * tk
            if price < tk:
                price = best
            # resting orders that can trade at `price`, in price-time order
            lv = self.bid_lv[loc] if buy_side else self.ask_lv[loc]
            keys = self.bid_keys[loc] if buy_side else self.ask_keys[loc]
            cand = []
            for key in reversed(keys):
                p = key if buy_side else -key
                if (buy_side and p < price) or (not buy_side and p > price):
                    break
                cand.extend(lv[p])
                if len(cand) >= 3:
                    break
            n_exec = 1 + int(rng.random() * min(3, len(cand)))
            fills = []
            total = 0
            for j, ref in enumerate(cand[:n_exec]):
                o = self.orders[ref]
                x = o[3]
                if j == n_exec - 1 and x > 1 and rng.random() < 0.4:
                    x = 1 + int(rng.random() * (x - 1))
                self.match += 1
                self._emit("C", pk_c.pack(36, b"C", loc, 1, ts >> 32, ts & 0xFFFFFFFF, ref, x, self.match, b"N",
                                          price), ts)
                self._price_seen(loc, price)
                self.execd[loc] += x
                total += x
                fills.append((ref, x, price))
                o[3] -= x
                if o[3] == 0:
                    self._unrest(ref)
            q_shares = total + self.size_table[int(rng.random() * 4096)] * int(rng.random() * 5)
            self.match += 1
            self._emit("Q", pk_q.pack(40, b"Q", loc, 1, ts >> 32, ts & 0xFFFFFFFF, q_shares, self.stock8[loc], price,
                                      self.match, ct), ts)
            if self.cross_groups is not None:
                self.cross_groups.append((ts, loc, "B" if buy_side else "S", fills, cross, q_shares))

    # -- the order flow -----------------------------------------------------------------------

    def flow(self, w: ItchWriter, t_start: int) -> None:
        rng = self.rng
        rnd = rng.random
        n_messages = self.n_messages
        target = self.resting_target
        sched = self.schedule()
        si = 0
        next_sched = sched[0][0] if sched else 1 << 62
        # time map: message fraction -> time, from the intensity profile
        NT = 4096
        t_end = _hms(19, 59, 59)
        T = self._time_table(t_start, t_end, NT)
        budget = max(1, n_messages - target - 2 - self.emitted)
        f0 = self.emitted
        inv_budget = NT / budget

        orders, live = self.orders, self.live
        bid_lv, ask_lv, bid_keys, ask_keys = self.bid_lv, self.ask_lv, self.bid_keys, self.ask_keys
        nlive, peak, pmin, pmax, execd = self.nlive, self.peak, self.pmin, self.pmax, self.execd
        mid, tick, ds, lo, hi, halted, cap = self.mid, self.tick, self.ds, self.lo, self.hi, self.halted, self.cap
        peak_total = self.peak_total
        stock8 = self.stock8
        blocked, feat = self.blocked, bool(self.features)
        sym_table, depth_table, size_table = self.sym_table, self.depth_table, self.size_table
        touch_table, replace_table = self.touch_table, self.replace_table
        groups = self.groups
        buf = self.buf
        append = buf.append
        pk_a, pk_f, pk_d, pk_u, pk_x, pk_e, pk_c, pk_p = (_PK[t].pack for t in "AFDUXECP")
        mpids = [m.encode() for m in MPIDS]
        counts = self.counts
        nA = nF = nD = nU = nX = nE = nP = nC = 0
        n_groups = self.n_groups
        ref_next = self.next_ref
        match = self.match
        last_t = self.last_t
        emitted = self.emitted
        # step thresholds; the aggressor probability adapts so that E ends near its target share
        p_u = TARGET_MIX["U"]
        p_x = TARGET_MIX["X"]
        p_p = TARGET_MIX["P"]
        e_share = TARGET_MIX["E"]
        f_of_adds = TARGET_MIX["F"] / (TARGET_MIX["A"] + TARGET_MIX["F"])
        avg_e = 1.6
        p_ag = e_share / avg_e
        c_y_of_groups = C_Y_SHARE / e_share * avg_e
        th_u = p_u
        th_x = th_u + p_x
        th_p = th_x + p_p
        th_ag = th_p + p_ag
        FLUSH = 16384
        n_cy = 0          # C "Y" executions written by the flow
        sched_msgs = 0    # messages written by scheduled events during the flow
        step = 0
        while True:
            nlv = len(orders)
            if nlv > peak_total:
                peak_total = nlv
            left = n_messages - emitted - nlv - 2   # after the flow: one D per live order, S "E", S "C"
            if left <= 0:
                break
            step += 1
            if not step & 4095:
                # steer the per-step probabilities so that U, X, P and E end near their target
                # shares of the whole day (the directory, NOII, crosses and the end-of-day deletes
                # are not steps, and an aggressor step writes several messages)
                tot_u, tot_x, tot_p = counts["U"] + nU, counts["X"] + nX, counts["P"] + nP
                tot_e = counts["E"] + nE
                if n_groups:
                    avg_e = (tot_e + n_cy) / n_groups
                mps = max(1.0, (emitted - f0 - sched_msgs) / step)
                rem = max(1.0, (n_messages - emitted - nlv - 2) / mps)
                p_u = min(max((TARGET_MIX["U"] * n_messages - tot_u) / rem, 0.0), 3 * TARGET_MIX["U"])
                p_x = min(max((TARGET_MIX["X"] * n_messages - tot_x) / rem, 0.0), 3 * TARGET_MIX["X"])
                p_p = min(max((TARGET_MIX["P"] * n_messages - tot_p) / rem, 0.0), 3 * TARGET_MIX["P"])
                p_ag = min(max((e_share * n_messages - tot_e) / rem / max(avg_e, 1.0), 0.0), 3 * e_share)
                th_u = p_u
                th_x = th_u + p_x
                th_p = th_x + p_p
                th_ag = th_p + p_ag
                c_y_of_groups = C_Y_SHARE / e_share * avg_e
                if len(buf) >= FLUSH:
                    w.write_framed(b"".join(buf), len(buf))
                    buf.clear()
            x = (emitted - f0) * inv_budget
            if x >= NT:
                x = NT - 1e-9
            i = int(x)
            t0 = T[i]
            t = t0 + int((x - i) * (T[i + 1] - t0))
            if t < last_t:
                t = last_t
            if t >= next_sched:
                # hand the state back, run the scheduled event, take it again
                self.match, self.last_t, self.emitted = match, last_t, emitted
                self.next_ref, self.n_groups = ref_next, n_groups
                counts["A"] += nA; counts["F"] += nF; counts["D"] += nD; counts["U"] += nU
                counts["X"] += nX; counts["E"] += nE; counts["P"] += nP; counts["C"] += nC
                nA = nF = nD = nU = nX = nE = nP = nC = 0
                e0 = self.emitted
                while si < len(sched) and sched[si][0] <= t:
                    self.run_event(sched[si], w)
                    si += 1
                sched_msgs += self.emitted - e0
                next_sched = sched[si][0] if si < len(sched) else 1 << 62
                match, last_t, emitted = self.match, self.last_t, self.emitted
                ref_next, n_groups = self.next_ref, self.n_groups
                peak_total = max(peak_total, self.peak_total)
                continue
            ts = t
            r = rnd()
            if r >= th_ag:
                # ---- add or delete, steered to the live-order target ----
                p_add = 0.5 + 2.0 * (target - nlv) / target
                if rnd() < p_add:
                    kind = 0
                else:
                    kind = 1
            elif r < th_u:
                kind = 2
            elif r < th_x:
                kind = 3
            elif r < th_p:
                kind = 4
            else:
                kind = 5
            if left == 1:
                kind = 4   # the last slot: a message that leaves the live orders as they are
            if kind == 1 or kind == 2 or kind == 3:
                if not live:
                    kind = 0
                else:
                    # a random live order (dead entries are dropped as they are met); for a
                    # delete, the staler of two (the one nearer to, or through, its symbol's
                    # current price), so that the book follows the price
                    while True:
                        j = int(rnd() * len(live))
                        ref = live[j]
                        o = orders.get(ref)
                        if o is not None:
                            break
                        live[j] = live[-1]
                        live.pop()
                    if kind == 1:
                        j2 = int(rnd() * len(live))
                        o2 = orders.get(live[j2])
                        if o2 is not None:
                            l1, l2 = o[0], o2[0]
                            s1 = (o[2] - mid[l1] if o[1] else mid[l1] - o[2]) / (tick[l1] * ds[l1])
                            s2 = (o2[2] - mid[l2] if o2[1] else mid[l2] - o2[2]) / (tick[l2] * ds[l2])
                            if s2 > s1:
                                j, ref, o = j2, live[j2], o2
                    elif kind == 3 and o[3] < 2:
                        kind = 1
            if kind == 0 or kind == 5:
                loc = sym_table[int(rnd() * 65536)]
                if blocked[loc]:
                    continue   # an IPO before its quotation period (only with the features)
                m = mid[loc]
                tk = tick[loc]
                u = rnd()
                if u < 0.16:
                    # the symbol's price: a random walk (the book follows it: passive orders are
                    # placed around it, deletes take stale orders, aggressors lean its way)
                    if u < 0.08:
                        m += tk * ds[loc]
                        if m > hi[loc]:
                            m = hi[loc]
                    else:
                        m -= tk * ds[loc]
                        if m < lo[loc]:
                            m = lo[loc]
                    mid[loc] = m
                buy = rnd() < 0.5
                if kind == 5:
                    if halted[loc]:
                        kind = 0
                    else:
                        # ---- aggressor: execute against the opposite book ----
                        # (mostly in the direction of the price: it takes the stale side)
                        okeys = ask_keys[loc]
                        if okeys and m > -okeys[-1]:
                            buy = rnd() < 0.85
                        else:
                            okeys = bid_keys[loc]
                            if okeys and m < okeys[-1]:
                                buy = rnd() >= 0.85
                        okeys = ask_keys[loc] if buy else bid_keys[loc]
                        if not okeys:
                            buy = not buy
                            okeys = ask_keys[loc] if buy else bid_keys[loc]
                        if not okeys:
                            kind = 0
                if kind == 5:
                    olv = ask_lv[loc] if buy else bid_lv[loc]
                    need = touch_table[int(rnd() * 1024)]
                    if rnd() < 0.3:
                        # take the whole best level (and so move the price), up to 20 orders
                        need = len(olv[-okeys[-1] if buy else okeys[-1]])
                        if need > 20:
                            need = 20
                    mode = rnd()
                    fills = []
                    for kk in range(len(okeys) - 1, -1, -1):
                        p = -okeys[kk] if buy else okeys[kk]
                        lvl = olv[p]
                        if mode < 0.12:
                            # remainder: every order of each level reached is taken (so the
                            # remainder can rest at this price); a deep level means a plain fill
                            if len(fills) + len(lvl) <= need + 3:
                                fills.extend(lvl)
                                if len(fills) >= need:
                                    break
                                continue
                            mode = 0.5
                        for ref in lvl:
                            fills.append(ref)
                            if len(fills) >= need:
                                break
                        if len(fills) >= need:
                            break
                    q = 0
                    for ref in fills:
                        q += orders[ref][3]
                    last_sh = orders[fills[-1]][3]
                    if mode < 0.12:
                        q += size_table[int(rnd() * 4096)]
                    elif mode < 0.45 and last_sh > 1:
                        q -= last_sh - 1 - int(rnd() * (last_sh - 1))
                    ts = last_t + 1 if t <= last_t else t
                    hi32, lo32 = ts >> 32, ts & 0xFFFFFFFF
                    use_c = len(fills) == 1 and rnd() < c_y_of_groups
                    rec = [] if groups is not None else None
                    tr = 0
                    p = 0
                    for ref in fills:
                        o = orders[ref]
                        sh = o[3]
                        xq = sh if q >= sh else q
                        q -= xq
                        p = o[2]
                        match += 1
                        tr += 2
                        if use_c:
                            append(pk_c(36, b"C", loc, tr, hi32, lo32, ref, xq, match, b"Y", p))
                            nC += 1
                            n_cy += 1
                            if p < pmin[loc] or pmin[loc] == 0:
                                pmin[loc] = p
                            if p > pmax[loc]:
                                pmax[loc] = p
                        else:
                            append(pk_e(31, b"E", loc, tr, hi32, lo32, ref, xq, match))
                            nE += 1
                        emitted += 1
                        execd[loc] += xq
                        if rec is not None:
                            rec.append((ref, xq, p))
                        if xq == sh:
                            # fully executed: it is the front of the best level
                            del orders[ref]
                            lvl = olv[p]
                            del lvl[ref]
                            if not lvl:
                                del olv[p]
                                okeys.pop()
                            nlive[loc] -= 1
                        else:
                            o[3] = sh - xq
                    n_groups += 1
                    if rec is not None:
                        groups.append((ts, loc, "S" if buy else "B", rec))
                    last_t = ts
                    if q > 0:
                        # the remainder rests at the aggressor's limit, the last price it reached:
                        # every opposite order at or better than it is gone, so it cannot cross
                        ref_next += 1 + (emitted & 3)
                        ref = ref_next
                        orders[ref] = [loc, buy, p, q]
                        lv = bid_lv[loc] if buy else ask_lv[loc]
                        lv[p] = {ref: None}   # a level on this side at p cannot exist (it would have crossed)
                        insort(bid_keys[loc] if buy else ask_keys[loc], p if buy else -p)
                        live.append(ref)
                        c = nlive[loc] + 1
                        nlive[loc] = c
                        if c > peak[loc]:
                            peak[loc] = c
                        if p < pmin[loc] or pmin[loc] == 0:
                            pmin[loc] = p
                        if p > pmax[loc]:
                            pmax[loc] = p
                        append(pk_a(36, b"A", loc, 0, hi32, lo32, ref, b"B" if buy else b"S", q, stock8[loc], p))
                        nA += 1
                        emitted += 1
                    continue
                # ---- passive add ----
                d = depth_table[int(rnd() * 4096)]
                dsl = ds[loc]
                if buy:
                    price = m - tk * d * dsl
                    if dsl > 1:
                        price -= tk * int(rnd() * dsl)
                    keys = ask_keys[loc]
                    if keys and price >= -keys[-1]:
                        price = -keys[-1] - tk - tk * d * dsl   # as deep, from the opposite best
                    if price < tk:
                        continue
                    lv = bid_lv[loc]
                    keys = bid_keys[loc]
                    key = price
                else:
                    price = m + tk + tk * d * dsl
                    if dsl > 1:
                        price += tk * int(rnd() * dsl)
                        if price > cap[loc]:
                            price = cap[loc]
                    keys = bid_keys[loc]
                    if keys and price <= keys[-1]:
                        price = keys[-1] + tk + tk * d * dsl
                        if price > cap[loc]:
                            continue
                    lv = ask_lv[loc]
                    keys = ask_keys[loc]
                    key = -price
                shares = size_table[int(rnd() * 4096)]
                ref_next += 1 + (emitted & 3)
                ref = ref_next
                orders[ref] = [loc, buy, price, shares]
                lvl = lv.get(price)
                if lvl is None:
                    lv[price] = {ref: None}
                    insort(keys, key)
                else:
                    lvl[ref] = None
                live.append(ref)
                c = nlive[loc] + 1
                nlive[loc] = c
                if c > peak[loc]:
                    peak[loc] = c
                if price < pmin[loc] or pmin[loc] == 0:
                    pmin[loc] = price
                if price > pmax[loc]:
                    pmax[loc] = price
                if rnd() < f_of_adds:
                    append(pk_f(40, b"F", loc, 0, ts >> 32, ts & 0xFFFFFFFF, ref, b"B" if buy else b"S", shares,
                                stock8[loc], price, mpids[int(rnd() * 10)]))
                    nF += 1
                else:
                    append(pk_a(36, b"A", loc, 0, ts >> 32, ts & 0xFFFFFFFF, ref, b"B" if buy else b"S", shares,
                                stock8[loc], price))
                    nA += 1
                emitted += 1
                last_t = ts
                continue
            if kind == 4:
                # ---- non-displayed trade: does not touch the book ----
                loc = sym_table[int(rnd() * 65536)]
                if feat and halted[loc]:
                    continue   # no trade while a symbol does not trade (only with the features)
                bk, ak = bid_keys[loc], ask_keys[loc]
                price = mid[loc]
                if bk and price < bk[-1]:
                    price = bk[-1]
                if ak and price > -ak[-1]:
                    price = -ak[-1]
                match += 1
                append(pk_p(44, b"P", loc, 2, ts >> 32, ts & 0xFFFFFFFF, 0, b"B", size_table[int(rnd() * 4096)],
                            stock8[loc], price, match))
                nP += 1
                emitted += 1
                last_t = ts
                continue
            loc = o[0]
            if kind == 3:
                # ---- partial cancel ----
                cx = 1 + int(rnd() * (o[3] - 1))
                o[3] -= cx
                append(pk_x(23, b"X", loc, 0, ts >> 32, ts & 0xFFFFFFFF, ref, cx))
                nX += 1
                emitted += 1
                last_t = ts
                continue
            # delete and replace both take the order out of its level
            buy, price = o[1], o[2]
            lv = bid_lv[loc] if buy else ask_lv[loc]
            lvl = lv[price]
            del lvl[ref]
            if not lvl:
                del lv[price]
                keys = bid_keys[loc] if buy else ask_keys[loc]
                keys.pop(bisect_left(keys, price if buy else -price))
            del orders[ref]
            if kind == 1:
                # ---- delete ----
                live[j] = live[-1]
                live.pop()
                nlive[loc] -= 1
                append(pk_d(19, b"D", loc, 0, ts >> 32, ts & 0xFFFFFFFF, ref))
                nD += 1
                emitted += 1
                last_t = ts
                continue
            # ---- replace: new reference, new price and size, same side, back of its queue ----
            tk = tick[loc]
            if rnd() < 0.6:
                # re-pegged to the symbol's current price, like a fresh passive order
                d = depth_table[int(rnd() * 4096)] * tk * ds[loc]
                newp = mid[loc] - d if buy else mid[loc] + tk + d
            else:
                newp = price + replace_table[int(rnd() * 1024)] * tk * ds[loc]
            if newp > cap[loc]:
                newp = price
            if buy:
                keys = ask_keys[loc]
                if keys and newp >= -keys[-1]:
                    newp = -keys[-1] - tk
                if newp < tk:
                    newp = price  # (the old price did not cross either)
                keys = bid_keys[loc]
                key = newp
            else:
                keys = bid_keys[loc]
                if keys and newp <= keys[-1]:
                    newp = keys[-1] + tk
                keys = ask_keys[loc]
                key = -newp
            shares = size_table[int(rnd() * 4096)]
            ref_next += 1 + (emitted & 3)
            new = ref_next
            orders[new] = [loc, buy, newp, shares]
            lvl = lv.get(newp)
            if lvl is None:
                lv[newp] = {new: None}
                insort(keys, key)
            else:
                lvl[new] = None
            live[j] = new
            if newp < pmin[loc] or pmin[loc] == 0:
                pmin[loc] = newp
            if newp > pmax[loc]:
                pmax[loc] = newp
            append(pk_u(35, b"U", loc, 0, ts >> 32, ts & 0xFFFFFFFF, ref, new, shares, newp))
            nU += 1
            emitted += 1
            last_t = ts

        counts["A"] += nA; counts["F"] += nF; counts["D"] += nD; counts["U"] += nU
        counts["X"] += nX; counts["E"] += nE; counts["P"] += nP; counts["C"] += nC
        self.match, self.last_t, self.emitted, self.next_ref, self.n_groups = match, last_t, emitted, ref_next, n_groups
        self.peak_total = max(peak_total, len(orders))
        # whatever was scheduled and not reached (short days) still happens, in order
        while si < len(sched) and sched[si][0] < _hms(19, 59, 59):
            self.run_event(sched[si], w)
            si += 1

    @staticmethod
    def _time_table(t_start: int, t_end: int, nt: int) -> list[int]:
        """nt+1 times splitting [t_start, t_end] into equal shares of the intensity profile."""
        knots = [(int(h * 3600 * NS), wt) for h, wt in _INTENSITY]
        # cumulative integral at each knot (trapezoids), then restrict to [t_start, t_end]
        xs, cs = [knots[0][0]], [0.0]
        for (x0, w0), (x1, w1) in zip(knots, knots[1:]):
            xs.append(x1)
            cs.append(cs[-1] + (x1 - x0) * (w0 + w1) / 2)

        def cum(t):
            if t <= xs[0]:
                return 0.0
            if t >= xs[-1]:
                return cs[-1]
            k = bisect_left(xs, t) - 1
            x0, x1 = xs[k], xs[k + 1]
            w0, w1 = knots[k][1], knots[k + 1][1]
            dx = t - x0
            wt = w0 + (w1 - w0) * dx / (x1 - x0)
            return cs[k] + dx * (w0 + wt) / 2

        c0, c1 = cum(t_start), cum(t_end)
        # invert by bisection on a fine grid of times
        grid_n = 20_000
        gts = [t_start + (t_end - t_start) * g // grid_n for g in range(grid_n + 1)]
        gcs = [cum(g) for g in gts]
        out = []
        for i in range(nt + 1):
            target = c0 + (c1 - c0) * i / nt
            k = bisect_left(gcs, target)
            if k <= 0:
                out.append(gts[0])
            elif k > grid_n:
                out.append(gts[-1])
            else:
                a, b = gcs[k - 1], gcs[k]
                fr = 0.0 if b == a else (target - a) / (b - a)
                out.append(int(gts[k - 1] + fr * (gts[k] - gts[k - 1])))
        out.append(out[-1])
        return out

    # -- end of day ---------------------------------------------------------------------------

    def end_of_day(self) -> None:
        pk = _PK["D"]
        refs = list(self.orders)
        t0 = max(self.last_t, _hms(19, 59, 59, 500_000_000))
        span = max(0, _hms(19, 59, 59, 999_000_000) - t0)
        n = len(refs)
        for i, ref in enumerate(refs):
            o = self._unrest(ref)
            ts = t0 + (span * i) // max(1, n)
            self._emit("D", pk.pack(19, b"D", o[0], 0, ts >> 32, ts & 0xFFFFFFFF, ref), ts)
        self.live.clear()
        self._s(max(self.last_t, _hms(20, 0, 0, int(self.rng.random() * 50_000))), b"E")
        self._s(max(self.last_t, _hms(20, 5)), b"C")


def generate_day(path, *, n_messages: int = 200_000, n_symbols: int = 50, seed: int = 1, gzip: bool = False,
                 date: str = "2019-12-30", resting_per_symbol: int | None = None,
                 record_groups: bool | None = None, compresslevel: int = 6, features=()) -> DayTruth:
    """Write a synthetic day of about ``n_messages`` messages to ``path``; return its truth.

    ``resting_per_symbol`` sets the live-order level the flow is steered to
    (total target = resting_per_symbol * n_symbols; default scales with the day,
    at most 200). ``record_groups`` keeps every aggressor group and cross group
    in the truth (default: on up to 2M messages; off above, to keep memory
    proportional to the live orders). The message count is exact, except for
    days too short to reach every scheduled event (then slightly more).
    ``features``: names from ``FEATURES`` (halts and crosses, an IPO, an operational
    halt, far-off prices, an MWCB status); what they planted is in the truth.
    """
    if record_groups is None:
        record_groups = n_messages <= 2_000_000
    t_wall = time.perf_counter()
    day = _Day(n_messages, n_symbols, seed, resting_per_symbol, record_groups, date, features)
    with ItchWriter(path, gzip=gzip, compresslevel=compresslevel) as w:
        t_start = day.preamble()
        day._flush(w)
        day.flow(w, t_start)
        day._flush(w)
        day.end_of_day()
        day._flush(w)
        written = w.count
    assert written == day.emitted == sum(day.counts.values()), (written, day.emitted)
    n = day.n
    locs = range(1, n + 1)
    return DayTruth(
        path=str(path), date=date, seed=seed, gzip=gzip, n_messages=written,
        counts={t: c for t, c in day.counts.items() if c},
        symbols={loc: day.syms[loc - 1] for loc in locs},
        test_issues=[loc for loc in locs if day.is_test[loc]],
        ticks={loc: day.tick[loc] for loc in locs},
        price_min={loc: day.pmin[loc] for loc in locs if day.pmax[loc]},
        price_max={loc: day.pmax[loc] for loc in locs if day.pmax[loc]},
        peak_live={loc: day.peak[loc] for loc in locs},
        peak_live_total=day.peak_total,
        final_live=len(day.orders),
        executed_shares={loc: day.execd[loc] for loc in locs},
        n_aggressor_groups=day.n_groups,
        aggressor_groups=day.groups,
        cross_groups=day.cross_groups,
        last_order_ref=day.next_ref,
        last_match_number=day.match,
        resting_target=day.resting_target,
        elapsed_s=time.perf_counter() - t_wall,
        features=list(day.features),
        halts=sorted(day.halts, key=lambda h: h["start"]),
        crossing_orders=day.crossing,
        far_off_orders=day.far,
    )


# ---------------------------------------------------------------------------------------------
# The C generator (csrc/tools/itch_synth.c): a full-size day in minutes

FAST_PRESETS = {
    "full-day": dict(n_messages=270_000_000, n_symbols=9000, features=FEATURES),
}
_WHY = {1: "x8", 2: "x1/8", 3: "max_price", 4: "sub_penny_1000", 5: "best_and_trades"}
_KIND = {1: "pause", 2: "halt", 3: "ipo", 4: "operational"}


@dataclass
class FastDayTruth:
    """What the C generator wrote: counts by type, the symbols, what was planted (as in
    DayTruth: halts with their crosses, crossing orders, far-off orders), speed."""
    path: str
    seed: int
    gzip: bool
    n_messages: int
    bytes: int
    counts: dict
    symbols: dict
    test_issues: list
    ticks: dict
    features: list
    peak_live_total: int
    final_live: int
    executed_shares: int
    last_order_ref: int
    last_match_number: int
    generator_book_bytes: int
    halts: list
    crossing_orders: list
    far_off_orders: list
    elapsed_s: float = 0.0

    def mix(self) -> dict:
        return {t: c / self.n_messages for t, c in sorted(self.counts.items())}

    def to_json(self, **kw) -> str:
        return json.dumps(asdict(self), **kw)

    def summary(self) -> dict:
        return {
            "path": self.path, "messages": self.n_messages, "bytes": self.bytes, "symbols": len(self.symbols),
            "seed": self.seed, "features": self.features,
            "mix_percent": {t: round(100 * x, 3) for t, x in sorted(self.mix().items(), key=lambda kv: -kv[1])},
            "halts": len(self.halts), "crossing_orders": len(self.crossing_orders),
            "far_off_orders": len(self.far_off_orders), "peak_live_total": self.peak_live_total,
            "final_live": self.final_live, "generator_book_mib": round(self.generator_book_bytes / 2**20, 1),
            "elapsed_s": round(self.elapsed_s, 3),
            "messages_per_s": round(self.n_messages / self.elapsed_s) if self.elapsed_s else None,
        }


def generate_day_fast(path, *, n_messages: int = 270_000_000, n_symbols: int = 9000, seed: int = 1,
                      features=FEATURES, max_price: bool = True, gzip: bool = False, compresslevel: int = 1,
                      resting_per_symbol: int = 0, chunk_bytes: int = 32 << 20) -> FastDayTruth:
    """Write a day with the C generator (same plan as generate_day, not the same bytes).

    ``features`` as for generate_day; ``max_price=False`` leaves the $199,999.99 orders out
    of far_off (the other far-off orders stay). Deterministic per arguments. Raw output is
    written as the generator fills its buffer; gzip goes through the standard library.
    """
    import numpy as np

    from lobreplay.core._coreapi import SYNTH_FEATURES, ItchSynth

    bad = set(features) - set(FEATURES)
    if bad:
        raise ValueError(f"unknown feature(s) {sorted(bad)}; known: {', '.join(FEATURES)}")
    if not 1 <= n_symbols <= 65535:
        raise ValueError(f"n_symbols must be 1..65535, got {n_symbols}")
    if n_messages < 3 * n_symbols + 116:
        raise ValueError(f"n_messages={n_messages} is too small for {n_symbols} symbols "
                         f"(the directory alone takes {3 * n_symbols + 16}); use at least {3 * n_symbols + 116}")
    bits = 0
    for f in features:
        bits |= SYNTH_FEATURES[f]
    if "far_off" in features and max_price:
        bits |= SYNTH_FEATURES["max_price"]
    t_wall = time.perf_counter()
    gen = ItchSynth(n_messages, n_symbols, seed, bits, resting_per_symbol)
    buf = np.empty(chunk_bytes, np.uint8)
    n = nbytes = 0
    with ItchWriter(path, gzip=gzip, compresslevel=compresslevel, buffer_bytes=0) as w:
        while True:
            k, m = gen.fill(buf)
            if not k:
                break
            w.write_framed(buf[:k].tobytes() if gzip else memoryview(buf)[:k], m)
            n += m
            nbytes += k
    st = gen.stats()
    assert st["done"] and st["messages"] == n == sum(st["counts"].values()), (st, n)
    syms, ticks, tests = {}, {}, []
    for loc in range(1, n_symbols + 1):
        name, tick, test = gen.symbol(loc)
        syms[loc], ticks[loc] = name, tick
        if test:
            tests.append(loc)
    halts, crossing, far = [], [], []
    for p in gen.plants():
        kind = int(p["kind"])
        if kind in _KIND:
            halts.append({"kind": _KIND[kind], "locate": int(p["locate"]), "start": int(p["start"]),
                          "end": int(p["end"]), "cross_price": int(p["price"]) if kind != 4 else None,
                          "cross_shares": int(p["shares"]) if kind != 4 else None,
                          "executions": int(p["executions"])})
        elif kind == 5:
            crossing.append({"timestamp": int(p["start"]), "locate": int(p["locate"]), "order_ref": int(p["ref"]),
                             "side": chr(p["side"]), "price": int(p["price"]), "shares": int(p["shares"])})
        else:
            far.append({"timestamp": int(p["start"]), "locate": int(p["locate"]), "order_ref": int(p["ref"]),
                        "side": chr(p["side"]), "price": int(p["price"]), "shares": int(p["shares"]),
                        "why": _WHY[int(p["why"])], "deleted_at": int(p["end"]) or None,
                        "executed": int(p["executions"])})
    return FastDayTruth(
        path=str(path), seed=seed, gzip=gzip, n_messages=n, bytes=nbytes, counts=st["counts"], symbols=syms,
        test_issues=tests, ticks=ticks, features=[f for f in FEATURES if f in features],
        peak_live_total=st["peak_live"], final_live=st["live"], executed_shares=st["executed_shares"],
        last_order_ref=st["last_order_ref"], last_match_number=st["last_match"],
        generator_book_bytes=st["book_bytes"], halts=sorted(halts, key=lambda h: h["start"]),
        crossing_orders=crossing, far_off_orders=far, elapsed_s=time.perf_counter() - t_wall)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lobreplay.testing.itch_synth",
                                 description="Write a seeded synthetic ITCH 5.0 day (BinaryFILE framing).")
    ap.add_argument("output", help="output file (.itch, or .itch.gz with --gzip)")
    ap.add_argument("--messages", type=int, default=None, help="default 200,000 (270M with --preset full-day)")
    ap.add_argument("--symbols", type=int, default=None,
                    help="default 50 (9,000 with --preset real-shape or full-day)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--resting-per-symbol", type=int, default=None,
                    help="live orders per symbol the flow is steered to (peak live ~ this x symbols)")
    ap.add_argument("--date", default="2019-12-30")
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--truth", help="also write the full truth as JSON here")
    ap.add_argument("--no-groups", action="store_true",
                    help="leave the aggressor and cross groups out of the truth (they are left out anyway "
                         "above 2M messages, to keep memory proportional to the live orders)")
    ap.add_argument("--features", default=None,
                    help=f"comma-separated real-day features ({','.join(FEATURES)}), 'all' or 'none'")
    ap.add_argument("--preset", choices=sorted(PRESETS) + sorted(FAST_PRESETS),
                    help="real-shape: 9,000 symbols and every feature; full-day: the C generator, 270M "
                         "messages, 9,000 symbols, every feature (--messages, --symbols, --features still apply)")
    ap.add_argument("--engine", choices=("python", "c"), default=None,
                    help="python (default; truth with every aggressor group) or c (fast: a full day in minutes)")
    ap.add_argument("--no-max-price", action="store_true",
                    help="C engine: leave the $199,999.99 far-off orders out (the other far-off orders stay)")
    a = ap.parse_args(argv)
    preset = {**PRESETS, **FAST_PRESETS}.get(a.preset, {})
    engine = a.engine or ("c" if a.preset in FAST_PRESETS else "python")
    n_messages = a.messages if a.messages is not None else preset.get("n_messages", 200_000)
    n_symbols = a.symbols if a.symbols is not None else preset.get("n_symbols", 50)
    if a.features is None:
        features = preset.get("features", ())
    else:
        features = {"all": FEATURES, "none": ()}.get(a.features, tuple(f for f in a.features.split(",") if f))
    try:
        if engine == "c":
            truth = generate_day_fast(a.output, n_messages=n_messages, n_symbols=n_symbols, seed=a.seed,
                                      features=features, max_price=not a.no_max_price, gzip=a.gzip,
                                      resting_per_symbol=a.resting_per_symbol or 0)
        else:
            truth = generate_day(a.output, n_messages=n_messages, n_symbols=n_symbols, seed=a.seed, gzip=a.gzip,
                                 date=a.date, resting_per_symbol=a.resting_per_symbol,
                                 record_groups=False if a.no_groups else None, features=features)
    except (ValueError, OSError) as e:
        print(f"synth: {e}", file=sys.stderr)
        return 2
    if a.truth:
        with open(a.truth, "w") as fh:
            fh.write(truth.to_json())
    print(json.dumps(truth.summary(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
