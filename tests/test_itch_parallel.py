"""`--jobs N` shares the symbols out over processes; the merged reports are the
same as one process's: every table, row for row (latency: the same counts; the
times themselves differ run to run), and the same summary counts."""
import hashlib
import json
import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from lobreplay.testing.itch_faults import inject
from lobreplay.itch.parallel import replay_itch_jobs, split_locates
from lobreplay.itch.replay import ReplayConfig


def _frame(path):
    df = pd.read_parquet(path)
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(str)
    return df.reset_index(drop=True)


@pytest.mark.parametrize("jobs", [2, 3])
def test_jobs_give_the_same_reports_as_one_process(synthetic_day, tmp_path, jobs, monkeypatch):
    from lobreplay.itch import parallel
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 4)  # (--jobs is capped at the CPUs: 3 parts here too)
    day = tmp_path / "20191230.fault.itch"
    inject("drop_final_delete", synthetic_day, day, seed=2)  # some desync and residual rows too
    # every event timed: a sample of every 16th is taken per process, so the parts' latency counts
    # would differ from one process's
    cfg = ReplayConfig(depth_levels=3, depth_every_ns=60 * 10**9, timing_every=1)
    one = replay_itch_jobs(str(day), str(tmp_path / "one"), cfg, 1)
    many = replay_itch_jobs(str(day), str(tmp_path / "many"), cfg, jobs)
    names = sorted(p.name for p in (tmp_path / "one").glob("*.parquet"))
    assert names == sorted(p.name for p in (tmp_path / "many").glob("*.parquet"))
    assert {"desyncs.parquet", "executions.parquet", "bbo.parquet", "depth.parquet", "symbols.parquet",
            "latency.parquet", "status_S_system_event.parquet"} <= set(names)
    _same_tables(tmp_path / "one", tmp_path / "many", names)
    assert len(_frame(tmp_path / "one" / "desyncs.parquet")) >= 1
    for key in ("messages", "books", "book_levels", "book_capacity", "events", "executions_in_feed", "desyncs",
                "desyncs_by_cause", "residual_orders", "session_complete"):
        assert one[key] == many[key], key
    rows = {k: v for k, v in one["report_rows"].items() if k != "latency_histograms"}  # buckets hit vary
    assert rows == {k: v for k, v in many["report_rows"].items() if k != "latency_histograms"}
    assert many["jobs"] == jobs
    sha = hashlib.sha256(day.read_bytes()).hexdigest()
    assert one["source"] == many["source"] and many["source"]["source_sha256"] == sha  # hashed once, in the parent
    for name in names:
        assert pq.read_schema(tmp_path / "many" / name).metadata == pq.read_schema(tmp_path / "one" / name).metadata
    hgrm = sorted(p.name for p in (tmp_path / "one").glob("*.hgrm"))  # written on the pool, beside the merge
    assert "latency_ALL.hgrm" in hgrm and hgrm == sorted(p.name for p in (tmp_path / "many").glob("*.hgrm"))
    per_part = many["pass2"]["per_part"]
    assert len(per_part) == jobs and sum(p["events"] for p in per_part) == many["events"]
    assert json.loads((tmp_path / "many" / "summary.json").read_text())["status"] == "ok"
    assert not list((tmp_path / "many").glob(".part-*"))


def test_jobs_without_a_date_or_with_symbols_give_the_same_reports(synthetic_day, tmp_path):
    """Two cases that went wrong: a file with no date in its name whose orders are still live at
    its end (the residual rows' null `ts` was a ValueError traceback in the merge), and
    --symbols (every part wrote the system-wide rows, locate 0: each S event N times)."""
    from tests.conftest import REAL_ITCH
    mid = tmp_path / "mid.itch"
    mid.write_bytes((REAL_ITCH / "nasdaq_20230822_0930.itch").read_bytes())
    for src, cfg in [(mid, ReplayConfig(timing_every=1)),
                     (synthetic_day.path, ReplayConfig(symbols=[synthetic_day.symbols[2], synthetic_day.symbols[7]],
                                                       timing_every=1))]:
        one = replay_itch_jobs(str(src), str(tmp_path / "one"), cfg, 1, force=True)
        many = replay_itch_jobs(str(src), str(tmp_path / "many"), cfg, 2, force=True)
        assert many["status"] == "ok" and one["residual_orders"] == many["residual_orders"]
        names = sorted(p.name for p in (tmp_path / "one").glob("*.parquet"))
        assert "status_S_system_event.parquet" in names
        _same_tables(tmp_path / "one", tmp_path / "many", names)
    assert one["report_rows"]["status_S_system_event"] == synthetic_day.counts["S"]


def _same_tables(one, many, names):
    """Every table of two replays' reports row for row (latency: the counts)."""
    for name in names:
        a, b = _frame(one / name), _frame(many / name)
        if name == "latency.parquet":
            keep = ["scope", "instrument", "kind", "count"]
            a, b = a[keep], b[keep]
        if name == "latency_histograms.parquet":  # times differ run to run; the counts per kind do not
            a, b = a.groupby("kind")["count"].sum(), b.groupby("kind")["count"].sum()
            pd.testing.assert_series_equal(a, b, obj=name)
            continue
        pd.testing.assert_frame_equal(a, b, obj=name)


