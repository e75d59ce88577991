"""The C path of the L2 replay (csrc/feeds/l2.c behind lobreplay.l2.ladder) against the Python
implementation it replaced (tests/l2_reference.py) and against the golden digests
that implementation wrote (tests/golden/l2_reports.json, tests/l2_golden.py): row for
row, counter for counter, book for book, on every real Binance recording and on
generated streams, whole and in batches of any size."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import l2_golden
import l2_reference as ref
from lobreplay.l2 import lobc
from lobreplay.l2.ladder import MAX_MESSAGE, L2Replay, scan
from tests.l2.test_l2replay import _depth_oracle, feed_in_batches, sorted_rows, synth_stream

# ---------------------------------------------------------------- helpers


def assert_rows_equal(got: dict, want: dict, where: str) -> None:
    assert sorted(got) == sorted(want), f"{where}: tables {sorted(got)} != {sorted(want)}"
    for table in want:
        g, w = got[table], want[table]
        assert sorted(g) == sorted(w), f"{where}: {table} columns"
        n = len(w["record"])
        assert len(g["record"]) == n, f"{where}: {table} has {len(g['record'])} rows, expected {n}"
        for col in w:
            a, b = np.asarray(g[col]), np.asarray(w[col])
            if b.dtype == object or a.dtype == object:
                same = a.tolist() == b.tolist()
            else:
                same = a.dtype == b.dtype and np.array_equal(a, b)
            if not same:
                bad = np.flatnonzero(a != b)[:5] if a.shape == b.shape else []
                raise AssertionError(f"{where}: {table}.{col} differs ({a.dtype} vs {b.dtype}) at rows "
                                     f"{bad}: {a[bad].tolist() if len(bad) else a[:5]} vs "
                                     f"{b[bad].tolist() if len(bad) else b[:5]}")


COUNTERS = ("messages_applied", "snapshots_applied", "levels_applied", "events", "unchanged_levels",
            "zero_qty_unknown_level", "messages_skipped", "levels_skipped", "desyncs", "trades", "bbo_changes")


def assert_same_state(new: L2Replay, old: ref.L2Replay, where: str) -> None:
    for k in COUNTERS:
        assert getattr(new.counters, k) == getattr(old.counters, k), f"{where}: counter {k}"
    assert new.ticker_stats == old.ticker_stats, where
    assert new.per_symbol == old.per_symbol, where
    np.testing.assert_array_equal(new.state, old.state, err_msg=where)
    np.testing.assert_array_equal(new.last_u, old.last_u, err_msg=where)
    for s in range(new.nsym):
        assert new.levels(s) == old.levels(s), f"{where}: book of symbol {s}"
        assert new.best(s) == old.best(s), where


def assert_same_sizing(new: dict, old: dict, where: str) -> None:
    assert sorted(new) == sorted(old), where
    for s in old:
        a, b = new[s], old[s]
        np.testing.assert_array_equal(a.prices, b.prices, err_msg=where)
        assert a.prices.dtype == b.prices.dtype
        assert a.as_dict() == b.as_dict(), where


def both(records, symbols, mode="auto", max_message=MAX_MESSAGE, **kw):
    szn = scan(records, symbols, mode=mode, max_message=max_message)
    szo = ref.scan(records, symbols, mode=mode, max_message=max_message)
    assert_same_sizing(szn, szo, f"scan {mode}")
    return L2Replay(szn, symbols, max_message=max_message, **kw), ref.L2Replay(szo, symbols, max_message=max_message,
                                                                               **kw)


def replay_in_batches(records, symbols, sizes, mode="auto", tiny_outputs=False, **kw):
    """Feed both implementations the same batches; every batch's rows must be equal."""
    new, old = both(records, symbols, mode, **kw)
    if tiny_outputs:  # every output array of one row: the C replay stops and resumes often
        for name in new._c._FIELDS:
            new._c._grow(name, 1)
    i = 0
    for j, size in enumerate(sizes):
        part = records[i:i + size]
        i += size
        assert_rows_equal(new.feed(part), old.feed(part), f"batch {j}")
        if i >= len(records):
            break
    if i < len(records):
        assert_rows_equal(new.feed(records[i:]), old.feed(records[i:]), "last batch")
    assert_rows_equal(new.finish(), old.finish(), "finish")
    assert_same_state(new, old, "end")
    for s in new.sizing:
        new.session.book(s).validate()
    return new, old


