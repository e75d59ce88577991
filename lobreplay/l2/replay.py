"""Replay a .lobc capture (Binance depth) through the matching core and write
reports (docs/l2.md).

Pass 1 (lobreplay.l2.ladder.scan) sizes one book per symbol from every level price
and the peak number of live levels. Pass 2 feeds the records chunk by chunk to
lobreplay.l2.ladder.L2Replay, which turns level changes into core events and applies
them in one core call per run of messages, and writes what each chunk produced
on the report thread: bbo (every change of the top), desyncs (anomalies:
stale crossing levels, skipped unsynced updates, GAP records, ...), trades,
ticker_mismatches (where the replayed top differs from the recorded
bookTicker), latency (the core's histograms) and summary.json.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from lobreplay import __version__
from lobreplay.core import arrow as _arrow
from lobreplay.replay import cache
from lobreplay.l2 import lobc
from lobreplay._ahead import read_ahead
from lobreplay.errors import InputError
from lobreplay.itch.replay import _NoBar
from lobreplay.replay.outdir import prepare_output
from lobreplay.l2.ladder import MAX_GRID_LEVELS, MAX_MESSAGE, SEQUENCE_RULES, BookSizing, L2Replay, check_max_message, scan_counts
from lobreplay.core.events import Kind
from lobreplay.reports.latency import histogram_table, report_rows
from lobreplay.reports.tables import SCHEMAS, ReplayRun, ReportSet, TableWriter, file_sha256, usable_cpus

ALL_REPORTS = ("bbo", "desyncs", "trades", "latency", "ticker_mismatches", "depth")  # depth: with depth_levels
_TS = pa.timestamp("ns", tz="UTC")
SYMBOL = pa.dictionary(pa.int32(), pa.string())

L2_SCHEMAS: dict[str, pa.Schema] = {
    "bbo": pa.schema([
        ("recv_ns", pa.int64()), ("exch_ns", pa.int64()), ("ts", _TS), ("record", pa.int64()), ("symbol", SYMBOL),
        ("update_id", pa.uint64()), ("bid_price", pa.int64()), ("bid_qty", pa.int64()),
        ("ask_price", pa.int64()), ("ask_qty", pa.int64()),
    ]),
    "desyncs": pa.schema([
        ("recv_ns", pa.int64()), ("exch_ns", pa.int64()), ("ts", _TS), ("record", pa.int64()), ("symbol", SYMBOL),
        ("cause", pa.string()), ("first_id", pa.uint64()), ("last_id", pa.uint64()), ("side", pa.string()),
        ("price", pa.int64()), ("qty", pa.int64()), ("other_price", pa.int64()), ("other_qty", pa.int64()),
    ]),
    "trades": pa.schema([
        ("recv_ns", pa.int64()), ("exch_ns", pa.int64()), ("ts", _TS), ("record", pa.int64()), ("symbol", SYMBOL),
        ("trade_id", pa.uint64()), ("price", pa.int64()), ("qty", pa.int64()), ("side", pa.string()),
    ]),
    "ticker_mismatches": pa.schema([
        ("recv_ns", pa.int64()), ("ts", _TS), ("record", pa.int64()), ("symbol", SYMBOL),
        ("update_id", pa.uint64()), ("ticker_id", pa.uint64()),
        ("book_bid_price", pa.int64()), ("book_bid_qty", pa.int64()),
        ("book_ask_price", pa.int64()), ("book_ask_qty", pa.int64()),
        ("ticker_bid_price", pa.int64()), ("ticker_bid_qty", pa.int64()),
        ("ticker_ask_price", pa.int64()), ("ticker_ask_qty", pa.int64()),
    ]),
    "latency": SCHEMAS["latency"],
}


DEPTH_LIMIT = 100_000  # levels per side in a depth sample: lob_l2_new's limit (csrc/l2.c)


@dataclass
class L2ReplayConfig:
    symbols: list[str] | None = None      # replay only these (default: all)
    headroom: float = 0.2                 # grid band = price range widened by this fraction
    price_mode: str = "auto"              # auto | grid | ladder (lobreplay.l2.ladder.scan)
    max_grid_levels: int = MAX_GRID_LEVELS
    max_message: int = MAX_MESSAGE        # records a message may hold between BEGIN and END (lobreplay.l2.ladder)
    reports: tuple[str, ...] = ALL_REPORTS
    timing: bool = True
    chunk_records: int = 1 << 18
    progress: bool = False                # a progress bar per pass on stderr (records)
    allow_corrupt: bool = False           # replay across damage inside the file (else an error)
    depth_levels: int = 0                 # > 0: depth.parquet, the N best levels of each book that changed ...
    depth_every_ns: int = 1_000_000_000   # ... at each multiple of this much receive time (0: after every change)
    cache: bool = True                    # pass 1 from (and into) the sizing cache, lobreplay.replay.cache

    def __post_init__(self):
        from lobreplay.reports.tables import config_names
        self.symbols = config_names(self.symbols, "symbols")
        self.symbols = list(self.symbols) if self.symbols is not None else None
        self.reports = ALL_REPORTS if self.reports is None else config_names(self.reports, "reports", ALL_REPORTS)
        # (the command line allows 100 levels, lobreplay.cli.common.MAX_DEPTH; here the C replay's own limit)
        if not 0 <= self.depth_levels <= DEPTH_LIMIT or self.depth_every_ns < 0:
            raise ValueError(f"depth samples: 0 to {DEPTH_LIMIT:,} levels every >= 0 ns (0: after every change), "
                             f"got {self.depth_levels} every {self.depth_every_ns} ns")
        if not self.depth_levels:
            self.reports = tuple(r for r in self.reports if r != "depth")
        check_max_message(self.max_message)


def _symbols_of(names: list[str], sym: np.ndarray) -> pa.DictionaryArray:
    """The symbol of each row, dictionary-encoded with only the symbols present (an index
    beyond the file's symbols is named by its number)."""
    return _arrow.dictionary(sym, lambda present: _arrow.strings(
        [names[s] if s < len(names) else str(s) for s in present.tolist()]))


def _side_str(side: np.ndarray) -> np.ndarray:
    return np.array(["", "B", "S"], object)[np.select([side == ord("B"), side == ord("S")], [1, 2], 0)]


class LobcReplay:
    def __init__(self, path: str, out_dir: str, cfg: L2ReplayConfig):
        self.path, self.out_dir, self.cfg = os.fspath(path), out_dir, cfg
        self._done = (0, 0)  # (pass, records done in it): where an interrupted replay was
        self._records = 0    # the records of the file's whole blocks
        self._map = None     # with --symbols: the kept records' file indices (_RecordMap)
        self.notes: list[str] = []  # for the summary (the sizing cache's troubles)
        self._entry: cache.Entry | None = None  # the sizing cache entry of this file and these options
        self._src: lobc.ChunkReader | None = None  # the input, once opened (open)

    def open(self) -> "LobcReplay":
        """Open the input: its header and metadata read, its block headers walked (InputError
        for a file that is not .lobc). run() opens it if this was not called."""
        if self._src is None:
            self._src = lobc.ChunkReader(self.path, self.cfg.chunk_records, past_damage=self.cfg.allow_corrupt)
        return self

    def where(self) -> dict:
        """How far the replay got: its pass (0: before the first) and the records done in it
        (in pass 2, replayed; no report holds a row past them), of the file's records."""
        p, n = self._done
        return {"pass": p, "records_done": n, "records": self._records}

    def where_text(self) -> str:
        w = self.where()
        if not w["pass"]:
            return f"{self.path}: before the first pass"
        return f"{self.path}: in pass {w['pass']}, after {w['records_done']:,} of {w['records']:,} records"

    def run(self) -> dict:
        """Streams the file twice in chunks (lobc.ChunkReader: memory stays bounded): pass 1
        checks each block's CRC (a block that does not match ends the file there, before any
        row is written) and sizes the books; pass 2 replays the same blocks. The SHA-256 of
        the file is computed on a helper thread meanwhile (the tables' provenance)."""
        try:
            return self._run()
        except KeyboardInterrupt as e:  # (Ctrl-C, and SIGTERM from the command line)
            e.add_note(self.where_text())
            raise

    def _run(self) -> dict:
        stop = threading.Event()  # a failed replay does not wait for the hash (ReplayRun)
        with ReplayRun(self.out_dir, {"source_file": os.path.basename(self.path)}, where=self.where,
                       stop=stop) as run, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="lobreplay-hash") as helper:
            src = self.open()._src
            self._records = src.records
            # (at the lowest priority: pass 1's reader thread has the other core first; a table
            # waits for it only at its first row group or its close, in pass 2 or after)
            sha = helper.submit(file_sha256, self.path, stop, size=src.size, background=True)
            meta = self.src_meta(src)
            run.summary["source"] = meta
            try:
                keep = self._selection([str(x) for x in src.meta["symbols"]])  # (before any report file exists)
                # the tables take the SHA-256 (a Future) when they open their files
                run.reports = ReportSet(self.out_dir, [], {**meta, "source_sha256": sha})
                for name in self.cfg.reports:
                    schema = depth_schema(self.cfg.depth_levels) if name == "depth" else L2_SCHEMAS[name]
                    run.reports.writers[name] = TableWriter(os.path.join(self.out_dir, f"{name}.parquet"),
                                                            schema, run.reports.metadata)
                res = self._replay(src, run.reports, keep)
            except BaseException:
                stop.set()  # (before the helper's pool waits for it)
                with contextlib.suppress(Exception):
                    meta["source_sha256"] = sha.result() or ""
                raise
            finally:  # (a failed replay's summary says what it found of the file too: its torn tail)
                run.summary["lobc"] = {k: src.meta.get(k) for k in ("venue", "market", "symbols", "price_scale",
                                                                     "qty_scale", "created_ns", "tool", "streams",
                                                                     "source")}
                run.summary["lobc"].update({"whole": src.torn is None and not src.damage, "blocks": src.blocks,
                                            "records": src.records,
                                            "torn": src.torn.as_dict() if src.torn else None,
                                            "damage": [t.as_dict() for t in src.damage]})
            meta["source_sha256"] = sha.result()
            if self._entry is not None:  # (the replay succeeded: its entry completed, or checked)
                self._entry.finish(meta["source_sha256"])
            run.summary.update(res)
            run.summary["notes"] = self.notes
        return run.summary

    def _selection(self, names: list[str]) -> list[int] | None:
        """The symbol indices --symbols keeps (None: all); an unknown one is an InputError."""
        if not self.cfg.symbols:
            return None
        missing = [s for s in self.cfg.symbols if s.upper() not in names]
        if missing:
            raise InputError(f"{self.path}: no such symbol(s) in this file: {', '.join(missing)}")
        return [names.index(s.upper()) for s in self.cfg.symbols]

    def src_meta(self, src: lobc.ChunkReader) -> dict:
        """The tables' provenance; source_sha256 is filled in when the helper thread has it."""
        m = src.meta
        return {"source_file": os.path.basename(self.path), "source_size": str(src.size),
                "source_sha256": "", "lobreplay_version": __version__,
                "venue": str(m.get("venue", "")), "market": str(m.get("market", "")),
                "price_scale": str(m["price_scale"]), "qty_scale": str(m["qty_scale"]),
                "lobc_created_ns": str(m.get("created_ns", "")), "time_unit": "ns since the Unix epoch (UTC)"}

    def _replay(self, src: lobc.ChunkReader, reports: ReportSet, keep: list[int] | None) -> dict:
        """Pass 1 and 2, each a pass over the file's chunks; keep: the symbols kept (None: all)."""
        cfg = self.cfg
        names = [str(s) for s in src.meta["symbols"]]
        n = 0

        # the next chunk read and its CRCs checked on a thread while the scan takes this one
        verified = SimpleNamespace(chunks=lambda buffers=1: src.chunks(verify=True, buffers=buffers))

        def pass1_chunks(bar):
            nonlocal n
            for c, _ in read_ahead(verified, thread=usable_cpus() > 1):
                bar.update(len(c))
                self._done = (1, bar.n)
                c = c if keep is None else c[np.isin(c["symbol"], keep)]
                n += len(c)
                yield c

        t0 = time.perf_counter()
        self._entry = entry = cache.Entry(
            self.path, "lobc-pass1", self.notes, enabled=cfg.cache,
            symbols=None if keep is None else [names[i] for i in keep], headroom=cfg.headroom,
            price_mode=cfg.price_mode, max_grid_levels=cfg.max_grid_levels, max_message=cfg.max_message,
            allow_corrupt=cfg.allow_corrupt)
        got = entry.find()
        if got is not None:
            try:
                sizing, kinds, n = _pass1_of_entry(src, names, *got)
            except (KeyError, TypeError, ValueError, IndexError) as e:
                entry.unusable(f"{type(e).__name__}: {e}")
                got = None
        if got is None:
            with self._bar("pass 1 (sizing)", src.records) as bar:
                sizing, kinds = scan_counts(pass1_chunks(bar), names, headroom=cfg.headroom, mode=cfg.price_mode,
                                            max_grid_levels=cfg.max_grid_levels, max_message=cfg.max_message)
        pass1_s = time.perf_counter() - t0
        scan_s = float(entry.found["seconds"]) if entry.found else pass1_s
        if got is None and entry.where:
            entry.scanned(*_entry_of_pass1(src, sizing, kinds, n, scan_s))
        torn, blocks = src.torn, src.blocks
        if torn is not None and (not blocks or (torn.corrupt and not cfg.allow_corrupt)):
            what, hint = torn.reason, ""
            if torn.corrupt:
                what += (f", and sound blocks follow from offset {torn.next_block}: the file is damaged inside, "
                         "not cut short")
                hint = ("--allow-corrupt replays the sound blocks on both sides of the damage (every book loses "
                        "sync across it and resyncs at its next snapshot); ")
            if not blocks:
                raise InputError(f"{self.path}: offset {torn.offset}: no whole block to replay before it ({what}); "
                                 f"{hint}`lobreplay lobc check` says more")
            raise InputError(f"{self.path}: offset {torn.offset}: {what}. {hint}`lobreplay lobc check` says more")
        has_tickers = bool(kinds[lobc.TICKER_BID])
        market = src.meta.get("market") if src.meta.get("venue", "binance") == "binance" else None
        market = market if market in SEQUENCE_RULES else None  # (update ids of another kind: not checked)
        depth = cfg.depth_levels if "depth" in reports else 0
        rp = L2Replay(sizing, names, timing=cfg.timing, compare_tickers=has_tickers, market=market,
                      depth_levels=depth, depth_every_ns=cfg.depth_every_ns if depth else 0,
                      max_message=cfg.max_message)
        t1 = time.perf_counter()
        self._done = (2, 0)
        self._map = None if keep is None else _RecordMap()
        read = src.reader() if keep is None else _filtered(src.chunks(), keep, self._map)
        with self._bar("pass 2 (replay)", n) as bar:
            # (the next records read on a thread while the core replays these; not through the
            # --symbols filter, whose record map the rows' writer reads meanwhile)
            for rows in rp.feed_from(read, cfg.chunk_records, ahead=keep is None and usable_cpus() > 1):
                if rows:
                    self._write(rows, reports, names)
                bar.update(rp.next_index - bar.n)
                self._done = (2, rp.replayed)
        if src.torn is not torn or src.blocks != blocks:
            raise InputError(f"{self.path}: offset {src.torn.offset}: the file changed during the replay "
                             f"({src.torn.reason}); the reports stop there")
        self._write(rp.finish(), reports, names)
        pass2_s = time.perf_counter() - t1
        if "latency" in reports:
            self._latency(rp, sizing, reports)
        c = rp.counters
        st = dict(rp.ticker_stats)
        st["match_rate"] = st["matches"] / st["comparable"] if st["comparable"] else None
        st["price_match_rate"] = st["price_matches"] / st["comparable"] if st["comparable"] else None
        books = []
        for s, z in sorted(sizing.items()):
            bids, asks = rp.levels(s)
            books.append({**z.as_dict(), **rp.per_symbol[s], "final_bid_levels": len(bids),
                          "final_ask_levels": len(asks), "synced_at_end": bool(rp.state[s] == 1),
                          "last_update_id": int(rp.last_u[s])})
        return {
            "records": n,
            "records_by_kind": {lobc.KIND_NAMES.get(k, f"unknown_{k}"): int(kinds[k]) for k in np.flatnonzero(kinds)},
            "books": books,
            "messages_applied": c.messages_applied, "snapshots_applied": c.snapshots_applied,
            "messages_skipped": c.messages_skipped, "levels_applied": c.levels_applied,
            "update_ids_checked": market,
            "events_by_kind": c.events, "unchanged_levels": c.unchanged_levels,
            "zero_qty_unknown_level": c.zero_qty_unknown_level,
            "desyncs": int(sum(c.desyncs.values())), "desyncs_by_cause": dict(sorted(c.desyncs.items())),
            "trades": c.trades, "bbo_changes": c.bbo_changes,
            "crossing_events": c.crossing_events,
            "bookticker": st,
            "pass1": {"seconds": round(pass1_s, 3), "cached": entry.found is not None,
                      **({"scan_seconds": scan_s, "cache_entry": entry.where} if entry.found else {})},
            "pass2": {"seconds": round(pass2_s, 3), "core_seconds": round(c.core_seconds, 3),
                      "core_events": c.core_events,
                      "records_per_second": round(n / pass2_s) if pass2_s else None,
                      "core_events_per_second": round(c.core_events / c.core_seconds) if c.core_seconds else None},
        }

    def _bar(self, desc: str, total: int):
        if not self.cfg.progress:  # (tqdm's import alone is about 20 ms of a replay's start-up)
            return _NoBar()
        from tqdm import tqdm
        return tqdm(total=total, unit=" records", unit_scale=True, desc=desc, file=sys.stderr, leave=False)

    def _write(self, rows: dict, reports: ReportSet, names: list[str]) -> None:
        def common(r):
            rec = r["record"] if self._map is None else self._map.file_index(r["record"])
            return {"recv_ns": r["recv_ns"], "ts": r["recv_ns"].astype("datetime64[ns]"), "record": rec,
                    "symbol": _symbols_of(names, r["symbol"])}

        if "bbo" in rows and "bbo" in reports:
            r = rows["bbo"]
            reports.write("bbo", {**common(r), "exch_ns": r["exch_ns"], "update_id": r["update_id"],
                                  **{k: r[k] for k in ("bid_price", "bid_qty", "ask_price", "ask_qty")}})
        if "desyncs" in rows and "desyncs" in reports:
            r = rows["desyncs"]
            reports.write("desyncs", {**common(r), "exch_ns": r["exch_ns"], "cause": r["cause"],
                                      "first_id": r["first_id"], "last_id": r["last_id"], "side": _side_str(r["side"]),
                                      **{k: r[k] for k in ("price", "qty", "other_price", "other_qty")}})
        if "trades" in rows and "trades" in reports:
            r = rows["trades"]
            reports.write("trades", {**common(r), "exch_ns": r["exch_ns"], "trade_id": r["trade_id"],
                                     "price": r["price"], "qty": r["qty"], "side": _side_str(r["side"])})
        if "depth" in rows and "depth" in reports:
            r = rows["depth"]
            reports.write("depth", {**common(r), **{k: r[k] for k in r if k not in ("recv_ns", "record", "symbol")}})
        if "ticker_mismatches" in rows and "ticker_mismatches" in reports:
            r = rows["ticker_mismatches"]
            reports.write("ticker_mismatches", {**common(r), **{k: r[k] for k in r if k not in (
                "recv_ns", "record", "symbol")}})

    def _latency(self, rp: L2Replay, sizing, reports) -> None:
        """Overall (the session's fine histograms) and per symbol (each book's coarse ones);
        with timing on, the fine histograms themselves too, as the ITCH replay writes them
        (latency_histograms.parquet; not its .hgrm files: hgrm.export_report_hgrm makes them
        from the table, and writing them cost a fifth of a small recording's replay)."""
        reports.write("latency", report_rows(rp.session, [(z.name, s) for s, z in sorted(sizing.items())]))
        if self.cfg.timing:
            hists = {k.name: rp.session.histogram(k) for k in Kind}
            hists["ALL"] = sum(hists.values())
            reports.write_table("latency_histograms", histogram_table(hists))


