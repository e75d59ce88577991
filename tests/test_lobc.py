"""The .lobc format (docs/lobc.md): writer, reader, torn tails, checksums, decimals."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import zlib
from decimal import Decimal


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobreplay.l2 import lobc
from lobreplay.errors import InputError

ALL_KINDS = list(lobc.KIND_NAMES)


def sample_records(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    r = np.zeros(n, lobc.RECORD_DTYPE)
    r["recv_ns"] = 1_723_161_253_937_085_768 + np.arange(n) * 1000
    r["exch_ns"] = rng.integers(0, 1 << 62, n)
    r["first_id"] = rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    r["last_id"] = rng.integers(0, 1 << 63, n, dtype=np.uint64)
    r["prev_id"] = rng.integers(0, 1 << 40, n, dtype=np.uint64)
    r["price"] = rng.integers(-(1 << 62), 1 << 62, n)
    r["qty"] = rng.integers(0, 1 << 62, n)
    r["kind"] = np.array(ALL_KINDS)[np.arange(n) % len(ALL_KINDS)]
    r["side"] = np.array([0, ord("B"), ord("S")])[np.arange(n) % 3]
    r["symbol"] = np.arange(n) % 3
    r["flags"] = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    return r


def write(path, records, *, flush_records=4096, via="add", **kw):
    with lobc.LobcWriter(path, venue="binance", market="spot", symbols=["btcusdt", "ethusdt", "bnbusdt"],
                         streams=["btcusdt@depth@100ms"], flush_records=flush_records, flush_seconds=3600,
                         **kw) as w:
        if via == "add":
            for r in records:
                w.add(**{f: r[f].item() for f in lobc.RECORD_DTYPE.names})
        else:
            w.add_many(records)
    return w


def test_record_layout_is_the_documented_one():
    assert lobc.RECORD_DTYPE.itemsize == 64
    offs = {name: lobc.RECORD_DTYPE.fields[name][1] for name in lobc.RECORD_DTYPE.names}
    assert offs == {"recv_ns": 0, "exch_ns": 8, "first_id": 16, "last_id": 24, "prev_id": 32, "price": 40,
                    "qty": 48, "kind": 56, "side": 57, "symbol": 58, "flags": 60}
    assert (lobc.SNAPSHOT_BEGIN, lobc.TICKER_ASK, lobc.GAP, lobc.RESYNC) == (1, 11, 8, 9)
    assert (lobc.GAP_SEQUENCE, lobc.GAP_MALFORMED) == (1, 7)
    assert lobc.DEFAULT_SCALE == 10**8


@pytest.mark.parametrize("via", ["add", "add_many"])
def test_round_trip_of_every_kind(tmp_path, via):
    recs = sample_records(50)
    assert set(recs["kind"].tolist()) == set(ALL_KINDS)
    p = tmp_path / "x.lobc"
    w = write(p, recs, flush_records=7, via=via)
    d = lobc.read(p)
    assert d.torn is None and d.whole
    assert d.blocks == w.blocks == 8 and w.records == 50
    assert d.records.dtype == lobc.RECORD_DTYPE
    np.testing.assert_array_equal(d.records, recs)
    assert w.bytes == os.path.getsize(p) == 512 + 8 * 64 + 50 * 64
    assert d.meta["symbols"] == ["BTCUSDT", "ETHUSDT", "BNBUSDT"]
    assert d.meta["venue"] == "binance" and d.meta["market"] == "spot"
    assert d.meta["price_scale"] == d.meta["qty_scale"] == 10**8
    assert d.meta["streams"] == ["btcusdt@depth@100ms"] and d.meta["tool"].startswith("lobreplay ")
    streamed = np.concatenate([b.records for b in lobc.iter_blocks(p)])
    np.testing.assert_array_equal(streamed, recs)


def test_header_and_block_bytes(tmp_path):
    p = tmp_path / "x.lobc"
    recs = sample_records(5)
    write(p, recs, flush_records=3, source="in.gz")
    raw = p.read_bytes()
    assert raw[:4] == b"LOBC" and int.from_bytes(raw[4:6], "little") == 1
    assert int.from_bytes(raw[6:8], "little") == 512
    mlen = int.from_bytes(raw[8:12], "little")
    meta = json.loads(raw[12:12 + mlen])
    assert meta["source"] == "in.gz" and not any(raw[12 + mlen:512])
    blk = raw[512:576]
    assert blk[:4] == b"BLK1" and int.from_bytes(blk[4:8], "little") == 3
    assert int.from_bytes(blk[8:12], "little") == zlib.crc32(raw[576:576 + 3 * 64])
    assert int.from_bytes(blk[16:24], "little") == 0
    assert int.from_bytes(blk[24:32], "little", signed=True) == int(recs["recv_ns"][0])
    assert not any(blk[12:16]) and not any(blk[32:64])
    blk2 = raw[576 + 3 * 64:576 + 4 * 64]
    assert int.from_bytes(blk2[16:24], "little") == 1 and int.from_bytes(blk2[4:8], "little") == 2


def test_side_forms_and_field_checks(tmp_path):
    p = tmp_path / "x.lobc"
    with lobc.LobcWriter(p, venue="binance", market="usdm", symbols=["X"]) as w:
        for side in ("B", b"S", 66, 0, np.uint8(83)):
            w.add(kind=lobc.DIFF_LEVEL, recv_ns=1, side=side, price=5, qty=1)
        with pytest.raises(ValueError, match="side"):
            w.add(kind=lobc.DIFF_LEVEL, recv_ns=1, side="X")
        with pytest.raises(ValueError, match="kind"):
            w.add(kind=12, recv_ns=1)
        with pytest.raises(ValueError, match="symbol"):
            w.add(kind=lobc.TRADE, recv_ns=1, symbol=1)
        with pytest.raises(ValueError, match="out of range"):
            w.add(kind=lobc.TRADE, recv_ns=1, first_id=-1)
        with pytest.raises(ValueError):
            w.add_many(np.zeros(2, np.int64))
        bad = np.zeros(3, lobc.RECORD_DTYPE)
        bad["kind"], bad["side"] = lobc.DIFF_LEVEL, [66, 83, 90]
        with pytest.raises(ValueError, match="record 2: kind 5 / side 90: expected"):  # (was written as it was)
            w.add_many(bad)
        bad["side"], bad["kind"] = 66, [lobc.TRADE, 99, lobc.TRADE]
        with pytest.raises(ValueError, match="record 1: kind 99"):
            w.add_many(bad)
    assert lobc.read(p).records["side"].tolist() == [66, 83, 66, 0, 83]
    with lobc.LobcWriter(tmp_path / "none.lobc", venue="binance", market="spot", symbols=[]) as w0:
        with pytest.raises(ValueError, match="symbol index 0 out of range"):  # (no symbol: no record names one)
            w0.add(kind=lobc.TRADE, recv_ns=1)
    for call in (lambda: w.add(kind=lobc.TRADE, recv_ns=1), lambda: w.add_many(np.zeros(1, lobc.RECORD_DTYPE)),
                 w.fsync):  # after close: an error, not a record silently dropped (or an AttributeError)
        with pytest.raises(ValueError, match="the writer is closed"):
            call()
    with pytest.raises(ValueError, match="metadata"):  # 65,472 bytes of header at most
        lobc.LobcWriter(tmp_path / "y.lobc", venue="binance", market="spot",
                        symbols=[f"S{i:08d}" for i in range(6000)])


@pytest.mark.parametrize("n_symbols", [1, 30, 600, 4000])
def test_header_grows_with_the_metadata(tmp_path, n_symbols):
    """A header of 512 bytes, or the 64-byte units the metadata needs: the symbols of a
    capture of the whole exchange fit one file."""
    p = tmp_path / "many.lobc"
    symbols = [f"SYM{i:05d}USDT" for i in range(n_symbols)]
    with lobc.LobcWriter(p, venue="binance", market="spot", symbols=symbols) as w:
        for i in range(0, n_symbols, max(1, n_symbols // 7)):
            w.add(kind=lobc.TRADE, recv_ns=10 + i, price=5, qty=1, side="B", symbol=i)
    raw = p.read_bytes()
    hlen, mlen = int.from_bytes(raw[6:8], "little"), int.from_bytes(raw[8:12], "little")
    assert hlen == max(512, -(-(12 + mlen) // 64) * 64) and hlen % 64 == 0
    assert (hlen > 512) == (12 + mlen > 512) and not any(raw[12 + mlen:hlen])
    assert raw[hlen:hlen + 4] == b"BLK1"  # the first block right after the header
    d = lobc.read(p)
    assert d.meta["symbols"] == symbols and d.torn is None and w.bytes == len(raw) == d.size
    assert d.records["symbol"].tolist() == list(range(0, n_symbols, max(1, n_symbols // 7)))


def test_flush_by_count_by_time_and_on_request(tmp_path):
    p = tmp_path / "x.lobc"
    w = lobc.LobcWriter(p, venue="binance", market="spot", symbols=["X"], flush_records=4, flush_seconds=3600)
    for i in range(10):
        w.add(kind=lobc.TRADE, recv_ns=i)
    assert (w.blocks, w.records, w.pending) == (2, 8, 2)
    assert lobc.read(p).records["recv_ns"].tolist() == list(range(8))  # readable while open
    w.flush()
    w.flush()  # nothing pending: no empty block
    assert (w.blocks, w.records, w.pending) == (3, 10, 0)
    w.close()
    w2 = lobc.LobcWriter(tmp_path / "t.lobc", venue="binance", market="spot", symbols=["X"], flush_seconds=0)
    w2.add(kind=lobc.TRADE, recv_ns=1)
    w2.add(kind=lobc.TRADE, recv_ns=2)
    assert w2.blocks == 2  # flush_seconds=0: the time rule flushes on every add
    w2.close()
    w3 = lobc.LobcWriter(tmp_path / "m.lobc", venue="binance", market="spot", symbols=["X"], flush_records=3)
    w3.add_many(_one_symbol(8))
    assert (w3.blocks, w3.pending) == (2, 2)
    w3.close()
    assert lobc.read(tmp_path / "m.lobc").blocks == 3


def _one_symbol(n):
    r = sample_records(n)
    r["symbol"] = 0
    return r


def test_a_file_cut_at_every_byte_reads_up_to_its_last_whole_block(tmp_path):
    src = tmp_path / "whole.lobc"
    recs = sample_records(9)
    write(src, recs, flush_records=4)  # blocks of 4, 4, 1 records
    raw = src.read_bytes()
    starts = [512, 512 + 5 * 64, 512 + 10 * 64]
    ends = starts[1:] + [len(raw)]
    counts = [4, 4, 1]
    cut = tmp_path / "cut.lobc"
    for size in range(len(raw) + 1):
        cut.write_bytes(raw[:size])
        if size < 512:
            with pytest.raises(InputError, match="cut.lobc"):
                lobc.read(cut)
            continue
        d = lobc.read(cut)
        whole_blocks = sum(1 for e in ends if e <= size)
        n = sum(counts[:whole_blocks])
        np.testing.assert_array_equal(d.records, recs[:n])
        assert d.blocks == whole_blocks
        if size in (512, *ends):
            assert d.torn is None, size
        else:
            start = starts[whole_blocks]
            assert (d.torn.offset, d.torn.bytes) == (start, size - start), size
            assert "partial" in d.torn.reason and not d.torn.corrupt  # (a cut is never damage inside)
        c = lobc.check(cut)
        assert c["whole"] == (d.torn is None) and c["records"] == n


def _readers_say(p) -> lobc.Torn | None:
    """The torn tail every reader reports for p, checked to be the same for all of them."""
    d = lobc.read(p)
    it = lobc.iter_blocks(p)
    n_iter = sum(len(b.records) for b in it)
    r = lobc.ChunkReader(p, chunk_records=5)
    n_chunks = sum(len(c) for c in r.chunks(verify=True))
    c = lobc.check(p)
    assert it.torn == r.torn == d.torn and n_iter == n_chunks == len(d.records) == c["records"]
    assert c["torn"] == (d.torn.as_dict() if d.torn else None)
    return d.torn


def test_check_says_what_the_sound_blocks_after_the_damage_hold(tmp_path):
    """lobc check of a corrupt file: the sound blocks after the damage (how many, their
    records: what `lobc replay --allow-corrupt` reads on), across more damage, to the end."""
    p = tmp_path / "x.lobc"
    write(p, sample_records(40), flush_records=3)     # 13 blocks of 3 records, then 1
    raw = bytearray(p.read_bytes())
    size = 64 + 3 * 64

    def at(block):
        return 512 + block * size

    raw[at(2) + 64 + 5] ^= 1                           # block 2's records
    p.write_bytes(bytes(raw))
    c = lobc.check(p)
    assert c["records"] == 6 and c["torn"]["corrupt"]
    first = {"offset": at(2), "bytes": size, "reason": "CRC mismatch in block 2", "corrupt": True,
             "next_block": at(3)}
    assert c["after_damage"] == {"offset": at(3), "blocks": 11, "records": 31, "damage": [first],
                                 "to_the_end": True}
    raw[at(7):at(7) + 4] = b"XXXX"                     # and block 7's magic: sound blocks 3-6 and 8-13 after
    p.write_bytes(bytes(raw))
    second = {"offset": at(7), "bytes": size, "reason": "bad block magic b'XXXX'", "corrupt": True,
              "next_block": at(8)}
    assert lobc.check(p)["after_damage"] == {"offset": at(3), "blocks": 10, "records": 28,
                                             "damage": [first, second], "to_the_end": True}
    p.write_bytes(bytes(raw[:at(13) + 10]))            # and cut inside the last block
    assert lobc.check(p)["after_damage"] == {"offset": at(3), "blocks": 9, "records": 27,
                                             "damage": [first, second], "to_the_end": False}


def test_check_reads_the_blocks_before_the_damage_once(tmp_path, monkeypatch):
    """lobc check of a file damaged near its end: the second pass, over the sound blocks after
    the damage, starts at the damage instead of reading and checking again the blocks the
    first pass found sound. The same figures as a reader that checks every block again."""
    p = tmp_path / "x.lobc"
    write(p, sample_records(40), flush_records=3)     # 13 blocks of 3 records, then 1
    raw = bytearray(p.read_bytes())
    size = 64 + 3 * 64
    raw[512 + 11 * size + 64 + 5] ^= 1                 # block 11's records: blocks 12 and 13 after it
    p.write_bytes(bytes(raw))
    read = []
    real = lobc._preadv_all
    monkeypatch.setattr(lobc, "_preadv_all", lambda fd, bufs, offset: read.append(real(fd, bufs, offset)) or read[-1])
    c = lobc.check(p)
    body = len(raw) - 512
    # the first pass reads the blocks (here in one run) and stops at block 11; the second reads
    # from block 11 on (the run that met the damage, then the blocks after it again): at most
    # the tail from the damage twice beyond the body. Before, it read all 14 blocks again.
    tail = len(raw) - (512 + 11 * size)
    assert sum(read) <= body + 2 * tail < 2 * body, (sum(read), body, tail)
    w = lobc.ChunkReader(p, past_damage=True).verify()
    assert c["records"] == 33 and c["torn"]["reason"] == "CRC mismatch in block 11"
    assert c["after_damage"] == {"offset": 512 + 12 * size, "blocks": 2, "records": 4,
                                 "damage": [t.as_dict() for t in w.damage], "to_the_end": True}


def test_a_bad_block_inside_the_file_is_corrupt_and_at_its_end_torn(tmp_path):
    """A crash or kill -9 leaves at worst a partial last block, so a bad block with a sound
    block after it is damage inside the file: every reader stops there alike, and says
    where the sound blocks resume (`corrupt`); a bad last block, or zeros after the last
    (a preallocated tail), is a torn tail."""
    p = tmp_path / "x.lobc"
    recs = sample_records(12)
    write(p, recs, flush_records=4)                   # blocks of 4 records at 512, 832, 1152
    raw = bytearray(p.read_bytes())
    second, third = 512 + 5 * 64, 512 + 10 * 64

    def damaged(at: int, value: bytes | None = None, xor: int = 0) -> lobc.Torn:
        bad = bytearray(raw)
        if value is None:
            bad[at] ^= xor
        else:
            bad[at:at + len(value)] = value
        p.write_bytes(bad)
        return _readers_say(p)

    cases = {  # where, what: the reason
        "records": (second + 64 + 100, None, 0x01, "CRC mismatch in block 1"),
        "magic": (second, b"XXXX", 0, "bad block magic b'XXXX'"),
        "sequence": (second + 16, b"\x07", 0, "block sequence 7, expected 1"),
        "count 0": (second + 4, (0).to_bytes(4, "little"), 0, "block of 0 records"),
        "count too big": (second + 4, (5).to_bytes(4, "little"), 0, "CRC mismatch in block 1"),
        "count past the end": (second + 4, (99).to_bytes(4, "little"), 0, "partial block: 99 records"),
        "reserved": (second + 40, b"\x01", 0, "block header's reserved bytes are not zero"),
        "reserved0": (second + 12, b"\x01", 0, "block header's reserved bytes are not zero"),
        "receive time": (second + 24, None, 0x01,
                         f"block 1: its header's receive time {int(recs['recv_ns'][4]) ^ 1} is not its first "
                         f"record's {int(recs['recv_ns'][4])}"),
    }
    for name, (at, value, xor, why) in cases.items():
        t = damaged(at, value, xor)
        assert (t.offset, t.bytes, t.next_block) == (second, len(raw) - second, third), name
        assert t.reason.startswith(why) and t.corrupt, (name, t.reason)
        assert "damaged inside" in lobc.torn_text(t.as_dict())
        np.testing.assert_array_equal(lobc.read(p).records, recs[:4])
    for name, (at, value, xor, why) in cases.items():  # the same damage to the last block: a torn tail
        if name == "count too big":
            continue  # (the last block cannot grow inside the file)
        t = damaged(at - second + third, value, xor)
        assert (t.offset, t.bytes, t.next_block) == (third, len(raw) - third, None), name
        first = int(recs["recv_ns"][8])
        assert t.reason.startswith(why.replace("block 1", "block 2").replace("expected 1", "expected 2")
                                   .replace(f"{first - 4000 ^ 1} is not its first record's {first - 4000}",
                                            f"{first ^ 1} is not its first record's {first}")), name
        assert "torn tail" in lobc.torn_text(t.as_dict())
    p.write_bytes(raw + b"\0" * 64)  # zeros after the last block (a preallocated tail)
    t = _readers_say(p)
    assert (t.offset, t.bytes, t.corrupt) == (len(raw), 64, False)
    assert t.reason == "bad block magic b'\\x00\\x00\\x00\\x00'"
    assert lobc.check(p)["after_damage"] is None
    p.write_bytes(raw + bytes(raw[second:third]))  # a copy of block 1 after the end: its number is not higher
    assert _readers_say(p).next_block is None


@pytest.mark.parametrize("chunk", [1, 5, 7, 100])
def test_chunk_reader_streams_the_records_of_read(tmp_path, chunk):
    """Runs of whole blocks of at most `chunk` records (a bigger block alone), in one reused
    buffer; the same records, CRC verdict and torn tail as read(); a second pass reads only
    the blocks the first one kept."""
    p = tmp_path / "x.lobc"
    recs = sample_records(40)
    write(p, recs, flush_records=3)                      # 13 blocks of 3, then 1
    raw = bytearray(p.read_bytes())
    for damage in (None, 512 + 6 * (64 + 3 * 64) + 64 + 5):  # a byte of block 6's records
        bad = bytearray(raw)
        if damage:
            bad[damage] ^= 0x10
        p.write_bytes(bad)
        d = lobc.read(p)
        r = lobc.ChunkReader(p, chunk_records=chunk)
        assert r.blocks == 14 and r.torn is None         # headers only so far
        got = [c.copy() for c in r.chunks(verify=True)]
        assert all(len(c) <= max(chunk, 3) for c in got)
        assert all(len(c) + 3 > chunk for c in got[:-1])   # runs as long as fit
        np.testing.assert_array_equal(np.concatenate(got), d.records)
        assert (r.blocks, r.records, r.torn) == (d.blocks, len(d.records), d.torn)
        again = np.concatenate([c.copy() for c in r.chunks()])  # pass 2: the blocks kept
        np.testing.assert_array_equal(again, d.records)
        assert len(r._bufs) == 1 and len(r._bufs[0]) <= max(chunk, 3)
        # two buffers in turn (read_ahead): reading a chunk leaves the one before as it was
        it = r.chunks(buffers=2)
        prev = next(it)
        seen, kept = [], prev.copy()
        for c in it:
            np.testing.assert_array_equal(prev, kept)
            seen.append(kept)
            prev, kept = c, c.copy()
        np.testing.assert_array_equal(np.concatenate(seen + [kept]), d.records)
        assert len(r._bufs) == 2 and len(seen) == len(got) - 1
        read, parts = r.reader(), []                    # reads cut anywhere, across blocks
        while True:
            out = np.zeros(chunk, lobc.RECORD_DTYPE)
            k = read(out)
            parts.append(out[:k])
            if k < chunk:
                break
        np.testing.assert_array_equal(np.concatenate(parts), d.records)
    p.write_bytes(raw)
    r = lobc.ChunkReader(p, chunk_records=chunk)
    with open(p, "r+b") as f:                              # the file shrinks after it was opened
        f.truncate(512 + 4 * (64 + 3 * 64) + 100)
    got = np.concatenate([c.copy() for c in r.chunks()])
    np.testing.assert_array_equal(got, recs[:len(got)])
    assert len(got) == 12 and r.blocks == 4           # the 4 blocks still whole
    assert r.torn.offset == 512 + 4 * (64 + 3 * 64) and "changed since it was opened" in r.torn.reason
    p.write_bytes(raw)                                 # the same through reader()
    r = lobc.ChunkReader(p, chunk_records=chunk)
    with open(p, "r+b") as f:
        f.truncate(512 + 4 * (64 + 3 * 64) + 100)
    read, total = r.reader(), 0
    out = np.zeros(chunk, lobc.RECORD_DTYPE)
    while (k := read(out)):
        np.testing.assert_array_equal(out[:k], recs[total:total + k])
        total += k
    assert total == 12 and r.blocks == 4 and "changed since it was opened" in r.torn.reason


@pytest.mark.parametrize("chunk", [1, 5, 7, 100])
def test_chunk_reader_past_damage_reads_on_with_a_gap_per_symbol(tmp_path, chunk):
    """past_damage=True: the sound blocks on both sides of damage inside the file, and
    where bad blocks were skipped (one stretch or several side by side, found from their
    headers or only from their CRCs), a GAP record of reason GAP_DAMAGED for every symbol
    of the metadata, at the receive time of the record before (the file's creation time at
    its start). Both passes and reader() cut anywhere give the same records; a bad last
    block is still a torn tail; the default reader still stops at the damage."""
    p = tmp_path / "x.lobc"
    recs = sample_records(40)
    w = write(p, recs, flush_records=3)                  # 13 blocks of 3, then 1
    raw = bytes(p.read_bytes())
    created = lobc.read(p).meta["created_ns"]
    start = [512 + b * (64 + 3 * 64) for b in range(14)]
    crc, head = (lambda b: start[b] + 64 + 5), (lambda b: start[b])  # a record byte; the magic
    cases = {  # the bytes damaged -> the blocks lost
        "one CRC": ([crc(6)], [6]),
        "one header": ([head(6)], [6]),
        "CRC then header": ([crc(4), head(5)], [4, 5]),
        "header then CRC": ([head(4), crc(5)], [4, 5]),
        "two stretches and the first block": ([crc(0), head(3), crc(9), crc(10)], [0, 3, 9, 10]),
        "the last block (a torn tail)": ([crc(2), crc(13)], [2, 13]),
    }
    for name, (where, lost) in cases.items():
        bad = bytearray(raw)
        for at in where:
            bad[at] ^= 0x10
        p.write_bytes(bad)
        want, last = [], None
        for b in range(14):
            if b in lost:
                if b != 13 and (b - 1) not in lost:  # (not after the last sound block: a torn tail)
                    g = np.zeros(3, lobc.RECORD_DTYPE)
                    g["kind"], g["flags"], g["symbol"] = lobc.GAP, lobc.GAP_DAMAGED, [0, 1, 2]
                    g["recv_ns"] = created if last is None else last
                    want.append(g)
                continue
            want.append(recs[3 * b:3 * b + 3])
            last = int(recs["recv_ns"][min(3 * b + 2, 39)])
        want = np.concatenate(want)
        r = lobc.ChunkReader(p, chunk_records=chunk, past_damage=True)
        got = np.concatenate([c.copy() for c in r.chunks(verify=True)])
        np.testing.assert_array_equal(got, want, err_msg=name)
        # two buffers in turn (read_ahead) while the CRCs find damage: the chunk before stays as it was
        two = lobc.ChunkReader(p, chunk_records=chunk, past_damage=True)
        it = two.chunks(verify=True, buffers=2)
        prev = next(it)
        seen, kept = [], prev.copy()
        for c in it:
            np.testing.assert_array_equal(prev, kept, err_msg=name)
            seen.append(kept)
            prev, kept = c, c.copy()
        np.testing.assert_array_equal(np.concatenate(seen + [kept]), want, err_msg=name)
        skipped = [(t.offset, t.bytes, t.next_block) for t in r.damage]  # (stretches side by side: one)
        runs = []  # [first, last] of each stretch of lost blocks before the last
        for b in (b for b in lost if b != 13):
            if runs and runs[-1][1] + 1 == b:
                runs[-1][1] = b
            else:
                runs.append([b, b])
        assert skipped == [(start[a], start[b + 1] - start[a], start[b + 1]) for a, b in runs], name
        if name in ("CRC then header", "header then CRC"):  # one stretch, named for its first bad block:
            # the search for the next sound block (header and CRC) passes over block 5
            assert r.damage[0].reason == {"CRC then header": "CRC mismatch in block 4",
                                          "header then CRC": "bad block magic b'RLK1'"}[name]
        assert r.blocks == 14 - len(lost) and r.records == len(want)
        assert (r.torn is None) == (13 not in lost), name
        np.testing.assert_array_equal(np.concatenate([c.copy() for c in r.chunks(buffers=2)]), want)
        read, parts = r.reader(), []
        while (k := read(out := np.zeros(chunk, lobc.RECORD_DTYPE))):
            parts.append(out[:k])
        np.testing.assert_array_equal(np.concatenate(parts), want, err_msg=name)
        plain = lobc.ChunkReader(p, chunk_records=chunk)  # (the default: the damage ends the file)
        got = np.concatenate([c.copy() for c in plain.chunks(verify=True)] or [recs[:0]])
        np.testing.assert_array_equal(got, recs[:3 * min(lost)])
        assert plain.torn.offset == start[min(lost)] and plain.damage == []
    assert w.records == 40


def test_repair_writes_what_a_reader_takes_past_the_damage(tmp_path, capsys):
    """lobc.repair (and `lobc repair`): a whole file of the records read past the damage (the
    sound blocks, a GAP of reason damaged per symbol at each stretch skipped, no torn tail),
    the same as read(past_damage=True); the source's metadata kept, with what was repaired;
    nothing written for a whole file, nor over the source, nor over a file without --force."""
    from lobreplay.cli.main import main
    p, out = tmp_path / "x.lobc", tmp_path / "fixed.lobc"
    recs = sample_records(40)
    write(p, recs, flush_records=3)                  # 13 blocks of 3, then 1
    raw = bytearray(p.read_bytes())
    start = [512 + b * (64 + 3 * 64) for b in range(14)]
    assert lobc.repair(p, out) is None and not out.exists()  # (whole: nothing to repair)
    raw[start[4] + 64 + 5] ^= 1                      # block 4's records, block 5's magic, block 9's records,
    raw[start[5]] ^= 1                               # and the file cut inside its last block
    raw[start[9] + 64 + 5] ^= 1
    p.write_bytes(bytes(raw[:start[13] + 64 + 10]))
    past = lobc.read(p, past_damage=True)
    assert not past.whole and len(past.damage) == 2 and past.torn.offset == start[13]
    np.testing.assert_array_equal(past.records, np.concatenate(
        [c.copy() for c in lobc.ChunkReader(p, chunk_records=4, past_damage=True).chunks(verify=True)]))
    assert (past.records["flags"][past.records["kind"] == lobc.GAP] == lobc.GAP_DAMAGED).sum() == 2 * 3
    done = lobc.repair(p, out, flush_records=5)
    fixed = lobc.read(out)
    assert fixed.whole and lobc.check(out)["whole"]
    np.testing.assert_array_equal(fixed.records, past.records)
    assert done == {"records": len(past.records), "blocks": fixed.blocks, "damage": [t.as_dict() for t in past.damage],
                    "torn": past.torn.as_dict()}
    m, m0 = fixed.meta, lobc.read(p).meta
    assert {k: m[k] for k in m0} == m0 and m["repaired_from"] == "x.lobc"  # (created_ns, tool, streams kept)
    assert m["repaired"] == {"damage": done["damage"], "torn": done["torn"]}
    with pytest.raises(ValueError, match="must not replace its source"):
        lobc.repair(p, p)
    with pytest.raises(ValueError, match="past_damage needs verify"):
        lobc.read(p, verify=False, past_damage=True)
    assert main(["lobc", "repair", str(p), "-o", str(out)]) == 1  # (exists)
    assert f"{out} exists; use --force to overwrite it" in capsys.readouterr().err
    assert main(["lobc", "repair", str(p), "-o", str(out), "--force"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}: {len(past.records)} records" in text and text.count("skipped ") == 2
    assert "torn tail" in text and not list(tmp_path.glob("*.partial"))


def test_check_of_a_file_cut_while_it_is_checked_reports_a_torn_tail(tmp_path):
    """lobc check reads with preadv, not through a memory map: a file cut while it is checked
    (here right after its block headers were read) is a torn tail naming the offset, where
    the map was a SIGBUS that killed the process with no message. (In a subprocess: if that
    comes back it kills the child, not the test run.)"""
    p = tmp_path / "x.lobc"
    write(p, sample_records(40), flush_records=3)
    cut = 512 + 4 * (64 + 3 * 64) + 100
    script = textwrap.dedent(f"""
        import json, os
        from lobreplay.l2 import lobc
        real = lobc.ChunkReader.__init__
        def init(self, *a, **k):
            real(self, *a, **k)
            os.truncate({str(p)!r}, {cut})
        lobc.ChunkReader.__init__ = init
        print(json.dumps(lobc.check({str(p)!r})))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    c = json.loads(r.stdout)
    assert not c["whole"] and c["records"] == 12 and c["blocks"] == 4
    assert c["torn"]["offset"] == 512 + 4 * (64 + 3 * 64) and "changed since it was opened" in c["torn"]["reason"]
    assert sum(c["records_by_kind"].values()) == 12


