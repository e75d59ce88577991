"""The C decoder of depthUpdate messages (csrc/feeds/bnjson.c, lobreplay.core._coreapi.bn_decode) in
the JSONL -> .lobc conversion: the same .lobc records as the Python path on every real
recording (against tests/golden/convert.json, written before the decoder existed, and against
convert(c_decoder=False)), and on lines built to sit on every edge the decoder must leave to
the Python path (malformed, out of range, unusual shapes), and on randomly damaged lines."""
from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convert_golden
import golden_common
from lobreplay.l2 import lobc
from lobreplay.core._coreapi import BN_DEPTH, BN_TRADE, bn_decode, bn_values
from lobreplay.binance import convert as convert_module
from lobreplay.binance import scan as scan_module
from lobreplay.binance.convert import convert
from lobreplay.binance.sync import DepthSync
from lobreplay.errors import CoreArgumentError

SPOT_SRC = golden_common.HFT / "spot" / "btcusdt_20240808.gz"
USDM_SRC = golden_common.HFT / "usdm" / "btcusdt_20240808.gz"


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


def _damaged(rng, line: bytes, edits: int, replace: bytes) -> bytes:
    """line with up to `edits` random edits: a byte replaced by one of `replace`, a byte
    deleted, or a byte of a number inserted (fewer if the line runs out)."""
    t = bytearray(line)
    for _ in range(edits):
        k = int(rng.integers(0, len(t)))
        op = rng.integers(0, 3)
        if op == 0:
            t[k] = int(rng.choice(list(replace)))
        elif op == 1:
            del t[k]
        else:
            t.insert(k, int(rng.choice(list(b'0123456789.,"'))))
        if not t:
            break
    return bytes(t)


@pytest.mark.parametrize("seed", range(4))
def test_damaged_lines_convert_the_same_with_and_without_the_decoder(tmp_path, seed):
    rng = np.random.default_rng(seed)
    src = USDM_SRC if seed % 2 else SPOT_SRC
    text = gzip.open(src).read().split(b"\n")[:3000]
    for i in rng.choice(len(text), 300, replace=False).tolist():
        if text[i]:
            text[i] = _damaged(rng, text[i], int(rng.integers(1, 4)), b'0123456789.,:"[]{} -ex\\')
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


# ---------------------------------------------------------------- trades, aggTrades, bookTickers

TRADE = '{"e":"trade","E":1700000000001,"s":"BTCUSDT","t":5,"p":"100.5","q":"0.25","T":1700000000000,"m":true,"M":true}'
TRADE_USDM = ('{"e":"trade","E":1700000000001,"T":1700000000000,"s":"BTCUSDT","t":5,"p":"100.5","q":"0.25",'
              '"X":"MARKET","m":false}')
AGG = ('{"e":"aggTrade","E":1700000000001,"s":"BTCUSDT","a":9,"p":"100.5","q":"0.25","f":5,"l":7,"T":1700000000000,'
       '"m":false,"M":true}')
TICKER = '{"u":500,"s":"BTCUSDT","b":"100.5","B":"3.78826000","a":"100.6","A":"1"}'
TICKER_USDM = ('{"e":"bookTicker","u":500,"s":"BTCUSDT","b":"100.5","B":"3.78826000","a":"100.6","A":"1",'
               '"T":1700000000000,"E":1700000000001}')
STREAMS = {"trade": "btcusdt@trade", "aggTrade": "btcusdt@aggTrade", "bookTicker": "btcusdt@bookTicker"}


def _env(data: str, stream: str | None = "auto") -> str:
    if stream == "auto":
        kind = "trade" if '"e":"trade"' in data else "aggTrade" if '"e":"aggTrade"' in data else "bookTicker"
        stream = STREAMS[kind]
    return data if stream is None else f'{{"stream":"{stream}","data":{data}}}'


