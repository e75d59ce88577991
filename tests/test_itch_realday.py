"""Generated days with what a real NASDAQ day holds (lobreplay.testing.itch_synth features): halts, LULD
pauses and an IPO whose displayed orders cross, their crosses, an operational halt, an MWCB
status, far-off prices, sub-penny prices, test issues, many symbols with a skewed share of
messages. Each is checked against the naive ground-truth book (tests/itch_truth.py), and the
replay's bbo and residual orders are compared with that book after every message."""
import dataclasses
import os
import sys
from collections import Counter

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import itch_truth  # noqa: E402

from lobreplay.itch.replay import ReplayConfig, replay_itch  # noqa: E402
from lobreplay.testing.itch_synth import FEATURES, TARGET_MIX, DayTruth, generate_day, main  # noqa: E402

NS = 10**9
HALTS = ("halts", "ipo", "operational", "mwcb")


@pytest.fixture(scope="module")
def halt_day(tmp_path_factory):
    path = tmp_path_factory.mktemp("halt_day") / "20191230.halts.itch"
    truth = generate_day(path, n_messages=80_000, n_symbols=24, seed=3, features=HALTS)
    return truth, itch_truth.read_messages(path)


@pytest.fixture(scope="module")
def far_day(tmp_path_factory):
    path = tmp_path_factory.mktemp("far_day") / "20191230.far.itch"
    truth = generate_day(path, n_messages=80_000, n_symbols=24, seed=4, features=("far_off",))
    return truth, itch_truth.read_messages(path)


def test_same_seed_same_bytes_with_every_feature(tmp_path):
    a, b, c = tmp_path / "a.itch", tmp_path / "b.itch", tmp_path / "c.itch"
    ta = generate_day(a, n_messages=40_000, n_symbols=20, seed=5, features=FEATURES)
    tb = generate_day(b, n_messages=40_000, n_symbols=20, seed=5, features=FEATURES)
    generate_day(c, n_messages=40_000, n_symbols=20, seed=5)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert dataclasses.replace(ta, path="", elapsed_s=0) == dataclasses.replace(tb, path="", elapsed_s=0)
    assert DayTruth.from_json(ta.to_json()) == ta
    assert ta.features == list(FEATURES) and ta.halts and ta.crossing_orders and ta.far_off_orders


def test_unknown_feature_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown feature"):
        generate_day(tmp_path / "x.itch", n_messages=20_000, n_symbols=10, features=("halts", "nope"))


def _windows_of(truth):
    return {(h["locate"], h["start"], h["end"]): h for h in truth.halts}


def test_halt_windows_cross_and_their_crosses_uncross(halt_day):
    """Crossing displayed orders rest only inside a window; the cross executes both sides at one
    price within every executed order's limit; the book after it is not crossed."""
    truth, msgs = halt_day
    kinds = Counter(h["kind"] for h in truth.halts)
    assert kinds["ipo"] == 1 and kinds["operational"] == 1 and kinds["pause"] >= 1 and kinds["halt"] >= 1
    planted = {c["order_ref"]: c for c in truth.crossing_orders}
    assert len(planted) >= 8
    in_window = {}   # locate -> window while open
    crossed_seen, execs = set(), {}

    def check(i, m, book, loc):
        t = m["type"]
        if t == "H" and m["timestamp"] > 4 * 3600 * NS:
            if m["trading_state"] in "HPQ":
                in_window[m["stock_locate"]] = True
            else:
                in_window.pop(m["stock_locate"], None)
                assert not book.crossed(m["stock_locate"]), i   # the cross left it uncrossed
        elif t == "h":
            if m["halt_action"] == "H":
                in_window[m["stock_locate"]] = True
            else:
                in_window.pop(m["stock_locate"], None)
        if loc is not None and book.crossed(loc):
            assert loc in in_window, (i, m)    # crossed only while it does not trade
            crossed_seen.add(loc)
        if t in ("A", "F") and m["order_ref"] in planted:
            c = planted[m["order_ref"]]
            (bp, _, _), (ap, _, _) = book.bbo(loc)
            assert book.crossed(loc) and loc in in_window
            assert (m["side"], m["price"], m["shares"]) == (c["side"], c["price"], c["shares"])
            assert (m["price"] >= c["opposite_best"]) if c["side"] == "B" else (m["price"] <= c["opposite_best"])
        if t == "C" and m["printable"] == "N":
            execs.setdefault(m["stock_locate"], []).append((m["order_ref"], m["executed_shares"],
                                                           m["execution_price"]))

    # the executed orders' limits, before they leave the book
    limits = {}
    book = itch_truth.TruthBook()
    for m in msgs:
        if m["type"] == "C" and m["printable"] == "N" and m["order_ref"] in book.orders:
            limits[m["order_ref"]] = tuple(book.orders[m["order_ref"]][1:3])
        book.apply(m)
    _, end = itch_truth.bbo_changes(msgs, on_message=check)
    assert not end.problems and not end.orders
    crosses = [h for h in truth.halts if h["kind"] != "operational"]
    assert {h["locate"] for h in crosses} <= crossed_seen
    qs = {(m["stock_locate"], m["timestamp"]): m for m in msgs if m["type"] == "Q" and m["cross_type"] == "H"}
    assert len(qs) == len(crosses)
    for h in crosses:
        sides = {s for _, _, s in h["executions"]}
        assert h["cross_shares"] > 0 and sides == {"B", "S"}
        buys = sum(x for _, x, s in h["executions"] if s == "B")
        assert buys == sum(x for _, x, s in h["executions"] if s == "S") == h["cross_shares"]
        for ref, _, s in h["executions"]:
            side, limit = limits[ref]
            assert side == s and ((h["cross_price"] <= limit) if s == "B" else (h["cross_price"] >= limit))
        (q,) = [m for (loc, t), m in qs.items() if loc == h["locate"] and h["start"] < t <= h["end"]]
        assert (q["shares"], q["cross_price"]) == (h["cross_shares"], h["cross_price"])


