"""`lobreplay itch ...`: stats, decode, replay (and, from their own files, lobster and replay-many)."""
from __future__ import annotations

import sys
import time

from lobreplay.cli.common import (ALLOW_GAPS_HELP, MAX_CHUNK_MB, REPORTS_WHOLE, add_timing_options, cut_notes,
                                  depth_options, desyncs_text, fmt_time, m_per_s, note_gzip_jobs, note_non_ascii,
                                  note_sequence, pass1_text, reports_text)
from lobreplay.errors import InputError


def _cmd_itch_stats(args) -> int:
    from lobreplay.itch.spec import LAYOUTS
    from lobreplay.itch.tools import itch_stats

    s = itch_stats(args.file, allow_truncated=args.allow_truncated)
    st = s.read
    print(f"{s.path}: {s.messages:,} messages, {s.bytes:,} bytes"
          f"{' (gzip, ' + format(s.size, ',') + ' bytes on disk)' if s.compressed else ''}, {s.framing}")
    if s.first_ns is not None:
        print(f"time span: {fmt_time(s.first_ns)} .. {fmt_time(s.last_ns)} (exchange local time)")
    print(f"symbols in the directory (R): {s.symbols:,}; stock locates seen: {s.locates:,}")
    print(f"  {'type':4} {'name':30} {'count':>14} {'share':>8}")
    for t, c in sorted(s.by_type.items(), key=lambda kv: -kv[1]):
        name = LAYOUTS[t].name if t in LAYOUTS else "(unknown type: skipped by length)"
        print(f"  {t!r:4} {name:30} {c:14,} {100 * c / s.messages:7.2f}%")
    if s.end_marker:
        print("the session ended with a zero-length frame (end-of-session marker)")
    for line in cut_notes(st.stream_break, st.truncated_offset, st.truncated_bytes,
                           after_end=st.trailing_after_end):
        print(line)
    if st.mold_packets:
        print(f"MoldUDP64: {st.mold_packets:,} packets ({st.mold_heartbeats:,} without messages: heartbeats, end of "
              f"session), {len(st.mold_gaps)} sequence gap(s)" + (f": {st.mold_gaps[:5]}" if st.mold_gaps else "")
              + f", {st.mold_duplicates:,} repeated packet(s) dropped, {st.mold_damaged:,} packet(s) with a damaged "
              f"sequence number dropped; session(s) {', '.join(st.mold_sessions)}"
              + (f"; {st.mold_other_frames:,} other frame(s) skipped" if st.mold_other_frames else ""))
    note_sequence(st.moldudp64())
    note_non_ascii(s.non_ascii)
    print(f"read in {s.seconds:.2f} s ({s.messages / s.seconds / 1e6:.2f} M messages/s)")
    return 0


def _cmd_itch_decode(args) -> int:
    import os

    from lobreplay.itch.tools import decode_itch, parse_types

    types = parse_types([t.strip() for t in args.types.split(",")], "--types") if args.types else None
    t0 = time.perf_counter()
    s = decode_itch(args.file, args.output, types, force=args.force, allow_truncated=args.allow_truncated, allow_gaps=args.allow_gaps)
    took = time.perf_counter() - t0
    note_sequence(s["moldudp64"])
    for name, rows in sorted(s["report_rows"].items()):
        print(f"{os.path.join(args.output, name + '.parquet')}: {rows:,} rows")
    print(f"{os.path.join(args.output, 'summary.json')}: status ok")
    print(f"{s['messages']:,} messages decoded in {took:.2f} s")
    note_non_ascii(s["text_bytes_outside_ascii"])
    if s["end_of_session_marker"]:
        print("the session ended with a zero-length frame (end-of-session marker)")
    unknown = s["unknown_types"]
    if unknown:
        print(f"unknown message types skipped by their length: "
              f"{', '.join(f'{t!r} {n:,}' for t, n in sorted(unknown.items()))}")
    t = s["truncated"]
    if t:
        for line in cut_notes(t.get("stream_break"), t["offset"], t["bytes"],
                               after_end=t.get("bytes_after_end_marker", 0)):
            print(line)
    return 0


