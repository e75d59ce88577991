"""`lobreplay itch replay FILE --jobs N`: one day on N processes.

Books are independent per symbol, so the stock locates are shared out. Pass 1
runs once, in the parent: one reader frames every chunk once, and N threads
scan it (locate % N == k on thread k: the scan releases the GIL), while
another thread computes the file's SHA-256. Its figures give the split for
pass 2, balanced by messages per locate (split_locates; locate 0, the
system-wide messages, in part 0). Then, with every thread done, the parent
forks N processes; each inherits pass 1, reads the whole file again and
replays its share of the locates into a directory of its own in DIR (.part-k-*), its tables as
uncompressed Arrow IPC streams (read back once, so not worth encoding). The
parts are merged, a table per thread, into one report directory identical to a
one-process replay: the same rows in the same order (every table is written in
file order within a part), the latency of the whole replay from the parts'
histograms summed, the parent's SHA-256 in every table, and one summary.
"""
from __future__ import annotations

import contextlib
import dataclasses
import heapq
import json
import os
import shutil
import signal
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lobreplay.core import arrow as _arrow
from lobreplay._lazy import Deferred, preload
from lobreplay.core.events import Kind
from lobreplay.reports.latency import histogram_table, summary_rows
from lobreplay.reports.tables import STREAM_SUFFIX, error_text, file_sha256, parquet_options, read_report, report_path, write_json
from lobreplay.replay.outdir import prepare_output, written_since
from lobreplay.itch.replay import ItchReplay, ReplayConfig, desync_rate, replay_itch, usable_cpus

PART_HIST = "latency_hist.npz"
_PASS1 = None  # (pass 1 of the whole file, the locate -> part split): set before the fork, inherited
pa, pc, pq = Deferred("pyarrow"), Deferred("pyarrow.compute"), Deferred("pyarrow.parquet")


