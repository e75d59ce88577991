"""Pass 1 (the C scan, lobreplay.core._coreapi.ItchScan) against a naive Python scan
of tests/itch_ref.py's decoded messages: every field of every locate's record (the
distinct-price hash and the blank records of locates without a message too), on
generated days (plain and with the real-day features), days with injected faults and
the real samples."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobreplay.core import _coreapi as core
from lobreplay.testing.itch_faults import FAULTS, inject
from lobreplay.testing.itch_synth import FEATURES, generate_day, generate_day_fast
from lobreplay.itch.reader import ItchFile
from lobreplay.itch.spec import LAYOUTS
from lobreplay.itch.writer import framed_struct
from tests.conftest import REAL_ITCH
from tests.itch_ref import read_messages

FIELDS = core.LOCATE_DTYPE.names  # every field of lob_itch_locate
BLANK = {f: 0 for f in FIELDS} | {"min_price": np.iinfo(np.int64).max, "max_price": np.iinfo(np.int64).min,
                                   "first_ts": -1}  # a locate without a message


def price_bit(px: int) -> int:
    """The bit of px in a locate's 4,096-bit price hash (lob_itch_locate.distinct_min, itch.h):
    the top 12 bits of the 32-bit product px * 0x9E3779B1."""
    return ((px * 0x9E3779B1) & 0xFFFFFFFF) >> 20


def naive_scan(data: bytes) -> dict[int, dict]:
    out: dict[int, dict] = {}
    live: dict[int, list] = {}  # ref -> [shares, locate]

    def loc(m):
        return out.setdefault(m["stock_locate"], {
            "prices": [], "messages": 0, "adds": 0, "deletes": 0, "replaces": 0, "executions": 0, "cancels": 0,
            "executed_shares": 0, "unknown_refs": 0, "live": 0, "peak_live": 0, "first_ts": -1, "last_ts": 0})

    def add(L, ref, shares, locate):
        if ref and ref not in live:
            live[ref] = [shares, locate]
            L["live"] += 1
            L["peak_live"] = max(L["peak_live"], L["live"])

    def gone(ref):
        out[live.pop(ref)[1]]["live"] -= 1

    for m in read_messages(data, allow_partial=True):
        t = m["type"]
        if t is None or m.get("unknown"):
            continue
        L = loc(m)
        L["messages"] += 1
        if L["first_ts"] < 0:
            L["first_ts"] = m["timestamp"]
        L["last_ts"] = m["timestamp"]
        if t in "AF":
            L["prices"].append(m["price"])
            L["adds"] += 1
            add(L, m["order_ref"], m["shares"], m["stock_locate"])
        elif t in "ECX":
            q = m["cancelled_shares"] if t == "X" else m["executed_shares"]
            if t == "X":
                L["cancels"] += 1
            else:
                L["executions"] += 1
                L["executed_shares"] += q
            o = live.get(m["order_ref"])
            if o is None:
                L["unknown_refs"] += 1
            elif q >= o[0]:
                gone(m["order_ref"])
            else:
                o[0] -= q
        elif t == "D":
            L["deletes"] += 1
            if m["order_ref"] in live:
                gone(m["order_ref"])
            else:
                L["unknown_refs"] += 1
        elif t == "U":
            L["prices"].append(m["price"])
            L["replaces"] += 1
            if m["order_ref"] in live:
                gone(m["order_ref"])
                add(L, m["new_order_ref"], m["shares"], m["stock_locate"])
            else:
                L["unknown_refs"] += 1
    for L in out.values():
        p = L.pop("prices")
        L["min_price"] = min(p) if p else np.iinfo(np.int64).max
        L["max_price"] = max(p) if p else np.iinfo(np.int64).min
        L["price_gcd"] = math.gcd(*p) if p else 0
        # a lower bound on the distinct prices: the hash's set bits, none while every price is 0
        L["distinct_min"] = len({price_bit(px) for px in p}) if L["price_gcd"] else 0
        L["reserved"] = 0
    return out


def c_scan(path: str, chunk_bytes: int) -> np.ndarray:
    scan = core.ItchScan()
    for c in ItchFile(path, chunk_bytes=chunk_bytes, allow_truncated=True).chunks():
        scan.feed(c.buf, c.offsets, c.types, c.n, None)
    return scan.stats()


def check(path: str, chunk_bytes: int = 1 << 17) -> tuple[int, int]:
    """Asserts the two scans agree on every locate's record; returns (messages, adds) seen."""
    want = naive_scan(open(path, "rb").read())
    got = c_scan(path, chunk_bytes)
    assert set(np.flatnonzero(got["messages"]).tolist()) == {k for k, v in want.items() if v["messages"]}
    for locate, w in want.items():
        assert {f: int(got[f][locate]) for f in FIELDS} == w, f"locate {locate}"
    blank = np.ones(65536, bool)
    blank[list(want)] = False
    for f in FIELDS:  # every other locate's record is the blank one
        assert (got[f][blank] == BLANK[f]).all(), f
    return sum(w["messages"] for w in want.values()), sum(w["adds"] for w in want.values())


