"""Far-off and off-tick prices (issue 25): price maps (lobreplay/itch/prices.py).

Each case is a small hand-made ITCH file; the truth is computed from the feed's own
live orders by a naive dict (reference -> side, price, shares over A/F/D/X/E/C/U),
independent of lobreplay: the bbo report must equal the truth's top of book after
every message, with no desync, and the residual_order rows must be the orders still
live at the end."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lobreplay.core import _coreapi as core
from lobreplay.core.book import Session
from lobreplay.core.events import EVENT_DTYPE, Flag, Kind, Side, TIF
from lobreplay.itch import replay as itch_replay
from lobreplay.itch.prices import MAX_LEVELS, PriceMap, PriceMaps, choose_map, padded, worth_mapping
from lobreplay.itch.reader import ItchFile
from lobreplay.itch.replay import ReplayConfig, all_order_prices, candidates, replay_itch
from lobreplay.itch.writer import ItchWriter

T0 = 34_200_000_000_000  # 09:30


class Day:
    """A hand-made ITCH day: R for each symbol, then order messages, one ns apart."""

    def __init__(self):
        self.msgs: list[dict] = []
        self.t = T0
        self.match = 0

    def _m(self, type_, loc, **f):
        self.t += 1000
        self.msgs.append({"type": type_, "stock_locate": loc, "tracking": 0, "timestamp": self.t, **f})

    def R(self, loc, sym):
        self._m("R", loc, stock=sym, market_category="Q", financial_status="N", round_lot_size=100,
                round_lots_only="N", issue_classification="C", issue_subtype="Z", authenticity="P",
                short_sale_threshold="N", ipo_flag=" ", luld_tier="1", etp_flag="N", etp_leverage_factor=0,
                inverse_indicator="N")

    def A(self, loc, ref, side, shares, price, sym="X"):
        self._m("A", loc, order_ref=ref, side=side, shares=shares, stock=sym, price=price)

    def E(self, loc, ref, shares):
        self.match += 1
        self._m("E", loc, order_ref=ref, executed_shares=shares, match_number=self.match)

    def C(self, loc, ref, shares, price, printable="Y"):
        self.match += 1
        self._m("C", loc, order_ref=ref, executed_shares=shares, match_number=self.match, printable=printable,
                execution_price=price)

    def X(self, loc, ref, shares):
        self._m("X", loc, order_ref=ref, cancelled_shares=shares)

    def D(self, loc, ref):
        self._m("D", loc, order_ref=ref)

    def U(self, loc, ref, new, shares, price):
        self._m("U", loc, order_ref=ref, new_order_ref=new, shares=shares, price=price)

    def write(self, path):
        with ItchWriter(str(path)) as w:
            for m in self.msgs:
                w.write(m)
        return str(path)


def truth(msgs: list[dict]):
    """After every message: the top of book of every locate (bid price, qty, count, ask
    price, qty, count; an empty side 0, 0, 0) from the feed's live orders; and the orders
    live at the end."""
    live: dict[int, list] = {}  # ref -> [locate, side, price, shares]
    tops = []
    for m in msgs:
        t, ref = m["type"], m.get("order_ref")
        if t in "AF":
            live[ref] = [m["stock_locate"], m["side"], m["price"], m["shares"]]
        elif t == "D":
            del live[ref]
        elif t in "XEC":
            o = live[ref]
            o[3] -= m.get("cancelled_shares", m.get("executed_shares"))
            if o[3] <= 0:
                del live[ref]
        elif t == "U":
            o = live.pop(ref)
            live[m["new_order_ref"]] = [o[0], o[1], m["price"], m["shares"]]
        loc = m["stock_locate"]
        tops.append((loc, top_of(live, loc)))
    return tops, live


def top_of(live, loc):
    out = []
    for side, best in (("B", max), ("S", min)):
        ps = [o[2] for o in live.values() if o[0] == loc and o[1] == side]
        if not ps:
            out += [0, 0, 0]
            continue
        p = best(ps)
        at = [o[3] for o in live.values() if o[0] == loc and o[1] == side and o[2] == p]
        out += [p, sum(at), len(at)]
    return tuple(out)


def check_against_truth(day: Day, path, out_dir, **cfg) -> dict:
    """Replay and compare: the bbo report row for row with the truth's changes of the top
    of book, no desync but the residual orders, and those the truth's live orders."""
    s = replay_itch(day.write(path), str(out_dir), ReplayConfig(**cfg))
    tops, live = truth(day.msgs)
    bbo = pd.read_parquet(out_dir / "bbo.parquet")
    got = {int(r.sequence): (int(r.instrument), (r.bid_price, r.bid_qty, r.bid_count, r.ask_price, r.ask_qty,
                                            r.ask_count)) for r in bbo.itertuples()}
    want, last = {}, {}
    for i, (loc, top) in enumerate(tops):
        if top != last.get(loc, (0, 0, 0, 0, 0, 0)):
            want[i] = (loc, top)
        last[loc] = top
    assert got == want
    assert s["desyncs_by_cause"] == ({"residual_order": len(live)} if live else {})
    d = pd.read_parquet(out_dir / "desyncs.parquet")
    res = d[d.cause == "residual_order"]
    assert sorted(zip(res.order_ref.tolist(), res.found_qty.tolist(), res.found_price.tolist())) == \
        sorted((ref, o[3], o[2]) for ref, o in live.items())
    return s


