"""The Python API (lobreplay.open_itch / open_lobc, itch_stats, decode_itch): a replay stepped
from Python is the command line's replay stopped early. Stepping then to_parquet writes the
same tables as one batch replay; a cut at a time is exact; the live book at a place equals a
naive replay's book up to there; bad arguments are one-line errors."""
from __future__ import annotations

import datetime as dt
import json
import os
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest


import lobreplay as lr  # noqa: E402
from lobreplay.errors import InputError, LobError  # noqa: E402

DAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "sample_day.itch.gz")
CHUNK = 1 << 16  # several chunks on the sample day: cuts fall inside them
TIMED = ("latency", "latency_histograms")  # measured times: they differ run to run


def _times() -> np.ndarray:
    """Every message's timestamp, in file order (the reader's framing, not the replay)."""
    from lobreplay.itch.decode import timestamps
    from lobreplay.itch.reader import ItchFile
    return np.concatenate([timestamps(c, np.arange(c.n)) for c in ItchFile(DAY).chunks()])


def _ns(hhmm: str) -> int:
    h, m = map(int, hhmm.split(":"))
    return (h * 60 + m) * 60 * 1_000_000_000


def _tables(d) -> dict:
    return {f[:-len(".parquet")]: pq.read_table(os.path.join(d, f)) for f in sorted(os.listdir(d))
            if f.endswith(".parquet")}


def _same_reports(a, b) -> None:
    ta, tb = _tables(a), _tables(b)
    assert sorted(ta) == sorted(tb)
    for name in ta:
        x, y = ta[name], tb[name]
        if name == "latency":
            x, y = x.select(["scope", "instrument", "kind", "count"]), y.select(["scope", "instrument", "kind", "count"])
        elif name == "latency_histograms":
            continue
        assert x.num_rows == y.num_rows, name
        assert x.equals(y), name
        assert x.schema.metadata[b"source_sha256"] == y.schema.metadata[b"source_sha256"] != b""


@pytest.mark.parametrize("depth", [(0, 0), (3, 1_000_000_000), (2, 0)], ids=["plain", "depth-every-1s", "depth-change"])
def test_stepping_then_to_parquet_equals_the_batch_replay(tmp_path, depth):
    levels, every = depth
    cfg = lr.ReplayConfig(chunk_bytes=CHUNK, depth_levels=levels, depth_every_ns=every, group_books=False)
    batch = lr.replay_itch(DAY, str(tmp_path / "cli"), cfg)
    r = lr.open_itch(DAY, chunk_bytes=CHUNK, depth_levels=levels, depth_every_ns=every)
    r.run_until("10:00")
    pieces = list(r.chunks(until="10:05"))
    assert pieces
    s = r.to_parquet(tmp_path / "api")
    _same_reports(tmp_path / "cli", tmp_path / "api")
    for k in ("messages", "events", "desyncs", "desyncs_by_cause", "residual_orders", "books"):
        assert s[k] == batch[k], k
    rows = {k: v for k, v in s["report_rows"].items() if k != "latency_histograms"}  # (its buckets: measured)
    assert rows == {k: v for k, v in batch["report_rows"].items() if k != "latency_histograms"}
    assert s["status"] == "ok" and json.loads((tmp_path / "api" / "summary.json").read_text())["status"] == "ok"
    assert sorted(s["files"]) == sorted(batch["files"])


def test_the_cli_replay_is_the_api_replay(tmp_path):
    """`lobreplay itch replay` (the batch: the engine stepped to the end) and the API's
    to_parquet without a step write the same tables."""
    from lobreplay.cli.main import main
    assert main(["itch", "replay", DAY, "-o", str(tmp_path / "cli"), "--no-progress", "--chunk-mb", "1"]) == 0
    lr.open_itch(DAY, chunk_bytes=1 << 20).to_parquet(tmp_path / "api")
    _same_reports(tmp_path / "cli", tmp_path / "api")


