"""The struct.unpack reference decoder (tests/itch_ref.py) on every real ITCH
fixture in data/real/itch, checked against the facts recorded in that
folder's PROVENANCE.md and against what is known of the trading days.

These tests pin the reference itself, so that it can serve as the oracle for
the vectorised decoder and for the writer.
"""
import os
import struct
import sys
from collections import Counter

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import itch_ref  # noqa: E402

from conftest import REAL_ITCH as FIXTURES  # noqa: E402

# Messages by type, as PROVENANCE.md records them (complete messages only).
COUNTS = {
    "nasdaq_20191230_first1000.itch": {"R": 993, "H": 3, "Y": 3, "S": 1},
    "nasdaq_20190130_first4096b.itch": {"R": 98, "S": 1, "H": 1, "Y": 1},
    "nasdaq_2016_first500b.itch": {"R": 7, "H": 4, "Y": 4, "S": 1},
    "nasdaq_20230822_0930.itch": {"A": 125, "U": 99, "D": 30, "F": 6, "I": 5, "E": 3, "S": 1},
    "nasdaq_20230822_by_type.itch": {"A": 41, "F": 7, "D": 6, "H": 6, "Q": 5, "J": 5, "L": 5, "I": 5, "P": 5,
                                     "X": 5, "E": 5, "C": 5, "U": 5, "Y": 5, "S": 1},
    "bx_20230822_by_type.itch": {"F": 5, "A": 5, "P": 5, "X": 5, "D": 5, "E": 5, "C": 5, "U": 5, "Y": 5, "N": 5,
                                 "H": 5, "S": 1},
    "psx_20230822_by_type.itch": {"A": 5, "F": 5, "X": 5, "D": 5, "E": 5, "C": 5, "U": 5, "Y": 5, "H": 5, "P": 5,
                                  "S": 1},
}
# Truncated fixtures: (offset of the partial frame, bytes left from there, length its prefix announces).
PARTIAL = {
    "nasdaq_20190130_first4096b.itch": (4081, 15, 39),
    "nasdaq_2016_first500b.itch": (497, 3, 39),
}
# Streams (not the by-type catalogues): first and last timestamp, HH:MM:SS.nnnnnnnnn.
STREAMS = {
    "nasdaq_20191230_first1000.itch": ("03:04:32.057543747", "03:09:14.360581176"),
    "nasdaq_20190130_first4096b.itch": ("03:03:59.687760787", "03:08:34.240330039"),
    "nasdaq_2016_first500b.itch": ("03:01:39.794743918", "03:05:45.648024398"),
    "nasdaq_20230822_0930.itch": ("09:29:59.999836649", "09:30:00.000474706"),
}
CATALOGUES = {  # min ... max timestamp
    "nasdaq_20230822_by_type.itch": ("09:29:59.999836649", "09:39:23.322465824"),
    "bx_20230822_by_type.itch": ("09:29:59.999282991", "09:31:00.849892739"),
    "psx_20230822_by_type.itch": ("09:30:00.000103932", "09:31:00.849925690"),
}
SIZES = {"nasdaq_20191230_first1000.itch": 40_874, "nasdaq_20190130_first4096b.itch": 4_096,
         "nasdaq_2016_first500b.itch": 500, "nasdaq_20230822_0930.itch": 9_668,
         "nasdaq_20230822_by_type.itch": 3_954, "bx_20230822_by_type.itch": 1_769, "psx_20230822_by_type.itch": 1_659}


def ns(hms: str) -> int:
    h, m, rest = hms.split(":")
    s, frac = rest.split(".")
    return ((int(h) * 60 + int(m)) * 60 + int(s)) * 10**9 + int(frac)


def load(name):
    return (FIXTURES / name).read_bytes()


def decode(name):
    return [m for _, m in itch_ref.iter_messages(load(name), allow_partial=True) if not m.get("partial")]


def test_every_fixture_is_covered():
    assert sorted(p.name for p in FIXTURES.glob("*.itch")) == sorted(COUNTS)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_counts_by_type_match_provenance(name):
    data = load(name)
    assert len(data) == SIZES[name]
    msgs = decode(name)
    assert dict(Counter(m["type"] for m in msgs)) == COUNTS[name]
    # every frame is accounted for: offsets step by length + 2 up to the end (or the partial tail)
    offsets = [off for off, _ in itch_ref.iter_messages(data, allow_partial=True)]
    assert offsets[0] == 0 and offsets == sorted(offsets)
    end = PARTIAL[name][0] if name in PARTIAL else len(data)
    assert sum(itch_ref.LENGTHS[m["type"]] + 2 for m in msgs) == end


