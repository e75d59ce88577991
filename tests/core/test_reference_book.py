"""Hand-written unit tests of the reference book (tests/reference_book.py).

The reference is the oracle of the differential fuzz, so it gets its own
small, readable tests of every rule: FIFO priority, trades at the maker's
price, IOC/FOK/MARKET, REDUCE keeps priority, REPLACE loses priority and may
trade, every reject code and the order in which the checks run, the BBO and
its `changed` flag; and the feed replay rules (docs/core.md, "Feed replays"):
EXEC checked against price-time priority, FEED orders removing the stale
orders they meet, FEED REDUCE, every desync cause and its fields.  These tests
need no compiled core.
"""

import os
import sys

import pytest


import reference_book as rb  # noqa: E402
from reference_book import (  # noqa: E402
    BUY,
    CANCEL,
    CROSSED,
    EBAND,
    EDUP_ID,
    EFULL,
    EINSTRUMENT,
    EKIND,
    EPRICE,
    EQTY,
    EUNKNOWN_ID,
    EXEC,
    EXEC_PRICE,
    FEED,
    FILL_ORDER,
    FOK,
    GTC,
    IOC,
    MARKET,
    NEW,
    NOCHECK,
    OK,
    PRICE,
    QTY,
    REDUCE,
    NOTIONAL,
    REPLACE,
    SELL,
    STP_BOTH,
    STP_INCOMING,
    STP_RESTING,
    RefBook,
    RefSession,
)


def ev(kind, oid=0, price=0, qty=0, side=BUY, tif=GTC, new_id=0, instrument=0, flags=0):
    return (oid, new_id, price, qty, instrument, kind, side, tif, flags)


def new(oid, side, price, qty, tif=GTC, instrument=0, flags=0):
    return ev(NEW, oid, price, qty, side, tif, instrument=instrument, flags=flags)


def exe(oid, qty, price=0, flags=0):
    """EXEC: the feed says resting order oid traded qty (at price, with PRICE)."""
    return ev(EXEC, oid, price, qty, side=0, flags=flags)


def session(low=100, high=200, tick=10, capacity=100, max_instrument=0):
    s = RefSession(max_instrument)
    s.add_book(0, low, high, tick, capacity)
    return s


def run(s, *events):
    outs = [s.apply(e) for e in events]
    s.check()
    return outs


def status(out):
    return out[0]


# ---- resting, FIFO, maker price --------------------------------------------


def test_gtc_rests_and_bbo_reports_totals():
    s = session()
    (o1, o2, o3) = run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 7), new(3, SELL, 170, 4))
    assert o1[:4] == (OK, 0, 5, [])
    assert o2[:4] == (OK, 0, 7, [])
    assert o3[:4] == (OK, 0, 4, [])
    assert o3[4] == (150, 12, 170, 4, 2, 1, 1)
    b = s.book(0)
    assert b.best(BUY) == (150, 12, 2)
    assert b.best(SELL) == (170, 4, 1)
    assert b.level_orders(150) == [(1, 5), (2, 7)]
    assert b.order_count == 3


def test_fifo_within_a_level_and_trade_at_maker_price():
    s = session()
    run(s, new(1, SELL, 160, 3), new(2, SELL, 160, 4), new(3, SELL, 150, 2))
    # buy 7 at 170: best ask 150 first, then 160 in time order (1 before 2)
    (out,) = run(s, new(10, BUY, 170, 7))
    st, filled, resting, execs, bbo, desyncs = out
    assert (st, filled, resting, desyncs) == (OK, 7, 0, [])
    assert execs == [
        (3, 10, 150, 2, 0),  # maker price 150, not the taker's 170
        (1, 10, 160, 3, 0),
        (2, 10, 160, 2, 2),  # partial fill: maker keeps 2 and its place
    ]
    assert bbo == (0, 0, 160, 2, 0, 1, 1)
    assert s.book(0).level_orders(160) == [(2, 2)]


def test_sell_walks_bids_highest_first():
    s = session()
    run(s, new(1, BUY, 120, 1), new(2, BUY, 140, 1), new(3, BUY, 130, 1))
    (out,) = run(s, new(4, SELL, 130, 5))
    assert out[:3] == (OK, 2, 3)
    assert [e[2] for e in out[3]] == [140, 130]
    # remainder rests at 130, now the best ask; best bid is 120
    assert s.book(0).bbo() == (120, 1, 130, 3, 1, 1)


def test_gtc_remainder_rests_at_back_of_its_level():
    s = session()
    run(s, new(1, BUY, 150, 1), new(2, SELL, 160, 2))
    (out,) = run(s, new(3, BUY, 160, 5))
    assert out[:3] == (OK, 2, 3)
    run(s, new(4, BUY, 160, 1))
    assert s.book(0).level_orders(160) == [(3, 3), (4, 1)]
    assert s.book(0).find(3) == (BUY, 160, 3)


def test_non_crossing_limit_does_not_trade():
    s = session()
    run(s, new(1, SELL, 160, 2))
    (out,) = run(s, new(2, BUY, 150, 2))
    assert out[:4] == (OK, 0, 2, [])


def test_exact_fill_leaves_no_remainder_and_empties_level():
    s = session()
    run(s, new(1, SELL, 160, 2))
    (out,) = run(s, new(2, BUY, 160, 2))
    assert out[:4] == (OK, 2, 0, [(1, 2, 160, 2, 0)])
    assert out[4] == (0, 0, 0, 0, 0, 0, 1)
    assert s.book(0).order_count == 0


