"""The C day generator (csrc/tools/itch_synth.c through lobreplay.testing.itch_synth.generate_day_fast):
deterministic, the real day's mix, the planted features present, and its days replay with no
desync and equal to the naive ground-truth book (tests/itch_truth.py) after every message."""
import os
import sys
from collections import Counter

import pytest


import itch_truth  # noqa: E402

from lobreplay.itch.replay import replay_itch  # noqa: E402
from lobreplay.testing.itch_synth import FEATURES, TARGET_MIX, generate_day_fast, main  # noqa: E402

NS = 10**9
HALTS = ("halts", "ipo", "operational", "mwcb")


@pytest.fixture(scope="module")
def fast_day(tmp_path_factory):
    """Every feature, the $199,999.99 orders too: 300k messages, 60 symbols."""
    path = tmp_path_factory.mktemp("fast") / "20191230.fast.itch"
    truth = generate_day_fast(path, n_messages=300_000, n_symbols=60, seed=3, features=FEATURES)
    return truth, itch_truth.read_messages(path)


def test_same_seed_same_bytes(tmp_path):
    a, b, c = tmp_path / "a.itch", tmp_path / "b.itch", tmp_path / "c.itch"
    ta = generate_day_fast(a, n_messages=200_000, n_symbols=50, seed=5, chunk_bytes=4 << 20)
    tb = generate_day_fast(b, n_messages=200_000, n_symbols=50, seed=5, chunk_bytes=16 << 20)
    generate_day_fast(c, n_messages=200_000, n_symbols=50, seed=6)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert ta.counts == tb.counts and ta.halts == tb.halts and ta.far_off_orders == tb.far_off_orders
    assert ta.n_messages == 200_000 and ta.bytes == a.stat().st_size


def test_gzip_holds_the_same_stream(tmp_path):
    import gzip
    raw, gz = tmp_path / "d.itch", tmp_path / "d.itch.gz"
    generate_day_fast(raw, n_messages=60_000, n_symbols=20, seed=2)
    generate_day_fast(gz, n_messages=60_000, n_symbols=20, seed=2, gzip=True)
    assert gzip.decompress(gz.read_bytes()) == raw.read_bytes()


def test_every_message_decodes_and_the_counts_agree(fast_day):
    truth, msgs = fast_day
    assert len(msgs) == truth.n_messages == 300_000
    assert dict(Counter(m["type"] for m in msgs)) == truth.counts
    ts = [m["timestamp"] for m in msgs]
    assert all(x <= y for x, y in zip(ts, ts[1:]))
    assert [m["event_code"] for m in msgs if m["type"] == "S"] == list("OSQMEC")
    refs = [m["order_ref"] if m["type"] in "AF" else m["new_order_ref"] for m in msgs if m["type"] in "AFU"]
    assert all(x < y for x, y in zip(refs, refs[1:]))
    matches = [m["match_number"] for m in msgs if m["type"] in "ECPQ"]
    assert all(x < y for x, y in zip(matches, matches[1:]))
    rs = [m for m in msgs if m["type"] == "R"]
    assert [m["stock"] for m in rs] == sorted(m["stock"] for m in rs) == [truth.symbols[k] for k in range(1, 61)]
    assert {m["stock"] for m in rs if m["authenticity"] == "T"} == {"ZVZZT", "ZXZZT"}


@pytest.mark.slow
def test_full_day_mix_and_symbols(tmp_path):
    """The full-day preset's shape at 5M messages: 9,000 symbols, the real day's mix, a skewed
    share of messages, sub-penny symbols, test issues with flow, halts at a real day's rate."""
    out = tmp_path / "full.itch"
    t = generate_day_fast(out, n_messages=5_000_000, n_symbols=9000, seed=1, max_price=False)
    from lobreplay.itch.reader import ItchFile
    f = ItchFile(str(out))
    for _ in f.chunks():
        pass
    assert f.stats.messages == t.n_messages == 5_000_000
    assert {k: v for k, v in f.stats.by_type.items() if v} == t.counts
    assert len(t.symbols) == 9000 and t.final_live == 0
    mix = t.mix()
    for typ, target in TARGET_MIX.items():
        assert abs(mix[typ] - target) <= 0.05 * target + 0.001, (typ, mix[typ], target)
    kinds = Counter(h["kind"] for h in t.halts)
    assert kinds["pause"] >= 20 and kinds["halt"] >= 3 and kinds["ipo"] == 1 and kinds["operational"] == 1
    assert sum(tk == 1 for tk in t.ticks.values()) > 300


