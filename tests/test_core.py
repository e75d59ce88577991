"""Targeted tests of the core through the public API: edges the random
differential fuzz reaches only by luck (bitmap words, hash collisions,
execution-buffer refills, creation arguments, latency histograms)."""
import gc
import random

import numpy as np
import pytest

import lobreplay as L
from lobreplay import _coreapi
from lobreplay.synth import generate_flow

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


@pytest.mark.parametrize("cap", [1, 2, 3, 17, 1000])
def test_result_does_not_depend_on_exec_capacity(cap):
    flow = generate_flow(4000, n_instruments=3, seed=5, resting=200)
    ref = flow.session().apply(flow.events, bbo=True)
    got = flow.session().apply(flow.events, bbo=True, exec_capacity=cap)
    assert len(ref.execs) > 100
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
    s.apply(flow.events, bbo=True)
    assert _coreapi.alloc_count() == before
    s.add_book(0, 0, 10, 1, 4)  # creation does allocate, and is counted
    assert _coreapi.alloc_count() > before


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


def test_percentiles_from_a_known_histogram():
    from lobreplay.latency import percentile, summarize
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
