"""The ITCH 5.0 encoder (lobreplay.itch.writer), checked against the independent
reference decoder (tests/itch_ref.py) and against real bytes.

* every one of the 23 types round-trips, including V, W, K, h, B and O, which
  have no real example in the fixtures;
* re-encoding every message of every real fixture gives the same bytes;
* every kind of bad field raises ValueError naming the field.
"""
import gzip
import io
import os
import struct
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import itch_ref  # noqa: E402

from lobreplay.itch.spec import LAYOUTS  # noqa: E402
from lobreplay.itch.writer import ItchWriter, encode, frame, framed_struct, unpack  # noqa: E402

from conftest import REAL_ITCH as FIXTURES  # noqa: E402
U64 = 2**64 - 1
TS = 57_600_000_000_001  # 16:00:00.000000001


def hdr(t, locate=42, tracking=3, ts=TS):
    return {"type": t, "stock_locate": locate, "tracking": tracking, "timestamp": ts}


# One message per type, with values from the format notes and the edges of each field.
SAMPLES = {
    "S": {**hdr("S", 0), "event_code": "C"},
    "R": {**hdr("R"), "stock": "ATEST.A", "market_category": "Q", "financial_status": "N",
          "round_lot_size": 100, "round_lots_only": "N", "issue_classification": "C", "issue_subtype": "RT",
          "authenticity": "T", "short_sale_threshold": " ", "ipo_flag": "N", "luld_tier": "2",
          "etp_flag": "Y", "etp_leverage_factor": 3, "inverse_indicator": "Y"},
    "H": {**hdr("H"), "stock": "ZVZZT", "trading_state": "P", "reserved": " ", "reason": "LUDP"},
    "Y": {**hdr("Y"), "stock": "YCBD-A", "reg_sho_action": "1"},
    "L": {**hdr("L"), "mpid": "MAXM", "stock": "FDLS", "primary_market_maker": "Y", "market_maker_mode": "N",
          "market_participant_state": "A"},
    "V": {**hdr("V", 0), "level1": 3_013_22000000, "level2": 2_818_82000000, "level3": 2_592_02000000},
    "W": {**hdr("W", 0), "breached_level": "1"},
    "K": {**hdr("K", 0), "stock": "NEWCO", "release_time": 43_200, "release_qualifier": "A",
          "ipo_price": 17_5000},
    "J": {**hdr("J"), "stock": "LTRY", "reference_price": 3_8200, "upper_price": 4_0100, "lower_price": 3_1200,
          "extension": 1},
    "h": {**hdr("h"), "stock": "CAML", "market_code": "X", "halt_action": "T"},
    "A": {**hdr("A"), "order_ref": U64, "side": "S", "shares": 2**32 - 1, "stock": "AAPL",
          "price": 200_000_0000},
    "F": {**hdr("F"), "order_ref": 1, "side": "B", "shares": 100, "stock": "GFOR=", "price": 3147,
          "attribution": "UBSS"},
    "E": {**hdr("E"), "order_ref": 12_345, "executed_shares": 25, "match_number": U64},
    "C": {**hdr("C"), "order_ref": 19_993_566, "executed_shares": 4926, "match_number": 255_581, "printable": "N",
          "execution_price": 22_4800},
    "X": {**hdr("X"), "order_ref": 7, "cancelled_shares": 0},
    "D": {**hdr("D", ts=0), "order_ref": 0},
    "U": {**hdr("U"), "order_ref": 15_108_479, "new_order_ref": 21_364_423, "shares": 100, "price": 106_3240},
    "P": {**hdr("P"), "order_ref": 0, "side": "B", "shares": 60, "stock": "TSLA", "price": 240_3300,
          "match_number": 26_760},
    "Q": {**hdr("Q"), "shares": 2**40 + 5, "stock": "IBTG", "cross_price": 22_4800, "match_number": 255_582,
          "cross_type": "O"},
    "B": {**hdr("B", 0), "match_number": 255_582},
    "I": {**hdr("I"), "paired_shares": 2**33, "imbalance_shares": 0, "imbalance_direction": "P", "stock": "MDC",
          "far_price": 46_5000, "near_price": 46_5000, "current_reference_price": 46_5000, "cross_type": "A",
          "price_variation_indicator": "L"},
    "N": {**hdr("N"), "stock": "XBI", "interest_flag": "S"},
    "O": {**hdr("O", ts=2**48 - 1), "stock": "DLCR", "open_eligibility_status": "Y", "min_allowable_price": 9_0000,
          "max_allowable_price": 11_0000, "near_execution_price": 10_2500, "near_execution_time": 34_200_123_456_789,
          "lower_price_range_collar": 9_5000, "upper_price_range_collar": 10_5000},
}


