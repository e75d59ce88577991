"""L2 level streams -> core events (lobreplay.l2.ladder) against a naive dict book, and
the .lobc replay with its reports (lobreplay.l2.replay)."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lobreplay.l2 import lobc
from lobreplay.errors import InputError
from lobreplay.l2.ladder import MAX_MESSAGE, L2Replay, scan

ROOT = Path(__file__).resolve().parents[2]
from conftest import REAL_BINANCE  # noqa: E402

SPOT = REAL_BINANCE / "hftbacktest" / "spot"
USDM = REAL_BINANCE / "hftbacktest" / "usdm"


# ---------------------------------------------------------------- the naive book

class NaiveL2:
    """The documented semantics, written the obvious way: per symbol two dicts
    price -> qty. A message is applied at its END: its last entry per (side,
    price); entries that shrink or remove a level first, then the others, each
    group in record order; a positive quantity removes the levels of the other
    side it crosses (stale). A snapshot also zeroes every level it lacks.
    Diffs count only while the symbol is synced (after its first snapshot, and
    not between a GAP and the next RESYNC)."""

    def __init__(self):
        self.books: dict[int, tuple[dict, dict]] = {}
        self.state: dict[int, str] = {}
        self.open: list | None = None
        self.crossed = {"crossed_by_bid_update": 0, "crossed_by_ask_update": 0, "crossed_by_snapshot": 0}
        self.skipped = 0

    def book(self, s):
        return self.books.setdefault(s, ({}, {}))

    def top(self, s):
        b, a = self.book(s)
        bb = max(b) if b else 0
        ba = min(a) if a else 0
        return (bb, b.get(bb, 0), ba, a.get(ba, 0))

    def levels(self, s):
        b, a = self.book(s)
        return sorted(b.items(), reverse=True), sorted(a.items())

    def _apply(self, s, entries, snapshot):
        bids, asks = self.book(s)
        last = {}
        for i, (side, p, q) in enumerate(entries):
            last[(side, p)] = (i, q)
        if snapshot:
            for p in list(bids):
                last.setdefault((ord("B"), p), (-1, 0))
            for p in list(asks):
                last.setdefault((ord("S"), p), (-1, 0))
        items = []
        for (side, p), (i, q) in last.items():
            book = bids if side == ord("B") else asks
            prev = book.get(p, 0)
            phase = 1 if (q > 0 and q >= prev) else 0
            items.append((phase, i, side, p, q))
        for _, _, side, p, q in sorted(items):
            book, other = (bids, asks) if side == ord("B") else (asks, bids)
            if q == 0:
                book.pop(p, None)
                continue
            book[p] = q
            stale = [x for x in other if (x <= p if side == ord("B") else x >= p)]
            for x in stale:
                del other[x]
                cause = "crossed_by_snapshot" if snapshot else (
                    "crossed_by_bid_update" if side == ord("B") else "crossed_by_ask_update")
                self.crossed[cause] += 1

    def record(self, r):
        k, s = int(r["kind"]), int(r["symbol"])
        if k in (lobc.DIFF_BEGIN, lobc.SNAPSHOT_BEGIN):
            self.open = [k, s, []]
        elif k in (lobc.DIFF_LEVEL, lobc.SNAPSHOT_LEVEL):
            self.open[2].append((int(r["side"]), int(r["price"]), int(r["qty"])))
        elif k in (lobc.DIFF_END, lobc.SNAPSHOT_END):
            kind, s, entries = self.open
            self.open = None
            if kind == lobc.SNAPSHOT_BEGIN:
                self._apply(s, entries, True)
                if self.state.get(s, "none") == "none":
                    self.state[s] = "synced"
            elif self.state.get(s) == "synced":
                self._apply(s, entries, False)
            else:
                self.skipped += 1
        elif k == lobc.GAP:
            self.state[s] = "gapped"
        elif k == lobc.RESYNC:
            self.state[s] = "synced"


# ---------------------------------------------------------------- synthetic streams

def synth_stream(seed: int, n_messages: int = 300, n_symbols: int = 2, *, cross_rate: float = 0.05,
                 gap_rate: float = 0.01, tick: int = 1_000_000, ticker_error: float = 0.0):
    """Records of a seeded random L2 feed (SNAPSHOT, DIFF, TRADE, GAP, RESYNC,
    TICKER) with crossing updates and zeros for unknown levels. A ticker follows
    every message that changed the top (with the message's u), as Binance's
    bookTicker reports every change; at rate ticker_error its bid qty is wrong."""
    rng = np.random.default_rng(seed)
    truth = NaiveL2()
    out = []
    t = 1_700_000_000_000_000_000
    uid = {s: 1000 for s in range(n_symbols)}
    mid = {s: 50_000 + 1000 * s for s in range(n_symbols)}

    def add(kind, s, **kw):
        nonlocal t
        t += int(rng.integers(1, 1000))
        rec = np.zeros(1, lobc.RECORD_DTYPE)[0]
        rec["kind"], rec["symbol"], rec["recv_ns"] = kind, s, t
        for f, v in kw.items():
            rec[f] = v
        out.append(rec.copy())
        truth.record(rec)

    def price(s, side, near=True):
        off = int(rng.integers(1, 6 if near else 60))
        return (mid[s] - off if side == ord("B") else mid[s] + off) * tick

    last_ticker = {}

    def ticker(s):  # bookTicker: on every change of the top (as Binance pushes it)
        top = truth.top(s)
        if last_ticker.get(s) == top:
            return
        last_ticker[s] = top
        if rng.random() < ticker_error:
            top = (top[0], top[1] + 1, top[2], top[3])
        add(lobc.TICKER_BID, s, first_id=uid[s], price=top[0], qty=top[1], side=ord("B"))
        add(lobc.TICKER_ASK, s, first_id=uid[s], price=top[2], qty=top[3], side=ord("S"))

    def snapshot(s):
        uid[s] += int(rng.integers(1, 5))
        add(lobc.SNAPSHOT_BEGIN, s, first_id=uid[s])
        for side in (ord("B"), ord("S")):
            for p in sorted({price(s, side, False) for _ in range(int(rng.integers(1, 12)))}):
                add(lobc.SNAPSHOT_LEVEL, s, side=side, price=p, qty=int(rng.integers(1, 50)) * 10_000)
        add(lobc.SNAPSHOT_END, s, first_id=uid[s])
        ticker(s)

    for s in range(n_symbols):
        if rng.random() < 0.5:  # a diff before any snapshot: skipped
            add(lobc.DIFF_BEGIN, s, first_id=1, last_id=2)
            add(lobc.DIFF_LEVEL, s, side=ord("B"), price=price(s, ord("B")), qty=5)
            add(lobc.DIFF_END, s, first_id=1, last_id=2)
        snapshot(s)
    for _ in range(n_messages):
        s = int(rng.integers(0, n_symbols))
        r = rng.random()
        if r < gap_rate:
            add(lobc.GAP, s, first_id=uid[s] + 1, last_id=uid[s] + 7, flags=lobc.GAP_SEQUENCE)
            for _ in range(int(rng.integers(0, 3))):  # skipped while unsynced
                add(lobc.DIFF_BEGIN, s, first_id=uid[s] + 10, last_id=uid[s] + 11)
                add(lobc.DIFF_LEVEL, s, side=ord("S"), price=price(s, ord("S")), qty=7)
                add(lobc.DIFF_END, s, first_id=uid[s] + 10, last_id=uid[s] + 11)
            snapshot(s)
            add(lobc.RESYNC, s, first_id=uid[s])
            continue
        if r < gap_rate + 0.05:
            add(lobc.TRADE, s, first_id=int(rng.integers(1, 1 << 40)), price=mid[s] * tick, qty=3,
                side=ord("B") if rng.random() < 0.5 else ord("S"))
            continue
        mid[s] += int(rng.integers(-2, 3))
        first = uid[s] + 1
        uid[s] += int(rng.integers(1, 20))
        add(lobc.DIFF_BEGIN, s, first_id=first, last_id=uid[s], exch_ns=t)
        for _ in range(int(rng.integers(0, 8))):
            side = ord("B") if rng.random() < 0.5 else ord("S")
            x = rng.random()
            if x < cross_rate:   # crosses the other side: stale levels there
                bk, ak = truth.top(s)[0], truth.top(s)[2]
                p = (ak if side == ord("B") else bk) or price(s, side)
                p += int(rng.integers(0, 3)) * tick * (1 if side == ord("B") else -1)
                if p <= 0:
                    p = price(s, side)
            else:
                p = price(s, side, near=rng.random() < 0.8)
            q = 0 if rng.random() < 0.3 else int(rng.integers(1, 100)) * 10_000
            add(lobc.DIFF_LEVEL, s, side=side, price=p, qty=q)
        add(lobc.DIFF_END, s, first_id=first, last_id=uid[s])
        ticker(s)
    return np.array(out, lobc.RECORD_DTYPE), truth


def sorted_rows(parts: list[dict]) -> dict:
    """The rows of several feed() calls as one output: concatenated, then (stable) by record
    (a comparison point is resolved when its ticker comes, which a later chunk can hold)."""
    out = {}
    for p in parts:
        for t, cols in p.items():
            out.setdefault(t, []).append(cols)
    res = {}
    for t, v in out.items():
        cols = {c: np.concatenate([x[c] for x in v]) for c in v[0]}
        o = np.argsort(cols["record"], kind="stable")
        res[t] = {c: a[o] for c, a in cols.items()}
    return res


def feed_in_batches(rp: L2Replay, recs: np.ndarray, sizes, tiny: bool = False) -> dict:
    """rp fed recs in batches of `sizes` records, then finished: its rows as one output
    (sorted_rows). tiny: every output array one row long first (the C replay then stops for
    room and resumes at nearly every row)."""
    if tiny:
        for name in rp._c._FIELDS:
            rp._c._grow(name, 1)
    parts, i = [], 0
    for k in sizes:
        if i >= len(recs):
            break
        parts.append(rp.feed(recs[i:i + k]))
        i += k
    return sorted_rows(parts + [rp.feed(recs[i:]), rp.finish()])


def replay_of(records, symbols=("AAA", "BBB", "CCC"), mode="auto", **kw):
    sizing = scan(records, list(symbols), mode=mode)
    return L2Replay(sizing, list(symbols), **kw)


def assert_same(rp: L2Replay, naive: NaiveL2, syms):
    for s in syms:
        assert rp.levels(s) == naive.levels(s), f"symbol {s}"
        assert rp.best(s) == naive.top(s)


# ---------------------------------------------------------------- L2 -> events

@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("mode", ["grid", "ladder"])
def test_every_record_matches_the_naive_book(seed, mode):
    recs, _ = synth_stream(seed, n_messages=250)
    rp = replay_of(recs, mode=mode)
    naive = NaiveL2()
    for r in recs:
        rp.feed(r.reshape(1))
        naive.record(r)
        if naive.open is None:
            assert_same(rp, naive, range(2))
    rp.finish()
    for s in range(2):
        rp.session.book(s).validate()
    crossed = {k: v for k, v in rp.counters.desyncs.items() if k.startswith("crossed")}
    assert crossed == {k: v for k, v in naive.crossed.items() if v}
    assert sum(crossed.values()) > 0, "the stream should exercise stale crossing levels"


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_batches_of_any_size_give_the_same_book_and_rows(seed):
    recs, truth = synth_stream(seed, n_messages=400, n_symbols=3)
    whole = replay_of(recs)
    rows_whole = whole.feed(recs)
    rest = whole.finish()
    assert_same(whole, truth, range(3))
    rng = np.random.default_rng(seed)
    parts = replay_of(recs)
    bbo = []
    i = 0
    while i < len(recs):
        j = i + int(rng.integers(1, 40))
        out = parts.feed(recs[i:j])
        if "bbo" in out:
            bbo.append(out["bbo"])
        i = j
    parts.finish()
    assert_same(parts, truth, range(3))
    cat = {k: np.concatenate([b[k] for b in bbo]) for k in bbo[0]}
    for k in rows_whole["bbo"]:
        np.testing.assert_array_equal(cat[k], rows_whole["bbo"][k])
    assert parts.counters.desyncs == whole.counters.desyncs
    assert parts.counters.events == whole.counters.events
    assert not rest.get("bbo")


def test_bbo_rows_are_every_change_of_the_top():
    recs, _ = synth_stream(11, n_messages=300)
    rp = replay_of(recs)
    naive = NaiveL2()
    expected = []
    last = {0: (0, 0, 0, 0), 1: (0, 0, 0, 0)}
    for i, r in enumerate(recs):
        naive.record(r)
        if r["kind"] in (lobc.DIFF_END, lobc.SNAPSHOT_END):
            s = int(r["symbol"])
            if naive.top(s) != last[s]:
                last[s] = naive.top(s)
                expected.append((i, s, *last[s]))
    out = rp.feed(recs)["bbo"]
    got = list(zip(out["record"].tolist(), out["symbol"].tolist(), out["bid_price"].tolist(),
                   out["bid_qty"].tolist(), out["ask_price"].tolist(), out["ask_qty"].tolist()))
    assert got == expected


def test_level_kinds_map_to_core_events():
    sym = ["X"]
    recs = []

    def r(kind, **kw):
        x = np.zeros(1, lobc.RECORD_DTYPE)[0]
        x["kind"] = kind
        for f, v in kw.items():
            x[f] = v
        recs.append(x.copy())

    def msg(levels, first, last):
        r(lobc.DIFF_BEGIN, first_id=first, last_id=last)
        for side, p, q in levels:
            r(lobc.DIFF_LEVEL, side=ord(side), price=p, qty=q)
        r(lobc.DIFF_END, first_id=first, last_id=last)

    r(lobc.SNAPSHOT_BEGIN, first_id=10)
    r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=100, qty=5)
    r(lobc.SNAPSHOT_LEVEL, side=ord("S"), price=110, qty=5)
    r(lobc.SNAPSHOT_END, first_id=10)
    msg([("B", 101, 3)], 11, 11)           # NEW
    msg([("B", 101, 2)], 12, 12)           # REDUCE
    msg([("B", 101, 9)], 13, 13)           # REPLACE
    msg([("B", 101, 9)], 14, 14)           # unchanged
    msg([("B", 101, 0)], 15, 15)           # CANCEL
    msg([("B", 99, 0)], 16, 16)            # zero for an unknown level
    msg([("B", 110, 4)], 17, 17)           # crosses the ask at 110: stale, removed
    arr = np.array(recs, lobc.RECORD_DTYPE)
    rp = L2Replay(scan(arr, sym), sym)
    out = rp.feed(arr)
    c = rp.counters
    assert c.events == {"NEW": 2 + 2, "CANCEL": 1, "REDUCE": 1, "REPLACE": 1}
    assert c.unchanged_levels == 1 and c.zero_qty_unknown_level == 1
    assert c.desyncs == {"crossed_by_bid_update": 1}
    d = out["desyncs"]
    assert d["cause"].tolist() == ["crossed_by_bid_update"]
    assert (d["price"][0], d["qty"][0], d["other_price"][0], d["other_qty"][0]) == (110, 4, 110, 5)
    assert rp.levels(0) == ([(110, 4), (100, 5)], [])
    # ids: unique per (symbol, side, level) and stable
    v = rp.session.book(0)
    ids = [oid for p, _, _ in v.depth("B", 10) for oid, _ in v.level_orders(p)]
    assert len(set(ids)) == 2 and all(i >> 48 == 1 for i in ids)


def test_gap_marks_the_symbol_unsynced_until_resync():
    recs, truth = synth_stream(21, n_messages=600, gap_rate=0.05)
    rp = replay_of(recs)
    rp.feed(recs)
    rp.finish()
    assert_same(rp, truth, range(2))
    gaps = int((recs["kind"] == lobc.GAP).sum())
    assert gaps > 3
    assert rp.counters.desyncs["gap_sequence"] == gaps
    skipped = sum(rp.counters.messages_skipped.values())
    assert skipped == truth.skipped > 0
    assert rp.counters.messages_skipped.get("unsynced_update_skipped", 0) > 0


def test_snapshot_rebuilds_the_book():
    recs, truth = synth_stream(31, n_messages=50, n_symbols=1, gap_rate=0.0)
    rp = replay_of(recs)
    rp.feed(recs)
    extra = []

    def r(kind, **kw):
        x = np.zeros(1, lobc.RECORD_DTYPE)[0]
        x["kind"] = kind
        for f, v in kw.items():
            x[f] = v
        extra.append(x.copy())

    r(lobc.GAP, first_id=1, last_id=9, flags=lobc.GAP_DISCONNECT)
    r(lobc.SNAPSHOT_BEGIN, first_id=99)
    r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=int(recs["price"][recs["price"] > 0].min()), qty=1)
    r(lobc.SNAPSHOT_END, first_id=99)
    r(lobc.RESYNC, first_id=99)
    extra = np.array(extra, lobc.RECORD_DTYPE)
    allrec = np.concatenate([recs, extra])
    rp2 = replay_of(allrec)
    rp2.feed(allrec)
    p = int(extra["price"][2])
    assert rp2.levels(0) == ([(p, 1)], [])
    assert rp2.state[0] == 1


def test_ticker_comparison_counts_points_and_misses():
    recs, _ = synth_stream(41, n_messages=500, ticker_error=0.0, cross_rate=0.0)
    rp = replay_of(recs)
    rp.feed(recs)
    rp.finish()
    st = rp.ticker_stats
    assert st["comparable"] > 100 and st["matches"] == st["comparable"]
    recs, _ = synth_stream(41, n_messages=500, ticker_error=0.2, cross_rate=0.0)
    rp = replay_of(recs)
    out = rp.feed(recs)
    rp.finish()
    st = rp.ticker_stats
    assert 0 < st["comparable"] - st["matches"] == len(out["ticker_mismatches"]["record"])
    assert st["price_matches"] == st["comparable"]  # only quantities were made wrong


def test_scan_sizes_books():
    recs, _ = synth_stream(51, n_messages=200)
    grid = scan(recs, ["A", "B"], mode="grid")
    ladder = scan(recs, ["A", "B"], mode="ladder")
    for s in (0, 1):
        g, lad = grid[s], ladder[s]
        assert g.tick % 1_000_000 == 0 and g.band_low <= g.prices[0] and g.band_high >= g.prices[-1]
        assert lad.levels == len(lad.prices) and lad.mode == "ladder"
        assert g.capacity >= g.peak_levels > 0
    auto = scan(recs, ["A", "B"], max_grid_levels=10)
    assert all(z.mode == "ladder" for z in auto.values())


def _records():
    """A record list and a function appending one record to it (l2_golden.record_builder)."""
    from l2_golden import record_builder
    return record_builder()


def _snapshot_of_200(r):
    """A snapshot (lastUpdateId 1) of 100 bids from 1000 down and 100 asks from 1001 up."""
    r(lobc.SNAPSHOT_BEGIN, first_id=1)
    for i in range(100):
        r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=1000 - i, qty=1)
        r(lobc.SNAPSHOT_LEVEL, side=ord("S"), price=1001 + i, qty=1)
    r(lobc.SNAPSHOT_END, first_id=1)


def _zeros_pass_2_never_applies(how):
    """A snapshot of 100 bids and 100 asks, then a zero for each of its 200 levels that pass 2
    does not apply (`how`), then a whole diff adding 200 new levels: the book holds 400 levels."""
    rows, r = _records()
    _snapshot_of_200(r)

    def zeros(kind=lobc.DIFF_LEVEL):
        for i in range(100):
            r(kind, side=ord("B"), price=1000 - i, qty=0)
            r(kind, side=ord("S"), price=1001 + i, qty=0)

    if how == "orphans":                  # outside any message
        zeros()
    elif how == "orphan_snapshot_levels":
        zeros(lobc.SNAPSHOT_LEVEL)
    elif how == "no_end":                 # a message without its END (a TRADE follows)
        r(lobc.DIFF_BEGIN, first_id=2, last_id=2)
        zeros()
        r(lobc.TRADE, first_id=1, price=1000, qty=1, side=ord("B"))
    elif how == "other_symbol_end":       # ended by another symbol's END
        r(lobc.DIFF_BEGIN, first_id=2, last_id=2)
        zeros()
        r(lobc.DIFF_END, 1, first_id=2, last_id=2)
    elif how == "unsynced":               # GAP, a skipped diff, RESYNC without a snapshot
        r(lobc.GAP, first_id=2, last_id=3, flags=lobc.GAP_SEQUENCE)
        r(lobc.DIFF_BEGIN, first_id=4, last_id=4)
        zeros()
        r(lobc.DIFF_END, first_id=4, last_id=4)
        r(lobc.RESYNC, first_id=4)
    elif how == "other_symbols_level":    # in symbol 1's message: orphans
        r(lobc.SNAPSHOT_BEGIN, 1, first_id=1)
        r(lobc.SNAPSHOT_LEVEL, 1, side=ord("B"), price=10, qty=1)
        r(lobc.SNAPSHOT_END, 1, first_id=1)
        r(lobc.DIFF_BEGIN, 1, first_id=2, last_id=2)
        zeros()
        r(lobc.DIFF_END, 1, first_id=2, last_id=2)
    r(lobc.DIFF_BEGIN, first_id=2, last_id=5)  # (follows the snapshot of id 1 by the spot rule)
    for i in range(100):
        r(lobc.DIFF_LEVEL, side=ord("B"), price=900 - i, qty=1)
        r(lobc.DIFF_LEVEL, side=ord("S"), price=1101 + i, qty=1)
    r(lobc.DIFF_END, first_id=2, last_id=5)
    return np.array(rows, lobc.RECORD_DTYPE)


@pytest.mark.parametrize("how", ["orphans", "orphan_snapshot_levels", "no_end", "other_symbol_end", "unsynced",
                                 "other_symbols_level"])
@pytest.mark.parametrize("mode", ["grid", "ladder"])
def test_capacity_bounds_the_book_whatever_zeros_pass_2_skips(how, mode):
    """Pass 1 removed a level on every zero, also on those pass 2 never applies (outside a
    message, in one without its END, in a diff skipped while unsynced): the book was sized
    for 200 levels, pass 2 had 400 and rejected 175 with book-full, status ok."""
    arr = _zeros_pass_2_never_applies(how)
    sizing = scan(arr, ["X", "Y"], mode=mode)
    assert sizing[0].peak_levels >= 400
    rp = L2Replay(sizing, ["X", "Y"])
    rows = rp.feed(arr)
    rows_end = rp.finish()
    causes = set(rp.counters.desyncs)
    assert not {c for c in causes if c.startswith(("rejected_", "core_"))}, causes
    bids = [(1000 - i, 1) for i in range(100)] + [(900 - i, 1) for i in range(100)]
    asks = [(1001 + i, 1) for i in range(100)] + [(1101 + i, 1) for i in range(100)]
    assert rp.levels(0) == (bids, asks)
    assert rp.counters.events["NEW"] == 400 + (how == "other_symbols_level")  # (+ Y's snapshot)
    assert "bbo" in rows and not rows_end.get("bbo")


def test_capacity_stays_tight_on_well_formed_messages():
    """Zeros in messages pass 2 applies still remove levels in pass 1: a snapshot of 200
    levels, a diff removing them all, a diff adding 200 others: a peak of 200, not 400."""
    rows, r = _records()
    _snapshot_of_200(r)
    for first, (bid, ask, q) in enumerate([(1000, 1001, 0), (900, 1101, 1)], start=2):
        r(lobc.DIFF_BEGIN, first_id=first, last_id=first)
        for i in range(100):
            r(lobc.DIFF_LEVEL, side=ord("B"), price=bid - i, qty=q)
            r(lobc.DIFF_LEVEL, side=ord("S"), price=ask + i, qty=q)
        r(lobc.DIFF_END, first_id=first, last_id=first)
    arr = np.array(rows, lobc.RECORD_DTYPE)
    for chunks in ([arr], [arr[:7], arr[7:300], arr[300:]]):  # (pass 1 in chunks: a message across them)
        assert scan(iter(chunks), ["X"])[0].peak_levels == 200


def test_a_symbol_beyond_the_files_symbols_is_unknown_not_a_book():
    """docs/l2.md: records of a symbol index beyond the file's symbols are reported as
    unknown_symbol. A whole snapshot and diff of index 2 (of 2 symbols) got a book named
    "2" and were replayed."""
    rows, r = _records()
    for s in (0, 2):
        r(lobc.SNAPSHOT_BEGIN, s, first_id=1)
        r(lobc.SNAPSHOT_LEVEL, s, side=ord("B"), price=100, qty=1)
        r(lobc.SNAPSHOT_END, s, first_id=1)
        r(lobc.DIFF_BEGIN, s, first_id=2, last_id=2)
        r(lobc.DIFF_LEVEL, s, side=ord("S"), price=101, qty=1)
        r(lobc.DIFF_END, s, first_id=2, last_id=2)
    arr = np.array(rows, lobc.RECORD_DTYPE)
    sizing = scan(arr, ["X", "Y"])
    assert sorted(sizing) == [0]
    rp = L2Replay(sizing, ["X", "Y"])
    out = rp.feed(arr)
    rp.finish()
    assert rp.counters.desyncs == {"unknown_symbol": 6}
    assert out["desyncs"]["record"].tolist() == list(range(6, 12))
    assert rp.nsym == 2 and rp.levels(0) == ([(100, 1)], [(101, 1)])
    assert (rp.counters.messages_applied, rp.counters.snapshots_applied) == (1, 1)
    with pytest.raises(ValueError, match="beyond"):
        L2Replay(scan(arr, ["X", "Y", "Z"]), ["X", "Y"])
    # no symbols at all: every record is unknown
    rp = L2Replay(scan(arr, []), [])
    rp.feed(arr)
    rp.finish()
    assert rp.counters.desyncs == {"unknown_symbol": 12}


def test_a_record_of_an_unknown_symbol_inside_a_group_whatever_the_chunk_cut():
    """A record of an unknown symbol inside a message, or between a TICKER_BID and its
    TICKER_ASK, is skipped when the C replay matches the group; a chunk cut right after it
    ended the group there (the message incomplete, the ticker unpaired)."""
    rows, r = _records()
    r(lobc.SNAPSHOT_BEGIN, first_id=1)
    r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=100, qty=1)
    r(lobc.SNAPSHOT_END, first_id=1)
    r(lobc.DIFF_BEGIN, first_id=2, last_id=2)
    r(lobc.DIFF_LEVEL, side=ord("S"), price=101, qty=1)
    r(lobc.TRADE, 5, first_id=1, price=100, qty=1, side=ord("B"))     # unknown symbol, in the message
    r(lobc.DIFF_LEVEL, side=ord("S"), price=102, qty=2)
    r(lobc.DIFF_END, first_id=2, last_id=2)
    r(lobc.TICKER_BID, first_id=2, price=100, qty=1)
    r(lobc.DIFF_LEVEL, 7, side=ord("B"), price=99, qty=1)              # unknown symbol, in the ticker
    r(lobc.TICKER_ASK, first_id=2, price=101, qty=1)
    r(lobc.DIFF_BEGIN, first_id=3, last_id=3)
    r(lobc.DIFF_LEVEL, 9, side=ord("B"), price=99, qty=1)              # unknown symbol, first in the message
    r(lobc.DIFF_LEVEL, side=ord("B"), price=100, qty=0)
    r(lobc.DIFF_END, first_id=3, last_id=3)
    r(lobc.TICKER_BID, first_id=3, price=0, qty=0)
    r(lobc.TICKER_ASK, first_id=3, price=101, qty=1)
    arr = np.array(rows, lobc.RECORD_DTYPE)
    unknown = np.flatnonzero(arr["symbol"] >= 2)

    def run(cuts):
        rp = replay_of(arr, ("X", "Y"))
        parts = [rp.feed(c) for c in np.split(arr, cuts)] + [rp.finish()]
        rows = {}
        for p in parts:
            for t, cols in p.items():
                rows.setdefault(t, []).append(cols)
        rows = {t: {c: np.concatenate([x[c] for x in v]) for c, _ in v[0].items()} for t, v in rows.items()}
        return rp, rows

    whole, want = run([])
    assert whole.counters.desyncs == {"unknown_symbol": 3}
    assert (whole.counters.messages_applied, whole.counters.tickers) == (2, 2)
    assert whole.levels(0) == ([], [(101, 1), (102, 2)])
    assert whole.ticker_stats["matches"] == whole.ticker_stats["comparable"] == 1  # (u 3: no later ticker)
    for cuts in [[u + 1] for u in unknown] + [list(unknown + 1), list(unknown), list(range(1, len(arr)))]:
        rp, got = run(cuts)
        assert rp.counters == whole.counters or (
            {**vars(rp.counters), "core_seconds": 0, "core_calls": 0} ==
            {**vars(whole.counters), "core_seconds": 0, "core_calls": 0}), cuts
        assert rp.ticker_stats == whole.ticker_stats, cuts
        assert rp.levels(0) == whole.levels(0), cuts
        assert sorted(got) == sorted(want), cuts
        for t in want:
            for c in want[t]:
                assert np.asarray(got[t][c]).tolist() == np.asarray(want[t][c]).tolist(), (cuts, t, c)


@pytest.mark.parametrize("market", ["spot", "usdm"])
def test_diff_messages_must_follow_by_the_markets_update_id_rule(tmp_path, market):
    """docs/l2.md "Update ids": the replay checks every diff message of a synced symbol against
    the one before it by the file's market's rule (the capture's own sync rule), instead of
    trusting that every gap has its GAP record: a message that does not follow is a
    sequence_break row (first_id: the id expected, last_id: the one received), is not applied,
    and the symbol waits for a RESYNC after a snapshot, as after a GAP. The same file marked
    with another market (another venue's ids) is not checked."""
    from lobreplay.l2.replay import replay_lobc

    rows, r = _records()
    spot = market == "spot"

    def diff(U, u, pu, price, qty):
        r(lobc.DIFF_BEGIN, first_id=U, last_id=u, prev_id=pu)
        r(lobc.DIFF_LEVEL, side=ord("B"), price=price, qty=qty)
        r(lobc.DIFF_END, first_id=U, last_id=u)

    def snapshot(L, price):
        r(lobc.SNAPSHOT_BEGIN, first_id=L)
        r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=price, qty=1)
        r(lobc.SNAPSHOT_LEVEL, side=ord("S"), price=200, qty=1)
        r(lobc.SNAPSHOT_END, first_id=L)

    snapshot(10, 100)
    diff(11 if spot else 9, 12, 8, 101, 2)       # the first after the snapshot: U <= 11 (10) <= u
    diff(13, 15, 12, 102, 3)                      # follows: U = 12 + 1 (pu = 12)
    diff(17, 18, 16, 103, 4)                      # breaks: 16 expected by spot, 15 by USD-M
    diff(19, 19, 18, 104, 5)                      # unsynced from there: skipped
    r(lobc.GAP, first_id=19, last_id=25, flags=lobc.GAP_SEQUENCE)
    snapshot(30, 110)
    r(lobc.RESYNC, first_id=30)
    diff(32 if spot else 31, 33, 29, 111, 6)     # breaks right after the snapshot: U > 31 (30)
    arr = np.array(rows, lobc.RECORD_DTYPE)
    for mk, checked in ((market, True), ("coinm", False)):
        src = tmp_path / f"{mk}.lobc"
        with lobc.LobcWriter(src, venue="binance", market=mk, symbols=["X"]) as w:
            w.add_many(arr)
        s = replay_lobc(src, str(tmp_path / f"out_{mk}"))
        assert s["status"] == "ok" and s["update_ids_checked"] == (market if checked else None)
        d = pq.read_table(tmp_path / f"out_{mk}" / "desyncs.parquet").to_pandas()
        brk = d[d["cause"] == "sequence_break"]
        if not checked:
            assert brk.empty and s["messages_applied"] == 5
            continue
        begins = np.flatnonzero(arr["kind"] == lobc.DIFF_BEGIN)
        assert brk["sequence"].tolist() == [begins[2], begins[4]]
        assert brk[["first_id", "last_id"]].values.tolist() == ([[16, 17], [31, 32]] if spot else [[15, 16], [30, 31]])
        assert s["messages_applied"] == 2 and s["messages_skipped"] == {"sequence_break": 2,
                                                                       "unsynced_update_skipped": 1}
        assert s["desyncs_by_cause"]["sequence_break"] == 2
        book = s["books"][0]
        assert book["skipped"] == 3 and not book["synced_at_end"] and book["last_update_id"] == 30
        bbo = pq.read_table(tmp_path / f"out_{mk}" / "bbo.parquet").to_pandas()
        assert bbo["bid_price"].tolist() == [100, 101, 102, 110]  # nothing of a message that broke


def test_replay_of_a_file_with_a_symbol_beyond_its_symbols(tmp_path):
    """The same through replay_lobc (a file written without the writer's checks): no book
    for index 2, its records counted as unknown_symbol, status ok."""
    import l2_golden
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    arr = _zeros_pass_2_never_applies("orphans")
    arr = np.concatenate([arr, arr])
    arr["symbol"][len(arr) // 2:] = 2
    p = tmp_path / "beyond.lobc"
    l2_golden.write_raw(p, arr, symbols=("X", "Y"), per_block=97)
    s = replay_lobc(p, str(tmp_path / "out"), L2ReplayConfig(chunk_records=50), force=True)
    assert s["status"] == "ok"
    assert [b["symbol"] for b in s["books"]] == ["X"]
    assert s["desyncs_by_cause"] == {"orphan_record": 200, "unknown_symbol": len(arr) // 2}


# ---------------------------------------------------------------- the replay and its reports

def write_lobc(path, records, symbols=("AAA", "BBB", "CCC"), flush_records=500):
    with lobc.LobcWriter(path, venue="binance", market="spot", symbols=list(symbols),
                         flush_records=flush_records) as w:
        w.add_many(records)


def test_replay_writes_valid_parquet_with_provenance(tmp_path):
    from lobreplay.l2.replay import ALL_REPORTS, L2ReplayConfig, replay_lobc

    recs, truth = synth_stream(61, n_messages=800, n_symbols=3, ticker_error=0.01)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs)
    out = tmp_path / "out"
    s = replay_lobc(src, str(out), L2ReplayConfig(depth_levels=3, depth_every_ns=50_000))  # (every table)
    assert s["status"] == "ok"
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["status"] == "ok" and on_disk["records"] == len(recs)
    for name in ALL_REPORTS:
        t = pq.read_table(out / f"{name}.parquet")
        md = {k.decode(): v.decode() for k, v in t.schema.metadata.items()}
        assert md["source_file"] == "feed.lobc" and md["price_scale"] == "100000000"
        assert md["qty_scale"] == "100000000" and md["lobreplay_version"]
        assert len(md["source_sha256"]) == 64
        assert t.num_rows == s["report_rows"][name]
    bbo = pq.read_table(out / "bbo.parquet").to_pandas()
    assert len(bbo) == s["bbo_changes"] > 0
    assert set(bbo["symbol"].astype(str)) <= {"AAA", "BBB", "CCC"}
    last = bbo.groupby(bbo["symbol"].astype(str)).tail(1).set_index("symbol")
    for i, name in enumerate(("AAA", "BBB", "CCC")):
        top = truth.top(i)
        assert tuple(last.loc[name, ["bid_price", "bid_qty", "ask_price", "ask_qty"]]) == top
    des = pq.read_table(out / "desyncs.parquet").to_pandas()
    assert dict(des["cause"].value_counts()) == s["desyncs_by_cause"]
    assert s["desyncs_by_cause"]["gap_sequence"] == int((recs["kind"] == lobc.GAP).sum())
    assert set(des["side"]) <= {"", "B", "S"}
    tr = pq.read_table(out / "trades.parquet")
    assert tr.num_rows == int((recs["kind"] == lobc.TRADE).sum())
    lat = pq.read_table(out / "latency.parquet").to_pandas()
    assert set(lat["scope"]) == {"ALL", "AAA", "BBB", "CCC"}
    # every 16th event applied is timed (the first of each 16), and the summary says so
    every = s["pass2"]["timing_every"]
    assert every == 16
    assert lat[(lat.scope == "ALL") & (lat.kind == "ALL")]["count"].iloc[0] == -(-s["pass2"]["core_events"] // every)
    assert s["pass2"]["core_events"] == sum(s["events_by_kind"].values())
    # and the histograms themselves beside the percentiles, as an ITCH replay writes them
    hist = pq.read_table(out / "latency_histograms.parquet").to_pandas()
    assert len(hist) == s["report_rows"]["latency_histograms"] > 0
    per_kind = hist.groupby("kind")["count"].sum()
    assert per_kind["ALL"] == -(-s["pass2"]["core_events"] // every)
    assert per_kind["ALL"] == sum(per_kind[k] for k in per_kind.index if k != "ALL")
    assert all(per_kind[k] <= s["events_by_kind"][k] for k in per_kind.index if k != "ALL")
    assert not list(out.glob("*.hgrm"))  # (made from the table on request: hgrm.export_report_hgrm)
    # an event that meets stale levels removes one or more of them (one crossed row each)
    assert 0 < s["crossing_events"] <= sum(v for k, v in s["desyncs_by_cause"].items() if k.startswith("crossed"))
    bt = s["bookticker"]
    mis = pq.read_table(out / "ticker_mismatches.parquet")
    assert mis.num_rows == bt["comparable"] - bt["matches"] > 0
    assert bt["match_rate"] == bt["matches"] / bt["comparable"]
    # a second run needs --force
    with pytest.raises(InputError, match="not empty"):
        replay_lobc(src, str(out))
    assert replay_lobc(src, str(out), force=True)["status"] == "ok"


def test_replay_of_a_torn_file_and_of_chosen_symbols(tmp_path):
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    recs, _ = synth_stream(71, n_messages=300, n_symbols=3)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs, flush_records=100)
    raw = src.read_bytes()
    torn = tmp_path / "torn.lobc"
    torn.write_bytes(raw[:-10])
    s = replay_lobc(torn, str(tmp_path / "o1"))
    kept = (len(recs) - 1) // 100 * 100
    assert s["records"] == kept and s["lobc"]["whole"] is False
    assert s["lobc"]["torn"]["bytes"] == len(raw) - 10 - (512 + (kept // 100) * (64 + 6400))
    s = replay_lobc(src, str(tmp_path / "o2"), L2ReplayConfig(symbols=["bbb"], reports=("bbo",)))
    assert [b["symbol"] for b in s["books"]] == ["BBB"]
    assert s["records"] == int((recs["symbol"] == 1).sum())
    assert sorted(os.listdir(tmp_path / "o2")) == ["bbo.parquet", "summary.json"]
    with pytest.raises(InputError, match="no such symbol"):
        replay_lobc(src, str(tmp_path / "o3"), L2ReplayConfig(symbols=["ZZZ"]))
    failed = json.loads((tmp_path / "o3" / "summary.json").read_text())
    assert failed["status"] == "failed" and "ZZZ" in failed["error"]
    assert os.listdir(tmp_path / "o3") == ["summary.json"]  # (no empty report tables first)
    assert failed["lobc"]["whole"] and failed["lobc"]["records"] == len(recs)


def test_command_line(tmp_path, capsys):
    from lobreplay.cli.lobc import add_commands

    parser = argparse.ArgumentParser(prog="lobreplay")
    add_commands(parser.add_subparsers())
    recs, _ = synth_stream(81, n_messages=100)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs, flush_records=50)

    def run(*argv):
        a = parser.parse_args(list(argv))
        return a.func(a)

    assert run("lobc", "check", str(src)) == 0
    text = capsys.readouterr().out
    assert "whole" in text and f"{len(recs):,} records" in text
    (tmp_path / "cut.lobc").write_bytes(src.read_bytes()[:-1])
    assert run("lobc", "check", str(tmp_path / "cut.lobc")) == 1
    assert "TORN" in capsys.readouterr().out
    assert run("lobc", "replay", str(src), "-o", str(tmp_path / "o"), "--no-reports") == 0
    text = capsys.readouterr().out
    assert "diff messages applied" in text and "bookTicker:" in text
    assert os.listdir(tmp_path / "o") == ["summary.json"]
    with pytest.raises(InputError, match="not empty"):
        run("lobc", "replay", str(src), "-o", str(tmp_path / "o"))
    assert run("lobc", "replay", str(src), "-o", str(tmp_path / "o"), "--force", "--symbols", "AAA") == 0
    capsys.readouterr()
    raw = bytearray(src.read_bytes())                  # a bit flipped in block 0 of 3 or more
    raw[512 + 64 + 7] ^= 1
    (tmp_path / "bad.lobc").write_bytes(bytes(raw))
    assert run("lobc", "check", str(tmp_path / "bad.lobc")) == 1
    text = capsys.readouterr().out
    assert ": CORRUPT;" in text and "corrupt block at offset 512 (CRC mismatch in block 0); sound blocks " \
        f"follow from offset {512 + 64 + 50 * 64:,}: the file is damaged inside, not cut short" in text
    n_after = len(recs) - 50
    assert f"after the damage, from offset {512 + 64 + 50 * 64:,}: {-(-n_after // 50)} sound block(s), " \
        f"{n_after:,} records (not counted below), 1 damaged stretch(es) in all ({64 + 50 * 64:,} byte(s) at 512), " \
        "whole to the end of the file; `lobreplay lobc replay --allow-corrupt` replays them" in text
    raw = bytearray(src.read_bytes())                  # the same in block 1
    raw[512 + 64 + 50 * 64 + 64 + 7] ^= 1
    (tmp_path / "bad.lobc").write_bytes(bytes(raw))
    with pytest.raises(InputError, match="damaged inside.*--allow-corrupt replays the sound blocks on both sides"):
        run("lobc", "replay", str(tmp_path / "bad.lobc"), "-o", str(tmp_path / "c1"))
    assert run("lobc", "replay", str(tmp_path / "bad.lobc"), "-o", str(tmp_path / "c2"), "--allow-corrupt") == 0
    text = capsys.readouterr().out
    assert f"{len(recs) - 50 + 3:,} records" in text and "skipped 3,264 damaged byte(s) at offset 3,776 (CRC " \
        "mismatch in block 1), read on from offset 7,040: every book lost sync there" in text


# ---------------------------------------------------------------- the real recordings

@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """The hftbacktest BTCUSDT recordings (spot: both days; USD-M), converted by
    lobreplay.binance.convert."""
    from lobreplay.binance.convert import convert

    d = tmp_path_factory.mktemp("real")
    convert([SPOT / "btcusdt_20240808.gz", SPOT / "btcusdt_20240809.gz"], d / "spot.lobc")
    convert(USDM / "btcusdt_20240808.gz", d / "usdm.lobc")
    return d


@pytest.mark.parametrize("market", ["spot", "usdm"])
def test_real_recordings_match_bookticker(converted, tmp_path, market):
    from lobreplay.l2.replay import replay_lobc

    s = replay_lobc(converted / f"{market}.lobc", str(tmp_path / "o"))
    assert s["status"] == "ok" and s["lobc"]["whole"]
    assert s["desyncs"] == 0 and not s["messages_skipped"]
    bt = s["bookticker"]
    assert bt["comparable"] > 6000
    assert bt["match_rate"] >= 0.999, bt
    assert bt["comparable"] + sum(bt["not_comparable"].values()) == bt["points"]
    book = s["books"][0]
    assert book["symbol"] == "BTCUSDT" and book["synced_at_end"]
    assert book["final_bid_levels"] > 1000 and book["final_ask_levels"] > 1000


def test_a_real_recording_damaged_inside_replays_across_the_damage(converted, tmp_path):
    """The USD-M recording with a byte flipped in a block half way: --allow-corrupt replays
    both sides. Its one snapshot is before the damage, so the book stays unsynced from the
    damage on (every later diff message skipped, one row each), while the trades on both
    sides are all reported; the summary names the stretch skipped."""
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    src = converted / "usdm.lobc"
    blocks = list(lobc.iter_blocks(src))
    mid = blocks[len(blocks) // 2]
    raw = bytearray(src.read_bytes())
    raw[mid.offset + 64 + 100] ^= 0x40
    (tmp_path / "bad.lobc").write_bytes(bytes(raw))
    s = replay_lobc(tmp_path / "bad.lobc", str(tmp_path / "o"), L2ReplayConfig(allow_corrupt=True))
    size = 64 + 64 * len(mid.records)
    assert s["status"] == "ok" and s["lobc"]["damage"] == [{
        "offset": mid.offset, "bytes": size, "reason": f"CRC mismatch in block {mid.seq}", "corrupt": True,
        "next_block": mid.offset + size}]
    before = np.concatenate([b.records for b in blocks if b.seq < mid.seq])
    after = np.concatenate([b.records for b in blocks if b.seq > mid.seq])
    assert s["desyncs_by_cause"]["gap_damaged"] == 1
    assert s["desyncs_by_cause"]["unsynced_update_skipped"] == int((after["kind"] == lobc.DIFF_BEGIN).sum()) > 0
    assert s["trades"] == int((before["kind"] == lobc.TRADE).sum() + (after["kind"] == lobc.TRADE).sum())
    assert not s["books"][0]["synced_at_end"] and s["records"] == len(before) + 1 + len(after)


def test_malformed_structure_is_reported_not_applied():
    rows = []

    def r(kind, **kw):
        x = np.zeros(1, lobc.RECORD_DTYPE)[0]
        x["kind"] = kind
        for f, v in kw.items():
            x[f] = v
        rows.append(x.copy())

    r(lobc.SNAPSHOT_BEGIN, first_id=5)
    r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=100, qty=1)
    r(lobc.SNAPSHOT_END, first_id=5)
    r(lobc.DIFF_BEGIN, first_id=6, last_id=6)       # no END: a new BEGIN follows
    r(lobc.DIFF_LEVEL, side=ord("B"), price=101, qty=1)
    r(lobc.DIFF_BEGIN, first_id=7, last_id=7)
    r(lobc.DIFF_LEVEL, side=ord("X"), price=102, qty=1)   # bad side
    r(lobc.DIFF_LEVEL, side=ord("S"), price=103, qty=2)
    r(lobc.DIFF_END, first_id=7, last_id=7)
    r(lobc.DIFF_LEVEL, side=ord("S"), price=104, qty=1)   # outside any message
    r(lobc.DIFF_END, first_id=8, last_id=8)                # END without BEGIN
    r(lobc.TICKER_ASK, first_id=7, price=103, qty=2)      # without its TICKER_BID
    r(lobc.RESYNC, first_id=99)                            # no GAP, snapshot id differs
    r(lobc.DIFF_BEGIN, first_id=9, last_id=9)              # cut: finish() drops it
    r(lobc.DIFF_LEVEL, side=ord("B"), price=100, qty=0)
    arr = np.array(rows, lobc.RECORD_DTYPE)
    rp = L2Replay(scan(arr, ["X"]), ["X"])
    out = rp.feed(arr)
    rest = rp.finish()
    assert rp.levels(0) == ([(100, 1)], [(103, 2)])
    causes = list(out["desyncs"]["cause"]) + list(rest["desyncs"]["cause"])
    assert sorted(causes) == sorted(["incomplete_message", "malformed_level", "orphan_record", "orphan_record",
                                     "unpaired_ticker", "resync_id_mismatch", "incomplete_message"])


def test_the_viewer_shows_a_lobc_replay_without_depth_from_its_bbo_rows(tmp_path):
    """`lobreplay view` on a .lobc replay without --depth: one level a side from bbo.parquet
    (it was a one-line refusal; before that a KeyError on the missing ITCH time column). A
    table with neither time column is still one line naming it."""
    from lobreplay.l2.replay import replay_lobc
    from lobreplay.reports.viewer import build_view

    recs, _ = synth_stream(94, n_messages=200, n_symbols=2)
    write_lobc(tmp_path / "feed.lobc", recs)
    replay_lobc(tmp_path / "feed.lobc", str(tmp_path / "out"))
    s = build_view(tmp_path / "out", tmp_path / "v.html", symbol="BBB")
    bbo = pq.read_table(tmp_path / "out" / "bbo.parquet").to_pandas()
    assert s["source"] == "bbo" and s["levels"] == 1 and s["feed"] == "lobc"
    assert s["frames"] == (bbo["symbol"] == "BBB").sum() and s["tape_rows_available"] > 0
    t = pq.read_table(tmp_path / "out" / "bbo.parquet").drop(["receive_ns", "event_ns"])
    pq.write_table(t, tmp_path / "out" / "bbo.parquet")
    with pytest.raises(InputError, match=r"out: bbo\.parquet has neither event_ns nor receive_ns"):
        build_view(tmp_path / "out", tmp_path / "w.html")
    assert not (tmp_path / "w.html").exists()


def test_peak_rss_is_the_replays_own_when_started_from_a_big_process(tmp_path):
    """summary.json's peak_rss_bytes is the replay's: started from a process holding 600 MiB
    (a notebook, a benchmark harness), it does not report that process's pages (getrusage's
    ru_maxrss carries them across fork and exec; /proc's VmHWM does not)."""
    import subprocess
    import sys

    recs, _ = synth_stream(93, n_messages=300, n_symbols=2)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs)
    parent = (f"import subprocess, sys\nbig = bytearray(600 << 20)\nbig[::4096] = b'x' * len(big[::4096])\n"
              f"subprocess.run([sys.executable, '-m', 'lobreplay', 'lobc', 'replay', {str(src)!r}, '-o', "
              f"{str(tmp_path / 'out')!r}], check=True, stdout=subprocess.DEVNULL)\n")
    subprocess.run([sys.executable, "-c", parent], check=True, cwd=tmp_path)
    rss = json.loads((tmp_path / "out" / "summary.json").read_text())["peak_rss_bytes"]
    assert 20 << 20 < rss < 400 << 20


def test_progress_bars_count_the_records_of_each_pass(tmp_path, monkeypatch):
    """progress=True (the command line's default on a terminal; --no-progress): a bar per
    pass on stderr, each reaching the file's records; without it, nothing on stderr."""
    import io
    import sys

    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    recs, _ = synth_stream(96, n_messages=400, n_symbols=2)
    write_lobc(tmp_path / "a.lobc", recs)
    monkeypatch.setenv("TQDM_MININTERVAL", "0")  # every update drawn (a run this short draws none)
    monkeypatch.setenv("TQDM_MINITERS", "1")
    for progress in (True, False):
        err = io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        replay_lobc(tmp_path / "a.lobc", str(tmp_path / f"o{progress}"), L2ReplayConfig(progress=progress,
                                                                                        chunk_records=300))
        text = err.getvalue()
        if progress:
            for desc in ("pass 1 (sizing)", "pass 2 (replay)"):
                assert f"{desc}: 100%" in text and f"{len(recs) / 1000:.2f}k/{len(recs) / 1000:.2f}k" in text, text
        else:
            assert text == ""


def test_an_interrupted_replay_says_where_it_stopped(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM, which the command line turns into the same) in pass 2: the tables
    written so far are whole, summary.json says failed and stopped_at (the pass, the records
    replayed, no row past them), and the exception carries the same line."""
    from lobreplay.l2 import ladder as l2
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    recs, _ = synth_stream(97, n_messages=800, n_symbols=2)
    write_lobc(tmp_path / "a.lobc", recs)
    calls, real = [], l2.L2Replay._process

    def third_call_interrupted(self, rec, first):
        calls.append(first)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, rec, first)

    monkeypatch.setattr(l2.L2Replay, "_process", third_call_interrupted)
    with pytest.raises(KeyboardInterrupt) as info:
        replay_lobc(tmp_path / "a.lobc", str(tmp_path / "o"), L2ReplayConfig(chunk_records=1000))
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    done = s["stopped_at"]["records_done"]
    assert s["status"] == "failed" and s["error"] == "interrupted (SIGINT)"
    assert s["stopped_at"] == {"pass": 2, "records_done": done, "records": len(recs)} and done == calls[2] > 1000
    assert info.value.__notes__ == [f"{tmp_path / 'a.lobc'}: in pass 2, after {done:,} of {len(recs):,} records"]
    bbo = pq.read_table(tmp_path / "o" / "bbo.parquet")
    assert 0 < bbo.num_rows and max(bbo.column("sequence").to_pylist()) < done


def _hash_that_waits(path, stop=None, *, background=False, size=None):
    """A stand-in for reports.file_sha256 that never finishes by itself: it gives up (None)
    when `stop` is set, as the real one does between its blocks (a minute: a result that says
    the stop never came)."""
    return None if stop is not None and stop.wait(60) else "not stopped"


def test_an_interrupted_replay_does_not_wait_for_the_hash(tmp_path, monkeypatch):
    """A replay that fails (here Ctrl-C in pass 2) stops the input's SHA-256 before its
    tables close (they wait for it when they open their files): on a multi-GB file the rest
    of the hash took seconds after the stop. The tables are whole, their source_sha256
    empty; a whole replay still waits for it."""
    from lobreplay.l2 import ladder as l2
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc
    from lobreplay.replay import engine

    recs, _ = synth_stream(97, n_messages=800, n_symbols=2)
    write_lobc(tmp_path / "a.lobc", recs)
    monkeypatch.setattr(engine, "file_sha256", _hash_that_waits)  # (the engine computes every replay's)
    real = l2.L2Replay._process

    def interrupted(self, rec, first):
        if first:
            raise KeyboardInterrupt
        return real(self, rec, first)

    monkeypatch.setattr(l2.L2Replay, "_process", interrupted)
    with pytest.raises(KeyboardInterrupt):
        replay_lobc(tmp_path / "a.lobc", str(tmp_path / "o"), L2ReplayConfig(chunk_records=1000))
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["status"] == "failed"
    for t in ("bbo", "trades"):
        meta = pq.read_schema(tmp_path / "o" / f"{t}.parquet").metadata
        assert meta[b"source_sha256"] == b"", t


def test_a_file_without_a_whole_block_is_an_error(tmp_path):
    """Torn before its first block ends (or that block's CRC fails): nothing to replay is an
    error naming the file and offset (it was status ok with 0 records); a whole file with no
    blocks yet (a capture that never got data) replays to empty reports. With sound blocks
    after a bad first one, the error says that --allow-corrupt replays them, and it does."""
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    recs, _ = synth_stream(95, n_messages=100, n_symbols=1)
    write_lobc(tmp_path / "a.lobc", recs, flush_records=500)
    raw = bytearray((tmp_path / "a.lobc").read_bytes())
    raw[512 + 64 + 10] ^= 0xFF
    (tmp_path / "crc.lobc").write_bytes(bytes(raw))
    (tmp_path / "cut.lobc").write_bytes(bytes(raw[:512 + 64 + 100]))
    for name, why in (("crc", "CRC mismatch in block 0"), ("cut", "partial block")):
        with pytest.raises(InputError, match=rf"{name}\.lobc: offset 512: no whole block to replay before it \({why}"):
            replay_lobc(tmp_path / f"{name}.lobc", str(tmp_path / f"out_{name}"))
    write_lobc(tmp_path / "more.lobc", recs, flush_records=50)  # block 0 bad, sound blocks after it
    raw = bytearray((tmp_path / "more.lobc").read_bytes())
    raw[512 + 64 + 10] ^= 0xFF
    (tmp_path / "more.lobc").write_bytes(bytes(raw))
    with pytest.raises(InputError, match=r"no whole block to replay before it \(CRC mismatch in block 0, and sound "
                                         r"blocks follow .*\); --allow-corrupt replays the sound blocks"):
        replay_lobc(tmp_path / "more.lobc", str(tmp_path / "out_more"))
    s = replay_lobc(tmp_path / "more.lobc", str(tmp_path / "out_more"), L2ReplayConfig(allow_corrupt=True), force=True)
    assert s["status"] == "ok" and s["records"] == len(recs) - 50 + 3  # (a GAP for each of the 3 symbols)
    write_lobc(tmp_path / "empty.lobc", recs[:0])
    s = replay_lobc(tmp_path / "empty.lobc", str(tmp_path / "out_empty"))
    assert s["status"] == "ok" and s["records"] == 0 and s["lobc"]["whole"] and s["lobc"]["blocks"] == 0


def test_a_file_cut_between_the_passes_is_an_error_naming_it(tmp_path, monkeypatch):
    """The two passes read the same blocks: a file that shrinks after pass 1 (not a .lobc
    writer's doing) stops the replay with one error naming the file and where it ended;
    summary.json says so."""
    from lobreplay.l2 import replay as l2replay
    from lobreplay.errors import InputError

    recs, _ = synth_stream(92, n_messages=600, n_symbols=2)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs, flush_records=500)
    real_scan = l2replay.scan_counts

    def scan_then_cut(*a, **kw):
        out = real_scan(*a, **kw)
        with open(src, "r+b") as f:
            f.truncate(512 + 2 * (64 + 500 * 64) + 64)
        return out

    monkeypatch.setattr(l2replay, "scan_counts", scan_then_cut)
    with pytest.raises(InputError, match=r"feed\.lobc: offset 64640: the file changed during the replay"):
        l2replay.replay_lobc(src, str(tmp_path / "out"), l2replay.L2ReplayConfig(chunk_records=700))
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["status"] == "failed" and "changed during the replay" in s["error"]


@pytest.mark.parametrize("reports", [None, ()])
def test_replay_of_a_file_with_a_corrupt_block(tmp_path, reports):
    """Pass 1 checks every block's CRC before any row is written. A bad block with sound
    blocks after it is damage inside the file, not what a crash leaves: an error naming the
    file, the offset and where the sound blocks resume (it was a replay of the blocks before
    it with status ok), before any row is written. --allow-corrupt replays across it: the
    same reports as a whole file of the sound blocks with a GAP record (reason damaged) for
    every symbol where the bad one was, so every book is unsynced from there to its next
    snapshot, and the records after the damage are replayed (the books end synced)."""
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc
    from lobreplay.replay.many import FORMATS

    recs, _ = synth_stream(91, n_messages=1200, n_symbols=2, gap_rate=0.05)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs, flush_records=500)
    raw = bytearray(src.read_bytes())
    bad = 512 + 3 * (64 + 500 * 64)                   # block 3
    assert len(raw) > bad + 2 * (64 + 500 * 64)       # (blocks 4 and more follow)
    raw[bad + 64 + 1000] ^= 0xFF
    (tmp_path / "bad.lobc").write_bytes(bytes(raw))
    (tmp_path / "cut.lobc").write_bytes(bytes(raw[:bad]))
    mark = np.zeros(3, lobc.RECORD_DTYPE)              # what --allow-corrupt reads in place of block 3
    mark["kind"], mark["flags"], mark["symbol"], mark["recv_ns"] = lobc.GAP, lobc.GAP_DAMAGED, [0, 1, 2], \
        recs["recv_ns"][1499]
    write_lobc(tmp_path / "same.lobc", np.concatenate([recs[:1500], mark, recs[2000:]]))
    cfg = L2ReplayConfig(chunk_records=777, **({} if reports is None else {"reports": reports}))
    nxt = bad + 64 + 500 * 64
    with pytest.raises(InputError, match=rf"bad\.lobc: offset {bad}: CRC mismatch in block 3, and sound blocks "
                                         rf"follow from offset {nxt}: the file is damaged inside.*--allow-corrupt"):
        replay_lobc(tmp_path / "bad.lobc", str(tmp_path / "refused"), cfg)
    failed = json.loads((tmp_path / "refused" / "summary.json").read_text())
    assert failed["status"] == "failed" and failed["lobc"]["torn"]["corrupt"] is True
    for f in (tmp_path / "refused").glob("*.parquet"):  # (tables closed whole, with no row)
        assert pq.read_table(f).num_rows == 0, f
    cfg.allow_corrupt = True
    for symbols in (None, ["BBB"]):
        cfg.symbols = symbols
        a = replay_lobc(tmp_path / "bad.lobc", str(tmp_path / "a"), cfg, force=True)
        b = replay_lobc(tmp_path / "same.lobc", str(tmp_path / "b"), cfg, force=True)
        assert a["status"] == "ok"
        assert a["lobc"]["damage"] == [{"offset": bad, "bytes": nxt - bad, "reason": "CRC mismatch in block 3",
                                        "corrupt": True, "next_block": nxt}]
        assert a["lobc"]["torn"] is None and not a["lobc"]["whole"] and b["lobc"]["whole"]
        assert a["records"] == b["records"] and a["lobc"]["blocks"] == -(-len(recs) // 500) - 1
        assert a["lobc"]["records"] == len(recs) - 500 + 3  # (records: those of the symbols replayed)
        assert a["desyncs_by_cause"]["gap_damaged"] == (3 if symbols is None else 1)
        assert f"; 1 damaged stretch(es) skipped ({nxt - bad:,} bytes), every book unsynced across each" in \
            FORMATS["lobc"].describe(a)  # (replay-many's line for the file)
        for k in ("bbo_changes", "desyncs_by_cause", "events_by_kind", "bookticker", "books"):
            assert a[k] == b[k], k
        assert all(book["synced_at_end"] for book in a["books"])  # (resynced after the damage)
        timed = ("latency_histograms",)  # (filled buckets of timings: their number varies)
        assert {k: v for k, v in a["report_rows"].items() if k not in timed} == \
            {k: v for k, v in b["report_rows"].items() if k not in timed}
        for name in (a["report_rows"] if reports is None else []):
            ta, tb = pq.read_table(tmp_path / "a" / f"{name}.parquet"), pq.read_table(tmp_path / "b" / f"{name}.parquet")
            if name not in ("latency", "latency_histograms"):
                assert ta.equals(tb.replace_schema_metadata(ta.schema.metadata)), name
            md = {k.decode(): v.decode() for k, v in ta.schema.metadata.items()}
            assert md["source_sha256"] == hashlib.sha256(bytes(raw)).hexdigest() == a["source"]["source_sha256"]
    c = replay_lobc(tmp_path / "cut.lobc", str(tmp_path / "c"), L2ReplayConfig(chunk_records=777))
    assert sum(a["events_by_kind"].values()) > sum(c["events_by_kind"].values())  # (the blocks after it count)
    lobc.repair(tmp_path / "bad.lobc", tmp_path / "fixed.lobc")  # (what `lobc repair` writes: the same records)
    np.testing.assert_array_equal(lobc.read(tmp_path / "fixed.lobc").records, lobc.read(tmp_path / "same.lobc").records)


def test_the_hash_covers_the_bytes_the_summary_says_were_read(tmp_path, monkeypatch):
    """A file still being written (a capture appending blocks) grows during its replay: the
    source_sha256 is of its first source_size bytes, the file as the replay took it (the hash
    read on to the end of the file and named bytes no report came from)."""
    import hashlib

    from lobreplay.l2.replay import replay_lobc
    from lobreplay.reports.tables import file_sha256
    recs, _ = synth_stream(62, n_messages=300, n_symbols=3)
    src = tmp_path / "growing.lobc"
    write_lobc(src, recs)
    data = src.read_bytes()
    real = lobc.ChunkReader.__init__

    def opened_then_grows(self, *a, **k):
        real(self, *a, **k)
        with open(src, "ab") as f:
            f.write(bytes(64 * 10))
    monkeypatch.setattr(lobc.ChunkReader, "__init__", opened_then_grows)
    s = replay_lobc(src, str(tmp_path / "out"))
    assert s["source"]["source_size"] == str(len(data))
    assert s["source"]["source_sha256"] == hashlib.sha256(data).hexdigest()
    assert file_sha256(str(src), size=100) == hashlib.sha256(src.read_bytes()[:100]).hexdigest()
    assert file_sha256(str(src)) == hashlib.sha256(src.read_bytes()).hexdigest()


@pytest.mark.parametrize("chunk", [64, 1 << 18])
def test_chosen_symbols_keep_the_file_record_index(tmp_path, chunk):
    """--symbols: each report row's `record` is the record's index in the file, as in a replay
    of every symbol (it counted the selected symbols' records only, so rows could not be
    joined back to the file); the rows of a symbol are those of the whole replay."""
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    recs, _ = synth_stream(72, n_messages=600, n_symbols=3, gap_rate=0.02)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs, flush_records=97)
    reports = ("bbo", "desyncs", "trades")
    replay_lobc(src, str(tmp_path / "all"), L2ReplayConfig(reports=reports, chunk_records=chunk))
    replay_lobc(src, str(tmp_path / "two"), L2ReplayConfig(symbols=["CCC", "AAA"], reports=reports,
                                                           chunk_records=chunk))
    for name in ("bbo", "trades", "desyncs"):
        a = pq.read_table(tmp_path / "all" / f"{name}.parquet").to_pandas()
        b = pq.read_table(tmp_path / "two" / f"{name}.parquet").to_pandas()
        a = a[a["symbol"].astype(str).isin(["AAA", "CCC"])].reset_index(drop=True)
        if name == "desyncs":  # (per message: a selection does not change which messages)
            a, b = a[["sequence", "symbol", "cause"]], b[["sequence", "symbol", "cause"]]
        assert len(b) and (b["sequence"].to_numpy() == a["sequence"].to_numpy()).all(), name
        assert (recs["symbol"][b["sequence"].to_numpy()] != 1).all()  # none of them BBB's
        b["symbol"] = b["symbol"].astype(str)
        a["symbol"] = a["symbol"].astype(str)
        assert a.equals(b), name


# ---------------------------------------------------------------- depth samples

def _unit_end(recs: np.ndarray, p: int, nsym: int, max_message: int) -> int:
    """The last record of the unit that starts at the BEGIN or TICKER_BID recs[p] (csrc/feeds/l2.h,
    lob_l2_depth): its END if the message is whole; else its records up to the one that makes
    it incomplete (the first other record of a known symbol, or its record max_message + 1
    after the BEGIN); a TICKER_BID's TICKER_ASK if they pair, else the TICKER_BID alone."""
    k, sym = recs["kind"], recs["symbol"]
    if k[p] == lobc.TICKER_BID:
        j = p + 1 + int(np.argmax(np.append(sym[p + 1:] < nsym, True)))  # the next record of a known symbol
        paired = j < len(recs) and k[j] == lobc.TICKER_ASK and sym[j] == sym[p] and \
            recs["first_id"][j] == recs["first_id"][p]
        return j if paired else p
    inside = (sym[p + 1:] >= nsym) | (k[p + 1:] == k[p] + 1)
    j = p + 1 + int(np.argmax(np.append(~inside, True)))  # the first record after it not inside
    whole = j < len(recs) and k[j] == k[p] + 2 and sym[j] == sym[p] and j - p - 1 <= max_message
    return j if whole else min(j - 1, p + max_message + 1)


def _depth_oracle(recs: np.ndarray, syms: list[str], every: int, n: int,
                  max_message: int = MAX_MESSAGE) -> dict[str, np.ndarray]:
    """The depth rows of docs/l2.md "Depth samples", from their definition, with the Python
    reference replay (tests/l2_reference.py) fed each sample's records whole, afresh: sample
    times are the multiples of `every` that follow a record's receive time (times that go
    back count as the latest before them); the sample at T holds every record before the
    first that arrives at T or later, less a message (or a TICKER_BID) that it cuts: one whose
    unit (_unit_end) goes on past that record; a row for each symbol whose count of applied
    messages changed since the sample before, or whose `synced` is not that of its last row
    (false before one)."""
    import l2_reference as ref

    t = np.maximum.accumulate(recs["recv_ns"])
    kinds = recs["kind"]
    # the records that may start a unit of several: a BEGIN or TICKER_BID of a known symbol
    starts = np.flatnonzero((recs["symbol"] < len(syms)) & ~np.isin(kinds, [lobc.DIFF_LEVEL, lobc.SNAPSHOT_LEVEL]))
    rows, before = [], None
    shown_synced = np.zeros(len(syms), bool)
    times = np.unique((t // every + 1) * every)
    for T in times.tolist():
        at = int(np.searchsorted(t, T, side="left"))
        cut = at
        b = int(np.searchsorted(starts, at)) - 1  # the last of them before the record at `at`
        p = int(starts[b]) if b >= 0 else -1
        if p >= 0 and kinds[p] in (lobc.SNAPSHOT_BEGIN, lobc.DIFF_BEGIN, lobc.TICKER_BID) and \
                _unit_end(recs, p, len(syms), max_message) >= at:
            cut = p  # a message (or a ticker) still open at the cut: after the sample
        rp = ref.L2Replay(ref.scan(recs, syms, max_message=max_message), syms, max_message=max_message)
        rp.feed(recs[:cut])
        if at == len(recs):
            rp.finish()
        msgs = np.array([rp.per_symbol[s]["messages"] for s in range(len(syms))])
        synced = np.array([rp.state[s] == 1 for s in range(len(syms))])
        changed = (msgs != (before if before is not None else 0)) | (synced != shown_synced)
        before = msgs
        shown_synced = np.where(changed, synced, shown_synced)
        for s in np.flatnonzero(changed).tolist():
            bids, asks = rp.levels(s)
            row = {"record": (cut if at < len(recs) else len(recs)) - 1, "recv_ns": T, "symbol": s,
                   "update_id": int(rp.last_u[s]), "synced": bool(rp.state[s] == 1)}
            for i in range(n):
                for key, side in (("bid", bids), ("ask", asks)):
                    row[f"{key}_price_{i + 1}"], row[f"{key}_qty_{i + 1}"] = side[i] if i < len(side) else (0, 0)
            rows.append(row)
    return {k: np.array([r[k] for r in rows]) for k in rows[0]} if rows else {}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, 8])
def test_depth_samples_are_the_book_at_each_sample_time_whatever_the_chunks(seed):
    """Depth samples every `every` ns of receive time (a message counts once all of it has
    arrived): the same rows as the definition computed from scratch with the reference replay
    at each sample time, whole, in random batches and through feed_from."""
    rng = np.random.default_rng(seed)
    recs, _ = synth_stream(seed, n_messages=500, n_symbols=3, gap_rate=0.03, cross_rate=0.05)
    recs["recv_ns"][rng.random(len(recs)) < 0.02] -= 5_000  # a clock that steps back at times
    syms = ["AAA", "BBB", "CCC"]
    every, n = 40_000, 3
    want = _depth_oracle(recs, syms, every, n)
    assert 10 < len(want["record"]) and want["synced"].any() and not want["synced"].all()

    def run(sizes, tiny=False):
        rp = L2Replay(scan(recs, syms), syms, depth_levels=n, depth_every_ns=every)
        return feed_in_batches(rp, recs, sizes, tiny)["depth"]

    for got in (run([len(recs)]), run(rng.integers(1, 90, size=len(recs)).tolist()), run([len(recs)], tiny=True)):
        assert sorted(got) == sorted(want)
        for k in want:
            assert got[k].tolist() == want[k].tolist(), k
    rp = L2Replay(scan(recs, syms), syms, depth_levels=n, depth_every_ns=every)
    pos = 0

    def read(out):
        nonlocal pos
        k = min(len(out), len(recs) - pos)
        out[:k] = recs[pos:pos + k]
        pos += k
        return k

    got = sorted_rows(list(rp.feed_from(read, 64)) + [rp.finish()])["depth"]
    assert got["record"].tolist() == want["record"].tolist()
    assert got["bid_price_1"].tolist() == want["bid_price_1"].tolist()


@pytest.mark.parametrize("market", ["spot", "usdm"])
def test_depth_samples_of_a_real_recording_agree_with_its_bbo_rows(converted, tmp_path, market):
    """`lobc replay --depth 5 --every 1s` on the real recordings: depth.parquet's best levels
    at each sample are the bbo row of the last top-of-book change at or before the sample's
    last record; levels strictly ordered on each side; every sample after the first snapshot
    synced; the symbol's `--symbols` replay gives the same rows (record: the file's index)."""
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc

    src = converted / f"{market}.lobc"
    cfg = L2ReplayConfig(depth_levels=5, depth_every_ns=1_000_000_000, reports=("bbo", "depth"))
    s = replay_lobc(src, str(tmp_path / "a"), cfg)
    d = pq.read_table(tmp_path / "a" / "depth.parquet").to_pandas()
    b = pq.read_table(tmp_path / "a" / "bbo.parquet").to_pandas()
    assert s["report_rows"]["depth"] == len(d) > 100 and d["synced"].all()
    assert (d["receive_ns"] % 1_000_000_000 == 0).all() and d["receive_ns"].is_monotonic_increasing
    j = np.searchsorted(b["sequence"].to_numpy(), d["sequence"].to_numpy(), side="right") - 1
    assert (j >= 0).all()
    for k in ("bid_price", "bid_qty", "ask_price", "ask_qty"):
        assert (d[f"{k}_1"].to_numpy() == b[k].to_numpy()[j]).all(), k
    bids = d[[f"bid_price_{i}" for i in range(1, 6)]].to_numpy()
    asks = d[[f"ask_price_{i}" for i in range(1, 6)]].to_numpy()
    assert (np.diff(bids, axis=1) < 0).all() and (np.diff(asks, axis=1) > 0).all() and (bids[:, 0] < asks[:, 0]).all()
    one = replay_lobc(src, str(tmp_path / "b"), L2ReplayConfig(depth_levels=5, depth_every_ns=1_000_000_000,
                                                               reports=("depth",), symbols=["BTCUSDT"]))
    assert one["report_rows"]["depth"] == len(d)
    assert pq.read_table(tmp_path / "b" / "depth.parquet").to_pandas().equals(d)


def test_depth_options_of_the_command_line(tmp_path, capsys):
    from lobreplay.cli.main import main
    from lobreplay.l2.replay import DEPTH_LIMIT, L2ReplayConfig

    # the API takes what the C replay can (the command line stops at 100)
    assert L2ReplayConfig(depth_levels=DEPTH_LIMIT).depth_levels == DEPTH_LIMIT
    with pytest.raises(ValueError, match="0 to 100,000 levels"):
        L2ReplayConfig(depth_levels=DEPTH_LIMIT + 1)

    recs, _ = synth_stream(5, n_messages=100, n_symbols=1)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs)
    for argv, msg in ((["--depth", "101"], "--depth: expected a number of levels of 0 to 100"),
                      (["--reports", "depth"], "the depth table needs --depth N"),
                      (["--depth", "3", "--every", "soon"], "--every: expected a duration")):
        assert main(["replay", str(src), "-o", str(tmp_path / "o"), *argv]) == 1
        assert msg in capsys.readouterr().err
        assert not (tmp_path / "o").exists()  # (refused before the output directory is made)
    assert main(["replay", str(src), "-o", str(tmp_path / "c"), "--depth", "2", "--every", "change",
                 "--reports", "depth"]) == 0
    c = pq.read_table(tmp_path / "c" / "depth.parquet").to_pandas()
    assert len(c) > 10 and not (c.drop(columns=["receive_ns", "receive_ts", "sequence", "update_id"])
                                .groupby("symbol", observed=True).diff().dropna().eq(0).all(axis=1).any())
    assert main(["replay", str(src), "-o", str(tmp_path / "o"), "--depth", "2", "--every", "10us",
                 "--reports", "depth"]) == 0
    t = pq.read_table(tmp_path / "o" / "depth.parquet")
    assert t.num_rows > 0 and t.column_names[-4:] == ["bid_price_2", "bid_qty_2", "ask_price_2", "ask_qty_2"]
    assert sorted(os.listdir(tmp_path / "o")) == ["depth.parquet", "summary.json"]


@pytest.mark.parametrize("market", [None, "spot", "usdm"])
def test_l2_paths_whole_batched_and_with_tiny_outputs(market):
    """Depth samples, update-id checks and malformed structure through the C replay fed whole,
    record by record, and with every output array one row long (each row a stop for room and
    a resume): the same rows and books. Fast enough for `make asan`, which runs it under the
    sanitizers (the reference comparisons above are too slow there)."""
    import l2_golden

    rng = np.random.default_rng(7)
    synth, _ = synth_stream(12, n_messages=400, n_symbols=3, gap_rate=0.03, cross_rate=0.05)
    cases = [(synth, ["A", "B", "C"], 20_000), (l2_golden.malformed_records(), ["X", "Y", "Z"], 3)]
    for recs, syms, every in cases + [(r, y, 0) for r, y, _ in cases]:  # (0: a row after every change)
        def run(sizes, tiny=False):
            rp = L2Replay(scan(recs, syms), syms, market=market, depth_levels=4, depth_every_ns=every)
            rows = feed_in_batches(rp, recs, sizes, tiny)
            for s in rp.sizing:
                rp.session.book(s).validate()
            out = {t: {c: a.tolist() for c, a in cols.items()} for t, cols in rows.items()}
            return out, [rp.levels(s) for s in range(len(syms))]

        want = run([len(recs)])
        assert "depth" in want[0]
        for sizes, tiny in (([1] * len(recs), False), ([len(recs)], True),
                            (rng.integers(1, 50, size=len(recs)).tolist(), True)):
            assert run(sizes, tiny) == want, (sizes[:3], tiny)


@pytest.mark.parametrize("seed", [4, 9])
def test_depth_rows_after_every_change_are_the_books_after_each_message(seed):
    """--every change (depth_every_ns 0): a row after every applied message that changed its
    book's N best levels (record: the message's END, recv_ns: its BEGIN's), and after every
    change of its sync state (a GAP, a RESYNC: that record; a message that broke the
    sequence: its END, its BEGIN's time), the same as the Python reference replay fed record
    by record shows, whole, in batches and with one-row outputs."""
    import l2_reference as ref

    recs, _ = synth_stream(seed, n_messages=300, n_symbols=2, gap_rate=0.03, cross_rate=0.05)
    syms, n = ["AAA", "BBB"], 3
    rp = ref.L2Replay(ref.scan(recs, syms), syms)
    shown, begin, want, by_sync = {}, {}, [], 0
    for i in range(len(recs)):
        k, s = int(recs["kind"][i]), int(recs["symbol"][i])
        if k in (lobc.SNAPSHOT_BEGIN, lobc.DIFF_BEGIN, lobc.GAP, lobc.RESYNC):
            begin[s] = i
        before = [rp.per_symbol[x]["messages"] for x in range(len(syms))]
        rp.feed(recs[i:i + 1])
        for x in range(len(syms)):
            synced = bool(rp.state[x] == 1)
            last_top, last_synced = shown.get(x, ([[(0, 0)] * n] * 2, False))
            if rp.per_symbol[x]["messages"] == before[x] and synced == last_synced:
                continue
            bids, asks = rp.levels(x)
            top = [(bids + [(0, 0)] * n)[:n], (asks + [(0, 0)] * n)[:n]]
            if (top, synced) != (last_top, last_synced):
                by_sync += top == last_top
                shown[x] = (top, synced)
                want.append((i, int(recs["recv_ns"][begin[x]]), x, int(rp.last_u[x]), synced,
                             [p for p, _ in top[0]], [q for _, q in top[0]], [p for p, _ in top[1]],
                             [q for _, q in top[1]]))
    assert len(want) > 50 and by_sync > 3  # (rows for a change of sync state alone among them)

    def run(sizes, tiny=False):
        d = feed_in_batches(L2Replay(scan(recs, syms), syms, depth_levels=n, depth_every_ns=0), recs, sizes,
                            tiny)["depth"]
        return [(int(d["record"][j]), int(d["recv_ns"][j]), int(d["symbol"][j]), int(d["update_id"][j]),
                 bool(d["synced"][j]), *([int(d[f"{side}_{f}_{m}"][j]) for m in range(1, n + 1)]
                                         for side in ("bid", "ask") for f in ("price", "qty")))
                for j in range(len(d["record"]))]

    rng = np.random.default_rng(seed)
    for got in (run([len(recs)]), run(rng.integers(1, 40, size=len(recs)).tolist()), run([len(recs)], tiny=True)):
        assert got == [tuple(w) for w in want]


@pytest.mark.parametrize("seed", range(6))
def test_a_held_message_is_found_open_or_ended_as_a_fresh_search_finds_it(seed):
    """feed_from's held records (a message known to be unfinished, BEGIN first) only shorten
    the search for where the chunk's unfinished group starts: the answer is the one found
    from scratch, however long the message (the records after it are looked at in blocks)."""
    from lobreplay.l2.ladder import _open_tail
    rng = np.random.default_rng(seed)
    for _ in range(30):
        m = int(rng.choice([3, 100, 4095, 4096, 4097, 9000]))
        kind = int(rng.choice([lobc.SNAPSHOT_BEGIN, lobc.DIFF_BEGIN]))
        rec = np.zeros(1 + m + 3, lobc.RECORD_DTYPE)
        rec["kind"][0], rec["kind"][1:] = kind, kind + 1
        rec["symbol"][rng.random(len(rec)) < 0.05] = 9  # an unknown symbol among the levels
        rec["symbol"][0] = 0
        tail = rng.integers(0, 4)  # the message goes on, or ends with its END, a ticker, a trade
        if tail:
            at = int(rng.integers(1 + m // 2, len(rec)))
            rec["kind"][at] = (kind + 2, lobc.TICKER_BID, lobc.TRADE)[tail - 1]
            rec["symbol"][at] = 0
        held = int(rng.integers(1, 1 + m // 2))
        assert _open_tail(rec, 1, held) == _open_tail(rec, 1), (m, tail, held)


def test_force_replaces_only_what_an_earlier_replay_wrote(tmp_path, capsys):
    """issue 26: `replay nonexist.lobc -o . --force` removed every *.parquet of the directory
    before opening the input. Now the input is opened and checked first (a missing or bad
    one changes nothing), and --force removes only the files an earlier run's summary.json
    lists: a foreign table stays, even a copy of a report under another name; one under a
    report's name that lobreplay did not write is refused, --force or not."""
    import shutil

    from lobreplay.cli.main import main
    recs, _ = synth_stream(7, n_messages=200, n_symbols=2)
    src = tmp_path / "feed.lobc"
    write_lobc(src, recs, symbols=("AAA", "BBB"))
    out = tmp_path / "u"
    assert main(["replay", str(src), "-o", str(out), "--depth", "2"]) == 0
    first = json.loads((out / "summary.json").read_text())
    assert first["files"] == sorted(n for n in os.listdir(out) if n != "summary.json")  # every file it wrote
    assert "depth.parquet" in first["files"] and "bbo.parquet" in first["files"]
    shutil.copy(out / "bbo.parquet", out / "prices_2023.parquet")  # (a table of lobreplay's, but not this run's)
    (out / "notes.txt").write_text("mine")
    mine = {n: (out / n).read_bytes() for n in ("prices_2023.parquet", "notes.txt")}
    capsys.readouterr()
    for bad in ([str(tmp_path / "nonexist.lobc")], [str(tmp_path / "notes.lobc")]):
        (tmp_path / "notes.lobc").write_text("not a capture")
        assert main(["replay", *bad, "-o", str(out), "--force"]) == 1
        assert capsys.readouterr().err.count("\n") == 1
        assert sorted(os.listdir(out)) == sorted(first["files"] + ["summary.json", *mine])  # nothing removed
    # a replay without depth over it: the earlier depth.parquet goes, the foreign files stay
    assert main(["replay", str(src), "-o", str(out), "--force"]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert "depth.parquet" not in again["files"] and not (out / "depth.parquet").exists()
    assert {n: (out / n).read_bytes() for n in mine} == mine
    assert sorted(os.listdir(out)) == sorted(again["files"] + ["summary.json", *mine])
    # a file under a report's name that lobreplay did not write: refused, and kept
    (out / "depth.parquet").write_text("my own table")
    assert main(["replay", str(src), "-o", str(out), "--force", "--depth", "2"]) == 1
    err = capsys.readouterr().err
    assert f"{out / 'depth.parquet'}: a file lobreplay did not write" in err and err.count("\n") == 1
    assert (out / "depth.parquet").read_text() == "my own table" and (out / "bbo.parquet").exists()
