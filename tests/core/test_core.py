"""Targeted tests of the core through the public API: edges the random
differential fuzz reaches only by luck (bitmap words, hash collisions,
execution-buffer refills, creation arguments, latency histograms)."""
import gc
import os
import random
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lobreplay as L
from lobreplay.core import _coreapi
from lobreplay.testing.synth import generate_flow

B, S = L.Side.BUY, L.Side.SELL


def events(rows):
    ev = np.zeros(len(rows), L.EVENT_DTYPE)
    for i, r in enumerate(rows):
        ev[i] = r
    return ev


# ---- semantics ----------------------------------------------------------------

def test_price_time_priority_and_maker_price():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, B, 150, 10)
    b.new(2, B, 150, 5)
    b.new(3, B, 151, 1)
    f = b.new(9, S, 140, 12, "IOC")
    assert f.trades == [(3, 151, 1), (1, 150, 10), (2, 150, 1)]
    assert (f.filled, f.resting) == (12, 0)
    assert b.level_orders(150) == [(2, 4)]
    assert f.execs["maker_remaining"].tolist() == [0, 0, 4]
    assert f.execs["taker_id"].tolist() == [9, 9, 9]
    b.validate()


def test_gtc_rests_remainder_and_book_never_crosses():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, S, 150, 5)
    f = b.new(2, B, 152, 8)
    assert (f.filled, f.resting) == (5, 3)
    assert b.best_bid() == (152, 3, 1) and b.best_ask() is None
    b.validate()


def test_reduce_keeps_priority_and_exact_reduce_removes():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, B, 150, 10)
    b.new(2, B, 150, 10)
    assert b.reduce(1, 4).resting == 6
    assert b.level_orders(150) == [(1, 6), (2, 10)]
    with pytest.raises(L.BadQuantityError):
        b.reduce(1, 7)
    assert b.reduce(1, 6).resting == 0
    assert b.find(1) is None and b.level_orders(150) == [(2, 10)]


def test_replace_loses_priority_keeps_side_and_can_trade():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, B, 150, 10)
    b.new(2, B, 150, 10)
    b.new(3, S, 155, 4)
    b.replace(1, 11, 150, 10)
    assert b.level_orders(150) == [(2, 10), (11, 10)]
    f = b.replace(2, 12, 156, 6)  # same side (buy): crosses the ask at 155
    assert f.trades == [(3, 155, 4)] and f.execs["taker_id"].tolist() == [12]
    assert b.best_bid() == (156, 2, 1) and b.best_ask() is None
    b.replace(12, 12, 149, 2)  # the same id may be reused
    assert b.find(12) == (B, 149, 2)
    with pytest.raises(L.DuplicateOrderError):
        b.replace(11, 12, 150, 1)
    assert b.find(11) == (B, 150, 10)  # a rejected replace changes nothing
    b.validate()


def test_fok_is_decided_before_anything_changes():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, S, 150, 5)
    b.new(2, S, 151, 5)
    f = b.new(3, B, 151, 11, "FOK")
    assert (f.filled, f.resting, len(f.execs)) == (0, 0, 0)
    assert b.depth(S) == [(150, 5, 1), (151, 5, 1)]
    f = b.new(4, B, 151, 10, "FOK")
    assert f.filled == 10 and b.order_count == 0


def test_market_ignores_price_and_drops_remainder():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, S, 200, 5)
    f = b.new(2, B, -999, 7, "MARKET")
    assert (f.filled, f.resting) == (5, 0) and b.order_count == 0


def test_full_book_rejects_only_orders_that_would_rest():
    b = L.OrderBook(100, 200, 1, 2)
    b.new(1, S, 150, 5)
    b.new(2, S, 151, 5)
    with pytest.raises(L.BookFullError):
        b.new(3, B, 140, 1)
    with pytest.raises(L.BookFullError):
        b.new(3, B, 150, 6)  # would leave 1 to rest: nothing may change
    assert b.depth(S) == [(150, 5, 1), (151, 5, 1)]
    assert b.new(3, B, 150, 5).filled == 5  # fully filled: needs no slot
    assert b.new(4, B, 140, 1, "IOC").filled == 0  # IOC never needs a slot
    b.validate()


# ---- notional market orders (lob.h: LOB_F_NOTIONAL) -------------------------------

NOTIONAL, MARKET = L.Flag.NOTIONAL, L.TIF.MARKET
RESTING, INCOMING, BOTH = L.Flag.STP_CANCEL_RESTING, L.Flag.STP_CANCEL_INCOMING, L.Flag.STP_CANCEL_BOTH


def _rows(f):
    return [tuple(int(x) for x in r) for r in f.execs[["maker_id", "taker_id", "price", "qty",
                                                      "maker_remaining"]].tolist()]


def test_notional_buy_spends_its_budget_best_price_first():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, S, 101, 5)
    b.new(2, S, 101, 3)
    b.new(3, S, 102, 10)
    b.new(4, S, 105, 4)
    # budget 1000: 5 x 101 = 505 (495 left), 3 x 101 = 303 (192 left), then 192 // 102 = 1 share
    # of order 3 (90 left), and 90 buys nothing at 102: it stops. 910 spent, 90 unspent.
    f = b.new(9, B, 0, 1000, MARKET, flags=NOTIONAL)
    assert (f.filled, f.resting) == (9, 0)
    assert _rows(f) == [(1, 9, 101, 5, 0), (2, 9, 101, 3, 0), (3, 9, 102, 1, 9)]
    assert sum(p * q for _, p, q in f.trades) == 910
    assert b.depth(S) == [(102, 9, 1), (105, 4, 1)] and b.find(9) is None
    b.validate()


def test_notional_sell_stops_at_the_first_bid_it_cannot_afford():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(10, B, 150, 2)
    b.new(11, B, 120, 5)
    b.new(12, B, 100, 1)
    # 400: 2 x 150 = 300 (100 left); 100 // 120 = 0 at the next bid: stop, although the
    # bid at 100 would be affordable (no skipping ahead).
    f = b.new(9, S, 0, 400, MARKET, flags=NOTIONAL)
    assert (f.filled, f.resting) == (2, 0) and f.trades == [(10, 150, 2)]
    assert b.depth(B) == [(120, 5, 1), (100, 1, 1)]
    f = b.new(8, S, 0, 119, MARKET, flags=NOTIONAL)  # less than one share at the best bid
    assert (f.filled, f.resting, len(f.execs)) == (0, 0, 0)
    assert b.depth(B) == [(120, 5, 1), (100, 1, 1)]


def test_notional_sell_stops_at_the_bid_it_filled_in_part():
    """Issue 26, item 6: 59 sells 4 at 12 (48; 11 left, less than another share at 12) and
    stops there, although 11 would buy one share of the bid at 9 behind it (the core went on
    to it: two makers filled in part). The same whichever path decides first: the dry walk
    (a full book, an execution array with no room for every live order) or not, with STP."""
    b = L.OrderBook(1, 1000, 1, 64)
    b.new(1, B, 12, 10)
    b.new(2, B, 9, 2)
    f = b.new(3, S, 0, 59, MARKET, flags=NOTIONAL)
    assert _rows(f) == [(1, 3, 12, 4, 6)] and (f.filled, f.resting) == (4, 0)
    assert b.depth(B) == [(12, 6, 1), (9, 2, 1)]
    b.validate()
    # a buy cannot skip ahead this way (asks behind are dearer), and stops in the same place
    a = L.OrderBook(1, 1000, 1, 64)
    a.new(1, S, 9, 10)
    a.new(2, S, 12, 2)
    f = a.new(3, B, 0, 44, MARKET, flags=NOTIONAL)  # 4 x 9 = 36, 8 left
    assert _rows(f) == [(1, 3, 9, 4, 6)] and a.depth(S) == [(9, 6, 1), (12, 2, 1)]
    book = [(1, 0, 12, 10, 0, L.Kind.NEW, B, 0, 0), (2, 5, 9, 2, 0, L.Kind.NEW, B, 0, 0),
            (4, 0, 8, 3, 0, L.Kind.NEW, B, 0, 0)]
    for flags, part in ((NOTIONAL, 0), (NOTIONAL, 7), (NOTIONAL | RESTING, 7), (NOTIONAL | BOTH, 5)):
        for cap, capacity in ((None, 64), (1, 64), (None, 3)):
            s = L.Session(0)
            s.add_book(0, 1, 1000, 1, capacity)
            out = s.apply(events(book + [(3, part, 0, 59, 0, L.Kind.NEW, S, MARKET, flags)]), exec_capacity=cap)
            assert out.results[-1]["filled"] == 4, (flags, part, cap, capacity)
            assert _rows(L.Fill(0, 0, out.execs)) == [(1, 3, 12, 4, 6)]
            assert s.book(0).depth(B) == [(12, 6, 1), (9, 2, 1), (8, 3, 1)]


