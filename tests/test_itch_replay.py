"""The ITCH replay: a generated day with known truth replays with no desync
and an empty book; each kind of injected feed fault is found with the right
cause at the right message; real captures that start mid-day are tolerated
and counted; reports are valid Parquet with provenance; bad input is a clear
error that leaves what was written valid."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from lobreplay.errors import InputError
from lobreplay.testing.itch_faults import FAULTS, inject
from lobreplay.itch.replay import ReplayConfig, replay_itch, session_date, size_books
from tests.conftest import REAL_ITCH, real_itch_files


@pytest.fixture(scope="module")
def clean(synthetic_day, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean")
    return synthetic_day, out, replay_itch(synthetic_day.path, str(out))


def test_ground_truth_day_has_no_desync_and_ends_empty(clean):
    truth, out, s = clean
    assert s["status"] == "ok"
    assert s["messages"] == truth.n_messages
    assert s["desyncs"] == 0 and s["desyncs_by_cause"] == {}
    assert s["residual_orders"] == truth.final_live == 0
    assert s["session_complete"]
    assert s["books"] == len({loc for loc in truth.price_min})
    desyncs = pd.read_parquet(out / "desyncs.parquet")
    assert len(desyncs) == 0 and list(desyncs.columns)[:4] == ["event_ns", "event_ts", "sequence", "instrument"]


def test_sizing_matches_the_truth(clean):
    truth, out, _ = clean
    sym = pd.read_parquet(out / "symbols.parquet").set_index("instrument")
    for loc, peak in truth.peak_live.items():
        row = sym.loc[loc]
        assert row["capacity"] == peak, loc          # exact: the pass-1 peak of live orders
        assert row["band_low"] <= truth.price_min[loc] and row["band_high"] >= truth.price_max[loc]
        assert row["tick"] == truth.ticks[loc] or truth.ticks[loc] % row["tick"] == 0
        assert (row["band_low"] % row["tick"], row["band_high"] % row["tick"]) == (0, 0)
        assert row["executed_shares"] == truth.executed_shares[loc]
        assert row["symbol"] == truth.symbols[loc] and row["replayed"]


def test_core_fills_agree_with_the_feed(clean):
    truth, out, _ = clean
    ex = pd.read_parquet(out / "executions.parquet")
    feed = ex[(ex.source == "feed") & ex.msg_type.isin(["E"])]
    core = ex[ex.source == "core"]
    # one expected fill per checked execution (E, and C printable Y), same order, same orders
    checked = ex[(ex.source == "feed") & ((ex.msg_type == "E") | ((ex.msg_type == "C") & (ex.printable == "Y")))]
    assert len(core) == len(checked) > 100
    np.testing.assert_array_equal(core.sort_values("sequence").order_ref.to_numpy(),
                                  checked.sort_values("sequence").order_ref.to_numpy())
    assert feed.qty.sum() > 0
    groups = sum(len(g[3]) for g in truth.aggressor_groups)
    assert len(checked) == groups


def test_bbo_report_follows_the_book(clean):
    _, out, _ = clean
    bbo = pd.read_parquet(out / "bbo.parquet")
    assert len(bbo) > 1000
    both = bbo[(bbo.bid_price > 0) & (bbo.ask_price > 0)]
    assert (both.bid_price < both.ask_price).all()  # never crossed
    assert (bbo.groupby("instrument").event_ns.apply(lambda t: t.is_monotonic_increasing)).all()


@pytest.mark.parametrize("group", [False, True])
def test_columns_handed_to_the_report_writer_stay_as_they_were(synthetic_day, tmp_path, monkeypatch, group):
    """The report writer encodes on its own thread while the replay goes on with the next
    chunk: no column handed to it may be a view of a buffer that chunk reuses (the bbo rows
    once were, and a busy writer then wrote the next chunk's tops). Every numpy column is
    compared, after the replay, with its copy taken when it was handed over; with the events
    regrouped by book too (other arrays, other copies)."""
    from lobreplay.reports.tables import ReportSet
    handed = []

    def keep(columns):
        return {k: (v, v.copy()) for k, v in columns.items() if isinstance(v, np.ndarray)}

    write = ReportSet.write
    monkeypatch.setattr(ReportSet, "write", lambda self, name, columns: (
        handed.append((name, keep(columns))), write(self, name, columns))[1])
    s = replay_itch(synthetic_day.path, str(tmp_path / "o"), ReplayConfig(chunk_bytes=1 << 16, group_books=group))
    assert s["status"] == "ok" and s["pass2"]["grouped_by_book"] is group
    assert sum(name == "bbo" for name, _ in handed) >= 10 and {"executions", "bbo"} <= {n for n, _ in handed}
    for name, cols in handed:
        for k, (now, then) in cols.items():
            assert np.array_equal(now, then), f"{name}.{k} changed after it was handed to the writer"


def test_reports_carry_provenance_and_schemas(clean):
    truth, out, s = clean
    sha = __import__("hashlib").sha256(open(truth.path, "rb").read()).hexdigest()
    for name in ("desyncs", "executions", "bbo", "latency", "symbols"):
        meta = pq.read_schema(out / f"{name}.parquet").metadata
        assert meta[b"source_file"] == b"20191230.synthetic.itch"
        assert meta[b"session_date"] == b"2019-12-30"
        assert meta[b"price_scale"] == b"10000"
    # the hash runs beside the replay; every table, the status ones too, waits for it
    tables = sorted(out.glob("*.parquet"))
    assert len(tables) > 8 and {pq.read_schema(t).metadata[b"source_sha256"].decode() for t in tables} == {sha}
    assert s["source"]["source_sha256"] == sha
    lat = pd.read_parquet(out / "latency.parquet")
    assert set(lat.kind) >= {"NEW", "CANCEL", "EXEC", "ALL"}
    assert (lat.p50_ns <= lat.p99_ns).all() and (lat.p99_ns <= lat.max_ns).all()
    bbo = pd.read_parquet(out / "bbo.parquet")
    assert str(bbo.event_ts.dtype) == "datetime64[ns, UTC]"
    assert bbo.event_ts.iloc[0].tz_convert("America/New_York").date().isoformat() == "2019-12-30"
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(json.dumps(s, default=int))


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_each_injected_fault_is_found_with_its_cause(synthetic_day, tmp_path, kind):
    bad = tmp_path / "20191230.faulty.itch"
    fault = inject(kind, synthetic_day, bad, seed=3)
    out = tmp_path / "out"
    s = replay_itch(str(bad), str(out))
    d = pd.read_parquet(out / "desyncs.parquet")
    assert fault.cause in set(d.cause), (kind, s["desyncs_by_cause"])
    hit = d[d.cause == fault.cause]
    if fault.cause == "residual_order":
        assert fault.order_ref in set(hit.order_ref)
    else:
        assert fault.index in set(hit.sequence), (kind, hit.sequence.tolist(), fault)
    # the book was brought back to the feed's state: the fault does not cascade
    others = d[d.cause != fault.cause]
    if fault.cause.startswith("crossed"):
        # the feed said the new order rests, so the orders it met were stale and are gone:
        # later messages about them, and only them, name unknown references
        removed = set(hit[hit.sequence == fault.index].order_ref)
        assert set(others.cause) <= {"unknown_reference"}
        for row in others.sort_values("sequence").itertuples():
            assert row.order_ref in removed, row
            if row.other_ref:  # a replace of a removed order: its new reference is unknown too
                removed.add(row.other_ref)
    else:
        assert len(d) <= 2, s["desyncs_by_cause"]


def _same_reports(a, sa: dict, b, sb: dict) -> None:
    """Two replays' report directories (a, b) and summaries: every table identical, row for
    row, and the same counts."""
    import glob
    names = sorted(os.path.basename(p) for p in glob.glob(str(a / "*.parquet")))
    assert names == sorted(os.path.basename(p) for p in glob.glob(str(b / "*.parquet"))) and "bbo.parquet" in names
    for name in names:
        ta, tb = pq.read_table(a / name), pq.read_table(b / name)
        assert ta.equals(tb), name
    for key in ("events", "desyncs", "desyncs_by_cause", "residual_orders", "report_rows", "messages"):
        assert sa[key] == sb[key], key


def _same_replay(path, tmp_path, **cfg) -> dict:
    """Replay path with the events regrouped by book and without: every table identical,
    row for row, and the same counts. Returns the grouped replay's summary."""
    runs = []
    for group in (False, True):
        out = tmp_path / f"{os.path.basename(path)}.{group}"
        s = replay_itch(str(path), str(out), ReplayConfig(group_books=group, timing=False, **cfg))
        assert s["pass2"]["grouped_by_book"] is group
        runs.append((out, s))
    _same_reports(*runs[0], *runs[1])
    return runs[1][1]


@pytest.mark.parametrize("fault", ["drop_add", "crossed_add"])
@pytest.mark.parametrize("mode", ["change", "change-grouped", "sampled"])
def test_the_core_called_in_small_pieces_replays_the_same(synthetic_day, tmp_path, monkeypatch, fault, mode):
    """Pass 2 hands the core at most PIECE events a call, into the same output arrays each
    time. With pieces of 997 events instead of PIECE (every chunk cut many times, at any
    event) every table is the same, row for row: a day with rejects (drop_add: unknown
    references) or core desyncs (crossed_add), every report, a depth row after every change
    (events in file order or regrouped by book), or depth samples every second (pieces
    also cut at each sample time)."""
    from lobreplay.itch import replay as rp
    path = tmp_path / "20191230.faulty.itch"
    inject(fault, synthetic_day, path, seed=3)
    cfg = dict(timing=False, depth_levels=3, depth_every_ns=0 if mode.startswith("change") else 10**9,
               group_books=mode == "change-grouped")
    runs = []
    for piece in (rp.PIECE, 997):
        monkeypatch.setattr(rp, "PIECE", piece)
        out = tmp_path / f"piece{piece}"
        runs.append((out, replay_itch(str(path), str(out), ReplayConfig(**cfg))))
    _same_reports(*runs[0], *runs[1])
    s = runs[1][1]
    assert s["events"] > 20 * 997 and s["desyncs"] > 0 and s["report_rows"]["depth"] > 100
    assert s["pass2"]["grouped_by_book"] is (mode == "change-grouped")


@pytest.mark.parametrize("kind", [None] + sorted(FAULTS))
def test_events_regrouped_by_book_replay_the_same(synthetic_day, tmp_path, kind):
    """ReplayConfig.group_books: each chunk's events applied book by book (each book's in
    their order) instead of in file order. Books do not interact, so every report is the
    same, row for row: on the clean day, on each injected fault (desyncs, and the book
    brought back to the feed's state), with small chunks (many of them), and with a depth
    row after every change."""
    path = synthetic_day.path
    if kind is not None:
        path = tmp_path / "20191230.faulty.itch"
        inject(kind, synthetic_day, path, seed=3)
        assert _same_replay(path, tmp_path)["desyncs"] > 0
    else:
        s = _same_replay(path, tmp_path, chunk_bytes=64 << 10, depth_levels=3, depth_every_ns=0)
        assert s["report_rows"]["depth"] > 1000 and s["report_rows"]["bbo"] > 1000


def test_events_regrouped_by_book_replay_the_same_on_real_data(tmp_path):
    """The same on the real capture (a mid-day start: unknown references on many books)."""
    s = _same_replay(REAL_ITCH / "nasdaq_20230822_0930.itch", tmp_path)
    assert s["desyncs"] > 0 and s["books"] > 1


@pytest.mark.parametrize("name", [p.name for p in real_itch_files()])
def test_every_real_fixture_replays(tmp_path, name):
    """Every real ITCH file replays whole (a cut one with --allow-truncated), with a depth row
    per change, grouped by book or not, to the same reports. Files without a single order
    message (the 2016, 2019 and 2019-12-30 samples hold only directory and status messages)
    replay to zero events: a chunk without events once failed with a traceback
    (UnboundLocalError), as the first chunk of every one of those files did."""
    s = _same_replay(REAL_ITCH / name, tmp_path, allow_truncated=True, depth_levels=2, depth_every_ns=0)
    assert s["status"] == "ok" and s["messages"] > 0
    if name.startswith(("nasdaq_2016", "nasdaq_2019")):
        assert s["events"] == 0 and s["books"] == 0 and s["report_rows"]["bbo"] == 0


def test_mid_day_capture_counts_unknown_references():
    s_dir = None
    path = REAL_ITCH / "nasdaq_20230822_0930.itch"
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        s = replay_itch(str(path), d)
        s_dir = d
        assert s["status"] == "ok" and not s["session_complete"]
        # none of the 132 E/X/D/U messages refers to an order added inside the capture (PROVENANCE.md)
        assert s["desyncs_by_cause"]["unknown_reference"] == 30 + 99 + 3 - 19
        assert s_dir


def test_symbols_restrict_the_replay(synthetic_day, tmp_path):
    sym = synthetic_day.symbols
    pick = [sym[1], sym[2]]
    s = replay_itch(synthetic_day.path, str(tmp_path / "o"), ReplayConfig(symbols=pick))
    assert s["books"] == 2 and s["desyncs"] == 0
    bbo = pd.read_parquet(tmp_path / "o" / "bbo.parquet")
    assert set(bbo.symbol) == set(pick)
    with pytest.raises(InputError, match="no such symbol"):
        replay_itch(synthetic_day.path, str(tmp_path / "o2"), ReplayConfig(symbols=["NOPE"]))


def test_output_directory_is_not_overwritten_without_force(synthetic_day, tmp_path):
    out = tmp_path / "o"
    replay_itch(synthetic_day.path, str(out), ReplayConfig(reports=()))
    with pytest.raises(InputError, match="--force"):
        replay_itch(synthetic_day.path, str(out))
    s = replay_itch(synthetic_day.path, str(out), ReplayConfig(reports=("desyncs",)), force=True)
    assert s["status"] == "ok" and (out / "desyncs.parquet").exists() and not (out / "bbo.parquet").exists()


def test_a_directory_left_by_a_replay_that_failed_at_once_is_reused(synthetic_day, tmp_path):
    """A replay that fails before writing any report (a bad input) leaves only its summary
    (status failed); the next replay there needs no --force. Anything more is kept safe."""
    bad = tmp_path / "20191230.bad.itch"
    bad.write_bytes(b"\x07\x20" + bytes(100))
    out = tmp_path / "o"
    with pytest.raises(InputError, match="not an ITCH 5.0 file"):
        replay_itch(str(bad), str(out))
    assert os.listdir(out) == ["summary.json"] and json.loads((out / "summary.json").read_text())["status"] == "failed"
    s = replay_itch(synthetic_day.path, str(out), ReplayConfig(reports=("desyncs",)))  # (no force)
    assert s["status"] == "ok" and {"desyncs.parquet", "summary.json"} <= set(os.listdir(out))
    with pytest.raises(InputError, match="not empty; pass --force"):  # a successful replay's: kept
        replay_itch(synthetic_day.path, str(out))
    for name in os.listdir(out):
        (out / name).unlink()
    (out / "summary.json").write_text(json.dumps({"status": "failed"}))
    (out / "notes.txt").write_text("mine")  # a failed summary beside something else: kept
    with pytest.raises(InputError, match="not empty; pass --force"):
        replay_itch(synthetic_day.path, str(out))
    (out / "notes.txt").unlink()
    (out / "summary.json").write_text("{not json")  # not a summary this can read: kept
    with pytest.raises(InputError, match="not empty; pass --force"):
        replay_itch(synthetic_day.path, str(out))


def test_table_writer_takes_late_metadata_when_it_opens(tmp_path):
    """A metadata value may be a Future (the file's SHA-256): resolved at the first write."""
    from concurrent.futures import Future

    import pyarrow as pa

    from lobreplay.reports.tables import TableWriter
    late = Future()
    w = TableWriter(str(tmp_path / "t.parquet"), pa.schema([("x", pa.int64())]), {"a": "1", "source_sha256": late})
    late.set_result("f" * 64)
    w.write({"x": np.arange(3)})
    w.close()
    meta = pq.read_schema(tmp_path / "t.parquet").metadata
    assert (meta[b"a"], meta[b"source_sha256"]) == (b"1", b"f" * 64)
    assert pq.read_table(tmp_path / "t.parquet")["x"].to_pylist() == [0, 1, 2]


@pytest.mark.parametrize("stream", [False, True])
def test_table_writer_gathers_small_batches_into_row_groups(tmp_path, monkeypatch, stream):
    """Rows come in per chunk (small with a small --chunk-mb or --symbols); they are written
    in groups of about ROW_GROUP rows, in order, write_arrow's tables (the sorted per-chunk
    tables) gathered with them, and close writes what is held."""
    import pyarrow as pa

    from lobreplay.reports.tables import TableWriter, read_report
    monkeypatch.setattr(TableWriter, "ROW_GROUP", 100)
    path = str(tmp_path / ("t.arrows" if stream else "t.parquet"))
    w = TableWriter(path, pa.schema([("x", pa.int64())]), {}, stream=stream)
    for i in range(0, 330, 30):  # 11 batches of 30 rows
        w.write({"x": np.arange(i, i + 30)})
    w.write_arrow(pa.table({"x": pa.array([-1, -2], pa.int64())}))
    w.write({"x": np.arange(330, 340)})
    w.close()
    got = read_report(path)
    assert got["x"].to_pylist() == list(range(330)) + [-1, -2] + list(range(330, 340))
    assert w.rows == 342
    if not stream:
        sizes = [pq.ParquetFile(path).metadata.row_group(k).num_rows for k in range(pq.ParquetFile(path).num_row_groups)]
        assert sizes == [120, 120, 102]  # 4 batches of 30 reach 100; 3 + the 2 of write_arrow + 10 do


def test_report_set_closes_every_table_even_if_one_fails(tmp_path, monkeypatch):
    """ReportSet.close writes the tables' last rows side by side (a thread per table, up to
    the CPUs): every table that can be closed is whole under its name, with all its rows,
    and the failure of another is raised."""
    import pyarrow as pa

    from lobreplay.reports.tables import ReportSet, TableWriter
    monkeypatch.setattr(TableWriter, "ROW_GROUP", 1000)
    rs = ReportSet(str(tmp_path), [], {"a": "1"})
    for name in ("t1", "t2", "t3"):
        rs.write_table(name, pa.table({"x": pa.array(np.arange(2500), pa.int64())}))
    real = TableWriter.close

    def close(self):
        if self.path.endswith("t2.parquet"):
            raise OSError("disk full (test)")
        real(self)
    monkeypatch.setattr(TableWriter, "close", close)
    with pytest.raises(OSError, match="disk full"):
        rs.close()
    for name in ("t1", "t3"):
        assert pq.read_table(tmp_path / f"{name}.parquet")["x"].to_pylist() == list(range(2500))
    assert not (tmp_path / "t2.parquet").exists() and (tmp_path / "t2.parquet.partial").exists()


def test_a_failing_replay_leaves_valid_outputs(synthetic_day, tmp_path):
    data = open(synthetic_day.path, "rb").read()
    cut = tmp_path / "20191230.cut.itch"
    cut.write_bytes(data[: len(data) // 2 + 7])
    out = tmp_path / "o"
    with pytest.raises(InputError, match="truncated"):
        replay_itch(str(cut), str(out))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and "truncated" in summary["error"]
    s = replay_itch(str(cut), str(tmp_path / "o2"), ReplayConfig(allow_truncated=True))
    assert s["truncated"]["bytes"] > 0 and s["status"] == "ok"


def test_a_replay_without_reports_imports_neither_pyarrow_nor_pandas(synthetic_day, tmp_path):
    # their imports are a fixed ~0.1 + 0.2 s (benchmarks/RESULTS.md); with reports they
    # are imported on a thread during pass 1
    code = ("import sys; from lobreplay.cli.main import main; "
            f"rc = main(['itch', 'replay', {synthetic_day.path!r}, '-o', {str(tmp_path / 'o')!r}, '--no-reports', "
            "'--no-progress']); print(rc, 'pyarrow' in sys.modules, 'pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.split()[-3:] == ["0", "False", "False"]  # after the printed summary
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["events"] > 0


@pytest.mark.parametrize("args", [[], ["--jobs", "2"], ["real"]])
def test_a_replay_with_every_report_does_not_import_pandas(synthetic_day, tmp_path, args):
    """pyarrow.array imports pandas (0.25 s of CPU) to ask whether its argument is a pandas
    object; reports build their arrays with lobreplay.core.arrow instead, and nothing else in a
    replay needs pandas. Nor does one process need pyarrow.compute (60-75 ms to import): report
    columns are built without casts or takes, and desyncs sorted in numpy (the real capture
    has 244; a --jobs merge sorts with a take, which loads it)."""
    path = synthetic_day.path if args != ["real"] else str(REAL_ITCH / "nasdaq_20230822_0930.itch")
    args = [] if args == ["real"] else args
    code = ("import sys; from lobreplay.cli.main import main; "
            f"rc = main(['itch', 'replay', {path!r}, '-o', {str(tmp_path / 'o')!r}, '--no-progress', "
            f"*{args!r}]); print(rc, 'pyarrow' in sys.modules, 'pandas' in sys.modules, "
            "'pyarrow.compute' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.split()[-4:-1] == ["0", "True", "False"]
    if not args:
        assert r.stdout.split()[-1] == "False"
    assert {"bbo.parquet", "executions.parquet", "latency.parquet", "symbols.parquet"} <= set(os.listdir(tmp_path / "o"))
    if path != synthetic_day.path:  # (the real capture's desyncs in file order, then the residual orders)
        import pyarrow.parquet as pq
        t = pq.read_table(tmp_path / "o" / "desyncs.parquet")
        msg, cause = t.column("sequence").to_numpy(), t.column("cause").to_pylist()
        replayed = msg >= 0
        assert replayed.sum() > 100 and (np.diff(msg[replayed]) >= 0).all() and replayed[:replayed.sum()].all()
        assert all(c == "residual_order" for c, r in zip(cause, replayed) if not r)


def test_a_failed_replay_does_not_wait_for_the_hash(synthetic_day, tmp_path, monkeypatch):
    """A replay that fails in pass 2 stops the input's SHA-256 before its tables close (each
    waits for it when it opens its file): the rest of a multi-GB file's hash took seconds
    after Ctrl-C. The tables are whole, with an empty source_sha256."""
    import pyarrow.parquet as pq
    from lobreplay.itch import replay as R

    def hash_that_waits(path, stop=None, *, background=False, size=None):  # (as test_l2replay's)
        return None if stop is not None and stop.wait(60) else "not stopped"

    real = R.ItchReplay._chunk_reports
    done = []

    def fails_after_one(self, *a, **k):
        if done:
            raise KeyboardInterrupt
        done.append(1)
        return real(self, *a, **k)

    from lobreplay.replay import engine
    monkeypatch.setattr(engine, "file_sha256", hash_that_waits)  # (the engine computes every replay's)
    monkeypatch.setattr(R.ItchReplay, "_chunk_reports", fails_after_one)
    with pytest.raises(KeyboardInterrupt):
        R.replay_itch(synthetic_day.path, str(tmp_path / "o"), R.ReplayConfig(chunk_bytes=1 << 20))
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["status"] == "failed"
    assert pq.read_schema(tmp_path / "o" / "bbo.parquet").metadata[b"source_sha256"] == b""


def test_cli_errors_are_one_line_without_traceback(tmp_path):
    bad = tmp_path / "x.itch"
    bad.write_bytes(b"\x00\x05hello")
    r = subprocess.run([sys.executable, "-m", "lobreplay", "itch", "replay", str(bad), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "not an ITCH 5.0 file" in r.stderr and "Traceback" not in r.stderr and str(bad) in r.stderr


def test_session_date_from_file_names():
    import datetime as dt
    assert session_date("12302019.NASDAQ_ITCH50.gz") == dt.date(2019, 12, 30)
    assert session_date("20191230.BX_ITCH_50.gz") == dt.date(2019, 12, 30)
    assert session_date("S081321-v50.txt.gz") == dt.date(2021, 8, 13)
    assert session_date("nasdaq_20230822_0930.itch") == dt.date(2023, 8, 22)
    assert session_date("sample.itch") is None


def test_size_books_rounds_to_the_tick_and_widens():
    st = np.zeros(65536, [("min_price", "<i8"), ("max_price", "<i8"), ("price_gcd", "<u8"), ("peak_live", "<u4")])
    st[5] = (1_000_000, 1_200_000, 100, 37)
    (z,), notes = size_books(st, 0.2, [5])
    assert z.tick == 100 and z.capacity == 37 and not notes
    assert z.band_low <= 1_000_000 - 40_000 and z.band_high >= 1_240_000
    assert z.band_low % 100 == 0 and z.band_high % 100 == 0
    st[6] = (5, 3_000_000_000, 1, 1)  # a sub-penny tick over a huge range: cannot fit
    with pytest.raises(InputError, match="levels"):
        size_books(st, 0.2, [6])


def test_depth_samples_agree_with_the_top_of_book(synthetic_day, tmp_path):
    out = tmp_path / "o"
    replay_itch(synthetic_day.path, str(out), ReplayConfig(depth_levels=3, depth_every_ns=30 * 10**9,
                                                           reports=("bbo", "depth")))
    depth = pd.read_parquet(out / "depth.parquet")
    bbo = pd.read_parquet(out / "bbo.parquet")
    assert len(depth) > 100 and (depth.event_ns % (30 * 10**9) == 0).all()
    assert {f"ask_qty_{i}" for i in (1, 2, 3)} <= set(depth.columns)
    checked = 0
    for loc, g in depth.groupby("instrument"):
        b = bbo[bbo.instrument == loc]
        for row in g.itertuples():
            before = b[b.event_ns < row.event_ns]  # the sample holds every event before its time
            if len(before) == 0:
                continue
            last = before.iloc[-1]
            assert (row.bid_price_1, row.bid_qty_1, row.ask_price_1, row.ask_qty_1) == \
                (last.bid_price, last.bid_qty, last.ask_price, last.ask_qty), (loc, row.event_ns)
            # deeper levels are worse prices
            if row.bid_price_2:
                assert row.bid_price_2 < row.bid_price_1
            if row.ask_price_2:
                assert row.ask_price_2 > row.ask_price_1
            checked += 1
    assert checked > 100
    # the last sample of each book is the book as the feed left it (the last partial interval
    # is sampled at the boundary after the file's last message): its final top of book
    end = depth.event_ns.max()
    assert end % (30 * 10**9) == 0 and end > bbo.event_ns.max()
    final = bbo.groupby("instrument").tail(1).set_index("instrument")
    last = depth.groupby("instrument").tail(1).set_index("instrument")
    assert len(last) == len(final) > 10
    for loc, row in last.iterrows():
        f = final.loc[loc]
        assert (row.bid_price_1, row.bid_qty_1, row.ask_price_1, row.ask_qty_1) == \
            (f.bid_price, f.bid_qty, f.ask_price, f.ask_qty), loc


def test_latency_histograms_beside_the_table(clean):
    _, out, _ = clean
    lat = pd.read_parquet(out / "latency.parquet")
    h = pd.read_parquet(out / "latency_histograms.parquet")
    overall = lat[lat.scope == "ALL"].set_index("kind")["count"]
    assert (h.groupby("kind")["count"].sum().sort_index() == overall.sort_index()).all()
    assert (h.bucket_low_ns < h.bucket_high_ns).all()
    for kind, g in h.groupby("kind"):
        assert g.bucket_low_ns.max() == overall_max(lat, kind)


def overall_max(lat, kind):
    return int(lat[(lat.scope == "ALL") & (lat.kind == kind)].max_ns.iloc[0])


def test_hgrm_files_beside_the_latency_table(clean):
    from lobreplay.reports.hgrm import read_hgrm
    _, out, _ = clean
    lat = pd.read_parquet(out / "latency.parquet")
    overall = lat[lat.scope == "ALL"].set_index("kind")
    for kind, row in overall.iterrows():
        table, footer = read_hgrm(out / f"latency_{kind}.hgrm")
        assert int(table["total_count"].iloc[-1]) == int(footer["TotalCount"]) == row["count"], kind
        # HDR names a bucket by its highest value, the table by its lowest: same bucket, within 0.1 %
        assert abs(float(footer["Max"]) - row["max_ns"]) <= max(1, 0.001 * row["max_ns"]), kind


def test_hgrm_files_from_the_report_table_are_the_replays_own(clean, tmp_path):
    """export_report_hgrm (what a .lobc replay's user runs) writes, from
    latency_histograms.parquet alone, the very files the replay wrote from its session."""
    from lobreplay.reports.hgrm import export_report_hgrm
    _, out, _ = clean
    made = export_report_hgrm(out, tmp_path)
    own = sorted(p.name for p in out.glob("latency_*.hgrm"))
    assert sorted(p.name for p in made.values()) == own and "latency_ALL.hgrm" in own
    for name in own:
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes(), name


def test_depth_after_every_change(synthetic_day, tmp_path):
    out = tmp_path / "o"
    replay_itch(synthetic_day.path, str(out), ReplayConfig(depth_levels=5, depth_every_ns=0,
                                                           reports=("bbo", "depth")))
    depth = pd.read_parquet(out / "depth.parquet")
    bbo = pd.read_parquet(out / "bbo.parquet")
    top = ["bid_price", "bid_qty", "ask_price", "ask_qty"]
    assert len(depth) >= len(bbo) > 1000
    for loc, b in bbo.groupby("instrument"):
        d = depth[depth.instrument == loc]
        dtop = set(map(tuple, d[[f"{c}_1" for c in top]].to_numpy().tolist()))
        assert set(map(tuple, b[top].to_numpy().tolist())) <= dtop, loc   # every top-of-book state is there
        assert tuple(d[[f"{c}_1" for c in top]].iloc[-1]) == tuple(b[top].iloc[-1]), loc


@pytest.mark.parametrize("jobs", [1, 2])
def test_no_hash_leaves_the_provenance_hash_empty_and_says_so(synthetic_day, tmp_path, jobs):
    from lobreplay.itch.parallel import replay_itch_jobs
    out = tmp_path / "o"
    s = replay_itch_jobs(synthetic_day.path, str(out), ReplayConfig(hash=False, reports=("bbo",)), jobs)
    assert s["source"]["source_sha256"] == ""
    assert any("--no-hash" in n for n in s["notes"])
    assert pq.read_schema(out / "bbo.parquet").metadata[b"source_sha256"] == b""
    # and by default the hash is there, the file's
    import hashlib
    d = replay_itch_jobs(synthetic_day.path, str(tmp_path / "d"), ReplayConfig(reports=("bbo",)), jobs)
    assert d["source"]["source_sha256"] == hashlib.sha256(open(synthetic_day.path, "rb").read()).hexdigest()
    assert not any("--no-hash" in n for n in d["notes"])


def test_status_tables_say_their_own_price_scale(clean):
    """A replay's status tables carry their own prices' scale: V's levels are Price(8)
    (it said 10000, the replay's own tables' scale), the status table of S has none; the
    report tables keep 10000, and analysis.load still reads Price(4) from them."""
    from lobreplay.reports.analysis import load
    truth, out, s = clean
    v = pq.read_schema(out / "status_V_mwcb_decline_level.parquet")
    assert v.metadata[b"price_scale"] == b"100000000" and v.field("level1").metadata[b"price_scale"] == b"100000000"
    assert b"price_scale" not in pq.read_schema(out / "status_S_system_event.parquet").metadata
    assert pq.read_schema(out / "status_I_noii.parquet").metadata[b"price_scale"] == b"10000"
    assert load(out).price_scale == 10000