def simple_variants() -> list[str]:
    """Trade, aggTrade and bookTicker messages in the shapes the decoder takes and on every
    edge it must leave to the Python path (each as a whole line's message)."""
    out = []
    for base in (TRADE, TRADE_USDM, AGG, TICKER, TICKER_USDM):
        out += [_env(base), _env(base, None), _env(base, "ethusdt@x"), _env(base.replace('"s":"BTCUSDT",', ''), None),
                _env(base.replace('"s":"BTCUSDT",', '')), _env(base.replace("BTCUSDT", "ETHUSDT"), None),
                _env(base.replace("BTCUSDT", "ETHUSDT")), _env(base.replace("BTCUSDT", "btcusdt"), None),
                _env(base)[:-3], _env(base) + " \r", _env(base) + " x", _env(base).replace(":", ": ", 1),
                _env(base).replace(',"', ', "', 2), _env(base[:-1] + ',"x":1}'), _env(base[:-1] + ',"s":"BTCUSDT"}'),
                _env(base).replace("BTCUSDT", "B\\u0054CUSDT"), _env(base).replace("BTCUSDT", "BTCUSDTé")]
        for num in ('"100.5"', '"0.25"', '"3.78826000"', '"1"'):
            if num not in base:
                continue
            for v in ('"000100.50"', '"1.123456789"', '"1.123456780"', '"92233720368.54775807"',
                      '"92233720368.54775808"', '"5."', '".5"', '"-5"', '"5e3"', '5', '"0"', '""', 'null', '"５"'):
                out.append(_env(base.replace(num, v, 1)))
        for key in ('"t":5', '"f":5', '"l":7', '"u":500', '"T":1700000000000', '"E":1700000000001', '"a":9'):
            if key not in base:
                continue
            k = key.split(":")[0]
            for v in ("0", "18446744073709551615", "18446744073709551616", "-1", "05", "1.5", "null", '"5"',
                      "9223372036853", "9223372036854", "true"):
                out.append(_env(base.replace(key, f"{k}:{v}", 1)))
            out.append(_env(base.replace(key + ",", "").replace("," + key, "")))   # without it
        for m in ('"m":true', '"m":false', '"M":true'):
            if m in base:
                k = m.split(":")[0]
                for v in ("false", "true", "1", "null", '"true"', "tru"):
                    out.append(_env(base.replace(m, f"{k}:{v}", 1)))
    out += [
        _env(TRADE.replace('"e":"trade",', '') [:-1] + ',"e":"trade"}'),                 # e not first
        _env(TICKER_USDM.replace('"e":"bookTicker",', '')[:-1] + ',"e":"bookTicker"}'),
        _env(TRADE.replace('"e":"trade"', '"e":"aggTrade"')),                          # t in an aggTrade
        _env(AGG.replace('"e":"aggTrade"', '"e":"trade"')),                            # f, l in a trade
        _env(AGG.replace('"f":5', '"f":9')),                                           # f > l
        _env(TRADE_USDM.replace('"X":"MARKET"', '"X":"LIQUIDATION"')),
        _env(TRADE_USDM.replace('"X":"MARKET"', '"X":1')),
        _env(TICKER.replace('"b":"100.5","B":"3.78826000",', '') [:-1] + ',"b":"100.5","B":"3.78826000"}'),  # order
        _env(TICKER.replace('"u":500,', '')[:-1] + ',"u":500}'),
        _env(TICKER.replace('"A":"1"', '"A":"1","A":"2"')),
        _env(TICKER.replace('"u":500', '"e":"bookTickerx","u":500')),
        _env('{"e":"trade"}'), _env('{"u":1}'), _env('{"e":"bookTicker","u":1}'),
    ]
    return out


def simple_lines(usdm: bool) -> list[bytes]:
    """A recording that syncs, then every simple_variants() message, each followed by a good
    trade, ticker and depth message."""
    out = []
    t = [1_700_000_000_000_000_000]
    last = [1000]

    def line(msg):
        t[0] += 1000
        out.append(str(t[0]).encode() + b" " + (msg.encode() if isinstance(msg, str) else msg))

    def good():
        line(_env(TRADE_USDM if usdm else TRADE))
        line(_env(TICKER_USDM if usdm else TICKER))
        U, u = last[0] + 1, last[0] + 3
        line(_depth(U, u, pu=last[0] if usdm else None))
        last[0] = u

    line(_depth(990, 999, pu=989 if usdm else None))
    snap = {"lastUpdateId": 1000, "bids": [["100.5", "2"], ["99", "1"]], "asks": [["101", "1"]]}
    if usdm:
        snap["E"] = 1700000000000
    line(json.dumps(snap, separators=(",", ":")))
    good()
    for v in simple_variants():
        line(v)
        good()
    return out


