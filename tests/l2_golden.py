"""Golden digests of the .lobc replay's reports (lobreplay.l2.replay.replay_lobc).

    .venv/bin/python tests/l2_golden.py --write     # regenerate tests/golden/l2_reports.json
    .venv/bin/python tests/l2_golden.py             # compare the current code against it

The file was first written by the Python implementation of the replay (before the
per-record work moved into C, csrc/feeds/l2.c); tests/l2/test_l2_differential.py compares every
replay against it. Inputs: every real Binance recording in data/real/binance
(converted by lobreplay.binance.convert) and generated .lobc files (the seeded streams of
tests/l2/test_l2replay.py: stale crossing levels, gaps, resyncs, skipped updates, bookTicker
errors, malformed structure, a torn file), replayed whole and in small chunks, in both
price modes.

Changed since: the book of symbol X of "malformed" is sized for 6 levels at peak, not 5
(capacity 22, not 21): pass 1 no longer removes a level on the zero of a diff that pass 2
skips (X is unsynced after its GAP). The replay checks update ids (the market's rule:
`sequence_break`), so "malformed" got update ids that follow where its messages are meant
to apply, and a sequence break of its own: its entries were rewritten whole by the C replay
(`--write`, then only those entries kept; tests/l2/test_l2_differential.py checks the same stream
against the Python reference, by both markets' rules). The torn file's `lobc` entries gained
`corrupt` and `next_block`. The report columns were renamed since (one vocabulary for both
venues, docs/reports.md): the digests are keyed by the names of the first file, each new name
mapped back through lobreplay.reports.schemas.RENAMES. Every other figure is the first file's.

What is compared: every report table row for row (a SHA-256 of each column, the row
count), the summary's counters (not its times), and the latency table's (scope, kind,
count) rows when the golden run rolled nothing back (a rollback applies the events of a
run twice: an artefact of the Python implementation, docs/l2.md).
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import golden_common  # noqa: E402
from lobreplay.l2 import lobc  # noqa: E402
from lobreplay.l2.replay import ALL_REPORTS, L2ReplayConfig, replay_lobc  # noqa: E402
from lobreplay.reports import schemas  # noqa: E402

GOLDEN = HERE / "golden" / "l2_reports.json"
REAL = golden_common.RECORDINGS  # name -> the recording(s) converted as one
# the configurations each real recording is replayed with: (label, chunk_records, price_mode)
REAL_RUNS = [("whole", 1 << 18, "auto"), ("chunks_4099", 4099, "auto")]

# generated streams: name -> synth_stream keyword arguments
SYNTH = {
    "synth_cross_61": dict(seed=61, n_messages=800, n_symbols=3, ticker_error=0.01),
    "synth_gaps_21": dict(seed=21, n_messages=600, n_symbols=2, gap_rate=0.05),
    "synth_clean_41": dict(seed=41, n_messages=500, n_symbols=2, cross_rate=0.0),
    "synth_mixed_7": dict(seed=7, n_messages=3000, n_symbols=3, cross_rate=0.1, gap_rate=0.02, ticker_error=0.05),
    "synth_one_5": dict(seed=5, n_messages=1500, n_symbols=1, cross_rate=0.02, gap_rate=0.01),
}
SYNTH_RUNS = [("whole", 1 << 18, "auto"), ("chunks_97", 97, "auto"), ("ladder", 1 << 18, "ladder"),
              ("grid_chunks_13", 13, "grid")]

SUMMARY_KEYS = ("records", "records_by_kind", "books", "messages_applied", "snapshots_applied", "messages_skipped",
                "levels_applied", "events_by_kind", "unchanged_levels", "zero_qty_unknown_level", "desyncs",
                "desyncs_by_cause", "trades", "bbo_changes", "bookticker", "report_rows")
LOBC_KEYS = ("whole", "blocks", "records", "torn", "symbols", "market", "venue")


def record_builder():
    """(rows, r): a record list and r(kind, sym=0, **fields) appending one record to it (receive
    times one ns apart)."""
    rows = []

    def r(kind, sym=0, **kw):
        x = np.zeros(1, lobc.RECORD_DTYPE)[0]
        x["kind"], x["symbol"], x["recv_ns"] = kind, sym, 1_700_000_000_000_000_000 + len(rows)
        for f, v in kw.items():
            x[f] = v
        rows.append(x.copy())
    return rows, r


def malformed_records() -> np.ndarray:
    """Every kind of malformed structure the replay reports (docs/l2.md)."""
    rows, r = record_builder()

    for s in (0, 1):
        r(lobc.SNAPSHOT_BEGIN, s, first_id=5)
        r(lobc.SNAPSHOT_LEVEL, s, side=ord("B"), price=100, qty=1)
        r(lobc.SNAPSHOT_LEVEL, s, side=ord("S"), price=105, qty=4)
        r(lobc.SNAPSHOT_END, s, first_id=5)
    r(lobc.DIFF_BEGIN, first_id=6, last_id=6)       # no END: a new BEGIN follows
    r(lobc.DIFF_LEVEL, side=ord("B"), price=101, qty=1)
    r(lobc.SNAPSHOT_LEVEL, side=ord("B"), price=101, qty=1)   # the other level kind in it
    r(lobc.DIFF_BEGIN, first_id=6, last_id=7)             # (update ids: as the snapshot's 5 leads to)
    r(lobc.DIFF_LEVEL, side=ord("X"), price=102, qty=1)   # bad side
    r(lobc.DIFF_LEVEL, side=ord("S"), price=103, qty=2)
    r(lobc.DIFF_LEVEL, 1, side=ord("S"), price=103, qty=2)   # another symbol's level inside
    r(lobc.DIFF_LEVEL, side=ord("B"), price=0, qty=2)     # price <= 0
    r(lobc.DIFF_LEVEL, side=ord("B"), price=99, qty=-2)   # negative qty
    r(lobc.DIFF_END, first_id=6, last_id=7)
    r(lobc.DIFF_LEVEL, side=ord("S"), price=104, qty=1)   # outside any message
    r(lobc.DIFF_END, first_id=8, last_id=8)                # END without BEGIN
    r(lobc.TICKER_ASK, first_id=7, price=103, qty=2)      # without its TICKER_BID
    r(lobc.TICKER_BID, first_id=7, price=100, qty=1)      # a TICKER_BID without its ASK
    r(lobc.TRADE, first_id=3, price=100, qty=1, side=ord("S"))
    r(lobc.RESYNC, first_id=99)                            # no GAP, snapshot id differs
    r(lobc.DIFF_BEGIN, 1, first_id=6, last_id=9)
    r(lobc.DIFF_LEVEL, 1, side=ord("B"), price=100, qty=3)
    r(lobc.DIFF_END, 1, first_id=10, last_id=9)            # END id differs
    r(0, first_id=1)                                       # unknown kinds
    r(200, 1, first_id=1)
    r(lobc.GAP, 1, first_id=11, last_id=15, flags=99)      # unknown reason
    r(lobc.RESYNC, 1, first_id=5)                          # after a GAP, without a new snapshot
    r(lobc.TRADE, 7, first_id=4, price=100, qty=1, side=ord("B"))   # symbol beyond the metadata
    r(lobc.GAP, 0, first_id=11, last_id=15, flags=lobc.GAP_DISCONNECT)
    r(lobc.DIFF_BEGIN, first_id=20, last_id=21)            # skipped: unsynced
    r(lobc.DIFF_LEVEL, side=ord("B"), price=100, qty=0)
    r(lobc.DIFF_END, first_id=20, last_id=21)
    r(lobc.DIFF_BEGIN, 2, first_id=1, last_id=2)           # a symbol that never gets a snapshot
    r(lobc.DIFF_LEVEL, 2, side=ord("B"), price=100, qty=3)
    r(lobc.DIFF_END, 2, first_id=1, last_id=2)
    r(lobc.TICKER_BID, 1, first_id=1000, price=100, qty=3)   # later than every point so far: no_ticker
    r(lobc.TICKER_ASK, 1, first_id=1000, price=105, qty=4)
    r(lobc.TICKER_BID, 1, first_id=900, price=100, qty=3)    # out of order
    r(lobc.TICKER_ASK, 1, first_id=900, price=105, qty=4)
    for U, u in ((10, 10), (11, 950)):                       # before every ticker (no_ticker), then after one
        r(lobc.DIFF_BEGIN, 1, first_id=U, last_id=u)
        r(lobc.DIFF_LEVEL, 1, side=ord("S"), price=105, qty=4)
        r(lobc.DIFF_END, 1, first_id=U, last_id=u)
    r(lobc.SNAPSHOT_BEGIN, 0, first_id=30)                   # crossed in itself: a stale ask
    r(lobc.SNAPSHOT_LEVEL, 0, side=ord("S"), price=103, qty=4)
    r(lobc.SNAPSHOT_LEVEL, 0, side=ord("B"), price=104, qty=1)
    r(lobc.SNAPSHOT_END, 0, first_id=30)
    r(lobc.RESYNC, 0, first_id=30)
    r(lobc.DIFF_BEGIN, 0, first_id=31, last_id=32)
    r(lobc.DIFF_LEVEL, 0, side=ord("S"), price=105, qty=2)
    r(lobc.DIFF_LEVEL, 0, side=ord("S"), price=105, qty=3)   # the same level twice: the last counts
    r(lobc.DIFF_LEVEL, 0, side=ord("B"), price=104, qty=0)
    r(lobc.DIFF_END, 0, first_id=31, last_id=32)
    r(lobc.DIFF_BEGIN, 0, first_id=34, last_id=35)         # 33 expected: a sequence break, not applied
    r(lobc.DIFF_LEVEL, 0, side=ord("B"), price=101, qty=9)
    r(lobc.DIFF_END, 0, first_id=34, last_id=35)
    r(lobc.TICKER_BID, 0, first_id=36, price=104, qty=9)    # (its history is dropped with the sync)
    r(lobc.TICKER_ASK, 0, first_id=36, price=105, qty=3)
    r(lobc.DIFF_BEGIN, 0, first_id=36, last_id=36)         # unsynced from there: skipped
    r(lobc.DIFF_LEVEL, 0, side=ord("B"), price=101, qty=8)
    r(lobc.DIFF_END, 0, first_id=36, last_id=36)
    r(lobc.DIFF_BEGIN, first_id=22, last_id=23)            # cut: the replay drops it at the end
    r(lobc.DIFF_LEVEL, side=ord("B"), price=100, qty=0)
    return np.array(rows, lobc.RECORD_DTYPE)


def write_raw(path: Path, records: np.ndarray, symbols, per_block: int) -> None:
    """A .lobc file written block by block without the writer's checks (it refuses symbol
    indexes beyond the metadata, which a reader must survive)."""
    import zlib

    with lobc.LobcWriter(path, venue="binance", market="spot", symbols=list(symbols)):
        pass
    with open(path, "ab") as f:
        for seq, lo in enumerate(range(0, len(records), per_block)):
            body = records[lo:lo + per_block].tobytes()
            n = len(body) // lobc.RECORD_DTYPE.itemsize
            f.write(lobc._BLK.pack(lobc.BLOCK_MAGIC, n, zlib.crc32(body), 0, seq, int(records["recv_ns"][lo])) + body)


def generated_files(d: Path) -> dict[str, Path]:
    from tests.l2.test_l2replay import synth_stream, write_lobc

    out = {}
    for name, kw in SYNTH.items():
        kw = dict(kw)
        seed = kw.pop("seed")
        recs, _ = synth_stream(seed, **kw)
        p = d / f"{name}.lobc"
        write_lobc(p, recs, flush_records=997)
        out[name] = p
    p = d / "malformed.lobc"
    write_raw(p, malformed_records(), symbols=("X", "Y", "Z"), per_block=7)
    out["malformed"] = p
    raw = out["synth_cross_61"].read_bytes()
    p = d / "synth_cross_61_torn.lobc"
    p.write_bytes(raw[:len(raw) * 2 // 3])
    out["synth_cross_61_torn"] = p
    return out


def real_files(d: Path) -> dict[str, Path]:
    from lobreplay.binance.convert import convert

    out = {}
    for name, srcs in REAL.items():
        p = d / f"{name}.lobc"
        convert(srcs if len(srcs) > 1 else srcs[0], p)
        out[name] = p
    return out


def _column_digest(col: pa.ChunkedArray) -> str:
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    if pa.types.is_string(col.type):
        data = json.dumps(col.to_pylist()).encode()
    else:
        data = np.ascontiguousarray(col.to_numpy()).tobytes()
    return hashlib.sha256(data).hexdigest()[:16]


def digest(out_dir: Path, summary: dict) -> dict:
    res = {"summary": {k: summary.get(k) for k in SUMMARY_KEYS},
           "lobc": {k: summary["lobc"].get(k) for k in LOBC_KEYS},
           "rollbacks": summary.get("rollbacks", 0), "tables": {}}
    # (the latency histograms' rows are filled buckets of timings: their number varies run to run)
    res["summary"]["report_rows"] = {k: v for k, v in (summary.get("report_rows") or {}).items()
                                     if k != "latency_histograms"}
    for name in ALL_REPORTS:
        p = out_dir / f"{name}.parquet"
        if not p.exists():
            continue
        t = pq.read_table(p)
        if name == "latency":
            df = t.select(["scope", "kind", "count"]).to_pylist()
            res["latency_counts"] = [[r["scope"], r["kind"], r["count"]] for r in df]
            continue
        # (under the column names the golden file was written with: the report vocabulary's
        # renames mapped back, lobreplay.reports.schemas.RENAMES)
        back = {new: old for old, new in schemas.renamed("lobc", name).items()}
        res["tables"][name] = {"rows": t.num_rows,
                               "columns": {back.get(c, c): _column_digest(t[c]) for c in t.column_names}}
    return json.loads(json.dumps(res, default=int))


def run_all(files: dict[str, Path], runs, d: Path) -> dict:
    out = {}
    for name, path in files.items():
        for label, chunk, mode in runs:
            o = d / f"out_{name}_{label}"
            s = replay_lobc(path, str(o), L2ReplayConfig(chunk_records=chunk, price_mode=mode, timing_every=1), force=True)
            out[f"{name}/{label}"] = digest(o, s)
    return out


def compute() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        res = run_all(real_files(d), REAL_RUNS, d)
        res.update(run_all(generated_files(d), SYNTH_RUNS, d))
    return res


def compare(golden: dict, got: dict) -> list[str]:
    """Differences between a golden entry set and a new one (empty: identical)."""
    bad = []
    for key in sorted(set(golden) | set(got)):
        g, n = golden.get(key), got.get(key)
        if g is None or n is None:
            bad.append(f"{key}: {'missing in the new run' if n is None else 'not in the golden file'}")
            continue
        for part in ("summary", "lobc", "tables"):
            if g[part] != n[part]:
                sub = [k for k in set(g[part]) | set(n[part]) if g[part].get(k) != n[part].get(k)]
                bad.append(f"{key}: {part} differs in {sorted(sub)}: golden "
                           f"{ {k: g[part].get(k) for k in sub} } new { {k: n[part].get(k) for k in sub} }")
        if g["rollbacks"] == 0 and g.get("latency_counts") != n.get("latency_counts"):
            bad.append(f"{key}: latency counts differ: golden {g.get('latency_counts')} new {n.get('latency_counts')}")
    return bad


def main() -> int:
    return golden_common.run(GOLDEN, compute, compare, "replays", __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
