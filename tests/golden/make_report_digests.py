"""Digests of every report table a replay writes, per table and column: the row count and a
SHA-256 of the column's values in row order (and its Arrow type).

    .venv/bin/python tests/golden/make_report_digests.py --write   # rewrite report_digests.json
    .venv/bin/python tests/golden/make_report_digests.py           # compare the current code

The golden file (report_digests.json, beside this script) was written on the code before the
report vocabulary changed (docs/reports.md, "One vocabulary"): tests/reports/test_report_schemas.py
replays the same inputs on the current code, maps every column name back through
lobreplay.reports.schemas.RENAMES and requires the same rows and values.

Inputs: the bundled sample day (data/sample_day.itch.gz) with every report and depth samples
by time, again with depth samples at every change, and in two processes (--jobs 2); a real
NASDAQ cut (nasdaq_20230822_0930.itch bundled in data/real: its residual orders and
unknown references give desync rows); two small real Binance recordings (cryptofeed's spot and
USD-M captures, bundled in data/real) converted to .lobc, with depth samples by time and
at every change; a seeded generated .lobc stream with crossing levels, gaps, resyncs and
bookTicker errors (tests/l2/test_l2replay.py's synth_stream: desyncs and ticker_mismatches rows).
Every run is deterministic; the latency figures and histogram buckets are timings, so of
those tables only the column names and types (and the latency table's rows and its scope,
instrument, kind and count) are compared.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE.parent)]

GOLDEN = HERE / "report_digests.json"
SAMPLE_DAY = ROOT / "data" / "sample_day.itch.gz"
ITCH_CUT = ROOT / "data" / "real" / "itch" / "nasdaq_20230822_0930.itch"
LOBC_INPUTS = {"cryptofeed_spot": "BINANCE.ws.1.0", "cryptofeed_usdm": "BINANCE_FUTURES.ws.1.0"}
# timings: only names, types and row counts (latency: its deterministic columns too)
TIMED = {"latency": ("p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns"),
         "latency_histograms": ("kind", "bucket_low_ns", "bucket_high_ns", "count")}


def column_digest(col: pa.ChunkedArray) -> str:
    """SHA-256 of a column's values in row order (dictionary columns by their values; nulls
    as None), independent of how Arrow chunks or encodes it."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    h = hashlib.sha256()
    if col.null_count == 0 and (pa.types.is_integer(col.type) or pa.types.is_timestamp(col.type)
                                or pa.types.is_floating(col.type)):
        for chunk in col.chunks:
            h.update(chunk.to_numpy(zero_copy_only=False).tobytes())
    else:
        h.update(json.dumps(col.to_pylist(), default=str).encode())
    return h.hexdigest()


def table_digest(path: Path) -> dict:
    t = pq.read_table(path)
    timed = TIMED.get(path.stem, ())
    cols = []  # (a list: the columns' order is part of the schema)
    for f, col in zip(t.schema, t.columns):
        cols.append([f.name, str(f.type), None if f.name in timed else column_digest(col)])
    # (the histograms' rows are their non-empty buckets: timings too)
    return {"rows": None if path.stem == "latency_histograms" else t.num_rows, "columns": cols}


def dir_digest(d: Path) -> dict:
    return {p.stem: table_digest(p) for p in sorted(d.glob("*.parquet"))}


def _every_event(config_class) -> dict:
    """Every event timed, as every replay did when the golden was made: the latency table's rows
    (one per book and kind with a timed event) and counts are compared (a6474bf made a replay time
    every 16th event by default; older checkouts have no timing_every)."""
    return {"timing_every": 1} if "timing_every" in config_class.__dataclass_fields__ else {}


def _itch_runs() -> dict:
    from lobreplay.itch.parallel import replay_itch_jobs
    from lobreplay.itch.replay import ReplayConfig as _Config, replay_itch

    def ReplayConfig(**kw):
        return _Config(**kw, **_every_event(_Config))
    return {
        "itch_sample_day": lambda out: replay_itch(str(SAMPLE_DAY), out, ReplayConfig(depth_levels=5, cache=False)),
        "itch_sample_day_depth_change": lambda out: replay_itch(
            str(SAMPLE_DAY), out, ReplayConfig(depth_levels=3, depth_every_ns=0, cache=False)),
        "itch_sample_day_jobs2": lambda out: replay_itch_jobs(
            str(SAMPLE_DAY), out, ReplayConfig(depth_levels=5, cache=False), 2),
        "itch_nasdaq_20230822_0930": lambda out: replay_itch(
            str(ITCH_CUT), out, ReplayConfig(depth_levels=2, allow_truncated=True, cache=False)),
    }


