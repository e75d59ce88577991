"""Command line for .lobc files: `lobreplay lobc check FILE`, `lobreplay lobc repair FILE -o OUT`,
`lobreplay lobc replay FILE -o DIR` and `lobreplay lobc replay-many` (lobreplay.cli.many)
(wired into lobreplay.cli.main by add_commands)."""
from __future__ import annotations

import datetime as dt
import sys

from lobreplay.cli.common import add_timing_options, desyncs_text, pass1_text, reports_text


def _utc(ns) -> str:
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def cmd_check(args) -> int:
    from lobreplay.l2.lobc import check, torn_text

    s = check(args.file)
    m = s["meta"]
    state = "whole" if s["whole"] else "CORRUPT" if s["torn"]["corrupt"] else "TORN"
    print(f"{s['path']}: {state}; {s['records']:,} records in {s['blocks']:,} blocks, "
          f"{s['bytes']:,} bytes; {m.get('venue', '?')} {m.get('market', '?')}, {len(m['symbols'])} symbol(s), "
          f"price scale {m['price_scale']}, qty scale {m['qty_scale']}")
    if s["torn"]:
        print(torn_text(s["torn"]))
    if s["after_damage"]:
        a = s["after_damage"]
        print(f"after the damage, from offset {a['offset']:,}: {a['blocks']:,} sound block(s), {a['records']:,} "
              f"records (not counted below), {len(a['damage'])} damaged stretch(es) in all ("
              + ", ".join(f"{d['bytes']:,} byte(s) at {d['offset']:,}" for d in a["damage"][:5])
              + (" ..." if len(a["damage"]) > 5 else "") + "), "
              + ("whole to the end of the file" if a["to_the_end"] else "then a torn tail")
              + "; `lobreplay lobc replay --allow-corrupt` replays them")
    print(f"receive time {_utc(s['recv_ns']['first'])} .. {_utc(s['recv_ns']['last'])}; "
          f"exchange time {_utc(s['exch_ns']['first'])} .. {_utc(s['exch_ns']['last'])} (earliest .. latest)")
    if s["recv_ns"]["backwards"]:
        print(f"receive times that go back (a record received before the one before it): "
              f"{s['recv_ns']['backwards']:,}")
    print("records by kind: " + ", ".join(f"{k} {v:,}" for k, v in s["records_by_kind"].items()))
    print("records by symbol: " + ", ".join(f"{k} {v:,}" for k, v in s["records_by_symbol"].items()))
    if s["records_with_unknown_symbol"]:
        print(f"records whose symbol index is not in the metadata: {s['records_with_unknown_symbol']:,}")
    print(f"gaps: {len(s['gaps'])}" + (": " + ", ".join(f"{g['symbol']} {g['reason']}" for g in s["gaps"][:10])
                                      + (" ..." if len(s["gaps"]) > 10 else "") if s["gaps"] else "")
          + "; resyncs: " + (", ".join(f"{k} {v}" for k, v in s["resyncs"].items()) or "0"))
    return 0 if s["whole"] else 1


def lobc_replay_config(args):
    """The L2ReplayConfig of `lobc replay` and `lobc replay-many` (replay_options)."""
    from lobreplay.cli.common import depth_options
    from lobreplay.l2.replay import ALL_REPORTS, L2ReplayConfig
    from lobreplay.reports.tables import parse_report_list, parse_symbols

    reports = parse_report_list(getattr(args, "no_reports", False), args.reports, ALL_REPORTS)
    reports, depth, every = depth_options(args, reports)
    return L2ReplayConfig(symbols=parse_symbols(args.symbols), reports=reports, timing=not args.no_timing, timing_every=args.timing_every,
                          price_mode=args.price_mode, allow_corrupt=args.allow_corrupt, depth_levels=depth,
                          depth_every_ns=every, cache=not args.no_cache,
                          progress=not getattr(args, "no_progress", True) and sys.stderr.isatty())


def cmd_replay(args) -> int:
    from lobreplay.l2.replay import replay_lobc

    s = replay_lobc(args.file, args.output, lobc_replay_config(args), force=args.force)
    p2 = s["pass2"]
    ev = s["events_by_kind"]
    print(f"{args.file}: {s['records']:,} records, {len(s['books'])} book(s), {s['snapshots_applied']:,} snapshot(s) "
          f"and {s['messages_applied']:,} diff messages applied ({s['levels_applied']:,} level changes: "
          + ", ".join(f"{k} {v:,}" for k, v in ev.items()) + ")")
    if p2["records_per_second"]:
        print(f"{pass1_text(s['pass1'])}, pass 2 {p2['seconds']:.2f} s "
              f"({p2['records_per_second'] / 1e6:.2f} M records/s; core "
              f"{(p2['core_events_per_second'] or 0) / 1e6:.1f} M events/s), wall {s['wall_seconds']:.2f} s")
    print(desyncs_text(s) + f"; zero-quantity updates of unknown levels (normal): {s['zero_qty_unknown_level']:,}")
    bt = s["bookticker"]
    if bt["tickers"]:
        nc = ", ".join(f"{k} {v:,}" for k, v in bt["not_comparable"].items())
        rate = f"{bt['match_rate']:.4%}" if bt["match_rate"] is not None else "-"
        print(f"bookTicker: {bt['matches']:,} of {bt['comparable']:,} comparable points match ({rate})"
              + (f"; not comparable: {nc}" if nc else ""))
    from lobreplay.l2.lobc import damage_text
    for d in s["lobc"].get("damage", []):
        print(damage_text(d) + ": every book lost sync there (desync gap_damaged) until its next snapshot")
    if s["lobc"]["torn"]:
        from lobreplay.l2.lobc import torn_text
        print(torn_text(s["lobc"]["torn"]) + "; the reports hold the records before it")
    print(reports_text(args.output, s.get("report_rows", {}), "summary.json"))
    return 0