def test_a_cut_at_a_time_is_exact_and_chunks_follow_on():
    t = _times()
    at10, at1005 = int(np.argmax(t >= _ns("10:00"))), int(np.argmax(t >= _ns("10:05")))
    r = lr.open_itch(DAY, chunk_bytes=CHUNK)
    r.run_until("10:00")
    assert r.where()["messages_done"] == at10
    chunks = list(r.chunks(until=dt.time(10, 5)))
    assert chunks[0].first == at10 and chunks[-1].last == at1005
    assert all(a.last == b.first for a, b in zip(chunks, chunks[1:]))  # none lost, none twice
    ev = np.concatenate([c.events.column("event_ns").to_numpy() for c in chunks])
    msg = np.concatenate([c.events.column("sequence").to_numpy() for c in chunks])
    assert len(ev) and ev.min() >= _ns("10:00") and ev.max() < _ns("10:05")
    assert msg.min() >= at10 and msg.max() < at1005 and (np.diff(msg) >= 0).all()
    for c in chunks:  # each chunk's report rows are its own messages'
        for name in ("bbo", "executions"):
            m = c.__getattr__(name)
            if m is not None and m.num_rows:
                col = m.column("sequence").to_numpy()
                assert col.min() >= c.first and col.max() < c.last
    r.run_until("10:05")  # (where it stands: nothing to do)
    assert r.where()["messages_done"] == at1005
    r.close()


def test_chunks_as_pandas_and_leaving_the_loop_early():
    r = lr.open_itch(DAY, chunk_bytes=CHUNK)
    it = r.chunks(format="pandas")
    first = next(it)
    assert first.first == 0 and len(first.events) and list(first.bbo.columns)[:3] == ["event_ns", "event_ts", "sequence"]
    it.close()  # (leaving the loop: the replay stands after the chunk yielded)
    assert r.where()["messages_done"] == first.last
    second = next(r.chunks())
    assert second.first == first.last
    r.close()


@pytest.mark.parametrize("until", ["09:45", "10:00:00.5", 20_000, "11:30"])
def test_the_book_at_a_place_is_the_naive_books_up_to_there(until):
    import itch_truth
    msgs = itch_truth.read_messages(DAY)
    r = lr.open_itch(DAY, chunk_bytes=CHUNK)
    r.run_until(until)
    n = r.where()["messages_done"]
    if isinstance(until, int):
        assert n == until
    truth = itch_truth.TruthBook()
    for m in msgs[:n]:
        truth.apply(m)
    names = {z.locate: r._p1.symbols[z.locate] for z in r._sizing}
    assert len(names) > 10
    for loc, name in names.items():
        bids, asks = truth.depth(loc, 5)
        b = r.book(name)
        assert b.depth("B", 5) == bids and b.depth("S", 5) == asks, name
    r.close()


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        lr.open_itch(tmp_path / "nope.itch")
    with pytest.raises(InputError, match="unknown option.*colour"):
        lr.open_itch(DAY, colour="red")
    with pytest.raises(InputError, match="no such symbol"):
        lr.open_itch(DAY, symbols=["NOPE"])
    r = lr.open_itch(DAY, chunk_bytes=CHUNK)
    for bad, what in (("25:00", "time of day"), ("10h", "time of day"), (-1, ">= 0"), (True, "expected"),
                      (1.5, "float"), (dt.datetime(2020, 1, 1, 10), "time zone")):
        with pytest.raises(InputError, match=what) as e:
            r.run_until(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="format"):
        next(r.chunks(format="csv"))
    r.run_until("10:00")
    with pytest.raises(InputError, match="behind where the replay stands"):
        r.run_until("09:00")
    with pytest.raises(InputError, match="behind where the replay stands"):
        r.run_until(10)
    with pytest.raises(InputError, match="no such symbol"):
        r.book("NOPE")
    r.to_parquet(tmp_path / "o")
    with pytest.raises(LobError, match="closed"):
        r.run_until("11:00")
    with pytest.raises(InputError, match="not empty"):
        lr.open_itch(DAY).to_parquet(tmp_path / "o")
    some = lr.open_itch(DAY, symbols=["AZH"])
    other = next(s for s in some._p1.symbols.values() if s != "AZH")
    with pytest.raises(InputError, match="not replayed"):
        some.book(other)
    some.close()


