"""Command line for the book viewer: `lobreplay view REPORT_DIR -o book.html`
(wired into lobreplay.cli.main by add_commands; see docs/viewer.md)."""
from __future__ import annotations

import os

from lobreplay.errors import InputError, refuse_input_as_output, refuse_overwrite


def cmd_view(args) -> int:
    from lobreplay.reports.viewer import build_view

    from lobreplay.reports.viewer import REPORT_FILES
    refuse_input_as_output(args.output, [os.path.join(args.report_dir, n) for n in REPORT_FILES])
    refuse_overwrite(args.output, args.force)
    if os.path.isdir(args.output):
        raise InputError(f"{args.output} is a directory; give the path of the HTML file to write")
    if args.max_frames < 1:
        raise InputError(f"--max-frames must be at least 1 (got {args.max_frames})")
    s = build_view(args.report_dir, args.output, symbol=args.symbol, max_frames=args.max_frames)
    print(f"{s['path']}: {s['symbol']}, {s['frames']:,} frames from {s['source']}.parquet "
          f"({s['frames_available']:,} rows, {s['frames_dropped']:,} dropped; {s['levels']} level(s)), "
          f"{s['tape_rows']:,} of {s['tape_rows_available']:,} feed executions on the tape, "
          f"{s['latency_rows']} latency rows; {s['bytes']:,} bytes")
    for n in s["notes"]:
        if n.startswith(("No depth.parquet", "This replay did not finish")):
            print(f"note: {n}")
    return 0


def add_commands(subparsers) -> None:
    """Add `view` to an argparse subparsers object."""
    v = subparsers.add_parser("view", help="one static HTML page animating a symbol's book, tape and latency")
    v.add_argument("report_dir", metavar="REPORT_DIR", help="the output directory of `lobreplay itch replay` or `lobreplay replay FILE.lobc`")
    v.add_argument("-o", "--output", required=True, help="the HTML file to write, e.g. book.html")
    v.add_argument("--symbol", help="the symbol to show (default: the most active, by messages)")
    v.add_argument("--max-frames", type=int, default=2000, metavar="N",
                   help="at most N frames, taken evenly from the symbol's samples (default 2000)")
    v.add_argument("--force", action="store_true", help="overwrite the output file if it exists")
    v.set_defaults(func=cmd_view)