def test_the_decoder_takes_every_real_trade_and_ticker():
    from lobreplay.core._coreapi import BN_TICKER
    for src, usdm in ((SPOT_SRC, False), (USDM_SRC, True)):
        blob = gzip.open(src).read()
        lines, levels = bn_decode(blob, usdm=usdm, price_digits=8, qty_digits=8)
        text = blob.split(b"\n")
        trades = [i for i, t in enumerate(text) if b'"e":"trade"' in t]
        tickers = [i for i, t in enumerate(text) if b'@bookTicker"' in t]
        assert len(trades) > 5000 and len(tickers) > 20000
        assert np.flatnonzero(lines["status"] == BN_TRADE).tolist() == trades
        assert np.flatnonzero(lines["status"] == BN_TICKER).tolist() == tickers
        for i in trades[::53]:
            ln = lines[i]
            msg = json.loads(text[i].split(b" ", 1)[1], parse_float=str)["data"]
            assert (int(ln["first_id"]), int(ln["last_id"]), int(ln["exch_ms"]), bool(ln["maker"])) == \
                (msg["t"], msg["t"], msg["T"], msg["m"])
            assert levels[int(ln["level"])].tolist() == [lobc.parse_decimal(msg["p"], 10**8),
                                                         lobc.parse_decimal(msg["q"], 10**8)]
        for i in tickers[::97]:
            ln = lines[i]
            msg = json.loads(text[i].split(b" ", 1)[1], parse_float=str)["data"]
            assert (int(ln["first_id"]), int(ln["exch_ms"])) == (msg["u"], msg.get("E", -1))
            lv = int(ln["level"])
            assert levels[lv:lv + 2].tolist() == [[lobc.parse_decimal(msg[p], 10**8), lobc.parse_decimal(msg[q], 10**8)]
                                                  for p, q in (("b", "B"), ("a", "A"))]


@pytest.mark.parametrize("usdm", [False, True])
def test_trade_and_ticker_edges_convert_the_same_with_and_without_the_decoder(tmp_path, usdm):
    from lobreplay.core._coreapi import BN_AGGTRADE, BN_TICKER
    lines = simple_lines(usdm)
    for eol in (b"\n", b"\r\n"):
        src = tmp_path / "simple.jsonl"
        src.write_bytes(eol.join(lines) + eol)
        st = converted_same(src, tmp_path, market="usdm" if usdm else "spot", symbols=["BTCUSDT"])
        assert st["malformed"] > 50 and st["trades"] > 300 and st["tickers"] > 300 and st["unknown_symbol"] > 5
    dec, _ = bn_decode(src.read_bytes(), usdm=usdm, price_digits=8, qty_digits=8)
    status = dec["status"].tolist()
    v = len(simple_variants())
    assert status.count(BN_AGGTRADE) > 10
    assert v < status.count(BN_TRADE) + status.count(BN_AGGTRADE) + status.count(BN_TICKER) < 2 * v + v // 2
    for ps, qs in ((10**2, 10**3), (1, 10**12)):
        converted_same(src, tmp_path, market="usdm" if usdm else "spot", symbols=["BTCUSDT"], price_scale=ps,
                       qty_scale=qs)


def test_many_symbols_in_one_chunk(tmp_path):
    """More (stream, s) names in a chunk than the decoder numbers (LOB_BN_NAMES): the rest go
    through the Python path; several symbols, some unknown, in one recording."""
    from lobreplay.core._coreapi import lib
    syms = [f"S{i}" for i in range(lib.LOB_BN_NAMES + 20)]
    rows = []
    for k in range(3):
        for i, s in enumerate(syms):
            base = TRADE.replace("BTCUSDT", s).replace('"t":5', f'"t":{k * 1000 + i}')
            rows.append(f"{1_700_000_000_000_000_000 + len(rows)} " + _env(base, f"{s.lower()}@trade"))
            rows.append(f"{1_700_000_000_000_000_000 + len(rows)} " + _env(TICKER.replace("BTCUSDT", s), None))
    src = tmp_path / "many.jsonl"
    src.write_text("\n".join(rows) + "\n")
    st = converted_same(src, tmp_path, market="spot", symbols=syms[::2])
    assert st["trades"] == st["tickers"] == 3 * len(syms[::2]) and st["unknown_symbol"] == 3 * len(syms[1::2]) * 2
    dec, _, names = bn_decode(src.read_bytes(), usdm=False, price_digits=8, qty_digits=8, names=True)
    assert len(names) == lib.LOB_BN_NAMES and 0 < int((dec["status"] == 0).sum()) < len(dec)