def msg(t: str, locate: int, ts: int, *fields) -> bytes:
    """One framed ITCH message of type t, its fields after the header in spec order
    (lobreplay.itch.writer.framed_struct: unchecked, fast enough for 160,000 messages)."""
    return framed_struct(t).pack(LAYOUTS[t].length, t.encode(), locate, 0, ts >> 32, ts & 0xFFFFFFFF, *fields)


def add(locate: int, ts: int, ref: int, side: bytes, shares: int, price: int) -> bytes:
    return msg("A", locate, ts, ref, side, shares, b"XYZ     ", price)


def test_scan_agrees_on_a_generated_day(synthetic_day):
    assert check(synthetic_day.path)[1] > 1000


@pytest.mark.parametrize("engine, features", [("python", FEATURES), ("python", ("far_off",)), ("c", FEATURES)])
def test_scan_agrees_on_generated_days_with_real_day_features(tmp_path, engine, features):
    """Halts and their crosses, an IPO, operational halts, a MWCB, far-off prices (8x, the
    highest Price(4), $1,000 in a sub-dollar stock on a sub-penny grid): the scan's records,
    read in chunks of different sizes (feed boundaries anywhere), are the naive scan's; and
    a scan of some locates only (select) gives exactly their records and blank others."""
    path = tmp_path / "20191230.features.itch"
    if engine == "python":
        generate_day(path, n_messages=60_000, n_symbols=40, seed=13, features=features)
    else:
        generate_day_fast(path, n_messages=120_000, n_symbols=40, seed=13, features=features)
    messages, adds = check(str(path), chunk_bytes=1 << 15)
    assert adds > 1000
    got = c_scan(str(path), 1 << 20)
    priced = got["price_gcd"] != 0
    assert (got["price_gcd"][priced] % 100 != 0).any()  # a sub-penny grid
    assert (got["max_price"][priced] >= 8 * got["min_price"][priced]).any()  # a far-off price
    assert (got["distinct_min"][priced] > 1).all()
    select = np.zeros(65536, np.uint8)
    select[np.flatnonzero(got["messages"])[::2]] = 1
    scan = core.ItchScan()
    for c in ItchFile(str(path), chunk_bytes=1 << 16).chunks():
        scan.feed(c.buf, c.offsets, c.types, c.n, select)
    part = scan.stats()
    on = select.astype(bool)
    assert part[on].tobytes() == got[on].tobytes()
    for f in FIELDS:
        assert (part[f][~on] == BLANK[f]).all(), f


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_scan_agrees_on_injected_faults(synthetic_day, tmp_path, kind):
    dst = tmp_path / f"20191230.{kind}.itch"
    inject(kind, synthetic_day, dst, seed=3)
    check(str(dst))