def _entry_of_pass1(src: lobc.ChunkReader, sizing: dict, kinds: np.ndarray, n: int, seconds: float):
    """(arrays, meta) of a sizing cache entry: what pass 1 found (the books' sizes, the
    records by kind and kept) and the blocks it read, as its CRC checks left them (those
    pass 2 reads: `heads`, `torn`, `damage`)."""
    zs = [sizing[s] for s in sorted(sizing)]
    arrays = {"kinds": np.asarray(kinds, np.int64),
              "heads": np.array([list(h) for h in src.heads], np.int64).reshape(-1, 5),
              "prices": np.concatenate([z.prices for z in zs]) if zs else np.zeros(0, np.int64),
              "books": np.array([[z.symbol, len(z.prices), z.band_low, z.band_high, z.tick, z.capacity,
                                  z.peak_levels, z.mode == "grid"] for z in zs], np.int64).reshape(-1, 8)}
    meta = {"records": n, "seconds": round(seconds, 3),
            "torn": src.torn.as_dict() if src.torn else None, "damage": [t.as_dict() for t in src.damage]}
    return arrays, meta


def _pass1_of_entry(src: lobc.ChunkReader, names: list[str], arrays: dict, meta: dict):
    """Pass 1 from a sizing cache entry (_entry_of_pass1 made it): (sizing, kinds, records
    kept); src takes the blocks as the entry's pass 1 left them."""
    books, prices = arrays["books"], arrays["prices"]
    if books.ndim != 2 or books.shape[1] != 8 or arrays["heads"].shape[1:] != (5,) or arrays["kinds"].shape != (256,):
        raise ValueError("arrays of another shape")
    sizing, at = {}, 0
    for s, k, low, high, tick, cap, peak, grid in books.tolist():
        sizing[s] = BookSizing(s, names[s], prices[at:at + k], "grid" if grid else "ladder", low, high, tick, cap,
                               peak)
        at += k
    if at != len(prices):
        raise ValueError("prices that do not add up")
    src.heads = [tuple(h) for h in arrays["heads"].tolist()]
    src.torn = None if meta["torn"] is None else lobc.Torn.from_dict(meta["torn"])
    src.damage = [lobc.Torn.from_dict(d) for d in meta["damage"]]
    return sizing, arrays["kinds"], int(meta["records"])