def symbols_row(out_dir, loc):
    return pd.read_parquet(out_dir / "symbols.parquet").set_index("instrument").loc[loc]


def far_order_day() -> Day:
    """A $150 stock and one sell at $199,999.99 that becomes the best ask, trades (E and
    C), is replaced (to another far price) and deleted; a second book beside it."""
    d = Day()
    d.R(3, "FAR")
    d.R(4, "NEAR")
    far = 1_999_999_900
    d.A(3, 1, "B", 100, 1_499_000)
    d.A(3, 2, "B", 200, 1_499_500)
    d.A(3, 3, "S", 100, 1_500_500)
    d.A(3, 4, "S", 300, 1_501_000)
    d.A(3, 5, "S", 50, far)
    d.A(4, 50, "B", 10, 200_000)
    d.A(4, 51, "S", 10, 201_000)
    d.E(3, 3, 100)         # the asks near the market go ...
    d.E(3, 4, 120)
    d.E(3, 4, 180)         # ... and the far order is the best ask
    d.E(3, 5, 20)          # it trades
    d.C(3, 5, 10, far)     # at its own price
    d.U(3, 5, 6, 40, far - 100)  # replaced by another far price
    d.A(3, 7, "S", 100, 1_502_000)  # back near the market
    d.E(3, 2, 50)
    d.C(3, 2, 50, 1_499_500)
    d.X(3, 1, 30)
    d.D(3, 6)              # the far order deleted
    d.A(3, 8, "B", 5, 1_499_000)
    d.U(3, 7, 9, 100, 1_503_000)
    return d


def test_a_far_order_in_a_150_dollar_stock(tmp_path, monkeypatch):
    """The far order still maps: its book is the one candidate (lobreplay.itch.prices.
    map_candidate), whose prices alone are read from the file again, once."""
    calls = []

    def counted(path, locates, **kw):
        calls.append(list(locates))
        return all_order_prices(path, locates, **kw)
    monkeypatch.setattr(itch_replay, "all_order_prices", counted)
    d = far_order_day()
    s = check_against_truth(d, tmp_path / "20191230.far.itch", tmp_path / "o")
    assert calls == [[3]]
    assert [n for n in s["notes"] if "read again" in n] == [
        "locate 3: its prices 1499000..1999999900 read again from the file (8 distinct)"]
    row = symbols_row(tmp_path / "o", 3)
    assert row["extra_prices"] == 2 and row["orders_outside_band"] == 2  # the far add and its replacement
    assert row["tick"] == 100 and row["band_low"] <= 1_499_000 and row["band_high"] < 2_000_000
    assert row["levels"] < 10_000
    assert s["mapped_books"] == 1 and s["orders_outside_band"] == 2 and s["extra_prices"] == 2
    near = symbols_row(tmp_path / "o", 4)
    assert near["extra_prices"] == 0 and near["orders_outside_band"] == 0 and near["tick"] == 1000
    # the executions: the core's expected fills at real prices, the far one's too
    ex = pd.read_parquet(tmp_path / "o" / "executions.parquet")
    core_rows = ex[ex.source == "core"]
    assert 1_999_999_900 in core_rows.price.tolist() and set(core_rows.price) <= {1_500_500, 1_501_000,
                                                                                 1_999_999_900, 1_499_500}