# ---- IOC / FOK / MARKET ------------------------------------------------------


def test_ioc_remainder_is_dropped():
    s = session()
    run(s, new(1, SELL, 160, 2))
    (out,) = run(s, new(2, BUY, 170, 5, IOC))
    assert out[:4] == (OK, 2, 0, [(1, 2, 160, 2, 0)])
    assert s.book(0).order_count == 0
    # IOC that crosses nothing: OK, nothing happens
    (out,) = run(s, new(3, BUY, 170, 5, IOC))
    assert out == (OK, 0, 0, [], (0, 0, 0, 0, 0, 0, 0), [])


def test_fok_fills_completely_or_is_killed():
    s = session()
    run(s, new(1, SELL, 160, 2), new(2, SELL, 170, 2), new(3, SELL, 180, 9))
    # only 4 at or below 170: killed, nothing changes
    (out,) = run(s, new(4, BUY, 170, 5, FOK))
    assert out == (OK, 0, 0, [], (0, 0, 160, 2, 0, 1, 0), [])
    assert s.book(0).order_count == 3
    # exactly enough
    (out,) = run(s, new(5, BUY, 170, 4, FOK))
    assert out[:3] == (OK, 4, 0)
    assert [(e[0], e[2], e[3]) for e in out[3]] == [(1, 160, 2), (2, 170, 2)]
    # FOK sell with the crossing quantity spread over bids
    run(s, new(6, BUY, 150, 3), new(7, BUY, 140, 3))
    (out,) = run(s, new(8, SELL, 140, 7, FOK))
    assert out[:4] == (OK, 0, 0, [])
    (out,) = run(s, new(9, SELL, 140, 6, FOK))
    assert out[:3] == (OK, 6, 0)


def test_market_ignores_price_and_drops_remainder():
    s = session()
    run(s, new(1, SELL, 200, 2), new(2, SELL, 190, 1))
    # price far outside the band and off the grid: ignored for MARKET
    (out,) = run(s, new(3, BUY, -12345, 5, MARKET))
    assert out[:3] == (OK, 3, 0)
    assert [(e[0], e[2]) for e in out[3]] == [(2, 190), (1, 200)]
    assert s.book(0).order_count == 0
    (out,) = run(s, new(4, SELL, 2**62, 1, MARKET))
    assert out[:4] == (OK, 0, 0, [])


def test_market_and_ioc_never_efull():
    s = session(capacity=1)
    run(s, new(1, BUY, 150, 1))
    (out,) = run(s, new(2, SELL, 0, 5, MARKET))
    assert out[:3] == (OK, 1, 0)
    run(s, new(3, BUY, 150, 1))
    (out,) = run(s, new(4, SELL, 150, 5, IOC))
    assert out[:3] == (OK, 1, 0)
    run(s, new(5, BUY, 150, 1))
    (out,) = run(s, new(6, SELL, 190, 5, FOK))
    assert out[:3] == (OK, 0, 0)


# ---- REDUCE / CANCEL / REPLACE ----------------------------------------------


def test_reduce_keeps_priority():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 5))
    (out,) = run(s, ev(REDUCE, 1, qty=3))
    assert out[:4] == (OK, 0, 2, [])
    assert out[4] == (150, 7, 0, 0, 2, 0, 1)
    assert s.book(0).level_orders(150) == [(1, 2), (2, 5)]
    (out,) = run(s, new(3, SELL, 150, 3))
    assert out[3] == [(1, 3, 150, 2, 0), (2, 3, 150, 1, 4)]


def test_reduce_to_zero_removes_order():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 1))
    (out,) = run(s, ev(REDUCE, 1, qty=5))
    assert out[:4] == (OK, 0, 0, [])
    assert s.book(0).find(1) is None
    assert s.book(0).level_orders(150) == [(2, 1)]
    # the id is free again
    (out,) = run(s, new(1, SELL, 160, 1))
    assert out[0] == OK


def test_cancel_removes_order_and_ignores_qty_price_side():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 6), new(3, BUY, 140, 1))
    (out,) = run(s, ev(CANCEL, 1, price=-7, qty=-5, side=0, tif=99))
    assert out == (OK, 0, 0, [], (150, 6, 0, 0, 1, 0, 1), [])
    (out,) = run(s, ev(CANCEL, 2))
    assert out[4] == (140, 1, 0, 0, 1, 0, 1)
    assert s.book(0).order_count == 1


def test_replace_loses_priority_even_at_same_price_and_qty():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 5))
    (out,) = run(s, ev(REPLACE, 1, new_id=7, price=150, qty=5))
    assert out[:4] == (OK, 0, 5, [])
    assert out[4][6] == 0  # same totals and counts: BBO unchanged
    assert s.book(0).level_orders(150) == [(2, 5), (7, 5)]
    assert s.book(0).find(1) is None
    # new_id == id is allowed and also goes to the back
    (out,) = run(s, ev(REPLACE, 2, new_id=2, price=150, qty=4))
    assert out[:4] == (OK, 0, 4, [])
    assert s.book(0).level_orders(150) == [(7, 5), (2, 4)]


