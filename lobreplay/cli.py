"""The lobreplay command line: `lobreplay VERB ...` (see README)."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from . import __version__
from .errors import InputError, LobError, Terminated


def _cmd_demo(args) -> int:
    import numpy as np

    from . import _coreapi as core
    from .events import BBO_DTYPE, RESULT_DTYPE, Kind, Status
    from .synth import generate_flow

    for name in ("events", "instruments", "resting", "chunk", "repeat"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name}: expected a number >= 1, got {getattr(args, name)}")
    print(f"lobreplay {__version__} demo: a generated order flow replayed through the C core")
    t = time.perf_counter()
    flow = generate_flow(args.events, n_instruments=args.instruments, seed=args.seed, resting=args.resting)
    gen_s = time.perf_counter() - t
    ev = flow.events
    kinds = {k.name: int((ev["kind"] == k).sum()) for k in Kind}
    print(f"generated {len(ev):,} events for {len(flow.books)} instruments in {gen_s:.1f} s "
          f"(seed {args.seed}): " + ", ".join(f"{k} {v:,}" for k, v in kinds.items()))

    # Output arrays are reused from chunk to chunk, as a replay does; they are
    # written once first, so no page is faulted in inside the timed loop.
    res = np.empty(args.chunk, RESULT_DTYPE)
    bbo = np.empty(args.chunk, BBO_DTYPE)
    res.view(np.uint8).fill(0)
    bbo.view(np.uint8).fill(0)
    best = None
    for _ in range(args.repeat):
        sess = flow.session()
        sess.apply(ev[:args.chunk], results=res)  # sizes the session's execution buffer
        sess = flow.session()
        allocs = core.alloc_count()
        t = time.perf_counter_ns()
        for lo in range(0, len(ev), args.chunk):
            chunk = ev[lo:lo + args.chunk]
            sess.apply(chunk, results=res[:len(chunk)])
        dt = time.perf_counter_ns() - t
        allocs = core.alloc_count() - allocs
        best = dt if best is None else min(best, dt)
    print(f"replay, batch path ({args.chunk:,} events per call), best of {args.repeat}: "
          f"{best / len(ev):.1f} ns/event, {len(ev) / best * 1e3:.2f} M events/s; "
          f"core allocations during replay: {allocs}")

    # Once more, in the same chunks, with timing and top of book, for the summary.
    sess = flow.session()
    sess.set_timing(True)
    statuses, n_exec, shares, bbo_changes = [], 0, 0, 0
    for lo in range(0, len(ev), args.chunk):
        chunk = ev[lo:lo + args.chunk]
        out = sess.apply(chunk, results=res[:len(chunk)], bbo=bbo[:len(chunk)])
        statuses.append(out.results["status"].copy())
        n_exec += len(out.execs)
        shares += int(out.execs["qty"].sum())
        bbo_changes += int(out.bbo["changed"].sum())
    st = np.concatenate(statuses)
    rejects = {Status(c).name: int((st == c).sum()) for c in sorted(set(st.tolist())) if c}
    print(f"executions {n_exec:,} ({shares:,} shares); top-of-book changes {bbo_changes:,}; "
          f"rejects {rejects or 'none'}")
    clk = sess.clock(200_000)
    print(f"latency per event inside the core ({clk['source']}: {clk['cost_ns']:.1f} ns per reading, "
          f"smallest step {clk['min_step_ns']} ns; each figure includes about one reading):")
    print(f"  {'kind':8} {'count':>9} {'p50':>7} {'p90':>7} {'p99':>7} {'p99.9':>7} {'max':>9}  (ns)")
    for name, row in sess.latency().items():
        print(f"  {name:8} {row['count']:9,} {row['p50']:7} {row['p90']:7} {row['p99']:7} "
              f"{row['p99.9']:7} {row['max']:9}")
    print("final books (price units: 1/10000 $):")
    for b in flow.books:
        v = sess.book(b.instrument)
        v.validate()
        print(f"  instrument {b.instrument}: {v.order_count:5} orders  bid {v.best_bid()}  ask {v.best_ask()}")
    print("every book passed validate()")
    return 0


def _fmt_time(ns: int) -> str:
    s, ns = divmod(int(ns), 1_000_000_000)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{h:02d}:{m:02d}:{s:02d}.{ns:09d}"


def _cmd_itch_stats(args) -> int:
    import numpy as np

    from .itch.decode import as_text, decode_type, non_ascii_bytes, timestamps
    from .itch.reader import ItchFile
    from .itch.spec import LAYOUTS

    t0 = time.perf_counter()
    ascii0 = non_ascii_bytes()
    f = ItchFile(args.file, allow_truncated=args.allow_truncated, allow_gaps=True)  # (it reports them)
    first = last = None
    symbols: set[str] = set()
    locates: set[int] = set()
    for chunk in f.chunks():
        ts = timestamps(chunk, np.array([0, chunk.n - 1]))
        first = int(ts[0]) if first is None else first
        last = int(ts[1])
        if chunk.has("R"):
            symbols.update(as_text(decode_type(chunk, "R")["stock"]).tolist())
        loc = ((chunk.buf[chunk.offsets.astype(np.int64) + 1].astype(np.int64) << 8)
               | chunk.buf[chunk.offsets.astype(np.int64) + 2])
        locates.update(np.unique(loc).tolist())
    st = f.stats
    took = time.perf_counter() - t0
    print(f"{f.path}: {st.messages:,} messages, {st.bytes:,} bytes"
          f"{' (gzip, ' + format(f.size, ',') + ' bytes on disk)' if f.compressed else ''}, {f.framing}")
    if first is not None:
        print(f"time span: {_fmt_time(first)} .. {_fmt_time(last)} (exchange local time)")
    print(f"symbols in the directory (R): {len(symbols):,}; stock locates seen: {len(locates - {0}):,}")
    print(f"  {'type':4} {'name':30} {'count':>14} {'share':>8}")
    for t, c in sorted(st.by_type.items(), key=lambda kv: -kv[1]):
        name = LAYOUTS[t].name if t in LAYOUTS else "(unknown type: skipped by length)"
        print(f"  {t!r:4} {name:30} {c:14,} {100 * c / st.messages:7.2f}%")
    if st.end_marker:
        print("the session ended with a zero-length frame (end-of-session marker)")
    for line in _cut_notes(st.stream_break, st.truncated_offset, st.truncated_bytes,
                           after_end=st.trailing_after_end):
        print(line)
    if st.mold_packets:
        print(f"MoldUDP64: {st.mold_packets:,} packets ({st.mold_heartbeats:,} without messages: heartbeats, end of "
              f"session), {len(st.mold_gaps)} sequence gap(s)" + (f": {st.mold_gaps[:5]}" if st.mold_gaps else "")
              + f", {st.mold_duplicates:,} repeated packet(s) dropped, {st.mold_damaged:,} packet(s) with a damaged "
              f"sequence number dropped; session(s) {', '.join(st.mold_sessions)}"
              + (f"; {st.mold_other_frames:,} other frame(s) skipped" if st.mold_other_frames else ""))
    note_sequence(st.moldudp64())
    _note_non_ascii(non_ascii_bytes() - ascii0)
    print(f"read in {took:.2f} s ({st.messages / took / 1e6:.2f} M messages/s)")
    return 0


def _cmd_itch_decode(args) -> int:
    import os

    from .itch.decode import decode, non_ascii_bytes, to_arrow
    from .itch.reader import ItchFile
    from .outdir import prepare_output
    from .itch.spec import LAYOUTS, price_metadata
    from .reports import ReplayRun, ReportSet

    types = None
    if args.types:
        types = [t.strip() for t in args.types.split(",") if t.strip()]
        bad = [t for t in types if t not in LAYOUTS]
        if bad:
            raise InputError(f"--types: unknown message type(s) {', '.join(bad)}; "
                             f"ITCH 5.0 types are {''.join(sorted(LAYOUTS))}")
    f = ItchFile(args.file, allow_truncated=args.allow_truncated,  # (before the output: a file that
                 allow_gaps=args.allow_gaps)                     # cannot be opened leaves it as it was)
    prepare_output(args.output, args.force, inputs=[args.file])
    meta = {"source_file": os.path.basename(f.path), "source_size": str(f.size),
            "lobreplay_version": __version__}  # (each table says its own prices' scale: spec.price_metadata)
    done = [0]  # messages decoded (whole chunks: every table holds their rows, none past them)

    def where() -> dict:
        return {"messages_done": done[0], "file_bytes_read": f.raw_position, "file_bytes": f.size}

    t0 = time.perf_counter()
    ascii0 = non_ascii_bytes()
    try:
        # like a replay's: the tables written so far are closed whole however it ends, and
        # summary.json says ok, or failed with the error and where it stopped
        with ReplayRun(args.output, meta, where=where) as run:
            rs = run.reports = ReportSet(args.output, [], meta)
            for chunk in f.chunks():
                for t, cols in decode(chunk, "".join(types) if types else None).items():  # (one pass over the chunk)
                    rs.write_table(f"{t}_{LAYOUTS[t].name}", to_arrow(cols, t), price_metadata(t))
                done[0] = chunk.first_message + chunk.n
            st = f.stats
            run.summary.update({
                "types": types, "messages": st.messages, "messages_by_type": dict(sorted(st.by_type.items())),
                "unknown_types": st.unknown_types(), "bytes": st.bytes, "end_of_session_marker": st.end_marker,
                "truncated": st.truncation(), "moldudp64": st.moldudp64(),
                "text_bytes_outside_ascii": non_ascii_bytes() - ascii0})
    except KeyboardInterrupt as e:  # (Ctrl-C, and SIGTERM)
        w = where()
        e.add_note(f"{f.path}: after {w['messages_done']:,} messages decoded "
                   f"({w['file_bytes_read']:,} of {w['file_bytes']:,} bytes read; summary.json says failed)")
        raise
    took = time.perf_counter() - t0
    note_sequence(f.stats.moldudp64())
    for name, w in sorted(rs.extra.items()):
        print(f"{w.path}: {w.rows:,} rows")
    print(f"{os.path.join(args.output, 'summary.json')}: status ok")
    print(f"{f.stats.messages:,} messages decoded in {took:.2f} s")
    _note_non_ascii(run.summary["text_bytes_outside_ascii"])
    if f.stats.end_marker:
        print("the session ended with a zero-length frame (end-of-session marker)")
    unknown = f.stats.unknown_types()
    if unknown:
        print(f"unknown message types skipped by their length: "
              f"{', '.join(f'{t!r} {n:,}' for t, n in sorted(unknown.items()))}")
    for line in _cut_notes(f.stats.stream_break, f.stats.truncated_offset, f.stats.truncated_bytes,
                           after_end=f.stats.trailing_after_end):
        print(line)
    return 0


def note_sequence(mold: dict | None) -> None:
    """A pcap's MoldUDP64 sequence anomalies (a summary's `moldudp64`), a line of each kind on stderr."""
    from .itch.reader import mold_notes
    for line in mold_notes(mold):
        print(f"lobreplay: note: {line}", file=sys.stderr)


def _cut_notes(stream_break: str | None, offset: int | None, nbytes: int, done: str = "read",
               after_end: int = 0) -> list[str]:
    """What --allow-truncated let a read stop at (a reader's ReadStats, or a replay's
    summary["truncated"]): a gzip stream cut short, a partial last message, bytes after an
    end-of-session marker."""
    out = []
    if stream_break:
        out.append(f"the gzip stream ends early ({stream_break}): {done} up to there")
    if nbytes:
        out.append(f"truncated: {nbytes} byte(s) of a partial message at offset {offset:,} were not read")
    if after_end:
        out.append(f"{after_end:,} byte(s) after the end-of-session marker (a zero-length frame) were not read")
    return out


def _duration_ns(text: str) -> int:
    """'100ms', '1s', '5m', '250us' -> ns."""
    import re
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s|m|h)\s*", text or "")
    if not m:
        raise InputError(f"--every: expected a duration like 100ms, 1s or 5m, or 'change', got {text!r}")
    ns = float(m[1]) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}[m[2]]
    if ns < 1:
        raise InputError(f"--every: must be at least 1 ns, got {text!r}")
    return int(ns)


MAX_CHUNK_MB, MAX_DEPTH = 1024, 100


def depth_options(args, reports: tuple[str, ...]) -> tuple[tuple[str, ...], int, int]:
    """--depth N and --every of a replay command: (the reports, with depth added when N > 0; N;
    the interval in ns, 0 for 'change')."""
    if not 0 <= args.depth <= MAX_DEPTH:  # (each sample holds 2 x N levels per book: 100 is ~1 KB a row)
        raise InputError(f"--depth: expected a number of levels of 0 to {MAX_DEPTH}, got {args.depth}")
    if args.depth and "depth" not in reports:
        reports = reports + ("depth",)
    if args.reports and "depth" in reports and not args.depth:
        raise InputError("--reports depth: the depth table needs --depth N (the levels to sample)")
    if args.every == "change":
        return reports, args.depth, 0
    return reports, args.depth, _duration_ns(args.every)


def itch_replay_config(args):
    """The ReplayConfig of `itch replay` and `itch replay-many` (add_itch_replay_options)."""
    from .itch.replay import ALL_REPORTS, ReplayConfig
    from .reports import parse_report_list, parse_symbols

    reports = parse_report_list(getattr(args, "no_reports", False), args.reports, ALL_REPORTS)
    if not args.headroom >= 0:  # (also NaN)
        raise InputError(f"--headroom: expected a fraction of the price range >= 0 (0.2: 20 %), got {args.headroom}")
    if not 1 <= args.chunk_mb <= MAX_CHUNK_MB:  # (the C framer takes less than 4 GiB at once)
        raise InputError(f"--chunk-mb: expected a chunk size of 1 to {MAX_CHUNK_MB} (MiB), got {args.chunk_mb}")
    reports, depth, every = depth_options(args, reports)
    return ReplayConfig(symbols=parse_symbols(args.symbols),
                        depth_levels=depth,
                        depth_every_ns=every,
                        headroom=args.headroom, allow_truncated=args.allow_truncated,
                        allow_gaps=args.allow_gaps, reports=reports,
                        status_tables=bool(reports), timing=not args.no_timing,
                        progress=not getattr(args, "no_progress", True) and sys.stderr.isatty(),
                        date=getattr(args, "date", None), chunk_bytes=args.chunk_mb << 20, hash=not args.no_hash,
                        cache=not args.no_cache)


def _cmd_itch_replay(args) -> int:
    cfg = itch_replay_config(args)
    if args.jobs < 1:
        raise InputError(f"--jobs: expected a number of processes >= 1, got {args.jobs}")
    from .reports import usable_cpus
    _note_gzip_jobs(args.file, min(args.jobs, usable_cpus()))
    from .itch.parallel import replay_itch_jobs
    s = replay_itch_jobs(args.file, args.output, cfg, args.jobs, force=args.force)
    if s.get("jobs_capped"):
        print(f"lobreplay: note: {s['jobs_capped']}", file=sys.stderr)
    note_sequence(s.get("moldudp64"))
    p2 = s["pass2"]
    print(f"{args.file}: {s['messages']:,} messages, {s['books']:,} books ({s['book_levels']:,} levels, "
          f"room for {s['book_capacity']:,} orders), {s['events']:,} events replayed")
    print(f"{pass1_text(s['pass1'])}, pass 2 {p2['seconds']:.2f} s "
          f"({_m_per_s(p2['messages_per_second'], 'messages', 2)}; core {_m_per_s(p2['core_events_per_second'], 'events', 1)}"
          f"), wall {s['wall_seconds']:.2f} s, peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB")
    rate = s["desync_rate_per_execution"]
    print(desyncs_text(s) + (f"; {rate:.4%} of {s['executions_in_feed']:,} executions" if rate is not None else ""))
    _note_non_ascii(s.get("text_bytes_outside_ascii", 0))
    if not s["session_complete"]:
        print("the file does not reach the end of the session (no S 'C'): orders still live at its end are "
              "reported as residual_order")
    if s["truncated"]:
        t = s["truncated"]
        for line in _cut_notes(t.get("stream_break"), t["offset"], t["bytes"], done="replayed",
                               after_end=t.get("bytes_after_end_marker", 0)):
            print(line)
    print(reports_text(args.output, s["report_rows"], *["symbols.parquet"] * ("symbols" in cfg.reports),
                       "summary.json"))
    return 0


def _cmd_cache(args) -> int:
    from . import cache
    where = cache.cache_dir()
    if where is None:
        print("the sizing cache is off (LOBREPLAY_CACHE_DIR is set to turn it off)")
        return 0
    if args.action == "clear":
        n, freed = cache.clear(where)
        print(f"{where}: removed {n:,} file(s), {freed:,} bytes")
        return 0
    files = cache.entries(where)
    if args.action == "list":  # (the most recently used first)
        rows = sorted((cache.describe(f) for f in files), key=lambda d: -d.get("last_used_unix", 0))
        for d in rows:
            if "error" in d:
                print(f"{d['entry']}: {d['error']}")
                continue
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(d["last_used_unix"]))
            opts = ", ".join(f"{k}={v}" for k, v in sorted(d["options"].items()) if v not in (None, False))
            print(f"{used}  {d['kind']:<10}  {d['bytes']:>9,} B  {d['source']} ({d['source_size']:,} bytes; "
                  f"{d['source_state']}{'; ' + opts if opts else ''})")
    size = sum(os.path.getsize(f) for f in files if os.path.exists(f))
    print(f"{where}: {len(files):,} entr{'y' if len(files) == 1 else 'ies'}, {size:,} bytes of at most "
          f"{cache.max_bytes():,} (LOBREPLAY_CACHE_MAX_MB; each the pass 1 of one file, reused while the file is "
          "unchanged; the least recently used go first; safe to delete)")
    return 0


def pass1_text(p1: dict) -> str:
    """A replay's pass 1 as the summary line gives it."""
    if p1.get("cached"):
        return f"pass 1 {p1['seconds']:.2f} s (from the sizing cache; the scan took {p1['scan_seconds']:.2f} s)"
    return f"pass 1 {p1['seconds']:.2f} s"


