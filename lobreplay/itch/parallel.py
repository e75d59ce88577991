"""`lobreplay itch replay FILE --jobs N`: one day on N processes.

Books are independent per symbol, so the stock locates are shared out
(locate % N == k goes to part k; locate 0, the system-wide messages, to part
0). Each part reads the whole file (framing is cheap next to the book work),
replays its share into DIR/.part-k/, and the parts are merged into one report
directory identical to a one-process replay: the same rows in the same order
(every table is written in file order within a part), the latency of the whole
replay from the parts' histograms summed, and one summary.
"""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import time

import numpy as np

from .._lazy import Deferred
from ..events import Kind
from ..latency import histogram_table, summary_rows
from ..reports import write_json
from .replay import ItchReplay, ReplayConfig, prepare_output, replay_itch

PART_HIST = "latency_hist.npz"
pa, pc, pq = Deferred("pyarrow"), Deferred("pyarrow.compute"), Deferred("pyarrow.parquet")


def replay_itch_jobs(path: str, out_dir: str, cfg: ReplayConfig, jobs: int, *, force: bool = False) -> dict:
    if jobs <= 1:
        return replay_itch(path, out_dir, cfg, force=force)
    t0 = time.perf_counter()
    prepare_output(out_dir, force)
    parts = [os.path.join(out_dir, f".part-{k}") for k in range(jobs)]
    for d in parts:
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    args = [(path, parts[k], dataclasses.replace(cfg, part=(k, jobs), progress=cfg.progress and k == 0))
            for k in range(jobs)]
    try:
        # fork: the parent has read nothing and started no thread; each child builds its own session
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            summaries = pool.starmap(_run_part, args)
        summary = merge(parts, out_dir, summaries)
    except BaseException as e:
        write_json(os.path.join(out_dir, "summary.json"),
                   {"status": "failed", "error": f"{type(e).__name__}: {e}", "jobs": jobs})
        raise
    finally:
        for d in parts:
            shutil.rmtree(d, ignore_errors=True)
    summary["jobs"] = jobs
    summary["wall_seconds"] = round(time.perf_counter() - t0, 3)
    write_json(os.path.join(out_dir, "summary.json"), summary)
    return summary


def _run_part(path: str, part_dir: str, cfg: ReplayConfig) -> dict:
    r = ItchReplay(path, part_dir, cfg)
    s = r.run()
    if r.session is not None:
        np.savez(os.path.join(part_dir, PART_HIST), **{k.name: r.session.histogram(k) for k in Kind})
    return s


def _order_key(t: pa.Table, name: str) -> list[tuple[str, str]]:
    """File order: by message (residual rows last), ties (residual rows) by locate;
    depth samples by time, then locate."""
    first = ("time_ns", "ascending") if name == "depth" else ("_key", "ascending")
    return [first] + [("locate", "ascending")] * ("locate" in t.column_names)


def merge(parts: list[str], out_dir: str, summaries: list[dict]) -> dict:
    names = sorted({f for d in parts for f in os.listdir(d) if f.endswith(".parquet")})
    for name in names:
        files = [os.path.join(d, name) for d in parts if os.path.exists(os.path.join(d, name))]
        tables = [pq.read_table(f) for f in files]
        meta = tables[0].schema.metadata
        t = pa.concat_tables(tables, promote_options="default").unify_dictionaries().combine_chunks()
        stem = name[:-len(".parquet")]
        if stem == "symbols":
            t = _merge_symbols(t)
        elif stem == "latency":
            t = _merge_latency(t, parts, tables[0].schema)
        elif "message" in t.column_names or stem == "depth":
            if "message" in t.column_names:  # residual rows (message -1) come last, as in one process
                m = t["message"]
                t = t.append_column("_key", pc.if_else(pc.less(m, 0), pa.scalar(2**62, pa.int64()), m))
            t = t.take(pc.sort_indices(t, _order_key(t, stem)))
            if "_key" in t.column_names:
                t = t.drop_columns(["_key"])
        pq.write_table(t.replace_schema_metadata(meta), os.path.join(out_dir, name), compression="zstd")
    return _merge_summaries(summaries, out_dir, sorted(f for f in os.listdir(out_dir) if f.endswith(".parquet")))