def test_replace_keeps_side_ignores_event_side_and_can_trade():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, SELL, 170, 2), new(3, SELL, 180, 2))
    # side field says SELL and tif says IOC: both ignored; it is a GTC buy
    (out,) = run(s, ev(REPLACE, 1, new_id=9, price=170, qty=5, side=SELL, tif=IOC))
    st, filled, resting, execs, bbo, desyncs = out
    assert (st, filled, resting, desyncs) == (OK, 2, 3, [])
    assert execs == [(2, 9, 170, 2, 0)]  # taker is the new id
    assert s.book(0).find(9) == (BUY, 170, 3)
    assert bbo == (170, 3, 180, 2, 1, 1, 1)


def test_replace_fully_filled_does_not_rest():
    s = session()
    run(s, new(1, SELL, 190, 5), new(2, BUY, 160, 2))
    (out,) = run(s, ev(REPLACE, 1, new_id=1, price=150, qty=2))
    assert out[:4] == (OK, 2, 0, [(2, 1, 160, 2, 0)])
    assert s.book(0).order_count == 0


def test_replace_on_full_book_is_never_efull():
    s = session(capacity=2)
    run(s, new(1, BUY, 150, 5), new(2, BUY, 140, 5))
    (out,) = run(s, ev(REPLACE, 1, new_id=3, price=160, qty=1))
    assert out[:3] == (OK, 0, 1)
    assert s.book(0).order_count == 2


# ---- EFULL -------------------------------------------------------------------


def test_efull_only_when_a_remainder_would_rest():
    s = session(capacity=2)
    run(s, new(1, SELL, 160, 3), new(2, BUY, 140, 1))
    before = s.book(0).snapshot()
    (out,) = run(s, new(3, BUY, 150, 1))
    assert out == (EFULL, 0, 0, [], (140, 1, 160, 3, 1, 1, 0), [])
    # crossing 3 < 4: a remainder would rest -> EFULL, nothing traded
    (out,) = run(s, new(3, BUY, 160, 4))
    assert out[:4] == (EFULL, 0, 0, [])
    assert s.book(0).snapshot() == before
    # crossing 3 >= 3: fills completely, fine on a full book
    (out,) = run(s, new(3, BUY, 160, 3))
    assert out[:3] == (OK, 3, 0)
    # now there is room again
    (out,) = run(s, new(4, BUY, 150, 1))
    assert out[:3] == (OK, 0, 1)


# ---- rejects and their order -------------------------------------------------


def test_reject_codes():
    s = RefSession(3)
    s.add_book(0, 100, 200, 10, 10)
    s.add_book(2, 100, 200, 10, 10)
    run(s, new(1, BUY, 150, 5))
    cases = [
        (new(5, BUY, 150, 1, instrument=1), EINSTRUMENT),  # no book
        (new(5, BUY, 150, 1, instrument=4), EINSTRUMENT),  # > max_instrument
        (new(5, BUY, 150, 1, instrument=2**32 - 1), EINSTRUMENT),
        (ev(0, 5, 150, 1), EKIND),
        (ev(7, 5, 150, 1), EKIND),
        (ev(255, 5, 150, 1), EKIND),
        (new(5, ord("b"), 150, 1), EKIND),
        (new(5, 0, 150, 1), EKIND),
        (new(5, BUY, 150, 1, tif=4), EKIND),
        (new(5, BUY, 150, 0), EQTY),
        (new(5, BUY, 150, -3), EQTY),
        (ev(REDUCE, 1, qty=0), EQTY),
        (ev(REPLACE, 1, new_id=5, price=150, qty=-1), EQTY),
        (new(5, BUY, 90, 1), EBAND),
        (new(5, BUY, 210, 1), EBAND),
        (new(5, BUY, 155, 1), EPRICE),
        (ev(REPLACE, 1, new_id=5, price=99, qty=1), EBAND),
        (ev(REPLACE, 1, new_id=5, price=101, qty=1), EPRICE),
        (ev(CANCEL, 99), EUNKNOWN_ID),
        (ev(REDUCE, 99, qty=1), EUNKNOWN_ID),
        (ev(REPLACE, 99, new_id=5, price=150, qty=1), EUNKNOWN_ID),
        (new(1, SELL, 190, 1), EDUP_ID),
        (new(1, BUY, 150, 1, tif=IOC), EDUP_ID),
        (new(1, BUY, 0, 1, tif=MARKET), EDUP_ID),
        (ev(REDUCE, 1, qty=6), EQTY),
    ]
    for e, code in cases:
        before = s.snapshot()
        out = s.apply(e)
        assert out[0] == code, (e, out, code)
        assert out[1:4] == (0, 0, []) and out[5] == [], e
        assert out[4][6] == 0, e
        assert s.snapshot() == before, e
    # EINSTRUMENT reports an all-zero BBO; other rejects the current top
    assert s.apply(new(5, BUY, 150, 1, instrument=1))[4] == (0,) * 7
    assert s.apply(new(5, BUY, 155, 1))[4] == (150, 5, 0, 0, 1, 0, 0)


def test_replace_onto_live_id_is_dup():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 140, 5))
    (out,) = run(s, ev(REPLACE, 1, new_id=2, price=160, qty=1))
    assert out[:4] == (EDUP_ID, 0, 0, [])
    assert s.book(0).find(1) == (BUY, 150, 5)


def test_band_edges_are_valid_prices():
    s = session()
    (a, b) = run(s, new(1, BUY, 100, 1), new(2, SELL, 200, 1))
    assert a[0] == OK and b[0] == OK
    assert s.book(0).bbo() == (100, 1, 200, 1, 1, 1)