@pytest.mark.parametrize("name", sorted(PARTIAL))
def test_truncated_fixtures_raise_unless_allowed(name):
    offset, left, announced = PARTIAL[name]
    data = load(name)
    with pytest.raises(ValueError, match=f"offset {offset}"):
        list(itch_ref.iter_messages(data))
    items = list(itch_ref.iter_messages(data, allow_partial=True))
    off, tail = items[-1]
    assert off == offset == len(data) - left
    assert tail == {"type": None, "partial": True, "bytes": left, "length": announced}
    assert all(not m.get("partial") for _, m in items[:-1])
    # the complete part alone decodes cleanly
    assert len(list(itch_ref.iter_messages(data[:offset]))) == len(items) - 1


@pytest.mark.parametrize("name", sorted(set(COUNTS) - set(PARTIAL)))
def test_complete_fixtures_end_on_a_frame_boundary(name):
    data = load(name)
    assert list(itch_ref.iter_messages(data))  # no ValueError
    with pytest.raises(ValueError, match=f"offset {len(data)}: truncated frame: 1 byte"):
        list(itch_ref.iter_messages(data + b"\x00"))  # one stray byte: a torn length prefix


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_stream_timestamps(name):
    msgs = decode(name)
    ts = [m["timestamp"] for m in msgs]
    first, last = STREAMS[name]
    assert (ts[0], ts[-1]) == (ns(first), ns(last))
    assert all(a <= b for a, b in zip(ts, ts[1:]))


@pytest.mark.parametrize("name", sorted(CATALOGUES))
def test_catalogue_timestamps(name):
    ts = [m["timestamp"] for m in decode(name)]
    lo, hi = CATALOGUES[name]
    assert (min(ts), max(ts)) == (ns(lo), ns(hi))
    assert any(a > b for a, b in zip(ts, ts[1:]))  # grouped by type, so not a stream


@pytest.mark.parametrize("name", ["nasdaq_20191230_first1000.itch", "nasdaq_20190130_first4096b.itch",
                                  "nasdaq_2016_first500b.itch"])
def test_start_of_day_directory_spin(name):
    msgs = decode(name)
    s = msgs[0]
    assert (s["type"], s["event_code"], s["stock_locate"], s["tracking"]) == ("S", "O", 0, 0)
    assert load(name)[:3] == b"\x00\x0cS"
    assert 3 * 3600 * 10**9 < s["timestamp"] < 3 * 3600 * 10**9 + 6 * 60 * 10**9
    assert all(m["tracking"] == 0 for m in msgs)
    rs = [m for m in msgs if m["type"] == "R"]
    assert [m["stock_locate"] for m in rs] == list(range(1, len(rs) + 1))
    assert [m["stock"] for m in rs] == sorted(m["stock"] for m in rs)
    by_locate = {m["stock_locate"]: m["stock"] for m in rs}
    for m in msgs:
        if m["type"] in "HY":
            assert by_locate[m["stock_locate"]] == m["stock"]
        if m["type"] == "H":
            assert (m["trading_state"], m["reserved"], m["reason"]) == ("T", " ", "")
        if m["type"] == "Y":
            assert m["reg_sho_action"] == "0"
    for r in rs:
        assert r["round_lot_size"] in (10, 100) and r["authenticity"] in "PT" and r["round_lots_only"] == "N"
        assert r["market_category"] in "QGSNAPZV " and r["inverse_indicator"] in "YN"
        assert len(r["issue_subtype"]) <= 2 and r["stock"] == r["stock"].strip()
    # the interleaving: the H/Y spin runs behind the R spin
    types = [m["type"] for m in msgs]
    assert types.index("H") < max(i for i, t in enumerate(types) if t == "R")


