"""Many files on dask.distributed: `lobreplay itch replay-many` and
`lobreplay lobc replay-many` (docs/cluster.md).

One task per input file (an ITCH day, a .lobc capture) runs the single-file
replay (lobreplay.itch.replay.replay_itch, lobreplay.l2.replay.replay_lobc)
on a worker into a staging directory, splits its reports into hive partitions
and publishes them. The dataset:

    DATASET/<report>/date=<YYYY-MM-DD>/symbol=<SYM>/part-<key>.parquet
                                       (the event tables: executions, bbo, desyncs, ...)
    DATASET/<report>/date=<YYYY-MM-DD>/part-<key>.parquet
                                       (the others: symbols, latency, status tables)
    DATASET/_days/<key>/               summary.json (+ .hgrm files); _SUCCESS, written last
    DATASET/_failures/<key>.json       the error of a file that failed (gone once it succeeds)
    DATASET/_staging/                  work in progress
    DATASET/_lobreplay.json            the format and the replay options of the dataset

<key> is the day (YYYY-MM-DD) of an ITCH file, and the file name of a .lobc
capture (several captures may share a date; a capture's event rows go under the
UTC date of their receive_ns, so one that runs past midnight spans several dates).
Readers ignore the names that begin with '_' or '.', so
pyarrow.dataset.dataset("DATASET/executions", partitioning="hive") and
pandas.read_parquet see the published rows only.

Publishing: the task stages the whole partitioned tree, writes _READY (the
tree is complete), then renames it into place -- one directory rename per
report while its date directory is new, else file by file -- and writes
_days/<key>/_SUCCESS last. A run killed before _READY leaves only staging,
which the next run removes; a run killed during the renames leaves a _READY
staging directory, which the next run finishes publishing before it starts.
A key with _SUCCESS is skipped. One run at a time per dataset (a lock file).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import json
import logging
import os
import re
import shutil
import time
import traceback
import uuid
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lobreplay import __version__
from lobreplay.errors import InputError, LobError
from lobreplay.reports.tables import name_part, parquet_options, usable_cpus, write_json

MANIFEST = "_lobreplay.json"
LOCK = "_lock"
DAYS = "_days"
FAILURES = "_failures"
STAGING = "_staging"
READY = "_READY"
SUCCESS = "_SUCCESS"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # pyarrow's name for a null partition value
DEFAULT_MAX_ROWS = 2_000_000  # rows of one report partitioned in memory at once; more go through buckets


# ---------------------------------------------------------------- the two formats

@dataclass(frozen=True)
class Format:
    name: str                       # itch | lobc
    unit: str                       # what one file is: day | capture
    by_symbol: frozenset            # reports partitioned by date and symbol (the rest by date)
    row_time: str | None            # by_symbol rows: the column (ns since the epoch, UTC) whose date
    #                                 partitions each row (None: every row under the file's date)
    replay: Callable                # (task, out_dir) -> summary: the single-file replay
    find_date: Callable             # (path) -> YYYY-MM-DD | None, on the worker when the plan has none
    describe: Callable              # (summary) -> one line
    options: Callable               # (config) -> the options that shape the dataset


def _itch_replay(task: "Task", out_dir: str) -> dict:
    from lobreplay.itch.replay import replay_itch
    cfg = dataclasses.replace(task.config, date=task.date, progress=False, part=None)
    return replay_itch(task.path, out_dir, cfg)


def _itch_date(path: str) -> str | None:
    from lobreplay.itch.replay import session_date
    d = session_date(path)
    return d.isoformat() if d else None


def _itch_describe(s: dict) -> str:
    line = f"{s['messages']:,} messages, {s['books']:,} books, {s['desyncs']:,} desyncs"
    if s.get("truncated"):
        line += f"; truncated at offset {s['truncated']['offset']:,}"
    return line


def _itch_options(cfg) -> dict:
    d = dataclasses.asdict(cfg)
    for k in ("date", "progress", "part", "chunk_bytes"):  # per file, or no effect on the rows
        d.pop(k, None)
    return d


def _lobc_replay(task: "Task", out_dir: str) -> dict:
    from lobreplay.l2.replay import replay_lobc
    return replay_lobc(task.path, out_dir, task.config)


def _lobc_date(path: str) -> str | None:
    """The date in the file name (YYYYMMDD), else the UTC date of its first record."""
    d = _itch_date(path)
    if d:
        return d
    from lobreplay.l2.lobc import iter_blocks
    first = next(iter(iter_blocks(path)), None)
    if first is None:
        return None
    return dt.datetime.fromtimestamp(first.recv_ns / 1e9, dt.timezone.utc).date().isoformat()


def _lobc_describe(s: dict) -> str:
    line = f"{s['records']:,} records, {len(s['books'])} books, {s['desyncs']:,} desyncs"
    damage = s.get("lobc", {}).get("damage")
    if damage:  # (--allow-corrupt read on across it)
        line += (f"; {len(damage)} damaged stretch(es) skipped ({sum(d['bytes'] for d in damage):,} bytes), every "
                 "book unsynced across each")
    torn = s.get("lobc", {}).get("torn")
    if torn:
        from lobreplay.l2.lobc import torn_text
        line += "; " + torn_text(torn)
    return line


def _lobc_options(cfg) -> dict:
    d = dataclasses.asdict(cfg)
    d.pop("chunk_records", None)
    return d


FORMATS = {
    "itch": Format("itch", "day", frozenset({"executions", "bbo", "desyncs", "depth"}), None,
                   _itch_replay, _itch_date, _itch_describe, _itch_options),
    "lobc": Format("lobc", "capture", frozenset({"bbo", "desyncs", "trades", "ticker_mismatches", "depth"}), "receive_ns",
                   _lobc_replay, _lobc_date, _lobc_describe, _lobc_options),
}


@dataclass(frozen=True)
class Task:
    fmt: str
    key: str          # names the file's partitions, markers and failure record
    path: str         # absolute: workers run elsewhere
    dataset: str      # absolute
    date: str | None  # None: the worker finds it (lobc: the first record's date)
    config: object    # ReplayConfig | L2ReplayConfig
    max_rows: int = DEFAULT_MAX_ROWS


# ---------------------------------------------------------------- the plan

def _key(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", text).lstrip("._") or "file"


def parse_dates(items: list[str] | None) -> dict[str, str]:
    """--date NAME=YYYY-MM-DD (repeated): file name or path -> date."""
    from lobreplay.itch.replay import given_date
    out = {}
    for item in items or []:
        name, sep, day = item.rpartition("=")
        if not sep or not name:
            raise InputError(f"--date: expected FILE=YYYY-MM-DD, got {item!r}")
        out[name] = given_date(day, f"--date {item}").isoformat()
    return out


def plan(fmt: str, files: list[str], dataset: str, config, dates: dict[str, str] | None = None,
         max_rows: int = DEFAULT_MAX_ROWS) -> list[Task]:
    """One task per file; refuses missing files, ITCH files without a date and
    two files with one key (two ITCH files of one day, two captures of one name)."""
    f = FORMATS[fmt]
    dates = dict(dates or {})
    tasks, by_key, undated = [], {}, []
    for given in files:
        path = os.path.abspath(given)
        if not os.path.isfile(path):
            raise InputError(f"{given}: {'a directory, not a file' if os.path.isdir(path) else 'no such file'}")
        day = next((dates.pop(n) for n in (given, path, os.path.basename(path)) if n in dates), None)
        if day is None and fmt == "itch":
            day = f.find_date(path)
            if day is None:
                undated.append(given)
                continue
        if fmt == "itch":
            key = day
        else:
            base = os.path.basename(path)
            key = _key(base[:-len(".lobc")] if base.endswith(".lobc") else base)
        if key in by_key:
            what = "day" if fmt == "itch" else "name"
            raise InputError(f"{by_key[key]} and {given} have the same {what} ({key}): "
                             "replay them into separate datasets")
        by_key[key] = given
        tasks.append(Task(fmt, key, path, os.path.abspath(dataset), day, config, max_rows))
    if undated:
        raise InputError(f"no date in the name of {', '.join(undated)} (expected MMDDYYYY.NASDAQ_ITCH50 or a "
                         "YYYYMMDD in the name): pass --date FILE=YYYY-MM-DD")
    if dates:
        raise InputError(f"--date names a file that is not among the inputs: {', '.join(dates)}")
    return tasks


# ---------------------------------------------------------------- the dataset on disk

def _part(key: str) -> str:
    return f"part-{key}.parquet"


def _value(v) -> str:
    """A hive partition directory value (pyarrow reads it back URI-decoded)."""
    return NULL_PARTITION if v is None or v == "" else name_part(v)


def done(dataset: str, key: str) -> bool:
    return os.path.exists(os.path.join(dataset, DAYS, key, SUCCESS))


def _read_json(path: str) -> dict:
    with open(path) as fh:
        return json.load(fh)


def _norm(obj):
    return json.loads(json.dumps(obj, default=str))


def open_dataset(dataset: str, fmt: str, options: dict, defaults: dict | None = None) -> None:
    """Create DATASET and its manifest, or check that an existing one was made
    with the same format and options (a resumed run must not mix days replayed
    differently). defaults: the options' default values, which an option the
    manifest does not name had (it was written by a version without it)."""
    try:
        os.makedirs(dataset, exist_ok=True)
    except OSError as e:
        raise InputError(f"{dataset}: cannot make the dataset directory: {e.strerror or e}") from None
    path = os.path.join(dataset, MANIFEST)
    want = {"format": fmt, "options": _norm(options)}
    if os.path.exists(path):
        have = _read_json(path)
        if have.get("format") != fmt:
            raise InputError(f"{dataset}: holds a {have.get('format')} dataset, not {fmt}: use another directory")
        have["options"] = {**_norm(defaults or {}), **have.get("options", {})}
        diff = sorted(k for k in set(want["options"]) | set(have["options"])
                      if want["options"].get(k) != have["options"].get(k))
        if diff:
            shown = "; ".join(f"{k}: {have.get('options', {}).get(k)!r} there, {want['options'].get(k)!r} now"
                              for k in diff)
            raise InputError(f"{dataset}: its days were replayed with other options ({shown}): "
                             "use another directory, or the same options")
        return
    for d in os.listdir(dataset):
        if not d.startswith(("_", ".")):
            raise InputError(f"{dataset}: not empty and not a lobreplay dataset (no {MANIFEST}): "
                             "use another directory")
    write_json(path, {**want, "lobreplay_version": __version__,
                      "layout": "<report>/date=<YYYY-MM-DD>[/symbol=<SYM>]/part-<key>.parquet"})


@contextmanager
def _lock(dataset: str):
    fh = open(os.path.join(dataset, LOCK), "a")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{dataset}: another replay-many is writing to it (it holds {LOCK})") from None
        yield
    finally:
        fh.close()


def recover(dataset: str) -> dict[str, list[str]]:
    """Finish what a killed run left: publish the staged trees that were complete
    (_READY), remove the others. Returns the keys of each."""
    out = {"published": [], "removed": []}
    root = os.path.join(dataset, STAGING)
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        stage = os.path.join(root, name)
        ready = os.path.join(stage, READY)
        key = _read_json(ready)["key"] if os.path.exists(ready) else None
        if key is not None and not done(dataset, key):
            publish(dataset, stage)
            out["published"].append(key)
        else:
            shutil.rmtree(stage, ignore_errors=True)
            out["removed"].append(name.rsplit(".", 1)[0])
    return out


def _move(src: str, dst: str) -> None:
    """Move a staged tree into place: the whole directory if dst is new, else entry by entry."""
    if not os.path.exists(dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        try:
            os.rename(src, dst)
            return
        except OSError:
            if not os.path.isdir(dst):  # another task created dst meanwhile: merge below
                raise
    if os.path.isdir(src):
        for name in sorted(os.listdir(src)):
            _move(os.path.join(src, name), os.path.join(dst, name))
        os.rmdir(src)
    else:
        os.replace(src, dst)


def publish(dataset: str, stage: str) -> None:
    """Publish a staged tree (stage/_READY lists it): drop this key's files of the
    same date that the new tree does not have (an earlier replay of the key),
    move the reports into place, then the _days/<key> files, then _SUCCESS."""
    ready = _read_json(os.path.join(stage, READY))
    key, date, files = ready["key"], ready["date"], set(ready["files"])
    # where an earlier replay of this key may have left files: its date, or for a format
    # whose rows carry their own dates (a capture past midnight), every date
    every_date = FORMATS[_read_json(os.path.join(dataset, MANIFEST))["format"]].row_time is not None
    tree = os.path.join(stage, "tree")
    for kind in sorted(os.listdir(dataset)):
        if kind.startswith(("_", ".")) or not os.path.isdir(os.path.join(dataset, kind)):
            continue
        days = sorted(os.listdir(os.path.join(dataset, kind))) if every_date else [f"date={_value(date)}"]
        for day in (os.path.join(dataset, kind, d) for d in days):
            if not os.path.isdir(day):
                continue
            for dirpath, _, names in os.walk(day):
                for n in names:
                    p = os.path.join(dirpath, n)
                    if n == _part(key) and os.path.relpath(p, dataset) not in files:
                        os.remove(p)
    if os.path.isdir(tree):
        for name in sorted(os.listdir(tree), key=lambda n: n == DAYS):  # reports first, _days last
            _move(os.path.join(tree, name), os.path.join(dataset, name))
    write_json(os.path.join(dataset, DAYS, key, SUCCESS), {
        "key": key, "date": date, "dates": sorted(set(ready.get("dates") or [date])), "file": ready["file"],
        "source": ready.get("source"),
        "report_rows": ready.get("report_rows"), "published_utc": dt.datetime.now(dt.timezone.utc).isoformat(),
        "lobreplay_version": __version__})
    fail = os.path.join(dataset, FAILURES, f"{key}.json")
    if os.path.exists(fail):
        os.remove(fail)
    shutil.rmtree(stage, ignore_errors=True)


# ---------------------------------------------------------------- partitioning one file's reports

def stage_tree(raw: str, tree: str, fmt: Format, key: str, date: str,
               max_rows: int = DEFAULT_MAX_ROWS) -> tuple[list[str], list[str]]:
    """The single-file replay's reports in raw/ as hive partitions under tree/
    (moved or rewritten; raw/ is emptied as it goes). Returns the files, relative to tree,
    and the dates they are under: `date` (the file's), and for a format with row_time the
    UTC date of every by-symbol row (a capture that runs past midnight spans several)."""
    dates = {date}
    for name in sorted(os.listdir(raw)):
        src = os.path.join(raw, name)
        kind, ext = os.path.splitext(name)
        if ext == ".parquet":
            if kind in fmt.by_symbol:
                dates |= _by_symbol(src, os.path.join(tree, kind), key, max_rows, date, fmt.row_time)
                os.remove(src)
            else:
                out = os.path.join(tree, kind, f"date={_value(date)}")
                os.makedirs(out, exist_ok=True)
                os.replace(src, os.path.join(out, _part(key)))
        else:  # summary.json, latency_*.hgrm
            out = os.path.join(tree, DAYS, key)
            os.makedirs(out, exist_ok=True)
            os.replace(src, os.path.join(out, name))
    return sorted(os.path.relpath(os.path.join(d, n), tree) for d, _, ns in os.walk(tree) for n in ns), sorted(dates)


def _by_symbol(src: str, out: str, key: str, max_rows: int, date: str, row_time: str | None = None) -> set[str]:
    """One file per date and symbol under out/ (date=D/symbol=S/), rows in the replay's
    order, the date and symbol in the path only; D is `date`, or with row_time each row's
    UTC date. Up to max_rows rows are split in memory; a larger table goes through hash
    buckets of about max_rows / 2 rows (Arrow IPC files beside out), each split in turn.
    Returns the dates written."""
    pf = pq.ParquetFile(src)
    meta = pf.schema_arrow.metadata
    n = pf.metadata.num_rows
    if n == 0:  # an empty file for the day keeps the schema readable (no symbol: no rows to give it one)
        day = os.path.join(out, f"date={_value(date)}")
        os.makedirs(day, exist_ok=True)
        empty = pf.schema_arrow.empty_table().drop_columns(["symbol"])
        pq.write_table(empty.replace_schema_metadata(meta), os.path.join(day, _part(key)),
                       **parquet_options(empty.schema))
        return {date}
    if n <= max_rows:
        return _write_groups(pf.read(), out, key, meta, date, row_time)
    dates = set()
    buckets = max(2, -(-2 * n // max_rows))
    spill = out + ".buckets"
    os.makedirs(spill, exist_ok=True)
    writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
    schema = None
    try:
        for batch in pf.iter_batches(batch_size=min(max_rows, 1 << 16)):
            t = pa.Table.from_batches([batch])
            t = t.set_column(t.schema.get_field_index("symbol"), "symbol", _strings(t["symbol"]))
            schema = t.schema
            enc = pc.dictionary_encode(t["symbol"]).combine_chunks()
            of_value = np.array([zlib.crc32(v.encode()) % buckets for v in enc.dictionary.to_pylist()] + [0],
                                np.int64)
            codes = enc.indices.fill_null(len(enc.dictionary)).to_numpy()
            row_bucket = of_value[codes]
            for b in np.unique(row_bucket).tolist():
                if b not in writers:
                    writers[b] = pa.ipc.new_stream(os.path.join(spill, f"{b}.arrows"), schema,
                                                   options=pa.ipc.IpcWriteOptions(compression="lz4"))
                writers[b].write_table(t.filter(pa.array(row_bucket == b)))
        for w in writers.values():
            w.close()
        writers = {}
        for name in sorted(os.listdir(spill)):
            with pa.memory_map(os.path.join(spill, name)) as source:
                dates |= _write_groups(pa.ipc.open_stream(source).read_all(), out, key, meta, date, row_time)
    finally:
        for w in writers.values():
            w.close()
        shutil.rmtree(spill, ignore_errors=True)
    return dates


def _strings(col) -> pa.ChunkedArray:
    return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col


DAY_NS = 86_400_000_000_000
EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def _write_groups(t: pa.Table, out: str, key: str, meta, date: str, row_time: str | None) -> set[str]:
    """t's rows under out/date=D/symbol=S/ (see _by_symbol); returns the dates written."""
    sym = _strings(t["symbol"])
    enc = pc.dictionary_encode(sym).combine_chunks()
    values = enc.dictionary.to_pylist()
    codes = enc.indices.fill_null(len(values)).to_numpy().astype(np.int64)
    if row_time is not None:
        days, day_of = np.unique(t[row_time].to_numpy() // DAY_NS, return_inverse=True)
        dates = [dt.date.fromordinal(EPOCH_ORDINAL + int(d)).isoformat() for d in days.tolist()]
    else:
        dates, day_of = [date], np.zeros(len(codes), np.int64)
    group = day_of.astype(np.int64) * (len(values) + 1) + codes
    order = np.argsort(group, kind="stable")  # within a date and symbol, the replay's order
    group = group[order]
    body = t.drop_columns(["symbol"]).take(pa.array(order)).replace_schema_metadata(meta)
    bounds = np.flatnonzero(np.diff(group)) + 1
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(group)]):
        day, c = divmod(int(group[lo]), len(values) + 1)
        d = os.path.join(out, f"date={_value(dates[day])}", f"symbol={_value(values[c] if c < len(values) else None)}")
        os.makedirs(d, exist_ok=True)
        pq.write_table(body.slice(lo, hi - lo), os.path.join(d, _part(key)), **parquet_options(body.schema))
    return set(dates)