def test_negative_band_and_price_zero():
    s = RefSession(0)
    s.add_book(0, -30, 30, 15, 4)
    (a,) = run(s, new(1, BUY, 0, 2))
    assert a[4] == (0, 2, 0, 0, 1, 0, 1)  # bid at price 0 is not "empty"
    (b,) = run(s, new(2, BUY, -5, 1))
    assert b[0] == EPRICE
    (c,) = run(s, ev(CANCEL, 1))
    assert c[4] == (0, 0, 0, 0, 0, 0, 1)  # qty and count changed


@pytest.mark.parametrize(
    "event, code",
    [
        # kind is checked before anything else in the book
        (ev(9, 99, 7, -1, side=0, tif=9), EKIND),
        # NEW: side/tif before qty
        (ev(NEW, 99, 7, -1, side=0), EKIND),
        (ev(NEW, 99, 7, -1, tif=7), EKIND),
        # qty before price
        (ev(NEW, 99, 7, 0), EQTY),
        (ev(REPLACE, 99, 7, 0, new_id=1), EQTY),
        # band before tick; price before unknown id
        (ev(REPLACE, 99, 7, 1, new_id=1), EBAND),
        (ev(REPLACE, 99, 105, 1, new_id=1), EPRICE),
        # price before duplicate id
        (ev(NEW, 1, 7, 1), EBAND),
        (ev(NEW, 1, 105, 1), EPRICE),
        # unknown id before duplicate new_id
        (ev(REPLACE, 99, 150, 1, new_id=1), EUNKNOWN_ID),
        # REDUCE: qty <= 0 before unknown id; unknown before too-large
        (ev(REDUCE, 99, qty=0), EQTY),
        (ev(REDUCE, 99, qty=100), EUNKNOWN_ID),
        # MARKET skips the price checks
        (ev(NEW, 1, 7, 1, tif=MARKET), EDUP_ID),
        # duplicate id before FOK/EFULL decisions
        (ev(NEW, 1, 150, 1, tif=FOK), EDUP_ID),
    ],
)
def test_check_order(event, code):
    s = session(capacity=2)
    run(s, new(1, BUY, 150, 5), new(2, SELL, 190, 5))
    assert s.apply(event)[0] == code


def test_efull_after_dup_and_fok_kill_on_full_book():
    s = session(capacity=1)
    run(s, new(1, BUY, 150, 5))
    assert s.apply(new(1, BUY, 150, 1))[0] == EDUP_ID
    assert s.apply(new(2, BUY, 150, 1))[0] == EFULL
    # FOK on a full book that cannot fill: killed (OK), not EFULL
    assert s.apply(new(2, SELL, 150, 6, FOK))[:3] == (OK, 0, 0)
    assert s.book(0).find(1) == (BUY, 150, 5)


def test_books_are_independent_per_instrument():
    s = RefSession(1)
    s.add_book(0, 100, 200, 10, 10)
    s.add_book(1, 100, 200, 10, 10)
    run(s, new(1, BUY, 150, 5, instrument=0))
    (out,) = run(s, new(1, SELL, 150, 5, instrument=1))  # same id, other book
    assert out[:4] == (OK, 0, 5, [])
    assert s.book(0).bbo() == (150, 5, 0, 0, 1, 0)
    assert s.book(1).bbo() == (0, 0, 150, 5, 0, 1)


def test_exec_maker_remaining_tracks_partial_fills():
    s = session()
    run(s, new(1, SELL, 150, 10))
    outs = run(s, new(2, BUY, 150, 3, IOC), new(3, BUY, 150, 4, IOC), new(4, BUY, 150, 9, IOC))
    assert [o[3] for o in outs] == [
        [(1, 2, 150, 3, 7)],
        [(1, 3, 150, 4, 3)],
        [(1, 4, 150, 3, 0)],
    ]


def test_load_events_rebuilds_a_book():
    s = session()
    run(
        s,
        new(1, BUY, 150, 5),
        new(2, BUY, 150, 6),
        new(3, SELL, 170, 1),
        new(4, BUY, 120, 2),
        ev(REDUCE, 1, qty=2),
    )
    snap = s.book(0).snapshot()
    t = session()
    for oid, side, price, qty in rb.load_events(snap):
        assert t.apply(new(oid, side, price, qty))[:3] == (OK, 0, qty)
    assert t.book(0).snapshot() == snap


def test_check_detects_corruption():
    b = RefBook(100, 200, 10, 10)
    b.apply(NEW, 1, 0, 150, 5, BUY, GTC)
    b.apply(NEW, 2, 0, 160, 5, SELL, GTC)
    b.check()
    b.orders[1].price = 170
    with pytest.raises(rb.RefError):
        b.check()


def test_bad_book_parameters():
    with pytest.raises(ValueError):
        RefBook(100, 205, 10, 10)
    with pytest.raises(ValueError):
        RefBook(100, 200, 0, 10)
    with pytest.raises(ValueError):
        RefBook(100, 200, 10, 0)


# ---- feed replays: EXEC ------------------------------------------------------


