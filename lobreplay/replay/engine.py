"""The one replay driver of every venue: pass 1 (the books sized, from the sizing cache when it
can), pass 2 (the input's chunks turned into core events, applied by the core one call per
chunk, each chunk's report rows written on the report thread), the provenance (the input's
SHA-256 on a thread of its own), the run record (summary.json, lobreplay.reports.tables.ReplayRun)
and the reports.

`Engine` is that driver. A venue says only what is its own, in a subclass (its *source*):
lobreplay.itch.replay.ItchReplay (ITCH 5.0) and lobreplay.l2.replay.LobcReplay (.lobc):

    open()             the input opened and checked (before an output directory is touched)
    src_meta()         the provenance every table carries
    _begin(run)        pass 1 and what pass 2 needs (the session, its books, run.reports)
    _step(target)      apply the next piece of pass 2: the rest of the current chunk, or its
                       part before `target`; returns a Piece, or None when the target (or the
                       end of the input) is reached
    _end(run)          after the last piece: the reports written at the end, the summary
    _position(target)  where the replay stands (for a target: already passed?)
    book(symbol)       the live book of a symbol, in feed units (a BookAt)

Pass 2 is steppable: the batch replay (`run`) is "step to the end" and the Python API
(lobreplay.open_itch, open_lobc: run_until, chunks, book, to_parquet) is the same loop stopped
early. The core still gets whole chunks (or the piece of one before a cut) per call; nothing
runs per message in Python.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
import sys
import tempfile
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from lobreplay.errors import InputError, LobError
from lobreplay.reports.tables import ReplayRun, ReportSet, file_sha256

__all__ = ["Engine", "Piece", "Chunk", "BookAt", "parse_target", "NoBar", "progress_bar"]


class NoBar(contextlib.nullcontext):
    """What a replay without a progress bar updates instead of one."""
    n = 0

    def __init__(self):
        super().__init__(self)

    def update(self, k: int) -> None:
        self.n += k


def progress_bar(on: bool, desc: str, total: int, unit: str = "B", unit_scale: bool = True):
    """A tqdm bar on stderr, or NoBar (tqdm's import alone is about 20 ms of a replay's start-up)."""
    if not on:
        return NoBar()
    from tqdm import tqdm
    return tqdm(total=total, unit=unit, unit_scale=unit_scale, desc=desc, file=sys.stderr, leave=False)


@dataclass
class Piece:
    """What one step of pass 2 applied: `first`..`last` (the message or record numbers, last
    not included), and, when the replay captures them (chunks()), the rows it wrote."""
    first: int
    last: int
    tables: dict = field(default_factory=dict)   # report name -> Arrow table of this piece's rows
    events: object = None                        # ITCH: the core events (an Arrow table); .lobc: the records


_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?\s*")


def parse_target(when, *, unit: str, what: str = "until") -> tuple[str, int]:
    """A place in a replay: ("number", N) for a message or record number (an int: stop before
    it), ("clock", ns) for a time of day ("10:00", "09:30:00.5", a datetime.time, a
    datetime.timedelta since midnight), ("epoch", ns) for an aware datetime. Anything else is an
    InputError naming the argument."""
    if isinstance(when, bool) or when is None:
        raise InputError(f"{what}: expected a time of day ('10:00', '09:30:00.5') or a {unit[:-1]} number, "
                         f"got {when!r}")
    if isinstance(when, (int, np.integer)):
        if when < 0:
            raise InputError(f"{what}: a {unit[:-1]} number is >= 0, got {when}")
        return ("number", int(when))
    if isinstance(when, str):
        m = _TIME.fullmatch(when)
        if not m or int(m[1]) > 23 or int(m[2]) > 59 or int(m[3] or 0) > 59:
            raise InputError(f"{what}: expected a time of day HH:MM[:SS[.fffffffff]], got {when!r}")
        frac = int((m[4] or "").ljust(9, "0") or 0)
        return ("clock", ((int(m[1]) * 60 + int(m[2])) * 60 + int(m[3] or 0)) * 1_000_000_000 + frac)
    if isinstance(when, dt.datetime):
        if when.tzinfo is None:
            raise InputError(f"{what}: a datetime needs a time zone (or give a time of day), got {when!r}")
        delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return ("epoch", (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000)
    if isinstance(when, dt.time):
        return ("clock", ((when.hour * 60 + when.minute) * 60 + when.second) * 1_000_000_000
                + when.microsecond * 1000)
    if isinstance(when, dt.timedelta):
        return ("clock", (when.days * 86400 + when.seconds) * 1_000_000_000 + when.microseconds * 1000)
    raise InputError(f"{what}: expected a time of day ('10:00') or a {unit[:-1]} number, got {when!r} "
                     f"({type(when).__name__})")


class BookAt:
    """The live book of one symbol at the replay's current place (a view: it follows the
    replay), prices in feed units (the core's, through the book's price map if it has one).

        r.book("AAPL").depth("B", 5)  # [(price, qty, orders), ...] best first
    """

    def __init__(self, view, symbol: str, real):
        self._v, self.symbol, self._real = view, symbol, real

    def _levels(self, side, n: int):
        p, q, c = self._v.depth_arrays(side, n)
        return self._real(p, c > 0), q, c

    def depth(self, side, n: int = 10) -> list[tuple[int, int, int]]:
        """Up to n best levels of a side ("B"/"S", "bid"/"ask" or a Side) as (price, qty, orders)."""
        p, q, c = self._levels(side, n)
        return list(zip(p.tolist(), q.tolist(), c.tolist()))

    def depth_arrays(self, side, n: int = 10):
        """As depth(), as three numpy arrays (prices, qtys, orders)."""
        return self._levels(side, n)

    def best(self, side) -> tuple[int, int, int] | None:
        lv = self.depth(side, 1)
        return lv[0] if lv else None

    def best_bid(self):
        return self.best("B")

    def best_ask(self):
        return self.best("S")

    def orders(self, side):
        """Every order resting on a side: (ids, qtys, prices), best price first, queue order within one."""
        i, q, p = self._v.orders(side)
        return i, q, self._real(p, np.ones(len(p), bool))

    @property
    def order_count(self) -> int:
        return self._v.order_count

    @property
    def halted(self) -> bool:
        return self._v.halted

    def __repr__(self) -> str:
        return f"BookAt({self.symbol}: {self.order_count} orders, bid {self.best_bid()}, ask {self.best_ask()})"


class Chunk:
    """One step of pass 2 as chunks() yields it: `first`, `last` (message or record numbers, last
    not included), `events` (ITCH: the core events the step applied, in real prices; .lobc: the
    records), and each report's rows of the step as tables (`executions`, `bbo`, `desyncs`,
    `trades`, ...; None for a report the replay does not write), Arrow or pandas."""

    def __init__(self, piece: Piece, fmt: str):
        self.first, self.last = piece.first, piece.last
        conv = (lambda t: t) if fmt == "arrow" else (lambda t: None if t is None else t.to_pandas())
        self.events = conv(piece.events)
        self._tables = {k: conv(v) for k, v in piece.tables.items()}

    @property
    def reports(self) -> list[str]:
        return sorted(self._tables)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._tables.get(name)

    def __repr__(self) -> str:
        rows = ", ".join(f"{k} {len(v)}" for k, v in sorted(self._tables.items()))
        return f"Chunk({self.first:,}..{self.last:,}: {rows})"


class _Spool(ReportSet):
    """The reports of a replay driven from Python, written into a directory of their own
    (a temporary one) as the batch replay writes them, and moved where to_parquet says at
    the end; with `capture` set, each table's rows of the current step are kept too."""

    capture: dict | None = None

    def write(self, name, columns) -> None:
        if name not in self.writers:
            return
        if self.capture is None:
            return super().write(name, columns)
        w = self.writers[name]
        t = w.table(columns)  # (built once: kept for the step, and handed to the writer)
        self.capture[name] = t
        self._submit(w.write_arrow, t)

    def write_table(self, name, table, metadata=None) -> None:
        if self.capture is not None and (name in self.extra_names or name in ("depth", "latency_histograms")
                                         or name.startswith("status_")):
            self.capture[name] = table
        super().write_table(name, table, metadata)


