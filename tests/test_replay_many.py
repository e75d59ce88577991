"""`replay-many`: many ITCH days / .lobc captures on dask.distributed (a
LocalCluster of worker processes) into one hive-partitioned dataset per report
(lobreplay.replay.many). The dataset holds the same rows as the single-file replays;
done days are skipped; a bad file fails alone; a kill during publishing is
finished by the next run."""
from __future__ import annotations

import json
import logging
import os
import shutil
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.dataset as pads
import pytest

pytest.importorskip("distributed")

from lobreplay.replay import many# noqa: E402
from lobreplay.cli.main import main  # noqa: E402
from lobreplay.errors import InputError, LobError  # noqa: E402
from lobreplay.itch.replay import ReplayConfig, replay_itch  # noqa: E402
from lobreplay.testing.itch_synth import generate_day  # noqa: E402
from lobreplay.l2.replay import L2ReplayConfig, replay_lobc  # noqa: E402
from tests.test_l2replay import synth_stream, write_lobc  # noqa: E402

DAYS = {"12302019.NASDAQ_ITCH50": "2019-12-30", "12312019.NASDAQ_ITCH50.gz": "2019-12-31",
        "01022020.NASDAQ_ITCH50": "2020-01-02"}
BAD_DAY = "01032020.NASDAQ_ITCH50"  # truncated in the middle of a message


@pytest.fixture(scope="module")
def itch_days(tmp_path_factory):
    d = tmp_path_factory.mktemp("itch")
    truth = {}
    for i, (name, date) in enumerate(DAYS.items()):
        truth[name] = generate_day(d / name, n_messages=15_000, n_symbols=6, seed=20 + i, date=date,
                                   gzip=name.endswith(".gz"))
    generate_day(d / "whole.itch", n_messages=15_000, n_symbols=6, seed=30, date="2020-01-03")
    raw = (d / "whole.itch").read_bytes()
    (d / BAD_DAY).write_bytes(raw[:len(raw) // 2 + 5])
    return d, truth


@pytest.fixture(scope="module")
def scheduler():
    """A LocalCluster of 2 worker processes, 1 thread each, started by the test."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR) as c:
        yield c.scheduler_address


# ---------------------------------------------------------------- comparing with single-file replays

def _norm(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c in df.columns:
        if isinstance(df[c].dtype, pd.CategoricalDtype) or c in ("date", "symbol"):
            df[c] = [None if (v is None or v != v or v == "") else str(v) for v in df[c].astype(object)]
            df[c] = df[c].astype(object)
    return df


def _expected(single: dict[str, Path], kind: str) -> pd.DataFrame:
    parts = []
    for date, d in sorted(single.items()):
        p = d / f"{kind}.parquet"
        if p.exists():
            t = pd.read_parquet(p)
            t["date"] = date
            parts.append(t)
    return _norm(pd.concat(parts, ignore_index=True))


def _actual(dataset: Path, kind: str) -> pd.DataFrame:
    return _norm(pads.dataset(dataset / kind, partitioning="hive").to_table().to_pandas())


def assert_same_rows(dataset: Path, single: dict[str, Path], by_symbol) -> dict[str, int]:
    """Per report: the dataset's rows = the single replays' rows (the date added, the
    symbol from the path), in the replay's order within each date and symbol."""
    kinds = sorted({p.stem for d in single.values() for p in d.glob("*.parquet")})
    assert sorted(p.name for p in dataset.iterdir() if not p.name.startswith("_")) == kinds
    rows = {}
    for kind in kinds:
        want, got = _expected(single, kind), _actual(dataset, kind)
        rows[kind] = len(got)
        if not len(want):  # no rows on any day: empty files, the schema without the symbol
            assert not len(got) and set(got.columns) == set(want.columns) - {"symbol"}, kind
            continue
        keys = ["date", "symbol"] if kind in by_symbol else ["date"]
        want = want.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)
        got = got.sort_values(keys, kind="stable", na_position="last").reset_index(drop=True)[list(want.columns)]
        if kind == "latency":  # the times differ run to run; the counts do not
            want, got = (x[["date", "scope", "instrument", "kind", "count"]] for x in (want, got))
        if kind == "latency_histograms":
            want, got = (x.groupby(["date", "kind"])["count"].sum() for x in (want, got))
            pd.testing.assert_series_equal(got, want, obj=kind)
        else:
            pd.testing.assert_frame_equal(got, want, obj=kind)
    return rows


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_ino)
            for p in root.rglob("*") if p.is_file() and p.name != "_lock"}


