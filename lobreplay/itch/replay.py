"""Replay an ITCH 5.0 day through the matching core and write reports.

Pass 1 (lobreplay.core._coreapi.ItchScan, C): per stock locate, the order price
range and tick, and the peak number of live orders; the directory (R) and
status messages. Every book is then created at its exact size.

Pass 2: chunk by chunk, C turns the order messages into events
(lob_itch_events) and the core applies them in one call per chunk. The core
checks every execution against price-time priority (an aggressor the feed
does not publish took the book from the best price, front of the queue
first), reports each divergence as a desync, and brings the book back to the
feed's state. Python only turns the per-chunk outputs into report rows, with
numpy, never per message.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

import numpy as np

from lobreplay import __version__
from lobreplay.core import arrow as _arrow
from lobreplay.replay import cache
from lobreplay.core import _coreapi as core
from lobreplay.core.book import Session, _touched
from lobreplay.errors import InputError, LobError
from lobreplay.core.events import BBO_DTYPE, EVENT_DTYPE, RESULT_DTYPE, Cause, Kind, Status
from lobreplay.reports.latency import check_timing_every, histogram_table, report_rows
from lobreplay.reports import schemas
from lobreplay._ahead import read_ahead
from lobreplay._lazy import Deferred, load
from lobreplay.replay.engine import BookAt, Engine, NoBar, Piece, progress_bar
from lobreplay.replay.outdir import prepare_output  # noqa: F401  (lobreplay.itch.replay.prepare_output, as before)
from lobreplay.reports.tables import ReplayRun, ReportSet, TableWriter, report_path, usable_cpus
from lobreplay.itch.decode import decode_type, non_ascii_bytes, positions_of, timestamps, to_arrow
from lobreplay.itch.prices import (CORE_LEVELS, MAP_SAVING, MAX_LEVELS, PriceMap, PriceMaps, choose_map, map_candidate, padded,
                     worth_mapping)
from lobreplay.itch.reader import ItchFile
from lobreplay.itch.spec import LAYOUTS, PRICE4_SCALE, price_metadata

from lobreplay.itch.spec import ALL_REPORTS, STATUS_TYPES  # noqa: E402,F401  (the report names: one place)

# Rejected events, as desync causes.
REJECT_CAUSE = {
    Status.EUNKNOWN_ID: "unknown_reference", Status.EDUP_ID: "duplicate_reference",
    Status.EQTY: "quantity_mismatch", Status.EBAND: "out_of_band", Status.EPRICE: "off_tick",
    Status.EFULL: "book_full", Status.EKIND: "bad_message",
}
CORE_CAUSE = {Cause.FILL_ORDER: "fill_order", Cause.QTY: "quantity_mismatch",
              Cause.EXEC_PRICE: "execution_price"}  # CROSSED: by event kind (CROSSED_BY_KIND)
# a feed order that met stale orders: on a NEW, a REPLACE, or when a halt ended (STATE: a parked
# order that still crossed the book after the cross)
CROSSED_BY_KIND = {Kind.NEW: "crossed_add", Kind.REPLACE: "crossed_replace", Kind.STATE: "crossed_resume"}
NY = ZoneInfo("America/New_York")
pa = Deferred("pyarrow")  # imported on first use: a replay without reports never needs it


@dataclass
class ReplayConfig:
    symbols: list[str] | None = None     # replay only these (default: every symbol with orders)
    headroom: float = 0.2                # band = order price range widened by this fraction
    chunk_bytes: int = 8 << 20
    allow_truncated: bool = False
    allow_gaps: bool = False             # a pcap: go on whatever its sequence anomalies lose (counted)
    reports: tuple[str, ...] = ALL_REPORTS
    status_tables: bool = True
    timing: bool = True
    timing_every: int | None = None      # with timing: every Nth event timed (1: all; None: TIMING_EVERY)
    progress: bool = False
    date: str | None = None              # YYYY-MM-DD; default: from the file name
    depth_levels: int = 0                # N-level book samples (depth.parquet); 0: none
    depth_every_ns: int = 1_000_000_000  # ... every this many ns of feed time; 0: after every change
    part: tuple[int, int] | None = None  # (k, jobs): replay only part k's share of the locates
    #                                      (the split comes with ItchReplay's pass1=)
    hash: bool = True                    # the input's SHA-256 in the provenance; False: left empty
    group_books: bool | None = None      # each chunk's events regrouped by book before the core
    #                                      (the same outcomes); None: when the books take
    #                                      GROUP_BYTES or more and no depth samples by time
    cache: bool = True                   # pass 1 from (and into) the sizing cache, lobreplay.replay.cache

    def __post_init__(self):
        from lobreplay.reports.tables import config_names
        self.symbols = config_names(self.symbols, "symbols")
        self.symbols = list(self.symbols) if self.symbols is not None else None
        self.reports = ALL_REPORTS if self.reports is None else config_names(self.reports, "reports", ALL_REPORTS)
        for name in ("depth_levels", "depth_every_ns"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise InputError(f"{name}: expected a whole number >= 0, got {v!r}")
        self.timing_every = check_timing_every(self.timing_every)


# The books' memory from which a replay regroups each chunk's events by book
# (ReplayConfig.group_books): on the 1,000-symbol day (86 MiB of books) the core's time falls
# by a third, the events touching one book's memory at a time; where the books stay in the
# caches anyway the regrouping, on the reader's thread, costs more than it saves. Measured
# on this machine (32 MiB of L3) with the same day cut to N symbols: 300 books (30 MiB) a
# loss, 600 (56 MiB) a gain (benchmarks/RESULTS.md).
GROUP_BYTES = 48 << 20
PIECE = 1 << 18  # events per core call in pass 2: its output arrays have this many rows, reused


@dataclass
class Sizing:
    locate: int
    band_low: int     # the core's band: real prices, or for a mapped book ranks [0, levels - 1] at tick 1
    band_high: int
    tick: int
    capacity: int
    pmap: PriceMap | None = None  # a mapped book's prices (lobreplay.itch.prices)

    @property
    def levels(self) -> int:
        return (self.band_high - self.band_low) // self.tick + 1

    def grid(self) -> tuple[int | None, int | None, int | None]:
        """(low, high, tick) of the book's dense band in real prices (a ladder: None)."""
        if self.pmap is None:
            return self.band_low, self.band_high, self.tick
        m = self.pmap
        return (m.low, m.high, m.tick) if m.n else (None, None, None)


@dataclass
class _Pass1:
    stats: np.ndarray
    prices: dict = field(default_factory=dict)      # locate -> its distinct prices (candidates, read again)
    directory: dict = field(default_factory=dict)   # locate -> R fields
    symbols: dict = field(default_factory=dict)     # locate -> symbol (R, else order messages)
    system_events: list = field(default_factory=list)  # (time_ns, event code) of S messages
    seconds: float = 0.0
    messages: int = 0                                 # messages read
    non_ascii: int = 0                                # text bytes outside ASCII met by the pass
    cached: dict | None = None                        # from the sizing cache: its entry, the scan's time


def session_date(name: str) -> dt.date | None:
    """The session date from NASDAQ's file names (MMDDYYYY.NASDAQ_ITCH50, YYYYMMDD.BX_ITCH_50,
    S<MMDDYY>-v50) or any YYYYMMDD in the name."""
    base = os.path.basename(name)
    m = re.match(r"(\d{2})(\d{2})(\d{4})\.NASDAQ_ITCH", base)
    if m:
        return _date(int(m[3]), int(m[1]), int(m[2]))
    m = re.match(r"S(\d{2})(\d{2})(\d{2})-v50", base)
    if m:
        return _date(2000 + int(m[3]), int(m[1]), int(m[2]))
    for m in re.finditer(r"(?<!\d)((?:19|20)\d{2})(\d{2})(\d{2})(?!\d)", base):
        d = _date(int(m[1]), int(m[2]), int(m[3]))
        if d:
            return d
    return None


def _date(y: int, m: int, d: int) -> dt.date | None:
    try:
        return dt.date(y, m, d)
    except ValueError:
        return None


def given_date(text, where: str = "date") -> dt.date:
    """A session date given as YYYY-MM-DD (a --date, a config's date), or an InputError
    naming where it came from."""
    if isinstance(text, dt.date):
        return text
    try:
        return dt.date.fromisoformat(str(text))
    except ValueError:
        raise InputError(f"{where}: expected a date YYYY-MM-DD, got {text!r}") from None