def test_scan_agrees_with_repeated_and_odd_prices(tmp_path):
    """Prices repeated (the scan skips a repeat), 0, odd ticks and a duplicate reference."""
    def a(locate, ts, ref, px):
        return add(locate, ts, ref, b"B", 100, px)

    data = b"".join([
        a(5, 1, 1, 0), a(5, 2, 2, 0), a(5, 3, 3, 1500), a(5, 4, 4, 1500), a(5, 5, 5, 2250), a(5, 6, 5, 2250),
        a(7, 7, 10, 99), msg("U", 7, 8, 10, 11, 50, 99), msg("U", 7, 9, 11, 12, 50, 33), msg("X", 5, 10, 3, 100),
        msg("E", 5, 11, 4, 40, 1), msg("D", 5, 12, 99),
    ])
    p = tmp_path / "odd.itch"
    p.write_bytes(data)
    check(str(p))
    st = c_scan(str(p), 1 << 17)
    assert (st["min_price"][5], st["price_gcd"][5], st["peak_live"][5]) == (0, 750, 5)
    assert (st["price_gcd"][7], st["peak_live"][7], st["live"][7]) == (33, 1, 1)


@pytest.mark.parametrize("name", ["nasdaq_20191230_first1000.itch", "nasdaq_20230822_0930.itch",
                                  "nasdaq_20230822_by_type.itch"])
def test_scan_agrees_on_real_samples(name):
    assert check(str(REAL_ITCH / name))[0] > 0


@pytest.mark.parametrize("parts", [2, 3])
def test_partition_splits_messages_by_owner_in_order_and_threaded_scans_agree(synthetic_day, parts):
    """core.itch_partition against numpy's split of the same chunk; and pass 1 on `parts`
    threads (the partition, one scan per share) gives the one-scan figures exactly."""
    from lobreplay.itch.replay import ItchReplay, ReplayConfig
    owner = (np.arange(65536) % parts).astype(np.uint8)
    owner[7] = 255  # owned by no part: dropped
    for chunk in ItchFile(synthetic_day.path, chunk_bytes=1 << 18).chunks():
        offs = np.zeros((parts, chunk.n + 3), np.uint32)
        types = np.zeros(offs.shape, np.uint8)
        counts = core.itch_partition(chunk.buf, chunk.offsets, chunk.types, chunk.n, owner, offs, types)
        loc = (chunk.buf[chunk.offsets + 1].astype(np.int64) << 8) | chunk.buf[chunk.offsets + 2]
        for k in range(parts):
            mine = owner[loc] == k
            assert counts[k] == mine.sum()
            assert (offs[k, :counts[k]] == chunk.offsets[mine]).all() and (types[k, :counts[k]] == chunk.types[mine]).all()
        assert counts.sum() == (owner[loc] != 255).sum()
    one = ItchReplay(synthetic_day.path, "unused", ReplayConfig(), hash_file=False).pass1()
    many = ItchReplay(synthetic_day.path, "unused", ReplayConfig(chunk_bytes=1 << 18), hash_file=False).pass1(parts)
    assert one.stats.tobytes() == many.stats.tobytes() and one.symbols == many.symbols
    assert one.messages == many.messages > 0


def _orders_file(path, refs, locates=(3, 4)) -> None:
    """Adds of every ref (alternating locates), then a delete of every other one, an
    execution of part of the rest and a replace of some: an order map's worth of work."""
    out, ts = [], 1
    for i, ref in enumerate(refs):
        out.append(add(locates[i % 2], ts, ref, b"B", 100, 1000 + i % 7))
        ts += 1
    for i, ref in enumerate(refs):
        loc = locates[i % 2]
        if i % 2:
            out.append(msg("D", loc, ts, ref))
        elif i % 4 == 0:
            out.append(msg("E", loc, ts, ref, 40, i))
        else:
            out.append(msg("U", loc, ts, ref, ref + 1, 50, 1001))
        ts += 1
    path.write_bytes(b"".join(out))