def test_2019_12_30_directory_facts():
    msgs = decode("nasdaq_20191230_first1000.itch")
    rs = {m["stock"]: m for m in msgs if m["type"] == "R"}
    assert len(rs) == 993
    assert msgs[0]["timestamp"] == 11_072_057_543_747
    tests = sorted(s for s, r in rs.items() if r["authenticity"] == "T")
    assert tests == ["ATEST", "ATEST.A", "ATEST.B", "ATEST.C"]
    aapl = rs["AAPL"]
    assert (aapl["market_category"], aapl["financial_status"], aapl["issue_classification"],
            aapl["issue_subtype"], aapl["luld_tier"], aapl["etp_flag"]) == ("Q", "N", "C", "Z", "1", "N")
    assert rs["A"]["stock_locate"] == 1 and rs["BPFH"]["stock_locate"] == 993
    assert rs["AAAU"]["etp_flag"] == "Y" and rs["AAAU"]["issue_classification"] == "Q"
    # round lots of 10 for a few high-priced or preferred issues
    assert {s: r["round_lot_size"] for s, r in rs.items() if r["round_lot_size"] != 100} == dict.fromkeys(
        ["BAC-L", "BH", "BH.A"], 10)
    # an inverse, 2x leveraged ETP
    assert [(s, r["etp_leverage_factor"]) for s, r in rs.items() if r["inverse_indicator"] == "Y"] == [("BIS", 2)]


def test_2016_symbols_with_suffixes():
    msgs = decode("nasdaq_2016_first500b.itch")
    assert [m["stock"] for m in msgs if m["type"] == "R"] == ["A", "AA", "AA-", "AA-B", "AAAP", "AAC", "AADR"]


def test_opening_second_2023_08_22():
    msgs = decode("nasdaq_20230822_0930.itch")
    (q,) = [m for m in msgs if m["type"] == "S"]
    assert (q["event_code"], q["timestamp"]) == ("Q", ns("09:30:00.000070384"))
    assert Counter(m["tracking"] for m in msgs) == {0: 266, 2: 2, 4: 1}
    aapl = [m for m in msgs if m["type"] in "AF" and m["stock"] == "AAPL"]
    prices = sorted(m["price"] for m in aapl)
    assert len(aapl) == 5
    assert {172_5900, 181_5900} <= set(prices)
    # near AAPL's level that day: all but one far-out ask lie between $172 and $182
    assert sum(172_0000 <= p <= 182_0000 for p in prices) == 4 and max(prices) < 250_0000
    assert max(m["price"] for m in aapl if m["side"] == "B") < min(m["price"] for m in aapl if m["side"] == "S")
    googl = [m["price"] for m in msgs if m["type"] in "AF" and m["stock"] == "GOOGL"]
    assert googl and all(125_0000 <= p <= 135_0000 for p in googl)
    # opening-cross NOII; insufficient-orders direction carries zero prices
    for m in msgs:
        if m["type"] == "I":
            assert m["cross_type"] == "O"
            if m["imbalance_direction"] == "O":
                assert m["far_price"] == m["near_price"] == m["current_reference_price"] == 0
    # every order message refers to an order added before the capture began, or in it
    added = {m["order_ref"] for m in msgs if m["type"] in "AF"}
    refs = [m["order_ref"] for m in msgs if m["type"] in "EXDU"]
    assert len(refs) == 132 and not added & set(refs)


def test_2023_catalogue_values():
    msgs = decode("nasdaq_20230822_by_type.itch")
    # the IBTG opening cross: C "N" and Q at one nanosecond and one price
    (c,) = [m for m in msgs if m["type"] == "C" and m["stock_locate"] == 5092]
    (q,) = [m for m in msgs if m["type"] == "Q" and m["stock"] == "IBTG"]
    assert (c["executed_shares"], c["printable"], c["execution_price"]) == (4926, "N", 22_4800)
    assert (q["shares"], q["cross_price"], q["cross_type"], q["stock_locate"]) == (5379, 22_4800, "O", 5092)
    assert c["timestamp"] == q["timestamp"] and q["match_number"] == c["match_number"] + 1
    # zero-share crosses carry price 0
    assert any(m["shares"] == 0 and m["cross_price"] == 0 for m in msgs if m["type"] == "Q")
    hs = {(m["stock"], m["trading_state"], m["reason"]) for m in msgs if m["type"] == "H"}
    assert ("ZVZZT", "P", "LUDP") in hs and ("ZXZZT", "P", "LUDP") in hs
    js = [m for m in msgs if m["type"] == "J"]
    assert all(m["lower_price"] < m["reference_price"] < m["upper_price"] for m in js)
    ls = [m for m in msgs if m["type"] == "L"]
    assert {m["mpid"] for m in ls} == {"MAXM", "RILY", "NITE", "VIRT"}
    # the META burst: 36 A and 2 F in one nanosecond, quoted far from the market on both sides
    meta = [m for m in msgs if m["type"] in "AF" and m["stock"] == "META"]
    assert Counter(m["type"] for m in meta) == {"A": 36, "F": 2} and len({m["timestamp"] for m in meta}) == 1
    assert max(m["price"] for m in meta if m["side"] == "B") < 81_0000
    assert min(m["price"] for m in meta if m["side"] == "S") > 357_0000
    # E tracking numbers step by 2 within one execution group
    es = [m for m in msgs if m["type"] == "E" and m["stock_locate"] == 9509]
    assert [m["tracking"] for m in es] == [2, 4] and es[1]["match_number"] == es[0]["match_number"] + 1