SYMS = ["AAA", "BBB", "CCC", "DDD"]

# ---------------------------------------------------------------- generated streams


@pytest.mark.parametrize("seed", range(8))
def test_generated_streams_whole_and_in_random_batches(seed):
    rng = np.random.default_rng(seed)
    recs, _ = synth_stream(100 + seed, n_messages=700, n_symbols=1 + seed % 4, cross_rate=0.02 + 0.04 * (seed % 3),
                           gap_rate=0.01 * (seed % 4), ticker_error=0.03 * (seed % 2))
    mode = ("auto", "grid", "ladder")[seed % 3]
    replay_in_batches(recs, SYMS, [len(recs)], mode)
    replay_in_batches(recs, SYMS, rng.integers(1, 60, size=len(recs)).tolist(), mode)


@pytest.mark.parametrize("seed", [3, 9])
def test_record_by_record_and_tiny_output_arrays(seed):
    recs, _ = synth_stream(seed, n_messages=250, n_symbols=3, cross_rate=0.1, gap_rate=0.03, ticker_error=0.1)
    replay_in_batches(recs, SYMS, [1] * len(recs))
    replay_in_batches(recs, SYMS, [len(recs)], tiny_outputs=True)
    replay_in_batches(recs, SYMS, [7] * len(recs), tiny_outputs=True)


def test_malformed_structure_and_records_beyond_the_symbols():
    recs = l2_golden.malformed_records()
    for sizes in ([len(recs)], [1] * len(recs), [3, 5, 2, 11, 1, 4, 7] * 10):
        for market in (None, "spot", "usdm"):
            replay_in_batches(recs, ["X", "Y", "Z"], sizes, market=market)
        replay_in_batches(recs, ["X", "Y", "Z"], sizes, compare_tickers=False, market="spot")


def _usdm_ids_then_damage(recs: np.ndarray, rng, rate: float) -> np.ndarray:
    """The records of a spot-like synth_stream with USD-M update ids (pu: the previous
    message's u, the first after a snapshot reaching back to its id), then at `rate` a
    DIFF_BEGIN's ids damaged (U, u or pu moved by one or a few)."""
    recs = recs.copy()
    last = {}
    for i in np.flatnonzero(np.isin(recs["kind"], [lobc.SNAPSHOT_BEGIN, lobc.DIFF_BEGIN])).tolist():
        s, k = int(recs["symbol"][i]), int(recs["kind"][i])
        if k == lobc.SNAPSHOT_BEGIN:
            last[s] = ("snapshot", int(recs["first_id"][i]))
            continue
        what, u = last.get(s, ("diff", 0))
        if what == "snapshot" and recs["first_id"][i] == u + 1:
            recs["first_id"][i] = u  # USD-M: U <= lastUpdateId <= u
        recs["prev_id"][i] = u
        last[s] = ("diff", int(recs["last_id"][i]))
    begins = np.flatnonzero(recs["kind"] == lobc.DIFF_BEGIN)
    for i in begins[rng.random(len(begins)) < rate].tolist():
        f = ("first_id", "last_id", "prev_id")[int(rng.integers(0, 3))]
        recs[f][i] = max(0, int(recs[f][i]) + int(rng.choice([-2, -1, 1, 3])))
    return recs


@pytest.mark.parametrize("seed", range(4))
def test_update_ids_out_of_sequence(seed):
    """Diff messages whose update ids break the market's rule (docs/l2.md "Update ids"): the
    same sequence_break rows, skipped messages and books as the reference, whole and in
    batches, by the spot and USD-M rules; undamaged, no break at all."""
    rng = np.random.default_rng(seed)
    recs, _ = synth_stream(200 + seed, n_messages=600, n_symbols=1 + seed % 3, gap_rate=0.02, ticker_error=0.02)
    for market, stream in (("spot", recs), ("usdm", _usdm_ids_then_damage(recs, rng, 0))):
        new, _ = replay_in_batches(stream, SYMS, [len(stream)], market=market)
        assert "sequence_break" not in new.counters.desyncs, market
    spot = recs.copy()
    begins = np.flatnonzero(spot["kind"] == lobc.DIFF_BEGIN)
    for i in begins[rng.random(len(begins)) < 0.03].tolist():
        spot["first_id"][i] = int(spot["first_id"][i]) + int(rng.choice([-1, 1, 2]))
    for market, stream in (("spot", spot), ("usdm", _usdm_ids_then_damage(recs, rng, 0.03))):
        sizes = rng.integers(1, 80, size=len(stream)).tolist()
        new, old = replay_in_batches(stream, SYMS, sizes, market=market)
        assert new.counters.desyncs.get("sequence_break", 0) > 0, market
        assert new.counters.messages_skipped["sequence_break"] == new.counters.desyncs["sequence_break"]