def test_ipo_sequence(halt_day):
    truth, msgs = halt_day
    (ipo,) = [h for h in truth.halts if h["kind"] == "ipo"]
    loc = ipo["locate"]
    mine = [m for m in msgs if m.get("stock_locate") == loc]
    r = [m for m in mine if m["type"] == "R"][0]
    assert r["ipo_flag"] == "Y"
    seq = [(m["type"], m.get("trading_state") or m.get("cross_type") or m.get("printable") or "")
           for m in mine if m["type"] in "HKQC" and not (m["type"] == "Q" and m["cross_type"] in "OC")]
    # halted from the spin, K, quotation only, the IPO cross (C "N" ... Q "H"), then trading
    assert seq[0] == ("H", "H") and seq[1:3] == [("K", ""), ("H", "Q")]
    k = seq.index(("Q", "H"))
    assert seq[3:k] and all(s == ("C", "N") for s in seq[3:k]) and seq[k + 1] == ("H", "T")
    first_add = min(m["timestamp"] for m in mine if m["type"] in "AF")
    (kmsg,) = [m for m in mine if m["type"] == "K"]
    assert first_add >= kmsg["timestamp"]
    assert not any(m["type"] in "EP" for m in mine if m["timestamp"] < ipo["end"])


def test_operational_halt_and_mwcb(halt_day):
    truth, msgs = halt_day
    hs = [m for m in msgs if m["type"] == "h"]
    assert [(m["market_code"], m["halt_action"]) for m in hs] == [("Q", "H"), ("Q", "T")]
    (op,) = [h for h in truth.halts if h["kind"] == "operational"]
    assert (op["start"], op["end"]) == (hs[0]["timestamp"], hs[1]["timestamp"])
    assert not any(m["type"] in "EP" and m["stock_locate"] == op["locate"] and op["start"] <= m["timestamp"] <= op["end"]
                   for m in msgs)
    assert [m["breached_level"] for m in msgs if m["type"] == "W"] == ["1"]


def test_far_off_orders_planted_deleted_and_one_trades(far_day):
    truth, msgs = far_day
    by_ref = {f["order_ref"]: f for f in truth.far_off_orders}
    whys = Counter(f["why"] for f in truth.far_off_orders)
    assert set(whys) == {"x8", "x1/8", "max_price", "sub_penny_1000", "best_and_trades"}
    seen = {}

    def check(i, m, book, loc):
        if m["type"] in ("A", "F") and m["order_ref"] in by_ref:
            f = by_ref[m["order_ref"]]
            assert (m["side"], m["price"], m["shares"], m["timestamp"]) == (f["side"], f["price"], f["shares"],
                                                                            f["timestamp"])
            (bp, _, _), (ap, _, _) = book.bbo(loc)
            if f["why"] == "best_and_trades":
                assert ap == f["price"]          # the best ask: nothing else on its side
            seen[m["order_ref"]] = "added"
        elif m["type"] == "E" and m["order_ref"] in by_ref:
            assert by_ref[m["order_ref"]]["executed"] == m["executed_shares"]
            seen[m["order_ref"]] = "traded"
        elif m["type"] == "D" and m["order_ref"] in by_ref:
            assert m["timestamp"] == by_ref[m["order_ref"]]["deleted_at"]

    itch_truth.bbo_changes(msgs, on_message=check)
    assert set(seen) == set(by_ref)
    assert sum(v == "traded" for v in seen.values()) == 1
    for f in truth.far_off_orders:
        assert f["deleted_at"] is not None
        if f["why"] == "max_price":
            assert f["price"] == 1_999_999_900
        elif f["why"] == "sub_penny_1000":
            assert f["price"] == 10_000_000 and truth.ticks[f["locate"]] == 1
        elif f["why"] in ("x8", "best_and_trades"):
            assert f["price"] >= 4 * truth.price_min[f["locate"]]
    assert truth.test_issues[0] in {f["locate"] for f in truth.far_off_orders if f["why"] == "best_and_trades"}


