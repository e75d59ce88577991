"""The lobreplay command line: `lobreplay VERB ...` (see README)."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from lobreplay import __version__
from lobreplay.errors import InputError, LobError, Terminated


def _cmd_demo(args) -> int:
    import numpy as np

    from lobreplay.core import _coreapi as core
    from lobreplay.core.events import BBO_DTYPE, RESULT_DTYPE, Kind, Status
    from lobreplay.testing.synth import generate_flow

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


def _cmd_cache(args) -> int:
    from lobreplay.replay import cache
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
    from lobreplay.cli import binance, itch, lobc, lobster, view
    itch.add_commands(sub)

    ca = sub.add_parser("cache", help="the sizing cache: what pass 1 found in files already replayed")
    ca.add_argument("action", nargs="?", choices=("info", "list", "clear"), default="info",
                    help="info (default): where it is and how big; list: each entry's file (the most recently "
                         "used first), and whether that file is gone or changed since; clear: remove every entry")
    ca.set_defaults(func=_cmd_cache)

    for venue in (lobc, binance, lobster, view):
        venue.add_commands(sub)
    return p


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
