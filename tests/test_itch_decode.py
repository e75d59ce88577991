"""The vectorised reader and decoder against the struct.unpack reference
decoder (tests/itch_ref.py), field by field, on every real fixture and on a
synthetic day with every message type; bad input gives a clear error."""
import gzip
import shutil
import sys

import numpy as np
import pytest

from lobreplay.errors import InputError
from lobreplay.itch.decode import decode
from lobreplay.itch.reader import ItchFile
from lobreplay.itch.spec import LAYOUTS, LENGTHS
from tests.conftest import real_itch_files
from tests.itch_ref import iter_messages

PROVENANCE_COUNTS = {  # the counts by type that PROVENANCE.md gives for each fixture
    "nasdaq_20191230_first1000.itch": {"R": 993, "H": 3, "Y": 3, "S": 1},
    "nasdaq_20190130_first4096b.itch": {"R": 98, "S": 1, "H": 1, "Y": 1},
    "nasdaq_2016_first500b.itch": {"R": 7, "H": 4, "Y": 4, "S": 1},
    "nasdaq_20230822_0930.itch": {"A": 125, "U": 99, "D": 30, "F": 6, "I": 5, "E": 3, "S": 1},
    "nasdaq_20230822_0930_moldudp64.pcap": {"A": 125, "U": 99, "D": 30, "F": 6, "I": 5, "E": 3, "S": 1},
    "nasdaq_20230822_by_type.itch": {"A": 41, "F": 7, "D": 6, "H": 6, "Q": 5, "J": 5, "L": 5, "I": 5, "P": 5,
                                     "X": 5, "E": 5, "C": 5, "U": 5, "Y": 5, "S": 1},
    "bx_20230822_by_type.itch": {"F": 5, "A": 5, "P": 5, "X": 5, "D": 5, "E": 5, "C": 5, "U": 5, "Y": 5,
                                 "N": 5, "H": 5, "S": 1},
    "psx_20230822_by_type.itch": {"A": 5, "F": 5, "X": 5, "D": 5, "E": 5, "C": 5, "U": 5, "Y": 5, "H": 5,
                                  "P": 5, "S": 1},
}


def decoded_rows(path, **kw) -> list[dict]:
    """Every message as a dict, from the vectorised decoder, in file order."""
    rows = []
    for chunk in ItchFile(path, **kw).chunks():
        for t, cols in decode(chunk).items():
            for i in range(len(cols["message"])):
                row = {"type": t}
                for k, v in cols.items():
                    x = v[i]
                    row[k] = x.decode() if isinstance(x, bytes) else int(x)
                rows.append(row)
    return sorted(rows, key=lambda r: r["message"])


def reference_rows(path) -> list[dict]:
    data = path.read_bytes()
    if path.suffix == ".pcap":  # the reference reads BinaryFILE: use the .itch twin of the capture
        data = (path.parent / "nasdaq_20230822_0930.itch").read_bytes()
    return [m for _, m in iter_messages(data, allow_partial=True) if not m.get("partial")]


@pytest.mark.parametrize("path", real_itch_files(), ids=lambda p: p.name)
def test_every_field_of_every_real_message_matches_the_reference(path):
    ours = decoded_rows(path, allow_truncated=True)
    ref = reference_rows(path)
    assert len(ours) == len(ref) > 0
    for i, (a, b) in enumerate(zip(ours, ref)):
        assert a.pop("message") == i
        assert a == b, f"message {i}"
    counts = {}
    for r in ref:
        counts[r["type"]] = counts.get(r["type"], 0) + 1
    assert counts == PROVENANCE_COUNTS[path.name]