def itch_replay_config(args):
    """The ReplayConfig of `itch replay` and `itch replay-many` (add_itch_replay_options)."""
    from lobreplay.itch.replay import ALL_REPORTS, ReplayConfig
    from lobreplay.reports.tables import parse_report_list, parse_symbols

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
                        status_tables=bool(reports), timing=not args.no_timing, timing_every=args.timing_every,
                        progress=not getattr(args, "no_progress", True) and sys.stderr.isatty(),
                        date=getattr(args, "date", None), chunk_bytes=args.chunk_mb << 20, hash=not args.no_hash,
                        cache=not args.no_cache)


def _cmd_itch_replay(args) -> int:
    cfg = itch_replay_config(args)
    if args.jobs < 1:
        raise InputError(f"--jobs: expected a number of processes >= 1, got {args.jobs}")
    from lobreplay.reports.tables import usable_cpus
    note_gzip_jobs(args.file, min(args.jobs, usable_cpus()))
    from lobreplay.itch.parallel import replay_itch_jobs
    s = replay_itch_jobs(args.file, args.output, cfg, args.jobs, force=args.force)
    if s.get("jobs_capped"):
        print(f"lobreplay: note: {s['jobs_capped']}", file=sys.stderr)
    note_sequence(s.get("moldudp64"))
    p2 = s["pass2"]
    print(f"{args.file}: {s['messages']:,} messages, {s['books']:,} books ({s['book_levels']:,} levels, "
          f"room for {s['book_capacity']:,} orders), {s['events']:,} events replayed")
    print(f"{pass1_text(s['pass1'])}, pass 2 {p2['seconds']:.2f} s "
          f"({m_per_s(p2['messages_per_second'], 'messages', 2)}; core {m_per_s(p2['core_events_per_second'], 'events', 1)}"
          f"), wall {s['wall_seconds']:.2f} s, peak RSS {s['peak_rss_bytes'] / 2**20:.0f} MiB")
    rate = s["desync_rate_per_execution"]
    print(desyncs_text(s) + (f"; {rate:.4%} of {s['executions_in_feed']:,} executions" if rate is not None else ""))
    note_non_ascii(s.get("text_bytes_outside_ascii", 0))
    if s.get("mapped_books"):
        print(f"{s['mapped_books']:,} books with far-off or off-tick prices on price maps ({s['extra_prices']:,} "
              f"prices outside their bands, {s['orders_outside_band']:,} orders at them; symbols.parquet)")
    if not s["session_complete"]:
        print("the file does not reach the end of the session (no S 'C'): orders still live at its end are "
              "reported as residual_order")
    if s["truncated"]:
        t = s["truncated"]
        for line in cut_notes(t.get("stream_break"), t["offset"], t["bytes"], done="replayed",
                               after_end=t.get("bytes_after_end_marker", 0)):
            print(line)
    print(reports_text(args.output, s["report_rows"], *["symbols.parquet"] * ("symbols" in cfg.reports),
                       "summary.json"))
    return 0


def add_itch_replay_options(rp) -> None:
    """The options `itch replay` and `itch replay-many` share (itch_replay_config reads them)."""
    rp.add_argument("--symbols", help="comma-separated symbols to replay (default: all)")
    rp.add_argument("--headroom", type=float, default=0.2, help="band = price range widened by this (default 0.2)")
    rp.add_argument("--reports", help="comma-separated: desyncs,executions,bbo,latency,symbols,depth (default: all; "
                                      "depth with --depth N)")
    add_timing_options(rp)
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


def add_commands(sub) -> None:
    """`lobreplay itch VERB`."""
    from lobreplay.cli.lobster import add_itch_lobster
    from lobreplay.cli.many import add_replay_many

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
    add_itch_lobster(itch)
    add_replay_many(itch, "itch", "day", "replay many ITCH days on dask.distributed into one dataset",
                    add_itch_replay_options, itch_replay_config)