def replay_itch_jobs(path: str, out_dir: str, cfg: ReplayConfig, jobs: int, *, force: bool = False) -> dict:
    """jobs is capped at the CPUs this process may use and at the books pass 1 finds (more
    processes only cost memory: each holds a copy of the reader): the summary's `jobs` is
    the processes used, `jobs_asked` and `jobs_capped` (a note, in `notes` too) say why."""
    asked, capped = jobs, None
    if jobs > usable_cpus():
        jobs = usable_cpus()
        capped = f"--jobs {asked} capped at {jobs}: the CPUs this process may use"
    if jobs <= 1:
        if capped is None:
            return replay_itch(path, out_dir, cfg, force=force)
        r = ItchReplay(path, out_dir, cfg)  # (the input first)
        prepare_output(out_dir, force, inputs=[path])
        r.notes.append(capped)
        s = r.run()
        s.update(jobs=1, jobs_asked=asked, jobs_capped=capped)
        write_json(os.path.join(out_dir, "summary.json"), s)
        return s
    t0 = time.perf_counter()
    whole = ItchReplay(path, out_dir, dataclasses.replace(cfg, part=None), hash_file=False)  # (the input first)
    prepare_output(out_dir, force, inputs=[path])
    before = set(os.listdir(out_dir))  # (what was there: summary.json lists the files written since)
    parts: list[str] = []
    global _PASS1
    stage = "pass 1"  # where a failure stopped it: pass 1 (here), the parts (each pass 2), the merge
    try:
        # pass 1 here, once, beside the file's SHA-256 and, with reports, the pyarrow imports
        # (once here, not in every part) on other threads; all of them are done before the
        # fork. The scans take the cores the reader and the hash leave (two cores: one scan,
        # which beats two scans sharing them with the hash: benchmarks/RESULTS.md)
        imports = preload() if cfg.reports else None
        scans = max(1, min(jobs, usable_cpus() - 1 - bool(cfg.hash)))
        with ThreadPoolExecutor(1, thread_name_prefix="sha256") as helper:
            size = os.stat(path).st_size  # (what the summary says was read, and hashed: a file may grow)
            sha = helper.submit(file_sha256, path, size=size) if cfg.hash else None
            p1 = whole.sizing_pass(threads=scans)
            scanned = time.perf_counter()
            sha256 = sha.result() if sha is not None else ""
        if imports is not None:
            imports.join()
        books = len(whole._select(p1))
        if books < jobs:
            capped = (f"--jobs {asked} capped at {max(books, 1)}: the books to replay"
                      + (f" (and {usable_cpus()} CPUs)" if capped else ""))
            jobs = max(books, 1)
        # each part's own new directory (never one that was there: it is removed at the end)
        parts = [tempfile.mkdtemp(prefix=f".part-{k}-", dir=out_dir) for k in range(jobs)]
        args = [(path, parts[k], dataclasses.replace(cfg, part=(k, jobs), progress=cfg.progress and k == 0))
                for k in range(jobs)]
        _PASS1 = (p1, split_locates(p1.stats["messages"], jobs))
        import multiprocessing  # here: a one-job replay does not load it (5 ms)
        ctx = multiprocessing.get_context("fork")  # the parts inherit _PASS1; no thread is running
        forked, t_fork = time.time(), time.perf_counter()
        stage = "pass 2 (the parts)"
        with ctx.Pool(jobs) as pool:
            summaries = pool.starmap(_run_part, args)
            joined = time.time()
            stage = "merging the parts' reports"
            times = [s.pop("part_times") for s in summaries]
            for s in summaries:
                s["source"]["source_sha256"] = sha256
                s["source"]["source_size"] = str(size)
            # the .hgrm files (pure Python) on the pool's processes while this one merges the tables
            hists = _part_hists(parts)
            hgrm = pool.starmap_async(_write_hgrm, _hgrm_tasks(hists, out_dir)) if "latency" in cfg.reports else None
            summary = merge(parts, out_dir, summaries, max(s.pop("last_event_ns") for s in summaries), hists)
            if hgrm is not None:
                hgrm.get()
        whole.keep_pass1(sha256)
        summary["notes"] = summary.get("notes", []) + whole.notes + ([capped] if capped else [])
        summary["text_bytes_outside_ascii"] = p1.non_ascii + sum(s.get("text_bytes_outside_ascii", 0) for s in summaries)
        summary["parallel"] = {
            "split": "pass 1: one reader, locate % jobs per scan thread; pass 2: balanced by messages per locate",
            "pass1_seconds": round(p1.seconds, 3),
            "hash_wait_seconds": round(t_fork - scanned, 3),
            "start_seconds": [round(a - forked, 3) for a, _ in times],
            "part_seconds": [round(b - a, 3) for a, b in times],
            "join_seconds": round(joined - max(b for _, b in times), 3),
            "merge_seconds": round(time.time() - joined, 3),
        }
    except BaseException as e:
        # (the parts' reports are discarded: no table is written until the merge, docs/itch.md)
        src = {"source_file": os.path.basename(path)}
        with contextlib.suppress(OSError):
            src["source_size"] = str(os.stat(path).st_size)
        write_json(os.path.join(out_dir, "summary.json"),
                   {"status": "failed", "error": error_text(e), "stopped_at": {"stage": stage}, "source": src,
                    "jobs": jobs, "wall_seconds": round(time.perf_counter() - t0, 3),
                    "files": written_since(out_dir, before)})
        raise
    finally:
        _PASS1 = None
        for d in parts:
            shutil.rmtree(d, ignore_errors=True)
    summary["jobs"] = jobs
    if capped:
        summary.update(jobs_asked=asked, jobs_capped=capped)
    summary["wall_seconds"] = round(time.perf_counter() - t0, 3)
    summary["files"] = written_since(out_dir, before)
    write_json(os.path.join(out_dir, "summary.json"), summary)
    return summary


def split_locates(messages: np.ndarray, jobs: int) -> np.ndarray:
    """The part of each locate (an array over 0..65535): locate 0 in part 0, the
    others with messages largest first, each to the part with the fewest messages
    so far (the lowest-numbered on a tie), locates without messages by locate % jobs.
    The same counts always give the same split."""
    messages = np.asarray(messages, np.int64)
    owner = np.arange(len(messages)) % jobs
    owner[0] = 0
    heap = [(int(messages[0]), 0)] + [(0, k) for k in range(1, jobs)]
    heapq.heapify(heap)
    locs = np.flatnonzero(messages[1:]) + 1
    for loc in locs[np.argsort(-messages[locs], kind="stable")].tolist():
        load, k = heapq.heappop(heap)
        owner[loc] = k
        heapq.heappush(heap, (load + int(messages[loc]), k))
    return owner