def test_exec_of_the_front_order_matches_priority_without_desync():
    s = session()
    run(s, new(1, SELL, 160, 5), new(2, SELL, 160, 3), new(3, SELL, 170, 4))
    (a, b, c) = run(s, exe(1, 5), exe(2, 2), exe(2, 1, 160, PRICE))
    # the expected fill goes to the executions, taker 0, at the level's price
    assert a == (OK, 5, 0, [(1, 0, 160, 5, 0)], (0, 0, 160, 3, 0, 1, 1), [])
    assert b[:4] == (OK, 2, 1, [(2, 0, 160, 2, 1)]) and b[5] == []
    assert c[:4] == (OK, 1, 0, [(2, 0, 160, 1, 0)]) and c[5] == []
    assert s.book(0).bbo() == (0, 0, 170, 4, 0, 1)


def test_exec_partial_keeps_priority():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 5))
    (out,) = run(s, exe(1, 2))
    assert out[:4] == (OK, 2, 3, [(1, 0, 150, 2, 3)]) and out[5] == []
    assert s.book(0).level_orders(150) == [(1, 3), (2, 5)]
    # still the front: the next fills of 1 are consistent, then 2 is next
    (a, b) = run(s, exe(1, 3), exe(2, 5))
    assert a[5] == [] and b[5] == []
    assert s.book(0).order_count == 0


def test_exec_of_another_order_is_a_fill_order_desync_and_the_feed_wins():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 4), new(3, BUY, 140, 2))
    # 2 is behind 1 in the queue
    (out,) = run(s, exe(2, 3))
    st, filled, resting, execs, bbo, desyncs = out
    assert (st, filled, resting) == (OK, 3, 1)
    assert execs == [(1, 0, 150, 3, 2)]  # what priority gives: 3 of order 1
    # order_id, found_id, expected qty/price (the feed's qty, the order's price),
    # found qty (the order's size), found price (the front order's)
    assert desyncs == [(2, 1, 3, 4, 150, 150, FILL_ORDER)]
    assert s.book(0).level_orders(150) == [(1, 5), (2, 1)]  # the feed's fill applied
    # 3 is on a worse level
    (out,) = run(s, exe(3, 2))
    assert out[:4] == (OK, 2, 0, [(1, 0, 150, 2, 3)])
    assert out[5] == [(3, 1, 2, 2, 140, 150, FILL_ORDER)]
    assert s.book(0).find(3) is None and s.book(0).find(1) == (BUY, 150, 5)


def test_exec_over_the_order_size_is_a_qty_desync_and_removes_it():
    s = session()
    run(s, new(1, SELL, 160, 5), new(2, SELL, 170, 1))
    (out,) = run(s, exe(1, 8, 999))  # price is not read without PRICE, but echoed
    assert out == (OK, 5, 0, [(1, 0, 160, 5, 0)], (0, 0, 170, 1, 0, 1, 1),
                   [(1, 0, 8, 5, 999, 160, QTY)])
    assert s.book(0).find(1) is None


def test_exec_price_checked_only_with_the_price_flag():
    s = session()
    run(s, new(1, SELL, 160, 5))
    (a, b, c) = run(s, exe(1, 1, 170), exe(1, 1, 160, PRICE), exe(1, 1, 170, PRICE))
    assert a[5] == [] and b[5] == []
    assert c[:4] == (OK, 1, 2, [(1, 0, 160, 1, 2)])
    assert c[5] == [(1, 0, 1, 3, 170, 160, EXEC_PRICE)]
    # a feed price outside the band is not a reject: it is a desync
    (d,) = run(s, exe(1, 1, -(2**63), PRICE))
    assert d[0] == OK and d[5] == [(1, 0, 1, 2, -(2**63), 160, EXEC_PRICE)]


def test_exec_nocheck_skips_the_priority_and_price_checks():
    s = session()
    run(s, new(1, SELL, 160, 5), new(2, SELL, 160, 5))
    (out,) = run(s, exe(2, 2, flags=NOCHECK))
    assert out[:4] == (OK, 2, 3, []) and out[5] == []  # no expected fill, no desync
    assert s.book(0).level_orders(160) == [(1, 5), (2, 3)]
    # a cross prints at the cross price: no price check either
    (out,) = run(s, exe(2, 1, 150, NOCHECK | PRICE))
    assert out[:4] == (OK, 1, 2, []) and out[5] == []
    # the size check still runs
    (out,) = run(s, exe(2, 4, 150, NOCHECK | PRICE))
    assert out[:4] == (OK, 2, 0, [])
    assert out[5] == [(2, 0, 4, 2, 150, 160, QTY)]


def test_exec_desyncs_come_in_order_fill_order_price_qty():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 4))
    (out,) = run(s, exe(2, 9, 140, PRICE))
    assert out[:4] == (OK, 4, 0, [(1, 0, 150, 5, 0)])
    assert out[5] == [
        (2, 1, 9, 4, 150, 150, FILL_ORDER),
        (2, 0, 9, 4, 140, 150, EXEC_PRICE),
        (2, 0, 9, 4, 140, 150, QTY),
    ]
    assert s.book(0).level_orders(150) == [(1, 5)]


def test_exec_rejects():
    s = session()
    run(s, new(1, BUY, 150, 5))
    before = s.snapshot()
    for e, code in [
        (exe(2, 1), EUNKNOWN_ID),
        (exe(1, 0), EQTY),
        (exe(1, -1), EQTY),
        (exe(2, 0), EQTY),  # qty before the id
        (exe(1, 1, flags=8), EKIND),
        (ev(EXEC, 1, 150, 1, instrument=1), EINSTRUMENT),
    ]:
        out = s.apply(e)
        assert out[:4] == (code, 0, 0, []) and out[5] == [], (e, out)
    assert s.snapshot() == before
    # side, tif and new_id are not read
    (out,) = run(s, ev(EXEC, 1, 0, 1, side=0, tif=99, new_id=7))
    assert out[:3] == (OK, 1, 4)