def test_skew_sub_penny_and_test_issues(fast_day):
    truth, msgs = fast_day
    adds = Counter(m["stock_locate"] for m in msgs if m["type"] in "AF")
    ranked = sorted(adds.values(), reverse=True)
    assert ranked[0] > 5 * ranked[len(ranked) // 2]
    assert all(adds[loc] > 50 for loc in truth.test_issues)
    sub = {loc for loc, tk in truth.ticks.items() if tk == 1}
    assert sub and any(m["price"] % 100 and m["price"] < 10_000 for m in msgs
                       if m["type"] == "A" and m["stock_locate"] in sub)
    for m in msgs:
        if m["type"] in "AF" and m["price"] % 100:
            assert m["stock_locate"] in sub


def test_planted_features_present(fast_day):
    truth, msgs = fast_day
    kinds = Counter(h["kind"] for h in truth.halts)
    assert kinds == {"pause": 1, "halt": 1, "ipo": 1, "operational": 1}
    planted = {c["order_ref"]: c for c in truth.crossing_orders}
    far = {f["order_ref"]: f for f in truth.far_off_orders}
    assert len(planted) >= 8 and {f["why"] for f in far.values()} == {"x8", "x1/8", "max_price", "sub_penny_1000",
                                                                        "best_and_trades"}
    seen = Counter()

    def check(i, m, book, loc):
        t = m["type"]
        if t in "AF" and m["order_ref"] in planted:
            c = planted[m["order_ref"]]
            assert book.crossed(loc) and (m["side"], m["price"], m["shares"]) == (c["side"], c["price"], c["shares"])
            seen["crossing"] += 1
        if t in "AF" and m["order_ref"] in far:
            f = far[m["order_ref"]]
            assert (m["side"], m["price"], m["shares"], m["timestamp"]) == (f["side"], f["price"], f["shares"],
                                                                            f["timestamp"])
            if f["why"] == "best_and_trades":
                assert book.bbo(loc)[1][0] == f["price"]
            seen["far"] += 1
        if t == "E" and m["order_ref"] in far:
            assert m["executed_shares"] == far[m["order_ref"]]["executed"] > 0
            seen["far_traded"] += 1
        if t == "D" and m["order_ref"] in far:
            assert m["timestamp"] == far[m["order_ref"]]["deleted_at"]
            seen["far_deleted"] += 1
        if t == "Q" and m["cross_type"] == "H":
            assert not book.crossed(loc if loc is not None else m["stock_locate"])
            seen["halt_cross"] += 1

    _, book = itch_truth.bbo_changes(msgs, on_message=check)
    assert not book.problems and not book.orders
    assert seen["crossing"] == len(planted) and seen["far"] == len(far) == seen["far_deleted"]
    assert seen["far_traded"] == 1 and seen["halt_cross"] == 3
    for h in truth.halts:
        if h["kind"] != "operational":
            assert h["executions"] >= 2 and h["cross_shares"] > 0 and h["cross_price"] > 0
    types = Counter(m["type"] for m in msgs)
    assert types["K"] == 1 and types["h"] == 2 and types["W"] == 1 and types["J"] == 1


@pytest.mark.slow
def test_replays_with_no_desync_and_equals_the_truth(tmp_path):
    """A day of the C generator with far-off orders (not the $199,999.99 ones): 0 desyncs, and
    the replay's bbo after every message is the truth's."""
    path = tmp_path / "d.itch"
    generate_day_fast(path, n_messages=300_000, n_symbols=60, seed=8, features=("far_off",), max_price=False)
    s = replay_itch(str(path), str(tmp_path / "o"))
    assert s["desyncs"] == 0 and s["residual_orders"] == 0 and s["messages"] == 300_000
    assert itch_truth.compare_replay(tmp_path / "o", itch_truth.read_messages(path)) == []


@pytest.mark.slow
@pytest.mark.parametrize("features", [HALTS, FEATURES])
def test_feature_days_replay_equal_to_the_truth(features, tmp_path):
    """Halts, the IPO, their crossing orders and crosses, far-off prices: the replay equals the
    truth after every message, with no desync."""
    path = tmp_path / "d.itch"
    generate_day_fast(path, n_messages=300_000, n_symbols=60, seed=3, features=features)
    s = replay_itch(str(path), str(tmp_path / "o"))
    assert itch_truth.compare_replay(tmp_path / "o", itch_truth.read_messages(path)) == []
    assert s["desyncs"] == 0


def test_rejects_bad_arguments(tmp_path, capsys):
    with pytest.raises(ValueError, match="too small"):
        generate_day_fast(tmp_path / "x.itch", n_messages=1000, n_symbols=9000)
    with pytest.raises(ValueError, match="unknown feature"):
        generate_day_fast(tmp_path / "x.itch", n_messages=100_000, n_symbols=10, features=("nope",))
    assert main([str(tmp_path / "x.itch"), "--engine", "c", "--messages", "10", "--symbols", "50"]) == 2
    assert "too small" in capsys.readouterr().err


def test_command_line_full_day_preset(tmp_path, capsys):
    out = tmp_path / "cli.itch"
    assert main([str(out), "--preset", "full-day", "--messages", "400000", "--seed", "4", "--no-max-price",
                 "--truth", str(tmp_path / "t.json")]) == 0
    printed = capsys.readouterr().out
    assert '"symbols": 9000' in printed and '"final_live": 0' in printed
    msgs = itch_truth.read_messages(out)
    assert len(msgs) == 400_000 and not any(m["type"] in "AFU" and m["price"] == 1_999_999_900 for m in msgs)
