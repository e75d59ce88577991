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
import time
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
from lobreplay.replay.engine import BookAt, Engine, Piece, progress_bar
from lobreplay.replay.outdir import prepare_output
from lobreplay.l2.ladder import (ALL_REPORTS, MAX_GRID_LEVELS, MAX_MESSAGE, SEQUENCE_RULES, BookSizing, L2Replay,
                                 check_max_message, scan_counts)
from lobreplay.core.events import Kind
from lobreplay.reports.latency import check_timing_every, histogram_table, report_rows
from lobreplay.reports import schemas
from lobreplay.reports.tables import ReplayRun, ReportSet, TableWriter, usable_cpus

L2_SCHEMAS: dict[str, pa.Schema] = schemas.lobc_schemas()  # (every report's: lobreplay.reports.schemas)


DEPTH_LIMIT = 100_000  # levels per side in a depth sample: lob_l2_new's limit (csrc/feeds/l2.c)


@dataclass
class L2ReplayConfig:
    symbols: list[str] | None = None      # replay only these (default: all)
    headroom: float = 0.2                 # grid band = price range widened by this fraction
    price_mode: str = "auto"              # auto | grid | ladder (lobreplay.l2.ladder.scan)
    max_grid_levels: int = MAX_GRID_LEVELS
    max_message: int = MAX_MESSAGE        # records a message may hold between BEGIN and END (lobreplay.l2.ladder)
    reports: tuple[str, ...] = ALL_REPORTS
    timing: bool = True
    timing_every: int | None = None       # with timing: every Nth core event timed (1: all; None: TIMING_EVERY)
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
        self.timing_every = check_timing_every(self.timing_every)
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