def test_short_lines_are_all_split():
    blob = b"\n" * 1000 + b"1 " + _env(TICKER).encode()
    dec, levels = bn_decode(blob, usdm=False, price_digits=8, qty_digits=8)
    assert len(dec) == 1001 and dec["status"].tolist()[-1] != 0 and len(levels) == 2


@pytest.mark.parametrize("seed", range(4, 8))
def test_damaged_trades_and_tickers_convert_the_same(tmp_path, seed):
    """Random damage to the trade and bookTicker lines of a stretch of a real recording."""
    rng = np.random.default_rng(seed)
    src = USDM_SRC if seed % 2 else SPOT_SRC
    text = gzip.open(src).read().split(b"\n")
    a = int(rng.integers(0, len(text) - 4000))
    text = text[a:a + 4000]
    simple = [i for i, t in enumerate(text) if b'"e":"trade"' in t or b"@bookTicker" in t]
    for i in rng.choice(simple, 400, replace=False).tolist():
        text[i] = _damaged(rng, text[i], int(rng.integers(1, 3)), b'0123456789.,:"[]{} -eftx\\')
    p = tmp_path / "damaged.jsonl"
    p.write_bytes(b"\n".join(text) + b"\n")
    st = converted_same(p, tmp_path, market="usdm" if seed % 2 else "spot", symbols=["BTCUSDT"])
    assert st["trades"] + st["tickers"] > 1000


def run_lines(usdm: bool, seed: int) -> list[bytes]:
    """Two symbols whose depth messages come in long runs in sequence, interleaved by
    symbol now and then, with trades between them, and broken inside a run by a duplicate
    (also one whose pu follows on), an overlap or a gap (each then a new snapshot), an
    empty side and a message of a third, unknown symbol."""
    rng = np.random.default_rng(seed)
    out, t = [], [1_700_000_000_000_000_000]
    last = {"BTCUSDT": 0, "ETHUSDT": 0}

    def line(msg):
        t[0] += 1000
        out.append(str(t[0]).encode() + b" " + msg.encode())

    def snapshot(sym, L):
        body = {"lastUpdateId": L, "bids": [["100", "2"], ["99", "1"]], "asks": [["101", "1"], ["102", "3"]]}
        if usdm:
            body["E"] = 1700000000000
        line(json.dumps({"stream": f"{sym.lower()}@depthSnapshot", "data": body}, separators=(",", ":")))
        last[sym] = L

    def depth(sym, U, u, pu, b=None, a=None):
        compact = {"separators": (",", ":")}  # as Binance sends them: the decoder takes them
        b = b if b is not None else json.dumps([[str(100 - int(rng.integers(0, 5))), str(int(rng.integers(0, 4)))]
                                                for _ in range(int(rng.integers(0, 4)))], **compact)
        a = a if a is not None else json.dumps([[str(101 + int(rng.integers(0, 5))), str(int(rng.integers(0, 4)))]
                                                for _ in range(int(rng.integers(1, 4)))], **compact)
        line(_depth(U, u, pu=pu if usdm else None, b=b, a=a, s=sym, stream=f"{sym.lower()}@depth@100ms"))

    def step(sym):
        U, u = last[sym] + 1, last[sym] + int(rng.integers(1, 4))
        depth(sym, U, u, last[sym])
        last[sym] = u

    for sym in last:
        snapshot(sym, 1000)
    for _ in range(400):
        sym = "BTCUSDT" if rng.random() < 0.8 else "ETHUSDT"
        for _ in range(int(rng.integers(1, 30))):  # a run
            step(sym)
            r = rng.random()
            if r < 0.03:
                depth(sym, last[sym] - 2, last[sym], last[sym] - 3)  # a duplicate (u <= last)
            elif r < 0.05:
                depth(sym, last[sym] - 1, last[sym] + 2, last[sym] - 2)  # an overlap: a gap
                snapshot(sym, last[sym] + 2)
            elif r < 0.06:
                depth(sym, last[sym] + 5, last[sym] + 7, last[sym] + 4)  # a gap
                snapshot(sym, last[sym] + 7)
            elif r < 0.08:
                depth(sym, last[sym] + 1, last[sym] + 1, last[sym], b="[]", a="[]")  # no levels
                last[sym] += 1
            elif r < 0.09:
                depth("XRPUSDT", 1, 2, 0)  # not a symbol of the recording
            elif r < 0.10:
                depth(sym, last[sym] - 3, last[sym] - 1, last[sym])  # pu follows on, yet u <= last: a duplicate
            elif r < 0.15:
                line('{"stream":"%s@trade","data":{"e":"trade","E":1700000000000,"s":"%s","t":%d,"p":"100.5",'
                     '"q":"1","T":1700000000000,"m":true,"M":true}}' % (sym.lower(), sym, int(rng.integers(1, 10**9))))
    return out


