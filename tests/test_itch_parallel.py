"""`--jobs N` shares the symbols out over processes; the merged reports are the
same as one process's: every table, row for row (latency: the same counts; the
times themselves differ run to run), and the same summary counts."""
import json

import pandas as pd
import pytest

from lobreplay.itch.faults import inject
from lobreplay.itch.parallel import replay_itch_jobs
from lobreplay.itch.replay import ReplayConfig


def _frame(path):
    df = pd.read_parquet(path)
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(str)
    return df.reset_index(drop=True)


@pytest.mark.parametrize("jobs", [2, 3])
def test_jobs_give_the_same_reports_as_one_process(synthetic_day, tmp_path, jobs):
    day = tmp_path / "20191230.fault.itch"
    inject("drop_final_delete", synthetic_day, day, seed=2)  # some desync and residual rows too
    cfg = ReplayConfig(depth_levels=3, depth_every_ns=60 * 10**9)
    one = replay_itch_jobs(str(day), str(tmp_path / "one"), cfg, 1)
    many = replay_itch_jobs(str(day), str(tmp_path / "many"), cfg, jobs)
    names = sorted(p.name for p in (tmp_path / "one").glob("*.parquet"))
    assert names == sorted(p.name for p in (tmp_path / "many").glob("*.parquet"))
    assert {"desyncs.parquet", "executions.parquet", "bbo.parquet", "depth.parquet", "symbols.parquet",
            "latency.parquet", "status_S_system_event.parquet"} <= set(names)
    for name in names:
        a, b = _frame(tmp_path / "one" / name), _frame(tmp_path / "many" / name)
        if name == "latency.parquet":
            keep = ["scope", "locate", "kind", "count"]
            a, b = a[keep], b[keep]
        if name == "latency_histograms.parquet":  # times differ run to run; the counts per kind do not
            a, b = a.groupby("kind")["count"].sum(), b.groupby("kind")["count"].sum()
            pd.testing.assert_series_equal(a, b, obj=name)
            continue
        pd.testing.assert_frame_equal(a, b, obj=name)
    assert len(_frame(tmp_path / "one" / "desyncs.parquet")) >= 1
    for key in ("messages", "books", "book_levels", "book_capacity", "events", "executions_in_feed", "desyncs",
                "desyncs_by_cause", "residual_orders", "session_complete"):
        assert one[key] == many[key], key
    rows = {k: v for k, v in one["report_rows"].items() if k != "latency_histograms"}  # buckets hit vary
    assert rows == {k: v for k, v in many["report_rows"].items() if k != "latency_histograms"}
    assert many["jobs"] == jobs
    assert json.loads((tmp_path / "many" / "summary.json").read_text())["status"] == "ok"
    assert not list((tmp_path / "many").glob(".part-*"))


def test_a_failing_part_fails_the_replay_cleanly(tmp_path):
    bad = tmp_path / "bad.itch"
    bad.write_bytes(b"\x00\x0cS" + b"\x00" * 10 + b"\x00\x24A")  # a truncated add after a system event
    from lobreplay.errors import InputError
    with pytest.raises(InputError, match="truncated"):
        replay_itch_jobs(str(bad), str(tmp_path / "o"), ReplayConfig(), 2)
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["status"] == "failed" and "truncated" in s["error"]
    assert not list((tmp_path / "o").glob(".part-*"))
