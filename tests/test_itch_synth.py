"""The synthetic ITCH day (lobreplay.testing.itch_synth) and the fault injector (lobreplay.testing.itch_faults).

The generated files are read back with the independent reference decoder
(tests/itch_ref.py) and replayed through a naive book written here (plain
dicts and lists; it shares no code with the generator's own book, with
tests/reference_book.py or with the C core). That replay must find nothing
wrong in a clean day, must agree with the generator's DayTruth, and must find
exactly the one injected problem in each faulted day.
"""
import dataclasses
import gzip
import os
import sys
from collections import Counter, defaultdict

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import itch_ref  # noqa: E402

from lobreplay.testing import itch_faults as faults# noqa: E402
from lobreplay.testing.itch_synth import TARGET_MIX, DayTruth, generate_day, main  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")

NS = 10**9
H = 3600 * NS


# ---------------------------------------------------------------------------------------------
# The naive replay


class NaiveReplay:
    """Follows the feed order by order and reports what does not fit a price-time book.

    Causes: unknown_reference, duplicate_reference, quantity_mismatch, crossed_add,
    crossed_replace, fill_order (an execution that is not the front order of the best
    level, or that follows a partial execution within one aggressor group),
    execution_price (a C outside a cross at a price that is not the order's, or a
    cross execution beyond the order's limit), residual_order (live at the end).
    One finding at most per message; the feed is then applied as it stands.
    """

    def __init__(self):
        self.orders = {}                       # ref -> [locate, side, price, shares]
        self.fifo = defaultdict(list)          # (locate, side, price) -> refs in time order
        self.prices = defaultdict(set)         # (locate, side) -> prices with orders
        self.findings = []                     # (cause, ref, locate, timestamp, index)
        self.live = Counter()
        self.peak = Counter()
        self.pmin, self.pmax = {}, {}
        self.executed = Counter()
        self.groups, self.cross_groups = [], []
        self._gkey = None
        self._last_exec = -2
        self._prev_partial = False
        self.counts = Counter()

    # book primitives
    def _add(self, ref, loc, side, price, shares):
        self.orders[ref] = [loc, side, price, shares]
        self.fifo[(loc, side, price)].append(ref)
        self.prices[(loc, side)].add(price)
        self.live[loc] += 1
        self.peak[loc] = max(self.peak[loc], self.live[loc])

    def _remove(self, ref):
        loc, side, price, _ = o = self.orders.pop(ref)
        q = self.fifo[(loc, side, price)]
        q.remove(ref)
        if not q:
            del self.fifo[(loc, side, price)]
            self.prices[(loc, side)].discard(price)
        self.live[loc] -= 1
        return o

    def best(self, loc, side):
        ps = self.prices.get((loc, side))
        if not ps:
            return None
        return max(ps) if side == "B" else min(ps)

    def _crosses(self, loc, side, price):
        opp = self.best(loc, "S" if side == "B" else "B")
        return opp is not None and (price >= opp if side == "B" else price <= opp)

    def _seen(self, loc, price):
        self.pmin[loc] = min(self.pmin.get(loc, price), price)
        self.pmax[loc] = max(self.pmax.get(loc, price), price)

    def _find(self, cause, ref, m, i):
        self.findings.append((cause, ref, m["stock_locate"], m["timestamp"], i))

    # the feed
    def step(self, i, m):
        t = m["type"]
        self.counts[t] += 1
        loc = m["stock_locate"]
        if t in ("A", "F"):
            ref = m["order_ref"]
            if ref in self.orders:
                self._find("duplicate_reference", ref, m, i)
                return
            if self._crosses(loc, m["side"], m["price"]):
                self._find("crossed_add", ref, m, i)
            self._add(ref, loc, m["side"], m["price"], m["shares"])
            self._seen(loc, m["price"])
        elif t == "U":
            ref = m["order_ref"]
            if ref not in self.orders:
                self._find("unknown_reference", ref, m, i)
                return
            o = self._remove(ref)
            if self._crosses(o[0], o[1], m["price"]):
                self._find("crossed_replace", ref, m, i)
            self._add(m["new_order_ref"], o[0], o[1], m["price"], m["shares"])
            self._seen(loc, m["price"])
        elif t == "X":
            o = self.orders.get(m["order_ref"])
            if o is None:
                self._find("unknown_reference", m["order_ref"], m, i)
            elif m["cancelled_shares"] >= o[3]:
                self._find("quantity_mismatch", m["order_ref"], m, i)
                self._remove(m["order_ref"])
            else:
                o[3] -= m["cancelled_shares"]
        elif t == "D":
            if m["order_ref"] not in self.orders:
                self._find("unknown_reference", m["order_ref"], m, i)
            else:
                self._remove(m["order_ref"])
        elif t in ("E", "C"):
            self._execution(i, m)
        elif t == "Q":
            cg = self.cross_groups
            if cg and cg[-1][0] == m["timestamp"] and cg[-1][1] == loc and len(cg[-1]) == 4:
                cg[-1] = cg[-1] + (m["cross_type"], m["shares"])
        if t not in ("E", "C"):
            self._last_exec = -2

    def _execution(self, i, m):
        ref, loc, ts, x = m["order_ref"], m["stock_locate"], m["timestamp"], m["executed_shares"]
        o = self.orders.get(ref)
        if o is None:
            self._find("unknown_reference", ref, m, i)
            self._last_exec = -2
            return
        side, price = o[1], o[2]
        self.executed[loc] += x
        if m["type"] == "C":
            self._seen(loc, m["execution_price"])
        if m["type"] == "C" and m["printable"] == "N":
            # a cross: any price within the order's limit
            p = m["execution_price"]
            if (side == "B" and p > price) or (side == "S" and p < price):
                self._find("execution_price", ref, m, i)
            key = (ts, loc, side)
            if self.cross_groups and self.cross_groups[-1][:3] == key and self._last_exec == i - 1:
                self.cross_groups[-1][3].append((ref, x, p))
            else:
                self.cross_groups.append((ts, loc, side, [(ref, x, p)]))
            self._consume(ref, o, x, m, i)
            self._last_exec = i
            return
        key = (ts, loc, side)
        new_group = not (key == self._gkey and self._last_exec == i - 1)
        exec_price = m["execution_price"] if m["type"] == "C" else price
        if new_group:
            self.groups.append((ts, loc, side, []))
        self.groups[-1][3].append((ref, x, exec_price))
        best = self.best(loc, side)
        if x > o[3]:
            self._find("quantity_mismatch", ref, m, i)
        elif (not new_group and self._prev_partial) or best != price or self.fifo[(loc, side, price)][0] != ref:
            self._find("fill_order", ref, m, i)
        elif exec_price != price:
            self._find("execution_price", ref, m, i)
        self._prev_partial = x < o[3]
        self._gkey = key
        self._consume(ref, o, x, m, i)
        self._last_exec = i

    def _consume(self, ref, o, x, m, i):
        if x >= o[3]:
            self._remove(ref)
        else:
            o[3] -= x

    def finish(self, last):
        for ref, o in self.orders.items():
            self.findings.append(("residual_order", ref, o[0], last["timestamp"], None))