def _lobc_runs(tmp: Path) -> dict:
    import golden_common
    from lobreplay.binance.convert import convert
    from lobreplay.l2.replay import L2ReplayConfig as _Config, replay_lobc

    def L2ReplayConfig(**kw):
        return _Config(**kw, **_every_event(_Config))
    runs = {}
    for name, file in LOBC_INPUTS.items():
        lobc_path = tmp / f"{name}.lobc"
        convert(golden_common.BINANCE / "cryptofeed" / file, lobc_path)
        runs[f"lobc_{name}"] = (lambda p: lambda out: replay_lobc(p, out, L2ReplayConfig(depth_levels=5,
                                                                                          cache=False)))(lobc_path)
        runs[f"lobc_{name}_depth_change"] = (lambda p: lambda out: replay_lobc(
            p, out, L2ReplayConfig(depth_levels=3, depth_every_ns=0, cache=False)))(lobc_path)
    from tests.l2.test_l2replay import synth_stream, write_lobc
    synth = tmp / "synth_mixed_7.lobc"
    write_lobc(synth, synth_stream(seed=7, n_messages=3000, n_symbols=3, cross_rate=0.1, gap_rate=0.02,
                                   ticker_error=0.05)[0])
    runs["lobc_synth_mixed_7"] = lambda out: replay_lobc(synth, out, L2ReplayConfig(depth_levels=2, cache=False))
    return runs


def compute() -> dict:
    """{run: {table: {rows, columns: [[name, type, sha256], ...]}}} on the current code."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        runs = {**_itch_runs(), **_lobc_runs(tmp)}
        for name, run in runs.items():
            d = tmp / name
            summary = run(str(d))
            if summary["status"] != "ok":
                raise RuntimeError(f"{name}: the replay failed: {summary.get('error')}")
            out[name] = dir_digest(d)
    return out


def compare(golden: dict, got: dict, renames=None) -> list[str]:
    """The differences between two digests; renames(run, table) -> {new name: old name} maps
    got's column names back to golden's."""
    bad = []
    for run in sorted(set(golden) | set(got)):
        g, n = golden.get(run), got.get(run)
        if g is None or n is None:
            bad.append(f"{run}: {'not in the golden file' if g is None else 'not run'}")
            continue
        for table in sorted(set(g) | set(n)):
            gt, nt = g.get(table), n.get(table)
            if gt is None or nt is None:
                bad.append(f"{run}/{table}: {'new table' if gt is None else 'missing'}")
                continue
            if gt["rows"] != nt["rows"]:
                bad.append(f"{run}/{table}: {nt['rows']} rows, golden {gt['rows']}")
            back = renames(run, table) if renames else {}
            cols = [[back.get(c[0], c[0]), *c[1:]] for c in nt["columns"]]
            if [c[0] for c in cols] != [c[0] for c in gt["columns"]]:
                bad.append(f"{run}/{table}: columns {[c[0] for c in cols]} (mapped back), "
                           f"golden {[c[0] for c in gt['columns']]}")
            old = {c[0]: c for c in gt["columns"]}
            for c in cols:
                if c[0] in old and c != old[c[0]]:
                    bad.append(f"{run}/{table}.{c[0]}: {c[1:]}, golden {old[c[0]][1:]}")
    return bad


def renames_back():
    """(run, table) -> {new column name: old} from the vocabulary's rename list (the runs are
    named after their venue: itch_..., lobc_...); None before the vocabulary existed."""
    try:
        from lobreplay.reports.schemas import renamed
    except ImportError:
        return None
    return lambda run, table: {new: old for old, new in renamed(run.split("_")[0], table).items()}


def main() -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the golden file instead of comparing")
    args = ap.parse_args()
    got = compute()
    if args.write:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN.name}: {len(got)} runs, {sum(len(v) for v in got.values())} tables")
        return 0
    bad = compare(json.loads(GOLDEN.read_text()), got, renames_back())
    for b in bad:
        print(b)
    print(f"{len(got)} runs, {len(bad)} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