def test_consistent_execs_are_the_fills_of_one_synthetic_aggressor():
    """docs/core.md: checking fill by fill is the same as matching one aggressor
    sized to the group's sum at its worst price."""
    orders = [new(1, SELL, 160, 5), new(2, SELL, 160, 3), new(3, SELL, 170, 4),
              new(4, SELL, 180, 2), new(5, BUY, 140, 9)]
    a, b = session(), session()
    run(a, *orders)
    run(b, *orders)
    (agg,) = run(a, new(99, BUY, 180, 10, IOC))
    fills = agg[3]
    assert [f[0] for f in fills] == [1, 2, 3]
    outs = run(b, *[exe(m, q, p, PRICE) for m, _, p, q, _ in fills])
    assert all(o[0] == OK and o[5] == [] for o in outs)
    assert [o[3][0] for o in outs] == [(m, 0, p, q, r) for m, _, p, q, r in fills]
    assert a.snapshot() == b.snapshot()


# ---- feed replays: FEED orders -------------------------------------------------


def test_feed_order_that_meets_nothing_rests_like_any_gtc():
    s = session()
    run(s, new(1, SELL, 170, 2))
    (out,) = run(s, new(2, BUY, 160, 3, flags=FEED))
    assert out[:4] == (OK, 0, 3, []) and out[5] == []


def test_feed_new_removes_the_stale_orders_it_meets_best_first_fifo():
    s = session()
    run(s, new(1, SELL, 160, 2), new(2, SELL, 160, 3), new(3, SELL, 170, 1),
        new(4, SELL, 180, 4), new(5, BUY, 140, 7))
    (out,) = run(s, new(9, BUY, 170, 4, flags=FEED))
    st, filled, resting, execs, bbo, desyncs = out
    # no trade: it rests whole
    assert (st, filled, resting, execs) == (OK, 0, 4, [])
    # order_id = stale, found_id = incoming, expected = incoming qty/price, found = stale's
    assert desyncs == [
        (1, 9, 4, 2, 170, 160, CROSSED),
        (2, 9, 4, 3, 170, 160, CROSSED),
        (3, 9, 4, 1, 170, 170, CROSSED),
    ]
    assert bbo == (170, 4, 180, 4, 1, 1, 1)
    # a sell meeting both bid levels: the best (170) first
    (out,) = run(s, new(10, SELL, 140, 1, flags=FEED))
    assert out[:4] == (OK, 0, 1, [])
    assert out[5] == [(9, 10, 1, 4, 140, 170, CROSSED), (5, 10, 1, 7, 140, 140, CROSSED)]
    assert s.book(0).bbo() == (0, 0, 140, 1, 0, 1)
    assert s.book(0).order_count == 2


def test_feed_replace_removes_the_old_order_then_the_stale_ones():
    s = session()
    run(s, new(1, SELL, 160, 2), new(2, SELL, 170, 3), new(3, SELL, 190, 1),
        new(5, BUY, 140, 7), new(6, BUY, 130, 1))
    (out,) = run(s, ev(REPLACE, 5, new_id=11, price=180, qty=2, flags=FEED))
    assert out[:4] == (OK, 0, 2, [])
    assert out[5] == [(1, 11, 2, 2, 180, 160, CROSSED), (2, 11, 2, 3, 180, 170, CROSSED)]
    assert s.book(0).find(5) is None
    assert s.book(0).bbo() == (180, 2, 190, 1, 1, 1)
    # new_id == id, meeting nothing
    (out,) = run(s, ev(REPLACE, 11, new_id=11, price=150, qty=6, flags=FEED))
    assert out[:4] == (OK, 0, 6, []) and out[5] == []
    assert s.book(0).level_orders(150) == [(11, 6)]
    # without FEED the same replace trades
    (out,) = run(s, ev(REPLACE, 6, new_id=6, price=190, qty=1))
    assert out[:4] == (OK, 1, 0, [(3, 6, 190, 1, 0)]) and out[5] == []


def test_feed_order_with_another_tif_is_ekind():
    s = session()
    run(s, new(1, SELL, 160, 2))
    for tif in (IOC, FOK, MARKET):
        out = s.apply(new(2, BUY, 160, 1, tif, flags=FEED))
        assert out[:4] == (EKIND, 0, 0, []) and out[5] == [], tif
    assert s.apply(new(2, BUY, 160, 1, flags=FEED))[0] == OK


def test_feed_new_on_a_full_book():
    s = session(capacity=2)
    run(s, new(1, BUY, 140, 1), new(2, SELL, 170, 3))
    # meets nothing: it would need a slot
    assert s.apply(new(3, BUY, 150, 1, flags=FEED))[:4] == (EFULL, 0, 0, [])
    # meets stale order 2, whose removal makes room (reading of lob.c; see the module docstring)
    (out,) = run(s, new(3, BUY, 170, 9, flags=FEED))
    assert out[:4] == (OK, 0, 9, []) and out[5] == [(2, 3, 9, 3, 170, 170, CROSSED)]
    assert s.book(0).order_count == 2