# ---------------------------------------------------------------- one task, on a worker

_OFFSET = re.compile(r"(?:offset|byte|after about)\s+(\d[\d,]*)")


def error_record(task: Task, e: BaseException, date: str | None = None, worker: str | None = None) -> dict:
    """What the failures record says: the file, the offset the error names (None if
    it names none), the message as the single-file replay reports it."""
    msg = str(e)
    m = _OFFSET.search(msg)
    rec = {"key": task.key, "date": date or task.date, "file": task.path,
           "offset": int(m[1].replace(",", "")) if m else None, "error": type(e).__name__, "message": msg,
           "worker": worker, "time_utc": dt.datetime.now(dt.timezone.utc).isoformat()}
    if not isinstance(e, LobError):  # not an input error: keep where it happened
        rec["traceback"] = "".join(traceback.format_exception(e))
    return rec


def _worker_address() -> str | None:
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return None


def run_task(task: Task) -> dict:
    """Replay one file into staging, partition, publish. Never raises: a failure is
    recorded in DATASET/_failures/<key>.json and returned."""
    f = FORMATS[task.fmt]
    t0 = time.perf_counter()
    worker = _worker_address()
    stage = os.path.join(task.dataset, STAGING, f"{task.key}.{uuid.uuid4().hex[:8]}")
    raw, tree = os.path.join(stage, "raw"), os.path.join(stage, "tree")
    date = task.date
    ready = False
    try:
        os.makedirs(raw)
        summary = f.replay(task, raw)
        t1 = time.perf_counter()
        date = date or f.find_date(task.path)
        if date is None:
            raise InputError(f"{task.path}: no date in its name and no record to take one from: "
                             "pass --date FILE=YYYY-MM-DD")
        files, dates = stage_tree(raw, tree, f, task.key, date, task.max_rows)
        write_json(os.path.join(stage, READY), {
            "key": task.key, "date": date, "dates": dates, "file": task.path, "source": summary.get("source"),
            "report_rows": summary.get("report_rows"), "files": files})
        ready = True
        publish(task.dataset, stage)
        return {"key": task.key, "date": date, "file": task.path, "status": "ok", "line": f.describe(summary),
                "seconds": round(time.perf_counter() - t0, 3), "replay_seconds": round(t1 - t0, 3),
                "partition_seconds": round(time.perf_counter() - t1, 3), "peak_rss_bytes": summary.get("peak_rss_bytes"),
                "worker": worker}
    except Exception as e:
        rec = error_record(task, e, date, worker)
        if not ready:  # else keep the staged tree: the next run finishes publishing it
            shutil.rmtree(stage, ignore_errors=True)
        _record_failure(task, rec)
        return {**rec, "status": "failed", "seconds": round(time.perf_counter() - t0, 3)}


