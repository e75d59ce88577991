"""Differential tests: lobreplay's C core against the naive reference book.

* test_fuzz: seeded random streams (tests/fuzzgen.py), well over 1,000,000
  commands per run in total, split by style and seed so pytest-xdist can run
  them in parallel.  Every event's status/filled/resting/n_exec, every
  execution field, every desync field and every BBO field are compared, and
  after every chunk the full books (levels, FIFO queues, find(), validate()).
  The streams include the feed replay events (EXEC, FEED orders, flags).
* the harness itself: mutated reference books must be caught and shrunk to a
  small reproduction, saved streams replay, the CLI exits non-zero on a
  divergence.
* two hypothesis RuleBasedStateMachines (Session, one event per apply call,
  with EXEC/FEED rules and flags; and the interactive OrderBook API, which has
  no EXEC but takes FEED, STP and NOTIONAL flags), comparing after every step.

Hypothesis effort is chosen with HYPOTHESIS_PROFILE=dev (default) | ci | expensive (tests/conftest.py).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule


import fuzzgen  # noqa: E402
import reference_book as rb  # noqa: E402

import lobreplay  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# ---------------------------------------------------------------------------
# the big differential fuzz

FUZZ_CASES = [
    # (mode, seed, commands)
    ("chaos", 101, 200_000),
    ("chaos", 102, 150_000),
    ("mixed", 201, 200_000),
    ("mixed", 202, 150_000),
    ("wide", 301, 200_000),
    ("wide", 302, 100_000),
    ("realistic", 401, 250_000),
    ("realistic", 402, 150_000),
    ("all", 501, 250_000),
    ("all", 502, 150_000),
]


def test_fuzz_cases_total_at_least_a_million():
    assert sum(n for _, _, n in FUZZ_CASES) >= 1_000_000
    assert {m for m, _, _ in FUZZ_CASES} == set(fuzzgen.MODES)


@pytest.mark.parametrize("mode, seed, commands", FUZZ_CASES,
                         ids=[f"{m}-seed{s}-{n // 1000}k" for m, s, n in FUZZ_CASES])
@pytest.mark.slow
def test_fuzz(mode, seed, commands):
    res = fuzzgen.run(seed=seed, mode=mode, commands=commands, epoch_len=commands,
                      minimize_seconds=60)
    assert res.divergence is None, "\n" + res.divergence.report()
    assert res.commands == commands


# ---------------------------------------------------------------------------
# targeted streams


def _cfg(max_instrument, *books):
    return fuzzgen.EpochConfig(
        max_instrument,
        [fuzzgen.BookSpec(i, lo, hi, t, c, "chaos") for i, lo, hi, t, c in books],
        {}, 0.0)


def _check(config, events, batch=None, exec_capacity=None):
    mm = fuzzgen.check_stream(config, events, batch, exec_capacity)
    assert mm is None, "\n".join([mm.what, str(mm.index)] + mm.lines)


B, S = rb.BUY, rb.SELL
NEW, CANCEL, REDUCE, REPLACE, EXEC = rb.NEW, rb.CANCEL, rb.REDUCE, rb.REPLACE, rb.EXEC
GTC, IOC, FOK, MARKET = rb.GTC, rb.IOC, rb.FOK, rb.MARKET
FEED, PRICE, NOCHECK = rb.FEED, rb.PRICE, rb.NOCHECK
NOTIONAL, STP_RESTING, STP_INCOMING, STP_BOTH = rb.NOTIONAL, rb.STP_RESTING, rb.STP_INCOMING, rb.STP_BOTH


def N(oid, side, price, qty, tif=GTC, inst=0, flags=0):
    return (oid, 0, price, qty, inst, NEW, side, tif, flags)


def X(oid, qty, price=0, flags=0, inst=0):
    """EXEC: the feed says resting order oid traded qty (at price, with PRICE)."""
    return (oid, 0, price, qty, inst, EXEC, 0, 0, flags)


def test_empty_batch():
    s = lobreplay.Session(0)
    s.add_book(0, 100, 200, 10, 4)
    out = s.apply(np.zeros(0, lobreplay.EVENT_DTYPE), bbo=True)
    assert len(out.results) == 0 and len(out.execs) == 0 and len(out.bbo) == 0


def test_instrument_at_the_top_of_the_id_range():
    top = 1 << 24  # the largest max_instrument lob.h allows
    cfg = _cfg(top, (0, 100, 200, 10, 4), (top, -50, 50, 5, 3))
    _check(cfg, [
        N(1, B, 0, 5, inst=top), N(1, S, 150, 2, inst=0), N(2, S, 0, 2, inst=top),
        N(3, B, 0, 1, inst=top + 1), N(3, B, 0, 1, inst=top - 1), N(4, S, 5, 1, MARKET, inst=top),
        (1, 0, 0, 3, top, REDUCE, 0, 0, 0), N(9, S, 0, 1, inst=2**32 - 1),
    ])


def test_long_fifo_queue_swept_by_one_order():
    cfg = _cfg(0, (0, 1000, 2000, 10, 3000))
    events = [N(i, S, 1500 + 10 * (i % 3), 1 + i % 4) for i in range(1, 2501)]
    events += [(i, 0, 0, 1, 0, REDUCE, 0, 0, 0) for i in range(2, 2501, 7)]
    events += [(i, 0, 0, 0, 0, CANCEL, 0, 0, 0) for i in range(5, 2501, 11)]
    events += [N(10_000, B, 1510, 3000), N(10_001, B, 0, 10**6, MARKET)]
    _check(cfg, events)
    _check(cfg, events, batch=977)


def test_extreme_bands():
    top = 2**63 - 1
    cfg = _cfg(1, (0, top - 40, top, 8, 4), (1, -(2**63), -(2**63) + 30, 3, 4))
    ev = [
        N(1, B, top - 40, 2), N(2, S, top, 2), N(3, B, top - 1, 1), N(4, B, -(2**63), 1),
        N(5, S, 2**63 - 1, 3, FOK), N(6, S, top - 40, 2, IOC), N(7, B, 0, 5, MARKET),
        N(1, B, -(2**63), 2, inst=1), N(2, S, -(2**63) + 30, 2, inst=1),
        N(3, B, 2**63 - 1, 2, inst=1), N(4, S, -(2**63) + 1, 1, inst=1),
        (2, 8, -(2**63) + 3, 5, 1, REPLACE, 0, 0, 0), N(5, S, 0, 9, MARKET, inst=1),
    ]
    _check(cfg, ev)


def test_id_extremes_and_reuse():
    cfg = _cfg(0, (0, 0, 40, 2, 8))
    ids = fuzzgen.SPECIAL_IDS
    ev = [N(i, B if k % 2 else S, 10 if k % 2 else 30, 1 + k) for k, i in enumerate(ids[:8])]
    ev += [(i, 0, 0, 0, 0, CANCEL, 0, 0, 0) for i in ids[:8:2]]
    ev += [N(i, S, 12, 2) for i in ids[:8:2]]
    ev += [(ids[1], ids[1], 14, 3, 0, REPLACE, 0, 0, 0), (ids[3], ids[0], 14, 3, 0, REPLACE, 0, 0, 0)]
    ev += [N(99, B, 40, 100, IOC)]
    _check(cfg, ev)
    _check(cfg, ev, batch=1)


def test_orderbook_sweep_of_more_makers_than_the_exec_buffer():
    """One event that trades with 2,500 resting orders through the interactive
    API and through Session.apply (both must grow their execution buffers)."""
    band = (1000, 2000, 10, 3000)
    book, ref = lobreplay.OrderBook(*band), rb.RefBook(*band)
    for i in range(1, 2501):
        price = 1500 + 10 * (i % 5)
        f = book.new(i, "S", price, 1 + i % 3)
        assert (f.filled, f.resting) == ref.apply(NEW, i, 0, price, 1 + i % 3, S, GTC)[1:3]
    f = book.new(9999, "B", 0, 10**6, lobreplay.TIF.MARKET)
    st_, filled, resting, execs, _ = ref.apply(NEW, 9999, 0, 0, 10**6, B, MARKET)
    assert (f.filled, f.resting) == (filled, resting)
    got = [tuple(int(x) for x in r) for r in
           f.execs[["maker_id", "taker_id", "price", "qty", "maker_remaining"]].tolist()]
    assert len(got) == 2500 and got == execs
    assert book.order_count == 0
    cfg = _cfg(0, (0, *band))
    events = [N(i, S, 1500 + 10 * (i % 5), 1 + i % 3) for i in range(1, 2501)] + [N(9999, B, 0, 10**6, MARKET)]
    _check(cfg, events)


def test_earlier_results_survive_later_calls():
    cfg = _cfg(0, (0, 100, 200, 10, 50))
    s = cfg.make_core()
    a = s.apply(fuzzgen.events_array([N(i, S, 150, 2) for i in range(1, 11)]), bbo=True)
    b = s.apply(fuzzgen.events_array([N(20, B, 150, 7, IOC), X(5, 3, 140, PRICE)]), bbo=True)
    keep = [r.copy() for r in (b.results, b.execs, b.bbo, b.desyncs)]
    s.apply(fuzzgen.events_array([N(21, B, 150, 9, IOC), N(22, S, 110, 1), X(22, 2)]), bbo=True)
    s.apply(fuzzgen.events_array([N(30 + i, S, 160, 1) for i in range(40)]
                                 + [N(99, B, 170, 1, flags=FEED)]), bbo=True)
    for got, want in zip((b.results, b.execs, b.bbo, b.desyncs), keep):
        assert np.array_equal(got, want)
    assert len(a.execs) == 0 and len(b.execs) == 5
    assert len(a.desyncs) == 0 and b.desyncs["cause"].tolist() == [rb.FILL_ORDER, rb.EXEC_PRICE, rb.QTY]


def test_feed_orders_clear_hundreds_of_stale_orders_with_tiny_buffers():
    """FEED orders meeting many levels of stale orders (one desync each), a
    FEED REPLACE, FEED REDUCEs, EXECs that follow priority and some that do
    not; with the default buffers, one event per call, and buffers of 1 row
    (Session.apply must drain and grow the desync buffer as well)."""
    cfg = _cfg(0, (0, 1000, 2000, 10, 3000))
    ev = [N(i, S, 1500 + 10 * (i % 20), 1 + i % 4) for i in range(1, 601)]
    ev += [N(1000 + i, B, 1490 - 10 * (i % 5), 1 + i % 3) for i in range(200)]
    ev += [N(5000, B, 1530, 4, flags=FEED)]  # meets 4 levels of asks
    ev += [(1000, 5001, 1560, 2, 0, REPLACE, 0, 0, FEED)]  # 3 more levels
    ev += [(1001, 0, 0, 99, 0, REDUCE, 0, 0, FEED), (1002, 0, 0, 1, 0, REDUCE, 0, 0, FEED)]
    ev += [X(i, 1 + i % 4, 1600, PRICE) for i in range(7, 600, 20)]  # the front of the 1570 queue first
    ev += [X(i, 1 + i % 3, 0, NOCHECK if i % 2 else 0) for i in range(1, 600, 13)]  # any order
    ev += [X(5001, 2), X(5000, 9, 1530, PRICE | NOCHECK)]
    ev += [N(6000, S, 1000, 1, flags=FEED)]  # every bid is stale
    ev += [N(7000, B, 2000, 1, flags=FEED)]  # every ask is stale
    _check(cfg, ev)
    _check(cfg, ev, batch=1)
    _check(cfg, ev, exec_capacity=1)
    _check(cfg, ev, batch=50, exec_capacity=2)


def test_halted_book_keeps_crossing_orders_until_the_cross():
    """Issue 25's LULD pause: bid 10.00 x100, ask 10.10 x100; paused; sell 9.90 x50 and buy
    10.20 x80 displayed (crossed, nothing removed); the halt cross at 10.05 (NOCHECK EXECs of
    50 and 30 against the 9.90 sell and the 10.10 ask, 80 of the 10.20 buy); resumption: bid
    10.00 x100, ask 10.10 x70, no desync. Core and reference, event by event."""
    st = rb.STATE
    cfg = _cfg(0, (0, 90000, 110000, 100, 16))
    ev = [N(1, B, 100000, 100, flags=FEED), N(2, S, 101000, 100, flags=FEED),
          (0, 0, 0, 1, 0, st, 0, 0, 0),
          N(3, S, 99000, 50, flags=FEED), N(4, B, 102000, 80, flags=FEED),
          X(3, 50, 100500, PRICE | NOCHECK), X(4, 80, 100500, PRICE | NOCHECK), X(2, 30, 100500, PRICE | NOCHECK),
          (0, 0, 0, 0, 0, st, 0, 0, 0)]
    _check(cfg, ev)
    _check(cfg, ev, 1)
    ref = cfg.make_ref()
    outs = [ref.apply(e) for e in ev]
    assert outs[4][4][:4] == (102000, 80, 99000, 50)  # the displayed book is crossed
    assert all(o[5] == [] for o in outs)  # no stale removal, no desync
    assert outs[-1][4][:4] == (100000, 100, 101000, 70)
    b = lobreplay.OrderBook(90000, 110000, 100, 16)
    b.new(1, "B", 100000, 100, flags=lobreplay.Flag.FEED)
    b.halt()
    b.new(5, "S", 99000, 10, flags=lobreplay.Flag.FEED)
    assert b.halted and b.parked == 1 and b.best_ask() == (99000, 10, 1)
    b.validate()
    d = b.resume()  # nothing crossed it away: the stale bid goes, with a desync
    assert len(d) == 1 and d["order_id"][0] == 1 and d["found_id"][0] == 5
    assert not b.halted and b.best_bid() is None and b.best_ask() == (99000, 10, 1)


def test_consistent_execs_are_the_fills_of_one_synthetic_aggressor():
    """docs/core.md: EXECs of the fills an unpublished aggressor made, in
    order, are what matching that aggressor gives: no desync, and the expected
    fills written to the executions are the aggressor's trades (taker 0)."""
    cfg = _cfg(0, (0, 1000, 2000, 5, 500))
    book = [N(i, S, 1500 + 5 * (i % 9), 1 + i % 5) for i in range(1, 301)]
    book += [N(1000 + i, B, 1490 - 5 * (i % 9), 1 + i % 4) for i in range(300)]
    for side, limit, qty in ((B, 1530, 400), (S, 1460, 350), (B, 2000, 10**6)):
        ref = cfg.make_ref()
        for e in book:
            ref.apply(e)
        agg = ref.apply(N(9999, side, limit, qty, IOC))[3]
        assert len(agg) > 50
        feed = [X(m, q, p, PRICE) for m, _, p, q, _ in agg]
        _check(cfg, book + feed)
        out = cfg.make_core().apply(fuzzgen.events_array(book + feed))
        assert len(out.desyncs) == 0
        got = fuzzgen._rows(out.execs, ("maker_id", "taker_id", "price", "qty", "maker_remaining"))
        assert got == [(m, 0, p, q, r) for m, _, p, q, r in agg]


