"""`lobreplay capture binance ...`: add_commands(subparsers) adds the `capture` verb.

Wire it in lobreplay/cli/main.py with `binance_cli.add_commands(sub)` where `sub` is the
top-level subparsers object; the handler is set with set_defaults(func=...) and returns
the exit status.
"""
from __future__ import annotations

import argparse
import json
import os
import time


def _cmd_capture_binance(args) -> int:
    from lobreplay.errors import InputError, refuse_input_as_output, refuse_overwrite
    if args.selftest:
        from lobreplay.binance.capture import selftest
        return selftest()
    if args.from_jsonl:
        from lobreplay.binance.convert import convert
        if not args.out:
            raise InputError("capture binance --from-jsonl: -o OUT.lobc is required")
        refuse_input_as_output(args.out, args.from_jsonl)
        refuse_overwrite(args.out, args.force)
        st = convert(args.from_jsonl, args.out, market=args.market_given,
                     symbols=[s.upper() for s in args.symbol] or None, allow_truncated=args.allow_truncated)
        print(f"{', '.join(args.from_jsonl)} -> {args.out}: {st['format']}, {st['market']}, "
              f"{st['lines']:,} lines, {st['records']:,} records, {st['bytes']:,} bytes in {st['seconds']:.2f} s "
              f"({st['level_updates_per_s'] / 1e6:.2f} M level updates/s)")
        for sym, s in st["per_symbol"].items():
            print(f"  {sym}: {s['depth']:,} depth events, {s['applied']:,} applied, "
                  f"{'synced' if s['synced'] else 'NEVER SYNCED'} ({s['synced']} time(s)), gaps {s['gaps']}, "
                  f"dropped before sync {s['dropped_covered']}")
        if st["malformed"]:
            by = ", ".join(f"{k} {v:,}" for k, v in sorted(st.get("malformed_by_stream", {}).items()))
            print(f"  malformed messages: {st['malformed']}" + (f" ({by})" if by else ""))
        for t in st["truncated"]:
            print(f"  truncated: {t['file']} breaks off after {t['text_bytes']:,} bytes of text ({t['reason']}); "
                  f"converted up to there, {t['dropped_bytes']:,} bytes of a partial line dropped")
        return 0 if all(s["synced"] for s in st["per_symbol"].values()) else 3
    if not args.symbol:
        raise InputError("capture binance: at least one --symbol")
    if not args.out:
        raise InputError("capture binance: -o OUT.lobc is required")
    from lobreplay.binance.capture import CaptureOptions, existing_outputs, run_capture
    opts = CaptureOptions(symbols=args.symbol, out=args.out, market=args.market_given or "spot",
                          seconds=args.seconds, depth_speed=args.depth_speed or
                          ("100ms" if (args.market_given or "spot") == "spot" else "100ms"),
                          trades=args.trades, book_ticker=args.book_ticker, snapshot_limit=args.snapshot_limit,
                          raw=args.raw, ws_url=args.ws_url, rest_url=args.rest_url,
                          progress=False if args.no_progress else None)
    if args.max_connection_age is not None:
        opts.max_connection_age = args.max_connection_age
    if args.rotate:
        opts.rotate = _rotate_seconds(args.rotate)
    try:
        opts.validate()
    except ValueError as e:
        raise InputError(f"capture binance: {e}") from None
    refuse_input_as_output([p for p in (args.out, args.raw, args.stats_json) if p], ())
    refuse_overwrite(existing_outputs(opts, time.time_ns()), args.force)
    if args.stats_json:  # (found out now, not after an hour of capture)
        _check_writable(args.stats_json, "--stats-json")
    try:
        st = run_capture(opts)
    except OSError as e:
        raise InputError(f"capture binance: {e}") from None
    if args.stats_json:
        with open(args.stats_json, "w") as f:
            json.dump(st, f, indent=1, default=str)
    print(f"{st['out']}: {st['messages_received']:,} messages received, {st['records']:,} records, "
          f"{st['bytes']:,} bytes written; connections {st['connects']}, disconnects {st['disconnects']}, "
          f"gaps {st['gaps']}, resyncs {st['resyncs']}")
    last = st["notes"][-1] if st["notes"] else "no error recorded"
    if not st["connects"]:  # (the file is whole: its header and whatever GAP records there are)
        raise InputError(f"capture binance: never connected to {opts.ws_url or 'Binance'} "
                         f"({last}); {st['out']} holds no market data")
    never = [sym for sym, s in st["per_symbol"].items() if not s["synced"]]
    for sym in never:
        s = st["per_symbol"][sym]
        print(f"  {sym}: NEVER SYNCED ({s['depth']:,} depth events, {s['snapshots']} snapshot(s) received, "
              f"{s['snapshots_stale']} stale; last error: {last}): no book for it in the file")
    return 3 if never else 0


