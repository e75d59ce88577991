"""Price maps: a book's band costs memory for its orders, not for the distance between them.

A book of the core is a dense array of levels, one per tick of its band. One order at
$199,999.99 in a $150 stock, a sub-penny price in a $300 stock (the gcd of the prices then
falls to 1) or a flipped bit in one price would make that band millions of levels. So a
book whose prices call for it gets a **price map**: a dense grid (``low + k * tick``,
``0 <= k < n``) where the orders are, and a short sorted list of **extra** prices (far
outside the grid, or inside it but off its tick). Its core prices are ranks in the sorted
union of the two: the rank is monotone in the price, so price-time priority, the best
prices, matching and depth are exact in the unchanged core, whose band is then
``[0, n + len(extras) - 1]`` at tick 1. A book without extras keeps its real-price band.
A map without a grid (n = 0) is the .lobc replay's "ladder" (lobreplay/l2/ladder.py: a core price
is the rank of the price among all prices pass 1 saw); both could share this one day.

Pass 1 (lob_itch_scan, csrc/feeds/itch.c) finds per locate the range and gcd of the order
prices and nothing more. From those alone, map_candidate tells the books that a map could
help (a wide plain band, or a gcd off the cent): only those books' distinct prices are read
from the file again (lobreplay.itch.replay.all_order_prices, for them only), and each gets
the map of least cost over all its prices (choose_map) if that is worth it. A day without
such a book is read once. No price a valid message can carry stops a replay.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lobreplay.core import _coreapi as core
from lobreplay.itch.spec import PRICE4_SCALE

CENT = PRICE4_SCALE // 100  # a cent in Price(4): a penny grid's tick
MAX_LEVELS = 1 << 24        # a book's band never spans more levels at pass 1's figures (24 B each)
CORE_LEVELS = 1 << 31       # the core's limit: a map of every distinct price may go past MAX_LEVELS
PAD_LEVELS = 4096           # headroom beyond the price range on each side: at most the range, or this
MAP_SAVING = 4096           # a map is used when it saves this many levels and halves the band
EXTRA_COST = 1024           # an extra price must save this many grid levels (24 KiB) to be one


@dataclass(frozen=True, eq=False)
class PriceMap:
    """A mapped book's prices: a grid low + k * tick (0 <= k < n; n = 0: none) and extras
    (sorted int64, none on the grid). Core price = rank in their sorted union."""
    low: int
    tick: int
    n: int
    extras: np.ndarray

    @property
    def levels(self) -> int:
        return self.n + len(self.extras)

    @property
    def cost(self) -> int:
        """What choose_map minimises: the grid's levels, and EXTRA_COST for each extra."""
        return self.n + EXTRA_COST * len(self.extras)

    @property
    def high(self) -> int | None:
        return self.low + (self.n - 1) * self.tick if self.n else None

    def extra_ranks(self) -> np.ndarray:
        """The rank of each extra: its index plus the grid prices below it."""
        e = self.extras
        below = np.clip(-((self.low - e) // self.tick), 0, self.n) if self.n else np.zeros(len(e), np.int64)
        return np.arange(len(e), dtype=np.int64) + below

    def rank(self, prices) -> np.ndarray:
        """Core prices of real prices (>= 0): the rank, or -1 - price off the map (as C maps them)."""
        p = np.asarray(prices, np.int64)
        e = self.extras
        j = np.searchsorted(e, p, "left")
        hit = (j < len(e)) & (e[np.minimum(j, max(len(e) - 1, 0))] == p) if len(e) else np.zeros(p.shape, bool)
        out = np.where(hit, self.extra_ranks()[np.minimum(j, max(len(e) - 1, 0))] if len(e) else 0, -1 - p)
        if self.n:
            k = (p - self.low) // self.tick
            on = (p >= self.low) & ((p - self.low) % self.tick == 0) & (k < self.n) & ~hit
            out = np.where(on, k + j, out)
        return out

    def price(self, ranks) -> np.ndarray:
        """Real prices of core prices (rank.__inverse__; -1 - price back to the price)."""
        r = np.asarray(ranks, np.int64)
        er = self.extra_ranks()
        j = np.searchsorted(er, r, "left")  # extras ranked below r
        jc = np.minimum(j, max(len(er) - 1, 0))
        hit = (j < len(er)) & (er[jc] == r) if len(er) else np.zeros(r.shape, bool)
        out = np.where(hit, self.extras[jc] if len(er) else 0, self.low + (r - j) * self.tick)
        return np.where(r < 0, -1 - r, out)


def padded(lo: int, hi: int, tick: int, headroom: float) -> tuple[int, int]:
    """The band of prices lo..hi on the grid of tick: widened by headroom (of the range,
    plus half of it of the low price: 0.2 gives 20 % of the range and 10 % of the low price
    each side), but on each side by no more than the range or PAD_LEVELS ticks, whichever
    is more; never below 0."""
    pad = int(headroom * (hi - lo)) + int(headroom * lo) // 2
    pad = min(pad, max(hi - lo, PAD_LEVELS * tick))
    return max(0, (lo - pad) // tick * tick), -(-(hi + pad) // tick) * tick


def _grid_layout(d: np.ndarray, known: np.ndarray, tick: int, headroom: float) -> PriceMap:
    """The grid at tick of the least cost (PriceMap.cost: levels, and EXTRA_COST per
    extra), where every price outside it, or inside it off its tick, is an extra (d: every
    distinct price, ascending; known: the same). A price is left out of the grid only where
    that saves EXTRA_COST levels for it, so the grid holds the orders and the extras are
    the far ones: the grid is the window of the prices that saves the most, a maximum
    subarray of EXTRA_COST minus each gap in ticks; a window of one price gives no grid
    (n = 0: a ladder of all the prices)."""
    w = EXTRA_COST
    q = d // tick
    if len(q) > 1:
        run = np.concatenate([[0], np.cumsum(w - np.diff(q))])  # window [i, k] saves run[k] - run[i]
        k = int(np.argmax(run - np.minimum.accumulate(run)))
        i = int(np.argmin(run[:k + 1]))
    else:
        i = k = 0
    if i == k:
        return PriceMap(0, 1, 0, known)
    gl, gh = int(d[i]) // tick * tick, -(-int(d[k]) // tick) * tick
    low, high = padded(gl, gh, tick, headroom)
    extras = known[(known < low) | (known > high) | ((known - low) % tick != 0)]
    return PriceMap(low, tick, (high - low) // tick + 1, extras)


def choose_map(tick_all: int, prices: np.ndarray, headroom: float = 0.2) -> PriceMap | None:
    """The price map of the least cost (PriceMap.cost) over prices (every distinct order
    price of a book, sorted; tick_all their gcd), or None when there are none. Tries the
    grid at tick_all and, when some prices are not whole cents, at the gcd of those that
    are (the others extras)."""
    d = np.asarray(prices, np.int64)
    if not len(d):
        return None
    cents = d[d % CENT == 0]
    cent_gcd = int(np.gcd.reduce(cents)) if len(cents) else 0
    best = None
    ticks = [tick_all]
    if len(cents) < len(d) and cent_gcd and cent_gcd != tick_all:
        ticks.append(cent_gcd)
    for tick in ticks:
        m = _grid_layout(d, d, tick, headroom)
        if best is None or m.cost < best.cost:
            best = m
    return best


def map_candidate(tick: int, lo: int, hi: int, plain: int, headroom: float, distinct_min: int = 0) -> bool:
    """Whether a book whose order prices span lo..hi at gcd tick, and whose plain padded
    band has plain levels, could take a map (worth_mapping) that choose_map finds over its
    prices, whatever they are: only these books' prices are read again. Its plain band
    must be too wide (MAX_LEVELS), or a map must save MAP_SAVING levels and halve the band.
    Every distinct price takes a level of any map (on its grid or as an extra), so a map has
    at least distinct_min levels (pass 1's lower bound on the distinct prices; 0: unknown). A
    map at tick_all narrows the grid by at most the range and the padding on each side by at
    most max(1, headroom) times that (padded), so it saves at most (1 + 2 max(1, headroom))
    times the range in ticks (plus rounding, a level each side); at the cent's gcd, which
    only differs when the gcd is not whole cents, anything may be saved."""
    if plain <= MAP_SAVING:
        return False
    if plain > MAX_LEVELS:
        return True
    if plain - distinct_min < MAP_SAVING or 2 * distinct_min > plain:
        return False  # (a sub-dollar stock quoted densely in 1/10,000 $: not read again)
    if tick % CENT:
        return True
    return int((1 + 2 * max(1.0, headroom)) * (hi - lo)) // tick + 2 >= MAP_SAVING


def worth_mapping(plain_levels: int, m: PriceMap | None) -> bool:
    """Whether a book takes the map m instead of its plain band of plain_levels: when the
    plain band is too wide, or m saves MAP_SAVING levels and at least half."""
    if m is None or not len(m.extras):
        return False
    return plain_levels > MAX_LEVELS or (plain_levels - m.levels >= MAP_SAVING and 2 * m.levels <= plain_levels)


class PriceMaps:
    """The price maps of a replay's mapped books: the tables lob_itch_map_prices reads
    (events to core prices, in C) and the vectorised way back (core prices of report rows
    to real prices), and the count of orders each mapped book had at extra prices."""

    def __init__(self, maps: dict[int, PriceMap]):
        self.locates = sorted(maps)
        k = len(self.locates)
        self.book_map = np.zeros(65536, np.uint16)
        self.book_map[self.locates] = np.arange(1, k + 1)
        ms = [maps[loc] for loc in self.locates]
        self.table = np.zeros(k, core.ITCH_PMAP_DTYPE)
        sizes = np.array([len(m.extras) for m in ms], np.int64)
        first = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if k else np.zeros(0, np.int64)
        self.table["low"] = [m.low for m in ms]
        self.table["tick"] = [m.tick for m in ms]
        self.table["n"] = [m.n for m in ms]
        self.table["n_extra"] = sizes
        self.table["first"] = first
        self.extras = np.ascontiguousarray(np.concatenate([m.extras for m in ms]) if k else np.zeros(0), np.int64)
        ranks = np.concatenate([m.extra_ranks() for m in ms]) if k else np.zeros(0, np.int64)
        self.ranks = ranks.astype(np.uint32)
        # (map, rank) as one sorted key: the way back is one searchsorted for every book at once
        self.keys = (np.repeat(np.arange(k, dtype=np.int64), sizes) << 32) | ranks
        self.low = self.table["low"].copy()
        self.tick = self.table["tick"].copy()
        self.first = first
        self.outside = np.zeros(k, np.uint64)

    def __len__(self) -> int:
        return len(self.locates)

    def to_core(self, events: np.ndarray) -> None:
        """Events (EVENT_DTYPE, in place) to core prices; counts the orders at extra prices."""
        core.itch_map_prices(self.book_map, self.table, self.extras, self.ranks, events, self.outside)

    def real(self, locates, values, present=None) -> np.ndarray:
        """Real prices of core prices `values` of books `locates` (rows of reports), a new
        int64 array: those of mapped books turned back (ranks to prices, -1 - price to the
        price); present (bool, optional): only where True (elsewhere, an empty side's 0, left)."""
        out = np.array(values, np.int64)
        m = self.book_map[np.asarray(locates, np.int64)].astype(np.int64) - 1
        sel = m >= 0
        if present is not None:
            sel &= np.asarray(present, bool)
        if not sel.any():
            return out
        v, mm = out[sel], m[sel]
        res = -1 - v
        pos = v >= 0
        if pos.any():
            vp, mp = v[pos], mm[pos]
            key = (mp << 32) | vp
            j = np.searchsorted(self.keys, key, "left")
            jc = np.minimum(j, max(len(self.keys) - 1, 0))
            hit = (self.keys[jc] == key) if len(self.keys) else np.zeros(len(key), bool)
            grid = self.low[mp] + (vp - (j - self.first[mp])) * self.tick[mp]
            res[pos] = np.where(hit, self.extras[jc] if len(self.keys) else 0, grid)
        out[sel] = res
        return out

    def outside_by_locate(self) -> dict[int, int]:
        return {loc: int(c) for loc, c in zip(self.locates, self.outside.tolist())}