def _published_from_another_file(task: Task) -> str | None:
    """Why a done key must not count as this file's (another name or size), or None."""
    src = _read_json(os.path.join(task.dataset, DAYS, task.key, SUCCESS)).get("source") or {}
    name, size = os.path.basename(task.path), str(os.path.getsize(task.path))
    if src.get("source_file") in (None, name) and src.get("source_size") in (None, size):
        return None
    return (f"{task.path}: {task.key} is already in the dataset, from another file ({src.get('source_file')}, "
            f"{int(src.get('source_size') or 0):,} bytes; this one: {int(size):,} bytes): "
            f"replay it into another dataset, or delete {os.path.join(task.dataset, DAYS, task.key)} to replace it")


def _record_failure(task: Task, rec: dict) -> None:
    os.makedirs(os.path.join(task.dataset, FAILURES), exist_ok=True)
    write_json(os.path.join(task.dataset, FAILURES, f"{task.key}.json"), rec)


def _worker_check(dataset: str) -> dict:
    """Run on every worker before the tasks: its lobreplay, and whether it sees DATASET."""
    return {"version": __version__, "sees_dataset": os.path.exists(os.path.join(dataset, MANIFEST))}


# ---------------------------------------------------------------- the client

@contextmanager
def cluster(scheduler: str | None = None, workers: int | None = None, memory_limit: str = "auto",
            wait_seconds: float = 60):
    """A dask.distributed Client: connected to scheduler, or to a LocalCluster of
    `workers` processes (default: one per CPU) with one thread each. Yields
    (client, description)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise LobError("replay-many needs dask.distributed, which is not installed: "
                       "pip install 'lobreplay[cluster]' (or pip install distributed)") from None
    if scheduler:
        if workers is not None:
            raise InputError("--workers starts a local cluster; with --scheduler, start the workers there "
                             "(docs/cluster.md)")
        try:
            client = Client(scheduler, timeout=30)
        except (OSError, TimeoutError, ValueError) as e:  # ValueError: not an address
            raise InputError(f"cannot reach the dask scheduler at {scheduler}: {e}") from None
        with client:
            if not client.scheduler_info().get("workers"):
                try:
                    client.wait_for_workers(1, timeout=wait_seconds)
                except TimeoutError:
                    raise InputError(f"the dask scheduler at {scheduler} has no workers "
                                     f"(waited {wait_seconds:.0f} s)") from None
            yield client, f"the scheduler at {scheduler}"
        return
    n = usable_cpus() if workers is None else workers
    if n < 1:
        raise InputError(f"--workers: expected a number of processes >= 1, got {n}")
    if memory_limit not in (None, "auto"):
        from dask.utils import parse_bytes
        try:
            parse_bytes(memory_limit)
        except (ValueError, KeyError, TypeError):
            raise InputError(f"--memory-limit: expected bytes such as 4GB or 500MiB (or auto), got "
                             f"{memory_limit!r}") from None
    # no dashboard; its HTTP server (health, metrics) on any free port, not 8787
    lc = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                      scheduler_kwargs={"dashboard": False}, memory_limit=memory_limit,
                      silence_logs=logging.ERROR)
    try:
        with Client(lc) as client:
            try:
                yield client, f"a local cluster of {n} worker process{'es' if n > 1 else ''}"
            finally:
                _quiet_shutdown(client)
    finally:
        lc.close()


def _quiet_shutdown(client) -> None:
    """Once the work is done: the workers of a local cluster log heartbeat failures, with
    tracebacks, when the scheduler closes before them (a race in distributed; a CI run of
    the replay-many test once printed one). Quiet their loggers and this process's (the
    scheduler's) before closing; errors during the work were logged and reported already.
    Best effort."""
    with contextlib.suppress(Exception):
        client.run(_quiet_distributed_logs)
    _quiet_distributed_logs()


def _quiet_distributed_logs() -> None:
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def check_workers(client, dataset: str) -> int:
    """Every worker must run this lobreplay version and see DATASET at the same path."""
    try:
        info = client.run(_worker_check, dataset, on_error="return")
    except Exception as e:  # e.g. a worker that cannot unpickle the check (no lobreplay there)
        raise InputError(f"workers not ready: {type(e).__name__}: {e}") from None
    problems = []
    for addr, r in sorted(info.items()):
        if isinstance(r, BaseException):
            problems.append(f"{addr} cannot run lobreplay ({type(r).__name__}: {r})")
        elif r["version"] != __version__:
            problems.append(f"{addr} runs lobreplay {r['version']}, this client {__version__}")
        elif not r["sees_dataset"]:
            problems.append(f"{addr} does not see {os.path.join(dataset, MANIFEST)}: every worker must see the "
                            "inputs and the output directory at the same path (a shared filesystem)")
    if problems:
        raise InputError("workers not ready: " + "; ".join(problems))
    return len(info)


def run_many(fmt: str, files: list[str], dataset: str, config, *, scheduler: str | None = None,
             workers: int | None = None, memory_limit: str = "auto", dates: dict[str, str] | None = None,
             max_rows: int = DEFAULT_MAX_ROWS, echo: Callable[[str], None] = print) -> dict:
    """Replay files into DATASET on dask.distributed; skip the keys already
    published; record failures. Returns the run's report (see print_report)."""
    t0 = time.perf_counter()
    f = FORMATS[fmt]
    dataset = os.path.abspath(dataset)
    tasks = plan(fmt, files, dataset, config, dates, max_rows)
    open_dataset(dataset, fmt, f.options(config), f.options(type(config)()))
    report = {"format": fmt, "unit": f.unit, "dataset": dataset, "files": len(tasks), "ok": [], "failed": [],
              "skipped": [], "recovered": {}, "where": None}
    with _lock(dataset):
        report["recovered"] = recover(dataset)
        for k in report["recovered"]["published"]:
            echo(f"{k}: finished publishing what a killed run had staged")
        if report["recovered"]["removed"]:
            echo(f"removed the unfinished staging of a killed run: {', '.join(report['recovered']['removed'])}")
        todo = [t for t in tasks if not done(dataset, t.key)]
        for t in tasks:
            if done(dataset, t.key):
                other = _published_from_another_file(t)
                if other:
                    report["failed"].append({**error_record(t, InputError(other)), "status": "failed"})
                    echo(f"  {t.key}  FAILED  {os.path.basename(t.path)}: {other}")
                else:
                    report["skipped"].append(t.key)
        if report["skipped"]:
            echo(f"skipped {len(report['skipped'])} {f.unit}{'s' if len(report['skipped']) != 1 else ''} "
                 f"already done: {', '.join(report['skipped'])}")
        if todo:
            with cluster(scheduler, workers, memory_limit) as (client, where):
                n = check_workers(client, dataset)
                report["where"] = where if not scheduler else f"{where} ({n} worker{'s' if n != 1 else ''})"
                echo(f"replaying {len(todo)} {f.unit}{'s' if len(todo) != 1 else ''} on {report['where']}")
                _run(client, todo, report, echo)
    report["wall_seconds"] = round(time.perf_counter() - t0, 3)
    return report