def desyncs_text(s: dict) -> str:
    """A replay summary's desyncs, most frequent cause first (itch and lobc replays)."""
    causes = ", ".join(f"{k} {v:,}" for k, v in sorted(s["desyncs_by_cause"].items(), key=lambda kv: -kv[1]))
    return f"desyncs: {s['desyncs']:,}" + (f" ({causes})" if causes else "")


def reports_text(out_dir: str, rows: dict, *files: str) -> str:
    """The report files a replay wrote: each table with its rows, then the other files."""
    return f"reports in {out_dir}/: " + ", ".join([f"{k} ({v:,} row{'' if v == 1 else 's'})" for k, v in rows.items()]
                                                  + list(files))


ALLOW_GAPS_HELP = ("a pcap: go on when MoldUDP64 sequence gaps and damaged packets lose more than 1 %% of its "
                   "messages (counted, and noted on stderr, either way)")


def add_itch_replay_options(rp) -> None:
    """The options `itch replay` and `itch replay-many` share (itch_replay_config reads them)."""
    rp.add_argument("--symbols", help="comma-separated symbols to replay (default: all)")
    rp.add_argument("--headroom", type=float, default=0.2, help="band = price range widened by this (default 0.2)")
    rp.add_argument("--reports", help="comma-separated: desyncs,executions,bbo,latency,symbols,depth (default: all; "
                                      "depth with --depth N)")
    rp.add_argument("--no-timing", action="store_true", help="do not time events inside the core")
    rp.add_argument("--chunk-mb", type=int, default=8, help="bytes per chunk, in MiB (default 8, at most 1024)")
    rp.add_argument("--depth", type=int, default=0, metavar="N",
                    help="also sample the N best levels (at most 100) of every active book (depth.parquet)")
    rp.add_argument("--every", default="1s",
                    help="depth sample interval of feed time (100ms, 1s, 5m), or 'change': after every change")
    rp.add_argument("--allow-truncated", action="store_true",
                    help="stop at a partial last message or where a gzip stream is cut short, counted")
    rp.add_argument("--allow-gaps", action="store_true", help=ALLOW_GAPS_HELP)
    rp.add_argument("--no-hash", action="store_true",
                    help="skip the input's SHA-256 (source_sha256 left empty; about 0.7 s of CPU per GB)")
    rp.add_argument("--no-cache", action="store_true",
                    help="scan the file in pass 1 even if an earlier replay of it left its sizing in the cache, "
                         "and keep nothing there (`lobreplay cache` shows it)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lobreplay", description="Market-data replay on a C matching core.")
    p.add_argument("--version", action="version", version=f"lobreplay {__version__}")
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    d = sub.add_parser("demo", help="replay a generated order flow and print a summary")
    d.add_argument("--events", type=int, default=300_000)
    d.add_argument("--instruments", type=int, default=8)
    d.add_argument("--resting", type=int, default=2000, help="target live orders per book")
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--chunk", type=int, default=65536, help="events per core call")
    d.add_argument("--repeat", type=int, default=5)
    d.set_defaults(func=_cmd_demo)

    itch = sub.add_parser("itch", help="NASDAQ TotalView-ITCH 5.0 files").add_subparsers(dest="itch_verb",
                                                                                         metavar="VERB")
    st = itch.add_parser("stats", help="messages by type, symbols, time span")
    st.add_argument("file")
    st.add_argument("--allow-truncated", action="store_true",
                    help="stop at a partial last message or where a gzip stream is cut short")
    st.set_defaults(func=_cmd_itch_stats)
    de = itch.add_parser("decode", help="typed messages to Parquet, one file per type")
    de.add_argument("file")
    de.add_argument("-o", "--output", required=True, help="output directory")
    de.add_argument("--types", help="comma-separated message types, e.g. A,F,E (default: all)")
    de.add_argument("--force", action="store_true", help="overwrite an output directory that holds files")
    de.add_argument("--allow-truncated", action="store_true")
    de.add_argument("--allow-gaps", action="store_true", help=ALLOW_GAPS_HELP)
    de.set_defaults(func=_cmd_itch_decode, stop_note=REPORTS_WHOLE)
    rp = itch.add_parser("replay", help="rebuild every book, check the core against the feed, write reports")
    rp.add_argument("file")
    rp.add_argument("-o", "--output", required=True, help="report directory")
    add_itch_replay_options(rp)
    rp.add_argument("--no-reports", action="store_true", help="write only summary.json")
    rp.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    rp.add_argument("--date", help="session date YYYY-MM-DD (default: from the file name)")
    rp.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="processes: the symbols are shared out, the reports merged (default 1; at most the "
                         "usable CPUs and the books)")
    rp.add_argument("--force", action="store_true", help="overwrite a report directory that holds files")
    rp.set_defaults(func=_cmd_itch_replay, stop_note=REPORTS_WHOLE)

    ca = sub.add_parser("cache", help="the sizing cache: what pass 1 found in files already replayed")
    ca.add_argument("action", nargs="?", choices=("info", "list", "clear"), default="info",
                    help="info (default): where it is and how big; list: each entry's file (the most recently "
                         "used first), and whether that file is gone or changed since; clear: remove every entry")
    ca.set_defaults(func=_cmd_cache)

    from .binance.cli import add_commands as add_binance_commands
    from .cli_lobc import add_commands as add_lobc_commands
    from .cli_lobster import add_commands as add_lobster_commands
    from .cli_lobster import add_itch_lobster
    add_itch_lobster(itch)
    from .cli_many import add_itch_replay_many
    add_itch_replay_many(itch)
    add_lobc_commands(sub)
    add_binance_commands(sub)
    add_lobster_commands(sub)
    from .cli_view import add_commands as add_view_commands
    add_view_commands(sub)
    return p


