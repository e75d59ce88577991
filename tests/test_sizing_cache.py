"""The sizing cache (lobreplay.replay.cache): a replay of a file replayed before takes pass 1
from the entry the first one left, and its reports are the same as a replay that scans;
a changed file is scanned again; a file rewritten in place behind the cache's back fails
the replay (the SHA-256 check) instead of passing with books sized for another file; a
cache that cannot be read or written never stops a replay."""
import json
import os
import shutil
import time

import numpy as np
import pytest

from lobreplay.replay import cache
from lobreplay.cli.main import main
from lobreplay.errors import InputError
from lobreplay.testing.itch_faults import inject
from lobreplay.itch.parallel import replay_itch_jobs
from lobreplay.itch.reader import ItchFile
from lobreplay.itch.replay import ReplayConfig, replay_itch
from tests.test_itch_parallel import _same_tables

# what a replay reports that a pass 1 from the cache must not change
SAME = ("messages", "messages_by_type", "books", "book_levels", "book_capacity", "events", "executions_in_feed",
        "desyncs", "desyncs_by_cause", "residual_orders", "system_events", "session_complete", "symbols_in_file",
        "text_bytes_outside_ascii", "report_rows", "source")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("LOBREPLAY_CACHE_DIR", str(d))
    return d


@pytest.fixture
def day(synthetic_day, tmp_path):
    """A day with desyncs and residual orders, and a byte outside ASCII in a stock name
    (counted by pass 1: the cached pass 1 brings its count along)."""
    path = tmp_path / "20191230.cache.itch"
    inject("drop_final_delete", synthetic_day, path, seed=3)
    raw = bytearray(path.read_bytes())
    pos = 0
    while chr(raw[pos + 2]) != "R":
        pos += 2 + int.from_bytes(raw[pos:pos + 2], "big")
    raw[pos + 2 + 11] = 0xDE  # the first R's stock field (read by pass 1 for the directory)
    path.write_bytes(bytes(raw))
    return path


def _replay(path, out, **kw):
    kw.setdefault("timing", False)
    return replay_itch(str(path), str(out), ReplayConfig(**kw), force=True)


def _tables(d):
    return sorted(p.name for p in d.glob("*.parquet"))


def test_a_second_replay_takes_pass1_from_the_cache_with_the_same_reports(day, tmp_path, cache_dir):
    first = _replay(day, tmp_path / "a")
    assert first["pass1"]["cached"] is False and len(cache.entries()) == 1
    second = _replay(day, tmp_path / "b")
    p1 = second["pass1"]
    assert p1["cached"] is True and p1["scan_seconds"] == first["pass1"]["seconds"]
    assert p1["cache_entry"] == cache.entries()[0]
    for key in SAME:
        assert second[key] == first[key], key
    assert first["desyncs"] > 0 and first["residual_orders"] > 0 and first["text_bytes_outside_ascii"] >= 1
    names = _tables(tmp_path / "a")
    assert "desyncs.parquet" in names and names == _tables(tmp_path / "b")
    _same_tables(tmp_path / "a", tmp_path / "b", names)
    assert second["notes"] == first["notes"] == []


def test_the_entry_serves_other_symbols_and_headroom(day, tmp_path, cache_dir):
    """The entry is the file's, not the options': a replay with other options from it
    equals one with the same options that scans."""
    _replay(day, tmp_path / "fill")
    syms = ItchReplaySymbols(day)
    for kw in ({"symbols": syms[1:4]}, {"headroom": 0.05}, {"reports": ("bbo", "symbols")}):
        cached = _replay(day, tmp_path / "c", **kw)
        scanned = _replay(day, tmp_path / "s", cache=False, **kw)
        assert cached["pass1"]["cached"] and not scanned["pass1"]["cached"], kw
        for key in SAME:
            assert cached[key] == scanned[key], (kw, key)
        _same_tables(tmp_path / "s", tmp_path / "c", _tables(tmp_path / "s"))


def ItchReplaySymbols(path) -> list[str]:
    """The stocks of a day's R messages, in file order."""
    from lobreplay.itch.decode import decode_type
    out = []
    for chunk in ItchFile(str(path)).chunks():
        if "R" in chunk.present():
            out += [s.decode().strip() for s in decode_type(chunk, "R")["stock"]]
    return out