def cmd_repair(args) -> int:
    from lobreplay.errors import refuse_input_as_output, refuse_overwrite
    from lobreplay.l2.lobc import damage_text, repair, torn_text
    refuse_input_as_output(args.output, args.file)  # (--force or not: the file to repair is not overwritten)
    refuse_overwrite(args.output, args.force)
    done = repair(args.file, args.output)
    if done is None:
        print(f"{args.file}: whole; nothing to repair ({args.output} not written)")
        return 0
    print(f"wrote {args.output}: {done['records']:,} records in {done['blocks']:,} blocks, whole")
    for d in done["damage"]:
        print(damage_text(d) + ": in its place a GAP (reason damaged) for every symbol, so that each book waits "
              "for its next snapshot")
    if done["torn"]:
        print(torn_text(done["torn"]) + ": left out")
    return 0


def add_commands(subparsers) -> None:
    """Add `lobc check`, `lobc repair` and `lobc replay` to an argparse subparsers object."""
    lobc = subparsers.add_parser("lobc", help=".lobc capture files (Binance depth)").add_subparsers(
        dest="lobc_verb", metavar="VERB")
    ck = lobc.add_parser("check", help="is the file whole? records by kind and symbol, gaps (exit 1 if torn or corrupt)")
    ck.add_argument("file")
    ck.set_defaults(func=cmd_check)
    rr = lobc.add_parser("repair", help="a whole copy of a torn or damaged file: its sound blocks, a GAP "
                                        "(reason damaged) per symbol where damage was skipped")
    rr.add_argument("file")
    rr.add_argument("-o", "--output", required=True, help="the repaired .lobc file")
    rr.add_argument("--force", action="store_true", help="overwrite the output file")
    rr.set_defaults(func=cmd_repair)
    rp = lobc.add_parser("replay", help="rebuild every book, compare with bookTicker, write reports")
    _replay_arguments(rp)
    # `lobreplay replay FILE.lobc` is the same command
    _replay_arguments(subparsers.add_parser("replay", help="replay a .lobc capture (= lobc replay)"))
    from lobreplay.cli.many import add_replay_many
    add_replay_many(lobc, "lobc", "capture", "replay many .lobc captures on dask.distributed into one dataset",
                    replay_options, lobc_replay_config)


def _replay_arguments(rp) -> None:
    rp.add_argument("file")
    rp.add_argument("-o", "--output", required=True, help="report directory")
    replay_options(rp)
    rp.add_argument("--no-reports", action="store_true", help="write only summary.json")
    rp.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    rp.add_argument("--force", action="store_true", help="overwrite a report directory that holds files")
    from lobreplay.cli.common import REPORTS_WHOLE
    rp.set_defaults(func=cmd_replay, stop_note=REPORTS_WHOLE)


def replay_options(rp) -> None:
    """The options `lobc replay` and `lobc replay-many` share (lobc_replay_config reads them)."""
    rp.add_argument("--symbols", help="comma-separated symbols to replay (default: all)")
    rp.add_argument("--reports", help="comma-separated: " + ",".join(
        ("bbo", "desyncs", "trades", "latency", "ticker_mismatches", "depth")) + " (default: all; depth with --depth N)")
    rp.add_argument("--depth", type=int, default=0, metavar="N",
                    help="also sample the N best levels (at most 100) of every book that changed (depth.parquet)")
    rp.add_argument("--every", default="1s",
                    help="depth sample interval of receive time (100ms, 1s, 5m), or 'change': after every change")
    add_timing_options(rp)
    rp.add_argument("--price-mode", choices=("auto", "grid", "ladder"), default="auto",
                    help="core prices: the feed's on a tick grid, or ranks of the prices seen (default auto)")
    rp.add_argument("--allow-corrupt", action="store_true",
                    help="replay across damage inside the file: the sound blocks on both sides of a corrupt "
                         "one, every book losing sync across it until its next snapshot (default: an error; a "
                         "torn tail, what a crash leaves, is always replayed up to it)")
    rp.add_argument("--no-cache", action="store_true",
                    help="scan the file in pass 1 even if an earlier replay of it with these options left its "
                         "sizing in the cache, and keep nothing there (`lobreplay cache` shows it)")