def test_iter_blocks_of_a_file_cut_while_it_is_read_ends_at_a_torn_tail(tmp_path):
    """iter_blocks reads each block with pread: a file cut after its headers were walked ends
    the iteration at the block it cut, with a torn tail saying so (through the memory map it
    read before, that was a SIGBUS killing the process). In a subprocess, so that a SIGBUS
    would kill the child, not the test run."""
    p = tmp_path / "x.lobc"
    write(p, sample_records(40), flush_records=3)
    cut = 512 + 4 * (64 + 3 * 64) + 100
    script = textwrap.dedent(f"""
        import json, os
        from lobreplay.l2 import lobc
        it = lobc.iter_blocks({str(p)!r})
        got = []
        for b in it:
            if not got:
                os.truncate({str(p)!r}, {cut})
            got.append(len(b.records))
        print(json.dumps({{"records": got, "torn": it.torn.as_dict()}}))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    c = json.loads(r.stdout)
    assert c["records"] == [3, 3, 3, 3]
    assert c["torn"]["offset"] == 512 + 4 * (64 + 3 * 64) and "changed since it was opened" in c["torn"]["reason"]


@pytest.mark.parametrize("head,hint", [
    (b"\x1f\x8b\x08\x00" + bytes(60), "it is gzip: an ITCH day (`lobreplay itch replay`) or a recording"),
    (b"\x00\x0cS\x00\x00" + bytes(60), "it looks like ITCH 5.0 (a length and a message type): `lobreplay itch replay`"),
    (b"\xd4\xc3\xb2\xa1" + bytes(60), "it looks like a pcap capture (MoldUDP64 ITCH?)"),
    (b'1700000000000000000 {"stream":"btcusdt@depth"}\n', "it looks like JSON lines: convert it first"),
    (b'{"e":"depthUpdate"}\n', "it looks like JSON lines: convert it first"),
    (b"PK\x03\x04" + bytes(60), None),  # (nothing known: no hint)
])
def test_a_file_that_is_not_lobc_says_what_it_looks_like(tmp_path, head, hint):
    """`lobreplay replay day.itch.gz` (the .lobc replay given an ITCH day or a raw recording)
    names the command that reads what the file looks like."""
    p = tmp_path / "x.bin"
    p.write_bytes(head)
    with pytest.raises(InputError, match="x.bin: offset 0: not a .lobc file") as e:
        lobc.check(p)
    assert (hint in str(e.value)) if hint else str(e.value).endswith("expected b'LOBC')"), str(e.value)


def test_bad_files_raise_input_error_naming_file_and_offset(tmp_path):
    p = tmp_path / "bad.lobc"
    good = tmp_path / "good.lobc"
    write(good, sample_records(2))
    raw = good.read_bytes()
    cases = {
        b"": "empty",
        b"PK\x03\x04" + b"\0" * 600: "offset 0: not a .lobc file",
        raw[:4] + (2).to_bytes(2, "little") + raw[6:]: "offset 4: .lobc format version 2",
        raw[:6] + (256).to_bytes(2, "little") + raw[8:]: "offset 6: header length",
        raw[:8] + (600).to_bytes(4, "little") + raw[12:]: "offset 8: metadata length",
        raw[:12] + b"{not json" + raw[21:]: "offset 12: metadata is not UTF-8 JSON",
        raw[:300]: "header cut short",
        raw[:6] + (520).to_bytes(2, "little") + raw[8:]: "offset 6: header length 520, expected 512 or more in",
        raw[:6] + (4096).to_bytes(2, "little") + raw[8:]: "file header cut short",  # shorter than it says
    }
    meta = json.loads(raw[12:12 + int.from_bytes(raw[8:12], "little")])

    def with_meta(**change):  # the header with other metadata (symbols a list of lists was a TypeError
        m = json.dumps(dict(meta, **change)).encode()  # in check; a scale "abc" went into every report)
        return raw[:8] + len(m).to_bytes(4, "little") + m + bytes(500 - len(m)) + raw[512:]
    cases.update({with_meta(symbols=[["BTC"]]): "offset 12: metadata must be a JSON object with a 'symbols' list",
                  with_meta(price_scale="abc"): "offset 12: metadata price_scale must be a power of ten",
                  with_meta(qty_scale=0): "metadata qty_scale must be a power of ten from 1 to 10**18, got 0",
                  with_meta(price_scale=None): "metadata price_scale must be a power of ten",
                  with_meta(price_scale=250): "metadata price_scale must be a power of ten"})
    for data, msg in cases.items():
        p.write_bytes(data)
        for call in (lobc.read, lobc.check):
            with pytest.raises(InputError, match="bad.lobc") as e:
                call(p)
            assert msg in str(e.value)
    with pytest.raises(InputError, match="cannot read"):
        lobc.read(tmp_path / "missing.lobc")
    os.mkfifo(tmp_path / "pipe.lobc")  # (it was called an empty file)
    with pytest.raises(InputError, match="pipe.lobc: not a regular file"):
        lobc.check(tmp_path / "pipe.lobc")
    p.write_bytes(with_meta(price_scale=100))
    assert lobc.read(p).meta["price_scale"] == 100


def test_kill_9_leaves_every_flushed_block(tmp_path):
    p = tmp_path / "killed.lobc"
    code = textwrap.dedent(f"""
        import sys, time
        from lobreplay.l2 import lobc
        w = lobc.LobcWriter({str(p)!r}, venue="binance", market="spot", symbols=["X"], flush_records=5)
        for i in range(23):
            w.add(kind=lobc.TRADE, recv_ns=i, first_id=i)
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    d = lobc.read(p)
    assert d.torn is None and d.blocks == 4
    assert d.records["first_id"].tolist() == list(range(20))  # the 3 pending records were lost, nothing else


def test_check_summarises(tmp_path):
    p = tmp_path / "x.lobc"
    with lobc.LobcWriter(p, venue="binance", market="spot", symbols=["a", "b"]) as w:
        w.add(kind=lobc.SNAPSHOT_BEGIN, recv_ns=10, first_id=5)
        w.add(kind=lobc.SNAPSHOT_END, recv_ns=10, first_id=5)
        w.add(kind=lobc.GAP, recv_ns=20, symbol=1, first_id=7, last_id=9, flags=lobc.GAP_SEQUENCE)
        w.add(kind=lobc.RESYNC, recv_ns=30, symbol=1, first_id=11, exch_ns=35)
    c = lobc.check(p)
    assert c["whole"] and c["records"] == 4 and c["blocks"] == 1
    assert c["records_by_kind"] == {"SNAPSHOT_BEGIN": 1, "SNAPSHOT_END": 1, "GAP": 1, "RESYNC": 1}
    assert c["records_by_symbol"] == {"A": 2, "B": 2}
    assert c["recv_ns"] == {"first": 10, "last": 30, "backwards": 0} and c["exch_ns"] == {"first": 35, "last": 35}
    assert c["gaps"] == [{"recv_ns": 20, "symbol": "B", "reason": "sequence", "expected_id": 7, "received_id": 9}]
    assert c["resyncs"] == {"B": 1}


def test_check_counts_receive_times_that_go_back(tmp_path):
    """A receive time earlier than the record's before it (a capture's clock stepped back) is
    counted, inside a block and across blocks: check said nothing of it."""
    p = tmp_path / "x.lobc"
    with lobc.LobcWriter(p, venue="binance", market="spot", symbols=["a"], flush_records=3) as w:
        for t in (10, 20, 15, 30, 25, 40, 40, 39):  # blocks of 3: 10 20 15 | 30 25 40 | 40 39
            w.add(kind=lobc.TRADE, recv_ns=t, first_id=t)
    c = lobc.check(p)
    assert c["blocks"] == 3 and c["recv_ns"] == {"first": 10, "last": 40, "backwards": 3}
    with lobc.LobcWriter(p, venue="binance", market="spot", symbols=["a"], flush_records=2) as w:
        for t in (10, 20, 19, 30):  # across the block boundary only
            w.add(kind=lobc.TRADE, recv_ns=t, first_id=t)
    assert lobc.check(p)["recv_ns"]["backwards"] == 1


# ---------------------------------------------------------------- decimals

def test_parse_decimal_examples():
    S = 10**8
    assert lobc.parse_decimal("0.00100000", S) == 100_000
    assert lobc.parse_decimal("64123.45", S) == 6_412_345_000_000
    assert lobc.parse_decimal("0.100000000000", S) == 10_000_000
    assert lobc.parse_decimal("0", S) == 0 and lobc.parse_decimal("0.00000000", S) == 0
    assert lobc.parse_decimal("00012", 100) == 1200
    assert lobc.parse_decimal("92233720368.54775807", S) == 2**63 - 1
    for bad in ("1e-8", "1E5", "-1", "+1", "-0.0", " 1", "1 ", "", ".5", "5.", "1.2.3", "0x10", "١", "nan", "inf",
                "1_000"):
        with pytest.raises(ValueError, match="scale 100000000"):
            lobc.parse_decimal(bad, S)
    with pytest.raises(ValueError, match="9 significant decimals"):
        lobc.parse_decimal("0.000000001", S)
    with pytest.raises(ValueError, match="int64"):
        lobc.parse_decimal("92233720368.54775808", S)
    with pytest.raises(ValueError, match="int64"):
        lobc.parse_decimal("100000000000000000000", S)
    with pytest.raises(ValueError, match="power of ten"):
        lobc.parse_decimal("1", 3)
    assert lobc.format_decimal(100_000, S) == "0.00100000"
    assert lobc.format_decimal(-150, 100) == "-1.50" and lobc.format_decimal(7, 1) == "7"


@settings(max_examples=400, deadline=None)
@given(whole=st.integers(0, 10**12), frac=st.text("0123456789", max_size=12), zeros=st.integers(0, 6),
       d=st.integers(0, 10), lead=st.integers(0, 3))
def test_parse_decimal_is_exact(whole, frac, zeros, d, lead):
    scale = 10**d
    text = "0" * lead + str(whole) + ("." + frac + "0" * zeros if frac or zeros else "")
    exact = Decimal(text) * scale
    sig = frac.rstrip("0")
    if len(sig) > d:
        with pytest.raises(ValueError):
            lobc.parse_decimal(text, scale)
        return
    # integer arithmetic only, independently of the implementation
    expected = whole * scale + (int(sig) * 10 ** (d - len(sig)) if sig else 0)
    assert exact == expected
    if expected > 2**63 - 1:
        with pytest.raises(ValueError, match="int64"):
            lobc.parse_decimal(text, scale)
        return
    assert lobc.parse_decimal(text, scale) == expected
    assert lobc.parse_decimal(lobc.format_decimal(expected, scale), scale) == expected


def test_add_many_refuses_what_a_lobc_file_cannot_hold(tmp_path):
    """The writer checks every record it is given (in C, one pass): a symbol beyond the
    metadata's, a kind that is none of KIND_NAMES, a side other than 0, B or S; the message
    names the first bad record. Every one of the 256 kinds and sides is tried."""
    sides_ok = {0, ord("B"), ord("S")}
    with lobc.LobcWriter(tmp_path / "w.lobc", venue="binance", market="spot", symbols=["A", "B"]) as w:
        for kind in range(256):
            for side in (0, ord("B"), ord("S"), 1, ord("b"), 255):
                rec = np.zeros(5, lobc.RECORD_DTYPE)
                rec["kind"], rec["side"] = lobc.TRADE, ord("B")
                rec[3]["kind"], rec[3]["side"] = kind, side
                if kind in lobc.KIND_NAMES and side in sides_ok:
                    w.add_many(rec)
                else:
                    with pytest.raises(ValueError, match=f"record 3: kind {kind} / side {side}:"):
                        w.add_many(rec)
        rec = np.zeros(4, lobc.RECORD_DTYPE)
        rec["kind"], rec["symbol"] = lobc.GAP, 1
        rec[2]["symbol"] = 2
        with pytest.raises(ValueError, match="symbol index is out of range .metadata has 2 symbols"):
            w.add_many(rec)
        n_before = w.records + w.pending
    # what was refused was not written; what was taken was, whole
    got = lobc.read(tmp_path / "w.lobc")
    assert len(got.records) == n_before == 5 * len(lobc.KIND_NAMES) * len(sides_ok) and got.whole


HEADER_FIELDS = {name: (BLOCK_OFF, lobc.BLOCK_DTYPE.fields[name][0].itemsize)  # (offset, bytes) in a block header
                 for name in lobc.BLOCK_DTYPE.names for BLOCK_OFF in [lobc.BLOCK_DTYPE.fields[name][1]]}


def _blocks_of(sizes, seed=3):
    """Records in blocks of the given sizes (a file of them, and each block's records)."""
    recs = sample_records(sum(sizes), seed)
    cuts = np.cumsum([0] + list(sizes))
    return recs, [recs[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _write_blocks(p, blocks):
    with lobc.LobcWriter(p, venue="binance", market="spot", symbols=["btcusdt", "ethusdt", "bnbusdt"],
                         flush_records=1 << 20, flush_seconds=3600) as w:
        for b in blocks:
            w.add_many(b)
            w.flush()


def _expect_repaired(blocks, lost: int, nsym: int, created: int) -> np.ndarray:
    """What repair should write when block `lost` alone is damaged: every other block's
    records, with one GAP (damaged) per symbol where it was, unless it was the last (a torn
    tail, left out)."""
    out = list(blocks[:lost])
    if lost < len(blocks) - 1:
        g = np.zeros(nsym, lobc.RECORD_DTYPE)
        g["kind"], g["flags"], g["symbol"] = lobc.GAP, lobc.GAP_DAMAGED, np.arange(nsym)
        g["recv_ns"] = int(blocks[lost - 1]["recv_ns"][-1]) if lost else created
        out.append(g)
    return np.concatenate(out + list(blocks[lost + 1:]))


def _bits_of(field: str, nbytes: int):
    """The bits flipped in a header field: every bit of the small fields; of the 32 reserved
    bytes, the lowest and highest bit of each."""
    if field == "reserved":
        return [8 * i + b for i in range(nbytes) for b in (0, 7)]
    return range(8 * nbytes)


def test_repair_recovers_every_other_block_whatever_header_field_is_damaged(tmp_path):
    """issue 26: one bit flipped in any field of any block's header (the record count above
    all: a reader that trusted it before the CRC jumped to the wrong offset and lost the
    next block) costs that block only. repair writes every other block's records byte for
    byte, with a GAP (damaged) per symbol in its place; check finds the same sound blocks
    (before the damage, and after it from the next block's offset) and the same torn tail."""
    sizes = [3, 1, 5, 2, 4, 3]                        # blocks of different sizes: a wrong count lands anywhere
    recs, blocks = _blocks_of(sizes)
    src, p, out = tmp_path / "whole.lobc", tmp_path / "x.lobc", tmp_path / "fixed.lobc"
    _write_blocks(src, blocks)
    raw = src.read_bytes()
    meta = lobc.read(src).meta
    start = list(512 + np.cumsum([0] + [64 + 64 * n for n in sizes])[:-1])
    tried = 0
    for b in range(len(sizes)):
        want = _expect_repaired(blocks, b, 3, meta["created_ns"])
        for field, (off, nbytes) in HEADER_FIELDS.items():
            for bit in _bits_of(field, nbytes):
                bad = bytearray(raw)
                bad[start[b] + off + bit // 8] ^= 1 << (bit % 8)
                p.write_bytes(bytes(bad))
                where = f"block {b}, {field} bit {bit}"
                done = lobc.repair(p, out)
                assert done is not None, where
                got = lobc.read(out)
                assert got.whole, where
                np.testing.assert_array_equal(got.records, want, err_msg=where)
                # check: the same sound blocks and records, the damage at block b, resuming at b + 1
                c = lobc.check(p)
                a = c["after_damage"]
                assert c["torn"]["offset"] == start[b] and c["blocks"] == b, where
                assert c["records"] + (a["records"] if a else 0) == len(recs) - sizes[b], where
                assert c["blocks"] + (a["blocks"] if a else 0) == len(sizes) - 1, where
                if b < len(sizes) - 1:
                    assert c["torn"]["next_block"] == a["offset"] == start[b + 1] and a["to_the_end"], where
                    assert done["damage"] == [{"offset": start[b], "bytes": start[b + 1] - start[b],
                                               "reason": c["torn"]["reason"], "corrupt": True,
                                               "next_block": start[b + 1]}] and done["torn"] is None, where
                else:  # the last block: a torn tail
                    assert a is None and not c["torn"]["corrupt"] and done["damage"] == [], where
                    assert done["torn"]["offset"] == start[b], where
                tried += 1
    assert tried == len(sizes) * (32 * 4 + 64 * 2 + 32 * 2)


def test_repair_over_its_own_source_is_one_line_not_a_traceback(tmp_path, capsys):
    """issue 26: `lobc repair F -o F --force` ended in a traceback (the library's ValueError);
    now the one-line error, exit 1, F unchanged, also through a hard link of F."""
    from lobreplay.cli.main import main
    p = tmp_path / "x.lobc"
    write(p, sample_records(12), flush_records=4)
    raw = bytearray(p.read_bytes())
    raw[512 + 64 + 5] ^= 1                                # block 0's records: something to repair
    p.write_bytes(bytes(raw))
    os.link(p, tmp_path / "y.lobc")
    for out in (p, tmp_path / "y.lobc"):
        for force in ([], ["--force"]):
            assert main(["lobc", "repair", str(p), "-o", str(out)] + force) == 1
            err = capsys.readouterr().err
            assert err.startswith(f"lobreplay: error: {out}") and err.count("\n") == 1, err
            assert "the output is an input of this command" in err
    assert p.read_bytes() == bytes(raw)
    with pytest.raises(ValueError, match="must not replace its source"):
        lobc.repair(p, tmp_path / "y.lobc")               # (the library: by the same file, not only its name)