def test_no_cache_neither_reads_nor_writes(day, tmp_path, cache_dir):
    assert not _replay(day, tmp_path / "a", cache=False)["pass1"]["cached"]
    assert cache.entries() == []
    _replay(day, tmp_path / "a")
    assert not _replay(day, tmp_path / "a", cache=False)["pass1"]["cached"]
    assert _replay(day, tmp_path / "a")["pass1"]["cached"]


def test_off_by_environment(monkeypatch, tmp_path):
    for off in ("off", "", "0", "None"):
        monkeypatch.setenv("LOBREPLAY_CACHE_DIR", off)
        assert cache.cache_dir() is None
    monkeypatch.delenv("LOBREPLAY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == os.path.join(str(tmp_path), "lobreplay")


def _touch_like(path, before: os.stat_result) -> None:
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_changed_file_is_scanned_again(day, tmp_path, cache_dir):
    _replay(day, tmp_path / "a")
    st = os.stat(day)
    os.utime(day, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))  # touched: the same bytes, a new time
    assert not _replay(day, tmp_path / "a")["pass1"]["cached"]
    assert _replay(day, tmp_path / "a")["pass1"]["cached"]
    data = day.read_bytes()
    shorter = tmp_path / "20191230.copy.itch"
    shutil.copy2(day, shorter)  # the same bytes and time at another path
    assert not _replay(shorter, tmp_path / "b")["pass1"]["cached"]
    st = os.stat(day)
    with open(day, "r+b") as f:  # the first bytes changed, size and time kept
        f.seek(5)
        f.write(bytes([data[5] ^ 1]))
    _touch_like(day, st)
    assert not _replay(day, tmp_path / "a")["pass1"]["cached"]
    assert len(cache.entries()) == 4