def test_feed_reduce_by_more_than_remains_removes_the_order():
    s = session()
    run(s, new(1, BUY, 150, 5), new(2, BUY, 150, 5))
    assert s.apply(ev(REDUCE, 1, qty=7))[0] == EQTY  # without FEED: a reject
    (out,) = run(s, ev(REDUCE, 1, qty=7, flags=FEED))
    # expected = the feed's qty, found = what remained; a REDUCE has no price: 0
    assert out == (OK, 0, 0, [], (150, 5, 0, 0, 1, 0, 1), [(1, 0, 7, 5, 0, 150, QTY)])
    assert s.book(0).find(1) is None
    # by at most what remains: an ordinary REDUCE
    (out,) = run(s, ev(REDUCE, 2, qty=2, flags=FEED))
    assert out[:4] == (OK, 0, 3, []) and out[5] == []
    (out,) = run(s, ev(REDUCE, 2, qty=3, flags=FEED))
    assert out[:4] == (OK, 0, 0, []) and out[5] == []


def test_unknown_flag_bits_are_ekind_right_after_the_instrument():
    s = RefSession(1)
    s.add_book(0, 100, 200, 10, 10)
    run(s, new(1, BUY, 150, 5))
    before = s.snapshot()
    for bit in (64, 128):
        for e in (new(2, BUY, 150, 1, flags=bit), new(2, 0, 7, -1, tif=9, flags=bit | FEED),
                  ev(CANCEL, 1, flags=bit), ev(REDUCE, 1, qty=1, flags=bit),
                  ev(REPLACE, 1, new_id=2, price=150, qty=1, flags=bit),
                  exe(1, 1, flags=bit | PRICE), exe(99, 0, flags=bit)):
            assert s.apply(e)[0] == EKIND, e
        assert s.apply(new(2, BUY, 150, 1, instrument=1, flags=bit))[0] == EINSTRUMENT
    assert s.snapshot() == before


def test_known_flags_where_they_mean_nothing_are_ignored():
    s = session()
    (a, b) = run(s, new(1, SELL, 160, 2, flags=PRICE | NOCHECK), new(2, SELL, 170, 2, flags=NOCHECK))
    assert a[:3] == (OK, 0, 2) and b[:3] == (OK, 0, 2)
    (out,) = run(s, new(3, BUY, 160, 1, IOC, flags=PRICE))
    assert out[:4] == (OK, 1, 0, [(1, 3, 160, 1, 1)])
    (out,) = run(s, ev(REDUCE, 1, qty=1, flags=PRICE | NOCHECK))
    assert out[:3] == (OK, 0, 0)
    (out,) = run(s, ev(REPLACE, 2, new_id=4, price=180, qty=3, flags=PRICE))
    assert out[:3] == (OK, 0, 3)
    (out,) = run(s, exe(4, 1, flags=FEED))  # FEED on an EXEC: an ordinary EXEC
    assert out[:4] == (OK, 1, 2, [(4, 0, 180, 1, 2)]) and out[5] == []
    (out,) = run(s, ev(CANCEL, 4, flags=FEED | PRICE | NOCHECK))
    assert out[:3] == (OK, 0, 0)
    assert s.book(0).order_count == 0


@pytest.mark.parametrize(
    "event, code",
    [
        # unknown flag bits right after the instrument, before kind/side/tif/qty/...
        (ev(NEW, 99, 7, -1, side=0, flags=8), EKIND),
        (ev(9, 99, flags=FEED), EKIND),
        # FEED with a tif other than GTC, before qty and price
        (ev(NEW, 99, 7, -1, tif=IOC, flags=FEED), EKIND),
        (ev(NEW, 1, 7, 1, tif=MARKET, flags=FEED), EKIND),
        # EXEC: qty before the id
        (ev(EXEC, 99, qty=0), EQTY),
        (ev(EXEC, 99, qty=1), EUNKNOWN_ID),
        # FEED orders go through the same price and id checks
        (ev(NEW, 99, 7, 1, flags=FEED), EBAND),
        (ev(NEW, 1, 150, 1, flags=FEED), EDUP_ID),
        (ev(REPLACE, 99, 190, 1, new_id=1, flags=FEED), EUNKNOWN_ID),
        (ev(REPLACE, 1, 190, 1, new_id=2, flags=FEED), EDUP_ID),
        (ev(REDUCE, 99, qty=100, flags=FEED), EUNKNOWN_ID),
        (ev(REDUCE, 1, qty=0, flags=FEED), EQTY),
    ],
)
def test_check_order_with_flags(event, code):
    s = session(capacity=2)
    run(s, new(1, BUY, 150, 5), new(2, SELL, 190, 5))
    before = s.snapshot()
    out = s.apply(event)
    assert out[0] == code and out[5] == []
    assert s.snapshot() == before


# ---- order flags: NOTIONAL and self-trade prevention -------------------------------