def _run(client, todo: list[Task], report: dict, echo) -> None:
    from distributed import as_completed
    run_id = uuid.uuid4().hex[:8]
    futures = client.map(run_task, todo, key=[f"lobreplay-{t.fmt}-{t.key}-{run_id}" for t in todo], pure=False)
    by_future = dict(zip(futures, todo))
    for fut in as_completed(futures):
        task = by_future[fut]
        try:
            r = fut.result()
        except Exception as e:  # the worker died (KilledWorker), or the scheduler went away
            r = {**error_record(task, e), "status": "failed", "seconds": None}
            r["message"] = f"{task.path}: the task did not finish ({type(e).__name__}: {e})"
            _record_failure(task, r)
        if r["status"] == "ok":
            report["ok"].append(r)
            echo(f"  {r['key']}  ok      {os.path.basename(r['file'])}: {r['line']} ({r['seconds']:.1f} s, "
                 f"of which partitioning {r['partition_seconds']:.1f} s)")
        else:
            report["failed"].append(r)
            took = f" ({r['seconds']:.1f} s)" if r.get("seconds") is not None else ""
            echo(f"  {r['key']}  FAILED  {os.path.basename(r['file'])}{took}: {r['error']}, see the end")


def print_report(report: dict, echo: Callable[[str], None] = print) -> None:
    unit = report["unit"]
    ok, failed, skipped = len(report["ok"]), len(report["failed"]), len(report["skipped"])
    echo(f"{report['files']} {unit}{'s' if report['files'] != 1 else ''}: {ok} done, {skipped} skipped (already done), {failed} failed; "
         f"wall {report['wall_seconds']:.1f} s" + (f" on {report['where']}" if report["where"] else ""))
    for r in report["failed"]:  # the message names the file (and the offset, where there is one)
        echo(f"failed: {r['key']}: {r['message']}")
    if failed:
        echo(f"failure records: {os.path.join(report['dataset'], FAILURES)}/<{unit}>.json; "
             "a re-run retries the failed and skips the done")
    kinds = sorted(d for d in os.listdir(report["dataset"]) if not d.startswith(("_", ".")))
    echo(f"dataset {report['dataset']}/: " + (", ".join(kinds) if kinds else "(no reports yet)")
         + " -- each hive-partitioned by date (and symbol)")
