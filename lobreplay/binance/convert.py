"""Stage 3 of the conversion: decoded batches -> .lobc records, through the same sync machine as the
live capture. convert() puts the stages together: detect (what each file is), scan (its lines,
decoded), then every line through the machine in order, its records into the .lobc writer.

Several files are read as one continuous recording (e.g. hftbacktest day files in order)."""
from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np

from lobreplay.binance.detect import cryptofeed_pair, detect_format, raw_header
from lobreplay.binance.scan import Seen, cryptofeed_items, decode_depth, decoded, iter_chunks, iter_lines, scan, span
from lobreplay.binance.sync import SPOT, USDM, DepthSync, open_writer
from lobreplay.errors import InputError
from lobreplay.l2 import lobc


def convert(src, dst, *, market: str | None = None, symbols=None, price_scale: int = lobc.DEFAULT_SCALE,
            qty_scale: int = lobc.DEFAULT_SCALE, c_decoder: bool = True, allow_truncated: bool = False,
            _whole_scan: bool = False, _since: tuple | None = None) -> dict:
    """Convert one recording (or several, read as one continuous recording) to a .lobc file.
    c_decoder=False decodes every message in Python (the same output, slower: the reference
    the C decoder of depth messages is tested against). allow_truncated: a gzip file that
    breaks off (a capture's --raw .gz of a killed process) converts up to its last whole line
    before the break, and stats["truncated"] says where, per file (hftbacktest and --raw
    files; otherwise such a file is an InputError).

    Returns stats: messages, records by kind, gaps, resyncs, per-symbol sync results
    (`synced` > 0 means the book was synced at least once), levels and the speed."""
    market_arg, symbols_arg = market, symbols
    paths = [Path(src)] if isinstance(src, (str, os.PathLike)) else [Path(p) for p in src]
    if not paths:
        raise InputError("convert: no input file")
    for p in paths:
        if not p.is_file():
            raise InputError(f"{p}: {'a directory, not a file' if p.is_dir() else 'no such file'}")
    # the whole conversion, format detection included (_since: of the first try, when the
    # text after a partial scan named more than the scan had seen and this converts again)
    t0, cpu0 = _since or (time.perf_counter(), time.process_time())
    fmts = {detect_format(p) for p in paths}
    if len(fmts) > 1 and not fmts <= {"hftbacktest", "raw"}:
        raise InputError(f"convert: mixed formats {sorted(fmts)}")
    fmt = fmts.pop() if len(fmts) == 1 else "hftbacktest"
    streams = []
    breaks = [] if allow_truncated else None
    rest = None  # after a partial scan: the scan of the whole text, as the conversion pass reads it
    if fmt.startswith("cryptofeed"):
        if len(paths) != 1:
            raise InputError("convert: one cryptofeed log at a time (its .ws and .http files are paired)")
        ws, http = cryptofeed_pair(paths[0])
        if ws is None:
            raise InputError(f"{paths[0]}: no matching .ws file beside it")
        url, items = cryptofeed_items(ws, http, breaks)
        if url:
            q = url.split("streams=", 1)[1] if "streams=" in url else url.rsplit("/", 1)[-1]
            streams = [s for s in q.split("/") if s]
        if market is None:
            host = url or ""
            market = USDM if "fstream" in host or "fapi" in host else SPOT
            if http is not None and "fapi." in http.read_text(errors="replace")[:300]:
                market = USDM
        if symbols is None:
            symbols = sorted({s.split("@", 1)[0].upper() for s in streams}
                             | {s for _, k, s, _ in items if k == "snapshot"})
    else:
        header = None
        kept = {}  # the text the scan read, if small: path -> chunks
        if fmt == "raw":  # (every file is one of our --raw files)
            headers = [raw_header(p) for p in paths]
            header = headers[0]
            for p, h in zip(paths, headers):  # every part from the same market (the records would be misread)
                if market is not None and h.get("market") not in (None, market):
                    raise InputError(f"{p}: a {h['market']} capture (its header says so), not {market}")
                market = market or h.get("market")
            symbols = symbols or header.get("symbols")
            streams = header.get("streams", [])
        if symbols is None or market is None or not streams:
            seen = scan(paths, kept if c_decoder else None, breaks, partial=c_decoder and not _whole_scan)
            if seen.partial and (not seen.symbols or seen.market is None):  # (nothing to go on yet)
                seen = scan(paths, None, breaks)
            taken = (not streams, symbols is None, market is None)  # what comes from the scan
            streams = streams or sorted(seen.streams)
            symbols = symbols or sorted(seen.symbols)
            market = market or seen.market
            if seen.partial:  # the conversion pass sees the rest: the same scan, to compare at the end
                rest = Seen()
                agrees = lambda: ((not taken[0] or sorted(rest.streams) == streams)  # noqa: E731
                                  and (not taken[1] or sorted(rest.symbols) == symbols)
                                  and (not taken[2] or rest.market == market))
    if not symbols:
        raise InputError(f"{paths[0]}: no symbol found; pass symbols=")
    if market not in (SPOT, USDM):
        raise InputError(f"{paths[0]}: market not found (no depth event or snapshot); pass market='spot'|'usdm'")
    machine = DepthSync(market, symbols, price_scale=price_scale, qty_scale=qty_scale, c_decoder=c_decoder)
    digits = dict(usdm=market == USDM, price_digits=machine.levels.dp, qty_digits=machine.levels.dq)
    source = ",".join(str(p) for p in paths)
    lines_n = 0
    was_enabled = gc.isenabled()
    gc.disable()  # the parse makes many short-lived containers and no cycles
    # written beside dst and renamed at the end: a conversion that fails or is stopped part way
    # (a full disk, Ctrl-C, a file that turns corrupt) leaves no .lobc that `lobc check` calls
    # whole yet holds only part of the recording, and an earlier dst stays as it was
    tmp = f"{os.fspath(dst)}.tmp"
    try:
        with open_writer(tmp, market=market, symbols=machine.symbols, price_scale=price_scale,
                         qty_scale=qty_scale, streams=streams, source=source, flush_records=1 << 16,
                         flush_seconds=3600) as w:
            if fmt.startswith("cryptofeed"):
                # the websocket messages' depthUpdates decoded in C, all in one call
                depth = decode_depth("\n".join(t for _, k, _, t in items if k == "ws").encode(), bare=True,
                                     **digits) if c_decoder else {}
                ws = -1
                for recv, kind, sym, text in items:
                    lines_n += 1
                    if kind == "snapshot":
                        machine.feed_snapshot(sym, text, recv)
                    else:
                        ws += 1
                        dd = depth.get(ws) if depth else None
                        if dd is not None:
                            _feed_decoded(machine, dd, recv)
                        else:
                            machine.feed(text, recv)
                    machine.after_recorded(recv, raw=False)
                w.add_many(machine.take_records())
            else:
                for p in paths:
                    raw_fmt = detect_format(p) == "raw"
                    if c_decoder:
                        for blob, dec in decoded(kept.pop(p, None) or iter_chunks(p, breaks), seen=rest, **digits):
                            recs, n = _feed_blob(machine, blob, dec, raw_fmt)
                            lines_n += n
                            w.add_many(recs)
                    else:
                        for lines in iter_lines(p, breaks):
                            lines_n += len(lines)
                            w.add_many(_feed_lines(machine, lines, raw_fmt))
            w.add_many(machine.take_records())
            w.flush()
            out_records, out_bytes = w.records, w.bytes
        again = rest is not None and not agrees()
        if again:  # the rest of the text named a stream, symbol or market the partial scan had not seen
            os.unlink(tmp)
        else:
            os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        if was_enabled:
            gc.enable()
    if again:
        return convert(paths, dst, market=market_arg, symbols=symbols_arg, price_scale=price_scale,
                       qty_scale=qty_scale, c_decoder=c_decoder, allow_truncated=allow_truncated, _whole_scan=True,
                       _since=(t0, cpu0))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    st = dict(machine.stats)
    levels = st["diff_levels"] + st["snapshot_levels"]
    st.update(format=fmt, market=market, symbols=machine.symbols, lines=lines_n, records=out_records, bytes=out_bytes,
              truncated=breaks or [],
              seconds=wall, cpu_seconds=cpu, level_updates=levels,
              level_updates_per_s=levels / wall if wall > 0 else 0.0,
              per_symbol=machine.symbol_stats(), dst=str(dst))
    return st