@pytest.mark.parametrize("ahead", [False, True])
def test_feed_from_holds_a_long_unfinished_message_as_feed_does(ahead):
    """feed_from keeps a message that runs on for several chunks at the buffer's front and looks
    only at the new records while they continue it (once each chunk rescanned it all: a
    message with no END took time in its square): the same rows and counters as feed() of
    the same chunks, on the malformed stream (incomplete BEGINs, records of unknown symbols
    inside messages) and on one long message without its END."""
    names = ["X", "Y", "Z"]
    rows, r = l2_golden.record_builder()
    r(lobc.SNAPSHOT_BEGIN, first_id=1)
    r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=100, qty=1)
    r(lobc.SNAPSHOT_END, first_id=1)
    r(lobc.DIFF_BEGIN, first_id=2, last_id=2)
    for i in range(300):
        r(lobc.DIFF_LEVEL, sym=7 if i % 50 == 0 else 0, side=ord("B"), price=50 + i % 40, qty=1)
    r(lobc.TRADE, price=100, qty=1, side=ord("B"))
    for recs, most in ((l2_golden.malformed_records(), MAX_MESSAGE), (np.array(rows), MAX_MESSAGE),
                       (np.array(rows), 100)):  # (and that message too long: 300 records > 100)
        for chunk in (1, 2, 3, 7, 64):
            a, b = (L2Replay(scan(recs, names, max_message=most), names, max_message=most) for _ in range(2))
            pos = [0]

            def read(out):
                k = min(len(out), len(recs) - pos[0])
                out[:k] = recs[pos[0]:pos[0] + k]
                pos[0] += k
                return k
            rows_a = list(a.feed_from(read, chunk, ahead=ahead)) + [a.finish()]
            rows_b = []
            for lo in range(0, len(recs), chunk):
                rows_b.append(b.feed(recs[lo:lo + chunk]))
                assert len(b._carry) <= most + 1  # (what is held of a message: at most its BEGIN and most)
            rows_b.append(b.finish())
            for i, (x, y) in enumerate(zip(rows_a, rows_b)):
                assert_rows_equal(x, y, f"chunk {chunk} part {i}")
            a.counters.core_seconds = b.counters.core_seconds = 0.0
            assert a.counters == b.counters and a.ticker_stats == b.ticker_stats
            if most == 100:  # the long message: incomplete, its levels not applied, its TRADE after it kept
                assert a.counters.desyncs["incomplete_message"] == 1 and a.counters.levels_skipped == 294
                assert a.counters.desyncs["unknown_symbol"] == 6  # (the 6 of symbol 7 among them)
                assert a.counters.trades == 1 and a.levels(0) == ([(100, 1)], [])


def test_short_ticker_history():
    recs, _ = synth_stream(5, n_messages=400, n_symbols=2, cross_rate=0.0, ticker_error=0.2)
    rng = np.random.default_rng(5)
    # out-of-order tickers as well: swap some adjacent ticker pairs
    k = recs["kind"]
    tb = np.flatnonzero(k == lobc.TICKER_BID)
    recs = recs.copy()
    for a, b in zip(tb[:-1:7], tb[1::7]):
        if b == a + 2:
            recs[[a, a + 1, b, b + 1]] = recs[[b, b + 1, a, a + 1]]
    for hist in (1, 3, 50):
        replay_in_batches(recs, SYMS, rng.integers(1, 300, size=len(recs)).tolist(), ticker_history=hist)