def test_a_file_rewritten_behind_the_cache_fails_the_replay(day, tmp_path, cache_dir):
    """Size, time, inode and both ends kept, a timestamp in the middle changed: the entry is
    found, and the SHA-256 at the end tells the replay it was another file."""
    _replay(day, tmp_path / "a")
    f = ItchFile(str(day))
    mid = None
    for chunk in f.chunks():
        mid = chunk.base + int(chunk.offsets[chunk.n // 2])
        break
    size = os.path.getsize(day)
    assert cache.ENDS < mid < size - cache.ENDS, "the day is too small to change a byte outside both ends"
    st = os.stat(day)
    with open(day, "r+b") as fh:
        fh.seek(mid + 2 + 7)  # inside the message's timestamp
        b = fh.read(1)
        fh.seek(mid + 2 + 7)
        fh.write(bytes([b[0] ^ 0x40]))
    _touch_like(day, st)
    with pytest.raises(InputError, match="changed in place since") as e:
        _replay(day, tmp_path / "b")
    assert "replay again" in str(e.value)
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["status"] == "failed"
    assert cache.entries() == []  # removed
    again = _replay(day, tmp_path / "c")
    assert not again["pass1"]["cached"] and len(cache.entries()) == 1


def test_a_replay_without_a_hash_leaves_an_entry_the_next_one_completes(day, tmp_path, cache_dir):
    _replay(day, tmp_path / "a", hash=False)
    (entry,) = cache.entries()
    assert _meta(entry)["sha256"] == ""
    assert _replay(day, tmp_path / "a", hash=False)["pass1"]["cached"]
    assert _meta(entry)["sha256"] == ""
    s = _replay(day, tmp_path / "a")
    assert s["pass1"]["cached"] and _meta(entry)["sha256"] == s["source"]["source_sha256"] != ""


def _meta(entry):
    with np.load(entry) as z:
        return json.loads(z["meta"].tobytes())


@pytest.mark.parametrize("damage", ["garbage", "empty", "another file"])
def test_a_bad_entry_is_noted_and_rewritten(day, tmp_path, cache_dir, damage):
    _replay(day, tmp_path / "a")
    (entry,) = cache.entries()
    if damage == "another file":  # a sound entry whose identity is not this file's
        with np.load(entry) as z:
            parts = dict(z)
        ident = json.loads(parts["identity"].tobytes())
        parts["identity"] = np.frombuffer(json.dumps({**ident, "size": 1}).encode(), np.uint8)
        np.savez(entry, **parts)
    else:
        with open(entry, "wb") as f:
            f.write(b"" if damage == "empty" else b"PK\x03\x04 not a zip at all" * 10)
    s = _replay(day, tmp_path / "b")
    assert not s["pass1"]["cached"]
    (note,) = s["notes"]
    assert note.startswith(f"sizing cache entry {entry}: ") and "pass 1 scanned the file again" in note
    assert ("another file" in note) if damage == "another file" else ("unreadable" in note)
    assert _replay(day, tmp_path / "c")["pass1"]["cached"]  # rewritten whole


def test_a_cache_that_cannot_be_written_is_noted(day, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LOBREPLAY_CACHE_DIR", str(blocker / "cache"))
    s = _replay(day, tmp_path / "a")
    assert s["status"] == "ok" and not s["pass1"]["cached"]
    (note,) = s["notes"]
    assert note.startswith("could not write the sizing cache entry") and "scans it again" in note


def test_allow_truncated_is_part_of_the_identity(day, tmp_path, cache_dir):
    _replay(day, tmp_path / "a")
    assert not _replay(day, tmp_path / "a", allow_truncated=True)["pass1"]["cached"]
    assert len(cache.entries()) == 2


def test_jobs_use_the_cache_too(day, tmp_path, cache_dir):
    cfg = ReplayConfig(timing=False)
    one = replay_itch_jobs(str(day), str(tmp_path / "one"), cfg, 1)
    many = replay_itch_jobs(str(day), str(tmp_path / "many"), cfg, 2)
    assert not one["pass1"]["cached"] and many["pass1"]["cached"]
    for key in SAME:
        assert many[key] == one[key], key
    assert _tables(tmp_path / "one") == _tables(tmp_path / "many")  # (untimed: no latency_histograms in either)
    _same_tables(tmp_path / "one", tmp_path / "many", _tables(tmp_path / "one"))
    assert not list((tmp_path / "many").glob("*.hgrm"))
    cache.clear()
    many = replay_itch_jobs(str(day), str(tmp_path / "many"), cfg, 2, force=True)  # the parent's pass 1 fills it
    assert not many["pass1"]["cached"] and len(cache.entries()) == 1


@pytest.mark.parametrize("kind", ["itch", "lobc"])
def test_the_command_line(kind, day, tmp_path, cache_dir, capsys):
    """A replay run twice says the second took pass 1 from the cache; --no-cache scans;
    `lobreplay cache` shows the entry and `cache clear` removes it."""
    replay = ["itch", "replay", str(day)] if kind == "itch" else ["replay", str(_lobc_day(tmp_path, False))]
    args = replay + ["-o", str(tmp_path / "o"), "--no-progress", "--no-reports", "--force"]
    assert main(args) == 0
    assert "from the sizing cache" not in capsys.readouterr().out
    assert main(args) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("pass 1 ")]
    assert len(line) == 1 and "(from the sizing cache; the scan took " in line[0], line
    assert main(args + ["--no-cache"]) == 0
    assert "from the sizing cache" not in capsys.readouterr().out
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{cache_dir}: 1 entry, ") and "safe to delete" in out
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.startswith(f"{cache_dir}: removed 1 file(s), ")
    assert cache.entries() == []
    os.environ["LOBREPLAY_CACHE_DIR"] = "off"  # (monkeypatch restores the test's value)
    assert main(["cache"]) == 0
    assert "off" in capsys.readouterr().out


# ---------------------------------------------------------------- .lobc replays

LOBC_SAME = ("records", "records_by_kind", "books", "messages_applied", "snapshots_applied", "messages_skipped",
             "levels_applied", "events_by_kind", "desyncs", "desyncs_by_cause", "trades", "bbo_changes",
             "crossing_events", "bookticker", "lobc", "report_rows", "source")


def _lobc_day(tmp_path, damaged: bool):
    """A capture of 1,200 messages in blocks of 500 records; damaged: a byte of block 3
    flipped (damage inside the file, with sound blocks after it), and a torn tail."""
    from tests.test_l2replay import synth_stream, write_lobc
    recs, _ = synth_stream(93, n_messages=1200, n_symbols=2, gap_rate=0.03, ticker_error=0.02)
    path = tmp_path / ("bad.lobc" if damaged else "feed.lobc")
    write_lobc(path, recs, flush_records=500)
    if damaged:
        raw = bytearray(path.read_bytes())
        raw[512 + 3 * (64 + 500 * 64) + 64 + 1000] ^= 0xFF
        path.write_bytes(bytes(raw[:-10]))
    return path


def _lobc(path, out, **kw):
    from lobreplay.l2.replay import L2ReplayConfig, replay_lobc
    kw.setdefault("timing", False)
    return replay_lobc(path, str(out), L2ReplayConfig(**kw), force=True)


@pytest.mark.parametrize("damaged", [False, True])
def test_a_lobc_replay_again_takes_pass1_from_the_cache_with_the_same_reports(tmp_path, cache_dir, damaged):
    """Whole, or damaged inside and torn (--allow-corrupt): the blocks a scan's CRC checks
    left come back from the entry with the figures, and the reports are the same."""
    path = _lobc_day(tmp_path, damaged)
    kw = {"allow_corrupt": True} if damaged else {}
    first = _lobc(path, tmp_path / "a", **kw)
    assert first["pass1"]["cached"] is False and len(cache.entries()) == 1
    if damaged:
        assert first["lobc"]["damage"] and first["lobc"]["torn"] and first["desyncs_by_cause"]["gap_damaged"] == 3  # (every symbol of the file)
    second = _lobc(path, tmp_path / "b", **kw)
    assert second["pass1"]["cached"] is True and second["pass1"]["scan_seconds"] == first["pass1"]["seconds"]
    for key in LOBC_SAME:
        assert second[key] == first[key], key
    names = _tables(tmp_path / "a")
    assert "bbo.parquet" in names and names == _tables(tmp_path / "b")
    _same_tables(tmp_path / "a", tmp_path / "b", names)
    assert second["notes"] == first["notes"] == []


def test_a_lobc_entry_is_for_its_options(tmp_path, cache_dir):
    """What a .lobc pass 1 finds depends on --symbols, --price-mode and the rest: each its
    own entry; --reports and --depth do not change it."""
    path = _lobc_day(tmp_path, False)
    _lobc(path, tmp_path / "a")
    assert _lobc(path, tmp_path / "a", reports=("bbo",), depth_levels=2)["pass1"]["cached"]
    for kw in ({"symbols": ["BBB"]}, {"price_mode": "ladder"}, {"headroom": 0.5}, {"max_message": 9}):
        assert not _lobc(path, tmp_path / "a", **kw)["pass1"]["cached"], kw
        again = _lobc(path, tmp_path / "b", **kw)
        scanned = _lobc(path, tmp_path / "c", cache=False, **kw)
        assert again["pass1"]["cached"] and not scanned["pass1"]["cached"]
        for key in LOBC_SAME:
            assert again[key] == scanned[key], (kw, key)
    assert len(cache.entries()) == 5


def test_a_lobc_file_rewritten_behind_the_cache_fails_the_replay(tmp_path, cache_dir):
    path = _lobc_day(tmp_path, False)
    _lobc(path, tmp_path / "a")
    st = os.stat(path)
    with open(path, "r+b") as f:  # a record's quantity in block 4, outside both ends' 64 KiB
        at = 512 + 4 * (64 + 500 * 64) + 64 + 10 * 64 + 40
        assert cache.ENDS < at < st.st_size - cache.ENDS
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 1]))
    _touch_like(path, st)
    with pytest.raises(InputError, match="changed in place since"):
        _lobc(path, tmp_path / "b")
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["status"] == "failed"
    assert cache.entries() == []
    # scanned again, the block's CRC no longer matches: the file is damaged, and says so
    with pytest.raises(InputError, match="CRC mismatch in block 4"):
        _lobc(path, tmp_path / "c")