def _merge_symbols(t: pa.Table) -> pa.Table:
    """One row per locate: the part that replayed it, else part 0's."""
    df = t.to_pandas()
    df["_pick"] = ~df["replayed"].fillna(False)
    df = df.sort_values(["locate", "_pick"], kind="stable").drop_duplicates("locate", keep="first")
    df = df.drop(columns="_pick")
    return pa.Table.from_pandas(df, schema=t.schema, preserve_index=False)


def _merge_latency(t: pa.Table, parts: list[str], schema: pa.Schema) -> pa.Table:
    """The whole replay's rows from the parts' histograms summed; the per-symbol rows as
    the parts wrote them, in locate order (one process writes them in that order)."""
    hists = {}
    for d in parts:
        p = os.path.join(d, PART_HIST)
        if os.path.exists(p):
            with np.load(p) as z:
                for k in z.files:
                    hists[k] = hists.get(k, 0) + z[k]
    rows = []
    if hists:
        rows = summary_rows("ALL", None, hists)
        hists["ALL"] = sum(hists.values())
        from .._coreapi import bucket_lows
        from ..hgrm import write_hgrm
        for name, h in hists.items():
            if np.any(h):
                write_hgrm(h, bucket_lows(), os.path.join(os.path.dirname(parts[0]), f"latency_{name}.hgrm"))
        pq.write_table(histogram_table(hists).replace_schema_metadata(schema.metadata),
                       os.path.join(os.path.dirname(parts[0]), "latency_histograms.parquet"), compression="zstd")
    head = pa.Table.from_pylist(rows, schema=schema)
    per = t.filter(pc.not_equal(t["scope"], "ALL"))
    return pa.concat_tables([head, per.take(pc.sort_indices(per, [("locate", "ascending")]))])


def _merge_summaries(summaries: list[dict], out_dir: str, names: list[str]) -> dict:
    first = summaries[0]
    out = dict(first)
    for key in ("books", "book_levels", "book_capacity", "events", "executions_in_feed", "desyncs",
                "residual_orders"):
        out[key] = sum(s[key] for s in summaries)
    causes: dict[str, int] = {}
    for s in summaries:
        for k, v in s["desyncs_by_cause"].items():
            causes[k] = causes.get(k, 0) + v
    out["desyncs_by_cause"] = causes
    out["desync_rate_per_execution"] = (out["desyncs"] / out["executions_in_feed"]
                                        if out["executions_in_feed"] else None)
    out["notes"] = [n for s in summaries for n in s.get("notes", [])]
    out["report_rows"] = {n[:-len(".parquet")]: pq.read_metadata(os.path.join(out_dir, n)).num_rows
                          for n in names if n != "symbols.parquet"}
    p1 = max(s["pass1"]["seconds"] for s in summaries)
    p2 = max(s["pass2"]["seconds"] for s in summaries)
    core_s = max(s["pass2"]["core_seconds"] for s in summaries)
    out["pass1"] = {"seconds": p1, "messages_per_second": round(out["messages"] / p1) if p1 else None,
                    "per_part": [s["pass1"] for s in summaries]}
    out["pass2"] = {"seconds": p2, "core_seconds": core_s,
                    "messages_per_second": round(out["messages"] / p2) if p2 else None,
                    "core_events_per_second": round(out["events"] / core_s) if core_s else None,
                    "per_part": [s["pass2"] for s in summaries]}
    out["peak_rss_bytes"] = max(s["peak_rss_bytes"] for s in summaries)
    out["peak_rss_note"] = "the largest of the parts' peaks; they run at once"
    return json.loads(json.dumps(out, default=int))