@pytest.mark.parametrize("name, refs, scrambled", [
    ("sequential", [1 + i for i in range(20000)], False),
    ("nasdaq-like gaps", list(np.cumsum(np.random.default_rng(5).integers(1, 17, 20000)).tolist()), False),
    ("same low 20 bits", [(i + 1) << 20 for i in range(20000)], True),
    ("same low 12 bits", [(i + 1) << 12 for i in range(20000)], True),
    # 80,000 live orders in the map's block of 16 MiB (csrc/core/hugemem.h maps it itself, on huge
    # pages where the kernel allows); references sharing their low bits rebuild it scrambled
    ("sequential, map past 2 MiB", [1 + i for i in range(80000)], False),
    ("same low 20 bits, map past 2 MiB", [(i + 1) << 20 for i in range(80000)], True),
])
def test_order_map_places_by_reference_and_scrambles_when_they_collide(tmp_path, name, refs, scrambled):
    """Pass 1's order map homes a reference at its low bits while the feed numbers orders
    in sequence (as NASDAQ does), and switches to a hash when references pile up there
    (csrc/feeds/itch.c, SCRAMBLE_PROBES). The figures are the naive scan's either way."""
    p = tmp_path / "refs.itch"
    _orders_file(p, refs)
    check(str(p), chunk_bytes=1 << 16)
    scan = core.ItchScan()
    for c in ItchFile(str(p), chunk_bytes=1 << 16).chunks():
        scan.feed(c.buf, c.offsets, c.types, c.n, None)
    assert scan.scrambled is scrambled
    assert int(scan.stats()["peak_live"][3] + scan.stats()["peak_live"][4]) == len(refs)