class Engine:
    """One replay of one input into one report directory: pass 1, pass 2 (steppable), the
    provenance, the summary. See the module docstring for what a venue adds."""

    unit = "messages"  # what the numbers of a target count (ITCH messages, .lobc records)

    def __init__(self, path: str, out_dir: str | None, cfg):
        self.path, self.out_dir, self.cfg = os.fspath(path), out_dir, cfg
        self._sha256: Future | None = None  # the input's SHA-256, computed beside both passes
        self._stop_hash = threading.Event()  # a failed replay does not wait for it
        self._done = (0, 0)                  # (pass, messages or records done in it)
        self.notes: list[str] = []           # for the summary's notes
        self._run: ReplayRun | None = None   # the run record of a stepped replay, while it runs
        self._ended = False                  # pass 2 reached the end of the input
        self._api = False                    # driven from Python (start): reports spooled
        self._closed = False
        self._failed: str | None = None

    # ---- the batch replay ----

    def run(self) -> dict:
        """The whole replay: pass 1, pass 2 to the end, the reports and summary.json."""
        try:
            with ReplayRun(self.out_dir, self.run_source(), where=self.where, stop=self._stop_hash) as run:
                try:
                    self._begin(run)
                    self._steps_to_end()
                    self._end(run)
                except BaseException:
                    self._failing(run)
                    raise
            return run.summary
        except KeyboardInterrupt as e:  # (Ctrl-C, and SIGTERM from the command line)
            e.add_note(self.where_text())
            raise
        finally:
            self._stop_hash.set()  # a replay that failed does not wait for the hash

    def _steps_to_end(self) -> None:
        """Pass 2 from where it stands to the end (a venue may have a faster loop of its own
        for a replay that never stopped: the same rows). _step sets _ended at the end."""
        while self._step(None) is not None:
            pass

    def run_source(self) -> dict:
        """The summary's `source` until the replay fills it in."""
        return {"source_file": os.path.basename(self.path)}

    def start_hash(self, size: int | None) -> None:
        """The input's SHA-256 on its own thread and its own reads, off the critical path: the
        report writers wait for it only when they open their files, at their first row group or
        their close; at the lowest priority, so that pass 1's reader thread has the other core first."""
        pool = ThreadPoolExecutor(1, thread_name_prefix="sha256")
        self._sha256 = pool.submit(file_sha256, self.path, self._stop_hash, background=True, size=size)
        pool.shutdown(wait=False)

    def sha256(self, later: bool = False):
        """The input's SHA-256 ("" if not computed or given up); later: its Future while it runs."""
        if self._sha256 is None:
            return ""
        if later and not self._sha256.done():
            return self._sha256
        return self._sha256.result() or ""

    def where(self) -> dict:
        p, m = self._done
        return {"pass": p, f"{self.unit}_done": m}

    def where_text(self) -> str:
        w = self.where()
        if not w["pass"]:
            return f"{self.path}: before the first pass"
        return f"{self.path}: in pass {w['pass']}, after {w[f'{self.unit}_done']:,} {self.unit}"

    # ---- driven from Python ----

    def start(self) -> "Engine":
        """Open the input, run pass 1 and set up pass 2, with the reports written into a
        temporary directory (moved by to_parquet). lobreplay.open_itch / open_lobc call this."""
        self._api = True
        spool = tempfile.mkdtemp(prefix="lobreplay-")
        self._spool_dir = self.out_dir = spool
        self._cleanup = weakref.finalize(self, shutil.rmtree, spool, True)
        self.open()
        self._run = ReplayRun(spool, self.run_source(), where=self.where, stop=self._stop_hash)
        self._run.__enter__()
        self._guard(self._begin, self._run)
        return self

    def _guard(self, fn, *a):
        """fn(*a) of a stepped replay: a failure ends it (its run record says failed, and later
        calls say where it stopped)."""
        self._check_open()
        try:
            return fn(*a)
        except BaseException as e:
            self._failed = f"{type(e).__name__}: {e}"
            run, self._run = self._run, None
            if run is not None:
                with contextlib.suppress(BaseException):
                    self._failing(run)
                with contextlib.suppress(BaseException):
                    run.__exit__(type(e), e, e.__traceback__)
            self._stop_hash.set()
            raise

    def _stepped(self):
        if not self._api:
            raise LobError("a replay driven from Python starts with lobreplay.open_itch / open_lobc (start())")
        self._check_open()

    def _check_open(self):
        if self._failed:
            raise LobError(f"{self.path}: the replay stopped ({self._failed}); open the file again")
        if self._closed:
            raise LobError(f"{self.path}: the replay is closed (to_parquet or close); open the file again")

    def _target(self, until, what: str):
        t = parse_target(until, unit=self.unit, what=what)
        behind = self._position(t)
        if behind:
            raise InputError(f"{what}: {until!r} is behind where the replay stands ({behind})")
        return t

    def run_until(self, until) -> "Engine":
        """Apply everything before `until`: a time of day of the feed ("10:00", "09:30:00.5",
        a datetime.time) or a message (.lobc: record) number (an int: stop before it). The
        chunk in which it falls is cut there: what follows is applied by the next step.

            r = lobreplay.open_itch("day.itch.gz", symbols=["AAPL"])
            r.run_until("10:00")
            r.book("AAPL").best_bid()
        """
        for _ in self._pieces(until, "run_until", capture=False):
            pass
        return self

    def chunks(self, until=None, *, format: str = "arrow"):
        """Step on chunk by chunk up to `until` (as run_until; None: the end of the input),
        yielding each step's rows as a Chunk: `events` (ITCH core events; .lobc records) and the
        reports' rows (`executions`, `bbo`, `desyncs`, `trades`, ...), as Arrow tables or, with
        format="pandas", DataFrames. Leaving the loop early leaves the replay after the last
        chunk yielded.

            for c in r.chunks(until="10:05"):
                print(c.first, c.last, len(c.bbo))
        """
        if format not in ("arrow", "pandas"):
            raise InputError(f"format: expected 'arrow' or 'pandas', got {format!r}")
        for piece in self._pieces(until, "chunks", capture=True):
            yield Chunk(piece, format)

    def _pieces(self, until, what: str, capture: bool):
        self._stepped()
        target = None if until is None else self._target(until, what)
        while True:
            if self._ended:
                return
            if capture:
                self._reports_set().capture = {}
            try:
                piece = self._guard(self._step_captured, target, capture)
            finally:
                if self._run is not None and self._run.reports is not None:
                    self._run.reports.capture = None
            if piece is None:
                return
            yield piece

    def _step_captured(self, target, capture: bool):
        piece = self._step(target, capture)  # (None: the target reached, or the end: _ended says which)
        if capture and piece is not None:
            piece.tables.update(self._reports_set().capture or {})
        return piece

    def _reports_set(self) -> _Spool:
        return self._run.reports

    def to_parquet(self, out_dir: str, *, force: bool = False) -> dict:
        """Replay the rest of the input and write every report into out_dir exactly as the
        command line writes them (the rows of the steps already taken included), with
        summary.json. Returns the summary. The replay is closed after.

            r.run_until("10:00")
            r.to_parquet("out/")   # the whole day's reports, as `lobreplay itch replay`
        """
        from lobreplay.replay.outdir import prepare_output
        self._stepped()
        out_dir = os.fspath(out_dir)
        prepare_output(out_dir, force, inputs=[self.path])
        if not self._ended:
            self._guard(self._steps_to_end)
        run = self._run
        self._guard(self._end, run)
        self._run = None
        self._closed = True
        try:
            run.__exit__(None, None, None)
        finally:
            self._stop_hash.set()
        for name in sorted(os.listdir(self._spool_dir)):
            shutil.move(os.path.join(self._spool_dir, name), os.path.join(out_dir, name))
        self._cleanup()
        return run.summary

    def close(self) -> None:
        """Stop the replay and discard its reports (to_parquet was not called)."""
        if self._api and not self._closed:
            self._closed = True
            run, self._run = self._run, None
            if run is not None and run.reports is not None:
                with contextlib.suppress(Exception):
                    run.reports.close()
            self._stop_hash.set()
            self._cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def _reports(self, names, metadata, *, stream: bool = False) -> ReportSet:
        """The report set of this replay: the batch's, or a stepped replay's spool."""
        return (_Spool if self._api else ReportSet)(self.out_dir, names, metadata, stream=stream)

    # ---- a venue's part ----

    def open(self):
        raise NotImplementedError

    def src_meta(self) -> dict:
        raise NotImplementedError

    def _begin(self, run: ReplayRun) -> None:
        raise NotImplementedError

    def _step(self, target, capture: bool = False) -> Piece | None:
        raise NotImplementedError

    def _end(self, run: ReplayRun) -> None:
        raise NotImplementedError

    def _failing(self, run: ReplayRun) -> None:
        """What a replay that fails adds to its summary before it is written."""

    def _position(self, target) -> str | None:
        """None, or where the replay stands if it is past `target` already."""
        return None

    def book(self, symbol: str) -> BookAt:
        raise NotImplementedError
