"""`lobreplay itch replay-many` and `lobreplay lobc replay-many`: many files on
dask.distributed into one hive-partitioned dataset (lobreplay.replay.many, docs/cluster.md)."""
from __future__ import annotations


def _cluster_options(p, unit: str) -> None:
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="DATASET",
                   help="dataset directory: one Parquet dataset per report, partitioned by date and symbol")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a running dask scheduler (tcp://host:8786); default: start a local cluster")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes of the local cluster, one thread each (default: one per CPU)")
    p.add_argument("--memory-limit", default="auto", metavar="BYTES",
                   help="memory limit per local worker, e.g. 4GB (default auto: the machine's memory / N)")
    p.add_argument("--date", action="append", dest="dates", metavar="FILE=YYYY-MM-DD",
                   help=f"the date of a {unit} whose name has none (repeatable)")


def _run(fmt: str, args, cfg) -> int:
    from lobreplay.errors import refuse_input_as_output
    from lobreplay.replay.many import parse_dates, print_report, run_many

    refuse_input_as_output(args.output, args.files)
    report = run_many(fmt, args.files, args.output, cfg, scheduler=args.scheduler, workers=args.workers,
                      memory_limit=args.memory_limit, dates=parse_dates(args.dates))
    print_report(report)
    return 1 if report["failed"] else 0


def add_replay_many(subparsers, fmt: str, unit: str, help_text: str, add_options, make_config) -> None:
    """The `replay-many` verb of a venue: `fmt` names its replay (lobreplay.replay.many), `add_options`
    adds the replay options it shares with the venue's `replay`, `make_config(args)` reads them."""
    p = subparsers.add_parser("replay-many", help=help_text)
    _cluster_options(p, unit)
    add_options(p)
    p.set_defaults(func=lambda args: _run(fmt, args, make_config(args)),
                   stop_note="the days published so far are whole")