def test_order_map_grows_past_its_first_block(tmp_path):
    """600,000 orders live at once outgrow the map's first 2^20 slots (it grows at 512k):
    every one is still found when it is deleted, youngest first and oldest first."""
    n = 600_000
    a = np.zeros(n, [("len", ">u2"), ("type", "S1"), ("locate", ">u2"), ("track", ">u2"), ("ts", "V6"),
                     ("ref", ">u8"), ("side", "S1"), ("shares", ">u4"), ("stock", "S8"), ("price", ">u4")])
    d = np.zeros(n, [("len", ">u2"), ("type", "S1"), ("locate", ">u2"), ("track", ">u2"), ("ts", "V6"),
                     ("ref", ">u8")])
    a["len"], a["type"], a["side"], a["shares"], a["stock"] = 36, b"A", b"B", 100, b"XYZ     "
    a["ref"] = np.arange(1, n + 1)
    a["locate"] = 3 + a["ref"] % 2
    a["price"] = 1000 + a["ref"] % 7
    d["len"], d["type"] = 19, b"D"
    d["ref"] = np.concatenate([a["ref"][: n // 2][::-1], a["ref"][n // 2:]])  # youngest of the first half first
    d["locate"] = 3 + d["ref"] % 2
    p = tmp_path / "many.itch"
    p.write_bytes(a.tobytes() + d.tobytes())
    got = c_scan(str(p), 1 << 20)
    assert int(got["peak_live"][3] + got["peak_live"][4]) == n
    assert int(got["deletes"][3] + got["deletes"][4]) == n
    assert int(got["unknown_refs"].sum()) == 0


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_price_gcd_is_the_gcd_of_the_prices(tmp_path_factory, data):
    """The scan's running gcd (csrc/feeds/itch.c, see_price: a repeat skipped, a remainder test
    before Euclid) against math.gcd on prices that share factors, are 0, 1 or 2^32 - 1,
    repeat or change."""
    base = data.draw(st.sampled_from([1, 2, 3, 7, 100, 625, 65521, 65536, 2**31, 4294967291, 4294967295]))
    prices = data.draw(st.lists(st.one_of(st.integers(0, (2**32 - 1) // base).map(lambda k: k * base),
                                          st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 2**32 - 1])),
                                min_size=1, max_size=40))
    p = tmp_path_factory.mktemp("gcd") / "gcd.itch"
    p.write_bytes(b"".join(add(9, i + 1, i + 1, b"S", 1, px) for i, px in enumerate(prices)))
    assert int(c_scan(str(p), 1 << 17)["price_gcd"][9]) == math.gcd(*prices)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_distinct_min_counts_the_hash_bits_of_the_prices(tmp_path_factory, data):
    """distinct_min against the set of the prices' hash bits (price_bit), on prices made to
    land on chosen bits: the same bit from different prices, bits 32 and 1 apart in the same
    64-bit word, the first and last of the 4,096; prices of 0 (no bit while every price is 0)."""
    inverse = pow(0x9E3779B1, -1, 2**32)  # px * 0x9E3779B1 (mod 2^32) is a bijection
    word = data.draw(st.integers(0, 63))
    bits = st.one_of(st.sampled_from([[0], [4095], [0, 4095]]), st.integers(0, 4095).map(lambda b: [b]),
                     st.integers(0, 31).map(lambda b: [word * 64 + b, word * 64 + b + 32]),  # bits 32 apart
                     st.integers(0, 62).map(lambda b: [word * 64 + b, word * 64 + b + 1]))
    groups = data.draw(st.lists(bits, min_size=1, max_size=12))
    wanted = [(b, data.draw(st.integers(0, 2**20 - 1))) for g in groups for b in g]
    prices = [((b << 20 | low) * inverse) % 2**32 for b, low in wanted]
    prices += data.draw(st.lists(st.just(0), max_size=2))
    prices = data.draw(st.permutations(prices))
    assert sorted(price_bit(px) for px in prices if px) == sorted(b for b, low in wanted if b << 20 | low)
    p = tmp_path_factory.mktemp("bits") / "bits.itch"
    p.write_bytes(b"".join(add(4, i + 1, i + 1, b"B", 1, px) for i, px in enumerate(prices)))
    check(str(p))
    want = len({price_bit(px) for px in prices}) if any(prices) else 0
    assert int(c_scan(str(p), 1 << 17)["distinct_min"][4]) == want


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_order_map_agrees_on_random_operations(tmp_path_factory, data):
    """Random adds, deletes, executions, cancels and replaces (duplicates and unknown
    references among them) on references that share home slots in the order map's
    first 2^20 slots (k * 2^20 + j), sit at its end (a walk from slot 2^20 - 1 wraps to
    slot 0), or are large: every figure is the naive scan's, after chunks of any size."""
    top = 1 << 20
    low = data.draw(st.lists(st.sampled_from([1, 2, 3, top - 2, top - 1]), min_size=1, max_size=3, unique=True))
    pool = [k * top + j for k in range(4) for j in low] + [2**63 + 5, 2**64 - 1]
    refs = st.sampled_from(data.draw(st.lists(st.sampled_from(pool), min_size=2, max_size=6, unique=True)))
    ops = data.draw(st.lists(st.tuples(st.sampled_from("AAADDEXU"), refs, refs, st.integers(1, 300),
                                       st.sampled_from([3, 4])), min_size=8, max_size=120))
    out = []
    for ts, (t, ref, new, q, loc) in enumerate(ops, 1):
        if t == "A":
            out.append(add(loc, ts, ref, b"B", q, 1000 + q))
        elif t == "D":
            out.append(msg("D", loc, ts, ref))
        elif t == "E":
            out.append(msg("E", loc, ts, ref, q, ts))
        elif t == "X":
            out.append(msg("X", loc, ts, ref, q))
        else:
            out.append(msg("U", loc, ts, ref, new, q, 1000 + q))
    p = tmp_path_factory.mktemp("ops") / "ops.itch"
    p.write_bytes(b"".join(out))
    check(str(p), chunk_bytes=data.draw(st.sampled_from([64, 256, 1 << 17])))