def test_notional_at_the_top_of_int64_and_at_non_positive_prices():
    top = 2**63 - 1
    b = L.OrderBook(top - 1000, top, 1, 8)
    b.new(1, S, top - 1, 3)
    # INT64_MAX // (INT64_MAX - 1) = 1 share; no overflow anywhere
    f = b.new(2, B, 0, top, MARKET, flags=NOTIONAL)
    assert f.trades == [(1, top - 1, 1)] and b.find(1) == (S, top - 1, 2)
    n = L.OrderBook(-10, 10, 1, 8)
    n.new(1, S, -5, 3)
    n.new(2, S, 3, 3)
    f = n.new(3, B, 0, 100, MARKET, flags=NOTIONAL)  # the best ask is at -5: a price <= 0 stops it
    assert (f.filled, len(f.execs)) == (0, 0) and n.order_count == 2


@pytest.mark.parametrize("call,exc", [
    (lambda b: b.new(1, B, 100, 10, "GTC", flags=NOTIONAL), L.BadEventError),
    (lambda b: b.new(1, B, 100, 10, "IOC", flags=NOTIONAL), L.BadEventError),
    (lambda b: b.new(1, B, 100, 10, "FOK", flags=NOTIONAL), L.BadEventError),
    (lambda b: b.new(1, B, 0, 0, MARKET, flags=NOTIONAL), L.BadQuantityError),
    (lambda b: b.new(1, B, 0, -7, MARKET, flags=NOTIONAL), L.BadQuantityError),
    (lambda b: b.replace(7, 8, 150, 1, flags=NOTIONAL), L.BadEventError),
    (lambda b: b.new(1, B, 100, 1, participant=2**32), L.BadEventError),
    (lambda b: b.new(1, B, 100, 1, participant=2**64 - 1), L.BadEventError),
    (lambda b: b.new(1, B, 100, 1, flags=RESTING | L.Flag.FEED), L.BadEventError),
    (lambda b: b.replace(7, 8, 150, 1, flags=BOTH | L.Flag.FEED), L.BadEventError),
])
def test_order_flag_rejects(call, exc):
    b = L.OrderBook(100, 200, 2, 4)
    b.new(7, S, 150, 3, participant=5)
    with pytest.raises(exc):
        call(b)
    assert b.order_count == 1 and b.find(7) == (S, 150, 3) and b.participant(7) == 5


def test_order_flags_on_other_kinds_are_ekind():
    s = L.Session(0)
    s.add_book(0, 100, 200, 1, 8)
    s.apply(events([(1, 3, 150, 5, 0, L.Kind.NEW, S, 0, 0)]))
    rows = [(1, 0, 0, 0, 0, L.Kind.CANCEL, 0, 0, f) for f in (NOTIONAL, RESTING, INCOMING)]
    rows += [(1, 0, 0, 1, 0, L.Kind.REDUCE, 0, 0, BOTH), (1, 0, 150, 1, 0, L.Kind.EXEC, 0, 0, RESTING)]
    out = s.apply(events(rows))
    assert (out.results["status"] == L.Status.EKIND).all()
    assert s.book(0).find(1) == (S, 150, 5)
    assert s.book(0).participant(1) == 3
    out = s.apply(events([(2, 2**32 - 1, 140, 1, 0, L.Kind.NEW, B, 0, 0)]))  # the largest participant
    assert out.results["status"].tolist() == [0] and s.book(0).participant(2) == 2**32 - 1


# ---- self-trade prevention (lob.h: LOB_F_STP_*) ---------------------------------------

def _stp_book():
    """Asks: 2 (participant 8) 101 x 3, 1 (participant 7) 101 x 5, 3 (participant 8) 102 x 4."""
    b = L.OrderBook(100, 200, 1, 16)
    b.new(2, S, 101, 3, participant=8)
    b.new(1, S, 101, 5, participant=7)
    b.new(3, S, 102, 4, participant=8)
    return b


def test_stp_cancel_resting_cancels_own_orders_and_goes_on():
    b = _stp_book()
    f = b.new(9, B, 102, 10, participant=7, flags=RESTING)
    # 3 from order 2; order 1 (own) cancelled; 4 from order 3; 3 left rest at 102
    assert _rows(f) == [(2, 9, 101, 3, 0), (1, 9, 101, -5, 0), (3, 9, 102, 4, 0)]
    assert (f.filled, f.resting) == (7, 3) and f.trades == [(2, 101, 3), (3, 102, 4)]
    assert f.stp == [(1, 101, -5)]
    assert b.best_bid() == (102, 3, 1) and b.best_ask() is None and b.participant(9) == 7
    b.validate()


def test_participants_seen_before_a_halt_still_count_after_the_resume():
    """A book that has seen a participant keeps every order record's participant right after a
    halt ends (lob.c: its NEWs stay off the plain path): an order of no participant resting in
    the record a participant's order had must not inherit that participant, or STP would
    cancel it for a self-trade."""
    b = L.OrderBook(100, 200, 1, 16)
    b.new(1, S, 101, 5, participant=7)
    b.halt()
    b.resume()
    b.cancel(1)            # its record goes back to the free list...
    b.new(2, S, 101, 4)    # ...and this order, of no participant, takes it
    assert b.participant(2) == 0
    f = b.new(9, B, 101, 4, participant=7, flags=RESTING)
    assert f.trades == [(2, 101, 4)] and f.stp == []
    b.validate()


def test_stp_cancel_incoming_stops_the_order_there():
    b = _stp_book()
    f = b.new(9, B, 102, 10, participant=7, flags=INCOMING)  # GTC: its remainder does not rest
    assert _rows(f) == [(2, 9, 101, 3, 0), (1, 9, 101, 0, 5)]
    assert (f.filled, f.resting) == (3, 0) and f.stp == [(1, 101, 0)]
    assert b.depth(S) == [(101, 5, 1), (102, 4, 1)] and b.find(9) is None and b.best_bid() is None


def test_stp_cancel_both():
    b = _stp_book()
    f = b.new(9, B, 102, 10, "IOC", participant=7, flags=BOTH)
    assert _rows(f) == [(2, 9, 101, 3, 0), (1, 9, 101, -5, 0), (1, 9, 101, 0, 0)]
    assert (f.filled, f.resting) == (3, 0)
    assert b.depth(S) == [(102, 4, 1)] and b.find(1) is None


def test_stp_needs_a_participant_and_the_same_one():
    b = _stp_book()
    f = b.new(9, B, 101, 8, participant=0, flags=BOTH)  # no participant: STP bits do nothing
    assert f.trades == [(2, 101, 3), (1, 101, 5)]
    b = _stp_book()
    f = b.new(9, B, 101, 8, participant=5, flags=BOTH)  # nobody's own order here
    assert f.trades == [(2, 101, 3), (1, 101, 5)] and f.stp == []
    b = _stp_book()
    f = b.new(9, B, 101, 8, participant=7)  # own order, but no STP flag: it trades
    assert f.trades == [(2, 101, 3), (1, 101, 5)]


def test_fok_with_stp_counts_only_what_it_would_fill():
    b = _stp_book()
    f = b.new(9, B, 102, 6, "FOK", participant=7, flags=INCOMING)  # 3 before its own order: killed
    assert (f.filled, len(f.execs)) == (0, 0)
    assert b.depth(S) == [(101, 8, 2), (102, 4, 1)]
    f = b.new(9, B, 102, 8, "FOK", participant=7, flags=RESTING)  # 3 + 4 = 7 < 8: killed, nothing cancelled
    assert (f.filled, len(f.execs)) == (0, 0) and b.find(1) == (S, 101, 5)
    f = b.new(9, B, 102, 6, "FOK", participant=7, flags=RESTING)  # 3 + 4 >= 6: fills, order 1 cancelled
    assert _rows(f) == [(2, 9, 101, 3, 0), (1, 9, 101, -5, 0), (3, 9, 102, 3, 1)]
    assert f.filled == 6 and b.depth(S) == [(102, 1, 1)]


def test_replace_keeps_the_participant_and_applies_stp():
    b = L.OrderBook(100, 200, 1, 16)
    b.new(20, B, 100, 5, participant=7)
    b.new(1, S, 102, 2, participant=7)
    b.new(2, S, 103, 2, participant=8)
    f = b.replace(20, 21, 103, 5, flags=RESTING)
    assert _rows(f) == [(1, 21, 102, -2, 0), (2, 21, 103, 2, 0)]
    assert (f.filled, f.resting) == (2, 3) and b.participant(21) == 7 and b.find(20) is None
    b.new(3, S, 104, 1, participant=7)
    f = b.replace(21, 22, 104, 5, flags=INCOMING)  # stopped at its own order: nothing rests
    assert _rows(f) == [(3, 22, 104, 0, 1)] and (f.filled, f.resting) == (0, 0)
    assert b.order_count == 1 and b.find(22) is None and b.find(21) is None