def test_without_the_far_order_nothing_is_mapped(tmp_path, monkeypatch):
    """No book could take a map: the file is read once (its prices never read again)."""
    def no_second_read(*a, **kw):
        raise AssertionError("the file read again for prices")
    monkeypatch.setattr(itch_replay, "all_order_prices", no_second_read)
    d = far_order_day()
    d.msgs = [m for m in d.msgs if m.get("order_ref") not in (5, 6)]
    s = check_against_truth(d, tmp_path / "20191230.near.itch", tmp_path / "o")
    assert not any("read again" in n for n in s["notes"])
    assert s["mapped_books"] == 0 and s["extra_prices"] == 0
    row = symbols_row(tmp_path / "o", 3)
    assert row["extra_prices"] == 0 and row["tick"] == 500


def test_a_dense_sub_dollar_book_is_not_read_again(tmp_path, monkeypatch):
    """A $0.22-0.56 stock quoted in 1/10,000 $ (3,000 distinct prices, a plain band of over
    4,096 levels at tick 1) cannot take a map: every distinct price would take a level of it.
    Pass 1's lower bound on its distinct prices (distinct_min) rules it out, so the file is
    read once (the generated narrow day's locate 6 was read again: 65 ms of a 0.6 s replay)."""
    def no_second_read(*a, **kw):
        raise AssertionError("the file read again for prices")
    monkeypatch.setattr(itch_replay, "all_order_prices", no_second_read)
    d = Day()
    rng = np.random.default_rng(5)
    prices = rng.choice(np.arange(2200, 5600), 3000, replace=False)
    for ref, p in enumerate(prices.tolist(), 1):
        d.A(1, ref, "B" if p < 3900 else "S", 100, p)
    s = replay_itch(d.write(tmp_path / "20191230.dense.itch"), str(tmp_path / "o"), ReplayConfig(cache=False))
    assert not any("read again" in n for n in s["notes"]) and s["mapped_books"] == 0
    row = symbols_row(tmp_path / "o", 1)
    assert row["tick"] == 1 and row["extra_prices"] == 0


def test_an_execution_price_off_the_map_is_a_desync_with_real_prices(tmp_path):
    d = far_order_day()
    d.C(3, 1, 10, 1_498_900)  # not an order price, and not the order's (149.90): a desync
    s = replay_itch(d.write(tmp_path / "20191230.c.itch"), str(tmp_path / "o"))
    assert s["desyncs_by_cause"].get("execution_price") == 1
    x = pd.read_parquet(tmp_path / "o" / "desyncs.parquet").query("cause == 'execution_price'").iloc[0]
    assert (x.expected_price, x.found_price, x.order_ref) == (1_498_900, 1_499_000, 1)


def test_a_sub_penny_price_keeps_the_penny_grid(tmp_path):
    """A $300 stock quoted from $295 to $305 with one order at $300.0049: the gcd of its
    prices falls to 1, which made the band 100,000 levels and more; the grid stays $0.01
    and the price is an extra. The sub-penny ask becomes the best, trades and goes."""
    d = Day()
    d.R(1, "SUB")
    for k in range(10):
        d.A(1, 1 + k, "B", 100, 2_999_000 - 5_000 * k)
        d.A(1, 21 + k, "S", 100, 3_000_100 + 5_000 * k)
    d.A(1, 40, "S", 70, 3_000_049)
    d.E(1, 40, 30)
    d.C(1, 40, 40, 3_000_049)
    d.A(1, 41, "B", 100, 3_000_000)
    d.U(1, 41, 42, 100, 3_000_048)   # ... and a replace to another sub-penny price
    d.D(1, 42)
    check_against_truth(d, tmp_path / "20191230.sub.itch", tmp_path / "o")
    row = symbols_row(tmp_path / "o", 1)
    assert row["tick"] == 100 and row["extra_prices"] == 2 and row["orders_outside_band"] == 2
    assert row["levels"] < 10_000 and row["min_price"] == 2_954_000