def watch_python_lines(monkeypatch, into: list) -> None:
    """The lines of a C-decoded chunk that the decoder leaves to the Python path, into `into`."""
    in_blob = []
    feed_blob, feed_recorded = convert_module._feed_blob, DepthSync.feed_recorded
    monkeypatch.setattr(convert_module, "_feed_blob", lambda *a: (in_blob.append(1), feed_blob(*a), in_blob.pop())[1])
    monkeypatch.setattr(DepthSync, "feed_recorded", lambda m, line, raw: (
        into.append(line) if in_blob else None, feed_recorded(m, line, raw)))


@pytest.mark.parametrize("usdm", [False, True])
@pytest.mark.parametrize("seed", [1, 2])
def test_runs_in_sequence_convert_the_same_with_and_without_the_decoder(tmp_path, usdm, seed, monkeypatch):
    src = tmp_path / "runs.jsonl"
    src.write_bytes(b"\n".join(run_lines(usdm, seed)) + b"\n")
    python_lines = []  # the lines the decoder left to the Python path
    watch_python_lines(monkeypatch, python_lines)
    st = converted_same(src, tmp_path, market="usdm" if usdm else "spot", symbols=["BTCUSDT", "ETHUSDT"])
    assert st["depth"] > 3000 and st["gaps"] > 3 and st["trades"] > 100
    assert st["per_symbol"]["BTCUSDT"]["duplicates"] > 10
    # the decoder took every depth line and every trade, and the machine took them in C, the
    # gaps and syncs among them too: the Python path saw only the snapshots
    dec, _ = bn_decode(src.read_bytes(), usdm=usdm, price_digits=8, qty_digits=8)
    assert int((dec["status"] == BN_DEPTH).sum()) == st["depth"] + st["unknown_symbol"]
    assert len(python_lines) == st["snapshots"] and all(b"depthSnapshot" in x for x in python_lines)


def test_the_machine_refuses_decoded_lines_that_do_not_fit():
    """lob_bn_sync_lines checks every index it follows (a name, a symbol, a level run)."""
    blob = ("1 " + _env(TRADE) + "\n2 " + _depth(5, 6)).encode()
    dec, levels, names = bn_decode(blob, usdm=False, price_digits=8, qty_digits=8, names=True)
    assert dec["status"].tolist() == [BN_TRADE, BN_DEPTH] and len(names) == 2
    for bad in (dict(name_sym=np.zeros(1, np.int32)), dict(name_sym=np.array([0, 1], np.int32)),
                dict(levels=levels[:2])):
        args = dict(levels=levels, name_sym=np.zeros(2, np.int32)) | bad
        with pytest.raises(CoreArgumentError):
            DepthSync("spot", ["BTCUSDT"]).feed_lines(dec, args["levels"], 0, args["name_sym"])
    m = DepthSync("spot", ["BTCUSDT"])
    assert m.feed_lines(dec, levels, 0, np.zeros(2, np.int32)) == 2
    assert m.stats["trades"] == 1 and m.stats["depth"] == 1 and m.snapshot_wanted() == ["BTCUSDT"]


_FRAGMENTS = ['"stream":', '"stream": ', '"stream":\t"', '"s":', '"s":"', '"', '"stream":"', 'btc', 'usdt', '@', '.',
              'A', 'Z', '_', '-', ' ', '\n', '{', '}', ',', ':', '"data":', 'xs', '\\', '\u00e9']


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_FRAGMENTS), max_size=80), key=st.sampled_from([b"stream", b"s"]),
       word=st.booleans())
def test_bn_values_finds_what_the_regex_finds(parts, key, word):
    """lob_bn_values (the scan's distinct streams and symbols, in C) against the regexes it
    replaces: the same values, in order of first appearance, on text cut from JSON pieces."""
    blob = "".join(parts).encode()
    value = rb"([A-Za-z0-9_\-]+)" if word else rb'([^"]+)'
    rx = re.compile(rb'"' + re.escape(key) + rb'":\s*"' + value + rb'"')
    want = list(dict.fromkeys(rx.findall(blob)))
    assert bn_values(blob, key, word=word) == want
    assert bn_values(blob, key, word=word, cap=len(want)) == want
    if want:
        assert bn_values(blob, key, word=word, cap=len(want) - 1) is None


