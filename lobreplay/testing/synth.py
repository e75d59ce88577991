"""A seeded synthetic order flow (for the demo, tests and benchmarks).

Closed loop: each generated event is applied to a core session at once so the
generator knows exactly which orders are live (cancels and replaces aim at
live orders only, takers cross the real opposite best). The stream is
recorded; replaying it on a fresh session reproduces the same book. The
generator is slow (one core call per event); time only the replay.

Mix per event: 48% passive GTC adds at a geometric distance from a random-walk
mid, 37% cancels, 10% IOC takers crossing the opposite best by 1-6 ticks, 5%
replaces (new id, a price near the old one, a new size).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from lobreplay.core.book import Session
from lobreplay.core.events import EVENT_DTYPE, Kind, Side, TIF


@dataclass(frozen=True)
class BookSpec:
    instrument: int
    band_low: int
    band_high: int
    tick: int
    capacity: int


@dataclass
class Flow:
    events: np.ndarray
    books: list[BookSpec]

    def session(self) -> Session:
        """A fresh session with every book of the flow created."""
        s = Session(max(b.instrument for b in self.books))
        for b in self.books:
            s.add_book(b.instrument, b.band_low, b.band_high, b.tick, b.capacity)
        return s


class _Live:
    """Live order ids with O(1) random pick and removal."""

    def __init__(self):
        self.ids: list[int] = []
        self.pos: dict[int, int] = {}

    def add(self, i: int) -> None:
        self.pos[i] = len(self.ids)
        self.ids.append(i)

    def remove(self, i: int) -> None:
        k = self.pos.pop(i, None)
        if k is None:
            return
        last = self.ids.pop()
        if last != i:
            self.ids[k] = last
            self.pos[last] = k

    def pick(self, rng: random.Random) -> int:
        return self.ids[rng.randrange(len(self.ids))]


def generate_flow(n_events: int, *, n_instruments: int = 8, seed: int = 1, resting: int = 2000,
                  tick: int = 100, start_price: int = 1_000_000) -> Flow:
    """n_events over n_instruments (ids 1..n), about `resting` live orders per book.

    Prices are in ITCH Price(4) units by default (start $100.00, tick $0.01)."""
    rng = random.Random(seed)
    half = 2000 * tick
    books = [BookSpec(i, start_price - half, start_price + half, tick, 4 * resting + 1024)
             for i in range(1, n_instruments + 1)]
    flow = Flow(np.zeros(n_events, EVENT_DTYPE), books)
    sess = flow.session()
    views = {b.instrument: sess.book(b.instrument) for b in books}
    live = {b.instrument: _Live() for b in books}
    mid = {b.instrument: start_price for b in books}
    weights = [1.0 / (k + 1) for k in range(n_instruments)]  # skewed activity
    ev = np.zeros(1, EVENT_DTYPE)
    next_id = 1
    for i in range(n_events):
        inst = rng.choices(range(1, n_instruments + 1), weights)[0]
        bk, lv = views[inst], live[inst]
        step = rng.choice((-tick, 0, tick))
        mid[inst] = min(max(mid[inst] + step, bk.band_low + 200 * tick), bk.band_high - 200 * tick)
        m = mid[inst]
        u = rng.random()
        if len(lv.ids) < resting // 4:
            u = 0.0  # build the book first
        elif len(lv.ids) > 2 * resting:
            u = 0.5  # too deep: cancel
        side = Side.BUY if rng.random() < 0.5 else Side.SELL
        if u < 0.48:
            dist = 1 + min(int(rng.expovariate(0.08)), 150)
            if side == Side.BUY:  # passive: never at or through the opposite best
                opp = bk.best_ask()
                price = min(m - dist * tick, opp[0] - tick if opp else m)
            else:
                opp = bk.best_bid()
                price = max(m + dist * tick, opp[0] + tick if opp else m)
            price = min(max(price, bk.band_low), bk.band_high)
            row = (next_id, 0, price, rng.randint(1, 10) * 100, inst, Kind.NEW, side, TIF.GTC, 0)
            next_id += 1
        elif u < 0.85:
            row = (lv.pick(rng), 0, 0, 0, inst, Kind.CANCEL, 0, 0, 0)
        elif u < 0.95:
            opp = bk.best_ask() if side == Side.BUY else bk.best_bid()
            ref = opp[0] if opp else m
            cross = rng.randint(1, 6) * tick
            price = ref + cross if side == Side.BUY else ref - cross
            price = min(max(price, bk.band_low), bk.band_high)
            row = (next_id, 0, price, rng.randint(1, 8) * 100, inst, Kind.NEW, side, TIF.IOC, 0)
            next_id += 1
        else:
            old = lv.pick(rng)
            o_side, o_price, _ = bk.find(old)
            price = o_price + rng.choice((-2, -1, 1, 2)) * tick
            price = min(max(price, bk.band_low), bk.band_high)
            row = (old, next_id, price, rng.randint(1, 10) * 100, inst, Kind.REPLACE, 0, 0, 0)
            next_id += 1
        ev[0] = row
        flow.events[i] = row
        out = sess.apply(ev)
        r = out.results[0]
        if r["status"] != 0:
            raise AssertionError(f"generator produced a rejected event {row}: status {r['status']}")
        for e in out.execs:
            if e["maker_remaining"] == 0:
                lv.remove(int(e["maker_id"]))
        kind = row[5]
        if kind in (Kind.CANCEL, Kind.REPLACE):
            lv.remove(row[0])
        if r["resting"] > 0 and kind != Kind.CANCEL:
            lv.add(row[1] if kind == Kind.REPLACE else row[0])
    return flow
