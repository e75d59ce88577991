"""Replay reports: explicit Arrow schemas, Parquet written in chunks.

Every table has the schema lobreplay.reports.schemas gives it and carries provenance in its schema metadata (source file name,
size and sha256, session date, lobreplay version, price scale). A writer
opens its file on the first rows and is closed in a finally block, so a
replay that fails half way leaves valid Parquet files holding what was
written. docs/reports.md describes every column.

Encoding and compressing Parquet costs as much as replaying, so a ReportSet
does it on one background thread (pyarrow releases the GIL), in order, with
at most a few batches waiting: the core replays the next chunk meanwhile.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Mapping
from urllib.parse import quote

import numpy as np

from lobreplay.core import arrow as _arrow
from lobreplay._lazy import Deferred
from lobreplay.reports import schemas

pa = Deferred("pyarrow")
pq = Deferred("pyarrow.parquet")


def __getattr__(name: str):
    """SCHEMAS (the ITCH replay's fixed tables, lobreplay.reports.schemas) on first use: it
    needs pyarrow."""
    if name == "SCHEMAS":
        return schemas.itch_schemas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


STREAM_SUFFIX = ".arrows"  # a table written as an Arrow IPC stream (see TableWriter's stream)

DELTA_COLUMNS = schemas.DELTA_COLUMNS  # integers that rise row by row


def parquet_options(schema) -> dict:
    """How every report is written as Parquet: zstd; dictionary encoding for text columns
    only (numbers written plain come out smaller after zstd and cost less to write than
    a dictionary tried and dropped: bbo of a 5M-message day 10.7 -> 7.1 MiB, writing
    -25 % CPU, benchmarks/RESULTS.md); DELTA_BINARY_PACKED for the time and sequence
    columns."""
    text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            or pa.types.is_binary(f.type) or pa.types.is_dictionary(f.type)]
    delta = {f.name: "DELTA_BINARY_PACKED" for f in schema
             if f.name in DELTA_COLUMNS and (pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type))}
    return {"compression": "zstd", "use_dictionary": text, "column_encoding": delta}


def report_path(out_dir: str, name: str, stream: bool = False) -> str:
    """Where table `name` goes: name.parquet, or name.arrows for a stream."""
    return os.path.join(out_dir, name + (STREAM_SUFFIX if stream else ".parquet"))


def read_report(path: str) -> pa.Table:
    """A table written by TableWriter, either format (by its suffix)."""
    if path.endswith(STREAM_SUFFIX):  # memory-mapped: the table's buffers keep the mapping
        return pa.ipc.open_stream(pa.memory_map(path)).read_all()
    return pq.read_table(path)


PARTIAL = ".partial"  # a report file while it is written


class TableWriter:
    """Appends column dicts to one Parquet file with a fixed schema, in row groups of about
    ROW_GROUP rows whatever the size of each batch.

    stream=True writes an uncompressed Arrow IPC stream instead: for tables that are read
    back once and rewritten (the parts of `itch replay --jobs N`), where encoding zstd
    Parquet twice cost more than the replay gained (benchmarks/RESULTS.md)."""

    ROW_GROUP = 1 << 17  # rows gathered before they are written (a Parquet row group, a stream batch)

    def __init__(self, path: str, schema: pa.Schema, metadata: Mapping[str, object], *, stream: bool = False):
        """metadata values are strings, or Futures of strings resolved when the file opens:
        at its first row group, or when it closes (rows are held until then), so a value
        computed beside the replay (the input's SHA-256) has that long to arrive."""
        self.path = path
        self.stream = stream
        self._held: list[pa.Table] = []  # written together once they reach ROW_GROUP rows
        self._held_rows = 0
        self._late = {k: v for k, v in metadata.items() if isinstance(v, Future)}
        self.schema = schema.with_metadata({**(schema.metadata or {}),
                                            **{k: v for k, v in metadata.items() if k not in self._late}})
        self._w = None
        self._sink = None
        self.rows = 0

    def _open(self) -> None:
        if self._late:  # e.g. the source file's SHA-256, computed beside the replay
            self.schema = self.schema.with_metadata({**(self.schema.metadata or {}),  # (None: given up)
                                                     **{k: f.result() or "" for k, f in self._late.items()}})
            self._late = {}
        # written as PATH.partial and renamed when closed whole: a process killed outright
        # (SIGKILL) leaves no file under the report's name that lacks its footer
        if self.stream:
            self._sink = pa.OSFile(self.path + PARTIAL, "wb")
            self._w = pa.ipc.new_stream(self._sink, self.schema)
        else:
            self._w = pq.ParquetWriter(self.path + PARTIAL, self.schema, **parquet_options(self.schema))

    def table(self, columns: Mapping[str, object]) -> pa.Table:
        """Columns (numpy arrays, lists or Arrow arrays) as a table of this writer's schema."""
        return pa.Table.from_arrays([_to_arrow(columns[f.name], f.type) for f in self.schema], schema=self.schema)

    def write(self, columns: Mapping[str, object]) -> None:
        """Append rows. They are written in row groups of about ROW_GROUP rows, whatever
        the size of each call's batch (a replay's chunks are small)."""
        n = len(next(iter(columns.values()))) if columns else 0
        if n:
            self._hold(self.table(columns))

    def write_arrow(self, table: pa.Table) -> None:
        """Append the rows of a table of this writer's schema (gathered as write() does)."""
        self._hold(table.replace_schema_metadata(self.schema.metadata))

    def _hold(self, table: pa.Table) -> None:
        if table.num_rows:
            self._held.append(table)
            self._held_rows += table.num_rows
            if self._held_rows >= self.ROW_GROUP:
                self._flush()
        self.rows += table.num_rows

    def _flush(self) -> None:
        if self._w is None:
            self._open()
        if self._held:
            self._w.write_table(pa.concat_tables(self._held) if len(self._held) > 1 else self._held[0])
            self._held, self._held_rows = [], 0

    def close(self) -> None:
        self._flush()  # (opens the file if no row group was written: an empty table is a valid one)
        self._w.close()
        if self._sink is not None:
            self._sink.close()
        os.replace(self.path + PARTIAL, self.path)


def name_part(text) -> str:
    """Text from data or from a user (a symbol) as part of a file or directory name that stays
    inside its directory: every character but letters, digits and _.-~ percent-escaped (as in a
    URI: a hive partition's value reads back decoded), and a whole "." or ".." too. The one
    escaping of every such name (the dataset's partitions, the LOBSTER export's files)."""
    q = quote(str(text), safe="")
    return q.replace(".", "%2E") if q in (".", "..") else q


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _to_arrow(values, typ: pa.DataType) -> pa.Array:
    if isinstance(values, np.ndarray) and values.dtype.kind == "M" and pa.types.is_timestamp(typ):
        values = values.astype("datetime64[ns]")
    return _arrow.array(values, typ)  # (not pa.array: it would import pandas)


class ReportSet:
    """The writers of one report directory, fed from one background thread and
    closed together."""

    MAX_PENDING = 8  # batches waiting to be written; past this, write() waits

    def __init__(self, out_dir: str, names: list[str], metadata: Mapping[str, str], *, stream: bool = False):
        """stream: every table as an Arrow IPC stream (TableWriter)."""
        self.out_dir = out_dir
        self.metadata = dict(metadata)
        self.stream = stream
        self.writers = {n: TableWriter(report_path(out_dir, n, stream), _schema(n), self.metadata, stream=stream)
                        for n in names}
        self.extra: dict[str, TableWriter] = {}
        self.extra_names: set[str] = set()  # tables written with write_table that were asked for
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lobreplay-reports")
        self._pending: list[Future] = []

    def __contains__(self, name: str) -> bool:
        return name in self.writers or name in self.extra_names

    def _submit(self, fn, *args) -> None:
        waiting = []
        for f in self._pending:
            if f.done():
                f.result()  # raises a failed write's error here
            else:
                waiting.append(f)
        self._pending = waiting
        while len(self._pending) >= self.MAX_PENDING:
            self._pending.pop(0).result()  # raises the writer's error here, if any
        self._pending.append(self._pool.submit(fn, *args))

    def write(self, name: str, columns: Mapping[str, object]) -> None:
        if name in self.writers:
            self._submit(self.writers[name].write, columns)

    def write_table(self, name: str, table: pa.Table, metadata: Mapping[str, str | None] | None = None) -> None:
        """A table whose schema comes from the data (the status tables). metadata: the
        table's own, over the set's (a value None: the key left out), taken when the table
        is first written."""
        if name not in self.extra:
            md = {k: v for k, v in {**self.metadata, **(metadata or {})}.items() if v is not None}
            self.extra[name] = TableWriter(report_path(self.out_dir, name, self.stream), table.schema,
                                           md, stream=self.stream)
        self._submit(self.extra[name].write_arrow, table)

    def rows(self) -> dict[str, int]:
        """Rows written so far per table (waits for the writes in flight)."""
        self.flush()
        return {name: w.rows for name, w in {**self.writers, **self.extra}.items()}

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for f in pending:
            f.result()

    def close(self) -> None:
        errors = []
        try:
            self.flush()
        except Exception as e:
            errors.append(e)
        self._pool.shutdown(wait=True)
        # the tables' last rows (up to a row group each) are encoded and their footers written
        # side by side: pyarrow releases the GIL while it encodes, and nothing else is left
        # to run (on one thread this was the replay's last 0.07 s on a wide day)
        writers = list(self.writers.values()) + list(self.extra.values())
        with ThreadPoolExecutor(max_workers=max(1, min(len(writers), usable_cpus())),
                                thread_name_prefix="lobreplay-close") as pool:
            closing = [pool.submit(w.close) for w in writers]
        errors += [f.exception() for f in closing if f.exception() is not None]  # every writer closed, even if one failed
        if errors:
            raise errors[0]


def file_sha256(path: str, stop=None, *, background: bool = False, size: int | None = None) -> str | None:
    """The SHA-256 of a file's bytes, the provenance every report carries (read into one
    reused buffer; hashlib releases the GIL on each block, so it runs beside a replay on
    its own thread). None if `stop` (a threading.Event) was set before the end.
    background: at the lowest priority (see _background), for a hash that nothing waits
    for soon (a report writer waits for it at its first row group: TableWriter).
    size: the first `size` bytes only (the source_size a replay reports beside it: a file
    still being written has more by the time the hash gets there)."""
    if background:
        _background()
    h, buf = hashlib.sha256(), bytearray(1 << 20)
    view = memoryview(buf)
    left = float("inf") if size is None else size
    with open(path, "rb", buffering=0) as f:
        while left > 0 and (n := f.readinto(view[:min(len(buf), left)])):
            if stop is not None and stop.is_set():
                return None
            h.update(view[:n])
            left -= n
    return h.hexdigest()


def _background() -> None:
    """Lower the calling thread's priority (Linux: nice 19 for this thread only), so that
    work beside the replay takes the CPU the replay leaves and not a core it needs."""
    if sys.platform.startswith("linux"):  # elsewhere a thread id is not a PRIO_PROCESS target
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _schema(name: str):
    return schemas.schema("itch", name)


def write_json(path: str, obj) -> None:
    """Write JSON atomically (a crash leaves the old file or the new one, never half)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class ReplayRun:
    """One replay's summary.json, written however the replay ends.

        with ReplayRun(out_dir, source) as run:
            run.reports = ReportSet(...)
            run.summary.update(...)

    The reports are closed first (so every table written so far is valid Parquet). If the
    replay and the closing succeeded the summary says "status": "ok"; on any exception,
    the closing's included, "failed" with the error (and the exception goes on), and with
    `where` (a callable: how far the replay got, e.g. its pass and the messages done)
    "stopped_at". Then wall time, peak RSS and `files` (every file the run wrote in
    out_dir: what a later --force there removes, lobreplay.replay.outdir) are added and
    summary.json is written atomically. `stop` (a threading.Event), set when the replay fails before the reports
    close: work that only a whole replay needs stops there (the input's SHA-256, which a
    table waits for when it opens its file: a replay stopped early would wait for the rest
    of a multi-GB file; its tables' source_sha256 is then empty)."""

    def __init__(self, out_dir: str, source: dict, where=None, stop: threading.Event | None = None):
        self.out_dir = out_dir
        self.summary: dict = {"status": "failed", "source": source}
        self.reports: ReportSet | None = None
        self.where = where
        self.stop = stop

    def __enter__(self) -> "ReplayRun":
        self._t0 = time.perf_counter()
        try:  # (what is there already: the summary lists the files written since, for the next --force)
            self._before = set(os.listdir(self.out_dir))
        except OSError:
            self._before = set()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None and self.stop is not None:
            self.stop.set()
        closing = None  # the reports' close failing (a full disk, a report name taken by a directory,
        if self.reports is not None:  # Ctrl-C while they close): summary.json is written all the same
            try:
                self.reports.close()
                self.summary.setdefault("report_rows", self.reports.rows())
            except BaseException as e:
                closing = e
        failure = exc if exc is not None else closing
        if failure is None:
            self.summary["status"] = "ok"
        else:  # (status stays "failed")
            self.summary["error"] = error_text(failure)
            if closing is not None and exc is not None:
                self.summary["close_error"] = error_text(closing)
            if self.where is not None:
                with contextlib.suppress(Exception):  # (what went wrong is said already)
                    self.summary["stopped_at"] = self.where()
        self.summary["wall_seconds"] = round(time.perf_counter() - self._t0, 3)
        self.summary["peak_rss_bytes"] = peak_rss_bytes()
        from lobreplay.replay.outdir import written_since
        self.summary["files"] = written_since(self.out_dir, self._before)
        write_json(os.path.join(self.out_dir, "summary.json"), self.summary)
        if exc is None and closing is not None:
            raise closing
        return False


def peak_rss_bytes() -> int:
    """This process's peak resident set size: VmHWM (of this program only: Linux keeps
    getrusage's ru_maxrss across exec, so a replay started from a big process, a notebook,
    would report that process's pages), else ru_maxrss."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def error_text(exc: BaseException) -> str:
    """What ended a run, for its summary: a signal by its name, else the exception."""
    from lobreplay.errors import Terminated
    if isinstance(exc, Terminated):
        return "terminated (SIGTERM)"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (SIGINT)"
    return f"{type(exc).__name__}: {exc}"


def parse_symbols(text: str | None) -> list[str] | None:
    """--symbols a,b (None: every symbol); given but naming none (",,,") is an error."""
    from lobreplay.errors import InputError
    if text is None:
        return None
    symbols = [s.strip() for s in text.split(",") if s.strip()]
    if not symbols:
        raise InputError(f"--symbols: expected comma-separated symbols, got {text!r}")
    return symbols


def config_names(value, what: str, allowed: tuple[str, ...] | None = None) -> tuple[str, ...] | None:
    """A replay configuration's list of names (symbols, reports): None stays None; a string is
    comma-separated ("AAPL,MSFT": not the letters of "AAPL"); names outside `allowed` are an
    InputError naming them."""
    from lobreplay.errors import InputError
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(x, str) for x in items):
        raise InputError(f"{what}: expected names (strings), got {value!r}")
    names = tuple(x.strip() for x in items if x.strip())
    if isinstance(value, str) and not names:
        raise InputError(f"{what}: expected comma-separated names, got {value!r}")
    bad = [x for x in names if allowed is not None and x not in allowed]
    if bad:
        raise InputError(f"{what}: unknown {', '.join(bad)}; choose from {', '.join(allowed)}")
    return names


def parse_report_list(no_reports: bool, text: str | None, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The reports a replay command was asked for (--no-reports / --reports a,b / all)."""
    from lobreplay.errors import InputError
    if no_reports:
        return ()
    if not text:
        return tuple(allowed)
    wanted = tuple(r.strip() for r in text.split(",") if r.strip())
    bad = [r for r in wanted if r not in allowed]
    if bad:
        raise InputError(f"--reports: unknown report(s) {', '.join(bad)}; choose from {', '.join(allowed)}")
    return wanted
