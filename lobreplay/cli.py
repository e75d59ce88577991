"""The lobreplay command line: `lobreplay VERB ...` (see README)."""
from __future__ import annotations

import argparse
import sys
import time

from . import __version__
from .errors import LobError


def _cmd_demo(args) -> int:
    import numpy as np

    from . import _coreapi as core
    from .events import BBO_DTYPE, RESULT_DTYPE, Kind, Status
    from .synth import generate_flow

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
    clk = core.clock_probe(200_000)
    print(f"latency per event inside the core (CLOCK_MONOTONIC: {clk['cost_ns']:.1f} ns per reading, "
          f"smallest step {clk['min_step_ns']} ns, OS resolution {clk['os_resolution_ns']} ns; "
          "each figure includes about one reading):")
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
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except LobError as e:
        print(f"lobreplay: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lobreplay: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `lobreplay ... | head`
        sys.stderr.close()
        return 141
