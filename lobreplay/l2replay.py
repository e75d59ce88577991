"""Replay a .lobc capture (Binance depth) through the matching core and write
reports (docs/l2.md).

Pass 1 (lobreplay.l2.scan) sizes one book per symbol from every level price
and the peak number of live levels. Pass 2 feeds the records chunk by chunk to
lobreplay.l2.L2Replay, which turns level changes into core events and applies
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import __version__, _arrow, lobc
from .errors import InputError
from .itch.replay import prepare_output
from .l2 import MAX_GRID_LEVELS, L2Replay, scan_counts
from .latency import report_rows
from .reports import SCHEMAS, ReplayRun, ReportSet, TableWriter, file_sha256

ALL_REPORTS = ("bbo", "desyncs", "trades", "latency", "ticker_mismatches")
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


@dataclass
class L2ReplayConfig:
    symbols: list[str] | None = None      # replay only these (default: all)
    headroom: float = 0.2                 # grid band = price range widened by this fraction
    price_mode: str = "auto"              # auto | grid | ladder (lobreplay.l2.scan)
    max_grid_levels: int = MAX_GRID_LEVELS
    reports: tuple[str, ...] = ALL_REPORTS
    timing: bool = True
    chunk_records: int = 1 << 18


class _Corrupt(Exception):
    """A block's CRC does not match: the replay starts again on the blocks before it."""


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
        bad = [r for r in cfg.reports if r not in ALL_REPORTS]
        if bad:
            raise InputError(f"reports: unknown report(s) {', '.join(bad)}; choose from {', '.join(ALL_REPORTS)}")

    def run(self) -> dict:
        """Reads the file once; its blocks' CRCs and its SHA-256 are computed on a helper
        thread while the replay runs. The first report rows wait for the CRCs (and the
        tables' provenance for the SHA-256); a block whose CRC does not match ends the file
        there, and the replay starts again on the records before it."""
        with ReplayRun(self.out_dir, {"source_file": os.path.basename(self.path)}) as run, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="lobreplay-verify") as helper:
            data = lobc.read(self.path, verify=False)
            verified = helper.submit(lobc.verify_crc, data)
            sha = helper.submit(file_sha256, self.path)
            meta = self.src_meta(data)
            run.summary["source"] = meta
            try:
                # the tables take the SHA-256 (a Future) when they open their files
                run.reports = ReportSet(self.out_dir, [], {**meta, "source_sha256": sha})
                for name in self.cfg.reports:
                    run.reports.writers[name] = TableWriter(os.path.join(self.out_dir, f"{name}.parquet"),
                                                            L2_SCHEMAS[name], run.reports.metadata)
                try:
                    res = self._replay(data, run.reports, lambda: verified.result() is data)
                except _Corrupt:
                    data = verified.result()
                    res = self._replay(data, run.reports, lambda: True)
            except BaseException:
                with contextlib.suppress(Exception):
                    meta["source_sha256"] = sha.result()
                raise
            meta["source_sha256"] = sha.result()
            run.summary["lobc"] = {k: data.meta.get(k) for k in ("venue", "market", "symbols", "price_scale",
                                                                  "qty_scale", "created_ns", "tool", "streams",
                                                                  "source")}
            run.summary["lobc"].update({"whole": data.whole, "blocks": data.blocks,
                                        "records": int(len(data.records)),
                                        "torn": data.torn.as_dict() if data.torn else None})
            run.summary.update(res)
        return run.summary

    def src_meta(self, data) -> dict:
        """The tables' provenance; source_sha256 is filled in when the helper thread has it."""
        m = data.meta
        return {"source_file": os.path.basename(self.path), "source_size": str(data.size),
                "source_sha256": "", "lobreplay_version": __version__,
                "venue": str(m.get("venue", "")), "market": str(m.get("market", "")),
                "price_scale": str(m["price_scale"]), "qty_scale": str(m["qty_scale"]),
                "lobc_created_ns": str(m.get("created_ns", "")), "time_unit": "ns since the Unix epoch (UTC)"}

    def _replay(self, data, reports: ReportSet, verified) -> dict:
        """Pass 1 and 2. verified() (it may wait) is asked before the first rows are written and
        at the end: False raises _Corrupt before anything was written."""
        checked = False

        def write(rows):
            nonlocal checked
            if not checked:
                if not verified():
                    raise _Corrupt()
                checked = True
            self._write(rows, reports, names)

        cfg = self.cfg
        names = [str(s) for s in data.meta["symbols"]]
        recs = data.records
        if cfg.symbols:
            missing = [s for s in cfg.symbols if s.upper() not in names]
            if missing:
                raise InputError(f"{self.path}: no such symbol(s) in this file: {', '.join(missing)}")
            keep = [names.index(s.upper()) for s in cfg.symbols]
            recs = recs[np.isin(recs["symbol"], keep)]
        t0 = time.perf_counter()
        sizing, kinds = scan_counts(recs, names, headroom=cfg.headroom, mode=cfg.price_mode,
                                    max_grid_levels=cfg.max_grid_levels)
        pass1_s = time.perf_counter() - t0
        has_tickers = bool(kinds[lobc.TICKER_BID])
        rp = L2Replay(sizing, names, timing=cfg.timing, compare_tickers=has_tickers)
        t1 = time.perf_counter()
        for rows in rp.feed_all(recs, cfg.chunk_records):
            if rows:
                write(rows)
        write(rp.finish())
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
            "records": int(len(recs)),
            "records_by_kind": {lobc.KIND_NAMES.get(k, f"unknown_{k}"): int(kinds[k]) for k in np.flatnonzero(kinds)},
            "books": books,
            "messages_applied": c.messages_applied, "snapshots_applied": c.snapshots_applied,
            "messages_skipped": c.messages_skipped, "levels_applied": c.levels_applied,
            "events_by_kind": c.events, "unchanged_levels": c.unchanged_levels,
            "zero_qty_unknown_level": c.zero_qty_unknown_level,
            "desyncs": int(sum(c.desyncs.values())), "desyncs_by_cause": dict(sorted(c.desyncs.items())),
            "trades": c.trades, "bbo_changes": c.bbo_changes,
            "crossing_events": c.crossing_events,
            "bookticker": st,
            "pass1": {"seconds": round(pass1_s, 3)},
            "pass2": {"seconds": round(pass2_s, 3), "core_seconds": round(c.core_seconds, 3),
                      "core_events": c.core_events,
                      "records_per_second": round(len(recs) / pass2_s) if pass2_s else None,
                      "core_events_per_second": round(c.core_events / c.core_seconds) if c.core_seconds else None},
        }

    def _write(self, rows: dict, reports: ReportSet, names: list[str]) -> None:
        def common(r):
            return {"recv_ns": r["recv_ns"], "ts": r["recv_ns"].astype("datetime64[ns]"), "record": r["record"],
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
        if "ticker_mismatches" in rows and "ticker_mismatches" in reports:
            r = rows["ticker_mismatches"]
            reports.write("ticker_mismatches", {**common(r), **{k: r[k] for k in r if k not in (
                "recv_ns", "record", "symbol")}})

    def _latency(self, rp: L2Replay, sizing, reports) -> None:
        """Overall (the session's fine histograms) and per symbol (each book's coarse ones)."""
        reports.write("latency", report_rows(rp.session, [(z.name, s) for s, z in sorted(sizing.items())]))


def replay_lobc(path, out_dir: str, cfg: L2ReplayConfig | None = None, *, force: bool = False) -> dict:
    """Replay a .lobc file into out_dir (created; refused if it holds files,
    unless force). Returns the summary (also written as summary.json)."""
    cfg = cfg or L2ReplayConfig()
    prepare_output(out_dir, force)
    return LobcReplay(path, out_dir, cfg).run()