# ---------------------------------------------------------------- ITCH

def test_itch_days_via_a_scheduler_address_equal_the_single_day_replays_and_resume(itch_days, scheduler,
                                                                                  tmp_path, capsys):
    src, truth = itch_days
    files = [str(src / n) for n in DAYS]
    out = tmp_path / "ds"
    argv = ["itch", "replay-many", *files, "-o", str(out), "--scheduler", scheduler, "--depth", "2",
            "--every", "60s"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "3 days: 3 done, 0 skipped (already done), 0 failed" in text
    assert f"on the scheduler at {scheduler} (2 workers)" in text

    cfg = ReplayConfig(depth_levels=2, depth_every_ns=60 * 10**9)
    single = {}
    for name, date in DAYS.items():
        single[date] = tmp_path / "single" / date
        replay_itch(str(src / name), str(single[date]), cfg)
    rows = assert_same_rows(out, single, many.FORMATS["itch"].by_symbol)
    for kind in ("executions", "bbo", "depth", "symbols", "status_S_system_event"):
        assert rows[kind] > 0, kind
    # real values: the feed's executions per day are the generator's, every symbol is a partition
    ex = pd.read_parquet(out / "executions")
    feed = ex[ex["source"] == "feed"].groupby("date", observed=True).size()
    for name, date in DAYS.items():
        t = truth[name]
        assert feed[date] == sum(t.counts.get(k, 0) for k in "ECPQ")
        got = {p.name[len("symbol="):] for p in (out / "executions" / f"date={date}").iterdir()}
        assert got <= set(t.symbols.values()) and len(got) >= 3
        done = json.loads((out / "_days" / date / "_SUCCESS").read_text())
        assert done["source"]["source_file"] == name and done["report_rows"]["executions"] == (
            ex["date"] == date).sum()
        assert json.loads((out / "_days" / date / "summary.json").read_text())["status"] == "ok"
    assert not (out / "_failures").exists() and not os.listdir(out / "_staging")

    # a re-run skips every day and rewrites nothing
    before = _files(out)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "skipped 3 days already done: 2019-12-30, 2019-12-31, 2020-01-02" in text
    assert "3 days: 0 done, 3 skipped (already done), 0 failed" in text
    assert "replaying" not in text
    assert _files(out) == before
    # ... and refuses other options for the same dataset
    assert main(argv[:-4]) == 1
    assert "other options" in capsys.readouterr().err


def test_a_truncated_day_fails_alone_and_the_cli_prints_no_traceback(itch_days, tmp_path):
    """The whole command as a user runs it, with its own LocalCluster (--workers 2)."""
    src, _ = itch_days
    files = [str(src / n) for n in list(DAYS)[:2]] + [str(src / BAD_DAY)]
    out = tmp_path / "ds"
    p = subprocess.run([sys.executable, "-m", "lobreplay", "itch", "replay-many", *files, "-o", str(out),
                        "--workers", "2", "--reports", "executions,bbo"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stdout + p.stderr, p.stderr
    assert "3 days: 2 done, 0 skipped (already done), 1 failed" in p.stdout
    assert "on a local cluster of 2 worker processes" in p.stdout
    # the single-day replay's own error, with its file and offset
    with pytest.raises(InputError) as e:
        replay_itch(str(src / BAD_DAY), str(tmp_path / "single"))
    offset = int(re.search(r"at byte ([\d,]+)", str(e.value))[1].replace(",", ""))
    rec = json.loads((out / "_failures" / "2020-01-03.json").read_text())
    assert rec["file"] == str(src / BAD_DAY) and rec["offset"] == offset and rec["message"] == str(e.value)
    assert rec["error"] == "InputError" and "truncated" in rec["message"]
    assert 0 < (src / BAD_DAY).stat().st_size - offset < 64
    assert f"failed: 2020-01-03: {e.value}" in p.stdout
    # the good days are published, the bad one nowhere
    for date in ("2019-12-30", "2019-12-31"):
        assert (out / "_days" / date / "_SUCCESS").exists()
    assert not (out / "_days" / "2020-01-03").exists()
    assert sorted(os.listdir(out / "executions")) == ["date=2019-12-30", "date=2019-12-31"]
    assert sorted(os.listdir(out / "bbo")) == ["date=2019-12-30", "date=2019-12-31"]
    assert not os.listdir(out / "_staging")


def test_a_failed_day_is_retried_and_its_record_goes(itch_days, scheduler, tmp_path):
    src, _ = itch_days
    work = tmp_path / "in"
    work.mkdir()
    (work / "12302019.NASDAQ_ITCH50").write_bytes((src / "12302019.NASDAQ_ITCH50").read_bytes())
    (work / BAD_DAY).write_bytes((src / BAD_DAY).read_bytes())
    files = [str(work / "12302019.NASDAQ_ITCH50"), str(work / BAD_DAY)]
    cfg = ReplayConfig(reports=("executions",), status_tables=False)
    out = tmp_path / "ds"
    lines: list[str] = []
    r = many.run_many("itch", files, str(out), cfg, scheduler=scheduler, echo=lines.append)
    assert [x["key"] for x in r["ok"]] == ["2019-12-30"] and [x["key"] for x in r["failed"]] == ["2020-01-03"]
    assert (out / "_failures" / "2020-01-03.json").exists()
    (work / BAD_DAY).write_bytes((src / "whole.itch").read_bytes())  # the file fixed
    r = many.run_many("itch", files, str(out), cfg, scheduler=scheduler, echo=lines.append)
    assert r["skipped"] == ["2019-12-30"] and [x["key"] for x in r["ok"]] == ["2020-01-03"] and not r["failed"]
    assert not (out / "_failures" / "2020-01-03.json").exists()
    # another file for a day that is done is refused, not skipped (and nothing is replayed)
    r = many.run_many("itch", [str(src / "whole.itch")], str(out), cfg, dates={"whole.itch": "2019-12-30"},
                      echo=lines.append)
    assert not r["skipped"] and not r["ok"] and r["where"] is None
    assert "2019-12-30 is already in the dataset, from another file (12302019.NASDAQ_ITCH50" in r["failed"][0][
        "message"]
    single = tmp_path / "single"
    replay_itch(str(work / BAD_DAY), str(single), cfg)
    got = pd.read_parquet(out / "executions", filters=[("date", "=", "2020-01-03")])
    assert len(got) == len(pd.read_parquet(single / "executions.parquet")) > 0


# ---------------------------------------------------------------- .lobc

def test_lobc_captures_equal_the_single_replays(scheduler, tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    for name, seed in (("spot-a.lobc", 61), ("spot-b.lobc", 62), ("spot-20240105.lobc", 63)):
        recs, _ = synth_stream(seed, n_messages=300, n_symbols=3, ticker_error=0.02)
        write_lobc(src / name, recs)
    (src / "broken.lobc").write_bytes(b"PK\x03\x04" + b"\0" * 600)
    files = sorted(str(p) for p in src.iterdir())
    out = tmp_path / "ds"
    assert main(["lobc", "replay-many", *files, "-o", str(out), "--scheduler", scheduler,
                 "--depth", "3", "--every", "100us"]) == 1
    text = capsys.readouterr().out
    assert "4 captures: 3 done, 0 skipped (already done), 1 failed" in text
    rec = json.loads((out / "_failures" / "broken.json").read_text())
    assert rec["offset"] == 0 and "not a .lobc file" in rec["message"] and rec["file"] == files[0]

    # the capture's date: from the name, else the UTC date of the first record (synth_stream's:
    # 2023-11-14); its event rows go under their own UTC date (here all of them 2023-11-14)
    dates = {"spot-a": "2023-11-14", "spot-b": "2023-11-14", "spot-20240105": "2024-01-05"}
    assert sorted(os.listdir(out / "bbo")) == ["date=2023-11-14"]
    assert sorted(os.listdir(out / "latency")) == ["date=2023-11-14", "date=2024-01-05"]
    assert sorted(os.listdir(out / "bbo" / "date=2023-11-14" / "symbol=AAA")) == [
        "part-spot-20240105.parquet", "part-spot-a.parquet", "part-spot-b.parquet"]
    by_symbol = many.FORMATS["lobc"].by_symbol
    for name, date in dates.items():
        single = tmp_path / "single" / name
        cfg = L2ReplayConfig(depth_levels=3, depth_every_ns=100_000)
        assert replay_lobc(src / f"{name}.lobc", str(single), cfg)["status"] == "ok"
        for kind in ("bbo", "desyncs", "trades", "ticker_mismatches", "latency", "depth"):
            want = pd.read_parquet(single / f"{kind}.parquet")
            want["date"] = (_utc_dates(want["receive_ns"]) if kind in by_symbol and len(want) else date)
            want = _norm(want)
            got = _rows_of(out / kind, name)
            if not len(want):
                assert not len(got) and "symbol" not in got, (kind, name)
                continue
            keys = ["symbol"] if kind in by_symbol else []
            if keys:
                want = want.sort_values(keys, kind="stable")
                got = got.sort_values(keys, kind="stable")
            want, got = want.reset_index(drop=True), got.reset_index(drop=True)[list(want.columns)]
            if kind == "latency":
                want, got = (x[["date", "scope", "kind", "count"]] for x in (want, got))
            pd.testing.assert_frame_equal(got, want, obj=f"{kind} {name}")
    # and the whole dataset reads as one table per report
    for kind in ("bbo", "trades", "depth"):
        whole = _actual(out, kind)
        assert len(whole) == sum(len(_rows_of(out / kind, n)) for n in dates) > 50
        assert set(whole["symbol"]) == {"AAA", "BBB", "CCC"} and set(whole["date"]) == {"2023-11-14"}


def _utc_dates(recv_ns) -> list[str]:
    return pd.to_datetime(recv_ns, unit="ns", utc=True).dt.strftime("%Y-%m-%d").tolist()


def test_a_capture_past_midnight_puts_each_row_under_its_own_date(tmp_path):
    """Event rows under the UTC date of their recv_ns; a capture replayed again leaves no
    file of its earlier replay under a date it no longer has (--date or not)."""
    recs, _ = synth_stream(64, n_messages=300, n_symbols=2)
    half = len(recs) // 2
    recs["recv_ns"][half:] += 86_400 * 10**9  # the second half a day later: 2023-11-15
    src = tmp_path / "cap.lobc"
    write_lobc(src, recs)
    out = tmp_path / "ds"
    cfg = L2ReplayConfig()
    many.open_dataset(str(out), "lobc", many.FORMATS["lobc"].options(cfg))
    [task] = many.plan("lobc", [str(src)], str(out), cfg)
    assert many.run_task(task)["status"] == "ok"
    assert sorted(os.listdir(out / "bbo")) == ["date=2023-11-14", "date=2023-11-15"]
    assert sorted(os.listdir(out / "latency")) == ["date=2023-11-14"]  # the capture's own date
    single = tmp_path / "single"
    replay_lobc(src, str(single), cfg)
    for kind in ("bbo", "trades"):
        want = pd.read_parquet(single / f"{kind}.parquet")
        got = _rows_of(out / kind, "cap")
        assert len(got) == len(want) > 10
        assert got["date"].tolist() == _utc_dates(got["receive_ns"])
        assert sorted(set(got["date"])) == ["2023-11-14", "2023-11-15"]
    success = json.loads((out / "_days" / "cap" / "_SUCCESS").read_text())
    assert success["date"] == "2023-11-14" and success["dates"] == ["2023-11-14", "2023-11-15"]
    # the same key again, from a capture of the first day only: nothing of it is left on the second
    shutil.rmtree(out / "_days" / "cap")
    write_lobc(src, recs[:half])
    assert many.run_task(task)["status"] == "ok"
    assert not list((out / "bbo").glob("date=2023-11-15/*/part-cap.parquet"))
    replay_lobc(src, str(tmp_path / "single-1"), cfg)
    got = _rows_of(out / "bbo", "cap")
    assert len(got) == len(pd.read_parquet(tmp_path / "single-1" / "bbo.parquet")) > 10
    assert set(got["date"]) == {"2023-11-14"}


def _rows_of(root: Path, key: str) -> pd.DataFrame:
    """One key's rows of a report, the date and symbol read from the paths."""
    parts = []
    for p in sorted(root.rglob(f"part-{key}.parquet")):
        t = pd.read_parquet(p)
        for seg in p.relative_to(root).parts[:-1]:
            k, _, v = seg.partition("=")
            t[k] = None if v == many.NULL_PARTITION else v
        parts.append(t)
    return _norm(pd.concat(parts, ignore_index=True))


# ---------------------------------------------------------------- publishing, partitioning, the plan

def _one_day_task(src: Path, dataset: Path, cfg=None, max_rows=many.DEFAULT_MAX_ROWS):
    cfg = cfg or ReplayConfig()
    many.open_dataset(str(dataset), "itch", many.FORMATS["itch"].options(cfg))
    return many.plan("itch", [str(src)], str(dataset), cfg, max_rows=max_rows)[0]


def test_a_kill_while_publishing_is_finished_by_the_next_run(itch_days, tmp_path, monkeypatch):
    src, _ = itch_days
    day = src / "12302019.NASDAQ_ITCH50"
    clean = tmp_path / "clean"
    assert many.run_task(_one_day_task(day, clean))["status"] == "ok"

    out = tmp_path / "killed"
    task = _one_day_task(day, out)
    real, calls = many._move, []

    def dies_after_one(a, b):  # the process "dies" after the first report is in place
        calls.append(a)
        if len(calls) > 1:
            raise KeyboardInterrupt
        real(a, b)

    monkeypatch.setattr(many, "_move", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        many.run_task(task)
    monkeypatch.setattr(many, "_move", real)
    assert not many.done(str(out), task.key)
    staged = os.listdir(out / "_staging")
    assert len(staged) == 1 and (out / "_staging" / staged[0] / many.READY).exists()
    (out / "_staging" / "2019-12-31.deadbeef").mkdir()  # a replay killed before its tree was complete
    r = many.recover(str(out))
    assert r == {"published": ["2019-12-30"], "removed": ["2019-12-31"]}
    assert many.done(str(out), "2019-12-30") and not os.listdir(out / "_staging")
    strip = {"_lobreplay.json"}
    assert sorted(k for k in _files(out) if k not in strip) == sorted(k for k in _files(clean) if k not in strip)
    for kind in ("executions", "bbo"):
        pd.testing.assert_frame_equal(pd.read_parquet(out / kind), pd.read_parquet(clean / kind))


def test_large_reports_are_split_through_buckets_with_the_same_result(itch_days, tmp_path):
    src, _ = itch_days
    raw = tmp_path / "raw"
    replay_itch(str(src / "12302019.NASDAQ_ITCH50"), str(raw), ReplayConfig(reports=("bbo", "executions")))
    fmt = many.FORMATS["itch"]
    for name, max_rows in (("memory", 10**9), ("buckets", 300)):
        r = tmp_path / f"raw-{name}"
        r.mkdir()
        for p in ("bbo.parquet", "executions.parquet"):
            (r / p).write_bytes((raw / p).read_bytes())
        many.stage_tree(str(r), str(tmp_path / name), fmt, "k", "2019-12-30", max_rows)
    n = len(pd.read_parquet(raw / "bbo.parquet"))
    assert n > 300 * 4
    for kind in ("bbo", "executions"):
        a = _files(tmp_path / "memory" / kind)
        assert sorted(a) == sorted(_files(tmp_path / "buckets" / kind))
        assert all(k.endswith("/part-k.parquet") for k in a)
        for rel in a:
            pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "memory" / kind / rel),
                                          pd.read_parquet(tmp_path / "buckets" / kind / rel))
    assert not list((tmp_path / "buckets").rglob("*.buckets"))


def test_plan_dates_keys_and_refusals(itch_days, tmp_path):
    src, _ = itch_days
    cfg = ReplayConfig()
    named = src / "12302019.NASDAQ_ITCH50"
    t = many.plan("itch", [str(named)], str(tmp_path / "d"), cfg)
    assert (t[0].key, t[0].date, t[0].path) == ("2019-12-30", "2019-12-30", str(named))
    plain = src / "whole.itch"
    with pytest.raises(InputError, match="no date in the name of .*whole.itch.*--date FILE=YYYY-MM-DD"):
        many.plan("itch", [str(plain)], str(tmp_path / "d"), cfg)
    t = many.plan("itch", [str(plain)], str(tmp_path / "d"), cfg, many.parse_dates(["whole.itch=2020-01-03"]))
    assert t[0].key == "2020-01-03"
    with pytest.raises(InputError, match="same day"):
        many.plan("itch", [str(named), str(plain)], str(tmp_path / "d"), cfg,
                  many.parse_dates(["whole.itch=2019-12-30"]))
    with pytest.raises(InputError, match="expected a date"):
        many.parse_dates(["whole.itch=30/12/2019"])
    with pytest.raises(InputError, match="not among the inputs"):
        many.plan("itch", [str(named)], str(tmp_path / "d"), cfg, many.parse_dates(["other=2019-12-30"]))
    with pytest.raises(InputError, match="no such file"):
        many.plan("itch", [str(src / "missing.itch")], str(tmp_path / "d"), cfg)
    lob = many.plan("lobc", [str(named)], str(tmp_path / "e"), L2ReplayConfig())
    assert lob[0].key == "12302019.NASDAQ_ITCH50" and lob[0].date is None
    other = tmp_path / "notes"
    other.mkdir()
    (other / "x.txt").write_text("mine")
    with pytest.raises(InputError, match="not a lobreplay dataset"):
        many.open_dataset(str(other), "itch", {})
    many.open_dataset(str(tmp_path / "f"), "itch", {"a": 1})
    with pytest.raises(InputError, match="holds a itch dataset, not lobc"):
        many.open_dataset(str(tmp_path / "f"), "lobc", {"a": 1})
    # an option the manifest does not name (a dataset from a version without it) had its
    # default: a resume with the default goes on, with another value it is refused
    many.open_dataset(str(tmp_path / "f"), "itch", {"a": 1, "b": 0}, {"a": 5, "b": 0})
    with pytest.raises(InputError, match=r"b: 0 there, 2 now"):
        many.open_dataset(str(tmp_path / "f"), "itch", {"a": 1, "b": 2}, {"a": 5, "b": 0})
    with pytest.raises(InputError, match=r"b: None there, 0 now"):
        many.open_dataset(str(tmp_path / "f"), "itch", {"a": 1, "b": 0})


def test_workers_must_see_the_dataset(scheduler, tmp_path):
    from distributed import Client
    with Client(scheduler) as client:
        many.open_dataset(str(tmp_path / "seen"), "itch", {})
        assert many.check_workers(client, str(tmp_path / "seen")) == 2
        with pytest.raises(InputError, match="does not see .*unseen.*same path"):
            many.check_workers(client, str(tmp_path / "unseen"))


def test_one_run_at_a_time_and_a_clear_error_without_distributed(tmp_path, monkeypatch):
    many.open_dataset(str(tmp_path), "itch", {})
    with many._lock(str(tmp_path)):
        with pytest.raises(InputError, match="another replay-many"):
            with many._lock(str(tmp_path)):
                pass
    with many._lock(str(tmp_path)):  # released
        pass
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(LobError, match=r"pip install 'lobreplay\[cluster\]'"):
        with many.cluster():
            pass


def test_local_cluster_arguments_are_checked_before_it_starts(monkeypatch):
    """--workers 0 is refused (it meant 'one per CPU'), and a --memory-limit dask cannot read
    is one error naming it (it was dask's KeyError traceback), before any process starts."""
    import distributed

    started = []
    monkeypatch.setattr(distributed, "LocalCluster", lambda *a, **k: started.append(k))
    with pytest.raises(InputError, match=r"--workers: expected a number of processes >= 1, got 0"):
        with many.cluster(workers=0):
            pass
    for bad in ("lots", "4 parsecs", "-"):
        with pytest.raises(InputError, match=rf"--memory-limit: expected bytes such as 4GB .*got '{bad}'"):
            with many.cluster(workers=1, memory_limit=bad):
                pass
    with pytest.raises(InputError, match="--workers starts a local cluster"):
        with many.cluster(scheduler="tcp://127.0.0.1:1", workers=0):
            pass
    assert started == []


def test_offsets_are_taken_from_the_messages():
    task = many.Task("itch", "k", "/x", "/d", None, None)
    cases = {"f: truncated: the message at byte 1,234 needs 36 bytes": 1234,
             "f: offset 0: not a .lobc file": 0,
             "f: corrupt gzip data: bad (in the piece inflated after decompressed byte 65,536; 9,000 of the "
             "file's 20,000 compressed bytes read)": 65536,
             "f: the gzip stream (20,000 bytes) ends before its end-of-stream marker, in the piece inflated after "
             "decompressed byte 131,072: a file cut short": 131072,
             "f: no such symbol(s) in this file: ZZZ": None}
    for msg, want in cases.items():
        assert many.error_record(task, InputError(msg))["offset"] == want
    try:
        raise ValueError("bug")
    except ValueError as e:
        rec = many.error_record(task, e)
    assert rec["error"] == "ValueError" and "Traceback" in rec["traceback"] and "ValueError: bug" in rec["traceback"]