def test_the_cache_keeps_its_size_the_least_recently_used_going_first(day, tmp_path, cache_dir, monkeypatch):
    import zipfile
    copies = []
    for k in range(3):  # three files (the same bytes at three paths: three entries)
        copies.append(tmp_path / f"20191230.copy{k}.itch")
        shutil.copy(day, copies[-1])
    _replay(copies[0], tmp_path / "o")
    (first,) = cache.entries()
    with zipfile.ZipFile(first) as z:  # (compressed: a full day's entry is some 0.5-1 MB)
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    size = os.path.getsize(first)
    monkeypatch.setenv("LOBREPLAY_CACHE_MAX_MB", str(2.5 * size / 1e6))  # room for two entries
    _replay(copies[1], tmp_path / "o")
    old = time.time() - 100
    for p in cache.entries():
        os.utime(p, (old, old))
    assert _replay(copies[0], tmp_path / "o")["pass1"]["cached"]  # (used now: copy 1's is the oldest)
    tmp = os.path.join(os.path.dirname(first), "killed-writer.tmp")
    fresh = os.path.join(os.path.dirname(first), "writing-now.tmp")
    for p, age in ((tmp, 2 * cache.STALE_TMP), (fresh, 0)):
        with open(p, "wb") as f:
            f.write(b"half an entry")
        os.utime(p, (time.time() - age, time.time() - age))
    _replay(copies[2], tmp_path / "o")  # a third entry: copy 1's goes
    assert _replay(copies[0], tmp_path / "o")["pass1"]["cached"]
    assert _replay(copies[2], tmp_path / "o")["pass1"]["cached"]
    assert not os.path.exists(tmp) and os.path.exists(fresh)
    assert len(cache.entries()) == 2
    assert not _replay(copies[1], tmp_path / "o")["pass1"]["cached"]