def _run_part(path: str, part_dir: str, cfg: ReplayConfig) -> dict:
    # a part is stopped by its pool (SIGTERM when the parent fails or is stopped): the
    # command line's handler, inherited through the fork, is the parent's, not the part's
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    started = time.time()
    r = ItchReplay(path, part_dir, cfg, pass1=_PASS1, hash_file=False)  # the parent did pass 1 and the hash
    s = r.run()
    if r.session is not None and cfg.timing:  # (untimed, one process writes no histograms either)
        np.savez(os.path.join(part_dir, PART_HIST), **{k.name: r.session.histogram(k) for k in Kind})
    s["last_event_ns"] = r.last_event_ns
    s["part_times"] = (started, time.time())  # wall clock: compared with the parent's
    return s


def merge(parts: list[str], out_dir: str, summaries: list[dict], last_event_ns: int | None = None,
          hists: dict | None = None) -> dict:
    """last_event_ns: the time of the replay's last event (the latest of the parts'),
    the time of the residual rows in desyncs, as in one process. hists: the parts'
    latency histograms summed (_part_hists; read here if not given). The .hgrm files are
    the caller's (_hgrm_tasks), written meanwhile on the parts' processes."""
    if hists is None:
        hists = _part_hists(parts)
    names = sorted({f[:-len(STREAM_SUFFIX)] for d in parts for f in os.listdir(d) if f.endswith(STREAM_SUFFIX)})
    files = {n: [p for d in parts if os.path.exists(p := report_path(d, n, stream=True))] for n in names}
    size = {n: sum(os.path.getsize(p) for p in files[n]) for n in names}
    # a table per thread, the largest first: reading, sorting and writing Parquet release the GIL
    with ThreadPoolExecutor(max(2, len(parts)), thread_name_prefix="lobreplay-merge") as pool:
        list(pool.map(lambda n: _merge_table(files[n], out_dir, n, hists, summaries, last_event_ns),
                      sorted(names, key=lambda n: -size[n])))
    return _merge_summaries(summaries, out_dir, sorted(f for f in os.listdir(out_dir) if f.endswith(".parquet")))


def _merge_table(files: list[str], out_dir: str, stem: str, hists: dict, summaries: list[dict],
                 last_event_ns: int | None) -> None:
    """The parts' tables `stem` (their streams `files`) as one Parquet file, in file order."""
    tables = [read_report(f) for f in files]
    meta = dict(tables[0].schema.metadata or {})
    meta[b"source_sha256"] = summaries[0]["source"]["source_sha256"].encode()  # the parent's hash
    t = pa.concat_tables(tables, promote_options="default").unify_dictionaries()
    if stem == "symbols":
        t = _merge_symbols(t.combine_chunks())
    elif stem == "latency":
        t = _merge_latency(t.combine_chunks(), hists, out_dir, tables[0].schema.with_metadata(meta))
    elif "sequence" in t.column_names or "message" in t.column_names:  # (message: a status table's)
        # file order: each part's rows are in it already, and rows of one message come from
        # one part, so a stable sort by message merges them (numpy's timsort: runs); residual
        # rows (sequence -1) last, by instrument, as in one process
        m = _arrow.to_numpy(t["sequence" if "sequence" in t.column_names else "message"])
        loc = _arrow.to_numpy(t["instrument"]).astype(np.int64) if "instrument" in t.column_names else 0
        key = np.where(m < 0, (1 << 62) + loc, m)
        t = t.take(_arrow.array(np.argsort(key, kind="stable")))
        if stem == "desyncs" and last_event_ns is not None:
            t = _residual_time(t, last_event_ns)
    elif stem == "depth":
        t = t.take(pc.sort_indices(t, [("event_ns", "ascending"), ("instrument", "ascending")]))
    pq.write_table(t.replace_schema_metadata(meta), report_path(out_dir, stem), **parquet_options(t.schema))


def _residual_time(t: pa.Table, when: int) -> pa.Table:
    """Residual rows (sequence -1) at the time of the whole replay's last event: each part
    wrote its own last event's. (numpy on the buffers: pyarrow's scalars import pandas.)"""
    resid = _arrow.to_numpy(t["sequence"]) < 0
    if not resid.any():
        return t
    old = _arrow.to_numpy(t["event_ns"])
    cols = {"event_ns": np.where(resid, when, old)}
    if t["event_ts"].null_count < len(t):  # (no session date: event_ts is null throughout, and stays so)
        cols["event_ts"] = _arrow.to_numpy(t["event_ts"]) + np.where(resid, when - old, 0)  # the same shift
    for name, col in cols.items():
        field = t.schema.field(name)
        t = t.set_column(t.column_names.index(name), field, _arrow.array(col, field.type))
    return t