REPORTS_WHOLE = "the reports written so far are whole"  # a command's stop_note: what SIGTERM leaves


def main(argv: list[str] | None = None) -> int:
    # lobreplay calls no BLAS, but numpy's OpenBLAS starts a thread per core at
    # import, and each spins about 0.1 s of CPU waiting for work that never
    # comes: a core taken from the reader, hash and --jobs processes. Only
    # before numpy loads, and a user's own setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    previous = _terminate_like_ctrl_c()
    try:
        return args.func(args)
    except LobError as e:
        print(f"lobreplay: error: {e}", file=sys.stderr)
        return 1
    except Terminated as e:
        # (what is on disk now: a replay's tables are whole; other commands say their own or nothing)
        note = getattr(args, "stop_note", None)
        print(f"lobreplay: terminated (SIGTERM){_where(e)}{'; ' + note if note else ''}", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt as e:
        print(f"lobreplay: interrupted{_where(e)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `lobreplay ... | head`
        sys.stderr.close()
        return 141
    except OSError as e:  # the machine said no: an output that cannot be created, a full disk, ...
        where = getattr(args, "output", None) or getattr(args, "out", None)
        extra = f" (writing {where})" if where and e.filename is None else ""
        print(f"lobreplay: error: {os_error_text(e)}{extra}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:  # (main() called in-process: leave the caller's handler)
            signal.signal(signal.SIGTERM, previous)


def _note_gzip_jobs(path: str, jobs: int) -> None:
    """--jobs N on a gzip file: every part inflates the whole file, so with no more CPUs than
    parts one job is faster (docs/itch.md); say so once on stderr, and go on."""
    from .itch.reader import GZIP_MAGIC
    from .reports import usable_cpus
    if jobs < 2 or jobs < usable_cpus():
        return
    try:
        with open(path, "rb") as f:
            gz = f.read(len(GZIP_MAGIC)) == GZIP_MAGIC
    except OSError:
        return  # (the replay says what is wrong with the file)
    if gz:
        print(f"lobreplay: note: {path} is gzip: each of the {jobs} parts inflates the whole file, and "
              f"this machine has {usable_cpus()} CPU(s); one job, or the file inflated first, is likely faster "
              "(docs/itch.md)", file=sys.stderr)


def _note_non_ascii(n: int) -> None:
    if n:
        print(f"text fields: {n:,} byte(s) outside ASCII (damage: ITCH text is ASCII) written as '?'")


def _m_per_s(rate: float | None, what: str, digits: int) -> str:
    """A rate from summary.json in millions per second; None (a pass too short to time, or
    a part of --jobs without events) as n/a."""
    return f"{rate / 1e6:.{digits}f} M {what}/s" if rate else f"n/a {what}/s"


def _where(e: BaseException) -> str:
    """Where a command was when it was stopped, if it said (an exception note: the file, the
    pass, the messages done), as ' at ...'."""
    notes = getattr(e, "__notes__", None)
    return f" at {notes[-1]}" if notes else ""


def _terminate_like_ctrl_c():
    """SIGTERM (a scheduler stopping a job, `kill`) raises Terminated in the main thread, so
    that a command unwinds as on Ctrl-C: its report files are closed whole and summary.json
    says it failed (the default action killed it mid-write: Parquet files without their
    footer). The handler is set only in the main thread; returns the previous one."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise Terminated()

    return signal.signal(signal.SIGTERM, handler)


def os_error_text(e: OSError) -> str:
    """One line for an error of the operating system: the file(s) it names and its reason."""
    names = " -> ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
    reason = e.strerror or str(e)
    return f"{names}: {reason}" if names else reason