@pytest.mark.parametrize("name", sorted(CATALOGUES))
def test_trades_and_prices_are_sane_on_every_venue(name):
    msgs = decode(name)
    for m in msgs:
        if m["type"] == "P":
            assert m["order_ref"] == 0 and m["side"] == "B" and m["shares"] > 0
        if m["type"] in "AF":
            assert m["side"] in "BS" and 0 < m["price"] <= 200_000_0000 and m["shares"] > 0
        if m["type"] in "AFPQHYJNI":
            assert m["stock"] and m["stock"] == m["stock"].rstrip()
        if m["type"] == "F":
            assert len(m["attribution"]) == 4
    known = {"AMZN": (130, 140), "TSLA": (225, 245), "GOOGL": (125, 135)}
    for m in msgs:
        if m["type"] == "P" and m["stock"] in known:
            lo, hi = known[m["stock"]]
            assert lo * 10_000 <= m["price"] <= hi * 10_000, m


def test_bx_retail_price_improvement():
    ns_ = [m for m in decode("bx_20230822_by_type.itch") if m["type"] == "N"]
    assert len(ns_) == 5 and {m["interest_flag"] for m in ns_} <= set("BSAN")


# -- framing rules, on built bytes --------------------------------------------------------------

def _frame(payload):
    return struct.pack(">H", len(payload)) + payload


def test_zero_length_frame_ends_the_session():
    data = load("nasdaq_20230822_0930.itch")
    assert itch_ref.read_messages(data + b"\x00\x00" + b"\x07garbage") == itch_ref.read_messages(data)


def test_unknown_type_is_skipped_by_length():
    s = load("nasdaq_20191230_first1000.itch")[:14]
    data = s + _frame(b"Z" + bytes(20)) + s
    items = list(itch_ref.iter_messages(data))
    assert [off for off, _ in items] == [0, 14, 14 + 23]
    assert items[1][1] == {"type": "Z", "length": 21, "unknown": True}
    assert items[0][1] == items[2][1]


def test_wrong_length_for_a_known_type_raises():
    s = load("nasdaq_20191230_first1000.itch")[2:14]  # S message, 12 bytes
    with pytest.raises(ValueError, match=r"offset 14: 'S' message has length 13, expected 12"):
        list(itch_ref.iter_messages(_frame(s) + _frame(s + b"!")))


def test_lower_case_h_is_its_own_type():
    payload = b"h" + struct.pack(">HHHI", 7, 0, 1, 2) + b"ZVZZT   " + b"QH"
    m = itch_ref.decode_message(payload)
    assert m == {"type": "h", "stock_locate": 7, "tracking": 0, "timestamp": (1 << 32) | 2, "stock": "ZVZZT",
                 "market_code": "Q", "halt_action": "H"}


def test_reference_field_names_agree_with_the_spec_table():
    """Written separately, the two tables must still agree name for name (a differential check)."""
    from lobreplay.itch.spec import HEADER, LAYOUTS

    assert set(itch_ref.FIELDS) == set(LAYOUTS)
    for t, lay in LAYOUTS.items():
        assert itch_ref.FIELDS[t] == tuple(n for n, _ in HEADER + lay.fields), t
        assert itch_ref.LENGTHS[t] == lay.length, t