def replay(msgs):
    r = NaiveReplay()
    for i, m in enumerate(msgs):
        r.step(i, m)
    r.finish(msgs[-1])
    return r


def decode_file(path):
    data = open(path, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [m for _, m in itch_ref.iter_messages(data)]


# ---------------------------------------------------------------------------------------------
# Fixtures: one 200k-message day for the shape, one smaller day for determinism and the faults


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "day.itch"
    truth = generate_day(path, n_messages=200_000, n_symbols=50, seed=7)
    return truth, decode_file(path)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth_small") / "small.itch"
    truth = generate_day(path, n_messages=30_000, n_symbols=20, seed=11)
    return truth, faults.read_payloads(path)


# ---------------------------------------------------------------------------------------------
# Determinism


def test_same_seed_same_bytes(tmp_path):
    a, b, c = tmp_path / "a.itch", tmp_path / "b.itch", tmp_path / "c.itch"
    ta = generate_day(a, n_messages=20_000, n_symbols=15, seed=5)
    tb = generate_day(b, n_messages=20_000, n_symbols=15, seed=5)
    generate_day(c, n_messages=20_000, n_symbols=15, seed=6)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert dataclasses.replace(ta, path="", elapsed_s=0) == dataclasses.replace(tb, path="", elapsed_s=0)


def test_gzip_output_is_reproducible_and_holds_the_same_stream(tmp_path):
    raw, g1, g2 = tmp_path / "d.itch", tmp_path / "d1.itch.gz", tmp_path / "d2.itch.gz"
    generate_day(raw, n_messages=20_000, n_symbols=15, seed=5)
    generate_day(g1, n_messages=20_000, n_symbols=15, seed=5, gzip=True)
    generate_day(g2, n_messages=20_000, n_symbols=15, seed=5, gzip=True)
    assert g1.read_bytes() == g2.read_bytes()
    assert g1.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(g1.read_bytes()) == raw.read_bytes()


def test_truth_round_trips_through_json(day):
    truth, _ = day
    back = DayTruth.from_json(truth.to_json())
    assert back == truth


# ---------------------------------------------------------------------------------------------
# The day's shape


def test_message_mix_near_the_real_day(day):
    truth, msgs = day
    counts = Counter(m["type"] for m in msgs)
    assert dict(counts) == truth.counts
    n = len(msgs)
    assert n == truth.n_messages == 200_000
    share = {t: counts[t] / n for t in counts}
    for t, target in TARGET_MIX.items():
        tol = 0.05 * target if target >= 0.02 else 0.10 * target
        assert abs(share[t] - target) <= tol, (t, share[t], target)
    # the rest of the real day's mix is there too, in small amounts
    for t in ("I", "C", "Q", "H", "Y", "R", "L"):
        assert counts[t] > 0, t
    assert 0.003 < share["I"] < 0.015
    assert counts["S"] == 6 and counts["V"] == 1


def test_start_of_day_like_a_real_file(day):
    truth, msgs = day
    first = msgs[0]
    assert (first["type"], first["event_code"], first["stock_locate"]) == ("S", "O", 0)
    assert 3 * H + 60 * NS <= first["timestamp"] <= 3 * H + 5 * 60 * NS
    spin_end = next(i for i, m in enumerate(msgs) if m["type"] == "S" and m["event_code"] == "S")
    spin = msgs[1:spin_end]
    assert {m["type"] for m in spin} == {"R", "H", "Y", "L", "V"}
    rs = [m for m in spin if m["type"] == "R"]
    assert [m["stock_locate"] for m in rs] == list(range(1, 51))
    assert [m["stock"] for m in rs] == sorted(m["stock"] for m in rs)
    assert {m["stock_locate"]: m["stock"] for m in rs} == truth.symbols
    assert sorted(m["stock_locate"] for m in rs if m["authenticity"] == "T") == truth.test_issues
    assert len(truth.test_issues) == 2
    assert all(m["authenticity"] in "PT" and m["round_lot_size"] == 100 for m in rs)
    sym = truth.symbols
    hs = [m for m in spin if m["type"] == "H"]
    ys = [m for m in spin if m["type"] == "Y"]
    assert sorted(m["stock_locate"] for m in hs) == sorted(m["stock_locate"] for m in ys) == list(range(1, 51))
    assert all(m["trading_state"] == "T" and m["reason"] == "" and sym[m["stock_locate"]] == m["stock"] for m in hs)
    assert all(m["reg_sho_action"] == "0" and sym[m["stock_locate"]] == m["stock"] for m in ys)
    # interleaved: the H/Y spin starts before the R spin ends
    first_h = next(i for i, m in enumerate(spin) if m["type"] == "H")
    last_r = max(i for i, m in enumerate(spin) if m["type"] == "R")
    assert first_h < last_r
    (v,) = [m for m in spin if m["type"] == "V"]
    assert v["stock_locate"] == 0 and v["level1"] > v["level2"] > v["level3"] > 0
    assert 1 <= sum(m["type"] == "L" for m in spin) <= 10


def test_system_events_and_timestamps(day):
    _, msgs = day
    events = [(m["event_code"], m["timestamp"]) for m in msgs if m["type"] == "S"]
    assert [e for e, _ in events] == list("OSQMEC")
    t = dict(events)
    assert 4 * H <= t["S"] < 4 * H + NS
    assert 9 * H + 30 * 60 * NS <= t["Q"] < 9 * H + 30 * 60 * NS + NS
    assert 16 * H <= t["M"] < 16 * H + NS
    assert 20 * H <= t["E"] < 20 * H + NS
    assert msgs[-1]["type"] == "S" and msgs[-1]["event_code"] == "C"
    ts = [m["timestamp"] for m in msgs]
    assert all(a <= b for a, b in zip(ts, ts[1:]))
    order_msgs = [m for m in msgs if m["type"] in "AFUEXDCP"]
    assert 4 * H <= order_msgs[0]["timestamp"] and order_msgs[-1]["timestamp"] < 20 * H
    # the flow spans the whole session, busiest in regular hours
    regular = sum(9.5 * H <= m["timestamp"] < 16 * H for m in order_msgs)
    assert 0.6 < regular / len(order_msgs) < 0.95
    assert sum(m["timestamp"] < 9.5 * H for m in order_msgs) > 1000
    assert sum(m["timestamp"] >= 16 * H for m in order_msgs) > 1000


def test_references_matches_and_prices(day):
    truth, msgs = day
    new_refs = [m["order_ref"] if m["type"] in "AF" else m["new_order_ref"] for m in msgs if m["type"] in "AFU"]
    assert all(a < b for a, b in zip(new_refs, new_refs[1:]))
    matches = [m["match_number"] for m in msgs if m["type"] in "ECPQ"]
    assert all(a < b for a, b in zip(matches, matches[1:]))
    sub_penny_symbols = set()
    for m in msgs:
        if m["type"] in "AFU":
            p = m["price"]
            assert 0 < p <= 2_000_000_000
            if p % 100:
                assert p < 10_000, m  # sub-penny only below $1
                sub_penny_symbols.add(m["stock_locate"])
        if m["type"] == "P":
            assert m["order_ref"] == 0 and m["side"] == "B" and m["shares"] > 0
    assert sub_penny_symbols and sub_penny_symbols <= {loc for loc, tk in truth.ticks.items() if tk == 1}
    assert sum(tk == 100 for tk in truth.ticks.values()) > 40
    # a skewed, Zipf-like activity: the busiest symbol has many times the median's adds
    adds = Counter(m["stock_locate"] for m in msgs if m["type"] in "AF")
    ranked = sorted(adds.values(), reverse=True)
    assert ranked[0] > 5 * ranked[len(ranked) // 2]


def test_crosses_noii_and_status_changes(day):
    truth, msgs = day
    open_t, close_t = 9.5 * H, 16 * H
    cs = [m for m in msgs if m["type"] == "C"]
    n_cs = [m for m in cs if m["printable"] == "N"]
    assert n_cs and any(m["printable"] == "Y" for m in cs)
    for m in n_cs:
        assert open_t <= m["timestamp"] < open_t + NS or close_t <= m["timestamp"] < close_t + NS
    qs = [m for m in msgs if m["type"] == "Q"]
    non_test = len(truth.symbols) - len(truth.test_issues)
    assert Counter(m["cross_type"] for m in qs) == {"O": non_test, "C": non_test}
    q_at = {(m["timestamp"], m["stock_locate"]) for m in qs}
    assert all((m["timestamp"], m["stock_locate"]) in q_at for m in n_cs)
    for m in msgs:
        if m["type"] == "I":
            t = m["timestamp"]
            assert (9.4 * H < t < open_t and m["cross_type"] == "O") or (15.8 * H < t < close_t and
                                                                      m["cross_type"] == "C")
    hs = [m for m in msgs if m["type"] == "H" and m["timestamp"] > 4 * H]
    assert {m["trading_state"] for m in hs} == {"P", "H", "T"}
    assert any(m["reason"] == "LUDP" for m in hs)
    assert sum(m["type"] == "Y" and m["reg_sho_action"] == "1" for m in msgs) == 2
    assert sum(m["type"] == "J" for m in msgs) == 1


# ---------------------------------------------------------------------------------------------
# Replay through the naive book


def test_naive_replay_finds_nothing_and_agrees_with_truth(day):
    truth, msgs = day
    r = replay(msgs)
    assert r.findings == []
    assert r.orders == {} and truth.final_live == 0
    assert dict(r.counts) == truth.counts
    assert {loc: r.peak[loc] for loc in truth.symbols} == truth.peak_live
    assert {loc: r.executed[loc] for loc in truth.symbols} == truth.executed_shares
    assert r.pmin == truth.price_min and r.pmax == truth.price_max
    assert r.groups == truth.aggressor_groups
    assert len(r.groups) == truth.n_aggressor_groups
    assert r.cross_groups == truth.cross_groups
    assert max(truth.peak_live.values()) > 500
    assert truth.peak_live_total >= max(truth.peak_live.values())


def test_aggressor_groups_are_price_time_consistent(day):
    """Rebuild each group from the book as it stood before it: an aggressor of the group's
    total size, best price first, FIFO within a price, must produce exactly the feed's fills."""
    truth, msgs = day
    r = NaiveReplay()
    starts = {}
    for i, m in enumerate(msgs):
        if m["type"] in ("E", "C") and (i == 0 or msgs[i - 1]["type"] not in ("E", "C")
                                        or msgs[i - 1]["timestamp"] != m["timestamp"]):
            starts[i] = m
    multi = 0
    for i, m in enumerate(msgs):
        if i in starts and not (m["type"] == "C" and m["printable"] == "N"):
            side = r.orders[m["order_ref"]][1]
            j, total = i, 0
            while j < len(msgs) and msgs[j]["type"] in ("E", "C") and msgs[j]["timestamp"] == m["timestamp"]:
                total += msgs[j]["executed_shares"]
                j += 1
            expected, left = [], total
            for p in sorted(r.prices[(m["stock_locate"], side)], reverse=side == "B"):
                for ref in r.fifo[(m["stock_locate"], side, p)]:
                    if not left:
                        break
                    x = min(left, r.orders[ref][3])
                    expected.append((ref, x, p))
                    left -= x
            feed = [(msgs[k]["order_ref"], msgs[k]["executed_shares"],
                     msgs[k].get("execution_price", r.orders[msgs[k]["order_ref"]][2])) for k in range(i, j)]
            assert feed == expected, (i, feed, expected)
            multi += len(feed) > 1
        r.step(i, m)
    assert multi > 100


def test_adds_and_replaces_never_cross(day):
    _, msgs = day
    r = NaiveReplay()
    checked = 0
    for i, m in enumerate(msgs):
        if m["type"] in ("A", "F", "U"):
            side = m["side"] if m["type"] != "U" else r.orders[m["order_ref"]][1]
            opp = r.best(m["stock_locate"], "S" if side == "B" else "B")
            if opp is not None:
                assert (m["price"] < opp) if side == "B" else (m["price"] > opp), (i, m, opp)
                checked += 1
        r.step(i, m)
    assert checked > 90_000


def test_aggressor_remainders_rest_at_the_limit(day):
    _, msgs = day
    r = NaiveReplay()
    remainders = 0
    last = None  # (locate, side, price) of the order the last execution hit
    for i, m in enumerate(msgs):
        if m["type"] == "A" and msgs[i - 1]["type"] == "E" and msgs[i - 1]["timestamp"] == m["timestamp"]:
            remainders += 1
            loc, side, price = last
            assert m["stock_locate"] == loc and m["side"] != side and m["price"] == price, (i, m, last)
        if m["type"] in ("E", "C"):
            o = r.orders[m["order_ref"]]
            last = (o[0], o[1], o[2])
        r.step(i, m)
    assert remainders > 20


def test_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="too small"):
        generate_day(tmp_path / "x.itch", n_messages=100, n_symbols=50)
    with pytest.raises(ValueError, match="n_symbols"):
        generate_day(tmp_path / "x.itch", n_messages=10_000, n_symbols=0)


def test_command_line(tmp_path, capsys):
    out, truth = tmp_path / "cli.itch.gz", tmp_path / "cli.json"
    assert main([str(out), "--messages", "15000", "--symbols", "12", "--seed", "3", "--gzip",
                 "--resting-per-symbol", "20", "--truth", str(truth)]) == 0
    printed = capsys.readouterr().out
    assert '"final_live": 0' in printed
    t = DayTruth.from_json(truth.read_text())
    assert t.resting_target == 240 and t.peak_live_total >= 200
    msgs = decode_file(out)
    assert len(msgs) == t.n_messages and dict(Counter(m["type"] for m in msgs)) == t.counts


# ---------------------------------------------------------------------------------------------
# Faults: each changes the day in exactly one place, and the naive replay finds exactly it


def _window(old, new):
    """The differing window: (a, old[a:len(old)-b], new[a:len(new)-b])."""
    a = 0
    while a < min(len(old), len(new)) and old[a] == new[a]:
        a += 1
    b = 0
    while b < min(len(old), len(new)) - a and old[-1 - b] == new[-1 - b]:
        b += 1
    return a, old[a:len(old) - b], new[a:len(new) - b]


def _dec(payload):
    return itch_ref.decode_message(payload)


def test_clean_small_day_has_no_finding(small):
    _, payloads = small
    r = replay([_dec(p) for p in payloads])
    assert r.findings == []


@pytest.mark.parametrize("kind", sorted(faults.FAULTS))
def test_fault_is_exactly_the_injected_one(small, kind):
    _, old = small
    new, f = faults.FAULTS[kind](old, seed=1)
    assert f.kind == kind
    a, ow, nw = _window(old, new)
    om, nm = [_dec(p) for p in ow], [_dec(p) for p in nw]
    if kind == "swap_executions":
        assert len(ow) == len(nw) == 2 and nw == ow[::-1] and a == f.index
        assert [m["type"] for m in om] == ["E", "E"] and om[0]["timestamp"] == om[1]["timestamp"]
        assert nm[0]["order_ref"] == f.order_ref and f.detail["other_ref"] == om[0]["order_ref"]
    elif kind == "overfill_execution":
        assert len(om) == len(nm) == 1 and a == f.index
        assert {k for k in om[0] if om[0][k] != nm[0][k]} == {"executed_shares"}
        assert nm[0]["executed_shares"] > om[0]["executed_shares"]
    elif kind == "drop_add":
        assert len(om) == 1 and nm == [] and om[0]["type"] == "A" and om[0]["order_ref"] == f.order_ref
        d = _dec(new[f.index])
        assert (d["type"], d["order_ref"], d["timestamp"]) == ("D", f.order_ref, f.timestamp)
    elif kind == "crossed_replace":
        assert [m["type"] for m in om] == ["D"] and [m["type"] for m in nm] == ["U", "D"] and a == f.index
        u, d = nm
        assert u["order_ref"] == om[0]["order_ref"] == f.order_ref
        assert d == {**om[0], "order_ref": u["new_order_ref"]}
        assert u["timestamp"] == d["timestamp"] == f.timestamp
    elif kind == "crossed_add":
        assert om == [] and [m["type"] for m in nm] == ["A", "D"] and a == f.index
        assert nm[0]["order_ref"] == nm[1]["order_ref"] == f.order_ref
        assert nm[0]["timestamp"] == nm[1]["timestamp"] == f.timestamp
    elif kind == "drop_final_delete":
        assert nm == [] and len(om) == 1 and om[0]["type"] == "D" and om[0]["order_ref"] == f.order_ref
        assert f.index == len(new)
    elif kind == "off_price_execution":
        assert len(om) == len(nm) == 1 and a == f.index
        e, c = om[0], nm[0]
        assert (e["type"], c["type"], c["printable"]) == ("E", "C", "Y")
        assert all(c[k] == e[k] for k in e if k != "type")
        assert c["execution_price"] == f.detail["execution_price"] != f.detail["order_price"]
    else:  # pragma: no cover
        raise AssertionError(kind)
    # the naive replay finds exactly the expected one
    msgs = [_dec(p) for p in new]
    r = replay(msgs)
    index = None if f.cause == "residual_order" else f.index
    assert r.findings == [(f.cause, f.order_ref, f.locate, f.timestamp, index)]
    if f.cause != "residual_order":
        assert msgs[f.index]["order_ref"] == f.order_ref and msgs[f.index]["timestamp"] == f.timestamp


def test_inject_writes_the_faulted_file(small, tmp_path):
    truth, payloads = small
    for kind in ("crossed_add", "drop_final_delete"):
        dst = tmp_path / f"{kind}.itch.gz"
        f = faults.inject(kind, truth, dst, seed=2)
        new, f2 = faults.FAULTS[kind](payloads, seed=2)
        assert f == f2
        assert dst.read_bytes()[:2] == b"\x1f\x8b"
        assert faults.read_payloads(dst) == new
    with pytest.raises(ValueError, match="unknown fault kind"):
        faults.inject("nope", truth, tmp_path / "x.itch")


def test_fault_seeds_pick_different_places(small):
    _, payloads = small
    picks = {faults.swap_executions(payloads, seed=s)[1].index for s in range(6)}
    assert len(picks) > 1


# ---------------------------------------------------------------------------------------------
# The bundled sample day (data/)


def test_bundled_sample_day_is_what_the_script_makes(tmp_path):
    sys.path.insert(0, DATA)
    try:
        import make_sample_day
    finally:
        sys.path.remove(DATA)
    gz = os.path.join(DATA, make_sample_day.ITCH)
    assert os.path.getsize(gz) < 1_000_000
    make_sample_day.make(tmp_path)
    assert gzip.decompress((tmp_path / make_sample_day.ITCH).read_bytes()) == gzip.decompress(open(gz, "rb").read())
    truth_text = open(os.path.join(DATA, make_sample_day.TRUTH)).read()
    assert (tmp_path / make_sample_day.TRUTH).read_text() == truth_text
    truth = DayTruth.from_json(truth_text)
    msgs = decode_file(gz)
    assert len(msgs) == truth.n_messages == make_sample_day.PARAMS["n_messages"]
    r = replay(msgs)
    assert r.findings == [] and dict(r.counts) == truth.counts
    assert r.groups == truth.aggressor_groups and r.cross_groups == truth.cross_groups
    assert {loc: r.executed[loc] for loc in truth.symbols} == truth.executed_shares