def _feed_decoded(machine: DepthSync, dd: tuple, recv_ns) -> None:
    recv, U, u, pu, E, bids, asks, stream, sym = dd
    machine.feed_depth(stream, sym, U, u, pu, E, recv if recv_ns is None else recv_ns, bids, asks)


def _symbols_of_names(machine: DepthSync, blob: bytes, dec: np.ndarray, names: np.ndarray) -> np.ndarray:
    """The symbol index (-1: unknown) of each (stream, s) name of bn_decode, as machine.feed
    would find it (int32)."""
    return np.array([machine.symbol_index(span(blob, int(ln["sym_start"]), int(ln["sym_len"])),
                                          span(blob, int(ln["stream_start"]), int(ln["stream_len"])))
                     for ln in dec[names.tolist()]], np.int32)


def _feed_blob(machine: DepthSync, blob: bytes, decoded: tuple, raw_fmt: bool) -> tuple[np.ndarray, int]:
    """One chunk of whole `<recv ns> <message>` lines (the last may lack its newline), in order;
    returns (the records taken from the machine after it, the number of lines). decoded:
    bn_decode(blob, names=True), the chunk decoded in C in one call (scan.decoded). The machine
    (in C) takes the decoded lines in one call, up to the first line the decoder left to
    Python; that one is read in Python (machine.feed_recorded), and the machine goes on after it."""
    dec, levels, names = decoded
    nl = len(dec)
    name_sym = _symbols_of_names(machine, blob, dec, names)
    pos = 0
    while (pos := machine.feed_lines(dec, levels, pos, name_sym)) < nl:
        a = int(dec["start"][pos])
        machine.feed_recorded(blob[a:a + int(dec["len"][pos]) + 1], raw_fmt)
        pos += 1
    machine.events = []  # (what happened in the batch: nothing for a conversion to react to)
    return machine.take_records(), nl


def _feed_lines(machine: DepthSync, lines, raw_fmt: bool) -> np.ndarray:
    """One chunk of `<recv ns> <message>` lines (readlines), in order, all read in Python
    (machine.feed_recorded: the path the C decoder is tested against, c_decoder=False); returns the records taken from the machine after it."""
    for line in lines:
        machine.feed_recorded(line, raw_fmt)
    return machine.take_records()