def test_a_thousand_dollar_order_in_a_sub_penny_stock(tmp_path):
    """A $0.50 stock on a sub-penny grid ($0.0001) with one sell at $1,000.0000."""
    d = Day()
    d.R(1, "PENNY")
    prices = [4987, 4990, 4995, 5001, 5003, 5012, 5013, 5020]
    for k, p in enumerate(prices):
        d.A(1, 1 + k, "B" if p < 5000 else "S", 1000 + k, p)
    d.A(1, 20, "S", 500, 10_000_000)
    for ref in (4, 5, 6, 7, 8):  # the asks near the market trade away
        d.E(1, ref, 1000 + ref - 1)
    d.E(1, 20, 100)             # the far ask is the best and trades
    d.A(1, 21, "S", 10, 5010)
    d.D(1, 20)
    check_against_truth(d, tmp_path / "20191230.penny.itch", tmp_path / "o")
    row = symbols_row(tmp_path / "o", 1)
    assert row["levels"] < 2000 and row["orders_outside_band"] >= 1


def test_a_flipped_bit_in_one_price(tmp_path):
    """A $150 stock where one price had bit 31 flipped (2,148,983,648: neither near nor a
    whole cent) stops nothing: that order is an extra."""
    d = Day()
    d.R(2, "FLIP")
    for k in range(5):
        d.A(2, 1 + k, "B", 100, 1_499_000 - 100 * k)
        d.A(2, 11 + k, "S", 100, 1_500_000 + 100 * k)
    d.A(2, 20, "S", 100, 1_500_000 ^ (1 << 31))
    d.D(2, 11)
    d.E(2, 12, 100)
    d.X(2, 20, 40)
    check_against_truth(d, tmp_path / "20191230.flip.itch", tmp_path / "o")
    row = symbols_row(tmp_path / "o", 2)
    assert row["tick"] == 100 and row["extra_prices"] == 1 and row["levels"] < 10_000


def test_many_far_prices(tmp_path):
    """A $150 stock with 200 distinct sells far away ($100,000 to $397,000): its plain
    band would exceed MAX_LEVELS, its prices are read again and every far one is an extra."""
    d = Day()
    d.R(5, "MANY")
    for k in range(20):
        d.A(5, 1 + k, "B", 100, 1_490_000 + 100 * k)
    far = [1_000_000_000 + 15_000_000 * k for k in range(200)]
    for k, p in enumerate(far):
        d.A(5, 100 + k, "S", 10, p)
    for k in range(200):  # every far ask in turn is the best and trades away
        d.E(5, 100 + k, 10)
    d.A(5, 400, "S", 10, 1_510_000)
    s = check_against_truth(d, tmp_path / "20191230.many.itch", tmp_path / "o")
    assert (far[-1] - 1_490_000) // 100 > MAX_LEVELS
    row = symbols_row(tmp_path / "o", 5)
    assert row["extra_prices"] == 200 and row["orders_outside_band"] == 200 and row["levels"] < 10_000
    assert any("read again" in n for n in s["notes"])


def test_a_pure_ladder(tmp_path):
    """A book of a few prices each thousands of ticks from the next: every price an extra
    (no grid: the .lobc replay's ladder)."""
    d = Day()
    d.R(6, "LADR")
    prices = [10_100, 2_000_000, 1_000_000_000, 4_000_000_000]
    for k, p in enumerate(prices):
        d.A(6, 1 + k, "B" if k < 2 else "S", 10 * (k + 1), p)
    d.E(6, 2, 5)
    d.E(6, 3, 30)
    d.U(6, 1, 9, 5, 20_000_000)  # the bid replaced to a new top
    check_against_truth(d, tmp_path / "20191230.ladder.itch", tmp_path / "o")
    row = symbols_row(tmp_path / "o", 6)
    assert row["levels"] == row["extra_prices"] == 5 and pd.isna(row["band_low"]) and pd.isna(row["tick"])


# ---- the maps themselves ----

prices_st = st.lists(st.integers(0, (1 << 32) - 1), min_size=1, max_size=300, unique=True)