def test_every_type_on_a_synthetic_day(synthetic_day, tmp_path):
    """The synthetic day holds most types; the writer adds the ones no real file has."""
    from lobreplay.itch.writer import ItchWriter
    path = tmp_path / "all.itch"
    rare = [
        {"type": "V", "stock_locate": 0, "tracking": 0, "timestamp": 1, "level1": 10**12, "level2": 2,
         "level3": 3},
        {"type": "W", "stock_locate": 0, "tracking": 0, "timestamp": 2, "breached_level": "1"},
        {"type": "K", "stock_locate": 0, "tracking": 0, "timestamp": 3, "stock": "ZZZ", "release_time": 34200,
         "release_qualifier": "A", "ipo_price": 250000},
        {"type": "h", "stock_locate": 7, "tracking": 0, "timestamp": 4, "stock": "ZZZ", "market_code": "Q",
         "halt_action": "H"},
        {"type": "B", "stock_locate": 7, "tracking": 0, "timestamp": 5, "match_number": 99},
        {"type": "O", "stock_locate": 7, "tracking": 0, "timestamp": 6, "stock": "ZZZ",
         "open_eligibility_status": "Y", "min_allowable_price": 1, "max_allowable_price": 2,
         "near_execution_price": 3, "near_execution_time": 4, "lower_price_range_collar": 5,
         "upper_price_range_collar": 6},
        {"type": "N", "stock_locate": 7, "tracking": 0, "timestamp": 7, "stock": "ZZZ", "interest_flag": "A"},
    ]
    with ItchWriter(path) as w:
        w.write_raw(open(synthetic_day.path, "rb").read()[2:14])  # the day's first message (S 'O')
        for m in rare:
            w.write(m)
    with open(path, "ab") as f:
        f.write(open(synthetic_day.path, "rb").read()[14:])
    ours, ref = decoded_rows(path), reference_rows(path)
    assert [r.pop("message") for r in ours] == list(range(len(ref)))
    assert ours == ref
    assert {r["type"] for r in ref} >= set(LAYOUTS) - {"L"} - {"J"} | {"V", "W", "K", "h", "B", "O", "N"}


def test_positions_of_several_types_in_one_pass(synthetic_day):
    """decode.positions_of (one pass over a chunk's types for several types) against one
    comparison per type, on chunks holding some of the types and not others."""
    from lobreplay.itch.decode import positions_of
    seen = set()
    for c in ItchFile(synthetic_day.path, chunk_bytes=1 << 16).chunks():
        for types in ("SHYLVWKJhINOB", "AFDXUE", "A", "Z", "PQI"):
            got = positions_of(c, types)
            want = {t: np.flatnonzero(c.types == ord(t)) for t in types if (c.types == ord(t)).any()}
            assert got.keys() == want.keys() and all((got[t] == want[t]).all() for t in want)
            seen |= {(types, len(got))}
    assert {n for _, n in seen} >= {0, 1} and max(n for _, n in seen) >= 3


