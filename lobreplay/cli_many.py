"""`lobreplay itch replay-many` and `lobreplay lobc replay-many`: many files on
dask.distributed into one hive-partitioned dataset (lobreplay.many, docs/cluster.md)."""
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
    from .errors import refuse_input_as_output
    from .many import parse_dates, print_report, run_many

    refuse_input_as_output(args.output, args.files)
    report = run_many(fmt, args.files, args.output, cfg, scheduler=args.scheduler, workers=args.workers,
                      memory_limit=args.memory_limit, dates=parse_dates(args.dates))
    print_report(report)
    return 1 if report["failed"] else 0


def _cmd_itch(args) -> int:
    from .cli import itch_replay_config
    return _run("itch", args, itch_replay_config(args))


def _cmd_lobc(args) -> int:
    from .cli_lobc import lobc_replay_config
    return _run("lobc", args, lobc_replay_config(args))


def add_itch_replay_many(itch_subparsers) -> None:
    from .cli import add_itch_replay_options
    p = itch_subparsers.add_parser("replay-many", help="replay many ITCH days on dask.distributed into one dataset")
    _cluster_options(p, "day")
    add_itch_replay_options(p)
    p.set_defaults(func=_cmd_itch, stop_note="the days published so far are whole")


def add_lobc_replay_many(lobc_subparsers) -> None:
    from .cli_lobc import replay_options
    p = lobc_subparsers.add_parser("replay-many",
                                   help="replay many .lobc captures on dask.distributed into one dataset")
    _cluster_options(p, "capture")
    replay_options(p)
    p.set_defaults(func=_cmd_lobc, stop_note="the days published so far are whole")