@settings(max_examples=200, deadline=None)
@given(prices_st, st.integers(1, 3), st.sampled_from([1, 7, 100, 10_000]), st.data())
def test_a_map_is_monotone_and_round_trips(prices, grid_k, tick, data):
    """Random grids and extras: the rank of every price on the map is its place in their
    sorted union, the way back gives the price, and a price off the map is -1 - price
    (C, through PriceMaps, agrees with PriceMap)."""
    low = data.draw(st.integers(0, 1 << 31)) // tick * tick
    n = data.draw(st.integers(0, 50)) * grid_k
    grid = low + tick * np.arange(n, dtype=np.int64)
    extras = np.setdiff1d(np.array(prices, np.int64), grid)
    m = PriceMap(low, tick, n, extras)
    union = np.union1d(grid, extras)
    r = m.rank(union)
    np.testing.assert_array_equal(r, np.arange(len(union)))
    np.testing.assert_array_equal(m.price(r), union)
    off = np.setdiff1d(np.array([0, low + 1, low + tick * n, (1 << 32) - 1], np.int64), union)
    np.testing.assert_array_equal(m.rank(off), -1 - off)
    np.testing.assert_array_equal(m.price(-1 - off), off)
    # the C mapping of events agrees, and counts the orders at extras
    pm = PriceMaps({7: m})
    allp = np.concatenate([union, off])
    ev = np.zeros(len(allp), EVENT_DTYPE)
    ev["instrument"], ev["kind"], ev["price"] = 7, Kind.NEW, allp
    pm.to_core(ev)
    np.testing.assert_array_equal(ev["price"], m.rank(allp))
    assert int(pm.outside[0]) == len(extras)
    np.testing.assert_array_equal(pm.real(np.full(len(allp), 7), ev["price"]), allp)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 2000), min_size=2, max_size=40, unique=True),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10_000), st.integers(1, 50)), min_size=1, max_size=150))
def test_a_mapped_replay_equals_an_unmapped_one(price_set, ops):
    """Random orders over a random price set: a book on a map chosen for that set, fed the
    mapped events, has the same top of book after every event (turned back to real
    prices) as a book on a dense band, and the same executions."""
    prices = np.array(sorted(price_set), np.int64) * 50
    tick = int(np.gcd.reduce(prices))
    m = choose_map(tick, prices=prices, headroom=0.0)
    ev = np.zeros(len(ops), EVENT_DTYPE)
    live: list[int] = []
    nid = 1
    for i, (what, pick, qty) in enumerate(ops):
        e = ev[i]
        if what <= 1 or not live:
            p = int(prices[pick % len(prices)])
            e["kind"], e["id"], e["price"], e["qty"] = Kind.NEW, nid, p, qty
            e["side"], e["tif"] = (Side.BUY, TIF.GTC) if pick % 2 else (Side.SELL, TIF.GTC)
            live.append(nid)
            nid += 1
        elif what == 2:
            e["kind"], e["id"] = Kind.CANCEL, live.pop(pick % len(live))
        else:
            e["kind"], e["id"], e["price"], e["qty"] = Kind.REPLACE, live.pop(pick % len(live)), \
                int(prices[(pick // 7) % len(prices)]), qty
            e["new_id"] = nid
            live.append(nid)
            nid += 1
    plain = Session(0)
    plain.add_book(0, int(prices[0]), int(prices[-1]), tick, 1000)
    a = plain.apply(ev, bbo=True)
    mapped = Session(0)
    mapped.add_book(0, 0, m.levels - 1, 1, 1000)
    pm = PriceMaps({0: m})
    evm = ev.copy()
    pm.to_core(evm)
    b = mapped.apply(evm, bbo=True)
    np.testing.assert_array_equal(a.results, b.results)
    for side in ("bid", "ask"):
        got = pm.real(b.bbo["instrument"], b.bbo[f"{side}_price"], b.bbo[f"{side}_count"] > 0)
        np.testing.assert_array_equal(a.bbo[f"{side}_price"], got)
        for f in ("qty", "count"):
            np.testing.assert_array_equal(a.bbo[f"{side}_{f}"], b.bbo[f"{side}_{f}"])
    np.testing.assert_array_equal(a.execs["price"], pm.real(b.execs["instrument"], b.execs["price"]))
    np.testing.assert_array_equal(a.execs[["maker_id", "taker_id", "qty"]], b.execs[["maker_id", "taker_id", "qty"]])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, (1 << 32) - 1) | st.integers(0, 2000).map(lambda x: x * 100)
                         | st.integers(1_000_000, 1_010_000), min_size=1, max_size=200), min_size=1, max_size=4),
       st.sampled_from([0.0, 0.2, 3.0]))