@pytest.mark.parametrize("bad", ["lots", "-1"])
def test_a_bad_cache_size_is_an_error_before_the_replay(day, tmp_path, cache_dir, monkeypatch, bad):
    monkeypatch.setenv("LOBREPLAY_CACHE_MAX_MB", bad)
    with pytest.raises(InputError, match=f"LOBREPLAY_CACHE_MAX_MB: expected a number of megabytes.*{bad}"):
        _replay(day, tmp_path / "o")
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["status"] == "failed" and s.get("pass1") is None


def test_a_file_that_changes_during_the_replay_is_not_kept(day, tmp_path, cache_dir, monkeypatch):
    """A file touched between pass 1 and the end (a capture still appending, an edit): what
    pass 1 found may not be the file's any more, so no entry is written, and a note says so."""
    from lobreplay.itch import replay as R
    real = R.ItchReplay._pass2

    def touching(self, *a, **k):
        st = os.stat(day)
        os.utime(day, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        return real(self, *a, **k)
    monkeypatch.setattr(R.ItchReplay, "_pass2", touching)
    s = _replay(day, tmp_path / "a")
    assert s["status"] == "ok" and cache.entries() == []
    assert s["notes"] == ["the input changed during the replay: its pass 1 was not kept in the sizing cache"]


def test_cache_list_names_each_entrys_file_and_whether_it_changed(day, tmp_path, cache_dir, capsys):
    lobc_file = _lobc_day(tmp_path, False)
    _replay(day, tmp_path / "a")
    _lobc(lobc_file, tmp_path / "b", symbols=["BBB"])
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[2].startswith(f"{cache_dir}: 2 entries, ")
    lobc_line = [ln for ln in out if "lobc-pass1" in ln]
    assert len(lobc_line) == 1 and f"{lobc_file} ({os.path.getsize(lobc_file):,} bytes; unchanged; " in lobc_line[0]
    assert "symbols=['BBB']" in lobc_line[0]
    assert out[0] == lobc_line[0]  # (the most recently used first)
    st = os.stat(day)
    os.utime(day, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))
    os.remove(lobc_file)
    bad = os.path.join(os.path.dirname(cache.entries()[0]), "0" * 32 + ".npz")
    with open(bad, "wb") as f:
        f.write(b"not an entry")
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{day} ({st.st_size:,} bytes; changed since)" in out
    assert f"{lobc_file} (" in out and "; gone; " in out
    assert f"{bad}: unreadable (" in out


def test_a_replay_stopped_after_its_pass1_leaves_the_entry(day, tmp_path, cache_dir, monkeypatch):
    """Ctrl-C (or a failure) in pass 2 of a long day does not cost the next replay its pass 1:
    the entry is written as soon as the scan is done; the next replay, from it, adds the
    file's SHA-256 (so the one after that checks it)."""
    from lobreplay.itch import replay as R
    real = R.ItchReplay._pass2

    def stopped(self, *a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(R.ItchReplay, "_pass2", stopped)
    with pytest.raises(KeyboardInterrupt):
        _replay(day, tmp_path / "a")
    (entry,) = cache.entries()
    assert _meta(entry)["sha256"] == ""
    monkeypatch.setattr(R.ItchReplay, "_pass2", real)
    s = _replay(day, tmp_path / "b")
    assert s["pass1"]["cached"] and _meta(entry)["sha256"] == s["source"]["source_sha256"] != ""