def test_gzip_and_raw_read_the_same(synthetic_day, tmp_path):
    gz = tmp_path / "day.itch.gz"
    with open(synthetic_day.path, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    a = [(c.n, c.types.tobytes()) for c in ItchFile(synthetic_day.path, chunk_bytes=1 << 17).chunks()]
    b = [(c.n, c.types.tobytes()) for c in ItchFile(gz, chunk_bytes=1 << 17).chunks()]
    assert sum(n for n, _ in a) == sum(n for n, _ in b) == synthetic_day.n_messages
    assert b"".join(t for _, t in a) == b"".join(t for _, t in b)


def test_file_sha256_is_the_files(synthetic_day, tmp_path):
    """The provenance hash (one reused buffer, on its own reads): the file's bytes, raw or
    gzip (the compressed bytes), and None when stopped."""
    import hashlib
    import threading

    from lobreplay.reports.tables import file_sha256
    gz = tmp_path / "day.itch.gz"
    with open(synthetic_day.path, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    for path in (synthetic_day.path, str(gz)):
        assert file_sha256(path) == hashlib.sha256(open(path, "rb").read()).hexdigest()
    stop = threading.Event()
    stop.set()
    assert file_sha256(synthetic_day.path, stop) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is Linux's")
def test_file_sha256_in_the_background_runs_its_thread_at_low_priority(synthetic_day, monkeypatch):
    """Beside a replay without reports the hash takes the CPU the replay leaves: its thread
    (only) at nice 19; a hash a report writer waits for keeps its priority."""
    import os
    import threading

    from lobreplay.reports import tables as reports
    seen = []
    real = reports.hashlib.sha256

    def spy():
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real()

    before = os.getpriority(os.PRIO_PROCESS, 0)
    monkeypatch.setattr(reports.hashlib, "sha256", spy)
    for background in (True, False):
        t = threading.Thread(target=reports.file_sha256, args=(synthetic_day.path,), kwargs={"background": background})
        t.start()
        t.join()
    assert seen == [19, before]
    assert os.getpriority(os.PRIO_PROCESS, 0) == before  # the process (main thread) untouched


@pytest.mark.parametrize("chunk_bytes", [1 << 17, 1 << 18 + 3, 1 << 22])
def test_chunk_boundaries_do_not_matter(synthetic_day, chunk_bytes):
    f = ItchFile(synthetic_day.path, chunk_bytes=chunk_bytes)
    types = b"".join(c.types.tobytes() for c in f.chunks())
    assert len(types) == synthetic_day.n_messages
    assert f.stats.by_type == {t: c for t, c in synthetic_day.counts.items()}


# ---- bad input: a message naming the file and the offset, never a traceback ----

def _expect(path, *parts):
    with pytest.raises(InputError) as info:
        for _ in ItchFile(path).chunks():
            pass
    msg = str(info.value)
    assert str(path) in msg
    for p in parts:
        assert p in msg, msg
    return msg


def test_empty_file(tmp_path):
    p = tmp_path / "empty.itch"
    p.write_bytes(b"")
    with pytest.raises(InputError, match="empty file"):
        ItchFile(p)


def test_truncated_message_names_the_offset(tmp_path):
    src = (real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes()
    p = tmp_path / "cut.itch"
    p.write_bytes(src[:5000])
    msg = _expect(p, "truncated", "needs")
    assert "byte 4," in msg or "byte 49" in msg  # the offset of the partial message
    f = ItchFile(p, allow_truncated=True)
    n = sum(c.n for c in f.chunks())
    assert n > 0 and f.stats.truncated_offset is not None and f.stats.truncated_bytes > 0
    assert f.stats.truncated_offset + f.stats.truncated_bytes == 5000


def test_corrupt_length(tmp_path):
    src = bytearray((real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes())
    # the third frame: make its length disagree with its type
    off = 0
    for _ in range(2):
        off += 2 + int.from_bytes(src[off:off + 2], "big")
    src[off + 1] += 1
    p = tmp_path / "corrupt.itch"
    p.write_bytes(bytes(src))
    _expect(p, "corrupt frame", f"byte {off}", "ITCH 5.0 says")


@pytest.mark.parametrize("gz", [False, True])
def test_bytes_after_an_end_of_session_marker_are_damage(tmp_path, gz):
    """A run of zeros after the messages (an interrupted download into a preallocated file)
    starts with 00 00, an end-of-session marker: what follows it is an error naming the
    marker's offset and counting the bytes after it (the replay once said "ok" with half the
    day); allow_truncated stops at the marker and counts them. A marker at the very end is the
    normal end of a session. A gzip stream is read on past the marker, so its checksum is
    checked: damage inside it is an error, not an early end of the day."""
    src = (real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes()
    body = src + b"\x00" * 5000
    p = tmp_path / ("zeros.itch.gz" if gz else "zeros.itch")
    p.write_bytes(gzip.compress(body) if gz else body)
    where = "decompressed stream offset" if gz else "byte"
    _expect(p, f"an end-of-session marker (a zero-length frame) at {where} {len(src):,}",
            "followed by 4,998 more bytes", "--allow-truncated")
    f = ItchFile(p, allow_truncated=True)
    n = sum(c.n for c in f.chunks())
    whole = ItchFile(real_itch_files()[0].parent / "nasdaq_20230822_0930.itch")
    assert n == sum(c.n for c in whole.chunks()) and f.stats.end_marker and f.stats.trailing_after_end == 4998
    (tmp_path / "end.itch").write_bytes(src + b"\x00\x00")  # the spec's own end
    f = ItchFile(tmp_path / "end.itch")
    assert sum(c.n for c in f.chunks()) == n and f.stats.end_marker and f.stats.trailing_after_end == 0
    if gz:  # damage after a zero-length frame inside a gzip stream: its checksum says so
        good = gzip.compress(src + b"\x00\x00" + src)
        bad = good[:len(good) * 3 // 4] + bytes(b ^ 0x55 for b in good[len(good) * 3 // 4:][:40]) \
            + good[len(good) * 3 // 4 + 40:]
        (tmp_path / "crc.itch.gz").write_bytes(bad)
        with pytest.raises(InputError, match="corrupt gzip data|followed by"):
            for _ in ItchFile(tmp_path / "crc.itch.gz", allow_truncated=True).chunks():
                pass


def test_an_unknown_type_shorter_than_the_header_is_a_corrupt_frame(tmp_path):
    """Unknown types are skipped by their length, but every ITCH 5.0 message starts with an
    11-byte header: a shorter frame of an unknown type is damage, not a message."""
    src = (real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes()
    (tmp_path / "ok.itch").write_bytes(src + b"\x00\x0bz" + bytes(10))
    f = ItchFile(tmp_path / "ok.itch")
    for _ in f.chunks():
        pass
    assert f.stats.unknown_types() == {"z": 1}
    (tmp_path / "short.itch").write_bytes(src + b"\x00\x01z")
    _expect(tmp_path / "short.itch", f"corrupt frame at byte {len(src):,}", "type 'z' has length 1",
            "less than the 11-byte header")


def test_bytes_after_a_gzip_stream(tmp_path):
    """A whole gzip stream with something appended that is not gzip: an error naming the file;
    allow_truncated reads every message of the stream and reports the break."""
    src = (real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes()
    p = tmp_path / "appended.itch.gz"
    p.write_bytes(gzip.compress(src) + b"garbage appended")
    _expect(p, "corrupt gzip data", "Not a gzipped file")
    f = ItchFile(p, allow_truncated=True)
    assert sum(c.n for c in f.chunks()) == 269 and f.stats.stream_break.startswith("corrupt")


def test_bad_gzip(tmp_path):
    good = gzip.compress((real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes())
    p = tmp_path / "bad.itch.gz"
    p.write_bytes(good[:len(good) // 2] + b"\x00" * 50 + good[len(good) // 2 + 50:])
    _expect(p, "corrupt gzip data")


def _pcap_records(raw: bytes) -> list[bytes]:
    recs, p = [], 24
    while p < len(raw):
        n = int.from_bytes(raw[p + 8:p + 12], "little")
        recs.append(raw[p:p + 16 + n])
        p += 16 + n
    return recs


def _mold_at(rec: bytes) -> int:
    """The MoldUDP64 header's offset in a pcap record (Ethernet, 802.1Q tags, IPv4, UDP)."""
    q = 16 + 12
    while int.from_bytes(rec[q:q + 2], "big") in (0x8100, 0x88A8):
        q += 4
    return q + 2 + (rec[q + 2] & 0x0F) * 4 + 8


def test_pcap_repeated_packets_snap_cuts_and_offsets(tmp_path):
    """A retransmitted packet is dropped and counted (its messages were replayed twice and it
    showed as a sequence gap going back); a packet the capture cut at its snap length is an
    error naming its byte (its last message was joined to the next packet's); a corrupt frame
    is named at its byte in the capture, not in the joined messages; every packet, heartbeat
    and other frame is counted."""
    raw = (real_itch_files()[0].parent / "nasdaq_20230822_0930_moldudp64.pcap").read_bytes()
    head, recs = raw[:24], _pcap_records(raw)
    whole = ItchFile(real_itch_files()[0].parent / "nasdaq_20230822_0930_moldudp64.pcap")
    want = b"".join(c.types.tobytes() for c in whole.chunks())
    (tmp_path / "dup.pcap").write_bytes(head + b"".join(recs[:11] + [recs[10], recs[9]] + recs[11:]))
    f = ItchFile(tmp_path / "dup.pcap")
    assert b"".join(c.types.tobytes() for c in f.chunks()) == want
    assert f.stats.mold_duplicates == 2 and f.stats.mold_gaps == [] and f.stats.mold_packets == len(recs) + 2
    assert f.stats.mold_sessions == whole.stats.mold_sessions and len(whole.stats.mold_sessions) == 1
    i = next(k for k, r in enumerate(recs) if int.from_bytes(r[_mold_at(r) + 18:_mold_at(r) + 20], "big") >= 3)
    pkt = 24 + sum(len(r) for r in recs[:i])
    cut = bytearray(recs[i][:-10])
    cut[8:12] = (len(cut) - 16).to_bytes(4, "little")  # incl_len 10 short of orig_len: the snap length
    (tmp_path / "snap.pcap").write_bytes(head + b"".join(recs[:i] + [bytes(cut)] + recs[i + 1:]))
    _expect(tmp_path / "snap.pcap", f"MoldUDP64 packet at byte {pkt:,}", "ends inside message 3",
            f"the capture kept {len(cut) - 16} of its {len(recs[i]) - 16} bytes")
    bad = bytearray(recs[i])
    m = _mold_at(recs[i]) + 20  # its first message block
    bad[m + 2] = ord("A")  # an Add Order type on a message of another length
    (tmp_path / "frame.pcap").write_bytes(head + b"".join(recs[:i] + [bytes(bad)] + recs[i + 1:]))
    _expect(tmp_path / "frame.pcap", f"corrupt frame at byte {pkt + m:,} of the capture", "type 'A'")


def _pcap_with(tmp_path, name, edit) -> tuple:
    """The real capture with edit(records) applied to its pcap records: (path, records
    before the edit, each record's byte, the whole capture's message types in order)."""
    src = real_itch_files()[0].parent / "nasdaq_20230822_0930_moldudp64.pcap"
    raw = src.read_bytes()
    recs = _pcap_records(raw)
    at = [24 + sum(len(r) for r in recs[:i]) for i in range(len(recs))]
    p = tmp_path / name
    p.write_bytes(raw[:24] + b"".join(edit([bytearray(r) for r in recs])))
    return p, recs, at, b"".join(c.types.tobytes() for c in ItchFile(src).chunks())


def _seq_of(rec) -> tuple[int, int]:
    m = _mold_at(rec)
    return int.from_bytes(rec[m + 10:m + 18], "big"), int.from_bytes(rec[m + 18:m + 20], "big")


def _types(f: ItchFile) -> bytes:
    return b"".join(c.types.tobytes() for c in f.chunks())


def _flip_seq(rec, byte: int = 6, bit: int = 0xFF):
    rec[_mold_at(rec) + 10 + byte] ^= bit
    return rec


def test_pcap_a_damaged_sequence_number_costs_only_its_packet(tmp_path):
    """Byte 496 of the capture (in packet 3's sequence number) flipped: packet 3 is dropped
    and counted as damaged, every other message is read (it made 96 of 100 packets
    "repeated" and 5 of 269 messages were read); the loss is under MAX_LOSS_SHARE: no error."""
    def edit(recs):
        recs[3][496 - 418] ^= 0xFF
        return recs
    p, recs, at, whole = _pcap_with(tmp_path, "flip496.pcap", edit)
    assert at[3] == 418 and 418 + _mold_at(recs[3]) + 10 <= 496 < 418 + _mold_at(recs[3]) + 18
    f = ItchFile(p)
    got = _types(f)
    n3 = _seq_of(recs[3])[1]
    before = sum(_seq_of(r)[1] for r in recs[:3])
    assert got == whole[:before] + whole[before + n3:] and len(got) == 269 - n3
    st = f.stats
    assert (st.mold_damaged, st.mold_damaged_messages, st.mold_gaps, st.mold_duplicates) == (1, n3, [], 0)
    assert st.mold_first["damaged"]["byte"] == 418
    assert st.mold_first["damaged"]["expected"] == _seq_of(recs[3])[0]


def test_pcap_damage_gaps_and_jumps_are_told_and_too_much_loss_fails(tmp_path, capsys):
    """Damaged sequence numbers losing more than 1 % of the messages: a one-line error naming
    the file and the first bad packet, unless --allow-gaps (then a note on stderr for each
    kind, and the counts in summary.json)."""
    from lobreplay.cli.main import main
    from lobreplay.itch.reader import MAX_LOSS_SHARE

    def edit(recs):
        for i in (3, 20, 40, 60):
            _flip_seq(recs[i], 5, 0x40)
        return recs
    p, recs, at, whole = _pcap_with(tmp_path, "flips.pcap", edit)
    lost = sum(_seq_of(recs[i])[1] for i in (3, 20, 40, 60))
    assert lost > MAX_LOSS_SHARE * 269
    msg = _expect(p, f"{lost} of 269 messages lost", "packet at byte 418 of the capture", "--allow-gaps")
    assert "\n" not in msg
    assert len(_types(ItchFile(p, allow_gaps=True))) == 269 - lost
    out = tmp_path / "rep"
    assert main(["itch", "replay", str(p), "-o", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and str(p) in err and "Traceback" not in err
    assert main(["itch", "replay", str(p), "-o", str(out), "--no-progress", "--force", "--allow-gaps"]) == 0
    err = capsys.readouterr().err
    assert "4 packet(s) with a damaged sequence number dropped" in err and "byte 418" in err
    import json
    m = json.loads((out / "summary.json").read_text())["moldudp64"]
    assert (m["damaged_dropped"], m["damaged_messages"], m["messages_lost"], m["gaps"]) == (4, lost, lost, [])
    assert main(["itch", "decode", str(p), "-o", str(tmp_path / "dec")]) == 1
    assert "--allow-gaps" in capsys.readouterr().err


def test_pcap_gaps_repeats_and_jumps_back_are_reported(tmp_path, capsys):
    """Packets the capture missed (a gap the next packets agree with), a retransmission and a
    damaged first packet are each counted and noted on stderr with the first packet's byte;
    a gap is messages missing; a far jump forward that the following packets agree with is a
    gap too (and fails: almost every message missing)."""
    from lobreplay.cli.main import main

    def edit(recs):
        return recs[:10] + recs[12:30] + [recs[29]] + recs[30:]
    p, recs, at, whole = _pcap_with(tmp_path, "gap.pcap", edit)
    f = ItchFile(p)
    missing = _seq_of(recs[10])[1] + _seq_of(recs[11])[1]
    assert len(_types(f)) == 269 - missing
    assert f.stats.mold_gaps == [(_seq_of(recs[10])[0], _seq_of(recs[12])[0])]
    assert (f.stats.mold_missing, f.stats.mold_duplicates, f.stats.mold_damaged) == (missing, 1, 0)
    assert main(["itch", "replay", str(p), "-o", str(tmp_path / "r"), "--no-progress", "--allow-gaps"]) == 0
    err = capsys.readouterr().err
    assert f"1 sequence gap(s), {missing:,} messages missing; the first packet at byte {at[10]:,}" in err
    assert "1 repeated packet(s) dropped" in err

    def first_damaged(recs):
        _flip_seq(recs[0], 4, 0x10)
        return recs
    p, recs, at, whole = _pcap_with(tmp_path, "first.pcap", first_damaged)
    f = ItchFile(p)
    assert _types(f) == whole and f.stats.mold_back == 1 and f.stats.mold_lost() == 0

    def far(recs):  # every packet from 50 on a billion further on: a real jump, not damage
        for r in recs[50:]:
            m = _mold_at(r) + 10
            r[m:m + 8] = (_seq_of(r)[0] + 10 ** 9).to_bytes(8, "big")
        return recs
    p, recs, at, whole = _pcap_with(tmp_path, "far.pcap", far)
    _expect(p, f"packet at byte {at[50]:,} of the capture", f"expected {_seq_of(recs[50])[0]}")
    f = ItchFile(p, allow_gaps=True)
    assert _types(f) == whole and f.stats.mold_missing == 10 ** 9


@pytest.mark.parametrize("cut", [9001, 8919 + 10])   # inside a packet's data, inside its record header
def test_a_pcap_cut_short(tmp_path, cut):
    """A capture cut short: an error naming the byte of the cut packet; with allow_truncated
    every whole packet before it is read (the same messages as the capture cut at that packet)
    and the cut counted (it was an error either way)."""
    raw = (real_itch_files()[0].parent / "nasdaq_20230822_0930_moldudp64.pcap").read_bytes()
    (tmp_path / "cut.pcap").write_bytes(raw[:cut])
    (tmp_path / "whole.pcap").write_bytes(raw[:8919])   # 8919: where the cut packet starts
    _expect(tmp_path / "cut.pcap", "truncated pcap record", "at byte 8,919", "--allow-truncated")
    a = ItchFile(tmp_path / "cut.pcap", allow_truncated=True)
    b = ItchFile(tmp_path / "whole.pcap")
    def walk(f):
        return [(c.types.tobytes(), c.offsets.tobytes(), bytes(c.buf[:int(c.offsets[-1]) + 1])) for c in f.chunks()]

    ta, tb = walk(a), walk(b)
    assert ta == tb and len(ta[0][0]) > 10
    assert (a.stats.truncated_offset, a.stats.truncated_bytes) == (8919, cut - 8919)
    assert b.stats.truncated_offset is None and a.stats.messages == b.stats.messages


def test_gzip_cut_short_reads_every_message_before_the_cut(synthetic_day, tmp_path):
    """An interrupted download: the gzip stream ends without its trailer. An error that says
    so; with allow_truncated, every message decodable before the cut is read (the same as the
    decompressed prefix read as a raw file), the partial one counted, and the break noted."""
    import zlib
    whole = gzip.compress(open(synthetic_day.path, "rb").read())
    cut = tmp_path / "cut.itch.gz"
    cut.write_bytes(whole[:len(whole) * 2 // 3])
    _expect(cut, "ends before its end-of-stream marker", "--allow-truncated")
    prefix = zlib.decompressobj(31).decompress(whole[:len(whole) * 2 // 3])  # all that is decodable
    raw = tmp_path / "prefix.itch"
    raw.write_bytes(prefix)
    a, b = ItchFile(cut, chunk_bytes=1 << 17, allow_truncated=True), ItchFile(raw, chunk_bytes=1 << 17,
                                                                              allow_truncated=True)
    ta = b"".join(c.types.tobytes() for c in a.chunks())
    tb = b"".join(c.types.tobytes() for c in b.chunks())
    assert ta == tb and len(ta) > synthetic_day.n_messages // 2
    assert (a.stats.truncated_offset, a.stats.truncated_bytes) == (b.stats.truncated_offset, b.stats.truncated_bytes)
    assert a.stats.truncated_offset + a.stats.truncated_bytes == len(prefix)
    assert "cut short" in a.stats.stream_break and b.stats.stream_break is None


def test_not_itch(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello, this is not a market data file\n")
    _expect(p, "not an ITCH 5.0 file", "found 68 65 6c")


def test_unknown_type_is_skipped_by_length_and_counted(tmp_path):
    src = (real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes()
    p = tmp_path / "unknown.itch"
    first = 2 + int.from_bytes(src[:2], "big")  # after the first frame
    p.write_bytes(src[:first] + b"\x00\x0bZabcdefghij" + src[first:])  # (11 bytes: the common header's size)
    f = ItchFile(p)
    n = sum(c.n for c in f.chunks())
    assert n == 270 and f.stats.unknown_types() == {"Z": 1}
    assert LENGTHS.get("Z") is None


def test_end_of_session_marker_stops_reading(tmp_path):
    src = (real_itch_files()[0].parent / "nasdaq_20230822_0930.itch").read_bytes()
    p = tmp_path / "ended.itch"
    p.write_bytes(src + b"\x00\x00" + b"junk after the end")
    _expect(p, "followed by 18 more bytes")  # (it was read as the end: see the test above)
    f = ItchFile(p, allow_truncated=True)
    assert sum(c.n for c in f.chunks()) == 269
    assert f.stats.end_marker and f.stats.trailing_after_end == 18


def test_decoded_columns_are_typed():
    path = real_itch_files()[0].parent / "nasdaq_20230822_by_type.itch"
    cols = {}
    for chunk in ItchFile(path).chunks():
        cols = decode(chunk)
    a = cols["A"]
    assert a["price"].dtype == np.int64 and a["shares"].dtype == np.uint32
    assert a["order_ref"].dtype == np.uint64 and a["timestamp"].dtype == np.int64
    assert a["stock_locate"].dtype == np.uint16 and a["side"].dtype == np.dtype("S1")
    assert set(a["side"].tolist()) <= {b"B", b"S"}
    assert cols["Q"]["shares"].dtype == np.uint64  # 8-byte shares in Q


def test_chunk_type_presence_from_the_framing_counts(synthetic_day):
    from lobreplay.itch.reader import Chunk
    for chunk in ItchFile(synthetic_day.path, chunk_bytes=1 << 17).chunks():
        want = {chr(t) for t in np.unique(chunk.types)}
        bare = Chunk(chunk.buf, chunk.offsets, chunk.types, chunk.base, chunk.first_message)  # no counts
        assert chunk.type_counts is not None and chunk.present() == bare.present() == want
        for t in "SRAFDEXCUPQHI":
            assert chunk.has(t) == bare.has(t) == (t in want)


# ---- read_ahead: the reader one chunk ahead on a thread ----

def _messages(chunk) -> list[bytes]:
    """The chunk's messages, copied out of its buffer."""
    ends = np.append(chunk.offsets[1:] - 2, 0)
    return [bytes(chunk.buf[o:o + int(LENGTHS[chr(t)])]) for o, t, _ in zip(chunk.offsets, chunk.types, ends)]


@pytest.mark.parametrize("slots, thread", [(1, True), (2, True), (3, True), (2, False)])
def test_read_ahead_gives_the_chunks_in_order_and_keeps_them_valid(synthetic_day, slots, thread):
    """The same chunks as chunks(), and each one's bytes, framing and work result still
    whole until the next is asked for, with the reader let run ahead meanwhile (the
    contract the replay relies on)."""
    import time

    from lobreplay._ahead import read_ahead
    plain = [_messages(c) for c in ItchFile(synthetic_day.path, chunk_bytes=1 << 17).chunks()]
    assert len(plain) > 4  # several chunks, so that buffers turn over
    f = ItchFile(synthetic_day.path, chunk_bytes=1 << 17)
    seen, slots_seen = [], []

    def work(chunk, slot):
        slots_seen.append(slot)
        return chunk.first_message, chunk.types.copy()

    for chunk, (first, types) in read_ahead(f, work, slots=slots, thread=thread):
        time.sleep(0.005)  # the reader reads ahead as far as it may
        assert chunk.first_message == first and np.array_equal(chunk.types, types)
        seen.append(_messages(chunk))
    assert seen == plain
    assert slots_seen == [i % slots for i in range(len(plain))]
    assert f.stats.messages == synthetic_day.n_messages


def test_short_reads_keep_the_chunks_in_flight_valid(synthetic_day):
    """A stream that returns a few bytes at times (a reader's short read) can leave the buffer
    without one whole frame: nothing is handed out, and the reader must go on filling that
    buffer, not the next one, which the caller may still hold (read_ahead, two buffers)."""
    import time

    from lobreplay._ahead import read_ahead

    class Choppy:  # every other read returns 3 bytes: less than a frame after the carried part
        def __init__(self, f):
            self.f, self.k = f, 0

        def readinto(self, view):
            self.k += 1
            return self.f.readinto(memoryview(view)[:3 if self.k % 2 == 0 else 1 << 14])

        def close(self):
            self.f.close()

    plain = [m for c in ItchFile(synthetic_day.path, chunk_bytes=1 << 17).chunks() for m in _messages(c)]
    f = ItchFile(synthetic_day.path, chunk_bytes=1 << 17)
    opened = f._open
    f._open = lambda skip=0: Choppy(opened(skip))
    seen, n_chunks = [], 0
    for chunk, (first, read) in read_ahead(f, lambda c, slot: (c.first_message, _messages(c)), slots=2, thread=True):
        time.sleep(0.0005)  # the reader reads ahead as far as it may
        assert chunk.first_message == first and _messages(chunk) == read  # (as when it was read)
        seen += read
        n_chunks += 1
    assert seen == plain and n_chunks > 100


def test_read_ahead_raises_a_readers_error_after_the_chunks_before_it(synthetic_day, tmp_path):
    from lobreplay._ahead import read_ahead
    p = tmp_path / "cut.itch"
    p.write_bytes(open(synthetic_day.path, "rb").read()[:1_000_003])
    whole = sum(c.n for c in ItchFile(p, chunk_bytes=1 << 17, allow_truncated=True).chunks())
    got = 0
    with pytest.raises(InputError, match="truncated"):
        for chunk, _ in read_ahead(ItchFile(p, chunk_bytes=1 << 17)):
            got += chunk.n
    assert got == whole > 0


def test_read_ahead_stops_its_thread_when_the_caller_stops(synthetic_day):
    """A caller that stops early (an error of its own, a break) leaves no reader behind."""
    import threading

    from lobreplay._ahead import read_ahead
    before = set(threading.enumerate())
    it = read_ahead(ItchFile(synthetic_day.path, chunk_bytes=1 << 17), lambda c, s: c.n)
    next(it)
    assert any(t.name == "lobreplay-read" for t in threading.enumerate())
    it.close()
    assert set(threading.enumerate()) == before
    with pytest.raises(ZeroDivisionError):
        for _ in read_ahead(ItchFile(synthetic_day.path, chunk_bytes=1 << 17), lambda c, s: 1 // (c.first_message > 0)):
            pass
    assert set(threading.enumerate()) == before


def _price_meta(path) -> tuple:
    import pyarrow.parquet as pq
    s = pq.read_schema(path)
    return (s.metadata.get(b"price_scale"), s.metadata.get(b"price_columns"),
            {f.name: f.metadata[b"price_scale"] for f in s if f.metadata and b"price_scale" in f.metadata})


def test_decode_metadata_says_each_tables_own_price_scale(synthetic_day, tmp_path):
    """Every decoded table's metadata names its own price columns and their scale: V's levels
    are Price(8) (10^8 a dollar), the others' Price(4); a table without prices has no
    price_scale (it said 10000 on every table, V's included)."""
    from lobreplay.cli.main import main
    from lobreplay.itch.spec import PRICE4_SCALE, PRICE8_SCALE
    out = tmp_path / "dec"
    assert main(["itch", "decode", synthetic_day.path, "-o", str(out)]) == 0
    p8, p4 = str(PRICE8_SCALE).encode(), str(PRICE4_SCALE).encode()
    assert _price_meta(out / "V_mwcb_decline_level.parquet") == (
        p8, b"level1,level2,level3", {"level1": p8, "level2": p8, "level3": p8})
    assert _price_meta(out / "A_add_order.parquet") == (p4, b"price", {"price": p4})
    assert _price_meta(out / "I_noii.parquet")[0] == p4 and len(_price_meta(out / "I_noii.parquet")[2]) == 3
    assert _price_meta(out / "S_system_event.parquet") == (None, b"", {})
    for t, lay in LAYOUTS.items():  # every table written: its price columns, as the spec gives them
        f = out / f"{t}_{lay.name}.parquet"
        if f.exists():
            want = {n: str({"p4": PRICE4_SCALE, "p8": PRICE8_SCALE}[k]).encode() for n, k in lay.fields
                    if k in ("p4", "p8")}
            assert _price_meta(f)[2] == want, t