def depth_schema(n: int) -> pa.Schema:
    """depth.parquet of a .lobc replay: the sample time, the last record it holds, the book's
    last update id and sync state, then the N best levels of each side (docs/l2.md)."""
    return pa.schema([("recv_ns", pa.int64()), ("ts", _TS), ("record", pa.int64()), ("symbol", SYMBOL),
                      ("update_id", pa.uint64()), ("synced", pa.bool_())]
                     + [(f"{side}_{f}_{i}", pa.int64()) for i in range(1, n + 1) for side in ("bid", "ask")
                        for f in ("price", "qty")])


class _RecordMap:
    """Where the records a --symbols replay keeps are in the file, as runs of consecutive
    records (a message's records are one run: memory per message kept, not per record), so
    that the reports' `record` is the index in the file whatever the selection."""

    def __init__(self):
        self._kept = 0     # records kept so far
        self._parts = []   # (kept index of each run's start, file index of it)
        self._starts = self._files = np.empty(0, np.int64)

    def add(self, file_base: int, mask: np.ndarray) -> None:
        """The next chunk of the file, its first record at file_base, mask: the records kept."""
        idx = np.flatnonzero(mask)
        if not len(idx):
            return
        new = np.flatnonzero(np.diff(idx, prepend=-2) != 1)  # where a run starts
        self._parts.append((self._kept + new, file_base + idx[new]))
        self._kept += len(idx)

    def file_index(self, kept: np.ndarray) -> np.ndarray:
        if self._parts:
            self._starts = np.concatenate([self._starts, *(a for a, _ in self._parts)])
            self._files = np.concatenate([self._files, *(b for _, b in self._parts)])
            self._parts = []
        kept = np.asarray(kept, np.int64)
        j = np.searchsorted(self._starts, kept, side="right") - 1
        return self._files[j] + (kept - self._starts[j]) if len(kept) else kept