def test_stp_on_a_full_book():
    b = L.OrderBook(100, 200, 1, 2)
    b.new(1, S, 101, 5, participant=7)
    b.new(5, B, 100, 1)
    f = b.new(9, B, 101, 3, participant=7, flags=INCOMING)  # stopped: nothing would rest, so no EFULL
    assert _rows(f) == [(1, 9, 101, 0, 5)] and (f.filled, f.resting) == (0, 0)
    with pytest.raises(L.BookFullError):  # 3 would rest (on the book as it is): nothing changes
        b.new(9, B, 101, 3, participant=7, flags=RESTING)
    assert b.find(1) == (S, 101, 5) and b.order_count == 2


def test_stp_and_notional_results_do_not_depend_on_exec_capacity():
    rows = []
    for i in range(1, 301):
        rows.append((i, 1 + i % 3, 150 + i % 7, 1 + i % 4, 0, L.Kind.NEW, S, 0, 0))
    rows.append((1000, 1, 200, 150, 0, L.Kind.NEW, B, L.TIF.IOC, RESTING))
    rows.append((1001, 2, 0, 40_000, 0, L.Kind.NEW, B, MARKET, NOTIONAL | RESTING))
    rows.append((1002, 3, 200, 1000, 0, L.Kind.NEW, B, L.TIF.GTC, BOTH))
    rows.append((1003, 1, 0, 10**9, 0, L.Kind.NEW, B, MARKET, NOTIONAL))
    ev = events(rows)
    outs = []
    for cap in (None, 1, 2, 7):
        s = L.Session(0)
        s.add_book(0, 100, 300, 1, 512)
        outs.append(s.apply(ev, exec_capacity=cap) if cap else s.apply(ev))
        s.book(0).validate()
    for o in outs[1:]:
        assert np.array_equal(o.results, outs[0].results) and np.array_equal(o.execs, outs[0].execs)
    assert (outs[0].execs["qty"] < 0).sum() > 50 and (outs[0].execs["qty"] == 0).sum() == 1


@pytest.mark.parametrize("call,exc", [
    (lambda b: b.new(1, B, 99, 1), L.OutOfBandError),
    (lambda b: b.new(1, B, 201, 1), L.OutOfBandError),
    (lambda b: b.new(1, B, 101, 1), L.BadPriceError),
    (lambda b: b.new(1, B, 100, 0), L.BadQuantityError),
    (lambda b: b.new(1, B, 100, -5), L.BadQuantityError),
    (lambda b: b.new(7, B, 100, 1), L.DuplicateOrderError),
    (lambda b: b.cancel(8), L.UnknownOrderError),
    (lambda b: b.reduce(8, 1), L.UnknownOrderError),
    (lambda b: b.replace(8, 9, 100, 1), L.UnknownOrderError),
    (lambda b: b.new(1, ord("X"), 100, 1), L.BadEventError),
    (lambda b: b.new(1, "X", 100, 1), L.BadEventError),
    (lambda b: b.new(1, B, 100, 1, tif=9), L.BadEventError),
    (lambda b: b.new(1, B, 100, 1, tif="DAY"), L.BadEventError),
])
def test_each_reject_has_its_own_error_and_changes_nothing(call, exc):
    b = L.OrderBook(100, 200, 2, 4)
    b.new(7, S, 150, 3)
    with pytest.raises(exc) as info:
        call(b)
    assert isinstance(info.value, (L.LobError, ValueError))
    assert b.order_count == 1 and b.find(7) == (S, 150, 3)


def test_batch_rejects_do_not_stop_the_batch():
    s = L.Session(3)
    s.add_book(1, 0, 100, 1, 8)
    out = s.apply(events([
        (1, 0, 50, 5, 1, L.Kind.NEW, B, L.TIF.GTC, 0),
        (2, 0, 50, 5, 2, L.Kind.NEW, B, L.TIF.GTC, 0),     # no book for 2
        (3, 0, 50, 5, 9, L.Kind.NEW, B, L.TIF.GTC, 0),     # beyond max_instrument
        (4, 0, 50, 5, 1, 9, B, L.TIF.GTC, 0),              # unknown kind
        (5, 0, 50, 5, 1, L.Kind.NEW, B, 7, 0),             # unknown tif
        (6, 0, 51, 2, 1, L.Kind.NEW, S, L.TIF.GTC, 0),
    ]), bbo=True)
    assert out.results["status"].tolist() == [0, L.Status.EINSTRUMENT, L.Status.EINSTRUMENT,
                                              L.Status.EKIND, L.Status.EKIND, 0]
    assert out.bbo["changed"].tolist() == [1, 0, 0, 0, 0, 1]
    assert out.bbo[1]["instrument"] == 2 and out.bbo[1]["bid_price"] == 0
    assert tuple(out.bbo[5][["bid_price", "bid_qty", "ask_price", "ask_qty"]]) == (50, 5, 51, 2)


# ---- execution buffer refills ---------------------------------------------------

@pytest.mark.parametrize("prefetch", [True, False])
def test_result_does_not_depend_on_prefetching(prefetch):
    flow = generate_flow(4000, n_instruments=3, seed=6, resting=200)
    ref = flow.session().apply(flow.events, bbo=True)
    s = flow.session()
    s.set_prefetch(prefetch)
    got = s.apply(flow.events, bbo=True)
    np.testing.assert_array_equal(got.results, ref.results)
    np.testing.assert_array_equal(got.execs, ref.execs)
    np.testing.assert_array_equal(got.bbo, ref.bbo)


