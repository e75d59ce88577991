"""Hand-written unit tests of the reference book (tests/reference_book.py).

The reference is the oracle of the differential fuzz, so it gets its own
small, readable tests of every rule: FIFO priority, trades at the maker's
price, IOC/FOK/MARKET, REDUCE keeps priority, REPLACE loses priority and may
trade, every reject code and the order in which the checks run, the BBO and
its `changed` flag.  These tests need no compiled core.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import reference_book as rb  # noqa: E402
from reference_book import (  # noqa: E402
    BUY,
    CANCEL,
    EBAND,
    EDUP_ID,
    EFULL,
    EINSTRUMENT,
    EKIND,
    EPRICE,
    EQTY,
    EUNKNOWN_ID,
    FOK,
    GTC,
    IOC,
    MARKET,
    NEW,
    OK,
    REDUCE,
    REPLACE,
    SELL,
    RefBook,
    RefSession,
)


def ev(kind, oid=0, price=0, qty=0, side=BUY, tif=GTC, new_id=0, instrument=0, flags=0):
    return (oid, new_id, price, qty, instrument, kind, side, tif, flags)


def new(oid, side, price, qty, tif=GTC, instrument=0):
    return ev(NEW, oid, price, qty, side, tif, instrument=instrument)


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
    st, filled, resting, execs, bbo = out
    assert (st, filled, resting) == (OK, 7, 0)
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
    assert out == (OK, 0, 0, [], (0, 0, 0, 0, 0, 0, 0))


def test_fok_fills_completely_or_is_killed():
    s = session()
    run(s, new(1, SELL, 160, 2), new(2, SELL, 170, 2), new(3, SELL, 180, 9))
    # only 4 at or below 170: killed, nothing changes
    (out,) = run(s, new(4, BUY, 170, 5, FOK))
    assert out == (OK, 0, 0, [], (0, 0, 160, 2, 0, 1, 0))
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
    assert out == (OK, 0, 0, [], (150, 6, 0, 0, 1, 0, 1))
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
    st, filled, resting, execs, bbo = out
    assert (st, filled, resting) == (OK, 2, 3)
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
    assert out == (EFULL, 0, 0, [], (140, 1, 160, 3, 1, 1, 0))
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
        (ev(5, 5, 150, 1), EKIND),
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
        assert out[1:4] == (0, 0, []), e
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