def test_order_flags_are_ekind_where_they_do_not_belong():
    s = RefSession(1)
    s.add_book(0, 100, 200, 10, 10)
    run(s, new(1, BUY, 150, 5))
    before = s.snapshot()
    bad = [new(2, BUY, 150, 1, tif=t, flags=NOTIONAL) for t in (GTC, IOC, FOK)]
    bad += [new(2, BUY, 150, 1, flags=f | FEED) for f in (STP_RESTING, STP_INCOMING, STP_BOTH)]
    bad += [ev(REPLACE, 1, new_id=2, price=150, qty=1, flags=NOTIONAL),
            ev(REPLACE, 1, new_id=2, price=150, qty=1, flags=STP_RESTING | FEED)]
    for f in (NOTIONAL, STP_RESTING, STP_INCOMING):
        bad += [ev(CANCEL, 1, flags=f), ev(REDUCE, 1, qty=1, flags=f), exe(1, 1, flags=f)]
    bad += [ev(NEW, 2, 150, 1, new_id=2**32), ev(NEW, 2, 150, 1, new_id=2**64 - 1, flags=FEED)]
    for e in bad:
        assert s.apply(e)[0] == EKIND, e
    assert s.snapshot() == before
    assert s.apply(ev(NEW, 2, 150, 1, new_id=2**32 - 1))[0] == OK
    assert s.book(0).participant(2) == 2**32 - 1


def test_notional_takes_whole_shares_until_a_maker_it_cannot_afford():
    s = session(low=100, high=200, tick=1)
    run(s, new(1, SELL, 101, 5), new(2, SELL, 101, 3), new(3, SELL, 102, 10), new(4, SELL, 105, 4))
    # 1000: 505 + 303 spent, 192 // 102 = 1 share of order 3, 90 left buys nothing more
    (out,) = run(s, new(9, BUY, 0, 1000, MARKET, flags=NOTIONAL))
    assert out[:4] == (OK, 9, 0, [(1, 9, 101, 5, 0), (2, 9, 101, 3, 0), (3, 9, 102, 1, 9)])
    s = session(low=100, high=200, tick=1)
    run(s, new(10, BUY, 150, 2), new(11, BUY, 120, 5), new(12, BUY, 100, 1))
    (out,) = run(s, new(9, SELL, 0, 400, MARKET, flags=NOTIONAL))  # stops at 120, not skipping to 100
    assert out[:4] == (OK, 2, 0, [(10, 9, 150, 2, 0)])
    s = session(low=-10, high=10, tick=1)
    run(s, new(1, SELL, -5, 3), new(2, SELL, 3, 3))
    (out,) = run(s, new(9, BUY, 0, 100, MARKET, flags=NOTIONAL))  # price <= 0: stops
    assert out[:4] == (OK, 0, 0, [])


def _stp_session():
    s = session(low=100, high=200, tick=1)
    run(s, ev(NEW, 2, 101, 3, SELL, new_id=8), ev(NEW, 1, 101, 5, SELL, new_id=7),
        ev(NEW, 3, 102, 4, SELL, new_id=8))
    return s


def test_stp_modes():
    s = _stp_session()
    (out,) = run(s, ev(NEW, 9, 102, 10, BUY, new_id=7, flags=STP_RESTING))
    assert out[:4] == (OK, 7, 3, [(2, 9, 101, 3, 0), (1, 9, 101, -5, 0), (3, 9, 102, 4, 0)])
    assert s.book(0).participant(9) == 7
    s = _stp_session()
    (out,) = run(s, ev(NEW, 9, 102, 10, BUY, new_id=7, flags=STP_INCOMING))
    assert out[:4] == (OK, 3, 0, [(2, 9, 101, 3, 0), (1, 9, 101, 0, 5)])
    assert s.book(0).depth(SELL) == [(101, 5, 1), (102, 4, 1)]
    s = _stp_session()
    (out,) = run(s, ev(NEW, 9, 102, 10, BUY, tif=IOC, new_id=7, flags=STP_BOTH))
    assert out[:4] == (OK, 3, 0, [(2, 9, 101, 3, 0), (1, 9, 101, -5, 0), (1, 9, 101, 0, 0)])
    s = _stp_session()
    (out,) = run(s, ev(NEW, 9, 101, 8, BUY, new_id=0, flags=STP_BOTH))  # no participant: no STP
    assert out[:4] == (OK, 8, 0, [(2, 9, 101, 3, 0), (1, 9, 101, 5, 0)])


def test_stp_fok_and_replace():
    s = _stp_session()
    (out,) = run(s, ev(NEW, 9, 102, 6, BUY, tif=FOK, new_id=7, flags=STP_INCOMING))
    assert out[:4] == (OK, 0, 0, [])
    (out,) = run(s, ev(NEW, 9, 102, 8, BUY, tif=FOK, new_id=7, flags=STP_RESTING))
    assert out[:4] == (OK, 0, 0, []) and s.book(0).find(1) == (SELL, 101, 5)
    (out,) = run(s, ev(NEW, 9, 102, 6, BUY, tif=FOK, new_id=7, flags=STP_RESTING))
    assert out[:4] == (OK, 6, 0, [(2, 9, 101, 3, 0), (1, 9, 101, -5, 0), (3, 9, 102, 3, 1)])
    s = session(low=100, high=200, tick=1)
    run(s, ev(NEW, 20, 100, 5, BUY, new_id=7), ev(NEW, 1, 102, 2, SELL, new_id=7),
        ev(NEW, 2, 103, 2, SELL, new_id=8))
    (out,) = run(s, ev(REPLACE, 20, 103, 5, new_id=21, flags=STP_RESTING))
    assert out[:4] == (OK, 2, 3, [(1, 21, 102, -2, 0), (2, 21, 103, 2, 0)])
    assert s.book(0).participant(21) == 7