def _merge_symbols(t: pa.Table) -> pa.Table:
    """One row per locate, by locate: the part that replayed it, else part 0's (the parts'
    rows come in part order)."""
    loc = _arrow.to_numpy(t["instrument"])
    replayed = _arrow.to_numpy(t["replayed"], fill=False)
    order = np.lexsort((~replayed, loc))  # stable: by locate, the replaying part first, then part order
    first = np.ones(len(order), bool)
    first[1:] = loc[order[1:]] != loc[order[:-1]]
    return t.take(_arrow.array(order[first]))


def _part_hists(parts: list[str]) -> dict:
    """The parts' latency histograms, summed per kind."""
    hists = {}
    for d in parts:
        p = os.path.join(d, PART_HIST)
        if os.path.exists(p):
            with np.load(p) as z:
                for k in z.files:
                    hists[k] = hists.get(k, 0) + z[k]
    return hists


def _hgrm_tasks(hists: dict, out_dir: str) -> list[tuple[np.ndarray, str]]:
    """(counts, path) of each .hgrm file of the summed histograms (hgrm.hgrm_files)."""
    from lobreplay.reports.hgrm import hgrm_files
    return [(h, str(path)) for h, path in hgrm_files(hists, out_dir).values()]


def _write_hgrm(counts: np.ndarray, path: str) -> None:
    from lobreplay.core._coreapi import bucket_lows
    from lobreplay.reports.hgrm import write_hgrm
    write_hgrm(counts, bucket_lows(), path)


def _merge_latency(t: pa.Table, hists: dict, out_dir: str, schema: pa.Schema) -> pa.Table:
    """The whole replay's rows from the parts' histograms summed (hists); the per-symbol rows
    as the parts wrote them, in locate order (one process writes them in that order)."""
    hists = dict(hists)  # (gains an "ALL" entry here)
    rows = []
    if hists:
        rows = summary_rows("ALL", None, hists)
        hists["ALL"] = sum(hists.values())
        table = histogram_table(hists).replace_schema_metadata(schema.metadata)
        pq.write_table(table, os.path.join(out_dir, "latency_histograms.parquet"),
                       **parquet_options(table.schema))
    # (columns built with lobreplay.core.arrow: pyarrow's scalars and pylist tables import pandas)
    head = pa.Table.from_arrays([_arrow.array([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema)
    per = t.filter(_arrow.array(np.array(t["scope"].to_pylist(), object) != "ALL"))
    order = np.argsort(_arrow.to_numpy(per["instrument"], fill=0), kind="stable")
    return pa.concat_tables([head, per.take(_arrow.array(order))])


def _merge_summaries(summaries: list[dict], out_dir: str, names: list[str]) -> dict:
    first = summaries[0]
    out = dict(first)
    for key in ("books", "book_levels", "book_bytes", "book_capacity", "mapped_books", "extra_prices",
                "orders_outside_band", "events", "executions_in_feed", "desyncs", "residual_orders"):
        out[key] = sum(s[key] for s in summaries)
    causes: dict[str, int] = {}
    for s in summaries:
        for k, v in s["desyncs_by_cause"].items():
            causes[k] = causes.get(k, 0) + v
    out["desyncs_by_cause"] = causes
    out["desync_rate_per_execution"] = desync_rate(out["desyncs"], causes, out["executions_in_feed"])
    out["notes"] = [n for s in summaries for n in s.get("notes", [])]
    out["report_rows"] = {n[:-len(".parquet")]: pq.read_metadata(os.path.join(out_dir, n)).num_rows
                          for n in names if n != "symbols.parquet"}
    p2 = max(s["pass2"]["seconds"] for s in summaries)
    core_s = max(s["pass2"]["core_seconds"] for s in summaries)
    out["pass1"] = first["pass1"]  # the parent's, which every part carries
    out["pass2"] = {"seconds": p2, "core_seconds": core_s,
                    "messages_per_second": round(out["messages"] / p2) if p2 else None,
                    "core_events_per_second": round(out["events"] / core_s) if core_s else None,
                    "per_part": [dict(s["pass2"], events=s["events"]) for s in summaries]}
    out["peak_rss_bytes"] = max(s["peak_rss_bytes"] for s in summaries)
    out["peak_rss_note"] = "the largest of the parts' peaks; they run at once"
    return json.loads(json.dumps(out, default=int))
