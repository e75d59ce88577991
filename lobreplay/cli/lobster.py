"""Command line for LOBSTER files: `lobreplay lobster verify MESSAGE.csv ORDERBOOK.csv`
(add_commands) and `lobreplay itch lobster FILE --symbol S --levels N -o DIR`
(add_itch_lobster, on the `itch` subparsers)."""
from __future__ import annotations

import json


def cmd_verify(args) -> int:
    from lobreplay.itch.lobster import format_report, verify_lobster

    rep = verify_lobster(args.message, args.orderbook, max_differences=args.differences)
    print(json.dumps(rep, indent=2) if args.json else format_report(rep))
    return 0 if rep["ok"] else 1


def cmd_export(args) -> int:
    from lobreplay.cli.common import cut_notes, note_sequence
    from lobreplay.itch.lobster import export_lobster

    read: dict = {}
    # (a stop: main's line names where it was; the exception's note says that nothing was written)
    m, o = export_lobster(args.file, args.symbol, args.levels, args.output, date=args.date,
                          start_ms=args.start_ms, end_ms=args.end_ms, force=args.force,
                          allow_truncated=args.allow_truncated, allow_gaps=args.allow_gaps, read=read)
    note_sequence(read.get("moldudp64"))
    print(m)
    print(o)
    t = read.get("truncated")
    if t:
        for line in cut_notes(t["stream_break"], t["offset"], t["bytes"], done="exported",
                               after_end=t["bytes_after_end_marker"]):
            print(line)
    return 0


def add_commands(subparsers) -> None:
    lob = subparsers.add_parser("lobster", help="LOBSTER message/orderbook files").add_subparsers(
        dest="lobster_verb", metavar="VERB")
    v = lob.add_parser("verify", help="replay a message file through the core and compare with the orderbook file")
    v.add_argument("message")
    v.add_argument("orderbook")
    v.add_argument("--differences", type=int, default=10, help="how many first differences to list (default 10)")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=cmd_verify)


def add_itch_lobster(itch_subparsers) -> None:
    p = itch_subparsers.add_parser("lobster", help="export one symbol as LOBSTER message and orderbook files")
    p.add_argument("file")
    p.add_argument("--symbol", required=True)
    p.add_argument("--levels", type=int, default=10, help="book levels (default 10)")
    p.add_argument("-o", "--output", required=True, help="output directory")
    p.add_argument("--date", help="session date YYYY-MM-DD (default: from the file name)")
    p.add_argument("--force", action="store_true", help="overwrite the two files if they exist")
    p.add_argument("--start-ms", type=int, default=34_200_000, help="window start, ms after midnight (09:30)")
    p.add_argument("--end-ms", type=int, default=57_600_000, help="window end, ms after midnight (16:00)")
    p.add_argument("--allow-truncated", action="store_true",
                   help="stop at a partial last message or where a gzip stream is cut short, counted")
    from lobreplay.cli.common import ALLOW_GAPS_HELP
    p.add_argument("--allow-gaps", action="store_true", help=ALLOW_GAPS_HELP)
    p.set_defaults(func=cmd_export)