# ---------------------------------------------------------------------------
# the harness must catch a wrong book


def _mutant_reduce_loses_priority(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        o = self.orders.get(oid)
        if kind == REDUCE and o is not None and 0 < qty < o.qty:
            q = self.levels[o.side][o.price]
            q.remove(o)
            q.append(o)
        return orig(self, kind, oid, new_id, price, qty, side, tif, flags)
    return apply


def _mutant_fok_as_ioc(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        return orig(self, kind, oid, new_id, price, qty, side, IOC if (kind == NEW and tif == FOK) else tif, flags)
    return apply


def _mutant_no_efull(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        cap = self.capacity
        self.capacity = cap + 1
        try:
            return orig(self, kind, oid, new_id, price, qty, side, tif, flags)
        finally:
            self.capacity = cap
    return apply


def _mutant_replace_keeps_priority(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        o = self.orders.get(oid)
        if (kind == REPLACE and o is not None and price == o.price and new_id == oid and qty > 0
                and o not in self.parked and len(self.levels[o.side][o.price]) > 1):
            o.qty = qty
            return (rb.OK, 0, qty, [], [])
        return orig(self, kind, oid, new_id, price, qty, side, tif, flags)
    return apply


def _mutant_bbo_counts_levels(orig_bbo):
    def bbo(self):
        out = list(orig_bbo(self))
        out[4] = min(out[4], 3)  # caps the reported order count
        return tuple(out)
    return bbo


def _mutant_unknown_flags_ignored(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        return orig(self, kind, oid, new_id, price, qty, side, tif, flags & rb.KNOWN_FLAGS)
    return apply


def _mutant_feed_reduce_rejects(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        return orig(self, kind, oid, new_id, price, qty, side, tif, flags & ~FEED if kind == REDUCE else flags)
    return apply


def _mutant_exec_nocheck_ignored(orig):
    def _exec(self, o, qty, price, flags):
        return orig(self, o, qty, price, flags & ~rb.NOCHECK)
    return _exec


def _mutant_exec_loses_priority(orig):
    def _exec(self, o, qty, price, flags):
        out = orig(self, o, qty, price, flags)
        if o.id in self.orders and o not in self.parked:  # a partial fill sends it to the back of its queue
            q = self.levels[o.side][o.price]
            q.remove(o)
            q.append(o)
        return out
    return _exec


def _mutant_fill_order_found_qty_of_front(orig):
    def _exec(self, o, qty, price, flags):
        lv = self.levels[o.side]
        if o in self.parked:  # (no front to check)
            return orig(self, o, qty, price, flags)
        front = lv[max(lv) if o.side == B else min(lv)][0]
        size = front.qty
        st_, filled, resting, execs, desyncs = orig(self, o, qty, price, flags)
        desyncs = [d[:3] + (size,) + d[4:] if d[6] == rb.FILL_ORDER else d for d in desyncs]
        return st_, filled, resting, execs, desyncs
    return _exec


def _mutant_stale_orders_lifo(orig):
    def _rest_feed(self, oid, side, price, qty, participant=0):
        for q in self.levels[S if side == B else B].values():
            q.reverse()  # the stale orders it meets leave (and are reported) newest first
        return orig(self, oid, side, price, qty, participant)
    return _rest_feed


def _mutant_stp_ignored(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        return orig(self, kind, oid, new_id, price, qty, side, tif, flags & ~STP_BOTH if kind == NEW else flags)
    return apply


def _mutant_notional_skips_unaffordable(orig):
    def _plan(self, side, limit, qty, notional, participant, stp):
        if not notional:
            return orig(self, side, limit, qty, notional, participant, stp)
        # a walk that passes over makers it cannot afford instead of stopping
        opp = self.levels[S if side == B else B]
        actions, filled, left = [], 0, qty
        for p in sorted(opp, reverse=(side == S)):
            for o in opp[p]:
                can = min(o.qty, left // o.price) if o.price > 0 else 0
                if can and not (stp and o.participant == participant):
                    actions.append(("trade", o, can))
                    filled += can
                    left -= can * o.price
        return actions, filled, False
    return _plan


def _mutant_notional_goes_on_after_a_partial_fill(orig):
    def _plan(self, side, limit, qty, notional, participant, stp):
        if not notional:
            return orig(self, side, limit, qty, notional, participant, stp)
        # the core before issue 26 (and this reference with it): each maker visited once, and
        # what is left after a maker filled in part goes on to the makers behind it (a sell:
        # cheaper bids), so that two makers could be filled in part
        opp = self.levels[S if side == B else B]
        actions, filled, stopped, left = [], 0, False, qty
        for o in [o for p in sorted(opp, reverse=(side == S)) for o in opp[p]]:
            can = min(o.qty, left // o.price) if o.price > 0 else 0
            if can == 0:
                break
            if stp and o.participant == participant:
                if stp & STP_RESTING:
                    actions.append(("cancel", o))
                if stp & STP_INCOMING:
                    actions.append(("stop", o))
                    stopped = True
                    break
                continue
            actions.append(("trade", o, can))
            filled += can
            left -= can * o.price
        return actions, filled, stopped
    return _plan


def _mutant_stopped_gtc_rests(orig):
    def _plan(self, side, limit, qty, notional, participant, stp):
        actions, filled, stopped = orig(self, side, limit, qty, notional, participant, stp)
        return actions, filled, False  # the remainder of a stopped order rests
    return _plan


def _mutant_halt_ignored(orig):
    def apply(self, kind, oid, new_id, price, qty, side, tif, flags=0):
        if kind == rb.STATE and qty in (0, 1):
            return (rb.OK, 0, 0, [], [])  # the book goes on matching through a halt
        return orig(self, kind, oid, new_id, price, qty, side, tif, flags)
    return apply


def _mutant_unpark_newest_first(orig):
    def _state(self, qty):
        self.parked.reverse()
        return orig(self, qty)
    return _state


MUTANTS = {
    "halt-ignored": ("apply", _mutant_halt_ignored, "realistic"),
    "unpark-newest-first": ("_state", _mutant_unpark_newest_first, "realistic"),
    "reduce-loses-priority": ("apply", _mutant_reduce_loses_priority, "realistic"),
    "fok-as-ioc": ("apply", _mutant_fok_as_ioc, "chaos"),
    "no-efull": ("apply", _mutant_no_efull, "chaos"),
    "replace-keeps-priority": ("apply", _mutant_replace_keeps_priority, "mixed"),
    "bbo-count-capped": ("bbo", _mutant_bbo_counts_levels, "realistic"),
    "unknown-flags-ignored": ("apply", _mutant_unknown_flags_ignored, "chaos"),
    "feed-reduce-rejects": ("apply", _mutant_feed_reduce_rejects, "mixed"),
    "exec-nocheck-ignored": ("_exec", _mutant_exec_nocheck_ignored, "wide"),
    "exec-loses-priority": ("_exec", _mutant_exec_loses_priority, "realistic"),
    "fill-order-found-qty-of-front": ("_exec", _mutant_fill_order_found_qty_of_front, "mixed"),
    "stale-orders-lifo": ("_rest_feed", _mutant_stale_orders_lifo, "realistic"),
    "stp-ignored": ("apply", _mutant_stp_ignored, "realistic"),
    "notional-skips-unaffordable": ("_plan", _mutant_notional_skips_unaffordable, "mixed"),
    "notional-goes-on-after-a-partial-fill": ("_plan", _mutant_notional_goes_on_after_a_partial_fill, "mixed"),
    "stp-stopped-gtc-rests": ("_plan", _mutant_stopped_gtc_rests, "realistic"),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_harness_catches_mutant(name, monkeypatch):
    attr, make, mode = MUTANTS[name]
    monkeypatch.setattr(rb.RefBook, attr, make(getattr(rb.RefBook, attr)))
    res = fuzzgen.run(seed=7, mode=mode, commands=200_000, minimize_seconds=20)
    div = res.divergence
    assert div is not None, f"mutant {name} not detected"
    report = div.report()
    assert "DIVERGENCE" in report and "seed=7" in report
    # the shrunk stream still shows the difference and is small
    assert div.repro_events, report
    assert len(div.repro_events) <= 40, report
    assert fuzzgen.check_stream(div.config, div.repro_events) is not None or \
        fuzzgen.check_stream(div.config, div.repro_events, 1) is not None


def test_generation_is_deterministic():
    def digest(seed):
        src = fuzzgen.GenSource(seed, "all", 0, 30_000)
        return [(c.start, tuple(c.events), c.bbo_on, c.exec_capacity) for c in src.chunks()]
    assert digest(3) == digest(3)
    assert digest(3) != digest(4)


@pytest.mark.slow
def test_save_and_replay(tmp_path):
    path = str(tmp_path / "stream.npy")
    res = fuzzgen.run(seed=9, mode="all", commands=60_000, epoch_len=25_000, save=path)
    assert res.ok
    arr = np.load(path)
    assert len(arr) == 60_000 and arr.dtype == fuzzgen.STREAM_DTYPE
    again = fuzzgen.replay(path, chunk=3000)
    assert again.ok and again.commands == 60_000
    # the saved events are exactly the generated ones
    src = fuzzgen.GenSource(9, "all", 0, 25_000)
    first = [e for c in src.chunks() for e in c.events]
    assert arr[:25_000].tolist() == first


def test_replay_reports_a_divergence_and_writes_a_repro(tmp_path, monkeypatch):
    path = str(tmp_path / "s.npy")
    assert fuzzgen.run(seed=2, mode="chaos", commands=30_000, save=path).ok
    monkeypatch.setattr(rb.RefBook, "apply", _mutant_fok_as_ioc(rb.RefBook.apply))
    repro = str(tmp_path / "repro.npy")
    rc = fuzzgen.main(["--replay", path, "--minimize-seconds", "20", "--repro", repro])
    assert rc == 1
    res = fuzzgen.replay(repro, minimize_seconds=0)
    assert not res.ok  # the repro file alone reproduces it
    monkeypatch.undo()
    assert fuzzgen.replay(repro).ok  # and matches once the oracle is right again


def test_cli_ok_exit_status():
    assert fuzzgen.main(["--commands", "5000", "--seed", "3", "--progress", "2000"]) == 0


def test_cli_runs_as_module_and_script():
    for argv in (["-m", "tests.fuzzgen"], ["tests/fuzzgen.py"]):
        p = subprocess.run([sys.executable, *argv, "--commands", "3000", "--seed", "8", "--mode", "mixed"],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "OK" in p.stdout


# ---------------------------------------------------------------------------
# hypothesis state machines

# The state machines' run sizes by hypothesis profile (tests/conftest.py loads the profile: its
# derandomize and database settings apply here too).
SIZES = {"dev": (100, 50), "ci": (150, 50), "expensive": (3000, 120)}
_examples, _steps = SIZES[settings.get_current_profile_name()]
PROFILE = settings(settings.default, max_examples=_examples, stateful_step_count=_steps,
                   suppress_health_check=[HealthCheck.too_slow])

# instrument 0: 7 levels, capacity 6; instrument 2: 11 levels, capacity 3; 1 has no book
SM_BOOKS = {0: (100, 160, 10, 6), 2: (-20, 20, 4, 3)}
SM_CONFIG = _cfg(2, *[(i, *b) for i, b in SM_BOOKS.items()])

ids_st = st.one_of(st.integers(0, 12), st.sampled_from(fuzzgen.SPECIAL_IDS))
qty_st = st.one_of(st.integers(1, 9), st.sampled_from([0, -1, 2**40]))
tif_st = st.sampled_from([GTC, GTC, IOC, FOK, MARKET, 4])
side_st = st.sampled_from([B, S, B, S, 0])
inst_st = st.sampled_from([0, 0, 0, 2, 2, 1, 3, 2**32 - 1])  # 1, 3 and 2^32-1 have no book
book_inst_st = st.sampled_from([0, 0, 0, 2])
good_tif_st = st.sampled_from([GTC, GTC, GTC, IOC, FOK, MARKET])
# a price as (level index, off-grid offset); mapped onto the instrument's band
lvl_st = st.tuples(st.integers(-1, 11), st.sampled_from([0, 0, 0, 0, 0, 1]))
# flags anywhere: mostly none; known bits (meaningful or ignored); unknown bits (EKIND)
flags_st = st.sampled_from([0, 0, 0, 0, FEED, PRICE, NOCHECK, PRICE | NOCHECK, FEED | PRICE | NOCHECK,
                            NOTIONAL, STP_RESTING, STP_BOTH, NOTIONAL | STP_INCOMING, STP_RESTING | FEED,
                            64, 128, 255])
part_st = st.sampled_from([0, 1, 1, 2, 2, 2**32 - 1])  # participants: a few, so orders meet their own
stp_st = st.sampled_from([0, STP_RESTING, STP_INCOMING, STP_BOTH])


def _price(inst, lvl):
    lo, hi, tick, _ = SM_BOOKS.get(inst, (0, 0, 1, 1))
    k, off = lvl
    return lo + tick * k + off


def _good_price(inst, k):
    lo, hi, tick, _ = SM_BOOKS[inst]
    return lo + tick * min(k, (hi - lo) // tick)


class SessionMachine(RuleBasedStateMachine):
    """One event per Session.apply call; outputs (desyncs too) compared after
    every step. The *_live rules aim at orders the reference knows are live;
    the *_any rules send anything (unknown ids, other books, bad fields and
    flags); new_feed/exec_live/FEED reduce and replace are the feed replay."""

    ids = Bundle("ids")

    def __init__(self):
        super().__init__()
        self.ref = SM_CONFIG.make_ref()
        self.core = SM_CONFIG.make_core()
        self.last_bbo = {}
        self.next_id = 100

    def _step(self, ev):
        res, exe, bbo, des = fuzzgen._apply_ref(self.ref, [ev])
        chunk = fuzzgen.Chunk(0, [ev], res, exe, bbo, des, True, None)
        out = self.core.apply(fuzzgen.events_array([ev]), bbo=True)
        mm = fuzzgen.compare_chunk(chunk, out)
        assert mm is None, fuzzgen.fmt_event(ev) + "\n" + "\n".join(mm.lines)
        self.last_bbo[ev[4]] = tuple(int(out.bbo[f][0]) for f in fuzzgen.BBO_FIELDS)
        return res[0]

    def _live(self, data):
        """(instrument, id) of a live order (the rules using it need one)."""
        inst = data.draw(st.sampled_from([i for i in sorted(SM_BOOKS) if self.ref.books[i].orders]))
        return inst, data.draw(st.sampled_from(sorted(self.ref.books[inst].orders)))

    def _any_live(self):
        return any(b.orders for b in self.ref.books.values())

    @initialize(target=ids)
    def first_id(self):
        return 1

    @rule(target=ids, oid=ids_st)
    def an_id(self, oid):
        return oid

    def _fresh(self):
        self.next_id += 1
        return self.next_id

    @rule(target=ids, inst=book_inst_st, side=st.sampled_from([B, S]), k=st.integers(0, 10),
          qty=st.integers(1, 9), tif=good_tif_st)
    def new(self, inst, side, k, qty, tif):
        oid = self._fresh()
        self._step((oid, 0, _good_price(inst, k), qty, inst, NEW, side, tif, 0))
        return oid

    @rule(target=ids, inst=book_inst_st, side=st.sampled_from([B, S]), k=st.integers(0, 2),
          qty=st.integers(1, 9))
    def new_passive(self, inst, side, k, qty):
        """GTC on its own side of the band: books fill up and queues form."""
        lo, hi, tick, _ = SM_BOOKS[inst]
        mid = (hi - lo) // tick // 2
        oid = self._fresh()
        price = lo + tick * (mid - 1 - k if side == B else mid + 1 + k)
        self._step((oid, 0, price, qty, inst, NEW, side, GTC, 0))
        return oid

    @rule(target=ids, oid=ids, side=side_st, lvl=lvl_st, qty=qty_st, tif=tif_st, inst=inst_st,
          flags=flags_st)
    def new_any(self, oid, side, lvl, qty, tif, inst, flags):
        self._step((oid, 0, _price(inst, lvl), qty, inst, NEW, side, tif, flags))
        return oid

    @rule(target=ids, inst=book_inst_st, side=st.sampled_from([B, S]), k=st.integers(0, 10),
          qty=st.integers(1, 9), tif=good_tif_st, part=part_st, stp=stp_st)
    def new_stp(self, inst, side, k, qty, tif, part, stp):
        """Orders of a few participants, with and without self-trade prevention."""
        oid = self._fresh()
        self._step((oid, part, _good_price(inst, k), qty, inst, NEW, side, tif, stp))
        return oid

    @rule(target=ids, inst=book_inst_st, side=st.sampled_from([B, S]), budget=st.integers(-1, 1500),
          part=part_st, stp=stp_st)
    def new_notional(self, inst, side, budget, part, stp):
        """A market order with a budget (instrument 2's band has prices <= 0)."""
        oid = self._fresh()
        self._step((oid, part, 0, budget, inst, NEW, side, MARKET, NOTIONAL | stp))
        return oid

    @precondition(_any_live)
    @rule(target=ids, data=st.data(), k=st.integers(0, 10), qty=st.integers(1, 9), stp=stp_st)
    def replace_stp(self, data, k, qty, stp):
        inst, oid = self._live(data)
        nid = self._fresh()
        self._step((oid, nid, _good_price(inst, k), qty, inst, REPLACE, 0, 0, stp))
        return nid

    @rule(target=ids, inst=book_inst_st, side=st.sampled_from([B, S]), k=st.integers(0, 10),
          qty=st.integers(1, 9))
    def new_feed(self, inst, side, k, qty):
        """The feed says this order rests: the orders it meets are stale."""
        oid = self._fresh()
        self._step((oid, 0, _good_price(inst, k), qty, inst, NEW, side, GTC, FEED))
        return oid

    @precondition(_any_live)
    @rule(data=st.data())
    def cancel_live(self, data):
        inst, oid = self._live(data)
        self._step((oid, 0, 0, 0, inst, CANCEL, 0, 0, 0))

    @rule(oid=ids, inst=inst_st, flags=flags_st)
    def cancel_any(self, oid, inst, flags):
        self._step((oid, 0, 0, 0, inst, CANCEL, 0, 0, flags))

    @precondition(_any_live)
    @rule(data=st.data(), how=st.sampled_from(["part", "part", "exact", "over"]),
          flags=st.sampled_from([0, 0, FEED]))
    def reduce_live(self, data, how, flags):
        inst, oid = self._live(data)
        rem = self.ref.books[inst].orders[oid].qty
        qty = {"part": data.draw(st.integers(1, max(1, rem - 1))), "exact": rem, "over": rem + 1}[how]
        self._step((oid, 0, 0, qty, inst, REDUCE, 0, 0, flags))

    @rule(oid=ids, inst=inst_st, qty=qty_st, flags=flags_st)
    def reduce_any(self, oid, inst, qty, flags):
        self._step((oid, 0, 0, qty, inst, REDUCE, 0, 0, flags))

    @precondition(_any_live)
    @rule(target=ids, data=st.data(), new_id=ids, same=st.booleans(), k=st.integers(0, 10),
          qty=st.integers(1, 9), flags=st.sampled_from([0, 0, FEED]))
    def replace_live(self, data, new_id, same, k, qty, flags):
        inst, oid = self._live(data)
        nid = oid if same else new_id
        self._step((oid, nid, _good_price(inst, k), qty, inst, REPLACE, 0, 0, flags))
        return nid

    @rule(target=ids, oid=ids, new_id=ids, same=st.booleans(), lvl=lvl_st, qty=qty_st, inst=inst_st,
          flags=flags_st)
    def replace_any(self, oid, new_id, same, lvl, qty, inst, flags):
        nid = oid if same else new_id
        self._step((oid, nid, _price(inst, lvl), qty, inst, REPLACE, 0, 0, flags))
        return nid

    @precondition(_any_live)
    @rule(data=st.data(), who=st.sampled_from(["front", "front", "any"]),
          how=st.sampled_from(["part", "exact", "over"]), price=st.sampled_from(["none", "same", "other"]),
          nocheck=st.booleans())
    def exec_live(self, data, who, how, price, nocheck):
        """A feed's fill of a live order: the one priority gives (the front of
        its side's best level) or any other; part, all or more than its size."""
        if who == "front":
            inst = data.draw(st.sampled_from([i for i in sorted(SM_BOOKS) if self.ref.books[i].orders]))
            book = self.ref.books[inst]
            side = data.draw(st.sampled_from([sd for sd in (B, S) if book.levels[sd]]))
            oid = book.levels[side][book.best_price(side)][0].id
        else:
            inst, oid = self._live(data)
        o = self.ref.books[inst].orders[oid]
        qty = {"part": data.draw(st.integers(1, max(1, o.qty - 1))), "exact": o.qty,
               "over": o.qty + data.draw(st.integers(1, 3))}[how]
        flags = NOCHECK if nocheck else 0
        px = 0
        if price != "none":
            flags |= PRICE
            px = o.price if price == "same" else o.price + data.draw(st.sampled_from([-4, 1, 10]))
        self._step((oid, 0, px, qty, inst, EXEC, 0, 0, flags))

    @rule(oid=ids, inst=inst_st, lvl=lvl_st, qty=qty_st, flags=flags_st)
    def exec_any(self, oid, inst, lvl, qty, flags):
        self._step((oid, 0, _price(inst, lvl), qty, inst, EXEC, 0, 0, flags))

    @invariant()
    def books_match(self):
        mm = fuzzgen.compare_books(self.core, self.ref, SM_CONFIG)
        assert mm is None, "\n".join(mm.lines)

    @invariant()
    def bbo_is_the_top_of_book(self):
        for inst, bbo in self.last_bbo.items():
            if inst not in SM_BOOKS:
                assert bbo[:6] == (0,) * 6 and bbo[7] == 0
                continue
            v = self.core.book(inst)
            bid, ask = v.best(B) or (0, 0, 0), v.best(S) or (0, 0, 0)
            assert bbo[:6] == (bid[0], bid[1], ask[0], ask[1], bid[2], ask[2])
            if bid[2] and ask[2]:
                assert bid[0] < ask[0], "crossed book"


TestSessionMachine = SessionMachine.TestCase
TestSessionMachine.settings = PROFILE


OB_BAND = (0, 50, 5, 5)  # 11 levels, capacity 5


class OrderBookMachine(RuleBasedStateMachine):
    """The interactive OrderBook API (rejects raise LobError with .status)."""

    ids = Bundle("ids")

    def __init__(self):
        super().__init__()
        self.book = lobreplay.OrderBook(*OB_BAND)
        self.ref = rb.RefBook(*OB_BAND)
        self.next_id = 100

    def _compare(self, call, ref_out):
        status, filled, resting, execs, desyncs = ref_out
        try:
            fill = call()
        except lobreplay.LobError as e:
            assert e.status == status, f"core raised {e!r}, reference says {rb.STATUS_NAMES[status]}"
            return
        assert status == rb.OK, f"core accepted, reference says {rb.STATUS_NAMES[status]}"
        assert (fill.filled, fill.resting) == (filled, resting)
        got = [tuple(int(x) for x in r) for r in
               fill.execs[["maker_id", "taker_id", "price", "qty", "maker_remaining"]].tolist()]
        assert got == execs
        assert fill.execs["event_index"].tolist() == [0] * len(execs)
        assert fill.trades == [(e[0], e[2], e[3]) for e in execs if e[3] > 0]
        assert fill.stp == [(e[0], e[2], e[3]) for e in execs if e[3] <= 0]
        got = [tuple(int(x) for x in r) for r in fill.desyncs[["order_id", "found_id", "expected_qty", "found_qty",
                                                               "expected_price", "found_price", "cause"]].tolist()]
        assert got == desyncs  # FEED orders: the stale orders they meet, as in a batch
        assert fill.desyncs["event_index"].tolist() == [0] * len(desyncs)

    def _live(self, data):
        return data.draw(st.sampled_from(sorted(self.ref.orders)))

    def _any_live(self):
        return bool(self.ref.orders)

    @initialize(target=ids)
    def first_id(self):
        return 7

    @rule(target=ids, oid=ids_st)
    def an_id(self, oid):
        return oid

    @rule(target=ids, oid=ids, side=st.sampled_from(["B", "S", B, S, lobreplay.Side.BUY]),
          k=st.integers(-1, 11), qty=qty_st, tif=st.sampled_from(list(lobreplay.TIF)))
    def new(self, oid, side, k, qty, tif):
        sd = lobreplay.Side(side if isinstance(side, int) else ord(side))
        price = OB_BAND[0] + OB_BAND[2] * k + (1 if k == 11 else 0)
        self._compare(lambda: self.book.new(oid, side, price, qty, tif),
                      self.ref.apply(NEW, oid, 0, price, qty, int(sd), int(tif)))
        return oid

    @rule(target=ids, side=st.sampled_from([B, S]), k=st.integers(0, 3), qty=st.integers(1, 9))
    def new_passive(self, side, k, qty):
        self.next_id += 1
        oid = self.next_id
        price = OB_BAND[0] + OB_BAND[2] * (4 - k if side == B else 6 + k)
        self._compare(lambda: self.book.new(oid, side, price, qty),
                      self.ref.apply(NEW, oid, 0, price, qty, side, GTC))
        return oid

    @rule(target=ids, side=st.sampled_from([B, S]), k=st.integers(0, 10), qty=st.integers(1, 9),
          tif=st.sampled_from(list(lobreplay.TIF)), part=part_st, stp=stp_st, notional=st.booleans())
    def new_stp(self, side, k, qty, tif, part, stp, notional):
        """Participants, STP modes and notional market orders through OrderBook.new."""
        self.next_id += 1
        oid = self.next_id
        price = OB_BAND[0] + OB_BAND[2] * k
        flags = stp | (NOTIONAL if notional else 0)
        if notional:
            qty *= 11  # a budget: prices here are 0..50
        self._compare(lambda: self.book.new(oid, side, price, qty, tif, participant=part, flags=flags),
                      self.ref.apply(NEW, oid, part, price, qty, side, int(tif), flags))
        for o in self.ref.orders.values():
            assert self.book.participant(o.id) == o.participant
        return oid

    @rule(target=ids, side=st.sampled_from([B, S]), k=st.integers(-1, 11), qty=qty_st)
    def new_feed(self, side, k, qty):
        """The feed says this order rests: the orders it meets are stale (Fill.desyncs)."""
        self.next_id += 1
        oid = self.next_id
        price = OB_BAND[0] + OB_BAND[2] * k
        self._compare(lambda: self.book.new(oid, side, price, qty, flags=FEED),
                      self.ref.apply(NEW, oid, 0, price, qty, side, GTC, FEED))
        return oid

    @precondition(_any_live)
    @rule(target=ids, data=st.data(), k=st.integers(0, 10), qty=st.integers(1, 9))
    def replace_feed(self, data, k, qty):
        oid = self._live(data)
        self.next_id += 1
        nid = self.next_id
        price = OB_BAND[0] + OB_BAND[2] * k
        self._compare(lambda: self.book.replace(oid, nid, price, qty, flags=FEED),
                      self.ref.apply(REPLACE, oid, nid, price, qty, 0, 0, FEED))
        return nid

    @precondition(_any_live)
    @rule(data=st.data())
    def cancel_live(self, data):
        oid = self._live(data)
        self._compare(lambda: self.book.cancel(oid), self.ref.apply(CANCEL, oid, 0, 0, 0, 0, 0))

    @rule(oid=ids)
    def cancel(self, oid):
        self._compare(lambda: self.book.cancel(oid), self.ref.apply(CANCEL, oid, 0, 0, 0, 0, 0))

    @precondition(_any_live)
    @rule(data=st.data(), qty=st.integers(1, 4), exact=st.booleans())
    def reduce_live(self, data, qty, exact):
        oid = self._live(data)
        o = self.ref.orders.get(oid)
        if exact and o is not None:
            qty = o.qty
        self._compare(lambda: self.book.reduce(oid, qty), self.ref.apply(REDUCE, oid, 0, 0, qty, 0, 0))

    @rule(oid=ids, qty=qty_st)
    def reduce(self, oid, qty):
        self._compare(lambda: self.book.reduce(oid, qty), self.ref.apply(REDUCE, oid, 0, 0, qty, 0, 0))

    @rule(target=ids, data=st.data(), new_id=ids, same=st.booleans(), k=st.integers(-1, 10), qty=qty_st)
    def replace(self, data, new_id, same, k, qty):
        oid = self._live(data) if self.ref.orders and data.draw(st.booleans()) else new_id
        nid = oid if same else new_id
        price = OB_BAND[0] + OB_BAND[2] * k
        self._compare(lambda: self.book.replace(oid, nid, price, qty),
                      self.ref.apply(REPLACE, oid, nid, price, qty, 0, 0))
        return nid

    @invariant()
    def same_book(self):
        self.book.validate()
        assert self.book.order_count == self.ref.order_count == len(self.book)
        for side in (B, S):
            assert self.book.best(side) == self.ref.best(side)
            assert self.book.depth(side, 20) == self.ref.depth(side)
            want = []
            for price, _, _ in self.ref.depth(side):
                assert self.book.level_orders(price) == self.ref.level_orders(price)
                want += [(oid, q, price) for oid, q in self.ref.level_orders(price)]
            ids, qtys, prices = self.book.orders(side)  # the whole side in one call
            assert list(zip(ids.tolist(), qtys.tolist(), prices.tolist())) == want
        for oid in list(self.ref.orders) + [0, 1, 7, 12]:
            assert self.book.find(oid) == self.ref.find(oid)


TestOrderBookMachine = OrderBookMachine.TestCase
TestOrderBookMachine.settings = PROFILE