def test_real_shape_preset(tmp_path):
    """The real-shape preset: 9,000 symbols (two test issues among them, with order flow), a
    skewed share of messages, sub-penny symbols, every feature, the real day's mix."""
    out = tmp_path / "rs.itch"
    tj = tmp_path / "rs.json"
    assert main([str(out), "--preset", "real-shape", "--messages", "400000", "--seed", "2", "--truth", str(tj)]) == 0
    truth = DayTruth.from_json(tj.read_text())
    assert len(truth.symbols) == 9000 and truth.features == list(FEATURES)
    msgs = itch_truth.read_messages(out)
    counts = Counter(m["type"] for m in msgs)
    # (at 400k messages the directory, NOII and crosses of 9,000 symbols take ~20 % of the day, not
    # ~0.5 % as in a full day, and the flow is steered to whole-day shares: the order flow's own
    # mix is compared with the target's, within 20 %)
    n = sum(counts[t] for t in TARGET_MIX)
    tot = sum(TARGET_MIX.values())
    for t, target in TARGET_MIX.items():
        assert abs(counts[t] / n - target / tot) <= 0.2 * target / tot + 0.001, (t, counts[t] / n, target / tot)
    adds = Counter(m["stock_locate"] for m in msgs if m["type"] in "AF")
    ranked = sorted(adds.values(), reverse=True)
    top = sum(ranked[:90])   # the busiest 1 % of symbols
    assert top > 0.15 * sum(ranked)
    assert all(adds[loc] > 0 for loc in truth.test_issues)
    sub = {loc for loc, tk in truth.ticks.items() if tk == 1}
    assert len(sub) > 300 and any(m["price"] % 100 for m in msgs if m["type"] == "A" and m["stock_locate"] in sub)
    kinds = Counter(h["kind"] for h in truth.halts)
    assert kinds["pause"] >= 20 and kinds["halt"] >= 3 and kinds["ipo"] == 1
    assert len(truth.far_off_orders) >= 20
    # and it replays with no desync, equal to the truth after every message
    s = replay_itch(str(out), str(tmp_path / "o"), ReplayConfig(reports=("bbo", "desyncs")))
    assert s["desyncs"] == 0 and itch_truth.compare_replay(tmp_path / "o", msgs) == []


@pytest.mark.parametrize("day", ["halt_day", "far_day"])
def test_replay_equals_the_truth_after_every_message(day, request, tmp_path):
    """The replay's bbo after every message is the truth's, with no desync, and no order left."""
    truth, msgs = request.getfixturevalue(day)
    s = replay_itch(truth.path, str(tmp_path / "o"))
    assert itch_truth.compare_replay(tmp_path / "o", msgs) == []
    assert s["desyncs"] == 0 and s["residual_orders"] == 0
    if day == "halt_day":
        # a crossed book is only ever shown while its symbol does not trade, and says so
        import pandas as pd
        bbo = pd.read_parquet(tmp_path / "o" / "bbo.parquet")
        crossed = bbo[(bbo.bid_price > 0) & (bbo.ask_price > 0) & (bbo.bid_price >= bbo.ask_price)]
        assert len(crossed) > 0 and (crossed.trading_state != "T").all()
        assert set(crossed.instrument) == {h["locate"] for h in truth.halts if h["kind"] != "operational"}


def test_truth_compare_finds_residual_orders(tmp_path):
    """A day whose last deletes are cut off: the residual_order rows are the truth's live orders."""
    from lobreplay.testing import itch_faults as faults
    src = tmp_path / "d.itch"
    truth = generate_day(src, n_messages=30_000, n_symbols=12, seed=9)
    dst = tmp_path / "cut.itch"
    faults.inject("drop_final_delete", truth, dst, seed=1)
    msgs = itch_truth.read_messages(dst)
    s = replay_itch(str(dst), str(tmp_path / "o"))
    assert s["residual_orders"] == 1
    assert itch_truth.compare_replay(tmp_path / "o", msgs) == []
    # and a wrong truth is told apart: drop one more delete from the messages the truth reads
    i = max(k for k, m in enumerate(msgs) if m["type"] == "D")
    lines = itch_truth.compare_replay(tmp_path / "o", msgs[:i] + msgs[i + 1:])
    assert lines and "residual_order" in lines[-1]