def test_a_closed_replay_leaves_no_spool():
    r = lr.open_itch(DAY, chunk_bytes=CHUNK)
    spool = r._spool_dir
    r.run_until("10:00")
    assert os.path.isdir(spool)
    with r:
        pass
    assert not os.path.exists(spool)


def _readers() -> list:
    import threading
    return [t for t in threading.enumerate() if t.name == "lobreplay-read" and t.is_alive()]


def test_close_stops_the_reader():
    """close() (and leaving a `with`) stops pass 2's reader thread at once: it was left reading
    ahead, holding its chunk buffers, until the replay object happened to be collected."""
    assert _readers() == []
    r = lr.open_itch(DAY, chunk_bytes=CHUNK)
    r.run_until("10:00")
    assert len(_readers()) == (1 if r._spare_core() else 0)
    keep = r  # (still referenced: only close() may stop it)
    r.close()
    assert _readers() == [] and keep is r


def test_itch_stats_and_decode_itch(tmp_path):
    s = lr.itch_stats(DAY)
    assert s.messages == len(_times()) and sum(s.by_type.values()) == s.messages and s.symbols == 50
    assert s.first_ns == int(_times()[0]) and s.as_dict()["truncated"] is None
    out = lr.decode_itch(DAY, tmp_path / "d", types="AF")
    assert out["status"] == "ok" and out["report_rows"] == {"A_add_order": s.by_type["A"],
                                                            "F_add_order_mpid": s.by_type["F"]}
    assert pq.read_table(tmp_path / "d" / "A_add_order.parquet").num_rows == s.by_type["A"]
    with pytest.raises(InputError, match="unknown message type"):
        lr.decode_itch(DAY, tmp_path / "e", types="Z")
    assert not (tmp_path / "e").exists()


# ---------------------------------------------------------------- .lobc

@pytest.fixture
def lobc_file(tmp_path):
    from tests.l2.test_l2replay import synth_stream, write_lobc
    recs, _ = synth_stream(11, n_messages=3000, n_symbols=3)
    path = tmp_path / "a.lobc"
    write_lobc(path, recs)
    return str(path), recs


def test_lobc_stepping_then_to_parquet_equals_the_batch_replay(tmp_path, lobc_file):
    path, recs = lobc_file
    lr.replay_lobc(path, str(tmp_path / "cli"), lr.L2ReplayConfig(chunk_records=500, depth_levels=2))
    r = lr.open_lobc(path, chunk_records=500, depth_levels=2)
    r.run_until(1234)
    assert r.where()["records_done"] <= 1234
    mid = int(recs["recv_ns"][len(recs) // 2])
    t = dt.datetime.fromtimestamp(mid / 1e9, dt.timezone.utc)
    chunks = list(r.chunks(until=t))
    assert chunks and all(a.last == b.first for a, b in zip(chunks, chunks[1:]))
    r.to_parquet(tmp_path / "api")
    _same_reports(tmp_path / "cli", tmp_path / "api")


def test_lobc_book_at_a_time_is_the_reference_replays(lobc_file):
    import l2_reference
    path, recs = lobc_file
    r = lr.open_lobc(path, chunk_records=700)
    when = int(recs["recv_ns"][2000])
    day = when - when % 86_400_000_000_000
    s = (when - day) // 1_000_000_000
    clock = f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{(when - day) % 1_000_000_000:09d}"
    r.run_until(clock)
    cut = int(np.argmax(recs["recv_ns"] >= when))
    ref = l2_reference.L2Replay(r._p1["sizing"], r._p1["names"], market="spot")
    ref.feed(recs[:cut])
    for s_idx, name in enumerate(r._p1["names"]):
        if s_idx not in r._p1["sizing"]:
            continue
        bids, asks = ref.levels(s_idx)
        b = r.book(name)
        assert [(p, q) for p, q, _ in b.depth("B", 10_000)] == bids, name
        assert [(p, q) for p, q, _ in b.depth("S", 10_000)] == asks, name
    with pytest.raises(InputError, match="behind"):
        r.run_until(5)
    r.close()