def _flow_with_halts():
    """A flow over three books in which book 1 is halted for a while and book 2 twice (its
    orders park, IOCs are cancelled, and the parked orders rest at the resumption, removing
    what they cross with a desync each)."""
    flow = generate_flow(4000, n_instruments=3, seed=11, resting=200)
    ev = flow.events
    marks = {600: (1, 1), 1700: (1, 0), 900: (2, 1), 1300: (2, 0), 2500: (2, 1), 3900: (2, 0)}
    parts, prev = [], 0
    for at in sorted(marks):
        inst, qty = marks[at]
        state = np.zeros(1, ev.dtype)
        state[["instrument", "kind", "qty"]] = (inst, L.Kind.STATE, qty)
        parts += [ev[prev:at], state]
        prev = at
    flow.events = np.concatenate(parts + [ev[prev:]])
    return flow


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("bbo", ["none", "every", "changes"])
@pytest.mark.parametrize("depth", [0, 3])
@pytest.mark.parametrize("timing", [0, 1, 7])
def test_result_does_not_depend_on_the_outputs_asked_for(prefetch, bbo, depth, timing):
    """The core runs one copy of its batch loop per combination of prefetching, bbo rows and
    depth rows (lob.c, apply_loop), with timing in each: every combination, on a flow with
    halted books, gives the same results, executions, desyncs, bbo rows and books."""
    flow = _flow_with_halts()
    ref_s = flow.session()
    ref = ref_s.apply(flow.events, bbo=True)
    ref_ch = flow.session().apply(flow.events, bbo=True, bbo_changes=True)
    assert len(ref.desyncs) > 0 and (ref.results["status"] == 0).sum() > 3000
    s = flow.session()
    s.set_prefetch(prefetch)
    if timing:
        s.set_timing(True, every=timing)
    got = s.apply(flow.events, bbo=bbo != "none", bbo_changes=bbo == "changes", depth_levels=depth)
    np.testing.assert_array_equal(got.results, ref.results)
    np.testing.assert_array_equal(got.execs, ref.execs)
    np.testing.assert_array_equal(got.desyncs, ref.desyncs)
    if bbo == "every":
        np.testing.assert_array_equal(got.bbo, ref.bbo)
    elif bbo == "changes":
        np.testing.assert_array_equal(got.bbo, ref_ch.bbo)
        np.testing.assert_array_equal(got.bbo_event, ref_ch.bbo_event)
    if depth:
        assert len(got.depth["event"]) > 0
    if timing:
        assert s.latency()["ALL"]["count"] == -(-len(flow.events) // timing)
    for i in s.instruments():
        s.book(i).validate()
        for side in (B, S):
            for a, b in zip(s.book(i).orders(side), ref_s.book(i).orders(side)):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("modes", [("every", "none", "every", "changes", "none", "changes"),
                                   ("changes", "none", "none", "every", "every", "none")])
def test_bbo_rows_do_not_depend_on_earlier_calls_without_them(modes):
    """Each book keeps the top the bbo rows last saw, so that an event reads its book's top
    once (lob.c, lob_book.top): calls without bbo rows in between (the books change unseen),
    on a flow with halted books, leave every later bbo row and its changed flag as one call
    with bbo rows for everything gives them; validate() checks the kept top of every book."""
    flow = _flow_with_halts()
    ref = flow.session().apply(flow.events, bbo=True)
    ref_ch = flow.session().apply(flow.events, bbo=True, bbo_changes=True)
    s = flow.session()
    cuts = np.linspace(0, len(flow.events), len(modes) + 1).astype(int)
    for mode, lo, hi in zip(modes, cuts[:-1], cuts[1:]):
        got = s.apply(flow.events[lo:hi], bbo=mode != "none", bbo_changes=mode == "changes")
        np.testing.assert_array_equal(got.results, ref.results[lo:hi])
        if mode == "every":
            np.testing.assert_array_equal(got.bbo, ref.bbo[lo:hi])
        elif mode == "changes":
            keep = (ref_ch.bbo_event >= lo) & (ref_ch.bbo_event < hi)
            np.testing.assert_array_equal(got.bbo, ref_ch.bbo[keep])
            np.testing.assert_array_equal(got.bbo_event, ref_ch.bbo_event[keep] - lo)
        for i in s.instruments():
            s.book(i).validate()


@pytest.mark.parametrize("every", [1, 3, 16])
def test_timing_every_nth_event_when_batches_stop_for_room(every):
    """An event the core stops before (no room for its executions) keeps its turn to be
    timed: with the smallest buffers, which stop the batch again and again, the same events
    are timed as in one call."""
    flow = generate_flow(3000, n_instruments=3, seed=9, resting=100)
    ev = flow.events
    timed = np.zeros(len(ev), bool)
    timed[::every] = True
    s = flow.session()
    s.set_timing(True, every=every)
    out = s.apply(ev, exec_capacity=1)
    assert len(out.execs) > 100
    for k in L.Kind:
        assert s.histogram(k).sum() == ((ev["kind"] == k) & timed).sum()
    assert s.latency()["ALL"]["count"] == -(-len(ev) // every)


@pytest.mark.parametrize("cap", [1, 2, 3, 17, 1000])
def test_result_does_not_depend_on_exec_capacity(cap):
    flow = generate_flow(4000, n_instruments=3, seed=5, resting=200)
    ref = flow.session().apply(flow.events, bbo=True)
    got = flow.session().apply(flow.events, bbo=True, exec_capacity=cap)
    assert len(ref.execs) > 100
    np.testing.assert_array_equal(got.results, ref.results)
    np.testing.assert_array_equal(got.execs, ref.execs)
    np.testing.assert_array_equal(got.bbo, ref.bbo)


def test_default_scratch_is_capped_and_drained(monkeypatch):
    """The session's own execution/desync buffers hold at most SCRATCH_ROWS rows; a batch
    with more executions is drained and resumed with the same result."""
    import lobreplay.core.book as book
    flow = generate_flow(4000, n_instruments=3, seed=5, resting=200)
    ref = flow.session().apply(flow.events, bbo=True, exec_capacity=10**6)
    monkeypatch.setattr(book, "SCRATCH_ROWS", 64)
    s = flow.session()
    s._scratch, s._scratch_d = s._scratch[:16], s._scratch_d[:16]  # as if smaller than the cap
    got = s.apply(flow.events, bbo=True)
    assert len(ref.execs) > 5 * 64 and len(s._scratch) == 64
    np.testing.assert_array_equal(got.results, ref.results)
    np.testing.assert_array_equal(got.execs, ref.execs)
    np.testing.assert_array_equal(got.bbo, ref.bbo)


def test_one_event_larger_than_the_exec_buffer():
    s = L.Session(0)
    s.add_book(0, 0, 1000, 1, 256)
    rows = [(i, 0, 500 + i % 7, 1, 0, L.Kind.NEW, S, L.TIF.GTC, 0) for i in range(1, 201)]
    rows.append((999, 0, 0, 150, 0, L.Kind.NEW, B, L.TIF.MARKET, 0))
    out = s.apply(events(rows), exec_capacity=4)
    assert out.results[-1]["filled"] == 150 and out.results[-1]["n_exec"] == 150
    assert len(out.execs) == 150 and (out.execs["event_index"] == 200).all()
    assert np.all(np.diff(out.execs["price"]) >= 0)  # best price first
    s.book(0).validate()


# ---- FEED orders through the interactive API (issue 26, item 7) ----------------------

FEED = L.Flag.FEED
DESYNC_COLS = ["order_id", "found_id", "expected_qty", "found_qty", "expected_price", "found_price",
               "event_index", "instrument", "cause"]


def test_orderbook_feed_order_reports_the_stale_orders_it_meets_as_a_batch_does():
    """A FEED NEW that crosses went into an endless doubling of the execution buffer
    (MemoryError): the one-event path passed no desync array. Now it does what Session.apply
    does: the asks it meets are stale and leave, one CROSSED desync each, in Fill.desyncs."""
    rows = [(1, 0, 12, 10, 0, L.Kind.NEW, S, 0, 0), (2, 0, 13, 1, 0, L.Kind.NEW, S, 0, 0),
            (4, 0, 16, 1, 0, L.Kind.NEW, S, 0, 0)]
    b = L.OrderBook(1, 1000, 1, 64)
    for r in rows:
        b.new(r[0], r[6], r[2], r[3])
    f = b.new(3, B, 15, 5, flags=FEED)
    s = L.Session(0)
    s.add_book(0, 1, 1000, 1, 64)
    want = s.apply(events(rows + [(3, 0, 15, 5, 0, L.Kind.NEW, B, 0, FEED)]))
    assert (f.filled, f.resting, len(f.execs)) == (0, 5, 0)
    assert f.desyncs.dtype == L.DESYNC_DTYPE and len(f.desyncs) == 2
    assert f.desyncs[DESYNC_COLS].tolist() == [(1, 3, 5, 10, 15, 12, 0, 0, L.Cause.CROSSED),
                                               (2, 3, 5, 1, 15, 13, 0, 0, L.Cause.CROSSED)]
    same = [c for c in DESYNC_COLS if c != "event_index"]  # (0 here: the one event; 3 in the batch)
    assert f.desyncs[same].tolist() == want.desyncs[same].tolist()
    assert b.depth(B) == s.book(0).depth(B) == [(15, 5, 1)] and b.depth(S) == [(16, 1, 1)]
    # a FEED REPLACE likewise; an event that meets nothing has no desyncs
    f = b.replace(3, 9, 17, 2, flags=FEED)
    assert f.desyncs[DESYNC_COLS].tolist() == [(4, 9, 2, 1, 17, 16, 0, 0, L.Cause.CROSSED)]
    assert (f.resting, b.best_bid(), b.best_ask()) == (2, (17, 2, 1), None)
    assert len(b.new(10, S, 20, 1).desyncs) == 0 and len(b.new(11, B, 5, 1, flags=FEED).desyncs) == 0
    b.validate()


def test_orderbook_feed_order_meeting_more_stale_orders_than_the_first_buffers():
    b = L.OrderBook(0, 1000, 1, 4096)
    for i in range(1, 2001):
        b.new(i, S, 500 + i % 50, 1 + i % 3)
    f = b.new(9999, B, 1000, 7, flags=FEED)  # every ask is stale
    assert len(f.desyncs) == 2000 and (f.desyncs["cause"] == L.Cause.CROSSED).all()
    assert (f.desyncs["found_id"] == 9999).all() and np.all(np.diff(f.desyncs["found_price"]) >= 0)
    assert b.order_count == 1 and b.best_bid() == (1000, 7, 1)
    b.validate()


def test_orderbook_one_event_never_grows_its_outputs_without_bound(monkeypatch):
    """If the core kept saying EEXECFULL, apply_one would double its buffers until memory
    ran out: it gives them room for the live orders + 3 rows (lob.h: always enough for one
    event) once, and then raises a LobError naming EEXECFULL."""
    real = _coreapi.lib
    calls = []

    class AlwaysFull:
        def __getattr__(self, name):
            return getattr(real, name)

        def lob_session_apply(self, *args):
            calls.append((args[3].exec_cap, args[3].desync_cap))
            return real.LOB_EEXECFULL

    b = L.OrderBook(0, 1000, 1, 4096)
    for i in range(1, 201):
        b.new(i, S, 500 + i % 9, 1)
    monkeypatch.setattr(_coreapi, "lib", AlwaysFull())
    with pytest.raises(L.LobError, match=r"EEXECFULL") as e:
        b.new(9999, B, 1000, 7, flags=FEED)
    assert e.value.status == L.Status.EEXECFULL and "203 rows" in str(e.value)
    assert calls == [(1024, 64), (1024, 203)]  # grown once (the desync array, to 200 + 3 rows), then the error
    monkeypatch.undo()
    assert b.new(9999, B, 1000, 7, flags=FEED).resting == 7 and b.order_count == 1


# ---- structure: bitmap words, big bands, hash collisions ---------------------------

def test_best_price_search_across_a_wide_band():
    n = 3_000_000  # 46,875 bitmap words, 733 summary words
    b = L.OrderBook(0, n - 1, 1, 4096)
    rng = random.Random(7)
    bids = sorted(rng.sample(range(1, n // 2), 300))  # the band's two ends are added below
    asks = sorted(rng.sample(range(n // 2, n - 1), 300))
    for i, p in enumerate(bids + asks):
        b.new(i + 1, B if p < n // 2 else S, p, 1)
    b.new(10_000, B, 0, 1)
    b.new(10_001, S, n - 1, 1)
    bids, asks = [0] + bids, asks + [n - 1]
    assert b.depth(B, 1000) == [(p, 1, 1) for p in reversed(bids)]
    assert b.depth(S, 1000) == [(p, 1, 1) for p in asks]
    # take the best away one level at a time from both sides; the next best is found each time
    while bids or asks:
        if asks:
            assert b.best_ask() == (asks[0], 1, 1)
            b.new(20_000, B, asks.pop(0), 1, "IOC")
        if bids:
            assert b.best_bid() == (bids[-1], 1, 1)
            b.new(20_001, S, bids.pop(), 1, "IOC")
    assert b.order_count == 0 and b.best_bid() is None and b.best_ask() is None
    b.validate()


def _home(order_id, bits):
    return ((order_id * 0x9E3779B97F4A7C15) % 2**64) >> (64 - bits)


def test_index_backward_shift_with_colliding_ids_and_wraparound():
    # capacity 64 -> 128 slots (7 bits). Find ids whose home is the last two slots so
    # their probe runs wrap around the end of the table.
    ids = [i for i in range(1, 400_000) if _home(i, 7) in (126, 127)][:60]
    assert len(ids) == 60
    rng = random.Random(3)
    for trial in range(20):
        b = L.OrderBook(0, 100, 1, 64)
        live = {}
        for i in ids:
            b.new(i, B, rng.randrange(50), 1 + rng.randrange(9))
            live[i] = True
        order = ids[:]
        rng.shuffle(order)
        for k, i in enumerate(order):
            if k % 3 == 2:  # put some back to mix inserts into the wrapped runs
                b.new(i + 10_000_000, S, 60 + rng.randrange(40), 1)
                live[i + 10_000_000] = True
            b.cancel(i)
            del live[i]
            b.validate()
            for j in live:
                assert b.find(j) is not None
            assert b.find(i) is None


# ---- arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("args", [(0, 100, 0, 10), (0, 100, 3, 10), (100, 0, 1, 10), (0, 100, 1, 0),
                                  (0, 100, -1, 10), (0, 2**40, 1, 10), (0, 100, 1, 2**31)])
def test_bad_book_arguments(args):
    s = L.Session(1)
    with pytest.raises(L.LobError) as info:
        s.add_book(1, *args)
    assert info.value.status == L.Status.EARG
    assert s.instruments() == []


def test_session_arguments():
    s = L.Session(2)
    s.add_book(2, 0, 10, 1, 4)
    with pytest.raises(L.LobError):
        s.add_book(2, 0, 10, 1, 4)
    with pytest.raises(L.LobError):
        s.add_book(3, 0, 10, 1, 4)
    with pytest.raises(L.UnknownInstrumentError):
        s.book(1)
    with pytest.raises(L.LobError):
        L.Session(2**24 + 1)


def test_arrays_are_checked_before_they_reach_c():
    s = L.Session(0)
    s.add_book(0, 0, 10, 1, 4)
    ev = np.zeros(4, L.EVENT_DTYPE)
    with pytest.raises(TypeError, match="events: expected dtype"):
        s.apply(np.zeros(4, np.int64))
    with pytest.raises(TypeError, match="numpy array"):
        s.apply([1, 2, 3])
    with pytest.raises(ValueError, match="C-contiguous"):
        s.apply(np.zeros(8, L.EVENT_DTYPE)[::2])
    with pytest.raises(ValueError, match="1-D"):
        s.apply(np.zeros((2, 2), L.EVENT_DTYPE))
    ro = np.zeros(4, L.RESULT_DTYPE)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        s.apply(ev, results=ro)
    with pytest.raises(ValueError, match="at least 4"):
        s.apply(ev, results=np.zeros(3, L.RESULT_DTYPE))
    ev.flags.writeable = False  # read-only input is fine
    assert (s.apply(ev).results["status"] == L.Status.EKIND).all()  # kind 0


def test_views_keep_their_session_alive():
    s = L.Session(0)
    s.add_book(0, 0, 10, 1, 4)
    v = s.book(0)
    s.apply(events([(1, 0, 5, 3, 0, L.Kind.NEW, B, 0, 0)]))
    del s
    gc.collect()
    assert v.best_bid() == (5, 3, 1)


# ---- allocations, latency, clock ----------------------------------------------------------

def test_no_allocation_while_applying():
    flow = generate_flow(3000, n_instruments=2, seed=2, resting=100)
    s = flow.session()
    s.set_timing(True)
    before = _coreapi.alloc_count()
    stats = _coreapi.alloc_stats()
    s.apply(flow.events, bbo=True)
    assert _coreapi.alloc_count() == before and _coreapi.alloc_stats() == stats
    L.Session(1).add_book(0, 0, 10, 1, 4)  # creation does allocate, and is counted
    assert _coreapi.alloc_count() > before


def test_allocations_and_frees_are_counted_in_calls_and_bytes():
    gc.collect()
    a = _coreapi.alloc_stats()
    s = L.Session(3)
    s.add_book(1, 0, 1000, 1, 100)
    s.set_timing(True)
    b = _coreapi.alloc_stats()
    # session + its book pointers + its histograms; the first block of its arena (256 KiB),
    # which holds the book, its levels, 2 bitmaps, orders, index and participants; the
    # book's coarse histograms
    assert b["allocs"] - a["allocs"] == 3 + 1 + 1
    assert b["bytes"] - a["bytes"] >= 2**18 + 6 * 32768 * 8
    assert b["frees"] == a["frees"]
    del s
    gc.collect()
    c = _coreapi.alloc_stats()
    assert c["frees"] - b["frees"] == b["allocs"] - a["allocs"]
    assert c["bytes_freed"] - b["bytes_freed"] == b["bytes"] - a["bytes"]


def test_books_of_a_session_share_its_arena_block_after_block():
    """A session's books come from its arena (csrc/core/lob.c): blocks of 256 KiB, 512 KiB ... and a
    book larger than the block in hand gets a block of its own. Books spread that way, each
    given the same events, end as a book alone in its session does, and validate; the
    session's blocks are all freed with it."""
    flow = generate_flow(20000, n_instruments=1, seed=7, resting=300)
    spec = flow.books[0]
    caps = [spec.capacity] * 3 + [1 << 20] + [spec.capacity] * 40 + [70_000, spec.capacity]
    gc.collect()
    a = _coreapi.alloc_stats()
    s = L.Session(len(caps))
    for i, cap in enumerate(caps):
        s.add_book(i, spec.band_low, spec.band_high, spec.tick, cap)
    assert _coreapi.alloc_stats()["allocs"] - a["allocs"] >= 3 + 3  # the session's 3, and 3 blocks or more
    ev = flow.events.copy()
    for i in range(len(caps)):
        ev["instrument"] = i
        s.apply(ev)
    alone = flow.session()
    alone.apply(flow.events)
    want = [alone.book(spec.instrument).orders(side) for side in (L.Side.BUY, L.Side.SELL)]
    assert len(want[0][0]) + len(want[1][0]) > 100
    for i in range(len(caps)):
        s.book(i).validate()
        got = [s.book(i).orders(side) for side in (L.Side.BUY, L.Side.SELL)]
        for g, w in zip(got, want):
            assert all((x == y).all() for x, y in zip(g, w)), f"book {i}"
    b = _coreapi.alloc_stats()
    del s, alone
    gc.collect()
    c = _coreapi.alloc_stats()
    assert c["frees"] - b["frees"] == b["allocs"] - a["allocs"]
    assert c["bytes_freed"] - b["bytes_freed"] == b["bytes"] - a["bytes"]


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="resident memory read from /proc")
def test_small_sessions_stay_small():
    """The arena's first blocks are heap blocks (csrc/core/lob.c): a session of one small book
    does not take a 2 MiB huge page. With 2 MiB first blocks, 200 such sessions were 418 MiB
    resident on a machine whose transparent huge pages are on; now about 10."""
    def resident() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    before = resident()
    keep = []
    for _ in range(200):
        s = L.Session(1)
        s.add_book(0, 0, 1000, 1, 100)
        s.apply(events([(1, 0, 5, 3, 0, L.Kind.NEW, B, 0, 0)]))
        keep.append(s)
    assert resident() - before < 64 * 2**20


def test_bbo_changes_are_the_changed_rows_of_the_per_event_output():
    """bbo_changes (lob_outputs.bbo_event): the core writes a top-of-book row only for an
    event that changes its book's top; the rows and their events are exactly the per-event
    output's changed rows, also when the core stops for room and apply resumes."""
    flow = generate_flow(20000, n_instruments=4, seed=3, resting=200)
    full = flow.session().apply(flow.events, bbo=True)
    ch = np.flatnonzero(full.bbo["changed"])
    assert 0 < len(ch) < len(flow.events)
    for cap in (None, 3):  # 3 rows of executions: many stops and resumptions
        got = flow.session().apply(flow.events, bbo=True, bbo_changes=True, exec_capacity=cap)
        assert got.bbo_event.dtype == np.uint32 and (got.bbo_event == ch).all()
        assert got.bbo.tobytes() == full.bbo[ch].tobytes()
    mine_rows, mine_events = np.empty(len(flow.events), L.BBO_DTYPE), np.empty(len(flow.events), np.uint32)
    got = flow.session().apply(flow.events, bbo=mine_rows, bbo_changes=mine_events)
    assert got.bbo.base is mine_rows and (got.bbo_event == ch).all()


def test_histogram_buckets():
    lows = _coreapi.bucket_lows()
    assert [_coreapi.hist_index(v) for v in range(2048)] == list(range(2048))
    used = lows[: _coreapi.hist_index(2**40 - 1) + 1].astype(np.float64)
    assert np.all(np.diff(used) > 0)
    rng = random.Random(1)
    for _ in range(20000):
        v = int(2 ** rng.uniform(0, 39.9))
        i = _coreapi.hist_index(v)
        assert lows[i] <= v < lows[i + 1]
        assert (int(lows[i + 1]) - int(lows[i])) <= max(1, int(lows[i]) >> 10)  # 3 significant figures
    assert _coreapi.hist_index(2**50) == _coreapi.hist_index(2**40 - 1)  # clamped
    # the table the core fills in one call is the bucket-by-bucket one
    assert lows.tolist() == [_coreapi.lib.lob_hist_lowest(i) for i in range(_coreapi.HIST_BUCKETS)]


def test_timing_counts_every_event_by_kind():
    flow = generate_flow(2000, n_instruments=2, seed=4, resting=100)
    s = flow.session()
    assert sum(s.histogram(k).sum() for k in range(5)) == 0
    s.set_timing(True)
    s.apply(flow.events)
    for k in L.Kind:
        assert s.histogram(k).sum() == (flow.events["kind"] == k).sum()
    lat = s.latency()
    assert lat["ALL"]["count"] == 2000
    assert 0 < lat["ALL"]["p50"] <= lat["ALL"]["p99"] <= lat["ALL"]["max"]
    s.reset_histograms()
    assert s.histogram(L.Kind.NEW).sum() == 0
    s.set_timing(False)
    s.apply(flow.events[:10])
    assert s.histogram(L.Kind.NEW).sum() == 0


@pytest.mark.parametrize("every", [2, 16, 1000])
def test_timing_every_nth_event_across_calls(every):
    """set_timing(every=N): the 1st, (N+1)th, ... event of the session is timed, however the
    events are cut into calls (the count runs on across them), per kind in the session's
    histograms and per book in the coarse ones."""
    flow = generate_flow(3000, n_instruments=3, seed=9, resting=100)
    ev = flow.events
    timed = np.zeros(len(ev), bool)
    timed[::every] = True
    cuts = [0, 1, 7, 500, 501, 1999, len(ev)]
    s = flow.session()
    s.set_timing(True, every=every)
    for lo, hi in zip(cuts, cuts[1:]):
        s.apply(ev[lo:hi])
    for k in L.Kind:
        assert s.histogram(k).sum() == ((ev["kind"] == k) & timed).sum()
    got = s.book_histograms(s.instruments())
    for j, i in enumerate(s.instruments()):
        assert got[j].sum() == ((ev["instrument"] == i) & timed).sum()
    assert s.latency()["ALL"]["count"] == -(-len(ev) // every)


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_timing_every_must_be_a_whole_number(every):
    s = L.Session(4)
    with pytest.raises(L.BadEventError, match="every must be a whole number >= 1"):
        s.set_timing(True, every=every)


def test_book_histograms_in_one_call():
    """Session.book_histograms: every kind of many books in one core call, the same counts as
    book_histogram one book and kind at a time; zeros before timing; a missing book named."""
    flow = generate_flow(3000, n_instruments=3, seed=6, resting=100)
    s = flow.session()
    books = s.instruments()
    assert len(books) == 3 and not s.book_histograms(books).any()
    s.set_timing(True)
    s.apply(flow.events)
    got = s.book_histograms(books[::-1])
    assert got.shape == (3, _coreapi.HIST_KINDS, _coreapi.BOOK_HIST_BUCKETS)
    for j, i in enumerate(books[::-1]):
        for k in range(_coreapi.HIST_KINDS):
            assert (got[j, k] == s.book_histogram(i, k)).all()
        assert got[j].sum() == (flow.events["instrument"] == i).sum() > 0
    assert s.book_histograms([]).shape == (0, _coreapi.HIST_KINDS, _coreapi.BOOK_HIST_BUCKETS)
    missing = max(books) + 1
    with pytest.raises(L.UnknownInstrumentError, match=f"instrument {missing}"):
        s.book_histograms([books[0], missing])


@pytest.mark.parametrize("call, says", [
    (lambda b: b.new(1, L.Side.BUY, 10.5, 5), "price: expected an integer (feed units), got 10.5"),
    (lambda b: b.new(1, L.Side.BUY, None, 5), "price: expected an integer"),
    (lambda b: b.new(2**64, L.Side.BUY, 10, 5), "order_id: 18446744073709551616 is outside"),
    (lambda b: b.new(-1, L.Side.BUY, 10, 5), "order_id: -1 is outside"),
    (lambda b: b.new(1, L.Side.BUY, 10, 5, participant=1.5), "participant: expected an integer"),
    (lambda b: b.reduce(1, 2.0), "qty: expected an integer"),
    (lambda b: b.replace(1, 2, 2**70, 5), "price: 1180591620717411303424 is outside"),
    (lambda b: b.new(1, L.Side.BUY, 10, True), "qty: expected an integer, got True (bool)"),  # (cffi: 1)
    (lambda b: b.new(True, L.Side.BUY, 10, 5), "order_id: expected an integer, got True (bool)"),
])
def test_order_book_names_the_argument_that_is_not_an_integer(call, says):
    """The interactive OrderBook: a float price (prices are integers in feed units), an id out
    of range, ...: a BadEventError naming the argument (cffi's own TypeError / OverflowError
    named none; a bool it took as 0 or 1)."""
    b = L.OrderBook(0, 1000, 1, 10)
    with pytest.raises(L.BadEventError, match=re.escape(says)):
        call(b)
    assert b.order_count == 0
    assert b.new(1, L.Side.BUY, np.int64(10), np.int32(5)).resting == 5  # numpy integers are integers


def test_book_bytes_follow_the_books():
    """Session.book_bytes: the memory of the books (what the prefetch default and the ITCH
    replay's regrouping go by): none without books; every level and order slot counted."""
    s = L.Session(3)
    assert s.book_bytes == 0
    s.add_book(0, 0, 999, 1, 100)  # 1,000 levels, 100 orders
    one = s.book_bytes
    assert one >= 1000 * 16 + 100 * 32
    s.add_book(1, 0, 99_999, 1, 100)  # 100 times the levels
    assert s.book_bytes - one >= 100_000 * 16 > one


def test_percentiles_from_a_known_histogram():
    from lobreplay.reports.latency import percentile, summarize
    counts = np.zeros(_coreapi.HIST_BUCKETS, np.uint64)
    counts[10] = 90
    counts[100] = 9
    counts[_coreapi.hist_index(50_000)] = 1
    assert percentile(counts, 50) == 10 and percentile(counts, 90) == 10
    assert percentile(counts, 99) == 100
    assert summarize(counts)["max"] == _coreapi.bucket_lows()[_coreapi.hist_index(50_000)]
    assert 49_900 < summarize(counts)["max"] <= 50_000


def test_clock_probe_reports_cost_and_resolution():
    c = _coreapi.clock_probe(10_000)
    assert 0 < c["cost_ns"] < 100_000
    assert c["min_step_ns"] >= 1 and c["os_resolution_ns"] >= 1


def test_session_clock_is_calibrated_and_times_events():
    """Timing reads the invariant TSC where the CPU has one (x86-64 here), converted to ns
    by a factor measured against CLOCK_MONOTONIC over 2 ms: over a longer interval the
    converted ticks agree with CLOCK_MONOTONIC, and timed events land in the histograms."""
    import platform
    import time
    flow = generate_flow(2000, n_instruments=2, seed=3, resting=100)
    s = flow.session()
    s.set_timing(True)
    c = s.clock(10_000)
    if platform.machine() == "x86_64" and " nonstop_tsc" in open("/proc/cpuinfo").read():
        assert c["source"] == "TSC"
    else:
        assert c["source"] == "CLOCK_MONOTONIC" and c["ns_per_tick"] == 1.0
    assert 0 < c["cost_ns"] < 100_000 and c["min_step_ns"] >= 1
    errors = []
    for _ in range(3):  # a preemption between two readings can only widen one interval
        k0, t0 = s._s.clock_ticks(), time.monotonic_ns()
        time.sleep(0.05)
        k1, t1 = s._s.clock_ticks(), time.monotonic_ns()
        errors.append(abs((k1 - k0) * c["ns_per_tick"] / (t1 - t0) - 1))
    assert min(errors) < 0.005, errors
    out = s.apply(flow.events)
    hist = sum(s.histogram(k) for k in L.Kind)
    assert int(hist.sum()) == len(flow.events) == len(out.results)
    from lobreplay.reports.latency import summarize
    assert summarize(hist)["p50"] > 0


@pytest.mark.parametrize("cap", [None, 1])
def test_depth_rows_after_every_change_of_the_top_levels(cap):
    """depth_levels=N writes the N best levels after each event that changed them: the
    same rows as reading the book after every event, one at a time."""
    flow = generate_flow(3000, n_instruments=3, seed=9, resting=100)
    out = flow.session().apply(flow.events, depth_levels=3, exec_capacity=cap)
    s2 = flow.session()
    last, want = {}, []
    for i in range(len(flow.events)):
        s2.apply(flow.events[i:i + 1])
        inst = int(flow.events[i]["instrument"])
        p, q, c = s2.depth([inst], 3)
        key = (p.tobytes(), q.tobytes(), c.tobytes())
        if last.get(inst) != key:
            want.append((i, p[0], q[0], c[0]))
        last[inst] = key
    got = out.depth
    assert len(want) > 500 and got["event"].tolist() == [w[0] for w in want]
    np.testing.assert_array_equal(got["prices"], np.stack([w[1] for w in want]))
    np.testing.assert_array_equal(got["qtys"], np.stack([w[2] for w in want]))
    np.testing.assert_array_equal(got["counts"], np.stack([w[3] for w in want]))
    assert (got["prices"][:, 0, 0] >= got["prices"][:, 0, 1]).all()  # bids best first


def test_depth_rows_do_not_depend_on_the_row_buffer():
    """More top-level changes than depth rows in the buffer: the batch is drained and resumed."""
    flow = generate_flow(3000, n_instruments=3, seed=9, resting=100)
    whole = flow.session().apply(flow.events, depth_levels=3).depth
    s = flow.session()
    make = L.Session._depth_scratch
    s._depth_scratch = lambda n_levels, rows: make(s, n_levels, 5)
    small = s.apply(flow.events, depth_levels=3).depth
    assert len(whole["event"]) > 500
    for key in ("event", "prices", "qtys", "counts"):
        np.testing.assert_array_equal(small[key], whole[key])


def test_orders_of_a_side_best_first_in_queue_order_and_capped():
    from lobreplay.core._coreapi import ffi, lib
    b = L.OrderBook(100, 200, 1, 16)
    for oid, side, px, q in ((1, B, 150, 10), (2, S, 160, 5), (3, B, 151, 1), (4, B, 150, 7), (5, S, 170, 2)):
        b.new(oid, side, px, q)
    ids, qtys, prices = b.orders(B)
    assert list(zip(ids.tolist(), qtys.tolist(), prices.tolist())) == [(3, 1, 151), (1, 10, 150), (4, 7, 150)]
    assert b.orders("S")[0].tolist() == [2, 5]
    out = ffi.new("uint64_t[2]")
    assert lib.lob_book_orders(b._b.ptr, ord("B"), out, ffi.NULL, ffi.NULL, 2) == 3  # all counted
    assert list(out) == [3, 1]                                                      # cap written
    assert lib.lob_book_orders(b._b.ptr, ord("X"), out, ffi.NULL, ffi.NULL, 2) == 0
    b.cancel(3)
    b.cancel(1)
    assert b.orders(B)[0].tolist() == [4] and len(L.OrderBook(100, 200, 1, 4).orders(S)[0]) == 0


@pytest.mark.parametrize("what, says", [
    ("LEVEL_TOTAL", "total"), ("LEVEL_COUNT", "orders linked, count"), ("PREV_LINK", "prev link"),
    ("LEVEL_BIT", "bitmap says 0"), ("SUMMARY_BIT", "summary bit of word"), ("BEST_BID", "cached best bid"),
    ("INDEX_TAG", "index does not lead to it"), ("ORDER_QTY", "non-positive qty"),
    ("LIVE_COUNT", "live count"), ("FREE_LIST", "free list longer than"),
    ("PARTICIPANT", "has participant 7 in a book that has seen none"),
    ("BBO_TOP", "copy of the top .* is not the book's")])
def test_validate_finds_each_broken_invariant(what, says):
    """validate() is what every other test trusts: each invariant broken on purpose
    (lob_book_break) is reported, by name; the same book unbroken passes."""
    from lobreplay.core._coreapi import lib
    from lobreplay.errors import CorruptBookError
    b = L.OrderBook(100, 200, 1, 64)
    for oid, side, px, q in ((1, B, 150, 10), (2, B, 150, 5), (3, S, 160, 7), (4, B, 140, 1)):
        b.new(oid, side, px, q)
    b.validate()
    assert lib.lob_book_break(b._b.ptr, getattr(lib, f"LOB_BREAK_{what}")) == lib.LOB_OK
    with pytest.raises(CorruptBookError, match=says):
        b.validate()
    assert lib.lob_book_break(L.OrderBook(100, 200, 1, 4)._b.ptr, lib.LOB_BREAK_LEVEL_TOTAL) == lib.LOB_EARG


def test_interactive_arguments_are_checked_by_name():
    """Arguments the core would take the wrong way: a float side or time in force (66.9 was
    BUY, 1.9 IOC), a negative depth (numpy's 'negative dimensions'), and the depth of an
    instrument without a book (it read as an empty book)."""
    b = L.OrderBook(90, 110, 1, 64)
    b.new(1, "B", 100, 10)
    for call, says in ((lambda: b.new(2, 66.9, 100, 5), "side: expected"), (lambda: b.new(2, True, 100, 5), "side"),
                       (lambda: b.new(2, "S", 100, 5, tif=1.9), "tif: expected"),
                       (lambda: b.depth("B", -1), "n: expected a number of levels >= 0, got -1"),
                       (lambda: b.depth_arrays("B", 2.0), "n: expected")):
        with pytest.raises(L.BadEventError, match=says):
            call()
    assert b.depth("B", 0) == [] and b.depth("B", 3) == [(100, 10, 1)] and b.order_count == 1
    for call, says in ((lambda: b.level_orders(100.0), "price: expected an integer"),
                       (lambda: b.find("1"), "order_id: expected an integer"),
                       (lambda: b.find(-1), "order_id: -1 is outside"),
                       (lambda: b.participant(2**64), "order_id: 18446744073709551616 is outside")):
        with pytest.raises(L.BadEventError, match=says):
            call()
    assert b.level_orders(100) == [(1, 10)] and b.find(1)[1:] == (100, 10)
    for flags in (-1, 2**40, "x", 1.0):
        with pytest.raises(L.BadEventError, match="flags: "):
            b.new(3, "S", 105, 1, flags=flags)
    assert b.find(3) is None
    for d in (-1, 1.5):
        with pytest.raises(L.BadEventError, match=f"depth_levels: expected a number of levels >= 0, got {d}"):
            b.session.apply(np.zeros(0, L.EVENT_DTYPE), depth_levels=d)
    s = L.Session(10)
    s.add_book(4, 90, 110)
    p, q, c = s.depth([4, 4], 2)
    assert p.shape == (2, 2, 2) and not p.any()
    for inst in ([4, 5], [99], [-1], [4.0]):
        with pytest.raises(L.UnknownInstrumentError):
            s.depth(inst, 2)
    with pytest.raises(L.BadEventError, match="n: expected"):
        s.depth([4], -3)
    assert (s.histogram("new") == s.histogram(L.Kind.NEW)).all()
    with pytest.raises(L.BadEventError, match="kind: expected one of NEW, CANCEL"):
        s.histogram("NOPE")


def test_replay_configs_take_names_as_a_list_or_comma_separated():
    """symbols="PT" was the symbols P and T; a report name not known, a bare KeyError."""
    from lobreplay.itch.replay import ReplayConfig
    from lobreplay.l2.replay import L2ReplayConfig

    for cfg in (ReplayConfig, L2ReplayConfig):
        assert cfg(symbols="AAPL, MSFT").symbols == ["AAPL", "MSFT"] == cfg(symbols=("AAPL", "MSFT")).symbols
        assert cfg().symbols is None and cfg(reports="bbo").reports == ("bbo",) and cfg(reports=()).reports == ()
        with pytest.raises(L.InputError, match="reports: unknown nope; choose from"):
            cfg(reports=("bbo", "nope"))
        with pytest.raises(L.InputError, match="symbols: expected comma-separated names"):
            cfg(symbols=" , ")
        with pytest.raises(L.InputError, match="symbols: expected names"):
            cfg(symbols=[1, 2])
    for bad in (-1, 1.5, True):
        with pytest.raises(L.InputError, match=f"depth_levels: expected a whole number >= 0, got {bad!r}"):
            ReplayConfig(depth_levels=bad)
    with pytest.raises(L.InputError, match="depth_every_ns: expected a whole number >= 0, got -5"):
        ReplayConfig(depth_levels=2, depth_every_ns=-5)


def test_constructor_and_latency_arguments_are_checked_by_name():
    """OrderBook's sizes (cffi's OverflowError or 'an integer is required' named none), the
    participant's range (said 0..2^64-1), and percentiles/counts latency cannot mean."""
    from lobreplay.reports.latency import percentile, summarize
    for args, says in (((0, 100, 1, -5), "capacity: -5 is outside 1..4294967295"),
                       ((0, 100, 1, 2**40), "capacity: 1099511627776 is outside"),
                       ((0.0, 100, 1, 10), "band_low: expected an integer"),
                       ((0, 100, 0, 10), "tick: 0 is outside 1..")):
        with pytest.raises(L.BadEventError, match=says):
            L.OrderBook(*args)
    b = L.OrderBook(0, 100, 1, 10)
    with pytest.raises(L.BadEventError, match=r"participant: -1 is outside 0\.\.4294967295"):
        b.new(1, "B", 50, 10, participant=-1)
    h = np.zeros(200, np.uint64)
    h[10] = 3
    assert percentile(h, 100) == percentile(h, 50) and summarize(h)["count"] == 3
    for q in (150, -1):
        with pytest.raises(ValueError, match="percentiles: expected values in 0..100"):
            percentile(h, q)
    with pytest.raises(ValueError, match="counts: expected histogram bucket counts .* negative"):
        summarize(np.array([-1, 3]))
    with pytest.raises(ValueError, match="counts: expected histogram bucket counts"):
        summarize(np.array([0.5, 3.0]))


def test_session_apply_never_grows_its_outputs_without_bound(monkeypatch):
    """A core that keeps saying EEXECFULL with room for the book's live orders + 3 rows (a
    core bug: lob.h says that always suffices) is an error, not an endless doubling."""
    s = L.Session(0)
    s.add_book(0, 1, 100, 1, 8)
    calls = []

    def stuck(*a):
        calls.append(len(a[2]))
        return (_coreapi.CONSTANTS["LOB_EEXECFULL"], 0, 0, 0, 0, 0)

    monkeypatch.setattr(s._s, "apply", stuck)
    ev = np.zeros(1, L.EVENT_DTYPE)
    ev["kind"], ev["side"], ev["price"], ev["qty"] = L.Kind.NEW, ord("B"), 5, 1
    with pytest.raises(L.LobError, match="EEXECFULL"):
        s.apply(ev, exec_capacity=1)
    assert calls == [1, 2, 4]  # 1 and 2 rows: less than 0 live orders + 3; then 4: the error


# ---- apply in pieces (Session.apply_pieces: the ITCH replay's chunks, one draining with apply) ----

_PIECE_FLOW = generate_flow(3000, n_instruments=3, seed=12, resting=100)
_PIECE_WHOLE = _PIECE_FLOW.session().apply(_PIECE_FLOW.events, bbo=True, depth_levels=2)


@settings(max_examples=40, deadline=None)
@given(ends=st.lists(st.integers(0, len(_PIECE_FLOW.events)), max_size=12),
       cap=st.sampled_from([None, 1, 3, 50]), changes=st.booleans())
def test_pieces_give_the_rows_of_one_apply(ends, cap, changes):
    """apply_pieces with any cuts, reused per-event arrays of the longest piece and any
    execution buffer: the executions, desyncs, depth rows and bbo rows of one apply() of the
    whole array (event indices into it); at_cut sees every piece in order (empty ones too)
    with its results, the events before it applied and none after."""
    ev, whole = _PIECE_FLOW.events, _PIECE_WHOLE
    cuts = [(e, i) for i, e in enumerate(sorted(ends))]
    bounds = [0] + sorted(ends) + [len(ev)]
    longest = max(b - a for a, b in zip(bounds, bounds[1:]))
    s = _PIECE_FLOW.session()
    seen = []

    def at_cut(lo, hi, results, tag):
        assert len(results) == hi - lo
        np.testing.assert_array_equal(results, whole.results[lo:hi])
        if hi > lo:  # the book stands after event hi - 1: its top is the whole run's row there
            top = whole.bbo[hi - 1]
            assert s.book(int(top["instrument"])).best_bid() == (
                (int(top["bid_price"]), int(top["bid_qty"]), int(top["bid_count"])) if top["bid_count"] else None)
        seen.append((lo, hi, tag))

    res = np.empty(longest, L.RESULT_DTYPE)
    bbo = np.empty(longest, L.BBO_DTYPE)
    out = s.apply_pieces(ev, cuts, at_cut, results=res, bbo=bbo,
                         bbo_changes=np.empty(longest, np.uint32) if changes else None,
                         exec_capacity=cap, depth_levels=2)
    want, lo = [], 0
    for e, tag in cuts + ([(len(ev), None)] if not cuts or cuts[-1][0] < len(ev) else []):
        want.append((lo, e, tag))
        lo = e
    assert seen == want
    assert out.results is None
    assert out.execs.tobytes() == whole.execs.tobytes() and out.desyncs.tobytes() == whole.desyncs.tobytes()
    for k in ("event", "prices", "qtys", "counts"):
        np.testing.assert_array_equal(out.depth[k], whole.depth[k])
    if changes:
        ch = np.flatnonzero(whole.bbo["changed"])
        assert (out.bbo_event == ch).all() and out.bbo.tobytes() == whole.bbo[ch].tobytes()
    else:
        assert out.bbo_event is None and out.bbo.tobytes() == whole.bbo.tobytes()


def test_pieces_are_checked():
    """Cuts out of order or past the end, and per-event arrays shorter than a piece: one error
    naming them, before the core is called."""
    ev = _PIECE_FLOW.events
    s = _PIECE_FLOW.session()
    with pytest.raises(L.BadEventError, match=r"cuts: expected ends in order within 0\.\.3000, got 10 after 20"):
        s.apply_pieces(ev, [(20, None), (10, None)], results=np.empty(3000, L.RESULT_DTYPE))
    with pytest.raises(L.BadEventError, match=r"cuts: .* got 3001 after 0"):
        s.apply_pieces(ev, [(3001, None)], results=np.empty(3001, L.RESULT_DTYPE))
    with pytest.raises(L.BadEventError, match=r"results: 1000 rows, the longest piece has 2000"):
        s.apply_pieces(ev, [(1000, None)], results=np.empty(1000, L.RESULT_DTYPE))
    with pytest.raises(L.BadEventError, match=r"bbo_changes: 10 rows, the longest piece has 1500"):
        s.apply_pieces(ev, [(1500, None)], results=np.empty(1500, L.RESULT_DTYPE),
                       bbo=np.empty(1500, L.BBO_DTYPE), bbo_changes=np.empty(10, np.uint32))
    assert s.book(1).order_count == _PIECE_FLOW.session().book(1).order_count  # nothing applied