def test_samples_cover_all_23_types():
    assert set(SAMPLES) == set(LAYOUTS) and len(SAMPLES) == 23


@pytest.mark.parametrize("t", sorted(SAMPLES))
def test_round_trip_through_the_reference_decoder(t):
    msg = SAMPLES[t]
    b = encode(msg)
    assert len(b) == LAYOUTS[t].length == itch_ref.LENGTHS[t]
    assert b[:1] == t.encode()
    assert itch_ref.decode_message(b) == msg
    assert unpack(b) == msg
    framed = frame(b)
    assert framed[:2] == struct.pack(">H", len(b))
    ((off, back),) = list(itch_ref.iter_messages(framed))
    assert off == 0 and back == msg


def test_field_bytes_at_the_documented_offsets():
    """A few offsets read with struct directly, from the notes' tables."""
    a = encode(SAMPLES["A"])
    assert struct.unpack_from(">cHHHIQcI8sI", a) == (b"A", 42, 3, TS >> 32, TS & 0xFFFFFFFF, U64, b"S",
                                                    2**32 - 1, b"AAPL    ", 200_000_0000)
    i = encode(SAMPLES["I"])
    assert i[28:36] == b"MDC     " and struct.unpack_from(">Q", i, 11)[0] == 2**33
    q = encode(SAMPLES["Q"])
    assert struct.unpack_from(">Q", q, 11)[0] == 2**40 + 5 and q[19:27] == b"IBTG    " and q[39:40] == b"O"
    o = encode(SAMPLES["O"])
    assert o[5:11] == b"\xff" * 6 and struct.unpack_from(">Q", o, 32)[0] == 34_200_123_456_789
    v = encode(SAMPLES["V"])
    assert struct.unpack(">QQQ", v[11:]) == (3_013_22000000, 2_818_82000000, 2_592_02000000)
    assert encode(SAMPLES["h"])[:1] == b"h" and encode(SAMPLES["H"])[:1] == b"H"


def test_text_is_space_padded_and_tracking_defaults_to_zero():
    m = {"type": "Y", "stock_locate": 1, "timestamp": 5, "stock": "A", "reg_sho_action": "0"}
    b = encode(m)
    assert b[11:19] == b"A       " and b[3:5] == b"\x00\x00"
    assert encode({**m, "stock": b"A"}) == b == encode({**m, "tracking": 0})


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.itch")))
def test_reencoding_real_fixtures_gives_identical_bytes(name):
    data = (FIXTURES / name).read_bytes()
    n = 0
    for off, msg in itch_ref.iter_messages(data, allow_partial=True):
        if msg.get("partial"):
            continue
        raw = data[off:off + 2 + itch_ref.LENGTHS[msg["type"]]]
        assert frame(encode(msg)) == raw, (name, off)
        assert unpack(raw[2:]) == msg
        n += 1
    assert n > 15


def _bad(t, **changes):
    m = dict(SAMPLES[t])
    for k, v in changes.items():
        if v is _DROP:
            del m[k]
        else:
            m[k] = v
    return m


_DROP = object()