def _check_writable(path: str, what: str) -> None:
    from lobreplay.errors import InputError
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(f"capture binance {what}: {path} is a directory")
    if not os.path.isdir(d):
        raise InputError(f"capture binance {what}: no directory {d}")
    if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(f"capture binance {what}: {path} is not writable")


def _rotate_seconds(text: str) -> float:
    from lobreplay.errors import InputError
    named = {"day": 86400.0, "hour": 3600.0}
    try:
        return named[text] if text in named else float(text)
    except ValueError:
        raise InputError(f"capture binance --rotate: day, hour or a number of seconds, not {text!r}") from None


def add_commands(subparsers) -> argparse.ArgumentParser:
    """Add `capture binance ...` to the top-level subparsers; returns the `capture` parser."""
    cap = subparsers.add_parser("capture", help="capture a live market-data feed to .lobc")
    sub = cap.add_subparsers(dest="capture_venue", metavar="VENUE")
    b = sub.add_parser("binance", help="Binance spot / USD-M depth (+ trades, bookTicker) to .lobc",
                       description="Capture Binance diff-depth streams to a .lobc file, syncing each symbol's "
                                   "book with a REST snapshot as Binance documents; gaps, disconnects, the "
                                   "24-hour cut and serverShutdown are written as GAP records and resynced. "
                                   "See docs/binance.md.")
    b.add_argument("--symbol", action="append", default=[], metavar="SYM",
                   help="a symbol, e.g. btcusdt (repeat for several)")
    b.add_argument("--market", dest="market_given", choices=["spot", "usdm"], default=None,
                   help="spot (default) or usdm (USD-M futures)")
    b.add_argument("--seconds", type=float, default=60.0, help="how long to capture (default 60)")
    b.add_argument("-o", "--out", help="the .lobc file to write")
    b.add_argument("--depth-speed", default=None,
                   help="spot: 100ms (default) or 1000ms; usdm: 0ms, 100ms (default), 250ms or 500ms")
    b.add_argument("--trades", action="store_true", help="also capture <sym>@trade")
    b.add_argument("--book-ticker", action="store_true", help="also capture <sym>@bookTicker")
    b.add_argument("--snapshot-limit", type=int, default=1000,
                   help="REST snapshot depth (spot 1..5000, usdm 5..1000; default 1000)")
    b.add_argument("--raw", metavar="FILE.jsonl", help="also write every message as `<recv ns> <message>` lines")
    b.add_argument("--ws-url", help="websocket base URL (default the market's Binance URL)")
    b.add_argument("--rest-url", help="REST base URL (default the market's Binance URL)")
    b.add_argument("--max-connection-age", type=float, default=None, metavar="S",
                   help="reconnect after S seconds (default 86100: before Binance's 24-hour cut)")
    b.add_argument("--rotate", metavar="day|hour|S",
                   help="a new file at every UTC midnight (day), hour, or multiple of S seconds, named after "
                        "its start (OUT.20261130.lobc); each file replays on its own")
    b.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    b.add_argument("--stats-json", metavar="FILE", help="write the final counters as JSON")
    b.add_argument("--force", action="store_true",
                   help="overwrite the output files (-o, --raw; with --rotate, those of this and later periods)")
    b.add_argument("--selftest", action="store_true",
                   help="offline end-to-end check against a local fake Binance, then exit")
    b.add_argument("--from-jsonl", nargs="+", metavar="FILE",
                   help="convert recorded files instead (hftbacktest lines, our --raw, cryptofeed logs)")
    b.add_argument("--allow-truncated", action="store_true",
                   help="with --from-jsonl: a gzip file that breaks off (e.g. the --raw file of a killed capture) "
                        "converts up to its last whole line, reported")
    b.set_defaults(func=_cmd_capture_binance)
    return cap