def _filtered(chunks, keep: list[int], where: _RecordMap):
    """A read(out) for L2Replay.feed_from: the records of `chunks` whose symbol is in keep
    (and where each is in the file, into `where`)."""
    pending = np.empty(0, np.uint8)
    R = lobc.RECORD_DTYPE.itemsize
    base = 0  # the file index of the next chunk's first record

    def read(out: np.ndarray) -> int:
        nonlocal pending, base
        raw, n = out.view(np.uint8), 0
        while n < len(out):
            if not len(pending):
                c = next(chunks, None)
                if c is None:
                    break
                mask = np.isin(c["symbol"], keep)
                where.add(base, mask)
                base += len(c)
                pending = c[mask].view(np.uint8)
                continue
            k = min(len(pending) // R, len(out) - n)
            raw[n * R:(n + k) * R] = pending[:k * R]
            pending, n = pending[k * R:], n + k
        return n

    return read


def replay_lobc(path, out_dir: str, cfg: L2ReplayConfig | None = None, *, force: bool = False) -> dict:
    """Replay a .lobc file into out_dir (created; refused if it holds files, unless force:
    then only an earlier run's files there are replaced, lobreplay.replay.outdir). The input is
    opened and checked first: one that cannot be read leaves out_dir as it was. Returns
    the summary (also written as summary.json)."""
    cfg = cfg or L2ReplayConfig()
    replay = LobcReplay(path, out_dir, cfg)
    replay.open()  # (the input opened and its header and blocks checked before the output is touched)
    prepare_output(out_dir, force, inputs=[replay.path])
    return replay.run()