def candidates(stats: np.ndarray, headroom: float, locates) -> list[int]:
    """The locates whose books could take a price map (lobreplay.itch.prices.map_candidate,
    from pass 1's range and gcd alone): those whose distinct prices size_books needs."""
    out = []
    for loc in locates:
        st = stats[int(loc)]
        tick = int(st["price_gcd"])
        if not tick:
            continue
        lo, hi = int(st["min_price"]), int(st["max_price"])
        low, high = padded(lo, hi, tick, headroom)
        known = int(st["distinct_min"]) if "distinct_min" in stats.dtype.names else 0  # (0: unknown)
        if map_candidate(tick, lo, hi, (high - low) // tick + 1, headroom, known):
            out.append(int(loc))
    return out


def size_books(stats: np.ndarray, headroom: float, locates, prices: dict | None = None,
               all_prices=None, prices_from: str = "read again from the file") -> tuple[list[Sizing], list[str]]:
    """Book sizes from pass-1 figures: tick = gcd of the prices, band = [min, max]
    widened by headroom (lobreplay.itch.prices.padded; never below 0), capacity = the peak
    number of live orders. The books that could take a price map (candidates) are sized from
    their distinct prices: prices (locate -> sorted array, prices_from saying where they
    came from), else all_prices(locates) (the same for those locates: the file read again
    for them). Such a book gets the map of least cost (choose_map) if it makes its band much
    smaller (worth_mapping); else a band wider than MAX_LEVELS levels is narrowed to the
    price range when that fits, or the book gets the exact map of its prices. Without its
    prices, a candidate keeps its plain band, or, too wide, is an InputError. Returns the
    sizes and notes (narrowed bands, prices read again)."""
    out, notes = {}, []
    locates = [int(x) for x in locates]
    have = dict(prices or {})
    cand = candidates(stats, headroom, locates)
    missing = [loc for loc in cand if loc not in have]
    fresh: set[int] = set()
    if missing and all_prices is not None:
        have.update(all_prices(missing))
        fresh = set(missing)
    for loc in locates:
        st = stats[loc]
        if st["price_gcd"] == 0:  # no order ever rested here
            continue
        tick = int(st["price_gcd"])
        lo, hi = int(st["min_price"]), int(st["max_price"])
        cap = max(1, int(st["peak_live"]))
        low, high = padded(lo, hi, tick, headroom)
        plain = (high - low) // tick + 1
        got = have.get(loc)
        m = choose_map(tick, got, headroom=headroom) if got is not None and plain > MAP_SAVING else None
        if got is not None and plain > MAP_SAVING:
            notes.append(f"locate {loc}: its prices {lo}..{hi} {'read again from the file' if loc in fresh else prices_from} "
                         f"({len(got):,} distinct)")
        if worth_mapping(plain, m) and m.levels <= MAX_LEVELS:
            out[loc] = Sizing(loc, 0, m.levels - 1, 1, cap, m)
        elif plain <= MAX_LEVELS:
            out[loc] = Sizing(loc, low, high, tick, cap)
        elif (hi - lo) // tick + 1 <= MAX_LEVELS:
            span = (MAX_LEVELS - 1) * tick
            extra = (span - (hi - lo)) // 2 // tick * tick
            low, high = max(0, lo - extra), lo - max(0, lo - extra) + hi + extra
            high = low + min(span, (high - low) // tick * tick)
            out[loc] = Sizing(loc, low, high, tick, cap)
            notes.append(f"locate {loc}: headroom cut to fit {MAX_LEVELS:,} levels at tick {tick}")
        elif m is None:
            raise InputError(f"locate {loc}: its prices {lo}..{hi} at tick {tick} need more than {MAX_LEVELS:,} "
                             f"levels, and its distinct prices are not at hand to map them")
        else:
            if m.levels > CORE_LEVELS:
                raise InputError(f"locate {loc}: {m.levels:,} distinct prices, more than a book holds "
                                 f"({CORE_LEVELS:,})")
            if len(m.extras):
                out[loc] = Sizing(loc, 0, m.levels - 1, 1, cap, m)
            else:
                out[loc] = Sizing(loc, m.low, m.high, m.tick, cap)
            notes.append(f"locate {loc}: a book of {m.levels:,} levels over its {len(got):,} distinct prices")
    return [out[loc] for loc in locates if loc in out], notes


def all_order_prices(path: str, locates: list[int], *, chunk_bytes: int = 8 << 20,
                     allow_truncated: bool = False, allow_gaps: bool = False) -> dict[int, np.ndarray]:
    """The distinct order prices (A, F, U) of these locates, sorted: the file read again,
    for them only (size_books: the books that could take a price map, candidates)."""
    select = np.zeros(65536, np.uint8)
    select[locates] = 1
    src = ItchFile(path, chunk_bytes=chunk_bytes, allow_truncated=allow_truncated, allow_gaps=allow_gaps)
    keys = [np.zeros(0, np.int64)]
    for chunk in src.chunks():
        loc, px = core.itch_order_prices(chunk.buf, chunk.offsets, chunk.types, chunk.n, select)
        if len(loc):
            keys.append(np.unique((loc.astype(np.int64) << 32) | px))
            if len(keys) > 64:
                keys = [np.unique(np.concatenate(keys))]
    key = np.unique(np.concatenate(keys))
    loc, px = key >> 32, key & 0xFFFFFFFF
    return {x: px[loc == x] for x in locates}


_NoBar = NoBar  # (lobreplay.replay.engine's)


class ItchReplay(Engine):
    """The ITCH 5.0 source of the replay engine (lobreplay.replay.engine.Engine): one replay of
    one file into one report directory (see replay_itch; lobreplay.open_itch drives it step by
    step). What is ITCH's own: pass 1 (ItchScan, the directory, the price maps), turning each
    chunk's messages into core events (lob_itch_events, on the reader's thread), and the
    report rows of what the core did."""

    def __init__(self, path: str, out_dir: str | None, cfg: ReplayConfig, *, pass1=None, hash_file: bool = True):
        """pass1 (a part of a parallel replay): (the whole file's pass 1, the locate -> part
        split), done by the parent; this replay then starts at pass 2.
        hash_file=False: no SHA-256 of the file (a parallel replay's parent computes it)."""
        super().__init__(path, out_dir, cfg)
        self.path = path
        self._given_pass1 = pass1
        self.src = ItchFile(path, chunk_bytes=cfg.chunk_bytes, allow_truncated=cfg.allow_truncated,
                            allow_gaps=cfg.allow_gaps)
        self.hash_file = hash_file and cfg.hash
        if cfg.part is not None and pass1 is None:
            raise ValueError("a part of a parallel replay starts from the parent's pass 1 (pass1=)")
        self.owner = None if pass1 is None else pass1[1]  # the part each locate belongs to (parallel replays)
        date = given_date(cfg.date, "--date") if cfg.date else session_date(path)
        self.date = date
        self.midnight_utc_ns = None
        if date is not None:
            midnight = dt.datetime(date.year, date.month, date.day, tzinfo=NY)
            self.midnight_utc_ns = int(midnight.timestamp()) * 1_000_000_000
        self.counts = {"desyncs": {}, "rejects": {}}
        self.session = None        # the core session of pass 2
        self._next_sample = None   # depth sampling: the next sample time (ns since midnight)
        self.grouped = False       # pass 2's events regrouped by book (cfg.group_books)
        self._dirty: set[int] = set()
        self._samples: list = []   # depth samples waiting to be written
        self._cur = None           # pass 2: the chunk being applied (a step may stop inside it)
        self._last_time = -1       # pass 2: the time of the last message applied
        self._entry: cache.Entry | None = None  # this file's sizing cache entry (sizing_pass)
        # trading states (H, h): lob_itch_events' per-locate state, kept by the reader's thread
        # from chunk to chunk, and the letter ('T', 'H', 'P', 'Q', 'h') the reports show, as it
        # stands after the events the core has applied (_state_now) and at the chunk's start
        self._itch_state = np.zeros(65536, np.uint16)
        self._state_now = np.full(65536, ord("T"), np.uint8)
        self._state_start = self._state_now.copy()
        self._chunk_states = True  # the current chunk may hold trading-state events (_step)
        self.halts = {"state_changes": 0, "halted_locates": set()}
        self.price_maps: PriceMaps | None = None  # pass 2's mapped books (lobreplay.itch.prices)

    # ---- helpers ----

    def _bar(self, desc: str):
        return progress_bar(self.cfg.progress, desc, self.src.size)

    def open(self) -> "ItchReplay":
        """The input is opened (and its start checked) by the constructor."""
        return self

    def run_source(self) -> dict:
        return self.src_meta()

    def _utc(self, time_ns: np.ndarray):
        if self.midnight_utc_ns is None:
            return pa.nulls(len(time_ns), pa.timestamp("ns", tz="UTC"))
        return (time_ns + self.midnight_utc_ns).astype("datetime64[ns]")

    # ---- pass 1 ----

    def pass1(self, threads: int = 1) -> _Pass1:
        """The sizing scan of the whole file. threads > 1: the locates shared out (locate %
        threads); each chunk is read and framed once, its messages split by share in one C
        pass, and each share scanned by its own ItchScan on its own thread (the scan releases
        the GIL)."""
        t0 = time.perf_counter()
        scans = [core.ItchScan() for _ in range(threads)]
        owner = (np.arange(65536) % threads).astype(np.uint8)
        pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="lobreplay-scan") if threads > 1 else None
        offs = types = None
        p1 = _Pass1(stats=np.empty(0))
        self._done = (1, 0)
        harvest = None  # no directory at the start: take symbols from the order messages
        with self._bar("pass 1") as bar, (pool or contextlib.nullcontext()):
            # the next chunk read and framed meanwhile, on a core the scans leave
            for chunk, _ in read_ahead(self.src, thread=self._spare_core(threads)):
                if threads == 1:
                    scans[0].feed(chunk.buf, chunk.offsets, chunk.types, chunk.n)
                else:
                    if offs is None or offs.shape[1] < chunk.n:
                        offs = np.empty((threads, chunk.n + chunk.n // 4), np.uint32)
                        types = np.empty(offs.shape, np.uint8)
                    counts = core.itch_partition(chunk.buf, chunk.offsets, chunk.types, chunk.n, owner, offs, types)
                    feeds = [pool.submit(scans[k].feed, chunk.buf, offs[k, :c], types[k, :c], c)
                             for k, c in enumerate(counts.tolist()) if k]
                    scans[0].feed(chunk.buf, offs[0, :int(counts[0])], types[0, :int(counts[0])], int(counts[0]))
                    for f in feeds:  # every scan is done with the chunk before the reader reuses its buffer
                        f.result()
                present = chunk.present()
                if "R" in present:
                    r = decode_type(chunk, "R")
                    for i, loc in enumerate(r["stock_locate"].tolist()):
                        if loc not in p1.directory:
                            p1.directory[loc] = {k: (v[i].decode() if v.dtype.kind == "S" else v[i].item())
                                                 for k, v in r.items()}
                            p1.symbols[loc] = p1.directory[loc]["stock"]
                if "S" in present:
                    sev = decode_type(chunk, "S", with_index=False)
                    p1.system_events += list(zip(sev["timestamp"].tolist(),
                                                 np.char.decode(sev["event_code"], "ascii").tolist()))
                if harvest is None:
                    harvest = not p1.directory
                if harvest:
                    for t in "AFPQ":
                        if t in present:
                            cols = decode_type(chunk, t, with_index=False)
                            locs, first = np.unique(cols["stock_locate"], return_index=True)
                            for loc, i in zip(locs.tolist(), first.tolist()):
                                p1.symbols.setdefault(loc, cols["stock"][i].decode())
                self._done = (1, chunk.first_message + chunk.n)
                bar.update(self.src.raw_position - bar.n)
        rows = np.stack([sc.stats() for sc in scans])
        loc = np.arange(65536)
        p1.stats = rows[loc % threads, loc]  # each locate's figures from the scan that saw it
        p1.messages = self.src.stats.messages
        p1.seconds = time.perf_counter() - t0
        return p1

    def sizing_pass(self, threads: int = 1) -> _Pass1:
        """Pass 1, or what an earlier replay's pass 1 found in this same file (the sizing
        cache, lobreplay.replay.cache; cfg.cache; a scan is stored there at once). After a scan, the
        distinct prices of the books that could take a price map (candidates, at
        cfg.headroom) are read from the file again, if there are any. keep_pass1, at the
        end of a replay that succeeded, completes or checks the entry."""
        t0 = time.perf_counter()
        self._entry = cache.Entry(self.path, "itch-pass1", self.notes, enabled=self.cfg.cache,
                                  allow_truncated=self.cfg.allow_truncated)
        got = self._entry.find()
        if got is not None:
            try:
                return _pass1_of_entry(*got, self._entry.where, t0)
            except (KeyError, TypeError, ValueError) as e:
                self._entry.unusable(f"{type(e).__name__}: {e}")
        ascii0 = non_ascii_bytes()
        p1 = self.pass1(threads)
        p1.non_ascii = non_ascii_bytes() - ascii0
        # the books that could take a price map (of every locate: a part of a parallel replay, a
        # replay of other symbols from the cache entry, find theirs here): their prices read again
        cand = candidates(p1.stats, self.cfg.headroom, np.flatnonzero(p1.stats["price_gcd"]))
        if cand:
            p1.prices = self._all_prices(cand)
        if self._entry.where:
            self._entry.scanned(*_entry_of_pass1(p1))
        return p1

    def keep_pass1(self, sha256: str) -> None:
        """After a replay that succeeded: the file's SHA-256 added to the sizing cache entry,
        or, for a pass 1 from the cache, checked against the entry's (InputError, the entry
        removed, if they differ)."""
        if self._entry is not None:
            self._entry.finish(sha256)

    # ---- pass 2 ----

    def where(self) -> dict:
        """How far the replay got: its pass (0: before the first), the messages done in it
        (whole chunks: in pass 2, replayed by the core; no report holds a row past them), and
        the file's bytes read (compressed, for gzip; the reader runs a chunk or two ahead)."""
        p, m = self._done
        return {"pass": p, "messages_done": m, "file_bytes_read": self.src.raw_position, "file_bytes": self.src.size}

    def where_text(self) -> str:
        w = self.where()
        if not w["pass"]:
            return f"{self.path}: before the first pass"
        return (f"{self.path}: in pass {w['pass']}, after {w['messages_done']:,} messages "
                f"({w['file_bytes_read']:,} of {w['file_bytes']:,} bytes read)")

    def _begin(self, run: ReplayRun) -> None:
        """Pass 1 (or the parent's, or the sizing cache's), the books sized, the reports opened,
        pass 2 set up."""
        cfg = self.cfg
        self._ascii0 = non_ascii_bytes()
        if self.hash_file:
            self.start_hash(self.src.size)
        p1 = self.sizing_pass() if self._given_pass1 is None else self._given_pass1[0]
        if cfg.reports:
            load()  # pyarrow (a thread importing it during pass 1 gained nothing: RESULTS.md)
        meta = self.src_meta(sha256_later=True)
        locates = self._select(p1)
        sizing, notes = size_books(p1.stats, cfg.headroom, locates, prices=p1.prices, all_prices=self._all_prices,
                                   prices_from="from the sizing cache entry" if p1.cached else
                                   "read again from the file")
        # a part of a parallel replay writes streams, which the merge reads back once
        run.reports = self._reports([r for r in cfg.reports if r not in ("symbols", "depth")], meta,
                                    stream=cfg.part is not None)
        if cfg.depth_levels and "depth" in cfg.reports:
            run.reports.extra_names.add("depth")
        self._p1, self._sizing, self._size_notes = p1, sizing, notes
        self._pass2(p1, sizing, run.reports)

    def _end(self, run: ReplayRun) -> None:
        """After the last chunk: the reports of the end (residual orders, latency, symbols) and
        the summary."""
        cfg, p1 = self.cfg, self._p1
        run.summary.update(self._pass2_end(p1, self._sizing, run.reports))
        run.summary["source"] = self.src_meta()  # with the file's SHA-256
        if self._given_pass1 is None:
            self.keep_pass1(run.summary["source"]["source_sha256"])
        run.summary["notes"] = self._size_notes + self.notes + ([] if cfg.hash else
                                                                ["no SHA-256 of the input (--no-hash): source_sha256 is empty"])
        # (bytes outside ASCII in text fields, written as "?": counted each time a field is
        # decoded, so a damaged S or C message read by both passes counts twice; pass 1's
        # count comes with it from the sizing cache)
        from_cache = p1.non_ascii if p1.cached and self._given_pass1 is None else 0  # (a part: the parent's)
        run.summary["text_bytes_outside_ascii"] = non_ascii_bytes() - self._ascii0 + from_cache
        run.summary["pass1"] = pass1_summary(p1)

    def _share(self, mask: np.ndarray) -> np.ndarray:
        """This replay's share of the locates (all, or those self.owner gives to this part)."""
        if self.cfg.part is None:
            return mask
        out = mask.copy()
        out[self.owner != self.cfg.part[0]] = 0
        return out

    def _spare_core(self, busy: int | None = None) -> bool:
        """Whether a reader thread has a core to itself beside `busy` (default: the parts
        of a parallel replay, else 1) other busy threads or processes."""
        if busy is None:
            busy = self.cfg.part[1] if self.cfg.part is not None else 1
        return usable_cpus() > busy

    def _select(self, p1: _Pass1) -> list[int]:
        with_orders = [int(x) for x in np.flatnonzero(self._share(p1.stats["price_gcd"] != 0))]
        if not self.cfg.symbols:
            return with_orders
        by_symbol = {s: loc for loc, s in p1.symbols.items()}
        missing = [s for s in self.cfg.symbols if s not in by_symbol]
        if missing:
            raise InputError(f"{self.path}: no such symbol(s) in this file: {', '.join(missing)}")
        wanted = {by_symbol[s] for s in self.cfg.symbols}
        return [loc for loc in with_orders if loc in wanted]

    def _all_prices(self, locates: list[int]) -> dict[int, np.ndarray]:
        return all_order_prices(self.path, locates, chunk_bytes=self.cfg.chunk_bytes,
                                allow_truncated=self.cfg.allow_truncated, allow_gaps=self.cfg.allow_gaps)

    def _add_books(self, sess: Session, sizing: list[Sizing], symbols: dict) -> None:
        for z in sizing:
            try:
                sess.add_book(z.locate, z.band_low, z.band_high, z.tick, z.capacity)
            except LobError as e:
                raise InputError(f"{self.path}: {symbols.get(z.locate, '?')} (locate {z.locate}): its book "
                                 f"({z.levels:,} levels, {z.capacity:,} orders): {e}") from None

    def _pass2(self, p1: _Pass1, sizing: list[Sizing], reports: ReportSet) -> None:
        """Pass 2 set up: the session and its books, the reader (a thread turning each chunk
        into core events while the core applies the one before), the core's output arrays.
        _step applies the chunks, _pass2_end ends it."""
        cfg = self.cfg
        sess = Session(65535)
        self.session = sess
        self._add_books(sess, sizing, p1.symbols)
        pm = PriceMaps({z.locate: z.pmap for z in sizing if z.pmap is not None})
        pm = pm if len(pm) else None
        self.price_maps = pm
        sess.set_timing(cfg.timing, every=cfg.timing_every)
        select = np.zeros(65536, np.uint8)
        select[[z.locate for z in sizing]] = 1
        # feed rows (executions, status) of every locate, unless the replay is restricted to
        # symbols (then theirs and locate 0's: system-wide messages) or is one part of a
        # parallel replay (then its share of the locates, locate 0 in part 0)
        mask = np.ones(65536, np.uint8)
        if cfg.symbols:
            mask = select.copy()
            mask[0] = 1
        self.feed_select = self._share(mask)  # (after the symbols: each part writes locate 0 once over)
        # (pyarrow: not without reports)
        symtab = _symbol_table(p1.symbols) if cfg.reports else None
        want_bbo = "bbo" in reports
        self._desync_per_locate = np.zeros(65536, np.int64)
        self._n_events = 0
        self._last_ts = 0
        self._t0 = time.perf_counter()
        self._core_s = 0.0  # in the core's calls (_apply_chunk)
        slots: list[tuple[np.ndarray, ...] | None] = [None, None]

        def events_of(chunk, slot: int):
            """On the reader's thread: the chunk's events into the slot's arrays (reused;
            a quarter to spare: chunks differ in messages)."""
            if slots[slot] is None or len(slots[slot][0]) < chunk.n:
                cap = chunk.n + chunk.n // 4
                slots[slot] = tuple(np.empty(cap, d) for d in (EVENT_DTYPE, np.int64, np.uint32) * (1 + group))
            ev, ts, mi = slots[slot][:3]
            k = core.itch_events(chunk.buf, chunk.offsets, chunk.types, chunk.n, select, ev, ts, mi,
                                 self._itch_state)
            extra = None
            if not group:
                out, extra = self._chunk_events(chunk, ev[:k], ts[:k], mi[:k])
            else:
                out = tuple(a[:k] for a in slots[slot][3:])
                core.itch_group(ev[:k], ts[:k], mi[:k], counts, *out)  # (event order within each book kept)
            if pm is None:
                return out + (None, extra)
            real = out[0]["price"].copy()  # (the events' real prices, for the reports)
            pm.to_core(out[0])
            return out + (real, extra)

        sampling = bool(cfg.depth_levels and "depth" in reports and cfg.depth_every_ns)  # cuts chunks by time
        group = (sess.book_bytes >= GROUP_BYTES and not sampling) if cfg.group_books is None else cfg.group_books
        self.grouped = group
        if group and sampling:
            raise InputError("group_books: not with depth samples by time (--depth with --every > 0)")
        counts = np.empty(65536, np.uint32) if group else None
        # the core's outputs: PIECE rows each, reused for every call; with timing on written
        # once now, as a first write to a fresh page inside the core would be a page fault
        # timed as an event's latency
        prep = _touched if cfg.timing else (lambda a: a)
        scratch = (prep(np.empty(PIECE, RESULT_DTYPE)), prep(np.empty(PIECE, BBO_DTYPE)) if want_bbo else None,
                   prep(np.empty(PIECE, np.uint32)) if want_bbo else None)
        change_depth = self._change_levels(reports, sampling)
        self._pass2_state = (sess, pm, select, symtab, scratch, change_depth, sampling, group, reports)
        self._done = (2, 0)
        self._bar2 = self._bar("pass 2")
        self._bar2.__enter__()
        self._chunks = read_ahead(self.src, events_of, slots=len(slots), thread=self._spare_core())

    def _step(self, target=None, capture: bool = False) -> Piece | None:
        """Apply the rest of the current chunk (the next one's, once it is done), or, with a
        target, its part before the first message at or past it (None: reached, or the end
        of the file). One core call per piece of at most PIECE events, and the piece's rows."""
        sess, pm, select, symtab, scratch, change_depth, sampling, group, reports = self._pass2_state
        if self._cur is None:
            item = next(self._chunks, None)
            if item is None:
                self._ended = True
                return None
            self._cur = item
            self._lo = (0, 0)  # (the first event, the first message position) not yet applied
        chunk, (ev, ts, mi, real, extra) = self._cur
        elo, plo = self._lo
        phi, ehi = chunk.n, len(ev)
        if target is not None:
            cut = self._cut(chunk, plo, target)
            if cut <= plo:
                return None
            if cut < chunk.n:
                if group:
                    raise InputError("a replay that stops inside a chunk keeps its events in file order "
                                     "(group_books=False)")
                phi, ehi = cut, elo + int(np.searchsorted(mi[elo:], cut))
        if elo or ehi < len(ev):
            ev, ts, mi = ev[elo:ehi], ts[elo:ehi], mi[elo:ehi]
            real = real[elo:ehi] if real is not None else None
        k = len(ev)
        # (trading-state events come from H and h messages only: without one in the chunk,
        # every book's state is the one at the chunk's start, and no event needs looking at)
        self._chunk_states = chunk.has("H") or chunk.has("h")
        out, rejects = self._apply_chunk(sess, ev, ts, scratch, change_depth, sampling)
        if pm is not None:
            self._real_prices(pm, out, ev, real)
        self._n_events += k
        if k:  # the piece's last event in file order
            self._last_ts = int(ts[int(np.argmax(mi))] if group else ts[k - 1])
        self._done = (2, chunk.first_message + phi)  # (replayed; its rows come next)
        self._last_time = int(timestamps(chunk, np.array([phi - 1]))[0])
        span = None if plo == 0 and phi == chunk.n else (plo, phi)
        self._piece_rows(chunk, ev, ts, mi, out, rejects, span, (elo, ehi), extra)
        self._bar2.update(self.src.raw_position - self._bar2.n)
        piece = Piece(chunk.first_message + plo, chunk.first_message + phi)
        if capture:
            piece.events = self._events_table(ev, ts, mi, chunk.first_message, symtab)
        if phi == chunk.n:
            self._cur = None
        else:
            self._lo = (ehi, phi)
        return piece

    # ---- what the engine hands on: a consumer of the ITCH source (the LOBSTER export) replaces these ----

    def _chunk_events(self, chunk, ev, ts, mi):
        """On the reader's thread, in file order: a chunk's core events (ev, ts, mi, as
        lob_itch_events made them, real prices) as the core is to apply them, and what
        _piece_rows is to get with them (None here). A consumer may reshape them (new
        arrays, still in file order: mi never falls)."""
        return (ev, ts, mi), None

    def _change_levels(self, reports, sampling: bool) -> int:
        """N: the core writes the N best levels after every event that changed them (out.depth
        of _piece_rows); 0: none. Here: the depth report's --every change."""
        cfg = self.cfg
        return cfg.depth_levels if cfg.depth_levels and "depth" in reports and not sampling else 0

    def _piece_rows(self, chunk, ev, ts, mi, out, rejects, span, events_span, extra) -> None:
        """What one step applied, handed on: the piece's events (ev, ts, mi: their positions
        in the chunk; real prices), the core's rows (out: a BatchResult, event indices into
        ev), the events it refused (rejects), span (the piece's message positions lo..hi in
        the chunk; None: all of it), events_span (the piece's events lo..hi among the chunk's)
        and _chunk_events' extra. Here: the reports' rows."""
        sess, pm, select, symtab, scratch, change_depth, sampling, group, reports = self._pass2_state
        if change_depth:
            self._depth_changes(out.depth, ev, ts, mi, symtab, reports)
        elif sampling:
            self._flush_samples(symtab, reports)
        self._chunk_reports(chunk, ev, ts, mi, out, rejects, symtab, select, reports, self._desync_per_locate,
                            span=span)

    def close(self) -> None:
        """As Engine.close, and pass 2's reader stopped (its thread joined) if it runs."""
        super().close()
        chunks = getattr(self, "_chunks", None)
        if chunks is not None:
            chunks.close()

    def _cut(self, chunk, plo: int, target) -> int:
        """The position in the chunk (>= plo) of the first message at or past the target."""
        kind, v = target
        if kind == "number":
            return int(min(max(v - chunk.first_message, plo), chunk.n))
        if kind == "epoch":
            v -= self.midnight_utc_ns
        t = timestamps(chunk, np.arange(plo, chunk.n))
        hit = np.flatnonzero(t >= v)
        return plo + int(hit[0]) if len(hit) else chunk.n

    def _position(self, target) -> str | None:
        kind, v = target
        if kind == "epoch" and self.midnight_utc_ns is None:
            raise InputError(f"{self.path}: no session date (from the file name or date=): give a time of day")
        if kind == "number":
            return f"message {self._done[1]:,}" if v < self._done[1] else None
        if kind == "epoch":
            v -= self.midnight_utc_ns
        return f"time {_clock(self._last_time)}" if v < self._last_time else None

    def _events_table(self, ev, ts, mi, first_message: int, symtab) -> pa.Table:
        """A step's core events (real prices), for chunks(): a copy (the reader reuses the arrays)."""
        from lobreplay.core.events import Kind as K
        names = np.array([K(k).name if k in K._value2member_map_ else str(k) for k in range(256)], object)
        loc = ev["instrument"].astype(np.uint16)
        cols = {"event_ns": ts.copy(), "sequence": first_message + mi.astype(np.int64), "instrument": loc,
                "symbol": symbols_of(symtab, loc) if symtab is not None else _arrow.array(loc),
                "kind": _arrow.strings(names[ev["kind"]].tolist()),
                "side": _arrow.strings(np.array(["", "B", "S"], object)[np.minimum(ev["side"], 2)].tolist()),
                "order_ref": ev["id"].copy(), "new_ref": ev["new_id"].copy(), "price": ev["price"].copy(),
                "qty": ev["qty"].copy()}
        return pa.table({k: v if isinstance(v, (pa.Array, pa.ChunkedArray)) else _arrow.array(v)
                         for k, v in cols.items()})

    def book(self, symbol: str) -> BookAt:
        """The live book of a symbol at the replay's current place, prices in feed units.

            r = lobreplay.open_itch("day.itch", symbols=["AAPL"]); r.run_until("10:00")
            r.book("AAPL").depth("B", 10)   # [(price, shares, orders), ...] best first
        """
        if self.session is None:
            raise LobError("book(): the replay has not started (lobreplay.open_itch)")
        by_symbol = {s: loc for loc, s in self._p1.symbols.items()}
        loc = by_symbol.get(str(symbol))
        if loc is None:
            raise InputError(f"{self.path}: no such symbol in this file: {symbol}")
        if loc not in {z.locate for z in self._sizing}:
            raise InputError(f"{symbol}: not replayed (not among symbols=, or no orders in the file)")
        pm = self.price_maps
        if pm is not None and loc in pm.locates:
            def real(p, present):
                return pm.real(np.full(len(p), loc), p, present)
        else:
            def real(p, present):
                return p
        return BookAt(self.session.book(loc), str(symbol), real)

    def _pass2_end(self, p1: _Pass1, sizing: list[Sizing], reports: ReportSet) -> dict:
        """After the last chunk: the last depth samples, the residual orders, latency, symbols;
        the summary's figures."""
        cfg = self.cfg
        sess, pm, select, symtab, scratch, change_depth, sampling, group, reports = self._pass2_state
        self._bar2.__exit__(None, None, None)
        self._chunks.close()
        n_events, last_ts, t0 = self._n_events, self._last_ts, self._t0
        desync_per_locate = self._desync_per_locate
        if cfg.depth_levels and "depth" in reports and cfg.depth_every_ns and self._dirty:
            # the books changed since their last sample, at the first boundary after the file's
            # last message (pass 1's, so every --jobs part picks the same): as the feed left them
            seen = p1.stats["first_ts"] >= 0
            end = int(p1.stats["last_ts"][seen].max()) if seen.any() else last_ts
            when = max((end // cfg.depth_every_ns + 1) * cfg.depth_every_ns, self._next_sample or 0)
            self._sample(sess, when)
            self._flush_samples(symtab, reports)
        pass2_s = time.perf_counter() - t0
        self.last_event_ns = last_ts  # a parallel replay's residual rows take the latest part's
        residual = self._residuals(sess, sizing, symtab, last_ts, reports, desync_per_locate)
        read = self.src.stats
        if "latency" in reports:
            self._latency(sess, sizing, symtab, reports)
            if cfg.timing and cfg.part is None:  # a parallel replay writes them from the merged histograms
                from lobreplay.reports.hgrm import export_session_hgrm
                export_session_hgrm(sess, self.out_dir)
                hists = {k.name: sess.histogram(k) for k in Kind}
                hists["ALL"] = sum(hists.values())
                reports.write_table("latency_histograms", histogram_table(hists))
        clock = sess.clock(200_000) if cfg.timing else None
        if "symbols" in cfg.reports:
            self._symbols(p1, sizing, desync_per_locate, residual, reports.stream)
        n_desync = int(sum(self.counts["desyncs"].values()) + sum(self.counts["rejects"].values()))
        execs = int(p1.stats["executions"][[z.locate for z in sizing]].sum()) if sizing else 0
        causes = {**self.counts["desyncs"], **{f"{k}": v for k, v in self.counts["rejects"].items()}}
        return {
            "messages": read.messages, "messages_by_type": dict(sorted(read.by_type.items())),
            "unknown_types": read.unknown_types(), "bytes": read.bytes,
            "end_of_session_marker": read.end_marker,
            "truncated": read.truncation(),
            "moldudp64": read.moldudp64(),
            "system_events": [{"time_ns": t, "code": c} for t, c in p1.system_events],
            "session_complete": any(c == "C" for _, c in p1.system_events),
            "symbols_in_file": len(p1.symbols), "books": len(sizing),
            "book_levels": int(sum(z.levels for z in sizing)),
            "book_bytes": sess.book_bytes,
            # books with a price map (far-off or off-tick prices: docs/itch.md), their extra
            # prices, and the orders (adds and replaces) at those prices
            "mapped_books": len(pm) if pm is not None else 0,
            "extra_prices": int(sum(len(z.pmap.extras) for z in sizing if z.pmap is not None)),
            "orders_outside_band": int(pm.outside.sum()) if pm is not None else 0,
            "book_capacity": int(sum(z.capacity for z in sizing)),
            "events": n_events, "executions_in_feed": execs,
            "desyncs": n_desync, "desyncs_by_cause": causes,
            "desync_rate_per_execution": desync_rate(n_desync, causes, execs),
            "residual_orders": int(sum(residual.values())),
            "trading_states": {"state_changes": self.halts["state_changes"],
                               "books_halted": len(self.halts["halted_locates"]),
                               "books_halted_at_end": sum(1 for z in sizing if sess.book(z.locate).halted)},
            "report_rows": reports.rows(),
            "clock": ({"source": clock["source"], "ns_per_tick": round(clock["ns_per_tick"], 6),
                       "reading_cost_ns": round(clock["cost_ns"], 1), "smallest_step_ns": clock["min_step_ns"],
                       "note": "each latency figure includes about one reading"} if clock else None),
            "pass2": {"seconds": round(pass2_s, 3), "core_seconds": round(self._core_s, 3), "grouped_by_book": group,
                      "timing_every": cfg.timing_every if cfg.timing else 0,
                      "messages_per_second": round(read.messages / pass2_s) if pass2_s else None,
                      "core_events_per_second": round(n_events / self._core_s) if self._core_s else None},
        }

    def _apply_chunk(self, sess, ev, ts, scratch, depth_levels: int, sampling: bool):
        """Apply a chunk's events in pieces of at most PIECE events, each into the same
        output arrays (scratch: results, bbo rows, bbo events), and with depth samples by
        time also in pieces that end at each multiple of depth_every_ns, sampling the N-level
        book of every symbol that had events since its last sample there (the book as it
        stands after every event with time_ns < the sample time). depth_levels > 0: the rows
        of every change of the N best levels. Returns the chunk's rows (a BatchResult without
        per-event results; event indices into the chunk) and its rejects: the events the core
        refused and their statuses."""
        res, bbo, bev = scratch
        self._state_start = self._state_now.copy()
        cuts = [(hi, None) for hi in range(PIECE, len(ev), PIECE)]  # (Session.apply_pieces: the pieces)
        every = self.cfg.depth_every_ns
        if sampling:
            if self._next_sample is None and len(ts):
                self._next_sample = (int(ts[0]) // every + 1) * every
            if len(ts) and self._next_sample is not None and ts[-1] >= self._next_sample:
                times = np.arange(self._next_sample, int(ts[-1]) + 1, every, dtype=np.int64)
                cuts += zip(np.searchsorted(ts, times, side="left").tolist(), times.tolist())
                cuts.sort(key=lambda c: (c[0], c[1] is not None))  # (a sample after the piece that ends there)
        rparts = []
        aside = [0.0]  # the time of at_cut's own work (not the core's)

        def at_cut(lo, hi, results, when):
            """After each piece: its rejects, the books it touched, the trading states after
            it; at a sample time, the sample."""
            t = time.perf_counter()
            if hi > lo:
                st = results["status"]
                if st.any():  # (no copy of the strided field otherwise)
                    bad = np.flatnonzero(st)
                    rparts.append((bad + lo, st[bad]))
                if sampling:
                    self._dirty.update(np.unique(ev["instrument"][lo:hi]).tolist())
                self._states_after(ev[lo:hi])
            if when is not None:
                self._sample(sess, when)
                self._next_sample = when + every
            aside[0] += time.perf_counter() - t

        t = time.perf_counter()
        out = sess.apply_pieces(ev, cuts, at_cut, results=res, bbo=bbo, bbo_changes=bev if bbo is not None else None,
                                depth_levels=depth_levels)
        self._core_s += time.perf_counter() - t - aside[0]
        rejects = ((np.concatenate([r[0] for r in rparts]), np.concatenate([r[1] for r in rparts])) if rparts
                   else (np.empty(0, np.int64), np.empty(0, np.int32)))
        return out, rejects

    def _states_after(self, ev: np.ndarray) -> None:
        """_state_now after these events (their STATE events, in order)."""
        if not self._chunk_states:
            return
        k = np.flatnonzero(ev["kind"] == Kind.STATE)
        if len(k):
            locs = ev["instrument"][k]
            self._state_now[locs] = ev["price"][k].astype(np.uint8)  # (repeats: the last one stays)
            self.halts["state_changes"] += len(k)
            self.halts["halted_locates"].update(locs[ev["qty"][k] == 1].tolist())

    def _states_at(self, ev: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The trading state letter of each row's book after event rows[i] of this chunk:
        the last STATE event of its book at or before it, else the state at the chunk's start."""
        locs = ev["instrument"][rows]
        out = self._state_start[locs]
        if not self._chunk_states:
            return out
        k = np.flatnonzero(ev["kind"] == Kind.STATE)
        if len(k) and len(rows):
            key = (ev["instrument"][k].astype(np.int64) << 32) | k
            o = np.argsort(key, kind="stable")
            key, k = key[o], k[o]
            want = (locs.astype(np.int64) << 32) | rows
            j = np.searchsorted(key, want, side="right") - 1
            hit = (j >= 0) & ((key[np.maximum(j, 0)] >> 32) == locs)
            out = out.copy()
            out[hit] = ev["price"][k[j[hit]]].astype(np.uint8)
        return out

    @staticmethod
    def _real_prices(pm: PriceMaps, out, ev: np.ndarray, real: np.ndarray) -> None:
        """A chunk's core outputs and events back to real prices, in place, where their books
        are mapped (the others' are real already): the executions, bbo and depth rows
        (levels that are there: an empty side's 0 stays), the desyncs' prices (the feed's
        expected price from the event, but a fill order's, which is the book's) and the
        events' own (the reports read them: rejects)."""
        x = out.execs
        if len(x):
            x["price"] = pm.real(x["instrument"], x["price"])
        b = out.bbo
        if b is not None and len(b):
            for side in ("bid", "ask"):
                b[f"{side}_price"] = pm.real(b["instrument"], b[f"{side}_price"], b[f"{side}_count"] > 0)
        d = out.desyncs
        if len(d):
            fill = d["cause"] == Cause.FILL_ORDER
            d["expected_price"] = np.where(fill, pm.real(d["instrument"], d["expected_price"]),
                                           real[d["event_index"].astype(np.int64)])
            d["found_price"] = pm.real(d["instrument"], d["found_price"])
        z = out.depth
        if z is not None and len(z["event"]):
            p = z["prices"]
            inst = np.repeat(ev["instrument"][z["event"].astype(np.int64)], p.shape[1] * p.shape[2])
            z["prices"] = pm.real(inst, p.ravel(), z["counts"].ravel() > 0).reshape(p.shape)
        ev["price"] = real

    def _sample(self, sess, when: int) -> None:
        """Queue one depth sample of every book with events since its last sample
        (written once per chunk: one row group per chunk, not per sample)."""
        if not self._dirty:
            return
        n = self.cfg.depth_levels
        locs = np.array(sorted(self._dirty), np.uint16)
        self._dirty.clear()
        p, q, c = sess.depth(locs, n)
        if self.price_maps is not None:
            p = self.price_maps.real(np.repeat(locs, 2 * n), p.ravel(), c.ravel() > 0).reshape(p.shape)
        self._samples.append((np.full(len(locs), when, np.int64), locs, p, q, c, self._state_now[locs]))

    def _flush_samples(self, symtab, reports) -> None:
        """The samples queued since the last flush as one table (one Arrow table per sample
        cost ~0.6 ms and its own buffers: --every 1s over a day was minutes and GiBs)."""
        if self._samples:
            t, locs, p, q, c, st = (np.concatenate(x) for x in zip(*self._samples))
            reports.write_table("depth", self._depth_table(t, locs, p, q, c, st, symtab))
            self._samples = []

    def _depth_table(self, t: np.ndarray, locs: np.ndarray, p, q, c, states, symtab) -> pa.Table:
        """depth.parquet rows: time, instrument, symbol, trading state, then the N levels of both sides."""
        n = self.cfg.depth_levels
        cols = {"event_ns": t, "event_ts": _ts_array(self._utc(t)), "instrument": locs, "symbol": symbols_of(symtab, locs),
                "trading_state": states_of(states)}
        for i in range(n):
            for side, key in ((0, "bid"), (1, "ask")):
                cols[f"{key}_price_{i + 1}"] = p[:, side, i]
                cols[f"{key}_qty_{i + 1}"] = q[:, side, i]
                cols[f"{key}_count_{i + 1}"] = c[:, side, i]
        schema = schemas.itch_depth_schema(n)
        return pa.Table.from_arrays([_arrow.array(cols[f.name], f.type) for f in schema], schema=schema)

    def _file_order(self, e: np.ndarray, mi: np.ndarray, *rows: np.ndarray) -> tuple:
        """e (the events the core wrote rows for) and the rows, in file order: after a pass
        regrouped by book the rows came book by book (each book's in its order)."""
        if not self.grouped:
            return (e, *rows)
        o = np.argsort(mi[e], kind="stable")
        return (e[o], *(r[o] for r in rows))

    def _depth_changes(self, depth, ev, ts, mi, symtab, reports) -> None:
        """--every change: a row after every event that changed a book's N best levels."""
        e, p, q, c = self._file_order(depth["event"].astype(np.int64), mi, depth["prices"], depth["qtys"],
                                      depth["counts"])
        if len(e):
            reports.write_table("depth", self._depth_table(ts[e], ev["instrument"][e].astype(np.uint16), p, q, c,
                                                           self._states_at(ev, e), symtab))

    def _count(self, bucket: str, names: np.ndarray) -> None:
        u, c = np.unique(names, return_counts=True)
        for name, n in zip(u.tolist(), c.tolist()):
            self.counts[bucket][name] = self.counts[bucket].get(name, 0) + n

    def _chunk_reports(self, chunk, ev, ts, mi, out, rejects, symtab, select, reports: ReportSet,
                       per_locate, span: tuple[int, int] | None = None) -> None:
        """The rows of what a piece of a chunk did: its events (ev, ts, mi: their positions in
        the chunk), the core's output, the events it refused; span: the piece's messages
        (positions lo..hi of the chunk; None: the whole chunk)."""
        msg = chunk.first_message + mi.astype(np.int64) if reports.writers else None  # (only reports use it)
        if self.cfg.status_tables and self.cfg.reports:
            for t, idx in _within(positions_of(chunk, STATUS_TYPES), span).items():  # (one pass over the chunk)
                cols = decode_type(chunk, t, idx=idx)
                keep = self.feed_select[cols["stock_locate"]] == 1
                if keep.any():
                    reports.write_table(f"status_{t}_{LAYOUTS[t].name}",
                                        to_arrow({k: v[keep] for k, v in cols.items()}, t), price_metadata(t))
        # rejects: events the core refused (unknown references, duplicates, ...)
        bad, codes = rejects
        rej_cause = np.array([REJECT_CAUSE.get(Status(int(c)), Status(int(c)).name.lower())
                              for c in codes.tolist()], dtype=object)
        if len(bad):
            self._count("rejects", rej_cause)
            np.add.at(per_locate, ev["instrument"][bad], 1)
        d = out.desyncs
        di = d["event_index"].astype(np.int64)
        kinds = ev["kind"][di]
        d_cause = np.array([CORE_CAUSE.get(c, CROSSED_BY_KIND.get(k, "crossed_add"))
                            for c, k in zip(d["cause"].tolist(), kinds.tolist())], dtype=object)
        if len(d):
            self._count("desyncs", d_cause)
            np.add.at(per_locate, d["instrument"], 1)
        if "desyncs" in reports and (len(bad) or len(d)):
            idx = np.concatenate([bad, di])
            o = np.argsort(msg[idx], kind="stable")  # (rejects and core desyncs in file order; sorted in
            idx = idx[o]                              # numpy: an Arrow sort imports pyarrow.compute, 60-75 ms)
            zero = np.zeros(len(bad), np.int64)
            pairs = {"order_ref": (ev["id"][bad], d["order_id"]), "cause": (rej_cause, d_cause),
                     "other_ref": (ev["new_id"][bad], d["found_id"]),
                     "expected_qty": (ev["qty"][bad], d["expected_qty"]), "found_qty": (zero, d["found_qty"]),
                     "expected_price": (ev["price"][bad], d["expected_price"]),
                     "found_price": (zero, d["found_price"])}  # (the rejects', then the desyncs')
            reports.write("desyncs", {
                "event_ns": ts[idx], "event_ts": self._utc(ts[idx]), "sequence": msg[idx],
                "instrument": ev["instrument"][idx], "symbol": symbols_of(symtab, ev["instrument"][idx]),
                **{k: np.concatenate(v)[o] for k, v in pairs.items()}})
        if "executions" in reports:
            self._executions(chunk, out, ts, msg, symtab, select, reports, span)
        if "bbo" in reports:
            # (the rows are the chunk's own: _apply_chunk copied them out of the core's buffer,
            # which the next piece reuses, and the writer's thread encodes them later)
            ch, b = self._file_order(out.bbo_event.astype(np.int64), mi, out.bbo)
            states = self._states_at(ev, ch) if len(ch) else np.empty(0, np.uint8)
            reports.write("bbo", {
                "event_ns": ts[ch], "event_ts": self._utc(ts[ch]), "sequence": msg[ch], "instrument": b["instrument"],
                "symbol": symbols_of(symtab, b["instrument"]), "bid_price": b["bid_price"], "bid_qty": b["bid_qty"],
                "bid_count": b["bid_count"], "ask_price": b["ask_price"], "ask_qty": b["ask_qty"],
                "ask_count": b["ask_count"], "trading_state": states_of(states)})

    def _executions(self, chunk, out, ts, msg, symtab, select, reports, span=None) -> None:
        x = out.execs
        xi = x["event_index"].astype(np.int64)
        n = len(x)
        parts = [{
            "event_ns": ts[xi], "sequence": msg[xi], "instrument": x["instrument"], "source": np.full(n, b"core", "S4"),
            "msg_type": np.full(n, b"", "S1"), "order_ref": x["maker_id"], "qty": x["qty"], "price": x["price"],
            "trade_id": np.zeros(n, np.uint64), "printable": np.full(n, b"", "S1"),
            "maker_remaining": x["maker_remaining"]}]  # (text as bytes: Arrow strings without a Python loop)
        for t, idx in _within(positions_of(chunk, "ECPQ"), span).items():  # (one pass over the chunk)
            c = decode_type(chunk, t, idx=idx)
            keep = self.feed_select[c["stock_locate"]] == 1
            c = {k: v[keep] for k, v in c.items()}
            m = len(c["message"])
            if not m:
                continue
            parts.append({
                "event_ns": c["timestamp"], "sequence": c["message"], "instrument": c["stock_locate"],
                "source": np.full(m, b"feed", "S4"), "msg_type": np.full(m, t.encode(), "S1"),
                "order_ref": c.get("order_ref", np.zeros(m, np.uint64)),
                "qty": (c["executed_shares"] if t in "EC" else c["shares"]).astype(np.int64),
                "price": c.get("execution_price", c.get("price", c.get("cross_price", np.zeros(m, np.int64)))),
                "trade_id": c["match_number"],
                "printable": c["printable"] if t == "C" else np.full(m, b"", "S1"),
                "maker_remaining": np.full(m, -1, np.int64)})
        # one table in file order (a message's rows as they came: the core's, then the feed's),
        # sorted and joined in numpy; its Arrow form is built on the writer's thread, from
        # these new arrays (none is a view of a buffer the next chunk reuses)
        cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        o = np.argsort(cols["sequence"], kind="stable")
        cols = {k: v[o] for k, v in cols.items()}
        cols["event_ts"], cols["symbol"] = self._utc(cols["event_ns"]), symbols_of(symtab, cols["instrument"])
        reports.write("executions", cols)

    def _residuals(self, sess, sizing, symtab, last_ts, reports, per_locate) -> dict[int, int]:
        """Orders still live at the end: a full day deletes everything."""
        left, locs, ids, qtys, prices = {}, [], [], [], []
        for z in sizing:
            b = sess.book(z.locate)
            if not b.order_count:
                continue
            left[z.locate] = b.order_count
            for side in "BS":  # bids best first, then asks best first; queue order within a price
                i, q, p = b.orders(side)
                if self.price_maps is not None:
                    p = self.price_maps.real(np.full(len(p), z.locate), p)
                locs.append(np.full(len(i), z.locate, np.uint16))
                ids.append(i)
                qtys.append(q)
                prices.append(p)
        n = int(sum(left.values()))
        if n:
            self.counts["desyncs"]["residual_order"] = n
            loc = np.concatenate(locs)
            np.add.at(per_locate, loc, 1)
            if "desyncs" in reports:
                t = np.full(n, last_ts, np.int64)
                reports.write("desyncs", {
                    "event_ns": t, "event_ts": self._utc(t), "sequence": np.full(n, -1, np.int64), "instrument": loc,
                    "symbol": symbols_of(symtab, loc), "order_ref": np.concatenate(ids),
                    "cause": np.full(n, "residual_order", object), "other_ref": np.zeros(n, np.uint64),
                    "expected_qty": np.zeros(n, np.int64), "found_qty": np.concatenate(qtys),
                    "expected_price": np.zeros(n, np.int64), "found_price": np.concatenate(prices)})
        return left

    def _latency(self, sess, sizing, symtab, reports) -> None:
        """Overall (the session's fine histograms) and per symbol (each book's coarse ones)."""
        reports.write("latency", report_rows(sess, [(symtab[z.locate].decode() or str(z.locate), z.locate)
                                                    for z in sizing]))

    def _symbols(self, p1: _Pass1, sizing, per_locate, residual, stream: bool) -> None:
        st = p1.stats
        outside = self.price_maps.outside_by_locate() if self.price_maps is not None else {}
        locs = sorted(set(p1.symbols) | {int(x) for x in np.flatnonzero(st["messages"])} - {0})
        z = {s.locate: s for s in sizing}
        d = p1.directory

        def col(name, default):
            return [d.get(loc, {}).get(name, default) for loc in locs]

        cols = {
            "instrument": locs, "symbol": [p1.symbols.get(loc, "") for loc in locs],
            "market_category": col("market_category", None), "financial_status": col("financial_status", None),
            "round_lot_size": col("round_lot_size", None), "authenticity": col("authenticity", None),
            "replayed": [loc in z for loc in locs],
            "band_low": [z[loc].grid()[0] if loc in z else None for loc in locs],
            "band_high": [z[loc].grid()[1] if loc in z else None for loc in locs],
            "tick": [z[loc].grid()[2] if loc in z else None for loc in locs],
            "levels": [z[loc].levels if loc in z else None for loc in locs],
            "extra_prices": [(len(z[loc].pmap.extras) if z[loc].pmap is not None else 0) if loc in z else None
                             for loc in locs],
            "orders_outside_band": [outside.get(loc, 0) if loc in z else None for loc in locs],
            "capacity": [z[loc].capacity if loc in z else None for loc in locs],
            "min_price": [int(st["min_price"][loc]) if st["price_gcd"][loc] else None for loc in locs],
            "max_price": [int(st["max_price"][loc]) if st["price_gcd"][loc] else None for loc in locs],
        }
        for f in ("messages", "adds", "deletes", "replaces", "executions", "cancels", "executed_shares",
                  "unknown_refs", "peak_live"):
            cols[f] = st[f][locs]
        cols["desyncs"] = per_locate[locs]
        cols["residual_orders"] = [residual.get(loc, 0) for loc in locs]
        w = TableWriter(report_path(self.out_dir, "symbols", stream), schemas.schema("itch", "symbols"), self.src_meta(),
                        stream=stream)  # as the ReportSet's tables
        try:
            w.write(cols)
        finally:
            w.close()

    def src_meta(self, *, sha256_later: bool = False) -> dict:
        """The provenance every table carries. The SHA-256 is "" until it is known; with
        sha256_later, its Future (TableWriter resolves it when it opens its file)."""
        sha = ""
        if self._sha256 is not None:
            sha = self._sha256 if sha256_later and not self._sha256.done() else self._sha256.result()
        return {"source_file": os.path.basename(self.path), "source_size": str(self.src.size),
                "source_sha256": sha, "session_date": self.date.isoformat() if self.date else "",
                "lobreplay_version": __version__, "price_scale": str(PRICE4_SCALE)}


def _within(positions: dict, span: tuple[int, int] | None) -> dict:
    """positions_of's positions of each type inside span (lo, hi; None: all of them)."""
    if span is None:
        return positions
    lo, hi = span
    out = {}
    for t, idx in positions.items():
        idx = idx[(idx >= lo) & (idx < hi)]
        if len(idx):
            out[t] = idx
    return out


def _clock(ns: int) -> str:
    s, ns = divmod(int(ns), 1_000_000_000)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{ns:09d}"


def _ts_array(values) -> pa.Array:
    if isinstance(values, pa.Array):
        return values
    return _arrow.array(np.asarray(values).astype("datetime64[ns]"), pa.timestamp("ns", tz="UTC"))


def _entry_of_pass1(p1: _Pass1) -> tuple[dict, dict]:
    """(arrays, meta) of a sizing cache entry for a pass 1 (_pass1_of_entry reads it): the
    figures of the locates pass 1 met, and of one it did not (`blank`), the distinct prices
    of the books that could take a price map (their locates, counts and the prices one after
    another), the directory and the S events."""
    blank = _blank_locate()
    used = np.flatnonzero(p1.stats != blank)
    have = sorted(p1.prices)
    arrays = {"locates": used.astype(np.uint16), "rows": p1.stats[used], "blank": blank.reshape(1),
              "price_locates": np.array(have, np.uint16),
              "price_counts": np.array([len(p1.prices[k]) for k in have], np.int64),
              "prices": np.concatenate([np.asarray(p1.prices[k], np.int64) for k in have] or [np.zeros(0, np.int64)])}
    meta = {"directory": {str(k): v for k, v in p1.directory.items()},
            "symbols": {str(k): v for k, v in p1.symbols.items()},
            "system_events": p1.system_events, "messages": p1.messages, "non_ascii": p1.non_ascii,
            "seconds": round(p1.seconds, 3)}
    return arrays, meta


def _pass1_of_entry(arrays: dict, m: dict, where: str, t0: float) -> _Pass1:
    """A pass 1 from a sizing cache entry (_entry_of_pass1 made it): every locate's figures
    (those pass 1 never met written once, `blank`), the directory and the S events."""
    rows, locates, blank = arrays["rows"], arrays["locates"], arrays["blank"]
    plocs, counts, values = arrays["price_locates"], arrays["price_counts"], arrays["prices"]
    if rows.dtype != core.LOCATE_DTYPE or blank.dtype != core.LOCATE_DTYPE or rows.shape != locates.shape:
        raise ValueError("per-locate figures of another layout")
    if (plocs.dtype != np.uint16 or counts.dtype != np.int64 or values.dtype != np.int64
            or plocs.shape != counts.shape or values.ndim != 1 or int(counts.sum()) != len(values)):
        raise ValueError("candidates' prices of another layout")
    prices = dict(zip(plocs.tolist(), np.split(values, np.cumsum(counts)[:-1]) if len(counts) else []))
    stats = np.repeat(blank, 65536)
    stats[locates] = rows
    return _Pass1(stats=stats, prices=prices, directory={int(k): v for k, v in m["directory"].items()},
                  symbols={int(k): v for k, v in m["symbols"].items()},
                  system_events=[(int(t), str(c)) for t, c in m["system_events"]],
                  seconds=time.perf_counter() - t0, messages=int(m["messages"]), non_ascii=int(m["non_ascii"]),
                  cached={"entry": where, "scan_seconds": m["seconds"]})


@functools.cache
def _blank_locate() -> np.ndarray:
    """The figures of a locate that pass 1 never met (a new scan's, for every locate)."""
    return core.ItchScan().stats()[0]


def pass1_summary(p1: _Pass1) -> dict:
    """The summary's pass1 figures: its time and rate, or, for a pass 1 from the sizing
    cache, the time that took and the time the scan it replaces took."""
    out = {"seconds": round(p1.seconds, 3)}
    scan = p1.cached["scan_seconds"] if p1.cached else p1.seconds
    out["messages_per_second"] = round(p1.messages / scan) if scan else None
    out["cached"] = p1.cached is not None
    if p1.cached:
        out["scan_seconds"] = scan
        out["cache_entry"] = p1.cached["entry"]
    return out


def desync_rate(desyncs: int, by_cause: dict, executions: int) -> float | None:
    """Desyncs per execution in the feed, residual orders left out: they mark where the file
    ends, not a divergence (a file cut mid-day has thousands, which made the rate exceed 1)."""
    if not executions:
        return None
    return (desyncs - by_cause.get("residual_order", 0)) / executions


def _symbol_table(symbols: dict[int, str]) -> np.ndarray:
    """The names by locate (0 .. 65535) as bytes, b"" where the directory has none."""
    names = [symbols[k].encode() for k in symbols]
    table = np.zeros(65536, f"S{max([1] + [len(n) for n in names])}")
    table[np.fromiter(symbols, np.int64, len(symbols))] = names
    return table


def symbols_of(symtab: np.ndarray, locates: np.ndarray) -> pa.DictionaryArray:
    """The symbol of each locate (symtab: the names by locate, as bytes), dictionary-encoded
    with only the symbols present."""
    return _arrow.dictionary(locates, lambda present: _arrow.array(symtab[present], pa.string()))


STATE_LETTERS = "THPQh"  # trading_state's values (docs/reports.md)
_STATE_INDEX = np.zeros(256, np.int8)
_STATE_INDEX[[ord(c) for c in STATE_LETTERS]] = np.arange(len(STATE_LETTERS), dtype=np.int8)


def states_of(letters: np.ndarray) -> pa.DictionaryArray:
    """trading_state: the state letters (uint8 ASCII) dictionary-encoded over STATE_LETTERS (a
    string column built per row cost the bbo report of a 5M-message day about 50-100 ms)."""
    return pa.DictionaryArray.from_arrays(_arrow.array(_STATE_INDEX[letters]),
                                          _arrow.array(list(STATE_LETTERS)))  # (pa.array imports pandas)


def replay_itch(path: str, out_dir: str, cfg: ReplayConfig | None = None, *, force: bool = False) -> dict:
    """Replay an ITCH file into out_dir (created; refused if it holds files, unless force:
    then only an earlier run's files there are replaced, lobreplay.replay.outdir). The input is
    opened first: one that cannot be read leaves out_dir as it was. Returns the summary
    (also written as summary.json)."""
    cfg = cfg or ReplayConfig()
    replay = ItchReplay(path, out_dir, cfg)
    prepare_output(out_dir, force, inputs=[path])
    return replay.run()