BAD = [
    (_bad("A", shares=-1), "shares"),
    (_bad("A", shares=2**32), "shares"),
    (_bad("A", order_ref=2**64), "order_ref"),
    (_bad("A", price=1.5), "price"),
    (_bad("A", price=True), "price"),
    (_bad("A", price="100"), "price"),
    (_bad("A", stock="TOOLONGSY"), "stock"),
    (_bad("A", stock="AAPLÉ"), "stock"),
    (_bad("A", stock=7), "stock"),
    (_bad("A", side="BS"), "side"),
    (_bad("A", side=""), "side"),
    (_bad("A", side=1), "side"),
    (_bad("A", side="é"), "side"),
    (_bad("A", timestamp=2**48), "timestamp"),
    (_bad("A", timestamp=-1), "timestamp"),
    (_bad("A", stock_locate=65_536), "stock_locate"),
    (_bad("A", tracking=-3), "tracking"),
    (_bad("A", order_ref=_DROP), "order_ref"),
    (_bad("A", stock_locate=_DROP), "stock_locate"),
    (_bad("A", extra_field=1), "extra_field"),
    (_bad("F", attribution="UBSSX"), "attribution"),
    (_bad("Q", shares=2**64), "shares"),
    (_bad("V", level2=-5), "level2"),
    (_bad("R", issue_subtype="RTX"), "issue_subtype"),
    (_bad("A", type="Z"), "type"),
    (_bad("A", type="a"), "type"),
    (_bad("A", type=_DROP), "type"),
]


@pytest.mark.parametrize("msg,field", BAD, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_fields_raise_naming_the_field(msg, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        encode(msg)


def test_not_a_dict_raises():
    with pytest.raises(ValueError):
        encode([("type", "S")])


def test_frame_limits_and_end_of_session():
    assert frame(b"") == b"\x00\x00"
    assert frame(b"x" * 65_535)[:2] == b"\xff\xff"
    with pytest.raises(ValueError, match="65536"):
        frame(b"x" * 65_536)


def test_framed_struct_matches_encode():
    m = SAMPLES["E"]
    st = framed_struct("E")
    ts = m["timestamp"]
    raw = st.pack(31, b"E", m["stock_locate"], m["tracking"], ts >> 32, ts & 0xFFFFFFFF, m["order_ref"],
                  m["executed_shares"], m["match_number"])
    assert raw == frame(encode(m)) and st.size == 33


def test_writer_to_path_fileobj_and_gzip(tmp_path):
    msgs = [SAMPLES[t] for t in sorted(SAMPLES)]
    plain = tmp_path / "p.itch"
    with ItchWriter(plain) as w:
        for m in msgs:
            w.write(m)
        w.write_raw(encode(SAMPLES["S"]))
    assert w.count == 24
    back = itch_ref.read_messages(plain.read_bytes())
    assert back == msgs + [SAMPLES["S"]]

    gz1, gz2 = tmp_path / "a.itch.gz", tmp_path / "b.itch.gz"
    for p in (gz1, gz2):
        with ItchWriter(p, gzip=True) as w:
            for m in msgs:
                w.write(m)
    assert gz1.read_bytes() == gz2.read_bytes()  # reproducible: no mtime, no name
    assert gzip.decompress(gz1.read_bytes()) == b"".join(frame(encode(m)) for m in msgs)

    buf = io.BytesIO()
    with ItchWriter(buf, end_of_session=True) as w:
        w.write(SAMPLES["S"])
    assert not buf.closed and buf.getvalue() == frame(encode(SAMPLES["S"])) + b"\x00\x00"
    with pytest.raises(ValueError, match="closed"):
        w.write(SAMPLES["S"])


def test_writer_buffers_and_flushes_large_streams(tmp_path):
    p = tmp_path / "big.itch"
    payload = encode(SAMPLES["D"])
    with ItchWriter(p, buffer_bytes=1000) as w:
        for _ in range(5000):
            w.write_raw(payload)
    assert w.count == 5000 and p.stat().st_size == 5000 * 21


def test_a_bad_message_writes_nothing(tmp_path):
    p = tmp_path / "x.itch"
    with ItchWriter(p) as w:
        w.write(SAMPLES["S"])
        with pytest.raises(ValueError):
            w.write(_bad("A", shares=-1))
    assert w.count == 1 and p.read_bytes() == frame(encode(SAMPLES["S"]))