def test_tickers_far_out_of_order():
    """Ticker ids shuffled within long runs (a history insertion anywhere: near its start, the
    entries before move; near its end, those after), and a run whose ids start again below
    every id kept: the rows equal the reference implementation's."""
    recs, _ = synth_stream(6, n_messages=600, n_symbols=2, cross_rate=0.0, ticker_error=0.1)
    rng = np.random.default_rng(6)
    recs = recs.copy()
    tb = np.flatnonzero(recs["kind"] == lobc.TICKER_BID)
    pairs = tb[recs["kind"][np.minimum(tb + 1, len(recs) - 1)] == lobc.TICKER_ASK]
    for lo in range(0, len(pairs), 40):                   # runs of 40 tickers: their ids shuffled
        run = pairs[lo:lo + 40]
        ids = recs["first_id"][run][rng.permutation(len(run))]
        recs["first_id"][run] = ids
        recs["first_id"][run + 1] = ids
    late = pairs[len(pairs) // 2:]                        # the second half's ids start again, lower
    recs["first_id"][late] -= np.uint64(1 << 20)
    recs["first_id"][late + 1] -= np.uint64(1 << 20)
    for hist in (3, 17, 1 << 16):
        replay_in_batches(recs, SYMS, rng.integers(1, 400, size=len(recs)).tolist(), ticker_history=hist)


def test_tickers_interleaved_far_apart():
    """Every other ticker of a symbol with its id moved far back, some with the id of one
    before them, and runs shuffled: most land inside the history, not at its end (the history
    holds them apart and merges them in every 64: csrc/feeds/l2.c, hist_add); the rows equal the
    reference implementation's, with a history shorter than, about as long as, and longer
    than the tickers."""
    recs, _ = synth_stream(8, n_messages=1500, n_symbols=1, cross_rate=0.0, ticker_error=0.1)
    rng = np.random.default_rng(8)
    recs = recs.copy()
    tb = np.flatnonzero(recs["kind"] == lobc.TICKER_BID)
    pairs = tb[recs["kind"][np.minimum(tb + 1, len(recs) - 1)] == lobc.TICKER_ASK]
    assert len(pairs) > 300
    back = pairs[1::2]
    for at in (back, back + 1):
        recs["first_id"][at] -= np.uint64(500)            # far behind the ids around it
    for i in range(2, len(pairs), 10):                    # and some the same id as the ticker 2 before
        for d in (0, 1):
            recs["first_id"][pairs[i] + d] = recs["first_id"][pairs[i - 2]]
    for lo in range(0, len(pairs), 150):                  # and runs of 150 shuffled
        run = pairs[lo:lo + 150]
        ids = recs["first_id"][run][rng.permutation(len(run))]
        recs["first_id"][run] = ids
        recs["first_id"][run + 1] = ids
    for hist in (5, 200, 1 << 16):
        replay_in_batches(recs, SYMS, rng.integers(1, 600, size=len(recs)).tolist(), ticker_history=hist)


@pytest.mark.parametrize("late_top", [(119, 5), (120, 4)])
def test_a_full_history_drops_the_earlier_of_two_tickers_with_one_id(late_top):
    """Two tickers with the same id, the second out of order (into the history's side array,
    csrc/feeds/l2.c hist_add), with a history of 2: the one to go is the first to come (the ring's),
    and a book point at that id is compared with the second. The second's top is the book's
    in one case and not in the other, so keeping the wrong one changes the counts both ways."""
    recs = _stream([("snapshot", 0, [(ord("B"), 120, 4), (ord("S"), 125, 2)], []),
                    ("diff", 0, [(ord("B"), 119, 5), (ord("B"), 120, 0)], []),   # the book's top: 119 x 5
                    ("ticker", 0, [(ord("B"), 130, 9)], []),
                    ("ticker", 0, [(ord("B"), 130, 9)], []),
                    ("ticker", 0, [(ord("B"), *late_top)], [])]).copy()
    diff_u = int(recs["last_id"][recs["kind"] == lobc.DIFF_END][0])
    t = np.flatnonzero(recs["kind"] == lobc.TICKER_BID)
    for k, u in zip(t, (diff_u, diff_u + 5, diff_u)):  # the first and the third share the diff's id
        recs["first_id"][[k, k + 1]] = u
    recs["price"][t + 1] = 125                          # every ticker's ask as the book's
    recs["qty"][t + 1] = 2
    new, _ = replay_in_batches(recs, SYMS[:1], [len(recs)], ticker_history=2)
    st = new.ticker_stats
    assert st["comparable"] >= 1
    assert (st["matches"] == st["comparable"]) == (late_top == (119, 5)), st


@pytest.mark.parametrize("ahead", [False, True])
def test_feed_from_is_feed_in_chunks(ahead):
    """feed_from reads a stream into chunks of exactly `chunk` records: the same C calls, rows
    and counters as feed() of each chunk. The stream here: the records in blocks of random
    sizes through the --symbols reader (keeping every symbol, then one)."""
    from lobreplay.l2.replay import _filtered, _RecordMap

    recs, _ = synth_stream(17, n_messages=900, n_symbols=3, cross_rate=0.05, gap_rate=0.02)
    rng = np.random.default_rng(17)
    for chunk in (1, 13, 500, len(recs), len(recs) + 5):
        for keep in ([0, 1, 2], [1]):
            cuts = np.sort(rng.choice(np.arange(1, len(recs)), size=rng.integers(0, 40), replace=False))
            blocks = np.split(recs, cuts)            # the file's blocks, of random sizes
            mine = recs[np.isin(recs["symbol"], keep)]
            a = L2Replay(scan(mine, SYMS), SYMS)
            b = L2Replay(scan(mine, SYMS), SYMS)
            rows_a = list(a.feed_from(_filtered(iter(blocks), keep, _RecordMap()), chunk, ahead=ahead)) + [a.finish()]
            rows_b = [b.feed(mine[lo:lo + chunk]) for lo in range(0, len(mine), chunk)] + [b.finish()]
            assert len(rows_a) == len(rows_b) == -(-len(mine) // chunk) + 1
            for i, (x, y) in enumerate(zip(rows_a, rows_b)):
                assert_rows_equal(x, y, f"chunk {chunk} part {i}")
            a.counters.core_seconds = b.counters.core_seconds = 0.0
            assert a.counters == b.counters and a.ticker_stats == b.ticker_stats
            assert a.next_index == b.next_index == len(mine) > 0


# ---------------------------------------------------------------- any records, any chunks

NSYM = 2   # the stream's symbols; indexes 2 and 9 are beyond them (unknown_symbol)
_LEVEL_ST = st.tuples(st.sampled_from([ord("B"), ord("S")]), st.integers(100, 140), st.integers(0, 3))
_PIECE = st.tuples(
    st.sampled_from(["snapshot", "diff", "diff", "diff", "cut_diff", "cut_snapshot", "ticker", "gap", "resync",
                     "trade", "orphan_level", "orphan_end", "foreign_level"]),
    st.integers(0, NSYM - 1),
    st.lists(_LEVEL_ST, max_size=12),
    st.lists(st.tuples(st.integers(0, 13), st.sampled_from([2, 9]),
                       st.sampled_from([lobc.TRADE, lobc.DIFF_LEVEL, lobc.SNAPSHOT_LEVEL, lobc.DIFF_END,
                                        lobc.TICKER_ASK, lobc.GAP])), max_size=2))


def _stream(pieces) -> np.ndarray:
    """Records from pieces (kind, symbol, levels, unknown-symbol records to put inside at
    positions): whole and cut messages, tickers, gaps, resyncs, trades, orphans, another
    symbol's level inside a message, records of an unknown symbol anywhere in a group."""
    rows = []
    uid = [100, 100]

    def rec(kind, s, **kw):
        x = np.zeros(1, lobc.RECORD_DTYPE)[0]
        x["kind"], x["symbol"], x["recv_ns"] = kind, s, 1_700_000_000_000_000_000 + len(rows) + len(group)
        for f, v in kw.items():
            x[f] = v
        group.append(x.copy())

    for kind, s, levels, unknown in pieces:
        group = []
        uid[s] += 1 + len(levels)
        u = uid[s]
        if kind in ("snapshot", "diff", "cut_diff", "cut_snapshot"):
            snap = "snapshot" in kind
            begin, level = (lobc.SNAPSHOT_BEGIN, lobc.SNAPSHOT_LEVEL) if snap else (lobc.DIFF_BEGIN, lobc.DIFF_LEVEL)
            # (a diff follows the piece before it by the spot and USD-M rules when that was a diff)
            rec(begin, s, first_id=u if snap else u - len(levels), last_id=u,
                prev_id=0 if snap else u - len(levels) - 1)
            for side, p, q in levels:
                rec(level, s, side=side, price=p, qty=q)
            if not kind.startswith("cut"):
                rec(begin + 2, s, first_id=u if snap else u - len(levels), last_id=u)
        elif kind == "ticker":
            top = levels[0] if levels else (ord("B"), 120, 1)
            rec(lobc.TICKER_BID, s, first_id=u, price=top[1], qty=top[2])
            rec(lobc.TICKER_ASK, s, first_id=u, price=top[1] + 1, qty=top[2])
        elif kind == "gap":
            rec(lobc.GAP, s, first_id=u - 3, last_id=u, flags=lobc.GAP_SEQUENCE)
        elif kind == "resync":
            rec(lobc.RESYNC, s, first_id=u)
        elif kind == "trade":
            rec(lobc.TRADE, s, first_id=u, price=120, qty=1, side=ord("B"))
        elif kind == "orphan_level":
            for side, p, q in levels[:3]:
                rec(lobc.DIFF_LEVEL, s, side=side, price=p, qty=q)
        elif kind == "orphan_end":
            rec(lobc.DIFF_END, s, first_id=u, last_id=u)
        else:  # another symbol's message with this symbol's levels inside
            rec(lobc.DIFF_BEGIN, 1 - s, first_id=u, last_id=u)
            for side, p, q in levels[:3]:
                rec(lobc.DIFF_LEVEL, s, side=side, price=p, qty=q)
            rec(lobc.DIFF_END, 1 - s, first_id=u, last_id=u)
        for at, sym, k in unknown:  # inside the group: after its first record
            x = np.zeros(1, lobc.RECORD_DTYPE)[0]
            x["kind"], x["symbol"], x["side"], x["price"], x["qty"], x["first_id"] = k, sym, ord("B"), 120, 1, u
            group.insert(min(1 + at, len(group)), x)
        rows += group
    return np.array(rows, lobc.RECORD_DTYPE) if rows else np.zeros(0, lobc.RECORD_DTYPE)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECE, max_size=40), st.lists(st.integers(1, 9), min_size=1, max_size=30),
       st.sampled_from(["auto", "ladder"]), st.sampled_from([None, "spot", "usdm"]),
       st.sampled_from([MAX_MESSAGE, MAX_MESSAGE, 1, 4, 9]))