def test_every_book_a_map_could_help_is_a_candidate(tmp_path_factory, per_locate, headroom):
    """The candidates (from pass 1's range and gcd alone) hold every book that choose_map,
    given all its prices, would map (worth_mapping); all_order_prices reads those prices
    exactly (distinct, sorted)."""
    d = Day()
    ref = 0
    for loc, ps in enumerate(per_locate, 1):
        for p in ps:
            ref += 1
            d.A(loc, ref, "B", 1, p)
    path = d.write(tmp_path_factory.mktemp("scan") / "p.itch")
    sc = core.ItchScan()
    for c in ItchFile(path).chunks():
        sc.feed(c.buf, c.offsets, c.types, c.n)
    stats = sc.stats()
    locs = list(range(1, len(per_locate) + 1))
    cand = candidates(stats, headroom, locs)
    got = all_order_prices(path, locs)
    for loc, ps in enumerate(per_locate, 1):
        u = np.array(sorted(set(ps)), np.int64)
        np.testing.assert_array_equal(got[loc], u)
        assert stats[loc]["distinct_min"] <= len(u)  # a lower bound, never more
        tick = int(stats[loc]["price_gcd"])
        if not tick:  # (only prices of 0)
            continue
        low, high = padded(int(u[0]), int(u[-1]), tick, headroom)
        if worth_mapping((high - low) // tick + 1, choose_map(tick, prices=u, headroom=headroom)):
            assert loc in cand


# ---- memory ----

def quotes_day(path, books: int, far: bool) -> str:
    """books symbols, each with 20 quotes near $20-25 and, with far, one sell 8x away."""
    rng = np.random.default_rng(5)
    d = Day()
    ref = 0
    for b in range(1, books + 1):
        base = int(rng.integers(200_000, 250_000)) // 100 * 100
        for k in range(10):
            ref += 1
            d.A(b, ref, "B", 100, base - 100 * (k + 1))
            ref += 1
            d.A(b, ref, "S", 100, base + 100 * (k + 1))
        if far:
            ref += 1
            d.A(b, ref, "S", 100, 8 * base)
    return d.write(path)


def test_a_far_order_per_book_costs_no_more_than_twice_the_memory(tmp_path):
    """3,000 books with quotes near $20-25, each with one sell 8x away, take at most twice
    the core memory (summary's book_bytes, lob_session_book_bytes) of the same books without
    it (without maps: about 17x)."""
    got = {}
    for far in (False, True):
        path = quotes_day(tmp_path / f"20191230.q{int(far)}.itch", 3000, far)
        got[far] = replay_itch(path, str(tmp_path / f"o{int(far)}"), ReplayConfig(reports=(), timing=False))
    assert got[True]["books"] == got[False]["books"] == 3000 and got[True]["mapped_books"] == 3000
    assert got[True]["book_bytes"] <= 2 * got[False]["book_bytes"]
    assert got[True]["book_levels"] <= 2 * got[False]["book_levels"]
    assert got[True]["orders_outside_band"] == 3000


if __name__ == "__main__":  # peak RSS of the two memory cases: /usr/bin/time -v python THIS far|near DIR
    far, where = sys.argv[1] == "far", sys.argv[2]
    p = quotes_day(os.path.join(where, f"20191230.q{int(far)}.itch"), 3000, far)
    s = replay_itch(p, os.path.join(where, f"o{int(far)}"), ReplayConfig(reports=(), timing=False), force=True)
    print(json.dumps({k: s[k] for k in ("books", "book_levels", "book_bytes", "mapped_books", "peak_rss_bytes")}))


def top_levels(live, loc, n):
    """The n best levels of both sides from live orders, as a LOBSTER orderbook row."""
    from lobreplay.itch.lobster import ASK_EMPTY, BID_EMPTY
    row = []
    lv = {"B": {}, "S": {}}
    for o in live.values():
        if o[0] == loc:
            lv[o[1]][o[2]] = lv[o[1]].get(o[2], 0) + o[3]
    asks, bids = sorted(lv["S"].items()), sorted(lv["B"].items(), reverse=True)
    for i in range(n):
        row += list(asks[i]) if i < len(asks) else [ASK_EMPTY, 0]
        row += list(bids[i]) if i < len(bids) else [BID_EMPTY, 0]
    return row


def test_the_lobster_export_of_a_mapped_book(tmp_path):
    """LOBSTER files of the far-order stock: real prices in the messages, and each
    message's order book row (the last of its time) the truth's two best levels."""
    from lobreplay.itch.lobster import export_lobster, read_message, read_orderbook
    d = far_order_day()
    path = d.write(tmp_path / "20191230.far.itch")
    mpath, opath = export_lobster(path, "FAR", 2, str(tmp_path / "lob"))
    msg, book = read_message(mpath), read_orderbook(opath)
    assert 1_999_999_900 in msg["price"].tolist() and 1_999_999_800 in msg["price"].tolist()
    live: dict = {}
    after = {}
    for m in d.msgs:  # the truth after each message, by its time
        t, ref = m["type"], m.get("order_ref")
        if t in "AF":
            live[ref] = [m["stock_locate"], m["side"], m["price"], m["shares"]]
        elif t == "D":
            del live[ref]
        elif t in "XEC":
            live[ref][3] -= m.get("cancelled_shares", m.get("executed_shares"))
            if live[ref][3] <= 0:
                del live[ref]
        elif t == "U":
            o = live.pop(ref)
            live[m["new_order_ref"]] = [o[0], o[1], m["price"], m["shares"]]
        after[m["timestamp"]] = top_levels(live, 3, 2)
    last = {}
    for i, t in enumerate(msg["time_ns"].tolist()):
        last[t] = i
    assert len(last) > 10
    for t, i in last.items():
        assert book[i].tolist() == after[t], t


def test_the_sizing_cache_keeps_the_candidates_prices(tmp_path, monkeypatch):
    """A replay from the sizing cache maps the same books as the scan it replaces, from the
    candidates' prices in the entry: it does not read the file for them again."""
    monkeypatch.setenv("LOBREPLAY_CACHE_DIR", str(tmp_path / "cache"))
    path = far_order_day().write(tmp_path / "20191230.far.itch")
    first = replay_itch(path, str(tmp_path / "a"))

    def no_second_read(*a, **kw):
        raise AssertionError("the file read again for prices")
    monkeypatch.setattr(itch_replay, "all_order_prices", no_second_read)
    again = replay_itch(path, str(tmp_path / "b"))
    assert "locate 3: its prices 1499000..1999999900 from the sizing cache entry (8 distinct)" in again["notes"]
    assert not first["pass1"]["cached"] and again["pass1"]["cached"]
    for k in ("mapped_books", "extra_prices", "orders_outside_band", "book_levels"):
        assert again[k] == first[k], k
    a, b = (pd.read_parquet(tmp_path / d / "symbols.parquet") for d in "ab")
    pd.testing.assert_frame_equal(a, b)


def test_a_parallel_replay_maps_as_one_process_does(tmp_path):
    """--jobs 2 (each part maps its own books) writes the same tables as one process."""
    from lobreplay.itch.parallel import replay_itch_jobs
    d = far_order_day()
    d.R(8, "FAR2")
    d.A(8, 900, "B", 10, 500_000)
    d.A(8, 901, "S", 10, 4_000_000_000)
    d.E(8, 901, 4)
    path = d.write(tmp_path / "20191230.far.itch")
    one = replay_itch(path, str(tmp_path / "one"))
    two = replay_itch_jobs(path, str(tmp_path / "two"), ReplayConfig(), 2)
    assert one["mapped_books"] == two["mapped_books"] == 2
    assert one["orders_outside_band"] == two["orders_outside_band"] == 4  # (FAR2: a ladder of its two prices)
    for name in ("bbo", "executions", "desyncs", "symbols"):
        a, b = (pd.read_parquet(tmp_path / w / f"{name}.parquet") for w in ("one", "two"))
        pd.testing.assert_frame_equal(a, b)
