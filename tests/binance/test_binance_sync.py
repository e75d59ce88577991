"""The Binance depth sync machine on hand-made sequences, spot and USD-M: the machine (in C,
driven by lobreplay.binance.sync.DepthSync) and its pure-Python reference
(tests/reference_sync.py) alike; and the two side by side on random runs."""
import functools
import json
import random

import numpy as np
import pytest

from lobreplay.l2 import lobc
from lobreplay.binance.sync import SPOT, USDM, DepthSync, Levels, decode_json
from lobreplay.l2.lobc import (DIFF_BEGIN, DIFF_END, DIFF_LEVEL, GAP, GAP_DISCONNECT, GAP_MALFORMED, GAP_RATE_LIMIT,
                            GAP_SEQUENCE, GAP_SHUTDOWN, GAP_STALE_SNAPSHOT, RESYNC, SNAPSHOT_BEGIN, SNAPSHOT_END,
                            SNAPSHOT_LEVEL, TICKER_ASK, TICKER_BID, TRADE)

from reference_sync import ReferenceDepthSync  # noqa: E402

E8 = 10**8


@pytest.fixture(params=[DepthSync, functools.partial(DepthSync, c_decoder=False), ReferenceDepthSync],
                ids=["c", "c-python-decoded", "reference"])
def Machine(request):
    """Each hand-made sequence runs on the machine (its messages decoded in C where the decoder
    takes them, or all read in Python) and on its reference."""
    return request.param


def dep(U, u, pu=None, sym="BTCUSDT", b=(("100.5", "1"),), a=(("101", "2.5"),), envelope=True):
    d = {"e": "depthUpdate", "E": 1700000000000, "s": sym, "U": U, "u": u}
    if pu is not None:
        d["T"] = 1699999999999
        d["pu"] = pu
    d["b"] = [list(x) for x in b]
    d["a"] = [list(x) for x in a]
    if envelope:
        return json.dumps({"stream": sym.lower() + "@depth@100ms", "data": d})
    return json.dumps(d)


def snap(L, bids=(("100", "3"),), asks=(("102", "4"),)):
    return json.dumps({"lastUpdateId": L, "bids": [list(x) for x in bids], "asks": [list(x) for x in asks]})


def kinds(recs):
    return [int(k) for k in recs["kind"]]


def diffs(recs):
    d = recs[recs["kind"] == DIFF_BEGIN]
    return [(int(x["first_id"]), int(x["last_id"])) for x in d]


def gaps(recs):
    g = recs[recs["kind"] == GAP]
    return [(int(x["flags"]), int(x["first_id"]), int(x["last_id"])) for x in g]


# ------------------------------------------------------------------ spot

