"""The C decoder of depthUpdate messages (csrc/bnjson.c, lobreplay._coreapi.bn_decode) in
the JSONL -> .lobc conversion: the same .lobc records as the Python path on every real
recording (against tests/golden/convert.json, written before the decoder existed, and against
convert(c_decoder=False)), and on lines built to sit on every edge the decoder must leave to
the Python path (malformed, out of range, unusual shapes), and on randomly damaged lines."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import convert_golden
from lobreplay import lobc
from lobreplay._coreapi import BN_DEPTH, bn_decode
from lobreplay.binance.convert import convert

SPOT_SRC = convert_golden.HFT / "spot" / "btcusdt_20240808.gz"
USDM_SRC = convert_golden.HFT / "usdm" / "btcusdt_20240808.gz"


def converted_same(src, tmp_path, **kw) -> dict:
    """Convert with and without the C decoder: the same records, metadata and statistics."""
    a, b = tmp_path / "c.lobc", tmp_path / "py.lobc"
    sa = convert(src, a, c_decoder=True, **kw)
    sb = convert(src, b, c_decoder=False, **kw)
    da, db = lobc.read(a), lobc.read(b)
    assert da.records.tobytes() == db.records.tobytes()
    assert da.blocks == db.blocks and da.whole and db.whole
    assert {k: v for k, v in da.meta.items() if k != "created_ns"} == \
        {k: v for k, v in db.meta.items() if k != "created_ns"}
    timing = ("seconds", "cpu_seconds", "level_updates_per_s", "dst")
    assert {k: v for k, v in sa.items() if k not in timing} == {k: v for k, v in sb.items() if k not in timing}
    return sa


# ---------------------------------------------------------------- the real recordings

def test_real_recordings_match_the_golden_file():
    golden = json.loads(convert_golden.GOLDEN.read_text())
    assert not convert_golden.compare(golden, convert_golden.compute())


@pytest.mark.parametrize("name", ["spot_20240808_09", "usdm_20240808", "cryptofeed_spot", "cryptofeed_usdm"])
def test_real_recordings_with_and_without_the_decoder(tmp_path, name):
    srcs = convert_golden.RECORDINGS[name]
    st = converted_same(srcs if len(srcs) > 1 else srcs[0], tmp_path)
    assert st["depth"] > 150 and st["malformed"] == 0


def test_the_decoder_takes_every_real_depth_message():
    for src, usdm in ((SPOT_SRC, False), (USDM_SRC, True)):
        blob = gzip.open(src).read()
        lines, levels = bn_decode(blob, usdm=usdm, price_digits=8, qty_digits=8)
        text = blob.split(b"\n")
        depth = [i for i, t in enumerate(text) if b'"e":"depthUpdate"' in t]
        assert np.flatnonzero(lines["status"] == BN_DEPTH).tolist() == depth
        # every decoded value against the Python decoding of the same line
        for i in depth[::97]:
            ln = lines[i]
            msg = json.loads(text[i].split(b" ", 1)[1], parse_float=str)["data"]
            assert (int(ln["first_id"]), int(ln["last_id"]), int(ln["exch_ms"])) == (msg["U"], msg["u"], msg["E"])
            assert int(ln["prev_id"]) == (msg["pu"] if usdm else 0)
            lv = levels[int(ln["level"]):int(ln["level"]) + int(ln["n_bids"]) + int(ln["n_asks"])]
            want = [[lobc.parse_decimal(p, 10**8), lobc.parse_decimal(q, 10**8)] for p, q in msg["b"] + msg["a"]]
            assert lv.tolist() == want and int(ln["n_bids"]) == len(msg["b"])


# ---------------------------------------------------------------- edges

def _depth(U, u, pu=None, b='[["100.5","1.25"],["99","0"]]', a='[["101.00000000","3"]]', E="1700000000000",
           s="BTCUSDT", stream="btcusdt@depth@100ms", extra=""):
    fields = ['"e":"depthUpdate"', f'"E":{E}' if E is not None else None, f'"s":"{s}"' if s is not None else None,
              f'"U":{U}', f'"u":{u}', f'"pu":{pu}' if pu is not None else None, f'"b":{b}', f'"a":{a}']
    data = "{" + ",".join(f for f in fields if f) + extra + "}"
    return data if stream is None else f'{{"stream":"{stream}","data":{data}}}'


def edge_lines(usdm: bool) -> list[bytes]:
    """A recording that syncs, then depth messages in every shape the decoder must take exactly,
    or leave to the Python path, each followed by a good one (so the book goes on)."""
    out = []
    t = [1_700_000_000_000_000_000]
    last = [1000]

    def line(msg, recv=None):
        t[0] += 1000
        out.append((str(t[0]) if recv is None else recv).encode() + b" " + (msg.encode() if isinstance(msg, str)
                                                                           else msg))

    def good(**kw):
        U, u = last[0] + 1, last[0] + 3
        line(_depth(U, u, pu=last[0] if usdm else None, **kw))
        last[0] = u

    line(_depth(990, 999, pu=989 if usdm else None))           # buffered, then dropped by the snapshot
    snap = {"lastUpdateId": 1000, "bids": [["100.5", "2"], ["99", "1"]], "asks": [["101", "1"]]}
    if usdm:
        snap["E"] = 1700000000000
    line(json.dumps(snap, separators=(",", ":")))
    good()
    U0 = lambda: last[0] + 1  # noqa: E731
    pu0 = lambda: last[0] if usdm else None  # noqa: E731
    variants = [
        dict(b='[]', a='[]'),                                   # no levels
        dict(b='[["000100.50","1.2500000000000"]]'),            # leading zeros, zeros past the scale
        dict(b='[["0","0"]]'),
        dict(b='[["92233720368.54775807","1"]]'),               # INT64_MAX at 10^8
        dict(b='[["92233720368.54775808","1"]]'),               # INT64_MAX + 1: refused
        dict(b='[["1.123456789","1"]]'),                        # a 9th decimal: refused
        dict(b='[["1.123456780","1"]]'),                        # a 9th decimal that is 0: fine
        dict(b='[["12345678901234567890","1"]]'),              # 20 digits
        dict(b='[["5.","1"]]'), dict(b='[[".5","1"]]'), dict(b='[["+5","1"]]'), dict(b='[["5e3","1"]]'),
        dict(b='[[" 5","1"]]'), dict(b='[["-5","1"]]'), dict(b='[["5","1","2"]]'), dict(b='[[5,"1"]]'),
        dict(b='[["5","1"],]'), dict(b='{}'), dict(b='[["5,1","1"]]'), dict(b='[["\\u0035","1"]]'),
        dict(b='[["５","1"]]'),
        dict(E=None), dict(E="null"), dict(E="1.5"), dict(E="9223372036853"), dict(E="9223372036854"),
        dict(E="-1"), dict(E="012"), dict(E="true"),
        dict(s=None), dict(s="ETHUSDT"), dict(s="btcusdt", stream=None), dict(s=None, stream=None),
        dict(stream="ethusdt@depth"), dict(stream="BTCUSDT@depth"), dict(s="B\\u0054CUSDT", stream=None),
        dict(extra=',"T":1700000000000'), dict(extra=',"T":"x"'), dict(extra=',"x":1'), dict(extra=',"U":5'),
        dict(extra=',"pu":7'),
    ]
    for v in variants:
        line(_depth(U0(), U0() + 2, pu=pu0(), **v))
        last[0] += 2
        good()
    for raw in [
        _depth(U0(), U0() + 2, pu=pu0()).replace('"U":', '"U": '),           # a blank inside
        _depth(U0(), U0() + 2, pu=pu0()).replace('{"stream"', ' {"stream"'),
        _depth(U0(), U0() + 2, pu=pu0()) + " \r",                            # blanks after: fine
        _depth(U0(), U0() + 2, pu=pu0()) + " x",
        _depth(U0(), U0() + 2, pu=pu0()).replace('"data":', '"other":1,"data":'),
        _depth(U0(), U0() + 2, pu=pu0())[:-1] + ',"x":1}',
        _depth(U0() + 2, U0(), pu=pu0()),                                    # U > u
        _depth(U0(), U0() + 2, pu=None),                                     # no pu
        _depth(U0(), U0() + 2, pu="-0"), _depth(U0(), U0() + 2, pu="18446744073709551616"),
        _depth("0" + str(U0()), U0() + 2, pu=pu0()),
        _depth(U0(), U0() + 2, pu=pu0()).replace('"a":', '"aa":'),
        _depth(U0(), U0() + 2, pu=pu0()).replace('"b":[', '"a":[["1","1"]],"b":['),
        _depth(U0(), U0() + 2, pu=pu0()).replace('"e":"depthUpdate",', '') + "",
        _depth(U0(), U0() + 2, pu=pu0()).replace('"e":"depthUpdate"', '"e":"depthUpdatex"'),
        _depth(U0(), U0() + 2, pu=pu0()).replace("BTCUSDT", "BTCUSDT\\u00e9"),
        _depth(U0(), U0() + 2, pu=pu0()).encode()[:-3],                      # cut
        _depth(U0(), U0() + 2, pu=pu0()).replace("BTCUSDT", "BTCUSDTé").encode(),
        b"\xff\xfe" + _depth(U0(), U0() + 2, pu=pu0()).encode(),
    ]:
        line(raw)
        good()
    for recv in ("0001700000000000000001", "+1700000000000000001", "1_700", "9223372036854775807",
                 "9223372036854775808", "", " 17", "17 "):
        line(_depth(U0(), U0() + 2, pu=pu0()), recv=recv)
        last[0] += 2
        good()
    out.append(b"")
    out.append(b"   ")
    out.append(b"17")
    good()
    return out


@pytest.mark.parametrize("usdm", [False, True])
def test_edges_convert_the_same_with_and_without_the_decoder(tmp_path, usdm):
    lines = edge_lines(usdm)
    for eol in (b"\n", b"\r\n"):
        src = tmp_path / "edges.jsonl"
        src.write_bytes(eol.join(lines) + eol)
        st = converted_same(src, tmp_path, market="usdm" if usdm else "spot", symbols=["BTCUSDT"])
        assert st["malformed"] > 10 and st["depth"] > 50 and st["gaps"] > 5
    blob = src.read_bytes()
    dec, _ = bn_decode(blob, usdm=usdm, price_digits=8, qty_digits=8)
    taken = int((dec["status"] == BN_DEPTH).sum())
    assert 50 < taken < len(dec) - 20      # the good ones, some edges; not the others


@pytest.mark.parametrize("seed", range(4))
def test_damaged_lines_convert_the_same_with_and_without_the_decoder(tmp_path, seed):
    rng = np.random.default_rng(seed)
    src = USDM_SRC if seed % 2 else SPOT_SRC
    text = gzip.open(src).read().split(b"\n")[:3000]
    for i in rng.choice(len(text), 300, replace=False).tolist():
        t = bytearray(text[i])
        if not t:
            continue
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(0, len(t)))
            op = rng.integers(0, 3)
            if op == 0:
                t[k] = int(rng.choice(list(b'0123456789.,:"[]{} -ex\\')))
            elif op == 1:
                del t[k]
            else:
                t.insert(k, int(rng.choice(list(b'0123456789.,"'))))
            if not t:
                break
        text[i] = bytes(t)
    p = tmp_path / "damaged.jsonl"
    p.write_bytes(b"\n".join(text) + b"\n")
    converted_same(p, tmp_path, market="usdm" if seed % 2 else "spot", symbols=["BTCUSDT"])


def test_scales_other_than_1e8(tmp_path):
    lines = edge_lines(True)
    src = tmp_path / "edges.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    for ps, qs in ((10**2, 10**3), (1, 10**12), (10**16, 1)):
        converted_same(src, tmp_path, market="usdm", symbols=["BTCUSDT"], price_scale=ps, qty_scale=qs)


def test_decoder_splits_lines_as_the_python_path():
    blob = b"1 x\n\n2 " + _depth(1, 2).encode() + b"\n3 y"
    dec, levels = bn_decode(blob, usdm=False, price_digits=8, qty_digits=8)
    assert len(dec) == 4 and dec["status"].tolist() == [0, 0, BN_DEPTH, 0]
    assert [blob[s:s + n] for s, n in zip(dec["start"].tolist(), dec["len"].tolist())] == blob.split(b"\n")
    assert levels.tolist() == [[10050000000, 125000000], [9900000000, 0], [10100000000, 300000000]]
    assert (int(dec["n_bids"][2]), int(dec["n_asks"][2]), int(dec["recv_ns"][2])) == (2, 1, 2)