def test_a_partial_scan_converts_the_same(tmp_path, monkeypatch):
    """A recording with more text than the scan keeps is scanned only that far (the conversion
    pass reads the rest, and scans it beside the decoder): the same .lobc as the whole scan of
    the Python path; when the rest names a symbol the first part did not, convert() converts
    again after a whole scan, and the result is the same again."""
    monkeypatch.setattr(scan_module, "KEEP_BYTES", 1 << 20)
    monkeypatch.setattr(scan_module, "CHUNK", 1 << 18)
    scans = []
    real_scan = scan_module.scan

    def scan(*a, **kw):
        seen = real_scan(*a, **kw)
        scans.append(seen.partial)
        return seen
    monkeypatch.setattr(convert_module, "scan", scan)
    text = gzip.open(USDM_SRC).read()
    src = tmp_path / "usdm.jsonl"
    src.write_bytes(text[:len(text) // 4])  # about 7 MB of text: a partial scan of the first 1 MB
    st = converted_same(src, tmp_path)
    assert scans == [True, False] and st["symbols"] == ["BTCUSDT"] and st["depth"] > 1000  # (C, then Python)
    # a symbol whose lines come only after the first MB
    lines = text[:len(text) // 4].split(b"\n")
    late = [b"%d %s" % (1_700_000_000_000_000_000 + i, _env(TRADE_USDM.replace("BTCUSDT", "ETHUSDT"),
                                                              "ethusdt@trade").encode()) for i in range(3)]
    at = int(len(lines) * 0.8)
    src2 = tmp_path / "late.jsonl"
    src2.write_bytes(b"\n".join(lines[:at] + late + lines[at:]))
    scans.clear()
    st = converted_same(src2, tmp_path)
    assert scans == [True, False, False] and st["symbols"] == ["BTCUSDT", "ETHUSDT"] and st["trades"] > 3
    assert st["seconds"] > 0 and st["unknown_symbol"] == 0


def test_hundreds_of_names_are_numbered_by_first_appearance():
    """The decoder looks a name up among a few by comparing, among more by hash: every line of
    300 symbols' trades and tickers, interleaved, gets the number of its (stream, s) pair in
    order of first appearance, none is left to the Python path."""
    rng = np.random.default_rng(3)
    syms = [f"S{i}X" for i in range(300)]
    rows, want = [], {}
    for k in range(2000):
        s = syms[int(rng.integers(0, len(syms)))]
        if rng.random() < 0.5:
            name = (f"{s.lower()}@trade", s)
            msg = _env(TRADE.replace("BTCUSDT", s), name[0])
        else:
            name = (None, s)
            msg = _env(TICKER.replace("BTCUSDT", s), None)
        want.setdefault(name, len(want))
        rows.append((f"{k + 1} " + msg, want[name]))
    blob = "\n".join(r for r, _ in rows).encode()
    dec, _, names = bn_decode(blob, usdm=False, price_digits=8, qty_digits=8, names=True)
    assert (dec["status"] != 0).all() and len(names) == len(want) > 300
    assert dec["name_id"].tolist() == [n for _, n in rows]


def test_c_takes_the_lines_after_one_the_machine_applied(tmp_path, monkeypatch):
    """A diff the machine applies (here one in a shape the decoder leaves to it) moves the
    book's last update id: C must see that and take the lines after it again."""
    python_lines = []
    watch_python_lines(monkeypatch, python_lines)
    body = {"lastUpdateId": 1000, "bids": [["100", "2"]], "asks": [["101", "1"]]}
    rows = [json.dumps({"stream": "btcusdt@depthSnapshot", "data": body}, separators=(",", ":"))]
    for k in range(200):
        msg = _depth(1001 + k, 1001 + k)
        rows.append(msg.replace('"U":', '"U": ') if k == 100 else msg)  # (a blank: the Python path's)
    src = tmp_path / "odd.jsonl"
    src.write_text("".join(f"{1_700_000_000_000_000_000 + i} {r}\n" for i, r in enumerate(rows)))
    st = converted_same(src, tmp_path, market="spot", symbols=["BTCUSDT"])
    assert st["per_symbol"]["BTCUSDT"]["applied"] == 200 and st["gaps"] == 0
    assert [b"depthSnapshot" in x for x in python_lines] == [True, False]  # the snapshot, the odd one
    assert b'"U": 1101' in python_lines[1]