@pytest.mark.parametrize("name", ["nasdaq_20230822_0930.itch", "nasdaq_2016_first500b.itch"])
def test_jobs_on_a_tiny_file_print_their_summary(tmp_path, capsys, name):
    """`--jobs 2` on a file too small to time its parts' core (their core seconds round to 0,
    so the core rate is None) or without a single order event: exit 0 and the pass line with
    n/a for that rate (it once failed with a TypeError traceback while printing it)."""
    from lobreplay.cli.main import main
    from tests.conftest import REAL_ITCH
    assert main(["itch", "replay", str(REAL_ITCH / name), "-o", str(tmp_path / "o"), "--jobs", "2",
                 "--no-progress", "--allow-truncated"]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("pass 1 ")]
    assert len(line) == 1 and " M messages/s" in line[0] and "events/s" in line[0], out


@pytest.mark.parametrize("cpus, noted", [(2, True), (8, False)])
def test_jobs_on_a_gzip_file_note_that_every_part_inflates_it(tmp_path, capsys, monkeypatch, cpus, noted):
    """`--jobs 2` on a gzip day: every part inflates the whole file, so with no more CPUs than
    parts the command says once on stderr that one job is likely faster (and goes on)."""
    from lobreplay.reports import tables as reports
    from lobreplay.cli.main import main
    monkeypatch.setattr(reports, "usable_cpus", lambda: cpus)
    day = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample_day.itch.gz")
    assert main(["itch", "replay", day, "-o", str(tmp_path / "o"), "--jobs", "2", "--no-progress",
                 "--date", "2019-12-30", "--no-reports"]) == 0
    err = capsys.readouterr().err
    assert ("each of the 2 parts inflates the whole file" in err) is noted, err


@pytest.mark.parametrize("cpus, symbols, want, why", [(2, None, 2, "the CPUs this process may use"),
                                                     (1, None, 1, "the CPUs this process may use"),
                                                     (64, "AAPL,AAXJ", 2, "the books to replay")])
def test_jobs_are_capped_at_the_cpus_and_the_books(tmp_path, capsys, monkeypatch, cpus, symbols, want, why):
    """`--jobs 1000` started 1,000 processes (the out-of-memory killer ended them): at most
    the usable CPUs and the books, with a note on stderr and in the summary (5 asked here: safe to
    run on a tree without the cap)."""
    from lobreplay.reports import tables as reports
    from lobreplay.cli.main import main
    from lobreplay.itch import parallel
    from tests.conftest import REAL_ITCH
    started = []
    monkeypatch.setattr(parallel, "usable_cpus", lambda: cpus)
    monkeypatch.setattr(reports, "usable_cpus", lambda: cpus)
    monkeypatch.setattr(parallel, "split_locates", lambda m, jobs: (started.append(jobs), split_locates(m, jobs))[1])
    cap = str(REAL_ITCH / "nasdaq_20230822_0930_moldudp64.pcap")
    out = tmp_path / "o"
    assert main(["itch", "replay", cap, "-o", str(out), "--jobs", "5", "--no-progress"]
                + (["--symbols", symbols] if symbols else [])) == 0
    err = capsys.readouterr().err
    assert f"--jobs 5 capped at {want}: {why}" in err
    s = json.loads((out / "summary.json").read_text())
    assert (s["status"], s["jobs"], s["jobs_asked"]) == ("ok", want, 5)
    assert any(f"capped at {want}" in n for n in s["notes"])
    assert started == ([want] if want > 1 else [])
    if symbols:
        assert s["books"] == 2


def test_a_failing_part_fails_the_replay_cleanly(tmp_path):
    bad = tmp_path / "bad.itch"
    bad.write_bytes(b"\x00\x0cS" + b"\x00" * 10 + b"\x00\x24A")  # a truncated add after a system event
    from lobreplay.errors import InputError
    with pytest.raises(InputError, match="truncated"):
        replay_itch_jobs(str(bad), str(tmp_path / "o"), ReplayConfig(), 2)
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["status"] == "failed" and "truncated" in s["error"]
    # where it stopped and what it read, as a one-process replay's failed summary says
    assert s["stopped_at"] == {"stage": "pass 1"} and s["source"] == {"source_file": "bad.itch",
                                                                         "source_size": str(bad.stat().st_size)}
    assert not list((tmp_path / "o").glob(".part-*"))


@pytest.mark.parametrize("jobs", [2, 3, 4])
def test_the_split_gives_every_locate_one_part_balanced_by_messages(jobs):
    rng = np.random.default_rng(jobs)
    messages = np.zeros(65536, np.int64)
    locs = rng.choice(np.arange(1, 65536), 1000, replace=False)
    messages[locs] = (rng.zipf(1.3, 1000) * 100).clip(max=200_000)  # a few heavy symbols, many light
    messages[0] = 7
    owner = split_locates(messages, jobs)
    assert owner.shape == (65536,) and owner.min() >= 0 and owner.max() < jobs  # every locate in exactly one part
    assert owner[0] == 0  # the system-wide messages
    none = np.flatnonzero(messages == 0)
    assert (owner[none] == none % jobs).all()
    load = np.bincount(owner, weights=messages, minlength=jobs)
    assert load.sum() == messages.sum()
    assert load.max() - load.min() <= messages[1:].max()  # largest first, to the lightest part
    assert load.max() <= max(messages.sum() / jobs * 1.01, messages.max())
    assert (split_locates(messages, jobs) == owner).all()  # the same counts, the same split
    even = np.zeros(65536, np.int64)
    even[1:9] = [5, 5, 4, 4, 3, 3, 1, 1]
    assert np.bincount(split_locates(even, 2), weights=even, minlength=2).tolist() == [13, 13]
