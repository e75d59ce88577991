"""What `lobreplay itch stats` and `lobreplay itch decode` do, as library functions (the
command line prints what they return).

    import lobreplay as lr
    s = lr.itch_stats("day.itch.gz")          # ItchStats: messages by type, time span, symbols, ...
    lr.decode_itch("day.itch.gz", "decoded/", types="AFE")   # one Parquet table per type
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from lobreplay import __version__
from lobreplay.errors import InputError

__all__ = ["ItchStats", "itch_stats", "decode_itch", "parse_types"]


@dataclass
class ItchStats:
    """What one read of an ITCH file found (itch_stats)."""
    path: str
    messages: int
    bytes: int                       # message bytes (inflated, for gzip)
    size: int                        # the file's bytes on disk
    compressed: bool
    framing: str
    first_ns: int | None             # the first and last message's time (ns since midnight, exchange time)
    last_ns: int | None
    symbols: int                     # in the stock directory (R)
    locates: int                     # stock locates seen (0, the system-wide messages, aside)
    by_type: dict = field(default_factory=dict)   # type -> messages
    end_marker: bool = False         # a zero-length frame ended the session
    non_ascii: int = 0               # text bytes outside ASCII met
    seconds: float = 0.0
    read: object = None              # the reader's ReadStats (truncation, MoldUDP64 figures)

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("path", "messages", "bytes", "size", "compressed", "framing",
                                            "first_ns", "last_ns", "symbols", "locates", "by_type", "end_marker",
                                            "non_ascii", "seconds")}
        out["truncated"] = self.read.truncation() if self.read is not None else None
        out["moldudp64"] = self.read.moldudp64() if self.read is not None else None
        return out


def itch_stats(path, *, allow_truncated: bool = False) -> ItchStats:
    """Read an ITCH 5.0 file once: its messages by type, time span, symbols in the directory
    and stock locates seen (a pcap's sequence anomalies are counted, never refused).

        s = lobreplay.itch_stats("12302019.NASDAQ_ITCH50.gz")
        s.messages, s.by_type["A"]
    """
    from lobreplay.itch.decode import as_text, decode_type, non_ascii_bytes, timestamps
    from lobreplay.itch.reader import ItchFile

    t0 = time.perf_counter()
    ascii0 = non_ascii_bytes()
    f = ItchFile(os.fspath(path), allow_truncated=allow_truncated, allow_gaps=True)  # (it reports them)
    first = last = None
    symbols: set[str] = set()
    locates: set[int] = set()
    for chunk in f.chunks():
        ts = timestamps(chunk, np.array([0, chunk.n - 1]))
        first = int(ts[0]) if first is None else first
        last = int(ts[1])
        if chunk.has("R"):
            symbols.update(as_text(decode_type(chunk, "R")["stock"]).tolist())
        loc = ((chunk.buf[chunk.offsets.astype(np.int64) + 1].astype(np.int64) << 8)
               | chunk.buf[chunk.offsets.astype(np.int64) + 2])
        locates.update(np.unique(loc).tolist())
    st = f.stats
    return ItchStats(path=f.path, messages=st.messages, bytes=st.bytes, size=f.size, compressed=f.compressed,
                     framing=f.framing, first_ns=first, last_ns=last, symbols=len(symbols),
                     locates=len(locates - {0}), by_type=dict(st.by_type), end_marker=st.end_marker,
                     non_ascii=non_ascii_bytes() - ascii0, seconds=time.perf_counter() - t0, read=st)


def parse_types(types, what: str = "types") -> str | None:
    """Message types as "AFE", "A,F,E" or a list (None: all); an unknown one is an InputError."""
    from lobreplay.itch.spec import LAYOUTS
    if types is None:
        return None
    items = [t.strip() for t in types.split(",")] if isinstance(types, str) and "," in types else list(types)
    items = [t for t in items if t]
    bad = [t for t in items if t not in LAYOUTS]
    if bad or not items:
        raise InputError(f"{what}: unknown message type(s) {', '.join(bad) or repr(types)}; "
                         f"ITCH 5.0 types are {''.join(sorted(LAYOUTS))}")
    return "".join(items)


def decode_itch(path, out_dir, types=None, *, force: bool = False, allow_truncated: bool = False,
                allow_gaps: bool = False) -> dict:
    """Decode an ITCH file's messages into out_dir, one Parquet table per message type
    (`A_add_order.parquet`, ...; types: "AFE", "A,F,E" or a list; None: every type), with
    summary.json, as `lobreplay itch decode` does. The input is opened first: one that cannot be
    read leaves out_dir as it was. Returns the summary (report_rows: each table's rows).

        lobreplay.decode_itch("day.itch.gz", "decoded/", types="AF")
    """
    from lobreplay.itch.decode import decode, non_ascii_bytes, to_arrow
    from lobreplay.itch.reader import ItchFile
    from lobreplay.itch.spec import LAYOUTS, price_metadata
    from lobreplay.replay.outdir import prepare_output
    from lobreplay.reports.tables import ReplayRun, ReportSet

    want = parse_types(types)
    f = ItchFile(os.fspath(path), allow_truncated=allow_truncated,  # (before the output: a file that
                 allow_gaps=allow_gaps)                            # cannot be opened leaves it as it was)
    out_dir = os.fspath(out_dir)
    prepare_output(out_dir, force, inputs=[f.path])
    meta = {"source_file": os.path.basename(f.path), "source_size": str(f.size),
            "lobreplay_version": __version__}  # (each table says its own prices' scale: spec.price_metadata)
    done = [0]  # messages decoded (whole chunks: every table holds their rows, none past them)

    def where() -> dict:
        return {"messages_done": done[0], "file_bytes_read": f.raw_position, "file_bytes": f.size}

    ascii0 = non_ascii_bytes()
    try:
        # like a replay's: the tables written so far are closed whole however it ends, and
        # summary.json says ok, or failed with the error and where it stopped
        with ReplayRun(out_dir, meta, where=where) as run:
            rs = run.reports = ReportSet(out_dir, [], meta)
            for chunk in f.chunks():
                for t, cols in decode(chunk, want).items():  # (one pass over the chunk)
                    rs.write_table(f"{t}_{LAYOUTS[t].name}", to_arrow(cols, t), price_metadata(t))
                done[0] = chunk.first_message + chunk.n
            st = f.stats
            run.summary.update({
                "types": list(want) if want else None, "messages": st.messages,
                "messages_by_type": dict(sorted(st.by_type.items())),
                "unknown_types": st.unknown_types(), "bytes": st.bytes, "end_of_session_marker": st.end_marker,
                "truncated": st.truncation(), "moldudp64": st.moldudp64(),
                "text_bytes_outside_ascii": non_ascii_bytes() - ascii0})
    except KeyboardInterrupt as e:  # (Ctrl-C, and SIGTERM)
        w = where()
        e.add_note(f"{f.path}: after {w['messages_done']:,} messages decoded "
                   f"({w['file_bytes_read']:,} of {w['file_bytes']:,} bytes read; summary.json says failed)")
        raise
    return run.summary