def test_spot_first_event_starts_exactly_at_L_plus_1(Machine):
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed(dep(90, 95), 1)
    assert m.snapshot_wanted() == ["BTCUSDT"]
    m.mark_requested("BTCUSDT")
    assert m.snapshot_wanted() == []
    m.feed(dep(96, 100), 2)
    m.feed_snapshot("BTCUSDT", snap(100), 3)   # L = 100: [90,95] and [96,100] are covered
    m.feed(dep(101, 105), 4)                    # U == L + 1 exactly: accepted
    r = m.take_records()
    assert kinds(r) == [SNAPSHOT_BEGIN, SNAPSHOT_LEVEL, SNAPSHOT_LEVEL, SNAPSHOT_END,
                        DIFF_BEGIN, DIFF_LEVEL, DIFF_LEVEL, DIFF_END]
    assert int(r[0]["first_id"]) == 100 and int(r[3]["first_id"]) == 100
    assert diffs(r) == [(101, 105)]
    assert m.symbol_stats()["BTCUSDT"]["dropped_covered"] == 2
    assert m.is_live("BTCUSDT")
    assert RESYNC not in kinds(r)  # the first sync is not a RE-sync
    lv = r[r["kind"] == DIFF_LEVEL]
    assert [(chr(x["side"]), int(x["price"]), int(x["qty"])) for x in lv] == [("B", 1005 * E8 // 10, E8),
                                                                              ("S", 101 * E8, 25 * E8 // 10)]


def test_spot_first_event_straddles_L(Machine):
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed(dep(95, 99), 1)
    m.feed(dep(100, 103), 2)
    m.feed_snapshot("BTCUSDT", snap(101), 3)  # [100,103] holds L+1 = 102
    r = m.take_records()
    assert diffs(r) == [(100, 103)] and gaps(r) == []


def test_spot_stale_snapshot_refetch(Machine):
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed(dep(110, 115), 1)
    m.mark_requested("BTCUSDT")
    m.feed_snapshot("BTCUSDT", snap(105), 2)  # L + 1 = 106 < U = 110: stale
    r = m.take_records()
    assert gaps(r) == [(GAP_STALE_SNAPSHOT, 106, 110)]
    assert not m.is_live("BTCUSDT")
    assert m.snapshot_wanted() == ["BTCUSDT"]  # fetch again; the buffer is kept
    m.feed(dep(116, 120), 3)
    m.feed_snapshot("BTCUSDT", snap(117), 4)
    r = m.take_records()
    assert diffs(r) == [(116, 120)]
    assert kinds(r).count(RESYNC) == 1  # after a GAP, the sync is marked


def test_spot_snapshot_just_before_buffer_is_not_stale(Machine):
    # L = U_first - 1: nothing is missing between the snapshot and the buffer
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed(dep(110, 115), 1)
    m.feed_snapshot("BTCUSDT", snap(109), 2)
    r = m.take_records()
    assert gaps(r) == [] and diffs(r) == [(110, 115)]


def test_spot_snapshot_before_any_event_then_hole(Machine):
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed_snapshot("BTCUSDT", snap(100), 1)   # held: no event yet
    assert m.take_records().size == 0
    m.feed(dep(103, 104), 2)                   # U > L + 1: the snapshot is older than the stream
    r = m.take_records()
    assert gaps(r) == [(GAP_STALE_SNAPSHOT, 101, 103)]


def test_spot_continuity_gap_then_resync(Machine):
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed(dep(100, 105), 1)
    m.feed_snapshot("BTCUSDT", snap(102), 2)
    m.feed(dep(106, 110), 3)
    m.feed(dep(106, 110), 4)    # duplicate: ignored, no gap
    m.feed(dep(108, 109), 5)    # old: ignored
    m.feed(dep(112, 115), 6)    # 111 missing
    r = m.take_records()
    assert diffs(r) == [(100, 105), (106, 110)]
    assert gaps(r) == [(GAP_SEQUENCE, 111, 112)]
    assert m.symbol_stats()["BTCUSDT"]["duplicates"] == 2
    assert m.snapshot_wanted() == ["BTCUSDT"]
    m.feed(dep(116, 118), 7)
    m.feed_snapshot("BTCUSDT", snap(116), 8)
    r = m.take_records()
    k = kinds(r)
    assert k[:1] == [SNAPSHOT_BEGIN] and k[k.index(SNAPSHOT_END) + 1] == RESYNC
    assert int(r[r["kind"] == RESYNC][0]["first_id"]) == 116
    assert diffs(r) == [(116, 118)]


def test_spot_hole_inside_buffer(Machine):
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed(dep(100, 105), 1)
    m.feed(dep(106, 110), 2)
    m.feed(dep(113, 115), 3)   # the buffer has a hole after 110
    m.feed_snapshot("BTCUSDT", snap(104), 4)
    r = m.take_records()
    assert diffs(r) == [(100, 105), (106, 110)]
    assert gaps(r) == [(GAP_SEQUENCE, 111, 113)]
    m.feed_snapshot("BTCUSDT", snap(114), 5)
    r = m.take_records()
    assert diffs(r) == [(113, 115)] and RESYNC in kinds(r)


def test_spot_uses_U_not_pu(Machine):
    # spot events carry no pu; U must continue u + 1 even if ids look like futures
    m = Machine(SPOT, ["BTCUSDT"])
    m.feed(dep(10, 20), 1)
    m.feed_snapshot("BTCUSDT", snap(15), 2)
    m.feed(dep(25, 30), 3)
    assert gaps(m.take_records()) == [(GAP_SEQUENCE, 21, 25)]


# ------------------------------------------------------------------ USD-M

def test_usdm_first_event_contains_L_and_pu_chain(Machine):
    m = Machine(USDM, ["BTCUSDT"])
    m.feed(dep(90, 99, 80), 1)        # u < L: dropped
    m.feed(dep(100, 130, 99), 2)      # U <= L <= u
    m.feed_snapshot("BTCUSDT", snap(120), 3)
    m.feed(dep(150, 160, 130), 4)     # U != prev u + 1 but pu == prev u: continuous on USD-M
    m.feed(dep(170, 180, 160), 5)
    r = m.take_records()
    assert diffs(r) == [(100, 130), (150, 160), (170, 180)] and gaps(r) == []
    assert [int(x) for x in r[r["kind"] == DIFF_BEGIN]["prev_id"]] == [99, 130, 160]
    m.feed(dep(181, 190, 175), 6)     # U == prev u + 1 but pu != prev u: a gap on USD-M
    assert gaps(m.take_records()) == [(GAP_SEQUENCE, 180, 175)]


def test_usdm_event_ending_at_L_is_kept(Machine):
    m = Machine(USDM, ["BTCUSDT"])
    m.feed(dep(90, 100, 80), 1)       # u == L: kept (futures drop only u < L)
    m.feed(dep(101, 110, 100), 2)
    m.feed_snapshot("BTCUSDT", snap(100), 3)
    r = m.take_records()
    assert diffs(r) == [(90, 100), (101, 110)]


def test_usdm_first_event_starting_at_L(Machine):
    m = Machine(USDM, ["BTCUSDT"])
    m.feed(dep(100, 105, 95), 1)
    m.feed_snapshot("BTCUSDT", snap(100), 2)   # U == L
    assert diffs(m.take_records()) == [(100, 105)]


def test_usdm_stale_when_L_below_U(Machine):
    m = Machine(USDM, ["BTCUSDT"])
    m.feed(dep(101, 105, 95), 1)
    m.feed_snapshot("BTCUSDT", snap(100), 2)   # L = 100 < U = 101: stale on USD-M (spot would accept)
    assert gaps(m.take_records()) == [(GAP_STALE_SNAPSHOT, 100, 101)]
    s = Machine(SPOT, ["BTCUSDT"])
    s.feed(dep(101, 105), 1)
    s.feed_snapshot("BTCUSDT", snap(100), 2)
    assert diffs(s.take_records()) == [(101, 105)]


# ------------------------------------------------------------------ other messages and failures

def test_trades_tickers_raw_payloads_and_ignored(Machine):
    m = Machine(USDM, ["BTCUSDT", "ETHUSDT"])
    m.feed('{"stream":"btcusdt@trade","data":{"e":"trade","E":1,"T":2,"s":"BTCUSDT","t":77,"p":"61800.30",'
           '"q":"0.006","X":"MARKET","m":true}}', 10)
    m.feed('{"e":"aggTrade","E":1,"s":"ETHUSDT","a":5,"p":"3000.1","q":"1","f":100,"l":102,"T":3,"m":false}', 11)
    m.feed('{"stream":"ethusdt@bookTicker","data":{"e":"bookTicker","u":9,"s":"ETHUSDT","b":"2999.9","B":"1.5",'
           '"a":"3000.0","A":"2","T":4,"E":5}}', 12)
    m.feed('{"u":400900217,"s":"BTCUSDT","b":"25.35190000","B":"31.21000000","a":"25.36520000","A":"40.66000000"}',
           13)
    m.feed('{"stream":"btcusdt@kline_1m","data":{"e":"kline"}}', 14)
    m.feed('{"result":null,"id":1}', 15)
    r = m.take_records()
    assert kinds(r) == [TRADE, TRADE, TICKER_BID, TICKER_ASK, TICKER_BID, TICKER_ASK]
    t = r[0]
    assert (int(t["first_id"]), int(t["price"]), int(t["qty"]), chr(t["side"]), int(t["exch_ns"])) == \
        (77, 6180030 * 10**6, 6 * 10**5, "S", 2 * 10**6)
    assert (int(r[1]["first_id"]), int(r[1]["last_id"]), chr(r[1]["side"]), int(r[1]["symbol"])) == \
        (100, 102, "B", 1)
    assert (int(r[2]["price"]), int(r[2]["qty"]), int(r[3]["price"]), int(r[3]["qty"])) == \
        (29999 * 10**7, 15 * 10**7, 3000 * E8, 2 * E8)
    assert int(r[2]["first_id"]) == 9 and int(r[2]["exch_ns"]) == 5 * 10**6
    assert int(r[4]["first_id"]) == 400900217 and int(r[4]["exch_ns"]) == 0
    assert m.stats["ignored"] == 2 and m.stats["malformed"] == 0 and gaps(r) == []


def test_malformed_messages_become_gaps_never_exceptions(Machine):
    m = Machine(SPOT, ["BTCUSDT", "ETHUSDT"])
    for sym in ("BTCUSDT", "ETHUSDT"):
        m.feed(dep(100, 105, sym=sym), 1)
        m.feed_snapshot(sym, snap(102), 2)
    m.take_records()
    m.feed('{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","U":106,', 3)   # cut: symbol known
    r = m.take_records()
    assert [(int(x["symbol"]), int(x["flags"])) for x in r[r["kind"] == GAP]] == [(0, GAP_MALFORMED)]
    assert m.is_live("ETHUSDT") and not m.is_live("BTCUSDT")
    m.feed(dep(106, 107, sym="ETHUSDT", b=(("1e400", "1"),)), 4)       # not a plain decimal (no float path)
    m.feed(dep(106, 107, sym="ETHUSDT", b=(("1.123456789", "1"),)), 5)  # more decimals than the scale
    m.feed(b"\xff\xfe not json", 6)                                      # nothing to tell the symbol
    m.feed("[1, 2]", 7)
    m.feed('{"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","s":"BTCUSDT","U":"106","u":107,'
           '"b":[],"a":[]}}', 8)
    m.feed('{"e":"depthUpdate","s":"BTCUSDT","U":1,"u":2,"b":[["1","2","3"]],"a":[]}', 9)
    m.feed('{"e":"depthUpdate","s":"BTCUSDT","U":1,"u":2,"b":["12"],"a":[]}', 10)
    m.feed('{"e":"depthUpdate","s":"BTCUSDT","U":1,"u":2,"b":[[1.5,"2"]],"a":[]}', 11)  # a JSON number price
    m.feed('{"e":"trade","s":"BTCUSDT","t":1,"p":"-1","q":"1","m":true}', 12)
    m.feed('{"e":"depthUpdate","s":"BTCUSDT","U":5,"u":2,"b":[],"a":[]}', 13)   # U > u
    m.feed_snapshot("ETHUSDT", "{not json", 14)
    r = m.take_records()
    assert (r["kind"] == GAP).all() and (r["flags"] == GAP_MALFORMED).all()
    assert m.stats["malformed"] == 1 + 11 - 1  # the JSON number price "1.5" is exact and accepted
    assert m.stats["depth"] == 2 + 1


def test_json_numbers_never_become_floats():
    assert decode_json('{"p": 0.1, "q": 12345678901234567890.12345678}') == \
        {"p": "0.1", "q": "12345678901234567890.12345678"}
    with pytest.raises(ValueError):
        decode_json('{"p": NaN}')


def test_disconnect_shutdown_rate_limit_gaps(Machine):
    m = Machine(SPOT, ["BTCUSDT", "ETHUSDT"])
    m.feed(dep(100, 105), 1)
    m.feed_snapshot("BTCUSDT", snap(102), 2)
    m.feed(dep(50, 55, sym="ETHUSDT"), 3)   # ETH buffering, never synced
    m.take_records()
    m.feed('{"stream":"!serverShutdown","data":{"e":"serverShutdown","E":1}}', 4)
    assert m.events[-1] == ("shutdown", None)
    m.events.clear()
    m.disconnected(5, GAP_SHUTDOWN)
    m.disconnected(6, GAP_DISCONNECT)       # the close that follows: nothing new since, no second GAP
    r = m.take_records()
    assert [(int(x["symbol"]), int(x["flags"]), int(x["first_id"])) for x in r] == \
        [(0, GAP_SHUTDOWN, 106), (1, GAP_SHUTDOWN, 0)]
    m.disconnected(7, GAP_DISCONNECT)       # never synced and nothing received: no GAP
    assert m.take_records().size == 0
    m.feed(dep(200, 205), 8)
    m.snapshot_failed("BTCUSDT", 9, GAP_RATE_LIMIT)
    m.snapshot_failed("BTCUSDT", 10, GAP_RATE_LIMIT)   # one GAP per reason until synced
    assert gaps(m.take_records()) == [(GAP_RATE_LIMIT, 0, 0)]
    m.feed_snapshot("BTCUSDT", snap(203), 11)
    r = m.take_records()
    assert RESYNC in kinds(r) and diffs(r) == [(200, 205)]


def test_guess_snapshot_symbol_for_bare_bodies(Machine):
    m = Machine(SPOT, ["AAA", "BBB"])
    m.feed(dep(1000, 1005, sym="AAA"), 1)
    m.feed(dep(50, 52, sym="BBB"), 2)
    m.feed(snap(51), 3)                      # a bare REST body in the stream: BBB's range holds 51
    r = m.take_records()
    assert diffs(r) == [(50, 52)] and int(r[0]["symbol"]) == 1


def test_fast_decimal_path_equals_parse_decimal():
    rng = random.Random(5)
    lv = Levels(10**8, 10**2)
    strs = []
    for _ in range(3000):
        whole = str(rng.randint(0, 10**rng.randint(0, 10) - 1) if rng.random() < 0.9 else 0)
        if rng.random() < 0.1 and len(whole) <= 7:
            whole = "0" * rng.randint(1, 3) + whole
        strs.append(whole if rng.random() < 0.2 else whole + "." + "".join(rng.choice("0123456789")
                                                                            for _ in range(rng.randint(1, 8))))
    pairs = [[strs[i], strs[i + 1][:strs[i + 1].find(".") + 3] if "." in strs[i + 1] else strs[i + 1]]
             for i in range(0, len(strs) - 1, 2)]
    mode, vals, n = lv.prepare(pairs)
    assert mode == 1 and n == len(pairs)
    got = lv.parse_fast(vals)
    want = np.array([[lobc.parse_decimal(p, 10**8), lobc.parse_decimal(q, 10**2)] for p, q in pairs])
    assert (got == want).all()
    # shapes the fast check leaves to parse_decimal: trailing zeros past the scale, 11+ digit wholes
    mode, vals, n = lv.prepare([["1.1234567800000", "5.000"], ["12345678901", "1"]])
    assert mode == 2 and vals == [112345678, 500, 12345678901 * 10**8, 100]
    with pytest.raises(ValueError):
        lv.prepare([["1.123456789", "1"]])


def same_state(m, ref, step):
    """The machine and its reference after the same calls: the same records, events, counts,
    per-symbol results and wanted snapshots."""
    got, want = m.take_records(), ref.take_records()
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), step
    assert m.events == ref.events, step
    m.events, ref.events = [], []
    assert m.stats == ref.stats, step
    assert m.symbol_stats() == ref.symbol_stats(), step
    assert m.snapshot_wanted() == ref.snapshot_wanted(), step
    assert [m.is_live(s) for s in m.symbols] == [ref.is_live(s) for s in ref.symbols], step
    return len(want)


@pytest.mark.parametrize("market", [SPOT, USDM])
@pytest.mark.parametrize("seed", range(6))
def test_snapshot_wanted_is_what_it_says_at_every_step(market, seed):
    """snapshot_wanted() keeps the symbols that are not live aside (it is asked after every
    message of a capture); at every step of a random run it equals its definition taken over
    every symbol of the reference (buffering, with buffered events, no snapshot held and none
    asked for), and the machine and the reference agree on everything else too."""
    rng = random.Random(seed)
    syms = ["AAAUSDT", "BBBUSDT", "CCCUSDT"]
    m, ref = DepthSync(market, syms), ReferenceDepthSync(market, syms)
    last = {s: 100 for s in syms}
    wanted_seen = 0
    for step in range(600):
        s = rng.choice(syms)
        r = rng.random()
        for x in (m, ref):
            rs = random.Random(step)  # the same choices for both
            if r < 0.55:  # the next diff, now and then with a hole or a repeat
                jump = rng.choice([1, 1, 1, 1, 3, -2]) if x is m else jump
                U = last[s] + jump
                u = U + (rng.randrange(3) if x is m else u - U)
                x.feed(dep(U, u, pu=last[s] + jump - 1 if market == USDM else None, sym=s), step)
            elif r < 0.75:
                back = rng.randrange(4) if x is m else back
                x.feed_snapshot(s, snap(last[s] - back), step)
            elif r < 0.85:
                for w in x.snapshot_wanted():
                    if rs.random() < 0.5:
                        x.mark_requested(w)
            elif r < 0.9:
                k = rng.randrange(1, 4) if x is m else k
                x.disconnected(step, GAP_DISCONNECT, rs.sample(syms, k))
            elif r < 0.95:
                x.snapshot_failed(s, step, GAP_RATE_LIMIT)
            else:
                x.feed('{"stream":"%s@depth@100ms","data":{"e":"depthUpdate","U":' % s.lower(), step)  # malformed
        if r < 0.55:
            last[s] = max(last[s], u)
        expected = [st.name for st in ref.syms if st.state == 0 and st.buffer and st.snapshot is None
                    and not st.requested]
        assert m.snapshot_wanted() == expected, step
        wanted_seen += bool(expected)
        same_state(m, ref, step)
    assert wanted_seen > 50 and m.stats["resyncs"] > 5


def _message(rng, market, syms, last):
    """A random message of a run: mostly the next diff of a symbol, with holes, repeats,
    overlaps, trades, tickers, snapshots (named or bare), and now and then a malformed one."""
    s = rng.choice(syms)
    r = rng.random()
    if r < 0.6:
        jump = rng.choice([1, 1, 1, 1, 1, 1, 2, 0, -3])
        U = max(1, last[s] + jump)
        u = U + rng.randrange(3)
        pu = last[s] + jump - 1 if rng.random() < 0.95 else last[s] + 7
        n = rng.randrange(4)
        b = [[str(100 - k), str(rng.randrange(0, 3))] for k in range(n)]
        a = [[f"{101 + k}.5", "0.25"] for k in range(rng.randrange(3))]
        last[s] = max(last[s], u)
        return "feed", dep(U, u, pu=pu if market == USDM else None, sym=s, b=b, a=a)
    if r < 0.7:
        return "feed", json.dumps({"stream": s.lower() + "@trade", "data": {
            "e": "trade", "E": 1700000000000, "s": s, "t": rng.randrange(10**6), "p": "100.5", "q": "0.1",
            "T": 1700000000001, "m": rng.random() < 0.5, "M": True}}, separators=(",", ":"))
    if r < 0.76:
        return "feed", json.dumps({"stream": s.lower() + "@bookTicker", "data": {
            "u": rng.randrange(10**6), "s": s, "b": "100.5", "B": "2", "a": "101", "A": "0.5"}},
            separators=(",", ":"))
    if r < 0.88:
        body = json.loads(snap(last[s] - rng.randrange(5), bids=(("100", "3"), ("99", "1")), asks=(("102", "4"),)))
        if rng.random() < 0.3:
            return "feed", json.dumps(body)  # a bare body: the machine guesses its symbol
        return "snapshot", (s, json.dumps(body))
    if r < 0.92:
        return "failed", s
    if r < 0.95:
        return "disconnected", rng.sample(syms, rng.randrange(1, len(syms) + 1))
    if r < 0.965:
        return "end_file", None
    if r < 0.98:
        return "feed", '{"stream":"%s@depth@100ms","data":{"e":"depthUpdate","U":' % s.lower()
    if r < 0.99:
        return "feed", '{"e":"serverShutdown"}'
    return "feed", "not json at all"


def _apply(x, what, arg, recv):
    if what == "feed":
        x.feed(arg, recv)
    elif what == "snapshot":
        x.feed_snapshot(arg[0], arg[1], recv)
    elif what == "failed":
        x.snapshot_failed(arg, recv, GAP_RATE_LIMIT)
    elif what == "disconnected":
        x.disconnected(recv, GAP_DISCONNECT, arg)
    else:
        x.end_file(recv)


@pytest.mark.parametrize("market", [SPOT, USDM])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_buffer", [3, 50_000])
@pytest.mark.parametrize("c_decoder", [True, False])
def test_the_machine_does_what_its_reference_does(market, seed, max_buffer, c_decoder):
    """Random runs of every kind of call through the machine in C and the pure-Python
    reference: after every call the same records (byte for byte), events, counts, per-symbol
    results and wanted snapshots; the decoded lines taken in one batch (feed_lines) give what
    the same lines fed one by one to the reference give."""
    from lobreplay.core._coreapi import bn_decode
    rng = random.Random(seed * 7 + max_buffer)
    syms = ["AAAUSDT", "BBBUSDT", "CCCUSDT"]
    m = DepthSync(market, syms, max_buffer=max_buffer, c_decoder=c_decoder)
    ref = ReferenceDepthSync(market, syms, max_buffer=max_buffer)
    last = {s: 1000 for s in syms}
    written = 0
    for step in range(300):
        if rng.random() < 0.2:  # a batch of lines, decoded in C, through feed_lines
            batch = [_message(rng, market, syms, last) for _ in range(rng.randrange(1, 40))]
            batch = [(w, a) for w, a in batch if w == "feed" and not a.startswith('{"e":"serverShutdown')]
            if not batch:
                continue
            blob = "\n".join(f"{10**9 + step * 100 + k} {a}" for k, (_, a) in enumerate(batch)).encode()
            dec, levels, names = bn_decode(blob, usdm=market == USDM, price_digits=8, qty_digits=8, names=True)
            name_sym = np.array([m.symbol_index(
                blob[ln["sym_start"]:ln["sym_start"] + ln["sym_len"]].decode() if ln["sym_len"] >= 0 else None,
                blob[ln["stream_start"]:ln["stream_start"] + ln["stream_len"]].decode() if ln["stream_len"] >= 0
                else None) for ln in dec[names.tolist()]], np.int32)
            pos = 0
            while (pos := m.feed_lines(dec, levels, pos, name_sym)) < len(dec):
                m.feed(batch[pos][1], 10**9 + step * 100 + pos)
                pos += 1
            for k, (_, a) in enumerate(batch):
                ref.feed(a, 10**9 + step * 100 + k)
        else:
            what, arg = _message(rng, market, syms, last)
            for x in (m, ref):
                _apply(x, what, arg, 10**9 + step * 100)
        written += same_state(m, ref, step)
    st = ref.stats
    assert written > 1000 and st["gaps"] > 5 and st["resyncs"] > 2 and st["trades"] > 10 and st["tickers"] > 5