def test_any_records_in_any_chunks_give_the_same_replay(pieces, sizes, mode, market, max_message):
    """docs/l2.md: the result is the same whatever the chunk size. Any records (cut messages,
    orphans, unknown-symbol records inside messages and between a TICKER_BID and its
    TICKER_ASK, gaps, resyncs, update ids that follow or break the market's rule, messages
    longer than max_message), fed whole and in batches of the drawn sizes: the same rows
    (depth samples too), counters and books, and the same as the reference implementation's
    batch by batch; and no core reject: pass 1's capacity bounds the book whatever the
    records."""
    recs = _stream(pieces)
    syms = ["AAA", "BBB"][:NSYM]
    depth = {"depth_levels": 2, "depth_every_ns": 3, "max_message": max_message}  # (receive times 1 ns apart)
    whole = L2Replay(scan(recs, syms, mode=mode, max_message=max_message), syms, market=market, **depth)
    want = sorted_rows([whole.feed(recs), whole.finish()])
    sizes = (sizes * (len(recs) // len(sizes) + 1))[:len(recs)]
    new, _ = replay_in_batches(recs, syms, sizes, mode, market=market,  # (the reference, batch by batch)
                               max_message=max_message)
    parts = L2Replay(scan(recs, syms, mode=mode, max_message=max_message), syms, market=market, **depth)
    cuts = np.cumsum(sizes)[:-1]
    got = sorted_rows([parts.feed(c) for c in np.split(recs, cuts)] + [parts.finish()])
    assert_rows_equal(got, want, f"batches {sizes}")
    assert_same_state(parts, whole, "batches")
    for rp in (whole, parts, new):
        assert not [c for c in rp.counters.desyncs if c.startswith(("rejected_", "core_"))], rp.counters.desyncs


@pytest.mark.parametrize("every", [2, 3, 4, 5])
@pytest.mark.parametrize("levels", [2, 4])
def test_depth_samples_of_a_message_longer_than_max_message_whatever_the_chunks(levels, every):
    """A snapshot longer than max_message with an unknown symbol's record inside (found by
    test_any_records_in_any_chunks_give_the_same_replay): once its record max_message + 1 after
    the BEGIN has come, the message is incomplete and its later levels are records alone, fed
    in chunks as in one batch; so the unit a depth sample may not cut ends there (csrc/feeds/l2.c,
    unit_end), not at its last level. Before, a sample whose time a later level reached went
    before the BEGIN in one batch (`record` 1) and after that level record by record (4). The
    same rows as the definition computed afresh with the reference replay, whole, record by
    record and with one-row outputs."""
    recs = _stream([("snapshot", 0, [], []),
                    ("snapshot", 0, [(ord("B"), 100, 0)] * levels, [(0, 2, lobc.TRADE)])])
    syms = ["AAA", "BBB"]
    for max_message in (1, 2):
        want = _depth_oracle(recs, syms, every, 2, max_message=max_message)
        assert len(want["record"]) >= 1
        for sizes, tiny in (([len(recs)], False), ([1] * len(recs), False), ([len(recs)], True)):
            rp = L2Replay(scan(recs, syms, max_message=max_message), syms, depth_levels=2, depth_every_ns=every,
                          max_message=max_message)
            got = feed_in_batches(rp, recs, sizes, tiny)["depth"]
            assert sorted(got) == sorted(want)
            for k in want:
                assert got[k].tolist() == want[k].tolist(), (max_message, sizes[:2], tiny, k)
            assert rp.counters.desyncs["incomplete_message"] == 1


# ---------------------------------------------------------------- the real recordings


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    return l2_golden.real_files(tmp_path_factory.mktemp("real"))


@pytest.mark.parametrize("name", sorted(l2_golden.REAL))
def test_real_recordings_match_the_reference(real, name):
    data = lobc.read(real[name])
    syms = [str(s) for s in data.meta["symbols"]]
    recs = data.records
    rng = np.random.default_rng(len(recs))
    mode = "grid" if "cryptofeed" in name else "auto"  # the BTCUSDT books are ladders in auto mode
    new, _ = replay_in_batches(recs, syms, rng.integers(1, 1 << 16, size=len(recs) // 1000 + 10).tolist(),
                               mode=mode, market=data.meta["market"])
    assert "sequence_break" not in new.counters.desyncs  # (the capture's sync: every diff follows)


# ---------------------------------------------------------------- the golden digests


@pytest.fixture(scope="module")
def golden():
    return json.loads(l2_golden.GOLDEN.read_text())


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return l2_golden.generated_files(tmp_path_factory.mktemp("gen"))


@pytest.mark.parametrize("name", sorted(l2_golden.REAL))
def test_real_recordings_reports_match_the_golden_file(real, golden, tmp_path, name):
    got = l2_golden.run_all({name: real[name]}, l2_golden.REAL_RUNS, tmp_path)
    assert not l2_golden.compare({k: v for k, v in golden.items() if k.split("/")[0] == name}, got)


@pytest.mark.parametrize("name", [*l2_golden.SYNTH, "malformed", "synth_cross_61_torn"])
def test_generated_reports_match_the_golden_file(generated, golden, tmp_path, name):
    got = l2_golden.run_all({name: generated[name]}, l2_golden.SYNTH_RUNS, tmp_path)
    assert not l2_golden.compare({k: v for k, v in golden.items() if k.split("/")[0] == name}, got)


def test_bookticker_figures_of_the_real_recordings(golden):
    """The figures docs/l2.md quotes: 6,491 of 6,493 (99.969 %) spot, 6,546 of 6,546 USD-M."""
    bt = {k: golden[f"{k}/whole"]["summary"]["bookticker"] for k in ("spot_20240808_09", "usdm_20240808")}
    assert (bt["spot_20240808_09"]["matches"], bt["spot_20240808_09"]["comparable"]) == (6491, 6493)
    assert (bt["usdm_20240808"]["matches"], bt["usdm_20240808"]["comparable"]) == (6546, 6546)