class LobcReplay(Engine):
    """The .lobc source of the replay engine (lobreplay.replay.engine.Engine): what is the L2
    side's own is pass 1 (lobreplay.l2.ladder.scan_counts, every block's CRC checked) and the C
    replay of the records (lobreplay.l2.ladder.L2Replay), one call per chunk of records.
    lobreplay.open_lobc drives it step by step."""

    unit = "records"

    def __init__(self, path: str, out_dir: str | None, cfg: L2ReplayConfig):
        super().__init__(path, out_dir, cfg)
        self._records = 0    # the records of the file's whole blocks
        self._map = None     # with --symbols: the kept records' file indices (_RecordMap)
        self._entry: cache.Entry | None = None  # the sizing cache entry of this file and these options
        self._src: lobc.ChunkReader | None = None  # the input, once opened (open)
        self._meta: dict | None = None
        self._pending = None  # stepped: the records read and not yet fed (a step stopped before them)
        self._cut_inside = False  # a step stopped inside a chunk (then pass 2 goes on chunk by chunk)
        self._last_time = -1  # the receive time of the last record fed

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
        return super().run()

    def _begin(self, run: ReplayRun) -> None:
        src = self.open()._src
        self._records = src.records
        # (at the lowest priority: pass 1's reader thread has the other core first; a table
        # waits for it only at its first row group or its close, in pass 2 or after)
        self.start_hash(src.size)
        meta = self._meta = self.src_meta(src)
        run.summary["source"] = meta
        keep = self._selection([str(x) for x in src.meta["symbols"]])  # (before any report file exists)
        # the tables take the SHA-256 (a Future) when they open their files
        run.reports = self._reports([], {**meta, "source_sha256": self.sha256(later=True)})
        for name in self.cfg.reports:
            schema = depth_schema(self.cfg.depth_levels) if name == "depth" else L2_SCHEMAS[name]
            run.reports.writers[name] = TableWriter(os.path.join(self.out_dir, f"{name}.parquet"),
                                                    schema, run.reports.metadata)
        self._pass1(src, run.reports, keep)

    def _failing(self, run: ReplayRun) -> None:
        """A replay that fails: its summary says what it found of the file too (its torn tail),
        and the hash stops."""
        self._stop_hash.set()  # (before anything waits for it)
        src, meta = self._src, self._meta
        if meta is not None:
            with contextlib.suppress(Exception):
                meta["source_sha256"] = self.sha256() or ""
        if src is not None:
            run.summary["lobc"] = self._lobc_summary(src)

    def _lobc_summary(self, src) -> dict:
        out = {k: src.meta.get(k) for k in ("venue", "market", "symbols", "price_scale", "qty_scale", "created_ns",
                                            "tool", "streams", "source")}
        out.update({"whole": src.torn is None and not src.damage, "blocks": src.blocks, "records": src.records,
                    "torn": src.torn.as_dict() if src.torn else None,
                    "damage": [t.as_dict() for t in src.damage]})
        return out

    def _end(self, run: ReplayRun) -> None:
        res = self._pass2_end()
        run.summary["lobc"] = self._lobc_summary(self._src)
        meta = self._meta
        meta["source_sha256"] = self.sha256()
        if self._entry is not None:  # (the replay succeeded: its entry completed, or checked)
            self._entry.finish(meta["source_sha256"])
        run.summary.update(res)
        run.summary["notes"] = self.notes

    def _selection(self, names: list[str]) -> list[int] | None:
        """The symbol indices --symbols keeps (None: all); an unknown one is an InputError."""
        if not self.cfg.symbols:
            return None
        missing = [s for s in self.cfg.symbols if s.upper() not in names]
        if missing:
            raise InputError(f"{self.path}: no such symbol(s) in this file: {', '.join(missing)}")
        return [names.index(s.upper()) for s in self.cfg.symbols]

    def src_meta(self, src: lobc.ChunkReader | None = None) -> dict:
        """The tables' provenance; source_sha256 is filled in when the helper thread has it."""
        src = src or self.open()._src
        m = src.meta
        return {"source_file": os.path.basename(self.path), "source_size": str(src.size),
                "source_sha256": "", "lobreplay_version": __version__,
                "venue": str(m.get("venue", "")), "market": str(m.get("market", "")),
                "price_scale": str(m["price_scale"]), "qty_scale": str(m["qty_scale"]),
                "lobc_created_ns": str(m.get("created_ns", "")), "time_unit": "ns since the Unix epoch (UTC)"}

    def _pass1(self, src: lobc.ChunkReader, reports: ReportSet, keep: list[int] | None) -> None:
        """Pass 1 (a pass over the file's chunks, or the sizing cache's), then pass 2 set up;
        keep: the symbols kept (None: all)."""
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
        self._rp = L2Replay(sizing, names, timing=cfg.timing_every if cfg.timing else 0, compare_tickers=has_tickers,
                            market=market, depth_levels=depth, depth_every_ns=cfg.depth_every_ns if depth else 0,
                            max_message=cfg.max_message)
        self._p1 = dict(sizing=sizing, kinds=kinds, n=n, names=names, keep=keep, torn=torn, blocks=blocks,
                        market=market, entry=entry, pass1_s=pass1_s, scan_s=scan_s, reports=reports)
        self._t1 = time.perf_counter()
        self._done = (2, 0)
        self._map = None if keep is None else _RecordMap()
        self._read = src.reader() if keep is None else _filtered(src.chunks(), keep, self._map)
        self._bar2 = self._bar("pass 2 (replay)", n)
        self._bar2.__enter__()

    def _steps_to_end(self) -> None:
        """Pass 2 to the end: for a replay that never stopped inside a chunk, with the next
        records read on a thread while the core replays these (L2Replay.feed_from); else chunk
        by chunk (the same rows)."""
        if self._cut_inside or self._pending is not None or self._rp.next_index:
            return super()._steps_to_end()
        rp, p = self._rp, self._p1
        # (not through the --symbols filter, whose record map the rows' writer reads meanwhile)
        for rows in rp.feed_from(self._read, self.cfg.chunk_records, ahead=p["keep"] is None and usable_cpus() > 1):
            if rows:
                self._write(rows, p["reports"], p["names"])
            self._bar2.update(rp.next_index - self._bar2.n)
            self._done = (2, rp.replayed)
        self._ended = True

    def _next_records(self) -> np.ndarray | None:
        """The next records to feed (those a step left, else the next chunk read), or None at the end."""
        if self._pending is not None:
            r, self._pending = self._pending, None
            return r
        buf = np.empty(self.cfg.chunk_records, lobc.RECORD_DTYPE)
        got = self._read(buf)
        return buf[:got] if got else None

    def _step(self, target=None, capture: bool = False) -> Piece | None:
        """Feed the next chunk of records (or its part before the target: the first record at
        or past it) to the C replay; its rows to the reports. A message the cut leaves
        unfinished waits for the next step (L2Replay.feed holds it)."""
        rp, p = self._rp, self._p1
        rec = self._next_records()
        if rec is None:
            self._ended = True
            return None
        if target is not None:
            cut = self._cut(rec, target)
            if cut < len(rec):
                self._cut_inside = True
                self._pending = rec[cut:]
                rec = rec[:cut]
            if not len(rec):
                return None
        first = rp.next_index
        rows = rp.feed(rec)
        if rows:
            self._write(rows, p["reports"], p["names"])
        self._last_time = int(rec["recv_ns"][-1])
        self._bar2.update(rp.next_index - self._bar2.n)
        self._done = (2, rp.replayed)
        piece = Piece(self._file_index(first), self._file_index(rp.next_index))
        if capture:
            piece.events = pa.table({k: _arrow.array(np.ascontiguousarray(rec[k])) for k in rec.dtype.names})
        return piece

    def _file_index(self, k: int) -> int:
        """The file index of the k-th record kept (--symbols: through the record map)."""
        if self._map is None or not k:
            return k
        return int(self._map.file_index(np.array([k - 1]))[0]) + 1

    def _cut(self, rec: np.ndarray, target) -> int:
        kind, v = target
        if kind == "number":
            base = self._rp.next_index
            if self._map is None:
                return int(min(max(v - base, 0), len(rec)))
            files = self._map.file_index(np.arange(base, base + len(rec)))
            return int(np.searchsorted(files, v))
        if kind == "clock":
            v += self._day_ns(rec)
        hit = np.flatnonzero(rec["recv_ns"] >= v)
        return int(hit[0]) if len(hit) else len(rec)

    def _day_ns(self, rec: np.ndarray) -> int:
        """Midnight (UTC) of the day of the first record replayed: a time of day is on that day."""
        if not hasattr(self, "_midnight"):
            first = int(rec["recv_ns"][0]) if len(rec) else max(self._last_time, 0)
            self._midnight = first - first % 86_400_000_000_000
        return self._midnight

    def _position(self, target) -> str | None:
        kind, v = target
        if kind == "number":
            at = self._file_index(self._rp.next_index)
            return f"record {at:,}" if v < at else None
        if self._last_time < 0:
            return None
        if kind == "clock":
            v += self._midnight
        return f"receive time {self._last_time:,} ns" if v < self._last_time else None

    def book(self, symbol: str) -> BookAt:
        """The live book of a symbol at the replay's current place: one order per price level,
        prices and quantities in the file's units (price_scale, qty_scale).

            r = lobreplay.open_lobc("btc.lobc"); r.run_until("12:00")
            r.book("BTCUSDT").depth("S", 5)
        """
        p = self._p1
        names = p["names"]
        if str(symbol).upper() not in names:
            raise InputError(f"{self.path}: no such symbol in this file: {symbol}")
        s = names.index(str(symbol).upper())
        z = p["sizing"].get(s)
        if z is None:
            raise InputError(f"{symbol}: not replayed (not among symbols=, or no book in the file)")
        return BookAt(self._rp.session.book(s), names[s], lambda px, present: z.from_core(px, present))

    def _pass2_end(self) -> dict:
        """The end of pass 2 (the message left unfinished dropped, counted), the latency
        tables, the summary's figures."""
        cfg, rp, p = self.cfg, self._rp, self._p1
        src, sizing, reports, names = self._src, p["sizing"], p["reports"], p["names"]
        self._bar2.__exit__(None, None, None)
        if src.torn is not p["torn"] or src.blocks != p["blocks"]:
            raise InputError(f"{self.path}: offset {src.torn.offset}: the file changed during the replay "
                             f"({src.torn.reason}); the reports stop there")
        self._write(rp.finish(), reports, names)
        pass2_s = time.perf_counter() - self._t1
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
        n, kinds, entry = p["n"], p["kinds"], p["entry"]
        pass1_s, scan_s = p["pass1_s"], p["scan_s"]
        return {
            "records": n,
            "records_by_kind": {lobc.KIND_NAMES.get(k, f"unknown_{k}"): int(kinds[k]) for k in np.flatnonzero(kinds)},
            "books": books,
            "messages_applied": c.messages_applied, "snapshots_applied": c.snapshots_applied,
            "messages_skipped": c.messages_skipped, "levels_applied": c.levels_applied,
            "update_ids_checked": p["market"],
            "events_by_kind": c.events, "unchanged_levels": c.unchanged_levels,
            "zero_qty_unknown_level": c.zero_qty_unknown_level,
            "desyncs": int(sum(c.desyncs.values())), "desyncs_by_cause": dict(sorted(c.desyncs.items())),
            "trades": c.trades, "bbo_changes": c.bbo_changes,
            "crossing_events": c.crossing_events,
            "bookticker": st,
            "pass1": {"seconds": round(pass1_s, 3), "cached": entry.found is not None,
                      **({"scan_seconds": scan_s, "cache_entry": entry.where} if entry.found else {})},
            "pass2": {"seconds": round(pass2_s, 3), "core_seconds": round(c.core_seconds, 3),
                      "core_events": c.core_events, "timing_every": self.cfg.timing_every if self.cfg.timing else 0,
                      "records_per_second": round(n / pass2_s) if pass2_s else None,
                      "core_events_per_second": round(c.core_events / c.core_seconds) if c.core_seconds else None},
        }

    def _bar(self, desc: str, total: int):
        return progress_bar(self.cfg.progress, desc, total, unit=" records")

    def _write(self, rows: dict, reports: ReportSet, names: list[str]) -> None:
        def common(r):
            rec = r["record"] if self._map is None else self._map.file_index(r["record"])
            return {"receive_ns": r["recv_ns"], "receive_ts": r["recv_ns"].astype("datetime64[ns]"), "sequence": rec,
                    "symbol": _symbols_of(names, r["symbol"])}

        if "bbo" in rows and "bbo" in reports:
            r = rows["bbo"]
            reports.write("bbo", {**common(r), "event_ns": r["exch_ns"], "update_id": r["update_id"],
                                  **{k: r[k] for k in ("bid_price", "bid_qty", "ask_price", "ask_qty")}})
        if "desyncs" in rows and "desyncs" in reports:
            r = rows["desyncs"]
            reports.write("desyncs", {**common(r), "event_ns": r["exch_ns"], "cause": r["cause"],
                                      "first_id": r["first_id"], "last_id": r["last_id"], "side": _side_str(r["side"]),
                                      **{k: r[k] for k in ("price", "qty", "other_price", "other_qty")}})
        if "trades" in rows and "trades" in reports:
            r = rows["trades"]
            reports.write("trades", {**common(r), "event_ns": r["exch_ns"], "trade_id": r["trade_id"],
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


depth_schema = schemas.lobc_depth_schema  # depth.parquet of a .lobc replay (lobreplay.reports.schemas)


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
